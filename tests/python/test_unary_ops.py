"""The rounding, special-function and activation ops (floor ... logsigmoid,
leaky_relu, elu, softplus, hardtanh): values against their formulas in
float64 (Python's math module per element), dtypes as torch, gradients by
gradcheck, nested tensors against their components, the nn modules, and
compiled programs against eager."""
import math

import numpy as np
import pytest

import jag
import jag.nn as nn
import jag.nn.functional as F

rng = np.random.default_rng(7)
INF, NAN = math.inf, math.nan
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _softplus1(x):
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def _round_half_even(x):
    if math.isnan(x) or math.isinf(x):
        return x
    f = math.floor(x)
    d = x - f
    r = f if d < 0.5 else f + 1 if d > 0.5 else (f if f % 2 == 0 else f + 1)
    return math.copysign(r, x) if r == 0 else r


def _whole(f):
    """math.floor & co. over the extended reals: inf and NaN pass through."""
    return lambda x: x if not math.isfinite(x) else float(f(x))


# name -> (jag callable, formula per element in float64). The formulas are
# torch's documented definitions (torch.round: halves to even; F.elu with
# alpha; F.softplus reverting to x above threshold; F.hardtanh a clamp).
FORMULAS = {
    "floor": (jag.floor, _whole(math.floor)),
    "ceil": (jag.ceil, _whole(math.ceil)),
    "trunc": (jag.trunc, _whole(math.trunc)),
    "round": (jag.round, _round_half_even),
    "log1p": (jag.log1p, lambda x: math.log1p(x) if x > -1 else (-INF if x == -1 else NAN)),
    "expm1": (jag.expm1, lambda x: INF if x >= 709 else math.expm1(x)),
    "erf": (jag.erf, math.erf),
    "erfc": (jag.erfc, math.erfc),
    "selu": (F.selu, lambda x: SELU_SCALE * (x if x > 0 else SELU_ALPHA * math.expm1(x))),
    "hardswish": (F.hardswish, lambda x: x * min(max(x + 3, 0.0), 6.0) / 6),
    "hardsigmoid": (F.hardsigmoid, lambda x: min(max(x + 3, 0.0), 6.0) / 6),
    "mish": (F.mish, lambda x: x * math.tanh(_softplus1(x))),
    "logsigmoid": (F.logsigmoid, lambda x: -_softplus1(-x)),
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.2), lambda x: x if x > 0 else 0.2 * x),
    "elu": (lambda t: F.elu(t, 0.7), lambda x: x if x > 0 else 0.7 * math.expm1(x)),
    "softplus": (lambda t: F.softplus(t, 2.0, 3.0), lambda x: x if 2 * x > 3 else _softplus1(2 * x) / 2),
    "hardtanh": (lambda t: F.hardtanh(t, -0.5, 2.0), lambda x: min(max(x, -0.5), 2.0)),
}
FINITE = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.7, -3.0, 3.0, 1e-300, -1e-300, 1e-8, -0.9, 5.0, -30.0, 30.0, 300.0,
          -300.0]
SPECIAL = [INF, -INF, NAN]


def _same(got, want, rtol):
    if math.isnan(want):
        return math.isnan(got)
    if math.isinf(want) or want == 0:
        return got == want
    return abs(got - want) <= rtol * abs(want)


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_float64_values_against_formula(name):
    fn, formula = FORMULAS[name]
    xs = FINITE + SPECIAL
    got = fn(jag.tensor(xs, dtype=jag.float64)).tolist()
    for x, g in zip(xs, got):
        if name == "hardswish" and x == -INF:
            want = NAN  # -inf * 0, as torch
        elif name == "mish" and x == -INF:
            want = NAN  # -inf * tanh(0), as torch
        elif name == "mish" and x == INF:
            want = INF
        elif name in ("selu", "elu") and x == -INF:
            want = formula(-1000.0)
        elif name in ("mish", "logsigmoid", "hardsigmoid", "hardswish", "selu", "elu", "softplus", "leaky_relu",
                      "hardtanh") and math.isnan(x):
            want = NAN
        else:
            try:
                want = float(formula(x))
            except (OverflowError, ValueError):
                want = INF if name in ("mish", "softplus") else NAN
        assert _same(g, want, 4e-16 if name in ("floor", "ceil", "trunc", "round") else 4e-15), (name, x, g, want)


def test_round_halves_to_even_and_signed_zeros():
    x = jag.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 4503599627370497.0, -0.0], dtype=jag.float64)
    got = jag.round(x).tolist()
    assert got == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 4503599627370497.0, -0.0]
    assert [math.copysign(1, v) for v in (got[3], got[7])] == [-1, -1]
    assert jag.round(jag.tensor([0.5, 1.5, 2.5], dtype=jag.float32)).tolist() == [0.0, 2.0, 2.0]


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_float32_close_to_formula(name):
    fn, formula = FORMULAS[name]
    xs = np.float32(rng.uniform(-8, 8, 200)).astype(np.float64)
    got = fn(jag.tensor(xs.astype(np.float32))).numpy()
    assert got.dtype == np.float32
    want = np.array([formula(float(x)) for x in xs])
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-37)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc"])
def test_rounding_keeps_integer_dtypes(name):
    fn = getattr(jag, name)
    for dt in (jag.int32, jag.int64):
        x = jag.tensor([-7, 0, 5], dtype=dt)
        y = fn(x)
        assert y.dtype == dt and y.tolist() == [-7, 0, 5]
        assert getattr(x, name)().tolist() == [-7, 0, 5]
    with pytest.raises(Exception, match="bool"):
        fn(jag.tensor([True, False]))


@pytest.mark.parametrize("name", ["log1p", "expm1", "erf", "erfc", "selu", "hardswish", "hardsigmoid", "mish",
                                  "logsigmoid", "leaky_relu", "elu", "softplus", "hardtanh"])
def test_float_ops_promote_integers_to_float32(name):
    fn, formula = FORMULAS[name]
    y = fn(jag.tensor([-2, 0, 3], dtype=jag.int64))
    assert y.dtype == jag.float32
    np.testing.assert_allclose(y.numpy(), [formula(v) for v in (-2.0, 0.0, 3.0)], rtol=1e-6)


def test_tensor_methods_as_torch():
    x = jag.tensor([0.25, -1.75], dtype=jag.float64)
    for name in ("floor", "ceil", "round", "trunc", "log1p", "expm1", "erf", "erfc"):
        np.testing.assert_array_equal(getattr(x, name)().numpy(), getattr(jag, name)(x).numpy())
    assert x.floor().tolist() == [0.0, -2.0] and x.round().tolist() == [0.0, -2.0]


def test_bad_arguments_are_refused():
    x = jag.tensor([1.0, 2.0])
    with pytest.raises(Exception, match="min_val"):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(Exception, match="beta"):
        F.softplus(x, beta=0.0)
    with pytest.raises(NotImplementedError):
        F.elu(x, inplace=True)
    with pytest.raises(ValueError):
        nn.Hardtanh(1.0, -1.0)
    assert x.tolist() == [1.0, 2.0]


# Gradients by gradcheck (central differences in float64), away from the
# kinks where one-sided rules are a convention.
GRAD_CASES = {
    "log1p": (jag.log1p, (-0.9, 4)),
    "expm1": (jag.expm1, (-3, 3)),
    "erf": (jag.erf, (-2.5, 2.5)),
    "erfc": (jag.erfc, (-2.5, 2.5)),
    "selu": (F.selu, (-3, 3)),
    "hardswish": (F.hardswish, (-5, 5)),
    "hardsigmoid": (F.hardsigmoid, (-5, 5)),
    "mish": (F.mish, (-5, 5)),
    "logsigmoid": (F.logsigmoid, (-30, 30)),
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.3), (-3, 3)),
    "elu": (lambda t: F.elu(t, 1.3), (-3, 3)),
    "softplus": (lambda t: F.softplus(t, 1.5, 2.0), (-4, 4)),
    "hardtanh": (lambda t: F.hardtanh(t, -0.5, 1.0), (-2, 2)),
}
KINKS = {"hardswish": (-3, 3), "hardsigmoid": (-3, 3), "leaky_relu": (0,), "elu": (0,), "selu": (0,),
         "softplus": (2.0 / 1.5,), "hardtanh": (-0.5, 1.0)}


def _away_from(points, lo, hi, n):
    v = rng.uniform(lo, hi, n)
    for p in points:
        v = np.where(np.abs(v - p) < 1e-3, v + 0.01, v)
    return v


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradcheck(name):
    fn, (lo, hi) = GRAD_CASES[name]
    x = jag.tensor(_away_from(KINKS.get(name, ()), lo, hi, (3, 5)), requires_grad=True)
    assert jag.autograd.gradcheck(fn, (x,))


def test_rounding_gradients_are_zero():
    for name in ("floor", "ceil", "round", "trunc"):
        x = jag.tensor([0.3, -1.7, 2.5], dtype=jag.float64, requires_grad=True)
        getattr(jag, name)(x).sum().backward()
        assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_gradients_at_kinks_follow_torch():
    # torch (2.15): elu'(0) = alpha (x <= 0 takes the exponential side);
    # leaky_relu'(0) = slope; hardtanh' is 0 at both bounds; hardswish'(-3) = 0
    # and hardswish'(3) = 1 (its middle formula x / 3 + 1/2 holds on the open
    # interval (-3, 3), measured against torch 2.15);
    # hardsigmoid' is 0 at +-3.
    def grad(f, vals):
        x = jag.tensor(vals, dtype=jag.float64, requires_grad=True)
        f(x).sum().backward()
        return x.grad.tolist()

    assert grad(lambda t: F.elu(t, 0.7), [0.0]) == [0.7]
    assert grad(lambda t: F.leaky_relu(t, 0.2), [0.0]) == [0.2]
    assert grad(lambda t: F.hardtanh(t, -1.0, 1.0), [-1.0, 1.0, 0.0]) == [0.0, 0.0, 1.0]
    assert grad(F.hardswish, [-3.0, 3.0, 0.0]) == [0.0, 1.0, 0.5]
    assert grad(F.hardsigmoid, [-3.0, 3.0, 0.0]) == [0.0, 0.0, 1 / 6]


ALL_FNS = dict((n, f) for n, (f, _) in FORMULAS.items())


def _jagged(lengths, d=3, seed=0):
    r = np.random.default_rng(seed)
    return jag.nested.nested_tensor([jag.tensor(r.uniform(-4, 4, (n, d))) for n in lengths], layout=jag.jagged)


@pytest.mark.parametrize("name", sorted(ALL_FNS))
def test_nested_equals_per_component(name):
    fn = ALL_FNS[name]
    nt = _jagged([2, 0, 5, 1])
    out = fn(nt)
    assert out.is_nested
    for got, comp in zip(out.unbind(), nt.unbind()):
        np.testing.assert_array_equal(got.numpy(), fn(comp).numpy())


def test_nested_gradcheck():
    nt = _jagged([1, 3], d=2, seed=3)
    nt.requires_grad_()
    assert jag.autograd.gradcheck(lambda t: F.mish(t) + F.softplus(t, 2.0, 3.0) + jag.erf(t), [nt])


def test_modules():
    x = jag.tensor(rng.uniform(-4, 4, (2, 6)))
    pairs = [(nn.LeakyReLU(0.1), lambda t: F.leaky_relu(t, 0.1)), (nn.ELU(0.5), lambda t: F.elu(t, 0.5)),
             (nn.SELU(), F.selu), (nn.Softplus(2.0, 1.0), lambda t: F.softplus(t, 2.0, 1.0)),
             (nn.Hardtanh(-2.0, 2.0), lambda t: F.hardtanh(t, -2.0, 2.0)), (nn.Hardswish(), F.hardswish),
             (nn.Hardsigmoid(), F.hardsigmoid), (nn.Mish(), F.mish), (nn.LogSigmoid(), F.logsigmoid)]
    for mod, f in pairs:
        np.testing.assert_array_equal(mod(x).numpy(), f(x).numpy())
    assert "negative_slope=0.1" in repr(nn.LeakyReLU(0.1))
    assert nn.Mish.__name__ == "Mish"


def test_compiled_program_equals_eager():
    def block(x):
        y = F.mish(x) + F.leaky_relu(x, 0.2) * jag.erf(x)
        y = F.softplus(y, 2.0, 3.0) - F.hardtanh(x, -0.5, 0.5) + jag.log1p(jag.abs(x))
        return F.hardswish(y) + jag.floor(x) * F.logsigmoid(x)

    nt = _jagged([5, 17, 3], d=8, seed=5)
    tr = jag.trace(block, nt).desugar().dce().fuse()
    assert "fused" in str(tr)
    for a, b in zip(tr.compile()(nt).unbind(), block(nt).unbind()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    dense = jag.tensor(rng.uniform(-4, 4, (4, 33)), requires_grad=True)
    fast = jag.compile(block)
    np.testing.assert_allclose(fast(dense).detach().numpy(), block(dense).detach().numpy(), rtol=1e-12, atol=1e-14)
    fast(dense).sum().backward()
    g_compiled = dense.grad.numpy().copy()
    dense.grad = None
    block(dense).sum().backward()
    np.testing.assert_allclose(g_compiled, dense.grad.numpy(), rtol=1e-12, atol=1e-14)
