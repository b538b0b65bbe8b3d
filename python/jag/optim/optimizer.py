"""The optimizer base class, torch.optim.Optimizer's interface: param_groups,
per-parameter state, zero_grad, step, state_dict / load_state_dict."""
from __future__ import annotations

import copy as _copy
import typing as _typing
from collections import defaultdict as _defaultdict

import jag as _jag


class _RequiredParameter:
    """The marker of a hyperparameter without a default (torch's `required`)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Base class of the optimizers: ``params`` is an iterable of tensors or
    of dicts (parameter groups, each with a "params" list and its own
    hyperparameters); ``defaults`` fills the hyperparameters a group does
    not give. ``self.state`` maps each parameter to a dict of its state.

    Example::

        >>> class PlainSGD(jag.optim.Optimizer):
        ...     def __init__(self, params, lr=0.1):
        ...         super().__init__(params, dict(lr=lr))
        ...     def _step_group(self, group):  # p -= lr * grad, for each parameter with a grad
        ...         with jag.no_grad():
        ...             for p in group["params"]:
        ...                 if p.grad is not None:
        ...                     p.sub_(p.grad * group["lr"])
        >>> w = jag.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = PlainSGD([w], lr=0.25)
        >>> (w * w).sum().backward()
        >>> opt.step()
        >>> w.detach()
        tensor([0.5000, 1.0000], dtype=float32, size=[2])
    """

    def __init__(self, params: _typing.Iterable[_typing.Any], defaults: _typing.Dict[str, _typing.Any]) -> None:
        if isinstance(params, _jag.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a jag.Tensor")
        self.defaults = dict(defaults)
        self.state: _typing.DefaultDict[_typing.Any, _typing.Dict[str, _typing.Any]] = _defaultdict(dict)
        self.param_groups: _typing.List[_typing.Dict[str, _typing.Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append("Parameter Group %d" % i)
            for key in sorted(group.keys()):
                if key != "params":
                    lines.append("    %s: %s" % (key, group[key]))
        lines.append(")")
        return "\n".join(lines)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def add_param_group(self, param_group: _typing.Dict[str, _typing.Any]) -> None:
        """Add a group of parameters (a dict with "params" and optional
        hyperparameters; the optimizer's defaults fill the rest). A
        parameter may belong to one group only, and must be a leaf tensor.

        Example::

            >>> w, b = jag.zeros(2, requires_grad=True), jag.zeros(1, requires_grad=True)
            >>> opt = jag.optim.SGD([w], lr=0.1)
            >>> opt.add_param_group({"params": [b], "lr": 0.01})  # e.g. a layer unfrozen later
            >>> [(len(g["params"]), g["lr"]) for g in opt.param_groups]
            [(1, 0.1), (1, 0.01)]
        """
        if not isinstance(param_group, dict):
            raise TypeError("param_group must be a dict, but got %s" % type(param_group).__name__)
        params = param_group["params"]
        if isinstance(params, _jag.Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, _jag.Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required optimization parameter " + name)
            param_group.setdefault(name, default)
        if len({id(p) for p in param_group["params"]}) != len(param_group["params"]):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        seen: _typing.Set[int] = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if any(id(p) in seen for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (set_to_none=True, torch's
        default), or write zeros into the gradients that exist.

        Example::

            >>> w = jag.tensor([1.0], requires_grad=True)
            >>> opt = jag.optim.SGD([w], lr=0.1)
            >>> (3 * w).sum().backward()
            >>> opt.zero_grad(set_to_none=False)
            >>> w.grad
            tensor([0.0000], dtype=float32, size=[1])
            >>> opt.zero_grad()
            >>> w.grad is None
            True
        """
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                    continue
                g = p.grad
                if g is not None:
                    with _jag.no_grad():
                        g.zero_()

    def step(self, closure: _typing.Optional[_typing.Callable[[], _typing.Any]] = None) -> _typing.Any:
        """One optimization step over every parameter group (parameters
        whose .grad is None are skipped). ``closure``, if given, is called
        with grad mode on first (it recomputes the loss and its gradients)
        and its result is returned.

        Example::

            >>> w = jag.tensor([3.0], requires_grad=True)
            >>> opt = jag.optim.SGD([w], lr=0.25)
            >>> def closure():
            ...     opt.zero_grad()
            ...     loss = (w * w).sum()
            ...     loss.backward()
            ...     return loss
            >>> opt.step(closure)  # the loss before the step
            tensor(9.0000, dtype=float32, size=[])
            >>> w.detach()  # 3 - 0.25 * 6
            tensor([1.5000], dtype=float32, size=[1])
        """
        loss = None
        if closure is not None:
            with _jag.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _step_group(self, group):
        raise NotImplementedError

    def state_dict(self) -> _typing.Dict[str, _typing.Any]:
        """torch's format: {"state": {index: {name: value}}, "param_groups":
        [{hyperparameters..., "params": [indices]}]}, parameters numbered in
        group order. State tensors are the live ones (not copies).

        Example::

            >>> w = jag.zeros(2, requires_grad=True)
            >>> opt = jag.optim.SGD([w], lr=0.1, momentum=0.9)
            >>> sd = opt.state_dict()
            >>> sd["param_groups"][0]["params"], sd["param_groups"][0]["lr"], sd["state"]
            ([0], 0.1, {})
        """
        mapping: _typing.Dict[int, int] = {}
        start = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {(mapping[id(k)] if isinstance(k, _jag.Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: _typing.Dict[str, _typing.Any]) -> None:
        """Restore hyperparameters and state saved by state_dict (groups and
        their sizes must match). State tensors are copied (converted to
        their parameter's dtype; "step" stays float32), so later steps do
        not write into the given dict's tensors.

        Example::

            >>> w = jag.zeros(1, requires_grad=True)
            >>> saved = jag.optim.Adam([w], lr=0.01).state_dict()
            >>> opt = jag.optim.Adam([w], lr=1.0)
            >>> opt.load_state_dict(saved)
            >>> opt.param_groups[0]["lr"]
            0.01
        """
        state_dict = dict(state_dict)
        groups = self.param_groups
        saved_groups = _copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = {}
        for g, s in zip(groups, saved_groups):
            for old_id, p in zip(s["params"], g["params"]):
                id_map[old_id] = p
        state: _typing.DefaultDict[_typing.Any, _typing.Dict[str, _typing.Any]] = _defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = {name: self._cast_state(p, name, value) for name, value in v.items()}
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups

    @staticmethod
    def _cast_state(p, name, value):
        if name == "step":
            if isinstance(value, _jag.Tensor):
                return value.to(_jag.float32).clone()
            return _jag.tensor(float(value), dtype=_jag.float32)
        if isinstance(value, _jag.Tensor):
            if value.dtype.is_floating_point:
                value = value.to(p.dtype)
            return value.clone()
        return _copy.deepcopy(value)
