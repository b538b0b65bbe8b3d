"""jag against torch, op by op, on dense float32 tensors: a wide sweep.

The report's "jag vs torch" table (bench/bench_torch.py) holds a fixed set
of rows; this sweep times many more ops, forward alone and forward +
backward, over a few sizes, to find the ones where jag loses. Each figure is
the best of ROUNDS interleaved rounds (jag, then torch, on the same data, in
one process, with the same number of threads); a round is the best of a
few calls. Output: one line per (op, size, pass), sorted by the ratio
torch time / jag time (below 1.0: jag is slower), then the count of rows
under 1.0.

Usage: make bench-sweep [SWEEP_ARGS="--quick --only=gelu"], or by hand (torch in
.venv-bench, jag's extension built in place):
    PYTHONPATH=python .venv-bench/bin/python bench/bench_sweep.py [--quick] [--only=SUBSTR] [--json]

--quick   one size (1024 x 1024) and fewer rounds
--only    rows whose op name contains SUBSTR
--json    one JSON line per row instead of the table
"""
import json
import os
import sys
import time

try:
    import jag
except ImportError:  # from the source tree: the in-place built package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import jag
import jag.nn.functional as JF
import numpy as np

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    sys.exit("bench_sweep: torch is not importable (scripts/bench_setup.sh --torch makes .venv-bench with it)")

ARGS = sys.argv[1:]
QUICK = "--quick" in ARGS
AS_JSON = "--json" in ARGS
ONLY = next((a.split("=", 1)[1] for a in ARGS if a.startswith("--only=")), None)
ROUNDS = 3 if QUICK else 5
SIZES = [(1024, 1024)] if QUICK else [(256, 1024), (1024, 1024), (8192, 1024)]


def best_of(fn, budget=0.02):
    """Best seconds per call over a few calls, about `budget` seconds."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    n = max(1, min(50, int(budget / one)))
    best = one
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def pair(fj, ft):
    bj, bt = float("inf"), float("inf")
    for _ in range(ROUNDS):
        bj = min(bj, best_of(fj))
        bt = min(bt, best_of(ft))
    return bj, bt


def unary(name, jf, tf, positive=False):
    return (name, jf, tf, positive)


# (name, jag function of x, torch function of x, inputs must be positive)
UNARY = [
    unary("exp", jag.exp, torch.exp), unary("log", jag.log, torch.log, True),
    unary("sin", jag.sin, torch.sin), unary("cos", jag.cos, torch.cos),
    unary("tanh", jag.tanh, torch.tanh), unary("sigmoid", jag.sigmoid, torch.sigmoid),
    unary("relu", jag.relu, torch.relu), unary("gelu", JF.gelu, TF.gelu),
    unary("gelu_tanh", lambda x: JF.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    unary("silu", JF.silu, TF.silu), unary("erf", jag.erf, torch.erf),
    unary("log1p", jag.log1p, torch.log1p, True), unary("expm1", jag.expm1, torch.expm1),
    unary("softplus", JF.softplus, TF.softplus), unary("mish", JF.mish, TF.mish),
    unary("sqrt", jag.sqrt, torch.sqrt, True), unary("rsqrt", jag.rsqrt, torch.rsqrt, True),
    unary("abs", jag.abs, torch.abs), unary("neg", jag.neg, torch.neg),
    unary("hardswish", JF.hardswish, TF.hardswish), unary("hardsigmoid", JF.hardsigmoid, TF.hardsigmoid),
    unary("logsigmoid", JF.logsigmoid, TF.logsigmoid), unary("reciprocal", jag.reciprocal, torch.reciprocal, True),
    unary("square", jag.square, torch.square), unary("pow 2.5", lambda x: x ** 2.5, lambda x: x ** 2.5, True),
    unary("x * 2 (scalar)", lambda x: x * 2.0, lambda x: x * 2.0),
    unary("sum (last)", lambda x: x.sum(-1), lambda x: x.sum(-1)),
    unary("sum (first)", lambda x: x.sum(0), lambda x: x.sum(0)),
    unary("sum (all)", lambda x: x.sum(), lambda x: x.sum()),
    unary("mean (last)", lambda x: x.mean(-1), lambda x: x.mean(-1)),
    unary("prod (last)", lambda x: x.prod(-1), lambda x: x.prod(-1)),
    unary("amax (last)", lambda x: x.amax(-1), lambda x: x.amax(-1)),
    unary("var (last)", lambda x: x.var(-1), lambda x: x.var(-1)),
    unary("logsumexp (last)", lambda x: x.logsumexp(-1), lambda x: x.logsumexp(-1)),
    unary("softmax (last)", lambda x: x.softmax(-1), lambda x: x.softmax(-1)),
    unary("log_softmax (last)", lambda x: JF.log_softmax(x, -1), lambda x: TF.log_softmax(x, -1)),
    unary("softmax (first)", lambda x: x.softmax(0), lambda x: x.softmax(0)),
    unary("transpose copy", lambda x: x.t().contiguous(), lambda x: x.t().contiguous()),
    unary("clone", lambda x: x.clone(), lambda x: x.clone()),
]

BINARY = [
    ("add", lambda a, b: a + b), ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b),
    ("maximum", lambda a, b: jag.maximum(a, b), lambda a, b: torch.maximum(a, b)),
]

# forward + backward: (name, jag loss-free fn, torch fn); backward of sum(y * g)
FWD_BWD = ["exp", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "softplus", "mish", "hardswish", "logsigmoid",
           "sqrt", "softmax (last)", "log_softmax (last)", "logsumexp (last)", "sum (last)", "mean (last)",
           "var (last)", "amax (last)"]


def rows():
    for rows_, cols in SIZES:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((rows_, cols), dtype=np.float32)
        b = rng.standard_normal((rows_, cols), dtype=np.float32)
        pos = np.abs(a) + 0.5
        size = "%dx%d" % (rows_, cols)
        for name, jf, tf, positive in UNARY:
            src = pos if positive else a
            jx, tx = jag.from_numpy(src.copy()), torch.from_numpy(src.copy())
            yield name, size, "fwd", (lambda jf=jf, jx=jx: jf(jx)), (lambda tf=tf, tx=tx: tf(tx))
            if name in FWD_BWD:
                jxg, txg = jag.from_numpy(src.copy()).requires_grad_(), torch.from_numpy(src.copy()).requires_grad_()
                jy0, ty0 = jf(jxg), tf(txg)
                jg, tg = jag.from_numpy(np.ones(tuple(jy0.shape), np.float32)), torch.ones(ty0.shape)

                def jrun(jf=jf, jxg=jxg, jg=jg):
                    jxg.grad = None
                    jf(jxg).backward(jg)

                def trun(tf=tf, txg=txg, tg=tg):
                    txg.grad = None
                    tf(txg).backward(tg)

                yield name, size, "fwd+bwd", jrun, trun
        for entry in BINARY:
            name, jf = entry[0], entry[1]
            tf = entry[2] if len(entry) > 2 else jf
            ja, jb, ta, tb = jag.from_numpy(a.copy()), jag.from_numpy(b.copy()), torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
            yield name, size, "fwd", (lambda jf=jf, ja=ja, jb=jb: jf(ja, jb)), (lambda tf=tf, ta=ta, tb=tb: tf(ta, tb))
        # layer_norm and linear over the rows
        jx, tx = jag.from_numpy(a.copy()), torch.from_numpy(a.copy())
        w, bias = np.ones(cols, np.float32), np.zeros(cols, np.float32)
        jw, jbias, tw, tbias = jag.from_numpy(w), jag.from_numpy(bias), torch.from_numpy(w), torch.from_numpy(bias)
        yield ("layer_norm", size, "fwd", lambda: JF.layer_norm(jx, (cols,), jw, jbias),
               lambda: TF.layer_norm(tx, (cols,), tw, tbias))
        jxg, txg = jag.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
        jwg, twg = jag.from_numpy(w.copy()).requires_grad_(), torch.from_numpy(w.copy()).requires_grad_()
        jg, tg = jag.from_numpy(b.copy()), torch.from_numpy(b.copy())

        def jln():
            jxg.grad = jwg.grad = None
            JF.layer_norm(jxg, (cols,), jwg, jbias).backward(jg)

        def tln():
            txg.grad = twg.grad = None
            TF.layer_norm(txg, (cols,), twg, tbias).backward(tg)

        yield "layer_norm", size, "fwd+bwd", jln, tln
        lw = rng.standard_normal((256, cols), dtype=np.float32) * 0.05
        jlw, tlw = jag.from_numpy(lw), torch.from_numpy(lw)
        yield "linear (N=256)", size, "fwd", lambda: JF.linear(jx, jlw), lambda: TF.linear(tx, tlw)


def main():
    torch.set_num_threads(jag.get_num_threads())
    out = []
    for name, size, kind, fj, ft in rows():
        if ONLY and ONLY not in name:
            continue
        with torch.no_grad() if kind == "fwd" else _Null():
            tj, tt = pair(fj, ft)
        r = {"op": name, "size": size, "pass": kind, "jag_s": tj, "torch_s": tt, "torch_over_jag": tt / tj}
        out.append(r)
        if AS_JSON:
            print(json.dumps(r), flush=True)
    if AS_JSON:
        return
    out.sort(key=lambda r: r["torch_over_jag"])
    print("%-22s %-10s %-8s %12s %12s %8s" % ("op", "size", "pass", "jag", "torch", "torch/jag"))
    for r in out:
        print("%-22s %-10s %-8s %10.1f us %10.1f us %8.2f" % (r["op"], r["size"], r["pass"], r["jag_s"] * 1e6,
                                                            r["torch_s"] * 1e6, r["torch_over_jag"]))
    print("rows where jag is slower than torch: %d of %d" % (sum(r["torch_over_jag"] < 1 for r in out), len(out)))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


if __name__ == "__main__":
    main()
