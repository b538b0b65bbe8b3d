"""jag.distributed: torch.distributed's names over MPI.

Start the program with mpirun (``mpirun -np 4 python train.py``) and call
``init_process_group("mpi")``; every rank then runs the same collectives in
the same order. Collectives work in place on dense tensors and on nested
tensors' packed values (the C API, jag.h, documents every rule: dtypes
float32 / float64 / float16 / bfloat16 / int32 / int64, the half types
summed in float32 and rounded once per sum, the header exchanged before each payload
so that ranks disagreeing on dtype or size all raise instead of hanging,
what happens when a rank dies).
"""
from __future__ import annotations

import typing as _typing

from . import _C

__all__ = ["ReduceOp", "is_available", "is_mpi_available", "is_initialized", "init_process_group",
           "destroy_process_group", "get_rank", "get_world_size", "barrier", "all_reduce", "broadcast",
           "all_gather", "reduce_scatter_tensor"]


_lib = _C


class ReduceOp:
    """Reduction ops of all_reduce and reduce_scatter_tensor (torch's
    ReduceOp.SUM, AVG, MAX, MIN; AVG divides the sum by the world size).

    Example::

        >>> import jag.distributed as dist
        >>> dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX, dist.ReduceOp.MIN
        (0, 1, 2, 3)
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> t = jag.tensor([1.0, 4.0]) * (dist.get_rank() + 1)  # doctest: +SKIP
        >>> dist.all_reduce(t, op=dist.ReduceOp.AVG)  # doctest: +SKIP
        >>> t  # under mpirun -np 2: the mean of [1, 4] and [2, 8]  # doctest: +SKIP
        tensor([1.5000, 6.0000], dtype=float32, size=[2])
    """
    SUM = 0
    AVG = 1
    MAX = 2
    MIN = 3


def is_available() -> bool:
    """True when jag was built with MPI (torch.distributed.is_available).

    Example::

        >>> import jag.distributed as dist
        >>> dist.is_available() == dist.is_mpi_available()  # True when jag was built with MPI
        True
        >>> world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        >>> world  # a single process, outside mpirun
        1
    """
    return _lib is not None and _lib._dist_is_available()


def is_mpi_available() -> bool:
    """True when the MPI backend is available (the only backend).

    Example::

        >>> import jag.distributed as dist
        >>> dist.is_mpi_available() == dist.is_available()  # MPI is the only backend
        True
    """
    return is_available()


def is_initialized() -> bool:
    """True between init_process_group and destroy_process_group.

    Example::

        >>> import jag.distributed as dist
        >>> dist.is_initialized()  # before init_process_group
        False
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> dist.is_initialized()  # doctest: +SKIP
        True
    """
    return _lib is not None and _lib._dist_is_initialized()


def _require():
    if not is_available():
        raise RuntimeError("jag.distributed: jag was built without MPI (install libopenmpi-dev and rebuild)")
    if not _lib._dist_is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return _lib


def _no_group(fn, group, async_op):
    if group is not None:
        raise NotImplementedError("jag.distributed.%s: only the default group (group=None)" % fn)
    if async_op:
        raise NotImplementedError("jag.distributed.%s: async_op=True is not supported" % fn)


def init_process_group(backend: str = "mpi", init_method: _typing.Optional[str] = None, world_size: int = -1,
                       rank: int = -1, **kwargs: _typing.Any) -> None:
    """Join the job mpirun started (torch's init_process_group with the
    "mpi" backend: rank and world size come from the launcher; passing
    other values than theirs raises ValueError).

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # started by mpirun -np 2  # doctest: +SKIP
        >>> dist.get_rank(), dist.get_world_size()  # on rank 0  # doctest: +SKIP
        (0, 2)
        >>> dist.init_process_group("nccl")
        Traceback (most recent call last):
            ...
        ValueError: jag.distributed.init_process_group: backend 'nccl' is not supported; use 'mpi'
    """
    if backend not in ("mpi", None):
        raise ValueError("jag.distributed.init_process_group: backend %r is not supported; use 'mpi'" % (backend,))
    if not is_available():
        raise RuntimeError("jag.distributed.init_process_group: jag was built without MPI")
    _lib._dist_init()
    for name, want, got in (("world_size", world_size, _lib._dist_world_size()), ("rank", rank, _lib._dist_rank())):
        if want != -1 and want != got:
            _lib._dist_finalize()
            raise ValueError("jag.distributed.init_process_group: %s=%d but mpirun gave %d" % (name, want, got))


def destroy_process_group(group: _typing.Any = None) -> None:
    """Leave the process group (finalises MPI if init_process_group started it).

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> dist.barrier()  # doctest: +SKIP
        >>> dist.destroy_process_group()  # doctest: +SKIP
        >>> dist.is_initialized()
        False
    """
    _no_group("destroy_process_group", group, False)
    if _lib is not None:
        _lib._dist_finalize()


def get_rank(group: _typing.Any = None) -> int:
    """This process's rank in [0, get_world_size()).

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> print("rank %d of %d" % (dist.get_rank(), dist.get_world_size()))  # mpirun -np 2  # doctest: +SKIP
        rank 0 of 2
    """
    _no_group("get_rank", group, False)
    return _require()._dist_rank()


def get_world_size(group: _typing.Any = None) -> int:
    """The number of ranks.

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> dist.get_world_size()  # under mpirun -np 2  # doctest: +SKIP
        2
    """
    _no_group("get_world_size", group, False)
    return _require()._dist_world_size()


def barrier(group: _typing.Any = None, async_op: bool = False) -> None:
    """Block until every rank has reached the barrier.

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> if dist.get_rank() == 0:  # doctest: +SKIP
        ...     print("rank 0 writes the checkpoint")
        rank 0 writes the checkpoint
        >>> dist.barrier()  # every rank waits here until rank 0 is done  # doctest: +SKIP
    """
    _no_group("barrier", group, async_op)
    _require()._dist_barrier()


def all_reduce(tensor: _typing.Any, op: int = ReduceOp.SUM, group: _typing.Any = None, async_op: bool = False) -> None:
    """Reduce ``tensor`` over all ranks in place: every rank ends with
    op(x_0, ..., x_{p-1}) (a nested tensor: on its packed values).

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> t = jag.tensor([1.0, 2.0]) * (dist.get_rank() + 1)  # [1, 2] on rank 0, [2, 4] on rank 1  # doctest: +SKIP
        >>> dist.all_reduce(t)  # doctest: +SKIP
        >>> t  # on every rank, under mpirun -np 2  # doctest: +SKIP
        tensor([3.0000, 6.0000], dtype=float32, size=[2])
        >>> nt = jag.nested.nested_tensor([jag.tensor([1.0]), jag.tensor([2.0, 3.0])], layout=jag.jagged)
        >>> dist.all_reduce(nt, op=dist.ReduceOp.MAX)  # on the packed values  # doctest: +SKIP
        >>> nt.values()  # doctest: +SKIP
        tensor([1.0000, 2.0000, 3.0000], dtype=float32, size=[3])
    """
    _no_group("all_reduce", group, async_op)
    _require()._dist_all_reduce(tensor, int(op))


def broadcast(tensor: _typing.Any, src: int, group: _typing.Any = None, async_op: bool = False) -> None:
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor`` in place.

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> t = jag.tensor([7.0, 8.0]) if dist.get_rank() == 0 else jag.zeros(2)  # doctest: +SKIP
        >>> dist.broadcast(t, src=0)  # doctest: +SKIP
        >>> t  # on every rank  # doctest: +SKIP
        tensor([7.0000, 8.0000], dtype=float32, size=[2])
    """
    _no_group("broadcast", group, async_op)
    _require()._dist_broadcast(tensor, int(src))


def all_gather(tensor_list: _typing.List[_typing.Any], tensor: _typing.Any, group: _typing.Any = None,
               async_op: bool = False) -> None:
    """Copy every rank's ``tensor`` into ``tensor_list[rank]`` (a list of
    get_world_size() tensors shaped like ``tensor``; dense tensors).

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> out = [jag.zeros(2) for _ in range(dist.get_world_size())]  # doctest: +SKIP
        >>> dist.all_gather(out, jag.full((2,), float(dist.get_rank())))  # doctest: +SKIP
        >>> [t.tolist() for t in out]  # on every rank, under mpirun -np 2  # doctest: +SKIP
        [[0.0, 0.0], [1.0, 1.0]]
    """
    _no_group("all_gather", group, async_op)
    _require()._dist_all_gather(tensor_list, tensor)


def reduce_scatter_tensor(output: _typing.Any, input: _typing.Any, op: int = ReduceOp.SUM, group: _typing.Any = None,
                          async_op: bool = False) -> None:
    """Reduce ``input`` over all ranks and write this rank's slice of dim 0
    (input.shape[0] / world_size rows) into ``output``.

    Example::

        >>> import jag.distributed as dist
        >>> dist.init_process_group("mpi")  # doctest: +SKIP
        >>> x = jag.arange(4.0)  # the same [0, 1, 2, 3] on both ranks
        >>> out = jag.zeros(2)
        >>> dist.reduce_scatter_tensor(out, x)  # doctest: +SKIP
        >>> out  # rank 0 of mpirun -np 2: rows 0..1 of the sum  # doctest: +SKIP
        tensor([0.0000, 2.0000], dtype=float32, size=[2])
    """
    _no_group("reduce_scatter_tensor", group, async_op)
    _require()._dist_reduce_scatter(output, input, int(op))
