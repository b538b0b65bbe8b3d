"""Python-level overhead per op on a tiny nested tensor.

For each op, one call from Python (jag.relu(nt), nt + nt, ...) against the
same op called in a C loop through jag_op_call with the same arguments
(jag._C._bench_op_loop): the difference is what the Python layer adds
(argument boxing, the Python wrapper, allocating the result object).
Target (issue 7): under 2 us per op. When torch is importable, the same op
on a torch.nested jagged tensor of the same shape is timed in the same run.

Both sides are timed interleaved in 5 rounds (each: warm-up, then repeats of
one side, then of the other); a time is the median of the round medians, as
bench/bench.h does. Output: one JSON line per figure, as the C benchmarks
(scripts/bench.sh runs this and scripts/bench_report.py reads it):

    {"bench": "python", "name": "python_overhead", "params": {...}, "values": {...}}
    {"bench": "torch", "name": "python_overhead", "params": {...}, "values": {...}}

Usage: python bench/bench_python.py [--quick] [--overhead-only]

--overhead-only prints the per-op lines only (no training step, no sampler).
"""
import json
import os
import statistics
import sys
import time

try:
    import jag
except ImportError:  # from the source tree: the in-place built package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import jag
from jag import _C

QUICK = "--quick" in sys.argv[1:]
OVERHEAD_ONLY = "--overhead-only" in sys.argv[1:]
ROUNDS = 5
TARGET_NS = 2000


def per_call(fn, n):
    """Seconds per call of fn() over n calls (the Python loop included: it
    is part of what a Python caller pays)."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def calibrate(fn, budget):
    n = 16
    while True:
        t = per_call(fn, n)
        if t * n >= budget / 4 or n >= 1 << 22:
            return max(16, int(n * budget / max(t * n, 1e-9)))
        n *= 4


def pair(fn_a, fn_b, budget):
    """Median seconds per call of two sides timed interleaved."""
    na, nb = calibrate(fn_a, budget), calibrate(fn_b, budget)
    ra, rb = [], []
    for _ in range(ROUNDS):
        fn_a(), fn_a()
        ra.append(statistics.median(per_call(fn_a, max(1, na // 5)) for _ in range(5)))
        fn_b(), fn_b()
        rb.append(statistics.median(per_call(fn_b, max(1, nb // 5)) for _ in range(5)))
    return statistics.median(ra), statistics.median(rb)


def pair_c(py_fn, op, args, budget):
    """Python call vs the same op in a C loop, interleaved."""
    n_py = calibrate(py_fn, budget)
    n_c = 16
    while _C._bench_op_loop(op, n_c, *args) < budget / 4 and n_c < 1 << 24:
        n_c *= 4
    n_c = max(16, int(n_c * budget / max(_C._bench_op_loop(op, n_c, *args), 1e-9)))
    rp, rc = [], []
    for _ in range(ROUNDS):
        py_fn(), py_fn()
        rp.append(statistics.median(per_call(py_fn, max(1, n_py // 5)) for _ in range(5)))
        _C._bench_op_loop(op, 2, *args)
        rc.append(statistics.median(_C._bench_op_loop(op, max(1, n_c // 5), *args) / max(1, n_c // 5)
                                    for _ in range(5)))
    return statistics.median(rp), statistics.median(rc)


def emit(bench, params, values):
    print(json.dumps({"bench": bench, "name": "python_overhead", "params": params, "values": values}), flush=True)


def train_step_share():
    """The optimizer's share of a training step: a TransformerEncoderLayer
    (d_model 256, 4 heads, feed-forward 1024, float32) on a nested batch of
    32 long-tailed lengths, AdamW. Each step is timed in three parts
    (forward + backward, the fused AdamW step, and the same Adam update
    written as a chain of jag ops, as a hand-written optimizer must): one
    JSON line with the medians over the steps and the fused step's share."""
    import random

    from jag import nn

    jag.manual_seed(0)
    rng = random.Random(0)
    lengths = [min(200, max(5, int(rng.paretovariate(1.2) * 8))) for _ in range(32)]
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True, activation="gelu")
    params = list(layer.parameters())
    x = jag.nested.nested_tensor([jag.randn(n, 256) for n in lengths], layout=jag.jagged)
    opt = jag.optim.AdamW(params, lr=1e-4)
    moments = [(jag.zeros_like(p), jag.zeros_like(p)) for p in params]

    def chain_adamw(t):  # torch.optim.AdamW's update rule, one op at a time
        b1, b2, lr, eps, wd = 0.9, 0.999, 1e-4, 1e-8, 1e-2
        with jag.no_grad():
            for p, (m, v) in zip(params, moments):
                g = p.grad
                p.mul_(1 - lr * wd)
                m.mul_(b1).add_(g * (1 - b1))
                v.mul_(b2).add_(g * g * (1 - b2))
                denom = (v / (1 - b2 ** t)).sqrt() + eps
                p.sub_(m / (1 - b1 ** t) / denom * lr)

    steps = 3 if QUICK else 10
    fb, fused, chain = [], [], []
    for t in range(1, steps + 2):
        opt.zero_grad()
        t0 = time.perf_counter()
        layer(x).values().sum().backward()
        t1 = time.perf_counter()
        opt.step()
        t2 = time.perf_counter()
        chain_adamw(t)
        t3 = time.perf_counter()
        if t > 1:  # the first step makes the state
            fb.append(t1 - t0), fused.append(t2 - t1), chain.append(t3 - t2)
    f, o, c = statistics.median(fb), statistics.median(fused), statistics.median(chain)
    print(json.dumps({"bench": "python", "name": "train_step_optimizer_share",
                      "params": {"model": "TransformerEncoderLayer(256, 4, 1024)", "batch": 32,
                                 "tokens": sum(lengths), "parameters": sum(p.numel() for p in params)},
                      "values": {"forward_backward_s": f, "optimizer_fused_s": o, "optimizer_chain_s": c,
                                 "fused_share": o / (f + o), "chain_share": c / (f + c),
                                 "fused_speedup_over_chain": c / o}}), flush=True)


def sampler_imbalance():
    """Token imbalance of jag.utils.distributed_sampler on the fortunes corpus
    (documents tokenized and cut to 128 tokens as examples/train_ragged.py
    does), for 2, 3, 4 and 8 ranks, with global batches of the most similar
    lengths (bucket_size None) or drawn from buckets of 64 shuffled items
    (mixed lengths). Per global batch, max / mean of the ranks' tokens (1.0
    is perfect balance): its mean and worst over one epoch; and the epoch's
    time over the ideal, sum(max) / sum(mean) (ranks wait for the busiest
    one at every step). Beside them the same global batches split by item
    count, dealt round-robin as torch's DistributedSampler deals indices."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    try:
        import train_ragged as tr
        corpus = tr.load_corpus(tr.FORTUNES, False)
    except (ImportError, SystemExit, OSError) as e:
        print(json.dumps({"bench": "dist", "name": "sampler_imbalance", "params": {"corpus": "fortunes"},
                          "values": {"skipped": "no corpus: %s" % e}}), flush=True)
        return
    finally:
        sys.path.pop(0)
    from jag.utils.distributed_sampler import DistributedTokenBudgetSampler, split_by_tokens

    def summary(loads_per_batch):
        ratios = [max(ld) / (sum(ld) / len(ld)) if sum(ld) else 1.0 for ld in loads_per_batch]
        ideal = sum(sum(ld) / len(ld) for ld in loads_per_batch)
        return statistics.mean(ratios), max(ratios), sum(max(ld) for ld in loads_per_batch) / ideal

    lengths = [min(len(d), tr.MAX_LEN) for d in corpus.docs]
    # per_rank 640: train_ragged's --max-tokens default
    for bucket, per_rank in [(b, t) for b in (None, 64) for t in (640, 2048)]:
        for ranks in (2, 3, 4, 8):
            max_tokens = per_rank * ranks
            sampler = DistributedTokenBudgetSampler(lengths, max_tokens, num_replicas=ranks, rank=0, seed=0,
                                                    bucket_size=bucket)
            batches = list(sampler.global_sampler)
            tok = summary([[sum(lengths[i] for i in part) for part in split_by_tokens(b, lengths, ranks)]
                           for b in batches])
            items = summary([[sum(lengths[i] for i in b[r::ranks]) for r in range(ranks)] for b in batches])
            print(json.dumps({"bench": "dist", "name": "sampler_imbalance", "params": {
                "corpus": "fortunes", "documents": len(lengths), "ranks": ranks, "max_tokens": max_tokens,
                "bucket_size": bucket}, "values": {
                "batches": len(batches), "mean_max_over_mean": tok[0], "worst_max_over_mean": tok[1],
                "epoch_over_ideal": tok[2], "by_items_mean": items[0], "by_items_worst": items[1],
                "by_items_epoch_over_ideal": items[2]}}), flush=True)


def main():
    budget = 0.02 if QUICK else 0.1  # seconds per sample
    jag.manual_seed(0)
    values = jag.randn(3, 2)
    nt = jag.nested.nested_tensor_from_jagged(values, [0, 1, 3])  # (2, j, 2), as bench_nested's C figure
    w = jag.randn(2, 2)
    cases = [
        ("relu", "nested", lambda: jag.relu(nt), "relu", (nt,)),
        ("add", "nested", lambda: nt + nt, "add", (nt, nt, 1.0)),  # jag's add is a + alpha * b
        ("mm", "nested", lambda: jag.mm(nt, w), "mm", (nt, w)),
        ("relu", "dense", lambda: jag.relu(values), "relu", (values,)),
    ]
    try:
        import torch

        torch_version = torch.__version__
        tvals = torch.randn(3, 2)
        tnt = torch.nested.nested_tensor_from_jagged(tvals, torch.tensor([0, 1, 3]))
        tw = torch.randn(2, 2)
        torch_cases = {("relu", "nested"): lambda: torch.relu(tnt), ("add", "nested"): lambda: tnt + tnt,
                       ("mm", "nested"): lambda: torch.matmul(tnt, tw), ("relu", "dense"): lambda: torch.relu(tvals)}
    except Exception as e:  # noqa: BLE001 - torch missing or broken: say so
        torch_version, torch_cases = None, {}
        reason = "not installed" if isinstance(e, ImportError) else "torch failed: %s" % e
    for op, layout, fn, c_op, c_args in cases:
        params = {"op": op, "layout": layout, "shape": "(2, j, 2)" if layout == "nested" else "(3, 2)"}
        py_s, c_s = pair_c(fn, c_op, c_args, budget)
        vals = {"py_ns": py_s * 1e9, "c_ns": c_s * 1e9, "overhead_ns": (py_s - c_s) * 1e9,
                "ratio_vs_c": py_s / c_s, "target_ns": TARGET_NS}
        tfn = torch_cases.get((op, layout))
        if tfn is not None:
            t_s, j_s = pair(tfn, fn, budget)
            emit("torch", params, {"py_ns": t_s * 1e9, "jag_py_ns": j_s * 1e9, "ratio_torch_over_jag": t_s / j_s,
                                   "version": torch_version})
            vals["torch_ns"] = t_s * 1e9
        else:
            vals["torch"] = reason if torch_version is None else "not measured"
        emit("python", params, vals)
    if OVERHEAD_ONLY:
        return
    train_step_share()
    sampler_imbalance()


if __name__ == "__main__":
    main()
