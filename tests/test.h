/*
 * test.h — the C test harness: checks that count and report, and reference
 * helpers that read tensors element by element through the public API (never
 * through the kernels under test).
 *
 * A test file defines `static void test_x(void)` functions and ends with
 *     TEST_MAIN(test_a, test_b, ...)
 * which runs them and prints "N passed, N failed".
 */
#ifndef JAG_TEST_H
#define JAG_TEST_H

#include "jag.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long jag__live_tensors(void); /* internal: live tensor headers */

static int test_checks_failed, test_checks_passed;
static const char *test_current = "";

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) {                                                            \
            test_checks_passed++;                                              \
        } else {                                                               \
            test_checks_failed++;                                              \
            fprintf(stderr, "%s:%d: %s: CHECK failed: %s\n", __FILE__, __LINE__, test_current, #cond); \
        }                                                                      \
    } while (0)

#define CHECK_MSG(cond, ...)                                                   \
    do {                                                                       \
        if (cond) {                                                            \
            test_checks_passed++;                                              \
        } else {                                                               \
            test_checks_failed++;                                              \
            fprintf(stderr, "%s:%d: %s: CHECK failed: %s: ", __FILE__, __LINE__, test_current, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

/* The call succeeds. */
#define CHECK_OK(expr)                                                         \
    do {                                                                       \
        jag_status s_ = (expr);                                                \
        CHECK_MSG(s_ == JAG_OK, "%s -> %s: %s", #expr, jag_status_str(s_), jag_last_error()); \
    } while (0)

/* The call fails with `status`, its message contains `substr`, and the
 * output pointer `outp` (may be NULL) was left untouched (still NULL). */
#define CHECK_ERR(expr, status, substr)                                        \
    do {                                                                       \
        jag_status s_ = (expr);                                                \
        CHECK_MSG(s_ == (status), "%s -> %s, expected %s (%s)", #expr, jag_status_str(s_), \
                  jag_status_str(status), jag_last_error());                  \
        CHECK_MSG(strstr(jag_last_error(), (substr)) != NULL, "message '%s' lacks '%s'", \
                  jag_last_error(), (substr));                                 \
    } while (0)

#define CHECK_CLOSE(a, b, tol)                                                 \
    do {                                                                       \
        double a_ = (a), b_ = (b);                                             \
        CHECK_MSG(fabs(a_ - b_) <= (tol) || (isnan(a_) && isnan(b_)) || (a_ == b_), \
                  "%s = %.9g, %s = %.9g", #a, a_, #b, b_);                     \
    } while (0)

#define TEST_MAIN(...)                                                         \
    int main(void) {                                                           \
        void (*tests_[])(void) = {__VA_ARGS__};                                \
        const char *names_ = #__VA_ARGS__;                                     \
        (void)names_;                                                          \
        long live0_ = jag__live_tensors();                                     \
        for (size_t i = 0; i < sizeof tests_ / sizeof tests_[0]; i++) {        \
            int before_ = test_checks_failed;                                  \
            long live_ = jag__live_tensors();                                  \
            tests_[i]();                                                       \
            long leaked_ = jag__live_tensors() - live_;                        \
            CHECK_MSG(leaked_ == 0, "%ld tensor(s) leaked", leaked_);          \
            if (test_checks_failed > before_) fprintf(stderr, "FAILED: %s\n", test_current); \
        }                                                                      \
        (void)live0_;                                                          \
        printf("%d passed, %d failed\n", test_checks_passed, test_checks_failed); \
        return test_checks_failed ? 1 : 0;                                     \
    }

#define TEST_BEGIN() test_current = __func__

/* ---- reference helpers -------------------------------------------------- */

/* A tensor from double values (converted to dtype). Aborts the test program
 * on failure: helpers are not under test. */
/* The id of the op named `name`; exits when there is none. */
static inline jag_op_id t_op_id(const char *name) {
    jag_op_id id = -1;
    if (jag_op_find(name, &id) != JAG_OK) {
        fprintf(stderr, "no op %s\n", name);
        exit(2);
    }
    return id;
}

/* A 1-d int64 tensor of v[0..n). */
static inline jag_tensor *t_i64(const int64_t *v, int64_t n) {
    jag_tensor *t = NULL;
    if (jag_from_data(v, &n, 1, JAG_INT64, &t)) exit(2);
    return t;
}

static inline jag_tensor *t_from(const double *vals, const int64_t *sizes, int ndim, jag_dtype dtype) {
    jag_tensor *t = NULL;
    if (jag_empty(sizes, ndim, dtype, &t)) {
        fprintf(stderr, "t_from: %s\n", jag_last_error());
        exit(2);
    }
    int64_t n = jag_numel(t);
    jag_tensor *src = NULL;
    if (jag_from_data(vals, &n, 1, JAG_FLOAT64, &src)) {
        fprintf(stderr, "t_from: %s\n", jag_last_error());
        exit(2);
    }
    /* element-by-element store through the public item API would need a
     * setter; a float64 -> dtype copy_ of a flat view is the same thing. */
    jag_tensor *flat = NULL;
    if (jag_view(t, &n, 1, &flat) || jag_copy_(flat, src)) {
        fprintf(stderr, "t_from: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(flat);
    jag_release(src);
    return t;
}

/* Deterministic pseudo-random values in [lo, hi), seeded, via jag_rand_uniform
 * in float64, then converted (integers are rounded). */
static inline jag_tensor *t_rand(const int64_t *sizes, int ndim, jag_dtype dtype, double lo, double hi,
                                 uint64_t seed) {
    jag_generator *g = NULL;
    jag_tensor *u = NULL, *t = NULL;
    if (jag_generator_new(seed, &g) || jag_rand_uniform(sizes, ndim, lo, hi, JAG_FLOAT64, g, &u)) {
        fprintf(stderr, "t_rand: %s\n", jag_last_error());
        exit(2);
    }
    if (!jag_dtype_is_floating(dtype)) { /* floor for integers, above the midpoint for bool */
        int64_t n = jag_numel(u);
        double *p = jag_data(u);
        for (int64_t i = 0; i < n; i++) p[i] = dtype == JAG_BOOL ? (p[i] > (lo + hi) / 2) : floor(p[i]);
    }
    if (jag_to_dtype(u, dtype, &t)) {
        fprintf(stderr, "t_rand: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(u);
    jag_generator_free(g);
    return t;
}

/* Element at a flat row-major index, read through jag_item_at. */
static inline double t_get(const jag_tensor *t, int64_t flat) {
    int n = jag_ndim(t);
    int64_t idx[JAG_MAX_DIMS];
    for (int d = n - 1; d >= 0; d--) {
        int64_t s = jag_size(t, d);
        idx[d] = s ? flat % s : 0;
        flat = s ? flat / s : 0;
    }
    double v = NAN;
    if (jag_item_at(t, idx, &v)) {
        fprintf(stderr, "t_get: %s\n", jag_last_error());
        exit(2);
    }
    return v;
}

static inline bool t_same_shape(const jag_tensor *a, const jag_tensor *b) {
    if (jag_ndim(a) != jag_ndim(b)) return false;
    for (int d = 0; d < jag_ndim(a); d++)
        if (jag_size(a, d) != jag_size(b, d)) return false;
    return true;
}

/* |a - b| <= atol + rtol * |b| for every element, same shape; NaN equals
 * NaN, inf equals inf of the same sign. Prints the first mismatch. */
static inline bool t_allclose(const jag_tensor *a, const jag_tensor *b, double rtol, double atol) {
    if (!t_same_shape(a, b)) {
        fprintf(stderr, "t_allclose: shapes differ (ndim %d vs %d)\n", jag_ndim(a), jag_ndim(b));
        return false;
    }
    int64_t n = jag_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = t_get(a, i), y = t_get(b, i);
        if (isnan(x) && isnan(y)) continue;
        if (x == y) continue;
        if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
            fprintf(stderr, "t_allclose: element %lld: %.9g vs %.9g\n", (long long)i, x, y);
            return false;
        }
    }
    return true;
}

/* Every `step`-th element of a contiguous float tensor from `first` set to
 * NaN, +inf or -inf in turn (by index mod 3): special values spread over
 * its rows and columns. */
static inline void t_put_specials(jag_tensor *c, int64_t first, int64_t step) {
    for (int64_t i = first; i < jag_numel(c); i += step) {
        double v = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
        if (jag_tensor_dtype(c) == JAG_FLOAT64) ((double *)jag_data(c))[i] = v;
        else ((float *)jag_data(c))[i] = (float)v;
    }
}

/* The same values as x in a non-contiguous layout: storage with the dims
 * reversed, viewed back through a permute. */
static inline jag_tensor *t_noncontig(const jag_tensor *x) {
    int n = jag_ndim(x);
    int64_t rev[JAG_MAX_DIMS];
    int perm[JAG_MAX_DIMS];
    for (int d = 0; d < n; d++) rev[d] = jag_size(x, n - 1 - d), perm[d] = n - 1 - d;
    jag_tensor *s = NULL, *v = NULL;
    if (jag_empty(rev, n, jag_tensor_dtype(x), &s) || jag_permute(s, perm, n, &v) || jag_copy_(v, x)) {
        fprintf(stderr, "t_noncontig: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(s);
    return v;
}

/* The same values as x as a slice of a wider tensor (the last dim padded to
 * twice its size, then narrowed): non-contiguous rows. */
static inline jag_tensor *t_sliced(const jag_tensor *x) {
    int n = jag_ndim(x);
    if (n == 0) return jag_retain((jag_tensor *)x);
    int64_t wide[JAG_MAX_DIMS];
    for (int d = 0; d < n; d++) wide[d] = jag_size(x, d);
    int64_t last = wide[n - 1];
    wide[n - 1] = last * 2 + 1;
    jag_tensor *w = NULL, *v = NULL;
    if (jag_full(wide, n, -777.0, jag_tensor_dtype(x), &w) || jag_narrow(w, n - 1, 1, last, &v) || jag_copy_(v, x)) {
        fprintf(stderr, "t_sliced: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(w);
    return v;
}

#endif /* JAG_TEST_H */
