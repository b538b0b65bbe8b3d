"""softmax / log_softmax over the ragged dim of a jagged nested tensor under
jag.compile: attention pooling (scores = x @ w, p = softmax(scores, dim=1),
(p * x).sum(dim=1)) compiled once and reused over batches of other lengths
gives eager's values and gradients, and both equal a numpy computation per
component (torch.nested: softmax(nt, dim=1) normalises each component over
its own length)."""
import numpy as np
import pytest

import jag

D = 4
BATCHES = ([3, 5, 2], [6, 1], [1, 2, 7, 4], [2, 2])


def jagged(lengths, seed):
    rng = np.random.default_rng(seed)
    comps = [rng.standard_normal((n, D)) for n in lengths]
    nt = jag.nested.nested_tensor([jag.tensor(c, dtype=jag.float64) for c in comps], layout=jag.jagged,
                                  requires_grad=True)
    return nt, comps


def pool_softmax(x, w, c):
    """Attention pooling with softmax over the ragged dim; loss sum(pooled * c)."""
    p = jag.softmax(x @ w, dim=1)  # (B, j, 1)
    pooled = (p * x).sum(1)  # (B, D)
    return (pooled * c).sum(), pooled


def pool_log_softmax(x, w, c):
    """The same weights through log_softmax: exp(log_softmax(scores, dim=1))."""
    p = jag.exp(jag.log_softmax(x @ w, dim=1))
    pooled = (p * x).sum(1)
    return (pooled * c).sum(), pooled


def reference(comps, w, c):
    """Per component b: s = X w, p = softmax(s) over the rows, pooled = sum_i p_i x_i;
    loss = sum_b pooled_b . c_b. Gradients by hand: with a_i = x_i . c_b,
    dL/ds_i = p_i (a_i - sum_j p_j a_j) (softmax's Jacobian), dL/dx_i = p_i c_b + dL/ds_i w,
    dL/dw = sum_b sum_i dL/ds_i x_i."""
    pooled, gx, gw, loss = [], [], np.zeros_like(w), 0.0
    for b, X in enumerate(comps):
        s = X @ w[:, 0]
        e = np.exp(s - s.max())
        p = e / e.sum()
        pb = (p[:, None] * X).sum(0)
        pooled.append(pb)
        loss += pb @ c[b]
        a = X @ c[b]
        ds = p * (a - (p * a).sum())
        gx.append(p[:, None] * c[b][None, :] + ds[:, None] * w[:, 0][None, :])
        gw[:, 0] += (ds[:, None] * X).sum(0)
    return loss, np.stack(pooled), np.concatenate(gx), gw


@pytest.mark.parametrize("fn", [pool_softmax, pool_log_softmax])
def test_compiled_pooling_equals_eager_and_numpy(fn):
    rng = np.random.default_rng(3)
    w_np = rng.standard_normal((D, 1))
    w = jag.tensor(w_np, dtype=jag.float64, requires_grad=True)
    fast = jag.compile(fn)
    for k, lengths in enumerate(BATCHES):
        x, comps = jagged(lengths, seed=10 + k)
        c_np = rng.standard_normal((len(lengths), D))
        c = jag.tensor(c_np, dtype=jag.float64)
        want_loss, want_pooled, want_gx, want_gw = reference(comps, w_np, c_np)
        for f in (fast, fn):
            x.grad = w.grad = None
            loss, pooled = f(x, w, c)
            loss.backward()
            assert float(loss) == pytest.approx(want_loss, rel=1e-12, abs=1e-12)
            np.testing.assert_allclose(pooled.detach().numpy(), want_pooled, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(x.grad.values().numpy(), want_gx, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(w.grad.numpy(), want_gw, rtol=1e-10, atol=1e-12)
    assert fast.num_programs == 1


@pytest.mark.parametrize("softmax", [jag.softmax, jag.log_softmax])
def test_desugared_trace_runs_the_plain_op(softmax):
    x, _ = jagged([3, 5, 2], seed=1)
    w = jag.tensor(np.ones((D, 1)), dtype=jag.float64)
    text = str(jag.trace(lambda x, w: softmax(x @ w, dim=1), x.detach(), w).desugar().dce())
    assert "ragged_softmax(" in text, text
    # no symbol on a nested value is left but the unflatten at the bottom
    assert "nested(jagged)" not in "".join(line for line in text.splitlines() if "ragged_softmax(" in line), text


def test_ragged_dim_moved_by_transpose():
    """(B, j, 2, 3).transpose(1, 2): softmax over the ragged dim 2, pooled over it;
    compiled and eager against numpy, values and gradients (d/dx_i of
    sum_i p_i x_i per column: p_i + p_i (x_i - sum_j p_j x_j))."""
    rng = np.random.default_rng(4)

    def pool(x):
        t = x.transpose(1, 2)
        return (jag.softmax(t, dim=2) * t).sum(2)

    fast = jag.compile(pool)
    for lengths in ([3, 1, 4], [2, 5]):
        comps = [rng.standard_normal((n, 2, 3)) for n in lengths]
        ps = [np.exp(c - c.max(0)) / np.exp(c - c.max(0)).sum(0) for c in comps]
        want = np.stack([(p * c).sum(0) for p, c in zip(ps, comps)])
        want_grad = np.concatenate([p + p * (c - (p * c).sum(0)) for p, c in zip(ps, comps)])
        for f in (fast, pool):
            x = jag.nested.nested_tensor([jag.tensor(c) for c in comps], layout=jag.jagged, requires_grad=True)
            y = f(x)
            y.sum().backward()
            np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(x.grad.values().numpy(), want_grad, rtol=1e-10, atol=1e-12)


def test_max_and_argmax_over_the_ragged_dim_compile():
    """max(dim=1) with indices and argmax over the ragged dim are plain ops
    on the inner tensors (ragged_reduce_indices): they trace, compile once
    for batches of other lengths, and give numpy's per-component max,
    argmax (torch.max(dim): the values and their row) and gradient (1 at
    the winning row of each column, as torch's max(dim) backward)."""
    def f(x):
        m = jag.max(x, 1)
        return (m.values * 2).sum(), m.indices, jag.argmax(x, 1)

    fast = jag.compile(f)
    for k, lengths in enumerate(BATCHES):
        x, comps = jagged(lengths, seed=40 + k)
        want_idx = np.stack([c.argmax(0) for c in comps])
        want_loss = 2 * sum(c.max(0).sum() for c in comps)
        want_grad = np.concatenate([2.0 * (np.arange(len(c))[:, None] == c.argmax(0)[None, :]) for c in comps])
        for fn in (fast, f):
            x.grad = None
            loss, idx, am = fn(x)
            loss.backward()
            assert float(loss) == pytest.approx(want_loss, rel=1e-12)
            np.testing.assert_array_equal(idx.numpy(), want_idx)
            np.testing.assert_array_equal(am.numpy(), want_idx)
            np.testing.assert_array_equal(x.grad.values().numpy(), want_grad)
    assert fast.num_programs == 1
    text = str(jag.trace(lambda x: jag.argmax(x, 1), jagged([3, 2], seed=1)[0].detach()).desugar().dce())
    assert "ragged_reduce_indices(" in text, text
