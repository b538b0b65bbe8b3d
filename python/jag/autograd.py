"""jag.autograd: gradcheck over jag_gradcheck, and grad-mode helpers."""
from . import _C


class GradcheckError(RuntimeError):
    """Raised by gradcheck when an analytic gradient differs from the
    finite-difference one (the message names the worst element)."""


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Compare the gradients of func(*inputs) with central finite differences
    in float64 (jag_gradcheck). inputs: float64 tensors (dense or nested)
    requiring grad; func returns one tensor. Returns True, or raises
    GradcheckError (False with raise_exception=False) on a mismatch."""
    import jag

    if isinstance(inputs, jag.Tensor):
        inputs = (inputs,)
    try:
        return _C._gradcheck(func, list(inputs), float(eps), float(atol), float(rtol))
    except ValueError as e:
        if "analytic" not in str(e):  # not a mismatch: a bad argument
            raise
        if raise_exception:
            raise GradcheckError(str(e)) from None
        return False


def backward(tensors, grad_tensors=None, retain_graph=False):
    import jag

    if isinstance(tensors, jag.Tensor):
        tensors = [tensors]
        grad_tensors = [grad_tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    for t, g in zip(tensors, grad_tensors):
        t.backward(g, retain_graph=retain_graph)


from . import no_grad, enable_grad, set_grad_enabled  # noqa: E402,F401
