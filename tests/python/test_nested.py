"""jag.nested against per-component numpy."""
import numpy as np
import pytest

import jag
import jag.nn.functional as F

rng = np.random.default_rng(1)
LENS = [2, 4, 3]


def comps(d=3, lens=LENS):
    return [rng.standard_normal((n, d)) for n in lens]


def nt_of(cs, layout=jag.jagged):
    return jag.nested.nested_tensor([jag.tensor(c) for c in cs], layout=layout)


@pytest.mark.parametrize("layout", [jag.jagged, jag.strided])
def test_nested_tensor_basics(layout):
    cs = comps()
    nt = nt_of(cs, layout)
    assert nt.is_nested and nt.layout is layout
    assert nt.dtype is jag.float64
    assert nt.ndim == 3
    s = nt.shape
    assert s[0] == 3 and s[2] == 3 and isinstance(s[1], jag.RaggedDim)
    assert repr(s[1]).startswith("j")
    assert nt.size(0) == 3 and nt.size(-1) == 3
    assert isinstance(nt.size(1), jag.RaggedDim)
    parts = nt.unbind()
    assert len(parts) == 3
    for p, c in zip(parts, cs):
        np.testing.assert_array_equal(p.numpy(), c)
    assert "nested_tensor" in repr(nt)
    assert [x.shape for x in nt] == [(2, 3), (4, 3), (3, 3)]


def test_nested_tensor_from_lists_and_dtype():
    nt = jag.nested.nested_tensor([[1, 2], [3]], dtype=jag.float32, layout=jag.jagged)
    assert nt.dtype is jag.float32
    assert [c.tolist() for c in nt.unbind()] == [[1, 2], [3]]
    assert nt.tolist() == [[1, 2], [3]]


def test_default_layout_is_strided_and_strided_differs_in_every_dim():
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(4, 5)])
    assert nt.layout is jag.strided
    assert [c.shape for c in nt.unbind()] == [(2, 3), (4, 5)]
    with pytest.raises(ValueError):
        jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(4, 5)], layout=jag.jagged)


def test_values_offsets_lengths():
    cs = comps()
    nt = nt_of(cs)
    np.testing.assert_array_equal(nt.values().numpy(), np.concatenate(cs))
    assert nt.offsets().tolist() == [0, 2, 6, 9]
    assert nt.lengths() is None


def test_from_jagged_is_a_view_with_lengths():
    values = jag.arange(18, dtype=jag.float32).reshape(9, 2)
    nt = jag.nested.nested_tensor_from_jagged(values, [0, 2, 6, 9])
    assert nt.values()._shares_storage(values)
    np.testing.assert_array_equal(nt.unbind()[1].numpy(), values.numpy()[2:6])
    holes = jag.nested.nested_tensor_from_jagged(values, jag.tensor([0, 2, 6, 9]), lengths=[1, 3, 0])
    assert holes.lengths().tolist() == [1, 3, 0]
    assert [c.shape for c in holes.unbind()] == [(1, 2), (3, 2), (0, 2)]
    with pytest.raises(ValueError):
        jag.nested.nested_tensor_from_jagged(values, [0, 2, 6, 8])
    with pytest.raises(ValueError):
        jag.nested.nested_tensor_from_jagged(values, None)


def test_shared_offsets_share_ragged_id():
    nt = nt_of(comps())
    y = jag.sin(nt)
    assert y.shape[1] == nt.shape[1]
    other = nt_of(comps(lens=[5, 1, 1]))
    assert other.shape[1] != nt.shape[1]


def test_padded_round_trip():
    cs = comps()
    nt = nt_of(cs)
    p = jag.nested.to_padded_tensor(nt, -1.0)
    ref = np.full((3, 4, 3), -1.0)
    for i, c in enumerate(cs):
        ref[i, :len(c)] = c
    np.testing.assert_array_equal(p.numpy(), ref)
    p6 = jag.nested.to_padded_tensor(nt, 0.0, output_size=(3, 6, 3))
    assert p6.shape == (3, 6, 3)
    back = jag.nested.nested_tensor_from_padded(p, [2, 4, 3])
    for a, c in zip(back.unbind(), cs):
        np.testing.assert_array_equal(a.numpy(), c)
    with pytest.raises(TypeError):
        jag.nested.to_padded_tensor(jag.ones(2), 0.0)


@pytest.mark.parametrize("layout", [jag.jagged, jag.strided])
def test_pointwise_and_binary_per_component(layout):
    cs = comps()
    nt = nt_of(cs, layout)
    for fn, ref in [(jag.exp, np.exp), (jag.tanh, np.tanh), (lambda x: x * 2 + 1, lambda c: c * 2 + 1),
                    (lambda x: x * x, lambda c: c * c), (F.relu, lambda c: np.maximum(c, 0))]:
        out = fn(nt)
        assert out.is_nested
        for o, c in zip(out.unbind(), cs):
            np.testing.assert_allclose(o.numpy(), ref(c), rtol=1e-12)


def test_nested_matmul_linear_softmax_sum():
    cs = comps(d=4)
    nt = nt_of(cs)
    w = rng.standard_normal((4, 5))
    h = nt @ jag.tensor(w)
    for o, c in zip(h.unbind(), cs):
        np.testing.assert_allclose(o.numpy(), c @ w, rtol=1e-12)
    W, b = rng.standard_normal((2, 4)), rng.standard_normal(2)
    lin = F.linear(nt, jag.tensor(W), jag.tensor(b))
    for o, c in zip(lin.unbind(), cs):
        np.testing.assert_allclose(o.numpy(), c @ W.T + b, rtol=1e-12)
    sm = jag.softmax(nt, -1)
    for o, c in zip(sm.unbind(), cs):
        e = np.exp(c - c.max(-1, keepdims=True))
        np.testing.assert_allclose(o.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-12)
    ln = F.layer_norm(nt, (4,))
    for o, c in zip(ln.unbind(), cs):
        ref = (c - c.mean(-1, keepdims=True)) / np.sqrt(c.var(-1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(o.numpy(), ref, rtol=1e-9, atol=1e-12)
    s = jag.sum(nt, -1)
    for o, c in zip(s.unbind(), cs):
        np.testing.assert_allclose(o.numpy(), c.sum(-1), rtol=1e-12)


def test_nested_reduction_over_ragged_dim():
    cs = comps()
    nt = nt_of(cs)
    try:
        s = jag.sum(nt, 1)
    except NotImplementedError:
        pytest.skip("sum over the ragged dim is not implemented in jag")
    np.testing.assert_allclose(s.numpy(), np.stack([c.sum(0) for c in cs]), rtol=1e-12)


def test_to_layout():
    cs = comps()
    nt = nt_of(cs)
    st = nt.to_layout(jag.strided)
    assert st.layout is jag.strided
    for o, c in zip(st.unbind(), cs):
        np.testing.assert_array_equal(o.numpy(), c)
    assert st.to_layout(jag.jagged).layout is jag.jagged


def test_nested_numpy_is_an_error():
    nt = nt_of(comps())
    with pytest.raises(TypeError):
        np.asarray(nt)
    with pytest.raises(TypeError):
        nt.numpy()
    with pytest.raises(ValueError):
        nt.numel()
    with pytest.raises(NotImplementedError):
        nt[:, 1:2]


def test_nested_indexing_component():
    cs = comps()
    nt = nt_of(cs)
    try:
        c1 = nt[1]
    except NotImplementedError:
        pytest.skip("select on a nested tensor is not implemented in jag")
    np.testing.assert_array_equal(c1.numpy(), cs[1])


def test_nested_errors():
    with pytest.raises(TypeError):
        jag.nested.nested_tensor([jag.ones(2), jag.ones(2, dtype=jag.float64)], layout=jag.jagged)
    with pytest.raises(ValueError):
        jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(2)], layout=jag.jagged)
    with pytest.raises(ValueError):
        jag.nested.nested_tensor([])
    with pytest.raises(TypeError):
        jag.nested.nested_tensor(jag.ones(2, 3))
    with pytest.raises(ValueError):
        jag.nested.nested_tensor([jag.ones(2)], layout="jagged")
    with pytest.raises(ValueError):
        jag.ones(3).values()
    with pytest.raises(ValueError):
        jag.ones(3).offsets()
    nt = nt_of(comps())
    other = nt_of(comps(lens=[1, 1, 1]))
    with pytest.raises(ValueError):
        nt + other


def test_narrow_is_a_jagged_view_with_holes():
    t = jag.arange(2 * 5 * 3, dtype=jag.float64).reshape(2, 5, 3)
    nt = jag.nested.narrow(t, 1, jag.tensor([1, 0]), [3, 5], layout=jag.jagged)
    assert nt.is_nested and nt.layout is jag.jagged and nt.shape[0] == 2 and nt.shape[2] == 3
    a = t.numpy()
    comps = nt.unbind()
    np.testing.assert_array_equal(comps[0].numpy(), a[0, 1:4])
    np.testing.assert_array_equal(comps[1].numpy(), a[1, 0:5])
    assert nt.lengths().tolist() == [3, 5]
    t[0, 2, 1] = -1.0  # a view: writes through t show
    assert nt.unbind()[0][1, 1].item() == -1.0
    s = jag.sin(nt)  # ops skip the holes
    for c, ref in zip(s.unbind(), (a[0, 1:4], a[1, 0:5])):
        np.testing.assert_allclose(c.numpy(), np.sin(ref), rtol=1e-12)
    padded = jag.nested.to_padded_tensor(nt, 0.0)
    assert padded.shape == (2, 5, 3) and padded[0, 3].tolist() == [0.0, 0.0, 0.0]
    same = jag.nested.narrow(t, 1, 1, 2)
    assert same.lengths().tolist() == [2, 2] and same.unbind()[1].tolist() == a[1, 1:3].tolist()
    with pytest.raises(ValueError, match="do not fit"):
        jag.nested.narrow(t, 1, 4, 2)
    with pytest.raises(NotImplementedError):
        jag.nested.narrow(t, 2, 0, 1)
    with pytest.raises(NotImplementedError):
        jag.nested.narrow(t, 1, 0, 1, layout=jag.strided)


def test_as_nested_tensor_views_a_dense_batch():
    t = jag.arange(12, dtype=jag.float64).reshape(2, 3, 2).requires_grad_()
    nt = jag.nested.as_nested_tensor(t, layout=jag.jagged)
    assert nt.is_nested and nt.offsets().tolist() == [0, 3, 6]
    assert [c.tolist() for c in nt.unbind()] == t.detach().numpy().tolist()
    jag.nested.to_padded_tensor(jag.sin(nt), 0.0).sum().backward()  # differentiable with respect to t
    np.testing.assert_allclose(t.grad.numpy(), np.cos(t.detach().numpy()), rtol=1e-12)
    st = jag.nested.as_nested_tensor(t.detach())
    assert st.layout is jag.strided and st.unbind()[1].tolist() == t.detach().numpy()[1].tolist()
    lst = jag.nested.as_nested_tensor([jag.ones(1, 2), jag.ones(3, 2)], layout=jag.jagged)
    assert lst.offsets().tolist() == [0, 1, 4]
    with pytest.raises(ValueError):
        jag.nested.as_nested_tensor(jag.ones(3))
