"""jag.nn.functional: torch.nn.functional names over jag ops."""
import builtins as _builtins

import jag as _jag

_op = _jag._op


def relu(input, inplace=False):
    if inplace:
        raise NotImplementedError("relu(inplace=True) is not supported")
    return _op("relu", input)


def silu(input, inplace=False):
    if inplace:
        raise NotImplementedError("silu(inplace=True) is not supported")
    return _op("silu", input)


def gelu(input, approximate="none"):
    if approximate == "none":
        return _op("gelu", input)
    if approximate == "tanh":
        return _op("gelu_tanh", input)
    raise ValueError("gelu: approximate must be 'none' or 'tanh', got %r" % (approximate,))


def sigmoid(input):
    return _op("sigmoid", input)


def tanh(input):
    return _op("tanh", input)


def softmax(input, dim, dtype=None):
    return _jag.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):
    return _jag.log_softmax(input, dim, dtype=dtype)


def _normalized_ndim(input, normalized_shape, name):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    n = len(normalized_shape)
    shape = input.shape
    if n < 1 or n > len(shape) or tuple(shape[-n:]) != normalized_shape:
        raise ValueError("%s: normalized_shape %s does not match the trailing dims of an input of shape %s"
                         % (name, list(normalized_shape), list(shape)))
    return n


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    n = _normalized_ndim(input, normalized_shape, "layer_norm")
    return _op("layer_norm", input, n, weight, bias, _builtins.float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """eps=None uses the dtype's machine epsilon, as torch."""
    n = _normalized_ndim(input, normalized_shape, "rms_norm")
    if eps is None:
        import numpy as np

        eps = _builtins.float(np.finfo(input.dtype._np if input.dtype.is_floating_point else "float32").eps)
    return _op("rms_norm", input, n, weight, _builtins.float(eps))


def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    return _op("linear", input, weight, bias)


def embedding(input, weight):
    return _op("embedding", weight, input)
