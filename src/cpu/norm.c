/*
 * norm.c — layer_norm and rms_norm over the trailing dims, their META
 * functions and naive references.
 *
 * x is viewed as (N, D): D is the product of the trailing normalized_ndim
 * sizes. Each row's statistics accumulate in float64 with LANES independent
 * accumulators (vectorised, stable for long rows; the variance is biased as
 * torch's). layer_norm on float32 takes one pass, the sums of x - x0 and its
 * square with x0 the row's first value (exact differences in double); on
 * float64 two passes, the mean then the squared deviations. The transform
 * (x - mean) * rstd * w + b runs in double and rounds once to x's dtype.
 * Threads share rows. A non-contiguous x is first copied into out and
 * normalised in place; weight and bias are read as contiguous doubles (a
 * converted copy when needed, once per call).
 */
#include "../dispatch/dispatch.h"

#include <math.h>

#define LANES 16

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
    static void layer_row_##SUF(const T *x, T *y, const double *w, const double *b, int64_t D, double inv_d, double eps) { \
        double s[LANES] = {0}, q[LANES] = {0}, mean, var;                      \
        int64_t i = 0;                                                         \
        if (sizeof(T) == 4) {                                                  \
            /* one pass: the sums of d = x - x0 and d^2, x0 the first value. \
             * d is exact in double, and as x0 is one of the values, (mean - \
             * x0)^2 is at most D times the variance: sum d^2 - (sum d)^2 / D \
             * loses at most log2(D) of double's 53 bits */                  \
            const double x0 = (double)x[0];                                    \
            for (; i + LANES <= D; i += LANES) {                               \
                _Pragma("omp simd")                                            \
                for (int j = 0; j < LANES; j++) {                              \
                    double d = (double)x[i + j] - x0;                          \
                    s[j] += d, q[j] += d * d;                                  \
                }                                                              \
            }                                                                  \
            for (int j = 0; i < D; i++, j++) {                                 \
                double d = (double)x[i] - x0;                                  \
                s[j] += d, q[j] += d * d;                                      \
            }                                                                  \
            double s1 = lane_sum(s), m2 = lane_sum(q) - s1 * (s1 * inv_d);       \
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
        /* x - mean in float64: for offset data (|mean| >> std) a mean     \
         * rounded to float32 would cost several digits */                   \
        double rstd = 1.0 / sqrt(var + eps);                                   \
        if (w && b)                                                            \
            for (i = 0; i < D; i++) y[i] = (T)(((double)x[i] - mean) * rstd * w[i] + b[i]); \
        else if (w)                                                            \
            for (i = 0; i < D; i++) y[i] = (T)(((double)x[i] - mean) * rstd * w[i]); \
        else if (b)                                                            \
            for (i = 0; i < D; i++) y[i] = (T)(((double)x[i] - mean) * rstd + b[i]); \
        else                                                                   \
            for (i = 0; i < D; i++) y[i] = (T)(((double)x[i] - mean) * rstd);  \
    }                                                                          \
    /* x, y are (D); w is (D) or NULL; x may equal y */                        \
    static void rms_row_##SUF(const T *x, T *y, const double *w, int64_t D, double inv_d, double eps) { \
        double q[LANES] = {0};                                                 \
        int64_t i = 0;                                                         \
        for (; i + LANES <= D; i += LANES) {                                   \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) q[j] += (double)x[i + j] * (double)x[i + j]; \
        }                                                                      \
        for (int j = 0; i < D; i++, j++) q[j] += (double)x[i] * (double)x[i]; \
        double r = 1.0 / sqrt(lane_sum(q) * inv_d + eps);                      \
        if (w)                                                                 \
            for (i = 0; i < D; i++) y[i] = (T)((double)x[i] * r * w[i]);       \
        else                                                                   \
            for (i = 0; i < D; i++) y[i] = (T)((double)x[i] * r);              \
    }                                                                          \
    static void layer_run_##SUF(const T *x, T *y, const double *w, const double *b, int64_t N, int64_t D, double eps) { \
        _Pragma("omp parallel for schedule(static) if (N * D >= JAG_PARALLEL_GRAIN)") \
        for (int64_t n = 0; n < N; n++) layer_row_##SUF(x + n * D, y + n * D, w, b, D, 1.0 / (double)D, eps); \
    }                                                                          \
    static void rms_run_##SUF(const T *x, T *y, const double *w, int64_t N, int64_t D, double eps) { \
        _Pragma("omp parallel for schedule(static) if (N * D >= JAG_PARALLEL_GRAIN)") \
        for (int64_t n = 0; n < N; n++) rms_row_##SUF(x + n * D, y + n * D, w, D, 1.0 / (double)D, eps); \
    }

DEF_NORM(f32, float)
DEF_NORM(f64, double)

/* ---- META ---------------------------------------------------------------- */

/* An optional affine tensor: same dtype as x, shape x's trailing nd sizes. */
static jag_status check_affine(const char *op, const char *name, const jag_tensor *x, int nd, const jag_tensor *t) {
    if (!t) return JAG_OK;
    const int64_t *want = x->sizes + (x->ndim - nd);
    bool same = t->ndim == nd;
    for (int d = 0; same && d < nd; d++) same = t->sizes[d] == want[d];
    if (!same) {
        char b[JAG_SHAPE_BUF], c[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument '%s' has shape %s, expected %s (the last %d sizes of x)", op, name,
                          jag__shape_str(t->sizes, t->ndim, b, sizeof b), jag__shape_str(want, nd, c, sizeof c), nd);
    }
    if (t->dtype != x->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected %s (x's dtype)", op, name,
                          jag_dtype_name(t->dtype), jag_dtype_name(x->dtype));
    return JAG_OK;
}

/* (x, normalized_ndim, weight or none, [bias or none,] eps). */
static jag_status parse(const char *op, const jag_value *args, int nargs, bool has_bias, const jag_tensor **x,
                        int *nd, const jag_tensor **w, const jag_tensor **b, double *eps) {
    int64_t n;
    jag_status st;
    *b = NULL;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", x)) ||
        (st = jag__arg_int(op, args, nargs, 1, "normalized_ndim", &n)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, 2, "weight", w)) ||
        (has_bias && (st = jag__arg_opt_tensor(op, args, nargs, 3, "bias", b))) ||
        (st = jag__arg_double(op, args, nargs, has_bias ? 4 : 3, "eps", eps)))
        return st;
    if (!jag_dtype_is_floating((*x)->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'x' has dtype %s, expected float32 or float64", op,
                          jag_dtype_name((*x)->dtype));
    if (n < 1 || n > (*x)->ndim)
        return jag__error(JAG_EINVAL, "%s: argument 'normalized_ndim' is %lld, expected 1..%d (x is %d-d)", op,
                          (long long)n, (*x)->ndim, (*x)->ndim);
    *nd = (int)n;
    if ((st = check_affine(op, "weight", *x, *nd, *w)) || (st = check_affine(op, "bias", *x, *nd, *b))) return st;
    return JAG_OK;
}

/* layer_norm: y has x's shape and dtype. */
jag_status jag__meta_layer_norm(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, true, &x, &nd, &w, &b, &eps);
    if (st == JAG_OK) jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return st;
}

/* rms_norm: y has x's shape and dtype. */
jag_status jag__meta_rms_norm(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, false, &x, &nd, &w, &b, &eps);
    if (st == JAG_OK) jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return st;
}

/* ---- kernels ------------------------------------------------------------- */

/* An optional affine tensor (D elements, x's dtype) as contiguous doubles:
 * *tmp holds a converted copy when one was needed (release it), and the
 * data pointer goes to *p. */
static jag_status affine_data(const char *op, const jag_tensor *t, jag_tensor **tmp, const double **p) {
    *tmp = NULL;
    *p = NULL;
    if (!t) return JAG_OK;
    if (t->dtype != JAG_FLOAT64 || !jag_is_contiguous(t)) {
        *tmp = jag__tensor_new(op, t->sizes, t->ndim, JAG_FLOAT64, false, false);
        if (!*tmp) return jag_last_status();
        jag__copy_into(*tmp, t);
        t = *tmp;
    }
    *p = (const double *)jag__ptr(t);
    return JAG_OK;
}

static jag_status norm_cpu(const char *op, const jag_value *args, int nargs, jag_tensor **outs, bool layer) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, layer, &x, &nd, &w, &b, &eps);
    if (st) return st;
    int64_t numel = jag_numel(x), D = jag__numel(x->sizes + (x->ndim - nd), nd);
    if (numel == 0) return JAG_OK;
    int64_t N = numel / D;
    jag_tensor *wt = NULL, *bt = NULL;
    const double *wp, *bp;
    if ((st = affine_data(op, w, &wt, &wp)) || (st = affine_data(op, b, &bt, &bp))) {
        jag_release(wt);
        return st;
    }
    const jag_tensor *src = x;
    if (!jag_is_contiguous(x)) { /* copy into out, then work in place */
        jag__copy_into(outs[0], x);
        src = outs[0];
    }
    const void *xp = jag__ptr(src);
    void *yp = jag__ptr(outs[0]);
    if (x->dtype == JAG_FLOAT32) {
        if (layer) layer_run_f32(xp, yp, wp, bp, N, D, eps);
        else rms_run_f32(xp, yp, wp, N, D, eps);
    } else {
        if (layer) layer_run_f64(xp, yp, wp, bp, N, D, eps);
        else rms_run_f64(xp, yp, wp, N, D, eps);
    }
    jag_release(wt);
    jag_release(bt);
    return JAG_OK;
}

/* x is (N, D) over the trailing dims, weight and bias (D), out x's shape:
 * (x - mean) / sqrt(var + eps) * weight + bias, biased var */
jag_status jag__cpu_layer_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return norm_cpu(op, args, nargs, outs, true);
}

/* x is (N, D), weight (D), out x's shape: x / sqrt(mean(x^2) + eps) * weight */
jag_status jag__cpu_rms_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return norm_cpu(op, args, nargs, outs, false);
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
static jag_status ref_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs, bool layer) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, layer, &x, &nd, &w, &b, &eps);
    if (st) return st;
    int64_t numel = jag_numel(x), D = jag__numel(x->sizes + (x->ndim - nd), nd);
    jag_tensor *y = outs[0];
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
    return JAG_OK;
}

jag_status jag__ref_layer_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_layer_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_norm(op, args, nargs, outs, true);
}

jag_status jag__ref_rms_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_rms_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_norm(op, args, nargs, outs, false);
}
