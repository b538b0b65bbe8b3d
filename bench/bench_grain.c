/*
 * bench_grain.c — where two threads start to pay: each op family timed on
 * float32 tensors of 1K to 4M elements with 1 and with 2 threads,
 * interleaved (1, 2, 1, 2, ... in the same second), the ratio of each pair
 * kept and the median ratio reported.
 *
 * The library's parallel grains (src/core/internal.h) keep every size under
 * them on one thread, so the figures below a grain mean something only in a
 * build whose grains are 1:
 *     cmake -S . -B build-grain -DJAG_BUILD_BENCH=ON \
 *           -DCMAKE_C_FLAGS="-DJAG_GRAIN_MEMORY=1 \
 *             -DJAG_GRAIN_COMPUTE=1 -DJAG_GRAIN_REDUCE=1 -DJAG_GRAIN_ROWS=1 -DJAG_GRAIN_OPTIM=1"
 *     cmake --build build-grain --target bench_grain && build-grain/bench/bench_grain
 *
 * --fine: 4K to 128K elements by doubling, around the crossovers.
 *
 * Figures: "grain" {op, family, numel}: {t1_s, t2_s (medians), t2_over_t1
 * (median of the pairs' ratios), best_t2_over_best_t1 (the fastest runs'
 * ratio: what two threads give when the other core is free)} — a ratio
 * under 1 means two threads are faster.
 */
#include "bench.h"

typedef enum {
    OP_CLONE, OP_ADD, OP_RELU, OP_EXP, OP_SIN, OP_GELU, OP_SUM_ALL, OP_SUM_ROWS, OP_SOFTMAX, OP_LAYER_NORM,
    OP_INDEX_SELECT, OP_CAT, OP_ADAM, OP_COUNT
} op_kind;
static const char *const op_names[OP_COUNT] = {"clone",   "add",        "relu",         "exp", "sin",
                                               "gelu",    "sum_all",    "sum_rows",     "softmax",
                                               "layer_norm", "index_select", "cat", "adam"};
static const char *const op_family[OP_COUNT] = {"memory", "memory", "memory", "compute", "compute",
                                                "compute", "reduce", "reduce", "rows",  "rows",
                                                "memory", "memory", "optim"};

enum { ROW = 256 }; /* row length of the row ops (softmax, layer_norm, sum_rows) */

typedef struct {
    op_kind op;
    jag_tensor *x, *y, *rows, *w, *b, *index, *m, *v;
} operands;

static void check(jag_status st, const char *what) {
    if (st != JAG_OK) {
        fprintf(stderr, "bench_grain: %s failed: %s\n", what, jag_last_error());
        exit(1);
    }
}

static void run(void *p) {
    operands *c = p;
    jag_tensor *o = NULL;
    int last = 1, all[1] = {0};
    jag_status st = JAG_OK;
    switch (c->op) {
    case OP_CLONE: st = jag_clone(c->x, &o); break;
    case OP_ADD: st = jag_add(c->x, c->y, 1.0, &o); break;
    case OP_RELU: st = jag_relu(c->x, &o); break;
    case OP_EXP: st = jag_exp(c->x, &o); break;
    case OP_SIN: st = jag_sin(c->x, &o); break;
    case OP_GELU: st = jag_gelu(c->x, &o); break;
    case OP_SUM_ALL: st = jag_sum(c->x, all, 1, false, &o); break;
    case OP_SUM_ROWS: st = jag_sum(c->rows, &last, 1, false, &o); break;
    case OP_SOFTMAX: st = jag_softmax(c->rows, 1, &o); break;
    case OP_LAYER_NORM: st = jag_layer_norm(c->rows, 1, c->w, c->b, 1e-5, &o); break;
    case OP_INDEX_SELECT: st = jag_index_select(c->rows, 0, c->index, &o); break;
    case OP_CAT: {
        jag_tensor *xs[2] = {c->x, c->y};
        st = jag_cat(xs, 2, 0, &o);
        break;
    }
    case OP_ADAM: {
        int64_t step = 3;
        st = jag_optim_adam_update(&c->x, &c->y, &c->m, &c->v, NULL, &step, 1, 1e-6, 0.9, 0.999, 1e-8, 0.0,
                                   false, true);
        break;
    }
    default: break;
    }
    check(st, op_names[c->op]);
    if (o) jag_release(o);
}

/* Seconds per call of `c`, over enough calls to fill about a millisecond. */
static double time_calls(operands *c, int calls) {
    double t0 = bench_now();
    for (int i = 0; i < calls; i++) run(c);
    return (bench_now() - t0) / calls;
}

int main(int argc, char **argv) {
    int64_t first = 1024, last = 4 << 20, step = 4; /* --fine: 4K to 128K by doubling */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) bench_quick = 1;
        if (!strcmp(argv[i], "--fine")) first = 4096, last = 128 << 10, step = 2;
    }
    const int pairs = bench_quick ? 5 : 11;
    jag_generator *gen = NULL;
    check(jag_generator_new(1234, &gen), "jag_generator_new");
    for (int64_t numel = first; numel <= last; numel *= step) {
        int64_t n1[1] = {numel}, n2[2] = {numel / ROW, ROW}, nw[1] = {ROW}, ni[1] = {numel / ROW};
        operands c = {0};
        check(jag_rand_uniform(n1, 1, -2, 2, JAG_FLOAT32, gen, &c.x), "rand");
        check(jag_rand_uniform(n1, 1, -2, 2, JAG_FLOAT32, gen, &c.y), "rand");
        check(jag_rand_uniform(n1, 1, 0, 1, JAG_FLOAT32, gen, &c.m), "rand");
        check(jag_rand_uniform(n1, 1, 0, 1, JAG_FLOAT32, gen, &c.v), "rand");
        check(jag_rand_uniform(n2, 2, -2, 2, JAG_FLOAT32, gen, &c.rows), "rand");
        check(jag_full(nw, 1, 1.0, JAG_FLOAT32, &c.w), "full");
        check(jag_zeros(nw, 1, JAG_FLOAT32, &c.b), "zeros");
        check(jag_arange((double)ni[0] - 1, -1, -1, JAG_INT64, &c.index), "arange"); /* rows reversed */
        for (int op = 0; op < OP_COUNT; op++) {
            c.op = (op_kind)op;
            /* calls per timing: about 1 ms of one-thread work */
            jag_set_num_threads(1);
            run(&c);
            double once = time_calls(&c, 3);
            int calls = once > 1e-3 ? 1 : (int)(1e-3 / once) + 1;
            double ratio[64], t1s[64], t2s[64];
            for (int r = 0; r < pairs; r++) {
                jag_set_num_threads(1);
                run(&c);
                t1s[r] = time_calls(&c, calls);
                jag_set_num_threads(2);
                run(&c);
                t2s[r] = time_calls(&c, calls);
                ratio[r] = t2s[r] / t1s[r];
            }
            qsort(ratio, (size_t)pairs, sizeof ratio[0], bench_cmp_double);
            qsort(t1s, (size_t)pairs, sizeof t1s[0], bench_cmp_double);
            qsort(t2s, (size_t)pairs, sizeof t2s[0], bench_cmp_double);
            printf("{\"figure\": \"grain\", \"op\": \"%s\", \"family\": \"%s\", \"numel\": %lld, \"t1_s\": %.3e, "
                   "\"t2_s\": %.3e, \"t2_over_t1\": %.3f, \"best_t2_over_best_t1\": %.3f}\n",
                   op_names[op], op_family[op], (long long)numel, t1s[pairs / 2], t2s[pairs / 2],
                   ratio[pairs / 2], t2s[0] / t1s[0]);
            fflush(stdout);
        }
        jag_tensor *ts[] = {c.x, c.y, c.m, c.v, c.rows, c.w, c.b, c.index};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) jag_release(ts[i]);
    }
    jag_generator_free(gen);
    return 0;
}
