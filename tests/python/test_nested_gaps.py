"""Nested-tensor behaviours a PyTorch user expects: int32 offsets, a nested
(B, j, D) times a batch of matrices (B, D, E), attention refusing a mask
with is_causal, and reductions over the ragged dim of integer values. Each
is checked per component with numpy."""
import numpy as np
import pytest

import jag
import jag.nn.functional as F

OFFSETS = [0, 2, 2, 5, 9]  # lengths 2, 0, 3, 4


def npy(t):
    return t.detach().numpy()


def components(values, offsets=OFFSETS):
    return [values[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


# ---- int32 offsets ---------------------------------------------------------


@pytest.mark.parametrize("dtype", [jag.float32, jag.float64])
def test_int32_offsets_and_lengths_are_accepted(dtype):
    # torch.nested.nested_tensor_from_jagged takes int32 offsets; jag stores int64
    v = np.random.default_rng(0).standard_normal((9, 3))
    values = jag.tensor(v).to(dtype)
    off32 = jag.tensor(np.array(OFFSETS, dtype=np.int32))
    nt = jag.nested.nested_tensor_from_jagged(values, off32)
    assert nt.offsets().dtype is jag.int64 and nt.offsets().tolist() == OFFSETS
    for part, want in zip(nt.unbind(), components(v)):
        np.testing.assert_allclose(npy(part), want, rtol=1e-6)
    lengths = jag.tensor(np.array([1, 0, 3, 2], dtype=np.int32))
    holes = jag.nested.nested_tensor_from_jagged(values, off32, lengths)
    for part, want, n in zip(holes.unbind(), components(v), [1, 0, 3, 2]):
        np.testing.assert_allclose(npy(part), want[:n], rtol=1e-6)
    with pytest.raises(Exception, match="offsets' decreases at entry 2"):
        jag.nested.nested_tensor_from_jagged(values, jag.tensor(np.array([0, 3, 2, 5, 9], dtype=np.int32)))


def test_int32_offsets_gradcheck():
    v = jag.tensor(np.random.default_rng(1).standard_normal((9, 2)), requires_grad=True)
    off32 = jag.tensor(np.array(OFFSETS, dtype=np.int32))

    def f(values):
        return jag.nested.nested_tensor_from_jagged(values, off32).sin().values()

    assert jag.autograd.gradcheck(f, (v,))


# ---- nested (B, j, D) @ dense (B, D, E) -------------------------------------


@pytest.mark.parametrize("dtype,tol", [(jag.float32, 1e-5), (jag.float64, 1e-12)])
def test_matmul_by_a_batch_of_matrices(dtype, tol):
    # torch: component b of the result is component b @ w[b]
    rng = np.random.default_rng(2)
    v, w = rng.standard_normal((9, 4)), rng.standard_normal((4, 4, 3))
    nt = jag.nested.nested_tensor_from_jagged(jag.tensor(v).to(dtype), jag.tensor(OFFSETS))
    y = nt @ jag.tensor(w).to(dtype)
    assert y.is_nested and y.shape[0] == 4 and y.shape[1] == nt.shape[1] and y.shape[2] == 3
    for b, (part, comp) in enumerate(zip(y.unbind(), components(v))):
        np.testing.assert_allclose(npy(part), comp @ w[b], rtol=tol, atol=tol)


def test_matmul_by_a_batch_of_matrices_gradients():
    rng = np.random.default_rng(3)
    v, w, g = rng.standard_normal((9, 4)), rng.standard_normal((4, 4, 3)), rng.standard_normal((9, 3))
    vt, wt = jag.tensor(v, requires_grad=True), jag.tensor(w, requires_grad=True)
    y = jag.nested.nested_tensor_from_jagged(vt, jag.tensor(OFFSETS)) @ wt
    (y.values() * jag.tensor(g)).sum().backward()
    # d/dv of sum(g * (v_b @ w_b)) = g_b @ w_b^T; d/dw_b = v_b^T @ g_b
    gc = components(g)
    want_v = np.concatenate([gb @ w[b].T for b, gb in enumerate(gc)])
    want_w = np.stack([vb.T @ gb for vb, gb in zip(components(v), gc)])
    np.testing.assert_allclose(npy(vt.grad), want_v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(npy(wt.grad), want_w, rtol=1e-12, atol=1e-12)

    def f(values, mats):
        return (jag.nested.nested_tensor_from_jagged(values, jag.tensor(OFFSETS)) @ mats).values()

    assert jag.autograd.gradcheck(f, (jag.tensor(v[:, :2], requires_grad=True),
                                      jag.tensor(w[:, :2, :2], requires_grad=True)))


def test_matmul_by_a_batch_of_matrices_errors():
    nt = jag.nested.nested_tensor_from_jagged(jag.randn(9, 4), jag.tensor(OFFSETS))
    with pytest.raises(Exception, match=r"expected \(B, D, E\) = \(4, 4, E\)"):
        nt @ jag.randn(3, 4, 2)
    with pytest.raises(Exception, match=r"expected \(B, D, E\) = \(4, 4, E\)"):
        nt @ jag.randn(4, 5, 2)


# ---- attention: a mask with is_causal ---------------------------------------


def test_attention_refuses_a_mask_with_is_causal():
    # torch raises "_scaled_dot_product_attention: Explicit attn_mask should
    # not be set when is_causal=True"
    q = jag.randn(2, 2, 3, 4, dtype=jag.float64)
    mask = jag.zeros(3, 3, dtype=jag.float64)
    with pytest.raises(Exception, match="should not be set when causal is true"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask, is_causal=True)
    # either one alone runs
    a = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    b = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert a.shape == b.shape == (2, 2, 3, 4)
    nt = jag.nested.nested_tensor_from_jagged(jag.randn(5, 2, 4, dtype=jag.float64), jag.tensor([0, 2, 5]))
    masks = jag.nested.nested_tensor([jag.zeros(2, 2, dtype=jag.float64), jag.zeros(3, 3, dtype=jag.float64)])
    with pytest.raises(Exception, match="should not be set when causal is true"):
        F.scaled_dot_product_attention(nt, nt, nt, attn_mask=masks, is_causal=True)
    qt = nt.transpose(1, 2)
    with pytest.raises(Exception, match="should not be set when causal is true"):
        F.scaled_dot_product_attention(qt, qt, qt, attn_mask=masks, is_causal=True)


# ---- reductions over the ragged dim of integer values ------------------------


@pytest.mark.parametrize("np_dtype,dtype", [(np.int32, jag.int32), (np.int64, jag.int64)])
def test_integer_ragged_reductions(np_dtype, dtype):
    rng = np.random.default_rng(4)
    v = rng.integers(-50, 50, size=(9, 2, 3)).astype(np_dtype)
    nt = jag.nested.nested_tensor_from_jagged(jag.tensor(v), jag.tensor(OFFSETS))
    info = np.iinfo(np_dtype)
    # torch: sum of integers is int64, amax/amin keep the dtype, mean is float32
    # (NaN for an empty component); amax/amin of an empty component are the
    # dtype's lowest/highest value (torch reduces a padded copy)
    for name, want_dtype, ref, empty in (
            ("sum", jag.int64, lambda c: c.sum(0, dtype=np.int64), 0),
            ("amax", dtype, lambda c: c.max(0), info.min),
            ("amin", dtype, lambda c: c.min(0), info.max),
            ("mean", jag.float32, lambda c: (c.sum(0, dtype=np.int64) / len(c)).astype(np.float32), np.nan)):
        r = getattr(jag, name)(nt, 1)
        assert r.dtype is want_dtype and tuple(r.shape) == (4, 2, 3), name
        for b, comp in enumerate(components(v)):
            want = ref(comp) if len(comp) else np.full((2, 3), empty)
            np.testing.assert_array_equal(npy(r)[b], want, err_msg=name)
    keep = jag.sum(nt, 1, keepdim=True)
    assert tuple(keep.shape) == (4, 1, 2, 3)
    np.testing.assert_array_equal(npy(keep)[3, 0], v[5:9].sum(0))
    # with a trailing dim: the ragged dim and dim 2 together
    both = jag.sum(nt, (1, 2))
    for b, comp in enumerate(components(v)):
        np.testing.assert_array_equal(npy(both)[b], comp.sum((0, 1), dtype=np.int64))


def test_integer_ragged_sum_after_transpose():
    v = np.arange(9 * 2 * 3, dtype=np.int32).reshape(9, 2, 3)
    t = jag.nested.nested_tensor_from_jagged(jag.tensor(v), jag.tensor(OFFSETS)).transpose(1, 2)  # (B, 2, j, 3)
    r = jag.sum(t, 2)
    assert r.dtype is jag.int64 and tuple(r.shape) == (4, 2, 3)
    for b, comp in enumerate(components(v)):
        np.testing.assert_array_equal(npy(r)[b], comp.sum(0))


def test_integer_ragged_reductions_refuse_other_kinds():
    nt = jag.nested.nested_tensor_from_jagged(jag.tensor(np.arange(9, dtype=np.int32)), jag.tensor(OFFSETS))
    # torch's logsumexp and var need floating values too
    with pytest.raises(Exception, match="needs float values, got int32"):
        jag.logsumexp(nt, 1)
    with pytest.raises(Exception, match="needs float values, got int32"):
        jag.var(nt, 1)
