/* test_inplace.c — in-place ops (dense and nested), version counters and
 * what autograd does with them, read-only nested metadata, released
 * handles, and the gradients custom functions return. References are
 * computed element by element here. */
#include "test.h"

#include <stdint.h>

static jag_tensor *vec(const double *v, int64_t n, jag_dtype dt) { return t_from(v, &n, 1, dt); }

/* Every in-place op against the same formula written out per element, on
 * a contiguous self (the kernel-into-self path) and on a transposed one
 * (computed aside, then copied in), float32 and float64. */
static void test_inplace_values(void) {
    TEST_BEGIN();
    const double a[6] = {1.5, -2, 3.25, 0, -0.5, 8}, b[3] = {2, -4, 0.5};
    for (int dt = 0; dt < 2; dt++) {
        jag_dtype dtype = dt ? JAG_FLOAT64 : JAG_FLOAT32;
        for (int layout = 0; layout < 2; layout++) {
            for (int op = 0; op < 10; op++) {
                jag_tensor *x = t_from(a, (int64_t[]){2, 3}, 2, dtype), *self = NULL;
                jag_tensor *other = vec(b, 3, dtype);
                if (layout) { /* (3, 2) transposed view over x's memory */
                    jag_tensor *x2 = t_from(a, (int64_t[]){3, 2}, 2, dtype);
                    jag_release(x);
                    x = x2;
                    CHECK_OK(jag_transpose(x, 0, 1, &self));
                } else {
                    self = jag_retain(x);
                }
                int64_t v0 = jag_version(x);
                double before[6], want[6];
                for (int i = 0; i < 6; i++) before[i] = t_get(self, i);
                jag_status st = JAG_OK;
                for (int i = 0; i < 6; i++) {
                    double s = before[i], o = b[i % 3];
                    want[i] = op == 0 ? s + 2 * o : op == 1 ? s - 0.5 * o : op == 2 ? s * o : op == 3 ? s / o
                            : op == 4 ? fmin(fmax(s, -1), 2) : op == 5 ? 0 : op == 6 ? 7.5 : op == 7 ? s + 3
                            : op == 8 ? s * -2 : s / 4;
                }
                switch (op) {
                case 0: st = jag_add_(self, other, 2); break;
                case 1: st = jag_sub_(self, other, 0.5); break;
                case 2: st = jag_mul_(self, other); break;
                case 3: st = jag_div_(self, other); break;
                case 4: st = jag_clamp_(self, -1, 2); break;
                case 5: st = jag_zero_(self); break;
                case 6: st = jag_fill_(self, 7.5); break;
                case 7: st = jag_add_scalar_(self, 3); break;
                case 8: st = jag_mul_scalar_(self, -2); break;
                default: st = jag_div_scalar_(self, 4); break;
                }
                CHECK_MSG(st == JAG_OK, "op %d: %s", op, jag_last_error());
                double tol = dtype == JAG_FLOAT32 ? 1e-6 : 0;
                for (int i = 0; i < 6; i++) CHECK_CLOSE(t_get(self, i), want[i], tol * fabs(want[i]));
                CHECK(jag_version(self) == v0 + 1 && jag_version(x) == v0 + 1); /* one write, shared by the view */
                jag_release(self), jag_release(x), jag_release(other);
            }
        }
    }
}

/* Refusals change nothing: a float result into an integer tensor (torch:
 * "result type Float can't be cast to the desired output type Long"), an
 * operand that would broadcast self, an expanded self, a NULL other. */
static void test_inplace_refusals(void) {
    TEST_BEGIN();
    const double a[3] = {1, 2, 3};
    jag_tensor *xi = vec(a, 3, JAG_INT64), *f = vec(a, 3, JAG_FLOAT32), *big = NULL, *e = NULL;
    int64_t vi = jag_version(xi), vf = jag_version(f);
    CHECK_ERR(jag_add_(xi, f, 1), JAG_EDTYPE, "cannot be written into self's int64");
    CHECK_ERR(jag_div_scalar_(xi, 2), JAG_EDTYPE, "jag_div_scalar_");
    CHECK_ERR(jag_add_scalar_(xi, 0.5), JAG_EDTYPE, "int64");
    CHECK_OK(jag_zeros((int64_t[]){2, 3}, 2, JAG_FLOAT32, &big));
    CHECK_ERR(jag_add_(f, big, 1), JAG_ESHAPE, "expected self's shape [3]");
    CHECK_OK(jag_expand(f, (int64_t[]){2, 3}, 2, &e));
    CHECK_ERR(jag_add_scalar_(e, 1), JAG_EINVAL, "overlapping elements");
    CHECK_ERR(jag_add_(f, NULL, 1), JAG_EINVAL, "argument 'other' is NULL");
    CHECK_ERR(jag_fill_(NULL, 1), JAG_EINVAL, "argument 'self' is NULL");
    for (int i = 0; i < 3; i++) CHECK(t_get(xi, i) == a[i] && t_get(f, i) == a[i]);
    CHECK(jag_version(xi) == vi && jag_version(f) == vf);
    /* an integer result into a float tensor is fine (int64 -> float32) */
    CHECK_OK(jag_add_(f, xi, 1));
    for (int i = 0; i < 3; i++) CHECK(t_get(f, i) == 2 * a[i]);
    jag_release(xi), jag_release(f), jag_release(big), jag_release(e);
}

/* self and other over the same memory, shifted: the result is the
 * out-of-place op's, as if other had been read first. */
static void test_inplace_overlapping_operand(void) {
    TEST_BEGIN();
    const double a[5] = {1, 2, 4, 8, 16};
    jag_tensor *x = vec(a, 5, JAG_FLOAT64), *hi = NULL, *lo = NULL;
    CHECK_OK(jag_narrow(x, 0, 1, 4, &hi));
    CHECK_OK(jag_narrow(x, 0, 0, 4, &lo));
    CHECK_OK(jag_add_(hi, lo, 1));
    const double want[5] = {1, 3, 6, 12, 24};
    for (int i = 0; i < 5; i++) CHECK(t_get(x, i) == want[i]);
    CHECK_OK(jag_mul_(x, x)); /* self with itself */
    for (int i = 0; i < 5; i++) CHECK(t_get(x, i) == want[i] * want[i]);
    jag_release(x), jag_release(hi), jag_release(lo);
}

/* A leaf that requires grad is refused while grad mode is on, and updated
 * in place with it off: it stays the same leaf, the next backward sees the
 * new values. */
static void test_inplace_and_grad_mode(void) {
    TEST_BEGIN();
    const double w0[3] = {1, 2, 3}, xv[3] = {4, 5, 6};
    jag_tensor *w = vec(w0, 3, JAG_FLOAT64), *x = vec(xv, 3, JAG_FLOAT64), *y = NULL, *s = NULL, *g = NULL, *h = NULL;
    CHECK_OK(jag_set_requires_grad(w, true));
    CHECK_ERR(jag_mul_scalar_(w, 2), JAG_ESTATE, "leaf that requires grad");
    CHECK_ERR(jag_copy_(x, w), JAG_ESTATE, "argument 'other' requires grad");
    CHECK_OK(jag_mul(w, x, &y));
    CHECK_ERR(jag_add_scalar_(y, 1), JAG_ESTATE, "the output of jag_mul");
    CHECK(t_get(w, 0) == 1 && t_get(x, 0) == 4);
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_OK(jag_get_grad(w, &g));
    bool prev = jag_set_grad_enabled(false);
    CHECK_OK(jag_sub_(w, g, 0.5)); /* w -= lr * grad */
    jag_set_grad_enabled(prev);
    for (int i = 0; i < 3; i++) CHECK(t_get(w, i) == w0[i] - 0.5 * xv[i]);
    CHECK(jag_is_leaf(w) && jag_requires_grad(w));
    jag_release(y), jag_release(s), jag_release(g);
    jag_zero_grad(w);
    CHECK_OK(jag_mul(w, w, &y)); /* d/dw sum(w*w) = 2w at the new values */
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_OK(jag_get_grad(w, &h));
    for (int i = 0; i < 3; i++) CHECK(t_get(h, i) == 2 * (w0[i] - 0.5 * xv[i]));
    jag_release(w), jag_release(x), jag_release(y), jag_release(s), jag_release(h);
}

/* The case: y = x * x, then x.fill_(10) under no_grad: backward
 * must refuse (it read the new x and gave [20, 20, 20]). torch raises "one
 * of the variables needed for gradient computation has been modified by an
 * inplace operation". */
static void test_version_counter_refuses_stale_gradient(void) {
    TEST_BEGIN();
    const double xv[3] = {1, 2, 3};
    jag_tensor *x = vec(xv, 3, JAG_FLOAT32), *y = NULL, *s = NULL, *g = NULL, *v = NULL;
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK_OK(jag_mul(x, x, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    int64_t v0 = jag_version(x);
    bool prev = jag_set_grad_enabled(false);
    CHECK_OK(jag_view(x, (int64_t[]){3}, 1, &v));
    CHECK_OK(jag_fill_(v, 10)); /* through a view: the same storage, the same counter */
    jag_set_grad_enabled(prev);
    CHECK(jag_version(x) == v0 + 1);
    CHECK_ERR(jag_backward(s, NULL, false), JAG_ESTATE, "input 0 of jag_mul (float32 [3]) was modified by an in-place op");
    CHECK(jag_get_grad(x, &g) == JAG_OK && g == NULL); /* nothing accumulated */
    jag_release(x), jag_release(y), jag_release(s), jag_release(v);
}

/* Ops whose gradient reads only shapes (add, sum, views, index_select's
 * source) do not mind a later write, as in torch; the integer index an op
 * reads is still checked. */
static void test_version_counter_shapes_only_ops(void) {
    TEST_BEGIN();
    const double xv[3] = {1, 2, 3}, bv[3] = {5, 6, 7};
    jag_tensor *x = vec(xv, 3, JAG_FLOAT32), *b = vec(bv, 3, JAG_FLOAT32), *y = NULL, *s = NULL, *g = NULL;
    CHECK_OK(jag_set_requires_grad(b, true));
    CHECK_OK(jag_add(x, b, 1, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_zero_(x)); /* x does not require grad: allowed with grad mode on */
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_OK(jag_get_grad(b, &g));
    for (int i = 0; i < 3; i++) CHECK(t_get(g, i) == 1);
    jag_release(y), jag_release(s), jag_release(g);
    jag_zero_grad(b);
    /* index_select(b, 0, idx): the gradient scatters by idx, so idx is saved */
    const double iv[2] = {2, 0};
    jag_tensor *idx = vec(iv, 2, JAG_INT64);
    CHECK_OK(jag_index_select(b, 0, idx, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_fill_(idx, 1));
    CHECK_ERR(jag_backward(s, NULL, false), JAG_ESTATE, "input 1 of jag_index_select (int64 [2]) was modified");
    jag_release(x), jag_release(b), jag_release(y), jag_release(s), jag_release(idx);
}

/* A custom function's saved tensor written after the forward pass. */
static jag_status sq_forward(jag_autograd_ctx *ctx, jag_tensor *const *in, int n, jag_tensor **out) {
    (void)n;
    jag_status st = jag_autograd_save(ctx, in, 1);
    return st ? st : jag_mul(in[0], in[0], &out[0]);
}
static jag_status sq_backward(jag_autograd_ctx *ctx, jag_tensor *const *go, jag_tensor **gi) {
    int n = 0;
    jag_tensor *const *saved = jag_autograd_saved(ctx, &n);
    jag_tensor *t = NULL;
    jag_status st = jag_mul(go[0], saved[0], &t);
    if (!st) st = jag_mul_scalar(t, 2, &gi[0]);
    jag_release(t);
    return st;
}
/* A backward returning a gradient of the wrong shape ([7] for [3]). */
static jag_status bad_backward(jag_autograd_ctx *ctx, jag_tensor *const *go, jag_tensor **gi) {
    (void)ctx, (void)go;
    return jag_ones((int64_t[]){7}, 1, JAG_FLOAT32, &gi[0]);
}
static jag_status bad_dtype_backward(jag_autograd_ctx *ctx, jag_tensor *const *go, jag_tensor **gi) {
    (void)ctx;
    return jag_to_dtype(go[0], JAG_FLOAT64, &gi[0]);
}

static void test_custom_function_checks(void) {
    TEST_BEGIN();
    const double xv[3] = {1, 2, 3};
    jag_tensor *x = vec(xv, 3, JAG_FLOAT32), *y = NULL, *s = NULL, *g = NULL;
    CHECK_OK(jag_set_requires_grad(x, true));
    jag_function_def def = {.name = "square", .n_outputs = 1, .forward = sq_forward, .backward = sq_backward};
    CHECK_OK(jag_function_apply(&def, &x, 1, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    bool prev = jag_set_grad_enabled(false);
    CHECK_OK(jag_add_scalar_(x, 1));
    jag_set_grad_enabled(prev);
    CHECK_ERR(jag_backward(s, NULL, false), JAG_ESTATE, "saved tensor 0 of square");
    jag_release(y), jag_release(s);
    /* wrong shape, wrong dtype: refused, nothing accumulated */
    jag_function_def bad = {.name = "bad", .n_outputs = 1, .forward = sq_forward, .backward = bad_backward};
    CHECK_OK(jag_function_apply(&bad, &x, 1, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_ERR(jag_backward(s, NULL, false), JAG_ESHAPE, "the backward of 'bad' returned a gradient of shape [7] for input 0 of shape [3]");
    jag_release(y), jag_release(s);
    bad.backward = bad_dtype_backward;
    CHECK_OK(jag_function_apply(&bad, &x, 1, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_ERR(jag_backward(s, NULL, false), JAG_EDTYPE, "returned a float64 gradient for input 0 of dtype float32");
    CHECK(jag_get_grad(x, &g) == JAG_OK && g == NULL);
    jag_release(x), jag_release(y), jag_release(s);
}

/* A compiled program keeps what its backward reads (here x, for w's
 * gradient): writing x after the forward pass is refused at backward. */
static jag_status mul_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *p = NULL;
    jag_status st = jag_mul(in[0], in[1], &p);
    if (!st) st = jag_sum(p, NULL, 0, false, &out[0]);
    jag_release(p);
    return st;
}

static void test_version_counter_compiled_program(void) {
    TEST_BEGIN();
    const double xv[3] = {1, 2, 3}, wv[3] = {4, 5, 6};
    jag_tensor *x = vec(xv, 3, JAG_FLOAT32), *w = vec(wv, 3, JAG_FLOAT32), *s = NULL, *g = NULL;
    CHECK_OK(jag_set_requires_grad(w, true));
    jag_compiled *c = NULL;
    CHECK_OK(jag_compile(mul_fn, NULL, 1, JAG_PASSES_ALL, &c));
    jag_tensor *in[2] = {x, w};
    CHECK_OK(jag_compiled_call(c, in, 2, &s, 1));
    CHECK_OK(jag_backward(s, NULL, false)); /* unchanged: d/dw = x */
    CHECK_OK(jag_get_grad(w, &g));
    for (int i = 0; i < 3; i++) CHECK(t_get(g, i) == xv[i]);
    jag_release(g), jag_release(s);
    jag_zero_grad(w);
    CHECK_OK(jag_compiled_call(c, in, 2, &s, 1));
    CHECK_OK(jag_mul_scalar_(x, 10));
    CHECK_ERR(jag_backward(s, NULL, false), JAG_ESTATE, "the compiled program saved for its gradient (float32 [3]) was modified");
    CHECK(jag_get_grad(w, &g) == JAG_OK && g == NULL);
    jag_release(s), jag_release(x), jag_release(w);
    jag_compiled_free(c);
}

/* Nested in-place ops write the packed values: checked per component
 * against the dense op on each component. */
static void test_nested_inplace(void) {
    TEST_BEGIN();
    jag_tensor *values = t_rand((int64_t[]){7, 2}, 2, JAG_FLOAT32, -2, 2, 11), *offsets = NULL, *nt = NULL;
    const double ov[4] = {0, 2, 2, 7};
    offsets = vec(ov, 4, JAG_INT64);
    CHECK_OK(jag_nested_from_jagged(values, offsets, NULL, &nt));
    int64_t v0 = jag_version(values);
    jag_tensor *before[3] = {0}, *after[3] = {0};
    int n = 0;
    CHECK_OK(jag_nested_unbind(nt, before, 3, &n));
    jag_tensor *copies[3] = {0};
    for (int i = 0; i < 3; i++) CHECK_OK(jag_clone(before[i], &copies[i]));
    const double wv[2] = {3, -1};
    jag_tensor *w = vec(wv, 2, JAG_FLOAT32), *nt2 = NULL;
    CHECK_OK(jag_mul_(nt, w)); /* a dense operand over the packed dims */
    CHECK_OK(jag_mul(nt, nt, &nt2));
    CHECK_OK(jag_add_(nt, nt2, 1)); /* a nested operand of the same raggedness */
    CHECK_OK(jag_clamp_(nt, -5, 5));
    CHECK_OK(jag_nested_unbind(nt, after, 3, &n));
    for (int i = 0; i < 3; i++) {
        int64_t rows = jag_size(copies[i], 0);
        CHECK(jag_size(after[i], 0) == rows);
        for (int64_t k = 0; k < rows * 2; k++) {
            double v = t_get(copies[i], k) * wv[k % 2];
            v = fmin(fmax(v + v * v, -5), 5);
            CHECK_CLOSE(t_get(after[i], k), v, 1e-5);
        }
    }
    CHECK(jag_version(nt) == jag_version(values) && jag_version(values) == v0 + 3);
    /* another raggedness is refused and changes nothing */
    jag_tensor *v2 = t_rand((int64_t[]){7, 2}, 2, JAG_FLOAT32, -2, 2, 12), *o2 = NULL, *other = NULL;
    const double ov2[4] = {0, 3, 4, 7};
    o2 = vec(ov2, 4, JAG_INT64);
    CHECK_OK(jag_nested_from_jagged(v2, o2, NULL, &other));
    CHECK(jag_add_(nt, other, 1) != JAG_OK);
    CHECK_ERR(jag_copy_(nt, other), JAG_ESHAPE, "not a jagged nested tensor of self's raggedness");
    CHECK(jag_version(nt) == v0 + 3);
    /* fill_, zero_ and copy_ from a dense row */
    CHECK_OK(jag_copy_(nt, w));
    for (int64_t k = 0; k < 14; k++) CHECK(t_get(values, k) == wv[k % 2]);
    CHECK_OK(jag_zero_(nt));
    for (int64_t k = 0; k < 14; k++) CHECK(t_get(values, k) == 0);
    /* ragged dim moved (3, 2, j, 3): a dense src lines up with the outer
     * shape, so only its last dim can broadcast over the packed values */
    jag_tensor *v4 = t_rand((int64_t[]){7, 2, 3}, 3, JAG_FLOAT32, -1, 1, 13), *nt4 = NULL, *nt4t = NULL;
    const double rowv[3] = {1, 2, 3};
    jag_tensor *row = vec(rowv, 3, JAG_FLOAT32), *two = NULL;
    CHECK_OK(jag_nested_from_jagged(v4, offsets, NULL, &nt4));
    CHECK_OK(jag_transpose(nt4, 1, 2, &nt4t));
    CHECK_OK(jag_ones((int64_t[]){2, 3}, 2, JAG_FLOAT32, &two));
    CHECK_ERR(jag_copy_(nt4t, two), JAG_ESHAPE, "at most 1 trailing dim");
    CHECK_OK(jag_copy_(nt4t, row));
    for (int64_t k = 0; k < 42; k++) CHECK(t_get(v4, k) == rowv[k % 3]);
    jag_release(v4), jag_release(nt4), jag_release(nt4t), jag_release(row), jag_release(two);
    for (int i = 0; i < 3; i++) jag_release(before[i]), jag_release(after[i]), jag_release(copies[i]);
    jag_release(values), jag_release(offsets), jag_release(nt), jag_release(w), jag_release(nt2);
    jag_release(v2), jag_release(o2), jag_release(other);
}

/* The crash: writing the offsets of a nested tensor. They are
 * read-only once the nested tensor exists (with every view of them), and
 * its row ids and lengths too; unbind still sees the structure it had. */
static void test_nested_offsets_read_only(void) {
    TEST_BEGIN();
    jag_tensor *values = t_rand((int64_t[]){7, 3}, 2, JAG_FLOAT32, -1, 1, 5), *nt = NULL, *o = NULL, *view = NULL;
    const double ov[3] = {0, 2, 7}, bad[3] = {0, 1000, 7};
    jag_tensor *offsets = vec(ov, 3, JAG_INT64), *evil = vec(bad, 3, JAG_INT64), *ids = NULL, *lens = NULL;
    CHECK(!jag_is_read_only(offsets));
    CHECK_OK(jag_nested_from_jagged(values, offsets, NULL, &nt));
    CHECK(jag_is_read_only(offsets));
    CHECK_OK(jag_nested_offsets(nt, &o));
    CHECK(jag_is_read_only(o));
    CHECK_ERR(jag_copy_(o, evil), JAG_EINVAL, "read-only");
    CHECK_OK(jag_view(offsets, (int64_t[]){3}, 1, &view));
    CHECK_ERR(jag_fill_(view, 5), JAG_EINVAL, "read-only");
    CHECK_ERR(jag_add_scalar_(offsets, 1), JAG_EINVAL, "read-only");
    CHECK_OK(jag_nested_row_ids(nt, &ids));
    CHECK_ERR(jag_zero_(ids), JAG_EINVAL, "read-only");
    CHECK_OK(jag_nested_seq_lengths(nt, &lens));
    CHECK_ERR(jag_zero_(lens), JAG_EINVAL, "read-only");
    for (int i = 0; i < 3; i++) CHECK(t_get(offsets, i) == ov[i]);
    jag_tensor *comps[2] = {0};
    int n = 0;
    CHECK_OK(jag_nested_unbind(nt, comps, 2, &n));
    CHECK(n == 2 && jag_size(comps[0], 0) == 2 && jag_size(comps[1], 0) == 5);
    jag_release(comps[0]), jag_release(comps[1]);
    /* a part of a larger tensor is copied, not frozen: the rest stays writable */
    const double big[5] = {0, 3, 7, 100, 200};
    jag_tensor *whole = vec(big, 5, JAG_INT64), *part = NULL, *nt2 = NULL;
    CHECK_OK(jag_narrow(whole, 0, 0, 3, &part));
    CHECK_OK(jag_nested_from_jagged(values, part, NULL, &nt2));
    CHECK(!jag_is_read_only(whole));
    CHECK_OK(jag_fill_(part, 1)); /* the nested tensor kept its own copy */
    CHECK_OK(jag_nested_unbind(nt2, comps, 2, &n));
    CHECK(n == 2 && jag_size(comps[0], 0) == 3 && jag_size(comps[1], 0) == 4);
    jag_release(comps[0]), jag_release(comps[1]);
    jag_release(values), jag_release(nt), jag_release(o), jag_release(view), jag_release(offsets), jag_release(evil);
    jag_release(ids), jag_release(lens), jag_release(whole), jag_release(part), jag_release(nt2);
}

/* Offsets lent by the caller (jag_from_blob) are copied when the nested
 * tensor is built: the lender's later writes do not reach it. */
static void test_nested_lent_offsets_copied(void) {
    TEST_BEGIN();
    int64_t lent[3] = {0, 4, 6};
    jag_tensor *values = t_rand((int64_t[]){6, 2}, 2, JAG_FLOAT64, -1, 1, 9), *off = NULL, *nt = NULL, *kept = NULL;
    CHECK_OK(jag_from_blob(lent, (int64_t[]){3}, NULL, 1, JAG_INT64, NULL, NULL, &off));
    CHECK_OK(jag_nested_from_jagged(values, off, NULL, &nt));
    CHECK(!jag_is_read_only(off)); /* the lender's memory is the lender's */
    lent[1] = 1000;                 /* what crashed softmax and to_padded */
    jag_tensor *comps[2] = {0}, *padded = NULL;
    int n = 0;
    CHECK_OK(jag_nested_unbind(nt, comps, 2, &n));
    CHECK(jag_size(comps[0], 0) == 4 && jag_size(comps[1], 0) == 2);
    CHECK_OK(jag_nested_offsets(nt, &kept));
    CHECK(jag_is_read_only(kept) && t_get(kept, 1) == 4);
    CHECK_OK(jag_nested_to_padded(nt, 0.0, NULL, 0, &padded));
    CHECK(jag_size(padded, 1) == 4);
    jag_release(comps[0]), jag_release(comps[1]);
    jag_release(values), jag_release(off), jag_release(nt), jag_release(kept), jag_release(padded);
}

/* A released handle given back is refused, not aliased; NULL handles do
 * not crash the accessors. */
static void test_released_handles(void) {
    TEST_BEGIN();
    jag_tensor *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(jag_ones((int64_t[]){2, 2}, 2, JAG_FLOAT32, &x));
    CHECK_OK(jag_release(x));
    CHECK_OK(jag_ones((int64_t[]){2, 2}, 2, JAG_FLOAT32, &y)); /* may not reuse x's header */
    CHECK(y != x);
    CHECK_ERR(jag_release(x), JAG_EINVAL, "tensor was released");
    CHECK_ERR(jag_sin(x, &z), JAG_EINVAL, "tensor was released");
    CHECK(z == NULL);
    CHECK_ERR(jag_add(y, x, 1, &z), JAG_EINVAL, "jag_add: argument '1': tensor was released");
    CHECK_ERR(jag_add_scalar_(x, 1), JAG_EINVAL, "tensor was released");
    CHECK(jag_retain(x) == NULL);
    CHECK(jag_numel(x) == -1 && jag_ndim(x) == -1 && jag_size(x, 0) == -1 && jag_sizes(x) == NULL);
    CHECK(strstr(jag_last_error(), "jag_sizes") && strstr(jag_last_error(), "released"));
    CHECK(jag_data(x) == NULL && jag_version(x) == -1 && !jag_is_read_only(x));
    CHECK(jag_numel(NULL) == -1 && jag_ndim(NULL) == -1 && jag_size(NULL, 0) == -1 && jag_stride(NULL, 0) == -1);
    CHECK(jag_sizes(NULL) == NULL && jag_strides(NULL) == NULL && jag_data(NULL) == NULL);
    CHECK(!jag_is_contiguous(NULL) && jag_storage_offset(NULL) == -1 && !jag_shares_storage(NULL, y));
    CHECK(strstr(jag_last_error(), "argument 'a' is NULL"));
    CHECK(jag_numel(y) == 4); /* the live tensor is untouched */
    char text[64];
    CHECK(jag_format(x, text, sizeof text) > 0 && strstr(text, "released"));
    jag_release(y);
    /* a generator freed twice, or drawn from after its free */
    jag_generator *g = NULL;
    CHECK_OK(jag_generator_new(3, &g));
    CHECK_OK(jag_generator_free(g));
    CHECK_ERR(jag_generator_free(g), JAG_EINVAL, "jag_generator_free: argument 'g' was already freed");
    CHECK_ERR(jag_rand_normal((int64_t[]){2}, 1, 0, 1, JAG_FLOAT32, g, &z), JAG_EINVAL, "argument 'generator' was freed");
    CHECK(z == NULL);
    CHECK_OK(jag_generator_free(NULL));
}

/* jag_trace_format with a NULL buffer measures, as jag_format does. */
static jag_status sin_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    return jag_sin(in[0], &out[0]);
}

static void test_trace_format_measures(void) {
    TEST_BEGIN();
    jag_tensor *x = NULL;
    jag_trace *tr = NULL;
    CHECK_OK(jag_ones((int64_t[]){3}, 1, JAG_FLOAT32, &x));
    CHECK_OK(jag_trace_function(sin_fn, NULL, &x, 1, NULL, 1, &tr));
    size_t need = jag_trace_format(tr, NULL, 100);
    char *buf = malloc(need + 1);
    CHECK(need > 10 && jag_trace_format(tr, buf, need + 1) == need && strlen(buf) == need);
    CHECK(strstr(buf, "sin") != NULL);
    CHECK(jag_format(NULL, NULL, 10) == strlen("(null)"));
    free(buf);
    jag_trace_free(tr);
    jag_release(x);
}

TEST_MAIN(test_inplace_values, test_inplace_refusals, test_inplace_overlapping_operand, test_inplace_and_grad_mode,
          test_version_counter_refuses_stale_gradient, test_version_counter_shapes_only_ops,
          test_custom_function_checks, test_version_counter_compiled_program, test_nested_inplace, test_nested_offsets_read_only,
          test_nested_lent_offsets_copied, test_released_handles, test_trace_format_measures)
