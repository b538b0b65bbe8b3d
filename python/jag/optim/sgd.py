"""torch.optim.SGD over jag's fused C step."""
from __future__ import annotations

import typing as _typing

from jag import _C

from .optimizer import Optimizer


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, weight decay
    and Nesterov momentum, torch.optim.SGD's update (one fused C call per
    parameter group):

        d = grad + weight_decay * p
        buf = d (first step) or momentum * buf + (1 - dampening) * d
        d = d + momentum * buf (nesterov) or buf
        p = p - lr * d

    Example::

        >>> w = jag.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = jag.optim.SGD([w], lr=0.1)
        >>> opt.zero_grad()
        >>> (w * w).sum().backward()  # grad = 2 w = [2, 4]
        >>> opt.step()
        >>> w.detach()
        tensor([0.8000, 1.6000], dtype=float32, size=[2])
    """

    def __init__(self, params: _typing.Iterable[_typing.Any], lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: _typing.Any = None, differentiable: bool = False, fused: _typing.Any = None) -> None:
        if lr < 0.0:
            raise ValueError("Invalid learning rate: %s" % lr)
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: %s" % momentum)
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: %s" % weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if maximize or differentiable:
            raise NotImplementedError("SGD: maximize and differentiable are not supported")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _step_group(self, group):
        params, grads, bufs = [], [], []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            params.append(p)
            grads.append(g)
            bufs.append(self.state[p].get("momentum_buffer"))
        if not params:
            return
        momentum = float(group["momentum"])
        new = _C._sgd_step(params, grads, bufs, float(group["lr"]), momentum, float(group["dampening"]),
                           float(group["weight_decay"]), bool(group["nesterov"]))
        if momentum != 0:
            for p, b in zip(params, new):
                self.state[p]["momentum_buffer"] = b
