/*
 * sleef_unary.c — the pointwise kernels that run SLEEF's vectorised
 * functions (libsleef-dev): sin, cos and log in float32 and float64; exp,
 * erf, erfc, log1p, expm1 and atan in float32; sigmoid, silu, gelu, selu,
 * logsigmoid and mish in float32 (float vector formulas on SLEEF's exp,
 * expm1 and log1p), and the parametrised elu and softplus in float32 (the
 * same, their scalars passed in); gelu in float64 (its erfc). On AVX-512
 * and AVX2 targets float32 gelu, erf and erfc run piecewise polynomials
 * from tables instead (av_gelu_f, av_erf_f, av_erfc_f below: 3.8-11 times
 * the SLEEF and sl_gelu_f speed on AVX-512; av2_* on AVX2, see there),
 * with those kernels for their far tails. "On AVX-512 targets" below
 * means the AVX2 targets too: the same tables, the same bounds.
 *
 * Why SLEEF: glibc's sinf, cosf, logf, erff, log1pf ... are one call per
 * element (gcc vectorises libm calls only under -ffast-math, which the
 * project does not use: NaN and inf must behave), 3-13 ns an element here;
 * SLEEF's vector forms evaluate 16 floats or 8 doubles in about the time of
 * one such call, over the whole range (Payne-Hanek reduction for huge sin and
 * cos arguments) and with IEEE special values. Its float32 exp is also a
 * little faster than vecmath.h's (0.30 against 0.39 ns an element in L1),
 * and sigmoid and silu on it 1.3 and 1.7 times faster. float32 gelu runs in
 * float vectors here (sl_gelu_f, 1.4-1.6 times faster than vecmath.h's
 * double form, which builds without SLEEF keep). Where vecmath.h's
 * hand-written code is as fast or faster it stays, measured the same way:
 * tanh (SLEEF's u10 tanh is 2.3 times slower in float32, 1.8 in float64;
 * its u35 one is 3.5 ulp), float32 gelu_tanh (computed in double for 0.6
 * ulp), exp, sigmoid, silu and gelu_tanh in float64 (SLEEF's double exp is
 * no faster); and so do vecmath.h's callers outside the pointwise ops
 * (softmax, the ragged reductions).
 *
 * Error bounds, in ulps of the result against the exact value
 * (tests/test_unary_accuracy.c asserts them over every binade, the
 * denormals and the special values):
 *     sin, cos, log (both dtypes), exp, erf, log1p, expm1, atan (float32)
 *                         SLEEF's u10: 1.0 ulp (erf's denormal results and
 *                         log1p above 2^100 fixed here, see sl_erf_f and
 *                         sl_log1p_f); on AVX-512 targets erf is the
 *                         piecewise polynomial av_erf_f: 1.0 ulp (every
 *                         float measured: 0.978 at x = 2.4998)
 *     erfc (float32)      SLEEF's u15: 1.5 ulp; on AVX-512 targets
 *                         av_erfc_f: 1.25 ulp below x = 3.9375 (every float
 *                         measured: 1.14), SLEEF's beyond (1.45 measured)
 *     sigmoid (float32)   2.41 ulp, as vecmath.h's (see sl_sigmoid_f)
 *     silu (float32)      2.75 ulp, as vecmath.h's (see sl_silu_f)
 *     gelu (float32)      5.0 ulp (every float with |x| < 18 measured: 4.90
 *                         at x = -12.33; beyond, the result is x or a zero;
 *                         on AVX-512 targets av_gelu_f, 2.0 ulp on [-4.125,
 *                         3.875), every float measured: 1.82 at x = -3.84,
 *                         and sl_gelu_f outside),
 *                         relative accuracy kept down to the denormals, where
 *                         0.5 x (1 + erf(x / sqrt 2)) would cancel to 0 from
 *                         x = -5 on (see sl_gelu_f). Was 0.5 ulp in double:
 *                         torch's float gelu, 0.5 x (1 + erf(x / sqrt 2)) in
 *                         float with a polynomial erf, has no relative bound
 *                         at all below x = -4.
 *     selu (float32)      2.0 ulp (measured 1.58)
 *     logsigmoid (float32) 2.5 ulp (measured 1.46)
 *     mish (float32)      5.0 ulp (every float with |x| < 18 measured: 4.70)
 *     elu (float32)       2.5 ulp (measured 1.28 at alpha 2.9; see sl_elu_f)
 *     softplus (float32)  3.0 ulp (measured 2.43 at beta 0.3; beta x carried
 *                         exactly, see sl_softplus_f)
 *     gelu (float64)      0.5 x erfc(-x / sqrt 2), Sleef_erfcd*_u15: erfc
 *                         within 1.5 ulp of erfc at the rounded argument,
 *                         2.0 ulp for the product (as libm's erfc there,
 *                         whose argument rounds the same way).
 *
 * Vector width: the one the build targets, as the other kernels choose
 * their AVX-512 paths: __m512 (16 floats, 8 doubles) when __AVX512F__,
 * __m256 with AVX2 and FMA, else (JAG_PORTABLE builds: SSE2 is all the
 * compiler may assume) __m128 through SLEEF's own dispatcher, which picks
 * SSE2, SSE4.1 or AVX2 code when the program runs (valgrind, which runs the
 * portable build, decodes all three). The AVX-512 names (Sleef_sinf16_u10)
 * are the AVX-512F code itself, the AVX2 ones are named by their ISA
 * (Sleef_sinf8_u10avx2): a native build calls no dispatcher.
 *
 * Each array kernel below is y[i] = f(x[i]) for i < n on contiguous arrays;
 * y == x is allowed (the strided loop of unary.c computes in place in its
 * buffer). The last n % W elements go through one zero-padded vector (f(0)
 * of the padding lanes is computed and dropped; the project does not trap
 * on floating-point exceptions). The naive reference of each op is
 * jag__ref_unary (unary.c), the textbook formula through libm in double.
 *
 * Without SLEEF (JAG_HAVE_SLEEF undefined: CMake did not find it, or
 * -DJAG_USE_SLEEF=OFF) this file is empty and unary.c runs libm.
 */
#include "pointwise_math.h"

#ifdef JAG_HAVE_SLEEF

/* After pointwise_math.h on purpose: sleef.h defines FP_FAST_FMA(F) when
 * the target has AVX2, which would change vecmath.h's JAG__VM_FMA if that
 * header came later. */
#include <sleef.h>

#include <string.h>

#if defined(__AVX512F__)
#define SL_F32 __m512
#define SL_F64 __m512d
#define SL_WF 16
#define SL_WD 8
#define SL_LOADF _mm512_loadu_ps
#define SL_STOREF _mm512_storeu_ps
#define SL_LOADD _mm512_loadu_pd
#define SL_STORED _mm512_storeu_pd
#define SL_SINF Sleef_sinf16_u10
#define SL_COSF Sleef_cosf16_u10
#define SL_LOGF Sleef_logf16_u10
#define SL_EXPF Sleef_expf16_u10
#define SL_ERFF Sleef_erff16_u10
#define SL_ERFCF Sleef_erfcf16_u15
#define SL_LOG1PF Sleef_log1pf16_u10
#define SL_EXPM1F Sleef_expm1f16_u10
#define SL_ATANF Sleef_atanf16_u10
#define SL_POWF Sleef_powf16_u10
#define SL_SIND Sleef_sind8_u10
#define SL_COSD Sleef_cosd8_u10
#define SL_LOGD Sleef_logd8_u10
#define SL_ERFCD Sleef_erfcd8_u15
typedef __mmask16 sl_mf;
typedef __mmask8 sl_md;
#define SL_ABSF(x) _mm512_abs_ps(x)
#define SL_ABSD(x) _mm512_abs_pd(x)
#define SL_LTF(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define SL_LTD(a, b) _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ)
#define SL_LEF(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ)
#define SL_EQF(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define SL_ANDMF(a, b) ((sl_mf)((a) & (b)))
#define SL_ORMF(a, b) ((sl_mf)((a) | (b)))
#define SL_ANDNOTMD(a, b) ((sl_md)(~(a) & (b)))
#define SL_BITSF(m) ((unsigned)(m))
#define SL_BITSD(m) ((unsigned)(m))
#define SL_SELF(m, t, f) _mm512_mask_blend_ps(m, f, t)
#define SL_SELD(m, t, f) _mm512_mask_blend_pd(m, f, t)
#define SL_SET1F _mm512_set1_ps
#define SL_FMAF _mm512_fmadd_ps
#define SL_MINF _mm512_min_ps
#define SL_MAXF _mm512_max_ps
#define SL_SET1D _mm512_set1_pd
#elif defined(__AVX2__) && defined(__FMA__)
#define SL_F32 __m256
#define SL_F64 __m256d
#define SL_WF 8
#define SL_WD 4
#define SL_LOADF _mm256_loadu_ps
#define SL_STOREF _mm256_storeu_ps
#define SL_LOADD _mm256_loadu_pd
#define SL_STORED _mm256_storeu_pd
#define SL_SINF Sleef_sinf8_u10avx2
#define SL_COSF Sleef_cosf8_u10avx2
#define SL_LOGF Sleef_logf8_u10avx2
#define SL_EXPF Sleef_expf8_u10avx2
#define SL_ERFF Sleef_erff8_u10avx2
#define SL_ERFCF Sleef_erfcf8_u15avx2
#define SL_LOG1PF Sleef_log1pf8_u10avx2
#define SL_EXPM1F Sleef_expm1f8_u10avx2
#define SL_ATANF Sleef_atanf8_u10avx2
#define SL_POWF Sleef_powf8_u10avx2
#define SL_SIND Sleef_sind4_u10avx2
#define SL_COSD Sleef_cosd4_u10avx2
#define SL_LOGD Sleef_logd4_u10avx2
#define SL_ERFCD Sleef_erfcd4_u15avx2
typedef __m256 sl_mf;
typedef __m256d sl_md;
#define SL_ABSF(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define SL_ABSD(x) _mm256_andnot_pd(_mm256_set1_pd(-0.0), x)
#define SL_LTF(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define SL_LTD(a, b) _mm256_cmp_pd(a, b, _CMP_LT_OQ)
#define SL_LEF(a, b) _mm256_cmp_ps(a, b, _CMP_LE_OQ)
#define SL_EQF(a, b) _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
#define SL_ANDMF(a, b) _mm256_and_ps(a, b)
#define SL_ORMF(a, b) _mm256_or_ps(a, b)
#define SL_ANDNOTMD(a, b) _mm256_andnot_pd(a, b)
#define SL_BITSF(m) ((unsigned)_mm256_movemask_ps(m))
#define SL_BITSD(m) ((unsigned)_mm256_movemask_pd(m))
#define SL_SELF(m, t, f) _mm256_blendv_ps(f, t, m)
#define SL_SELD(m, t, f) _mm256_blendv_pd(f, t, m)
#define SL_SET1F _mm256_set1_ps
#define SL_FMAF _mm256_fmadd_ps
#define SL_MINF _mm256_min_ps
#define SL_MAXF _mm256_max_ps
#define SL_SET1D _mm256_set1_pd
#else
#define SL_F32 __m128
#define SL_F64 __m128d
#define SL_WF 4
#define SL_WD 2
#define SL_LOADF _mm_loadu_ps
#define SL_STOREF _mm_storeu_ps
#define SL_LOADD _mm_loadu_pd
#define SL_STORED _mm_storeu_pd
#define SL_SINF Sleef_sinf4_u10
#define SL_COSF Sleef_cosf4_u10
#define SL_LOGF Sleef_logf4_u10
#define SL_EXPF Sleef_expf4_u10
#define SL_ERFF Sleef_erff4_u10
#define SL_ERFCF Sleef_erfcf4_u15
#define SL_LOG1PF Sleef_log1pf4_u10
#define SL_EXPM1F Sleef_expm1f4_u10
#define SL_ATANF Sleef_atanf4_u10
#define SL_POWF Sleef_powf4_u10
#define SL_SIND Sleef_sind2_u10
#define SL_COSD Sleef_cosd2_u10
#define SL_LOGD Sleef_logd2_u10
#define SL_ERFCD Sleef_erfcd2_u15
typedef __m128 sl_mf;
typedef __m128d sl_md;
#define SL_ABSF(x) _mm_andnot_ps(_mm_set1_ps(-0.0f), x)
#define SL_ABSD(x) _mm_andnot_pd(_mm_set1_pd(-0.0), x)
#define SL_LTF(a, b) _mm_cmplt_ps(a, b)
#define SL_LTD(a, b) _mm_cmplt_pd(a, b)
#define SL_LEF(a, b) _mm_cmple_ps(a, b)
#define SL_EQF(a, b) _mm_cmpeq_ps(a, b)
#define SL_ANDMF(a, b) _mm_and_ps(a, b)
#define SL_ORMF(a, b) _mm_or_ps(a, b)
#define SL_ANDNOTMD(a, b) _mm_andnot_pd(a, b)
#define SL_BITSF(m) ((unsigned)_mm_movemask_ps(m))
#define SL_BITSD(m) ((unsigned)_mm_movemask_pd(m))
#define SL_SELF(m, t, f) _mm_or_ps(_mm_and_ps(m, t), _mm_andnot_ps(m, f))
#define SL_SELD(m, t, f) _mm_or_pd(_mm_and_pd(m, t), _mm_andnot_pd(m, f))
#define SL_SET1F _mm_set1_ps
/* a b + c with one rounding to float: a b is exact in double, the sum
 * rounds there and then to float (2^-29 relative beyond half an ulp). */
static inline __m128 sl_fma_sse(__m128 a, __m128 b, __m128 c) {
    __m128d lo = _mm_add_pd(_mm_mul_pd(_mm_cvtps_pd(a), _mm_cvtps_pd(b)), _mm_cvtps_pd(c));
    __m128d hi = _mm_add_pd(_mm_mul_pd(_mm_cvtps_pd(_mm_movehl_ps(a, a)), _mm_cvtps_pd(_mm_movehl_ps(b, b))),
                            _mm_cvtps_pd(_mm_movehl_ps(c, c)));
    return _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
}
#define SL_FMAF sl_fma_sse
#define SL_MINF _mm_min_ps
#define SL_MAXF _mm_max_ps
#define SL_SET1D _mm_set1_pd
#endif
#define SL_ALLF ((1u << SL_WF) - 1u)
#define SL_ALLD ((1u << SL_WD) - 1u)

/* ---- sin and cos: results that do not depend on the other lanes ---------- */

/* SLEEF's sin and cos (u10) choose their argument reduction once per
 * vector: when every lane is below a threshold, a short Cody-Waite
 * reduction; else a longer one (float64: below 1e14) or Payne-Hanek for
 * every lane. Each is within the bound, but a lane's last bit would then
 * depend on its neighbours, so on the layout and on where the threads split
 * a row. So each lane is computed in a vector of its own class: the lanes
 * of a class with the others replaced by a value of the same class (0, 1e6,
 * 1e300: the branch is then the class's), one call per class present;
 * a vector of one class (the usual case) is one call. The thresholds are
 * SLEEF 3.5's (TRIGRANGEMAX2f = 125 for float; TRIGRANGEMAX2 = 15,
 * TRIGRANGEMAX = 1e14 for double); tests/test_unary_accuracy.c checks that
 * strided and contiguous inputs give the same bits. */
#define SL_T0F 125.0f
#define SL_T0D 15.0
#define SL_T1D 1e14

/* NAME(x) = F(x) lane by lane, float32: classes below 125 and the rest */
#define SL_TRIG_F(NAME, F)                                                     \
    static inline SL_F32 NAME(SL_F32 x) {                                      \
        sl_mf small = SL_LTF(SL_ABSF(x), SL_SET1F(SL_T0F));                    \
        unsigned bits = SL_BITSF(small);                                       \
        if (bits == SL_ALLF) return F(x);                                      \
        SL_F32 r = F(SL_SELF(small, SL_SET1F(1e30f), x));                      \
        if (bits) r = SL_SELF(small, F(SL_SELF(small, x, SL_SET1F(0.0f))), r); \
        return r;                                                              \
    }

/* NAME(x) = F(x) lane by lane, float64: classes below 15, below 1e14, the
 * rest (NaN and inf with it) */
#define SL_TRIG_D(NAME, F)                                                     \
    static inline SL_F64 NAME(SL_F64 x) {                                      \
        SL_F64 a = SL_ABSD(x);                                                 \
        sl_md small = SL_LTD(a, SL_SET1D(SL_T0D));                             \
        unsigned bits = SL_BITSD(small);                                       \
        if (bits == SL_ALLD) return F(x);                                      \
        sl_md below1 = SL_LTD(a, SL_SET1D(SL_T1D));                            \
        sl_md mid = SL_ANDNOTMD(small, below1);                                \
        unsigned mbits = SL_BITSD(mid), hbits = SL_ALLD & ~SL_BITSD(below1);   \
        SL_F64 r = SL_SET1D(0.0);                                              \
        if (bits) r = F(SL_SELD(small, x, SL_SET1D(0.0)));                     \
        if (mbits) r = SL_SELD(mid, F(SL_SELD(mid, x, SL_SET1D(1e6))), r);     \
        if (hbits) r = SL_SELD(below1, r, F(SL_SELD(below1, SL_SET1D(1e300), x))); \
        return r;                                                              \
    }

SL_TRIG_F(sl_sin_f, SL_SINF)
SL_TRIG_F(sl_cos_f, SL_COSF)
SL_TRIG_D(sl_sin_d, SL_SIND)
SL_TRIG_D(sl_cos_d, SL_COSD)

/* gelu(x) = 0.5 x erfc(-x / sqrt 2), the order of operations of
 * jag__gelu_f64 (pointwise_math.h), on one vector. */
static inline SL_F64 sl_gelu_d(SL_F64 x) {
    SL_F64 half_x = x * 0.5;
    return half_x * SL_ERFCD(x * -JAG_SQRT1_2);
}

/* gelu(x) = x Phi(x) in float32, Phi the normal CDF, on float vectors (the
 * form of vecmath.h's jag__vm_gelu_f32, which runs in double; its
 * polynomials refitted for float):
 *   |x| < 1/2: x Phi(x) = x (1/2 + x P(x^2)), P of degree 4 (relative
 *            error 2.9e-8, the float rounding of P(0) = 1 / sqrt(2 pi));
 *   t = |x| >= 1/2: Phi(-t) = exp(-t^2/2) M(t), M(t) = w S(w - 0.552) with
 *            w = 4 / (4 + t) in [0.215, 0.889] and S of degree 9 (relative
 *            error 2.6e-8 for t in [1/2, 14.6]; centred, so that its terms
 *            fall off and Horner's rule does not cancel); x Phi(x) = x Phi(-t) for x < 0, x (1 - Phi(-t))
 *            for x > 0 (Phi(-t) <= 0.31: no cancellation).
 * t^2/2 = h + l exactly (h = (t/2) t rounded, l = fma(t/2, t, -h), |l| <=
 * 2^-24 h), and exp(-t^2/2) = exp(-h) (1 - l) within l^2 / 2 < 2^-35: the
 * rounding of the argument, which the steep exp would amplify by t^2/2 (50
 * ulp at x = -10), never happens. For x < 0 the product is (x M(t) (1 -
 * l)) exp(-h), exp last: exp(-h) is SLEEF's (1.0 ulp), and where it is
 * denormal (x below -13.2) its absolute error is scaled by |x M(t)| < 0.4,
 * not by |x| (as x (M exp(-h)) would), so the result's stays under an ulp
 * of the denormals. t is clamped to 20 for the tail (Phi(-20) rounds to 0 in
 * float), so x = inf gives inf, x = -inf gives -inf * 0 = NaN as the
 * reference 0.5 x (1 + erf(x / sqrt 2)), and NaN gives NaN. No lane's
 * result depends on another's. Max error over the test sweep: see the
 * bound table above. */
static inline SL_F32 sl_gelu_f(SL_F32 x) {
    SL_F32 half = SL_SET1F(0.5f), one = SL_SET1F(1.0f), zero = SL_SET1F(0.0f);
    SL_F32 t = SL_ABSF(x);
    SL_F32 s = x * x;
    SL_F32 p = SL_SET1F(0x1.e49f22p-12f);
    p = SL_FMAF(p, s, SL_SET1F(-0x1.654fc4p-10f));
    p = SL_FMAF(p, s, SL_SET1F(0x1.47b8b0p-7f));
    p = SL_FMAF(p, s, SL_SET1F(-0x1.1059b0p-4f));
    p = SL_FMAF(p, s, SL_SET1F(0x1.988454p-2f));
    SL_F32 near0 = x * SL_FMAF(x, p, half);

    SL_F32 tc = SL_MINF(t, SL_SET1F(20.0f));
    SL_F32 ht = half * tc, h = ht * tc, l = SL_FMAF(ht, tc, zero - h);
    SL_F32 e = SL_EXPF(zero - h);
    /* w = 4 / (4 + t) + w_lo: the rounding of 4 + t (d + d_lo, Fast2Sum)
     * and of the quotient (r = 4 - w d, exact by fma) carried, since S
     * amplifies an error in w up to 7 times */
    SL_F32 four = SL_SET1F(4.0f);
    SL_F32 big = SL_MAXF(tc, four), small = SL_MINF(tc, four);
    SL_F32 d = big + small, d_lo = small - (d - big);
    SL_F32 w = four / d;
    SL_F32 r = SL_FMAF(zero - w, d, four);
    SL_F32 w_lo = SL_FMAF(zero - w, d_lo, r) * (w * SL_SET1F(0.25f));
    SL_F32 u = (w - SL_SET1F(0x1.1a9bfcp-1f)) + w_lo; /* w - 0.552, |u| <= 0.34 */
    SL_F32 m = SL_SET1F(0x1.f9723cp-6f);
    m = SL_FMAF(m, u, SL_SET1F(0x1.888002p-6f));
    m = SL_FMAF(m, u, SL_SET1F(-0x1.836d8cp-5f));
    m = SL_FMAF(m, u, SL_SET1F(-0x1.30fff2p-4f));
    m = SL_FMAF(m, u, SL_SET1F(0x1.4972b4p-5f));
    m = SL_FMAF(m, u, SL_SET1F(0x1.04ef00p-2f));
    m = SL_FMAF(m, u, SL_SET1F(0x1.b2ea82p-2f));
    m = SL_FMAF(m, u, SL_SET1F(0x1.cc1332p-2f));
    m = SL_FMAF(m, u, SL_SET1F(0x1.63af70p-2f));
    m = SL_FMAF(m, u, SL_SET1F(0x1.a54f52p-3f));
    SL_F32 wm = SL_FMAF(w, m, w_lo * m);
    wm = SL_FMAF(zero - l, wm, wm); /* M(t) (1 - l) */
    SL_F32 neg = (x * wm) * e, q = wm * e; /* x Phi(-t), Phi(-t) */
    SL_F32 tail = SL_SELF(SL_LTF(x, zero), neg, x * (one - q));
    return SL_SELF(SL_LTF(t, half), near0, tail);
}

/* ---- sigmoid and silu in float32, on SLEEF's exp ---------------------------- */

/* sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, e =
 * exp(-|x|) in (0, 1] (vecmath.h's stable form): nothing overflows, and the
 * negative tail keeps its accuracy down to the denormals (e is exp's result
 * there, within its 1 ulp). NaN gives NaN, +-inf give 1 and 0. Measured
 * 2.402 ulp at most over every float with |x| in [2^-12, 128), as
 * vecmath.h's (beyond, the result is 1 or e itself). */
static inline SL_F32 sl_sigmoid_f(SL_F32 x) {
    SL_F32 zero = SL_SET1F(0.0f), one = SL_SET1F(1.0f);
    SL_F32 e = SL_EXPF(zero - SL_ABSF(x));
    return SL_SELF(SL_LTF(x, zero), e, one) / (one + e);
}

/* silu(x) = x / (1 + exp(-x)): exp's error (1 ulp) passes to 1 + exp(-x)
 * scaled by exp(-x) / (1 + exp(-x)) < 1, then two roundings; measured
 * 2.403 ulp at most over every float with |x| in [2^-12, 128) (the stable
 * form of sigmoid times x, x e / (1 + e), rounds once more: 3.39 ulp).
 * Below -80 exp(-x) heads for overflow and the result for the denormals:
 * those lanes take vecmath.h's silu, which keeps the denormal results'
 * accuracy by scaling 2^k last (and gives NaN at -inf, -inf * 0, as torch);
 * every lane's result depends on its own x only. */
static inline SL_F32 sl_silu_f(SL_F32 x) {
    SL_F32 zero = SL_SET1F(0.0f), one = SL_SET1F(1.0f);
    SL_F32 y = x / (one + SL_EXPF(zero - x));
    sl_mf far = SL_LTF(x, SL_SET1F(-80.0f));
    if (SL_BITSF(far)) {
        float t[SL_WF];
        SL_STOREF(t, x);
        for (int i = 0; i < SL_WF; i++) t[i] = jag__vm_silu_f32(t[i]);
        y = SL_SELF(far, SL_LOADF(t), y);
    }
    return y;
}

/* ---- erf and log1p in float32: SLEEF's, with its two edges fixed ------------ */

/* erf(x) = SLEEF's u10 erff, except for |x| < 2^-14 where erf(x) = c x (1 -
 * x^2 / 3 + ...) = c x within 2^-29 relative (c = 2 / sqrt(pi)): there
 * SLEEF's result rounds c x into the denormals through an intermediate that
 * has already rounded (1.05 ulp of the denormal spacing). Here c x is
 * fma(x', c_hi, x' c_lo) on x' = 2^64 x (normal, exact), c = c_hi + c_lo
 * in two floats (c_lo > 0, so that -0 stays -0), then scaled back by 2^-64 exactly or rounding once into
 * the denormals: within 0.5 ulp plus 2^-29 relative. The kernel of builds
 * without AVX-512 or AVX2 (which run av_erf_f or av2_erf_f instead: unused
 * there, hence the attribute). */
__attribute__((unused)) static inline SL_F32 sl_erf_f(SL_F32 x) {
    SL_F32 y = SL_ERFF(x);
    sl_mf tiny = SL_LTF(SL_ABSF(x), SL_SET1F(0x1p-14f));
    if (SL_BITSF(tiny)) {
        SL_F32 xs = x * SL_SET1F(0x1p64f);
        SL_F32 cx = SL_FMAF(xs, SL_SET1F(0x1.20dd74p+0f), xs * SL_SET1F(0x1.0429b6p-24f)) * SL_SET1F(0x1p-64f);
        y = SL_SELF(tiny, cx, y);
    }
    return y;
}

/* log1p(x) = SLEEF's u10 log1pf, except above 2^100, where SLEEF 3.5's
 * log1pf overflows to inf (its 1 + x is formed in a scaled form that does
 * not reach FLT_MAX): there log1p(x) = log(x) + log1p(1 / x), the last term
 * below 2^-100 and far under half an ulp of log(x) > 69, so SLEEF's logf
 * (1.0 ulp) is the result. */
static inline SL_F32 sl_log1p_f(SL_F32 x) {
    SL_F32 y = SL_LOG1PF(x);
    sl_mf huge = SL_LTF(SL_SET1F(0x1p100f), x);
    if (SL_BITSF(huge)) y = SL_SELF(huge, SL_LOGF(x), y);
    return y;
}

/* ---- selu, logsigmoid and mish in float32, on SLEEF's exp and expm1 -------- */

/* selu(x) = scale x for x > 0, (scale alpha) expm1(x) else, the products'
 * constants rounded to float (half an ulp each): expm1 (1.0 ulp), the
 * constant and the product, 2.0 ulp at most; expm1(-0) = -0 keeps the
 * sign, -inf gives -scale alpha, NaN gives NaN. */
static inline SL_F32 sl_selu_f(SL_F32 x) {
    SL_F32 neg = SL_SET1F((float)(JAG_SELU_SCALE * JAG_SELU_ALPHA)) * SL_EXPM1F(x);
    return SL_SELF(SL_LTF(SL_SET1F(0.0f), x), SL_SET1F((float)JAG_SELU_SCALE) * x, neg);
}

/* logsigmoid(x) = min(x, 0) - log1p(e), e = exp(-|x|) in (0, 1]: both terms
 * are <= 0 (no cancellation), nothing overflows, and for large x the result
 * is -e itself (log1p's 1 ulp, e's 1 ulp scaled by e / ((1 + e) log1p(e))
 * <= 1, the subtraction's half). NaN gives NaN (the log1p term is NaN),
 * -inf gives -inf. */
static inline SL_F32 sl_logsigmoid_f(SL_F32 x) {
    SL_F32 zero = SL_SET1F(0.0f);
    return SL_MINF(x, zero) - sl_log1p_f(SL_EXPF(zero - SL_ABSF(x)));
}

/* mish(x) = x tanh(log(1 + E)), E = e^x: tanh(log(1 + E)) = (2E + E^2) /
 * (2 + 2E + E^2), written with e = exp(-|x|) in (0, 1] so nothing
 * overflows: r = (1 + 2e) / (1 + 2e + 2e^2) for x >= 0 and n / (n + 2), n =
 * e (e + 2), for x < 0 (one exp, one division; neither cancels). Below -80
 * r = e^x within 2^-115 relative, and mish(x) = x e^x = silu(x) as closely;
 * those lanes take vecmath.h's silu, whose denormal results keep their
 * accuracy (x times a rounded denormal e would not). inf gives inf, -inf
 * gives -inf * 0 = NaN (as torch), NaN gives NaN. */
static inline SL_F32 sl_mish_f(SL_F32 x) {
    SL_F32 zero = SL_SET1F(0.0f), one = SL_SET1F(1.0f), two = SL_SET1F(2.0f);
    SL_F32 e = SL_EXPF(zero - SL_ABSF(x));
    SL_F32 n = e * (e + two), p = SL_FMAF(two, e, one);
    SL_F32 num = SL_SELF(SL_LTF(x, zero), n, p);
    SL_F32 den = SL_SELF(SL_LTF(x, zero), n + two, SL_FMAF(two * e, e, p));
    SL_F32 y = x * (num / den);
    sl_mf far = SL_LTF(x, SL_SET1F(-80.0f));
    if (SL_BITSF(far)) {
        float t[SL_WF];
        SL_STOREF(t, x);
        for (int i = 0; i < SL_WF; i++) t[i] = jag__vm_silu_f32(t[i]);
        y = SL_SELF(far, SL_LOADF(t), y);
    }
    return y;
}

/* ---- elu and softplus in float32, on SLEEF's expm1, exp and log1p ---------- */

/* The parametrised ops' float32 kernels take their scalars as floats (p,
 * already rounded to float32, as torch converts them to the tensor's type)
 * and as the doubles they came from (prm, for the scalar fallback). */

/* elu(x, alpha) = x for x > 0, alpha expm1(x) else. expm1 is SLEEF's (1.0
 * ulp); its error, relative, may be up to 2 ulps of the product's binade,
 * and the product rounds once more: 2.5 ulp. For |x| < 2^-25 expm1(x) = x
 * (1 + x / 2 + ...) is x within 2^-26 relative, and alpha x is taken
 * directly: SLEEF's expm1 of a denormal is exact only to its spacing, which
 * a large alpha would scale. -inf gives -alpha, -0 gives alpha * -0, NaN
 * gives NaN. */
static inline SL_F32 sl_elu_f(SL_F32 x, SL_F32 alpha, SL_F32 unused, const double *prm) {
    (void)unused, (void)prm;
    SL_F32 em = SL_SELF(SL_LTF(SL_ABSF(x), SL_SET1F(0x1p-25f)), x, SL_EXPM1F(x));
    return SL_SELF(SL_LTF(SL_SET1F(0.0f), x), x, alpha * em);
}

/* softplus(x, beta, threshold) = x where beta x > threshold, else
 * log(1 + e^(beta x)) / beta = (max(b, 0) + log1p(exp(-|b|))) / beta, b =
 * beta x. b = h + l exactly (h = beta x rounded, l = fma(x, beta, -h)), and
 * exp(-|b|) = exp(-|h|) (1 -+ l) within l^2 / 2 (as sl_gelu_f): the
 * rounding of b, which exp would carry into the result scaled by |b| (40
 * ulp at b = -80), never happens. b > threshold is decided exactly: h >
 * threshold implies b > threshold (b rounds to h), and where h equals it,
 * b is above it when l > 0. For b < 0 the result is log1p(e) / beta, e =
 * exp(b) in (0, 1]: exp (1.0 ulp) and the fma (0.5), log1p (1.0; e's error
 * passes scaled by e / ((1 + e) log1p(e)) <= 1), the quotient (0.5): 3.0
 * ulp; for b >= 0 (h + (l + log1p(e))) / beta, all terms >= 0 but the tiny
 * l. The lanes with b below -80 (exp(b) heads for the denormals, whose
 * absolute error the division by a small beta would scale), h above 2^120
 * (the sums could overflow) or NaN take the double formula of
 * pointwise_math.h, rounded once; every lane's result depends on its own x
 * only. inf gives inf (above any finite threshold), -inf gives 0 (or -0
 * for a negative beta). */
static inline SL_F32 sl_softplus_f(SL_F32 x, SL_F32 beta, SL_F32 thr, const double *prm) {
    SL_F32 zero = SL_SET1F(0.0f);
    SL_F32 h = x * beta, l = SL_FMAF(x, beta, zero - h);
    sl_mf neg = SL_LTF(h, zero);
    SL_F32 e = SL_EXPF(zero - SL_ABSF(h));
    e = SL_FMAF(e, SL_SELF(neg, l, zero - l), e);
    SL_F32 lp = SL_LOG1PF(e);
    SL_F32 r = SL_SELF(neg, lp, h + (l + lp)) / beta;
    sl_mf above = SL_ORMF(SL_LTF(thr, h), SL_ANDMF(SL_EQF(h, thr), SL_LTF(zero, l)));
    r = SL_SELF(above, x, r);
    sl_mf inside = SL_ANDMF(SL_LEF(SL_SET1F(-80.0f), h), SL_LEF(h, SL_SET1F(0x1p120f)));
    if (SL_BITSF(inside) != SL_ALLF) {
        float t[SL_WF], u[SL_WF];
        SL_STOREF(t, x);
        SL_STOREF(u, r);
        for (int i = 0; i < SL_WF; i++)
            if (!(SL_BITSF(inside) >> i & 1u)) u[i] = (float)jag__softplus_f64(t[i], prm);
        r = SL_LOADF(u);
    }
    return r;
}

/* ---- gelu, erf and erfc in float32 on AVX-512: piecewise polynomials ----------
 *
 * SLEEF's u10 erff and u15 erfcf carry double-float intermediates (about 2.5
 * and 3 ns an element here), and sl_gelu_f above an exp, a division and two
 * polynomials (1.1 ns): 1.7-2.4 times slower than torch 2.15's float erf and
 * gelu. Here each function is a polynomial in u on one of 32 intervals of
 * width 1/S, its coefficients picked per lane from 32-entry tables by
 * vpermt2ps (the tables, their fit and its check: scripts/gen_erf_tables.py,
 * erf_tables.h): k = round(S x) (x scaled by a power of two: exact), u = S x
 * - k in [-1/2, 1/2] exact (Sterbenz: S x and k are within a factor 2 unless
 * k = 0, where u = S x), Horner's rule in float with fmas. No exp, no
 * division: 21-25 vector operations for 16 floats. Relative accuracy holds
 * on every interval (each fit is relative to the function there, and the
 * Horner terms fall off: |u| <= 1/2 and the function changes by at most a
 * factor e per unit of u), so it reaches the denormals where the function
 * does (erf near 0) and the tails as far as the tables go. The arguments
 * beyond (|x| >= 3.94 for erfc's positive side, x outside [-4.125, 3.875)
 * for gelu, and NaN) go, lane by lane, to the kernels above (SLEEF's erfcf
 * and sl_gelu_f) when a vector holds any: every lane's result depends on its
 * own x only, whatever its neighbours (tests/test_unary_accuracy.c compares
 * strided and contiguous runs bit for bit).
 *
 * Error bounds (ulps of the result, over every float of the tables' range:
 * tests/test_unary_accuracy.c, which states the bound of the whole op):
 *   erf:  1.0 ulp (every float measured: 0.978 at x = 2.4998).
 *         erf(|x|) with the sign put back; 32 intervals of 1/8 over [0,
 *         3.9375), degree 5; erf = 1 exactly from 3.9375 on (erfc(3.9375) =
 *         2.6e-8 < 2^-25). Below t = 3/16 (intervals 0 and 1) the tables
 *         hold r(t) = erf(t) / t - 1 and erf(t) = t + t r in one fma: r's
 *         error reaches the result scaled by r / (1 + r) < 0.13, where a
 *         polynomial for erf itself passes the rounding of its leading
 *         coefficients (2 / sqrt(pi) lies low in its binade) at up to 1.2
 *         ulp; denormal results round once.
 *   erfc: 1.25 ulp below 3.9375 (every float measured: 1.14), 1.5 beyond.
 *         erfc(|x|) on 32 intervals of 1/8 over [0, 3.9375), degree 6; for
 *         x < 0 erfc(x) = 2 - erfc(|x|) (in [1, 2]: no cancellation);
 *         x >= 3.9375 (down to the denormals, erfc(10.06) rounds to 0) and
 *         NaN: SLEEF's u15 (1.5 ulp).
 *   gelu: 2.0 ulp on [-4.125, 3.875) (every float measured: 1.82 at x =
 *         -3.84), 5.0 outside (sl_gelu_f's bound; the op's contract stays
 *         5.0 ulp). x Phi(x), Phi(x) on 32 intervals of 1/4 over that
 *         range, degree 6 (Phi itself, not 1/2 (1 + erf(x / sqrt 2)): no
 *         cancellation on the negative side), then one product; outside,
 *         and for inf and NaN, sl_gelu_f, except on AVX2 for finite x
 *         (from 3.875 up 0.51 ulp: x - x Q on erfc's table; below -4.125
 *         3.5 ulp: -phi(-x) R(-x); see av2_gelu_f).
 * torch 2.15 for comparison (measured on 2M evenly spaced floats in [-6,
 * 6] against double): torch.erf 0.68 ulp and torch.erfc 0.76 ulp (their
 * slower, accurate kernels), torch's float gelu, 0.5 x (1 + erf(x / sqrt
 * 2)) on its fast vectorised erf (a polynomial in 1 / (1 + p |x|) times
 * exp(-x^2), about 1e-7 absolute), has no relative bound: 65,000 ulp
 * below x = -3.5, 1.7e7 at x = -5.7. */
#if defined(__AVX512F__)
#include "erf_tables.h"

/* The 32-entry table t (two vectors) at each lane's index idx (low 5 bits). */
#define TAB(t, idx) _mm512_permutex2var_ps(_mm512_load_ps(t), idx, _mm512_load_ps((t) + 16))

/* x is 16 floats: k = round(s x) (as an integer, low 5 bits: the table
 * index) and u = s x - k, exact for s a power of two */
static inline __m512 av_reduce(__m512 x, float s, __m512i *idx) {
    __m512 v = _mm512_mul_ps(x, _mm512_set1_ps(s));
    __m512 k = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *idx = _mm512_cvtps_epi32(k); /* NaN and +-inf: 0x80000000 */
    return _mm512_sub_ps(v, k);
}

/* gelu(x) = x Phi(x) (16 floats) */
static inline __m512 av_gelu_f(__m512 x) {
    __m512i idx;
    __m512 u = av_reduce(x, 4.0f, &idx);
    /* k = round(4x) in [-16, 15]: k + 16 in [0, 31] as unsigned (NaN, inf,
     * huge x: not) */
    __mmask16 out = _mm512_cmpgt_epu32_mask(_mm512_add_epi32(idx, _mm512_set1_epi32(16)), _mm512_set1_epi32(31));
    __m512 p = TAB(jag__gelu_tab_c6, idx);
    p = _mm512_fmadd_ps(p, u, TAB(jag__gelu_tab_c5, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__gelu_tab_c4, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__gelu_tab_c3, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__gelu_tab_c2, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__gelu_tab_c1, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__gelu_tab_c0, idx));
    __m512 y = _mm512_mul_ps(x, p);
    if (out) y = _mm512_mask_blend_ps(out, y, sl_gelu_f(x));
    return y;
}

#define AV_ERF_TOP 3.9375f /* erf(t) rounds to 1 from here on, erfc(-t) to 2 */

/* erf(t) or erfc(t) for t = |x| (tc: t clamped below AV_ERF_TOP, NaN kept) */
static inline __m512 av_erf_abs(__m512 tc) {
    __m512i idx;
    __m512 u = av_reduce(tc, 8.0f, &idx);
    __m512 p = TAB(jag__erf_tab_c5, idx);
    p = _mm512_fmadd_ps(p, u, TAB(jag__erf_tab_c4, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__erf_tab_c3, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__erf_tab_c2, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__erf_tab_c1, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__erf_tab_c0, idx));
    /* t < 3/16 (k <= 1): p is erf(t) / t - 1, and erf(t) = t + t p */
    return _mm512_mask_fmadd_ps(p, _mm512_cmp_ps_mask(tc, _mm512_set1_ps(0.1875f), _CMP_LT_OQ), tc, tc);
}
static inline __m512 av_erfc_abs(__m512 tc) {
    __m512i idx;
    __m512 u = av_reduce(tc, 8.0f, &idx);
    __m512 p = TAB(jag__erfc_tab_c6, idx);
    p = _mm512_fmadd_ps(p, u, TAB(jag__erfc_tab_c5, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__erfc_tab_c4, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__erfc_tab_c3, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__erfc_tab_c2, idx));
    p = _mm512_fmadd_ps(p, u, TAB(jag__erfc_tab_c1, idx));
    return _mm512_fmadd_ps(p, u, TAB(jag__erfc_tab_c0, idx));
}

/* The last float below AV_ERF_TOP: its k is 31, never 32 */
#define AV_ERF_CLAMP 0x1.f7fffep+1f

/* erf(x) (16 floats): 1 from AV_ERF_TOP on (inf too), the sign of x put
 * back (-0 stays -0), NaN through the polynomial (min keeps it) */
static inline __m512 av_erf_f(__m512 x) {
    __m512 t = _mm512_abs_ps(x);
    __m512 y = av_erf_abs(_mm512_min_ps(_mm512_set1_ps(AV_ERF_CLAMP), t));
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(t, _mm512_set1_ps(AV_ERF_TOP), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
    /* y | (x & sign) */
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(y), _mm512_castps_si512(x),
                                                         _mm512_set1_epi32(INT32_MIN), 0xf8));
}

/* erfc(x) (16 floats): 2 - erfc(|x|) for x < 0 (2 exactly from -AV_ERF_TOP
 * down, -inf too); SLEEF's for x >= AV_ERF_TOP and NaN */
static inline __m512 av_erfc_f(__m512 x) {
    __m512 t = _mm512_abs_ps(x);
    __m512 y = av_erfc_abs(_mm512_min_ps(_mm512_set1_ps(AV_ERF_CLAMP), t));
    y = _mm512_mask_sub_ps(y, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_set1_ps(2.0f), y);
    __mmask16 out = _mm512_cmp_ps_mask(x, _mm512_set1_ps(AV_ERF_TOP), _CMP_NLT_UQ);
    if (out) y = _mm512_mask_blend_ps(out, y, SL_ERFCF(x));
    return y;
}
#undef TAB
#define SL_FAST_ERF av_erf_f
#define SL_FAST_ERFC av_erfc_f
#define SL_FAST_GELU av_gelu_f
#elif defined(__AVX2__) && defined(__FMA__)
/* The same polynomials on 8 lanes (AVX2 targets: AMD Zen, Intel client
 * chips). AVX2 has no 32-entry permute, and a gather of 8 floats per
 * coefficient costs about as much as SLEEF's erfc; instead each lane loads
 * its interval's row of coefficients (the tables laid out row by row,
 * once) and an 8 x 8 transpose in registers turns the 8 rows into one
 * vector per coefficient. 1M float32 on a Zen 3 core pair, best of 30
 * (from Python): gelu 1305 -> 588 us (sl_gelu_f before), erf 2180 -> 588
 * us (SLEEF's erff8_u10); gelu's backward, which runs erfc, 3.5 -> 1.2 ms.
 * A per-vector pthread_once cost a third of that: SL_ARRAY makes the rows
 * once per call instead (SL_PREPARE). */
#include "erf_tables.h"
#include <pthread.h>

/* row k: coefficients 0..6 of interval k, then 0; made on the first call
 * of an array function (SL_PREPARE in SL_ARRAY) */
static _Alignas(32) float av2_gelu_rows[32][8], av2_erf_rows[32][8], av2_erfc_rows[32][8];
static pthread_once_t av2_rows_once = PTHREAD_ONCE_INIT;

static void av2_make_rows(void) {
    const float *gelu[7] = {jag__gelu_tab_c0, jag__gelu_tab_c1, jag__gelu_tab_c2, jag__gelu_tab_c3,
                            jag__gelu_tab_c4, jag__gelu_tab_c5, jag__gelu_tab_c6};
    const float *erf[6] = {jag__erf_tab_c0, jag__erf_tab_c1, jag__erf_tab_c2, jag__erf_tab_c3, jag__erf_tab_c4, jag__erf_tab_c5};
    const float *erfc[7] = {jag__erfc_tab_c0, jag__erfc_tab_c1, jag__erfc_tab_c2, jag__erfc_tab_c3,
                            jag__erfc_tab_c4, jag__erfc_tab_c5, jag__erfc_tab_c6};
    for (int k = 0; k < 32; k++)
        for (int j = 0; j < 8; j++) {
            av2_gelu_rows[k][j] = j < 7 ? gelu[j][k] : 0.0f;
            av2_erf_rows[k][j] = j < 6 ? erf[j][k] : 0.0f;
            av2_erfc_rows[k][j] = j < 7 ? erfc[j][k] : 0.0f;
        }
}

/* c[j] = coefficient j of each lane's interval (idx & 31): 8 row loads and
 * an 8 x 8 transpose. */
static inline void av2_coeffs(const float (*rows)[8], __m256i idx, __m256 c[8]) {
    _Alignas(32) int32_t k[8];
    _mm256_store_si256((__m256i *)k, _mm256_and_si256(idx, _mm256_set1_epi32(31)));
    __m256 r[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_load_ps(rows[k[i]]);
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 0-3, then 4-7 */
        __m256 *a = t + 4 * h, *o = u + 4 * h;
        o[0] = _mm256_shuffle_ps(a[0], a[2], _MM_SHUFFLE(1, 0, 1, 0));
        o[1] = _mm256_shuffle_ps(a[0], a[2], _MM_SHUFFLE(3, 2, 3, 2));
        o[2] = _mm256_shuffle_ps(a[1], a[3], _MM_SHUFFLE(1, 0, 1, 0));
        o[3] = _mm256_shuffle_ps(a[1], a[3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; j++) {
        c[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        c[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}

/* as av_reduce: k = round(s x) (its integer: the interval), u = s x - k */
static inline __m256 av2_reduce(__m256 x, float s, __m256i *idx) {
    __m256 v = _mm256_mul_ps(x, _mm256_set1_ps(s));
    __m256 k = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *idx = _mm256_cvtps_epi32(k); /* NaN and +-inf: 0x80000000 */
    return _mm256_sub_ps(v, k);
}

/* p = c[deg] u^0 ... evaluated by Horner from c[deg] down to c[0] */
static inline __m256 av2_horner(const __m256 *c, int deg, __m256 u) {
    __m256 p = c[deg];
    for (int j = deg - 1; j >= 0; j--) p = _mm256_fmadd_ps(p, u, c[j]);
    return p;
}

#define AV_ERF_TOP 3.9375f
#define AV_ERF_CLAMP 0x1.f7fffep+1f

/* erfc(t) for t in [0, AV_ERF_TOP) on the table (8 floats), degree 6 */
static inline __m256 av2_erfc_table(__m256 t) {
    __m256i idx;
    __m256 u = av2_reduce(t, 8.0f, &idx), c[8];
    av2_coeffs((const float (*)[8])av2_erfc_rows, idx, c);
    return av2_horner(c, 6, u);
}

/* gelu(x) for finite x < -4.125 (8 floats): with t = -x (clamped at 16,
 * past which gelu(x) is -0 in float32), gelu(x) = -t Q(t) = -phi(t) R(t),
 * phi the normal density and R(t) = t Q(t) / phi(t) (Q = erfc(t / sqrt 2)
 * / 2) a polynomial of degree 6 in s = 1 / t^2 (relative error 1.3e-8 with
 * its float32 coefficients, fitted on t in [4.125, 16]). phi(t) = exp(-h /
 * 2) (1 - l / 2) / sqrt(2 pi) with t^2 = h + l exactly (l by a fused
 * multiply-add: the rounding of t^2, which exp would amplify t^2 / 2 times,
 * is carried), the exp's parts from vecmath.h; the product's scale 2^k goes
 * on last, so that a denormal result rounds once. */
static inline __m256 av2_gelu_neg_tail(__m256 x) {
    __m256 t = _mm256_min_ps(_mm256_set1_ps(16.0f), _mm256_sub_ps(_mm256_setzero_ps(), x));
    __m256 h = _mm256_mul_ps(t, t), l = _mm256_fmsub_ps(t, t, h);
    jag__vm8_exp_parts e = jag__vm8_exp_parts_f32(_mm256_mul_ps(h, _mm256_set1_ps(-0.5f)));
    __m256 s = _mm256_div_ps(_mm256_set1_ps(1.0f), h);
    __m256 r = _mm256_set1_ps(1416.428466796875f);
    r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(-478.01629638671875f));
    r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(88.82527923583984f));
    r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(-14.658472061157227f));
    r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(2.9959557056427f));
    r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(-0.9999765157699585f));
    r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(0.9999999403953552f));
    __m256 cr = _mm256_mul_ps(r, _mm256_set1_ps(0.398942280401432678f)); /* R / sqrt(2 pi) */
    cr = _mm256_fnmadd_ps(cr, _mm256_mul_ps(l, _mm256_set1_ps(0.5f)), cr); /* (1 - l / 2) */
    __m256 m = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(e.p, cr), e.s1), e.s2);
    return _mm256_xor_ps(m, _mm256_set1_ps(-0.0f)); /* -m, -0 where m underflows */
}

/* gelu(x) = x Phi(x) (8 floats), as av_gelu_f, except on the positive
 * tail x >= 3.875 (past the Phi table; an outlier there sent its whole
 * vector through sl_gelu_f, 5.5 times the table's cost on inputs spread
 * over [-5, 5]): there gelu(x) = x - x Q with Q = erfc(x / sqrt 2) / 2 <
 * 5.4e-5 from erfc's table, one fused multiply-add (x Q's error, even 20
 * ulps of Q from rounding x / sqrt 2 first, moves the result by less than
 * 2^-10 ulp: within 0.51 ulp), and from x / sqrt 2 >= 3.9375 (x >= 5.57,
 * +inf) on Q < 2^-25, where gelu(x) rounds to x. The negative tail is
 * av2_gelu_neg_tail's (3.5 ulp, where sl_gelu_f measured 4.9);
 * -inf and NaN stay on sl_gelu_f. */
static __attribute__((noinline)) __m256 av2_gelu_tails(__m256 x, __m256 y, __m256 out);
static inline __m256 av2_gelu_f(__m256 x) {
    __m256i idx;
    __m256 u = av2_reduce(x, 4.0f, &idx), c[8];
    /* k + 16 outside [0, 31] (NaN, inf, |x| large) */
    __m256i off = _mm256_andnot_si256(_mm256_set1_epi32(31), _mm256_add_epi32(idx, _mm256_set1_epi32(16)));
    __m256 out = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpeq_epi32(off, _mm256_setzero_si256()), _mm256_set1_epi32(-1)));
    av2_coeffs((const float (*)[8])av2_gelu_rows, idx, c);
    __m256 y = _mm256_mul_ps(x, av2_horner(c, 6, u));
    return _mm256_movemask_ps(out) ? av2_gelu_tails(x, y, out) : y;
}

/* y with its lanes `out` (past the table) replaced: a function of its own,
 * so that the table's loop stays small enough to be inlined */
static __m256 av2_gelu_tails(__m256 x, __m256 y, __m256 out) {
    __m256 pos = _mm256_and_ps(out, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
    __m256 neg = _mm256_and_ps(out, _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ),
                                                  _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_GT_OQ)));
    __m256 rest = _mm256_andnot_ps(_mm256_or_ps(pos, neg), out);
    if (_mm256_movemask_ps(neg)) y = _mm256_blendv_ps(y, av2_gelu_neg_tail(x), neg);
    if (_mm256_movemask_ps(pos)) {
        __m256 t = _mm256_mul_ps(x, _mm256_set1_ps((float)JAG_SQRT1_2));
        __m256 q = _mm256_mul_ps(_mm256_set1_ps(0.5f), av2_erfc_table(_mm256_min_ps(_mm256_set1_ps(AV_ERF_CLAMP), t)));
        __m256 yp = _mm256_fnmadd_ps(x, q, x);
        yp = _mm256_blendv_ps(yp, x, _mm256_cmp_ps(t, _mm256_set1_ps(AV_ERF_TOP), _CMP_GE_OQ));
        y = _mm256_blendv_ps(y, yp, pos);
    }
    if (_mm256_movemask_ps(rest)) y = _mm256_blendv_ps(y, sl_gelu_f(x), rest);
    return y;
}

/* erf(x) (8 floats), as av_erf_f: erf(t) for t = |x| clamped below
 * AV_ERF_TOP (min keeps a NaN), 1 from there on, the sign of x put back */
static inline __m256 av2_erf_f(__m256 x) {
    __m256 sign = _mm256_set1_ps(-0.0f), t = _mm256_andnot_ps(sign, x);
    __m256 tc = _mm256_min_ps(_mm256_set1_ps(AV_ERF_CLAMP), t), c[8];
    __m256i idx;
    __m256 u = av2_reduce(tc, 8.0f, &idx);
    av2_coeffs((const float (*)[8])av2_erf_rows, idx, c);
    __m256 p = av2_horner(c, 5, u);
    /* t < 3/16: p is erf(t) / t - 1, and erf(t) = t + t p */
    p = _mm256_blendv_ps(p, _mm256_fmadd_ps(p, tc, tc), _mm256_cmp_ps(tc, _mm256_set1_ps(0.1875f), _CMP_LT_OQ));
    p = _mm256_blendv_ps(p, _mm256_set1_ps(1.0f), _mm256_cmp_ps(t, _mm256_set1_ps(AV_ERF_TOP), _CMP_GE_OQ));
    return _mm256_or_ps(p, _mm256_and_ps(x, sign));
}

/* erfc(x) (8 floats), as av_erfc_f: 2 - erfc(|x|) for x < 0, SLEEF's for
 * x >= AV_ERF_TOP and NaN */
static inline __m256 av2_erfc_f(__m256 x) {
    __m256 t = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    __m256 y = av2_erfc_table(_mm256_min_ps(_mm256_set1_ps(AV_ERF_CLAMP), t));
    y = _mm256_blendv_ps(y, _mm256_sub_ps(_mm256_set1_ps(2.0f), y), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    __m256 out = _mm256_cmp_ps(x, _mm256_set1_ps(AV_ERF_TOP), _CMP_NLT_UQ);
    if (_mm256_movemask_ps(out)) y = _mm256_blendv_ps(y, SL_ERFCF(x), out);
    return y;
}
#define SL_FAST_ERF av2_erf_f
#define SL_FAST_ERFC av2_erfc_f
#define SL_FAST_GELU av2_gelu_f
#define SL_PREPARE() pthread_once(&av2_rows_once, av2_make_rows)
#else
#define SL_FAST_ERF sl_erf_f
#define SL_FAST_ERFC SL_ERFCF
#define SL_FAST_GELU sl_gelu_f
#endif
#ifndef SL_PREPARE
#define SL_PREPARE() ((void)0)
#endif

/* y (n) = F(x (n)), T elements, VT vectors of W lanes: whole vectors, then
 * the tail through one zero-padded vector. */
#define SL_ARRAY(NAME, T, VT, W, LOAD, STORE, F)                                 \
    void NAME(T *y, const T *x, int64_t n) {                                     \
        int64_t i = 0;                                                           \
        SL_PREPARE(); /* the AVX2 tables, once */                                \
        for (; i + (W) <= n; i += (W)) {                                         \
            VT v = LOAD(x + i);                                                  \
            STORE(y + i, F(v));                                                  \
        }                                                                        \
        if (i < n) {                                                             \
            T buf[W];                                                            \
            memset(buf, 0, sizeof buf);                                          \
            memcpy(buf, x + i, (size_t)(n - i) * sizeof(T));                     \
            VT v = LOAD(buf);                                                    \
            STORE(buf, F(v));                                                    \
            memcpy(y + i, buf, (size_t)(n - i) * sizeof(T));                     \
        }                                                                        \
    }

/* y (n) = F(x (n); prm), float32, the parametrised ops: as SL_ARRAY, with
 * prm[0], prm[1] (already rounded to float32) broadcast once. */
#define SL_PARAM_ARRAY_F(NAME, F)                                                \
    void NAME(float *y, const float *x, int64_t n, const double *prm) {          \
        SL_F32 p0 = SL_SET1F((float)prm[0]), p1 = SL_SET1F((float)prm[1]);       \
        int64_t i = 0;                                                           \
        for (; i + SL_WF <= n; i += SL_WF) SL_STOREF(y + i, F(SL_LOADF(x + i), p0, p1, prm)); \
        if (i < n) {                                                             \
            float buf[SL_WF];                                                    \
            memset(buf, 0, sizeof buf);                                          \
            memcpy(buf, x + i, (size_t)(n - i) * sizeof(float));                 \
            SL_STOREF(buf, F(SL_LOADF(buf), p0, p1, prm));                       \
            memcpy(y + i, buf, (size_t)(n - i) * sizeof(float));                 \
        }                                                                        \
    }

// x is (n) float32 contiguous, y is (n): y = sin(x), cos(x), log(x), exp(x)
SL_ARRAY(jag__sleef_sin_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, sl_sin_f)
SL_ARRAY(jag__sleef_cos_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, sl_cos_f)
SL_ARRAY(jag__sleef_log_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, SL_LOGF)
SL_ARRAY(jag__sleef_exp_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, SL_EXPF)
// x is (n) float32 contiguous, y is (n): y = erf(x), erfc(x), log1p(x), expm1(x), atan(x)
SL_ARRAY(jag__sleef_erf_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, SL_FAST_ERF)
SL_ARRAY(jag__sleef_erfc_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, SL_FAST_ERFC)
SL_ARRAY(jag__sleef_log1p_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, sl_log1p_f)
SL_ARRAY(jag__sleef_expm1_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, SL_EXPM1F)
SL_ARRAY(jag__sleef_atan_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, SL_ATANF)
// x is (n) float32 contiguous, y is (n): y = sigmoid(x), silu(x), gelu(x)
SL_ARRAY(jag__sleef_sigmoid_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, sl_sigmoid_f)
SL_ARRAY(jag__sleef_silu_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, sl_silu_f)
SL_ARRAY(jag__sleef_gelu_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, SL_FAST_GELU)
// x is (n) float32 contiguous, y is (n): y = selu(x), logsigmoid(x), mish(x)
SL_ARRAY(jag__sleef_selu_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, sl_selu_f)
SL_ARRAY(jag__sleef_logsigmoid_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, sl_logsigmoid_f)
SL_ARRAY(jag__sleef_mish_f32, float, SL_F32, SL_WF, SL_LOADF, SL_STOREF, sl_mish_f)
// x is (n) float32 contiguous, y is (n): y = elu(x; alpha), softplus(x; beta, threshold)
SL_PARAM_ARRAY_F(jag__sleef_elu_f32, sl_elu_f)
SL_PARAM_ARRAY_F(jag__sleef_softplus_f32, sl_softplus_f)
/* x ** b, b = prm[0] (rounded to float32): SLEEF's powf, 1.0 ulp, C99's
 * special cases */
static inline SL_F32 sl_pow_f(SL_F32 x, SL_F32 b, SL_F32 unused, const double *prm) {
    (void)unused, (void)prm;
    return SL_POWF(x, b);
}
// x is (n) float32 contiguous, y is (n): y = x ** b
SL_PARAM_ARRAY_F(jag__sleef_pow_scalar_f32, sl_pow_f)
// x is (n) float64 contiguous, y is (n): y = sin(x), cos(x), log(x), gelu(x)
SL_ARRAY(jag__sleef_sin_f64, double, SL_F64, SL_WD, SL_LOADD, SL_STORED, sl_sin_d)
SL_ARRAY(jag__sleef_cos_f64, double, SL_F64, SL_WD, SL_LOADD, SL_STORED, sl_cos_d)
SL_ARRAY(jag__sleef_log_f64, double, SL_F64, SL_WD, SL_LOADD, SL_STORED, SL_LOGD)
SL_ARRAY(jag__sleef_gelu_f64, double, SL_F64, SL_WD, SL_LOADD, SL_STORED, sl_gelu_d)

#else
/* ISO C wants a translation unit to declare something. */
typedef int jag__sleef_unary_unused;
#endif /* JAG_HAVE_SLEEF */
