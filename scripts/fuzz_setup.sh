#!/usr/bin/env bash
# Installs what `make fuzz` needs beyond scripts/setup.sh: clang, whose
# package brings libFuzzer and the sanitizer runtimes. A no-op when clang is
# there already.
set -euo pipefail
if command -v clang >/dev/null 2>&1 && dpkg-query -W -f='${Status}' libclang-rt-dev 2>/dev/null | grep -q "install ok installed"; then
  exit 0
fi
if command -v clang >/dev/null 2>&1 && ! command -v dpkg-query >/dev/null 2>&1; then
  exit 0
fi
echo "fuzz-setup: installing clang"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null
