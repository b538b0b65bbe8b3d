/* test_compile_scope.c — tracing, compiled functions and programs while the
 * caller has a scope open: the traced function's tensors are its own (never
 * released by the caller's scope a second time), the outputs of
 * jag_compiled_call and jag_program_run are recorded in the caller's scope as
 * every new tensor is (a loop of calls, one scope per iteration, ends with as
 * many live tensors as it started with), and random numbers inside a traced
 * function are refused. References are computed element by element here. */
#include "test.h"

/* ---- helpers ------------------------------------------------------------- */

/* A jagged (B, j, D) float tensor with component lengths lens[0..B). */
static jag_tensor *make_jagged(const int64_t *lens, int b, int64_t d, uint64_t seed) {
    int64_t total = 0, off[16] = {0};
    for (int i = 0; i < b; i++) total += lens[i], off[i + 1] = total;
    int64_t vs[2] = {total, d}, ob = b + 1;
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -1, 1, seed), *o = NULL, *nt = NULL;
    if (jag_from_data(off, &ob, 1, JAG_INT64, &o) || jag_nested_from_jagged(v, o, NULL, &nt)) {
        fprintf(stderr, "make_jagged: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(v), jag_release(o);
    return nt;
}

/* y = (sin(x) @ w)^2 for a dense (R, K) x or the values of a jagged x, and
 * the gradient of sum(y) with respect to x: 2 (sin(x) @ w) @ w^T * cos(x).
 * Element by element, in double. */
static void reference(const jag_tensor *xv, const jag_tensor *w, double *y, double *gx) {
    int64_t r = jag_size(xv, 0), k = jag_size(xv, 1), n = jag_size(w, 1);
    for (int64_t i = 0; i < r; i++) {
        double b[8] = {0};
        for (int64_t j = 0; j < n; j++) {
            for (int64_t q = 0; q < k; q++) b[j] += sin(t_get(xv, i * k + q)) * t_get(w, q * n + j);
            if (y) y[i * n + j] = b[j] * b[j];
        }
        for (int64_t q = 0; gx && q < k; q++) {
            double g = 0;
            for (int64_t j = 0; j < n; j++) g += 2 * b[j] * t_get(w, q * n + j);
            gx[i * k + q] = g * cos(t_get(xv, i * k + q));
        }
    }
}

static bool matches(const jag_tensor *t, const double *want, int64_t n, double tol) {
    if (!t || jag_numel(t) != n) return false;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(t_get(t, i) - want[i]) <= tol * (1 + fabs(want[i])))) {
            fprintf(stderr, "matches: element %lld: %.9g, expected %.9g\n", (long long)i, t_get(t, i), want[i]);
            return false;
        }
    return true;
}

/* The values of a jagged tensor, or the tensor itself: a new reference the
 * caller releases (called outside any scope). */
static jag_tensor *values_of(const jag_tensor *t) {
    jag_tensor *v = NULL;
    if (!jag_is_nested(t)) return jag_retain((jag_tensor *)t);
    if (jag_nested_values(t, &v)) {
        fprintf(stderr, "values_of: %s\n", jag_last_error());
        exit(2);
    }
    return v;
}

/* ---- traced functions ------------------------------------------------------ */

/* Eager-style C: each intermediate released by hand, no scope of its own
 * (the usual way to write a function for jag_compile). */
static jag_status eager_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL;
    jag_status st = jag_sin(in[0], &a);
    if (!st) st = jag_mm(a, in[1], &b);
    if (!st) st = jag_mul(b, b, &out[0]);
    jag_release(a), jag_release(b);
    return st;
}

/* Two outputs: y and the weight handed back (an output that is an input). */
static jag_status two_out_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)n_out;
    jag_status st = eager_fn(ctx, in, n, out, 1);
    if (!st) out[1] = jag_retain(in[1]);
    return st;
}

/* Its own scope, the output kept out of it with jag_scope_keep. */
static jag_status keep_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL, *y = NULL;
    jag_status st = jag_scope_begin();
    if (st) return st;
    st = jag_sin(in[0], &a);
    if (!st) st = jag_mm(a, in[1], &b);
    if (!st) st = jag_mul(b, b, &y);
    if (!st) out[0] = jag_scope_keep(y); /* handed to this function, not to a scope of its caller */
    jag_status st2 = jag_scope_end();
    if (!st && st2) jag_release(out[0]), out[0] = NULL, st = st2;
    return st;
}

/* Closes a scope it did not open: the caller's are not its to close. */
static jag_status closing_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    jag_status st = eager_fn(ctx, in, n, out, n_out);
    if (!st) st = jag_scope_end();
    return st;
}

/* Opens a scope and returns without closing it. */
static jag_status open_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL;
    jag_status st = jag_scope_begin();
    if (!st) st = jag_sin(in[0], &a);
    if (!st) st = jag_mul(a, a, &out[0]); /* recorded in the scope left open */
    return st;
}

static jag_status randn_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *r = NULL;
    jag_status st = jag_rand_normal((int64_t[]){jag_size(in[0], 1)}, 1, 0, 1, JAG_FLOAT32, NULL, &r);
    if (!st) st = jag_add(in[0], r, 1.0, &out[0]);
    jag_release(r);
    return st;
}

static jag_status rand_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)n, (void)n_out;
    jag_tensor *r = NULL;
    jag_status st = jag_rand_uniform((int64_t[]){jag_size(in[0], 1)}, 1, 0, 1, JAG_FLOAT32, ctx, &r);
    if (!st) st = jag_add(in[0], r, 1.0, &out[0]);
    jag_release(r);
    return st;
}

/* ---- tracing inside the caller's scope --------------------------------------- */

static void test_trace_in_scope(void) {
    TEST_BEGIN();
    int64_t xs[2] = {3, 4}, ws[2] = {4, 2};
    jag_tensor *x = t_rand(xs, 2, JAG_FLOAT32, -1, 1, 1), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *nt = make_jagged((int64_t[]){2, 3}, 2, 4, 3);
    jag_traced_fn fns[2] = {eager_fn, keep_fn};
    for (int f = 0; f < 2; f++)
        for (int nested = 0; nested < 2; nested++) {
            jag_tensor *in[2] = {nested ? nt : x, w};
            long live = jag__live_tensors();
            jag_trace *t = NULL;
            jag_program *p = NULL;
            CHECK_OK(jag_scope_begin());
            CHECK_OK(jag_trace_function(fns[f], NULL, in, 2, NULL, 1, &t));
            CHECK(jag_trace_num_symbols(t) > 0);
            CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
            jag_trace_free(t);
            CHECK_OK(jag_scope_end()); /* releases nothing of the trace's a second time */
            /* the program computes the function */
            jag_tensor *y = NULL, *yv = NULL, *xv = values_of(in[0]);
            double want[14];
            reference(xv, w, want, NULL);
            CHECK_OK(jag_program_run(p, in, 2, &y, 1));
            if (y) yv = values_of(y);
            CHECK(matches(yv, want, jag_size(xv, 0) * 2, 1e-5));
            jag_release(yv), jag_release(y), jag_release(xv);
            jag_program_free(p);
            CHECK_MSG(jag__live_tensors() == live, "fn %d, nested %d: %ld live tensors, expected %ld", f, nested,
                      jag__live_tensors(), live);
        }
    /* two outputs, one an input handed back, traced in nested scopes */
    jag_tensor *in[2] = {x, w};
    long live = jag__live_tensors();
    jag_trace *t = NULL;
    CHECK_OK(jag_scope_begin());
    CHECK_OK(jag_scope_begin());
    CHECK_OK(jag_trace_function(two_out_fn, NULL, in, 2, NULL, 2, &t));
    CHECK(jag_trace_num_outputs(t) == 2);
    CHECK_OK(jag_scope_end());
    jag_trace_free(t);
    CHECK_OK(jag_scope_end());
    CHECK_MSG(jag__live_tensors() == live, "%ld live tensors, expected %ld", jag__live_tensors(), live);
    jag_release(x), jag_release(w), jag_release(nt);
}

/* A traced function cannot close the caller's scope, and one that returns
 * with a scope of its own open fails the trace; the caller's scopes are as
 * they were either way. */
static void test_traced_function_scope_errors(void) {
    TEST_BEGIN();
    int64_t xs[2] = {3, 4}, ws[2] = {4, 2};
    jag_tensor *x = t_rand(xs, 2, JAG_FLOAT32, -1, 1, 4), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 5);
    jag_tensor *in[2] = {x, w};
    long live = jag__live_tensors();
    jag_trace *t = NULL;
    jag_tensor *mine = NULL;
    CHECK_OK(jag_scope_begin());
    CHECK_OK(jag_sin(x, &mine)); /* the caller's scope holds it */
    CHECK_ERR(jag_trace_function(closing_fn, NULL, in, 2, NULL, 1, &t), JAG_ESTATE, "no scope is open");
    CHECK(t == NULL);
    CHECK_ERR(jag_trace_function(open_fn, NULL, in, 2, NULL, 1, &t), JAG_ESTATE, "1 scope of its own still open");
    CHECK(t == NULL);
    CHECK(mine && jag_numel(mine) == 12 && fabs(t_get(mine, 5) - sin(t_get(x, 5))) < 1e-6); /* still alive */
    CHECK_OK(jag_scope_end()); /* the caller's scope is still open: this closes it */
    CHECK_ERR(jag_scope_end(), JAG_ESTATE, "no scope is open");
    CHECK_MSG(jag__live_tensors() == live, "%ld live tensors, expected %ld", jag__live_tensors(), live);
    /* outside any scope the same */
    CHECK_ERR(jag_trace_function(closing_fn, NULL, in, 2, NULL, 1, &t), JAG_ESTATE, "no scope is open");
    CHECK_ERR(jag_trace_function(open_fn, NULL, in, 2, NULL, 1, &t), JAG_ESTATE, "still open");
    CHECK_ERR(jag_scope_end(), JAG_ESTATE, "no scope is open");
    CHECK_MSG(jag__live_tensors() == live, "%ld live tensors, expected %ld", jag__live_tensors(), live);
    jag_release(x), jag_release(w);
}

/* ---- compiled calls and program runs, one scope per iteration --------------- */

static void test_compiled_call_loop_in_scopes(void) {
    TEST_BEGIN();
    int64_t ws[2] = {4, 2};
    jag_tensor *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 6);
    jag_tensor *xs[3] = {t_rand((int64_t[]){3, 4}, 2, JAG_FLOAT32, -1, 1, 7), t_rand((int64_t[]){5, 4}, 2, JAG_FLOAT32, -1, 1, 8),
                         make_jagged((int64_t[]){2, 4, 1}, 3, 4, 9)};
    double want[3][16];
    int64_t n_want[3] = {3 * 2, 5 * 2, 7 * 2};
    for (int k = 0; k < 3; k++) {
        jag_tensor *xv = values_of(xs[k]);
        reference(xv, w, want[k], NULL);
        jag_release(xv);
    }
    jag_traced_fn fns[2] = {eager_fn, keep_fn};
    for (int f = 0; f < 2; f++) {
        jag_compiled *c = NULL;
        CHECK_OK(jag_compile(fns[f], NULL, 1, JAG_PASSES_ALL, &c));
        long live = 0;
        for (int it = 0; it < 600; it++) {
            int k = it % 3;
            if (it == 6) live = jag__live_tensors(); /* programs and their kept buffers made */
            jag_tensor *in[2] = {xs[k], w}, *y = NULL, *yv = NULL;
            CHECK_OK(jag_scope_begin());
            CHECK_OK(jag_compiled_call(c, in, 2, &y, 1));
            if (y && jag_is_nested(y)) CHECK_OK(jag_nested_values(y, &yv));
            else yv = y;
            if (it < 6 || it % 97 == 0) CHECK(matches(yv, want[k], n_want[k], 1e-5));
            CHECK_OK(jag_scope_end()); /* y (and its values) were the scope's */
            if (it >= 6 && jag__live_tensors() != live) {
                CHECK_MSG(false, "fn %d, iteration %d: %ld live tensors, expected %ld", f, it, jag__live_tensors(), live);
                break;
            }
        }
        CHECK(jag_compiled_num_programs(c) >= 1);
        jag_compiled_free(c);
    }
    for (int k = 0; k < 3; k++) jag_release(xs[k]);
    jag_release(w);
}

static void test_program_run_loop_in_scopes(void) {
    TEST_BEGIN();
    int64_t xs[2] = {3, 4}, ws[2] = {4, 2};
    jag_tensor *x = t_rand(xs, 2, JAG_FLOAT32, -1, 1, 10), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 11);
    jag_tensor *in[2] = {x, w};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(two_out_fn, NULL, in, 2, NULL, 2, &t));
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    jag_trace_free(t);
    double want[6];
    reference(x, w, want, NULL);
    long live = 0;
    for (int it = 0; p && it < 1000; it++) {
        if (it == 2) live = jag__live_tensors();
        jag_tensor *out[2] = {NULL, NULL};
        CHECK_OK(jag_scope_begin());
        CHECK_OK(jag_program_run(p, in, 2, out, 2));
        if (it < 2 || it % 101 == 0) CHECK(matches(out[0], want, 6, 1e-5) && out[1] == w);
        CHECK_OK(jag_scope_end());
        if (it >= 2 && jag__live_tensors() != live) {
            CHECK_MSG(false, "iteration %d: %ld live tensors, expected %ld", it, jag__live_tensors(), live);
            break;
        }
    }
    /* kept past the scope: the caller's own, released by hand */
    jag_tensor *out[2] = {NULL, NULL};
    CHECK_OK(jag_scope_begin());
    CHECK_OK(jag_program_run(p, in, 2, out, 2));
    CHECK(jag_scope_keep(out[0]) == out[0]);
    CHECK_OK(jag_scope_end());
    CHECK(matches(out[0], want, 6, 1e-5));
    jag_release(out[0]);
    /* a run that fails writes nothing and records nothing */
    jag_tensor *bad = t_rand(xs, 2, JAG_FLOAT64, -1, 1, 12), *bin[2] = {bad, w}, *none[2] = {NULL, NULL};
    long before = jag__live_tensors();
    CHECK_OK(jag_scope_begin());
    CHECK_ERR(jag_program_run(p, bin, 2, none, 2), JAG_EDTYPE, "jag_program_run");
    CHECK(none[0] == NULL && none[1] == NULL);
    CHECK_OK(jag_scope_end());
    CHECK(jag__live_tensors() == before);
    jag_release(bad);
    jag_program_free(p);
    jag_release(x), jag_release(w);
}

/* With inputs that require grad the outputs carry the compiled backward; in
 * a scope they, the loss and the gradient read back are the scope's. */
static void test_compiled_autograd_in_scopes(void) {
    TEST_BEGIN();
    int64_t xs[2] = {3, 4}, ws[2] = {4, 2};
    jag_tensor *x = t_rand(xs, 2, JAG_FLOAT32, -1, 1, 13), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 14);
    CHECK_OK(jag_set_requires_grad(x, true));
    double want_y[6], want_g[12];
    reference(x, w, want_y, want_g);
    jag_compiled *c = NULL;
    CHECK_OK(jag_compile(eager_fn, NULL, 1, JAG_PASSES_ALL, &c));
    long live = 0;
    for (int it = 0; it < 200; it++) {
        if (it == 2) live = jag__live_tensors();
        jag_tensor *in[2] = {x, w}, *y = NULL, *s = NULL, *g = NULL;
        CHECK_OK(jag_scope_begin());
        CHECK_OK(jag_compiled_call(c, in, 2, &y, 1));
        CHECK_OK(jag_sum(y, NULL, 0, false, &s));
        CHECK_OK(jag_backward(s, NULL, false));
        CHECK_OK(jag_get_grad(x, &g));
        if (it < 2 || it % 53 == 0) CHECK(matches(y, want_y, 6, 1e-5) && matches(g, want_g, 12, 1e-4));
        CHECK_OK(jag_scope_end());
        jag_zero_grad(x);
        if (it >= 2 && jag__live_tensors() != live) {
            CHECK_MSG(false, "iteration %d: %ld live tensors, expected %ld", it, jag__live_tensors(), live);
            break;
        }
    }
    jag_compiled_free(c);
    jag_release(x), jag_release(w);
}

/* ---- random numbers inside a traced function ------------------------------- */

static void test_random_refused_while_tracing(void) {
    TEST_BEGIN();
    int64_t xs[2] = {2, 3};
    jag_tensor *x = t_rand(xs, 2, JAG_FLOAT32, -1, 1, 15), *in[1] = {x};
    jag_generator *g = NULL;
    CHECK_OK(jag_generator_new(7, &g));
    long live = jag__live_tensors();
    jag_trace *t = NULL;
    CHECK_ERR(jag_trace_function(randn_fn, NULL, in, 1, NULL, 1, &t), JAG_ENOTIMPL, "jag_rand_normal: random numbers inside a traced function");
    CHECK(t == NULL);
    CHECK_ERR(jag_trace_function(rand_fn, NULL, in, 1, NULL, 1, &t), JAG_ENOTIMPL, "jag_rand_uniform: random numbers inside a traced function");
    CHECK_ERR(jag_trace_function(rand_fn, g, in, 1, NULL, 1, &t), JAG_ENOTIMPL, "pass them as an input");
    CHECK(t == NULL);
    /* a compiled function never bakes the numbers in either */
    jag_compiled *c = NULL;
    jag_tensor *y = NULL;
    CHECK_OK(jag_compile(randn_fn, NULL, 1, JAG_PASSES_ALL, &c));
    CHECK_ERR(jag_compiled_call(c, in, 1, &y, 1), JAG_ENOTIMPL, "random numbers inside a traced function");
    CHECK(y == NULL && jag_compiled_num_programs(c) == 0);
    jag_compiled_free(c);
    CHECK_MSG(jag__live_tensors() == live, "%ld live tensors, expected %ld", jag__live_tensors(), live);
    /* the generator did not advance: outside a trace it gives its first numbers */
    jag_generator *g2 = NULL;
    jag_tensor *a = NULL, *b = NULL;
    CHECK_OK(jag_generator_new(7, &g2));
    CHECK_OK(jag_rand_uniform((int64_t[]){3}, 1, 0, 1, JAG_FLOAT32, g, &a));
    CHECK_OK(jag_rand_uniform((int64_t[]){3}, 1, 0, 1, JAG_FLOAT32, g2, &b));
    CHECK(a && b && t_allclose(a, b, 0, 0));
    jag_release(a), jag_release(b);
    jag_generator_free(g), jag_generator_free(g2);
    jag_release(x);
}

/* ---- reading data inside a traced function ---------------------------------- */

static jag_status item_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)n, (void)n_out;
    jag_tensor *s = NULL;
    double v = 0;
    jag_status st = jag_sum(in[0], NULL, 0, false, &s);
    if (!st) st = ctx ? jag_item_at(in[0], (int64_t[]){0, 0}, &v) : jag_item(s, &v);
    if (!st) st = jag_mul_scalar(in[0], v, &out[0]);
    jag_release(s);
    return st;
}

static void test_item_refused_while_tracing(void) {
    TEST_BEGIN();
    int64_t xs[2] = {2, 3};
    jag_tensor *x = t_rand(xs, 2, JAG_FLOAT32, -1, 1, 16), *in[1] = {x}, *y = NULL, *m = NULL;
    jag_trace *t = NULL;
    long live = jag__live_tensors();
    CHECK_ERR(jag_trace_function(item_fn, NULL, in, 1, NULL, 1, &t), JAG_ENOTIMPL,
              "jag_item_at: argument 't' has no data: a tensor's data cannot be read while a function is being traced");
    CHECK(strstr(jag_last_error(), "pass the value as an input") != NULL);
    CHECK_ERR(jag_trace_function(item_fn, x, in, 1, NULL, 1, &t), JAG_ENOTIMPL, "cannot be read while a function is being traced");
    CHECK(t == NULL);
    jag_compiled *c = NULL;
    CHECK_OK(jag_compile(item_fn, NULL, 1, JAG_PASSES_ALL, &c));
    CHECK_ERR(jag_compiled_call(c, in, 1, &y, 1), JAG_ENOTIMPL, "cannot be read while a function is being traced");
    CHECK(y == NULL);
    jag_compiled_free(c);
    CHECK_MSG(jag__live_tensors() == live, "%ld live tensors, expected %ld", jag__live_tensors(), live);
    /* outside a trace a meta tensor says what it is */
    double v = 0;
    CHECK_OK(jag_meta_tensor(NULL, 0, JAG_FLOAT32, &m));
    CHECK_ERR(jag_item(m, &v), JAG_EINVAL, "has no data (a meta tensor)");
    jag_release(m), jag_release(x);
}

TEST_MAIN(test_trace_in_scope, test_traced_function_scope_errors, test_compiled_call_loop_in_scopes,
          test_program_run_loop_in_scopes, test_compiled_autograd_in_scopes, test_random_refused_while_tracing,
          test_item_refused_while_tracing)
