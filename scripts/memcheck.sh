#!/usr/bin/env bash
# Runs every C test program under valgrind: any leak or memory error fails.
# The build must not use -march=native (valgrind does not decode AVX-512),
# and OpenBLAS and oneDNN (whose kernels are generated for the CPU it runs
# on) are told to use their AVX2 kernels for the same reason.
#
# valgrind runs a program's threads one at a time, on one core: the
# programs run side by side, one per core (MEMCHECK_JOBS, default nproc),
# each with its own log, printed when it ends (whole, when it failed), with
# the seconds it took. OpenMP's workers sleep instead of spinning while they
# wait (OMP_WAIT_POLICY=passive): valgrind runs one thread at a time, and a
# spinning worker holds the core the thread it waits for needs
# (test_op_harness: 69-149 s spinning, 14-16 s passive).
set -euo pipefail
build=${1:-build-memcheck}
jobs=${MEMCHECK_JOBS:-$(nproc)}
export OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive

# one program: its summary line, or its whole log and status 1
run_one() {
  local t=$1 log start=$SECONDS
  log=$(mktemp)
  if valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
      --errors-for-leak-kinds=definite,indirect "$t" >"$log" 2>&1; then
    echo "memcheck: $(basename "$t") ($((SECONDS - start)) s): $(tail -n 1 "$log")"
    rm -f "$log"
    return 0
  fi
  echo "memcheck: $(basename "$t") FAILED ($((SECONDS - start)) s):"
  cat "$log"
  rm -f "$log"
  return 1
}
export -f run_one

programs=()
for t in "$build"/tests/test_*; do
  [ -x "$t" ] && programs+=("$t")
done
[ ${#programs[@]} -gt 0 ] || { echo "memcheck: no test programs in $build/tests" >&2; exit 1; }
# xargs exits nonzero when any program failed
printf '%s\0' "${programs[@]}" | xargs -0 -n 1 -P "$jobs" bash -c 'run_one "$1"' _
