"""The package's unary ops come from the op table (src/dispatch/ops.def):
every POINTWISE row of schema "name(Tensor x) -> Tensor" is jag.<name> and
Tensor.<name>, documented by its row, and computes what the row's op
computes (checked against numpy's formula for a few, elementwise)."""
import inspect
import math

import numpy as np
import pytest

import jag

ROWS = jag._C._op_rows()
UNARY = [r for r in ROWS if r[3] & 1 and r[1] == "%s(Tensor x) -> Tensor" % r[0]]


def test_rows_carry_schema_and_doc():
    names = [r[0] for r in ROWS]
    assert len(names) == len(set(names))
    for name, schema, doc, _tags in ROWS:
        assert schema.startswith(name + "(") and "->" in schema
        assert doc, name
    # every op of torch's elementwise set that jag has is a row
    for n in ["sin", "exp", "log1p", "erf", "relu", "sigmoid", "floor"]:
        assert n in [r[0] for r in UNARY]


@pytest.mark.parametrize("row", UNARY, ids=[r[0] for r in UNARY])
def test_unary_row_is_a_function_and_a_method(row):
    name, _schema, doc, _tags = row
    f = getattr(jag, name)
    assert callable(f) and f.__doc__
    # generated from the row, unless written by hand (selu with torch's
    # constants, clone with memory_format): then the row's doc is not theirs
    # (an OpFunction: the Python function it stands for is its __wrapped__)
    generated = inspect.unwrap(f).__code__ is inspect.unwrap(jag._make_unary("probe", "")).__code__
    if generated:
        assert doc in f.__doc__
        assert doc in getattr(jag.Tensor, name).__doc__
    x = jag.tensor([[0.25, -1.5, 2.0], [0.5, 3.0, -0.75]])
    want = jag._C._op(name, x).numpy()
    np.testing.assert_array_equal(f(x).numpy(), want)
    np.testing.assert_array_equal(getattr(x, name)().numpy(), want)
    # nested: the same op on each component
    nt = jag.nested.nested_tensor([[0.25, -1.5, 2.0], [0.5]])
    got = f(nt)
    for comp, src in zip(got.unbind(), nt.unbind()):
        np.testing.assert_array_equal(comp.numpy(), f(src).numpy())


@pytest.mark.parametrize("name,formula", [
    ("sin", np.sin), ("exp", np.exp), ("log1p", np.log1p), ("sqrt", np.sqrt),
    ("erf", np.vectorize(math.erf)), ("floor", np.floor), ("square", np.square), ("atan", np.arctan),
])
def test_generated_functions_compute_the_formula(name, formula):
    v = np.array([0.25, 1.5, 2.0, 3.75], dtype=np.float64)
    got = getattr(jag, name)(jag.tensor(v)).numpy()
    np.testing.assert_allclose(got, formula(v), rtol=1e-12, atol=0)


def test_non_tensor_argument_is_refused():
    with pytest.raises(TypeError, match="jag.sin: expected a jag.Tensor, got list"):
        jag.sin([1.0, 2.0])


def test_functions_without_a_hand_written_definition_are_generated():
    probe = inspect.unwrap(jag._make_unary("probe", "")).__code__
    generated = {r[0] for r in UNARY if inspect.unwrap(getattr(jag, r[0])).__code__ is probe}
    assert {"sin", "log1p", "erf", "hardswish", "mish", "floor"} <= generated
    assert {r[0] for r in UNARY} - generated == {"clone", "selu"}
