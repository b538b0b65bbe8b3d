"""The functions and Tensor methods jag/__init__.py makes from the op table
(jag._C._op_rows()), for type checkers. Written by scripts/gen_stubs.py;
run it again after adding an op row instead of editing this file."""
from jag import Tensor

__all__ = [
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "silu",
    "gelu", "gelu_tanh", "reciprocal", "square", "sign", "floor", "ceil", "round", "trunc", "log1p",
    "atan", "sinh", "cosh", "asinh", "expm1", "erf", "erfc", "hardswish", "hardsigmoid", "mish",
    "logsigmoid",
]


def neg(input: Tensor) -> Tensor:
    """jag.neg(input) -> Tensor: -x, elementwise (dense or nested).

Example::

    >>> jag.neg(jag.tensor([-1.5, 0.5, 2.0]))
    tensor([1.5000, -0.5000, -2.0000], dtype=float32, size=[3])
"""
    ...

def abs(input: Tensor) -> Tensor:
    """jag.abs(input) -> Tensor: |x|, elementwise (dense or nested).

Example::

    >>> jag.abs(jag.tensor([-1.5, 0.5, 2.0]))
    tensor([1.5000, 0.5000, 2.0000], dtype=float32, size=[3])
"""
    ...

def exp(input: Tensor) -> Tensor:
    """jag.exp(input) -> Tensor: e to the x, elementwise (dense or nested).

Example::

    >>> jag.exp(jag.tensor([0.0, 1.0]))
    tensor([1.0000, 2.7183], dtype=float32, size=[2])
    >>> nt = jag.nested.nested_tensor([[0.0, 1.0], [2.0]], layout=jag.jagged)
    >>> jag.exp(nt).values()  # elementwise ops keep the raggedness
    tensor([1.0000, 2.7183, 7.3891], dtype=float32, size=[3])
"""
    ...

def log(input: Tensor) -> Tensor:
    """jag.log(input) -> Tensor: natural logarithm, elementwise (dense or nested).

Example::

    >>> jag.log(jag.tensor([1.0, 4.0]))
    tensor([0.0000, 1.3863], dtype=float32, size=[2])
"""
    ...

def sqrt(input: Tensor) -> Tensor:
    """jag.sqrt(input) -> Tensor: square root, elementwise (dense or nested).

Example::

    >>> jag.sqrt(jag.tensor([1.0, 4.0]))
    tensor([1.0000, 2.0000], dtype=float32, size=[2])
"""
    ...

def rsqrt(input: Tensor) -> Tensor:
    """jag.rsqrt(input) -> Tensor: 1 / sqrt(x), elementwise (dense or nested).

Example::

    >>> jag.rsqrt(jag.tensor([1.0, 4.0]))
    tensor([1.0000, 0.5000], dtype=float32, size=[2])
"""
    ...

def sin(input: Tensor) -> Tensor:
    """jag.sin(input) -> Tensor: sine, elementwise (dense or nested).

Example::

    >>> jag.sin(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.8415, 0.0000, 0.8415], dtype=float32, size=[3])
"""
    ...

def cos(input: Tensor) -> Tensor:
    """jag.cos(input) -> Tensor: cosine, elementwise (dense or nested).

Example::

    >>> jag.cos(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([0.5403, 1.0000, 0.5403], dtype=float32, size=[3])
"""
    ...

def tanh(input: Tensor) -> Tensor:
    """jag.tanh(input) -> Tensor: hyperbolic tangent, elementwise (dense or nested).

Example::

    >>> jag.tanh(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.7616, 0.0000, 0.7616], dtype=float32, size=[3])
"""
    ...

def sigmoid(input: Tensor) -> Tensor:
    """jag.sigmoid(input) -> Tensor: 1 / (1 + exp(-x)), elementwise (dense or nested).

Example::

    >>> jag.sigmoid(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([0.2689, 0.5000, 0.7311], dtype=float32, size=[3])
"""
    ...

def relu(input: Tensor) -> Tensor:
    """jag.relu(input) -> Tensor: max(x, 0) (NaN stays NaN), elementwise (dense or nested).

Example::

    >>> jag.relu(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([0.0000, 0.0000, 1.0000], dtype=float32, size=[3])
"""
    ...

def silu(input: Tensor) -> Tensor:
    """jag.silu(input) -> Tensor: x * sigmoid(x), elementwise (dense or nested).

Example::

    >>> jag.silu(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.2689, 0.0000, 0.7311], dtype=float32, size=[3])
"""
    ...

def gelu(input: Tensor) -> Tensor:
    """jag.gelu(input) -> Tensor: x * Phi(x), Phi the standard normal CDF, elementwise (dense or nested).

Example::

    >>> jag.gelu(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587, 0.0000, 0.8413], dtype=float32, size=[3])
"""
    ...

def gelu_tanh(input: Tensor) -> Tensor:
    """jag.gelu_tanh(input) -> Tensor: gelu's tanh approximation, elementwise (dense or nested).

Example::

    >>> jag.gelu_tanh(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1588, 0.0000, 0.8412], dtype=float32, size=[3])
"""
    ...

def reciprocal(input: Tensor) -> Tensor:
    """jag.reciprocal(input) -> Tensor: 1 / x, elementwise (dense or nested).

Example::

    >>> jag.reciprocal(jag.tensor([1.0, 4.0]))
    tensor([1.0000, 0.2500], dtype=float32, size=[2])
"""
    ...

def square(input: Tensor) -> Tensor:
    """jag.square(input) -> Tensor: x * x, elementwise (dense or nested).

Example::

    >>> jag.square(jag.tensor([-2.0, 3.0]))
    tensor([4.0000, 9.0000], dtype=float32, size=[2])
"""
    ...

def sign(input: Tensor) -> Tensor:
    """jag.sign(input) -> Tensor: -1, 0 or 1 (NaN stays NaN), elementwise (dense or nested).

Example::

    >>> jag.sign(jag.tensor([-1.5, 0.5, 2.0]))
    tensor([-1.0000, 1.0000, 1.0000], dtype=float32, size=[3])
"""
    ...

def floor(input: Tensor) -> Tensor:
    """jag.floor(input) -> Tensor: largest integer <= x, elementwise (dense or nested).

Example::

    >>> jag.floor(jag.tensor([-1.5, 0.5, 2.0]))
    tensor([-2.0000, 0.0000, 2.0000], dtype=float32, size=[3])
"""
    ...

def ceil(input: Tensor) -> Tensor:
    """jag.ceil(input) -> Tensor: smallest integer >= x, elementwise (dense or nested).

Example::

    >>> jag.ceil(jag.tensor([-1.5, 0.5, 2.0]))
    tensor([-1.0000, 1.0000, 2.0000], dtype=float32, size=[3])
"""
    ...

def round(input: Tensor) -> Tensor:
    """jag.round(input) -> Tensor: nearest integer, halves to even, elementwise (dense or nested).

Example::

    >>> jag.round(jag.tensor([0.5, 1.5, 2.6]))
    tensor([0.0000, 2.0000, 3.0000], dtype=float32, size=[3])
"""
    ...

def trunc(input: Tensor) -> Tensor:
    """jag.trunc(input) -> Tensor: integer part, elementwise (dense or nested).

Example::

    >>> jag.trunc(jag.tensor([-1.5, 0.5, 2.0]))
    tensor([-1.0000, 0.0000, 2.0000], dtype=float32, size=[3])
"""
    ...

def log1p(input: Tensor) -> Tensor:
    """jag.log1p(input) -> Tensor: log(1 + x), exact near 0, elementwise (dense or nested).

Example::

    >>> jag.log1p(jag.tensor([-0.5, 0.0, 1.0]))
    tensor([-0.6931, 0.0000, 0.6931], dtype=float32, size=[3])
"""
    ...

def atan(input: Tensor) -> Tensor:
    """jag.atan(input) -> Tensor: arctangent, in (-pi/2, pi/2), elementwise (dense or nested).

Example::

    >>> jag.atan(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.7854, 0.0000, 0.7854], dtype=float32, size=[3])
"""
    ...

def sinh(input: Tensor) -> Tensor:
    """jag.sinh(input) -> Tensor: hyperbolic sine, (e^x - e^-x) / 2, elementwise (dense or nested).

Example::

    >>> jag.sinh(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-1.1752, 0.0000, 1.1752], dtype=float32, size=[3])
"""
    ...

def cosh(input: Tensor) -> Tensor:
    """jag.cosh(input) -> Tensor: hyperbolic cosine, (e^x + e^-x) / 2, elementwise (dense or nested).

Example::

    >>> jag.cosh(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([1.5431, 1.0000, 1.5431], dtype=float32, size=[3])
"""
    ...

def asinh(input: Tensor) -> Tensor:
    """jag.asinh(input) -> Tensor: inverse hyperbolic sine, log(x + sqrt(x^2 + 1)), elementwise (dense or nested).

Example::

    >>> jag.asinh(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.8814, 0.0000, 0.8814], dtype=float32, size=[3])
"""
    ...

def expm1(input: Tensor) -> Tensor:
    """jag.expm1(input) -> Tensor: exp(x) - 1, exact near 0, elementwise (dense or nested).

Example::

    >>> jag.expm1(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.6321, 0.0000, 1.7183], dtype=float32, size=[3])
"""
    ...

def erf(input: Tensor) -> Tensor:
    """jag.erf(input) -> Tensor: error function, elementwise (dense or nested).

Example::

    >>> jag.erf(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.8427, 0.0000, 0.8427], dtype=float32, size=[3])
"""
    ...

def erfc(input: Tensor) -> Tensor:
    """jag.erfc(input) -> Tensor: 1 - erf(x), exact for large x, elementwise (dense or nested).

Example::

    >>> jag.erfc(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([1.8427, 1.0000, 0.1573], dtype=float32, size=[3])
"""
    ...

def hardswish(input: Tensor) -> Tensor:
    """jag.hardswish(input) -> Tensor: x * relu6(x + 3) / 6, elementwise (dense or nested).

Example::

    >>> jag.hardswish(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.3333, 0.0000, 0.6667], dtype=float32, size=[3])
"""
    ...

def hardsigmoid(input: Tensor) -> Tensor:
    """jag.hardsigmoid(input) -> Tensor: relu6(x + 3) / 6, elementwise (dense or nested).

Example::

    >>> jag.hardsigmoid(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([0.3333, 0.5000, 0.6667], dtype=float32, size=[3])
"""
    ...

def mish(input: Tensor) -> Tensor:
    """jag.mish(input) -> Tensor: x * tanh(softplus(x)), elementwise (dense or nested).

Example::

    >>> jag.mish(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.3034, 0.0000, 0.8651], dtype=float32, size=[3])
"""
    ...

def logsigmoid(input: Tensor) -> Tensor:
    """jag.logsigmoid(input) -> Tensor: log(sigmoid(x)), stable, elementwise (dense or nested).

Example::

    >>> jag.logsigmoid(jag.tensor([-1.0, 0.0, 1.0]))
    tensor([-1.3133, -0.6931, -0.3133], dtype=float32, size=[3])
"""
    ...


class _GeneratedTensorMethods:
    """The generated Tensor methods; jag.Tensor derives from it for type checkers only."""

    def neg(self) -> Tensor:
        """Tensor.neg() -> Tensor: -x, elementwise; as jag.neg(self).

Example::

    >>> x = jag.tensor([-1.5, 0.5, 2.0])
    >>> x.neg()
    tensor([1.5000, -0.5000, -2.0000], dtype=float32, size=[3])
"""
        ...

    def abs(self) -> Tensor:
        """Tensor.abs() -> Tensor: |x|, elementwise; as jag.abs(self).

Example::

    >>> x = jag.tensor([-1.5, 0.5, 2.0])
    >>> x.abs()
    tensor([1.5000, 0.5000, 2.0000], dtype=float32, size=[3])
"""
        ...

    def exp(self) -> Tensor:
        """Tensor.exp() -> Tensor: e to the x, elementwise; as jag.exp(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.exp()
    tensor([0.3679, 1.0000, 2.7183], dtype=float32, size=[3])
"""
        ...

    def log(self) -> Tensor:
        """Tensor.log() -> Tensor: natural logarithm, elementwise; as jag.log(self).

Example::

    >>> x = jag.tensor([1.0, 4.0])
    >>> x.log()
    tensor([0.0000, 1.3863], dtype=float32, size=[2])
"""
        ...

    def sqrt(self) -> Tensor:
        """Tensor.sqrt() -> Tensor: square root, elementwise; as jag.sqrt(self).

Example::

    >>> x = jag.tensor([1.0, 4.0])
    >>> x.sqrt()
    tensor([1.0000, 2.0000], dtype=float32, size=[2])
"""
        ...

    def rsqrt(self) -> Tensor:
        """Tensor.rsqrt() -> Tensor: 1 / sqrt(x), elementwise; as jag.rsqrt(self).

Example::

    >>> x = jag.tensor([1.0, 4.0])
    >>> x.rsqrt()
    tensor([1.0000, 0.5000], dtype=float32, size=[2])
"""
        ...

    def sin(self) -> Tensor:
        """Tensor.sin() -> Tensor: sine, elementwise; as jag.sin(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.sin()
    tensor([-0.8415, 0.0000, 0.8415], dtype=float32, size=[3])
"""
        ...

    def cos(self) -> Tensor:
        """Tensor.cos() -> Tensor: cosine, elementwise; as jag.cos(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.cos()
    tensor([0.5403, 1.0000, 0.5403], dtype=float32, size=[3])
"""
        ...

    def tanh(self) -> Tensor:
        """Tensor.tanh() -> Tensor: hyperbolic tangent, elementwise; as jag.tanh(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.tanh()
    tensor([-0.7616, 0.0000, 0.7616], dtype=float32, size=[3])
"""
        ...

    def sigmoid(self) -> Tensor:
        """Tensor.sigmoid() -> Tensor: 1 / (1 + exp(-x)), elementwise; as jag.sigmoid(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.sigmoid()
    tensor([0.2689, 0.5000, 0.7311], dtype=float32, size=[3])
"""
        ...

    def relu(self) -> Tensor:
        """Tensor.relu() -> Tensor: max(x, 0) (NaN stays NaN), elementwise; as jag.relu(self).

Example::

    >>> jag.tensor([-1.0, 0.0, 2.0]).relu()
    tensor([0.0000, 0.0000, 2.0000], dtype=float32, size=[3])
    >>> nt = jag.nested.nested_tensor([[-1.0, 2.0], [3.0]], layout=jag.jagged)
    >>> [c.tolist() for c in nt.relu().unbind()]
    [[0.0, 2.0], [3.0]]
"""
        ...

    def silu(self) -> Tensor:
        """Tensor.silu() -> Tensor: x * sigmoid(x), elementwise; as jag.silu(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.silu()
    tensor([-0.2689, 0.0000, 0.7311], dtype=float32, size=[3])
"""
        ...

    def gelu(self) -> Tensor:
        """Tensor.gelu() -> Tensor: x * Phi(x), Phi the standard normal CDF, elementwise; as jag.gelu(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.gelu()
    tensor([-0.1587, 0.0000, 0.8413], dtype=float32, size=[3])
"""
        ...

    def gelu_tanh(self) -> Tensor:
        """Tensor.gelu_tanh() -> Tensor: gelu's tanh approximation, elementwise; as jag.gelu_tanh(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.gelu_tanh()
    tensor([-0.1588, 0.0000, 0.8412], dtype=float32, size=[3])
"""
        ...

    def reciprocal(self) -> Tensor:
        """Tensor.reciprocal() -> Tensor: 1 / x, elementwise; as jag.reciprocal(self).

Example::

    >>> x = jag.tensor([1.0, 4.0])
    >>> x.reciprocal()
    tensor([1.0000, 0.2500], dtype=float32, size=[2])
"""
        ...

    def square(self) -> Tensor:
        """Tensor.square() -> Tensor: x * x, elementwise; as jag.square(self).

Example::

    >>> x = jag.tensor([-2.0, 3.0])
    >>> x.square()
    tensor([4.0000, 9.0000], dtype=float32, size=[2])
"""
        ...

    def sign(self) -> Tensor:
        """Tensor.sign() -> Tensor: -1, 0 or 1 (NaN stays NaN), elementwise; as jag.sign(self).

Example::

    >>> x = jag.tensor([-1.5, 0.5, 2.0])
    >>> x.sign()
    tensor([-1.0000, 1.0000, 1.0000], dtype=float32, size=[3])
"""
        ...

    def floor(self) -> Tensor:
        """Tensor.floor() -> Tensor: largest integer <= x, elementwise; as jag.floor(self).

Example::

    >>> x = jag.tensor([-1.5, 0.5, 2.0])
    >>> x.floor()
    tensor([-2.0000, 0.0000, 2.0000], dtype=float32, size=[3])
"""
        ...

    def ceil(self) -> Tensor:
        """Tensor.ceil() -> Tensor: smallest integer >= x, elementwise; as jag.ceil(self).

Example::

    >>> x = jag.tensor([-1.5, 0.5, 2.0])
    >>> x.ceil()
    tensor([-1.0000, 1.0000, 2.0000], dtype=float32, size=[3])
"""
        ...

    def round(self) -> Tensor:
        """Tensor.round() -> Tensor: nearest integer, halves to even, elementwise; as jag.round(self).

Example::

    >>> x = jag.tensor([0.5, 1.5, 2.6])
    >>> x.round()
    tensor([0.0000, 2.0000, 3.0000], dtype=float32, size=[3])
"""
        ...

    def trunc(self) -> Tensor:
        """Tensor.trunc() -> Tensor: integer part, elementwise; as jag.trunc(self).

Example::

    >>> x = jag.tensor([-1.5, 0.5, 2.0])
    >>> x.trunc()
    tensor([-1.0000, 0.0000, 2.0000], dtype=float32, size=[3])
"""
        ...

    def log1p(self) -> Tensor:
        """Tensor.log1p() -> Tensor: log(1 + x), exact near 0, elementwise; as jag.log1p(self).

Example::

    >>> x = jag.tensor([-0.5, 0.0, 1.0])
    >>> x.log1p()
    tensor([-0.6931, 0.0000, 0.6931], dtype=float32, size=[3])
"""
        ...

    def atan(self) -> Tensor:
        """Tensor.atan() -> Tensor: arctangent, in (-pi/2, pi/2), elementwise; as jag.atan(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.atan()
    tensor([-0.7854, 0.0000, 0.7854], dtype=float32, size=[3])
"""
        ...

    def sinh(self) -> Tensor:
        """Tensor.sinh() -> Tensor: hyperbolic sine, (e^x - e^-x) / 2, elementwise; as jag.sinh(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.sinh()
    tensor([-1.1752, 0.0000, 1.1752], dtype=float32, size=[3])
"""
        ...

    def cosh(self) -> Tensor:
        """Tensor.cosh() -> Tensor: hyperbolic cosine, (e^x + e^-x) / 2, elementwise; as jag.cosh(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.cosh()
    tensor([1.5431, 1.0000, 1.5431], dtype=float32, size=[3])
"""
        ...

    def asinh(self) -> Tensor:
        """Tensor.asinh() -> Tensor: inverse hyperbolic sine, log(x + sqrt(x^2 + 1)), elementwise; as jag.asinh(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.asinh()
    tensor([-0.8814, 0.0000, 0.8814], dtype=float32, size=[3])
"""
        ...

    def expm1(self) -> Tensor:
        """Tensor.expm1() -> Tensor: exp(x) - 1, exact near 0, elementwise; as jag.expm1(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.expm1()
    tensor([-0.6321, 0.0000, 1.7183], dtype=float32, size=[3])
"""
        ...

    def erf(self) -> Tensor:
        """Tensor.erf() -> Tensor: error function, elementwise; as jag.erf(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.erf()
    tensor([-0.8427, 0.0000, 0.8427], dtype=float32, size=[3])
"""
        ...

    def erfc(self) -> Tensor:
        """Tensor.erfc() -> Tensor: 1 - erf(x), exact for large x, elementwise; as jag.erfc(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.erfc()
    tensor([1.8427, 1.0000, 0.1573], dtype=float32, size=[3])
"""
        ...

    def selu(self) -> Tensor:
        """Tensor.selu() -> Tensor: scaled exponential linear unit, elementwise; as jag.selu(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.selu()
    tensor([-1.1113, 0.0000, 1.0507], dtype=float32, size=[3])
"""
        ...

    def hardswish(self) -> Tensor:
        """Tensor.hardswish() -> Tensor: x * relu6(x + 3) / 6, elementwise; as jag.hardswish(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.hardswish()
    tensor([-0.3333, 0.0000, 0.6667], dtype=float32, size=[3])
"""
        ...

    def hardsigmoid(self) -> Tensor:
        """Tensor.hardsigmoid() -> Tensor: relu6(x + 3) / 6, elementwise; as jag.hardsigmoid(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.hardsigmoid()
    tensor([0.3333, 0.5000, 0.6667], dtype=float32, size=[3])
"""
        ...

    def mish(self) -> Tensor:
        """Tensor.mish() -> Tensor: x * tanh(softplus(x)), elementwise; as jag.mish(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.mish()
    tensor([-0.3034, 0.0000, 0.8651], dtype=float32, size=[3])
"""
        ...

    def logsigmoid(self) -> Tensor:
        """Tensor.logsigmoid() -> Tensor: log(sigmoid(x)), stable, elementwise; as jag.logsigmoid(self).

Example::

    >>> x = jag.tensor([-1.0, 0.0, 1.0])
    >>> x.logsigmoid()
    tensor([-1.3133, -0.6931, -0.3133], dtype=float32, size=[3])
"""
        ...
