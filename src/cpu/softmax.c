/*
 * softmax.c — softmax and log_softmax along one dim, their fused backward
 * ops (softmax_backward, log_softmax_backward) and naive references (typed
 * kernels; the ops' META functions and boxed adapters are
 * src/dispatch/softmax_op.c).
 *
 * x is viewed as (O, R, I): R is the softmax dim, O the dims before it, I
 * the dims after it. Numerically stable: each line subtracts its maximum
 * before exp, so inputs like 1000 or -1000 never overflow. A NaN anywhere in
 * a line, a +inf (inf - inf) or a line of -inf only (-inf - -inf) makes the
 * whole line NaN (as torch).
 *
 * Fast paths (out is contiguous; a non-contiguous x is first copied into out
 * and processed in place):
 *   I == 1  contiguous rows of R: max, exp and sum, scale; threads share rows.
 *   I  > 1  tiles of (one o, up to TILE_I columns), vectorised across
 *           columns: one pass down the R rows keeps a running max and sum
 *           per column (online softmax), a second one writes.
 * exp runs through exp_nonpos_*, a branch-free exp for arguments <= 0 that
 * gcc vectorises (libm's exp does not vectorise without -ffast-math); the
 * float32 row path through vecmath.h's (fused multiply-adds, one degree
 * less), its NaN handled by the row (row_*).
 */
#include "kernels.h"
#include "ragged_kernels.h" /* a middle dim as uniform segments */
#include "vecmath.h"

#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define LANES 16
#define MAX_LANES (4 * LANES) /* the row max: four independent vectors */
#define TILE_I 1024 /* most columns in a tile (dim not last) */
#define TILE_MIN 64

/* ---- exp for x <= 0 ------------------------------------------------------ */

/* exp(x) for x <= 0 (and NaN, -inf), within 1 ulp, branch-free so that
 * loops calling it vectorise: x = n ln2 + r with |r| <= ln2/2 (n rounded by
 * adding 1.5 * 2^mantissa bits, so no float-to-int conversion is needed),
 * exp(r) by its Taylor polynomial, 2^n written into the exponent bits.
 * Results below the smallest normal number flush to 0 (an absolute error
 * under 1.2e-38 / 2.3e-308). */
static inline float exp_nonpos_f32(float x) {
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    float t = x * 1.44269504088896341f + magic;
    float fn = t - magic;
    float r = (x - fn * 0.693359375f) - fn * -2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t tb, mb;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&mb, &magic, sizeof mb);
    uint32_t sb = (tb - mb + 127u) << 23; /* n + 127 in the exponent field */
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    float y = x >= -87.33f ? p * scale : 0.0f;
    return x == x ? y : x;
}

static inline double exp_nonpos_f64(double x) {
    const double magic = 6755399441055744.0; /* 1.5 * 2^52 */
    double t = x * 1.44269504088896340736 + magic;
    double fn = t - magic;
    double r = (x - fn * 6.93147180369123816490e-01) - fn * 1.90821492927058770002e-10;
    double p = 1.0 / 6227020800.0; /* 1/13! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    uint64_t tb, mb;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&mb, &magic, sizeof mb);
    uint64_t sb = (tb - mb + 1023u) << 52;
    double scale;
    memcpy(&scale, &sb, sizeof scale);
    double y = x >= -708.39 ? p * scale : 0.0;
    return x == x ? y : x;
}

/* exp(x) for x <= 0 on the row path (I == 1), where NaN never reaches the
 * result through it (see row_*): vecmath's, a polynomial of degree 6 with
 * fused multiply-adds, within 1.052 ulp. */
static inline float row_exp_f32(float x) { return jag__vm_exp_nonpos_f32(x); }

/* ---- kernels, per float type --------------------------------------------- */

#define DEF_SOFTMAX(SUF, T, EXP, ROW_EXP, LOG)                                 \
    /* in, out are (n); in may equal out. Three passes over the row (from   \
     * L1 after the first): the max, in four independent vectors of lanes  \
     * (one would make a chain of dependent maxima); exp(x - m), kept and   \
     * summed in double; the scaling. A NaN is skipped by the max and shows \
     * in the sum of x - m; a max of NaN (x[0]), +inf or -inf (a +inf, or a \
     * line of -inf only) needs no exp: the whole line is NaN. */          \
    static void row_##SUF(const T *in, T *out, int64_t n, bool log_out) {      \
        T mx[MAX_LANES];                                                       \
        for (int j = 0; j < MAX_LANES; j++) mx[j] = in[0];                     \
        int64_t i = 0;                                                         \
        for (; i + MAX_LANES <= n; i += MAX_LANES) {                           \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < MAX_LANES; j++) mx[j] = in[i + j] > mx[j] ? in[i + j] : mx[j]; \
        }                                                                      \
        for (int j = 0; i < n; i++, j++) mx[j] = in[i] > mx[j] ? in[i] : mx[j]; \
        /* the lanes folded in halves, vectorised down to 8 (one chain of  \
         * 63 dependent compares was most of a row of 64's time: softmax   \
         * of (64, 64) floats 4.9 -> 3.2 us, of (1024, 1024) 216 -> 182) */ \
        for (int w = MAX_LANES / 2; w >= 8; w /= 2) {                          \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < w; j++) mx[j] = mx[j + w] > mx[j] ? mx[j + w] : mx[j]; \
        }                                                                      \
        T m = mx[0];                                                           \
        for (int j = 1; j < 8; j++) m = mx[j] > m ? mx[j] : m;                 \
        if (!(m < (T)INFINITY && m > -(T)INFINITY)) { /* NaN first, +inf or only -inf */ \
            for (i = 0; i < n; i++) out[i] = (T)NAN;                           \
            return;                                                            \
        }                                                                      \
        double s[LANES] = {0};                                                 \
        T d_sum[LANES] = {0}; /* NaN when some x is NaN */                     \
        i = 0;                                                                 \
        /* two terms added in T first: one rounding, at most 2^-24 of the   \
         * sum in float32, below the error of exp itself */                  \
        if (log_out) {                                                         \
            for (; i + 2 * LANES <= n; i += 2 * LANES) {                       \
                _Pragma("omp simd")                                            \
                for (int j = 0; j < LANES; j++) {                              \
                    T d0 = in[i + j] - m, d1 = in[i + LANES + j] - m;          \
                    d_sum[j] += d0 + d1;                                       \
                    s[j] += (double)(ROW_EXP(d0) + ROW_EXP(d1));               \
                }                                                              \
            }                                                                  \
            for (int j = 0; i < n; i++, j = (j + 1) % LANES) {                 \
                T d = in[i] - m;                                               \
                d_sum[j] += d;                                                 \
                s[j] += (double)ROW_EXP(d);                                    \
            }                                                                  \
        } else {                                                               \
            for (; i + 2 * LANES <= n; i += 2 * LANES) {                       \
                _Pragma("omp simd")                                            \
                for (int j = 0; j < LANES; j++) {                              \
                    T d0 = in[i + j] - m, d1 = in[i + LANES + j] - m;          \
                    T e0 = ROW_EXP(d0), e1 = ROW_EXP(d1);                      \
                    d_sum[j] += d0 + d1;                                       \
                    out[i + j] = e0, out[i + LANES + j] = e1;                  \
                    s[j] += (double)(e0 + e1);                                 \
                }                                                              \
            }                                                                  \
            for (int j = 0; i < n; i++, j = (j + 1) % LANES) {                 \
                T d = in[i] - m, e = ROW_EXP(d);                               \
                d_sum[j] += d;                                                 \
                out[i] = e;                                                    \
                s[j] += (double)e;                                             \
            }                                                                  \
        }                                                                      \
        for (int w = LANES / 2; w > 0; w /= 2)                                 \
            for (int j = 0; j < w; j++) s[j] += s[j + w], d_sum[j] += d_sum[j + w]; \
        if (d_sum[0] != d_sum[0]) s[0] = NAN;                                  \
        if (log_out) {                                                         \
            T lse = (T)LOG(s[0]);                                              \
            _Pragma("omp simd")                                                \
            for (i = 0; i < n; i++) out[i] = (in[i] - m) - lse;                \
        } else {                                                               \
            T inv = (T)(1.0 / s[0]);                                           \
            _Pragma("omp simd")                                                \
            for (i = 0; i < n; i++) out[i] *= inv;                             \
        }                                                                      \
    }                                                                          \
    /* in, out are (R, ld) from a tile's first column; w columns; in may      \
     * equal out. Pass 1 keeps a running max m and sum s = sum exp(x - m)     \
     * per column (online: one read of the tile, one exp per element, since  \
     * either the new term or the rescaling of s is exp(0)); pass 2 writes.  */ \
    static void tile_##SUF(const T *in, T *out, int64_t R, int64_t ld, int64_t w, bool log_out) { \
        T m[TILE_I];                                                           \
        double s[TILE_I];                                                      \
        for (int64_t c = 0; c < w; c++) m[c] = in[c], s[c] = 1.0;              \
        for (int64_t r = 1; r < R; r++) {                                      \
            const T *x = in + r * ld;                                          \
            for (int64_t c = 0; c < w; c++) {                                  \
                T v = x[c], mo = m[c];                                         \
                bool up = v > mo; /* false for NaN: s turns NaN below */       \
                T e = EXP(up ? mo - v : v - mo);                               \
                e = v == mo ? (T)1 : e; /* -inf == -inf: not NaN */            \
                s[c] = up ? s[c] * (double)e + 1.0 : s[c] + (double)e;         \
                m[c] = up ? v : mo;                                            \
            }                                                                  \
        }                                                                      \
        T f[TILE_I];                                                           \
        /* a max of +inf makes the line NaN, as the row path (inf - inf) */   \
        for (int64_t c = 0; c < w; c++)                                        \
            f[c] = m[c] == (T)INFINITY ? (T)NAN : log_out ? (T)LOG(s[c]) : (T)(1.0 / s[c]); \
        for (int64_t r = 0; r < R; r++) {                                      \
            const T *x = in + r * ld;                                          \
            T *y = out + r * ld;                                               \
            if (log_out)                                                       \
                for (int64_t c = 0; c < w; c++) y[c] = (x[c] - m[c]) - f[c];   \
            else                                                               \
                for (int64_t c = 0; c < w; c++) y[c] = EXP(x[c] - m[c]) * f[c]; \
        }                                                                      \
    }                                                                          \
    static void run_##SUF(const T *in, T *out, int64_t O, int64_t R, int64_t I, bool log_out) { \
        bool par = O * R * I >= JAG_GRAIN_ROWS;                                \
        if (I == 1) {                                                          \
            JAG_PARALLEL_IF(par, "omp parallel for schedule(static)",          \
                for (int64_t o = 0; o < O; o++) row_##SUF(in + o * R, out + o * R, R, log_out);); \
            return;                                                            \
        }                                                                      \
        int64_t tw = TILE_I; /* narrower tiles when too few for the threads */ \
        while (par && tw > TILE_MIN && O * ((I + tw - 1) / tw) < jag_get_num_threads()) tw /= 2; \
        int64_t nb = (I + tw - 1) / tw;                                        \
        JAG_PARALLEL_IF(par, "omp parallel for schedule(static)",              \
        for (int64_t t = 0; t < O * nb; t++) {                                 \
            int64_t o = t / nb, c0 = (t % nb) * tw;                            \
            int64_t w = I - c0 < tw ? I - c0 : tw;                             \
            tile_##SUF(in + o * R * I + c0, out + o * R * I + c0, R, I, w, log_out); \
        });                                                                     \
    }

DEF_SOFTMAX(f32, float, exp_nonpos_f32, row_exp_f32, log)
DEF_SOFTMAX(f64, double, exp_nonpos_f64, exp_nonpos_f64, log)

/* ---- backward kernels, per float type ------------------------------------
 *
 * From the forward's output y and the gradient g along each line:
 * softmax's dx = y (g - sum g y), log_softmax's dx = g - exp(y) sum g
 * (torch's _softmax_backward_data / _log_softmax_backward_data). Sums in
 * double, each dx computed in double and rounded once. y of log_softmax is
 * <= 0, so exp_nonpos applies. The same (O, R, I) paths as the forward. */
#define DEF_SOFTMAX_BACKWARD(SUF, T, EXP)                                      \
    /* g, y, dx are (n) */                                                     \
    static void back_row_##SUF(const T *g, const T *y, T *dx, int64_t n, bool log_out) { \
        double s[LANES] = {0};                                                 \
        int64_t i = 0;                                                         \
        if (log_out) {                                                         \
            for (; i + LANES <= n; i += LANES) {                               \
                _Pragma("omp simd")                                            \
                for (int j = 0; j < LANES; j++) s[j] += (double)g[i + j];      \
            }                                                                  \
            for (int j = 0; i < n; i++, j++) s[j] += (double)g[i];             \
        } else {                                                               \
            for (; i + LANES <= n; i += LANES) {                               \
                _Pragma("omp simd")                                            \
                for (int j = 0; j < LANES; j++) s[j] += (double)g[i + j] * (double)y[i + j]; \
            }                                                                  \
            for (int j = 0; i < n; i++, j++) s[j] += (double)g[i] * (double)y[i]; \
        }                                                                      \
        for (int w = LANES / 2; w > 0; w /= 2)                                 \
            for (int j = 0; j < w; j++) s[j] += s[j + w];                      \
        double sum = s[0];                                                     \
        if (log_out) {                                                         \
            _Pragma("omp simd")                                                \
            for (i = 0; i < n; i++) dx[i] = (T)((double)g[i] - (double)EXP(y[i]) * sum); \
        } else {                                                               \
            _Pragma("omp simd")                                                \
            for (i = 0; i < n; i++) dx[i] = (T)((double)y[i] * ((double)g[i] - sum)); \
        }                                                                      \
    }                                                                          \
    /* g, y, dx are (R, ld) from a tile's first column; w columns */          \
    static void back_tile_##SUF(const T *g, const T *y, T *dx, int64_t R, int64_t ld, int64_t w, bool log_out) { \
        double s[TILE_I];                                                      \
        for (int64_t c = 0; c < w; c++) s[c] = 0;                              \
        for (int64_t r = 0; r < R; r++) {                                      \
            const T *gr = g + r * ld, *yr = y + r * ld;                        \
            if (log_out)                                                       \
                for (int64_t c = 0; c < w; c++) s[c] += (double)gr[c];         \
            else                                                               \
                for (int64_t c = 0; c < w; c++) s[c] += (double)gr[c] * (double)yr[c]; \
        }                                                                      \
        for (int64_t r = 0; r < R; r++) {                                      \
            const T *gr = g + r * ld, *yr = y + r * ld;                        \
            T *o = dx + r * ld;                                                \
            if (log_out)                                                       \
                for (int64_t c = 0; c < w; c++) o[c] = (T)((double)gr[c] - (double)EXP(yr[c]) * s[c]); \
            else                                                               \
                for (int64_t c = 0; c < w; c++) o[c] = (T)((double)yr[c] * ((double)gr[c] - s[c])); \
        }                                                                      \
    }                                                                          \
    static void back_run_##SUF(const T *g, const T *y, T *dx, int64_t O, int64_t R, int64_t I, bool log_out) { \
        bool par = O * R * I >= JAG_GRAIN_ROWS;                                \
        if (I == 1) {                                                          \
            JAG_PARALLEL_IF(par, "omp parallel for schedule(static)",          \
                for (int64_t o = 0; o < O; o++) back_row_##SUF(g + o * R, y + o * R, dx + o * R, R, log_out);); \
            return;                                                            \
        }                                                                      \
        int64_t tw = TILE_I;                                                   \
        while (par && tw > TILE_MIN && O * ((I + tw - 1) / tw) < jag_get_num_threads()) tw /= 2; \
        int64_t nb = (I + tw - 1) / tw;                                        \
        JAG_PARALLEL_IF(par, "omp parallel for schedule(static)",              \
        for (int64_t t = 0; t < O * nb; t++) {                                 \
            int64_t o = t / nb, c0 = (t % nb) * tw, off = o * R * I + c0;      \
            int64_t w = I - c0 < tw ? I - c0 : tw;                             \
            back_tile_##SUF(g + off, y + off, dx + off, R, I, w, log_out);     \
        });                                                                     \
    }

DEF_SOFTMAX_BACKWARD(f32, float, exp_nonpos_f32)
DEF_SOFTMAX_BACKWARD(f64, double, exp_nonpos_f64)

/* ---- kernels ------------------------------------------------------------- */

/* (O, R, I) sizes of x around dim (1 for a 0-d tensor). */
static void split_dims(const jag_tensor *x, int dim, int64_t *O, int64_t *R, int64_t *I) {
    *O = jag__numel(x->sizes, x->ndim ? dim : 0);
    *R = x->ndim ? x->sizes[dim] : 1;
    *I = x->ndim ? jag__numel(x->sizes + dim + 1, x->ndim - dim - 1) : 1;
}

/* Softmax down a middle dim of a contiguous float x as the ragged engine's
 * uniform segments (ragged_kernels.h); false when it did not run (out of
 * memory: the tiles below need none). One call, 2 threads, float32, over
 * dim 1: (1, 1000, 64) 68 -> 22 us, (32, 128, 256) 566 -> 208 us. */
static bool softmax_by_segments(const jag_tensor *x, int dim, bool log_softmax, jag_tensor *y) {
    if (!jag__dense_segments_apply(x, dim, JAG_SEGMENTS_MIN)) return false;
    const char *op = log_softmax ? "jag_log_softmax" : "jag_softmax";
    jag_tensor *values = NULL;
    jag_ragged_rows rows;
    int64_t *offsets = NULL;
    if (jag__dense_as_segments(op, x, dim, &values, &rows, &offsets)) return false;
    jag_status st = jag__ragged_softmax_kernel(op, values, &rows, log_softmax, y);
    jag_release(values);
    free(offsets);
    return st == JAG_OK;
}

void jag__softmax_kernel(const jag_tensor *x, int dim, bool log_softmax, jag_tensor *y) {
    if (jag_numel(x) == 0 || softmax_by_segments(x, dim, log_softmax, y)) return;
    int64_t O, R, I;
    split_dims(x, dim, &O, &R, &I);
    const jag_tensor *src = x;
    if (!jag_is_contiguous(x)) { /* copy into y, then work in place */
        jag__copy_into(y, x);
        src = y;
    }
    if (x->dtype == JAG_FLOAT32)
        run_f32((const float *)jag__ptr(src), (float *)jag__ptr(y), O, R, I, log_softmax);
    else
        run_f64((const double *)jag__ptr(src), (double *)jag__ptr(y), O, R, I, log_softmax);
}

/* A tensor as contiguous data of its own dtype: *tmp holds a copy when one
 * was needed (release it). */
static jag_status contiguous_data(const char *op, const jag_tensor *t, jag_tensor **tmp, const void **p) {
    *tmp = NULL;
    if (!jag_is_contiguous(t)) {
        *tmp = jag__tensor_new(op, t->sizes, t->ndim, t->dtype, false, false);
        if (!*tmp) return jag_last_status();
        jag__copy_into(*tmp, t);
        t = *tmp;
    }
    *p = jag__ptr(t);
    return JAG_OK;
}

jag_status jag__softmax_backward_kernel(const char *op, const jag_tensor *g, const jag_tensor *y, int dim,
                                        bool log_softmax, jag_tensor *dx) {
    if (jag_numel(y) == 0) return JAG_OK;
    int64_t O, R, I;
    split_dims(y, dim, &O, &R, &I);
    jag_tensor *tg = NULL, *ty = NULL;
    const void *gp = NULL, *yp = NULL;
    jag_status st;
    if (!(st = contiguous_data(op, g, &tg, &gp)) && !(st = contiguous_data(op, y, &ty, &yp))) {
        if (y->dtype == JAG_FLOAT32) back_run_f32(gp, yp, (float *)jag__ptr(dx), O, R, I, log_softmax);
        else back_run_f64(gp, yp, (double *)jag__ptr(dx), O, R, I, log_softmax);
    }
    jag_release(tg);
    jag_release(ty);
    return st;
}

/* ---- naive references ---------------------------------------------------- */

/* One line at a time through double and libm, reading x by its strides. */
void jag__softmax_reference(const jag_tensor *x, int dim, bool log_softmax, jag_tensor *y) {
    int64_t O, R, I;
    split_dims(x, dim, &O, &R, &I);
    /* Strides of the (O, R, I) view are not uniform for a strided x, so
     * every element goes through its full index. */
    size_t es = jag_dtype_size(x->dtype);
    for (int64_t o = 0; o < O; o++) {
        for (int64_t i = 0; i < I; i++) {
            double m = -INFINITY, s = 0;
            for (int pass = 0; pass < 3; pass++) {
                for (int64_t r = 0; r < R; r++) {
                    int64_t lin = (o * R + r) * I + i, off = 0, rest = lin;
                    for (int d = x->ndim - 1; d >= 0; d--) {
                        off += (rest % x->sizes[d]) * x->strides[d];
                        rest /= x->sizes[d];
                    }
                    double v = jag__load_as_double(jag__ptr(x) + off * (int64_t)es, x->dtype);
                    if (pass == 0) m = (isnan(v) || v > m || isnan(m)) ? (isnan(m) ? m : v) : m;
                    else if (pass == 1) s += exp(v - m);
                    else
                        jag__store_from_double(jag__ptr(y) + lin * (int64_t)es, y->dtype,
                                               log_softmax ? (v - m) - log(s) : exp(v - m) / s);
                }
            }
        }
    }
}

/* Element `lin` (row-major) of t, through double. */
static double ref_at(const jag_tensor *t, int64_t lin) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (lin % t->sizes[d]) * t->strides[d];
        lin /= t->sizes[d];
    }
    return jag__load_as_double(jag__ptr(t) + off * (int64_t)jag_dtype_size(t->dtype), t->dtype);
}

/* The backward ops one line at a time through double and libm, reading g
 * and y by their strides. */
void jag__softmax_backward_reference(const jag_tensor *g, const jag_tensor *y, int dim, bool log_softmax,
                                     jag_tensor *dx) {
    int64_t O, R, I;
    split_dims(y, dim, &O, &R, &I);
    size_t es = jag_dtype_size(y->dtype);
    for (int64_t o = 0; o < O; o++) {
        for (int64_t i = 0; i < I; i++) {
            double s = 0;
            for (int64_t r = 0; r < R; r++) {
                int64_t lin = (o * R + r) * I + i;
                s += log_softmax ? ref_at(g, lin) : ref_at(g, lin) * ref_at(y, lin);
            }
            for (int64_t r = 0; r < R; r++) {
                int64_t lin = (o * R + r) * I + i;
                double gv = ref_at(g, lin), yv = ref_at(y, lin);
                jag__store_from_double(jag__ptr(dx) + lin * (int64_t)es, y->dtype,
                                       log_softmax ? gv - exp(yv) * s : yv * (gv - s));
            }
        }
    }
}
