#!/usr/bin/env bash
# Runs every benchmark program of a build, collects their JSON figures with
# the machine's description into bench/results/<date>-<host>.json (quick
# runs: <date>-<host>-quick.json), and regenerates bench/report.md and its
# PNG plots (bench/*.png) from that file.
#
# Usage: scripts/bench.sh BUILD_DIR [--quick] [--threads N] [--torch]
#   (bench/bench_python.py runs too: JAG_BENCH_PYTHON=/path/to/python picks
#   the interpreter, e.g. one with torch for the torch.nested comparison)
#   --quick      fewer repeats, smaller sizes: under two minutes (plus about
#                three for --torch)
#   --threads N  OpenMP threads for jag and OpenBLAS (default: every core);
#                torch gets the same number (torch.set_num_threads)
#   --torch      also bench/bench_torch.py: jag against PyTorch on the same
#                data (the report's summary). It runs in .venv-bench, which
#                scripts/bench_setup.sh --torch makes with torch from PyPI
#                (a large download, once); JAG_BENCH_TORCH_PYTHON=/path/to/
#                python uses an interpreter that has torch instead. With
#                --torch, bench_python.py runs there too (torch column),
#                unless JAG_BENCH_PYTHON says otherwise.
# Through make: make bench [BENCH_ARGS="--quick --threads 1"] [TORCH=1]
# JAG_BENCH_OUT=DIR writes the results file, report.md and its plots under
# DIR instead of bench/results/ and bench/ (a trial run that leaves the
# committed report alone).
#
# The plots need matplotlib: scripts/bench_setup.sh puts it in .venv (from
# PyPI). Without it the report is still written, and says why plots are
# missing. To redraw the report from a results file without rerunning:
#   .venv/bin/python scripts/bench_report.py render bench/results/FILE.json
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
shift || true
case "$build" in /*) ;; *) build="$root/$build" ;; esac

quick=0
torch=0
threads=""
prog_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; prog_args+=(--quick) ;;
    --threads) threads=${2:?--threads needs a number}; shift ;;
    --threads=*) threads=${1#--threads=} ;;
    --torch) torch=1 ;;
    *) echo "bench: unknown argument '$1' (known: --quick, --threads N, --torch)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$threads" ]; then
  case "$threads" in ''|*[!0-9]*|0) echo "bench: --threads needs a positive number" >&2; exit 2 ;; esac
  export OMP_NUM_THREADS="$threads"
fi

progs=()
for prog in "$build"/bench/bench_*; do
  [ -f "$prog" ] && [ -x "$prog" ] && progs+=("$prog")
done
if [ ${#progs[@]} -eq 0 ]; then
  echo "bench: no benchmark programs in $build/bench (build with -DJAG_BUILD_BENCH=ON)" >&2
  exit 1
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ "$build_type" != "Release" ]; then
  echo "bench: warning: $build is a '${build_type:-unknown}' build, not Release; figures will say so" >&2
fi

# matplotlib in .venv; without it the report is written with system python3.
plots_skipped=""
if py=$("$root/scripts/bench_setup.sh"); then :; else
  plots_skipped=$py
  py=python3
  echo "bench: plots will be skipped: $plots_skipped" >&2
fi

# torch for bench_torch.py: its own environment (.venv-bench), so that the
# project's .venv (make test) stays small; or JAG_BENCH_TORCH_PYTHON.
torch_py=""
torch_note="not requested (make bench TORCH=1, or scripts/bench.sh BUILD --torch)"
if [ "$torch" = 1 ]; then
  if [ -n "${JAG_BENCH_TORCH_PYTHON:-}" ]; then
    if "$JAG_BENCH_TORCH_PYTHON" -c 'import torch, numpy' >/dev/null 2>&1; then
      torch_py=$JAG_BENCH_TORCH_PYTHON
    else
      torch_note="JAG_BENCH_TORCH_PYTHON=$JAG_BENCH_TORCH_PYTHON cannot import torch and numpy"
    fi
  elif out=$("$root/scripts/bench_setup.sh" --torch); then
    torch_py=$out
  else
    torch_note=$out
  fi
  if [ -n "$torch_py" ]; then
    torch_note=""
  else
    echo "bench: the torch comparison will be skipped: $torch_note" >&2
  fi
fi
torch_missing=$([ "$torch" = 1 ] && [ -z "$torch_py" ] && echo 1 || echo 0)

report_dir="$root/bench"
out_dir="$root/bench/results"
if [ -n "${JAG_BENCH_OUT:-}" ]; then
  mkdir -p "$JAG_BENCH_OUT"
  report_dir=$(cd "$JAG_BENCH_OUT" && pwd)
  out_dir=$report_dir
fi
mkdir -p "$out_dir"
stamp=$(date +%Y-%m-%d)
host=$(hostname -s 2>/dev/null || hostname 2>/dev/null || echo host)
host=${host//[^A-Za-z0-9._-]/_}
suffix=""
[ "$quick" = 1 ] && suffix="-quick"
result="$out_dir/$stamp-$host$suffix.json"

raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
# How busy the machine is before we start: /proc/stat one second apart.
cat /proc/loadavg >"$raw/loadavg" 2>/dev/null || true
head -n 1 /proc/stat >"$raw/idle.stat0" 2>/dev/null || true
sleep 1
head -n 1 /proc/stat >"$raw/idle.stat1" 2>/dev/null || true

# seconds per program: a hung program costs this much, then the report says so
limit=$([ "$quick" = 1 ] && echo 150 || echo 600)
# bench_torch: compiling the encoder with torch.compile alone may take minutes
torch_limit=$([ "$quick" = 1 ] && echo 420 || echo 1800)
failed=0
TIMEFORMAT='%R %U %S'
# run_prog NAME COMMAND...: one benchmark program, its output and times in $raw
run_prog() {
  local name=$1
  shift
  echo "bench: running $name ${prog_args[*]:-}${threads:+ (OMP_NUM_THREADS=$threads)}" >&2
  head -n 1 /proc/stat >"$raw/$name.stat0" 2>/dev/null || true
  rc=0
  { time timeout "$limit" "$@" ${prog_args[@]+"${prog_args[@]}"} >"$raw/$name.out" 2>"$raw/$name.err"; } 2>"$raw/$name.time" || rc=$?
  head -n 1 /proc/stat >"$raw/$name.stat1" 2>/dev/null || true
  echo "$rc" >"$raw/$name.rc"
  echo "$*" >"$raw/$name.path"
  if [ "$rc" != 0 ]; then
    failed=1
    echo "bench: $name failed (exit $rc$([ "$rc" = 124 ] && echo ", over ${limit}s"))" >&2
    sed 's/^/  /' "$raw/$name.err" | tail -n 5 >&2
  fi
  echo "bench:   $(grep -c '^{' "$raw/$name.out" || true) figures in $(cut -d' ' -f1 "$raw/$name.time")s" >&2
}
for prog in "${progs[@]}"; do
  run_prog "$(basename "$prog")" "$prog"
done

# The Python bindings' overhead per op (bench/bench_python.py), with the
# extension built in place against this build. JAG_BENCH_PYTHON names
# another interpreter of the same Python version to run it with (one that
# has torch, for the torch.nested column).
if venv_py=$("$root/scripts/python_env.sh" 2>/dev/null) &&
   (cd "$root/python" && JAG_BUILD_DIR="$build" "$venv_py" setup.py -q build_ext --inplace --force >/dev/null 2>&1); then
  run_prog bench_python "${JAG_BENCH_PYTHON:-${torch_py:-$venv_py}}" "$root/bench/bench_python.py"
  if [ -n "$torch_py" ]; then
    limit=$torch_limit run_prog bench_torch "$torch_py" "$root/bench/bench_torch.py"
  fi
else
  echo "bench: the Python extension did not build; bench_python skipped" >&2
fi

"$py" "$root/scripts/bench_report.py" collect --raw "$raw" --build "$build" --out "$result" \
  --mode "$([ "$quick" = 1 ] && echo quick || echo full)" ${torch_note:+--torch-note "$torch_note"}
"$py" "$root/scripts/bench_report.py" render "$result" --report "$report_dir/report.md" \
  ${plots_skipped:+--plots-skipped "$plots_skipped"}
echo "bench: figures in ${result#"$root"/}, report in ${report_dir#"$root"/}/report.md" >&2
# A program that failed, or torch asked for and not there, is in the report;
# make bench still fails for it.
[ "$torch_missing" = 1 ] && failed=1
exit "$failed"
