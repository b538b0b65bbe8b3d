/*
 * norm.c — layer_norm and rms_norm over the trailing dims, the forms that
 * also return their row statistics (native_layer_norm, native_rms_norm),
 * their fused backward ops and naive references (typed kernels; the ops'
 * META functions and boxed adapters are src/dispatch/norm_op.c).
 *
 * x is viewed as (N, D): D is the product of the trailing normalized_ndim
 * sizes. Each row's statistics accumulate in float64 with LANES independent
 * accumulators (vectorised, stable for long rows; the variance is biased as
 * torch's). layer_norm on float32 takes one pass, the sums of x - x0 and its
 * square with x0 the row's first value (exact differences in double); on
 * float64 two passes, the mean then the squared deviations. The transform
 * (x - mean) * rstd * w + b runs in double and rounds once to x's dtype.
 * Threads share rows, from JAG_GRAIN_ROWS elements on (src/core/internal.h).
 * float32 layer_norm on AVX-512 and AVX2 writes an output of
 * JAG_STREAM_MIN_BYTES or more with streaming stores (rows of whole
 * vectors; the same bits).
 * A non-contiguous x is first copied into out and normalised in place;
 * weight and bias are read as contiguous doubles (a converted copy when
 * needed, once per call).
 */
#include "kernels.h"
#include "lanes.h"
#include "stream.h"

#include <math.h>

#define LANES 16

/* a * b + c, fused where the target has a fused multiply-add (one op and
 * one rounding in double instead of two), else the plain form; the
 * statistics and the transform stay in double either way. */
#ifdef FP_FAST_FMA
#define FMA(a, b, c) fma(a, b, c)
#else
#define FMA(a, b, c) ((a) * (b) + (c))
#endif

/* The sum of a row's LANES partial sums, as a tree of independent adds that
 * stay in registers (a loop of in-place halvings went through memory, a
 * stall per row). */
static inline double lane_sum(const double *s) {
    double a[LANES / 2];
    for (int j = 0; j < LANES / 2; j++) a[j] = s[j] + s[j + LANES / 2];
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* ---- kernels, per float type --------------------------------------------- */

/* The affine parameters arrive as double (D each, or NULL): converted once
 * per call for float32 rather than once per row. inv_d is 1 / D: a multiply
 * where a division would lengthen each row's chain of dependent steps. */
#define DEF_NORM(SUF, T)                                                       \
    /* x, y are (D); w, b are (D) or NULL; x may equal y */                    \
    static void layer_stats_##SUF(const T *x, int64_t D, double inv_d, double *mean_out, double *var_out) { \
        double s[2 * LANES] = {0}, q[2 * LANES] = {0}, mean, var;              \
        int64_t i = 0;                                                         \
        if (sizeof(T) == 4) {                                                  \
            /* one pass: the sums of d = x - x0 and d^2, x0 the first value. \
             * d is exact in double, and as x0 is one of the values, (mean - \
             * x0)^2 is at most D times the variance: sum d^2 - (sum d)^2 / D \
             * loses at most log2(D) of double's 53 bits. 2 * LANES sums:    \
             * twice as many independent chains of adds */                    \
            const double x0 = (double)x[0];                                    \
            for (; i + 2 * LANES <= D; i += 2 * LANES) {                       \
                _Pragma("omp simd")                                            \
                for (int j = 0; j < 2 * LANES; j++) {                          \
                    double d = (double)x[i + j] - x0;                          \
                    s[j] += d, q[j] = FMA(d, d, q[j]);                         \
                }                                                              \
            }                                                                  \
            for (int j = 0; i < D; i++, j++) {                                 \
                double d = (double)x[i] - x0;                                  \
                s[j] += d, q[j] = FMA(d, d, q[j]);                             \
            }                                                                  \
            for (int j = 0; j < LANES; j++) s[j] += s[j + LANES], q[j] += q[j + LANES]; \
            double s1 = lane_sum(s), m2 = lane_sum(q) - s1 * (s1 * inv_d);     \
            mean = x0 + s1 * inv_d;                                            \
            var = (m2 < 0 ? 0 : m2) * inv_d + (x0 - x0); /* NaN stays: inf or NaN anywhere */ \
        } else { /* float64: two passes, the mean then the squared deviations */ \
            for (; i + LANES <= D; i += LANES) {                               \
                _Pragma("omp simd")                                            \
                for (int j = 0; j < LANES; j++) s[j] += (double)x[i + j];      \
            }                                                                  \
            for (int j = 0; i < D; i++, j++) s[j] += (double)x[i];             \
            mean = lane_sum(s) * inv_d;                                        \
            for (i = 0; i + LANES <= D; i += LANES) {                          \
                _Pragma("omp simd")                                            \
                for (int j = 0; j < LANES; j++) {                              \
                    double d = (double)x[i + j] - mean;                        \
                    q[j] += d * d;                                             \
                }                                                              \
            }                                                                  \
            for (int j = 0; i < D; i++, j++) {                                 \
                double d = (double)x[i] - mean;                                \
                q[j] += d * d;                                                 \
            }                                                                  \
            var = lane_sum(q) * inv_d;                                         \
        }                                                                      \
        *mean_out = mean, *var_out = var;                                      \
    }                                                                          \
    /* x, y are (D); w, b are (D) or NULL; x may equal y; the row's mean and  \
     * 1 / sqrt(var + eps) go to *mo and *ro when they are not NULL */       \
    static void layer_row_##SUF(const T *x, T *y, const double *w, const double *b, int64_t D, double inv_d, double eps, \
                                T *mo, T *ro) {                                \
        double mean, var;                                                      \
        int64_t i;                                                             \
        layer_stats_##SUF(x, D, inv_d, &mean, &var);                           \
        /* x - mean in float64: for offset data (|mean| >> std) a mean     \
         * rounded to float32 would cost several digits */                   \
        double rstd = 1.0 / sqrt(var + eps), shift = -mean * rstd;             \
        if (mo) *mo = (T)mean, *ro = (T)rstd;                                  \
        /* with w and b: (x - mean) rstd as x rstd - mean rstd, one fused   \
         * multiply-add in double: its error is that of mean rstd, 2^-53    \
         * |mean| / std, below float32's rounding while float32 values can  \
         * tell apart deviations of one std (|mean| / std < 2^24) */        \
        if (w && b)                                                            \
            for (i = 0; i < D; i++) y[i] = (T)FMA(FMA((double)x[i], rstd, shift), w[i], b[i]); \
        else if (w)                                                            \
            for (i = 0; i < D; i++) y[i] = (T)(((double)x[i] - mean) * rstd * w[i]); \
        else if (b)                                                            \
            for (i = 0; i < D; i++) y[i] = (T)(((double)x[i] - mean) * rstd + b[i]); \
        else                                                                   \
            for (i = 0; i < D; i++) y[i] = (T)(((double)x[i] - mean) * rstd);  \
    }                                                                          \
    /* x, y are (D); w is (D) or NULL; x may equal y */                        \
    /* 1 / sqrt(mean(x^2) + eps) of a row x (D) */                           \
    static double rms_rstd_##SUF(const T *x, int64_t D, double inv_d, double eps) { \
        double q[LANES] = {0};                                                 \
        int64_t i = 0;                                                         \
        for (; i + LANES <= D; i += LANES) {                                   \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) q[j] += (double)x[i + j] * (double)x[i + j]; \
        }                                                                      \
        for (int j = 0; i < D; i++, j++) q[j] += (double)x[i] * (double)x[i]; \
        return 1.0 / sqrt(lane_sum(q) * inv_d + eps);                          \
    }                                                                          \
    static void rms_row_##SUF(const T *x, T *y, const double *w, int64_t D, double inv_d, double eps, T *ro) { \
        int64_t i;                                                             \
        double r = rms_rstd_##SUF(x, D, inv_d, eps);                           \
        if (ro) *ro = (T)r;                                                    \
        if (w)                                                                 \
            for (i = 0; i < D; i++) y[i] = (T)((double)x[i] * r * w[i]);       \
        else                                                                   \
            for (i = 0; i < D; i++) y[i] = (T)((double)x[i] * r);              \
    }                                                                          \
    /* mo, ro: (N) row statistics, or NULL */                                \
    __attribute__((unused)) /* float32 on AVX-512, AVX2: vec_layer_run_f32 */ \
    static void layer_run_##SUF(const T *x, T *y, const double *w, const double *b, int64_t N, int64_t D, double eps, \
                                T *mo, T *ro) {                                \
        JAG_PARALLEL_IF(N * D >= JAG_GRAIN_ROWS, "omp parallel for schedule(static)", \
            for (int64_t n = 0; n < N; n++)                                    \
                layer_row_##SUF(x + n * D, y + n * D, w, b, D, 1.0 / (double)D, eps, mo ? mo + n : NULL, \
                                ro ? ro + n : NULL););                         \
    }                                                                          \
    static void rms_run_##SUF(const T *x, T *y, const double *w, int64_t N, int64_t D, double eps, T *ro) { \
        JAG_PARALLEL_IF(N * D >= JAG_GRAIN_ROWS, "omp parallel for schedule(static)", \
            for (int64_t n = 0; n < N; n++)                                    \
                rms_row_##SUF(x + n * D, y + n * D, w, D, 1.0 / (double)D, eps, ro ? ro + n : NULL);); \
    }

DEF_NORM(f32, float)
DEF_NORM(f64, double)

#if defined(__AVX512F__)
#include <immintrin.h>

/* ---- float32 layer_norm on AVX-512 ------------------------------------------
 *
 * The same arithmetic as layer_stats_f32 and layer_row_f32 above, in the
 * same order (they stay the path of other targets; the two gave the same
 * bits on rows of 1 to 1024 floats, with and without weight and bias),
 * written so that (a) each float is widened by one vcvtps2pd from
 * memory and narrowed by one vcvtpd2ps into a 32-byte store (gcc's loops
 * added an extract or an insert per 16 floats), and (b) the statistics of
 * row n + 1 are issued before the transform of row n, so the end of each
 * row's dependent chain (the lane sums, sqrt, the division: about 60
 * cycles, a fifth of a row of 256) overlaps the previous row's
 * transform instead of stalling it. 2 * LANES accumulators as there, each
 * a vector of 8 doubles, the tail masked into the lanes the scalar tail
 * loop uses. */

/* x (D): the row's mean and biased variance, as layer_stats_f32 */
static inline void av_layer_stats(const float *x, int64_t D, double inv_d, double *mean_out, double *var_out) {
    const double x0 = (double)x[0];
    const __m512d x0v = _mm512_set1_pd(x0), nx0v = _mm512_set1_pd(-x0), one = _mm512_set1_pd(1.0);
    __m512d s[4], q[4];
    for (int j = 0; j < 4; j++) s[j] = q[j] = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= D; i += 32)
        for (int j = 0; j < 4; j++) {
            /* x - x0 as fma(x, 1, -x0): the same rounding, on the multiply
             * pipes, beside the conversions and adds (5% faster here) */
            __m512d d = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8 * j)), one, nx0v);
            s[j] = _mm512_add_pd(s[j], d);
            q[j] = _mm512_fmadd_pd(d, d, q[j]);
        }
    for (int j = 0; i + 8 * j < D; j++) { /* the tail: lanes past D add 0 */
        int64_t left = D - i - 8 * j;
        __mmask8 m = (__mmask8)(left >= 8 ? 0xff : (1u << left) - 1);
        __m512d d = _mm512_maskz_sub_pd(m, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i + 8 * j)), x0v);
        s[j] = _mm512_add_pd(s[j], d);
        q[j] = _mm512_fmadd_pd(d, d, q[j]);
    }
    double sa[16], qa[16];
    _mm512_storeu_pd(sa, _mm512_add_pd(s[0], s[2]));
    _mm512_storeu_pd(sa + 8, _mm512_add_pd(s[1], s[3]));
    _mm512_storeu_pd(qa, _mm512_add_pd(q[0], q[2]));
    _mm512_storeu_pd(qa + 8, _mm512_add_pd(q[1], q[3]));
    double s1 = lane_sum(sa), m2 = lane_sum(qa) - s1 * (s1 * inv_d);
    *mean_out = x0 + s1 * inv_d;
    *var_out = (m2 < 0 ? 0 : m2) * inv_d + (x0 - x0); /* NaN stays */
}

/* y = the transform of x (D floats) as layer_row_f32's, 8 at a time: whole
 * vectors, then the tail masked. stream: whole vectors only, y 32-byte
 * aligned, stored past the caches (jag__stream_stores) */
#define AV_TRANSFORM(W, B)                                                     \
    do {                                                                       \
        int64_t i = 0;                                                         \
        if (stream)                                                            \
            for (; i + 8 <= D; i += 8) {                                       \
                __m512d xv = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));          \
                _mm256_stream_ps(y + i, _mm512_cvtpd_ps(AV_FORM(xv, W(0xff), B(0xff)))); \
            }                                                                  \
        for (; i + 8 <= D; i += 8) {                                           \
            __m512d xv = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));              \
            _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(AV_FORM(xv, W(0xff), B(0xff)))); \
        }                                                                      \
        if (i < D) {                                                           \
            __mmask8 m = (__mmask8)((1u << (D - i)) - 1);                      \
            __m512d xv = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i));     \
            _mm256_mask_storeu_ps(y + i, m, _mm512_cvtpd_ps(AV_FORM(xv, W(m), B(m)))); \
        }                                                                      \
    } while (0)
static inline void av_layer_transform(const float *x, float *y, const double *w, const double *b, int64_t D,
                                      double mean, double rstd, bool stream) {
    const __m512d mv = _mm512_set1_pd(mean), rv = _mm512_set1_pd(rstd), sv = _mm512_set1_pd(-mean * rstd);
#define WL(m) _mm512_maskz_loadu_pd(m, w + i)
#define BL(m) _mm512_maskz_loadu_pd(m, b + i)
#define NONE(m) rv
    if (w && b) {
#define AV_FORM(xv, wv, bv) _mm512_fmadd_pd(_mm512_fmadd_pd(xv, rv, sv), wv, bv)
        AV_TRANSFORM(WL, BL);
#undef AV_FORM
    } else if (w) {
#define AV_FORM(xv, wv, bv) _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(xv, mv), rv), wv)
        AV_TRANSFORM(WL, NONE);
#undef AV_FORM
    } else if (b) {
#define AV_FORM(xv, wv, bv) _mm512_add_pd(_mm512_mul_pd(_mm512_sub_pd(xv, mv), rv), bv)
        AV_TRANSFORM(NONE, BL);
#undef AV_FORM
    } else {
#define AV_FORM(xv, wv, bv) _mm512_mul_pd(_mm512_sub_pd(xv, mv), rv)
        AV_TRANSFORM(NONE, NONE);
#undef AV_FORM
    }
#undef WL
#undef BL
#undef NONE
}
#undef AV_TRANSFORM

/* 8 floats at p widened to double; 8 doubles narrowed to floats at p; the
 * lanes of k alone (k = 0xff: a plain load or store, 1-3% faster than the
 * masked forms in av_layer_back_rows4) */
static inline __m512d av_load_ps(__mmask8 k, const float *p) {
    return _mm512_cvtps_pd(k == 0xff ? _mm256_loadu_ps(p) : _mm256_maskz_loadu_ps(k, p));
}
static inline __m512d av_load_pd(__mmask8 k, const double *p) {
    return k == 0xff ? _mm512_loadu_pd(p) : _mm512_maskz_loadu_pd(k, p);
}
static inline void av_store_ps(__mmask8 k, float *p, __m512d v) {
    if (k == 0xff) _mm256_storeu_ps(p, _mm512_cvtpd_ps(v));
    else _mm256_mask_storeu_ps(p, k, _mm512_cvtpd_ps(v));
}
static inline void av_store_pd(__mmask8 k, double *p, __m512d v) {
    if (k == 0xff) _mm512_storeu_pd(p, v);
    else _mm512_mask_storeu_pd(p, k, v);
}

/* columns [i, i + 8) of four rows: the sums of h = g w and h xhat into sa,
 * sb (a vector a row), dw += sum of g xhat, db += sum of g */
static inline __attribute__((always_inline)) void av_back_sums(__mmask8 k, int64_t i, const float *x, const float *g,
                                                               const double *w, int64_t D, const __m512d *nm,
                                                               const __m512d *rv, __m512d *sa, __m512d *sb,
                                                               double *dw, double *db) {
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d wv = av_load_pd(k, w + i), gv[4], xh[4];
    for (int q = 0; q < 4; q++) {
        gv[q] = av_load_ps(k, g + q * D + i);
        /* (x - mean) rstd, x - mean as fma(x, 1, -mean): the same rounding */
        xh[q] = _mm512_mul_pd(_mm512_fmadd_pd(av_load_ps(k, x + q * D + i), one, nm[q]), rv[q]);
        __m512d h = _mm512_mul_pd(gv[q], wv);
        sa[q] = _mm512_add_pd(sa[q], h);
        sb[q] = _mm512_fmadd_pd(h, xh[q], sb[q]);
    }
    __m512d t = _mm512_add_pd(_mm512_fmadd_pd(gv[0], xh[0], _mm512_mul_pd(gv[1], xh[1])),
                              _mm512_fmadd_pd(gv[2], xh[2], _mm512_mul_pd(gv[3], xh[3])));
    __m512d u = _mm512_add_pd(_mm512_add_pd(gv[0], gv[1]), _mm512_add_pd(gv[2], gv[3]));
    av_store_pd(k, dw + i, _mm512_add_pd(av_load_pd(k, dw + i), t));
    av_store_pd(k, db + i, _mm512_add_pd(av_load_pd(k, db + i), u));
}

/* columns [i, i + 8) of one row: dx = rstd ((g w - a) - xhat b) */
static inline __attribute__((always_inline)) void av_back_dx(__mmask8 k, int64_t i, const float *x, const float *g,
                                                             float *dx, const double *w, __m512d nm, __m512d rv,
                                                             __m512d av, __m512d bv) {
    __m512d xh = _mm512_mul_pd(_mm512_fmadd_pd(av_load_ps(k, x + i), _mm512_set1_pd(1.0), nm), rv);
    __m512d gw = _mm512_fmsub_pd(av_load_ps(k, g + i), av_load_pd(k, w + i), av);
    av_store_ps(k, dx + i, _mm512_mul_pd(rv, _mm512_fnmadd_pd(xh, bv, gw)));
}

/* columns [i, i + 8) of four rows whose statistics are not known yet: d =
 * x - x0 (x0 the row's first value, d exact in double), the sums of d and
 * d^2 (av_layer_stats' statistics), of h = g w and of h d (a vector a row
 * each), and db += the sum of g */
static inline __attribute__((always_inline)) void av_back_sums_raw(__mmask8 k, int64_t i, const float *x,
                                                                   const float *g, const double *w, int64_t D,
                                                                   const __m512d *x0, __m512d *s1, __m512d *s2,
                                                                   __m512d *sa, __m512d *sh, double *db) {
    __m512d wv = av_load_pd(k, w + i), u = _mm512_setzero_pd();
    for (int q = 0; q < 4; q++) {
        __m512d gv = av_load_ps(k, g + q * D + i);
        __m512d d = _mm512_maskz_sub_pd(k, av_load_ps(k, x + q * D + i), x0[q]); /* masked lanes 0 */
        s1[q] = _mm512_add_pd(s1[q], d);
        s2[q] = _mm512_fmadd_pd(d, d, s2[q]);
        __m512d h = _mm512_mul_pd(gv, wv);
        sa[q] = _mm512_add_pd(sa[q], h);
        sh[q] = _mm512_fmadd_pd(h, d, sh[q]);
        u = q ? _mm512_add_pd(u, gv) : gv;
    }
    av_store_pd(k, db + i, _mm512_add_pd(av_load_pd(k, db + i), u));
}

/* columns [i, i + 8) of four rows, their a = mean(h) and b = mean(h xhat)
 * known: dx = rstd ((g w - a) - xhat b), dw += the sum of g xhat */
static inline __attribute__((always_inline)) void av_back_dx4(__mmask8 k, int64_t i, const float *x, const float *g,
                                                              float *dx, const double *w, int64_t D, const __m512d *nm,
                                                              const __m512d *rv, const __m512d *av, const __m512d *bv,
                                                              double *dw) {
    __m512d wv = av_load_pd(k, w + i), t = _mm512_setzero_pd();
    for (int q = 0; q < 4; q++) {
        __m512d gv = av_load_ps(k, g + q * D + i);
        __m512d xh = _mm512_mul_pd(_mm512_fmadd_pd(av_load_ps(k, x + q * D + i), _mm512_set1_pd(1.0), nm[q]), rv[q]);
        av_store_ps(k, dx + q * D + i, _mm512_mul_pd(rv[q], _mm512_fnmadd_pd(xh, bv[q], _mm512_fmsub_pd(gv, wv, av[q]))));
        t = _mm512_fmadd_pd(gv, xh, t);
    }
    av_store_pd(k, dw + i, _mm512_add_pd(av_load_pd(k, dw + i), t));
}

/* layer_back_rows4_f32 (below) on AVX-512: the same sums and dx for four
 * rows (n .. n + 3) in double, 8 columns a vector, written so that each
 * float is widened by one vcvtps2pd from memory and dx narrowed by one
 * vcvtpd2ps into a 32-byte store, with a fused multiply-add wherever the
 * formula has a product added (the build keeps -ffp-contract=off, so the
 * plain loops pay a multiply and an add), whole vectors in the loop and
 * the masked tail after it. layer_norm forward and backward of (2048,
 * 256) floats: 328 -> 265 us; of (300, 37): 39 -> 28 us. The sums take
 * one vector a row and add their lanes at the end, so the bits differ
 * from the plain loop's, within the same bound of the reference
 * (test_norm). The columns past D are masked: g loads as 0, so they add
 * nothing.
 *
 * Without the statistics (mean, rstd NULL: layer_norm keeps none), the
 * first pass also takes the statistics' sums around each row's first
 * value x0, as av_layer_stats, so that the rows are not read once more for
 * them: with d = x - x0, sum h xhat = rstd (sum h d - (mean - x0) sum h),
 * where |mean - x0| <= sqrt(D) std (x0 is one of the values), so the
 * difference loses at most log2(D) / 2 + a few of double's 53 bits; dw
 * then goes in the second pass, with dx. layer_norm forward and backward
 * of (2048, 256) floats: 287 -> 264 us; of (8192, 256): 1078-1143 -> 977-989
 * us (the two builds run in turn). test_norm_backward_offset_rows is
 * the case for the shift. */
static void av_layer_back_rows4(const float *x, const float *g, float *dx, const double *w, const double *mean,
                                const double *rstd, int64_t D, double inv_d, double eps, double *dw, double *db, bool pf) {
    __m512d nm[4], rv[4], sa[4], sb[4], av[4], bv[4];
    int64_t i = 0;
    if (!rstd) {
        __m512d x0[4], s1[4], s2[4];
        for (int q = 0; q < 4; q++)
            x0[q] = _mm512_set1_pd((double)x[q * D]), s1[q] = s2[q] = sa[q] = sb[q] = _mm512_setzero_pd();
        for (; i + 8 <= D; i += 8) {
            if (pf && i % 16 == 0)
                for (int q = 4; q < 8; q++) __builtin_prefetch(x + q * D + i), __builtin_prefetch(g + q * D + i);
            av_back_sums_raw(0xff, i, x, g, w, D, x0, s1, s2, sa, sb, db);
        }
        if (i < D) av_back_sums_raw((__mmask8)((1u << (D - i)) - 1), i, x, g, w, D, x0, s1, s2, sa, sb, db);
        for (int q = 0; q < 4; q++) {
            double f = (double)x[q * D], t1 = _mm512_reduce_add_pd(s1[q]), dm = t1 * inv_d;
            double m2 = _mm512_reduce_add_pd(s2[q]) - t1 * dm, var = (m2 < 0 ? 0 : m2) * inv_d + (f - f); /* NaN stays */
            double r = 1.0 / sqrt(var + eps), ha = _mm512_reduce_add_pd(sa[q]);
            nm[q] = _mm512_set1_pd(-(f + dm)), rv[q] = _mm512_set1_pd(r);
            av[q] = _mm512_set1_pd(ha * inv_d), bv[q] = _mm512_set1_pd(r * (_mm512_reduce_add_pd(sb[q]) - dm * ha) * inv_d);
        }
        for (i = 0; i + 8 <= D; i += 8) av_back_dx4(0xff, i, x, g, dx, w, D, nm, rv, av, bv, dw);
        if (i < D) av_back_dx4((__mmask8)((1u << (D - i)) - 1), i, x, g, dx, w, D, nm, rv, av, bv, dw);
        return;
    }
    for (int q = 0; q < 4; q++)
        nm[q] = _mm512_set1_pd(-mean[q]), rv[q] = _mm512_set1_pd(rstd[q]), sa[q] = sb[q] = _mm512_setzero_pd();
    for (; i + 8 <= D; i += 8) {
        if (pf && i % 16 == 0) /* the next four rows, a line of each */
            for (int q = 4; q < 8; q++) __builtin_prefetch(x + q * D + i), __builtin_prefetch(g + q * D + i);
        av_back_sums(0xff, i, x, g, w, D, nm, rv, sa, sb, dw, db);
    }
    if (i < D) av_back_sums((__mmask8)((1u << (D - i)) - 1), i, x, g, w, D, nm, rv, sa, sb, dw, db);
    for (int q = 0; q < 4; q++) {
        __m512d a = _mm512_set1_pd(_mm512_reduce_add_pd(sa[q]) * inv_d), b = _mm512_set1_pd(_mm512_reduce_add_pd(sb[q]) * inv_d);
        const float *xq = x + q * D, *gq = g + q * D;
        float *dq = dx + q * D;
        for (i = 0; i + 8 <= D; i += 8) av_back_dx(0xff, i, xq, gq, dq, w, nm[q], rv[q], a, b);
        if (i < D) av_back_dx((__mmask8)((1u << (D - i)) - 1), i, xq, gq, dq, w, nm[q], rv[q], a, b);
    }
}

#define VEC_LAYER_STATS av_layer_stats
#define VEC_LAYER_TRANSFORM av_layer_transform
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* 4 floats at p widened, 4 doubles at p, 4 doubles narrowed to floats at p
 * and 4 doubles stored at p: lanes [0, n) alone, the others load as 0 (n =
 * 4, a constant in the loops: plain loads and stores) */
static inline __m256d v2_load_ps(int64_t n, const float *p) {
    return _mm256_cvtps_pd(n >= 4 ? _mm_loadu_ps(p) : _mm_maskload_ps(p, jag__mask_first4_epi32(n)));
}
static inline __m256d v2_load_pd(int64_t n, const double *p) {
    return n >= 4 ? _mm256_loadu_pd(p) : _mm256_maskload_pd(p, jag__mask_first4_epi64(n));
}
static inline void v2_store_ps(int64_t n, float *p, __m256d v) { jag__store_first4_ps(p, _mm256_cvtpd_ps(v), n); }
static inline void v2_store_pd(int64_t n, double *p, __m256d v) { jag__store_first4_pd(p, v, n); }
static inline double v2_hsum(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* ---- float32 layer_norm on AVX2 ---------------------------------------------
 *
 * The AVX-512 section's forward (av_layer_stats, av_layer_transform and the
 * pipelined rows of vec_layer_run_f32) in vectors of 4 doubles. The generic
 * layer_stats_f32 keeps 2 x 2 x LANES double accumulators, 32 vectors here
 * for 16 registers: gcc spilled them, a load and a store per add. Here the
 * statistics take 4 + 4 vectors (the same arithmetic in another order of
 * the sums, so the bits of mean and rstd may differ from the generic
 * loop's in the last place), and the transform is the generic one's
 * formula. native_layer_norm of (2048, 256) floats with a weight: 166 ->
 * 105 us; of (1024, 1024): 266-296 -> 283-295 us, unchanged (the
 * conversions to and from double bound it: torch, in float, 240-270). */

/* x (D): the row's mean and biased variance, as layer_stats_f32 */
static inline void v2_layer_stats(const float *x, int64_t D, double inv_d, double *mean_out, double *var_out) {
    const double x0 = (double)x[0];
    const __m256d nx0v = _mm256_set1_pd(-x0), one = _mm256_set1_pd(1.0);
    __m256d s[4], q[4];
    for (int j = 0; j < 4; j++) s[j] = q[j] = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= D; i += 16)
        for (int j = 0; j < 4; j++) {
            /* x - x0 as fma(x, 1, -x0): the same rounding, on the multiply
             * pipes, beside the conversions and adds */
            __m256d d = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * j)), one, nx0v);
            s[j] = _mm256_add_pd(s[j], d);
            q[j] = _mm256_fmadd_pd(d, d, q[j]);
        }
    for (int j = 0; i + 4 * j < D; j++) { /* the tail: lanes past D add 0 */
        int64_t left = D - i - 4 * j;
        __m256d d = _mm256_fmadd_pd(v2_load_ps(left, x + i + 4 * j), one, nx0v);
        if (left < 4) d = _mm256_and_pd(d, _mm256_castsi256_pd(jag__mask_first4_epi64(left)));
        s[j] = _mm256_add_pd(s[j], d);
        q[j] = _mm256_fmadd_pd(d, d, q[j]);
    }
    double s1 = v2_hsum(_mm256_add_pd(_mm256_add_pd(s[0], s[2]), _mm256_add_pd(s[1], s[3])));
    double m2 = v2_hsum(_mm256_add_pd(_mm256_add_pd(q[0], q[2]), _mm256_add_pd(q[1], q[3]))) - s1 * (s1 * inv_d);
    *mean_out = x0 + s1 * inv_d;
    *var_out = (m2 < 0 ? 0 : m2) * inv_d + (x0 - x0); /* NaN stays */
}

/* y = the transform of x (D floats) as layer_row_f32's, 4 at a time, the
 * tail masked. stream: whole vectors only, y 16-byte aligned, stored past
 * the caches (jag__stream_stores) */
static inline void v2_layer_transform(const float *x, float *y, const double *w, const double *b, int64_t D,
                                      double mean, double rstd, bool stream) {
    const __m256d mv = _mm256_set1_pd(mean), rv = _mm256_set1_pd(rstd), sv = _mm256_set1_pd(-mean * rstd);
#define V2_TRANSFORM(FORM)                                                     \
    do {                                                                       \
        int64_t i = 0, n = 4;                                                  \
        if (stream)                                                            \
            for (; i + 4 <= D; i += 4) {                                       \
                __m256d xv = v2_load_ps(4, x + i);                             \
                _mm_stream_ps(y + i, _mm256_cvtpd_ps(FORM));                   \
            }                                                                  \
        for (; i + 4 <= D; i += 4) {                                           \
            __m256d xv = v2_load_ps(4, x + i);                                 \
            v2_store_ps(4, y + i, FORM);                                       \
        }                                                                      \
        if (i < D) {                                                           \
            n = D - i;                                                         \
            __m256d xv = v2_load_ps(n, x + i);                                 \
            v2_store_ps(n, y + i, FORM);                                       \
        }                                                                      \
    } while (0)
    if (w && b)
        V2_TRANSFORM(_mm256_fmadd_pd(_mm256_fmadd_pd(xv, rv, sv), v2_load_pd(n, w + i), v2_load_pd(n, b + i)));
    else if (w)
        V2_TRANSFORM(_mm256_mul_pd(_mm256_mul_pd(_mm256_sub_pd(xv, mv), rv), v2_load_pd(n, w + i)));
    else if (b)
        V2_TRANSFORM(_mm256_add_pd(_mm256_mul_pd(_mm256_sub_pd(xv, mv), rv), v2_load_pd(n, b + i)));
    else
        V2_TRANSFORM(_mm256_mul_pd(_mm256_sub_pd(xv, mv), rv));
#undef V2_TRANSFORM
}
#define VEC_LAYER_STATS v2_layer_stats
#define VEC_LAYER_TRANSFORM v2_layer_transform

/* ---- float32 layer_norm backward on AVX2 ------------------------------------
 *
 * av_layer_back_rows4's design (the AVX-512 section above) in vectors of 4
 * doubles, two rows at a time. The generic four-row step keeps 2 x 4 x
 * LANES double accumulators, 32 vectors on a target with 16 registers: gcc
 * spilled them, each add a load and a store per vector (half of
 * layer_norm's forward and backward time, (1024, 1024) floats). Here each
 * sum is one vector a row: a first pass over two rows takes the sums of h
 * = g w and h xhat (with saved statistics) or of d = x - x0, d^2, h and h d
 * (without: 8 accumulators), a second writes their dx and adds into dw and
 * db. Four rows at a time put 12 streams 4 KiB apart when D is 1024 and
 * waited on the cache's ways: layer_norm_backward of (1024, 1024) floats,
 * generic 0.90-1.2 ms, four rows 0.87-0.92, two rows 0.45-0.70 (the three
 * builds in turn). The bits differ from the generic loop's (the order of
 * the sums), within the same bound of the reference (test_norm). */

/* columns [i, i + n) of two rows (x, g and x + D, g + D) whose statistics
 * are not known yet: d = x - x0 (x0 the row's first value, exact in
 * double), the sums of d and d^2 (the forward's statistics, as
 * av_layer_stats), of h = g w and of h d */
static inline __attribute__((always_inline)) void v2_back_sums_raw(int64_t n, int64_t i, const float *x,
                                                                   const float *g, const double *w, int64_t D,
                                                                   const __m256d *x0, __m256d *s1, __m256d *s2,
                                                                   __m256d *sa, __m256d *sh) {
    __m256d wv = v2_load_pd(n, w + i);
    for (int q = 0; q < 2; q++) {
        __m256d d = _mm256_sub_pd(v2_load_ps(n, x + q * D + i), x0[q]);
        if (n < 4) d = _mm256_and_pd(d, _mm256_castsi256_pd(jag__mask_first4_epi64(n))); /* lanes past D: 0 */
        __m256d h = _mm256_mul_pd(v2_load_ps(n, g + q * D + i), wv);
        s1[q] = _mm256_add_pd(s1[q], d);
        s2[q] = _mm256_fmadd_pd(d, d, s2[q]);
        sa[q] = _mm256_add_pd(sa[q], h);
        sh[q] = _mm256_fmadd_pd(h, d, sh[q]);
    }
}

/* columns [i, i + n) of two rows, mean and rstd known (nm = -mean): the
 * sums of h = g w and h xhat */
static inline __attribute__((always_inline)) void v2_back_sums(int64_t n, int64_t i, const float *x, const float *g,
                                                               const double *w, int64_t D, const __m256d *nm,
                                                               const __m256d *rv, __m256d *sa, __m256d *sb) {
    __m256d wv = v2_load_pd(n, w + i);
    for (int q = 0; q < 2; q++) {
        __m256d xh = _mm256_mul_pd(_mm256_add_pd(v2_load_ps(n, x + q * D + i), nm[q]), rv[q]);
        __m256d h = _mm256_mul_pd(v2_load_ps(n, g + q * D + i), wv);
        sa[q] = _mm256_add_pd(sa[q], h);
        sb[q] = _mm256_fmadd_pd(h, xh, sb[q]);
    }
}

/* columns [i, i + n) of two rows, their a = mean(h) and b = mean(h xhat)
 * known: dx = rstd ((g w - a) - xhat b), dw += the sum of g xhat, db +=
 * the sum of g. Both rows' loads come before the first store: with D a
 * multiple of 1024 the rows of x, g and dx lie 4 KiB apart, and a load
 * issued after a store to the same address modulo 4 KiB waits on it. */
static inline __attribute__((always_inline)) void v2_back_dx(int64_t n, int64_t i, const float *x, const float *g,
                                                             float *dx, const double *w, int64_t D, const __m256d *nm,
                                                             const __m256d *rv, const __m256d *av, const __m256d *bv,
                                                             double *dw, double *db) {
    __m256d wv = v2_load_pd(n, w + i), gv[2], xh[2];
    for (int q = 0; q < 2; q++) gv[q] = v2_load_ps(n, g + q * D + i), xh[q] = v2_load_ps(n, x + q * D + i);
    for (int q = 0; q < 2; q++) {
        xh[q] = _mm256_mul_pd(_mm256_add_pd(xh[q], nm[q]), rv[q]);
        v2_store_ps(n, dx + q * D + i, _mm256_mul_pd(rv[q], _mm256_fnmadd_pd(xh[q], bv[q], _mm256_fmsub_pd(gv[q], wv, av[q]))));
    }
    v2_store_pd(n, dw + i, _mm256_add_pd(v2_load_pd(n, dw + i), _mm256_fmadd_pd(gv[0], xh[0], _mm256_mul_pd(gv[1], xh[1]))));
    v2_store_pd(n, db + i, _mm256_add_pd(v2_load_pd(n, db + i), _mm256_add_pd(gv[0], gv[1])));
}

/* layer_back_rows4_f32's job for two rows (x, g, dx: 2 x D), from the
 * saved statistics (mean, rstd: 2 each) or, when they are NULL, the rows'
 * own (see av_layer_back_rows4 for the shift by x0 and its bound); px, pg:
 * two rows to request a line at a time meanwhile, or NULL */
static inline void v2_layer_back_rows2(const float *x, const float *g, float *dx, const double *w, const double *mean,
                                       const double *rstd, int64_t D, double inv_d, double eps, double *dw, double *db,
                                       const float *px, const float *pg) {
    __m256d nm[2], rv[2], av[2], bv[2], sa[2], sb[2];
    int64_t i;
#define V2_PREFETCH()                                                          \
    if (px && i % 16 == 0)                                                     \
        for (int q = 0; q < 2; q++) __builtin_prefetch(px + q * D + i), __builtin_prefetch(pg + q * D + i)
    if (!rstd) {
        __m256d x0[2], s1[2], s2[2];
        for (int q = 0; q < 2; q++)
            x0[q] = _mm256_set1_pd((double)x[q * D]), s1[q] = s2[q] = sa[q] = sb[q] = _mm256_setzero_pd();
        for (i = 0; i + 4 <= D; i += 4) {
            V2_PREFETCH();
            v2_back_sums_raw(4, i, x, g, w, D, x0, s1, s2, sa, sb);
        }
        if (i < D) v2_back_sums_raw(D - i, i, x, g, w, D, x0, s1, s2, sa, sb);
        for (int q = 0; q < 2; q++) {
            double f = (double)x[q * D], t1 = v2_hsum(s1[q]), dm = t1 * inv_d;
            double m2 = v2_hsum(s2[q]) - t1 * dm, var = (m2 < 0 ? 0 : m2) * inv_d + (f - f); /* NaN stays */
            double r = 1.0 / sqrt(var + eps), ha = v2_hsum(sa[q]);
            nm[q] = _mm256_set1_pd(-(f + dm)), rv[q] = _mm256_set1_pd(r);
            av[q] = _mm256_set1_pd(ha * inv_d), bv[q] = _mm256_set1_pd(r * (v2_hsum(sb[q]) - dm * ha) * inv_d);
        }
    } else {
        for (int q = 0; q < 2; q++)
            nm[q] = _mm256_set1_pd(-mean[q]), rv[q] = _mm256_set1_pd(rstd[q]), sa[q] = sb[q] = _mm256_setzero_pd();
        for (i = 0; i + 4 <= D; i += 4) {
            V2_PREFETCH();
            v2_back_sums(4, i, x, g, w, D, nm, rv, sa, sb);
        }
        if (i < D) v2_back_sums(D - i, i, x, g, w, D, nm, rv, sa, sb);
        for (int q = 0; q < 2; q++)
            av[q] = _mm256_set1_pd(v2_hsum(sa[q]) * inv_d), bv[q] = _mm256_set1_pd(v2_hsum(sb[q]) * inv_d);
    }
#undef V2_PREFETCH
    for (i = 0; i + 4 <= D; i += 4) v2_back_dx(4, i, x, g, dx, w, D, nm, rv, av, bv, dw, db);
    if (i < D) v2_back_dx(D - i, i, x, g, dx, w, D, nm, rv, av, bv, dw, db);
}

/* layer_back_rows4_f32's job for rows n .. n + 3, two at a time; pf: the
 * next four rows are requested meanwhile */
static void v2_layer_back_rows4(const float *x, const float *g, float *dx, const double *w, const double *mean,
                                const double *rstd, int64_t D, double inv_d, double eps, double *dw, double *db, bool pf) {
    for (int p = 0; p < 4; p += 2)
        v2_layer_back_rows2(x + p * D, g + p * D, dx + p * D, w, rstd ? mean + p : NULL, rstd ? rstd + p : NULL, D,
                            inv_d, eps, dw, db, pf ? x + (4 + p) * D : NULL, pf ? g + (4 + p) * D : NULL);
}
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
/* float32 layer_norm on AVX-512 or AVX2 (VEC_LAYER_STATS and
 * VEC_LAYER_TRANSFORM are the target's): the statistics of row n + 1 are
 * issued before the transform of row n, so the end of each row's dependent
 * chain (the lane sums, sqrt, the division: about 60 cycles, a fifth of a
 * row of 256) overlaps the previous row's transform instead of stalling
 * it. x, y are (N, D) float32 (x may equal y); mo, ro: (N) row statistics or NULL */
static void vec_layer_run_f32(const float *x, float *y, const double *w, const double *b, int64_t N, int64_t D,
                             double eps, float *mo, float *ro) {
    enum { RB = 8 }; /* rows per block: the pipelining restarts once a block */
    const double inv_d = 1.0 / (double)D;
    const int64_t nb = (N + RB - 1) / RB;
    /* every row's start 32-byte aligned when y's is and D % 8 == 0 */
    const bool stream = D % 8 == 0 && jag__stream_stores(y, N * D * (int64_t)sizeof(float));
    JAG_PARALLEL_IF(N * D >= JAG_GRAIN_ROWS, "omp parallel for schedule(static)",
        for (int64_t blk = 0; blk < nb; blk++) {
            int64_t n0 = blk * RB, n1 = n0 + RB < N ? n0 + RB : N;
            double mean, var;
            VEC_LAYER_STATS(x + n0 * D, D, inv_d, &mean, &var);
            double rstd = 1.0 / sqrt(var + eps);
            for (int64_t n = n0; n < n1; n++) {
                double nmean = 0, nrstd = 0;
                if (n + 1 < n1) { /* the next row's statistics first */
                    double nvar;
                    VEC_LAYER_STATS(x + (n + 1) * D, D, inv_d, &nmean, &nvar);
                    nrstd = 1.0 / sqrt(nvar + eps);
                }
                if (mo) mo[n] = (float)mean, ro[n] = (float)rstd;
                VEC_LAYER_TRANSFORM(x + n * D, y + n * D, w, b, D, mean, rstd, stream);
                mean = nmean, rstd = nrstd;
            }
            if (stream) jag__stream_fence();
        });
}
#endif

/* ---- backward kernels, per float type --------------------------------------
 *
 * A row at a time (layer_norm's four at a time where its block of rows
 * holds them), in double, rounded once: with xhat = (x - mean) rstd
 * and h = g w, layer_norm's dx = rstd (h - mean(h) - xhat mean(h xhat)),
 * rms_norm's dx = rstd (h - x rstd^2 mean(h x)). The statistics are the
 * forward's when given, else the row's own, computed as the forward does
 * (the row is then read from L1 a second time, not from memory; float32's
 * four-row step on AVX-512 takes them in its own first pass). dw and db
 * are sums over rows: each of NBLK fixed blocks of rows (by N alone) adds
 * its rows in order into its own partial sums, and the blocks are added in
 * block order, so the result does not depend on the thread count. w is
 * never NULL here (ones when the op has no weight). */
#define NBLK 64

/* the row statistics and the four-row step of layer_back_run_*: on
 * AVX-512 float32's are the forward's av_layer_stats (the same bits as
 * layer_stats_f32) and av_layer_back_rows4 */
#if defined(__AVX512F__)
#define BACK_STATS_f32 av_layer_stats
#define BACK_ROWS4_f32 av_layer_back_rows4
#elif defined(__AVX2__) && defined(__FMA__)
#define BACK_STATS_f32 v2_layer_stats
#define BACK_ROWS4_f32 v2_layer_back_rows4
#else
#define BACK_STATS_f32 layer_stats_f32
#define BACK_ROWS4_f32 back_rows4_f32
#endif
#define BACK_STATS_f64 layer_stats_f64
#define BACK_ROWS4_f64 back_rows4_f64

#define DEF_NORM_BACKWARD(SUF, T)                                              \
    static void layer_back_row_##SUF(const T *x, const T *g, T *dx, const double *w, double mean, double rstd, \
                                     int64_t D, double inv_d, double *dw, double *db) { \
        double sa[LANES] = {0}, sb[LANES] = {0};                               \
        int64_t i = 0;                                                         \
        for (; i + LANES <= D; i += LANES) {                                   \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) {                                  \
                double gv = (double)g[i + j], xh = ((double)x[i + j] - mean) * rstd, h = gv * w[i + j]; \
                sa[j] += h, sb[j] += h * xh;                                   \
                dw[i + j] += gv * xh, db[i + j] += gv;                         \
            }                                                                  \
        }                                                                      \
        for (int j = 0; i < D; i++, j++) {                                     \
            double gv = (double)g[i], xh = ((double)x[i] - mean) * rstd, h = gv * w[i]; \
            sa[j] += h, sb[j] += h * xh;                                       \
            dw[i] += gv * xh, db[i] += gv;                                     \
        }                                                                      \
        double a = lane_sum(sa) * inv_d, b = lane_sum(sb) * inv_d;             \
        _Pragma("omp simd")                                                    \
        for (i = 0; i < D; i++) {                                              \
            double xh = ((double)x[i] - mean) * rstd;                          \
            dx[i] = (T)(rstd * (((double)g[i] * w[i] - a) - xh * b));          \
        }                                                                      \
    }                                                                          \
    static void rms_back_row_##SUF(const T *x, const T *g, T *dx, const double *w, double r, int64_t D, \
                                   double inv_d, double *dw) {                 \
        double sc[LANES] = {0};                                                \
        int64_t i = 0;                                                         \
        for (; i + LANES <= D; i += LANES) {                                   \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) {                                  \
                double gv = (double)g[i + j], xv = (double)x[i + j];           \
                sc[j] += gv * w[i + j] * xv;                                   \
                dw[i + j] += gv * xv * r;                                      \
            }                                                                  \
        }                                                                      \
        for (int j = 0; i < D; i++, j++) {                                     \
            double gv = (double)g[i], xv = (double)x[i];                       \
            sc[j] += gv * w[i] * xv;                                           \
            dw[i] += gv * xv * r;                                              \
        }                                                                      \
        double k = r * r * (lane_sum(sc) * inv_d);                             \
        _Pragma("omp simd")                                                    \
        for (i = 0; i < D; i++) dx[i] = (T)(r * ((double)g[i] * w[i] - (double)x[i] * k)); \
    }                                                                          \
    /* Four rows at once (n .. n + 3): their sums as layer_back_row's, dw   \
     * and db loaded and stored once for the four ((t0 + t1) + (t2 + t3)    \
     * added), and the next four rows requested a line at a time meanwhile  \
     * (pf), so that their statistics and first pass read from cache: 8192 \
     * x 768 float32 with weight and bias went from 4.1-4.3 to 3.5 ms, the \
     * request being what made the difference. */                          \
    static void layer_back_rows4_##SUF(const T *x, const T *g, T *dx, const double *w, const double *m, \
                                       const double *r, int64_t D, double inv_d, double *dw, double *db, bool pf) { \
        double sa[4][LANES] = {{0}}, sb[4][LANES] = {{0}};                     \
        const T *x0 = x, *x1 = x + D, *x2 = x + 2 * D, *x3 = x + 3 * D;        \
        const T *g0 = g, *g1 = g + D, *g2 = g + 2 * D, *g3 = g + 3 * D;        \
        int64_t i = 0;                                                         \
        for (; i + LANES <= D; i += LANES) {                                   \
            for (int q = 0; q < 4 && pf; q++) /* the next four rows, a line of each */ \
                __builtin_prefetch(x + (4 + q) * D + i), __builtin_prefetch(g + (4 + q) * D + i); \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) {                                  \
                double wv = w[i + j];                                          \
                double ga = (double)g0[i + j], gb = (double)g1[i + j], gc = (double)g2[i + j], gd = (double)g3[i + j]; \
                double xa = ((double)x0[i + j] - m[0]) * r[0], xb = ((double)x1[i + j] - m[1]) * r[1]; \
                double xc = ((double)x2[i + j] - m[2]) * r[2], xd = ((double)x3[i + j] - m[3]) * r[3]; \
                double ha = ga * wv, hb = gb * wv, hc = gc * wv, hd = gd * wv; \
                sa[0][j] += ha, sb[0][j] += ha * xa, sa[1][j] += hb, sb[1][j] += hb * xb; \
                sa[2][j] += hc, sb[2][j] += hc * xc, sa[3][j] += hd, sb[3][j] += hd * xd; \
                dw[i + j] += (ga * xa + gb * xb) + (gc * xc + gd * xd);        \
                db[i + j] += (ga + gb) + (gc + gd);                            \
            }                                                                  \
        }                                                                      \
        for (int j = 0; i < D; i++, j++) {                                     \
            double wv = w[i], t = 0, u = 0;                                    \
            for (int q = 0; q < 4; q++) {                                      \
                double gv = (double)g[q * D + i], xh = ((double)x[q * D + i] - m[q]) * r[q], h = gv * wv; \
                sa[q][j] += h, sb[q][j] += h * xh;                             \
                t += gv * xh, u += gv;                                         \
            }                                                                  \
            dw[i] += t, db[i] += u;                                            \
        }                                                                      \
        for (int q = 0; q < 4; q++) {                                          \
            double a = lane_sum(sa[q]) * inv_d, b = lane_sum(sb[q]) * inv_d, mq = m[q], rq = r[q]; \
            const T *xq = x + q * D, *gq = g + q * D;                          \
            T *dq = dx + q * D;                                                \
            _Pragma("omp simd")                                                \
            for (i = 0; i < D; i++) {                                          \
                double xh = ((double)xq[i] - mq) * rq;                         \
                dq[i] = (T)(rq * (((double)gq[i] * w[i] - a) - xh * b));       \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    /* row i's mean and rstd: saved (mean, rstd not NULL) or its own */     \
    static inline void back_stats_##SUF(const T *x, int64_t D, double inv_d, double eps, const double *mean, \
                                        const double *rstd, int64_t i, double *m, double *r) { \
        if (rstd) {                                                            \
            *m = mean[i], *r = rstd[i];                                        \
        } else {                                                               \
            double var;                                                        \
            BACK_STATS_##SUF(x + i * D, D, inv_d, m, &var);                    \
            *r = 1.0 / sqrt(var + eps);                                        \
        }                                                                      \
    }                                                                          \
    /* layer_back_rows4 from the saved statistics (mean, rstd: 4 each) or, \
     * when they are NULL, the rows' own */                                   \
    __attribute__((unused)) /* float32 on AVX-512 and AVX2: av_, v2_layer_back_rows4 */ \
    static void back_rows4_##SUF(const T *x, const T *g, T *dx, const double *w, const double *mean, \
                                 const double *rstd, int64_t D, double inv_d, double eps, double *dw, double *db, \
                                 bool pf) {                                    \
        double m[4], r[4];                                                     \
        for (int q = 0; q < 4; q++) back_stats_##SUF(x, D, inv_d, eps, mean, rstd, q, &m[q], &r[q]); \
        layer_back_rows4_##SUF(x, g, dx, w, m, r, D, inv_d, dw, db, pf);       \
    }                                                                          \
    /* mean, rstd: (N) saved statistics or NULL; part: NBLK x 2D zeroed */    \
    static void layer_back_run_##SUF(const T *x, const T *g, T *dx, const double *w, const double *mean, \
                                     const double *rstd, int64_t N, int64_t D, double eps, int64_t nblk, double *part) { \
        double inv_d = 1.0 / (double)D;                                        \
        JAG_PARALLEL_IF(N * D >= JAG_GRAIN_ROWS, "omp parallel for schedule(static)", \
        for (int64_t k = 0; k < nblk; k++) {                                   \
            double *dw = part + k * 2 * D, *db = dw + D;                       \
            int64_t n = k * N / nblk, e = (k + 1) * N / nblk;                  \
            double m[4], r[4];                                                 \
            for (; n < e; n++) {                                               \
                int q = e - n < 4 ? (int)(e - n) : 4;                          \
                if (q == 4) {                                                  \
                    BACK_ROWS4_##SUF(x + n * D, g + n * D, dx + n * D, w, rstd ? mean + n : NULL, \
                                     rstd ? rstd + n : NULL, D, inv_d, eps, dw, db, n + 8 <= e); \
                    n += 3;                                                    \
                    continue;                                                  \
                }                                                              \
                for (int u = 0; u < q; u++) back_stats_##SUF(x, D, inv_d, eps, mean, rstd, n + u, &m[u], &r[u]); \
                for (int u = 0; u < q; u++)                                    \
                    layer_back_row_##SUF(x + (n + u) * D, g + (n + u) * D, dx + (n + u) * D, w, m[u], r[u], D, \
                                         inv_d, dw, db);                       \
                n += q - 1;                                                    \
            }                                                                  \
        });                                                                     \
    }                                                                          \
    static void rms_back_run_##SUF(const T *x, const T *g, T *dx, const double *w, const double *rstd, int64_t N, \
                                   int64_t D, double eps, int64_t nblk, double *part) { \
        double inv_d = 1.0 / (double)D;                                        \
        JAG_PARALLEL_IF(N * D >= JAG_GRAIN_ROWS, "omp parallel for schedule(static)", \
        for (int64_t k = 0; k < nblk; k++) {                                   \
            double *dw = part + k * D;                                         \
            for (int64_t n = k * N / nblk; n < (k + 1) * N / nblk; n++) {      \
                double r = rstd ? rstd[n] : rms_rstd_##SUF(x + n * D, D, inv_d, eps); \
                rms_back_row_##SUF(x + n * D, g + n * D, dx + n * D, w, r, D, inv_d, dw); \
            }                                                                  \
        });                                                                     \
    }

DEF_NORM_BACKWARD(f32, float)
DEF_NORM_BACKWARD(f64, double)

/* ---- kernels ------------------------------------------------------------- */

/* An optional affine tensor (D elements, x's dtype) as contiguous doubles:
 * converted into buf when it is contiguous float32 of at most cap elements
 * (a small op's weight: converting through a new tensor was about a third
 * of layer_norm of 10 x 64 floats), else *tmp holds a converted copy when
 * one was needed (release it). The data pointer goes to *p. */
static jag_status affine_data(const char *op, const jag_tensor *t, double *buf, int64_t cap, jag_tensor **tmp,
                              const double **p) {
    *tmp = NULL;
    *p = NULL;
    if (!t) return JAG_OK;
    int64_t n = jag_numel(t);
    if (t->dtype == JAG_FLOAT32 && n <= cap && jag_is_contiguous(t)) {
        const float *f = (const float *)jag__ptr(t);
        for (int64_t i = 0; i < n; i++) buf[i] = (double)f[i];
        *p = buf;
        return JAG_OK;
    }
    if (t->dtype != JAG_FLOAT64 || !jag_is_contiguous(t)) {
        *tmp = jag__tensor_new(op, t->sizes, t->ndim, JAG_FLOAT64, false, false);
        if (!*tmp) return jag_last_status();
        jag__copy_into(*tmp, t);
        t = *tmp;
    }
    *p = (const double *)jag__ptr(t);
    return JAG_OK;
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

/* layer_norm (layer) or rms_norm (b and mean unused): y, and the row
 * statistics into mean / rstd when they are not NULL. */
static jag_status norm_forward(const char *op, bool layer, const jag_tensor *x, int nd, const jag_tensor *w,
                               const jag_tensor *b, double eps, jag_tensor *y, jag_tensor *mean, jag_tensor *rstd) {
    int64_t numel = jag_numel(x), D = jag__numel(x->sizes + (x->ndim - nd), nd);
    if (numel == 0) return JAG_OK;
    int64_t N = numel / D;
    jag_tensor *wt = NULL, *bt = NULL;
    const double *wp, *bp;
    jag_status st;
    enum { SMALL = 1024 };
    double wbuf[SMALL], bbuf[SMALL];
    if ((st = affine_data(op, w, wbuf, SMALL, &wt, &wp)) || (st = affine_data(op, b, bbuf, SMALL, &bt, &bp))) {
        jag_release(wt);
        return st;
    }
    const jag_tensor *src = x;
    if (!jag_is_contiguous(x)) { /* copy into y, then work in place */
        jag__copy_into(y, x);
        src = y;
    }
    const void *xp = jag__ptr(src);
    void *yp = jag__ptr(y);
    void *mp = mean ? jag__ptr(mean) : NULL, *rp = rstd ? jag__ptr(rstd) : NULL;
    if (x->dtype == JAG_FLOAT32) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
        if (layer) vec_layer_run_f32(xp, yp, wp, bp, N, D, eps, mp, rp);
#else
        if (layer) layer_run_f32(xp, yp, wp, bp, N, D, eps, mp, rp);
#endif
        else rms_run_f32(xp, yp, wp, N, D, eps, rp);
    } else {
        if (layer) layer_run_f64(xp, yp, wp, bp, N, D, eps, mp, rp);
        else rms_run_f64(xp, yp, wp, N, D, eps, rp);
    }
    jag_release(wt);
    jag_release(bt);
    return JAG_OK;
}

jag_status jag__layer_norm_kernel(const char *op, const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                                  const jag_tensor *bias, double eps, jag_tensor *y, jag_tensor *mean,
                                  jag_tensor *rstd) {
    return norm_forward(op, true, x, normalized_ndim, weight, bias, eps, y, mean, rstd);
}

jag_status jag__rms_norm_kernel(const char *op, const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                                double eps, jag_tensor *y, jag_tensor *rstd) {
    return norm_forward(op, false, x, normalized_ndim, weight, NULL, eps, y, NULL, rstd);
}

/* The backward of layer_norm (layer: mean, dbias used) or rms_norm. */
static jag_status norm_backward(const char *op, bool layer, const jag_tensor *g, const jag_tensor *x,
                                const jag_tensor *mean, const jag_tensor *rstd, const jag_tensor *w, int nd,
                                double eps, jag_tensor *dx, jag_tensor *dw, jag_tensor *db) {
    int64_t numel = jag_numel(x), D = jag__numel(x->sizes + (x->ndim - nd), nd);
    int n_par = layer ? 2 : 1;
    jag_tensor *dpar[2] = {dw, db};
    if (D == 0) return JAG_OK; /* every output is empty */
    int64_t N = numel / D;
    if (N == 0) { /* no rows: the parameters' gradients are sums of nothing */
        for (int k = 0; k < n_par; k++) jag__fill(dpar[k], 0.0);
        return JAG_OK;
    }
    int64_t nblk = N < NBLK ? N : NBLK;
    jag_tensor *tmp[5] = {0};
    const void *xp = NULL, *gp = NULL;
    const double *wp = NULL, *mp = NULL, *rp = NULL;
    jag_status st = JAG_OK;
    double *ones = NULL, *part = calloc((size_t)(nblk * n_par * D), sizeof *part);
    if (!part) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    if (!st) st = contiguous_data(op, x, &tmp[0], &xp);
    if (!st) st = contiguous_data(op, g, &tmp[1], &gp);
    enum { SMALL = 1024 };
    double wbuf[SMALL];
    if (!st) st = affine_data(op, w, wbuf, SMALL, &tmp[2], &wp);
    if (!st) st = affine_data(op, mean, NULL, 0, &tmp[3], &mp);
    if (!st) st = affine_data(op, rstd, NULL, 0, &tmp[4], &rp);
    if (!st && !wp) {
        if (!(ones = malloc((size_t)D * sizeof *ones))) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
        for (int64_t i = 0; !st && i < D; i++) ones[i] = 1.0;
        wp = ones;
    }
    if (!st) {
        bool f32 = x->dtype == JAG_FLOAT32;
        void *dxp = jag__ptr(dx);
        if (layer && f32) layer_back_run_f32(xp, gp, dxp, wp, mp, rp, N, D, eps, nblk, part);
        else if (layer) layer_back_run_f64(xp, gp, dxp, wp, mp, rp, N, D, eps, nblk, part);
        else if (f32) rms_back_run_f32(xp, gp, dxp, wp, rp, N, D, eps, nblk, part);
        else rms_back_run_f64(xp, gp, dxp, wp, rp, N, D, eps, nblk, part);
        /* the blocks' partial sums, added in block order (0 + p0 + p1 + ...
         * per element), a whole block's row at a time into block 0's row:
         * vectorised, where a loop per element read the blocks 2 D doubles
         * apart (7% of a (2048, 256) layer_norm's forward and backward, on
         * one thread while the other waited) */
        for (int k = 0; k < n_par; k++) {
            char *o = jag__ptr(dpar[k]);
            double *ak = part + k * D;
#pragma omp simd
            for (int64_t i = 0; i < D; i++) ak[i] = 0.0 + ak[i];
            for (int64_t blk = 1; blk < nblk; blk++) {
                const double *pk = part + blk * n_par * D + k * D;
#pragma omp simd
                for (int64_t i = 0; i < D; i++) ak[i] += pk[i];
            }
            for (int64_t i = 0; i < D; i++) {
                if (f32) ((float *)o)[i] = (float)ak[i];
                else ((double *)o)[i] = ak[i];
            }
        }
    }
    for (int i = 0; i < 5; i++) jag_release(tmp[i]);
    free(ones);
    free(part);
    return st;
}

jag_status jag__layer_norm_backward_kernel(const char *op, const jag_tensor *g, const jag_tensor *x,
                                           const jag_tensor *mean, const jag_tensor *rstd, const jag_tensor *weight,
                                           int normalized_ndim, double eps, jag_tensor *dx, jag_tensor *dweight,
                                           jag_tensor *dbias) {
    return norm_backward(op, true, g, x, mean, rstd, weight, normalized_ndim, eps, dx, dweight, dbias);
}

jag_status jag__rms_norm_backward_kernel(const char *op, const jag_tensor *g, const jag_tensor *x,
                                         const jag_tensor *rstd, const jag_tensor *weight, int normalized_ndim,
                                         double eps, jag_tensor *dx, jag_tensor *dweight) {
    return norm_backward(op, false, g, x, NULL, rstd, weight, normalized_ndim, eps, dx, dweight, NULL);
}

/* ---- naive references ---------------------------------------------------- */

/* Element `lin` (row-major) of t, through double. */
static double ref_get(const jag_tensor *t, int64_t lin) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (lin % t->sizes[d]) * t->strides[d];
        lin /= t->sizes[d];
    }
    return jag__load_as_double(jag__ptr(t) + off * (int64_t)jag_dtype_size(t->dtype), t->dtype);
}

/* One row at a time, in double, two plain passes. */
static void ref_norm(bool layer, const jag_tensor *x, int nd, const jag_tensor *w, const jag_tensor *b, double eps,
                     jag_tensor *y) {
    int64_t numel = jag_numel(x), D = jag__numel(x->sizes + (x->ndim - nd), nd);
    size_t es = jag_dtype_size(y->dtype);
    for (int64_t n = 0; D > 0 && n < numel / D; n++) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < D; i++) mean += ref_get(x, n * D + i);
        mean /= (double)D;
        for (int64_t i = 0; i < D; i++) {
            double v = ref_get(x, n * D + i);
            var += layer ? (v - mean) * (v - mean) : v * v;
        }
        double scale = 1.0 / sqrt(var / (double)D + eps);
        for (int64_t i = 0; i < D; i++) {
            double v = ref_get(x, n * D + i);
            double r = layer ? (v - mean) * scale : v * scale;
            if (w) r *= ref_get(w, i);
            if (b) r += ref_get(b, i);
            jag__store_from_double(jag__ptr(y) + (n * D + i) * (int64_t)es, y->dtype, r);
        }
    }
}

void jag__layer_norm_reference(const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                               const jag_tensor *bias, double eps, jag_tensor *y) {
    ref_norm(true, x, normalized_ndim, weight, bias, eps, y);
}

void jag__rms_norm_reference(const jag_tensor *x, int normalized_ndim, const jag_tensor *weight, double eps,
                             jag_tensor *y) {
    ref_norm(false, x, normalized_ndim, weight, NULL, eps, y);
}

/* The backward ops one element at a time in double: the statistics given,
 * else each row's own (two plain passes); dw and db summed over rows in
 * row order. */
static jag_status ref_norm_backward(const char *op, bool layer, const jag_tensor *g, const jag_tensor *x,
                                    const jag_tensor *mean_t, const jag_tensor *rstd_t, const jag_tensor *w, int nd,
                                    double eps, jag_tensor *dx, jag_tensor *dw, jag_tensor *db) {
    int64_t numel = jag_numel(x), D = jag__numel(x->sizes + (x->ndim - nd), nd);
    int n_par = layer ? 2 : 1;
    jag_tensor *dpar[2] = {dw, db};
    double *acc = calloc((size_t)(2 * (D ? D : 1)), sizeof *acc);
    if (!acc) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    size_t es = jag_dtype_size(x->dtype);
    for (int64_t n = 0; D > 0 && n < numel / D; n++) {
        double mean = 0, var = 0, rstd;
        if (rstd_t) {
            mean = mean_t ? ref_get(mean_t, n) : 0;
            rstd = ref_get(rstd_t, n);
        } else {
            for (int64_t i = 0; i < D; i++) mean += ref_get(x, n * D + i);
            mean = layer ? mean / (double)D : 0;
            for (int64_t i = 0; i < D; i++) var += (ref_get(x, n * D + i) - mean) * (ref_get(x, n * D + i) - mean);
            rstd = 1.0 / sqrt(var / (double)D + eps);
        }
        double s1 = 0, s2 = 0; /* layer: sum h, sum h xhat; rms: sum h x */
        for (int64_t i = 0; i < D; i++) {
            double gv = ref_get(g, n * D + i), h = gv * (w ? ref_get(w, i) : 1.0);
            double xh = (ref_get(x, n * D + i) - mean) * rstd;
            s1 += h;
            s2 += layer ? h * xh : h * ref_get(x, n * D + i);
            acc[i] += gv * xh;
            acc[D + i] += gv;
        }
        for (int64_t i = 0; i < D; i++) {
            double xv = ref_get(x, n * D + i), h = ref_get(g, n * D + i) * (w ? ref_get(w, i) : 1.0);
            double d = layer ? rstd * (h - s1 / (double)D - (xv - mean) * rstd * s2 / (double)D)
                             : rstd * (h - xv * rstd * rstd * s2 / (double)D);
            jag__store_from_double(jag__ptr(dx) + (n * D + i) * (int64_t)es, x->dtype, d);
        }
    }
    for (int k = 0; k < n_par; k++)
        for (int64_t i = 0; i < D; i++)
            jag__store_from_double(jag__ptr(dpar[k]) + i * (int64_t)es, x->dtype, acc[k * D + i]);
    free(acc);
    return JAG_OK;
}

jag_status jag__layer_norm_backward_reference(const char *op, const jag_tensor *g, const jag_tensor *x,
                                              const jag_tensor *mean, const jag_tensor *rstd,
                                              const jag_tensor *weight, int normalized_ndim, double eps,
                                              jag_tensor *dx, jag_tensor *dweight, jag_tensor *dbias) {
    return ref_norm_backward(op, true, g, x, mean, rstd, weight, normalized_ndim, eps, dx, dweight, dbias);
}

jag_status jag__rms_norm_backward_reference(const char *op, const jag_tensor *g, const jag_tensor *x,
                                            const jag_tensor *rstd, const jag_tensor *weight, int normalized_ndim,
                                            double eps, jag_tensor *dx, jag_tensor *dweight) {
    return ref_norm_backward(op, false, g, x, NULL, rstd, weight, normalized_ndim, eps, dx, dweight, NULL);
}
