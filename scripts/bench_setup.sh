#!/usr/bin/env bash
# Makes the project-local Python environment the benchmark report plots with:
# .venv at the repository root (git-ignored), with matplotlib from PyPI.
# A no-op when it is already there.
#
# On success prints the path of the environment's python on stdout and exits
# 0. On failure prints one line saying why on stdout and exits 1: the report
# is then written without plots, with that line in it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
py="$venv/bin/python"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() { echo "$1"; exit 1; }
last_line() { grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-200; }

if [ ! -x "$py" ]; then
  echo "bench-setup: creating $venv" >&2
  python3 -m venv "$venv" >"$log" 2>&1 ||
    fail "python3 -m venv failed ($(last_line)); install python3-venv"
fi
if ! "$py" -c 'import matplotlib' >/dev/null 2>&1; then
  echo "bench-setup: installing matplotlib into .venv (pip, from PyPI)" >&2
  if ! "$py" -m pip install --disable-pip-version-check --progress-bar off 'matplotlib>=3.5' >"$log" 2>&1; then
    why=""
    grep -qiE 'NewConnectionError|Connection refused|Name or service not known|Temporary failure in name resolution|from versions: none' "$log" &&
      why=" (PyPI not reachable from this machine?)"
    fail "pip install matplotlib failed$why: $(last_line)"
  fi
  "$py" -c 'import matplotlib' >"$log" 2>&1 ||
    fail "matplotlib installed but does not import: $(last_line)"
fi
echo "$py"
