/* gemm.c — matrix products on OpenBLAS: mm, bmm and linear (typed kernels
 * and naive references; the ops' META functions and boxed adapters are
 * src/dispatch/gemm_op.c).
 *
 * The kernels hand the operands' own memory to cblas_sgemm / cblas_dgemm
 * whenever their strides can be said to BLAS (row-major with a leading
 * dimension, or the transpose of that); only an operand whose strides cannot
 * is first copied to contiguous memory. bfloat16 operands go the same way
 * to oneDNN (gemm_dnnl.c: float32 accumulation, one rounding; small ones
 * widened to sgemm, the same contract). float32 products of F32_DNNL_MACS
 * multiply-adds and more go to oneDNN too (dnnl_sgemm, or its matmul
 * primitive for linear's transposed weight), faster than OpenBLAS 0.3.21 on
 * this AVX-512 host (bench/gemm_libs/README.md). float16 has no product instruction
 * on x86 CPUs and takes the dispatcher's widening path (dispatch.c). */
#include "kernels.h"
#include "gemm_dnnl.h"
#include "../core/half.h"

#include <cblas.h>
#include <dnnl.h>
#include <limits.h>
#include <stdatomic.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* The largest size or leading dimension BLAS's integer type holds. */
#define BLAS_INT_MAX ((int64_t)(sizeof(blasint) == 4 ? INT_MAX : INT64_MAX))

/* A batch of GEMMs each of at most this many multiply-adds runs one GEMM per
 * OpenMP thread (a call from inside a parallel region is single-threaded in
 * the OpenMP OpenBLAS); larger GEMMs run one after another, each using every
 * thread inside BLAS. */
#define SMALL_GEMM_MACS ((int64_t)128 * 128 * 128)

/* Operands copied because their layout was not expressible to BLAS. A
 * diagnostic the tests read (declared there) to prove the no-copy paths. */
static atomic_long gemm_operand_copies;
long jag__gemm_copy_count(void) { return atomic_load(&gemm_operand_copies); }

/* ---- operands as BLAS sees them ----------------------------------------- */

/* One GEMM operand: op(M) is (rows, cols); M is stored row-major with leading
 * dimension `ld` (trans == CblasTrans: M is the (cols, rows) transpose). A
 * batch of matrices steps `batch_stride` elements from one to the next. */
typedef struct blas_operand {
    const char *base;
    int64_t batch_stride;
    enum CBLAS_TRANSPOSE trans;
    int64_t ld;
    jag_tensor *copy; /* owned contiguous copy, when one was needed */
} blas_operand;

/* Whether a (rows, cols) matrix with element strides (s0, s1) can go to
 * row-major BLAS without a copy, and how. The stride of a dim of size <= 1
 * never matters, and BLAS then only needs ld >= max(1, cols) (or rows). */
static bool blas_layout(int64_t rows, int64_t cols, int64_t s0, int64_t s1, enum CBLAS_TRANSPOSE *trans,
                        int64_t *ld) {
    int64_t need = cols > 1 ? cols : 1;
    if (cols <= 1 || s1 == 1) { /* rows apart by s0: row-major */
        int64_t l = rows <= 1 ? need : s0;
        if (l >= need && l <= BLAS_INT_MAX) {
            *trans = CblasNoTrans, *ld = l;
            return true;
        }
    }
    need = rows > 1 ? rows : 1;
    if (rows <= 1 || s0 == 1) { /* columns apart by s1: column-major */
        int64_t l = cols <= 1 ? need : s1;
        if (l >= need && l <= BLAS_INT_MAX) {
            *trans = CblasTrans, *ld = l;
            return true;
        }
    }
    return false;
}

/* The operand for the matrix of t over dims (rdim, cdim) (the batch, if any,
 * is dim 0 of a 3-d t). Copies t to contiguous memory only when its strides
 * cannot be said to BLAS. */
static jag_status make_operand(const char *op, const jag_tensor *t, int rdim, int cdim, blas_operand *o) {
    o->copy = NULL;
    int64_t rows = t->sizes[rdim], cols = t->sizes[cdim];
    if (!blas_layout(rows, cols, t->strides[rdim], t->strides[cdim], &o->trans, &o->ld)) {
        o->copy = jag__tensor_new(op, t->sizes, t->ndim, t->dtype, false, false);
        if (!o->copy) return jag_last_status();
        jag__copy_into(o->copy, t);
        atomic_fetch_add_explicit(&gemm_operand_copies, 1, memory_order_relaxed);
        t = o->copy;
        if (!blas_layout(rows, cols, t->strides[rdim], t->strides[cdim], &o->trans, &o->ld)) {
            jag_release(o->copy);
            o->copy = NULL;
            return jag__error(JAG_EOVERFLOW, "%s: a matrix of %lld x %lld is too large for the BLAS library's sizes", op,
                              (long long)rows, (long long)cols);
        }
    }
    o->base = jag__ptr(t);
    o->batch_stride = t->ndim == 3 ? t->strides[0] : 0;
    return JAG_OK;
}

static jag_status check_blas_sizes(const char *op, int64_t n, int64_t m, int64_t k) {
    if (n > BLAS_INT_MAX || m > BLAS_INT_MAX || k > BLAS_INT_MAX)
        return jag__error(JAG_EOVERFLOW, "%s: sizes n=%lld, m=%lld, k=%lld exceed the BLAS library's integer range", op,
                          (long long)n, (long long)m, (long long)k);
    return JAG_OK;
}

/* bfloat16 products of at most this many multiply-adds (and every one on a
 * CPU without oneDNN's bfloat16 matmul) are widened to float32 and run on
 * cblas_sgemm, then rounded once: the same contract (float32 sums, one
 * rounding) without oneDNN's per-call cost, measured at
 * 6-10 us (a 4 x 4 product: 12 us vs 1.4 us widened; 64^3: 8.7 vs 6 us;
 * 96^3 and up oneDNN wins). */
#define BF16_WIDEN_MACS ((int64_t)64 * 64 * 64)

/* element (i, j) of op(x) as `o` describes it */
static inline int64_t operand_index(const blas_operand *o, int64_t i, int64_t j) {
    return o->trans == CblasTrans ? j * o->ld + i : i * o->ld + j;
}

/* c (n, m) bfloat16 = a @ b [+ c], small: widened, sgemm, rounded once */
static jag_status gemm_bf16_widened(const char *op, int64_t n, int64_t m, int64_t k, const uint16_t *a,
                                    const blas_operand *oa, const uint16_t *b, const blas_operand *ob, bool accumulate,
                                    uint16_t *c) {
    float *buf = malloc((size_t)(n * k + k * m + n * m) * sizeof *buf);
    if (!buf) return jag__error(JAG_ENOMEM, "%s: out of memory widening bfloat16 operands", op);
    float *fa = buf, *fb = buf + n * k, *fc = fb + k * m;
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < k; p++) fa[i * k + p] = jag__bf16_to_f32(a[operand_index(oa, i, p)]);
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < m; j++) fb[p * m + j] = jag__bf16_to_f32(b[operand_index(ob, p, j)]);
    if (accumulate) jag__bf16_to_f32_n(fc, c, n * m);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)m, (blasint)k, 1.0f, fa, (blasint)k, fb,
                (blasint)m, accumulate ? 1.0f : 0.0f, fc, (blasint)m);
    jag__f32_to_bf16_n(c, fc, n * m);
    free(buf);
    return JAG_OK;
}

/* float32 products of at least this many multiply-adds, called outside a
 * parallel region, run on oneDNN (libdnnl, already linked for bfloat16)
 * instead of OpenBLAS 0.3.21: dnnl_sgemm (row-major, the arguments of
 * cblas_sgemm) or, below, the matmul primitive. On this project's 2-core
 * AVX-512 host (bench/gemm_libs/README.md: jag_mm / jag_linear before and after,
 * one process, alternated) that made M = 1..128 rows with K, N in
 * 256..4096 1.1-12x faster (M = 1, K = N = 1024 linear: 12x; M = 7: 3-5x),
 * M = 2048 0.9-1.5x (parity within the noise at K = 4096), while OpenBLAS
 * stays ahead on products under 64^3, which keep it. So do the per-thread
 * small GEMMs of bmm (inside a parallel region). Same contract as
 * cblas_sgemm: float32 products summed in float32, in a blocked order. */
#define F32_DNNL_MACS ((int64_t)64 * 64 * 64)

/* dnnl_sgemm with a transposed b (every linear) ran 0.45-0.9x OpenBLAS from
 * 26 rows up (K or N = 1024, 4096), where oneDNN's matmul primitive ran
 * 1.2-2.1x OpenBLAS: such products of at least this many rows take the
 * primitive. 16 lies between the measured 7 (dnnl_sgemm 2.7-5.5x
 * OpenBLAS) and 26; the rows in between were not measured. */
#define F32_MATMUL_ROWS 16
/* ... and a b of at least this many elements (K x N): below it the
 * primitive ran 0.8-1.0x dnnl_sgemm (600 rows, K, N in 64..256: 30 vs 28
 * us at 64 x 64, 115 vs 99 us at 64 x 256), from it 1.0-4x (K = N = 256,
 * 100 rows: 61 vs 77 us; K = N = 1024: 26 rows 0.38 vs 1.58 ms, 512 rows
 * 5.0 vs 6.2 ms; 2048 rows: parity), one process, alternated. */
#define F32_MATMUL_WEIGHT ((int64_t)256 * 256)

/* oneDNN's float32 sgemm on AVX2 (its effective ISA below AVX-512) reads a
 * b that is 32-byte aligned in place, and every tensor jag allocates is:
 * with b's rows a multiple of 512 floats apart (2 KiB, a power-of-two
 * stride) and 64 to 511 rows of a, that ran 1.2-2.2x slower than OpenBLAS
 * (bench/gemm_libs on 64-byte aligned buffers, Zen 3, 2 threads, two
 * rounds: 128 x 1024 x 1024 75-80 against 135 GFLOP/s, 256 x 2048 x 1024
 * 75 against 150-157; the matmul primitive the same), where a b at a
 * 16-byte offset (which oneDNN packs) ran 1.25x faster than OpenBLAS
 * (128 x 1024 x 1024: 1.74 against 2.2 ms). Those products (a and b not
 * transposed, b 32-byte aligned) go to OpenBLAS there, and so do those
 * of exactly 512 rows with k >= 512: oneDNN ran them at 0.70-0.85 of
 * OpenBLAS (512 x 512 x 512, 512 x 1024 x 512, 512 x 2048 x 512; with n =
 * 1024-2048 0.92-1.0), where 576-768 rows ran at 0.90-1.08 and k = 256 at
 * 1.27-1.33 (jag_mm against cblas_sgemm on the same jag tensors, two
 * rounds). More than 512 rows, and fewer than 64, stay on oneDNN (OpenBLAS
 * 0.15-0.8x below 64). On AVX-512 oneDNN takes other kernels; not measured
 * there. */
static bool dnnl_avx2_only(void) {
    static atomic_int isa; /* 0 unknown, 1 below AVX-512, 2 AVX-512 */
    int v = atomic_load_explicit(&isa, memory_order_relaxed);
    if (!v) {
        v = dnnl_get_effective_cpu_isa() < dnnl_cpu_isa_avx512_core ? 1 : 2;
        atomic_store_explicit(&isa, v, memory_order_relaxed);
    }
    return v == 1;
}

static bool dnnl_slow_strided_b(int64_t n, int64_t k, const blas_operand *oa, const char *b, const blas_operand *ob) {
    return ((n >= 64 && n < 512) || (n == 512 && k >= 512)) && oa->trans == CblasNoTrans &&
           ob->trans == CblasNoTrans && ob->ld % 512 == 0 && (uintptr_t)b % 32 == 0 && dnnl_avx2_only();
}

static bool in_parallel(void) {
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return false;
#endif
}

/* c (n, m), contiguous = a (n, k) @ b (k, m) [+ c when accumulate];
 * n, m, k >= 1. `a`, `b` point at the matrices of one batch. */
static jag_status gemm(const char *op, jag_dtype dt, int64_t n, int64_t m, int64_t k, const char *a,
                       const blas_operand *oa, const char *b, const blas_operand *ob, bool accumulate, char *c) {
    blasint ldc = (blasint)(m > 1 ? m : 1);
    if (dt == JAG_BFLOAT16 && (n * m * k <= BF16_WIDEN_MACS || !jag__gemm_bf16_available()))
        return gemm_bf16_widened(op, n, m, k, (const uint16_t *)a, oa, (const uint16_t *)b, ob, accumulate,
                                 (uint16_t *)c);
    if (dt == JAG_BFLOAT16)
        return jag__gemm_bf16(op, n, m, k, (const uint16_t *)a, oa->trans == CblasTrans, oa->ld, (const uint16_t *)b,
                              ob->trans == CblasTrans, ob->ld, accumulate, (uint16_t *)c);
    /* float32 from F32_DNNL_MACS up: a transposed b (linear's weight) with
     * F32_MATMUL_ROWS rows or more on the matmul primitive, the rest on
     * dnnl_sgemm (which checks its arguments before computing anything: on
     * a failure c is untouched). Either failing to start falls to OpenBLAS. */
    if (dt == JAG_FLOAT32 && n * m * k >= F32_DNNL_MACS && !in_parallel() && ob->trans == CblasTrans &&
        n >= F32_MATMUL_ROWS && k * m >= F32_MATMUL_WEIGHT) {
        bool ran = false;
        jag_status st = jag__gemm_f32_dnnl(op, n, m, k, (const float *)a, oa->trans == CblasTrans, oa->ld,
                                           (const float *)b, true, ob->ld, accumulate, (float *)c, &ran);
        if (ran || st) return st;
    }
    if (dt == JAG_FLOAT32 && n * m * k >= F32_DNNL_MACS && !in_parallel() && !dnnl_slow_strided_b(n, k, oa, b, ob) &&
        dnnl_sgemm(oa->trans == CblasTrans ? 'T' : 'N', ob->trans == CblasTrans ? 'T' : 'N', n, m, k, 1.0f,
                   (const float *)a, oa->ld, (const float *)b, ob->ld, accumulate ? 1.0f : 0.0f, (float *)c,
                   ldc) == dnnl_success)
        return JAG_OK;
    if (dt == JAG_FLOAT32)
        cblas_sgemm(CblasRowMajor, oa->trans, ob->trans, (blasint)n, (blasint)m, (blasint)k, 1.0f, (const float *)a,
                    (blasint)oa->ld, (const float *)b, (blasint)ob->ld, accumulate ? 1.0f : 0.0f, (float *)c, ldc);
    else
        cblas_dgemm(CblasRowMajor, oa->trans, ob->trans, (blasint)n, (blasint)m, (blasint)k, 1.0, (const double *)a,
                    (blasint)oa->ld, (const double *)b, (blasint)ob->ld, accumulate ? 1.0 : 0.0, (double *)c, ldc);
    return JAG_OK;
}

/* ---- mm ----------------------------------------------------------------- */

// a is (n, k), b is (k, m), out is (n, m) contiguous
jag_status jag__mm_kernel(const char *op, const jag_tensor *a, const jag_tensor *b, jag_tensor *out) {
    int64_t n = a->sizes[0], k = a->sizes[1], m = b->sizes[1];
    if (n == 0 || m == 0) return JAG_OK;
    if (k == 0) {
        jag__fill(out, 0.0);
        return JAG_OK;
    }
    jag_status st = check_blas_sizes(op, n, m, k);
    blas_operand oa = {0}, ob = {0};
    if (!st) st = make_operand(op, a, 0, 1, &oa);
    if (!st) st = make_operand(op, b, 0, 1, &ob);
    if (!st) st = gemm(op, a->dtype, n, m, k, oa.base, &oa, ob.base, &ob, false, jag__ptr(out));
    jag_release(oa.copy);
    jag_release(ob.copy);
    return st;
}

/* ---- bmm ---------------------------------------------------------------- */

/* When b is one matrix for every batch (batch stride 0, or B == 1) and a's
 * rows continue evenly from one batch to the next, the batch folds into one
 * (B*n, k) @ (k, m) GEMM. Fills *fold with a's folded operand. */
static bool fold_batch(const jag_tensor *a, const jag_tensor *b, blas_operand *fold) {
    int64_t B = a->sizes[0], n = a->sizes[1], k = a->sizes[2];
    if (B > 1 && b->strides[0] != 0) return false;
    if (B * n > BLAS_INT_MAX) return false;
    int64_t row_stride = 0;
    if (B == 1 || n == 1) row_stride = n == 1 ? a->strides[0] : a->strides[1];
    else if (a->strides[0] == n * a->strides[1]) row_stride = a->strides[1];
    else return false;
    if (B == 1 && n == 1) row_stride = k; /* one row: any stride will do */
    enum CBLAS_TRANSPOSE trans;
    int64_t ld;
    if (!blas_layout(B * n, k, row_stride, a->strides[2], &trans, &ld) || trans != CblasNoTrans) return false;
    fold->base = jag__ptr(a), fold->trans = trans, fold->ld = ld, fold->batch_stride = 0, fold->copy = NULL;
    return true;
}

// a is (B, n, k), b is (B, k, m), out is (B, n, m) contiguous; batch strides arbitrary
jag_status jag__bmm_kernel(const char *op, const jag_tensor *a, const jag_tensor *b, jag_tensor *out) {
    int64_t B = a->sizes[0], n = a->sizes[1], k = a->sizes[2], m = b->sizes[2];
    if (B == 0 || n == 0 || m == 0) return JAG_OK;
    if (k == 0) {
        jag__fill(out, 0.0);
        return JAG_OK;
    }
    jag_status st = check_blas_sizes(op, n, m, k);
    if (st) return st;
    jag_dtype dt = a->dtype;
    int64_t es = (int64_t)jag_dtype_size(dt);
    char *c = jag__ptr(out);
    blas_operand oa = {0}, ob = {0};
    if ((st = make_operand(op, b, 1, 2, &ob))) return st;
    if (fold_batch(a, b, &oa)) {
        st = gemm(op, dt, B * n, m, k, oa.base, &oa, ob.base, &ob, false, c);
        jag_release(ob.copy);
        return st;
    }
    if ((st = make_operand(op, a, 1, 2, &oa))) {
        jag_release(ob.copy);
        return st;
    }
    bool par = false;
#ifdef _OPENMP
    par = B > 1 && omp_get_max_threads() > 1 && !omp_in_parallel() && (double)n * (double)m * (double)k <= (double)SMALL_GEMM_MACS;
#endif
    int64_t sa = oa.batch_stride * es, sb = ob.batch_stride * es, sc = n * m * es;
    /* a batch can fail on oneDNN only (gemm_dnnl.c); the error message is
     * per thread, so a failure on a worker thread is said again here */
    int failed = 0;
    JAG_PARALLEL_IF(par, "omp parallel for schedule(static) reduction(| : failed)",
        for (int64_t i = 0; i < B; i++)
            if (!failed && gemm(op, dt, n, m, k, oa.base + i * sa, &oa, ob.base + i * sb, &ob, false, c + i * sc))
                failed = 1;);
    jag_release(oa.copy);
    jag_release(ob.copy);
    if (!failed) return JAG_OK;
    return par ? jag__error(JAG_EINTERNAL, "%s: the bfloat16 GEMM of a batch failed", op) : jag_last_status();
}

/* ---- linear ------------------------------------------------------------- */

/* Whether x's leading dims (all but the last) can be read as one dim of
 * `rows` without a copy; *row_stride is then its stride. */
static bool leading_dims_merge(const jag_tensor *x, int64_t *row_stride) {
    int64_t stride = 0, extent = 0; /* stride of the innermost merged dim so far, and its span */
    bool any = false;
    for (int d = x->ndim - 2; d >= 0; d--) {
        if (x->sizes[d] == 1) continue;
        if (!any) {
            stride = x->strides[d], extent = x->strides[d] * x->sizes[d], any = true;
        } else {
            if (x->strides[d] != extent) return false;
            extent *= x->sizes[d];
        }
    }
    *row_stride = stride;
    return true;
}

/* Preload every row of out (rows, cols), contiguous, with bias (cols). */
static void fill_rows_with_bias(jag_tensor *out, const jag_tensor *bias, int64_t rows, int64_t cols) {
    size_t es = jag_dtype_size(out->dtype);
    char *o = jag__ptr(out);
    const char *bp = jag__ptr(bias);
    int64_t bs = bias->strides[0] * (int64_t)es;
    if (bs != (int64_t)es && cols > 1) { /* strided bias: write row 0 then copy it */
        for (int64_t j = 0; j < cols; j++) memcpy(o + j * (int64_t)es, bp + j * bs, es);
        bp = o;
    }
    size_t row_bytes = (size_t)cols * es;
    JAG_PARALLEL_IF(rows * cols >= JAG_GRAIN_MEMORY, "omp parallel for schedule(static)",
        for (int64_t r = 0; r < rows; r++)
            if (o + r * (int64_t)row_bytes != bp) memcpy(o + r * (int64_t)row_bytes, bp, row_bytes););
}

// x is (..., in) viewed as (rows, in), w is (out, in), bias is (out) or NULL, out is (..., out) contiguous
jag_status jag__linear_kernel(const char *op, const jag_tensor *x, const jag_tensor *w, const jag_tensor *bias,
                              jag_tensor *out) {
    int64_t in = x->sizes[x->ndim - 1], out_f = w->sizes[0];
    int64_t rows = jag__numel(x->sizes, x->ndim - 1);
    if (rows == 0 || out_f == 0) return JAG_OK;
    if (bias) fill_rows_with_bias(out, bias, rows, out_f);
    if (in == 0) {
        if (!bias) jag__fill(out, 0.0);
        return JAG_OK;
    }
    jag_status st = check_blas_sizes(op, rows, out_f, in);
    if (st) return st;

    /* x as a 2-d (rows, in) matrix: a view when its leading dims merge, else
     * a contiguous copy (counted as an operand copy). */
    jag_tensor *x_copy = NULL;
    int64_t row_stride = 0;
    if (!leading_dims_merge(x, &row_stride)) {
        x_copy = jag__tensor_new(op, x->sizes, x->ndim, x->dtype, false, false);
        if (!x_copy) return jag_last_status();
        jag__copy_into(x_copy, x);
        atomic_fetch_add_explicit(&gemm_operand_copies, 1, memory_order_relaxed);
        x = x_copy;
        leading_dims_merge(x, &row_stride);
    }
    int64_t x2_sizes[2] = {rows, in}, x2_strides[2] = {row_stride, x->strides[x->ndim - 1]};
    jag_tensor *x2 = jag__tensor_view(x, x2_sizes, x2_strides, 2, x->offset);
    /* w^T: the (in, out) view of w, which BLAS reads transposed when w is
     * row-major. */
    int64_t wt_sizes[2] = {in, out_f}, wt_strides[2] = {w->strides[1], w->strides[0]};
    jag_tensor *wt = jag__tensor_view(w, wt_sizes, wt_strides, 2, w->offset);
    blas_operand ox = {0}, ow = {0};
    if (!x2 || !wt) st = jag_last_status();
    if (!st) st = make_operand(op, x2, 0, 1, &ox);
    if (!st) st = make_operand(op, wt, 0, 1, &ow);
    if (!st) st = gemm(op, out->dtype, rows, out_f, in, ox.base, &ox, ow.base, &ow, bias != NULL, jag__ptr(out));
    jag_release(ox.copy);
    jag_release(ow.copy);
    jag_release(x2);
    jag_release(wt);
    jag_release(x_copy);
    return st;
}

/* ---- naive references (any strides; accumulate in double) --------------- */

static double at2(const jag_tensor *t, int64_t off) {
    return jag__load_as_double(jag__ptr(t) + off * (int64_t)jag_dtype_size(t->dtype), t->dtype);
}

static void put(jag_tensor *t, int64_t off, double v) {
    jag__store_from_double(jag__ptr(t) + off * (int64_t)jag_dtype_size(t->dtype), t->dtype, v);
}

// a is (n, k), b is (k, m), out is (n, m): the triple loop
void jag__ref_mm(const jag_tensor *a, const jag_tensor *b, jag_tensor *out) {
    int64_t n = a->sizes[0], k = a->sizes[1], m = b->sizes[1];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += at2(a, i * a->strides[0] + p * a->strides[1]) * at2(b, p * b->strides[0] + j * b->strides[1]);
            put(out, i * out->strides[0] + j * out->strides[1], s);
        }
}

// a is (B, n, k), b is (B, k, m), out is (B, n, m)
void jag__ref_bmm(const jag_tensor *a, const jag_tensor *b, jag_tensor *out) {
    int64_t B = a->sizes[0], n = a->sizes[1], k = a->sizes[2], m = b->sizes[2];
    for (int64_t q = 0; q < B; q++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double s = 0;
                for (int64_t p = 0; p < k; p++)
                    s += at2(a, q * a->strides[0] + i * a->strides[1] + p * a->strides[2]) *
                         at2(b, q * b->strides[0] + p * b->strides[1] + j * b->strides[2]);
                put(out, q * out->strides[0] + i * out->strides[1] + j * out->strides[2], s);
            }
}

/* Element offset of row r of t's leading dims (all but the last). */
static int64_t row_offset(const jag_tensor *t, int64_t r) {
    int64_t off = 0;
    for (int d = t->ndim - 2; d >= 0; d--) {
        off += (r % t->sizes[d]) * t->strides[d];
        r /= t->sizes[d];
    }
    return off;
}

// x is (..., in), w is (out, in), bias is (out) or NULL, out is (..., out)
void jag__ref_linear(const jag_tensor *x, const jag_tensor *w, const jag_tensor *bias, jag_tensor *out) {
    int64_t in = x->sizes[x->ndim - 1], out_f = w->sizes[0];
    int64_t rows = jag__numel(x->sizes, x->ndim - 1);
    int64_t xs = x->strides[x->ndim - 1], os = out->strides[out->ndim - 1];
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = row_offset(x, r), oo = row_offset(out, r);
        for (int64_t j = 0; j < out_f; j++) {
            double s = bias ? at2(bias, j * bias->strides[0]) : 0.0;
            for (int64_t p = 0; p < in; p++) s += at2(x, xo + p * xs) * at2(w, j * w->strides[0] + p * w->strides[1]);
            put(out, oo + j * os, s);
        }
    }
}
