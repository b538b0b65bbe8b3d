"""Zero-copy exchange of jagged nested tensors with torch.nested's jagged
layout (torch.jagged, "NJT").

Both kinds hold the same inner tensors: packed values, B+1 int64 offsets
and, for a tensor with holes, B lengths. The values cross over by DLPack
(no copy); the offsets and lengths are copied (B+1 and B integers): jag's
are read-only and torch's must be its own int64 tensors.

The ragged dim away from dim 1 (``_ragged_idx`` r > 1, e.g. after
``transpose(1, 2)``) is kept. The two differ only in where the values keep
their ragged rows: torch keeps them at values dim r - 1 (the outer shape
without the batch dim), jag keeps them first and the other outer dims
after them in order. The conversion is a ``movedim`` view of the values,
never a copy.

Gradients: a DLPack capsule carries no autograd history, so each direction
has a bridge. ``from_torch`` of an NJT that requires grad (torch's grad mode
on) gives a jag tensor that requires grad; a jag ``backward`` through it
calls ``torch.autograd.backward`` on the NJT's values with the gradient, so
gradients reach torch's leaves (their ``.grad`` accumulates).
``to_torch`` of a jag tensor that requires grad (jag's grad mode on) gives
an NJT that requires grad; a torch ``backward`` through it calls jag's
``backward`` on the jag values, so gradients reach jag's leaves. A torch
program may thus run a jag op in the middle (from_torch, the jag op,
to_torch) and ``loss.backward()`` reaches torch's leaves: torch's backward
runs jag's, which runs torch's again (a re-entrant backward). Gradients are
accumulated into ``.grad`` of the leaves on the far side:
``torch.autograd.grad`` (which returns gradients instead of accumulating)
does not see through a bridge, and the graph on the far side is freed
after one backward (no ``retain_graph`` across the bridge). Gradients
themselves are copied across, never shared.
"""
from __future__ import annotations

import builtins as _builtins
import typing as _typing

if _typing.TYPE_CHECKING:
    import jag

__all__ = ["from_torch", "to_torch"]


def _torch():
    try:
        import torch  # type: ignore[import-not-found]  # optional: jag does not depend on torch
    except ImportError:  # pragma: no cover - the message is the point
        raise ImportError("jag's torch interop needs PyTorch (import torch failed); install torch") from None
    return torch


def _jag():
    import jag

    return jag


def _int64_copy_to_torch(t):
    """A torch int64 tensor holding a copy of jag integer tensor t (offsets
    or lengths: read-only in jag, so never shared with torch, which would
    ignore DLPack's read-only flag)."""
    torch = _torch()
    return torch.tensor(t.tolist(), dtype=torch.int64)


def _int64_copy_to_jag(t):
    jag = _jag()
    return jag.tensor(t.detach().cpu().tolist(), dtype=jag.int64)


# ---------------------------------------------------------------------------
# the gradient bridges
# ---------------------------------------------------------------------------


def _torch_values_bridge():
    """A torch.autograd.Function (made on first use, so that jag imports
    without torch): forward gives jag values to torch without a copy,
    backward sends torch's gradient into jag's backward."""
    global _TorchValuesFromJag
    if _TorchValuesFromJag is not None:
        return _TorchValuesFromJag
    torch = _torch()

    class TorchValuesFromJag(torch.autograd.Function):
        @staticmethod
        def forward(ctx, anchor, jag_values, torch_values):
            ctx.jag_values = jag_values
            return torch_values.view_as(torch_values)

        @staticmethod
        def backward(ctx, grad):
            jag = _jag()
            g = jag.from_dlpack(grad.detach().contiguous().clone())
            ctx.jag_values.backward(g)
            ctx.jag_values = None
            return None, None, None

    _TorchValuesFromJag = TorchValuesFromJag
    return TorchValuesFromJag


_TorchValuesFromJag = None


def _jag_values_bridge():
    """A jag.autograd.Function: forward gives torch values to jag without a
    copy, backward sends jag's gradient into torch's backward."""
    global _JagValuesFromTorch
    if _JagValuesFromTorch is not None:
        return _JagValuesFromTorch
    jag = _jag()

    class JagValuesFromTorch(jag.autograd.Function):
        @staticmethod
        def forward(ctx, anchor, torch_values, jag_values):
            ctx.torch_values = torch_values
            return jag_values.detach()

        @staticmethod
        def backward(ctx, grad):
            torch = _torch()
            g = torch.from_dlpack(grad.detach().contiguous().clone())
            torch.autograd.backward(ctx.torch_values, g)
            ctx.torch_values = None
            return None, None, None

    _JagValuesFromTorch = JagValuesFromTorch
    return JagValuesFromTorch


_JagValuesFromTorch = None


# ---------------------------------------------------------------------------
# torch -> jag
# ---------------------------------------------------------------------------


def from_torch(njt: _typing.Any) -> jag.Tensor:
    """A jag jagged nested tensor over the memory of ``njt``, a torch nested
    tensor of layout torch.jagged: the values are shared through DLPack (no
    copy: a write through either is seen by the other), the offsets and
    lengths are copied. Holes (``njt.lengths()``) and a ragged dim moved
    away from dim 1 (``njt._ragged_idx``) are kept. When ``njt`` requires
    grad (and torch's grad mode is on), the result requires grad and a jag
    backward through it accumulates gradients into torch's leaves.
    dtypes: float32, float64, int32, int64, bool; CPU tensors only.

    Example::

        >>> import torch
        >>> njt = torch.nested.nested_tensor([torch.tensor([1.0, 2.0]), torch.tensor([3.0])], layout=torch.jagged)
        >>> nt = jag.nested.from_torch(njt)
        >>> nt.offsets().tolist(), [c.tolist() for c in nt.unbind()]
        ([0, 2, 3], [[1.0, 2.0], [3.0]])
        >>> njt.values()[0] = 10.0  # the values are shared
        >>> nt.values()
        tensor([10.0000, 2.0000, 3.0000], dtype=float32, size=[3])
    """
    torch = _torch()
    jag = _jag()
    if not isinstance(njt, torch.Tensor) or not njt.is_nested:
        raise TypeError("jag.nested.from_torch: argument 'njt' must be a torch nested tensor, got %s"
                        % (type(njt).__name__ if not isinstance(njt, torch.Tensor) else "a dense torch.Tensor"))
    if njt.layout is not torch.jagged:
        raise ValueError("jag.nested.from_torch: argument 'njt' must have layout torch.jagged, got %s; convert "
                         "it with torch.nested.nested_tensor(list(njt.unbind()), layout=torch.jagged)" % (njt.layout,))
    if njt.device.type != "cpu":
        raise ValueError("jag.nested.from_torch: jag tensors live on the CPU; argument 'njt' is on %s (use "
                         "njt.cpu())" % (njt.device,))
    r = njt._ragged_idx
    tv = njt.values()  # torch: the ragged rows at values dim r - 1
    offsets = _int64_copy_to_jag(njt.offsets())
    lengths = njt.lengths()
    lengths = None if lengths is None else _int64_copy_to_jag(lengths)
    # jag: the ragged rows first, the other outer dims after them in order
    rows_first = tv.movedim(r - 1, 0)
    shared = jag.from_dlpack(rows_first.detach(), copy=False)
    if torch.is_grad_enabled() and njt.requires_grad and tv.requires_grad:
        anchor = jag.zeros((0,), requires_grad=True)
        values = _jag_values_bridge().apply(anchor, rows_first, shared)
    else:
        values = shared
    nt = jag.nested.nested_tensor_from_jagged(values, offsets, lengths)
    for d in range(1, r):  # adjacent swaps keep the other dims in order
        nt = nt.transpose(d, d + 1)
    return nt


# ---------------------------------------------------------------------------
# jag -> torch
# ---------------------------------------------------------------------------


def to_torch(nt: jag.Tensor, copy: _typing.Optional[bool] = None) -> _typing.Any:
    """A torch nested tensor of layout torch.jagged (NJT) over the memory of
    ``nt``, a jag jagged nested tensor: the values are shared through DLPack
    (no copy: a write through either is seen by the other), the offsets and
    lengths are copied into torch int64 tensors. Holes (``nt.lengths()``)
    and a moved ragged dim (``nt._ragged_idx``) are kept.

    copy: None (default) shares the values unless jag marks them read-only
    (``nt.values().is_read_only()``, e.g. loaded with ``jag.load(mmap=True)``):
    torch has no read-only tensors and ignores DLPack's read-only flag, so
    such values are copied and torch gets a writable copy; False refuses
    read-only values with a BufferError instead; True always copies.
    When ``nt`` requires grad (and jag's grad mode is on), the result
    requires grad and a torch backward through it accumulates gradients into
    jag's leaves.

    Example::

        >>> import torch
        >>> nt = jag.nested.nested_tensor([jag.tensor([1.0, 2.0]), jag.tensor([3.0])], layout=jag.jagged)
        >>> njt = nt.to_torch()  # this function, as a Tensor method
        >>> njt.layout, njt.offsets().tolist(), [c.tolist() for c in njt.unbind()]
        (torch.jagged, [0, 2, 3], [[1.0, 2.0], [3.0]])
        >>> njt.values()[2] = 30.0  # the values are shared
        >>> nt.values()
        tensor([1.0000, 2.0000, 30.0000], dtype=float32, size=[3])
    """
    jag = _jag()
    torch = _torch()
    if not isinstance(nt, jag.Tensor) or not nt.is_nested:
        raise TypeError("to_torch: argument 'nt' must be a jag nested tensor, got %s"
                        % (type(nt).__name__ if not isinstance(nt, jag.Tensor) else "a dense jag.Tensor"))
    if nt.layout is not jag.jagged:
        raise ValueError("to_torch: argument 'nt' must have layout jag.jagged (torch's NJT), got %s; convert it "
                         "with nt.to_layout(jag.jagged)" % (nt.layout,))
    if copy not in (None, True, False):
        raise TypeError("to_torch: argument 'copy' must be None, True or False, got %r" % (copy,))
    r = nt._ragged_idx
    jv = nt.values()  # as torch: the ragged rows at values dim r - 1 (differentiable)
    plain = jv.detach()
    read_only = plain.is_read_only()
    if read_only and copy is False:
        raise BufferError("to_torch: the values are read-only in jag (is_read_only()) and torch cannot be told so; "
                          "pass copy=None or copy=True for a writable copy")
    if copy or read_only:
        plain = plain.clone()
    tv = torch.from_dlpack(plain)
    if jag.is_grad_enabled() and jv.requires_grad:
        anchor = torch.zeros(0, requires_grad=True)
        tv = _torch_values_bridge().apply(anchor, jv, tv)
    lengths = nt.lengths()
    offsets = nt.offsets()
    seq = lengths.tolist() if lengths is not None else [b - a for a, b in zip(offsets.tolist()[:-1],
                                                                              offsets.tolist()[1:])]
    return torch.nested.nested_tensor_from_jagged(
        tv, _int64_copy_to_torch(offsets), None if lengths is None else _int64_copy_to_torch(lengths),
        jagged_dim=r, min_seqlen=_builtins.min(seq, default=0), max_seqlen=_builtins.max(seq, default=0))
