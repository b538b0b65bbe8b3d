#!/usr/bin/env bash
# Runs every benchmark program, collects their JSON figures with the
# machine's description into bench/results/<date>-<host>.json, and writes
# bench/report.md from it. Usage: scripts/bench.sh BUILD_DIR [--quick]
set -euo pipefail
build=${1:-build}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
out_dir="$root/bench/results"
mkdir -p "$out_dir"
stamp=$(date +%Y-%m-%d)
host=$(hostname -s 2>/dev/null || echo host)
result="$out_dir/$stamp-$host.json"
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
for prog in "$build"/bench/bench_*; do
  [ -x "$prog" ] || continue
  echo "bench: running $(basename "$prog") $*" >&2
  "$prog" "$@" | tee -a "$lines"
done
python3 "$root/scripts/bench_report.py" --lines "$lines" --out "$result" --report "$root/bench/report.md"
echo "bench: figures in $result, report in bench/report.md" >&2
