"""jag.autograd.Function: custom forward/backward pairs recorded through
jag_function_apply, on dense and nested tensors, checked against hand
values and finite differences."""
import numpy as np
import pytest

import jag


class Exp(jag.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = jag.exp(x)
        ctx.save_for_backward(y)  # an output: no reference cycle
        return y

    @staticmethod
    def backward(ctx, gy):
        y, = ctx.saved_tensors
        return gy * y


class Scale(jag.autograd.Function):
    """x * k with a non-tensor argument."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        ctx.needs = ctx.needs_input_grad
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


class MulAdd(jag.autograd.Function):
    """(a * b, a + b): two inputs, two outputs."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b, a + b

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        a, b = ctx.saved_tensors
        ga = gb = None
        if g_prod is not None:
            ga, gb = g_prod * b, g_prod * a
        if g_sum is not None:
            ga = g_sum if ga is None else ga + g_sum
            gb = g_sum if gb is None else gb + g_sum
        return ga, gb


def x64(*shape, seed=0):
    return jag.tensor(np.random.default_rng(seed).uniform(-1, 1, shape))


def test_exp_against_hand_values_and_gradcheck():
    x = x64(3, 4).requires_grad_()
    y = Exp.apply(x)
    assert y.requires_grad and not y.is_leaf
    np.testing.assert_allclose(y.detach().numpy(), np.exp(x.detach().numpy()))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()), rtol=1e-12)
    assert jag.autograd.gradcheck(lambda t: Exp.apply(t) * t, [x64(5, seed=1).requires_grad_()])


def test_non_tensor_arguments_and_needs_input_grad():
    x = x64(4).requires_grad_()
    y = Scale.apply(x, 2.5)
    (y * y).sum().backward()  # d/dx sum((2.5 x)^2) = 12.5 x
    np.testing.assert_allclose(x.grad.numpy(), 12.5 * x.detach().numpy(), rtol=1e-12)
    ctx_needs = []

    class Probe(Scale):
        @staticmethod
        def forward(ctx, x, k):
            ctx_needs.append(ctx.needs_input_grad)
            assert not jag.is_grad_enabled()  # forward runs with grad mode off
            return Scale.forward(ctx, x, k)

    Probe.apply(x, 1.0)
    Probe.apply(x.detach(), 1.0)
    assert ctx_needs == [(True, False), (False, False)]


def test_two_outputs_and_unused_output():
    a, b = x64(3, seed=2).requires_grad_(), x64(3, seed=3).requires_grad_()
    p, s = MulAdd.apply(a, b)
    (p * 2 + s * 3).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * b.detach().numpy() + 3, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), 2 * a.detach().numpy() + 3, rtol=1e-12)
    a.grad = None
    b.grad = None
    p, _ = MulAdd.apply(a, b)
    p.sum().backward()  # the sum output gets no gradient: zeros in backward
    np.testing.assert_allclose(a.grad.numpy(), b.detach().numpy(), rtol=1e-12)
    assert jag.autograd.gradcheck(lambda u, v: MulAdd.apply(u, v)[0] + MulAdd.apply(u, v)[1] * u,
                                  [x64(4, seed=4).requires_grad_(), x64(4, seed=5).requires_grad_()])


def test_no_grad_and_plain_inputs_are_not_recorded():
    x = x64(3)
    y = Exp.apply(x)
    assert not y.requires_grad
    w = x64(3).requires_grad_()
    with jag.no_grad():
        z = Exp.apply(w)
    assert not z.requires_grad


def test_forward_returning_its_input():
    class Identity(jag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = x64(2).requires_grad_()
    y = Identity.apply(x)
    assert y is not x and y.requires_grad and x.is_leaf
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_errors_in_backward():
    class WrongCount(jag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g, g

    class Raises(jag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ZeroDivisionError("from backward")

    class NotATensor(WrongCount):
        @staticmethod
        def backward(ctx, g):
            return 3

    x = x64(2).requires_grad_()
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        WrongCount.apply(x).sum().backward()
    with pytest.raises(ZeroDivisionError, match="from backward"):
        Raises.apply(x).sum().backward()
    with pytest.raises(TypeError, match="int"):
        NotATensor.apply(x).sum().backward()

    class Tampers(WrongCount):
        @staticmethod
        def backward(ctx, g):
            return g

    y = Tampers.apply(x)
    ctx = None
    for obj in __import__("gc").get_referrers(Tampers):
        if isinstance(obj, jag.autograd.FunctionCtx):
            ctx = obj
    assert ctx is not None
    ctx._tensor_positions = (0, 0, 0, 0, 0)  # must not make backward write past the node's inputs
    with pytest.raises(RuntimeError, match="changed"):
        y.sum().backward()
    assert x.grad is None  # no gradient was written

    class BadForward(jag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return "not a tensor"

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match="str"):
        BadForward.apply(x)
    with pytest.raises(TypeError, match="save_for_backward"):
        jag.autograd.FunctionCtx().save_for_backward(3)
    with pytest.raises(NotImplementedError):
        jag.autograd.Function.apply(x)


def test_wrong_gradient_shape_or_dtype_is_refused():
    """A backward whose gradient does not match its argument is an error
    naming the Function, the argument (counted as apply received them, as
    torch's 'returned an invalid gradient at index 2 - got [7] but expected
    shape compatible with [2]'), the expected and the given shape or dtype;
    no .grad is written. (torch casts a float64 gradient to the input's
    dtype and sums a broadcast one; jag refuses both.)"""

    def make(grad_for_y):
        class Affine(jag.autograd.Function):
            @staticmethod
            def forward(ctx, x, k, y):
                return x * k + y.sum()

            @staticmethod
            def backward(ctx, g):
                return g * 2.0, None, grad_for_y(g)

        return Affine

    x = jag.ones(3, requires_grad=True)
    y = jag.ones(2, requires_grad=True)
    cases = [
        (ValueError, r"Affine\.backward returned a gradient of shape \(7,\) for argument 2 of apply, expected its "
                     r"shape \(2,\)", lambda g: jag.ones(7)),
        (ValueError, r"Affine.*shape \(2, 2\) for argument 2.*\(2,\)", lambda g: jag.ones(2, 2)),
        (ValueError, r"Affine.*shape \(\) for argument 2.*\(2,\)", lambda g: jag.tensor(1.0)),
        (TypeError, r"Affine\.backward returned a float64 gradient for argument 2 of apply, expected its dtype "
                    r"float32", lambda g: jag.ones(2, dtype=jag.float64)),
        (ValueError, r"Affine\.backward returned a nested gradient for argument 2 of apply, which is a dense",
         lambda g: jag.nested.nested_tensor([jag.ones(1), jag.ones(1)], layout=jag.jagged)),
    ]
    for exc, msg, bad in cases:
        with pytest.raises(exc, match=msg):
            make(bad).apply(x, 2.0, y).sum().backward()
        assert x.grad is None and y.grad is None  # nothing was accumulated
    make(lambda g: jag.ones(2)).apply(x, 2.0, y).sum().backward()  # the right shape: accepted
    assert x.grad.tolist() == [2.0, 2.0, 2.0] and y.grad.tolist() == [1.0, 1.0]

    class NestedGrad(jag.autograd.Function):
        @staticmethod
        def forward(ctx, nt):
            return nt * 1

        @staticmethod
        def backward(ctx, g):
            return jag.ones(3, 4)  # a dense gradient for a nested argument

    nt = jag.nested.nested_tensor([jag.ones(2, 4), jag.ones(1, 4)], layout=jag.jagged).requires_grad_()
    with pytest.raises(ValueError, match=r"NestedGrad.*dense gradient for argument 0.*nested tensor of shape "
                                         r"\(2, j\d+, 4\)"):
        NestedGrad.apply(nt).values().sum().backward()
    assert nt.grad is None


def test_retain_graph_runs_backward_twice():
    x = x64(3).requires_grad_()
    y = Exp.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.detach().numpy()), rtol=1e-12)


# ---- nested inputs (step 4b of examples/nested_subclass_walkthrough.py) ----


class ViewValuesFromJagged(jag.autograd.Function):
    """jagged -> its packed values, differentiably (the walkthrough's
    ViewBufferFromJagged)."""

    @staticmethod
    def forward(ctx, x):
        assert x.is_nested and x.layout is jag.jagged
        ctx.save_for_backward(x.offsets())
        return x.values()

    @staticmethod
    def backward(ctx, g):
        offsets, = ctx.saved_tensors
        return jag.nested.nested_tensor_from_jagged(g, offsets)


class NestedSin(jag.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return jag.nested.nested_tensor_from_jagged(jag.tensor(np.sin(x.values().numpy())), x.offsets())

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return jag.nested.nested_tensor_from_jagged(g.values() * jag.tensor(np.cos(x.values().numpy())),
                                                    x.offsets())


def test_nested_through_a_function_and_the_values_bridge():
    values = jag.tensor(np.random.default_rng(7).uniform(-2, 2, (9, 2)))
    nt = jag.nested.nested_tensor_from_jagged(values, [0, 2, 6, 9]).requires_grad_()
    out = NestedSin.apply(nt)
    assert out.is_nested and out.requires_grad
    buf = ViewValuesFromJagged.apply(out)
    assert not buf.is_nested and buf.shape == (9, 2)
    np.testing.assert_allclose(buf.detach().numpy(), np.sin(values.numpy()), rtol=1e-12)
    (buf * buf).sum().backward()  # d/dv sin(v)^2 = 2 sin(v) cos(v)
    v = values.numpy()
    np.testing.assert_allclose(nt.grad.values().numpy(), 2 * np.sin(v) * np.cos(v), rtol=1e-12)
    assert nt.grad.offsets().tolist() == [0, 2, 6, 9]
    x = jag.nested.nested_tensor_from_jagged(x64(7, 3, seed=8), [0, 3, 3, 7]).requires_grad_()
    assert jag.autograd.gradcheck(lambda t: jag.nested.to_padded_tensor(NestedSin.apply(t), 0.0), [x])


def test_outputs_without_gradient_get_zeros():
    seen = []

    class Two(jag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(True)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g2, g3):
            seen.append((g2, g3))
            return g2 * 2 + g3 * 3

    x = x64(3).requires_grad_()
    a, _ = Two.apply(x)
    a.sum().backward()
    g2, g3 = seen[-1]
    assert g2.tolist() == [1.0] * 3 and g3.tolist() == [0.0] * 3 and g3.dtype is jag.float64
    assert x.grad.tolist() == [2.0] * 3
    # a nested output gets nested zeros around its offsets
    nt = jag.nested.nested_tensor_from_jagged(x64(5, 2), [0, 2, 5]).requires_grad_()
    a, b = Two.apply(nt)
    jag.nested.to_padded_tensor(b, 0.0).sum().backward()
    z = seen[-1][0]
    assert z.is_nested and z.offsets().tolist() == [0, 2, 5] and z.values().tolist() == [[0.0, 0.0]] * 5
    np.testing.assert_array_equal(nt.grad.values().numpy(), np.full((5, 2), 3.0))
    with pytest.raises(NotImplementedError, match="zeros"):
        jag.autograd.FunctionCtx().set_materialize_grads(False)


def test_mark_non_differentiable():
    seen = []

    class WithMask(jag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x > 0).to(x.dtype)
            ctx.mark_non_differentiable(mask)
            ctx.save_for_backward(mask)
            return mask, x * mask  # the marked output first: positions are kept

        @staticmethod
        def backward(ctx, g_mask, g_y):
            seen.append(g_mask)
            mask, = ctx.saved_tensors
            return g_y * mask

    a = np.array([-1.0, 2.0, -3.0, 4.0])
    x = jag.tensor(a, requires_grad=True)
    mask, y = WithMask.apply(x)
    assert not mask.requires_grad and y.requires_grad
    assert mask.tolist() == [0.0, 1.0, 0.0, 1.0]
    (y * y).sum().backward()
    assert seen == [None]
    np.testing.assert_allclose(x.grad.numpy(), 2 * a * (a > 0))

    class AllMarked(jag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x * 0
            ctx.mark_non_differentiable(r)
            return r

        @staticmethod
        def backward(ctx, g):
            raise AssertionError("never called")

    assert not AllMarked.apply(x).requires_grad
    with pytest.raises(TypeError):
        jag.autograd.FunctionCtx().mark_non_differentiable(3)
