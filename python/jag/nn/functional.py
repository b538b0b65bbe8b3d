"""jag.nn.functional: torch.nn.functional names over jag ops.

Each function takes dense tensors and, where torch.nn.functional takes a
batch, jagged nested tensors (B, j, ...) too, and is differentiable.

Example::

    >>> F = jag.nn.functional
    >>> F.relu(jag.tensor([-1.0, 2.0]))
    tensor([0.0000, 2.0000], dtype=float32, size=[2])
"""
from __future__ import annotations

import builtins as _builtins
import math as _math
import typing as _typing

import jag as _jag
from jag import _C

_op: _typing.Callable[..., _typing.Any] = _jag._C._op


def relu(input: _jag.Tensor, inplace: bool = False) -> _jag.Tensor:
    """max(x, 0) elementwise (inplace=True is not supported).

    Example::

        >>> F = jag.nn.functional
        >>> F.relu(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([0.0000, 0.0000, 1.0000], dtype=float32, size=[3])
        >>> nt = jag.nested.nested_tensor([[-1.0, 2.0], [-3.0]], layout=jag.jagged)
        >>> [c.tolist() for c in F.relu(nt).unbind()]  # nested in, nested out
        [[0.0, 2.0], [0.0]]
    """
    if inplace:
        raise NotImplementedError("relu(inplace=True) is not supported")
    return _op("relu", input)


def silu(input: _jag.Tensor, inplace: bool = False) -> _jag.Tensor:
    """x * sigmoid(x) elementwise (inplace=True is not supported).

    Example::

        >>> jag.nn.functional.silu(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([-0.2384, 0.0000, 0.7311], dtype=float32, size=[3])
    """
    if inplace:
        raise NotImplementedError("silu(inplace=True) is not supported")
    return _op("silu", input)


def gelu(input: _jag.Tensor, approximate: str = "none") -> _jag.Tensor:
    """x * Phi(x) elementwise, Phi the standard normal CDF; approximate="tanh":
    torch's tanh approximation.

    Example::

        >>> x = jag.tensor([-1.0, 0.0, 1.0])
        >>> jag.nn.functional.gelu(x)
        tensor([-0.1587, 0.0000, 0.8413], dtype=float32, size=[3])
        >>> jag.nn.functional.gelu(x, approximate='tanh')
        tensor([-0.1588, 0.0000, 0.8412], dtype=float32, size=[3])
    """
    if approximate == "none":
        return _op("gelu", input)
    if approximate == "tanh":
        return _op("gelu_tanh", input)
    raise ValueError("gelu: approximate must be 'none' or 'tanh', got %r" % (approximate,))


def sigmoid(input: _jag.Tensor) -> _jag.Tensor:
    """1 / (1 + exp(-x)) elementwise.

    Example::

        >>> jag.nn.functional.sigmoid(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([0.1192, 0.5000, 0.7311], dtype=float32, size=[3])
    """
    return _op("sigmoid", input)


def tanh(input: _jag.Tensor) -> _jag.Tensor:
    """tanh(x) elementwise.

    Example::

        >>> jag.nn.functional.tanh(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([-0.9640, 0.0000, 0.7616], dtype=float32, size=[3])
    """
    return _op("tanh", input)


def _no_inplace(name, inplace):
    if inplace:
        raise NotImplementedError("%s(inplace=True) is not supported" % name)


def leaky_relu(input: _jag.Tensor, negative_slope: float = 0.01, inplace: bool = False) -> _jag.Tensor:
    """x if x > 0 else negative_slope * x.

    Example::

        >>> jag.nn.functional.leaky_relu(jag.tensor([-2.0, 3.0]), negative_slope=0.1)
        tensor([-0.2000, 3.0000], dtype=float32, size=[2])
    """
    _no_inplace("leaky_relu", inplace)
    return _op("leaky_relu", input, _builtins.float(negative_slope))


def elu(input: _jag.Tensor, alpha: float = 1.0, inplace: bool = False) -> _jag.Tensor:
    """x if x > 0 else alpha * (exp(x) - 1).

    Example::

        >>> jag.nn.functional.elu(jag.tensor([-1.0, 0.0, 2.0]), alpha=1.0)
        tensor([-0.6321, 0.0000, 2.0000], dtype=float32, size=[3])
    """
    _no_inplace("elu", inplace)
    return _op("elu", input, _builtins.float(alpha))


def selu(input: _jag.Tensor, inplace: bool = False) -> _jag.Tensor:
    """scale * elu(x, alpha) with torch's constants (alpha 1.6732..., scale 1.0507...).

    Example::

        >>> jag.nn.functional.selu(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([-1.5202, 0.0000, 1.0507], dtype=float32, size=[3])
    """
    _no_inplace("selu", inplace)
    return _op("selu", input)


def softplus(input: _jag.Tensor, beta: float = 1.0, threshold: float = 20.0) -> _jag.Tensor:
    """log(1 + exp(beta * x)) / beta, or x where beta * x > threshold.

    Example::

        >>> F = jag.nn.functional
        >>> F.softplus(jag.tensor([-1.0, 0.0, 1.0]))
        tensor([0.3133, 0.6931, 1.3133], dtype=float32, size=[3])
        >>> F.softplus(jag.tensor([30.0]))  # above the threshold: x itself
        tensor([30.0000], dtype=float32, size=[1])
    """
    return _op("softplus", input, _builtins.float(beta), _builtins.float(threshold))


def hardtanh(input: _jag.Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> _jag.Tensor:
    """min(max(x, min_val), max_val); the gradient is zero at the bounds, as torch.

    Example::

        >>> jag.nn.functional.hardtanh(jag.tensor([-3.0, 0.5, 3.0]))
        tensor([-1.0000, 0.5000, 1.0000], dtype=float32, size=[3])
        >>> jag.nn.functional.hardtanh(jag.tensor([-3.0, 0.5, 3.0]), min_val=-2.0, max_val=2.0)
        tensor([-2.0000, 0.5000, 2.0000], dtype=float32, size=[3])
    """
    _no_inplace("hardtanh", inplace)
    return _op("hardtanh", input, _builtins.float(min_val), _builtins.float(max_val))


def relu6(input: _jag.Tensor, inplace: bool = False) -> _jag.Tensor:
    """hardtanh(x, 0, 6).

    Example::

        >>> jag.nn.functional.relu6(jag.tensor([-1.0, 3.0, 8.0]))
        tensor([0.0000, 3.0000, 6.0000], dtype=float32, size=[3])
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def hardswish(input: _jag.Tensor, inplace: bool = False) -> _jag.Tensor:
    """x * relu6(x + 3) / 6.

    Example::

        >>> jag.nn.functional.hardswish(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([-0.3333, 0.0000, 0.6667], dtype=float32, size=[3])
    """
    _no_inplace("hardswish", inplace)
    return _op("hardswish", input)


def hardsigmoid(input: _jag.Tensor, inplace: bool = False) -> _jag.Tensor:
    """relu6(x + 3) / 6.

    Example::

        >>> jag.nn.functional.hardsigmoid(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([0.1667, 0.5000, 0.6667], dtype=float32, size=[3])
    """
    _no_inplace("hardsigmoid", inplace)
    return _op("hardsigmoid", input)


def mish(input: _jag.Tensor, inplace: bool = False) -> _jag.Tensor:
    """x * tanh(softplus(x)).

    Example::

        >>> jag.nn.functional.mish(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([-0.2525, 0.0000, 0.8651], dtype=float32, size=[3])
    """
    _no_inplace("mish", inplace)
    return _op("mish", input)


def logsigmoid(input: _jag.Tensor) -> _jag.Tensor:
    """log(sigmoid(x)), computed without overflow.

    Example::

        >>> jag.nn.functional.logsigmoid(jag.tensor([-2.0, 0.0, 1.0]))
        tensor([-2.1269, -0.6931, -0.3133], dtype=float32, size=[3])
    """
    return _op("logsigmoid", input)


def softmax(input: _jag.Tensor, dim: int, dtype: _typing.Any = None) -> _jag.Tensor:
    """exp(x) / sum(exp(x)) along ``dim``. On a jagged nested tensor along its
    ragged dim (dim 1), each component is normalised over its own length.

    Example::

        >>> nt = jag.nested.nested_tensor([jag.tensor([0.0, 0.0]), jag.tensor([1.0, 1.0, 1.0, 1.0])],
        ...                               layout=jag.jagged)
        >>> jag.nn.functional.softmax(nt, dim=1).values()
        tensor([0.5000, 0.5000, 0.2500, 0.2500, 0.2500, 0.2500], dtype=float32, size=[6])
    """
    return _jag.softmax(input, dim, dtype=dtype)


def log_softmax(input: _jag.Tensor, dim: int, dtype: _typing.Any = None) -> _jag.Tensor:
    """log(softmax(input, dim)), computed stably.

    Example::

        >>> F = jag.nn.functional
        >>> F.log_softmax(jag.tensor([[0.0, 0.0], [0.0, 1.0]]), dim=1)
        tensor([[-0.6931, -0.6931],
                [-1.3133, -0.3133]], dtype=float32, size=[2, 2])
        >>> nt = jag.nested.nested_tensor([[0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], layout=jag.jagged)
        >>> F.log_softmax(nt, dim=1).exp().values()  # each component over its own length
        tensor([0.5000, 0.5000, 0.2500, 0.2500, 0.2500, 0.2500], dtype=float32, size=[6])
    """
    return _jag.log_softmax(input, dim, dtype=dtype)


def _normalized_ndim(input, normalized_shape, name):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    n = len(normalized_shape)
    sizes = input._sizes  # trailing sizes none of them ragged: compared as they are, no shape object built
    if 1 <= n <= len(sizes) and -1 not in sizes[len(sizes) - n:] and tuple(sizes[len(sizes) - n:]) == normalized_shape:
        return n
    shape = input.shape
    if n < 1 or n > len(shape) or tuple(shape[-n:]) != normalized_shape:
        raise ValueError("%s: normalized_shape %s does not match the trailing dims of an input of shape %s"
                         % (name, list(normalized_shape), list(shape)))
    return n


def layer_norm(input: _jag.Tensor, normalized_shape: _typing.Any, weight: _typing.Optional[_jag.Tensor] = None,
               bias: _typing.Optional[_jag.Tensor] = None, eps: float = 1e-5) -> _jag.Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing dims
    ``normalized_shape`` (biased variance, as torch); each row of a nested
    tensor on its own.

    Example::

        >>> x = jag.nested.nested_tensor([jag.tensor([[1.0, 3.0]]), jag.tensor([[2.0, 2.0], [0.0, 4.0]])],
        ...                              layout=jag.jagged)
        >>> jag.nn.functional.layer_norm(x, (2,)).values()
        tensor([[-1.0000, 1.0000],
                [0.0000, 0.0000],
                [-1.0000, 1.0000]], dtype=float32, size=[3, 2])

    On a jagged tensor, ``normalized_shape`` may also reach the ragged dim,
    as torch allows (``F.layer_norm(nt, nt.shape[1:])``, ``(nt.shape[1], D)``):
    each component is then normalized over all of its elements in those
    dims, holes (lengths) included, and the result is differentiable. There
    ``weight`` and ``bias`` must be None: a weight over a ragged dim has no
    meaning (torch 2.15 accepts them there and ignores them).
    """
    n = _normalized_ndim(input, normalized_shape, "layer_norm")
    # (a ragged dim among the normalized ones is a -1 among their sizes)
    tail_ragged = input.is_nested and -1 in input._sizes[input.dim() - n:]
    ragged = getattr(input, "_ragged_idx", 0) if tail_ragged else 0
    if ragged and input.dim() - n <= ragged:
        return _layer_norm_over_ragged(input, n, weight, bias, _builtins.float(eps))
    return _op("layer_norm", input, n, weight, bias, _builtins.float(eps))


def _layer_norm_over_ragged(input, n, weight, bias, eps):
    """layer_norm of a jagged tensor over its last n dims, the ragged one
    among them: per component, from differentiable ops (a mean over the
    ragged dim with keepdim is dense, one value per component)."""
    if weight is not None or bias is not None:
        raise ValueError("layer_norm: normalized_shape %s reaches the ragged dim (%d) of a jagged tensor of shape %s; "
                         "weight and bias must be None there (expected no affine transform over a ragged dim)"
                         % (list(input.shape[-n:]), input._ragged_idx, list(input.shape)))
    dims = tuple(range(input.dim() - n, input.dim()))
    centered = input - input.mean(dim=dims, keepdim=True)
    var = (centered * centered).mean(dim=dims, keepdim=True)  # biased, as torch
    return centered * _jag.rsqrt(var + eps)


def rms_norm(input: _jag.Tensor, normalized_shape: _typing.Any, weight: _typing.Optional[_jag.Tensor] = None,
             eps: _typing.Optional[float] = None) -> _jag.Tensor:
    """eps=None uses the dtype's machine epsilon, as torch.

    Example::

        >>> x = jag.tensor([[3.0, 4.0], [1.0, 1.0]])
        >>> jag.nn.functional.rms_norm(x, (2,))  # x / sqrt(mean(x^2) + eps)
        tensor([[0.8485, 1.1314],
                [1.0000, 1.0000]], dtype=float32, size=[2, 2])
        >>> jag.nn.functional.rms_norm(x, (2,), weight=jag.tensor([1.0, 0.5]), eps=0.0)
        tensor([[0.8485, 0.5657],
                [1.0000, 0.5000]], dtype=float32, size=[2, 2])
    """
    n = _normalized_ndim(input, normalized_shape, "rms_norm")
    if eps is None:  # torch.finfo(dtype).eps: 2^-23, 2^-52, 2^-10, 2^-7
        eps = {"float64": 2.0 ** -52, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}.get(str(input.dtype).split(".")[-1],
                                                                                       2.0 ** -23)
    return _op("rms_norm", input, n, weight, _builtins.float(eps))


def linear(input: _jag.Tensor, weight: _jag.Tensor, bias: _typing.Optional[_jag.Tensor] = None) -> _jag.Tensor:
    """input @ weight.T + bias.

    Example::

        >>> x = jag.tensor([[1.0, 2.0]])
        >>> w = jag.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])  # (out, in)
        >>> jag.nn.functional.linear(x, w, jag.tensor([0.0, 0.0, 10.0]))
        tensor([[1.0000, 3.0000, 14.0000]], dtype=float32, size=[1, 3])
        >>> nt = jag.nested.nested_tensor([jag.ones(2, 2), jag.ones(1, 2)], layout=jag.jagged)
        >>> jag.nn.functional.linear(nt, w).shape  # (B, j, in) -> (B, j, out)
        (2, j..., 3)
    """
    return _op("linear", input, weight, bias)


def embedding(input: _jag.Tensor, weight: _jag.Tensor) -> _jag.Tensor:
    """The rows of ``weight`` at the indices in ``input`` (dense or nested):
    the result has input's shape plus weight's row size.

    Example::

        >>> w = jag.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
        >>> jag.nn.functional.embedding(jag.tensor([2, 1]), w)
        tensor([[3.0000, 4.0000],
                [1.0000, 2.0000]], dtype=float32, size=[2, 2])
    """
    return _op("embedding", weight, input)


def dropout(input: _jag.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
            generator: _typing.Any = None) -> _jag.Tensor:
    """Inverted dropout: each element zeroed with probability p, the rest
    scaled by 1 / (1 - p); identity when not training. generator: a
    jag.Generator (the same seed gives the same mask). Dense and nested.

    Example::

        >>> F = jag.nn.functional
        >>> x = jag.ones(8)
        >>> y = F.dropout(x, p=0.5, generator=jag.Generator(0))
        >>> sorted(set(y.tolist()))  # zeros, and the kept elements scaled by 1 / (1 - p)
        [0.0, 2.0]
        >>> jag.allclose(F.dropout(x, p=0.5, training=False), x)  # the identity outside training
        True
    """
    if inplace:
        raise NotImplementedError("dropout: inplace=True is not supported")
    g = None if generator is None else _jag._generator_arg(generator, None)
    return _jag._C._dropout(input, _builtins.float(p), _builtins.bool(training), g)


def _mean_only(name, reduction):
    if reduction != "mean":
        raise NotImplementedError("%s: only reduction='mean' is supported, got %r" % (name, reduction))


def cross_entropy(input: _jag.Tensor, target: _jag.Tensor, reduction: str = "mean") -> _jag.Tensor:
    """-mean over tokens of log_softmax(input)[target]: input (N, C) with an
    integer target (N), or a jagged (B, j, C) with a jagged (B, j) target of
    the same raggedness (padding and holes excluded).

    Example::

        >>> logits = jag.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        >>> jag.nn.functional.cross_entropy(logits, jag.tensor([0, 2]))
        tensor(0.6691, dtype=float32, size=[])
        >>> nt = jag.nested.nested_tensor([jag.zeros(2, 4), jag.zeros(1, 4)], layout=jag.jagged)  # (B, j, C)
        >>> target = jag.nested.nested_tensor([jag.tensor([1, 2]), jag.tensor([3])], layout=jag.jagged)
        >>> jag.nn.functional.cross_entropy(nt, target)  # log(4), the mean over 3 tokens
        tensor(1.3863, dtype=float32, size=[])
    """
    _mean_only("cross_entropy", reduction)
    return _jag._C._cross_entropy(input, target)


def mse_loss(input: _jag.Tensor, target: _jag.Tensor, reduction: str = "mean") -> _jag.Tensor:
    """Mean of (input - target)^2 over every real element (dense, or nested
    with the same raggedness).

    Example::

        >>> jag.nn.functional.mse_loss(jag.tensor([1.0, 2.0, 3.0]), jag.tensor([1.0, 2.0, 5.0]))
        tensor(1.3333, dtype=float32, size=[])
        >>> a = jag.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=jag.jagged)
        >>> b = jag.nested.nested_tensor([[1.0, 4.0], [3.0]], layout=jag.jagged)
        >>> jag.nn.functional.mse_loss(a, b)  # 4 / 3 real elements
        tensor(1.3333, dtype=float32, size=[])
    """
    _mean_only("mse_loss", reduction)
    return _jag._C._mse_loss(input, target)


def _heads(t):
    """The number of heads of an attention operand: dim -3 of a dense (..., H,
    L, D); dim 1 of a jagged (B, H, j, D) (ragged dim 2), else dim 2 of a
    jagged (B, j, H, D)."""
    if t.is_nested:
        return t.shape[1] if t._ragged_idx == 2 else t.shape[2]
    return t.shape[-3] if t.ndim >= 3 else 1


def scaled_dot_product_attention(query: _jag.Tensor, key: _jag.Tensor, value: _jag.Tensor,
                                 attn_mask: _typing.Optional[_jag.Tensor] = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: _typing.Optional[float] = None,
                                 enable_gqa: bool = False) -> _jag.Tensor:
    """softmax(q k^T * scale + attn_mask [causal]) v for dense (B, H, L, D)
    or jagged inputs, either in torch's layout (B, H, j, D) (``x.transpose(1,
    2)`` of a (B, j, H, D) tensor, no copy) or (B, j, H, D) itself
    (per-item lengths). enable_gqa=True (as torch): fewer key/value heads
    than query heads, each serving H_q / H_kv query heads. attn_mask:
    additive float, or bool (True takes part), dense and broadcast to
    (B, H, Lq, Lk) for dense inputs, a strided nested tensor of (Lq_b, Lk_b)
    per item for jagged ones. scale None: 1/sqrt(D). dropout_p > 0 (as
    torch's functional, whether or not a module is training): the attention
    weights go through jag.nn.functional.dropout (each zeroed with
    probability dropout_p, the rest scaled by 1 / (1 - dropout_p)) before
    the product with v; the mask comes from the generator jag.manual_seed
    seeds, one draw over the (..., H, Lq, Lk) weights (jagged: one per
    component, in order). float16 / bfloat16 inputs are computed in float32
    and the result rounded once to their dtype (as torch's CPU attention).

    Example::

        >>> q = jag.nested.nested_tensor([jag.randn(3, 2, 4), jag.randn(1, 2, 4)], layout=jag.jagged)  # (B, j, H, D)
        >>> out = jag.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), q.transpose(1, 2),
        ...                                                      q.transpose(1, 2))  # (B, H, j, D)
        >>> [c.shape for c in out.transpose(1, 2).unbind()]
        [(3, 2, 4), (1, 2, 4)]
    """
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError("scaled_dot_product_attention: dropout_p must be in [0, 1], got %r" % (dropout_p,))
    half = query.dtype
    if half in (_jag.float16, _jag.bfloat16):
        if key.dtype is not half or value.dtype is not half:
            raise RuntimeError("scaled_dot_product_attention: query, key and value must have the same dtype, got "
                               "%s, %s and %s" % (half, key.dtype, value.dtype))
        # The op computes half inputs in float32 itself. Dropout's weights,
        # and a float32 mask (torch takes one with half inputs, unrounded),
        # take the float32 path here, the result rounded once.
        if dropout_p > 0.0 or (attn_mask is not None and attn_mask.dtype is _jag.float32):
            wide = (attn_mask.float() if attn_mask is not None and attn_mask.dtype is half else attn_mask)
            return scaled_dot_product_attention(query.float(), key.float(), value.float(), wide, dropout_p,
                                                is_causal, scale, enable_gqa).to(half)
    hq, hk, hv = _heads(query), _heads(key), _heads(value)
    if hk != hv:
        raise RuntimeError("scaled_dot_product_attention: key has %d heads and value %d, expected the same" % (hk, hv))
    if hq != hk and not enable_gqa:  # torch: grouped-query heads only with enable_gqa=True
        raise RuntimeError("scaled_dot_product_attention: query has %d heads and key/value %d; pass enable_gqa=True "
                           "for grouped-query attention (query heads a multiple of key/value heads)" % (hq, hk))
    sc = 0.0 if scale is None else _builtins.float(scale)
    if attn_mask is not None and attn_mask.dtype is _jag.bool:  # True: take part, as torch
        attn_mask = _jag.where(attn_mask, 0.0, float("-inf")).to(query.dtype)
    if dropout_p > 0.0:
        sc = 1.0 / _math.sqrt(query.shape[-1]) if scale is None else sc
        if query.is_nested:
            return _nested_attention_with_dropout(query, key, value, attn_mask, _builtins.bool(is_causal), sc,
                                                  _builtins.float(dropout_p))
        return _attention_with_dropout(query, key, value, attn_mask, _builtins.bool(is_causal), sc,
                                       _builtins.float(dropout_p))
    if attn_mask is None:
        out, _ = _op("scaled_dot_product_attention", query, key, value, _builtins.bool(is_causal), sc)
        return out
    out, _ = _op("scaled_dot_product_attention_masked", query, key, value, attn_mask, _builtins.bool(is_causal), sc)
    return out


def _repeat_heads(t, heads):
    """Dense (..., H, L, D) t with each head (dim -3) repeated heads / H times
    in a row: the key/value heads of grouped-query attention."""
    h = t.shape[-3]
    if h == heads:
        return t
    index = _jag.tensor([i // (heads // h) for i in range(heads)], dtype=_jag.int64)
    return _jag.index_select(t, t.ndim - 3, index)


def _attention_with_dropout(q, k, v, attn_mask, is_causal, scale, p):
    """dropout(softmax(q k^T * scale + attn_mask [causal]), p) @ v for dense
    (..., H, L, D) operands, from differentiable ops: the weights' mask is
    one jag.nn.functional.dropout draw over the (..., H, Lq, Lk) weights."""
    if q.ndim >= 3:
        k, v = _repeat_heads(k, q.shape[-3]), _repeat_heads(v, q.shape[-3])
    scores = (q @ k.transpose(-2, -1)) * scale
    if attn_mask is not None:
        scores = scores + attn_mask
    if is_causal:  # torch: row i attends to columns 0..i (the top-left triangle)
        lq, lk = scores.shape[-2], scores.shape[-1]
        causal = _jag.tensor([[j <= i for j in range(lk)] for i in range(lq)], dtype=_jag.bool)
        scores = scores + _jag.where(causal, 0.0, float("-inf")).to(scores.dtype)
    return dropout(_jag.softmax(scores, -1), p, training=True) @ v


def _nested_attention_with_dropout(query, key, value, attn_mask, is_causal, scale, p):
    """_attention_with_dropout per component of jagged operands, in either
    layout, the masks drawn component after component; the output has the
    query's offsets (the same ragged dim) and layout."""
    if not (key.is_nested and value.is_nested):
        raise ValueError("scaled_dot_product_attention: query is nested, so key and value must be nested too")
    if query.lengths() is not None:
        raise NotImplementedError("scaled_dot_product_attention: dropout_p > 0 with a query with holes "
                                  "(lengths()) is not supported")
    if attn_mask is not None and not attn_mask.is_nested:
        raise ValueError("scaled_dot_product_attention: with jagged inputs, attn_mask must be a nested tensor of "
                         "(Lq_b, Lk_b) per item")

    def heads_first(t):  # the components as (H, n_b, D)
        parts = t.unbind()
        return parts if t._ragged_idx == 2 else [c.transpose(0, 1) for c in parts]

    qs, ks, vs = heads_first(query), heads_first(key), heads_first(value)
    masks = attn_mask.unbind() if attn_mask is not None else [None] * len(qs)
    outs = [_attention_with_dropout(q, k, v, m, is_causal, scale, p) for q, k, v, m in zip(qs, ks, vs, masks)]
    rows = _jag.cat([o.transpose(0, 1) for o in outs], 0)  # (sum n_b, H, D)
    out = _jag.nested.nested_tensor_from_jagged(rows, query.offsets())
    return out.transpose(1, 2) if query._ragged_idx == 2 else out


def embedding_bag(input: _typing.Any, weight: _jag.Tensor, offsets: _typing.Any = None, mode: str = "mean",
                  per_sample_weights: _typing.Optional[_jag.Tensor] = None, include_last_offset: bool = False,
                  padding_idx: _typing.Optional[int] = None, max_norm: _typing.Optional[float] = None) -> _jag.Tensor:
    """Sums, means or maxima of bags of embedding rows, as torch: input (B, L)
    of fixed-size bags, or 1-D indices with ``offsets`` (the start of each
    bag; include_last_offset: offsets has B + 1 entries). Differentiable
    (weight and per_sample_weights); an empty bag gives zeros. per_sample_weights
    (mode "sum" only) scales each row first.

    Example::

        >>> w = jag.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
        >>> # bags [1] and [2, 2]
        >>> jag.nn.functional.embedding_bag(jag.tensor([1, 2, 2]), w, jag.tensor([0, 1]), mode="sum")
        tensor([[1.0000, 2.0000],
                [6.0000, 8.0000]], dtype=float32, size=[2, 2])
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError("embedding_bag: mode must be 'sum', 'mean' or 'max', got %r" % (mode,))
    if padding_idx is not None or max_norm is not None:
        raise NotImplementedError("embedding_bag: padding_idx and max_norm are not supported")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights needs mode='sum', as torch")
    if not isinstance(input, _jag.Tensor):
        input = _jag.tensor(input)
    if input.ndim == 1 and offsets is not None and weight.dtype in (_jag.float32, _jag.float64):
        # bags given by offsets: the embedding_bag op, one pass over the
        # rows without gathering them first (its derivative rule gives the
        # weight's and per_sample_weights' gradients)
        bounds = offsets if isinstance(offsets, _jag.Tensor) else _jag.tensor(offsets, dtype=_jag.int64)
        bounds = bounds.to(_jag.int64)
        if not include_last_offset:
            bounds = _jag.cat([bounds, _jag.tensor([input.shape[0]], dtype=_jag.int64)])
        return _C._op("embedding_bag", weight, input, bounds, {"sum": 0, "mean": 1, "max": 2}[mode],
                      per_sample_weights)
    rows = embedding(input, weight)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(-1)
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None for a 2-D input")
        if mode == "sum":
            return _jag.sum(rows, 1)
        if mode == "mean":
            return _jag.mean(rows, 1)
        return _jag.amax(rows, 1)
    if input.ndim != 1:
        raise ValueError("embedding_bag: input must be 1-D (with offsets) or 2-D, got %d dims" % input.ndim)
    if offsets is None:
        raise ValueError("embedding_bag: a 1-D input needs offsets")
    offs = [int(o) for o in (offsets.tolist() if isinstance(offsets, _jag.Tensor) else offsets)]
    if not include_last_offset:
        offs = offs + [input.shape[0]]
    nt = _jag.nested.nested_tensor_from_jagged(rows, offs)
    lengths = [b - a for a, b in zip(offs[:-1], offs[1:])]
    if mode == "sum":
        return _jag.sum(nt, 1)
    if mode == "mean":
        counts = _jag.tensor([[float(max(n, 1))] for n in lengths], dtype=weight.dtype)
        return _jag.sum(nt, 1) / counts
    if all(lengths):
        return _jag.amax(nt, 1)
    padded = _jag.nested.to_padded_tensor(nt, float("-inf"))  # (B, max L, D); empty bags stay -inf
    best = _jag.amax(padded, 1)
    return _jag.where(best == float("-inf"), 0.0, best)
