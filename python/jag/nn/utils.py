"""jag.nn.utils: clip_grad_norm_ (torch.nn.utils')."""
from __future__ import annotations

import typing as _typing

import jag as _jag
from jag import _C

__all__ = ["clip_grad_norm_"]


def clip_grad_norm_(parameters: _typing.Any, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: _typing.Any = None) -> _jag.Tensor:
    """Scale the gradients of ``parameters`` (a tensor or an iterable of
    tensors) so that their norm_type-norm, taken over all of them together,
    is at most max_norm: each is multiplied by max_norm / (total + 1e-6)
    when that is below 1 (torch's clip_coef). Returns the total norm before
    clipping as a 0-d tensor (float32, float64 when every gradient is).
    The norm is computed in double in one C pass. error_if_nonfinite: raise
    RuntimeError, changing nothing, when the norm is NaN or infinite.

    Example::

        >>> w = jag.tensor([1.0, 1.0], requires_grad=True)
        >>> (w * jag.tensor([3.0, 4.0])).sum().backward()  # grad [3, 4], norm 5
        >>> jag.nn.utils.clip_grad_norm_([w], max_norm=1.0)
        tensor(5.0000, dtype=float32, size=[])
        >>> w.grad
        tensor([0.6000, 0.8000], dtype=float32, size=[2])
    """
    if isinstance(parameters, _jag.Tensor):
        parameters = [parameters]
    params = [p for p in parameters]
    norm_type = float(norm_type)
    grads = [g for g in (p.grad for p in params) if g is not None]
    dt = _jag.float64 if grads and all(g.dtype == _jag.float64 for g in grads) else _jag.float32
    if error_if_nonfinite:
        total = _C._clip_grad_norm(params, float("inf"), norm_type)
        if total != total or total in (float("inf"), float("-inf")):
            raise RuntimeError("The total norm of order %s for gradients from `parameters` is non-finite, so it "
                               "cannot be clipped. To disable this error and scale the gradients by the non-finite "
                               "norm anyway, set `error_if_nonfinite=False`" % norm_type)
    total = _C._clip_grad_norm(params, float(max_norm), norm_type)
    return _jag.tensor(total, dtype=dt)
