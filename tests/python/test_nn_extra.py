"""Generators and seeds, meta tensors, clamp, and jag.nn.functional's
dropout, losses and attention against numpy references and finite
differences."""
import numpy as np
import pytest

import jag
import jag.nn.functional as F


def rng(seed=0):
    return np.random.default_rng(seed)


def f64(a, requires_grad=False):
    return jag.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# ---- generators and seeds --------------------------------------------------


def test_generator_and_seed_reproduce():
    a = jag.rand(5, seed=7).tolist()
    assert jag.rand(5, seed=7).tolist() == a
    assert jag.rand(5, generator=jag.Generator(7)).tolist() == a
    g = jag.Generator(7)
    first, second = jag.randn(4, generator=g).tolist(), jag.randn(4, generator=g).tolist()
    assert first != second  # the generator advances
    g.manual_seed(7)
    assert jag.randn(4, generator=g).tolist() == first and g.initial_seed() == 7
    assert jag.rand(5, seed=8).tolist() != a
    u = jag.rand(2000, seed=1, dtype=jag.float64).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.05
    n = jag.randn(4000, generator=jag.Generator(2), dtype=jag.float64).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    with pytest.raises(ValueError, match="not both"):
        jag.rand(3, generator=g, seed=1)
    with pytest.raises(TypeError, match="Generator"):
        jag.randn(3, generator=3)


def test_random_like_with_generator_keeps_offsets():
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(4, 3)], layout=jag.jagged)
    r = jag.randn_like(nt, generator=jag.Generator(3))
    assert r.is_nested and r.offsets().tolist() == [0, 2, 6] and r.values().shape == (6, 3)
    assert jag.randn_like(nt, seed=3).values().tolist() == r.values().tolist()
    d = jag.rand_like(jag.zeros(3, 2), seed=4)
    assert d.shape == (3, 2) and d.tolist() == jag.rand_like(jag.zeros(3, 2), generator=jag.Generator(4)).tolist()


def test_meta_tensors():
    m = jag.empty(3, 4, device="meta")
    assert m.is_meta and m.device == "meta" and m.shape == (3, 4) and "meta" in repr(m)
    assert not jag.zeros(1).is_meta and jag.zeros(1).device == "cpu"
    r = jag.matmul(jag.sin(m), jag.empty(4, 2, dtype=jag.float32, device="meta"))
    assert r.is_meta and r.shape == (3, 2)
    with pytest.raises(TypeError, match="meta"):
        m.numpy()
    with pytest.raises(BufferError, match="meta"):
        memoryview(m)
    with pytest.raises(ValueError, match="device"):
        jag.empty(2, device="cuda")


# ---- clamp -------------------------------------------------------------------


def test_clamp_values_and_gradient():
    a = rng(1).uniform(-2, 2, (4, 5))
    x = f64(a, requires_grad=True)
    y = jag.clamp(x, -0.5, 1.0)
    np.testing.assert_array_equal(y.detach().numpy(), np.clip(a, -0.5, 1.0))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), ((a > -0.5) & (a < 1.0)).astype(float))
    np.testing.assert_array_equal(x.detach().clamp(min=0).numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(jag.clip(x.detach(), max=0).numpy(), np.minimum(a, 0))
    with pytest.raises(ValueError):
        jag.clamp(x, None, None)


# ---- dropout -----------------------------------------------------------------


def test_dropout_mask_scale_and_reproducibility():
    x = jag.ones(4000, dtype=jag.float64, requires_grad=True)
    y = F.dropout(x, 0.25, generator=jag.Generator(11))
    v = y.detach().numpy()
    kept = v != 0
    np.testing.assert_allclose(v[kept], 1 / 0.75)
    assert abs(1 - kept.mean() - 0.25) < 0.03
    assert F.dropout(x.detach(), 0.25, generator=jag.Generator(11)).tolist() == v.tolist()
    assert F.dropout(x.detach(), 0.25, generator=jag.Generator(12)).tolist() != v.tolist()
    y.sum().backward()  # d/dx = the mask / (1 - p)
    np.testing.assert_allclose(x.grad.numpy(), v)
    assert F.dropout(x.detach(), 0.25, training=False).tolist() == [1.0] * 4000
    assert F.dropout(x.detach(), 0.0).tolist() == [1.0] * 4000
    # p=1: torch's input * 0 (zeros, NaN where the input is inf), gradient 0
    x.grad = None
    z = F.dropout(x, 1.0)
    assert z.detach().numpy().tolist() == [0.0] * 4000
    z.sum().backward()
    assert x.grad.numpy().tolist() == [0.0] * 4000
    assert np.isnan(F.dropout(jag.tensor([float("inf"), 2.0]), 1.0).numpy()).tolist() == [True, False]
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
    assert [p.numpy().tolist() for p in F.dropout(nt, 1.0).unbind()] == [[[0.0] * 3] * 2, [[0.0] * 3]]
    with pytest.raises(ValueError):
        F.dropout(x, 1.5)
    with pytest.raises(TypeError):
        F.dropout(jag.ones(3, dtype=jag.int64), 0.5)


def test_dropout_on_nested_keeps_structure():
    nt = jag.nested.nested_tensor([jag.ones(3, 4), jag.ones(5, 4)], layout=jag.jagged)
    d = F.dropout(nt, 0.5, generator=jag.Generator(1))
    assert d.is_nested and d.offsets().tolist() == [0, 3, 8]
    assert set(np.unique(d.values().numpy()).tolist()) <= {0.0, 2.0}


# ---- losses --------------------------------------------------------------------


def np_cross_entropy(logits, target):
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -logp[np.arange(len(target)), target].mean()


def test_cross_entropy_dense_and_jagged():
    logits = rng(2).normal(size=(7, 5))
    target = rng(3).integers(0, 5, 7)
    loss = F.cross_entropy(f64(logits), jag.tensor(target))
    np.testing.assert_allclose(loss.item(), np_cross_entropy(logits, target), rtol=1e-12)
    nt = jag.nested.nested_tensor_from_jagged(f64(logits), [0, 3, 7])
    tt = jag.nested.nested_tensor_from_jagged(jag.tensor(target), [0, 3, 7])
    np.testing.assert_allclose(F.cross_entropy(nt, tt).item(), np_cross_entropy(logits, target), rtol=1e-12)
    assert jag.autograd.gradcheck(lambda x: F.cross_entropy(x, jag.tensor(target)), [f64(logits, True)])
    with pytest.raises(ValueError):
        F.cross_entropy(f64(logits), jag.tensor([9] * 7))
    with pytest.raises(NotImplementedError, match="reduction"):
        F.cross_entropy(f64(logits), jag.tensor(target), reduction="sum")


def test_mse_loss_dense_and_nested():
    a, b = rng(4).normal(size=(6, 3)), rng(5).normal(size=(6, 3))
    np.testing.assert_allclose(F.mse_loss(f64(a), f64(b)).item(), ((a - b) ** 2).mean(), rtol=1e-12)
    na = jag.nested.nested_tensor_from_jagged(f64(a), [0, 2, 6])
    nb = jag.nested.nested_tensor_from_jagged(f64(b), [0, 2, 6])
    np.testing.assert_allclose(F.mse_loss(na, nb).item(), ((a - b) ** 2).mean(), rtol=1e-12)
    assert jag.autograd.gradcheck(lambda x: F.mse_loss(x, f64(b)), [f64(a, True)])
    with pytest.raises(ValueError):
        F.mse_loss(f64(a), f64(b[:2]))


# ---- attention -------------------------------------------------------------------


def np_attention(q, k, v, causal=False, scale=None):
    s = (q @ np.swapaxes(k, -1, -2)) * (scale if scale else 1 / np.sqrt(q.shape[-1]))
    if causal:
        lq, lk = s.shape[-2:]
        s = np.where(np.tril(np.ones((lq, lk), bool)), s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v


def test_sdpa_dense_against_numpy():
    r = rng(6)
    q, k, v = r.normal(size=(2, 3, 4, 8)), r.normal(size=(2, 3, 5, 8)), r.normal(size=(2, 3, 5, 8))
    out = F.scaled_dot_product_attention(f64(q), f64(k), f64(v))
    np.testing.assert_allclose(out.numpy(), np_attention(q, k, v), rtol=1e-10, atol=1e-12)
    out = F.scaled_dot_product_attention(f64(q), f64(k[:, :, :4]), f64(v[:, :, :4]), is_causal=True, scale=0.3)
    np.testing.assert_allclose(out.numpy(), np_attention(q, k[:, :, :4], v[:, :, :4], True, 0.3), rtol=1e-10,
                               atol=1e-12)
    with pytest.raises(ValueError, match="does not broadcast"):  # a mask shaped like q, not like the scores
        F.scaled_dot_product_attention(f64(q), f64(k), f64(v), attn_mask=f64(q))


def test_sdpa_jagged_against_per_item_numpy():
    r = rng(7)
    lengths = [3, 1, 4]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    q, k, v = (r.normal(size=(sum(lengths), 2, 4)) for _ in range(3))  # (sum L, H, D)
    nq, nk, nv = (jag.nested.nested_tensor_from_jagged(f64(a), offsets) for a in (q, k, v))
    out = F.scaled_dot_product_attention(nq, nk, nv)
    assert out.is_nested
    for i, comp in enumerate(out.unbind()):
        s = slice(offsets[i], offsets[i + 1])
        ref = np_attention(*(np.swapaxes(a[s], 0, 1) for a in (q, k, v)))  # (H, L, D)
        np.testing.assert_allclose(comp.numpy(), np.swapaxes(ref, 0, 1), rtol=1e-10, atol=1e-12)
    x = jag.nested.nested_tensor_from_jagged(f64(q), offsets).requires_grad_()  # a nested leaf
    assert jag.autograd.gradcheck(lambda t: jag.nested.to_padded_tensor(
        F.scaled_dot_product_attention(t, nk, nv), 0.0), [x])


# ---- embedding_bag ----------------------------------------------------------------


def np_bags(weight, idx, offs, mode):
    out = []
    for a, b in zip(offs[:-1], offs[1:]):
        rows = weight[idx[a:b]]
        if len(rows) == 0:
            out.append(np.zeros(weight.shape[1]))
        else:
            out.append({"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode])
    return np.array(out)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_against_numpy(mode):
    w = rng(8).normal(size=(10, 3))
    idx = np.array([1, 4, 4, 9, 0, 2, 7])
    starts = [0, 2, 2, 6]  # bag 1 is empty
    out = F.embedding_bag(jag.tensor(idx), f64(w), jag.tensor(starts), mode=mode)
    np.testing.assert_allclose(out.numpy(), np_bags(w, idx, starts + [7], mode), rtol=1e-12)
    same = F.embedding_bag(jag.tensor(idx), f64(w), starts + [7], mode=mode, include_last_offset=True)
    np.testing.assert_array_equal(same.numpy(), out.numpy())
    fixed = rng(9).integers(0, 10, (4, 3))
    np.testing.assert_allclose(F.embedding_bag(jag.tensor(fixed), f64(w), mode=mode).numpy(),
                               np_bags(w, fixed.reshape(-1), [0, 3, 6, 9, 12], mode), rtol=1e-12)
    nonempty = [0, 2, 3, 6]
    assert jag.autograd.gradcheck(lambda t: F.embedding_bag(jag.tensor(idx), t, nonempty, mode=mode),
                                  [f64(w, True)])


def test_embedding_bag_weights_and_errors():
    w = rng(10).normal(size=(5, 2))
    idx, psw = np.array([0, 3, 3, 1]), np.array([0.5, 2.0, 1.0, -1.0])
    out = F.embedding_bag(jag.tensor(idx), f64(w), [0, 3], mode="sum", per_sample_weights=f64(psw))
    ref = np.array([(w[idx[:3]] * psw[:3, None]).sum(0), w[1] * -1.0])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    with pytest.raises(ValueError, match="offsets"):
        F.embedding_bag(jag.tensor(idx), f64(w))
    with pytest.raises(ValueError, match="mode"):
        F.embedding_bag(jag.tensor(idx), f64(w), [0], mode="median")
    with pytest.raises(NotImplementedError):
        F.embedding_bag(jag.tensor(idx), f64(w), [0], mode="mean", per_sample_weights=f64(psw))
    with pytest.raises(ValueError):
        F.embedding_bag(jag.tensor([0, 9]), f64(w), [0])  # index out of range


def test_logsumexp_against_numpy():
    x = jag.randn(3, 5, dtype=jag.float64)
    np.testing.assert_allclose(jag.logsumexp(x, 1).numpy(), np.log(np.exp(x.numpy()).sum(1)), rtol=1e-12)
    np.testing.assert_allclose(x.logsumexp(0, keepdim=True).numpy(), np.log(np.exp(x.numpy()).sum(0, keepdims=True)),
                               rtol=1e-12)


def _ref_attention(q, k, v, add):
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]) + add
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def test_attention_masks_bool_and_float():
    rng = np.random.default_rng(0)
    q, k, v = (jag.tensor(rng.standard_normal(s)) for s in ((2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8)))
    m = jag.tensor(rng.random((2, 1, 4, 6)) > 0.3)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    want = _ref_attention(q.numpy(), k.numpy(), v.numpy(), np.where(m.numpy(), 0, -np.inf))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    fm = jag.tensor(rng.standard_normal((2, 2, 4, 6)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=fm)
    np.testing.assert_allclose(out.numpy(), _ref_attention(q.numpy(), k.numpy(), v.numpy(), fm.numpy()),
                               rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError):
        F.scaled_dot_product_attention(q, k, v, attn_mask=jag.randn(3, 3, dtype=jag.float64))
