"""jag.save / jag.load: round trips of every dtype and both nested layouts,
mmap and copy, errors; interoperability with the safetensors package in both
directions."""
import os
import resource
import signal
import struct

import numpy as np
import pytest

import jag

try:
    import safetensors.numpy as st_numpy
    _ST_REASON = None
except ImportError as e:  # the package is installed by scripts/python_env.sh
    st_numpy = None
    _ST_REASON = "safetensors is not importable (%s); scripts/python_env.sh installs it" % e

needs_safetensors = pytest.mark.skipif(st_numpy is None, reason=_ST_REASON or "")

DTYPES = [("float32", np.float32), ("float64", np.float64), ("int32", np.int32), ("int64", np.int64),
          ("bool", np.bool_)]


def _array(np_dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if np_dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(np_dtype, np.integer):
        return rng.integers(-1000, 1000, size=shape).astype(np_dtype)
    return rng.standard_normal(shape).astype(np_dtype)


def _same_nested(a, b):
    assert a.is_nested and b.is_nested and a.layout is b.layout and a.dtype is b.dtype
    ca, cb = a.unbind(), b.unbind()
    assert len(ca) == len(cb)
    for x, y in zip(ca, cb):
        assert x.shape == y.shape
        np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("mmap", [False, True])
def test_round_trip_dense_every_dtype(tmp_path, mmap):
    arrays = {}
    for name, dt in DTYPES:
        arrays[name] = _array(dt, (3, 4), 1)
        arrays[name + "_empty"] = _array(dt, (0, 2), 2)
        arrays[name + "_scalar"] = _array(dt, (), 3)
    tensors = {k: jag.tensor(v) for k, v in arrays.items()}
    path = tmp_path / "dense.safetensors"
    jag.save(tensors, path, metadata={"format": "np"})
    back, meta = jag.serialization.load_with_metadata(path, mmap=mmap)
    assert meta == {"format": "np"}
    assert sorted(back) == sorted(arrays)
    for k, v in arrays.items():
        assert back[k].dtype is tensors[k].dtype
        np.testing.assert_array_equal(back[k].numpy(), v)
        assert jag.serialization.is_read_only(back[k]) == mmap


@pytest.mark.parametrize("mmap", [False, True])
def test_round_trip_nested(tmp_path, mmap):
    jagged = jag.nested.nested_tensor([jag.randn(2, 3), jag.randn(0, 3), jag.randn(4, 3)], layout=jag.jagged)
    strided = jag.nested.nested_tensor([jag.tensor([[1, 2, 3]]), jag.tensor([[4], [5]])], layout=jag.strided)
    values = jag.arange(10, dtype=jag.float64).reshape(5, 2)
    holes = jag.nested.nested_tensor_from_jagged(values, offsets=[0, 2, 5], lengths=[1, 3])
    path = tmp_path / "nested.safetensors"
    jag.save({"jagged": jagged, "strided": strided, "holes": holes}, path)
    back = jag.load(path, mmap=mmap)
    assert sorted(back) == ["holes", "jagged", "strided"]
    _same_nested(back["jagged"], jagged)
    _same_nested(back["strided"], strided)
    _same_nested(back["holes"], holes)
    assert back["holes"].lengths().tolist() == [1, 3]
    # a loaded nested tensor computes like the original
    _same_nested(jag.sin(back["jagged"]), jag.sin(jagged))


def test_mapped_tensors_outlive_the_dict(tmp_path):
    x = jag.randn(8, 3)
    path = tmp_path / "x.safetensors"
    jag.save({"x": x}, path)
    y = jag.load(path, mmap=True)["x"]
    v = y[2:4]
    del y
    np.testing.assert_array_equal(v.numpy(), x.numpy()[2:4])
    before = path.read_bytes()
    with pytest.raises(ValueError, match="read-only"):
        v.zero_()
    assert path.read_bytes() == before


def test_save_and_load_errors(tmp_path):
    x = jag.ones(2)
    with pytest.raises(TypeError, match="mapping"):
        jag.save([x], tmp_path / "a")
    with pytest.raises(TypeError, match="jag.Tensor"):
        jag.save({"a": np.ones(2)}, tmp_path / "a")
    with pytest.raises(ValueError, match="reserves"):
        jag.save({"a": x}, tmp_path / "a", metadata={"jag.nested.a": "{}"})
    with pytest.raises(RuntimeError, match="cannot open"):
        jag.load(tmp_path / "missing")
    bad = tmp_path / "bad.safetensors"
    header = b'{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}'
    bad.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 12)
    with pytest.raises(ValueError, match=r"jag_load: tensor 'w': data_offsets \[0, 12\] hold 12 bytes, expected 16"):
        jag.load(bad)
    bad.write_bytes(struct.pack("<Q", 1 << 62) + b"{}")
    with pytest.raises(ValueError, match="past the end of the file"):
        jag.load(bad)
    header = b'{"h":{"dtype":"I16","shape":[1],"data_offsets":[0,2]}}'
    bad.write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0")
    with pytest.raises(TypeError, match="'I16' has no jag equivalent"):
        jag.load(bad)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_load_refuses_a_fifo_without_blocking(tmp_path):
    """Opening a FIFO with no writer for reading blocks: jag.load refuses it
    at once. The alarm interrupts a blocking open, so that the test fails
    instead of hanging."""
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)

    def timeout(signum, frame):
        raise TimeoutError("jag.load blocked on a FIFO")

    old = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(20)
    try:
        for mmap in (False, True):
            with pytest.raises(RuntimeError, match=r"argument 'path' \('.*pipe\.safetensors'\) is not a regular file "
                                                   r"\(it is a FIFO\), expected a regular safetensors file"):
                jag.load(fifo, mmap=mmap)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_load_refuses_an_array_header_at_once(tmp_path):
    """A 20 MB header [0,0,...] is refused as soon as its first byte is read
    (it is no object), without building its 10 million values first (over
    600 MB). The growth of the peak RSS bounds what the load used."""
    path = tmp_path / "array.safetensors"
    header = b"[" + b"0," * 10_000_000 + b"0]"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    del header
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match="jag_load: the header is an array, expected a JSON object"):
        jag.load(path)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 64, "refusing the header raised the peak RSS by %.0f MB" % grown_mb


@needs_safetensors
def test_files_from_safetensors_load_in_jag(tmp_path):
    arrays = {name: _array(dt, (2, 3), i) for i, (name, dt) in enumerate(DTYPES)}
    arrays["empty"] = np.zeros((0, 5), np.float32)
    path = str(tmp_path / "st.safetensors")
    st_numpy.save_file(arrays, path, metadata={"origin": "safetensors"})
    for mmap in (False, True):
        back, meta = jag.serialization.load_with_metadata(path, mmap=mmap)
        assert meta == {"origin": "safetensors"}
        assert sorted(back) == sorted(arrays)
        for k, v in arrays.items():
            got = back[k].numpy()
            assert got.dtype == v.dtype
            np.testing.assert_array_equal(got, v)


@needs_safetensors
def test_files_from_jag_load_in_safetensors(tmp_path):
    arrays = {name: _array(dt, (3, 2), 10 + i) for i, (name, dt) in enumerate(DTYPES)}
    tensors = {k: jag.tensor(v) for k, v in arrays.items()}
    nt = jag.nested.nested_tensor([jag.tensor([[1.0, 2.0]]), jag.tensor([[3.0, 4.0], [5.0, 6.0]])],
                                  layout=jag.jagged)
    tensors["nt"] = nt
    path = str(tmp_path / "jag.safetensors")
    jag.save(tensors, path, metadata={"k": "v"})
    loaded = st_numpy.load_file(path)
    for k, v in arrays.items():
        assert loaded[k].dtype == v.dtype
        np.testing.assert_array_equal(loaded[k], v)
    # the nested tensor is its inner tensors to any other reader
    np.testing.assert_array_equal(loaded["nt.values"], np.array([[1, 2], [3, 4], [5, 6]], np.float32))
    np.testing.assert_array_equal(loaded["nt.offsets"], np.array([0, 1, 3], np.int64))
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    assert meta["k"] == "v"
    assert meta["jag.nested.nt"] == '{"layout":"jagged","ragged_idx":1}'
    # and back: safetensors' own copy of the file loads as the nested tensor again
    again = str(tmp_path / "again.safetensors")
    st_numpy.save_file(loaded, again, metadata=meta)
    _same_nested(jag.load(again)["nt"], nt)
