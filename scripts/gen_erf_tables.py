"""gen_erf_tables.py — the coefficient tables of the float32 AVX-512 gelu,
erf and erfc kernels (src/cpu/sleef_unary.c): writes src/cpu/erf_tables.h.

Each function is split into 32 intervals of width 1/S centred at k / S; on
interval k the kernel evaluates a polynomial in u = S x - k (|u| <= 1/2,
exact in float) by Horner's rule, its coefficients picked per lane from
32-entry tables (vpermt2ps). The fit: weighted least squares on 96
Chebyshev nodes, weight 1 / |f| (relative error), against Python's math.erf
/ math.erfc (double); the coefficients are rounded to float one at a time
from the constant up, each remaining one refitted after the previous
rounded. The float Horner evaluation is then checked here on 6001 points
per interval (the exhaustive check is tests/test_unary_accuracy.c).

  gelu: Phi(x) = erfc(-x / sqrt 2) / 2, S = 4, k in [-16, 15] (x in
        [-4.125, 3.875)), degree 6; the kernel returns x Phi(x).
  erf:  erf(t), t = |x|, S = 8, k in [0, 31] (t in [0, 3.9375)), degree 5;
        intervals 0 and 1 (t < 3/16) hold r(t) = erf(t) / t - 1 instead,
        and the kernel returns t + t r in one fma: erf's value changes by a
        factor 3 across interval 1 and is proportional to t on interval 0,
        where a polynomial for erf itself would pass its leading
        coefficients' rounding (2 / sqrt(pi) lies low in its binade) to
        the result at up to 1.2 ulp; r's error reaches it scaled by
        r / (1 + r) < 0.12.
  erfc: erfc(t), t = |x|, S = 8, k in [0, 31], degree 6.

Usage: python scripts/gen_erf_tables.py [src/cpu/erf_tables.h]
(numpy needed; .venv-bench has it). Prints each fit's worst error.
"""
import math
import sys

import numpy as np

f32 = np.float32
DEG_GELU, DEG_ERF, DEG_ERFC = 6, 5, 6


def phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


def fit(F, S, k, deg, W=None, N=96, nudge=(0, 0)):
    """F's coefficients on interval k, relative error weighted by W(x) (default 1 / |F|)."""
    u = 0.5 * np.cos(np.pi * (np.arange(N) + 0.5) / N)
    xs = (k + u) / S
    f = np.array([F(x) for x in xs])
    w = np.array([W(x) for x in xs]) if W else 1 / np.abs(f)
    V = np.vander(u, deg + 1, increasing=True)
    c = np.zeros(deg + 1)
    for j in range(deg + 1):
        r = f - V[:, :j] @ c[:j]
        sol, *_ = np.linalg.lstsq(V[:, j:] * w[:, None], r * w, rcond=None)
        c[j] = float(f32(sol[0]))
        if j < 2 and nudge[j]:  # the float next to it, toward the nudge's sign
            c[j] = float(np.nextafter(f32(c[j]), f32(np.inf if nudge[j] > 0 else -np.inf)))
    return c


def horner(c, u):
    """The kernel's float evaluation: fma rounds once (a b exact in double)."""
    p = np.full(len(u), c[-1])
    for j in range(len(c) - 2, -1, -1):
        p = (p * u + c[j]).astype(f32).astype(np.float64)
    return p


def erf_r(t):
    """erf(t) / t - 1, the erf kernel's function near 0 (its series below 1e-4)."""
    if abs(t) < 1e-4:
        return 2 / math.sqrt(math.pi) * (1 - t * t / 3 + t ** 4 / 10) - 1
    return math.erf(t) / t - 1


def build(name, F, S, ks, deg, erf_near0=False, times_x=False):
    tab, worst, wk = np.zeros((deg + 1, 32)), 0.0, None
    for k in ks:
        xs = ((k + np.linspace(-0.5, 0.5, 6001)) / S).astype(f32)
        xs = xs[xs != 0].astype(np.float64)
        ref = np.array([F(x) for x in xs])
        near0 = erf_near0 and k <= 1
        best = None
        # the rounded c0 and c1, or their float neighbours: whichever evaluates best in float
        for nudge in [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1)]:
            if near0:  # erf = t + t r(t): r's error is scaled by r / (1 + r)
                c = fit(erf_r, S, k, deg, W=lambda x: 1 / (1 + erf_r(x)), nudge=nudge)
                p = (horner(c, S * xs - k) * xs + xs).astype(f32).astype(np.float64)
            else:
                c = fit(F, S, k, deg, nudge=nudge)
                p = horner(c, S * xs - k)
            r = ref
            if times_x:
                p, r = (xs * p).astype(f32).astype(np.float64), xs * ref
            e = (np.abs(p - r) / np.spacing(np.abs(r).astype(f32)).astype(np.float64)).max()
            if best is None or e < best[0]:
                best = (e, c)
        e, c = best
        tab[:, k & 31] = c
        if e > worst:
            worst, wk = e, k
    print("%s, degree %d: %.3f ulp at most (interval %d)" % (name, deg, worst, wk), file=sys.stderr)
    return tab


def emit(f, name, tab):
    def hexf(x):
        m, e = float(f32(x)).hex().split("p")
        m = m.rstrip("0").rstrip(".") if "." in m else m
        return m + "p" + e + "f"

    def row(v):
        return ", ".join(hexf(x) for x in v)
    for j in range(tab.shape[0]):
        f.write("static _Alignas(64) const float %s_c%d[32] = {%s};\n" % (name, j, row(tab[j])))


def main():
    tg = build("gelu (x Phi(x))", phi, 4, range(-16, 16), DEG_GELU, times_x=True)
    te = build("erf", math.erf, 8, range(0, 32), DEG_ERF, erf_near0=True)
    tc = build("erfc", math.erfc, 8, range(0, 32), DEG_ERFC)
    out = sys.argv[1] if len(sys.argv) > 1 else "src/cpu/erf_tables.h"
    with open(out, "w") as f:
        f.write("/* erf_tables.h — generated by scripts/gen_erf_tables.py: do not edit.\n"
                " * jag__<fn>_tab_c<j>[k & 31]: coefficient j of interval k's polynomial in\n"
                " * u (see the script for the intervals and the fit, sleef_unary.c for the\n"
                " * kernels). */\n#ifndef JAG_ERF_TABLES_H\n#define JAG_ERF_TABLES_H\n")
        emit(f, "jag__gelu_tab", tg)
        emit(f, "jag__erf_tab", te)
        emit(f, "jag__erfc_tab", tc)
        f.write("#endif\n")


if __name__ == "__main__":
    main()
