"""jag.nn.parallel: DistributedDataParallel over jag.distributed (MPI)."""
from __future__ import annotations

import contextlib
import typing as _typing

from .module import Module


class DistributedDataParallel(Module):
    """Data-parallel training of ``module`` over the ranks of jag.distributed
    (torch.nn.parallel.DistributedDataParallel's names).

    At construction rank 0's parameters are broadcast to every rank. As in
    torch, ``loss.backward()`` averages every parameter's gradient over the
    ranks by itself: parameters are grouped in buckets of at most
    ``bucket_cap_mb`` MiB (in reverse order), and a post-accumulate-grad hook
    on each parameter starts a bucket's all-reduce as soon as all of its
    gradients are final, while backward goes on (buckets start in the same
    order on every rank); the last one waits for all and writes the
    averages. Parameters that get no gradient in a step (torch's
    ``find_unused_parameters=False``: jag does not search for them) keep
    their buckets waiting: call ``sync_gradients()`` after such a backward
    on every rank. ``sync_gradients()`` is also the explicit path after a
    backward that already averaged (it returns at once). Inside
    ``no_sync()`` gradients accumulate locally; the first backward after
    it averages the sums.

    Parameters may be float32, float64, float16 or bfloat16; a bucket holds
    one dtype, and a half bucket is all-reduced in its own dtype, as torch's
    DDP reduces half gradients (each pairwise sum in float32 rounded to the
    dtype, the sum divided by the world size in float32 and rounded once).

    Args:
        module (Module): the model, the same on every rank.
        bucket_cap_mb (float): the most MiB per bucket (torch's 25).

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # under mpirun -np 2  # doctest: +SKIP
        >>> jag.manual_seed(0)
        >>> model = jag.nn.Linear(3, 1)
        >>> ddp = jag.nn.parallel.DistributedDataParallel(model)  # rank 0's parameters on every rank  # doctest: +SKIP
        >>> x = jag.ones(4, 3) * (dist.get_rank() + 1)  # each rank its own batch  # doctest: +SKIP
        >>> ddp(x).sum().backward()  # the gradients are averaged over the ranks  # doctest: +SKIP
        >>> model.weight.grad  # the mean of 4 * [1, 1, 1] and 4 * [2, 2, 2]  # doctest: +SKIP
        tensor([[6.0000, 6.0000, 6.0000]], dtype=float32, size=[1, 3])
    """

    def __init__(self, module: Module, bucket_cap_mb: float = 25, broadcast_buffers: bool = True) -> None:
        super().__init__()
        from .. import distributed as dist
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: call jag.distributed.init_process_group first")
        if bucket_cap_mb <= 0:
            raise ValueError("DistributedDataParallel: bucket_cap_mb must be > 0, got %r" % (bucket_cap_mb,))
        self.module = module
        self.bucket_cap_mb = bucket_cap_mb
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError("DistributedDataParallel: the module has no parameter that requires grad")
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_require_sync", True)
        lib = dist._lib
        object.__setattr__(self, "_ddp", lib._dist_ddp_new(params, int(bucket_cap_mb * (1 << 20))))
        object.__setattr__(self, "_lib", lib)
        if broadcast_buffers:
            for b in module.buffers():
                dist.broadcast(b, 0)

    def forward(self, *args: _typing.Any, **kwargs: _typing.Any) -> _typing.Any:
        """Run the wrapped module.

        Example::

            >>> import jag.distributed as dist
            >>> dist.init_process_group("mpi")  # doctest: +SKIP
            >>> model = jag.nn.Linear(3, 2)
            >>> ddp = jag.nn.parallel.DistributedDataParallel(model)  # doctest: +SKIP
            >>> ddp(jag.ones(5, 3)).shape  # model(x)  # doctest: +SKIP
            (5, 2)
        """
        return self.module(*args, **kwargs)

    def sync_gradients(self) -> None:
        """Average every parameter's gradient over the ranks (collective;
        skipped inside no_sync()).

        Example::

            >>> import jag.distributed as dist
            >>> dist.init_process_group("mpi")  # under mpirun -np 2  # doctest: +SKIP
            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2), jag.nn.Linear(2, 1))
            >>> ddp = jag.nn.parallel.DistributedDataParallel(model)  # doctest: +SKIP
            >>> model[0](jag.ones(1, 2)).sum().backward()  # the second Linear gets no gradient  # doctest: +SKIP
            >>> ddp.sync_gradients()  # averages what the pending buckets hold  # doctest: +SKIP
            >>> model[0].bias.grad  # doctest: +SKIP
            tensor([1.0000, 1.0000], dtype=float32, size=[2])
        """
        if self._require_sync:
            self._lib._dist_ddp_sync(self._ddp)

    @contextlib.contextmanager
    def no_sync(self) -> _typing.Iterator[None]:
        """A context in which backward and sync_gradients() do not
        communicate: gradients of several backward passes accumulate
        locally; the first backward (or sync) after it averages the sums.

        Example::

            >>> import jag.distributed as dist
            >>> dist.init_process_group("mpi")  # under mpirun -np 2  # doctest: +SKIP
            >>> model = jag.nn.Linear(2, 1)
            >>> ddp = jag.nn.parallel.DistributedDataParallel(model)  # doctest: +SKIP
            >>> with ddp.no_sync():  # doctest: +SKIP
            ...     ddp(jag.ones(1, 2) * (dist.get_rank() + 1)).sum().backward()  # local only
            >>> ddp(jag.ones(1, 2)).sum().backward()  # averages the sums: (1 + 1) and (2 + 1)  # doctest: +SKIP
            >>> model.weight.grad  # doctest: +SKIP
            tensor([[2.5000, 2.5000]], dtype=float32, size=[1, 2])
        """
        prev = self._require_sync
        object.__setattr__(self, "_require_sync", False)
        self._lib._dist_ddp_set_require_sync(self._ddp, False)
        try:
            yield
        finally:
            object.__setattr__(self, "_require_sync", prev)
            self._lib._dist_ddp_set_require_sync(self._ddp, prev)

    def bucket_indices(self) -> _typing.List[_typing.List[int]]:
        """The buckets as lists of indices into the module's parameters
        that require grad (in parameters() order).

        Example::

            >>> import jag.distributed as dist
            >>> dist.init_process_group("mpi")  # doctest: +SKIP
            >>> model = jag.nn.Sequential(jag.nn.Linear(4, 4), jag.nn.Linear(4, 1))
            >>> ddp = jag.nn.parallel.DistributedDataParallel(model)  # doctest: +SKIP
            >>> ddp.bucket_indices()  # one bucket of all four, in reverse order  # doctest: +SKIP
            [[3, 2, 1, 0]]
        """
        return self._lib._dist_ddp_buckets(self._ddp)
