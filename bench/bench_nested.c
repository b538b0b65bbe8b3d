/*
 * bench_nested.c — nested tensors against padding and against the kernels:
 *
 *   dispatch overhead: ns per call of relu on a tiny jagged tensor, minus the
 *       same CPU kernel called directly on its values with a preallocated
 *       output (target: under 300 ns of overhead per op);
 *   nested vs padded: relu, gelu, linear, reductions and softmax along the
 *       ragged dim, masked_fill, index_select and cat along the batch dim on
 *       a jagged batch vs jag's own dense path on the padded equivalent, for B in {1, 8, 64, 512}, D in
 *       {64, 256, 1024}, lengths uniform in 1..512 or taken from a real text
 *       corpus (target: nested <= padded * real/padded * 1.1, never slower).
 */
#include "bench.h"
#include "bench_lengths.h"
#include "dispatch/dispatch.h"

#include <math.h>
#include <omp.h>
#include <unistd.h> /* sysconf */

/* ---- dispatch overhead -------------------------------------------------- */

typedef struct {
    jag_tensor *nt, *values, *out;
    jag_value args[1];
} tiny_ctx;

#define CALLS 1000

static void run_nested_relu(void *p) {
    tiny_ctx *c = p;
    for (int i = 0; i < CALLS; i++) {
        jag_tensor *o = NULL;
        bench_check(jag_relu(c->nt, &o), "relu");
        jag_release(o);
    }
}

static void run_dense_relu(void *p) {
    tiny_ctx *c = p;
    for (int i = 0; i < CALLS; i++) {
        jag_tensor *o = NULL;
        bench_check(jag_relu(c->values, &o), "relu");
        jag_release(o);
    }
}

static void run_kernel_relu(void *p) {
    tiny_ctx *c = p;
    for (int i = 0; i < CALLS; i++) bench_check(jag__cpu_relu("relu", c->args, 1, &c->out), "kernel");
}

static void bench_dispatch_overhead(void) {
    tiny_ctx c = {0};
    int64_t vs[2] = {3, 2}, o[3] = {0, 1, 3}, three = 3;
    jag_tensor *offsets = NULL;
    bench_check(jag_rand_normal(vs, 2, 0, 1, JAG_FLOAT32, NULL, &c.values), "rand");
    bench_check(jag_from_data(o, &three, 1, JAG_INT64, &offsets), "offsets");
    bench_check(jag_nested_from_jagged(c.values, offsets, NULL, &c.nt), "nested");
    bench_check(jag_empty(vs, 2, JAG_FLOAT32, &c.out), "out");
    c.args[0].kind = JAG_VAL_TENSOR;
    c.args[0].u.t = c.values;
    bench_stats sn, sk, sd, sk2;
    bench_pair(run_nested_relu, &c, run_kernel_relu, &c, 25, 0.5, &sn, &sk);
    bench_pair(run_dense_relu, &c, run_kernel_relu, &c, 25, 0.5, &sd, &sk2);
    double ns_nested = sn.median / CALLS * 1e9, ns_kernel = sk.median / CALLS * 1e9;
    double ns_dense = sd.median / CALLS * 1e9, ns_kernel2 = sk2.median / CALLS * 1e9;
    char values[320];
    snprintf(values, sizeof values,
             "\"nested_ns\": %.1f, \"dense_ns\": %.1f, \"kernel_ns\": %.1f, \"nested_overhead_ns\": %.1f, "
             "\"dense_overhead_ns\": %.1f",
             ns_nested, ns_dense, ns_kernel, ns_nested - ns_kernel, ns_dense - ns_kernel2);
    bench_emit("nested", "dispatch_overhead", "\"op\": \"relu\", \"shape\": \"(2, j, 2)\"", values);
    jag_release(offsets), jag_release(c.values), jag_release(c.nt), jag_release(c.out);
}

/* ---- nested vs padded --------------------------------------------------- */

typedef enum {
    OP_RELU, OP_GELU, OP_LINEAR, OP_SUM_RAGGED, OP_SOFTMAX_RAGGED,
    OP_LOGSUMEXP_RAGGED, OP_VAR_RAGGED, OP_MAX_RAGGED, OP_MASKED_FILL, OP_INDEX_SELECT_BATCH, OP_CAT_BATCH, OP_COUNT
} nested_op;
static const char *op_names[OP_COUNT] = {"relu", "gelu", "linear", "sum_ragged", "softmax_ragged", "logsumexp_ragged",
                                         "var_ragged", "max_ragged", "masked_fill", "index_select_batch", "cat_batch"};

typedef struct {
    nested_op op;
    jag_tensor *x, *w, *b;
    jag_tensor *mask, *index; /* masked_fill's mask (x's structure), index_select's index */
} op_ctx;

/* The padded side of the ragged ops reduces over the padded length too: the
 * cost a padded batch pays (a correct padded softmax would also need a
 * mask, which costs more). */
static void run_op(void *p) {
    op_ctx *c = p;
    jag_tensor *o = NULL;
    int d1[1] = {1};
    jag_status st;
    switch (c->op) {
    case OP_RELU: st = jag_relu(c->x, &o); break;
    case OP_GELU: st = jag_gelu(c->x, &o); break;
    case OP_LINEAR: st = jag_linear(c->x, c->w, c->b, &o); break;
    case OP_SUM_RAGGED: st = jag_sum(c->x, d1, 1, false, &o); break;
    case OP_SOFTMAX_RAGGED: st = jag_softmax(c->x, 1, &o); break;
    case OP_LOGSUMEXP_RAGGED: st = jag_logsumexp(c->x, d1, 1, false, &o); break;
    case OP_VAR_RAGGED: st = jag_var(c->x, d1, 1, 1, false, &o); break;
    case OP_MAX_RAGGED: {
        jag_tensor *ix = NULL;
        st = jag_max_dim(c->x, 1, false, &o, &ix);
        jag_release(ix);
        break;
    }
    case OP_MASKED_FILL: st = jag_masked_fill(c->x, c->mask, 0.0, &o); break;
    case OP_INDEX_SELECT_BATCH: st = jag_index_select(c->x, 0, c->index, &o); break;
    default: {
        jag_tensor *xs[2] = {c->x, c->x};
        st = jag_cat(xs, 2, 0, &o);
        break;
    }
    }
    bench_check(st, op_names[c->op]);
    jag_release(o);
}

static void bench_vs_padded(const corpus *c, const char *dist, int64_t batch, int64_t dim) {
    int64_t *lens = malloc((size_t)batch * sizeof *lens), real = 0, maxlen = 0;
    make_lengths(dist, c, batch, (uint64_t)batch * 131, lens); /* the same batch for every D */
    for (int64_t i = 0; i < batch; i++) real += lens[i], maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    double padded_bytes = (double)batch * (double)maxlen * (double)dim * 4.0;
    char params[192];
    snprintf(params, sizeof params,
             "\"lengths\": \"%s\", \"B\": %lld, \"D\": %lld, \"real_rows\": %lld, \"padded_rows\": %lld", dist,
             (long long)batch, (long long)dim, (long long)real, (long long)(batch * maxlen));
    /* linear's hidden size is D; the padded linear output doubles the memory */
    if (padded_bytes > (bench_quick ? 64.0 : 512.0) * 1024 * 1024) {
        bench_emit("nested", "nested_vs_padded", params, "\"skipped\": \"padded tensor too large for this machine's budget\"");
        free(lens);
        return;
    }
    int64_t vs[2] = {real, dim}, nb1 = batch + 1, ws[2] = {dim, dim};
    int64_t *offs = malloc((size_t)nb1 * sizeof *offs);
    offs[0] = 0;
    for (int64_t i = 0; i < batch; i++) offs[i + 1] = offs[i] + lens[i];
    jag_tensor *values = NULL, *offsets = NULL, *nt = NULL, *pad = NULL, *w = NULL, *b = NULL;
    bench_check(jag_rand_normal(vs, 2, 0, 1, JAG_FLOAT32, NULL, &values), "rand");
    bench_check(jag_from_data(offs, &nb1, 1, JAG_INT64, &offsets), "offsets");
    bench_check(jag_nested_from_jagged(values, offsets, NULL, &nt), "nested");
    bench_check(jag_nested_to_padded(nt, 0, NULL, 0, &pad), "pad");
    bench_check(jag_rand_normal(ws, 2, 0, 0.05, JAG_FLOAT32, NULL, &w), "w");
    bench_check(jag_zeros(&dim, 1, JAG_FLOAT32, &b), "b");
    double ratio_real = (double)real / (double)(batch * maxlen);
    /* masked_fill's masks, index_select's index (the batch reversed) */
    jag_tensor *mask_n = NULL, *mask_p = NULL, *index = NULL;
    bench_check(jag_gt_scalar(nt, 0.5, &mask_n), "mask");
    bench_check(jag_gt_scalar(pad, 0.5, &mask_p), "mask");
    bench_check(jag_arange((double)batch - 1, -1, -1, JAG_INT64, &index), "index");
    for (int op = 0; op < OP_COUNT; op++) {
        op_ctx cn = {(nested_op)op, nt, w, b, mask_n, index}, cp = {(nested_op)op, pad, w, b, mask_p, index};
        bench_stats sn, sp;
        bench_pair(run_op, &cn, run_op, &cp, 10, bench_quick ? 0.2 : 0.5, &sn, &sp);
        double target = sp.median * ratio_real * 1.1;
        char p2[256], values_json[512];
        snprintf(p2, sizeof p2, "%s, \"op\": \"%s\"", params, op_names[op]);
        snprintf(values_json, sizeof values_json,
                 "\"nested_s\": %.6g, \"nested_s_min\": %.6g, \"nested_s_max\": %.6g, \"padded_s\": %.6g, "
                 "\"padded_s_min\": %.6g, \"padded_s_max\": %.6g, \"speedup\": %.3f, \"real_over_padded\": %.4f, "
                 "\"target_s\": %.6g, \"meets_target\": %s, \"never_slower\": %s",
                 sn.median, sn.min, sn.max, sp.median, sp.min, sp.max, sp.median / sn.median, ratio_real, target, sn.median <= target ? "true" : "false",
                 sn.median <= sp.median ? "true" : "false");
        bench_emit("nested", "nested_vs_padded", p2, values_json);
    }
    jag_release(values), jag_release(offsets), jag_release(nt), jag_release(pad), jag_release(w), jag_release(b);
    jag_release(mask_n), jag_release(mask_p), jag_release(index);
    free(offs), free(lens);
}

/* ---- embedding_bag: one bag per component vs the padded equivalent ------ */

typedef struct {
    jag_tensor *w, *ix, *pad_ix;
    int mode;
} bag_ctx;

static void run_bag_nested(void *p) {
    bag_ctx *c = p;
    jag_tensor *o = NULL;
    bench_check(jag_embedding_bag(c->w, c->ix, NULL, c->mode, NULL, &o), "embedding_bag");
    jag_release(o);
}

/* padded: embedding of (B, L) indices, then the reduction over L (padding
 * rows included, as a padded batch pays) */
static void run_bag_padded(void *p) {
    bag_ctx *c = p;
    jag_tensor *e = NULL, *o = NULL;
    int d1[1] = {1};
    bench_check(jag_embedding(c->w, c->pad_ix, &e), "embedding");
    bench_check(c->mode == 2 ? jag_amax(e, d1, 1, false, &o) : c->mode == 1 ? jag_mean(e, d1, 1, false, &o)
                                                                           : jag_sum(e, d1, 1, false, &o), "reduce");
    jag_release(e), jag_release(o);
}

static void bench_embedding_bag(const corpus *cp, const char *dist, int64_t batch, int64_t dim) {
    int64_t lens[64], offs[65], nb1 = batch + 1, maxlen = 0, V = 50000;
    make_lengths(dist, cp, batch, (uint64_t)batch * 313, lens);
    offs[0] = 0;
    for (int64_t i = 0; i < batch; i++) offs[i + 1] = offs[i] + lens[i], maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    int64_t ws[2] = {V, dim}, n = offs[batch];
    jag_tensor *w = NULL, *u = NULL, *ixv = NULL, *off = NULL, *ix = NULL, *pad = NULL;
    bench_check(jag_rand_normal(ws, 2, 0, 1, JAG_FLOAT32, NULL, &w), "w");
    bench_check(jag_rand_uniform(&n, 1, 0, (double)V, JAG_FLOAT64, NULL, &u), "u");
    double *up = jag_data(u);
    for (int64_t i = 0; i < n; i++) up[i] = floor(up[i]);
    bench_check(jag_to_dtype(u, JAG_INT64, &ixv), "ix");
    bench_check(jag_from_data(offs, &nb1, 1, JAG_INT64, &off), "offsets");
    bench_check(jag_nested_from_jagged(ixv, off, NULL, &ix), "nested");
    bench_check(jag_nested_to_padded(ix, 0, NULL, 0, &pad), "pad");
    for (int mode = 0; mode < 3; mode++) {
        bag_ctx c = {w, ix, pad, mode};
        bench_stats sn, sp;
        bench_pair(run_bag_nested, &c, run_bag_padded, &c, 10, bench_quick ? 0.2 : 0.5, &sn, &sp);
        char params[192], vals[320];
        snprintf(params, sizeof params, "\"lengths\": \"%s\", \"B\": %lld, \"D\": %lld, \"V\": %lld, \"mode\": \"%s\"", dist,
                 (long long)batch, (long long)dim, (long long)V, mode == 0 ? "sum" : mode == 1 ? "mean" : "max");
        snprintf(vals, sizeof vals,
                 "\"nested_s\": %.6g, \"padded_s\": %.6g, \"speedup\": %.3f, \"real_over_padded\": %.4f, \"never_slower\": %s",
                 sn.median, sp.median, sp.median / sn.median, (double)n / (double)(batch * maxlen),
                 sn.median <= sp.median ? "true" : "false");
        bench_emit("nested", "embedding_bag_vs_padded", params, vals);
    }
    jag_release(w), jag_release(u), jag_release(ixv), jag_release(off), jag_release(ix), jag_release(pad);
}

/* ---- ops along the ragged dim vs the copy bandwidth --------------------- */


typedef struct {
    jag_tensor *x;
} exp_ctx;

static void run_exp(void *p) {
    jag_tensor *o = NULL;
    bench_check(jag_exp(((exp_ctx *)p)->x, &o), "exp");
    jag_release(o);
}

/* The last-level cache's bytes as this CPU sees it (sysfs: a VM's glibc may
 * report the whole socket's), else sysconf's, else 32 MiB. */
static double llc_bytes(void) {
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    long kib = 0;
    if (f) {
        if (fscanf(f, "%ldK", &kib) != 1) kib = 0;
        fclose(f);
    }
    long l3 = kib > 0 ? kib * 1024 : sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? (double)l3 : 32.0 * 1024 * 1024;
}

/* The grid: lengths uniform in 1..512 or from the corpus, B in {8, 64},
 * D = 256 (values in L2 or the last-level cache), and uniform lengths, B =
 * 64, D = 4096 (values at least 4 x the last-level cache: from memory;
 * "resident" says which, "meets_target" is only set for the memory case).
 * The baseline copies half the bytes the op moves out of the
 * op's own values, so that both move the same bytes (read + written).
 * softmax and logsumexp take an exp per element: they are also timed
 * against jag_exp on the same values (dense, an exp per element read and
 * written), the rate of the machine's exps ("exp_over_op" > 1: the op is
 * faster than that exp alone; target from memory: >= 0.85,
 * "exp_meets_target"). */
static void bench_ragged_bandwidth(const char *dist, const corpus *cp, int64_t batch, int64_t dim) {
    int64_t lens[64], offs[65], nb1 = batch + 1;
    make_lengths(dist, cp, batch, (uint64_t)batch * 131, lens);
    offs[0] = 0;
    for (int64_t i = 0; i < batch; i++) offs[i + 1] = offs[i] + lens[i];
    int64_t vs[2] = {offs[batch], dim};
    jag_tensor *values = NULL, *offsets = NULL, *nt = NULL;
    bench_check(jag_rand_normal(vs, 2, 0, 1, JAG_FLOAT32, NULL, &values), "rand");
    bench_check(jag_from_data(offs, &nb1, 1, JAG_INT64, &offsets), "offsets");
    bench_check(jag_nested_from_jagged(values, offsets, NULL, &nt), "nested");
    size_t vbytes = (size_t)jag_numel(values) * 4;
    const nested_op bw_ops[4] = {OP_SUM_RAGGED, OP_SOFTMAX_RAGGED, OP_LOGSUMEXP_RAGGED, OP_VAR_RAGGED};
    for (int k = 0; k < 4; k++) {
        nested_op op = bw_ops[k];
        op_ctx c = {op, nt, NULL, NULL, NULL, NULL};
        /* bytes the op moves: values read, plus the output written */
        size_t moved = vbytes + (op == OP_SOFTMAX_RAGGED ? vbytes : (size_t)(batch * dim * 4));
        bench_copy cc = {jag_data(values), aligned_alloc(64, (moved / 2 + 63) / 64 * 64), moved / 2};
        bench_stats so, sc, so2, se;
        bench_pair(run_op, &c, bench_run_copy, &cc, 10, bench_quick ? 0.2 : 0.5, &so, &sc);
        double op_gbs = (double)moved / so.median / 1e9, copy_gbs = 2.0 * (double)cc.bytes / sc.median / 1e9;
        char exp_vals[160] = "";
        const char *resident = (double)vbytes >= 4 * llc_bytes() ? "memory" : (double)vbytes > 2.0 * 1024 * 1024 ? "cache" : "L2";
        if (op == OP_SOFTMAX_RAGGED || op == OP_LOGSUMEXP_RAGGED) {
            exp_ctx ec = {values};
            bench_pair(run_op, &c, run_exp, &ec, 10, bench_quick ? 0.2 : 0.5, &so2, &se);
            double r = se.median / so2.median;
            /* target (from memory): the op at >= 0.85 of the exp's rate */
            snprintf(exp_vals, sizeof exp_vals, ", \"exp_s\": %.6g, \"exp_over_op\": %.3f, \"exp_meets_target\": %s", se.median, r,
                     strcmp(resident, "memory") ? "null" : r >= 0.85 ? "true" : "false");
        }
        char params[240], vals[480];
        snprintf(params, sizeof params,
                 "\"op\": \"%s\", \"lengths\": \"%s\", \"B\": %lld, \"D\": %lld, \"rows\": %lld, \"values_mb\": %.1f, "
                 "\"resident\": \"%s\"",
                 op_names[op], dist, (long long)batch, (long long)dim, (long long)offs[batch], (double)vbytes / 1048576.0, resident);
        snprintf(vals, sizeof vals,
                 "\"op_s\": %.6g, \"op_s_min\": %.6g, \"op_s_max\": %.6g, \"memcpy_s\": %.6g, \"op_gbs\": %.3f, "
                 "\"memcpy_gbs\": %.3f, \"ratio_vs_memcpy\": %.3f, \"meets_target\": %s%s",
                 so.median, so.min, so.max, sc.median, op_gbs, copy_gbs, op_gbs / copy_gbs,
                 strcmp(resident, "memory") ? "null" : op_gbs / copy_gbs >= 0.7 ? "true" : "false", exp_vals);
        bench_emit("nested", "ragged_vs_memcpy", params, vals);
        free(cc.dst);
    }
    jag_release(values), jag_release(offsets), jag_release(nt);
}

/* ---- attention: jagged vs padded, and vs the GEMM rate ------------------ */

typedef struct {
    jag_tensor *q, *k, *v;
    bool causal;
    jag_tensor *y, *g; /* backward: the output (its graph kept) and its gradient */
} attn_ctx;

static void run_attention(void *p) {
    attn_ctx *c = p;
    jag_tensor *o = NULL;
    bench_check(jag_scaled_dot_product_attention(c->q, c->k, c->v, c->causal, 0.0, &o), "attention");
    jag_release(o);
}

/* the backward alone: through the kept graph, the inputs' gradients dropped after each run */
static void run_attention_backward(void *p) {
    attn_ctx *c = p;
    bench_check(jag_backward(c->y, c->g, true), "attention backward");
    jag_zero_grad(c->q), jag_zero_grad(c->k), jag_zero_grad(c->v);
}

typedef struct {
    jag_tensor *a, *b;
} gemm_ctx;

static void run_gemm(void *p) {
    gemm_ctx *c = p;
    jag_tensor *o = NULL;
    bench_check(jag_mm(c->a, c->b, &o), "mm");
    jag_release(o);
}

/* One attention figure: nested vs padded, interleaved, and the nested rate
 * in real FLOPs (flops_per_pair per visible (query, key) pair and head,
 * padding never counted) against the GEMM rate measured beside it. */
static void attention_figure(const char *name, const char *params, attn_ctx *cn, attn_ctx *cpd, void (*run)(void *),
                             gemm_ctx *gc, double pairs, double padded_pairs, double flops_per_pair) {
    bench_stats sn, sp, sg, sg2;
    bench_pair(run, cn, run, cpd, 6, bench_quick ? 0.2 : 0.5, &sn, &sp);
    bench_pair(run_gemm, gc, run_gemm, gc, 6, 0.2, &sg, &sg2);
    double gflops = pairs * flops_per_pair / sn.median / 1e9, gemm_gflops = 2.0 * 512 * 512 * 512 / sg.median / 1e9;
    double speedup = sp.median / sn.median, padding = padded_pairs / pairs;
    char vals[640];
    snprintf(vals, sizeof vals,
             "\"nested_s\": %.6g, \"nested_s_min\": %.6g, \"nested_s_max\": %.6g, \"padded_s\": %.6g, "
             "\"speedup\": %.3f, \"padded_over_real\": %.3f, \"beats_padding\": %s, \"real_gflops\": %.3f, "
             "\"gemm_gflops\": %.3f, \"ratio_vs_gemm\": %.3f, \"meets_gemm_target\": %s",
             sn.median, sn.min, sn.max, sp.median, speedup, padding, speedup >= padding ? "true" : "false", gflops,
             gemm_gflops, gflops / gemm_gflops, gflops / gemm_gflops >= 0.5 ? "true" : "false");
    bench_emit("nested", name, params, vals);
}

/* Jagged attention against the padded (B, H, L, Dh) equivalent (no mask: the
 * cheapest padded attention), H = 4, Dh = 32, lengths up to 256: the
 * forward ("attention", and "attention_causal"), and the backward alone
 * ("attention_backward": dq, dk, dv from a kept graph). Real FLOPs per
 * visible (query, key) pair and head: 4 Dh forward (two products), 8 Dh
 * backward (four; recomputing the scores is not counted). */
static void bench_attention(const char *dist, const corpus *cp, int64_t batch) {
    const int64_t heads = 4, dh = 32;
    int64_t lens[64], offs[65], nb1 = batch + 1, maxlen = 0;
    make_lengths(dist, cp, batch, (uint64_t)batch * 977, lens);
    offs[0] = 0;
    double pairs = 0, causal_pairs = 0;
    for (int64_t i = 0; i < batch; i++) {
        if (lens[i] > 256) lens[i] = 256;
        offs[i + 1] = offs[i] + lens[i], maxlen = lens[i] > maxlen ? lens[i] : maxlen;
        pairs += (double)lens[i] * (double)lens[i] * heads;
        causal_pairs += (double)lens[i] * (double)(lens[i] + 1) / 2 * heads;
    }
    double padded_pairs = (double)batch * (double)maxlen * (double)maxlen * heads;
    double padded_causal = (double)batch * (double)maxlen * (double)(maxlen + 1) / 2 * heads;
    int64_t vs[3] = {offs[batch], heads, dh};
    jag_tensor *qv = NULL, *kv = NULL, *vv = NULL, *gv = NULL, *off = NULL, *q = NULL, *k = NULL, *v = NULL, *g = NULL;
    bench_check(jag_rand_normal(vs, 3, 0, 1, JAG_FLOAT32, NULL, &qv), "q");
    bench_check(jag_rand_normal(vs, 3, 0, 1, JAG_FLOAT32, NULL, &kv), "k");
    bench_check(jag_rand_normal(vs, 3, 0, 1, JAG_FLOAT32, NULL, &vv), "v");
    bench_check(jag_rand_normal(vs, 3, 0, 1, JAG_FLOAT32, NULL, &gv), "g");
    bench_check(jag_from_data(offs, &nb1, 1, JAG_INT64, &off), "offsets");
    bench_check(jag_nested_from_jagged(qv, off, NULL, &q), "q");
    bench_check(jag_nested_from_jagged(kv, off, NULL, &k), "k");
    bench_check(jag_nested_from_jagged(vv, off, NULL, &v), "v");
    bench_check(jag_nested_from_jagged(gv, off, NULL, &g), "g");
    /* padded (B, H, L, Dh): pads and transposes, no mask (the cheapest padded attention) */
    jag_tensor *pq = NULL, *pk = NULL, *pv = NULL, *pg = NULL, *t = NULL;
    bench_check(jag_nested_to_padded(q, 0, NULL, 0, &t), "pad"), bench_check(jag_transpose(t, 1, 2, &pq), "t"), jag_release(t);
    bench_check(jag_nested_to_padded(k, 0, NULL, 0, &t), "pad"), bench_check(jag_transpose(t, 1, 2, &pk), "t"), jag_release(t);
    bench_check(jag_nested_to_padded(v, 0, NULL, 0, &t), "pad"), bench_check(jag_transpose(t, 1, 2, &pv), "t"), jag_release(t);
    bench_check(jag_nested_to_padded(g, 0, NULL, 0, &t), "pad"), bench_check(jag_transpose(t, 1, 2, &pg), "t"), jag_release(t);
    /* the machine's GEMM rate at a similar size */
    gemm_ctx gc = {0};
    int64_t gs[2] = {512, 512};
    bench_check(jag_rand_normal(gs, 2, 0, 1, JAG_FLOAT32, NULL, &gc.a), "a");
    bench_check(jag_rand_normal(gs, 2, 0, 1, JAG_FLOAT32, NULL, &gc.b), "b");
    char params[200];
    snprintf(params, sizeof params, "\"lengths\": \"%s\", \"B\": %lld, \"H\": %lld, \"Dh\": %lld, \"max_len\": %lld",
             dist, (long long)batch, (long long)heads, (long long)dh, (long long)maxlen);
    attn_ctx cn = {q, k, v, false, NULL, NULL}, cpd = {pq, pk, pv, false, NULL, NULL};
    attention_figure("attention", params, &cn, &cpd, run_attention, &gc, pairs, padded_pairs, 4.0 * dh);
    cn.causal = cpd.causal = true;
    attention_figure("attention_causal", params, &cn, &cpd, run_attention, &gc, causal_pairs, padded_causal, 4.0 * dh);
    /* backward: the inputs require grad, the outputs keep their graphs */
    jag_tensor *in[6] = {q, k, v, pq, pk, pv};
    for (int i = 0; i < 6; i++) bench_check(jag_set_requires_grad(in[i], true), "requires_grad");
    attn_ctx bn = {q, k, v, false, NULL, g}, bpd = {pq, pk, pv, false, NULL, pg};
    bench_check(jag_scaled_dot_product_attention(q, k, v, false, 0.0, &bn.y), "attention");
    bench_check(jag_scaled_dot_product_attention(pq, pk, pv, false, 0.0, &bpd.y), "attention");
    attention_figure("attention_backward", params, &bn, &bpd, run_attention_backward, &gc, pairs, padded_pairs, 8.0 * dh);
    jag_release(bn.y), jag_release(bpd.y);
    jag_release(qv), jag_release(kv), jag_release(vv), jag_release(gv), jag_release(off);
    jag_release(q), jag_release(k), jag_release(v), jag_release(g);
    jag_release(pq), jag_release(pk), jag_release(pv), jag_release(pg), jag_release(gc.a), jag_release(gc.b);
}

/* --only=SECTION (dispatch, bandwidth, padded, bag, attention) runs that
 * section alone; --batch=B the nested-vs-padded grid at that batch size */
static const char *only_section;
static int64_t only_batch;
static bool section(const char *name) { return !only_section || !strcmp(only_section, name); }

int main(int argc, char **argv) {
    bench_parse_args(argc, argv);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--only=", 7)) only_section = argv[i] + 7;
        else if (!strncmp(argv[i], "--batch=", 8)) only_batch = atoll(argv[i] + 8);
    jag_manual_seed(7);
    if (section("dispatch")) bench_dispatch_overhead();
    corpus c;
    char err[256] = "";
    int have_corpus = corpus_load_fortunes(&c, err, sizeof err) == 0;
    if (!have_corpus) fprintf(stderr, "bench_nested: no corpus (%s); corpus lengths skipped\n", err);
    for (int di = 0; di < 2 && section("bandwidth"); di++)
        for (int bi = 0; bi < 2; bi++) {
            if (di == 1 && !have_corpus) break;
            bench_ragged_bandwidth(di ? "corpus" : "uniform", &c, bi ? 64 : 8, 256);
        }
    if (section("bandwidth")) bench_ragged_bandwidth("uniform", &c, 64, 4096);
    int64_t batches[] = {1, 8, 64, 512}, dims[] = {64, 256, 1024};
    const char *dists[] = {"uniform", "long_tailed", "equal", "corpus"};
    for (int di = 0; di < 4 && section("padded"); di++) {
        if (di == 3 && !have_corpus) break;
        if (bench_quick && (di == 1 || di == 2)) continue;
        for (size_t bi = 0; bi < 4; bi++)
            for (size_t ki = 0; ki < 3; ki++) {
                if (bench_quick && (batches[bi] == 512 || dims[ki] == 1024)) continue;
                if (only_batch && batches[bi] != only_batch) continue;
                bench_vs_padded(&c, dists[di], batches[bi], dims[ki]);
            }
    }
    for (int di = 0; di < 2 && section("bag"); di++)
        for (int bi = 0; bi < 2; bi++) {
            if (di == 1 && !have_corpus) break;
            bench_embedding_bag(&c, di ? "corpus" : "uniform", bi ? 64 : 8, 64);
        }
    if (section("attention")) bench_attention("uniform", &c, 8);
    if (have_corpus && section("attention")) bench_attention("corpus", &c, 64);
    if (have_corpus) corpus_free(&c);
    return 0;
}
