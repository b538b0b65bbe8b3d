/* test_norm.c — softmax, log_softmax, layer_norm, rms_norm: hand-computed
 * values, the fast kernels against the naive references (jag__ref_*, same
 * boxed arguments) and against float64 references computed here, over dims,
 * dtypes, layouts and sizes; stability for large inputs; error paths. */
#include "test.h"

#include "dispatch/dispatch.h"

typedef jag_status (*kern_fn)(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_softmax(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_log_softmax(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_layer_norm(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_rms_norm(const char *, const jag_value *, int, jag_tensor **);

/* Run the reference for `op` into an output made from the META spec. */
static jag_status run_ref(jag_op_id op, kern_fn ref, const jag_value *args, int nargs, jag_tensor **out) {
    const jag_op_info *info = &jag__ops[op];
    jag_spec spec;
    jag_status st = info->meta(info->api_name, args, nargs, &spec);
    if (st) return st;
    *out = jag__tensor_from_spec(info->api_name, &spec, false);
    return ref(info->api_name, args, nargs, out);
}

static jag_tensor *variant(const jag_tensor *x, int v) {
    if (v == 1) return t_noncontig(x);
    if (v == 2) return t_sliced(x);
    return jag_retain((jag_tensor *)x);
}

static bool values_are(const jag_tensor *t, const double *vals, double tol) {
    for (int64_t i = 0; i < jag_numel(t); i++) {
        double a = t_get(t, i);
        if ((isnan(a) && isnan(vals[i])) || a == vals[i]) continue;
        if (!(fabs(a - vals[i]) <= tol)) {
            fprintf(stderr, "values_are: element %lld: %.9g vs %.9g\n", (long long)i, a, vals[i]);
            return false;
        }
    }
    return true;
}

/* ---- softmax ---------------------------------------------------------------- */

/* Softmax along dim computed here in float64 from t_get (independent of the
 * library's reference), compared with y; rows must also sum to 1. */
static bool softmax_matches_f64(const jag_tensor *x, int dim, const jag_tensor *y, bool log_out, double tol) {
    int nd = jag_ndim(x);
    if (nd == 0) return fabs(t_get(y, 0) - (log_out ? 0.0 : 1.0)) <= tol;
    if (dim < 0) dim += nd;
    int64_t O = 1, R = jag_size(x, dim), I = 1;
    for (int d = 0; d < dim; d++) O *= jag_size(x, d);
    for (int d = dim + 1; d < nd; d++) I *= jag_size(x, d);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            double m = -INFINITY, s = 0, total = 0;
            for (int64_t r = 0; r < R; r++) m = fmax(m, t_get(x, (o * R + r) * I + i));
            for (int64_t r = 0; r < R; r++) s += exp(t_get(x, (o * R + r) * I + i) - m);
            for (int64_t r = 0; r < R; r++) {
                int64_t k = (o * R + r) * I + i;
                double want = log_out ? t_get(x, k) - m - log(s) : exp(t_get(x, k) - m) / s;
                double got = t_get(y, k);
                total += log_out ? exp(got) : got;
                if (!(fabs(got - want) <= tol * (1 + fabs(want)))) {
                    fprintf(stderr, "softmax element %lld: %.9g vs %.9g\n", (long long)k, got, want);
                    return false;
                }
            }
            if (R > 0 && !(fabs(total - 1) <= tol * (double)R)) {
                fprintf(stderr, "softmax line (%lld, %lld) sums to %.12g\n", (long long)o, (long long)i, total);
                return false;
            }
        }
    return true;
}

static void check_softmax(const jag_tensor *x, int dim, bool log_out, bool with_f64) {
    jag_tensor *y = NULL, *ref = NULL;
    jag_status st = log_out ? jag_log_softmax(x, dim, &y) : jag_softmax(x, dim, &y);
    jag_value args[2] = {jag__v_tensor(x), jag__v_int(dim)};
    jag_status rst = run_ref(log_out ? JAG_OP_log_softmax : JAG_OP_softmax,
                             log_out ? jag__ref_log_softmax : jag__ref_softmax, args, 2, &ref);
    CHECK_MSG(st == JAG_OK && rst == JAG_OK, "softmax dim %d: %s", dim, jag_last_error());
    if (y && ref) {
        bool f32 = jag_tensor_dtype(x) == JAG_FLOAT32;
        CHECK(jag_tensor_dtype(y) == jag_tensor_dtype(x) && t_same_shape(y, x));
        CHECK_MSG(t_allclose(y, ref, f32 ? 2e-6 : 1e-13, f32 ? 1e-7 : 1e-15), "%s dim %d (%s)",
                  log_out ? "log_softmax" : "softmax", dim, jag_dtype_name(jag_tensor_dtype(x)));
        if (with_f64)
            CHECK_MSG(softmax_matches_f64(x, dim, y, log_out, f32 ? 2e-6 : 1e-13), "%s dim %d vs float64",
                      log_out ? "log_softmax" : "softmax", dim);
    }
    jag_release(y);
    jag_release(ref);
}

static void test_softmax_hand(void) {
    TEST_BEGIN();
    const double v[] = {1, 2, 3};
    const int64_t s[] = {3};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        double tol = f ? 1e-15 : 1e-7;
        jag_tensor *x = t_from(v, s, 1, dt), *y = NULL;
        CHECK_OK(jag_softmax(x, 0, &y));
        const double want[] = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
        CHECK(values_are(y, want, tol));
        jag_release(y);
        CHECK_OK(jag_log_softmax(x, -1, &y));
        const double lwant[] = {-2.4076059644443806, -1.4076059644443806, -0.4076059644443806};
        CHECK(values_are(y, lwant, f ? 1e-15 : 3e-7));
        jag_release(y);
        jag_release(x);
        /* large magnitudes do not overflow */
        const double big[] = {1000, -1000, 0, 1000};
        const int64_t s4[] = {4};
        x = t_from(big, s4, 1, dt);
        CHECK_OK(jag_softmax(x, 0, &y));
        const double bw[] = {0.5, 0, 0, 0.5};
        CHECK(values_are(y, bw, 1e-300));
        jag_release(y);
        CHECK_OK(jag_log_softmax(x, 0, &y));
        const double lbw[] = {-log(2.0), -2000 - log(2.0), -1000 - log(2.0), -log(2.0)};
        CHECK(values_are(y, lbw, f ? 1e-12 : 1e-4));
        jag_release(y);
        jag_release(x);
        /* NaN poisons its line only; -inf gets probability 0; an all -inf
         * line is NaN (0/0), as torch */
        const double nv[] = {1, NAN, 2, 0, -INFINITY, 0, -INFINITY, -INFINITY, -INFINITY};
        const int64_t s33[] = {3, 3};
        x = t_from(nv, s33, 2, dt);
        CHECK_OK(jag_softmax(x, 1, &y));
        const double nw[] = {NAN, NAN, NAN, 0.5, 0, 0.5, NAN, NAN, NAN};
        CHECK(values_are(y, nw, tol));
        jag_release(y);
        jag_release(x);
        /* the same specials down dim 0 (the online tile path) and along
         * dim 1 of the transpose (rows); columns: NaN, -inf in the middle,
         * all -inf, -inf before the max */
        const double cv[] = {1, 0, -INFINITY, -INFINITY, NAN, -INFINITY, -INFINITY, -INFINITY,
                             2, 0, -INFINITY, 1};
        const int64_t s34[] = {3, 4};
        x = t_from(cv, s34, 2, dt);
        jag_tensor *xt = NULL, *yt = NULL;
        CHECK_OK(jag_transpose(x, 0, 1, &xt));
        const double L2 = log(2.0);
        const double cw[] = {NAN, 0.5, NAN, 0, NAN, 0, NAN, 0, NAN, 0.5, NAN, 1};
        const double lcw[] = {NAN, -L2, NAN, -INFINITY, NAN, -INFINITY, NAN, -INFINITY, NAN, -L2, NAN, 0};
        CHECK_OK(jag_softmax(x, 0, &y));
        CHECK(values_are(y, cw, tol));
        CHECK_OK(jag_softmax(xt, 1, &yt));
        for (int i = 0; i < 12; i++) {
            double a = t_get(yt, (i % 4) * 3 + i / 4);
            CHECK_MSG((isnan(a) && isnan(cw[i])) || fabs(a - cw[i]) <= tol, "row path element %d: %g", i, a);
        }
        jag_release(y), jag_release(yt);
        CHECK_OK(jag_log_softmax(x, 0, &y));
        CHECK(values_are(y, lcw, f ? 1e-15 : 1e-7));
        CHECK_OK(jag_log_softmax(xt, 1, &yt));
        for (int i = 0; i < 12; i++) {
            double a = t_get(yt, (i % 4) * 3 + i / 4);
            CHECK_MSG((isnan(a) && isnan(lcw[i])) || a == lcw[i] || fabs(a - lcw[i]) <= 1e-7, "row path element %d: %g", i, a);
        }
        jag_release(y), jag_release(yt), jag_release(xt), jag_release(x);
        /* exp accuracy across its range: softmax([0, -t]) = 1 / (1 + e^-t) */
        double tv[2 * 200];
        for (int i = 0; i < 200; i++) tv[2 * i] = 0, tv[2 * i + 1] = -0.37 * i;
        const int64_t s200[] = {200, 2};
        x = t_from(tv, s200, 2, dt);
        CHECK_OK(jag_softmax(x, 1, &y));
        for (int i = 0; i < 200; i++) {
            double t = (double)(float)(0.37 * i), p = f ? 1 / (1 + exp(-0.37 * i)) : 1 / (1 + exp(-t));
            double q = f ? exp(-0.37 * i) / (1 + exp(-0.37 * i)) : exp(-t) / (1 + exp(-t));
            CHECK_MSG(fabs(t_get(y, 2 * i) - p) <= (f ? 4e-16 : 2e-7) * p, "p0 at t=%g", 0.37 * i);
            if (q > (f ? 1e-300 : 1e-37))
                CHECK_MSG(fabs(t_get(y, 2 * i + 1) - q) <= (f ? 1e-15 : 4e-7) * q, "p1 at t=%g: %.9g vs %.9g", 0.37 * i,
                          t_get(y, 2 * i + 1), q);
        }
        jag_release(y);
        jag_release(x);
    }
}

static void test_softmax_vs_ref(void) {
    TEST_BEGIN();
    const int64_t s3[] = {4, 5, 6}, s4[] = {2, 1, 3, 17};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_rand(s3, 3, dt, -5, 5, 71), *x4 = t_rand(s4, 4, dt, -3, 3, 72);
        for (int v = 0; v < 3; v++) {
            jag_tensor *a = variant(x, v), *b = variant(x4, v);
            for (int lg = 0; lg < 2; lg++) {
                for (int d = -3; d < 3; d++) check_softmax(a, d, lg, true);
                for (int d = 0; d < 4; d++) check_softmax(b, d, lg, true);
            }
            jag_release(a), jag_release(b);
        }
        /* broadcast inputs */
        const int64_t s1[] = {1, 5, 6}, s451[] = {4, 5, 1};
        jag_tensor *sm = t_rand(s1, 3, dt, -2, 2, 73), *sm2 = t_rand(s451, 3, dt, -2, 2, 74), *e = NULL, *e2 = NULL;
        CHECK_OK(jag_expand(sm, s3, 3, &e));
        CHECK_OK(jag_expand(sm2, s3, 3, &e2));
        for (int d = 0; d < 3; d++) check_softmax(e, d, false, true), check_softmax(e2, d, true, true);
        jag_release(e), jag_release(e2), jag_release(sm), jag_release(sm2);
        /* large values everywhere */
        jag_tensor *big = t_rand(s3, 3, dt, -3000, 3000, 75);
        for (int d = 0; d < 3; d++) check_softmax(big, d, false, true), check_softmax(big, d, true, true);
        jag_release(big);
        jag_release(x), jag_release(x4);
    }
}

static void test_softmax_large(void) {
    TEST_BEGIN();
    const int64_t s[] = {200, 300}, s3[] = {40, 30, 50}, s1[] = {1, 100000};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_rand(s, 2, dt, -10, 10, 81), *y = t_rand(s3, 3, dt, -10, 10, 82), *z = t_rand(s1, 2, dt, -10, 10, 83);
        for (int lg = 0; lg < 2; lg++) {
            check_softmax(x, 0, lg, false);
            check_softmax(x, 1, lg, false);
            for (int d = 0; d < 3; d++) check_softmax(y, d, lg, false);
            check_softmax(z, 1, lg, false);
            jag_tensor *nc = t_noncontig(y);
            check_softmax(nc, 1, lg, false);
            jag_release(nc);
        }
        jag_release(x), jag_release(y), jag_release(z);
    }
}

static void test_softmax_empty_0d(void) {
    TEST_BEGIN();
    const int64_t s05[] = {0, 5}, s30[] = {3, 0};
    jag_tensor *x = NULL, *y = NULL;
    CHECK_OK(jag_empty(s05, 2, JAG_FLOAT32, &x));
    CHECK_OK(jag_softmax(x, 1, &y));
    CHECK(t_same_shape(x, y));
    jag_release(y), jag_release(x);
    CHECK_OK(jag_empty(s30, 2, JAG_FLOAT64, &x));
    CHECK_OK(jag_log_softmax(x, 0, &y));
    CHECK(t_same_shape(x, y));
    jag_release(y), jag_release(x);
    CHECK_OK(jag_full(NULL, 0, 7.0, JAG_FLOAT32, &x));
    CHECK_OK(jag_softmax(x, 0, &y));
    CHECK(jag_ndim(y) == 0 && t_get(y, 0) == 1.0);
    jag_release(y);
    CHECK_OK(jag_log_softmax(x, -1, &y));
    CHECK(jag_ndim(y) == 0 && t_get(y, 0) == 0.0);
    jag_release(y), jag_release(x);
    /* size-1 softmax dim */
    const int64_t s31[] = {3, 1};
    x = t_rand(s31, 2, JAG_FLOAT64, -1, 1, 84);
    CHECK_OK(jag_softmax(x, 1, &y));
    const double ones[] = {1, 1, 1};
    CHECK(values_are(y, ones, 0));
    jag_release(y), jag_release(x);
}

static void test_softmax_errors(void) {
    TEST_BEGIN();
    const int64_t s[] = {2, 3};
    jag_tensor *xi = NULL, *x = NULL, *y = NULL;
    CHECK_OK(jag_zeros(s, 2, JAG_INT32, &xi));
    CHECK_OK(jag_zeros(s, 2, JAG_FLOAT32, &x));
    long live = jag__live_tensors();
    CHECK_ERR(jag_softmax(xi, 1, &y), JAG_EDTYPE, "jag_softmax: argument 'x' has dtype int32");
    CHECK_ERR(jag_log_softmax(xi, 1, &y), JAG_EDTYPE, "jag_log_softmax");
    CHECK_ERR(jag_softmax(x, 2, &y), JAG_ERANGE, "jag_softmax: argument 'dim' is 2");
    CHECK_ERR(jag_log_softmax(x, -3, &y), JAG_ERANGE, "expected a dim in [-2, 1]");
    CHECK_ERR(jag_softmax(NULL, 0, &y), JAG_EINVAL, "NULL");
    CHECK_ERR(jag_softmax(x, 0, NULL), JAG_EINVAL, "out");
    CHECK(y == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(xi), jag_release(x);
}

/* ---- layer_norm / rms_norm ------------------------------------------------------ */

/* kappa: the condition number of the data, max|x| / std (1 for centred
 * data): float64 results carry an error of about kappa * 1e-16 in any
 * algorithm, the reference's included. float32 results are computed in
 * float64 and rounded once. */
static void check_norm_k(bool layer, const jag_tensor *x, int nd, const jag_tensor *w, const jag_tensor *b, double eps,
                         double kappa) {
    jag_tensor *y = NULL, *ref = NULL;
    jag_status st = layer ? jag_layer_norm(x, nd, w, b, eps, &y) : jag_rms_norm(x, nd, w, eps, &y);
    jag_value args[5] = {jag__v_tensor(x), jag__v_int(nd), jag__v_tensor(w)};
    int nargs;
    if (layer) args[3] = jag__v_tensor(b), args[4] = jag__v_double(eps), nargs = 5;
    else args[3] = jag__v_double(eps), nargs = 4;
    jag_status rst = run_ref(layer ? JAG_OP_layer_norm : JAG_OP_rms_norm, layer ? jag__ref_layer_norm : jag__ref_rms_norm,
                             args, nargs, &ref);
    CHECK_MSG(st == JAG_OK && rst == JAG_OK, "%s nd %d: %s", layer ? "layer_norm" : "rms_norm", nd, jag_last_error());
    if (y && ref) {
        bool f32 = jag_tensor_dtype(x) == JAG_FLOAT32;
        CHECK(jag_tensor_dtype(y) == jag_tensor_dtype(x) && t_same_shape(y, x));
        CHECK_MSG(t_allclose(y, ref, f32 ? 5e-7 : 1e-13 * kappa, f32 ? 1e-7 : 1e-13 * kappa), "%s nd %d w %d b %d (%s)",
                  layer ? "layer_norm" : "rms_norm", nd, w != NULL, b != NULL, jag_dtype_name(jag_tensor_dtype(x)));
    }
    jag_release(y);
    jag_release(ref);
}

static void check_norm(bool layer, const jag_tensor *x, int nd, const jag_tensor *w, const jag_tensor *b, double eps) {
    check_norm_k(layer, x, nd, w, b, eps, 10);
}

static void test_norm_hand(void) {
    TEST_BEGIN();
    const double v[] = {1, 2, 3, 4, 6, 8};
    const int64_t s[] = {2, 3}, s3[] = {3};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        double tol = f ? 1e-14 : 1e-6;
        jag_tensor *x = t_from(v, s, 2, dt), *y = NULL;
        const double wv[] = {1, 2, 3}, bv[] = {0.5, 0, -0.5};
        jag_tensor *w = t_from(wv, s3, 1, dt), *b = t_from(bv, s3, 1, dt);
        double k = sqrt(1.5); /* (x - mean) / sqrt(var): var is 2/3 and 8/3 */
        CHECK_OK(jag_layer_norm(x, 1, NULL, NULL, 0.0, &y));
        const double e1[] = {-k, 0, k, -k, 0, k};
        CHECK(values_are(y, e1, tol));
        jag_release(y);
        CHECK_OK(jag_layer_norm(x, 1, w, b, 0.0, &y));
        const double e2[] = {-k + 0.5, 0, 3 * k - 0.5, -k + 0.5, 0, 3 * k - 0.5};
        CHECK(values_are(y, e2, tol));
        jag_release(y);
        CHECK_OK(jag_layer_norm(x, 1, NULL, b, 0.0, &y));
        const double e3[] = {-k + 0.5, 0, k - 0.5, -k + 0.5, 0, k - 0.5};
        CHECK(values_are(y, e3, tol));
        jag_release(y);
        /* over both dims: 1 2 3 4 6 8 have mean 4 and biased var 34/6 */
        CHECK_OK(jag_layer_norm(x, 2, NULL, NULL, 1e-5, &y));
        double r = 1 / sqrt(34.0 / 6 + 1e-5);
        const double e4[] = {-3 * r, -2 * r, -1 * r, 0, 2 * r, 4 * r};
        CHECK(values_are(y, e4, tol));
        jag_release(y);
        /* rms: row 1 mean(x^2) = 14/3, row 2 = 116/3 */
        CHECK_OK(jag_rms_norm(x, 1, w, 1e-6, &y));
        double r1 = 1 / sqrt(14.0 / 3 + 1e-6), r2 = 1 / sqrt(116.0 / 3 + 1e-6);
        const double e5[] = {1 * r1, 4 * r1, 9 * r1, 4 * r2, 12 * r2, 24 * r2};
        CHECK(values_are(y, e5, tol));
        jag_release(y);
        const double pv[] = {3, 4};
        const int64_t s2[] = {2};
        jag_tensor *p = t_from(pv, s2, 1, dt);
        CHECK_OK(jag_rms_norm(p, 1, NULL, 0.0, &y));
        const double e6[] = {3 / sqrt(12.5), 4 / sqrt(12.5)};
        CHECK(values_are(y, e6, tol));
        jag_release(y), jag_release(p);
        /* a constant row normalises to 0 (eps keeps it finite) */
        const double cv[] = {5, 5, 5, 5};
        const int64_t s4[] = {4};
        jag_tensor *c = t_from(cv, s4, 1, dt);
        CHECK_OK(jag_layer_norm(c, 1, NULL, NULL, 1e-5, &y));
        const double zeros[] = {0, 0, 0, 0};
        CHECK(values_are(y, zeros, 0));
        jag_release(y), jag_release(c);
        jag_release(x), jag_release(w), jag_release(b);
    }
}

static void test_norm_vs_ref(void) {
    TEST_BEGIN();
    const int64_t s3[] = {4, 5, 6};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_rand(s3, 3, dt, -3, 5, 91);
        for (int nd = 1; nd <= 3; nd++) {
            const int64_t *ws = s3 + (3 - nd);
            jag_tensor *w = t_rand(ws, nd, dt, 0.5, 2, 92), *b = t_rand(ws, nd, dt, -1, 1, 93);
            jag_tensor *wn = t_noncontig(w), *bs = t_sliced(b);
            for (int v = 0; v < 3; v++) {
                jag_tensor *a = variant(x, v);
                check_norm(true, a, nd, NULL, NULL, 1e-5);
                check_norm(true, a, nd, w, b, 1e-5);
                check_norm(true, a, nd, w, NULL, 1e-3);
                check_norm(true, a, nd, NULL, b, 0.0);
                check_norm(true, a, nd, wn, bs, 1e-5);
                check_norm(false, a, nd, NULL, NULL, 1e-6);
                check_norm(false, a, nd, w, NULL, 1e-6);
                check_norm(false, a, nd, wn, NULL, 0.0);
                jag_release(a);
            }
            /* broadcast x and an expanded weight */
            const int64_t s1[] = {1, 5, 6};
            jag_tensor *sm = t_rand(s1, 3, dt, -1, 1, 94), *e = NULL;
            CHECK_OK(jag_expand(sm, s3, 3, &e));
            check_norm(true, e, nd, w, b, 1e-5);
            check_norm(false, e, nd, w, NULL, 1e-5);
            jag_release(e), jag_release(sm);
            jag_release(w), jag_release(b), jag_release(wn), jag_release(bs);
        }
        /* offset data: two-pass statistics stay accurate */
        const int64_t s2[] = {3, 1000};
        jag_tensor *o = t_rand(s2, 2, dt, 1000, 1001, 95);
        check_norm_k(true, o, 1, NULL, NULL, 1e-5, 1000.0 / 0.29);
        jag_release(o);
        jag_release(x);
    }
}

/* Rows with an infinity or a NaN, first or later (float32's one-pass
 * statistics shift by the first value: inf - inf must stay NaN, never turn
 * into a zero variance), a row whose first value is an outlier, and rows
 * that stay finite beside them: against the reference, NaN for NaN. */
static void test_norm_specials(void) {
    TEST_BEGIN();
    enum { R = 7, D = 37 };
    double v[R * D];
    for (int i = 0; i < R * D; i++) v[i] = sin(0.7 * i) * 3 + 0.25;
    v[1 * D + 0] = INFINITY;       /* first: inf */
    v[2 * D + 5] = INFINITY;       /* later: inf */
    v[3 * D + 36] = -INFINITY;     /* later, in the tail past the vector lanes: -inf */
    v[4 * D + 3] = NAN;            /* later: NaN */
    v[5 * D + 2] = INFINITY, v[5 * D + 9] = -INFINITY;
    v[6 * D + 0] = 1e6;            /* an outlier first */
    const int64_t sz[] = {R, D};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_from(v, sz, 2, dt);
        check_norm_k(true, x, 1, NULL, NULL, 1e-5, 10);
        check_norm_k(false, x, 1, NULL, NULL, 1e-5, 10);
        jag_tensor *y = NULL;
        CHECK_OK(jag_layer_norm(x, 1, NULL, NULL, 1e-5, &y));
        for (int r = 1; y && r <= 5; r++) /* every element of a row with an infinity or a NaN is NaN */
            for (int i = 0; i < D; i++) CHECK_MSG(isnan(t_get(y, r * D + i)), "%s row %d element %d: %g", jag_dtype_name(dt), r, i, t_get(y, r * D + i));
        jag_release(y), jag_release(x);
    }
}

static void test_norm_large_empty(void) {
    TEST_BEGIN();
    const int64_t s[] = {300, 256}, sl[] = {1, 200000}, sw[] = {256}, swl[] = {200000};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_rand(s, 2, dt, -2, 2, 101), *w = t_rand(sw, 1, dt, 0, 1, 102), *b = t_rand(sw, 1, dt, 0, 1, 103);
        check_norm(true, x, 1, w, b, 1e-5);
        check_norm(false, x, 1, w, NULL, 1e-5);
        check_norm(true, x, 2, NULL, NULL, 1e-5);
        jag_tensor *nc = t_noncontig(x);
        check_norm(true, nc, 1, w, b, 1e-5);
        jag_release(nc);
        jag_tensor *xl = t_rand(sl, 2, dt, 100, 101, 104), *wl = t_rand(swl, 1, dt, 0, 1, 105);
        check_norm_k(true, xl, 1, wl, NULL, 1e-5, 100.0 / 0.29);
        check_norm(false, xl, 1, wl, NULL, 1e-5);
        jag_release(xl), jag_release(wl);
        jag_release(x), jag_release(w), jag_release(b);
    }
    /* empty inputs */
    const int64_t s04[] = {0, 4}, s30[] = {3, 0}, s4[] = {4}, s0[] = {0};
    jag_tensor *x = NULL, *w = NULL, *y = NULL;
    CHECK_OK(jag_empty(s04, 2, JAG_FLOAT32, &x));
    CHECK_OK(jag_ones(s4, 1, JAG_FLOAT32, &w));
    CHECK_OK(jag_layer_norm(x, 1, w, w, 1e-5, &y));
    CHECK(t_same_shape(x, y));
    jag_release(y), jag_release(x), jag_release(w);
    CHECK_OK(jag_empty(s30, 2, JAG_FLOAT64, &x));
    CHECK_OK(jag_empty(s0, 1, JAG_FLOAT64, &w));
    CHECK_OK(jag_rms_norm(x, 1, w, 1e-5, &y));
    CHECK(t_same_shape(x, y));
    jag_release(y);
    CHECK_OK(jag_layer_norm(x, 2, NULL, NULL, 1e-5, &y));
    CHECK(t_same_shape(x, y));
    jag_release(y), jag_release(x), jag_release(w);
}

static void test_norm_errors(void) {
    TEST_BEGIN();
    const int64_t s[] = {2, 3}, s3[] = {3}, s2[] = {2};
    jag_tensor *x = NULL, *xi = NULL, *w = NULL, *w2 = NULL, *w64 = NULL, *s0 = NULL, *y = NULL;
    CHECK_OK(jag_ones(s, 2, JAG_FLOAT32, &x));
    CHECK_OK(jag_ones(s, 2, JAG_INT64, &xi));
    CHECK_OK(jag_ones(s3, 1, JAG_FLOAT32, &w));
    CHECK_OK(jag_ones(s2, 1, JAG_FLOAT32, &w2));
    CHECK_OK(jag_ones(s3, 1, JAG_FLOAT64, &w64));
    CHECK_OK(jag_full(NULL, 0, 1.0, JAG_FLOAT32, &s0));
    long live = jag__live_tensors();
    CHECK_ERR(jag_layer_norm(xi, 1, NULL, NULL, 1e-5, &y), JAG_EDTYPE, "jag_layer_norm: argument 'x' has dtype int64");
    CHECK_ERR(jag_rms_norm(xi, 1, NULL, 1e-5, &y), JAG_EDTYPE, "jag_rms_norm");
    CHECK_ERR(jag_layer_norm(x, 0, NULL, NULL, 1e-5, &y), JAG_EINVAL, "argument 'normalized_ndim' is 0, expected 1..2");
    CHECK_ERR(jag_layer_norm(x, 3, NULL, NULL, 1e-5, &y), JAG_EINVAL, "normalized_ndim");
    CHECK_ERR(jag_rms_norm(x, -1, NULL, 1e-5, &y), JAG_EINVAL, "normalized_ndim");
    CHECK_ERR(jag_layer_norm(s0, 1, NULL, NULL, 1e-5, &y), JAG_EINVAL, "expected 1..0");
    CHECK_ERR(jag_layer_norm(x, 1, w2, NULL, 1e-5, &y), JAG_ESHAPE, "argument 'weight' has shape [2], expected [3]");
    CHECK_ERR(jag_layer_norm(x, 1, w, w2, 1e-5, &y), JAG_ESHAPE, "argument 'bias' has shape [2]");
    CHECK_ERR(jag_layer_norm(x, 2, w, NULL, 1e-5, &y), JAG_ESHAPE, "expected [2, 3]");
    CHECK_ERR(jag_rms_norm(x, 1, w2, 1e-5, &y), JAG_ESHAPE, "jag_rms_norm: argument 'weight'");
    CHECK_ERR(jag_layer_norm(x, 1, w64, NULL, 1e-5, &y), JAG_EDTYPE, "argument 'weight' has dtype float64, expected float32");
    CHECK_ERR(jag_layer_norm(x, 1, NULL, w64, 1e-5, &y), JAG_EDTYPE, "argument 'bias'");
    CHECK_ERR(jag_layer_norm(NULL, 1, NULL, NULL, 1e-5, &y), JAG_EINVAL, "NULL");
    CHECK_ERR(jag_rms_norm(x, 1, NULL, 1e-5, NULL), JAG_EINVAL, "out");
    CHECK(y == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(x), jag_release(xi), jag_release(w), jag_release(w2), jag_release(w64), jag_release(s0);
}

TEST_MAIN(test_softmax_hand, test_softmax_vs_ref, test_softmax_large, test_softmax_empty_0d, test_softmax_errors,
          test_norm_hand, test_norm_vs_ref, test_norm_specials, test_norm_large_empty, test_norm_errors)
