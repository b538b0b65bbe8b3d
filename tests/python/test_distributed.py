"""jag.distributed (torch.distributed's names over MPI), jag.nn.parallel.
DistributedDataParallel and the token-balanced distributed sampler.

The collectives and DDP run in subprocesses under mpirun (MPI starts once
per process). Their references are torch.distributed's semantics written
as formulas: all_reduce leaves op(x_0, ..., x_{p-1}) on every rank (AVG is
the sum / p), broadcast copies src's tensor, all_gather puts rank r's
tensor at index r, reduce_scatter_tensor gives rank r rows [r n, (r+1) n)
of the reduction; DDP with averaged gradients trains as one process on the
global batch.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import jag
import jag.distributed as dist
from jag.utils.distributed_sampler import DistributedTokenBudgetSampler, split_by_tokens

PKG = os.path.dirname(os.path.dirname(os.path.abspath(jag.__file__)))


def run_mpi(tmp_path, ranks, body):
    """Run `body` on `ranks` ranks; every rank must reach done(rank)."""
    script = tmp_path / "prog.py"
    prelude = ("import sys\nsys.path.insert(0, %r)\n"
               "def done(rank):\n    open(%r + '/ok.%%d' %% rank, 'w').close()\n" % (PKG, str(tmp_path)))
    script.write_text(prelude + textwrap.dedent(body))
    cmd = [shutil.which("mpirun"), "-np", str(ranks), "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
           sys.executable, str(script)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    for r in range(ranks):
        assert (tmp_path / ("ok.%d" % r)).exists(), out


def test_unavailable_or_uninitialised_raises():
    # never initialised in this process: torch raises ValueError here
    assert not dist.is_initialized()
    if dist.is_available():
        with pytest.raises(ValueError, match="has not been initialized"):
            dist.get_rank()
    else:
        with pytest.raises(RuntimeError, match="without MPI"):
            dist.init_process_group("mpi")
    with pytest.raises(ValueError, match="backend 'nccl' is not supported"):
        dist.init_process_group("nccl")


needs_mpi = pytest.mark.skipif(not dist.is_available() or shutil.which("mpirun") is None,
                               reason="jag built without MPI (see test_unavailable_or_uninitialised_raises)")


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives(tmp_path, ranks):
    run_mpi(tmp_path, ranks, """
        import jag, jag.distributed as dist
        from jag.distributed import ReduceOp
        dist.init_process_group("mpi")
        r, p = dist.get_rank(), dist.get_world_size()
        def x(q, dt):  # rank q's values
            return [float((q * 5 + i * 3) % 7) - 2.5 for i in range(6)]
        for dt in (jag.float32, jag.float64):
            for op, f in ((ReduceOp.SUM, sum), (ReduceOp.AVG, lambda v: sum(v) / p),
                          (ReduceOp.MAX, max), (ReduceOp.MIN, min)):
                t = jag.tensor(x(r, dt), dtype=dt)
                dist.all_reduce(t, op=op)
                want = [f([x(q, dt)[i] for q in range(p)]) for i in range(6)]
                got = t.tolist()
                assert all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(got, want)), (op, got, want)
        t = jag.tensor(x(r, 0), dtype=jag.float64)
        dist.broadcast(t, src=p - 1)
        assert t.tolist() == x(p - 1, 0)
        outs = [jag.zeros(6) for _ in range(p)]
        dist.all_gather(outs, jag.tensor(x(r, 0)))
        assert [o.tolist() for o in outs] == [x(q, 0) for q in range(p)]
        big = jag.tensor([float(r + 10 * i) for i in range(2 * p)])
        out = jag.zeros(2)
        dist.reduce_scatter_tensor(out, big)
        assert out.tolist() == [float(sum(q + 10 * (2 * r + k) for q in range(p))) for k in range(2)]
        # a nested tensor is reduced on its packed values
        nt = jag.nested.nested_tensor([jag.tensor([[1.0 + r, 2.0]]), jag.tensor([[3.0, 4.0], [5.0, 6.0 * r]])],
                                      layout=jag.jagged)
        dist.all_reduce(nt)
        s = sum(range(p))
        assert nt.values().tolist() == [[p + s, 2.0 * p], [3.0 * p, 4.0 * p], [5.0 * p, 6.0 * s]]
        # ranks disagreeing on the size: every rank raises, nothing hangs
        t = jag.zeros(4 + (r == 1))
        try:
            dist.all_reduce(t)
            raise AssertionError("no error")
        except ValueError as e:
            assert "disagree on the element count" in str(e), e
        dist.barrier()
        dist.destroy_process_group()
        done(r)
    """)


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_ddp_matches_one_process(tmp_path, ranks):
    run_mpi(tmp_path, ranks, """
        import jag, jag.distributed as dist, jag.nn as nn
        from jag.nn.parallel import DistributedDataParallel
        import jag.nn.functional as F
        dist.init_process_group("mpi")
        r, p = dist.get_rank(), dist.get_world_size()
        N = 6
        X = [[((i * 7 + k * 3) % 5) / 5.0 - 0.4 for k in range(4)] for i in range(N)]
        Y = [[((i * 3) % 4) / 4.0] for i in range(N)]
        def model(seed):
            jag.manual_seed(seed)
            return nn.Sequential(nn.Linear(4, 5), nn.GELU(), nn.Linear(5, 1))
        def train(m, lo, hi, world, wrap):
            x, y = jag.tensor(X[lo:hi]), jag.tensor(Y[lo:hi])
            opt = jag.optim.SGD(m.parameters(), lr=0.3)
            net = DistributedDataParallel(m, bucket_cap_mb=1e-5) if wrap else m
            losses = []
            for step in range(4):
                opt.zero_grad()
                loss = F.mse_loss(net(x), y) * ((hi - lo) / N * world)
                loss.backward()
                if wrap:
                    net.sync_gradients()
                l = jag.tensor([loss.item() / world], dtype=jag.float64)
                if wrap:
                    dist.all_reduce(l)
                losses.append(l.item())
                opt.step()
            return losses, [q.detach().numpy().copy() for q in m.parameters()]
        lo, hi = r * N // p, (r + 1) * N // p  # 3 + 3 on 2 ranks, 2 + 2 + 2 on 3
        m = model(100 + r)                     # replicas differ until DDP broadcasts rank 0's
        dl, dparams = train(m, lo, hi, p, True)
        ref_l, ref_params = train(model(100), 0, N, 1, False)
        assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(dl, ref_l)), (dl, ref_l)
        assert ref_l[-1] < ref_l[0]
        for a, b in zip(dparams, ref_params):
            assert abs(a - b).max() <= 1e-5 * (abs(b).max() + 1e-2), (a, b)
        # no_sync: two local backward passes, one averaged sync of the sums
        w = nn.Linear(2, 1)
        ddp = DistributedDataParallel(w)
        with ddp.no_sync():
            for k in range(2):
                (ddp(jag.tensor([[float(r + 1), 1.0]])).sum() * (k + 1)).backward()
                ddp.sync_gradients()  # no-op inside no_sync
        local = w.weight.grad.tolist()[0][0]
        assert local == 3.0 * (r + 1), local  # d/dw0 of (k+1) * w0 * (r+1), summed over k
        ddp.sync_gradients()
        assert abs(w.weight.grad.tolist()[0][0] - 3.0 * sum(q + 1 for q in range(p)) / p) < 1e-6
        # as torch: backward alone averages (hooks during backward), here
        # d/dw0 of w0 * (r + 1) is r + 1, averaged (p + 1) / 2
        w.weight.grad = None
        w.bias.grad = None
        ddp(jag.tensor([[float(r + 1), 1.0]])).sum().backward()
        assert abs(w.weight.grad.tolist()[0][0] - (p + 1) / 2) < 1e-6, w.weight.grad.tolist()
        assert abs(w.weight.grad.tolist()[0][1] - 1.0) < 1e-6 and abs(w.bias.grad.tolist()[0] - 1.0) < 1e-6
        ddp.sync_gradients()  # nothing left: unchanged
        assert abs(w.weight.grad.tolist()[0][0] - (p + 1) / 2) < 1e-6
        dist.destroy_process_group()
        done(r)
    """)


def test_post_accumulate_grad_hook():
    # torch.Tensor.register_post_accumulate_grad_hook: hook(tensor) runs once
    # per backward, after every path's gradient is summed into .grad
    x = jag.tensor([0.5, -1.0, 2.0], requires_grad=True)
    seen = []
    handle = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    ((x * x).sum() + (x * 3.0).sum()).backward()  # d/dx = 2x + 3
    assert seen == [[4.0, 1.0, 7.0]]
    ((x * 2.0).sum()).backward()  # accumulated: 2x + 3 + 2
    assert seen[-1] == [6.0, 3.0, 9.0] and len(seen) == 2
    handle.remove()
    handle.remove()  # again: nothing
    (x.sum()).backward()
    assert len(seen) == 2

    def boom(t):
        raise KeyError("from the hook")
    h2 = x.register_post_accumulate_grad_hook(boom)
    with pytest.raises(KeyError, match="from the hook"):
        x.sum().backward()
    h2.remove()
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        jag.tensor([1.0]).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2.0).register_post_accumulate_grad_hook(print)
    with pytest.raises(TypeError, match="must be callable"):
        x.register_post_accumulate_grad_hook(3)


def test_post_accumulate_grad_hook_goes_with_its_tensor():
    # torch keeps the hooks on the tensor: a hooked tensor is freed when its
    # last reference goes, and its hook with it (the hook's closure too)
    import gc
    import weakref

    class Probe:
        pass

    x = jag.tensor([1.0, 2.0], requires_grad=True)
    probe = Probe()
    seen = []
    handle = x.register_post_accumulate_grad_hook(lambda t, p=probe: seen.append(t.grad.tolist()))
    x_ref, probe_ref = weakref.ref(x), weakref.ref(probe)
    (x * x).sum().backward()
    assert seen == [[2.0, 4.0]]
    del x, probe
    gc.collect()
    assert x_ref() is None and probe_ref() is None
    handle.remove()  # the hook went with the tensor: nothing to do, as torch

    # a graph that still holds the leaf runs its hook with a tensor over the
    # same data, even after the Python object went
    w = jag.tensor([3.0], requires_grad=True)
    got = []
    w.register_post_accumulate_grad_hook(lambda t: got.append((t.tolist(), t.grad.tolist())))
    loss = (w * 2.0).sum()
    del w
    gc.collect()
    loss.backward()
    assert got == [([3.0], [2.0])]

    # requires_grad off keeps the hook (it runs again once back on)
    z = jag.tensor([1.0], requires_grad=True)
    calls = []
    z.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    z.requires_grad = False
    z.requires_grad = True
    z.sum().backward()
    assert calls == [1]


def test_split_by_tokens_hand_computed():
    # lengths 5,3,3,2,2 longest first onto the lightest rank:
    # 0 -> r0 (5), 1 -> r1 (3), 2 -> r1 (6), 3 -> r0 (7), 4 -> r1 (8)
    assert split_by_tokens([0, 1, 2, 3, 4], [5, 3, 3, 2, 2], 2) == [[0, 3], [1, 2, 4]]
    # ties go to the lower rank, parts keep the batch's order
    assert split_by_tokens([4, 2, 0], [1, 9, 1, 9, 1], 3) == [[4], [2], [0]]
    assert split_by_tokens([0, 1], [2, 2], 3) == [[0], [1], []]


def test_distributed_sampler_covers_each_item_once_and_balances():
    lengths = [(i * 37) % 23 + 1 for i in range(200)]
    for p in (1, 2, 3, 8):
        samplers = [DistributedTokenBudgetSampler(lengths, 256, num_replicas=p, rank=r, seed=5) for r in range(p)]
        for s in samplers:
            s.set_epoch(2)
        per_rank = [list(s) for s in samplers]
        assert len({len(b) for b in per_rank}) == 1  # every rank steps the same number of times
        seen = sorted(i for batches in per_rank for b in batches for i in b)
        assert seen == list(range(200))
        for k in range(len(per_rank[0])):
            loads = [sum(lengths[i] for i in per_rank[r][k]) for r in range(p)]
            longest = max((lengths[i] for r in range(p) for i in per_rank[r][k]), default=0)
            assert max(loads) - min(loads) <= longest  # the greedy's bound
            assert sum(loads) <= 256
        ratios = samplers[0].imbalance()
        assert len(ratios) == len(per_rank[0])
        assert all(ratio >= 1.0 for ratio in ratios)
        # same seed and epoch: the same split; another epoch: another one
        again = DistributedTokenBudgetSampler(lengths, 256, num_replicas=p, rank=p - 1, seed=5)
        again.set_epoch(2)
        assert list(again) == per_rank[p - 1]
        again.set_epoch(3)
        assert list(again) != per_rank[p - 1]


def test_distributed_sampler_arguments():
    with pytest.raises(ValueError, match="rank must be in"):
        DistributedTokenBudgetSampler([1, 2], 4, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas"):
        DistributedTokenBudgetSampler([1, 2], 4, num_replicas=0, rank=0)
