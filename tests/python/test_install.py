"""`pip install ./python` builds the package with its standard build backend
(setuptools.build_meta, pyproject.toml) and `import jag` then works from
the installed copy. The sources are copied to a temporary folder first, so
the work tree is left as it was."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(os.environ.get("JAG_BUILD_DIR", os.path.join(ROOT, "build")))

CHECK = textwrap.dedent("""
    import sys
    sys.path = [p for p in sys.path if not p.rstrip("/").endswith("python")]
    {extra}
    import jag
    assert "site-packages" in jag.__file__ or {target!r} in jag.__file__, jag.__file__
    x = jag.ones(2, 3) * 2
    nt = jag.nested.nested_tensor([jag.ones(2, 3), jag.ones(1, 3)], layout=jag.jagged)
    print(jag.__version__, x.sum().item(), nt.shape)
""")


def copy_sources(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.so", "__pycache__", "*.egg-info"))
    return src


def env():
    e = dict(os.environ, JAG_BUILD_DIR=BUILD, JAG_INCLUDE_DIR=os.path.join(ROOT, "include"),
             PIP_DISABLE_PIP_VERSION_CHECK="1")
    e.pop("PYTHONPATH", None)
    return e


def test_pip_install_offline_with_the_build_backend(tmp_path):
    """pip's PEP 517 build with this interpreter's setuptools (no download)."""
    if not os.path.exists(os.path.join(BUILD, "libjag.so")):
        pytest.skip("no libjag.so in %s (run make build)" % BUILD)
    probe = "import setuptools, pip, importlib.util as u; print(setuptools.__version__, bool(u.find_spec('wheel')))"
    r = subprocess.run([sys.executable, "-c", probe],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        pytest.skip("building needs pip and setuptools in this interpreter: " + r.stderr.strip()[-200:])
    version, has_wheel = r.stdout.split()
    if tuple(int(p) for p in version.split(".")[:2]) < (70, 1) and has_wheel != "True":
        pytest.skip("setuptools %s has no built-in bdist_wheel and the wheel package is missing" % version)
    src = copy_sources(tmp_path)
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                        "--target", str(target), str(src)], capture_output=True, text=True, env=env(), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "jag" / "__init__.py").exists()
    code = CHECK.format(extra="sys.path.insert(0, %r)" % str(target), target=str(target))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path), env=env(),
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["0.1.0", "12.0"]


NETWORK_ERRORS = ("Could not find a version", "No matching distribution", "Failed to establish",
                  "Temporary failure in name resolution", "Network is unreachable", "connection", "timed out")


def test_pip_install_into_a_fresh_venv(tmp_path):
    """The plain `pip install ./python` into a new virtual environment (build
    isolation: pip fetches the build backend from the package index;
    skipped when the index cannot be reached)."""
    if not os.path.exists(os.path.join(BUILD, "libjag.so")):
        pytest.skip("no libjag.so in %s (run make build)" % BUILD)
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.skip("cannot make a virtual environment: %s" % r.stderr.strip()[-200:])
    py = str(venv / "bin" / "python")
    src = copy_sources(tmp_path)
    r = subprocess.run([py, "-m", "pip", "install", "--no-deps", str(src)], capture_output=True, text=True, env=env(),
                       timeout=600)
    if r.returncode != 0 and any(s.lower() in (r.stdout + r.stderr).lower() for s in NETWORK_ERRORS):
        pytest.skip("the build backend cannot be downloaded (offline): " + (r.stderr.strip().splitlines() or [""])[-1])
    assert r.returncode == 0, r.stdout + r.stderr
    code = CHECK.format(extra="", target="site-packages")
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=str(tmp_path), env=env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["0.1.0", "12.0"]
