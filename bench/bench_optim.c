/*
 * bench_optim.c — the fused optimizer steps against the machine's copy
 * bandwidth.
 *
 * One AdamW (and SGD with momentum) step over a model-shaped set of float32
 * parameters, timed interleaved with a memcpy split over the same OpenMP
 * threads that moves the same number of bytes. An AdamW step must read
 * param, grad, exp_avg and exp_avg_sq and write param, exp_avg and
 * exp_avg_sq: 7 x 4 bytes per element; SGD with momentum reads param, grad
 * and the buffer and writes param and buffer: 5 x 4 bytes. A memcpy of S
 * bytes moves 2 S (read + write), so the baseline copies half the step's
 * bytes. Target: the AdamW step at >= 0.7 of memcpy's bandwidth at a
 * DRAM-resident size (the whole set far above the last-level cache).
 *
 * Output: {"bench": "optim", "name": "step_vs_memcpy", ...} per optimizer
 * and size.
 */
#include "bench.h"

#include <omp.h>

typedef struct {
    jag_optimizer *opt;
} step_ctx;

static void run_step(void *p) {
    step_ctx *c = p;
    bench_check(jag_optim_step(c->opt), "jag_optim_step");
}


/* n_tensors parameters of `rows` x `cols` floats, each with a gradient
 * (from one backward of sum(p * 0.001)). */
static void make_params(int n_tensors, int64_t rows, int64_t cols, jag_tensor **params) {
    int64_t shape[2] = {rows, cols};
    for (int i = 0; i < n_tensors; i++) {
        bench_check(jag_rand_uniform(shape, 2, -0.1, 0.1, JAG_FLOAT32, NULL, &params[i]), "rand");
        bench_check(jag_set_requires_grad(params[i], true), "requires_grad");
        jag_tensor *scaled = NULL, *loss = NULL;
        bench_check(jag_mul_scalar(params[i], 1e-3, &scaled), "mul_scalar");
        bench_check(jag_sum(scaled, NULL, 0, false, &loss), "sum");
        bench_check(jag_backward(loss, NULL, false), "backward");
        jag_release(scaled), jag_release(loss);
    }
}

enum { KIND_ADAMW, KIND_SGD };

static void bench_step(int kind, const char *label, int n_tensors, int64_t rows, int64_t cols) {
    jag_tensor *params[64];
    make_params(n_tensors, rows, cols, params);
    jag_optimizer *opt = NULL;
    if (kind == KIND_ADAMW)
        bench_check(jag_optim_adamw_new(params, n_tensors, 1e-4, 0.9, 0.999, 1e-8, 1e-2, false, &opt), "adamw_new");
    else
        bench_check(jag_optim_sgd_new(params, n_tensors, 1e-4, 0.9, 0.0, 0.0, false, &opt), "sgd_new");
    step_ctx sc = {opt};
    run_step(&sc); /* the state exists before timing */
    double elements = (double)n_tensors * (double)rows * (double)cols;
    double step_bytes = elements * 4.0 * (kind == KIND_ADAMW ? 7.0 : 5.0);
    size_t copy_bytes = (size_t)(step_bytes / 2.0);
    bench_copy cc = {aligned_alloc(64, (copy_bytes + 63) / 64 * 64), aligned_alloc(64, (copy_bytes + 63) / 64 * 64),
                   copy_bytes};
    memset((void *)cc.src, 1, copy_bytes);
    memset(cc.dst, 0, copy_bytes);
    bench_stats ss, sm;
    bench_pair(run_step, &sc, bench_run_copy, &cc, 20, 1.0, &ss, &sm);
    double step_gbs = step_bytes / ss.median / 1e9, copy_gbs = step_bytes / sm.median / 1e9;
    char params_json[256], values[384];
    snprintf(params_json, sizeof params_json,
             "\"optimizer\": \"%s\", \"set\": \"%s\", \"tensors\": %d, \"elements\": %.0f, \"bytes_moved\": %.0f",
             kind == KIND_ADAMW ? "adamw" : "sgd_momentum", label, n_tensors, elements, step_bytes);
    snprintf(values, sizeof values,
             "\"step_s\": %.6g, \"step_s_min\": %.6g, \"step_s_max\": %.6g, \"memcpy_s\": %.6g, \"step_gbs\": %.3f, "
             "\"memcpy_gbs\": %.3f, \"ratio_vs_memcpy\": %.3f",
             ss.median, ss.min, ss.max, sm.median, step_gbs, copy_gbs, step_gbs / copy_gbs);
    bench_emit("optim", "step_vs_memcpy", params_json, values);
    free((void *)cc.src), free(cc.dst);
    bench_check(jag_optim_free(opt), "optim_free");
    for (int i = 0; i < n_tensors; i++) jag_release(params[i]);
}

int main(int argc, char **argv) {
    bench_parse_args(argc, argv);
    /* a transformer-sized set (12 tensors of 768 x 768: 7.1 M parameters,
     * 198 MB moved per AdamW step: DRAM-resident) and the training
     * example's size (8 tensors of 64 x 256: 131 k parameters, 3.7 MB: in
     * the caches, reported without a target) */
    int big = bench_quick ? 6 : 12;
    for (int kind = KIND_ADAMW; kind <= KIND_SGD; kind++) {
        bench_step(kind, "dram", big, 768, 768);
        bench_step(kind, "cache", 8, 64, 256);
    }
    return 0;
}
