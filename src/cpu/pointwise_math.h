/*
 * pointwise_math.h — what the pointwise kernels (unary.c, binary.c) share:
 * scalar math that stays accurate where the textbook formula does not, the
 * input-conversion step, and the boxed forms of the naive references the
 * tests compare with.
 */
#ifndef JAG_POINTWISE_MATH_H
#define JAG_POINTWISE_MATH_H

#include "../core/internal.h"
#include "vecmath.h"

#include <math.h>

/* ---- activations -------------------------------------------------------- */

#define JAG_SQRT1_2 0.70710678118654752440   /* 1 / sqrt(2) */
#define JAG_SQRT_2_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define JAG_GELU_KAPPA 0.044715

/* The activations, one element at a time: the branch-free approximations of
 * vecmath.h (vectorised, time independent of the values; errors listed
 * there), except gelu in float64, which is libm's erfc. Where the build has
 * SLEEF, unary.c runs float32 sigmoid, silu and gelu and float64 gelu on it
 * instead (sleef_unary.c: the same formulas and bounds, except float32
 * gelu, computed in float there); these serve builds without it. */

/* sigmoid(x) = 1 / (1 + exp(-x)), computed as 1 / (1 + e) for x >= 0 and
 * e / (1 + e) for x < 0 with e = exp(-|x|) in (0, 1], so that nothing
 * overflows and the result keeps its relative accuracy for large |x| (down
 * to denormals, where 1 / (1 + exp(-x)) would give 0). NaN gives NaN. */
static inline float jag__sigmoid_f32(float x) { return jag__vm_sigmoid_f32(x); }
static inline double jag__sigmoid_f64(double x) { return jag__vm_sigmoid_f64(x); }

/* silu(x) = x * sigmoid(x). silu(-inf) is NaN (-inf * 0), as in torch. */
static inline float jag__silu_f32(float x) { return jag__vm_silu_f32(x); }
static inline double jag__silu_f64(double x) { return jag__vm_silu_f64(x); }

/* gelu(x) = 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): the erfc
 * form keeps relative accuracy for negative x, where 1 + erf(.) cancels. */
static inline float jag__gelu_f32(float x) { return jag__vm_gelu_f32(x); }
static inline double jag__gelu_f64(double x) { return 0.5 * x * erfc(-x * JAG_SQRT1_2); }

/* gelu_tanh(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
 * Since 0.5 (1 + tanh(u)) = sigmoid(2u), it is x * sigmoid(2u), which does not
 * cancel for negative x (and costs an exp instead of a tanh). */
static inline float jag__gelu_tanh_f32(float x) { return jag__vm_gelu_tanh_f32(x); }
static inline double jag__gelu_tanh_f64(double x) {
    double u = JAG_SQRT_2_PI * (x + JAG_GELU_KAPPA * x * x * x);
    return x * jag__sigmoid_f64(2.0 * u);
}

/* ---- the activations of torch.nn.functional, in double ----------------- */

/* Each computes in double; the float32 kernels call them and round once, so
 * their float32 results are within half an ulp of the double value (where
 * the build has SLEEF, float32 selu, mish and logsigmoid run
 * sleef_unary.c's float kernels instead, within a few ulp). NaN
 * gives NaN through every one. Formulas as torch's CPU kernels. */

#define JAG_SELU_ALPHA 1.6732632423543772848170429916717
#define JAG_SELU_SCALE 1.0507009873554804934193349852946

/* log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|). */
static inline double jag__softplus1_f64(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }

/* selu(x) = scale (x > 0 ? x : alpha (e^x - 1)). */
static inline double jag__selu_f64(double x) {
    return JAG_SELU_SCALE * (x > 0 ? x : JAG_SELU_ALPHA * expm1(x));
}
/* hardswish(x) = x min(max(x + 3, 0), 6) / 6 (-inf gives NaN, as torch). */
static inline double jag__hardswish_f64(double x) { return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0; }
/* hardsigmoid(x) = min(max(x + 3, 0), 6) / 6. */
static inline double jag__hardsigmoid_f64(double x) {
    return isnan(x) ? x : fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
}
/* mish(x) = x tanh(softplus(x)). Below -40 tanh(softplus(x)) = e^x within
 * e^x / 2 < 2^-58 relative, so mish(x) = x e^x = silu(x) as closely: those
 * take vecmath.h's silu, whose denormal results (below -708) keep their
 * accuracy, where x times a rounded denormal tanh would lose up to |x| / 2
 * ulp. */
static inline double jag__mish_f64(double x) {
    return x < -40.0 ? jag__vm_silu_f64(x) : x * tanh(jag__softplus1_f64(x));
}
/* logsigmoid(x) = -softplus(-x) = min(x, 0) - log1p(e^-|x|). */
static inline double jag__logsigmoid_f64(double x) { return fmin(x, 0.0) - log1p(exp(-fabs(x))); }

/* The parametrised ones; p holds the op's scalar arguments after x. */
/* leaky_relu(x, slope) = x > 0 ? x : slope x */
static inline double jag__leaky_relu_f64(double x, const double *p) { return x > 0 ? x : x * p[0]; }
/* elu(x, alpha) = x > 0 ? x : alpha (e^x - 1) */
static inline double jag__elu_f64(double x, const double *p) { return x > 0 ? x : p[0] * expm1(x); }
/* softplus(x, beta, threshold) = beta x > threshold ? x : log(1 + e^(beta x)) / beta */
static inline double jag__softplus_f64(double x, const double *p) {
    double bx = x * p[0];
    return bx > p[1] ? x : jag__softplus1_f64(bx) / p[0];
}
/* hardtanh(x, min_val, max_val) = min(max(x, min_val), max_val) */
static inline double jag__hardtanh_f64(double x, const double *p) {
    return isnan(x) ? x : x < p[0] ? p[0] : x > p[1] ? p[1] : x;
}

/* ---- SLEEF array kernels (sleef_unary.c) ---------------------------------- */

/* Whether this build runs the SLEEF kernels below (unary.c). */
bool jag__unary_uses_sleef(void);
/* Whether float32 gelu, erf and erfc run sleef_unary.c's table kernels (a
 * build with SLEEF for an AVX-512 target, or AVX2 with FMA): the tests
 * state their bounds on the tables' ranges. */
bool jag__unary_uses_tables(void);

#ifdef JAG_HAVE_SLEEF
/* y (n) = f(x (n)), contiguous arrays (y == x allowed), on SLEEF's vector
 * functions; the ops, their error bounds and why are in sleef_unary.c.
 * unary.c runs them in place of the element functions below. */
void jag__sleef_sin_f32(float *y, const float *x, int64_t n);
void jag__sleef_cos_f32(float *y, const float *x, int64_t n);
void jag__sleef_log_f32(float *y, const float *x, int64_t n);
void jag__sleef_exp_f32(float *y, const float *x, int64_t n);
void jag__sleef_erf_f32(float *y, const float *x, int64_t n);
void jag__sleef_erfc_f32(float *y, const float *x, int64_t n);
void jag__sleef_log1p_f32(float *y, const float *x, int64_t n);
void jag__sleef_expm1_f32(float *y, const float *x, int64_t n);
void jag__sleef_atan_f32(float *y, const float *x, int64_t n);
void jag__sleef_sigmoid_f32(float *y, const float *x, int64_t n);
void jag__sleef_silu_f32(float *y, const float *x, int64_t n);
void jag__sleef_gelu_f32(float *y, const float *x, int64_t n);
void jag__sleef_selu_f32(float *y, const float *x, int64_t n);
void jag__sleef_logsigmoid_f32(float *y, const float *x, int64_t n);
void jag__sleef_mish_f32(float *y, const float *x, int64_t n);
/* The same for the parametrised elu and softplus: prm holds their scalars
 * (alpha; beta, threshold), already rounded through float32. */
void jag__sleef_elu_f32(float *y, const float *x, int64_t n, const double *prm);
void jag__sleef_softplus_f32(float *y, const float *x, int64_t n, const double *prm);
/* y = x ** prm[0] (binary.c's pow against a scalar exponent): SLEEF's powf,
 * 1.0 ulp, where libm's powf one element at a time took 3.6 ms for 1M
 * floats (now 1.3 ms; torch 1.4 ms) */
void jag__sleef_pow_scalar_f32(float *y, const float *x, int64_t n, const double *prm);
void jag__sleef_sin_f64(double *y, const double *x, int64_t n);
void jag__sleef_cos_f64(double *y, const double *x, int64_t n);
void jag__sleef_log_f64(double *y, const double *x, int64_t n);
void jag__sleef_gelu_f64(double *y, const double *x, int64_t n);
#endif

/* ---- operands ------------------------------------------------------------ */

/* One scalar of any dtype, aligned for all of them (a double scalar operand
 * or add's alpha, converted to the dtype an op computes in). */
typedef union jag__pw_scalar {
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
    uint8_t b;
} jag__pw_scalar;

/* `x` itself (borrowed: no reference taken, *copy set to NULL) when its
 * dtype is `dtype`, else a new contiguous copy converted to `dtype`, also
 * put in *copy for the caller to release. NULL with the error set (naming
 * `op`) when out of memory. Borrowing saves two atomic reference-count
 * updates per operand of every pointwise op. Defined in unary.c. */
const jag_tensor *jag__pw_as_dtype(const char *op, const jag_tensor *x, jag_dtype dtype, jag_tensor **copy);

/* `v` rounded through `dtype` (as storing it into a tensor of that dtype and
 * reading it back would), for the references. */
static inline double jag__pw_round_to(double v, jag_dtype dtype) {
    jag__pw_scalar s;
    jag__store_from_double(&s, dtype, v);
    return jag__load_as_double(&s, dtype);
}

#endif /* JAG_POINTWISE_MATH_H */
