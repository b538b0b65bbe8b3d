"""jag.save / jag.load: named tensors in safetensors files.

The files are the `safetensors` package's format (header of dtypes, shapes and
data offsets, then raw little-endian data), so they load with
``safetensors.numpy.load_file`` and files it writes load here. A nested tensor
``x`` is stored as its inner tensors (``x.values``, ``x.offsets`` and, with
holes, ``x.lengths``; or ``x.buffer``, ``x.nested_sizes``,
``x.nested_strides``, ``x.storage_offsets`` for the strided layout) plus a
``jag.nested.x`` metadata entry, and loads back as the same nested tensor.
Files are checked as untrusted input: a malformed one raises ValueError (or
TypeError for an unsupported dtype) naming what is wrong.
"""
import os as _os

from . import _C

__all__ = ["save", "load", "load_with_metadata"]


def _path(path):
    return _os.fspath(path)


def save(tensors, path, metadata=None):
    """Write a mapping of names to jag tensors (dense or nested) to ``path``.

    metadata: an optional mapping of str to str kept in the file's
    ``__metadata__`` (keys starting with "jag." are reserved). The file is
    written beside ``path`` and renamed over it, so a failure leaves an
    existing file untouched."""
    import jag

    if not hasattr(tensors, "items"):
        raise TypeError("jag.save: expected a mapping of names to tensors, got %s" % type(tensors).__name__)
    names, values = [], []
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise TypeError("jag.save: names must be str, got %s" % type(k).__name__)
        if not isinstance(v, jag.Tensor):
            raise TypeError("jag.save: %r is a %s, expected a jag.Tensor" % (k, type(v).__name__))
        names.append(k)
        values.append(v.detach() if v.requires_grad else v)
    meta = []
    if metadata is not None:
        for k, v in dict(metadata).items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("jag.save: metadata must map str to str")
            meta.append((k, v))
    _C._save(_path(path), names, values, meta)


def load_with_metadata(path, mmap=False):
    """(dict of name -> tensor, dict of the file's other metadata)."""
    items, meta = _C._load(_path(path), bool(mmap))
    return dict(items), dict(meta)


def load(path, mmap=False):
    """A dict of name -> tensor from the safetensors file at ``path``.

    mmap=True: zero-copy tensors over a private mapping of the file (read-only
    for jag's in-place ops; the mapping lives as long as any of them does).
    mmap=False: tensors own copies."""
    return load_with_metadata(path, mmap)[0]


def is_read_only(t):
    return _C._is_read_only(t)
