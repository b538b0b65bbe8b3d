/* test_subclass.c — the subclass protocol from the outside: a subclass
 * defined here with the public API only, the scaled subclass, custom ops
 * (schemas, kernels per key, errors) and the custom-op step (4a) of
 * examples/nested_subclass_walkthrough.py: a
 * custom op that reaches a nested decomposition automatically. */
#include "test.h"

/* ---- a tiny subclass defined by test code alone ------------------------- */

/* "counted" wraps one plain tensor and counts the ops that reach it. Every
 * op unwraps counted arguments, runs on the plain tensors and wraps each
 * output again. */
typedef struct {
    int ops_seen;
    int decomps_seen;
} counter;

static counter the_counter;
static const jag_subclass *counted_class;

static void counted_free(void *state) { jag_release(state); }

static jag_status counted_flatten(const jag_tensor *t, jag_tensor **inner, int *n, jag_subclass_meta *meta) {
    inner[0] = jag_retain(jag_subclass_state(t));
    *n = 1;
    meta->n_ints = 0;
    return JAG_OK;
}

static jag_status counted_wrap(const jag_subclass *cls, jag_tensor *inner, jag_tensor **out) {
    return jag_subclass_wrap(cls, jag_retain(inner), jag_tensor_dtype(inner), jag_sizes(inner), jag_ndim(inner), out);
}

static jag_status counted_unflatten(const jag_subclass *cls, jag_tensor *const *inner, int n,
                                    const jag_subclass_meta *meta, jag_tensor **out) {
    (void)meta;
    if (n != 1) return JAG_EINVAL;
    return counted_wrap(cls, inner[0], out);
}

static jag_status counted_dispatch(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                   jag_tensor **outs, void *ctx) {
    counter *c = ctx;
    c->ops_seen++;
    jag_value a[16];
    for (int i = 0; i < nargs; i++) {
        a[i] = args[i];
        if (args[i].kind == JAG_VAL_TENSOR && jag_tensor_subclass(args[i].u.t) == cls)
            a[i].u.t = jag_subclass_state(args[i].u.t);
    }
    jag_tensor *plain[4] = {0};
    jag_status st = jag_op_call(op, a, nargs, plain);
    if (st) return st;
    int n = jag_op_num_outputs(op);
    for (int k = 0; k < n && !st; k++) st = counted_wrap(cls, plain[k], &outs[k]);
    for (int k = 0; k < n; k++) jag_release(plain[k]);
    return st;
}

/* A decomposition for neg: returns the inner tensor times -2 (so that the
 * test can tell the decomposition ran, not the generic handler). */
static jag_status counted_neg_decomp(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                     jag_tensor **outs, void *ctx) {
    (void)op, (void)nargs;
    counter *c = ctx;
    c->decomps_seen++;
    jag_tensor *r = NULL;
    jag_status st = jag_mul_scalar(jag_subclass_state(args[0].u.t), -2.0, &r);
    if (st) return st;
    st = counted_wrap(cls, r, outs);
    jag_release(r);
    return st;
}

static void register_counted(void) {
    if (counted_class) return;
    jag_subclass_def def = {
        .name = "counted",
        .flatten = counted_flatten,
        .unflatten = counted_unflatten,
        .dispatch = counted_dispatch,
        .dispatch_ctx = &the_counter,
        .destroy_state = counted_free,
    };
    if (jag_subclass_register(&def, &counted_class)) {
        fprintf(stderr, "register: %s\n", jag_last_error());
        exit(2);
    }
}

static void test_user_subclass(void) {
    TEST_BEGIN();
    register_counted();
    CHECK(jag_subclass_find("counted") == counted_class);
    int64_t s[2] = {3, 4};
    jag_tensor *x = t_rand(s, 2, JAG_FLOAT32, -1, 1, 1), *cx = NULL, *y = NULL, *t = NULL, *inner[2];
    CHECK_OK(counted_wrap(counted_class, x, &cx));
    CHECK(jag_tensor_subclass(cx) == counted_class && jag_size(cx, 1) == 4);
    the_counter = (counter){0};
    CHECK_OK(jag_exp(cx, &y)); /* routed to the class */
    CHECK_OK(jag_transpose(y, 0, 1, &t));
    CHECK(the_counter.ops_seen == 2 && jag_tensor_subclass(t) == counted_class && jag_size(t, 0) == 4);
    jag_tensor *ex = NULL, *ext = NULL;
    CHECK_OK(jag_exp(x, &ex));
    CHECK_OK(jag_transpose(ex, 0, 1, &ext));
    CHECK(t_allclose(jag_subclass_state(t), ext, 0, 0));
    /* flatten / unflatten round trip */
    int n = 0;
    jag_subclass_meta meta;
    jag_tensor *back = NULL;
    CHECK_OK(jag_subclass_flatten(t, inner, &n, &meta));
    CHECK(n == 1 && inner[0] == jag_subclass_state(t));
    CHECK_OK(jag_subclass_unflatten(counted_class, inner, n, &meta, &back));
    CHECK(jag_tensor_subclass(back) == counted_class);
    /* a registered decomposition runs before the class's handler */
    jag_op_id neg;
    CHECK_OK(jag_op_find("neg", &neg));
    CHECK_OK(jag_subclass_register_decomp(counted_class, neg, counted_neg_decomp, &the_counter));
    jag_tensor *ng = NULL;
    CHECK_OK(jag_neg(cx, &ng));
    CHECK(the_counter.decomps_seen == 1 && t_get(jag_subclass_state(ng), 0) == -2 * t_get(x, 0));
    /* mixing with a nested tensor: a clear error from whichever class runs */
    jag_tensor *items[1] = {x}, *nt = NULL, *o = NULL;
    CHECK_OK(jag_nested_from_list(items, 1, JAG_JAGGED, &nt));
    CHECK_ERR(jag_add(nt, cx, 1.0, &o), JAG_ENOTIMPL, "mixes a nested tensor with a counted tensor");
    CHECK(o == NULL);
    /* registering the same name twice */
    jag_subclass_def dup = {.name = "counted", .flatten = counted_flatten, .unflatten = counted_unflatten,
                            .dispatch = counted_dispatch};
    const jag_subclass *c2 = NULL;
    CHECK_ERR(jag_subclass_register(&dup, &c2), JAG_EINVAL, "already registered");
    dup.name = "nested"; /* the built-in classes own their names */
    CHECK_ERR(jag_subclass_register(&dup, &c2), JAG_EINVAL, "a class named 'nested' is already registered");
    dup.name = "incomplete";
    dup.flatten = NULL;
    CHECK_ERR(jag_subclass_register(&dup, &c2), JAG_EINVAL, "needs flatten, unflatten and dispatch");
    CHECK(c2 == NULL);
    jag_release(inner[0]);
    jag_release(x), jag_release(cx), jag_release(y), jag_release(t), jag_release(ex), jag_release(ext);
    jag_release(back), jag_release(ng), jag_release(nt);
}

/* ---- scaled ------------------------------------------------------------- */

static void test_scaled(void) {
    TEST_BEGIN();
    int64_t s[2] = {3, 4}, ws[2] = {4, 2};
    jag_tensor *data = t_rand(s, 2, JAG_FLOAT64, -1, 1, 7), *w = t_rand(ws, 2, JAG_FLOAT64, -1, 1, 8);
    jag_tensor *scale = NULL, *x = NULL, *plain = NULL;
    CHECK_OK(jag_full(NULL, 0, 2.5, JAG_FLOAT64, &scale));
    CHECK_OK(jag_scaled_new(data, scale, &x));
    CHECK(jag_is_scaled(x) && jag_size(x, 0) == 3);
    CHECK_OK(jag_scaled_materialize(x, &plain));
    /* scalar multiply, neg, transpose, mm, sum stay scaled and only touch the scale */
    jag_tensor *m = NULL, *n = NULL, *t = NULL, *p = NULL, *sm = NULL, *d = NULL, *sc = NULL;
    CHECK_OK(jag_mul_scalar(x, 4.0, &m));
    CHECK(jag_is_scaled(m));
    CHECK_OK(jag_scaled_data(m, &d));
    CHECK_OK(jag_scaled_scale(m, &sc));
    CHECK(d == data); /* the data was not touched: the same tensor */
    double v;
    CHECK_OK(jag_item(sc, &v));
    CHECK(v == 10.0);
    CHECK_OK(jag_neg(m, &n));
    CHECK_OK(jag_transpose(n, 0, 1, &t));
    CHECK_OK(jag_mm(x, w, &p));
    int all0[1] = {0};
    CHECK_OK(jag_sum(x, all0, 1, false, &sm));
    CHECK(jag_is_scaled(n) && jag_is_scaled(t) && jag_is_scaled(p) && jag_is_scaled(sm));
    /* every result equals the same op on the materialised tensor */
    jag_tensor *want = NULL, *got = NULL, *tmp = NULL;
    CHECK_OK(jag_mul_scalar(plain, -4.0, &tmp));
    CHECK_OK(jag_transpose(tmp, 0, 1, &want));
    CHECK_OK(jag_scaled_materialize(t, &got));
    CHECK(t_allclose(got, want, 1e-12, 1e-12));
    jag_release(want), jag_release(got), jag_release(tmp);
    CHECK_OK(jag_mm(plain, w, &want));
    CHECK_OK(jag_scaled_materialize(p, &got));
    CHECK(t_allclose(got, want, 1e-12, 1e-12));
    jag_release(want), jag_release(got);
    CHECK_OK(jag_sum(plain, all0, 1, false, &want));
    CHECK_OK(jag_scaled_materialize(sm, &got));
    CHECK(t_allclose(got, want, 1e-12, 1e-12));
    jag_release(want), jag_release(got);
    /* other ops materialise: a plain result */
    jag_tensor *e = NULL, *ew = NULL;
    CHECK_OK(jag_exp(x, &e));
    CHECK_OK(jag_exp(plain, &ew));
    CHECK(!jag_is_scaled(e) && t_allclose(e, ew, 1e-12, 0));
    /* errors */
    jag_tensor *o = NULL, *i32 = NULL, *vec = NULL;
    CHECK_OK(jag_zeros(s, 2, JAG_INT32, &i32));
    CHECK_ERR(jag_scaled_new(i32, scale, &o), JAG_EDTYPE, "expected float32 or float64");
    CHECK_ERR(jag_scaled_new(data, data, &o), JAG_ESHAPE, "expected a 0-d tensor");
    CHECK_OK(jag_zeros((int64_t[]){1}, 0, JAG_FLOAT32, &vec));
    CHECK_ERR(jag_scaled_new(data, vec, &o), JAG_EDTYPE, "'scale' has dtype float32, expected float64");
    CHECK_ERR(jag_scaled_data(data, &o), JAG_EINVAL, "not a scaled tensor");
    CHECK(o == NULL);
    jag_release(i32), jag_release(vec);
    jag_release(data), jag_release(w), jag_release(scale), jag_release(x), jag_release(plain);
    jag_release(m), jag_release(n), jag_release(t), jag_release(p), jag_release(sm), jag_release(d), jag_release(sc);
    jag_release(e), jag_release(ew);
}

/* ---- custom ops --------------------------------------------------------- */

/* CPU kernel of custom_ns::scale_add(Tensor x, float alpha) -> Tensor:
 * x * alpha + 1, a user kernel written with a plain loop. */
static jag_status scale_add_cpu(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)nargs;
    int *calls = ctx;
    (*calls)++;
    const jag_tensor *x = args[0].u.t;
    if (jag_tensor_dtype(x) != JAG_FLOAT32) return JAG_EDTYPE;
    jag_tensor *c = NULL, *y = NULL;
    jag_status st = jag_contiguous(x, &c);
    if (!st) st = jag_empty(jag_sizes(x), jag_ndim(x), JAG_FLOAT32, &y);
    if (!st) {
        const float *in = jag_data(c);
        float *o = jag_data(y);
        for (int64_t i = 0; i < jag_numel(x); i++) o[i] = in[i] * (float)args[1].u.d + 1.0f;
        outs[0] = y;
    }
    jag_release(c);
    return st;
}

static jag_status scale_add_meta(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)nargs, (void)ctx;
    return jag_empty_like(args[0].u.t, &outs[0]);
}

static void test_custom_op_dense(void) {
    TEST_BEGIN();
    jag_op_id op;
    int calls = 0;
    CHECK_OK(jag_op_define("custom_ns::scale_add(Tensor x, float alpha) -> Tensor", &op));
    CHECK(strcmp(jag_op_name(op), "custom_ns::scale_add") == 0);
    CHECK(jag_op_num_inputs(op) == 2 && jag_op_num_outputs(op) == 1 && (jag_op_tags(op) & JAG_TAG_CUSTOM));
    CHECK(strcmp(jag_op_schema(op), "custom_ns::scale_add(Tensor x, float alpha) -> Tensor") == 0);
    jag_op_id found;
    CHECK_OK(jag_op_find("custom_ns::scale_add", &found));
    CHECK(found == op);
    int64_t s[2] = {2, 3};
    jag_tensor *x = t_rand(s, 2, JAG_FLOAT32, -1, 1, 3), *y = NULL, *m = NULL, *my = NULL;
    jag_value args[2] = {{.kind = JAG_VAL_TENSOR, .u.t = x}, {.kind = JAG_VAL_DOUBLE, .u.d = 3.0}};
    /* no kernel yet */
    CHECK_ERR(jag_op_call(op, args, 2, &y), JAG_ENOTIMPL, "custom_ns::scale_add: no CPU kernel is registered");
    CHECK_OK(jag_op_impl(op, "CPU", scale_add_cpu, &calls));
    CHECK_OK(jag_op_call(op, args, 2, &y));
    CHECK(calls == 1);
    for (int64_t i = 0; i < 6; i++) CHECK_CLOSE(t_get(y, i), (float)(t_get(x, i) * 3.0 + 1.0), 1e-6);
    /* Meta key: shape inference without data, no CPU call */
    CHECK_OK(jag_meta_tensor(s, 2, JAG_FLOAT32, &m));
    args[0].u.t = m;
    CHECK_ERR(jag_op_call(op, args, 2, &my), JAG_ENOTIMPL, "no Meta kernel");
    CHECK_OK(jag_op_impl(op, "Meta", scale_add_meta, NULL));
    CHECK_OK(jag_op_call(op, args, 2, &my));
    CHECK(jag_is_meta(my) && jag_size(my, 1) == 3 && calls == 1);
    /* schema mismatch, double registration, bad keys */
    jag_tensor *o = NULL;
    jag_value wrong[2] = {{.kind = JAG_VAL_TENSOR, .u.t = x}, {.kind = JAG_VAL_BOOL, .u.b = true}};
    CHECK_ERR(jag_op_call(op, wrong, 2, &o), JAG_EINVAL, "argument 'alpha' is a bool, but the schema");
    CHECK_ERR(jag_op_call(op, wrong, 1, &o), JAG_EINVAL, "takes 2 arguments, got 1");
    CHECK_ERR(jag_op_impl(op, "CPU", scale_add_cpu, &calls), JAG_EINVAL, "already has a CPU kernel");
    CHECK_ERR(jag_op_impl(op, "CUDA", scale_add_cpu, &calls), JAG_EINVAL, "expected \"CPU\", \"Meta\" or \"Autograd\"");
    jag_op_id sin_op, dup;
    CHECK_OK(jag_op_find("sin", &sin_op));
    CHECK_ERR(jag_op_impl(sin_op, "CPU", scale_add_cpu, &calls), JAG_EINVAL, "built-in op");
    CHECK_ERR(jag_op_define("custom_ns::scale_add(Tensor x) -> Tensor", &dup), JAG_EINVAL, "already defined");
    CHECK_ERR(jag_op_find("custom_ns::nope", &dup), JAG_EINVAL, "no op is named");
    CHECK(o == NULL);
    jag_release(x), jag_release(y), jag_release(m), jag_release(my);
}

static void test_schema_errors(void) {
    TEST_BEGIN();
    jag_op_id op;
    struct { const char *schema, *msg; } bad[] = {
        {"noname(Tensor x) -> Tensor", "expected '::'"},
        {"ns::f(Tensor x -> Tensor", "expected ',' or ')'"},
        {"ns::f(Matrix x) -> Tensor", "expected an argument type"},
        {"ns::f(Tensor x, Tensor x) -> Tensor", "duplicate argument name"},
        {"ns::f(Tensor x)", "expected '->'"},
        {"ns::f(Tensor x) -> int", "expected 'Tensor' or '(Tensor, ...)'"},
        {"ns::f(float a=1.0) -> Tensor", "default values are not supported"},
        {"ns::f(Tensor x) -> Tensor junk", "unexpected text"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_ERR(jag_op_define(bad[i].schema, &op), JAG_EINVAL, bad[i].msg);
    CHECK_OK(jag_op_define("ns::multi(Tensor? w, int n, int[] dims, Tensor[] xs, bool b) -> (Tensor, Tensor)", &op));
    CHECK(jag_op_num_outputs(op) == 2 && jag_op_num_inputs(op) == 5);
}

/* ---- the walkthrough's step 4a: a custom op with a nested decomposition -------- */

static jag_status fw_cpu_unreached(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)args, (void)nargs, (void)outs;
    (*(int *)ctx)++;
    return JAG_EINTERNAL;
}

/* The user unwraps, runs their own kernel on the packed values (here a plain
 * loop, as the walkthrough's numpy kernel) and wraps around the same offsets. */
static jag_status fw_nested_decomp(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                   jag_tensor **outs, void *ctx) {
    (void)cls, (void)op, (void)nargs, (void)ctx;
    jag_tensor *values = NULL, *offsets = NULL, *c = NULL, *res = NULL;
    jag_status st = jag_nested_values(args[0].u.t, &values);
    if (!st) st = jag_nested_offsets(args[0].u.t, &offsets);
    if (!st) st = jag_contiguous(values, &c);
    if (!st) st = jag_empty(jag_sizes(c), jag_ndim(c), JAG_FLOAT32, &res);
    if (!st) {
        const float *in = jag_data(c);
        float *o = jag_data(res);
        for (int64_t i = 0; i < jag_numel(c); i++) o[i] = sinf(in[i]);
        st = jag_nested_from_jagged(res, offsets, NULL, outs);
    }
    jag_release(values), jag_release(offsets), jag_release(c), jag_release(res);
    return st;
}

static void test_walkthrough_custom_op_nested(void) {
    TEST_BEGIN();
    jag_op_id fw;
    int unreached = 0;
    CHECK_OK(jag_op_define("custom_ns::custom_op_fw(Tensor x) -> Tensor", &fw));
    CHECK_OK(jag_op_impl(fw, "CPU", fw_cpu_unreached, &unreached));
    const jag_subclass *nested = jag_subclass_find("nested");
    CHECK(nested != NULL);
    CHECK_OK(jag_subclass_register_decomp(nested, fw, fw_nested_decomp, NULL));
    /* the walkthrough's jagged tensor: values (9, 2), offsets [0, 2, 6, 9] */
    double v[18] = {1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 3, 4, 6, 7, 3, 4, 6, 7};
    int64_t vs[2] = {9, 2}, o[4] = {0, 2, 6, 9}, four = 4;
    jag_tensor *values = t_from(v, vs, 2, JAG_FLOAT32), *offsets = NULL, *nt = NULL, *out = NULL;
    CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &offsets));
    CHECK_OK(jag_nested_from_jagged(values, offsets, NULL, &nt));
    jag_value args[1] = {{.kind = JAG_VAL_TENSOR, .u.t = nt}};
    CHECK_OK(jag_op_call(fw, args, 1, &out));
    CHECK(unreached == 0 && jag_is_nested(out));
    jag_tensor *ov = NULL, *oo = NULL, *sv = NULL;
    CHECK_OK(jag_nested_values(out, &ov));
    CHECK_OK(jag_nested_offsets(out, &oo));
    CHECK_OK(jag_sin(values, &sv));
    CHECK(t_allclose(ov, sv, 1e-6, 1e-6) && oo == offsets);
    /* the result composes with built-in ops: same offsets object, so it
     * matches the input's raggedness */
    jag_tensor *sum = NULL;
    CHECK_OK(jag_add(out, nt, 1.0, &sum));
    jag_release(values), jag_release(offsets), jag_release(nt), jag_release(out), jag_release(ov), jag_release(oo);
    jag_release(sv), jag_release(sum);
}

TEST_MAIN(test_user_subclass, test_scaled, test_custom_op_dense, test_schema_errors, test_walkthrough_custom_op_nested)
