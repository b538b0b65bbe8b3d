"""scaled_dot_product_attention with dropout_p > 0.

torch.nn.functional.scaled_dot_product_attention applies dropout to the
attention weights whenever dropout_p > 0::

    out = (softmax(q k^T * scale + attn_mask) * keep / (1 - p)) @ v

keep a Bernoulli(1 - p) mask over the (..., H, Lq, Lk) weights. jag draws
that mask with jag.nn.functional.dropout from the generator
jag.manual_seed seeds (one draw over the weights; jagged inputs: one per
component, in order), so reseeding and running dropout on ones of the
weights' shape gives the same keep / (1 - p). The expected outputs below
are the formula in numpy with that mask.
"""
import math

import numpy as np
import pytest

import jag

F = jag.nn.functional
rng = np.random.default_rng(11)
SEED = 1234
P = 0.4


def t64(a, requires_grad=False):
    return jag.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def dropout_masks(p, *shapes):
    """keep / (1 - p) for each shape, drawn as scaled_dot_product_attention draws them."""
    jag.manual_seed(SEED)
    masks = [F.dropout(jag.ones(s, dtype=jag.float64), p).numpy() for s in shapes]
    for m in masks:  # dropout's own contract: zeros and 1 / (1 - p), nothing else
        assert np.all((m == 0) | np.isclose(m, 1.0 / (1.0 - p), rtol=1e-15, atol=0))
    return masks


def np_attention(q, k, v, weight_mask=None, additive=None, causal=False, scale=None):
    s = (q @ np.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if additive is not None:
        s = s + additive
    if causal:  # torch: the top-left triangle (row i sees columns 0..i)
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    if weight_mask is not None:
        w = w * weight_mask
    return w @ v


def test_dense_output_is_the_formula_with_the_drawn_mask():
    q, k, v = rng.standard_normal((2, 3, 5, 4)), rng.standard_normal((2, 3, 6, 4)), rng.standard_normal((2, 3, 6, 4))
    (mask,) = dropout_masks(P, (2, 3, 5, 6))
    assert 0 < (mask == 0).sum() < mask.size  # some weights dropped, some kept
    jag.manual_seed(SEED)
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), dropout_p=P)
    np.testing.assert_allclose(out.numpy(), np_attention(q, k, v, mask), rtol=1e-12, atol=1e-12)


def test_dense_with_a_mask_causal_a_scale_and_grouped_heads():
    q = rng.standard_normal((2, 4, 5, 3))
    k, v = rng.standard_normal((2, 2, 5, 3)), rng.standard_normal((2, 2, 5, 3))
    additive = rng.standard_normal((5, 5))
    (mask,) = dropout_masks(P, (2, 4, 5, 5))
    jag.manual_seed(SEED)
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), attn_mask=t64(additive), dropout_p=P,
                                         is_causal=True, scale=0.7, enable_gqa=True)
    # enable_gqa: key/value head h serves query heads 2h and 2h + 1
    k4, v4 = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    want = np_attention(q, k4, v4, mask, additive=additive, causal=True, scale=0.7)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)


def test_a_bool_mask_takes_part_where_true():
    q, k, v = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 2, 3, 4))
    keep = np.array([[True, False, True], [True, True, False], [False, True, True]])
    (mask,) = dropout_masks(P, (1, 2, 3, 3))
    jag.manual_seed(SEED)
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), attn_mask=jag.tensor(keep), dropout_p=P)
    want = np_attention(q, k, v, mask, additive=np.where(keep, 0.0, -np.inf))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)


LENS = (3, 1, 4)
H, D = 2, 3


def nested(cs, requires_grad=False):
    return jag.nested.nested_tensor([t64(c) for c in cs], layout=jag.jagged, requires_grad=requires_grad)


@pytest.mark.parametrize("heads_first", [False, True])
def test_nested_output_is_the_formula_per_component(heads_first):
    qs, ks, vs = ([rng.standard_normal((n, H, D)) for n in LENS] for _ in range(3))  # (n_b, H, D)
    masks = dropout_masks(P, *[(H, n, n) for n in LENS])
    q, k, v = nested(qs), nested(ks), nested(vs)
    if heads_first:  # torch's layout (B, H, j, D)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    jag.manual_seed(SEED)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=P, is_causal=True)
    assert out._ragged_idx == q._ragged_idx and out.shape == q.shape
    assert out.shape[1 + heads_first] == q.shape[1 + heads_first]  # the query's ragged dim
    for part, a, b, c, m in zip(out.unbind(), qs, ks, vs, masks):
        want = np_attention(a.transpose(1, 0, 2), b.transpose(1, 0, 2), c.transpose(1, 0, 2), m, causal=True)
        got = part.numpy() if heads_first else part.numpy().transpose(1, 0, 2)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_p_zero_is_attention_without_dropout():
    q, k, v = rng.standard_normal((2, 2, 4, 3)), rng.standard_normal((2, 2, 4, 3)), rng.standard_normal((2, 2, 4, 3))
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), dropout_p=0.0)
    np.testing.assert_allclose(out.numpy(), np_attention(q, k, v), rtol=1e-12, atol=1e-12)


def test_p_one_gives_zeros():
    # torch: every weight dropped, so the output is all zeros
    q = t64(rng.standard_normal((1, 2, 3, 4)))
    assert np.array_equal(F.scaled_dot_product_attention(q, q, q, dropout_p=1.0).numpy(), np.zeros((1, 2, 3, 4)))
    nt = nested([rng.standard_normal((n, H, D)) for n in LENS]).transpose(1, 2)
    for part in F.scaled_dot_product_attention(nt, nt, nt, dropout_p=1.0).unbind():
        assert np.array_equal(part.numpy(), np.zeros(part.shape))


def test_dropout_p_outside_zero_one_is_refused():
    q = t64(rng.standard_normal((1, 1, 2, 2)))
    with pytest.raises(ValueError, match="scaled_dot_product_attention: dropout_p must be in \\[0, 1\\]"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=1.5)


def test_dense_gradients_match_finite_differences_for_a_fixed_mask():
    def attend(q, k, v):
        jag.manual_seed(SEED)  # the same mask at every evaluation
        return F.scaled_dot_product_attention(q, k, v, dropout_p=P, is_causal=True)

    inputs = [t64(rng.standard_normal((1, 2, 3, 2)), requires_grad=True) for _ in range(3)]
    assert jag.autograd.gradcheck(attend, inputs)


@pytest.mark.parametrize("heads_first", [False, True])
def test_nested_gradients_match_finite_differences_for_a_fixed_mask(heads_first):
    def attend(q, k, v):
        jag.manual_seed(SEED)
        if heads_first:
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=P, is_causal=True)

    inputs = [nested([rng.standard_normal((n, H, 2)) for n in (2, 3)], requires_grad=True) for _ in range(3)]
    assert jag.autograd.gradcheck(attend, inputs)
