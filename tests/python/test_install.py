"""Packaging. `pip wheel .` at the repository root builds libjag and the
extension jag._C with CMake (pyproject.toml, scikit-build-core) into one
wheel, which installs into a fresh virtual environment where `import jag`
works from any directory. And the project's .venv (scripts/python_env.sh)
imports the in-place built package from any directory.

The wheel is built offline with the scikit-build-core of this interpreter
(scripts/python_env.sh installs it from PyPI). Its CMake build tree is kept
in <build>/python-wheel/cmake (<build>: JAG_BUILD_DIR, else build/), so only
the first run compiles libjag (about a minute on two cores), later runs take
some 20 seconds. The fresh environment gets numpy from a wheel kept in
<build>/python-wheel/wheelhouse, downloaded from PyPI on the first run (the
test's only use of the network)."""
import glob
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(os.environ.get("JAG_BUILD_DIR", os.path.join(ROOT, "build")))
WHEEL_BUILD = os.path.join(BUILD, "python-wheel", "cmake")
WHEELHOUSE = os.path.join(BUILD, "python-wheel", "wheelhouse")


def clean_env():
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    return env


def run(cmd, what, timeout=600, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=timeout, **kw)
    assert r.returncode == 0, "%s failed (%s):\n%s\n%s" % (what, " ".join(cmd), r.stdout[-4000:], r.stderr[-4000:])
    return r.stdout


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(jag VERSION ([0-9.]+)", f.read()).group(1)


def package_sources():
    """Every .py file under python/jag, as a path inside the package."""
    top = os.path.join(ROOT, "python")
    found = set()
    for d, dirs, files in os.walk(os.path.join(top, "jag")):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        found.update(os.path.relpath(os.path.join(d, f), top) for f in files if f.endswith(".py"))
    return found


def build_wheel(out):
    probe = subprocess.run([sys.executable, "-c", "import scikit_build_core"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.fail("the build backend scikit-build-core is not importable in %s (run scripts/python_env.sh, "
                    "which installs it from PyPI): %s" % (sys.executable, probe.stderr.strip()[-300:]))
    run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(out), "-C", "build-dir=" + WHEEL_BUILD], "pip wheel . (offline, scikit-build-core)")
    wheels = glob.glob(os.path.join(str(out), "jag-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def numpy_wheelhouse():
    if not glob.glob(os.path.join(WHEELHOUSE, "numpy-*.whl")):
        r = subprocess.run([sys.executable, "-m", "pip", "download", "numpy", "--only-binary=:all:", "-d", WHEELHOUSE],
                           capture_output=True, text=True, env=clean_env(), timeout=600)
        if r.returncode != 0:
            pytest.fail("the fresh venv needs a numpy wheel, downloaded once from PyPI into %s, and the download "
                        "failed (is PyPI reachable?):\n%s" % (WHEELHOUSE, r.stderr[-2000:]))
    return WHEELHOUSE


CHECK = textwrap.dedent("""
    import json, os, sys
    import jag, jag.nn, jag.optim
    a = jag.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = jag.tensor([[5.0, 6.0]])
    nt = jag.nested.nested_tensor([a, b], layout=jag.jagged)
    print(json.dumps({
        "file": jag.__file__, "cwd": os.getcwd(), "path": sys.path, "version": jag.__version__,
        "extension": jag._C.__file__,
        "sizes": [list(t.shape) for t in nt.unbind()],
        "padded": jag.nested.to_padded_tensor(nt, 0.0).numpy().tolist(),
        "sum": (nt * 2).values().sum().item(),
    }))
""")


def test_wheel_installs_into_a_fresh_venv(tmp_path):
    wheel = build_wheel(tmp_path / "wheels")

    # The wheel: every Python module under python/jag (subpackages found, not
    # listed), the extension, and no C sources, no libjag of its own.
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert {n for n in names if n.endswith(".py")} == package_sources()
    extensions = [n for n in names if re.fullmatch(r"jag/_C\..*\.so", n)]
    assert len(extensions) == 1, names
    assert "jag/py.typed" in names  # PEP 561: type checkers read the annotations
    assert {"jag/_C.pyi", "jag/_generated_ops.pyi"} <= set(names)  # the stubs ship beside py.typed
    assert not [n for n in names if n.endswith((".c", ".h")) or "libjag" in n], names

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], "python -m venv (a clean venv, no system site-packages)")
    py = str(venv / "bin" / "python")
    run([py, "-m", "pip", "install", "--no-index", "--find-links", str(tmp_path / "wheels"),
         "--find-links", numpy_wheelhouse(), "jag"], "pip install of the wheel and numpy into the fresh venv")

    work = tmp_path / "elsewhere"
    work.mkdir()
    got = json.loads(run([py, "-c", CHECK], "import jag in the fresh venv", timeout=120, cwd=str(work)))
    site = os.path.join(str(venv), "lib")
    assert got["file"].startswith(site) and "site-packages" in got["file"], got["file"]
    assert not [p for p in got["path"] if p.startswith(ROOT)], got["path"]
    assert got["version"] == project_version()
    # torch.nested.to_padded_tensor: component i in rows [0, len_i), padding after.
    assert got["sizes"] == [[2, 2], [1, 2]]
    assert got["padded"] == [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [0.0, 0.0]]]
    assert got["sum"] == 2 * (1 + 2 + 3 + 4 + 5 + 6)

    # libjag is linked into the extension: it needs no libjag.so and no
    # rpath (the build tree may go away).
    dynamic = run(["readelf", "-d", got["extension"]], "readelf -d on the installed extension")
    assert "libjag" not in dynamic and "RPATH" not in dynamic and "RUNPATH" not in dynamic, dynamic
    exported = run(["nm", "-D", "--defined-only", got["extension"]], "nm -D on the installed extension")
    assert [line.split()[-1] for line in exported.splitlines()] == ["PyInit__C"], exported


def test_project_venv_imports_the_source_tree_from_anywhere(tmp_path):
    """`make test` leaves .venv (scripts/python_env.sh) in which `import jag`
    finds python/jag from any directory (a .pth file), not only in python/."""
    py = run([os.path.join(ROOT, "scripts", "python_env.sh")], "scripts/python_env.sh").strip()
    assert os.path.realpath(os.path.dirname(py)) == os.path.realpath(os.path.join(ROOT, ".venv", "bin")), py
    got = run([py, "-c", "import jag; print(jag.__file__)"], "import jag in .venv", timeout=120, cwd=str(tmp_path))
    assert os.path.realpath(got.strip()) == os.path.realpath(os.path.join(ROOT, "python", "jag", "__init__.py"))
