"""Jagged tensors whose ragged dim is not dim 1: torch's (B, H, j, D)
attention layout, against numpy per component."""
import numpy as np
import pytest

import jag
import jag.nn.functional as F

rng = np.random.default_rng(7)
LENS = [3, 1, 4]


def heads(h, d, lens=LENS):
    return [rng.standard_normal((n, h, d)) for n in lens]


def nested(cs, requires_grad=False):
    nt = jag.nested.nested_tensor([jag.tensor(c) for c in cs], layout=jag.jagged)
    if requires_grad:
        nt.requires_grad_(True)
    return nt


def np_attention(q, k, v, causal):
    """q (Hq, Lq, D), k and v (Hk, Lk, D) -> (Hq, Lq, D), numpy."""
    group = q.shape[0] // k.shape[0]
    k = np.repeat(k, group, axis=0)
    v = np.repeat(v, group, axis=0)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def test_transpose_moves_the_ragged_dim_without_copying():
    cs = heads(2, 3)
    nt = nested(cs)
    t = nt.transpose(1, 2)
    assert nt._ragged_idx == 1 and t._ragged_idx == 2
    assert t.shape[0] == 3 and t.shape[1] == 2 and isinstance(t.shape[2], jag.RaggedDim) and t.shape[3] == 3
    assert t.shape[2] == nt.shape[1]  # the same ragged symbol
    # torch: the values of a transposed jagged tensor put the rows where the
    # ragged dim now is, a view of the same values
    np.testing.assert_array_equal(t.values().numpy(), nt.values().numpy().transpose(1, 0, 2))
    for part, c in zip(t.unbind(), cs):
        np.testing.assert_array_equal(part.numpy(), c.transpose(1, 0, 2))
    assert t.transpose(1, 2)._ragged_idx == 1
    assert jag.tensor(np.zeros((2, 3)))._ragged_idx is None


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hq,hk", [(2, 2), (4, 2)])
def test_attention_in_torch_layout(causal, hq, hk):
    qs, ks, vs = heads(hq, 4), heads(hk, 4), heads(hk, 4)
    q, k, v = (nested(x, requires_grad=True).transpose(1, 2) for x in (qs, ks, vs))
    if hq != hk:  # as torch: fewer key/value heads only with enable_gqa=True
        with pytest.raises(RuntimeError, match="enable_gqa=True"):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hk)
    assert out._ragged_idx == 2 and out.shape[1] == hq
    for part, a, b, c in zip(out.unbind(), qs, ks, vs):
        want = np_attention(a.transpose(1, 0, 2), b.transpose(1, 0, 2), c.transpose(1, 0, 2), causal)
        np.testing.assert_allclose(part.detach().numpy(), want, rtol=1e-10, atol=1e-12)


def test_gradients_match_the_untransposed_program():
    qs, ks, vs = heads(2, 3), heads(2, 3), heads(2, 3)
    w = jag.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    a = [nested(x, requires_grad=True) for x in (qs, ks, vs)]
    out = F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in a), is_causal=True)
    (jag.tanh(out @ w).values() ** 2).sum().backward()
    b = [nested(x, requires_grad=True) for x in (qs, ks, vs)]
    w2 = jag.tensor(w.detach().numpy().copy(), requires_grad=True)
    ref = F.scaled_dot_product_attention(*b, is_causal=True)
    (jag.tanh(ref @ w2).values() ** 2).sum().backward()
    for x, y in zip(a, b):
        assert x.grad._ragged_idx == 1
        np.testing.assert_allclose(x.grad.values().numpy(), y.grad.values().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_ops_that_cannot_run_say_so():
    t = nested(heads(2, 3)).transpose(1, 2)
    with pytest.raises(NotImplementedError, match="transpose it back to dim 1"):
        t.unsqueeze(1)
    with pytest.raises(ValueError, match="varies along the ragged dim"):
        t * jag.tensor(np.ones((2, 4, 3)))


def test_save_and_load_keep_the_ragged_dim(tmp_path):
    t = nested(heads(2, 3)).transpose(1, 2)
    path = str(tmp_path / "t.safetensors")
    jag.save({"t": t}, path)
    back = jag.load(path)["t"]
    assert back._ragged_idx == 2
    for x, y in zip(back.unbind(), t.unbind()):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_view_and_unflatten_make_heads():
    cs = [rng.standard_normal((n, 8)) for n in LENS]
    x = nested(cs, requires_grad=True)
    for h in (x.unflatten(-1, (2, -1)), x.view(3, x.shape[1], 2, 4), x.reshape(3, -1, 2, 4)):
        assert h.shape[2:] == (2, 4) and h.shape[1] == x.shape[1]
        for part, c in zip(h.unbind(), cs):
            np.testing.assert_array_equal(part.detach().numpy(), c.reshape(-1, 2, 4))
    (x.unflatten(-1, (2, 4)).transpose(1, 2).values() * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.values().numpy(), np.full((8, 8), 3.0))
    with pytest.raises(ValueError, match="sizes \\[3, 3\\] ask for 9"):
        x.view(3, -1, 3, 3)
    with pytest.raises(NotImplementedError, match="keeps the batch and ragged dims"):
        x.view(24, 8)
