/* test_ragged_softmax.c — softmax / log_softmax down the ragged dim of a
 * jagged tensor as the plain ops ragged_softmax and ragged_softmax_backward:
 * called by name on inner tensors and through the nested op, against the
 * dense softmax of each unbound component (torch.nested: softmax(nt, dim=1)
 * is softmax(component, dim=0) for each component), the gradient against
 * torch's formulas y (g - sum g y) and g - exp(y) sum g computed here in
 * double, gradchecks, holes, a traced program that desugars into the op,
 * and bad arguments refused with inputs unchanged. */
#include "test.h"


static jag_value vt(const jag_tensor *t) { return (jag_value){.kind = t ? JAG_VAL_TENSOR : JAG_VAL_NONE, .u.t = t}; }
static jag_value vb(bool b) { return (jag_value){.kind = JAG_VAL_BOOL, .u.b = b}; }

/* Components of 9 value rows: offsets (0, 2, 2, 6, 9), one empty; with
 * holes the lengths (2, 0, 3, 1) leave rows 5, 7 and 8 outside. */
static const int64_t OFF[5] = {0, 2, 2, 6, 9}, LEN[4] = {2, 0, 3, 1};

static int64_t comp_len(int b, bool holes) { return holes ? LEN[b] : OFF[b + 1] - OFF[b]; }

static bool in_component(int64_t r, bool holes) {
    for (int b = 0; b < 4; b++)
        if (r >= OFF[b] && r < OFF[b] + comp_len(b, holes)) return true;
    return false;
}

/* ragged_softmax(values, offsets, lengths, log) by name */
static jag_status ragged_softmax(const jag_tensor *v, const jag_tensor *o, const jag_tensor *l, bool log, jag_tensor **out) {
    jag_value a[4] = {vt(v), vt(o), vt(l), vb(log)};
    return jag_op_call(t_op_id("ragged_softmax"), a, 4, out);
}

static jag_status ragged_softmax_backward(const jag_tensor *y, const jag_tensor *o, const jag_tensor *l, const jag_tensor *g,
                                          bool log, jag_tensor **out) {
    jag_value a[5] = {vt(y), vt(o), vt(l), vt(g), vb(log)};
    return jag_op_call(t_op_id("ragged_softmax_backward"), a, 5, out);
}

/* Rows [r0, r0 + n) of a (rows, ...) tensor equal want (n, ...); rows
 * outside every component are 0. */
static void check_rows(const jag_tensor *got, int64_t r0, const jag_tensor *want, double rtol, double atol, const char *what) {
    jag_tensor *part = NULL;
    CHECK_OK(jag_narrow(got, 0, r0, jag_size(want, 0), &part));
    CHECK_MSG(part && t_allclose(part, want, rtol, atol), "%s: rows from %lld", what, (long long)r0);
    jag_release(part);
}

static void check_holes_zero(const jag_tensor *got, bool holes, const char *what) {
    int64_t per_row = jag_numel(got) / jag_size(got, 0);
    for (int64_t r = 0; r < jag_size(got, 0); r++)
        if (!in_component(r, holes))
            for (int64_t i = 0; i < per_row; i++) CHECK_MSG(t_get(got, r * per_row + i) == 0, "%s: hole row %lld", what, (long long)r);
}

/* The op and the nested op against jag_softmax / jag_log_softmax of each
 * component over dim 0, every trailing position on its own: values (9, 3)
 * and (9, 2, 3), float32 and float64, softmax and log_softmax, with and
 * without holes. */
static void test_matches_dense_per_component(void) {
    TEST_BEGIN();
    const jag_dtype dts[2] = {JAG_FLOAT32, JAG_FLOAT64};
    for (int d = 0; d < 2; d++)
        for (int nd = 2; nd <= 3; nd++)
            for (int holes = 0; holes < 2; holes++)
                for (int log = 0; log < 2; log++) {
                    double rtol = dts[d] == JAG_FLOAT32 ? 1e-5 : 1e-12, atol = dts[d] == JAG_FLOAT32 ? 1e-6 : 1e-13;
                    int64_t vs[3] = {9, nd == 2 ? 3 : 2, 3};
                    jag_tensor *v = t_rand(vs, nd, dts[d], -4, 4, 100 + (uint64_t)(d * 8 + nd * 4 + holes * 2 + log));
                    jag_tensor *o = t_i64(OFF, 5), *l = holes ? t_i64(LEN, 4) : NULL, *y = NULL, *nt = NULL, *ny = NULL;
                    char what[96];
                    snprintf(what, sizeof what, "%s %d-d holes=%d log=%d", jag_dtype_name(dts[d]), nd, holes, log);
                    CHECK_OK(ragged_softmax(v, o, l, log, &y));
                    CHECK(y && jag_tensor_dtype(y) == dts[d] && jag_ndim(y) == nd && jag_size(y, 0) == 9);
                    CHECK_OK(jag_nested_from_jagged(v, o, l, &nt));
                    CHECK_OK(log ? jag_log_softmax(nt, 1, &ny) : jag_softmax(nt, 1, &ny));
                    CHECK(ny && jag_is_nested(ny));
                    jag_tensor *comps[4] = {0}, *ycomps[4] = {0};
                    int nc = 0, nyc = 0;
                    CHECK_OK(jag_nested_unbind(nt, comps, 4, &nc));
                    if (ny) CHECK_OK(jag_nested_unbind(ny, ycomps, 4, &nyc));
                    CHECK(nc == 4 && nyc == 4);
                    for (int b = 0; b < nc && y; b++) {
                        jag_tensor *want = NULL;
                        CHECK_OK(log ? jag_log_softmax(comps[b], 0, &want) : jag_softmax(comps[b], 0, &want));
                        CHECK(jag_size(comps[b], 0) == comp_len(b, holes));
                        check_rows(y, OFF[b], want, rtol, atol, what);
                        if (b < nyc) CHECK_MSG(t_allclose(ycomps[b], want, rtol, atol), "%s: nested component %d", what, b);
                        jag_release(want);
                    }
                    if (y) check_holes_zero(y, holes, what);
                    for (int b = 0; b < 4; b++) jag_release(comps[b]), jag_release(ycomps[b]);
                    jag_release(v), jag_release(o), jag_release(l), jag_release(y), jag_release(nt), jag_release(ny);
                }
}

/* One component of 1000 x 1000 rows x columns float32 (large enough to be
 * cut into chunks across threads): the op against the dense softmax over
 * dim 0 of the same tensor, and its backward against torch's formulas
 * computed here in double (see test_backward_formula). */
static void test_long_component(void) {
    TEST_BEGIN();
    enum { N = 1000 };
    int64_t vs[2] = {N, N}, off[2] = {0, N};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -5, 5, 7), *g = t_rand(vs, 2, JAG_FLOAT32, -1, 1, 8), *o = t_i64(off, 2);
    double *sum = calloc(N, sizeof *sum);
    for (int log = 0; log < 2; log++) {
        jag_tensor *y = NULL, *want = NULL, *gx = NULL;
        CHECK_OK(ragged_softmax(v, o, NULL, log, &y));
        CHECK_OK(log ? jag_log_softmax(v, 0, &want) : jag_softmax(v, 0, &want));
        CHECK_MSG(y && want && t_allclose(y, want, 1e-5, 1e-6), "log=%d", log);
        if (y) CHECK_OK(ragged_softmax_backward(y, o, NULL, g, log, &gx));
        if (gx) {
            const float *yp = jag_data(y), *gp = jag_data(g), *zp = jag_data(gx);
            for (int c = 0; c < N; c++) sum[c] = 0;
            for (int r = 0; r < N; r++)
                for (int c = 0; c < N; c++) sum[c] += (double)gp[r * N + c] * (log ? 1.0 : (double)yp[r * N + c]);
            int bad = 0;
            for (int r = 0; r < N; r++)
                for (int c = 0; c < N; c++) {
                    double yv = yp[r * N + c], gv = gp[r * N + c];
                    double w = log ? gv - exp(yv) * sum[c] : yv * (gv - sum[c]);
                    bad += !(fabs(zp[r * N + c] - w) <= 1e-5 * (1 + fabs(w)));
                }
            CHECK_MSG(bad == 0, "log=%d: %d gradient elements off the formula", log, bad);
        }
        jag_release(y), jag_release(want), jag_release(gx);
    }
    free(sum);
    jag_release(v), jag_release(g), jag_release(o);
}

/* ragged_softmax_backward against torch's formulas computed here in double
 * per component and column: softmax y (g - sum_j g_j y_j), log_softmax
 * g - exp(y) sum_j g_j; rows outside every component 0 (their g ignored). */
static void test_backward_formula(void) {
    TEST_BEGIN();
    const jag_dtype dts[2] = {JAG_FLOAT32, JAG_FLOAT64};
    for (int d = 0; d < 2; d++)
        for (int holes = 0; holes < 2; holes++)
            for (int log = 0; log < 2; log++) {
                double tol = dts[d] == JAG_FLOAT32 ? 1e-5 : 1e-12;
                int64_t vs[2] = {9, 3};
                jag_tensor *v = t_rand(vs, 2, dts[d], -3, 3, 40 + (uint64_t)(d * 4 + holes * 2 + log));
                jag_tensor *g = t_rand(vs, 2, dts[d], -1, 1, 60 + (uint64_t)(d * 4 + holes * 2 + log));
                jag_tensor *o = t_i64(OFF, 5), *l = holes ? t_i64(LEN, 4) : NULL, *y = NULL, *gx = NULL;
                CHECK_OK(ragged_softmax(v, o, l, log, &y));
                CHECK_OK(ragged_softmax_backward(y, o, l, g, log, &gx));
                CHECK(gx && jag_tensor_dtype(gx) == dts[d] && jag_size(gx, 0) == 9 && jag_size(gx, 1) == 3);
                for (int b = 0; gx && b < 4; b++)
                    for (int c = 0; c < 3; c++) {
                        double s = 0;
                        int64_t r0 = OFF[b], n = comp_len(b, holes);
                        for (int64_t r = r0; r < r0 + n; r++) s += t_get(g, r * 3 + c) * (log ? 1.0 : t_get(y, r * 3 + c));
                        for (int64_t r = r0; r < r0 + n; r++) {
                            double yv = t_get(y, r * 3 + c), gv = t_get(g, r * 3 + c);
                            double want = log ? gv - exp(yv) * s : yv * (gv - s);
                            CHECK_MSG(fabs(t_get(gx, r * 3 + c) - want) <= tol * (1 + fabs(want)), "d=%d holes=%d log=%d b=%d c=%d",
                                      d, holes, log, b, c);
                        }
                    }
                if (gx) check_holes_zero(gx, holes, "backward");
                jag_release(v), jag_release(g), jag_release(o), jag_release(l), jag_release(y), jag_release(gx);
            }
}

/* gradcheck (float64, central differences) of x -> ragged_softmax(x) and of
 * x -> values(softmax(nested(x), dim 1)): the nested op's gradient comes
 * from the op's rule. */
typedef struct {
    const jag_tensor *o, *l;
    bool log, nested;
} grad_case;

static jag_status grad_fn(jag_tensor *const *inputs, int n_inputs, jag_tensor **out, void *ctx) {
    (void)n_inputs;
    const grad_case *c = ctx;
    if (!c->nested) return ragged_softmax(inputs[0], c->o, c->l, c->log, out);
    jag_tensor *nt = NULL, *y = NULL;
    jag_status st = jag_nested_from_jagged(inputs[0], c->o, c->l, &nt);
    if (!st) st = c->log ? jag_log_softmax(nt, 1, &y) : jag_softmax(nt, 1, &y);
    if (!st) st = jag_nested_values(y, out);
    jag_release(nt), jag_release(y);
    return st;
}

static void test_gradcheck(void) {
    TEST_BEGIN();
    int64_t vs[3] = {9, 2, 2};
    for (int nested = 0; nested < 2; nested++)
        for (int holes = 0; holes < 2; holes++)
            for (int log = 0; log < 2; log++) {
                jag_tensor *x = t_rand(vs, 3, JAG_FLOAT64, -2, 2, 80 + (uint64_t)(nested * 4 + holes * 2 + log));
                jag_tensor *o = t_i64(OFF, 5), *l = holes ? t_i64(LEN, 4) : NULL;
                CHECK_OK(jag_set_requires_grad(x, true));
                grad_case c = {o, l, log, nested};
                jag_status st = jag_gradcheck(grad_fn, &c, &x, 1, 1e-6, 1e-7, 1e-6);
                CHECK_MSG(st == JAG_OK, "nested=%d holes=%d log=%d: %s", nested, holes, log, jag_last_error());
                jag_release(x), jag_release(o), jag_release(l);
            }
}

/* A traced function doing softmax over the ragged dim of a nested tensor
 * (attention pooling: sum over the ragged dim of softmax(x) * x) desugars into ragged_softmax (and its gradient into ragged_softmax_
 * backward); compiled, it gives eager's values and gradients. */
static jag_status traced_softmax(void *ctx, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs, int n_outputs) {
    (void)ctx, (void)n_inputs, (void)n_outputs;
    jag_tensor *y = NULL, *p = NULL;
    jag_status st = jag_softmax(inputs[0], 1, &y);
    if (!st) st = jag_mul(y, inputs[0], &p);
    if (!st) st = jag_sum(p, (int[]){1}, 1, false, &outputs[0]); /* (B, 3): the rows pooled by their softmax weights */
    jag_release(y), jag_release(p);
    return st;
}

static void test_traced_and_compiled(void) {
    TEST_BEGIN();
    int64_t vs[2] = {9, 3};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT64, -2, 2, 91), *o = t_i64(OFF, 5), *l = t_i64(LEN, 4), *nt = NULL;
    CHECK_OK(jag_nested_from_jagged(v, o, l, &nt));
    CHECK_OK(jag_set_requires_grad(nt, true));
    jag_trace *t = NULL, *d = NULL;
    CHECK_OK(jag_trace_function(traced_softmax, NULL, &nt, 1, NULL, 1, &t));
    if (t) CHECK_OK(jag_trace_desugar(t, &d));
    if (d) {
        static char text[16384];
        jag_trace_format(d, text, sizeof text);
        CHECK_MSG(strstr(text, "ragged_softmax(") != NULL, "no ragged_softmax in:\n%s", text);
    }
    jag_program *p = NULL;
    if (t) CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    if (p && jag_program_backward_trace(p)) {
        static char text[16384];
        jag_trace_format(jag_program_backward_trace(p), text, sizeof text);
        CHECK_MSG(strstr(text, "ragged_softmax_backward(") != NULL, "no ragged_softmax_backward in:\n%s", text);
    } else {
        CHECK_MSG(p && jag_program_backward_trace(p), "no backward program");
    }
    jag_tensor *got = NULL, *want = NULL, *g_got = NULL, *g_want = NULL;
    if (p) CHECK_OK(jag_program_run(p, &nt, 1, &got, 1));
    if (got) {
        jag_tensor *s = NULL;
        CHECK_OK(jag_sum(got, NULL, 0, false, &s));
        CHECK_OK(jag_backward(s, NULL, false));
        CHECK_OK(jag_get_grad(nt, &g_got));
        jag_release(s);
    }
    jag_zero_grad(nt);
    CHECK_OK(traced_softmax(NULL, &nt, 1, &want, 1));
    if (want) {
        jag_tensor *s = NULL;
        CHECK_OK(jag_sum(want, NULL, 0, false, &s));
        CHECK_OK(jag_backward(s, NULL, false));
        CHECK_OK(jag_get_grad(nt, &g_want));
        jag_release(s);
    }
    CHECK(got && want && t_allclose(got, want, 1e-12, 1e-13));
    jag_tensor *gv1 = NULL, *gv2 = NULL;
    if (g_got && g_want) {
        CHECK_OK(jag_nested_values(g_got, &gv1));
        CHECK_OK(jag_nested_values(g_want, &gv2));
    }
    CHECK_MSG(gv1 && gv2 && t_allclose(gv1, gv2, 1e-12, 1e-13), "compiled and eager gradients differ");
    jag_release(gv1), jag_release(gv2), jag_release(got), jag_release(want), jag_release(g_got), jag_release(g_want);
    jag_program_free(p);
    jag_trace_free(t), jag_trace_free(d);
    jag_release(v), jag_release(o), jag_release(l), jag_release(nt);
}

/* Offsets, lengths or dtypes that do not fit: a clear error naming the op
 * and the argument, no output, the inputs unchanged. */
static void test_bad_input_refused(void) {
    TEST_BEGIN();
    int64_t vs[2] = {5, 2};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -1, 1, 5), *v0 = NULL, *out = NULL;
    CHECK_OK(jag_clone(v, &v0));
    jag_tensor *past = t_i64((int64_t[]){0, 2, 7}, 3), *down = t_i64((int64_t[]){0, 3, 1}, 3), *ok = t_i64((int64_t[]){0, 2, 5}, 3);
    jag_tensor *len3 = t_i64((int64_t[]){1, 1, 1}, 3), *len_long = t_i64((int64_t[]){2, 4}, 2), *o32 = NULL, *vi = NULL;
    CHECK_OK(jag_to_dtype(ok, JAG_INT32, &o32));
    CHECK_OK(jag_to_dtype(v, JAG_INT64, &vi));
    CHECK_ERR(ragged_softmax(v, past, NULL, false, &out), JAG_EINVAL, "do not fit the 5 value rows");
    CHECK_ERR(ragged_softmax(v, down, NULL, false, &out), JAG_EINVAL, "component 1");
    CHECK_ERR(ragged_softmax(v, ok, len3, false, &out), JAG_EINVAL, "argument 'lengths' must be int64 of shape (B) = (2)");
    CHECK_ERR(ragged_softmax(v, ok, len_long, true, &out), JAG_EINVAL, "component 1");
    CHECK_ERR(ragged_softmax(v, o32, NULL, false, &out), JAG_EINVAL, "ragged_softmax: argument 'offsets' must be int64");
    CHECK_ERR(ragged_softmax(vi, ok, NULL, false, &out), JAG_EDTYPE, "ragged_softmax: argument 'values' must be a float tensor");
    CHECK(out == NULL);
    /* the backward: g not of y's shape or dtype, and bad offsets */
    jag_tensor *y = NULL, *g_short = t_rand((int64_t[]){4, 2}, 2, JAG_FLOAT32, -1, 1, 6), *g64 = NULL;
    CHECK_OK(ragged_softmax(v, ok, NULL, false, &y));
    CHECK_OK(jag_to_dtype(v, JAG_FLOAT64, &g64));
    CHECK_ERR(ragged_softmax_backward(y, ok, NULL, g_short, false, &out), JAG_ESHAPE,
              "ragged_softmax_backward: argument 'g' is float32 [4, 2], expected y's dtype and shape, float32 [5, 2]");
    CHECK_ERR(ragged_softmax_backward(y, ok, NULL, g64, false, &out), JAG_ESHAPE, "argument 'g' is float64");
    CHECK_ERR(ragged_softmax_backward(y, past, NULL, v, false, &out), JAG_EINVAL, "do not fit the 5 value rows");
    CHECK(out == NULL);
    /* the nested op on integer values: the nested op's name */
    jag_tensor *nti = NULL;
    CHECK_OK(jag_nested_from_jagged(vi, ok, NULL, &nti));
    CHECK_ERR(jag_softmax(nti, 1, &out), JAG_EDTYPE, "softmax: softmax over the ragged dim needs float values, got int64");
    CHECK(out == NULL);
    CHECK_MSG(t_allclose(v, v0, 0, 0), "values changed by a refused call");
    int64_t want_off[3] = {0, 2, 7};
    for (int i = 0; i < 3; i++) CHECK(t_get(past, i) == (double)want_off[i]);
    jag_release(nti), jag_release(y), jag_release(g_short), jag_release(g64);
    jag_release(v), jag_release(v0), jag_release(past), jag_release(down), jag_release(ok), jag_release(len3);
    jag_release(len_long), jag_release(o32), jag_release(vi);
}

TEST_MAIN(test_matches_dense_per_component, test_long_component, test_backward_formula, test_gradcheck,
          test_traced_and_compiled, test_bad_input_refused)
