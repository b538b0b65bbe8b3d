/*
 * unary.c — elementwise ops of one tensor (neg ... hardtanh): the typed
 * kernel and the naive reference (kernels.h). Their META functions and the
 * boxed adapters ops.def names are in src/dispatch/unary_op.c.
 *
 * Every kernel writes y = f(x) where y is the contiguous output and x has any
 * strides. x is first converted to y's dtype when it differs (an integer
 * input of a float op), so that each loop runs on one C type. The loops run
 * under jag__iter (merged dims, OpenMP over long runs, from a grain that
 * depends on the op's cost: unary_grain); inside, a contiguous
 * run is a plain restrict loop gcc vectorises, any other stride a strided
 * loop. The ops that run SLEEF's vector functions where the build has it
 * (sleef_unary.c), and float32 hardswish and hardsigmoid on AVX2 (their
 * array kernels below), take a contiguous run in one call and a strided one
 * through a stack buffer (ARRAY_LOOP).
 *
 * dtypes: float ops (exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, silu,
 * gelu, gelu_tanh, reciprocal, log1p, expm1, erf, erfc, selu, hardswish,
 * hardsigmoid, mish, logsigmoid and the parametrised leaky_relu, elu,
 * softplus, hardtanh) compute in float32 or float64 and promote
 * integer and bool inputs to float32. neg, abs, relu, square, sign, floor,
 * ceil, round and trunc keep the input dtype (the last four refuse bool); for bool, as torch: abs and sign are the identity, square
 * gives int64 (torch's square is pow(x, 2)), neg and relu are JAG_EDTYPE.
 * Integer neg, abs and square wrap on overflow as torch does
 * (abs(INT32_MIN) == INT32_MIN), computed in unsigned so there is no UB.
 */
#include "iter.h"
#include "kernels.h"
#include "pointwise_math.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* ---- element functions ---------------------------------------------------- */

/* Named <op>_<dtype>; each loop below applies one of them. exp, tanh and
 * the activations run vecmath.h's branch-free approximations (the contiguous
 * loop vectorises; libm would be a call per element), except gelu in
 * float64 (libm's erfc, see pointwise_math.h). Where the build has SLEEF,
 * sin, cos, log and gelu (both dtypes), and exp, sigmoid, silu, log1p,
 * expm1, erf, erfc, atan, selu, mish and logsigmoid (float32) run its
 * array kernels instead (sleef_unary.c; the loops below say which; on
 * AVX-512 targets float32 gelu, erf and erfc there are table-driven
 * polynomials): those element functions are then unused. So do float32
 * elu and softplus, with their scalars (PARAM_ARRAY_LOOP). */
#define LIBM_OP(name, ffn, dfn)                                                \
    __attribute__((unused)) static inline float name##_f32(float x) { return ffn(x); } \
    __attribute__((unused)) static inline double name##_f64(double x) { return dfn(x); }
LIBM_OP(exp, jag__vm_exp_f32, jag__vm_exp_f64)
LIBM_OP(log, logf, log)
LIBM_OP(sqrt, sqrtf, sqrt)
LIBM_OP(sin, sinf, sin)
LIBM_OP(cos, cosf, cos)
LIBM_OP(tanh, jag__vm_tanh_f32, jag__vm_tanh_f64)
LIBM_OP(sigmoid, jag__sigmoid_f32, jag__sigmoid_f64)
LIBM_OP(silu, jag__silu_f32, jag__silu_f64)
LIBM_OP(gelu, jag__gelu_f32, jag__gelu_f64)
LIBM_OP(gelu_tanh, jag__gelu_tanh_f32, jag__gelu_tanh_f64)
/* log1p, expm1, erf, erfc: glibc, one call per element (bounds in tests/test_unary_accuracy.c) */
LIBM_OP(log1p, log1pf, log1p)
LIBM_OP(atan, atanf, atan)
LIBM_OP(sinh, sinhf, sinh)
LIBM_OP(cosh, coshf, cosh)
LIBM_OP(asinh, asinhf, asinh)
LIBM_OP(expm1, expm1f, expm1)
LIBM_OP(erf, erff, erf)
LIBM_OP(erfc, erfcf, erfc)
#undef LIBM_OP

/* The activations of pointwise_math.h: double, rounded once for float32. */
#define VIA_DOUBLE_OP(name)                                                    \
    __attribute__((unused)) static inline float name##_f32(float x) { return (float)jag__##name##_f64(x); } \
    __attribute__((unused)) static inline double name##_f64(double x) { return jag__##name##_f64(x); }
VIA_DOUBLE_OP(selu)
VIA_DOUBLE_OP(mish)
VIA_DOUBLE_OP(logsigmoid)
#undef VIA_DOUBLE_OP

/* hardswish and hardsigmoid: pointwise_math.h's double formulas with the
 * clamps written as compares (fmin and fmax are calls that stop the loop
 * vectorising), so float32 gives the same bits as the double formula
 * rounded once. A NaN x + 3 passes both compares where fmax would give 0;
 * the result is NaN either way (there x 0 and the isnan test, here the NaN
 * carried through). */
static inline double clamp_0_6(double v) {
    v = v < 0.0 ? 0.0 : v;
    return v > 6.0 ? 6.0 : v;
}
static inline float hardswish_f32(float x) { return (float)((double)x * clamp_0_6((double)x + 3.0) / 6.0); }
static inline double hardswish_f64(double x) { return jag__hardswish_f64(x); }
static inline float hardsigmoid_f32(float x) { return (float)(clamp_0_6((double)x + 3.0) / 6.0); }
static inline double hardsigmoid_f64(double x) { return jag__hardsigmoid_f64(x); }

/* The same two in float32 over a contiguous run, y (n) = f(x (n)), the
 * element functions above being their naive reference. gcc does not
 * vectorise those well (the clamps become branches, 0.8-2 ms for 1M floats
 * on one AVX2 core), so AVX2 builds compute them here, 8 floats as two
 * vectors of 4 doubles: x + 3, the clamp as max(0, v) then min(6, v) (a
 * NaN, the second operand, passes through both, as through the compares),
 * then the product by RN(1/6) in place of the division by 6 (0.37 -> 0.27
 * ms for 1M floats on one core; the divider is the bound). Rounded to
 * float32, v RN(1/6) gives the bits of v / 6 for every float32 x, in both
 * ops (v = clamp(x + 3) for hardsigmoid, x clamp(x + 3) for hardswish):
 * checked exhaustively over all 2^32 inputs (NaNs both NaN); with 1/6 rounded
 * to float32 instead, 1.6e8 and 1.8e8 of them differ. test_unary_accuracy
 * holds the kernels to the element functions' bits. */
#if defined(__AVX2__)
#define HARD_ACT_ARRAY(name, SWISH)                                            \
    static void name##_array_f32(float *y, const float *x, int64_t n) {        \
        const __m256d three = _mm256_set1_pd(3.0), six = _mm256_set1_pd(6.0), zero = _mm256_setzero_pd(); \
        const __m256d sixth = _mm256_set1_pd(1.0 / 6.0);                        \
        int64_t i = 0;                                                          \
        for (; i + 8 <= n; i += 8) {                                            \
            __m256 v = _mm256_loadu_ps(x + i);                                  \
            __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));            \
            __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));          \
            __m256d cl = _mm256_min_pd(six, _mm256_max_pd(zero, _mm256_add_pd(lo, three))); \
            __m256d ch = _mm256_min_pd(six, _mm256_max_pd(zero, _mm256_add_pd(hi, three))); \
            if (SWISH) cl = _mm256_mul_pd(lo, cl), ch = _mm256_mul_pd(hi, ch);   \
            __m128 rl = _mm256_cvtpd_ps(_mm256_mul_pd(cl, sixth));              \
            __m128 rh = _mm256_cvtpd_ps(_mm256_mul_pd(ch, sixth));              \
            _mm256_storeu_ps(y + i, _mm256_set_m128(rh, rl));                   \
        }                                                                       \
        for (; i < n; i++) y[i] = name##_f32(x[i]);                             \
    }
HARD_ACT_ARRAY(hardswish, 1)
HARD_ACT_ARRAY(hardsigmoid, 0)
#undef HARD_ACT_ARRAY
#endif

static inline float rsqrt_f32(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt_f64(double x) { return 1.0 / sqrt(x); }
static inline float reciprocal_f32(float x) { return 1.0f / x; }
static inline double reciprocal_f64(double x) { return 1.0 / x; }

/* The dtype-keeping ops, for every dtype T with unsigned twin U. */
#define KEEP_OPS(sfx, T, U)                                                    \
    static inline T neg_##sfx(T x) { return (T)((U)0 - (U)x); }               \
    static inline T abs_##sfx(T x) { return x < 0 ? (T)((U)0 - (U)x) : x; }    \
    static inline T relu_##sfx(T x) { return x < 0 ? 0 : x; }                  \
    static inline T square_##sfx(T x) { return (T)((U)x * (U)x); }            \
    static inline T sign_##sfx(T x) { return (T)((x > 0) - (x < 0)); }       \
    static inline T floor_##sfx(T x) { return x; }                            \
    static inline T ceil_##sfx(T x) { return x; }                             \
    static inline T round_##sfx(T x) { return x; }                            \
    static inline T trunc_##sfx(T x) { return x; }
KEEP_OPS(i32, int32_t, uint32_t)
KEEP_OPS(i64, int64_t, uint64_t)
#undef KEEP_OPS

/* Floats: NaN stays NaN through relu and sign; sign keeps the zero's sign. */
#define KEEP_OPS_FLOAT(sfx, T, fabs_fn)                                        \
    static inline T neg_##sfx(T x) { return -x; }                             \
    static inline T abs_##sfx(T x) { return fabs_fn(x); }                     \
    static inline T relu_##sfx(T x) { return x < 0 ? (T)0 : x; }              \
    static inline T square_##sfx(T x) { return x * x; }                       \
    static inline T sign_##sfx(T x) { return x > 0 ? (T)1 : x < 0 ? (T)-1 : x; }
KEEP_OPS_FLOAT(f32, float, fabsf)
KEEP_OPS_FLOAT(f64, double, fabs)
/* round: halves to even, as torch.round (nearbyint in the default rounding
 * mode, which the project never changes). */
#define ROUNDING_OPS(sfx, T, s)                                                \
    static inline T floor_##sfx(T x) { return floor##s(x); }                  \
    static inline T ceil_##sfx(T x) { return ceil##s(x); }                    \
    static inline T round_##sfx(T x) { return nearbyint##s(x); }              \
    static inline T trunc_##sfx(T x) { return trunc##s(x); }
ROUNDING_OPS(f32, float, f)
ROUNDING_OPS(f64, double, )
#undef ROUNDING_OPS
#undef KEEP_OPS_FLOAT

static inline uint8_t abs_b(uint8_t x) { return x; }
static inline uint8_t sign_b(uint8_t x) { return x; }

/* ---- loops ------------------------------------------------------------------ */

/* A jag_loop_fn applying F: ptrs[0] is y, ptrs[1] is x, both of type T. */
#define UNARY_LOOP(NAME, T, F)                                                 \
    static void NAME(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        (void)ctx;                                                             \
        if (strides[0] == (int64_t)sizeof(T) && strides[1] == (int64_t)sizeof(T)) { \
            T *restrict y = (T *)ptrs[0];                                      \
            const T *restrict x = (const T *)ptrs[1];                          \
            for (int64_t i = 0; i < n; i++) y[i] = F(x[i]);                    \
        } else {                                                               \
            char *y = ptrs[0];                                                 \
            const char *x = ptrs[1];                                           \
            const int64_t ys = strides[0], xs = strides[1];                    \
            for (int64_t i = 0; i < n; i++) *(T *)(y + i * ys) = F(*(const T *)(x + i * xs)); \
        }                                                                      \
    }

/* A jag_loop_fn applying an array kernel AF (sleef_unary.c's, or
 * hardswish's and hardsigmoid's above: y (n) = f(x (n)), contiguous, y == x
 * allowed): a contiguous run is one call; any other stride goes through a
 * buffer on the stack, SL_BUF elements at a time: gathered, computed in
 * place, scattered. */
#define SL_BUF 256
#define ARRAY_LOOP(NAME, T, AF)                                                \
    static void NAME(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        (void)ctx;                                                             \
        if (strides[0] == (int64_t)sizeof(T) && strides[1] == (int64_t)sizeof(T)) { \
            AF((T *)ptrs[0], (const T *)ptrs[1], n);                           \
            return;                                                            \
        }                                                                      \
        char *y = ptrs[0];                                                     \
        const char *x = ptrs[1];                                               \
        const int64_t ys = strides[0], xs = strides[1];                        \
        T buf[SL_BUF];                                                         \
        for (int64_t i0 = 0; i0 < n; i0 += SL_BUF) {                           \
            int64_t m = n - i0 < SL_BUF ? n - i0 : SL_BUF;                     \
            for (int64_t i = 0; i < m; i++) buf[i] = *(const T *)(x + (i0 + i) * xs); \
            AF(buf, buf, m);                                                   \
            for (int64_t i = 0; i < m; i++) *(T *)(y + (i0 + i) * ys) = buf[i]; \
        }                                                                      \
    }

/* Loops and the table [dtype] -> loop (NULL: the META function never lets
 * that dtype through) for each op. The float ops' loops apply the element
 * functions above, or (SLEEF_LOOPS*) the SLEEF array kernels where the
 * build has SLEEF. */
#define FLOAT_TABLE(op)                                                        \
    static const jag_loop_fn op##_loops[JAG_DTYPE_COUNT] = {                   \
        [JAG_FLOAT32] = loop_##op##_f32, [JAG_FLOAT64] = loop_##op##_f64};
#define FLOAT_LOOPS(op)                                                        \
    UNARY_LOOP(loop_##op##_f32, float, op##_f32)                               \
    UNARY_LOOP(loop_##op##_f64, double, op##_f64)                              \
    FLOAT_TABLE(op)
#ifdef JAG_HAVE_SLEEF
#define SLEEF_LOOPS(op)                                                        \
    ARRAY_LOOP(loop_##op##_f32, float, jag__sleef_##op##_f32)                  \
    ARRAY_LOOP(loop_##op##_f64, double, jag__sleef_##op##_f64)                 \
    FLOAT_TABLE(op)
#define SLEEF_LOOPS_F32(op)                                                    \
    ARRAY_LOOP(loop_##op##_f32, float, jag__sleef_##op##_f32)                  \
    UNARY_LOOP(loop_##op##_f64, double, op##_f64)                              \
    FLOAT_TABLE(op)
#define SLEEF_LOOPS_F64(op)                                                    \
    UNARY_LOOP(loop_##op##_f32, float, op##_f32)                               \
    ARRAY_LOOP(loop_##op##_f64, double, jag__sleef_##op##_f64)                 \
    FLOAT_TABLE(op)
#else
#define SLEEF_LOOPS(op) FLOAT_LOOPS(op)
#define SLEEF_LOOPS_F32(op) FLOAT_LOOPS(op)
#define SLEEF_LOOPS_F64(op) FLOAT_LOOPS(op)
#endif
#define NUMBER_LOOPS(op, bool_loop)                                            \
    UNARY_LOOP(loop_##op##_f32, float, op##_f32)                               \
    UNARY_LOOP(loop_##op##_f64, double, op##_f64)                              \
    UNARY_LOOP(loop_##op##_i32, int32_t, op##_i32)                             \
    UNARY_LOOP(loop_##op##_i64, int64_t, op##_i64)                             \
    static const jag_loop_fn op##_loops[JAG_DTYPE_COUNT] = {                   \
        [JAG_FLOAT32] = loop_##op##_f32, [JAG_FLOAT64] = loop_##op##_f64,      \
        [JAG_INT32] = loop_##op##_i32, [JAG_INT64] = loop_##op##_i64, [JAG_BOOL] = bool_loop};

UNARY_LOOP(loop_abs_b, uint8_t, abs_b)
UNARY_LOOP(loop_sign_b, uint8_t, sign_b)

NUMBER_LOOPS(neg, NULL)
NUMBER_LOOPS(abs, loop_abs_b)
NUMBER_LOOPS(relu, NULL)
NUMBER_LOOPS(square, NULL)
NUMBER_LOOPS(sign, loop_sign_b)
SLEEF_LOOPS_F32(exp)
SLEEF_LOOPS(log)
FLOAT_LOOPS(sqrt)
FLOAT_LOOPS(rsqrt)
SLEEF_LOOPS(sin)
SLEEF_LOOPS(cos)
FLOAT_LOOPS(tanh)
SLEEF_LOOPS_F32(sigmoid)
SLEEF_LOOPS_F32(silu)
SLEEF_LOOPS(gelu)
FLOAT_LOOPS(gelu_tanh)
FLOAT_LOOPS(reciprocal)
NUMBER_LOOPS(floor, NULL)
NUMBER_LOOPS(ceil, NULL)
NUMBER_LOOPS(round, NULL)
NUMBER_LOOPS(trunc, NULL)
SLEEF_LOOPS_F32(log1p)
SLEEF_LOOPS_F32(atan)
FLOAT_LOOPS(sinh)
FLOAT_LOOPS(cosh)
FLOAT_LOOPS(asinh)
SLEEF_LOOPS_F32(expm1)
SLEEF_LOOPS_F32(erf)
SLEEF_LOOPS_F32(erfc)
SLEEF_LOOPS_F32(selu)
#if defined(__AVX2__)
ARRAY_LOOP(loop_hardswish_f32, float, hardswish_array_f32)
UNARY_LOOP(loop_hardswish_f64, double, hardswish_f64)
FLOAT_TABLE(hardswish)
ARRAY_LOOP(loop_hardsigmoid_f32, float, hardsigmoid_array_f32)
UNARY_LOOP(loop_hardsigmoid_f64, double, hardsigmoid_f64)
FLOAT_TABLE(hardsigmoid)
#else
FLOAT_LOOPS(hardswish)
FLOAT_LOOPS(hardsigmoid)
#endif
SLEEF_LOOPS_F32(mish)
SLEEF_LOOPS_F32(logsigmoid)

/* The parametrised ops: ctx is their scalar arguments (double[2]), already
 * rounded through the dtype the loop computes in (float32: as torch, which
 * converts them to the tensor's type). */
#define PARAM_LOOP(NAME, T, F)                                                 \
    static void NAME(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        const double *prm = (const double *)ctx;                               \
        if (strides[0] == (int64_t)sizeof(T) && strides[1] == (int64_t)sizeof(T)) { \
            T *restrict y = (T *)ptrs[0];                                      \
            const T *restrict x = (const T *)ptrs[1];                          \
            for (int64_t i = 0; i < n; i++) y[i] = (T)F(x[i], prm);            \
        } else {                                                               \
            char *y = ptrs[0];                                                 \
            const char *x = ptrs[1];                                           \
            const int64_t ys = strides[0], xs = strides[1];                    \
            for (int64_t i = 0; i < n; i++) *(T *)(y + i * ys) = (T)F(*(const T *)(x + i * xs), prm); \
        }                                                                      \
    }
#define PARAM_LOOPS(op)                                                        \
    PARAM_LOOP(loop_##op##_f32, float, jag__##op##_f64)                        \
    PARAM_LOOP(loop_##op##_f64, double, jag__##op##_f64)                       \
    FLOAT_TABLE(op)

/* float32 leaky_relu and hardtanh in float, on the scalars as floats (p0,
 * p1: prm rounded to float32 already, so exact): compares and one product
 * the loop vectorises, the same bits as the double formulas rounded once
 * (x slope is exact in double, 24 + 24 bits, so rounding it to float once
 * is the float product). hardtanh's compares are false for NaN, which
 * stays NaN. */
static inline float leaky_relu_f32(float x, float slope, float unused) {
    (void)unused;
    return x > 0 ? x : x * slope;
}
static inline float hardtanh_f32(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }
#define PARAM_LOOP_F32(NAME, F)                                                \
    static void NAME(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        const double *prm = (const double *)ctx;                               \
        const float p0 = (float)prm[0], p1 = (float)prm[1];                    \
        if (strides[0] == (int64_t)sizeof(float) && strides[1] == (int64_t)sizeof(float)) { \
            float *restrict y = (float *)ptrs[0];                              \
            const float *restrict x = (const float *)ptrs[1];                  \
            for (int64_t i = 0; i < n; i++) y[i] = F(x[i], p0, p1);            \
        } else {                                                               \
            char *y = ptrs[0];                                                 \
            const char *x = ptrs[1];                                           \
            const int64_t ys = strides[0], xs = strides[1];                    \
            for (int64_t i = 0; i < n; i++) *(float *)(y + i * ys) = F(*(const float *)(x + i * xs), p0, p1); \
        }                                                                      \
    }
#define PARAM_LOOPS_F32(op)                                                    \
    PARAM_LOOP_F32(loop_##op##_f32, op##_f32)                                  \
    PARAM_LOOP(loop_##op##_f64, double, jag__##op##_f64)                       \
    FLOAT_TABLE(op)

#ifdef JAG_HAVE_SLEEF
/* float32 elu and softplus: the array kernels of sleef_unary.c, which take
 * prm (a strided run through a stack buffer, as ARRAY_LOOP). */
#define PARAM_ARRAY_LOOP(NAME, AF)                                             \
    static void NAME(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        const double *prm = (const double *)ctx;                               \
        if (strides[0] == (int64_t)sizeof(float) && strides[1] == (int64_t)sizeof(float)) { \
            AF((float *)ptrs[0], (const float *)ptrs[1], n, prm);              \
            return;                                                            \
        }                                                                      \
        char *y = ptrs[0];                                                     \
        const char *x = ptrs[1];                                               \
        const int64_t ys = strides[0], xs = strides[1];                        \
        float buf[SL_BUF];                                                     \
        for (int64_t i0 = 0; i0 < n; i0 += SL_BUF) {                           \
            int64_t m = n - i0 < SL_BUF ? n - i0 : SL_BUF;                     \
            for (int64_t i = 0; i < m; i++) buf[i] = *(const float *)(x + (i0 + i) * xs); \
            AF(buf, buf, m, prm);                                              \
            for (int64_t i = 0; i < m; i++) *(float *)(y + (i0 + i) * ys) = buf[i]; \
        }                                                                      \
    }
#define PARAM_SLEEF_LOOPS_F32(op)                                              \
    PARAM_ARRAY_LOOP(loop_##op##_f32, jag__sleef_##op##_f32)                   \
    PARAM_LOOP(loop_##op##_f64, double, jag__##op##_f64)                       \
    FLOAT_TABLE(op)
#else
#define PARAM_SLEEF_LOOPS_F32(op) PARAM_LOOPS(op)
#endif
PARAM_LOOPS_F32(leaky_relu)
PARAM_SLEEF_LOOPS_F32(elu)
PARAM_SLEEF_LOOPS_F32(softplus)
PARAM_LOOPS_F32(hardtanh)

/* ---- kernels ----------------------------------------------------------------- */

/* Shared with binary.c; what it returns and who releases what is in
 * pointwise_math.h. */
const jag_tensor *jag__pw_as_dtype(const char *op, const jag_tensor *x, jag_dtype dtype, jag_tensor **copy) {
    *copy = NULL;
    if (x->dtype == dtype) return x;
    jag_tensor *t = jag__tensor_new(op, x->sizes, x->ndim, dtype, false, false);
    if (t) jag__copy_into(t, x);
    *copy = t;
    return t;
}

/* Every op's loops by dtype, indexed by jag_unary_fn. */
#define LOOPS_ENTRY(name) [JAG_UNARY_##name] = name##_loops,
static const jag_loop_fn *const unary_loops[JAG_UNARY_FN_COUNT] = {
    JAG_UNARY_OP_LIST(LOOPS_ENTRY) JAG_UNARY_PARAM_OP_LIST(LOOPS_ENTRY)};
#undef LOOPS_ENTRY

/* The parametrised op's scalars (as many as it has; the rest 0), rounded
 * through `dtype`. */
static void round_params(jag_unary_fn f, const double *params, jag_dtype dtype, double *prm) {
    prm[0] = prm[1] = 0;
    if (!jag__unary_has_params(f)) return;
    for (int k = 0; k < jag__unary_param_count(f); k++) prm[k] = jag__pw_round_to(params[k], dtype);
}

/* The grain family of each op (src/core/internal.h): the ops that cost a
 * few instructions an element (sign flips, compares, rounding, one
 * division or square root) run at memory speed and split across threads
 * from JAG_GRAIN_MEMORY elements on; the transcendental ones (exp, log,
 * the trigonometric and error functions, the activations built on them)
 * from JAG_GRAIN_COMPUTE. */
static int64_t unary_grain(jag_unary_fn f) {
    switch (f) {
    case JAG_UNARY_neg:
    case JAG_UNARY_abs:
    case JAG_UNARY_relu:
    case JAG_UNARY_square:
    case JAG_UNARY_sign:
    case JAG_UNARY_floor:
    case JAG_UNARY_ceil:
    case JAG_UNARY_round:
    case JAG_UNARY_trunc:
    case JAG_UNARY_reciprocal:
    case JAG_UNARY_sqrt:
    case JAG_UNARY_rsqrt:
    case JAG_UNARY_hardswish:
    case JAG_UNARY_hardsigmoid:
    case JAG_UNARY_leaky_relu:
    case JAG_UNARY_hardtanh: return JAG_GRAIN_MEMORY;
    default: return JAG_GRAIN_COMPUTE;
    }
}

// x is (...) any strides and dtype, y is (...) contiguous: y = f(x; params)
jag_status jag__unary_kernel(const char *op, jag_unary_fn f, const jag_tensor *x0, const double *params,
                             jag_tensor *y) {
    if (jag_numel(y) == 0) return JAG_OK;
    JAG_ASSERT(f >= 0 && f < JAG_UNARY_FN_COUNT);
    jag_loop_fn fn = unary_loops[f][y->dtype];
    JAG_ASSERT(fn != NULL);
    double prm[2];
    round_params(f, params, y->dtype, prm);
    jag_tensor *xc;
    const jag_tensor *x = jag__pw_as_dtype(op, x0, y->dtype, &xc);
    if (!x) return jag_last_status();
    char *base[2] = {jag__ptr(y), jag__ptr(x)};
    const int64_t *strides[2] = {y->strides, x->strides};
    size_t elem[2] = {jag_dtype_size(y->dtype), jag_dtype_size(y->dtype)};
    jag_iter it;
    jag__iter_init(&it, y->sizes, y->ndim, 2, base, strides, elem);
    jag__iter_run_grain(&it, unary_grain(f), fn, prm);
    jag_release(xc);
    return JAG_OK;
}

/* ---- the activations' gradients ------------------------------------------ */

#define ACT_BUF 256
#define INV_SQRT_2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define GELU_TANH_K 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_TANH_A 0.044715

/* dx[i] = g[i] act'(x[i]) for i < n (contiguous), float32, 16 lanes at a
 * time. gelu: Phi = erfc(-x / sqrt 2) / 2 a buffer at a time through the
 * erfc loop above, then exp(-x^2 / 2) through the denormals (0 below
 * e^-104, |x| > 14.4, where x phi(x) < 1e-45, float32's least). */
static void act_back_f32(jag_act_fn f, const double *prm, float *dx, const float *g, const float *x, int64_t n) {
    float c[ACT_BUF];
    for (int64_t i0 = 0; i0 < n; i0 += ACT_BUF) {
        int64_t m = n - i0 < ACT_BUF ? n - i0 : ACT_BUF;
        const float *xp = x + i0, *gp = g + i0;
        float *dp = dx + i0;
        if (f == JAG_ACT_gelu) {
            for (int64_t i = 0; i < m; i++) c[i] = -xp[i] * (float)INV_SQRT_2;
            char *cp[2] = {(char *)c, (char *)c};
            const int64_t cs[2] = {sizeof(float), sizeof(float)};
            erfc_loops[JAG_FLOAT32](cp, cs, m, NULL);
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) {
                float xv = xp[i], t = -0.5f * xv * xv;
                float pdf = t > -104.0f ? jag__vm_exp_f32(t) : 0.0f;
                dp[i] = gp[i] * (0.5f * c[i] + xv * pdf * (float)INV_SQRT_2PI);
            }
        } else if (f == JAG_ACT_gelu_tanh) {
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) {
                /* 1/2 (1 + t) = s and 1 - t^2 = 4 s (1 - s) with s = sigmoid(2 u):
                 * no cancellation in 1 + t where u is very negative */
                float xv = xp[i], x2 = xv * xv;
                float s = jag__vm_sigmoid_f32(2.0f * (float)GELU_TANH_K * (xv + (float)GELU_TANH_A * x2 * xv));
                float du = (float)GELU_TANH_K * (1.0f + 3.0f * (float)GELU_TANH_A * x2);
                dp[i] = gp[i] * (s * (1.0f + 2.0f * xv * (1.0f - s) * du));
            }
        } else if (f == JAG_ACT_silu) {
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) {
                float xv = xp[i], sg = jag__vm_sigmoid_f32(xv);
                dp[i] = gp[i] * (sg * (1.0f + xv * (1.0f - sg)));
            }
        } else if (f == JAG_ACT_logsigmoid) {
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) dp[i] = gp[i] * jag__vm_sigmoid_f32(-xp[i]);
        } else if (f == JAG_ACT_softplus) {
            const float beta = (float)prm[0], thr = (float)prm[1];
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) {
                float bx = xp[i] * beta;
                dp[i] = bx > thr ? gp[i] : gp[i] * jag__vm_sigmoid_f32(bx);
            }
        } else if (f == JAG_ACT_hardswish) {
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) { /* (computed, then selected: the loop vectorises) */
                float xv = xp[i], mid = gp[i] * (xv / 3.0f + 0.5f);
                dp[i] = xv <= -3.0f ? 0.0f : xv < 3.0f ? mid : gp[i];
            }
        } else if (f == JAG_ACT_hardsigmoid) {
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) {
                float sixth = gp[i] / 6.0f;
                dp[i] = xp[i] > -3.0f && xp[i] < 3.0f ? sixth : 0.0f;
            }
        } else if (f == JAG_ACT_sigmoid) { /* xp is sigmoid's output */
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) dp[i] = gp[i] * (xp[i] * (1.0f - xp[i]));
        } else { /* tanh, xp its output */
            _Pragma("omp simd")
            for (int64_t i = 0; i < m; i++) dp[i] = gp[i] * (1.0f - xp[i] * xp[i]);
        }
    }
}
/* the same in double, element by element: the float64 kernel and the
 * reference of both */
static inline double act_grad_f64(jag_act_fn f, const double *prm, double g, double x) {
    if (f == JAG_ACT_logsigmoid) return g / (1 + exp(x)); /* sigmoid(-x) */
    if (f == JAG_ACT_softplus) return prm[0] * x > prm[1] ? g : g / (1 + exp(-prm[0] * x));
    if (f == JAG_ACT_hardswish) return x <= -3 ? 0 : x < 3 ? g * (x / 3 + 0.5) : g;
    if (f == JAG_ACT_hardsigmoid) return x > -3 && x < 3 ? g / 6 : 0;
    if (f == JAG_ACT_sigmoid) return g * (x * (1 - x)); /* x: the output */
    if (f == JAG_ACT_tanh) return g * (1 - x * x);
    if (f == JAG_ACT_gelu) return g * (0.5 * erfc(-x * INV_SQRT_2) + x * exp(-0.5 * x * x) * INV_SQRT_2PI);
    if (f == JAG_ACT_gelu_tanh) { /* 1/2 (1 + t) = s, 1 - t^2 = 4 s (1 - s), s = sigmoid(2 u) */
        double s = 1.0 / (1.0 + exp(-2.0 * GELU_TANH_K * (x + GELU_TANH_A * x * x * x)));
        double du = GELU_TANH_K * (1 + 3 * GELU_TANH_A * x * x);
        return g * (s * (1 + 2 * x * (1 - s) * du));
    }
    double sg = 1.0 / (1.0 + exp(-x));
    return g * (sg * (1 + x * (1 - sg)));
}

/* The iterator's loops' context: the function and its scalars */
typedef struct {
    jag_act_fn f;
    double prm[2];
} act_ctx;

/* The iterator's loop: operands dx, g, x; float32 runs of any other stride
 * go through contiguous buffers. */
static void act_back_loop_f32(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) {
    const act_ctx *a = ctx;
    jag_act_fn f = a->f;
    if (strides[0] == 4 && strides[1] == 4 && strides[2] == 4) {
        act_back_f32(f, a->prm, (float *)ptrs[0], (const float *)ptrs[1], (const float *)ptrs[2], n);
        return;
    }
    float d[ACT_BUF], gb[ACT_BUF], xb[ACT_BUF];
    for (int64_t i0 = 0; i0 < n; i0 += ACT_BUF) {
        int64_t m = n - i0 < ACT_BUF ? n - i0 : ACT_BUF;
        for (int64_t i = 0; i < m; i++)
            gb[i] = *(const float *)(ptrs[1] + (i0 + i) * strides[1]), xb[i] = *(const float *)(ptrs[2] + (i0 + i) * strides[2]);
        act_back_f32(f, a->prm, d, gb, xb, m);
        for (int64_t i = 0; i < m; i++) *(float *)(ptrs[0] + (i0 + i) * strides[0]) = d[i];
    }
}
static void act_back_loop_f64(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) {
    const act_ctx *a = ctx;
    for (int64_t i = 0; i < n; i++)
        *(double *)(ptrs[0] + i * strides[0]) = act_grad_f64(a->f, a->prm, *(const double *)(ptrs[1] + i * strides[1]),
                                                             *(const double *)(ptrs[2] + i * strides[2]));
}

void jag__act_backward_kernel(jag_act_fn f, const double *prm, const jag_tensor *g, const jag_tensor *x, jag_tensor *dx) {
    if (jag_numel(dx) == 0) return;
    act_ctx a = {f, {prm ? prm[0] : 0, prm ? prm[1] : 0}};
    char *base[3] = {jag__ptr(dx), jag__ptr(g), jag__ptr(x)};
    const int64_t *strides[3] = {dx->strides, g->strides, x->strides};
    size_t es = jag_dtype_size(dx->dtype), elem[3] = {es, es, es};
    jag_iter it;
    jag__iter_init(&it, dx->sizes, dx->ndim, 3, base, strides, elem);
    jag__iter_run_grain(&it, JAG_GRAIN_COMPUTE, dx->dtype == JAG_FLOAT32 ? act_back_loop_f32 : act_back_loop_f64, &a);
}

void jag__act_backward_reference(jag_act_fn f, const double *prm, const jag_tensor *g, const jag_tensor *x,
                                 jag_tensor *dx) {
    int64_t n = jag_numel(dx), idx[JAG_MAX_DIMS] = {0};
    size_t es = jag_dtype_size(dx->dtype);
    for (int64_t e = 0; e < n; e++) {
        int64_t og = 0, ox = 0;
        for (int d = 0; d < dx->ndim; d++) og += idx[d] * g->strides[d], ox += idx[d] * x->strides[d];
        double gv = jag__load_as_double(jag__ptr(g) + og * (int64_t)es, g->dtype);
        double xv = jag__load_as_double(jag__ptr(x) + ox * (int64_t)es, x->dtype);
        jag__store_from_double(jag__ptr(dx) + e * (int64_t)es, dx->dtype, act_grad_f64(f, prm, gv, xv));
        for (int d = dx->ndim - 1; d >= 0; d--) {
            if (++idx[d] < dx->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

/* Whether the float ops that have SLEEF kernels run them in this build (the
 * tests state their error bounds per build). */
bool jag__unary_uses_sleef(void) {
#ifdef JAG_HAVE_SLEEF
    return true;
#else
    return false;
#endif
}

/* Whether float32 gelu, erf and erfc run sleef_unary.c's table kernels
 * (AVX-512 or AVX2 with FMA; pointwise_math.h). */
bool jag__unary_uses_tables(void) {
#if defined(JAG_HAVE_SLEEF) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))
    return true;
#else
    return false;
#endif
}

/* ---- naive reference ------------------------------------------------------- */

/* The textbook formula of each op, in double. */
static double ref_value(jag_unary_fn f, double x) {
    switch (f) {
    case JAG_UNARY_neg: return -x;
    case JAG_UNARY_abs: return fabs(x);
    case JAG_UNARY_exp: return exp(x);
    case JAG_UNARY_log: return log(x);
    case JAG_UNARY_sqrt: return sqrt(x);
    case JAG_UNARY_rsqrt: return 1.0 / sqrt(x);
    case JAG_UNARY_sin: return sin(x);
    case JAG_UNARY_cos: return cos(x);
    case JAG_UNARY_tanh: return tanh(x);
    case JAG_UNARY_sigmoid: return 1.0 / (1.0 + exp(-x));
    case JAG_UNARY_relu: return isnan(x) ? x : x > 0 ? x : 0.0;
    case JAG_UNARY_silu: return x / (1.0 + exp(-x));
    case JAG_UNARY_gelu: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case JAG_UNARY_gelu_tanh: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case JAG_UNARY_reciprocal: return 1.0 / x;
    case JAG_UNARY_square: return x * x;
    case JAG_UNARY_sign: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    case JAG_UNARY_floor: return floor(x);
    case JAG_UNARY_ceil: return ceil(x);
    case JAG_UNARY_round: /* halves to even */
        return x == floor(x) ? x : x - floor(x) == 0.5 ? 2.0 * floor(0.5 * x + 0.5) : floor(x + 0.5);
    case JAG_UNARY_trunc: return x < 0 ? ceil(x) : floor(x);
    case JAG_UNARY_log1p: { /* log(u) x / (u - 1), u = 1 + x rounded: corrects u's rounding */
        double u = 1.0 + x;
        return u == 1.0 ? x : isinf(u) ? u : log(u) * x / (u - 1.0);
    }
    case JAG_UNARY_expm1: { /* 2 t / (1 - t), t = tanh(x / 2): no cancellation near 0 */
        double t = tanh(0.5 * x);
        return fabs(x) < 1.0 ? 2.0 * t / (1.0 - t) : exp(x) - 1.0;
    }
    case JAG_UNARY_atan: return atan(x);
    case JAG_UNARY_sinh: return 0.5 * (exp(x) - exp(-x)); /* formulas, not the libm calls the kernel makes */
    case JAG_UNARY_cosh: return 0.5 * (exp(x) + exp(-x));
    case JAG_UNARY_asinh: return x < 0 ? -log(-x + sqrt(x * x + 1.0)) : log(x + sqrt(x * x + 1.0));
    case JAG_UNARY_erf: return erf(x);
    case JAG_UNARY_erfc: return erfc(x);
    case JAG_UNARY_selu: return x > 0 ? JAG_SELU_SCALE * x : JAG_SELU_SCALE * JAG_SELU_ALPHA * (exp(x) - 1.0);
    case JAG_UNARY_hardswish: return x <= -3 ? x * 0.0 : x >= 3 ? x : x * (x + 3.0) / 6.0;
    case JAG_UNARY_hardsigmoid: return x <= -3 ? 0.0 : x >= 3 ? 1.0 : (x + 3.0) / 6.0;
    case JAG_UNARY_mish: return x * tanh(log(1.0 + exp(x)));
    case JAG_UNARY_logsigmoid: return -log(1.0 + exp(-x));
    default: JAG_ASSERT(!"not a unary op"); return 0;
    }
}

/* The textbook formula of each parametrised op, in double. */
static double ref_param_value(jag_unary_fn f, double x, const double *p) {
    switch (f) {
    case JAG_UNARY_leaky_relu: return x > 0 ? x : p[0] * x;
    case JAG_UNARY_elu: return x > 0 ? x : p[0] * (exp(x) - 1.0);
    case JAG_UNARY_softplus: return p[0] * x > p[1] ? x : log(1.0 + exp(p[0] * x)) / p[0];
    case JAG_UNARY_hardtanh: return isnan(x) ? x : fmin(fmax(x, p[0]), p[1]);
    default: JAG_ASSERT(!"not a parametrised unary op"); return 0;
    }
}

// x is (...) any strides and dtype, y is (...) contiguous: y = f(x; params), one
// element at a time, each x rounded to y's dtype first
void jag__unary_reference(jag_unary_fn f, const jag_tensor *x, const double *params, jag_tensor *y) {
    double prm[2];
    round_params(f, params, y->dtype, prm);
    bool with_params = jag__unary_has_params(f);
    int64_t n = jag_numel(y), idx[JAG_MAX_DIMS] = {0};
    size_t xs = jag_dtype_size(x->dtype), ys = jag_dtype_size(y->dtype);
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;
        for (int d = 0; d < x->ndim; d++) off += idx[d] * x->strides[d];
        double v = jag__pw_round_to(jag__load_as_double(jag__ptr(x) + off * (int64_t)xs, x->dtype), y->dtype);
        jag__store_from_double(jag__ptr(y) + e * (int64_t)ys, y->dtype,
                               with_params ? ref_param_value(f, v, prm) : ref_value(f, v));
        for (int d = y->ndim - 1; d >= 0; d--) {
            if (++idx[d] < y->sizes[d]) break;
            idx[d] = 0;
        }
    }
}
