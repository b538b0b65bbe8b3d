/* test_norm.c — softmax, log_softmax, layer_norm, rms_norm: hand-computed
 * values, the fast kernels against the naive references (jag__ref_*, same
 * boxed arguments) and against float64 references computed here, over dims,
 * dtypes, layouts and sizes; stability for large inputs; error paths. The
 * fused backward ops (layer_norm_backward, rms_norm_backward,
 * softmax_backward, log_softmax_backward) and the forms that return their
 * statistics (native_layer_norm, native_rms_norm): against their naive
 * references, formulas computed here, finite differences (gradcheck, in
 * float64), and nested tensors against their components. */
#include "test.h"

#include "dispatch/dispatch.h"

typedef jag_status (*kern_fn)(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_softmax(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_log_softmax(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_layer_norm(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_rms_norm(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_layer_norm_backward(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_rms_norm_backward(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_softmax_backward(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_log_softmax_backward(const char *, const jag_value *, int, jag_tensor **);

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

/* softmax / log_softmax down a middle dim of a contiguous float tensor of at
 * least 2048 elements (the ragged engine's uniform segments) against the
 * reference and the float64 formula; with NaN and infinities among the
 * values (against the reference), with values of +-3000, a dim of size 1,
 * and strided variants (the dense tiles). */
static void test_softmax_middle_dim_segments(void) {
    TEST_BEGIN();
    const int64_t shapes[][3] = {{3, 50, 17}, {1, 700, 3}, {40, 9, 8}, {300, 1, 8}, {1024, 2, 2}};
    for (int f = 0; f < 2; f++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int kind = 0; kind < 3; kind++) { /* plain, special values, large values */
                jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
                double lim = kind == 2 ? 3000 : 5;
                jag_tensor *x = t_rand(shapes[si], 3, dt, -lim, lim, 80 + si), *c = NULL;
                CHECK_OK(jag_contiguous(x, &c));
                int64_t n = jag_numel(c);
                CHECK(n >= 2048);
                if (kind == 1) t_put_specials(c, 5, 97);
                for (int v = 0; v < 2; v++) {
                    jag_tensor *a = v ? t_noncontig(c) : jag_retain(c);
                    for (int lg = 0; lg < 2; lg++) check_softmax(a, 1, lg, kind != 1);
                    jag_release(a);
                }
                jag_release(x), jag_release(c);
            }
}

/* The row path (softmax along the last dim) at lengths around its vector
 * widths, with one special value in the vector body or in the tail: a NaN
 * or a +inf makes the line NaN, -inf values get probability 0 (log:
 * -inf), as torch; other lines against the formula exp(x - m) / sum exp(x
 * - m) in double (softmax_matches_f64). */
static void test_softmax_row_lengths(void) {
    TEST_BEGIN();
    const int64_t lens[] = {1, 2, 31, 32, 33, 63, 64, 65, 100, 1030};
    for (int f = 0; f < 2; f++)
        for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
            int64_t n = lens[k], sizes[2] = {5, n};
            double *v = malloc((size_t)(5 * n) * sizeof *v);
            uint64_t h = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1);
            for (int64_t i = 0; i < 5 * n; i++) {
                h = h * 6364136223846793005ull + 1442695040888963407ull;
                v[i] = ((double)(h >> 11) / 9007199254740992.0 - 0.5) * 20;
            }
            int64_t body = n / 3, tail = n - 1;
            v[1 * n + tail] = NAN;          /* line 1: NaN in the tail */
            v[2 * n + body] = INFINITY;     /* line 2: +inf in the body */
            v[3 * n + body] = -INFINITY;    /* line 3: -inf in the body and the tail */
            v[3 * n + tail] = -INFINITY;
            if (n > 1) v[4 * n + 0] = NAN;  /* line 4: NaN first */
            jag_tensor *x = t_from(v, sizes, 2, f ? JAG_FLOAT64 : JAG_FLOAT32);
            for (int lg = 0; lg < 2; lg++) {
                jag_tensor *y = NULL;
                CHECK_OK(lg ? jag_log_softmax(x, 1, &y) : jag_softmax(x, 1, &y));
                for (int r = 0; y && r < 5; r++) {
                    bool nan_line = (r == 1 || r == 2 || r == 4) && !(n == 1 && r == 4);
                    if (n <= 2 && r == 3) nan_line = true; /* a line of -inf only */
                    if (nan_line) {
                        int bad = 0;
                        for (int64_t i = 0; i < n; i++) bad += !isnan(t_get(y, r * n + i));
                        CHECK_MSG(bad == 0, "n %lld line %d log %d: %d values not NaN", (long long)n, r, lg, bad);
                        continue;
                    }
                    jag_tensor *xr = NULL, *yr = NULL;
                    CHECK_OK(jag_narrow(x, 0, r, 1, &xr));
                    CHECK_OK(jag_narrow(y, 0, r, 1, &yr));
                    if (r == 3) { /* -inf values: 0 (log: -inf), the rest by the formula over the others */
                        CHECK(lg ? t_get(y, r * n + body) == -INFINITY : t_get(y, r * n + body) == 0);
                        CHECK(lg ? t_get(y, r * n + tail) == -INFINITY : t_get(y, r * n + tail) == 0);
                        double m = -INFINITY, s = 0;
                        for (int64_t i = 0; i < n; i++) m = fmax(m, t_get(x, r * n + i));
                        for (int64_t i = 0; i < n; i++) s += exp(t_get(x, r * n + i) - m);
                        int bad = 0;
                        for (int64_t i = 0; i < n; i++) {
                            if (i == body || i == tail) continue;
                            double xv = t_get(x, r * n + i);
                            double want = lg ? xv - m - log(s) : exp(xv - m) / s, got = t_get(y, r * n + i);
                            bad += !(fabs(got - want) <= (f ? 1e-13 : 2e-6) * (1 + fabs(want)));
                        }
                        CHECK_MSG(bad == 0, "n %lld line 3 log %d: %d values off", (long long)n, lg, bad);
                    } else {
                        CHECK_MSG(softmax_matches_f64(xr, 1, yr, lg, f ? 1e-13 : 2e-6), "n %lld line %d log %d",
                                  (long long)n, r, lg);
                    }
                    jag_release(xr), jag_release(yr);
                }
                jag_release(y);
            }
            jag_release(x);
            free(v);
        }
}

/* The row max wherever it sits (the row path keeps 64 lanes of maxima and
 * folds them): rows of zeros with one 200 at column r of row r, so a max
 * taken from the wrong lanes overflows exp (e^200 is past float32): the
 * spike's softmax is 1 and the rest 0, its log_softmax 0 and the rest
 * -200, float32 and float64. */
static void test_softmax_max_every_lane(void) {
    TEST_BEGIN();
    const int64_t lens[] = {64, 100, 130};
    for (int li = 0; li < 3; li++)
        for (int f = 0; f < 2; f++) {
            int64_t L = lens[li], sz[2] = {L, L};
            jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
            jag_tensor *x = NULL, *y = NULL, *ly = NULL;
            CHECK_OK(jag_zeros(sz, 2, dt, &x));
            for (int64_t r = 0; x && r < L; r++) {
                if (f) ((double *)jag_data(x))[r * L + r] = 200;
                else ((float *)jag_data(x))[r * L + r] = 200;
            }
            CHECK_OK(jag_softmax(x, 1, &y));
            CHECK_OK(jag_log_softmax(x, 1, &ly));
            int bad = 0;
            for (int64_t r = 0; y && ly && r < L; r++)
                for (int64_t c = 0; c < L; c++) {
                    double p = t_get(y, r * L + c), lp = t_get(ly, r * L + c);
                    bad += r == c ? !(p == 1 && fabs(lp) <= 1e-80) : !(p <= 1e-80 && fabs(lp + 200) <= 1e-12);
                }
            CHECK_MSG(bad == 0, "L %lld %s: %d wrong", (long long)L, jag_dtype_name(dt), bad);
            jag_release(x), jag_release(y), jag_release(ly);
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

/* An output of 16 MiB or more (jag__stream_stores) is written with
 * streaming stores where rows are whole vectors (D % 8 == 0): the same bits
 * as the same rows normalised alone (a small output, ordinary stores), for
 * rows at the start, the middle and the end, and the reference's values,
 * with and without weight and bias; D = 1020 (not streamed) beside it. */
static void test_norm_streamed_output(void) {
    TEST_BEGIN();
    const int64_t Ds[] = {1024, 1020};
    for (int k = 0; k < 2; k++) {
        const int64_t D = Ds[k], s[] = {4100, D}, sw[] = {D};
        jag_tensor *x = t_rand(s, 2, JAG_FLOAT32, -1, 3, 111), *w = t_rand(sw, 1, JAG_FLOAT32, 0.5, 2, 112),
                   *b = t_rand(sw, 1, JAG_FLOAT32, -1, 1, 113);
        for (int affine = 0; affine < 2; affine++) {
            jag_tensor *wa = affine ? w : NULL, *ba = affine ? b : NULL, *y = NULL;
            CHECK_OK(jag_layer_norm(x, 1, wa, ba, 1e-5, &y));
            const int64_t starts[] = {0, 2047, 4100 - 40};
            for (int j = 0; y && j < 3; j++) {
                jag_tensor *part = NULL, *yp = NULL, *ypart = NULL;
                CHECK_OK(jag_narrow(x, 0, starts[j], 40, &part));
                CHECK_OK(jag_layer_norm(part, 1, wa, ba, 1e-5, &yp));
                CHECK_OK(jag_narrow(y, 0, starts[j], 40, &ypart));
                if (yp && ypart)
                    CHECK_MSG(memcmp(jag__ptr(yp), jag__ptr(ypart), (size_t)(40 * D) * sizeof(float)) == 0,
                              "D %lld affine %d rows from %lld: not the bits of the rows alone", (long long)D, affine,
                              (long long)starts[j]);
                jag_release(part), jag_release(yp), jag_release(ypart);
            }
            jag_release(y);
            check_norm(true, x, 1, wa, ba, 1e-5);
        }
        jag_release(x), jag_release(w), jag_release(b);
    }
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

/* ---- fused backward ops ---------------------------------------------------- */

/* Run the reference for `op` into outputs made from the META specs. */
static jag_status run_ref_n(jag_op_id op, kern_fn ref, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    jag_spec spec[4];
    jag_status st = info->meta(info->api_name, args, nargs, spec);
    if (st) return st;
    for (int k = 0; k < info->n_out; k++) outs[k] = jag__tensor_from_spec(info->api_name, &spec[k], false);
    return ref(info->api_name, args, nargs, outs);
}

static void release_n(jag_tensor **t, int n) {
    for (int k = 0; k < n; k++) jag_release(t[k]), t[k] = NULL;
}

/* native_layer_norm / native_rms_norm: y equals layer_norm's / rms_norm's
 * bit for bit; mean and rstd are each row's mean and 1 / sqrt(var + eps)
 * (rms: 1 / sqrt(mean(x^2) + eps)), computed here in double; shapes are x's
 * leading sizes then nd ones (torch's native_layer_norm). */
static void check_native(bool layer, const jag_tensor *x, int nd, const jag_tensor *w, const jag_tensor *b, double eps,
                         jag_tensor **stats) {
    jag_value a[5] = {jag__v_tensor(x), jag__v_int(nd), jag__v_tensor(w)};
    int nargs = layer ? 5 : 4;
    if (layer) a[3] = jag__v_tensor(b), a[4] = jag__v_double(eps);
    else a[3] = jag__v_double(eps);
    jag_tensor *o[3] = {0}, *y = NULL;
    CHECK_OK(jag__dispatch(layer ? JAG_OP_native_layer_norm : JAG_OP_native_rms_norm, a, nargs, o));
    CHECK_OK(layer ? jag_layer_norm(x, nd, w, b, eps, &y) : jag_rms_norm(x, nd, w, eps, &y));
    if (!o[0] || !y) {
        release_n(o, 3), jag_release(y);
        return;
    }
    CHECK(t_allclose(o[0], y, 0, 0));
    bool f32 = jag_tensor_dtype(x) == JAG_FLOAT32;
    int n = jag_ndim(x);
    int64_t D = 1;
    for (int d = n - nd; d < n; d++) D *= jag_size(x, d);
    jag_tensor *mean = layer ? o[1] : NULL, *rstd = layer ? o[2] : o[1];
    CHECK(jag_ndim(rstd) == n && jag_tensor_dtype(rstd) == jag_tensor_dtype(x));
    for (int d = 0; d < n; d++) CHECK(jag_size(rstd, d) == (d < n - nd ? jag_size(x, d) : 1));
    for (int64_t r = 0; r < jag_numel(rstd); r++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < D; i++) m += t_get(x, r * D + i) / (double)D;
        if (!layer) m = 0;
        for (int64_t i = 0; i < D; i++) v += (t_get(x, r * D + i) - m) * (t_get(x, r * D + i) - m) / (double)D;
        double want = 1 / sqrt(v + eps), tol = f32 ? 1e-6 : 1e-12;
        CHECK_MSG(fabs(t_get(rstd, r) - want) <= tol * want, "row %lld rstd %.9g vs %.9g", (long long)r, t_get(rstd, r), want);
        if (mean) CHECK_MSG(fabs(t_get(mean, r) - m) <= tol * (1 + fabs(m)), "row %lld mean %.9g vs %.9g", (long long)r, t_get(mean, r), m);
    }
    stats[0] = layer ? o[1] : NULL, stats[1] = layer ? o[2] : o[1];
    jag_release(o[0]);
    jag_release(y);
}

/* The backward op against its reference (same boxed arguments), with the
 * statistics given (native_*'s, also as a non-contiguous copy) and not. */
static void check_norm_backward(bool layer, const jag_tensor *x, const jag_tensor *g, int nd, const jag_tensor *w,
                                double eps, double tol) {
    jag_tensor *stats[2] = {0};
    check_native(layer, x, nd, w, NULL, eps, stats);
    jag_tensor *sn[2] = {stats[0] ? t_noncontig(stats[0]) : NULL, stats[1] ? t_noncontig(stats[1]) : NULL};
    jag_op_id op = layer ? JAG_OP_layer_norm_backward : JAG_OP_rms_norm_backward;
    int n_out = layer ? 3 : 2;
    for (int given = 0; given < 3; given++) {
        jag_tensor *const *st = given == 1 ? stats : sn;
        jag_value a[7];
        int k = 0;
        a[k++] = jag__v_tensor(g), a[k++] = jag__v_tensor(x);
        if (layer) a[k++] = jag__v_tensor(given ? st[0] : NULL);
        a[k++] = jag__v_tensor(given ? st[1] : NULL);
        a[k++] = jag__v_tensor(w), a[k++] = jag__v_int(nd), a[k++] = jag__v_double(eps);
        jag_tensor *o[3] = {0}, *r[3] = {0};
        CHECK_OK(jag__dispatch(op, a, k, o));
        CHECK_OK(run_ref_n(op, layer ? jag__ref_layer_norm_backward : jag__ref_rms_norm_backward, a, k, r));
        for (int i = 0; i < n_out && o[i] && r[i]; i++)
            CHECK_MSG(t_allclose(o[i], r[i], tol, tol), "%s output %d, nd %d, w %d, stats %d (%s)",
                      layer ? "layer_norm_backward" : "rms_norm_backward", i, nd, w != NULL, given,
                      jag_dtype_name(jag_tensor_dtype(x)));
        release_n(o, 3), release_n(r, 3);
    }
    release_n(stats, 2), release_n(sn, 2);
}

static void test_norm_backward_vs_ref(void) {
    TEST_BEGIN();
    const int64_t s3[] = {4, 5, 6}, one[] = {7, 1}, flat[] = {3, 40};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        double tol = f ? 1e-11 : 2e-6;
        jag_tensor *x = t_rand(s3, 3, dt, -3, 5, 101), *g = t_rand(s3, 3, dt, -1, 1, 102);
        for (int nd = 1; nd <= 3; nd++) {
            jag_tensor *w = t_rand(s3 + (3 - nd), nd, dt, 0.5, 2, 103), *wn = t_noncontig(w);
            for (int v = 0; v < 3; v++) {
                jag_tensor *xv = variant(x, v), *gv = variant(g, 2 - v);
                for (int layer = 0; layer < 2; layer++) {
                    check_norm_backward(layer, xv, gv, nd, NULL, 1e-5, tol);
                    check_norm_backward(layer, xv, gv, nd, v ? wn : w, 1e-5, tol);
                }
                jag_release(xv), jag_release(gv);
            }
            jag_release(w), jag_release(wn);
        }
        jag_release(x), jag_release(g);
        /* one column: layer_norm's xhat is 0, so dx is 0 and dw is 0 */
        x = t_rand(one, 2, dt, -3, 3, 104), g = t_rand(one, 2, dt, -1, 1, 105);
        for (int layer = 0; layer < 2; layer++) check_norm_backward(layer, x, g, 1, NULL, 1e-5, tol);
        jag_tensor *o[3] = {0};
        jag_value a[7] = {jag__v_tensor(g), jag__v_tensor(x), jag__v_tensor(NULL), jag__v_tensor(NULL),
                          jag__v_tensor(NULL), jag__v_int(1), jag__v_double(1e-5)};
        CHECK_OK(jag__dispatch(JAG_OP_layer_norm_backward, a, 7, o));
        double zeros[7] = {0}, gsum = 0;
        for (int i = 0; i < 7; i++) gsum += t_get(g, i);
        if (o[0]) CHECK(values_are(o[0], zeros, 0) && values_are(o[1], zeros, 0) && values_are(o[2], &gsum, tol));
        release_n(o, 3);
        jag_release(x), jag_release(g);
        /* rows whose variance is below eps: eps dominates rstd */
        double xs[120];
        for (int i = 0; i < 120; i++) xs[i] = (i / 40) * 2.0 + 1e-3 * sin(i * 1.7);
        x = t_from(xs, flat, 2, dt), g = t_rand(flat, 2, dt, -1, 1, 106);
        jag_tensor *w = t_rand(flat + 1, 1, dt, 0.5, 2, 107);
        for (int layer = 0; layer < 2; layer++) {
            check_norm_backward(layer, x, g, 1, w, 1e-2, tol);
            check_norm_backward(layer, x, g, 1, NULL, 1e-5, tol);
        }
        jag_release(x), jag_release(g), jag_release(w);
    }
}

/* Enough rows that each of the kernel's 64 blocks of rows holds several:
 * its four-rows-at-a-time path and the rows after the last four, against
 * the reference; D = 37 (a partial vector) and 48; and the same bits on 1
 * and 2 threads (the blocks depend on the row count alone). */
static void test_norm_backward_many_rows(void) {
    TEST_BEGIN();
    const int64_t shapes[][2] = {{301, 37}, {1000, 48}};
    for (int f = 0; f < 2; f++)
        for (int si = 0; si < 2; si++) {
            jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
            double tol = f ? 1e-11 : 2e-6;
            jag_tensor *x = t_rand(shapes[si], 2, dt, -3, 5, 111 + si), *g = t_rand(shapes[si], 2, dt, -1, 1, 113 + si);
            jag_tensor *w = t_rand(shapes[si] + 1, 1, dt, 0.5, 2, 115 + si);
            for (int layer = 0; layer < 2; layer++) {
                check_norm_backward(layer, x, g, 1, w, 1e-5, tol);
                check_norm_backward(layer, x, g, 1, NULL, 1e-5, tol);
                jag_value a[7];
                int k = 0;
                a[k++] = jag__v_tensor(g), a[k++] = jag__v_tensor(x);
                if (layer) a[k++] = jag__v_tensor(NULL);
                a[k++] = jag__v_tensor(NULL), a[k++] = jag__v_tensor(w), a[k++] = jag__v_int(1), a[k++] = jag__v_double(1e-5);
                jag_op_id op = layer ? JAG_OP_layer_norm_backward : JAG_OP_rms_norm_backward;
                jag_tensor *o1[3] = {0}, *o2[3] = {0};
                int threads = jag_get_num_threads();
                jag_set_num_threads(1);
                CHECK_OK(jag__dispatch(op, a, k, o1));
                jag_set_num_threads(2);
                CHECK_OK(jag__dispatch(op, a, k, o2));
                jag_set_num_threads(threads);
                for (int i = 0; i < (layer ? 3 : 2) && o1[i] && o2[i]; i++)
                    CHECK_MSG(memcmp(jag__ptr(o1[i]), jag__ptr(o2[i]),
                                     (size_t)jag_numel(o1[i]) * jag_dtype_size(dt)) == 0,
                              "%s output %d: 1 and 2 threads differ", layer ? "layer_norm_backward" : "rms_norm_backward", i);
                release_n(o1, 3), release_n(o2, 3);
            }
            jag_release(x), jag_release(g), jag_release(w);
        }
}

/* dx of softmax / log_softmax along dim computed here in double from the
 * outputs (torch's _softmax_backward_data: y (g - sum(g y)); log_softmax:
 * g - exp(y) sum(g)) against the backward op and its reference. */
static void check_softmax_backward(const jag_tensor *x, const jag_tensor *g, int dim, bool log_out, double tol) {
    jag_tensor *y = NULL, *o = NULL, *r = NULL;
    CHECK_OK(log_out ? jag_log_softmax(x, dim, &y) : jag_softmax(x, dim, &y));
    if (!y) return;
    jag_op_id op = log_out ? JAG_OP_log_softmax_backward : JAG_OP_softmax_backward;
    jag_value a[3] = {jag__v_tensor(g), jag__v_tensor(y), jag__v_int(dim)};
    CHECK_OK(jag__dispatch(op, a, 3, &o));
    CHECK_OK(run_ref(op, log_out ? jag__ref_log_softmax_backward : jag__ref_softmax_backward, a, 3, &r));
    if (o && r) {
        CHECK_MSG(t_allclose(o, r, tol, tol), "%s dim %d (%s)", log_out ? "log_softmax" : "softmax", dim,
                  jag_dtype_name(jag_tensor_dtype(x)));
        int nd = jag_ndim(x), d = dim < 0 ? dim + nd : dim;
        int64_t O = 1, R = jag_size(x, d), I = 1;
        for (int e = 0; e < d; e++) O *= jag_size(x, e);
        for (int e = d + 1; e < nd; e++) I *= jag_size(x, e);
        for (int64_t oo = 0; oo < O; oo++)
            for (int64_t i = 0; i < I; i++) {
                double s = 0;
                for (int64_t k = 0; k < R; k++) {
                    int64_t at = (oo * R + k) * I + i;
                    s += log_out ? t_get(g, at) : t_get(g, at) * t_get(y, at);
                }
                for (int64_t k = 0; k < R; k++) {
                    int64_t at = (oo * R + k) * I + i;
                    double gv = t_get(g, at), yv = t_get(y, at), want = log_out ? gv - exp(yv) * s : yv * (gv - s);
                    CHECK_MSG(fabs(t_get(o, at) - want) <= tol * (1 + fabs(want)), "element %lld: %.9g vs %.9g",
                              (long long)at, t_get(o, at), want);
                }
            }
    }
    jag_release(y), jag_release(o), jag_release(r);
}

/* Offset rows (|mean| far above the spread: values in 1000 +- 0.05, -7e4
 * +- 3 and 4e6 +- 8, where sums of squares around 0 would lose the
 * variance), enough of them that each of the kernel's 64 blocks of rows
 * holds several, for the four-rows-at-a-time step,
 * where float32 without saved statistics takes its sums around each row's
 * first value and subtracts (mean - x0) sum h afterwards: the gradients
 * against the reference, D = 48 and 37 (a partial vector), with and
 * without weight, and with the statistics given. */
static void test_norm_backward_offset_rows(void) {
    TEST_BEGIN();
    const int64_t shapes[][2] = {{301, 48}, {520, 37}};
    const double centre[] = {1000.0, -7e4, 4e6}, spread[] = {0.05, 3.0, 8.0};
    for (int f = 0; f < 2; f++)
        for (int si = 0; si < 2; si++)
            for (int c = 0; c < 3; c++) {
                jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
                /* float64: both sides lose about log2(|mean| / spread) bits
                 * to the data's conditioning (differences of 1e-10 to 1e-9
                 * here), so its bound scales with it; float32 keeps 2e-6 */
                double tol = f ? 1e-13 * fabs(centre[c]) / spread[c] : 2e-6;
                jag_tensor *x = t_rand(shapes[si], 2, dt, centre[c] - spread[c], centre[c] + spread[c], 121 + si);
                jag_tensor *g = t_rand(shapes[si], 2, dt, -1, 1, 123 + si), *w = t_rand(shapes[si] + 1, 1, dt, 0.5, 2, 125);
                check_norm_backward(true, x, g, 1, w, 1e-5, tol);
                check_norm_backward(true, x, g, 1, NULL, 1e-5, tol);
                jag_release(x), jag_release(g), jag_release(w);
            }
}

static void test_softmax_backward_vs_ref(void) {
    TEST_BEGIN();
    const int64_t s3[] = {4, 5, 70}, one[] = {6, 1};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        double tol = f ? 1e-12 : 2e-6;
        jag_tensor *x = t_rand(s3, 3, dt, -4, 4, 111), *g = t_rand(s3, 3, dt, -1, 1, 112);
        for (int v = 0; v < 3; v++) {
            jag_tensor *xv = variant(x, v), *gv = variant(g, (v + 1) % 3);
            for (int dim = -1; dim < 3; dim++)
                for (int lg = 0; lg < 2; lg++) check_softmax_backward(xv, gv, dim, lg, tol);
            jag_release(xv), jag_release(gv);
        }
        jag_release(x), jag_release(g);
        x = t_rand(one, 2, dt, -4, 4, 113), g = t_rand(one, 2, dt, -1, 1, 114);
        for (int dim = 0; dim < 2; dim++)
            for (int lg = 0; lg < 2; lg++) check_softmax_backward(x, g, dim, lg, tol);
        jag_release(x), jag_release(g);
    }
}

/* gradcheck (float64 finite differences) through the ops whose derivative
 * rules call the backward ops: native_layer_norm / native_rms_norm (saved
 * statistics) and layer_norm / rms_norm (statistics computed again). */
typedef struct {
    jag_op_id op;
    int nd, has_w, has_b;
    double eps;
} norm_call;

static jag_status run_norm_call(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    const norm_call *c = ctx;
    bool layer = c->op == JAG_OP_layer_norm || c->op == JAG_OP_native_layer_norm;
    const jag_tensor *w = c->has_w ? in[1] : NULL, *b = c->has_b ? in[1 + c->has_w] : NULL;
    jag_value a[5] = {jag__v_tensor(in[0]), jag__v_int(c->nd), jag__v_tensor(w)};
    int nargs = layer ? 5 : 4;
    if (layer) a[3] = jag__v_tensor(b), a[4] = jag__v_double(c->eps);
    else a[3] = jag__v_double(c->eps);
    jag_tensor *o[3] = {0};
    jag_status st = jag__dispatch(c->op, a, nargs, o);
    *out = o[0];
    jag_release(o[1]), jag_release(o[2]);
    (void)n;
    return st;
}

static void test_norm_backward_gradcheck(void) {
    TEST_BEGIN();
    const jag_op_id ops[4] = {JAG_OP_native_layer_norm, JAG_OP_layer_norm, JAG_OP_native_rms_norm, JAG_OP_rms_norm};
    const int64_t shapes[3][3] = {{2, 3, 4}, {5, 1, 1}, {3, 6, 1}};
    for (int si = 0; si < 3; si++)
        for (int oi = 0; oi < 4; oi++)
            for (int wb = 0; wb < 4; wb++) {
                bool layer = oi < 2;
                if (!layer && (wb >> 1)) continue;
                const int64_t *sz = si == 2 ? (const int64_t[]){3, 6} : shapes[si];
                int ndim = si == 2 ? 2 : 3, nd = si == 0 ? 2 : 1;
                norm_call c = {ops[oi], nd, wb & 1, wb >> 1, si == 1 ? 1e-3 : 1e-5};
                jag_tensor *x = t_rand(sz, ndim, JAG_FLOAT64, -2, 2, 120 + (uint64_t)si), *in[3];
                if (si == 2) { /* rows near constant: eps dominates */
                    double *p = jag_data(x);
                    for (int i = 0; i < 18; i++) p[i] = (i / 6) + 1e-3 * p[i];
                    c.eps = 1e-4;
                }
                int n = 0;
                in[n++] = variant(x, si == 0 ? 1 : 2);
                if (c.has_w) in[n++] = t_rand(sz + (ndim - nd), nd, JAG_FLOAT64, 0.5, 1.5, 130);
                if (c.has_b) in[n++] = t_rand(sz + (ndim - nd), nd, JAG_FLOAT64, -1, 1, 131);
                for (int i = 0; i < n; i++) CHECK_OK(jag_set_requires_grad(in[i], true));
                jag_status st = jag_gradcheck(run_norm_call, &c, in, n, 1e-6, 1e-6, 1e-5);
                CHECK_MSG(st == JAG_OK, "%s shape %d w %d b %d: %s", jag_op_name(c.op), si, c.has_w, c.has_b, jag_last_error());
                for (int i = 0; i < n; i++) jag_release(in[i]);
                jag_release(x);
            }
}

/* Nested (B, j, D) layer_norm / rms_norm / softmax / log_softmax over the
 * last dim: the gradients of x (per component) and of weight and bias (the
 * sum over components) equal those of each component run as a dense tensor. */
static jag_status run_last_dim(int kind, const jag_tensor *x, const jag_tensor *w, const jag_tensor *b, jag_tensor **y) {
    switch (kind) {
    case 0: return jag_layer_norm(x, 1, w, b, 1e-5, y);
    case 1: return jag_rms_norm(x, 1, w, 1e-5, y);
    case 2: return jag_softmax(x, -1, y);
    default: return jag_log_softmax(x, -1, y);
    }
}

/* *sum += leaf's gradient (a new tensor; *sum may start NULL). */
static void add_grad(const jag_tensor *leaf, jag_tensor **sum) {
    jag_tensor *g = NULL, *s = NULL;
    if (!leaf) return;
    CHECK_OK(jag_get_grad(leaf, &g));
    if (!g) return;
    if (*sum) {
        CHECK_OK(jag_add(*sum, g, 1.0, &s));
    } else {
        CHECK_OK(jag_clone(g, &s));
    }
    jag_release(*sum);
    *sum = s;
    jag_release(g);
}

static void test_norm_backward_nested(void) {
    TEST_BEGIN();
    enum { B = 3, D = 5, R = 9 };
    const int64_t offs[B + 1] = {0, 4, 4, 9}, nb1 = B + 1, vs[2] = {R, D}, ds = D;
    for (int kind = 0; kind < 4; kind++) {
        jag_tensor *vals = t_rand(vs, 2, JAG_FLOAT64, -2, 2, 140), *gvals = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 141);
        jag_tensor *off = NULL, *nt = NULL, *gn = NULL, *y = NULL, *w = NULL, *b = NULL;
        CHECK_OK(jag_from_data(offs, &nb1, 1, JAG_INT64, &off));
        CHECK_OK(jag_nested_from_jagged(vals, off, NULL, &nt));
        CHECK_OK(jag_nested_from_jagged(gvals, off, NULL, &gn));
        if (kind < 2) {
            w = t_rand(&ds, 1, JAG_FLOAT64, 0.5, 1.5, 142);
            CHECK_OK(jag_set_requires_grad(w, true));
        }
        if (kind == 0) {
            b = t_rand(&ds, 1, JAG_FLOAT64, -1, 1, 143);
            CHECK_OK(jag_set_requires_grad(b, true));
        }
        CHECK_OK(jag_set_requires_grad(nt, true));
        CHECK_OK(run_last_dim(kind, nt, w, b, &y));
        CHECK_OK(jag_backward(y, gn, false));
        jag_tensor *gx = NULL, *gw = NULL, *gb = NULL, *gxc[B] = {0}, *gc[B] = {0};
        CHECK_OK(jag_get_grad(nt, &gx));
        if (w) CHECK_OK(jag_get_grad(w, &gw));
        if (b) CHECK_OK(jag_get_grad(b, &gb));
        int got = 0;
        CHECK_OK(jag_nested_unbind(gx, gxc, B, &got));
        CHECK_OK(jag_nested_unbind(gn, gc, B, &got));
        jag_tensor *sw = NULL, *sb = NULL;
        for (int k = 0; k < B; k++) {
            int64_t len = offs[k + 1] - offs[k];
            jag_tensor *xc = NULL, *xd = NULL, *yc = NULL, *wc = NULL, *bc = NULL;
            CHECK_OK(jag_narrow(vals, 0, offs[k], len, &xc));
            CHECK_OK(jag_clone(xc, &xd));
            CHECK_OK(jag_set_requires_grad(xd, true));
            if (w) { /* the same values, a leaf of its own */
                wc = t_rand(&ds, 1, JAG_FLOAT64, 0.5, 1.5, 142);
                CHECK_OK(jag_set_requires_grad(wc, true));
            }
            if (b) {
                bc = t_rand(&ds, 1, JAG_FLOAT64, -1, 1, 143);
                CHECK_OK(jag_set_requires_grad(bc, true));
            }
            CHECK_OK(run_last_dim(kind, xd, wc, bc, &yc));
            CHECK_OK(jag_backward(yc, gc[k], false));
            jag_tensor *gxd = NULL;
            CHECK_OK(jag_get_grad(xd, &gxd));
            CHECK_MSG(len == 0 || (gxd && gxc[k] && t_allclose(gxc[k], gxd, 1e-12, 1e-12)), "kind %d component %d", kind, k);
            add_grad(wc, &sw);
            add_grad(bc, &sb);
            jag_release(xc), jag_release(xd), jag_release(yc), jag_release(wc), jag_release(bc), jag_release(gxd);
        }
        if (gw && sw) CHECK(t_allclose(gw, sw, 1e-12, 1e-12));
        if (gb && sb) CHECK(t_allclose(gb, sb, 1e-12, 1e-12));
        CHECK(!w || gw);
        CHECK(!b || gb);
        release_n(gxc, B), release_n(gc, B);
        jag_release(sw), jag_release(sb), jag_release(gx), jag_release(gw), jag_release(gb);
        jag_release(vals), jag_release(gvals), jag_release(off), jag_release(nt), jag_release(gn), jag_release(y);
        jag_release(w), jag_release(b);
    }
}

static void test_norm_backward_errors(void) {
    TEST_BEGIN();
    const int64_t s2[] = {3, 4}, s3[] = {3, 5}, sw[] = {4}, sst[] = {3, 1};
    jag_tensor *x = t_rand(s2, 2, JAG_FLOAT64, -1, 1, 150), *g = t_rand(s3, 2, JAG_FLOAT64, -1, 1, 151);
    jag_tensor *gf = t_rand(s2, 2, JAG_FLOAT32, -1, 1, 152), *w = t_rand(sw, 1, JAG_FLOAT64, 1, 2, 153);
    jag_tensor *st = t_rand(sst, 2, JAG_FLOAT64, 1, 2, 154), *bad = t_rand(sw, 1, JAG_FLOAT64, 1, 2, 155), *o[3] = {0};
    jag_value none = jag__v_tensor(NULL);
    jag_value a1[7] = {jag__v_tensor(g), jag__v_tensor(x), none, none, jag__v_tensor(w), jag__v_int(1), jag__v_double(1e-5)};
    CHECK_ERR(jag__dispatch(JAG_OP_layer_norm_backward, a1, 7, o), JAG_ESHAPE, "argument 'g' has shape [3, 5], expected [3, 4]");
    jag_value a2[7] = {jag__v_tensor(gf), jag__v_tensor(x), none, none, jag__v_tensor(w), jag__v_int(1), jag__v_double(1e-5)};
    CHECK_ERR(jag__dispatch(JAG_OP_layer_norm_backward, a2, 7, o), JAG_EDTYPE, "argument 'g' has dtype float32");
    jag_value a3[7] = {jag__v_tensor(gf), jag__v_tensor(gf), jag__v_tensor(st), none, none, jag__v_int(1), jag__v_double(1e-5)};
    CHECK_ERR(jag__dispatch(JAG_OP_layer_norm_backward, a3, 7, o), JAG_EINVAL, "'mean' and 'rstd' must be given together");
    jag_value a4[6] = {jag__v_tensor(x), jag__v_tensor(x), jag__v_tensor(bad), none, jag__v_int(1), jag__v_double(1e-5)};
    CHECK_ERR(jag__dispatch(JAG_OP_rms_norm_backward, a4, 6, o), JAG_ESHAPE, "argument 'rstd' has shape [4], expected [3, 1]");
    jag_value a5[6] = {jag__v_tensor(x), jag__v_tensor(x), jag__v_tensor(st), jag__v_tensor(bad), jag__v_int(3), jag__v_double(1e-5)};
    CHECK_ERR(jag__dispatch(JAG_OP_rms_norm_backward, a5, 6, o), JAG_EINVAL, "argument 'normalized_ndim' is 3");
    jag_value a6[3] = {jag__v_tensor(g), jag__v_tensor(x), jag__v_int(1)};
    CHECK_ERR(jag__dispatch(JAG_OP_softmax_backward, a6, 3, o), JAG_ESHAPE, "argument 'g' has shape [3, 5], expected [3, 4]");
    jag_value a7[3] = {jag__v_tensor(x), jag__v_tensor(x), jag__v_int(2)};
    CHECK_ERR(jag__dispatch(JAG_OP_log_softmax_backward, a7, 3, o), JAG_ERANGE, "argument 'dim' is 2");
    jag_value a8[3] = {jag__v_tensor(gf), jag__v_tensor(x), jag__v_int(0)};
    CHECK_ERR(jag__dispatch(JAG_OP_softmax_backward, a8, 3, o), JAG_EDTYPE, "argument 'g' has dtype float32, expected float64");
    CHECK(o[0] == NULL && o[1] == NULL && o[2] == NULL);
    jag_release(x), jag_release(g), jag_release(gf), jag_release(w), jag_release(st), jag_release(bad);
}

/* layer_norm over rows of every length from 1 to 70 and of 256, 1000 and
 * 1024 (the float32 kernels' vector loops and their masked tails: 8 and 32
 * lanes), over 1, 7, 9 and 19 rows (AVX-512 builds take rows in blocks of
 * 8, each row's statistics computed before the previous row's transform),
 * with and without weight and bias, both dtypes, against the reference. */
static void test_norm_row_lengths(void) {
    TEST_BEGIN();
    const int64_t rows[] = {1, 7, 9, 19};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        for (int64_t D = 1; D <= 1024; D = D < 70 ? D + 1 : D == 70 ? 256 : D == 256 ? 1000 : D == 1000 ? 1024 : 2000) {
            jag_tensor *w = t_rand(&D, 1, dt, 0.5, 2, 96), *b = t_rand(&D, 1, dt, -1, 1, 97);
            for (int r = 0; r < 4; r++) {
                const int64_t sz[] = {rows[r], D};
                jag_tensor *x = t_rand(sz, 2, dt, -2, 3, 98 + (uint64_t)D);
                check_norm(true, x, 1, NULL, NULL, 1e-5);
                check_norm(true, x, 1, w, b, 1e-5);
                check_norm(true, x, 1, w, NULL, 1e-5);
                check_norm(true, x, 1, NULL, b, 1e-5);
                jag_release(x);
            }
            jag_release(w), jag_release(b);
        }
    }
}

TEST_MAIN(test_softmax_max_every_lane, test_softmax_middle_dim_segments, test_norm_backward_vs_ref, test_norm_backward_many_rows, test_norm_backward_offset_rows, test_softmax_backward_vs_ref, test_norm_backward_gradcheck, test_norm_backward_nested,
          test_norm_backward_errors, test_softmax_hand, test_softmax_vs_ref, test_softmax_row_lengths, test_softmax_large, test_softmax_empty_0d, test_softmax_errors,
          test_norm_hand, test_norm_vs_ref, test_norm_row_lengths, test_norm_specials, test_norm_large_empty,
          test_norm_streamed_output, test_norm_errors)
