"""jag jagged nested tensors <-> torch.nested jagged tensors (NJT): values
shared through DLPack (no copy), offsets and lengths copied, holes and a
moved ragged dim kept, gradients across the boundary. Every check compares
with torch computing on the components itself (unbind, per-component ops)
or with a formula."""
import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch interop tests need PyTorch (make test-torch installs it)")

import jag  # noqa: E402
from jag._torch_interop import from_torch, to_torch  # noqa: E402

FLOAT_DTYPES = [(torch.float32, jag.float32), (torch.float64, jag.float64)]
DTYPES = FLOAT_DTYPES + [(torch.int64, jag.int64)]


def make_njt(tdt, lengths=(2, 0, 4, 1), width=3, requires_grad=False):
    gen = torch.Generator().manual_seed(sum(lengths) * 7 + width)
    comps = [(torch.randn(n, width, generator=gen, dtype=torch.float64) * 10).to(tdt) for n in lengths]
    return torch.nested.nested_tensor(comps, layout=torch.jagged, requires_grad=requires_grad)


def assert_same_components(jag_nt, torch_nt):
    """Component i of both is the same array (shapes and values)."""
    jc = jag_nt.unbind()
    tc = torch_nt.unbind()
    assert len(jc) == len(tc)
    for a, b in zip(jc, tc):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.numpy(), b.detach().numpy())


# ---------------------------------------------------------------------------
# torch -> jag
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("tdt,jdt", DTYPES)
def test_from_torch_components_dtype_and_offsets(tdt, jdt):
    t = make_njt(tdt)
    n = from_torch(t)
    assert n.is_nested and n.layout is jag.jagged and n.dtype is jdt and n._ragged_idx == 1
    assert n.offsets().tolist() == t.offsets().tolist() and n.lengths() is None
    assert_same_components(n, t)


@pytest.mark.parametrize("tdt,jdt", DTYPES)
def test_from_torch_shares_values_both_ways(tdt, jdt):
    t = make_njt(tdt)
    n = from_torch(t)
    assert np.shares_memory(n.values().numpy(), t.values().numpy())
    t.values()[0, 0] = 42  # torch writes, jag sees
    assert n.values()[0, 0].item() == 42
    before = t.values().clone()
    n.mul_(3)  # jag writes through the packed values, torch sees
    np.testing.assert_array_equal(t.values().numpy(), (before * 3).numpy())


def test_from_torch_offsets_are_copied():
    t = make_njt(torch.float32)
    n = from_torch(t)
    assert n.offsets().is_read_only()
    assert not np.shares_memory(n.offsets().numpy(), t.offsets().numpy())
    t.offsets()[1] = 1  # torch's own offsets change: jag's copy does not
    assert n.offsets().tolist() == [0, 2, 2, 6, 7]


def test_from_torch_keeps_values_alive():
    t = make_njt(torch.float64)
    expect = [c.clone() for c in t.unbind()]
    n = from_torch(t)
    del t
    gc.collect()
    for a, b in zip(n.unbind(), expect):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_from_torch_holes():
    """torch.nested.narrow: item i keeps rows start[i] : start[i] + length[i]
    of a dense (B, L, D) tensor, the rest are holes (offsets + lengths)."""
    dense = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3)
    start, length = torch.tensor([1, 0]), torch.tensor([3, 2])
    t = torch.nested.narrow(dense, 1, start, length, layout=torch.jagged)
    n = from_torch(t)
    assert n.lengths().tolist() == [3, 2]
    assert n.offsets().tolist() == t.offsets().tolist()
    for i, c in enumerate(n.unbind()):
        np.testing.assert_array_equal(c.numpy(), dense[i, start[i]:start[i] + length[i]].numpy())
    dense[0, 1, 0] = -7.0  # the values are the dense tensor's memory, holes included
    assert n.unbind()[0][0, 0].item() == -7.0


def test_from_torch_ragged_dim_moved_to_2():
    t = make_njt(torch.float32, lengths=(3, 1, 2), width=4).transpose(1, 2)  # (B, 4, j)
    assert t._ragged_idx == 2
    n = from_torch(t)
    assert n._ragged_idx == 2 and n._sizes[1] == 4
    assert_same_components(n, t)
    assert np.shares_memory(n.values().numpy(), t.values().numpy())


def test_from_torch_ragged_dim_moved_to_3():
    comps = [torch.arange(n * 2 * 5, dtype=torch.float64).reshape(n, 2, 5) + 100 * n for n in (2, 3)]
    t = torch.nested.nested_tensor(comps, layout=torch.jagged).transpose(1, 3)  # (B, 5, 2, j)
    assert t._ragged_idx == 3
    n = from_torch(t)
    assert n._ragged_idx == 3
    assert_same_components(n, t)  # component i is comps[i].permute(2, 1, 0)
    assert np.shares_memory(n.values().numpy(), t.values().numpy())


def test_from_torch_empty_components():
    t = torch.nested.nested_tensor_from_jagged(torch.zeros(0, 3), torch.tensor([0, 0, 0]))
    n = from_torch(t)
    assert [tuple(c.shape) for c in n.unbind()] == [(0, 3), (0, 3)]


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_from_torch_refusals():
    with pytest.raises(TypeError, match="from_torch: argument 'njt' must be a torch nested tensor"):
        from_torch(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="from_torch: argument 'njt'"):
        from_torch([torch.zeros(2, 3)])
    strided = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(1, 3)])
    with pytest.raises(ValueError, match="from_torch: argument 'njt' must have layout torch.jagged"):
        from_torch(strided)


# ---------------------------------------------------------------------------
# jag -> torch
# ---------------------------------------------------------------------------


def make_nt(jdt, lengths=(2, 0, 4, 1), width=3):
    total = sum(lengths)
    values = (jag.arange(total * width, dtype=jag.float64) * 1.5 - 7).to(jdt).reshape(total, width)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return jag.nested.nested_tensor_from_jagged(values, jag.tensor(offsets))


@pytest.mark.parametrize("tdt,jdt", DTYPES)
def test_to_torch_components_dtype_and_offsets(tdt, jdt):
    n = make_nt(jdt)
    t = to_torch(n)
    assert t.is_nested and t.layout is torch.jagged and t.dtype is tdt and t._ragged_idx == 1
    assert t.offsets().dtype is torch.int64 and t.offsets().tolist() == n.offsets().tolist()
    assert t.lengths() is None
    assert_same_components(n, t)
    # torch's cached bounds are the components' lengths
    assert (t._min_seqlen, t._max_seqlen) == (0, 4)


@pytest.mark.parametrize("tdt,jdt", DTYPES)
def test_to_torch_shares_values_both_ways(tdt, jdt):
    n = make_nt(jdt)
    t = to_torch(n)
    assert np.shares_memory(n.values().numpy(), t.values().numpy())
    n.add_(5)  # jag writes, torch sees
    np.testing.assert_array_equal(t.values().numpy(), n.values().numpy())
    before = n.values().clone().numpy()
    t.values().mul_(2)  # torch writes, jag sees
    np.testing.assert_array_equal(n.values().numpy(), before * 2)


def test_to_torch_keeps_values_alive():
    n = make_nt(jag.float32)
    expect = [c.clone().numpy() for c in n.unbind()]
    t = to_torch(n)
    del n
    gc.collect()
    for a, b in zip(t.unbind(), expect):
        np.testing.assert_array_equal(a.numpy(), b)


def test_to_torch_holes():
    dense = jag.arange(2 * 5 * 3, dtype=jag.float32).reshape(2, 5, 3)
    n = jag.nested.narrow(dense, 1, [1, 0], [3, 2])
    t = to_torch(n)
    assert t.lengths().tolist() == [3, 2] and t.offsets().tolist() == n.offsets().tolist()
    d = dense.numpy()
    for i, (a, k) in enumerate(((1, 3), (0, 2))):
        np.testing.assert_array_equal(t.unbind()[i].numpy(), d[i, a:a + k])


@pytest.mark.parametrize("r", [2, 3])
def test_to_torch_ragged_dim_moved(r):
    lengths = (3, 1, 2)
    total = sum(lengths)
    values = jag.arange(total * 4 * 2, dtype=jag.float32).reshape(total, 4, 2)
    n = jag.nested.nested_tensor_from_jagged(values, [0, 3, 4, 6])  # (B, j, 4, 2)
    moved = n.transpose(1, 2) if r == 2 else n.transpose(1, 2).transpose(2, 3)  # (B, 4, j, 2) / (B, 4, 2, j)
    assert moved._ragged_idx == r
    t = to_torch(moved)
    assert t._ragged_idx == r
    assert_same_components(moved, t)
    assert np.shares_memory(t.values().numpy(), values.numpy())
    # back to jag: the same tensor again, over the same memory
    again = from_torch(t)
    assert again._ragged_idx == r
    assert_same_components(again, t)
    assert np.shares_memory(again.values().numpy(), values.numpy())


def test_to_torch_ragged_dim_moved_with_permuted_values():
    """transpose(1, 3) of (B, j, 4, 2) swaps the two dense dims too: jag's
    values become a permuted view (sum L, 2, 4); torch gets it as values
    (2, 4, sum L) with the same memory, component i (2, 4, L_i)."""
    values = jag.arange(6 * 4 * 2, dtype=jag.float32).reshape(6, 4, 2)
    n = jag.nested.nested_tensor_from_jagged(values, [0, 3, 4, 6]).transpose(1, 3)
    t = to_torch(n)
    assert t._ragged_idx == 3 and tuple(t.values().shape) == (2, 4, 6)
    v = values.numpy()
    for i, (a, b) in enumerate(((0, 3), (3, 4), (4, 6))):
        np.testing.assert_array_equal(t.unbind()[i].numpy(), v[a:b].transpose(2, 1, 0))
    assert np.shares_memory(t.values().numpy(), v)
    assert_same_components(from_torch(t), t)


def test_to_torch_empty_components():
    n = jag.nested.nested_tensor_from_jagged(jag.zeros((0, 3)), [0, 0, 0])
    t = to_torch(n)
    assert [tuple(c.shape) for c in t.unbind()] == [(0, 3), (0, 3)]


def test_to_torch_read_only_values_are_copied(tmp_path):
    """torch has no read-only tensors and ignores DLPack's read-only flag:
    read-only jag values (a file mapped by jag.load(mmap=True)) reach torch
    as a writable copy; copy=False refuses them."""
    path = str(tmp_path / "v.safetensors")
    jag.save({"v": jag.arange(12, dtype=jag.float32).reshape(4, 3)}, path)
    mapped = jag.load(path, mmap=True)["v"]
    n = jag.nested.nested_tensor_from_jagged(mapped, [0, 1, 4])
    assert n.values().is_read_only()
    t = to_torch(n)
    assert not np.shares_memory(t.values().numpy(), n.values().numpy())
    assert_same_components(n, t)
    t.values().fill_(-1)
    np.testing.assert_array_equal(n.values().numpy(), np.arange(12, dtype=np.float32).reshape(4, 3))
    with pytest.raises(BufferError, match="to_torch: the values are read-only"):
        to_torch(n, copy=False)
    del t, n, mapped
    gc.collect()


def test_to_torch_copy_true_does_not_share():
    n = make_nt(jag.float64)
    t = to_torch(n, copy=True)
    assert not np.shares_memory(t.values().numpy(), n.values().numpy())
    assert_same_components(n, t)


def test_to_torch_refusals():
    with pytest.raises(TypeError, match="to_torch: argument 'nt' must be a jag nested tensor, got a dense"):
        to_torch(jag.zeros((2, 3)))
    strided = jag.nested.nested_tensor([jag.zeros((2, 3)), jag.zeros((1, 3))])
    with pytest.raises(ValueError, match="to_torch: argument 'nt' must have layout jag.jagged"):
        to_torch(strided)
    with pytest.raises(TypeError, match="to_torch: argument 'copy'"):
        to_torch(make_nt(jag.float32), copy="yes")


# ---------------------------------------------------------------------------
# gradients across the boundary
# ---------------------------------------------------------------------------


def test_from_torch_without_grad_mode_does_not_require_grad():
    t = make_njt(torch.float64, requires_grad=True)
    with torch.no_grad():
        n = from_torch(t)
    assert not n.requires_grad
    assert not from_torch(t.detach()).requires_grad


def test_from_torch_gradient_reaches_torch_leaf():
    """loss = sum(w * x^2) over the values computed in jag: d loss / dx = 2 w x,
    accumulated into the torch leaf's .grad by jag's backward."""
    t = make_njt(torch.float64, requires_grad=True)
    n = from_torch(t)
    assert n.requires_grad
    w = jag.arange(n.values().shape[0] * 3, dtype=jag.float64).reshape(-1, 3)
    loss = (n.values() * n.values() * w).sum()
    loss.backward()
    x = t.values().detach().numpy()
    np.testing.assert_allclose(t.grad.values().numpy(), 2 * w.numpy() * x, rtol=1e-12)


def test_to_torch_gradient_reaches_jag_leaf():
    """loss = sum(w * x^3) computed in torch on a jag leaf's values:
    d loss / dx = 3 w x^2, accumulated into the jag leaf's .grad by torch's
    backward."""
    leaf = (jag.arange(7 * 3, dtype=jag.float64).reshape(7, 3) * 0.25 - 2).requires_grad_()
    n = jag.nested.nested_tensor_from_jagged(leaf, [0, 2, 2, 6, 7])
    t = to_torch(n)
    assert t.requires_grad
    w = torch.arange(21, dtype=torch.float64).reshape(7, 3)
    (t.values() ** 3 * w).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), 3 * w.numpy() * leaf.detach().numpy() ** 2, rtol=1e-12)


def _softmax_round_trip(x, dim):
    return to_torch(jag.softmax(from_torch(x), dim=dim))


@pytest.mark.parametrize("tdt", [torch.float32, torch.float64])
def test_jag_softmax_inside_a_torch_program(tdt):
    """torch NJT -> jag's softmax over the ragged dim -> torch NJT -> a torch
    loss; values and gradients equal torch's softmax run on each component
    (torch.softmax(component, dim=0) for a (L_i, D) component) of an
    independent copy."""
    x = make_njt(tdt, lengths=(3, 1, 5, 2), width=4, requires_grad=True)
    ref_leaves = [c.detach().clone().requires_grad_() for c in x.unbind()]
    y = _softmax_round_trip(x, 1)
    assert y.is_nested and y.layout is torch.jagged and y.requires_grad
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(y.values().shape, generator=gen, dtype=tdt)
    (y.values() * w).sum().backward()

    assert y.offsets().tolist() == x.offsets().tolist()
    ref = [torch.softmax(c, dim=0) for c in ref_leaves]
    (torch.cat(ref) * w).sum().backward()
    tol = dict(rtol=1e-5, atol=1e-6) if tdt is torch.float32 else dict(rtol=1e-12, atol=1e-14)
    for got, want in zip(y.unbind(), ref):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **tol)
    for c, leaf in zip(x.grad.unbind(), ref_leaves):
        np.testing.assert_allclose(c.numpy(), leaf.grad.numpy(), **tol)


def test_jag_softmax_inside_a_torch_program_ragged_dim_moved():
    """The same with the ragged dim at 2: x.transpose(1, 2) is (B, D, j) and
    the softmax runs over dim 2; torch per component: softmax over dim 1 of
    the (D, L_i) component."""
    x = make_njt(torch.float64, lengths=(2, 4, 1), width=3, requires_grad=True)
    ref_leaves = [c.detach().clone().requires_grad_() for c in x.unbind()]
    y = _softmax_round_trip(x.transpose(1, 2), 2)
    assert y._ragged_idx == 2
    w = [torch.linspace(-1, 2, c.numel(), dtype=torch.float64).reshape(c.shape) for c in y.unbind()]
    sum((c * wi).sum() for c, wi in zip(y.unbind(), w)).backward()
    ref = [torch.softmax(c.transpose(0, 1), dim=1) for c in ref_leaves]
    sum((c * wi).sum() for c, wi in zip(ref, w)).backward()
    for got, want in zip(y.unbind(), ref):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)
    for c, leaf in zip(x.grad.unbind(), ref_leaves):
        np.testing.assert_allclose(c.numpy(), leaf.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_public_names_are_the_interop():
    # jag.nested.from_torch and the Tensor method to_torch are these functions
    assert jag.nested.from_torch is from_torch
    njt = make_njt(torch.float64)
    nt = jag.nested.from_torch(njt)
    back = nt.to_torch()
    assert back.is_nested and back.layout == torch.jagged
    for a, b in zip(back.unbind(), njt.unbind()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_precision_round_trip(dt):
    """float16 / bfloat16 cross both ways without a copy of the values, and a
    jag op on them gives torch's bits: torch's CPU softmax on half tensors
    computes in float32 and rounds once, as jag does."""
    tdt = getattr(torch, dt)
    x = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged, dtype=tdt)
    j = from_torch(x)
    assert j.dtype is getattr(jag, dt) and tuple(j.values().shape) == (6, 3)
    y = to_torch(jag.softmax(j, dim=-1))
    assert y.dtype == tdt
    assert torch.equal(y.values(), torch.softmax(x.values().float(), -1).to(tdt))
    x.values()[0, 0] = 7.0  # the values are shared
    assert float(j.values()[0, 0].float().item()) == 7.0
