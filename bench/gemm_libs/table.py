"""table.py RAW.csv [RAW2.csv ...] -> markdown table on stdout.
GFLOP/s columns and the first ratios: over all files together.
Per cell: best (min over all sub-samples of all rounds) and median (of the per-round medians) seconds per call; GFLOP/s = 2MKN/s.
With several raw files: the jag/torch and best/torch ratios (best-of) of each
file, shown as a min-max range, plus the first file's GFLOP/s."""
import sys, statistics, collections

LIBS = ["openblas", "blis", "dnnl_sgemm", "dnnl_matmul", "mkl"]

def load(path):
    d = collections.defaultdict(list)
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        r, lib, mode, m, k, n, best, inner, med = line.strip().split(",")
        d[(lib, mode, int(m), int(k), int(n))].append((float(best), float(med)))
    return d

def summarize(d):
    cells = sorted({(mode, m, k, n) for (_, mode, m, k, n) in d}, key=lambda c: (c[0], c[2], c[3], c[1]))
    res = {}
    for c in cells:
        mode, m, k, n = c
        fl = 2.0 * m * k * n
        torch = "torch_mm" if mode == "nn" else "torch_linear"
        row = {}
        for lib in ["jag", torch] + LIBS:
            v = d.get((lib, mode, m, k, n))
            if v:
                row[lib] = (fl / min(b for b, _ in v) / 1e9, fl / statistics.median(m for _, m in v) / 1e9)
        if torch not in row or "jag" not in row:
            continue
        row["torch"] = row[torch]
        # the library the routing of src/cpu/gemm.c picks
        routed = "openblas" if m * k * n < 64 * 64 * 64 else ("dnnl_matmul" if mode == "nt" and m >= 16 else "dnnl_sgemm")
        row["routed"] = routed
        best = max(LIBS, key=lambda l: row.get(l, (0, 0))[0])
        row["best"] = best
        res[c] = row
    return res

loads = [load(p) for p in sys.argv[1:]]
runs = [summarize(d) for d in loads]
merged = collections.defaultdict(list)
for d in loads:
    for key, v in d.items():
        merged[key].extend(v)
first = summarize(merged)  # GFLOP/s columns: best over every round of every run
hdr = "| mode | M | K | N | torch | jag | " + " | ".join(LIBS) + " | jag/torch best (median) | best lib | best/torch | jag/torch range over runs | best/torch range | routed lib | routed/torch | routed/torch range |"
print(hdr)
print("|" + "---|" * (hdr.count("|") - 1))
for c, row in first.items():
    mode, m, k, n = c
    t = row["torch"]
    cells = [f"{row[l][0]:.1f}" if l in row else "-" for l in ["torch", "jag"] + LIBS]
    jr = f"{row['jag'][0]/t[0]:.2f} ({row['jag'][1]/t[1]:.2f})"
    b = row["best"]
    br = f"{row[b][0]/t[0]:.2f}"
    jrs = [r[c]["jag"][0] / r[c]["torch"][0] for r in runs if c in r]
    brs = [max(r[c].get(l, (0, 0))[0] for l in LIBS) / r[c]["torch"][0] for r in runs if c in r]
    rl = row["routed"]
    rrs = [r[c][rl][0] / r[c]["torch"][0] for r in runs if c in r and rl in r[c]]
    print(f"| {mode} | {m} | {k} | {n} | " + " | ".join(cells) + f" | {jr} | {b} | {br} | {min(jrs):.2f}-{max(jrs):.2f} | {min(brs):.2f}-{max(brs):.2f} | {rl} | {row[rl][0]/t[0]:.2f} | {min(rrs):.2f}-{max(rrs):.2f} |")
