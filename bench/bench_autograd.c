/*
 * bench_autograd.c — autograd costs:
 *   mlp: forward + backward of linear -> gelu -> linear -> sum over a jagged
 *        batch vs the same on the padded batch (target: nested <= padded *
 *        real/padded elements * 1.2);
 *   node overhead: backward through a chain of tiny ops, ns per node
 *        (target: under 1 us of engine bookkeeping per node; the figure
 *        includes the tiny op each rule runs, so it is an upper bound);
 *   norms: layer_norm, rms_norm, softmax, log_softmax over the last dim of
 *        (8192, 768) float32, dense and nested of the same rows: forward
 *        time, backward time (forward + backward, less the forward, measured
 *        interleaved) and their ratio (target: backward <= 2.5 x forward).
 */
#include "../examples/corpus.h"
#include "bench.h"

typedef struct {
    jag_tensor *x, *w1, *b1, *w2, *b2;
} mlp_ctx;

static void run_mlp(void *p) {
    mlp_ctx *c = p;
    jag_tensor *h = NULL, *g = NULL, *o = NULL, *s = NULL, *v = NULL;
    bench_check(jag_scope_begin(), "scope");
    bench_check(jag_linear(c->x, c->w1, c->b1, &h), "linear1");
    bench_check(jag_gelu(h, &g), "gelu");
    bench_check(jag_linear(g, c->w2, c->b2, &o), "linear2");
    if (jag_is_nested(o)) bench_check(jag_nested_values(o, &v), "values");
    bench_check(jag_sum(v ? v : o, NULL, 0, false, &s), "sum");
    bench_check(jag_backward(s, NULL, false), "backward");
    bench_check(jag_scope_end(), "scope");
    jag_zero_grad(c->w1), jag_zero_grad(c->b1), jag_zero_grad(c->w2), jag_zero_grad(c->b2);
}

static void lengths_of(const char *dist, const corpus *c, int64_t batch, int64_t *lens) {
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < batch; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        if (strcmp(dist, "uniform") == 0) lens[i] = 1 + (int64_t)(s % 512);
        else {
            int64_t d = (int64_t)(s % (uint64_t)c->n_docs);
            lens[i] = c->offsets[d + 1] - c->offsets[d];
        }
    }
}

static void bench_mlp(const char *dist, const corpus *c, int64_t batch, int64_t dim) {
    int64_t *lens = malloc((size_t)batch * sizeof *lens), *offs = malloc((size_t)(batch + 1) * sizeof *offs);
    lengths_of(dist, c, batch, lens);
    offs[0] = 0;
    int64_t maxlen = 0;
    for (int64_t i = 0; i < batch; i++) offs[i + 1] = offs[i] + lens[i], maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    int64_t real = offs[batch], nb1 = batch + 1, hid = 4 * dim;
    jag_tensor *values = NULL, *offsets = NULL, *nt = NULL, *pad = NULL;
    mlp_ctx cn = {0}, cp = {0};
    bench_check(jag_rand_normal((int64_t[]){real, dim}, 2, 0, 1, JAG_FLOAT32, NULL, &values), "rand");
    bench_check(jag_from_data(offs, &nb1, 1, JAG_INT64, &offsets), "offsets");
    bench_check(jag_nested_from_jagged(values, offsets, NULL, &nt), "nested");
    bench_check(jag_nested_to_padded(nt, 0, NULL, 0, &pad), "pad");
    bench_check(jag_rand_normal((int64_t[]){hid, dim}, 2, 0, 0.05, JAG_FLOAT32, NULL, &cn.w1), "w1");
    bench_check(jag_zeros(&hid, 1, JAG_FLOAT32, &cn.b1), "b1");
    bench_check(jag_rand_normal((int64_t[]){dim, hid}, 2, 0, 0.05, JAG_FLOAT32, NULL, &cn.w2), "w2");
    bench_check(jag_zeros(&dim, 1, JAG_FLOAT32, &cn.b2), "b2");
    jag_tensor *params[4] = {cn.w1, cn.b1, cn.w2, cn.b2};
    for (int i = 0; i < 4; i++) bench_check(jag_set_requires_grad(params[i], true), "requires_grad");
    cn.x = nt;
    cp = cn;
    cp.x = pad;
    bench_stats sn, sp;
    bench_pair(run_mlp, &cn, run_mlp, &cp, 6, bench_quick ? 0.3 : 1.0, &sn, &sp);
    double ratio = (double)real / (double)(batch * maxlen);
    char params_json[160], values_json[400];
    snprintf(params_json, sizeof params_json, "\"lengths\": \"%s\", \"B\": %lld, \"D\": %lld, \"real_rows\": %lld, \"padded_rows\": %lld",
             dist, (long long)batch, (long long)dim, (long long)real, (long long)(batch * maxlen));
    snprintf(values_json, sizeof values_json,
             "\"nested_s\": %.6g, \"nested_s_min\": %.6g, \"nested_s_max\": %.6g, \"padded_s\": %.6g, \"padded_s_min\": %.6g, "
             "\"padded_s_max\": %.6g, \"speedup\": %.3f, \"real_over_padded\": %.4f, \"meets_target\": %s",
             sn.median, sn.min, sn.max, sp.median, sp.min, sp.max, sp.median / sn.median, ratio,
             sn.median <= sp.median * ratio * 1.2 ? "true" : "false");
    bench_emit("autograd", "mlp_fwd_bwd_vs_padded", params_json, values_json);
    for (int i = 0; i < 4; i++) jag_release(params[i]);
    jag_release(values), jag_release(offsets), jag_release(nt), jag_release(pad);
    free(lens), free(offs);
}

#define CHAIN 2000

typedef struct {
    jag_tensor *x;
} chain_ctx;

static void run_chain_forward(void *p) {
    chain_ctx *c = p;
    bench_check(jag_scope_begin(), "scope");
    jag_tensor *y = c->x;
    for (int i = 0; i < CHAIN; i++) bench_check(jag_mul_scalar(y, 1.0, &y), "mul");
    bench_check(jag_scope_end(), "scope");
}

static void run_chain_backward(void *p) {
    chain_ctx *c = p;
    bench_check(jag_scope_begin(), "scope");
    jag_tensor *y = c->x;
    for (int i = 0; i < CHAIN; i++) bench_check(jag_mul_scalar(y, 1.0, &y), "mul");
    bench_check(jag_backward(y, NULL, false), "backward");
    bench_check(jag_scope_end(), "scope");
    jag_zero_grad(c->x);
}

static void bench_node_overhead(void) {
    chain_ctx c = {0};
    bench_check(jag_ones(NULL, 0, JAG_FLOAT32, &c.x), "x");
    bench_check(jag_set_requires_grad(c.x, true), "requires_grad");
    bench_stats sf, sb;
    bench_pair(run_chain_forward, &c, run_chain_backward, &c, 10, 0.5, &sf, &sb);
    double per_node = (sb.median - sf.median) / CHAIN * 1e9;
    char values_json[200];
    snprintf(values_json, sizeof values_json,
             "\"forward_ns_per_op\": %.1f, \"backward_ns_per_node\": %.1f, \"meets_target\": %s", sf.median / CHAIN * 1e9,
             per_node, per_node < 1000 ? "true" : "false");
    bench_emit("autograd", "backward_node_overhead", "\"op\": \"mul_scalar\", \"shape\": \"()\"", values_json);
    jag_release(c.x);
}

typedef enum { NORM_LAYER, NORM_RMS, NORM_SOFTMAX, NORM_LOG_SOFTMAX } norm_kind;
static const char *const norm_names[] = {"layer_norm", "rms_norm", "softmax", "log_softmax"};

typedef struct {
    norm_kind kind;
    jag_tensor *x, *w, *b, *g; /* x requires grad; g the output gradient */
} norm_ctx;

static jag_tensor *run_norm_op(norm_ctx *c) {
    jag_tensor *y = NULL;
    switch (c->kind) {
    case NORM_LAYER: bench_check(jag_layer_norm(c->x, 1, c->w, c->b, 1e-5, &y), "layer_norm"); break;
    case NORM_RMS: bench_check(jag_rms_norm(c->x, 1, c->w, 1e-6, &y), "rms_norm"); break;
    case NORM_SOFTMAX: bench_check(jag_softmax(c->x, -1, &y), "softmax"); break;
    case NORM_LOG_SOFTMAX: bench_check(jag_log_softmax(c->x, -1, &y), "log_softmax"); break;
    }
    return y;
}

static void run_norm_forward(void *p) {
    bench_check(jag_scope_begin(), "scope");
    run_norm_op(p);
    bench_check(jag_scope_end(), "scope");
}

static void run_norm_forward_backward(void *p) {
    norm_ctx *c = p;
    bench_check(jag_scope_begin(), "scope");
    bench_check(jag_backward(run_norm_op(c), c->g, false), "backward");
    bench_check(jag_scope_end(), "scope");
    jag_zero_grad(c->x), jag_zero_grad(c->w), jag_zero_grad(c->b);
}

/* (rows, dim) float32, dense or a nested batch of components of 1..255
 * rows (the same rows in all), weight and bias requiring grad. */
static void bench_norm(norm_kind kind, bool nested, int64_t rows, int64_t dim) {
    norm_ctx c = {.kind = kind};
    jag_tensor *xv = NULL, *gv = NULL, *offsets = NULL;
    bench_check(jag_rand_normal((int64_t[]){rows, dim}, 2, 1, 2, JAG_FLOAT32, NULL, &xv), "x");
    bench_check(jag_rand_normal((int64_t[]){rows, dim}, 2, 0, 1, JAG_FLOAT32, NULL, &gv), "g");
    int64_t batch = 0;
    if (nested) {
        int64_t *offs = malloc((size_t)(rows + 1) * sizeof *offs);
        uint64_t s = 88172645463325252ull;
        offs[0] = 0;
        while (offs[batch] < rows) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            int64_t len = 1 + (int64_t)(s % 255);
            offs[batch + 1] = offs[batch] + len < rows ? offs[batch] + len : rows;
            batch++;
        }
        int64_t nb1 = batch + 1;
        bench_check(jag_from_data(offs, &nb1, 1, JAG_INT64, &offsets), "offsets");
        free(offs);
        bench_check(jag_nested_from_jagged(xv, offsets, NULL, &c.x), "nested x");
        bench_check(jag_nested_from_jagged(gv, offsets, NULL, &c.g), "nested g");
    } else {
        c.x = jag_retain(xv), c.g = jag_retain(gv);
    }
    bench_check(jag_set_requires_grad(c.x, true), "requires_grad");
    if (kind == NORM_LAYER || kind == NORM_RMS) {
        bench_check(jag_rand_normal(&dim, 1, 1, 0.1, JAG_FLOAT32, NULL, &c.w), "w");
        bench_check(jag_set_requires_grad(c.w, true), "requires_grad");
    }
    if (kind == NORM_LAYER) {
        bench_check(jag_rand_normal(&dim, 1, 0, 0.1, JAG_FLOAT32, NULL, &c.b), "b");
        bench_check(jag_set_requires_grad(c.b, true), "requires_grad");
    }
    bench_stats sf, sfb;
    bench_pair(run_norm_forward, &c, run_norm_forward_backward, &c, 10, bench_quick ? 0.3 : 1.0, &sf, &sfb);
    double bwd = sfb.median - sf.median, ratio = bwd / sf.median;
    char params_json[200], values_json[300];
    snprintf(params_json, sizeof params_json, "\"op\": \"%s\", \"layout\": \"%s\", \"rows\": %lld, \"D\": %lld, \"components\": %lld",
             norm_names[kind], nested ? "jagged" : "dense", (long long)rows, (long long)dim, (long long)batch);
    snprintf(values_json, sizeof values_json,
             "\"forward_s\": %.6g, \"backward_s\": %.6g, \"backward_over_forward\": %.3f, \"meets_target\": %s", sf.median, bwd,
             ratio, ratio <= 2.5 ? "true" : "false");
    bench_emit("autograd", "norm_backward_over_forward", params_json, values_json);
    jag_release(c.x), jag_release(c.g), jag_release(c.w), jag_release(c.b);
    jag_release(xv), jag_release(gv), jag_release(offsets);
}

int main(int argc, char **argv) {
    bench_parse_args(argc, argv);
    jag_manual_seed(5);
    bench_node_overhead();
    for (int k = NORM_LAYER; k <= NORM_LOG_SOFTMAX; k++)
        for (int nested = 0; nested < 2; nested++) bench_norm((norm_kind)k, nested, 8192, 768);
    corpus c;
    char err[256] = "";
    int have = corpus_load_fortunes(&c, err, sizeof err) == 0;
    const char *dists[] = {"uniform", "corpus"};
    int64_t dims[] = {64, 256};
    for (int di = 0; di < 2; di++) {
        if (di == 1 && !have) break;
        for (int k = 0; k < 2; k++) {
            if (bench_quick && k == 1) continue;
            bench_mlp(dists[di], &c, 64, dims[k]);
        }
    }
    if (have) corpus_free(&c);
    return 0;
}
