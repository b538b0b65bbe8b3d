"""jag.ops: every op by name, as torch.ops.

``jag.ops.custom_ns.custom_op_fw`` is the op ``custom_ns::custom_op_fw``
defined with jag.library (calling it dispatches through jag_op_call, so
autograd, nested decompositions and kernels all apply); ``jag.ops.aten.sin``
(or ``jag.ops.jag.sin``) is the built-in op ``sin``. ``.default`` is the op
itself (torch's overload name), so seed code reads the same.
"""
from __future__ import annotations

import typing as _typing

from . import _C

__all__ = ["OpOverload"]


class OpOverload:
    """A callable handle on one op: ``op(*args)`` calls it with boxed
    arguments (tensors, ints, floats, bools, None, lists).

    Example::

        >>> op = jag.ops.aten.sin
        >>> op, op.name
        (jag.ops.sin, 'sin')
        >>> op(jag.tensor([0.0]))
        tensor([0.0000], dtype=float32, size=[1])
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args):
        return _C._op(self.name, *args)

    @property
    def default(self) -> OpOverload:
        """self (torch's overload packet ``op.default``).

        Example::

            >>> jag.ops.aten.mul.default is jag.ops.aten.mul
            True
            >>> jag.ops.aten.mul.default(jag.tensor([2.0]), jag.tensor([3.0]))
            tensor([6.0000], dtype=float32, size=[1])
        """
        return self

    @property
    def schema(self) -> _typing.Optional[str]:
        """The op's schema, as text.

        Example::

            >>> jag.library.define("doc_schema::axpy(Tensor x, Tensor y, float a) -> Tensor")
            'axpy'
            >>> jag.ops.doc_schema.axpy.schema
            'doc_schema::axpy(Tensor x, Tensor y, float a) -> Tensor'
        """
        return _C._op_info(self.name)[1]

    def __repr__(self):
        return "jag.ops.%s" % self.name.replace("::", ".")

    def __eq__(self, other):
        return isinstance(other, OpOverload) and other.name == self.name

    def __hash__(self):
        return hash(("jag.op", self.name))


_BUILTIN_NAMESPACES = ("aten", "jag")


class _Namespace:
    def __init__(self, ns):
        self._ns = ns

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        qual = name if self._ns in _BUILTIN_NAMESPACES else "%s::%s" % (self._ns, name)
        if not _C._op_exists(qual):
            raise AttributeError("jag.ops.%s has no op %r (define it with jag.library.Library(%r).define(...))"
                                 % (self._ns, name, self._ns))
        op = OpOverload(qual)
        setattr(self, name, op)
        return op

    def __repr__(self):
        return "jag.ops.%s" % self._ns


_namespaces: _typing.Dict[str, _Namespace] = {}


def __getattr__(ns):
    if ns.startswith("__"):
        raise AttributeError(ns)
    if ns not in _namespaces:
        _namespaces[ns] = _Namespace(ns)
    return _namespaces[ns]
