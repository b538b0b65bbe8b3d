#!/usr/bin/env bash
# Makes the project-local Python environment the Python package is built and
# tested in: .venv at the repository root (git-ignored; shared with
# scripts/bench_setup.sh), with numpy, pytest, setuptools, scikit-build-core
# and safetensors from PyPI (setuptools: python/setup.py's in-place build;
# scikit-build-core: the build backend of pyproject.toml, so that
# tests/python/test_install.py builds the wheel offline; safetensors: the
# interoperability tests of jag.save / jag.load), and a .pth file that puts
# python/ on its sys.path: `import jag` in .venv finds the in-place built
# package (make test-python) from any directory.
# A no-op when all that is there. Prints the venv's python on stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  echo "python-env: creating $venv" >&2
  python3 -m venv "$venv" >&2 || { echo "python-env: python3 -m venv failed; install python3-venv" >&2; exit 1; }
fi
packages="numpy pytest setuptools scikit-build-core safetensors"
if ! "$py" -c 'import numpy, pytest, setuptools, scikit_build_core, safetensors' >/dev/null 2>&1; then
  echo "python-env: installing $packages into .venv (pip, from PyPI)" >&2
  # shellcheck disable=SC2086
  "$py" -m pip install --disable-pip-version-check --progress-bar off -q $packages >&2 ||
    { echo "python-env: pip install failed (is PyPI reachable?)" >&2; exit 1; }
fi
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pth="$site/jag-source-tree.pth"
if [ "$(cat "$pth" 2>/dev/null)" != "$root/python" ]; then
  echo "$root/python" >"$pth"
fi
echo "$py"
