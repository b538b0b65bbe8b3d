/* test_reduce.c — sum, mean, prod, amax, amin, var, std, max_dim, min_dim,
 * argmax, argmin: hand-computed values, the fast kernels against the naive
 * references (jag__ref_*, same boxed arguments) over dtypes, dim sets,
 * layouts and sizes, float64 references for long rows, and error paths. */
#include "test.h"

#include "cpu/kernels.h"
#include "dispatch/dispatch.h"

typedef jag_status (*kern_fn)(const char *, const jag_value *, int, jag_tensor **);
#define DECL_REF(n) jag_status jag__ref_##n(const char *, const jag_value *, int, jag_tensor **);
DECL_REF(sum) DECL_REF(mean) DECL_REF(prod) DECL_REF(amax) DECL_REF(amin) DECL_REF(var) DECL_REF(std) DECL_REF(logsumexp)
DECL_REF(max_dim) DECL_REF(min_dim) DECL_REF(argmax) DECL_REF(argmin) DECL_REF(mean_backward)

static const jag_dtype all_dtypes[] = {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_BOOL};

/* Run the reference for `op` on boxed args into outputs made from the META
 * specs (as the dispatcher would). */
static jag_status run_ref(jag_op_id op, kern_fn ref, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    jag_spec specs[2];
    jag_status st = info->meta(info->api_name, args, nargs, specs);
    if (st) return st;
    for (int i = 0; i < info->n_out; i++) outs[i] = jag__tensor_from_spec(info->api_name, &specs[i], false);
    return ref(info->api_name, args, nargs, outs);
}

static jag_tensor *t_vals(const double *v, const int64_t *sizes, int nd, jag_dtype dt) { return t_from(v, sizes, nd, dt); }

/* Random integers in [lo, hi) stored as dtype (ties are likely). */
static jag_tensor *t_randint(const int64_t *sizes, int nd, jag_dtype dt, double lo, double hi, uint64_t seed) {
    jag_tensor *i = t_rand(sizes, nd, JAG_INT64, lo, hi, seed), *t = NULL;
    CHECK_OK(jag_to_dtype(i, dt, &t));
    jag_release(i);
    return t;
}

/* Layout variants of x: 0 itself, 1 reversed storage, 2 sliced rows. */
static jag_tensor *variant(const jag_tensor *x, int v) {
    if (v == 1) return t_noncontig(x);
    if (v == 2) return t_sliced(x);
    return jag_retain((jag_tensor *)x);
}

static bool shape_is(const jag_tensor *t, const int64_t *sizes, int nd) {
    if (jag_ndim(t) != nd) return false;
    for (int d = 0; d < nd; d++)
        if (jag_size(t, d) != sizes[d]) return false;
    return true;
}

/* Every element equals vals[i] (NaN matches NaN). */
static bool values_are(const jag_tensor *t, const double *vals, double tol) {
    for (int64_t i = 0; i < jag_numel(t); i++) {
        double a = t_get(t, i);
        if (isnan(a) && isnan(vals[i])) continue;
        if (a == vals[i]) continue;
        if (!(fabs(a - vals[i]) <= tol)) {
            fprintf(stderr, "values_are: element %lld: %.9g vs %.9g\n", (long long)i, a, vals[i]);
            return false;
        }
    }
    return true;
}

static double rtol_for(jag_dtype dt) { return dt == JAG_FLOAT32 ? 1e-6 : dt == JAG_FLOAT64 ? 1e-12 : 0; }

/* ---- ops over a dim list, against the reference --------------------------- */

typedef enum { OP_SUM, OP_MEAN, OP_PROD, OP_AMAX, OP_AMIN, OP_VAR, OP_STD, OP_LSE, N_DIMS_OPS } dims_op;
static const char *dims_op_name[] = {"sum", "mean", "prod", "amax", "amin", "var", "std", "logsumexp"};
static const jag_op_id dims_op_id[] = {JAG_OP_sum, JAG_OP_mean, JAG_OP_prod, JAG_OP_amax,
                                       JAG_OP_amin, JAG_OP_var, JAG_OP_std, JAG_OP_logsumexp};
static const kern_fn dims_op_ref[] = {jag__ref_sum, jag__ref_mean, jag__ref_prod, jag__ref_amax,
                                      jag__ref_amin, jag__ref_var, jag__ref_std, jag__ref_logsumexp};

static bool float_only(dims_op op) { return op == OP_MEAN || op == OP_VAR || op == OP_STD || op == OP_LSE; }

static jag_status call_dims(dims_op op, const jag_tensor *x, const int *dims, int n, int64_t corr, bool keep,
                            jag_tensor **out) {
    switch (op) {
    case OP_SUM: return jag_sum(x, dims, n, keep, out);
    case OP_MEAN: return jag_mean(x, dims, n, keep, out);
    case OP_PROD: return jag_prod(x, dims, n, keep, out);
    case OP_AMAX: return jag_amax(x, dims, n, keep, out);
    case OP_AMIN: return jag_amin(x, dims, n, keep, out);
    case OP_VAR: return jag_var(x, dims, n, corr, keep, out);
    case OP_LSE: return jag_logsumexp(x, dims, n, keep, out);
    default: return jag_std(x, dims, n, corr, keep, out);
    }
}

static int n_compared;

/* The fast kernel and the reference agree on x reduced over dims. */
static void check_dims(dims_op op, const jag_tensor *x, const int *dims, int n, int64_t corr, bool keep) {
    jag_tensor *fast = NULL, *ref = NULL;
    jag_status st = call_dims(op, x, dims, n, corr, keep, &fast);
    int64_t d64[JAG_MAX_DIMS];
    for (int i = 0; i < n; i++) d64[i] = dims[i];
    jag_value args[4] = {jag__v_tensor(x), jag__v_ints(d64, n)};
    int nargs = 3;
    if (op == OP_VAR || op == OP_STD) args[2] = jag__v_int(corr), args[3] = jag__v_bool(keep), nargs = 4;
    else args[2] = jag__v_bool(keep);
    jag_status rst = run_ref(dims_op_id[op], dims_op_ref[op], args, nargs, &ref);
    CHECK_MSG(st == JAG_OK && rst == JAG_OK, "%s: %s / %s", dims_op_name[op], jag_status_str(st), jag_last_error());
    if (fast && ref) {
        double tol = rtol_for(jag_tensor_dtype(x));
        CHECK(jag_tensor_dtype(fast) == jag_tensor_dtype(ref));
        CHECK_MSG(t_allclose(fast, ref, tol, tol), "%s over %d dims (first %d), keepdim %d, x dtype %s", dims_op_name[op], n,
                  n ? dims[0] : -1, keep, jag_dtype_name(jag_tensor_dtype(x)));
        n_compared++;
    }
    jag_release(fast);
    jag_release(ref);
}

/* Values for an op that keep results finite: prod of floats near 1, of
 * integers small (int64 products wrap identically in both). */
static jag_tensor *input_for(dims_op op, const int64_t *sizes, int nd, jag_dtype dt, uint64_t seed) {
    if (op == OP_PROD) return jag_dtype_is_floating(dt) ? t_rand(sizes, nd, dt, 0.5, 1.5, seed) : t_randint(sizes, nd, dt, -3, 4, seed);
    if (!jag_dtype_is_floating(dt)) return t_randint(sizes, nd, dt, -50, 50, seed);
    if (op == OP_AMAX || op == OP_AMIN) return t_randint(sizes, nd, dt, -5, 5, seed); /* ties */
    return t_rand(sizes, nd, dt, -2, 3, seed);
}

static void test_dims_ops_vs_ref(void) {
    TEST_BEGIN();
    const int64_t s3[] = {4, 5, 6}, s4[] = {3, 1, 4, 5}, s17[] = {2, 3, 17};
    static const int dim_sets[][4] = {{0}, {1}, {2}, {-1}, {-3}, {0, 2}, {2, 0}, {1, 2}, {0, 1}, {-1, 0, 1}};
    static const int dim_n[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 3};
    int nsets = (int)(sizeof dim_n / sizeof dim_n[0]);
    for (int op = 0; op < N_DIMS_OPS; op++) {
        for (size_t di = 0; di < sizeof all_dtypes / sizeof all_dtypes[0]; di++) {
            jag_dtype dt = all_dtypes[di];
            if (float_only((dims_op)op) && !jag_dtype_is_floating(dt)) continue;
            jag_tensor *x3 = input_for((dims_op)op, s3, 3, dt, 11 + op);
            jag_tensor *x17 = input_for((dims_op)op, s17, 3, dt, 12 + op);
            for (int v = 0; v < 3; v++) {
                jag_tensor *a = variant(x3, v), *b = variant(x17, v);
                for (int keep = 0; keep < 2; keep++) {
                    check_dims((dims_op)op, a, NULL, 0, 1, keep);
                    for (int s = 0; s < nsets; s++) {
                        check_dims((dims_op)op, a, dim_sets[s], dim_n[s], 1, keep);
                        check_dims((dims_op)op, b, dim_sets[s], dim_n[s], 0, keep);
                    }
                }
                jag_release(a);
                jag_release(b);
            }
            /* 4-d with a size-1 dim, every single dim and a few sets */
            jag_tensor *x4 = input_for((dims_op)op, s4, 4, dt, 13 + op);
            static const int sets4[][3] = {{0}, {1}, {2}, {3}, {1, 3}, {0, 2}, {0, 1, 3}};
            static const int n4[] = {1, 1, 1, 1, 2, 2, 3};
            for (int v = 0; v < 3; v++) {
                jag_tensor *a = variant(x4, v);
                for (int s = 0; s < 7; s++) check_dims((dims_op)op, a, sets4[s], n4[s], 1, s % 2);
                check_dims((dims_op)op, a, NULL, 0, 0, false);
                jag_release(a);
            }
            /* broadcast input: (1, 5, 6) expanded to (4, 5, 6), and (4, 5, 1) to (4, 5, 6) */
            const int64_t s156[] = {1, 5, 6}, s451[] = {4, 5, 1};
            jag_tensor *small = input_for((dims_op)op, s156, 3, dt, 14), *small2 = input_for((dims_op)op, s451, 3, dt, 15);
            jag_tensor *e = NULL, *e2 = NULL;
            CHECK_OK(jag_expand(small, s3, 3, &e));
            CHECK_OK(jag_expand(small2, s3, 3, &e2));
            for (int s = 0; s < nsets; s++) {
                check_dims((dims_op)op, e, dim_sets[s], dim_n[s], 1, false);
                check_dims((dims_op)op, e2, dim_sets[s], dim_n[s], 1, true);
            }
            check_dims((dims_op)op, e, NULL, 0, 1, false);
            check_dims((dims_op)op, e2, NULL, 0, 1, false);
            jag_release(e), jag_release(e2), jag_release(small), jag_release(small2);
            jag_release(x3), jag_release(x17), jag_release(x4);
        }
    }
    CHECK(n_compared > 1500);
}

/* ---- index ops against the reference --------------------------------------- */

static void check_index(int which, const jag_tensor *x, int dim, bool keep) {
    /* which: 0 argmax, 1 argmin, 2 max_dim, 3 min_dim */
    jag_tensor *fast[2] = {NULL, NULL}, *ref[2] = {NULL, NULL};
    jag_status st;
    if (which == 0) st = jag_argmax(x, dim, keep, &fast[0]);
    else if (which == 1) st = jag_argmin(x, dim, keep, &fast[0]);
    else if (which == 2) st = jag_max_dim(x, dim, keep, &fast[0], &fast[1]);
    else st = jag_min_dim(x, dim, keep, &fast[0], &fast[1]);
    static const jag_op_id ids[] = {JAG_OP_argmax, JAG_OP_argmin, JAG_OP_max_dim, JAG_OP_min_dim};
    static const kern_fn refs[] = {jag__ref_argmax, jag__ref_argmin, jag__ref_max_dim, jag__ref_min_dim};
    jag_value args[3] = {jag__v_tensor(x), jag__v_int(dim), jag__v_bool(keep)};
    jag_status rst = run_ref(ids[which], refs[which], args, 3, ref);
    CHECK_MSG(st == JAG_OK && rst == JAG_OK, "index op %d dim %d: %s", which, dim, jag_last_error());
    for (int i = 0; i < 2; i++) {
        if (fast[i] && ref[i]) {
            CHECK(jag_tensor_dtype(fast[i]) == jag_tensor_dtype(ref[i]));
            CHECK_MSG(t_allclose(fast[i], ref[i], 0, 0), "index op %d dim %d keep %d output %d", which, dim, keep, i);
        }
        jag_release(fast[i]);
        jag_release(ref[i]);
    }
}

static void test_index_ops_vs_ref(void) {
    TEST_BEGIN();
    const int64_t s3[] = {4, 5, 6}, s20[] = {3, 40};
    for (size_t di = 0; di < sizeof all_dtypes / sizeof all_dtypes[0]; di++) {
        jag_dtype dt = all_dtypes[di];
        jag_tensor *x = t_randint(s3, 3, dt, 0, 4, 21), *y = t_randint(s20, 2, dt, -3, 3, 22);
        for (int v = 0; v < 3; v++) {
            jag_tensor *a = variant(x, v), *b = variant(y, v);
            for (int which = 0; which < 4; which++) {
                for (int keep = 0; keep < 2; keep++) {
                    for (int d = -3; d < 3; d++) check_index(which, a, d, keep);
                    for (int d = -2; d < 2; d++) check_index(which, b, d, keep);
                    if (which < 2) check_index(which, a, JAG_DIM_ALL, keep), check_index(which, b, JAG_DIM_ALL, keep);
                }
            }
            jag_release(a), jag_release(b);
        }
        jag_release(x), jag_release(y);
    }
    /* NaNs in floats: NaN is both the max and the min, first one wins */
    for (int f = 0; f < 2; f++) {
        jag_tensor *x = t_randint(s3, 3, f ? JAG_FLOAT64 : JAG_FLOAT32, 0, 4, 23), *c = NULL;
        CHECK_OK(jag_contiguous(x, &c));
        for (int64_t i = 3; i < 120; i += 7) {
            if (f) ((double *)jag_data(c))[i] = NAN;
            else ((float *)jag_data(c))[i] = NAN;
        }
        for (int v = 0; v < 3; v++) {
            jag_tensor *a = variant(c, v);
            for (int which = 0; which < 4; which++)
                for (int d = 0; d < 3; d++) check_index(which, a, d, false);
            check_index(0, a, JAG_DIM_ALL, false);
            check_index(1, a, JAG_DIM_ALL, true);
            for (int op = OP_AMAX; op <= OP_AMIN; op++) {
                check_dims((dims_op)op, a, NULL, 0, 0, false);
                const int d02[] = {0, 2};
                check_dims((dims_op)op, a, d02, 2, 0, false);
            }
            jag_release(a);
        }
        jag_release(x), jag_release(c);
    }
}

/* A middle dim of a contiguous float tensor of at least 2048 elements (which
 * runs as uniform segments of the ragged engine): every reduction and index
 * op against the reference, with ties, NaN and infinities among the values,
 * a reduced dim of size 1, var / std past the count (correction 2 of 1 and 2
 * rows), and the strided variants (which take the dense kernels). */
static void test_middle_dim_segments_vs_ref(void) {
    TEST_BEGIN();
    const int64_t shapes[][3] = {{3, 50, 17}, {1, 700, 3}, {40, 9, 8}, {300, 1, 8}, {1024, 2, 2}};
    int before = n_compared;
    for (int f = 0; f < 2; f++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int special = 0; special < 2; special++) {
                jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
                jag_tensor *x = t_randint(shapes[si], 3, dt, -4, 4, 40 + si), *c = NULL;
                CHECK_OK(jag_contiguous(x, &c));
                int64_t n = jag_numel(c);
                CHECK(n >= 2048);
                if (special) t_put_specials(c, 5, 97);
                for (int v = 0; v < 2; v++) {
                    jag_tensor *a = v ? t_noncontig(c) : jag_retain(c);
                    const int d1[1] = {1};
                    for (int keep = 0; keep < 2; keep++) {
                        for (int op = 0; op < N_DIMS_OPS; op++) {
                            if (op == OP_PROD) continue;
                            for (int64_t corr = 0; corr < (op == OP_VAR || op == OP_STD ? 3 : 1); corr++) {
                                check_dims((dims_op)op, a, d1, 1, corr, keep);
                                if (shapes[si][0] > 1) check_dims((dims_op)op, a, (const int[]){0}, 1, corr, keep);
                            }
                        }
                        for (int which = 0; which < 4; which++) check_index(which, a, 1, keep);
                    }
                    jag_release(a);
                }
                jag_release(x), jag_release(c);
            }
    CHECK(n_compared - before == 2 * 2 * 2 * 2 * (5 + 4) * 11); /* dtypes, values, layouts, keepdim; dims 1 and 0 */
}

/* ---- hand-computed values -------------------------------------------------- */

static void test_sum_hand(void) {
    TEST_BEGIN();
    const double v[] = {1, 2, 3, 4, 5, 6};
    const int64_t s[] = {2, 3};
    for (size_t di = 0; di < 4; di++) {
        jag_dtype dt = all_dtypes[di];
        jag_tensor *x = t_vals(v, s, 2, dt), *y = NULL;
        jag_dtype want = jag_dtype_is_floating(dt) ? dt : JAG_INT64;
        const int d0[] = {0}, d1[] = {1}, dm1[] = {-1}, d01[] = {0, 1};
        CHECK_OK(jag_sum(x, d0, 1, false, &y));
        const double e0[] = {5, 7, 9};
        const int64_t s3[] = {3};
        CHECK(jag_tensor_dtype(y) == want && shape_is(y, s3, 1) && values_are(y, e0, 0));
        jag_release(y);
        CHECK_OK(jag_sum(x, d1, 1, false, &y));
        const double e1[] = {6, 15};
        CHECK(values_are(y, e1, 0));
        jag_release(y);
        CHECK_OK(jag_sum(x, dm1, 1, true, &y));
        const int64_t s21[] = {2, 1};
        CHECK(shape_is(y, s21, 2) && values_are(y, e1, 0));
        jag_release(y);
        CHECK_OK(jag_sum(x, d01, 2, false, &y));
        const double e21[] = {21};
        CHECK(jag_ndim(y) == 0 && values_are(y, e21, 0));
        jag_release(y);
        CHECK_OK(jag_sum(x, NULL, 0, true, &y));
        const int64_t s11[] = {1, 1};
        CHECK(shape_is(y, s11, 2) && values_are(y, e21, 0));
        jag_release(y);
        CHECK_OK(jag_prod(x, d0, 1, false, &y));
        const double p0[] = {4, 10, 18};
        CHECK(jag_tensor_dtype(y) == want && values_are(y, p0, 0));
        jag_release(y);
        CHECK_OK(jag_prod(x, NULL, 0, false, &y));
        const double p720[] = {720};
        CHECK(values_are(y, p720, 0));
        jag_release(y);
        jag_release(x);
    }
    /* bool sums and products count in int64 */
    const double bv[] = {1, 0, 1, 1, 1, 0};
    const int64_t s2[] = {2, 3};
    jag_tensor *b = t_vals(bv, s2, 2, JAG_BOOL), *y = NULL;
    CHECK_OK(jag_sum(b, NULL, 0, false, &y));
    const double four[] = {4};
    CHECK(jag_tensor_dtype(y) == JAG_INT64 && values_are(y, four, 0));
    jag_release(y);
    const int d0[] = {0};
    CHECK_OK(jag_prod(b, d0, 1, false, &y));
    const double bp[] = {1, 0, 0};
    CHECK(jag_tensor_dtype(y) == JAG_INT64 && values_are(y, bp, 0));
    jag_release(y);
    jag_release(b);
}

static void test_int_sums_exact(void) {
    TEST_BEGIN();
    /* int32 sums beyond 2^31 and int64 sums beyond 2^53 stay exact */
    const int64_t s[] = {4};
    int32_t v32[] = {2000000000, 2000000000, 2000000000, 7};
    int64_t v64[] = {(1LL << 60) + 1, (1LL << 60) + 3, -(1LL << 59), 5};
    jag_tensor *a = NULL, *b = NULL, *y = NULL;
    CHECK_OK(jag_from_data(v32, s, 1, JAG_INT32, &a));
    CHECK_OK(jag_from_data(v64, s, 1, JAG_INT64, &b));
    CHECK_OK(jag_sum(a, NULL, 0, false, &y));
    CHECK(jag_tensor_dtype(y) == JAG_INT64 && *(int64_t *)jag_data(y) == 6000000007LL);
    jag_release(y);
    CHECK_OK(jag_sum(b, NULL, 0, false, &y));
    CHECK(*(int64_t *)jag_data(y) == (1LL << 60) + 1 + (1LL << 60) + 3 - (1LL << 59) + 5);
    jag_release(y);
    CHECK_OK(jag_amax(b, NULL, 0, false, &y));
    CHECK(*(int64_t *)jag_data(y) == (1LL << 60) + 3);
    jag_release(y);
    CHECK_OK(jag_prod(a, NULL, 0, false, &y)); /* wraps as int64 */
    CHECK(*(int64_t *)jag_data(y) == (int64_t)(2000000000ULL * 2000000000ULL * 2000000000ULL * 7ULL));
    jag_release(y);
    jag_release(a), jag_release(b);
}

static void test_mean_var_std_hand(void) {
    TEST_BEGIN();
    const double v[] = {1, 2, 3, 4, 5, 6};
    const int64_t s[] = {2, 3};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        double tol = f ? 1e-15 : 1e-6;
        jag_tensor *x = t_vals(v, s, 2, dt), *y = NULL;
        const int d0[] = {0}, d1[] = {1};
        CHECK_OK(jag_mean(x, d1, 1, false, &y));
        const double m1[] = {2, 5};
        CHECK(jag_tensor_dtype(y) == dt && values_are(y, m1, tol));
        jag_release(y);
        CHECK_OK(jag_mean(x, d0, 1, true, &y));
        const double m0[] = {2.5, 3.5, 4.5};
        const int64_t s13[] = {1, 3};
        CHECK(shape_is(y, s13, 2) && values_are(y, m0, tol));
        jag_release(y);
        CHECK_OK(jag_var(x, d1, 1, 1, false, &y));
        const double v1[] = {1, 1};
        CHECK(values_are(y, v1, tol));
        jag_release(y);
        CHECK_OK(jag_var(x, d1, 1, 0, false, &y));
        const double v0[] = {2.0 / 3, 2.0 / 3};
        CHECK(values_are(y, v0, tol));
        jag_release(y);
        CHECK_OK(jag_var(x, d0, 1, 1, false, &y)); /* COL mode */
        const double vc[] = {4.5, 4.5, 4.5};
        CHECK(values_are(y, vc, tol));
        jag_release(y);
        CHECK_OK(jag_var(x, NULL, 0, 1, false, &y));
        const double vall[] = {3.5};
        CHECK(values_are(y, vall, tol));
        jag_release(y);
        CHECK_OK(jag_std(x, NULL, 0, 1, false, &y));
        const double sall[] = {sqrt(3.5)};
        CHECK(values_are(y, sall, tol));
        jag_release(y);
        CHECK_OK(jag_std(x, d0, 1, 0, false, &y));
        const double sc[] = {1.5, 1.5, 1.5};
        CHECK(values_are(y, sc, tol));
        jag_release(y);
        /* the correction reaches or passes the count: inf (M2 > 0), NaN (M2 == 0) */
        CHECK_OK(jag_var(x, d0, 1, 2, false, &y));
        const double vinf[] = {INFINITY, INFINITY, INFINITY};
        CHECK(values_are(y, vinf, 0));
        jag_release(y);
        CHECK_OK(jag_var(x, d0, 1, 5, false, &y));
        CHECK(values_are(y, vinf, 0));
        jag_release(y);
        /* a negative correction divides by more than the count */
        CHECK_OK(jag_var(x, d1, 1, -1, false, &y));
        const double vneg[] = {0.5, 0.5};
        CHECK(values_are(y, vneg, tol));
        jag_release(y);
        jag_tensor *one = NULL;
        const int64_t s1[] = {1};
        CHECK_OK(jag_full(s1, 1, 5.0, dt, &one));
        CHECK_OK(jag_var(one, NULL, 0, 1, false, &y));
        const double nan1[] = {NAN};
        CHECK(values_are(y, nan1, 0));
        jag_release(y);
        CHECK_OK(jag_std(one, NULL, 0, 0, false, &y));
        const double zero[] = {0};
        CHECK(values_are(y, zero, 0));
        jag_release(y);
        jag_release(one);
        jag_release(x);
    }
    /* var of large offsets stays accurate (naive sum-of-squares would not) */
    const double big[] = {1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4};
    const int64_t s4[] = {4};
    jag_tensor *x = t_vals(big, s4, 1, JAG_FLOAT64), *y = NULL;
    CHECK_OK(jag_var(x, NULL, 0, 1, false, &y));
    CHECK_CLOSE(t_get(y, 0), 5.0 / 3.0, 1e-12);
    jag_release(y), jag_release(x);
}

static void test_extrema_hand(void) {
    TEST_BEGIN();
    const double v[] = {3, -1, 7, 7, 0, -2};
    const int64_t s[] = {2, 3};
    for (size_t di = 0; di < 4; di++) {
        jag_dtype dt = all_dtypes[di];
        jag_tensor *x = t_vals(v, s, 2, dt), *y = NULL, *idx = NULL;
        const int d0[] = {0}, d1[] = {1};
        CHECK_OK(jag_amax(x, d0, 1, false, &y));
        const double a0[] = {7, 0, 7};
        CHECK(jag_tensor_dtype(y) == dt && values_are(y, a0, 0));
        jag_release(y);
        CHECK_OK(jag_amin(x, d1, 1, false, &y));
        const double i1[] = {-1, -2};
        CHECK(values_are(y, i1, 0));
        jag_release(y);
        CHECK_OK(jag_max(x, &y));
        const double seven[] = {7};
        CHECK(jag_ndim(y) == 0 && values_are(y, seven, 0));
        jag_release(y);
        CHECK_OK(jag_min(x, &y));
        const double m2[] = {-2};
        CHECK(values_are(y, m2, 0));
        jag_release(y);
        /* max_dim: values and first indices */
        CHECK_OK(jag_max_dim(x, 1, false, &y, &idx));
        const double mv[] = {7, 7}, mi[] = {2, 0};
        CHECK(jag_tensor_dtype(y) == dt && jag_tensor_dtype(idx) == JAG_INT64);
        CHECK(values_are(y, mv, 0) && values_are(idx, mi, 0));
        jag_release(y), jag_release(idx);
        CHECK_OK(jag_min_dim(x, 0, true, &y, &idx));
        const double nv[] = {3, -1, -2}, ni[] = {0, 0, 1};
        const int64_t s13[] = {1, 3};
        CHECK(shape_is(y, s13, 2) && shape_is(idx, s13, 2) && values_are(y, nv, 0) && values_are(idx, ni, 0));
        jag_release(y), jag_release(idx);
        /* argmax over everything: the first 7 at flat index 2 */
        CHECK_OK(jag_argmax(x, JAG_DIM_ALL, false, &y));
        const double two[] = {2};
        CHECK(jag_ndim(y) == 0 && jag_tensor_dtype(y) == JAG_INT64 && values_are(y, two, 0));
        jag_release(y);
        CHECK_OK(jag_argmin(x, JAG_DIM_ALL, true, &y));
        const double five[] = {5};
        const int64_t s11[] = {1, 1};
        CHECK(shape_is(y, s11, 2) && values_are(y, five, 0));
        jag_release(y);
        CHECK_OK(jag_argmax(x, -2, false, &y));
        const double am0[] = {1, 1, 0};
        CHECK(values_are(y, am0, 0));
        jag_release(y);
        jag_release(x);
    }
    /* ties: first occurrence */
    const double t[] = {1, 3, 3, 2, 3};
    const int64_t s5[] = {5};
    jag_tensor *x = t_vals(t, s5, 1, JAG_FLOAT32), *y = NULL;
    CHECK_OK(jag_argmax(x, 0, false, &y));
    CHECK(t_get(y, 0) == 1);
    jag_release(y), jag_release(x);
    /* NaN propagates through amax/amin and wins argmax/argmin (first NaN) */
    const double n[] = {1, NAN, 5, NAN, -4};
    for (int f = 0; f < 2; f++) {
        x = t_vals(n, s5, 1, f ? JAG_FLOAT64 : JAG_FLOAT32);
        CHECK_OK(jag_amax(x, NULL, 0, false, &y));
        CHECK(isnan(t_get(y, 0)));
        jag_release(y);
        CHECK_OK(jag_amin(x, NULL, 0, false, &y));
        CHECK(isnan(t_get(y, 0)));
        jag_release(y);
        CHECK_OK(jag_argmax(x, 0, false, &y));
        CHECK(t_get(y, 0) == 1);
        jag_release(y);
        CHECK_OK(jag_argmin(x, JAG_DIM_ALL, false, &y));
        CHECK(t_get(y, 0) == 1);
        jag_release(y);
        jag_release(x);
    }
    /* bool: max is true if any */
    const double bv[] = {0, 0, 1, 0, 1};
    x = t_vals(bv, s5, 1, JAG_BOOL);
    CHECK_OK(jag_amax(x, NULL, 0, false, &y));
    CHECK(jag_tensor_dtype(y) == JAG_BOOL && t_get(y, 0) == 1);
    jag_release(y);
    CHECK_OK(jag_argmax(x, 0, false, &y));
    CHECK(t_get(y, 0) == 2);
    jag_release(y);
    jag_release(x);
}

/* ---- empty tensors, size-1 dims, 0-d tensors ------------------------------- */

static void test_empty(void) {
    TEST_BEGIN();
    const int64_t s03[] = {0, 3}, s3[] = {3}, s0[] = {0};
    const int d0[] = {0}, d1[] = {1};
    for (int f = 0; f < 3; f++) {
        jag_dtype dt = f == 0 ? JAG_FLOAT32 : f == 1 ? JAG_FLOAT64 : JAG_INT32;
        jag_tensor *x = NULL, *y = NULL, *idx = NULL;
        CHECK_OK(jag_empty(s03, 2, dt, &x));
        CHECK_OK(jag_sum(x, d0, 1, false, &y));
        const double z[] = {0, 0, 0}, o[] = {1, 1, 1}, nn[] = {NAN, NAN, NAN};
        CHECK(shape_is(y, s3, 1) && values_are(y, z, 0));
        jag_release(y);
        CHECK_OK(jag_sum(x, d1, 1, false, &y));
        CHECK(shape_is(y, s0, 1));
        jag_release(y);
        CHECK_OK(jag_sum(x, NULL, 0, false, &y));
        CHECK(jag_ndim(y) == 0 && values_are(y, z, 0));
        jag_release(y);
        CHECK_OK(jag_prod(x, d0, 1, true, &y));
        const int64_t s13[] = {1, 3};
        CHECK(shape_is(y, s13, 2) && values_are(y, o, 0));
        jag_release(y);
        if (f < 2) {
            CHECK_OK(jag_mean(x, d0, 1, false, &y));
            CHECK(values_are(y, nn, 0));
            jag_release(y);
            CHECK_OK(jag_var(x, d0, 1, 1, false, &y));
            CHECK(values_are(y, nn, 0));
            jag_release(y);
            CHECK_OK(jag_std(x, NULL, 0, 0, false, &y));
            CHECK(values_are(y, nn, 0));
            jag_release(y);
        }
        /* amax over the non-empty dim is fine (an empty result) */
        CHECK_OK(jag_amax(x, d1, 1, false, &y));
        CHECK(shape_is(y, s0, 1));
        jag_release(y);
        CHECK_OK(jag_argmin(x, 1, false, &y));
        CHECK(shape_is(y, s0, 1));
        jag_release(y);
        CHECK_OK(jag_max_dim(x, 1, true, &y, &idx));
        const int64_t s01[] = {0, 1};
        CHECK(shape_is(y, s01, 2) && shape_is(idx, s01, 2));
        jag_release(y), jag_release(idx);
        /* ... over the empty dim is an error */
        y = idx = NULL;
        CHECK_ERR(jag_amax(x, d0, 1, false, &y), JAG_EINVAL, "empty");
        CHECK(y == NULL);
        CHECK_ERR(jag_amin(x, NULL, 0, false, &y), JAG_EINVAL, "empty");
        CHECK_ERR(jag_max(x, &y), JAG_EINVAL, "empty");
        CHECK_MSG(strncmp(jag_last_error(), "jag_max:", 8) == 0, "got %s", jag_last_error());
        CHECK_ERR(jag_argmax(x, 0, false, &y), JAG_EINVAL, "empty");
        CHECK_ERR(jag_argmin(x, JAG_DIM_ALL, false, &y), JAG_EINVAL, "empty");
        CHECK_ERR(jag_max_dim(x, 0, false, &y, &idx), JAG_EINVAL, "empty");
        CHECK(y == NULL && idx == NULL);
        jag_release(x);
    }
}

static void test_size1_and_0d(void) {
    TEST_BEGIN();
    jag_tensor *s = NULL, *y = NULL, *idx = NULL;
    CHECK_OK(jag_full(NULL, 0, 2.5, JAG_FLOAT32, &s));
    const int d0[] = {0}, dm1[] = {-1};
    CHECK_OK(jag_sum(s, NULL, 0, false, &y));
    CHECK(jag_ndim(y) == 0 && t_get(y, 0) == 2.5);
    jag_release(y);
    CHECK_OK(jag_sum(s, d0, 1, true, &y));
    CHECK(jag_ndim(y) == 0 && t_get(y, 0) == 2.5);
    jag_release(y);
    CHECK_OK(jag_mean(s, dm1, 1, false, &y));
    CHECK(t_get(y, 0) == 2.5);
    jag_release(y);
    CHECK_OK(jag_var(s, NULL, 0, 0, false, &y));
    CHECK(t_get(y, 0) == 0);
    jag_release(y);
    CHECK_OK(jag_var(s, NULL, 0, 1, false, &y));
    CHECK(isnan(t_get(y, 0)));
    jag_release(y);
    CHECK_OK(jag_argmax(s, 0, false, &y));
    CHECK(jag_ndim(y) == 0 && t_get(y, 0) == 0);
    jag_release(y);
    CHECK_OK(jag_argmin(s, JAG_DIM_ALL, true, &y));
    CHECK(jag_ndim(y) == 0 && t_get(y, 0) == 0);
    jag_release(y);
    CHECK_OK(jag_max_dim(s, -1, false, &y, &idx));
    CHECK(jag_ndim(y) == 0 && t_get(y, 0) == 2.5 && t_get(idx, 0) == 0);
    jag_release(y), jag_release(idx);
    const int d00[] = {0, -1};
    CHECK_ERR(jag_sum(s, d00, 2, false, &y), JAG_EINVAL, "more than once");
    CHECK_ERR(jag_sum(s, (const int[]){1}, 1, false, &y), JAG_ERANGE, "dims");
    jag_release(s);
    /* all size-1 dims */
    const int64_t s111[] = {1, 1, 1};
    jag_tensor *x = NULL;
    CHECK_OK(jag_full(s111, 3, -3.0, JAG_FLOAT64, &x));
    const int d1[] = {1};
    CHECK_OK(jag_sum(x, d1, 1, false, &y));
    const int64_t s11[] = {1, 1};
    CHECK(shape_is(y, s11, 2) && t_get(y, 0) == -3);
    jag_release(y);
    CHECK_OK(jag_amin(x, NULL, 0, true, &y));
    CHECK(shape_is(y, s111, 3) && t_get(y, 0) == -3);
    jag_release(y);
    CHECK_OK(jag_argmax(x, 2, true, &y));
    CHECK(shape_is(y, s111, 3) && t_get(y, 0) == 0);
    jag_release(y);
    jag_release(x);
}

/* ---- large tensors: the parallel paths, long rows, accuracy ---------------- */

static void test_large(void) {
    TEST_BEGIN();
    const int64_t s[] = {300, 200};
    const int d0[] = {0}, d1[] = {1};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_rand(s, 2, dt, -1, 2, 31);
        for (int v = 0; v < 3; v++) {
            jag_tensor *a = variant(x, v);
            for (int op = 0; op < N_DIMS_OPS; op++) {
                check_dims((dims_op)op == OP_PROD ? OP_SUM : (dims_op)op, a, d0, 1, 1, false);
                check_dims((dims_op)op == OP_PROD ? OP_SUM : (dims_op)op, a, d1, 1, 1, true);
                check_dims((dims_op)op == OP_PROD ? OP_SUM : (dims_op)op, a, NULL, 0, 1, false);
            }
            for (int which = 0; which < 4; which++) {
                check_index(which, a, 0, false);
                check_index(which, a, 1, false);
            }
            check_index(0, a, JAG_DIM_ALL, false);
            jag_release(a);
        }
        jag_release(x);
    }
    /* integers, large */
    jag_tensor *xi = t_randint(s, 2, JAG_INT32, -1000, 1000, 32);
    check_dims(OP_SUM, xi, d0, 1, 0, false);
    check_dims(OP_SUM, xi, d1, 1, 0, false);
    check_dims(OP_AMAX, xi, NULL, 0, 0, false);
    check_index(1, xi, JAG_DIM_ALL, false);
    jag_release(xi);
    /* few long rows: (2, 50000) and (1, 100000) split each row across threads */
    const int64_t s2[] = {2, 50000}, s1[] = {1, 100000};
    for (int f = 0; f < 2; f++) {
        jag_tensor *a = t_rand(s2, 2, f ? JAG_FLOAT64 : JAG_FLOAT32, -1, 1, 33);
        jag_tensor *b = t_randint(s1, 2, f ? JAG_FLOAT64 : JAG_INT64, -100000, 100000, 34);
        for (int op = 0; op < N_DIMS_OPS; op++) {
            if (op == OP_PROD) continue;
            check_dims((dims_op)op, a, d1, 1, 1, false);
            check_dims((dims_op)op, a, NULL, 0, 1, false);
            if (f || !float_only((dims_op)op)) check_dims((dims_op)op, b, NULL, 0, 1, false);
        }
        for (int which = 0; which < 4; which++) check_index(which, a, 1, false), check_index(which, b, 1, true);
        check_index(0, b, JAG_DIM_ALL, false);
        jag_release(a), jag_release(b);
    }
}

/* A float32 sum of 1e6 values against a float64 reference: the blocked /
 * pairwise accumulation keeps it within rounding of the result (a naive
 * float32 loop is off by ~1e-4 relative). */
static void test_long_row_accuracy(void) {
    TEST_BEGIN();
    const int64_t n = 1000000, s[] = {1000000}, sc[] = {125000, 8};
    jag_tensor *x = t_rand(s, 1, JAG_FLOAT32, 0, 1, 41), *y = NULL;
    const float *p = jag_data(x);
    double ref = 0, comp = 0; /* Kahan in float64 */
    for (int64_t i = 0; i < n; i++) {
        double yk = (double)p[i] - comp, t = ref + yk;
        comp = (t - ref) - yk;
        ref = t;
    }
    CHECK_OK(jag_sum(x, NULL, 0, false, &y));
    CHECK_MSG(fabs(t_get(y, 0) - ref) <= 1e-7 * ref, "sum %.9g vs %.9g", t_get(y, 0), ref);
    jag_release(y);
    CHECK_OK(jag_mean(x, NULL, 0, false, &y));
    CHECK_MSG(fabs(t_get(y, 0) - ref / n) <= 1e-7 * ref / n, "mean %.9g vs %.9g", t_get(y, 0), ref / n);
    jag_release(y);
    /* var of 1000 + u: large offset, small spread */
    float *q = malloc((size_t)n * sizeof *q);
    for (int64_t i = 0; i < n; i++) q[i] = p[i] + 1000.0f;
    jag_tensor *off = NULL;
    CHECK_OK(jag_from_data(q, s, 1, JAG_FLOAT32, &off));
    double m = 0, m2 = 0;
    for (int64_t i = 0; i < n; i++) m += q[i];
    m /= (double)n;
    for (int64_t i = 0; i < n; i++) m2 += ((double)q[i] - m) * ((double)q[i] - m);
    CHECK_OK(jag_var(off, NULL, 0, 1, false, &y));
    CHECK_MSG(fabs(t_get(y, 0) - m2 / (n - 1)) <= 1e-6 * m2 / (n - 1), "var %.9g vs %.9g", t_get(y, 0), m2 / (n - 1));
    jag_release(y);
    /* the same values as (125000, 8) summed over dim 0: COL mode */
    jag_tensor *xc = NULL;
    CHECK_OK(jag_view(x, sc, 2, &xc));
    const int d0[] = {0};
    CHECK_OK(jag_sum(xc, d0, 1, false, &y));
    for (int c = 0; c < 8; c++) {
        double r = 0;
        for (int64_t i = 0; i < 125000; i++) r += p[i * 8 + c];
        CHECK_MSG(fabs(t_get(y, c) - r) <= 1e-7 * r, "col %d: %.9g vs %.9g", c, t_get(y, c), r);
    }
    jag_release(y);
    CHECK_OK(jag_var(xc, d0, 1, 0, false, &y));
    for (int c = 0; c < 8; c++) {
        double r = 0, r2 = 0;
        for (int64_t i = 0; i < 125000; i++) r += p[i * 8 + c];
        r /= 125000;
        for (int64_t i = 0; i < 125000; i++) r2 += (p[i * 8 + c] - r) * (p[i * 8 + c] - r);
        CHECK_CLOSE(t_get(y, c), r2 / 125000, 1e-6 * r2 / 125000);
    }
    jag_release(y);
    jag_release(xc), jag_release(off), jag_release(x);
    free(q);
}

/* The result does not depend on the thread count (fixed summation tree). */
static void test_thread_count_invariance(void) {
    TEST_BEGIN();
    int saved = jag_get_num_threads();
    const int64_t s[] = {1, 300001}, s2[] = {7, 40001};
    jag_tensor *x = t_rand(s, 2, JAG_FLOAT32, -1, 1, 51), *x2 = t_rand(s2, 2, JAG_FLOAT64, -1, 1, 52);
    jag_tensor *y1 = NULL, *y2 = NULL, *z1 = NULL, *z2 = NULL, *v1 = NULL, *v2 = NULL;
    jag_set_num_threads(1);
    CHECK_OK(jag_sum(x, NULL, 0, false, &y1));
    CHECK_OK(jag_var(x2, (const int[]){1}, 1, 1, false, &z1));
    CHECK_OK(jag_std(x, NULL, 0, 1, false, &v1));
    jag_set_num_threads(2);
    CHECK_OK(jag_sum(x, NULL, 0, false, &y2));
    CHECK_OK(jag_var(x2, (const int[]){1}, 1, 1, false, &z2));
    CHECK_OK(jag_std(x, NULL, 0, 1, false, &v2));
    CHECK(t_get(y1, 0) == t_get(y2, 0));
    CHECK(t_get(v1, 0) == t_get(v2, 0));
    CHECK(t_allclose(z1, z2, 0, 0));
    /* COL mode: (1001, 700) over dim 0 is one tile on one thread, two on two */
    const int64_t sc[] = {1001, 700};
    jag_tensor *xc = t_rand(sc, 2, JAG_FLOAT32, -1, 1, 53);
    for (int op = 0; op < 3; op++) {
        jag_tensor *c1 = NULL, *c2 = NULL;
        for (int nt = 1; nt <= 2; nt++) {
            jag_set_num_threads(nt);
            jag_tensor **c = nt == 1 ? &c1 : &c2;
            if (op == 0) CHECK_OK(jag_sum(xc, (const int[]){0}, 1, false, c));
            else if (op == 1) CHECK_OK(jag_var(xc, (const int[]){0}, 1, 1, false, c));
            else CHECK_OK(jag_argmax(xc, 0, false, c));
        }
        CHECK_MSG(c1 && c2 && t_allclose(c1, c2, 0, 0), "COL op %d differs across thread counts", op);
        jag_release(c1), jag_release(c2);
    }
    jag_release(xc);
    jag_set_num_threads(saved);
    jag_release(y1), jag_release(y2), jag_release(z1), jag_release(z2), jag_release(v1), jag_release(v2);
    jag_release(x), jag_release(x2);
}

/* ---- errors --------------------------------------------------------------- */

static void test_errors(void) {
    TEST_BEGIN();
    const int64_t s[] = {2, 3, 4};
    jag_tensor *x = t_rand(s, 3, JAG_FLOAT32, 0, 1, 61), *xi = t_randint(s, 3, JAG_INT32, 0, 5, 62);
    jag_tensor *xb = t_randint(s, 3, JAG_BOOL, 0, 2, 63), *y = NULL, *idx = NULL;
    long live = jag__live_tensors();
    CHECK_ERR(jag_sum(x, (const int[]){3}, 1, false, &y), JAG_ERANGE, "jag_sum: argument 'dims'");
    CHECK_ERR(jag_sum(x, (const int[]){-4}, 1, false, &y), JAG_ERANGE, "expected a dim in [-3, 2]");
    CHECK_ERR(jag_prod(x, (const int[]){0, 2, 0}, 3, false, &y), JAG_EINVAL, "more than once");
    CHECK_ERR(jag_amax(x, (const int[]){1, -2}, 2, false, &y), JAG_EINVAL, "dim 1 more than once");
    CHECK_ERR(jag_mean(xi, NULL, 0, false, &y), JAG_EDTYPE, "jag_mean: argument 'x' has dtype int32");
    CHECK_ERR(jag_mean(xb, NULL, 0, false, &y), JAG_EDTYPE, "expected float32 or float64");
    CHECK_ERR(jag_var(xi, NULL, 0, 1, false, &y), JAG_EDTYPE, "jag_var");
    CHECK_ERR(jag_std(xb, NULL, 0, 1, false, &y), JAG_EDTYPE, "jag_std");
    CHECK_ERR(jag_var(x, (const int[]){5}, 1, 1, false, &y), JAG_ERANGE, "dims");
    CHECK_ERR(jag_argmax(x, 3, false, &y), JAG_ERANGE, "jag_argmax: argument 'dim' is 3");
    CHECK_ERR(jag_argmin(x, -4, false, &y), JAG_ERANGE, "or JAG_DIM_ALL");
    CHECK_ERR(jag_max_dim(x, JAG_DIM_ALL, false, &y, &idx), JAG_ERANGE, "jag_max_dim: argument 'dim'");
    CHECK_ERR(jag_min_dim(x, 7, false, &y, &idx), JAG_ERANGE, "jag_min_dim");
    CHECK_ERR(jag_max_dim(x, 0, false, NULL, &idx), JAG_EINVAL, "must not be NULL");
    CHECK_ERR(jag_sum(NULL, NULL, 0, false, &y), JAG_EINVAL, "NULL");
    CHECK_ERR(jag_sum(x, NULL, 9, false, &y), JAG_EINVAL, "dims");
    CHECK_ERR(jag_sum(x, NULL, 1, false, &y), JAG_EINVAL, "dims");
    CHECK_ERR(jag_sum(x, NULL, 0, false, NULL), JAG_EINVAL, "out");
    CHECK(y == NULL && idx == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(x), jag_release(xi), jag_release(xb);
}

/* logsumexp: special values, large values, empty, and its error */
static void test_logsumexp_hand(void) {
    TEST_BEGIN();
    double v[8] = {-INFINITY, -INFINITY, 1, INFINITY, NAN, 0, 1000, 1000};
    const int64_t s[] = {4, 2}, s0[] = {0, 3};
    const int d1[] = {1}, d0[] = {0};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        jag_tensor *x = t_vals(v, s, 2, dt), *y = NULL, *yc = NULL, *xt = NULL;
        CHECK_OK(jag_logsumexp(x, d1, 1, false, &y));
        double want[4] = {-INFINITY, INFINITY, NAN, 1000 + log(2.0)};
        CHECK(y && values_are(y, want, f ? 1e-12 : 1e-4));
        /* the COL layout (reduced dim not innermost) agrees */
        CHECK_OK(jag_transpose(x, 0, 1, &xt));
        CHECK_OK(jag_logsumexp(xt, d0, 1, false, &yc));
        CHECK(yc && values_are(yc, want, f ? 1e-12 : 1e-4));
        jag_release(x), jag_release(y), jag_release(yc), jag_release(xt);
        jag_tensor *e = NULL, *ye = NULL;
        CHECK_OK(jag_zeros(s0, 2, dt, &e));
        CHECK_OK(jag_logsumexp(e, d0, 1, false, &ye));
        double ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
        CHECK(ye && jag_numel(ye) == 3 && values_are(ye, ninf, 0));
        jag_release(e), jag_release(ye);
    }
    jag_tensor *xi = NULL, *o = NULL;
    CHECK_OK(jag_zeros(s, 2, JAG_INT64, &xi));
    CHECK_ERR(jag_logsumexp(xi, d1, 1, false, &o), JAG_EDTYPE, "jag_logsumexp: argument 'x' has dtype int64");
    CHECK(o == NULL);
    jag_release(xi);
}

/* logsumexp over long rows (float32's vectorised leaf: 64 lanes for the
 * max, float sums of 16 exps a lane): finite rows of several spreads and
 * offsets, and rows with one -inf, +inf or NaN placed in the main loop or
 * the tail, against the sum in double computed here; a row longer than a
 * leaf segment (4096) combines two leaves. */
static void test_logsumexp_long_rows(void) {
    TEST_BEGIN();
    const int64_t lens[] = {64, 300, 5000};
    for (int li = 0; li < 3; li++) {
        enum { R = 7 };
        int64_t L = lens[li], sz[2] = {R, L};
        double *v = malloc((size_t)(R * L) * sizeof *v);
        for (int64_t i = 0; i < R * L; i++) v[i] = sin(0.37 * (double)i) * (i / L == 1 ? 30.0 : 3.0) + (i / L == 2 ? 1000.0 : 0.0);
        v[3 * L + L / 2] = -INFINITY; /* row 3: one -inf (contributes nothing) */
        v[4 * L + L - 1] = INFINITY;  /* row 4: +inf, in the tail */
        v[5 * L + 5] = NAN;           /* row 5: NaN */
        for (int64_t i = 0; i < L; i++) v[6 * L + i] = (double)(float)(-1e-3 * (double)i); /* row 6: slowly falling */
        for (int f = 0; f < 2; f++) {
            jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
            jag_tensor *x = t_vals(v, sz, 2, dt), *y = NULL;
            const int d1[] = {1};
            CHECK_OK(jag_logsumexp(x, d1, 1, false, &y));
            for (int r = 0; y && r < R; r++) {
                double m = -INFINITY, sum = 0;
                bool nan = false;
                for (int64_t i = 0; i < L; i++) {
                    double xv = t_get(x, r * L + i);
                    nan |= xv != xv;
                    m = xv > m ? xv : m;
                }
                for (int64_t i = 0; i < L && !isinf(m); i++) sum += exp(t_get(x, r * L + i) - m);
                double want = nan ? NAN : isinf(m) ? m : m + log(sum), got = t_get(y, r);
                bool ok = nan ? got != got : isinf(want) ? got == want : fabs(got - want) <= (f ? 1e-12 : 1e-6) * (1 + fabs(want));
                CHECK_MSG(ok, "L %lld row %d (%s): %.9g vs %.9g", (long long)L, r, jag_dtype_name(dt), got, want);
            }
            jag_release(x), jag_release(y);
        }
        free(v);
    }
}

/* amax and amin over long rows (float32's vectorised leaf: four vectors,
 * a masked tail, a NaN sending the leaf to the element loop): rows with
 * the extremum in the main loop or the tail, a NaN there (the result is
 * that NaN), +-inf, all equal, against a scan computed here, bit for bit;
 * rows of 5000 combine two leaves. */
static void test_extrema_long_rows(void) {
    TEST_BEGIN();
    const int64_t lens[] = {16, 64, 300, 5000};
    for (int li = 0; li < 4; li++) {
        enum { R = 8 };
        int64_t L = lens[li], sz[2] = {R, L};
        double *v = malloc((size_t)(R * L) * sizeof *v);
        for (int64_t i = 0; i < R * L; i++) v[i] = (double)(float)(cos(0.71 * (double)i) * 5.0);
        v[1 * L + L - 1] = 100, v[1 * L + 0] = -100;    /* row 1: extrema at the ends */
        v[2 * L + L / 3] = NAN;                          /* row 2: NaN in the main loop */
        v[3 * L + L - 1] = NAN;                          /* row 3: NaN last */
        v[4 * L + 1] = INFINITY, v[4 * L + L - 2] = -INFINITY;
        for (int64_t i = 0; i < L; i++) v[5 * L + i] = 2.5; /* row 5: all equal */
        for (int64_t i = 0; i < L; i++) v[6 * L + i] = -INFINITY;
        v[7 * L + L / 2] = 1e30, v[7 * L + L / 2 + 1] = -1e30;
        jag_tensor *x = t_vals(v, sz, 2, JAG_FLOAT32), *mx = NULL, *mn = NULL;
        const int d1[] = {1};
        CHECK_OK(jag_amax(x, d1, 1, false, &mx));
        CHECK_OK(jag_amin(x, d1, 1, false, &mn));
        for (int r = 0; mx && mn && r < R; r++) {
            double hi = t_get(x, r * L), lo = hi;
            bool nan = false;
            for (int64_t i = 0; i < L; i++) {
                double a = t_get(x, r * L + i);
                nan |= a != a;
                hi = a > hi ? a : hi, lo = a < lo ? a : lo;
            }
            double gh = t_get(mx, r), gl = t_get(mn, r);
            CHECK_MSG(nan ? gh != gh && gl != gl : gh == hi && gl == lo, "L %lld row %d: amax %g amin %g, want %g %g",
                      (long long)L, r, gh, gl, nan ? NAN : hi, nan ? NAN : lo);
        }
        jag_release(x), jag_release(mx), jag_release(mn);
        free(v);
    }
}

/* float32 sum and mean over the last dim (AVX-512: eight vectors of
 * doubles, a masked tail) for every row length from 1 to 130 and some
 * longer (two leaves past 4096), on integers whose sums are exact in
 * float: each output equals the sum computed here, bit for bit, so a
 * dropped or doubled element shows. */
static void test_sum_rows_every_length(void) {
    TEST_BEGIN();
    int64_t lens[140], nl = 0;
    for (int64_t l = 1; l <= 130; l++) lens[nl++] = l;
    lens[nl++] = 255, lens[nl++] = 300, lens[nl++] = 4096, lens[nl++] = 4159, lens[nl++] = 5000;
    for (int64_t k = 0; k < nl; k++) {
        enum { R = 3 };
        int64_t L = lens[k], sz[2] = {R, L};
        double *v = malloc((size_t)(R * L) * sizeof *v), want[R];
        for (int r = 0; r < R; r++) {
            want[r] = 0;
            for (int64_t i = 0; i < L; i++) {
                double a = (double)((r * 7919 + i * 104729) % 201) - 100.0;
                v[r * L + i] = a, want[r] += a;
            }
        }
        jag_tensor *x = t_vals(v, sz, 2, JAG_FLOAT32), *s = NULL, *m = NULL;
        const int d1[] = {1};
        CHECK_OK(jag_sum(x, d1, 1, false, &s));
        CHECK_OK(jag_mean(x, d1, 1, false, &m));
        for (int r = 0; s && m && r < R; r++) {
            CHECK_MSG(t_get(s, r) == want[r], "L %lld row %d: sum %.9g, want %.9g", (long long)L, r, t_get(s, r), want[r]);
            CHECK_MSG(t_get(m, r) == (double)(float)(want[r] / (double)L), "L %lld row %d: mean %.9g", (long long)L, r, t_get(m, r));
        }
        jag_release(x), jag_release(s), jag_release(m);
        free(v);
    }
}

/* mean_backward (g, sizes) = expand(g, sizes) / N, N = numel(sizes) /
 * numel(g): the kernel against its reference (bit for bit) and against the
 * formula computed here, for g with each set of dims kept as 1, contiguous
 * and transposed, float32 and float64; META's refusals. */
static void test_mean_backward(void) {
    TEST_BEGIN();
    jag_op_id op;
    CHECK_OK(jag_op_find("mean_backward", &op));
    const int64_t sizes[3] = {4, 5, 3};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        for (int keep = 0; keep < 8; keep++) { /* bit d set: dim d reduced (size 1 in g) */
            int64_t gs[3], n_g = 1;
            for (int d = 0; d < 3; d++) gs[d] = keep >> d & 1 ? 1 : sizes[d], n_g *= gs[d];
            for (int tr = 0; tr < 2; tr++) {
                jag_tensor *g = NULL, *gt = NULL, *y = NULL, *r = NULL;
                if (tr) { /* a transposed (non-contiguous) g of the same sizes */
                    int64_t sw[3] = {gs[0], gs[2], gs[1]};
                    gt = t_rand(sw, 3, dt, -2, 2, 40 + (uint64_t)keep);
                    CHECK_OK(jag_transpose(gt, 1, 2, &g));
                } else {
                    g = t_rand(gs, 3, dt, -2, 2, 30 + (uint64_t)keep);
                }
                jag_value a[2] = {{.kind = JAG_VAL_TENSOR, .u.t = g}, {.kind = JAG_VAL_INTS, .u.ints = {sizes, 3}}};
                CHECK_OK(jag_op_call(op, a, 2, &y));
                CHECK_OK(run_ref(op, jag__ref_mean_backward, a, 2, &r));
                CHECK_MSG(y && r && t_allclose(y, r, 0, 0), "keep %d tr %d dtype %d: kernel vs reference", keep, tr, f);
                double inv = 1.0 / (double)(60 / n_g); /* N = 60 / numel(g) */
                bool ok = y && jag_numel(y) == 60;
                for (int64_t i = 0; ok && i < 60; i++) {
                    int64_t k[3] = {i / 15, i / 3 % 5, i % 3}, gi[3];
                    for (int d = 0; d < 3; d++) gi[d] = gs[d] == 1 ? 0 : k[d];
                    jag_tensor *e = NULL;
                    double gv = 0;
                    if (!jag_select(g, 0, gi[0], &e)) {
                        jag_tensor *e2 = NULL, *e3 = NULL;
                        if (!jag_select(e, 0, gi[1], &e2) && !jag_select(e2, 0, gi[2], &e3)) gv = t_get(e3, 0);
                        jag_release(e2), jag_release(e3);
                    }
                    jag_release(e);
                    double want = f ? gv * inv : (double)((float)gv * (float)inv);
                    ok = t_get(y, i) == want;
                }
                CHECK_MSG(ok, "keep %d tr %d dtype %d: expand(g) / N", keep, tr, f);
                jag_release(g), jag_release(gt), jag_release(y), jag_release(r);
            }
        }
    }
    int64_t gs[3] = {4, 2, 3}, neg[3] = {4, -5, 3};
    jag_tensor *g = t_rand(gs, 3, JAG_FLOAT32, -1, 1, 7), *gi = NULL, *o = NULL;
    jag_value a[2] = {{.kind = JAG_VAL_TENSOR, .u.t = g}, {.kind = JAG_VAL_INTS, .u.ints = {sizes, 3}}};
    CHECK_ERR(jag_op_call(op, a, 2, &o), JAG_ESHAPE, "jag_mean_backward: argument 'g' has size 2 at dim 1, expected 5 or 1");
    a[1].u.ints.n = 2;
    CHECK_ERR(jag_op_call(op, a, 2, &o), JAG_ESHAPE, "argument 'g' has 3 dims and 'sizes' 2 entries");
    a[1].u.ints.v = neg, a[1].u.ints.n = 3;
    CHECK_ERR(jag_op_call(op, a, 2, &o), JAG_EINVAL, "argument 'sizes' has -5 at dim 1");
    CHECK_OK(jag_zeros(gs, 3, JAG_INT64, &gi));
    a[0].u.t = gi;
    CHECK_ERR(jag_op_call(op, a, 2, &o), JAG_EDTYPE, "argument 'g' has dtype int64");
    CHECK(o == NULL);
    jag_release(g), jag_release(gi);
}

/* The typed kernel below the dispatcher, called directly with the reduced
 * dims as a mask and outputs the caller allocated: on a transposed int32
 * x (6, 5, 4) reduced over dims 0 and 2, amax, argmin and max_dim agree
 * with the typed reference and with maxima and minima taken here over
 * each output's 24 elements (indices are positions in the reduced dims,
 * row-major, the first of equal values: torch's rule). */
static void test_typed_kernel_mask(void) {
    int64_t sz[3] = {4, 5, 6}, osz[1] = {5};
    jag_tensor *base = t_randint(sz, 3, JAG_INT32, -9, 9, 81), *x = NULL;
    CHECK_OK(jag_transpose(base, 0, 2, &x));
    if (!x) {
        jag_release(base);
        return;
    }
    const bool mask[JAG_MAX_DIMS] = {true, false, true};
    const jag_reduction which[3] = {JAG_REDUCTION_amax, JAG_REDUCTION_argmin, JAG_REDUCTION_max_dim};
    for (int w = 0; w < 3; w++) {
        jag_dtype vdt = which[w] == JAG_REDUCTION_argmin ? JAG_INT64 : JAG_INT32;
        jag_tensor *k[2] = {NULL, NULL}, *r[2] = {NULL, NULL};
        CHECK_OK(jag_zeros(osz, 1, vdt, &k[0]));
        CHECK_OK(jag_zeros(osz, 1, vdt, &r[0]));
        CHECK_OK(jag_zeros(osz, 1, JAG_INT64, &k[1]));
        CHECK_OK(jag_zeros(osz, 1, JAG_INT64, &r[1]));
        CHECK_OK(jag__reduce_kernel("test", which[w], x, mask, 0, k));
        CHECK_OK(jag__reduce_reference("test", which[w], x, mask, 0, r));
        for (int64_t o = 0; o < 5; o++) {
            /* x[i, o, j] = base[j, o, i]; reduced position i * 4 + j */
            double best_max = -INFINITY, best_min = INFINITY;
            int64_t at_max = 0, at_min = 0;
            for (int64_t i = 0; i < 6; i++)
                for (int64_t j = 0; j < 4; j++) {
                    double v = t_get(base, (j * 5 + o) * 6 + i);
                    if (v > best_max) best_max = v, at_max = i * 4 + j;
                    if (v < best_min) best_min = v, at_min = i * 4 + j;
                }
            double want = which[w] == JAG_REDUCTION_argmin ? (double)at_min : best_max;
            CHECK_MSG(t_get(k[0], o) == want && t_get(r[0], o) == want, "reduction %d output %lld: kernel %g, reference %g, expected %g",
                      (int)which[w], (long long)o, t_get(k[0], o), t_get(r[0], o), want);
            if (which[w] == JAG_REDUCTION_max_dim)
                CHECK_MSG(t_get(k[1], o) == (double)at_max && t_get(r[1], o) == (double)at_max,
                          "max_dim index %lld: kernel %g, reference %g, expected %lld", (long long)o, t_get(k[1], o),
                          t_get(r[1], o), (long long)at_max);
        }
        for (int i = 0; i < 2; i++) jag_release(k[i]), jag_release(r[i]);
    }
    jag_release(x);
    jag_release(base);
}

TEST_MAIN(test_mean_backward, test_middle_dim_segments_vs_ref, test_logsumexp_hand, test_logsumexp_long_rows, test_extrema_long_rows, test_sum_rows_every_length, test_sum_hand, test_int_sums_exact, test_mean_var_std_hand, test_extrema_hand, test_empty,
          test_size1_and_0d, test_dims_ops_vs_ref, test_index_ops_vs_ref, test_large, test_long_row_accuracy,
          test_thread_count_invariance, test_errors, test_typed_kernel_mask)
