"""The layers of jag.nn, torch.nn's names, defaults and initialisation,
over jag.nn.functional (so each takes dense inputs and jagged nested ones
where torch's takes a batch)."""
import math as _math
import operator as _operator
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
    """Returns its input."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        """input itself."""
        return input


class Linear(Module):
    """y = x W^T + b, W (out_features, in_features). torch's init: W from
    kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and b
    from U(-1/sqrt(in), 1/sqrt(in)). x is (..., in) dense or a jagged
    nested (B, j, in)."""

    def __init__(self, in_features, out_features, bias=True, dtype=None, generator=None):
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

    def reset_parameters(self, generator=None):
        """torch's default initialisation (see the class)."""
        init.kaiming_uniform_(self.weight, a=_math.sqrt(5), generator=generator)
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / _math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound, generator=generator)

    def forward(self, input):
        """F.linear(input, weight, bias)."""
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                             self.bias is not None)


class Embedding(Module):
    """A lookup table of num_embeddings rows of embedding_dim, initialised
    N(0, 1). padding_idx: that row starts as zeros and gets no gradient
    (its output rows still read it). Indices may be dense or a jagged nested
    tensor."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, dtype=None, generator=None):
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
        self._keep = None

    def reset_parameters(self, generator=None):
        """N(0, 1), the padding row zeroed."""
        init.normal_(self.weight, generator=generator)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with _jag.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        """The rows of weight at input's indices (input's shape + (dim,))."""
        w = self.weight
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

    def extra_repr(self):
        s = "%d, %d" % (self.num_embeddings, self.embedding_dim)
        if self.padding_idx is not None:
            s += ", padding_idx=%d" % self.padding_idx
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        """An Embedding over a copy-free alias of ``embeddings`` (2-D)."""
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
    normalized_shape dims (biased variance); weight ones, bias zeros."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
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

    def reset_parameters(self):
        """weight ones, bias zeros."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        """F.layer_norm."""
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "%s, eps=%s, elementwise_affine=%s, bias=%s" % (self.normalized_shape, self.eps,
                                                               self.elementwise_affine, self._has_bias)


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape
    dims; eps None: the dtype's machine epsilon (torch's)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_jag.ones(*self.normalized_shape, dtype=_float_dtype(dtype)))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        """weight ones."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        """F.rms_norm."""
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return "%s, eps=%s, elementwise_affine=%s" % (self.normalized_shape, self.eps, self.elementwise_affine)


class Dropout(Module):
    """Zeroes each element with probability p in training mode (the rest
    scaled by 1 / (1 - p)); the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
        self.p = p
        self.inplace = inplace

    def forward(self, input, generator=None):
        """F.dropout(input, p, training)."""
        return F.dropout(input, self.p, self.training, self.inplace, generator=generator)

    def extra_repr(self):
        return "p=%s, inplace=%s" % (self.p, self.inplace)


class GELU(Module):
    """x * Phi(x) (approximate='none') or its tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError("approximate must be 'none' or 'tanh', got %r" % (approximate,))
        self.approximate = approximate

    def forward(self, input):
        """F.gelu."""
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return "approximate=%r" % (self.approximate,)


class ReLU(Module):
    """max(x, 0)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        """F.relu."""
        return F.relu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """F.leaky_relu with a fixed negative_slope."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return "negative_slope=%s%s" % (self.negative_slope, ", inplace=True" if self.inplace else "")


class ELU(Module):
    """F.elu with a fixed alpha."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return "alpha=%s%s" % (self.alpha, ", inplace=True" if self.inplace else "")


class Softplus(Module):
    """F.softplus with fixed beta and threshold."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return "beta=%s, threshold=%s" % (self.beta, self.threshold)


class Hardtanh(Module):
    """F.hardtanh with fixed bounds."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError("Hardtanh: min_val (%s) is greater than max_val (%s)" % (min_val, max_val))
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return "min_val=%s, max_val=%s%s" % (self.min_val, self.max_val, ", inplace=True" if self.inplace else "")


def _simple_activation(name, doc):
    fn = getattr(F, name.lower())

    class _Activation(Module):
        def __init__(self, inplace=False):
            super().__init__()
            self.inplace = inplace

        def forward(self, input):
            return fn(input, self.inplace)

        def extra_repr(self):
            return "inplace=True" if self.inplace else ""

    _Activation.__name__ = _Activation.__qualname__ = name
    _Activation.__doc__ = doc
    return _Activation


SELU = _simple_activation("SELU", "F.selu: scale * elu(x, alpha) with torch's constants.")
Hardswish = _simple_activation("Hardswish", "F.hardswish: x * relu6(x + 3) / 6.")
Hardsigmoid = _simple_activation("Hardsigmoid", "F.hardsigmoid: relu6(x + 3) / 6.")
Mish = _simple_activation("Mish", "F.mish: x * tanh(softplus(x)).")


class LogSigmoid(Module):
    """F.logsigmoid: log(sigmoid(x))."""

    def forward(self, input):
        return F.logsigmoid(input)


class SiLU(Module):
    """x * sigmoid(x)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        """F.silu."""
        return F.silu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sequential(Module):
    """Modules called in order, each on the previous one's output; built
    from modules (named "0", "1", ...) or an OrderedDict of names."""

    def __init__(self, *args):
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

    def append(self, module):
        """Add a module at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        """Each module on the previous one's output."""
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children "0", "1", ..."""

    def __init__(self, modules=None):
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

    def append(self, module):
        """Add a module at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        """Append each module of an iterable; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        """Insert a module before index."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def forward(self, *args, **kwargs):
        """A ModuleList is not callable (as torch's)."""
        raise NotImplementedError("ModuleList has no forward; iterate over it")


class ModuleDict(Module):
    """A dict of modules by name, registered as children in insertion
    order."""

    def __init__(self, modules=None):
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

    def keys(self):
        """The names."""
        return self._modules.keys()

    def items(self):
        """(name, module) pairs."""
        return self._modules.items()

    def values(self):
        """The modules."""
        return self._modules.values()

    def pop(self, key):
        """Remove and return the module named key."""
        v = self[key]
        del self[key]
        return v

    def clear(self):
        """Remove every module."""
        self._modules.clear()

    def update(self, modules):
        """Add (name, module) pairs from a mapping or an iterable of pairs."""
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module

    def forward(self, *args, **kwargs):
        """A ModuleDict is not callable (as torch's)."""
        raise NotImplementedError("ModuleDict has no forward; index it")
