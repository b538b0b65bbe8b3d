/* nested_reduce.c — ops along the ragged dim of a jagged tensor, on packed
 * values with no padding: segment reductions (sum, mean, amax, amin) to a
 * dense (B, D...) result, segment softmax / log_softmax, and the segment
 * broadcast their gradients need; then every reduction (sum, mean, amax,
 * amin, logsumexp, var, std, max/min with indices, argmax/argmin) over the
 * ragged dim alone or with trailing dims, and its gradient.
 *
 * Shapes: values (R, D...) with component b's rows at [offsets[b],
 * offsets[b] + len_b) (len_b from lengths, or offsets[b+1] - offsets[b]);
 * C = the product of D... ("columns"). Kernels read values as (R, C). */
#include "nested.h"
#include "../cpu/vecmath.h"

#include <math.h>

static const int64_t *i64p(const jag_tensor *t) { return (const int64_t *)jag__ptr(t); }

static int64_t seg_len(const nested_state *s, int64_t b) {
    const int64_t *o = i64p(s->offsets);
    return s->lengths ? i64p(s->lengths)[b] : o[b + 1] - o[b];
}

/* A contiguous new reference to the values. */
static jag_status contiguous_values(const nested_state *s, jag_tensor **out) {
    if (jag_is_contiguous(s->values)) {
        *out = jag_retain(s->values);
        return JAG_OK;
    }
    jag_value a[] = {jag__v_tensor(s->values)};
    return jag__dispatch(JAG_OP_clone, a, 1, out);
}

static jag_status need_float_data(const char *op, const nested_state *s) {
    if (!s->values->storage) return jag__error(JAG_ENOTIMPL, "%s: reducing over the ragged dim needs data (it cannot be traced yet)", op);
    if (!jag_dtype_is_floating(s->values->dtype))
        return jag__error(JAG_EDTYPE, "%s: reducing over the ragged dim needs float values, got %s", op,
                          jag_dtype_name(s->values->dtype));
    return JAG_OK;
}

static int64_t columns(const nested_state *s) { return jag__numel(s->values->sizes + 1, s->values->ndim - 1); }

#define LOAD(p, f64, i) ((f64) ? ((const double *)(p))[i] : (double)((const float *)(p))[i])
#define STORE(p, f64, i, v) ((f64) ? (void)(((double *)(p))[i] = (v)) : (void)(((float *)(p))[i] = (float)(v)))

/* Each kernel below walks a segment's rows in order and its columns in the
 * inner loop (contiguous, vectorisable), with per-column accumulators in
 * double; segments are split across threads. The naive references are the
 * per-component dense ops (tests/test_ragged_ops.c compares with them). */

/* Columns are processed in blocks so that accumulators stay in L1. */
#define COL_BLOCK 512

// values (R, C), segments of rows -> out (B, C): sum/mean/amax/amin per segment and column
jag_status jag__segment_reduce(const char *op, const nested_state *s, jag_segment_kind kind, bool keepdim,
                               jag_tensor **out) {
    jag_status st = need_float_data(op, s);
    if (st) return st;
    int64_t B = s->batch, C = columns(s);
    if (kind == JAG_SEG_AMAX || kind == JAG_SEG_AMIN)
        for (int64_t b = 0; b < B; b++)
            if (seg_len(s, b) == 0)
                return jag__error(JAG_EINVAL, "%s: component %lld is empty: its %s over the ragged dim is undefined", op,
                                  (long long)b, kind == JAG_SEG_AMAX ? "max" : "min");
    int64_t shape[JAG_MAX_DIMS];
    int nd = 0;
    shape[nd++] = B;
    if (keepdim) shape[nd++] = 1;
    for (int d = 1; d < s->values->ndim; d++) shape[nd++] = s->values->sizes[d];
    jag_tensor *v = NULL;
    if ((st = contiguous_values(s, &v))) return st;
    jag_tensor *y = jag__tensor_new(op, shape, nd, v->dtype, false, false);
    if (!y) {
        jag_release(v);
        return jag_last_status();
    }
    bool f64 = v->dtype == JAG_FLOAT64;
    const char *in = jag__ptr(v);
    char *o = jag__ptr(y);
    const int64_t *off = i64p(s->offsets);
    int64_t blocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) if (jag_numel(v) > JAG_PARALLEL_GRAIN)
    for (int64_t task = 0; task < B * blocks; task++) {
        int64_t b = task / blocks, c0 = task % blocks * COL_BLOCK, nc = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        int64_t r0 = off[b], n = seg_len(s, b);
        double acc[COL_BLOCK];
        bool nan[COL_BLOCK];
        double init = kind == JAG_SEG_AMAX ? -INFINITY : kind == JAG_SEG_AMIN ? INFINITY : 0.0;
        for (int64_t c = 0; c < nc; c++) acc[c] = init, nan[c] = false;
        for (int64_t r = r0; r < r0 + n; r++) {
            int64_t base = r * C + c0;
            if (kind == JAG_SEG_SUM || kind == JAG_SEG_MEAN) {
                if (f64) {
                    const double *x = (const double *)in + base;
                    for (int64_t c = 0; c < nc; c++) acc[c] += x[c];
                } else {
                    const float *x = (const float *)in + base;
                    for (int64_t c = 0; c < nc; c++) acc[c] += (double)x[c];
                }
            } else {
                for (int64_t c = 0; c < nc; c++) {
                    double x = LOAD(in, f64, base + c);
                    nan[c] |= isnan(x);
                    acc[c] = kind == JAG_SEG_AMAX ? (x > acc[c] ? x : acc[c]) : (x < acc[c] ? x : acc[c]);
                }
            }
        }
        for (int64_t c = 0; c < nc; c++) {
            double r = nan[c] ? NAN : acc[c];
            if (kind == JAG_SEG_MEAN) r = n ? r / (double)n : NAN;
            STORE(o, f64, b * C + c0 + c, r);
        }
    }
    jag_release(v);
    *out = y;
    return JAG_OK;
}

/* Softmax down one segment's rows for a block of columns, typed: rows in
 * order, columns inner, the vectorised exp of vecmath.h. */
#define DEF_SEG_SOFTMAX(NAME, T, EXP, LOG)                                     \
    static void NAME(const T *restrict in, T *restrict out, int64_t C, int64_t r0, int64_t n, int64_t c0, int64_t nc, \
                     bool lg) {                                                \
        T m[COL_BLOCK], sum[COL_BLOCK];                                        \
        for (int64_t c = 0; c < nc; c++) m[c] = -INFINITY, sum[c] = 0;         \
        for (int64_t r = r0; r < r0 + n; r++) {                                \
            const T *restrict x = in + r * C + c0;                             \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) m[c] = x[c] > m[c] || x[c] != x[c] ? x[c] : m[c]; \
        }                                                                      \
        for (int64_t c = 0; c < nc; c++) /* NaN stays; all -inf: sum 0 -> NaN, as torch */ \
            if (isinf(m[c])) m[c] = 0;                                         \
        for (int64_t r = r0; r < r0 + n; r++) {                                \
            const T *restrict x = in + r * C + c0;                             \
            T *restrict y = out + r * C + c0;                                  \
            if (lg) {                                                          \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) {                             \
                    T z = x[c] - m[c];                                         \
                    sum[c] += EXP(z);                                          \
                    y[c] = z;                                                  \
                }                                                              \
            } else {                                                           \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) {                             \
                    T e = EXP(x[c] - m[c]);                                    \
                    sum[c] += e;                                               \
                    y[c] = e;                                                  \
                }                                                              \
            }                                                                  \
        }                                                                      \
        for (int64_t c = 0; c < nc; c++) sum[c] = lg ? LOG(sum[c]) : (T)1 / sum[c]; \
        for (int64_t r = r0; r < r0 + n; r++) {                                \
            T *restrict y = out + r * C + c0;                                  \
            if (lg) {                                                          \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) y[c] -= sum[c];               \
            } else {                                                           \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) y[c] *= sum[c];               \
            }                                                                  \
        }                                                                      \
    }
DEF_SEG_SOFTMAX(seg_softmax_f32, float, jag__vm_exp_f32, logf)
DEF_SEG_SOFTMAX(seg_softmax_f64, double, jag__vm_exp_f64, log)
#undef DEF_SEG_SOFTMAX

// values (R, C) -> new values (R, C): softmax (or log_softmax) down each segment's rows, per column;
// rows in holes are 0
jag_status jag__segment_softmax(const char *op, const nested_state *s, bool log_softmax, jag_tensor **out) {
    jag_status st = need_float_data(op, s);
    if (st) return st;
    jag_tensor *v = NULL;
    if ((st = contiguous_values(s, &v))) return st;
    /* zeroed only when there are holes (their rows are not written) */
    jag_tensor *y = jag__tensor_new(op, v->sizes, v->ndim, v->dtype, s->lengths != NULL, false);
    if (!y) {
        jag_release(v);
        return jag_last_status();
    }
    int64_t B = s->batch, C = columns(s);
    bool f64 = v->dtype == JAG_FLOAT64;
    const char *in = jag__ptr(v);
    char *o = jag__ptr(y);
    const int64_t *off = i64p(s->offsets);
    int64_t blocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) if (jag_numel(v) > JAG_PARALLEL_GRAIN)
    for (int64_t task = 0; task < B * blocks; task++) {
        int64_t b = task / blocks, c0 = task % blocks * COL_BLOCK, nc = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        if (f64) seg_softmax_f64((const double *)in, (double *)o, C, off[b], seg_len(s, b), c0, nc, log_softmax);
        else seg_softmax_f32((const float *)in, (float *)o, C, off[b], seg_len(s, b), c0, nc, log_softmax);
    }
    jag_release(v);
    *out = y;
    return JAG_OK;
}

// g (B, C) [scaled per segment by 1/len when `mean`] -> values-shaped (R, C): row r of segment b gets g[b];
// rows in holes get 0
jag_status jag__segment_broadcast(const char *op, const nested_state *s, const jag_tensor *g, bool mean,
                                  jag_tensor **out) {
    jag_tensor *gc = NULL;
    jag_status st;
    if (jag_is_contiguous(g)) gc = jag_retain((jag_tensor *)g);
    else {
        jag_value a[] = {jag__v_tensor(g)};
        if ((st = jag__dispatch(JAG_OP_clone, a, 1, &gc))) return st;
    }
    jag_tensor *y = jag__tensor_new(op, s->values->sizes, s->values->ndim, s->values->dtype, true, false);
    if (!y) {
        jag_release(gc);
        return jag_last_status();
    }
    int64_t B = s->batch, C = columns(s);
    bool f64 = y->dtype == JAG_FLOAT64, gf64 = gc->dtype == JAG_FLOAT64;
    const char *gp = jag__ptr(gc);
    char *o = jag__ptr(y);
    const int64_t *off = i64p(s->offsets);
#pragma omp parallel for schedule(dynamic, 4) if (jag_numel(y) > JAG_PARALLEL_GRAIN)
    for (int64_t b = 0; b < B; b++) {
        int64_t r0 = off[b], n = seg_len(s, b);
        double scale = mean && n ? 1.0 / (double)n : 1.0;
        for (int64_t r = r0; r < r0 + n; r++)
            for (int64_t c = 0; c < C; c++) STORE(o, f64, r * C + c, LOAD(gp, gf64, b * C + c) * scale);
    }
    jag_release(gc);
    *out = y;
    return JAG_OK;
}

/* ---- reductions over the ragged dim and a set of trailing dims ----------- */

/* Every kind, over the ragged dim alone or with trailing dims. The values
 * are read as (rows, K, R): K kept columns and, for each, R trailing
 * elements reduced together with the segment's rows (R = 1: the ragged dim
 * alone). A set of trailing dims that is not a suffix is moved to the end
 * first (one copy). */
typedef struct seg_geom {
    jag_tensor *v;        /* contiguous (rows, K, R), a new reference */
    const int64_t *off;   /* offsets (B+1) */
    const nested_state *s;
    int64_t B, K, R;
    int perm[JAG_MAX_DIMS]; /* values dims in v's order (identity when not moved) */
    int64_t psz[JAG_MAX_DIMS];
    int nd;               /* values ndim */
    bool moved;
} seg_geom;

static jag_status seg_geom_make(const char *op, const nested_state *s, unsigned mask, seg_geom *g) {
    const jag_tensor *x = s->values;
    int nd = x->ndim, n = 0;
    memset(g, 0, sizeof *g);
    g->s = s, g->B = s->batch, g->nd = nd, g->off = i64p(s->offsets), g->K = 1, g->R = 1;
    g->perm[n++] = 0;
    for (int d = 1; d < nd; d++)
        if (!(mask >> d & 1)) g->perm[n++] = d, g->K *= x->sizes[d];
    for (int d = 1; d < nd; d++)
        if (mask >> d & 1) g->perm[n++] = d, g->R *= x->sizes[d];
    for (int d = 0; d < nd; d++) {
        g->psz[d] = x->sizes[g->perm[d]];
        if (g->perm[d] != d) g->moved = true;
    }
    jag_status st;
    if (!g->moved) return contiguous_values(s, &g->v);
    jag_tensor *pv = NULL;
    int64_t p64[JAG_MAX_DIMS];
    for (int d = 0; d < nd; d++) p64[d] = g->perm[d];
    jag_value a[] = {jag__v_tensor(x), jag__v_ints(p64, nd)};
    (void)op;
    if ((st = jag__dispatch(JAG_OP_permute, a, 2, &pv))) return st;
    jag_value c[] = {jag__v_tensor(pv)};
    st = jag__dispatch(JAG_OP_clone, c, 1, &g->v);
    jag_release(pv);
    return st;
}

static bool seg_extreme(jag_segment_kind k) {
    return k == JAG_SEG_AMAX || k == JAG_SEG_AMIN || k >= JAG_SEG_MAX;
}

/* M2 / max(n - correction, 0), as the dense var: NaN when n == 0 */
static double seg_var_finish(double m2, double n, int64_t correction) {
    if (n == 0) return NAN;
    double div = n - (double)correction;
    return m2 / (div > 0 ? div : 0.0);
}

/* One segment b, columns [k0, k0 + nk) of (rows, K, R) -> out (B, K) [and
 * idx (B, K) for max/min/arg: the row inside the component]. Typed: rows in
 * order, columns inner (contiguous when R == 1), q innermost. */
#define DEF_SEG_GENERIC(NAME, T, EXP)                                               \
    static void NAME(const T *in, T *out, int64_t *idx, int64_t K, int64_t R, int64_t r0, int64_t n, int64_t b, \
                     int64_t k0, int64_t nk, jag_segment_kind kind, int64_t corr) { \
        double a[COL_BLOCK], m[COL_BLOCK];                                     \
        int64_t ix[COL_BLOCK];                                                 \
        bool nan[COL_BLOCK];                                                   \
        int64_t C = K * R;                                                     \
        double cnt = (double)n * (double)R;                                    \
        bool is_max = kind == JAG_SEG_AMAX || kind == JAG_SEG_MAX || kind == JAG_SEG_ARGMAX || kind == JAG_SEG_LSE; \
        for (int64_t k = 0; k < nk; k++) a[k] = 0, m[k] = is_max ? -INFINITY : INFINITY, nan[k] = false, ix[k] = 0; \
        switch (kind) {                                                        \
        case JAG_SEG_SUM: case JAG_SEG_MEAN: case JAG_SEG_VAR: case JAG_SEG_STD: \
            if (R == 1 && (kind == JAG_SEG_VAR || kind == JAG_SEG_STD)) { /* one pass: Welford's update per column */ \
                for (int64_t k = 0; k < nk; k++) m[k] = 0;                     \
                for (int64_t r = r0; r < r0 + n; r++) {                        \
                    const T *restrict x = in + r * C + k0;                     \
                    double inv = 1.0 / (double)(r - r0 + 1);                   \
                    _Pragma("omp simd")                                        \
                    for (int64_t k = 0; k < nk; k++) {                         \
                        double v = (double)x[k], d = v - m[k];                 \
                        m[k] += d * inv;                                       \
                        a[k] += d * (v - m[k]);                                \
                    }                                                          \
                }                                                              \
                for (int64_t k = 0; k < nk; k++) {                             \
                    double v = seg_var_finish(a[k], cnt, corr);                \
                    out[b * K + k0 + k] = (T)(kind == JAG_SEG_STD ? sqrt(v) : v); \
                }                                                              \
                return;                                                        \
            }                                                                  \
            if (R == 1) { /* columns contiguous: vectorised over them */      \
                for (int64_t r = r0; r < r0 + n; r++) {                        \
                    const T *restrict x = in + r * C + k0;                     \
                    _Pragma("omp simd")                                        \
                    for (int64_t k = 0; k < nk; k++) a[k] += (double)x[k];     \
                }                                                              \
            } else                                                             \
            for (int64_t r = r0; r < r0 + n; r++)                              \
                for (int64_t k = 0; k < nk; k++) {                             \
                    const T *x = in + r * C + (k0 + k) * R;                    \
                    double acc = 0;                                            \
                    for (int64_t q = 0; q < R; q++) acc += (double)x[q];       \
                    a[k] += acc;                                               \
                }                                                              \
            if (kind == JAG_SEG_SUM || kind == JAG_SEG_MEAN) {                 \
                for (int64_t k = 0; k < nk; k++)                               \
                    out[b * K + k0 + k] = (T)(kind == JAG_SEG_SUM ? a[k] : cnt ? a[k] / cnt : NAN); \
                return;                                                        \
            }                                                                  \
            for (int64_t k = 0; k < nk; k++) m[k] = cnt ? a[k] / cnt : 0, a[k] = 0; \
            if (R == 1) {                                                      \
                for (int64_t r = r0; r < r0 + n; r++) {                        \
                    const T *restrict x = in + r * C + k0;                     \
                    _Pragma("omp simd")                                        \
                    for (int64_t k = 0; k < nk; k++) {                         \
                        double d = (double)x[k] - m[k];                        \
                        a[k] += d * d;                                         \
                    }                                                          \
                }                                                              \
            } else                                                             \
            for (int64_t r = r0; r < r0 + n; r++)                              \
                for (int64_t k = 0; k < nk; k++) {                             \
                    const T *x = in + r * C + (k0 + k) * R;                    \
                    double acc = 0;                                            \
                    for (int64_t q = 0; q < R; q++) {                          \
                        double d = (double)x[q] - m[k];                        \
                        acc += d * d;                                          \
                    }                                                          \
                    a[k] += acc;                                               \
                }                                                              \
            for (int64_t k = 0; k < nk; k++) {                                 \
                double v = seg_var_finish(a[k], cnt, corr);                    \
                out[b * K + k0 + k] = (T)(kind == JAG_SEG_STD ? sqrt(v) : v);  \
            }                                                                  \
            return;                                                            \
        case JAG_SEG_AMAX: case JAG_SEG_AMIN: case JAG_SEG_LSE:                \
            if (R == 1 && kind == JAG_SEG_LSE) { /* NaN wins the max: it then spreads */ \
                T mt[COL_BLOCK];                                               \
                for (int64_t k = 0; k < nk; k++) mt[k] = -INFINITY;            \
                for (int64_t r = r0; r < r0 + n; r++) {                        \
                    const T *restrict x = in + r * C + k0;                     \
                    _Pragma("omp simd")                                        \
                    for (int64_t k = 0; k < nk; k++) mt[k] = x[k] > mt[k] || x[k] != x[k] ? x[k] : mt[k]; \
                }                                                              \
                for (int64_t k = 0; k < nk; k++) m[k] = mt[k], nan[k] = mt[k] != mt[k]; \
            } else                                                             \
            for (int64_t r = r0; r < r0 + n; r++)                              \
                for (int64_t k = 0; k < nk; k++) {                             \
                    const T *x = in + r * C + (k0 + k) * R;                    \
                    for (int64_t q = 0; q < R; q++) {                          \
                        double v = (double)x[q];                               \
                        nan[k] |= v != v;                                      \
                        m[k] = is_max ? (v > m[k] ? v : m[k]) : (v < m[k] ? v : m[k]); \
                    }                                                          \
                }                                                              \
            if (kind != JAG_SEG_LSE) {                                         \
                for (int64_t k = 0; k < nk; k++) out[b * K + k0 + k] = (T)(nan[k] ? NAN : m[k]); \
                return;                                                        \
            }                                                                  \
            if (R == 1) { /* columns contiguous: one vectorised exp per element */ \
                T mt[COL_BLOCK], at[COL_BLOCK];                                \
                for (int64_t k = 0; k < nk; k++) mt[k] = nan[k] || isinf(m[k]) ? (T)0 : (T)m[k], at[k] = 0; \
                for (int64_t r = r0; r < r0 + n; r++) {                        \
                    const T *restrict x = in + r * C + k0;                     \
                    _Pragma("omp simd")                                        \
                    for (int64_t k = 0; k < nk; k++) at[k] += EXP(x[k] - mt[k]); \
                }                                                              \
                for (int64_t k = 0; k < nk; k++) a[k] = at[k];                 \
            } else                                                             \
                for (int64_t r = r0; r < r0 + n; r++)                          \
                    for (int64_t k = 0; k < nk; k++) {                         \
                        if (nan[k] || isinf(m[k])) continue;                   \
                        const T *x = in + r * C + (k0 + k) * R;                \
                        double acc = 0;                                        \
                        for (int64_t q = 0; q < R; q++) acc += exp((double)x[q] - m[k]); \
                        a[k] += acc;                                           \
                    }                                                          \
            for (int64_t k = 0; k < nk; k++)                                   \
                out[b * K + k0 + k] = (T)(nan[k] ? NAN : isinf(m[k]) ? m[k] : m[k] + log(a[k])); \
            return;                                                            \
        default: { /* max / min / argmax / argmin, R == 1: the first extreme; a NaN wins and then stays */ \
            T mt[COL_BLOCK];                                                   \
            const T *restrict x0 = in + r0 * C + k0;                           \
            for (int64_t k = 0; k < nk; k++) mt[k] = x0[k];                    \
            for (int64_t r = r0 + 1; r < r0 + n; r++) {                        \
                const T *restrict x = in + r * C + k0;                         \
                int64_t row = r - r0;                                          \
                if (is_max) {                                                  \
                    _Pragma("omp simd")                                        \
                    for (int64_t k = 0; k < nk; k++) {                         \
                        bool better = x[k] > mt[k] || (x[k] != x[k] && mt[k] == mt[k]); \
                        mt[k] = better ? x[k] : mt[k];                         \
                        ix[k] = better ? row : ix[k];                          \
                    }                                                          \
                } else {                                                       \
                    _Pragma("omp simd")                                        \
                    for (int64_t k = 0; k < nk; k++) {                         \
                        bool better = x[k] < mt[k] || (x[k] != x[k] && mt[k] == mt[k]); \
                        mt[k] = better ? x[k] : mt[k];                         \
                        ix[k] = better ? row : ix[k];                          \
                    }                                                          \
                }                                                              \
            }                                                                  \
            for (int64_t k = 0; k < nk; k++) {                                 \
                if (kind == JAG_SEG_MAX || kind == JAG_SEG_MIN) out[b * K + k0 + k] = mt[k]; \
                idx[b * K + k0 + k] = ix[k];                                   \
            }                                                                  \
            return;                                                            \
        }                                                                      \
        }                                                                      \
    }
DEF_SEG_GENERIC(seg_generic_f32, float, jag__vm_exp_f32)
DEF_SEG_GENERIC(seg_generic_f64, double, jag__vm_exp_f64)
#undef DEF_SEG_GENERIC

/* The output shape: (B, [1], kept trailing dims... [, 1 per reduced one]) */
static int seg_out_shape(const nested_state *s, unsigned mask, bool keepdim, int64_t *shape) {
    int nd = 0;
    shape[nd++] = s->batch;
    if (keepdim) shape[nd++] = 1;
    for (int d = 1; d < s->values->ndim; d++) {
        if (!(mask >> d & 1)) shape[nd++] = s->values->sizes[d];
        else if (keepdim) shape[nd++] = 1;
    }
    return nd;
}

static const char *seg_kind_word(jag_segment_kind k) {
    switch (k) {
    case JAG_SEG_AMAX: case JAG_SEG_MAX: case JAG_SEG_ARGMAX: return "max";
    default: return "min";
    }
}

// values (rows, D...) with segments of rows; mask: the trailing dims of values (bit d: values dim d >= 1) reduced
// with the ragged dim -> outs[0] (B, kept D...) dense [outs[1] int64 indices for max/min]
jag_status jag__segment_reduce_dims(const char *op, const nested_state *s, const jag_segment_spec *sp, jag_tensor **outs) {
    jag_status st = need_float_data(op, s);
    if (st) return st;
    jag_segment_kind kind = sp->kind;
    int64_t Rall = 1;
    for (int d = 1; d < s->values->ndim; d++)
        if (sp->mask >> d & 1) Rall *= s->values->sizes[d];
    if (seg_extreme(kind))
        for (int64_t b = 0; b < s->batch; b++)
            if (seg_len(s, b) == 0 || Rall == 0)
                return jag__error(JAG_EINVAL, "%s: component %lld is empty: its %s over the ragged dim is undefined", op,
                                  (long long)b, seg_kind_word(kind));
    if (sp->mask == 0 && kind <= JAG_SEG_AMIN) return jag__segment_reduce(op, s, kind, sp->keepdim, outs);
    int64_t shape[JAG_MAX_DIMS];
    int nd = seg_out_shape(s, sp->mask, sp->keepdim, shape);
    seg_geom g;
    if ((st = seg_geom_make(op, s, sp->mask, &g))) return st;
    bool has_idx = kind >= JAG_SEG_MAX, has_val = kind != JAG_SEG_ARGMAX && kind != JAG_SEG_ARGMIN;
    jag_tensor *y = has_val ? jag__tensor_new(op, shape, nd, g.v->dtype, false, false) : NULL;
    jag_tensor *ix = has_idx && (y || !has_val) ? jag__tensor_new(op, shape, nd, JAG_INT64, false, false) : NULL;
    if ((has_val && !y) || (has_idx && !ix)) {
        jag_release(y), jag_release(g.v);
        return jag_last_status();
    }
    bool f64 = g.v->dtype == JAG_FLOAT64;
    const char *in = jag__ptr(g.v);
    char *o = y ? jag__ptr(y) : NULL;
    int64_t *oi = ix ? (int64_t *)jag__ptr(ix) : NULL;
    int64_t blocks = (g.K + COL_BLOCK - 1) / COL_BLOCK, K = g.K, R = g.R, B = g.B;
    if (K == 0) blocks = 0;
    const int64_t *off = g.off;
#pragma omp parallel for schedule(dynamic, 1) if (jag_numel(g.v) > JAG_PARALLEL_GRAIN)
    for (int64_t task = 0; task < B * blocks; task++) {
        int64_t b = task / blocks, k0 = task % blocks * COL_BLOCK, nk = K - k0 < COL_BLOCK ? K - k0 : COL_BLOCK;
        if (f64) seg_generic_f64((const double *)in, (double *)o, oi, K, R, off[b], seg_len(s, b), b, k0, nk, kind, sp->correction);
        else seg_generic_f32((const float *)in, (float *)o, oi, K, R, off[b], seg_len(s, b), b, k0, nk, kind, sp->correction);
    }
    jag_release(g.v);
    if (has_val) outs[0] = y;
    if (has_idx) outs[has_val ? 1 : 0] = ix;
    return JAG_OK;
}

// x values (rows, D...), y = the forward's output (B, kept...) [idx its indices for max/min], g (B, kept...)
// -> values-shaped gradient; rows in holes get 0
jag_status jag__segment_reduce_grad(const char *op, const nested_state *s, const jag_segment_spec *sp, const jag_tensor *y,
                                    const jag_tensor *idx, const jag_tensor *g, jag_tensor **out) {
    seg_geom geo;
    jag_tensor *yc = NULL, *gc = NULL, *ic = NULL, *z = NULL;
    jag_status st = seg_geom_make(op, s, sp->mask, &geo);
    if (st) return st;
    jag_value a1[] = {jag__v_tensor(y)}, a2[] = {jag__v_tensor(g)}, a3[] = {jag__v_tensor(idx)};
    if (y) st = jag__dispatch(JAG_OP_clone, a1, 1, &yc);
    if (!st) st = jag__dispatch(JAG_OP_clone, a2, 1, &gc);
    if (!st && idx) st = jag__dispatch(JAG_OP_clone, a3, 1, &ic);
    if (!st && !(z = jag__tensor_new(op, geo.psz, geo.nd, geo.v->dtype, true, false))) st = jag_last_status();
    if (!st) {
        int64_t B = geo.B, K = geo.K, R = geo.R, C = K * R;
        bool f64 = geo.v->dtype == JAG_FLOAT64, gf64 = gc->dtype == JAG_FLOAT64;
        const char *in = jag__ptr(geo.v), *yp = yc ? jag__ptr(yc) : NULL, *gp = jag__ptr(gc);
        const int64_t *ip = ic ? (const int64_t *)jag__ptr(ic) : NULL;
        char *o = jag__ptr(z);
        jag_segment_kind kind = sp->kind;
        const int64_t *off = geo.off;
#pragma omp parallel for schedule(dynamic, 1) if (jag_numel(z) > JAG_PARALLEL_GRAIN)
        for (int64_t b = 0; b < B; b++) {
            int64_t r0 = off[b], n = seg_len(s, b);
            double cnt = (double)n * (double)R;
            for (int64_t k = 0; k < K; k++) {
                double gv = LOAD(gp, gf64, b * K + k), yv = yp ? LOAD(yp, f64, b * K + k) : 0;
                switch (kind) {
                case JAG_SEG_SUM: case JAG_SEG_MEAN: {
                    double v = kind == JAG_SEG_MEAN ? gv / cnt : gv;
                    for (int64_t r = r0; r < r0 + n; r++)
                        for (int64_t q = 0; q < R; q++) STORE(o, f64, r * C + k * R + q, v);
                    break;
                }
                case JAG_SEG_AMAX: case JAG_SEG_AMIN: { /* split evenly among the ties, as the dense rule */
                    int64_t ties = 0;
                    for (int64_t r = r0; r < r0 + n; r++)
                        for (int64_t q = 0; q < R; q++) {
                            double x = LOAD(in, f64, r * C + k * R + q);
                            ties += x == yv || (isnan(x) && isnan(yv));
                        }
                    for (int64_t r = r0; r < r0 + n && ties; r++)
                        for (int64_t q = 0; q < R; q++) {
                            double x = LOAD(in, f64, r * C + k * R + q);
                            if (x == yv || (isnan(x) && isnan(yv))) STORE(o, f64, r * C + k * R + q, gv / (double)ties);
                        }
                    break;
                }
                case JAG_SEG_LSE: /* g exp(x - y); nothing when y is -inf */
                    if (yv == -INFINITY) break;
                    for (int64_t r = r0; r < r0 + n; r++)
                        for (int64_t q = 0; q < R; q++)
                            STORE(o, f64, r * C + k * R + q, gv * exp(LOAD(in, f64, r * C + k * R + q) - yv));
                    break;
                case JAG_SEG_VAR: case JAG_SEG_STD: { /* var: g 2 (x - mean) / max(N - c, 0); std: g (x - mean) / (max(N - c, 0) y) */
                    double mean = 0, div = cnt - (double)sp->correction;
                    if (div < 0) div = 0;
                    for (int64_t r = r0; r < r0 + n; r++)
                        for (int64_t q = 0; q < R; q++) mean += LOAD(in, f64, r * C + k * R + q);
                    mean = cnt ? mean / cnt : 0;
                    double f = kind == JAG_SEG_VAR ? 2.0 * gv / div : yv == 0 ? 0.0 : gv / (div * yv);
                    for (int64_t r = r0; r < r0 + n; r++)
                        for (int64_t q = 0; q < R; q++)
                            STORE(o, f64, r * C + k * R + q, f * (LOAD(in, f64, r * C + k * R + q) - mean));
                    break;
                }
                default: /* max / min: the winning row */
                    if (n) STORE(o, f64, (r0 + ip[b * K + k]) * C + k, gv);
                    break;
                }
            }
        }
    }
    jag_release(yc), jag_release(gc), jag_release(ic);
    if (!st && geo.moved) { /* back to the values' dim order */
        int64_t inv[JAG_MAX_DIMS];
        for (int d = 0; d < geo.nd; d++) inv[geo.perm[d]] = d;
        jag_tensor *pv = NULL, *zc = NULL;
        jag_value a[] = {jag__v_tensor(z), jag__v_ints(inv, geo.nd)};
        st = jag__dispatch(JAG_OP_permute, a, 2, &pv);
        jag_value c[] = {jag__v_tensor(pv)};
        if (!st) st = jag__dispatch(JAG_OP_clone, c, 1, &zc);
        jag_release(pv), jag_release(z);
        z = zc;
    }
    jag_release(geo.v);
    if (st) {
        jag_release(z);
        return st;
    }
    *out = z;
    return JAG_OK;
}
