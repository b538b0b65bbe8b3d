"""Reductions of a nested tensor with the strided layout (the default of
jag.nested.nested_tensor, as torch's) along one dim.

torch 2.15 reduces a strided nested tensor only along its last dim and only
with keepdim=True: s.sum(-1, keepdim=True) gives each component's
c.sum(-1, keepdim=True) (checked against torch: the same numbers); s.sum(1)
raises "NestedTensor can only be reduced across the last dimension", and
s.sum(-1) "NestedTensor always requires keepdim=True"; mean and amax raise
for every dim. jag gives torch's result where torch has one and, where torch
refuses, the same reduction on each component (dim d of the nested tensor is
dim d - 1 of a component). The reference is numpy on each component."""
import numpy as np
import pytest

import jag

SHAPES = [(2, 3), (4, 3), (1, 3)]


def make(rng, requires_grad=False):
    comps = [rng.standard_normal(s) for s in SHAPES]
    s = jag.nested.nested_tensor([jag.tensor(c) for c in comps], requires_grad=requires_grad)
    assert s.layout == jag.strided
    return comps, s


@pytest.mark.parametrize("dim", [-1, 2])
def test_last_dim_with_keepdim_is_torchs_result(dim):
    comps, s = make(np.random.default_rng(0))
    out = s.sum(dim, keepdim=True)
    assert out.is_nested and out.layout == jag.strided
    for c, o in zip(comps, out.unbind()):
        np.testing.assert_allclose(o.numpy(), c.sum(axis=-1, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("name,ref", [("mean", np.mean), ("amax", np.max), ("amin", np.min)])
@pytest.mark.parametrize("dim,keepdim", [(1, False), (1, True), (2, False), (-1, True)])
def test_where_torch_refuses_each_component_is_reduced(name, ref, dim, keepdim):
    comps, s = make(np.random.default_rng(1))
    out = getattr(s, name)(dim, keepdim=keepdim)
    axis = (dim if dim > 0 else dim + 3) - 1  # the component's dim
    for c, o in zip(comps, out.unbind()):
        np.testing.assert_allclose(o.numpy(), ref(c, axis=axis, keepdims=keepdim), rtol=1e-12)


def test_sum_over_dim_1_and_without_keepdim():
    comps, s = make(np.random.default_rng(2))
    for dim, keepdim in ((1, False), (1, True), (-1, False)):
        out = s.sum(dim, keepdim=keepdim)
        axis = 0 if dim == 1 else -1
        for c, o in zip(comps, out.unbind()):
            np.testing.assert_allclose(o.numpy(), c.sum(axis=axis, keepdims=keepdim), rtol=1e-12)


def test_gradients():
    comps, s = make(np.random.default_rng(3), requires_grad=True)
    assert jag.autograd.gradcheck(lambda x: x.sum(1), (s,))
    assert jag.autograd.gradcheck(lambda x: x.mean(-1, keepdim=True), (s,))
