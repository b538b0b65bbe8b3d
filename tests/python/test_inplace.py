"""In-place ops (add_, sub_, mul_, div_, clamp_, zero_, fill_, copy_, the
operators +=, -=, *=, /=), .data and _version, dense and nested, against
numpy; the rules jag.h states for them (shape and dtype kept, read-only
tensors and tensors requiring grad under grad mode refused, the version
counter checked by backward) and the parameter update they exist for:
``with jag.no_grad(): W -= lr * W.grad``."""
import numpy as np
import pytest

import jag

rng = np.random.default_rng(11)


def _ptr(t):
    return (t.values() if t.is_nested else t).detach().numpy().ctypes.data


# (name, call on a jag tensor, the same on a numpy array); every entry
# writes its first argument in place
DENSE_OPS = [
    ("add_ tensor", lambda x, o: x.add_(o), lambda a, b: a + b),
    ("add_ alpha", lambda x, o: x.add_(o, alpha=-2.5), lambda a, b: a - 2.5 * b),
    ("add_ scalar", lambda x, o: x.add_(1.25), lambda a, b: a + 1.25),
    ("add_ scalar alpha", lambda x, o: x.add_(2, alpha=3), lambda a, b: a + 6),
    ("sub_ tensor", lambda x, o: x.sub_(o), lambda a, b: a - b),
    ("sub_ alpha", lambda x, o: x.sub_(o, alpha=0.5), lambda a, b: a - 0.5 * b),
    ("sub_ scalar", lambda x, o: x.sub_(3), lambda a, b: a - 3),
    ("mul_ tensor", lambda x, o: x.mul_(o), lambda a, b: a * b),
    ("mul_ scalar", lambda x, o: x.mul_(-1.5), lambda a, b: a * -1.5),
    ("div_ tensor", lambda x, o: x.div_(o), lambda a, b: a / b),
    ("div_ scalar", lambda x, o: x.div_(4.0), lambda a, b: a / 4.0),
    ("clamp_ min", lambda x, o: x.clamp_(min=-0.25), lambda a, b: np.maximum(a, -0.25)),
    ("clamp_ max", lambda x, o: x.clamp_(max=0.5), lambda a, b: np.minimum(a, 0.5)),
    ("clamp_ both", lambda x, o: x.clamp_(-0.5, 0.5), lambda a, b: np.clip(a, -0.5, 0.5)),
    ("zero_", lambda x, o: x.zero_(), lambda a, b: np.zeros_like(a)),
    ("fill_", lambda x, o: x.fill_(7.5), lambda a, b: np.full_like(a, 7.5)),
    ("fill_ 0-d tensor", lambda x, o: x.fill_(jag.tensor(-2.0)), lambda a, b: np.full_like(a, -2.0)),
    ("copy_", lambda x, o: x.copy_(o), lambda a, b: b + 0 * a),
    ("+=", lambda x, o: x.__iadd__(o), lambda a, b: a + b),
    ("-=", lambda x, o: x.__isub__(o), lambda a, b: a - b),
    ("*=", lambda x, o: x.__imul__(o), lambda a, b: a * b),
    ("/=", lambda x, o: x.__itruediv__(o), lambda a, b: a / b),
    ("+= scalar", lambda x, o: x.__iadd__(2), lambda a, b: a + 2),
    ("-= scalar", lambda x, o: x.__isub__(0.5), lambda a, b: a - 0.5),
    ("*= scalar", lambda x, o: x.__imul__(3), lambda a, b: a * 3),
    ("/= scalar", lambda x, o: x.__itruediv__(8), lambda a, b: a / 8),
    ("+= array", lambda x, o: x.__iadd__(o.numpy().tolist()), lambda a, b: a + b),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,op,ref", DENSE_OPS, ids=[o[0] for o in DENSE_OPS])
@pytest.mark.parametrize("other_shape", [(3, 4), (4,), (1, 4), ()], ids=["same", "row", "1x4", "0d"])
def test_dense_inplace_matches_numpy(name, op, ref, dtype, other_shape):
    a = rng.standard_normal((3, 4)).astype(dtype)
    b = (rng.standard_normal(other_shape) + 3).astype(dtype)  # away from 0 for div
    x, o = jag.tensor(a), jag.tensor(b)
    view = x[1]  # made before the write: an in-place op is seen through it
    ptr, version = _ptr(x), x._version
    r = op(x, o)
    assert r is x
    want = ref(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-6)
    np.testing.assert_allclose(view.numpy(), want[1], rtol=1e-6, atol=1e-6)
    assert x.dtype is jag.tensor(a).dtype and x.shape == (3, 4)
    assert _ptr(x) == ptr  # the same memory
    assert x._version == version + 1 == view._version
    assert o.tolist() == b.tolist()  # the operand is not written


def test_operators_rebind_nothing():
    x = jag.tensor([1.0, 2.0, 3.0])
    alias = x
    x += 1
    x -= jag.tensor([0.5, 0.5, 0.5])
    x *= 2
    x /= jag.tensor(4.0)
    assert x is alias
    np.testing.assert_allclose(alias.numpy(), ((np.array([1.0, 2, 3]) + 1 - 0.5) * 2) / 4)
    assert x._version == 4


def test_integer_and_bool_tensors():
    a = np.array([[5, -3, 8], [0, 2, -7]], np.int64)
    x = jag.tensor(a)
    x.add_(jag.tensor([1, 2, 3]), alpha=2)
    x.sub_(1)
    x *= 3
    x.clamp_(min=-10, max=20)
    np.testing.assert_array_equal(x.numpy(), np.clip((a + 2 * np.array([1, 2, 3]) - 1) * 3, -10, 20))
    assert x.dtype is jag.int64
    i32 = jag.tensor(np.array([1, 2], np.int32))
    i32.add_(jag.tensor([10, 20]))  # int64 into int32: the same kind (torch does the same)
    assert i32.tolist() == [11, 22] and i32.dtype is jag.int32
    x.fill_(2.9)  # fill_ converts as torch: truncates toward zero
    assert x.tolist() == [[2, 2, 2], [2, 2, 2]]
    m = jag.tensor([True, False, False])
    m.add_(True)  # torch: tensor([True, True, True])
    m.mul_(jag.tensor([True, False, True]))
    assert m.tolist() == [True, False, True]
    f32 = jag.tensor([1.0, 2.0])
    f32.add_(jag.tensor([0.5, 0.25], dtype=jag.float64))  # float64 into float32: the same kind
    f32 += jag.tensor([1, 1])  # int into float
    assert f32.tolist() == [2.5, 3.25] and f32.dtype is jag.float32


def test_result_must_keep_self_dtype_and_shape():
    """As torch: 'result type Float can't be cast to the desired output
    type Long', 'output with shape [2] doesn't match the broadcast shape
    [2, 2]'. Nothing is written and the version stays."""
    x = jag.tensor([1, 2, 3])
    cases = [
        (TypeError, "float", lambda: x.add_(1.5)),
        (TypeError, "float", lambda: x.mul_(2.0)),
        (TypeError, "float", lambda: x.__iadd__(0.5)),
        (TypeError, "int64", lambda: x.div_(2)),  # true division gives a float
        (TypeError, "int64", lambda: x.div_(jag.tensor(2))),
        (TypeError, "float", lambda: x.add_(jag.tensor([1.0, 1.0, 1.0]))),
        (TypeError, "alpha", lambda: x.add_(jag.tensor([1, 1, 1]), alpha=2.5)),
        (TypeError, "min", lambda: x.clamp_(min=1.5)),
        (TypeError, "bool", lambda: jag.tensor([True]).add_(1)),
        (ValueError, r"shape \[3, 3\].*self's shape \[3\]", lambda: x.add_(jag.ones(3, 3, dtype=jag.int64))),
        (ValueError, "at least one", lambda: x.clamp_()),
        (TypeError, "src", lambda: x.copy_([1, 2, 3])),
        (TypeError, "value", lambda: x.fill_("a")),
        (TypeError, "other", lambda: x.add_("a")),
    ]
    for exc, msg, f in cases:
        with pytest.raises(exc, match=msg):
            f()
        assert x.tolist() == [1, 2, 3] and x._version == 0
    with pytest.raises(TypeError):
        y = jag.tensor([1.0])
        y += "a"  # unsupported operand: Python's own TypeError path


def _nested(seed=0, dtype=np.float32):
    r = np.random.default_rng(seed)
    comps = [r.standard_normal((n, 3)).astype(dtype) for n in (2, 0, 4, 1)]
    return jag.nested.nested_tensor([jag.tensor(c) for c in comps], layout=jag.jagged), comps


NESTED_OPS = [
    ("add_", lambda x, o: x.add_(o, alpha=2), lambda a, b: a + 2 * b),
    ("sub_", lambda x, o: x.sub_(o), lambda a, b: a - b),
    ("mul_", lambda x, o: x.mul_(o), lambda a, b: a * b),
    ("div_", lambda x, o: x.div_(o), lambda a, b: a / b),
    ("copy_", lambda x, o: x.copy_(o), lambda a, b: b + 0 * a),
    ("+=", lambda x, o: x.__iadd__(o), lambda a, b: a + b),
    ("-=", lambda x, o: x.__isub__(o), lambda a, b: a - b),
    ("*=", lambda x, o: x.__imul__(o), lambda a, b: a * b),
    ("/=", lambda x, o: x.__itruediv__(o), lambda a, b: a / b),
]


@pytest.mark.parametrize("operand", ["nested", "dense row", "scalar"])
@pytest.mark.parametrize("name,op,ref", NESTED_OPS, ids=[o[0] for o in NESTED_OPS])
def test_nested_inplace_on_packed_values(name, op, ref, operand):
    x, comps = _nested(1)
    offsets = x.offsets().tolist()
    ptr, version = _ptr(x), x._version
    if operand == "nested":
        o, ocomps = _nested(2)
        ocomps = [c + 3 for c in ocomps]
        o = jag.nested.nested_tensor_from_jagged(o.values() + 3, o.offsets())  # the same raggedness as x
        bs = ocomps
    elif operand == "dense row":
        row = np.array([2.0, -3.0, 4.0], np.float32)  # broadcasts over the packed values' trailing dim
        o, bs = jag.tensor(row), [row] * len(comps)
    else:
        if name == "copy_":  # copy_ takes a tensor (fill_ takes a number), as torch
            with pytest.raises(TypeError, match="src"):
                x.copy_(2.5)
            assert x._version == version
            return
        o, bs = 2.5, [np.float32(2.5)] * len(comps)
    r = op(x, o)
    assert r is x and x.is_nested
    assert x.offsets().tolist() == offsets  # the structure is unchanged
    for got, a, b in zip(x.unbind(), comps, bs):
        np.testing.assert_allclose(got.numpy(), ref(a.astype(np.float64), np.asarray(b, np.float64)), rtol=1e-6,
                                   atol=1e-6)
    assert _ptr(x) == ptr and x._version == version + 1


def test_nested_unary_inplace():
    for op, ref in ((lambda x: x.zero_(), lambda a: 0 * a), (lambda x: x.fill_(-1.5), lambda a: 0 * a - 1.5),
                    (lambda x: x.clamp_(-0.5, 0.25), lambda a: np.clip(a, -0.5, 0.25))):
        x, comps = _nested(3)
        values = x.values()  # the packed values: written in place
        assert op(x) is x
        for got, a in zip(x.unbind(), comps):
            np.testing.assert_allclose(got.numpy(), ref(a))
        np.testing.assert_allclose(values.numpy(), ref(np.concatenate(comps)))
    h = jag.nested.nested_tensor_from_jagged(jag.arange(10.0).reshape(5, 2), offsets=[0, 2, 5], lengths=[1, 3])
    h += 1  # holes included: every packed value
    assert h.values().tolist() == (np.arange(10.0).reshape(5, 2) + 1).tolist()
    assert [c.tolist() for c in h.unbind()] == [[[1.0, 2.0]], [[5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]]
    assert h.lengths().tolist() == [1, 3] and h.offsets().tolist() == [0, 2, 5]


def test_nested_inplace_errors_change_nothing():
    x, comps = _nested(4)
    other = jag.nested.nested_tensor([jag.ones(1, 3), jag.ones(3, 3)], layout=jag.jagged)
    with pytest.raises(ValueError):
        x.add_(other)  # another raggedness
    with pytest.raises(ValueError):
        x.copy_(other)
    with pytest.raises(ValueError, match="read-only"):
        x.offsets().copy_(jag.tensor([0, 1, 2, 3, 4]))
    with pytest.raises(ValueError, match="read-only"):
        x.offsets().add_(1)
    with pytest.raises(ValueError, match="read-only"):
        x.offsets().zero_()
    with pytest.raises(NotImplementedError, match="strided"):
        jag.nested.nested_tensor([jag.ones(2)], layout=jag.strided).add_(1)
    for got, a in zip(x.unbind(), comps):
        np.testing.assert_array_equal(got.numpy(), a)
    assert x.offsets().tolist() == [0, 2, 2, 6, 7] and x._version == 0


def test_read_only_tensors_refuse_every_inplace_op(tmp_path):
    path = tmp_path / "w.safetensors"
    jag.save({"w": jag.arange(4, dtype=jag.float32)}, path)
    w = jag.load(path, mmap=True)["w"]
    before = path.read_bytes()
    for f in (lambda: w.add_(1), lambda: w.sub_(jag.ones(4)), lambda: w.mul_(2), lambda: w.div_(2),
              lambda: w.clamp_(0, 1), lambda: w.zero_(), lambda: w.fill_(3), lambda: w.copy_(jag.ones(4)),
              lambda: w.__iadd__(1), lambda: w[1:].__imul__(3), lambda: w.data.add_(1)):
        with pytest.raises(ValueError, match="read-only"):
            f()
    with pytest.raises(ValueError, match="read-only"):
        w[0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        w[w > 1] = 0.0
    assert w.tolist() == [0.0, 1.0, 2.0, 3.0] and w._version == 0
    assert path.read_bytes() == before


def test_sgd_step_under_no_grad_updates_in_place():
    lr = 0.1
    a = rng.standard_normal((3, 2))
    xs = rng.standard_normal((5, 3))
    W = jag.tensor(a, dtype=jag.float64, requires_grad=True)
    x = jag.tensor(xs, dtype=jag.float64)
    W0, ptr = W, _ptr(W)
    ((x @ W) ** 2).sum().backward()
    g = 2 * xs.T @ (xs @ a)  # d/dW sum((xW)^2)
    np.testing.assert_allclose(W.grad.numpy(), g, rtol=1e-12)
    with jag.no_grad():
        W -= lr * W.grad
    assert W is W0 and W.is_leaf and W.requires_grad and _ptr(W) == ptr and W._version == 1
    a1 = a - lr * g
    np.testing.assert_allclose(W.detach().numpy(), a1, rtol=1e-12)
    W.grad = None
    ((x @ W) ** 2).sum().backward()  # the next step reads the new values
    np.testing.assert_allclose(W.grad.numpy(), 2 * xs.T @ (xs @ a1), rtol=1e-12)
    # the same through .data, as older torch code writes it
    W.data.sub_(W.grad, alpha=lr)
    np.testing.assert_allclose(W.detach().numpy(), a1 - lr * 2 * xs.T @ (xs @ a1), rtol=1e-12)
    assert W.requires_grad and W.is_leaf and W._version == 2


def test_inplace_on_tensors_requiring_grad_is_refused_under_grad_mode():
    """torch: 'a leaf Variable that requires grad is being used in an
    in-place operation.' jag refuses an op's output too (autograd does not
    record in-place ops)."""
    W = jag.ones(3, requires_grad=True)
    for f in (lambda: W.add_(1), lambda: W.sub_(jag.ones(3)), lambda: W.mul_(2), lambda: W.div_(2),
              lambda: W.clamp_(0, 1), lambda: W.zero_(), lambda: W.fill_(3), lambda: W.copy_(jag.zeros(3)),
              lambda: W.__iadd__(1), lambda: W.__isub__(jag.ones(3))):
        with pytest.raises(RuntimeError, match="leaf that requires grad"):
            f()
    with pytest.raises(RuntimeError, match="requires grad"):
        W[1:].__imul__(3)  # a view of it (torch: 'a view of a leaf Variable that requires grad')
    with pytest.raises(RuntimeError, match="requires grad"):
        W[0] = 2.0
    h = W * 2
    with pytest.raises(RuntimeError, match="requires grad.*out-of-place"):
        h += 1
    x = jag.ones(3)
    with pytest.raises(RuntimeError, match="'other'.*requires grad"):
        x.add_(W)  # an operand that requires grad: no history would connect x to it
    assert W.tolist() == [1.0, 1.0, 1.0] and W._version == 0 and x.tolist() == [1.0] * 3
    with jag.no_grad():
        W.add_(1)
        h.mul_(0.5)
    assert W.tolist() == [2.0] * 3 and h.tolist() == [1.0] * 3


def test_backward_refuses_tensors_modified_after_they_were_saved():
    """torch: 'one of the variables needed for gradient computation has
    been modified by an inplace operation'. jag's message names the op that
    saved the tensor."""
    a = jag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = a * 1  # not a leaf
    y = (x * x).sum()
    with jag.no_grad():
        x.fill_(10)
    with pytest.raises(RuntimeError, match=r"jag_mul.*modified by an in-place op.*version was 0, now 1"):
        y.backward()
    assert a.grad is None

    w = jag.tensor([1.0, 2.0], requires_grad=True)
    c = jag.tensor([3.0, 4.0])  # a constant mul saved for w's gradient
    y = (c * w).sum()
    c.add_(1)  # c does not require grad: allowed with grad mode on
    with pytest.raises(RuntimeError, match="jag_mul"):
        y.backward()

    W = jag.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (W @ W).sum()
    W.data.mul_(2)  # .data shares the storage, and so its version
    with pytest.raises(RuntimeError, match="modified by an in-place op"):
        y.backward()

    v = jag.tensor([1.0, 2.0], requires_grad=True)
    z = (v * jag.tensor([5.0, 6.0])).sum()  # saves the constant, which nobody writes
    other = jag.tensor([5.0, 6.0])
    other.zero_()
    z.backward()
    assert v.grad.tolist() == [5.0, 6.0]


def test_version_counter():
    x = jag.zeros(2, 3)
    row = x[0]
    assert x._version == 0 and row._version == 0
    x.add_(1)
    row.mul_(2)
    x[1] = 5.0
    x[x > 4] = 4.0
    x.data.zero_()
    assert x._version == row._version == 5  # one counter per storage, shared by views
    assert jag.zeros(1)._version == 0 and x.clone()._version == 0
    y = x + 1  # out-of-place ops bump nothing
    assert x._version == 5 and y._version == 0
    nt, _ = _nested(5)
    v0 = nt._version
    nt.add_(1)
    assert nt._version == v0 + 1 == nt.values()._version  # a nested tensor's is its values'
    with pytest.raises(ValueError):
        x.add_(jag.ones(4, 4))
    assert x._version == 5  # a refused op bumps nothing


def test_data_is_a_detached_alias():
    W = jag.tensor([1.0, 2.0], requires_grad=True)
    d = W.data
    assert not d.requires_grad and d.is_leaf and d._shares_storage(W)
    d[0] = 10.0
    assert W.tolist() == [10.0, 2.0] and W.requires_grad
    h = W * 3
    hd = h.data
    assert not hd.requires_grad and hd.is_leaf and hd.tolist() == [30.0, 6.0]
    nt, comps = _nested(6)
    nd = nt.data
    assert nd.is_nested and not nd.requires_grad and nd.values()._shares_storage(nt.values())
    with pytest.raises(NotImplementedError, match="copy_"):
        W.data = jag.zeros(2)
    assert W.tolist() == [10.0, 2.0]
