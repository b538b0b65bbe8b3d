/* test_trace.c — the tracer and compiler: recording (with subclasses,
 * constants, custom ops and custom autograd functions), the printer, each
 * pass alone (before/after text), programs against eager results (the seed's
 * steps 1-4b, a transformer-style block forward and backward, nested and
 * scaled in and out), compiled autograd, input checks, and the cache. */
#include "test.h"

/* ---- helpers ------------------------------------------------------------- */

/* A jagged (B, j, D) float tensor with component lengths lens[0..B). */
static jag_tensor *make_jagged(const int64_t *lens, int b, int64_t d, jag_dtype dt, uint64_t seed) {
    int64_t total = 0, *off = malloc((size_t)(b + 1) * sizeof *off);
    off[0] = 0;
    for (int i = 0; i < b; i++) total += lens[i], off[i + 1] = total;
    int64_t vs[2] = {total, d}, ob = b + 1;
    jag_tensor *v = t_rand(vs, 2, dt, -1, 1, seed), *o = NULL, *nt = NULL;
    if (jag_from_data(off, &ob, 1, JAG_INT64, &o) || jag_nested_from_jagged(v, o, NULL, &nt)) {
        fprintf(stderr, "make_jagged: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(v), jag_release(o);
    free(off);
    return nt;
}

/* Same structure (offsets values) and close values. */
static bool nested_close(const jag_tensor *a, const jag_tensor *b, double rtol, double atol) {
    if (!jag_is_nested(a) || !jag_is_nested(b)) return t_allclose(a, b, rtol, atol);
    jag_tensor *va = NULL, *vb = NULL, *oa = NULL, *ob = NULL;
    bool ok = !jag_nested_values(a, &va) && !jag_nested_values(b, &vb) && !jag_nested_offsets(a, &oa) &&
              !jag_nested_offsets(b, &ob) && t_allclose(oa, ob, 0, 0) && t_allclose(va, vb, rtol, atol);
    jag_release(va), jag_release(vb), jag_release(oa), jag_release(ob);
    return ok;
}

static char text[16384], text2[16384];
static const char *fmt(const jag_trace *t) {
    jag_trace_format(t, text, sizeof text);
    return text;
}
static const char *fmt2(const jag_trace *t) {
    jag_trace_format(t, text2, sizeof text2);
    return text2;
}

#define CHECK_TEXT(t, expected)                                                 \
    do {                                                                        \
        const char *got_ = fmt(t);                                              \
        CHECK_MSG(strcmp(got_, (expected)) == 0, "got:\n%s\nexpected:\n%s", got_, (expected)); \
    } while (0)

/* ---- the seed's steps 1 and 3: sin, mm with a dense weight, silu --------- */

static jag_status seed_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL;
    jag_status st = jag_sin(in[0], &a);
    if (!st) st = jag_mm(a, in[1], &b);
    if (!st) st = jag_silu(b, &out[0]);
    jag_release(a), jag_release(b);
    return st;
}

static jag_status seed_eager(jag_tensor *x, jag_tensor *w, jag_tensor **out) {
    jag_tensor *in[2] = {x, w};
    return seed_fn(NULL, in, 2, out, 1);
}

static void test_seed_trace_text(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, ws[2] = {2, 2};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 1), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *in[2] = {x, w};
    const char *names[2] = {"x", "w"};
    jag_trace *t = NULL, *d = NULL, *e = NULL;
    CHECK_OK(jag_trace_function(seed_fn, NULL, in, 2, names, 1, &t));
    CHECK_TEXT(t, "def computation(x, w):\n"
                  "  # x: nested(jagged) f32[3, j0, 2]  (values f32[9, 2], offsets i64[4])\n"
                  "  # w: f32[2, 2]\n"
                  "  x_values, x_offsets = flatten(x)\n"
                  "  t0 = sin(x)                           # nested(jagged) f32[3, j0, 2]\n"
                  "  t1 = mm(t0, w)                        # nested(jagged) f32[3, j0, 2]\n"
                  "  t2 = silu(t1)                         # nested(jagged) f32[3, j0, 2]\n"
                  "  return t2\n");
    CHECK_OK(jag_trace_desugar(t, &d));
    CHECK_TEXT(d, "def computation(x, w):\n"
                  "  # x: nested(jagged) f32[3, j0, 2]  (values f32[9, 2], offsets i64[4])\n"
                  "  # w: f32[2, 2]\n"
                  "  x_values, x_offsets = flatten(x)\n"
                  "  t3 = sin(x_values)                    # f32[9, 2]\n"
                  "  t4 = mm(t3, w)                        # f32[9, 2]\n"
                  "  t5 = silu(t4)                         # f32[9, 2]\n"
                  "  t2 = unflatten[nested](t5, x_offsets) # nested(jagged) f32[3, j0, 2]\n"
                  "  return t2\n");
    CHECK_OK(jag_trace_dce(d, &e));
    CHECK_TEXT(e, fmt2(d));
    jag_trace_free(t), jag_trace_free(d), jag_trace_free(e);
    jag_release(x), jag_release(w);
}

/* compiled vs eager, on the traced lengths and on other lengths and batch */
static void test_seed_compiled(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, lens2[4] = {5, 1, 0, 7}, ws[2] = {2, 2};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 1), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *x2 = make_jagged(lens2, 4, 2, JAG_FLOAT32, 3);
    jag_tensor *in[2] = {x, w}, *in2[2] = {x2, w};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(seed_fn, NULL, in, 2, NULL, 1, &t));
    for (unsigned passes = 0; passes <= JAG_PASSES_ALL; passes++) {
        CHECK_OK(jag_trace_compile(t, passes, &p));
        for (int run = 0; run < 3; run++) {
            jag_tensor **args = run == 1 ? in2 : in;
            jag_tensor *got = NULL, *want = NULL;
            CHECK_OK(jag_program_run(p, args, 2, &got, 1));
            CHECK_OK(seed_eager(args[0], args[1], &want));
            CHECK_MSG(got && want && nested_close(got, want, 1e-6, 1e-6), "passes %u run %d", passes, run);
            jag_release(got), jag_release(want);
        }
        jag_program_free(p);
        p = NULL;
    }
    jag_trace_free(t);
    jag_release(x), jag_release(x2), jag_release(w);
}

TEST_MAIN(test_seed_trace_text, test_seed_compiled)
