/* test_ragged_idx.c — jagged tensors whose ragged dim is not dim 1
 * (transpose(1, 2) of (B, j, H, D) is (B, H, j, D), torch's attention
 * layout), and the view that makes heads, (B, j, D) -> (B, j, H, Dh). Every result is checked component by component against the same
 * op on the dense components (transposed with dense ops), gradients by
 * finite differences, and the errors for ops that cannot run. */
#include "test.h"

static const int64_t LENS[3] = {2, 0, 3};

/* jagged (3, j, h, d) float64 with component lengths LENS */
static jag_tensor *make_jagged(int64_t h, int64_t d, uint64_t seed) {
    int64_t offs[4] = {0, 2, 2, 5}, nb = 4, vs[3] = {5, h, d};
    jag_tensor *v = t_rand(vs, 3, JAG_FLOAT64, -1, 1, seed), *o = NULL, *nt = NULL;
    if (jag_from_data(offs, &nb, 1, JAG_INT64, &o) || jag_nested_from_jagged(v, o, NULL, &nt)) exit(2);
    jag_release(v), jag_release(o);
    return nt;
}

/* new values (5, h, d) around x's offsets (the same raggedness object) */
static jag_tensor *make_like(const jag_tensor *x, int64_t h, int64_t d, uint64_t seed) {
    int64_t vs[3] = {5, h, d};
    jag_tensor *v = t_rand(vs, 3, JAG_FLOAT64, -1, 1, seed), *o = NULL, *nt = NULL;
    if (jag_nested_offsets(x, &o) || jag_nested_from_jagged(v, o, NULL, &nt)) exit(2);
    jag_release(v), jag_release(o);
    return nt;
}

static jag_tensor *transposed(const jag_tensor *x, int d0, int d1) {
    jag_tensor *t = NULL;
    if (jag_transpose(x, d0, d1, &t)) {
        fprintf(stderr, "transpose: %s\n", jag_last_error());
        exit(2);
    }
    return t;
}

/* Component b of nested x equals dense `want` (same shape, same values). */
static void check_component(const jag_tensor *x, int b, const jag_tensor *want, const char *what) {
    jag_tensor *c[8];
    int n = 0;
    CHECK_OK(jag_nested_unbind(x, c, 8, &n));
    if (n <= b) return;
    CHECK_MSG(t_allclose(c[b], want, 1e-12, 1e-12), "%s: component %d", what, b);
    for (int i = 0; i < n; i++) jag_release(c[i]);
}

/* Component b of nested x, transposed (d0, d1) as a dense tensor. */
static jag_tensor *component_t(const jag_tensor *x, int b, int d0, int d1) {
    jag_tensor *c[8], *t = NULL;
    int n = 0;
    if (jag_nested_unbind(x, c, 8, &n) || jag_transpose(c[b], d0, d1, &t)) exit(2);
    for (int i = 0; i < n; i++) jag_release(c[i]);
    return t;
}

static void test_transpose_moves_the_ragged_dim(void) {
    TEST_BEGIN();
    jag_tensor *x = make_jagged(2, 3, 1);
    jag_tensor *t = transposed(x, 1, 2); /* (3, 2, j, 3) */
    CHECK(jag_is_nested(t) && jag_nested_ragged_idx(t) == 2 && jag_nested_ragged_idx(x) == 1);
    CHECK(jag_ndim(t) == 4 && jag_size(t, 0) == 3 && jag_size(t, 1) == 2 && jag_size(t, 2) == -1 && jag_size(t, 3) == 3);
    CHECK(jag_nested_ragged_id(t) == jag_nested_ragged_id(x));
    jag_tensor *vx = NULL, *vt = NULL;
    CHECK_OK(jag_nested_values(x, &vx));
    CHECK_OK(jag_nested_values(t, &vt));
    CHECK(jag_data(vx) == jag_data(vt) && t_same_shape(vx, vt)); /* no data moved */
    for (int b = 0; b < 3; b++) {
        jag_tensor *want = component_t(x, b, 0, 1);
        check_component(t, b, want, "transpose(1, 2)");
        jag_release(want);
    }
    /* back again: ragged dim 1, the same values */
    jag_tensor *back = transposed(t, 2, 1), *vb = NULL;
    CHECK(jag_nested_ragged_idx(back) == 1);
    CHECK_OK(jag_nested_values(back, &vb));
    CHECK(jag_data(vb) == jag_data(vx));
    /* the ragged dim to the end: (3, 3, 2, j), values permuted (a view) */
    jag_tensor *e = transposed(x, 1, 3), *e2 = transposed(t, 1, 3);
    CHECK(jag_nested_ragged_idx(e) == 3 && jag_size(e, 1) == 3 && jag_size(e, 2) == 2 && jag_size(e, 3) == -1);
    CHECK(jag_nested_ragged_idx(e2) == 2 && jag_size(e2, 1) == 3 && jag_size(e2, 2) == -1 && jag_size(e2, 3) == 2);
    for (int b = 0; b < 3; b++) {
        jag_tensor *w1 = component_t(x, b, 0, 2), *tb = component_t(x, b, 0, 1), *w2 = NULL;
        CHECK_OK(jag_transpose(tb, 0, 2, &w2));
        check_component(e, b, w1, "transpose(1, 3)");
        check_component(e2, b, w2, "transpose(1, 2) then (1, 3)");
        jag_release(w1), jag_release(tb), jag_release(w2);
    }
    /* padded: (B, H, max L, D), zeros in the padding */
    jag_tensor *p = NULL;
    CHECK_OK(jag_nested_to_padded(t, 0.0, NULL, 0, &p));
    CHECK(jag_ndim(p) == 4 && jag_size(p, 1) == 2 && jag_size(p, 2) == 3 && jag_size(p, 3) == 3);
    for (int b = 0; b < 3; b++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 3; i++)
                for (int d = 0; d < 3; d++) {
                    double want = 0;
                    if (i < LENS[b]) {
                        jag_tensor *c = component_t(x, b, 0, 1);
                        want = t_get(c, (h * LENS[b] + i) * 3 + d);
                        jag_release(c);
                    }
                    CHECK_CLOSE(t_get(p, ((b * 2 + h) * 3 + i) * 3 + d), want, 0);
                }
    /* one component without unbinding all */
    jag_tensor *s = NULL, *w = component_t(x, 2, 0, 1);
    CHECK_OK(jag_select(t, 0, 2, &s));
    CHECK(t_allclose(s, w, 0, 0));
    CHECK_ERR(jag_transpose(t, 0, 2, &vb), JAG_ENOTIMPL, "batch dim");
    jag_release(x), jag_release(t), jag_release(vx), jag_release(vt), jag_release(back), jag_release(vb);
    jag_release(e), jag_release(e2), jag_release(p), jag_release(s), jag_release(w);
}

/* For each component b: nested result y against f(component b of x, dense
 * transposed the way t is) computed with dense ops. */
typedef jag_status (*dense_fn)(const jag_tensor *c, jag_tensor **out);

static jag_tensor *dense_w; /* an operand for the functions below */
static jag_status f_sin(const jag_tensor *c, jag_tensor **o) { return jag_sin(c, o); }
static jag_status f_mul_w(const jag_tensor *c, jag_tensor **o) { return jag_mul(c, dense_w, o); }
static jag_status f_softmax1(const jag_tensor *c, jag_tensor **o) { return jag_softmax(c, 1, o); }
static jag_status f_softmax2(const jag_tensor *c, jag_tensor **o) { return jag_softmax(c, 2, o); }
static jag_status f_mm(const jag_tensor *c, jag_tensor **o) { return jag_matmul(c, dense_w, o); }
static jag_status f_amax2_keep(const jag_tensor *c, jag_tensor **o) { return jag_amax(c, (int[]){2}, 1, true, o); }
static jag_status f_sum0(const jag_tensor *c, jag_tensor **o) { return jag_sum(c, (int[]){0}, 1, false, o); }
static jag_status f_ln(const jag_tensor *c, jag_tensor **o) { return jag_layer_norm(c, 1, NULL, NULL, 1e-5, o); }

static void check_per_component(const jag_tensor *y, const jag_tensor *x, dense_fn f, int want_ragged, const char *what) {
    CHECK_MSG(jag_nested_ragged_idx(y) == want_ragged, "%s: ragged dim %d, expected %d", what, jag_nested_ragged_idx(y),
              want_ragged);
    for (int b = 0; b < 3; b++) {
        jag_tensor *c = component_t(x, b, 0, 1), *w = NULL;
        CHECK_OK(f(c, &w));
        if (w) check_component(y, b, w, what);
        jag_release(c), jag_release(w);
    }
}

static void test_ops_on_the_moved_dim(void) {
    TEST_BEGIN();
    jag_tensor *x = make_jagged(2, 3, 2), *t = transposed(x, 1, 2), *y = NULL; /* t: (3, 2, j, 3) */
    CHECK_OK(jag_sin(t, &y));
    check_per_component(y, x, f_sin, 2, "sin"), jag_release(y), y = NULL;
    /* dense operands: trailing (D), (H, 1, D) and (B, H, 1, D) */
    int64_t s1[1] = {3}, s3[3] = {2, 1, 3}, s4[4] = {3, 2, 1, 3};
    dense_w = t_rand(s1, 1, JAG_FLOAT64, -1, 1, 3);
    CHECK_OK(jag_mul(t, dense_w, &y));
    check_per_component(y, x, f_mul_w, 2, "mul (D)"), jag_release(y), y = NULL, jag_release(dense_w);
    dense_w = t_rand(s3, 3, JAG_FLOAT64, -1, 1, 4);
    CHECK_OK(jag_mul(t, dense_w, &y));
    check_per_component(y, x, f_mul_w, 2, "mul (H, 1, D)"), jag_release(y), y = NULL;
    jag_release(dense_w);
    jag_tensor *wb = t_rand(s4, 4, JAG_FLOAT64, -1, 1, 5);
    CHECK_OK(jag_mul(t, wb, &y));
    for (int b = 0; b < 3; b++) { /* component b * row b of wb */
        jag_tensor *c = component_t(x, b, 0, 1), *row = NULL, *w = NULL;
        CHECK_OK(jag_select(wb, 0, b, &row));
        CHECK_OK(jag_mul(c, row, &w));
        check_component(y, b, w, "mul (B, H, 1, D)");
        jag_release(c), jag_release(row), jag_release(w);
    }
    jag_release(y), y = NULL, jag_release(wb);
    CHECK_OK(jag_softmax(t, 2, &y)); /* along the ragged dim */
    check_per_component(y, x, f_softmax1, 2, "softmax over the ragged dim"), jag_release(y), y = NULL;
    CHECK_OK(jag_softmax(t, -1, &y));
    check_per_component(y, x, f_softmax2, 2, "softmax over the last dim"), jag_release(y), y = NULL;
    CHECK_OK(jag_layer_norm(t, 1, NULL, NULL, 1e-5, &y));
    check_per_component(y, x, f_ln, 2, "layer_norm"), jag_release(y), y = NULL;
    CHECK_OK(jag_amax(t, (int[]){3}, 1, true, &y)); /* (3, 2, j, 1) */
    check_per_component(y, x, f_amax2_keep, 2, "amax over D, keepdim"), jag_release(y), y = NULL;
    CHECK_OK(jag_sum(t, (int[]){1}, 1, false, &y)); /* over heads: (3, j, 3), ragged dim back at 1 */
    check_per_component(y, x, f_sum0, 1, "sum over heads"), jag_release(y), y = NULL;
    int64_t ws[2] = {3, 4};
    dense_w = t_rand(ws, 2, JAG_FLOAT64, -1, 1, 6);
    CHECK_OK(jag_matmul(t, dense_w, &y)); /* one GEMM on the values */
    check_per_component(y, x, f_mm, 2, "matmul"), jag_release(y), y = NULL;
    jag_release(dense_w);
    /* over the ragged dim: dense (B, H, D), empty component 0 */
    CHECK_OK(jag_sum(t, (int[]){2}, 1, false, &y));
    CHECK(!jag_is_nested(y) && jag_ndim(y) == 3 && jag_size(y, 1) == 2 && jag_size(y, 2) == 3);
    for (int b = 0; b < 3; b++) {
        jag_tensor *c = component_t(x, b, 0, 1), *w = NULL, *row = NULL;
        CHECK_OK(jag_sum(c, (int[]){1}, 1, false, &w));
        CHECK_OK(jag_select(y, 0, b, &row));
        CHECK(t_allclose(row, w, 1e-12, 1e-12));
        jag_release(c), jag_release(w), jag_release(row);
    }
    jag_release(y), y = NULL;
    jag_release(x), jag_release(t);
}

static void test_errors(void) {
    TEST_BEGIN();
    jag_tensor *x = make_jagged(2, 3, 7), *t = transposed(x, 1, 2), *y = NULL;
    long live = jag__live_tensors();
    int64_t s3[3] = {2, 4, 3};
    jag_tensor *along = t_rand(s3, 3, JAG_FLOAT64, -1, 1, 8);
    CHECK_ERR(jag_mul(t, along, &y), JAG_ESHAPE, "varies along the ragged dim (2)");
    CHECK(y == NULL);
    CHECK_ERR(jag_add(t, x, 1.0, &y), JAG_ESHAPE, "ragged in dim 1, the first nested argument in dim 2");
    CHECK_ERR(jag_layer_norm(t, 2, NULL, NULL, 1e-5, &y), JAG_ENOTIMPL, "reaches the ragged dim");
    jag_tensor *e = transposed(x, 1, 3); /* (3, 3, 2, j) */
    int64_t ws[2] = {3, 4};
    jag_tensor *w = t_rand(ws, 2, JAG_FLOAT64, -1, 1, 9);
    CHECK_ERR(jag_matmul(e, w, &y), JAG_ESHAPE, "inner sizes differ");
    CHECK_ERR(jag_unsqueeze(t, 1, &y), JAG_ENOTIMPL, "ragged dim is 2; transpose it back to dim 1 first");
    CHECK(y == NULL);
    jag_release(along), jag_release(e), jag_release(w);
    CHECK(jag__live_tensors() == live);
    jag_release(x), jag_release(t);
}

/* attention on torch's layout (B, H, j, Dh) against the (B, j, H, Dh) one */
static void check_attention(bool causal, int64_t hq, int64_t hk) {
    jag_tensor *q = make_jagged(hq, 4, 10), *k = make_jagged(hk, 4, 11), *v = make_jagged(hk, 4, 12), *o1 = NULL, *o2 = NULL;
    CHECK_OK(jag_scaled_dot_product_attention(q, k, v, causal, 0.0, &o1));
    jag_tensor *qt = transposed(q, 1, 2), *kt = transposed(k, 1, 2), *vt = transposed(v, 1, 2);
    CHECK_OK(jag_scaled_dot_product_attention(qt, kt, vt, causal, 0.0, &o2));
    CHECK(jag_nested_ragged_idx(o2) == 2 && jag_size(o2, 1) == hq && jag_size(o2, 2) == -1);
    for (int b = 0; b < 3; b++) {
        jag_tensor *w = component_t(o1, b, 0, 1);
        check_component(o2, b, w, "attention (B, H, j, Dh)");
        jag_release(w);
    }
    jag_tensor *bad = NULL;
    CHECK_ERR(jag_scaled_dot_product_attention(qt, k, v, causal, 0.0, &bad), JAG_ESHAPE,
              "must all be jagged (B, j, H, Dh) or all jagged (B, H, j, Dh)");
    CHECK(bad == NULL);
    jag_release(q), jag_release(k), jag_release(v), jag_release(o1), jag_release(o2);
    jag_release(qt), jag_release(kt), jag_release(vt);
}

static void test_attention_heads_first(void) {
    TEST_BEGIN();
    check_attention(false, 2, 2);
    check_attention(true, 2, 2);
    check_attention(true, 4, 2); /* grouped-query */
}

/* ---- gradients --------------------------------------------------------- */

static jag_status g_chain(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    jag_tensor *t = NULL, *s = NULL, *m = NULL, *r = NULL, *b = NULL;
    jag_status st = JAG_OK;
    (void)((st = jag_transpose(in[0], 1, 2, &t)) || (st = jag_softmax(t, 2, &s)) || (st = jag_mul(s, in[1], &m)) ||
           (st = jag_sum(m, (int[]){1}, 1, false, &r)) || (st = jag_transpose(m, 1, 3, &b)));
    jag_tensor *vb = NULL, *y = NULL;
    if (!st) st = jag_nested_values(b, &vb);
    if (!st) { /* r (B, j, D) ragged at 1 and b's values: one output */
        jag_tensor *vr = NULL, *fr = NULL, *fb = NULL;
        st = jag_nested_values(r, &vr);
        if (!st) st = jag_reshape(vr, (int64_t[]){-1}, 1, &fr);
        if (!st) st = jag_reshape(vb, (int64_t[]){-1}, 1, &fb);
        if (!st) st = jag_cat((jag_tensor *[]){fr, fb}, 2, 0, &y);
        jag_release(vr), jag_release(fr), jag_release(fb);
    }
    jag_release(t), jag_release(s), jag_release(m), jag_release(r), jag_release(b), jag_release(vb);
    *out = y;
    return st;
}

static jag_status g_linear(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    jag_tensor *t = NULL, *h = NULL, *a = NULL, *m = NULL;
    jag_status st = JAG_OK;
    (void)((st = jag_transpose(in[0], 1, 2, &t)) || (st = jag_matmul(t, in[1], &h)) || (st = jag_tanh(h, &a)) ||
           (st = jag_amax(a, (int[]){3}, 1, false, &m)) || (st = jag_sum(m, (int[]){2}, 1, false, out)));
    jag_release(t), jag_release(h), jag_release(a), jag_release(m);
    return st;
}

static jag_status g_attention(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    jag_tensor *t[3] = {0}, *o = NULL;
    jag_status st = JAG_OK;
    for (int i = 0; i < 3 && !st; i++) st = jag_transpose(in[i], 1, 2, &t[i]);
    if (!st) st = jag_scaled_dot_product_attention(t[0], t[1], t[2], *(bool *)ctx, 0.0, &o);
    if (!st) st = jag_nested_values(o, out);
    for (int i = 0; i < 3; i++) jag_release(t[i]);
    jag_release(o);
    return st;
}

static void test_gradients(void) {
    TEST_BEGIN();
    jag_tensor *x = make_jagged(2, 3, 20);
    int64_t s3[3] = {2, 1, 3}, ws[2] = {3, 2};
    jag_tensor *w3 = t_rand(s3, 3, JAG_FLOAT64, -1, 1, 21), *w = t_rand(ws, 2, JAG_FLOAT64, -1, 1, 22);
    jag_tensor *q = make_jagged(4, 3, 23), *k = make_jagged(2, 3, 24), *v = make_jagged(2, 3, 25);
    jag_tensor *leaves[6] = {x, w3, w, q, k, v};
    for (int i = 0; i < 6; i++) CHECK_OK(jag_set_requires_grad(leaves[i], true));
    CHECK_OK(jag_gradcheck(g_chain, NULL, (jag_tensor *[]){x, w3}, 2, 1e-6, 1e-6, 1e-5));
    CHECK_OK(jag_gradcheck(g_linear, NULL, (jag_tensor *[]){x, w}, 2, 1e-6, 1e-6, 1e-5));
    for (int causal = 0; causal < 2; causal++) {
        bool c = causal;
        CHECK_OK(jag_gradcheck(g_attention, &c, (jag_tensor *[]){q, k, v}, 3, 1e-6, 1e-6, 1e-5));
    }
    /* the gradient of a leaf with ragged dim 2 is ragged at 2 too */
    jag_tensor *t = transposed(x, 1, 2), *lt = NULL, *s = NULL, *vs = NULL, *tot = NULL, *g = NULL;
    CHECK_OK(jag_clone(t, &lt));
    CHECK_OK(jag_detach(lt, &s));
    jag_release(lt), lt = s, s = NULL;
    CHECK_OK(jag_set_requires_grad(lt, true));
    CHECK_OK(jag_mul(lt, lt, &s));
    CHECK_OK(jag_nested_values(s, &vs));
    CHECK_OK(jag_sum(vs, NULL, 0, false, &tot));
    CHECK_OK(jag_backward(tot, NULL, false));
    CHECK_OK(jag_get_grad(lt, &g));
    CHECK(jag_nested_ragged_idx(g) == 2);
    for (int b = 0; b < 3; b++) { /* d(sum x^2) = 2 x */
        jag_tensor *c = component_t(x, b, 0, 1), *w2 = NULL;
        CHECK_OK(jag_mul_scalar(c, 2.0, &w2));
        check_component(g, b, w2, "grad of x*x");
        jag_release(c), jag_release(w2);
    }
    jag_release(x), jag_release(w3), jag_release(w), jag_release(q), jag_release(k), jag_release(v);
    jag_release(t), jag_release(lt), jag_release(s), jag_release(vs), jag_release(tot), jag_release(g);
}


/* ---- traced and compiled -------------------------------------------------- */

/* torch-style attention: q, k, v (B, j, H, Dh) -> heads first, attention,
 * softmax over the last dim, back to (B, j, H, Dh); also the heads-first
 * output itself */
static jag_status attn_program(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *t[3] = {0}, *o = NULL, *s = NULL;
    jag_status st = JAG_OK;
    for (int i = 0; i < 3 && !st; i++) st = jag_transpose(in[i], 1, 2, &t[i]);
    if (!st) st = jag_scaled_dot_product_attention(t[0], t[1], t[2], true, 0.0, &o);
    if (!st) st = jag_softmax(o, 3, &s);
    if (!st) st = jag_transpose(s, 1, 2, &out[0]);
    if (!st) out[1] = o, o = NULL;
    for (int i = 0; i < 3; i++) jag_release(t[i]);
    jag_release(o), jag_release(s);
    return st;
}

static bool same_nested(const jag_tensor *a, const jag_tensor *b) {
    if (jag_nested_ragged_idx(a) != jag_nested_ragged_idx(b) || jag_ndim(a) != jag_ndim(b)) return false;
    jag_tensor *va = NULL, *vb = NULL;
    bool ok = !jag_nested_values(a, &va) && !jag_nested_values(b, &vb) && t_allclose(va, vb, 1e-12, 1e-12);
    jag_release(va), jag_release(vb);
    return ok;
}

static void test_traced(void) {
    TEST_BEGIN();
    jag_tensor *q = make_jagged(2, 4, 30), *k = make_like(q, 2, 4, 31), *v = make_like(q, 2, 4, 32);
    jag_tensor *in[3] = {q, k, v};
    jag_trace *t = NULL, *d = NULL;
    jag_program *p = NULL;
    CHECK_OK(jag_trace_function(attn_program, NULL, in, 3, (const char *[]){"q", "k", "v"}, 2, &t));
    CHECK_OK(jag_trace_desugar(t, &d));
    static char text[8192];
    jag_trace_format(d, text, sizeof text);
    CHECK_MSG(strstr(text, "varlen_attention(") && !strstr(text, "transpose("), "desugared:\n%s", text);
    CHECK_OK(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    jag_tensor *got[2] = {0}, *want[2] = {0};
    CHECK_OK(jag_program_run(p, in, 3, got, 2));
    CHECK_OK(attn_program(NULL, in, 3, want, 2));
    CHECK(jag_nested_ragged_idx(got[1]) == 2 && jag_nested_ragged_idx(got[0]) == 1);
    CHECK(same_nested(got[0], want[0]) && same_nested(got[1], want[1]));
    for (int i = 0; i < 2; i++) jag_release(got[i]), jag_release(want[i]);
    /* an input ragged in another dim is refused before anything runs */
    jag_tensor *qt = transposed(q, 1, 2), *bad[3] = {qt, k, v}, *none[2] = {0};
    CHECK_ERR(jag_program_run(p, bad, 3, none, 2), JAG_EINVAL, "input 0 ('q') is ragged in dim 2, expected dim 1");
    CHECK(none[0] == NULL && none[1] == NULL);
    jag_release(qt);
    jag_program_free(p), jag_trace_free(t), jag_trace_free(d);
    jag_release(q), jag_release(k), jag_release(v);
}

/* ---- heads: view(B, -1, H, Dh) of a jagged (B, j, D) ---------------------- */

static jag_tensor *make_jagged2(int64_t d, uint64_t seed) { /* (3, j, d) */
    int64_t offs[4] = {0, 2, 2, 5}, nb = 4, vs[2] = {5, d};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT64, -1, 1, seed), *o = NULL, *nt = NULL;
    if (jag_from_data(offs, &nb, 1, JAG_INT64, &o) || jag_nested_from_jagged(v, o, NULL, &nt)) exit(2);
    jag_release(v), jag_release(o);
    return nt;
}

static jag_status g_heads(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    jag_tensor *h = NULL, *t = NULL, *s = NULL;
    jag_status st = JAG_OK;
    (void)((st = jag_reshape(in[0], (int64_t[]){3, -1, 2, 3}, 4, &h)) || (st = jag_transpose(h, 1, 2, &t)) ||
           (st = jag_softmax(t, 2, &s)) || (st = jag_nested_values(s, out)));
    jag_release(h), jag_release(t), jag_release(s);
    return st;
}

static void test_view_heads(void) {
    TEST_BEGIN();
    jag_tensor *x = make_jagged2(6, 40), *h = NULL, *bad = NULL;
    CHECK_OK(jag_reshape(x, (int64_t[]){3, -1, 2, 3}, 4, &h));
    CHECK(jag_is_nested(h) && jag_nested_ragged_idx(h) == 1 && jag_size(h, 2) == 2 && jag_size(h, 3) == 3);
    CHECK(jag_nested_ragged_id(h) == jag_nested_ragged_id(x));
    jag_tensor *xc[3], *hc[3];
    int n = 0;
    CHECK_OK(jag_nested_unbind(x, xc, 3, &n));
    CHECK_OK(jag_nested_unbind(h, hc, 3, &n));
    for (int b = 0; b < 3; b++) {
        jag_tensor *w = NULL;
        CHECK_OK(jag_reshape(xc[b], (int64_t[]){LENS[b], 2, 3}, 3, &w));
        CHECK(t_allclose(hc[b], w, 0, 0));
        jag_release(w), jag_release(xc[b]), jag_release(hc[b]);
    }
    CHECK_ERR(jag_reshape(x, (int64_t[]){3, 5, 6}, 3, &bad), JAG_ENOTIMPL, "sizes (B, -1, ...) with -1 for the ragged dim");
    CHECK_ERR(jag_reshape(x, (int64_t[]){3, -1, 4, 2}, 4, &bad), JAG_ESHAPE, "hold 6 elements per row, sizes [4, 2] ask for 8");
    CHECK_ERR(jag_reshape(x, (int64_t[]){3, -1, -1, 3}, 4, &bad), JAG_ESHAPE, "only the ragged dim (1) may be -1");
    CHECK_ERR(jag_reshape(x, (int64_t[]){4, -1, 2, 3}, 4, &bad), JAG_ENOTIMPL, "keeps the batch and ragged dims");
    CHECK(bad == NULL);
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK_OK(jag_gradcheck(g_heads, NULL, (jag_tensor *[]){x}, 1, 1e-6, 1e-6, 1e-5));
    jag_release(x), jag_release(h);
}

/* Products (and a join) of jagged tensors with a moved ragged dim: the
 * message names the op called (never a part of its decomposition), the
 * argument ragged elsewhere (not the first nested one), where its ragged dim
 * is and what is expected; nothing is made or leaked. */
static void test_moved_dim_errors(void) {
    TEST_BEGIN();
    /* x, y (3, j, 4) of the same raggedness, their transposes (3, 4, j) */
    int64_t offs[4] = {0, 2, 2, 5}, nb = 4, vs[2] = {5, 4};
    jag_tensor *vx = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 20), *vy = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 21), *off = NULL;
    jag_tensor *x = NULL, *y = NULL;
    CHECK_OK(jag_from_data(offs, &nb, 1, JAG_INT64, &off));
    CHECK_OK(jag_nested_from_jagged(vx, off, NULL, &x));
    CHECK_OK(jag_nested_from_jagged(vy, off, NULL, &y));
    if (!x || !y) exit(2);
    jag_tensor *xt = transposed(x, 1, 2), *yt = transposed(y, 1, 2), *out = NULL;
    int64_t d3[3] = {3, 4, 5}, d2[2] = {4, 6};
    jag_tensor *dense3 = t_rand(d3, 3, JAG_FLOAT64, -1, 1, 22), *dense2 = t_rand(d2, 2, JAG_FLOAT64, -1, 1, 23);
    long live = jag__live_tensors();
    /* x @ y^T would be ragged in two dims: argument 1 is the one ragged elsewhere */
    CHECK_ERR(jag_bmm(x, yt, &out), JAG_ESHAPE,
              "jag_bmm: argument 1 is a jagged nested tensor ragged in dim 2, argument 0 one ragged in dim 1; a product of "
              "jagged tensors ragged in different dims is not supported (expected a jagged first argument not ragged in "
              "its last dim, and a dense 1-d or 2-d second one; for a product per component, convert both to the strided "
              "layout with jag_nested_to_layout)");
    CHECK_ERR(jag_matmul(x, yt, &out), JAG_ESHAPE,
              "jag_matmul: argument 1 is a jagged nested tensor ragged in dim 2, argument 0 one ragged in dim 1; a "
              "product of jagged tensors ragged in different dims is not supported");
    /* x^T @ y sums over the ragged dim: refused by matmul itself, not by the
     * expand its decomposition would call */
    CHECK_ERR(jag_matmul(xt, y, &out), JAG_ESHAPE,
              "jag_matmul: argument 1 is a jagged nested tensor ragged in dim 1, argument 0 one ragged in dim 2; a "
              "product of jagged tensors ragged in different dims is not supported");
    CHECK(strstr(jag_last_error(), "expand") == NULL);
    CHECK_ERR(jag_bmm(xt, y, &out), JAG_ESHAPE, "jag_bmm: argument 1 is a jagged nested tensor ragged in dim 1, argument 0");
    /* one jagged argument whose ragged dim is not 1 */
    CHECK_ERR(jag_bmm(xt, dense3, &out), JAG_ENOTIMPL,
              "jag_bmm: argument 0 is a jagged nested tensor whose ragged dim is 2; transpose it back to dim 1 first "
              "(expected jagged nested tensors ragged in dim 1 here); for a product per component, use the strided layout");
    /* matmul decomposes what the nested class does not take; a part that is
     * not supported either keeps the class's message, which names matmul */
    jag_tensor *dense354 = t_rand((int64_t[]){3, 5, 4}, 3, JAG_FLOAT64, -1, 1, 24);
    CHECK_ERR(jag_matmul(dense354, xt, &out), JAG_ENOTIMPL,
              "jag_matmul: argument 1 is a jagged nested tensor ragged in its last dim (2)");
    CHECK(strstr(jag_last_error(), "expand") == NULL);
    jag_release(dense354);
    CHECK_ERR(jag_mm(xt, dense2, &out), JAG_ENOTIMPL,
              "jag_mm: argument 0 is a jagged nested tensor ragged in its last dim (2); expected its ragged dim before the "
              "last dim");
    /* in a tensor list: the tensor ragged elsewhere, not the first one */
    jag_tensor *list[2] = {x, xt};
    CHECK_ERR(jag_cat(list, 2, 0, &out), JAG_ENOTIMPL,
              "jag_cat: argument 0 (a tensor list): tensor 1 is a jagged nested tensor whose ragged dim is 2; transpose it "
              "back to dim 1 first");
    CHECK(out == NULL && jag__live_tensors() == live);
    /* what the message suggests runs: the strided layout, component by component */
    jag_tensor *xs = NULL, *ys = NULL, *yst = NULL;
    CHECK_OK(jag_nested_to_layout(x, JAG_STRIDED, &xs));
    CHECK_OK(jag_nested_to_layout(y, JAG_STRIDED, &ys));
    if (ys) yst = transposed(ys, 1, 2);
    CHECK_OK(jag_bmm(xs, yst, &out));
    for (int b = 0; out && b < 3; b++) {
        jag_tensor *cx[4], *cy[4], *ycT = NULL, *want = NULL;
        int n = 0, m = 0;
        CHECK_OK(jag_nested_unbind(x, cx, 4, &n));
        CHECK_OK(jag_nested_unbind(y, cy, 4, &m));
        CHECK_OK(jag_transpose(cy[b], 0, 1, &ycT));
        CHECK_OK(jag_mm(cx[b], ycT, &want));
        check_component(out, b, want, "bmm of strided x, y^T");
        jag_release(ycT), jag_release(want);
        for (int i = 0; i < n; i++) jag_release(cx[i]);
        for (int i = 0; i < m; i++) jag_release(cy[i]);
    }
    jag_release(out), jag_release(xs), jag_release(ys), jag_release(yst);
    jag_release(dense3), jag_release(dense2), jag_release(xt), jag_release(yt);
    jag_release(x), jag_release(y), jag_release(vx), jag_release(vy), jag_release(off);
}

TEST_MAIN(test_transpose_moves_the_ragged_dim, test_ops_on_the_moved_dim, test_errors, test_attention_heads_first,
          test_gradients, test_traced, test_view_heads, test_moved_dim_errors)
