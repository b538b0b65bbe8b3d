/*
 * vecmath.h — branch-free exp and the activations built on it (sigmoid, silu,
 * tanh, gelu, gelu_tanh) for the pointwise kernels, written so that gcc -O3
 * vectorises a contiguous loop calling them: glibc's expf, tanhf and erfcf
 * are a call per element (no vectorisation without -ffast-math), and tanh and
 * erfc take data-dependent fast paths.
 *
 * No branches and no tables: every lane runs the same instructions, so the
 * time does not depend on the values (zeros cost what random data costs).
 * Special values fall out of the arithmetic or one select: NaN propagates,
 * exp overflows to inf and underflows through the denormals to 0 as expf
 * does, +-inf give the limits (or NaN where the reference's formula gives
 * -inf * 0).
 *
 * float32 accuracy, measured against a double reference (the stable double
 * formula through glibc's exp, tanh, erfc), in float32 ulps at the reference
 * (2^-149 in the denormals), over every float32 bit pattern with |x| in
 * [2^-12, 128), every 7th bit pattern of the whole range (denormals, huge
 * values, both signs), every pattern within 2^18 of the points where a
 * formula switches or the result overflows or underflows, and the special
 * values; max error, with FMA / without (JAG_PORTABLE, no -march=native):
 *     exp        1.010 / 0.982      sigmoid    2.402 / 2.402
 *     silu       2.666 / 2.750      tanh       1.509 / 1.519
 *     gelu       0.503 / 0.503      gelu_tanh  0.562 / 0.562
 * exp, sigmoid, silu and tanh compute in float (fast: at memory bandwidth on
 * one core); gelu and gelu_tanh compute in double and round once (see there).
 * tests/test_pointwise.c asserts these bounds through the public ops.
 *
 * Polynomials: coefficients fitted by the Remez exchange algorithm (weighted
 * for relative error) in 50-digit arithmetic; float32 ones rounded from the
 * highest degree down, the lower ones refitted after each rounding. The fit
 * errors quoted are those of the rounded coefficients in exact arithmetic.
 */
#ifndef JAG_VECMATH_H
#define JAG_VECMATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../core/half.h" /* jag__f32_bits, jag__f32_from_bits */

/* a * b + c, fused when the target has a fused multiply-add (gcc defines
 * FP_FAST_FMAF / FP_FAST_FMA then, e.g. with -march=native on x86-64 with
 * FMA3). Without one fmaf would be a libm call that does not vectorise; the
 * plain form rounds twice and the bounds above hold for both. The project
 * compiles ISO C11, so gcc never contracts a * b + c by itself
 * (-ffp-contract=off). */
#ifdef FP_FAST_FMAF
#define JAG__VM_FMA(a, b, c) fmaf(a, b, c)
#else
#define JAG__VM_FMA(a, b, c) ((a) * (b) + (c))
#endif
#ifdef FP_FAST_FMA
#define JAG__VM_FMAD(a, b, c) fma(a, b, c)
#else
#define JAG__VM_FMAD(a, b, c) ((a) * (b) + (c))
#endif


/* ---- exp ----------------------------------------------------------------- */

/* exp(x) = (p * s1) * s2, x = k ln2 + r with |r| <= ln2/2 (a hair more
 * after rounding): p = exp(r) in [0.707, 1.415] and two powers of two with
 * s1 * s2 = 2^k. Splitting 2^k keeps both factors normal floats for k in
 * [-174, 130], so (p * s1) * s2 is exact up to its last multiply and rounds
 * once, also into the denormals and to inf. pm1 = p - 1 before its rounding
 * into p (callers that multiply by p use it: x + x pm1 rounds once). */
typedef struct jag__vm_exp_parts {
    float p, pm1, s1, s2;
} jag__vm_exp_parts;

/* x is clamped to [-120, 90] first: exp there is already 0 or inf in float,
 * and k stays in range (a NaN passes both clamps and makes p NaN, and with it
 * every result built from p). k = round(x log2 e) by adding and subtracting
 * 1.5 * 2^23; r = x - k ln2 in two steps with ln2 = 0x1.63p-1 + lo:
 * k * 0x1.63p-1 has at most 17 bits and x - k * 0x1.63p-1 is exact, so r
 * carries only the rounding of its last step. exp(r) = 1 + r + r^2 Q(r), Q
 * of degree 4 (relative error 3.7e-9). */
static inline jag__vm_exp_parts jag__vm_exp_parts_f32(float x) {
    x = x < -120.0f ? -120.0f : x;
    x = x > 90.0f ? 90.0f : x;
    float k = (x * 1.44269502f + 12582912.0f) - 12582912.0f;
    float r = JAG__VM_FMA(k, -0.693359375f, x);
    r = JAG__VM_FMA(k, 2.12194440e-4f, r);
    float q = 1.381456153e-03f;
    q = JAG__VM_FMA(q, r, 8.368735202e-03f);
    q = JAG__VM_FMA(q, r, 4.166838899e-02f);
    q = JAG__VM_FMA(q, r, 1.666652113e-01f);
    q = JAG__VM_FMA(q, r, 4.999999404e-01f);
    jag__vm_exp_parts e;
    e.pm1 = JAG__VM_FMA(r * r, q, r);
    e.p = 1.0f + e.pm1;
    /* k in two's complement: the low bits of k + 1.5 * 2^23. */
    uint32_t ku = jag__f32_bits(k + 12582912.0f) - 0x4b400000u;
    uint32_t h = (ku + 256u) >> 1;               /* floor(k / 2) + 128 */
    e.s1 = jag__f32_from_bits((h - 1u) << 23);        /* 2^floor(k/2) */
    e.s2 = jag__f32_from_bits((ku + 255u - h) << 23); /* 2^(k - floor(k/2)) */
    return e;
}

/* expf(x). Max error 1.010 ulp. */
static inline float jag__vm_exp_f32(float x) {
    jag__vm_exp_parts e = jag__vm_exp_parts_f32(x);
    return (e.p * e.s1) * e.s2;
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
/* jag__vm_exp_parts_f32 on 8 lanes for the AVX2 kernels (attention.c,
 * sleef_unary.c): the same operations in the same order (fmaf is one fused
 * multiply-add with FMA, where FP_FAST_FMAF holds), so the same parts lane
 * by lane. The clamps are max(-120, x) and min(90, x): a NaN x, the second
 * operand, passes through both, as through the scalar compares. */
typedef struct jag__vm8_exp_parts {
    __m256 p, pm1, s1, s2;
} jag__vm8_exp_parts;

static inline jag__vm8_exp_parts jag__vm8_exp_parts_f32(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(90.0f), _mm256_max_ps(_mm256_set1_ps(-120.0f), x));
    __m256 big = _mm256_set1_ps(12582912.0f);
    __m256 k = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269502f)), big), big);
    __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-0.693359375f), x);
    r = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(1.381456153e-03f), r, _mm256_set1_ps(8.368735202e-03f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(4.166838899e-02f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.666652113e-01f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(4.999999404e-01f));
    jag__vm8_exp_parts e;
    e.pm1 = _mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r);
    e.p = _mm256_add_ps(_mm256_set1_ps(1.0f), e.pm1);
    __m256i ku = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(k, big)), _mm256_set1_epi32(0x4b400000));
    __m256i h = _mm256_srli_epi32(_mm256_add_epi32(ku, _mm256_set1_epi32(256)), 1);
    e.s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(h, _mm256_set1_epi32(1)), 23));
    e.s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_add_epi32(ku, _mm256_set1_epi32(255)), h), 23));
    return e;
}
#endif

/* exp(x) for x <= 0, for the max-shifted values of softmax: x = k ln2 + r
 * as in jag__vm_exp_parts_f32, exp(r) by a polynomial of degree 6 (minimax
 * for relative error, 1.9e-9), 2^k added to its exponent (no rounding).
 * Max error 1.052 ulp with FMA, 1.341 without (every float in (-86.5, 0]
 * against libm's double exp). Results below exp(-86.5) = 2.6e-38 flush to
 * 0, as do -inf and NaN; x > 0 gives an unspecified value, so callers deal
 * with NaN and +inf themselves. Cheaper than jag__vm_exp_f32: one select
 * for the clamps, no multiply for the scale. */
static inline float jag__vm_exp_nonpos_f32(float x) {
    float t = JAG__VM_FMA(x, 1.44269502f, 12582912.0f); /* k + 1.5 * 2^23 */
    float k = t - 12582912.0f;
    float r = JAG__VM_FMA(k, -0.693359375f, x);
    r = JAG__VM_FMA(k, 2.12194440e-4f, r);
    float p = 1.38368353e-03f;
    p = JAG__VM_FMA(p, r, 8.37482419e-03f);
    p = JAG__VM_FMA(p, r, 4.16682251e-02f);
    p = JAG__VM_FMA(p, r, 1.66664198e-01f);
    p = JAG__VM_FMA(p, r, 4.99999911e-01f);
    p = JAG__VM_FMA(p, r, 1.0f);
    p = JAG__VM_FMA(p, r, 1.0f);
    float y = jag__f32_from_bits(jag__f32_bits(p) + (jag__f32_bits(t) << 23)); /* k >= -125: normal */
    return x > -86.5f ? y : 0.0f;
}

/* exp(x) for x <= 0 as a term of a sum that has a term exp(0) = 1 (the
 * max-shifted sum of logsumexp), where what counts is each term's absolute
 * error against that 1: 2^(x log2 e) = 2^k p(f), f = x log2 e - k in
 * [-0.5, 0.5], p of degree 5 (minimax for relative error, 7.5e-8), 2^k
 * added to p's exponent. Absolute error at most 1.8e-7 with FMA, 1.9e-7
 * without; relative error at most 2.5e-7 + 1.3e-8 |x| with FMA, 6.6e-7 +
 * 6.2e-8 |x| without (every float in (-86, 0] against libm's double exp),
 * so the log of such a sum is off by at most 1.9e-7. x is clamped at -86
 * (k >= -124: the result stays normal): terms below exp(-86) = 4.5e-38
 * count as 4.5e-38, as do -inf and NaN (callers deal with NaN and +inf).
 * Cheaper still than jag__vm_exp_nonpos_f32: one fused multiply-add for
 * the reduction, one degree less. */
static inline float jag__vm_exp_sum_f32(float x) {
    x = x > -86.0f ? x : -86.0f;
    float t = JAG__VM_FMA(x, 1.44269504f, 12582912.0f); /* k + 1.5 * 2^23 */
    float k = t - 12582912.0f;
    float f = JAG__VM_FMA(x, 1.44269504f, -k);
    float p = 1.32764725e-03f;
    p = JAG__VM_FMA(p, f, 9.67554096e-03f);
    p = JAG__VM_FMA(p, f, 5.55071309e-02f);
    p = JAG__VM_FMA(p, f, 2.40221202e-01f);
    p = JAG__VM_FMA(p, f, 6.93146944e-01f);
    p = JAG__VM_FMA(p, f, 1.00000012f);
    return jag__f32_from_bits(jag__f32_bits(p) + (jag__f32_bits(t) << 23)); /* the low bits of t hold k */
}

/* ---- sigmoid, silu --------------------------------------------------------- */

/* sigmoid(x) = 1 / (1 + exp(-x)): with e = exp(-|x|) in (0, 1], 1 / (1 + e)
 * for x >= 0 and e / (1 + e) for x < 0, so nothing overflows and the negative
 * tail keeps its relative accuracy down to the denormals. Max error 2.402 ulp. */
static inline float jag__vm_sigmoid_f32(float x) {
    float e = jag__vm_exp_f32(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

/* silu(x) = x sigmoid(x) = x / (1 + e) for x >= 0 and x e / (1 + e) for
 * x < 0, e = exp(-|x|) = p 2^k. For x < 0 it is ((x + x pm1) / (1 + e)) 2^k,
 * scaled last: the result keeps its accuracy where e alone would be denormal
 * (silu(-100) = -3.7e-42 has 12 significant bits, sigmoid(-100) only 5), and
 * x + x pm1 rounds once where x * p would round p first. 1 + e is computed as
 * 1 + 2^k + 2^k pm1 for the same reason. Below -120 the parts are clamped, the
 * result is x * 0 (-0, and NaN for -inf, as -inf * sigmoid(-inf) in the
 * reference). Max error 2.750 ulp. */
static inline float jag__vm_silu_f32(float x) {
    jag__vm_exp_parts e = jag__vm_exp_parts_f32(-fabsf(x));
    float s = e.s1 * e.s2; /* 2^k, or 0 below 2^-149 (then 1 + e is 1) */
    float d = JAG__VM_FMA(s, e.pm1, 1.0f + s);
    bool pos = x >= 0.0f;
    float y = (pos ? x : JAG__VM_FMA(x, e.pm1, x)) / d;
    y = pos ? y : (y * e.s1) * e.s2;
    return x < -120.0f ? x * 0.0f : y;
}

/* ---- tanh ------------------------------------------------------------------ */

/* tanh(x): for |x| >= 0.625, (1 - e) / (1 + e) with e = exp(-2|x|) and x's
 * sign; below, where 1 - e cancels, x + x^3 R(x^2) with R of degree 5
 * (relative error 2.6e-9). Odd, NaN gives NaN, +-inf gives +-1. Max error
 * 1.519 ulp. */
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

/* ---- gelu, gelu_tanh: computed in double ------------------------------------ */

/* These two put a steep exp behind a polynomial argument (-x^2/2, -2u), where
 * float rounding of the argument is amplified by its size (x^2/2 ulp: 50 at
 * x = -10), and they cost a division and two polynomials anyway: they run in
 * double (as wide vectors of half the lanes) and round once at the end. */

/* exp(x) for x in [-120, 90] (clamped; NaN passes), relative error 5.2e-11:
 * plenty for a float result, not a double exp. x = k ln2 + r as above, exp(r)
 * = 1 + r + r^2 Q(r) with Q of degree 5, 2^k written into the exponent bits
 * (k in [-174, 130]: a normal double). */
static inline double jag__vm_exp_for_f32(double x) {
    x = x < -120.0 ? -120.0 : x;
    x = x > 90.0 ? 90.0 : x;
    double t = x * 1.4426950408889634 + 6755399441055744.0; /* k + 1.5 * 2^52 */
    double k = t - 6755399441055744.0;
    double r = x - k * 0.69314718055994531;
    double q = 0.00019790312641556314;
    q = JAG__VM_FMAD(q, r, 0.001394468871008197);
    q = JAG__VM_FMAD(q, r, 0.008333497251067806);
    q = JAG__VM_FMAD(q, r, 0.04166629456172078);
    q = JAG__VM_FMAD(q, r, 0.1666666586766068);
    q = JAG__VM_FMAD(q, r, 0.500000006778636);
    double p = 1.0 + JAG__VM_FMAD(r * r, q, r);
    uint64_t tb;
    memcpy(&tb, &t, sizeof tb);
    uint64_t sb = (tb - 0x4338000000000000u + 1023u) << 52; /* 2^k */
    double scale;
    memcpy(&scale, &sb, sizeof scale);
    return p * scale;
}

/* log(s) for a normal s >= 1 (the max-shifted sum of logsumexp), relative
 * error below 1e-11: plenty for a float result, not a double log (glibc's
 * log is a call per element). s = 2^e m with m in [sqrt(1/2), sqrt(2)),
 * log(m) = 2 atanh(u) with u = (m - 1) / (m + 1) in [-0.172, 0.172], the
 * series 2 (u + u^3/3 + ... + u^13/13) (truncation below 2 0.172^15 / 15 =
 * 4.5e-13, against log(s) >= 0.34 where u is that large), e ln2 added. */
static inline double jag__vm_log_ge1_for_f32(double s) {
    uint64_t b;
    memcpy(&b, &s, sizeof b);
    int e = (int)(b >> 52) - 1023; /* an int: AVX2 converts int32, not int64, to double (a loop over this vectorises) */
    uint64_t mb = (b & 0x000fffffffffffffu) | 0x3ff0000000000000u; /* m in [1, 2) */
    double m;
    memcpy(&m, &mb, sizeof m);
    bool big = m > 1.4142135623730951;
    m = big ? 0.5 * m : m;
    double ed = (double)(big ? e + 1 : e);
    double u = (m - 1.0) / (m + 1.0), u2 = u * u;
    double p = 2.0 / 13.0;
    p = JAG__VM_FMAD(p, u2, 2.0 / 11.0);
    p = JAG__VM_FMAD(p, u2, 2.0 / 9.0);
    p = JAG__VM_FMAD(p, u2, 2.0 / 7.0);
    p = JAG__VM_FMAD(p, u2, 2.0 / 5.0);
    p = JAG__VM_FMAD(p, u2, 2.0 / 3.0);
    p = JAG__VM_FMAD(p, u2, 2.0);
    return JAG__VM_FMAD(ed, 0.69314718055994531, u * p);
}

/* gelu_tanh(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), is
 * x sigmoid(2u) = x / (1 + e) for x >= 0 and x e / (1 + e) for x < 0 with
 * e = exp(-|2u|): no cancellation for negative x. Below -20 the result is
 * x * 0 (-0, and NaN for -inf as in the reference). Max error 0.562 ulp. */
static inline float jag__vm_gelu_tanh_f32(float x) {
    double xd = x;
    double v = xd * (1.5957691216057308 + 0.071354816276220356 * (xd * xd)); /* 2u */
    double e = jag__vm_exp_for_f32(-fabs(v));
    float y = (float)(xd * (x >= 0.0f ? 1.0 : e) / (1.0 + e));
    return x < -20.0f ? x * 0.0f : y;
}

/* gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 the normal CDF:
 *   |x| < 1: Phi(x) = 1/2 + x P(x^2), P of degree 6 (relative error of Phi
 *            7.8e-12, including its cancellation for x < 0);
 *   |x| >= 1, t = |x|: Phi(-t) = exp(-t^2/2) M(t), M(t) = w S(w) with
 *            w = 1 / (1 + t/4) in (0, 0.8] and S of degree 9 (relative error
 *            1.5e-10 for t in [1, 16]); Phi(x) = Phi(-t) for x < 0 and
 *            1 - Phi(-t) for x > 0 (no cancellation: Phi(-t) <= 0.16).
 * t^2/2 is exact in double. Below -15.5 the clamped exp makes x Phi(x) round
 * to -0 (and -inf * 0 = NaN at -inf, as the reference 0.5 x (1 + erf(.))).
 * Max error 0.503 ulp. */
static inline float jag__vm_gelu_f32(float x) {
    double xd = x, s = xd * xd;
    double pa = 5.250373346999749e-07;
    pa = JAG__VM_FMAD(pa, s, -9.234254326730857e-06);
    pa = JAG__VM_FMAD(pa, s, 0.0001152699083929164);
    pa = JAG__VM_FMAD(pa, s, -0.0011872577209439885);
    pa = JAG__VM_FMAD(pa, s, 0.009973541208500289);
    pa = JAG__VM_FMAD(pa, s, -0.06649037846104688);
    pa = JAG__VM_FMAD(pa, s, 0.39894228035187557);
    double near0 = xd * JAG__VM_FMAD(xd, pa, 0.5);

    double t = fabs(xd), w = 4.0 / (4.0 + t);
    double sw = 0.0254799466105503;
    sw = JAG__VM_FMAD(sw, w, -0.10623870325533182);
    sw = JAG__VM_FMAD(sw, w, 0.1438123448680765);
    sw = JAG__VM_FMAD(sw, w, -0.08287669595905076);
    sw = JAG__VM_FMAD(sw, w, 0.09693886224616254);
    sw = JAG__VM_FMAD(sw, w, 0.04531441187858676);
    sw = JAG__VM_FMAD(sw, w, 0.08514550159386647);
    sw = JAG__VM_FMAD(sw, w, 0.09290720624123061);
    sw = JAG__VM_FMAD(sw, w, 0.09978543199299382);
    sw = JAG__VM_FMAD(sw, w, 0.09973373099494115);
    double q = w * sw * jag__vm_exp_for_f32(-0.5 * s); /* Phi(-t) */
    double tail = xd * (x < 0.0f ? q : 1.0 - q);
    return (float)(t < 1.0 ? near0 : tail);
}

/* ---- float64: exp, sigmoid, silu, tanh ------------------------------------- */

/* The same constructions in double, for the float64 ops (gelu's erfc stays
 * libm: a double-accurate erfc needs more pieces than is worth it here).
 * Errors against a long double reference (64-bit significand), in float64
 * ulps, over 2^27 inputs per function: uniform in [-800, 800], [-40, 40] and
 * [-1, 1], log-uniform magnitudes in [2^-60, 2^10) of both signs, random bit
 * patterns, and the special values and overflow/underflow edges; max error
 * with FMA / without:
 *     exp      1.009 / 0.977      sigmoid  2.383 / 2.383
 *     silu     2.525 / 2.747      tanh     1.517 / 1.514 */

typedef struct jag__vm_exp_parts_d {
    double p, pm1, s1, s2;
} jag__vm_exp_parts_d;

/* exp(x) = (p * s1) * s2 as jag__vm_exp_parts_f32: x clamped to [-760, 710]
 * (exp is 0 below -745.2 and inf above 709.8), k = round(x log2 e) in
 * [-1097, 1025], r = x - k ln2 with ln2 = fdlibm's 32-bit head + tail (x - k
 * head is exact), exp(r) = 1 + r + r^2 Q(r), Q the Taylor polynomial of degree
 * 11 (truncation 4.2e-18 relative on |r| <= 0.3467), 2^k = s1 * s2 with both
 * normal. */
static inline jag__vm_exp_parts_d jag__vm_exp_parts_f64(double x) {
    x = x < -760.0 ? -760.0 : x;
    x = x > 710.0 ? 710.0 : x;
    double t = x * 1.4426950408889634 + 6755399441055744.0; /* k + 1.5 * 2^52 */
    double k = t - 6755399441055744.0;
    double r = JAG__VM_FMAD(k, -6.93147180369123816490e-01, x);
    r = JAG__VM_FMAD(k, -1.90821492927058770002e-10, r);
    double q = 1.0 / 6227020800.0; /* 1/13! */
    q = JAG__VM_FMAD(q, r, 1.0 / 479001600.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 39916800.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 3628800.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 362880.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 40320.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 5040.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 720.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 120.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 24.0);
    q = JAG__VM_FMAD(q, r, 1.0 / 6.0);
    q = JAG__VM_FMAD(q, r, 0.5);
    jag__vm_exp_parts_d e;
    e.pm1 = JAG__VM_FMAD(r * r, q, r);
    e.p = 1.0 + e.pm1;
    uint64_t tb;
    memcpy(&tb, &t, sizeof tb);
    uint64_t ku = tb - 0x4338000000000000u; /* k in two's complement */
    uint64_t h = (ku + 2048u) >> 1;         /* floor(k / 2) + 1024 */
    uint64_t b1 = (h - 1u) << 52, b2 = (ku + 2047u - h) << 52;
    memcpy(&e.s1, &b1, sizeof b1); /* 2^floor(k/2) */
    memcpy(&e.s2, &b2, sizeof b2); /* 2^(k - floor(k/2)) */
    return e;
}

/* exp(x). Max error 1.009 ulp. */
static inline double jag__vm_exp_f64(double x) {
    jag__vm_exp_parts_d e = jag__vm_exp_parts_f64(x);
    return (e.p * e.s1) * e.s2;
}

/* sigmoid(x) as jag__vm_sigmoid_f32. Max error 2.383 ulp. */
static inline double jag__vm_sigmoid_f64(double x) {
    double e = jag__vm_exp_f64(-fabs(x));
    return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}

/* silu(x) as jag__vm_silu_f32 (the 2^k scaling last keeps the denormal
 * results accurate; x * 0 below -760). Max error 2.747 ulp. */
static inline double jag__vm_silu_f64(double x) {
    jag__vm_exp_parts_d e = jag__vm_exp_parts_f64(-fabs(x));
    double s = e.s1 * e.s2;
    double d = JAG__VM_FMAD(s, e.pm1, 1.0 + s);
    bool pos = x >= 0.0;
    double y = (pos ? x : JAG__VM_FMAD(x, e.pm1, x)) / d;
    y = pos ? y : (y * e.s1) * e.s2;
    return x < -760.0 ? x * 0.0 : y;
}

/* tanh(x) as jag__vm_tanh_f32, R of degree 11 (relative error 3.7e-19).
 * Max error 1.517 ulp. */
static inline double jag__vm_tanh_f64(double x) {
    double a = fabs(x);
    double e = jag__vm_exp_f64(-2.0 * a);
    double big = (1.0 - e) / (1.0 + e);
    double s = a * a;
    double r = 6.042468118209943e-06;
    r = JAG__VM_FMAD(r, s, -3.0187220335438372e-05);
    r = JAG__VM_FMAD(r, s, 9.155841196074547e-05);
    r = JAG__VM_FMAD(r, s, -0.00023701173051818964);
    r = JAG__VM_FMAD(r, s, 0.0005894517992093286);
    r = JAG__VM_FMAD(r, s, -0.001455725948179034);
    r = JAG__VM_FMAD(r, s, 0.0035921139999069308);
    r = JAG__VM_FMAD(r, s, -0.008863234312583963);
    r = JAG__VM_FMAD(r, s, 0.021869488468715954);
    r = JAG__VM_FMAD(r, s, -0.053968253966058935);
    r = JAG__VM_FMAD(r, s, 0.13333333333329742);
    r = JAG__VM_FMAD(r, s, -0.33333333333333315);
    double small = JAG__VM_FMAD(a * s, r, a);
    return copysign(a < 0.625 ? small : big, x);
}

#endif /* JAG_VECMATH_H */
