#!/usr/bin/env bash
# Makes the project-local Python environment the Python package is built and
# tested in: .venv at the repository root (git-ignored; shared with
# scripts/bench_setup.sh), with numpy, pytest, setuptools, wheel and safetensors
# from PyPI (wheel: pip builds the package offline with it,
# tests/python/test_install.py; safetensors: the interoperability tests of
# jag.save / jag.load).
# A no-op when they are already there. Prints the venv's python on stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  echo "python-env: creating $venv" >&2
  python3 -m venv "$venv" >&2 || { echo "python-env: python3 -m venv failed; install python3-venv" >&2; exit 1; }
fi
if ! "$py" -c 'import numpy, pytest, setuptools, wheel, safetensors' >/dev/null 2>&1; then
  echo "python-env: installing numpy, pytest, setuptools, wheel, safetensors into .venv (pip, from PyPI)" >&2
  "$py" -m pip install --disable-pip-version-check --progress-bar off -q numpy pytest setuptools wheel safetensors >&2 ||
    { echo "python-env: pip install failed (is PyPI reachable?)" >&2; exit 1; }
fi
echo "$py"
