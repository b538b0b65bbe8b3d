"""The token-budget batch sampler split over data-parallel ranks."""
from __future__ import annotations

import typing as _typing

from .data import Sampler, TokenBudgetBatchSampler


def split_by_tokens(batch: _typing.Sequence[int], lengths: _typing.Sequence[int],
                    num_replicas: int) -> _typing.List[_typing.List[int]]:
    """Split the indices of one global batch over ``num_replicas`` ranks so
    that each gets nearly the same number of tokens: items longest first
    (ties: the earlier position in ``batch``) each go to the least-loaded
    rank so far (ties: the lowest rank). Deterministic. Returns
    ``num_replicas`` lists of indices, each in ``batch``'s order. A rank's
    load exceeds the lightest rank's by at most the longest item.

    Example::

        >>> from jag.utils.distributed_sampler import split_by_tokens
        >>> lengths = [5, 1, 4, 2, 3]
        >>> split_by_tokens([0, 1, 2, 3, 4], lengths, num_replicas=2)  # 5 + 2 + 1 and 4 + 3 tokens
        [[0, 1, 3], [2, 4]]
    """
    if num_replicas < 1:
        raise ValueError("split_by_tokens: num_replicas must be >= 1, got %r" % (num_replicas,))
    load = [0] * num_replicas
    where = {}
    order = sorted(range(len(batch)), key=lambda k: (-int(lengths[batch[k]]), k))
    for k in order:
        r = min(range(num_replicas), key=lambda q: (load[q], q))
        where[k] = r
        load[r] += int(lengths[batch[k]])
    parts: _typing.List[_typing.List[_typing.Any]] = [[] for _ in range(num_replicas)]
    for k, idx in enumerate(batch):
        parts[where[k]].append(idx)
    return parts


class DistributedTokenBudgetSampler(Sampler):
    """TokenBudgetBatchSampler's global batches (at most ``max_tokens`` tokens
    over all ranks), each split over the ranks by split_by_tokens; yields
    this rank's part of each global batch. Every rank builds the same global
    batches (same lengths, arguments, seed and epoch), so every item is in
    exactly one rank's batch once per epoch. A global batch with fewer items
    than ranks leaves some ranks an empty list.

    Args:
        lengths, max_tokens, shuffle, seed, drop_last, bucket_size,
            max_batch_size: as TokenBudgetBatchSampler (max_tokens and
            max_batch_size count the global batch).
        num_replicas (int or None): the number of ranks (None:
            jag.distributed.get_world_size()).
        rank (int or None): this rank (None: jag.distributed.get_rank()).

    Example::

        >>> from jag.utils.distributed_sampler import DistributedTokenBudgetSampler
        >>> lengths = [3, 1, 4, 1, 5, 9, 2, 6]
        >>> ranks = [DistributedTokenBudgetSampler(lengths, max_tokens=12, num_replicas=2, rank=r, shuffle=False)
        ...          for r in range(2)]
        >>> list(ranks[0]), list(ranks[1])  # each rank's part of each global batch
        ([[1, 3, 2], [7], [5]], [[6, 0], [4], []])
    """

    def __init__(self, lengths: _typing.Any, max_tokens: int, num_replicas: _typing.Optional[int] = None,
                 rank: _typing.Optional[int] = None, shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 bucket_size: _typing.Optional[int] = None, max_batch_size: _typing.Optional[int] = None) -> None:
        if num_replicas is None or rank is None:
            from .. import distributed as dist
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError("DistributedTokenBudgetSampler: num_replicas must be an int >= 1, got %r"
                             % (num_replicas,))
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError("DistributedTokenBudgetSampler: rank must be in [0, %d), got %r" % (num_replicas, rank))
        self.global_sampler = TokenBudgetBatchSampler(lengths, max_tokens, shuffle=shuffle, seed=seed,
                                                      drop_last=drop_last, bucket_size=bucket_size,
                                                      max_batch_size=max_batch_size)
        self.num_replicas = num_replicas
        self.rank = rank

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose global batches the next iteration splits.

        Example::

            >>> from jag.utils.distributed_sampler import DistributedTokenBudgetSampler
            >>> s = DistributedTokenBudgetSampler([2, 3, 1, 4, 2, 2], max_tokens=6, num_replicas=2, rank=0, seed=1)
            >>> s.set_epoch(0); e0 = s.splits()
            >>> s.set_epoch(1); e1 = s.splits()
            >>> e0 != e1, sorted(i for batch in e1 for part in batch for i in part)  # reshuffled, each item once
            (True, [0, 1, 2, 3, 4, 5])
        """
        self.global_sampler.set_epoch(epoch)

    def splits(self) -> _typing.List[_typing.List[_typing.List[int]]]:
        """This epoch's global batches, each split over every rank.

        Example::

            >>> from jag.utils.distributed_sampler import DistributedTokenBudgetSampler
            >>> s = DistributedTokenBudgetSampler([3, 1, 4, 1, 5], max_tokens=8, num_replicas=2, rank=0, shuffle=False)
            >>> s.splits()  # per global batch: every rank's indices
            [[[0], [1, 3]], [[2], []], [[4], []]]
        """
        lengths = self.global_sampler.lengths
        return [split_by_tokens(b, lengths, self.num_replicas) for b in self.global_sampler]

    def __iter__(self):
        """This rank's part of each global batch of the epoch."""
        return iter([parts[self.rank] for parts in self.splits()])

    def __len__(self):
        return len(self.global_sampler)

    def imbalance(self) -> _typing.List[float]:
        """max / mean of the ranks' tokens, per global batch of the epoch
        (1.0 is perfect balance; a batch of no tokens counts as 1.0).

        Example::

            >>> from jag.utils.distributed_sampler import DistributedTokenBudgetSampler
            >>> s = DistributedTokenBudgetSampler([3, 1, 4, 1, 5], max_tokens=8, num_replicas=2, rank=0, shuffle=False)
            >>> [round(x, 4) for x in s.imbalance()]
            [1.2, 2.0, 2.0]
        """
        lengths = self.global_sampler.lengths
        out = []
        for parts in self.splits():
            loads = [sum(int(lengths[i]) for i in part) for part in parts]
            mean = sum(loads) / len(loads)
            out.append(max(loads) / mean if mean > 0 else 1.0)
        return out
