/* test_trace.c — the tracer and compiler: recording (with subclasses,
 * constants, custom ops and custom autograd functions), the printer, each
 * pass alone (before/after text), programs against eager results (steps
 * 1-4b of examples/nested_subclass_walkthrough.py, PyTorch's NestedTensor
 * prototype in jag; a transformer-style block forward and backward, nested and
 * scaled in and out), compiled autograd, input checks, and the cache. */
#include "test.h"
#include "trace/trace.h"
#include "trace/program.h"

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

/* ---- the walkthrough's steps 1 and 3: sin, mm with a dense weight, silu --------- */

static jag_status walkthrough_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL;
    jag_status st = jag_sin(in[0], &a);
    if (!st) st = jag_mm(a, in[1], &b);
    if (!st) st = jag_silu(b, &out[0]);
    jag_release(a), jag_release(b);
    return st;
}

static jag_status walkthrough_eager(jag_tensor *x, jag_tensor *w, jag_tensor **out) {
    jag_tensor *in[2] = {x, w};
    return walkthrough_fn(NULL, in, 2, out, 1);
}

static void test_walkthrough_trace_text(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, ws[2] = {2, 2};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 1), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *in[2] = {x, w};
    const char *names[2] = {"x", "w"};
    jag_trace *t = NULL, *d = NULL, *e = NULL;
    CHECK_OK(jag_trace_function(walkthrough_fn, NULL, in, 2, names, 1, &t));
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
static void test_walkthrough_compiled(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, lens2[4] = {5, 1, 0, 7}, ws[2] = {2, 2};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 1), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *x2 = make_jagged(lens2, 4, 2, JAG_FLOAT32, 3);
    jag_tensor *in[2] = {x, w}, *in2[2] = {x2, w};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(walkthrough_fn, NULL, in, 2, NULL, 1, &t));
    for (unsigned passes = 0; passes <= JAG_PASSES_ALL; passes++) {
        CHECK_OK(jag_trace_compile(t, passes, &p));
        for (int run = 0; run < 3; run++) {
            jag_tensor **args = run == 1 ? in2 : in;
            jag_tensor *got = NULL, *want = NULL;
            CHECK_OK(jag_program_run(p, args, 2, &got, 1));
            CHECK_OK(walkthrough_eager(args[0], args[1], &want));
            CHECK_MSG(got && want && nested_close(got, want, 1e-6, 1e-6), "passes %u run %d", passes, run);
            jag_release(got), jag_release(want);
        }
        jag_program_free(p);
        p = NULL;
    }
    jag_trace_free(t);
    jag_release(x), jag_release(x2), jag_release(w);
}


/* ---- the walkthrough's steps 4a and 4b: a custom op with nested decompositions and
 * an Autograd kernel (a custom autograd function), then a custom function
 * from nested to its buffer, summed and differentiated ------------------- */

static jag_op_id op_fw = -1, op_bw = -1;

static jag_status unreached_cpu(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)args, (void)nargs, (void)outs, (void)ctx;
    return JAG_EINTERNAL;
}

/* fw(x) = sin(x) on the values, rewrapped around x's offsets */
static jag_status fw_decomp(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs,
                            void *ctx) {
    (void)cls, (void)op, (void)nargs, (void)ctx;
    jag_tensor *v = NULL, *o = NULL, *s = NULL;
    jag_status st = jag_nested_values(args[0].u.t, &v);
    if (!st) st = jag_nested_offsets(args[0].u.t, &o);
    if (!st) st = jag_sin(v, &s);
    if (!st) st = jag_nested_from_jagged(s, o, NULL, outs);
    jag_release(v), jag_release(o), jag_release(s);
    return st;
}

/* bw(g, x) = g * cos(x) on the values */
static jag_status bw_decomp(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs,
                            void *ctx) {
    (void)cls, (void)op, (void)nargs, (void)ctx;
    jag_tensor *gv = NULL, *xv = NULL, *o = NULL, *c = NULL, *m = NULL;
    jag_status st = jag_nested_values(args[0].u.t, &gv);
    if (!st) st = jag_nested_values(args[1].u.t, &xv);
    if (!st) st = jag_nested_offsets(args[1].u.t, &o);
    if (!st) st = jag_cos(xv, &c);
    if (!st) st = jag_mul(gv, c, &m);
    if (!st) st = jag_nested_from_jagged(m, o, NULL, outs);
    jag_release(gv), jag_release(xv), jag_release(o), jag_release(c), jag_release(m);
    return st;
}

static jag_status custom_forward(jag_autograd_ctx *ctx, jag_tensor *const *in, int n, jag_tensor **outs) {
    (void)n;
    jag_status st = jag_autograd_save(ctx, in, 1);
    jag_value a[1] = {{.kind = JAG_VAL_TENSOR, .u.t = in[0]}};
    return st ? st : jag_op_call(op_fw, a, 1, outs);
}

static jag_status custom_backward(jag_autograd_ctx *ctx, jag_tensor *const *g, jag_tensor **gi) {
    int n;
    jag_tensor *const *saved = jag_autograd_saved(ctx, &n);
    jag_value a[2] = {{.kind = JAG_VAL_TENSOR, .u.t = g[0]}, {.kind = JAG_VAL_TENSOR, .u.t = saved[0]}};
    return jag_op_call(op_bw, a, 2, gi);
}

static const jag_function_def custom_fn = {"CustomOp", 1, custom_forward, custom_backward, NULL};

static jag_status fw_autograd(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)nargs, (void)ctx;
    jag_tensor *x = (jag_tensor *)args[0].u.t;
    return jag_function_apply(&custom_fn, &x, 1, outs);
}

/* ViewBufferFromJagged: jagged -> values; backward: values -> jagged */
static jag_status view_forward(jag_autograd_ctx *ctx, jag_tensor *const *in, int n, jag_tensor **outs) {
    (void)n;
    jag_tensor *o = NULL;
    jag_status st = jag_nested_offsets(in[0], &o);
    if (!st) st = jag_autograd_save(ctx, &o, 1);
    jag_release(o);
    return st ? st : jag_nested_values(in[0], outs);
}

static jag_status view_backward(jag_autograd_ctx *ctx, jag_tensor *const *g, jag_tensor **gi) {
    int n;
    jag_tensor *const *saved = jag_autograd_saved(ctx, &n);
    return jag_nested_from_jagged(g[0], saved[0], NULL, gi);
}

static const jag_function_def view_fn = {"ViewBufferFromJagged", 1, view_forward, view_backward, NULL};

static void define_walkthrough_ops(void) {
    if (op_fw >= 0) return;
    const jag_subclass *nested = jag_subclass_find("nested");
    if (jag_op_define("trace_ns::custom_op_fw(Tensor x) -> Tensor", &op_fw) ||
        jag_op_define("trace_ns::custom_op_bw(Tensor grad_out, Tensor saved_x) -> Tensor", &op_bw) ||
        jag_op_impl(op_fw, "CPU", unreached_cpu, NULL) || jag_op_impl(op_bw, "CPU", unreached_cpu, NULL) ||
        jag_op_impl(op_fw, "Autograd", fw_autograd, NULL) ||
        jag_subclass_register_decomp(nested, op_fw, fw_decomp, NULL) ||
        jag_subclass_register_decomp(nested, op_bw, bw_decomp, NULL)) {
        fprintf(stderr, "define_walkthrough_ops: %s\n", jag_last_error());
        exit(2);
    }
}

/* loss = sum(ViewBufferFromJagged(custom_op_fw(x))) */
static jag_status walkthrough4_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *y = NULL, *buf = NULL;
    jag_value a[1] = {{.kind = JAG_VAL_TENSOR, .u.t = in[0]}};
    jag_status st = jag_op_call(op_fw, a, 1, &y);
    if (!st) st = jag_function_apply(&view_fn, &y, 1, &buf);
    if (!st) st = jag_sum(buf, NULL, 0, false, out);
    jag_release(y), jag_release(buf);
    return st;
}

static void test_walkthrough_custom_autograd(void) {
    TEST_BEGIN();
    define_walkthrough_ops();
    int64_t lens[3] = {2, 4, 3}, lens2[2] = {6, 1};
    for (int round = 0; round < 2; round++) {
        jag_tensor *x = round ? make_jagged(lens2, 2, 2, JAG_FLOAT32, 5) : make_jagged(lens, 3, 2, JAG_FLOAT32, 4);
        CHECK_OK(jag_set_requires_grad(x, true));
        /* eager */
        jag_tensor *loss = NULL, *ge = NULL;
        CHECK_OK(walkthrough4_fn(NULL, &x, 1, &loss, 1));
        CHECK_OK(jag_backward(loss, NULL, false));
        CHECK_OK(jag_get_grad(x, &ge));
        jag_zero_grad(x);
        /* traced: the recorded trace, its grad, compiled */
        jag_trace *t = NULL, *g = NULL;
        CHECK_OK(jag_trace_function(walkthrough4_fn, NULL, &x, 1, NULL, 1, &t));
        CHECK(strstr(fmt(t), "trace_ns::custom_op_fw(x0)") && strstr(text, "autograd_function[CustomOp](x0)") &&
              strstr(text, "autograd_function[ViewBufferFromJagged]"));
        CHECK_OK(jag_trace_grad(t, &g));
        CHECK(g && strstr(fmt(g), "trace_ns::custom_op_bw(") && strstr(text, "subclass_ctor[nested]("));
        jag_program *p = NULL;
        CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
        CHECK(p && !strstr(fmt(jag_program_backward_trace(p)), "custom_op") && strstr(text, "cos"));
        if (getenv("TRACE_DEBUG")) {
            jag_trace_print(t), jag_trace_print(g), jag_trace_print(jag_program_trace(p));
            jag_trace_print(jag_program_backward_trace(p));
        }
        jag_tensor *lc = NULL, *gc = NULL;
        CHECK_OK(jag_program_run(p, &x, 1, &lc, 1));
        CHECK(lc && t_allclose(lc, loss, 1e-5, 1e-5));
        CHECK_OK(jag_backward(lc, NULL, false));
        CHECK_OK(jag_get_grad(x, &gc));
        CHECK(gc && ge && nested_close(gc, ge, 1e-6, 1e-6));
        /* and the walkthrough's own check: the gradient is cos of the values */
        jag_tensor *xv = NULL, *cv = NULL, *gv = NULL;
        CHECK_OK(jag_nested_values(x, &xv));
        CHECK_OK(jag_cos(xv, &cv));
        if (gc) CHECK_OK(jag_nested_values(gc, &gv));
        CHECK(gv && t_allclose(gv, cv, 1e-6, 1e-6));
        jag_release(xv), jag_release(cv), jag_release(gv);
        jag_release(lc), jag_release(gc), jag_release(loss), jag_release(ge);
        jag_program_free(p);
        jag_trace_free(t), jag_trace_free(g);
        jag_release(x);
    }
}

/* ---- fuse: a chain and a tree of pointwise ops on jagged values ----------- */

/* y = exp(-(sin(x) * 0.5 + cos(x))^2) + tanh(x) * b, on nested x, dense 0-d b */
static jag_status chain_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *f = NULL, *g = NULL, *h = NULL, *k = NULL;
    jag_status st = jag_sin(in[0], &a);
    if (!st) st = jag_mul_scalar(a, 0.5, &b);
    if (!st) st = jag_cos(in[0], &c);
    if (!st) st = jag_add(b, c, 1.0, &d);
    if (!st) st = jag_square(d, &e);
    if (!st) st = jag_neg(e, &f);
    if (!st) st = jag_exp(f, &g);
    if (!st) st = jag_tanh(in[0], &h);
    if (!st) st = jag_mul(h, in[1], &k);
    if (!st) st = jag_add(g, k, 1.0, &out[0]);
    jag_release(a), jag_release(b), jag_release(c), jag_release(d), jag_release(e);
    jag_release(f), jag_release(g), jag_release(h), jag_release(k);
    return st;
}

/* y = clamp(tanh(x), -0.5, 0.3) * 2: clamp (two scalars) inside a fused region */
static jag_status clamp_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL;
    jag_status st = jag_tanh(in[0], &a);
    if (!st) st = jag_clamp(a, -0.5, 0.3, &b);
    if (!st) st = jag_mul_scalar(b, 2.0, &out[0]);
    jag_release(a), jag_release(b);
    return st;
}

static void test_fuse_clamp(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, lens2[2] = {3000, 2500};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 17), *x2 = make_jagged(lens2, 2, 2, JAG_FLOAT32, 18);
    jag_tensor *in[1] = {x}, *in2[1] = {x2};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(clamp_fn, NULL, in, 1, NULL, 1, &t));
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    CHECK(p && strstr(fmt(jag_program_trace(p)), "fused[tanh, clamp, mul]"));
    for (int big = 0; p && big < 2; big++) {
        jag_tensor **args = big ? in2 : in, *got = NULL, *want = NULL;
        CHECK_OK(jag_program_run(p, args, 1, &got, 1));
        CHECK_OK(clamp_fn(NULL, args, 1, &want, 1));
        CHECK(got && want && nested_close(got, want, 0, 0));
        jag_release(got), jag_release(want);
    }
    jag_program_free(p);
    jag_trace_free(t);
    jag_release(x), jag_release(x2);
}

static void test_fuse(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, lens2[3] = {3000, 1, 2500};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 7), *x2 = make_jagged(lens2, 3, 2, JAG_FLOAT32, 8);
    jag_tensor *b = t_rand(NULL, 0, JAG_FLOAT32, -1, 1, 9);
    jag_tensor *in[2] = {x, b}, *in2[2] = {x2, b};
    const char *names[2] = {"x", "b"};
    jag_trace *t = NULL, *d = NULL, *f = NULL;
    CHECK_OK(jag_trace_function(chain_fn, NULL, in, 2, names, 1, &t));
    CHECK_OK(jag_trace_desugar(t, &d));
    CHECK_OK(jag_trace_fuse(d, &f));
    CHECK_TEXT(f, "def computation(x, b):\n"
                  "  # x: nested(jagged) f32[3, j0, 2]  (values f32[9, 2], offsets i64[4])\n"
                  "  # b: f32[]\n"
                  "  x_values, x_offsets = flatten(x)\n"
                  "  t19 = fused[sin, mul, cos, add, square, neg, exp, tanh, mul, add](x_values, b) # f32[9, 2]\n"
                  "  t9 = unflatten[nested](t19, x_offsets) # nested(jagged) f32[3, j0, 2]\n"
                  "  return t9\n");
    for (int big = 0; big < 2; big++) {
        jag_program *p = NULL;
        CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
        CHECK(p && strstr(fmt(jag_program_trace(p)), "fused[sin, mul, cos"));
        for (int run = 0; run < 3; run++) {
            jag_tensor **args = big ? in2 : in, *got = NULL, *want = NULL;
            CHECK_OK(jag_program_run(p, args, 2, &got, 1));
            CHECK_OK(chain_fn(NULL, args, 2, &want, 1));
            CHECK(got && want && nested_close(got, want, 1e-6, 1e-6));
            jag_release(got), jag_release(want);
        }
        jag_program_free(p);
    }
    /* a non-contiguous input runs step by step, with the same result */
    int64_t ds[2] = {9, 2};
    jag_tensor *dense = t_rand(ds, 2, JAG_FLOAT32, -1, 1, 10), *nc = t_noncontig(dense);
    jag_tensor *din[2] = {dense, b}, *ncin[2] = {nc, b};
    jag_trace *td = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(chain_fn, NULL, din, 2, NULL, 1, &td));
    CHECK_OK(jag_trace_compile(td, JAG_PASSES_ALL, &p));
    jag_tensor *got = NULL, *want = NULL;
    CHECK_OK(jag_program_run(p, ncin, 2, &got, 1));
    CHECK_OK(chain_fn(NULL, ncin, 2, &want, 1));
    CHECK(got && want && t_allclose(got, want, 1e-6, 1e-6));
    jag_release(got), jag_release(want), jag_release(dense), jag_release(nc);
    jag_program_free(p);
    jag_trace_free(td);
    jag_trace_free(t), jag_trace_free(d), jag_trace_free(f);
    jag_release(x), jag_release(x2), jag_release(b);
}

/* ---- dce alone: flatten(unflatten(x)), and a ctor whose result is only
 * flattened ---------------------------------------------------------------- */

static void test_dce_flatten_unflatten(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, ws[2] = {2, 2};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 1), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *in[2] = {x, w};
    const char *names[2] = {"x", "w"};
    jag_trace *t = NULL, *d = NULL, *e = NULL;
    CHECK_OK(jag_trace_function(walkthrough_fn, NULL, in, 2, names, 1, &t));
    CHECK_OK(jag_trace_desugar(t, &d));
    /* by hand: y = cos(flatten(t2)[0]) after the unflatten, returning y */
    jag_tensor *y0 = t_rand(NULL, 0, JAG_FLOAT32, 0, 1, 1);
    jag_trace *h = NULL;
    CHECK_OK(jag__trace_clone(d, &h));
    const jag_tensor *t2 = h->vars[h->outputs[0]].proxy;
    jag_tensor *inner[2] = {0};
    int n = 0;
    jag_subclass_meta meta;
    CHECK_OK(jag__flatten_quiet(t2, inner, &n, &meta));
    jag_tensor *a = jag__meta_like(inner[0]), *b = jag__meta_like(inner[1]), *c = jag__meta_like(inner[0]);
    int va = jag__trace_add_var(h, a, "a", -1), vb = jag__trace_add_var(h, b, "b", -1);
    jag_value fa[1] = {{.kind = JAG_VAL_TENSOR, .u.t = t2}};
    int fo[2] = {va, vb};
    int fs = jag__trace_add_sym(h, JAG_SYM_FLATTEN, -1, fa, 1, fo, 2);
    h->syms[fs].cls = jag_tensor_subclass(t2), h->syms[fs].meta = meta;
    h->vars[va].def = h->vars[vb].def = fs;
    int vc = jag__trace_add_var(h, c, "y", -1);
    jag_value ca[1] = {{.kind = JAG_VAL_TENSOR, .u.t = a}};
    jag_op_id cos_op;
    CHECK_OK(jag_op_find("cos", &cos_op));
    int cs = jag__trace_add_sym(h, JAG_SYM_OP, cos_op, ca, 1, &vc, 1);
    h->vars[vc].def = cs;
    h->outputs[0] = vc;
    CHECK_TEXT(h, "def computation(x, w):\n"
                  "  # x: nested(jagged) f32[3, j0, 2]  (values f32[9, 2], offsets i64[4])\n"
                  "  # w: f32[2, 2]\n"
                  "  x_values, x_offsets = flatten(x)\n"
                  "  t3 = sin(x_values)                    # f32[9, 2]\n"
                  "  t4 = mm(t3, w)                        # f32[9, 2]\n"
                  "  t5 = silu(t4)                         # f32[9, 2]\n"
                  "  t2 = unflatten[nested](t5, x_offsets) # nested(jagged) f32[3, j0, 2]\n"
                  "  a, b = flatten(t2)\n"
                  "  y = cos(a)                            # f32[9, 2]\n"
                  "  return y\n");
    CHECK_OK(jag_trace_dce(h, &e));
    CHECK_TEXT(e, "def computation(x, w):\n"
                  "  # x: nested(jagged) f32[3, j0, 2]  (values f32[9, 2], offsets i64[4])\n"
                  "  # w: f32[2, 2]\n"
                  "  x_values, x_offsets = flatten(x)\n"
                  "  t3 = sin(x_values)                    # f32[9, 2]\n"
                  "  t4 = mm(t3, w)                        # f32[9, 2]\n"
                  "  t5 = silu(t4)                         # f32[9, 2]\n"
                  "  y = cos(t5)                           # f32[9, 2]\n"
                  "  return y\n");
    /* and it runs */
    jag_program *p = NULL;
    jag_tensor *got = NULL, *want = NULL, *sv = NULL, *want_nt = NULL;
    CHECK_OK(jag_trace_compile(e, 0, &p));
    CHECK_OK(jag_program_run(p, in, 2, &got, 1));
    CHECK_OK(walkthrough_eager(x, w, &want_nt));
    CHECK_OK(jag_nested_values(want_nt, &sv));
    CHECK_OK(jag_cos(sv, &want));
    CHECK(got && want && t_allclose(got, want, 1e-6, 1e-6));
    jag_release(got), jag_release(want), jag_release(sv), jag_release(want_nt);
    jag_program_free(p);
    jag_release(inner[0]), jag_release(inner[1]), jag_release(a), jag_release(b), jag_release(c), jag_release(y0);
    jag_trace_free(h), jag_trace_free(t), jag_trace_free(d), jag_trace_free(e);
    jag_release(x), jag_release(w);
}

/* nested made inside the function from values and offsets, only unwrapped
 * again: after desugar and dce the ctor is gone */
static jag_status ctor_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *nt = NULL, *y = NULL;
    jag_status st = jag_nested_from_jagged(in[0], in[1], NULL, &nt);
    if (!st) st = jag_exp(nt, &y);
    if (!st) st = jag_nested_values(y, &out[0]);
    if (!st) st = jag_nested_from_jagged(in[0], in[1], NULL, &out[1]); /* returned: the ctor stays */
    jag_release(nt), jag_release(y);
    return st;
}

static void test_ctor_dce(void) {
    TEST_BEGIN();
    int64_t vs[2] = {9, 2}, four = 4, o[4] = {0, 2, 6, 9};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -1, 1, 3), *off = NULL;
    CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &off));
    jag_tensor *in[2] = {v, off};
    const char *names[2] = {"v", "o"};
    jag_trace *t = NULL, *d = NULL, *e = NULL;
    CHECK_OK(jag_trace_function(ctor_fn, NULL, in, 2, names, 2, &t));
    CHECK_TEXT(t, "def computation(v, o):\n"
                  "  # v: f32[9, 2]\n"
                  "  # o: i64[4]\n"
                  "  t0 = subclass_ctor[nested](v, o)      # nested(jagged) f32[3, j0, 2]\n"
                  "  t1 = exp(t0)                          # nested(jagged) f32[3, j0, 2]\n"
                  "  t2 = values(t1)                       # f32[9, 2]\n"
                  "  t3 = subclass_ctor[nested](v, o)      # nested(jagged) f32[3, j0, 2]\n"
                  "  return t2, t3\n");
    CHECK_OK(jag_trace_desugar(t, &d));
    CHECK_OK(jag_trace_dce(d, &e));
    CHECK_TEXT(e, "def computation(v, o):\n"
                  "  # v: f32[9, 2]\n"
                  "  # o: i64[4]\n"
                  "  t4 = exp(v)                           # f32[9, 2]\n"
                  "  t3 = subclass_ctor[nested](v, o)      # nested(jagged) f32[3, j0, 2]\n"
                  "  return t4, t3\n");
    jag_program *p = NULL;
    jag_tensor *got[2] = {0}, *want[2] = {0};
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    CHECK_OK(jag_program_run(p, in, 2, got, 2));
    CHECK_OK(ctor_fn(NULL, in, 2, want, 2));
    CHECK(got[0] && t_allclose(got[0], want[0], 1e-6, 1e-6) && got[1] && nested_close(got[1], want[1], 0, 0));
    /* the ctor validates at run time: bad offsets are refused */
    int64_t bad[4] = {0, 5, 3, 9};
    jag_tensor *boff = NULL, *bin[2] = {v, NULL}, *none[2] = {NULL, NULL};
    CHECK_OK(jag_from_data(bad, &four, 1, JAG_INT64, &boff));
    bin[1] = boff;
    CHECK_ERR(jag_program_run(p, bin, 2, none, 2), JAG_EINVAL, "decreases");
    CHECK(!none[0] && !none[1]);
    jag_release(boff);
    for (int i = 0; i < 2; i++) jag_release(got[i]), jag_release(want[i]);
    jag_program_free(p);
    jag_trace_free(t), jag_trace_free(d), jag_trace_free(e);
    jag_release(v), jag_release(off);
}

/* ---- scaled: taken, made inside, returned ---------------------------------- */

/* out0 = materialised (2 * xs) + scaled(y, k) (plain), out1 = 2 * xs (scaled) */
static jag_status scaled_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *z = NULL, *s = NULL;
    jag_status st = jag_mul_scalar(in[0], 2.0, &z);
    if (!st) st = jag_scaled_new(in[1], in[2], &s);
    if (!st) st = jag_add(z, s, 1.0, &out[0]);
    if (!st) out[1] = jag_retain(z);
    jag_release(z), jag_release(s);
    return st;
}

static void test_scaled_program(void) {
    TEST_BEGIN();
    int64_t sz[2] = {3, 4}, sz2[2] = {5, 4};
    for (int round = 0; round < 2; round++) {
        const int64_t *q = round ? sz2 : sz;
        jag_tensor *d = t_rand(q, 2, JAG_FLOAT32, -1, 1, 11), *sc = t_rand(NULL, 0, JAG_FLOAT32, 1, 2, 12);
        jag_tensor *y = t_rand(q, 2, JAG_FLOAT32, -1, 1, 13), *k = t_rand(NULL, 0, JAG_FLOAT32, 1, 2, 14), *xs = NULL;
        CHECK_OK(jag_scaled_new(d, sc, &xs));
        jag_tensor *in[3] = {xs, y, k};
        static jag_program *p; /* traced in round 0, reused with other sizes */
        if (round == 0) {
            jag_trace *t = NULL, *ds = NULL;
            const char *names[3] = {"xs", "y", "k"};
            CHECK_OK(jag_trace_function(scaled_fn, NULL, in, 3, names, 2, &t));
            CHECK(strstr(fmt(t), "# xs: scaled f32[3, 4]  (0 f32[3, 4], 1 f32[])") &&
                  strstr(text, "= subclass_ctor[scaled](y, k)"));
            CHECK_OK(jag_trace_desugar(t, &ds));
            CHECK(ds && strstr(fmt(ds), "t0 = unflatten[scaled](xs_0, t3)") && strstr(text, "t5 = mul(y, k)"));
            jag_trace *dd = NULL;
            CHECK_OK(jag_trace_dce(ds, &dd));
            CHECK(dd && !strstr(fmt(dd), "subclass_ctor")); /* the ctor was only unwrapped */
            jag_trace_free(dd);
            CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
            jag_trace_free(t), jag_trace_free(ds);
        }
        jag_tensor *got[2] = {0}, *want[2] = {0};
        CHECK_OK(jag_program_run(p, in, 3, got, 2));
        CHECK_OK(scaled_fn(NULL, in, 3, want, 2));
        CHECK(got[0] && t_allclose(got[0], want[0], 1e-6, 1e-6));
        CHECK(got[1] && jag_is_scaled(got[1]));
        jag_tensor *mg = NULL, *mw = NULL;
        if (got[1]) CHECK_OK(jag_scaled_materialize(got[1], &mg));
        CHECK_OK(jag_scaled_materialize(want[1], &mw));
        CHECK(mg && t_allclose(mg, mw, 1e-6, 1e-6));
        jag_release(mg), jag_release(mw);
        for (int i = 0; i < 2; i++) jag_release(got[i]), jag_release(want[i]);
        jag_release(d), jag_release(sc), jag_release(y), jag_release(k), jag_release(xs);
        if (round == 1) jag_program_free(p), p = NULL;
    }
}

/* ---- a user-defined class: "boxed" wraps one plain tensor ------------------- */

static const jag_subclass *boxed;

static void boxed_free(void *state) { jag_release(state); }
static jag_status boxed_flatten(const jag_tensor *t, jag_tensor **inner, int *n, jag_subclass_meta *meta) {
    inner[0] = jag_retain(jag_subclass_state(t));
    *n = 1;
    meta->n_ints = 0;
    return JAG_OK;
}
static jag_status boxed_wrap(jag_tensor *inner, jag_tensor **out) {
    return jag_subclass_wrap(boxed, jag_retain(inner), jag_tensor_dtype(inner), jag_sizes(inner), jag_ndim(inner), out);
}
static jag_status boxed_unflatten(const jag_subclass *cls, jag_tensor *const *inner, int n, const jag_subclass_meta *meta,
                                  jag_tensor **out) {
    (void)cls, (void)meta;
    return n == 1 ? boxed_wrap(inner[0], out) : JAG_EINVAL;
}
static jag_status boxed_dispatch(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs,
                                 void *ctx) {
    (void)ctx;
    jag_value a[16];
    for (int i = 0; i < nargs; i++) {
        a[i] = args[i];
        if (args[i].kind == JAG_VAL_TENSOR && jag_tensor_subclass(args[i].u.t) == cls) a[i].u.t = jag_subclass_state(args[i].u.t);
    }
    jag_tensor *plain[4] = {0};
    jag_status st = jag_op_call(op, a, nargs, plain);
    int n = jag_op_num_outputs(op);
    for (int k = 0; k < n && !st; k++) st = boxed_wrap(plain[k], &outs[k]);
    for (int k = 0; k < n; k++) jag_release(plain[k]);
    return st;
}

/* out = relu(b) + boxed(y) */
static jag_status boxed_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *r = NULL, *by = NULL;
    jag_status st = jag_relu(in[0], &r);
    if (!st) st = boxed_wrap(in[1], &by);
    if (!st) st = jag_add(r, by, 1.0, &out[0]);
    jag_release(r), jag_release(by);
    return st;
}

static void test_user_class_program(void) {
    TEST_BEGIN();
    if (!boxed) {
        jag_subclass_def def = {.name = "boxed", .flatten = boxed_flatten, .unflatten = boxed_unflatten,
                                .dispatch = boxed_dispatch, .destroy_state = boxed_free};
        CHECK_OK(jag_subclass_register(&def, &boxed));
    }
    int64_t sz[1] = {6};
    jag_tensor *x = t_rand(sz, 1, JAG_FLOAT64, -1, 1, 15), *y = t_rand(sz, 1, JAG_FLOAT64, -1, 1, 16), *bx = NULL;
    CHECK_OK(boxed_wrap(x, &bx));
    jag_tensor *in[2] = {bx, y};
    const char *names[2] = {"b", "y"};
    jag_trace *t = NULL, *d = NULL, *e = NULL;
    CHECK_OK(jag_trace_function(boxed_fn, NULL, in, 2, names, 1, &t));
    CHECK_TEXT(t, "def computation(b, y):\n"
                  "  # b: boxed f64[6]  (0 f64[6])\n"
                  "  # y: f64[6]\n"
                  "  b_0 = flatten(b)\n"
                  "  t0 = relu(b)                          # boxed f64[6]\n"
                  "  t1 = subclass_ctor[boxed](y)          # boxed f64[6]\n"
                  "  t2 = add(t0, t1, 1)                   # boxed f64[6]\n"
                  "  return t2\n");
    CHECK_OK(jag_trace_desugar(t, &d));
    CHECK_OK(jag_trace_dce(d, &e));
    CHECK_TEXT(e, "def computation(b, y):\n"
                  "  # b: boxed f64[6]  (0 f64[6])\n"
                  "  # y: f64[6]\n"
                  "  b_0 = flatten(b)\n"
                  "  t3 = relu(b_0)                        # f64[6]\n"
                  "  t4 = add(t3, y, 1)                    # f64[6]\n"
                  "  t2 = unflatten[boxed](t4)             # boxed f64[6]\n"
                  "  return t2\n");
    jag_program *p = NULL;
    jag_tensor *got = NULL, *want = NULL;
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    CHECK_OK(jag_program_run(p, in, 2, &got, 1));
    CHECK_OK(boxed_fn(NULL, in, 2, &want, 1));
    CHECK(got && jag_tensor_subclass(got) == boxed &&
          t_allclose(jag_subclass_state(got), jag_subclass_state(want), 1e-12, 1e-12));
    jag_release(got), jag_release(want);
    jag_program_free(p);
    jag_trace_free(t), jag_trace_free(d), jag_trace_free(e);
    jag_release(x), jag_release(y), jag_release(bx);
}

/* ---- strided nested: pointwise on the buffer ----------------------------------- */

static jag_status strided_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL;
    jag_status st = jag_tanh(in[0], &a);
    if (!st) st = jag_mul_scalar(a, 3.0, &out[0]);
    jag_release(a);
    return st;
}

static void test_strided_program(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, lens2[2] = {5, 1};
    jag_program *p = NULL;
    for (int round = 0; round < 2; round++) {
        jag_tensor *j = round ? make_jagged(lens2, 2, 3, JAG_FLOAT32, 18) : make_jagged(lens, 3, 3, JAG_FLOAT32, 17), *x = NULL;
        CHECK_OK(jag_nested_to_layout(j, JAG_STRIDED, &x));
        if (round == 0) {
            jag_trace *t = NULL;
            CHECK_OK(jag_trace_function(strided_fn, NULL, &x, 1, NULL, 1, &t));
            CHECK(strstr(fmt(t), "# x0: nested(strided)") && strstr(text, "x0_buffer, x0_sizes, x0_strides, x0_offsets = flatten(x0)"));
            CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
            CHECK(strstr(fmt(jag_program_trace(p)), "fused[tanh, mul](x0_buffer)"));
            jag_trace_free(t);
        }
        jag_tensor *got = NULL, *want = NULL, *pg = NULL, *pw = NULL;
        CHECK_OK(jag_program_run(p, &x, 1, &got, 1));
        CHECK_OK(strided_fn(NULL, &x, 1, &want, 1));
        CHECK(got && jag_tensor_layout(got) == JAG_STRIDED);
        if (got) CHECK_OK(jag_nested_to_padded(got, 0, NULL, 0, &pg));
        CHECK_OK(jag_nested_to_padded(want, 0, NULL, 0, &pw));
        CHECK(pg && pw && t_allclose(pg, pw, 1e-6, 1e-6));
        jag_release(got), jag_release(want), jag_release(pg), jag_release(pw), jag_release(x), jag_release(j);
    }
    jag_program_free(p);
}

/* ---- bad inputs: a clear error, nothing run, nothing leaked ------------------ */

static int counted_runs;
static jag_status count_cpu(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)nargs, (void)ctx;
    counted_runs++;
    return jag_clone(args[0].u.t, outs);
}
static jag_status count_meta(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)nargs, (void)ctx;
    return jag_clone(args[0].u.t, outs); /* runs as shape inference on meta tensors */
}

static jag_op_id op_count = -1;

/* y = counted(x) then the walkthrough function */
static jag_status counted_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *c = NULL;
    jag_value a[1] = {{.kind = JAG_VAL_TENSOR, .u.t = in[1]}};
    jag_status st = jag_op_call(op_count, a, 1, &c);
    jag_tensor *args[2] = {in[0], c};
    if (!st) st = walkthrough_fn(NULL, args, 2, out, 1);
    jag_release(c);
    return st;
}

static jag_status rand_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    return jag_rand_like(in[1], NULL, out);
}

static void test_bad_inputs(void) {
    TEST_BEGIN();
    if (op_count < 0) {
        CHECK_OK(jag_op_define("trace_ns::counted(Tensor x) -> Tensor", &op_count));
        CHECK_OK(jag_op_impl(op_count, "CPU", count_cpu, NULL));
        CHECK_OK(jag_op_impl(op_count, "Meta", count_meta, NULL));
    }
    int64_t lens[3] = {2, 4, 3}, ws[2] = {2, 2}, w1[1] = {2};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 1), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *x64 = make_jagged(lens, 3, 2, JAG_FLOAT64, 1), *xs = NULL, *xv = NULL, *wv = t_rand(w1, 1, JAG_FLOAT32, -1, 1, 2);
    CHECK_OK(jag_nested_to_layout(x, JAG_STRIDED, &xs));
    CHECK_OK(jag_nested_values(x, &xv));
    jag_tensor *in[2] = {x, w};
    const char *names[2] = {"x", "w"};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(counted_fn, NULL, in, 2, names, 1, &t));
    CHECK(strstr(fmt(t), "= trace_ns::counted(w)"));
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    jag_tensor *out = NULL;
    counted_runs = 0;
    CHECK_OK(jag_program_run(p, in, 2, &out, 1));
    CHECK(counted_runs == 1 && out);
    jag_release(out), out = NULL;
    jag_tensor *bad_dtype[2] = {x64, w}, *bad_layout[2] = {xs, w}, *bad_plain[2] = {xv, w}, *bad_rank[2] = {x, wv};
    CHECK_ERR(jag_program_run(p, bad_dtype, 2, &out, 1), JAG_EDTYPE, "input 0 ('x') has dtype float64, expected float32");
    CHECK_ERR(jag_program_run(p, bad_layout, 2, &out, 1), JAG_EINVAL, "input 0 ('x') has the strided layout, expected jagged");
    CHECK_ERR(jag_program_run(p, bad_plain, 2, &out, 1), JAG_EINVAL, "input 0 ('x') is a plain tensor, expected a nested tensor");
    CHECK_ERR(jag_program_run(p, bad_rank, 2, &out, 1), JAG_ESHAPE, "input 1 ('w') has 1 dims ([2]), expected 2");
    CHECK_ERR(jag_program_run(p, in, 1, &out, 1), JAG_EINVAL, "1 inputs, expected 2");
    CHECK_ERR(jag_program_run(p, in, 2, &out, 2), JAG_EINVAL, "2 outputs asked, the program has 1");
    CHECK(counted_runs == 1 && out == NULL);
    /* an op failing while running: the error of the op, no output */
    int64_t w3[2] = {3, 2};
    jag_tensor *wbig = t_rand(w3, 2, JAG_FLOAT32, -1, 1, 2), *bad_shape[2] = {x, wbig};
    CHECK_ERR(jag_program_run(p, bad_shape, 2, &out, 1), JAG_ESHAPE, "jag_mm");
    CHECK(out == NULL);
    jag_release(wbig);
    jag_program_free(p);
    jag_trace_free(t);
    /* the tracer refuses what it cannot record, with a message */
    jag_trace *t2 = NULL;
    CHECK_ERR(jag_trace_function(counted_fn, NULL, in, 2, names, 0, &t2), JAG_EINVAL, "outputs");
    CHECK(t2 == NULL);
    /* an op that fails on the proxies fails the trace, with the op's message */
    int64_t w32[2] = {3, 2};
    jag_tensor *wbad = t_rand(w32, 2, JAG_FLOAT32, -1, 1, 2), *badin[2] = {x, wbad};
    CHECK_ERR(jag_trace_function(walkthrough_fn, NULL, badin, 2, names, 1, &t2), JAG_ESHAPE, "jag_mm");
    CHECK(t2 == NULL);
    jag_release(wbad);
    /* random numbers inside the function are refused */
    CHECK_ERR(jag_trace_function(rand_fn, NULL, in, 2, names, 1, &t2), JAG_ENOTIMPL, "random numbers");
    CHECK(t2 == NULL);
    jag_release(x), jag_release(w), jag_release(x64), jag_release(xs), jag_release(xv), jag_release(wv);
}

/* ---- jag_compile: one program per kind of inputs -------------------------------- */

static void test_compile_cache(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3}, lens2[4] = {1, 1, 8, 0}, ws[2] = {2, 2};
    jag_tensor *x = make_jagged(lens, 3, 2, JAG_FLOAT32, 1), *x2 = make_jagged(lens2, 4, 2, JAG_FLOAT32, 2);
    jag_tensor *x64 = make_jagged(lens, 3, 2, JAG_FLOAT64, 3), *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 4);
    jag_tensor *w64 = t_rand(ws, 2, JAG_FLOAT64, -1, 1, 5);
    jag_compiled *c = NULL;
    CHECK_OK(jag_compile(walkthrough_fn, NULL, 1, JAG_PASSES_ALL, &c));
    jag_tensor *calls[4][2] = {{x, w}, {x2, w}, {x64, w64}, {x, w}};
    int programs[4] = {1, 1, 2, 2};
    for (int i = 0; i < 4; i++) {
        jag_tensor *got = NULL, *want = NULL;
        CHECK_OK(jag_compiled_call(c, calls[i], 2, &got, 1));
        CHECK_OK(walkthrough_eager(calls[i][0], calls[i][1], &want));
        CHECK(got && want && nested_close(got, want, 1e-6, 1e-6));
        CHECK_MSG(jag_compiled_num_programs(c) == programs[i], "call %d: %d programs", i, jag_compiled_num_programs(c));
        jag_release(got), jag_release(want);
    }
    jag_compiled_free(c);
    jag_release(x), jag_release(x2), jag_release(x64), jag_release(w), jag_release(w64);
}

/* ---- one program for several sizes: a later trace as evidence ------------------ */

static int heads_calls; /* calls of heads_fn: a compiled call makes one when it traces */

/* in: x (B, j, 8) nested, w (8, 8): y = sum over the last dim of
 * view(linear(x) values, [-1, 2, 4]) (heads of 4) * 0.5: the 2 and the 4
 * equal no input size, so one trace fixes the sizes */
static jag_status heads_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    heads_calls++;
    jag_tensor *h = NULL, *v = NULL, *r = NULL, *s = NULL;
    int d2[1] = {2};
    jag_status st = jag_linear(in[0], in[1], NULL, &h);
    if (!st) st = jag_nested_values(h, &v);
    if (!st) st = jag_view(v, (int64_t[]){-1, 2, 4}, 3, &r);
    if (!st) st = jag_sum(r, d2, 1, false, &s);
    if (!st) st = jag_mul_scalar(s, 0.5, &out[0]);
    jag_release(h), jag_release(v), jag_release(r), jag_release(s);
    return st;
}

/* the sum of heads_fn: a loss for gradients */
static jag_status heads_loss_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    jag_tensor *y = NULL;
    jag_status st = heads_fn(ctx, in, n, &y, n_out);
    if (!st) st = jag_sum(y, NULL, 0, false, &out[0]);
    jag_release(y);
    return st;
}

/* in: x (B, T, 4) dense: view(x, [-1, T * 4]) * 2. T * 4 equals no input
 * size; it moves with T, so traces of other T must not share a program
 * (while traces of other B may). */
static jag_status flat_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *r = NULL;
    jag_status st = jag_view(in[0], (int64_t[]){-1, jag_size(in[0], 1) * 4}, 2, &r);
    if (!st) st = jag_mul_scalar(r, 2.0, &out[0]);
    jag_release(r);
    return st;
}

/* in: x (..., C) dense: view(x, [-1, C]) * 2, C read from the input */
static jag_status last_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *r = NULL;
    jag_status st = jag_view(in[0], (int64_t[]){-1, jag_size(in[0], -1)}, 2, &r);
    if (!st) st = jag_mul_scalar(r, 2.0, &out[0]);
    jag_release(r);
    return st;
}

/* in: x (..., 6) dense: view(x, [-1, 2, 3]) * 2 (the 2 and the 3 constants) */
static jag_status thirds_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *r = NULL;
    jag_status st = jag_view(in[0], (int64_t[]){-1, 2, 3}, 3, &r);
    if (!st) st = jag_mul_scalar(r, 2.0, &out[0]);
    jag_release(r);
    return st;
}

/* A static program (what jag_compile makes of a program with size lists)
 * runs its traced sizes and refuses others with a message naming the input,
 * writing no output. */
static void test_static_program(void) {
    TEST_BEGIN();
    int64_t s46[2] = {4, 6}, s56[2] = {5, 6};
    jag_tensor *x = t_rand(s46, 2, JAG_FLOAT32, -1, 1, 95), *x5 = t_rand(s56, 2, JAG_FLOAT32, -1, 1, 96);
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(thirds_fn, NULL, &x, 1, NULL, 1, &t));
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    CHECK_OK(jag__program_make_static(p));
    jag_tensor *got = NULL, *want = NULL;
    CHECK_OK(jag_program_run(p, &x, 1, &got, 1));
    CHECK_OK(thirds_fn(NULL, &x, 1, &want, 1));
    CHECK(got && want && t_allclose(got, want, 0, 0));
    jag_release(got), jag_release(want), got = want = NULL;
    CHECK_ERR(jag_program_run(p, &x5, 1, &got, 1), JAG_ESHAPE, "input 0 ('x0') has size 5 at dim 0, expected 4: every trace of this program had that size");
    CHECK(got == NULL);
    jag_program_free(p);
    jag_trace_free(t);
    jag_release(x), jag_release(x5);
}

static void test_compile_generalizes(void) {
    TEST_BEGIN();
    /* a model's constants: the second batch length generalizes the first program, the rest run it untraced
     * (four components: no inner size equals the 2 or the 4) */
    int64_t ws[2] = {8, 8}, lens[4][4] = {{2, 4, 3, 1}, {5, 1, 1, 2}, {1, 7, 2, 3}, {3, 3, 3, 3}};
    jag_tensor *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 61);
    jag_compiled *c = NULL;
    CHECK_OK(jag_compile(heads_fn, NULL, 1, JAG_PASSES_ALL, &c));
    int traces[4] = {1, 2, 2, 2}, seen = 0;
    for (int i = 0; i < 4; i++) {
        jag_tensor *x = make_jagged(lens[i], 4, 8, JAG_FLOAT32, 62 + (uint64_t)i), *in[2] = {x, w}, *got = NULL, *want = NULL;
        int before = heads_calls;
        CHECK_OK(jag_compiled_call(c, in, 2, &got, 1));
        seen += heads_calls - before;
        CHECK_OK(heads_fn(NULL, in, 2, &want, 1));
        CHECK_MSG(got && want && t_allclose(got, want, 1e-6, 1e-6), "batch %d", i);
        CHECK_MSG(seen == traces[i], "batch %d: %d traces", i, seen);
        CHECK_MSG(jag_compiled_num_programs(c) == 1, "batch %d: %d programs", i, jag_compiled_num_programs(c));
        jag_release(x), jag_release(got), jag_release(want);
    }
    /* another batch size: the program kept the offsets' 5 (both traces had it);
     * a trace with 7 agrees and frees it */
    int64_t lens6[6] = {2, 1, 4, 1, 1, 2}, lens3[3] = {2, 6, 1};
    jag_tensor *x6 = make_jagged(lens6, 6, 8, JAG_FLOAT32, 70), *in6[2] = {x6, w}, *got = NULL, *want = NULL;
    CHECK_OK(jag_compiled_call(c, in6, 2, &got, 1));
    CHECK_OK(heads_fn(NULL, in6, 2, &want, 1));
    CHECK(got && want && t_allclose(got, want, 1e-6, 1e-6));
    CHECK_MSG(jag_compiled_num_programs(c) == 1, "%d programs", jag_compiled_num_programs(c));
    jag_release(x6), jag_release(got), jag_release(want), got = want = NULL;
    jag_compiled_free(c);
    /* three components: the offsets' 4 equals the head size. One trace cannot tell whether the 4 is that size;
     * the second (six components, the 4 unchanged) shows it is a constant: one program, right on both */
    CHECK_OK(jag_compile(heads_fn, NULL, 1, JAG_PASSES_ALL, &c));
    jag_tensor *x3 = make_jagged(lens3, 3, 8, JAG_FLOAT32, 71), *in3[2] = {x3, w};
    jag_tensor *x6b = make_jagged(lens6, 6, 8, JAG_FLOAT32, 72), *in6b[2] = {x6b, w};
    for (int i = 0; i < 2; i++) {
        jag_tensor *const *inp = i ? in6b : in3;
        CHECK_OK(jag_compiled_call(c, inp, 2, &got, 1));
        CHECK_OK(heads_fn(NULL, inp, 2, &want, 1));
        CHECK_MSG(got && want && t_allclose(got, want, 1e-6, 1e-6), "call %d", i);
        CHECK_MSG(jag_compiled_num_programs(c) == 1, "call %d: %d programs", i, jag_compiled_num_programs(c));
        jag_release(got), jag_release(want), got = want = NULL;
    }
    jag_release(x3), jag_release(x6b);
    jag_compiled_free(c);
    /* four rows of one token each: the 4 of the view equals the row count. Read from the rows, a batch of ten
     * rows would view as (4, 2, 10) where eager code views (20, 2, 4): the first program must not serve it
     * untested; the second trace shows the 4 is a constant */
    CHECK_OK(jag_compile(heads_fn, NULL, 1, JAG_PASSES_ALL, &c));
    int64_t ones[4] = {1, 1, 1, 1};
    jag_tensor *xr4 = make_jagged(ones, 4, 8, JAG_FLOAT32, 73), *xr10 = make_jagged(lens[0], 4, 8, JAG_FLOAT32, 74);
    jag_tensor *inr4[2] = {xr4, w}, *inr10[2] = {xr10, w};
    for (int i = 0; i < 3; i++) {
        jag_tensor *const *inp = i == 1 ? inr10 : inr4;
        CHECK_OK(jag_compiled_call(c, inp, 2, &got, 1));
        CHECK_OK(heads_fn(NULL, inp, 2, &want, 1));
        CHECK_MSG(got && want && jag_size(got, 0) == jag_size(want, 0) && t_allclose(got, want, 1e-6, 1e-6), "call %d", i);
        CHECK_MSG(jag_compiled_num_programs(c) == 1, "call %d: %d programs", i, jag_compiled_num_programs(c));
        jag_release(got), jag_release(want), got = want = NULL;
    }
    jag_release(xr4), jag_release(xr10);
    jag_compiled_free(c);
    /* with gradients: the forward and backward programs generalize together */
    CHECK_OK(jag_set_requires_grad(w, true));
    CHECK_OK(jag_compile(heads_loss_fn, NULL, 1, JAG_PASSES_ALL, &c));
    for (int i = 0; i < 3; i++) {
        jag_tensor *x = make_jagged(lens[i], 4, 8, JAG_FLOAT32, 90 + (uint64_t)i), *in[2] = {x, w};
        jag_tensor *le = NULL, *lc = NULL, *ge = NULL, *gc = NULL;
        CHECK_OK(heads_loss_fn(NULL, in, 2, &le, 1));
        CHECK_OK(jag_backward(le, NULL, false));
        CHECK_OK(jag_get_grad(w, &ge));
        jag_zero_grad(w);
        CHECK_OK(jag_compiled_call(c, in, 2, &lc, 1));
        CHECK_OK(jag_backward(lc, NULL, false));
        CHECK_OK(jag_get_grad(w, &gc));
        jag_zero_grad(w);
        CHECK_MSG(lc && le && t_allclose(lc, le, 1e-5, 1e-5) && gc && ge && t_allclose(gc, ge, 1e-5, 1e-5), "batch %d", i);
        CHECK_MSG(jag_compiled_num_programs(c) == 1, "batch %d: %d programs", i, jag_compiled_num_programs(c));
        jag_release(x), jag_release(le), jag_release(lc), jag_release(ge), jag_release(gc);
    }
    jag_compiled_free(c);

    /* a size list entry computed from an input size: T changes it, so a trace of another T keeps its own program;
     * B does not, so a trace of another B joins the program of its T */
    int64_t shapes[5][3] = {{2, 3, 4}, {2, 5, 4}, {4, 3, 4}, {3, 5, 4}, {6, 3, 4}};
    int programs[5] = {1, 2, 2, 2, 2};
    CHECK_OK(jag_compile(flat_fn, NULL, 1, JAG_PASSES_ALL, &c));
    for (int i = 0; i < 5; i++) {
        jag_tensor *x = t_rand(shapes[i], 3, JAG_FLOAT32, -1, 1, 80 + (uint64_t)i), *g = NULL, *wnt = NULL;
        CHECK_OK(jag_compiled_call(c, &x, 1, &g, 1));
        CHECK_OK(flat_fn(NULL, &x, 1, &wnt, 1));
        CHECK_MSG(g && wnt && jag_ndim(g) == 2 && jag_size(g, 0) == shapes[i][0] && jag_size(g, 1) == shapes[i][1] * 4 &&
                      t_allclose(g, wnt, 0, 0),
                  "shape %d", i);
        CHECK_MSG(jag_compiled_num_programs(c) == programs[i], "shape %d: %d programs", i, jag_compiled_num_programs(c));
        jag_release(x), jag_release(g), jag_release(wnt);
    }
    jag_compiled_free(c);
    /* an entry of 1 read from an input size: the program of x (1, 1) must not take it for a constant */
    int64_t s11[2] = {1, 1}, s15[2] = {1, 5};
    jag_tensor *x11 = t_rand(s11, 2, JAG_FLOAT32, -1, 1, 85), *x15 = t_rand(s15, 2, JAG_FLOAT32, -1, 1, 86);
    CHECK_OK(jag_compile(last_fn, NULL, 1, JAG_PASSES_ALL, &c));
    for (int i = 0; i < 3; i++) {
        jag_tensor *x = i == 1 ? x15 : x11, *g = NULL, *wnt = NULL;
        CHECK_OK(jag_compiled_call(c, &x, 1, &g, 1));
        CHECK_OK(last_fn(NULL, &x, 1, &wnt, 1));
        CHECK_MSG(g && wnt && jag_size(g, 0) == jag_size(wnt, 0) && jag_size(g, 1) == jag_size(wnt, 1) && t_allclose(g, wnt, 0, 0),
                  "call %d", i);
        jag_release(g), jag_release(wnt);
    }
    jag_release(x11), jag_release(x15);
    jag_compiled_free(c);
    jag_release(w);
}

/* ---- a transformer-style block over a jagged batch, forward and backward ------ */

/* in: x (B, j, D) nested, ln_w, ln_b (D), w1 (F, D), b1 (F), w2 (D, F), b2 (D)
 * loss = sum of the values of
 *        softmax(x + linear(gelu(linear(layer_norm(x), w1, b1)), w2, b2), -1)^2 */
static jag_status block_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *h = NULL, *a = NULL, *g = NULL, *o = NULL, *r = NULL, *sm = NULL, *sq = NULL, *red = NULL;
    jag_status st = jag_layer_norm(in[0], 1, in[1], in[2], 1e-5, &h);
    if (!st) st = jag_linear(h, in[3], in[4], &a);
    if (!st) st = jag_gelu(a, &g);
    if (!st) st = jag_linear(g, in[5], in[6], &o);
    if (!st) st = jag_add(in[0], o, 1.0, &r);
    if (!st) st = jag_softmax(r, -1, &sm);
    if (!st) st = jag_square(sm, &sq);
    if (!st) st = jag_nested_values(sq, &red); /* (reductions over the ragged dim need data: not traced yet) */
    if (!st) st = jag_sum(red, NULL, 0, false, &out[0]);
    jag_release(h), jag_release(a), jag_release(g), jag_release(o), jag_release(r), jag_release(sm), jag_release(sq);
    jag_release(red);
    return st;
}

static void test_transformer_block(void) {
    TEST_BEGIN();
    const int64_t D = 8, F = 16;
    int64_t lens[3] = {3, 5, 2}, lens2[4] = {7, 1, 4, 2}, d1[1] = {D}, f1[1] = {F}, fd[2] = {F, D}, df[2] = {D, F};
    jag_tensor *params[6] = {t_rand(d1, 1, JAG_FLOAT64, 0.5, 1.5, 21), t_rand(d1, 1, JAG_FLOAT64, -0.1, 0.1, 22),
                             t_rand(fd, 2, JAG_FLOAT64, -0.3, 0.3, 23), t_rand(f1, 1, JAG_FLOAT64, -0.1, 0.1, 24),
                             t_rand(df, 2, JAG_FLOAT64, -0.3, 0.3, 25), t_rand(d1, 1, JAG_FLOAT64, -0.1, 0.1, 26)};
    for (int i = 0; i < 6; i++) CHECK_OK(jag_set_requires_grad(params[i], true));
    jag_compiled *c = NULL;
    CHECK_OK(jag_compile(block_fn, NULL, 1, JAG_PASSES_ALL, &c));
    for (int round = 0; round < 3; round++) {
        jag_tensor *x = round == 1 ? make_jagged(lens2, 4, D, JAG_FLOAT64, 28) : make_jagged(lens, 3, D, JAG_FLOAT64, 27);
        CHECK_OK(jag_set_requires_grad(x, true));
        jag_tensor *in[7] = {x, params[0], params[1], params[2], params[3], params[4], params[5]};
        /* eager */
        jag_tensor *le = NULL, *ge[7] = {0}, *gc[7] = {0}, *lc = NULL;
        CHECK_OK(block_fn(NULL, in, 7, &le, 1));
        CHECK_OK(jag_backward(le, NULL, false));
        for (int i = 0; i < 7; i++) {
            CHECK_OK(jag_get_grad(in[i], &ge[i]));
            jag_zero_grad(in[i]);
        }
        /* compiled */
        CHECK_OK(jag_compiled_call(c, in, 7, &lc, 1));
        CHECK(lc && t_allclose(lc, le, 1e-12, 1e-12));
        CHECK_OK(jag_backward(lc, NULL, false));
        for (int i = 0; i < 7; i++) {
            CHECK_OK(jag_get_grad(in[i], &gc[i]));
            CHECK_MSG(gc[i] && ge[i] && nested_close(gc[i], ge[i], 1e-10, 1e-12), "round %d: gradient of input %d", round, i);
            jag_zero_grad(in[i]);
        }
        /* without grad mode: the forward-only program */
        bool prev = jag_set_grad_enabled(false);
        jag_tensor *ln = NULL;
        CHECK_OK(jag_compiled_call(c, in, 7, &ln, 1));
        CHECK(ln && t_allclose(ln, le, 1e-12, 1e-12) && !jag_requires_grad(ln));
        jag_set_grad_enabled(prev);
        jag_release(ln);
        for (int i = 0; i < 7; i++) jag_release(ge[i]), jag_release(gc[i]);
        jag_release(le), jag_release(lc), jag_release(x);
    }
    /* one program with grad, one without, for every length: sizes come from the inputs */
    CHECK_MSG(jag_compiled_num_programs(c) == 2, "%d programs", jag_compiled_num_programs(c));
    jag_compiled_free(c);
    for (int i = 0; i < 6; i++) jag_release(params[i]);
}

/* ---- buffers are kept between runs ------------------------------------------------ */

static void test_buffers_reused(void) {
    TEST_BEGIN();
    int64_t lens[3] = {300, 200, 100}, shorter[2] = {50, 40}, longer[2] = {900, 900};
    jag_tensor *x = make_jagged(lens, 3, 4, JAG_FLOAT32, 1), *xs = make_jagged(shorter, 2, 4, JAG_FLOAT32, 2);
    jag_tensor *xl = make_jagged(longer, 2, 4, JAG_FLOAT32, 3), *b = t_rand(NULL, 0, JAG_FLOAT32, -1, 1, 4);
    jag_tensor *in[2] = {x, b}, *ins[2] = {xs, b}, *inl[2] = {xl, b};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(chain_fn, NULL, in, 2, NULL, 1, &t));
    unsigned pass_sets[2] = {JAG_PASS_DESUGAR | JAG_PASS_DCE, JAG_PASSES_ALL}; /* plain kernels, and fused */
    for (int ps = 0; ps < 2; ps++) {
        unsigned passes = pass_sets[ps];
        CHECK_OK(jag_trace_compile(t, passes, &p));
        void *ptr[4] = {0};
        jag_tensor **runs[4] = {in, in, ins, inl};
        for (int r = 0; r < 4; r++) {
            jag_tensor *out = NULL, *v = NULL;
            CHECK_OK(jag_program_run(p, runs[r], 2, &out, 1));
            if (out) CHECK_OK(jag_nested_values(out, &v));
            ptr[r] = v ? jag_data(v) : NULL;
            jag_release(v), jag_release(out);
        }
        /* the same storage again, also for smaller inputs; a larger run needs more */
        CHECK_MSG(ptr[0] && ptr[1] == ptr[0] && ptr[2] == ptr[0] && ptr[3] != ptr[0], "passes %u", passes);
        jag_program_free(p);
    }
    jag_trace_free(t);
    jag_release(x), jag_release(xs), jag_release(xl), jag_release(b);
}

/* y = |2 x + b| - x^2, b 0-d: five plain ops (or one fused region) */
static jag_status kept_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *c = NULL, *d = NULL, *e = NULL;
    jag_status st = jag_mul_scalar(in[0], 2.0, &a);
    if (!st) st = jag_add(a, in[1], 1.0, &c);
    if (!st) st = jag_abs(c, &d);
    if (!st) st = jag_square(in[0], &e);
    if (!st) st = jag_sub(d, e, &out[0]);
    jag_release(a), jag_release(c), jag_release(d), jag_release(e);
    return st;
}

/* y has x's shape and y = |2 x + b| - x^2 element by element (float32:
 * within a few roundings of the value in double) */
static bool kept_fn_matches(const jag_tensor *y, const jag_tensor *x, const jag_tensor *b) {
    if (!y || !t_same_shape(y, x)) return false;
    double bv = t_get(b, 0);
    for (int64_t i = 0; i < jag_numel(x); i++) {
        double xv = t_get(x, i), want = fabs(2 * xv + bv) - xv * xv;
        if (fabs(t_get(y, i) - want) > 1e-5 * (1 + fabs(want))) return false;
    }
    return true;
}

/* A result the caller keeps is never a buffer the next run writes into; a
 * result let go is written again. Inputs of other shapes between runs. */
static void test_kept_results_untouched(void) {
    TEST_BEGIN();
    int64_t sz[2] = {4, 4}, flat[2] = {2, 8}, small[2] = {3, 5};
    jag_tensor *x1 = t_rand(sz, 2, JAG_FLOAT32, -2, 2, 11), *x2 = t_rand(sz, 2, JAG_FLOAT32, -2, 2, 12);
    jag_tensor *x3 = t_rand(flat, 2, JAG_FLOAT32, -2, 2, 13), *x4 = t_rand(small, 2, JAG_FLOAT32, -2, 2, 14);
    jag_tensor *b = t_rand(NULL, 0, JAG_FLOAT32, -1, 1, 15);
    jag_tensor *in1[2] = {x1, b}, *in2[2] = {x2, b}, *in3[2] = {x3, b}, *in4[2] = {x4, b};
    unsigned pass_sets[2] = {JAG_PASS_DESUGAR | JAG_PASS_DCE, JAG_PASSES_ALL}; /* plain kernels, and fused */
    for (int ps = 0; ps < 2; ps++) {
        jag_trace *t = NULL;
        jag_program *p = NULL;
        CHECK_OK(jag_trace_function(kept_fn, NULL, in1, 2, NULL, 1, &t));
        CHECK_OK(jag_trace_compile(t, pass_sets[ps], &p));
        jag_tensor *y1 = NULL, *y2 = NULL, *y3 = NULL;
        CHECK_OK(jag_program_run(p, in1, 2, &y1, 1));
        CHECK_OK(jag_program_run(p, in2, 2, &y2, 1)); /* y1 still held */
        CHECK_MSG(y1 && y2 && jag_data(y1) != jag_data(y2), "passes %u", pass_sets[ps]);
        CHECK_MSG(kept_fn_matches(y1, x1, b) && kept_fn_matches(y2, x2, b), "passes %u", pass_sets[ps]);
        void *let_go = y2 ? jag_data(y2) : NULL;
        jag_release(y2);
        CHECK_OK(jag_program_run(p, in1, 2, &y3, 1));
        CHECK_MSG(y3 && jag_data(y3) == let_go, "passes %u: the buffer let go is used again", pass_sets[ps]);
        CHECK_MSG(kept_fn_matches(y3, x1, b) && kept_fn_matches(y1, x1, b), "passes %u", pass_sets[ps]);
        jag_release(y3);
        /* other shapes (the same number of elements, then fewer), then the first again */
        jag_tensor **runs[3] = {in3, in4, in1};
        for (int r = 0; r < 3; r++) {
            jag_tensor *y = NULL;
            CHECK_OK(jag_program_run(p, runs[r], 2, &y, 1));
            CHECK_MSG(kept_fn_matches(y, runs[r][0], b), "passes %u, run %d", pass_sets[ps], r);
            jag_release(y);
        }
        CHECK_MSG(kept_fn_matches(y1, x1, b), "passes %u", pass_sets[ps]);
        jag_program_free(p);
        jag_trace_free(t);
        CHECK_MSG(kept_fn_matches(y1, x1, b), "passes %u: a result outlives its program", pass_sets[ps]);
        jag_release(y1);
    }
    jag_release(x1), jag_release(x2), jag_release(x3), jag_release(x4), jag_release(b);
}

/* out[0] is the input itself, out[1] = -x */
static jag_status passthrough_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    out[0] = jag_retain(in[0]);
    return jag_neg(in[0], &out[1]);
}

/* An output that is an input: handed back as the input, never a buffer of
 * the program's, and the input unchanged. */
static void test_output_is_input(void) {
    TEST_BEGIN();
    int64_t sz[2] = {3, 4};
    jag_tensor *x1 = t_rand(sz, 2, JAG_FLOAT32, -2, 2, 21), *x2 = t_rand(sz, 2, JAG_FLOAT32, -2, 2, 22);
    jag_tensor *c1 = NULL, *c2 = NULL;
    CHECK_OK(jag_clone(x1, &c1));
    CHECK_OK(jag_clone(x2, &c2));
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(passthrough_fn, NULL, &x1, 1, NULL, 2, &t));
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    jag_tensor *xs[2] = {x1, x2}, *cs[2] = {c1, c2}, *kept[2][2] = {{0}};
    for (int r = 0; r < 4; r++) {
        jag_tensor *y[2] = {0};
        CHECK_OK(jag_program_run(p, &xs[r % 2], 1, y, 2));
        CHECK(y[0] && jag_data(y[0]) == jag_data(xs[r % 2]));
        bool neg = y[1] != NULL && t_same_shape(y[1], xs[r % 2]);
        for (int64_t i = 0; neg && i < 12; i++) neg = t_get(y[1], i) == -t_get(cs[r % 2], i);
        CHECK_MSG(neg, "run %d", r);
        if (r < 2) kept[r][0] = y[0], kept[r][1] = y[1]; /* runs 2 and 3 while these are held */
        else jag_release(y[0]), jag_release(y[1]);
    }
    for (int r = 0; r < 2; r++) {
        CHECK(t_allclose(xs[r], cs[r], 0, 0));
        bool neg = kept[r][1] != NULL;
        for (int64_t i = 0; neg && i < 12; i++) neg = t_get(kept[r][1], i) == -t_get(cs[r], i);
        CHECK_MSG(neg, "kept result of run %d", r);
        jag_release(kept[r][0]), jag_release(kept[r][1]);
    }
    jag_program_free(p);
    jag_trace_free(t);
    jag_release(x1), jag_release(x2), jag_release(c1), jag_release(c2);
}

/* ---- grad alone: the backward appended, as text, then compiled ---------------- */

static jag_status small_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL;
    jag_status st = jag_sin(in[0], &a);
    if (!st) st = jag_mul(a, in[1], &b);
    if (!st) st = jag_sum(b, NULL, 0, false, &out[0]);
    jag_release(a), jag_release(b);
    return st;
}

static void test_grad_pass(void) {
    TEST_BEGIN();
    int64_t sz[2] = {2, 3};
    jag_tensor *x = t_rand(sz, 2, JAG_FLOAT64, -1, 1, 31), *w = t_rand(sz, 2, JAG_FLOAT64, -1, 1, 32);
    CHECK_OK(jag_set_requires_grad(x, true));
    jag_tensor *in[2] = {x, w};
    const char *names[2] = {"x", "w"};
    jag_trace *t = NULL, *g = NULL;
    CHECK_OK(jag_trace_function(small_fn, NULL, in, 2, names, 1, &t));
    CHECK_OK(jag_trace_grad(t, &g));
    CHECK_TEXT(g, "def computation(x, w, g_t2):\n"
                  "  # x: f64[2, 3]  requires_grad\n"
                  "  # w: f64[2, 3]\n"
                  "  # g_t2: f64[]\n"
                  "  t0 = sin(x)                           # f64[2, 3]\n"
                  "  t1 = mul(t0, w)                       # f64[2, 3]\n"
                  "  t2 = sum(t1, [], False)               # f64[]\n"
                  "  t3 = expand(g_t2, [1, 1])             # f64[1, 1]\n"
                  "  t4 = expand(t3, [2, 3])               # f64[2, 3]\n"
                  "  t5 = clone(t4)                        # f64[2, 3]\n"
                  "  t6 = mul(t5, w)                       # f64[2, 3]\n"
                  "  t7 = cos(x)                           # f64[2, 3]\n"
                  "  grad_x = mul(t6, t7)                  # f64[2, 3]\n"
                  "  return t2, grad_x\n");
    jag_trace *again = NULL;
    CHECK_ERR(jag_trace_grad(g, &again), JAG_EINVAL, "already has a backward");
    CHECK(again == NULL);
    /* the joint trace runs: loss and the gradient of x, against eager */
    jag_program *p = NULL;
    CHECK_OK(jag_trace_compile(g, JAG_PASSES_ALL, &p));
    jag_tensor *one = NULL, *jin[3] = {x, w, NULL}, *outs[2] = {0}, *le = NULL, *ge = NULL;
    CHECK_OK(jag_full(NULL, 0, 1.0, JAG_FLOAT64, &one));
    jin[2] = one;
    bool prev = jag_set_grad_enabled(false);
    CHECK_OK(jag_program_run(p, jin, 3, outs, 2));
    jag_set_grad_enabled(prev);
    CHECK_OK(small_fn(NULL, in, 2, &le, 1));
    CHECK_OK(jag_backward(le, NULL, false));
    CHECK_OK(jag_get_grad(x, &ge));
    CHECK(outs[0] && outs[1] && t_allclose(outs[0], le, 1e-12, 1e-12) && t_allclose(outs[1], ge, 1e-12, 1e-12));
    /* no input requiring grad: refused */
    jag_trace *t2 = NULL, *g2 = NULL;
    CHECK_OK(jag_set_requires_grad(x, false));
    CHECK_OK(jag_trace_function(small_fn, NULL, in, 2, names, 1, &t2));
    CHECK_ERR(jag_trace_grad(t2, &g2), JAG_EINVAL, "no input of the trace requires grad");
    jag_release(one), jag_release(outs[0]), jag_release(outs[1]), jag_release(le), jag_release(ge);
    jag_program_free(p);
    jag_trace_free(t), jag_trace_free(g), jag_trace_free(t2);
    jag_release(x), jag_release(w);
}

/* ---- size lists bound to input sizes ------------------------------------------ */

/* a (R, C) + b (R) broadcast by an explicit expand to [R, C] */
static jag_status expand_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *u = NULL, *e = NULL;
    jag_status st = jag_unsqueeze(in[1], 1, &u);
    if (!st) st = jag_expand(u, jag_sizes(in[0]), 2, &e);
    if (!st) st = jag_add(in[0], e, 1.0, &out[0]);
    jag_release(u), jag_release(e);
    return st;
}

static void test_bound_sizes(void) {
    TEST_BEGIN();
    int64_t a34[2] = {3, 4}, b3[1] = {3}, a54[2] = {5, 4}, b5[1] = {5};
    jag_tensor *a = t_rand(a34, 2, JAG_FLOAT32, -1, 1, 41), *b = t_rand(b3, 1, JAG_FLOAT32, -1, 1, 42);
    jag_tensor *a2 = t_rand(a54, 2, JAG_FLOAT32, -1, 1, 43), *b2 = t_rand(b5, 1, JAG_FLOAT32, -1, 1, 44);
    jag_tensor *in[2] = {a, b}, *in2[2] = {a2, b2}, *bad[2] = {a2, b};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(expand_fn, NULL, in, 2, NULL, 1, &t));
    CHECK(strstr(fmt(t), "expand(t0, [3, 4])"));
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    jag_tensor *got = NULL, *want = NULL;
    CHECK_OK(jag_program_run(p, in2, 2, &got, 1)); /* [3, 4] became [5, 4]: from the inputs */
    CHECK_OK(expand_fn(NULL, in2, 2, &want, 1));
    CHECK(got && want && t_allclose(got, want, 1e-6, 1e-6));
    jag_release(got), jag_release(want), got = NULL;
    /* the 3 of [3, 4] was the size of a's dim 0 and of b's: they must agree */
    CHECK_ERR(jag_program_run(p, bad, 2, &got, 1), JAG_ESHAPE, "were both 3 when traced, now 5 and 3");
    CHECK(got == NULL);
    jag_program_free(p);
    jag_trace_free(t);
    jag_release(a), jag_release(b), jag_release(a2), jag_release(b2);
}

/* ---- jagged with holes (lengths): three inner tensors, the layout checked -------- */

static void test_holes(void) {
    TEST_BEGIN();
    int64_t vs[2] = {9, 2}, four = 4, three = 3, o[4] = {0, 2, 6, 9}, l[3] = {1, 3, 2}, ws[2] = {2, 2};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -1, 1, 51), *off = NULL, *len = NULL, *x = NULL;
    jag_tensor *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 52), *plain = make_jagged((int64_t[]){2, 4, 3}, 3, 2, JAG_FLOAT32, 53);
    CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &off));
    CHECK_OK(jag_from_data(l, &three, 1, JAG_INT64, &len));
    CHECK_OK(jag_nested_from_jagged(v, off, len, &x));
    jag_tensor *in[2] = {x, w}, *in_plain[2] = {plain, w};
    const char *names[2] = {"x", "w"};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(walkthrough_fn, NULL, in, 2, names, 1, &t));
    CHECK(strstr(fmt(t), "x_values, x_offsets, x_lengths = flatten(x)"));
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    CHECK(strstr(fmt(jag_program_trace(p)), "unflatten[nested](t5, x_offsets, x_lengths)"));
    jag_tensor *got = NULL, *want = NULL, *gl = NULL;
    CHECK_OK(jag_program_run(p, in, 2, &got, 1));
    CHECK_OK(walkthrough_eager(x, w, &want));
    CHECK(got && want && nested_close(got, want, 1e-6, 1e-6));
    if (got) CHECK_OK(jag_nested_lengths(got, &gl));
    CHECK(gl && t_allclose(gl, len, 0, 0));
    jag_tensor *none = NULL;
    CHECK_ERR(jag_program_run(p, in_plain, 2, &none, 1), JAG_EINVAL, "has the jagged layout, expected jagged with holes");
    CHECK(none == NULL);
    jag_release(got), jag_release(want), jag_release(gl);
    jag_program_free(p);
    jag_trace_free(t);
    jag_release(v), jag_release(off), jag_release(len), jag_release(x), jag_release(w), jag_release(plain);
}

/* ---- tracing while the caller has a scope open ---------------------------------
 * Proxies the tracer makes (a nested input's, a handler's results) must not
 * land in the caller's scope: the scope would give back the trace's own
 * reference (a use after free when the trace is freed). The traced function
 * uses a scope of its own, as C code chaining ops does. */
static jag_status scoped_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *s = NULL, *y = NULL, *off = NULL, *v = NULL, *r = NULL;
    jag_status st = jag_scope_begin();
    if (!st) st = jag_sin(in[0], &s);
    if (!st) st = jag_mm(s, in[1], &y);
    if (!st) st = jag_nested_offsets(in[0], &off); /* rebuilt from its values and the input's offsets */
    if (!st) st = jag_nested_values(y, &v);
    if (!st) st = jag_nested_from_jagged(v, off, NULL, &r);
    if (!st) jag_retain(r); /* the output is ours, not the scope's */
    jag_status st2 = jag_scope_end();
    if (!st && st2) jag_release(r), st = st2;
    if (!st) out[0] = r;
    return st;
}

static void test_trace_inside_scope(void) {
    TEST_BEGIN();
    int64_t ws[2] = {2, 2};
    jag_tensor *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 61);
    jag_compiled *c = NULL;
    CHECK_OK(jag_compile(scoped_fn, NULL, 1, JAG_PASSES_ALL, &c));
    for (int i = 0; i < 2; i++) {
        jag_tensor *x = make_jagged((int64_t[]){2, 3 + i}, 2, 2, JAG_FLOAT32, 62 + (uint64_t)i), *got = NULL, *want = NULL;
        jag_tensor *in[2] = {x, w};
        CHECK_OK(jag_scope_begin());
        CHECK_OK(jag_compiled_call(c, in, 2, &got, 1)); /* recorded in the scope, as every new tensor */
        CHECK(jag_scope_keep(got) == got);              /* and kept past it: ours to release */
        CHECK_OK(scoped_fn(NULL, in, 2, &want, 1));
        CHECK_OK(jag_scope_end());
        CHECK(got && want && nested_close(got, want, 1e-6, 1e-6)); /* (its helpers release by hand: no scope) */
        jag_release(got), jag_release(want), jag_release(x);
    }
    CHECK(jag_compiled_num_programs(c) == 1);
    jag_compiled_free(c);
    jag_release(w);
}

TEST_MAIN(test_holes, test_trace_inside_scope, test_bound_sizes, test_grad_pass, test_transformer_block, test_buffers_reused, test_kept_results_untouched, test_output_is_input, test_walkthrough_trace_text, test_walkthrough_compiled, test_walkthrough_custom_autograd, test_fuse, test_fuse_clamp, test_dce_flatten_unflatten,
          test_ctor_dce, test_scaled_program, test_user_class_program, test_strided_program, test_bad_inputs,
          test_compile_cache, test_compile_generalizes, test_static_program)
