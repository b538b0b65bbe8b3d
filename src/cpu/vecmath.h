/*
 * vecmath.h — branch-free float32 exp and the activations built on it
 * (sigmoid, silu, tanh, gelu, gelu_tanh), written so that gcc -O3 vectorises
 * a contiguous loop calling them (glibc's expf, tanhf and erfcf do not
 * vectorise without -ffast-math, and erfcf takes data-dependent fast paths).
 *
 * No branches and no tables: every lane runs the same instructions, so the
 * time does not depend on the values (zeros cost what random data costs).
 * Special values fall out of the arithmetic or one select: NaN propagates,
 * exp overflows to inf and underflows through the denormals to 0 as expf.
 *
 * Accuracy, measured against a double-precision reference (the exact value
 * rounded to double) over every 7th float32 bit pattern of the range where
 * the result is neither constant nor 0 nor NaN, plus +-0, +-inf, NaN, the
 * denormals and the edges of overflow and underflow; the error is |y - ref|
 * in units of the float32 ulp at ref (2^-149 in the denormals):
 *     exp 1.01, sigmoid 1.63, silu 2.14, tanh 1.82, gelu 2.84, gelu_tanh 2.50
 * with FMA (-march=native on x86-64 with FMA3); without FMA (JAG_PORTABLE)
 * exp 1.00, sigmoid 1.62, silu 2.12, tanh 1.83, gelu 3.27, gelu_tanh 2.53.
 * (tests/test_pointwise.c asserts these bounds through the public ops.)
 *
 * Polynomials: float32 coefficients fitted by the Remez exchange algorithm
 * (weighted for relative error) in 50-digit arithmetic, each coefficient
 * rounded to float32 from the highest degree down with the lower ones refitted
 * after each rounding; where the constant term's rounding would show, it is
 * carried as hi + lo. The fit errors below are those of the rounded
 * coefficients in exact arithmetic.
 */
#ifndef JAG_VECMATH_H
#define JAG_VECMATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* a * b + c, fused when the target has a fused multiply-add (gcc defines
 * FP_FAST_FMAF then, e.g. with -march=native on x86-64 with FMA3). Without
 * one fmaf would be a libm call that does not vectorise; the plain form
 * rounds twice and the bounds above hold for both. The project compiles
 * ISO C11, so gcc never contracts a * b + c by itself (-ffp-contract=off). */
#ifdef FP_FAST_FMAF
#define JAG__VM_FMA(a, b, c) fmaf(a, b, c)
#else
#define JAG__VM_FMA(a, b, c) ((a) * (b) + (c))
#endif

static inline uint32_t jag__vm_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float jag__vm_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- exp ----------------------------------------------------------------- */

/* exp(x) as the product p * s1 * s2: p = exp(r) in [0.707, 1.415] and two
 * powers of two with s1 * s2 = 2^k, where x = k ln2 + r, |r| <= ln2/2.
 * Splitting 2^k keeps both factors normal floats for k in [-174, 130], so
 * (p * s1) * s2 is exact up to its last multiply and rounds once, also into
 * the denormals and to inf. Callers that multiply p by something first (silu:
 * x * p) keep full accuracy where exp(x) alone would be denormal. */
typedef struct jag__vm_exp_parts {
    float p, s1, s2;
} jag__vm_exp_parts;

/* The part shared by both argument types: r in [-0.3467, 0.3467] and k an
 * integer-valued float in [-174, 130]. */
static inline jag__vm_exp_parts jag__vm_exp_finish(float r, float k) {
    /* exp(r) = 1 + r + r^2 Q(r), Q of degree 4: relative error 3.7e-9. */
    float q = 1.381456153e-03f;
    q = JAG__VM_FMA(q, r, 8.368735202e-03f);
    q = JAG__VM_FMA(q, r, 4.166838899e-02f);
    q = JAG__VM_FMA(q, r, 1.666652113e-01f);
    q = JAG__VM_FMA(q, r, 4.999999404e-01f);
    jag__vm_exp_parts e;
    e.p = 1.0f + JAG__VM_FMA(r * r, q, r);
    /* k in two's complement: the low bits of k + 1.5 * 2^23. */
    uint32_t ku = jag__vm_bits(k + 12582912.0f) - 0x4b400000u;
    uint32_t h = (ku + 256u) >> 1; /* floor(k / 2) + 128 */
    e.s1 = jag__vm_float((h - 1u) << 23);         /* 2^floor(k/2) */
    e.s2 = jag__vm_float((ku + 255u - h) << 23);  /* 2^(k - floor(k/2)) */
    return e;
}

/* Parts of exp(x) for float x. x is clamped to [-120, 90] first (exp there
 * is already 0 or inf in float; a NaN passes the clamps and makes p NaN).
 * k = round(x log2 e) by adding and subtracting 1.5 * 2^23; r = x - k ln2 in
 * two steps, ln2 = 0x1.63p-1 + lo: k * 0x1.63p-1 has at most 17 bits and
 * x - k * 0x1.63p-1 is exact, so r carries only the rounding of its last
 * step. */
static inline jag__vm_exp_parts jag__vm_exp_parts_f32(float x) {
    x = x < -120.0f ? -120.0f : x;
    x = x > 90.0f ? 90.0f : x;
    float k = (x * 1.44269502f + 12582912.0f) - 12582912.0f;
    float r = JAG__VM_FMA(k, -0.693359375f, x);
    r = JAG__VM_FMA(k, 2.12194442e-4f, r);
    return jag__vm_exp_finish(r, k);
}

/* Parts of exp(x) for an argument computed in double (gelu's -x^2/2,
 * gelu_tanh's polynomial): the reduction runs in double, so the argument's
 * extra precision reaches r. */
static inline jag__vm_exp_parts jag__vm_exp_parts_f64(double x) {
    x = x < -120.0 ? -120.0 : x;
    x = x > 90.0 ? 90.0 : x;
    double k = (x * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0;
    float r = (float)(x - k * 0.69314718055994531);
    return jag__vm_exp_finish(r, (float)k);
}

/* expf(x), max error 1.01 ulp (1.00 without FMA). */
static inline float jag__vm_exp_f32(float x) {
    jag__vm_exp_parts e = jag__vm_exp_parts_f32(x);
    return (e.p * e.s1) * e.s2;
}

/* ---- sigmoid, silu, gelu_tanh ---------------------------------------------- */

/* sigmoid(x) = 1 / (1 + exp(-x)): with e = exp(-|x|) in (0, 1], 1 / (1 + e)
 * for x >= 0 and e / (1 + e) for x < 0, so nothing overflows and the negative
 * tail keeps its relative accuracy down to the denormals. Max error 1.63 ulp. */
static inline float jag__vm_sigmoid_f32(float x) {
    float e = jag__vm_exp_f32(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

/* x * sigmoid(v) where e holds the parts of exp(-|v|) and v has x's sign:
 * x / (1 + e) for x >= 0, and for x < 0 (x p / (1 + e)) s1 s2, scaled last,
 * so that the result keeps its accuracy where exp(-|v|) alone would be
 * denormal (silu(-100) = -3.7e-42 has 12 significant bits; -100 * sigmoid(-100)
 * would have 5). */
static inline float jag__vm_x_sigmoid(float x, jag__vm_exp_parts e) {
    float d = 1.0f + (e.p * e.s1) * e.s2;
    bool pos = x >= 0.0f;
    float y = (x * (pos ? 1.0f : e.p)) / d;
    return pos ? y : (y * e.s1) * e.s2;
}

/* silu(x) = x * sigmoid(x). Below -120 the parts are clamped: the result is
 * x * 0 there (-0, and NaN for -inf, as x * sigmoid(x) = -inf * 0 in the
 * reference). Max error 2.14 ulp. */
static inline float jag__vm_silu_f32(float x) {
    float y = jag__vm_x_sigmoid(x, jag__vm_exp_parts_f32(-fabsf(x)));
    return x < -120.0f ? x * 0.0f : y;
}

/* gelu_tanh(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), is
 * x * sigmoid(2u), which does not cancel for negative x. 2u is computed in
 * double: the exp's argument reaches -104 before the result underflows, and
 * its float rounding (amplified by |2u|) alone would cost 10 ulp there. Below
 * -20 the result is x * 0 (-0, NaN for -inf). Max error 2.50 ulp. */
static inline float jag__vm_gelu_tanh_f32(float x) {
    double xd = x;
    double v = xd * (1.5957691216057308 + 0.071354816276220356 * (xd * xd)); /* 2u */
    float y = jag__vm_x_sigmoid(x, jag__vm_exp_parts_f64(-fabs(v)));
    return x < -20.0f ? x * 0.0f : y;
}

/* ---- tanh ------------------------------------------------------------------ */

/* tanh(x): for |x| >= 0.625, (1 - e) / (1 + e) with e = exp(-2|x|) and x's
 * sign; below, where 1 - e cancels, x + x^3 R(x^2) with R of degree 5
 * (relative error 2.6e-9). Odd, NaN gives NaN, +-inf gives +-1. Max error
 * 1.82 ulp. */
static inline float jag__vm_tanh_f32(float x) {
    float a = fabsf(x);
    float e = jag__vm_exp_f32(-2.0f * a);
    float big = (1.0f - e) / (1.0f + e);
    float s = a * a;
    float r = 2.142962767e-03f;
    r = JAG__VM_FMA(r, s, -8.177399635e-03f);
    r = JAG__VM_FMA(r, s, 2.170070447e-02f);
    r = JAG__VM_FMA(r, s, -5.394676328e-02f);
    r = JAG__VM_FMA(r, s, 1.333320588e-01f);
    r = JAG__VM_FMA(r, s, -3.333333135e-01f);
    float small = JAG__VM_FMA(a * s, r, a);
    return copysignf(a < 0.625f ? small : big, x);
}

/* ---- gelu (erf form) ------------------------------------------------------- */

/* gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 the normal CDF.
 *   |x| < 0.7: Phi(x) = 1/2 + x P(x^2), P of degree 5 (relative error of
 *              Phi 1.0e-9, including the cancellation for x < 0);
 *   |x| >= 0.7, t = |x|: Phi(-t) = exp(-t^2/2) M(t), M(t) = w S(w) with
 *              w = 1 / (1 + t/4) in (0, 0.86] and S of degree 9 (relative
 *              error 3.9e-9 on t in [0.7, 15]); Phi(x) = Phi(-t) for x < 0,
 *              1 - Phi(-t) for x > 0 (no cancellation: Phi(-t) <= 0.25).
 * t^2/2 is exact in double, so the steep exp(-t^2/2) sees an exact argument
 * (a float x / sqrt 2 would cost ~x^2/2 ulp: 50 at x = -10). In the negative
 * tail the scaling by 2^k comes last (see jag__vm_x_sigmoid). For x below
 * -15.5 the clamped exp gives 0 (and -inf * 0 = NaN at -inf, as the reference
 * 0.5 x (1 + erf(x / sqrt 2))). Max error 2.84 ulp. */
static inline float jag__vm_gelu_f32(float x) {
    float s = x * x;
    float pa = -8.423653526e-06f;
    pa = JAG__VM_FMA(pa, s, 1.148042647e-04f);
    pa = JAG__VM_FMA(pa, s, -1.187138027e-03f);
    pa = JAG__VM_FMA(pa, s, 9.973528795e-03f);
    pa = JAG__VM_FMA(pa, s, -6.649038196e-02f);
    pa = JAG__VM_FMA(pa, s, -9.909485676e-09f) + 3.989422917e-01f;
    float near0 = x * JAG__VM_FMA(x, pa, 0.5f);

    float t = fabsf(x);
    float w = 4.0f / (4.0f + t);
    float sw = 2.435300872e-02f;
    sw = JAG__VM_FMA(sw, w, -1.011479422e-01f);
    sw = JAG__VM_FMA(sw, w, 1.338170469e-01f);
    sw = JAG__VM_FMA(sw, w, -7.169640809e-02f);
    sw = JAG__VM_FMA(sw, w, 8.909776062e-02f);
    sw = JAG__VM_FMA(sw, w, 4.888565466e-02f);
    sw = JAG__VM_FMA(sw, w, 8.409039676e-02f);
    sw = JAG__VM_FMA(sw, w, 9.310201555e-02f);
    sw = JAG__VM_FMA(sw, w, 9.976504743e-02f);
    sw = JAG__VM_FMA(sw, w, 3.179741137e-09f) + 9.973464906e-02f;
    double xd = x;
    jag__vm_exp_parts e = jag__vm_exp_parts_f64(-0.5 * (xd * xd));
    float q = (w * sw) * e.p; /* Phi(-t) = q s1 s2 */
    float neg = ((x * q) * e.s1) * e.s2;
    float pos = x * (1.0f - (q * e.s1) * e.s2);
    float tail = x < 0.0f ? neg : pos;
    return t < 0.7f ? near0 : tail;
}

#endif /* JAG_VECMATH_H */
