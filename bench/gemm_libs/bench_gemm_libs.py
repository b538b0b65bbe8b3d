"""Torch's side of bench_gemm_libs.c: torch.mm (mode nn) and
torch.nn.functional.linear (mode nt, x @ w^T) on the same shapes and data
generator, 2 threads, output allocated per call, 5 timed samples of >= ~4
ms per shape per round (best and median). Prints the same CSV lines as the C side.

    python bench_gemm_libs.py ROUND nn|nt|both [M,M,..] [K:N,K:N,..]
"""
import os
import sys
import time

import torch
import torch.nn.functional as F


def lcg_fill(n, x):
    # the C side's generator: x = x * 1664525 + 1013904223 (mod 2^32), (x >> 8) / 2^23 - 1
    import numpy as np

    out = np.empty(n, dtype=np.float32)
    # vectorised LCG jump is overkill here: run it in chunks with numpy's uint32 wrap
    a, c = np.uint32(1664525), np.uint32(1013904223)
    cur = np.uint32(x)
    # compute sequence with a python loop over 2^k strides: a^j, c_j for a block of 4096
    blk = 4096
    aj = np.empty(blk, dtype=np.uint32)
    cj = np.empty(blk, dtype=np.uint32)
    ap, cp = np.uint32(1), np.uint32(0)
    with np.errstate(over="ignore"):
        for j in range(blk):
            ap, cp = np.uint32(ap * a), np.uint32(cp * a + c)
            aj[j], cj[j] = ap, cp
        i = 0
        while i < n:
            m = min(blk, n - i)
            seq = (aj[:m] * cur + cj[:m]).astype(np.uint32)
            out[i : i + m] = (seq >> np.uint32(8)).astype(np.float64) / 8388608.0 - 1.0
            cur = seq[m - 1]
            i += m
    return out, int(cur)


def main():
    rnd = int(sys.argv[1])
    modes = sys.argv[2]
    ms = [1, 7, 26, 64, 128, 512, 2048]
    kn = [(64, 64), (256, 256), (256, 1024), (1024, 256), (1024, 1024), (4096, 1024), (1024, 4096)]
    if len(sys.argv) > 3:
        ms = [int(v) for v in sys.argv[3].split(",")]
    if len(sys.argv) > 4:
        kn = [tuple(int(u) for u in v.split(":")) for v in sys.argv[4].split(",")]
    min_sample = float(os.environ.get("GEMM_MIN_SAMPLE", "0.004"))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    torch.set_grad_enabled(False)
    print("#round,lib,mode,M,K,N,best_sec_per_call,inner,median_sec_per_call")
    for mode in ("nn", "nt"):
        if modes not in ("both", mode):
            continue
        for ik, (k, n) in enumerate(kn):
            for im, m in enumerate(ms):
                x = 7 + ik * 31 + im
                av, x = lcg_fill(m * k, x)
                bv, x = lcg_fill(k * n, x)
                a = torch.from_numpy(av).view(m, k)
                if mode == "nn":
                    b = torch.from_numpy(bv).view(k, n)
                    f = lambda: torch.mm(a, b)  # noqa: E731
                else:
                    w = torch.from_numpy(bv).view(n, k)
                    f = lambda: F.linear(a, w)  # noqa: E731
                f()
                t0 = time.perf_counter()
                reps = 0
                while time.perf_counter() - t0 < 0.005 or reps < 1:
                    f()
                    reps += 1
                per = (time.perf_counter() - t0) / reps
                inner = int(min_sample / per) + 1
                ts = []
                for _ in range(5):  # 5 sub-samples, best and median printed
                    f()
                    t1 = time.perf_counter()
                    for _ in range(inner):
                        f()
                    ts.append((time.perf_counter() - t1) / inner)
                ts.sort()
                lib = "torch_mm" if mode == "nn" else "torch_linear"
                print(f"{rnd},{lib},{mode},{m},{k},{n},{ts[0]:.9g},{inner},{ts[2]:.9g}", flush=True)


if __name__ == "__main__":
    main()
