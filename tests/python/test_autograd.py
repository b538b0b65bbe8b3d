"""Autograd: hand values, finite differences, gradcheck, grad mode."""
import numpy as np
import pytest

import jag
import jag.nn.functional as F

rng = np.random.default_rng(2)


def numeric_grad(f, a, eps=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        p, m = a.copy(), a.copy()
        p[i] += eps
        m[i] -= eps
        g[i] = (f(p) - f(m)) / (2 * eps)
    return g


def test_requires_grad_flags():
    x = jag.ones(2, 2, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None
    y = jag.zeros(3)
    assert not y.requires_grad
    assert y.requires_grad_() is y and y.requires_grad
    y.requires_grad_(False)
    assert not y.requires_grad
    z = x * 2
    assert z.requires_grad and not z.is_leaf
    assert jag.tensor([1.0], requires_grad=True).requires_grad
    assert jag.randn(2, requires_grad=True).requires_grad


def test_hand_gradients():
    x = jag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])
    # accumulates
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5, 7, 9])
    x.grad = None
    assert x.grad is None


def test_backward_with_gradient_and_retain_graph():
    x = jag.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * x
    y.backward(jag.ones(2, 2), retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([[1, 2], [3, 4]]))
    y.backward([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(x.grad.numpy(), [[4, 4], [6, 16]])
    with pytest.raises(RuntimeError):
        y.backward(jag.ones(2, 2))  # graph freed


def test_non_scalar_backward_needs_gradient():
    x = jag.ones(3, requires_grad=True)
    with pytest.raises((ValueError, TypeError)):
        (x * 2).backward()


def test_backward_without_grad_is_runtime_error():
    with pytest.raises(RuntimeError):
        jag.ones(1).sum().backward()


@pytest.mark.parametrize("fn,ref", [
    (lambda x: jag.tanh(x).sum(), lambda a: np.tanh(a).sum()),
    (lambda x: (jag.sigmoid(x) * x).mean(), lambda a: (a / (1 + np.exp(-a)) * 1).mean()),
    (lambda x: jag.softmax(x, -1)[:, 0].sum(),
     lambda a: (np.exp(a) / np.exp(a).sum(-1, keepdims=True))[:, 0].sum()),
    (lambda x: (x @ x.T).sum(), lambda a: (a @ a.T).sum()),
    (lambda x: (x ** 3).amax(1).sum(), lambda a: (a ** 3).max(1).sum()),
    (lambda x: F.layer_norm(x, (4,)).pow(2.0).mul(jag.arange(4, dtype=jag.float64)).sum(),
     lambda a: ((((a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)) ** 2)
                * np.arange(4)).sum()),
])
def test_gradients_against_finite_differences(fn, ref):
    a = rng.standard_normal((3, 4))
    x = jag.tensor(a, requires_grad=True)
    fn(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), numeric_grad(ref, a), rtol=1e-5, atol=1e-7)


def test_detach_and_no_grad():
    x = jag.ones(2, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf and d._shares_storage(x)
    with jag.no_grad():
        assert not jag.is_grad_enabled()
        y = x * 2
    assert jag.is_grad_enabled()
    assert not y.requires_grad

    @jag.no_grad()
    def f(t):
        return t * 3

    assert not f(x).requires_grad
    with jag.set_grad_enabled(False):
        assert not (x * 1).requires_grad
    assert jag.is_grad_enabled()


def test_no_grad_restores_on_exception():
    with pytest.raises(KeyError):
        with jag.no_grad():
            raise KeyError()
    assert jag.is_grad_enabled()


def test_numpy_of_requires_grad_tensor_raises():
    x = jag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        x.numpy()
    assert x.detach().numpy().tolist() == [1, 1]


def test_requires_grad_on_int_is_an_error():
    with pytest.raises(ValueError):
        jag.ones(2, dtype=jag.int64, requires_grad=True)
    with pytest.raises(ValueError):
        (jag.ones(2, requires_grad=True) * 2).requires_grad_()


def test_nested_gradients():
    lens = [2, 3]
    values = rng.standard_normal((5, 3))
    nt = jag.nested.nested_tensor_from_jagged(jag.tensor(values), [0, 2, 5])
    nt.requires_grad_()
    w = jag.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    y = jag.silu(nt @ w)
    y.values().sum().backward()
    g = nt.grad
    assert g.is_nested and g.layout is jag.jagged
    assert g.offsets().tolist() == [0, 2, 5]
    wn = w.detach().numpy()

    def f_values(v):
        h = v @ wn
        return (h / (1 + np.exp(-h))).sum()

    np.testing.assert_allclose(g.values().numpy(), numeric_grad(f_values, values), rtol=1e-5, atol=1e-8)

    def f_w(wv):
        h = values @ wv
        return (h / (1 + np.exp(-h))).sum()

    np.testing.assert_allclose(w.grad.numpy(), numeric_grad(f_w, wn), rtol=1e-5, atol=1e-8)
    assert len(lens) == 2


def test_padded_gradients():
    nt = jag.nested.nested_tensor([jag.ones(2, 2, dtype=jag.float64), jag.ones(1, 2, dtype=jag.float64)],
                                  layout=jag.jagged, requires_grad=True)
    p = jag.nested.to_padded_tensor(nt, 0.0)
    (p * jag.arange(6, dtype=jag.float64).reshape(1, 3, 2)[:, :2]).sum().backward()
    assert [c.tolist() for c in nt.grad.unbind()] == [[[0, 1], [2, 3]], [[0, 1]]]


def test_gradcheck():
    a = jag.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    b = jag.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    assert jag.autograd.gradcheck(lambda x, y: jag.tanh(x @ y), (a, b))
    nt = jag.nested.nested_tensor([jag.tensor(rng.standard_normal((n, 2))) for n in (1, 3)], layout=jag.jagged)
    nt.requires_grad_()
    assert jag.autograd.gradcheck(lambda x: jag.sin(x) * x, [nt])


def test_gradcheck_propagates_python_errors():
    a = jag.tensor([1.0, 2.0], dtype=jag.float64, requires_grad=True)
    with pytest.raises(ZeroDivisionError):
        jag.autograd.gradcheck(lambda x: 1 / 0, (a,))
    with pytest.raises(TypeError):
        jag.autograd.gradcheck(lambda x: 3.0, (a,))
    with pytest.raises(TypeError):
        jag.autograd.gradcheck(5, (a,))


# gradcheck (jag_gradcheck: every Jacobian entry vs central differences)
# over the ops bound here, dense and nested.
def _T(*s):
    return jag.tensor(rng.standard_normal(s), requires_grad=True)


def _gradcheck_cases():
    T = _T
    cases = {
     "mm": (lambda a, b: a @ b, [T(3, 4), T(4, 2)]),
     "bmm": (lambda a, b: jag.bmm(a, b), [T(2, 3, 4), T(2, 4, 2)]),
     "matmul bcast": (lambda a, b: jag.matmul(a, b), [T(2, 1, 3, 4), T(3, 4, 2)]),
     "matvec": (lambda a, b: jag.matmul(a, b), [T(3, 4), T(4)]),
     "linear": (lambda x, w, b: F.linear(x, w, b), [T(2, 3, 4), T(5, 4), T(5)]),
     "ln": (lambda x, w, b: F.layer_norm(x, (2, 4), w, b), [T(3, 2, 4), T(2, 4), T(2, 4)]),
     "rms": (lambda x, w: F.rms_norm(x, (4,), w, eps=1e-5), [T(3, 4), T(4)]),
     "softmax0": (lambda x: jag.softmax(x, 0), [T(3, 4)]),
     "logsm": (lambda x: jag.log_softmax(x, 1), [T(3, 4)]),
     "var": (lambda x: jag.var(x, 1), [T(3, 4)]),
     "std": (lambda x: jag.std(x, [0, 1], correction=0), [T(3, 4)]),
     "prod": (lambda x: jag.prod(x, 1), [T(3, 4)]),
     "amax": (lambda x: jag.amax(x, 0), [T(3, 4)]),
     "max_dim": (lambda x: jag.max(x, 1).values, [T(3, 4)]),
     "pow": (lambda a, b: jag.pow(jag.abs(a) + 0.5, b), [T(3), T(3)]),
     "div": (lambda a, b: a / (b * b + 1), [T(3, 1), T(4)]),
     "where": (lambda a, b: jag.where(a > 0, a, b), [T(3, 4), T(4)]),
     "minimum": (lambda a, b: jag.minimum(a, b), [T(3, 4), T(3, 1)]),
     "transpose-view": (lambda a: a.transpose(0, 1)[1:, :2].reshape(-1) * 3, [T(3, 4)]),
     "expand": (lambda a: a.expand(3, 4) * 2, [T(1, 4)]),
     "cat": (lambda a, b: jag.cat([a, b], 1), [T(2, 3), T(2, 1)]),
     "stack": (lambda a, b: jag.stack([a, b], 0), [T(2, 3), T(2, 3)]),
     "index_select": (lambda a: jag.index_select(a, 0, jag.tensor([2, 0, 2])), [T(3, 2)]),
     "gather": (lambda a: jag.gather(a, 1, jag.tensor([[0, 0], [1, 0], [2, 1]])), [T(3, 3)]),
     "unary chain": (lambda a: jag.sqrt(jag.exp(a)) + jag.rsqrt(jag.abs(a) + 1) + jag.log(jag.abs(a) + 1) + jag.reciprocal(a * a + 1) + jag.square(a) + jag.silu(a) + jag.gelu_tanh(a) + jag.sigmoid(a) + jag.cos(a), [T(3, 4)]),
     "mean all": (lambda a: a.mean(), [T(3, 4)]),
     "sum keepdim": (lambda a: a.sum([0, 1], keepdim=True), [T(3, 4)]),
     "to_padded from_padded": (lambda p: jag.nested.to_padded_tensor(jag.nested.nested_tensor_from_padded(p, [1, 3]), 0.0), [T(2, 3, 2)]),
     "from_jagged holes": (lambda v: jag.nested.to_padded_tensor(jag.softmax(jag.nested.nested_tensor_from_jagged(v, [0, 2, 5], lengths=[1, 3]), 1), 0.0), [T(5, 2)]),
     "nested @ dense grad w": (lambda v, w: (jag.nested.nested_tensor_from_jagged(v, [0, 2, 5]) @ w).values(), [T(5, 2), T(2, 3)]),
     "nested + dense bcast": (lambda v, b: (jag.nested.nested_tensor_from_jagged(v, [0, 2, 5]) + b).values(), [T(5, 2), T(2)]),
     "nested ln w b": (lambda v, w, b: F.layer_norm(jag.nested.nested_tensor_from_jagged(v, [0, 2, 5]), 2, w, b).values(), [T(5, 2), T(2), T(2)]),
     "nested sum ragged holes": (lambda v: jag.sum(jag.nested.nested_tensor_from_jagged(v, [0, 2, 5], lengths=[2, 1]), 1), [T(5, 2)]),
     "nested mean ragged": (lambda v: jag.mean(jag.nested.nested_tensor_from_jagged(v, [0, 2, 5]), 1), [T(5, 2)]),
    }
    return cases


_CASES = _gradcheck_cases()


@pytest.mark.parametrize("name", sorted(_CASES))
def test_gradcheck_ops(name):
    f, ins = _CASES[name]
    assert jag.autograd.gradcheck(f, ins)


def test_gradcheck_refuses_non_leaf_inputs():
    v = jag.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=jag.float64, requires_grad=True)
    nt = jag.nested.nested_tensor_from_jagged(v, [0, 1, 2])  # a view made by an op: not a leaf
    with pytest.raises(ValueError, match="not a leaf"):
        jag.autograd.gradcheck(lambda t: jag.sin(t).values(), [nt])
    leaf = jag.nested.nested_tensor_from_jagged(v.detach(), [0, 1, 2]).requires_grad_()
    assert jag.autograd.gradcheck(lambda t: jag.sin(t).values(), [leaf])
