"""jag.utils.data: samplers, collate functions and DataLoader, checked
against torch.utils.data's documented semantics (written out as formulas
or hand-computed values here) and against the written algorithm of
TokenBudgetBatchSampler."""
import gc
import threading
import time
import traceback

import numpy as np
import pytest

import jag
from jag.utils.data import (BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler, TensorDataset,
                            TokenBudgetBatchSampler, collate_nested, default_collate)


def _lengths(seed, n, high):
    return np.random.RandomState(seed).randint(0, high + 1, size=n).tolist()


def _np(t):
    return np.asarray(t.numpy())


# ---------------------------------------------------------------------------
# TokenBudgetBatchSampler
# ---------------------------------------------------------------------------


def _reference_batches(L, max_tokens, shuffle, seed, epoch, drop_last, bucket_size, max_batch_size):
    """TokenBudgetBatchSampler's docstring, step by step, written apart from
    the implementation (plain Python sorts on explicit keys)."""
    n = len(L)
    g = jag.Generator((seed + epoch) % 2 ** 64) if shuffle else None
    if shuffle and n:
        u = jag.rand(n, dtype=jag.float64, generator=g).tolist()
        order = sorted(range(n), key=lambda i: (u[i], i))
    else:
        order = list(range(n))
    size = bucket_size if bucket_size else n
    buckets = [order[s:s + size] for s in range(0, n, size)] if n else []
    batches = []
    for bucket in buckets:
        pos = {i: p for p, i in enumerate(bucket)}
        bucket = sorted(bucket, key=lambda i: (L[i], pos[i]))
        cur, tok = [], 0
        for i in bucket:
            if cur and (tok + L[i] > max_tokens or (max_batch_size is not None and len(cur) == max_batch_size)):
                batches.append(cur)
                cur, tok = [], 0
            cur.append(i)
            tok += L[i]
        full = tok == max_tokens or (max_batch_size is not None and len(cur) == max_batch_size)
        if cur and (not drop_last or full):
            batches.append(cur)
    if shuffle and batches:
        v = jag.rand(len(batches), dtype=jag.float64, generator=g).tolist()
        batches = [batches[b] for b in sorted(range(len(batches)), key=lambda b: (v[b], b))]
    return batches


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
@pytest.mark.parametrize("bucket_size,max_batch_size", [(None, None), (32, None), (None, 6), (50, 4)])
def test_token_budget_respects_budget_and_covers_every_item(seed, bucket_size, max_batch_size):
    L = _lengths(seed, 300, 40)
    max_tokens = 64
    s = TokenBudgetBatchSampler(L, max_tokens, seed=seed, bucket_size=bucket_size, max_batch_size=max_batch_size)
    for epoch in range(3):
        s.set_epoch(epoch)
        batches = list(s)
        assert len(s) == len(batches)
        for b in batches:
            assert b and sum(L[i] for i in b) <= max_tokens
            if max_batch_size is not None:
                assert len(b) <= max_batch_size
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(L)))  # every item exactly once


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("bucket_size,max_batch_size", [(None, None), (16, None), (25, 3)])
def test_token_budget_follows_its_documented_algorithm(shuffle, drop_last, bucket_size, max_batch_size):
    L = _lengths(5, 200, 20)
    for seed, epoch in [(0, 0), (3, 2), (2 ** 64 - 1, 1)]:
        s = TokenBudgetBatchSampler(L, 32, shuffle=shuffle, seed=seed, drop_last=drop_last,
                                    bucket_size=bucket_size, max_batch_size=max_batch_size)
        s.set_epoch(epoch)
        assert list(s) == _reference_batches(L, 32, shuffle, seed, epoch, drop_last, bucket_size, max_batch_size)


def test_token_budget_hand_computed_without_shuffle():
    # buckets of 4 in index order, each sorted by length, then greedy under 10:
    # bucket [0..3] lengths 3,5,1,7 -> order 2(1),0(3),1(5),3(7): [2,0,1] = 9, [3] = 7
    # bucket [4..7] lengths 2,2,9,4 -> order 4,5,7,6: [4,5,7] = 8, [6] = 9
    L = [3, 5, 1, 7, 2, 2, 9, 4]
    s = TokenBudgetBatchSampler(L, 10, shuffle=False, bucket_size=4)
    assert list(s) == [[2, 0, 1], [3], [4, 5, 7], [6]]
    assert len(s) == 4
    # at most 2 items: [2,0] [1] | [4,5] [7] [6]
    s = TokenBudgetBatchSampler(L, 10, shuffle=False, bucket_size=4, max_batch_size=2)
    assert list(s) == [[2, 0], [1], [3], [4, 5], [7], [6]]


def test_token_budget_drop_last_keeps_only_full_last_batches():
    # one bucket sorted 2(3),0(4),1(4): [2,0] = 7, then [1] = 4 closed by the end: dropped
    assert list(TokenBudgetBatchSampler([4, 4, 3], 8, shuffle=False, drop_last=True)) == [[2, 0]]
    assert list(TokenBudgetBatchSampler([4, 4, 3], 8, shuffle=False)) == [[2, 0], [1]]
    # sorted 3(3),0(4),1(4),2(4): [3,0] = 7, [1,2] = 8 == max_tokens: full, kept
    assert list(TokenBudgetBatchSampler([4, 4, 4, 3], 8, shuffle=False, drop_last=True)) == [[3, 0], [1, 2]]
    # a last batch holding max_batch_size items is full too
    assert list(TokenBudgetBatchSampler([1, 1, 1, 1], 8, shuffle=False, drop_last=True,
                                        max_batch_size=2)) == [[0, 1], [2, 3]]


def test_token_budget_is_deterministic_per_seed_and_epoch():
    L = _lengths(11, 400, 30)
    kw = dict(max_tokens=60, bucket_size=40)
    a, b = TokenBudgetBatchSampler(L, seed=4, **kw), TokenBudgetBatchSampler(L, seed=4, **kw)
    epochs = []
    for epoch in range(3):
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        assert list(a) == list(b)
        assert list(a) == list(a)  # iterating again repeats the epoch
        epochs.append(list(a))
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2] and epochs[0] != epochs[2]
    a.set_epoch(0)
    assert list(a) == epochs[0]
    assert list(TokenBudgetBatchSampler(L, seed=5, **kw)) != epochs[0]
    # one bucket: the same lengths group together, yet the batch order changes per epoch
    c = TokenBudgetBatchSampler(L, 60, seed=4)
    e0 = list(c)
    c.set_epoch(1)
    assert list(c) != e0


def test_token_budget_batches_similar_lengths():
    # lengths uniform in 1..100, budget 1000: sorted into one bucket the
    # batches span a narrow band of lengths (mean max/min about 1.1), while
    # batches of the same sizes over a random permutation mix short and long
    # items (mean max/min above 10).
    L = (np.random.RandomState(0).randint(1, 101, size=2000)).tolist()
    batches = list(TokenBudgetBatchSampler(L, 1000, seed=3))
    perm = np.random.RandomState(1).permutation(len(L)).tolist()
    random_batches, k = [], 0
    for b in batches:
        random_batches.append(perm[k:k + len(b)])
        k += len(b)

    def mean_ratio(bs):
        return np.mean([max(L[i] for i in b) / min(L[i] for i in b) for b in bs if len(b) > 1])

    bucketed, random = mean_ratio(batches), mean_ratio(random_batches)
    assert bucketed < 1.5 and random > 10, (bucketed, random)


def test_token_budget_accepts_arrays_and_tensors():
    L = _lengths(2, 50, 9)
    ref = list(TokenBudgetBatchSampler(L, 20, seed=1))
    assert list(TokenBudgetBatchSampler(np.array(L, dtype=np.int32), 20, seed=1)) == ref
    assert list(TokenBudgetBatchSampler(jag.tensor(L, dtype=jag.int64), 20, seed=1)) == ref
    assert list(TokenBudgetBatchSampler(tuple(L), 20, seed=1)) == ref
    empty = TokenBudgetBatchSampler([], 20)
    assert list(empty) == [] and len(empty) == 0


def test_token_budget_errors():
    with pytest.raises(ValueError, match=r"item 3 has length 12 > max_tokens=10"):
        TokenBudgetBatchSampler([1, 2, 3, 12, 4], 10)
    with pytest.raises(ValueError, match=r"item 1 has a negative length -2"):
        TokenBudgetBatchSampler([1, -2], 10)
    for bad in (0, -5, 2.5, True, None):
        with pytest.raises(ValueError, match="max_tokens must be a positive int"):
            TokenBudgetBatchSampler([1], bad)
    with pytest.raises(TypeError, match=r"lengths\[1\] must be an int, got float"):
        TokenBudgetBatchSampler([1, 2.0], 10)
    with pytest.raises(TypeError, match="lengths must be a 1-D integer array"):
        TokenBudgetBatchSampler(np.array([1.0, 2.0]), 10)
    with pytest.raises(TypeError, match="lengths must be a 1-D integer tensor"):
        TokenBudgetBatchSampler(jag.tensor([1.0, 2.0]), 10)
    with pytest.raises(TypeError, match="lengths must be a sequence of ints"):
        TokenBudgetBatchSampler(5, 10)
    with pytest.raises(ValueError, match="bucket_size must be a positive int or None"):
        TokenBudgetBatchSampler([1], 10, bucket_size=0)
    with pytest.raises(ValueError, match="max_batch_size must be a positive int or None"):
        TokenBudgetBatchSampler([1], 10, max_batch_size=-1)
    with pytest.raises(ValueError, match="shuffle must be a bool"):
        TokenBudgetBatchSampler([1], 10, shuffle=1)
    with pytest.raises(TypeError, match="seed must be an int"):
        TokenBudgetBatchSampler([1], 10, seed=1.5)
    s = TokenBudgetBatchSampler([1], 10)
    with pytest.raises(TypeError, match="epoch must be an int"):
        s.set_epoch("1")
    assert s.epoch == 0


# ---------------------------------------------------------------------------
# torch's samplers
# ---------------------------------------------------------------------------


def test_sequential_and_batch_sampler_match_torch_docs():
    # torch's BatchSampler docstring: range(10) by 3 -> [[0,1,2],[3,4,5],[6,7,8],[9]],
    # drop_last=True -> without [9]; len = ceil(10/3) or floor(10/3)
    seq = SequentialSampler(range(10))
    assert list(seq) == list(range(10)) and len(seq) == 10
    b = BatchSampler(seq, 3, False)
    assert list(b) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]] and len(b) == 4
    b = BatchSampler(seq, 3, True)
    assert list(b) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]] and len(b) == 3
    # torch raises ValueError for a batch_size that is not a positive int
    # (bools included) and for a drop_last that is not a bool
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
            BatchSampler(seq, bad, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(seq, 2, 0)


def test_random_sampler_is_the_documented_permutation():
    n = 37
    s = RandomSampler(range(n), generator=jag.Generator(9))
    first, second = list(s), list(s)
    g = jag.Generator(9)
    expected = []
    for _ in range(2):  # the generator advances: one draw of n uniforms per epoch
        u = jag.rand(n, dtype=jag.float64, generator=g).tolist()
        expected.append(sorted(range(n), key=lambda i: (u[i], i)))
    assert [first, second] == expected and first != second
    assert len(s) == n
    # num_samples > n without replacement: whole permutations, then a prefix of one
    s = RandomSampler(range(5), num_samples=12, generator=jag.Generator(2))
    out = list(s)
    assert len(out) == 12 and sorted(out[:5]) == sorted(out[5:10]) == list(range(5))
    assert len(set(out[10:])) == 2


def test_random_sampler_with_replacement_and_default_generator():
    s = RandomSampler(range(6), replacement=True, num_samples=50, generator=jag.Generator(4))
    u = jag.rand(50, dtype=jag.float64, generator=jag.Generator(4)).tolist()
    assert list(s) == [min(int(np.floor(x * 6)), 5) for x in u]
    # without a generator: seeded from the thread's default generator, as
    # torch's RandomSampler draws its seed from torch's default generator
    s = RandomSampler(range(20))
    jag.manual_seed(3)
    a = list(s)
    jag.manual_seed(3)
    assert list(s) == a and sorted(a) == list(range(20))


def test_random_sampler_errors_as_torch():
    # torch: TypeError for a non-bool replacement, ValueError for num_samples <= 0
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        RandomSampler([])
    with pytest.raises(TypeError, match="generator must be a jag.Generator"):
        RandomSampler(range(3), generator=3)


# ---------------------------------------------------------------------------
# collate
# ---------------------------------------------------------------------------


def test_collate_nested_makes_jagged_tensors_of_the_items():
    rs = np.random.RandomState(0)
    for trailing in [(), (3,), (2, 4)]:
        items = [rs.randn(n, *trailing).astype(np.float32) for n in (3, 1, 5, 2)]
        out = collate_nested([jag.tensor(x) for x in items])
        assert out.is_nested and out.layout is jag.jagged
        assert out.shape[0] == 4 and tuple(out.shape[2:]) == trailing
        parts = out.unbind()
        assert len(parts) == 4
        for p, x in zip(parts, items):
            np.testing.assert_array_equal(_np(p), x)


def test_collate_nested_structures_and_labels():
    a = [np.arange(n, dtype=np.float32) for n in (2, 4)]
    out = collate_nested([(jag.tensor(a[0]), 0, 1.5, "x"), (jag.tensor(a[1]), 1, 2.5, "y")])
    assert isinstance(out, list) and len(out) == 4  # a tuple gives a list, as torch
    assert out[0].is_nested and [_np(p).tolist() for p in out[0].unbind()] == [x.tolist() for x in a]
    assert out[1].dtype is jag.int64 and out[1].tolist() == [0, 1]
    assert out[2].dtype is jag.float64 and out[2].tolist() == [1.5, 2.5]
    assert out[3] == ["x", "y"]
    d = collate_nested([{"tok": a[0], "y": True}, {"tok": a[1], "y": False}])  # numpy arrays too
    assert set(d) == {"tok", "y"} and d["tok"].is_nested and d["y"].dtype is jag.bool
    # equal lengths: still nested (a batch's type does not depend on its data)
    same = [np.full((2, 3), k, dtype=np.float32) for k in range(3)]
    nt = collate_nested([jag.tensor(x) for x in same])
    assert nt.is_nested and [_np(p).tolist() for p in nt.unbind()] == [x.tolist() for x in same]
    # 0-d tensors (labels): stacked, as torch.stack
    labels = collate_nested([jag.tensor(3), jag.tensor(1), jag.tensor(2)])
    assert not labels.is_nested and labels.tolist() == [3, 1, 2]


def test_collate_nested_errors():
    with pytest.raises(RuntimeError, match=r"collate_nested: entry 1 has shape \[4, 2\] and entry 0 \[2, 3\]"):
        collate_nested([jag.zeros(2, 3), jag.zeros(4, 2)])
    with pytest.raises(RuntimeError, match="entry 1 has shape"):
        collate_nested([jag.zeros(2), jag.zeros(2, 1)])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        collate_nested([[1, 2], [1]])
    with pytest.raises(TypeError, match="batch must contain tensors, numpy arrays, numbers, dicts or lists"):
        collate_nested([object(), object()])


def test_default_collate_is_torchs():
    # torch.utils.data.default_collate: tensors -> torch.stack(batch, 0);
    # unequal shapes -> RuntimeError "stack expects each tensor to be equal size";
    # floats -> float64 tensor; ints -> int64; namedtuples keep their type
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3) + k for k in range(4)]
    out = default_collate([jag.tensor(x) for x in xs])
    assert tuple(out.shape) == (4, 2, 3)
    np.testing.assert_array_equal(_np(out), np.stack(xs))
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2\] at entry 0 "
                                           r"and \[3\] at entry 1"):
        default_collate([jag.zeros(2), jag.zeros(3)])
    assert default_collate([1.0, 2.0]).dtype is jag.float64
    assert default_collate([1, 2]).dtype is jag.int64
    import collections

    P = collections.namedtuple("P", "x y")
    p = default_collate([P(1, 2.0), P(3, 4.0)])
    assert isinstance(p, P) and p.x.tolist() == [1, 3] and p.y.tolist() == [2.0, 4.0]
    nt = jag.nested.nested_tensor([jag.zeros(2), jag.zeros(3)], layout=jag.jagged)
    with pytest.raises(RuntimeError, match="batches of nested tensors are not supported"):
        default_collate([nt, nt])


# ---------------------------------------------------------------------------
# DataLoader
# ---------------------------------------------------------------------------


class Ragged(Dataset):
    """Item i: a float tensor of length L[i] holding i, i+1, ... and label i."""

    def __init__(self, lengths):
        self.lengths = lengths
        self.reads = 0

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        self.reads += 1
        return jag.arange(i, i + self.lengths[i], dtype=jag.float32), i


def _as_lists(batches):
    return [([_np(p).tolist() for p in x.unbind()], y.tolist()) for x, y in batches]


def test_loader_same_batches_with_and_without_prefetch_thread():
    L = [n + 1 for n in _lengths(3, 60, 12)]
    ds = Ragged(L)
    bs = TokenBudgetBatchSampler(L, 30, seed=2, bucket_size=20)
    plain = _as_lists(DataLoader(ds, batch_sampler=bs))
    threaded = _as_lists(DataLoader(ds, batch_sampler=bs, num_workers=1))
    few = _as_lists(DataLoader(ds, batch_sampler=bs, num_workers=2, prefetch_factor=1))
    assert plain == threaded == few
    # every batch holds the items its indices name
    for (parts, labels), idx in zip(plain, list(bs)):
        assert labels == idx
        assert parts == [list(range(i, i + L[i])) for i in idx]
    # shuffle without a generator: the sampler runs on the caller's thread,
    # so jag.manual_seed fixes the order with or without the thread
    jag.manual_seed(5)
    a = [y for _, y in _as_lists(DataLoader(ds, batch_size=4, shuffle=True))]
    jag.manual_seed(5)
    b = [y for _, y in _as_lists(DataLoader(ds, batch_size=4, shuffle=True, num_workers=1))]
    assert a == b and sorted(i for y in a for i in y) == list(range(60))


class Failing(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 3:
            raise KeyError("no item 3")
        return i


@pytest.mark.parametrize("num_workers", [0, 1])
def test_loader_propagates_dataset_exception(num_workers):
    before = threading.active_count()
    got = []
    with pytest.raises(KeyError, match="no item 3") as info:
        for batch in DataLoader(Failing(), batch_size=1, num_workers=num_workers):
            got.append(batch.tolist())
    assert got == [[0], [1], [2]]
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "__getitem__" in frames  # the original traceback, from the dataset
    del info
    gc.collect()
    assert threading.active_count() == before


def test_loader_abandoned_iterator_leaves_no_thread():
    ds = Ragged([3] * 200)
    before = threading.active_count()
    it = iter(DataLoader(ds, batch_size=2, num_workers=1))
    next(it)
    assert threading.active_count() == before + 1
    del it
    assert threading.active_count() == before
    for k, _ in enumerate(DataLoader(ds, batch_size=2, num_workers=3)):
        if k == 5:
            break
    gc.collect()
    assert threading.active_count() == before
    list(DataLoader(ds, batch_size=50, num_workers=1))  # a finished epoch joins its thread too
    assert threading.active_count() == before


def test_loader_prefetches_at_most_the_queue_size():
    # prefetch_factor * num_workers = 2 batches wait in the queue, plus one
    # the thread holds while it waits for room
    ds = Ragged([2] * 100)
    it = iter(DataLoader(ds, batch_size=1, num_workers=1, prefetch_factor=2))
    next(it)
    time.sleep(0.3)
    assert ds.reads <= 1 + 2 + 1
    del it


class Slow(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(0.3)
        return i


def test_loader_timeout():
    before = threading.active_count()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.05 seconds"):
        next(iter(DataLoader(Slow(), num_workers=1, timeout=0.05)))
    gc.collect()
    assert threading.active_count() == before


def test_loader_len_and_batch_size_none():
    ds = Ragged([2] * 10)
    assert len(DataLoader(ds, batch_size=3)) == 4  # ceil(10 / 3)
    assert len(DataLoader(ds, batch_size=3, drop_last=True)) == 3
    assert len(list(DataLoader(ds, batch_size=3, drop_last=True, num_workers=1))) == 3
    bs = TokenBudgetBatchSampler([2] * 10, 5, shuffle=False)  # pairs: 5 batches
    assert len(DataLoader(ds, batch_sampler=bs)) == 5 == len(list(DataLoader(ds, batch_sampler=bs)))
    it = iter(DataLoader(ds, batch_size=2, num_workers=1))
    assert len(it) == 5
    del it
    # batch_size=None: no batching, items through default_convert (numpy -> tensor)
    arrays = TensorDataset(jag.tensor(np.arange(12, dtype=np.float32).reshape(4, 3)))
    loader = DataLoader(arrays, batch_size=None)
    assert len(loader) == 4
    items = list(loader)
    assert [x[0].tolist() for x in items][1] == [3.0, 4.0, 5.0]


def test_tensor_dataset():
    x, y = jag.arange(12, dtype=jag.float32).reshape((4, 3)), jag.arange(4)
    ds = TensorDataset(x, y)
    assert len(ds) == 4 and ds[2][0].tolist() == [6.0, 7.0, 8.0] and ds[2][1].tolist() == 2
    with pytest.raises(ValueError, match="size mismatch between tensors: tensor 1 has 3 items"):
        TensorDataset(x, jag.arange(3))
    nt = jag.nested.nested_tensor([jag.ones(2), jag.ones(5), jag.ones(1)], layout=jag.jagged)
    batch = next(iter(DataLoader(TensorDataset(nt), batch_size=3)))
    assert batch[0].is_nested and [tuple(p.shape) for p in batch[0].unbind()] == [(2,), (5,), (1,)]


@pytest.mark.parametrize("kwargs,message", [
    # torch.utils.data.DataLoader raises ValueError with these messages
    (dict(num_workers=-1), "num_workers option should be non-negative"),
    (dict(timeout=-1), "timeout option should be non-negative"),
    (dict(prefetch_factor=2), "prefetch_factor option could only be specified"),
    (dict(num_workers=1, prefetch_factor=-1), "prefetch_factor option should be non-negative"),
    (dict(sampler=SequentialSampler(range(4)), shuffle=True), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0, 1]], batch_size=2), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0, 1]], shuffle=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0, 1]], sampler=[0, 1]), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0, 1]], drop_last=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
    (dict(batch_size=0), "batch_size should be a positive integer value"),
])
def test_loader_argument_errors_as_torch(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(Ragged([1] * 4), **kwargs)
