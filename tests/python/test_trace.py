"""jag.trace and jag.compile: printed programs, compiled results against
eager ones, one program per kind of inputs, bad inputs refused, autograd
through compiled code, Python exceptions from traced functions."""
import gc
import itertools

import numpy as np
import pytest

import jag
import jag.nn.functional as F
from jag import _C

_ids = itertools.count()


def jagged(lengths, d=3, dtype=jag.float32, requires_grad=False, seed=0):
    rng = np.random.default_rng(seed)
    return jag.nested.nested_tensor([jag.tensor(rng.standard_normal((n, d)), dtype=dtype) for n in lengths],
                                    layout=jag.jagged, requires_grad=requires_grad)


def close(a, b, tol=1e-5):
    a, b = a.detach(), b.detach()
    if a.is_nested:
        assert b.is_nested and a.offsets().tolist() == b.offsets().tolist()
        a, b = a.values(), b.values()
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


def walkthrough_step(x, w):
    """Steps 2 and 3 of examples/nested_subclass_walkthrough.py: sin, jagged mm, silu."""
    return F.silu(jag.sin(x) @ w)


def test_printed_trace_of_the_walkthrough_step():
    nt = jagged([2, 4, 3], d=2)
    w = jag.randn(2, 2)
    text = str(jag.trace(walkthrough_step, nt, w, names=("x", "w")).desugar().dce())
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == "def computation(x, w):"
    assert "# x: nested(jagged) f32[3, j" in text and "(values f32[9, 2], offsets i64[4])" in text
    assert "x_values, x_offsets = flatten(x)" in lines
    ops = [line.split("=")[1].split("(")[0].strip() for line in lines if " = " in line and "flatten(x)" not in line]
    assert ops == ["sin", "matmul", "silu", "unflatten[nested]"], text
    assert lines[-1].startswith("return ")
    # after desugar no symbol is on a nested value: every temporary is plain
    # until the unflatten at the bottom
    body = [line for line in lines if " = " in line and "flatten" not in line]
    assert all("# f32[9, 2]" in line for line in body), text


def test_raw_trace_records_ops_on_the_subclass():
    nt = jagged([1, 2])
    text = str(jag.trace(lambda x: jag.cos(x) * 2.0, nt))
    assert "cos(x0)" in text and "nested(jagged)" in text


def test_compiled_equals_eager_on_new_lengths_and_batches():
    w = jag.randn(3, 5)
    prog = jag.trace(walkthrough_step, jagged([2, 4, 3]), w).compile()
    for lengths in ([2, 4, 3], [7, 1], [1], [3, 0, 5, 2, 9]):
        nt = jagged(lengths, seed=len(lengths))
        close(prog(nt, w), walkthrough_step(nt, w))


def test_fused_pointwise_chain_equals_eager():
    def chain(x):
        y = x
        for _ in range(2):
            y = jag.tanh(jag.sigmoid(y) * 1.5 + y) - 0.25
        return jag.exp(-jag.abs(y))

    nt = jagged([5, 17, 3], d=8)
    tr = jag.trace(chain, nt).desugar().dce().fuse()
    assert "fused" in str(tr)
    close(tr.compile()(nt), chain(nt))
    dense = jag.randn(4, 33)
    close(jag.compile(chain)(dense), chain(dense))


def test_transformer_block_forward_and_backward():
    d = 8
    rng = np.random.default_rng(1)

    def param(*shape):
        return jag.tensor(rng.standard_normal(shape) * 0.3, dtype=jag.float32, requires_grad=True)

    w1, b1, w2, lw, lb = param(16, d), param(16), param(d, 16), param(d), param(d)

    def block(x, w1, b1, w2, lw, lb):
        h = F.layer_norm(x, (d,), lw, lb)
        y = x + F.linear(F.gelu(F.linear(h, w1, b1)), w2)
        return jag.softmax(y, -1)

    fast = jag.compile(block)
    params = [w1, b1, w2, lw, lb]
    for lengths in ([3, 5, 2], [6, 1]):
        x = jagged(lengths, d=d, requires_grad=True, seed=len(lengths))
        out = fast(x, *params)
        ref = block(x, *params)
        close(out, ref)
        out.values().sum().backward()
        got = [x.grad.values().numpy().copy()] + [p.grad.numpy().copy() for p in params]
        for t in [x] + params:
            t.grad = None
        ref.values().sum().backward()
        want = [x.grad.values().numpy()] + [p.grad.numpy() for p in params]
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        for t in [x] + params:
            t.grad = None
    # without grad, the program for one batch serves batches of other lengths
    with jag.no_grad():
        fwd = jag.compile(block)
        for lengths in ([3, 5, 2], [6, 1], [1, 1, 1, 9]):
            x = jagged(lengths, d=d, seed=len(lengths))
            close(fwd(x, *params), block(x, *params))
    assert fwd.num_programs == 1


def test_one_program_for_other_lengths_when_sizes_are_constants():
    # view(-1, 2, 4): the 2 and the 4 are no input size, so the first trace
    # fixes its sizes; the second batch length shows they are constants
    rng = np.random.default_rng(5)
    w = jag.tensor(rng.standard_normal((8, 8)), dtype=jag.float32)

    def heads(x, w):
        return (x @ w).values().view(-1, 2, 4).sum(2) * 0.5

    fast = jag.compile(heads)
    for lengths in ([2, 4, 3, 1], [5, 1, 1, 2], [1, 7, 2, 3], [3, 3, 3, 3]):
        x = jagged(lengths, d=8, seed=sum(lengths))
        np.testing.assert_allclose(fast(x, w).numpy(), heads(x, w).numpy(), rtol=1e-6, atol=1e-6)
    assert fast.num_programs == 1


def test_one_program_for_every_batch_size_with_mean_in_the_loss():
    # a training step whose loss is a mean over the batch (cross_entropy):
    # mean's gradient divides by the batch size, read from the inputs at run
    # time (mean_backward's size list), so the program of the first two
    # batch sizes serves every other one, and its gradients are eager's
    rng = np.random.default_rng(8)
    emb = jag.tensor(rng.standard_normal((20, 6)), dtype=jag.float32, requires_grad=True)
    w = jag.tensor(rng.standard_normal((3, 6)), dtype=jag.float32, requires_grad=True)

    def loss_fn(ids, labels, emb, w):
        pooled = F.embedding(ids, emb).mean(1)  # (B, 6)
        return F.cross_entropy(pooled @ w.t(), labels) + (pooled * pooled).mean(0).sum()

    fast = jag.compile(loss_fn)
    for lengths in ([3, 4], [2, 5, 1], [4, 4, 4, 2], [1], [6, 2, 3, 3, 3]):
        ids = jag.nested.nested_tensor([jag.tensor(rng.integers(0, 20, n), dtype=jag.int64) for n in lengths],
                                       layout=jag.jagged)
        labels = jag.tensor(rng.integers(0, 3, len(lengths)), dtype=jag.int64)
        grads = []
        for f in (fast, loss_fn):
            emb.grad = w.grad = None
            loss = f(ids, labels, emb, w)
            loss.backward()
            grads.append((float(loss), emb.grad.numpy().copy(), w.grad.numpy().copy()))
        assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-6)
        for got, want in zip(grads[0][1:], grads[1][1:]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert fast.num_programs == 1


def test_one_program_per_kind_of_inputs():
    fast = jag.compile(lambda x: jag.sin(x) + 1.0)
    fast(jag.randn(3))
    fast(jag.randn(7))  # same kind: same program
    assert fast.num_programs == 1
    fast(jag.randn(2, 2))  # another rank
    fast(jag.randn(3, dtype=jag.float64))  # another dtype
    fast(jagged([1, 2]))  # another layout
    assert fast.num_programs == 4


def test_fixed_program_refuses_other_inputs_and_runs_nothing():
    prog = jag.trace(walkthrough_step, jagged([2, 3]), jag.randn(3, 3)).compile()
    w = jag.randn(3, 3)
    with pytest.raises(TypeError, match="dtype float64, expected float32"):
        prog(jagged([2, 3], dtype=jag.float64), w)
    with pytest.raises(ValueError, match="expected a nested tensor"):
        prog(jag.randn(5, 3), w)
    with pytest.raises(ValueError):
        prog(jagged([2, 3]), jag.randn(3, 3, 3))  # rank
    with pytest.raises(ValueError):
        prog(jagged([2, 3]))  # count
    with pytest.raises(TypeError):
        prog(jagged([2, 3]), "w")
    close(prog(jagged([4]), w), walkthrough_step(jagged([4]), w))  # still usable


def test_several_outputs_and_subclass_outputs():
    def f(x, y):
        return jag.sin(x), jag.nested.nested_tensor_from_jagged(y * 2.0, jag.tensor([0, 1, 3]))

    x, y = jag.randn(4), jag.randn(3, 2)
    a, b = jag.compile(f)(x, y)
    close(a, jag.sin(x))
    assert b.is_nested and b.offsets().tolist() == [0, 1, 3]
    np.testing.assert_allclose(b.values().numpy(), y.numpy() * 2, rtol=1e-6)
    text = str(jag.trace(f, x, y))
    assert "subclass_ctor" in text or "nested_from_jagged" in text


def test_custom_op_with_python_kernels_traces_and_runs():
    lib = jag.library.Library("trace_ns", "FRAGMENT")
    name = "twice_%d" % next(_ids)
    lib.define(name + "(Tensor x) -> Tensor")
    lib.impl(name, lambda x: jag.tensor(x.numpy() * 2.0), "CPU")
    lib.impl(name, lambda x: jag.empty_like(x), "Meta")
    op = getattr(jag.ops.trace_ns, name)
    prog = jag.trace(lambda x: jag.cos(op(x)), jag.randn(5)).compile()
    x = jag.randn(6)
    np.testing.assert_allclose(prog(x).numpy(), np.cos(x.numpy() * 2.0), rtol=1e-6)
    assert name in prog.trace


def test_python_exceptions_come_through():
    def bad(x):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        jag.trace(bad, jag.randn(2))
    with pytest.raises(KeyError, match="boom"):
        jag.compile(bad)(jag.randn(2))
    with pytest.raises(TypeError, match="expected a jag.Tensor"):
        jag.trace(lambda x: 3, jag.randn(2))
    with pytest.raises(TypeError, match="callable"):
        jag.trace(3, jag.randn(2))
    with pytest.raises(ValueError, match="unknown pass"):
        jag.compile(lambda x: x, passes=("nope",))
    # reading data of a proxy is refused with an error, not a crash
    with pytest.raises(Exception):
        jag.trace(lambda x: jag.tensor(x.numpy()), jag.randn(2))


def test_passes_chosen_by_name():
    f = lambda x: jag.relu(jag.sin(x) * 3.0)  # noqa: E731
    x = jagged([2, 2])
    for passes in ((), ("desugar",), ("desugar", "dce"), ("desugar", "dce", "fuse")):
        close(jag.compile(f, passes=passes)(x), f(x))

    @jag.compile
    def g(x):
        return jag.exp(x)

    close(g(x), jag.exp(x))


def test_compiled_calls_release_everything():
    made0, rel0 = _C._test_blob_counts()
    prog = jag.trace(lambda x: jag.sin(x) * 2.0 + x, _C._test_blob(8)).compile()
    fast = jag.compile(lambda x: jag.cos(x).sum())
    for _ in range(2000):
        t = _C._test_blob(8)
        prog(t)
        fast(t)
    del t, prog, fast
    gc.collect()
    made, rel = _C._test_blob_counts()
    assert made - made0 == rel - rel0


def test_random_numbers_inside_a_traced_function_are_refused():
    # never a constant baked into the program (the same numbers on every
    # call): every random factory refuses while a function is traced, with
    # the thread's generator, a jag.Generator or a seed
    g = jag.Generator(3)
    makers = [
        lambda x: x + jag.randn(3),
        lambda x: x + jag.rand(3),
        lambda x: x + jag.randn(3, generator=g),
        lambda x: x + jag.rand(3, seed=1, dtype=jag.float64).to(jag.float32),
        lambda x: x + jag.randn_like(x),
        lambda x: x + jag.rand_like(x, generator=g),
        lambda x: F.dropout(x, 0.5, training=True),
    ]
    for fn in makers:
        with pytest.raises(NotImplementedError, match="random numbers inside a traced function"):
            jag.compile(fn)(jag.zeros(3))
        with pytest.raises(NotImplementedError, match="random numbers inside a traced function"):
            jag.trace(fn, jag.zeros(3))
    # the refused calls drew nothing: g still gives a fresh generator's numbers
    np.testing.assert_array_equal(jag.randn(3, generator=g).numpy(), jag.randn(3, generator=jag.Generator(3)).numpy())
    # numbers drawn outside and passed in are new on every call
    fast = jag.compile(lambda x, r: x + r)
    x = jag.zeros(3)
    r1, r2 = jag.randn(3), jag.randn(3)
    a, b = fast(x, r1).numpy(), fast(x, r2).numpy()
    np.testing.assert_array_equal(a, r1.numpy())
    np.testing.assert_array_equal(b, r2.numpy())
    assert not np.array_equal(a, b)


def test_reading_data_inside_a_traced_function_says_why():
    # the tensors a traced function sees are proxies: reading their data is
    # refused with a message that says so, in every form
    for fn in (lambda x: x * x.sum().item(), lambda x: x * float(x.sum()), lambda x: x * int(x.sum()),
               lambda x: x if bool(x.sum() > 0) else -x):
        with pytest.raises(NotImplementedError, match="cannot be read while a function is being traced"):
            jag.compile(fn)(jag.ones(3))
        with pytest.raises(NotImplementedError, match="pass the value as an input"):
            jag.trace(fn, jag.ones(3))
    for fn in (lambda x: x * x.numpy().sum(), lambda x: x * len(x.tolist())):
        with pytest.raises(TypeError, match="inside jag.trace or jag.compile tensors are proxies without data"):
            jag.compile(fn)(jag.ones(3))
    for fn in (lambda x: x * len(memoryview(x)), lambda x: x * len(np.from_dlpack(x))):
        with pytest.raises(BufferError, match="inside jag.trace or jag.compile tensors are proxies without data"):
            jag.compile(fn)(jag.ones(3))
    # the value passed as an input instead
    fast = jag.compile(lambda x, s: x * s)
    x = jag.tensor([1.0, 2.0, 3.0])
    np.testing.assert_allclose(fast(x, x.sum()).numpy(), [6.0, 12.0, 18.0])
