#!/usr/bin/env python3
"""Writes python/jag/_generated_ops.pyi: type stubs of the functions and
Tensor methods python/jag/__init__.py makes from the op table at import
(one per unary POINTWISE row of jag._C._op_rows(): jag.sin, Tensor.sin, ...).

    python scripts/gen_stubs.py           # rewrite the stub
    python scripts/gen_stubs.py --check   # exit 1 when the stub is out of date

jag/__init__.py imports the stub's names under typing.TYPE_CHECKING (the
functions) and has Tensor derive from its _GeneratedTensorMethods for type
checkers only, so that mypy sees what exists at run time. Only the names
__init__.py really generates are written: a hand-written function or method
of the same name keeps its own annotations. Needs an importable jag (its
extension built).
"""
import argparse
import inspect
import os
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUB = os.path.join(ROOT, "python", "jag", "_generated_ops.pyi")


def _code(f):
    """The code of the Python function f is or stands for (jag._C.OpFunction
    keeps it as __wrapped__), or None."""
    return getattr(inspect.unwrap(f), "__code__", None) if f is not None else None


def _import_jag():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import jag

    return jag


def _docstring(text, indent):
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '%s"""%s"""' % (indent, text)


def generate(jag):
    """The stub's text for the jag package given (imported)."""
    functions, methods = [], []
    # what jag/__init__.py makes from a row: the closures of _make_unary
    # and _make_unary_method (one code object each)
    function_code = _code(jag._make_unary("probe", ""))
    method_code = _code(jag._make_unary_method("probe", ""))
    for name, _schema, _doc, _tags in jag._C._op_rows():
        f = getattr(jag, name, None)
        if _code(f) is function_code:
            functions.append((name, f.__doc__))
        m = getattr(jag.Tensor, name, None)
        if _code(m) is method_code:
            methods.append((name, m.__doc__))
    lines = [
        '"""The functions and Tensor methods jag/__init__.py makes from the op table',
        "(jag._C._op_rows()), for type checkers. Written by scripts/gen_stubs.py;",
        'run it again after adding an op row instead of editing this file."""',
        "from jag import Tensor",
        "",
        "__all__ = [",
    ]
    lines += textwrap.wrap(" ".join('"%s",' % n for n, _ in functions), 100, initial_indent="    ",
                           subsequent_indent="    ", break_on_hyphens=False)
    lines += ["]", ""]
    for name, doc in functions:
        lines += ["", "def %s(input: Tensor) -> Tensor:" % name, _docstring(doc, "    "), "    ..."]
    lines += ["", "", "class _GeneratedTensorMethods:",
              '    """The generated Tensor methods; jag.Tensor derives from it for type checkers only."""']
    for name, doc in methods:
        lines += ["", "    def %s(self) -> Tensor:" % name, _docstring(doc, "        "), "        ..."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when %s is out of date" % STUB)
    args = parser.parse_args(argv)
    text = generate(_import_jag())
    if args.check:
        with open(STUB) as f:
            if f.read() != text:
                print("%s is out of date: run scripts/gen_stubs.py" % STUB, file=sys.stderr)
                return 1
        return 0
    with open(STUB, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
