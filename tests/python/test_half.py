"""float16 and bfloat16: dtypes, conversions against numpy's float16 (IEEE
binary16, round to nearest even), ops computed in float32 and rounded once
(as torch computes half tensors on the CPU), numpy / DLPack interop, printing
and safetensors files the `safetensors` package reads."""

import struct

import numpy as np
import pytest

import jag


def bf16_bits(values):
    """bfloat16 bit patterns of float32 values, round to nearest even
    (torch's rounding): the upper half of the float32 pattern after adding
    0x7fff plus the lowest kept bit. Finite inputs only."""
    u = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def test_dtypes():
    assert jag.float16.is_floating_point and jag.bfloat16.is_floating_point
    assert jag.half is jag.float16
    assert repr(jag.float16) == "jag.float16" and repr(jag.bfloat16) == "jag.bfloat16"
    # torch.promote_types
    assert jag.promote_types(jag.float16, jag.bfloat16) is jag.float32
    assert jag.promote_types(jag.float16, jag.int64) is jag.float16
    assert jag.promote_types(jag.bfloat16, jag.float32) is jag.float32


def test_float16_matches_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(1000).astype(np.float32) * 1000,
                        np.float32([65504, 65519, 65520, 1e-8, 6e-8, -0.0, np.inf, -np.inf])])
    t = jag.tensor(x).half()
    assert t.dtype is jag.float16
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)  # numpy: IEEE round to nearest even, inf past 65520
    np.testing.assert_array_equal(t.numpy().view(np.uint16), want.view(np.uint16))
    # and back, exactly
    np.testing.assert_array_equal(t.float().numpy(), want.astype(np.float32))
    # a numpy float16 array keeps its dtype
    a = jag.tensor(want)
    assert a.dtype is jag.float16
    np.testing.assert_array_equal(a.numpy().view(np.uint16), want.view(np.uint16))


def test_bfloat16_rounding():
    x = np.float32([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.14159265, -2.5, 1e-3])
    t = jag.tensor(x).bfloat16()
    assert t.dtype is jag.bfloat16
    np.testing.assert_array_equal(t.float().numpy(), bf16_values(bf16_bits(x)))
    # torch refuses numpy() for bfloat16; so does jag, with a clear message
    with pytest.raises(TypeError, match="numpy has no bfloat16"):
        t.numpy()
    # jag.tensor(..., dtype=bfloat16) rounds once from float32
    np.testing.assert_array_equal(jag.tensor(x, dtype=jag.bfloat16).float().numpy(), bf16_values(bf16_bits(x)))


@pytest.mark.parametrize("dt", [jag.float16, jag.bfloat16])
def test_ops_round_once_from_float32(dt):
    rng = np.random.default_rng(1)
    x = jag.tensor(rng.standard_normal((5, 7)).astype(np.float32)).to(dt)
    y = jag.tensor(rng.uniform(0.5, 2, (5, 7)).astype(np.float32)).to(dt)
    xf, yf = x.float(), y.float()
    for got, ref in [(x * y, xf * yf), (x / y, xf / yf), (x.exp(), xf.exp()), (x.sum(1), xf.sum(1)),
                     (jag.softmax(x, 1), jag.softmax(xf, 1))]:
        assert got.dtype is dt
        np.testing.assert_array_equal(got.float().numpy(), ref.to(dt).float().numpy())
    assert (x + yf).dtype is jag.float32  # half with float32 promotes to float32


def test_gradient_has_input_dtype():
    x = jag.tensor([0.5, -1.25, 3.0], dtype=jag.float16, requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype is jag.float16
    np.testing.assert_array_equal(x.grad.numpy(), np.float16([1.0, -2.5, 6.0]))


def test_printing_and_item():
    t = jag.tensor([1.0, 0.5], dtype=jag.float16)
    assert str(t) == "tensor([1.0000, 0.5000], dtype=float16, size=[2])"
    assert jag.tensor([0.1], dtype=jag.bfloat16)[0].item() == float(bf16_values(bf16_bits([0.1]))[0])


def test_dlpack():
    a = np.float16([1.5, -2.0, 65504])
    t = jag.from_dlpack(a)
    assert t.dtype is jag.float16 and t.tolist() == [1.5, -2.0, 65504.0]
    back = np.from_dlpack(t)
    assert back.dtype == np.float16
    np.testing.assert_array_equal(back, a)
    # bfloat16 travels as DLPack kDLBfloat 16 (code 4), read back as bfloat16
    b = jag.tensor([1.0, 2.0], dtype=jag.bfloat16)
    assert jag.from_dlpack(b).dtype is jag.bfloat16


@pytest.mark.parametrize("dt,st_name", [(jag.float16, "F16"), (jag.bfloat16, "BF16")])
def test_safetensors_package_reads_jag_files(tmp_path, dt, st_name):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    x = jag.tensor([[1.0, -0.5, 3.0], [0.25, 1e-3, -7.0]]).to(dt)
    path = tmp_path / "half.safetensors"
    jag.save({"x": x}, str(path))
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert ('"dtype":"%s"' % st_name) in raw[8:8 + n].decode()
    if dt is jag.float16:
        got = safetensors_numpy.load_file(str(path))["x"]
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, x.numpy())
    else:
        # numpy has no bfloat16: the package's numpy loader refuses BF16; its
        # header parser takes the file, and the data bytes are read where the
        # header places them
        import json

        from safetensors import safe_open

        with safe_open(str(path), "np") as f:
            assert list(f.keys()) == ["x"]
        header = json.loads(raw[8:8 + n])
        begin, end = header["x"]["data_offsets"]
        bits = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype=np.uint16).reshape(2, 3)
        np.testing.assert_array_equal(bf16_values(bits), x.float().numpy())
    # and jag reads it back, bit for bit
    y = jag.load(str(path))["x"]
    assert y.dtype is dt
    np.testing.assert_array_equal(y.float().numpy(), x.float().numpy())


def test_rms_norm_default_eps_is_the_dtypes():
    """eps=None is torch.finfo(dtype).eps: 2^-10 for float16, 2^-7 for
    bfloat16 (computed in float32, rounded once)."""
    import jag.nn.functional as F
    for dt, eps in ((jag.float16, 2.0 ** -10), (jag.bfloat16, 2.0 ** -7)):
        x = jag.full((2, 4), 0.01, dtype=dt)
        xv = float(x.float()[0, 0].item())
        want = xv / np.sqrt(xv * xv + eps)
        got = F.rms_norm(x, (4,)).float().numpy()
        np.testing.assert_allclose(got, np.full((2, 4), want), rtol=2.0 ** -7)


def test_index_assignment_and_frombuffer():
    """x[idx] = v on half tensors rounds v once into x's dtype (numpy has no
    bfloat16: it goes through float32); frombuffer views float16 memory, and
    refuses bfloat16 with a clear error."""
    x = jag.zeros(4, dtype=jag.bfloat16)
    x[jag.tensor([1, 3])] = jag.tensor([1.5, 2.0], dtype=jag.bfloat16)
    x[jag.tensor([0])] = 1.0 + 2.0 ** -10  # rounds to 1.0 in bfloat16 (8 significant bits)
    assert x.dtype is jag.bfloat16 and x.tolist() == [1.0, 1.5, 0.0, 2.0]
    buf = bytearray(np.array([1.0, -2.5], dtype=np.float16).tobytes())
    h = jag.frombuffer(buf, dtype=jag.float16)
    assert h.tolist() == [1.0, -2.5]
    buf[0:2] = np.array([3.0], dtype=np.float16).tobytes()  # a view of the buffer: no copy
    assert h.tolist() == [3.0, -2.5]
    # bfloat16 views the bytes too (torch.frombuffer takes any dtype): 0x3f80 is 1.0
    b = jag.frombuffer(bytearray(b"\x80\x3f"), dtype=jag.bfloat16)
    assert b.dtype is jag.bfloat16 and b.float().tolist() == [1.0]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_attention_in_float32(dt):
    """scaled_dot_product_attention on half inputs, dense and jagged: the
    float32 attention of the widened inputs rounded once (torch's CPU path),
    and a gradient of the inputs' dtype."""
    import jag.nn.functional as F
    half = getattr(jag, dt)
    jag.manual_seed(5)
    q = jag.randn(2, 2, 5, 4).to(half).requires_grad_(True)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    w = q.detach().float()
    want = F.scaled_dot_product_attention(w, w, w, is_causal=True).to(half)
    assert out.dtype is half
    np.testing.assert_array_equal(out.detach().float().numpy(), want.float().numpy())
    out.float().sum().backward()
    assert q.grad.dtype is half and q.grad.shape == q.shape
    n = jag.nested.nested_tensor([jag.randn(3, 2, 4), jag.randn(1, 2, 4)], layout=jag.jagged).to(half).transpose(1, 2)
    got = F.scaled_dot_product_attention(n, n, n)
    assert got.dtype is half
    for g, c in zip(got.unbind(), n.unbind()):
        cw = c.float().unsqueeze(0)
        ref = F.scaled_dot_product_attention(cw, cw, cw)[0].to(half)
        np.testing.assert_array_equal(g.float().numpy(), ref.float().numpy())


def _within_gemm_bound(got, a, b, bias=None):
    """got (float64 array) against a @ b (+ bias) summed exactly in float64
    from the widened bfloat16 inputs: float32 summation of K terms (the bias
    one more) and one rounding to bfloat16 give
    |got - ref| <= 2^-8 |ref| + (1 + 2^-8) * 1.01 * K * 2^-24 * sum |terms|."""
    ref = a @ b + (0 if bias is None else bias)
    s = np.abs(a) @ np.abs(b) + (0 if bias is None else np.abs(bias))
    k = a.shape[-1] + (bias is not None)
    tol = 2.0 ** -8 * np.abs(ref) + (1 + 2.0 ** -8) * 1.01 * k * 2.0 ** -24 * s
    assert np.all(np.abs(got - ref) <= tol), np.max(np.abs(got - ref) - tol)


def test_bfloat16_linear_and_matmul():
    """bfloat16 linear / mm / matmul (dense and nested): products summed in
    float32, rounded once to bfloat16 (torch's CPU bfloat16 matmul); the
    gradients are bfloat16 too."""
    import jag.nn.functional as F
    jag.manual_seed(7)
    x = jag.randn(4, 3, 70).to(jag.bfloat16).requires_grad_(True)
    w = jag.randn(33, 70).to(jag.bfloat16).requires_grad_(True)
    b = jag.randn(33).to(jag.bfloat16).requires_grad_(True)
    y = F.linear(x, w, b)
    assert y.dtype is jag.bfloat16 and y.shape == (4, 3, 33)
    xv, wv, bv = (t.detach().double().numpy() for t in (x, w, b))
    _within_gemm_bound(y.detach().double().numpy(), xv, wv.T, bv)
    # d sum(y) / dx = column sums of w (K = 33), / dw = row sums of x over
    # the 12 rows, / db = 12: each one sum rounded once
    y.sum().backward()
    assert x.grad.dtype is jag.bfloat16 and w.grad.dtype is jag.bfloat16 and b.grad.dtype is jag.bfloat16
    ones = np.ones((12, 33))
    _within_gemm_bound(x.grad.double().numpy().reshape(12, 70), ones, wv)
    _within_gemm_bound(w.grad.double().numpy(), ones.T, xv.reshape(12, 70))
    assert b.grad.double().numpy().tolist() == [12.0] * 33
    # mm of a transposed view, and nested matmul on the packed values
    a = jag.randn(40, 9).to(jag.bfloat16)
    m = jag.randn(40, 17).to(jag.bfloat16)
    _within_gemm_bound(jag.mm(a.t(), m).double().numpy(), a.double().numpy().T, m.double().numpy())
    n = jag.nested.nested_tensor([jag.randn(2, 70), jag.randn(5, 70)], layout=jag.jagged).to(jag.bfloat16)
    out = n @ w.detach().t()
    assert out.dtype is jag.bfloat16
    for o, c in zip(out.unbind(), n.unbind()):
        _within_gemm_bound(o.double().numpy(), c.double().numpy(), wv.T)
    with pytest.raises(TypeError, match="jag_mm: argument .b. has dtype float32, expected bfloat16"):
        jag.mm(a.t(), m.float())


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_attention_masks_on_half_inputs(dt):
    """A mask of the inputs' dtype and a float32 mask (torch takes both with
    half inputs): the float32 attention of the widened inputs and mask,
    rounded once; key / value of another dtype are refused, as in torch."""
    import jag.nn.functional as F
    half = getattr(jag, dt)
    jag.manual_seed(9)
    q, k, v = (jag.randn(2, 2, 5, 8).to(half) for _ in range(3))
    m32 = jag.randn(5, 5)
    for mask in (m32.to(half), m32):
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask.float()).to(half)
        assert got.dtype is half
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    with pytest.raises(RuntimeError, match="must have the same dtype"):
        F.scaled_dot_product_attention(q, k.float(), v)
