/* test_autograd.c — the engine: requires_grad, grad mode, backward over
 * shared subgraphs and unused outputs, accumulation, retain_graph, detach,
 * custom functions, error paths, and steps 4a and 4b of
 * examples/nested_subclass_walkthrough.py (a custom op
 * with forward and backward ops glued by a custom function, gradients
 * through a nested tensor and its values). The rules themselves are checked
 * one by one in test_autograd_rules.c. */
#include "test.h"

static void test_leaf_flags(void) {
    TEST_BEGIN();
    int64_t s[2] = {2, 3};
    jag_tensor *x = t_rand(s, 2, JAG_FLOAT64, -1, 1, 1), *i = NULL, *y = NULL, *g = (jag_tensor *)1;
    CHECK(!jag_requires_grad(x) && jag_is_leaf(x));
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK(jag_requires_grad(x));
    CHECK_OK(jag_get_grad(x, &g));
    CHECK(g == NULL);
    CHECK_OK(jag_zeros(s, 2, JAG_INT64, &i));
    CHECK_ERR(jag_set_requires_grad(i, true), JAG_EINVAL, "only float tensors can require grad");
    CHECK_OK(jag_exp(x, &y));
    CHECK(jag_requires_grad(y) && !jag_is_leaf(y));
    CHECK_ERR(jag_set_requires_grad(y, false), JAG_EINVAL, "is the output of jag_exp, not a leaf");
    /* grad mode off: nothing recorded */
    bool prev = jag_set_grad_enabled(false);
    jag_tensor *z = NULL;
    CHECK_OK(jag_exp(x, &z));
    CHECK(!jag_requires_grad(z) && jag_is_leaf(z));
    CHECK(!jag_is_grad_enabled());
    jag_set_grad_enabled(prev);
    CHECK(jag_is_grad_enabled());
    /* integer outputs never require grad */
    jag_tensor *c = NULL;
    CHECK_OK(jag_gt_scalar(x, 0.0, &c));
    CHECK(!jag_requires_grad(c));
    /* detach: same data, no history */
    jag_tensor *d = NULL;
    CHECK_OK(jag_detach(y, &d));
    CHECK(jag_is_leaf(d) && !jag_requires_grad(d) && jag_data(d) == jag_data(y));
    jag_release(x), jag_release(i), jag_release(y), jag_release(z), jag_release(c), jag_release(d);
}

/* d/dx of sum((x * x) + exp(x)) with x used twice (a shared subgraph) */
static void test_backward_hand_values(void) {
    TEST_BEGIN();
    double v[4] = {0.5, -1.0, 2.0, 0.0};
    int64_t four = 4;
    jag_tensor *x = t_from(v, &four, 1, JAG_FLOAT64), *sq = NULL, *e = NULL, *s = NULL, *t = NULL, *g = NULL;
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK_OK(jag_mul(x, x, &sq));
    CHECK_OK(jag_exp(x, &e));
    CHECK_OK(jag_add(sq, e, 1.0, &s));
    CHECK_OK(jag_sum(s, NULL, 0, false, &t));
    CHECK_OK(jag_backward(t, NULL, false));
    CHECK_OK(jag_get_grad(x, &g));
    CHECK(g != NULL);
    for (int i = 0; g && i < 4; i++) CHECK_CLOSE(t_get(g, i), 2 * v[i] + exp(v[i]), 1e-12);
    jag_release(g), g = NULL;
    /* a non-leaf gets no .grad (as torch): only leaves accumulate */
    CHECK_OK(jag_get_grad(s, &g));
    CHECK(g == NULL && !jag_is_leaf(s));
    /* a second backward through a freed graph */
    CHECK_ERR(jag_backward(t, NULL, false), JAG_ESTATE, "freed by an earlier backward");
    /* accumulation across calls, and retain_graph */
    jag_tensor *t2 = NULL, *s2 = NULL;
    CHECK_OK(jag_mul_scalar(x, 3.0, &s2));
    CHECK_OK(jag_sum(s2, NULL, 0, false, &t2));
    CHECK_OK(jag_backward(t2, NULL, true));
    CHECK_OK(jag_backward(t2, NULL, false));
    CHECK_OK(jag_get_grad(x, &g));
    for (int i = 0; g && i < 4; i++) CHECK_CLOSE(t_get(g, i), 2 * v[i] + exp(v[i]) + 6.0, 1e-12);
    jag_release(g), g = NULL;
    jag_zero_grad(x);
    CHECK_OK(jag_get_grad(x, &g));
    CHECK(g == NULL);
    jag_release(x), jag_release(sq), jag_release(e), jag_release(s), jag_release(t), jag_release(t2), jag_release(s2);
}

static void test_backward_errors(void) {
    TEST_BEGIN();
    int64_t s[2] = {2, 2};
    jag_tensor *x = t_rand(s, 2, JAG_FLOAT64, -1, 1, 3), *y = NULL, *plain = t_rand(s, 2, JAG_FLOAT64, -1, 1, 4);
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK_OK(jag_sin(x, &y));
    CHECK_ERR(jag_backward(y, NULL, false), JAG_ESHAPE, "a gradient is needed unless it has one element");
    CHECK_ERR(jag_backward(plain, NULL, false), JAG_ESTATE, "does not require grad");
    jag_tensor *g32 = NULL, *gbad = NULL;
    CHECK_OK(jag_ones(s, 2, JAG_FLOAT32, &g32));
    CHECK_ERR(jag_backward(y, g32, false), JAG_EDTYPE, "'grad' has dtype float32, expected float64");
    int64_t s3[2] = {2, 3};
    CHECK_OK(jag_ones(s3, 2, JAG_FLOAT64, &gbad));
    CHECK_ERR(jag_backward(y, gbad, false), JAG_ESHAPE, "'grad' has shape [2, 3], expected [2, 2]");
    jag_tensor *gx = (jag_tensor *)1;
    CHECK_OK(jag_get_grad(x, &gx));
    CHECK(gx == NULL); /* nothing changed */
    /* an explicit gradient for a non-scalar root: d sin(x) . g = cos(x) * g */
    jag_tensor *g = t_rand(s, 2, JAG_FLOAT64, -1, 1, 5);
    CHECK_OK(jag_backward(y, g, false));
    CHECK_OK(jag_get_grad(x, &gx));
    for (int i = 0; gx && i < 4; i++) CHECK_CLOSE(t_get(gx, i), cos(t_get(x, i)) * t_get(g, i), 1e-12);
    jag_release(gx), jag_release(g), jag_release(g32), jag_release(gbad);
    jag_release(x), jag_release(y), jag_release(plain);
}

/* A node with two outputs where one is unused, and a long chain (the
 * engine and the node release are iterative, not recursive). */
static void test_unused_outputs_and_long_chain(void) {
    TEST_BEGIN();
    int64_t s[2] = {3, 4};
    jag_tensor *x = t_rand(s, 2, JAG_FLOAT64, -1, 1, 6), *vals = NULL, *idx = NULL, *t = NULL, *g = NULL;
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK_OK(jag_max_dim(x, 1, false, &vals, &idx));
    CHECK_OK(jag_sum(vals, NULL, 0, false, &t));
    CHECK_OK(jag_backward(t, NULL, false));
    CHECK_OK(jag_get_grad(x, &g));
    for (int r = 0; g && r < 3; r++)
        for (int c = 0; c < 4; c++)
            CHECK(t_get(g, r * 4 + c) == (c == (int)t_get(idx, r) ? 1.0 : 0.0));
    jag_release(vals), jag_release(idx), jag_release(t), jag_release(g);
    jag_zero_grad(x);
    /* 20000 ops in a chain */
    jag_tensor *y = jag_retain(x);
    for (int i = 0; i < 20000; i++) {
        jag_tensor *z = NULL;
        CHECK_OK(jag_mul_scalar(y, 1.0, &z));
        jag_release(y);
        y = z;
    }
    jag_tensor *s2 = NULL;
    CHECK_OK(jag_sum(y, NULL, 0, false, &s2));
    CHECK_OK(jag_backward(s2, NULL, false));
    CHECK_OK(jag_get_grad(x, &g));
    CHECK(g && t_get(g, 5) == 1.0);
    jag_release(g), jag_release(y), jag_release(s2), jag_release(x);
}

/* ---- custom functions --------------------------------------------------- */

/* y = x * k (k in the values), saves nothing else */
static jag_status scale_forward(jag_autograd_ctx *ctx, jag_tensor *const *in, int n, jag_tensor **outs) {
    (void)n;
    double k = *(double *)jag_autograd_user(ctx);
    jag_autograd_values(ctx)[0] = k;
    CHECK(!jag_is_grad_enabled()); /* forward runs with grad mode off */
    return jag_mul_scalar(in[0], k, &outs[0]);
}

static jag_status scale_backward(jag_autograd_ctx *ctx, jag_tensor *const *g, jag_tensor **gin) {
    CHECK(jag_autograd_needs_input_grad(ctx, 0));
    return jag_mul_scalar(g[0], jag_autograd_values(ctx)[0], &gin[0]);
}

static void test_custom_function(void) {
    TEST_BEGIN();
    double k = 2.5;
    jag_function_def def = {.name = "scale", .n_outputs = 1, .forward = scale_forward, .backward = scale_backward,
                            .user = &k};
    int64_t s[1] = {5};
    jag_tensor *x = t_rand(s, 1, JAG_FLOAT64, -1, 1, 7), *y = NULL, *t = NULL, *g = NULL;
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK_OK(jag_function_apply(&def, &x, 1, &y));
    CHECK(jag_requires_grad(y) && t_get(y, 2) == t_get(x, 2) * 2.5);
    CHECK_OK(jag_sum(y, NULL, 0, false, &t));
    CHECK_OK(jag_backward(t, NULL, false));
    CHECK_OK(jag_get_grad(x, &g));
    for (int i = 0; g && i < 5; i++) CHECK(t_get(g, i) == 2.5);
    jag_function_def bad = def;
    bad.n_outputs = 0;
    jag_tensor *o = NULL;
    CHECK_ERR(jag_function_apply(&bad, &x, 1, &o), JAG_EINVAL, "declares 0 outputs");
    CHECK(o == NULL);
    jag_release(x), jag_release(y), jag_release(t), jag_release(g);
}

/* ---- the walkthrough's steps 4a and 4b ----------------------------------------- */

static jag_op_id fw_op, bw_op;

static jag_status unreached(jag_op_id op, const jag_value *a, int n, jag_tensor **o, void *ctx) {
    (void)op, (void)a, (void)n, (void)o, (void)ctx;
    return JAG_EINTERNAL;
}

/* nested decompositions: the user's own kernels on the packed values */
static jag_status fw_decomp(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                            jag_tensor **outs, void *ctx) {
    (void)cls, (void)op, (void)nargs, (void)ctx;
    jag_tensor *v = NULL, *o = NULL, *r = NULL;
    jag_status st = jag_nested_values(args[0].u.t, &v);
    if (!st) st = jag_nested_offsets(args[0].u.t, &o);
    if (!st) st = jag_sin(v, &r);
    if (!st) st = jag_nested_from_jagged(r, o, NULL, outs);
    jag_release(v), jag_release(o), jag_release(r);
    return st;
}

static jag_status bw_decomp(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                            jag_tensor **outs, void *ctx) {
    (void)cls, (void)op, (void)nargs, (void)ctx;
    jag_tensor *gv = NULL, *xv = NULL, *o = NULL, *c = NULL, *r = NULL;
    jag_status st = jag_nested_values(args[0].u.t, &gv);
    if (!st) st = jag_nested_values(args[1].u.t, &xv);
    if (!st) st = jag_nested_offsets(args[1].u.t, &o);
    if (!st) st = jag_cos(xv, &c);
    if (!st) st = jag_mul(gv, c, &r);
    if (!st) st = jag_nested_from_jagged(r, o, NULL, outs);
    jag_release(gv), jag_release(xv), jag_release(o), jag_release(c), jag_release(r);
    return st;
}

static jag_status custom_forward(jag_autograd_ctx *ctx, jag_tensor *const *in, int n, jag_tensor **outs) {
    (void)n;
    jag_status st = jag_autograd_save(ctx, in, 1);
    jag_value a[1] = {{.kind = JAG_VAL_TENSOR, .u.t = in[0]}};
    return st ? st : jag_op_call(fw_op, a, 1, outs);
}

static jag_status custom_backward(jag_autograd_ctx *ctx, jag_tensor *const *g, jag_tensor **gin) {
    int n = 0;
    jag_tensor *const *saved = jag_autograd_saved(ctx, &n);
    jag_value a[2] = {{.kind = JAG_VAL_TENSOR, .u.t = g[0]}, {.kind = JAG_VAL_TENSOR, .u.t = saved[0]}};
    return jag_op_call(bw_op, a, 2, gin);
}

static const jag_function_def custom_op_fn = {
    .name = "CustomOp", .n_outputs = 1, .forward = custom_forward, .backward = custom_backward};

static jag_status fw_autograd(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)nargs, (void)ctx;
    jag_tensor *in[1] = {(jag_tensor *)args[0].u.t};
    return jag_function_apply(&custom_op_fn, in, 1, outs);
}

static void test_walkthrough_4a_4b(void) {
    TEST_BEGIN();
    const jag_subclass *nested = jag_subclass_find("nested");
    CHECK_OK(jag_op_define("custom_ns::custom_op_fw(Tensor x) -> Tensor", &fw_op));
    CHECK_OK(jag_op_define("custom_ns::custom_op_bw(Tensor grad_out, Tensor saved_x) -> Tensor", &bw_op));
    CHECK_OK(jag_op_impl(fw_op, "CPU", unreached, NULL));
    CHECK_OK(jag_op_impl(bw_op, "CPU", unreached, NULL));
    CHECK_OK(jag_subclass_register_decomp(nested, fw_op, fw_decomp, NULL));
    CHECK_OK(jag_subclass_register_decomp(nested, bw_op, bw_decomp, NULL));
    CHECK_OK(jag_op_impl(fw_op, "Autograd", fw_autograd, NULL));

    double v[18] = {1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 3, 4, 6, 7, 3, 4, 6, 7};
    int64_t vs[2] = {9, 2}, o[4] = {0, 2, 6, 9}, four = 4;
    jag_tensor *values = t_from(v, vs, 2, JAG_FLOAT64), *offsets = NULL, *nt = NULL;
    CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &offsets));
    CHECK_OK(jag_nested_from_jagged(values, offsets, NULL, &nt));
    CHECK_OK(jag_set_requires_grad(nt, true));
    /* 4a: out = custom_op_fw(nt); its values are sin of nt's values */
    jag_tensor *out = NULL, *buf = NULL, *want = NULL, *total = NULL;
    jag_value a[1] = {{.kind = JAG_VAL_TENSOR, .u.t = nt}};
    CHECK_OK(jag_op_call(fw_op, a, 1, &out));
    CHECK(jag_is_nested(out) && jag_requires_grad(out));
    /* 4b: buffer = values(out) (differentiable); buffer.sum().backward() */
    CHECK_OK(jag_nested_values(out, &buf));
    CHECK_OK(jag_sin(values, &want));
    CHECK(t_allclose(buf, want, 1e-12, 1e-12));
    CHECK_OK(jag_sum(buf, NULL, 0, false, &total));
    CHECK_OK(jag_backward(total, NULL, false));
    jag_tensor *g = NULL, *gv = NULL, *go = NULL, *cosv = NULL;
    CHECK_OK(jag_get_grad(nt, &g));
    CHECK(g && jag_is_nested(g));
    if (g) {
        CHECK_OK(jag_nested_values(g, &gv));
        CHECK_OK(jag_nested_offsets(g, &go));
        CHECK_OK(jag_cos(values, &cosv));
        CHECK(t_allclose(gv, cosv, 1e-12, 1e-12)); /* nt.grad.values == cos(nt.values) */
        CHECK(go == offsets);                      /* the same offsets object */
    }
    jag_release(g), jag_release(gv), jag_release(go), jag_release(cosv);
    jag_release(values), jag_release(offsets), jag_release(nt), jag_release(out), jag_release(buf);
    jag_release(want), jag_release(total);
}

/* A nested leaf through built-in ops: mean over values of silu(nt @ w). */
static void test_nested_through_builtin_ops(void) {
    TEST_BEGIN();
    int64_t vs[2] = {7, 3}, o[4] = {0, 2, 2, 7}, four = 4, ws[2] = {3, 2};
    jag_tensor *values = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 11), *offsets = NULL, *nt = NULL;
    jag_tensor *w = t_rand(ws, 2, JAG_FLOAT64, -1, 1, 12);
    CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &offsets));
    CHECK_OK(jag_nested_from_jagged(values, offsets, NULL, &nt));
    CHECK_OK(jag_set_requires_grad(nt, true));
    CHECK_OK(jag_set_requires_grad(w, true));
    jag_tensor *m = NULL, *a = NULL, *b = NULL, *t = NULL, *gn = NULL, *gw = NULL;
    CHECK_OK(jag_mm(nt, w, &m));
    CHECK_OK(jag_silu(m, &a));
    CHECK_OK(jag_nested_values(a, &b));
    CHECK_OK(jag_sum(b, NULL, 0, false, &t));
    CHECK_OK(jag_backward(t, NULL, false));
    CHECK_OK(jag_get_grad(nt, &gn));
    CHECK_OK(jag_get_grad(w, &gw));
    CHECK(gn && jag_is_nested(gn) && gw && !jag_is_nested(gw));
    /* reference by hand on the values: z = V @ W, dL/dz = silu'(z),
     * dV = dz @ W^T, dW = V^T @ dz */
    if (gn && gw) {
        jag_tensor *gnv = NULL, *go = NULL;
        CHECK_OK(jag_nested_values(gn, &gnv));
        CHECK_OK(jag_nested_offsets(gn, &go));
        CHECK(go == offsets);
        for (int r = 0; r < 7; r++) {
            double dz[2];
            for (int c = 0; c < 2; c++) {
                double z = 0;
                for (int k = 0; k < 3; k++) z += t_get(values, r * 3 + k) * t_get(w, k * 2 + c);
                double sg = 1 / (1 + exp(-z));
                dz[c] = sg * (1 + z * (1 - sg));
            }
            for (int k = 0; k < 3; k++)
                CHECK_CLOSE(t_get(gnv, r * 3 + k), dz[0] * t_get(w, k * 2) + dz[1] * t_get(w, k * 2 + 1), 1e-12);
        }
        double dw00 = 0;
        for (int r = 0; r < 7; r++) {
            double z = t_get(values, r * 3) * t_get(w, 0) + t_get(values, r * 3 + 1) * t_get(w, 2) +
                       t_get(values, r * 3 + 2) * t_get(w, 4);
            double sg = 1 / (1 + exp(-z));
            dw00 += t_get(values, r * 3) * sg * (1 + z * (1 - sg));
        }
        CHECK_CLOSE(t_get(gw, 0), dw00, 1e-12);
        jag_release(gnv), jag_release(go);
    }
    jag_release(values), jag_release(offsets), jag_release(nt), jag_release(w), jag_release(m), jag_release(a);
    jag_release(b), jag_release(t), jag_release(gn), jag_release(gw);
}

/* ---- padding both ways is differentiable -------------------------------- */

static jag_status fn_to_padded(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    return jag_nested_to_padded(in[0], -3.0, NULL, 0, out);
}

static jag_status fn_from_padded(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    return jag_nested_from_padded(in[0], ctx, out);
}

static void test_padding_gradients(void) {
    TEST_BEGIN();
    /* jagged with holes and an empty component */
    int64_t vs[2] = {7, 2}, o[4] = {0, 3, 3, 7}, l[3] = {2, 0, 4}, four = 4, three = 3;
    jag_tensor *values = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 21), *offsets = NULL, *lengths = NULL, *nt = NULL;
    CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &offsets));
    CHECK_OK(jag_from_data(l, &three, 1, JAG_INT64, &lengths));
    CHECK_OK(jag_nested_from_jagged(values, offsets, lengths, &nt));
    CHECK_OK(jag_set_requires_grad(nt, true));
    CHECK_OK(jag_gradcheck(fn_to_padded, NULL, &nt, 1, 1e-6, 1e-8, 1e-6));
    /* the gradient keeps the structure: the same offsets object */
    jag_tensor *p = NULL, *t = NULL, *g = NULL, *go = NULL;
    CHECK_OK(jag_nested_to_padded(nt, 0.0, NULL, 0, &p));
    CHECK_OK(jag_sum(p, NULL, 0, false, &t));
    CHECK_OK(jag_backward(t, NULL, false));
    CHECK_OK(jag_get_grad(nt, &g));
    CHECK_OK(jag_nested_offsets(g, &go));
    CHECK(go == offsets);
    jag_release(p), jag_release(t), jag_release(g), jag_release(go);
    /* strided */
    int64_t a[2] = {2, 3}, b[2] = {1, 2};
    jag_tensor *items[2] = {t_rand(a, 2, JAG_FLOAT64, -1, 1, 22), t_rand(b, 2, JAG_FLOAT64, -1, 1, 23)}, *st = NULL;
    CHECK_OK(jag_nested_from_list(items, 2, JAG_STRIDED, &st));
    CHECK_OK(jag_set_requires_grad(st, true));
    CHECK_OK(jag_gradcheck(fn_to_padded, NULL, &st, 1, 1e-6, 1e-8, 1e-6));
    /* from padded */
    int64_t ps[3] = {3, 4, 2}, pl[3] = {4, 1, 0};
    jag_tensor *padded = t_rand(ps, 3, JAG_FLOAT64, -1, 1, 24), *plen = NULL;
    CHECK_OK(jag_from_data(pl, &three, 1, JAG_INT64, &plen));
    CHECK_OK(jag_set_requires_grad(padded, true));
    CHECK_OK(jag_gradcheck(fn_from_padded, plen, &padded, 1, 1e-6, 1e-8, 1e-6));
    jag_release(items[0]), jag_release(items[1]), jag_release(st), jag_release(padded), jag_release(plen);
    jag_release(values), jag_release(offsets), jag_release(lengths), jag_release(nt);
}

/* Post-accumulate-grad hooks (torch's register_post_accumulate_grad_hook):
 * a hook sees the leaf's final gradient of this backward, i.e. the sum of
 * every path into the leaf, and runs once per backward that reaches it. */
typedef struct hook_log {
    int calls;
    double seen[4];   /* the leaf's .grad when the hook ran */
    int order[4];     /* which hook ran, in order */
    int *counter;     /* shared between hooks: call order */
    int tag;
    int64_t self;     /* removes itself when > 0 */
    bool fail;        /* fails (with a public call's error) */
    int freed;
} hook_log;

static jag_status log_hook(jag_tensor *leaf, void *ctx) {
    hook_log *h = ctx;
    jag_tensor *g = NULL;
    if (jag_get_grad(leaf, &g) == JAG_OK && g)
        for (int64_t i = 0; i < jag_numel(g) && i < 4; i++) h->seen[i] = t_get(g, i);
    jag_release(g);
    if (h->counter) h->order[h->calls] = (*h->counter)++ * 10 + h->tag;
    h->calls++;
    if (h->self > 0) jag_remove_post_accumulate_grad_hook(h->self), h->self = 0;
    return h->fail ? jag_remove_post_accumulate_grad_hook(-7) : JAG_OK;
}

static void free_log(void *ctx) { ((hook_log *)ctx)->freed++; }

static void test_post_accumulate_grad_hooks(void) {
    TEST_BEGIN();
    double v[4] = {0.5, -1.0, 2.0, 0.0};
    int64_t four = 4;
    jag_tensor *x = t_from(v, &four, 1, JAG_FLOAT64), *w = t_from(v, &four, 1, JAG_FLOAT64);
    jag_tensor *unused = t_from(v, &four, 1, JAG_FLOAT64), *sq = NULL, *e = NULL, *s = NULL, *t = NULL, *w3 = NULL;
    jag_tensor *tw = NULL, *loss = NULL;
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK_OK(jag_set_requires_grad(w, true));
    CHECK_OK(jag_set_requires_grad(unused, true));
    int counter = 0;
    hook_log hx = {0}, hw1 = {.counter = &counter, .tag = 1}, hw2 = {.counter = &counter, .tag = 2}, hu = {0};
    int64_t idx = 0, idw1 = 0, idw2 = 0, idu = 0;
    CHECK_OK(jag_register_post_accumulate_grad_hook(x, log_hook, &hx, free_log, &idx));
    CHECK_OK(jag_register_post_accumulate_grad_hook(w, log_hook, &hw1, free_log, &idw1));
    CHECK_OK(jag_register_post_accumulate_grad_hook(w, log_hook, &hw2, free_log, &idw2));
    CHECK_OK(jag_register_post_accumulate_grad_hook(unused, log_hook, &hu, free_log, &idu));
    CHECK(idx > 0 && idw1 != idx && idw2 != idw1);
    /* loss = sum(x*x + exp(x)) + sum(3 w): x reaches the loss by two ops */
    CHECK_OK(jag_mul(x, x, &sq));
    CHECK_OK(jag_exp(x, &e));
    CHECK_OK(jag_add(sq, e, 1.0, &s));
    CHECK_OK(jag_sum(s, NULL, 0, false, &t));
    CHECK_OK(jag_mul_scalar(w, 3.0, &w3));
    CHECK_OK(jag_sum(w3, NULL, 0, false, &tw));
    CHECK_OK(jag_add(t, tw, 1.0, &loss));
    CHECK_OK(jag_backward(loss, NULL, true));
    CHECK(hx.calls == 1 && hw1.calls == 1 && hw2.calls == 1);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(hx.seen[i], 2 * v[i] + exp(v[i]), 1e-12);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(hw1.seen[i], 3.0, 0);
    CHECK(hw1.order[0] == 1 && hw2.order[0] == 12); /* registration order */
    CHECK(hu.calls == 0); /* no gradient reached it */
    /* a second backward: the hook sees the accumulated .grad */
    hw1.self = idw1; /* removes itself while running */
    CHECK_OK(jag_backward(loss, NULL, true));
    CHECK(hx.calls == 2 && hw1.calls == 2 && hw2.calls == 2 && hw1.freed == 1);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(hx.seen[i], 2 * (2 * v[i] + exp(v[i])), 1e-12);
    CHECK_ERR(jag_remove_post_accumulate_grad_hook(idw1), JAG_EINVAL, "not a registered hook");
    CHECK_OK(jag_backward(loss, NULL, true));
    CHECK(hw1.calls == 2 && hw2.calls == 3);
    /* a failing hook stops backward with its error */
    hw2.fail = true;
    CHECK_ERR(jag_backward(loss, NULL, false), JAG_EINVAL, "'handle' (-7) is not a registered hook");
    /* bad arguments */
    int64_t h = 0;
    CHECK_ERR(jag_register_post_accumulate_grad_hook(sq, log_hook, &hx, NULL, &h), JAG_EINVAL, "not a leaf");
    CHECK_ERR(jag_register_post_accumulate_grad_hook(x, NULL, &hx, NULL, &h), JAG_EINVAL, "'fn' is NULL");
    jag_tensor *plain = t_from(v, &four, 1, JAG_FLOAT64);
    CHECK_ERR(jag_register_post_accumulate_grad_hook(plain, log_hook, &hx, NULL, &h), JAG_EINVAL, "does not require grad");
    CHECK(h == 0);
    CHECK_OK(jag_remove_post_accumulate_grad_hook(idx));
    CHECK_OK(jag_remove_post_accumulate_grad_hook(idw2));
    CHECK_OK(jag_remove_post_accumulate_grad_hook(idu));
    CHECK(hx.freed == 1 && hw2.freed == 1 && hu.freed == 1);
    jag_release(x), jag_release(w), jag_release(unused), jag_release(sq), jag_release(e), jag_release(s);
    jag_release(t), jag_release(w3), jag_release(tw), jag_release(loss), jag_release(plain);
}

/* A .grad that only its leaf holds accumulates in place: the same block
 * afterwards, holding the sum. A gradient the caller holds (a reference
 * from jag_get_grad) or whose storage the caller's tensor shares (the seed
 * of a backward from the leaf itself: .grad is then an alias of it) is
 * never written: it keeps its values and .grad becomes a new tensor. */
static void test_grad_accumulation_in_place(void) {
    TEST_BEGIN();
    double v[6] = {0.5, -1.0, 2.0, 0.0, 3.5, -2.25}, gv[6] = {1.0, 2.0, -3.0, 0.25, 4.0, -0.5};
    int64_t six = 6;
    jag_tensor *x = t_from(v, &six, 1, JAG_FLOAT32), *seed = t_from(gv, &six, 1, JAG_FLOAT32), *g = NULL, *held = NULL;
    CHECK_OK(jag_set_requires_grad(x, true));
    /* .grad an alias of the seed, then a second backward with it */
    CHECK_OK(jag_backward(x, seed, false));
    CHECK_OK(jag_backward(x, seed, false));
    for (int i = 0; i < 6; i++) CHECK_MSG(t_get(seed, i) == gv[i], "seed element %d written: %g", i, t_get(seed, i));
    CHECK_OK(jag_get_grad(x, &g));
    const void *block = g ? jag_data(g) : NULL;
    for (int i = 0; g && i < 6; i++) CHECK(t_get(g, i) == 2 * gv[i]);
    jag_release(g), g = NULL;
    /* held by no one but x: in place */
    for (int round = 0; round < 2; round++) {
        jag_tensor *y = NULL, *t = NULL;
        if (round == 1) CHECK_OK(jag_get_grad(x, &held)); /* now the caller holds it */
        CHECK_OK(jag_mul_scalar(x, 3.0, &y));
        CHECK_OK(jag_sum(y, NULL, 0, false, &t));
        CHECK_OK(jag_backward(t, NULL, false));
        CHECK_OK(jag_get_grad(x, &g));
        for (int i = 0; g && i < 6; i++) CHECK_MSG(t_get(g, i) == 2 * gv[i] + 3.0 * (round + 1), "round %d element %d: %g", round, i, t_get(g, i));
        if (g) CHECK_MSG((jag_data(g) == block) == (round == 0), "round %d: the sum %s the old block", round, round ? "reused" : "left");
        jag_release(g), g = NULL;
        jag_release(y), jag_release(t);
    }
    for (int i = 0; held && i < 6; i++) CHECK_MSG(t_get(held, i) == 2 * gv[i] + 3.0, "held element %d written: %g", i, t_get(held, i));
    CHECK(held && jag_data(held) == block);
    jag_release(held), jag_release(x), jag_release(seed);
}

TEST_MAIN(test_padding_gradients, test_leaf_flags, test_backward_hand_values, test_backward_errors, test_unused_outputs_and_long_chain,
          test_custom_function, test_walkthrough_4a_4b, test_nested_through_builtin_ops,
          test_post_accumulate_grad_hooks, test_grad_accumulation_in_place)
