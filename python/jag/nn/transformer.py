"""EmbeddingBag, MultiheadAttention, TransformerEncoderLayer and
TransformerEncoder with torch.nn's parameters, names and initialisation; jagged nested inputs go
through the nested attention op without padding."""
from __future__ import annotations

import copy as _copy
import math as _math
import typing as _typing

import jag as _jag

from . import functional as F
from . import init
from .module import Module
from .modules import Dropout, LayerNorm, Linear, ModuleList, _float_dtype
from .parameter import Parameter

__all__ = ["EmbeddingBag", "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"]


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embedding rows (weight N(0, 1)):
    input (B, L) of fixed bags, 1-D indices with ``offsets``, or a jagged
    nested (B, j) tensor of indices, one bag per component.

    Example::

        >>> bag = jag.nn.EmbeddingBag(10, 3, mode="sum")
        >>> idx = jag.nested.nested_tensor([jag.tensor([1, 2, 4]), jag.tensor([7])], layout=jag.jagged)
        >>> bag(idx).shape  # one row per bag
        (2, 3)
        >>> bag
        EmbeddingBag(10, 3, mode='sum')
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: _typing.Optional[float] = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: _typing.Optional[_jag.Tensor] = None, include_last_offset: bool = False,
                 padding_idx: _typing.Optional[int] = None, dtype: _typing.Any = None,
                 generator: _typing.Any = None) -> None:
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse or padding_idx is not None:
            raise NotImplementedError("EmbeddingBag: max_norm, scale_grad_by_freq, sparse and padding_idx are not "
                                      "supported")
        if mode not in ("sum", "mean", "max"):
            raise ValueError("mode has to be one of sum, mean or max")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.mode = mode
        self.include_last_offset = include_last_offset
        self.padding_idx = None
        if _weight is None:
            self.weight = Parameter(_jag.empty(num_embeddings, embedding_dim, dtype=_float_dtype(dtype)))
            init.normal_(self.weight, generator=generator)
        else:
            self.weight = Parameter(_weight)

    def forward(self, input: _typing.Any, offsets: _typing.Any = None,
                per_sample_weights: _typing.Optional[_jag.Tensor] = None) -> _jag.Tensor:
        """F.embedding_bag; a nested input is its values with its offsets.

        Example::

            >>> w = jag.tensor([[1.0, 0.0], [0.0, 2.0], [4.0, 4.0]])
            >>> bag = jag.nn.EmbeddingBag(3, 2, mode="mean", _weight=w)
            >>> bag(jag.tensor([0, 1, 2, 2]), offsets=jag.tensor([0, 2])).detach()  # bags [0, 1] and [2, 2]
            tensor([[0.5000, 1.0000],
                    [4.0000, 4.0000]], dtype=float32, size=[2, 2])
            >>> bag(jag.tensor([[0, 2], [1, 1]])).detach()  # fixed-size bags
            tensor([[2.5000, 2.0000],
                    [0.0000, 2.0000]], dtype=float32, size=[2, 2])
        """
        if isinstance(input, _jag.Tensor) and input.is_nested:
            if offsets is not None:
                raise ValueError("EmbeddingBag: offsets must be None for a nested input")
            if input.lengths() is not None:
                raise NotImplementedError("EmbeddingBag: nested indices with holes (lengths) are not supported")
            psw = per_sample_weights.values() if per_sample_weights is not None else None
            return F.embedding_bag(input.values(), self.weight, input.offsets(), self.mode, psw,
                                   include_last_offset=True)
        return F.embedding_bag(input, self.weight, offsets, self.mode, per_sample_weights, self.include_last_offset)

    def extra_repr(self) -> str:
        """The settings shown in the module's repr.

        Example::

            >>> jag.nn.EmbeddingBag(10, 3, mode="max").extra_repr()
            "10, 3, mode='max'"
        """
        return "%d, %d, mode=%r" % (self.num_embeddings, self.embedding_dim, self.mode)


class MultiheadAttention(Module):
    """softmax(q k^T / sqrt(head_dim) + mask) v over num_heads heads, with
    torch's parameters: in_proj_weight (3E, E) (xavier_uniform_),
    in_proj_bias (3E) zeros, out_proj a Linear(E, E) with zero bias.
    Inputs (L, B, E), or (B, L, E) with batch_first=True; jagged nested
    (B, j, E) inputs need batch_first=True (as torch) and need_weights=False;
    query and key/value may be nested tensors of different lengths per item
    (cross-attention), and attn_mask a strided nested tensor of (L_b, S_b)
    additive (float) or bool masks.
    num_kv_heads (a jag extension; torch's module has no such argument):
    grouped-query attention with fewer key/value heads, each shared by
    num_heads / num_kv_heads query heads; in_proj_weight is then
    (E + 2 * num_kv_heads * head_dim, E), query rows first.
    dropout: the probability of zeroing an attention weight while training
    (kept ones scaled by 1 / (1 - dropout)), as torch's module; the weights
    returned with need_weights are the ones after dropout, as torch's.

    Example::

        >>> mha = jag.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = jag.nested.nested_tensor([jag.randn(3, 8), jag.randn(2, 8)], layout=jag.jagged)
        >>> out, weights = mha(x, x, x, need_weights=False)
        >>> [c.shape for c in out.unbind()], weights
        ([(3, 8), (2, 8)], None)
        >>> dense = jag.randn(2, 5, 8)
        >>> out, weights = mha(dense, dense, dense)
        >>> out.shape, weights.shape
        ((2, 5, 8), (2, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: _typing.Optional[int] = None,
                 vdim: _typing.Optional[int] = None, batch_first: bool = False, dtype: _typing.Any = None,
                 generator: _typing.Any = None, num_kv_heads: _typing.Optional[int] = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError("embed_dim and num_heads must be greater than 0, got embed_dim=%s and num_heads=%s"
                             % (embed_dim, num_heads))
        if add_bias_kv or add_zero_attn or (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim != embed_dim "
                                      "are not supported")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError("MultiheadAttention: dropout probability has to be between 0 and 1, but got %r" % (dropout,))
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        kv = num_heads if num_kv_heads is None else num_kv_heads
        if not isinstance(kv, int) or isinstance(kv, bool) or kv <= 0 or num_heads % kv:
            raise ValueError("MultiheadAttention: num_kv_heads must be a positive divisor of num_heads=%d, got %r"
                             % (num_heads, num_kv_heads))
        self.num_kv_heads = kv
        rows = embed_dim + 2 * kv * self.head_dim
        dt = _float_dtype(dtype)
        self.in_proj_weight = Parameter(_jag.empty(rows, embed_dim, dtype=dt))
        if bias:
            self.in_proj_bias = Parameter(_jag.empty(rows, dtype=dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dt, generator=generator)
        self._reset_parameters(generator)

    def _reset_parameters(self, generator=None):
        init.xavier_uniform_(self.in_proj_weight, generator=generator)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _proj(self, x, k):
        """x projected by block k of in_proj (0: query, 1: key, 2: value)."""
        E, KV = self.embed_dim, self.num_kv_heads * self.head_dim
        lo, hi = (0, E) if k == 0 else (E + (k - 1) * KV, E + k * KV)
        w = self.in_proj_weight[lo:hi]
        b = self.in_proj_bias[lo:hi] if self.in_proj_bias is not None else None
        return F.linear(x, w, b)

    def forward(self, query: _jag.Tensor, key: _jag.Tensor, value: _jag.Tensor,
                key_padding_mask: _typing.Optional[_jag.Tensor] = None, need_weights: bool = True,
                attn_mask: _typing.Optional[_jag.Tensor] = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> _typing.Tuple[_jag.Tensor, _typing.Optional[_jag.Tensor]]:
        """(attn_output, attn_weights): attn_weights (B, L, S) averaged over
        heads (or (B, H, L, S)) when need_weights, else None.

        Example::

            >>> jag.manual_seed(0)
            >>> mha = jag.nn.MultiheadAttention(4, 2)  # (L, B, E) inputs by default
            >>> q, kv = jag.randn(3, 2, 4), jag.randn(5, 2, 4)
            >>> out, w = mha(q, kv, kv)
            >>> out.shape, w.shape  # weights averaged over heads
            ((3, 2, 4), (2, 3, 5))
            >>> mha(q, kv, kv, average_attn_weights=False)[1].shape
            (2, 2, 3, 5)
        """
        if key_padding_mask is not None:
            raise NotImplementedError("MultiheadAttention: key_padding_mask is not supported; use nested inputs")
        nested = query.is_nested
        if nested:
            if not self.batch_first:
                raise AssertionError("nested tensor inputs to MultiheadAttention need batch_first=True")
            if need_weights:
                raise AssertionError("need_weights must be False for nested tensor inputs (as torch)")
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        B = query.shape[0]
        H, Dh, E = self.num_heads, self.head_dim, self.embed_dim

        def heads(x, n):  # (B, L, n Dh) -> (B, n, L, Dh)
            return x.reshape(B, -1, n, Dh).transpose(1, 2)

        KV = self.num_kv_heads
        q, k, v = heads(self._proj(query, 0), H), heads(self._proj(key, 1), KV), heads(self._proj(value, 2), KV)
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            if KV != H:  # each key/value head serves H / KV query heads in a row
                S = k.shape[2]
                k, v = (t.unsqueeze(2).expand(B, KV, H // KV, S, Dh).reshape(B, H, S, Dh) for t in (k, v))
            scores = (q @ k.transpose(-2, -1)) * (1.0 / _math.sqrt(Dh))
            if is_causal and attn_mask is None:
                L, S = scores.shape[-2], scores.shape[-1]
                attn_mask = _jag.tensor([[j <= i for j in range(S)] for i in range(L)], dtype=_jag.bool)
            if attn_mask is not None:
                if attn_mask.dtype is _jag.bool:
                    attn_mask = _jag.where(attn_mask, 0.0, float("-inf")).to(scores.dtype)
                scores = scores + attn_mask
            weights = _jag.softmax(scores, -1)
            if p > 0:
                weights = F.dropout(weights, p)
            out = weights @ v
            if average_attn_weights:
                weights = _jag.mean(weights, 1)
        else:
            # is_causal with a mask: torch's module drops the mask and keeps
            # is_causal (the mask is taken to be the causal one it hints at)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if is_causal else attn_mask, dropout_p=p,
                                                 is_causal=is_causal, enable_gqa=KV != H)
        out = self.out_proj(out.transpose(1, 2).reshape(B, -1, E))
        if not nested and not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights


class TransformerEncoderLayer(Module):
    """torch's encoder layer: self-attention then a feed-forward block
    (linear1, activation, dropout, linear2), each added to its input, with
    LayerNorms after (norm_first=False) or before (norm_first=True). Dense
    or jagged nested (B, j, d_model) inputs (nested: batch_first=True).

    Example::

        >>> layer = jag.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
        >>> x = jag.nested.nested_tensor([jag.randn(4, 8), jag.randn(1, 8)], layout=jag.jagged)
        >>> [c.shape for c in layer(x).unbind()]
        [(4, 8), (1, 8)]
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: _typing.Any = "relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, dtype: _typing.Any = None,
                 generator: _typing.Any = None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first, dtype=dtype,
                                            generator=generator)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype, generator=generator)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype, generator=generator)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation == "relu":
                activation = F.relu
            elif activation == "gelu":
                activation = F.gelu
            else:
                raise RuntimeError("activation should be relu/gelu, not %s" % activation)
        self.activation = activation

    def _sa_block(self, x, attn_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)

    def forward(self, src: _jag.Tensor, src_mask: _typing.Optional[_jag.Tensor] = None,
                src_key_padding_mask: _typing.Optional[_jag.Tensor] = None, is_causal: bool = False) -> _jag.Tensor:
        """The layer on src (see the class).

        Example::

            >>> layer = jag.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, norm_first=True).eval()
            >>> src = jag.randn(5, 3, 8)  # (L, B, E)
            >>> layer(src, is_causal=True).shape  # each position attends to itself and earlier ones
            (5, 3, 8)
        """
        if src_key_padding_mask is not None:
            raise NotImplementedError("TransformerEncoderLayer: src_key_padding_mask is not supported; use nested "
                                      "inputs")
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


def _clone_module(module):
    """A deep copy of module with its own parameters and buffers (copies of
    the data, same requires_grad), as torch's copy.deepcopy of a module."""
    memo = {}
    for m in module.modules():
        for p in m._parameters.values():
            if p is not None and id(p) not in memo:
                memo[id(p)] = Parameter(p.detach().clone(), p.requires_grad)
        for b in m._buffers.values():
            if b is not None and id(b) not in memo:
                memo[id(b)] = b.detach().clone()
    return _copy.deepcopy(module, memo)


class TransformerEncoder(Module):
    """torch's stack of ``num_layers`` copies of ``encoder_layer`` (each an
    independent deep copy: the layers start equal and train apart, as in
    torch), then the optional final ``norm``. Dense or jagged nested
    (B, j, d_model) inputs; nested inputs need no padding mask, so
    ``enable_nested_tensor`` and ``mask_check`` are accepted for torch's
    signature and change nothing.

    Example::

        >>> layer = jag.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
        >>> enc = jag.nn.TransformerEncoder(layer, num_layers=2)
        >>> nt = jag.nested.nested_tensor([jag.randn(3, 8), jag.randn(2, 8)], layout=jag.jagged)
        >>> [c.shape for c in enc(nt).unbind()]
        [(3, 8), (2, 8)]
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: _typing.Optional[Module] = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError("TransformerEncoder: encoder_layer must be a jag.nn.Module, got %s"
                            % type(encoder_layer).__name__)
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
            raise ValueError("TransformerEncoder: num_layers must be an int >= 1, got %r" % (num_layers,))
        self.layers = ModuleList([_clone_module(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src: _jag.Tensor, mask: _typing.Optional[_jag.Tensor] = None,
                src_key_padding_mask: _typing.Optional[_jag.Tensor] = None,
                is_causal: _typing.Optional[bool] = None) -> _jag.Tensor:
        """The layers in order on src, then norm (see the class).

        Example::

            >>> layer = jag.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
            >>> enc = jag.nn.TransformerEncoder(layer, num_layers=2, norm=jag.nn.LayerNorm(8)).eval()
            >>> enc(jag.randn(2, 5, 8)).shape
            (2, 5, 8)
        """
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            x = self.norm(x)
        return x
