#!/usr/bin/env bash
# Installs what building and testing jag needs on Debian, once: a no-op when
# everything is already there. Used by every make target that builds.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in build-essential cmake pkg-config libopenblas-openmp-dev libdnnl-dev libsleef-dev libomp-dev valgrind python3-dev python3-venv fortunes-min libopenmpi-dev openmpi-bin; do
  have_pkg "$p" || need+=("$p")
done
if [ "${JAG_SETUP_EXTRA:-}" != "" ]; then
  for p in $JAG_SETUP_EXTRA; do have_pkg "$p" || need+=("$p"); done
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
