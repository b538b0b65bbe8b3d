/*
 * bench_autograd.c — autograd costs:
 *   mlp: forward + backward of linear -> gelu -> linear -> sum over a jagged
 *        batch vs the same on the padded batch (target: nested <= padded *
 *        real/padded elements * 1.2);
 *   node overhead: backward through a chain of tiny ops, ns per node
 *        (target: under 1 us of engine bookkeeping per node; the figure
 *        includes the tiny op each rule runs, so it is an upper bound).
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

int main(int argc, char **argv) {
    bench_parse_args(argc, argv);
    jag_manual_seed(5);
    bench_node_overhead();
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
