/*
 * bench_trace.c — the tracer and compiler:
 *   op_overhead: 8 tiny pointwise ops (4x4 float32), time per op, eager vs a
 *                compiled program (plain kernels; and fused) (target: >= 5x
 *                lower per op compiled);
 *   chain8:      8 pointwise ops on a 64 MB jagged tensor, eager vs compiled
 *                (fused), against a 64 MB memcpy (target: >= 4x faster,
 *                approaching one memory pass: read + write ~ 1 memcpy);
 *   block:       a transformer-style block (layer_norm, linear, gelu, linear,
 *                residual add, softmax, square, sum) forward + backward over a
 *                jagged batch: compiled vs eager nested vs eager padded dense;
 *   compile:     trace + compile time of a 200-op program (target: < 5 ms).
 * Every figure is a ratio measured in one run (interleaved, bench_pair).
 */
#include "bench.h"
#include "dispatch/dispatch.h"

#include <math.h>

/* ---- op overhead -------------------------------------------------------------- */

/* y = relu(|-(square(x * 1.5 + 0.5))| + x) * 0.25: 8 ops */
static jag_status chain8(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *f = NULL, *g = NULL;
    jag_status st = jag_mul_scalar(in[0], 1.5, &a);
    if (!st) st = jag_add_scalar(a, 0.5, &b);
    if (!st) st = jag_square(b, &c);
    if (!st) st = jag_neg(c, &d);
    if (!st) st = jag_abs(d, &e);
    if (!st) st = jag_add(e, in[0], 1.0, &f);
    if (!st) st = jag_relu(f, &g);
    if (!st) st = jag_mul_scalar(g, 0.25, &out[0]);
    jag_release(a), jag_release(b), jag_release(c), jag_release(d), jag_release(e), jag_release(f), jag_release(g);
    return st;
}

typedef struct {
    jag_tensor *x;
    jag_program *p;
    int reps;
} chain_ctx;

static void run_eager(void *p) {
    chain_ctx *c = p;
    for (int i = 0; i < c->reps; i++) {
        jag_tensor *y = NULL;
        bench_check(chain8(NULL, &c->x, 1, &y, 1), "eager chain");
        jag_release(y);
    }
}

static void run_compiled(void *p) {
    chain_ctx *c = p;
    for (int i = 0; i < c->reps; i++) {
        jag_tensor *y = NULL;
        bench_check(jag_program_run(c->p, &c->x, 1, &y, 1), "compiled chain");
        jag_release(y);
    }
}

static jag_program *compile_chain(jag_tensor *x, unsigned passes) {
    jag_trace *t = NULL;
    jag_program *p = NULL;
    bench_check(jag_trace_function(chain8, NULL, &x, 1, NULL, 1, &t), "trace");
    bench_check(jag_trace_compile(t, passes, &p), "compile");
    if (getenv("BENCH_TRACE_PRINT")) jag_trace_print(jag_program_trace(p));
    jag_trace_free(t);
    return p;
}

/* The 8 kernels called directly on preallocated outputs: the compute the
 * overhead figures subtract. */
typedef struct {
    jag_op_id op[8];
    jag_value args[8][3];
    int nargs[8];
    jag_tensor *out[8];
    int reps;
} kernels_ctx;

static void run_kernels(void *p) {
    kernels_ctx *k = p;
    for (int r = 0; r < k->reps; r++)
        for (int i = 0; i < 8; i++) bench_check(jag__ops[k->op[i]].cpu(jag__ops[k->op[i]].api_name, k->args[i], k->nargs[i], &k->out[i]), "kernel");
}

static void kernels_init(kernels_ctx *k, jag_tensor *x) {
    const char *names[8] = {"mul", "add", "square", "neg", "abs", "add", "relu", "mul"};
    for (int i = 0; i < 8; i++) {
        bench_check(jag_op_find(names[i], &k->op[i]), "op");
        bench_check(jag_empty(jag_sizes(x), jag_ndim(x), JAG_FLOAT32, &k->out[i]), "out");
        const jag_tensor *prev = i ? k->out[i - 1] : x;
        k->args[i][0] = jag__v_tensor(prev);
        k->nargs[i] = 1;
    }
    k->args[0][1] = jag__v_double(1.5), k->nargs[0] = 2;
    k->args[1][1] = jag__v_double(0.5), k->args[1][2] = jag__v_double(1.0), k->nargs[1] = 3;
    k->args[5][1] = jag__v_tensor(x), k->args[5][2] = jag__v_double(1.0), k->nargs[5] = 3;
    k->args[7][1] = jag__v_double(0.25), k->nargs[7] = 2;
}

static void bench_op_overhead(void) {
    int64_t sz[2] = {4, 4};
    jag_tensor *x = NULL;
    bench_check(jag_rand_normal(sz, 2, 0, 1, JAG_FLOAT32, NULL, &x), "rand");
    chain_ctx e = {x, NULL, 1000}, c = {x, compile_chain(x, JAG_PASS_DESUGAR | JAG_PASS_DCE), 1000};
    chain_ctx f = {x, compile_chain(x, JAG_PASSES_ALL), 1000};
    kernels_ctx k = {.reps = 1000};
    kernels_init(&k, x);
    /* the four interleaved round by round: the overhead is a difference of
     * neighbours, so they must see the same machine */
    enum { ROUNDS = 15 };
    double te[ROUNDS], tc[ROUNDS], tf[ROUNDS], tk[ROUNDS];
    void (*fns[4])(void *) = {run_eager, run_compiled, run_compiled, run_kernels};
    void *ctxs[4] = {&e, &c, &f, &k};
    double *outs[4] = {te, tc, tf, tk};
    for (int w = 0; w < 4; w++) fns[w](ctxs[w]);
    for (int r = 0; r < ROUNDS; r++)
        for (int w = 0; w < 4; w++) {
            double t0 = bench_now();
            fns[w](ctxs[w]);
            outs[w][r] = bench_now() - t0;
        }
    for (int w = 0; w < 4; w++) qsort(outs[w], ROUNDS, sizeof(double), bench_cmp_double);
    bench_stats se = {te[ROUNDS / 2], te[0], te[ROUNDS - 1], ROUNDS}, sc = {tc[ROUNDS / 2], tc[0], tc[ROUNDS - 1], ROUNDS};
    bench_stats sf = {tf[ROUNDS / 2], tf[0], tf[ROUNDS - 1], ROUNDS}, sk = {tk[ROUNDS / 2], tk[0], tk[ROUNDS - 1], ROUNDS};
    bench_stats se2 = se;
    double ops = 8.0 * 1000, kern = sk.median / ops * 1e9;
    double eo = se.median / ops * 1e9 - kern, co = sc.median / ops * 1e9 - kern;
    char values[600];
    snprintf(values, sizeof values,
             "\"eager_ns_per_op\": %.1f, \"compiled_ns_per_op\": %.1f, \"fused_ns_per_op\": %.1f, "
             "\"kernel_ns_per_op\": %.1f, \"eager_overhead_ns\": %.1f, \"compiled_overhead_ns\": %.1f, "
             "\"overhead_ratio\": %.2f, \"eager_over_compiled\": %.2f, \"eager_over_fused\": %.2f, \"meets_target\": %s",
             se.median / ops * 1e9, sc.median / ops * 1e9, sf.median / ops * 1e9, kern, eo, co, co > 0 ? eo / co : 0.0,
             se.median / sc.median, se2.median / sf.median, (co > 0 ? eo / co : 99) >= 5 ? "true" : "false");
    bench_emit("trace", "op_overhead", "\"ops\": 8, \"shape\": \"(4, 4)\", \"dtype\": \"float32\"", values);
    jag_program_free(c.p), jag_program_free(f.p);
    for (int i = 0; i < 8; i++) jag_release(k.out[i]);
    jag_release(x);
}

/* ---- chain of 8 on 64 MB jagged ---------------------------------------------------- */

typedef struct {
    void *dst;
    const void *src;
    size_t n;
} copy_ctx;

static void run_memcpy(void *p) {
    copy_ctx *c = p;
    memcpy(c->dst, c->src, c->n);
}

static jag_tensor *jagged(int64_t batch, int64_t dim, int64_t target_rows, jag_dtype dt) {
    int64_t *offs = malloc((size_t)(batch + 1) * sizeof *offs), nb1 = batch + 1;
    uint64_t s = 88172645463325252ull;
    offs[0] = 0;
    for (int64_t i = 0; i < batch; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        offs[i + 1] = offs[i] + 1 + (int64_t)(s % (uint64_t)(2 * target_rows / batch));
    }
    jag_tensor *v = NULL, *o = NULL, *nt = NULL;
    bench_check(jag_rand_normal((int64_t[]){offs[batch], dim}, 2, 0, 1, dt, NULL, &v), "rand");
    bench_check(jag_from_data(offs, &nb1, 1, JAG_INT64, &o), "offsets");
    bench_check(jag_nested_from_jagged(v, o, NULL, &nt), "nested");
    jag_release(v), jag_release(o);
    free(offs);
    return nt;
}

static void bench_chain_64mb(void) {
    const int64_t dim = 256, rows = (64ll << 20) / 4 / dim; /* 64 MB of float32 */
    jag_tensor *x = jagged(512, dim, rows, JAG_FLOAT32), *v = NULL;
    bench_check(jag_nested_values(x, &v), "values");
    size_t bytes = (size_t)jag_numel(v) * 4;
    chain_ctx e = {x, NULL, 1}, c = {x, compile_chain(x, JAG_PASSES_ALL), 1};
    copy_ctx m = {malloc(bytes), jag_data(v), bytes};
    memset(m.dst, 0, bytes);
    bench_stats se, sc, sm, sc2;
    bench_pair(run_eager, &e, run_compiled, &c, 5, bench_quick ? 0.5 : 2.0, &se, &sc);
    bench_pair(run_memcpy, &m, run_compiled, &c, 5, bench_quick ? 0.3 : 1.0, &sm, &sc2);
    char params[160], values[400];
    snprintf(params, sizeof params, "\"ops\": 8, \"B\": 512, \"D\": %lld, \"MB\": %.1f, \"threads\": %d", (long long)dim,
             (double)bytes / (1 << 20), jag_get_num_threads());
    snprintf(values, sizeof values,
             "\"eager_s\": %.6g, \"compiled_s\": %.6g, \"memcpy_s\": %.6g, \"speedup\": %.2f, "
             "\"compiled_over_memcpy\": %.2f, \"meets_target\": %s",
             se.median, sc.median, sm.median, se.median / sc.median, sc2.median / sm.median,
             se.median / sc.median >= 4 ? "true" : "false");
    bench_emit("trace", "chain8_64mb_jagged", params, values);
    jag_program_free(c.p);
    free(m.dst);
    jag_release(v), jag_release(x);
}

/* ---- transformer block forward + backward -------------------------------------------- */

static jag_status block(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *h = NULL, *a = NULL, *g = NULL, *o = NULL, *r = NULL, *sm = NULL, *sq = NULL, *v = NULL;
    jag_status st = jag_layer_norm(in[0], 1, in[1], in[2], 1e-5, &h);
    if (!st) st = jag_linear(h, in[3], in[4], &a);
    if (!st) st = jag_gelu(a, &g);
    if (!st) st = jag_linear(g, in[5], in[6], &o);
    if (!st) st = jag_add(in[0], o, 1.0, &r);
    if (!st) st = jag_softmax(r, -1, &sm);
    if (!st) st = jag_square(sm, &sq);
    if (!st && jag_is_nested(sq)) st = jag_nested_values(sq, &v);
    if (!st) st = jag_sum(v ? v : sq, NULL, 0, false, &out[0]);
    jag_release(h), jag_release(a), jag_release(g), jag_release(o), jag_release(r), jag_release(sm), jag_release(sq);
    jag_release(v);
    return st;
}

typedef struct {
    jag_tensor *in[7];
    jag_compiled *c;
} block_ctx;

static void zero_grads(block_ctx *b) {
    for (int i = 0; i < 7; i++) jag_zero_grad(b->in[i]);
}

static void run_block_eager(void *p) {
    block_ctx *b = p;
    jag_tensor *loss = NULL;
    bench_check(block(NULL, b->in, 7, &loss, 1), "block");
    bench_check(jag_backward(loss, NULL, false), "backward");
    jag_release(loss);
    zero_grads(b);
}

static void run_block_compiled(void *p) {
    block_ctx *b = p;
    jag_tensor *loss = NULL;
    bench_check(jag_compiled_call(b->c, b->in, 7, &loss, 1), "compiled block");
    bench_check(jag_backward(loss, NULL, false), "backward");
    jag_release(loss);
    zero_grads(b);
}

static void bench_block(int64_t dim) {
    const int64_t batch = 32, hid = 4 * dim;
    jag_tensor *x = jagged(batch, dim, batch * 128, JAG_FLOAT32), *pad = NULL;
    bench_check(jag_nested_to_padded(x, 0, NULL, 0, &pad), "pad");
    jag_tensor *pr[6] = {0};
    bench_check(jag_ones((int64_t[]){dim}, 1, JAG_FLOAT32, &pr[0]), "ln_w");
    bench_check(jag_zeros((int64_t[]){dim}, 1, JAG_FLOAT32, &pr[1]), "ln_b");
    bench_check(jag_rand_normal((int64_t[]){hid, dim}, 2, 0, 0.05, JAG_FLOAT32, NULL, &pr[2]), "w1");
    bench_check(jag_zeros((int64_t[]){hid}, 1, JAG_FLOAT32, &pr[3]), "b1");
    bench_check(jag_rand_normal((int64_t[]){dim, hid}, 2, 0, 0.05, JAG_FLOAT32, NULL, &pr[4]), "w2");
    bench_check(jag_zeros((int64_t[]){dim}, 1, JAG_FLOAT32, &pr[5]), "b2");
    for (int i = 0; i < 6; i++) bench_check(jag_set_requires_grad(pr[i], true), "requires_grad");
    block_ctx bn = {{x, pr[0], pr[1], pr[2], pr[3], pr[4], pr[5]}, NULL}, bp = bn, bc = bn;
    bp.in[0] = pad;
    bench_check(jag_compile(block, NULL, 1, JAG_PASSES_ALL, &bc.c), "compile");
    bench_stats se, sc, sp, sc2;
    bench_pair(run_block_eager, &bn, run_block_compiled, &bc, 6, bench_quick ? 0.3 : 1.0, &se, &sc);
    bench_pair(run_block_eager, &bp, run_block_compiled, &bc, 6, bench_quick ? 0.3 : 1.0, &sp, &sc2);
    jag_tensor *v = NULL;
    bench_check(jag_nested_values(x, &v), "values");
    int64_t real = jag_size(v, 0);
    char params[200], values[400];
    snprintf(params, sizeof params, "\"B\": %lld, \"D\": %lld, \"F\": %lld, \"real_rows\": %lld, \"padded_rows\": %lld",
             (long long)batch, (long long)dim, (long long)hid, (long long)real, (long long)(jag_size(pad, 0) * jag_size(pad, 1)));
    snprintf(values, sizeof values,
             "\"eager_nested_s\": %.6g, \"compiled_s\": %.6g, \"eager_padded_s\": %.6g, \"eager_over_compiled\": %.2f, "
             "\"padded_over_compiled\": %.2f",
             se.median, sc.median, sp.median, se.median / sc.median, sp.median / sc2.median);
    bench_emit("trace", "block_fwd_bwd", params, values);
    jag_compiled_free(bc.c);
    for (int i = 0; i < 6; i++) jag_release(pr[i]);
    jag_release(v), jag_release(x), jag_release(pad);
}

/* ---- trace + compile time of a 200-op program ------------------------------------------ */

static jag_status ops200(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *cur = jag_retain(in[0]);
    jag_status st = JAG_OK;
    for (int i = 0; !st && i < 200; i++) {
        jag_tensor *next = NULL;
        switch (i % 5) {
        case 0: st = jag_mm(cur, in[1], &next); break;
        case 1: st = jag_tanh(cur, &next); break;
        case 2: st = jag_add(cur, in[0], 1.0, &next); break;
        case 3: st = jag_mul_scalar(cur, 0.5, &next); break;
        default: st = jag_softmax(cur, -1, &next); break;
        }
        jag_release(cur);
        cur = next;
    }
    if (!st) out[0] = cur;
    else jag_release(cur);
    return st;
}

typedef struct {
    jag_tensor *in[2];
} ops_ctx;

static void run_trace_compile(void *p) {
    ops_ctx *c = p;
    jag_trace *t = NULL;
    jag_program *prog = NULL;
    bench_check(jag_trace_function(ops200, NULL, c->in, 2, NULL, 1, &t), "trace 200");
    bench_check(jag_trace_compile(t, JAG_PASSES_ALL, &prog), "compile 200");
    jag_program_free(prog);
    jag_trace_free(t);
}

static void run_trace_only(void *p) {
    ops_ctx *c = p;
    jag_trace *t = NULL;
    bench_check(jag_trace_function(ops200, NULL, c->in, 2, NULL, 1, &t), "trace 200");
    jag_trace_free(t);
}

static void bench_compile_time(void) {
    ops_ctx c = {{NULL, NULL}};
    bench_check(jag_rand_normal((int64_t[]){16, 16}, 2, 0, 1, JAG_FLOAT32, NULL, &c.in[0]), "x");
    bench_check(jag_rand_normal((int64_t[]){16, 16}, 2, 0, 0.1, JAG_FLOAT32, NULL, &c.in[1]), "w");
    bench_stats st, sa;
    bench_pair(run_trace_only, &c, run_trace_compile, &c, 10, bench_quick ? 0.3 : 1.0, &st, &sa);
    char values[300];
    snprintf(values, sizeof values, "\"trace_ms\": %.3f, \"trace_compile_ms\": %.3f, \"meets_target\": %s",
             st.median * 1e3, sa.median * 1e3, sa.median < 5e-3 ? "true" : "false");
    bench_emit("trace", "trace_compile_200_ops", "\"ops\": 200, \"passes\": \"desugar, dce, fuse\"", values);
    jag_release(c.in[0]), jag_release(c.in[1]);
}

int main(int argc, char **argv) {
    bench_parse_args(argc, argv);
    jag_manual_seed(7);
    if (getenv("BENCH_ONLY_CHAIN")) {
        bench_chain_64mb();
        return 0;
    }
    if (getenv("BENCH_ONLY_BLOCK")) {
        bench_block(64);
        return 0;
    }
    if (getenv("BENCH_ONLY_OVERHEAD")) {
        bench_op_overhead();
        return 0;
    }
    bench_op_overhead();
    bench_compile_time();
    bench_block(64);
    if (!bench_quick) bench_block(256);
    bench_chain_64mb();
    return 0;
}
