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
    ReduceOp.SUM, AVG, MAX, MIN; AVG divides the sum by the world size)."""
    SUM = 0
    AVG = 1
    MAX = 2
    MIN = 3


def is_available() -> bool:
    """True when jag was built with MPI (torch.distributed.is_available)."""
    return _lib is not None and _lib._dist_is_available()


def is_mpi_available() -> bool:
    """True when the MPI backend is available (the only backend)."""
    return is_available()


def is_initialized() -> bool:
    """True between init_process_group and destroy_process_group."""
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
    other values than theirs raises ValueError)."""
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
    """Leave the process group (finalises MPI if init_process_group started it)."""
    _no_group("destroy_process_group", group, False)
    if _lib is not None:
        _lib._dist_finalize()


def get_rank(group: _typing.Any = None) -> int:
    """This process's rank in [0, get_world_size())."""
    _no_group("get_rank", group, False)
    return _require()._dist_rank()


def get_world_size(group: _typing.Any = None) -> int:
    """The number of ranks."""
    _no_group("get_world_size", group, False)
    return _require()._dist_world_size()


def barrier(group: _typing.Any = None, async_op: bool = False) -> None:
    """Block until every rank has reached the barrier."""
    _no_group("barrier", group, async_op)
    _require()._dist_barrier()


def all_reduce(tensor: _typing.Any, op: int = ReduceOp.SUM, group: _typing.Any = None, async_op: bool = False) -> None:
    """Reduce ``tensor`` over all ranks in place: every rank ends with
    op(x_0, ..., x_{p-1}) (a nested tensor: on its packed values)."""
    _no_group("all_reduce", group, async_op)
    _require()._dist_all_reduce(tensor, int(op))


def broadcast(tensor: _typing.Any, src: int, group: _typing.Any = None, async_op: bool = False) -> None:
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor`` in place."""
    _no_group("broadcast", group, async_op)
    _require()._dist_broadcast(tensor, int(src))


def all_gather(tensor_list: _typing.List[_typing.Any], tensor: _typing.Any, group: _typing.Any = None,
               async_op: bool = False) -> None:
    """Copy every rank's ``tensor`` into ``tensor_list[rank]`` (a list of
    get_world_size() tensors shaped like ``tensor``; dense tensors)."""
    _no_group("all_gather", group, async_op)
    _require()._dist_all_gather(tensor_list, tensor)


def reduce_scatter_tensor(output: _typing.Any, input: _typing.Any, op: int = ReduceOp.SUM, group: _typing.Any = None,
                          async_op: bool = False) -> None:
    """Reduce ``input`` over all ranks and write this rank's slice of dim 0
    (input.shape[0] / world_size rows) into ``output``."""
    _no_group("reduce_scatter_tensor", group, async_op)
    _require()._dist_reduce_scatter(output, input, int(op))
