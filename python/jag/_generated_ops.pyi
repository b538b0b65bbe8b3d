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
    """jag.neg(input) -> Tensor: -x, elementwise (dense or nested)."""
    ...

def abs(input: Tensor) -> Tensor:
    """jag.abs(input) -> Tensor: |x|, elementwise (dense or nested)."""
    ...

def exp(input: Tensor) -> Tensor:
    """jag.exp(input) -> Tensor: e to the x, elementwise (dense or nested)."""
    ...

def log(input: Tensor) -> Tensor:
    """jag.log(input) -> Tensor: natural logarithm, elementwise (dense or nested)."""
    ...

def sqrt(input: Tensor) -> Tensor:
    """jag.sqrt(input) -> Tensor: square root, elementwise (dense or nested)."""
    ...

def rsqrt(input: Tensor) -> Tensor:
    """jag.rsqrt(input) -> Tensor: 1 / sqrt(x), elementwise (dense or nested)."""
    ...

def sin(input: Tensor) -> Tensor:
    """jag.sin(input) -> Tensor: sine, elementwise (dense or nested)."""
    ...

def cos(input: Tensor) -> Tensor:
    """jag.cos(input) -> Tensor: cosine, elementwise (dense or nested)."""
    ...

def tanh(input: Tensor) -> Tensor:
    """jag.tanh(input) -> Tensor: hyperbolic tangent, elementwise (dense or nested)."""
    ...

def sigmoid(input: Tensor) -> Tensor:
    """jag.sigmoid(input) -> Tensor: 1 / (1 + exp(-x)), elementwise (dense or nested)."""
    ...

def relu(input: Tensor) -> Tensor:
    """jag.relu(input) -> Tensor: max(x, 0) (NaN stays NaN), elementwise (dense or nested)."""
    ...

def silu(input: Tensor) -> Tensor:
    """jag.silu(input) -> Tensor: x * sigmoid(x), elementwise (dense or nested)."""
    ...

def gelu(input: Tensor) -> Tensor:
    """jag.gelu(input) -> Tensor: x * Phi(x), Phi the standard normal CDF, elementwise (dense or nested)."""
    ...

def gelu_tanh(input: Tensor) -> Tensor:
    """jag.gelu_tanh(input) -> Tensor: gelu's tanh approximation, elementwise (dense or nested)."""
    ...

def reciprocal(input: Tensor) -> Tensor:
    """jag.reciprocal(input) -> Tensor: 1 / x, elementwise (dense or nested)."""
    ...

def square(input: Tensor) -> Tensor:
    """jag.square(input) -> Tensor: x * x, elementwise (dense or nested)."""
    ...

def sign(input: Tensor) -> Tensor:
    """jag.sign(input) -> Tensor: -1, 0 or 1 (NaN stays NaN), elementwise (dense or nested)."""
    ...

def floor(input: Tensor) -> Tensor:
    """jag.floor(input) -> Tensor: largest integer <= x, elementwise (dense or nested)."""
    ...

def ceil(input: Tensor) -> Tensor:
    """jag.ceil(input) -> Tensor: smallest integer >= x, elementwise (dense or nested)."""
    ...

def round(input: Tensor) -> Tensor:
    """jag.round(input) -> Tensor: nearest integer, halves to even, elementwise (dense or nested)."""
    ...

def trunc(input: Tensor) -> Tensor:
    """jag.trunc(input) -> Tensor: integer part, elementwise (dense or nested)."""
    ...

def log1p(input: Tensor) -> Tensor:
    """jag.log1p(input) -> Tensor: log(1 + x), exact near 0, elementwise (dense or nested)."""
    ...

def atan(input: Tensor) -> Tensor:
    """jag.atan(input) -> Tensor: arctangent, in (-pi/2, pi/2), elementwise (dense or nested)."""
    ...

def sinh(input: Tensor) -> Tensor:
    """jag.sinh(input) -> Tensor: hyperbolic sine, (e^x - e^-x) / 2, elementwise (dense or nested)."""
    ...

def cosh(input: Tensor) -> Tensor:
    """jag.cosh(input) -> Tensor: hyperbolic cosine, (e^x + e^-x) / 2, elementwise (dense or nested)."""
    ...

def asinh(input: Tensor) -> Tensor:
    """jag.asinh(input) -> Tensor: inverse hyperbolic sine, log(x + sqrt(x^2 + 1)), elementwise (dense or nested)."""
    ...

def expm1(input: Tensor) -> Tensor:
    """jag.expm1(input) -> Tensor: exp(x) - 1, exact near 0, elementwise (dense or nested)."""
    ...

def erf(input: Tensor) -> Tensor:
    """jag.erf(input) -> Tensor: error function, elementwise (dense or nested)."""
    ...

def erfc(input: Tensor) -> Tensor:
    """jag.erfc(input) -> Tensor: 1 - erf(x), exact for large x, elementwise (dense or nested)."""
    ...

def hardswish(input: Tensor) -> Tensor:
    """jag.hardswish(input) -> Tensor: x * relu6(x + 3) / 6, elementwise (dense or nested)."""
    ...

def hardsigmoid(input: Tensor) -> Tensor:
    """jag.hardsigmoid(input) -> Tensor: relu6(x + 3) / 6, elementwise (dense or nested)."""
    ...

def mish(input: Tensor) -> Tensor:
    """jag.mish(input) -> Tensor: x * tanh(softplus(x)), elementwise (dense or nested)."""
    ...

def logsigmoid(input: Tensor) -> Tensor:
    """jag.logsigmoid(input) -> Tensor: log(sigmoid(x)), stable, elementwise (dense or nested)."""
    ...


class _GeneratedTensorMethods:
    """The generated Tensor methods; jag.Tensor derives from it for type checkers only."""

    def neg(self) -> Tensor:
        """Tensor.neg() -> Tensor: -x, elementwise; as jag.neg(self)."""
        ...

    def abs(self) -> Tensor:
        """Tensor.abs() -> Tensor: |x|, elementwise; as jag.abs(self)."""
        ...

    def exp(self) -> Tensor:
        """Tensor.exp() -> Tensor: e to the x, elementwise; as jag.exp(self)."""
        ...

    def log(self) -> Tensor:
        """Tensor.log() -> Tensor: natural logarithm, elementwise; as jag.log(self)."""
        ...

    def sqrt(self) -> Tensor:
        """Tensor.sqrt() -> Tensor: square root, elementwise; as jag.sqrt(self)."""
        ...

    def rsqrt(self) -> Tensor:
        """Tensor.rsqrt() -> Tensor: 1 / sqrt(x), elementwise; as jag.rsqrt(self)."""
        ...

    def sin(self) -> Tensor:
        """Tensor.sin() -> Tensor: sine, elementwise; as jag.sin(self)."""
        ...

    def cos(self) -> Tensor:
        """Tensor.cos() -> Tensor: cosine, elementwise; as jag.cos(self)."""
        ...

    def tanh(self) -> Tensor:
        """Tensor.tanh() -> Tensor: hyperbolic tangent, elementwise; as jag.tanh(self)."""
        ...

    def sigmoid(self) -> Tensor:
        """Tensor.sigmoid() -> Tensor: 1 / (1 + exp(-x)), elementwise; as jag.sigmoid(self)."""
        ...

    def relu(self) -> Tensor:
        """Tensor.relu() -> Tensor: max(x, 0) (NaN stays NaN), elementwise; as jag.relu(self)."""
        ...

    def silu(self) -> Tensor:
        """Tensor.silu() -> Tensor: x * sigmoid(x), elementwise; as jag.silu(self)."""
        ...

    def gelu(self) -> Tensor:
        """Tensor.gelu() -> Tensor: x * Phi(x), Phi the standard normal CDF, elementwise; as jag.gelu(self)."""
        ...

    def gelu_tanh(self) -> Tensor:
        """Tensor.gelu_tanh() -> Tensor: gelu's tanh approximation, elementwise; as jag.gelu_tanh(self)."""
        ...

    def reciprocal(self) -> Tensor:
        """Tensor.reciprocal() -> Tensor: 1 / x, elementwise; as jag.reciprocal(self)."""
        ...

    def square(self) -> Tensor:
        """Tensor.square() -> Tensor: x * x, elementwise; as jag.square(self)."""
        ...

    def sign(self) -> Tensor:
        """Tensor.sign() -> Tensor: -1, 0 or 1 (NaN stays NaN), elementwise; as jag.sign(self)."""
        ...

    def floor(self) -> Tensor:
        """Tensor.floor() -> Tensor: largest integer <= x, elementwise; as jag.floor(self)."""
        ...

    def ceil(self) -> Tensor:
        """Tensor.ceil() -> Tensor: smallest integer >= x, elementwise; as jag.ceil(self)."""
        ...

    def round(self) -> Tensor:
        """Tensor.round() -> Tensor: nearest integer, halves to even, elementwise; as jag.round(self)."""
        ...

    def trunc(self) -> Tensor:
        """Tensor.trunc() -> Tensor: integer part, elementwise; as jag.trunc(self)."""
        ...

    def log1p(self) -> Tensor:
        """Tensor.log1p() -> Tensor: log(1 + x), exact near 0, elementwise; as jag.log1p(self)."""
        ...

    def atan(self) -> Tensor:
        """Tensor.atan() -> Tensor: arctangent, in (-pi/2, pi/2), elementwise; as jag.atan(self)."""
        ...

    def sinh(self) -> Tensor:
        """Tensor.sinh() -> Tensor: hyperbolic sine, (e^x - e^-x) / 2, elementwise; as jag.sinh(self)."""
        ...

    def cosh(self) -> Tensor:
        """Tensor.cosh() -> Tensor: hyperbolic cosine, (e^x + e^-x) / 2, elementwise; as jag.cosh(self)."""
        ...

    def asinh(self) -> Tensor:
        """Tensor.asinh() -> Tensor: inverse hyperbolic sine, log(x + sqrt(x^2 + 1)), elementwise; as jag.asinh(self)."""
        ...

    def expm1(self) -> Tensor:
        """Tensor.expm1() -> Tensor: exp(x) - 1, exact near 0, elementwise; as jag.expm1(self)."""
        ...

    def erf(self) -> Tensor:
        """Tensor.erf() -> Tensor: error function, elementwise; as jag.erf(self)."""
        ...

    def erfc(self) -> Tensor:
        """Tensor.erfc() -> Tensor: 1 - erf(x), exact for large x, elementwise; as jag.erfc(self)."""
        ...

    def selu(self) -> Tensor:
        """Tensor.selu() -> Tensor: scaled exponential linear unit, elementwise; as jag.selu(self)."""
        ...

    def hardswish(self) -> Tensor:
        """Tensor.hardswish() -> Tensor: x * relu6(x + 3) / 6, elementwise; as jag.hardswish(self)."""
        ...

    def hardsigmoid(self) -> Tensor:
        """Tensor.hardsigmoid() -> Tensor: relu6(x + 3) / 6, elementwise; as jag.hardsigmoid(self)."""
        ...

    def mish(self) -> Tensor:
        """Tensor.mish() -> Tensor: x * tanh(softplus(x)), elementwise; as jag.mish(self)."""
        ...

    def logsigmoid(self) -> Tensor:
        """Tensor.logsigmoid() -> Tensor: log(sigmoid(x)), stable, elementwise; as jag.logsigmoid(self)."""
        ...
