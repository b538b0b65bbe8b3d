#!/bin/sh
# Data-parallel training over 2 ranks is the training of one process:
# examples/train_ragged run for STEPS steps in one process, then under
# `mpirun -np 2 ... --distributed`, both in --mode nested (one line
# "loss STEP VALUE TOKENS SECONDS" a step; with --distributed rank 0 prints
# the global batch's loss and tokens). Every step must have the same global
# batch (the same token count, exactly) and the same loss within TOL
# relative. One process: the mean over the batch's documents of float32
# cross entropies. Two ranks: each rank's mean over its share, weighted by
# its share of the documents and summed in float64; the gradients are the
# same sum taken per rank, then across ranks (jag_ddp). The float32 sums in
# another order differ by a few units of float32's 6e-8 rounding, and
# Adam's steps carry that into the later losses: the differences seen stay
# under 2e-7 relative over these steps, and TOL = 1e-5 leaves fifty times
# that. Leaving out the loss scale alone (shares of nearly equal size)
# already moves steps 2 to 6 by 1e-4 to 7e-3.
#
# usage: train_ragged_distributed.sh MPIRUN TRAIN_RAGGED STEPS [MPIRUN_FLAG]...
# (TRAIN_RAGGED_ARGS in the environment: more flags for both runs)
set -eu
mpirun=$1 program=$2 steps=$3
shift 3
TOL=1e-5
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$program" --mode nested --steps "$steps" ${TRAIN_RAGGED_ARGS:-} > "$dir/one" || { echo "FAIL: the one-process run failed"; exit 1; }
"$mpirun" -np 2 "$@" "$program" --mode nested --steps "$steps" ${TRAIN_RAGGED_ARGS:-} --distributed > "$dir/two" ||
    { echo "FAIL: the 2-rank run failed"; exit 1; }
awk -v steps="$steps" -v tol="$TOL" '
    FNR == NR && $1 == "loss" { one[$2] = $3; tok1[$2] = $4; next }
    $1 == "loss" { two[$2] = $3; tok2[$2] = $4; n2++ }
    END {
        bad = 0
        for (s = 1; s <= steps; s++) {
            if (!(s in one) || !(s in two)) { printf "FAIL: step %d missing\n", s; bad = 1; continue }
            d = one[s] - two[s]; if (d < 0) d = -d
            a = one[s] < 0 ? -one[s] : one[s]
            ok = tok1[s] == tok2[s] && d <= tol * a
            printf "step %d  tokens %s %s  loss one process %s  2 ranks %s  %s\n", s, tok1[s], tok2[s], one[s], two[s], ok ? "ok" : "FAIL"
            if (!ok) bad = 1
        }
        if (n2 != steps) { printf "FAIL: 2 ranks printed %d loss lines, expected %d (rank 0 alone prints)\n", n2, steps; bad = 1 }
        exit bad
    }' "$dir/one" "$dir/two"
