"""torch.optim.Adam and AdamW over jag's fused C step."""
from __future__ import annotations

import typing as _typing

import jag as _jag
from jag import _C

from .optimizer import Optimizer


class Adam(Optimizer):
    """Adam, torch.optim.Adam's update (one fused C call per parameter
    group), with t the parameter's step count:

        g = grad + weight_decay * p              (L2; AdamW decays p instead)
        m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g
        amsgrad: v_max = max(v_max, v), used for v below
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    State per parameter: "step" (a float32 scalar tensor), "exp_avg",
    "exp_avg_sq" and with amsgrad "max_exp_avg_sq".

    Example::

        >>> w = jag.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = jag.optim.Adam([w], lr=0.1)
        >>> (w * w).sum().backward()
        >>> opt.step()  # the first step moves each entry by about lr
        >>> w.detach()
        tensor([0.9000, 1.9000], dtype=float32, size=[2])
    """

    _decoupled = False

    def __init__(self, params: _typing.Iterable[_typing.Any], lr: float = 1e-3,
                 betas: _typing.Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 amsgrad: bool = False, *, foreach: _typing.Any = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False, fused: _typing.Any = None) -> None:
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: %s" % lr)
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: %s" % eps)
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: %s" % betas[0])
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: %s" % betas[1])
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: %s" % weight_decay)
        if maximize or capturable or differentiable:
            raise NotImplementedError("%s: maximize, capturable and differentiable are not supported"
                                      % type(self).__name__)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def _step_group(self, group):
        amsgrad = bool(group["amsgrad"])
        params, grads, ms, vs, vmax, steps = [], [], [], [], [], []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _jag.tensor(0.0, dtype=_jag.float32)
                state["exp_avg"] = _jag.zeros_like(p)
                state["exp_avg_sq"] = _jag.zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = _jag.zeros_like(p)
            elif amsgrad and "max_exp_avg_sq" not in state:
                state["max_exp_avg_sq"] = _jag.zeros_like(p)
            params.append(p)
            grads.append(g)
            ms.append(state["exp_avg"])
            vs.append(state["exp_avg_sq"])
            if amsgrad:
                vmax.append(state["max_exp_avg_sq"])
            steps.append(state["step"])
        if not params:
            return
        beta1, beta2 = group["betas"]
        _C._adam_step(params, grads, ms, vs, vmax if amsgrad else None, steps, float(group["lr"]), float(beta1),
                      float(beta2), float(group["eps"]), float(group["weight_decay"]), amsgrad, self._decoupled)


class AdamW(Adam):
    """AdamW: Adam with decoupled weight decay (torch.optim.AdamW): before
    the Adam update p = p * (1 - lr * weight_decay), and the gradient is
    not changed. weight_decay defaults to 1e-2.

    Example::

        >>> w = jag.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = jag.optim.AdamW([w], lr=0.1)
        >>> (w * w).sum().backward()
        >>> opt.step()  # w * (1 - 0.1 * 0.01), then about lr less
        >>> w.detach()
        tensor([0.8990, 1.8980], dtype=float32, size=[2])
    """

    _decoupled = True

    def __init__(self, params: _typing.Iterable[_typing.Any], lr: float = 1e-3,
                 betas: _typing.Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 amsgrad: bool = False, *, foreach: _typing.Any = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False, fused: _typing.Any = None) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=foreach, maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused)
