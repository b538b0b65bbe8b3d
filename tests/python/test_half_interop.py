"""Half precision at jag's edges: jag.frombuffer over bfloat16 bytes and
DistributedDataParallel over float16 / bfloat16 parameters.

frombuffer's reference is torch.frombuffer's semantics: a 1-D tensor of
``count`` elements (-1: to the end) read from ``offset`` bytes into any
buffer, for any dtype, sharing the memory; the values are the bit patterns
decoded by hand (bfloat16: sign, 8 exponent bits with bias 127, 7 mantissa
bits, little-endian bytes). DDP's reference: torch's DDP all-reduces a half
gradient bucket in the gradients' dtype; jag sums each pair in float32
rounded to the dtype and divides the sum by the world size in float32,
rounded once, so gradients whose sums are exact average to round(sum / p).
"""
import gc
import math
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jag
import jag.distributed as dist

PKG = os.path.dirname(os.path.dirname(os.path.abspath(jag.__file__)))


def bf16_from_bits(bits):
    """The value of a bfloat16 bit pattern, decoded by hand."""
    sign = -1.0 if bits >> 15 else 1.0
    exp, mant = (bits >> 7) & 0xFF, bits & 0x7F
    if exp == 0xFF:
        return sign * math.inf if mant == 0 else math.nan
    if exp == 0:
        return sign * mant * 2.0 ** (-126 - 7)
    return sign * (1 + mant / 128.0) * 2.0 ** (exp - 127)


def test_bf16_from_bits_by_hand():
    assert bf16_from_bits(0x3F80) == 1.0
    assert bf16_from_bits(0xC000) == -2.0
    assert bf16_from_bits(0x4049) == 3.140625  # 2 * (1 + 73/128)
    assert bf16_from_bits(0x0001) == 2.0 ** -133


@pytest.mark.parametrize("pattern", [0x3F80, 0xC000, 0x4049, 0x0000, 0x8000, 0x7F80, 0xFF80, 0x0001, 0x7F7F, 0x3EAB])
def test_frombuffer_bfloat16_decodes_bit_patterns(pattern):
    raw = bytearray(struct.pack("<H", pattern))  # bytes 0x80 0x3f for 1.0
    t = jag.frombuffer(raw, dtype=jag.bfloat16)
    assert t.dtype is jag.bfloat16 and t.shape == (1,)
    got, want = t.float().tolist()[0], bf16_from_bits(pattern)
    assert got == want and math.copysign(1, got) == math.copysign(1, want)


def test_frombuffer_bfloat16_nan():
    t = jag.frombuffer(bytearray(b"\xc0\x7f"), dtype=jag.bfloat16)
    assert math.isnan(t.float().tolist()[0])


def test_frombuffer_bfloat16_count_and_offset_in_bytes():
    raw = bytearray(b"\x80\x3f\x00\xc0\x49\x40\x80\xbf")  # 1, -2, 3.140625, -1
    assert jag.frombuffer(raw, dtype=jag.bfloat16).float().tolist() == [1.0, -2.0, 3.140625, -1.0]
    assert jag.frombuffer(raw, dtype=jag.bfloat16, count=2, offset=2).float().tolist() == [-2.0, 3.140625]
    assert jag.frombuffer(raw, dtype=jag.bfloat16, offset=6).float().tolist() == [-1.0]
    # float16 over the same bytes: its own decoding (numpy's float16 as reference)
    want16 = np.frombuffer(bytes(raw), dtype=np.float16).astype(np.float64).tolist()
    assert jag.frombuffer(raw, dtype=jag.float16).double().tolist() == want16


def test_frombuffer_bfloat16_shares_a_writable_buffer():
    raw = bytearray(b"\x80\x3f\x00\xc0")
    t = jag.frombuffer(raw, dtype=jag.bfloat16)
    t[1] = 0.5  # bfloat16 0x3f00
    assert raw == bytearray(b"\x80\x3f\x00\x3f")
    raw[0:2] = b"\x40\x40"  # 3.0
    assert t.float().tolist() == [3.0, 0.5]
    del raw
    gc.collect()
    assert t.float().tolist() == [3.0, 0.5]  # the tensor keeps the buffer alive


def test_frombuffer_bfloat16_copies_read_only_bytes():
    raw = b"\x80\x3f\x00\xc0"
    t = jag.frombuffer(raw, dtype=jag.bfloat16)
    t[0] = 2.0
    assert raw == b"\x80\x3f\x00\xc0" and t.float().tolist() == [2.0, -2.0]


def test_frombuffer_bfloat16_requires_grad():
    t = jag.frombuffer(bytearray(b"\x80\x3f"), dtype=jag.bfloat16, requires_grad=True)
    assert t.requires_grad


@pytest.mark.parametrize("dtype", [jag.bfloat16, jag.float32])
def test_frombuffer_bad_count_or_offset_raises_as_torch(dtype):
    # torch.frombuffer raises ValueError for each of these
    raw = bytearray(8)
    size = 2 if dtype is jag.bfloat16 else 4
    with pytest.raises(ValueError, match="frombuffer: argument 'offset' is 8 bytes"):
        jag.frombuffer(raw, dtype=dtype, offset=8)
    with pytest.raises(ValueError, match="frombuffer: argument 'offset' is -1 bytes"):
        jag.frombuffer(raw, dtype=dtype, offset=-1)
    with pytest.raises(ValueError, match="frombuffer: argument 'count' is 0"):
        jag.frombuffer(raw, dtype=dtype, count=0)
    with pytest.raises(ValueError, match="not a multiple of the element size"):
        jag.frombuffer(raw, dtype=dtype, offset=1)
    with pytest.raises(ValueError, match="frombuffer: argument 'count' is %d" % (8 // size + 1)):
        jag.frombuffer(raw, dtype=dtype, count=8 // size + 1)
    assert raw == bytearray(8)


# ---- DistributedDataParallel over half parameters -------------------------


def run_mpi(tmp_path, ranks, body):
    """Run `body` on `ranks` ranks under mpirun; every rank must reach done(rank)."""
    script = tmp_path / "prog.py"
    prelude = ("import sys\nsys.path.insert(0, %r)\n"
               "def done(rank):\n    open(%r + '/ok.%%d' %% rank, 'w').close()\n" % (PKG, str(tmp_path)))
    script.write_text(prelude + textwrap.dedent(body))
    cmd = [shutil.which("mpirun"), "-np", str(ranks), "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
           sys.executable, str(script)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ, OMP_NUM_THREADS="1"))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    for r in range(ranks):
        assert (tmp_path / ("ok.%d" % r)).exists(), out


needs_mpi = pytest.mark.skipif(not dist.is_available() or shutil.which("mpirun") is None,
                               reason="jag built without MPI")


@needs_mpi
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_ddp_half_parameters(tmp_path, ranks):
    run_mpi(tmp_path, ranks, """
        import struct
        import numpy as np
        import jag, jag.distributed as dist, jag.nn as nn
        from jag.nn.parallel import DistributedDataParallel

        def round_bf16(x):
            # float32 bits rounded to their top 16, to nearest, ties to even
            u = struct.unpack("<I", struct.pack("<f", x))[0]
            u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
            return struct.unpack("<f", struct.pack("<I", u << 16))[0]

        def round_to(x, dt):
            return round_bf16(x) if dt is jag.bfloat16 else float(np.float16(np.float32(x)))

        class Mixed(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Parameter(jag.zeros(5, dtype=jag.float32))
                self.b = nn.Parameter(jag.zeros(5, dtype=jag.bfloat16))
                self.c = nn.Parameter(jag.zeros(5, dtype=jag.float16))
                self.d = nn.Parameter(jag.zeros(5, dtype=jag.bfloat16))

        dist.init_process_group("mpi")
        r, p = dist.get_rank(), dist.get_world_size()
        m = Mixed()
        ddp = DistributedDataParallel(m)
        # reverse order, one dtype per bucket: {d}, {c}, {b}, {a}
        assert ddp.bucket_indices() == [[3], [2], [1], [0]], ddp.bucket_indices()

        def g(q, k, e):  # rank q's gradient of parameter k: multiples of 1/8, exact sums
            return ((q * 5 + e * 3 + k * 7) % 17 - 8) / 8.0

        params = [m.a, m.b, m.c, m.d]
        loss = None
        for k, prm in enumerate(params):
            w = jag.tensor([g(r, k, e) for e in range(5)], dtype=prm.dtype)
            term = (prm * w).sum().float()
            loss = term if loss is None else loss + term
        loss.backward()  # the hooks average during backward
        for k, prm in enumerate(params):
            assert prm.grad.dtype is prm.dtype, (k, prm.grad.dtype)
            got = prm.grad.float().tolist()
            for e in range(5):
                avg = float(np.float32(sum(g(q, k, e) for q in range(p))) / np.float32(p))
                want = avg if prm.dtype is jag.float32 else round_to(avg, prm.dtype)
                assert got[e] == want, (k, e, got[e], want)
        dist.destroy_process_group()
        done(r)
    """)
