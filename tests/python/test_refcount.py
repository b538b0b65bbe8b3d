"""Exact lifetime checks: a tensor over caller memory (jag_from_blob, via the
extension's _test_blob probe) must be freed exactly when the last Python
object that uses it (tensor, view, numpy array, op result, autograd graph)
goes away."""
import gc

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
