"""Random (mostly wrong) arguments to every binding: each call must either
work or raise a Python exception, never crash the interpreter. (Also run
under AddressSanitizer + UBSan by hand with an ASan build of libjag.)"""
import random

import numpy as np

import jag
from jag import _C

ITERS = 20000


def _fuzz():
    random.seed(0)
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
    st = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 4)])
    pool = [None, 0, 1, -1, 2, 7, 2**40, -2**63, 2**64, 0.5, float("nan"), float("inf"), True, "x", b"ab", [], [0], [1, 2], [-1],
            [2**62, 2**62], (3, 1), [jag.ones(2)], [1, "a"], object(), jag.ones(2, 3), jag.zeros(()), jag.zeros(0, 3),
            jag.ones(3, dtype=jag.int64), jag.ones(2, dtype=jag.bool), nt, st, jag.ones(2, requires_grad=True),
            jag.ones(4, 4).transpose(0, 1), jag.tensor([0, 2, 3]), np.ones(3)]
    ops = ["sin", "add", "sub", "mul", "div", "pow", "where", "sum", "mean", "amax", "var", "max_dim", "argmax", "mm", "bmm",
           "matmul", "linear", "softmax", "layer_norm", "rms_norm", "index_select", "gather", "embedding", "cat", "view",
           "transpose", "permute", "narrow", "select", "unsqueeze", "squeeze", "expand", "clone", "to_dtype", "values",
           "nested_from_jagged", "to_padded", "from_padded", "nope"]
    n = 0
    for it in range(ITERS):
        name = random.choice(ops)
        args = [random.choice(pool) for _ in range(random.randint(0, 5))]
        try:
            _C._op(name, *args); n += 1
        except (TypeError, ValueError, IndexError, NotImplementedError, RuntimeError, OverflowError, MemoryError):
            pass
    funcs = [lambda a, b: _C._factory(random.choice(["zeros", "full", "rand", "x"]), a, b),
             lambda a, b: _C._arange(a, b, 1.0, 0), lambda a, b: _C._from_buffer(a, b, 0),
             lambda a, b: _C._nested_from_list(a, b), lambda a, b: _C._nested_to_padded(a, 0.0, b),
             lambda a, b: _C._like("full", a, b), lambda a, b: _C._promote_types(a, b), lambda a, b: _C._gradcheck(a, b, 1e-6, 1e-5, 1e-3),
             lambda a, b: a[b], lambda a, b: a.__setitem__(b, 1.0), lambda a, b: a._select(b, b), lambda a, b: a._narrow(0, b, b),
             lambda a, b: a._reshape(b), lambda a, b: a.backward(b), lambda a, b: a.copy_(b), lambda a, b: a.fill_(b),
             lambda a, b: a.to_layout(b), lambda a, b: a._to_layout(b), lambda a, b: np.asarray(a), lambda a, b: a.item(),
             lambda a, b: repr(a), lambda a, b: a.unbind(), lambda a, b: a.values(), lambda a, b: a.lengths(),
             lambda a, b: setattr(a, "requires_grad", b), lambda a, b: a.grad, lambda a, b: a.detach(), lambda a, b: a @ b,
             lambda a, b: a + b, lambda a, b: a == b, lambda a, b: jag.nested.nested_tensor_from_jagged(a, b),
             lambda a, b: jag.nested.to_padded_tensor(a, 0.0, b), lambda a, b: jag.nested.nested_tensor_from_padded(a, b),
             lambda a, b: jag.tensor(a, dtype=b), lambda a, b: jag.zeros(a, dtype=b), lambda a, b: a.shape, lambda a, b: a.size(b),
             # interop, custom ops, Functions, factories
             lambda a, b: _C._to_dlpack(a, b, b), lambda a, b: _C._from_dlpack(a), lambda a, b: jag.from_dlpack(a),
             lambda a, b: jag.from_dlpack(a.__dlpack__(max_version=b)), lambda a, b: a.__dlpack__(stream=b),
             lambda a, b: memoryview(a).tolist(), lambda a, b: np.from_dlpack(a), lambda a, b: _C._op_impl(a, "CPU", b),
             lambda a, b: _C._register_decomp("nested", a, b), lambda a, b: _C._register_decomp(a, "sin", b),
             lambda a, b: _C._function_record(a, b, b), lambda a, b: _C._op_info(a), lambda a, b: _C._meta(a, b),
             lambda a, b: _C._random("randn", a, b, 0.0, 1.0, _C._Generator(0)), lambda a, b: jag.rand(3, generator=a, seed=b),
             lambda a, b: jag.empty(a, device=b), lambda a, b: jag.ops.aten.sin(a, b),
             lambda a, b: _C._dropout(a, 0.5, True, b), lambda a, b: _C._clamp(a, b, b), lambda a, b: _C._cross_entropy(a, b),
             lambda a, b: _C._mse_loss(a, b), lambda a, b: _C._random_like("rand", a, b),
             lambda a, b: jag.nn.functional.scaled_dot_product_attention(a, b, b)]
    for it in range(ITERS):
        f = random.choice(funcs)
        try:
            f(random.choice(pool), random.choice(pool)); n += 1
        except (TypeError, ValueError, IndexError, NotImplementedError, RuntimeError, OverflowError, MemoryError, AttributeError, KeyError,
                BufferError):
            pass
    return n


def test_random_arguments_never_crash():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = _fuzz()
    assert n > 0
