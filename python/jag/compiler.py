"""jag.trace and jag.compile: record a function over tensors (nested and
other subclasses included) as a program, transform it with passes, and run
it again and again, as torch.compile does.

    tr = jag.trace(fn, nt, w)      # a Trace: print(tr) shows the program
    prog = tr.compile()            # a Program for inputs of this kind
    y = prog(nt2, w)               # same dtypes, ranks and layouts; any lengths

    fast = jag.compile(fn)         # traces on the first call with each new
    y = fast(nt, w)                # kind of inputs, then runs that program
    y.sum().backward()             # outputs support autograd

The passes: desugar (subclass symbols become the ops their handlers run on
the inner tensors), dce (drops what no output needs), fuse (pointwise chains
run in one pass over memory) and grad (appends the backward program).
"""
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
    layout, a count), and nothing runs."""

    __slots__ = ("_p",)

    def __init__(self, p):
        self._p = p

    def __call__(self, *inputs):
        return self._p(*inputs)

    @property
    def trace(self):
        """The program that runs, after the passes, as text."""
        return self._p.trace

    @property
    def backward_trace(self):
        """The backward program as text (None when no input requires grad)."""
        return self._p.backward_trace

    def __str__(self):
        return self._p.trace

    def __repr__(self):
        return "<jag.Program>\n" + self._p.trace


class Trace:
    """A function recorded on proxies. str() is the program as source, one
    symbol a line; the passes return new traces; compile() a Program."""

    __slots__ = ("_t",)

    def __init__(self, t):
        self._t = t

    def __str__(self):
        return str(self._t)

    def __repr__(self):
        return "<jag.Trace: %d symbols>\n%s" % (self._t.num_symbols, self._t)

    @property
    def num_symbols(self):
        return self._t.num_symbols

    def desugar(self):
        return Trace(self._t.desugar())

    def dce(self):
        return Trace(self._t.dce())

    def fuse(self):
        return Trace(self._t.fuse())

    def grad(self):
        return Trace(self._t.grad())

    def compile(self, passes=None):
        """A Program (passes: names among "desugar", "dce", "fuse"; all by default)."""
        return Program(self._t._compile(_pass_flags(passes)))


def trace(fn, *example_inputs, names=None):
    """Trace fn(*example_inputs) on proxies of the inputs (only their kind and
    sizes are read; requires_grad too). names: one name per input for the
    printed program. fn returns a tensor or a tuple of tensors."""
    if names is not None:
        names = tuple(names)
    return Trace(_C._trace(fn, tuple(example_inputs), names))


class _Compiled(_C.Compiled):
    """fn compiled on its first call with each new kind of inputs."""

    @property
    def __wrapped__(self):
        return self._fn

    def __repr__(self):
        return "<jag.compile of %r: %d program(s)>" % (getattr(self, "_fn", None), self.num_programs)


def compile(fn=None, *, passes=None):
    """A callable that traces fn on its first call with each new kind of
    inputs (dtypes, ranks, subclasses, layouts, requires_grad), keeps one
    program per kind and runs it; its outputs support backward(). When fn's
    views hold numbers (x.view(-1, heads, head_dim)), its first program runs
    only on the traced sizes; the trace of a call with other sizes shows
    which numbers are constants and which follow the inputs, and from then
    on one program serves every length. Usable as a decorator: @jag.compile
    or @jag.compile(passes=(...))."""
    flags = _pass_flags(passes)

    def make(f):
        c = _Compiled(f, flags)
        c._fn = f
        return c

    return make if fn is None else make(fn)
