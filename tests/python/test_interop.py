"""Zero-copy interop: DLPack both ways (numpy, jag itself, torch when it is
installed) with the capsule lifetime rules, and the buffer protocol."""
import ctypes
import gc
import sys
import zlib

import numpy as np
import pytest

import jag
from jag import _C

DTYPES = [(jag.float32, np.float32), (jag.float64, np.float64), (jag.int32, np.int32), (jag.int64, np.int64),
          (jag.bool, np.bool_)]


def sample(jdt, shape=(3, 4)):
    n = int(np.prod(shape))
    if jdt is jag.bool:
        return jag.tensor((np.arange(n) % 3 == 0).reshape(shape))
    return jag.arange(n, dtype=jdt).reshape(*shape) - 5


def capsule_name(cap):
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype = ctypes.c_char_p
    get.argtypes = [ctypes.py_object]
    return get(cap).decode()


def counts():
    gc.collect()
    return _C._test_blob_counts()


# ---------------------------------------------------------------------------
# DLPack: jag -> numpy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("jdt,ndt", DTYPES, ids=[d[0].name for d in DTYPES])
def test_numpy_from_dlpack_shares_memory_every_dtype(jdt, ndt):
    t = sample(jdt)
    a = np.from_dlpack(t)
    assert a.dtype == ndt and a.shape == (3, 4)
    np.testing.assert_array_equal(a, t.numpy())
    a[1, 2] = 1  # a write through numpy is seen by jag: the same memory
    assert t[1, 2].item() == 1
    assert a.ctypes.data == t.numpy().ctypes.data


def test_numpy_from_dlpack_keeps_strides_and_offsets():
    t = jag.arange(24, dtype=jag.float64).reshape(2, 3, 4)
    for v in (t.transpose(0, 2), t[1:, 1:, 2:], t.permute(2, 0, 1)[1:3], t[:, 1], jag.ones(3, dtype=jag.float64).expand(4, 3)):
        a = np.from_dlpack(v)
        assert a.strides == tuple(s * 8 for s in v.stride())
        np.testing.assert_array_equal(a, v.numpy())
        assert a.ctypes.data == np.asarray(v).ctypes.data


def test_zero_dim_and_empty_tensors():
    a = np.from_dlpack(jag.tensor(2.5))
    assert a.shape == () and a[()] == 2.5
    e = np.from_dlpack(jag.zeros(0, 3))
    assert e.shape == (0, 3)
    back = jag.from_dlpack(np.zeros((0, 2), dtype=np.int32))
    assert back.shape == (0, 2) and back.dtype is jag.int32
    s = jag.from_dlpack(np.array(4.25))
    assert s.shape == () and s.item() == 4.25


def test_versioned_and_legacy_capsules():
    t = jag.ones(3)
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    cap = t.__dlpack__(max_version=(1, 0))
    assert capsule_name(cap) == "dltensor_versioned"
    u = jag.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor_versioned"  # the consumer renames it
    with pytest.raises(ValueError, match="already consumed"):
        jag.from_dlpack(cap)
    legacy = t.__dlpack__()
    v = jag.from_dlpack(legacy)
    assert capsule_name(legacy) == "used_dltensor"
    u[0] = 7.0
    v[1] = 8.0
    assert t.tolist() == [7.0, 8.0, 1.0]
    assert t.__dlpack_device__() == (1, 0)


def test_dlpack_keywords():
    t = jag.arange(4, dtype=jag.float32)
    c = np.from_dlpack(t, copy=True)  # numpy asks with copy=True
    c[0] = 100
    assert t[0].item() == 0.0
    cap = t.__dlpack__(max_version=(1, 0), copy=True, dl_device=(1, 0), stream=None)
    w = jag.from_dlpack(cap)
    w[1] = -1
    assert t[1].item() == 1.0 and w.tolist() == [0.0, -1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="CPU"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(RuntimeError, match="requires grad"):
        jag.ones(2, requires_grad=True).__dlpack__()
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
    with pytest.raises(BufferError, match="nested"):
        nt.__dlpack__()
    with pytest.raises(BufferError, match="nested"):
        np.from_dlpack(nt)
    # the parts of a nested tensor export fine
    np.testing.assert_array_equal(np.from_dlpack(nt.offsets()), [0, 2, 3])


# ---------------------------------------------------------------------------
# DLPack: numpy -> jag
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("jdt,ndt", DTYPES, ids=[d[0].name for d in DTYPES])
def test_jag_from_numpy_shares_memory_every_dtype(jdt, ndt):
    a = (np.arange(12) % 5 - 2).astype(ndt).reshape(3, 4)
    t = jag.from_dlpack(a)
    assert t.dtype is jdt and t.shape == (3, 4)
    np.testing.assert_array_equal(t.numpy(), a)
    a[2, 3] = 1
    assert t[2, 3].item() == 1
    t[0, 0] = 0
    assert a[0, 0] == 0


def test_jag_from_numpy_keeps_strides():
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for a in (base[:, ::2], base.transpose(2, 0, 1), base[1:, 2:, 3:],
              np.lib.stride_tricks.as_strided(base, (3, 5), (0, 4))):
        t = jag.from_dlpack(a)
        assert t.stride() == tuple(s // 4 for s in a.strides)
        np.testing.assert_array_equal(t.numpy(), a)
        assert np.asarray(t).ctypes.data == a.ctypes.data  # no copy


def test_copies_when_zero_copy_is_impossible():
    base = np.arange(6, dtype=np.float64)
    rev = base[::-1]  # negative stride
    t = jag.from_dlpack(rev)
    assert t.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    t[0] = -1
    assert base[5] == 5.0  # a copy
    ro = np.arange(4, dtype=np.int64)
    ro.flags.writeable = False  # read-only: the versioned capsule says so
    r = jag.from_dlpack(ro)
    r[0] = 9
    assert ro[0] == 0 and r.tolist() == [9, 1, 2, 3]
    buf = bytearray(8 * 3 + 1)
    mis = np.frombuffer(buf, dtype=np.float64, offset=1)  # misaligned
    mis[:] = [1.5, 2.5, 3.5]
    m = jag.from_dlpack(mis)
    assert m.tolist() == [1.5, 2.5, 3.5]
    m[0] = 0
    assert mis[0] == 1.5
    c = jag.from_dlpack(base, copy=True)
    c[0] = 42
    assert base[0] == 0.0
    for a, why in ((ro, "read-only"), (rev, "negatively strided")):
        before = sys.getrefcount(a)
        with pytest.raises(BufferError, match=why):
            jag.from_dlpack(a, copy=False)
        gc.collect()
        assert sys.getrefcount(a) == before  # the capsule was not consumed: numpy freed it
    cap = mis.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError, match="misaligned"):
        jag.from_dlpack(cap, copy=False)
    assert capsule_name(cap) == "dltensor_versioned"  # still the producer's
    assert jag.from_dlpack(cap).tolist() == [1.5, 2.5, 3.5]


def test_unsupported_dtype_and_objects():
    for a in (np.ones(3, dtype=np.int8), np.ones(2, dtype=np.complex64), np.ones(2, dtype=np.uint8)):
        before = sys.getrefcount(a)
        with pytest.raises(TypeError, match="no dtype"):
            jag.from_dlpack(a)
        gc.collect()
        assert sys.getrefcount(a) == before  # the unconsumed capsule was freed by its producer
    with pytest.raises(TypeError, match="__dlpack__"):
        jag.from_dlpack([1, 2, 3])

    class OnGpu:
        def __dlpack__(self, **kw):
            raise AssertionError("must not be asked")

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(BufferError, match="CPU"):
        jag.from_dlpack(OnGpu())

    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    other = new(ctypes.addressof(ctypes.c_int(1)), b"something_else", None)
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        jag.from_dlpack(other)


def test_legacy_producer_without_keywords():
    a = np.arange(5, dtype=np.int64)

    class Old:
        def __dlpack__(self):  # the protocol before max_version
            return a.__dlpack__()

    t = jag.from_dlpack(Old())
    a[0] = 11
    assert t.tolist() == [11, 1, 2, 3, 4]


def test_numpy_array_lives_while_jag_uses_it():
    a = np.arange(8, dtype=np.float64)
    before = sys.getrefcount(a)
    t = jag.from_dlpack(a)
    assert sys.getrefcount(a) == before + 1  # the capsule's manager holds the array
    v = t.reshape(2, 4)[1]
    del t
    gc.collect()
    assert sys.getrefcount(a) == before + 1
    assert v.tolist() == [4.0, 5.0, 6.0, 7.0]
    del v
    gc.collect()
    assert sys.getrefcount(a) == before  # the deleter ran once


# ---------------------------------------------------------------------------
# DLPack lifetimes with counted storage
# ---------------------------------------------------------------------------


def test_unconsumed_capsule_frees_its_tensor():
    made, rel = counts()
    t = _C._test_blob(5)
    cap = t.__dlpack__(max_version=(1, 0))
    legacy = t.__dlpack__()
    del t
    assert counts() == (made + 1, rel)  # the capsules hold it
    del cap
    assert counts() == (made + 1, rel)
    del legacy
    assert counts() == (made + 1, rel + 1)


def test_consumed_capsule_deleter_runs_exactly_once():
    for versioned in (True, False):
        made, rel = counts()
        t = _C._test_blob(6)
        cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
        u = jag.from_dlpack(cap)
        a = np.from_dlpack(t)
        del t
        del cap  # consumed: its destructor must not call the deleter
        assert counts() == (made + 1, rel)
        assert u.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        del u
        assert counts() == (made + 1, rel)  # numpy still uses it
        assert a[5] == 5.0
        del a
        assert counts() == (made + 1, rel + 1)


# ---------------------------------------------------------------------------
# torch (when installed)
# ---------------------------------------------------------------------------

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (pip install torch to run these)")


@needs_torch
def test_torch_round_trips_share_memory():
    for jdt, tdt in ((jag.float32, torch.float32), (jag.float64, torch.float64), (jag.int32, torch.int32),
                     (jag.int64, torch.int64), (jag.bool, torch.bool)):
        t = sample(jdt)
        x = torch.from_dlpack(t)
        assert x.dtype == tdt and tuple(x.shape) == (3, 4)
        assert x.tolist() == t.tolist()
        x[0, 1] = 1
        assert t[0, 1].item() == 1
        back = jag.from_dlpack(x)
        back[2, 3] = 0
        assert x[2, 3].item() == 0
    y = torch.arange(24.0).reshape(2, 3, 4).transpose(0, 2)
    j = jag.from_dlpack(y)
    assert j.stride() == tuple(y.stride()) and j.tolist() == y.tolist()
    z = torch.from_dlpack(jag.arange(12, dtype=jag.float64).reshape(3, 4).T)
    assert tuple(z.stride()) == (1, 4) and z.tolist() == np.arange(12.0).reshape(3, 4).T.tolist()


# ---------------------------------------------------------------------------
# Buffer protocol
# ---------------------------------------------------------------------------

FORMATS = {jag.float32: "f", jag.float64: "d", jag.int32: "i", jag.int64: "q", jag.bool: "?"}


@pytest.mark.parametrize("jdt,ndt", DTYPES, ids=[d[0].name for d in DTYPES])
def test_memoryview_every_dtype(jdt, ndt):
    t = sample(jdt)
    m = memoryview(t)
    size = np.dtype(ndt).itemsize
    assert m.format == FORMATS[jdt] and m.itemsize == size
    assert m.shape == (3, 4) and m.strides == (4 * size, size) and m.ndim == 2
    assert not m.readonly and m.nbytes == 12 * size and m.c_contiguous
    assert m.tolist() == t.tolist()
    a = np.asarray(m)
    assert a.dtype == ndt
    a[0, 0] = 1
    assert t[0, 0].item() == 1


def test_memoryview_strides_and_contiguity():
    t = jag.arange(12, dtype=jag.float64).reshape(3, 4)
    tt = t.T
    m = memoryview(tt)
    assert m.shape == (4, 3) and m.strides == (8, 32) and not m.c_contiguous and m.f_contiguous
    np.testing.assert_array_equal(np.asarray(m), np.arange(12.0).reshape(3, 4).T)
    assert m.tobytes() == np.ascontiguousarray(np.arange(12.0).reshape(3, 4).T).tobytes()
    assert bytes(tt) == np.ascontiguousarray(np.arange(12.0).reshape(3, 4).T).tobytes()  # copied in C order
    with pytest.raises(BufferError, match="contiguous"):
        zlib.crc32(tt)  # a plain byte buffer (PyBUF_SIMPLE) needs C order
    assert zlib.crc32(t) == zlib.crc32(np.arange(12.0).tobytes())
    z = memoryview(jag.tensor(3.5, dtype=jag.float64))
    assert z.shape == () and z.tolist() == 3.5
    e = memoryview(jag.ones(3).expand(2, 3))
    assert e.strides == (0, 4) and e.tolist() == [[1.0] * 3] * 2
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
    with pytest.raises(BufferError, match="nested"):
        memoryview(nt)


def test_memoryview_keeps_storage_alive():
    made, rel = counts()
    t = _C._test_blob(4)
    m = memoryview(t)
    del t
    assert counts() == (made + 1, rel)
    assert m[3] == 3.0
    m.release()
    del m
    assert counts() == (made + 1, rel + 1)


def test_frombuffer_shares_writable_buffers():
    buf = bytearray(np.arange(6, dtype=np.float32).tobytes())
    t = jag.frombuffer(buf, dtype=jag.float32)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    t[0] = 7.0
    assert np.frombuffer(buf, np.float32)[0] == 7.0  # the same memory
    part = jag.frombuffer(buf, dtype=jag.float32, count=2, offset=8)
    assert part.tolist() == [2.0, 3.0]
    ro = jag.frombuffer(bytes(8), dtype=jag.int64)  # read-only: a copy
    ro[0] = 5
    assert ro.tolist() == [5]
    with pytest.raises(TypeError):
        jag.frombuffer(buf, dtype=None)


# ---------------------------------------------------------------------------
# Read-only tensors: every export is read-only
# ---------------------------------------------------------------------------

PyBUF_WRITABLE = 0x0001
PyBUF_FULL_RO = 0x0100 | 0x0004 | 0x0008 | 0x0010  # INDIRECT | FORMAT | ND | STRIDES


def get_buffer(obj, flags):
    """PyObject_GetBuffer(obj, flags) from C, as a consumer asking for a
    writable buffer does; returns the readonly field and releases the view.
    The exporter's exception (BufferError, with its message) reaches us."""
    view = ctypes.create_string_buffer(256)  # larger than a Py_buffer
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    get.restype = ctypes.c_int
    rel = ctypes.pythonapi.PyBuffer_Release
    rel.argtypes = [ctypes.c_void_p]
    rel.restype = None
    get(obj, view, flags)
    # Py_buffer: buf, obj, len, itemsize (pointer-sized each), then int readonly
    readonly = ctypes.c_int.from_buffer(view, 4 * ctypes.sizeof(ctypes.c_void_p)).value
    rel(view)
    return readonly


def dlpack_flags(cap):
    """The flags field of a "dltensor_versioned" capsule's
    DLManagedTensorVersioned: {version (2 x u32), manager_ctx, deleter, flags}."""
    p = ctypes.pythonapi.PyCapsule_GetPointer
    p.restype = ctypes.c_void_p
    p.argtypes = [ctypes.py_object, ctypes.c_char_p]
    addr = p(cap, b"dltensor_versioned")
    return ctypes.c_uint64.from_address(addr + 8 + 2 * ctypes.sizeof(ctypes.c_void_p)).value


DLPACK_FLAG_BITMASK_READ_ONLY = 1
DLPACK_FLAG_BITMASK_IS_COPIED = 2


@pytest.fixture
def mapped(tmp_path):
    """A (3, 4) float32 tensor loaded with jag.load(mmap=True): read-only
    (jag.h, jag_load), and the file's bytes to check nothing reached it."""
    path = tmp_path / "ro.safetensors"
    jag.save({"x": jag.arange(12, dtype=jag.float32).reshape(3, 4)}, path)
    x = jag.load(path, mmap=True)["x"]
    yield x, np.arange(12, dtype=np.float32).reshape(3, 4)
    assert x.tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()  # nothing was written


def test_read_only_numpy_and_array_interface(mapped):
    x, ref = mapped
    assert x.is_read_only() and not jag.ones(2).is_read_only()
    for t, r in ((x, ref), (x[1], ref[1]), (x.T, ref.T), (x[:, 1:3], ref[:, 1:3])):  # views too
        for a in (t.numpy(), np.asarray(t), np.array(t, copy=False)):
            assert not a.flags.writeable
            np.testing.assert_array_equal(a, r)
            with pytest.raises(ValueError, match="read-only"):
                a[...] = 0  # numpy refuses the write
    assert x.numpy().ctypes.data == x.numpy().ctypes.data  # still zero-copy
    c = x.clone()
    assert not c.is_read_only() and c.numpy().flags.writeable
    assert np.array(x).flags.writeable  # np.array copies by default: a copy is writable
    assert jag.ones(3).numpy().flags.writeable  # writable tensors are unchanged


def test_read_only_buffer_protocol(mapped):
    x, ref = mapped
    m = memoryview(x)
    assert m.readonly and m.tolist() == ref.tolist()
    with pytest.raises(TypeError):
        m[0, 0] = 1.0  # a read-only memoryview refuses the write
    with pytest.raises(BufferError, match=r"writable buffer was requested.*read-only.*clone\(\)"):
        get_buffer(x, PyBUF_WRITABLE)
    with pytest.raises(BufferError, match="read-only"):
        get_buffer(x[1:], PyBUF_FULL_RO | PyBUF_WRITABLE)
    assert get_buffer(x, PyBUF_FULL_RO) == 1
    assert get_buffer(jag.ones(3), PyBUF_FULL_RO | PyBUF_WRITABLE) == 0  # writable tensors: as before
    fb = np.frombuffer(x, dtype=np.float32)  # numpy asks for writable, then falls back to read-only
    assert not fb.flags.writeable and fb.tolist() == ref.reshape(-1).tolist()


def test_read_only_dlpack_versioned(mapped):
    x, ref = mapped
    cap = x.__dlpack__(max_version=(1, 0))
    assert capsule_name(cap) == "dltensor_versioned"
    assert dlpack_flags(cap) == DLPACK_FLAG_BITMASK_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        jag.from_dlpack(cap, copy=False)  # jag's importer sees the flag
    del cap
    a = np.from_dlpack(x)  # numpy >= 2.1 asks for a versioned capsule and honours the flag
    assert not a.flags.writeable and a.ctypes.data == x.numpy().ctypes.data
    np.testing.assert_array_equal(a, ref)
    y = jag.from_dlpack(x)  # a copy: a tensor over borrowed memory would be writable
    assert not y.is_read_only() and not y._shares_storage(x)
    y[0, 0] = 100.0
    assert x[0, 0].item() == 0.0
    copied = x.__dlpack__(max_version=(1, 0), copy=True)  # a copy is writable: no read-only flag
    assert dlpack_flags(copied) == DLPACK_FLAG_BITMASK_IS_COPIED
    assert dlpack_flags(jag.ones(2).__dlpack__(max_version=(1, 0))) == 0


def test_read_only_dlpack_legacy(mapped):
    x, ref = mapped
    # DLPack 0.x cannot say "read-only": refused (as numpy refuses its
    # read-only arrays there) unless copy=True
    for kwargs in ({}, {"max_version": None}, {"max_version": (0, 8)}, {"copy": False}):
        with pytest.raises(BufferError, match=r"read-only.*max_version=\(1, 0\).*copy=True.*clone\(\)"):
            x.__dlpack__(**kwargs)
    cap = x.__dlpack__(copy=True)
    assert capsule_name(cap) == "dltensor"
    c = jag.from_dlpack(cap, copy=False)  # the legacy capsule of the copy: writable, zero-copy import
    assert c.tolist() == ref.tolist() and not c._shares_storage(x)
    c[0, 0] = 5.0
    assert x[0, 0].item() == 0.0


def test_nested_offsets_and_lengths_export_read_only():
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(0, 3), jag.ones(4, 3)], layout=jag.jagged)
    off = nt.offsets()
    assert off.is_read_only() and off.tolist() == [0, 2, 2, 6]
    a = off.numpy()
    assert not a.flags.writeable
    assert memoryview(off).readonly
    assert not np.from_dlpack(off).flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        get_buffer(off, PyBUF_WRITABLE)
    with pytest.raises(BufferError, match="read-only"):
        off.__dlpack__()
    with pytest.raises(ValueError, match="read-only"):
        off.copy_(jag.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="read-only"):
        off[1] = 0
    assert nt.offsets().tolist() == [0, 2, 2, 6]
    assert [c.shape[0] for c in nt.unbind()] == [2, 0, 4]
    assert off.clone().numpy().flags.writeable
    holes = jag.nested.nested_tensor_from_jagged(jag.ones(5, 2), offsets=[0, 2, 5], lengths=[1, 3])
    ln = holes.lengths()
    assert ln.is_read_only() and not ln.numpy().flags.writeable and ln.tolist() == [1, 3]
    assert not nt.values().is_read_only() and nt.values().numpy().flags.writeable
