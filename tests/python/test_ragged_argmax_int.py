"""argmax / argmin / max / min over the ragged dim of int32 and int64 nested
tensors.

torch.nested refuses reductions over the ragged dim of a jagged tensor, so
the reference is torch's dense semantics per component: the result for
component b is torch.argmax(component_b, dim=0) (the first index of the
largest value, as numpy.argmax), torch.max(component_b, dim=0) (the value
and that index), and the same for the minimum. An empty component has no
argmax (torch raises for an empty dim); jag raises as its float path does.
"""
import numpy as np
import pytest

import jag

DTYPES = {"int32": (jag.int32, np.int32), "int64": (jag.int64, np.int64)}


def components(rng, lengths, trailing, np_dtype, high=4):
    """Integer components with many ties (values in [-high, high))."""
    return [rng.integers(-high, high, size=(n,) + trailing).astype(np_dtype) for n in lengths]


def nested_of(comps, dtype):
    return jag.nested.nested_tensor([jag.tensor(c, dtype=dtype) for c in comps], layout=jag.jagged)


def per_component(t):
    return [np.asarray(c.numpy()) for c in t.unbind()] if t.is_nested else np.asarray(t.numpy())


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("trailing", [(), (3,), (2, 3)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_per_component(name, trailing, keepdim):
    dtype, np_dtype = DTYPES[name]
    rng = np.random.default_rng(len(trailing) * 2 + keepdim)
    comps = components(rng, [4, 1, 7, 3, 9], trailing, np_dtype)
    nt = nested_of(comps, dtype)
    for fn, ref in ((jag.argmax, np.argmax), (jag.argmin, np.argmin)):
        got = fn(nt, dim=1, keepdim=keepdim)
        assert got.dtype is jag.int64 and not got.is_nested
        want = np.stack([ref(c, axis=0) for c in comps])
        if keepdim:
            want = want[:, None]
        assert tuple(got.shape) == want.shape
        np.testing.assert_array_equal(per_component(got), want)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_first_index_among_ties(name):
    dtype, np_dtype = DTYPES[name]
    comps = [np.array([[2, 5], [7, 5], [7, 1]], np_dtype), np.array([[3, 3]], np_dtype),
             np.array([[0, -4], [0, -4], [-1, -4], [0, -9]], np_dtype)]
    nt = nested_of(comps, dtype)
    # worked by hand: the first row holding the column's max / min
    np.testing.assert_array_equal(per_component(jag.argmax(nt, 1)), [[1, 0], [0, 0], [0, 0]])
    np.testing.assert_array_equal(per_component(jag.argmin(nt, 1)), [[0, 2], [0, 0], [2, 3]])


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_max_min_with_indices_per_component(name):
    dtype, np_dtype = DTYPES[name]
    rng = np.random.default_rng(7)
    comps = components(rng, [5, 2, 6], (4,), np_dtype)
    nt = nested_of(comps, dtype)
    for fn, ref_v, ref_i in ((jag.max, np.max, np.argmax), (jag.min, np.min, np.argmin)):
        values, indices = fn(nt, dim=1)
        assert values.dtype is dtype and indices.dtype is jag.int64
        np.testing.assert_array_equal(per_component(values), np.stack([ref_v(c, axis=0) for c in comps]))
        np.testing.assert_array_equal(per_component(indices), np.stack([ref_i(c, axis=0) for c in comps]))


def test_extreme_values_of_the_dtype():
    lo32, hi32 = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    lo64, hi64 = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    c32 = [np.array([lo32, hi32, hi32], np.int32), np.array([lo32], np.int32)]
    c64 = [np.array([hi64, lo64, lo64 + 1], np.int64), np.array([0, lo64], np.int64)]
    for comps, dtype in ((c32, jag.int32), (c64, jag.int64)):
        nt = nested_of(comps, dtype)
        np.testing.assert_array_equal(per_component(jag.argmax(nt, 1)), [np.argmax(c) for c in comps])
        np.testing.assert_array_equal(per_component(jag.argmin(nt, 1)), [np.argmin(c) for c in comps])
        values, _ = jag.max(nt, 1)
        np.testing.assert_array_equal(per_component(values), [c.max() for c in comps])


def test_negative_dim_names_the_ragged_dim():
    rng = np.random.default_rng(3)
    comps = components(rng, [3, 5], (2,), np.int64)
    nt = nested_of(comps, jag.int64)
    np.testing.assert_array_equal(per_component(jag.argmax(nt, -2)), per_component(jag.argmax(nt, 1)))


@pytest.mark.parametrize("dtype", [jag.int32, jag.float32])
def test_empty_component_raises_as_the_float_path(dtype):
    values = jag.tensor([[3, 1], [2, 5], [4, 4]], dtype=dtype)
    nt = jag.nested.nested_tensor_from_jagged(values, jag.tensor([0, 2, 2, 3]))  # component 1 is empty
    with pytest.raises(ValueError, match="component 1 is empty: its max over the ragged dim is undefined"):
        jag.argmax(nt, 1)
    with pytest.raises(ValueError, match="component 1 is empty: its min over the ragged dim is undefined"):
        jag.argmin(nt, 1)
    assert values.tolist() == [[3, 1], [2, 5], [4, 4]]


def test_other_kinds_and_bool_values_still_refused():
    nt = nested_of([np.array([1, 2], np.int32), np.array([3], np.int32)], jag.int32)
    # torch's logsumexp, var and std need floating values
    for fn in (lambda: jag.logsumexp(nt, 1), lambda: jag.var(nt, 1), lambda: jag.std(nt, 1)):
        with pytest.raises(Exception, match="needs float values, got int32"):
            fn()
    bools = nested_of([np.array([True, False]), np.array([True])], jag.bool)
    with pytest.raises(Exception, match="jag_argmax: reducing over the ragged dim needs float values, got bool"):
        jag.argmax(bools, 1)
