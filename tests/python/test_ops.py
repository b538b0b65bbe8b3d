"""Ops through the generic boxed entry point, against numpy references."""
import math

import numpy as np
import pytest

import jag
import jag.nn.functional as F

rng = np.random.default_rng(0)


def arr(*shape, dtype=np.float64, positive=False):
    a = rng.standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.1
    return a.astype(dtype)


def erf(x):
    return np.vectorize(math.erf)(x)


UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)), "gelu": lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "square": np.square, "sign": np.sign,
}
POSITIVE = {"log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary(name, dtype):
    a = arr(3, 5, dtype=dtype)
    out = getattr(jag, name)(jag.tensor(a))
    assert out.dtype is jag.tensor(a).dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), UNARY[name](a.astype(np.float64)), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_unary_positive_domain(name):
    a = arr(4, 3, positive=True)
    np.testing.assert_allclose(getattr(jag, name)(jag.tensor(a)).numpy(), POSITIVE[name](a), rtol=1e-12)


def test_unary_int_promotion():
    assert jag.sin(jag.tensor([1, 2])).dtype is jag.float32
    assert jag.relu(jag.tensor([-1, 2])).dtype is jag.int64
    assert jag.relu(jag.tensor([-1, 2])).tolist() == [0, 2]


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
          "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(name):
    a, b = arr(3, 1, 4), arr(5, 1)
    b[0, 0] = a[0, 0, 0]  # an equal pair for the comparisons
    out = getattr(jag, name)(jag.tensor(a), jag.tensor(b))
    ref = BINARY[name](a, b)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    if name in ("eq", "ne", "lt", "le", "gt", "ge"):
        assert out.dtype is jag.bool


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_scalar_both_sides(name):
    a = arr(4)
    t = jag.tensor(a)
    np.testing.assert_allclose(getattr(jag, name)(t, 0.5).numpy(), BINARY[name](a, 0.5), rtol=1e-12)
    np.testing.assert_allclose(getattr(jag, name)(0.5, t).numpy(), BINARY[name](0.5, a), rtol=1e-12)


def test_pow():
    a = arr(3, 4, positive=True)
    b = arr(3, 4)
    np.testing.assert_allclose(jag.pow(jag.tensor(a), jag.tensor(b)).numpy(), a ** b, rtol=1e-12)
    np.testing.assert_allclose((jag.tensor(a) ** 2).numpy(), a ** 2, rtol=1e-12)
    np.testing.assert_allclose((2 ** jag.tensor(b)).numpy(), 2 ** b, rtol=1e-12)


def test_pow_operator_forms():
    """``**`` is TensorBase's C slot for tensor ** tensor and tensor ** int /
    float; other operands (a scalar base, a bool, a list) take the Python
    fallback. Every form against numpy; pow(x, y, m) is refused (torch: no
    modulus for tensors)."""
    a, b = arr(3, 4, positive=True), arr(3, 4)
    x, y = jag.tensor(a), jag.tensor(b)
    np.testing.assert_allclose((x ** y).numpy(), a ** b, rtol=1e-12)
    np.testing.assert_allclose((x ** 3).numpy(), a ** 3, rtol=1e-12)
    np.testing.assert_allclose((x ** -0.5).numpy(), a ** -0.5, rtol=1e-12)
    np.testing.assert_allclose((x ** True).numpy(), a, rtol=1e-12)
    np.testing.assert_allclose((1.5 ** y).numpy(), 1.5 ** b, rtol=1e-12)
    np.testing.assert_allclose((x ** [2.0, 1.0, 0.5, 3.0]).numpy(), a ** np.array([2.0, 1.0, 0.5, 3.0]), rtol=1e-12)
    i = jag.arange(5)
    assert (i ** 2).dtype == jag.int64 and (i ** 2).tolist() == [0, 1, 4, 9, 16]
    with pytest.raises(TypeError, match="modulus"):
        pow(x, 2, 3)
    with pytest.raises(TypeError):
        x ** "2"


def test_operators():
    a, b = arr(2, 3), arr(2, 3)
    x, y = jag.tensor(a), jag.tensor(b)
    np.testing.assert_allclose((x + y).numpy(), a + b)
    np.testing.assert_allclose((x - y).numpy(), a - b)
    np.testing.assert_allclose((x * y).numpy(), a * b)
    np.testing.assert_allclose((x / y).numpy(), a / b)
    np.testing.assert_allclose((-x).numpy(), -a)
    np.testing.assert_allclose(abs(x).numpy(), np.abs(a))
    np.testing.assert_allclose((1 + x).numpy(), 1 + a)
    np.testing.assert_allclose((1 - x).numpy(), 1 - a)
    np.testing.assert_allclose((2 * x).numpy(), 2 * a)
    np.testing.assert_allclose((1 / y).numpy(), 1 / b)
    np.testing.assert_array_equal((x < y).numpy(), a < b)
    np.testing.assert_array_equal((x >= 0).numpy(), a >= 0)
    np.testing.assert_array_equal((x == x).numpy(), np.ones_like(a, dtype=bool))
    np.testing.assert_array_equal((x != y).numpy(), a != b)
    np.testing.assert_allclose((x @ y.T).numpy(), a @ b.T)
    np.testing.assert_allclose((x + [1.0, 2.0, 3.0]).numpy(), a + [1, 2, 3])


def test_add_sub_alpha():
    a, b = arr(3), arr(3)
    np.testing.assert_allclose(jag.add(jag.tensor(a), jag.tensor(b), alpha=2).numpy(), a + 2 * b)
    np.testing.assert_allclose(jag.sub(jag.tensor(a), jag.tensor(b), alpha=3).numpy(), a - 3 * b)


def test_int_scalar_promotion():
    t = jag.tensor([1, 2, 3])
    assert (t + 1).dtype is jag.int64
    assert (t * 2).tolist() == [2, 4, 6]
    assert (t / 2).dtype.is_floating_point
    assert (t + 0.5).dtype is jag.float32
    i32 = jag.tensor(np.array([1, 2], dtype=np.int32))
    assert (i32 + 1).dtype is jag.int32
    assert (1 + i32).dtype is jag.int32


def test_where():
    a, b = arr(3, 4), arr(3, 4)
    c = a > 0
    out = jag.where(jag.tensor(c), jag.tensor(a), jag.tensor(b))
    np.testing.assert_allclose(out.numpy(), np.where(c, a, b))
    np.testing.assert_allclose(jag.where(jag.tensor(c), jag.tensor(a), 0.0).numpy(), np.where(c, a, 0))


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2), [1, 2]])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(name, dim, keepdim):
    a = arr(3, 4, 5)
    ref_fn = {"sum": np.sum, "mean": np.mean, "amax": np.amax, "amin": np.amin, "prod": np.prod}[name]
    npdim = tuple(dim) if isinstance(dim, (list, tuple)) else dim
    ref = ref_fn(a, axis=npdim, keepdims=keepdim)
    out = getattr(jag, name)(jag.tensor(a), dim=dim, keepdim=keepdim)
    assert out.shape == np.shape(ref)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10)
    meth = getattr(jag.tensor(a), name)(dim, keepdim)
    np.testing.assert_allclose(meth.numpy(), ref, rtol=1e-10)


def test_reduction_int_sum_promotes():
    assert jag.tensor([1, 2, 3], dtype=jag.int32).sum().dtype is jag.int64
    assert jag.tensor([True, True, False]).sum().item() == 2


def test_var_std_max_min_arg():
    a = arr(4, 6)
    t = jag.tensor(a)
    np.testing.assert_allclose(jag.var(t, 1).numpy(), a.var(1, ddof=1), rtol=1e-10)
    np.testing.assert_allclose(t.std(0, correction=0).numpy(), a.std(0), rtol=1e-10)
    assert jag.max(t).item() == a.max() and jag.min(t).item() == a.min()
    v, i = jag.max(t, 1)
    np.testing.assert_allclose(v.numpy(), a.max(1))
    np.testing.assert_array_equal(i.numpy(), a.argmax(1))
    r = t.min(0, keepdim=True)
    assert r.values.shape == (1, 6) and r.indices.dtype is jag.int64
    assert jag.argmax(t).item() == a.argmax()
    np.testing.assert_array_equal(t.argmin(1).numpy(), a.argmin(1))
    np.testing.assert_allclose(jag.max(t, jag.zeros(4, 6, dtype=jag.float64)).numpy(), np.maximum(a, 0))


def test_matmul_mm_bmm():
    a, b = arr(3, 4), arr(4, 5)
    np.testing.assert_allclose(jag.mm(jag.tensor(a), jag.tensor(b)).numpy(), a @ b, rtol=1e-12)
    x, y = arr(2, 3, 4), arr(2, 4, 5)
    np.testing.assert_allclose(jag.bmm(jag.tensor(x), jag.tensor(y)).numpy(), x @ y, rtol=1e-12)
    for s1, s2 in [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2))]:
        p, q = arr(*s1), arr(*s2)
        np.testing.assert_allclose(jag.matmul(jag.tensor(p), jag.tensor(q)).numpy(), np.matmul(p, q), rtol=1e-10)
    f32 = jag.tensor(arr(3, 4, dtype=np.float32))
    assert (f32 @ f32.T).dtype is jag.float32


def softmax_ref(a, dim):
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(dim):
    a = arr(3, 4, 5)
    np.testing.assert_allclose(jag.softmax(jag.tensor(a), dim).numpy(), softmax_ref(a, dim), rtol=1e-12)
    np.testing.assert_allclose(jag.log_softmax(jag.tensor(a), dim).numpy(), np.log(softmax_ref(a, dim)),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jag.tensor(a).softmax(dim).numpy(), softmax_ref(a, dim), rtol=1e-12)
    np.testing.assert_allclose(F.softmax(jag.tensor(a), dim=dim).numpy(), softmax_ref(a, dim), rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(jag.tensor(a), dim).numpy(), np.log(softmax_ref(a, dim)), rtol=1e-10)


def test_functional_activations():
    a = arr(5, 3)
    t = jag.tensor(a)
    np.testing.assert_allclose(F.relu(t).numpy(), np.maximum(a, 0))
    np.testing.assert_allclose(F.silu(t).numpy(), a / (1 + np.exp(-a)), rtol=1e-12)
    np.testing.assert_allclose(F.gelu(t).numpy(), UNARY["gelu"](a), rtol=1e-10)
    np.testing.assert_allclose(F.gelu(t, approximate="tanh").numpy(), UNARY["gelu_tanh"](a), rtol=1e-10)
    with pytest.raises(ValueError):
        F.gelu(t, approximate="bad")


def test_layer_norm_rms_norm_linear():
    a = arr(2, 3, 8)
    w, b = arr(8), arr(8)
    mu = a.mean(-1, keepdims=True)
    var = a.var(-1, keepdims=True)
    ref = (a - mu) / np.sqrt(var + 1e-5) * w + b
    out = F.layer_norm(jag.tensor(a), (8,), jag.tensor(w), jag.tensor(b), eps=1e-5)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(F.layer_norm(jag.tensor(a), 8).numpy(), (a - mu) / np.sqrt(var + 1e-5), rtol=1e-9)
    a2 = a.reshape(2, 24)
    mu2, var2 = a2.mean(-1, keepdims=True), a2.var(-1, keepdims=True)
    np.testing.assert_allclose(F.layer_norm(jag.tensor(a), (3, 8)).numpy(),
                               ((a2 - mu2) / np.sqrt(var2 + 1e-5)).reshape(2, 3, 8), rtol=1e-9)
    rms = a / np.sqrt((a ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(F.rms_norm(jag.tensor(a), [8], jag.tensor(w), eps=1e-6).numpy(), rms, rtol=1e-9)
    x, W, bias = arr(4, 5), arr(3, 5), arr(3)
    np.testing.assert_allclose(F.linear(jag.tensor(x), jag.tensor(W), jag.tensor(bias)).numpy(), x @ W.T + bias,
                               rtol=1e-12)
    np.testing.assert_allclose(F.linear(jag.tensor(x), jag.tensor(W)).numpy(), x @ W.T, rtol=1e-12)
    with pytest.raises(ValueError):
        F.layer_norm(jag.tensor(a), (7,))


def test_cat_stack_index_select():
    a, b = arr(2, 3), arr(4, 3)
    np.testing.assert_allclose(jag.cat([jag.tensor(a), jag.tensor(b)]).numpy(), np.concatenate([a, b]))
    np.testing.assert_allclose(jag.stack([jag.tensor(a), jag.tensor(a)], 1).numpy(), np.stack([a, a], 1))
    idx = jag.tensor([3, 0, 0])
    np.testing.assert_allclose(jag.index_select(jag.tensor(b), 0, idx).numpy(), b[[3, 0, 0]])


def test_generic_op_entry_point():
    x = jag.tensor([[1.0, -2.0]])
    assert jag._op("abs", x).tolist() == [[1.0, 2.0]]
    assert jag._op("sum", x, [], False).item() == -1.0
    assert jag._op("transpose", x, 0, 1).shape == (2, 1)
    v, i = jag._op("max_dim", x, 1, False)
    assert v.tolist() == [1.0] and i.tolist() == [0]
    assert jag._C._op_exists("sin") and not jag._C._op_exists("nope")
    with pytest.raises(ValueError, match="no op"):
        jag._op("nope", x)
    with pytest.raises(ValueError):
        jag._op("sin", x, x)  # wrong argument count
    with pytest.raises(TypeError):
        jag._op("sin", object())
    with pytest.raises(TypeError):
        jag._op("sum", x, ["a"], False)
    with pytest.raises(TypeError):
        jag._op()
