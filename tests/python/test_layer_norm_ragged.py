"""layer_norm of a jagged tensor over normalized shapes that reach the ragged
dim: F.layer_norm(nt, nt.shape[1:]) and (nt.shape[1], D).

torch 2.15 accepts these on a jagged tensor without holes and gives each
component F.layer_norm(c, c.shape) (checked by hand against torch: equal to
1e-16); it refuses them on a tensor with holes, ignores weight and bias
there, and has no backward. jag normalizes each component over all its
elements in the normalized dims, holes included, refuses weight and bias
with a message, and differentiates. The reference is numpy on each
component: (c - mean) / sqrt(var + eps), var biased."""
import numpy as np
import pytest

import jag
import jag.nn.functional as F


def normalized(c, axes, eps=1e-5):
    mean = c.mean(axis=axes, keepdims=True)
    return (c - mean) / np.sqrt(((c - mean) ** 2).mean(axis=axes, keepdims=True) + eps)


def jagged(comps, dtype=jag.float64, requires_grad=False):
    return jag.nested.nested_tensor([jag.tensor(c, dtype=dtype) for c in comps], layout=jag.jagged,
                                    requires_grad=requires_grad)


@pytest.mark.parametrize("dtype,tol", [(jag.float64, 1e-12), (jag.float32, 2e-6)])
def test_over_the_ragged_and_last_dim(dtype, tol):
    rng = np.random.default_rng(0)
    comps = [rng.standard_normal((n, 5)) for n in (3, 1, 6, 2)]
    nt = jagged(comps, dtype)
    for shape in (nt.shape[1:], (nt.shape[1], 5)):
        out = F.layer_norm(nt, shape)
        assert out.is_nested and out.dtype == dtype
        for c, o in zip(comps, out.unbind()):
            np.testing.assert_allclose(o.numpy(), normalized(c, (0, 1)), rtol=tol, atol=tol)


def test_four_dims_and_eps():
    rng = np.random.default_rng(1)
    comps = [rng.standard_normal((n, 2, 3)) for n in (2, 5)]
    nt = jagged(comps)
    out = F.layer_norm(nt, nt.shape[1:], eps=0.5)
    for c, o in zip(comps, out.unbind()):
        np.testing.assert_allclose(o.numpy(), normalized(c, (0, 1, 2), eps=0.5), rtol=1e-12, atol=1e-12)


def test_transposed_ragged_dim_normalizes_each_head_on_its_own():
    rng = np.random.default_rng(2)
    comps = [rng.standard_normal((n, 2, 3)) for n in (4, 2)]
    t = jagged(comps).transpose(1, 2)  # (B, 2, j, 3): normalize over (j, 3) per head
    out = F.layer_norm(t, t.shape[2:])
    for c, o in zip(comps, out.unbind()):
        np.testing.assert_allclose(o.numpy(), normalized(c.transpose(1, 0, 2), (1, 2)), rtol=1e-12, atol=1e-12)


def test_holes_use_the_valid_rows_only():
    rng = np.random.default_rng(3)
    values = rng.standard_normal((9, 3))
    nt = jag.nested.nested_tensor_from_jagged(jag.tensor(values), jag.tensor([0, 3, 9]), lengths=jag.tensor([2, 4]))
    out = F.layer_norm(nt, nt.shape[1:])
    for (start, n), o in zip(((0, 2), (3, 4)), out.unbind()):
        np.testing.assert_allclose(o.numpy(), normalized(values[start:start + n], (0, 1)), rtol=1e-12, atol=1e-12)


def test_gradcheck():
    rng = np.random.default_rng(4)
    nt = jagged([rng.standard_normal((n, 3)) for n in (2, 4, 3)], requires_grad=True)
    assert jag.autograd.gradcheck(lambda x: F.layer_norm(x, x.shape[1:]), (nt,))


def test_gradient_reaches_the_values_and_sums_to_zero_per_component():
    # d/dx of sum(w * layer_norm(x)) sums to zero over each component: the
    # output does not change when a constant is added to a component
    rng = np.random.default_rng(5)
    comps = [rng.standard_normal((n, 4)) for n in (3, 5)]
    nt = jagged(comps, requires_grad=True)
    w = [rng.standard_normal((n, 4)) for n in (3, 5)]
    (F.layer_norm(nt, nt.shape[1:]) * jagged(w)).sum().backward()
    for g in nt.grad.unbind():
        assert abs(g.numpy().sum()) < 1e-12
        assert np.abs(g.numpy()).max() > 1e-3


def test_weight_and_bias_are_refused_and_nothing_changes():
    rng = np.random.default_rng(6)
    comps = [rng.standard_normal((n, 3)) for n in (2, 3)]
    nt = jagged(comps)
    before = nt.values().numpy().copy()
    for kwargs in ({"weight": jag.ones(3, dtype=jag.float64)}, {"bias": jag.zeros(3, dtype=jag.float64)}):
        with pytest.raises(ValueError, match=r"layer_norm: normalized_shape .* reaches the ragged dim \(1\).*"
                                             r"weight and bias must be None"):
            F.layer_norm(nt, nt.shape[1:], **kwargs)
    np.testing.assert_array_equal(nt.values().numpy(), before)


def test_trailing_dims_only_still_take_the_op():
    rng = np.random.default_rng(7)
    comps = [rng.standard_normal((n, 4)) for n in (2, 3)]
    w = rng.standard_normal(4)
    out = F.layer_norm(jagged(comps), (4,), weight=jag.tensor(w))
    for c, o in zip(comps, out.unbind()):
        np.testing.assert_allclose(o.numpy(), normalized(c, (1,)) * w, rtol=1e-12, atol=1e-12)
