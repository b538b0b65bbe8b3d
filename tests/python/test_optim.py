"""jag.optim: SGD, Adam and AdamW against their update rules written out in
numpy (float64) over several steps, param groups, state_dict round trips,
the schedulers against torch's closed forms, and clip_grad_norm_.

torch.optim computes the same formulas (single-tensor path); its float32
results differ from jag's by a few ulps only where torch's vector kernels
fuse a multiply-add, so these tests use float64 references."""
import math

import numpy as np
import pytest

import jag
import jag.nn as nn

STEPS = 6


def grads_for(shape, seed):
    """Gradients for STEPS steps: large first, then small (amsgrad shows)."""
    r = np.random.default_rng(seed)
    scale = np.array([3.0] + [0.2] * (STEPS - 1))
    return [r.standard_normal(shape) * s for s in scale]


def set_grad(p, g):
    """Give p the gradient g through backward of sum(p * g)."""
    p.grad = None
    (p * jag.tensor(g, dtype=p.dtype)).sum().backward()


def ref_sgd(p, gs, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    p = p.copy()
    buf = None
    for g in gs:
        d = g + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
    return p, buf


def ref_adam(p, gs, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False):
    p = p.copy()
    b1, b2 = betas
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    for t, g in enumerate(gs, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        vv = vmax if amsgrad else v
        # torch: denom = sqrt(v) / sqrt(1 - beta2^t) + eps (eps after the correction)
        p = p - lr / (1 - b1 ** t) * m / (np.sqrt(vv) / math.sqrt(1 - b2 ** t) + eps)
    return p, m, v, vmax


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, weight_decay=0.05),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.1, momentum=0.9, dampening=0.3),
    dict(lr=0.1, momentum=0.9, nesterov=True),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
]


@pytest.mark.parametrize("kw", SGD_CASES)
@pytest.mark.parametrize("dtype", [jag.float64, jag.float32])
def test_sgd_against_rule(kw, dtype):
    r = np.random.default_rng(1)
    p0 = r.standard_normal((3, 5))
    gs = grads_for((3, 5), 2)
    p = nn.Parameter(jag.tensor(p0, dtype=dtype))
    opt = jag.optim.SGD([p], **kw)
    v0 = p._version
    for g in gs:
        set_grad(p, g)
        opt.step()
    assert p._version == v0 + STEPS
    want, buf = ref_sgd(p0, gs, **kw)
    tol = 1e-12 if dtype is jag.float64 else 2e-5
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=tol, atol=tol)
    if kw.get("momentum"):
        np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), buf, rtol=tol, atol=tol)
    else:
        assert "momentum_buffer" not in opt.state[p]


ADAM_CASES = [
    dict(lr=0.05),
    dict(lr=0.05, weight_decay=0.1, eps=1e-3),
    dict(lr=0.05, weight_decay=0.1, amsgrad=True),
    dict(lr=0.02, betas=(0.3, 0.5), weight_decay=0.3, amsgrad=True),  # beta1 < 0.5: torch's other lerp form
]


@pytest.mark.parametrize("kw", ADAM_CASES)
@pytest.mark.parametrize("cls", [jag.optim.Adam, jag.optim.AdamW])
@pytest.mark.parametrize("dtype", [jag.float64, jag.float32])
def test_adam_adamw_against_rule(kw, cls, dtype):
    r = np.random.default_rng(3)
    p0 = r.standard_normal(17)
    gs = grads_for(17, 4)
    p = nn.Parameter(jag.tensor(p0, dtype=dtype))
    kw = dict(kw)
    kw.setdefault("weight_decay", 0.0)
    opt = cls([p], **kw)
    for g in gs:
        set_grad(p, g)
        opt.step()
    want, m, v, vmax = ref_adam(p0, gs, decoupled=cls is jag.optim.AdamW, **kw)
    tol = 1e-12 if dtype is jag.float64 else 3e-6
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=tol, atol=tol)
    st = opt.state[p]
    assert float(st["step"]) == STEPS and st["step"].dtype is jag.float32
    np.testing.assert_allclose(st["exp_avg"].numpy(), m, rtol=tol, atol=tol)
    np.testing.assert_allclose(st["exp_avg_sq"].numpy(), v, rtol=tol, atol=tol)
    if kw.get("amsgrad"):
        np.testing.assert_allclose(st["max_exp_avg_sq"].numpy(), vmax, rtol=tol, atol=tol)
    else:
        assert "max_exp_avg_sq" not in st


def test_adamw_default_weight_decay_and_decay_kinds_differ():
    assert jag.optim.AdamW([nn.Parameter(jag.zeros(2))]).defaults["weight_decay"] == 1e-2
    assert jag.optim.Adam([nn.Parameter(jag.zeros(2))]).defaults["weight_decay"] == 0
    out = []
    for cls in (jag.optim.Adam, jag.optim.AdamW):
        p = nn.Parameter(jag.tensor(np.linspace(-1, 1, 5)))
        opt = cls([p], lr=0.1, weight_decay=0.5)
        for g in grads_for(5, 0):
            set_grad(p, g)
            opt.step()
        out.append(p.detach().numpy().copy())
    assert np.abs(out[0] - out[1]).max() > 1e-3


def test_param_groups_defaults_and_skipped_params():
    a = nn.Parameter(jag.ones(3, dtype=jag.float64))
    b = nn.Parameter(jag.ones(3, dtype=jag.float64))
    c = nn.Parameter(jag.ones(3, dtype=jag.float64))
    opt = jag.optim.SGD([{"params": [a]}, {"params": [b, c], "lr": 0.5}], lr=0.1, momentum=0.9)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[0]["nesterov"] is False
    set_grad(a, np.ones(3))
    set_grad(b, np.ones(3))
    vc = c._version
    opt.step()  # c has no gradient: skipped, as torch
    np.testing.assert_allclose(a.detach().numpy(), 0.9)
    np.testing.assert_allclose(b.detach().numpy(), 0.5)
    np.testing.assert_allclose(c.detach().numpy(), 1.0)
    assert c._version == vc and c not in opt.state
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        jag.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        jag.optim.SGD([a * 2], lr=0.1)
    with pytest.raises(ValueError, match="Nesterov"):
        jag.optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 0"):
        jag.optim.Adam([a], betas=(1.0, 0.9))


def test_zero_grad_and_closure():
    p = nn.Parameter(jag.tensor([1.0, 2.0]))
    opt = jag.optim.SGD([p], lr=0.1)
    set_grad(p, np.array([1.0, 1.0]))
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with jag.no_grad():
        loss = opt.step(closure)  # the closure runs with grad mode on
    assert float(loss) == 5.0
    np.testing.assert_allclose(p.detach().numpy(), [0.8, 1.6], rtol=1e-6)


def test_step_is_not_recorded_and_bumps_version():
    p = nn.Parameter(jag.tensor([1.0, 2.0], dtype=jag.float64))
    y = (p * p).sum()  # saves p
    set_grad(p, np.array([1.0, 1.0]))
    v = p._version
    jag.optim.Adam([p], lr=0.1).step()  # grad mode on: the step runs under no_grad itself
    assert p._version == v + 1 and p.is_leaf and p.requires_grad
    with pytest.raises(RuntimeError):
        y.backward()  # p changed since the product saved it


def test_refused_step_changes_nothing():
    a = nn.Parameter(jag.ones(3))
    b = nn.Parameter(jag.ones(3, dtype=jag.float64))
    opt = jag.optim.Adam([a, b], lr=0.1)
    set_grad(a, np.ones(3))
    set_grad(b, np.ones(3))
    opt.step()
    va = a._version
    before = a.detach().numpy().copy()
    opt.param_groups[0]["betas"] = (1.5, 0.9)
    with pytest.raises(ValueError, match="beta1"):
        opt.step()
    assert a._version == va
    np.testing.assert_array_equal(a.detach().numpy(), before)
    assert float(opt.state[a]["step"]) == 1.0


def test_state_dict_format_and_round_trip():
    def make():
        jag.manual_seed(5)
        return nn.Linear(4, 3, dtype=jag.float64)

    m1, m2 = make(), make()
    x = jag.randn(6, 4, dtype=jag.float64, seed=1)
    o1 = jag.optim.AdamW(m1.parameters(), lr=0.05, amsgrad=True)
    o2 = jag.optim.AdamW(m2.parameters(), lr=0.05, amsgrad=True)

    def train(m, o, n):
        for _ in range(n):
            o.zero_grad()
            (m(x) ** 2).mean().backward()
            o.step()

    train(m1, o1, 3)
    sd = o1.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert sorted(sd["state"]) == [0, 1]
    assert sorted(sd["state"][0]) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    assert sd["param_groups"][0]["params"] == [0, 1] and sd["param_groups"][0]["lr"] == 0.05
    m2.load_state_dict(m1.state_dict())
    o2.load_state_dict(sd)
    assert o2.state[m2.weight]["exp_avg"] is not sd["state"][0]["exp_avg"]  # copied
    train(m1, o1, 3)
    train(m2, o2, 3)
    np.testing.assert_array_equal(m1.weight.detach().numpy(), m2.weight.detach().numpy())
    with pytest.raises(ValueError, match="different number of parameter groups"):
        o2.load_state_dict({"state": {}, "param_groups": []})


def test_sgd_state_dict_round_trip():
    p1 = nn.Parameter(jag.tensor(np.arange(4.0)))
    p2 = nn.Parameter(jag.tensor(np.arange(4.0)))
    o1 = jag.optim.SGD([p1], lr=0.1, momentum=0.9)
    o2 = jag.optim.SGD([p2], lr=0.3, momentum=0.9)
    gs = grads_for(4, 9)
    for g in gs[:3]:
        set_grad(p1, g)
        o1.step()
    with jag.no_grad():
        p2.copy_(p1)
    o2.load_state_dict(o1.state_dict())
    assert o2.param_groups[0]["lr"] == 0.1
    for g in gs[3:]:
        set_grad(p1, g)
        o1.step()
        set_grad(p2, g)
        o2.step()
    np.testing.assert_array_equal(p1.detach().numpy(), p2.detach().numpy())


# --- schedulers: torch's closed forms -------------------------------------------


def sched_lrs(make, n=12, lr=0.1):
    p = nn.Parameter(jag.zeros(1))
    opt = jag.optim.SGD([p], lr=lr)
    s = make(opt)
    lrs = [s.get_last_lr()[0]]
    for _ in range(n):
        opt.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == lrs[-1]
    return lrs


def test_lambda_lr():
    lrs = sched_lrs(lambda o: jag.optim.lr_scheduler.LambdaLR(o, lambda e: 0.5 ** e))
    np.testing.assert_allclose(lrs, [0.1 * 0.5 ** e for e in range(13)], rtol=1e-12)


def test_step_lr():
    lrs = sched_lrs(lambda o: jag.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5))
    np.testing.assert_allclose(lrs, [0.1 * 0.5 ** (e // 3) for e in range(13)], rtol=1e-12)


def test_cosine_annealing_lr():
    T, eta = 5, 0.01
    lrs = sched_lrs(lambda o: jag.optim.lr_scheduler.CosineAnnealingLR(o, T_max=T, eta_min=eta))
    want = [eta + (0.1 - eta) * (1 + math.cos(math.pi * e / T)) / 2 for e in range(13)]
    np.testing.assert_allclose(lrs, want, rtol=1e-9, atol=1e-12)


def test_linear_lr_warmup():
    lrs = sched_lrs(lambda o: jag.optim.lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=4))
    want = [0.1 * (0.25 + 0.75 * min(e, 4) / 4) for e in range(13)]
    np.testing.assert_allclose(lrs, want, rtol=1e-12)
    with pytest.raises(ValueError):
        jag.optim.lr_scheduler.LinearLR(jag.optim.SGD([nn.Parameter(jag.zeros(1))]), start_factor=0)


def test_scheduler_state_dict_and_initial_lr():
    p = nn.Parameter(jag.zeros(1))
    opt = jag.optim.SGD([p], lr=0.1)
    s = jag.optim.lr_scheduler.StepLR(opt, step_size=2)
    assert opt.param_groups[0]["initial_lr"] == 0.1
    for _ in range(3):
        s.step()
    sd = s.state_dict()
    assert sd["last_epoch"] == 3 and "optimizer" not in sd
    with pytest.raises(KeyError):
        jag.optim.lr_scheduler.StepLR(jag.optim.SGD([nn.Parameter(jag.zeros(1))], lr=0.1), 2, last_epoch=4)


# --- clip_grad_norm_ -------------------------------------------------------------


@pytest.mark.parametrize("norm_type", [2.0, float("inf"), 1.0, 3.0])
def test_clip_grad_norm(norm_type):
    a = nn.Parameter(jag.zeros(4, 3, dtype=jag.float64))
    b = nn.Parameter(jag.zeros(5, dtype=jag.float64))
    c = nn.Parameter(jag.zeros(2, dtype=jag.float64))  # no gradient
    r = np.random.default_rng(7)
    ga, gb = r.standard_normal((4, 3)), r.standard_normal(5)
    set_grad(a, ga)
    set_grad(b, gb)
    flat = np.concatenate([ga.ravel(), gb])
    total = np.abs(flat).max() if math.isinf(norm_type) else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    # above the norm: returned, nothing changed
    t = nn.utils.clip_grad_norm_([a, b, c], total * 2, norm_type)
    assert isinstance(t, jag.Tensor) and t.dtype is jag.float64
    np.testing.assert_allclose(float(t), total, rtol=1e-12)
    np.testing.assert_array_equal(a.grad.numpy(), ga)
    # below: scaled by max_norm / (total + 1e-6), torch's clip_coef
    t = nn.utils.clip_grad_norm_([a, b, c], total / 3, norm_type=norm_type)
    coef = (total / 3) / (total + 1e-6)
    np.testing.assert_allclose(float(t), total, rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), ga * coef, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb * coef, rtol=1e-12)
    assert c.grad is None


def test_clip_grad_norm_nonfinite_and_single_tensor():
    p = nn.Parameter(jag.zeros(3))
    set_grad(p, np.array([3.0, 4.0, 0.0]))
    t = nn.utils.clip_grad_norm_(p, 1.0)  # one tensor is accepted, as torch
    assert t.dtype is jag.float32
    np.testing.assert_allclose(float(t), 5.0, rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), np.array([3.0, 4.0, 0.0]) / (5 + 1e-6), rtol=1e-6)
    set_grad(p, np.array([np.inf, 1.0, 0.0]))
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert p.grad.numpy()[1] == 1.0  # unchanged
