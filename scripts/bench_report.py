#!/usr/bin/env python3
"""The benchmark report, in two steps (scripts/bench.sh runs both):

  collect --raw DIR --build BUILD --out RESULTS.json [--mode quick|full]
      Reads what scripts/bench.sh left in DIR (each program's JSON lines,
      stderr, exit code, times, /proc/stat before and after) and writes one
      results file: every figure with its parameters, the machine (CPU model,
      cores, load), the versions (jag, compiler, OpenBLAS, OpenMP, Python,
      matplotlib, torch) and how the run went.

  render RESULTS.json [--report bench/report.md] [--plots-skipped REASON]
      Writes bench/report.md and its PNG plots beside it from that file alone:
      every figure beside the target the issues set for it, met or not.
      Plots need matplotlib (Agg backend, no display); without it the report
      is still written and says why the plots are missing.

Only the standard library is needed, except matplotlib for the plots.
"""
import argparse
import collections
import datetime
import glob
import json
import math
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---- targets (from the issues) -------------------------------------------
MEMCPY_TARGET = 0.85      # memory-bound pointwise op / memcpy, bytes per second
BLAS_TARGET = 0.95        # jag_mm / direct cblas_sgemm, for n >= BLAS_MIN_N
BLAS_MIN_N = 256
BF16_TARGET = 1.5         # bfloat16 jag_mm GFLOP/s / float32 jag_mm GFLOP/s, square n = BF16_SQUARE_N
BF16_SQUARE_N = 1024
DISPATCH_TARGET_NS = 200  # nested dispatch overhead per op, C (the performance issue; was 300)
PY_TARGET_NS = 2000       # one op called from Python on a tiny nested tensor
PY_ADDS_TARGET_NS = 400   # what Python adds to the same op called from C
B1_TARGET_NS = 50         # a nested batch of one over the same dense op
NESTED_SLACK = 1.1        # nested <= padded * real/padded * 1.1, and <= padded
MEMORY_BOUND = ("clone", "relu", "mul_scalar", "add", "mul")
# The length distributions the issue asks for (names normalised: lower case,
# no '-', '_' or spaces); a "lengths" value outside these is shown as well.
WANTED_LENGTHS = [("uniform", ("uniform",)),
                  ("long-tailed", ("longtailed", "longtail", "zipf", "lognormal", "pareto")),
                  ("all equal", ("allequal", "equal", "constant", "fixed")),
                  ("corpus (fortunes)", ("corpus", "fortunes", "real"))]
PLOTS = {"nested": "nested_speedup.png", "memory": "memory_bandwidth.png",
         "gemm": "gemm_gflops.png", "dispatch": "dispatch_overhead.png", "torch": "vs_torch.png"}


# ---- collect --------------------------------------------------------------

def run_text(cmd, env=None, strip=True):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, timeout=30)
        if out.returncode != 0:
            return ""
        return out.stdout.strip() if strip else out.stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def dpkg_version(pkg):
    v = run_text(["dpkg-query", "-W", "-f=${Version}", pkg])
    return v or None


def cmake_cache(build):
    cache = {}
    for line in read(os.path.join(build, "CMakeCache.txt")).splitlines():
        m = re.match(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", line)
        if m:
            cache[m.group(1)] = m.group(2)
    return cache


def stat_busy(line):
    """(busy, total) jiffies from the first line of /proc/stat."""
    parts = line.split()
    if len(parts) < 8 or parts[0] != "cpu":
        return None
    v = [int(x) for x in parts[1:]]
    idle = v[3] + v[4]  # idle + iowait
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return busy, busy + idle


def busy_seconds(raw, name):
    a, b = stat_busy(read(os.path.join(raw, name + ".stat0"))), stat_busy(read(os.path.join(raw, name + ".stat1")))
    if not a or not b:
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return (b[0] - a[0]) / hz, (b[1] - a[1]) / hz


def machine_info():
    cpu = "unknown"
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = None
    m = re.search(r"MemTotal:\s+(\d+) kB", read("/proc/meminfo"))
    if m:
        mem = round(int(m.group(1)) / 1024 / 1024, 1)
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    llc = None  # the last-level cache, MiB
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        size = read(os.path.join(d, "size")).strip()
        level = read(os.path.join(d, "level")).strip()
        m = re.match(r"^(\d+)([KMG]?)$", size)
        if m and level.isdigit() and read(os.path.join(d, "type")).strip() != "Instruction":
            mib = int(m.group(1)) * {"K": 1 / 1024, "M": 1, "G": 1024, "": 1 / 2 ** 20}[m.group(2)]
            if llc is None or int(level) >= llc[0]:
                llc = (int(level), mib)
    return {"cpu": cpu, "cores": os.cpu_count(), "cores_usable": usable, "memory_gib": mem,
            "last_level_cache_mib": round(llc[1], 2) if llc else None,
            "os": platform.platform(), "host": platform.node()}


def module_version(name):
    try:
        mod = __import__(name)
        return getattr(mod, "__version__", "unknown")
    except Exception:  # noqa: BLE001 - any import failure means "not there"
        return None


def versions(cache):
    cc = cache.get("CMAKE_C_COMPILER", "cc")
    cc_version = run_text([cc, "--version"]).splitlines()
    blas_lib = cache.get("JAG_OPENBLAS_LIBRARY", "")
    blas_pkg = "libopenblas0-openmp" if "openmp" in blas_lib or not blas_lib else "libopenblas0"
    blas = dpkg_version(blas_pkg)
    return {
        "jag": cache.get("CMAKE_PROJECT_VERSION") or "unknown",
        "compiler": cc_version[0] if cc_version else cc,
        "openblas": ("OpenBLAS %s (%s)" % (blas, blas_pkg)) if blas else "unknown",
        "openblas_library": blas_lib or "unknown",
        "openmp": ("libgomp %s" % dpkg_version("libgomp1")) if dpkg_version("libgomp1") else "unknown",
        "python": platform.python_version(),
        "matplotlib": module_version("matplotlib"),
        "torch": module_version("torch"),
    }


def git_info(source):
    """The commit the benchmarked build was made from: its source tree's."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")  # read only: never touch the index
    commit = run_text(["git", "-C", source, "rev-parse", "HEAD"], env=env)
    if not commit:
        return {"commit": "unknown", "source": source, "uncommitted_changes": []}
    status = run_text(["git", "-C", source, "status", "--porcelain", "--untracked-files=no"], env=env, strip=False)
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    return {"commit": commit, "source": source, "uncommitted_changes": changed}


def collect(a):
    raw = a.raw
    cache = cmake_cache(a.build)
    programs, figures, problems = [], [], []
    for path_file in sorted(glob.glob(os.path.join(raw, "*.path"))):
        name = os.path.basename(path_file)[:-5]
        times = read(os.path.join(raw, name + ".time")).split()
        wall, user, sys_ = (float(x) for x in times[-3:]) if len(times) >= 3 else (None, None, None)
        rc = int(read(os.path.join(raw, name + ".rc"), "-1").strip() or -1)
        busy = busy_seconds(raw, name)
        other = None
        if busy and wall and user is not None:
            other = max(0.0, (busy[0] - user - sys_) / wall)
        err = read(os.path.join(raw, name + ".err")).strip()
        n_fig = 0
        for i, line in enumerate(read(os.path.join(raw, name + ".out")).splitlines()):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                fig = json.loads(line)
            except ValueError as e:
                problems.append("%s: line %d is not JSON (%s): %s" % (name, i + 1, e, line[:120]))
                continue
            fig = standard_figure(fig)
            fig["program"] = name
            figures.append(fig)
            n_fig += 1
        if rc != 0:
            last = err.splitlines()[-1][:200] if err else "no message"
            problems.append("%s exited with %d%s: %s" % (name, rc, " (time limit)" if rc == 124 else "", last))
        programs.append({"program": name, "exit": rc, "figures": n_fig, "wall_s": wall, "user_s": user,
                         "sys_s": sys_, "other_processes_cores": None if other is None else round(other, 2),
                         "stderr": err[-2000:]})
    idle = busy_seconds(raw, "idle")
    before = round(idle[0] / idle[1] * (os.cpu_count() or 1), 2) if idle and idle[1] else None
    threads = os.environ.get("OMP_NUM_THREADS")
    result = {
        "schema": 1,
        "mode": a.mode,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": dict(machine_info(), loadavg_at_start=read(os.path.join(raw, "loadavg")).split()[:3],
                        busy_cores_before_start=before),
        "versions": versions(cache),
        "build": {"dir": os.path.relpath(a.build, ROOT) if a.build.startswith(ROOT) else a.build,
                  "type": cache.get("CMAKE_BUILD_TYPE", "unknown"),
                  "c_flags": cache.get("CMAKE_C_FLAGS_RELEASE" if cache.get("CMAKE_BUILD_TYPE") == "Release"
                                       else "CMAKE_C_FLAGS", ""),
                  "march_native": cache.get("JAG_PORTABLE", "OFF") != "ON"},
        "git": git_info(cache.get("CMAKE_HOME_DIRECTORY") or ROOT),
        "threads": int(threads) if threads and threads.isdigit() else None,
        "method": ("bench/bench.h bench_pair: the two sides of a ratio timed interleaved in 5 rounds, each round "
                   "2 warm-up calls then repeats; a time is the median of the round medians, *_min/*_max the "
                   "range of the round medians; seconds per call unless the key says otherwise"),
        "programs": programs,
        "problems": problems,
        "figures": figures,
        # why the comparison with PyTorch (bench/bench_torch.py) did not run, if it did not
        "torch_note": a.torch_note or None,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)


# ---- render: helpers ------------------------------------------------------

def fmt(x, digits=2):
    if x is None:
        return "—"
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return "%.*f" % (digits, x)


def fmt_bytes(n):
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return "%g %s" % (n / size, unit)
    return "%d B" % n


def fmt_time(s):
    """Seconds in the unit that reads best."""
    if s is None:
        return "—"
    if s < 1e-6:
        return "%.0f ns" % (s * 1e9)
    if s < 1e-3:
        return "%.1f µs" % (s * 1e6)
    if s < 1:
        return "%.2f ms" % (s * 1e3)
    return "%.2f s" % s


def with_range(v, key, show=None):
    """v[key] formatted by `show`, with " [min – max]" when the figure
    carries key_min and key_max."""
    show = show or fmt_time
    text = show(v.get(key))
    if v.get(key + "_min") is not None and v.get(key + "_max") is not None:
        text += " [%s – %s]" % (show(v[key + "_min"]), show(v[key + "_max"]))
    return text


def b1_overheads(nvp):
    """op -> ns a nested batch of one costs over the same op on the dense
    (1, L, D) tensor (at B = 1 the padded batch has no padding): the fastest
    nested call minus the fastest padded call, on the smallest case of each
    op (the one where a fixed cost shows most)."""
    smallest = {}
    for f in nvp:
        p, v = f["params"], f["values"]
        if p.get("B") != 1 or "nested_s_min" not in v or "padded_s_min" not in v:
            continue
        size = p.get("real_rows", 0) * p.get("D", 0)
        op = p.get("op", "?")
        if op not in smallest or size < smallest[op][0]:
            smallest[op] = (size, (v["nested_s_min"] - v["padded_s_min"]) * 1e9)
    return {op: ns for op, (_, ns) in smallest.items()}


def b1_torch_cell(figures, torch):
    """torch.nested's cost over its dense op on a (1, j, 64) batch
    (bench_torch.py's nested_batch_of_one), or why there is none."""
    figs = sorted(by_name(figures, "nested_batch_of_one", "vs_torch"), key=lambda f: f["params"]["op"])
    if not figs:
        return torch.missing()
    cells = ["%s %s" % (f["params"]["op"], fmt_time(f["values"]["over_ns"] * 1e-9) if "over_ns" in f["values"]
                        else "refused (%s)" % f["values"].get("torch_nested_error", "?")) for f in figs]
    return "torch.nested over torch dense, (1, j, 64), j = 8: " + ", ".join(cells)


def verdict(ok):
    if ok is None:
        return "no data"
    return "met" if ok else "**not met**"


def norm(name):
    return re.sub(r"[-_ ]", "", str(name).lower())


def lengths_label(name):
    n = norm(name)
    for label, aliases in WANTED_LENGTHS:
        if n in aliases:
            return label
    return str(name)


def lengths_order(name):
    label = lengths_label(name)
    labels = [lab for lab, _ in WANTED_LENGTHS]
    return (labels.index(label) if label in labels else len(labels), str(name))


# the torch cell of the rows that time jag's C API
NO_C_API = "no counterpart: torch has no C API (libtorch is C++; %s)"


class Torch:
    """The torch column: a torch figure for the same name and params, if any,
    else why there is none."""

    def __init__(self, res):
        self.version = res["versions"].get("torch")
        self.figs = {}
        for f in res["figures"]:
            if f.get("bench") == "torch":
                self.figs[(f["name"], json.dumps(f.get("params", {}), sort_keys=True))] = f["values"]
                # bench_python may run under another interpreter (JAG_BENCH_PYTHON) than the collector
                self.version = self.version or f["values"].get("version")
        self.version = self.version or torch_version_of(res)

    def cell(self, fig, key, digits=2):
        v = self.of(fig)
        if v is not None and key in v:
            return fmt(v[key], digits)
        return self.missing()

    def missing(self):
        return "not installed" if self.version is None else "not measured (torch %s)" % self.version

    def of(self, fig):
        """torch's values for the figure's table row (same name and params), or None."""
        return self.figs.get((fig["name"], json.dumps(fig.get("params", {}), sort_keys=True)))

    def of_case(self, fig, keys):
        """torch's values for the figure's name with the same values of
        `keys` among the params (torch cannot know params such as where the
        values reside), or None."""
        want = {k: fig["params"].get(k) for k in keys}
        for (name, params), v in self.figs.items():
            p = json.loads(params)
            if name == fig["name"] and all(p.get(k) == want[k] for k in keys):
                return v
        return None

    def targets_cell(self, figs, describe):
        """The targets table's torch cell for a row of these jag figures:
        describe([(jag figure, torch values)]) over those torch measured,
        else why there are none."""
        pairs = [(f, self.of(f)) for f in figs if self.of(f)]
        return describe(pairs) if pairs else self.missing()


def attention_kind(f):
    return f["name"].replace("attention_", "").replace("attention", "forward")


def attention_mismatch(f, t):
    """Why a torch attention figure does not compare with jag's, or None:
    bench_torch.py draws the lengths with bench_lengths.h's generator, and
    the padding ratio (jag's, rounded to 3 decimals) tells a different
    batch."""
    jp, tp = f["values"].get("padded_over_real"), t.get("padded_over_real")
    if jp is None or tp is None or abs(jp - tp) > 0.001 * max(jp, tp) + 0.0005:
        return "%s %s: torch ran another batch (padding %s×, jag's %s×)" % (
            attention_kind(f), lengths_label(f["params"]["lengths"]), fmt(tp, 3), fmt(jp, 3))
    return None


def attention_vs_gemm_cell(pairs):
    """The attention rows' torch cell against the GEMM rate: torch's real
    FLOP rate over torch.mm's on 512 x 512 (timed interleaved with it), for
    its padded batch and torch.nested (or torch's error), and torch
    padded's time over jag nested's (the two ran minutes apart)."""
    cells = []
    for f, t in pairs:
        if attention_mismatch(f, t):
            cells.append(attention_mismatch(f, t))
            continue
        nested = ("torch.nested %s" % fmt(t["nested_ratio_vs_gemm"]) if "nested_ratio_vs_gemm" in t
                  else "torch.nested: %s" % t.get("nested_error", "not measured"))
        cells.append("%s: torch padded %s (%s; its time / jag nested's, minutes apart, %s), %s" % (
            lengths_label(f["params"]["lengths"]), fmt(t["padded_ratio_vs_gemm"]), fmt_time(t["padded_s"]),
            fmt(t["padded_s"] / f["values"]["nested_s"]), nested))
    return "; ".join(cells)


def attention_vs_padded_cell(pairs):
    """The attention-vs-padding row's torch cell: torch.nested's speedup
    over torch padded (or torch's error), and jag nested's over torch
    padded."""
    cells = []
    for f, t in pairs:
        if attention_mismatch(f, t):
            cells.append(attention_mismatch(f, t))
            continue
        nested = ("torch.nested %s× padded" % fmt(t["nested_speedup"], 2) if "nested_speedup" in t
                  else "torch.nested refused" if "nested_error" in t else "torch.nested not measured")
        cells.append("%s %s: %s, torch padded's time / jag nested's (minutes apart) %s" % (
            attention_kind(f), lengths_label(f["params"]["lengths"]), nested,
            fmt(t["padded_s"] / f["values"]["nested_s"], 2)))
    return "; ".join(cells)


def torch_nested_grid(figures):
    """The nested-vs-padded targets measured on torch: of the summary's
    float32 rows (bench_torch.py's nested_op), those where torch.nested
    meets padded x (real / padded) x NESTED_SLACK and those where it is not
    slower than torch padded, with the slowest; None without them."""
    rows = [f for f in figures if f.get("bench") == "vs_torch" and f["name"] == "nested_op"
            and f["values"].get("dtype", "float32") == "float32" and "torch_padded_s" in f["values"]]
    ran = [f for f in rows if "torch_nested_s" in f["values"]]
    if not ran:
        return None
    speed = [(f["values"]["torch_padded_s"] / f["values"]["torch_nested_s"],
              "%s, B=%s, D=%s" % (f["params"]["op"], f["params"]["B"], f["params"]["D"])) for f in ran]
    refused = len(rows) - len(ran)
    return {"n": len(ran), "worst": min(speed),
            "meets": sum(f["values"]["torch_nested_s"] <= f["values"]["torch_padded_s"] * f["params"]["real_over_padded"]
                         * NESTED_SLACK for f in ran),
            "never_slower": sum(sp >= 1 for sp, _ in speed),
            "refused": "; %d more it refuses" % refused if refused else ""}


def beyond_spread(figs):
    """Of the nested-vs-padded figures where nested is slower (median
    against median), those slower beyond the spread of the rounds (the
    nested side's fastest round slower than the padded side's slowest),
    by batch size: '; of the N slower, M beyond ...'. The rest are within
    what the same code varies from round to round (equal lengths do the
    same work both ways)."""
    slower = [f for f in figs if f["values"]["nested_s"] > f["values"]["padded_s"]]
    beyond = [f for f in slower if "nested_s_min" in f["values"] and "padded_s_max" in f["values"]
              and f["values"]["nested_s_min"] > f["values"]["padded_s_max"]]
    if not slower:
        return ""
    by_b = collections.Counter(f["params"].get("B") for f in beyond)
    return "; of the %d slower, %d beyond the spread of the rounds (nested's fastest round slower than padded's " \
           "slowest)%s" % (len(slower), len(beyond), ": " + ", ".join(
               "%d at B=%s" % (n, b) for b, n in sorted(by_b.items(), key=lambda x: x[0])) if beyond else "")


def nested_rows(figures):
    rows = []
    for f in figures:
        if f["name"] != "nested_vs_padded":
            continue
        p, v = f["params"], f["values"]
        if "skipped" in v:
            continue
        real, padded = p.get("real"), p.get("padded")
        r = real / padded if real and padded else v.get("real_over_padded")
        ns, ps = v["nested_s"], v["padded_s"]
        rows.append({"fig": f, "lengths": p.get("lengths", "?"), "B": p.get("B"), "D": p.get("D"),
                     "op": p.get("op", "?"), "ratio": r, "pad_factor": 1 / r if r else None,
                     "nested_s": ns, "padded_s": ps, "speedup": ps / ns if ns else None,
                     "meets": ns <= ps * r * NESTED_SLACK, "never_slower": ns <= ps})
    return rows


def quantized_times(figures, tick=0.004, floor=0.003, ceil=0.05, tol=0.015):
    """Median times between `floor` and `ceil` seconds that sit within `tol`
    of a multiple of the scheduler's tick: (how many, out of how many, how
    many chance alone would put there). On a busy
    machine a parallel op waits a whole time slice for a descheduled thread,
    and its time becomes a multiple of the tick instead of the work's."""
    hits = total = 0
    chance = 0.0
    for f in figures:
        for k, v in f.get("values", {}).items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not k.endswith("_s") or not floor <= v <= ceil:
                continue
            total += 1
            chance += min(1.0, 2 * tol * v / tick)
            q = v / tick
            if abs(q - round(q)) * tick <= tol * v:
                hits += 1
    return hits, total, chance


def by_name(figures, name, bench=None):
    return [f for f in figures if f["name"] == name and (bench is None or f.get("bench") == bench)]


# ---- render: jag vs torch (bench/bench_torch.py) ---------------------------

ENCODER_LABELS = [("jag_eager", "jag eager (nested)"), ("jag_compiled", "jag compiled (jag.compile, nested)"),
                  ("torch_padded", "torch eager, padded + src_key_padding_mask"),
                  ("torch_compiled_padded", "torch.compile, padded + src_key_padding_mask"),
                  ("torch_nested", "torch nested (jagged)")]


def torch_rows(figures):
    """The summary's rows, in order: (op, sizes, jag s, torch nested s or
    why not, torch padded/dense s, ratio vs nested, ratio vs padded/dense,
    agree, figure)."""
    rows = []
    for f in by_name(figures, "nested_op", "vs_torch"):
        p, v = f["params"], f["values"]
        sizes = "B=%s, D=%s, %s tokens (max %s, %.0f%% real)" % (
            p["B"], p["D"], p["tokens"], p["max_len"], 100 * p["real_over_padded"])
        rows.append({"op": p["op"], "kind": "nested", "sizes": sizes, "jag": v["jag_s"],
                     "nested": v.get("torch_nested_s", v.get("torch_nested")), "padded": v["torch_padded_s"],
                     "ratio_nested": v.get("ratio_nested"), "ratio_padded": v["ratio_padded"],
                     "agree": v.get("agree"), "diff": v.get("max_abs_diff"), "with": v.get("compared_with")})
    for f in by_name(figures, "dense_op", "vs_torch"):
        p, v = f["params"], f["values"]
        rows.append({"op": p["op"], "kind": "dense", "sizes": p["size"], "jag": v["jag_s"], "nested": None,
                     "padded": v["torch_s"], "ratio_nested": None, "ratio_padded": v["ratio"],
                     "agree": v.get("agree"), "diff": v.get("max_abs_diff"), "with": "torch dense"})
    return rows


def fmt_ratio(r):
    if r is None:
        return "—"
    return "**%.2f×**" % r if r < 1 else "%.2f×" % r


def torch_version_of(res):
    for f in by_name(res["figures"], "config", "vs_torch"):
        return f["values"].get("torch_version")
    return None


def torch_summary(res, plots):
    """The report's opening section: jag against torch, or how to get it."""
    figures = res["figures"]
    out = ["## jag vs torch", ""]
    missing = by_name(figures, "torch_missing", "vs_torch")
    rows = torch_rows(figures)
    enc = by_name(figures, "encoder_step", "vs_torch")
    if not rows and not enc:
        why = res.get("torch_note") or (
            "bench_torch ran but torch did not import (%s)" % missing[0]["values"]["reason"] if missing
            else "the comparison was not requested")
        prog = [p for p in res["programs"] if p["program"] == "bench_torch" and p["exit"] != 0]
        if prog:
            why = "bench_torch failed (exit %s)" % prog[0]["exit"]
        return out + ["> **torch was not part of this run:** %s. To compare jag with PyTorch on the same data, run "
                      "`make bench TORCH=1` (it installs torch from PyPI into `.venv-bench`, about 5 GB, once; "
                      "`JAG_BENCH_TORCH_PYTHON=/path/to/python` uses an interpreter that already has torch)." % why, ""]
    cfg = by_name(figures, "config", "vs_torch")
    c = cfg[0]["values"] if cfg else {}
    out += ["torch %s against jag on the same numbers (generated once with numpy, handed to both), timed "
            "interleaved in the same run, both on %s thread(s) (jag.set_num_threads, torch.set_num_threads). "
            "**Ratio = torch time / jag time: above 1, jag is faster** (below 1 in bold). jag is called through "
            "its Python API, which adds about 0.5–1 µs per op to the C call, as torch's Python layer adds its "
            "own; at these sizes (tens of µs and more per op) that is a few percent at most. The nested rows run "
            "on a batch of long-tailed lengths: torch nested is a `torch.nested` jagged tensor (or the error "
            "torch gives for the op), torch padded is the same batch padded to its longest item with torch's "
            "dense op (the padding itself not timed). Before timing, each jag result is compared with torch's "
            "(\"agree\": max |difference| ≤ 1e-3, 3.2e-2 for mm over K = 1024)." % (
                c.get("torch_version", "?"), c.get("jag_threads", "?")), ""]
    if rows:
        out += ["| op | sizes | jag | torch nested | torch padded / dense | ratio vs torch nested | "
                "ratio vs torch padded / dense | agree |", "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            nested = "(dense op)" if r["kind"] == "dense" else (
                fmt_time(r["nested"]) if isinstance(r["nested"], (int, float)) else str(r["nested"]))
            agree = "—" if r["agree"] is None else ("yes" if r["agree"] else "**no** (%s off by %s)" % (
                r["with"], fmt(r["diff"], 6)))
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["op"], r["sizes"], fmt_time(r["jag"]), nested, fmt_time(r["padded"]), fmt_ratio(r["ratio_nested"]),
                fmt_ratio(r["ratio_padded"]), agree))
        out.append("")
    if "torch" in plots:
        out += ["![torch time / jag time per op](%s)" % plots["torch"], ""]
    for f in enc:
        p, v = f["params"], f["values"]
        out += ["### Training step: %s" % p["model"], "",
                "One step = %s, on a ragged batch of %s long-tailed lengths (%s tokens, longest %s, %.0f%% of the "
                "padded batch real). Time per step timed interleaved as above; tokens/s count the real tokens. "
                "Peak memory: each side alone in a fresh process, its peak RSS during its first 4 steps over its RSS "
                "at the end of its setup (%s, from /proc/self/status; a compiled side's includes compiling; "
                "\"first step\" is that process's first step, compiling included). Both models hold the same "
                "weights: jag's forward and torch's (padded, on the real rows) differ by at most %s." % (
                    p["step"], p["B"], p["tokens"], p["max_len"], 100 * p["real_over_padded"],
                    v.get("peak_method", "?"), fmt(v.get("forward_max_abs_diff"), 6)), "",
                "| side | time per step | tokens/s | vs jag eager (time / jag eager's) | peak memory over setup | first step |",
                "|---|---|---|---|---|---|"]
        for key, label in ENCODER_LABELS:
            if key + "_s" in v:
                out.append("| %s | %s | %s | %s | %s MiB | %s |" % (
                    label, with_range(v, key + "_s"), fmt(v[key + "_tokens_per_s"], 0),
                    "%.2f×" % v[key + "_over_jag_eager"] if key + "_over_jag_eager" in v else "—",
                    fmt(v.get(key + "_peak_mib"), 1), fmt_time(v.get(key + "_first_step_s"))))
            else:
                out.append("| %s | %s | — | — | — | — |" % (label, v.get(key, "not measured")))
        out.append("")
    return out


def plot_torch(res, out_dir, plt, subtitle):
    """Bars of torch time / jag time per op (log scale; right of 1: jag faster)."""
    rows = torch_rows(res["figures"])
    if not rows:
        return None
    labels, vs_nested, vs_padded = [], [], []
    for r in rows:
        labels.append("%s (%s)" % (r["op"], r["sizes"].split(",")[0] if r["kind"] == "nested" else r["sizes"]))
        vs_nested.append(r["ratio_nested"])
        vs_padded.append(r["ratio_padded"])
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.8))
    y = list(range(len(rows)))[::-1]
    h = 0.4
    ax.barh([yi + h / 2 for yi, r in zip(y, vs_nested) if r], [r for r in vs_nested if r], h,
            color="tab:blue", label="torch nested (jagged) / jag")
    ax.barh([yi - h / 2 for yi in y], vs_padded, h, color="tab:orange", label="torch padded (nested ops) or dense / jag")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("torch time / jag time (right of 1: jag faster)")
    ax.set_title("jag vs torch, same data, same threads\n" + subtitle, fontsize=10)
    ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
    from matplotlib.ticker import FuncFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, PLOTS["torch"]))
    plt.close(fig)
    return PLOTS["torch"]


def figure_tables(figures):
    """Figures without a section of their own: one table per (bench, name),
    a column per parameter and value."""
    groups = {}
    for f in figures:
        groups.setdefault((f.get("bench"), f["name"]), []).append(f)
    out = []
    for (bench, name), fs in groups.items():
        pkeys, vkeys = [], []
        for f in fs:
            pkeys += [k for k in f.get("params", {}) if k not in pkeys]
            vkeys += [k for k in f.get("values", {}) if k not in vkeys]

        def cell(x):
            if isinstance(x, float):
                return "%.4g" % x
            if isinstance(x, (dict, list)):
                return "`%s`" % json.dumps(x)
            return "—" if x is None else str(x).replace("|", "\\|")

        out += ["### %s / %s" % (bench, name), "", "| " + " | ".join(pkeys + vkeys) + " |",
                "|" + "---|" * len(pkeys + vkeys)]
        for f in fs:
            out.append("| " + " | ".join([cell(f.get("params", {}).get(k)) for k in pkeys] +
                                         [cell(f["values"].get(k)) for k in vkeys]) + " |")
        out.append("")
    return out


# ---- render: plots ----------------------------------------------------------

def plot_all(res, out_dir):
    """Draws every plot there is data for; returns {key: file name}."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "font.size": 10, "axes.grid": True, "grid.alpha": 0.3})
    figures = res["figures"]
    made = {}
    subtitle = "%s, %s cores%s; %s run, %s" % (
        res["machine"]["cpu"], res["machine"]["cores"],
        ", OMP_NUM_THREADS=%d" % res["threads"] if res.get("threads") else "",
        res["mode"], res["date"][:10])

    # 1. nested vs padded: speedup against the padding ratio
    rows = nested_rows(figures)
    if rows:
        fig, ax = plt.subplots(figsize=(11, 5.5))
        dists = sorted({r["lengths"] for r in rows}, key=lengths_order)
        # no red: red is the target line
        colors = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
        markers = {"relu": "o", "gelu": "s", "linear": "^"}
        extra = iter("DvP*Xh<>")
        for op in sorted({r["op"] for r in rows}):
            if op not in markers:
                markers[op] = next(extra, "o")
        for di, d in enumerate(dists):
            for op in markers:
                pts = [r for r in rows if r["lengths"] == d and r["op"] == op]
                if pts:
                    ax.scatter([r["pad_factor"] for r in pts], [r["speedup"] for r in pts],
                               color=colors[di % len(colors)], marker=markers[op], s=36, alpha=0.8,
                               edgecolors="black", linewidths=0.4)
        xs = [r["pad_factor"] for r in rows]
        ys = [r["speedup"] for r in rows]
        xmax = max(xs) * 1.3
        grid = [1 + (xmax - 1) * i / 200 for i in range(201)]
        ax.plot(grid, grid, color="gray", linestyle="--", linewidth=1,
                label="ideal: speedup = padding ratio\n(work on the real elements only)")
        need = [max(1.0, x / NESTED_SLACK) for x in grid]
        ax.plot(grid, need, color="tab:red", linewidth=1.5,
                label="target: speedup ≥\nmax(1, padding ratio / %.1f)" % NESTED_SLACK)
        ylo = min(min(ys), 1.0) / 1.5
        ax.fill_between(grid, [ylo] * len(grid), need, color="tab:red", alpha=0.07)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(0.9, xmax)
        ax.set_ylim(ylo, max(max(ys), xmax) * 1.5)
        ax.set_xlabel("padding ratio = padded elements / real elements")
        ax.set_ylabel("speedup = padded time / nested time")
        ax.set_title("Nested vs padded (jag's dense path on the padded batch)\n" + subtitle, fontsize=10)
        from matplotlib.lines import Line2D
        handles = [Line2D([], [], color=colors[i % len(colors)], marker="o", linestyle="", label="lengths: " + lengths_label(d))
                   for i, d in enumerate(dists)]
        handles += [Line2D([], [], color="black", marker=m, linestyle="", markerfacecolor="white", label="op: " + op)
                    for op, m in markers.items() if any(r["op"] == op for r in rows)]
        h2, _ = ax.get_legend_handles_labels()
        ax.legend(handles=handles + h2, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), framealpha=0.9)
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
            axis.set_minor_formatter(NullFormatter())
        ax.text(0.99, 0.01, "below the red line: target not met", transform=ax.transAxes, ha="right",
                va="bottom", fontsize=8, color="tab:red")
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, PLOTS["nested"]))
        plt.close(fig)
        made["nested"] = PLOTS["nested"]

    # 2. memory-bound ops: achieved GB/s against the measured copy bandwidth
    pw = by_name(figures, "pointwise_vs_memcpy", "dense")
    if pw:
        fig, ax = plt.subplots(figsize=(8.5, 5.5))
        names = ["%s\n(n=%s)" % (f["params"]["op"], f["params"].get("n")) if len({g["params"].get("n") for g in pw}) > 1
                 else f["params"]["op"] for f in pw]
        x = list(range(len(pw)))
        w = 0.38
        op_gbs = [f["values"]["op_gbs"] for f in pw]
        cp_gbs = [f["values"]["memcpy_gbs"] for f in pw]
        bound = [f["params"]["op"] in MEMORY_BOUND for f in pw]
        # error bars from the min and max times, where the figure has them
        lo, hi = [], []
        for f, g in zip(pw, op_gbs):
            v = f["values"]
            if v.get("op_s_min") and v.get("op_s_max") and v.get("op_s"):
                lo.append(max(0.0, g - g * v["op_s"] / v["op_s_max"]))
                hi.append(g * v["op_s"] / v["op_s_min"] - g)
            else:
                lo.append(0.0)
                hi.append(0.0)
        bars = ax.bar([i - w / 2 for i in x], op_gbs, w, yerr=[lo, hi], capsize=3,
                      color=["tab:blue" if b else "lightsteelblue" for b in bound],
                      hatch=None, label="jag op (bytes read + written / s); bars: min–max time")
        for b, isb in zip(bars, bound):
            if not isb:
                b.set_hatch("//")
        ax.bar([i + w / 2 for i in x], cp_gbs, w, color="silver", label="memcpy of the same bytes, same run")
        for i, (c, isb) in enumerate(zip(cp_gbs, bound)):
            if isb:
                ax.plot([i - w, i], [c * MEMCPY_TARGET] * 2, color="tab:red", linewidth=2,
                        label="target: %.2f × memcpy" % MEMCPY_TARGET if i == bound.index(True) else None)
        top = max(op_gbs[i] + hi[i] for i in x)
        top = max(top, max(cp_gbs))
        for i, f in enumerate(pw):
            r = f["values"]["ratio_vs_memcpy"]
            ax.text(i, top * 1.04, "%.2f×" % r, ha="center", fontsize=9,
                    color=("tab:green" if r >= MEMCPY_TARGET else "tab:red") if bound[i] else "dimgray")
        ax.set_ylim(0, top * 1.18)
        ax.set_xticks(x)
        ax.set_xticklabels([n + ("" if b else "\n(compute)") for n, b in zip(names, bound)], fontsize=9)
        ax.set_ylabel("GB/s")
        n_el = pw[0]["params"].get("n")
        ax.set_title("Pointwise ops vs memcpy, float32, n = %s (ratio above each pair)\n%s" % (n_el, subtitle),
                     fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, PLOTS["memory"]))
        plt.close(fig)
        made["memory"] = PLOTS["memory"]

    # 3. GEMM: achieved GFLOP/s against a direct BLAS call
    mm = sorted(by_name(figures, "mm_vs_blas", "dense"), key=lambda f: f["params"]["n"])
    if mm:
        fig, ax = plt.subplots(figsize=(8.5, 5))
        ns = [f["params"]["n"] for f in mm]
        jg = [f["values"]["jag_gflops"] for f in mm]
        bl = [f["values"]["blas_gflops"] for f in mm]
        ax.plot(ns, bl, marker="s", color="silver", linewidth=2.5, label="direct cblas_sgemm (OpenBLAS)")
        ax.plot(ns, jg, marker="o", color="tab:blue", label="jag_mm")
        ax.plot(ns, [b * BLAS_TARGET for b in bl], color="tab:red", linestyle=":",
                label="target: %.2f × BLAS (n ≥ %d)" % (BLAS_TARGET, BLAS_MIN_N))
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.axvspan(min(ns) / 1.5, BLAS_MIN_N / 1.2, color="gray", alpha=0.08)
        ax.text(min(ns), 0.02, " no target below n = %d" % BLAS_MIN_N, fontsize=8, color="dimgray",
                transform=ax.get_xaxis_transform())
        top = max(jg + bl)
        for n, j, f in zip(ns, jg, mm):
            r = f["values"]["ratio_vs_blas"]
            ok = r >= BLAS_TARGET if n >= BLAS_MIN_N else None
            ax.annotate("%.2f×" % r, (n, max(j, f["values"]["blas_gflops"])), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=9,
                        color="dimgray" if ok is None else ("tab:green" if ok else "tab:red"))
        ax.set_ylim(0, top * 1.2)
        ax.set_xlim(min(ns) / 1.5, max(ns) * 1.5)
        ax.set_xlabel("n (square n × n @ n × n, float32)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title("jag_mm vs a direct BLAS call (ratio = jag / BLAS)\n" + subtitle, fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, PLOTS["gemm"]))
        plt.close(fig)
        made["gemm"] = PLOTS["gemm"]

    # 4. dispatch overhead per op: C (the kernel alone + the dispatcher's
    # share) and Python (the same op called from C + what Python adds)
    do = by_name(figures, "dispatch_overhead")
    pyf = by_name(figures, "python_overhead", "python")
    if do or pyf:
        v = do[0]["values"] if do else {}
        labels, base, over, colors = [], [], [], []
        if "nested_overhead_ns" in v:
            labels.append("C: relu, nested (2, j, 2)")
            base.append(v.get("kernel_ns", 0.0))
            over.append(v["nested_overhead_ns"])
            colors.append("tab:green" if v["nested_overhead_ns"] < DISPATCH_TARGET_NS else "tab:red")
        if "dense_overhead_ns" in v:
            labels.append("C: relu, dense (2, j, 2)'s values")
            base.append(v.get("kernel_ns", 0.0))
            over.append(v["dense_overhead_ns"])
            colors.append("tab:green" if v["dense_overhead_ns"] < DISPATCH_TARGET_NS else "tab:red")
        torch_notes = []
        for f in pyf:
            p, pv = f["params"], f["values"]
            labels.append("Python: %s, %s %s" % (p["op"], p.get("layout"), p.get("shape")))
            base.append(pv["c_ns"])
            over.append(pv["overhead_ns"])
            colors.append("tab:blue" if pv["overhead_ns"] < PY_ADDS_TARGET_NS else "tab:orange")
            tv = Torch(res).figs.get((f["name"], json.dumps(p, sort_keys=True)))
            torch_notes.append("torch: %s ns (%.0f× jag)" % (fmt(tv["py_ns"], 0), tv["ratio_torch_over_jag"])
                               if tv else "")
        fig, ax = plt.subplots(figsize=(9.5, 0.55 * len(labels) + 2.2))
        y = list(range(len(labels)))[::-1]
        ax.barh(y, over, color=colors, label="overhead: dispatcher (C, green/red: target < %d ns) or what Python "
                                             "adds (blue/orange: target < %d ns)" % (DISPATCH_TARGET_NS, PY_ADDS_TARGET_NS))
        ax.barh(y, base, left=over, color="silver", label="the kernel alone (C) / the same op called from C (Python)")
        right = max(o + b for o, b in zip(over, base)) * 2.2
        notes = [""] * (len(labels) - len(torch_notes)) + torch_notes
        for yi, o, b, note in zip(y, over, base, notes):
            ax.text(o + b + right * 0.01, yi, "%.0f ns over (%.0f ns per call)%s" % (o, o + b, "; " + note if note else ""),
                    va="center", fontsize=8)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlim(0, right)
        ax.set_xlabel("ns per call")
        ax.set_title("Overhead per op: the dispatcher (C) and the Python binding\n" + subtitle, fontsize=10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=1, frameon=False)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, PLOTS["dispatch"]))
        plt.close(fig)
        made["dispatch"] = PLOTS["dispatch"]

    # 5. jag vs torch
    if plot_torch(res, out_dir, plt, subtitle):
        made["torch"] = PLOTS["torch"]
    return made


# ---- render: the report -----------------------------------------------------

def report(res, results_rel, plots, plots_note):
    figures = res["figures"]
    torch = Torch(res)
    m, ver, b = res["machine"], res["versions"], res["build"]
    threads = res.get("threads")
    out = ["# jag benchmark report", "",
           "<!-- Generated by `make bench` (scripts/bench.sh, scripts/bench_report.py) from %s. "
           "Do not edit: rerun, or redraw with `.venv/bin/python scripts/bench_report.py render %s`. -->"
           % (results_rel, results_rel), ""]
    dirty = res["git"]["uncommitted_changes"]
    src = res["git"].get("source")
    elsewhere = " (built from %s)" % src if src and os.path.abspath(src) != ROOT else ""
    out += ["- **Run:** %s mode, %s, commit `%s`%s%s; figures in [`%s`](%s)." % (
        res["mode"], res["date"], res["git"]["commit"][:12],
        " with uncommitted changes in %d file(s)" % len(dirty) if dirty else "", elsewhere,
        results_rel, os.path.relpath(os.path.join(ROOT, results_rel), os.path.join(ROOT, "bench"))),
        "- **Machine:** %s, %s cores (%s usable), %s GiB; %s." % (
            m["cpu"], m["cores"], m.get("cores_usable"), m.get("memory_gib"), m["os"]),
        "- **Threads:** %s." % ("OMP_NUM_THREADS=%d" % threads if threads else "OpenMP default (one per core)"),
        "- **Build:** %s (`%s`%s), jag %s; %s; %s%s; %s." % (
            b["type"], b["c_flags"], ", -march=native" if b.get("march_native") else "", ver["jag"],
            ver["compiler"], ver["openblas"],
            " running its %s kernels" % by_name(figures, "blas_core")[0]["values"]["core"]
            if by_name(figures, "blas_core") else "", ver["openmp"]),
        "- **Python side:** Python %s; matplotlib %s; torch %s." % (
            ver["python"], ver["matplotlib"] or "not installed", torch.version or "not installed"),
        ""]
    if b["type"] != "Release":
        out += ["> **Warning:** this is a %s build, not Release: the figures do not say what jag can do." % b["type"], ""]
    if res["problems"]:
        out += ["> **Problems in this run:**"] + ["> - %s" % p for p in res["problems"]] + [""]
    if plots_note:
        out += ["> **Plots skipped:** %s" % plots_note, ""]

    # -- noise
    busy_before = m.get("busy_cores_before_start")
    others = [p["other_processes_cores"] for p in res["programs"] if p.get("other_processes_cores") is not None]
    worst_other = max(others) if others else None
    noisy = (worst_other or 0) > 0.25 or (busy_before or 0) > 0.25
    hits, total, chance = quantized_times(figures)
    stuck = total >= 4 and hits >= max(2 * chance, 0.3 * total)
    if noisy or stuck:
        usable = m.get("cores_usable") or m["cores"]
        hint = ("rerun on a quiet machine, or with `BENCH_ARGS=\"--threads %d\"`" % max(1, usable - 1)
                if (threads or usable) > 1 else "rerun on a quiet machine")
        load = ("Other processes kept %s of the %s cores busy just before the run and up to %s during it." % (
            fmt(busy_before), usable, fmt(worst_other)))
        ticks = ("%d of the %d median times between 3 and 50 ms sit within 1.5%% of a multiple of 4 ms (a "
                 "scheduler tick), where chance would put about %.0f" % (hits, total, chance))
        if stuck:
            out += ["> **The machine was busy; many figures below measure the scheduler, not jag.** %s %s: "
                    "with an OpenMP thread per core, a parallel op waits a whole time slice for a descheduled "
                    "thread, which hides the op's own time and makes ratios sit near 1 or go wild. The verdicts "
                    "below are this run's as measured; %s before believing them." % (load, ticks, hint), ""]
        else:
            out += ["> **The machine was shared.** %s The times show no time-slice artifacts (%s), but a busy "
                    "machine lowers bandwidth and widens the spread: %s to confirm a verdict near its "
                    "target." % (load, ticks, hint), ""]

    out += torch_summary(res, plots)

    # -- targets
    pw = by_name(figures, "pointwise_vs_memcpy", "dense")
    mm = sorted(by_name(figures, "mm_vs_blas", "dense"), key=lambda f: f["params"]["n"])
    do = by_name(figures, "dispatch_overhead")
    rows = nested_rows(figures)
    out += ["## Targets", "",
            "Each target the issues set, beside the figure this run measured. \"met\" means the median met it.",
            "",
            "| target | measured (jag) | verdict | torch |", "|---|---|---|---|"]
    mb = [f for f in pw if f["params"]["op"] in MEMORY_BOUND]
    if mb:
        worst = min(mb, key=lambda f: f["values"]["ratio_vs_memcpy"])
        ok = sum(f["values"]["ratio_vs_memcpy"] >= MEMCPY_TARGET for f in mb)
        out.append("| memory-bound pointwise ops ≥ %.2f × memcpy bandwidth | %d of %d ops; worst %s %.2f× (%s) | %s | %s |" % (
            MEMCPY_TARGET, ok, len(mb), worst["params"]["op"], worst["values"]["ratio_vs_memcpy"],
            ", ".join("%s %.2f" % (f["params"]["op"], f["values"]["ratio_vs_memcpy"]) for f in mb),
            verdict(ok == len(mb)), torch.targets_cell(mb, lambda pairs: "%d of %d ops; worst %s (%s) against the same memcpy" % (
                sum(t["op_gbs"] / f["values"]["memcpy_gbs"] >= MEMCPY_TARGET for f, t in pairs), len(pairs),
                "%s %.2f×" % min(((f["params"]["op"], t["op_gbs"] / f["values"]["memcpy_gbs"]) for f, t in pairs),
                                 key=lambda x: x[1]),
                ", ".join("%s %.2f" % (f["params"]["op"], t["op_gbs"] / f["values"]["memcpy_gbs"]) for f, t in pairs)))))
    else:
        out.append("| memory-bound pointwise ops ≥ %.2f × memcpy | no figures | no data | %s |" % (MEMCPY_TARGET, torch.missing()))
    big = [f for f in mm if f["params"]["n"] >= BLAS_MIN_N]
    if big:
        worst = min(big, key=lambda f: f["values"]["ratio_vs_blas"])
        ok = sum(f["values"]["ratio_vs_blas"] >= BLAS_TARGET for f in big)
        out.append("| jag_mm ≥ %.2f × direct BLAS for n ≥ %d | %d of %d sizes; worst n=%d %.2f× (%s) | %s | %s |" % (
            BLAS_TARGET, BLAS_MIN_N, ok, len(big), worst["params"]["n"], worst["values"]["ratio_vs_blas"],
            ", ".join("n=%d %.2f" % (f["params"]["n"], f["values"]["ratio_vs_blas"]) for f in big),
            verdict(ok == len(big)), torch.targets_cell(big, lambda pairs: "torch.mm against the same BLAS: " + ", ".join(
                "n=%d %.2f× (%.1f GFLOP/s)" % (f["params"]["n"], t["gflops"] / f["values"]["blas_gflops"], t["gflops"])
                for f, t in pairs))))
    else:
        out.append("| jag_mm ≥ %.2f × direct BLAS for n ≥ %d | no figures | no data | %s |" % (BLAS_TARGET, BLAS_MIN_N, torch.missing()))
    bf = sorted(by_name(figures, "bf16_mm_vs_f32", "dense"), key=lambda f: f["params"]["m"])
    square = [f for f in bf if f["params"]["m"] == f["params"]["k"] == f["params"]["n"] == BF16_SQUARE_N]
    if square:
        r = square[0]["values"]["ratio_vs_f32"]
        out.append("| bfloat16 jag_mm ≥ %.1f × float32 GFLOP/s at n = %d | %s | %s | %s |" % (
            BF16_TARGET, BF16_SQUARE_N, ", ".join("%d×%d×%d %.2f× (%.1f vs %.1f GFLOP/s)" % (
                f["params"]["m"], f["params"]["k"], f["params"]["n"], f["values"]["ratio_vs_f32"],
                f["values"]["bf16_gflops"], f["values"]["f32_gflops"]) for f in bf),
            verdict(r >= BF16_TARGET), torch.targets_cell(bf, lambda pairs: "torch.mm bfloat16 / float32: " + ", ".join(
                "%d×%d×%d %.2f× (%.1f vs %.1f GFLOP/s)" % (f["params"]["m"], f["params"]["k"], f["params"]["n"],
                                                          t["ratio_vs_f32"], t["bf16_gflops"], t["f32_gflops"])
                for f, t in pairs))))
    else:
        out.append("| bfloat16 jag_mm ≥ %.1f × float32 GFLOP/s at n = %d | no figures | no data | %s |" % (
            BF16_TARGET, BF16_SQUARE_N, torch.missing()))
    if do:
        v = do[0]["values"]
        worst = max(v.get("nested_overhead_ns", 0), v.get("dense_overhead_ns", 0))
        out.append("| dispatch overhead < %d ns per op (C) | nested %s ns, dense %s ns | %s | %s |" % (
            DISPATCH_TARGET_NS, fmt(v.get("nested_overhead_ns"), 0), fmt(v.get("dense_overhead_ns"), 0),
            verdict(worst < DISPATCH_TARGET_NS), NO_C_API % "its whole call from Python is in the next row"))
    else:
        out.append("| dispatch overhead < %d ns per op (C) | no figures | no data | %s |" % (DISPATCH_TARGET_NS, torch.missing()))
    py = by_name(figures, "python_overhead", "python")
    py_nested = [f for f in py if f["params"].get("layout") == "nested"]
    if py_nested:
        worst = max(f["values"]["py_ns"] for f in py_nested)
        tcells = [(f["params"]["op"], torch.of(f))
                  for f in py_nested]
        tcol = ", ".join("%s %s µs (%.0f× jag)" % (op, fmt(v["py_ns"] / 1000, 1), v["ratio_torch_over_jag"])
                         for op, v in tcells if v) or torch.missing()
        out.append("| one op from Python < %d ns on a tiny nested tensor | %s; Python adds %s–%s ns to the C call | %s | torch.nested: %s |" % (
            PY_TARGET_NS, ", ".join("%s %s ns" % (f["params"]["op"], fmt(f["values"]["py_ns"], 0)) for f in py_nested),
            fmt(min(f["values"]["overhead_ns"] for f in py_nested), 0),
            fmt(max(f["values"]["overhead_ns"] for f in py_nested), 0), verdict(worst < PY_TARGET_NS), tcol))
    else:
        out.append("| one op from Python < %d ns on a tiny nested tensor | no figures | no data | %s |" % (
            PY_TARGET_NS, torch.missing()))
    if py:
        adds = max(f["values"]["overhead_ns"] for f in py)
        out.append("| Python adds < %d ns to the same op called from C | %s | %s | %s |" % (
            PY_ADDS_TARGET_NS, ", ".join("%s %s %s ns" % (f["params"]["op"], f["params"].get("layout"),
                                                          fmt(f["values"]["overhead_ns"], 0)) for f in py),
            verdict(adds < PY_ADDS_TARGET_NS), NO_C_API % "its whole call from Python is in the row above"))
    b1 = b1_overheads(by_name(figures, "nested_vs_padded"))
    if b1:
        worst = max(b1.values())
        out.append("| a nested batch of one costs ≤ %d ns over the same dense op (B = 1 rows of the nested-vs-padded "
                   "grid: fastest nested call − fastest padded call, the smallest case of each op) | %s | %s | %s |" % (
                       B1_TARGET_NS, ", ".join("%s %s" % (op, "%s ns" % fmt(ns, 0) if ns > 0 else "nested faster")
                                                for op, ns in sorted(b1.items())),
                       verdict(worst <= B1_TARGET_NS), b1_torch_cell(figures, torch)))
    # tracing and compiling (issue 5), attention and ragged bandwidth (issue 6)
    def first_fig(name):  # jag's figure of that name (torch's are its torch cells)
        f = [g for g in by_name(figures, name) if g.get("bench") not in ("torch", "vs_torch")]
        return f[0] if f else None

    def first(name):
        f = first_fig(name)
        return f["values"] if f else None

    def target_row(label, measured, ok, torch_cell=None):  # ok: True / False, None (no figures), "" (nothing to meet)
        word = ok if isinstance(ok, str) else "no data" if ok is None else verdict(ok)
        out.append("| %s | %s | %s | %s |" % (label, measured, word or "—", torch_cell or torch.missing()))

    f = first_fig("op_overhead")
    v = f and f["values"]
    target_row("compiled per-op overhead ≥ 5× lower than eager (tiny ops)",
               "%s× lower (eager %s ns, compiled %s ns over the kernel; fused %s× faster per op)" % (
                   fmt(v["overhead_ratio"]), fmt(v["eager_overhead_ns"], 0), fmt(v["compiled_overhead_ns"], 0),
                   fmt(v["eager_over_fused"])) if v else "no figures", v and v["overhead_ratio"] >= 5,
               torch.targets_cell([f] if f else [], lambda pairs: "the same 8 ops from Python: eager %s ns an op, "
                                  "torch.compile %s ns (%s× faster; jag's per op from C: eager %s ns, fused %s ns)" % (
                                      fmt(pairs[0][1]["eager_ns_per_op"], 0), fmt(pairs[0][1]["compiled_ns_per_op"], 0),
                                      fmt(pairs[0][1]["eager_over_compiled"]), fmt(v["eager_ns_per_op"], 0),
                                      fmt(v["fused_ns_per_op"], 0))))
    f = first_fig("chain8_64mb_jagged")
    v = f and f["values"]
    target_row("8 pointwise ops on 64 MB jagged: compiled ≥ 4× eager", "%s× (compiled = %s× a memcpy)" % (
        fmt(v["speedup"]), fmt(v["compiled_over_memcpy"])) if v else "no figures", v and v["speedup"] >= 4,
        torch.targets_cell([f] if f else [], lambda pairs: "torch.compile %s× torch eager (compiled = %s× torch's copy "
                           "of the same bytes; on %s); torch compiled %s, jag compiled %s" % (
                               fmt(pairs[0][1]["speedup"]), fmt(pairs[0][1]["compiled_over_memcpy"]),
                               pairs[0][1]["compiled_on"], fmt_time(pairs[0][1]["compiled_s"]),
                               fmt_time(v["compiled_s"]))))
    f = first_fig("trace_compile_200_ops")
    v = f and f["values"]
    target_row("trace + compile of a 200-op program < 5 ms", "%s ms" % fmt(v["trace_compile_ms"], 3) if v else "no figures",
               v and v["trace_compile_ms"] < 5,
               torch.targets_cell([f] if f else [], lambda pairs: "torch.compile's first call (compiling, inductor's caches %s): %s" % (
                   pairs[0][1].get("inductor_caches", "off"), fmt_time(pairs[0][1]["compile_first_call_s"]))))
    v = first("block_fwd_bwd")
    target_row("transformer block fwd+bwd: compiled vs eager vs padded (no target)",
               "compiled %s× faster than eager nested, %s× faster than eager padded" % (
                   fmt(v["eager_over_compiled"]), fmt(v["padded_over_compiled"])) if v else "no figures", "" if v else None)
    att = by_name(figures, "attention", "nested")
    target_row("attention forward ≥ 0.5 × the GEMM rate (real FLOPs)", ", ".join(
        "%s %s (%s× padded)" % (lengths_label(f["params"]["lengths"]), fmt(f["values"]["ratio_vs_gemm"]),
                                 fmt(f["values"]["speedup"], 1)) for f in att) or "no figures",
               all(f["values"]["ratio_vs_gemm"] >= 0.5 for f in att) if att else None,
               torch.targets_cell(att, attention_vs_gemm_cell))
    every = att + by_name(figures, "attention_causal", "nested") + by_name(figures, "attention_backward", "nested")
    target_row("attention (forward, causal, backward) faster than padded by at least the padding ratio", ", ".join(
        "%s %s %s× (padding %s×)" % (attention_kind(f), lengths_label(f["params"]["lengths"]),
                                     fmt(f["values"]["speedup"], 2), fmt(f["values"].get("padded_over_real"), 2))
        for f in every) or "no figures",
               all(f["values"].get("beats_padding", False) for f in every) if every else None,
               torch.targets_cell(every, attention_vs_padded_cell))
    for name, label in (("attention_causal", "causal attention forward"), ("attention_backward", "attention backward")):
        fs = by_name(figures, name, "nested")
        target_row("%s vs the GEMM rate (real FLOPs; no target)" % label, ", ".join(
            "%s %s" % (lengths_label(f["params"]["lengths"]), fmt(f["values"]["ratio_vs_gemm"])) for f in fs)
                   or "no figures", "" if fs else None, torch.targets_cell(fs, attention_vs_gemm_cell))
    rv = by_name(figures, "ragged_vs_memcpy", "nested")

    def case_key(f):
        p = f["params"]
        return (p.get("lengths", "uniform"), p["B"], p.get("D"), p.get("resident", "cache"))

    def case_label(k):
        d, B, D, res = k
        return "%s B=%s%s (%s)" % (lengths_label(d), B, "" if D is None else " D=%s" % D,
                                   {"memory": "DRAM", "cache": "L3", "L2": "L2"}.get(res, res))

    groups = []
    for f in rv:
        if case_key(f) not in groups:
            groups.append(case_key(f))

    def cases(ops, value, fs):
        return "; ".join("%s: %s" % (case_label(k), ", ".join(
            "%s %s" % (f["params"]["op"].replace("_ragged", ""), fmt(f["values"][value]))
            for f in fs if case_key(f) == k and f["params"]["op"].replace("_ragged", "") in ops))
            for k in groups if any(case_key(f) == k and f["params"]["op"].replace("_ragged", "") in ops for f in fs))

    def torch_cases(ops, nested_key, padded_key):
        """The torch cell of a ragged row: per case, torch.nested's and the
        padded batch's figure (nested_key / padded_key of torch's values) for
        each op, or that torch.nested refused it."""
        def op_cell(f):
            t = torch.of_case(f, ("op", "lengths", "B", "D", "rows"))
            if t is None:
                return None
            nested = fmt(t[nested_key]) if nested_key in t else "refused"
            return "%s %s / %s" % (f["params"]["op"].replace("_ragged", ""), nested, fmt(t.get(padded_key)))
        cells = []
        for k in groups:
            got = [c for c in (op_cell(f) for f in rv if case_key(f) == k and f["params"]["op"].replace("_ragged", "") in ops) if c]
            if got:
                cells.append("%s: %s" % (case_label(k), ", ".join(got)))
        return cells

    sums = ("sum", "mean", "var", "std")
    judged = [f for f in rv if f["params"].get("resident") == "memory" and f["params"]["op"].replace("_ragged", "") in sums]
    tc = torch_cases(sums, "nested_ratio_vs_copy", "padded_ratio_vs_copy")
    target_row("ragged sum / mean / var ≥ 0.7 × memcpy bandwidth at DRAM-resident sizes (values ≥ 4 × the last-level "
               "cache; cache-resident cases shown without a target)", cases(sums, "ratio_vs_memcpy", rv) or "no figures",
               all(f["values"]["ratio_vs_memcpy"] >= 0.7 for f in judged) if judged else None,
               "torch.nested / padded batch against torch's copy of the same bytes: " + "; ".join(tc) if tc else None)
    rx = [f for f in rv if "exp_over_op" in f["values"]]
    if rx:
        exps = ("softmax", "log_softmax", "logsumexp")
        judged = [f for f in rx if f["params"].get("resident") == "memory"]
        tc = torch_cases(exps, "exp_over_nested", "exp_over_padded")
        target_row("ragged softmax / logsumexp ≥ 0.85 × one jag_exp pass over the same values (time of the exp / "
                   "time of the op; DRAM-resident sizes judged)", cases(exps, "exp_over_op", rx),
                   all(f["values"]["exp_over_op"] >= 0.85 for f in judged) if judged else None,
                   "torch.exp's time over torch.nested's / the padded batch's op: " + "; ".join(tc) if tc else None)
    opt = by_name(figures, "step_vs_memcpy", "optim")
    dram = [f for f in opt if f["params"]["set"] == "dram"]
    target_row("fused optimizer step ≥ 0.7 × memcpy bandwidth over the bytes it moves (DRAM-resident set)", "; ".join(
        "%s %s× (%s GB/s; in cache: %s×)" % (
            f["params"]["optimizer"], fmt(f["values"]["ratio_vs_memcpy"]), fmt(f["values"]["step_gbs"], 1),
            "".join(fmt(g["values"]["ratio_vs_memcpy"]) for g in opt
                    if g["params"]["set"] == "cache" and g["params"]["optimizer"] == f["params"]["optimizer"]))
        for f in dram) or "no figures",
               all(f["values"]["ratio_vs_memcpy"] >= 0.7 for f in dram if f["params"]["optimizer"] == "adamw")
               if dram else None,
               torch.targets_cell(dram, lambda pairs: "; ".join(
                   "%s: %s GB/s, %s× the same memcpy; %s" % (
                       t.get("impl", f["params"]["optimizer"]), fmt(t["step_gbs"], 1),
                       fmt(t["step_gbs"] / (f["values"]["step_gbs"] / f["values"]["ratio_vs_memcpy"])),
                       "torch time / jag.optim's, interleaved from Python: %s (jag %s GB/s)" % (
                           fmt(t["torch_over_jag"]), fmt(t["jag_step_gbs"], 1)) if "torch_over_jag" in t
                       else "torch time / jag time %s" % fmt(t["step_s"] / f["values"]["step_s"]))
                   for f, t in pairs)))
    v = first("train_step_optimizer_share")
    target_row("optimizer share of a training step (was 14% with Adam written as jag ops; no target)",
               "fused AdamW %s%% of the step (the same update as a chain of jag ops: %s%%, %s× slower)" % (
                   fmt(100 * v["fused_share"], 1), fmt(100 * v["chain_share"], 1),
                   fmt(v["fused_speedup_over_chain"], 1)) if v else "no figures", "" if v else None)
    # data-parallel training over MPI (bench_dist, bench_python's sampler)
    ar = [f for f in by_name(figures, "all_reduce_busbw", "dist") if "skipped" not in f["values"]]
    big = [f for f in ar if f["params"]["bytes"] >= 1 << 20]
    target_row("all-reduce ≥ 0.95 × a plain MPI_Allreduce of the same buffer (2 ranks, bus bandwidth, 1 MB and up; "
               "below 1 MB the header each call exchanges first, a 72-byte collective that makes ranks that disagree "
               "fail instead of hang, "
               "is a visible share)", ", ".join(
                   "%s %s× (%s GB/s)" % (fmt_bytes(f["params"]["bytes"]), fmt(f["values"]["ratio"]),
                                          fmt(f["values"]["jag_busbw_gbs"], 1)) for f in ar) or "no figures",
               all(f["values"]["ratio"] >= 0.95 for f in big) if big else None)
    v = first("ddp_overlap")
    target_row("share of the gradient all-reduce hidden behind backward (DDP buckets; no target)",
               "%s%% (backward %s, all-reduce after it %s, overlapped %s)" % (
                   fmt(100 * v["hidden_share"], 0), fmt_time(v["backward_s"]), fmt_time(v["sync_after_s"]),
                   fmt_time(v["overlapped_s"])) if v else "no figures", "" if v else None)
    si = [f for f in by_name(figures, "sampler_imbalance", "dist") if "skipped" not in f["values"]]
    target_row("distributed sampler on the fortunes corpus: epoch time over the ideal, sum(max) / sum(mean) of the "
               "ranks' tokens per global batch, split by tokens vs dealt by item count (no target)", "; ".join(
                   "%d ranks, %s tokens%s: %s vs %s" % (
                       f["params"]["ranks"], f["params"]["max_tokens"],
                       ", mixed lengths" if f["params"]["bucket_size"] else "",
                       fmt(f["values"]["epoch_over_ideal"], 3), fmt(f["values"]["by_items_epoch_over_ideal"], 3))
                   for f in si if f["params"]["ranks"] in (2, 8)) or "no figures", "" if si else None)
    if rows:
        ok = sum(r["meets"] for r in rows)
        ns_ok = sum(r["never_slower"] for r in rows)
        by_op = ", ".join("%s %d/%d" % (op, sum(r["meets"] for r in rows if r["op"] == op),
                                        sum(1 for r in rows if r["op"] == op)) for op in sorted({r["op"] for r in rows}))
        tg = torch_nested_grid(figures)
        out.append("| nested ≤ padded × (real / padded) × %.1f | %d of %d cases (%s) | %s | %s |" % (
            NESTED_SLACK, ok, len(rows), by_op, verdict(ok == len(rows)),
            "torch.nested against torch padded on the summary's float32 batches: %d of %d%s" % (
                tg["meets"], tg["n"], tg["refused"]) if tg else torch.missing()))
        worst = min(rows, key=lambda r: r["speedup"])
        out.append("| nested never slower than padded | %d of %d cases; slowest %.2f× (%s, B=%s, D=%s, %s)%s | %s | %s |" % (
            ns_ok, len(rows), worst["speedup"], lengths_label(worst["lengths"]), worst["B"], worst["D"], worst["op"],
            beyond_spread([r["fig"] for r in rows]), verdict(ns_ok == len(rows)),
            "torch.nested against torch padded on the summary's float32 batches: %d of %d; slowest %s× (%s)%s" % (
                tg["never_slower"], tg["n"], fmt(tg["worst"][0]), tg["worst"][1], tg["refused"]) if tg else torch.missing()))
    else:
        out.append("| nested ≤ padded × (real / padded) × %.1f, never slower | no figures | no data | %s |" % (
            NESTED_SLACK, torch.missing()))
    ovp = [f for f in by_name(figures, "op_vs_padded") if "skipped" not in f["values"]]
    if ovp:
        ns_ok = sum(f["values"]["nested_s"] <= f["values"]["padded_s"] for f in ovp)
        worst = min(ovp, key=lambda f: f["values"]["speedup"])
        p = worst["params"]
        out.append("| more ragged ops (norms, reductions, log_softmax, embedding, dropout, clamp, losses) never slower "
                   "than padded | %d of %d cases; slowest %.2f× (%s, B=%s, D=%s, %s)%s | %s | %s |" % (
                       ns_ok, len(ovp), worst["values"]["speedup"], lengths_label(p["lengths"]), p["B"], p["D"], p["op"],
                       beyond_spread(ovp), verdict(ns_ok == len(ovp)), torch.missing()))
    out.append("")

    def plot(key, alt):
        if key in plots:
            out.extend(["![%s](%s)" % (alt, plots[key]), ""])

    # -- memory-bound ops
    if pw:
        out += ["## Memory-bound ops vs the copy bandwidth", "",
                "Achieved bytes/s of each op (inputs read + output written, the output allocated by the op as users "
                "do) against a `memcpy` of the same bytes into a warm buffer, timed interleaved in the same run. "
                "Target: ≥ %.2f × memcpy for the memory-bound ops (%s); exp and sigmoid are compute-bound and "
                "shown for reference. torch GB/s: the same op in torch on operands of the same size, called from "
                "Python (bench/bench_torch.py, later in the same run, not interleaved with jag's), the bytes "
                "counted the same way." % (
                    MEMCPY_TARGET, ", ".join(MEMORY_BOUND)), ""]
        llc = m.get("last_level_cache_mib")
        if llc:
            small = sorted({f["params"].get("n") for f in pw
                            if f["params"].get("n") and f["params"]["n"] * 4 * 2 <= 2 * llc * 2 ** 20})
            if small:
                out += ["> **Not memory-bound at n = %s:** one input and the output (%s MiB) fit in about twice "
                        "this CPU's %g MiB last-level cache, so these figures partly measure the cache, not "
                        "memory; the full run's larger n is the one to judge the target by." % (
                            ", ".join(str(n) for n in small), ", ".join("%g" % (n * 8 / 2 ** 20) for n in small), llc), ""]
        over = [f for f in pw if f["params"]["op"] in MEMORY_BOUND and f["values"]["ratio_vs_memcpy"] > 1.2]
        if over and threads != 1:
            out += ["> **The baseline is below the machine's copy bandwidth:** %d memory-bound op(s) beat memcpy "
                    "by more than 1.2×. bench_dense's memcpy is one call on one thread, while the ops run on every "
                    "OpenMP thread, so \"met\" here is weaker than it looks; with `--threads 1` the two compare "
                    "like with like." % len(over), ""]
        relu_t = next((torch.of(f) for f in pw if f["params"]["op"] == "relu" and torch.of(f)), None)
        if relu_t and relu_t.get("op_s_preallocated"):
            out += ["torch's figures include allocating each output: torch.relu on these operands took %s, and %s "
                    "into an output allocated once (`torch.clamp_min(x, 0, out=y)`), so most of its time is the "
                    "first touch of the fresh pages of a new 64 MiB block (glibc returns freed blocks this large "
                    "to the system; jag keeps recently freed large blocks, src/core/storage.c)." % (
                        fmt_time(relu_t["op_s"]), fmt_time(relu_t["op_s_preallocated"])), ""]
        plot("memory", "pointwise GB/s vs memcpy GB/s")
        out += ["| op | n | op time | memcpy time | op GB/s | memcpy GB/s | ratio | target | torch GB/s |",
                "|---|---|---|---|---|---|---|---|---|"]
        for f in pw:
            p, v = f["params"], f["values"]
            bound = p["op"] in MEMORY_BOUND
            tgt = verdict(v["ratio_vs_memcpy"] >= MEMCPY_TARGET) if bound else "(compute-bound)"
            out.append("| %s | %s | %s | %s | %.2f | %.2f | %.2f | %s | %s |" % (
                p["op"], p.get("n"), with_range(v, "op_s"), with_range(v, "memcpy_s"), v["op_gbs"], v["memcpy_gbs"],
                v["ratio_vs_memcpy"], tgt, torch.cell(f, "op_gbs")))
        out.append("")

    # -- GEMM
    if mm:
        out += ["## GEMM vs a direct BLAS call", "",
                "GFLOP/s of `jag_mm` (output allocated by jag) against `cblas_sgemm` (OpenBLAS) on the same "
                "inputs, timed interleaved. Target: ≥ %.2f × BLAS for n ≥ %d. float32 products from 64³ "
                "multiply-adds run on oneDNN, chosen by the table of OpenBLAS, BLIS, oneDNN, MKL and torch over "
                "the shapes ragged batches produce (M 1–2048, K and N 64–4096, mm and linear), which is made by "
                "hand and kept in [`bench/gemm_libs/README.md`](gemm_libs/README.md). torch GFLOP/s: `torch.mm` "
                "on products of the same size, called from Python (bench/bench_torch.py, later in the same run, "
                "not interleaved with jag's: the summary's mm rows are the head-to-head; its per-call cost, a few "
                "microseconds, weighs on n = 64 only)." % (BLAS_TARGET, BLAS_MIN_N), ""]
        plot("gemm", "jag_mm GFLOP/s vs BLAS GFLOP/s")
        out += ["| n | jag time | BLAS time | jag GFLOP/s | BLAS GFLOP/s | ratio | target | torch GFLOP/s |",
                "|---|---|---|---|---|---|---|---|"]
        for f in mm:
            p, v = f["params"], f["values"]
            tgt = verdict(v["ratio_vs_blas"] >= BLAS_TARGET) if p["n"] >= BLAS_MIN_N else "(no target below %d)" % BLAS_MIN_N
            out.append("| %d | %s | %s | %.1f | %.1f | %.2f | %s | %s |" % (
                p["n"], with_range(v, "jag_s"), with_range(v, "blas_s"), v["jag_gflops"], v["blas_gflops"],
                v["ratio_vs_blas"], tgt, torch.cell(f, "gflops", 1)))
        out.append("")

    # -- dispatch
    if do:
        f = do[0]
        v = f["values"]
        out += ["## Dispatch overhead per op", "",
                "ns per call of `jag_relu` on a tiny tensor (%s), minus the CPU kernel called directly on the same "
                "values with a preallocated output: the dispatcher, the nested handler, allocating the output "
                "and wrapping it. Target: < %d ns. From Python: see below." % (
                    f["params"].get("shape", "?"), DISPATCH_TARGET_NS), ""]
        plot("dispatch", "dispatch overhead per op")
        out += ["| path | ns per call | kernel alone | overhead | target | torch |", "|---|---|---|---|---|---|"]
        for label, key in (("C, nested tensor", "nested"), ("C, dense tensor", "dense")):
            if key + "_overhead_ns" in v:
                out.append("| %s | %s | %s | %s | %s | %s |" % (
                    label, with_range(v, key + "_ns", lambda x: fmt(x, 1)), with_range(v, "kernel_ns", lambda x: fmt(x, 1)),
                    fmt(v[key + "_overhead_ns"], 1),
                    verdict(v[key + "_overhead_ns"] < DISPATCH_TARGET_NS), torch.cell(f, key + "_ns", 1)))
        out.append("")

    # -- Python
    if py:
        out += ["## Python overhead per op", "",
                "ns per call of one op from Python (`jag.relu(nt)`, `nt + nt`, `jag.mm(nt, w)`; the Python loop "
                "included) against the same op called in a C loop through `jag_op_call` with the same arguments "
                "(bench/bench_python.py), timed interleaved; torch: the same op on a `torch.nested` jagged tensor "
                "of the same shape in the same run. Targets: < %d ns per op on a tiny nested tensor, and Python "
                "adds < %d ns to the C call." % (PY_TARGET_NS, PY_ADDS_TARGET_NS),
                "", "| op | tensor | from Python | from C | Python adds | Python / C | target (< %d ns) | "
                "target (adds < %d ns) | torch | torch / jag |" % (PY_TARGET_NS, PY_ADDS_TARGET_NS),
                "|---|---|---|---|---|---|---|---|---|---|"]
        for f in py:
            p, v = f["params"], f["values"]
            tv = torch.of(f)
            tgt = verdict(v["py_ns"] < PY_TARGET_NS) if p.get("layout") == "nested" else "(reference)"
            out.append("| %s | %s %s | %s ns | %s ns | %s ns | %.2f× | %s | %s | %s | %s |" % (
                p["op"], p.get("layout"), p.get("shape"), fmt(v["py_ns"], 0), fmt(v["c_ns"], 0),
                fmt(v["overhead_ns"], 0), v["ratio_vs_c"], tgt, verdict(v["overhead_ns"] < PY_ADDS_TARGET_NS),
                "%s ns" % fmt(tv["py_ns"], 0) if tv else v.get("torch", torch.missing()),
                "%.1f×" % tv["ratio_torch_over_jag"] if tv else "—"))
        out.append("")

    # -- nested vs padded
    nvp = by_name(figures, "nested_vs_padded")
    if nvp:
        out += ["## Nested vs padded", "",
                "Each op on a jagged batch (values + offsets) against jag's own dense path on the padded "
                "equivalent (B, max length, D), timed interleaved; the padding is not timed. Speedup = padded "
                "time / nested time; padding ratio = padded elements / real elements. Target: nested ≤ padded "
                "× (real / padded) × %.1f and never slower than padded, i.e. speedup ≥ max(1, padding ratio / %.1f) "
                "(the red line in the plot)." % (NESTED_SLACK, NESTED_SLACK), ""]
        plot("nested", "speedup of nested over padded against the padding ratio")
        present = sorted({f["params"].get("lengths", "?") for f in nvp}, key=lengths_order)
        have = {lengths_label(d) for d in present}
        missing = [label for label, _ in WANTED_LENGTHS if label not in have]
        b1 = any(f["params"].get("B") == 1 for f in nvp)
        out += ["Length distributions measured: %s; batch of 1: %s.%s" % (
            ", ".join(lengths_label(d) for d in present), "yes" if b1 else "**no**",
            " **Not measured yet:** %s." % ", ".join(missing) if missing else ""), ""]
        out += ["Each cell: speedup (met / **not met**: both targets), nested time.", ""]
        # relu, gelu, linear first, then the others by name (not in set
        # order, which changes with Python's string hashing from run to run)
        ops = sorted({r["op"] for r in rows}, key=lambda o: (["relu", "gelu", "linear"].index(o)
                                                             if o in ("relu", "gelu", "linear") else 9, o))
        for d in present:
            drows = [r for r in rows if r["lengths"] == d]
            skipped = [f for f in nvp if f["params"].get("lengths") == d and "skipped" in f["values"]]
            out += ["### Lengths: %s" % lengths_label(d), ""]
            if drows:
                out += ["| B | D | real / padded | " + " | ".join(ops) + " | torch |",
                        "|---|---|---|" + "---|" * len(ops) + "---|"]
                keys = sorted({(r["B"], r["D"]) for r in drows})
                for B, D in keys:
                    cells = []
                    ratio = None
                    for op in ops:
                        r = next((r for r in drows if r["B"] == B and r["D"] == D and r["op"] == op), None)
                        if r is None:
                            cells.append("—")
                            continue
                        ratio = r["ratio"]
                        ok = r["meets"] and r["never_slower"]
                        cells.append("%.2f× %s, %s" % (r["speedup"], "met" if ok else "**not met**",
                                                        with_range(r["fig"]["values"], "nested_s")))
                    out.append("| %s | %s | %s | %s | %s |" % (B, D, fmt(ratio, 3), " | ".join(cells), torch.missing()))
                out.append("")
            for f in skipped:
                p = f["params"]
                out.append("- skipped B=%s, D=%s (real %s, padded %s): %s" % (
                    p.get("B"), p.get("D"), p.get("real"), p.get("padded"), f["values"]["skipped"]))
            if skipped:
                out.append("")

    # -- more ops vs padded (bench_ops)
    if ovp:
        out += ["## More ops vs padded", "",
                "bench_ops: each op on a jagged batch against jag's dense path on the padded batch, timed "
                "interleaved; the padded side has no mask (its reductions and losses also average over the "
                "padding: the cheapest padded version). Each cell: speedup = padded time / nested time "
                "(**bold**: nested slower), nested time.", ""]
        ops = []
        for f in ovp:
            if f["params"]["op"] not in ops:
                ops.append(f["params"]["op"])
        for d in sorted({f["params"]["lengths"] for f in ovp}, key=lengths_order):
            drows = [f for f in ovp if f["params"]["lengths"] == d]
            out += ["### Lengths: %s" % lengths_label(d), "",
                    "| B | D | real / padded | " + " | ".join(ops) + " |", "|---|---|---|" + "---|" * len(ops)]
            for B, D in sorted({(f["params"]["B"], f["params"]["D"]) for f in drows}):
                cells, ratio = [], None
                for op in ops:
                    f = next((f for f in drows if f["params"]["B"] == B and f["params"]["D"] == D
                              and f["params"]["op"] == op), None)
                    if f is None:
                        cells.append("—")
                        continue
                    v = f["values"]
                    ratio = v["real_over_padded"]
                    sp = "%.2f×" % v["speedup"]
                    cells.append("%s, %s" % (sp if v["nested_s"] <= v["padded_s"] else "**%s**" % sp,
                                             with_range(v, "nested_s")))
                out.append("| %s | %s | %s | %s |" % (B, D, fmt(ratio, 3), " | ".join(cells)))
            out.append("")

    # -- anything else
    known = {"pointwise_vs_memcpy", "mm_vs_blas", "bf16_mm_vs_f32", "dispatch_overhead", "nested_vs_padded", "python_overhead",
             "op_vs_padded", "blas_core"}
    other = [f for f in figures if f["name"] not in known and f.get("bench") not in ("torch", "vs_torch")]
    if other:
        out += ["## Other figures", "", "Figures without a section of their own, one table per benchmark and "
                "figure name (seconds unless the column says otherwise).", ""]
        out += figure_tables(other)

    # -- how
    out += ["## How these figures are made", "",
            "- `make bench` builds Release (`-O3`, `-march=native`), runs every `bench/bench_*` program of the "
            "build and writes `bench/results/<date>-<host>.json` (quick runs: `<date>-<host>-quick.json`) and "
            "this report with its plots. `make bench BENCH_ARGS=--quick` takes under two minutes (fewer repeats, "
            "smaller sizes, B ≤ 64 and D ≤ 256 for nested); the full run under ten on a 2-core machine. "
            "`BENCH_ARGS=\"--threads N\"` sets OMP_NUM_THREADS.",
            "- Every figure is a ratio of two things timed in the same run, interleaved in 5 rounds (each round: "
            "2 warm-up calls, then repeats of one side, then of the other), so both sides see the same machine "
            "state. A time is the median of the 5 round medians; \"min – max\" is the range of the round medians "
            "(shown as [min – max] beside a time wherever the figure carries `<time>_min` and `<time>_max`; "
            "so far only the pointwise op times do).",
            "- Plots: matplotlib in the project's `.venv` (made by `scripts/bench_setup.sh`), Agg backend.",
            "- jag vs torch: `make bench TORCH=1` (or `scripts/bench.sh BUILD --torch`) also runs "
            "`bench/bench_torch.py` in `.venv-bench`, a separate environment with torch from PyPI "
            "(`scripts/bench_setup.sh --torch`; kept apart from `.venv` so that `make test` never installs "
            "torch's 5 GB). Its sides are timed interleaved in 9 shorter rounds (3 in quick runs), each side's "
            "round time the fastest of its 3 samples; a side slower "
            "than 0.25 s per call (0.5 s in full runs) is timed once. torch.compile gets %s s for its first "
            "steps in quick runs, %s s in full runs." % (120, 600),
            ""]
    timing = ["%s %s s (exit %s)" % (p["program"], fmt(p.get("wall_s"), 1), p["exit"]) for p in res["programs"]]
    if timing:
        out += ["This run: " + "; ".join(timing) + ". Cores kept busy by other processes: %s before the run; %s." % (
            fmt(busy_before), ", ".join("%s during %s" % (fmt(p.get("other_processes_cores")), p["program"])
                                        for p in res["programs"])), ""]
    return "\n".join(out)


def standard_figure(fig):
    """A figure in the shape every benchmark prints, {bench, name, params,
    values}: bench_grain prints flat lines {"figure": "grain", op, family,
    numel, t1_s, ...}, whose sizes become params and timings values."""
    if "name" in fig or "figure" not in fig:
        return fig
    params = {k: v for k, v in fig.items() if k in ("op", "family", "numel", "threads")}
    values = {k: v for k, v in fig.items() if k not in params and k not in ("figure", "program")}
    out = {"bench": fig["figure"], "name": fig["figure"], "params": params, "values": values}
    if "program" in fig:
        out["program"] = fig["program"]
    return out


def render(a):
    with open(a.results) as f:
        res = json.load(f)
    res["figures"] = [standard_figure(f) for f in res.get("figures", [])]
    report_path = os.path.abspath(a.report)
    out_dir = os.path.dirname(report_path)
    os.makedirs(out_dir, exist_ok=True)
    results_rel = os.path.relpath(os.path.abspath(a.results), ROOT)
    plots, note = {}, a.plots_skipped
    for name in PLOTS.values():  # never leave a stale plot beside a new report
        try:
            os.remove(os.path.join(out_dir, name))
        except OSError:
            pass
    if not note:
        try:
            plots = plot_all(res, out_dir)
        except ImportError as e:
            note = "matplotlib is not importable by %s (%s); run scripts/bench_setup.sh" % (sys.executable, e)
        except Exception as e:  # noqa: BLE001 - a broken plot must not lose the report
            note = "plotting failed: %s: %s" % (type(e).__name__, e)
    with open(report_path, "w") as f:
        f.write(report(res, results_rel, plots, note) + "\n")
    if note:
        print("bench-report: plots skipped: %s" % note, file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="raw run output -> results JSON")
    c.add_argument("--raw", required=True)
    c.add_argument("--build", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--mode", default="full", choices=("full", "quick"))
    c.add_argument("--torch-note", default="", help="why bench_torch did not run (from scripts/bench.sh)")
    r = sub.add_parser("render", help="results JSON -> bench/report.md and PNGs")
    r.add_argument("results")
    r.add_argument("--report", default=os.path.join(ROOT, "bench", "report.md"))
    r.add_argument("--plots-skipped", default="", help="why there are no plots (from scripts/bench_setup.sh)")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build) if a.cmd == "collect" else None
    collect(a) if a.cmd == "collect" else render(a)


if __name__ == "__main__":
    main()
