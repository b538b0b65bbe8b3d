"""The package documents itself: every public definition of the Python
package jag (functions, classes, their public methods and properties) has a
docstring with a doctest example, the ``Example::`` sections of those
docstrings run as doctests and print what they say, and the PEP 561 marker
py.typed ships beside the modules so that type checkers read the package's
annotations.

The public API is found by walking the package: every module and subpackage
whose name does not start with "_", the names each one exports (``__all__``,
else its names not starting with "_"), and for a class the public members
its own body defines (members inherited from another jag class are checked
on that class). Only definitions written in the package's Python modules
are walked; the members the extension jag._C defines in C are not."""
import doctest
import importlib
import inspect
import os
import pkgutil
import types

import numpy as np
import pytest

import jag


def package_modules():
    """jag and every public module under it, by name."""
    found = {}

    def visit(module):
        if module.__name__ in found:
            return
        found[module.__name__] = module
        for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if not info.name.startswith("_"):
                visit(importlib.import_module(module.__name__ + "." + info.name))

    visit(jag)
    return found


MODULES = package_modules()


def defined_in_package(obj):
    module = getattr(obj, "__module__", None) or ""
    return module == "jag" or module.startswith("jag.")


def public_names(module):
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [n for n in vars(module) if not n.startswith("_")]


def is_function(obj):
    """A Python function, or an op function standing for one
    (jag._C.OpFunction: it keeps the function's docstring)."""
    return inspect.isfunction(obj) or isinstance(obj, jag._C.OpFunction)


def member_function(value):
    """The function behind a class member (a method, a static or class
    method, a property's getter), or None for a data attribute."""
    if isinstance(value, property):
        return value.fget
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    return value if is_function(value) else None


def has_doc(obj):
    return bool((getattr(obj, "__doc__", None) or "").strip())


def public_definitions():
    """(qualified name, object) for every public function and class of the
    package and every public member a class body defines; each object once,
    under the first module (in name order) that exports it."""
    seen = set()
    out = []
    for module_name in sorted(MODULES):
        module = MODULES[module_name]
        for name in public_names(module):
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType) or not (is_function(obj) or inspect.isclass(obj)):
                continue
            if not defined_in_package(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            qualified = "%s.%s" % (module_name, name)
            out.append((qualified, obj))
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    fn = member_function(value)
                    if not member.startswith("_") and fn is not None:
                        out.append(("%s.%s" % (qualified, member), value if isinstance(value, property) else fn))
    return out


def test_the_walk_reaches_every_public_module():
    # the modules the package documents as its public API
    expected = {"jag", "jag.nested", "jag.nn", "jag.nn.functional", "jag.nn.init", "jag.optim",
                "jag.optim.lr_scheduler", "jag.utils", "jag.utils.data", "jag.distributed", "jag.autograd",
                "jag.library", "jag.ops", "jag.compiler", "jag.serialization"}
    assert expected <= set(MODULES), sorted(expected - set(MODULES))
    names = {q for q, _ in public_definitions()}
    # a few definitions every walk must reach: a function, a class, a method, a property
    assert {"jag.nested.nested_tensor", "jag.nn.Linear", "jag.nn.Module.parameters", "jag.Tensor.shape",
            "jag.optim.SGD", "jag.utils.data.DataLoader"} <= names


def test_every_public_definition_has_a_docstring():
    missing = [q for q, obj in public_definitions() if not has_doc(obj)]
    assert not missing, "public definitions without a docstring (%d):\n  %s" % (len(missing), "\n  ".join(missing))


def test_every_public_definition_has_an_example():
    # the demand: every public function, class, method and property
    # shows its use in a doctest example (run by test_doctest_examples_run)
    parser = doctest.DocTestParser()
    without = [q for q, obj in public_definitions() if not parser.get_examples(getattr(obj, "__doc__", None) or "")]
    assert not without, "public definitions without a doctest example (%d):\n  %s" % (
        len(without), "\n  ".join(without))


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_doctest_examples_run(module_name):
    module = MODULES[module_name]
    tests = [t for t in doctest.DocTestFinder().find(module, module_name) if t.examples]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    old = np.get_printoptions()
    np.set_printoptions(precision=4, suppress=True, linewidth=75)
    try:
        for t in tests:
            t.globs = dict(t.globs, jag=jag, np=np)
            runner.run(t)
    finally:
        np.set_printoptions(**old)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "%d of %d doctest examples in %s failed (printed above)" % (
        result.failed, result.attempted, module_name)


def test_py_typed_marks_the_package_as_typed():
    marker = os.path.join(os.path.dirname(jag.__file__), "py.typed")
    assert os.path.isfile(marker), "PEP 561 marker missing: %s" % marker
