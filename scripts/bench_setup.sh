#!/usr/bin/env bash
# Makes the project-local Python environments of the benchmarks. A no-op
# when they are already there.
#
#   scripts/bench_setup.sh          .venv at the repository root (git-ignored,
#                                   the project's), with matplotlib from PyPI:
#                                   the report's plots
#   scripts/bench_setup.sh --torch  .venv-bench at the repository root, with
#                                   torch and numpy from PyPI: the comparison
#                                   with PyTorch (bench/bench_torch.py)
#
# torch lives in its own environment because it is large (PyPI's Linux wheel
# is CUDA-capable and brings the CUDA libraries: about 5 GB; it runs on CPU
# without a GPU) and only the benchmarks need it: .venv, which make test
# creates and uses, stays small and quick to make. .venv-bench is made with
# the same python3 as .venv, so that jag's extension built in place for .venv
# imports there too.
#
# On success prints the path of the environment's python on stdout and exits
# 0. On failure prints one line saying why on stdout and exits 1: the report
# is then written without plots (or without the torch comparison), with that
# line in it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() { echo "$1"; exit 1; }
last_line() { grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-200; }
unreachable() {
  grep -qiE 'NewConnectionError|Connection refused|Name or service not known|Temporary failure in name resolution|from versions: none' "$log" &&
    echo " (PyPI not reachable from this machine?)"
}

if [ "${1:-}" = "--torch" ]; then
  venv="$root/.venv-bench"
  py="$venv/bin/python"
  if [ ! -x "$py" ]; then
    echo "bench-setup: creating $venv" >&2
    python3 -m venv "$venv" >"$log" 2>&1 ||
      fail "python3 -m venv failed ($(last_line)); install python3-venv"
  fi
  if ! "$py" -c 'import torch, numpy' >/dev/null 2>&1; then
    echo "bench-setup: installing torch and numpy into .venv-bench (pip, from PyPI; about 5 GB, once)" >&2
    "$py" -m pip install --disable-pip-version-check --progress-bar off torch numpy >"$log" 2>&1 ||
      fail "pip install torch failed$(unreachable): $(last_line)"
    "$py" -c 'import torch, numpy' >"$log" 2>&1 ||
      fail "torch installed but does not import: $(last_line)"
  fi
  if [ -x "$root/.venv/bin/python" ]; then
    mine=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    theirs=$("$root/.venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [ "$mine" = "$theirs" ] ||
      fail ".venv-bench has Python $mine but .venv (jag's extension) has $theirs; remove .venv-bench to remake it"
  fi
  echo "$py"
  exit 0
fi

venv="$root/.venv"
py="$venv/bin/python"

if [ ! -x "$py" ]; then
  echo "bench-setup: creating $venv" >&2
  python3 -m venv "$venv" >"$log" 2>&1 ||
    fail "python3 -m venv failed ($(last_line)); install python3-venv"
fi
if ! "$py" -c 'import matplotlib' >/dev/null 2>&1; then
  echo "bench-setup: installing matplotlib into .venv (pip, from PyPI)" >&2
  if ! "$py" -m pip install --disable-pip-version-check --progress-bar off 'matplotlib>=3.5' >"$log" 2>&1; then
    fail "pip install matplotlib failed$(unreachable): $(last_line)"
  fi
  "$py" -c 'import matplotlib' >"$log" 2>&1 ||
    fail "matplotlib installed but does not import: $(last_line)"
fi
echo "$py"
