"""The layers of jag.nn, torch.nn's names, defaults and initialisation,
over jag.nn.functional (so each takes dense inputs and jagged nested ones
where torch's takes a batch)."""
from __future__ import annotations

import math as _math
import operator as _operator
import typing as _typing
from collections import OrderedDict as _OrderedDict

import jag as _jag

from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Linear", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "GELU", "ReLU", "SiLU", "Identity",
           "Sequential", "ModuleList", "ModuleDict"]


def _float_dtype(dtype):
    dt = _jag._to_dtype(dtype) if dtype is not None else _jag.float32
    if not dt.is_floating_point:
        raise TypeError("dtype must be a float dtype, got %s" % (dt,))
    return dt


class Identity(Module):
    """Returns its input.

    Example::

        >>> m = jag.nn.Identity(54, unused_arg=True)  # arguments are ignored
        >>> m(jag.tensor([1.0, 2.0]))
        tensor([1.0000, 2.0000], dtype=float32, size=[2])
    """

    def __init__(self, *args: _typing.Any, **kwargs: _typing.Any) -> None:
        super().__init__()

    def forward(self, input: _typing.Any) -> _typing.Any:
        """input itself.

        Example::

            >>> x = jag.tensor([1.0, 2.0])
            >>> jag.nn.Identity()(x) is x
            True
        """
        return input


class Linear(Module):
    """y = x W^T + b, W (out_features, in_features). torch's init: W from
    kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and b
    from U(-1/sqrt(in), 1/sqrt(in)). x is (..., in) dense or a jagged
    nested (B, j, in).

    Args:
        in_features: size of each input row.
        out_features: size of each output row.
        bias: learn an additive bias (default True).
        dtype: a float dtype (default jag.float32).
        generator: a jag.Generator for the initialisation.

    Example::

        >>> m = jag.nn.Linear(3, 2)
        >>> m
        Linear(in_features=3, out_features=2, bias=True)
        >>> x = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
        >>> [c.shape for c in m(x).unbind()]
        [(2, 2), (1, 2)]
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: _typing.Any = None,
                 generator: _typing.Any = None) -> None:
        super().__init__()
        dt = _float_dtype(dtype)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_jag.empty(out_features, in_features, dtype=dt))
        if bias:
            self.bias = Parameter(_jag.empty(out_features, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: _typing.Any = None) -> None:
        """torch's default initialisation (see the class).

        Example::

            >>> m = jag.nn.Linear(4, 2)
            >>> m.reset_parameters(generator=jag.Generator().manual_seed(0))
            >>> m.weight.abs().max().item() <= 0.5, m.bias.abs().max().item() <= 0.5  # bound 1 / sqrt(4)
            (True, True)
        """
        init.kaiming_uniform_(self.weight, a=_math.sqrt(5), generator=generator)
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / _math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound, generator=generator)

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.linear(input, weight, bias).

        Example::

            >>> m = jag.nn.Linear(2, 1)
            >>> _ = jag.nn.init.ones_(m.weight), jag.nn.init.zeros_(m.bias)
            >>> m(jag.tensor([[1.0, 2.0], [3.0, 4.0]])).detach()
            tensor([[3.0000],
                    [7.0000]], dtype=float32, size=[2, 1])
        """
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.Linear(3, 2, bias=False).extra_repr()
            'in_features=3, out_features=2, bias=False'
        """
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                             self.bias is not None)


class Embedding(Module):
    """A lookup table of num_embeddings rows of embedding_dim, initialised
    N(0, 1). padding_idx: that row starts as zeros and gets no gradient
    (its output rows still read it). Indices may be dense or a jagged nested
    tensor.

    Example::

        >>> emb = jag.nn.Embedding(10, 4, padding_idx=0)
        >>> idx = jag.nested.nested_tensor([jag.tensor([1, 2, 0]), jag.tensor([5])], layout=jag.jagged)
        >>> out = emb(idx)
        >>> [c.shape for c in out.unbind()]
        [(3, 4), (1, 4)]
        >>> out.values()[2].tolist()  # the padding row
        [0.0, 0.0, 0.0, 0.0]
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: _typing.Optional[int] = None,
                 max_norm: _typing.Optional[float] = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: _typing.Optional[_jag.Tensor] = None, _freeze: bool = False,
                 dtype: _typing.Any = None, generator: _typing.Any = None) -> None:
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are not supported")
        if padding_idx is not None:
            if padding_idx > 0:
                if padding_idx >= num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
            elif padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(_jag.empty(num_embeddings, embedding_dim, dtype=_float_dtype(dtype)),
                                    requires_grad=not _freeze)
            self.reset_parameters(generator)
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        self._keep: _typing.Optional[_jag.Tensor] = None

    def reset_parameters(self, generator: _typing.Any = None) -> None:
        """N(0, 1), the padding row zeroed.

        Example::

            >>> emb = jag.nn.Embedding(3, 2, padding_idx=1)
            >>> emb.reset_parameters(generator=jag.Generator().manual_seed(0))
            >>> emb.weight[1].tolist()
            [0.0, 0.0]
        """
        init.normal_(self.weight, generator=generator)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with _jag.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """The rows of weight at input's indices (input's shape + (dim,)).

        Example::

            >>> emb = jag.nn.Embedding.from_pretrained(jag.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]]))
            >>> emb(jag.tensor([[2, 1], [0, 2]]))
            tensor([[[3.0000, 4.0000],
                     [1.0000, 2.0000]],
                    [[0.0000, 0.0000],
                     [3.0000, 4.0000]]], dtype=float32, size=[2, 2, 2])
        """
        w: _jag.Tensor = self.weight
        if self.padding_idx is not None and w.requires_grad and _jag.is_grad_enabled():
            # the padding row is read through a detached alias: no gradient
            # reaches it (torch's padding_idx), the other rows are w's own
            keep = self._keep
            if keep is None or keep.shape[0] != w.shape[0]:
                rows = [[True]] * w.shape[0]
                rows[self.padding_idx] = [False]
                keep = self._keep = _jag.tensor(rows, dtype=_jag.bool)
            w = _jag.where(keep, w, w.detach())
        return F.embedding(input, w)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.Embedding(10, 4, padding_idx=0).extra_repr()
            '10, 4, padding_idx=0'
        """
        s = "%d, %d" % (self.num_embeddings, self.embedding_dim)
        if self.padding_idx is not None:
            s += ", padding_idx=%d" % self.padding_idx
        return s

    @classmethod
    def from_pretrained(cls, embeddings: _jag.Tensor, freeze: bool = True, padding_idx: _typing.Optional[int] = None,
                        **kwargs: _typing.Any) -> Embedding:
        """An Embedding over a copy-free alias of ``embeddings`` (2-D).

        Example::

            >>> weights = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> emb = jag.nn.Embedding.from_pretrained(weights)
            >>> emb, emb.weight.requires_grad
            (Embedding(2, 2), False)
            >>> emb(jag.tensor([1]))
            tensor([[3.0000, 4.0000]], dtype=float32, size=[1, 2])
        """
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze, **kwargs)


def _shape_tuple(normalized_shape):
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing
    normalized_shape dims (biased variance); weight ones, bias zeros.

    Example::

        >>> ln = jag.nn.LayerNorm(2)
        >>> ln
        LayerNorm((2,), eps=1e-05, elementwise_affine=True, bias=True)
        >>> ln(jag.tensor([[1.0, 3.0]]))
        tensor([[-1.0000, 1.0000]], dtype=float32, size=[1, 2])
    """

    def __init__(self, normalized_shape: _typing.Any, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype: _typing.Any = None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self._has_bias = bool(bias)
        dt = _float_dtype(dtype)
        if elementwise_affine:
            self.weight = Parameter(_jag.ones(*self.normalized_shape, dtype=dt))
            if bias:
                self.bias = Parameter(_jag.zeros(*self.normalized_shape, dtype=dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """weight ones, bias zeros.

        Example::

            >>> ln = jag.nn.LayerNorm(3)
            >>> _ = jag.nn.init.constant_(ln.weight, 5.0)
            >>> ln.reset_parameters()
            >>> ln.weight.tolist(), ln.bias.tolist()
            ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
        """
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.layer_norm.

        Example::

            >>> ln = jag.nn.LayerNorm(3)
            >>> a, b = jag.tensor([[1.0, 2.0, 3.0]]), jag.tensor([[0.0, 0.0, 3.0], [2.0, 2.0, 2.0]])
            >>> x = jag.nested.nested_tensor([a, b], layout=jag.jagged)
            >>> ln(x).detach().values()  # each row normalised over its 3 features
            tensor([[-1.2247, 0.0000, 1.2247],
                    [-0.7071, -0.7071, 1.4142],
                    [0.0000, 0.0000, 0.0000]], dtype=float32, size=[3, 3])
        """
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.LayerNorm((2, 3), eps=1e-6).extra_repr()
            '(2, 3), eps=1e-06, elementwise_affine=True, bias=True'
        """
        return "%s, eps=%s, elementwise_affine=%s, bias=%s" % (self.normalized_shape, self.eps,
                                                               self.elementwise_affine, self._has_bias)


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape
    dims; eps None: the dtype's machine epsilon (torch's).

    Example::

        >>> rms = jag.nn.RMSNorm(2)
        >>> rms
        RMSNorm((2,), eps=None, elementwise_affine=True)
        >>> rms(jag.tensor([[3.0, 4.0]]))  # x / sqrt(mean(x^2)) = x / sqrt(12.5)
        tensor([[0.8485, 1.1314]], dtype=float32, size=[1, 2])
    """

    def __init__(self, normalized_shape: _typing.Any, eps: _typing.Optional[float] = None,
                 elementwise_affine: bool = True, dtype: _typing.Any = None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_jag.ones(*self.normalized_shape, dtype=_float_dtype(dtype)))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        """weight ones.

        Example::

            >>> rms = jag.nn.RMSNorm(2)
            >>> _ = jag.nn.init.zeros_(rms.weight)
            >>> rms.reset_parameters()
            >>> rms.weight.tolist()
            [1.0, 1.0]
        """
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.rms_norm.

        Example::

            >>> rms = jag.nn.RMSNorm(2, eps=0.0)
            >>> a, b = jag.tensor([[1.0, 1.0]]), jag.tensor([[2.0, -2.0], [0.0, 2.0]])
            >>> x = jag.nested.nested_tensor([a, b], layout=jag.jagged)
            >>> rms(x).detach().values()
            tensor([[1.0000, 1.0000],
                    [1.0000, -1.0000],
                    [0.0000, 1.4142]], dtype=float32, size=[3, 2])
        """
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.RMSNorm(4, eps=1e-6).extra_repr()
            '(4,), eps=1e-06, elementwise_affine=True'
        """
        return "%s, eps=%s, elementwise_affine=%s" % (self.normalized_shape, self.eps, self.elementwise_affine)


class Dropout(Module):
    """Zeroes each element with probability p in training mode (the rest
    scaled by 1 / (1 - p)); the identity in eval mode.

    Example::

        >>> drop = jag.nn.Dropout(p=0.5)
        >>> jag.manual_seed(0)
        >>> y = drop(jag.ones(8))
        >>> sorted(set(y.tolist()))  # zeroed, or scaled by 1 / (1 - p)
        [0.0, 2.0]
        >>> drop.eval()(jag.ones(3))
        tensor([1.0000, 1.0000, 1.0000], dtype=float32, size=[3])
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
        self.p = p
        self.inplace = inplace

    def forward(self, input: _jag.Tensor, generator: _typing.Any = None) -> _jag.Tensor:
        """F.dropout(input, p, training).

        Example::

            >>> drop = jag.nn.Dropout(p=0.25)
            >>> y = drop(jag.ones(1000), generator=jag.Generator().manual_seed(0))
            >>> round(y.max().item(), 4), 0.65 < (y > 0).float().mean().item() < 0.85
            (1.3333, True)
        """
        return F.dropout(input, self.p, self.training, self.inplace, generator=generator)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.Dropout(0.1).extra_repr()
            'p=0.1, inplace=False'
        """
        return "p=%s, inplace=%s" % (self.p, self.inplace)


class GELU(Module):
    """x * Phi(x) (approximate='none') or its tanh approximation.

    Example::

        >>> jag.nn.GELU()(jag.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.1587, 0.0000, 0.8413], dtype=float32, size=[3])
        >>> jag.nn.GELU(approximate="tanh")
        GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError("approximate must be 'none' or 'tanh', got %r" % (approximate,))
        self.approximate = approximate

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.gelu.

        Example::

            >>> x = jag.nested.nested_tensor([jag.tensor([[1.0]]), jag.tensor([[2.0], [-2.0]])], layout=jag.jagged)
            >>> jag.nn.GELU()(x).values()
            tensor([[0.8413],
                    [1.9545],
                    [-0.0455]], dtype=float32, size=[3, 1])
        """
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.GELU(approximate="tanh").extra_repr()
            "approximate='tanh'"
        """
        return "approximate=%r" % (self.approximate,)


class ReLU(Module):
    """max(x, 0).

    Example::

        >>> jag.nn.ReLU()(jag.tensor([-1.0, 0.0, 2.0]))
        tensor([0.0000, 0.0000, 2.0000], dtype=float32, size=[3])
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.relu.

        Example::

            >>> x = jag.nested.nested_tensor([jag.tensor([[-1.0]]), jag.tensor([[2.0], [-3.0]])], layout=jag.jagged)
            >>> [c.tolist() for c in jag.nn.ReLU()(x).unbind()]
            [[[0.0]], [[2.0], [0.0]]]
        """
        return F.relu(input, self.inplace)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.ReLU(inplace=True).extra_repr(), jag.nn.ReLU().extra_repr()
            ('inplace=True', '')
        """
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """F.leaky_relu with a fixed negative_slope.

    Example::

        >>> jag.nn.LeakyReLU(0.1)(jag.tensor([-2.0, 3.0]))
        tensor([-0.2000, 3.0000], dtype=float32, size=[2])
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.leaky_relu with this module's settings.

        Example::

            >>> m = jag.nn.LeakyReLU(negative_slope=0.5)
            >>> m.forward(jag.tensor([-4.0, 4.0]))
            tensor([-2.0000, 4.0000], dtype=float32, size=[2])
        """
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.LeakyReLU(0.2, inplace=True).extra_repr()
            'negative_slope=0.2, inplace=True'
        """
        return "negative_slope=%s%s" % (self.negative_slope, ", inplace=True" if self.inplace else "")


class ELU(Module):
    """F.elu with a fixed alpha.

    Example::

        >>> jag.nn.ELU()(jag.tensor([-1.0, 0.0, 2.0]))  # alpha * (exp(x) - 1) below 0
        tensor([-0.6321, 0.0000, 2.0000], dtype=float32, size=[3])
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.elu with this module's settings.

        Example::

            >>> m = jag.nn.ELU(alpha=2.0)
            >>> m.forward(jag.tensor([-1.0, 1.0]))
            tensor([-1.2642, 1.0000], dtype=float32, size=[2])
        """
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.ELU(alpha=0.5).extra_repr()
            'alpha=0.5'
        """
        return "alpha=%s%s" % (self.alpha, ", inplace=True" if self.inplace else "")


class Softplus(Module):
    """F.softplus with fixed beta and threshold.

    Example::

        >>> jag.nn.Softplus()(jag.tensor([-1.0, 0.0, 1.0]))  # log(1 + exp(x))
        tensor([0.3133, 0.6931, 1.3133], dtype=float32, size=[3])
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.softplus with this module's settings.

        Example::

            >>> m = jag.nn.Softplus(beta=2.0, threshold=1.0)
            >>> m.forward(jag.tensor([0.0, 5.0]))  # beyond threshold / beta: x itself
            tensor([0.3466, 5.0000], dtype=float32, size=[2])
        """
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.Softplus(beta=2.0).extra_repr()
            'beta=2.0, threshold=20.0'
        """
        return "beta=%s, threshold=%s" % (self.beta, self.threshold)


class Hardtanh(Module):
    """F.hardtanh with fixed bounds.

    Example::

        >>> jag.nn.Hardtanh()(jag.tensor([-3.0, 0.5, 3.0]))
        tensor([-1.0000, 0.5000, 1.0000], dtype=float32, size=[3])
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if min_val > max_val:
            raise ValueError("Hardtanh: min_val (%s) is greater than max_val (%s)" % (min_val, max_val))
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.hardtanh with this module's settings.

        Example::

            >>> m = jag.nn.Hardtanh(min_val=0.0, max_val=2.0)
            >>> m.forward(jag.tensor([-1.0, 1.0, 5.0]))
            tensor([0.0000, 1.0000, 2.0000], dtype=float32, size=[3])
        """
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.Hardtanh(-2.0, 2.0).extra_repr()
            'min_val=-2.0, max_val=2.0'
        """
        return "min_val=%s, max_val=%s%s" % (self.min_val, self.max_val, ", inplace=True" if self.inplace else "")


def _simple_activation(name, doc):
    fn = getattr(F, name.lower())

    class _Activation(Module):
        def __init__(self, inplace: bool = False) -> None:
            super().__init__()
            self.inplace = inplace

        def forward(self, input: _jag.Tensor) -> _jag.Tensor:
            """The activation applied elementwise.

            Example (Hardsigmoid shown; SELU, Hardswish and Mish alike)::

                >>> jag.nn.Hardsigmoid().forward(jag.tensor([-3.0, 0.0, 3.0]))
                tensor([0.0000, 0.5000, 1.0000], dtype=float32, size=[3])
            """
            return fn(input, self.inplace)

        def extra_repr(self) -> str:
            """The settings shown in the module's repr.

            Example (SELU shown; Hardswish, Hardsigmoid and Mish alike)::

                >>> jag.nn.SELU(inplace=True).extra_repr(), jag.nn.SELU()
                ('inplace=True', SELU())
            """
            return "inplace=True" if self.inplace else ""

    _Activation.__name__ = _Activation.__qualname__ = name
    _Activation.__doc__ = doc
    return _Activation


SELU = _simple_activation("SELU", """F.selu: scale * elu(x, alpha) with torch's constants.

    Example::

        >>> jag.nn.SELU()(jag.tensor([-1.0, 0.0, 1.0]))
        tensor([-1.1113, 0.0000, 1.0507], dtype=float32, size=[3])
    """)
Hardswish = _simple_activation("Hardswish", """F.hardswish: x * relu6(x + 3) / 6.

    Example::

        >>> jag.nn.Hardswish()(jag.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.3333, 0.0000, 0.6667], dtype=float32, size=[3])
    """)
Hardsigmoid = _simple_activation("Hardsigmoid", """F.hardsigmoid: relu6(x + 3) / 6.

    Example::

        >>> jag.nn.Hardsigmoid()(jag.tensor([-1.0, 0.0, 1.0]))
        tensor([0.3333, 0.5000, 0.6667], dtype=float32, size=[3])
    """)
Mish = _simple_activation("Mish", """F.mish: x * tanh(softplus(x)).

    Example::

        >>> jag.nn.Mish()(jag.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.3034, 0.0000, 0.8651], dtype=float32, size=[3])
    """)


class LogSigmoid(Module):
    """F.logsigmoid: log(sigmoid(x)).

    Example::

        >>> jag.nn.LogSigmoid()(jag.tensor([0.0, -10.0]))  # log(1 / 2), about x for x << 0
        tensor([-0.6931, -10.0000], dtype=float32, size=[2])
    """

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.logsigmoid with this module's settings.

        Example::

            >>> x = jag.nested.nested_tensor([jag.tensor([[0.0]]), jag.tensor([[0.0], [-100.0]])], layout=jag.jagged)
            >>> jag.nn.LogSigmoid()(x).values()
            tensor([[-0.6931],
                    [-0.6931],
                    [-100.0000]], dtype=float32, size=[3, 1])
        """
        return F.logsigmoid(input)


class SiLU(Module):
    """x * sigmoid(x).

    Example::

        >>> jag.nn.SiLU()(jag.tensor([-1.0, 0.0, 1.0]))  # x * sigmoid(x)
        tensor([-0.2689, 0.0000, 0.7311], dtype=float32, size=[3])
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: _jag.Tensor) -> _jag.Tensor:
        """F.silu.

        Example::

            >>> x = jag.nested.nested_tensor([jag.tensor([[0.0]]), jag.tensor([[2.0], [-2.0]])], layout=jag.jagged)
            >>> [c.shape for c in jag.nn.SiLU()(x).unbind()]
            [(1, 1), (2, 1)]
        """
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.SiLU(inplace=True).extra_repr()
            'inplace=True'
        """
        return "inplace=True" if self.inplace else ""


class Sequential(Module):
    """Modules called in order, each on the previous one's output; built
    from modules (named "0", "1", ...) or an OrderedDict of names.

    Example::

        >>> model = jag.nn.Sequential(jag.nn.Linear(2, 3), jag.nn.ReLU())
        >>> model
        Sequential(
          (0): Linear(in_features=2, out_features=3, bias=True)
          (1): ReLU()
        )
        >>> model(jag.ones(5, 2)).shape
        (5, 3)
    """

    def __init__(self, *args: _typing.Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], _OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _get_item_by_idx(self, iterator, idx):
        size = len(self)
        idx = _operator.index(idx)
        if not -size <= idx < size:
            raise IndexError("index %d is out of range" % idx)
        idx %= size
        for i, m in enumerate(iterator):
            if i == idx:
                return m

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(_OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(self._modules.values(), idx)

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[_operator.index(idx)]
        setattr(self, key, module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, list(self._modules.keys())[_operator.index(idx)])
        items = list(self._modules.items())
        self._modules.clear()
        for i, (_, m) in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        """Add a module at the end; returns self.

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2))
            >>> model.append(jag.nn.ReLU())
            Sequential(
              (0): Linear(in_features=2, out_features=2, bias=True)
              (1): ReLU()
            )
        """
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input: _typing.Any) -> _typing.Any:
        """Each module on the previous one's output.

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Identity(), jag.nn.ReLU())
            >>> model.forward(jag.tensor([-1.0, 1.0]))  # relu(identity(x))
            tensor([0.0000, 1.0000], dtype=float32, size=[2])
        """
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children "0", "1", ...

    Example::

        >>> layers = jag.nn.ModuleList([jag.nn.Linear(2, 2) for _ in range(3)])
        >>> len(layers), len(list(layers.parameters()))
        (3, 6)
        >>> x = jag.ones(1, 2)
        >>> for layer in layers:
        ...     x = layer(x)
        >>> x.shape
        (1, 2)
    """

    def __init__(self, modules: _typing.Optional[_typing.Iterable[Module]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx):
        idx = _operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError("index %d is out of range" % idx)
        return str(idx % len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[self._index(idx)]

    def __setitem__(self, idx, module):
        self.add_module(self._index(idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, self._index(idx))
        mods = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        """Add a module at the end; returns self.

        Example::

            >>> layers = jag.nn.ModuleList()
            >>> layers.append(jag.nn.ReLU())
            ModuleList(
              (0): ReLU()
            )
        """
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: _typing.Iterable[Module]) -> ModuleList:
        """Append each module of an iterable; returns self.

        Example::

            >>> layers = jag.nn.ModuleList([jag.nn.ReLU()])
            >>> layers.extend([jag.nn.GELU(), jag.nn.SiLU()])
            ModuleList(
              (0): ReLU()
              (1): GELU(approximate='none')
              (2): SiLU()
            )
        """
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert a module before index.

        Example::

            >>> layers = jag.nn.ModuleList([jag.nn.ReLU(), jag.nn.SiLU()])
            >>> layers.insert(1, jag.nn.GELU())
            >>> [type(m).__name__ for m in layers]
            ['ReLU', 'GELU', 'SiLU']
        """
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def forward(self, *args: _typing.Any, **kwargs: _typing.Any) -> _typing.Any:
        """A ModuleList is not callable (as torch's).

        Example::

            >>> jag.nn.ModuleList([jag.nn.ReLU()])(jag.ones(1))
            Traceback (most recent call last):
                ...
            NotImplementedError: ModuleList has no forward; iterate over it
        """
        raise NotImplementedError("ModuleList has no forward; iterate over it")


class ModuleDict(Module):
    """A dict of modules by name, registered as children in insertion
    order.

    Example::

        >>> heads = jag.nn.ModuleDict({"cls": jag.nn.Linear(4, 3), "reg": jag.nn.Linear(4, 1)})
        >>> heads
        ModuleDict(
          (cls): Linear(in_features=4, out_features=3, bias=True)
          (reg): Linear(in_features=4, out_features=1, bias=True)
        )
        >>> heads["reg"](jag.ones(2, 4)).shape
        (2, 1)
    """

    def __init__(self, modules: _typing.Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self) -> _typing.KeysView[str]:
        """The names.

        Example::

            >>> jag.nn.ModuleDict({"a": jag.nn.ReLU(), "b": jag.nn.SiLU()}).keys()
            odict_keys(['a', 'b'])
        """
        return self._modules.keys()

    def items(self) -> _typing.ItemsView[str, Module]:
        """(name, module) pairs.

        Example::

            >>> d = jag.nn.ModuleDict({"act": jag.nn.ReLU(), "fc": jag.nn.Linear(1, 1)})
            >>> [(k, type(m).__name__) for k, m in d.items()]
            [('act', 'ReLU'), ('fc', 'Linear')]
        """
        return self._modules.items()

    def values(self) -> _typing.ValuesView[Module]:
        """The modules.

        Example::

            >>> d = jag.nn.ModuleDict({"act": jag.nn.ReLU(), "gelu": jag.nn.GELU()})
            >>> list(d.values())
            [ReLU(), GELU(approximate='none')]
        """
        return self._modules.values()

    def pop(self, key: str) -> Module:
        """Remove and return the module named key.

        Example::

            >>> d = jag.nn.ModuleDict({"act": jag.nn.ReLU(), "gelu": jag.nn.GELU()})
            >>> d.pop("act"), list(d.keys())
            (ReLU(), ['gelu'])
        """
        v = self[key]
        del self[key]
        return v

    def clear(self) -> None:
        """Remove every module.

        Example::

            >>> d = jag.nn.ModuleDict({"fc": jag.nn.Linear(2, 2)})
            >>> d.clear()
            >>> len(d), list(d.parameters())
            (0, [])
        """
        self._modules.clear()

    def update(self, modules: _typing.Any) -> None:
        """Add (name, module) pairs from a mapping or an iterable of pairs.

        Example::

            >>> d = jag.nn.ModuleDict({"a": jag.nn.ReLU()})
            >>> d.update([("b", jag.nn.GELU()), ("a", jag.nn.SiLU())])
            >>> d
            ModuleDict(
              (a): SiLU()
              (b): GELU(approximate='none')
            )
        """
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module

    def forward(self, *args: _typing.Any, **kwargs: _typing.Any) -> _typing.Any:
        """A ModuleDict is not callable (as torch's).

        Example::

            >>> jag.nn.ModuleDict({"a": jag.nn.ReLU()})(jag.ones(1))
            Traceback (most recent call last):
                ...
            NotImplementedError: ModuleDict has no forward; index it
        """
        raise NotImplementedError("ModuleDict has no forward; index it")
