"""values() of a jagged tensor whose ragged dim was moved by a transpose.

torch (layout=torch.jagged): values() has the nested tensor's dims without
the batch dim, the ragged dim (``_ragged_idx`` r) holding the rows of every
component one after another; it is a view of the untransposed values, so
for components c_b of shape (n_b, d1, ..., dk)::

    nt.transpose(1, s).values() == concat_b(c_b).swapaxes(0, s - 1)

(e.g. (B, j, H, D).transpose(1, 2).values() is (H, sum n_b, D) with strides
(D, H * D, 1)). The expected values below are that formula in numpy.
"""
import numpy as np

import jag

rng = np.random.default_rng(7)
LENS = (3, 1, 2)


def components(*inner):
    return [rng.standard_normal((n,) + inner) for n in LENS]


def nested(cs, requires_grad=False):
    return jag.nested.nested_tensor([jag.tensor(c) for c in cs], layout=jag.jagged, requires_grad=requires_grad)


def test_heads_transpose_puts_the_ragged_rows_at_dim_1():
    cs = components(2, 4)  # (n_b, H, D)
    t = nested(cs).transpose(1, 2)  # (B, H, j, D)
    v = t.values()
    total = sum(LENS)
    assert v.shape == (2, total, 4)
    assert v.stride() == (4, 2 * 4, 1) and not v.is_contiguous()  # a view, no copy
    np.testing.assert_array_equal(v.numpy(), np.concatenate(cs).transpose(1, 0, 2))


def test_transposing_back_gives_the_rows_first_values():
    cs = components(2, 4)
    v = nested(cs).transpose(1, 2).transpose(1, 2).values()
    assert v.shape == (sum(LENS), 2, 4) and v.is_contiguous()
    np.testing.assert_array_equal(v.numpy(), np.concatenate(cs))


def test_every_transpose_of_the_ragged_dim_of_a_5d_tensor():
    cs = components(2, 5, 4)  # (n_b, 2, 5, 4)
    nt = nested(cs)
    packed = np.concatenate(cs)
    for s in (2, 3, 4):
        v = nt.transpose(1, s).values()
        want = packed.swapaxes(0, s - 1)
        assert v.shape == want.shape, s
        np.testing.assert_array_equal(v.numpy(), want)
    # a transpose that leaves the ragged dim at 1 keeps it first in the values
    np.testing.assert_array_equal(nt.transpose(2, 3).values().numpy(), packed.swapaxes(1, 2))


def test_values_of_a_transposed_tensor_are_differentiable():
    cs = components(2, 4)
    x = nested(cs, requires_grad=True)
    weights = rng.standard_normal((2, sum(LENS), 4))  # one weight per element of the (H, total, D) values
    (x.transpose(1, 2).values() * jag.tensor(weights)).sum().backward()
    # d/dx of sum(values * w) is w, laid back out as x's rows-first values
    np.testing.assert_allclose(x.grad.values().numpy(), weights.transpose(1, 0, 2), rtol=0, atol=0)


def test_unbind_of_a_transposed_tensor_is_unchanged():
    cs = components(2, 4)
    for part, c in zip(nested(cs).transpose(1, 2).unbind(), cs):
        np.testing.assert_array_equal(part.numpy(), c.transpose(1, 0, 2))
