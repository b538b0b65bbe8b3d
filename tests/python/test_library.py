"""jag.library: custom ops defined from Python with Python kernels per key
and nested decompositions, called through jag.ops (step 4a of
examples/nested_subclass_walkthrough.py)."""
import itertools
import threading

import numpy as np
import pytest

import jag

_ids = itertools.count()


def fresh(prefix):
    """Op names are process-wide and permanent: every test defines its own."""
    return "%s_%d" % (prefix, next(_ids))


@pytest.fixture(scope="module")
def lib():
    return jag.library.Library("pytest_ns", "FRAGMENT")


def walkthrough_values():
    return jag.tensor([[1., 2.], [1., 2.], [3., 4.], [3., 4.], [3., 4.], [3., 4.], [6., 7.], [3., 4.], [6., 7.]])


def test_cpu_kernel_with_numpy(lib):
    name = fresh("add_one")
    lib.define(name + "(Tensor x) -> Tensor")
    seen = []

    def kernel(x):
        seen.append(type(x))
        return jag.tensor(x.numpy() + 1.0)

    lib.impl(name, kernel, "CPU")
    op = getattr(jag.ops.pytest_ns, name)
    assert op is op.default and repr(op) == "jag.ops.pytest_ns." + name
    x = jag.arange(6, dtype=jag.float64).reshape(2, 3)
    y = op(x)
    np.testing.assert_array_equal(y.numpy(), np.arange(6.0).reshape(2, 3) + 1)
    assert seen == [jag.Tensor]
    assert op.schema == "pytest_ns::%s(Tensor x) -> Tensor" % name


def test_every_argument_kind_and_several_outputs(lib):
    name = fresh("kinds")
    lib.define(name + "(Tensor x, Tensor? w, int n, float alpha, bool flag, int[] dims, Tensor[] xs) -> (Tensor, Tensor)")
    got = {}

    def kernel(x, w, n, alpha, flag, dims, xs):
        got.update(w=w, n=n, alpha=alpha, flag=flag, dims=dims, nxs=len(xs))
        return x * alpha, jag.tensor(np.asarray(dims, dtype=np.int64) * n)

    lib.impl(name, kernel, "CPU")
    op = getattr(jag.ops.pytest_ns, name)
    a, b = op(jag.ones(3), None, 4, 0.5, True, [1, 2], [jag.ones(1), jag.ones(2)])
    assert a.tolist() == [0.5] * 3 and b.tolist() == [4, 8]
    assert got == {"w": None, "n": 4, "alpha": 0.5, "flag": True, "dims": [1, 2], "nxs": 2}
    assert type(got["n"]) is int and type(got["alpha"]) is float and type(got["flag"]) is bool


def test_meta_kernel_infers_shapes(lib):
    name = fresh("outer")
    lib.define(name + "(Tensor a, Tensor b) -> Tensor")
    lib.impl(name, lambda a, b: jag.tensor(np.outer(a.numpy(), b.numpy())), "CPU")

    def meta(a, b):
        assert a.is_meta and b.is_meta
        return a.unsqueeze(1) * b.unsqueeze(0)  # runs as shape inference

    lib.impl(name, meta, "Meta")
    op = getattr(jag.ops.pytest_ns, name)
    m = op(jag.empty(3, device="meta"), jag.empty(5, device="meta"))
    assert m.is_meta and m.shape == (3, 5) and m.dtype is jag.float32
    r = op(jag.arange(3, dtype=jag.float32), jag.ones(2))
    assert r.tolist() == [[0, 0], [1, 1], [2, 2]]


def test_walkthrough_custom_op_with_nested_decomposition_and_autograd(lib):
    fw, bw = fresh("custom_op_fw"), fresh("custom_op_bw")
    lib.define(fw + "(Tensor x) -> Tensor")
    lib.define(bw + "(Tensor grad_out, Tensor saved_x) -> Tensor")

    def unreached(*args):
        raise AssertionError("internal assert: we don't expect to reach here")

    lib.impl(fw, unreached, "CPU")
    lib.impl(bw, unreached, "CPU")
    fw_op, bw_op = getattr(jag.ops.pytest_ns, fw), getattr(jag.ops.pytest_ns, bw)

    @jag.library.register_nested_decomp(fw_op.default)
    def fw_impl(x):
        assert x.is_nested
        return jag.nested.nested_tensor_from_jagged(jag.tensor(np.sin(x.values().numpy())), x.offsets())

    @lib.register_nested_decomp(bw)
    def bw_impl(grad_out, saved_x):
        return jag.nested.nested_tensor_from_jagged(
            grad_out.values() * jag.tensor(np.cos(saved_x.values().numpy())), saved_x.offsets())

    class CustomOp(jag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return fw_op(x)

        @staticmethod
        def backward(ctx, gx):
            x, = ctx.saved_tensors
            return bw_op(gx, x)

    lib.impl(fw, CustomOp.apply, "Autograd")

    values = walkthrough_values()
    nt = jag.nested.nested_tensor_from_jagged(values, [0, 2, 6, 9])
    out = fw_op(nt)  # no grad needed: straight to the decomposition
    np.testing.assert_allclose(out.values().numpy(), np.sin(values.numpy()), rtol=1e-6)
    assert out.offsets().tolist() == [0, 2, 6, 9]
    nt.requires_grad_()
    out = fw_op(nt)
    assert out.is_nested and out.requires_grad
    out.values().sum().backward()
    np.testing.assert_allclose(nt.grad.values().numpy(), np.cos(values.numpy()), rtol=1e-6)
    assert nt.grad.offsets().tolist() == [0, 2, 6, 9]
    with pytest.raises(AssertionError, match="don't expect"):
        fw_op(values)  # a dense tensor reaches the CPU kernel


def test_kernel_exception_is_the_original(lib):
    name = fresh("raises")
    lib.define(name + "(Tensor x) -> Tensor")
    raised = []

    class Boom(Exception):
        pass

    def kernel(x):
        e = Boom("kernel failed on purpose")
        raised.append(e)
        raise e

    lib.impl(name, kernel, "CPU")
    op = getattr(jag.ops.pytest_ns, name)
    for _ in range(3):
        with pytest.raises(Boom) as info:
            op(jag.ones(2))
        assert info.value is raised[-1]
        assert "kernel" in [f.name for f in info.traceback]  # the kernel's frame is in the traceback
    assert jag.sin(jag.zeros(1)).tolist() == [0.0]  # nothing stale afterwards


def test_exception_through_nested_calls(lib):
    inner, outer = fresh("inner"), fresh("outer")
    lib.define(inner + "(Tensor x) -> Tensor")
    lib.define(outer + "(Tensor x) -> Tensor")

    def inner_kernel(x):
        raise KeyError("from the inner kernel")

    lib.impl(inner, inner_kernel, "CPU")
    lib.impl(outer, lambda x: getattr(jag.ops.pytest_ns, inner)(x) + 1, "CPU")
    with pytest.raises(KeyError, match="inner kernel"):
        getattr(jag.ops.pytest_ns, outer)(jag.ones(2))

    caught = []

    def catching(x):
        try:
            getattr(jag.ops.pytest_ns, inner)(x)
        except KeyError as e:
            caught.append(e)
        return x * 2

    name = fresh("catching")
    lib.define(name + "(Tensor x) -> Tensor")
    lib.impl(name, catching, "CPU")
    assert getattr(jag.ops.pytest_ns, name)(jag.ones(2)).tolist() == [2.0, 2.0]
    assert len(caught) == 1


def test_bad_kernel_results(lib):
    name = fresh("bad_result")
    lib.define(name + "(Tensor x, int k) -> (Tensor, Tensor)")
    results = {0: None, 1: "a string", 2: (jag.ones(1),), 3: (jag.ones(1), 5)}
    lib.impl(name, lambda x, k: results[k], "CPU")
    op = getattr(jag.ops.pytest_ns, name)
    for k, msg in [(0, "NoneType"), (1, "str"), (2, "1 values"), (3, "output 1 is int")]:
        with pytest.raises(TypeError, match=msg):
            op(jag.ones(1), k)


def test_definition_errors(lib):
    name = fresh("dup")
    lib.define(name + "(Tensor x) -> Tensor")
    with pytest.raises(ValueError, match="already defined"):
        lib.define(name + "(Tensor x) -> Tensor")
    with pytest.raises(ValueError, match="argument type"):
        lib.define(fresh("bad") + "(Tensr x) -> Tensor")
    with pytest.raises(ValueError, match="return type"):
        lib.define(fresh("bad") + "(Tensor x)")
    lib.impl(name, lambda x: x, "CPU")
    with pytest.raises(ValueError, match="already has a CPU kernel"):
        lib.impl(name, lambda x: x, "CPU")
    with pytest.raises(ValueError, match="dispatch_key"):
        lib.impl(name, lambda x: x, "CUDA")
    with pytest.raises(TypeError, match="callable"):
        lib.impl(name, 3, "Meta")
    with pytest.raises(ValueError, match="built-in"):
        lib.impl(jag.ops.aten.sin, lambda x: x, "CPU")
    with pytest.raises(ValueError, match="no op"):
        lib.impl(fresh("undefined"), lambda x: x, "CPU")
    with pytest.raises(ValueError, match="identifier"):
        jag.library.Library("not valid")
    with pytest.raises(AttributeError, match="has no op"):
        jag.ops.pytest_ns.never_defined
    op = getattr(jag.ops.pytest_ns, name)
    with pytest.raises(ValueError, match="declares Tensor"):
        op(3)
    nk = fresh("no_kernel")
    lib.define(nk + "(Tensor x) -> Tensor")
    with pytest.raises(NotImplementedError, match="no CPU kernel"):
        getattr(jag.ops.pytest_ns, nk)(jag.ones(1))


def test_decomposition_is_replaced_and_only_for_nested(lib):
    name = fresh("twice")
    lib.define(name + "(Tensor x) -> Tensor")
    lib.impl(name, lambda x: x * 10, "CPU")
    op = getattr(jag.ops.pytest_ns, name)
    nt = jag.nested.nested_tensor([jag.ones(2, 2), jag.ones(1, 2)], layout=jag.jagged)

    @jag.library.register_nested_decomp(op)
    def first(x):
        return jag.nested.nested_tensor_from_jagged(x.values() * 2, x.offsets())

    assert op(nt).values().tolist() == [[2.0, 2.0]] * 3
    jag.library.register_nested_decomp("pytest_ns::" + name)(
        lambda x: jag.nested.nested_tensor_from_jagged(x.values() * 3, x.offsets()))
    assert op(nt).values().tolist() == [[3.0, 3.0]] * 3
    assert op(jag.ones(2)).tolist() == [10.0, 10.0]  # dense: the CPU kernel


def test_builtin_ops_through_jag_ops():
    x = jag.tensor([0.0, 1.0])
    np.testing.assert_allclose(jag.ops.aten.sin(x).numpy(), np.sin([0.0, 1.0]), rtol=1e-6)
    assert jag.ops.jag.add(x, x, 1.0).tolist() == [0.0, 2.0]


def test_kernels_from_several_threads(lib):
    name = fresh("threads")
    lib.define(name + "(Tensor x) -> Tensor")
    lib.impl(name, lambda x: jag.tensor(np.cumsum(x.numpy())), "CPU")
    op = getattr(jag.ops.pytest_ns, name)
    errors = []

    def work(k):
        try:
            for _ in range(300):
                r = op(jag.full((4,), float(k), dtype=jag.float64))
                assert r.tolist() == [k, 2 * k, 3 * k, 4 * k]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_recursion_in_kernels_is_a_recursion_error(lib):
    name = fresh("recurse")
    lib.define(name + "(Tensor x) -> Tensor")
    op = getattr(jag.ops.pytest_ns, name)
    lib.impl(name, lambda x: op(x), "CPU")

    @jag.library.register_nested_decomp(op)
    def again(x):
        return op(x)

    for x in (jag.ones(2), jag.nested.nested_tensor([jag.ones(2, 2)], layout=jag.jagged)):
        with pytest.raises(RecursionError):
            op(x)
    assert op is getattr(jag.ops.pytest_ns, name)  # still usable afterwards


def test_kernels_below_autograd_get_plain_tensors(lib):
    """A CPU kernel runs below autograd: its inputs do not require grad, so
    numpy kernels work on them even when the caller's tensors do."""
    name = fresh("cube")
    lib.define(name + "(Tensor x) -> Tensor")
    seen = []

    def kernel(x):
        seen.append(x.requires_grad)
        return jag.tensor(x.numpy() ** 3)

    lib.impl(name, kernel, "CPU")
    op = getattr(jag.ops.pytest_ns, name)
    x = jag.tensor([1.0, 2.0], dtype=jag.float64, requires_grad=True)
    y = op(x)
    assert y.detach().tolist() == [1.0, 8.0] and seen == [False]
    assert x.requires_grad  # the caller's tensor is untouched
    assert y.requires_grad  # recorded, but with no Autograd kernel jag has no derivative for it
    with pytest.raises(NotImplementedError, match="no derivative"):
        y.sum().backward()


def test_kernels_take_the_gil_when_called_from_c(lib):
    """A C caller (here: a probe that releases the GIL, on this thread or on
    a new C thread Python never saw) reaches Python kernels and
    decompositions safely: the trampolines take the GIL themselves."""
    name, bad = fresh("from_c"), fresh("from_c_raises")
    lib.define(name + "(Tensor x) -> Tensor")
    lib.define(bad + "(Tensor x) -> Tensor")
    lib.impl(name, lambda x: jag.tensor(np.sqrt(x.numpy())), "CPU")

    def raises(x):
        raise LookupError("raised in a kernel called from a C thread")

    lib.impl(bad, raises, "CPU")

    @jag.library.register_nested_decomp("pytest_ns::" + name)
    def nested(x):
        return jag.nested.nested_tensor_from_jagged(x.values() * 10, x.offsets())

    x = jag.tensor([4.0, 9.0])
    nt = jag.nested.nested_tensor([jag.ones(1, 2), jag.ones(2, 2)], layout=jag.jagged)
    for new_thread in (False, True):
        for _ in range(20):
            assert jag._C._test_call_from_c("pytest_ns::" + name, x, new_thread).tolist() == [2.0, 3.0]
            assert jag._C._test_call_from_c("pytest_ns::" + name, nt, new_thread).values().tolist() == [[10.0, 10.0]] * 3
        with pytest.raises(LookupError, match="C thread"):
            jag._C._test_call_from_c("pytest_ns::" + bad, x, new_thread)
