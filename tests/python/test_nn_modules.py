"""jag.nn: Module registration and traversal, state_dict, repr, to(dtype);
each layer against numpy formulas and the functional op with the same
weights, dense and nested (per component); init statistics and bounds
(torch's gain and fan formulas); a tiny training loop that learns and is
reproducible bit for bit."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import jag
import jag.nn as nn
import jag.nn.functional as F


def npy(t):
    return t.detach().numpy()


def nested(shapes, seed, dtype=jag.float64):
    r = np.random.default_rng(seed)
    parts = [r.standard_normal(s) for s in shapes]
    return jag.nested.nested_tensor([jag.tensor(p, dtype=dtype) for p in parts], layout=jag.jagged), parts


# --- Module -------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.norm = nn.LayerNorm(4)
        self.scale = nn.Parameter(jag.ones(1))
        self.register_buffer("count", jag.zeros(1))
        self.register_buffer("tmp", jag.zeros(2), persistent=False)

    def forward(self, x):
        return self.norm(self.fc(x)) * self.scale


def test_registration_and_traversal():
    m = nn.Sequential(Block(), nn.ReLU(), Block())
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.scale", "0.fc.weight", "0.fc.bias", "0.norm.weight", "0.norm.bias",
                     "2.scale", "2.fc.weight", "2.fc.bias", "2.norm.weight", "2.norm.bias"]
    assert len(list(m.parameters())) == 10
    assert [n for n, _ in m.named_buffers()] == ["0.count", "0.tmp", "2.count", "2.tmp"]
    assert [n for n, _ in m.named_children()] == ["0", "1", "2"]
    assert [n for n, _ in m.named_modules()] == ["", "0", "0.fc", "0.norm", "1", "2", "2.fc", "2.norm"]
    assert len(list(m.modules())) == 8 and len(list(m.children())) == 3
    # shared modules and parameters are listed once
    shared = nn.Linear(2, 2)
    s = nn.Sequential(shared, shared)
    assert len(list(s.parameters())) == 2
    # assigning None / other types
    b = Block()
    b.scale = None
    assert "scale" in b._parameters and b.scale is None
    with pytest.raises(TypeError, match="Parameter or None"):
        b.scale = jag.ones(1)
    b.plain = 3
    assert b.plain == 3 and "plain" not in b._parameters
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        b.missing
    del b.fc
    assert "fc" not in b._modules


def test_train_eval_requires_grad_zero_grad():
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    assert m.training and m[1].training
    assert m.eval() is m and not m[1].training
    m.train()
    assert m[1].training
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    m(jag.ones(3, 2)).sum().backward()
    assert m[0].weight.grad is not None
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_state_dict_round_trip_and_keys():
    jag.manual_seed(1)
    a = nn.Sequential(Block(), nn.GELU(), Block())
    jag.manual_seed(2)
    b = nn.Sequential(Block(), nn.GELU(), Block())
    sd = a.state_dict()
    # torch's order: a module's own parameters, its persistent buffers, then its children's
    assert list(sd) == ["0.scale", "0.count", "0.fc.weight", "0.fc.bias", "0.norm.weight", "0.norm.bias",
                        "2.scale", "2.count", "2.fc.weight", "2.fc.bias", "2.norm.weight", "2.norm.bias"]
    assert not sd["0.fc.weight"].requires_grad  # detached, as torch
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(npy(v), npy(sd[k]))
    assert b[0].fc.weight.requires_grad and b[0].fc.weight.is_leaf
    # missing and unexpected keys, reported as torch does
    bad = OrderedDict(sd)
    del bad["0.fc.bias"]
    bad["extra"] = jag.zeros(1)
    with pytest.raises(RuntimeError) as e:
        b.load_state_dict(bad)
    msg = str(e.value)
    assert msg.startswith("Error(s) in loading state_dict for Sequential:")
    assert 'Missing key(s) in state_dict: "0.fc.bias".' in msg
    assert 'Unexpected key(s) in state_dict: "extra".' in msg
    res = b.load_state_dict(bad, strict=False)
    assert res.missing_keys == ["0.fc.bias"] and res.unexpected_keys == ["extra"]
    wrong = OrderedDict(sd)
    wrong["0.fc.weight"] = jag.zeros(2, 2)
    with pytest.raises(RuntimeError, match=r"size mismatch for 0.fc.weight: copying a param with shape \[2, 2\]"):
        b.load_state_dict(wrong)


def test_repr_like_torch():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.GELU(approximate="tanh"), nn.LayerNorm(4), nn.Dropout(0.1),
                      nn.Embedding(10, 4, padding_idx=0), nn.ModuleList([nn.SiLU()]), nn.RMSNorm(4))
    assert repr(m) == (
        "Sequential(\n"
        "  (0): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): GELU(approximate='tanh')\n"
        "  (3): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)\n"
        "  (4): Dropout(p=0.1, inplace=False)\n"
        "  (5): Embedding(10, 4, padding_idx=0)\n"
        "  (6): ModuleList(\n"
        "    (0): SiLU()\n"
        "  )\n"
        "  (7): RMSNorm((4,), eps=None, elementwise_affine=True)\n"
        ")")  # torch 2.15 prints the same
    p = nn.Parameter(jag.zeros(2))
    assert repr(p).startswith("Parameter containing:\n")


def test_parameter_shares_data_and_is_leaf():
    t = jag.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    assert isinstance(p, jag.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and not t.requires_grad
    with jag.no_grad():
        p.add_(1.0)
    np.testing.assert_array_equal(t.numpy(), [2.0, 3.0])
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert type(p * 2) is jag.Tensor


def test_to_dtype():
    m = Block()
    m.to(jag.float64)
    assert all(p.dtype is jag.float64 for p in m.parameters())
    assert m.count.dtype is jag.float64
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    y = m(jag.ones(2, 3, dtype=jag.float64))
    assert y.dtype is jag.float64
    with pytest.raises(TypeError):
        m.to(jag.int64)


def test_containers():
    seq = nn.Sequential(OrderedDict([("a", nn.Linear(2, 3)), ("b", nn.ReLU())]))
    assert [n for n, _ in seq.named_children()] == ["a", "b"]
    assert isinstance(seq[0], nn.Linear) and isinstance(seq[-1], nn.ReLU) and len(seq) == 2
    assert isinstance(seq[:1], nn.Sequential) and len(seq[:1]) == 1
    ml = nn.ModuleList([nn.ReLU(), nn.SiLU()])
    ml.append(nn.GELU())
    ml.insert(0, nn.Linear(1, 1))
    assert [type(m).__name__ for m in ml] == ["Linear", "ReLU", "SiLU", "GELU"]
    assert len(list(ml.parameters())) == 2
    md = nn.ModuleDict({"x": nn.Linear(1, 2)})
    md["y"] = nn.ReLU()
    assert list(md.keys()) == ["x", "y"] and "x" in md and len(md) == 2
    assert [n for n, _ in md.named_parameters()] == ["x.weight", "x.bias"]


# --- layers against numpy and the functional ops, dense and nested ------------


def test_linear_dense_and_nested():
    jag.manual_seed(3)
    lin = nn.Linear(4, 3, dtype=jag.float64)
    W, b = npy(lin.weight), npy(lin.bias)
    x = np.random.default_rng(0).standard_normal((2, 5, 4))
    y = lin(jag.tensor(x))
    np.testing.assert_allclose(npy(y), x @ W.T + b, rtol=1e-12)
    np.testing.assert_array_equal(npy(y), npy(F.linear(jag.tensor(x), lin.weight, lin.bias)))
    nt, parts = nested([(2, 4), (5, 4), (1, 4)], 1)
    out = lin(nt)
    for o, p in zip(out.unbind(), parts):
        np.testing.assert_allclose(npy(o), p @ W.T + b, rtol=1e-12)
    nob = nn.Linear(4, 3, bias=False)
    assert nob.bias is None and [n for n, _ in nob.named_parameters()] == ["weight"]


def test_linear_init_bounds():
    jag.manual_seed(0)
    lin = nn.Linear(64, 256)
    W, b = npy(lin.weight), npy(lin.bias)
    bound = 1 / math.sqrt(64)  # kaiming_uniform_(a=sqrt(5)): gain sqrt(2/6), bound gain*sqrt(3/fan_in)
    assert np.abs(W).max() <= bound and np.abs(W).max() > 0.95 * bound
    assert np.abs(b).max() <= bound
    np.testing.assert_allclose(W.std(), bound / math.sqrt(3), rtol=0.05)  # U(-a, a): std a/sqrt(3)
    assert abs(W.mean()) < 0.01


def test_embedding_padding_idx():
    jag.manual_seed(4)
    emb = nn.Embedding(6, 3, padding_idx=-1, dtype=jag.float64)
    assert emb.padding_idx == 5
    W = npy(emb.weight)
    np.testing.assert_array_equal(W[5], 0.0)
    assert np.abs(W[:5]).sum() > 0
    idx = jag.tensor([[0, 5, 2], [5, 2, 2]])
    out = emb(idx)
    np.testing.assert_array_equal(npy(out), W[np.array([[0, 5, 2], [5, 2, 2]])])
    (out * out).sum().backward()
    g = emb.weight.grad.numpy()
    np.testing.assert_array_equal(g[5], 0.0)  # no gradient into the padding row
    np.testing.assert_allclose(g[2], 2 * 3 * W[2], rtol=1e-12)
    np.testing.assert_allclose(g[0], 2 * W[0], rtol=1e-12)
    np.testing.assert_array_equal(g[[1, 3, 4]], 0.0)
    # nested indices, per component
    nidx = jag.nested.nested_tensor([jag.tensor([1, 5]), jag.tensor([3, 4, 0])], layout=jag.jagged)
    for o, i in zip(emb(nidx).unbind(), ([1, 5], [3, 4, 0])):
        np.testing.assert_array_equal(npy(o), W[i])


def test_embedding_init_statistics():
    jag.manual_seed(0)
    W = npy(nn.Embedding(200, 100).weight)
    assert abs(W.mean()) < 0.02 and abs(W.std() - 1) < 0.02  # N(0, 1)


def np_layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def test_layer_norm_and_rms_norm_dense_and_nested():
    ln = nn.LayerNorm(4, dtype=jag.float64)
    rms = nn.RMSNorm(4, eps=1e-6, dtype=jag.float64)
    with jag.no_grad():
        ln.weight.copy_(jag.tensor([1.0, 2.0, 0.5, -1.0]))
        ln.bias.copy_(jag.tensor([0.1, 0.0, -0.2, 0.3]))
        rms.weight.copy_(jag.tensor([0.5, 1.0, 1.5, 2.0]))
    w, b, rw = npy(ln.weight), npy(ln.bias), npy(rms.weight)
    x = np.random.default_rng(2).standard_normal((3, 4))
    np.testing.assert_allclose(npy(ln(jag.tensor(x))), np_layer_norm(x, w, b, 1e-5), rtol=1e-10, atol=1e-12)
    want_rms = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * rw
    np.testing.assert_allclose(npy(rms(jag.tensor(x))), want_rms, rtol=1e-10)
    nt, parts = nested([(2, 4), (3, 4)], 5)
    for o, p in zip(ln(nt).unbind(), parts):
        np.testing.assert_allclose(npy(o), np_layer_norm(p, w, b, 1e-5), rtol=1e-10, atol=1e-12)
    for o, p in zip(rms(nt).unbind(), parts):
        np.testing.assert_allclose(npy(o), p / np.sqrt((p * p).mean(-1, keepdims=True) + 1e-6) * rw, rtol=1e-10)
    assert nn.LayerNorm(4, elementwise_affine=False).weight is None
    assert nn.LayerNorm(4, bias=False).bias is None


def test_activations_dense_and_nested():
    x = np.linspace(-3, 3, 13)
    erf = np.vectorize(math.erf)
    cases = [
        (nn.ReLU(), np.maximum(x, 0)),
        (nn.SiLU(), x / (1 + np.exp(-x))),
        (nn.GELU(), 0.5 * x * (1 + erf(x / math.sqrt(2)))),
        (nn.GELU("tanh"), 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ]
    for mod, want in cases:
        np.testing.assert_allclose(npy(mod(jag.tensor(x))), want, rtol=1e-10, atol=1e-12)
    nt, parts = nested([(2, 3), (4, 3)], 6)
    for mod, fn in [(nn.ReLU(), lambda a: np.maximum(a, 0)), (nn.SiLU(), lambda a: a / (1 + np.exp(-a)))]:
        for o, p in zip(mod(nt).unbind(), parts):
            np.testing.assert_allclose(npy(o), fn(p), rtol=1e-10)
    with pytest.raises(ValueError):
        nn.GELU("fast")


def test_dropout_train_and_eval():
    d = nn.Dropout(0.25)
    x = jag.ones(1000, dtype=jag.float64)
    y = npy(d(x, generator=jag.Generator(1)))
    assert set(np.unique(y)) <= {0.0, 1 / 0.75}
    assert 0.15 < (y == 0).mean() < 0.35
    d.eval()
    np.testing.assert_array_equal(npy(d(x)), 1.0)
    nt, parts = nested([(3, 2), (2, 2)], 7)
    d.train()
    out = d(nt, generator=jag.Generator(2))
    for o, p in zip(out.unbind(), parts):
        kept = npy(o) != 0
        np.testing.assert_allclose(npy(o)[kept], p[kept] / 0.75, rtol=1e-12)
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


# --- init ------------------------------------------------------------------------


def test_init_formulas_and_statistics():
    init = nn.init
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert init.calculate_gain("linear") == 1
    t = jag.empty(300, 200, dtype=jag.float64)
    # xavier_uniform_: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))
    a = 2 * math.sqrt(6 / 500)
    w = npy(init.xavier_uniform_(t, gain=2, generator=jag.Generator(0)))
    assert np.abs(w).max() <= a and np.abs(w).max() > 0.99 * a
    np.testing.assert_allclose(w.std(), a / math.sqrt(3), rtol=0.02)
    w = npy(init.xavier_normal_(t, generator=jag.Generator(1)))
    np.testing.assert_allclose(w.std(), math.sqrt(2 / 500), rtol=0.02)
    # kaiming: std = gain / sqrt(fan), fan_in = 200, fan_out = 300
    w = npy(init.kaiming_normal_(t, nonlinearity="relu", generator=jag.Generator(2)))
    np.testing.assert_allclose(w.std(), math.sqrt(2) / math.sqrt(200), rtol=0.02)
    w = npy(init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu", generator=jag.Generator(3)))
    bound = math.sqrt(2) * math.sqrt(3 / 300)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    w = npy(init.uniform_(t, -2, 3, generator=jag.Generator(4)))
    assert w.min() >= -2 and w.max() < 3 and abs(w.mean() - 0.5) < 0.02
    w = npy(init.normal_(t, 1.5, 0.5, generator=jag.Generator(5)))
    assert abs(w.mean() - 1.5) < 0.01 and abs(w.std() - 0.5) < 0.01
    np.testing.assert_array_equal(npy(init.constant_(t, 0.25)), 0.25)
    np.testing.assert_array_equal(npy(init.zeros_(t)), 0.0)
    np.testing.assert_array_equal(npy(init.ones_(t)), 1.0)
    # seeded: the same generator seed gives the same numbers
    a1 = npy(init.normal_(jag.empty(5), generator=jag.Generator(9))).copy()
    a2 = npy(init.normal_(jag.empty(5), generator=jag.Generator(9)))
    np.testing.assert_array_equal(a1, a2)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(jag.empty(5))
    # a parameter is written in place and stays a leaf requiring grad
    p = nn.Parameter(jag.zeros(4, 4))
    v = p._version
    init.kaiming_uniform_(p)
    assert p._version > v and p.is_leaf and p.requires_grad


# --- a tiny training loop ---------------------------------------------------------------


def train_once(seed, steps=40):
    jag.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
    g = jag.Generator(seed + 100)
    x = jag.randn(64, 3, generator=g)
    w_true = jag.tensor([[1.0], [-2.0], [0.5]])
    y = x @ w_true
    opt = jag.optim.AdamW(model.parameters(), lr=0.02)
    sched = jag.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=5)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        sched.step()
        losses.append(float(loss))
    return losses, [npy(p).copy() for p in model.parameters()]


def test_training_loop_learns_and_is_reproducible():
    l1, p1 = train_once(0)
    l2, p2 = train_once(0)
    assert l1[-1] < 0.2 * l1[0]
    assert l1 == l2  # bit for bit
    for a, b in zip(p1, p2):
        np.testing.assert_array_equal(a, b)
    l3, _ = train_once(1)
    assert l3 != l1


def test_training_loop_nested_batch():
    jag.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 4))
    nt, parts = nested([(3, 4), (5, 4), (2, 4)], 11, dtype=jag.float32)
    opt = jag.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    first = last = None
    for _ in range(30):
        opt.zero_grad()
        loss = F.mse_loss(model(nt), nt)
        loss.backward()
        opt.step()
        first = float(loss) if first is None else first
        last = float(loss)
    assert last < 0.5 * first


# --- EmbeddingBag, MultiheadAttention, TransformerEncoderLayer ---------------------


def test_embedding_bag_dense_offsets_and_nested():
    jag.manual_seed(8)
    for mode in ("sum", "mean", "max"):
        bag = nn.EmbeddingBag(7, 3, mode=mode, dtype=jag.float64)
        W = npy(bag.weight)
        red = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode]
        idx = np.array([[1, 2, 6], [0, 0, 3]])
        np.testing.assert_allclose(npy(bag(jag.tensor(idx))), red(W[idx], axis=1), rtol=1e-12)
        flat, offs = jag.tensor([1, 2, 6, 0, 4]), jag.tensor([0, 3])
        want = np.stack([red(W[[1, 2, 6]], axis=0), red(W[[0, 4]], axis=0)])
        np.testing.assert_allclose(npy(bag(flat, offs)), want, rtol=1e-12)
        nidx = jag.nested.nested_tensor([jag.tensor([1, 2, 6]), jag.tensor([0, 4])], layout=jag.jagged)
        np.testing.assert_allclose(npy(bag(nidx)), want, rtol=1e-12)


def np_mha(x, Wi, bi, Wo, bo, H, causal=False):
    """torch's multi-head attention (batch first) written out in numpy."""
    B, L, E = x.shape
    Dh = E // H
    q, k, v = (x @ Wi[i * E:(i + 1) * E].T + bi[i * E:(i + 1) * E] for i in range(3))
    split = lambda t: t.reshape(B, L, H, Dh).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(Dh)
    if causal:
        s = s + np.where(np.tril(np.ones((L, L))) > 0, 0.0, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    o = (w @ v).transpose(0, 2, 1, 3).reshape(B, L, E)
    return o @ Wo.T + bo, w.mean(1)


def test_multihead_attention_dense_and_nested():
    jag.manual_seed(9)
    mha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=jag.float64)
    assert [n for n, _ in mha.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                      "out_proj.bias"]
    np.testing.assert_array_equal(npy(mha.in_proj_bias), 0.0)
    a = math.sqrt(6 / (8 + 24))  # xavier_uniform_ of (3E, E)
    assert np.abs(npy(mha.in_proj_weight)).max() <= a
    with jag.no_grad():
        mha.in_proj_bias.copy_(jag.tensor(np.linspace(-0.5, 0.5, 24)))
    Wi, bi, Wo, bo = (npy(p) for p in mha.parameters())
    x = np.random.default_rng(10).standard_normal((2, 5, 8))
    want, wavg = np_mha(x, Wi, bi, Wo, bo, 2)
    out, w = mha(jag.tensor(x), jag.tensor(x), jag.tensor(x))
    np.testing.assert_allclose(npy(out), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(w), wavg, rtol=1e-10, atol=1e-12)
    out2, none = mha(jag.tensor(x), jag.tensor(x), jag.tensor(x), need_weights=False)
    assert none is None
    np.testing.assert_allclose(npy(out2), want, rtol=1e-10, atol=1e-12)
    want_c, _ = np_mha(x, Wi, bi, Wo, bo, 2, causal=True)
    out_c, _ = mha(jag.tensor(x), jag.tensor(x), jag.tensor(x), need_weights=False, is_causal=True)
    np.testing.assert_allclose(npy(out_c), want_c, rtol=1e-10, atol=1e-12)
    # sequence first (batch_first=False, torch's default): (L, B, E)
    mha.batch_first = False
    xt = jag.tensor(x.transpose(1, 0, 2).copy())
    np.testing.assert_allclose(npy(mha(xt, xt, xt)[0]), want.transpose(1, 0, 2), rtol=1e-10, atol=1e-12)
    mha.batch_first = True
    # nested: each component as its own batch of one
    nt, parts = nested([(5, 8), (2, 8), (3, 8)], 12)
    outs = mha(nt, nt, nt, need_weights=False)[0].unbind()
    for o, p in zip(outs, parts):
        np.testing.assert_allclose(npy(o), np_mha(p[None], Wi, bi, Wo, bo, 2)[0][0], rtol=1e-10, atol=1e-12)
    with pytest.raises(AssertionError, match="need_weights"):
        mha(nt, nt, nt)


def np_gqa(xq, xkv, Wi, bi, Wo, bo, H, KV, mask=None):
    """Grouped-query attention in numpy: KV key/value heads, query head h
    reading key/value head h // (H / KV); mask additive (L, S)."""
    L, E = xq.shape
    S, Dh = xkv.shape[0], E // H
    q = xq @ Wi[:E].T + bi[:E]
    k = xkv @ Wi[E:E + KV * Dh].T + bi[E:E + KV * Dh]
    v = xkv @ Wi[E + KV * Dh:].T + bi[E + KV * Dh:]
    q, k, v = q.reshape(L, H, Dh), k.reshape(S, KV, Dh), v.reshape(S, KV, Dh)
    out = np.empty((L, H, Dh))
    for h in range(H):
        g = h // (H // KV)
        s = q[:, h] @ k[:, g].T / math.sqrt(Dh) + (0 if mask is None else mask)
        w = np.exp(s - s.max(-1, keepdims=True))
        out[:, h] = (w / w.sum(-1, keepdims=True)) @ v[:, g]
    return out.reshape(L, E) @ Wo.T + bo


def test_multihead_attention_grouped_query_cross_lengths_and_nested_masks():
    jag.manual_seed(31)
    H, KV, E = 4, 2, 8
    mha = nn.MultiheadAttention(E, H, batch_first=True, dtype=jag.float64, num_kv_heads=KV)
    assert tuple(mha.in_proj_weight.shape) == (E + 2 * KV * (E // H), E)
    with jag.no_grad():
        mha.in_proj_bias.copy_(jag.randn(E + 2 * KV * (E // H), dtype=jag.float64))
    Wi, bi, Wo, bo = (npy(t) for t in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight,
                                       mha.out_proj.bias))
    r = np.random.default_rng(32)
    # dense, with and without the weights
    xq, xkv = r.standard_normal((2, 5, E)), r.standard_normal((2, 3, E))
    want = np.stack([np_gqa(xq[b], xkv[b], Wi, bi, Wo, bo, H, KV) for b in range(2)])
    for need in (False, True):
        out = mha(jag.tensor(xq), jag.tensor(xkv), jag.tensor(xkv), need_weights=need)[0]
        np.testing.assert_allclose(npy(out), want, rtol=1e-10, atol=1e-12)
    # nested query and key/value of other lengths per item, with a nested
    # additive mask of (L_b, S_b) per item
    lq, lk = [3, 1, 4], [2, 5, 1]
    qs = [r.standard_normal((n, E)) for n in lq]
    ks = [r.standard_normal((n, E)) for n in lk]
    masks = [np.where(r.random((a, b)) < 0.3, -1e9, r.standard_normal((a, b))) for a, b in zip(lq, lk)]
    for m in masks:
        m[:, 0] = 0.0  # every query sees at least one key
    nq = jag.nested.nested_tensor([jag.tensor(x) for x in qs], layout=jag.jagged)
    nk = jag.nested.nested_tensor([jag.tensor(x) for x in ks], layout=jag.jagged)
    nm = jag.nested.nested_tensor([jag.tensor(m) for m in masks])  # strided
    for mask in (None, nm):
        outs = mha(nq, nk, nk, need_weights=False, attn_mask=mask)[0].unbind()
        for b, o in enumerate(outs):
            want = np_gqa(qs[b], ks[b], Wi, bi, Wo, bo, H, KV, None if mask is None else masks[b])
            np.testing.assert_allclose(npy(o), want, rtol=1e-9, atol=1e-11)
    with pytest.raises(ValueError, match="num_kv_heads"):
        nn.MultiheadAttention(E, H, num_kv_heads=3)
    # functional sdpa: fewer key/value heads only with enable_gqa=True, as torch
    q4, k2 = jag.randn(1, 4, 3, 2, dtype=jag.float64), jag.randn(1, 2, 3, 2, dtype=jag.float64)
    with pytest.raises(RuntimeError, match="enable_gqa=True"):
        F.scaled_dot_product_attention(q4, k2, k2)
    g = F.scaled_dot_product_attention(q4, k2, k2, enable_gqa=True)
    k4 = k2.unsqueeze(2).expand(1, 2, 2, 3, 2).reshape(1, 4, 3, 2)  # head h reads key head h // 2
    full = F.scaled_dot_product_attention(q4, k4, k4)
    np.testing.assert_allclose(npy(g), npy(full), rtol=1e-12, atol=1e-14)


def np_layer(x, sd, H, norm_first):
    ln = lambda t, k: np_layer_norm(t, sd[k + ".weight"], sd[k + ".bias"], 1e-5)  # noqa: E731
    sa = lambda t: np_mha(t, sd["self_attn.in_proj_weight"], sd["self_attn.in_proj_bias"],  # noqa: E731
                          sd["self_attn.out_proj.weight"], sd["self_attn.out_proj.bias"], H)[0]
    ff = lambda t: np.maximum(t @ sd["linear1.weight"].T + sd["linear1.bias"], 0) @ sd["linear2.weight"].T \
        + sd["linear2.bias"]  # noqa: E731
    if norm_first:
        x = x + sa(ln(x, "norm1"))
        return x + ff(ln(x, "norm2"))
    x = ln(x + sa(x), "norm1")
    return ln(x + ff(x), "norm2")


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_dense_and_nested(norm_first):
    jag.manual_seed(13)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                       norm_first=norm_first, dtype=jag.float64)
    assert [n for n, _ in layer.named_parameters()] == [
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
        "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias",
        "norm2.weight", "norm2.bias"]  # torch's names and order
    sd = {k: npy(v) for k, v in layer.state_dict().items()}
    x = np.random.default_rng(14).standard_normal((2, 4, 8))
    np.testing.assert_allclose(npy(layer(jag.tensor(x))), np_layer(x, sd, 2, norm_first), rtol=1e-9, atol=1e-11)
    nt, parts = nested([(4, 8), (1, 8), (6, 8)], 15)
    for o, p in zip(layer(nt).unbind(), parts):
        np.testing.assert_allclose(npy(o), np_layer(p[None], sd, 2, norm_first)[0], rtol=1e-9, atol=1e-11)
    # it trains: a few AdamW steps on a nested batch lower the loss
    opt = jag.optim.AdamW(layer.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = F.mse_loss(layer(nt), nt * 0.5)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]


def test_transformer_encoder_stacks_independent_copies():
    jag.manual_seed(21)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, dtype=jag.float64)
    enc = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(8, dtype=jag.float64))
    names = [n for n, _ in enc.named_parameters()]
    assert names[0] == "layers.0.self_attn.in_proj_weight" and names[-2:] == ["norm.weight", "norm.bias"]
    assert len(names) == 2 * 12 + 2  # torch's names: layers.<i>.<layer's names>, then norm
    # deep copies, as torch's _get_clones: equal values, separate storage
    for (n0, p0), (n1, p1) in zip(enc.layers[0].named_parameters(), enc.layers[1].named_parameters()):
        assert n0 == n1 and p0 is not p1 and p1.requires_grad
        np.testing.assert_array_equal(npy(p0), npy(p1))
    with jag.no_grad():
        enc.layers[1].linear1.weight.mul_(2.0)  # the copies train apart
    assert not np.array_equal(npy(enc.layers[0].linear1.weight), npy(enc.layers[1].linear1.weight))
    np.testing.assert_array_equal(npy(layer.linear1.weight), npy(enc.layers[0].linear1.weight))
    sds = [{k: npy(v) for k, v in enc.layers[i].state_dict().items()} for i in range(2)]
    nw, nb = npy(enc.norm.weight), npy(enc.norm.bias)

    def np_encoder(x):
        for sd in sds:
            x = np_layer(x, sd, 2, False)
        return np_layer_norm(x, nw, nb, 1e-5)

    x = np.random.default_rng(22).standard_normal((2, 5, 8))
    np.testing.assert_allclose(npy(enc(jag.tensor(x))), np_encoder(x), rtol=1e-9, atol=1e-11)
    nt, parts = nested([(3, 8), (6, 8), (1, 8)], 23)
    for o, p in zip(enc(nt).unbind(), parts):
        np.testing.assert_allclose(npy(o), np_encoder(p[None])[0], rtol=1e-9, atol=1e-11)
    # gradients reach every layer's parameters
    enc(nt).values().sum().backward()
    assert all(p.grad is not None for p in enc.parameters())
    with pytest.raises(ValueError, match="num_layers"):
        nn.TransformerEncoder(layer, 0)
    with pytest.raises(TypeError, match="encoder_layer"):
        nn.TransformerEncoder("layer", 2)


def test_multihead_attention_dropout():
    """torch's module drops attention weights while training only: each
    weight is 0 or the eval weight / (1 - p), the returned weights are the
    dropped ones; p = 1 leaves only out_proj's bias (the attention output is
    zero); eval mode is the dropout-free result."""
    jag.manual_seed(3)
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True, dtype=jag.float64)
    with jag.no_grad():
        mha.out_proj.bias.copy_(jag.tensor(np.linspace(-1, 1, 8)))
    Wi, bi, Wo, bo = (npy(p) for p in mha.parameters())
    x = np.random.default_rng(4).standard_normal((2, 5, 8))
    X = jag.tensor(x)
    mha.eval()
    want, _ = np_mha(x, Wi, bi, Wo, bo, 2)
    out, _ = mha(X, X, X)
    np.testing.assert_allclose(npy(out), want, rtol=1e-10, atol=1e-12)
    _, w_eval = mha(X, X, X, average_attn_weights=False)
    mha.train()
    out_t, w_t = mha(X, X, X, average_attn_weights=False)
    wt, we = npy(w_t), npy(w_eval)
    kept = wt != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(wt[kept], 2.0 * we[kept], rtol=1e-12)
    assert not np.allclose(npy(out_t), want)
    mha.dropout = 1.0
    for need in (True, False):
        out1, _ = mha(X, X, X, need_weights=need)
        np.testing.assert_allclose(npy(out1), np.broadcast_to(bo, (2, 5, 8)), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.MultiheadAttention(8, 2, dropout=1.5)
