"""jag.library: custom ops from Python, with torch.library's names.

    lib = jag.library.Library("custom_ns", "FRAGMENT")
    lib.define("custom_op_fw(Tensor x) -> Tensor")
    lib.impl("custom_op_fw", kernel, "CPU")        # or "Meta", "Autograd"

    @jag.library.register_nested_decomp(jag.ops.custom_ns.custom_op_fw)
    def custom_op_fw_nested(x): ...                # x is a nested jag.Tensor

    jag.ops.custom_ns.custom_op_fw(nt)

Ops live in libjag's op table (jag_op_define / jag_op_impl): a call goes
through the same dispatcher as built-in ops. A nested argument goes first to
a decomposition registered for the op (jag_subclass_register_decomp on the
"nested" class); the "Autograd" kernel runs instead of the others when an
input requires grad and grad mode is on (it usually calls a
jag.autograd.Function whose forward calls the op again, then below
autograd). Kernels receive jag tensors (``.numpy()`` views them without a
copy) and return a jag tensor, or a tuple for ops with several outputs. An
exception raised in a kernel reaches the caller of the op unchanged.

The op table is process-wide and append-only: an op, once defined, and its
kernels stay until the process ends (registering a key twice is an error;
a decomposition may be replaced).
"""
from __future__ import annotations

import re as _re
import typing as _typing

from . import _C
from .ops import OpOverload

__all__ = ["Library", "register_nested_decomp", "define", "impl"]

# what a decorator factory returns: a function that takes and returns a function
_Decorator = _typing.Callable[[_typing.Callable[..., _typing.Any]], _typing.Callable[..., _typing.Any]]

_KEYS = {"CPU": "CPU", "Meta": "Meta", "Autograd": "Autograd", "AutogradCPU": "Autograd",
         "CompositeExplicitAutograd": "CPU"}


def _qualify(ns, name):
    if isinstance(name, OpOverload):
        return name.name
    if not isinstance(name, str):
        raise TypeError("expected an op name or a jag.ops handle, got %s" % type(name).__name__)
    if "::" in name:
        return name
    if ns is None:
        raise ValueError("op name %r needs a namespace (ns::name)" % name)
    return "%s::%s" % (ns, name)


class Library:
    """A namespace of custom ops. kind: "DEF", "FRAGMENT" or "IMPL" (accepted
    for torch compatibility; every kind may define and implement).

    Example::

        >>> lib = jag.library.Library("doc_lib", "FRAGMENT")
        >>> lib
        Library('doc_lib', 'FRAGMENT')
        >>> lib.define("scale(Tensor x, float k) -> Tensor")
        'scale'
        >>> lib.impl("scale", lambda x, k: x * k, "CPU")
        >>> jag.ops.doc_lib.scale(jag.tensor([1.0, 2.0]), 3.0)
        tensor([3.0000, 6.0000], dtype=float32, size=[2])
    """

    def __init__(self, ns: str, kind: str = "FRAGMENT") -> None:
        if not isinstance(ns, str) or not _re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", ns):
            raise ValueError("Library: the namespace must be an identifier, got %r" % (ns,))
        if kind not in ("DEF", "FRAGMENT", "IMPL"):
            raise ValueError("Library: kind must be 'DEF', 'FRAGMENT' or 'IMPL', got %r" % (kind,))
        self.ns = ns
        self.kind = kind

    def define(self, schema: str) -> str:
        """Define an op from a schema, e.g. "my_op(Tensor x, float alpha) ->
        Tensor" (argument types: Tensor, Tensor?, Tensor[], int, int[],
        float, bool; returns Tensor or (Tensor, ...)). Returns its name.

        Example::

            >>> lib = jag.library.Library("doc_define")
            >>> lib.define("add_n(Tensor[] xs, int n) -> (Tensor, Tensor)")
            'add_n'
            >>> jag.ops.doc_define.add_n.schema
            'doc_define::add_n(Tensor[] xs, int n) -> (Tensor, Tensor)'
        """
        if not isinstance(schema, str):
            raise TypeError("define: the schema must be a str")
        head = schema.split("(", 1)[0]
        qual = schema.strip() if "::" in head else "%s::%s" % (self.ns, schema.strip())
        _C._op_define(qual)
        return qual.split("(", 1)[0].split("::", 1)[1].strip()

    def impl(self, op_name: str, fn: _typing.Callable[..., _typing.Any], dispatch_key: str = "CPU") -> None:
        """Give the op a Python kernel for dispatch_key: "CPU", "Meta" or
        "Autograd".

        Example::

            >>> lib = jag.library.Library("doc_impl")
            >>> lib.define("twice(Tensor x) -> Tensor")
            'twice'
            >>> lib.impl("twice", lambda x: jag.tensor(x.numpy() * 2), "CPU")  # numpy() views x without a copy
            >>> jag.ops.doc_impl.twice(jag.tensor([1.0, 5.0]))
            tensor([2.0000, 10.0000], dtype=float32, size=[2])
        """
        if dispatch_key not in _KEYS:
            raise ValueError("impl: dispatch_key must be 'CPU', 'Meta' or 'Autograd', got %r" % (dispatch_key,))
        if not callable(fn):
            raise TypeError("impl: the kernel must be callable, got %s" % type(fn).__name__)
        _C._op_impl(_qualify(self.ns, op_name), _KEYS[dispatch_key], fn)

    def register_nested_decomp(self, op_name: str) -> _Decorator:
        """Decorator: fn is the nested tensors' implementation of the op.

        Example::

            >>> lib = jag.library.Library("doc_decomp")
            >>> lib.define("square(Tensor x) -> Tensor")
            'square'
            >>> lib.impl("square", lambda x: x * x, "CPU")
            >>> @lib.register_nested_decomp("square")
            ... def square_nested(nt):  # pointwise: the op on the packed values, same offsets
            ...     return jag.nested.nested_tensor_from_jagged(jag.ops.doc_decomp.square(nt.values()), nt.offsets())
            >>> nt = jag.nested.nested_tensor([jag.tensor([1.0, 2.0]), jag.tensor([3.0])], layout=jag.jagged)
            >>> [c.tolist() for c in jag.ops.doc_decomp.square(nt).unbind()]
            [[1.0, 4.0], [9.0]]
        """
        return register_nested_decomp(_qualify(self.ns, op_name))

    def __repr__(self):
        return "Library(%r, %r)" % (self.ns, self.kind)


def register_nested_decomp(op: _typing.Any) -> _Decorator:
    """Decorator registering ``fn`` as the implementation of ``op`` (a
    jag.ops handle or an "ns::name" string) when a nested tensor is among its
    arguments: fn receives the op's arguments (nested tensors as they are)
    and returns the outputs, usually nested tensors rebuilt around the input's
    offsets. Registering again replaces the previous decomposition.

    Example::

        >>> jag.library.define("doc_reg::neg(Tensor x) -> Tensor")
        'neg'
        >>> jag.library.impl("doc_reg::neg", lambda x: -x)
        >>> @jag.library.register_nested_decomp(jag.ops.doc_reg.neg)
        ... def neg_nested(nt):
        ...     return jag.nested.nested_tensor_from_jagged(-nt.values(), nt.offsets())
        >>> nt = jag.nested.nested_tensor([jag.tensor([1.0]), jag.tensor([2.0, 3.0])], layout=jag.jagged)
        >>> [c.tolist() for c in jag.ops.doc_reg.neg(nt).unbind()]
        [[-1.0], [-2.0, -3.0]]
    """
    qual = _qualify(None, op)

    def decorator(fn):
        if not callable(fn):
            raise TypeError("register_nested_decomp: expected a function")
        _C._register_decomp("nested", qual, fn)
        return fn

    return decorator


def define(qualname_schema: str) -> str:
    """jag.library.define("ns::op(Tensor x) -> Tensor").

    Example::

        >>> jag.library.define("doc_def::clamp01(Tensor x) -> Tensor")
        'clamp01'
        >>> jag.ops.doc_def.clamp01
        jag.ops.doc_def.clamp01
    """
    ns, _, rest = qualname_schema.partition("::")
    return Library(ns.strip()).define(rest)


def impl(qualname: str, fn: _typing.Callable[..., _typing.Any], dispatch_key: str = "CPU") -> None:
    """Give the op ``qualname`` ("ns::op") the Python kernel ``fn`` for
    ``dispatch_key`` ("CPU", "Meta" or "Autograd"), as Library(ns).impl.

    Example::

        >>> jag.library.define("doc_impl2::half(Tensor x) -> Tensor")
        'half'
        >>> jag.library.impl("doc_impl2::half", lambda x: x * 0.5, "CPU")
        >>> jag.ops.doc_impl2.half(jag.tensor([4.0]))
        tensor([2.0000], dtype=float32, size=[1])
    """
    Library(qualname.split("::", 1)[0]).impl(qualname, fn, dispatch_key)
