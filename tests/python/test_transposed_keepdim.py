"""Reductions over the ragged dim of a jagged tensor whose ragged dim is not
dim 1 (after transpose), with keepdim=True.

torch: for nt of shape (B, j, H, D), t = nt.transpose(1, 2) is (B, H, j, D)
and t.sum(2, keepdim=True) is a dense (B, H, 1, D) (torch 2.15 gives
torch.Size([2, 3, 1]) for the (2, 3, j) case): the kept size-1 dim stands
where the ragged dim was. The reference here is numpy on each component,
transposed the same way, stacked along a new batch dim; gradients by hand
(sum, mean: the weight spread over the rows; max: to the argmax row) and by
finite differences (jag.autograd.gradcheck)."""
import numpy as np
import pytest

import jag

LENGTHS = (2, 4, 3)


def make(rng, trailing=(3, 2), requires_grad=False):
    comps = [rng.standard_normal((n,) + trailing) for n in LENGTHS]
    nt = jag.nested.nested_tensor([jag.tensor(c) for c in comps], layout=jag.jagged, requires_grad=requires_grad)
    return comps, nt


def logsumexp(a, axis, keepdims):
    m = a.max(axis=axis, keepdims=True)
    out = m + np.log(np.exp(a - m).sum(axis=axis, keepdims=True))
    return out if keepdims else out.squeeze(axis)


REFERENCES = {
    "sum": lambda a, axis: a.sum(axis=axis, keepdims=True),
    "mean": lambda a, axis: a.mean(axis=axis, keepdims=True),
    "amax": lambda a, axis: a.max(axis=axis, keepdims=True),
    "amin": lambda a, axis: a.min(axis=axis, keepdims=True),
    "var": lambda a, axis: a.var(axis=axis, keepdims=True, ddof=1),
    "std": lambda a, axis: a.std(axis=axis, keepdims=True, ddof=1),
    "logsumexp": lambda a, axis: logsumexp(a, axis, True),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_kept_dim_stands_where_the_ragged_dim_was(name):
    comps, nt = make(np.random.default_rng(1))
    t = nt.transpose(1, 2)  # (B, 3, j, 2)
    out = getattr(t, name)(dim=2, keepdim=True)
    ref = np.stack([REFERENCES[name](c.transpose(1, 0, 2), 1) for c in comps])
    assert tuple(out.shape) == (3, 3, 1, 2) == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)


def test_ragged_dim_with_another_dim_and_without_keepdim():
    comps, nt = make(np.random.default_rng(2))
    t = nt.transpose(1, 2)  # (B, 3, j, 2)
    both = t.sum(dim=(2, 3), keepdim=True)
    np.testing.assert_allclose(both.numpy(), np.stack([c.transpose(1, 0, 2).sum(axis=(1, 2), keepdims=True)
                                                       for c in comps]), rtol=1e-12)
    assert tuple(both.shape) == (3, 3, 1, 1)
    dropped = t.sum(dim=2)  # the dim goes: (B, 3, 2), as before
    np.testing.assert_allclose(dropped.numpy(), np.stack([c.sum(axis=0) for c in comps]), rtol=1e-12)
    # ragged dim last: (B, 2, 3, j) -> (B, 2, 3, 1)
    last = nt.permute(0, 3, 2, 1)
    out = last.mean(dim=3, keepdim=True)
    assert tuple(out.shape) == (3, 2, 3, 1)
    np.testing.assert_allclose(out.numpy(), np.stack([c.transpose(2, 1, 0).mean(axis=2, keepdims=True)
                                                      for c in comps]), rtol=1e-12)


def test_max_with_indices_keeps_the_dim_for_both():
    comps, nt = make(np.random.default_rng(3))
    values, idx = nt.transpose(1, 2).max(dim=2, keepdim=True)
    assert tuple(values.shape) == tuple(idx.shape) == (3, 3, 1, 2)
    ct = [c.transpose(1, 0, 2) for c in comps]
    np.testing.assert_array_equal(values.numpy(), np.stack([c.max(axis=1, keepdims=True) for c in ct]))
    np.testing.assert_array_equal(idx.numpy(), np.stack([c.argmax(axis=1)[:, None, :] for c in ct]))


@pytest.mark.parametrize("name", ["sum", "mean", "amax"])
def test_gradient_by_hand(name):
    rng = np.random.default_rng(4)
    comps, nt = make(rng, requires_grad=True)
    w = rng.standard_normal((3, 3, 1, 2))
    (getattr(nt.transpose(1, 2), name)(dim=2, keepdim=True) * jag.tensor(w)).sum().backward()
    for b, (c, g) in enumerate(zip(comps, nt.grad.unbind())):
        wb = w[b].transpose(1, 0, 2)  # (1, 3, 2) in component order
        if name == "amax":
            expected = np.zeros_like(c)
            rows = c.argmax(axis=0)
            for h in range(c.shape[1]):
                for d in range(c.shape[2]):
                    expected[rows[h, d], h, d] = wb[0, h, d]
        else:
            expected = np.broadcast_to(wb / (len(c) if name == "mean" else 1), c.shape)
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["mean", "var", "logsumexp"])
def test_gradcheck(name):
    _, nt = make(np.random.default_rng(5), trailing=(2, 2), requires_grad=True)
    assert jag.autograd.gradcheck(lambda x: getattr(x.transpose(1, 2), name)(dim=2, keepdim=True), (nt,))
