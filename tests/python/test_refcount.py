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
