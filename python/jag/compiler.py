"""jag.trace and jag.compile: record a function over tensors (nested and
other subclasses included) as a program, transform it with passes, and run
it again and again, as torch.compile does.

    tr = jag.trace(fn, nt, w)      # a Trace: print(tr) shows the program
    prog = tr.compile()            # a Program for inputs of this kind
    y = prog(nt2, w)               # same dtypes, ranks and layouts; any lengths

    fast = jag.compile(fn)         # traces on the first call with each new
    y = fast(nt, w)                # kind of inputs, then runs that program
    y.sum().backward()             # outputs support autograd

    fast_model = jag.compile(model)   # a module: its parameters and buffers,
    y = fast_model(nt)                # like the tensors a function reads from
                                      # its closure and globals, are inputs

The passes: desugar (subclass symbols become the ops their handlers run on
the inner tensors), dce (drops what no output needs), fuse (pointwise chains
run in one pass over memory) and grad (appends the backward program).
"""
from __future__ import annotations

import dis as _dis
import types as _types
import typing as _typing

from . import _C

__all__ = ["trace", "compile", "Trace", "Program"]

_PASS_BITS = {"desugar": _C.PASS_DESUGAR, "dce": _C.PASS_DCE, "fuse": _C.PASS_FUSE}


def _pass_flags(passes):
    if passes is None:
        return _C.PASSES_ALL
    flags = 0
    for p in passes:
        if p not in _PASS_BITS:
            raise ValueError("jag.compile: unknown pass %r (known: desugar, dce, fuse)" % (p,))
        flags |= _PASS_BITS[p]
    return flags


class Program:
    """A compiled trace. Call it with inputs of the kind it was traced with
    (same dtypes, ranks, subclasses and layouts; lengths and batch sizes may
    differ): other inputs raise TypeError (a dtype) or ValueError (a rank, a
    layout, a count), and nothing runs.

    Example::

        >>> prog = jag.trace(lambda x: x * 2 + 1, jag.tensor([1.0, 2.0])).compile()
        >>> prog(jag.tensor([0.0, 1.0, 2.0]))  # another length, the same kind
        tensor([1.0000, 3.0000, 5.0000], dtype=float32, size=[3])
        >>> prog(jag.tensor([1, 2]))  # another dtype
        Traceback (most recent call last):
            ...
        TypeError: jag_program_run: input 0 ('x0') has dtype int64, expected float32
    """

    __slots__ = ("_p",)

    def __init__(self, p: _typing.Any) -> None:
        self._p = p

    def __call__(self, *inputs):
        return self._p(*inputs)

    @property
    def trace(self) -> str:
        """The program that runs, after the passes, as text.

        Example::

            >>> prog = jag.trace(lambda a: (a * 2 + 1).relu(), jag.tensor([1.0, 2.0]), names=["a"]).compile()
            >>> print(prog.trace)
            def computation(a):
              # a: f32[2]
              t2 = fused[mul, add, relu](a)         # f32[2]
              return t2
        """
        return self._p.trace

    @property
    def backward_trace(self) -> _typing.Optional[str]:
        """The backward program as text (None when no input requires grad).

        Example::

            >>> x = jag.tensor([1.0, 2.0], requires_grad=True)
            >>> prog = jag.trace(lambda a: (a * a).sum(), x).compile()
            >>> print(prog.backward_trace)  # gradient of sum(a * a): 2 a g
            def computation(x0, g_t1):
              # x0: f32[2]  requires_grad
              # g_t1: f32[]
              ...
              return grad_x0
            >>> jag.trace(lambda a: a * a, jag.tensor([1.0])).compile().backward_trace is None
            True
        """
        return self._p.backward_trace

    def __str__(self):
        return self._p.trace

    def __repr__(self):
        return "<jag.Program>\n" + self._p.trace


class Trace:
    """A function recorded on proxies. str() is the program as source, one
    symbol a line; the passes return new traces; compile() a Program.

    Example::

        >>> tr = jag.trace(lambda x, w: (x * w).relu(), jag.ones(3), jag.ones(3), names=["x", "w"])
        >>> print(tr)
        def computation(x, w):
          # x: f32[3]
          # w: f32[3]
          t0 = mul(x, w)                        # f32[3]
          t1 = relu(t0)                         # f32[3]
          return t1
        >>> tr.compile()(jag.tensor([1.0, -2.0, 3.0]), jag.tensor([2.0, 2.0, 2.0]))
        tensor([2.0000, 0.0000, 6.0000], dtype=float32, size=[3])
    """

    __slots__ = ("_t",)

    def __init__(self, t: _typing.Any) -> None:
        self._t = t

    def __str__(self):
        return str(self._t)

    def __repr__(self):
        return "<jag.Trace: %d symbols>\n%s" % (self._t.num_symbols, self._t)

    @property
    def num_symbols(self) -> int:
        """The number of symbols (lines) of the program.

        Example::

            >>> tr = jag.trace(lambda a: (a * 2 + 1).relu(), jag.tensor([1.0, 2.0]))
            >>> tr.num_symbols
            3
        """
        return self._t.num_symbols

    def desugar(self) -> Trace:
        """A new trace with each subclass symbol replaced by the ops its handler runs on the inner tensors.

        Example::

            >>> nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
            >>> tr = jag.trace(lambda a: (a * 2).sum(-1), nt)
            >>> print(tr.desugar())  # the nested ops become ops on the packed values
            def computation(x0):
              # x0: nested(jagged) f32[2, j0, 3]  (values f32[3, 3], offsets i64[3])
              x0_values, x0_offsets = flatten(x0)
              t2 = mul(x0_values, 2)                # f32[3, 3]
              t3 = sum(t2, [1], False)              # f32[3]
              t1 = unflatten[nested](t3, x0_offsets) # nested(jagged) f32[2, j0]
              return t1
        """
        return Trace(self._t.desugar())

    def dce(self) -> Trace:
        """A new trace without the symbols no output needs (dead code elimination).

        Example::

            >>> tr = jag.trace(lambda a: (a.exp(), a + 1)[1], jag.tensor([1.0, 2.0]))  # exp is never used
            >>> tr.num_symbols, tr.dce().num_symbols
            (2, 1)
            >>> print(tr.dce())
            def computation(x0):
              # x0: f32[2]
              t1 = add(x0, 1, 1)                    # f32[2]
              return t1
        """
        return Trace(self._t.dce())

    def fuse(self) -> Trace:
        """A new trace whose pointwise chains run in one pass over memory.

        Example::

            >>> tr = jag.trace(lambda a: (a * 2 + 1).relu(), jag.tensor([1.0, 2.0]), names=["a"])
            >>> print(tr.fuse())
            def computation(a):
              # a: f32[2]
              t2 = fused[mul, add, relu](a)         # f32[2]
              return t2
        """
        return Trace(self._t.fuse())

    def grad(self) -> Trace:
        """A new trace with the backward program appended.

        Example::

            >>> x = jag.tensor([1.0, 2.0], requires_grad=True)
            >>> print(jag.trace(lambda a: (a * a).sum(), x).grad())
            def computation(x0, g_t1):
              # x0: f32[2]  requires_grad
              # g_t1: f32[]
              t0 = mul(x0, x0)                      # f32[2]
              t1 = sum(t0, [], False)               # f32[]
              ...
              grad_x0 = add(t5, t6, 1)              # f32[2]
              return t1, grad_x0
        """
        return Trace(self._t.grad())

    def compile(self, passes: _typing.Optional[_typing.Sequence[str]] = None) -> Program:
        """A Program (passes: names among "desugar", "dce", "fuse"; all by default).

        Example::

            >>> tr = jag.trace(lambda a: (a * 2 + 1).relu(), jag.tensor([1.0, 2.0]), names=["a"])
            >>> print(tr.compile(passes=["dce"]).trace)  # no fusion
            def computation(a):
              # a: f32[2]
              t0 = mul(a, 2)                        # f32[2]
              t1 = add(t0, 1, 1)                    # f32[2]
              t2 = relu(t1)                         # f32[2]
              return t2
            >>> tr.compile()(jag.tensor([-3.0, 3.0]))
            tensor([0.0000, 7.0000], dtype=float32, size=[2])
        """
        return Program(self._t._compile(_pass_flags(passes)))


def trace(fn: _typing.Callable[..., _typing.Any], *example_inputs: _typing.Any,
          names: _typing.Optional[_typing.Sequence[str]] = None) -> Trace:
    """Trace fn(*example_inputs) on proxies of the inputs (only their kind and
    sizes are read; requires_grad too). names: one name per input for the
    printed program. fn returns a tensor or a tuple of tensors. Tensors fn
    reads from outside its inputs are constants of the trace (jag.compile
    passes them as inputs instead).

    Example::

        >>> nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
        >>> w = jag.ones(3, 4)
        >>> tr = jag.trace(lambda x, w: (x @ w).relu(), nt, w, names=["x", "w"])
        >>> print(tr)
        def computation(x, w):
          # x: nested(jagged) f32[2, j0, 3]  (values f32[3, 3], offsets i64[3])
          # w: f32[3, 4]
          x_values, x_offsets = flatten(x)
          t0 = matmul(x, w)                     # nested(jagged) f32[2, j0, 4]
          t1 = relu(t0)                         # nested(jagged) f32[2, j0, 4]
          return t1
        >>> out = tr.compile()(nt, w)
        >>> [c.shape for c in out.unbind()]
        [(2, 4), (1, 4)]
    """
    if names is not None:
        names = tuple(names)
    return Trace(_C._trace(fn, tuple(example_inputs), names))


# ---- tensors read from outside the arguments -------------------------------
#
# A program's inputs are the tensors it receives; anything else it reads is a
# constant of the program. So that the parameters a function or module reads
# stay live (gradients reach them, updates and rebindings are seen), the
# tensors a call reads directly from outside its arguments are collected
# before each call and passed after the arguments; while tracing, the
# function runs with their proxies in their places.

_MAX_LAYOUTS = 64  # what-is-read layouts kept per compiled callable


_module_class_found: _typing.List[type] = []


def _module_class():
    """jag.nn.Module (imported on first use: jag.nn imports jag)."""
    if not _module_class_found:
        from .nn.module import Module

        _module_class_found.append(Module)
    return _module_class_found[0]


def _loaded_globals(code):
    """The global names code loads, and those the code objects defined in it
    load (inner functions, lambdas, comprehensions: they get the globals of
    the frame that makes them), each once, in order."""
    names = []
    stack = [code]
    while stack:
        c = stack.pop(0)
        for ins in _dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval not in names:
                names.append(ins.argval)
        stack.extend(k for k in c.co_consts if isinstance(k, _types.CodeType))
    return tuple(names)


class _Reads:
    """The outer tensors one call reads, where each is read from, and a key
    that names those places (cells, global names, modules by identity and
    type, parameter and buffer names; not the tensors) and the training
    flags of the modules involved: calls with the same key run the same
    programs, chosen among by the tensors' kinds as for arguments."""

    __slots__ = ("tensors", "key", "cells", "globals", "entries", "_ids", "_modules")

    def __init__(self):
        self.tensors, self.key = [], []
        self.cells, self.globals, self.entries = [], [], []
        self._ids, self._modules = {}, set()

    def _slot(self, t):
        j = self._ids.get(id(t))
        if j is None:
            j = self._ids[id(t)] = len(self.tensors)
            self.tensors.append(t)
        return j

    def add_module(self, module):
        """Every parameter and buffer of module and its descendants (each
        module once, each tensor one input however many places hold it).
        The key names each module by identity and type, so that a child
        replaced by another module traces again."""
        tensor_class, seen, ids, tensors = _C.TensorBase, self._modules, self._ids, self.tensors
        key, entries = self.key, self.entries
        stack = [module]
        while stack:
            m = stack.pop()
            if m is None or id(m) in seen:
                continue
            seen.add(id(m))
            d = m.__dict__
            key.append((id(m), type(m), bool(d.get("training", m.training))))
            for kind in ("_parameters", "_buffers"):
                table = d[kind]
                for name, v in table.items():
                    if isinstance(v, tensor_class):
                        j = ids.get(id(v))
                        if j is None:
                            j = ids[id(v)] = len(tensors)
                            tensors.append(v)
                        entries.append((table, name, j))
                        key.append((kind, name, j))
            children = d["_modules"]
            if children:
                stack.extend(reversed(children.values()))

    def add_function(self, fn, global_names):
        """The tensors (and modules) fn holds in its closure cells or finds
        in its globals under the names its code loads."""
        module_class = _module_class()
        for i, cell in enumerate(fn.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(v, _C.TensorBase):
                j = self._slot(v)
                self.cells.append((i, j))
                self.key.append(("cell", i, j))
            elif isinstance(v, module_class):
                self.add_module(v)
        g = fn.__globals__
        for name in global_names:
            v = g.get(name)
            if isinstance(v, _C.TensorBase):
                j = self._slot(v)
                self.globals.append((name, j))
                self.key.append(("global", name, j))
            elif isinstance(v, module_class):
                self.add_module(v)


def _with_proxies(fn, reads, proxies):
    """fn rebuilt over new closure cells and a copy of its globals where
    reads found tensors, those holding proxies instead (fn itself when
    reads found none in either)."""
    if not reads.cells and not reads.globals:
        return fn
    closure = fn.__closure__
    if reads.cells:
        closure = list(closure)
        for i, j in reads.cells:
            closure[i] = _types.CellType(proxies[j])
        closure = tuple(closure)
    g = fn.__globals__
    if reads.globals:
        g = dict(g)
        for name, j in reads.globals:
            g[name] = proxies[j]
    f = _types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, closure)
    f.__kwdefaults__ = fn.__kwdefaults__
    return f


class _Target:
    """What jag.compile was given, seen as: a function whose closure and
    globals are read, and/or modules whose parameters and buffers are read.
    A callable of another kind reads nothing (everything else it reads is a
    constant of its programs)."""

    __slots__ = ("obj", "fn", "self_", "module", "global_names")

    def __init__(self, obj):
        self.obj, self.fn, self.self_, self.module, self.global_names = obj, None, None, None, ()
        module_class = _module_class()
        if isinstance(obj, module_class):
            self.module = obj
            return
        fn = obj
        if isinstance(obj, _types.MethodType):
            fn, self.self_ = obj.__func__, obj.__self__
            if isinstance(self.self_, module_class):
                self.module = self.self_
        if isinstance(fn, _types.FunctionType):
            self.fn = fn
            self.global_names = _loaded_globals(fn.__code__)

    def reads(self):
        """What a call made now would read."""
        r = _Reads()
        if self.module is not None:
            r.add_module(self.module)
        if self.fn is not None:
            r.add_function(self.fn, self.global_names)
        return r

    def call(self, reads, proxies, args):
        """Call the target on args with proxies in the places reads names;
        every module entry swapped is restored, even when the call raises."""
        entries = reads.entries
        saved = [table[name] for table, name, _ in entries]
        try:
            for table, name, j in entries:
                table[name] = proxies[j]
            if self.fn is None:
                return self.obj(*args)
            f = _with_proxies(self.fn, reads, proxies)
            return f(*args) if self.self_ is None else f(self.self_, *args)
        finally:
            for (table, name, _), v in zip(entries, saved):
                table[name] = v


class _Compiled:
    """fn compiled on its first call with each new kind of inputs, the
    tensors it reads from outside its arguments passed as inputs too."""

    def __init__(self, fn, flags):
        self._fn = fn
        self._flags = flags
        self._target = _Target(fn)
        self._by_reads = {}  # key of what is read -> _C.Compiled

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError("jag.compile: the compiled function takes its inputs by position only")
        reads = self._target.reads()
        key = tuple(reads.key)
        c = self._by_reads.get(key)
        if c is None:
            c = self._compiled_for(key, len(reads.tensors))
        if not reads.tensors:
            return c(*args)
        if len(args) + len(reads.tensors) > 64:
            raise ValueError("jag.compile: %d inputs and %d tensors read from outside them (parameters, "
                             "closure, globals): at most 64 in all" % (len(args), len(reads.tensors)))
        return c(*args, *reads.tensors)

    def _compiled_for(self, key, n_read):
        if n_read == 0:
            c = _C.Compiled(self._fn, self._flags)
        else:
            target = self._target

            def traced(*args):
                reads = target.reads()
                if tuple(reads.key) != key:
                    raise RuntimeError("jag.compile: what %r reads from outside its arguments changed while it "
                                       "was traced" % (target.obj,))
                n = len(args) - n_read
                return target.call(reads, args[n:], args[:n])

            c = _C.Compiled(traced, self._flags)
        if len(self._by_reads) >= _MAX_LAYOUTS:
            del self._by_reads[next(iter(self._by_reads))]
        self._by_reads[key] = c
        return c

    @property
    def num_programs(self):
        """Programs kept: one per kind of inputs (and of the tensors read)."""
        return sum(c.num_programs for c in self._by_reads.values())

    @property
    def __wrapped__(self):
        return self._fn

    def __getattr__(self, name):
        # the compiled module's attributes (parameters(), train(), ...)
        fn = self.__dict__.get("_fn")
        if fn is None or name.startswith("__"):
            raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))
        return getattr(fn, name)

    def __repr__(self):
        return "<jag.compile of %r: %d program(s)>" % (self._fn, self.num_programs)


def compile(fn: _typing.Optional[_typing.Callable[..., _typing.Any]] = None, *,
            passes: _typing.Optional[_typing.Sequence[str]] = None) -> _typing.Any:
    """A callable that traces fn on its first call with each new kind of
    inputs (dtypes, ranks, subclasses, layouts, requires_grad), keeps one
    program per kind and runs it; its outputs support backward(). When fn's
    views hold numbers (x.view(-1, heads, head_dim)), its first program runs
    only on the traced sizes; the trace of a call with other sizes shows
    which numbers are constants and which follow the inputs, and from then
    on one program serves every length. Usable as a decorator: @jag.compile
    or @jag.compile(passes=(...)).

    Tensors fn reads from outside its arguments are inputs of the program
    too, as torch.compile lifts them: on every call their current values
    are passed, so gradients reach them (w.grad is filled as in eager mode),
    in-place updates (an optimizer's step) are seen by the next call, and
    rebinding a name to another tensor is seen (a tensor of the same kind
    runs the same program, another kind traces a new one). They are:

    - the tensors in fn's closure cells and the tensors bound to the global
      names fn's code loads (fn.__code__ and the code defined inside it,
      looked up in fn.__globals__ at each call);
    - every parameter and buffer (recursively) of a jag.nn.Module given as
      fn, of the module a bound method fn belongs to (model.forward), and of
      a module held in such a closure cell or global.

    A tensor read another way stays a constant of the program: the program
    holds the tensor it read while tracing, so rebinding the name is not
    seen and no gradient reaches it. That is a tensor inside a container (a
    list or dict of tensors), an attribute of an object other than a
    module, a default argument value, or one that another function (a
    helper fn calls) reads from its own globals or closure. Pass such
    tensors as arguments. Lifted tensors are proxies while fn is traced, as
    arguments are: their data cannot be read then (w.item(), w.numpy()).

    Values that are not tensors (a closed-over float, a module's eps) are
    constants of the program as they were when traced. Other callables
    (functools.partial, objects with __call__ that are not modules) lift
    nothing.

    jag.compile(module) returns a callable that runs the module's forward;
    the module's other attributes are reached through it (parameters(),
    train(), eval()). A module is known by its identity: replacing a child
    module traces again.

    A module's training flag (and those of its descendants) is part of what
    selects a program: a call after module.eval() or module.train() runs a
    program traced in that mode. Dropout that is active (training mode,
    p > 0) draws random numbers, which a traced function refuses: compile
    such a model in eval() mode, or run its training steps eagerly.

    Example::

        >>> f = jag.compile(lambda x: (x * 2).relu())
        >>> f(jag.tensor([-1.0, 3.0]))
        tensor([0.0000, 6.0000], dtype=float32, size=[2])
        >>> f(jag.tensor([4.0, -5.0]))  # the same kind of input: the same program
        tensor([8.0000, 0.0000], dtype=float32, size=[2])
        >>> f.num_programs
        1
    """
    flags = _pass_flags(passes)

    def make(f):
        if not callable(f):
            raise TypeError("jag.compile: expected a callable, got %s" % type(f).__name__)
        return _Compiled(f, flags)

    return make if fn is None else make(fn)
