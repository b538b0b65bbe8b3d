"""jag.utils.data: torch.utils.data's names for ragged data.

- datasets: Dataset, TensorDataset;
- samplers: Sampler, SequentialSampler, RandomSampler, BatchSampler and
  TokenBudgetBatchSampler, which packs variable-length items into batches
  whose total length stays under a budget of tokens;
- collate functions: default_collate (torch's: stacks equal shapes),
  collate_nested (a jagged nested tensor where the first dim varies, no
  padding) and default_convert;
- DataLoader, which may prefetch batches on one background thread.

Random order comes from jag's own generator (jag.Generator, jag.rand), so a
C program with jag_generator_new and jag_rand_uniform can reproduce it.
"""
from __future__ import annotations

import collections.abc
import copy
import numbers
import queue
import threading
import typing as _typing

import numpy as np

import jag

__all__ = ["Dataset", "TensorDataset", "Sampler", "SequentialSampler", "RandomSampler", "BatchSampler",
           "TokenBudgetBatchSampler", "default_collate", "collate_nested", "default_convert", "DataLoader"]


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_generator(name, generator):
    if generator is not None and not isinstance(generator, jag.Generator):
        raise TypeError("%s: generator must be a jag.Generator or None, got %s" % (name, type(generator).__name__))


def _permutation(n, generator):
    """0..n-1 sorted by (u[i], i), u = jag.rand(n, dtype=jag.float64,
    generator=generator): one draw of n uniforms (none when n == 0)."""
    if n == 0:
        return []
    u = jag.rand(n, dtype=jag.float64, generator=generator).numpy()
    return np.argsort(u, kind="stable").tolist()  # stable: equal u keep index order


# ---------------------------------------------------------------------------
# datasets
# ---------------------------------------------------------------------------


class Dataset:
    """A map-style dataset, as torch.utils.data.Dataset: subclasses define
    ``__getitem__(index)`` and ``__len__()``.

    Example::

        >>> class Squares(jag.utils.data.Dataset):
        ...     def __len__(self):
        ...         return 4
        ...     def __getitem__(self, i):
        ...         return jag.tensor(float(i * i))
        >>> loader = jag.utils.data.DataLoader(Squares(), batch_size=2)
        >>> [b.tolist() for b in loader]
        [[0.0, 1.0], [4.0, 9.0]]
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")


class TensorDataset(Dataset):
    """Items are tuples ``(t[index] for t in tensors)``, as torch's
    TensorDataset. A jagged nested tensor works too: its item is a component
    (one variable-length sequence).

    Example::

        >>> ds = jag.utils.data.TensorDataset(jag.arange(4), jag.arange(4) * 10)
        >>> len(ds), ds[1]
        (4, (tensor(1, dtype=int64, size=[]), tensor(10, dtype=int64, size=[])))
    """

    def __init__(self, *tensors: jag.Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        for k, t in enumerate(tensors):
            if not isinstance(t, jag.Tensor):
                raise TypeError("TensorDataset: tensor %d must be a jag.Tensor, got %s" % (k, type(t).__name__))
            if t.ndim == 0:
                raise ValueError("TensorDataset: tensor %d is 0-d, expected a first dim to index" % k)
        n = tensors[0].shape[0]
        for k, t in enumerate(tensors):
            if t.shape[0] != n:
                raise ValueError("TensorDataset: size mismatch between tensors: tensor %d has %d items, tensor 0 "
                                 "has %d" % (k, t.shape[0], n))
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


# ---------------------------------------------------------------------------
# samplers
# ---------------------------------------------------------------------------


class Sampler:
    """Base class of samplers, as torch's: ``__iter__`` yields dataset
    indices (or lists of them, for a batch sampler); ``__len__`` is optional.

    Example::

        >>> class EvenFirst(jag.utils.data.Sampler):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         return iter(list(range(0, self.n, 2)) + list(range(1, self.n, 2)))
        ...     def __len__(self):
        ...         return self.n
        >>> ds = jag.utils.data.TensorDataset(jag.arange(5))
        >>> [b[0].tolist() for b in jag.utils.data.DataLoader(ds, batch_size=3, sampler=EvenFirst(5))]
        [[0, 2, 4], [1, 3]]
    """

    def __init__(self, data_source: _typing.Any = None) -> None:
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1, always in that order.

    Example::

        >>> list(jag.utils.data.SequentialSampler(["a", "b", "c"]))
        [0, 1, 2]
    """

    def __init__(self, data_source: _typing.Sized) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order, as torch's RandomSampler.

    Without replacement each round of n = len(data_source) indices is the
    permutation 0..n-1 sorted by (u[i], i), u = jag.rand(n,
    dtype=jag.float64, generator=g): num_samples // n full rounds, then the
    first num_samples % n indices of one more. With replacement the
    indices are min(floor(u[k] * n), n - 1) for u = jag.rand(num_samples,
    dtype=jag.float64, generator=g).

    g is ``generator`` (a jag.Generator; it advances, so each epoch
    differs), or when None a generator seeded at each ``iter()`` with
    floor(v * 2**53), v one float64 uniform from the calling thread's
    default generator (jag.manual_seed makes it reproducible).

    Example::

        >>> s = jag.utils.data.RandomSampler(range(5), generator=jag.Generator().manual_seed(0))
        >>> sorted(s), len(s)  # a permutation of 0..4
        ([0, 1, 2, 3, 4], 5)
        >>> r = jag.utils.data.RandomSampler(range(3), replacement=True, num_samples=6)
        >>> len(list(r)), all(0 <= i < 3 for i in r)
        (6, True)
    """

    def __init__(self, data_source: _typing.Sized, replacement: bool = False, num_samples: _typing.Optional[int] = None,
                 generator: _typing.Optional[jag.Generator] = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got replacement=%r" % (replacement,))
        if not _is_int(self.num_samples) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got num_samples=%r"
                             % (self.num_samples,))
        _check_generator("RandomSampler", generator)

    @property
    def num_samples(self) -> int:
        """How many indices one pass yields: num_samples, else len(data_source).

        Example::

            >>> jag.utils.data.RandomSampler(range(5)).num_samples
            5
            >>> jag.utils.data.RandomSampler(range(5), replacement=True, num_samples=8).num_samples
            8
        """
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = self.generator
        if g is None:
            v = jag.rand(1, dtype=jag.float64).tolist()[0]
            g = jag.Generator(int(v * 2.0 ** 53))
        if self.replacement:
            u = jag.rand(self.num_samples, dtype=jag.float64, generator=g).numpy()
            yield from np.minimum(np.floor(u * n).astype(np.int64), n - 1).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from _permutation(n, g)
        if self.num_samples % n:
            yield from _permutation(n, g)[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``, as
    torch's BatchSampler; drop_last drops a last, shorter list.

    Example::

        >>> seq = jag.utils.data.SequentialSampler(range(7))
        >>> list(jag.utils.data.BatchSampler(seq, batch_size=3, drop_last=False))
        [[0, 1, 2], [3, 4, 5], [6]]
        >>> list(jag.utils.data.BatchSampler(seq, batch_size=3, drop_last=True))
        [[0, 1, 2], [3, 4, 5]]
    """

    def __init__(self, sampler: _typing.Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not _is_int(batch_size) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got batch_size=%r" % (batch_size,))
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got drop_last=%r" % (drop_last,))
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


def _lengths_list(lengths):
    """The item lengths as a list of Python ints (a sequence of ints, a 1-D
    integer numpy array or jag tensor)."""
    name = "TokenBudgetBatchSampler"
    if isinstance(lengths, jag.Tensor):
        if lengths.is_nested or lengths.ndim != 1 or lengths.dtype not in (jag.int32, jag.int64):
            raise TypeError("%s: lengths must be a 1-D integer tensor, got %s of shape %s"
                            % (name, lengths.dtype, tuple(lengths.shape)))
        return lengths.tolist()
    if isinstance(lengths, np.ndarray):
        if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
            raise TypeError("%s: lengths must be a 1-D integer array, got dtype %s and shape %s"
                            % (name, lengths.dtype, lengths.shape))
        return [int(x) for x in lengths]
    if not isinstance(lengths, collections.abc.Sequence) or isinstance(lengths, (str, bytes)):
        raise TypeError("%s: lengths must be a sequence of ints, got %s" % (name, type(lengths).__name__))
    out = []
    for i, x in enumerate(lengths):
        if not _is_int(x):
            raise TypeError("%s: lengths[%d] must be an int, got %s" % (name, i, type(x).__name__))
        out.append(int(x))
    return out


class TokenBudgetBatchSampler(Sampler):
    """Batches of indices whose total length is at most ``max_tokens``.

    A nested batch is packed, so its work is the sum of its items' lengths
    (not max length * count, as with padding). Items of similar length are
    batched together; every item is in exactly one batch per epoch (with
    drop_last=False). Yields lists of indices; ``len()`` is the number of
    batches of the current epoch.

    Args:
        lengths: the length (tokens) of each item: a sequence of ints >= 0,
            a 1-D integer numpy array or jag tensor.
        max_tokens (int): the most tokens in a batch, > 0. An item longer
            than that raises ValueError here, naming the item.
        shuffle (bool): random order, different at each epoch (set_epoch);
            False: the order below without any draw.
        seed (int): the base seed of the shuffle.
        drop_last (bool): drop each bucket's last batch unless it is full.
        bucket_size (int or None): items per bucket; None: one bucket of
            every item (batches of the most similar lengths).
        max_batch_size (int or None): also at most this many items per batch.

    The algorithm for epoch e (set_epoch, default 0), with L[i] the length
    of item i and n the number of items:

    1. Generator (shuffle only): g = jag.Generator((seed + e) mod 2**64),
       the seed torch's DistributedSampler uses (C: jag_generator_new).
    2. Permutation: with shuffle, u = jag.rand(n, dtype=jag.float64,
       generator=g) (C: jag_rand_uniform over sizes {n}, low 0, high 1,
       JAG_FLOAT64, g) and order = 0..n-1 sorted by (u[i], i) ascending;
       without shuffle, order = 0..n-1. No draw when n == 0.
    3. Buckets: order is cut into consecutive runs of bucket_size items
       (the last may be shorter; bucket_size None: one run of all n).
       Each bucket is sorted by (L[i], position of i in order) ascending,
       i.e. by length with ties kept in permuted order.
    4. Greedy batches, bucket by bucket, never across buckets: walking a
       bucket's items in order, item i closes the current batch first when
       the batch is not empty and (its tokens + L[i] > max_tokens or it
       holds max_batch_size items); then i joins the batch. At the end of
       the bucket the last batch is kept if not empty, except that with
       drop_last it is kept only when full (tokens == max_tokens or
       max_batch_size items). Batches list indices in bucket order and are
       numbered 0..m-1 bucket after bucket.
    5. Batch order (shuffle only, m > 0): a second draw from the same g,
       v = jag.rand(m, dtype=jag.float64, generator=g) (C: a second
       jag_rand_uniform over sizes {m} on the same generator), and the
       batches are yielded in the order of b = 0..m-1 sorted by (v[b], b).

    The same (lengths, arguments, seed, epoch) always give the same batches,
    on every machine and in C.

    Example::

        >>> lengths = [3, 1, 4, 1, 5, 9, 2, 6]
        >>> s = jag.utils.data.TokenBudgetBatchSampler(lengths, max_tokens=10, shuffle=False)
        >>> batches = list(s)
        >>> batches, [sum(lengths[i] for i in b) for b in batches]
        ([[1, 3, 6, 0], [2, 4], [7], [5]], [7, 9, 6, 9])
    """

    def __init__(self, lengths: _typing.Any, max_tokens: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, bucket_size: _typing.Optional[int] = None,
                 max_batch_size: _typing.Optional[int] = None) -> None:
        name = "TokenBudgetBatchSampler"
        if not _is_int(max_tokens) or max_tokens <= 0:
            raise ValueError("%s: max_tokens must be a positive int, got %r" % (name, max_tokens))
        for arg, v in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(v, bool):
                raise ValueError("%s: %s must be a bool, got %r" % (name, arg, v))
        if not _is_int(seed):
            raise TypeError("%s: seed must be an int, got %s" % (name, type(seed).__name__))
        for arg, size in (("bucket_size", bucket_size), ("max_batch_size", max_batch_size)):
            if size is not None and (not _is_int(size) or size <= 0):
                raise ValueError("%s: %s must be a positive int or None, got %r" % (name, arg, size))
        lens = _lengths_list(lengths)
        for i, length in enumerate(lens):
            if length < 0:
                raise ValueError("%s: item %d has a negative length %d" % (name, i, length))
            if length > max_tokens:
                raise ValueError("%s: item %d has length %d > max_tokens=%d: it fits in no batch"
                                 % (name, i, length, max_tokens))
        self.lengths = lens
        self.max_tokens = int(max_tokens)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.bucket_size = bucket_size
        self.max_batch_size = max_batch_size
        self.epoch = 0
        self._cache = None  # (epoch, batches)

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch: the shuffle of epoch e is seeded with seed + e,
        as torch's DistributedSampler.set_epoch.

        Example::

            >>> s = jag.utils.data.TokenBudgetBatchSampler([2, 3, 1, 4, 2, 2], max_tokens=5, seed=0)
            >>> s.set_epoch(3)
            >>> a = list(s)
            >>> s.set_epoch(3)
            >>> list(s) == a, sorted(i for b in a for i in b)  # an epoch's batches are reproducible
            (True, [0, 1, 2, 3, 4, 5])
        """
        if not _is_int(epoch):
            raise TypeError("TokenBudgetBatchSampler.set_epoch: epoch must be an int, got %s"
                            % type(epoch).__name__)
        self.epoch = int(epoch)

    def _pack(self, bucket, out):
        """Step 4: greedy batches of one sorted bucket, appended to out."""
        L, cap, most = self.lengths, self.max_tokens, self.max_batch_size
        batch, tokens = [], 0
        for i in bucket:
            if batch and (tokens + L[i] > cap or len(batch) == most):
                out.append(batch)
                batch, tokens = [], 0
            batch.append(i)
            tokens += L[i]
        if batch and (not self.drop_last or tokens == cap or len(batch) == most):
            out.append(batch)

    def _batches(self):
        if self._cache is not None and self._cache[0] == self.epoch:
            return self._cache[1]
        n = len(self.lengths)
        g = jag.Generator((self.seed + self.epoch) % 2 ** 64) if self.shuffle else None
        order = _permutation(n, g) if self.shuffle else list(range(n))
        size = self.bucket_size or max(n, 1)
        batches = []
        for start in range(0, n, size):
            bucket = sorted(order[start:start + size], key=self.lengths.__getitem__)  # stable
            self._pack(bucket, batches)
        if self.shuffle:
            batches = [batches[b] for b in _permutation(len(batches), g)]
        self._cache = (self.epoch, batches)
        return batches

    def __iter__(self):
        """This epoch's batches (the epoch set when iter() is called)."""
        return iter([list(batch) for batch in self._batches()])

    def __len__(self):
        return len(self._batches())


# ---------------------------------------------------------------------------
# collate functions
# ---------------------------------------------------------------------------

_COLLATE_TYPE_ERROR = "%s: batch must contain tensors, numpy arrays, numbers, dicts or lists; found %s"


def _stack(batch, name):
    """torch's collate of tensors: one dense tensor, the items stacked on a
    new dim 0 (every shape equal)."""
    first = batch[0]
    for k, t in enumerate(batch):
        if not isinstance(t, jag.Tensor):
            raise TypeError("%s: entry %d is a %s among tensors" % (name, k, type(t).__name__))
        if t.is_nested:
            raise RuntimeError("%s: batches of nested tensors are not supported; pass a collate_fn that handles "
                               "them" % name)
        if tuple(t.shape) != tuple(first.shape):
            raise RuntimeError("%s: stack expects each tensor to be equal size, but got %s at entry 0 and %s at "
                               "entry %d" % (name, list(first.shape), list(t.shape), k))
    return jag.stack(list(batch), 0)


def _stack_or_nest(batch, name):
    """0-d tensors (labels, per-item scalars): stacked into a (B,) tensor.
    Tensors of one or more dims: a jagged nested tensor of shape
    (B, j, rest...) holding the items, unpadded, even when their lengths
    happen to be equal (a batch's type never depends on its data)."""
    first = batch[0]
    if all(isinstance(t, jag.Tensor) and not t.is_nested and t.ndim == 0 for t in batch):
        return _stack(batch, name)
    for k, t in enumerate(batch):
        if not isinstance(t, jag.Tensor):
            raise TypeError("%s: entry %d is a %s among tensors" % (name, k, type(t).__name__))
        if t.is_nested:
            raise RuntimeError("%s: batches of nested tensors are not supported; pass a collate_fn that handles "
                               "them" % name)
        if t.ndim == 0 or t.ndim != first.ndim or tuple(t.shape[1:]) != tuple(first.shape[1:]):
            raise RuntimeError("%s: entry %d has shape %s and entry 0 %s: tensors of a batch must match in every "
                               "dim but the first" % (name, k, list(t.shape), list(first.shape)))
    return jag.nested.nested_tensor(list(batch), layout=jag.jagged)


def _collate(batch, tensor_fn, name):
    """torch's collate recursion (torch.utils.data._utils.collate.collate),
    with tensor_fn for lists of tensors."""
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, jag.Tensor):
        return tensor_fn(batch, name)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_COLLATE_TYPE_ERROR % (name, elem.dtype))
        return tensor_fn([jag.tensor(b) for b in batch], name)
    if isinstance(elem, (np.bool_, np.number)):
        return jag.tensor(np.array(batch))
    if isinstance(elem, float):
        return jag.tensor(list(batch), dtype=jag.float64)
    if isinstance(elem, int):  # bools give a bool tensor, other ints int64
        return jag.tensor(list(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: _collate([d[key] for d in batch], tensor_fn, name) for key in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(fields)
                return clone
            return elem_type(fields)
        except TypeError:
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(_collate(list(s), tensor_fn, name) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("%s: each element in list of batch should be of equal size" % name)
        fields = [_collate(list(s), tensor_fn, name) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return fields  # a list, as torch
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, f in enumerate(fields):
                    clone[i] = f
                return clone
            return elem_type(fields)
        except TypeError:
            return fields
    raise TypeError(_COLLATE_TYPE_ERROR % (name, elem_type))


def default_collate(batch: _typing.Sequence[_typing.Any]) -> _typing.Any:
    """torch's default_collate: a list of items becomes one batch. Tensors
    (and numpy arrays) are stacked on a new dim 0 (equal shapes, else
    RuntimeError), floats become a float64 tensor, ints an int64 tensor
    (bools a bool tensor), strings stay a list; dicts, namedtuples, tuples
    and lists are collated field by field (a tuple gives a list).

    Example::

        >>> batch = [(jag.tensor([1.0, 2.0]), 0), (jag.tensor([3.0, 4.0]), 1)]
        >>> x, y = jag.utils.data.default_collate(batch)
        >>> x
        tensor([[1.0000, 2.0000],
                [3.0000, 4.0000]], dtype=float32, size=[2, 2])
        >>> y
        tensor([0, 1], dtype=int64, size=[2])
    """
    return _collate(batch, _stack, "default_collate")


def collate_nested(batch: _typing.Sequence[_typing.Any]) -> _typing.Any:
    """default_collate, except that tensors of one or more dims become a
    jagged nested tensor (jag.nested.nested_tensor(items,
    layout=jag.jagged)) with no padding, whatever their lengths:
    ``out.unbind()`` gives the items back. 0-d tensors and Python numbers
    are stacked as default_collate does (labels). Items differing in a dim
    other than the first raise RuntimeError.

    Example::

        >>> batch = [(jag.tensor([1.0, 2.0, 3.0]), 0), (jag.tensor([4.0]), 1)]
        >>> x, y = jag.utils.data.collate_nested(batch)
        >>> x.is_nested, [c.tolist() for c in x.unbind()]
        (True, [[1.0, 2.0, 3.0], [4.0]])
        >>> y
        tensor([0, 1], dtype=int64, size=[2])
    """
    return _collate(batch, _stack_or_nest, "collate_nested")


def _same_type_as(data: _typing.Any) -> _typing.Callable[..., _typing.Any]:
    """The class of ``data`` as a constructor (a Mapping or Sequence subclass
    built from one argument, as torch's default_convert builds it)."""
    return type(data)


def default_convert(data: _typing.Any) -> _typing.Any:
    """torch's default_convert (the collate without batching,
    batch_size=None): numpy arrays and numpy scalars become jag tensors,
    inside dicts, namedtuples, tuples and lists too; the rest is unchanged.

    Example::

        >>> jag.utils.data.default_convert({"x": np.array([1.0, 2.0]), "name": "a"})
        {'x': tensor([1.0000, 2.0000], dtype=float64, size=[2]), 'name': 'a'}
    """
    if isinstance(data, np.ndarray):
        return data if data.dtype.kind in "SaUO" else jag.tensor(data)
    if isinstance(data, (np.bool_, np.number)):
        return jag.tensor(np.array(data))
    if isinstance(data, (jag.Tensor, str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        fields = {key: default_convert(data[key]) for key in data}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(fields)
                return clone
            return _same_type_as(data)(fields)
        except TypeError:
            return fields
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence):
        elements = [default_convert(d) for d in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                seq_clone = copy.copy(data)
                for i, f in enumerate(elements):
                    seq_clone[i] = f
                return seq_clone
            return _same_type_as(data)(elements)
        except TypeError:
            return elements
    return data


# ---------------------------------------------------------------------------
# DataLoader
# ---------------------------------------------------------------------------


class DataLoader:
    """Batches of a map-style dataset, as torch.utils.data.DataLoader.

    Indices come from ``batch_sampler`` (e.g. a TokenBudgetBatchSampler),
    else from ``sampler`` (default: RandomSampler(dataset,
    generator=generator) with shuffle, else SequentialSampler) grouped by
    BatchSampler(sampler, batch_size, drop_last); batch_size=None yields
    single items through default_convert. Each batch is
    ``collate_fn([dataset[i] for i in indices])``, by default
    collate_nested: variable-length tensors become jagged nested tensors.

    num_workers > 0 uses ONE background thread (threads, not processes:
    nothing is pickled, and Python code in the dataset still holds the GIL
    while it runs) that fetches and collates the next batches into a queue
    of at most max(1, prefetch_factor * num_workers) batches while the
    caller uses the current one. The sampler is iterated on the caller's
    thread when the iterator is made, so the batches are the same with and
    without the thread; note that jag's default generator, grad mode and
    scopes are per thread, so a dataset drawing from jag's default
    generator draws from the background thread's. An exception raised in
    the thread is raised again by the caller's next() with its original
    traceback. An iterator dropped mid-epoch stops and joins its thread
    (the thread is a daemon in any case). ``timeout`` (seconds, 0: none)
    bounds each wait for a batch from the thread.

    Argument errors are torch's: ValueError for num_workers < 0,
    timeout < 0, prefetch_factor given with num_workers=0 or negative,
    sampler with shuffle, batch_sampler with batch_size != 1 / shuffle /
    sampler / drop_last, and batch_size=None with drop_last.

    Example::

        >>> class Sequences(jag.utils.data.Dataset):
        ...     def __init__(self):
        ...         self.items = [jag.arange(n) for n in (3, 1, 2, 4)]
        ...     def __len__(self):
        ...         return len(self.items)
        ...     def __getitem__(self, i):
        ...         return self.items[i]
        >>> for batch in jag.utils.data.DataLoader(Sequences(), batch_size=2):
        ...     print(batch.offsets().tolist(), batch.values().tolist())
        [0, 3, 4] [0, 1, 2, 0]
        [0, 2, 6] [0, 1, 0, 1, 2, 3]
    """

    def __init__(self, dataset: _typing.Any, batch_size: _typing.Optional[int] = 1,
                 shuffle: _typing.Optional[bool] = None, sampler: _typing.Any = None, batch_sampler: _typing.Any = None,
                 num_workers: int = 0,
                 collate_fn: _typing.Optional[_typing.Callable[[_typing.List[_typing.Any]], _typing.Any]] = None, *,
                 drop_last: bool = False, timeout: float = 0, generator: _typing.Optional[jag.Generator] = None,
                 prefetch_factor: _typing.Optional[int] = None) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to load on the "
                             "calling thread.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified with num_workers > 0 (the prefetch "
                             "thread); otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        _check_generator("DataLoader", generator)
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.timeout = timeout
        self.generator = generator
        if collate_fn is None:
            collate_fn = collate_nested if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        """An iterator over this epoch's batches."""
        if self.num_workers == 0:
            return _LoaderIter(self, iter(self._index_sampler))
        return _PrefetchLoaderIter(self)

    def __len__(self):
        """The number of batches: len(batch_sampler) (len(sampler) when
        batch_size is None)."""
        return len(self._index_sampler)


def _fetch(dataset, index, collate_fn, auto_collation):
    if auto_collation:
        return collate_fn([dataset[i] for i in index])
    return collate_fn(dataset[index])


class _LoaderIter:
    """Loads each batch on the calling thread when asked for it."""

    def __init__(self, loader, indices):
        self._loader = loader
        self._indices = indices

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        index = next(self._indices)
        ld = self._loader
        return _fetch(ld.dataset, index, ld.collate_fn, ld._auto_collation)


class _ExceptionWrapper:
    """An exception raised in the prefetch thread, carried to the caller."""

    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc


_END = object()  # the prefetch thread's last item: the epoch is over
_PUT_POLL_S = 0.05  # how often a blocked put looks at the stop event


def _put(out, item, stop):
    """Puts item on the bounded queue unless stop is set first; returns
    whether it was put."""
    while not stop.is_set():
        try:
            out.put(item, timeout=_PUT_POLL_S)
            return True
        except queue.Full:
            pass
    return False


def _prefetch_loop(dataset, indices, collate_fn, auto_collation, out, stop):
    """The prefetch thread: fetch, collate and queue each batch until the
    epoch ends, an exception is raised (queued) or stop is set. It holds no
    reference to the iterator, so a dropped iterator is collected."""
    try:
        for index in indices:
            if stop.is_set():
                return
            if not _put(out, _fetch(dataset, index, collate_fn, auto_collation), stop):
                return
    except BaseException as e:  # noqa: B902 (everything goes to the caller)
        _put(out, _ExceptionWrapper(e), stop)
        return
    _put(out, _END, stop)


class _PrefetchLoaderIter:
    """Batches made ahead on one daemon thread (see DataLoader)."""

    def __init__(self, loader):
        self._len = len(loader)
        self._timeout = loader.timeout
        self._queue = queue.Queue(maxsize=max(1, loader.prefetch_factor * loader.num_workers))
        self._stop = threading.Event()
        self._done = False
        indices = list(loader._index_sampler)  # drawn on the caller's thread
        self._thread = threading.Thread(
            target=_prefetch_loop, name="jag-data-prefetch", daemon=True,
            args=(loader.dataset, indices, loader.collate_fn, loader._auto_collation, self._queue, self._stop))
        self._thread.start()

    def __iter__(self):
        return self

    def __len__(self):
        return self._len

    def __next__(self):
        if self._done:
            raise StopIteration
        try:
            item = self._queue.get(timeout=self._timeout if self._timeout > 0 else None)
        except queue.Empty:
            self._shutdown()
            raise RuntimeError("DataLoader timed out after %s seconds" % self._timeout) from None
        if item is _END:
            self._shutdown()
            raise StopIteration
        if isinstance(item, _ExceptionWrapper):
            self._shutdown()
            raise item.exc  # its __traceback__ still holds the thread's frames
        return item

    def _shutdown(self):
        """Stops the thread, empties the queue and joins the thread."""
        if self._done:
            return
        self._done = True
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join()

    def __del__(self):
        if hasattr(self, "_thread"):
            self._shutdown()
