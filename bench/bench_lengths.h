/*
 * bench_lengths.h — the component lengths the nested benchmarks use, from a
 * seeded generator so every run and every program sees the same batches.
 */
#ifndef JAG_BENCH_LENGTHS_H
#define JAG_BENCH_LENGTHS_H

#include "../examples/corpus.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Lengths from a seeded LCG: uniform in 1..512; long-tailed (Pareto, alpha
 * 1.2, from 8, capped at 512: most short, a few long); all equal (256); or
 * the corpus's document lengths ("corpus"). */
__attribute__((noinline)) static void make_lengths(const char *dist, const corpus *c, int64_t batch, uint64_t seed, int64_t *lens) {
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < batch; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) * 0x1.0p-53;
        if (strcmp(dist, "uniform") == 0) {
            lens[i] = 1 + (int64_t)((s >> 33) % 512);
        } else if (strcmp(dist, "long_tailed") == 0) {
            double l = 8.0 / pow(1.0 - u, 1.0 / 1.2);
            lens[i] = l > 512 ? 512 : (int64_t)l;
        } else if (strcmp(dist, "equal") == 0) {
            lens[i] = 256;
        } else {
            int64_t d = (int64_t)((s >> 33) % (uint64_t)c->n_docs);
            lens[i] = c->offsets[d + 1] - c->offsets[d];
        }
    }
}

#endif /* JAG_BENCH_LENGTHS_H */
