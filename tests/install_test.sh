#!/usr/bin/env bash
# Installs jag into a temporary prefix (cmake --install, what `make install
# PREFIX=...` runs) and builds the README's program against it twice: with
# the README's pkg-config command, copied from README.md, and with CMake's
# find_package (tests/install/). Both programs must run as built, without
# LD_LIBRARY_PATH (their rpath finds libjag.so.0 in the prefix), and print
# the README's result and its error for the bad mm. Every ```c block of
# README.md is then built verbatim with the same command and run.
set -euo pipefail
src=$1
build=$2
prefix=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

readme_command='cc prog.c $(pkg-config --cflags --libs jag) -Wl,-rpath,$(pkg-config --variable=libdir jag)'
grep -qF "$readme_command" "$src/README.md" || fail "README.md no longer shows: $readme_command"

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n 1)
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$libdir/pkgconfig"

cp "$src/examples/first_program.c" "$work/prog.c"
(cd "$work" && eval "${readme_command/cc prog.c/cc -std=c11 -Wall -Wextra -Werror prog.c -o pc}")
"$work/pc" >"$work/out" 2>&1 || fail "the pkg-config program does not run: $(cat "$work/out")"
grep -q "size=\[2, 4\]" "$work/out" || fail "pkg-config program: no result in: $(cat "$work/out")"
grep -q "jag_mm" "$work/out" || fail "pkg-config program: no jag_mm error in: $(cat "$work/out")"

# every ```c block of README.md, verbatim, built the same way and run
awk -v dir="$work" '/^```c$/ {n++; f=dir "/readme_" n ".c"; inblock=1; next}
                    /^```$/ {inblock=0; next}
                    inblock {print > f}' "$src/README.md"
blocks=$(ls "$work"/readme_*.c 2>/dev/null | wc -l)
[ "$blocks" -ge 2 ] || fail "README.md: expected its two C programs in \`\`\`c blocks, found $blocks"
for c in "$work"/readme_*.c; do
  exe=${c%.c}
  (cd "$work" && eval "${readme_command/cc prog.c/cc -std=c11 -Wall -Wextra -Werror $c -o $exe}") ||
    fail "README.md's block $(basename "$c") does not compile"
  "$exe" >"$exe.out" 2>&1 || fail "README.md's block $(basename "$c") does not run: $(cat "$exe.out")"
  grep -q "tensor(" "$exe.out" || fail "README.md's block $(basename "$c") printed no tensor: $(cat "$exe.out")"
done

cmake -S "$src/tests/install" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
  -DFIRST_PROGRAM="$src/examples/first_program.c" >/dev/null
cmake --build "$work/cm" >/dev/null
"$work/cm/consumer" >"$work/out2" 2>&1 || fail "the find_package program does not run: $(cat "$work/out2")"
grep -q "size=\[2, 4\]" "$work/out2" || fail "find_package program: no result in: $(cat "$work/out2")"
echo "1 passed, 0 failed"
