/*
 * bench.h — a small benchmark harness: warm-up, repeats, median/min/max,
 * one JSON object per figure on stdout (collected by scripts/bench.sh).
 *
 * Figures are ratios measured in one run (op vs memcpy, op vs direct BLAS),
 * because the machine is shared and noisy: absolute times drift, ratios of
 * neighbours measured in the same second hold.
 */
#ifndef JAG_BENCH_H
#define JAG_BENCH_H

#include "jag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct bench_stats {
    double median, min, max; /* seconds per run */
    int repeats;
} bench_stats;

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_quick; /* --quick: fewer repeats */

/* Time fn(ctx): `warmup` untimed runs, then runs until `repeats` runs and at
 * least min_seconds have passed (at most 1000 runs). */
static inline bench_stats bench_run(void (*fn)(void *), void *ctx, int repeats, double min_seconds) {
    if (bench_quick) {
        repeats = repeats > 3 ? 3 : repeats;
        min_seconds /= 4;
    }
    enum { MAX_RUNS = 1000 };
    static double times[MAX_RUNS];
    for (int i = 0; i < 2; i++) fn(ctx);
    int n = 0;
    double start = bench_now();
    while (n < MAX_RUNS && (n < repeats || bench_now() - start < min_seconds)) {
        double t0 = bench_now();
        fn(ctx);
        times[n++] = bench_now() - t0;
    }
    qsort(times, (size_t)n, sizeof times[0], bench_cmp_double);
    bench_stats s = {times[n / 2], times[0], times[n - 1], n};
    return s;
}

/* Time a pair (a, b) interleaved, so both see the same machine state; returns
 * both stats. Use for every ratio. */
static inline void bench_pair(void (*fa)(void *), void *ca, void (*fb)(void *), void *cb, int repeats,
                              double min_seconds, bench_stats *sa, bench_stats *sb) {
    /* Interleave in rounds: a block of a, a block of b, ... and take the
     * median over every round of each. */
    enum { ROUNDS = 5 };
    bench_stats ra[ROUNDS], rb[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        ra[r] = bench_run(fa, ca, repeats / ROUNDS + 1, min_seconds / ROUNDS / 2);
        rb[r] = bench_run(fb, cb, repeats / ROUNDS + 1, min_seconds / ROUNDS / 2);
    }
    double ma[ROUNDS], mb[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) ma[r] = ra[r].median, mb[r] = rb[r].median;
    qsort(ma, ROUNDS, sizeof ma[0], bench_cmp_double);
    qsort(mb, ROUNDS, sizeof mb[0], bench_cmp_double);
    sa->median = ma[ROUNDS / 2], sa->min = ma[0], sa->max = ma[ROUNDS - 1];
    sb->median = mb[ROUNDS / 2], sb->min = mb[0], sb->max = mb[ROUNDS - 1];
    sa->repeats = sb->repeats = ROUNDS;
}

/* The baseline of the bandwidth figures: memcpy of `bytes` from src to a
 * warm dst, split across the same OpenMP threads the ops use (the
 * machine's copy bandwidth, not one core's); it moves 2 x bytes. */
typedef struct bench_copy {
    const void *src;
    void *dst;
    size_t bytes;
} bench_copy;

static inline void bench_run_copy(void *p) {
    bench_copy *c = p;
#pragma omp parallel
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        size_t b = c->bytes / 64 * (size_t)t / (size_t)nt * 64;
        size_t e = t == nt - 1 ? c->bytes : c->bytes / 64 * (size_t)(t + 1) / (size_t)nt * 64;
        memcpy((char *)c->dst + b, (const char *)c->src + b, e - b);
    }
    __asm__ volatile("" : : "r"(c->dst) : "memory"); /* the copy is not dead */
}

/* One figure as a JSON line: {"bench": ..., "name": ..., params..., values...} */
static inline void bench_emit(const char *bench, const char *name, const char *params_json, const char *values_json) {
    printf("{\"bench\": \"%s\", \"name\": \"%s\", \"params\": {%s}, \"values\": {%s}}\n", bench, name, params_json,
           values_json);
    fflush(stdout);
}

static inline void bench_check(jag_status st, const char *what) {
    if (st != JAG_OK) {
        fprintf(stderr, "bench: %s failed: %s\n", what, jag_last_error());
        exit(1);
    }
}

static inline void bench_parse_args(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0) bench_quick = 1;
}

#endif /* JAG_BENCH_H */
