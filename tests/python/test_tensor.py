"""jag.Tensor basics: creation, metadata, numpy interop, indexing, repr."""
import gc
import sys

import numpy as np
import pytest

import jag


def test_tensor_from_lists_default_dtypes():
    assert jag.tensor([1.0, 2.0]).dtype is jag.float32
    assert jag.tensor([1, 2]).dtype is jag.int64
    assert jag.tensor([True, False]).dtype is jag.bool
    assert jag.tensor(3.5).shape == ()
    assert jag.tensor(3.5).item() == 3.5


@pytest.mark.parametrize("npdt,jdt", [("float32", jag.float32), ("float64", jag.float64),
                                      ("int32", jag.int32), ("int64", jag.int64), ("bool", jag.bool)])
def test_tensor_from_numpy_keeps_dtype_and_values(npdt, jdt):
    a = (np.arange(24).reshape(2, 3, 4) % 3).astype(npdt)
    t = jag.tensor(a)
    assert t.dtype is jdt
    assert t.shape == (2, 3, 4)
    assert t.ndim == 3
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.numpy().dtype == a.dtype


def test_tensor_copies_input():
    a = np.ones(3, dtype=np.float32)
    t = jag.tensor(a)
    a[0] = 7
    assert t[0].item() == 1.0


def test_tensor_non_contiguous_numpy_input():
    a = np.arange(12, dtype=np.float64).reshape(3, 4).T
    np.testing.assert_array_equal(jag.tensor(a).numpy(), a)


def test_tensor_dtype_argument():
    t = jag.tensor([1, 2, 3], dtype=jag.float64)
    assert t.dtype is jag.float64
    assert jag.tensor([1.7], dtype=jag.int32).numpy().tolist() == [1]
    assert jag.tensor([1], dtype=np.float32).dtype is jag.float32
    assert jag.tensor([1], dtype=float).dtype is jag.float32


def test_factories():
    np.testing.assert_array_equal(jag.zeros(2, 3).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(jag.ones((2, 3)).numpy(), np.ones((2, 3)))
    assert jag.empty(4, 5, dtype=jag.int32).shape == (4, 5)
    assert jag.empty(4, 5, dtype=jag.int32).dtype is jag.int32
    np.testing.assert_array_equal(jag.full((2, 2), 7.5).numpy(), np.full((2, 2), 7.5))
    assert jag.full((2,), 3).dtype is jag.int64
    assert jag.full((2,), True).dtype is jag.bool
    assert jag.zeros(()).shape == ()
    np.testing.assert_array_equal(jag.arange(5).numpy(), np.arange(5))
    assert jag.arange(5).dtype is jag.int64
    np.testing.assert_allclose(jag.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    np.testing.assert_array_equal(jag.arange(10, 0, -3).numpy(), [10, 7, 4, 1])


def test_rand_randn_seeded():
    jag.manual_seed(123)
    a = jag.rand(1000).numpy().copy()
    jag.manual_seed(123)
    b = jag.rand(1000).numpy()
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0 and a.max() < 1
    assert abs(a.mean() - 0.5) < 0.05
    n = jag.randn(20000, dtype=jag.float64).numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05


def test_dtype_objects():
    assert repr(jag.float32) == "jag.float32"
    assert jag.float64.is_floating_point and not jag.int32.is_floating_point
    assert jag.promote_types(jag.int32, jag.float32) is jag.float32
    assert jag.promote_types(jag.bool, jag.int64) is jag.int64


def test_repr_uses_jag_format():
    r = repr(jag.tensor([[1.0, 2.0]]))
    assert r.startswith("tensor(") and "float32" in r and "[1, 2]" in r
    big = jag.zeros(1000, 1000)
    assert "..." in repr(big)


def test_numpy_is_zero_copy_and_keeps_tensor_alive():
    t = jag.zeros(3, 4)
    a = t.numpy()
    a[1, 2] = 5.0
    assert t[1, 2].item() == 5.0
    del t
    gc.collect()
    b = a + 1  # memory still valid
    assert b[1, 2] == 6.0


def test_numpy_of_views_follows_strides():
    t = jag.arange(12, dtype=jag.float32).reshape(3, 4)
    np.testing.assert_array_equal(t.transpose(0, 1).numpy(), np.arange(12, dtype=np.float32).reshape(3, 4).T)
    np.testing.assert_array_equal(t[:, 1:3].numpy(), np.arange(12).reshape(3, 4)[:, 1:3])
    e = jag.tensor([1.0, 2.0]).reshape(2, 1).expand(2, 3)
    np.testing.assert_array_equal(np.asarray(e), [[1, 1, 1], [2, 2, 2]])


def test_array_protocol_and_empty():
    assert np.asarray(jag.zeros(0, 3)).shape == (0, 3)
    assert np.asarray(jag.ones(2), dtype=np.float64).dtype == np.float64
    assert np.asarray(jag.tensor(2.5)).shape == ()


def test_item_types():
    assert isinstance(jag.tensor(3).item(), int)
    assert isinstance(jag.tensor(3.0).item(), float)
    assert jag.tensor(True).item() is True
    assert int(jag.tensor(7)) == 7 and float(jag.tensor(2.5)) == 2.5


def test_integer_and_slice_indexing_matches_numpy():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = jag.tensor(a)
    for idx in [0, -1, (1, 2), (slice(1, None),), (slice(None), slice(1, 3)), (2, slice(None, -1), 4),
                (Ellipsis, 1), (None, 1), (slice(-2, None), Ellipsis, slice(0, 2)), (slice(5, 9),)]:
        np.testing.assert_array_equal(t[idx].numpy(), a[idx])


def test_basic_index_fast_path_agrees_with_general_path():
    """Plain ints, step-1 slices, None and one ... on a dense tensor take
    Tensor._basic_index; the general walk (_index) and numpy must give the
    same, and the same errors, over many index tuples."""
    a = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    t = jag.tensor(a)
    rng = np.random.default_rng(5)
    pool = [0, 1, -1, 2, -3, slice(None), slice(1, None), slice(None, -1), slice(-2, None), slice(3, 1), slice(1, 100),
            None, Ellipsis]
    for _ in range(400):
        idx = tuple(pool[k] for k in rng.integers(0, len(pool), rng.integers(1, 6)))
        try:
            want = a[idx]
        except IndexError:
            with pytest.raises(IndexError):
                t[idx]
            with pytest.raises(IndexError):
                t._index(idx)
            continue
        fast, general = t[idx], t._index(idx)[0]
        assert fast.shape == want.shape == general.shape, idx
        np.testing.assert_array_equal(fast.numpy(), want)
        np.testing.assert_array_equal(general.numpy(), want)
    # what the fast path leaves to the general one: numpy ints, 0-d int tensors, lists
    np.testing.assert_array_equal(t[np.int64(1), 2].numpy(), a[1, 2])
    np.testing.assert_array_equal(t[jag.tensor(1)].numpy(), a[1])
    np.testing.assert_array_equal(t[[1, 0]].numpy(), a[[1, 0]])


def test_nested_int_index_and_size_take_their_fast_paths_correctly():
    """nt[k] (an int) and t.size(dim) skip the general paths: the same
    components, sizes and errors as unbind() and shape."""
    parts = [np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(8, dtype=np.float32).reshape(2, 4) + 50,
             np.zeros((0, 4), np.float32)]
    nt = jag.nested.nested_tensor([jag.tensor(p) for p in parts], layout=jag.jagged)
    for k in range(-3, 3):
        np.testing.assert_array_equal(nt[k].numpy(), parts[k])
    for k in (3, -4):
        with pytest.raises(IndexError, match="out of bounds"):
            nt[k]
    for d in range(-3, 3):
        assert nt.size(d) == nt.shape[d]
    assert nt.size() == nt.shape
    with pytest.raises(IndexError):
        nt.size(3)
    x = jag.zeros(2, 5)
    assert (x.size(0), x.size(-1), x.size()) == (2, 5, (2, 5))
    with pytest.raises(IndexError):
        x.size(-3)


def test_indexing_shares_storage():
    t = jag.zeros(3, 3)
    v = t[1]
    v.fill_(2.0)
    assert t.numpy()[1].tolist() == [2, 2, 2]
    t[0, 0] = 9
    t[2] = jag.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.numpy(), [[9, 0, 0], [2, 2, 2], [1, 2, 3]])


def test_index_errors():
    t = jag.zeros(3, 4)
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError):
        t[0, -5]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(ValueError, match="step"):
        t[::2]
    with pytest.raises(IndexError):
        t["a"]


# Tensor (advanced) indexing: one tensor index, torch's semantics. numpy is
# the reference below; where the two differ (ints beside a tensor index:
# torch selects their dims first) the reference spells torch's order.

def _tensor_index_cases(a):
    m = a > 20  # (3, 4, 5)
    i = np.array([2, 0, -1, 1])
    return [
        (m, m),  # x[x > 20]: 1-D, row-major
        (m[:, :, 0], m[:, :, 0]),  # a mask over the leading dims keeps the rest
        (m[:, 0, 0], m[:, 0, 0]),
        ((slice(None), m[0]), (slice(None), m[0])),  # after a slice
        ((0, m[0]), (0, m[0])),
        ((Ellipsis, m[0, 0]), (Ellipsis, m[0, 0])),
        (np.zeros((3, 4, 5), bool), np.zeros((3, 4, 5), bool)),  # nothing selected: shape (0,)
        (i[:3], i[:3]),  # an int index: index_select, negative values from the end
        ((slice(None), i), (slice(None), i)),
        ((Ellipsis, i), (Ellipsis, i)),
        ((0, i), (0, i)),
        # torch selects the ints' dims first: x[1, :, i] is x[1][:, i], (4, 4)
        # with the index's dim last (numpy would put it first)
        ((1, slice(None), i[:2]), lambda a: a[1][:, i[:2]]),
        ((1, None, i[:2]), lambda a: a[1][None][:, i[:2]]),  # torch: (1, 2, 5); numpy (2, 1, 5)
        ((1, Ellipsis, i[:2]), lambda a: a[1][..., i[:2]]),
        ((i[:2], slice(None), 1), (i[:2], slice(None), 1)),
        ((slice(1, 3), i, 2), (slice(1, 3), i, 2)),
        ((None, i[:2]), (None, i[:2])),
        (np.array([[0, 1], [2, 2]]), np.array([[0, 1], [2, 2]])),  # an n-d index puts its shape there
        ((slice(None), np.array([[0, 1], [3, 3]])), (slice(None), np.array([[0, 1], [3, 3]]))),
        (np.array([], dtype=np.int64), np.array([], dtype=np.int64)),
    ]


@pytest.mark.parametrize("as_list", [False, True])
def test_tensor_index_matches_numpy(as_list):
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = jag.tensor(a)
    for jidx, nidx in _tensor_index_cases(a):
        conv = (lambda v: v.tolist()) if as_list else jag.tensor  # lists index as torch reads them
        jt = tuple(conv(v) if isinstance(v, np.ndarray) else v for v in (jidx if isinstance(jidx, tuple) else (jidx,)))
        r = t[jt]
        want = nidx(a) if callable(nidx) else a[nidx]
        assert r.shape == want.shape, (nidx, r.shape, want.shape)
        np.testing.assert_array_equal(r.numpy(), want)
        assert not r._shares_storage(t) or r.numel() == 0 or r.shape == ()  # a copy, as torch
    np.testing.assert_array_equal(t[jag.tensor(np.array([2, 0], np.int32))].numpy(), a[[2, 0]])  # int32 too
    np.testing.assert_array_equal(t[np.array([1, 0])].numpy(), a[[1, 0]])  # a numpy index array
    # a 0-d bool tensor adds a dim of size 1 or 0, as torch
    assert t[jag.tensor(True)].shape == (1, 3, 4, 5) and t[jag.tensor(False)].shape == (0, 3, 4, 5)
    # a 0-d int tensor acts as an int (a view)
    assert t[jag.tensor(1)]._shares_storage(t) and t[jag.tensor(1)].tolist() == a[1].tolist()
    x = jag.tensor([[1.0, 5.0], [3.0, 0.5]])
    assert x[x > 2].tolist() == [5.0, 3.0]  # torch: tensor([5., 3.])


def test_tensor_index_is_differentiable():
    a = np.arange(12, dtype=np.float64).reshape(3, 4) - 5
    x = jag.tensor(a, requires_grad=True)
    y = x[x > 0]
    assert y.requires_grad
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(a > 0, 2 * a, 0))
    x2 = jag.tensor(a, requires_grad=True)
    idx = np.array([0, 0, 2, -1])
    (x2[:, jag.tensor(idx)] * jag.tensor([1.0, 2.0, 3.0, 4.0], dtype=jag.float64)).sum().backward()
    want = np.zeros_like(a)
    np.add.at(want, (slice(None), idx), np.array([1.0, 2.0, 3.0, 4.0]))  # repeats add up
    np.testing.assert_allclose(x2.grad.numpy(), want)


def test_tensor_index_on_nested_picks_components():
    comps = [np.full((2, 3), 1.0, np.float32), np.full((1, 3), 2.0, np.float32), np.full((4, 3), 3.0, np.float32)]
    nt = jag.nested.nested_tensor([jag.tensor(c) for c in comps], layout=jag.jagged)
    for idx in ([2, 0], [-1, 1, 1]):
        r = nt[jag.tensor(idx)]
        assert r.is_nested and len(r.unbind()) == len(idx)
        for got, k in zip(r.unbind(), idx):
            np.testing.assert_array_equal(got.numpy(), comps[k])
    with pytest.raises(IndexError, match="nested"):
        nt[nt > 1]
    with pytest.raises(IndexError, match="out of bounds"):
        nt[jag.tensor([3])]


def test_tensor_index_errors():
    t = jag.zeros(3, 4)
    with pytest.raises(IndexError, match="int32, int64 or bool"):
        t[jag.tensor([1.0])]
    with pytest.raises(IndexError, match="index 3 is out of bounds for dim 0 with size 3"):
        t[jag.tensor([0, 3])]
    with pytest.raises(IndexError, match="index -5 is out of bounds for dim 1 with size 4"):
        t[:, jag.tensor([-5])]
    with pytest.raises(IndexError, match=r"mask \(3,\) does not match the shape \(4,\).*dim 1"):
        t[:, jag.tensor([True, False, True])]
    with pytest.raises(IndexError, match="only one tensor"):
        t[jag.tensor([0]), jag.tensor([1])]
    with pytest.raises(IndexError, match="ints or bools"):
        t[[0.5, 1.0]]
    with pytest.raises(IndexError, match="too many indices"):
        t[jag.ones(3, 4, 1, dtype=jag.bool)]


def test_setitem_with_tensor_index_matches_numpy():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = jag.tensor(a)
    ptr = t.numpy().ctypes.data
    a[a > 30] = 0
    t[t > 30] = 0
    a[[0, 2]] = np.arange(5, dtype=np.float32)  # broadcast to the picked rows
    t[jag.tensor([0, 2])] = jag.arange(5, dtype=jag.float32)
    a[1, :, [0, -1]] = -7
    t[1, :, jag.tensor([0, -1])] = -7
    mask = a < 5
    a[mask] = np.arange(mask.sum())
    t[jag.tensor(mask)] = jag.arange(int(mask.sum()), dtype=jag.float32)
    a[:, a[0, :, 0] > 3] = 9.5
    t[:, jag.tensor(a[0, :, 0] > 3)] = 9.5
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.numpy().ctypes.data == ptr  # in place
    v = t.T  # a strided view is written in place too
    b = a.T.copy()
    b[b > 40] = 1
    v[v > 40] = 1
    np.testing.assert_array_equal(t.numpy(), b.T)
    with pytest.raises(ValueError, match="does not broadcast"):
        t[jag.tensor([0, 1])] = jag.ones(3)
    np.testing.assert_array_equal(t.numpy(), b.T)  # a failed assignment changes nothing


def test_views_and_reshape():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = jag.tensor(a)
    np.testing.assert_array_equal(t.reshape(6, 4).numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(t.reshape(-1).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(t.view(4, 6).numpy(), a.reshape(4, 6))
    np.testing.assert_array_equal(t.transpose(0, 2).reshape(-1).numpy(), a.transpose(2, 1, 0).reshape(-1))
    np.testing.assert_array_equal(t.permute(1, 0, 2).numpy(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(t.unsqueeze(1).numpy(), a[:, None])
    assert t.unsqueeze(0).squeeze().shape == (2, 3, 4)
    assert t.narrow(1, 1, 2).shape == (2, 2, 4)
    assert t.T.shape == (4, 3, 2)
    assert len(t) == 2 and [x.shape for x in t] == [(3, 4), (3, 4)]
    assert t.flatten().shape == (24,)
    assert t.size() == (2, 3, 4) and t.size(-1) == 4
    assert t.stride() == (12, 4, 1)
    assert t.numel() == 24 and t.dim() == 3


def test_conversions():
    t = jag.tensor([1.5, -2.5])
    assert t.to(jag.int64).dtype is jag.int64
    assert t.double().dtype is jag.float64
    assert t.long().numpy().tolist() == [1, -2]
    assert t.bool().numpy().tolist() == [True, True]
    assert t.tolist() == [1.5, -2.5]
    c = t.clone()
    c.fill_(0)
    assert t.tolist() == [1.5, -2.5]


def test_tensor_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        jag.Tensor()


def test_refcount_of_tensor_objects():
    t = jag.ones(3)
    base = sys.getrefcount(t)
    for _ in range(100):
        _ = t + 1
        _ = t.shape
        _ = t[0]
        _ = t.numpy()
    del _
    assert sys.getrefcount(t) == base


def test_like_factories_dense_and_nested():
    x = jag.ones(2, 3, dtype=jag.float64)
    assert jag.zeros_like(x).tolist() == [[0, 0, 0]] * 2 and jag.zeros_like(x).dtype is jag.float64
    assert jag.full_like(x, 4).tolist() == [[4, 4, 4]] * 2
    assert jag.ones_like(x, dtype=jag.int32).dtype is jag.int32
    assert jag.empty_like(x).shape == (2, 3)
    r = jag.rand_like(x).numpy()
    assert ((r >= 0) & (r < 1)).all()
    assert jag.randn_like(x, requires_grad=True).requires_grad
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
    z = jag.zeros_like(nt)
    assert z.is_nested and z.shape == nt.shape
    assert [c.tolist() for c in jag.full_like(nt, 2.0).unbind()] == [[[2, 2, 2]] * 2, [[2, 2, 2]]]
    with pytest.raises(TypeError):
        jag.zeros_like([1, 2])
    with pytest.raises(ValueError):
        jag._C._like("bogus", x)
