"""jag.save / jag.load: tensors and checkpoints in safetensors files.

The files are the `safetensors` package's format (header of dtypes, shapes and
data offsets, then raw little-endian data), so they load with
``safetensors.numpy.load_file`` and files it writes load here. A nested tensor
``x`` is stored as its inner tensors (``x.values``, ``x.offsets`` and, with
holes, ``x.lengths``; or ``x.buffer``, ``x.nested_sizes``,
``x.nested_strides``, ``x.storage_offsets`` for the strided layout) plus a
``jag.nested.x`` metadata entry, and loads back as the same nested tensor.

``jag.save`` takes what torch.save takes for a training checkpoint: a dict
whose values may be tensors, ints, floats, bools, None, strs and dicts, lists
and tuples of them, e.g. ``{"model": m.state_dict(), "optim":
opt.state_dict(), "step": n}``. Each tensor goes into the file under a
dotted name made of the keys and indices that lead to it ("model.0.weight",
"optim.state.0.exp_avg"); everything else, with each tensor replaced by its
name, is kept as JSON in the file's ``jag.object`` metadata entry, and
``jag.load`` rebuilds the same object: dicts in their key order, tuples as
tuples, floats bit for bit, one tensor given twice loaded as one tensor.
Files are checked as untrusted input: a malformed one raises ValueError (or
TypeError for an unsupported dtype) naming what is wrong.
"""
from __future__ import annotations

import json as _json
import math as _math
import os as _os
import typing as _typing
from collections import OrderedDict as _OrderedDict

from . import _C

__all__ = ["save", "load", "load_with_metadata"]

# Suffixes of the inner tensors a nested tensor x is stored as (x.values, ...).
_NESTED_PARTS = ("values", "offsets", "lengths", "buffer", "nested_sizes", "nested_strides", "storage_offsets")
_OBJECT_KEY = "jag.object"


def _path(path):
    return _os.fspath(path)


def _key_text(k):
    """A dict key as a part of a tensor's dotted name."""
    if isinstance(k, str):
        return k
    if isinstance(k, int) and not isinstance(k, bool):
        return str(k)
    return repr(k)


class _Flattener:
    """Walks an object: tensors get unique file names, the rest becomes the
    JSON structure that names them."""

    def __init__(self):
        import jag

        self.tensor_type = jag.Tensor
        self.names, self.tensors = [], []
        self.used = {"__metadata__"}
        self.by_id = {}  # id(tensor) -> its name: a tensor given twice is stored once

    def _unique(self, base, nested):
        base = base or "_"
        name, k = base, 0
        while name in self.used or (nested and any(name + "." + p in self.used for p in _NESTED_PARTS)):
            k += 1
            name = "%s~%d" % (base, k)
        self.used.add(name)
        if nested:
            self.used.update(name + "." + p for p in _NESTED_PARTS)
        return name

    def _tensor(self, t, path):
        name = self.by_id.get(id(t))
        if name is None:
            name = self._unique(".".join(path), t.is_nested)
            self.by_id[id(t)] = name
            self.names.append(name)
            self.tensors.append(t.detach() if t.requires_grad else t)
        node = {"tensor": name}
        if t.requires_grad:
            node["requires_grad"] = True
        return node

    def key(self, k, where):
        if k is None or isinstance(k, (bool, int, float, str)):
            return self.value(k, [], where)
        if isinstance(k, tuple):
            return {"tuple": [self.key(x, where) for x in k]}
        raise TypeError("jag.save: %s has a key of type %s, expected str, int, float, bool, None or a tuple of them"
                        % (where, type(k).__name__))

    def value(self, v, path, where=None):
        where = where or (repr(".".join(path)) if path else "the object")
        if v is None or isinstance(v, (bool, int)):
            return v
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("jag.save: the str at %s is not valid Unicode (it holds a lone surrogate)" % where)
            return v
        if isinstance(v, float):
            return float(v) if _math.isfinite(v) else {"float": repr(float(v))}
        if isinstance(v, self.tensor_type):
            return self._tensor(v, path)
        if isinstance(v, list):
            return [self.value(x, path + [str(i)]) for i, x in enumerate(v)]
        if isinstance(v, tuple):
            return {"tuple": [self.value(x, path + [str(i)]) for i, x in enumerate(v)]}
        if isinstance(v, dict):
            items = [[self.key(k, where), self.value(x, path + [_key_text(k)])] for k, x in v.items()]
            return {"ordered_dict" if isinstance(v, _OrderedDict) else "dict": items}
        raise TypeError("jag.save: %s is a %s, expected a jag.Tensor, an int, float, bool, str, None, or a dict, "
                        "list or tuple of them" % (where, type(v).__name__))


def save(obj: _typing.Mapping[_typing.Any, _typing.Any], path: _typing.Any,
         metadata: _typing.Optional[_typing.Mapping[str, str]] = None) -> None:
    """Save ``obj`` (torch.save for checkpoints) to the safetensors file ``path``.

    obj: a dict of names to jag tensors (dense or nested), or any dict whose
    values are tensors, ints, floats, bools, None, strs, and dicts, lists and
    tuples of them (a model's and an optimizer's state_dict, a step count).
    metadata: an optional mapping of str to str kept in the file's
    ``__metadata__`` (keys starting with "jag." are reserved). The file is
    written beside ``path`` and renamed over it, so a failure leaves an
    existing file untouched.

    Example::

        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = os.path.join(tmp.name, "checkpoint.safetensors")
        >>> nt = jag.nested.nested_tensor([jag.tensor([1.0, 2.0]), jag.tensor([3.0])], layout=jag.jagged)
        >>> jag.save({"w": jag.tensor([0.5, 1.5]), "nt": nt, "step": 3}, path)
        >>> back = jag.load(path)
        >>> back["w"], back["step"], back["nt"].offsets().tolist()
        (tensor([0.5000, 1.5000], dtype=float32, size=[2]), 3, [0, 2, 3])
        >>> tmp.cleanup()
    """
    if not hasattr(obj, "items"):
        raise TypeError("jag.save: expected a mapping (a dict of tensors, or of containers of them), got %s"
                        % type(obj).__name__)
    flat = _Flattener()
    structure = flat.value(obj if isinstance(obj, dict) else dict(obj.items()), [])
    meta = []
    if metadata is not None:
        for k, v in dict(metadata).items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("jag.save: metadata must map str to str")
            meta.append((k, v))
    description = _json.dumps(structure, separators=(",", ":"), allow_nan=False)
    _C._save(_path(path), flat.names, flat.tensors, meta, description)


class _Rebuilder:
    def __init__(self, tensors):
        self.tensors = tensors

    def _fail(self, what):
        raise ValueError("jag.load: metadata '%s' %s" % (_OBJECT_KEY, what))

    def key(self, node):
        v = self.value(node)
        try:
            hash(v)
        except TypeError:
            self._fail("has a dict key of type %s, expected a hashable value" % type(v).__name__)
        return v

    def _pairs(self, items, kind):
        if not isinstance(items, list) or not all(isinstance(p, list) and len(p) == 2 for p in items):
            self._fail("has a %s that is not a list of [key, value] pairs" % kind)
        return [(self.key(k), self.value(v)) for k, v in items]

    def value(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.value(x) for x in node]
        if not isinstance(node, dict) or not node:
            self._fail("holds %r, expected a JSON value jag.save writes" % (node,))
        if "tensor" in node and set(node) <= {"tensor", "requires_grad"}:
            name = node["tensor"]
            t = self.tensors.get(name) if isinstance(name, str) else None
            if t is None:
                self._fail("names the tensor %r, which the file does not hold" % (name,))
            if node.get("requires_grad") is True and not t.requires_grad:
                t.requires_grad_(True)
            return t
        if len(node) != 1:
            self._fail("holds an object with the fields %s, expected one of tensor, float, tuple, dict, ordered_dict"
                       % sorted(node))
        (kind, body), = node.items()
        if kind == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if kind == "tuple" and isinstance(body, list):
            return tuple(self.value(x) for x in body)
        if kind == "dict":
            return dict(self._pairs(body, kind))
        if kind == "ordered_dict":
            return _OrderedDict(self._pairs(body, kind))
        self._fail("holds an unknown or malformed %r entry" % (kind,))


def _rebuild(description, tensors):
    try:
        structure = _json.loads(description)
    except (ValueError, RecursionError) as e:
        raise ValueError("jag.load: metadata '%s' is not valid JSON: %s" % (_OBJECT_KEY, e)) from None
    try:
        return _Rebuilder(tensors).value(structure)
    except RecursionError:
        raise ValueError("jag.load: metadata '%s' is nested too deeply" % _OBJECT_KEY) from None


def load_with_metadata(path: _typing.Any, mmap: bool = False) -> _typing.Tuple[_typing.Any, _typing.Dict[str, str]]:
    """(the object, dict of the file's other metadata): as ``load``.

    Example::

        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = os.path.join(tmp.name, "model.safetensors")
        >>> jag.save({"w": jag.ones(2)}, path, metadata={"epoch": "7"})
        >>> obj, meta = jag.serialization.load_with_metadata(path)
        >>> obj["w"], meta["epoch"]
        (tensor([1.0000, 1.0000], dtype=float32, size=[2]), '7')
        >>> tmp.cleanup()
    """
    items, meta, description = _C._load(_path(path), bool(mmap))
    tensors = dict(items)
    obj = tensors if description is None else _rebuild(description, tensors)
    return obj, dict(meta)


def load(path: _typing.Any, mmap: bool = False) -> _typing.Any:
    """Load what ``jag.save`` wrote to ``path`` (torch.load's role).

    A file jag.save wrote gives back the same object (the dict with its
    nested containers, numbers and strings); any other safetensors file a
    dict of name -> tensor, sorted by name. mmap=True: zero-copy tensors over
    a private mapping of the file (read-only for jag's in-place ops; the
    mapping lives as long as any of them does). mmap=False: tensors own
    copies.

    Example::

        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = os.path.join(tmp.name, "weights.safetensors")
        >>> jag.save({"w": jag.tensor([[1, 2], [3, 4]])}, path)
        >>> w = jag.load(path, mmap=True)["w"]
        >>> w.tolist(), w.is_read_only()
        ([[1, 2], [3, 4]], True)
        >>> del w
        >>> tmp.cleanup()
    """
    return load_with_metadata(path, mmap)[0]


def is_read_only(t: _typing.Any) -> bool:
    """True when jag refuses to write into t's memory (a file mapped by
    ``load(mmap=True)``, a nested tensor's offsets)."""
    return _C._is_read_only(t)
