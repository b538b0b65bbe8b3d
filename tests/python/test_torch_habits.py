"""PyTorch code on nested tensors runs as written: torch's tensor habits in
jag, each checked against torch's documented semantics computed here
independently (per component with numpy, or by formula)."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import jag
from jag.autograd import gradcheck

OFFSETS = [0, 3, 6, 10]
LENGTHS = [2, 3, 1]  # with holes: component b is rows offsets[b] : offsets[b] + lengths[b]
D = 4


def values_np(dtype, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.0, (10, D)) * np.where(
        np.random.default_rng(seed + 1).random((10, D)) < 0.3, -1, 1)


def build(kind, values):
    """A nested tensor over values (10, D) and its valid components as
    row ranges: 'jagged' (no holes), 'holes' (lengths), 'transposed' (the
    values seen as (rows, 2, 2), ragged dim moved to 2)."""
    off = jag.tensor(OFFSETS)
    if kind == "jagged":
        return jag.nested.nested_tensor_from_jagged(values, off)
    if kind == "holes":
        return jag.nested.nested_tensor_from_jagged(values, off, jag.tensor(LENGTHS))
    nt = jag.nested.nested_tensor_from_jagged(values.reshape(10, 2, 2), off)
    return nt.transpose(1, 2)


def valid_rows(kind):
    lens = LENGTHS if kind == "holes" else [OFFSETS[b + 1] - OFFSETS[b] for b in range(3)]
    return [(OFFSETS[b], OFFSETS[b] + lens[b]) for b in range(3)]


def components_np(kind, v):
    """Each component as torch's unbind gives it (the transposed kind:
    (2, L, 2), the ragged dim at dim 1 of the component)."""
    out = []
    for a, e in valid_rows(kind):
        c = v[a:e]
        out.append(c.reshape(-1, 2, 2).transpose(1, 0, 2) if kind == "transposed" else c)
    return out


KINDS = ["jagged", "holes", "transposed"]
DTYPES = [(jag.float32, np.float32, 1e-5), (jag.float64, np.float64, 1e-12)]


# ---- 1. reductions over every dim -------------------------------------------

REDUCTIONS = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min, "prod": np.prod,
              "max": np.max, "min": np.min}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("jdt,ndt,tol", DTYPES)
def test_reduce_every_dim_over_valid_elements(kind, name, jdt, ndt, tol):
    # torch: nt.sum() etc. reduce every element of every component; holes are
    # not elements of any component, so they do not take part
    v = values_np(ndt).astype(ndt)
    nt = build(kind, jag.tensor(v))
    got = getattr(nt, name)()
    assert got.shape == () and not got.is_nested and got.dtype is jdt
    valid = np.concatenate([c.reshape(-1) for c in components_np(kind, v)]).astype(np.float64)
    want = REDUCTIONS[name](valid)
    assert abs(got.item() - want) <= tol * max(1.0, abs(want)) * 10
    assert getattr(jag, name)(nt).item() == got.item()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod"])
def test_reduce_every_dim_gradcheck(kind, name):
    v = jag.tensor(values_np(np.float64), requires_grad=True)
    assert gradcheck(lambda x: getattr(build(kind, x), name)(), (v,))


def test_reduce_every_dim_gradient_values_and_holes():
    # d sum / d x = 1 on valid elements, 0 in holes; d mean = 1 / count
    v = jag.tensor(values_np(np.float64), requires_grad=True)
    build("holes", v).mean().backward()
    want = np.zeros((10, D))
    for a, e in valid_rows("holes"):
        want[a:e] = 1.0 / (sum(LENGTHS) * D)
    np.testing.assert_allclose(v.grad.numpy(), want, rtol=1e-15)


def test_reduce_every_dim_loss_through_a_model():
    # the habit this enables: loss = out.sum(); loss.backward()
    x = jag.nested.nested_tensor([jag.randn(3, 4), jag.randn(2, 4)], layout=jag.jagged)
    w = jag.randn(4, 5, requires_grad=True)
    loss = (x @ w).relu().sum()
    loss.backward()
    xs = [c.numpy() for c in x.unbind()]
    wn = w.detach().numpy()
    want = sum(c.T @ (c @ wn > 0).astype(np.float32) for c in xs)  # d sum(relu(c w)) / dw = c^T [c w > 0]
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5, atol=1e-5)


def test_reduce_every_dim_strided_layout_and_empty():
    cs = [np.arange(6.0).reshape(2, 3), np.arange(4.0).reshape(2, 2) - 7]
    nt = jag.nested.nested_tensor([jag.tensor(c) for c in cs])  # strided: components differ in every dim
    flat = np.concatenate([c.reshape(-1) for c in cs])
    assert nt.sum().item() == flat.sum() and nt.amax().item() == flat.max() and nt.amin().item() == flat.min()
    assert abs(nt.mean().item() - flat.mean()) < 1e-6
    empty = jag.nested.nested_tensor_from_jagged(jag.zeros(0, 3), [0, 0, 0])
    assert empty.sum().item() == 0.0 and np.isnan(empty.mean().item())  # torch: 0 and nan
    with pytest.raises(ValueError, match="no elements"):
        empty.amax()
    with pytest.raises(ValueError, match="keepdim"):
        jag.sum(nt, keepdim=True)


# ---- 2. unbind, as_nested_tensor, select: differentiable -----------------------


@pytest.mark.parametrize("kind", KINDS)
def test_unbind_differentiable(kind):
    v = values_np(np.float64)
    vt = jag.tensor(v, requires_grad=True)
    parts = build(kind, vt).unbind()
    want = components_np(kind, v)
    assert len(parts) == 3
    for p, w in zip(parts, want):
        np.testing.assert_array_equal(p.detach().numpy(), w)
    # loss = sum_b sum(c_b * (b + 1)): the gradient is b + 1 on component b's valid rows, 0 elsewhere
    loss = parts[0].sum() + (parts[1] * 2.0).sum() + (parts[2] * 3.0).sum()
    loss.backward()
    g = np.zeros_like(v)
    for b, (a, e) in enumerate(valid_rows(kind)):
        g[a:e] = b + 1
    np.testing.assert_array_equal(vt.grad.numpy(), g)
    assert gradcheck(lambda x: build(kind, x).unbind()[1].square().sum(), (jag.tensor(v, requires_grad=True),))


def test_as_nested_tensor_keeps_the_graph():
    a = jag.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    b = jag.tensor(np.arange(4.0).reshape(2, 2), requires_grad=True)
    nt = jag.nested.as_nested_tensor([a, b], layout=jag.jagged)
    assert nt.requires_grad and nt.layout is jag.jagged
    (nt * nt).sum().backward()  # d sum(x^2) = 2 x
    np.testing.assert_array_equal(a.grad.numpy(), 2 * np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(b.grad.numpy(), 2 * np.arange(4.0).reshape(2, 2))
    with pytest.raises(ValueError, match="component 1"):
        jag.nested.as_nested_tensor([a, jag.zeros(2, 3, requires_grad=True)], layout=jag.jagged)


@pytest.mark.parametrize("kind", ["jagged", "holes"])
def test_select_last_dim_differentiable(kind):
    v = values_np(np.float64)
    nt = build(kind, jag.tensor(v))
    s = nt.select(-1, 2)
    assert s.is_nested and s.ndim == 2
    for p, w in zip(s.unbind(), components_np(kind, v)):
        np.testing.assert_array_equal(p.numpy(), w[:, 2])
    np.testing.assert_array_equal(nt[..., 1].unbind()[0].numpy(), components_np(kind, v)[0][:, 1])
    assert gradcheck(lambda x: build(kind, x).select(2, 1).square().sum(), (jag.tensor(v, requires_grad=True),))


# ---- 3. tensor habits -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["jagged", "holes"])
def test_to_padded_tensor_method(kind):
    v = values_np(np.float64)
    nt = build(kind, jag.tensor(v))
    p = nt.to_padded_tensor(-1.0)
    cs = components_np(kind, v)
    L = max(len(c) for c in cs)
    want = np.full((3, L, D), -1.0)
    for b, c in enumerate(cs):
        want[b, :len(c)] = c
    np.testing.assert_array_equal(p.numpy(), want)
    assert nt.to_padded_tensor(0.0, output_size=(3, 6, D)).shape == (3, 6, D)


@pytest.mark.parametrize("kind", ["jagged", "holes"])
def test_batch_slicing_and_index_tensor(kind):
    v = values_np(np.float64)
    cs = components_np(kind, v)
    vt = jag.tensor(v, requires_grad=True)
    nt = build(kind, vt)
    for got, want in ((nt[1:3], cs[1:3]), (nt[jag.tensor([2, 0])], [cs[2], cs[0]]), (nt[-2:], cs[-2:])):
        assert got.is_nested and len(got) == len(want)
        for p, w in zip(got.unbind(), want):
            np.testing.assert_array_equal(p.detach().numpy(), w)
    nt[1:3].sum().backward()  # rows of components 1 and 2 get 1
    g = np.zeros_like(v)
    for a, e in valid_rows(kind)[1:]:
        g[a:e] = 1
    np.testing.assert_array_equal(vt.grad.numpy(), g)


@pytest.mark.parametrize("kind", ["jagged", "holes"])
def test_index_ragged_dim_and_trailing_slices(kind):
    v = values_np(np.float64)
    cs = components_np(kind, v)
    nt = build(kind, jag.tensor(v))
    np.testing.assert_array_equal(nt[:, 0].numpy(), np.stack([c[0] for c in cs]))  # row 0 of every component
    np.testing.assert_array_equal(nt[:, -1].numpy(), np.stack([c[-1] for c in cs]))
    for p, c in zip(nt[..., :2].unbind(), cs):
        np.testing.assert_array_equal(p.numpy(), c[:, :2])
    short = min(range(3), key=lambda b: len(cs[b]))  # the first shortest component is named
    with pytest.raises(IndexError, match="component %d of length %d" % (short, len(cs[short]))):
        nt[:, len(cs[short])]
    assert gradcheck(lambda x: build(kind, x)[:, -1].square().sum(), (jag.tensor(v, requires_grad=True),))


def test_dense_mask_and_index_tensor_gradients():
    xn = np.array([[1.0, 3.0, -2.0], [4.0, 0.5, 2.5]])
    x = jag.tensor(xn, requires_grad=True)
    y = x[x > 2]
    np.testing.assert_array_equal(y.detach().numpy(), xn[xn > 2])
    (y * jag.tensor([1.0, 2.0, 3.0], dtype=jag.float64)).sum().backward()
    g = np.zeros_like(xn)
    g[xn > 2] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(x.grad.numpy(), g)
    assert gradcheck(lambda t: t[jag.tensor([1, 0, 1])].square().sum(), (jag.tensor(xn, requires_grad=True),))


def test_device_and_dtype_habits():
    x = jag.arange(6, device="cpu").float()
    assert x.to("cpu") is x and x.cpu() is x and x.to(device="cpu") is x
    assert x.to("cpu", jag.float64).dtype is jag.float64 and x.to(jag.int64).dtype is jag.int64
    assert x.to(dtype=jag.float64).dtype is jag.float64 and x.to(jag.zeros(1, dtype=jag.float64)).dtype is jag.float64
    assert x.to("cpu", copy=True) is not x
    for make in (lambda d: jag.zeros(2, device=d), lambda d: jag.ones(2, device=d), lambda d: jag.empty(2, device=d),
                 lambda d: jag.full((2,), 1.0, device=d), lambda d: jag.rand(2, device=d),
                 lambda d: jag.randn(2, device=d), lambda d: jag.tensor([1.0], device=d),
                 lambda d: jag.zeros_like(x, device=d), lambda d: jag.arange(3, device=d),
                 lambda d: jag.nested.nested_tensor([jag.ones(2)], device=d)):
        assert make("cpu").device == "cpu"
        with pytest.raises(ValueError, match="device"):
            make("cuda")
    with pytest.raises(ValueError, match="device"):
        x.to("cuda")


def test_is_contiguous_as_torch():
    nt = jag.nested.nested_tensor([jag.ones(2, 4), jag.ones(3, 4)], layout=jag.jagged)
    assert nt.is_contiguous()  # freshly built: packed values, no holes
    assert not build("holes", jag.zeros(10, 4)).is_contiguous()  # torch: holes (lengths) are not contiguous
    assert not nt.unflatten(-1, (2, 2)).transpose(1, 2).is_contiguous()  # torch: a transposed NJT is not


def test_num_threads():
    n = jag.get_num_threads()
    assert n >= 1
    try:
        jag.set_num_threads(1)
        assert jag.get_num_threads() == 1
    finally:
        jag.set_num_threads(n)
    assert jag.get_num_threads() == n
    for bad in (0, -2):  # torch: "set_num_threads expects a positive integer"
        with pytest.raises(ValueError, match="positive"):
            jag.set_num_threads(bad)


def test_nested_tensor_from_jagged_seqlens_checked():
    v = jag.zeros(10, 2)
    nt = jag.nested.nested_tensor_from_jagged(v, jag.tensor(OFFSETS), min_seqlen=3, max_seqlen=4)
    assert len(nt) == 3
    with pytest.raises(ValueError, match="max_seqlen is 5 but"):
        jag.nested.nested_tensor_from_jagged(v, jag.tensor(OFFSETS), max_seqlen=5)
    with pytest.raises(ValueError, match="min_seqlen is 2 but"):
        jag.nested.nested_tensor_from_jagged(v, jag.tensor(OFFSETS), jag.tensor(LENGTHS), min_seqlen=2)


def test_nested_masked_select():
    xn = np.arange(12.0).reshape(3, 4)
    mn = np.array([[True, False, True, False], [False, False, False, False], [True, True, True, False]])
    x = jag.tensor(xn, requires_grad=True)
    nt = jag.nested.masked_select(x, jag.tensor(mn))
    assert nt.is_nested and nt.layout is jag.jagged and len(nt) == 3
    for p, row, m in zip(nt.unbind(), xn, mn):  # torch: component i is tensor[i][mask[i]]
        np.testing.assert_array_equal(p.detach().numpy(), row[m])
    nt.values().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), mn.astype(np.float64))
    with pytest.raises(ValueError, match="broadcast"):
        jag.nested.masked_select(x, jag.tensor([True, False]))


# ---- 5. chunk, split, masked_fill, flatten, unflatten, squeeze, permute ---------


@pytest.mark.parametrize("kind", ["jagged", "holes"])
def test_split_and_chunk_per_component(kind):
    v = values_np(np.float64)
    cs = components_np(kind, v)
    nt = build(kind, jag.tensor(v))
    for pieces, sizes in ((nt.split(3, -1), [3, 1]), (nt.split([1, 3], 2), [1, 3]), (nt.chunk(2, -1), [2, 2]),
                          (nt.chunk(3, 2), [2, 2])):
        assert [p.shape[2] for p in pieces] == sizes
        start = 0
        for p, n in zip(pieces, sizes):
            for pc, c in zip(p.unbind(), cs):
                np.testing.assert_array_equal(pc.numpy(), c[:, start:start + n])
            start += n
    with pytest.raises(NotImplementedError, match="ragged dim"):
        nt.split(1, 1)
    d = jag.tensor(np.arange(10.0))
    assert [p.tolist() for p in d.chunk(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]  # torch: ceil(10 / 3) each
    vt = jag.tensor(v, requires_grad=True)
    assert gradcheck(lambda x: (build(kind, x).split([1, 3], -1)[1] * 2.0).sum(), (vt,))


@pytest.mark.parametrize("kind", ["jagged", "holes"])
def test_masked_fill_per_component(kind):
    v = values_np(np.float64)
    cs = components_np(kind, v)
    nt = build(kind, jag.tensor(v))
    out = nt.masked_fill(nt > 1.0, -5.0)
    for p, c in zip(out.unbind(), cs):
        np.testing.assert_array_equal(p.numpy(), np.where(c > 1.0, -5.0, c))
    dense_mask = jag.tensor([True, False, False, True])  # broadcast over every row
    for p, c in zip(nt.masked_fill(dense_mask, 0.0).unbind(), cs):
        np.testing.assert_array_equal(p.numpy(), np.where([True, False, False, True], 0.0, c))
    mask = nt > 1.0
    assert gradcheck(lambda x: build(kind, x).masked_fill(mask, 0.0).square().sum(),
                     (jag.tensor(v, requires_grad=True),))


@pytest.mark.parametrize("kind", ["jagged", "holes"])
def test_flatten_unflatten_squeeze_permute_per_component(kind):
    v = values_np(np.float64)
    cs = components_np(kind, v)
    nt = build(kind, jag.tensor(v))
    u = nt.unflatten(-1, (2, 2))
    for p, c in zip(u.unbind(), cs):
        np.testing.assert_array_equal(p.numpy(), c.reshape(-1, 2, 2))
    f = u.flatten(2, 3)
    assert f.shape[2] == 4
    for p, c in zip(f.unbind(), cs):
        np.testing.assert_array_equal(p.numpy(), c)
    with pytest.raises(NotImplementedError, match="ragged dim"):
        nt.flatten(1, 2)
    s = nt.unsqueeze(-1).squeeze(-1)
    assert s.ndim == 3
    for p, c in zip(s.unbind(), cs):
        np.testing.assert_array_equal(p.numpy(), c)
    assert nt.unsqueeze(2).squeeze().ndim == 3
    for perm in ((0, 1, 3, 2), (0, 2, 1, 3), (0, 3, 2, 1)):
        pm = u.permute(*perm)
        comp_perm = [d - 1 for d in perm[1:]]  # torch: component b is u[b].permute(perm[1:] - 1)
        for p, c in zip(pm.unbind(), cs):
            np.testing.assert_array_equal(p.numpy(), c.reshape(-1, 2, 2).transpose(comp_perm))
    with pytest.raises(NotImplementedError, match="batch dim"):
        u.permute(1, 0, 2, 3)
    vt = jag.tensor(v, requires_grad=True)
    assert gradcheck(lambda x: (build(kind, x).unflatten(-1, (2, 2)).permute(0, 3, 1, 2).unbind()[1] *
                                jag.tensor(np.arange(1.0, 7.0).reshape(2, 3, 1)[:, :3 if kind == "jagged" else 3])
                                ).sum(), (vt,))
    assert gradcheck(lambda x: build(kind, x).unsqueeze(-1).squeeze(-1).flatten(2, 2).square().sum(), (vt,))


# ---- 6. every ```python block of the READMEs runs verbatim ----------------------

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_README_BLOCKS = [(name, i, block) for name in ("python/README.md", "README.md")
                  for i, block in enumerate(re.findall(r"```python\n(.*?)```", (_ROOT / name).read_text(), re.S))]


def test_readmes_have_python_blocks():
    assert {name for name, _, _ in _README_BLOCKS} == {"python/README.md", "README.md"}


@pytest.mark.parametrize("name,index,block", _README_BLOCKS, ids=["%s[%d]" % (n, i) for n, i, _ in _README_BLOCKS])
def test_readme_block_runs(name, index, block, tmp_path):
    # each block on its own, in a fresh interpreter (it may define custom ops,
    # which are process-wide, and must not lean on names from another block),
    # in a directory of its own for the files it writes
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT / "python"), env.get("PYTHONPATH")) if p)
    r = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    assert r.returncode == 0, "%s block %d failed:\n%s" % (name, index, r.stderr[-3000:])


# ---- 4. narrow along the ragged dim ---------------------------------------------


@pytest.mark.parametrize("kind", ["jagged", "holes"])
def test_narrow_ragged_start_past_a_component_refused(kind):
    v = values_np(np.float64)
    cs = components_np(kind, v)
    nt = build(kind, jag.tensor(v))
    shortest = min(len(c) for c in cs)
    # rows [start, start + 2) of every component, the length clipped to the component
    for p, c in zip(nt.narrow(1, shortest, 2).unbind(), cs):
        np.testing.assert_array_equal(p.numpy(), c[shortest:shortest + 2])
    # dense narrow refuses a start past the dim's end; so does each component
    with pytest.raises(IndexError, match="past the end of component"):
        nt.narrow(1, shortest + 1, 1)
