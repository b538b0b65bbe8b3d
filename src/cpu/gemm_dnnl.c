/* gemm_dnnl.c — matrix products on oneDNN's matmul primitive: bfloat16
 * (AVX512-BF16 `vdpbf16ps` where the CPU has it): bfloat16 operands,
 * float32 accumulation, each result rounded once to bfloat16, as PyTorch's
 * CPU bfloat16 mm computes (it runs the same library); and float32 with a
 * transposed right operand (linear's weight), where the primitive ran
 * 1.2-2x OpenBLAS and dnnl_sgemm (gemm.c says when it is used).
 *
 * Why oneDNN and not a micro-kernel of our own: measured on this project's
 * 2-core AVX512-BF16 host (Debian libdnnl 2.6.3, implementation
 * "brg:avx512_core_bf16", OpenBLAS 0.3.21 sgemm for float32, interleaved in
 * one run), a square n = 1024 product ran at 59-70 GFLOP/s in bfloat16 vs
 * 29-36 GFLOP/s in float32 (1.7-2.1x), M = 128 rows (K = N = 1024) at
 * 1.0-1.4x, M = 8 at 1-5x (noisy). It reaches the 1.5x aim at n = 1024, and
 * it runs on the same OpenMP runtime (libgomp) as jag, so a call from
 * inside jag's parallel regions runs on one thread instead of fighting.
 *
 * Primitive creation: the first one of a shape costs 0.4-0.9 ms; making it
 * again costs 1-3 us, because oneDNN keeps a primitive cache of its own
 * (1024 entries by default), so nothing is cached here; the row counts of
 * ragged batches are rounded to a few cached shapes (run_matmul_rows). Note that
 * `vdpbf16ps` treats subnormal inputs and results as zero, as in PyTorch. */
#include "gemm_dnnl.h"

#include "../core/half.h"
#include "../core/internal.h"

#include <dnnl.h>
#include <pthread.h>

static dnnl_engine_t cpu_engine;
static dnnl_status_t engine_status = dnnl_runtime_error;
static bool bf16_matmul_exists;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

/* The CPU engine, made once and kept for the life of the process, and
 * whether this CPU has a bfloat16 matmul: oneDNN 2.6 has none below
 * AVX-512 (valgrind's emulated CPU included), and says "unimplemented". */
static void make_engine(void) {
    engine_status = dnnl_engine_create(&cpu_engine, dnnl_cpu, 0);
    if (engine_status != dnnl_success) return;
    dnnl_memory_desc_t d;
    dnnl_dims_t dims = {64, 64};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_init_by_tag(&d, 2, dims, dnnl_bf16, dnnl_ab) == dnnl_success &&
        dnnl_matmul_desc_init(&md, &d, &d, NULL, &d) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &md, NULL, cpu_engine, NULL) == dnnl_success) {
        bf16_matmul_exists = true;
        dnnl_primitive_desc_destroy(pd);
    }
}

bool jag__gemm_bf16_available(void) {
    pthread_once(&engine_once, make_engine);
    return engine_status == dnnl_success && bf16_matmul_exists;
}

static jag_status dnnl_failed(const char *op, const char *kind, const char *what, dnnl_status_t s) {
    if (s == dnnl_out_of_memory) return jag__error(JAG_ENOMEM, "%s: out of memory in the %s GEMM (%s)", op, kind, what);
    return jag__error(JAG_EINTERNAL, "%s: the %s GEMM library failed in %s (oneDNN status %d)", op, kind, what, (int)s);
}

/* The memory descriptor of op(x) (rows, cols) of elements `dt`: row-major
 * with leading dimension ld, or the transpose of a row-major (cols, rows). */
static dnnl_status_t matrix_desc(dnnl_memory_desc_t *d, dnnl_data_type_t dt, int64_t rows, int64_t cols, bool trans,
                                 int64_t ld) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    return dnnl_memory_desc_init_by_strides(d, 2, dims, dt, strides);
}

/* c (n, m), contiguous = op(a) @ op(b) [+ c] on the matmul primitive, every
 * operand of type dt. Returns dnnl_success, or the failing step's status
 * with *what naming the step; *running says whether the primitive had
 * started (c may then be partly written) or not (c untouched). */
static dnnl_status_t run_matmul(dnnl_data_type_t dt, int64_t n, int64_t m, int64_t k, const void *a, bool a_trans,
                                int64_t lda, const void *b, bool b_trans, int64_t ldb, bool accumulate, void *c,
                                const char **what, bool *running) {
    *running = false;
    *what = "engine creation";
    pthread_once(&engine_once, make_engine);
    if (engine_status != dnnl_success) return engine_status;
    dnnl_memory_desc_t da, db, dc;
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_dims_t dims_c = {n, m};
    *what = "descriptors";
    dnnl_status_t s = matrix_desc(&da, dt, n, k, a_trans, lda);
    if (!s) s = matrix_desc(&db, dt, k, m, b_trans, ldb);
    if (!s) s = dnnl_memory_desc_init_by_tag(&dc, 2, dims_c, dt, dnnl_ab);
    if (!s) s = dnnl_matmul_desc_init(&md, &da, &db, NULL, &dc);
    if (!s) *what = "attributes", s = dnnl_primitive_attr_create(&attr);
    if (!s && accumulate) { /* c += op(a) op(b): the old c added in float32, one rounding */
        s = dnnl_post_ops_create(&post);
        if (!s) s = dnnl_post_ops_append_sum(post, 1.0f);
        if (!s) s = dnnl_primitive_attr_set_post_ops(attr, post);
    }
    if (!s) *what = "primitive creation", s = dnnl_primitive_desc_create(&pd, &md, attr, cpu_engine, NULL);
    if (!s) s = dnnl_primitive_create(&prim, pd);
    if (!s) *what = "memory", s = dnnl_memory_create(&ma, &da, cpu_engine, (void *)a);
    if (!s) s = dnnl_memory_create(&mb, &db, cpu_engine, (void *)b);
    if (!s) s = dnnl_memory_create(&mc, &dc, cpu_engine, c);
    if (!s) *what = "stream", s = dnnl_stream_create(&stream, cpu_engine, dnnl_stream_default_flags);
    if (!s) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        *what = "execution", *running = true, s = dnnl_primitive_execute(prim, stream, 3, args);
        if (!s) s = dnnl_stream_wait(stream);
    }
    if (stream) dnnl_stream_destroy(stream);
    if (mc) dnnl_memory_destroy(mc);
    if (mb) dnnl_memory_destroy(mb);
    if (ma) dnnl_memory_destroy(ma);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post) dnnl_post_ops_destroy(post);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return s;
}

/* The rows of a product that one primitive computes: n rounded down to a
 * multiple of 2^(floor(log2 n) - 3). oneDNN makes a primitive per shape
 * (0.4-0.7 ms: JIT code) and keeps the last 1024 made; a ragged batch
 * changes the row count at every step, so that each product made one (on
 * a training loop of fresh ragged batches, 177 of 360 products, 42-45 ms
 * of making for 439 ms of running). Rounded, the row counts take at most 8
 * values an octave, which the cache keeps after the first steps. */
static int64_t primitive_rows(int64_t n) {
    int64_t step = 1;
    while (step * 16 <= n) step *= 2;
    return n / step * step;
}

/* run_matmul over n rows in at most two calls of cached shapes: the first
 * primitive_rows(n) rows, then the last rows left rounded up to a multiple
 * of 16 (so 2^(floor(log2 n) - 7) + 1 more shapes an octave at most): the
 * rows both calls cover (at most 15) are computed twice, their old values
 * put back in between when the product accumulates into c (linear's bias).
 * The rows left ran up to 4x slower on dnnl_sgemm than on the primitive
 * (26 rows of a 1024 x 1024 weight: 1.58 vs 0.38 ms). */
static dnnl_status_t run_matmul_rows(dnnl_data_type_t dt, int64_t n, int64_t m, int64_t k, const void *a, bool a_trans,
                                     int64_t lda, const void *b, bool b_trans, int64_t ldb, bool accumulate, void *c,
                                     const char **what, bool *running) {
    int64_t nh = primitive_rows(n), r = n - nh;
    if (!r) return run_matmul(dt, n, m, k, a, a_trans, lda, b, b_trans, ldb, accumulate, c, what, running);
    size_t es = dt == dnnl_bf16 ? 2 : 4;
    int64_t at = n - (r + 15) / 16 * 16, twice = nh - at; /* n >= 16 here (else r = 0): at >= 0 */
    char *cc = c, *saved = NULL;
    if (accumulate && twice > 0 && !(saved = malloc((size_t)(twice * m) * es))) {
        *running = false, *what = "memory";
        return dnnl_out_of_memory;
    }
    if (saved) memcpy(saved, cc + (size_t)(at * m) * es, (size_t)(twice * m) * es);
    dnnl_status_t s = run_matmul(dt, nh, m, k, a, a_trans, lda, b, b_trans, ldb, accumulate, c, what, running);
    if (!s) {
        if (saved) memcpy(cc + (size_t)(at * m) * es, saved, (size_t)(twice * m) * es);
        const char *a_at = (const char *)a + (size_t)(a_trans ? at : at * lda) * es;
        s = run_matmul(dt, n - at, m, k, a_at, a_trans, lda, b, b_trans, ldb, accumulate, cc + (size_t)(at * m) * es,
                       what, running);
        *running = true; /* the first call wrote c */
    }
    free(saved);
    return s;
}

jag_status jag__gemm_bf16(const char *op, int64_t n, int64_t m, int64_t k, const uint16_t *a, bool a_trans,
                          int64_t lda, const uint16_t *b, bool b_trans, int64_t ldb, bool accumulate, uint16_t *c) {
    const char *what;
    bool running;
    dnnl_status_t s = run_matmul_rows(dnnl_bf16, n, m, k, a, a_trans, lda, b, b_trans, ldb, accumulate, c, &what, &running);
    return s == dnnl_success ? JAG_OK : dnnl_failed(op, "bfloat16", what, s);
}

jag_status jag__gemm_f32_dnnl(const char *op, int64_t n, int64_t m, int64_t k, const float *a, bool a_trans,
                              int64_t lda, const float *b, bool b_trans, int64_t ldb, bool accumulate, float *c,
                              bool *ran) {
    const char *what;
    bool running;
    dnnl_status_t s = run_matmul_rows(dnnl_f32, n, m, k, a, a_trans, lda, b, b_trans, ldb, accumulate, c, &what, &running);
    *ran = s == dnnl_success || running;
    return s == dnnl_success || !running ? JAG_OK : dnnl_failed(op, "float32", what, s);
}

/* ---- naive reference ----------------------------------------------------- */

void jag__ref_gemm_bf16(int64_t n, int64_t m, int64_t k, const uint16_t *a, bool a_trans, int64_t lda,
                        const uint16_t *b, bool b_trans, int64_t ldb, bool accumulate, uint16_t *c) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double s = accumulate ? (double)jag__bf16_to_f32(c[i * m + j]) : 0.0;
            for (int64_t p = 0; p < k; p++) {
                uint16_t x = a_trans ? a[p * lda + i] : a[i * lda + p];
                uint16_t y = b_trans ? b[j * ldb + p] : b[p * ldb + j];
                s += (double)jag__bf16_to_f32(x) * (double)jag__bf16_to_f32(y);
            }
            c[i * m + j] = jag__f32_to_bf16((float)s);
        }
}
