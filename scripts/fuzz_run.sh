#!/usr/bin/env bash
# Runs libFuzzer targets one after another: scripts/fuzz_run.sh BUILD SECONDS
# TARGET... Each runs single-threaded for SECONDS on a working corpus
# (BUILD/corpus/TARGET, new inputs) seeded from fuzz/corpus/TARGET, with
# crashes written to BUILD/artifacts/, and fuzz/TARGET.dict as a dictionary
# when there is one. Prints libFuzzer's final figures per
# target; fails when a target finds a crash.
set -euo pipefail
build=$1 seconds=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for t in "$@"; do
  mkdir -p "$build/corpus/$t" "$build/artifacts"
  log="$build/$t.log"
  dict=()
  [ -f "$root/fuzz/$t.dict" ] && dict=(-dict="$root/fuzz/$t.dict")
  echo "fuzz: $t for ${seconds}s (log: $log)"
  if OMP_NUM_THREADS=1 ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     "$build/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 "${dict[@]}" \
       -artifact_prefix="$build/artifacts/$t-" "$build/corpus/$t" "$root/fuzz/corpus/$t" >"$log" 2>&1; then
    grep -E "^#[0-9]+.*DONE|^stat::number_of_executed_units|^Done" "$log" | sed "s/^/  /" || true
    grep -E "^#[0-9]+" "$log" | tail -1 | sed "s/^/  last: /" || true
  else
    echo "fuzz: $t FAILED; the end of its log:"
    tail -40 "$log"
    status=1
  fi
done
exit $status
