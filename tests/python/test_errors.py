"""jag_status -> Python exceptions, bad arguments never crash, no leaks."""
import gc
import os
import sys

import numpy as np
import pytest

import jag
import jag.nn.functional as F


def nested():
    return jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(4, 3)], layout=jag.jagged)


def test_einval_is_value_error_with_message():
    with pytest.raises(ValueError, match="jag_arange.*step"):
        jag.arange(0, 1, 0)


def test_eshape_is_value_error():
    with pytest.raises(ValueError, match="jag_mm"):
        jag.mm(jag.ones(2, 3), jag.ones(2, 3))
    with pytest.raises(ValueError):
        jag.ones(2, 3) + jag.ones(4)
    with pytest.raises(ValueError):
        jag.ones(6).view(4, 2)


def test_edtype_is_type_error():
    with pytest.raises(TypeError, match="jag_mm"):
        jag.mm(jag.ones(2, 2, dtype=jag.int64), jag.ones(2, 2, dtype=jag.int64))
    with pytest.raises(TypeError, match="dtype"):
        jag.rand(2, dtype=jag.int32)
    with pytest.raises(TypeError):
        -jag.ones(2, dtype=jag.bool)


def test_erange():
    with pytest.raises(ValueError, match="index_select"):
        jag.index_select(jag.ones(3), 0, jag.tensor([5]))
    with pytest.raises(IndexError):
        jag.ones(3).select(0, 3)
    with pytest.raises(ValueError):
        jag.ones(3).transpose(0, 4)


def test_eoverflow_is_value_error():
    with pytest.raises(ValueError, match="overflow"):
        jag.zeros(2 ** 40, 2 ** 40)


def test_enomem_is_memory_error():
    # 2**50 bytes: more than any 48-bit address space can map
    with pytest.raises(MemoryError):
        jag.zeros(2 ** 20, 2 ** 20, 2 ** 8)


def test_enotimpl_is_not_implemented_error():
    with pytest.raises(NotImplementedError, match="nested"):
        jag.cat([nested(), nested()], 1)
    with pytest.raises(NotImplementedError):
        jag.argmax(nested(), 0)


def test_estate_is_runtime_error():
    x = jag.ones(2, requires_grad=True)
    y = (x * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="jag_backward"):
        y.backward()


def test_gradcheck_mismatch():
    x = jag.ones(2, dtype=jag.float64, requires_grad=True)
    with pytest.raises(jag.autograd.GradcheckError, match="analytic"):
        jag.autograd.gradcheck(lambda t: t.detach() * 1 + t, [x])
    assert jag.autograd.gradcheck(lambda t: t.detach() * 1 + t, [x], raise_exception=False) is False


@pytest.mark.parametrize("call", [
    lambda: jag.sin(3.0),
    lambda: jag.sin(None),
    lambda: jag.add("a", jag.ones(2)),
    lambda: jag.ones(2) + "a",
    lambda: jag.mm(jag.ones(2, 2), [[1, 2]]),
    lambda: jag.zeros("a"),
    lambda: jag.zeros(2.5),
    lambda: jag.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1),
    lambda: jag.zeros(-1),
    lambda: jag.tensor(object()),
    lambda: jag.tensor([1 + 2j]),
    lambda: jag.tensor(np.zeros((1,) * 9)),
    lambda: jag.ones(2, dtype="nope"),
    lambda: jag.ones(2).reshape("a"),
    lambda: jag.ones(2).backward("x"),
    lambda: jag.ones(2).copy_(3),
    lambda: jag.ones(2).fill_("x"),
    lambda: jag.sum(jag.ones(2), dim="x"),
    lambda: jag.sum(jag.ones(2, 2), dim=[0, 0]),
    lambda: jag._op("sum", jag.ones(2), [jag.ones(1), 1], False),
    lambda: jag._op("where", jag.ones(2), jag.ones(2), jag.ones(2)),
    lambda: jag._op("layer_norm", jag.ones(2), 1, 1, None, 1e-5),
    lambda: jag._C._factory("bogus", (2,), jag.float32.code),
    lambda: jag._C._factory("zeros", (2,), 99),
    lambda: jag._C._from_buffer(b"abc", (2,), jag.float32.code),
    lambda: jag._C._nested_from_list([jag.ones(2)], 7),
    lambda: jag._C._nested_from_list([1, 2], jag.jagged.code),
    lambda: jag._C._set_tensor_class(int),
    lambda: jag.ones(2).to_layout(jag.jagged),
    lambda: jag.ones(2)._to_layout(9),
    lambda: jag.nested.nested_tensor_from_jagged(jag.ones(3), [0, 1.5, 3]),
    lambda: jag.nested.nested_tensor_from_padded(jag.ones(2, 3), [1, 5]),
    lambda: jag.nested.to_padded_tensor(nested(), 0.0, output_size=(2, 1, 3)),
    lambda: F.linear(jag.ones(2, 3), jag.ones(3, 4)),
    lambda: jag.tensor(1.0).item() + jag.ones(3).item(),
    lambda: len(jag.tensor(1.0)),
    lambda: iter(jag.tensor(1.0)),
    lambda: bool(jag.ones(2)),
    lambda: jag.autograd.gradcheck(lambda x: x, []),
])
def test_bad_arguments_raise_not_crash(call):
    with pytest.raises((TypeError, ValueError, IndexError, NotImplementedError, RuntimeError)):
        call()


def test_error_does_not_leave_state():
    with pytest.raises(ValueError):
        jag.mm(jag.ones(2, 3), jag.ones(2, 3))
    assert (jag.ones(2, 3) @ jag.ones(3, 2)).shape == (2, 2)


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""), reason="ASan's quarantine grows RSS")
def test_no_leak_over_10000_calls():
    """libjag exports no live-tensor counter (jag__live_tensors is hidden by
    jag.map), so this checks that resident memory stays flat instead."""
    x = jag.ones(64, 64)
    nt = nested()
    w = jag.ones(3, 3, requires_grad=True)

    def work():
        y = jag.sin(x) + x * 2 - 1
        y.sum(1, keepdim=True)
        y[1:3, 0].numpy()
        repr(y[0, 0])
        (nt @ w).values().sum().backward()
        jag.nested.to_padded_tensor(nt, 0.0)
        nt.unbind()
        try:
            jag.mm(x, jag.ones(3, 3))
        except ValueError:
            pass
        np.asarray(jag.tensor(np.ones((8, 8))))

    for _ in range(500):  # warm up allocator caches
        work()
    gc.collect()
    before = _rss_kib()
    for _ in range(10000):
        work()
    gc.collect()
    grown = _rss_kib() - before
    assert grown < 4096, "RSS grew by %d KiB over 10000 iterations" % grown


def test_refcounts_flat_under_errors():
    x = jag.ones(2, 3)
    base = sys.getrefcount(x)
    for _ in range(1000):
        try:
            jag.mm(x, x)
        except ValueError:
            pass
        try:
            jag._op("sum", x, [x, 1], False)
        except TypeError:
            pass
    assert sys.getrefcount(x) == base


def test_copy_and_pickle_do_not_crash():
    import copy
    import pickle

    t = jag.ones(2)
    with pytest.raises(TypeError):
        copy.copy(t)
    with pytest.raises((TypeError, pickle.PicklingError)):
        pickle.dumps(t)
    with pytest.raises(TypeError):
        object.__new__(jag.Tensor)


def test_strided_nested_values_is_the_buffer_and_offsets_an_error():
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.zeros(1, 4)])
    assert nt.values().tolist() == [1.0] * 6 + [0.0] * 4  # the packed buffer, as torch's strided values()
    with pytest.raises(ValueError):
        nt.offsets()
    with pytest.raises(ValueError, match="not a nested"):
        jag.ones(2).values()


def test_setitem_errors():
    t = jag.zeros(2, 3)
    with pytest.raises(ValueError):
        t[0] = jag.ones(4)
    with pytest.raises(TypeError):
        t[0] = object()
