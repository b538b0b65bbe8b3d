"""jag.nested: nested (ragged) tensors with torch.nested's names.

A nested tensor is a batch of B components that may differ in size. Layouts:
jag.jagged (shape (B, j0, D...), stored as packed values + offsets) and
jag.strided (components may differ in every dim). The default layout is
jag.strided, as in torch.nested.nested_tensor.
"""
import builtins as _builtins

from . import _C

__all__ = ["nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "to_padded_tensor",
           "nested_tensor_from_padded", "narrow"]


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


def nested_tensor(tensor_list, dtype=None, layout=None, requires_grad=False):
    """A nested tensor holding copies of the components (tensors, arrays or
    lists). layout: jag.strided (default, as torch) or jag.jagged (every
    component the same size after dim 0)."""
    jag = _jag()
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


def as_nested_tensor(ts, dtype=None, layout=None):
    """As torch.nested.as_nested_tensor: a dense (B, L, D...) tensor becomes a
    jagged nested tensor viewing it (no copy; differentiable, every item of
    length L) with layout=jag.jagged, or a strided copy; a list of tensors is
    copied as nested_tensor does."""
    jag = _jag()
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
    return nested_tensor(ts, dtype=dtype, layout=layout)


def _int64(x, name):
    jag = _jag()
    if isinstance(x, jag.Tensor):
        return x
    t = jag.tensor(x)
    if t.dtype.is_floating_point or t.dtype is jag.bool:
        raise TypeError("%s must hold integers, got %s" % (name, t.dtype.name))
    return t.to(jag.int64)


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None):
    """A jagged nested tensor viewing ``values`` (no copy): component i is
    values[offsets[i]:offsets[i+1]] (or offsets[i] + lengths[i] with
    lengths). Differentiable with respect to values."""
    jag = _jag()
    if offsets is None:
        raise ValueError("nested_tensor_from_jagged: offsets are required")
    if jagged_dim not in (None, 1):
        raise NotImplementedError("nested_tensor_from_jagged: only jagged_dim=1 is supported")
    if not isinstance(values, jag.Tensor):
        raise TypeError("nested_tensor_from_jagged: values must be a jag.Tensor")
    offsets = _int64(offsets, "offsets")
    lengths = None if lengths is None else _int64(lengths, "lengths")
    return jag._op("nested_from_jagged", values, offsets, lengths)


def to_padded_tensor(input, padding, output_size=None):
    """A dense (B, max sizes...) tensor: every component copied in, the rest
    filled with ``padding``. Differentiable."""
    jag = _jag()
    if not isinstance(input, jag.Tensor) or not input.is_nested:
        raise TypeError("to_padded_tensor: expected a nested jag.Tensor")
    size = [] if output_size is None else [_builtins.int(s) for s in output_size]
    return jag._op("to_padded", input, _builtins.float(padding), size)


def nested_tensor_from_padded(padded, lengths):
    """A jagged nested tensor keeping the first lengths[i] rows of padded[i]
    (a copy). Differentiable with respect to padded."""
    jag = _jag()
    if not isinstance(padded, jag.Tensor):
        raise TypeError("nested_tensor_from_padded: padded must be a jag.Tensor")
    return jag._op("from_padded", padded, _int64(lengths, "lengths"))


def narrow(tensor, dim, start, length, layout=None):
    """A jagged view of a dense (B, L, D...) tensor keeping, in item i, the
    rows start[i] : start[i] + length[i] of dim 1 (torch.nested.narrow with
    layout=jag.jagged): no copy, the kept rows are the values and the rest
    are holes (offsets plus lengths). start and length: ints or B-entry
    integer tensors/lists."""
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
