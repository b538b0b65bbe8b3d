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
    load exceeds the lightest rank's by at most the longest item."""
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
        """The epoch whose global batches the next iteration splits."""
        self.global_sampler.set_epoch(epoch)

    def splits(self) -> _typing.List[_typing.List[_typing.List[int]]]:
        """This epoch's global batches, each split over every rank."""
        lengths = self.global_sampler.lengths
        return [split_by_tokens(b, lengths, self.num_replicas) for b in self.global_sampler]

    def __iter__(self):
        """This rank's part of each global batch of the epoch."""
        return iter([parts[self.rank] for parts in self.splits()])

    def __len__(self):
        return len(self.global_sampler)

    def imbalance(self) -> _typing.List[float]:
        """max / mean of the ranks' tokens, per global batch of the epoch
        (1.0 is perfect balance; a batch of no tokens counts as 1.0)."""
        lengths = self.global_sampler.lengths
        out = []
        for parts in self.splits():
            loads = [sum(int(lengths[i]) for i in part) for part in parts]
            mean = sum(loads) / len(loads)
            out.append(max(loads) / mean if mean > 0 else 1.0)
        return out
