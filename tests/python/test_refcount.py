"""Exact lifetime checks: a tensor over caller memory (jag_from_blob, via the
extension's _test_blob probe) must be freed exactly when the last Python
object that uses it (tensor, view, numpy array, op result, autograd graph)
goes away."""
import gc
import sys

import numpy as np

import jag
from jag import _C


def released_after(fn):
    made0, rel0 = _C._test_blob_counts()
    fn()
    gc.collect()
    made, rel = _C._test_blob_counts()
    return made - made0, rel - rel0


def test_plain_tensor_is_released():
    assert released_after(lambda: _C._test_blob(10)) == (1, 1)


def test_views_and_numpy_keep_storage_alive():
    t = _C._test_blob(12)
    v = t.reshape(3, 4)[1:, 2]
    a = t.numpy()
    b = np.asarray(v)
    made, rel = _C._test_blob_counts()
    del t, v
    gc.collect()
    assert _C._test_blob_counts()[1] == rel  # a and b still use the memory
    assert a[11] == 11.0 and b.tolist() == [6.0, 10.0]
    del a
    gc.collect()
    assert _C._test_blob_counts()[1] == rel
    del b
    gc.collect()
    assert _C._test_blob_counts()[1] == rel + 1


def test_ops_errors_and_autograd_release_everything():
    def work():
        for _ in range(200):
            t = _C._test_blob(16)
            x = t.reshape(4, 4)
            _ = jag.sin(x) + x * 2
            _ = x.sum(0).tolist()
            _ = x[1:3, 0]
            _ = repr(x)
            try:
                jag.mm(x, jag.ones(3, 3, dtype=jag.float64))
            except ValueError:
                pass
            w = x.detach().clone().requires_grad_()
            (w * x).sum().backward()
            nt = jag.nested.nested_tensor_from_jagged(t.reshape(8, 2), [0, 3, 8])
            _ = jag.nested.to_padded_tensor(jag.softmax(nt, -1), 0.0)
            _ = nt.unbind()
            _ = jag._op("max_dim", x, 1, False)

    assert released_after(work) == (200, 200)


def test_nested_keeps_values_alive():
    t = _C._test_blob(6)
    nt = jag.nested.nested_tensor_from_jagged(t.reshape(3, 2), [0, 1, 3])
    rel = _C._test_blob_counts()[1]
    del t
    gc.collect()
    assert _C._test_blob_counts()[1] == rel
    assert nt.unbind()[1].tolist() == [[2.0, 3.0], [4.0, 5.0]]
    del nt
    gc.collect()
    assert _C._test_blob_counts()[1] == rel + 1


def test_gradcheck_callback_releases_inputs():
    def work():
        t = _C._test_blob(4).reshape(2, 2)
        t.requires_grad_()
        jag.autograd.gradcheck(lambda x: jag.tanh(x) * x, [t])

    assert released_after(work) == (1, 1)


# ---- DLPack, buffers, Python kernels and Functions ------------------------

_lib = jag.library.Library("refcount_ns")
_lib.define("scale2(Tensor x) -> Tensor")
_lib.define("fails(Tensor x) -> Tensor")


def _scale2(x):
    return jag.tensor(x.numpy() * 2)  # a numpy kernel


def _fails(x):
    raise ValueError("refcount probe kernel fails")


_lib.impl("scale2", _scale2, "CPU")
_lib.impl("fails", _fails, "CPU")


@jag.library.register_nested_decomp("refcount_ns::scale2")
def _scale2_nested(x):
    return jag.nested.nested_tensor_from_jagged(x.values() * 2, x.offsets())


class _Square(jag.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        y = x * x
        ctx.y = y  # an attribute holding a tensor, too
        return y

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2 * x


def _one_round(i):
    t = _C._test_blob(8)
    # DLPack: consumed by numpy, by jag, legacy, and never consumed
    a = np.from_dlpack(t)
    b = jag.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    c = jag.from_dlpack(t.__dlpack__())
    _ = t.__dlpack__(max_version=(1, 0))
    d = jag.from_dlpack(a[::2])  # numpy -> jag over jag's memory
    assert d[1].item() == a[2]
    # the buffer protocol
    m = memoryview(t)
    e = np.asarray(memoryview(t.reshape(2, 4)))
    assert m[7] == 7.0 and e[1, 3] == 7.0
    m.release()
    # Python kernels and decompositions
    assert jag.ops.refcount_ns.scale2(t)[3].item() == 6.0
    nt = jag.nested.nested_tensor_from_jagged(t.reshape(4, 2), [0, 1, 4])
    assert jag.ops.refcount_ns.scale2(nt).values()[1, 1].item() == 6.0
    try:
        jag.ops.refcount_ns.fails(t)
    except ValueError:
        pass
    # a Function with backward, and one whose graph dies unused
    w = t.detach().clone().requires_grad_()
    _Square.apply(w).sum().backward()
    assert w.grad[2].item() == 4.0
    _ = _Square.apply(w)
    del a, b, c, d, e, m, nt, w


def test_interop_kernels_and_functions_release_everything():
    def work():
        for i in range(200):
            _one_round(i)

    assert released_after(work) == (200, 200)


def test_no_leaked_objects_over_10000_calls():
    fn_refs = sys.getrefcount(_scale2), sys.getrefcount(_Square)
    for i in range(50):  # warm caches (op handles, interned names)
        _one_round(i)
    gc.collect()
    objects0 = len(gc.get_objects())
    made0, rel0 = _C._test_blob_counts()
    for i in range(10000):
        _one_round(i)
    gc.collect()
    made, rel = _C._test_blob_counts()
    assert made - made0 == 10000 and rel - rel0 == 10000  # every tensor's memory was freed
    assert len(gc.get_objects()) - objects0 < 50  # no Python objects pile up
    assert (sys.getrefcount(_scale2), sys.getrefcount(_Square)) == fn_refs


# --- the C fast paths of the hot calls (_C.c: _op and _unary as FASTCALL,
# the operators + - * / @ as TensorBase's nb_* slots, jag.Tensor objects
# reused by wrap/Tensor_heap_dealloc): no reference gained or lost per
# call, on success and on error, and the errors of the Python code they
# replace (types and messages).

def _fast_path_operands():
    x = _C._test_blob(4).reshape(2, 2)  # counted memory: freed exactly once
    w = jag.tensor([[1.0, 0.5], [0.25, 2.0]], dtype=jag.float64)
    nt = jag.nested.nested_tensor_from_jagged(jag.ones(3, 2, dtype=jag.float64), [0, 1, 3])
    return x, w, nt


FAST_CALLS = {
    "jag.relu": lambda x, w, nt, s: jag.relu(x),
    "Tensor.relu": lambda x, w, nt, s: x.relu(),
    "_op": lambda x, w, nt, s: jag._op("relu", x),
    "_op tuple out": lambda x, w, nt, s: jag._op("max_dim", x, 1, False),
    "_op int list": lambda x, w, nt, s: jag._op("sum", x, [0], False),
    "tensor + tensor": lambda x, w, nt, s: x + w,
    "tensor + float": lambda x, w, nt, s: x + s,
    "float + tensor": lambda x, w, nt, s: s + x,
    "tensor - int": lambda x, w, nt, s: x - 3,
    "float - tensor (fallback)": lambda x, w, nt, s: s - x,
    "tensor * float": lambda x, w, nt, s: x * s,
    "float * tensor (fallback)": lambda x, w, nt, s: s * x,
    "tensor / tensor": lambda x, w, nt, s: x / w,
    "tensor + bool (fallback)": lambda x, w, nt, s: x + True,
    "tensor + ndarray (fallback)": lambda x, w, nt, s: x + np.ones(2),
    "tensor @ tensor": lambda x, w, nt, s: x @ w,
    "ndarray @ tensor (fallback)": lambda x, w, nt, s: np.ones((1, 2)) @ x,
    "nested + nested": lambda x, w, nt, s: nt + nt,
    "nested @ dense": lambda x, w, nt, s: nt @ w,
    "jag.mm nested": lambda x, w, nt, s: jag.mm(nt, w),
}


def test_fast_paths_keep_reference_counts():
    s = 1.2345678  # a float object of its own, its count watched
    for name, call in FAST_CALLS.items():
        x, w, nt = _fast_path_operands()
        watched = (x, w, nt, s, jag.Tensor, jag._binary_fallback, jag.relu)
        for _ in range(20):  # warm the caches (op ids, free list, interned names)
            call(x, w, nt, s)
        gc.collect()
        refs = [sys.getrefcount(o) for o in watched]
        objects0 = len(gc.get_objects())
        for _ in range(2000):
            r = call(x, w, nt, s)
            del r
        gc.collect()
        refs_after = [sys.getrefcount(o) for o in watched]
        assert refs_after == refs, name
        assert len(gc.get_objects()) - objects0 < 20, name
        made0, rel0 = _C._test_blob_counts()
        del x, watched
        gc.collect()
        assert _C._test_blob_counts() == (made0, rel0 + 1), name  # the last user of x went


FAST_ERRORS = [
    (lambda x, w: jag.relu([1.0]), TypeError, "jag.relu: expected a jag.Tensor, got list"),
    (lambda x, w: jag.sin(np.ones(2)), TypeError, "jag.sin: expected a jag.Tensor, got ndarray"),
    (lambda x, w: jag.relu(None), TypeError, "jag.relu: expected a jag.Tensor, got NoneType"),
    (lambda x, w: x + "s", TypeError, "add: unsupported operand types Tensor and str"),
    (lambda x, w: "s" + x, TypeError, "add: unsupported operand types str and Tensor"),
    (lambda x, w: "s" * x, TypeError, "mul: unsupported operand types str and Tensor"),
    (lambda x, w: None - x, TypeError, "sub: unsupported operand types NoneType and Tensor"),
    (lambda x, w: x / object(), TypeError, "div: unsupported operand types Tensor and object"),
    (lambda x, w: x + 10 ** 400, OverflowError, "int too large to convert to float"),
    (lambda x, w: 10 ** 400 + x, OverflowError, "int too large to convert to float"),
    (lambda x, w: x * 10 ** 400, OverflowError, "int too large to convert to float"),
    (lambda x, w: x + jag.ones(3), ValueError, "jag_add: shapes [2, 2] and [3] do not broadcast (dim -1: 2 vs 3)"),
    (lambda x, w: x @ jag.ones(3, 3), ValueError, "jag_matmul: inner sizes differ: [2, 2] @ [3, 3] (2 vs 3)"),
    (lambda x, w: x @ "s", TypeError,
     "matmul: argument 1 has type str; expected a jag.Tensor, int, float, bool, None or a list"),
    (lambda x, w: x @ [1.0, 2.0], TypeError, "matmul: argument 1 must be a list of ints or a list of tensors"),
    (lambda x, w: jag._op("no_such_op", x), ValueError, "jag_op_find: no op is named 'no_such_op'"),
    (lambda x, w: jag._op(3, x), TypeError, "_op(name: str, *args)"),
    (lambda x, w: jag._op(), TypeError, "_op(name: str, *args)"),
    (lambda x, w: jag._op("relu", x=x), TypeError, "_op() takes no keyword arguments"),
    (lambda x, w: jag._op("relu", "s"), TypeError,
     "relu: argument 0 has type str; expected a jag.Tensor, int, float, bool, None or a list"),
    (lambda x, w: jag._op("relu", *([x] * 40)), ValueError, "too many arguments"),
    (lambda x, w: jag.mm(x, jag.ones(3, 3)), ValueError,
     "jag_mm: inner sizes differ: 'a' has shape [2, 2] and 'b' has shape [3, 3] (2 vs 3)"),
]


def test_fast_path_errors_keep_types_messages_and_counts():
    x, w = jag.tensor([[1.0, 2.0], [3.0, 4.0]]), jag.ones(2, 2)
    for call, exc, msg in FAST_ERRORS:
        for _ in range(5):
            try:
                call(x, w)
            except exc as e:
                assert str(e) == msg, (msg, str(e))
            else:
                raise AssertionError("no %s: %s" % (exc.__name__, msg))
        gc.collect()
        refs = sys.getrefcount(x), sys.getrefcount(w), sys.getrefcount(jag.Tensor)
        for _ in range(500):
            try:
                call(x, w)
            except exc:
                pass
        gc.collect()
        refs_after = sys.getrefcount(x), sys.getrefcount(w), sys.getrefcount(jag.Tensor)
        assert refs_after == refs, msg


def test_reused_result_objects_are_fresh():
    import weakref

    x = jag.tensor([1.0, -2.0])
    gone = []
    for i in range(200):  # results go back to the free list and come out again
        y = x * float(i)
        ref = weakref.ref(y, lambda _r: gone.append(1))
        assert ref() is y and type(y) is jag.Tensor and not y.requires_grad
        assert y.tolist() == [float(i), -2.0 * i]
        del y
        assert ref() is None  # the weakref of the dead object is cleared, its callback called
    assert len(gone) == 200
    # subclasses (nn.Parameter) are freed by their own subtype_dealloc into this base's
    param = jag.nn.Parameter
    param(jag.ones(2))  # the first one may fill caches
    p_refs = sys.getrefcount(param)
    for _ in range(200):
        p = param(jag.ones(2))
        ref = weakref.ref(p)
        del p
        assert ref() is None
    p_refs_after = sys.getrefcount(param)  # not inside assert: pytest's rewriting holds its operands
    assert p_refs_after == p_refs
