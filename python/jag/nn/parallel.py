"""jag.nn.parallel: DistributedDataParallel over jag.distributed (MPI)."""
import contextlib

from .module import Module


class DistributedDataParallel(Module):
    """Data-parallel training of ``module`` over the ranks of jag.distributed
    (torch.nn.parallel.DistributedDataParallel's names).

    At construction rank 0's parameters are broadcast to every rank. After
    ``loss.backward()`` call ``sync_gradients()`` (or step through
    ``optimizer`` only after it): every parameter's gradient becomes the
    average over the ranks, reduced in buckets of at most ``bucket_cap_mb``
    MiB built from the parameters in reverse order, each bucket's
    all-reduce started as soon as it is packed. torch starts a bucket from
    autograd hooks while backward still runs; jag's autograd has no
    per-parameter hooks yet, so here the reduction follows backward (no
    overlap with it) and is started explicitly. Inside ``no_sync()``
    ``sync_gradients()`` does nothing and gradients accumulate locally.

    Args:
        module (Module): the model, the same on every rank.
        bucket_cap_mb (float): the most MiB per bucket (torch's 25).
    """

    def __init__(self, module, bucket_cap_mb=25, broadcast_buffers=True):
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

    def forward(self, *args, **kwargs):
        """Run the wrapped module."""
        return self.module(*args, **kwargs)

    def sync_gradients(self):
        """Average every parameter's gradient over the ranks (collective;
        skipped inside no_sync())."""
        if self._require_sync:
            self._lib._dist_ddp_sync(self._ddp)

    @contextlib.contextmanager
    def no_sync(self):
        """A context in which sync_gradients() does nothing: gradients of
        several backward passes accumulate locally; the first sync after it
        averages the accumulated sums."""
        prev = self._require_sync
        object.__setattr__(self, "_require_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_require_sync", prev)

    def bucket_indices(self):
        """The buckets as lists of indices into the module's parameters
        that require grad (in parameters() order)."""
        return self._lib._dist_ddp_buckets(self._ddp)
