/*
 * mpi_ddp_half.c — jag_ddp over float16 and bfloat16 parameters.
 *
 * torch's DDP all-reduces a bf16 / fp16 gradient bucket in the gradients'
 * dtype; jag does too: the bucket travels as 2-byte values, each pairwise
 * sum is made in float32 and rounded to the dtype, and the average is the
 * sum divided by the world size in float32, rounded once. So where the
 * ranks' gradients sum exactly in the dtype (few significant bits), the
 * averaged gradient is exactly round(float32(sum) / p); elsewhere it is
 * within the roundings of the p - 1 sums and the division.
 *
 * The reference is computed here, independently of jag's conversions: the
 * ranks' gradients are a formula of the rank and the element, rounded to
 * the dtype by round_to() below (round to nearest, ties to even, on the
 * exact value), summed in double (exact for these values) and divided.
 * A bucket never mixes dtypes: float32 and bfloat16 parameters side by side
 * land in separate buckets, each averaged in its own dtype.
 */
#include "mpi_harness.h"

#include <math.h>

enum { NE = 6 };

/* x rounded to nearest (ties to even) with `bits` significant bits and
 * normal exponents down to emin (below: the subnormal spacing of emin);
 * float16: 11 bits, emin -14; bfloat16: 8 bits, emin -126. No overflow
 * for the values used here. */
static double round_to(double x, jag_dtype d) {
    int bits = d == JAG_FLOAT16 ? 11 : d == JAG_BFLOAT16 ? 8 : 24;
    int emin = d == JAG_FLOAT16 ? -14 : -126;
    if (x == 0 || !isfinite(x)) return x;
    int ex = 0;
    frexp(x, &ex); /* |x| = m 2^ex, m in [0.5, 1): leading bit 2^(ex - 1) */
    int lead = ex - 1 < emin ? emin : ex - 1;
    double ulp = ldexp(1.0, lead - (bits - 1));
    return nearbyint(x / ulp) * ulp; /* the default rounding mode: ties to even */
}

/* the dtype's unit roundoff */
static double unit(jag_dtype d) { return ldexp(1.0, d == JAG_FLOAT16 ? -11 : d == JAG_BFLOAT16 ? -8 : -24); }

/* Rank r's gradient of parameter k, element e. exact: multiples of 1/8 in
 * [-1, 1] (sums over 3 ranks need 5 significant bits, exact in both half
 * types); otherwise values with every bit of the dtype used. */
static double grad_value(int r, int k, int64_t e, jag_dtype d, bool exact) {
    if (exact) return (double)((r * 5 + (int)e * 3 + k * 7) % 17 - 8) / 8.0;
    return round_to(sin(1.3 * r + 0.7 * (double)e + 0.37 * k + 0.1) * (1.0 + (double)e), d);
}

static jag_tensor *values_tensor(int r, int k, jag_dtype d, bool exact) {
    double v[NE];
    for (int64_t e = 0; e < NE; e++) v[e] = grad_value(r, k, e, d, exact);
    return t_from(v, (int64_t[]){NE}, 1, d);
}

static jag_tensor *param_of(jag_dtype d) {
    double v[NE] = {0.5, -1.0, 2.0, 0.25, 3.0, -0.125};
    jag_tensor *p = t_from(v, (int64_t[]){NE}, 1, d);
    jag_set_requires_grad(p, true);
    return p;
}

/* backward of sum(p * w) with w rank r's gradient: p's gradient is w, exactly */
static void backward_with(jag_tensor *p, int k, jag_dtype d, bool exact) {
    jag_tensor *w = values_tensor(jag_dist_rank(), k, d, exact), *prod = NULL, *s = NULL;
    CHECK_OK(jag_mul(p, w, &prod));
    CHECK_OK(jag_sum(prod, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    jag_release(s), jag_release(prod), jag_release(w);
}

/* p_k's gradient against the reference: the average over the ranks in
 * `used` (bit q: rank q has a gradient; the others count as zeros). */
static void check_average(jag_tensor *p, int k, jag_dtype d, bool exact, unsigned used, int line) {
    int np = jag_dist_world_size();
    jag_tensor *g = NULL;
    CHECK_OK(jag_get_grad(p, &g));
    if (!used) { /* a gradient on no rank: the parameter keeps none */
        CHECK_MSG(!g, "line %d: param %d has a gradient; none expected", line, k);
        jag_release(g);
        return;
    }
    CHECK_MSG(g && jag_tensor_dtype(g) == d, "line %d: param %d: no gradient of dtype %s", line, k, jag_dtype_name(d));
    for (int64_t e = 0; g && e < NE; e++) {
        double sum = 0, abs_sum = 0;
        for (int q = 0; q < np; q++)
            if (used >> q & 1) sum += grad_value(q, k, e, d, exact), abs_sum += fabs(grad_value(q, k, e, d, exact));
        double got = t_get(g, e);
        if (d == JAG_FLOAT32) {
            double want = (double)((float)sum / (float)np);
            CHECK_MSG(fabs(got - want) <= 4 * unit(d) * abs_sum, "line %d: %s param %d [%lld]: %.9g, expected %.9g",
                      line, jag_dtype_name(d), k, (long long)e, got, want);
        } else if (exact) {
            /* the sum is exact: the float32 average rounded once */
            double want = round_to((double)((float)sum / (float)np), d);
            CHECK_MSG(got == want, "line %d: %s param %d [%lld]: %.9g, expected %.9g (sum %g / %d rounded once)", line,
                      jag_dtype_name(d), k, (long long)e, got, want, sum, np);
        } else {
            /* p - 1 rounded sums (each within u of its partial sum, at
             * most abs_sum), over p; the division's float32 rounding and
             * the rounding of the quotient to the dtype */
            double e_sum = unit(d) * (np - 1) * abs_sum / np;
            double tol = e_sum + unit(d) * (fabs(sum) / np + e_sum) + ldexp(abs_sum, -23);
            CHECK_MSG(fabs(got - sum / np) <= tol, "line %d: %s param %d [%lld]: %.9g, expected %.9g within %g", line,
                      jag_dtype_name(d), k, (long long)e, got, sum / np, tol);
        }
    }
    jag_release(g);
}

/* Buckets of one dtype each: float32, bfloat16, bfloat16, float16, float32
 * in reverse order with room for all: {4}, {3}, {2, 1}, {0}. */
static void test_buckets_never_mix_dtypes(void) {
    TEST_BEGIN();
    jag_dtype dts[5] = {JAG_FLOAT32, JAG_BFLOAT16, JAG_BFLOAT16, JAG_FLOAT16, JAG_FLOAT32};
    jag_tensor *p[5];
    for (int k = 0; k < 5; k++) p[k] = param_of(dts[k]);
    jag_ddp *ddp = NULL;
    CHECK_OK(jag_ddp_new(p, 5, 0, &ddp));
    int want_n[4] = {1, 1, 2, 1}, want_idx[4][2] = {{4}, {3}, {2, 1}, {0}};
    CHECK(jag_ddp_num_buckets(ddp) == 4);
    for (int b = 0; b < 4 && jag_ddp_num_buckets(ddp) == 4; b++) {
        const int *idx = NULL;
        int n = 0;
        CHECK_OK(jag_ddp_bucket_params(ddp, b, &idx, &n));
        CHECK_MSG(n == want_n[b], "bucket %d has %d parameters, expected %d", b, n, want_n[b]);
        for (int j = 0; j < n && n == want_n[b]; j++) CHECK(idx[j] == want_idx[b][j]);
    }
    CHECK_OK(jag_ddp_free(ddp));
    for (int k = 0; k < 5; k++) jag_release(p[k]);
}

/* Averaging during backward (the hooks) and by jag_ddp_sync_grads, for
 * float32 beside bfloat16 and float16, exact and inexact sums; in the
 * explicit path rank 0 gives parameter 1 no gradient (zeros there). */
static void run_average(bool exact, bool hooks) {
    int np = jag_dist_world_size();
    unsigned all = (1u << np) - 1;
    jag_dtype dts[4] = {JAG_FLOAT32, JAG_BFLOAT16, JAG_FLOAT16, JAG_BFLOAT16};
    jag_tensor *p[4];
    for (int k = 0; k < 4; k++) p[k] = param_of(dts[k]);
    jag_ddp *ddp = NULL;
    CHECK_OK(jag_ddp_new(p, 4, 0, &ddp));
    CHECK(jag_ddp_num_buckets(ddp) == 4); /* {3}, {2}, {1}, {0}: no two neighbours share a dtype */
    if (!hooks) CHECK_OK(jag_ddp_set_require_sync(ddp, false));
    for (int k = 0; k < 4; k++)
        if (hooks || !(k == 1 && jag_dist_rank() == 0)) backward_with(p[k], k, dts[k], exact);
    if (!hooks) {
        CHECK_OK(jag_ddp_set_require_sync(ddp, true));
        CHECK_OK(jag_ddp_sync_grads(ddp));
    }
    for (int k = 0; k < 4; k++) check_average(p[k], k, dts[k], exact, !hooks && k == 1 ? all & ~1u : all, __LINE__);
    CHECK_OK(jag_ddp_free(ddp));
    for (int k = 0; k < 4; k++) jag_release(p[k]);
}

static void test_average_in_backward_exact(void) {
    TEST_BEGIN();
    run_average(true, true);
}

static void test_average_in_backward_inexact(void) {
    TEST_BEGIN();
    run_average(false, true);
}

static void test_average_explicit_exact(void) {
    TEST_BEGIN();
    run_average(true, false);
}

static void test_average_explicit_inexact(void) {
    TEST_BEGIN();
    run_average(false, false);
}

/* The reference's rounding, checked on values worked by hand. */
static void test_round_to(void) {
    TEST_BEGIN();
    CHECK(round_to(1.0 + ldexp(1.0, -8), JAG_BFLOAT16) == 1.0);                       /* tie: even */
    CHECK(round_to(1.0 + 3 * ldexp(1.0, -8), JAG_BFLOAT16) == 1.0 + ldexp(1.0, -6)); /* tie: even, up */
    CHECK(round_to(1.0 / 3.0, JAG_BFLOAT16) == 171 * ldexp(1.0, -9));                /* 0.333984375 */
    CHECK(round_to(1.0 / 3.0, JAG_FLOAT16) == 0x555 * ldexp(1.0, -12));              /* 0.33325195 */
    CHECK(round_to(ldexp(3.0, -26), JAG_FLOAT16) == ldexp(1.0, -24));                /* subnormal: 0.75 ulp up */
    CHECK(round_to(ldexp(3.0, -25), JAG_FLOAT16) == ldexp(1.0, -23));                /* subnormal tie: even (2) */
}

MPI_TEST_MAIN(test_round_to, test_buckets_never_mix_dtypes, test_average_in_backward_exact,
              test_average_in_backward_inexact, test_average_explicit_exact, test_average_explicit_inexact)
