"""jag.nn.Module: torch.nn.Module's registration, traversal, train/eval,
state_dict and repr."""
from __future__ import annotations

import typing as _typing
from collections import OrderedDict as _OrderedDict
from collections import namedtuple as _namedtuple

import jag as _jag

from .parameter import Parameter

__all__ = ["Module"]


class _IncompatibleKeys(_namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict did not match (torch's IncompatibleKeys)."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * n + line for line in lines)


class Module:
    """Base class of the layers: assigning a Parameter, a Module or (through
    register_buffer) a buffer to an attribute registers it, and the
    traversals (parameters, named_parameters, buffers, children, modules),
    state_dict / load_state_dict, train / eval, zero_grad and to(dtype) then
    cover it. Subclasses define ``forward``; calling the module calls it.

    Example::

        >>> class Scale(jag.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = jag.nn.Parameter(jag.tensor([2.0]))
        ...     def forward(self, x):
        ...         return x * self.w
        >>> m = Scale()
        >>> [name for name, _ in m.named_parameters()]
        ['w']
        >>> m(jag.tensor([1.0, 3.0])).detach()
        tensor([2.0000, 6.0000], dtype=float32, size=[2])
    """

    training = True

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", _OrderedDict())
        object.__setattr__(self, "_buffers", _OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", _OrderedDict())

    def forward(self, *args: _typing.Any, **kwargs: _typing.Any) -> _typing.Any:
        """The module's computation (defined by subclasses).

        Example::

            >>> m = jag.nn.ReLU()
            >>> m.forward(jag.tensor([-1.0, 2.0]))  # what m(x) calls
            tensor([0.0000, 2.0000], dtype=float32, size=[2])
        """
        raise NotImplementedError('Module [%s] is missing the required "forward" function' % type(self).__name__)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # --- registration -------------------------------------------------------
    def _check_name(self, name, kind):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign %s before Module.__init__() call" % kind)
        if not isinstance(name, str):
            raise TypeError("%s name should be a string. Got %s" % (kind, type(name).__name__))
        if "." in name:
            raise KeyError('%s name can\'t contain "."' % kind)
        if name == "":
            raise KeyError('%s name can\'t be empty string ""' % kind)

    def register_parameter(self, name: str, param: _typing.Optional[Parameter]) -> None:
        """Register ``param`` (a Parameter, or None) under ``name``.

        Example::

            >>> m = jag.nn.Module()
            >>> m.register_parameter("scale", jag.nn.Parameter(jag.ones(2)))
            >>> [name for name, _ in m.named_parameters()]
            ['scale']
        """
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError("attribute '%s' already exists" % name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' object to parameter '%s' (jag.nn.Parameter or None required)"
                            % (type(param).__name__, name))
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: _typing.Optional[_jag.Tensor], persistent: bool = True) -> None:
        """Register a tensor that is state but not a parameter (running
        statistics, constants). ``persistent=False`` keeps it out of
        state_dict.

        Example::

            >>> m = jag.nn.Module()
            >>> m.register_buffer("running_mean", jag.zeros(2))
            >>> list(m.state_dict()), list(m.parameters())
            (['running_mean'], [])
        """
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError("attribute '%s' already exists" % name)
        if tensor is not None and not isinstance(tensor, _jag.Tensor):
            raise TypeError("cannot assign '%s' object to buffer '%s' (jag.Tensor or None required)"
                            % (type(tensor).__name__, name))
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: _typing.Optional[Module]) -> None:
        """Register a child module (or None) under ``name``.

        Example::

            >>> m = jag.nn.Module()
            >>> m.add_module("fc", jag.nn.Linear(2, 1))
            >>> m
            Module(
              (fc): Linear(in_features=2, out_features=1, bias=True)
            )
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError("%s is not a Module subclass" % type(module).__name__)
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError("attribute '%s' already exists" % name)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, self._buffers, self._modules)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (jag.nn.Parameter or None expected)"
                                % (type(value).__name__, name))
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, self._parameters, self._buffers)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError("cannot assign '%s' as child module '%s' (jag.nn.Module or None expected)"
                                % (type(value).__name__, name))
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, _jag.Tensor):
                raise TypeError("cannot assign '%s' as buffer '%s' (jag.Tensor or None expected)"
                                % (type(value).__name__, name))
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, d, *dicts):
        for dd in dicts:
            dd.pop(name, None)
        d.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for kind in ("_parameters", "_buffers", "_modules"):
            table = d.get(kind)
            if table is not None and name in table:
                return table[name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __delattr__(self, name):
        for kind in ("_parameters", "_buffers", "_modules"):
            table = self.__dict__.get(kind)
            if table is not None and name in table:
                del table[name]
                if kind == "_buffers":
                    self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    # --- traversal ----------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k), v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> _typing.Iterator[_typing.Tuple[str, Parameter]]:
        """(name, Parameter) pairs, this module's then its children's, each
        parameter once ("layer.weight", ...).

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 3), jag.nn.ReLU(), jag.nn.Linear(3, 1))
            >>> [(name, p.shape) for name, p in model.named_parameters()]
            [('0.weight', (3, 2)), ('0.bias', (3,)), ('2.weight', (1, 3)), ('2.bias', (1,))]
        """
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> _typing.Iterator[Parameter]:
        """The parameters, in named_parameters' order.

        Example::

            >>> model = jag.nn.Linear(4, 2)
            >>> sum(p.numel() for p in model.parameters())
            10
        """
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> _typing.Iterator[_typing.Tuple[str, _jag.Tensor]]:
        """(name, buffer) pairs, as named_parameters.

        Example::

            >>> m = jag.nn.Sequential(jag.nn.Linear(2, 2))
            >>> m[0].register_buffer("count", jag.zeros(1))
            >>> [(name, b.tolist()) for name, b in m.named_buffers()]
            [('0.count', [0.0])]
        """
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> _typing.Iterator[_jag.Tensor]:
        """The buffers, in named_buffers' order.

        Example::

            >>> m = jag.nn.Module()
            >>> m.register_buffer("count", jag.tensor([3.0]))
            >>> [b.tolist() for b in m.buffers()]
            [[3.0]]
        """
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self) -> _typing.Iterator[_typing.Tuple[str, Module]]:
        """(name, module) for the direct children, each once.

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2), jag.nn.ReLU())
            >>> [(name, type(m).__name__) for name, m in model.named_children()]
            [('0', 'Linear'), ('1', 'ReLU')]
        """
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self) -> _typing.Iterator[Module]:
        """The direct children.

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2), jag.nn.ReLU())
            >>> list(model.children())
            [Linear(in_features=2, out_features=2, bias=True), ReLU()]
        """
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo: _typing.Optional[set] = None, prefix: str = "",
                      remove_duplicate: bool = True) -> _typing.Iterator[_typing.Tuple[str, Module]]:
        """(name, module) for this module ("") and every descendant, depth
        first, each once.

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2), jag.nn.ReLU())
            >>> [(name, type(m).__name__) for name, m in model.named_modules()]
            [('', 'Sequential'), ('0', 'Linear'), ('1', 'ReLU')]
        """
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> _typing.Iterator[Module]:
        """This module and every descendant.

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2), jag.nn.ReLU())
            >>> [type(m).__name__ for m in model.modules()]
            ['Sequential', 'Linear', 'ReLU']
        """
        for _, m in self.named_modules():
            yield m

    def apply(self, fn: _typing.Callable[[Module], None]) -> Module:
        """Call fn on every child (recursively) then on self; returns self.

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2), jag.nn.Linear(2, 1))
            >>> def init_weights(m):
            ...     if isinstance(m, jag.nn.Linear):
            ...         jag.nn.init.ones_(m.weight)
            >>> _ = model.apply(init_weights)
            >>> model[1].weight.tolist()
            [[1.0, 1.0]]
        """
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- modes and gradients --------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active) on this module and its
        descendants; returns self.

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2), jag.nn.Dropout(0.5))
            >>> model.train().training, model[1].training
            (True, True)
            >>> model.train(False)[1].training
            False
        """
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        """train(False).

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 2), jag.nn.Dropout(0.5))
            >>> model.eval()[1].training
            False
            >>> model(jag.ones(1, 2)).shape  # dropout is now the identity
            (1, 2)
        """
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set requires_grad on every parameter; returns self.

        Example::

            >>> model = jag.nn.Linear(2, 2)
            >>> _ = model.requires_grad_(False)  # freeze
            >>> [p.requires_grad for p in model.parameters()]
            [False, False]
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (or zero it in place).

        Example::

            >>> model = jag.nn.Linear(2, 1)
            >>> model(jag.ones(1, 2)).sum().backward()
            >>> model.bias.grad
            tensor([1.0000], dtype=float32, size=[1])
            >>> model.zero_grad()
            >>> model.bias.grad is None
            True
        """
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g is not None:
                    with _jag.no_grad():
                        g.zero_()

    # --- conversion ------------------------------------------------------------
    def to(self, dtype: _typing.Any) -> Module:
        """Convert every float parameter and buffer to ``dtype`` (a jag
        dtype). jag tensors cannot change their data in place, so a
        converted parameter is a new Parameter object (requires_grad kept,
        gradient dropped) registered under the same name: make optimizers
        after calling to().

        Example::

            >>> model = jag.nn.Linear(2, 1)
            >>> model.to(jag.float64).weight.dtype
            jag.float64
        """
        dt = _jag._to_dtype(dtype)
        if dt is None or not dt.is_floating_point:
            raise TypeError("Module.to only accepts floating point dtypes, but got desired dtype=%s" % (dtype,))
        for m in self.modules():
            for name, p in list(m._parameters.items()):
                if p is not None and p.dtype.is_floating_point and p.dtype != dt:
                    m._parameters[name] = Parameter(p.detach().to(dt), p.requires_grad)
            for name, b in list(m._buffers.items()):
                if b is not None and b.dtype.is_floating_point and b.dtype != dt:
                    m._buffers[name] = b.to(dt)
        return self

    def float(self) -> Module:
        """to(jag.float32).

        Example::

            >>> model = jag.nn.Linear(2, 1).double()
            >>> model.float().weight.dtype
            jag.float32
        """
        return self.to(_jag.float32)

    def double(self) -> Module:
        """to(jag.float64).

        Example::

            >>> model = jag.nn.Linear(2, 1)
            >>> model.double().bias.dtype
            jag.float64
        """
        return self.to(_jag.float64)

    # --- state_dict --------------------------------------------------------------
    def state_dict(self, destination: _typing.Optional[_typing.Dict[str, _jag.Tensor]] = None, prefix: str = "",
                   keep_vars: bool = False) -> _typing.Dict[str, _jag.Tensor]:
        """An OrderedDict of every parameter and persistent buffer by its
        dotted name ("0.weight", "layer.bias"), detached unless
        keep_vars (the tensors share the module's data).

        Example::

            >>> model = jag.nn.Sequential(jag.nn.Linear(2, 1))
            >>> sd = model.state_dict()
            >>> [(k, v.shape) for k, v in sd.items()]
            [('0.weight', (1, 2)), ('0.bias', (1,))]
        """
        if destination is None:
            destination = _OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict: _typing.Mapping[str, _jag.Tensor], strict: bool = True) -> _typing.Any:
        """Copy values from ``state_dict`` into the parameters and persistent
        buffers of the same names (under no_grad; shapes must match). Returns
        (missing_keys, unexpected_keys); with strict=True either being
        non-empty raises RuntimeError listing them, as torch.

        Example::

            >>> a, b = jag.nn.Linear(2, 1), jag.nn.Linear(2, 1)
            >>> b.load_state_dict(a.state_dict())
            <All keys matched successfully>
            >>> b.weight.tolist() == a.weight.tolist()
            True
        """
        missing, unexpected, errors = [], [], []
        expected = self.state_dict(keep_vars=True)
        for key in state_dict:
            if key not in expected:
                unexpected.append(key)
        for key, target in expected.items():
            if key not in state_dict:
                missing.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, _jag.Tensor):
                try:
                    value = _jag.tensor(value)
                except Exception:  # noqa: BLE001 (report it as torch does)
                    errors.append('While copying the parameter named "%s", expected jag.Tensor or Tensor-like '
                                  'object from checkpoint but received %s' % (key, type(value).__name__))
                    continue
            if tuple(value.shape) != tuple(target.shape):
                errors.append("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in "
                              "current model is %s." % (key, list(value.shape), list(target.shape)))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in unexpected))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in missing))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s"
                               % (type(self).__name__, "\n\t".join(errors)))
        with _jag.no_grad():
            for key, target in expected.items():
                if key in state_dict:
                    value = state_dict[key]
                    target.copy_(value if isinstance(value, _jag.Tensor) else _jag.tensor(value))
        return _IncompatibleKeys(missing, unexpected)

    # --- printing --------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses (subclasses set it).

        Example::

            >>> jag.nn.Linear(2, 3).extra_repr()
            'in_features=2, out_features=3, bias=True'
        """
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = ["(" + key + "): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __dir__(self):
        keys = set(dir(type(self))) | set(self.__dict__) | set(self._parameters) | set(self._modules) \
            | set(self._buffers)
        return sorted(k for k in keys if not k[0].isdigit())
