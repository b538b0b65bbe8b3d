"""PyTorch's NestedTensor wrapper-subclass prototype (a __torch_dispatch__
subclass with automatic dispatch to custom kernels), step by step in jag.

Run it after building (make build; make test-python builds the extension):

    .venv/bin/python examples/nested_subclass_walkthrough.py

Each step prints what it shows and checks the prototype's own assertions
(plus a per-component numpy reference where it has none).
"""
import os
import sys

import numpy as np

try:
    import jag
except ImportError:  # run from the source tree: the in-place built package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import jag
import jag.nn.functional as F
from jag.library import Library, register_nested_decomp


def show(title):
    print()
    print(title)
    print("-" * len(title))


# ---------------------------------------------------------------------------
show("0. a strided nested tensor: components that differ in any dim")
tensors = [
    jag.tensor([[1., 2.], [1., 2.]]),
    jag.tensor([[3., 4., 5.], [3., 4., 5.]]),
    jag.tensor([[6., 7.], [6., 7.]]),
]
nt = jag.nested.nested_tensor(tensors)  # layout=jag.strided, as torch.nested's default
print("nt.layout =", nt.layout, " nt.shape =", nt.shape, " (j0: the ragged dim's symbol)")
print("packed buffer:", nt.values().tolist())

# ---------------------------------------------------------------------------
show("1. pointwise ops stay on the packed buffer")
out = jag.sin(nt)
assert np.allclose(np.sin(nt.values().numpy()), out.values().numpy())
print("sin(nt): same nested sizes", out.shape, "; values == sin(buffer): OK")

# ---------------------------------------------------------------------------
show("2. bmm with a transpose (per component on the strided layout)")
out = nt.bmm(nt.transpose(-1, -2))
for got, t in zip(out.unbind(), tensors):
    a = t.numpy()
    assert np.allclose(got.numpy(), a @ a.T)
print("nt.bmm(nt.transpose(-1, -2)) components:", [tuple(c.shape) for c in out.unbind()], "== A @ A^T: OK")

# ---------------------------------------------------------------------------
show("3. a jagged nested tensor (B, j0, D): packed values + offsets")
tensors = [
    jag.tensor([[1., 2.], [1., 2.]]),
    jag.tensor([[3., 4.], [3., 4.], [3., 4.], [3., 4.]]),
    jag.tensor([[6., 7.], [3., 4.], [6., 7.]]),
]
cpp_nt = jag.nested.nested_tensor(tensors)  # strided first, as the prototype does
values = cpp_nt.values().reshape(9, 2)  # the packed buffer viewed as (sum L, D)
offsets = jag.tensor([0, 2, 6, 9])
nt = jag.nested.nested_tensor_from_jagged(values, offsets)
print("nt.shape =", nt.shape, " values", nt.values().shape, " offsets", nt.offsets().tolist())
same = jag.nested.nested_tensor(tensors, layout=jag.jagged)  # or directly
assert same.offsets().tolist() == offsets.tolist() and np.array_equal(same.values().numpy(), values.numpy())

t = jag.ones(2, 2)
y = F.silu(jag.mm(nt, t))  # one GEMM on the packed values, then pointwise
for got, comp in zip(y.unbind(), tensors):
    z = comp.numpy() @ np.ones((2, 2), np.float32)
    assert np.allclose(got.numpy(), z / (1 + np.exp(-z)), rtol=1e-6)
print("F.silu(jag.mm(nt, ones(2, 2))): jagged", y.shape, "; equals per-component numpy: OK")

# ---------------------------------------------------------------------------
show("4a. a custom op with numpy kernels and a nested decomposition")
lib = Library("custom_ns", "FRAGMENT")
lib.define("custom_op_fw(Tensor x) -> Tensor")
lib.define("custom_op_bw(Tensor grad_out, Tensor saved_x) -> Tensor")


def custom_op_fw(x):
    raise AssertionError("internal assert: we don't expect to reach here")


def custom_op_bw(gx, x):
    raise AssertionError("internal assert: we don't expect to reach here")


lib.impl("custom_op_fw", custom_op_fw, "CPU")
lib.impl("custom_op_bw", custom_op_bw, "CPU")


@register_nested_decomp(jag.ops.custom_ns.custom_op_fw.default)
def custom_op_fw_impl(x):
    return jag.nested.nested_tensor_from_jagged(jag.tensor(np.sin(x.values().numpy())), x.offsets())


@register_nested_decomp(jag.ops.custom_ns.custom_op_bw.default)
def custom_op_bw_impl(grad_out, saved_x):
    return jag.nested.nested_tensor_from_jagged(
        grad_out.values() * jag.tensor(np.cos(saved_x.values().numpy())), saved_x.offsets())


class CustomOp(jag.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return jag.ops.custom_ns.custom_op_fw(x)  # forward runs below autograd (grad mode off)

    @staticmethod
    def backward(ctx, gx):
        x, = ctx.saved_tensors
        return jag.ops.custom_ns.custom_op_bw(gx, x)


def custom_op_fw_autograd(x):
    return CustomOp.apply(x)


lib.impl("custom_op_fw", custom_op_fw_autograd, "Autograd")

nt = jag.nested.nested_tensor_from_jagged(values.clone(), offsets).requires_grad_()
out = jag.ops.custom_ns.custom_op_fw(nt)
assert np.allclose(np.sin(nt.values().detach().numpy()), out.values().detach().numpy())
print("custom_op_fw(nt): nested", out.shape, "requires_grad =", out.requires_grad,
      "; values == sin(nt.values): OK (the CPU kernel was never reached)")

# ---------------------------------------------------------------------------
show("4b. autograd through the custom op and the values bridge")


class ViewBufferFromJagged(jag.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        assert x.is_nested and x.layout is jag.jagged
        ctx.save_for_backward(x.offsets())
        return x.values()  # jagged -> plain

    @staticmethod
    def backward(ctx, gO):
        offsets, = ctx.saved_tensors
        return jag.nested.nested_tensor_from_jagged(gO, offsets)  # plain -> jagged


buffer = ViewBufferFromJagged.apply(out)
buffer.sum().backward()
assert np.allclose(np.cos(nt.values().detach().numpy()), nt.grad.values().numpy())
assert np.array_equal(nt.offsets().numpy(), nt.grad.offsets().numpy())
print("buffer.sum().backward(): nt.grad is nested", nt.grad.shape, "; nt.grad.values == cos(nt.values): OK")
print("nt.grad.offsets == nt.offsets:", nt.grad.offsets().tolist())

# ---------------------------------------------------------------------------
show("5. a Meta kernel: shapes and dtypes without data (what compiling needs)")


def custom_op_fw_meta(x):
    return jag.sin(x)  # on meta tensors ops only infer shapes and dtypes


lib.impl("custom_op_fw", custom_op_fw_meta, "Meta")
m = jag.ops.custom_ns.custom_op_fw(jag.empty(9, 2, device="meta"))
assert m.is_meta and m.shape == (9, 2) and m.dtype is jag.float32
print("custom_op_fw(meta f32[9, 2]) ->", repr(m))

print()
print("all steps passed")
