"""Learning-rate schedulers with torch.optim.lr_scheduler's formulas: each
step() moves last_epoch on by one and writes the new lr into every
parameter group."""
from __future__ import annotations

import math as _math
import typing as _typing

if _typing.TYPE_CHECKING:
    from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "CosineAnnealingLR", "LinearLR"]


class LRScheduler:
    """Base class: remembers each group's initial lr ("initial_lr", the
    base_lrs) and steps once at construction, as torch.

    Example::

        >>> class Halving(jag.optim.lr_scheduler.LRScheduler):
        ...     def get_lr(self):
        ...         return [base * 0.5 ** self.last_epoch for base in self.base_lrs]
        >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = Halving(opt)  # steps once: epoch 0
        >>> sched.step(); sched.step()
        >>> sched.get_last_lr(), opt.param_groups[0]["lr"]
        ([0.25], 0.25)
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError("param 'initial_lr' is not specified in param_groups[%d] when resuming an "
                                   "optimizer" % i)
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self) -> _typing.List[float]:
        """The lrs of the current last_epoch, one per group.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
            >>> sched = jag.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.1 * epoch)
            >>> sched.last_epoch = 3
            >>> [round(lr, 4) for lr in sched.get_lr()]  # computed, not written into the groups
            [0.3]
        """
        raise NotImplementedError

    def get_last_lr(self) -> _typing.List[float]:
        """The lrs the last step() wrote, one per group.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=0.1)
            >>> sched = jag.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            >>> sched.get_last_lr()
            [0.1]
            >>> sched.step()
            >>> sched.get_last_lr()
            [0.05]
        """
        return self._last_lr

    def step(self, epoch: _typing.Optional[int] = None) -> None:
        """Move to the next epoch (or to ``epoch``, through the closed form
        where the scheduler has one) and write its lrs into the groups.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
            >>> sched = jag.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
            >>> sched.step(); sched.step()  # epoch 2
            >>> round(opt.param_groups[0]["lr"], 6)
            0.1
            >>> sched.step(epoch=5)  # jump to epoch 5 (closed form)
            >>> round(opt.param_groups[0]["lr"], 6)
            0.01
        """
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> _typing.Dict[str, _typing.Any]:
        """Every attribute but the optimizer.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
            >>> sched = jag.optim.lr_scheduler.StepLR(opt, step_size=3)
            >>> sd = sched.state_dict()
            >>> sd["last_epoch"], sd["step_size"], sd["base_lrs"]
            (0, 3, [1.0])
        """
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: _typing.Dict[str, _typing.Any]) -> None:
        """Restore what state_dict returned.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
            >>> a = jag.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            >>> a.step(); a.step()
            >>> b = jag.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            >>> b.load_state_dict(a.state_dict())
            >>> b.last_epoch, b.get_last_lr()
            (2, [0.25])
        """
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); lr_lambda is one function or one
    per group.

    Example::

        >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=0.1)
        >>> warmup = jag.optim.lr_scheduler.LambdaLR(opt, lambda epoch: min(1.0, (epoch + 1) / 3))
        >>> for _ in range(3):
        ...     print(round(opt.param_groups[0]["lr"], 4))
        ...     opt.step(); warmup.step()
        0.0333
        0.0667
        0.1
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: _typing.Any, last_epoch: int = -1) -> None:
        n = len(optimizer.param_groups)
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * n
        else:
            if len(lr_lambda) != n:
                raise ValueError("Expected %d lr_lambdas, but got %d" % (n, len(lr_lambda)))
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> _typing.List[float]:
        """base_lr * lambda(last_epoch) per group.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=2.0)
            >>> sched = jag.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.5 ** epoch)
            >>> sched.step()
            >>> sched.get_lr()  # base_lr * 0.5 ** 1
            [1.0]
        """
        return [base * lmbda(self.last_epoch) for lmbda, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> _typing.Dict[str, _typing.Any]:
        """As the base, without the lambdas (functions do not pickle).

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
            >>> sched = jag.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0)
            >>> "lr_lambdas" in sched.state_dict(), sched.state_dict()["last_epoch"]
            (False, 0)
        """
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (epoch // step_size).

    Example::

        >>> w = jag.zeros(2, requires_grad=True)
        >>> opt = jag.optim.SGD([w], lr=0.1)
        >>> sched = jag.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        >>> for epoch in range(4):
        ...     opt.step()
        ...     sched.step()
        ...     print(sched.get_last_lr())
        [0.1]
        [0.05]
        [0.05]
        [0.025]
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> _typing.List[float]:
        """The lr times gamma every step_size epochs.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
            >>> sched = jag.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
            >>> sched.last_epoch = 2  # a multiple of step_size: the lr is multiplied by gamma
            >>> sched.get_lr()
            [0.5]
        """
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2,
    computed recursively from the previous lr as torch does.

    Example::

        >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = jag.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.0)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     opt.step(); sched.step()
        >>> lrs
        [1.0, 0.8536, 0.5, 0.1464, 0.0]
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> _typing.List[float]:
        """torch's recursive form of the cosine schedule.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
            >>> sched = jag.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
            >>> sched.step()  # step() writes what get_lr() gives: epoch 1, the lr halfway down
            >>> [round(lr, 4) for lr in sched.get_last_lr()]
            [0.5]
        """
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base - self.eta_min) * (1 + _math.cos(self.last_epoch * _math.pi / self.T_max)) / 2
                    for base in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base - self.eta_min) * (1 - _math.cos(_math.pi / self.T_max)) / 2
                    for base, group in zip(self.base_lrs, groups)]
        return [(1 + _math.cos(_math.pi * self.last_epoch / self.T_max))
                / (1 + _math.cos(_math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min for group in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + _math.cos(_math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The lr multiplied by a factor going linearly from start_factor to
    end_factor over total_iters steps (a linear warmup), then kept.

    Example::

        >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
        >>> warmup = jag.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(round(warmup.get_last_lr()[0], 4))
        ...     opt.step(); warmup.step()
        >>> lrs
        [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> _typing.List[float]:
        """torch's recursive form of the linear factor.

        Example::

            >>> opt = jag.optim.SGD([jag.zeros(1, requires_grad=True)], lr=1.0)
            >>> sched = jag.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
            >>> sched.step()  # step() writes what get_lr() gives: 1.0 * 0.75
            >>> [round(lr, 4) for lr in sched.get_last_lr()]
            [0.75]
        """
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in groups]
        if self.last_epoch > self.total_iters:
            return [group["lr"] for group in groups]
        return [group["lr"] * (1.0 + (self.end_factor - self.start_factor)
                               / (self.total_iters * self.start_factor
                                  + (self.last_epoch - 1) * (self.end_factor - self.start_factor)))
                for group in groups]

    def _get_closed_form_lr(self):
        return [base * (self.start_factor + (self.end_factor - self.start_factor)
                        * min(self.total_iters, self.last_epoch) / self.total_iters) for base in self.base_lrs]
