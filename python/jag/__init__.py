"""jag: dense and nested (ragged) tensors, autograd, with torch-like names.

A thin layer over the C library libjag. Every op goes through one generic
entry point, ``jag._C._op(name, *args)``, which boxes Python arguments into
``jag_value``s and calls ``jag_op_call``; the functions below only choose
argument order and defaults as torch does. (The operators + - * / @ on
tensors and ints/floats call ``jag_op_call`` from TensorBase's C slots
directly, the same op with the same arguments; other operands come back to
``_binary_fallback`` here.)

Example::

    >>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (x * 2 + 1).sum()
    tensor(24.0000, dtype=float32, size=[])
"""
from __future__ import annotations

import builtins as _builtins
import numbers as _numbers
import operator as _operator
import typing as _typing

from . import _C

if _typing.TYPE_CHECKING:
    # the functions and Tensor methods made from the op table below, as type
    # checkers see them (stubs written by scripts/gen_stubs.py)
    from ._generated_ops import *  # noqa: F401,F403
    from ._generated_ops import _GeneratedTensorMethods
else:
    _GeneratedTensorMethods = object

__version__ = _C.VERSION

# ---------------------------------------------------------------------------
# dtypes and layouts
# ---------------------------------------------------------------------------


class dtype:
    """A jag dtype (jag.float32, ...). Compares by identity.

    Example::

        >>> jag.tensor([1, 2]).dtype
        jag.int64
        >>> jag.tensor([1.0]).dtype is jag.float32
        True
        >>> jag.float64, jag.int64, jag.bool
        (jag.float64, jag.int64, jag.bool)
    """

    __slots__ = ("code", "name", "_np", "is_floating_point")

    def __init__(self, code: _builtins.int, name: str, np_name: _typing.Optional[str], is_float: _builtins.bool) -> None:
        self.code = code
        self.name = name
        self._np = np_name
        self.is_floating_point = is_float

    def __repr__(self):
        return "jag." + self.name

    def __reduce__(self):
        return self.name


float32 = dtype(_C.FLOAT32, "float32", "float32", True)
float64 = dtype(_C.FLOAT64, "float64", "float64", True)
int32 = dtype(_C.INT32, "int32", "int32", False)
int64 = dtype(_C.INT64, "int64", "int64", False)
bool = dtype(_C.BOOL, "bool", "bool", False)  # noqa: A001 (torch's name)
float16 = dtype(_C.FLOAT16, "float16", "float16", True)
bfloat16 = dtype(_C.BFLOAT16, "bfloat16", None, True)  # numpy has no bfloat16
float = float32  # noqa: A001
double = float64
half = float16
int = int32  # noqa: A001
long = int64

_DTYPES = {d.code: d for d in (float32, float64, int32, int64, bool, float16, bfloat16)}
_Dtype = dtype  # the class, for annotations inside Tensor (whose property dtype hides it)
_NP_TO_DTYPE = {"float32": float32, "float64": float64, "int32": int32, "int64": int64, "bool": bool,
                "float16": float16}


class layout:
    """A tensor layout: ``jag.strided`` (dense tensors, and nested tensors
    whose components may differ in every dim) or ``jag.jagged`` (nested
    tensors stored as packed values plus offsets), as torch.layout.

    Example::

        >>> jag.ones(2).layout
        jag.strided
        >>> jag.nested.nested_tensor([[1.0], [2.0, 3.0]], layout=jag.jagged).layout
        jag.jagged
    """

    __slots__ = ("code", "name")

    def __init__(self, code: _builtins.int, name: str) -> None:
        self.code = code
        self.name = name

    def __repr__(self):
        return "jag." + self.name


strided = layout(_C.STRIDED, "strided")
jagged = layout(_C.JAGGED, "jagged")
_dense = layout(_C.DENSE, "dense")
_LAYOUTS = {_C.STRIDED: strided, _C.JAGGED: jagged, _C.DENSE: _dense}
_Layout = layout  # the class, for annotations inside Tensor (whose property layout hides it)


class RaggedDim:
    """A ragged dim in a nested tensor's shape; prints as ``j<id>`` (torch's
    nested int). Two shapes compare equal when their ragged ids match.

    Example::

        >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
        >>> nt.shape
        (2, j...)
        >>> isinstance(nt.shape[1], jag.RaggedDim)
        True
    """

    __slots__ = ("id",)

    def __init__(self, id: _builtins.int) -> None:
        self.id = id

    def __repr__(self):
        return "j%d" % self.id

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, RaggedDim) and other.id == self.id

    def __hash__(self):
        return hash(("j", self.id))


def _to_dtype(d):
    if d is None or isinstance(d, dtype):
        return d
    if d is _builtins.float:
        return float32
    if d is _builtins.int:
        return int64
    if d is _builtins.bool:
        return bool
    import numpy as np

    try:
        name = np.dtype(d).name
    except TypeError:
        raise TypeError("not a dtype: %r" % (d,)) from None
    if name not in _NP_TO_DTYPE:
        raise TypeError("jag has no dtype %s" % name)
    return _NP_TO_DTYPE[name]


def _shape_arg(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:  # plain ints, the common case, as they are
        if type(s) is not _builtins.int:
            break
    else:
        return tuple(size)
    # a ragged dim (x.shape[1] of a nested x) is -1: "keep it ragged"
    return tuple(-1 if isinstance(s, RaggedDim) else s for s in size)


def get_default_dtype() -> dtype:
    """The dtype of floating-point tensors made from Python floats: jag.float32 (fixed).

    Example::

        >>> jag.get_default_dtype()
        jag.float32
        >>> jag.tensor([0.5]).dtype
        jag.float32
    """
    return float32


def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype to which both ``a`` and ``b`` convert, as torch.promote_types.

    Example::

        >>> jag.promote_types(jag.int64, jag.float32)
        jag.float32
    """
    return _DTYPES[_C._promote_types(_to_dtype(a).code, _to_dtype(b).code)]


def manual_seed(seed: _builtins.int) -> None:
    """Seed this thread's default random generator (rand, randn, dropout, init).

    Example::

        >>> jag.manual_seed(0)
        >>> a = jag.rand(3)
        >>> jag.manual_seed(0)
        >>> jag.allclose(a, jag.rand(3))  # the same numbers again
        True
    """
    _C._manual_seed(seed)


def get_num_threads() -> _builtins.int:
    """The number of threads jag's kernels (and OpenBLAS) use, as
    torch.get_num_threads.

    Example::

        >>> jag.get_num_threads() >= 1
        True
    """
    return _C._get_num_threads()


def set_num_threads(n: _builtins.int) -> None:
    """Use n threads in jag's kernels and OpenBLAS (OpenMP), as
    torch.set_num_threads: n must be a positive int.

    Example::

        >>> n = jag.get_num_threads()
        >>> jag.set_num_threads(1)
        >>> jag.get_num_threads()
        1
        >>> jag.set_num_threads(n)  # restore
    """
    n = _operator_index(n)
    if n <= 0:
        raise ValueError("set_num_threads: expected a positive number of threads, got %d" % n)
    _C._set_num_threads(n)


def _check_device(name, device):
    """jag tensors live on the CPU: device may be None, "cpu", "cpu:0" or an
    object that prints so (a torch.device); anything else is an error."""
    if device is None:
        return
    text = str(device)
    if text not in ("cpu", "cpu:0"):
        raise ValueError("%s: jag tensors live on the CPU; argument 'device' must be 'cpu', got %r" % (name, device))


# ---------------------------------------------------------------------------
# Tensor
# ---------------------------------------------------------------------------

_op = _C._op


def _op_function(name: str, unary: bool = False) -> _typing.Callable[[_typing.Any], _typing.Any]:
    """Decorator for a function whose body is only ``return _op(name, <its
    parameters, in order>)``: the function becomes a jag._C.OpFunction,
    which makes the same call without running a Python frame (a fifth of
    what Python adds to a tiny op). The function stays as ``__wrapped__``
    (its signature and docstring are the callable's); with ``unary`` its one
    argument must be a jag.Tensor (the TypeError of ``_C._unary``)."""

    def make(fn: _typing.Any) -> _typing.Any:
        return _C.OpFunction(name, fn, unary)

    return make


def _scalar_ok(x):
    # Python's own scalars first: an isinstance against the Number ABC costs
    # ~200 ns, the whole of a small op's C call
    t = type(x)
    if t is _builtins.float or t is _builtins.int or t is _builtins.bool:
        return True
    return isinstance(x, (_numbers.Number,)) and not isinstance(x, complex)


def _binary(name, a, b):
    """A binary op: tensor-tensor, or tensor-scalar (scalar as a double).
    "add_" is add with alpha 1 (jag's add op takes a third argument)."""
    t = type(b)
    if (t is _builtins.float or t is _builtins.int) and name != "add_" and isinstance(a, Tensor):
        return _op(name, a, _builtins.float(b))  # tensor op Python number, the common case, first
    if name == "add_":
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            return _op("add", a, b, 1.0)
        if isinstance(a, Tensor) and _scalar_ok(b):
            return _op("add", a, _builtins.float(b), 1.0)
        if isinstance(b, Tensor) and _scalar_ok(a):
            return _op("add", b, _builtins.float(a), 1.0)
        if isinstance(a, Tensor) and _is_array_like(b):
            return _op("add", a, tensor(b), 1.0)
        if isinstance(b, Tensor) and _is_array_like(a):
            return _op("add", tensor(a), b, 1.0)
        _type_error("add", a, b)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return _op(name, a, b)
    if isinstance(a, Tensor) and _scalar_ok(b):
        return _op(name, a, _builtins.float(b))
    if isinstance(b, Tensor) and _scalar_ok(a):
        # scalar op tensor: make the scalar a 0-d tensor of b's dtype family
        return _op(name, _scalar_like(a, b), b)
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        other = b if isinstance(a, Tensor) else a
        return _binary(name, a if isinstance(a, Tensor) else tensor(a), b if isinstance(b, Tensor) else tensor(b)) \
            if _is_array_like(other) else _type_error(name, a, b)
    raise TypeError("%s: expected at least one jag.Tensor, got %s and %s" % (name, type(a).__name__, type(b).__name__))


def _binary_fallback(name, a, b):
    """The operators' cases that TensorBase's C slots leave to Python (a
    scalar on the left of - * /, bools, lists, arrays, other types): name is
    _binary's, or "rmatmul" for ``a @ b`` with b the tensor."""
    if name == "rmatmul":
        return matmul(tensor(a), b)
    return _binary(name, a, b)


_C._set_binary_fallback(_binary_fallback)


def _type_error(name, a, b):
    raise TypeError("%s: unsupported operand types %s and %s" % (name, type(a).__name__, type(b).__name__))


def _is_array_like(x):
    return isinstance(x, (list, tuple)) or hasattr(x, "__array_interface__") or hasattr(x, "__array__")


def _scalar_like(s, t):
    """A 0-d tensor holding scalar s with the dtype torch would give it next
    to tensor t (t's dtype when t is floating or s is integral)."""
    d = t.dtype
    if isinstance(s, _builtins.bool):
        sd = bool if d is bool else d
    elif isinstance(s, _numbers.Integral):
        sd = d if d is not bool else int64
    else:
        sd = d if d.is_floating_point else float32
    return full((), s, dtype=sd)


class Tensor(_C.TensorBase, _GeneratedTensorMethods):
    """A jag tensor: dense, or nested (``is_nested``) with a ragged dim.

    Example::

        >>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> x.shape, x.dtype, x.is_nested
        ((2, 2), jag.float32, False)
        >>> nt = jag.nested.nested_tensor([[1.0, 2.0, 3.0], [4.0]], layout=jag.jagged)
        >>> nt.shape, nt.is_nested
        ((2, j...), True)
        >>> nt.values(), nt.offsets()
        (tensor([1.0000, 2.0000, 3.0000, 4.0000], dtype=float32, size=[4]), tensor([0, 3, 4], dtype=int64, size=[3]))
    """

    __slots__ = ()
    __array_priority__ = 1000  # numpy defers to our operators

    # --- metadata ---------------------------------------------------------
    @property
    def shape(self) -> _typing.Tuple[_typing.Any, ...]:
        """The sizes of the dims, a tuple; a ragged dim is a :class:`RaggedDim` (``j<id>``).

        Example::

            >>> jag.ones(2, 3).shape
            (2, 3)
            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> nt.shape  # j<id>: the ragged dim, a jag.RaggedDim
            (2, j...)
        """
        sizes = self._sizes
        if -1 in sizes:
            rid = self._ragged_id()
            assert rid is not None  # a ragged dim: a nested tensor
            return tuple(RaggedDim(rid) if s == -1 else s for s in sizes)
        return tuple(sizes)

    def size(self, dim: _builtins.int | None = None) -> _typing.Any:
        """The shape (as ``shape``), or the size of dim ``dim``.

        Example::

            >>> x = jag.ones(2, 3)
            >>> x.size()
            (2, 3)
            >>> x.size(1), x.size(-1)
            (3, 3)
        """
        if dim is None:
            return self.shape
        sizes = self._sizes
        n = len(sizes)
        if not -n <= dim < n:
            raise IndexError("size: dim %d out of range for a %d-d tensor" % (dim, n))
        k = sizes[dim]
        return k if k >= 0 else self.shape[dim]  # (a ragged dim: its RaggedDim)

    def stride(self, dim: _builtins.int | None = None) -> _typing.Any:
        """The strides in elements (a tuple), or the stride of dim ``dim``; dense tensors only.

        Example::

            >>> x = jag.ones(2, 3)
            >>> x.stride()
            (3, 1)
            >>> x.t().stride(0)
            1
        """
        st = self._strides
        if st is None:
            raise ValueError("stride: a nested tensor has no strides")
        return st if dim is None else st[dim]

    @property
    def dtype(self) -> _Dtype:
        """The element type (jag.float32, jag.int64, ...).

        Example::

            >>> jag.tensor([1, 2]).dtype
            jag.int64
            >>> jag.tensor([1.0]).double().dtype
            jag.float64
        """
        return _DTYPES[self._dtype_code]

    @property
    def is_meta(self) -> _builtins.bool:
        """True for a meta tensor (shape and dtype only, no data).

        Example::

            >>> jag.empty(2, 3, device='meta').is_meta
            True
            >>> jag.ones(2).is_meta
            False
        """
        return _C._is_meta(self)

    @property
    def device(self) -> str:
        """"cpu", or "meta" for a meta tensor.

        Example::

            >>> jag.ones(2).device
            'cpu'
            >>> jag.empty(2, device='meta').device
            'meta'
        """
        return "meta" if _C._is_meta(self) else "cpu"

    @property
    def layout(self) -> _Layout:
        """jag.strided for a dense tensor, else the nested tensor's layout.

        Example::

            >>> jag.ones(2).layout
            jag.strided
            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> nt.layout
            jag.jagged
        """
        return _LAYOUTS[self._layout_code] if self.is_nested else strided

    def dim(self) -> _builtins.int:
        """The number of dims (``ndim``).

        Example::

            >>> jag.ones(2, 3, 4).dim()
            3
            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> nt.dim()
            2
        """
        return self.ndim

    def numel(self) -> _builtins.int:
        """The number of elements; a nested tensor with a ragged dim raises (ask its values()).

        Example::

            >>> jag.ones(2, 3).numel()
            6
            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> nt.values().numel()  # the real elements
            3
        """
        n = 1
        for s in self._sizes:
            if s < 0:
                raise ValueError("numel: a nested tensor with a ragged dim; use .values().numel()")
            n *= s
        return n

    def is_contiguous(self, memory_format: _typing.Any = None) -> _builtins.bool:
        """Whether the elements are laid out densely in row-major order. A
        jagged nested tensor is contiguous (torch's answer) when its values
        are, it has no holes (lengths) and its ragged dim is dim 1.

        Example::

            >>> x = jag.ones(2, 3)
            >>> x.is_contiguous(), x.t().is_contiguous()
            (True, False)
        """
        if self.is_nested and self.layout is jagged:
            return (self.lengths() is None and self._ragged_idx == 1 and
                    _op("values", self.detach())._is_contiguous)
        return self._is_contiguous

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._sizes[0]

    # --- conversion -------------------------------------------------------
    def numpy(self) -> _typing.Any:
        """A numpy view of the same memory (no copy; the array keeps this
        tensor alive). Dense tensors only; raises for a tensor requiring grad,
        as torch does. A read-only tensor (``is_read_only()``: mapped from a
        file by ``jag.load(mmap=True)``, a nested tensor's offsets) gives a
        read-only array (``flags.writeable`` False); ``.clone().numpy()``
        gives a writable one.

        Example::

            >>> x = jag.tensor([1.0, 2.0])
            >>> a = x.numpy()
            >>> a[0] = 5.0  # the same memory
            >>> x
            tensor([5.0000, 2.0000], dtype=float32, size=[2])
        """
        import numpy as np

        if self.requires_grad:
            raise RuntimeError("numpy() on a tensor that requires grad; use .detach().numpy()")
        return np.asarray(self)

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        if self.is_nested:
            raise TypeError("a nested tensor has no single array; use .unbind(), .values() or "
                            "jag.nested.to_padded_tensor()")
        arr = np.asarray(_ArrayView(self))
        if dtype is not None:
            arr = arr.astype(dtype, copy=_builtins.bool(copy))
        elif copy:
            arr = arr.copy()
        return arr

    # --- DLPack (the array API's __dlpack__ protocol) ---------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this tensor's memory (no copy unless
        copy=True). max_version >= (1, 0) gives a versioned
        "dltensor_versioned" capsule, else a legacy "dltensor" one. CPU only:
        stream must be None and dl_device (1, 0) or None.

        A read-only tensor (``is_read_only()``) is exported with the versioned
        capsule's read-only flag set; a legacy capsule cannot carry that
        flag, so for it a read-only tensor is copied when copy=True and is a
        BufferError otherwise (as numpy does for a read-only array)."""
        if stream is not None:
            raise ValueError("__dlpack__: jag tensors live on the CPU; stream must be None, got %r" % (stream,))
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError("__dlpack__: jag can only export to the CPU (device (1, 0)), got %r" % (dl_device,))
        if self.requires_grad:
            raise RuntimeError("__dlpack__: cannot export a tensor that requires grad; use .detach() first")
        versioned = max_version is not None and _builtins.int(max_version[0]) >= 1
        return _C._to_dlpack(self, versioned, _builtins.bool(copy))

    def __dlpack_device__(self):
        return (1, 0)  # (kDLCPU, device 0)

    def is_read_only(self) -> _builtins.bool:
        """True when jag refuses to write into this tensor's memory: tensors
        mapped from a file by ``jag.load(mmap=True)`` and their views, a
        nested tensor's offsets and lengths. In-place ops raise on them and
        every export (``numpy()``, the buffer protocol, DLPack) is
        read-only; ``clone()`` gives a writable copy. For a nested tensor,
        ask its ``values()`` or ``offsets()``.

        Example::

            >>> jag.ones(2).is_read_only()
            False
            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> nt.offsets().is_read_only(), nt.values().is_read_only()
            (True, False)
        """
        return _C._is_read_only(self)

    def tolist(self) -> _typing.Any:
        """The elements as nested Python lists (a nested tensor: one list per component).

        Example::

            >>> jag.tensor([[1, 2], [3, 4]]).tolist()
            [[1, 2], [3, 4]]
        """
        if self.is_nested:
            return [c.tolist() for c in self.unbind()]
        if self.dtype is bfloat16:  # numpy has none; every bfloat16 value is exact in float32
            return self.detach().float().tolist()
        return self.numpy().tolist() if not self.requires_grad else self.detach().numpy().tolist()

    def __repr__(self):
        return _C.TensorBase.__repr__(self)

    def __bool__(self):
        return _builtins.bool(self.item())

    def __float__(self):
        return _builtins.float(self.item())

    def __int__(self):
        return _builtins.int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.dtype is bool:
            raise TypeError("only integer tensors can be used as an index")
        return _builtins.int(self.item())

    def to(self, *args: _typing.Any, **kwargs: _typing.Any) -> Tensor:
        """As torch's Tensor.to: ``to(dtype)``, ``to(device)``,
        ``to(device, dtype)``, ``to(other)`` (other's dtype) or keywords
        ``dtype=``, ``device=``, ``copy=``, ``non_blocking=``. jag tensors
        live on the CPU: the device must be "cpu". Returns self when nothing
        changes (and copy is False), else a new tensor.

        Example::

            >>> x = jag.tensor([1.5, 2.5])
            >>> x.to(jag.int64)
            tensor([1, 2], dtype=int64, size=[2])
            >>> x.to('cpu') is x
            True
            >>> x.to(jag.ones(1, dtype=jag.float64)).dtype  # the other tensor's dtype
            jag.float64
        """
        dt, device = None, None
        for a in args:
            if isinstance(a, Tensor):
                dt = a.dtype
            elif isinstance(a, str) or type(a).__name__ == "device":
                device = a
            else:
                dt = a
        if len(args) > 2:
            raise TypeError("to: expected at most 2 positional arguments (device, dtype), got %d" % len(args))
        dt = kwargs.pop("dtype", dt)
        device = kwargs.pop("device", device)
        copy = kwargs.pop("copy", False)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError("to: unexpected keyword argument %r" % next(iter(kwargs)))
        _check_device("to", device)
        dt = _to_dtype(dt)
        if dt is not None and dt is not self.dtype:
            return _op("to_dtype", self, dt.code)
        return self.clone() if copy else self

    def cpu(self) -> Tensor:
        """self: jag tensors live on the CPU (as torch's Tensor.cpu() on a
        CPU tensor).

        Example::

            >>> x = jag.ones(2)
            >>> x.cpu() is x
            True
        """
        return self

    def float(self) -> Tensor:
        """self converted to float32 (self when it already is).

        Example::

            >>> jag.tensor([1, 2]).float()
            tensor([1.0000, 2.0000], dtype=float32, size=[2])
        """
        return self.to(float32)

    def double(self) -> Tensor:
        """self converted to float64 (self when it already is).

        Example::

            >>> jag.tensor([1.0, 2.0]).double()
            tensor([1.0000, 2.0000], dtype=float64, size=[2])
        """
        return self.to(float64)

    def half(self) -> Tensor:
        """self converted to float16 (self when it already is).

        Example::

            >>> jag.tensor([1.0, 2.0]).half()
            tensor([1.0000, 2.0000], dtype=float16, size=[2])
        """
        return self.to(float16)

    def bfloat16(self) -> Tensor:
        """self converted to bfloat16 (self when it already is).

        Example::

            >>> jag.tensor([1.0, 2.0]).bfloat16()
            tensor([1.0000, 2.0000], dtype=bfloat16, size=[2])
        """
        return self.to(bfloat16)

    def long(self) -> Tensor:
        """self converted to int64 (self when it already is).

        Example::

            >>> jag.tensor([1.7, -1.7]).long()
            tensor([1, -1], dtype=int64, size=[2])
        """
        return self.to(int64)

    def int(self) -> Tensor:
        """self converted to int32 (self when it already is).

        Example::

            >>> jag.tensor([1.7, -1.7]).int()
            tensor([1, -1], dtype=int32, size=[2])
        """
        return self.to(int32)

    def bool(self) -> Tensor:
        """self converted to bool (self when it already is).

        Example::

            >>> jag.tensor([0.0, 2.0]).bool()
            tensor([False, True], dtype=bool, size=[2])
        """
        return self.to(bool)

    def clone(self) -> Tensor:
        """A copy with its own memory; differentiable.

        Example::

            >>> a = jag.tensor([1.0, 2.0], requires_grad=True)
            >>> b = a.clone()
            >>> b.sum().backward()
            >>> a.grad  # differentiable
            tensor([1.0000, 1.0000], dtype=float32, size=[2])
        """
        return _op("clone", self)

    def to_padded_tensor(self, padding: _builtins.float, output_size: _typing.Any = None) -> Tensor:
        """A dense tensor with every component copied in and the rest filled
        with ``padding`` (as jag.nested.to_padded_tensor). Differentiable.

        Example::

            >>> nt = jag.nested.nested_tensor([[1.0, 2.0, 3.0], [4.0]], layout=jag.jagged)
            >>> nt.to_padded_tensor(0.0)
            tensor([[1.0000, 2.0000, 3.0000],
                    [4.0000, 0.0000, 0.0000]], dtype=float32, size=[2, 3])
        """
        return nested.to_padded_tensor(self, padding, output_size)

    # --- indexing ---------------------------------------------------------
    def __getitem__(self, idx):
        """Basic indexing as torch: ints, slices (step 1), None and ``...``
        give views. One tensor (advanced) index is supported too, giving a
        copy as torch does: an int32/int64 tensor (or a list / numpy array
        of ints) picks along its dim (``index_select``; negative values count
        from the end; an n-d index puts its shape there), and a bool mask
        whose shape matches the dims it covers gives those dims' selected
        elements as one dim, in row-major order (``x[x > 2]`` is 1-D).
        Differentiable; on a nested tensor an int index picks components
        (dim 0)."""
        if not self.is_nested:  # ints and step-1 slices of a dense tensor, the common case, directly
            out = self._basic_index(idx if type(idx) is tuple else (idx,))
            if out is not None:
                return out
        elif type(idx) is _builtins.int:  # nt[k]: component k, as _index gives it
            size = self._sizes[0]
            if not -size <= idx < size:
                raise IndexError("index %d is out of bounds for dim 0 with size %d" % (idx, size))
            return self.select(0, idx)
        return self._index(idx)[0]

    def _basic_index(self, idx):
        """self[idx] for a tuple of plain ints, slices of step 1, None and
        one ``...``, as _index gives it, without its general walk; None for
        any other index (_index then takes it, errors included)."""
        n_real, ell = 0, -1
        for k, i in enumerate(idx):
            t = type(i)
            if t is _builtins.int or (t is slice and i.step is None):
                n_real += 1
            elif i is Ellipsis and ell < 0:
                ell = k
            elif i is not None:
                return None
        if n_real > self.ndim:
            return None
        if ell >= 0:
            idx = idx[:ell] + (slice(None),) * (self.ndim - n_real) + idx[ell + 1:]
        out, dim = self, 0
        for i in idx:
            if i is None:
                out = _op("unsqueeze", out, dim)
                dim += 1
                continue
            size = out._sizes[dim]
            if type(i) is _builtins.int:
                if not -size <= i < size:
                    raise IndexError("index %d is out of bounds for dim %d with size %d" % (i, dim, size))
                out = out._select(dim, i)
            else:
                b, e, _ = i.indices(size)
                if not (b == 0 and e == size):
                    out = out._narrow(dim, b, _builtins.max(e - b, 0))
                dim += 1
        return out

    def _index(self, idx):
        """(result, advanced): the result of indexing with idx, and whether
        a tensor index made it a copy (basic indexing gives views)."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        idx = tuple(_index_entry(i) for i in idx)
        if _builtins.sum(1 for i in idx if i is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis")
        adv = [k for k, i in enumerate(idx) if isinstance(i, Tensor) and not _is_int_scalar_tensor(i)]
        if len(adv) > 1:
            raise IndexError("jag: only one tensor (advanced) index per indexing expression is supported, got %d "
                             "(several tensor indices, which torch pairs elementwise, are not)" % len(adv))

        def consumed(i):
            if i is None or i is Ellipsis:
                return 0
            if isinstance(i, Tensor) and i.dtype is bool:
                return i.ndim  # a mask covers as many dims as it has
            return 1

        n_real = _builtins.sum(consumed(i) for i in idx)
        if n_real > self.ndim:
            raise IndexError("too many indices: %d for a %d-d tensor" % (n_real, self.ndim))
        for k, i in enumerate(idx):
            if i is Ellipsis:
                idx = idx[:k] + (slice(None),) * (self.ndim - n_real) + idx[k + 1:]
                break
        out = self
        dim = 0
        advanced = False  # a tensor index made the result a copy
        for i in idx:
            if i is None:
                out = _op("unsqueeze", out, dim)
                dim += 1
            elif isinstance(i, slice):
                start, stop, step = i.start, i.stop, i.step
                if step is not None and _operator_index(step) != 1:
                    raise ValueError("jag: slicing with a step other than 1 is not supported (got step %r)" % (step,))
                size = out._sizes[dim]
                if size < 0:
                    if i == slice(None):
                        dim += 1
                        continue
                    raise NotImplementedError("jag: slicing a ragged dim is not supported")
                b, e, _ = slice(start, stop).indices(size)
                if out.is_nested and dim == 0:  # components b..e-1 (torch refuses; as index_select)
                    if not (b == 0 and e == size):
                        out = _op("index_select", out, 0, arange(b, _builtins.max(e, b), dtype=int64))
                elif not (b == 0 and e == size):  # a full slice is a no-op
                    out = out._narrow(dim, b, _builtins.max(e - b, 0))
                dim += 1
            elif isinstance(i, (_builtins.bool,)):
                raise IndexError("jag: boolean (True/False) indices are not supported; a bool tensor mask is")
            elif isinstance(i, _numbers.Integral) or _is_int_scalar_tensor(i):
                k = _builtins.int(i)
                size = out._sizes[dim]
                if size >= 0 and not -size <= k < size:
                    raise IndexError("index %d is out of bounds for dim %d with size %d" % (k, dim, size))
                out = out.select(dim, k)
            elif isinstance(i, Tensor):
                # beside one tensor index, ints select their dims first (torch;
                # numpy would move the tensor's dims first when a slice
                # separates them from an int)
                out, m = _advanced_index(out, dim, i)
                advanced = True
                dim += m
            else:
                raise IndexError("jag: only ints, slices (step 1), None, ..., and one int or bool tensor (or list) "
                                 "are valid indices, got %s" % type(i).__name__)
        return out, advanced

    def __setitem__(self, idx, value):
        """In place, as torch: ``x[basic index] = v`` writes v (a tensor,
        scalar or array, broadcast) into the view; ``x[mask] = v`` and
        ``x[index_tensor] = v`` write v (broadcast to the selected shape)
        into the selected elements of x."""
        t = tuple(_index_entry(i) for i in (idx if isinstance(idx, tuple) else (idx,)))
        if _builtins.any(isinstance(i, Tensor) and not _is_int_scalar_tensor(i) for i in t):
            return self._setitem_advanced(t, value)
        target = self[t]
        if isinstance(value, Tensor):
            target.copy_(value)
        elif _scalar_ok(value):
            target.fill_(value)
        else:
            target.copy_(tensor(value, dtype=self.dtype))

    def _setitem_advanced(self, idx, value):
        """x[idx] = value with a tensor index in idx: the positions x[idx]
        reads (as row-major element numbers of x) get value broadcast to the
        indexed shape; x is written once, in place (copy_), so read-only
        tensors, leaves requiring grad and the version counter behave as
        for any in-place op. A position picked twice takes the last value."""
        import numpy as np

        if self.is_nested:
            raise IndexError("jag: assigning through a tensor index into a nested tensor is not supported; "
                             "assign into its values()")
        if isinstance(value, Tensor) and value.requires_grad and is_grad_enabled():
            raise NotImplementedError("jag: x[tensor index] = v with v requiring grad is not differentiable in "
                                      "jag; assign v.detach(), or build the result with jag.where / index ops")
        shape = tuple(self._sizes)
        n = 1
        for d in shape:
            n *= d
        pos = arange(n, dtype=int64).reshape(shape)._index(idx)[0]
        picked = tuple(pos._sizes)
        if isinstance(value, Tensor):
            if value.is_nested:
                raise TypeError("jag: x[index] = v: v must be dense, got a nested tensor")
            # bfloat16: numpy has none; its values are exact in float32
            v = (value.detach().float() if value.dtype is bfloat16 else value.detach()).numpy()
        else:
            v = np.asarray(value)
        np_dtype = self.dtype._np or "float32"  # bfloat16 again: copy_ below rounds once
        try:
            v = np.broadcast_to(np.asarray(v, dtype=np_dtype), picked)
        except ValueError:
            raise ValueError("jag: x[index] = v: v of shape %s does not broadcast to the indexed shape %s"
                             % (tuple(np.shape(v)), picked)) from None
        where_np = pos.numpy().reshape(-1)
        full_np = np.zeros(n, dtype=np_dtype)
        full_np[where_np] = v.reshape(-1)  # numpy: a repeated position keeps the last value
        mask_np = np.zeros(n, dtype=np.bool_)
        mask_np[where_np] = True
        self.copy_(where(tensor(mask_np).reshape(shape), tensor(full_np).reshape(shape), self))

    # --- views ------------------------------------------------------------
    def reshape(self, *shape: _typing.Any) -> Tensor:
        """self with a new shape (one size may be -1): a view when the memory allows, else a copy.

        Example::

            >>> jag.arange(6).reshape(2, 3)
            tensor([[0, 1, 2],
                    [3, 4, 5]], dtype=int64, size=[2, 3])
            >>> jag.arange(6).reshape(-1, 2).shape
            (3, 2)
        """
        return self._reshape(_shape_arg(shape))

    def view(self, *shape: _typing.Any) -> Tensor:
        """A view of the same memory with a new shape (one size may be -1).

        Example::

            >>> x = jag.arange(6)
            >>> v = x.view(2, 3)
            >>> v[0, 0] = 100  # shares x's memory
            >>> x
            tensor([100, 1, 2, 3, 4, 5], dtype=int64, size=[6])
        """
        return _op("view", self, list(_shape_arg(shape)))

    @_op_function("transpose")
    def transpose(self, dim0: _builtins.int, dim1: _builtins.int) -> Tensor:
        """A view with dims ``dim0`` and ``dim1`` swapped.

        Example::

            >>> jag.tensor([[1, 2, 3], [4, 5, 6]]).transpose(0, 1)
            tensor([[1, 4],
                    [2, 5],
                    [3, 6]], dtype=int64, size=[3, 2])
        """
        return _op("transpose", self, dim0, dim1)

    def permute(self, *dims: _typing.Any) -> Tensor:
        """A view with the dims reordered as ``dims``; a nested tensor keeps its batch dim first.

        Example::

            >>> jag.ones(2, 3, 4).permute(2, 0, 1).shape
            (4, 2, 3)
            >>> nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
            >>> nt.permute(0, 2, 1).shape
            (2, 3, j...)
        """
        dims = _shape_arg(dims)
        if self.is_nested and self.layout is jagged:
            return nested._permute(self, dims)
        return _op("permute", self, list(dims))

    @property
    def T(self) -> Tensor:
        """The dims reversed (self for fewer than 2 dims).

        Example::

            >>> jag.tensor([[1, 2], [3, 4]]).T
            tensor([[1, 3],
                    [2, 4]], dtype=int64, size=[2, 2])
        """
        if self.ndim < 2:
            return self
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self) -> Tensor:
        """The last two dims swapped (a batch of transposed matrices).

        Example::

            >>> jag.ones(5, 2, 3).mT.shape
            (5, 3, 2)
        """
        return self.transpose(-2, -1)

    def t(self) -> Tensor:
        """A 2-D tensor transposed; self for fewer than 2 dims.

        Example::

            >>> jag.tensor([[1, 2, 3]]).t()
            tensor([[1],
                    [2],
                    [3]], dtype=int64, size=[3, 1])
        """
        return self.transpose(0, 1) if self.ndim == 2 else self

    def narrow(self, dim: _builtins.int, start: _builtins.int, length: _builtins.int) -> Tensor:
        """A view of ``length`` entries of dim ``dim`` from ``start``.

        Example::

            >>> jag.arange(6).narrow(0, 2, 3)
            tensor([2, 3, 4], dtype=int64, size=[3])
            >>> jag.tensor([[1, 2, 3], [4, 5, 6]]).narrow(1, 1, 2)
            tensor([[2, 3],
                    [5, 6]], dtype=int64, size=[2, 2])
        """
        return self._narrow(dim, start, length)

    def select(self, dim: _builtins.int, index: _builtins.int) -> Tensor:
        """The slice at ``index`` along ``dim``, without that dim. On a
        jagged tensor: dim 0 picks a component, the ragged dim picks row
        ``index`` of every component (a dense (B, D...) tensor), a later
        dim its entry; each differentiable.

        Example::

            >>> x = jag.tensor([[1, 2], [3, 4]])
            >>> x.select(0, 1), x.select(1, 0)
            (tensor([3, 4], dtype=int64, size=[2]), tensor([1, 3], dtype=int64, size=[2]))
            >>> nt = jag.nested.nested_tensor([[1.0, 2.0, 3.0], [4.0]], layout=jag.jagged)
            >>> nt.select(0, 0)  # the first component
            tensor([1.0000, 2.0000, 3.0000], dtype=float32, size=[3])
        """
        if self.is_nested and self.layout is jagged:
            d = nested._outer_dim(self, _operator_index(dim), "select")
            k = _operator_index(index)
            if d == 0:
                if not -len(self) <= k < len(self):
                    raise IndexError("select: index %d is out of range for a batch of %d" % (k, len(self)))
                return nested._unbind_jagged(self)[k] if self.requires_grad else self._select(0, k)
            if d == self._ragged_idx:
                return nested._select_ragged(self, k)
            if self._ragged_idx == 1:
                return nested._select_dense_dim(self, d, k)
        return self._select(dim, index)

    @_op_function("unsqueeze")
    def unsqueeze(self, dim: _builtins.int) -> Tensor:
        """A view with a new dim of size 1 at ``dim``.

        Example::

            >>> x = jag.tensor([1.0, 2.0])
            >>> x.unsqueeze(0).shape, x.unsqueeze(-1).shape
            ((1, 2), (2, 1))
        """
        return _op("unsqueeze", self, dim)

    def squeeze(self, dim: _typing.Any = None) -> Tensor:
        """self without size-1 dims (all of them, or ``dim``: an int or a
        tuple), a view; on a jagged tensor only dims after the ragged one
        are dropped.

        Example::

            >>> x = jag.ones(1, 3, 1)
            >>> x.squeeze().shape, x.squeeze(0).shape, x.squeeze((0, 2)).shape
            ((3,), (3, 1), (3,))
        """
        if self.is_nested and self.layout is jagged:
            dims = range(2, self.ndim) if dim is None else dim if isinstance(dim, (tuple, list)) else (dim,)
            out = self
            for d in sorted((nested._outer_dim(self, _builtins.int(d), "squeeze") for d in dims), reverse=True):
                if dim is not None:
                    nested._check_dense_dim(self, d, "squeeze")
                out = nested._squeeze(out, d)
            return out
        if isinstance(dim, (tuple, list)):
            out = self
            for d in sorted((_builtins.int(d) % _builtins.max(self.ndim, 1) for d in dim), reverse=True):
                out = out.squeeze(d)
            return out
        if dim is None:
            out = self
            for d in reversed(range(self.ndim)):
                if out._sizes[d] == 1:
                    out = _op("squeeze", out, d)
            return out
        return _op("squeeze", self, dim)

    def expand(self, *sizes: _typing.Any) -> Tensor:
        """A view with size-1 dims repeated to ``sizes`` (-1 keeps a dim), no copy.

        Example::

            >>> jag.tensor([[1], [2]]).expand(2, 3)
            tensor([[1, 1, 1],
                    [2, 2, 2]], dtype=int64, size=[2, 3])
            >>> jag.tensor([1.0, 2.0]).expand(3, -1).shape
            (3, 2)
        """
        return _op("expand", self, list(_shape_arg(sizes)))

    def flatten(self, start_dim: _builtins.int = 0, end_dim: _builtins.int = -1) -> Tensor:
        """Dims start_dim..end_dim merged into one (a view when the memory
        allows, as torch). On a jagged tensor, dims after the ragged one.

        Example::

            >>> x = jag.ones(2, 3, 4)
            >>> x.flatten().shape, x.flatten(1).shape
            ((24,), (2, 12))
        """
        n = _builtins.max(self.ndim, 1)
        s = start_dim + n if start_dim < 0 else start_dim
        e = end_dim + n if end_dim < 0 else end_dim
        if not (0 <= s < n and 0 <= e < n):
            raise IndexError("flatten: dims (%d, %d) out of range for a %d-d tensor" % (start_dim, end_dim, self.ndim))
        if s > e:
            raise ValueError("flatten: start_dim %d comes after end_dim %d" % (start_dim, end_dim))
        if self.is_nested:
            return nested._flatten(self, s, e) if s != e else self
        if self.ndim == 0 or (s == 0 and e == n - 1):
            return self._flatten()
        if s == e:
            return self
        sizes = tuple(self._sizes)
        merged = 1
        for d in sizes[s:e + 1]:
            merged *= d
        return self.reshape(sizes[:s] + (merged,) + sizes[e + 1:])

    def split(self, split_size_or_sections: _typing.Any, dim: _builtins.int = 0) -> _typing.Tuple[Tensor, ...]:
        """Views of consecutive pieces along dim: pieces of split_size (the
        last may be shorter) or of the listed sizes, as torch. A nested
        tensor splits along a dim after the ragged one.

        Example::

            >>> [p.tolist() for p in jag.arange(5).split(2)]
            [[0, 1], [2, 3], [4]]
            >>> [p.tolist() for p in jag.arange(5).split([1, 4])]
            [[0], [1, 2, 3, 4]]
        """
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim:
            raise IndexError("split: dim %d out of range for a %d-d tensor" % (dim, self.ndim))
        if self.is_nested:
            nested._check_dense_dim(self, d, "split")
        sizes = nested._split_sizes(self._sizes[d], split_size_or_sections, "split")
        out, start = [], 0
        for n in sizes:
            out.append(self.narrow(d, start, n))
            start += n
        return tuple(out)

    def chunk(self, chunks: _builtins.int, dim: _builtins.int = 0) -> _typing.Tuple[Tensor, ...]:
        """At most ``chunks`` views along dim, each of ceil(size / chunks)
        (the last may be shorter), as torch.

        Example::

            >>> [c.tolist() for c in jag.arange(5).chunk(3)]
            [[0, 1], [2, 3], [4]]
        """
        chunks = _operator_index(chunks)
        if chunks <= 0:
            raise ValueError("chunk: chunks must be positive, got %d" % chunks)
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim:
            raise IndexError("chunk: dim %d out of range for a %d-d tensor" % (dim, self.ndim))
        size = self._sizes[d]
        if size < 0 or (self.is_nested and d == 0):
            nested._check_dense_dim(self, d, "chunk")
        return self.split(_builtins.max(-(-size // chunks), 1) if size else 0, d)

    def masked_fill(self, mask: Tensor, value: _typing.Any) -> Tensor:
        """self with ``value`` where ``mask`` (a bool tensor broadcasting to
        self, or a nested mask of the same structure) is True.
        Differentiable with respect to self (and a tensor value).

        Example::

            >>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> x.masked_fill(x > 2, 0.0)
            tensor([[1.0000, 2.0000],
                    [0.0000, 0.0000]], dtype=float32, size=[2, 2])
        """
        if not isinstance(mask, Tensor) or mask.dtype is not bool:
            raise TypeError("masked_fill: argument 'mask' must be a bool jag.Tensor")
        if isinstance(value, Tensor):
            if value.is_nested or value.ndim != 0:
                raise ValueError("masked_fill: argument 'value' must be a number or a 0-d tensor, got shape %s"
                                 % (value.shape,))
        elif _scalar_ok(value):
            value = _scalar_like(value, self)
        else:
            raise TypeError("masked_fill: argument 'value' must be a number, got %s" % type(value).__name__)
        return _op("where", mask, value.to(self.dtype), self)

    def unflatten(self, dim: _builtins.int, sizes: _typing.Sequence[_builtins.int]) -> Tensor:
        """Dim `dim` split into `sizes` (one of them may be -1), a view as
        torch's; on a jagged tensor, a dim after the ragged one (its values
        are viewed).

        Example::

            >>> jag.ones(2, 12).unflatten(1, (3, -1)).shape
            (2, 3, 4)
        """
        shape = list(self.shape)
        d = dim + len(shape) if dim < 0 else dim
        if not 0 <= d < len(shape):
            raise IndexError("unflatten: dim %d out of range for a %d-d tensor" % (dim, len(shape)))
        if isinstance(shape[d], RaggedDim):
            raise NotImplementedError("unflatten: dim %d is ragged" % dim)
        sizes = [_builtins.int(s) for s in sizes]
        if sizes.count(-1) > 1:
            raise ValueError("unflatten: at most one size may be -1")
        if -1 in sizes:
            known = 1
            for s in sizes:
                known *= s if s != -1 else 1
            if known == 0 or shape[d] % known:
                raise ValueError("unflatten: sizes %s do not divide dim %d of size %d" % (sizes, dim, shape[d]))
            sizes[sizes.index(-1)] = shape[d] // known
        return self.view(shape[:d] + sizes + shape[d + 1:])

    # --- autograd ---------------------------------------------------------
    def requires_grad_(self, requires_grad: _builtins.bool = True) -> Tensor:
        """Set requires_grad in place and return self. Leaves only (float
        dtypes): the output of an op is refused with a ValueError (detach()
        it first); an integer or bool tensor cannot require grad.

        Example::

            >>> w = jag.zeros(2).requires_grad_()
            >>> w.requires_grad
            True
            >>> (3 * w).sum().backward()
            >>> w.grad
            tensor([3.0000, 3.0000], dtype=float32, size=[2])
        """
        self.requires_grad = requires_grad
        return self

    def backward(self, gradient: _typing.Any = None, retain_graph: _builtins.bool = False) -> None:
        """Compute the gradients of self with respect to the leaves that require
        grad, accumulated into their ``.grad``. ``gradient``: d(out)/d(self), needed
        unless self has one element; ``retain_graph`` keeps the graph for another
        backward.

        Example::

            >>> w = jag.tensor([1.0, 2.0], requires_grad=True)
            >>> (w * w).sum().backward()
            >>> w.grad
            tensor([2.0000, 4.0000], dtype=float32, size=[2])
        """
        if gradient is not None and not isinstance(gradient, Tensor):
            gradient = tensor(gradient, dtype=self.dtype)
        self._backward(gradient, _builtins.bool(retain_graph))

    @property
    def data(self) -> Tensor:
        """A tensor sharing this tensor's memory that is a leaf and does not
        require grad (``detach()``), as torch's ``.data``: writes through it
        (``w.data -= lr * w.grad``) change this tensor. In jag the version
        counter is the storage's, so unlike torch's ``.data`` those writes
        are seen by autograd's check of saved tensors, as after torch's
        ``detach()``.

        Example::

            >>> w = jag.ones(2, requires_grad=True)
            >>> d = w.data
            >>> d.requires_grad
            False
            >>> d.mul_(3.0)  # changes w, unseen by autograd
            tensor([3.0000, 3.0000], dtype=float32, size=[2])
            >>> w
            tensor([3.0000, 3.0000], dtype=float32, size=[2])
        """
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        raise NotImplementedError("Tensor.data = ...: replacing a tensor's memory is not supported; write into it "
                                  "instead: x.data.copy_(new), or x.copy_(new) under jag.no_grad()")

    # --- in-place ops -----------------------------------------------------
    # jag.h's in-place ops: the write happens in self's memory (a nested
    # tensor's packed values; its structure never changes), self's shape and
    # dtype stay (an operand broadcasts to self, a result of a higher dtype
    # kind is refused), read-only tensors are refused, and with grad mode on
    # so is a tensor that requires grad (update parameters under
    # jag.no_grad()); each write bumps the storage's _version.

    def add_(self, other: _typing.Any, alpha: _typing.Any = 1) -> Tensor:
        """self += alpha * other, in place; returns self. other: a tensor
        (broadcast to self's shape), a number or an array.

        Example::

            >>> x = jag.tensor([1.0, 2.0])
            >>> x.add_(jag.tensor([1.0, 1.0]), alpha=10)
            tensor([11.0000, 12.0000], dtype=float32, size=[2])
            >>> x
            tensor([11.0000, 12.0000], dtype=float32, size=[2])
        """
        return self._inplace("add_", 0, other, alpha)

    def sub_(self, other: _typing.Any, alpha: _typing.Any = 1) -> Tensor:
        """self -= alpha * other, in place; returns self.

        Example::

            >>> x = jag.tensor([5.0, 6.0])
            >>> x.sub_(1.0)
            tensor([4.0000, 5.0000], dtype=float32, size=[2])
        """
        return self._inplace("sub_", 1, other, alpha)

    def mul_(self, other: _typing.Any) -> Tensor:
        """self *= other, in place; returns self.

        Example::

            >>> x = jag.tensor([1.0, 2.0])
            >>> x.mul_(jag.tensor([3.0, 4.0]))
            tensor([3.0000, 8.0000], dtype=float32, size=[2])
        """
        return self._inplace("mul_", 2, other, 1)

    def div_(self, other: _typing.Any) -> Tensor:
        """self /= other (true division), in place; returns self. An
        integer self is refused (the quotient is a float), as torch.

        Example::

            >>> x = jag.tensor([1.0, 2.0])
            >>> x.div_(4)
            tensor([0.2500, 0.5000], dtype=float32, size=[2])
        """
        return self._inplace("div_", 3, other, 1)

    def _inplace(self, name, kind, other, alpha):
        if not _scalar_ok(alpha):
            raise TypeError("%s: argument 'alpha' must be a number, got %s" % (name, type(alpha).__name__))
        if kind < 2 and not self.dtype.is_floating_point and not isinstance(alpha, _numbers.Integral):
            raise TypeError("%s: argument 'alpha' is %r, but self has dtype %s: an integer self takes an integer "
                            "alpha (as torch)" % (name, alpha, self.dtype.name))
        if isinstance(other, Tensor):
            if kind == 0:
                return self._add_(other, _builtins.float(alpha))
            if kind == 1:
                return self._sub_(other, _builtins.float(alpha))
            return self._mul_(other) if kind == 2 else self._div_(other)
        if _scalar_ok(other):
            _check_scalar_kind(name, "other", other, self.dtype)
            if kind == 3 and not self.dtype.is_floating_point:
                raise TypeError("%s: self has dtype %s; true division gives a float, which an integer tensor cannot "
                                "hold in place (use x = x / other)" % (name, self.dtype.name))
            if self.dtype is bool or (not self.dtype.is_floating_point and _builtins.abs(other) >= 2 ** 53):
                # a bool, or an integer a double cannot hold exactly: as a 0-d tensor of self's dtype
                return self._inplace(name, kind, tensor(other, dtype=self.dtype), alpha)
            if kind == 0:
                return self._scalar_(0, _builtins.float(alpha * other))
            if kind == 1:
                return self._scalar_(0, -_builtins.float(alpha * other))
            return self._scalar_(1 if kind == 2 else 2, _builtins.float(other))
        if _is_array_like(other):
            return self._inplace(name, kind, tensor(other), alpha)
        raise TypeError("%s: argument 'other' must be a jag.Tensor, a number or an array, got %s"
                        % (name, type(other).__name__))

    def clamp_(self, min: _typing.Any = None, max: _typing.Any = None) -> Tensor:  # noqa: A002 (torch's names)
        """self = min(max(self, min), max), in place; returns self. At
        least one bound; an integer self takes integer bounds (as torch).

        Example::

            >>> x = jag.tensor([-2.0, 0.5, 3.0])
            >>> x.clamp_(-1.0, 1.0)
            tensor([-1.0000, 0.5000, 1.0000], dtype=float32, size=[3])
            >>> x
            tensor([-1.0000, 0.5000, 1.0000], dtype=float32, size=[3])
            >>> x.clip_(min=0.0)  # clip_ is another name of clamp_
            tensor([0.0000, 0.5000, 1.0000], dtype=float32, size=[3])
        """
        if min is None and max is None:
            raise ValueError("clamp_: at least one of min and max must be given")
        for what, b in (("min", min), ("max", max)):
            if b is None:
                continue
            if isinstance(b, Tensor):
                if b.numel() != 1:
                    raise ValueError("clamp_: argument '%s' must be a number or a one-element tensor, got shape %s"
                                     % (what, b.shape))
                b = b.item()
            elif not _scalar_ok(b):
                raise TypeError("clamp_: argument '%s' must be a number, got %s" % (what, type(b).__name__))
            _check_scalar_kind("clamp_", what, b, self.dtype)
        lo = -_builtins.float("inf") if min is None else _builtins.float(min)
        hi = _builtins.float("inf") if max is None else _builtins.float(max)
        return self._clamp_(lo, hi)

    clip_ = clamp_

    def zero_(self) -> Tensor:
        """Fill self with zeros, in place; returns self.

        Example::

            >>> x = jag.tensor([1.0, 2.0])
            >>> x.zero_()
            tensor([0.0000, 0.0000], dtype=float32, size=[2])
        """
        return self._zero_()

    def fill_(self, value: _typing.Any) -> Tensor:
        """Fill self with value (a number or a one-element tensor, converted
        to self's dtype as torch does), in place; returns self.

        Example::

            >>> x = jag.zeros(2, 2)
            >>> x.fill_(1.5)
            tensor([[1.5000, 1.5000],
                    [1.5000, 1.5000]], dtype=float32, size=[2, 2])
            >>> x.fill_(jag.tensor(2.0))
            tensor([[2.0000, 2.0000],
                    [2.0000, 2.0000]], dtype=float32, size=[2, 2])
        """
        if isinstance(value, Tensor):
            if value.is_nested or value.numel() != 1:
                raise ValueError("fill_: argument 'value' must be a number or a one-element tensor, got shape %s"
                                 % (value.shape,))
            value = value.item()
        if not _scalar_ok(value):
            raise TypeError("fill_: argument 'value' must be a number, got %s" % type(value).__name__)
        return self._fill_(_builtins.float(value))

    def copy_(self, src: Tensor) -> Tensor:
        """Copy src (a tensor broadcast to self's shape; its dtype converted
        to self's) into self, in place; returns self. A nested self takes a
        nested src of the same structure, or a dense one that broadcasts
        over its packed values.

        Example::

            >>> x = jag.zeros(2, 2)
            >>> x.copy_(jag.tensor([1, 2]))  # broadcast over rows, converted to float32
            tensor([[1.0000, 2.0000],
                    [1.0000, 2.0000]], dtype=float32, size=[2, 2])
        """
        if not isinstance(src, Tensor):
            raise TypeError("copy_: argument 'src' must be a jag.Tensor, got %s (fill_ takes a number)"
                            % type(src).__name__)
        return self._copy_(src)

    def __iadd__(self, o):
        if not (isinstance(o, Tensor) or _scalar_ok(o) or _is_array_like(o)):
            return NotImplemented
        return self.add_(o)

    def __isub__(self, o):
        if not (isinstance(o, Tensor) or _scalar_ok(o) or _is_array_like(o)):
            return NotImplemented
        return self.sub_(o)

    def __imul__(self, o):
        if not (isinstance(o, Tensor) or _scalar_ok(o) or _is_array_like(o)):
            return NotImplemented
        return self.mul_(o)

    def __itruediv__(self, o):
        if not (isinstance(o, Tensor) or _scalar_ok(o) or _is_array_like(o)):
            return NotImplemented
        return self.div_(o)

    # --- nested -----------------------------------------------------------
    def values(self) -> Tensor:
        """The packed values of a nested tensor: for the jagged layout, the
        components concatenated along the ragged dim, as a differentiable view
        (torch.Tensor.values()); for the strided layout, the 1-D buffer.
        As torch, the values have the nested tensor's dims without the batch
        dim, the ragged dim (``_ragged_idx`` r) holding every component's
        rows: after ``nt.transpose(1, 2)`` (r = 2) they are
        ``nt.values().transpose(0, 1)``, a view of the same memory.

        Example::

            >>> nt = jag.nested.nested_tensor([jag.tensor([1.0, 2.0]), jag.tensor([3.0])], layout=jag.jagged)
            >>> nt.values()
            tensor([1.0000, 2.0000, 3.0000], dtype=float32, size=[3])
        """
        if not self.is_nested:
            raise ValueError("values(): not a nested tensor")
        if self.layout is not jagged:
            return self._buffer()  # strided: the 1-D buffer, as torch
        rows_first = _op("values", self)  # differentiable; the ragged rows at dim 0
        r = self._ragged_idx
        if r == 1:
            return rows_first
        # the ragged rows at dim r - 1, the other dims in the nested tensor's order
        return rows_first.permute(*(list(range(1, r)) + [0] + list(range(r, rows_first.ndim))))

    def offsets(self) -> Tensor:
        """The B + 1 offsets of a jagged tensor's components into its values()
        (int64, read-only): component i starts at offsets[i].

        Example::

            >>> nt = jag.nested.nested_tensor([jag.tensor([1.0, 2.0]), jag.tensor([3.0])], layout=jag.jagged)
            >>> nt.offsets()
            tensor([0, 2, 3], dtype=int64, size=[3])
        """
        return self._offsets()

    @property
    def _ragged_idx(self):
        """The ragged dim of a jagged tensor (torch's NJT ``_ragged_idx``):
        1, or where a transpose moved it; None for other tensors."""
        return self._ragged_idx_of()

    def lengths(self) -> Tensor | None:
        """The components' lengths of a jagged tensor with holes (made by
        jag.nested.narrow or nested_tensor_from_jagged with lengths), else None.

        Example::

            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> nt.lengths() is None  # no holes
            True
            >>> x = jag.arange(10.0).reshape(2, 5)
            >>> h = jag.nested.narrow(x, 1, jag.tensor([0, 2]), jag.tensor([3, 1]), layout=jag.jagged)  # with holes
            >>> h.lengths(), h.offsets()
            (tensor([3, 1], dtype=int64, size=[2]), tensor([0, 7, 10], dtype=int64, size=[3]))
        """
        return self._lengths()

    def unbind(self, dim: _builtins.int = 0) -> _typing.Tuple[Tensor, ...]:
        """The components (a nested tensor) or the slices along dim 0 (a
        dense tensor), as views. Differentiable: on a jagged tensor that
        requires grad, gradients of the components reach its values.

        Example::

            >>> jag.tensor([[1, 2], [3, 4]]).unbind()
            (tensor([1, 2], dtype=int64, size=[2]), tensor([3, 4], dtype=int64, size=[2]))
            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> nt.unbind()
            (tensor([1.0000, 2.0000], dtype=float32, size=[2]), tensor([3.0000], dtype=float32, size=[1]))
        """
        if dim != 0:
            raise NotImplementedError("unbind: only dim=0 is supported")
        if self.is_nested:
            if self.layout is jagged and self.requires_grad and is_grad_enabled():
                return nested._unbind_jagged(self)
            return tuple(self._unbind_nested())
        return tuple(self._select(0, i) for i in range(len(self)))

    def to_layout(self, layout: _Layout) -> Tensor:
        """A nested tensor converted to ``layout`` (jag.jagged or jag.strided).

        Example::

            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> s = nt.to_layout(jag.strided)
            >>> s.layout, [c.tolist() for c in s.unbind()]
            (jag.strided, [[1.0, 2.0], [3.0]])
        """
        return self._to_layout(layout.code)

    def to_torch(self, copy: _builtins.bool | None = None) -> _typing.Any:
        """A torch nested tensor of layout torch.jagged over this jagged
        tensor's values (no copy unless they are read-only or copy=True;
        offsets and lengths copied; differentiable). The way back:
        jag.nested.from_torch.

        Example::

            >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
            >>> njt = nt.to_torch()  # needs torch  # doctest: +SKIP
            >>> njt.layout, njt.offsets().tolist()  # doctest: +SKIP
        """
        from ._torch_interop import to_torch
        return to_torch(self, copy=copy)

    # --- math methods -----------------------------------------------------
    def sum(self, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None, keepdim: _builtins.bool = False,
            dtype: _typing.Any = None) -> Tensor:
        """As :func:`jag.sum`; ``dtype`` converts the result.

        Example::

            >>> jag.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(1)
            tensor([3.0000, 7.0000], dtype=float32, size=[2])
            >>> nt = jag.nested.nested_tensor([[1.0, 2.0, 3.0], [4.0, 5.0]], layout=jag.jagged)
            >>> nt.sum(1)  # one sum per component
            tensor([6.0000, 9.0000], dtype=float32, size=[2])
        """
        r = sum(self, dim, keepdim)
        return r if dtype is None else r.to(dtype)

    def mean(self, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None,
             keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.mean`.

        Example::

            >>> nt = jag.nested.nested_tensor([[1.0, 2.0, 3.0], [4.0, 5.0]], layout=jag.jagged)
            >>> nt.mean(1)  # one mean per component, over its own length
            tensor([2.0000, 4.5000], dtype=float32, size=[2])
        """
        return mean(self, dim, keepdim)

    def prod(self, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None,
             keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.prod`.

        Example::

            >>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> x.prod(0, keepdim=True)
            tensor([[3.0000, 8.0000]], dtype=float32, size=[1, 2])
        """
        return prod(self, dim, keepdim)

    def amax(self, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None,
             keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.amax`.

        Example::

            >>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> x.amax(0, keepdim=True)
            tensor([[3.0000, 4.0000]], dtype=float32, size=[1, 2])
        """
        return amax(self, dim, keepdim)

    def logsumexp(self, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None,
                  keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.logsumexp`.

        Example::

            >>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> x.logsumexp(0, keepdim=True)
            tensor([[3.1269, 4.1269]], dtype=float32, size=[1, 2])
        """
        return logsumexp(self, dim, keepdim)

    def amin(self, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None,
             keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.amin`.

        Example::

            >>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> x.amin(0, keepdim=True)
            tensor([[1.0000, 2.0000]], dtype=float32, size=[1, 2])
        """
        return amin(self, dim, keepdim)

    def max(self, dim: _typing.Any = None, keepdim: _builtins.bool = False) -> _typing.Any:
        """As :func:`jag.max`.

        Example::

            >>> x = jag.tensor([[1.0, 5.0], [4.0, 2.0]])
            >>> x.max(0)
            (tensor([4.0000, 5.0000], dtype=float32, size=[2]), tensor([1, 0], dtype=int64, size=[2]))
        """
        return max(self, dim, keepdim)

    def min(self, dim: _typing.Any = None, keepdim: _builtins.bool = False) -> _typing.Any:
        """As :func:`jag.min`.

        Example::

            >>> x = jag.tensor([[1.0, 5.0], [4.0, 2.0]])
            >>> x.min()
            tensor(1.0000, dtype=float32, size=[])
            >>> x.min(1).values
            tensor([1.0000, 2.0000], dtype=float32, size=[2])
        """
        return min(self, dim, keepdim)

    def argmax(self, dim: _builtins.int | None = None, keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.argmax`.

        Example::

            >>> jag.tensor([3.0, 7.0, 5.0]).argmax()
            tensor(1, dtype=int64, size=[])
        """
        return argmax(self, dim, keepdim)

    def argmin(self, dim: _builtins.int | None = None, keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.argmin`.

        Example::

            >>> jag.tensor([[3.0, 1.0], [0.0, 2.0]]).argmin(1, keepdim=True)
            tensor([[1],
                    [0]], dtype=int64, size=[2, 1])
        """
        return argmin(self, dim, keepdim)

    def var(self, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None, correction: _builtins.int = 1,
            keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.var`.

        Example::

            >>> jag.tensor([1.0, 2.0, 3.0, 4.0]).var()
            tensor(1.6667, dtype=float32, size=[])
        """
        return var(self, dim, correction=correction, keepdim=keepdim)

    def std(self, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None, correction: _builtins.int = 1,
            keepdim: _builtins.bool = False) -> Tensor:
        """As :func:`jag.std`.

        Example::

            >>> jag.tensor([1.0, 2.0, 3.0, 4.0]).std()
            tensor(1.2910, dtype=float32, size=[])
        """
        return std(self, dim, correction=correction, keepdim=keepdim)

    def softmax(self, dim: _builtins.int) -> Tensor:
        """As :func:`jag.softmax`.

        Example::

            >>> jag.tensor([[0.0, 0.0], [0.0, 2.0]]).softmax(1)
            tensor([[0.5000, 0.5000],
                    [0.1192, 0.8808]], dtype=float32, size=[2, 2])
            >>> nt = jag.nested.nested_tensor([[0.0, 0.0, 0.0], [1.0]], layout=jag.jagged)
            >>> [c.tolist() for c in nt.softmax(1).unbind()]  # per component
            [[0.3333333432674408, 0.3333333432674408, 0.3333333432674408], [1.0]]
        """
        return softmax(self, dim)

    def log_softmax(self, dim: _builtins.int) -> Tensor:
        """As :func:`jag.log_softmax`.

        Example::

            >>> jag.tensor([[1.0, 1.0, 1.0, 1.0]]).log_softmax(1).exp()
            tensor([[0.2500, 0.2500, 0.2500, 0.2500]], dtype=float32, size=[1, 4])
        """
        return log_softmax(self, dim)

    def matmul(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.matmul`.

        Example::

            >>> a = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> a.matmul(jag.tensor([1.0, 1.0]))
            tensor([3.0000, 7.0000], dtype=float32, size=[2])
            >>> nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
            >>> nt.matmul(jag.ones(3, 4)).shape  # (B, j, 3) @ (3, 4)
            (2, j..., 4)
        """
        return matmul(self, other)

    def mm(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.mm`.

        Example::

            >>> jag.tensor([[1.0, 2.0]]).mm(jag.tensor([[3.0], [4.0]]))
            tensor([[11.0000]], dtype=float32, size=[1, 1])
        """
        return mm(self, other)

    def bmm(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.bmm`.

        Example::

            >>> jag.ones(5, 2, 3).bmm(jag.ones(5, 3, 1)).shape
            (5, 2, 1)
        """
        return bmm(self, other)

    def add(self, other: _typing.Any, alpha: _typing.Any = 1) -> Tensor:
        """As :func:`jag.add`.

        Example::

            >>> x = jag.tensor([1.0, 2.0])
            >>> x.add(jag.tensor([10.0, 20.0]), alpha=2)
            tensor([21.0000, 42.0000], dtype=float32, size=[2])
        """
        return add(self, other, alpha=alpha)

    def sub(self, other: _typing.Any, alpha: _typing.Any = 1) -> Tensor:
        """As :func:`jag.sub`.

        Example::

            >>> jag.tensor([5.0, 6.0]).sub(1.0)
            tensor([4.0000, 5.0000], dtype=float32, size=[2])
        """
        return sub(self, other, alpha=alpha)

    def mul(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.mul`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.mul(2.0)
            tensor([2.0000, 4.0000, 6.0000], dtype=float32, size=[3])
        """
        return mul(self, other)

    def div(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.div`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.div(jag.tensor([2.0, 4.0, 0.5]))
            tensor([0.5000, 0.5000, 6.0000], dtype=float32, size=[3])
        """
        return div(self, other)

    def pow(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.pow`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.pow(2)
            tensor([1.0000, 4.0000, 9.0000], dtype=float32, size=[3])
        """
        return pow(self, other)

    def maximum(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.maximum`.

        Example::

            >>> x = jag.tensor([1.0, 5.0, 3.0])
            >>> x.maximum(jag.tensor([2.0, 2.0, 2.0]))
            tensor([2.0000, 5.0000, 3.0000], dtype=float32, size=[3])
        """
        return maximum(self, other)

    def minimum(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.minimum`.

        Example::

            >>> x = jag.tensor([1.0, 5.0, 3.0])
            >>> x.minimum(jag.tensor([2.0, 2.0, 2.0]))
            tensor([1.0000, 2.0000, 2.0000], dtype=float32, size=[3])
        """
        return minimum(self, other)

    def eq(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.eq`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.eq(2.0)
            tensor([False, True, False], dtype=bool, size=[3])
        """
        return eq(self, other)

    def ne(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.ne`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.ne(2.0)
            tensor([True, False, True], dtype=bool, size=[3])
        """
        return ne(self, other)

    def lt(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.lt`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.lt(2.0)
            tensor([True, False, False], dtype=bool, size=[3])
        """
        return lt(self, other)

    def le(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.le`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.le(2.0)
            tensor([True, True, False], dtype=bool, size=[3])
        """
        return le(self, other)

    def gt(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.gt`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.gt(2.0)
            tensor([False, False, True], dtype=bool, size=[3])
        """
        return gt(self, other)

    def ge(self, other: _typing.Any) -> Tensor:
        """As :func:`jag.ge`.

        Example::

            >>> x = jag.tensor([1.0, 2.0, 3.0])
            >>> x.ge(2.0)
            tensor([False, True, True], dtype=bool, size=[3])
        """
        return ge(self, other)

    def where(self, cond: Tensor, other: _typing.Any) -> Tensor:
        """``jag.where(cond, self, other)``.

        Example::

            >>> x = jag.tensor([-1.0, 2.0, -3.0])
            >>> x.where(x > 0, jag.zeros(3))
            tensor([0.0000, 2.0000, 0.0000], dtype=float32, size=[3])
        """
        return where(cond, self, other)

    def clamp(self, min: _typing.Any = None, max: _typing.Any = None) -> Tensor:  # noqa: A002
        """As :func:`jag.clamp`.

        Example::

            >>> jag.tensor([-2.0, 0.5, 3.0]).clamp(-1.0, 1.0)
            tensor([-1.0000, 0.5000, 1.0000], dtype=float32, size=[3])
        """
        return clamp(self, min, max)

    # --- operators --------------------------------------------------------
    # + - * / ** and @ (and their reflected forms) are TensorBase's C slots
    # (_C.c, tensor_binary): tensor-tensor and tensor-scalar call the op
    # without a Python frame; every other operand goes to _binary_fallback.

    def __neg__(self):
        return _op("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _op("abs", self)

    def __eq__(self, o):
        return _binary("eq", self, o)

    def __ne__(self, o):
        return _binary("ne", self, o)

    def __lt__(self, o):
        return _binary("lt", self, o)

    def __le__(self, o):
        return _binary("le", self, o)

    def __gt__(self, o):
        return _binary("gt", self, o)

    def __ge__(self, o):
        return _binary("ge", self, o)

    __hash__ = object.__hash__

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind())


_C._set_tensor_class(Tensor)


class _ArrayView:
    """Carries a tensor's __array_interface__ so that numpy keeps a reference
    to the tensor (through this object) for as long as the array lives."""

    __slots__ = ("tensor", "__array_interface__")

    def __init__(self, t):
        self.tensor = t
        self.__array_interface__ = _C.TensorBase.__array_interface__.__get__(t)


def _operator_index(x):
    # (a plain int first: operator.index and the import cost ~100 ns a call)
    return x if type(x) is _builtins.int else _operator.index(x)


def _check_scalar_kind(name, what, v, dt):
    """A Python scalar written into a tensor of dtype dt in place must not
    be of a higher kind (bool < int < float), as torch refuses."""
    if isinstance(v, _builtins.bool) or (type(v).__module__ == "numpy" and type(v).__name__ == "bool_"):
        return
    if dt is bool or (not dt.is_floating_point and not isinstance(v, _numbers.Integral)):
        kind = "an integer" if isinstance(v, _numbers.Integral) else "a float"
        raise TypeError("%s: argument '%s' is %s (%r), which self's dtype %s cannot hold in place (as torch: the "
                        "result type must convert to self's)" % (name, what, kind, v, dt.name))


def _is_int_scalar_tensor(i):
    """A 0-d int tensor: an index that acts as a Python int (as torch)."""
    return isinstance(i, Tensor) and i.ndim == 0 and not i.is_nested and i.dtype in (int32, int64)


def _index_entry(i):
    """One entry of an index: a list or numpy array becomes a tensor index
    (ints -> int64, bools -> a bool mask), as torch reads them."""
    if isinstance(i, list) or (type(i).__module__ == "numpy" and hasattr(i, "dtype") and getattr(i, "ndim", 0) > 0):
        import numpy as np

        arr = np.asarray(i)
        if arr.size == 0:
            arr = arr.astype(np.int64)
        if arr.dtype.kind == "b":
            return tensor(arr.astype(np.bool_))
        if arr.dtype.kind in "iu":
            return tensor(arr.astype(np.int64))
        raise IndexError("jag: an index list or array must hold ints or bools, got dtype %s" % arr.dtype)
    return i


def _mask_positions(mask):
    """The row-major positions of the true elements of a bool tensor, as a
    1-D int64 tensor (torch's nonzero order)."""
    import numpy as np

    return tensor(np.flatnonzero(mask.numpy()).astype(np.int64))


def _advanced_index(x, dim, index):
    """x indexed at dim by one tensor: (result, number of result dims that
    replace the indexed ones)."""
    import numpy as np

    if index.dtype is bool and (x.is_nested or index.is_nested):
        raise IndexError("jag: a bool mask index of a nested tensor is not supported; use jag.where(mask, x, "
                         "other), or index x.values() with a mask over the values")
    if index.is_nested:
        raise IndexError("jag: a nested tensor cannot be used as an index")
    if index.dtype is bool:
        n = index.ndim
        if n == 0:  # x[True]: a new dim of size 1; x[False]: of size 0 (torch)
            out = _op("unsqueeze", x, dim)
            return (out if index.item() else out._narrow(dim, 0, 0)), 1
        sizes = tuple(x._sizes)
        if tuple(index._sizes) != sizes[dim:dim + n]:
            raise IndexError("the shape of the mask %s does not match the shape %s of the indexed tensor at %s"
                             % (tuple(index._sizes), sizes[dim:dim + n],
                                "dim %d" % dim if n == 1 else "dims %d..%d" % (dim, dim + n - 1)))
        if n != 1:
            x = x.reshape(*(sizes[:dim] + (-1,) + sizes[dim + n:]))
        return _op("index_select", x, dim, _mask_positions(index)), 1
    if index.dtype not in (int32, int64):
        raise IndexError("tensors used as indices must be int32, int64 or bool tensors, got %s" % index.dtype.name)
    size = x._sizes[dim]
    if size < 0:
        raise IndexError("jag: indexing a ragged dim with a tensor is not supported")
    arr = index.numpy()
    if arr.size:
        lo, hi = _builtins.int(arr.min()), _builtins.int(arr.max())
        bad = lo if lo < -size else hi if hi >= size else None
        if bad is not None:
            raise IndexError("index %d is out of bounds for dim %d with size %d" % (bad, dim, size))
        if lo < 0:  # negative values count from the end, as torch
            index = tensor(np.where(arr < 0, arr + size, arr).astype(np.int64))
    if index.ndim == 1:
        return _op("index_select", x, dim, index), 1
    if x.is_nested:
        raise IndexError("jag: a nested tensor's components are picked by a 1-D index, got a %d-d one" % index.ndim)
    out = _op("index_select", x, dim, index.reshape(-1))
    s = tuple(out._sizes)
    return out.reshape(*(s[:dim] + tuple(index._sizes) + s[dim + 1:])), index.ndim


# ---------------------------------------------------------------------------
# Creation
# ---------------------------------------------------------------------------


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad = True
    return t


def tensor(data: _typing.Any, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
           device: _typing.Any = None) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, scalars, numpy
    arrays, jag tensors). dtype defaults as torch: float32 for floats, int64
    for ints, bool for bools; a numpy array keeps its dtype (float64 too).

    Example::

        >>> jag.tensor([[1, 2], [3, 4]])
        tensor([[1, 2],
                [3, 4]], dtype=int64, size=[2, 2])
        >>> jag.tensor([0.5, 1.5], dtype=jag.float64, requires_grad=True)
        tensor([0.5000, 1.5000], dtype=float64, size=[2])
        >>> jag.tensor(3.0)
        tensor(3.0000, dtype=float32, size=[])
    """
    import numpy as np

    _check_device("tensor", device)
    dt = _to_dtype(dtype)
    if isinstance(data, Tensor):
        if data.is_nested:
            raise TypeError("jag.tensor: use .clone() to copy a nested tensor")
        t = data.detach().clone()
        if dt is not None:
            t = t.to(dt)
        return _finish(t, requires_grad)
    is_np = isinstance(data, np.ndarray) or isinstance(data, np.generic)
    arr = np.asarray(data)
    if arr.dtype == object:
        raise TypeError("jag.tensor: cannot make a tensor from %s" % type(data).__name__)
    if dt is None:
        kind = arr.dtype.kind
        if is_np and arr.dtype.name in _NP_TO_DTYPE:
            dt = _NP_TO_DTYPE[arr.dtype.name]  # a numpy array keeps its dtype
        elif kind == "b":
            dt = bool
        elif kind in "iu":
            dt = int64
        elif kind == "f":
            dt = float32
        else:
            raise TypeError("jag.tensor: unsupported data dtype %s" % arr.dtype)
    if dt is bfloat16:  # numpy has no bfloat16: made in float32, rounded once
        return _finish(tensor(arr, dtype=float32).to(bfloat16), requires_grad)
    arr = np.asarray(arr, dtype=dt._np, order="C")
    if arr.ndim > 8:
        raise ValueError("jag.tensor: at most 8 dims, got %d" % arr.ndim)
    t = _C._from_buffer(arr.reshape(-1).view(np.uint8) if arr.size else b"", arr.shape, dt.code)
    return _finish(t, requires_grad)


as_tensor = tensor


def from_numpy(arr: _typing.Any) -> Tensor:
    """A tensor holding a copy of the numpy array ``arr`` (its dtype kept).

    Example::

        >>> a = np.array([[1, 2], [3, 4]], dtype=np.int32)
        >>> jag.from_numpy(a)
        tensor([[1, 2],
                [3, 4]], dtype=int32, size=[2, 2])
    """
    return tensor(arr)


def _factory(kind, size, dtype, requires_grad, a=0.0, b=1.0):
    dt = _to_dtype(dtype) or float32
    return _finish(_C._factory(kind, _shape_arg(size), dt.code, _builtins.float(a), _builtins.float(b)),
                   requires_grad)


def zeros(*size: _typing.Any, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
          device: _typing.Any = None) -> Tensor:
    """A tensor of zeros of shape ``size`` (float32 unless ``dtype``).

    Example::

        >>> jag.zeros(2, 3, dtype=jag.int64)
        tensor([[0, 0, 0],
                [0, 0, 0]], dtype=int64, size=[2, 3])
    """
    _check_device("zeros", device)
    return _factory("zeros", size, dtype, requires_grad)


def ones(*size: _typing.Any, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
         device: _typing.Any = None) -> Tensor:
    """A tensor of ones of shape ``size`` (float32 unless ``dtype``).

    Example::

        >>> jag.ones(2, 3)
        tensor([[1.0000, 1.0000, 1.0000],
                [1.0000, 1.0000, 1.0000]], dtype=float32, size=[2, 3])
        >>> jag.ones((2,), dtype=jag.int64)
        tensor([1, 1], dtype=int64, size=[2])
    """
    _check_device("ones", device)
    return _factory("ones", size, dtype, requires_grad)


def empty(*size: _typing.Any, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
          device: _typing.Any = None) -> Tensor:
    """Uninitialised memory; device="meta" gives a meta tensor (shape and
    dtype, no data: ops on it only infer shapes and dtypes).

    Example::

        >>> jag.empty(2, 3).shape
        (2, 3)
        >>> m = jag.empty(1000, 1000, device='meta')  # no memory
        >>> m.is_meta, m.shape
        (True, (1000, 1000))
    """
    if device is not None and str(device) == "meta":
        return _C._meta(_shape_arg(size), (_to_dtype(dtype) or float32).code)
    _check_device("empty", device)
    return _factory("empty", size, dtype, requires_grad)


def full(size: _typing.Any, fill_value: _typing.Any, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
         device: _typing.Any = None) -> Tensor:
    """A tensor of shape ``size`` filled with ``fill_value``; the dtype follows
    the value (bool, int64, float32) unless ``dtype`` is given, as torch.

    Example::

        >>> jag.full((2, 2), 7.0)
        tensor([[7.0000, 7.0000],
                [7.0000, 7.0000]], dtype=float32, size=[2, 2])
        >>> jag.full((3,), 1).dtype
        jag.int64
    """
    _check_device("full", device)
    if dtype is None:
        if isinstance(fill_value, _builtins.bool):
            dtype = bool
        elif isinstance(fill_value, _numbers.Integral):
            dtype = int64
        else:
            dtype = float32
    if isinstance(size, _numbers.Integral):
        size = (size,)
    return _factory("full", (tuple(size),), dtype, requires_grad, fill_value)


def rand(*size: _typing.Any, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
         generator: Generator | None = None, seed: _builtins.int | None = None, device: _typing.Any = None) -> Tensor:
    """Uniform [0, 1) numbers from ``generator`` (a jag.Generator), from a
    fresh generator seeded with ``seed``, or from the thread's default one
    (jag.manual_seed).

    Example::

        >>> jag.manual_seed(0)
        >>> x = jag.rand(2, 3)
        >>> x.shape, 0 <= x.min().item() <= x.max().item() < 1
        ((2, 3), True)
        >>> g = jag.Generator(7)
        >>> jag.allclose(jag.rand(3, generator=g), jag.rand(3, generator=jag.Generator(7)))
        True
    """
    _check_device("rand", device)
    g = _generator_arg(generator, seed)
    if g is None:
        return _factory("rand", size, dtype, requires_grad, 0.0, 1.0)
    dt = _to_dtype(dtype) or float32
    return _finish(_C._random("rand", _shape_arg(size), dt.code, 0.0, 1.0, g), requires_grad)


def randn(*size: _typing.Any, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
          generator: Generator | None = None, seed: _builtins.int | None = None, device: _typing.Any = None) -> Tensor:
    """Standard normal numbers; generator and seed as for rand.

    Example::

        >>> jag.manual_seed(0)
        >>> jag.randn(2, 3).shape
        (2, 3)
        >>> jag.allclose(jag.randn(4, generator=jag.Generator(1)), jag.randn(4, generator=jag.Generator(1)))
        True
    """
    _check_device("randn", device)
    g = _generator_arg(generator, seed)
    if g is None:
        return _factory("randn", size, dtype, requires_grad, 0.0, 1.0)
    dt = _to_dtype(dtype) or float32
    return _finish(_C._random("randn", _shape_arg(size), dt.code, 0.0, 1.0, g), requires_grad)


def arange(start: _typing.Any, end: _typing.Any = None, step: _typing.Any = 1, dtype: _typing.Any = None,
           requires_grad: _builtins.bool = False, device: _typing.Any = None) -> Tensor:
    """start, start + step, ... below end (``arange(n)``: 0..n-1); int64 when
    every argument is an int, else float32, as torch.

    Example::

        >>> jag.arange(1, 7, 2)
        tensor([1, 3, 5], dtype=int64, size=[3])
    """
    _check_device("arange", device)
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = _builtins.all(isinstance(v, _numbers.Integral) for v in (start, end, step))
        dtype = int64 if ints else float32
    dt = _to_dtype(dtype)
    return _finish(_C._arange(_builtins.float(start), _builtins.float(end), _builtins.float(step), dt.code),
                   requires_grad)


def from_dlpack(x: _typing.Any, *, device: _typing.Any = None, copy: _builtins.bool | None = None) -> Tensor:
    """A jag tensor sharing the memory of ``x``: any object with
    ``__dlpack__`` (numpy arrays, torch tensors, jag tensors) or a DLPack
    capsule. No copy, except when copy=True or when the producer marks the
    data read-only (a tensor over a producer's memory is writable, so a
    read-only jag tensor, numpy array, ... is copied), has negative strides
    or misaligned data (copy=False makes those a BufferError). CPU memory
    only.

    Example::

        >>> a = np.arange(4.0)
        >>> t = jag.from_dlpack(a)  # shares a's memory
        >>> a[0] = 9.0
        >>> t
        tensor([9.0000, 1.0000, 2.0000, 3.0000], dtype=float64, size=[4])
    """
    if device is not None and device not in ("cpu", (1, 0)):
        raise BufferError("from_dlpack: jag tensors live on the CPU, got device=%r" % (device,))
    allow_copy = copy is None or _builtins.bool(copy)
    if type(x).__name__ == "PyCapsule":
        t = _C._from_dlpack(x, allow_copy)
        return t.clone() if copy else t
    if not hasattr(x, "__dlpack__"):
        raise TypeError("from_dlpack: %s has no __dlpack__ method" % type(x).__name__)
    if hasattr(x, "__dlpack_device__"):
        dev = tuple(x.__dlpack_device__())
        if dev[0] not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise BufferError("from_dlpack: jag reads CPU memory only; the object is on DLPack device %r" % (dev,))
    kwargs: _typing.Dict[str, _typing.Any] = {"max_version": (_C.DLPACK_MAJOR, _C.DLPACK_MINOR)}
    if copy is not None:
        kwargs["copy"] = _builtins.bool(copy)
    try:
        cap = x.__dlpack__(**kwargs)
    except TypeError:  # a producer of the older protocol: no keywords
        cap = x.__dlpack__()
        t = _C._from_dlpack(cap, allow_copy)
        return t.clone() if copy else t
    return _C._from_dlpack(cap, allow_copy)


def frombuffer(buffer: _typing.Any, dtype: _typing.Any, count: _builtins.int = -1, offset: _builtins.int = 0,
               requires_grad: _builtins.bool = False) -> Tensor:
    """A 1-D tensor over the memory of a buffer-protocol object (bytearray,
    memoryview, mmap, array.array, ...), as torch.frombuffer: ``count``
    elements (-1: to the end) from ``offset`` bytes in, of any dtype
    (bfloat16 included: its 2-byte patterns as they lie in memory). No copy
    for a writable buffer (the tensor keeps the buffer alive); a read-only
    one (bytes) is copied, since a tensor over borrowed memory is
    writable.

    Example::

        >>> buf = bytearray(np.array([1.0, 2.0, 3.0], dtype=np.float32).tobytes())
        >>> jag.frombuffer(buf, dtype=jag.float32)
        tensor([1.0000, 2.0000, 3.0000], dtype=float32, size=[3])
        >>> jag.frombuffer(buf, dtype=jag.float32, count=1, offset=4)
        tensor([2.0000], dtype=float32, size=[1])
    """
    import numpy as np

    dt = _to_dtype(dtype)
    if dt is None:
        raise TypeError("frombuffer: dtype is required")
    _check_frombuffer_range(buffer, dt, _builtins.int(count), _builtins.int(offset))
    if dt is bfloat16:
        # numpy has no bfloat16: view the bytes as uint16, taken as bfloat16
        # bit patterns by jag (same memory, no copy)
        arr = np.frombuffer(buffer, dtype=np.uint16, count=count, offset=offset)
        return _finish(_C._from_dlpack(arr.__dlpack__(max_version=(1, 0)), True, True), requires_grad)
    if dt._np is None:
        raise TypeError("frombuffer: dtype %s is not supported; read float32 and convert with .to(%s)" % (dt, dt))
    arr = np.frombuffer(buffer, dtype=dt._np, count=count, offset=offset)
    return _finish(from_dlpack(arr), requires_grad)


def _check_frombuffer_range(buffer: _typing.Any, dt: dtype, count: _builtins.int, offset: _builtins.int) -> None:
    """torch.frombuffer's checks of count and offset (in bytes) against the
    buffer's length, as ValueErrors naming the argument."""
    import numpy as np

    with memoryview(buffer) as view:
        length = view.nbytes
    esz = 2 if dt is bfloat16 else np.dtype(dt._np).itemsize
    if offset < 0 or offset >= length:
        raise ValueError("frombuffer: argument 'offset' is %d bytes; expected at least 0 and below the buffer's "
                         "length (%d bytes)" % (offset, length))
    if count == 0 or count < -1:
        raise ValueError("frombuffer: argument 'count' is %d; expected -1 (to the end) or a positive count" % count)
    if count == -1 and (length - offset) % esz:
        raise ValueError("frombuffer: the buffer's %d bytes after offset %d are not a multiple of the element size "
                         "of %s (%d bytes)" % (length - offset, offset, dt, esz))
    if count > 0 and count * esz > length - offset:
        raise ValueError("frombuffer: argument 'count' is %d (%d bytes of %s); the buffer has %d bytes after offset %d"
                         % (count, count * esz, dt, length - offset, offset))


class Generator:
    """A reproducible random generator (jag_generator): the same seed gives
    the same numbers on every run and machine. Pass it as ``generator=`` to
    rand/randn/rand_like/randn_like and jag.nn.functional.dropout.

    Example::

        >>> g = jag.Generator(42)
        >>> a = jag.rand(3, generator=g)
        >>> _ = g.manual_seed(42)  # restart: the same numbers again
        >>> jag.allclose(a, jag.rand(3, generator=g))
        True
    """

    def __init__(self, seed: _builtins.int = 0) -> None:
        self._g = _C._Generator(_builtins.int(seed))
        self._seed = _builtins.int(seed)

    def manual_seed(self, seed: _builtins.int) -> Generator:
        """Restart the generator from ``seed``; returns self.

        Example::

            >>> g = jag.Generator()
            >>> g.manual_seed(5).initial_seed()
            5
        """
        self._g = _C._Generator(_builtins.int(seed))
        self._seed = _builtins.int(seed)
        return self

    def initial_seed(self) -> _builtins.int:
        """The seed this generator was started from.

        Example::

            >>> jag.Generator(123).initial_seed()
            123
        """
        return self._seed


def _generator_arg(generator, seed):
    if generator is not None and seed is not None:
        raise ValueError("pass generator= or seed=, not both")
    if seed is not None:
        return _C._Generator(_builtins.int(seed))
    if generator is None:
        return None
    if not isinstance(generator, Generator):
        raise TypeError("generator must be a jag.Generator, got %s" % type(generator).__name__)
    return generator._g


def _like(kind, x, dtype=None, requires_grad=False, value=0.0, device=None):
    _check_device("%s_like" % kind, device)
    if not isinstance(x, Tensor):
        raise TypeError("%s_like: expected a jag.Tensor, got %s" % (kind, type(x).__name__))
    t = _C._like(kind, x, _builtins.float(value))
    dt = _to_dtype(dtype)
    if dt is not None and dt is not t.dtype:
        t = t.to(dt)
    return _finish(t, requires_grad)


def empty_like(x: Tensor, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
               device: _typing.Any = None) -> Tensor:
    """Uninitialised memory shaped like ``x`` (a nested ``x`` gives a nested result with its offsets).

    Example::

        >>> jag.empty_like(jag.ones(2, 3)).shape
        (2, 3)
        >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
        >>> jag.empty_like(nt).offsets()
        tensor([0, 2, 3], dtype=int64, size=[3])
    """
    return _like("empty", x, dtype, requires_grad, device=device)


def zeros_like(x: Tensor, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
               device: _typing.Any = None) -> Tensor:
    """Zeros shaped like ``x`` (a nested ``x`` gives a nested result with its offsets).

    Example::

        >>> jag.zeros_like(jag.ones(2, 2))
        tensor([[0.0000, 0.0000],
                [0.0000, 0.0000]], dtype=float32, size=[2, 2])
        >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
        >>> jag.zeros_like(nt).values()
        tensor([0.0000, 0.0000, 0.0000], dtype=float32, size=[3])
    """
    return _like("zeros", x, dtype, requires_grad, device=device)


def ones_like(x: Tensor, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
              device: _typing.Any = None) -> Tensor:
    """Ones shaped like ``x`` (a nested ``x`` gives a nested result with its offsets).

    Example::

        >>> jag.ones_like(jag.zeros(3, dtype=jag.int64))
        tensor([1, 1, 1], dtype=int64, size=[3])
        >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
        >>> [c.tolist() for c in jag.ones_like(nt).unbind()]
        [[1.0, 1.0], [1.0]]
    """
    return _like("ones", x, dtype, requires_grad, device=device)


def full_like(x: Tensor, fill_value: _typing.Any, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
              device: _typing.Any = None) -> Tensor:
    """``fill_value`` everywhere, shaped like ``x`` (a nested ``x`` gives a nested result with its offsets).

    Example::

        >>> jag.full_like(jag.zeros(2, 2), 0.5)
        tensor([[0.5000, 0.5000],
                [0.5000, 0.5000]], dtype=float32, size=[2, 2])
        >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
        >>> jag.full_like(nt, 7.0).values()
        tensor([7.0000, 7.0000, 7.0000], dtype=float32, size=[3])
    """
    return _like("full", x, dtype, requires_grad, fill_value, device=device)


def _random_like(kind, x, dtype, requires_grad, generator, seed, device=None):
    _check_device("%s_like" % kind, device)
    g = _generator_arg(generator, seed)
    if g is None:
        return _like(kind, x, dtype, requires_grad)
    if not isinstance(x, Tensor):
        raise TypeError("%s_like: expected a jag.Tensor, got %s" % (kind, type(x).__name__))
    t = _C._random_like(kind, x, g)
    dt = _to_dtype(dtype)
    if dt is not None and dt is not t.dtype:
        t = t.to(dt)
    return _finish(t, requires_grad)


def rand_like(x: Tensor, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
              generator: Generator | None = None, seed: _builtins.int | None = None,
              device: _typing.Any = None) -> Tensor:
    """Uniform [0, 1) numbers shaped like x (nested results share x's
    offsets); generator and seed as for rand.

    Example::

        >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
        >>> r = jag.rand_like(nt, generator=jag.Generator(0))
        >>> r.is_nested, r.offsets().tolist()
        (True, [0, 2, 3])
    """
    return _random_like("rand", x, dtype, requires_grad, generator, seed, device)


def randn_like(x: Tensor, dtype: _typing.Any = None, requires_grad: _builtins.bool = False,
               generator: Generator | None = None, seed: _builtins.int | None = None,
               device: _typing.Any = None) -> Tensor:
    """Standard normal numbers shaped like x (nested results share x's offsets); generator and seed as for rand.

    Example::

        >>> jag.manual_seed(0)
        >>> jag.randn_like(jag.zeros(2, 3)).shape
        (2, 3)
    """
    return _random_like("randn", x, dtype, requires_grad, generator, seed, device)


def clamp(input: Tensor, min: _typing.Any = None, max: _typing.Any = None) -> Tensor:  # noqa: A002 (torch's names)
    """min(max(input, min), max) elementwise; dense and nested, differentiable.

    Example::

        >>> jag.clamp(jag.tensor([-2.0, 0.5, 3.0]), min=0.0)
        tensor([0.0000, 0.5000, 3.0000], dtype=float32, size=[3])
        >>> nt = jag.nested.nested_tensor([[-2.0, 0.5], [3.0]], layout=jag.jagged)
        >>> jag.clamp(nt, max=1.0).values()
        tensor([-2.0000, 0.5000, 1.0000], dtype=float32, size=[3])
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    lo = -_builtins.float("inf") if min is None else _builtins.float(min)
    hi = _builtins.float("inf") if max is None else _builtins.float(max)
    return _C._clamp(input, lo, hi)


clip = clamp


def is_tensor(x: _typing.Any) -> _builtins.bool:
    """True when ``x`` is a jag.Tensor (dense or nested).

    Example::

        >>> jag.is_tensor(jag.ones(2)), jag.is_tensor([1.0, 2.0])
        (True, False)
    """
    return isinstance(x, Tensor)


# ---------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------


_unary = _C._unary


def _make_unary(name, doc):
    # called as an OpFunction (no Python frame); f is its __wrapped__
    def f(input: Tensor) -> Tensor:
        # _C._unary: a TypeError "jag.<name>: expected a jag.Tensor, got
        # <type>" unless input is a jag.Tensor, else _op(name, input)
        return _unary(name, input)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = "jag.%s(input) -> Tensor: %s, elementwise (dense or nested)." % (name, doc)
    return _op_function(name, unary=True)(f)


def _make_unary_method(name, doc):
    def m(self: Tensor) -> Tensor:
        return _op(name, self)

    m.__name__ = name
    m.__qualname__ = "Tensor." + name
    m.__doc__ = "Tensor.%s() -> Tensor: %s, elementwise; as jag.%s(self)." % (name, doc, name)
    return _op_function(name)(m)


# The unary ops come from the op table (src/dispatch/ops.def): every
# POINTWISE row of schema "name(Tensor x) -> Tensor" is jag.<name> and
# Tensor.<name> (torch.sin, x.sin(), ...), its row's line as docstring. A
# new row needs no edit here.
_OP_ROWS = _C._op_rows()
_TAG_POINTWISE = 1
_UNARY = [r[0] for r in _OP_ROWS
          if r[3] & _TAG_POINTWISE and r[1] == "%s(Tensor x) -> Tensor" % r[0]]
for _row in _OP_ROWS:
    if _row[0] in _UNARY:
        globals().setdefault(_row[0], _make_unary(_row[0], _row[2]))
        if not hasattr(Tensor, _row[0]):
            setattr(Tensor, _row[0], _make_unary_method(_row[0], _row[2]))
negative = globals()["neg"]
fix = globals()["trunc"]


@_op_function("selu")
def selu(input: Tensor) -> Tensor:
    """scale * (max(0, x) + min(0, alpha * (exp(x) - 1))), torch's constants.

    Example::

        >>> jag.selu(jag.tensor([-1.0, 0.0, 1.0]))
        tensor([-1.1113, 0.0000, 1.0507], dtype=float32, size=[3])
    """
    return _op("selu", input)


def _make_binary(name: str) -> _typing.Callable[[_typing.Any, _typing.Any], Tensor]:
    def f(input: _typing.Any, other: _typing.Any) -> Tensor:
        return _binary(name, input, other)

    f.__name__ = name
    f.__doc__ = "Elementwise %s with broadcasting (jag op %r)." % (name, name)
    return f


mul = _make_binary("mul")
div = _make_binary("div")
pow = _make_binary("pow")  # noqa: A001 (torch's name)
maximum = _make_binary("maximum")
minimum = _make_binary("minimum")
eq = _make_binary("eq")
ne = _make_binary("ne")
lt = _make_binary("lt")
le = _make_binary("le")
gt = _make_binary("gt")
ge = _make_binary("ge")
multiply = mul
divide = true_divide = div
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def add(input: _typing.Any, other: _typing.Any, alpha: _typing.Any = 1) -> Tensor:
    """input + alpha * other.

    Example::

        >>> jag.add(jag.tensor([1.0, 2.0]), jag.tensor([10.0, 20.0]))
        tensor([11.0000, 22.0000], dtype=float32, size=[2])
        >>> jag.add(jag.tensor([1.0, 2.0]), jag.tensor([10.0, 20.0]), alpha=0.5)
        tensor([6.0000, 12.0000], dtype=float32, size=[2])
    """
    if alpha == 1:
        return _binary("add_", input, other)
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        return _op("add", input, other, _builtins.float(alpha))
    return _binary("add_", input, other * alpha)


def sub(input: _typing.Any, other: _typing.Any, alpha: _typing.Any = 1) -> Tensor:
    """input - alpha * other, with broadcasting.

    Example::

        >>> jag.sub(jag.tensor([5.0, 6.0]), jag.tensor([1.0, 2.0]), alpha=2)
        tensor([3.0000, 2.0000], dtype=float32, size=[2])
    """
    if alpha == 1:
        return _binary("sub", input, other)
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        return _op("add", input, other, -_builtins.float(alpha))
    return _binary("sub", input, other * alpha)


subtract = sub


def where(condition: Tensor, input: _typing.Any, other: _typing.Any) -> Tensor:
    """condition ? input : other (condition is a bool tensor; scalars allowed).

    Example::

        >>> x = jag.tensor([-1.0, 2.0, -3.0])
        >>> jag.where(x > 0, x, 0.0)
        tensor([0.0000, 2.0000, 0.0000], dtype=float32, size=[3])
    """
    if not isinstance(condition, Tensor):
        raise TypeError("where: condition must be a jag.Tensor")
    ref = input if isinstance(input, Tensor) else other if isinstance(other, Tensor) else None
    if ref is None:
        input = tensor(input)
        other = tensor(other, dtype=input.dtype) if not isinstance(other, Tensor) else other
    else:
        if not isinstance(input, Tensor):
            input = _scalar_like(input, ref)
        if not isinstance(other, Tensor):
            other = _scalar_like(other, ref)
    return _op("where", condition, input, other)


def _dims(dim):
    if dim is None:
        return []
    if type(dim) is _builtins.int:
        return [dim]
    if isinstance(dim, (list, tuple)):
        return [_builtins.int(d) for d in dim]
    return [_operator_index(dim)]


def _make_reduction(name):
    def f(input: Tensor, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None,
          keepdim: _builtins.bool = False) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError("jag.%s: expected a jag.Tensor, got %s" % (name, type(input).__name__))
        if dim is None and input.is_nested and name in ("sum", "mean", "prod", "amax", "amin"):
            if keepdim:
                raise ValueError("jag.%s: keepdim=True needs dims; a nested tensor reduced over every dim is 0-d"
                                 % name)
            return nested._reduce_all(name, input)
        return _op(name, input, _dims(dim), _builtins.bool(keepdim))

    f.__name__ = name
    f.__doc__ = "%s over dim (an int, a list, or None for every dim), keepdim as torch." % name
    return f


sum = _make_reduction("sum")  # noqa: A001
mean = _make_reduction("mean")
prod = _make_reduction("prod")
amax = _make_reduction("amax")
amin = _make_reduction("amin")
logsumexp = _make_reduction("logsumexp")


def var(input: Tensor, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None,
        correction: _builtins.int = 1, keepdim: _builtins.bool = False,
        unbiased: _builtins.bool | None = None) -> Tensor:
    """The variance over ``dim`` (an int, a list, or None for every dim) with
    ``correction`` subtracted from the count (1: Bessel's correction), as torch;
    ``unbiased`` (torch's older flag) sets correction to 1 or 0.

    Example::

        >>> x = jag.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
        >>> jag.var(x, 1)
        tensor([1.0000, 4.0000], dtype=float32, size=[2])
        >>> jag.var(x, 1, correction=0)
        tensor([0.6667, 2.6667], dtype=float32, size=[2])
    """
    if unbiased is not None:
        correction = 1 if unbiased else 0
    return _op("var", input, _dims(dim), _builtins.int(correction), _builtins.bool(keepdim))


def std(input: Tensor, dim: _builtins.int | _typing.Sequence[_builtins.int] | None = None,
        correction: _builtins.int = 1, keepdim: _builtins.bool = False,
        unbiased: _builtins.bool | None = None) -> Tensor:
    """The standard deviation over ``dim`` (an int, a list, or None for every dim) with
    ``correction`` subtracted from the count (1: Bessel's correction), as torch;
    ``unbiased`` (torch's older flag) sets correction to 1 or 0.

    Example::

        >>> x = jag.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
        >>> jag.std(x, 1)
        tensor([1.0000, 2.0000], dtype=float32, size=[2])
        >>> jag.std(x, 1, correction=0)
        tensor([0.8165, 1.6330], dtype=float32, size=[2])
    """
    if unbiased is not None:
        correction = 1 if unbiased else 0
    return _op("std", input, _dims(dim), _builtins.int(correction), _builtins.bool(keepdim))


class _MinMax(tuple):
    """(values, indices), as torch.return_types.max."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def max(input: Tensor, dim: _typing.Any = None, keepdim: _builtins.bool = False) -> _typing.Any:  # noqa: A001
    """max(x): the largest element (0-d); max(x, dim): (values, indices); max(a, b): maximum.

    Example::

        >>> x = jag.tensor([[1.0, 5.0], [4.0, 2.0]])
        >>> jag.max(x)
        tensor(5.0000, dtype=float32, size=[])
        >>> values, indices = jag.max(x, 1)
        >>> values, indices
        (tensor([5.0000, 4.0000], dtype=float32, size=[2]), tensor([1, 0], dtype=int64, size=[2]))
        >>> jag.max(x, jag.tensor([3.0, 3.0]))
        tensor([[3.0000, 5.0000],
                [4.0000, 3.0000]], dtype=float32, size=[2, 2])
    """
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        return nested._reduce_all("max", input) if input.is_nested else _op("max", input, [], False)
    return _MinMax(_op("max_dim", input, _builtins.int(dim), _builtins.bool(keepdim)))


def min(input: Tensor, dim: _typing.Any = None, keepdim: _builtins.bool = False) -> _typing.Any:  # noqa: A001
    """min(x): the smallest element (0-d); min(x, dim): (values, indices); min(a, b): minimum.

    Example::

        >>> x = jag.tensor([[1.0, 5.0], [4.0, 2.0]])
        >>> jag.min(x)
        tensor(1.0000, dtype=float32, size=[])
        >>> jag.min(x, 1).indices
        tensor([0, 1], dtype=int64, size=[2])
    """
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        return nested._reduce_all("min", input) if input.is_nested else _op("min", input, [], False)
    return _MinMax(_op("min_dim", input, _builtins.int(dim), _builtins.bool(keepdim)))


_DIM_ALL = -1000


def argmax(input: Tensor, dim: _builtins.int | None = None, keepdim: _builtins.bool = False) -> Tensor:
    """The index of the largest element along ``dim`` (int64), or in the flattened tensor when dim is None.

    Example::

        >>> x = jag.tensor([[1.0, 5.0], [4.0, 2.0]])
        >>> jag.argmax(x, 1)
        tensor([1, 0], dtype=int64, size=[2])
        >>> jag.argmax(x)
        tensor(1, dtype=int64, size=[])
    """
    return _op("argmax", input, _DIM_ALL if dim is None else _builtins.int(dim), _builtins.bool(keepdim))


def argmin(input: Tensor, dim: _builtins.int | None = None, keepdim: _builtins.bool = False) -> Tensor:
    """The index of the smallest element along ``dim`` (int64), or in the flattened tensor when dim is None.

    Example::

        >>> x = jag.tensor([[1.0, 5.0], [4.0, 2.0]])
        >>> jag.argmin(x, 0)
        tensor([0, 1], dtype=int64, size=[2])
    """
    return _op("argmin", input, _DIM_ALL if dim is None else _builtins.int(dim), _builtins.bool(keepdim))


@_op_function("matmul")
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """The matrix product with torch's rules: vectors, matrices, and batches
    broadcast over the leading dims; a jagged (B, j, n) input times a dense
(n, p) matrix multiplies every component.

    Example::

        >>> jag.matmul(jag.tensor([[1.0, 2.0]]), jag.tensor([[3.0], [4.0]]))
        tensor([[11.0000]], dtype=float32, size=[1, 1])
    """
    return _op("matmul", input, other)


@_op_function("mm")
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """The product of two matrices (2-D tensors).

    Example::

        >>> a = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> jag.mm(a, jag.tensor([[1.0], [1.0]]))
        tensor([[3.0000],
                [7.0000]], dtype=float32, size=[2, 1])
    """
    return _op("mm", input, mat2)


@_op_function("bmm")
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix products: (B, n, m) @ (B, m, p) -> (B, n, p).

    Example::

        >>> a = jag.ones(2, 2, 3)
        >>> b = jag.ones(2, 3, 4)
        >>> jag.bmm(a, b).shape
        (2, 2, 4)
    """
    return _op("bmm", input, mat2)


def softmax(input: Tensor, dim: _builtins.int, dtype: _typing.Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim`` (``dtype`` converts the input first);
    along the ragged dim of a nested tensor each component is normalised over
its own length.

    Example::

        >>> jag.softmax(jag.tensor([0.0, 0.0]), dim=0)
        tensor([0.5000, 0.5000], dtype=float32, size=[2])
    """
    x = input if dtype is None else input.to(dtype)
    return _op("softmax", x, _builtins.int(dim))


def log_softmax(input: Tensor, dim: _builtins.int, dtype: _typing.Any = None) -> Tensor:
    """log(softmax(input, dim)), computed stably.

    Example::

        >>> jag.log_softmax(jag.tensor([0.0, 0.0]), 0)
        tensor([-0.6931, -0.6931], dtype=float32, size=[2])
    """
    x = input if dtype is None else input.to(dtype)
    return _op("log_softmax", x, _builtins.int(dim))


def transpose(input: Tensor, dim0: _builtins.int, dim1: _builtins.int) -> Tensor:
    """``input.transpose(dim0, dim1)``: dims dim0 and dim1 swapped, a view.

    Example::

        >>> jag.transpose(jag.tensor([[1, 2, 3], [4, 5, 6]]), 0, 1)
        tensor([[1, 4],
                [2, 5],
                [3, 6]], dtype=int64, size=[3, 2])
    """
    return input.transpose(dim0, dim1)


def reshape(input: Tensor, shape: _typing.Any) -> Tensor:
    """``input.reshape(shape)``.

    Example::

        >>> jag.reshape(jag.arange(6), (2, 3))
        tensor([[0, 1, 2],
                [3, 4, 5]], dtype=int64, size=[2, 3])
    """
    return input.reshape(shape)


def permute(input: Tensor, dims: _typing.Any) -> Tensor:
    """``input.permute(dims)``.

    Example::

        >>> jag.permute(jag.ones(2, 3, 4), (2, 0, 1)).shape
        (4, 2, 3)
    """
    return input.permute(dims)


def unsqueeze(input: Tensor, dim: _builtins.int) -> Tensor:
    """``input.unsqueeze(dim)``.

    Example::

        >>> jag.unsqueeze(jag.tensor([1.0, 2.0]), 0)
        tensor([[1.0000, 2.0000]], dtype=float32, size=[1, 2])
    """
    return input.unsqueeze(dim)


def squeeze(input: Tensor, dim: _typing.Any = None) -> Tensor:
    """``input.squeeze(dim)``.

    Example::

        >>> jag.squeeze(jag.ones(1, 3, 1)).shape
        (3,)
        >>> jag.squeeze(jag.ones(1, 3, 1), 0).shape
        (3, 1)
    """
    return input.squeeze(dim)


def clone(input: Tensor) -> Tensor:
    """``input.clone()``: a copy with its own memory.

    Example::

        >>> a = jag.tensor([1.0, 2.0])
        >>> b = jag.clone(a)
        >>> b[0] = 5.0
        >>> a, b
        (tensor([1.0000, 2.0000], dtype=float32, size=[2]), tensor([5.0000, 2.0000], dtype=float32, size=[2]))
    """
    return input.clone()


def cat(tensors: _typing.Sequence[Tensor], dim: _builtins.int = 0) -> Tensor:
    """The tensors joined along ``dim`` (same sizes elsewhere).

    Example::

        >>> jag.cat([jag.tensor([1, 2]), jag.tensor([3])])
        tensor([1, 2, 3], dtype=int64, size=[3])
    """
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of tensors")
    return _op("cat", tensors, _builtins.int(dim))


concat = concatenate = cat


def stack(tensors: _typing.Sequence[Tensor], dim: _builtins.int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new dim ``dim``.

    Example::

        >>> a, b = jag.tensor([1.0, 2.0]), jag.tensor([3.0, 4.0])
        >>> jag.stack([a, b])
        tensor([[1.0000, 2.0000],
                [3.0000, 4.0000]], dtype=float32, size=[2, 2])
        >>> jag.stack([a, b], dim=1).shape
        (2, 2)
    """
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of tensors")
    nd = tensors[0].ndim + 1
    d = dim + nd if dim < 0 else dim
    return cat([t.unsqueeze(d) for t in tensors], d)


def index_select(input: Tensor, dim: _builtins.int, index: Tensor) -> Tensor:
    """The entries of ``input`` along ``dim`` at the positions in ``index`` (a 1-D int tensor).

    Example::

        >>> x = jag.tensor([[1, 2], [3, 4], [5, 6]])
        >>> jag.index_select(x, 0, jag.tensor([2, 0]))
        tensor([[5, 6],
                [1, 2]], dtype=int64, size=[2, 2])
    """
    return _op("index_select", input, _builtins.int(dim), index)


def gather(input: Tensor, dim: _builtins.int, index: Tensor) -> Tensor:
    """out[i][j] = input[index[i][j]][j] (dim 0; likewise for other dims), as torch.gather.

    Example::

        >>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> jag.gather(x, 1, jag.tensor([[1, 0], [0, 0]]))
        tensor([[2.0000, 1.0000],
                [3.0000, 3.0000]], dtype=float32, size=[2, 2])
    """
    return _op("gather", input, _builtins.int(dim), index)


def unbind(input: Tensor, dim: _builtins.int = 0) -> _typing.Tuple[Tensor, ...]:
    """``input.unbind(dim)``: the slices (or components) along dim 0.

    Example::

        >>> jag.unbind(jag.tensor([[1, 2], [3, 4]]))
        (tensor([1, 2], dtype=int64, size=[2]), tensor([3, 4], dtype=int64, size=[2]))
        >>> nt = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
        >>> [c.shape for c in jag.unbind(nt)]
        [(2,), (1,)]
    """
    return input.unbind(dim)


def numel(input: Tensor) -> _builtins.int:
    """``input.numel()``: the number of elements.

    Example::

        >>> jag.numel(jag.ones(2, 3))
        6
    """
    return input.numel()


def allclose(a: _typing.Any, b: _typing.Any, rtol: _builtins.float = 1e-5,
             atol: _builtins.float = 1e-8) -> _builtins.bool:
    """True when |a - b| <= atol + rtol * |b| everywhere (dense tensors or arrays).

    Example::

        >>> jag.allclose(jag.tensor([1.0, 2.0]), jag.tensor([1.0, 2.000001]))
        True
        >>> jag.allclose(jag.tensor([1.0]), jag.tensor([1.1]), atol=0.2)
        True
    """
    import numpy as np

    return _builtins.bool(np.allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol))


# ---------------------------------------------------------------------------
# Grad mode
# ---------------------------------------------------------------------------


class no_grad:
    """Context manager (and decorator) turning grad mode off on this thread.

    Example::

        >>> w = jag.ones(2, requires_grad=True)
        >>> with jag.no_grad():
        ...     y = w * 2
        >>> y.requires_grad
        False
        >>> @jag.no_grad()
        ... def evaluate(x):
        ...     return (x * w).sum()
        >>> evaluate(jag.ones(2)).requires_grad
        False
    """

    def __enter__(self):
        self._prev = _C._set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with no_grad():
                return fn(*a, **k)

        return wrapper


class enable_grad(no_grad):
    """Context manager (and decorator) turning grad mode on on this thread.

    Example::

        >>> w = jag.ones(2, requires_grad=True)
        >>> with jag.no_grad():
        ...     with jag.enable_grad():
        ...         y = w * 2
        >>> y.requires_grad
        True
    """

    def __enter__(self):
        self._prev = _C._set_grad_enabled(True)
        return self


class set_grad_enabled:
    """Set grad mode on this thread to ``mode`` now; used as a context
    manager, restore the previous mode on exit.

    Example::

        >>> with jag.set_grad_enabled(False):
        ...     jag.is_grad_enabled()
        False
    """

    def __init__(self, mode: _builtins.bool) -> None:
        self._prev = _C._set_grad_enabled(_builtins.bool(mode))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False


def is_grad_enabled() -> _builtins.bool:
    """True when ops record the graph for autograd on this thread.

    Example::

        >>> jag.is_grad_enabled()
        True
        >>> with jag.no_grad():
        ...     jag.is_grad_enabled()
        False
    """
    return _C._is_grad_enabled()


from . import autograd, nested, nn, library, ops  # noqa: E402,F401
from . import optim  # noqa: E402,F401
from .compiler import compile, trace  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401


# --- begin: doc examples of the generated ops (written by apply_init_examples.py; edit it there) ---
# The ops below are made at import time (from the op table, _make_binary,
# _make_reduction), so their docstrings are generated; these examples are
# appended to them. Name (in jag, or Tensor.<member>) -> doctest text.
_GENERATED_EXAMPLES = {
    "Tensor.abs": (">>> x = jag.tensor([-1.5, 0.5, 2.0])\n"
                   ">>> x.abs()\n"
                   "tensor([1.5000, 0.5000, 2.0000], dtype=float32, size=[3])"),
    "Tensor.asinh": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                     ">>> x.asinh()\n"
                     "tensor([-0.8814, 0.0000, 0.8814], dtype=float32, size=[3])"),
    "Tensor.atan": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.atan()\n"
                    "tensor([-0.7854, 0.0000, 0.7854], dtype=float32, size=[3])"),
    "Tensor.ceil": (">>> x = jag.tensor([-1.5, 0.5, 2.0])\n"
                    ">>> x.ceil()\n"
                    "tensor([-1.0000, 1.0000, 2.0000], dtype=float32, size=[3])"),
    "Tensor.cos": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                   ">>> x.cos()\n"
                   "tensor([0.5403, 1.0000, 0.5403], dtype=float32, size=[3])"),
    "Tensor.cosh": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.cosh()\n"
                    "tensor([1.5431, 1.0000, 1.5431], dtype=float32, size=[3])"),
    "Tensor.erf": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                   ">>> x.erf()\n"
                   "tensor([-0.8427, 0.0000, 0.8427], dtype=float32, size=[3])"),
    "Tensor.erfc": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.erfc()\n"
                    "tensor([1.8427, 1.0000, 0.1573], dtype=float32, size=[3])"),
    "Tensor.exp": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                   ">>> x.exp()\n"
                   "tensor([0.3679, 1.0000, 2.7183], dtype=float32, size=[3])"),
    "Tensor.expm1": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                     ">>> x.expm1()\n"
                     "tensor([-0.6321, 0.0000, 1.7183], dtype=float32, size=[3])"),
    "Tensor.floor": (">>> x = jag.tensor([-1.5, 0.5, 2.0])\n"
                     ">>> x.floor()\n"
                     "tensor([-2.0000, 0.0000, 2.0000], dtype=float32, size=[3])"),
    "Tensor.gelu": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.gelu()\n"
                    "tensor([-0.1587, 0.0000, 0.8413], dtype=float32, size=[3])"),
    "Tensor.gelu_tanh": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                         ">>> x.gelu_tanh()\n"
                         "tensor([-0.1588, 0.0000, 0.8412], dtype=float32, size=[3])"),
    "Tensor.hardsigmoid": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                           ">>> x.hardsigmoid()\n"
                           "tensor([0.3333, 0.5000, 0.6667], dtype=float32, size=[3])"),
    "Tensor.hardswish": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                         ">>> x.hardswish()\n"
                         "tensor([-0.3333, 0.0000, 0.6667], dtype=float32, size=[3])"),
    "Tensor.log": (">>> x = jag.tensor([1.0, 4.0])\n"
                   ">>> x.log()\n"
                   "tensor([0.0000, 1.3863], dtype=float32, size=[2])"),
    "Tensor.log1p": (">>> x = jag.tensor([-0.5, 0.0, 1.0])\n"
                     ">>> x.log1p()\n"
                     "tensor([-0.6931, 0.0000, 0.6931], dtype=float32, size=[3])"),
    "Tensor.logsigmoid": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                          ">>> x.logsigmoid()\n"
                          "tensor([-1.3133, -0.6931, -0.3133], dtype=float32, size=[3])"),
    "Tensor.mish": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.mish()\n"
                    "tensor([-0.3034, 0.0000, 0.8651], dtype=float32, size=[3])"),
    "Tensor.neg": (">>> x = jag.tensor([-1.5, 0.5, 2.0])\n"
                   ">>> x.neg()\n"
                   "tensor([1.5000, -0.5000, -2.0000], dtype=float32, size=[3])"),
    "Tensor.reciprocal": (">>> x = jag.tensor([1.0, 4.0])\n"
                          ">>> x.reciprocal()\n"
                          "tensor([1.0000, 0.2500], dtype=float32, size=[2])"),
    "Tensor.relu": (">>> jag.tensor([-1.0, 0.0, 2.0]).relu()\n"
                    "tensor([0.0000, 0.0000, 2.0000], dtype=float32, size=[3])\n"
                    ">>> nt = jag.nested.nested_tensor([[-1.0, 2.0], [3.0]], layout=jag.jagged)\n"
                    ">>> [c.tolist() for c in nt.relu().unbind()]\n"
                    "[[0.0, 2.0], [3.0]]"),
    "Tensor.round": (">>> x = jag.tensor([0.5, 1.5, 2.6])\n"
                     ">>> x.round()\n"
                     "tensor([0.0000, 2.0000, 3.0000], dtype=float32, size=[3])"),
    "Tensor.rsqrt": (">>> x = jag.tensor([1.0, 4.0])\n"
                     ">>> x.rsqrt()\n"
                     "tensor([1.0000, 0.5000], dtype=float32, size=[2])"),
    "Tensor.selu": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.selu()\n"
                    "tensor([-1.1113, 0.0000, 1.0507], dtype=float32, size=[3])"),
    "Tensor.sigmoid": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                       ">>> x.sigmoid()\n"
                       "tensor([0.2689, 0.5000, 0.7311], dtype=float32, size=[3])"),
    "Tensor.sign": (">>> x = jag.tensor([-1.5, 0.5, 2.0])\n"
                    ">>> x.sign()\n"
                    "tensor([-1.0000, 1.0000, 1.0000], dtype=float32, size=[3])"),
    "Tensor.silu": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.silu()\n"
                    "tensor([-0.2689, 0.0000, 0.7311], dtype=float32, size=[3])"),
    "Tensor.sin": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                   ">>> x.sin()\n"
                   "tensor([-0.8415, 0.0000, 0.8415], dtype=float32, size=[3])"),
    "Tensor.sinh": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.sinh()\n"
                    "tensor([-1.1752, 0.0000, 1.1752], dtype=float32, size=[3])"),
    "Tensor.sqrt": (">>> x = jag.tensor([1.0, 4.0])\n"
                    ">>> x.sqrt()\n"
                    "tensor([1.0000, 2.0000], dtype=float32, size=[2])"),
    "Tensor.square": (">>> x = jag.tensor([-2.0, 3.0])\n"
                      ">>> x.square()\n"
                      "tensor([4.0000, 9.0000], dtype=float32, size=[2])"),
    "Tensor.tanh": (">>> x = jag.tensor([-1.0, 0.0, 1.0])\n"
                    ">>> x.tanh()\n"
                    "tensor([-0.7616, 0.0000, 0.7616], dtype=float32, size=[3])"),
    "Tensor.trunc": (">>> x = jag.tensor([-1.5, 0.5, 2.0])\n"
                     ">>> x.trunc()\n"
                     "tensor([-1.0000, 0.0000, 2.0000], dtype=float32, size=[3])"),
    "abs": (">>> jag.abs(jag.tensor([-1.5, 0.5, 2.0]))\n"
            "tensor([1.5000, 0.5000, 2.0000], dtype=float32, size=[3])"),
    "amax": (">>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
             ">>> jag.amax(x, 1)\n"
             "tensor([2.0000, 4.0000], dtype=float32, size=[2])\n"
             ">>> jag.amax(x)\n"
             "tensor(4.0000, dtype=float32, size=[])"),
    "amin": (">>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
             ">>> jag.amin(x, 1)\n"
             "tensor([1.0000, 3.0000], dtype=float32, size=[2])\n"
             ">>> jag.amin(x)\n"
             "tensor(1.0000, dtype=float32, size=[])"),
    "asinh": (">>> jag.asinh(jag.tensor([-1.0, 0.0, 1.0]))\n"
              "tensor([-0.8814, 0.0000, 0.8814], dtype=float32, size=[3])"),
    "atan": (">>> jag.atan(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([-0.7854, 0.0000, 0.7854], dtype=float32, size=[3])"),
    "ceil": (">>> jag.ceil(jag.tensor([-1.5, 0.5, 2.0]))\n"
             "tensor([-1.0000, 1.0000, 2.0000], dtype=float32, size=[3])"),
    "cos": (">>> jag.cos(jag.tensor([-1.0, 0.0, 1.0]))\n"
            "tensor([0.5403, 1.0000, 0.5403], dtype=float32, size=[3])"),
    "cosh": (">>> jag.cosh(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([1.5431, 1.0000, 1.5431], dtype=float32, size=[3])"),
    "div": (">>> jag.div(jag.tensor([1.0, 2.0, 3.0]), jag.tensor([2.0, 4.0, 0.5]))\n"
            "tensor([0.5000, 0.5000, 6.0000], dtype=float32, size=[3])"),
    "eq": (">>> jag.eq(jag.tensor([1.0, 2.0, 3.0]), 2.0)\n"
           "tensor([False, True, False], dtype=bool, size=[3])"),
    "erf": (">>> jag.erf(jag.tensor([-1.0, 0.0, 1.0]))\n"
            "tensor([-0.8427, 0.0000, 0.8427], dtype=float32, size=[3])"),
    "erfc": (">>> jag.erfc(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([1.8427, 1.0000, 0.1573], dtype=float32, size=[3])"),
    "exp": (">>> jag.exp(jag.tensor([0.0, 1.0]))\n"
            "tensor([1.0000, 2.7183], dtype=float32, size=[2])\n"
            ">>> nt = jag.nested.nested_tensor([[0.0, 1.0], [2.0]], layout=jag.jagged)\n"
            ">>> jag.exp(nt).values()  # elementwise ops keep the raggedness\n"
            "tensor([1.0000, 2.7183, 7.3891], dtype=float32, size=[3])"),
    "expm1": (">>> jag.expm1(jag.tensor([-1.0, 0.0, 1.0]))\n"
              "tensor([-0.6321, 0.0000, 1.7183], dtype=float32, size=[3])"),
    "floor": (">>> jag.floor(jag.tensor([-1.5, 0.5, 2.0]))\n"
              "tensor([-2.0000, 0.0000, 2.0000], dtype=float32, size=[3])"),
    "ge": (">>> jag.ge(jag.tensor([1.0, 2.0, 3.0]), 2.0)\n"
           "tensor([False, True, True], dtype=bool, size=[3])"),
    "gelu": (">>> jag.gelu(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([-0.1587, 0.0000, 0.8413], dtype=float32, size=[3])"),
    "gelu_tanh": (">>> jag.gelu_tanh(jag.tensor([-1.0, 0.0, 1.0]))\n"
                  "tensor([-0.1588, 0.0000, 0.8412], dtype=float32, size=[3])"),
    "gt": (">>> jag.gt(jag.tensor([1.0, 2.0, 3.0]), 2.0)\n"
           "tensor([False, False, True], dtype=bool, size=[3])"),
    "hardsigmoid": (">>> jag.hardsigmoid(jag.tensor([-1.0, 0.0, 1.0]))\n"
                    "tensor([0.3333, 0.5000, 0.6667], dtype=float32, size=[3])"),
    "hardswish": (">>> jag.hardswish(jag.tensor([-1.0, 0.0, 1.0]))\n"
                  "tensor([-0.3333, 0.0000, 0.6667], dtype=float32, size=[3])"),
    "le": (">>> jag.le(jag.tensor([1.0, 2.0, 3.0]), 2.0)\n"
           "tensor([True, True, False], dtype=bool, size=[3])"),
    "log": (">>> jag.log(jag.tensor([1.0, 4.0]))\n"
            "tensor([0.0000, 1.3863], dtype=float32, size=[2])"),
    "log1p": (">>> jag.log1p(jag.tensor([-0.5, 0.0, 1.0]))\n"
              "tensor([-0.6931, 0.0000, 0.6931], dtype=float32, size=[3])"),
    "logsigmoid": (">>> jag.logsigmoid(jag.tensor([-1.0, 0.0, 1.0]))\n"
                   "tensor([-1.3133, -0.6931, -0.3133], dtype=float32, size=[3])"),
    "logsumexp": (">>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
                  ">>> jag.logsumexp(x, 1)\n"
                  "tensor([2.3133, 4.3133], dtype=float32, size=[2])\n"
                  ">>> jag.logsumexp(x)\n"
                  "tensor(4.4402, dtype=float32, size=[])"),
    "lt": (">>> jag.lt(jag.tensor([1.0, 2.0, 3.0]), 2.0)\n"
           "tensor([True, False, False], dtype=bool, size=[3])"),
    "maximum": (">>> jag.maximum(jag.tensor([1.0, 5.0, 3.0]), jag.tensor([2.0, 2.0, 2.0]))\n"
                "tensor([2.0000, 5.0000, 3.0000], dtype=float32, size=[3])"),
    "mean": (">>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
             ">>> jag.mean(x, 1)\n"
             "tensor([1.5000, 3.5000], dtype=float32, size=[2])\n"
             ">>> jag.mean(x)\n"
             "tensor(2.5000, dtype=float32, size=[])"),
    "minimum": (">>> jag.minimum(jag.tensor([1.0, 5.0, 3.0]), jag.tensor([2.0, 2.0, 2.0]))\n"
                "tensor([1.0000, 2.0000, 2.0000], dtype=float32, size=[3])"),
    "mish": (">>> jag.mish(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([-0.3034, 0.0000, 0.8651], dtype=float32, size=[3])"),
    "mul": (">>> jag.mul(jag.tensor([[1.0, 2.0], [3.0, 4.0]]), jag.tensor([10.0, 100.0]))  # broadcast rows\n"
            "tensor([[10.0000, 200.0000],\n"
            "        [30.0000, 400.0000]], dtype=float32, size=[2, 2])"),
    "ne": (">>> jag.ne(jag.tensor([1.0, 2.0, 3.0]), 2.0)\n"
           "tensor([True, False, True], dtype=bool, size=[3])"),
    "neg": (">>> jag.neg(jag.tensor([-1.5, 0.5, 2.0]))\n"
            "tensor([1.5000, -0.5000, -2.0000], dtype=float32, size=[3])"),
    "pow": (">>> jag.pow(jag.tensor([1.0, 2.0, 3.0]), 2)\n"
            "tensor([1.0000, 4.0000, 9.0000], dtype=float32, size=[3])"),
    "prod": (">>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
             ">>> jag.prod(x, 1)\n"
             "tensor([2.0000, 12.0000], dtype=float32, size=[2])\n"
             ">>> jag.prod(x)\n"
             "tensor(24.0000, dtype=float32, size=[])"),
    "reciprocal": (">>> jag.reciprocal(jag.tensor([1.0, 4.0]))\n"
                   "tensor([1.0000, 0.2500], dtype=float32, size=[2])"),
    "relu": (">>> jag.relu(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([0.0000, 0.0000, 1.0000], dtype=float32, size=[3])"),
    "round": (">>> jag.round(jag.tensor([0.5, 1.5, 2.6]))\n"
              "tensor([0.0000, 2.0000, 3.0000], dtype=float32, size=[3])"),
    "rsqrt": (">>> jag.rsqrt(jag.tensor([1.0, 4.0]))\n"
              "tensor([1.0000, 0.5000], dtype=float32, size=[2])"),
    "sigmoid": (">>> jag.sigmoid(jag.tensor([-1.0, 0.0, 1.0]))\n"
                "tensor([0.2689, 0.5000, 0.7311], dtype=float32, size=[3])"),
    "sign": (">>> jag.sign(jag.tensor([-1.5, 0.5, 2.0]))\n"
             "tensor([-1.0000, 1.0000, 1.0000], dtype=float32, size=[3])"),
    "silu": (">>> jag.silu(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([-0.2689, 0.0000, 0.7311], dtype=float32, size=[3])"),
    "sin": (">>> jag.sin(jag.tensor([-1.0, 0.0, 1.0]))\n"
            "tensor([-0.8415, 0.0000, 0.8415], dtype=float32, size=[3])"),
    "sinh": (">>> jag.sinh(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([-1.1752, 0.0000, 1.1752], dtype=float32, size=[3])"),
    "sqrt": (">>> jag.sqrt(jag.tensor([1.0, 4.0]))\n"
             "tensor([1.0000, 2.0000], dtype=float32, size=[2])"),
    "square": (">>> jag.square(jag.tensor([-2.0, 3.0]))\n"
               "tensor([4.0000, 9.0000], dtype=float32, size=[2])"),
    "sum": (">>> x = jag.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
            ">>> jag.sum(x, 1)\n"
            "tensor([3.0000, 7.0000], dtype=float32, size=[2])\n"
            ">>> jag.sum(x)\n"
            "tensor(10.0000, dtype=float32, size=[])\n"
            ">>> nt = jag.nested.nested_tensor([[1.0, 2.0, 3.0], [4.0, 5.0]], layout=jag.jagged)\n"
            ">>> jag.sum(nt, 1)  # over the ragged dim: one sum per component\n"
            "tensor([6.0000, 9.0000], dtype=float32, size=[2])"),
    "tanh": (">>> jag.tanh(jag.tensor([-1.0, 0.0, 1.0]))\n"
             "tensor([-0.7616, 0.0000, 0.7616], dtype=float32, size=[3])"),
    "trunc": (">>> jag.trunc(jag.tensor([-1.5, 0.5, 2.0]))\n"
              "tensor([-1.0000, 0.0000, 2.0000], dtype=float32, size=[3])"),
}


def _add_generated_examples() -> None:
    for name, example in _GENERATED_EXAMPLES.items():
        owner, _, attr = name.rpartition(".")
        fn = (vars(Tensor) if owner == "Tensor" else globals()).get(attr)
        generated = getattr(fn, "__code__", None) is not None or isinstance(fn, _C.OpFunction)
        if not generated or ">>>" in (fn.__doc__ or ""):
            continue  # not a generated function here, or documented already
        indented = "\n".join("    " + line for line in example.split("\n"))
        fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\nExample::\n\n" + indented + "\n"


_add_generated_examples()
del _add_generated_examples, _GENERATED_EXAMPLES
# --- end: doc examples of the generated ops ---
