#!/bin/sh
# run_example.sh PATTERN... -- COMMAND [ARGS...]
# Runs an example, prints its output, and passes when it exits 0 and every
# PATTERN (an extended regular expression) matches some line of its output.
# (ctest's PASS_REGULAR_EXPRESSION alone would pass an example that prints
# the pattern and then fails.)
n=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    n=$((n + 1))
    eval "pattern_$n=\$1"
    shift
done
[ "$1" = "--" ] || { echo "run_example.sh: expected -- before the command" >&2; exit 2; }
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
    echo "run_example.sh: $1 exited with status $rc" >&2
    exit 1
fi
i=1
while [ $i -le $n ]; do
    eval "pattern=\$pattern_$i"
    if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
        echo "run_example.sh: the output of $1 lacks /$pattern/" >&2
        exit 1
    fi
    i=$((i + 1))
done
