#!/usr/bin/env bash
# usage: OUT=dir run_table.sh TAG ROUNDS [M-list] [K:N-list]
# One C round (every library alternated per shape), then one torch round,
# repeated; appends to $OUT/raw_TAG.csv. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/gemm_libs}
tag=$1; rounds=$2; shift 2
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 BLIS_NUM_THREADS=2 MKL_THREADING_LAYER=GNU
export LD_LIBRARY_PATH=$OUT/mklenv/lib JAG_MKL_SO=${JAG_MKL_SO:-$OUT/mklenv/lib/libmkl_rt.so.3}
py=${TORCH_PYTHON:-$root/.venv-bench/bin/python}
out=$OUT/raw_$tag.csv; : > "$out"
for r in $(seq 1 "$rounds"); do
  "$OUT/bench_gemm_libs" "$r" both "$@" >> "$out"
  "$py" "$here/bench_gemm_libs.py" "$r" both "$@" >> "$out"
  echo "round $r done $(date +%T)" >&2
done
