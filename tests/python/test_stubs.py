"""The type stubs: python/jag/_C.pyi declares what the extension exports,
python/jag/_generated_ops.pyi is what scripts/gen_stubs.py writes from the
op table today, and both are installed with the package."""
import ast
import fnmatch
import importlib.util
import inspect
import os
import re

import jag

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "python", "jag")


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_stubs", os.path.join(ROOT, "scripts", "gen_stubs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(path):
    with open(path) as f:
        return f.read()


def stub_names(tree):
    """Top-level names a stub declares, and each class's member names."""
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return names, members


def test_generated_stub_is_up_to_date():
    gen = load_generator()
    assert read(os.path.join(PACKAGE, "_generated_ops.pyi")) == gen.generate(jag), \
        "python/jag/_generated_ops.pyi is out of date: run scripts/gen_stubs.py"


def test_generated_stub_declares_every_generated_function_and_method():
    names, members = stub_names(ast.parse(read(os.path.join(PACKAGE, "_generated_ops.pyi"))))
    # __init__.py makes jag.<name> and Tensor.<name> for each unary POINTWISE row
    # "name(Tensor x) -> Tensor" that has no hand-written definition
    unary = [r[0] for r in jag._C._op_rows() if r[3] & 1 and r[1] == "%s(Tensor x) -> Tensor" % r[0]]
    assert "sin" in unary and "atan" in unary
    # (op functions: the closure each stands for is its __wrapped__)
    function_code = inspect.unwrap(jag._make_unary("probe", "")).__code__
    method_code = inspect.unwrap(jag._make_unary_method("probe", "")).__code__
    made_functions = {n for n in unary if inspect.unwrap(getattr(jag, n)).__code__ is function_code}
    made_methods = {n for n in unary if inspect.unwrap(getattr(jag.Tensor, n)).__code__ is method_code}
    assert "sin" in made_functions and "sin" in made_methods
    assert names - {"_GeneratedTensorMethods"} == made_functions
    assert members["_GeneratedTensorMethods"] == made_methods
    for n in unary:  # the hand-written ones stay out of the stub
        assert (n in made_functions) == (n in names)


def test_generator_check_mode_accepts_the_checked_in_stub():
    assert load_generator().main(["--check"]) == 0


def extension_source_names():
    """Every quoted name in the extension's sources (python/jag/_*.c): its
    method tables, getters, module constants and type names."""
    names = set()
    for f in os.listdir(PACKAGE):
        if f.startswith("_") and f.endswith(".c"):
            names |= set(re.findall(r'"(?:jag\._C\.)?([A-Za-z_][A-Za-z0-9_]*)"', read(os.path.join(PACKAGE, f))))
    return names


def test_c_stub_declares_what_the_extension_exports():
    names, members = stub_names(ast.parse(read(os.path.join(PACKAGE, "_C.pyi"))))
    names -= {"_T", "_Scalar"}  # the stub's own aliases
    exported = {n for n in dir(jag._C) if not (n.startswith("__") and n.endswith("__"))}
    assert exported <= names, "not in python/jag/_C.pyi: %s" % sorted(exported - names)
    # and nothing the extension's sources do not define (a build older than
    # the sources may lack a new name, never the other way round)
    sources = extension_source_names()
    assert names <= sources, "in python/jag/_C.pyi but not in python/jag/_*.c: %s" % sorted(names - sources)
    for cls in ("TensorBase", "Trace", "Program", "Compiled", "_Generator"):
        runtime = {n for n in vars(getattr(jag._C, cls)) if not (n.startswith("__") and n.endswith("__"))}
        declared = {n for n in members[cls] if not (n.startswith("__") and n.endswith("__"))}
        assert runtime <= declared, (cls, sorted(runtime - declared))
        assert declared <= sources, (cls, sorted(declared - sources))
        if "__call__" in vars(getattr(jag._C, cls)):  # Program and Compiled are called
            assert "__call__" in members[cls], cls


def installed_patterns():
    """The FILES_MATCHING patterns of python/CMakeLists.txt's install rule for
    python/jag (the files a wheel gets), and the excluded ones."""
    text = read(os.path.join(ROOT, "python", "CMakeLists.txt"))
    rule = re.search(r"install\(DIRECTORY jag/ (.*?)\)\n", text, re.S)
    assert rule, "python/CMakeLists.txt has no install(DIRECTORY jag/ ...) rule"
    body = rule.group(1)
    excluded = set(re.findall(r'PATTERN "([^"]+)" EXCLUDE', body))
    included = set(re.findall(r'PATTERN "([^"]+)"', body)) - excluded
    return included, excluded


def test_stubs_and_py_typed_are_installed():
    included, _ = installed_patterns()
    shipped = ["py.typed", "_C.pyi", "_generated_ops.pyi"]
    for name in shipped:
        assert os.path.exists(os.path.join(PACKAGE, name)), name
        assert any(fnmatch.fnmatch(name, p) for p in included), (name, included)
    assert not any(fnmatch.fnmatch("_C.c", p) for p in included)  # the C sources stay behind
