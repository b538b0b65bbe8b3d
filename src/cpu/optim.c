/*
 * optim.c — fused optimizer steps (SGD, Adam, AdamW) and the gradient-norm
 * pass of clip_grad_norm, over plain contiguous float32 / float64 buffers,
 * with a naive reference beside each kernel.
 *
 * Each fused kernel reads param, grad and state once and writes param and
 * state once (one pass, element by element). The per-element arithmetic is
 * done in the param's dtype, in the order of torch.optim's single-tensor
 * implementations (each tensor op of theirs is one rounding here); the step
 * scalars (bias corrections, step size) are computed in double by the
 * caller and rounded to the dtype once, as torch does with Python floats.
 * Above JAG_GRAIN_OPTIM elements the loop is split across OpenMP threads
 * (static schedule: elements are independent, the result does not depend on
 * the thread count). The clause is `if (parallel : ...)`: a bare `if` on a
 * combined `parallel for simd` applies to the simd construct too, and
 * smaller tensors would run the scalar loop (16 times slower here).
 *
 * The references run the same update as a chain of whole-buffer passes, one
 * per torch op (grad + wd * param, the momentum update, ...), with
 * temporaries: what the fused kernels must equal bit for bit.
 */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

/* The step scalars of Adam at step `step`, as torch computes them in
 * Python floats: step_size = lr / (1 - beta1^step), bc2_sqrt =
 * sqrt(1 - beta2^step). */
static void adam_scalars(const jag__adam_hyper *h, int64_t step, double *step_size, double *bc2_sqrt) {
    double bc1 = 1.0 - pow(h->beta1, (double)step);
    double bc2 = 1.0 - pow(h->beta2, (double)step);
    *step_size = h->lr / bc1;
    *bc2_sqrt = sqrt(bc2);
}

/* torch's lerp(a, b, w) for a scalar weight: a + w (b - a) when |w| < 0.5,
 * else b - (b - a)(1 - w). */
#define LERP(T, a, b, w) ((w) < (T)0.5 ? (a) + (w) * ((b) - (a)) : (b) - ((b) - (a)) * ((T)1 - (w)))

/* ---- SGD ------------------------------------------------------------------- */

/* param, grad, buf: (n) contiguous; buf NULL when momentum == 0. first: the
 * momentum buffer is new (torch's clone of d_p, no dampening).
 *   d = g + wd * p
 *   buf = first ? d : momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf
 *   p = p - lr * d          (torch: p.add_(d, alpha=-lr)) */
/* The loop of the fused SGD kernel. Every choice is a constant argument,
 * so that each copy is a straight-line loop that vectorises (gcc keeps a
 * loop with a select on a loop-invariant flag scalar). */
#define SGD_LOOP(T, MOM, WD, NEST, FIRST)                                      \
    do {                                                                       \
        JAG_PARALLEL_SIMD_IF(n >= JAG_GRAIN_OPTIM,                          \
        for (int64_t i = 0; i < n; i++) {                                      \
            T pi = p[i], d = g[i];                                             \
            if (WD) d = d + wd * pi;                                           \
            if (MOM) {                                                         \
                T b = (FIRST) ? d : buf[i] * mom + damp * d;                   \
                buf[i] = b;                                                    \
                d = (NEST) ? d + mom * b : b;                                  \
            }                                                                  \
            p[i] = pi + nlr * d;                                               \
        });                                                                     \
    } while (0)
#define SGD_MOM(T, WD)                                                         \
    do {                                                                       \
        if (nest) {                                                            \
            if (first) SGD_LOOP(T, true, WD, true, true);                      \
            else SGD_LOOP(T, true, WD, true, false);                           \
        } else {                                                               \
            if (first) SGD_LOOP(T, true, WD, false, true);                     \
            else SGD_LOOP(T, true, WD, false, false);                          \
        }                                                                      \
    } while (0)

#define DEF_SGD(SUF, T)                                                        \
    static void sgd_##SUF(T *restrict p, const T *restrict g, T *restrict buf, int64_t n, const jag__sgd_hyper *h, \
                          bool first) {                                        \
        const T wd = (T)h->weight_decay, mom = (T)h->momentum, damp = (T)(1.0 - h->dampening); \
        const T nlr = (T)(-h->lr);                                             \
        const bool use_wd = h->weight_decay != 0, nest = h->nesterov;          \
        if (h->momentum != 0) {                                                \
            if (use_wd) SGD_MOM(T, true);                                      \
            else SGD_MOM(T, false);                                            \
        } else {                                                               \
            if (use_wd) SGD_LOOP(T, false, true, false, false);                \
            else SGD_LOOP(T, false, false, false, false);                      \
        }                                                                      \
    }                                                                          \
    static void sgd_ref_##SUF(T *p, const T *g, T *buf, int64_t n, const jag__sgd_hyper *h, bool first) { \
        T *d = malloc((size_t)(n ? n : 1) * sizeof(T));                         \
        JAG_ASSERT(d);                                                         \
        for (int64_t i = 0; i < n; i++) d[i] = g[i];                           \
        if (h->weight_decay != 0)                                              \
            for (int64_t i = 0; i < n; i++) d[i] = d[i] + (T)h->weight_decay * p[i]; \
        if (h->momentum != 0) {                                                \
            if (first)                                                         \
                for (int64_t i = 0; i < n; i++) buf[i] = d[i];                 \
            else {                                                             \
                for (int64_t i = 0; i < n; i++) buf[i] = buf[i] * (T)h->momentum; \
                for (int64_t i = 0; i < n; i++) buf[i] = buf[i] + (T)(1.0 - h->dampening) * d[i]; \
            }                                                                  \
            if (h->nesterov)                                                   \
                for (int64_t i = 0; i < n; i++) d[i] = d[i] + (T)h->momentum * buf[i]; \
            else                                                               \
                for (int64_t i = 0; i < n; i++) d[i] = buf[i];                 \
        }                                                                      \
        for (int64_t i = 0; i < n; i++) p[i] = p[i] + (T)(-h->lr) * d[i];      \
        free(d);                                                               \
    }
DEF_SGD(f32, float)
DEF_SGD(f64, double)

void jag__optim_sgd(jag_dtype dt, void *param, const void *grad, void *buf, int64_t n, const jag__sgd_hyper *h,
                    bool first) {
    if (dt == JAG_FLOAT32) sgd_f32(param, grad, buf, n, h, first);
    else sgd_f64(param, grad, buf, n, h, first);
}

void jag__optim_sgd_ref(jag_dtype dt, void *param, const void *grad, void *buf, int64_t n, const jag__sgd_hyper *h,
                        bool first) {
    if (dt == JAG_FLOAT32) sgd_ref_f32(param, grad, buf, n, h, first);
    else sgd_ref_f64(param, grad, buf, n, h, first);
}

/* ---- Adam / AdamW ---------------------------------------------------------- */

/* param, grad, m (exp_avg), v (exp_avg_sq), vmax (max_exp_avg_sq; NULL
 * unless amsgrad): (n) contiguous. step: the step count after this step.
 *   AdamW: p = p * (1 - lr * wd)
 *   Adam:  g = g + wd * p
 *   m = lerp(m, g, 1 - beta1)
 *   v = v * beta2 + (1 - beta2) * g * g
 *   amsgrad: vmax = max(vmax, v), read vmax instead of v below
 *   denom = sqrt(v) / sqrt(1 - beta2^step) + eps
 *   p = p + (-lr / (1 - beta1^step)) * (m / denom) */
/* The loop of the fused Adam kernel, every choice a constant (as
 * SGD_LOOP): AMS amsgrad, DEC AdamW's decay, L2 Adam's, LO the lerp form. */
#define ADAM_LOOP(T, SQRT, AMS, DEC, L2, LO)                                   \
    do {                                                                       \
        JAG_PARALLEL_SIMD_IF(n >= JAG_GRAIN_OPTIM,                          \
        for (int64_t i = 0; i < n; i++) {                                      \
            T pi = p[i], gi = g[i], a = m[i];                                  \
            if (DEC) pi = pi * decay;                                          \
            if (L2) gi = gi + wd * pi;                                         \
            T mi = (LO) ? a + w1 * (gi - a) : gi - (gi - a) * ((T)1 - w1);     \
            T vi = v[i] * b2 + c2 * gi * gi;                                   \
            m[i] = mi, v[i] = vi;                                              \
            if (AMS) {                                                         \
                T x = vmax[i];                                                 \
                vi = (x > vi || x != x) ? x : vi; /* torch.maximum: NaN wins */ \
                vmax[i] = vi;                                                  \
            }                                                                  \
            T den = SQRT(vi) / bc + eps;                                       \
            p[i] = pi + nss * (mi / den);                                      \
        });                                                                     \
    } while (0)
#define ADAM_WD(T, SQRT, AMS, LO)                                              \
    do {                                                                       \
        if (dec) ADAM_LOOP(T, SQRT, AMS, true, false, LO);                     \
        else if (l2) ADAM_LOOP(T, SQRT, AMS, false, true, LO);                 \
        else ADAM_LOOP(T, SQRT, AMS, false, false, LO);                        \
    } while (0)
#define ADAM_LO(T, SQRT, AMS)                                                  \
    do {                                                                       \
        if (w1 < (T)0.5) ADAM_WD(T, SQRT, AMS, true);                          \
        else ADAM_WD(T, SQRT, AMS, false);                                     \
    } while (0)

#define DEF_ADAM(SUF, T, SQRT)                                                     \
    static void adam_##SUF(T *restrict p, const T *restrict g, T *restrict m, T *restrict v, T *restrict vmax, \
                           int64_t n, const jag__adam_hyper *h, int64_t step) { \
        double step_size, bc2s;                                                \
        adam_scalars(h, step, &step_size, &bc2s);                              \
        const T w1 = (T)(1.0 - h->beta1), b2 = (T)h->beta2, c2 = (T)(1.0 - h->beta2); \
        const T wd = (T)h->weight_decay, decay = (T)(1.0 - h->lr * h->weight_decay); \
        const T bc = (T)bc2s, eps = (T)h->eps, nss = (T)(-step_size);          \
        const bool l2 = !h->decoupled && h->weight_decay != 0;                 \
        const bool dec = h->decoupled && h->weight_decay != 0;                 \
        if (h->amsgrad) ADAM_LO(T, SQRT, true);                                \
        else ADAM_LO(T, SQRT, false);                                          \
    }                                                                          \
    static void adam_ref_##SUF(T *p, const T *g0, T *m, T *v, T *vmax, int64_t n, const jag__adam_hyper *h, \
                               int64_t step) {                                 \
        double step_size, bc2s;                                                \
        adam_scalars(h, step, &step_size, &bc2s);                              \
        T *g = malloc((size_t)(n ? n : 1) * sizeof(T));                        \
        T *den = malloc((size_t)(n ? n : 1) * sizeof(T));                      \
        JAG_ASSERT(g && den);                                                  \
        for (int64_t i = 0; i < n; i++) g[i] = g0[i];                          \
        if (h->decoupled && h->weight_decay != 0)                              \
            for (int64_t i = 0; i < n; i++) p[i] = p[i] * (T)(1.0 - h->lr * h->weight_decay); \
        if (!h->decoupled && h->weight_decay != 0)                             \
            for (int64_t i = 0; i < n; i++) g[i] = g[i] + (T)h->weight_decay * p[i]; \
        for (int64_t i = 0; i < n; i++) m[i] = LERP(T, m[i], g[i], (T)(1.0 - h->beta1)); \
        for (int64_t i = 0; i < n; i++) v[i] = v[i] * (T)h->beta2;             \
        for (int64_t i = 0; i < n; i++) v[i] = v[i] + (T)(1.0 - h->beta2) * g[i] * g[i]; \
        const T *src = v;                                                      \
        if (h->amsgrad) {                                                      \
            for (int64_t i = 0; i < n; i++)                                    \
                vmax[i] = (vmax[i] > v[i] || isnan(vmax[i])) ? vmax[i] : v[i]; \
            src = vmax;                                                        \
        }                                                                      \
        for (int64_t i = 0; i < n; i++) den[i] = SQRT(src[i]);                    \
        for (int64_t i = 0; i < n; i++) den[i] = den[i] / (T)bc2s;             \
        for (int64_t i = 0; i < n; i++) den[i] = den[i] + (T)h->eps;           \
        for (int64_t i = 0; i < n; i++) p[i] = p[i] + (T)(-step_size) * (m[i] / den[i]); \
        free(g), free(den);                                                    \
    }
DEF_ADAM(f32, float, sqrtf)
DEF_ADAM(f64, double, sqrt)

void jag__optim_adam(jag_dtype dt, void *param, const void *grad, void *exp_avg, void *exp_avg_sq,
                     void *max_exp_avg_sq, int64_t n, const jag__adam_hyper *h, int64_t step) {
    if (dt == JAG_FLOAT32) adam_f32(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, h, step);
    else adam_f64(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, h, step);
}

void jag__optim_adam_ref(jag_dtype dt, void *param, const void *grad, void *exp_avg, void *exp_avg_sq,
                         void *max_exp_avg_sq, int64_t n, const jag__adam_hyper *h, int64_t step) {
    if (dt == JAG_FLOAT32) adam_ref_f32(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, h, step);
    else adam_ref_f64(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, h, step);
}

/* ---- gradient norms -------------------------------------------------------- */

/* x: (n) contiguous. The accumulated part of a p-norm in double: sum x^2
 * (p == 2), max |x| (p == inf; NaN if any element is NaN), else sum |x|^p.
 * The sum runs over fixed blocks of NORM_BLOCK elements (each a vectorised
 * loop of its own), threads share the blocks, and the block sums are added
 * in block order: the result depends on n only, never on the thread count
 * or the schedule (a training run with clipping repeats bit for bit). */
#define NORM_BLOCK 16384
static double combine(double acc, double a, double p) {
    if (isinf(p)) return (isnan(a) || isnan(acc)) ? NAN : (a > acc ? a : acc);
    return acc + a;
}
#define DEF_NORM_ACC(SUF, T)                                                   \
    static double norm_block_##SUF(const T *x, int64_t n, double p) {          \
        double acc = 0;                                                        \
        if (isinf(p)) {                                                        \
            bool nan = false;                                                  \
            for (int64_t i = 0; i < n; i++) {                                  \
                double a = fabs((double)x[i]);                                 \
                nan |= a != a;                                                 \
                acc = a > acc ? a : acc;                                       \
            }                                                                  \
            return nan ? NAN : acc;                                            \
        }                                                                      \
        if (p == 2) {                                                          \
            _Pragma("omp simd reduction(+ : acc)")                             \
            for (int64_t i = 0; i < n; i++) acc += (double)x[i] * (double)x[i]; \
            return acc;                                                        \
        }                                                                      \
        for (int64_t i = 0; i < n; i++) acc += pow(fabs((double)x[i]), p);     \
        return acc;                                                            \
    }                                                                          \
    static double norm_acc_##SUF(const T *x, int64_t n, double p) {            \
        int64_t nb = (n + NORM_BLOCK - 1) / NORM_BLOCK;                        \
        double *part = nb > 1 ? malloc(sizeof(double) * (size_t)nb) : NULL;    \
        if (!part) { /* one block, or no memory: the same blocks serially */   \
            double acc = 0;                                                    \
            for (int64_t b = 0; b < nb; b++) {                                 \
                int64_t lo = b * NORM_BLOCK, len = n - lo < NORM_BLOCK ? n - lo : NORM_BLOCK; \
                acc = combine(acc, norm_block_##SUF(x + lo, len, p), p);       \
            }                                                                  \
            return acc;                                                        \
        }                                                                      \
        JAG_PARALLEL_IF(n >= JAG_GRAIN_REDUCE, "omp parallel for schedule(static)", \
        for (int64_t b = 0; b < nb; b++) {                                     \
            int64_t lo = b * NORM_BLOCK, len = n - lo < NORM_BLOCK ? n - lo : NORM_BLOCK; \
            part[b] = norm_block_##SUF(x + lo, len, p);                        \
        });                                                                     \
        double acc = 0;                                                        \
        for (int64_t b = 0; b < nb; b++) acc = combine(acc, part[b], p);       \
        free(part);                                                            \
        return acc;                                                            \
    }                                                                          \
    static double norm_acc_ref_##SUF(const T *x, int64_t n, double p) {        \
        double acc = 0;                                                        \
        for (int64_t i = 0; i < n; i++) {                                      \
            double a = fabs((double)x[i]);                                     \
            if (isinf(p)) acc = (isnan(a) || isnan(acc)) ? NAN : (a > acc ? a : acc); \
            else acc += p == 2 ? a * a : pow(a, p);                            \
        }                                                                      \
        return acc;                                                            \
    }
DEF_NORM_ACC(f32, float)
DEF_NORM_ACC(f64, double)

double jag__optim_norm_acc(jag_dtype dt, const void *x, int64_t n, double p) {
    return dt == JAG_FLOAT32 ? norm_acc_f32(x, n, p) : norm_acc_f64(x, n, p);
}

double jag__optim_norm_acc_ref(jag_dtype dt, const void *x, int64_t n, double p) {
    return dt == JAG_FLOAT32 ? norm_acc_ref_f32(x, n, p) : norm_acc_ref_f64(x, n, p);
}
