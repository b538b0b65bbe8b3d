"""jag._C.OpFunction: ops called from Python without a Python frame (the
generated unary functions and methods, jag.mm / bmm / matmul / selu,
Tensor.transpose / unsqueeze). Each must behave as the Python function it
stands for (its __wrapped__): same results and gradients as _op, torch's
keyword names, Python's errors for bad calls, method binding."""
import copy
import gc
import inspect
import pickle
import sys
import weakref

import numpy as np
import pytest

import jag

OpFunction = jag._C.OpFunction


def test_the_fast_ops_are_op_functions():
    for f in [jag.relu, jag.sin, jag.mm, jag.bmm, jag.matmul, jag.selu]:
        assert isinstance(f, OpFunction), f
    for name in ["relu", "exp", "transpose", "unsqueeze"]:
        assert isinstance(jag.Tensor.__dict__[name], OpFunction), name


def test_results_are_those_of_the_op_and_of_numpy():
    a = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]], dtype=np.float32)
    b = np.array([[2.0, 1.0], [-1.0, 0.5], [4.0, -3.0]], dtype=np.float32)
    x, w = jag.tensor(a), jag.tensor(b)
    np.testing.assert_allclose(jag.mm(x, w).numpy(), a @ b, rtol=1e-6)
    np.testing.assert_array_equal(jag.mm(x, w).numpy(), jag._C._op("mm", x, w).numpy())
    np.testing.assert_array_equal(jag.relu(x).numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(jag.exp(x).numpy(), jag._C._op("exp", x).numpy())
    np.testing.assert_array_equal(x.transpose(0, 1).numpy(), a.T)
    assert x.unsqueeze(1).shape == (2, 1, 3)


def test_keywords_take_torchs_parameter_names():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(3, 2) - 2
    x, w = jag.tensor(a), jag.tensor(b)
    want = a @ b
    np.testing.assert_allclose(jag.mm(input=x, mat2=w).numpy(), want)
    np.testing.assert_allclose(jag.mm(mat2=w, input=x).numpy(), want)
    np.testing.assert_allclose(jag.mm(x, mat2=w).numpy(), want)
    np.testing.assert_allclose(jag.matmul(x, other=w).numpy(), want)
    np.testing.assert_array_equal(jag.relu(input=x).numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(x.transpose(dim0=1, dim1=0).numpy(), a.T)
    assert x.unsqueeze(dim=0).shape == (1, 2, 3)


@pytest.mark.parametrize("call, message", [
    (lambda x: jag.mm(x), "mm() missing required argument 'mat2' (pos 2)"),
    (lambda x: jag.mm(x, x, x), "mm() takes 2 positional arguments but 3 were given"),
    (lambda x: jag.mm(x, mat3=x), "mm() got an unexpected keyword argument 'mat3'"),
    (lambda x: jag.mm(x, input=x), "mm() got multiple values for argument 'input'"),
    (lambda x: jag.mm(mat2=x), "mm() missing required argument 'input' (pos 1)"),
    (lambda x: jag.relu(), "relu() missing required argument 'input' (pos 1)"),
    (lambda x: jag.relu(x, x), "relu() takes 1 positional argument but 2 were given"),
    (lambda x: jag.relu([1.0]), "jag.relu: expected a jag.Tensor, got list"),
    (lambda x: jag.sin(input=3.0), "jag.sin: expected a jag.Tensor, got float"),
    (lambda x: x.relu(x), "relu() takes 1 positional argument but 2 were given"),
])
def test_a_bad_call_is_a_type_error_and_changes_nothing(call, message):
    x = jag.tensor([[1.0, -2.0], [3.0, 4.0]])
    before = (x.numpy().copy(), sys.getrefcount(x))
    with pytest.raises(TypeError) as e:
        call(x)
    assert str(e.value) == message
    del e
    np.testing.assert_array_equal(x.numpy(), before[0])
    assert sys.getrefcount(x) == before[1]


def test_an_op_error_names_the_op():
    with pytest.raises(ValueError, match="mm"):
        jag.mm(jag.ones(2, 3), jag.ones(2, 3))


def test_binds_as_a_method():
    x = jag.tensor([-1.0, 2.0])
    bound = x.relu
    assert bound.__self__ is x
    np.testing.assert_array_equal(bound().numpy(), [0.0, 2.0])
    np.testing.assert_array_equal(jag.Tensor.relu(x).numpy(), [0.0, 2.0])
    assert jag.Tensor.relu is jag.Tensor.__dict__["relu"]  # unbound on the class, as a function


def test_signature_name_and_doc_are_the_wrapped_functions():
    assert list(inspect.signature(jag.mm).parameters) == ["input", "mat2"]
    assert list(inspect.signature(jag.relu).parameters) == ["input"]
    assert list(inspect.signature(jag.Tensor.transpose).parameters) == ["self", "dim0", "dim1"]
    assert jag.mm.__name__ == "mm" and jag.mm.__module__ == "jag"
    assert jag.Tensor.relu.__qualname__ == "Tensor.relu"
    assert ">>> jag.mm(" in jag.mm.__doc__
    assert jag.mm.__doc__ == jag.mm.__wrapped__.__doc__
    assert repr(jag.mm) == "<jag op function mm>"
    assert jag.mm.op_name == "mm" and jag.relu.unary == 1 and jag.mm.unary == 0
    assert inspect.isroutine(jag.mm)  # help() and doctest treat it as a function


def test_pickles_and_copies_by_reference_as_functions_do():
    for f in [jag.mm, jag.relu, jag.selu, jag.Tensor.relu, jag.Tensor.transpose]:
        assert pickle.loads(pickle.dumps(f)) is f
        assert copy.deepcopy(f) is f and copy.copy(f) is f
    # a module-like object holding op functions (a model's activation) round-trips
    holder = {"act": jag.gelu, "proj": jag.matmul}
    assert pickle.loads(pickle.dumps(holder)) == holder


def test_gradients_flow_as_through_the_op():
    a = np.array([[1.0, 2.0], [3.0, -1.0]], dtype=np.float32)
    b = np.array([[0.5, -1.0], [2.0, 1.0]], dtype=np.float32)
    x = jag.tensor(a, requires_grad=True)
    w = jag.tensor(b, requires_grad=True)
    jag.relu(jag.mm(input=x, mat2=w)).sum().backward()
    mask = (a @ b > 0).astype(np.float32)  # d relu(x w) / d x = (mask) w^T, / d w = x^T (mask)
    np.testing.assert_allclose(x.grad.numpy(), mask @ b.T, rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), a.T @ mask, rtol=1e-6)


def test_nested_arguments():
    nt = jag.nested.nested_tensor([jag.tensor([[1.0, -2.0]]), jag.tensor([[-3.0, 4.0], [5.0, -6.0]])],
                                  layout=jag.jagged)
    w = jag.tensor([[1.0], [2.0]])
    out = jag.mm(nt, w)
    want = [np.array([[1.0, -2.0]]) @ [[1.0], [2.0]], np.array([[-3.0, 4.0], [5.0, -6.0]]) @ [[1.0], [2.0]]]
    for got, exp in zip(out.unbind(), want):
        np.testing.assert_allclose(got.numpy(), exp)
    np.testing.assert_array_equal(nt.relu().values().numpy(), [[1.0, 0.0], [0.0, 4.0], [5.0, 0.0]])


def test_constructor_refuses_functions_it_cannot_stand_for():
    def with_default(input, other=1):
        return jag._op("add", input, other)

    def keyword_only(input, *, other):
        return input

    def two(a, b):
        return a

    def star(input, *rest):
        return input

    def star_star(input, **options):
        return input

    def nothing():
        return None

    for fn in [with_default, keyword_only, star, star_star, nothing]:
        with pytest.raises(ValueError, match="OpFunction"):
            OpFunction("add", fn, False)
    with pytest.raises(ValueError, match="exactly one when unary"):
        OpFunction("relu", two, True)
    with pytest.raises(AttributeError):
        OpFunction("relu", 3, True)  # not a function
    f = OpFunction("relu", two, False)
    assert f.__wrapped__ is two and f.__name__ == "two"


def test_collected_with_its_cycle():
    def fn(input):
        return jag._op("relu", input)

    f = OpFunction("relu", fn, True)
    fn.self_ref = f  # f -> fn (its __wrapped__) -> f
    alive = weakref.ref(fn)
    del f, fn
    gc.collect()
    assert alive() is None
