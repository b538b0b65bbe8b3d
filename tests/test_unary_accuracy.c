/* test_unary_accuracy.c — the float unary ops (exp, log, sqrt, rsqrt, sin,
 * cos, tanh, sigmoid, silu, gelu, gelu_tanh, reciprocal, log1p, expm1, erf,
 * erfc, atan, sinh, cosh, asinh, selu, logsigmoid, mish) in float32 and
 * float64 against libm references over the whole float range, in ulps.
 *
 * Inputs: every binade of both signs (the denormals included), each with
 * evenly spaced and pseudo-random significands; the bit patterns next to
 * the points where a result overflows, turns denormal, underflows or
 * saturates (exp, sigmoid, silu, tanh, gelu); huge arguments of sin and cos
 * (1e6, 1e20, FLT_MAX, 1e300, DBL_MAX); +-0, +-inf, NaN. float32 results are
 * compared with libm's double functions, float64 ones with its long double
 * functions (64-bit significand on x86-64), each the op's stable formula.
 * The error is |y - ref| in ulps of the result's dtype at the reference
 * (the smallest denormal in the denormals); a NaN reference must give NaN
 * and only it, a reference that rounds to +-inf must give it exactly, and a
 * zero must keep its sign. So the special values are checked exactly:
 * exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(-1) = NaN,
 * sin(inf) = NaN, tanh(+-inf) = +-1, sigmoid(-inf) = 0, silu(-inf) = NaN
 * (-inf * 0, as torch), NaN in NaN out, ...
 *
 * The bounds are those of the kernels (src/cpu/sleef_unary.c for SLEEF's,
 * src/cpu/vecmath.h for the hand-written ones), stated per build: with
 * SLEEF sin, cos and log (both dtypes), exp (float32) are SLEEF's u10
 * functions, 1.0 ulp; without it sin, cos and log are glibc's, within the
 * maxima its manual lists for x86-64 (1 ulp), and exp vecmath.h's. float64 gelu is 0.5 x erfc(-x / sqrt 2)
 * and float64 gelu_tanh x sigmoid(2u): their arguments -x / sqrt 2 and 2u
 * round in double first, an error no double formula avoids and that the
 * steep erfc and exp amplify (|2u| 2^-53 relative), so their references
 * take the same rounded argument and the bounds are those of erfc (SLEEF's
 * 1.5 ulp, or glibc's) and of sigmoid, each plus the final product's
 * rounding.
 *
 * The parametrised ops (hardtanh, leaky_relu, elu, softplus) with several
 * scalars each, and hardswish and hardsigmoid, in float32 over the same
 * inputs: bit for bit against their double formula rounded once where the
 * kernel is exact, elu and softplus within their stated bounds (softplus
 * also around its threshold and its switch to the double formula), their
 * special values exactly.
 *
 * Also: vecmath.h's float32 exp, sigmoid and silu called directly (the
 * public ops run SLEEF's where the build has it; other kernels still run
 * these); a strided input (every other element, and a transposed matrix)
 * gives the same bits as the contiguous one, and every length from 1 to 70
 * (the vector loops' tails) the same bits as the long run. And the float32
 * gelu, erf and erfc table kernels of AVX-512 builds densely over their
 * tables' ranges and at every interval boundary, with their bounds there. */
#include "test.h"

#include "cpu/pointwise_math.h"
#include "dispatch/dispatch.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef jag_status (*unary_fn)(const jag_tensor *, jag_tensor **);

/* ---- references -------------------------------------------------------------- */

#define SQRT1_2 0.70710678118654752440
#define SQRT_2_PI 0.79788456080286535588
#define KAPPA 0.044715

static double sig_d(double x) {
    double e = exp(-fabs(x));
    return (x >= 0 ? 1.0 : e) / (1.0 + e);
}
static long double sig_l(long double x) {
    long double e = expl(-fabsl(x));
    return (x >= 0 ? 1.0L : e) / (1.0L + e);
}

/* float32: the exact formulas in double (the argument of a float32 input is
 * exact in double). */
static double ref32(jag_op_id op, double x) {
    switch (op) {
    case JAG_OP_exp: return exp(x);
    case JAG_OP_log: return log(x);
    case JAG_OP_sqrt: return sqrt(x);
    case JAG_OP_rsqrt: return 1.0 / sqrt(x);
    case JAG_OP_sin: return sin(x);
    case JAG_OP_cos: return cos(x);
    case JAG_OP_tanh: return tanh(x);
    case JAG_OP_sigmoid: return sig_d(x);
    case JAG_OP_silu: return x * sig_d(x);
    case JAG_OP_gelu: return 0.5 * x * erfc(-x * SQRT1_2);
    case JAG_OP_gelu_tanh: return x * sig_d(2.0 * SQRT_2_PI * (x + KAPPA * x * x * x));
    case JAG_OP_reciprocal: return 1.0 / x;
    case JAG_OP_log1p: return log1p(x);
    case JAG_OP_atan: return atan(x);
    case JAG_OP_sinh: return sinh(x);
    case JAG_OP_cosh: return cosh(x);
    case JAG_OP_asinh: return asinh(x);
    case JAG_OP_expm1: return expm1(x);
    case JAG_OP_erf: return erf(x);
    case JAG_OP_erfc: return erfc(x);
    case JAG_OP_selu: return JAG_SELU_SCALE * (x > 0 ? x : JAG_SELU_ALPHA * expm1(x));
    case JAG_OP_logsigmoid: return fmin(x, 0.0) - log1p(exp(-fabs(x)));
    case JAG_OP_mish: return x * tanh(fmax(x, 0.0) + log1p(exp(-fabs(x))));
    default: return NAN;
    }
}

/* float64: long double formulas; gelu and gelu_tanh from the argument the
 * kernels round in double (see the file comment). */
static long double ref64(jag_op_id op, double x) {
    long double xl = x;
    switch (op) {
    case JAG_OP_exp: return expl(xl);
    case JAG_OP_log: return logl(xl);
    case JAG_OP_sqrt: return sqrtl(xl);
    case JAG_OP_rsqrt: return 1.0L / sqrtl(xl);
    case JAG_OP_sin: return sinl(xl);
    case JAG_OP_cos: return cosl(xl);
    case JAG_OP_tanh: return tanhl(xl);
    case JAG_OP_sigmoid: return sig_l(xl);
    case JAG_OP_silu: return xl * sig_l(xl);
    case JAG_OP_gelu: {
        double z = -x * SQRT1_2;
        return 0.5L * xl * erfcl((long double)z);
    }
    case JAG_OP_gelu_tanh: {
        double u = SQRT_2_PI * (x + KAPPA * x * x * x);
        return xl * sig_l((long double)(2.0 * u));
    }
    case JAG_OP_reciprocal: return 1.0L / xl;
    case JAG_OP_log1p: return log1pl(xl);
    case JAG_OP_atan: return atanl(xl);
    case JAG_OP_sinh: return sinhl(xl);
    case JAG_OP_cosh: return coshl(xl);
    case JAG_OP_asinh: return asinhl(xl);
    case JAG_OP_expm1: return expm1l(xl);
    case JAG_OP_erf: return erfl(xl);
    case JAG_OP_erfc: return erfcl(xl);
    case JAG_OP_selu: return (long double)JAG_SELU_SCALE * (x > 0 ? xl : (long double)JAG_SELU_ALPHA * expm1l(xl));
    case JAG_OP_logsigmoid: return fminl(xl, 0.0L) - log1pl(expl(-fabsl(xl)));
    case JAG_OP_mish: return xl * tanhl(fmaxl(xl, 0.0L) + log1pl(expl(-fabsl(xl))));
    default: return NAN;
    }
}

/* ---- ulps -------------------------------------------------------------------- */

static double ulp_err32(float y, double ref) {
    if (isnan(ref) || isnan(y)) return isnan(ref) && isnan(y) ? 0 : INFINITY;
    float rf = (float)ref;
    if (isinf(rf) || isinf(y)) return y == rf ? 0 : INFINITY;
    if (y == 0 && ref == 0 && !signbit(y) != !signbit(ref)) return INFINITY;
    double a = fabs(ref), ulp = 0x1p-149;
    if (a >= 0x1p-126) {
        int e;
        frexp(a, &e);
        ulp = ldexp(1.0, e - 24);
    }
    return fabs((double)y - ref) / ulp;
}

static double ulp_err64(double y, long double ref) {
    if (isnan(ref) || isnan(y)) return isnan(ref) && isnan(y) ? 0 : INFINITY;
    double rd = (double)ref;
    if (isinf(rd) || isinf(y)) return y == rd ? 0 : INFINITY;
    if (y == 0 && ref == 0 && !signbit(y) != !signbit(ref)) return INFINITY;
    long double a = fabsl(ref), ulp = 0x1p-1074L;
    if (a >= 0x1p-1022L) {
        int e;
        frexpl(a, &e);
        ulp = ldexpl(1.0L, e - 53);
    }
    return (double)(fabsl((long double)y - ref) / ulp);
}

/* ---- the ops and their bounds -------------------------------------------------- */

typedef struct {
    const char *name;
    jag_op_id id;
    unary_fn fn;
    /* max ulps: float32 with SLEEF, float32 without, float64 with, without */
    double b32_sleef, b32_libm, b64_sleef, b64_libm;
    bool den_scaled; /* float64 denormal results: the bound times |x| */
} op_case;

/* exp: SLEEF u10 (float32) / vecmath.h 1.010 (float32 without SLEEF, and
 * float64). log, sin, cos: SLEEF u10 / glibc (1 ulp). tanh, gelu_tanh,
 * float32 gelu without SLEEF, float64 sigmoid and silu: vecmath.h (its table). float32
 * sigmoid and silu: SLEEF's exp in sleef_unary.c or vecmath.h, the same
 * bounds. float64 gelu: SLEEF's erfc (1.5 ulp) or glibc's (its manual
 * lists up to 5 ulp, by platform; 2.1 measured on x86-64), plus the
 * product's rounding. sqrt,
 * reciprocal: IEEE, correctly rounded. rsqrt: 1 / sqrt, two roundings.
 * log1p, expm1, erf, erfc, atan: glibc per element without SLEEF (log1pf ...
 * in float32) and in float64: 1 ulp, erfc 2.5 (float32, its denormal tail) and 2.0
 * (float64); measured on x86-64 0.73, 0.75, 0.76, 2.20 (float32) and 0.73,
 * 0.73, 0.84, 1.72 (float64); atan 0.74 (float32) and 0.51 (float64).
 * sinh, cosh, asinh: glibc per element, 2 ulp (its manual's x86-64 bound);
 * measured 1.69, 1.46, 1.46 (float32) and 1.38, 1.23, 1.39 (float64).
 * With SLEEF, float32 log1p, expm1, atan are SLEEF's u10 functions, 1.0
 * ulp, and so are erf and erfc (u15: 1.5) on targets without AVX-512; on
 * AVX-512 targets erf and erfc are sleef_unary.c's piecewise polynomials
 * (erf 1.0 ulp, every float measured: 0.978; erfc 1.25 below 3.9375,
 * measured 1.14, and SLEEF's u15 beyond: 1.5, measured 1.45), within the glibc bounds above.
 * float32 gelu with SLEEF: 5.0 ulp, the bound of sleef_unary.c's float
 * kernel sl_gelu_f (every float with |x| < 18 measured: 4.90 at x =
 * -12.33), which runs the whole range without AVX-512 and the lanes
 * outside [-4.125, 3.875) with it (inside, the piecewise polynomial: 2.0
 * ulp, test_table_ranges_float32); relative accuracy kept through its
 * underflow; without SLEEF vecmath.h's double one, 0.51. selu, logsigmoid, mish: float32 with SLEEF
 * sleef_unary.c's float kernels, 2.0, 2.5, 5.0 ulp (measured 1.58, 1.46,
 * 3.47 here, mish 4.70 over every float with |x| < 18); without it, and in float64, pointwise_math.h's double formulas
 * (float32 rounded once: 1.0; float64 glibc's expm1, log1p, exp, tanh:
 * 2.0, 2.0, 3.0, measured 1.81, 1.40, 2.92).
 * float64 gelu and gelu_tanh whose result is denormal: x times a factor
 * (erfc(z) / 2, sigmoid(2u)) that is itself denormal, rounded before the
 * product, whose error grows with |x|: there the bound is |x| times the
 * stated one (den_scaled). */
static const op_case ops[] = {
    {"exp", JAG_OP_exp, jag_exp, 1.0, 1.01, 1.01, 1.01, false},
    {"log", JAG_OP_log, jag_log, 1.0, 1.0, 1.0, 1.0, false},
    {"sqrt", JAG_OP_sqrt, jag_sqrt, 0.5, 0.5, 0.5, 0.5, false},
    {"rsqrt", JAG_OP_rsqrt, jag_rsqrt, 1.5, 1.5, 1.5, 1.5, false},
    {"sin", JAG_OP_sin, jag_sin, 1.0, 1.0, 1.0, 1.0, false},
    {"cos", JAG_OP_cos, jag_cos, 1.0, 1.0, 1.0, 1.0, false},
    {"tanh", JAG_OP_tanh, jag_tanh, 1.52, 1.52, 1.52, 1.52, false},
    {"sigmoid", JAG_OP_sigmoid, jag_sigmoid, 2.41, 2.41, 2.39, 2.39, false},
    {"silu", JAG_OP_silu, jag_silu, 2.75, 2.75, 2.75, 2.75, false},
    {"gelu", JAG_OP_gelu, jag_gelu, 5.0, 0.51, 2.0, 5.5, true},
    {"gelu_tanh", JAG_OP_gelu_tanh, jag_gelu_tanh, 0.57, 0.57, 2.9, 2.9, true},
    {"reciprocal", JAG_OP_reciprocal, jag_reciprocal, 0.5, 0.5, 0.5, 0.5, false},
    {"log1p", JAG_OP_log1p, jag_log1p, 1.0, 1.0, 1.0, 1.0, false},
    {"expm1", JAG_OP_expm1, jag_expm1, 1.0, 1.0, 1.0, 1.0, false},
    {"erf", JAG_OP_erf, jag_erf, 1.0, 1.0, 1.0, 1.0, false},
    {"erfc", JAG_OP_erfc, jag_erfc, 1.5, 2.5, 2.0, 2.0, false},
    {"atan", JAG_OP_atan, jag_atan, 1.0, 1.0, 1.0, 1.0, false},
    {"sinh", JAG_OP_sinh, jag_sinh, 2.0, 2.0, 2.0, 2.0, false},
    {"cosh", JAG_OP_cosh, jag_cosh, 2.0, 2.0, 2.0, 2.0, false},
    {"asinh", JAG_OP_asinh, jag_asinh, 2.0, 2.0, 2.0, 2.0, false},
    {"selu", JAG_OP_selu, jag_selu, 2.0, 1.0, 2.0, 2.0, false},
    {"logsigmoid", JAG_OP_logsigmoid, jag_logsigmoid, 2.5, 1.0, 2.0, 2.0, false},
    {"mish", JAG_OP_mish, jag_mish, 5.0, 1.0, 3.0, 3.0, false},
};
#define N_OPS ((int)(sizeof ops / sizeof ops[0]))

/* ---- inputs ------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

/* float32: per binade (biased exponent 0, the denormals, to 254) and sign,
 * PER_BINADE / 2 evenly spaced significands and as many random ones; NEAR
 * bit patterns either side of each edge; the special values. */
enum { PER_BINADE32 = 1024, NEAR32 = 64 };
static const float edges32[] = {
    88.7228394f,  -87.3365479f, -103.972076f, -103.278931f, /* exp: overflow, denormal, zero */
    9.01092052f,  -9.01092052f, 0.625f,       -0.625f,      /* tanh: saturates to 1; its switch */
    16.6355324f,  -16.6355324f, -88.7228394f, -103.972076f, /* sigmoid: saturates to 1; denormal; 0 */
    -91.8f,       -120.0f,      90.0f,        -20.0f,       /* silu's denormals; the clamps */
    1.0f,         -1.0f,        -14.5f,       -16.0f,       /* gelu's forms; its underflow */
    1e6f,         1e20f,        FLT_MAX,      -FLT_MAX,     /* huge sin and cos arguments */
    0.5f,         -0.5f,        20.0f,        -80.0f,       /* float gelu's forms, clamp; mish's switch */
    0x1p-14f,     -0x1p-14f,    0x1p100f,     -40.0f,       /* erf's, log1p's switches; float64 mish's */
    0x1p-126f,    -0x1p-126f,   1.0f,         0.0f};
static const float specials32[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
                                   0x1p-149f, -0x1p-149f, 1e6f, -1e6f, 1e20f, -1e20f, 1.0f, -1.0f, 3.14159274f};

static int64_t inputs32(float **out) {
    int64_t cap = 2 * 255 * PER_BINADE32 + (int64_t)(sizeof edges32 / sizeof edges32[0]) * (2 * NEAR32 + 1) +
                  (int64_t)(sizeof specials32 / sizeof specials32[0]);
    float *xs = malloc((size_t)cap * sizeof *xs);
    if (!xs) return 0;
    int64_t n = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t e = 0; e < 255; e++)
            for (uint32_t k = 0; k < PER_BINADE32; k++) {
                uint32_t m = k < PER_BINADE32 / 2 ? (uint32_t)((uint64_t)k * 0x7fffffu / (PER_BINADE32 / 2 - 1))
                                                 : (uint32_t)(rng() >> 41);
                uint32_t b = sign << 31 | e << 23 | (m & 0x7fffffu);
                memcpy(&xs[n++], &b, sizeof b);
            }
    for (size_t i = 0; i < sizeof edges32 / sizeof edges32[0]; i++) {
        uint32_t b;
        memcpy(&b, &edges32[i], sizeof b);
        for (int d = -NEAR32; d <= NEAR32; d++) {
            int64_t mag = (int64_t)(b & 0x7fffffffu) + d;
            if (mag < 0 || mag > 0x7f7fffff) continue;
            uint32_t m = (uint32_t)mag | (b & 0x80000000u);
            memcpy(&xs[n++], &m, sizeof m);
        }
    }
    for (size_t i = 0; i < sizeof specials32 / sizeof specials32[0]; i++) xs[n++] = specials32[i];
    *out = xs;
    return n;
}

/* float64: the same with PER_BINADE64 per binade (biased exponents 0 to
 * 2046). */
enum { PER_BINADE64 = 192, NEAR64 = 32 };
static const double edges64[] = {
    709.782712893384,    -708.3964185322641,   -745.1332191019411,  -744.4400719213812, /* exp */
    19.061547465398498,  -19.061547465398498,  0.625,               -0.625,             /* tanh */
    36.736800569677101,  -36.736800569677101,  -709.782712893384,   -745.1332191019411, /* sigmoid */
    -760.0,              710.0,                -750.0,              -38.5,              /* silu, clamps, gelu */
    -26.5,               -27.3,                1e6,                 1e22,               /* gelu's underflow; sin */
    1e300,               DBL_MAX,              -DBL_MAX,            0x1p-1022,          /* huge; DBL_MIN */
    -0x1p-1022,          1.0,                  -1.0,                0.0};
static const double specials64[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, DBL_MAX, -DBL_MAX, DBL_MIN, -DBL_MIN,
                                    0x1p-1074, -0x1p-1074, 1e6, -1e6, 1e22, 1e300, -1e300, 1.0, -1.0,
                                    3.141592653589793};

static int64_t inputs64(double **out) {
    int64_t cap = 2 * 2047 * PER_BINADE64 + (int64_t)(sizeof edges64 / sizeof edges64[0]) * (2 * NEAR64 + 1) +
                  (int64_t)(sizeof specials64 / sizeof specials64[0]);
    double *xs = malloc((size_t)cap * sizeof *xs);
    if (!xs) return 0;
    int64_t n = 0;
    for (uint64_t sign = 0; sign < 2; sign++)
        for (uint64_t e = 0; e < 2047; e++)
            for (uint64_t k = 0; k < PER_BINADE64; k++) {
                uint64_t m = k < PER_BINADE64 / 2 ? k * (0xfffffffffffffu / (PER_BINADE64 / 2 - 1)) : rng() >> 12;
                uint64_t b = sign << 63 | e << 52 | (m & 0xfffffffffffffu);
                memcpy(&xs[n++], &b, sizeof b);
            }
    for (size_t i = 0; i < sizeof edges64 / sizeof edges64[0]; i++) {
        uint64_t b;
        memcpy(&b, &edges64[i], sizeof b);
        for (int d = -NEAR64; d <= NEAR64; d++) {
            uint64_t mag = (b & 0x7fffffffffffffffu) + (uint64_t)(int64_t)d;
            if ((int64_t)(b & 0x7fffffffffffffffu) + d < 0 || mag > 0x7fefffffffffffffu) continue;
            uint64_t m = mag | (b & 0x8000000000000000u);
            memcpy(&xs[n++], &m, sizeof m);
        }
    }
    for (size_t i = 0; i < sizeof specials64 / sizeof specials64[0]; i++) xs[n++] = specials64[i];
    *out = xs;
    return n;
}

/* ---- the sweeps ---------------------------------------------------------------- */

static void test_float32_sweep(void) {
    TEST_BEGIN();
    bool sleef = jag__unary_uses_sleef();
    printf("test_unary_accuracy: SLEEF kernels %s\n", sleef ? "on" : "off (libm)");
    float *xs = NULL;
    int64_t n = inputs32(&xs);
    CHECK(n > 500000);
    if (!xs) return;
    jag_tensor *x = NULL;
    CHECK_OK(jag_from_data(xs, &n, 1, JAG_FLOAT32, &x));
    for (int o = 0; x && o < N_OPS; o++) {
        jag_tensor *y = NULL;
        CHECK_OK(ops[o].fn(x, &y));
        if (!y) continue;
        CHECK(jag_tensor_dtype(y) == JAG_FLOAT32 && jag_numel(y) == n && jag_is_contiguous(y));
        const float *ys = jag_data(y);
        double worst = 0, bound = sleef ? ops[o].b32_sleef : ops[o].b32_libm;
        int64_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            double err = ulp_err32(ys[i], ref32(ops[o].id, xs[i]));
            if (!(err <= worst)) worst = err, at = i;
        }
        printf("  float32 %-10s max %.3f ulp (bound %.2f)\n", ops[o].name, worst, bound);
        CHECK_MSG(worst <= bound, "float32 %s: %.3f ulp at x = %a (got %a, reference %a), bound %.2f", ops[o].name,
                  worst, xs[at], ys[at], ref32(ops[o].id, xs[at]), bound);
        jag_release(y);
    }
    jag_release(x);
    free(xs);
}

static void test_float64_sweep(void) {
    TEST_BEGIN();
    if (LDBL_MANT_DIG < 64) return;
    /* Under valgrind long double arithmetic runs in double precision: the
     * references would be no better than the kernels (the sweep runs in
     * `make test` and under the sanitizers). */
    volatile long double one = 1.0L, tiny = 0x1p-60L;
    if (one + tiny == one) {
        printf("test_float64_sweep: long double has no extra precision in this run (valgrind); sweep not run\n");
        return;
    }
    bool sleef = jag__unary_uses_sleef();
    double *xs = NULL;
    int64_t n = inputs64(&xs);
    CHECK(n > 500000);
    if (!xs) return;
    jag_tensor *x = NULL;
    CHECK_OK(jag_from_data(xs, &n, 1, JAG_FLOAT64, &x));
    for (int o = 0; x && o < N_OPS; o++) {
        jag_tensor *y = NULL;
        CHECK_OK(ops[o].fn(x, &y));
        if (!y) continue;
        CHECK(jag_tensor_dtype(y) == JAG_FLOAT64 && jag_numel(y) == n && jag_is_contiguous(y));
        const double *ys = jag_data(y);
        double worst = 0, bound = sleef ? ops[o].b64_sleef : ops[o].b64_libm;
        int64_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            long double ref = ref64(ops[o].id, xs[i]);
            double err = ulp_err64(ys[i], ref);
            if (ops[o].den_scaled && fabsl(ref) < 0x1p-1022L && fabs(xs[i]) > 1) err /= fabs(xs[i]);
            if (!(err <= worst)) worst = err, at = i;
        }
        printf("  float64 %-10s max %.3f ulp (bound %.2f)\n", ops[o].name, worst, bound);
        CHECK_MSG(worst <= bound, "float64 %s: %.3f ulp at x = %a (got %a, reference %La), bound %.2f", ops[o].name,
                  worst, xs[at], ys[at], ref64(ops[o].id, xs[at]), bound);
        jag_release(y);
    }
    jag_release(x);
    free(xs);
}

/* vecmath.h's float32 exp, sigmoid and silu, called directly: where the
 * build has SLEEF the public ops run sleef_unary.c instead, but softmax, the
 * ragged reductions and silu's far negative lanes still run these. Same
 * inputs and references, vecmath.h's bounds (with FMA or without: this file
 * is compiled without -march=native). */
static void test_vecmath_float32(void) {
    TEST_BEGIN();
    float *xs = NULL;
    int64_t n = inputs32(&xs);
    CHECK(n > 500000);
    if (!xs) return;
    static const struct {
        const char *name;
        jag_op_id id;
        float (*fn)(float);
        double bound;
    } fns[] = {{"jag__vm_exp_f32", JAG_OP_exp, jag__vm_exp_f32, 1.01},
               {"jag__vm_sigmoid_f32", JAG_OP_sigmoid, jag__vm_sigmoid_f32, 2.41},
               {"jag__vm_silu_f32", JAG_OP_silu, jag__vm_silu_f32, 2.75}};
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        double worst = 0;
        int64_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            double err = ulp_err32(fns[f].fn(xs[i]), ref32(fns[f].id, xs[i]));
            if (!(err <= worst)) worst = err, at = i;
        }
        CHECK_MSG(worst <= fns[f].bound, "%s: %.3f ulp at x = %a, bound %.2f", fns[f].name, worst, xs[at],
                  fns[f].bound);
    }
    free(xs);
}

/* ---- the parametrised ops and hardswish, hardsigmoid in float32 ------------- */

/* Each case: one op with fixed scalars (a wrapper of the unary_fn shape),
 * its textbook formula in double on the float32 input (exact there) and
 * scalars, and its bound: exact (the float32 result must be the formula's
 * double value rounded once, bit for bit: hardtanh and leaky_relu are
 * compares and a product exact in double; hardswish and hardsigmoid are
 * computed in double) or in ulps. elu with SLEEF: sleef_unary.c's alpha
 * expm1(x), 2.5 ulp (SLEEF's 1.0 ulp expm1, up to 2 ulps of the product's
 * binade, and the product's rounding); softplus with SLEEF: its float
 * kernel on exp and log1p with beta x carried exactly, 3.0 ulp. Without
 * SLEEF both are pointwise_math.h's double formulas rounded once (1.0 as
 * selu's). torch computes hardtanh as clamp(x, min_val, max_val), leaky_relu
 * as x > 0 ? x : x negative_slope, elu as x > 0 ? x : alpha (e^x - 1),
 * softplus as beta x > threshold ? x : log1p(e^(beta x)) / beta, hardswish
 * as x min(max(x + 3, 0), 6) / 6 and hardsigmoid as min(max(x + 3, 0), 6) /
 * 6: the same formulas (the scalars converted to float32 first, as torch
 * converts them to the tensor's dtype). */
#define PARAM_CASE(NAME, CALL)                                                 \
    static jag_status NAME(const jag_tensor *x, jag_tensor **y) { return CALL; }
PARAM_CASE(htanh_unit, jag_hardtanh(x, -1.0, 1.0, y))
PARAM_CASE(htanh_odd, jag_hardtanh(x, -0.3, 2.7, y)) /* scalars round to float32 */
PARAM_CASE(htanh_relu6, jag_hardtanh(x, 0.0, 6.0, y))
PARAM_CASE(leaky_default, jag_leaky_relu(x, 0.01, y))
PARAM_CASE(leaky_neg, jag_leaky_relu(x, -0.7, y))
PARAM_CASE(leaky_big, jag_leaky_relu(x, 3.3, y))
PARAM_CASE(elu_1, jag_elu(x, 1.0, y))
PARAM_CASE(elu_small, jag_elu(x, 0.375, y))
PARAM_CASE(elu_big, jag_elu(x, 2.9, y))
PARAM_CASE(softplus_default, jag_softplus(x, 1.0, 20.0, y))
PARAM_CASE(softplus_b2, jag_softplus(x, 2.0, 20.0, y))
PARAM_CASE(softplus_b03, jag_softplus(x, 0.3, 5.0, y))
PARAM_CASE(softplus_bneg, jag_softplus(x, -1.7, 20.0, y))
PARAM_CASE(softplus_b1e3, jag_softplus(x, 1000.0, 0.25, y))
PARAM_CASE(hardswish_op, jag_hardswish(x, y))
PARAM_CASE(hardsigmoid_op, jag_hardsigmoid(x, y))
#undef PARAM_CASE

static double f32(double v) { return (double)(float)v; }
static double ref_htanh(double x, double lo, double hi) {
    lo = f32(lo), hi = f32(hi);
    return isnan(x) ? x : x < lo ? lo : x > hi ? hi : x;
}
static double ref_leaky(double x, double s) { return x > 0 ? x : x * f32(s); }
static double ref_elu(double x, double a) { return x > 0 ? x : f32(a) * expm1(x); }
static double ref_softplus(double x, double beta, double thr) {
    beta = f32(beta), thr = f32(thr);
    double b = beta * x; /* exact: 24 + 24 bits */
    return b > thr ? x : (fmax(b, 0.0) + log1p(exp(-fabs(b)))) / beta;
}
static double ref_hardswish(double x) {
    double c = x + 3.0;
    c = isnan(c) ? c : c < 0 ? 0 : c > 6 ? 6 : c;
    return x * c / 6.0;
}
static double ref_hardsigmoid(double x) {
    double c = x + 3.0;
    return isnan(c) ? c : (c < 0 ? 0 : c > 6 ? 6 : c) / 6.0;
}

typedef enum { P_HT_UNIT, P_HT_ODD, P_HT_RELU6, P_LK_DEF, P_LK_NEG, P_LK_BIG, P_ELU_1, P_ELU_S, P_ELU_B, P_SP_DEF,
               P_SP_B2, P_SP_B03, P_SP_NEG, P_SP_B1E3, P_HSWISH, P_HSIG } param_id;
static double param_ref(param_id id, double x) {
    switch (id) {
    case P_HT_UNIT: return ref_htanh(x, -1.0, 1.0);
    case P_HT_ODD: return ref_htanh(x, -0.3, 2.7);
    case P_HT_RELU6: return ref_htanh(x, 0.0, 6.0);
    case P_LK_DEF: return ref_leaky(x, 0.01);
    case P_LK_NEG: return ref_leaky(x, -0.7);
    case P_LK_BIG: return ref_leaky(x, 3.3);
    case P_ELU_1: return ref_elu(x, 1.0);
    case P_ELU_S: return ref_elu(x, 0.375);
    case P_ELU_B: return ref_elu(x, 2.9);
    case P_SP_DEF: return ref_softplus(x, 1.0, 20.0);
    case P_SP_B2: return ref_softplus(x, 2.0, 20.0);
    case P_SP_B03: return ref_softplus(x, 0.3, 5.0);
    case P_SP_NEG: return ref_softplus(x, -1.7, 20.0);
    case P_SP_B1E3: return ref_softplus(x, 1000.0, 0.25);
    case P_HSWISH: return ref_hardswish(x);
    case P_HSIG: return ref_hardsigmoid(x);
    }
    return NAN;
}

static const struct {
    const char *name;
    param_id id;
    unary_fn fn;
    double b32_sleef, b32_libm; /* max ulps; a negative bound: exact, bit for bit */
} param_ops[] = {
    {"hardtanh(-1, 1)", P_HT_UNIT, htanh_unit, -1, -1},
    {"hardtanh(-0.3, 2.7)", P_HT_ODD, htanh_odd, -1, -1},
    {"hardtanh(0, 6)", P_HT_RELU6, htanh_relu6, -1, -1},
    {"leaky_relu(0.01)", P_LK_DEF, leaky_default, -1, -1},
    {"leaky_relu(-0.7)", P_LK_NEG, leaky_neg, -1, -1},
    {"leaky_relu(3.3)", P_LK_BIG, leaky_big, -1, -1},
    {"elu(1)", P_ELU_1, elu_1, 2.5, 1.0},
    {"elu(0.375)", P_ELU_S, elu_small, 2.5, 1.0},
    {"elu(2.9)", P_ELU_B, elu_big, 2.5, 1.0},
    {"softplus(1, 20)", P_SP_DEF, softplus_default, 3.0, 1.0},
    {"softplus(2, 20)", P_SP_B2, softplus_b2, 3.0, 1.0},
    {"softplus(0.3, 5)", P_SP_B03, softplus_b03, 3.0, 1.0},
    {"softplus(-1.7, 20)", P_SP_NEG, softplus_bneg, 3.0, 1.0},
    {"softplus(1000, 0.25)", P_SP_B1E3, softplus_b1e3, 3.0, 1.0},
    {"hardswish", P_HSWISH, hardswish_op, -1, -1},
    {"hardsigmoid", P_HSIG, hardsigmoid_op, -1, -1},
};
#define N_PARAM_OPS ((int)(sizeof param_ops / sizeof param_ops[0]))

/* float32 results against the double formula rounded once: bit for bit (a
 * NaN for a NaN) where exact, else |y - ref| in ulps. */
static void test_param_float32_sweep(void) {
    TEST_BEGIN();
    bool sleef = jag__unary_uses_sleef();
    float *xs = NULL;
    int64_t n = inputs32(&xs);
    CHECK(n > 500000);
    if (!xs) return;
    /* the threshold and the exp switch of softplus: beta x at either side */
    jag_tensor *x = NULL;
    CHECK_OK(jag_from_data(xs, &n, 1, JAG_FLOAT32, &x));
    for (int o = 0; x && o < N_PARAM_OPS; o++) {
        jag_tensor *y = NULL;
        CHECK_OK(param_ops[o].fn(x, &y));
        if (!y) continue;
        CHECK(jag_tensor_dtype(y) == JAG_FLOAT32 && jag_numel(y) == n);
        const float *ys = jag_data(y);
        double bound = sleef ? param_ops[o].b32_sleef : param_ops[o].b32_libm;
        double worst = 0;
        int64_t at = 0, mismatches = 0;
        for (int64_t i = 0; i < n; i++) {
            double ref = param_ref(param_ops[o].id, xs[i]);
            if (bound < 0) {
                float want = (float)ref;
                bool same = isnan(want) ? isnan(ys[i]) : memcmp(&want, &ys[i], sizeof want) == 0;
                if (!same && mismatches++ == 0) at = i;
            } else {
                double err = ulp_err32(ys[i], ref);
                if (!(err <= worst)) worst = err, at = i;
            }
        }
        if (bound < 0) {
            printf("  float32 %-22s %lld results differ from the double formula rounded once\n", param_ops[o].name,
                   (long long)mismatches);
            CHECK_MSG(mismatches == 0, "float32 %s: %lld results differ, first at x = %a (got %a, expected %a)",
                      param_ops[o].name, (long long)mismatches, xs[at], ys[at],
                      (float)param_ref(param_ops[o].id, xs[at]));
        } else {
            printf("  float32 %-22s max %.3f ulp (bound %.2f)\n", param_ops[o].name, worst, bound);
            CHECK_MSG(worst <= bound, "float32 %s: %.3f ulp at x = %a (got %a, reference %a), bound %.2f",
                      param_ops[o].name, worst, xs[at], ys[at], param_ref(param_ops[o].id, xs[at]), bound);
        }
        jag_release(y);
    }
    jag_release(x);
    free(xs);
}

/* Around softplus's threshold and its switch to the double formula (beta x
 * = -80), every float within 4096 ulps of x = threshold / beta and -80 /
 * beta, for each beta: the exact decision beta x > threshold (beta x is
 * not rounded first) and the bound on both sides. */
static void test_softplus_edges(void) {
    TEST_BEGIN();
    bool sleef = jag__unary_uses_sleef();
    static const param_id ids[] = {P_SP_DEF, P_SP_B2, P_SP_B03, P_SP_NEG, P_SP_B1E3};
    static const double betas[] = {1.0, 2.0, 0.3, -1.7, 1000.0}, thrs[] = {20.0, 20.0, 5.0, 20.0, 0.25};
    static const unary_fn fns[] = {softplus_default, softplus_b2, softplus_b03, softplus_bneg, softplus_b1e3};
    enum { HALF = 4096 };
    float *xs = malloc(4 * HALF * sizeof *xs);
    CHECK(xs != NULL);
    if (!xs) return;
    for (int k = 0; k < 5; k++) {
        float centres[2] = {(float)(f32(thrs[k]) / f32(betas[k])), (float)(-80.0 / f32(betas[k]))};
        int64_t n = 0;
        for (int c = 0; c < 2; c++) {
            float v = centres[c];
            for (int d = 0; d < HALF; d++) v = nextafterf(v, -INFINITY);
            for (int d = 0; d < 2 * HALF; d++, v = nextafterf(v, INFINITY)) xs[n++] = v;
        }
        jag_tensor *x = NULL, *y = NULL;
        CHECK_OK(jag_from_data(xs, &n, 1, JAG_FLOAT32, &x));
        CHECK_OK(fns[k](x, &y));
        double worst = 0, bound = sleef ? 3.0 : 1.0;
        int64_t at = 0;
        const float *ys = y ? jag_data(y) : NULL;
        for (int64_t i = 0; ys && i < n; i++) {
            double err = ulp_err32(ys[i], param_ref(ids[k], xs[i]));
            if (!(err <= worst)) worst = err, at = i;
        }
        CHECK_MSG(ys && worst <= bound, "softplus(beta %g, threshold %g) near its edges: %.3f ulp at x = %a, bound %.2f",
                  betas[k], thrs[k], worst, xs[at], bound);
        jag_release(y), jag_release(x);
    }
    free(xs);
}

/* ---- special values, exactly -------------------------------------------------- */

/* fn on the n values x, as they are (a short run: the kernels' scalar
 * tails) and repeated over runs of 32 starting at each of the first 16
 * (so that each value sits at every lane of the vector loops, 8 or 16
 * floats wide), gives `want` exactly. */
static void check_exact(const char *name, unary_fn fn, jag_dtype dt, const double *x, const double *want, int n) {
    enum { RUN = 32 };
    for (int r = -1; r < 16; r++) {
        double xs[RUN], ws[RUN];
        int64_t len = r < 0 ? n : RUN;
        for (int64_t i = 0; i < len; i++) xs[i] = r < 0 ? x[i] : x[(i + r) % n], ws[i] = r < 0 ? want[i] : want[(i + r) % n];
        jag_tensor *t = NULL, *c = NULL, *y = NULL;
        CHECK_OK(jag_from_data(xs, &len, 1, JAG_FLOAT64, &t));
        CHECK_OK(jag_to_dtype(t, dt, &c));
        CHECK_OK(fn(c, &y));
        for (int64_t i = 0; y && i < len; i++) {
            double g = dt == JAG_FLOAT32 ? (double)((const float *)jag_data(y))[i] : ((const double *)jag_data(y))[i];
            bool ok = isnan(ws[i]) ? isnan(g) : g == ws[i] && !signbit(g) == !signbit(ws[i]);
            CHECK_MSG(ok, "%s(%s) of %g at %lld of %lld is %g, expected %g", name, jag_dtype_name(dt), xs[i],
                      (long long)i, (long long)len, g, ws[i]);
        }
        jag_release(y), jag_release(c), jag_release(t);
    }
}

static void test_special_values(void) {
    TEST_BEGIN();
    const double inf = INFINITY, nan = NAN;
    static const struct {
        const char *name;
        unary_fn fn;
        double x[8], want[8];
        int n;
    } cases[] = {
        {"exp", jag_exp, {-inf, inf, nan, 0, -0.0, -1e4, 1e4}, {0, inf, nan, 1, 1, 0, inf}, 7},
        {"log", jag_log, {0, -0.0, -1, inf, -inf, nan, 1}, {-inf, -inf, nan, inf, nan, nan, 0}, 7},
        {"sin", jag_sin, {inf, -inf, nan, 0, -0.0}, {nan, nan, nan, 0, -0.0}, 5},
        {"cos", jag_cos, {inf, -inf, nan, 0, -0.0}, {nan, nan, nan, 1, 1}, 5},
        {"tanh", jag_tanh, {inf, -inf, nan, 0, -0.0, 30, -30}, {1, -1, nan, 0, -0.0, 1, -1}, 7},
        {"sigmoid", jag_sigmoid, {inf, -inf, nan, 0, 1e4, -1e4}, {1, 0, nan, 0.5, 1, 0}, 6},
        {"silu", jag_silu, {inf, -inf, nan, 0, -0.0, -1e4}, {inf, nan, nan, 0, -0.0, -0.0}, 6},
        {"gelu", jag_gelu, {inf, -inf, nan, 0, -0.0, -1e4}, {inf, nan, nan, 0, -0.0, -0.0}, 6},
        {"gelu_tanh", jag_gelu_tanh, {inf, -inf, nan, 0, -0.0, -1e4}, {inf, nan, nan, 0, -0.0, -0.0}, 6},
        {"erf", jag_erf, {inf, -inf, nan, 0, -0.0}, {1, -1, nan, 0, -0.0}, 5},
        {"log1p", jag_log1p, {inf, -1, -2, nan, 0, -0.0}, {inf, -inf, nan, nan, 0, -0.0}, 6},
        {"selu", jag_selu, {inf, nan, 0, -0.0}, {inf, nan, 0, -0.0}, 4},
        {"logsigmoid", jag_logsigmoid, {inf, -inf, nan}, {0, -inf, nan}, 3},
        {"mish", jag_mish, {inf, -inf, nan, 0, -0.0, -1e4}, {inf, nan, nan, 0, -0.0, -0.0}, 6},
        /* torch: hardtanh(NaN) = NaN, the clamps at +-inf; leaky_relu(-inf)
         * = -inf slope; elu(-inf) = -alpha; softplus(-inf) = 0 (-0 for a
         * negative beta), softplus(inf) = inf; hardswish(-inf) = -inf * 0 =
         * NaN; hardsigmoid(+-inf) = 1, 0 */
        {"hardtanh(-1, 1)", htanh_unit, {inf, -inf, nan, 0, -0.0, 0.5}, {1, -1, nan, 0, -0.0, 0.5}, 6},
        {"hardtanh(0, 6)", htanh_relu6, {inf, -inf, nan, -0.0, -2, 7}, {6, 0, nan, -0.0, 0, 6}, 6},
        {"leaky_relu(0.01)", leaky_default, {inf, -inf, nan, 0, -0.0, 2}, {inf, -inf, nan, 0, -0.0, 2}, 6},
        {"leaky_relu(-0.7)", leaky_neg, {inf, -inf, nan, -0.0}, {inf, inf, nan, 0}, 4},
        {"elu(1)", elu_1, {inf, -inf, nan, 0, -0.0, -1e4}, {inf, -1, nan, 0, -0.0, -1}, 6},
        {"elu(0.375)", elu_small, {inf, -inf, nan, -0.0, -1e4}, {inf, -0.375, nan, -0.0, -0.375}, 5},
        {"softplus(1, 20)", softplus_default, {inf, -inf, nan, 1e4, -1e4, 30}, {inf, 0, nan, 1e4, 0, 30}, 6},
        {"softplus(-1.7, 20)", softplus_bneg, {inf, -inf, nan, -30}, {-0.0, -inf, nan, -30}, 4},
        {"hardswish", hardswish_op, {inf, -inf, nan, 0, -0.0, -4, 3}, {inf, nan, nan, 0, -0.0, -0.0, 3}, 7},
        {"hardsigmoid", hardsigmoid_op, {inf, -inf, nan, 0, -3, 3}, {1, 0, nan, 0.5, 0, 1}, 6},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        check_exact(cases[k].name, cases[k].fn, JAG_FLOAT32, cases[k].x, cases[k].want, cases[k].n);
        check_exact(cases[k].name, cases[k].fn, JAG_FLOAT64, cases[k].x, cases[k].want, cases[k].n);
    }
}

/* ---- layouts and tails: the same bits ---------------------------------------- */

static bool same_bits(const jag_tensor *a, const jag_tensor *b) {
    jag_tensor *ca = NULL, *cb = NULL;
    bool ok = jag_contiguous(a, &ca) == JAG_OK && jag_contiguous(b, &cb) == JAG_OK && jag_numel(ca) == jag_numel(cb) &&
              jag_tensor_dtype(ca) == jag_tensor_dtype(cb) &&
              !memcmp(jag_data(ca), jag_data(cb), (size_t)jag_numel(ca) * jag_dtype_size(jag_tensor_dtype(ca)));
    jag_release(ca), jag_release(cb);
    return ok;
}

/* A (rows, cols) matrix of `dt` with values spread over [-40, 40] (tails,
 * saturations and huge sin arguments among them). */
static jag_tensor *spread(int64_t rows, int64_t cols, jag_dtype dt) {
    int64_t n = rows * cols, s[2] = {rows, cols};
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; v && i < n; i++) {
        double u = (double)(rng() >> 11) * 0x1p-53;
        v[i] = i % 17 == 0 ? ldexp(u, 60) : u * 80 - 40;
    }
    jag_tensor *t = NULL, *c = NULL;
    if (v && jag_from_data(v, s, 2, JAG_FLOAT64, &t) == JAG_OK) jag_to_dtype(t, dt, &c);
    jag_release(t);
    free(v);
    return c;
}

/* fn on the transposed and the sliced matrix gives the bits it gives on
 * their contiguous copies; on lengths 1..70 of the flat values, those of
 * the same elements of the whole run. */
static void check_layouts(const char *name, unary_fn fn, jag_tensor *m, jag_dtype dt) {
    jag_tensor *mt = NULL, *mtc = NULL, *m3 = NULL, *sl = NULL, *slc = NULL;
    int64_t s3[3] = {jag_size(m, 0), jag_size(m, 1) / 2, 2};
    CHECK_OK(jag_transpose(m, 0, 1, &mt)); /* (300, 67), strided */
    CHECK_OK(jag_contiguous(mt, &mtc));    /* the same values, contiguous */
    CHECK_OK(jag_view(m, s3, 3, &m3));
    CHECK_OK(jag_select(m3, 2, 1, &sl)); /* (67, 150): every other column */
    CHECK_OK(jag_contiguous(sl, &slc));
    jag_tensor *a = NULL, *b = NULL;
    CHECK_OK(fn(mt, &a));
    CHECK_OK(fn(mtc, &b));
    CHECK_MSG(a && b && same_bits(a, b), "%s (%s): transposed input differs from contiguous", name,
              jag_dtype_name(dt));
    jag_release(a), jag_release(b);
    a = b = NULL;
    CHECK_OK(fn(sl, &a));
    CHECK_OK(fn(slc, &b));
    CHECK_MSG(a && b && same_bits(a, b), "%s (%s): sliced input differs from contiguous", name, jag_dtype_name(dt));
    jag_release(a), jag_release(b);
    jag_tensor *flat = NULL, *whole = NULL;
    int64_t all = jag_numel(m);
    CHECK_OK(jag_reshape(m, &all, 1, &flat));
    CHECK_OK(fn(flat, &whole));
    for (int64_t len = 1; flat && whole && len <= 70; len++) {
        jag_tensor *part = NULL, *pc = NULL, *py = NULL, *wy = NULL;
        int64_t start = 3 * len;
        CHECK_OK(jag_narrow(flat, 0, start, len, &part));
        CHECK_OK(jag_contiguous(part, &pc));
        CHECK_OK(fn(pc, &py));
        CHECK_OK(jag_narrow(whole, 0, start, len, &wy));
        CHECK_MSG(py && wy && same_bits(py, wy), "%s (%s): length %lld differs from the long run", name,
                  jag_dtype_name(dt), (long long)len);
        jag_release(part), jag_release(pc), jag_release(py), jag_release(wy);
    }
    jag_release(flat), jag_release(whole);
    jag_release(mt), jag_release(mtc), jag_release(m3), jag_release(sl), jag_release(slc);
}

static void test_layouts_and_tails(void) {
    TEST_BEGIN();
    const jag_dtype dts[2] = {JAG_FLOAT32, JAG_FLOAT64};
    for (int d = 0; d < 2; d++) {
        jag_tensor *m = spread(67, 300, dts[d]); /* odd shapes: every tail length */
        CHECK(m != NULL);
        if (!m) continue;
        for (int o = 0; o < N_OPS; o++) check_layouts(ops[o].name, ops[o].fn, m, dts[d]);
        jag_release(m);
    }
}

/* The same for the parametrised ops, hardswish and hardsigmoid (their
 * scalar fallback lanes, softplus's beyond -80 and its huge values, among
 * the vector lanes). */
static void test_param_layouts_and_tails(void) {
    TEST_BEGIN();
    const jag_dtype dts[2] = {JAG_FLOAT32, JAG_FLOAT64};
    for (int d = 0; d < 2; d++) {
        jag_tensor *m = spread(67, 300, dts[d]);
        CHECK(m != NULL);
        if (!m) continue;
        for (int o = 0; o < N_PARAM_OPS; o++) check_layouts(param_ops[o].name, param_ops[o].fn, m, dts[d]);
        jag_release(m);
    }
}

/* float32 gelu, erf and erfc on AVX-512 builds with SLEEF: sleef_unary.c's
 * piecewise polynomials (32 intervals each, coefficients from
 * scripts/gen_erf_tables.py) on their tables' ranges, densely: every 997th
 * float of both signs up to |x| = 4.5, the denormals, 0 and the smallest
 * normals among them, and the 9 floats around each interval boundary
 * (k + 1/2) / S, where a lane changes polynomial. The bounds on these
 * ranges, tighter than the ops' (whose far tails run SLEEF's erfc and
 * sl_gelu_f): gelu 2.0 ulp on [-4.125, 3.875) (every float measured: 1.82
 * at x = -3.84), erf 1.0 on |x| < 3.9375 (every float: 0.978 at 2.4998;
 * beyond it is 1), erfc 1.25 on x < 3.9375 (every float: 1.14 at 3.9374).
 * torch 2.15, measured on 2M evenly spaced floats in [-6, 6] against
 * double: torch.erf 0.68 ulp, torch.erfc 0.76 ulp; its float gelu (0.5 x
 * (1 + erf(x / sqrt 2)) on a fast erf accurate to about 1e-7 absolute) has
 * no relative bound: 65,000 ulp for |x| < 4, 1.7e7 at x = -5.7. Other
 * builds run SLEEF's or libm's kernels, whose bounds the sweep above
 * states. */
static void test_table_ranges_float32(void) {
    TEST_BEGIN();
    if (!jag__unary_uses_tables()) {
        printf("test_unary_accuracy: no AVX-512 table kernels in this build\n");
        return;
    }
    static const struct {
        const char *name;
        jag_op_id id;
        unary_fn fn;
        float lo, hi; /* the table's range [lo, hi) */
        float scale;  /* S: interval k is (k -+ 1/2) / S */
        double bound;
    } cases[] = {
        {"gelu", JAG_OP_gelu, jag_gelu, -4.125f, 3.875f, 4.0f, 2.0},
        {"erf", JAG_OP_erf, jag_erf, -3.9375f, 3.9375f, 8.0f, 1.0},
        {"erfc", JAG_OP_erfc, jag_erfc, -INFINITY, 3.9375f, 8.0f, 1.25},
    };
    enum { STRIDE = 997, NEAR = 4 };
    const uint32_t top = 0x40900000u; /* 4.5 */
    int64_t cap = 2 * (int64_t)(top / STRIDE + 1) + 2 * 70 * (2 * NEAR + 1), n = 0;
    float *xs = malloc((size_t)cap * sizeof *xs);
    CHECK(xs != NULL);
    if (!xs) return;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t b = 0; b < top; b += STRIDE) {
            uint32_t v = b | sign << 31;
            memcpy(&xs[n++], &v, sizeof v);
        }
    for (int c = 0; c < 3; c++)
        for (int k = -36; k <= 36; k++) {
            float edge = ((float)k + 0.5f) / cases[c].scale;
            if (!(edge > -4.5f && edge < 4.5f)) continue;
            float v = edge;
            for (int d = 0; d < NEAR; d++) v = nextafterf(v, -INFINITY);
            for (int d = 0; d <= 2 * NEAR && n < cap; d++, v = nextafterf(v, INFINITY)) xs[n++] = v;
        }
    jag_tensor *x = NULL;
    CHECK_OK(jag_from_data(xs, &n, 1, JAG_FLOAT32, &x));
    for (int c = 0; x && c < 3; c++) {
        jag_tensor *y = NULL;
        CHECK_OK(cases[c].fn(x, &y));
        if (!y) continue;
        const float *ys = jag_data(y);
        double worst = 0;
        int64_t at = 0, count = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!(xs[i] >= cases[c].lo && xs[i] < cases[c].hi)) continue;
            count++;
            double err = ulp_err32(ys[i], ref32(cases[c].id, xs[i]));
            if (!(err <= worst)) worst = err, at = i;
        }
        printf("  float32 %-5s on [%g, %g): %lld inputs, max %.3f ulp (bound %.2f)\n", cases[c].name,
               (double)cases[c].lo, (double)cases[c].hi, (long long)count, worst, cases[c].bound);
        CHECK(count > 1000000);
        CHECK_MSG(worst <= cases[c].bound, "float32 %s: %.3f ulp at x = %a (got %a, reference %a), bound %.2f",
                  cases[c].name, worst, xs[at], ys[at], ref32(cases[c].id, xs[at]), cases[c].bound);
        jag_release(y);
    }
    jag_release(x);
    free(xs);
}

/* float32 gelu's tails on AVX2 table builds (sleef_unary.c's
 * av2_gelu_tails). x >= 3.875: x - x Q, Q = erfc(x / sqrt 2) / 2 from
 * erfc's table, and x itself from x / sqrt 2 >= 3.9375 on; every 7th
 * float of [3.875, 16), the 64 floats either side of 5.568 (where x / sqrt
 * 2 leaves the table) and +inf within 0.51 ulp of the double reference
 * (every float of [3.875, 16) measured: 0.501). x < -4.125: -phi(t) R(t)
 * (t = -x, R a polynomial in 1 / t^2, phi from vecmath's exp parts);
 * every 7th float of [-20, -4.125] and -1e30 within 3.5 ulp (every float
 * measured: 3.364 at x = -4.508; denormal results 1.74 ulps of the
 * denormal spacing), -0 from x = -16 down. AVX-512 builds run sl_gelu_f
 * on both tails (its 5.0 ulp bound, the sweep's). */
static void gelu_tail_check(const char *what, float lo, float hi, bool negative, double bound, const float *extra,
                            int n_extra) {
    uint32_t a, b;
    memcpy(&a, &lo, sizeof a), memcpy(&b, &hi, sizeof b);
    int64_t cap = (int64_t)(b - a) / 7 + 1 + n_extra, n = 0;
    float *xs = malloc((size_t)cap * sizeof *xs);
    CHECK(xs != NULL);
    if (!xs) return;
    for (uint32_t u = a; u < b; u += 7) {
        uint32_t v = u | (negative ? 0x80000000u : 0u);
        memcpy(&xs[n++], &v, sizeof v);
    }
    for (int i = 0; i < n_extra; i++) xs[n++] = extra[i];
    jag_tensor *x = NULL, *y = NULL;
    CHECK_OK(jag_from_data(xs, &n, 1, JAG_FLOAT32, &x));
    CHECK_OK(jag_gelu(x, &y));
    const float *ys = y ? jag_data(y) : NULL;
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; ys && i < n; i++) {
        double err = ulp_err32(ys[i], ref32(JAG_OP_gelu, xs[i]));
        if (!(err <= worst)) worst = err, at = i;
    }
    printf("  float32 gelu  %s: %lld inputs, max %.3f ulp (bound %.2f)\n", what, (long long)n, worst, bound);
    CHECK_MSG(ys && worst <= bound, "float32 gelu %s: %.3f ulp at x = %a (got %a, reference %a), bound %.2f", what, worst,
              xs[at], ys ? ys[at] : 0.0f, ref32(JAG_OP_gelu, xs[at]), bound);
    for (int64_t i = 0; ys && negative && i < n; i++) /* the far negative tail is -0, as the reference */
        if (xs[i] <= -16.0f) CHECK_MSG(ys[i] == 0 && signbit(ys[i]), "float32 gelu(%a) is %a, expected -0", xs[i], ys[i]);
    jag_release(x), jag_release(y);
    free(xs);
}

static void test_gelu_tails_float32(void) {
    TEST_BEGIN();
    if (!jag__unary_uses_tables()) {
        printf("test_unary_accuracy: no table kernels in this build\n");
        return;
    }
#if defined(__AVX512F__)
    const double pos_bound = 5.0, neg_bound = 5.0;
#else
    const double pos_bound = 0.51, neg_bound = 3.5;
#endif
    float v = (float)(3.9375 * 1.4142135623730951), around[130];
    for (int i = 0; i < 64; i++) v = nextafterf(v, 0.0f);
    for (int i = 0; i < 129; i++) around[i] = v, v = nextafterf(v, INFINITY);
    around[129] = INFINITY;
    gelu_tail_check("on [3.875, inf]", 3.875f, 16.0f, false, pos_bound, around, 130);
    const float far[2] = {-1e30f, -16.0f};
    gelu_tail_check("on [-20, -4.125]", 4.125f, 20.0f, true, neg_bound, far, 2);
}

TEST_MAIN(test_float32_sweep, test_float64_sweep, test_vecmath_float32, test_param_float32_sweep, test_softplus_edges,
          test_special_values, test_layouts_and_tails, test_param_layouts_and_tails, test_table_ranges_float32,
          test_gelu_tails_float32)
