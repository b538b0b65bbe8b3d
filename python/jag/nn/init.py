"""jag.nn.init: torch.nn.init's initialisers (in place, under no_grad),
drawn from jag's generators: the thread's default one (jag.manual_seed) or
the ``generator=`` given (a jag.Generator)."""
from __future__ import annotations

import math as _math
import typing as _typing

import jag as _jag

__all__ = ["calculate_gain", "uniform_", "normal_", "zeros_", "ones_", "constant_", "xavier_uniform_",
           "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def _dense(tensor, name):
    if not isinstance(tensor, _jag.Tensor):
        raise TypeError("%s: tensor must be a jag.Tensor, got %s" % (name, type(tensor).__name__))
    if tensor.is_nested:
        raise NotImplementedError("%s: nested tensors are not supported" % name)
    if not tensor.dtype.is_floating_point:
        raise TypeError("%s: tensor must have a float dtype, got %s" % (name, tensor.dtype))


def calculate_gain(nonlinearity: str, param: _typing.Optional[float] = None) -> float:
    """The recommended gain for a nonlinearity (torch's table): 1 for
    linear/conv/sigmoid, 5/3 for tanh, sqrt(2) for relu,
    sqrt(2 / (1 + slope^2)) for leaky_relu (slope 0.01 by default), 3/4 for
    selu.

    Example::

        >>> jag.nn.init.calculate_gain("relu")
        1.4142135623730951
        >>> jag.nn.init.calculate_gain("leaky_relu", 0.2)
        1.3867504905630728
    """
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return _math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError("negative_slope %r not a valid number" % (param,))
        return _math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError("Unsupported nonlinearity %s" % nonlinearity)


def _calculate_fan_in_and_fan_out(tensor):
    dims = tensor.dim()
    if dims < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    shape = tensor.shape
    receptive = 1
    for s in shape[2:]:
        receptive *= s
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError("Mode %s not supported, please use one of fan_in, fan_out" % mode)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _write(tensor, values):
    with _jag.no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor: _jag.Tensor, a: float = 0.0, b: float = 1.0, generator: _typing.Any = None) -> _jag.Tensor:
    """Fill with U(a, b) numbers.

    Example::

        >>> jag.manual_seed(0)
        >>> w = jag.nn.init.uniform_(jag.empty(2, 3), a=-1.0, b=1.0)
        >>> w.shape, -1.0 <= w.min().item() and w.max().item() < 1.0
        ((2, 3), True)
    """
    _dense(tensor, "uniform_")
    u = _jag.rand(*tensor.shape, dtype=tensor.dtype, generator=generator)
    return _write(tensor, u * (b - a) + a)


def normal_(tensor: _jag.Tensor, mean: float = 0.0, std: float = 1.0, generator: _typing.Any = None) -> _jag.Tensor:
    """Fill with N(mean, std^2) numbers.

    Example::

        >>> g = jag.Generator().manual_seed(0)
        >>> w = jag.nn.init.normal_(jag.empty(1000), mean=2.0, std=0.5, generator=g)
        >>> round(w.mean().item(), 1), round(w.std().item(), 1)
        (2.0, 0.5)
    """
    _dense(tensor, "normal_")
    n = _jag.randn(*tensor.shape, dtype=tensor.dtype, generator=generator)
    return _write(tensor, n * std + mean)


def constant_(tensor: _jag.Tensor, val: float) -> _jag.Tensor:
    """Fill with val.

    Example::

        >>> jag.nn.init.constant_(jag.empty(2, 2), 0.5)
        tensor([[0.5000, 0.5000],
                [0.5000, 0.5000]], dtype=float32, size=[2, 2])
    """
    _dense(tensor, "constant_")
    with _jag.no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor: _jag.Tensor) -> _jag.Tensor:
    """Fill with ones.

    Example::

        >>> jag.nn.init.ones_(jag.empty(3))
        tensor([1.0000, 1.0000, 1.0000], dtype=float32, size=[3])
    """
    return constant_(tensor, 1.0)


def zeros_(tensor: _jag.Tensor) -> _jag.Tensor:
    """Fill with zeros.

    Example::

        >>> jag.nn.init.zeros_(jag.empty(3))
        tensor([0.0000, 0.0000, 0.0000], dtype=float32, size=[3])
    """
    return constant_(tensor, 0.0)


def xavier_uniform_(tensor: _jag.Tensor, gain: float = 1.0, generator: _typing.Any = None) -> _jag.Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot).

    Example::

        >>> jag.manual_seed(0)
        >>> w = jag.nn.init.xavier_uniform_(jag.empty(4, 2))  # bound sqrt(6 / (2 + 4)) = 1
        >>> w.shape, w.abs().max().item() <= 1.0
        ((4, 2), True)
    """
    _dense(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * _math.sqrt(2.0 / float(fan_in + fan_out))
    a = _math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: _jag.Tensor, gain: float = 1.0, generator: _typing.Any = None) -> _jag.Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot).

    Example::

        >>> jag.manual_seed(0)
        >>> w = jag.nn.init.xavier_normal_(jag.empty(300, 100))  # std sqrt(2 / 400)
        >>> round(w.std().item(), 2)
        0.07
    """
    _dense(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * _math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: _jag.Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: _typing.Any = None) -> _jag.Tensor:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He), gain =
    calculate_gain(nonlinearity, a), fan the fan_in or fan_out.

    Example::

        >>> jag.manual_seed(0)
        >>> w = jag.nn.init.kaiming_uniform_(jag.empty(3, 6), nonlinearity="relu")  # bound sqrt(2) * sqrt(3 / 6) = 1
        >>> w.shape, w.abs().max().item() <= 1.0
        ((3, 6), True)
    """
    _dense(tensor, "kaiming_uniform_")
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / _math.sqrt(fan)
    bound = _math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: _jag.Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: _typing.Any = None) -> _jag.Tensor:
    """N(0, std^2) with std = gain / sqrt(fan) (He).

    Example::

        >>> jag.manual_seed(0)
        >>> w = jag.nn.init.kaiming_normal_(jag.empty(200, 50), nonlinearity="relu")  # std sqrt(2 / 50) = 0.2
        >>> round(w.std().item(), 1)
        0.2
    """
    _dense(tensor, "kaiming_normal_")
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / _math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)
