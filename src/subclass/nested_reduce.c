/* nested_reduce.c — ops along the ragged dim of a jagged tensor, on packed
 * values with no padding: segment reductions (sum, mean, amax, amin) to a
 * dense (B, D...) result, segment softmax / log_softmax, and the segment
 * broadcast their gradients need.
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
    static void NAME(const T *in, T *out, int64_t C, int64_t r0, int64_t n, int64_t c0, int64_t nc, bool lg) { \
        T m[COL_BLOCK], sum[COL_BLOCK];                                        \
        for (int64_t c = 0; c < nc; c++) m[c] = -INFINITY, sum[c] = 0;         \
        for (int64_t r = r0; r < r0 + n; r++) {                                \
            const T *x = in + r * C + c0;                                      \
            for (int64_t c = 0; c < nc; c++) m[c] = x[c] > m[c] ? x[c] : m[c]; \
        }                                                                      \
        for (int64_t c = 0; c < nc; c++) /* NaN stays; all -inf: sum 0 -> NaN, as torch */ \
            if (isinf(m[c])) m[c] = 0;                                         \
        for (int64_t r = r0; r < r0 + n; r++) {                                \
            const T *x = in + r * C + c0;                                      \
            T *y = out + r * C + c0;                                           \
            for (int64_t c = 0; c < nc; c++) {                                 \
                T z = x[c] - m[c], e = EXP(z);                                 \
                sum[c] += e;                                                   \
                y[c] = lg ? z : e;                                             \
            }                                                                  \
        }                                                                      \
        for (int64_t c = 0; c < nc; c++) sum[c] = lg ? LOG(sum[c]) : (T)1 / sum[c]; \
        for (int64_t r = r0; r < r0 + n; r++) {                                \
            T *y = out + r * C + c0;                                           \
            if (lg)                                                            \
                for (int64_t c = 0; c < nc; c++) y[c] -= sum[c];               \
            else                                                               \
                for (int64_t c = 0; c < nc; c++) y[c] *= sum[c];               \
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

// x values (R, C), y = amax/amin per segment (B, C), g (B, C) -> values-shaped gradient: g split evenly
// among the rows that reach the extreme (as torch's amax)
jag_status jag__segment_extreme_grad(const char *op, const nested_state *s, const jag_tensor *y, const jag_tensor *g,
                                     jag_tensor **out) {
    jag_tensor *v = NULL, *yc = NULL, *gc = NULL;
    jag_status st = contiguous_values(s, &v);
    jag_value a1[] = {jag__v_tensor(y)}, a2[] = {jag__v_tensor(g)};
    if (!st) st = jag__dispatch(JAG_OP_clone, a1, 1, &yc);
    if (!st) st = jag__dispatch(JAG_OP_clone, a2, 1, &gc);
    jag_tensor *z = st ? NULL : jag__tensor_new(op, v->sizes, v->ndim, v->dtype, true, false);
    if (!st && !z) st = jag_last_status();
    if (!st) {
        int64_t B = s->batch, C = columns(s);
        bool f64 = v->dtype == JAG_FLOAT64;
        const char *in = jag__ptr(v), *yp = jag__ptr(yc), *gp = jag__ptr(gc);
        char *o = jag__ptr(z);
        const int64_t *off = i64p(s->offsets);
        for (int64_t b = 0; b < B; b++) {
            int64_t r0 = off[b], n = seg_len(s, b);
            for (int64_t c = 0; c < C; c++) {
                double m = LOAD(yp, f64, b * C + c);
                int64_t ties = 0;
                for (int64_t r = r0; r < r0 + n; r++) {
                    double x = LOAD(in, f64, r * C + c);
                    ties += x == m || (isnan(x) && isnan(m));
                }
                for (int64_t r = r0; r < r0 + n && ties; r++) {
                    double x = LOAD(in, f64, r * C + c);
                    if (x == m || (isnan(x) && isnan(m))) STORE(o, f64, r * C + c, LOAD(gp, f64, b * C + c) / (double)ties);
                }
            }
        }
    }
    jag_release(v), jag_release(yc), jag_release(gc);
    if (st) {
        jag_release(z);
        return st;
    }
    *out = z;
    return JAG_OK;
}
