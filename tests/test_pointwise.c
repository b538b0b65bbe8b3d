/* test_pointwise.c — unary and binary pointwise ops and where: every op
 * against its naive reference (jag__ref_unary / jag__ref_binary) over dtypes
 * and layouts, against hand-computed values, type promotion, broadcasting,
 * wrapping integer arithmetic, NaN/inf behaviour, the parallel path and every
 * error path. */
#include "test.h"

#include "cpu/kernels.h"
#include "cpu/pointwise_math.h"
#include "dispatch/dispatch.h"
#include "dispatch/pointwise_op.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const jag_dtype all_dtypes[] = {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_BOOL};
#define N_DTYPES 5

/* Tolerances for a kernel against the reference, by result dtype. float32
 * kernels compute in float (logf, ..., and vecmath.h's approximations of exp
 * and the activations, within 2.75 ulp) while the reference computes in
 * double and rounds once: a few ulp (1e-6 is ~8 ulp). float64 kernels are
 * libm or vecmath.h (within 2.75 ulp); the stable forms of gelu/sigmoid
 * differ from the textbook ones by the reference's own absolute error
 * (~|x| * 1e-16). Integers and bool are exact. test_float32_ulp_sweep and
 * test_float64_ulp_sample check the approximations in ulps. */
static void tol_for(jag_dtype d, double *rtol, double *atol) {
    switch (d) {
    case JAG_FLOAT32: *rtol = 1e-6, *atol = 1e-7; break;
    case JAG_FLOAT64: *rtol = 1e-12, *atol = 1e-14; break;
    default: *rtol = 0, *atol = 0; break;
    }
}

/* ---- inputs in many layouts ------------------------------------------------ */

enum {
    L_CONTIG, L_NONCONTIG, L_SLICED, L_EXPANDED, L_0D, L_EMPTY1, L_EMPTY2, L_SIZE1,
    L_N_SMALL,
    L_LARGE = L_N_SMALL, L_LARGE_NONCONTIG, L_LARGE_SLICED, L_LARGE_EXPANDED,
    L_COUNT
};
static const char *layout_names[L_COUNT] = {"contiguous", "noncontig", "sliced", "expanded", "0-d", "empty (0,3)",
                                            "empty (2,0,4)", "size-1 dims", "large", "large noncontig",
                                            "large sliced", "large expanded"};

/* Values of x: uniform in [lo, hi) (floored for integers); `int_valued`
 * floors floats too (so that comparisons meet equal values). */
static jag_tensor *rand_vals(const int64_t *sizes, int ndim, jag_dtype dt, double lo, double hi, uint64_t seed,
                             bool int_valued) {
    if (!int_valued || !jag_dtype_is_floating(dt)) return t_rand(sizes, ndim, dt, lo, hi, seed);
    jag_tensor *i = t_rand(sizes, ndim, JAG_INT64, lo, hi, seed), *t = NULL;
    CHECK_OK(jag_to_dtype(i, dt, &t));
    jag_release(i);
    return t;
}

/* Large: 512 x 129 = 66048 elements, at least the largest grain
 * (JAG_GRAIN_MEMORY, 65536: binary add/mul and copies), so jag__iter splits
 * the work across OpenMP threads for every family (the tests run with
 * OMP_NUM_THREADS=2); checked at compile time below. */
#define LARGE_ROWS 512
#define LARGE_COLS 129
_Static_assert((int64_t)LARGE_ROWS * LARGE_COLS >= JAG_GRAIN_MEMORY && JAG_GRAIN_MEMORY >= JAG_GRAIN_COMPUTE &&
                   JAG_GRAIN_MEMORY >= JAG_GRAIN_REDUCE && JAG_GRAIN_MEMORY >= JAG_GRAIN_ROWS,
               "the large cases must cross every grain");

static jag_tensor *make_layout(int layout, jag_dtype dt, double lo, double hi, uint64_t seed, bool int_valued) {
    int64_t s3[] = {3, 4, 5}, s2[] = {4, 1}, e1[] = {0, 3}, e2[] = {2, 0, 4}, s1[] = {1, 5, 1};
    int64_t big[] = {LARGE_ROWS, LARGE_COLS}, row[] = {1, LARGE_COLS};
    jag_tensor *x = NULL, *v = NULL;
    switch (layout) {
    case L_CONTIG: return rand_vals(s3, 3, dt, lo, hi, seed, int_valued);
    case L_NONCONTIG:
    case L_SLICED:
        x = rand_vals(s3, 3, dt, lo, hi, seed, int_valued);
        v = layout == L_NONCONTIG ? t_noncontig(x) : t_sliced(x);
        jag_release(x);
        return v;
    case L_EXPANDED:
        x = rand_vals(s2, 2, dt, lo, hi, seed, int_valued);
        CHECK_OK(jag_expand(x, s3, 3, &v));
        jag_release(x);
        return v;
    case L_0D: return rand_vals(NULL, 0, dt, lo, hi, seed, int_valued);
    case L_EMPTY1: return rand_vals(e1, 2, dt, lo, hi, seed, int_valued);
    case L_EMPTY2: return rand_vals(e2, 3, dt, lo, hi, seed, int_valued);
    case L_SIZE1: return rand_vals(s1, 3, dt, lo, hi, seed, int_valued);
    case L_LARGE: return rand_vals(big, 2, dt, lo, hi, seed, int_valued);
    case L_LARGE_NONCONTIG:
    case L_LARGE_SLICED:
        x = rand_vals(big, 2, dt, lo, hi, seed, int_valued);
        v = layout == L_LARGE_NONCONTIG ? t_noncontig(x) : t_sliced(x);
        jag_release(x);
        return v;
    case L_LARGE_EXPANDED:
        x = rand_vals(row, 2, dt, lo, hi, seed, int_valued);
        CHECK_OK(jag_expand(x, big, 2, &v));
        jag_release(x);
        return v;
    }
    return NULL;
}

/* y is a fresh contiguous tensor of the reference's dtype and shape and
 * within tolerance of it. */
static void check_against_ref(const jag_tensor *y, const jag_tensor *r, const jag_tensor *input, const char *op,
                              const char *what) {
    CHECK_MSG(jag_tensor_dtype(y) == jag_tensor_dtype(r), "%s (%s): dtype %s, reference %s", op, what,
              jag_dtype_name(jag_tensor_dtype(y)), jag_dtype_name(jag_tensor_dtype(r)));
    CHECK_MSG(t_same_shape(y, r), "%s (%s): shape differs from the reference", op, what);
    CHECK_MSG(jag_is_contiguous(y), "%s (%s): result not contiguous", op, what);
    CHECK_MSG(!jag_shares_storage(y, input), "%s (%s): result shares the input's storage", op, what);
    double rtol, atol;
    tol_for(jag_tensor_dtype(r), &rtol, &atol);
    CHECK_MSG(t_allclose(y, r, rtol, atol), "%s (%s): differs from the reference", op, what);
}

/* ---- unary ops ---------------------------------------------------------------- */

typedef jag_status (*unary_fn)(const jag_tensor *, jag_tensor **);
typedef struct {
    const char *name;
    jag_op_id id;
    unary_fn fn;
} unary_op;

static const unary_op unary_ops[] = {
#define X(name) {#name, JAG_OP_##name, jag_##name},
    JAG_UNARY_OP_LIST(X)
#undef X
};
#define N_UNARY ((int)(sizeof unary_ops / sizeof unary_ops[0]))

/* Input range per op: wide enough to reach each op's interesting regions
 * (negative inputs of log/sqrt give NaN on both sides). */
static void unary_range(jag_op_id id, double *lo, double *hi) {
    *lo = -6, *hi = 6;
    if (id == JAG_OP_exp) *lo = -20, *hi = 20;
    if (id == JAG_OP_log || id == JAG_OP_sqrt || id == JAG_OP_rsqrt) *lo = -1, *hi = 50;
    if (id == JAG_OP_gelu || id == JAG_OP_gelu_tanh || id == JAG_OP_sigmoid || id == JAG_OP_silu) *lo = -12, *hi = 12;
    if (id == JAG_OP_log1p) *lo = -1.5, *hi = 50;
    if (id == JAG_OP_expm1) *lo = -20, *hi = 20;
    if (id == JAG_OP_selu || id == JAG_OP_mish || id == JAG_OP_logsigmoid) *lo = -15, *hi = 15;
}

static bool is_rounding(jag_op_id id) {
    return id == JAG_OP_floor || id == JAG_OP_ceil || id == JAG_OP_round || id == JAG_OP_trunc;
}

static bool unary_rejects(jag_op_id id, jag_dtype dt) {
    return dt == JAG_BOOL && (id == JAG_OP_neg || id == JAG_OP_relu || is_rounding(id));
}

static void test_unary_vs_reference(void) {
    TEST_BEGIN();
    for (int o = 0; o < N_UNARY; o++) {
        const unary_op *u = &unary_ops[o];
        double lo, hi;
        unary_range(u->id, &lo, &hi);
        for (int di = 0; di < N_DTYPES; di++) {
            jag_dtype dt = all_dtypes[di];
            if (unary_rejects(u->id, dt)) continue;
            for (int l = 0; l < L_COUNT; l++) {
                /* The parallel path once per op and dtype family is enough. */
                if (l >= L_LARGE && dt != JAG_FLOAT32 && dt != JAG_INT32) continue;
                jag_tensor *x = make_layout(l, dt, lo, hi, 100 + (uint64_t)(o * 31 + di * 7 + l), false);
                jag_tensor *y = NULL, *r = NULL;
                jag_value arg = jag__v_tensor(x);
                char what[96];
                snprintf(what, sizeof what, "%s, %s", jag_dtype_name(dt), layout_names[l]);
                CHECK_OK(u->fn(x, &y));
                CHECK_OK(jag__ref_unary(u->id, &arg, 1, &r));
                if (y && r) check_against_ref(y, r, x, u->name, what);
                jag_release(y);
                jag_release(r);
                jag_release(x);
            }
        }
    }
}

/* Literal inputs and hand-computed outputs (exact values to 17 digits,
 * computed with Python's decimal module at 120 digits where libm-level
 * accuracy matters; float32 expectations are the same reals, compared at
 * float32 precision).
 * NaN must give NaN, infinities must match exactly, and zeros must match in
 * sign. */
static void check_values(const char *what, const jag_tensor *y, jag_dtype want_dtype, const double *want, int n,
                         double rtol) {
    CHECK_MSG(jag_tensor_dtype(y) == want_dtype, "%s: dtype %s, expected %s", what, jag_dtype_name(jag_tensor_dtype(y)),
              jag_dtype_name(want_dtype));
    CHECK_MSG(jag_numel(y) == n, "%s: %lld elements, expected %d", what, (long long)jag_numel(y), n);
    for (int i = 0; i < n && i < jag_numel(y); i++) {
        double g = t_get(y, i), w = want[i];
        bool ok;
        if (isnan(w)) ok = isnan(g);
        else if (isinf(w) || w == 0) ok = g == w && signbit(g) == signbit(w);
        else ok = fabs(g - w) <= rtol * fabs(w);
        CHECK_MSG(ok, "%s: element %d is %.17g, expected %.17g", what, i, g, w);
    }
}

static void check_unary_values(const char *name, unary_fn fn, jag_dtype dt, const double *x, const double *want,
                               int n, jag_dtype want_dtype) {
    int64_t len = n;
    jag_tensor *t = t_from(x, &len, 1, dt), *y = NULL;
    char what[64];
    snprintf(what, sizeof what, "%s(%s)", name, jag_dtype_name(dt));
    CHECK_OK(fn(t, &y));
    if (y) check_values(what, y, want_dtype, want, n, want_dtype == JAG_FLOAT32 ? 1e-6 : 1e-14);
    jag_release(y);
    jag_release(t);
}

/* The same literal check in float32 and float64. */
#define CHECK_FLOAT_VALUES(fn, x, want)                                        \
    do {                                                                       \
        int n_ = (int)(sizeof(x) / sizeof(x)[0]);                              \
        check_unary_values(#fn, fn, JAG_FLOAT32, x, want, n_, JAG_FLOAT32);    \
        check_unary_values(#fn, fn, JAG_FLOAT64, x, want, n_, JAG_FLOAT64);    \
    } while (0)

static void test_unary_hand_values(void) {
    TEST_BEGIN();
    const double inf = INFINITY, nan = NAN;
    {
        double x[] = {0, 2.5, -inf, nan, -3}, w[] = {-0.0, -2.5, inf, nan, 3};
        CHECK_FLOAT_VALUES(jag_neg, x, w);
    }
    {
        double x[] = {-3.5, -0.0, -inf, nan, 2}, w[] = {3.5, 0, inf, nan, 2};
        CHECK_FLOAT_VALUES(jag_abs, x, w);
    }
    {
        double x[] = {0, 1, -inf, inf, nan, -1}, w[] = {1, 2.718281828459045, 0, inf, nan, 0.36787944117144233};
        CHECK_FLOAT_VALUES(jag_exp, x, w);
        /* exp(100) overflows float32 but not float64. */
        double x2[] = {100}, w32[] = {inf}, w64[] = {2.6881171418161356e+43};
        check_unary_values("jag_exp", jag_exp, JAG_FLOAT32, x2, w32, 1, JAG_FLOAT32);
        check_unary_values("jag_exp", jag_exp, JAG_FLOAT64, x2, w64, 1, JAG_FLOAT64);
    }
    {
        double x[] = {1, 0, -1, 10, inf, nan}, w[] = {0, -inf, nan, 2.302585092994046, inf, nan};
        CHECK_FLOAT_VALUES(jag_log, x, w);
    }
    {
        double x[] = {4, 0, -0.0, -1, inf, 2}, w[] = {2, 0, -0.0, nan, inf, 1.4142135623730951};
        CHECK_FLOAT_VALUES(jag_sqrt, x, w);
    }
    {
        double x[] = {4, 0, -1, inf, 0.25}, w[] = {0.5, inf, nan, 0, 2};
        CHECK_FLOAT_VALUES(jag_rsqrt, x, w);
    }
    {
        double x[] = {0, 1, 0.5, inf, nan}, w[] = {0, 0.8414709848078965, 0.479425538604203, nan, nan};
        CHECK_FLOAT_VALUES(jag_sin, x, w);
    }
    {
        double x[] = {0, 1, -inf, nan}, w[] = {1, 0.5403023058681398, nan, nan};
        CHECK_FLOAT_VALUES(jag_cos, x, w);
    }
    {
        double x[] = {0, 1, -1, 20, -inf, inf, 1000, nan}, w[] = {0, 0.7615941559557649, -0.7615941559557649, 1, -1, 1, 1, nan};
        CHECK_FLOAT_VALUES(jag_tanh, x, w);
    }
    {
        /* Stable for large |x|: no NaN, no overflow, and full relative
         * accuracy far into the negative tail. */
        double x[] = {0, 1, -1, 30, -30, 1000, -1000, inf, -inf, nan};
        double w[] = {0.5, 0.7310585786300049, 0.2689414213699951, 0.99999999999990641, 9.3576229688392989e-14,
                      1, 0, 1, 0, nan};
        CHECK_FLOAT_VALUES(jag_sigmoid, x, w);
        double x2[] = {-100, -700}, w2[] = {3.7200759760208361e-44, 9.8596765437597708e-305};
        check_unary_values("jag_sigmoid", jag_sigmoid, JAG_FLOAT64, x2, w2, 2, JAG_FLOAT64);
    }
    {
        double x[] = {-1, 2, 0, -0.0, nan, -inf, inf}, w[] = {0, 2, 0, -0.0, nan, 0, inf};
        CHECK_FLOAT_VALUES(jag_relu, x, w);
    }
    {
        double x[] = {0, 1, -1, 10, -1000, 1000, nan}, w[] = {0, 0.7310585786300049, -0.2689414213699951,
                                                               9.999546021312975, -0.0, 1000, nan};
        CHECK_FLOAT_VALUES(jag_silu, x, w);
    }
    {
        double x[] = {0, 1, -1, 3, -3, 10, -1000, 1000, nan};
        double w[] = {0, 0.84134474606854293, -0.15865525393145705, 2.9959503059051098, -0.0040496940948902835, 10,
                      -0.0, 1000, nan};
        CHECK_FLOAT_VALUES(jag_gelu, x, w);
        /* The erfc form keeps relative accuracy where 1 + erf cancels. */
        double x2[] = {-6, -10}, w2[] = {-5.9195258702261885e-09, -7.6198530241605263e-23};
        CHECK_FLOAT_VALUES(jag_gelu, x2, w2);
    }
    {
        double x[] = {0, 1, -1, 3, -3, 10, -1000, 1000, nan};
        double w[] = {0, 0.84119199060827665, -0.15880800939172329, 2.9963626079182268, -0.0036373920817730191, 10,
                      -0.0, 1000, nan};
        CHECK_FLOAT_VALUES(jag_gelu_tanh, x, w);
        double x2[] = {-6, -10}, w2[] = {-8.439646700762297e-11, -1.2040923482098061e-37};
        CHECK_FLOAT_VALUES(jag_gelu_tanh, x2, w2);
    }
    {
        double x[] = {2, 0, -0.0, inf, -inf, -4, nan}, w[] = {0.5, inf, -inf, 0, -0.0, -0.25, nan};
        CHECK_FLOAT_VALUES(jag_reciprocal, x, w);
    }
    {
        double x[] = {-3, 1.5, -0.0, -inf, nan}, w[] = {9, 2.25, 0, inf, nan};
        CHECK_FLOAT_VALUES(jag_square, x, w);
    }
    {
        double x[] = {-2, 3, 0, -0.0, -inf, inf, nan}, w[] = {-1, 1, 0, -0.0, -1, 1, nan};
        CHECK_FLOAT_VALUES(jag_sign, x, w);
    }
    /* Integer and bool inputs. */
    {
        double x[] = {-5, 0, 7}, neg[] = {5, 0, -7}, abs_[] = {5, 0, 7}, relu[] = {0, 0, 7}, sq[] = {25, 0, 49},
               sign[] = {-1, 0, 1};
        for (int k = 0; k < 2; k++) {
            jag_dtype dt = k ? JAG_INT64 : JAG_INT32;
            check_unary_values("jag_neg", jag_neg, dt, x, neg, 3, dt);
            check_unary_values("jag_abs", jag_abs, dt, x, abs_, 3, dt);
            check_unary_values("jag_relu", jag_relu, dt, x, relu, 3, dt);
            check_unary_values("jag_square", jag_square, dt, x, sq, 3, dt);
            check_unary_values("jag_sign", jag_sign, dt, x, sign, 3, dt);
        }
        double ix[] = {4, 0, -1}, rec[] = {0.25, inf, -1}, sq2[] = {2, 0, nan};
        check_unary_values("jag_reciprocal", jag_reciprocal, JAG_INT32, ix, rec, 3, JAG_FLOAT32);
        check_unary_values("jag_sqrt", jag_sqrt, JAG_INT64, ix, sq2, 3, JAG_FLOAT32);
        double bx[] = {1, 0}, bexp[] = {2.718281828459045, 1};
        check_unary_values("jag_exp", jag_exp, JAG_BOOL, bx, bexp, 2, JAG_FLOAT32);
        check_unary_values("jag_abs", jag_abs, JAG_BOOL, bx, bx, 2, JAG_BOOL);
        check_unary_values("jag_sign", jag_sign, JAG_BOOL, bx, bx, 2, JAG_BOOL);
        check_unary_values("jag_square", jag_square, JAG_BOOL, bx, bx, 2, JAG_INT64);
    }
}

/* Integer neg/abs/square wrap on overflow as torch does (UBSan would flag
 * signed overflow if the kernels computed in signed types). */
static void test_unary_integer_wrap(void) {
    TEST_BEGIN();
    int64_t n = 3;
    int32_t x32[] = {INT32_MIN, 46341, INT32_MAX};
    jag_tensor *t = NULL, *y = NULL;
    CHECK_OK(jag_from_data(x32, &n, 1, JAG_INT32, &t));
    CHECK_OK(jag_neg(t, &y));
    if (y) {
        const int32_t *p = jag_data(y);
        CHECK(p[0] == INT32_MIN && p[1] == -46341 && p[2] == -INT32_MAX);
    }
    jag_release(y), y = NULL;
    CHECK_OK(jag_abs(t, &y));
    if (y) {
        const int32_t *p = jag_data(y);
        CHECK(p[0] == INT32_MIN && p[1] == 46341 && p[2] == INT32_MAX);
    }
    jag_release(y), y = NULL;
    CHECK_OK(jag_square(t, &y));
    if (y) {
        const int32_t *p = jag_data(y);
        /* 46341^2 = 2147488281 wraps to -2147479015; INT32_MAX^2 wraps to 1. */
        CHECK(p[0] == 0 && p[1] == -2147479015 && p[2] == 1);
    }
    jag_release(y), y = NULL;
    jag_release(t), t = NULL;

    int64_t x64[] = {INT64_MIN, 3037000500LL, INT64_MAX};
    CHECK_OK(jag_from_data(x64, &n, 1, JAG_INT64, &t));
    CHECK_OK(jag_neg(t, &y));
    if (y) {
        const int64_t *p = jag_data(y);
        CHECK(p[0] == INT64_MIN && p[1] == -3037000500LL && p[2] == -INT64_MAX);
    }
    jag_release(y), y = NULL;
    CHECK_OK(jag_abs(t, &y));
    if (y) {
        const int64_t *p = jag_data(y);
        CHECK(p[0] == INT64_MIN && p[1] == 3037000500LL && p[2] == INT64_MAX);
    }
    jag_release(y), y = NULL;
    CHECK_OK(jag_square(t, &y));
    if (y) {
        const int64_t *p = jag_data(y);
        CHECK(p[0] == 0 && p[1] == -9223372036709301616LL && p[2] == 1);
    }
    jag_release(y);
    jag_release(t);
}

static void test_unary_dtypes(void) {
    TEST_BEGIN();
    /* [op][input dtype] -> result dtype; -1: JAG_EDTYPE. */
    struct { unary_fn fn; const char *name; int want[N_DTYPES]; } cases[] = {
        {jag_exp, "exp", {JAG_FLOAT32, JAG_FLOAT64, JAG_FLOAT32, JAG_FLOAT32, JAG_FLOAT32}},
        {jag_gelu, "gelu", {JAG_FLOAT32, JAG_FLOAT64, JAG_FLOAT32, JAG_FLOAT32, JAG_FLOAT32}},
        {jag_reciprocal, "reciprocal", {JAG_FLOAT32, JAG_FLOAT64, JAG_FLOAT32, JAG_FLOAT32, JAG_FLOAT32}},
        {jag_neg, "neg", {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, -1}},
        {jag_relu, "relu", {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, -1}},
        {jag_abs, "abs", {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_BOOL}},
        {jag_sign, "sign", {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_BOOL}},
        {jag_square, "square", {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_INT64}},
    };
    int64_t sizes[] = {2};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int di = 0; di < N_DTYPES; di++) {
            jag_tensor *x = NULL, *y = NULL;
            CHECK_OK(jag_zeros(sizes, 1, all_dtypes[di], &x));
            if (cases[c].want[di] < 0) {
                CHECK_ERR(cases[c].fn(x, &y), JAG_EDTYPE, "argument 'x' is bool");
                CHECK(y == NULL);
            } else {
                CHECK_OK(cases[c].fn(x, &y));
                CHECK_MSG(y && jag_tensor_dtype(y) == (jag_dtype)cases[c].want[di], "%s(%s) -> %s", cases[c].name,
                          jag_dtype_name(all_dtypes[di]), y ? jag_dtype_name(jag_tensor_dtype(y)) : "error");
            }
            jag_release(y);
            jag_release(x);
        }
    }
}

/* ---- the parametrised unary ops --------------------------------------------------- */

/* leaky_relu, elu, softplus and hardtanh with a few argument sets each,
 * every dtype and layout, against the naive reference (the textbook
 * formula in double, the scalars rounded through the result dtype). */
static void test_param_unary_vs_reference(void) {
    TEST_BEGIN();
    struct { const char *name; jag_op_id id; int np; double p[3][2]; } ops[] = {
        {"leaky_relu", JAG_OP_leaky_relu, 1, {{0.01, 0}, {0.2, 0}, {-1.5, 0}}},
        {"elu", JAG_OP_elu, 1, {{1.0, 0}, {0.3, 0}, {2.5, 0}}},
        {"softplus", JAG_OP_softplus, 2, {{1.0, 20.0}, {2.0, 3.0}, {-0.5, 1.0}}},
        {"hardtanh", JAG_OP_hardtanh, 2, {{-1.0, 1.0}, {-0.25, 2.0}, {0.5, 0.5}}},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (int k = 0; k < 3; k++) {
            for (int di = 0; di < N_DTYPES; di++) {
                jag_dtype dt = all_dtypes[di];
                for (int l = 0; l < L_COUNT; l++) {
                    if (l >= L_LARGE && dt != JAG_FLOAT32) continue;
                    jag_tensor *x = make_layout(l, dt, -8, 8, 500 + (uint64_t)(o * 97 + k * 13 + di * 7 + l), false);
                    jag_tensor *y = NULL, *r = NULL;
                    jag_value args[3] = {jag__v_tensor(x), jag__v_double(ops[o].p[k][0]), jag__v_double(ops[o].p[k][1])};
                    char what[96];
                    snprintf(what, sizeof what, "%s, %s, params %g %g", jag_dtype_name(dt), layout_names[l],
                             ops[o].p[k][0], ops[o].p[k][1]);
                    switch (ops[o].id) {
                    case JAG_OP_leaky_relu: CHECK_OK(jag_leaky_relu(x, ops[o].p[k][0], &y)); break;
                    case JAG_OP_elu: CHECK_OK(jag_elu(x, ops[o].p[k][0], &y)); break;
                    case JAG_OP_softplus: CHECK_OK(jag_softplus(x, ops[o].p[k][0], ops[o].p[k][1], &y)); break;
                    default: CHECK_OK(jag_hardtanh(x, ops[o].p[k][0], ops[o].p[k][1], &y)); break;
                    }
                    CHECK_OK(jag__ref_unary_param(ops[o].id, args, 1 + ops[o].np, &r));
                    if (y && r) {
                        CHECK_MSG(jag_tensor_dtype(y) == (jag_dtype_is_floating(dt) ? dt : JAG_FLOAT32),
                                  "%s (%s): dtype %s", ops[o].name, what, jag_dtype_name(jag_tensor_dtype(y)));
                        check_against_ref(y, r, x, ops[o].name, what);
                    }
                    jag_release(y);
                    jag_release(r);
                    jag_release(x);
                }
            }
        }
    }
}

static jag_status leaky_default(const jag_tensor *x, jag_tensor **o) { return jag_leaky_relu(x, 0.01, o); }
static jag_status leaky_neg(const jag_tensor *x, jag_tensor **o) { return jag_leaky_relu(x, -2.0, o); }
static jag_status elu_default(const jag_tensor *x, jag_tensor **o) { return jag_elu(x, 1.0, o); }
static jag_status elu_half(const jag_tensor *x, jag_tensor **o) { return jag_elu(x, 0.5, o); }
static jag_status softplus_default(const jag_tensor *x, jag_tensor **o) { return jag_softplus(x, 1.0, 20.0, o); }
static jag_status softplus_b2t1(const jag_tensor *x, jag_tensor **o) { return jag_softplus(x, 2.0, 1.0, o); }
static jag_status hardtanh_default(const jag_tensor *x, jag_tensor **o) { return jag_hardtanh(x, -1.0, 1.0, o); }
static jag_status hardtanh_0_6(const jag_tensor *x, jag_tensor **o) { return jag_hardtanh(x, 0.0, 6.0, o); }

/* Hand values of the ops added to the pointwise set: closed forms (ln 2,
 * e - 1, ...) and, for erf/erfc/log1p/expm1 elsewhere, values from Python's
 * math module (correctly rounded libm-level double). torch's results at the
 * special values (inf, NaN, signed zeros) are the formulas' IEEE values. */
static void test_more_unary_hand_values(void) {
    TEST_BEGIN();
    const double inf = INFINITY, nan = NAN;
    { /* floor, ceil, trunc, round (halves to even, as torch.round) */
        double x[] = {2.5, -2.5, 0.5, -0.5, 1.5, 2.7, -2.7, -0.0, inf, -inf, nan, 0x1p100};
        double fl[] = {2, -3, 0, -1, 1, 2, -3, -0.0, inf, -inf, nan, 0x1p100};
        double ce[] = {3, -2, 1, -0.0, 2, 3, -2, -0.0, inf, -inf, nan, 0x1p100};
        double tr[] = {2, -2, 0, -0.0, 1, 2, -2, -0.0, inf, -inf, nan, 0x1p100};
        double ro[] = {2, -2, 0, -0.0, 2, 3, -3, -0.0, inf, -inf, nan, 0x1p100};
        CHECK_FLOAT_VALUES(jag_floor, x, fl);
        CHECK_FLOAT_VALUES(jag_ceil, x, ce);
        CHECK_FLOAT_VALUES(jag_trunc, x, tr);
        CHECK_FLOAT_VALUES(jag_round, x, ro);
        /* 2^52 + 1 is odd and whole: round keeps it (x + 0.5 would tie up). */
        double big[] = {4503599627370497.0}, bigw[] = {4503599627370497.0};
        check_unary_values("jag_round", jag_round, JAG_FLOAT64, big, bigw, 1, JAG_FLOAT64);
        double ix[] = {-7, 0, 5};
        for (int k = 0; k < 2; k++) {
            jag_dtype dt = k ? JAG_INT64 : JAG_INT32;
            check_unary_values("jag_floor", jag_floor, dt, ix, ix, 3, dt);
            check_unary_values("jag_ceil", jag_ceil, dt, ix, ix, 3, dt);
            check_unary_values("jag_round", jag_round, dt, ix, ix, 3, dt);
            check_unary_values("jag_trunc", jag_trunc, dt, ix, ix, 3, dt);
        }
    }
    {
        double x[] = {0, -0.0, 1, -0.5, -1, -2, inf, nan, 1e-10, 1e10};
        double w[] = {0, -0.0, 0.69314718055994531, -0.69314718055994531, -inf, nan, inf, nan, 9.999999999500001e-11,
                      23.025850930040455};
        CHECK_FLOAT_VALUES(jag_log1p, x, w);
    }
    {
        double x[] = {0, -0.0, 1, -1, inf, -inf, nan, 1e-10, -50};
        double w[] = {0, -0.0, 1.7182818284590452, -0.63212055882855767, inf, -1, nan, 1.00000000005e-10, -1};
        CHECK_FLOAT_VALUES(jag_expm1, x, w);
        double x2[] = {50, 100}, w32[] = {5.184705528587072e+21, inf}, w64[] = {5.184705528587072e+21, 2.6881171418161356e+43};
        check_unary_values("jag_expm1", jag_expm1, JAG_FLOAT32, x2, w32, 2, JAG_FLOAT32);
        check_unary_values("jag_expm1", jag_expm1, JAG_FLOAT64, x2, w64, 2, JAG_FLOAT64);
    }
    {
        double x[] = {0, -0.0, 0.5, -1, 3, inf, -inf, nan, 1e-10};
        double w[] = {0, -0.0, 0.5204998778130465, -0.8427007929497149, 0.9999779095030014, 1, -1, nan,
                      1.1283791670955126e-10};
        CHECK_FLOAT_VALUES(jag_erf, x, w);
    }
    {
        double x[] = {0, -0.0, 0.5, -1, 3, inf, -inf, nan, 12};
        double w[] = {1, 1, 0.4795001221869535, 1.842700792949715, 2.2090496998585438e-05, 0, 2, nan,
                      1.3562611692059042e-64};
        /* erfc(12) is below float32's range: 0 there */
        double w32[] = {1, 1, 0.4795001221869535, 1.842700792949715, 2.2090496998585438e-05, 0, 2, nan, 0};
        check_unary_values("jag_erfc", jag_erfc, JAG_FLOAT64, x, w, 9, JAG_FLOAT64);
        check_unary_values("jag_erfc", jag_erfc, JAG_FLOAT32, x, w32, 9, JAG_FLOAT32);
    }
    { /* selu = scale (x > 0 ? x : alpha (e^x - 1)) */
        double x[] = {0, -0.0, 1, -1, -50, inf, -inf, nan};
        double w[] = {0, -0.0, 1.0507009873554805, -1.1113307378125625, -1.7580993408473766, inf, -1.7580993408473766, nan};
        CHECK_FLOAT_VALUES(jag_selu, x, w);
    }
    { /* hardswish = x relu6(x + 3) / 6: -inf * 0 is NaN, as torch */
        double x[] = {0, -0.0, 1, -1, -3, 3, -4, 4, inf, -inf, nan};
        double w[] = {0, -0.0, 0.66666666666666667, -0.33333333333333333, -0.0, 3, -0.0, 4, inf, nan, nan};
        CHECK_FLOAT_VALUES(jag_hardswish, x, w);
    }
    { /* hardsigmoid = relu6(x + 3) / 6 */
        double x[] = {0, -0.0, 1, -1, -3, 3, -4, 4, inf, -inf, nan};
        double w[] = {0.5, 0.5, 0.66666666666666667, 0.33333333333333333, 0, 1, 0, 1, 1, 0, nan};
        CHECK_FLOAT_VALUES(jag_hardsigmoid, x, w);
    }
    { /* mish = x tanh(log(1 + e^x)); mish(-inf) = -inf * 0 = NaN, as torch */
        double x[] = {0, -0.0, 1, -1, -10, 5, 1000, -1000, inf, -inf, nan};
        double w[] = {0, -0.0, 0.8650983882673103, -0.30340146137410895, -0.00045398899185674697, 4.999552077529406, 1000,
                      -0.0, inf, nan, nan};
        CHECK_FLOAT_VALUES(jag_mish, x, w);
    }
    { /* logsigmoid = -log(1 + e^-x), no overflow either way */
        double x[] = {0, 1, -1, -100, 40, -1000, inf, -inf, nan};
        double w[] = {-0.69314718055994531, -0.31326168751822286, -1.3132616875182228, -100, -4.248354255291589e-18,
                      -1000, 0, -inf, nan};
        CHECK_FLOAT_VALUES(jag_logsigmoid, x, w);
    }
    {
        double x[] = {2, -2, 0, -0.0, inf, -inf, nan}, w[] = {2, -0.02, 0, -0.0, inf, -inf, nan};
        check_unary_values("leaky_relu(0.01)", leaky_default, JAG_FLOAT64, x, w, 7, JAG_FLOAT64);
        double w2[] = {2, 4, -0.0, 0.0, inf, inf, nan}; /* 0 * -2 = -0, as torch's x * slope */
        check_unary_values("leaky_relu(-2)", leaky_neg, JAG_FLOAT64, x, w2, 7, JAG_FLOAT64);
        check_unary_values("leaky_relu(-2)", leaky_neg, JAG_FLOAT32, x, w2, 7, JAG_FLOAT32);
    }
    {
        double x[] = {2, -1, 0, -0.0, inf, -inf, nan}, w[] = {2, -0.63212055882855767, 0, -0.0, inf, -1, nan};
        check_unary_values("elu(1)", elu_default, JAG_FLOAT64, x, w, 7, JAG_FLOAT64);
        check_unary_values("elu(1)", elu_default, JAG_FLOAT32, x, w, 7, JAG_FLOAT32);
        double w2[] = {2, -0.31606027941427883, 0, -0.0, inf, -0.5, nan};
        check_unary_values("elu(0.5)", elu_half, JAG_FLOAT64, x, w2, 7, JAG_FLOAT64);
    }
    { /* softplus: log(1 + e^(beta x)) / beta, x itself once beta x > threshold */
        double x[] = {0, 1, -1, 21, 19, -50, 1000, -1000, inf, -inf, nan};
        double w[] = {0.69314718055994531, 1.3132616875182228, 0.31326168751822286, 21, 19.000000005602796,
                      1.9287498479639178e-22, 1000, 0, inf, 0, nan};
        check_unary_values("softplus(1, 20)", softplus_default, JAG_FLOAT64, x, w, 11, JAG_FLOAT64);
        double x2[] = {1, -1, 0, 0.6}, w2[] = {1, 0.06346400552148625, 0.34657359027997264, 0.6};
        check_unary_values("softplus(2, 1)", softplus_b2t1, JAG_FLOAT64, x2, w2, 4, JAG_FLOAT64);
        check_unary_values("softplus(2, 1)", softplus_b2t1, JAG_FLOAT32, x2, w2, 4, JAG_FLOAT32);
    }
    {
        double x[] = {2, -2, 0.5, -0.0, inf, -inf, nan}, w[] = {1, -1, 0.5, -0.0, 1, -1, nan};
        check_unary_values("hardtanh(-1, 1)", hardtanh_default, JAG_FLOAT64, x, w, 7, JAG_FLOAT64);
        double w2[] = {2, 0, 0.5, -0.0, 6, 0, nan};
        check_unary_values("hardtanh(0, 6)", hardtanh_0_6, JAG_FLOAT32, x, w2, 7, JAG_FLOAT32);
        double ix[] = {-3, 1, 9}, iw[] = {0, 1, 6};
        check_unary_values("hardtanh(0, 6)", hardtanh_0_6, JAG_INT64, ix, iw, 3, JAG_FLOAT32);
    }
    /* Integer and bool inputs of the float ops promote to float32. */
    {
        double ix[] = {0, 1, -1}, w[] = {0, 1.7182818284590452, -0.63212055882855767};
        check_unary_values("jag_expm1", jag_expm1, JAG_INT32, ix, w, 3, JAG_FLOAT32);
        double bx[] = {1, 0}, bw[] = {0.69314718055994531, 0};
        check_unary_values("jag_log1p", jag_log1p, JAG_BOOL, bx, bw, 2, JAG_FLOAT32);
    }
    /* Argument errors name the op and the argument; nothing is made. */
    {
        int64_t n = 2;
        jag_tensor *x = NULL, *y = NULL;
        CHECK_OK(jag_zeros(&n, 1, JAG_FLOAT32, &x));
        CHECK_ERR(jag_hardtanh(x, 1.0, -1.0, &y), JAG_EINVAL, "jag_hardtanh: argument 'min_val'");
        CHECK(y == NULL);
        CHECK_ERR(jag_softplus(x, 0.0, 20.0, &y), JAG_EINVAL, "jag_softplus: argument 'beta'");
        CHECK(y == NULL);
        CHECK_ERR(jag_elu(x, 1.0, NULL), JAG_EINVAL, "jag_elu: argument 'out'");
        jag_release(x);
        int64_t bn = 1;
        uint8_t b = 1;
        CHECK_OK(jag_from_data(&b, &bn, 1, JAG_BOOL, &x));
        CHECK_ERR(jag_floor(x, &y), JAG_EDTYPE, "jag_floor: argument 'x' is bool");
        CHECK(y == NULL);
        jag_release(x);
    }
}

/* ---- binary ops ----------------------------------------------------------------- */

typedef jag_status (*binary_fn)(const jag_tensor *, const jag_tensor *, jag_tensor **);
typedef jag_status (*scalar_fn)(const jag_tensor *, double, jag_tensor **);
typedef struct {
    const char *name;
    jag_op_id id;
    binary_fn fn;
    scalar_fn sfn;
} binary_op;

static jag_status add1(const jag_tensor *a, const jag_tensor *b, jag_tensor **out) { return jag_add(a, b, 1.0, out); }

static const binary_op binary_ops[] = {
    {"add", JAG_OP_add, add1, jag_add_scalar},
#define X(name) {#name, JAG_OP_##name, jag_##name, jag_##name##_scalar},
    JAG_BINARY_OP_LIST(X)
#undef X
};
#define N_BINARY ((int)(sizeof binary_ops / sizeof binary_ops[0]))

static bool is_compare(jag_op_id id) { return id >= JAG_OP_eq && id <= JAG_OP_ge; }

/* Result dtype of a binary op on two tensors, from the promotion lattice
 * written out independently of jag_promote_types; -1: JAG_EDTYPE. */
static int expected_binary_dtype(jag_op_id id, jag_dtype a, jag_dtype b) {
    static const int rank[] = {[JAG_BOOL] = 0, [JAG_INT32] = 1, [JAG_INT64] = 2, [JAG_FLOAT32] = 3, [JAG_FLOAT64] = 4};
    static const jag_dtype by_rank[] = {JAG_BOOL, JAG_INT32, JAG_INT64, JAG_FLOAT32, JAG_FLOAT64};
    jag_dtype p = by_rank[rank[a] > rank[b] ? rank[a] : rank[b]];
    if (is_compare(id)) return JAG_BOOL;
    if (id == JAG_OP_div) return jag_dtype_is_floating(p) ? (int)p : JAG_FLOAT32;
    if (id == JAG_OP_sub && (a == JAG_BOOL || b == JAG_BOOL)) return -1;
    if (id == JAG_OP_pow && p == JAG_BOOL) return -1;
    return p;
}

/* Operand values: pow keeps bases and exponents small (integer results fit
 * and negative integer exponents occur); comparisons and maximum/minimum use
 * whole numbers so equal values meet. */
static jag_tensor *binary_input(jag_op_id id, int layout, jag_dtype dt, int side, uint64_t seed) {
    bool int_valued = is_compare(id) || id == JAG_OP_maximum || id == JAG_OP_minimum;
    double lo = -5, hi = 5;
    if (id == JAG_OP_pow) lo = side ? -2 : -3, hi = side ? 5 : 3;
    if (int_valued) lo = -3, hi = 3;
    return make_layout(layout, dt, lo, hi, seed, int_valued);
}

static void check_binary_pair(const binary_op *b, jag_tensor *x, jag_tensor *z, const char *what) {
    jag_tensor *y = NULL, *r = NULL;
    int want = expected_binary_dtype(b->id, jag_tensor_dtype(x), jag_tensor_dtype(z));
    if (want < 0) {
        CHECK_ERR(b->fn(x, z, &y), JAG_EDTYPE, "bool");
        CHECK(y == NULL);
        return;
    }
    CHECK_OK(b->fn(x, z, &y));
    jag_value args[3] = {jag__v_tensor(x), jag__v_tensor(z), jag__v_double(1.0)};
    CHECK_OK(jag__ref_binary(b->id, args, b->id == JAG_OP_add ? 3 : 2, &r));
    if (y && r) {
        CHECK_MSG(jag_tensor_dtype(y) == (jag_dtype)want, "%s (%s): dtype %s, expected %s", b->name, what,
                  jag_dtype_name(jag_tensor_dtype(y)), jag_dtype_name((jag_dtype)want));
        check_against_ref(y, r, x, b->name, what);
    }
    jag_release(y);
    jag_release(r);
}

/* Every op over every dtype pair, broadcasting (3,1,4) with (2,1) -> (3,2,4)
 * and same-shape layouts. */
static void test_binary_dtype_pairs(void) {
    TEST_BEGIN();
    int64_t sa[] = {3, 1, 4}, sb[] = {2, 1};
    for (int o = 0; o < N_BINARY; o++) {
        const binary_op *b = &binary_ops[o];
        for (int i = 0; i < N_DTYPES; i++) {
            for (int j = 0; j < N_DTYPES; j++) {
                jag_dtype da = all_dtypes[i], db = all_dtypes[j];
                uint64_t seed = 1000 + (uint64_t)(o * 25 + i * 5 + j);
                char what[96];
                /* broadcasting */
                bool iv = is_compare(b->id) || b->id == JAG_OP_maximum || b->id == JAG_OP_minimum;
                double lo = b->id == JAG_OP_pow ? -3 : -5, hi = b->id == JAG_OP_pow ? 3 : 5;
                jag_tensor *x = rand_vals(sa, 3, da, iv ? -3 : lo, iv ? 3 : hi, seed, iv);
                jag_tensor *z = rand_vals(sb, 2, db, iv ? -3 : b->id == JAG_OP_pow ? -2 : lo, iv ? 3 : hi, seed + 7, iv);
                snprintf(what, sizeof what, "%s (3,1,4) with %s (2,1)", jag_dtype_name(da), jag_dtype_name(db));
                check_binary_pair(b, x, z, what);
                jag_release(x);
                jag_release(z);
                /* same shape, contiguous with non-contiguous */
                x = binary_input(b->id, L_CONTIG, da, 0, seed + 11);
                z = binary_input(b->id, L_NONCONTIG, db, 1, seed + 13);
                snprintf(what, sizeof what, "%s contiguous with %s noncontig", jag_dtype_name(da), jag_dtype_name(db));
                check_binary_pair(b, x, z, what);
                jag_release(x);
                jag_release(z);
            }
        }
    }
}

/* Every op in each dtype over the layouts: each side in each layout against
 * a contiguous other side, and the broadcast patterns the fast paths single
 * out (row vector, column vector, one element). */
static void test_binary_layouts(void) {
    TEST_BEGIN();
    for (int o = 0; o < N_BINARY; o++) {
        const binary_op *b = &binary_ops[o];
        for (int di = 0; di < N_DTYPES; di++) {
            jag_dtype dt = all_dtypes[di];
            if (expected_binary_dtype(b->id, dt, dt) < 0) continue;
            for (int l = 0; l < L_COUNT; l++) {
                if (l >= L_LARGE && dt != JAG_FLOAT32 && dt != JAG_INT64) continue;
                uint64_t seed = 5000 + (uint64_t)(o * 100 + di * 20 + l);
                /* the other side: the layout's shape, contiguous */
                int other = l <= L_EXPANDED ? L_CONTIG : l >= L_LARGE ? L_LARGE : l;
                for (int side = 0; side < 2; side++) {
                    jag_tensor *x = binary_input(b->id, side ? other : l, dt, 0, seed);
                    jag_tensor *z = binary_input(b->id, side ? l : other, dt, 1, seed + 1);
                    char what[96];
                    snprintf(what, sizeof what, "%s, %s %s", jag_dtype_name(dt), side ? "b" : "a", layout_names[l]);
                    check_binary_pair(b, x, z, what);
                    jag_release(x);
                    jag_release(z);
                }
            }
            /* broadcast shapes: (6,7) with (7), (6,1), (1), (), and the reverse */
            int64_t full[] = {6, 7}, shapes[][2] = {{7, 0}, {6, 1}, {1, 0}, {0, 0}};
            int nds[] = {1, 2, 1, 0};
            int64_t bigf[] = {LARGE_ROWS, LARGE_COLS}, bigs[][2] = {{LARGE_COLS, 0}, {LARGE_ROWS, 1}, {1, 0}};
            int bign[] = {1, 2, 1};
            for (int s = 0; s < 4 + 3; s++) {
                bool big = s >= 4;
                if (big && dt != JAG_FLOAT32 && dt != JAG_INT64) continue;
                const int64_t *fs = big ? bigf : full, *ss = big ? bigs[s - 4] : shapes[s];
                int ns = big ? bign[s - 4] : nds[s];
                jag_tensor *x = rand_vals(fs, 2, dt, -5, 5, 77 + (uint64_t)s, true);
                jag_tensor *z = rand_vals(ss, ns, dt, b->id == JAG_OP_pow ? -2 : -5, 5, 91 + (uint64_t)s, true);
                char what[96];
                snprintf(what, sizeof what, "%s, broadcast pattern %d", jag_dtype_name(dt), s);
                check_binary_pair(b, x, z, what);
                check_binary_pair(b, z, x, what);
                jag_release(x);
                jag_release(z);
            }
        }
    }
}

/* `_scalar` variants against the reference, with the scalar's dtype rule. */
static void test_binary_scalars(void) {
    TEST_BEGIN();
    const double scalars[] = {2.0, -3.0, 0.5, 0.0, 1.0, -2.5};
    for (int o = 0; o < N_BINARY; o++) {
        const binary_op *b = &binary_ops[o];
        for (int di = 0; di < N_DTYPES; di++) {
            jag_dtype dt = all_dtypes[di];
            for (size_t k = 0; k < sizeof scalars / sizeof scalars[0]; k++) {
                double s = scalars[k];
                bool integral = s == floor(s);
                /* expected dtype: the scalar's dtype rule */
                jag_dtype rd = jag_dtype_is_floating(dt) ? dt : !integral ? JAG_FLOAT32 : dt == JAG_BOOL ? JAG_INT64 : dt;
                int want = is_compare(b->id) ? JAG_BOOL
                           : b->id == JAG_OP_div ? (jag_dtype_is_floating(rd) ? (int)rd : JAG_FLOAT32)
                                                 : (int)rd;
                if (b->id == JAG_OP_sub && dt == JAG_BOOL) want = -1;
                for (int l = 0; l < L_COUNT; l++) {
                    if (l >= L_LARGE && (dt != JAG_FLOAT32 || k > 1)) continue;
                    jag_tensor *x = binary_input(b->id, l, dt, 0, 9000 + (uint64_t)(o * 50 + di * 10 + l));
                    jag_tensor *y = NULL, *r = NULL;
                    char what[96];
                    snprintf(what, sizeof what, "%s %s with scalar %g", jag_dtype_name(dt), layout_names[l], s);
                    if (want < 0) {
                        CHECK_ERR(b->sfn(x, s, &y), JAG_EDTYPE, "argument 'a' is bool");
                        CHECK(y == NULL);
                        jag_release(x);
                        continue;
                    }
                    CHECK_OK(b->sfn(x, s, &y));
                    jag_value args[3] = {jag__v_tensor(x), jag__v_double(s), jag__v_double(1.0)};
                    CHECK_OK(jag__ref_binary(b->id, args, b->id == JAG_OP_add ? 3 : 2, &r));
                    if (y && r) {
                        CHECK_MSG(jag_tensor_dtype(y) == (jag_dtype)want, "%s (%s): dtype %s, expected %s", b->name,
                                  what, jag_dtype_name(jag_tensor_dtype(y)), jag_dtype_name((jag_dtype)want));
                        check_against_ref(y, r, x, b->name, what);
                    }
                    jag_release(y);
                    jag_release(r);
                    jag_release(x);
                }
            }
        }
    }
}

/* add with alpha, for every dtype, against the reference. */
static void test_add_alpha(void) {
    TEST_BEGIN();
    int64_t sa[] = {3, 1, 4}, sb[] = {2, 1};
    const double alphas[] = {2, -1, 0, -0.5};
    for (int di = 0; di < N_DTYPES; di++) {
        jag_dtype dt = all_dtypes[di];
        for (size_t k = 0; k < sizeof alphas / sizeof alphas[0]; k++) {
            double alpha = alphas[k];
            jag_tensor *x = t_rand(sa, 3, dt, -5, 5, 300 + di), *z = t_rand(sb, 2, dt, -5, 5, 400 + di);
            jag_tensor *y = NULL, *r = NULL;
            if (!jag_dtype_is_floating(dt) && alpha != floor(alpha)) {
                CHECK_ERR(jag_add(x, z, alpha, &y), JAG_EINVAL, "argument 'alpha' is -0.5");
                CHECK(y == NULL);
            } else {
                CHECK_OK(jag_add(x, z, alpha, &y));
                jag_value args[3] = {jag__v_tensor(x), jag__v_tensor(z), jag__v_double(alpha)};
                CHECK_OK(jag__ref_binary(JAG_OP_add, args, 3, &r));
                char what[64];
                snprintf(what, sizeof what, "%s, alpha %g", jag_dtype_name(dt), alpha);
                if (y && r) check_against_ref(y, r, x, "add", what);
            }
            jag_release(y);
            jag_release(r);
            jag_release(x);
            jag_release(z);
        }
    }
    /* float: a + alpha * b on literal values */
    double av[] = {1, 2, 3}, bv[] = {10, 20, 30}, w[] = {-4, -8, -12};
    int64_t n = 3;
    jag_tensor *x = t_from(av, &n, 1, JAG_FLOAT64), *z = t_from(bv, &n, 1, JAG_FLOAT64), *y = NULL;
    CHECK_OK(jag_add(x, z, -0.5, &y));
    if (y) check_values("add alpha -0.5", y, JAG_FLOAT64, w, 3, 0);
    jag_release(y);
    jag_release(x);
    jag_release(z);
}

/* Runs op on two 1-D literal tensors (dtypes da, db) and checks each result. */
static void check_binary_values(const char *what, binary_fn fn, jag_dtype da, const double *a, jag_dtype db,
                                const double *b, int n, jag_dtype want_dtype, const double *want) {
    int64_t len = n;
    jag_tensor *x = t_from(a, &len, 1, da), *z = t_from(b, &len, 1, db), *y = NULL;
    CHECK_OK(fn(x, z, &y));
    if (y) check_values(what, y, want_dtype, want, n, want_dtype == JAG_FLOAT32 ? 1e-6 : 1e-14);
    jag_release(y);
    jag_release(x);
    jag_release(z);
}

static void check_scalar_values(const char *what, scalar_fn fn, jag_dtype da, const double *a, double s, int n,
                                jag_dtype want_dtype, const double *want) {
    int64_t len = n;
    jag_tensor *x = t_from(a, &len, 1, da), *y = NULL;
    CHECK_OK(fn(x, s, &y));
    if (y) check_values(what, y, want_dtype, want, n, want_dtype == JAG_FLOAT32 ? 1e-6 : 1e-14);
    jag_release(y);
    jag_release(x);
}

/* float32 x ** b for a scalar b (SLEEF's vector powf where the build has
 * it, libm's powf per element otherwise): within 1 ulp of powf over 203
 * values of x (the vector lanes and the tail) for exponents integer and
 * not, negative, zero and large; C99's special cases where powf has them
 * (a NaN for NaN, an infinity or zero of powf's sign). */
/* The activations' gradient ops (gelu_backward, gelu_tanh_backward,
 * silu_backward), g act'(x), against their formulas in double here, each
 * error measured against the magnitude of the formula's terms (where they
 * cancel, the terms' roundings are what is left): float32 gelu within
 * (3e-7 + 6e-8 x^2) (erfc's 1.5 ulp, and exp(-x^2 / 2) from x^2 rounded
 * to float32), gelu_tanh within (6e-7 + 2.5e-8 |x|^3) (its sigmoid's
 * argument 2 k (x + a x^3), about 0.07 |x|^3, rounds three times in
 * float32, and exp turns that absolute error into a relative one), silu
 * within (4e-7 + 2e-7 |x|) (sigmoid's
 * 2.4 ulp, times x in x (1 - s)); float64 within 1e-14. x over [-15, 15]
 * (the tails, where the terms vanish, and 1e-20 near 0) and the specials
 * (an infinity gives NaN, inf * 0, in gelu's formula and torch's); a
 * transposed x the same bits as the contiguous one; autograd's gelu and
 * silu on a nested batch the same bits as on each component; the errors. */
static double act_terms(int which, double x, double *want) {
    if (which == 0) {
        double cdf = 0.5 * erfc(-x / sqrt(2.0)), xp = x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
        *want = cdf + xp;
        return fabs(cdf) + fabs(xp);
    }
    if (which == 1) { /* 1/2 (1 + tanh u) as sigmoid(2 u): the tanh form cancels to 0 in double below x = -10 */
        const double k = sqrt(2.0 / M_PI), a = 0.044715;
        double s = 1 / (1 + exp(-2 * k * (x + a * x * x * x))), p2 = 2 * x * s * (1 - s) * k * (1 + 3 * a * x * x);
        *want = s + p2;
        return fabs(s) + fabs(p2);
    }
    double sg = 1 / (1 + exp(-x)), p2 = sg * x * (1 - sg);
    *want = sg + p2;
    return fabs(sg) + fabs(p2);
}
/* The elements where a and b (n each) hold the same value, or both NaN. */
static int equal_elements(const jag_tensor *a, const jag_tensor *b, int n) {
    int k = 0;
    for (int i = 0; a && b && i < n; i++) {
        double u = t_get(a, i), v = t_get(b, i);
        k += u == v || (u != u && v != v);
    }
    return k;
}

/* Autograd's gradient of sum(act(x) g) with respect to x: act 0 sigmoid, 1
 * tanh, 2 logsigmoid, 3 softplus(beta, thr), 4 hardswish, 5 hardsigmoid. A
 * new tensor, or NULL. */
static jag_tensor *act_autograd(int act, const jag_tensor *x, const jag_tensor *g, double beta, double thr) {
    jag_tensor *xg = NULL, *y = NULL, *ly = NULL, *l = NULL, *gx = NULL;
    CHECK_OK(jag_clone(x, &xg));
    CHECK_OK(jag_set_requires_grad(xg, true));
    CHECK_OK(act == 0   ? jag_sigmoid(xg, &y)
             : act == 1 ? jag_tanh(xg, &y)
             : act == 2 ? jag_logsigmoid(xg, &y)
             : act == 3 ? jag_softplus(xg, beta, thr, &y)
             : act == 4 ? jag_hardswish(xg, &y)
                        : jag_hardsigmoid(xg, &y));
    CHECK_OK(jag_mul(y, g, &ly));
    CHECK_OK(jag_sum(ly, NULL, 0, false, &l));
    CHECK_OK(jag_backward(l, NULL, false));
    CHECK_OK(jag_get_grad(xg, &gx));
    jag_release(xg), jag_release(y), jag_release(ly), jag_release(l);
    return gx;
}

/* sigmoid_backward and tanh_backward (g, y = the op's output): g (y (1 -
 * y)) and g (1 - y y), the bits of the composite of jag ops they replaced
 * (1 - y as -y + 1: the same rounding of the same value), in float32 and
 * float64, for y = sigmoid(x) and tanh(x) over [-12, 12] and the
 * specials; within 2 roundings of the formula in double (each operation
 * rounds once, and 1 - y is exact for y in [0.5, 1] and within half an ulp
 * of 1 elsewhere); autograd's gradients of jag_sigmoid and jag_tanh the
 * composite's bits; a float32 y named in a wrong-dtype error. */
static void test_output_activation_backward_ops(void) {
    TEST_BEGIN();
    enum { N = 1003 };
    double xs[N], gs[N];
    for (int i = 0; i < N; i++) xs[i] = -12.0 + 24.0 * i / (N - 4), gs[i] = sin(0.37 * i) * 2;
    xs[N - 3] = INFINITY, xs[N - 2] = -INFINITY, xs[N - 1] = NAN;
    int64_t n = N;
    for (int which = 0; which < 2; which++)
        for (int f = 0; f < 2; f++) {
            jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
            jag_op_id op = which ? JAG_OP_tanh_backward : JAG_OP_sigmoid_backward;
            jag_tensor *x = t_from(xs, &n, 1, dt), *g = t_from(gs, &n, 1, dt), *y = NULL, *dx = NULL;
            CHECK_OK(which ? jag_tanh(x, &y) : jag_sigmoid(x, &y));
            jag_value a[2] = {jag__v_tensor(g), jag__v_tensor(y)};
            CHECK_OK(jag_op_call(op, a, 2, &dx));
            /* the composite: g * (y * (1 - y)), g * (1 - y^2) */
            jag_tensor *ny = NULL, *om = NULL, *ysq = NULL, *d = NULL, *want = NULL;
            if (which) {
                CHECK_OK(jag_square(y, &ysq));
                CHECK_OK(jag_mul_scalar(ysq, -1.0, &ny));
                CHECK_OK(jag_add_scalar(ny, 1.0, &d));
            } else {
                CHECK_OK(jag_mul_scalar(y, -1.0, &ny));
                CHECK_OK(jag_add_scalar(ny, 1.0, &om));
                CHECK_OK(jag_mul(y, om, &d));
            }
            CHECK_OK(jag_mul(g, d, &want));
            int bad = 0, off = 0;
            for (int i = 0; dx && want && i < N; i++) {
                double got = t_get(dx, i), w = t_get(want, i), yv = t_get(y, i), gv = t_get(g, i);
                if (memcmp((char *)jag_data(dx) + i * jag_dtype_size(dt), (char *)jag_data(want) + i * jag_dtype_size(dt),
                           jag_dtype_size(dt)) && !(got != got && w != w) && bad++ < 5)
                    fprintf(stderr, "  %s y %.9g: %.9g, composite %.9g\n", jag_op_name(op), yv, got, w);
                double ref = which ? gv * (1 - yv * yv) : gv * (yv * (1 - yv));
                double eps = f ? 0x1p-53 : 0x1p-24, mag = which ? fabs(gv) * (1 + yv * yv) : fabs(gv * yv);
                if (ref == ref && !(fabs(got - ref) <= 3 * eps * mag + 1e-300)) off++;
            }
            CHECK_MSG(bad == 0, "%s %s: %d elements not the composite's bits", jag_op_name(op), jag_dtype_name(dt), bad);
            CHECK_MSG(off == 0, "%s %s: %d elements off the formula", jag_op_name(op), jag_dtype_name(dt), off);
            /* autograd: jag_sigmoid / jag_tanh's gradient, the same bits */
            jag_tensor *gx = act_autograd(which, x, g, 0, 0);
            int agree = equal_elements(gx, want, N);
            CHECK_MSG(agree == N, "%s %s: autograd's gradient differs from the composite at %d elements", jag_op_name(op),
                      jag_dtype_name(dt), N - agree);
            jag_release(gx);
            jag_release(ny), jag_release(om), jag_release(ysq), jag_release(d), jag_release(want);
            jag_release(x), jag_release(g), jag_release(y), jag_release(dx);
        }
    /* errors: the argument named y; nothing returned */
    {
        int64_t s3[1] = {3};
        jag_tensor *gi = NULL, *yi = NULL, *out = NULL;
        CHECK_OK(jag_zeros(s3, 1, JAG_INT32, &yi));
        CHECK_OK(jag_zeros(s3, 1, JAG_FLOAT32, &gi));
        jag_value a[2] = {jag__v_tensor(gi), jag__v_tensor(yi)};
        CHECK_ERR(jag_op_call(JAG_OP_sigmoid_backward, a, 2, &out), JAG_EDTYPE, "argument 'y' has dtype int32");
        CHECK(out == NULL);
        jag_release(gi), jag_release(yi);
    }
}
/* logsigmoid_backward, g sigmoid(-x), and softplus_backward, g where
 * beta x > threshold else g sigmoid(beta x), against the formulas in
 * double: float32 within 4e-7 of g s (vecmath's sigmoid, 2.4 ulp; and for
 * softplus beta rounded to float32, as torch does: a relative error of
 * beta x 2^-24 more, 6e-8 |beta x|), float64 within 1e-14; x over [-30,
 * 30] with the specials, beta 1 (threshold 20), 0.5 (threshold 3) and
 * 0.3 (threshold 2.5), rows exactly at the threshold (not above it: the
 * sigmoid's side); autograd's gradients of jag_logsigmoid and
 * jag_softplus the ops' bits; beta 0 refused, naming it. */
static void test_logsigmoid_softplus_backward_ops(void) {
    TEST_BEGIN();
    enum { N = 1207 };
    double xs[N], gs[N];
    for (int i = 0; i < N; i++) xs[i] = -30.0 + 60.0 * i / (N - 8), gs[i] = sin(0.37 * i) * 2 + 0.1;
    xs[N - 7] = 20.0, xs[N - 6] = 6.0, xs[N - 5] = 0, xs[N - 4] = INFINITY, xs[N - 3] = -INFINITY, xs[N - 2] = NAN;
    xs[N - 1] = 1e-20;
    const double betas[3] = {1.0, 0.5, 0.3}, thrs[3] = {20.0, 3.0, 2.5};
    int64_t n = N;
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_from(xs, &n, 1, dt), *g = t_from(gs, &n, 1, dt);
        for (int which = 0; which < 4; which++) { /* logsigmoid, then softplus with each beta */
            double beta = which ? betas[which - 1] : 0, thr = which ? thrs[which - 1] : 0;
            jag_op_id op = which ? JAG_OP_softplus_backward : JAG_OP_logsigmoid_backward;
            jag_value a[4] = {jag__v_tensor(g), jag__v_tensor(x), jag__v_double(beta), jag__v_double(thr)};
            jag_tensor *dx = NULL;
            CHECK_OK(jag_op_call(op, a, which ? 4 : 2, &dx));
            int bad = 0;
            for (int i = 0; dx && i < N; i++) {
                double xv = t_get(x, i), gv = t_get(g, i), got = t_get(dx, i), want;
                double bx = which ? beta * xv : -xv;
                if (which && bx > thr) want = gv;
                else want = gv / (1 + exp(-bx));
                double bxm = isfinite(bx) ? fabs(bx) : 0; /* (an infinite x: a zero or g, no rounding) */
                double tol = (f ? 1e-14 : 4e-7 + (which ? 6e-8 * bxm : 0)) * fabs(want) + (f ? 1e-300 : 1e-37);
                bool ok = want != want ? got != got : fabs(got - want) <= tol;
                if (!ok && bad++ < 5)
                    fprintf(stderr, "  %s beta %g x %.9g g %.9g: %.9g, want %.9g\n", jag_op_name(op), beta, xv, gv, got, want);
            }
            CHECK_MSG(bad == 0, "%s %s beta %g: %d elements off", jag_op_name(op), jag_dtype_name(dt), beta, bad);
            /* autograd: the op's bits */
            jag_tensor *gx = act_autograd(which ? 3 : 2, x, g, beta, thr);
            int agree = equal_elements(gx, dx, N);
            CHECK_MSG(agree == N, "%s %s beta %g: autograd differs from the op at %d elements", jag_op_name(op),
                      jag_dtype_name(dt), beta, N - agree);
            jag_release(gx), jag_release(dx);
        }
        /* an int beta and threshold: the float ones' result */
        {
            jag_value ai[4] = {jag__v_tensor(g), jag__v_tensor(x), jag__v_int(1), jag__v_int(20)};
            jag_value ad[4] = {jag__v_tensor(g), jag__v_tensor(x), jag__v_double(1.0), jag__v_double(20.0)};
            jag_tensor *di = NULL, *dd = NULL;
            CHECK_OK(jag_op_call(JAG_OP_softplus_backward, ai, 4, &di));
            CHECK_OK(jag_op_call(JAG_OP_softplus_backward, ad, 4, &dd));
            CHECK(equal_elements(di, dd, N) == N);
            jag_release(di), jag_release(dd);
        }
        /* beta 0: refused, nothing returned */
        jag_value a0[4] = {jag__v_tensor(g), jag__v_tensor(x), jag__v_double(0.0), jag__v_double(20.0)};
        jag_tensor *out = NULL;
        CHECK_ERR(jag_op_call(JAG_OP_softplus_backward, a0, 4, &out), JAG_EINVAL, "argument 'beta' is 0");
        CHECK(out == NULL);
        jag_release(x), jag_release(g);
    }
}

/* hardswish_backward (0 where x <= -3, g (x / 3 + 1/2) where x < 3, else
 * g) and hardsigmoid_backward (g / 6 where -3 < x < 3, else 0): the bits
 * of the same formulas made of ops (where, compares, x / 3 + 0.5 and g / 6)
 * in float32 and float64, for x over [-5, 5], the floats around -3 and 3,
 * and the specials (a NaN x: g and 0, as the compares give); torch 2.15's
 * values at the kinks (hardswish: 0 at -3, g at 3; hardsigmoid: 0 at both;
 * torch's float32 hardsigmoid multiplies g by 1/6 rounded, here g / 6 is
 * rounded once); within the roundings of the formula in double (x / 3,
 * + 1/2 and the product: 3 of them; g / 6: 1); autograd's gradients of
 * jag_hardswish and jag_hardsigmoid the same bits; an int32 x named in a
 * wrong-dtype error. */
static void test_hard_activation_backward_ops(void) {
    TEST_BEGIN();
    enum { N = 1013 };
    double xs[N], gs[N];
    for (int i = 0; i < N; i++) xs[i] = -5.0 + 10.0 * i / (N - 14), gs[i] = sin(0.37 * i) * 2 + 0.05;
    const double edges[13] = {-3.0, 3.0, nextafterf(-3.0f, -4.0f), nextafterf(-3.0f, 0.0f), nextafterf(3.0f, 0.0f),
                              nextafterf(3.0f, 4.0f), 0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-30, -1e-30};
    for (int k = 0; k < 13; k++) xs[N - 13 + k] = edges[k];
    int64_t n = N;
    for (int which = 0; which < 2; which++)
        for (int f = 0; f < 2; f++) {
            jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
            jag_op_id op = which ? JAG_OP_hardsigmoid_backward : JAG_OP_hardswish_backward;
            jag_tensor *x = t_from(xs, &n, 1, dt), *g = t_from(gs, &n, 1, dt), *dx = NULL, *zero = NULL;
            jag_value a[2] = {jag__v_tensor(g), jag__v_tensor(x)};
            CHECK_OK(jag_op_call(op, a, 2, &dx));
            CHECK_OK(jag_zeros(&n, 1, dt, &zero));
            /* the composite, op by op */
            jag_tensor *c1 = NULL, *c2 = NULL, *t1 = NULL, *t2 = NULL, *t3 = NULL, *mid = NULL, *want = NULL;
            if (which) {
                jag_tensor *inside = NULL;
                CHECK_OK(jag_gt_scalar(x, -3.0, &c1));
                CHECK_OK(jag_lt_scalar(x, 3.0, &c2));
                CHECK_OK(jag_mul(c1, c2, &inside));
                CHECK_OK(jag_div_scalar(g, 6.0, &t1));
                CHECK_OK(jag_where(inside, t1, zero, &want));
                jag_release(inside);
            } else {
                CHECK_OK(jag_lt_scalar(x, 3.0, &c1));
                CHECK_OK(jag_div_scalar(x, 3.0, &t1));
                CHECK_OK(jag_add_scalar(t1, 0.5, &t2));
                CHECK_OK(jag_mul(g, t2, &t3));
                CHECK_OK(jag_where(c1, t3, g, &mid));
                CHECK_OK(jag_le_scalar(x, -3.0, &c2));
                CHECK_OK(jag_where(c2, zero, mid, &want));
            }
            int bad = 0, off = 0, kink = 0;
            for (int i = 0; dx && want && i < N; i++) {
                double got = t_get(dx, i), w = t_get(want, i), xv = t_get(x, i), gv = t_get(g, i);
                if (memcmp((char *)jag_data(dx) + i * jag_dtype_size(dt), (char *)jag_data(want) + i * jag_dtype_size(dt),
                           jag_dtype_size(dt)) && !(got != got && w != w) && bad++ < 5)
                    fprintf(stderr, "  %s x %.9g g %.9g: %.9g, composite %.9g\n", jag_op_name(op), xv, gv, got, w);
                double ref = which ? (xv > -3 && xv < 3 ? gv / 6 : 0) : xv <= -3 ? 0 : xv < 3 ? gv * (xv / 3 + 0.5) : gv;
                if ((xv == -3 || xv == 3) && !(got == (which || xv == -3 ? 0 : gv)) && kink++ < 5) /* torch 2.15 */
                    fprintf(stderr, "  %s x %g g %.9g: %.9g\n", jag_op_name(op), xv, gv, got);
                double eps = f ? 0x1p-53 : 0x1p-24; /* (no rounding outside [-3, 3], where a NaN x falls too) */
                double mag = which ? fabs(gv) / 6 : xv >= -3 && xv <= 3 ? fabs(gv) * (fabs(xv) / 3 + 0.5) : 0;
                if (!(fabs(got - ref) <= (which ? 1 : 3) * eps * mag + 1e-300)) off++;
            }
            CHECK_MSG(bad == 0, "%s %s: %d elements not the composite's bits", jag_op_name(op), jag_dtype_name(dt), bad);
            CHECK_MSG(off == 0, "%s %s: %d elements off the formula", jag_op_name(op), jag_dtype_name(dt), off);
            CHECK_MSG(kink == 0, "%s %s: %d values at -3 or 3 not torch's", jag_op_name(op), jag_dtype_name(dt), kink);
            jag_tensor *gx = act_autograd(which ? 5 : 4, x, g, 0, 0);
            int agree = equal_elements(gx, want, N);
            CHECK_MSG(agree == N, "%s %s: autograd's gradient differs from the composite at %d elements", jag_op_name(op),
                      jag_dtype_name(dt), N - agree);
            jag_release(gx);
            jag_release(c1), jag_release(c2), jag_release(t1), jag_release(t2), jag_release(t3), jag_release(mid);
            jag_release(want), jag_release(zero), jag_release(x), jag_release(g), jag_release(dx);
        }
    {
        int64_t s3[1] = {3};
        jag_tensor *gi = NULL, *xi = NULL, *out = NULL;
        CHECK_OK(jag_zeros(s3, 1, JAG_INT32, &xi));
        CHECK_OK(jag_zeros(s3, 1, JAG_FLOAT32, &gi));
        jag_value a[2] = {jag__v_tensor(gi), jag__v_tensor(xi)};
        CHECK_ERR(jag_op_call(JAG_OP_hardswish_backward, a, 2, &out), JAG_EDTYPE, "argument 'x' has dtype int32");
        CHECK_ERR(jag_op_call(JAG_OP_hardsigmoid_backward, a, 2, &out), JAG_EDTYPE, "argument 'x' has dtype int32");
        CHECK(out == NULL);
        jag_release(gi), jag_release(xi);
    }
}

static void test_activation_backward_ops(void) {
    TEST_BEGIN();
    const jag_op_id ops[3] = {JAG_OP_gelu_backward, JAG_OP_gelu_tanh_backward, JAG_OP_silu_backward};
    enum { N = 3007 };
    double xs[N], gs[N];
    for (int i = 0; i < N; i++) xs[i] = -15.0 + 30.0 * i / (N - 8), gs[i] = sin(0.37 * i) * 2;
    xs[N - 7] = 1e-20, xs[N - 6] = -1e-20, xs[N - 5] = 0, xs[N - 4] = INFINITY, xs[N - 3] = -INFINITY, xs[N - 2] = NAN;
    xs[N - 1] = 0.5;
    int64_t n = N;
    for (int which = 0; which < 3; which++)
        for (int f = 0; f < 2; f++) {
            jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
            jag_tensor *x = t_from(xs, &n, 1, dt), *g = t_from(gs, &n, 1, dt), *dx = NULL;
            jag_value a[2] = {jag__v_tensor(g), jag__v_tensor(x)};
            CHECK_OK(jag_op_call(ops[which], a, 2, &dx));
            int bad = 0;
            for (int i = 0; dx && i < N; i++) {
                double xv = t_get(x, i), gv = t_get(g, i), d, mag = act_terms(which, xv, &d), got = t_get(dx, i);
                double want = gv * d;
                double rel = f ? 1e-14 : which == 0 ? 3e-7 + 6e-8 * xv * xv : which == 1 ? 6e-7 + 2.5e-8 * fabs(xv * xv * xv) : 4e-7 + 2e-7 * fabs(xv);
                double tol = rel * fabs(gv) * mag + (f ? 1e-300 : 1e-37);
                bool ok = want != want ? got != got : fabs(got - want) <= tol;
                if (!ok && bad++ < 5) fprintf(stderr, "  %s x %.9g g %.9g: %.9g, want %.9g\n", jag_op_name(ops[which]), xv, gv, got, want);
            }
            CHECK_MSG(bad == 0, "%s %s: %d elements off", jag_op_name(ops[which]), jag_dtype_name(dt), bad);
            /* strided operands: the same bits */
            int64_t sq[2] = {31, 97};
            jag_tensor *xm = NULL, *gm = NULL, *xr = NULL, *gr = NULL, *xt = NULL, *gt = NULL, *xc = NULL, *gc = NULL, *d1 = NULL, *d2 = NULL;
            CHECK_OK(jag_narrow(x, 0, 0, 31 * 97, &xm)); CHECK_OK(jag_narrow(g, 0, 0, 31 * 97, &gm));
            CHECK_OK(jag_reshape(xm, sq, 2, &xr)); CHECK_OK(jag_reshape(gm, sq, 2, &gr));
            CHECK_OK(jag_transpose(xr, 0, 1, &xt)); CHECK_OK(jag_transpose(gr, 0, 1, &gt));
            CHECK_OK(jag_contiguous(xt, &xc)); CHECK_OK(jag_contiguous(gt, &gc));
            jag_value at[2] = {jag__v_tensor(gt), jag__v_tensor(xt)}, ac[2] = {jag__v_tensor(gc), jag__v_tensor(xc)};
            CHECK_OK(jag_op_call(ops[which], at, 2, &d1));
            CHECK_OK(jag_op_call(ops[which], ac, 2, &d2));
            if (d1 && d2) {
                jag_tensor *d1c = NULL;
                CHECK_OK(jag_contiguous(d1, &d1c));
                int first = -1; /* the same bits, or both NaN (a NaN's sign is the instructions' choice) */
                for (int i = 0; d1c && first < 0 && i < 31 * 97; i++)
                    if (memcmp((char *)jag_data(d1c) + i * jag_dtype_size(dt), (char *)jag_data(d2) + i * jag_dtype_size(dt), jag_dtype_size(dt)) &&
                        !(isnan(t_get(d1c, i)) && isnan(t_get(d2, i))))
                        first = i;
                CHECK_MSG(d1c && first < 0, "%s %s: strided operands, other bits from element %d (%.9g vs %.9g, x %.9g)",
                          jag_op_name(ops[which]), jag_dtype_name(dt), first, first < 0 ? 0 : t_get(d1c, first),
                          first < 0 ? 0 : t_get(d2, first), first < 0 ? 0 : t_get(xc, first));
                jag_release(d1c);
            }
            jag_release(xm), jag_release(gm), jag_release(xr), jag_release(gr), jag_release(xt), jag_release(gt);
            jag_release(xc), jag_release(gc), jag_release(d1), jag_release(d2);
            jag_release(x), jag_release(g), jag_release(dx);
        }
    /* nested: the gradients of gelu and silu per component, bit for bit */
    for (int which = 0; which < 2; which++) {
        int64_t vs[2] = {9, 5}, offs[4] = {0, 2, 2, 9}, no = 4;
        jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -4, 4, 7), *off = NULL, *nt = NULL, *y = NULL, *s = NULL, *gn = NULL, *gv = NULL;
        CHECK_OK(jag_from_data(offs, &no, 1, JAG_INT64, &off));
        CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
        CHECK_OK(jag_set_requires_grad(nt, true));
        CHECK_OK(which ? jag_silu(nt, &y) : jag_gelu(nt, &y));
        CHECK_OK(jag_nested_values(y, &s));
        jag_tensor *tot = NULL;
        CHECK_OK(jag_sum(s, NULL, 0, false, &tot));
        CHECK_OK(jag_backward(tot, NULL, false));
        CHECK_OK(jag_get_grad(nt, &gn));
        if (gn) CHECK_OK(jag_nested_values(gn, &gv));
        jag_tensor *vd = NULL, *yd = NULL, *td = NULL, *gd = NULL;
        CHECK_OK(jag_clone(v, &vd));
        CHECK_OK(jag_set_requires_grad(vd, true));
        CHECK_OK(which ? jag_silu(vd, &yd) : jag_gelu(vd, &yd));
        CHECK_OK(jag_sum(yd, NULL, 0, false, &td));
        CHECK_OK(jag_backward(td, NULL, false));
        CHECK_OK(jag_get_grad(vd, &gd));
        CHECK(gv && gd && memcmp(jag_data(gv), jag_data(gd), 45 * sizeof(float)) == 0);
        jag_release(v), jag_release(off), jag_release(nt), jag_release(y), jag_release(s), jag_release(tot);
        jag_release(gn), jag_release(gv), jag_release(vd), jag_release(yd), jag_release(td), jag_release(gd);
    }
    /* errors: nothing returned */
    {
        int64_t three = 3, four = 4;
        jag_tensor *x3 = NULL, *x4 = NULL, *g64 = NULL, *xi = NULL, *o = NULL;
        CHECK_OK(jag_ones(&three, 1, JAG_FLOAT32, &x3)); CHECK_OK(jag_ones(&four, 1, JAG_FLOAT32, &x4));
        CHECK_OK(jag_ones(&three, 1, JAG_FLOAT64, &g64)); CHECK_OK(jag_ones(&three, 1, JAG_INT64, &xi));
        jag_value e1[2] = {jag__v_tensor(x4), jag__v_tensor(x3)}, e2[2] = {jag__v_tensor(g64), jag__v_tensor(x3)},
                  e3[2] = {jag__v_tensor(xi), jag__v_tensor(xi)};
        CHECK_ERR(jag_op_call(JAG_OP_silu_backward, e1, 2, &o), JAG_ESHAPE, "argument 'g' has shape [4], expected [3]");
        CHECK_ERR(jag_op_call(JAG_OP_gelu_backward, e2, 2, &o), JAG_EDTYPE, "argument 'g' has dtype float64, expected float32");
        CHECK_ERR(jag_op_call(JAG_OP_gelu_tanh_backward, e3, 2, &o), JAG_EDTYPE, "argument 'x' has dtype int64, expected float32 or float64");
        CHECK(o == NULL);
        jag_release(x3), jag_release(x4), jag_release(g64), jag_release(xi);
    }
}

static void test_pow_scalar_f32(void) {
    TEST_BEGIN();
    enum { N = 203 };
    double xs[N];
    const double specials[] = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 1e-40, -1e-40, 3e38, 0.5, -8.0, 2.0};
    int ns = (int)(sizeof specials / sizeof specials[0]);
    for (int i = 0; i < N; i++) xs[i] = i < ns ? specials[i] : (double)(float)((i % 2 ? -1.0 : 1.0) * exp(0.21 * (i - 100)));
    const double bs[] = {2.5, -1.5, 0.5, 3.0, -2.0, 0.0, 1.0, 1e-3, 40.0, -0.25, 7.0};
    int64_t n = N;
    jag_tensor *x = t_from(xs, &n, 1, JAG_FLOAT32);
    /* the same values as column 0 of an (N, 2) matrix: a strided run */
    double pairs[2 * N];
    for (int i = 0; i < N; i++) pairs[2 * i] = xs[i], pairs[2 * i + 1] = -7.0;
    int64_t n2[2] = {N, 2};
    jag_tensor *m = NULL, *xcol = NULL;
    CHECK_OK(jag_from_data(pairs, n2, 2, JAG_FLOAT64, &m));
    jag_tensor *m32 = NULL;
    CHECK_OK(jag_to_dtype(m, JAG_FLOAT32, &m32));
    CHECK_OK(jag_select(m32, 1, 0, &xcol));
    CHECK(xcol && !jag_is_contiguous(xcol));
    for (size_t k = 0; k < sizeof bs / sizeof bs[0]; k++) {
        jag_tensor *y = NULL, *ys = NULL;
        CHECK_OK(jag_pow_scalar(x, bs[k], &y));
        for (int i = 0; y && i < N; i++) {
            float xv = (float)t_get(x, i), want = powf(xv, (float)bs[k]), got = (float)t_get(y, i);
            bool ok;
            if (want != want) ok = got != got;
            else if (isinf(want) || want == 0) ok = got == want && signbit(got) == signbit(want);
            else ok = fabsf(got - want) <= nextafterf(fabsf(want), INFINITY) - fabsf(want);
            CHECK_MSG(ok, "%.9g ** %g = %.9g, powf %.9g", xv, bs[k], got, want);
        }
        /* the strided run: the contiguous run's bits (its vector kernel, not
         * libm's powf one element at a time) */
        CHECK_OK(jag_pow_scalar(xcol, bs[k], &ys));
        int same = 0;
        for (int i = 0; y && ys && i < N; i++) {
            float a = ((const float *)jag_data(y))[i], b = ((const float *)jag_data(ys))[i];
            same += !memcmp(&a, &b, sizeof a) || (a != a && b != b);
        }
        CHECK_MSG(same == N, "** %g on a strided run: %d of %d elements differ from the contiguous run", bs[k], N - same, N);
        jag_release(y), jag_release(ys);
    }
    jag_release(x), jag_release(m), jag_release(m32), jag_release(xcol);
}

static void test_binary_hand_values(void) {
    TEST_BEGIN();
    const double inf = INFINITY, nan = NAN;
    const jag_dtype F32 = JAG_FLOAT32, F64 = JAG_FLOAT64, I32 = JAG_INT32, I64 = JAG_INT64, B = JAG_BOOL;
    {
        double a[] = {1, 2, inf, nan, -0.0}, b[] = {10, -20, -inf, 1, 0}, w[] = {11, -18, nan, nan, 0};
        check_binary_values("add f32", add1, F32, a, F32, b, 5, F32, w);
        check_binary_values("add f64", add1, F64, a, F64, b, 5, F64, w);
        double ib[] = {10, -20, 0, 1, 0}, wi[] = {11, -18, inf, nan, 0};
        check_binary_values("add f32+i32", add1, F32, a, I32, ib, 5, F32, wi);
    }
    {
        double a[] = {1, 0, 1, 0}, b[] = {1, 1, 0, 0}, or_[] = {1, 1, 1, 0}, and_[] = {1, 0, 0, 0};
        check_binary_values("add bool", add1, B, a, B, b, 4, B, or_);
        check_binary_values("mul bool", jag_mul, B, a, B, b, 4, B, and_);
        check_binary_values("maximum bool", jag_maximum, B, a, B, b, 4, B, or_);
        check_binary_values("minimum bool", jag_minimum, B, a, B, b, 4, B, and_);
        double sum[] = {2, 1, 1, 0};
        check_binary_values("add bool+i32", add1, B, a, I32, b, 4, I32, sum);
        double plus3[] = {4, 3, 4, 3};
        check_scalar_values("add_scalar bool 3", jag_add_scalar, B, a, 3, 4, I64, plus3);
    }
    {
        double a[] = {5, -5, 0.5}, b[] = {7, -7, 0.25}, w[] = {-2, 2, 0.25};
        check_binary_values("sub f64", jag_sub, F64, a, F64, b, 3, F64, w);
        double ai[] = {5, -5, 0}, bi[] = {7, -7, 3}, wi[] = {-2, 2, -3};
        check_binary_values("sub i32", jag_sub, I32, ai, I32, bi, 3, I32, wi);
        check_binary_values("sub i64-i32", jag_sub, I64, ai, I32, bi, 3, I64, wi);
    }
    {
        double a[] = {3, -2, 0, inf, nan}, b[] = {4, 0.5, inf, -2, 0}, w[] = {12, -1, nan, -inf, nan};
        check_binary_values("mul f32", jag_mul, F32, a, F32, b, 5, F32, w);
        check_binary_values("mul f64", jag_mul, F64, a, F64, b, 5, F64, w);
    }
    {
        /* true division, integers give float32 */
        double a[] = {7, -1, 1, 0, -7}, b[] = {2, 0, 0, 0, 2}, w[] = {3.5, -inf, inf, nan, -3.5};
        check_binary_values("div i32", jag_div, I32, a, I32, b, 5, F32, w);
        check_binary_values("div i64", jag_div, I64, a, I64, b, 5, F32, w);
        check_binary_values("div f64/i32", jag_div, F64, a, I32, b, 5, F64, w);
        double bb[] = {1, 1, 0, 0, 1}, wb[] = {1, 0, nan, nan, 1}, ab[] = {1, 0, 0, 0, 1};
        check_binary_values("div bool", jag_div, B, ab, B, bb, 5, F32, wb);
        double w2[] = {3.5, -0.5, 0.5, 0, -3.5};
        check_scalar_values("div_scalar i32 2", jag_div_scalar, I32, a, 2, 5, F32, w2);
    }
    {
        double a[] = {2, 2, 1, -1, -1, 0, 3, -2, 0}, b[] = {10, -1, -5, -3, -2, -1, 0, 3, 0};
        double w[] = {1024, 0, 1, -1, 1, 0, 1, -8, 1};
        check_binary_values("pow i32", jag_pow, I32, a, I32, b, 9, I32, w);
        check_binary_values("pow i64", jag_pow, I64, a, I64, b, 9, I64, w);
        double wf[] = {1024, 0.5, 1, -1, 1, inf, 1, -8, 1};
        check_binary_values("pow f64", jag_pow, F64, a, F64, b, 9, F64, wf);
        check_binary_values("pow f32", jag_pow, F32, a, F32, b, 9, F32, wf);
        double fa[] = {2, -8, 4, nan, 1}, fb[] = {0.5, 1.0 / 3, -0.5, 0, nan}, fw[] = {1.4142135623730951, nan, 0.5, 1, 1};
        check_binary_values("pow f64 fractional", jag_pow, F64, fa, F64, fb, 5, F64, fw);
        double ia[] = {3, 4}, iw[] = {15.588457268119896, 32};
        check_scalar_values("pow_scalar i32 2.5", jag_pow_scalar, I32, ia, 2.5, 2, F32, iw);
        double sa[] = {-3, 1.5, nan, -inf}, sw[] = {9, 2.25, nan, inf};
        check_scalar_values("pow_scalar f32 2", jag_pow_scalar, F32, sa, 2, 4, F32, sw);
        check_scalar_values("pow_scalar f64 2", jag_pow_scalar, F64, sa, 2, 4, F64, sw);
        double sq[] = {9, 16};
        check_scalar_values("pow_scalar i64 2", jag_pow_scalar, I64, ia, 2, 2, I64, sq);
        double bw[] = {1, 0};
        double bv[] = {1, 0};
        check_scalar_values("pow_scalar bool 3", jag_pow_scalar, B, bv, 3, 2, I64, bw);
    }
    {
        double a[] = {1, nan, 2, -0.5, inf, nan}, b[] = {nan, 1, 3, -1, 5, nan};
        double mx[] = {nan, nan, 3, -0.5, inf, nan}, mn[] = {nan, nan, 2, -1, 5, nan};
        check_binary_values("maximum f32", jag_maximum, F32, a, F32, b, 6, F32, mx);
        check_binary_values("maximum f64", jag_maximum, F64, a, F64, b, 6, F64, mx);
        check_binary_values("minimum f32", jag_minimum, F32, a, F32, b, 6, F32, mn);
        check_binary_values("minimum f64", jag_minimum, F64, a, F64, b, 6, F64, mn);
        double ia[] = {1, -4, 7}, ib[] = {2, -5, 7}, imx[] = {2, -4, 7}, imn[] = {1, -5, 7};
        check_binary_values("maximum i64", jag_maximum, I64, ia, I64, ib, 3, I64, imx);
        check_binary_values("minimum i32", jag_minimum, I32, ia, I32, ib, 3, I32, imn);
        double smx[] = {nan, nan, nan, nan, nan, nan};
        check_scalar_values("maximum_scalar nan", jag_maximum_scalar, F32, a, nan, 6, F32, smx);
    }
    {
        double a[] = {1, nan, 2, 3, -inf}, b[] = {1, nan, 3, 2, -inf};
        double eq[] = {1, 0, 0, 0, 1}, ne[] = {0, 1, 1, 1, 0}, lt[] = {0, 0, 1, 0, 0}, le[] = {1, 0, 1, 0, 1},
               gt[] = {0, 0, 0, 1, 0}, ge[] = {1, 0, 0, 1, 1};
        check_binary_values("eq", jag_eq, F32, a, F64, b, 5, B, eq);
        check_binary_values("ne", jag_ne, F32, a, F64, b, 5, B, ne);
        check_binary_values("lt", jag_lt, F64, a, F64, b, 5, B, lt);
        check_binary_values("le", jag_le, F64, a, F32, b, 5, B, le);
        check_binary_values("gt", jag_gt, F32, a, F32, b, 5, B, gt);
        check_binary_values("ge", jag_ge, F64, a, F64, b, 5, B, ge);
        /* int32 vs float32 compares in float32 (torch): 16777217 rounds to 16777216 */
        double ia[] = {16777217}, fb[] = {16777216}, one[] = {1};
        check_binary_values("eq i32 f32", jag_eq, I32, ia, F32, fb, 1, B, one);
        /* against scalars: a float32 tensor compares in float32 (0.1 rounds
         * alike); an int tensor against a non-integral or out-of-range
         * scalar compares in float64, exactly */
        double f[] = {0.1}, is[] = {2, 3, 16777217};
        check_scalar_values("eq_scalar f32 0.1", jag_eq_scalar, F32, f, 0.1, 1, B, one);
        double lt25[] = {1, 0, 0}, gt_half[] = {1, 1, 1}, lt_big[] = {1, 1, 1};
        check_scalar_values("lt_scalar i32 2.5", jag_lt_scalar, I32, is, 2.5, 3, B, lt25);
        check_scalar_values("gt_scalar i32 16777216.5", jag_gt_scalar, I32, is + 2, 16777216.5, 1, B, gt_half);
        check_scalar_values("lt_scalar i32 3e9", jag_lt_scalar, I32, is, 3e9, 3, B, lt_big);
        double bv[] = {1, 0}, eq1[] = {1, 0};
        check_scalar_values("eq_scalar bool 1", jag_eq_scalar, B, bv, 1, 2, B, eq1);
    }
}

/* Integer add/sub/mul/pow wrap around as torch does, with no UB. */
static void test_binary_integer_wrap(void) {
    TEST_BEGIN();
    int64_t n = 2;
    int32_t a32[] = {INT32_MAX, INT32_MIN}, b32[] = {1, 65536};
    jag_tensor *x = NULL, *z = NULL, *y = NULL;
    CHECK_OK(jag_from_data(a32, &n, 1, JAG_INT32, &x));
    CHECK_OK(jag_from_data(b32, &n, 1, JAG_INT32, &z));
    CHECK_OK(jag_add(x, z, 1, &y));
    if (y) CHECK(((int32_t *)jag_data(y))[0] == INT32_MIN && ((int32_t *)jag_data(y))[1] == INT32_MIN + 65536);
    jag_release(y), y = NULL;
    CHECK_OK(jag_add(x, z, 2, &y)); /* INT32_MAX + 2 wraps; INT32_MIN + 131072 */
    if (y) CHECK(((int32_t *)jag_data(y))[0] == INT32_MIN + 1 && ((int32_t *)jag_data(y))[1] == INT32_MIN + 131072);
    jag_release(y), y = NULL;
    CHECK_OK(jag_sub(z, x, &y)); /* 1 - INT32_MAX; 65536 - INT32_MIN wraps */
    if (y) CHECK(((int32_t *)jag_data(y))[0] == 1 - INT32_MAX && ((int32_t *)jag_data(y))[1] == INT32_MIN + 65536);
    jag_release(y), y = NULL;
    CHECK_OK(jag_mul(x, z, &y)); /* INT32_MAX * 1; INT32_MIN * 65536 = 0 mod 2^32 */
    if (y) CHECK(((int32_t *)jag_data(y))[0] == INT32_MAX && ((int32_t *)jag_data(y))[1] == 0);
    jag_release(y), y = NULL;
    CHECK_OK(jag_add_scalar(x, 1, &y));
    if (y) CHECK(((int32_t *)jag_data(y))[0] == INT32_MIN && ((int32_t *)jag_data(y))[1] == INT32_MIN + 1);
    jag_release(y), y = NULL;
    CHECK_OK(jag_pow_scalar(z, 3, &y)); /* 1; 65536^3 = 2^48 = 0 mod 2^32 */
    if (y) CHECK(((int32_t *)jag_data(y))[0] == 1 && ((int32_t *)jag_data(y))[1] == 0);
    jag_release(y), y = NULL;
    jag_release(x);
    jag_release(z);

    int64_t a64[] = {INT64_MAX, INT64_MIN}, b64[] = {1, 3};
    CHECK_OK(jag_from_data(a64, &n, 1, JAG_INT64, &x));
    CHECK_OK(jag_from_data(b64, &n, 1, JAG_INT64, &z));
    CHECK_OK(jag_add(x, z, 1, &y));
    if (y) CHECK(((int64_t *)jag_data(y))[0] == INT64_MIN && ((int64_t *)jag_data(y))[1] == INT64_MIN + 3);
    jag_release(y), y = NULL;
    CHECK_OK(jag_sub(x, z, &y)); /* INT64_MIN - 3 wraps to INT64_MAX - 2 */
    if (y) CHECK(((int64_t *)jag_data(y))[0] == INT64_MAX - 1 && ((int64_t *)jag_data(y))[1] == INT64_MAX - 2);
    jag_release(y), y = NULL;
    CHECK_OK(jag_mul(x, z, &y)); /* INT64_MAX * 1; INT64_MIN * 3 = INT64_MIN mod 2^64 */
    if (y) CHECK(((int64_t *)jag_data(y))[0] == INT64_MAX && ((int64_t *)jag_data(y))[1] == INT64_MIN);
    jag_release(y), y = NULL;
    CHECK_OK(jag_pow(z, z, &y)); /* 1^1; 3^3 */
    if (y) CHECK(((int64_t *)jag_data(y))[0] == 1 && ((int64_t *)jag_data(y))[1] == 27);
    jag_release(y), y = NULL;
    CHECK_OK(jag_pow_scalar(x, 2, &y)); /* INT64_MAX^2 = 1, INT64_MIN^2 = 0 (mod 2^64) */
    if (y) CHECK(((int64_t *)jag_data(y))[0] == 1 && ((int64_t *)jag_data(y))[1] == 0);
    jag_release(y);
    jag_release(x);
    jag_release(z);
}

/* ---- clamp ------------------------------------------------------------------------- */

/* clamp against its reference over every dtype and layout and several
 * bounds (infinite ones included); floats also against the composition of
 * maximum and minimum with the scalars (an independent path, bit for bit);
 * hand values with NaN and infinities; the result dtypes; errors that leave
 * the input alone. */
static void test_clamp(void) {
    TEST_BEGIN();
    const double xs[] = {-2, -0.5, 0, 0.7, 3, NAN, -INFINITY, INFINITY};
    const double want[] = {-0.5, -0.5, 0, 0.7, 0.7, NAN, -0.5, 0.7};
    int64_t n8 = 8;
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_from(xs, &n8, 1, dt), *y = NULL;
        double w[8];
        for (int i = 0; i < 8; i++) w[i] = f ? want[i] : (double)(float)want[i];
        CHECK_OK(jag_clamp(x, -0.5, 0.7, &y));
        if (y) check_values("clamp hand values", y, dt, w, 8, 0);
        jag_release(y), jag_release(x);
    }
    const double bounds[][2] = {{-0.5, 0.7}, {-2, 3}, {-INFINITY, 1}, {-1, INFINITY}, {-INFINITY, INFINITY}, {2, 2}};
    for (int di = 0; di < N_DTYPES; di++) {
        jag_dtype dt = all_dtypes[di];
        for (size_t bi = 0; bi < sizeof bounds / sizeof bounds[0]; bi++) {
            double lo = bounds[bi][0], hi = bounds[bi][1];
            bool integral = (isinf(lo) || lo == floor(lo)) && (isinf(hi) || hi == floor(hi));
            jag_dtype want_dt = jag_dtype_is_floating(dt) ? dt : !integral ? JAG_FLOAT32 : dt == JAG_BOOL ? JAG_INT64 : dt;
            for (int l = 0; l < L_COUNT; l++) {
                if (l >= L_LARGE && dt != JAG_FLOAT32 && dt != JAG_INT32) continue;
                jag_tensor *x = make_layout(l, dt, -4, 4, 700 + 10 * (uint64_t)di + (uint64_t)l, false), *y = NULL, *r = NULL;
                jag_value args[3] = {jag__v_tensor(x), jag__v_double(lo), jag__v_double(hi)};
                char what[96];
                snprintf(what, sizeof what, "%s %s [%g, %g]", jag_dtype_name(dt), layout_names[l], lo, hi);
                CHECK_OK(jag_clamp(x, lo, hi, &y));
                CHECK_OK(jag__ref_clamp(args, 3, &r));
                if (y && r) {
                    CHECK_MSG(jag_tensor_dtype(y) == want_dt, "clamp (%s): dtype %s", what, jag_dtype_name(jag_tensor_dtype(y)));
                    check_against_ref(y, r, x, "clamp", what);
                }
                if (y && jag_dtype_is_floating(dt)) {
                    jag_tensor *m = NULL, *mm = NULL;
                    CHECK_OK(jag_maximum_scalar(x, lo, &m));
                    if (m) CHECK_OK(jag_minimum_scalar(m, hi, &mm));
                    CHECK_MSG(mm && t_allclose(y, mm, 0, 0), "clamp (%s): differs from minimum(maximum(x, lo), hi)", what);
                    jag_release(m), jag_release(mm);
                }
                jag_release(y), jag_release(r), jag_release(x);
            }
        }
    }
    /* errors name the op and the argument, and leave no output */
    int64_t s2 = 2;
    const double iv[] = {1, 2};
    jag_tensor *xi = t_from(iv, &s2, 1, JAG_INT32), *y = NULL;
    CHECK_ERR(jag_clamp(xi, 1, 0, &y), JAG_EINVAL, "jag_clamp: arguments lo = 1 and hi = 0, expected lo <= hi");
    CHECK_ERR(jag_clamp(xi, NAN, 1, &y), JAG_EINVAL, "expected lo <= hi");
    CHECK_ERR(jag_clamp(xi, 0, 1e10, &y), JAG_EINVAL, "argument 'hi' is 10000000000, outside the range of int32");
    CHECK_ERR(jag_clamp(NULL, 0, 1, &y), JAG_EINVAL, "NULL");
    CHECK_ERR(jag_clamp(xi, 0, 1, NULL), JAG_EINVAL, "out");
    CHECK(y == NULL);
    CHECK(t_get(xi, 0) == 1 && t_get(xi, 1) == 2);
    jag_release(xi);
}

/* ---- where -------------------------------------------------------------------------- */

/* where(cond, a, b) against the reference */
static void check_where(jag_tensor *cond, jag_tensor *a, jag_tensor *b, const char *what) {
    jag_value args[3] = {jag__v_tensor(cond), jag__v_tensor(a), jag__v_tensor(b)};
    jag_tensor *y = NULL, *r = NULL;
    CHECK_OK(jag_where(cond, a, b, &y));
    CHECK_OK(jag__ref_binary(JAG_OP_where, args, 3, &r));
    if (y && r) check_against_ref(y, r, a, "where", what);
    jag_release(y), jag_release(r);
}

static void test_where(void) {
    TEST_BEGIN();
    /* literal values, int32 with float32 -> float32 */
    double c[] = {1, 0, 1}, av[] = {1, 2, 3}, bv[] = {10.5, 20.5, 30.5}, w[] = {1, 20.5, 3};
    int64_t n = 3;
    jag_tensor *cond = t_from(c, &n, 1, JAG_BOOL), *a = t_from(av, &n, 1, JAG_INT32), *b = t_from(bv, &n, 1, JAG_FLOAT32);
    jag_tensor *y = NULL;
    CHECK_OK(jag_where(cond, a, b, &y));
    if (y) check_values("where", y, JAG_FLOAT32, w, 3, 0);
    jag_release(y), y = NULL;
    /* a 0-d b broadcast */
    jag_tensor *zero = NULL;
    CHECK_OK(jag_zeros(NULL, 0, JAG_INT64, &zero));
    double w2[] = {1, 0, 3};
    CHECK_OK(jag_where(cond, a, zero, &y));
    if (y) check_values("where 0-d b", y, JAG_INT64, w2, 3, 0);
    jag_release(y), y = NULL;
    jag_release(zero);
    jag_release(cond), jag_release(a), jag_release(b);

    /* every dtype of a/b over layouts and a three-way broadcast */
    int64_t sc[] = {3, 1, 1}, sa[] = {2, 1}, sb[] = {4};
    for (int i = 0; i < N_DTYPES; i++) {
        for (int j = 0; j < N_DTYPES; j++) {
            jag_dtype da = all_dtypes[i], db = all_dtypes[j];
            char what[96];
            cond = t_rand(sc, 3, JAG_BOOL, 0, 1, 10 + i);
            a = t_rand(sa, 2, da, -5, 5, 20 + i * 5 + j);
            b = t_rand(sb, 1, db, -5, 5, 30 + i * 5 + j);
            jag_value args[3] = {jag__v_tensor(cond), jag__v_tensor(a), jag__v_tensor(b)};
            jag_tensor *r = NULL;
            CHECK_OK(jag_where(cond, a, b, &y));
            CHECK_OK(jag__ref_binary(JAG_OP_where, args, 3, &r));
            snprintf(what, sizeof what, "%s/%s (3,1,1),(2,1),(4)", jag_dtype_name(da), jag_dtype_name(db));
            if (y && r) {
                CHECK(jag_ndim(y) == 3 && jag_size(y, 0) == 3 && jag_size(y, 1) == 2 && jag_size(y, 2) == 4);
                CHECK(jag_tensor_dtype(y) == jag_promote_types(da, db));
                check_against_ref(y, r, a, "where", what);
            }
            jag_release(y), y = NULL;
            jag_release(r);
            jag_release(cond), jag_release(a), jag_release(b);
        }
        jag_dtype dt = all_dtypes[i];
        for (int l = 0; l < L_COUNT; l++) {
            if (l >= L_LARGE && dt != JAG_FLOAT32) continue;
            cond = make_layout(l, JAG_BOOL, 0, 1, 50 + l, false);
            a = make_layout(l == L_EXPANDED ? L_CONTIG : l, dt, -5, 5, 60 + l, false);
            b = make_layout(l >= L_LARGE ? L_LARGE : l == L_EXPANDED ? L_NONCONTIG : l, dt, -5, 5, 70 + l, false);
            char what[96];
            snprintf(what, sizeof what, "%s %s", jag_dtype_name(dt), layout_names[l]);
            check_where(cond, a, b, what);
            jag_release(cond), jag_release(a), jag_release(b);
        }
        /* a 0-d a or b against contiguous others (masked_fill's shape):
         * the select-against-a-constant loops, their vector body and tail */
        int64_t sn[] = {37, 29};
        for (int side = 0; side < 2; side++) {
            cond = t_rand(sn, 2, JAG_BOOL, 0, 1, 80 + i * 2 + side);
            jag_tensor *full = t_rand(sn, 2, dt, -5, 5, 90 + i * 2 + side), *scalar = t_rand(NULL, 0, dt, -5, 5, 95 + i);
            a = side ? full : scalar, b = side ? scalar : full;
            char what[96];
            snprintf(what, sizeof what, "%s 0-d %s", jag_dtype_name(dt), side ? "b" : "a");
            check_where(cond, a, b, what);
            jag_release(cond), jag_release(full), jag_release(scalar);
        }
    }
}

/* ---- shapes ------------------------------------------------------------------------- */

static void test_broadcast_shapes(void) {
    TEST_BEGIN();
    struct { int64_t a[3]; int na; int64_t b[3]; int nb; int64_t want[3]; int nw; } cases[] = {
        {{3, 1, 4}, 3, {2, 1}, 2, {3, 2, 4}, 3},
        {{5}, 1, {0}, 0, {5}, 1},
        {{0}, 0, {0}, 0, {0}, 0},
        {{0, 4}, 2, {4}, 1, {0, 4}, 2},
        {{2, 1}, 2, {1, 0}, 2, {2, 0}, 2},
        {{1, 1, 1}, 3, {1}, 1, {1, 1, 1}, 3},
        {{6, 1}, 2, {1, 7}, 2, {6, 7}, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        jag_tensor *x = NULL, *z = NULL, *y = NULL;
        CHECK_OK(jag_ones(cases[k].a, cases[k].na, JAG_FLOAT32, &x));
        CHECK_OK(jag_ones(cases[k].b, cases[k].nb, JAG_INT32, &z));
        CHECK_OK(jag_mul(x, z, &y));
        if (y) {
            bool ok = jag_ndim(y) == cases[k].nw;
            for (int d = 0; ok && d < cases[k].nw; d++) ok = jag_size(y, d) == cases[k].want[d];
            CHECK_MSG(ok, "case %zu: wrong broadcast shape", k);
            for (int64_t i = 0; i < jag_numel(y); i++) CHECK(t_get(y, i) == 1);
        }
        jag_release(y);
        jag_release(x);
        jag_release(z);
    }
}

/* Scalar dtype rules, each written out. */
static void test_scalar_dtypes(void) {
    TEST_BEGIN();
    struct { jag_dtype in; double s; scalar_fn fn; jag_dtype want; } cases[] = {
        {JAG_FLOAT32, 2.5, jag_add_scalar, JAG_FLOAT32},   {JAG_FLOAT64, 2, jag_mul_scalar, JAG_FLOAT64},
        {JAG_INT32, 2, jag_add_scalar, JAG_INT32},         {JAG_INT32, 2.5, jag_add_scalar, JAG_FLOAT32},
        {JAG_INT64, -7, jag_sub_scalar, JAG_INT64},        {JAG_INT64, 0.5, jag_mul_scalar, JAG_FLOAT32},
        {JAG_BOOL, 2, jag_add_scalar, JAG_INT64},          {JAG_BOOL, 0.5, jag_mul_scalar, JAG_FLOAT32},
        {JAG_INT32, INFINITY, jag_add_scalar, JAG_FLOAT32}, {JAG_INT64, NAN, jag_maximum_scalar, JAG_FLOAT32},
        {JAG_INT32, 2, jag_div_scalar, JAG_FLOAT32},       {JAG_FLOAT64, 2, jag_div_scalar, JAG_FLOAT64},
        {JAG_BOOL, 1, jag_div_scalar, JAG_FLOAT32},        {JAG_INT32, 2, jag_pow_scalar, JAG_INT32},
        {JAG_INT32, 0.5, jag_pow_scalar, JAG_FLOAT32},     {JAG_INT64, 1.5, jag_lt_scalar, JAG_BOOL},
        {JAG_FLOAT32, 1, jag_eq_scalar, JAG_BOOL},         {JAG_INT32, 2147483647.0, jag_add_scalar, JAG_INT32},
    };
    int64_t sizes[] = {2};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        jag_tensor *x = NULL, *y = NULL;
        CHECK_OK(jag_ones(sizes, 1, cases[k].in, &x));
        CHECK_OK(cases[k].fn(x, cases[k].s, &y));
        CHECK_MSG(y && jag_tensor_dtype(y) == cases[k].want, "case %zu: %s with %g -> %s, expected %s", k,
                  jag_dtype_name(cases[k].in), cases[k].s, y ? jag_dtype_name(jag_tensor_dtype(y)) : "error",
                  jag_dtype_name(cases[k].want));
        jag_release(y);
        jag_release(x);
    }
}

/* 0-d with 0-d gives 0-d; empty inputs give empty outputs of the right
 * shape and dtype. */
static void test_zero_dim_and_empty(void) {
    TEST_BEGIN();
    jag_tensor *a = NULL, *b = NULL, *y = NULL;
    CHECK_OK(jag_full(NULL, 0, 3, JAG_INT32, &a));
    CHECK_OK(jag_full(NULL, 0, 0.5, JAG_FLOAT64, &b));
    CHECK_OK(jag_mul(a, b, &y));
    double v = 0;
    if (y) {
        CHECK(jag_ndim(y) == 0 && jag_tensor_dtype(y) == JAG_FLOAT64);
        CHECK_OK(jag_item(y, &v));
        CHECK(v == 1.5);
    }
    jag_release(y), y = NULL;
    CHECK_OK(jag_exp(a, &y));
    if (y) {
        CHECK(jag_ndim(y) == 0 && jag_tensor_dtype(y) == JAG_FLOAT32);
        CHECK_OK(jag_item(y, &v));
        CHECK_CLOSE(v, 20.085536923187668, 2e-5);
    }
    jag_release(y), y = NULL;
    jag_release(a), jag_release(b);

    int64_t e[] = {0, 3}, row[] = {3};
    CHECK_OK(jag_zeros(e, 2, JAG_INT32, &a));
    CHECK_OK(jag_ones(row, 1, JAG_FLOAT32, &b));
    CHECK_OK(jag_add(a, b, 1, &y));
    if (y) CHECK(jag_ndim(y) == 2 && jag_size(y, 0) == 0 && jag_size(y, 1) == 3 && jag_tensor_dtype(y) == JAG_FLOAT32);
    jag_release(y), y = NULL;
    CHECK_OK(jag_lt(b, a, &y));
    if (y) CHECK(jag_numel(y) == 0 && jag_tensor_dtype(y) == JAG_BOOL);
    jag_release(y), y = NULL;
    CHECK_OK(jag_sigmoid(a, &y));
    if (y) CHECK(jag_numel(y) == 0 && jag_tensor_dtype(y) == JAG_FLOAT32);
    jag_release(y), y = NULL;
    jag_release(a), jag_release(b);
}

/* Inputs are never written. */
static void test_inputs_untouched(void) {
    TEST_BEGIN();
    int64_t s[] = {4, 5};
    jag_tensor *a = t_rand(s, 2, JAG_FLOAT32, -3, 3, 1), *b = t_rand(s, 2, JAG_INT32, -3, 3, 2);
    jag_tensor *a0 = NULL, *b0 = NULL, *y = NULL;
    CHECK_OK(jag_clone(a, &a0));
    CHECK_OK(jag_clone(b, &b0));
    CHECK_OK(jag_add(a, b, 2, &y));
    jag_release(y), y = NULL;
    CHECK_OK(jag_gelu(b, &y));
    jag_release(y), y = NULL;
    CHECK(t_allclose(a, a0, 0, 0) && t_allclose(b, b0, 0, 0));
    jag_release(a), jag_release(b), jag_release(a0), jag_release(b0);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_errors(void) {
    TEST_BEGIN();
    int64_t s3[] = {3}, s4[] = {4}, s23[] = {2, 3};
    jag_tensor *a = NULL, *b = NULL, *c = NULL, *bi = NULL, *y = NULL;
    CHECK_OK(jag_ones(s3, 1, JAG_FLOAT32, &a));
    CHECK_OK(jag_ones(s4, 1, JAG_FLOAT32, &b));
    CHECK_OK(jag_ones(s23, 2, JAG_BOOL, &c));
    CHECK_OK(jag_ones(s3, 1, JAG_INT32, &bi));

    /* shapes that do not broadcast: both shapes named */
    CHECK_ERR(jag_add(a, b, 1, &y), JAG_ESHAPE, "jag_add");
    CHECK_ERR(jag_add(a, b, 1, &y), JAG_ESHAPE, "[3] and [4]");
    CHECK(y == NULL);
    for (int o = 0; o < N_BINARY; o++) {
        CHECK_ERR(binary_ops[o].fn(b, a, &y), JAG_ESHAPE, "[4] and [3]");
        CHECK(y == NULL);
    }
    CHECK_ERR(jag_where(c, a, b, &y), JAG_ESHAPE, "'cond' [2, 3], 'a' [3] and 'b' [4]");
    CHECK(y == NULL);
    CHECK_ERR(jag_where(c, b, b, &y), JAG_ESHAPE, "do not broadcast");
    CHECK(y == NULL);

    /* where's cond must be bool */
    CHECK_ERR(jag_where(bi, a, a, &y), JAG_EDTYPE, "argument 'cond' is int32, expected bool");
    CHECK(y == NULL);

    /* NULL arguments */
    CHECK_ERR(jag_neg(NULL, &y), JAG_EINVAL, "argument 'x' is NULL");
    CHECK_ERR(jag_exp(NULL, &y), JAG_EINVAL, "argument 'x' is NULL");
    CHECK_ERR(jag_add(NULL, a, 1, &y), JAG_EINVAL, "argument 'a' is NULL");
    CHECK_ERR(jag_add(a, NULL, 1, &y), JAG_EINVAL, "argument 'b' is NULL");
    CHECK_ERR(jag_div(a, NULL, &y), JAG_EINVAL, "argument 'b' is NULL");
    CHECK_ERR(jag_eq(NULL, a, &y), JAG_EINVAL, "argument 'a' is NULL");
    CHECK_ERR(jag_mul_scalar(NULL, 2, &y), JAG_EINVAL, "argument 'a' is NULL");
    CHECK_ERR(jag_where(NULL, a, a, &y), JAG_EINVAL, "argument 'cond' is NULL");
    CHECK_ERR(jag_where(c, NULL, a, &y), JAG_EINVAL, "argument 'a' is NULL");
    CHECK_ERR(jag_where(c, a, NULL, &y), JAG_EINVAL, "argument 'b' is NULL");
    CHECK(y == NULL);
    CHECK_ERR(jag_sin(a, NULL), JAG_EINVAL, "argument 'out' is NULL");
    CHECK_ERR(jag_add(a, a, 1, NULL), JAG_EINVAL, "argument 'out' is NULL");
    CHECK_ERR(jag_where(c, a, a, NULL), JAG_EINVAL, "argument 'out' is NULL");

    /* bool where torch refuses it */
    CHECK_ERR(jag_neg(c, &y), JAG_EDTYPE, "jag_neg: argument 'x' is bool");
    CHECK_ERR(jag_relu(c, &y), JAG_EDTYPE, "jag_relu: argument 'x' is bool");
    CHECK_ERR(jag_sub(c, c, &y), JAG_EDTYPE, "jag_sub: argument 'a' is bool");
    jag_tensor *cb = NULL;
    CHECK_OK(jag_ones(s3, 1, JAG_BOOL, &cb));
    CHECK_ERR(jag_sub(a, cb, &y), JAG_EDTYPE, "argument 'b' is bool");
    CHECK_ERR(jag_sub_scalar(cb, 1, &y), JAG_EDTYPE, "argument 'a' is bool");
    CHECK_ERR(jag_pow(cb, cb, &y), JAG_EDTYPE, "jag_pow");
    CHECK(y == NULL);

    /* alpha must be integral for integer results; integral scalars must fit */
    CHECK_ERR(jag_add(bi, bi, 0.5, &y), JAG_EINVAL, "argument 'alpha' is 0.5");
    CHECK_ERR(jag_add(cb, cb, 1.5, &y), JAG_EINVAL, "argument 'alpha'");
    CHECK_ERR(jag_add(bi, bi, 3e9, &y), JAG_EINVAL, "argument 'alpha'");
    CHECK_ERR(jag_add_scalar(bi, 3e9, &y), JAG_EINVAL, "argument 'b' is 3000000000, outside the range of int32");
    CHECK_ERR(jag_mul_scalar(cb, 1e19, &y), JAG_EINVAL, "outside the range of int64");
    CHECK(y == NULL);
    /* ... while floats take any alpha and comparisons any scalar */
    CHECK_OK(jag_add(a, a, 0.5, &y));
    jag_release(y), y = NULL;
    CHECK_OK(jag_eq_scalar(bi, 3e9, &y));
    jag_release(y), y = NULL;

    jag_release(a), jag_release(b), jag_release(c), jag_release(bi), jag_release(cb);
}

/* ---- parallel path ----------------------------------------------------------------------- */

/* Well above the largest grain (JAG_GRAIN_MEMORY), in shapes that split by rows (many rows)
 * and by columns (one long row). */
static void test_parallel_paths(void) {
    TEST_BEGIN();
    int64_t rows[] = {1024, 100}, row[] = {1, 100}, col[] = {1024, 1}, flat[] = {200001};
    jag_tensor *a = t_rand(rows, 2, JAG_FLOAT32, -4, 4, 1);
    jag_tensor *r1 = t_rand(row, 2, JAG_FLOAT32, -4, 4, 2), *c1 = t_rand(col, 2, JAG_FLOAT64, -4, 4, 3);
    jag_tensor *f = t_rand(flat, 1, JAG_FLOAT32, -4, 4, 4), *fi = t_rand(flat, 1, JAG_INT32, -100, 100, 5);
    struct { const char *what; jag_op_id op; const jag_tensor *x; jag_value b; } cases[] = {
        {"add rows+row", JAG_OP_add, a, jag__v_tensor(r1)},
        {"mul rows*col f64", JAG_OP_mul, a, jag__v_tensor(c1)},
        {"sub long row scalar", JAG_OP_sub, f, jag__v_double(0.25)},
        {"maximum long f32 with i32", JAG_OP_maximum, f, jag__v_tensor(fi)},
        {"lt long", JAG_OP_lt, fi, jag__v_tensor(f)},
        {"div long ints", JAG_OP_div, fi, jag__v_double(7)},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        jag_value args[3] = {jag__v_tensor(cases[k].x), cases[k].b, jag__v_double(1.0)};
        int nargs = cases[k].op == JAG_OP_add ? 3 : 2;
        jag_tensor *y = NULL, *r = NULL;
        CHECK_OK(jag__dispatch(cases[k].op, args, nargs, &y));
        CHECK_OK(jag__ref_binary(cases[k].op, args, nargs, &r));
        if (y && r) check_against_ref(y, r, cases[k].x, jag__ops[cases[k].op].name, cases[k].what);
        jag_release(y);
        jag_release(r);
    }
    jag_tensor *y = NULL, *r = NULL;
    jag_value arg = jag__v_tensor(f);
    CHECK_OK(jag_tanh(f, &y));
    CHECK_OK(jag__ref_unary(JAG_OP_tanh, &arg, 1, &r));
    if (y && r) check_against_ref(y, r, f, "tanh", "long row");
    jag_release(y), jag_release(r);
    jag_release(a), jag_release(r1), jag_release(c1), jag_release(f), jag_release(fi);
}

/* ---- float32 accuracy sweep ------------------------------------------------------------ */

/* The float32 exp, sigmoid, silu, tanh, gelu and gelu_tanh run SLEEF's
 * exp (exp, sigmoid, silu: src/cpu/sleef_unary.c, when the build has SLEEF)
 * or the branch-free approximations of src/cpu/vecmath.h (tanh, gelu,
 * gelu_tanh, and all six without SLEEF). Each is checked over every
 * 1001st finite float32 bit pattern (4.29e6 inputs: every binade of both
 * signs, the denormals included) plus special values and every bit pattern
 * within 300 of the points where a formula switches or the result overflows or
 * underflows, through the public op (the vectorised contiguous loop), against
 * a double reference. The error is |y - ref| in ulps of the float32 result
 * (2^-149 in the denormals); NaN must give NaN, a reference that rounds to
 * +-inf must give it exactly, and zeros must keep their sign. Each bound is
 * the maximum measured over a denser sweep (every bit pattern with |x| in
 * [2^-12, 128), every 7th of the rest, every one near those points), with and
 * without FMA (vecmath.h lists both).
 *
 * The references are the stable double forms, not jag__ref_unary's textbook
 * ones: in double too, 1 + erf(x / sqrt 2) cancels to 0 below x = -8.3 while
 * gelu(-8.3) = -4e-16 is far from 0 in float32. */

static double sweep_sigmoid(double x) {
    double e = exp(-fabs(x));
    return (x >= 0 ? 1.0 : e) / (1.0 + e);
}
static double sweep_exp(double x) { return exp(x); }
static double sweep_silu(double x) { return x * sweep_sigmoid(x); }
static double sweep_tanh(double x) { return tanh(x); }
static double sweep_gelu(double x) { return 0.5 * x * erfc(-x * 0.70710678118654752440); }
static double sweep_gelu_tanh(double x) {
    return x * sweep_sigmoid(2.0 * 0.79788456080286535588 * (x + 0.044715 * x * x * x));
}

/* The float32 ulp at |v|, a double. */
static double ulp_f32(double v) {
    v = fabs(v);
    if (v < 0x1p-126) return 0x1p-149;
    int e;
    frexp(v, &e);
    return ldexp(1.0, e - 24);
}

/* The error of y in float32 ulps of ref (INFINITY when a special value is
 * wrong). */
static double ulp_error(float y, double ref) {
    if (isnan(ref) || isnan(y)) return isnan(ref) && isnan(y) ? 0 : INFINITY;
    float rf = (float)ref;
    if (isinf(rf) || isinf(y)) return y == rf ? 0 : INFINITY;
    if (y == 0 && ref == 0 && !signbit(y) != !signbit(ref)) return INFINITY;
    return fabs((double)y - ref) / ulp_f32(ref);
}

static void test_float32_ulp_sweep(void) {
    TEST_BEGIN();
    static const struct {
        const char *name;
        unary_fn fn;
        double (*ref)(double);
        double max_ulp;
    } ops[] = {
        {"exp", jag_exp, sweep_exp, 1.01},          {"sigmoid", jag_sigmoid, sweep_sigmoid, 2.41},
        {"silu", jag_silu, sweep_silu, 2.75},       {"tanh", jag_tanh, sweep_tanh, 1.52},
        {"gelu", jag_gelu, sweep_gelu, 0.51},       {"gelu_tanh", jag_gelu_tanh, sweep_gelu_tanh, 0.57},
    };
    /* gelu with SLEEF: sleef_unary.c's float kernel, 5.0 ulp (every float
     * with |x| < 18 measured: 4.90; beyond, x itself or a zero) */
    double gelu_ulp = jag__unary_uses_sleef() ? 5.0 : 0.51;
    /* Switches and edges: exp's overflow, denormal and underflow thresholds,
     * tanh's polynomial, gelu's two forms, the clamps and selects. */
    static const float edges[] = {88.7228394f, -87.3365479f, -103.972076f, -103.278931f, -120.0f, 90.0f,
                                  0.625f,      -0.625f,      1.0f,         -1.0f,        -16.0f,  -20.0f,
                                  -14.5f,      -10.5f,       0x1p-126f,    -0x1p-126f,   0.0f,    -0.0f};
    static const float specials[] = {INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, 0x1p-149f, -0x1p-149f};
    enum { STRIDE = 1001, NEAR = 300 };
    int64_t cap = ((int64_t)1 << 32) / STRIDE + 1 + (int64_t)(sizeof edges / sizeof edges[0]) * (2 * NEAR + 1) +
                  (int64_t)(sizeof specials / sizeof specials[0]);
    float *xs = malloc((size_t)cap * sizeof *xs);
    CHECK(xs != NULL);
    if (!xs) return;
    int64_t n = 0;
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += STRIDE) {
        uint32_t bits = (uint32_t)u;
        if ((bits & 0x7f800000u) == 0x7f800000u) continue; /* inf and NaN: below */
        memcpy(&xs[n++], &bits, sizeof bits);
    }
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        uint32_t b;
        memcpy(&b, &edges[e], sizeof b);
        for (int d = -NEAR; d <= NEAR; d++) {
            uint32_t m = (b & 0x7fffffffu) + (uint32_t)d;
            if ((int)(b & 0x7fffffffu) + d < 0) continue;
            m |= b & 0x80000000u;
            memcpy(&xs[n++], &m, sizeof m);
        }
    }
    for (size_t e = 0; e < sizeof specials / sizeof specials[0]; e++) xs[n++] = specials[e];
    CHECK(n <= cap && n > 4000000);
    jag_tensor *x = NULL;
    CHECK_OK(jag_from_data(xs, &n, 1, JAG_FLOAT32, &x));
    for (size_t o = 0; x && o < sizeof ops / sizeof ops[0]; o++) {
        jag_tensor *y = NULL;
        CHECK_OK(ops[o].fn(x, &y));
        if (!y) continue;
        CHECK(jag_tensor_dtype(y) == JAG_FLOAT32 && jag_numel(y) == n && jag_is_contiguous(y));
        const float *ys = jag_data(y);
        double worst = 0;
        int64_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            double err = ulp_error(ys[i], ops[o].ref(xs[i]));
            if (!(err <= worst)) worst = err, at = i;
        }
        double bound = ops[o].fn == jag_gelu ? gelu_ulp : ops[o].max_ulp;
        CHECK_MSG(worst <= bound, "%s: %.3f ulp at x = %a (got %a, reference %a), bound %.2f", ops[o].name, worst,
                  xs[at], ys[at], ops[o].ref(xs[at]), bound);
        jag_release(y);
    }
    jag_release(x);
    free(xs);
}

/* The float64 exp, sigmoid, silu and tanh (vecmath.h too) against long
 * double references (64-bit significand on x86-64; skipped where long double
 * is no wider than double), in float64 ulps, over 2^20 inputs: uniform in
 * [-800, 800], [-40, 40] and [-1, 1], log-uniform magnitudes in [2^-60, 2^10)
 * of both signs, and random bit patterns, plus special values and the
 * overflow/underflow edges. Bounds: the maxima measured over 2^27 such
 * inputs, with and without FMA. */
static long double sweep_sigmoid_l(long double x) {
    long double e = expl(-fabsl(x));
    return (x >= 0 ? 1.0L : e) / (1.0L + e);
}
static long double sweep_exp_l(long double x) { return expl(x); }
static long double sweep_silu_l(long double x) { return x * sweep_sigmoid_l(x); }
static long double sweep_tanh_l(long double x) { return tanhl(x); }

static double ulp_error_f64(double y, long double ref) {
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

static void test_float64_ulp_sample(void) {
    TEST_BEGIN();
    if (LDBL_MANT_DIG < 64) return;
    /* The references are long double. Under valgrind long double arithmetic
     * runs in double precision, so the references are no better than the
     * kernels they check: say so and do not run the float64 sweep there (it
     * runs in `make test` and under the sanitizers). */
    volatile long double one = 1.0L, tiny = 0x1p-60L;
    if (one + tiny == one) {
        printf("test_float64_ulp_sample: long double has no extra precision in this run (valgrind); sweep not run\n");
        return;
    }
    static const struct {
        const char *name;
        unary_fn fn;
        long double (*ref)(long double);
        double max_ulp;
    } ops[] = {
        {"exp", jag_exp, sweep_exp_l, 1.01}, {"sigmoid", jag_sigmoid, sweep_sigmoid_l, 2.39},
        {"silu", jag_silu, sweep_silu_l, 2.75}, {"tanh", jag_tanh, sweep_tanh_l, 1.52},
    };
    static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, DBL_MAX, -DBL_MAX, DBL_MIN, -DBL_MIN,
                                      0x1p-1074, -0x1p-1074, 709.782712893384, 709.7827128933841,
                                      -708.3964185322641, -744.44007192138122, -745.1332191019411,
                                      -745.1332191019412, -760.0, -760.0000000000001, 0.625, -0.625, 1e-300};
    enum { N_RAND = 1 << 20 };
    int64_t n = N_RAND + (int64_t)(sizeof specials / sizeof specials[0]);
    double *xs = malloc((size_t)n * sizeof *xs);
    CHECK(xs != NULL);
    if (!xs) return;
    uint64_t st = 0x9e3779b97f4a7c15u;
    for (int64_t i = 0; i < N_RAND; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        double uni = (double)(st >> 11) * 0x1p-53;
        switch (i % 5) {
        case 0: xs[i] = uni * 1600 - 800; break;
        case 1: xs[i] = uni * 80 - 40; break;
        case 2: xs[i] = uni * 2 - 1; break;
        case 3: xs[i] = ldexp(1.0 + uni, (int)(st % 70) - 60) * (st & 1 ? -1 : 1); break;
        default: memcpy(&xs[i], &st, sizeof st); break;
        }
    }
    memcpy(xs + N_RAND, specials, sizeof specials);
    jag_tensor *x = NULL;
    CHECK_OK(jag_from_data(xs, &n, 1, JAG_FLOAT64, &x));
    for (size_t o = 0; x && o < sizeof ops / sizeof ops[0]; o++) {
        jag_tensor *y = NULL;
        CHECK_OK(ops[o].fn(x, &y));
        if (!y) continue;
        const double *ys = jag_data(y);
        double worst = 0;
        int64_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            double err = ulp_error_f64(ys[i], ops[o].ref(xs[i]));
            if (!(err <= worst)) worst = err, at = i;
        }
        CHECK_MSG(worst <= ops[o].max_ulp, "%s: %.3f ulp at x = %a (got %a), bound %.2f", ops[o].name, worst, xs[at],
                  ys[at], ops[o].max_ulp);
        jag_release(y);
    }
    jag_release(x);
    free(xs);
}

/* Whether a and b (one shape) hold the same values, NaN equal to NaN. */
static bool same_values(const jag_tensor *a, const jag_tensor *b) {
    if (!t_same_shape(a, b)) return false;
    for (int64_t i = 0; i < jag_numel(a); i++) {
        double u = t_get(a, i), v = t_get(b, i);
        if (!(u == v || (isnan(u) && isnan(v)))) return false;
    }
    return true;
}

/* The typed kernels below the dispatcher, called directly: into an output
 * the caller gives, that output being the input itself (the in-place ops'
 * fast path), against the typed references on a copy of the input. The
 * ops chosen round once from exact double values, so kernel and reference
 * agree bit for bit: square (x * x), leaky_relu (x * slope, the slope
 * rounded to float32 first, as torch converts it), mul, and gt against a
 * scalar (bool out, compared in float64). */
static void test_typed_kernels_in_place(void) {
    int64_t sz[2] = {37, 5}, row[1] = {5};
    jag_tensor *x = t_rand(sz, 2, JAG_FLOAT32, -3, 3, 71), *b = t_rand(row, 1, JAG_FLOAT32, -2, 2, 72);
    jag_tensor *y = NULL, *ref = NULL;
    /* square, in place */
    CHECK_OK(jag_clone(x, &y));
    CHECK_OK(jag_zeros(sz, 2, JAG_FLOAT32, &ref));
    jag__unary_reference(JAG_UNARY_square, x, NULL, ref);
    CHECK_OK(jag__unary_kernel("test", JAG_UNARY_square, y, NULL, y));
    CHECK_MSG(same_values(y, ref), "square in place differs from its reference");
    jag_release(y), jag_release(ref), y = ref = NULL;
    /* leaky_relu(x, 0.1), in place: the slope rounded through float32 */
    const double slope[1] = {0.1};
    CHECK_OK(jag_clone(x, &y));
    CHECK_OK(jag_zeros(sz, 2, JAG_FLOAT32, &ref));
    jag__unary_reference(JAG_UNARY_leaky_relu, x, slope, ref);
    CHECK_OK(jag__unary_kernel("test", JAG_UNARY_leaky_relu, y, slope, y));
    CHECK_MSG(same_values(y, ref), "leaky_relu in place differs from its reference");
    for (int64_t i = 0; i < jag_numel(x); i++) {
        double v = t_get(x, i), want = v > 0 ? v : (double)(float)(v * (double)(float)0.1);
        CHECK_MSG(t_get(ref, i) == want, "leaky_relu reference at %lld: %g, expected %g", (long long)i, t_get(ref, i), want);
    }
    jag_release(y), jag_release(ref), y = ref = NULL;
    /* mul with b broadcast over rows, into x's copy */
    CHECK_OK(jag_clone(x, &y));
    CHECK_OK(jag_zeros(sz, 2, JAG_FLOAT32, &ref));
    jag__binary_reference(JAG_BINARY_mul, x, b, 0, 1, JAG_FLOAT32, ref);
    CHECK_OK(jag__binary_kernel("test", JAG_BINARY_mul, y, b, 0, 1, JAG_FLOAT32, y));
    CHECK_MSG(same_values(y, ref), "mul in place differs from its reference");
    for (int64_t i = 0; i < jag_numel(x); i++)
        CHECK(t_get(ref, i) == (double)(float)(t_get(x, i) * t_get(b, i % 5)));
    jag_release(y), jag_release(ref), y = ref = NULL;
    /* gt against the scalar 0.25, compared in float64, into a bool output */
    CHECK_OK(jag_zeros(sz, 2, JAG_BOOL, &y));
    CHECK_OK(jag_zeros(sz, 2, JAG_BOOL, &ref));
    jag__binary_reference(JAG_BINARY_gt, x, NULL, 0.25, 1, JAG_FLOAT64, ref);
    CHECK_OK(jag__binary_kernel("test", JAG_BINARY_gt, x, NULL, 0.25, 1, JAG_FLOAT64, y));
    CHECK_MSG(same_values(y, ref), "gt against a scalar differs from its reference");
    for (int64_t i = 0; i < jag_numel(x); i++) CHECK(t_get(ref, i) == (t_get(x, i) > 0.25));
    jag_release(y), jag_release(ref);
    jag_release(x), jag_release(b);
}

TEST_MAIN(test_activation_backward_ops, test_output_activation_backward_ops, test_logsigmoid_softplus_backward_ops,
          test_hard_activation_backward_ops, test_pow_scalar_f32, test_unary_vs_reference, test_unary_hand_values, test_param_unary_vs_reference, test_more_unary_hand_values, test_unary_integer_wrap, test_unary_dtypes,
          test_binary_dtype_pairs, test_binary_layouts, test_binary_scalars, test_add_alpha, test_binary_hand_values,
          test_binary_integer_wrap, test_where, test_clamp, test_broadcast_shapes, test_scalar_dtypes, test_zero_dim_and_empty,
          test_inputs_untouched, test_errors, test_parallel_paths, test_float32_ulp_sweep,
          test_float64_ulp_sample, test_typed_kernels_in_place)
