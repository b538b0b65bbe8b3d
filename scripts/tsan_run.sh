#!/usr/bin/env bash
# Runs the C test suite of a ThreadSanitizer build (make tsan) under ctest;
# each program stops at its first report (halt_on_error=1, exit status 66)
# and ctest prints the report.
#
# OpenMP: with clang, jag's OpenMP loops run on LLVM's libomp, and so do
# OpenBLAS's (Debian's OpenMP build calls GOMP_* entry points, which libomp
# also provides and, loaded first, serves). Neither library is built with
# -fsanitize=thread. libarcher, libomp's OMPT tool (in libomp-dev, next to
# libomp; CMake records its path as JAG_ARCHER_LIBRARY), tells TSan where
# OpenMP's parallel regions, barriers, tasks and locks order the threads,
# and TSan must not look at the pthread and libc calls made from inside
# those uninstrumented libraries: ignore_noninstrumented_modules=1, which
# libarcher requires. That setting reaches only code not built with TSan
# (libomp, libopenblas, libgfortran, libgomp); every file of jag and of its
# tests is instrumented and fully checked. No suppressions are used.
#
# allocator_may_return_null=1: tests ask for impossible sizes on purpose and
# expect JAG_ENOMEM (as under ASan, see tests/CMakeLists.txt).
#
# Usage: scripts/tsan_run.sh [build-dir] [ctest arguments...]
set -euo pipefail
build=${1:-build-tsan}
shift || true
cache="$build/CMakeCache.txt"
archer=$(sed -n 's/^JAG_ARCHER_LIBRARY:FILEPATH=//p' "$cache" 2>/dev/null || true)
if [ -z "$archer" ] || [ ! -r "$archer" ]; then
  echo "tsan: $build is not a ThreadSanitizer build (configure with -DJAG_TSAN=ON, see make tsan)" >&2
  exit 1
fi
export OMP_TOOL_LIBRARIES="$archer"
export TSAN_OPTIONS="halt_on_error=1 history_size=4 second_deadlock_stack=1 ignore_noninstrumented_modules=1 allocator_may_return_null=1${TSAN_OPTIONS:+ $TSAN_OPTIONS}"

# libarcher must be active: without it every OpenMP barrier looks like no
# synchronisation at all. libomp loads its tool when it starts, in any
# program (the probe's own result does not matter here).
probe="$build/tests/test_subclass"
if [ -x "$probe" ]; then
  out=$(ARCHER_OPTIONS=verbose=1 OMP_NUM_THREADS=2 "$probe" 2>&1 || true)
  if ! grep -q "Archer detected OpenMP application with TSan" <<<"$out"; then
    echo "tsan: libarcher ($archer) did not attach to libomp; OpenMP would not be understood" >&2
    exit 1
  fi
fi

# The install test builds a consumer without TSan's runtime: not under TSan.
cd "$build"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" -E '^install$' "$@"
