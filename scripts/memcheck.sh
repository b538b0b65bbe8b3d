#!/usr/bin/env bash
# Runs every C test program under valgrind: any leak or memory error fails.
# The build must not use -march=native (valgrind does not decode AVX-512),
# and OpenBLAS and oneDNN (whose kernels are generated for the CPU it runs
# on) are told to use their AVX2 kernels for the same reason.
set -euo pipefail
build=${1:-build-memcheck}
export OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=2
status=0
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  echo "memcheck: $(basename "$t")"
  if ! valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
      --errors-for-leak-kinds=definite,indirect "$t" >/tmp/jag-memcheck.log 2>&1; then
    cat /tmp/jag-memcheck.log
    status=1
  fi
  tail -n 1 /tmp/jag-memcheck.log
done
exit $status
