#!/usr/bin/env bash
# Installs jag into a temporary prefix and builds the README's program
# against it twice: with pkg-config and with CMake's find_package. Both
# programs must run and print the README's error for the bad mm.
set -euo pipefail
src=$1
build=$2
prefix=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n 1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 -Wall -Wextra -Werror "$src/examples/first_program.c" -o "$work/pc" $(pkg-config --cflags --libs jag)
LD_LIBRARY_PATH="$libdir" "$work/pc" >"$work/out" 2>&1
grep -q "size=\[2, 4\]" "$work/out"
grep -q "jag_mm" "$work/out"
cmake -S "$src/tests/install" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
  -DFIRST_PROGRAM="$src/examples/first_program.c" >/dev/null
cmake --build "$work/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/cm/consumer" >"$work/out2" 2>&1
grep -q "size=\[2, 4\]" "$work/out2"
echo "1 passed, 0 failed"
