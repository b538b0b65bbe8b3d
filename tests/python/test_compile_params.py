"""jag.compile of functions and modules that read tensors from outside their
arguments: closed-over and global tensors, module parameters and buffers are
inputs of the program (as torch.compile lifts them), so gradients reach
them, optimizer updates and rebindings are seen. Results and gradients are
checked against the eager run of the same function on the same tensors (what
torch.compile gives too), and against values computed by hand."""
import gc

import numpy as np
import pytest

import jag
import jag.nn as nn
import jag.nn.functional as F


def jagged(lengths, d=3, requires_grad=False, seed=0):
    rng = np.random.default_rng(seed)
    return jag.nested.nested_tensor([jag.tensor(rng.standard_normal((n, d)), dtype=jag.float32) for n in lengths],
                                    layout=jag.jagged, requires_grad=requires_grad)


def param(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return jag.tensor(rng.standard_normal(shape) * 0.5, dtype=jag.float32, requires_grad=True)


def values(t):
    t = t.detach()
    return (t.values() if t.is_nested else t).numpy().copy()


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def grads_of(tensors):
    """The gradients as arrays (None where none), then cleared."""
    out = []
    for t in tensors:
        out.append(None if t.grad is None else values(t.grad))
        t.grad = None
    return out


def assert_same_grads(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g is not None and w is not None
        close(g, w)


def loss_of(out):
    return (out.values() if out.is_nested else out).sum()


# ---- closures ------------------------------------------------------------------

def test_closed_over_weights_get_the_gradients_of_eager():
    w, b = param(3, 4, seed=1), param(4, seed=2)

    def step(x):  # w and b come from the closure
        return F.silu(jag.sin(x) @ w + b)

    fast = jag.compile(step)
    for lengths in ([2, 4, 3], [7, 1], [1, 5, 2, 2]):
        x = jagged(lengths, requires_grad=True, seed=len(lengths))
        out = fast(x)
        loss_of(out).backward()
        got = grads_of([x, w, b])
        ref = step(x)
        close(values(out), values(ref))
        loss_of(ref).backward()
        want = grads_of([x, w, b])
        assert_same_grads(got, want)


def test_closure_tensor_read_by_an_inner_function_is_lifted_too():
    w = param(3, seed=3)

    def outer(x):
        inner = lambda y: y * w  # noqa: E731  (w: a cell of outer, passed on to inner)
        return inner(x).sum()

    fast = jag.compile(outer)
    x = jag.randn(5, 3)
    fast(x).backward()
    got = grads_of([w])
    outer(x).backward()
    assert_same_grads(got, grads_of([w]))
    # the gradient of sum(x * w) by w is x summed over rows
    close(got[0], x.numpy().sum(0))


# ---- globals -------------------------------------------------------------------

G_WEIGHT = param(3, 2, seed=4)
G_OTHER = jag.ones(2)


def uses_globals(x):
    return jag.tanh(x @ G_WEIGHT) * G_OTHER


def test_global_weights_get_the_gradients_of_eager():
    fast = jag.compile(uses_globals)
    x = jagged([3, 1, 4], requires_grad=True, seed=7)
    loss_of(fast(x)).backward()
    got = grads_of([x, G_WEIGHT])
    loss_of(uses_globals(x)).backward()
    assert_same_grads(got, grads_of([x, G_WEIGHT]))


def test_rebinding_a_global_is_seen():
    global G_OTHER
    saved = G_OTHER
    try:
        fast = jag.compile(uses_globals)
        x = jag.randn(4, 3)
        with jag.no_grad():
            first = values(fast(x))
            G_OTHER = jag.full((2,), 3.0)  # same kind: the same program
            second = values(fast(x))
            assert fast.num_programs == 1
            close(second, 3.0 * first)
            close(second, values(uses_globals(x)))
            G_OTHER = jag.full((2,), 2.0, dtype=jag.float64)  # another dtype: a new program, no error
            third = fast(x)
            assert fast.num_programs == 2
            assert third.dtype == jag.float64
            close(values(third), 2.0 * first)
    finally:
        G_OTHER = saved


# ---- rebinding and kinds -------------------------------------------------------

def test_rebinding_a_closed_over_name_is_seen_and_a_new_kind_retraces():
    w = jag.tensor([1.0, 2.0, 3.0])

    def scaled(x):
        return x * w

    fast = jag.compile(scaled)
    x = jag.tensor([1.0, 1.0, 2.0])
    close(values(fast(x)), [1.0, 2.0, 6.0])
    w = jag.tensor([0.5, -1.0, 4.0])  # rebinds the cell scaled reads
    close(values(fast(x)), [0.5, -1.0, 8.0])
    assert fast.num_programs == 1
    w = jag.tensor([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])  # another rank: traced again, not an error
    close(values(fast(x)), [[1.0, 2.0, 6.0], [2.0, 2.0, 4.0]])
    assert fast.num_programs == 2
    w = jagged([2, 1], d=3, seed=9)  # a nested tensor in the cell
    out = fast(x)
    assert out.is_nested
    close(values(out), values(w) * x.numpy())
    w = 2.5  # no tensor at all: a constant of a program of its own
    close(values(fast(x)), [2.5, 2.5, 5.0])


def test_requires_grad_of_a_lifted_tensor_selects_the_program():
    w = jag.tensor([1.0, 2.0])
    fast = jag.compile(lambda x: (x * w).sum())
    x = jag.tensor([3.0, 4.0])
    close(values(fast(x)), 11.0)
    w.requires_grad_(True)
    fast(x).backward()
    close(values(w.grad), [3.0, 4.0])  # d/dw sum(x * w) = x
    assert fast.num_programs == 2


# ---- optimizers ----------------------------------------------------------------

def train(step, params, make_optimizer, batches):
    opt = make_optimizer(params)
    losses = []
    for x, target in batches:
        opt.zero_grad()
        loss = step(x, target)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach().numpy()))
    return losses


@pytest.mark.parametrize("make_optimizer", [lambda ps: jag.optim.SGD(ps, lr=0.1, momentum=0.9),
                                            lambda ps: jag.optim.AdamW(ps, lr=0.05)])
def test_optimizer_updates_are_seen_by_the_next_call(make_optimizer):
    batches = []
    for i, lengths in enumerate(([3, 2, 4], [1, 5], [2, 2, 2, 2], [6, 1, 3])):
        x = jagged(lengths, d=4, seed=10 + i)
        target = jag.tensor(np.random.default_rng(20 + i).standard_normal((len(lengths), 2)), dtype=jag.float32)
        batches.append((x, target))

    def run(compiled):
        w1, w2 = param(4, 8, seed=5), param(8, 2, seed=6)

        def loss(x, target):  # reads w1 and w2 from the closure
            h = jag.tanh(x @ w1) @ w2
            return F.mse_loss(h.sum(1), target)

        fn = jag.compile(loss) if compiled else loss
        losses = train(fn, [w1, w2], make_optimizer, batches)
        return losses, values(w1), values(w2)

    eager_losses, ew1, ew2 = run(False)
    fast_losses, fw1, fw2 = run(True)
    close(fast_losses, eager_losses)
    close(fw1, ew1)
    close(fw2, ew2)
    # the weights moved: every step after the first saw the update before it
    assert len(set(np.round(fast_losses, 6))) == len(fast_losses)


# ---- modules -------------------------------------------------------------------

def module_grads(module):
    return grads_of([p for _, p in module.named_parameters()])


def check_module_against_eager(module, fast, inputs):
    for x in inputs:
        out = fast(x)
        loss_of(out).backward()
        got = module_grads(module)
        ref = module(x)
        close(values(out), values(ref))
        loss_of(ref).backward()
        assert_same_grads(got, module_grads(module))


def test_compiled_linear_fills_the_parameters_gradients():
    lin = nn.Linear(3, 5)
    fast = jag.compile(lin)
    check_module_against_eager(lin, fast, [jag.randn(4, 3), jagged([2, 5, 1]), jagged([3, 3], seed=2)])
    # the gradient of sum(x @ W^T + b): dW[i, j] = sum over rows of x[:, j], db = rows
    x = jag.randn(6, 3)
    loss_of(fast(x)).backward()
    close(values(lin.weight.grad), np.tile(x.numpy().sum(0), (5, 1)))
    close(values(lin.bias.grad), np.full(5, 6.0))


def test_compiled_sequential_with_layer_norm_every_parameter_gets_eagers_gradient():
    jag.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3))
    names = [n for n, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"]
    fast = jag.compile(model)
    check_module_against_eager(model, fast, [jagged(ls, d=4, seed=i) for i, ls in enumerate(([2, 3], [4, 1, 1]))])
    # the module's own interface stays reachable
    assert [n for n, _ in fast.named_parameters()] == names
    assert fast.__wrapped__ is model


def test_compiled_bound_forward_reads_the_modules_parameters():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    fast = jag.compile(model.forward)
    check_module_against_eager(model, fast, [jag.randn(5, 3), jagged([2, 2, 1])])


def test_module_in_a_closure_and_an_optimizer_loop():
    model = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.Linear(6, 1))
    start = {k: v.clone() for k, v in model.state_dict().items()}

    def loss(x, target):  # the model comes from the closure
        return F.mse_loss(model(x).sum(1), target)

    batches = [(jagged(ls, d=4, seed=i), jag.tensor(np.arange(len(ls), dtype=np.float32).reshape(-1, 1)))
               for i, ls in enumerate(([2, 3, 1], [5, 2], [1, 1, 4]))]
    params = list(model.parameters())
    fast_losses = train(jag.compile(loss), params, lambda ps: jag.optim.SGD(ps, lr=0.05), batches)
    model.load_state_dict(start)
    eager_losses = train(loss, params, lambda ps: jag.optim.SGD(ps, lr=0.05), batches)
    close(fast_losses, eager_losses)


def test_buffers_are_inputs_and_in_place_updates_are_seen():
    class Shift(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("offset", jag.zeros(3))

        def forward(self, x):
            return x + self.offset

    m = Shift()
    fast = jag.compile(m)
    x = jag.tensor([1.0, 2.0, 3.0])
    close(values(fast(x)), [1.0, 2.0, 3.0])
    m.offset.add_(jag.tensor([10.0, 20.0, 30.0]))
    close(values(fast(x)), [11.0, 22.0, 33.0])
    m.offset = jag.tensor([1.0, 1.0, 1.0])  # rebound buffer
    close(values(fast(x)), [2.0, 3.0, 4.0])
    assert fast.num_programs == 1


def test_tied_parameter_is_one_input_with_the_summed_gradient():
    a, b = nn.Linear(3, 3, bias=False), nn.Linear(3, 3, bias=False)
    b.weight = a.weight
    model = nn.Sequential(a, b)
    fast = jag.compile(model)
    x = jag.randn(2, 3)
    check_module_against_eager(model, fast, [x])


def test_replacing_a_child_module_traces_again():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.lin(x))

    m = Block()
    fast = jag.compile(m)
    x = jag.tensor([[1.0, -2.0], [-3.0, 0.5]])
    with jag.no_grad():
        close(values(fast(x)), np.maximum(values(m.lin(x)), 0.0))
        m.act = nn.SiLU()  # no parameters either: only its identity tells
        y = values(m.lin(x))
        close(values(fast(x)), y / (1.0 + np.exp(-y)))


G_MODEL = nn.Linear(3, 1)


def global_model_loss(x):
    return G_MODEL(x).values().sum()


def test_module_in_a_global_gets_its_gradients():
    x = jagged([2, 3], seed=4)
    jag.compile(global_model_loss)(x).backward()
    got = module_grads(G_MODEL)
    global_model_loss(x).backward()
    assert_same_grads(got, module_grads(G_MODEL))


def test_train_and_eval_select_their_own_programs():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            y = self.lin(x)
            return y * 2.0 if self.lin.training else y

    m = Scaled()
    fast = jag.compile(m)
    x = jag.randn(3, 2)
    with jag.no_grad():
        close(values(fast(x)), values(m(x)))
        m.eval()
        close(values(fast(x)), values(m(x)))
        m.train()
        close(values(fast(x)), 2.0 * values(m.lin(x)))
    assert fast.num_programs == 2


def test_active_dropout_is_refused_and_eval_mode_compiles():
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Linear(3, 2))
    fast = jag.compile(model)
    x = jag.randn(4, 3)
    with pytest.raises(NotImplementedError, match="random numbers inside a traced function"):
        fast(x)
    model.eval()
    check_module_against_eager(model, fast, [x])
    # the refused trace left the parameters registered as they were
    assert all(isinstance(p, nn.Parameter) for p in model.parameters())


def test_parameters_are_restored_when_tracing_raises():
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(jag.ones(2))

        def forward(self, x):
            raise KeyError("boom")

    m = Bad()
    w = m.w
    with pytest.raises(KeyError, match="boom"):
        jag.compile(m)(jag.ones(2))
    assert m.w is w and m._parameters["w"] is w


# ---- what stays a constant ---------------------------------------------------------

HELPER_SCALE = jag.tensor([2.0, 2.0])


def helper(x):
    return x * HELPER_SCALE


def test_tensors_read_another_way_stay_constants():
    global HELPER_SCALE
    in_a_list = [jag.tensor([1.0, 1.0], requires_grad=True)]
    fast = jag.compile(lambda x: helper(x) + in_a_list[0])
    x = jag.tensor([1.0, 3.0], requires_grad=True)
    out = fast(x)
    close(values(out), [3.0, 7.0])
    out.sum().backward()
    # documented: a tensor in a container, or one another function reads from
    # its own globals, is a constant of the program: no gradient reaches it,
    # and rebinding it is not seen
    assert in_a_list[0].grad is None
    close(values(x.grad), [2.0, 2.0])
    saved = HELPER_SCALE
    try:
        in_a_list[0] = jag.tensor([5.0, 5.0])
        HELPER_SCALE = jag.tensor([10.0, 10.0])
        close(values(fast(x)), [3.0, 7.0])
    finally:
        HELPER_SCALE = saved


def test_too_many_inputs_in_all_is_a_clear_error():
    ws = [jag.ones(1) for _ in range(40)]

    def total(*xs):
        out = xs[0]
        for w in ws:  # ws is a list: not lifted, so pass 70 arguments
            out = out + w
        return out

    with pytest.raises(ValueError, match="at most 64"):
        jag.compile(total)(*[jag.ones(1) for _ in range(70)])
    many = nn.Sequential(*[nn.Linear(1, 1) for _ in range(40)])  # 80 parameters
    with pytest.raises(ValueError, match="80 tensors read from outside them"):
        jag.compile(many)(jag.ones(1, 1))


def test_calls_with_lifted_tensors_release_everything():
    made0, rel0 = jag._C._test_blob_counts()
    w = jag._C._test_blob(8)
    fast = jag.compile(lambda x: jag.sin(x) * w + x)
    for _ in range(500):
        t = jag._C._test_blob(8)
        fast(t)
        w = jag._C._test_blob(8)  # rebinding: the old one is freed
    del t, w, fast
    gc.collect()
    made, rel = jag._C._test_blob_counts()
    assert made - made0 == rel - rel0
