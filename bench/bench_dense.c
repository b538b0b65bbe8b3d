/*
 * bench_dense.c — dense kernels against the machine's limits, as ratios
 * measured in one run:
 *   pointwise: achieved bytes/s of an op vs a plain memcpy of the same bytes
 *              (target >= 0.85 for memory-bound ops on large tensors);
 *   mm:        GFLOP/s of jag_mm vs a direct cblas_sgemm of the same shape
 *              (target >= 0.95 for sizes >= 256);
 *   bf16 mm:   GFLOP/s of jag_mm on bfloat16 operands (oneDNN, AVX512-BF16,
 *              float32 accumulation) vs jag_mm on float32 (OpenBLAS sgemm),
 *              M x 1024 @ 1024 x 1024 for M = 8, 128, 1024 (target >= 1.5
 *              at M = 1024).
 */
#include "bench.h"

#include <cblas.h>
#include <omp.h>
#include <stdint.h>

typedef enum { OP_CLONE, OP_RELU, OP_MUL_SCALAR, OP_ADD, OP_MUL, OP_EXP, OP_SIGMOID, OP_COUNT } pw_op;
static const char *pw_names[OP_COUNT] = {"clone", "relu", "mul_scalar", "add", "mul", "exp", "sigmoid"};
static const int pw_inputs[OP_COUNT] = {1, 1, 1, 2, 2, 1, 1};

typedef struct {
    pw_op op;
    jag_tensor *a, *b;
} pw_ctx;

static void run_pw(void *p) {
    pw_ctx *c = p;
    jag_tensor *o = NULL;
    jag_status st;
    switch (c->op) {
    case OP_CLONE: st = jag_clone(c->a, &o); break;
    case OP_RELU: st = jag_relu(c->a, &o); break;
    case OP_MUL_SCALAR: st = jag_mul_scalar(c->a, 1.5, &o); break;
    case OP_ADD: st = jag_add(c->a, c->b, 1.0, &o); break;
    case OP_MUL: st = jag_mul(c->a, c->b, &o); break;
    case OP_EXP: st = jag_exp(c->a, &o); break;
    default: st = jag_sigmoid(c->a, &o); break;
    }
    bench_check(st, pw_names[c->op]);
    jag_release(o);
}

static void bench_pointwise(int64_t n) {
    int64_t shape[1] = {n};
    jag_tensor *a = NULL, *b = NULL;
    bench_check(jag_rand_uniform(shape, 1, -2, 2, JAG_FLOAT32, NULL, &a), "rand");
    bench_check(jag_rand_uniform(shape, 1, -2, 2, JAG_FLOAT32, NULL, &b), "rand");
    size_t bytes = (size_t)n * 4;
    bench_copy mc = {jag_data(a), aligned_alloc(64, (bytes + 63) / 64 * 64), bytes};
    for (int op = 0; op < OP_COUNT; op++) {
        pw_ctx pc = {(pw_op)op, a, b};
        bench_stats so, sm;
        bench_pair(run_pw, &pc, bench_run_copy, &mc, 20, 1.0, &so, &sm);
        /* bytes the op moves: inputs read + output written; memcpy moves 2x */
        double op_bytes = (double)bytes * (pw_inputs[op] + 1), copy_bytes = 2.0 * (double)bytes;
        double op_gbs = op_bytes / so.median / 1e9, copy_gbs = copy_bytes / sm.median / 1e9;
        char params[128], values[256];
        snprintf(params, sizeof params, "\"op\": \"%s\", \"n\": %lld, \"dtype\": \"float32\"", pw_names[op], (long long)n);
        snprintf(values, sizeof values,
                 "\"op_s\": %.6g, \"op_s_min\": %.6g, \"op_s_max\": %.6g, \"memcpy_s\": %.6g, \"op_gbs\": %.3f, "
                 "\"memcpy_gbs\": %.3f, \"ratio_vs_memcpy\": %.3f",
                 so.median, so.min, so.max, sm.median, op_gbs, copy_gbs, op_gbs / copy_gbs);
        bench_emit("dense", "pointwise_vs_memcpy", params, values);
    }
    free(mc.dst);
    jag_release(a), jag_release(b);
}

typedef struct {
    jag_tensor *a, *b;
    int64_t n;
} mm_ctx;

static void run_jag_mm(void *p) {
    mm_ctx *c = p;
    jag_tensor *o = NULL;
    bench_check(jag_mm(c->a, c->b, &o), "mm");
    jag_release(o);
}

/* The direct BLAS call allocates its output each run, as jag_mm does. */
static void run_cblas(void *p) {
    mm_ctx *c = p;
    int n = (int)c->n;
    float *out = aligned_alloc(64, (size_t)n * (size_t)n * 4 + 64);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, jag_data(c->a), n, jag_data(c->b), n, 0.0f,
                out, n);
    free(out);
}

static void bench_mm(int64_t n) {
    int64_t shape[2] = {n, n};
    mm_ctx c = {0};
    c.n = n;
    bench_check(jag_rand_uniform(shape, 2, -1, 1, JAG_FLOAT32, NULL, &c.a), "rand");
    bench_check(jag_rand_uniform(shape, 2, -1, 1, JAG_FLOAT32, NULL, &c.b), "rand");
    bench_stats sj, sb;
    bench_pair(run_jag_mm, &c, run_cblas, &c, 10, 1.0, &sj, &sb);
    double flops = 2.0 * (double)n * (double)n * (double)n;
    char params[96], values[400];
    snprintf(params, sizeof params, "\"n\": %lld, \"dtype\": \"float32\"", (long long)n);
    snprintf(values, sizeof values,
             "\"jag_s\": %.6g, \"jag_s_min\": %.6g, \"jag_s_max\": %.6g, \"blas_s\": %.6g, \"blas_s_min\": %.6g, "
             "\"blas_s_max\": %.6g, \"jag_gflops\": %.3f, \"blas_gflops\": %.3f, \"ratio_vs_blas\": %.3f",
             sj.median, sj.min, sj.max, sb.median, sb.min, sb.max, flops / sj.median / 1e9, flops / sb.median / 1e9,
             sb.median / sj.median);
    bench_emit("dense", "mm_vs_blas", params, values);
    jag_release(c.a), jag_release(c.b);
}

typedef struct {
    jag_tensor *a, *b;
} mm_pair;

static void run_mm_pair(void *p) {
    mm_pair *c = p;
    jag_tensor *o = NULL;
    bench_check(jag_mm(c->a, c->b, &o), "mm");
    jag_release(o);
}

/* (m, k) @ (k, n): bfloat16 against float32, both through jag_mm, timed
 * interleaved. */
static void bench_bf16_mm(int64_t m, int64_t k, int64_t n) {
    int64_t sa[2] = {m, k}, sb[2] = {k, n};
    mm_pair f32 = {0}, bf16 = {0};
    bench_check(jag_rand_uniform(sa, 2, -1, 1, JAG_FLOAT32, NULL, &f32.a), "rand");
    bench_check(jag_rand_uniform(sb, 2, -1, 1, JAG_FLOAT32, NULL, &f32.b), "rand");
    bench_check(jag_to_dtype(f32.a, JAG_BFLOAT16, &bf16.a), "to_dtype");
    bench_check(jag_to_dtype(f32.b, JAG_BFLOAT16, &bf16.b), "to_dtype");
    bench_stats sh, sf;
    bench_pair(run_mm_pair, &bf16, run_mm_pair, &f32, 10, 1.0, &sh, &sf);
    double flops = 2.0 * (double)m * (double)n * (double)k;
    char params[128], values[400];
    snprintf(params, sizeof params, "\"m\": %lld, \"k\": %lld, \"n\": %lld, \"dtype\": \"bfloat16\"", (long long)m,
             (long long)k, (long long)n);
    snprintf(values, sizeof values,
             "\"bf16_s\": %.6g, \"bf16_s_min\": %.6g, \"bf16_s_max\": %.6g, \"f32_s\": %.6g, \"f32_s_min\": %.6g, "
             "\"f32_s_max\": %.6g, \"bf16_gflops\": %.3f, \"f32_gflops\": %.3f, \"ratio_vs_f32\": %.3f",
             sh.median, sh.min, sh.max, sf.median, sf.min, sf.max, flops / sh.median / 1e9, flops / sf.median / 1e9,
             sf.median / sh.median);
    bench_emit("dense", "bf16_mm_vs_f32", params, values);
    jag_release(f32.a), jag_release(f32.b), jag_release(bf16.a), jag_release(bf16.b);
}

int main(int argc, char **argv) {
    bench_parse_args(argc, argv);
    jag_manual_seed(0);
    char core[96];
    snprintf(core, sizeof core, "\"core\": \"%.64s\"", jag_blas_core());
    bench_emit("dense", "blas_core", "", core);
    /* 64 MiB per operand: well beyond the last-level cache */
    bench_pointwise((int64_t)16 << 20);
    if (getenv("BENCH_ONLY_POINTWISE")) return 0;
    int64_t sizes[] = {64, 256, 512, 1024};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) bench_mm(sizes[i]);
    int64_t rows[] = {8, 128, 1024};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) bench_bf16_mm(rows[i], 1024, 1024);
    return 0;
}
