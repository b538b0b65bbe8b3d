"""jag against PyTorch on the same data, in one run.

Every figure times jag (through its Python API) and torch on the same
numbers, generated once with numpy and handed to both: the sides of a
figure are timed interleaved in rounds (each round: a warm-up call, then
repeats of each side in turn), so both see the same machine state; a
round's time is the fastest of its samples, a figure's time the median of
the round times, *_min / *_max their range. jag and torch run on the same number of threads (OMP_NUM_THREADS,
else one per usable core: jag.set_num_threads and torch.set_num_threads).

jag's Python layer adds about 0.5-1 us per op to the C call
(bench/bench_python.py measures it); torch's Python layer adds its own. The
sizes here make each op take tens of microseconds or more, so that fixed
cost is a few percent at most; on tiny tensors it is not.

Figures (one JSON line each, "bench": "vs_torch"):

  nested_op      an op on a jagged batch of long-tailed lengths: jag nested,
                 torch.nested jagged (or torch's error when it refuses the
                 op), torch dense on the same batch padded to the longest
                 length (the padding is not timed). Before timing, jag's
                 result is compared with torch's (nested, else the padded
                 result's real rows): max_abs_diff and agree. The rows
                 "linear (bf16)" and "sdpa (bf16)" run the float32 rows'
                 ops on the same batch and weights rounded to bfloat16,
                 on every side (torch in bfloat16 on the CPU too).
  dense_op       the same op on plain tensors: jag vs torch.

  nested_batch_of_one  torch.nested on a (1, j, 64) batch against torch on
                 the dense (1, 8, 64) tensor (over_ns: fastest against
                 fastest), or torch's error for an op it refuses.

And, as "bench": "torch" figures under the names and params of
bench_dense.c's (the torch column of its tables in the report): torch's
GB/s on the memory-bound ops (pointwise_vs_memcpy), its GFLOP/s on square
float32 products (mm_vs_blas), its bfloat16 against float32 products
(bf16_mm_vs_f32), and its fused optimizer steps over bench_optim.c's
parameter sets (step_vs_memcpy); and under bench_nested.c's attention
figures' names and params (the same lengths, from the same seeded
generator), torch's scaled_dot_product_attention on the padded batch and
on torch.nested, forward, causal and backward, beside torch.mm's GEMM rate
(attention, attention_causal, attention_backward); torch.nested's and the
padded batch's reductions over the ragged dim on bench_nested's
ragged_vs_memcpy batches, against torch's copy and torch.exp
(ragged_vs_memcpy); and bench_trace's 8-op chain, its per-op cost on
tiny tensors and its 200-op program under torch.compile
(chain8_64mb_jagged, op_overhead, trace_compile_200_ops).
  encoder_step   one training step (forward + backward of a loss summed over
                 the real tokens) of TransformerEncoderLayer(256, 4, 1024) on
                 a ragged batch: jag eager nested, jag.compile, torch padded
                 eager (src_key_padding_mask), torch.compile on the padded
                 batch, torch nested (or torch's error). Tokens/s count the
                 real tokens. Peak memory: each side runs alone in a fresh
                 process (this file with --memory SIDE): its peak RSS during
                 its first 4 steps over its RSS at the end of its setup
                 (imports, model, data), from /proc/self/status (VmHWM,
                 reset by /proc/self/clear_refs; ru_maxrss would start at
                 the parent's peak, which Linux carries across exec); a
                 compiled side's peak includes compiling.

Usage: python bench/bench_torch.py [--quick]
       python bench/bench_torch.py --memory SIDE [--quick]   (one side's peak)
"""
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

try:
    import jag
except ImportError:  # from the source tree: the in-place built package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import jag
import jag.nn.functional as JF

QUICK = "--quick" in sys.argv[1:]
# Many short rounds, not a few long ones: this machine's speed drifts over
# seconds (other tenants), and a side whose block fell into a slow second
# took the whole row with it (embedding_bag, B = 64: jag's blocks of 0.1 s
# measured 104-212 us in one process, at 106-120 us a minute later).
ROUNDS = 9 if not QUICK else 3
SAMPLES = 3                       # timed samples per side per round; the round keeps the fastest
BUDGET = 0.05 if not QUICK else 0.02  # seconds per side per round
SLOW_S = 0.5 if not QUICK else 0.25   # a side slower than this per call is timed once
ENCODER = {"d_model": 256, "nhead": 4, "dim_feedforward": 1024, "batch": 32}
COMPILE_LIMIT_S = 120 if QUICK else 600  # one side's memory process (torch.compile's compiling included)
# jag against torch, max abs difference: float32 results; bfloat16 results
# (both sides sum in float32, in their own orders, and round each output to
# bfloat16 once: they may land one ulp apart, 2^-5 for the values in [4, 8)
# and 2^-4 up to 16 that these rows give)
ATOL = {"float32": 1e-3, "bfloat16": 6.25e-2}


def thread_count():
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def emit(name, params, values):
    print(json.dumps({"bench": "vs_torch", "name": name, "params": params, "values": values}), flush=True)


def first_line(e):
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0][:300] if text else "")


# ---- timing -----------------------------------------------------------------

def per_call(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def calls_per_sample(fn):
    """(calls per timed sample so that a round of SAMPLES samples takes about
    BUDGET seconds, at least one; seconds of one call)."""
    t = per_call(fn, 1)  # the first call: warm-up and a first estimate
    n = 1
    while t * n < BUDGET / (4 * SAMPLES) and n < 1 << 20:
        n *= 4
        t = per_call(fn, n)
    return max(1, int(BUDGET / SAMPLES / max(t, 1e-9))), t


def interleaved(fns, slow_s=None):
    """{key: (median, min, max)} seconds per call of each side, timed in
    ROUNDS rounds, each running every side in turn: the median over the
    rounds of each round's fastest sample (interference only ever slows a
    sample down), with the range of those. A side slower than
    slow_s (default SLOW_S) per call is timed once, so that one slow path
    (torch's fallbacks) does not take the whole run's time; every side has
    been called once before (a result check or a first step)."""
    slow_s = SLOW_S if slow_s is None else slow_s
    counts = {k: calls_per_sample(f) for k, f in fns.items()}
    rounds = {k: [] for k in fns}
    for r in range(ROUNDS):
        for k, f in fns.items():
            n, t = counts[k]
            if t > slow_s:  # its one call in calls_per_sample (after a first call elsewhere) is the time
                if r == 0:
                    rounds[k].append(t)
                continue
            f()
            rounds[k].append(min(per_call(f, n) for _ in range(SAMPLES)))
    return {k: (statistics.median(r), min(r), max(r)) for k, r in rounds.items()}


def timed_values(times, prefix_of):
    out = {}
    for k, (med, lo, hi) in times.items():
        p = prefix_of[k]
        out[p + "_s"], out[p + "_s_min"], out[p + "_s_max"] = med, lo, hi
    return out


# ---- data -----------------------------------------------------------------

def long_tailed_lengths(rng, batch, scale, low, high):
    """Pareto(1.2) lengths: most short, a few long (as bench_python's)."""
    return [int(min(high, max(low, (rng.pareto(1.2) + 1.0) * scale))) for _ in range(batch)]


class Batch:
    """One ragged batch of float32 rows, as jag nested, torch nested and
    torch padded tensors over the same numbers."""

    def __init__(self, torch, rng, lengths, dim):
        self.lengths = lengths
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.values = rng.standard_normal((int(self.offsets[-1]), dim)).astype(np.float32)
        self.max_len = max(lengths)
        padded = np.zeros((len(lengths), self.max_len, dim), np.float32)
        for b, n in enumerate(lengths):
            padded[b, :n] = self.values[self.offsets[b]:self.offsets[b + 1]]
        self.jag = jag.nested.nested_tensor_from_jagged(jag.from_numpy(self.values), jag.from_numpy(self.offsets))
        self.torch_nested = torch.nested.nested_tensor_from_jagged(torch.from_numpy(self.values),
                                                                   torch.from_numpy(self.offsets))
        self.padded = torch.from_numpy(padded)
        self.pad_mask = torch.from_numpy(np.arange(self.max_len)[None, :] >= np.array(lengths)[:, None])

    def real_rows(self, padded):
        """The real rows of a (B, L, ...) array, packed as the nested values."""
        return np.concatenate([padded[b, :n] for b, n in enumerate(self.lengths)])

    def params(self):
        tokens = int(self.offsets[-1])
        return {"B": len(self.lengths), "lengths": "long-tailed", "tokens": tokens, "max_len": self.max_len,
                "real_over_padded": tokens / (len(self.lengths) * self.max_len)}


def to_numpy(t):
    return t.detach().numpy() if hasattr(t, "detach") else t.numpy()


# ---- nested ops -----------------------------------------------------------

def nested_cases(torch, rng, batch, dim):
    """(op, jag fn, torch nested fn, torch padded fn, rows) per op: rows maps
    (side, result) to a numpy array of the real rows, to compare sides."""
    F = torch.nn.functional
    x, tn, tp = batch.jag, batch.torch_nested, batch.padded
    w_np = (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
    b_np = rng.standard_normal(dim).astype(np.float32)
    g_np = (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32)
    jw, jb, jg = jag.from_numpy(w_np), jag.from_numpy(b_np), jag.from_numpy(g_np)
    tw, tb, tg = torch.from_numpy(w_np), torch.from_numpy(b_np), torch.from_numpy(g_np)

    def rows(side, r):  # (B, j, D) results
        return to_numpy(r.values()) if side != "padded" else batch.real_rows(to_numpy(r))

    def dense_rows(side, r):  # (B, D) results
        return to_numpy(r)

    heads = 4
    hd = dim // heads
    jq = x.unflatten(-1, (heads, hd)).transpose(1, 2)             # (B, H, j, hd)
    tq = tn.unflatten(-1, (heads, hd)).transpose(1, 2)
    pq = tp.unflatten(-1, (heads, hd)).transpose(1, 2)            # (B, H, L, hd)
    key_ok = (~batch.pad_mask)[:, None, None, :]                   # True: takes part

    def attn_rows(side, r):  # (B, H, j, hd) -> rows of (j, H * hd)
        if side == "padded":
            return batch.real_rows(to_numpy(r.transpose(1, 2))).reshape(-1, dim)
        return to_numpy(r.transpose(1, 2).values()).reshape(-1, dim)

    vocab = 10000
    table_np = rng.standard_normal((vocab, dim)).astype(np.float32)
    idx_np = rng.integers(0, vocab, int(batch.offsets[-1])).astype(np.int64)
    starts_np = batch.offsets[:-1].copy()
    pidx_np = np.zeros((len(batch.lengths), batch.max_len), np.int64)
    for b, n in enumerate(batch.lengths):
        pidx_np[b, :n] = idx_np[batch.offsets[b]:batch.offsets[b + 1]]
    jt, ji, js = jag.from_numpy(table_np), jag.from_numpy(idx_np), jag.from_numpy(starts_np)
    tt, ti, ts = torch.from_numpy(table_np), torch.from_numpy(idx_np), torch.from_numpy(starts_np)
    pidx = torch.from_numpy(pidx_np)
    keep = (~batch.pad_mask).unsqueeze(-1).float()
    counts = torch.tensor(batch.lengths, dtype=torch.float32).unsqueeze(-1)

    return [
        ("relu", lambda: jag.relu(x), lambda: torch.relu(tn), lambda: torch.relu(tp), rows),
        ("gelu", lambda: JF.gelu(x), lambda: F.gelu(tn), lambda: F.gelu(tp), rows),
        ("sin", lambda: jag.sin(x), lambda: torch.sin(tn), lambda: torch.sin(tp), rows),
        ("exp", lambda: jag.exp(x), lambda: torch.exp(tn), lambda: torch.exp(tp), rows),
        ("add", lambda: x + x, lambda: tn + tn, lambda: tp + tp, rows),
        ("linear (D x D weight + bias)", lambda: JF.linear(x, jw, jb), lambda: F.linear(tn, tw, tb),
         lambda: F.linear(tp, tw, tb), rows),
        ("layer_norm", lambda: JF.layer_norm(x, (dim,), jg, jb), lambda: F.layer_norm(tn, (dim,), tg, tb),
         lambda: F.layer_norm(tp, (dim,), tg, tb), rows),
        ("softmax (last dim)", lambda: jag.softmax(x, -1), lambda: torch.softmax(tn, -1),
         lambda: torch.softmax(tp, -1), rows),
        ("sum (ragged dim)", lambda: x.sum(dim=1), lambda: tn.sum(dim=1), lambda: tp.sum(dim=1), dense_rows),
        ("sdpa (%d heads)" % heads, lambda: JF.scaled_dot_product_attention(jq, jq, jq),
         lambda: F.scaled_dot_product_attention(tq, tq, tq),
         lambda: F.scaled_dot_product_attention(pq, pq, pq, attn_mask=key_ok), attn_rows),
        # torch's own ragged form of embedding_bag is indices + offsets (no torch.nested);
        # padded: embedding of the padded indices, masked mean
        ("embedding_bag (mean, vocab %d)" % vocab, lambda: JF.embedding_bag(ji, jt, js, mode="mean"),
         lambda: F.embedding_bag(ti, tt, ts, mode="mean"),
         lambda: (F.embedding(pidx, tt) * keep).sum(1) / counts, dense_rows),
    ]


def nested_bf16_cases(torch, batch, dim):
    """linear and sdpa on the batch and weights rounded to bfloat16, on
    every side; rows as nested_cases', widened to float32 to compare. Its
    own generator: the float32 rows' data stays as it was."""
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    bf = torch.bfloat16
    x, tn, tp = batch.jag.to(jag.bfloat16), batch.torch_nested.to(bf), batch.padded.to(bf)
    w_np = (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
    b_np = rng.standard_normal(dim).astype(np.float32)
    jw, jb = jag.from_numpy(w_np).to(jag.bfloat16), jag.from_numpy(b_np).to(jag.bfloat16)
    tw, tb = torch.from_numpy(w_np).to(bf), torch.from_numpy(b_np).to(bf)

    def rows(side, r):  # (B, j, D) results
        return to_numpy(r.values().float()) if side != "padded" else batch.real_rows(to_numpy(r.float()))

    heads = 4
    hd = dim // heads
    jq = x.unflatten(-1, (heads, hd)).transpose(1, 2)             # (B, H, j, hd)
    tq = tn.unflatten(-1, (heads, hd)).transpose(1, 2)
    pq = tp.unflatten(-1, (heads, hd)).transpose(1, 2)            # (B, H, L, hd)
    key_ok = (~batch.pad_mask)[:, None, None, :]

    def attn_rows(side, r):  # (B, H, j, hd) -> rows of (j, H * hd)
        if side == "padded":
            return batch.real_rows(to_numpy(r.transpose(1, 2).float())).reshape(-1, dim)
        return to_numpy(r.transpose(1, 2).values().float()).reshape(-1, dim)

    return [
        ("linear (bf16)", lambda: JF.linear(x, jw, jb), lambda: F.linear(tn, tw, tb), lambda: F.linear(tp, tw, tb),
         rows),
        ("sdpa (bf16)", lambda: JF.scaled_dot_product_attention(jq, jq, jq),
         lambda: F.scaled_dot_product_attention(tq, tq, tq),
         lambda: F.scaled_dot_product_attention(pq, pq, pq, attn_mask=key_ok), attn_rows),
    ]


def bench_nested(torch, threads):
    rng = np.random.default_rng(0)
    shapes = [(32, 256)] if QUICK else [(32, 256), (64, 512)]
    for B, D in shapes:
        batch = Batch(torch, rng, long_tailed_lengths(rng, B, 16, 8, 512), D)
        cases = [c + ("float32",) for c in nested_cases(torch, rng, batch, D)]
        for c in nested_bf16_cases(torch, batch, D):  # each beside its float32 row
            at = max(i for i, f in enumerate(cases) if f[0].split()[0] == c[0].split()[0])
            cases.insert(at + 1, c + ("bfloat16",))
        for op, jfn, tfn, pfn, rows, dtype in cases:
            params = dict(batch.params(), op=op, D=D)
            values = {"threads": threads}
            sides = {"jag": jfn, "padded": pfn}
            try:
                ref = ("nested", rows("nested", tfn()))
                sides["nested"] = tfn
            except Exception as e:  # noqa: BLE001 - torch refused the op: say why
                values["torch_nested"] = "unsupported: " + first_line(e)
                ref = ("padded", rows("padded", pfn()))
            mine = rows("jag", jfn())
            diff = float(np.max(np.abs(mine - ref[1]))) if mine.shape == ref[1].shape else float("inf")
            values.update(compared_with="torch " + ref[0], max_abs_diff=diff, agree=diff <= ATOL[dtype], dtype=dtype)
            times = interleaved(sides)
            values.update(timed_values(times, {"jag": "jag", "nested": "torch_nested", "padded": "torch_padded"}))
            if "nested" in times:
                values["ratio_nested"] = times["nested"][0] / times["jag"][0]
            values["ratio_padded"] = times["padded"][0] / times["jag"][0]
            emit("nested_op", params, values)


# ---- dense ops --------------------------------------------------------------

def bench_dense(torch, threads):
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    cases = []
    for m in (8, 128, 1024):
        a = rng.standard_normal((m, 1024)).astype(np.float32)
        b = rng.standard_normal((1024, 1024)).astype(np.float32)
        ja, jb, ta, tb = jag.from_numpy(a), jag.from_numpy(b), torch.from_numpy(a), torch.from_numpy(b)
        cases.append(("mm", "%d x 1024 @ 1024 x 1024" % m, 2.0 * m * 1024 * 1024,
                      (lambda ja=ja, jb=jb: jag.mm(ja, jb)), (lambda ta=ta, tb=tb: torch.mm(ta, tb))))
    for n in (1 << 20, 1 << 24):
        x = rng.standard_normal((n // 1024, 1024)).astype(np.float32)
        jx, tx = jag.from_numpy(x), torch.from_numpy(x)
        ones, zeros = np.ones(1024, np.float32), np.zeros(1024, np.float32)
        jw, jb, tw, tb = jag.from_numpy(ones), jag.from_numpy(zeros), torch.from_numpy(ones), torch.from_numpy(zeros)
        size = "(%d, 1024), %dM elements" % (n // 1024, n >> 20)
        cases += [
            ("relu", size, None, lambda jx=jx: jag.relu(jx), lambda tx=tx: torch.relu(tx)),
            ("gelu", size, None, lambda jx=jx: JF.gelu(jx), lambda tx=tx: F.gelu(tx)),
            ("sin", size, None, lambda jx=jx: jag.sin(jx), lambda tx=tx: torch.sin(tx)),
            ("exp", size, None, lambda jx=jx: jag.exp(jx), lambda tx=tx: torch.exp(tx)),
            ("softmax (last dim)", size, None, lambda jx=jx: jag.softmax(jx, -1), lambda tx=tx: torch.softmax(tx, -1)),
            ("layer_norm", size, None, lambda jx=jx, jw=jw, jb=jb: JF.layer_norm(jx, (1024,), jw, jb),
             lambda tx=tx, tw=tw, tb=tb: F.layer_norm(tx, (1024,), tw, tb)),
        ]
    # reductions and softmax down a middle dim (a batch of equal-length
    # sequences reduced over time)
    x = rng.standard_normal((32, 128, 256)).astype(np.float32)
    jx, tx = jag.from_numpy(x), torch.from_numpy(x)
    size = "(32, 128, 256), dim 1"
    cases += [
        ("sum (middle dim)", size, None, lambda: jag.sum(jx, 1), lambda: torch.sum(tx, 1)),
        ("var (middle dim)", size, None, lambda: jag.var(jx, 1), lambda: torch.var(tx, 1)),
        ("amax (middle dim)", size, None, lambda: jag.amax(jx, 1), lambda: torch.amax(tx, 1)),
        ("softmax (middle dim)", size, None, lambda: jag.softmax(jx, 1), lambda: torch.softmax(tx, 1)),
        ("logsumexp (middle dim)", size, None, lambda: jag.logsumexp(jx, 1), lambda: torch.logsumexp(tx, 1)),
    ]
    for op, size, flops, jfn, tfn in cases:
        diff = float(np.max(np.abs(to_numpy(jfn()) - to_numpy(tfn()))))
        tol = ATOL["float32"] * (32 if op == "mm" else 1)  # sums of 1024 products of N(0, 1) numbers
        times = interleaved({"jag": jfn, "torch": tfn})
        values = dict(timed_values(times, {"jag": "jag", "torch": "torch"}), threads=threads,
                      ratio=times["torch"][0] / times["jag"][0], max_abs_diff=diff, agree=diff <= tol)
        if flops:
            values.update(jag_gflops=flops / times["jag"][0] / 1e9, torch_gflops=flops / times["torch"][0] / 1e9)
        emit("dense_op", {"op": op, "size": size}, values)


# ---- a nested batch of one ----------------------------------------------------

def bench_batch_of_one(torch, threads):
    """torch.nested on a batch of one, (1, j, 64) with j = 8, against the
    same op on the dense (1, 8, 64) tensor: what torch's nested layer costs
    over its dense op (the report's torch cell for jag's batch-of-one
    target, which bench_nested measures in C on the same shape). The ops of
    that target that torch.nested runs; one it refuses is a figure with the
    error."""
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    v = torch.from_numpy(rng.standard_normal((8, 64)).astype(np.float32))
    w = torch.from_numpy((rng.standard_normal((64, 64)) / 8).astype(np.float32))
    b = torch.zeros(64)
    nt = torch.nested.nested_tensor_from_jagged(v, torch.tensor([0, 8]))
    dense = v.unsqueeze(0)
    ops = {"relu": lambda x: torch.relu(x), "gelu": lambda x: F.gelu(x), "linear": lambda x: F.linear(x, w, b),
           "sum_ragged": lambda x: x.sum(dim=1), "softmax_ragged": lambda x: torch.softmax(x, 1),
           "max_ragged": lambda x: torch.max(x, 1), "logsumexp_ragged": lambda x: torch.logsumexp(x, 1)}
    for op, fn in ops.items():
        params = {"op": op, "rows": 8, "D": 64}
        try:
            fn(nt)
        except Exception as e:  # noqa: BLE001 - torch.nested refuses the op: say so
            emit("nested_batch_of_one", params, {"torch_nested_error": first_line(e)})
            continue
        times = interleaved({"nested": lambda: fn(nt), "dense": lambda: fn(dense)})
        emit("nested_batch_of_one", params, dict(timed_values(times, {"nested": "nested", "dense": "dense"}),
                                                 over_ns=(times["nested"][1] - times["dense"][1]) * 1e9,
                                                 threads=threads))


# ---- the torch column of bench_dense's tables --------------------------------

# The sizes of bench/bench_dense.c's main (its figures and these share
# names and params, so that the report puts them side by side).
POINTWISE_N = 16 << 20
POINTWISE_INPUTS = {"clone": 1, "relu": 1, "mul_scalar": 1, "add": 2, "mul": 2, "exp": 1, "sigmoid": 1}
MM_SIZES = (64, 256, 512, 1024)
BF16_ROWS = (8, 128, 1024)


def emit_torch(name, params, values):
    """A torch figure for the table of the C figure with the same name and
    params (the report's torch column)."""
    print(json.dumps({"bench": "torch", "name": name, "params": params, "values": values}), flush=True)


def bench_dense_columns(torch, threads):
    """torch's figures beside bench_dense's, called from Python as users do
    (torch's per-call cost, a few microseconds, is in the smallest GEMM's
    figure; it is under 1% of the others): the memory-bound and
    transcendental ops on the same 64 MiB float32 operands (GB/s counted as
    bench_dense counts them: inputs read + output written, the output
    allocated by the op; relu also into an output allocated once, which
    shows what torch's allocation of a fresh 64 MiB block costs), torch.mm's GFLOP/s on the same square products,
    and bfloat16 torch.mm against float32 on the same (m, 1024) @ (1024,
    1024) (the ratio bench_dense reports for jag_mm)."""
    rng = np.random.default_rng(2)
    a = torch.from_numpy(rng.uniform(-2, 2, POINTWISE_N).astype(np.float32))
    b = torch.from_numpy(rng.uniform(-2, 2, POINTWISE_N).astype(np.float32))
    ops = {"clone": lambda: a.clone(), "relu": lambda: torch.relu(a), "mul_scalar": lambda: a * 1.5,
           "add": lambda: a + b, "mul": lambda: a * b, "exp": lambda: torch.exp(a), "sigmoid": lambda: torch.sigmoid(a)}
    out = torch.empty_like(a)
    for op, fn in ops.items():
        sides = {op: fn}
        if op == "relu":  # the same op into an output allocated once: what torch's allocation costs
            sides["out"] = lambda: torch.clamp_min(a, 0.0, out=out)
        times = interleaved(sides)
        med, lo, hi = times[op]
        moved = 4.0 * POINTWISE_N * (POINTWISE_INPUTS[op] + 1)
        values = {"op_s": med, "op_s_min": lo, "op_s_max": hi, "op_gbs": moved / med / 1e9, "threads": threads}
        if "out" in times:
            values["op_s_preallocated"] = times["out"][0]
        emit_torch("pointwise_vs_memcpy", {"op": op, "n": POINTWISE_N, "dtype": "float32"}, values)
    del a, b, out
    for n in MM_SIZES:
        x = torch.from_numpy(rng.uniform(-1, 1, (n, n)).astype(np.float32))
        y = torch.from_numpy(rng.uniform(-1, 1, (n, n)).astype(np.float32))
        med, lo, hi = interleaved({"mm": lambda: torch.mm(x, y)})["mm"]
        emit_torch("mm_vs_blas", {"n": n, "dtype": "float32"},
                   {"s": med, "s_min": lo, "s_max": hi, "gflops": 2.0 * n ** 3 / med / 1e9, "threads": threads})
    for m in BF16_ROWS:
        x = torch.from_numpy(rng.uniform(-1, 1, (m, 1024)).astype(np.float32))
        y = torch.from_numpy(rng.uniform(-1, 1, (1024, 1024)).astype(np.float32))
        xh, yh = x.to(torch.bfloat16), y.to(torch.bfloat16)
        times = interleaved({"bf16": lambda: torch.mm(xh, yh), "f32": lambda: torch.mm(x, y)})
        flops = 2.0 * m * 1024 * 1024
        values = dict(timed_values(times, {"bf16": "bf16", "f32": "f32"}), threads=threads,
                      bf16_gflops=flops / times["bf16"][0] / 1e9, f32_gflops=flops / times["f32"][0] / 1e9,
                      ratio_vs_f32=times["f32"][0] / times["bf16"][0])
        emit_torch("bf16_mm_vs_f32", {"m": m, "k": 1024, "n": 1024, "dtype": "bfloat16"}, values)


# The parameter sets of bench/bench_optim.c's main: (set, tensors, rows, cols).
OPTIM_SETS = (("dram", 6 if QUICK else 12, 768, 768), ("cache", 8, 64, 256))


def bench_optim_columns(torch, threads):
    """torch's fused AdamW and SGD-with-momentum steps (fused=True, the
    fastest CPU form torch has) over bench_optim.c's parameter sets, under
    its figures' names and params: GB/s over the bytes a step must move,
    counted as bench_optim counts them (AdamW 7, SGD 5 float32 accesses per
    element); timed interleaved with jag.optim's same step on the same
    numbers from Python (jag_step_s: bench_optim's figure ran minutes
    before, in another process)."""
    import jag.optim
    for name, accesses in (("adamw", 7), ("sgd_momentum", 5)):
        for label, n_tensors, rows, cols in OPTIM_SETS:
            gen = torch.Generator().manual_seed(4)
            params = [torch.nn.Parameter(torch.rand(rows, cols, generator=gen) * 0.2 - 0.1) for _ in range(n_tensors)]
            jparams = [jag.from_numpy(p.detach().numpy().copy()).requires_grad_(True) for p in params]
            for p, q in zip(params, jparams):
                p.grad = torch.full_like(p, 1e-3)  # the gradient of sum(p * 0.001), as bench_optim's
                (q * 1e-3).sum().backward()
            if name == "adamw":
                opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, fused=True)
                jopt = jag.optim.AdamW(jparams, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
            else:
                opt = torch.optim.SGD(params, lr=1e-4, momentum=0.9, fused=True)
                jopt = jag.optim.SGD(jparams, lr=1e-4, momentum=0.9)
            opt.step(), jopt.step()  # the state exists before timing
            elements = n_tensors * rows * cols
            moved = elements * 4 * accesses
            times = interleaved({"step": opt.step, "jag_step": jopt.step})
            med, lo, hi = times["step"]
            emit_torch("step_vs_memcpy", {"optimizer": name, "set": label, "tensors": n_tensors, "elements": elements,
                                          "bytes_moved": moved},
                       dict(timed_values(times, {"step": "step", "jag_step": "jag_step"}), step_gbs=moved / med / 1e9,
                            jag_step_gbs=moved / times["jag_step"][0] / 1e9, torch_over_jag=med / times["jag_step"][0],
                            impl="torch.optim.%s(fused=True)" % ("AdamW" if name == "adamw" else "SGD"), threads=threads))
            del opt, params, jopt, jparams


# ---- attention, beside bench_nested's -----------------------------------------

ATTN_HEADS, ATTN_DH, ATTN_CAP = 4, 32, 256  # bench_nested.c's bench_attention
LCG_A, LCG_C, U64 = 6364136223846793005, 1442695040888963407, (1 << 64) - 1


def bench_lengths(dist, batch, seed, doc_lengths=None):
    """bench/bench_lengths.h's make_lengths: the same seeded LCG, so the
    same batch as the C benchmarks ("uniform": 1..512; "corpus": the
    lengths of the documents it draws)."""
    s = (seed * LCG_A + LCG_C) & U64
    out = []
    for _ in range(batch):
        s = (s * LCG_A + LCG_C) & U64
        if dist == "uniform":
            out.append(1 + (s >> 33) % 512)
        elif dist == "corpus":
            out.append(doc_lengths[(s >> 33) % len(doc_lengths)])
        else:
            raise ValueError(dist)
    return out


def corpus_doc_lengths():
    """The fortunes corpus's document lengths in tokens, as examples/corpus.h
    reads them (examples/train_ragged.py's loader: the same documents), or
    None without the corpus."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    try:
        import train_ragged as tr
        return [len(d) for d in tr.load_corpus(tr.FORTUNES, False).docs]
    except (ImportError, SystemExit, OSError):
        return None
    finally:
        sys.path.pop(0)


def bench_attention_columns(torch, threads):
    """torch's figures beside bench_nested's attention ones, on the same
    lengths (uniform B = 8, the corpus's B = 64; capped at 256), H = 4, Dh =
    32: F.scaled_dot_product_attention on the padded (B, H, L, Dh) batch
    without a mask (jag's padded side, the cheapest padded attention) and on
    torch.nested jagged tensors (B, H, j, Dh) (or torch's error), forward,
    causal forward and the backward alone (a kept graph, as bench_nested),
    timed interleaved with torch.mm on 512 x 512 (the GEMM rate torch's real
    FLOP rate is set against: 4 Dh per visible (query, key) pair and head
    forward, 8 Dh backward, as bench_nested counts them)."""
    F = torch.nn.functional
    docs = corpus_doc_lengths()
    rng = np.random.default_rng(5)
    g1 = torch.from_numpy(rng.standard_normal((512, 512)).astype(np.float32))
    g2 = torch.from_numpy(rng.standard_normal((512, 512)).astype(np.float32))
    for dist, batch in (("uniform", 8), ("corpus", 64)):
        if dist == "corpus" and docs is None:
            continue
        lens = [min(n, ATTN_CAP) for n in bench_lengths(dist, batch, batch * 977, docs)]
        maxlen, h, dh = max(lens), ATTN_HEADS, ATTN_DH
        params = {"lengths": dist, "B": batch, "H": h, "Dh": dh, "max_len": maxlen}
        pairs = sum(n * n for n in lens) * h
        causal_pairs = sum(n * (n + 1) / 2 for n in lens) * h
        padded_pairs = batch * maxlen * maxlen * h
        padded_causal = batch * maxlen * (maxlen + 1) / 2 * h

        def sides(requires_grad):
            comps = [[torch.from_numpy(rng.standard_normal((n, h, dh)).astype(np.float32)) for n in lens]
                     for _ in range(4)]  # q, k, v, the output's gradient
            padded = [torch.zeros(batch, maxlen, h, dh) for _ in range(4)]
            for t, cs in zip(padded, comps):
                for b, c in enumerate(cs):
                    t[b, :lens[b]] = c
            padded = [t.transpose(1, 2).contiguous().requires_grad_(requires_grad and i < 3) for i, t in enumerate(padded)]
            nested = [torch.nested.nested_tensor(cs, layout=torch.jagged).transpose(1, 2) for cs in comps]
            if requires_grad:
                nested = [t.detach().requires_grad_(i < 3) for i, t in enumerate(nested)]
            return padded, nested

        padded, nested = sides(False)
        rows = (("attention", False, pairs, padded_pairs, 4.0 * dh),
                ("attention_causal", True, causal_pairs, padded_causal, 4.0 * dh))
        for name, causal, real, padded_real, fpp in rows:
            fns = {"padded": lambda c=causal: F.scaled_dot_product_attention(*padded[:3], is_causal=c),
                   "gemm": lambda: torch.mm(g1, g2)}
            err = None
            try:
                F.scaled_dot_product_attention(*nested[:3], is_causal=causal)
                fns["nested"] = lambda c=causal: F.scaled_dot_product_attention(*nested[:3], is_causal=c)
            except Exception as e:  # noqa: BLE001 - torch refuses: say why
                err = first_line(e)
            emit_torch(name, params, attention_values(interleaved(fns), err, real, padded_real, fpp, threads))
        # backward alone, through kept graphs
        padded, nested = sides(True)
        fns = {"gemm": lambda: torch.mm(g1, g2)}

        def backward(y, g, inputs):  # the gradients dropped after each run (torch's zero_grad(set_to_none=True))
            y.backward(g, retain_graph=True)
            for t in inputs:
                t.grad = None

        py = F.scaled_dot_product_attention(*padded[:3])
        fns["padded"] = lambda: backward(py, padded[3], padded[:3])
        err = None
        try:
            ny = F.scaled_dot_product_attention(*nested[:3])
            ng = torch.randn_like(ny)  # the output's own structure (nested[3] has another ragged symbol)
            backward(ny, ng, nested[:3])
            fns["nested"] = lambda: backward(ny, ng, nested[:3])
        except Exception as e:  # noqa: BLE001
            err = first_line(e)
        emit_torch("attention_backward", params, attention_values(interleaved(fns), err, pairs, padded_pairs, 8.0 * dh,
                                                                  threads))
        del padded, nested


RAGGED_CASES = (("uniform", 8, 256), ("uniform", 64, 256), ("corpus", 8, 256), ("corpus", 64, 256), ("uniform", 64, 4096))


def bench_ragged_columns(torch, threads):
    """torch's figures beside bench_nested's ragged_vs_memcpy ones, on the
    same batches (its lengths, bench_lengths.h's generator): sum, softmax,
    logsumexp and var over the ragged dim of torch.nested jagged tensors (or
    torch's error) and of the padded batch (over its padded rows too, as
    jag's padded side), the bytes counted as bench_nested counts them (the
    real values read, the output written), against torch's copy of half as
    many bytes out of the values into a buffer allocated once (bench_nested's
    memcpy), and for softmax and logsumexp against torch.exp over the same
    values (time of the exp / time of the op)."""
    docs = corpus_doc_lengths()
    rng = np.random.default_rng(7)
    for dist, batch, dim in RAGGED_CASES:
        if dist == "corpus" and docs is None:
            continue
        lens = bench_lengths(dist, batch, batch * 131, docs)
        offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        values = torch.from_numpy(rng.standard_normal((int(offs[-1]), dim)).astype(np.float32))
        nested = torch.nested.nested_tensor_from_jagged(values, torch.from_numpy(offs))
        padded = torch.zeros(batch, max(lens), dim)
        for b in range(batch):
            padded[b, :lens[b]] = values[offs[b]:offs[b + 1]]
        vbytes = values.numel() * 4
        ops = {"sum_ragged": lambda t: t.sum(dim=1), "softmax_ragged": lambda t: torch.softmax(t, dim=1),
               "logsumexp_ragged": lambda t: torch.logsumexp(t, dim=1), "var_ragged": lambda t: torch.var(t, dim=1)}
        for op, fn in ops.items():
            moved = vbytes + (vbytes if op == "softmax_ragged" else batch * dim * 4)
            half = values.reshape(-1)[:moved // 2 // 4]
            dst = torch.empty_like(half)
            fns = {"padded": lambda f=fn: f(padded), "copy": lambda: dst.copy_(half)}
            err = None
            try:
                fn(nested)
                fns["nested"] = lambda f=fn: f(nested)
            except Exception as e:  # noqa: BLE001
                err = first_line(e)
            if op in ("softmax_ragged", "logsumexp_ragged"):
                fns["exp"] = lambda: torch.exp(values)
            times = interleaved(fns)
            copy_gbs = 2 * half.numel() * 4 / times["copy"][0] / 1e9
            v = dict(timed_values(times, {k: k for k in times}), threads=threads, copy_gbs=copy_gbs)
            for side in ("nested", "padded"):
                if side in times:
                    v[side + "_gbs"] = moved / times[side][0] / 1e9
                    v[side + "_ratio_vs_copy"] = v[side + "_gbs"] / copy_gbs
                    if "exp" in times:
                        v["exp_over_" + side] = times["exp"][0] / times[side][0]
            if err:
                v["nested_error"] = err
            emit_torch("ragged_vs_memcpy", {"op": op, "lengths": dist, "B": batch, "D": dim, "rows": int(offs[-1])}, v)
        del values, nested, padded


def attention_values(times, nested_error, real, padded_real, fpp, threads):
    gemm = 2.0 * 512 ** 3 / times["gemm"][0] / 1e9
    v = dict(timed_values(times, {k: k for k in times}), threads=threads, gemm_gflops=gemm,
             padded_over_real=padded_real / real)
    v["padded_real_gflops"] = real * fpp / times["padded"][0] / 1e9
    v["padded_ratio_vs_gemm"] = v["padded_real_gflops"] / gemm
    if "nested" in times:
        v["nested_real_gflops"] = real * fpp / times["nested"][0] / 1e9
        v["nested_ratio_vs_gemm"] = v["nested_real_gflops"] / gemm
        v["nested_speedup"] = times["padded"][0] / times["nested"][0]
    else:
        v["nested_error"] = nested_error
    return v


# ---- the compiler's rows, beside bench_trace's ---------------------------------

def chain8(x):
    """bench_trace.c's chain8: relu(|-(square(x * 1.5 + 0.5))| + x) * 0.25, 8 ops."""
    return (((x * 1.5 + 0.5).square().neg().abs() + x).relu()) * 0.25


def ops200(x, w):
    """bench_trace.c's ops200: 200 ops cycling mm, tanh, add x, mul 0.5, softmax."""
    import torch
    cur = x
    for i in range(200):
        k = i % 5
        cur = (torch.mm(cur, w) if k == 0 else torch.tanh(cur) if k == 1 else cur + x if k == 2
               else cur * 0.5 if k == 3 else torch.softmax(cur, -1))
    return cur


def chain_offsets(batch, target_rows):
    """bench_trace.c's jagged(): component lengths from its xorshift64."""
    s, offs = 88172645463325252, [0]
    for _ in range(batch):
        s ^= (s << 13) & U64
        s ^= s >> 7
        s ^= (s << 17) & U64
        offs.append(offs[-1] + 1 + s % (2 * target_rows // batch))
    return offs


def bench_trace_columns(torch, threads):
    """torch's figures beside bench_trace's: the 8-op pointwise chain on the
    same 64 MB jagged batch (B 512, D 256, bench_trace's lengths) as a
    torch.nested tensor, eager against torch.compile (and on its values
    alone, a plain tensor, where torch.compile refuses the nested one),
    against torch's copy of the same bytes into a buffer allocated once
    (jag's figure: its memcpy); the same chain on 4 x 4 floats, time per op
    eager and compiled (bench_trace's op_overhead); and torch.compile's
    first call of bench_trace's 200-op program on 16 x 16 floats (compiling
    included, inductor's caches off, once: against jag's trace + compile)."""
    for part in (trace_chain8, trace_op_overhead, trace_ops200):
        try:
            part(torch, threads)
        except Exception as e:  # noqa: BLE001 - torch.compile cannot run here: the row stays without torch
            print("bench_torch: %s: %s" % (part.__name__, first_line(e)), file=sys.stderr)
        torch._dynamo.reset()


def trace_chain8(torch, threads):
    dim = 256
    offs = chain_offsets(512, (64 << 20) // 4 // dim)
    rng = np.random.default_rng(6)
    values = torch.from_numpy(rng.standard_normal((offs[-1], dim)).astype(np.float32))
    nested = torch.nested.nested_tensor_from_jagged(values, torch.tensor(offs, dtype=torch.int64))
    params = {"ops": 8, "B": 512, "D": dim, "MB": round(values.numel() * 4 / (1 << 20), 1), "threads": threads}
    dst = torch.empty_like(values)
    fns = {"eager": lambda: chain8(nested), "memcpy": lambda: dst.copy_(values)}
    torch._dynamo.reset()
    compiled, err = torch.compile(chain8), None
    try:
        compiled(nested)
        fns["compiled"] = lambda: compiled(nested)
    except Exception as e:  # noqa: BLE001
        err = first_line(e)
        torch._dynamo.reset()
        compiled = torch.compile(chain8)
        compiled(values)
        fns["compiled"] = lambda: compiled(values)
    times = interleaved(fns)
    v = dict(timed_values(times, {k: k for k in times}), speedup=times["eager"][0] / times["compiled"][0],
             compiled_over_memcpy=times["compiled"][0] / times["memcpy"][0], threads=threads,
             compiled_on="torch.nested" if err is None else "values (torch.compile refused the nested tensor: %s)" % err)
    emit_torch("chain8_64mb_jagged", params, v)


def trace_op_overhead(torch, threads):
    rng = np.random.default_rng(8)
    x = torch.from_numpy(rng.standard_normal((4, 4)).astype(np.float32))
    torch._dynamo.reset()
    small = torch.compile(chain8)
    small(x)
    times = interleaved({"eager": lambda: chain8(x), "compiled": lambda: small(x)})
    emit_torch("op_overhead", {"ops": 8, "shape": "(4, 4)", "dtype": "float32"},
               {"eager_ns_per_op": times["eager"][0] / 8 * 1e9, "compiled_ns_per_op": times["compiled"][0] / 8 * 1e9,
                "eager_over_compiled": times["eager"][0] / times["compiled"][0], "threads": threads})


def trace_ops200(torch, threads):
    rng = np.random.default_rng(9)
    x = torch.from_numpy(rng.standard_normal((16, 16)).astype(np.float32))
    w = torch.from_numpy((0.1 * rng.standard_normal((16, 16))).astype(np.float32))
    torch._dynamo.reset()
    try:  # a cold compile, as jag's (nothing cached on disk)
        import torch._inductor.config as inductor_config
        cold, caches = inductor_config.patch(force_disable_caches=True), "off"
    except (ImportError, AttributeError, KeyError, RuntimeError):
        cold, caches = contextlib.nullcontext(), "as configured"
    with cold:
        t0 = time.perf_counter()
        prog = torch.compile(ops200)
        prog(x, w)
        first = time.perf_counter() - t0
    t0 = time.perf_counter()
    prog(x, w)
    emit_torch("trace_compile_200_ops", {"ops": 200, "passes": "desugar, dce, fuse"},
               {"compile_first_call_s": first, "second_call_s": time.perf_counter() - t0, "inductor_caches": caches,
                "threads": threads})


# ---- the encoder training step ----------------------------------------------

ENCODER_SIDES = ("jag_eager", "jag_compiled", "torch_padded", "torch_compiled_padded", "torch_nested")


class Encoder:
    """The same TransformerEncoderLayer (same weights) in jag and torch, a
    ragged batch and one training step per side."""

    def __init__(self, torch):
        from jag import nn
        e = ENCODER
        rng = np.random.default_rng(2)
        self.batch = Batch(torch, rng, long_tailed_lengths(rng, e["batch"], 8, 5, 200), e["d_model"])
        jag.manual_seed(0)
        kw = dict(dropout=0.0, batch_first=True, activation="gelu")
        self.jag_layer = nn.TransformerEncoderLayer(e["d_model"], e["nhead"], e["dim_feedforward"], **kw)
        self.torch_layer = torch.nn.TransformerEncoderLayer(e["d_model"], e["nhead"], e["dim_feedforward"], **kw)
        with torch.no_grad():
            for k, v in self.jag_layer.state_dict().items():
                self.torch_layer.state_dict()[k].copy_(torch.from_numpy(np.array(v.numpy())))
        self.keep = (~self.batch.pad_mask).unsqueeze(-1).float()
        self.torch = torch
        self.jag_compiled = None
        self.torch_compiled = None

    def step(self, side):
        """A callable running one forward + backward of `side`."""
        b = self.batch
        if side == "jag_eager":
            def run():
                self.jag_layer.zero_grad()
                self.jag_layer(b.jag).values().sum().backward()
        elif side == "jag_compiled":
            self.jag_compiled = self.jag_compiled or jag.compile(self.jag_layer)

            def run():
                self.jag_layer.zero_grad()
                self.jag_compiled(b.jag).values().sum().backward()
        elif side in ("torch_padded", "torch_compiled_padded"):
            layer = self.torch_layer
            if side == "torch_compiled_padded":
                self.torch_compiled = self.torch_compiled or self.torch.compile(self.torch_layer)
                layer = self.torch_compiled

            def run():
                self.torch_layer.zero_grad(set_to_none=True)
                (layer(b.padded, src_key_padding_mask=b.pad_mask) * self.keep).sum().backward()
        elif side == "torch_nested":
            def run():
                self.torch_layer.zero_grad(set_to_none=True)
                self.torch_layer(b.torch_nested).values().sum().backward()
        else:
            raise ValueError("bench_torch: unknown encoder side %r (known: %s)" % (side, ", ".join(ENCODER_SIDES)))
        return run


def status_kib(field):
    """A field of /proc/self/status in KiB (VmRSS, VmHWM), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak():
    """Sets this process's peak RSS (VmHWM) to its current RSS: True when
    Linux allowed it (/proc/self/clear_refs, 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_child(side):
    """--memory SIDE: this process runs SIDE alone; prints one JSON object.
    The peak is VmHWM, this process's own peak RSS: ru_maxrss would not do,
    as Linux carries the parent's peak across fork and exec into it."""
    import torch
    torch.set_num_threads(thread_count())
    jag.set_num_threads(thread_count())
    enc = Encoder(torch)
    run = enc.step(side)
    exact = reset_peak()
    base = status_kib("VmRSS") if exact else status_kib("VmHWM")
    if base is None:  # no /proc: ru_maxrss, which may start at the parent's peak
        base, exact = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, False
    t0 = time.perf_counter()
    try:
        run()
    except Exception as e:  # noqa: BLE001 - the side does not run: say why
        print(json.dumps({"error": first_line(e)}), flush=True)
        return
    first = time.perf_counter() - t0
    for _ in range(3):
        run()
    peak = status_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_growth_mib": (peak - base) / 1024.0, "first_step_s": first,
                      "peak_method": "VmHWM after a reset" if exact else "peak growth (lower bound)"}), flush=True)


def measure_memory(side):
    """Runs memory_child(side) in a fresh process (its own process group, so
    that a time limit ends torch.compile's workers too): its result, or why
    none."""
    cmd = [sys.executable, os.path.abspath(__file__), "--memory", side] + (["--quick"] if QUICK else [])
    limit = COMPILE_LIMIT_S
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": "did not finish its first steps within %d s on this machine" % limit}
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    err = [line for line in err.strip().splitlines() if line.strip()]
    return {"error": "exit %d: %s" % (proc.returncode, err[-1][:300] if err else "no message")}


def bench_encoder(torch, threads):
    memory = {side: measure_memory(side) for side in ENCODER_SIDES}
    enc = Encoder(torch)
    runs, values = {}, {"threads": threads}
    # the same model on both sides: jag's forward against torch's on the real rows
    b = enc.batch
    with torch.no_grad():
        ref = b.real_rows(to_numpy(enc.torch_layer(b.padded, src_key_padding_mask=b.pad_mask)))
    with jag.no_grad():
        mine = to_numpy(enc.jag_layer(b.jag).values())
    values["forward_max_abs_diff"] = float(np.max(np.abs(mine - ref)))
    for side in ENCODER_SIDES:
        m = memory[side]
        if "error" in m:
            values[side] = ("unsupported: " if side == "torch_nested" else "failed: ") + m["error"]
            continue
        values[side + "_peak_mib"] = m["peak_growth_mib"]
        values[side + "_first_step_s"] = m["first_step_s"]
        values["peak_method"] = m["peak_method"]
        run = enc.step(side)
        try:
            run()
        except Exception as e:  # noqa: BLE001 - ran alone but not here: say why
            values[side] = "failed: " + first_line(e)
            continue
        runs[side] = run
    times = interleaved(runs, slow_s=float("inf"))  # every round, however long a step takes
    tokens = enc.batch.params()["tokens"]
    values.update(timed_values(times, {k: k for k in times}))
    for side, (med, _, _) in times.items():
        values[side + "_tokens_per_s"] = tokens / med
    if "jag_eager" in times:
        for side in times:
            values[side + "_over_jag_eager"] = times[side][0] / times["jag_eager"][0]
    e = ENCODER
    emit("encoder_step", dict(enc.batch.params(), model="TransformerEncoderLayer(%d, %d, %d), gelu, dropout 0" % (
        e["d_model"], e["nhead"], e["dim_feedforward"]), step="forward + backward of the sum over real tokens"),
         values)


def main():
    if "--memory" in sys.argv[1:]:
        memory_child(sys.argv[sys.argv.index("--memory") + 1])
        return
    threads = thread_count()
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - no torch: one figure saying why
        emit("torch_missing", {}, {"reason": first_line(e), "python": sys.executable})
        return
    torch.set_num_threads(threads)
    jag.set_num_threads(threads)
    emit("config", {}, {"torch_version": torch.__version__, "jag_threads": jag.get_num_threads(),
                        "torch_threads": torch.get_num_threads(), "python": sys.executable,
                        "rounds": ROUNDS, "samples": SAMPLES, "budget_s": BUDGET})
    bench_nested(torch, threads)
    bench_dense(torch, threads)
    bench_dense_columns(torch, threads)
    bench_batch_of_one(torch, threads)
    bench_optim_columns(torch, threads)
    bench_attention_columns(torch, threads)
    bench_ragged_columns(torch, threads)
    bench_trace_columns(torch, threads)
    bench_encoder(torch, threads)


if __name__ == "__main__":
    main()
