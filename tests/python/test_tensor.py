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
