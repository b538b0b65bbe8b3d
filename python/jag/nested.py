"""jag.nested: nested (ragged) tensors with torch.nested's names.

A nested tensor is a batch of B components that may differ in size. Layouts:
jag.jagged (shape (B, j0, D...), stored as packed values + offsets) and
jag.strided (components may differ in every dim). The default layout is
jag.strided, as in torch.nested.nested_tensor.
"""
from __future__ import annotations

import builtins as _builtins
import typing as _typing

from . import _C
from ._torch_interop import from_torch

if _typing.TYPE_CHECKING:
    import jag

__all__ = ["from_torch", "nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "to_padded_tensor",
           "nested_tensor_from_padded", "narrow", "masked_select"]


def _jag():
    import jag

    return jag


def _component(x, dtype):
    jag = _jag()
    if isinstance(x, jag.Tensor):
        if x.is_nested:
            raise TypeError("nested_tensor: components must be plain tensors, got a nested tensor")
        return x if dtype is None or x.dtype is dtype else x.to(dtype)
    return jag.tensor(x, dtype=dtype)


def nested_tensor(tensor_list: _typing.Sequence[_typing.Any], dtype: _typing.Any = None, layout: _typing.Any = None,
                  device: _typing.Any = None, requires_grad: bool = False, pin_memory: bool = False) -> jag.Tensor:
    """A nested tensor holding copies of the components (tensors, arrays or
    lists), as torch.nested.nested_tensor.

    Args:
        tensor_list: the components, a non-empty list.
        dtype: the dtype of every component (default: each one's own).
        layout: jag.strided (default, as torch) or jag.jagged (every
            component the same size after dim 0; shape (B, j, D...)).
        device: "cpu" (or None).
        requires_grad: make the result a leaf that requires grad.

    Example::

        >>> a = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> b = jag.tensor([[5.0, 6.0]])
        >>> nt = jag.nested.nested_tensor([a, b], layout=jag.jagged)
        >>> nt.is_nested, nt.dim(), [c.shape for c in nt.unbind()]
        (True, 3, [(2, 2), (1, 2)])
        >>> nt.values().shape, nt.offsets().tolist()
        ((3, 2), [0, 2, 3])
    """
    jag = _jag()
    jag._check_device("nested_tensor", device)
    if pin_memory:
        raise ValueError("nested_tensor: pin_memory=True needs an accelerator; jag tensors live on the CPU")
    layout = jag.strided if layout is None else layout
    if layout is not jag.jagged and layout is not jag.strided:
        raise ValueError("nested_tensor: layout must be jag.jagged or jag.strided, got %r" % (layout,))
    if isinstance(tensor_list, jag.Tensor) or not isinstance(tensor_list, (list, tuple)):
        raise TypeError("nested_tensor: expected a list of tensors, got %s" % type(tensor_list).__name__)
    dt = jag._to_dtype(dtype)
    items = [_component(x, dt) for x in tensor_list]
    if not items:
        raise ValueError("nested_tensor: expected at least one component")
    with jag.no_grad():
        nt = _C._nested_from_list([i.detach() for i in items], layout.code)
    if requires_grad:
        nt.requires_grad = True
    return nt


def as_nested_tensor(ts: _typing.Any, dtype: _typing.Any = None, device: _typing.Any = None,
                     layout: _typing.Any = None) -> jag.Tensor:
    """As torch.nested.as_nested_tensor: a dense (B, L, D...) tensor becomes a
    jagged nested tensor viewing it (no copy; differentiable, every item of
    length L) with layout=jag.jagged, or a strided copy; a list of tensors is
    copied as nested_tensor does.

    Example::

        >>> x = jag.arange(12.0).reshape(2, 3, 2)
        >>> nt = jag.nested.as_nested_tensor(x, layout=jag.jagged)
        >>> nt.offsets().tolist(), nt.values().shape
        ([0, 3, 6], (6, 2))
    """
    jag = _jag()
    jag._check_device("as_nested_tensor", device)
    if isinstance(ts, jag.Tensor) and not ts.is_nested:
        if ts.ndim < 2:
            raise ValueError("as_nested_tensor: a tensor needs at least 2 dims (B, L, ...), got %d" % ts.ndim)
        layout = jag.strided if layout is None else layout
        dt = jag._to_dtype(dtype)
        x = ts if dt is None or dt is ts.dtype else ts.to(dt)
        if layout is jag.jagged:
            B, L = x.shape[0], x.shape[1]
            values = x.reshape((B * L,) + tuple(x.shape[2:]))
            return nested_tensor_from_jagged(values, [i * L for i in range(B + 1)])
        return nested_tensor(list(x.unbind()), layout=layout)
    if isinstance(ts, (list, tuple)) and layout is jag.jagged and jag.is_grad_enabled() and \
            _builtins.any(isinstance(t, jag.Tensor) and t.requires_grad for t in ts):
        return _jagged_keeping_graph(ts, dtype)
    return nested_tensor(ts, dtype=dtype, layout=layout)


def _jagged_keeping_graph(ts, dtype):
    """A jagged nested tensor whose values are the components concatenated
    with differentiable ops, so gradients flow back to the listed tensors."""
    jag = _jag()
    dt = jag._to_dtype(dtype)
    items = [_component(x, dt) for x in ts]
    if not items:
        raise ValueError("as_nested_tensor: expected at least one component")
    trailing = tuple(items[0].shape[1:])
    for i, t in enumerate(items):
        if t.ndim < 1 or tuple(t.shape[1:]) != trailing:
            raise ValueError("as_nested_tensor: component %d has shape %s; with layout=jag.jagged every component "
                             "must be (L_i%s)" % (i, tuple(t.shape), "".join(", %d" % d for d in trailing)))
    offsets = [0]
    for t in items:
        offsets.append(offsets[-1] + t.shape[0])
    return nested_tensor_from_jagged(jag.cat(items, 0), offsets)


def _int64(x, name):
    jag = _jag()
    if isinstance(x, jag.Tensor):
        return x
    t = jag.tensor(x)
    if t.dtype.is_floating_point or t.dtype is jag.bool:
        raise TypeError("%s must hold integers, got %s" % (name, t.dtype.name))
    return t.to(jag.int64)


def nested_tensor_from_jagged(values: jag.Tensor, offsets: _typing.Any = None, lengths: _typing.Any = None,
                              jagged_dim: _typing.Optional[int] = None, min_seqlen: _typing.Any = None,
                              max_seqlen: _typing.Any = None) -> jag.Tensor:
    """A jagged nested tensor viewing ``values`` (no copy): component i is
    values[offsets[i]:offsets[i+1]] (or offsets[i] + lengths[i] with
    lengths). Differentiable with respect to values. ``min_seqlen`` and
    ``max_seqlen`` (torch's cached bounds) are accepted and checked against
    the data: jag computes them from the offsets, so a value that is not the
    shortest (longest) component's length is an error rather than a stale
    cache.

    Example::

        >>> nt = jag.nested.nested_tensor_from_jagged(jag.arange(5.0), jag.tensor([0, 2, 5]))
        >>> [c.tolist() for c in nt.unbind()]
        [[0.0, 1.0], [2.0, 3.0, 4.0]]
    """
    jag = _jag()
    if offsets is None:
        raise ValueError("nested_tensor_from_jagged: offsets are required")
    if jagged_dim not in (None, 1):
        raise NotImplementedError("nested_tensor_from_jagged: only jagged_dim=1 is supported")
    if not isinstance(values, jag.Tensor):
        raise TypeError("nested_tensor_from_jagged: values must be a jag.Tensor")
    offsets = _int64(offsets, "offsets")
    lengths = None if lengths is None else _int64(lengths, "lengths")
    nt = jag._op("nested_from_jagged", values, offsets, lengths)
    if min_seqlen is not None or max_seqlen is not None:
        seq = _component_lengths(nt)
        for name, given, true in (("min_seqlen", min_seqlen, _builtins.min(seq, default=0)),
                                  ("max_seqlen", max_seqlen, _builtins.max(seq, default=0))):
            if given is None:
                continue
            given = _builtins.int(given.item() if isinstance(given, jag.Tensor) else given)
            if given != true:
                raise ValueError("nested_tensor_from_jagged: %s is %d but the components' lengths give %d"
                                 % (name, given, true))
    return nt


def to_padded_tensor(input: jag.Tensor, padding: float,
                     output_size: _typing.Optional[_typing.Sequence[int]] = None) -> jag.Tensor:
    """A dense (B, max sizes...) tensor: every component copied in, the rest
    filled with ``padding``, as torch.nested.to_padded_tensor.
    ``output_size``: a larger shape to pad to. Differentiable.

    Example::

        >>> nt = jag.nested.nested_tensor([jag.tensor([[1.0, 2.0], [3.0, 4.0]]), jag.tensor([[5.0, 6.0]])],
        ...                               layout=jag.jagged)
        >>> jag.nested.to_padded_tensor(nt, 0.0)
        tensor([[[1.0000, 2.0000],
                 [3.0000, 4.0000]],
                [[5.0000, 6.0000],
                 [0.0000, 0.0000]]], dtype=float32, size=[2, 2, 2])
    """
    jag = _jag()
    if not isinstance(input, jag.Tensor) or not input.is_nested:
        raise TypeError("to_padded_tensor: expected a nested jag.Tensor")
    size = [] if output_size is None else [_builtins.int(s) for s in output_size]
    return jag._op("to_padded", input, _builtins.float(padding), size)


def nested_tensor_from_padded(padded: jag.Tensor, lengths: _typing.Any) -> jag.Tensor:
    """A jagged nested tensor keeping the first lengths[i] rows of padded[i]
    (a copy). Differentiable with respect to padded.

    Example::

        >>> padded = jag.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]])
        >>> [c.tolist() for c in jag.nested.nested_tensor_from_padded(padded, [2, 1]).unbind()]
        [[1.0, 2.0], [3.0]]
    """
    jag = _jag()
    if not isinstance(padded, jag.Tensor):
        raise TypeError("nested_tensor_from_padded: padded must be a jag.Tensor")
    return jag._op("from_padded", padded, _int64(lengths, "lengths"))


def narrow(tensor: jag.Tensor, dim: int, start: _typing.Any, length: _typing.Any,
           layout: _typing.Any = None) -> jag.Tensor:
    """A jagged view of a dense (B, L, D...) tensor keeping, in item i, the
    rows start[i] : start[i] + length[i] of dim 1 (torch.nested.narrow with
    layout=jag.jagged): no copy, the kept rows are the values and the rest
    are holes (offsets plus lengths). start and length: ints or B-entry
    integer tensors/lists.

    Example::

        >>> x = jag.arange(12.0).reshape(2, 3, 2)
        >>> nt = jag.nested.narrow(x, 1, jag.tensor([0, 1]), jag.tensor([2, 1]), layout=jag.jagged)
        >>> [c.tolist() for c in nt.unbind()]
        [[[0.0, 1.0], [2.0, 3.0]], [[8.0, 9.0]]]
        >>> nt.offsets().tolist(), nt.lengths().tolist()  # views of x: offsets into its rows, with holes
        ([0, 4, 6], [2, 1])
    """
    jag = _jag()
    layout = jag.jagged if layout is None else layout
    if layout is not jag.jagged:
        raise NotImplementedError("jag.nested.narrow: only layout=jag.jagged is supported")
    if not isinstance(tensor, jag.Tensor) or tensor.is_nested:
        raise TypeError("jag.nested.narrow: expected a dense jag.Tensor")
    if tensor.ndim < 2:
        raise ValueError("jag.nested.narrow: expected at least 2 dims (B, L, ...), got %d" % tensor.ndim)
    if dim not in (1, 1 - tensor.ndim):
        raise NotImplementedError("jag.nested.narrow: only dim=1 (the dim that becomes ragged) is supported")
    B, L = tensor.shape[0], tensor.shape[1]

    def per_item(x, name):
        if isinstance(x, jag.Tensor):
            x = x.tolist()
        if isinstance(x, int):
            return [x] * B
        x = [int(v) for v in x]
        if len(x) != B:
            raise ValueError("jag.nested.narrow: %s has %d entries for a batch of %d" % (name, len(x), B))
        return x

    starts, lengths = per_item(start, "start"), per_item(length, "length")
    for i, (a, n) in enumerate(zip(starts, lengths)):
        if a < 0 or n < 0 or a + n > L:
            raise ValueError("jag.nested.narrow: item %d: start %d and length %d do not fit in %d rows" % (i, a, n, L))
    values = tensor.contiguous().reshape((B * L,) + tuple(tensor.shape[2:]))
    offsets = [i * L + a for i, a in enumerate(starts)] + [B * L]
    return nested_tensor_from_jagged(values, offsets, lengths)


def masked_select(tensor: jag.Tensor, mask: jag.Tensor) -> jag.Tensor:
    """As torch.nested.masked_select: a jagged nested tensor whose component
    i holds the elements of row i of ``tensor`` (its last dim; the leading
    dims are flattened into the batch) where ``mask`` is True, in order.
    ``mask`` broadcasts to ``tensor``'s shape. Differentiable with respect
    to tensor.

    Example::

        >>> x = jag.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        >>> mask = jag.tensor([[True, False, True], [False, False, True]])
        >>> [c.tolist() for c in jag.nested.masked_select(x, mask).unbind()]
        [[1.0, 3.0], [6.0]]
    """
    jag = _jag()
    if not isinstance(tensor, jag.Tensor) or tensor.is_nested:
        raise TypeError("jag.nested.masked_select: argument 'tensor' must be a dense jag.Tensor")
    if not isinstance(mask, jag.Tensor) or mask.is_nested or mask.dtype is not jag.bool:
        raise TypeError("jag.nested.masked_select: argument 'mask' must be a dense bool jag.Tensor")
    if tensor.ndim < 1:
        raise ValueError("jag.nested.masked_select: argument 'tensor' must have at least 1 dim, got a 0-d tensor")
    import numpy as np

    try:
        m = np.broadcast_to(mask.numpy(), tuple(tensor.shape))
    except ValueError:
        raise ValueError("jag.nested.masked_select: mask of shape %s does not broadcast to tensor's shape %s"
                         % (tuple(mask.shape), tuple(tensor.shape))) from None
    rows = m.reshape(-1, tensor.shape[-1]) if tensor.shape[-1] else m.reshape(-1, 0)
    counts = rows.sum(axis=1).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    picked = jag.tensor(np.flatnonzero(m).astype(np.int64))
    values = jag.index_select(tensor.reshape(-1), 0, picked)
    return nested_tensor_from_jagged(values, jag.tensor(offsets))


# ---------------------------------------------------------------------------
# torch's tensor habits on nested tensors, composed of differentiable ops
# ---------------------------------------------------------------------------


def _component_lengths(nt):
    """Each component's length along the ragged dim (a jagged tensor), as
    Python ints."""
    lengths = nt.lengths()
    if lengths is not None:
        return lengths.tolist()
    o = nt.offsets().tolist()
    return [o[i + 1] - o[i] for i in range(len(o) - 1)]


def _is_jagged(x):
    jag = _jag()
    return isinstance(x, jag.Tensor) and x.is_nested and x.layout is jag.jagged


def _unbind_jagged(nt):
    """The components of a jagged tensor as views of its values() (holes
    skipped, a moved ragged dim put back in place), so that gradients of
    the components flow to the nested tensor."""
    v = _jag()._op("values", nt)  # the ragged rows first, whatever the ragged dim
    r = nt._ragged_idx
    out = []
    for o, n in zip(nt.offsets().tolist(), _component_lengths(nt)):
        c = v.narrow(0, o, n)
        if r > 1:  # values hold the ragged rows first; the component has them at dim r - 1
            c = c.permute(*(list(range(1, r)) + [0] + list(range(r, c.ndim))))
        out.append(c)
    return tuple(out)


_REDUCE_ALL_PADDING = {"sum": 0.0, "prod": 1.0, "amax": -float("inf"), "amin": float("inf"),
                       "max": -float("inf"), "min": float("inf")}


def _reduce_all(name, nt):
    """A reduction over every dim of a nested tensor: a 0-d dense tensor over
    its valid elements (holes excluded), differentiable. sum and mean of a
    jagged tensor reduce each component along the ragged dim first (no
    padding); the others reduce the padded tensor, padded with the
    reduction's identity, so ties split the gradient as torch's dense rule."""
    jag = _jag()
    n_valid = _builtins.sum(_component_numels(nt))
    if name in ("amax", "amin", "max", "min") and n_valid == 0:
        raise ValueError("jag.%s: the nested tensor has no elements; a reduction over every dim has no identity "
                         "(as torch)" % name)
    if name in ("sum", "mean") and nt.layout is jag.jagged and n_valid > 0:
        per_component = jag._op("sum", nt, list(range(1, nt.ndim)), False)
        total = jag._op("sum", per_component, [], False)
    elif name == "mean":
        total = _reduce_all("sum", nt)
    elif not nt.dtype.is_floating_point:
        flat = [c.reshape(-1) for c in nt.unbind()]
        return jag._op(name, jag.cat(flat, 0), [], False)
    else:
        total = jag._op(name, to_padded_tensor(nt, _REDUCE_ALL_PADDING[name]), [], False)
    if name == "mean":
        return total / _builtins.float(n_valid) if n_valid else total * _builtins.float("nan")
    return total


def _component_numels(nt):
    jag = _jag()
    if nt.layout is jag.jagged:
        per_row = 1
        for k, s in enumerate(nt._sizes):
            if k != 0 and s >= 0:
                per_row *= s
        return [n * per_row for n in _component_lengths(nt)]
    return [c.numel() for c in nt.unbind()]


def _select_ragged(nt, index):
    """nt[:, index] of a jagged (B, j, D...) tensor: row ``index`` of every
    component (negative counts from each component's end), a dense
    (B, D...) tensor gathered from the values; differentiable."""
    jag = _jag()
    if nt._ragged_idx != 1:
        raise NotImplementedError("select: indexing the ragged dim is supported with the ragged dim at dim 1, got %d"
                                  % nt._ragged_idx)
    rows = []
    for b, (o, n) in enumerate(zip(nt.offsets().tolist(), _component_lengths(nt))):
        k = index + n if index < 0 else index
        if not 0 <= k < n:
            raise IndexError("select: index %d is out of range for component %d of length %d along the ragged dim"
                             % (index, b, n))
        rows.append(o + k)
    return jag.index_select(nt.values(), 0, jag.tensor(rows, dtype=jag.int64))


def _outer_dim(nt, dim, name):
    n = nt.ndim
    if not -n <= dim < n:
        raise IndexError("%s: dim %d is out of range for a nested tensor with %d dims" % (name, dim, n))
    return dim + n if dim < 0 else dim


def _check_dense_dim(nt, d, name):
    if d == 0:
        raise NotImplementedError("%s: not supported along the batch dim (0) of a nested tensor" % name)
    if nt._sizes[d] < 0:
        raise NotImplementedError("%s: not supported along the ragged dim (%d) of a nested tensor" % (name, d))


def _view_keeping_ragged(nt, sizes, name):
    """nt viewed with new sizes for the dims after the ragged one (a jagged
    tensor with its ragged dim at 1): one differentiable view of the
    values."""
    jag = _jag()
    if nt._ragged_idx != 1:
        raise NotImplementedError("%s: a jagged tensor whose ragged dim was moved (to dim %d) is not supported; "
                                  "transpose it back first" % (name, nt._ragged_idx))
    return jag._op("view", nt, [nt._sizes[0], -1] + [_builtins.int(s) for s in sizes])


def _select_dense_dim(nt, d, index):
    """select(d, index) of a jagged tensor along a dim after the ragged one:
    index_select of one entry, then a view dropping the dim (both
    differentiable on the values)."""
    jag = _jag()
    size = nt._sizes[d]
    if not -size <= index < size:
        raise IndexError("select: index %d is out of range for dim %d of size %d" % (index, d, size))
    picked = jag._op("index_select", nt, d, jag.tensor([index % size], dtype=jag.int64))
    return _view_keeping_ragged(picked, [s for k, s in enumerate(nt._sizes) if k not in (0, 1, d)], "select")


def _squeeze(nt, d):
    if nt._sizes[d] != 1:
        return nt
    return _view_keeping_ragged(nt, [s for k, s in enumerate(nt._sizes) if k not in (0, 1, d)], "squeeze")


def _flatten(nt, start, end):
    _check_dense_dim(nt, start, "flatten")
    for d in range(start, end + 1):
        _check_dense_dim(nt, d, "flatten")
    merged = 1
    for d in range(start, end + 1):
        merged *= nt._sizes[d]
    sizes = list(nt._sizes[2:start]) + [merged] + list(nt._sizes[end + 1:])
    return _view_keeping_ragged(nt, sizes, "flatten")


def _permute(nt, dims):
    """permute of a nested tensor keeping the batch dim first, as a chain of
    transposes (each differentiable; a transpose of the ragged dim moves
    it)."""
    n = nt.ndim
    perm = [_outer_dim(nt, _builtins.int(d), "permute") for d in dims]
    if sorted(perm) != list(range(n)):
        raise ValueError("permute: dims %s are not a permutation of the %d dims" % (list(dims), n))
    if perm[0] != 0:
        raise NotImplementedError("permute: the batch dim (0) of a nested tensor must stay first")
    out, order = nt, list(range(n))  # order[k]: the original dim now at position k
    for k in range(1, n):
        j = order.index(perm[k])
        if j != k:
            out = out.transpose(k, j)
            order[k], order[j] = order[j], order[k]
    return out


def _split_sizes(size, split_size_or_sections, name):
    if isinstance(split_size_or_sections, (list, tuple)):
        sections = [_builtins.int(s) for s in split_size_or_sections]
        if _builtins.sum(sections) != size or _builtins.any(s < 0 for s in sections):
            raise ValueError("%s: split sizes %s do not add up to the dim's size %d" % (name, sections, size))
        return sections
    step = _builtins.int(split_size_or_sections)
    if step <= 0 and not (step == 0 and size == 0):
        raise ValueError("%s: split_size must be positive, got %d" % (name, step))
    if size == 0:
        return [0]
    return [_builtins.min(step, size - a) for a in range(0, size, step)]
