"""jag.autograd: custom differentiable functions (Function over
jag_function_apply), gradcheck over jag_gradcheck, and grad-mode helpers."""
from __future__ import annotations

import typing as _typing

from . import _C


class GradcheckError(RuntimeError):
    """Raised by gradcheck when an analytic gradient differs from the
    finite-difference one (the message names the worst element).

    Example::

        >>> x = jag.tensor([1.0, 2.0], dtype=jag.float64, requires_grad=True)
        >>> class WrongGrad(jag.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g  # should be 2 x g
        >>> try:
        ...     jag.autograd.gradcheck(WrongGrad.apply, (x,))
        ... except jag.autograd.GradcheckError:
        ...     print("mismatch")
        mismatch
    """


def gradcheck(func: _typing.Callable[..., _typing.Any], inputs: _typing.Any, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Compare the gradients of func(*inputs) with central finite differences
    in float64 (jag_gradcheck). inputs: float64 tensors (dense or nested)
    requiring grad; func returns one tensor. Returns True, or raises
    GradcheckError (False with raise_exception=False) on a mismatch.

    Example::

        >>> x = jag.tensor([0.5, 1.5], dtype=jag.float64, requires_grad=True)
        >>> jag.autograd.gradcheck(lambda t: (t * t.sin()).sum(), (x,))
        True
        >>> nt = jag.nested.nested_tensor([jag.tensor([1.0, 2.0]), jag.tensor([3.0])], layout=jag.jagged,
        ...                               dtype=jag.float64, requires_grad=True)
        >>> jag.autograd.gradcheck(lambda t: t.exp(), (nt,))
        True
    """
    import jag

    if isinstance(inputs, jag.Tensor):
        inputs = (inputs,)
    for i, t in enumerate(inputs):
        if isinstance(t, jag.Tensor) and t.requires_grad and not t.is_leaf:
            # only leaves accumulate .grad: the analytic side would read 0
            raise ValueError("gradcheck: input %d is not a leaf (an op made it); pass a leaf, e.g. "
                             "x.detach().requires_grad_()" % i)
    try:
        return _C._gradcheck(func, list(inputs), float(eps), float(atol), float(rtol))
    except ValueError as e:
        if "analytic" not in str(e):  # not a mismatch: a bad argument
            raise
        if raise_exception:
            raise GradcheckError(str(e)) from None
        return False


def backward(tensors: _typing.Any, grad_tensors: _typing.Any = None, retain_graph: bool = False) -> None:
    """Compute the gradients of ``tensors`` (a tensor or a sequence) with
    respect to the graph's leaves, as calling ``t.backward(g)`` for each ``t``
    and its ``grad_tensors`` entry ``g``.

    Example::

        >>> x = jag.tensor([1.0, 2.0], requires_grad=True)
        >>> y, z = x * x, 3 * x
        >>> jag.autograd.backward([y, z], [jag.ones(2), jag.tensor([1.0, 0.0])])
        >>> x.grad  # 2 x + [3, 0]
        tensor([5.0000, 4.0000], dtype=float32, size=[2])
    """
    import jag

    if isinstance(tensors, jag.Tensor):
        tensors = [tensors]
        grad_tensors = [grad_tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    for t, g in zip(tensors, grad_tensors):
        t.backward(g, retain_graph=retain_graph)


class FunctionCtx:
    """The ``ctx`` given to a Function's forward and backward: keep tensors
    with save_for_backward (read them back as saved_tensors) and anything
    else as attributes. needs_input_grad has one bool per argument of
    apply.

    Example::

        >>> class Cube(jag.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         ctx.power = 3  # any other value: an attribute
        ...         return x ** 3
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         x, = ctx.saved_tensors
        ...         return g * ctx.power * x ** (ctx.power - 1)
        >>> x = jag.tensor([1.0, 2.0], requires_grad=True)
        >>> Cube.apply(x).sum().backward()
        >>> x.grad
        tensor([3.0000, 12.0000], dtype=float32, size=[2])
    """

    # set by Function.apply for the node's backward
    _cls: _typing.Any
    _n_args: int
    _tensor_positions: _typing.Tuple[int, ...]
    _input_specs: _typing.Dict[int, _typing.Tuple[_typing.Any, ...]]

    def __init__(self) -> None:
        self._saved: _typing.Tuple[_typing.Any, ...] = ()
        self.needs_input_grad: _typing.Tuple[bool, ...] = ()
        self._non_differentiable: _typing.Tuple[_typing.Any, ...] = ()
        # the outputs given to the node, when some are not differentiable
        self._diff_positions: _typing.Optional[_typing.Tuple[int, ...]] = None
        self._n_forward_outputs = 0

    def save_for_backward(self, *tensors: _typing.Any) -> None:
        """Keep tensors (or None) for backward, where ``saved_tensors`` gives them back.

        Example::

            >>> class Mul(jag.autograd.Function):
            ...     @staticmethod
            ...     def forward(ctx, a, b):
            ...         ctx.save_for_backward(a, b)
            ...         return a * b
            ...     @staticmethod
            ...     def backward(ctx, g):
            ...         a, b = ctx.saved_tensors
            ...         return g * b, g * a
            >>> a, b = jag.tensor([2.0], requires_grad=True), jag.tensor([5.0], requires_grad=True)
            >>> Mul.apply(a, b).sum().backward()
            >>> a.grad, b.grad
            (tensor([5.0000], dtype=float32, size=[1]), tensor([2.0000], dtype=float32, size=[1]))
        """
        import jag

        for t in tensors:
            if t is not None and not isinstance(t, jag.Tensor):
                raise TypeError("save_for_backward: expected jag tensors or None, got %s" % type(t).__name__)
        self._saved = tuple(tensors)

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to ``save_for_backward``, as a tuple.

        Example::

            >>> class Square(jag.autograd.Function):
            ...     @staticmethod
            ...     def forward(ctx, x):
            ...         ctx.save_for_backward(x, None)
            ...         return x * x
            ...     @staticmethod
            ...     def backward(ctx, g):
            ...         print(type(ctx.saved_tensors).__name__, len(ctx.saved_tensors))
            ...         x, _ = ctx.saved_tensors
            ...         return 2 * x * g
            >>> x = jag.tensor([3.0], requires_grad=True)
            >>> Square.apply(x).sum().backward()
            tuple 2
            >>> x.grad
            tensor([6.0000], dtype=float32, size=[1])
        """
        return self._saved

    def mark_non_differentiable(self, *tensors: _typing.Any) -> None:
        """Outputs (returned by forward) that get no gradient: apply returns
        them not requiring grad, and backward receives None for them.

        Example::

            >>> class ReluWithMask(jag.autograd.Function):
            ...     @staticmethod
            ...     def forward(ctx, x):
            ...         mask = x > 0
            ...         ctx.mark_non_differentiable(mask)
            ...         ctx.save_for_backward(mask)
            ...         return jag.where(mask, x, jag.zeros_like(x)), mask
            ...     @staticmethod
            ...     def backward(ctx, g_out, g_mask):  # g_mask: zeros, never used
            ...         mask, = ctx.saved_tensors
            ...         return jag.where(mask, g_out, jag.zeros_like(g_out))
            >>> x = jag.tensor([-1.0, 2.0], requires_grad=True)
            >>> out, mask = ReluWithMask.apply(x)
            >>> out.requires_grad, mask.requires_grad, mask.tolist()
            (True, False, [False, True])
            >>> out.sum().backward()
            >>> x.grad
            tensor([0.0000, 1.0000], dtype=float32, size=[2])
        """
        import jag

        for t in tensors:
            if not isinstance(t, jag.Tensor):
                raise TypeError("mark_non_differentiable: expected jag tensors, got %s" % type(t).__name__)
        self._non_differentiable = tuple(tensors)

    def _run_backward(self, *grads):
        if self._diff_positions is not None:  # spread the node's grads over every forward output
            full = [None] * self._n_forward_outputs
            for pos, g in zip(self._diff_positions, grads):
                full[pos] = g
            grads = full
        r = self._cls.backward(self, *grads)
        self._check_grads(r)
        return r

    def _check_grads(self, r):
        """Each gradient backward returns must have its argument's shape
        (nested or not) and dtype; the message counts arguments as apply
        received them (torch's index). Anything else malformed is left to
        the C layer, which refuses it too."""
        import jag

        specs = getattr(self, "_input_specs", None)
        grads = (r,) if r is None or isinstance(r, jag.Tensor) else r
        if specs is None or not isinstance(grads, (tuple, list)) or len(grads) != self._n_args:
            return
        name = self._cls.__qualname__
        for pos, (nested, sizes, shape, dtype) in specs.items():
            g = grads[pos]
            if not isinstance(g, jag.Tensor) or not self.needs_input_grad[pos]:
                continue
            if g.is_nested != nested:
                raise ValueError("%s.backward returned a %s gradient for argument %d of apply, which is a %s tensor "
                                 "of shape %s" % (name, "nested" if g.is_nested else "dense", pos,
                                                   "nested" if nested else "dense", shape))
            if tuple(g._sizes) != sizes:
                raise ValueError("%s.backward returned a gradient of shape %s for argument %d of apply, expected "
                                 "its shape %s" % (name, g.shape, pos, shape))
            if g.dtype is not dtype:
                raise TypeError("%s.backward returned a %s gradient for argument %d of apply, expected its dtype "
                                "%s" % (name, g.dtype.name, pos, dtype.name))

    def set_materialize_grads(self, value: bool) -> None:
        """jag's engine always gives zeros to an output that received no
        gradient (torch's default); None instead is not supported.

        Example::

            >>> ctx = jag.autograd.FunctionCtx()
            >>> ctx.set_materialize_grads(True)  # the only behaviour jag has
            >>> ctx.set_materialize_grads(False)
            Traceback (most recent call last):
                ...
            NotImplementedError: set_materialize_grads(False): jag always passes zeros ...
        """
        if not value:
            raise NotImplementedError("set_materialize_grads(False): jag always passes zeros for outputs that "
                                      "received no gradient")


class Function:
    """A differentiable function with a hand-written backward, as
    torch.autograd.Function:

        class Exp(jag.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = jag.exp(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, gy):
                y, = ctx.saved_tensors
                return gy * y

        y = Exp.apply(x)

    forward runs with grad mode off and returns a tensor or a tuple of 1 to
    4 tensors; when an argument requires grad, the outputs get one autograd
    node (jag_function_apply) whose backward calls ``backward(ctx,
    *grad_outputs)``, which returns one gradient (or None) per argument of
    apply (None for non-tensor arguments). An output that received no
    gradient gets zeros shaped like it (as torch materialises them). Dense
    and nested tensors alike; exceptions
    raised in backward reach the caller of .backward().

    Example::

        >>> class Exp(jag.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         y = jag.exp(x)
        ...         ctx.save_for_backward(y)
        ...         return y
        ...     @staticmethod
        ...     def backward(ctx, gy):
        ...         y, = ctx.saved_tensors
        ...         return gy * y
        >>> x = jag.tensor([0.0, 1.0], requires_grad=True)
        >>> Exp.apply(x).sum().backward()
        >>> x.grad
        tensor([1.0000, 2.7183], dtype=float32, size=[2])
    """

    @staticmethod
    def forward(ctx: FunctionCtx, *args: _typing.Any) -> _typing.Any:
        """Compute the outputs from ``args`` (run under no_grad); override it.
        Returns a tensor or a tuple of tensors.

        Example::

            >>> class Double(jag.autograd.Function):
            ...     @staticmethod
            ...     def forward(ctx, x):
            ...         print("grad mode in forward:", jag.is_grad_enabled())
            ...         return 2 * x
            ...     @staticmethod
            ...     def backward(ctx, g):
            ...         return 2 * g
            >>> Double.apply(jag.tensor([1.0], requires_grad=True))
            grad mode in forward: False
            tensor([2.0000], dtype=float32, size=[1])
        """
        raise NotImplementedError("Function.forward must be overridden")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: _typing.Any) -> _typing.Any:
        """The gradients with respect to forward's arguments (one per argument,
        None for those that need none), given one gradient per output; override it.

        Example::

            >>> class ScaleBy(jag.autograd.Function):
            ...     @staticmethod
            ...     def forward(ctx, x, k):
            ...         ctx.k = k
            ...         return x * k
            ...     @staticmethod
            ...     def backward(ctx, g):
            ...         return g * ctx.k, None  # no gradient for the number k
            >>> x = jag.tensor([1.0, 2.0], requires_grad=True)
            >>> ScaleBy.apply(x, 3.0).sum().backward()
            >>> x.grad
            tensor([3.0000, 3.0000], dtype=float32, size=[2])
        """
        raise NotImplementedError("Function.backward must be overridden")

    @classmethod
    def apply(cls, *args: _typing.Any) -> _typing.Any:
        """Run forward on ``args`` and, when an input requires grad, record a node
        whose backward is this class's ``backward``. Returns forward's outputs.

        Example::

            >>> class Neg(jag.autograd.Function):
            ...     @staticmethod
            ...     def forward(ctx, x):
            ...         return -x
            ...     @staticmethod
            ...     def backward(ctx, g):
            ...         return -g
            >>> nt = jag.nested.nested_tensor([jag.tensor([1.0, 2.0]), jag.tensor([3.0])], layout=jag.jagged,
            ...                               requires_grad=True)
            >>> out = Neg.apply(nt)
            >>> out.requires_grad, [c.tolist() for c in out.unbind()]
            (True, [[-1.0, -2.0], [-3.0]])
            >>> Neg.apply(jag.tensor([1.0])).requires_grad  # no input requires grad: no node
            False
        """
        import jag

        ctx = FunctionCtx()
        grad_on = _C._is_grad_enabled()
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, jag.Tensor))
        ctx.needs_input_grad = tuple(bool(grad_on and isinstance(a, jag.Tensor) and a.requires_grad) for a in args)
        with jag.no_grad():
            out = cls.forward(ctx, *args)
        if not any(ctx.needs_input_grad):
            return out
        single = isinstance(out, jag.Tensor)
        if single:
            outs = (out,)
        elif isinstance(out, (tuple, list)):
            outs = tuple(out)
        else:
            raise TypeError("%s.forward returned %s; expected a jag.Tensor or a tuple of them"
                            % (cls.__name__, type(out).__name__))
        ctx._cls = cls
        ctx._n_args = len(args)
        ctx._tensor_positions = positions
        # what each gradient must look like: (nested, sizes, shape, dtype)
        ctx._input_specs = {i: (args[i].is_nested, tuple(args[i]._sizes), args[i].shape, args[i].dtype)
                            for i in positions if ctx.needs_input_grad[i]}
        if ctx._non_differentiable:
            marked = [any(o is m for m in ctx._non_differentiable) for o in outs]
            diff = tuple(i for i, m in enumerate(marked) if not m)
            if not diff:  # nothing to differentiate: no node
                return out
            ctx._diff_positions, ctx._n_forward_outputs = diff, len(outs)
            recorded = _C._function_record(ctx, tuple(args[i] for i in positions), tuple(outs[i] for i in diff))
            merged = list(outs)
            for pos, r in zip(diff, recorded):
                merged[pos] = r
            return merged[0] if single else tuple(merged)
        res = _C._function_record(ctx, tuple(args[i] for i in positions), outs)
        return res[0] if single else res


from . import no_grad, enable_grad, set_grad_enabled  # noqa: E402,F401
