/* test_ragged_join.c — joining and picking components of jagged tensors:
 * cat along the batch dim and along dense dims, stack along dense dims,
 * index_select along the batch dim, where / masked_fill with nested
 * operands, truncating to_padded; each against the per-component reference,
 * with gradchecks and error paths. Holes and empty components included. */
#include "test.h"

/* a jagged (B, j, D) float64 tensor with lengths lens[0..B); holes: spans
 * one row longer than each component */
static jag_tensor *make(const int64_t *lens, int B, int64_t D, bool holes, uint64_t seed) {
    int64_t o[17] = {0}, rows = 0;
    for (int b = 0; b < B; b++) rows += lens[b] + (holes ? 1 : 0), o[b + 1] = rows;
    int64_t vs[2] = {rows, D}, nb1 = B + 1, nb = B;
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT64, -2, 2, seed), *off = NULL, *len = NULL, *nt = NULL;
    if (jag_from_data(o, &nb1, 1, JAG_INT64, &off) || (holes && jag_from_data(lens, &nb, 1, JAG_INT64, &len)) ||
        jag_nested_from_jagged(v, off, len, &nt)) {
        fprintf(stderr, "make: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(v), jag_release(off), jag_release(len);
    return nt;
}

static int unbind_all(const jag_tensor *nt, jag_tensor **c) { /* c holds 64 */
    int n = 0;
    if (jag_nested_unbind(nt, c, 64, &n)) exit(2);
    return n;
}

static void release_all(jag_tensor **c, int n) {
    for (int i = 0; i < n; i++) jag_release(c[i]);
}

/* every component of nt equals want[b] */
static bool components_are(const jag_tensor *nt, jag_tensor *const *want, int n) {
    jag_tensor *c[64];
    int m = unbind_all(nt, c);
    bool ok = m == n;
    for (int b = 0; ok && b < n; b++) ok = t_allclose(c[b], want[b], 0, 0);
    release_all(c, m);
    return ok;
}

/* ---- cat and stack -------------------------------------------------------- */

typedef struct {
    int op; /* 0 cat, 1 stack */
    int dim;
} join_case;

/* through to_padded so that holes are not part of the checked value */
static jag_status run_join(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    join_case *j = ctx;
    jag_tensor *y = NULL;
    jag_status st = j->op ? jag_stack(in, n, j->dim, &y) : jag_cat(in, n, j->dim, &y);
    if (!st) st = jag_nested_to_padded(y, 0.0, NULL, 0, out);
    jag_release(y);
    return st;
}

static void test_cat_batch(void) {
    TEST_BEGIN();
    const int64_t la[3] = {2, 0, 3}, lb[2] = {1, 4};
    for (int holes = 0; holes < 2; holes++) {
        jag_tensor *a = make(la, 3, 2, holes, 1), *b = make(lb, 2, 2, !holes, 2), *xs[2] = {a, b}, *y = NULL;
        CHECK_OK(jag_cat(xs, 2, 0, &y));
        CHECK(y && jag_is_nested(y) && jag_nested_batch_size(y) == 5 && jag_size(y, 2) == 2);
        CHECK(y && jag_nested_ragged_id(y) != jag_nested_ragged_id(a));
        jag_tensor *want[64];
        int n = unbind_all(a, want);
        n += unbind_all(b, want + n);
        CHECK(y && components_are(y, want, n));
        CHECK(y && jag_nested_max_seqlen(y) == 4 && jag_nested_min_seqlen(y) == 0);
        release_all(want, n);
        jag_release(y);
        /* gradients */
        CHECK_OK(jag_set_requires_grad(a, true));
        CHECK_OK(jag_set_requires_grad(b, true));
        join_case j = {0, 0};
        CHECK_OK(jag_gradcheck(run_join, &j, xs, 2, 1e-6, 1e-8, 1e-6));
        /* errors: trailing sizes, a dense tensor, the ragged dim */
        jag_tensor *c = make(lb, 2, 3, false, 3), *d = NULL, *bad[2] = {a, c}, *o = NULL;
        CHECK_ERR(jag_cat(bad, 2, 0, &o), JAG_ESHAPE, "jag_cat: tensor 1 has dims after the ragged one [3], expected [2]");
        int64_t ds[3] = {2, 2, 2};
        CHECK_OK(jag_zeros(ds, 3, JAG_FLOAT64, &d));
        jag_tensor *mix[2] = {a, d};
        CHECK_ERR(jag_cat(mix, 2, 0, &o), JAG_EINVAL, "jag_cat: tensor 1 of argument 'xs' is dense");
        CHECK_ERR(jag_cat(xs, 2, 1, &o), JAG_ENOTIMPL, "jag_cat: joining nested tensors along the ragged dim (1)");
        CHECK(o == NULL);
        jag_release(a), jag_release(b), jag_release(c), jag_release(d);
    }
}

static void test_cat_stack_dense_dims(void) {
    TEST_BEGIN();
    const int64_t la[4] = {2, 0, 3, 1};
    for (int holes = 0; holes < 2; holes++) {
        jag_tensor *a = make(la, 4, 2, holes, 10), *b0 = make(la, 4, 3, holes, 11), *b = NULL;
        /* b shares a's raggedness by value (other offsets objects with equal entries) */
        jag_tensor *vb = NULL, *oa = NULL, *lena = NULL;
        CHECK_OK(jag_nested_values(b0, &vb));
        CHECK_OK(jag_nested_offsets(b0, &oa));
        CHECK_OK(jag_nested_lengths(b0, &lena));
        CHECK_OK(jag_nested_from_jagged(vb, oa, lena, &b));
        jag_tensor *xs[2] = {a, b}, *y = NULL, *ca[64], *cb[64];
        int n = unbind_all(a, ca);
        unbind_all(b, cb);
        CHECK_OK(jag_cat(xs, 2, 2, &y));
        CHECK(y && jag_is_nested(y) && jag_size(y, 2) == 5 && jag_nested_ragged_id(y) == jag_nested_ragged_id(a));
        jag_tensor *want[64];
        for (int i = 0; i < n; i++) {
            jag_tensor *pair[2] = {ca[i], cb[i]};
            CHECK_OK(jag_cat(pair, 2, 1, &want[i]));
        }
        CHECK(y && components_are(y, want, n));
        release_all(want, n);
        jag_release(y);
        /* stack along a new dense dim: (B, j, 2, 2) from two (B, j, 2) */
        jag_tensor *a2 = make(la, 4, 2, holes, 12), *sx[2] = {a, NULL}, *st = NULL;
        jag_tensor *va2 = NULL, *a2b = NULL;
        CHECK_OK(jag_nested_values(a2, &va2));
        CHECK_OK(jag_nested_from_jagged(va2, oa, lena, &a2b));
        sx[1] = a2b;
        for (int dim = 2; dim <= 3; dim++) {
            CHECK_OK(jag_stack(sx, 2, dim, &st));
            CHECK(st && jag_ndim(st) == 4 && jag_size(st, 2) == 2 && jag_size(st, 3) == 2);
            jag_tensor *c2[64];
            unbind_all(a2b, c2);
            for (int i = 0; i < n; i++) {
                jag_tensor *pair[2] = {ca[i], c2[i]};
                CHECK_OK(jag_stack(pair, 2, dim - 1, &want[i]));
            }
            CHECK_MSG(st && components_are(st, want, n), "stack dim %d holes %d", dim, holes);
            release_all(want, n), release_all(c2, n);
            jag_release(st);
        }
        /* gradients */
        CHECK_OK(jag_set_requires_grad(a, true));
        CHECK_OK(jag_set_requires_grad(b, true));
        join_case j = {0, -1};
        CHECK_OK(jag_gradcheck(run_join, &j, xs, 2, 1e-6, 1e-8, 1e-6));
        CHECK_OK(jag_set_requires_grad(a2b, true));
        join_case k = {1, 3};
        CHECK_OK(jag_gradcheck(run_join, &k, sx, 2, 1e-6, 1e-8, 1e-6));
        /* different raggedness is refused; a new dim before the ragged one too */
        const int64_t lo[4] = {1, 1, 1, 1};
        jag_tensor *c = make(lo, 4, 2, false, 13), *bad[2] = {a, c}, *o = NULL;
        CHECK_ERR(jag_cat(bad, 2, 2, &o), JAG_ESHAPE, "jag_cat: tensor 1 has different raggedness");
        CHECK_ERR(jag_stack(bad, 2, 1, &o), JAG_ENOTIMPL, "a new dim before the ragged one");
        CHECK(o == NULL);
        release_all(ca, n), release_all(cb, n);
        jag_release(a), jag_release(b0), jag_release(b), jag_release(vb), jag_release(oa), jag_release(lena), jag_release(c);
        jag_release(a2), jag_release(va2), jag_release(a2b);
    }
}

/* ---- index_select along the batch dim ------------------------------------- */

static jag_status run_pick(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    jag_tensor *y = NULL;
    jag_status st = jag_index_select(in[0], 0, ctx, &y);
    if (!st) st = jag_nested_to_padded(y, 0.0, NULL, 0, out);
    jag_release(y);
    return st;
}

static void test_index_select_batch(void) {
    TEST_BEGIN();
    const int64_t la[4] = {2, 0, 3, 1};
    int64_t pick[5] = {2, 0, 2, 1, 3}, five = 5;
    for (int holes = 0; holes < 2; holes++)
        for (int i32 = 0; i32 < 2; i32++) {
            jag_tensor *x = make(la, 4, 3, holes, 20), *ix = NULL, *ix64 = NULL, *y = NULL, *c[64], *want[5];
            CHECK_OK(jag_from_data(pick, &five, 1, JAG_INT64, &ix64));
            CHECK_OK(jag_to_dtype(ix64, i32 ? JAG_INT32 : JAG_INT64, &ix));
            CHECK_OK(jag_index_select(x, 0, ix, &y));
            int n = unbind_all(x, c);
            for (int k = 0; k < 5; k++) want[k] = c[pick[k]];
            CHECK(y && jag_is_nested(y) && jag_nested_batch_size(y) == 5 && components_are(y, want, 5));
            jag_release(y);
            /* gradient: repeats accumulate */
            CHECK_OK(jag_set_requires_grad(x, true));
            CHECK_OK(jag_gradcheck(run_pick, ix, &x, 1, 1e-6, 1e-8, 1e-6));
            /* errors */
            int64_t badv[2] = {1, 4}, two = 2;
            jag_tensor *bad = NULL, *o = NULL;
            CHECK_OK(jag_from_data(badv, &two, 1, JAG_INT64, &bad));
            CHECK_ERR(jag_index_select(x, 0, bad, &o), JAG_ERANGE, "argument 'index' holds 4 at position 1, expected a component in [0, 4)");
            CHECK(o == NULL);
            release_all(c, n);
            jag_release(x), jag_release(ix), jag_release(ix64), jag_release(bad);
        }
}

/* Many long components (one parallel loop of row copies) and values that
 * are a column slice of wider rows (copies through views): the picked
 * components equal the input's. */
static void test_index_select_batch_large_and_strided(void) {
    TEST_BEGIN();
    enum { B = 40, D = 64 };
    int64_t o[B + 1] = {0}, pick[B], nb1 = B + 1, nb = B;
    for (int b = 0; b < B; b++) o[b + 1] = o[b] + 37 + (b * 53) % 150, pick[b] = (b * 7 + 3) % B;
    for (int strided = 0; strided < 2; strided++) {
        int64_t vs[2] = {o[B], strided ? 2 * D : D};
        jag_tensor *wide = t_rand(vs, 2, JAG_FLOAT32, -2, 2, 31), *v = NULL, *off = NULL, *x = NULL, *ix = NULL, *y = NULL;
        if (strided) CHECK_OK(jag_narrow(wide, 1, 5, D, &v));
        else v = jag_retain(wide);
        CHECK(jag_is_contiguous(v) == !strided);
        CHECK_OK(jag_from_data(o, &nb1, 1, JAG_INT64, &off));
        CHECK_OK(jag_nested_from_jagged(v, off, NULL, &x));
        CHECK_OK(jag_from_data(pick, &nb, 1, JAG_INT64, &ix));
        CHECK_OK(jag_index_select(x, 0, ix, &y));
        jag_tensor *c[64], *want[B];
        int n = 0;
        CHECK_OK(jag_nested_unbind(x, c, 64, &n));
        for (int k = 0; k < B; k++) want[k] = c[pick[k]];
        CHECK(y && jag_nested_batch_size(y) == B && components_are(y, want, B));
        release_all(c, n);
        jag_release(wide), jag_release(v), jag_release(off), jag_release(x), jag_release(ix), jag_release(y);
    }
}

/* A gather large enough to be split among the threads (by output bytes, at
 * multiples of 64): rows of 12 bytes, so that a thread's share starts and
 * ends inside a row; components of length 0 and components picked twice,
 * and one large component alone; on 1, 2 and 3 threads, the picked
 * components equal the input's. */
static void test_index_select_batch_split(void) {
    TEST_BEGIN();
    enum { B = 50, P = 60, D = 3 };
    int64_t o[B + 1] = {0}, pick[P], nb1 = B + 1, np = P;
    for (int b = 0; b < B; b++) o[b + 1] = o[b] + (b % 7 == 3 ? 0 : 900 + (b * 211) % 900);
    for (int k = 0; k < P; k++) pick[k] = (k * 17 + 5) % B;
    int64_t vs[2] = {o[B], D};
    CHECK(o[B] * D >= 65536 * 2); /* above the copy's grain (JAG_GRAIN_MEMORY elements) */
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -2, 2, 41), *off = NULL, *x = NULL, *ix = NULL;
    CHECK_OK(jag_from_data(o, &nb1, 1, JAG_INT64, &off));
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &x));
    CHECK_OK(jag_from_data(pick, &np, 1, JAG_INT64, &ix));
    jag_tensor *c[B], *want[P];
    int n = 0;
    CHECK_OK(jag_nested_unbind(x, c, B, &n));
    for (int k = 0; k < P; k++) want[k] = c[pick[k]];
    /* and one component alone, of more rows than the grain, split among the
     * threads too */
    int64_t o2[4] = {0, 5, 30005, 30012}, four = 4, one = 1, mid = 1, vs2[2] = {o2[3], D};
    jag_tensor *v2 = t_rand(vs2, 2, JAG_FLOAT32, -2, 2, 43), *off2 = NULL, *x2 = NULL, *ix1 = NULL, *c2[3];
    int n2 = 0;
    CHECK_OK(jag_from_data(o2, &four, 1, JAG_INT64, &off2));
    CHECK_OK(jag_nested_from_jagged(v2, off2, NULL, &x2));
    CHECK_OK(jag_from_data(&mid, &one, 1, JAG_INT64, &ix1));
    CHECK_OK(jag_nested_unbind(x2, c2, 3, &n2));
    int threads = jag_get_num_threads();
    for (int t = 1; t <= 3; t++) {
        jag_set_num_threads(t);
        jag_tensor *y = NULL, *y1 = NULL;
        CHECK_OK(jag_index_select(x, 0, ix, &y));
        CHECK(y && jag_nested_batch_size(y) == P && components_are(y, want, P));
        CHECK_OK(jag_index_select(x2, 0, ix1, &y1));
        CHECK(y1 && jag_nested_batch_size(y1) == 1 && components_are(y1, &c2[1], 1));
        jag_release(y), jag_release(y1);
    }
    jag_set_num_threads(threads);
    release_all(c, n);
    release_all(c2, n2);
    jag_release(v), jag_release(off), jag_release(x), jag_release(ix), jag_release(ix1);
    jag_release(v2), jag_release(off2), jag_release(x2);
}

/* ---- where, masked_fill ---------------------------------------------------- */

static jag_status run_masked_fill(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    return jag_masked_fill(in[0], ctx, -3.5, out);
}

static jag_status run_where(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    return jag_where(ctx, in[0], in[1], out);
}

static void test_where_masked_fill(void) {
    TEST_BEGIN();
    const int64_t la[4] = {2, 0, 3, 1};
    for (int holes = 0; holes < 2; holes++) {
        jag_tensor *x = make(la, 4, 3, holes, 30), *mask = NULL, *y = NULL, *c[64], *mc[64], *yc[64];
        CHECK_OK(jag_gt_scalar(x, 0.5, &mask)); /* a nested bool mask of x's raggedness */
        CHECK(jag_is_nested(mask));
        CHECK_OK(jag_masked_fill(x, mask, -3.5, &y));
        int n = unbind_all(x, c);
        unbind_all(mask, mc), unbind_all(y, yc);
        for (int b = 0; b < n; b++) {
            for (int64_t i = 0; i < jag_numel(c[b]); i++)
                CHECK(t_get(yc[b], i) == (t_get(mc[b], i) ? -3.5 : t_get(c[b], i)));
        }
        release_all(yc, n);
        jag_release(y);
        /* where with two nested operands, and with a dense (D) one */
        jag_tensor *z = make(la, 4, 3, holes, 31), *zv = NULL, *off = NULL, *len = NULL, *z2 = NULL, *w = NULL, *zc[64];
        CHECK_OK(jag_nested_values(z, &zv));
        CHECK_OK(jag_nested_offsets(x, &off));
        CHECK_OK(jag_nested_lengths(x, &len));
        CHECK_OK(jag_nested_from_jagged(zv, off, len, &z2));
        CHECK_OK(jag_where(mask, x, z2, &w));
        unbind_all(z2, zc), unbind_all(w, yc);
        for (int b = 0; b < n; b++)
            for (int64_t i = 0; i < jag_numel(c[b]); i++)
                CHECK(t_get(yc[b], i) == (t_get(mc[b], i) ? t_get(c[b], i) : t_get(zc[b], i)));
        release_all(yc, n), release_all(zc, n);
        jag_release(w);
        int64_t three = 3;
        jag_tensor *row = t_rand(&three, 1, JAG_FLOAT64, -1, 1, 32);
        CHECK_OK(jag_where(mask, row, x, &w));
        unbind_all(w, yc);
        for (int b = 0; b < n; b++)
            for (int64_t i = 0; i < jag_numel(c[b]); i++)
                CHECK(t_get(yc[b], i) == (t_get(mc[b], i) ? t_get(row, i % 3) : t_get(c[b], i)));
        release_all(yc, n);
        jag_release(w);
        /* gradients */
        CHECK_OK(jag_set_requires_grad(x, true));
        CHECK_OK(jag_set_requires_grad(z2, true));
        CHECK_OK(jag_gradcheck(run_masked_fill, mask, &x, 1, 1e-6, 1e-8, 1e-6));
        jag_tensor *in2[2] = {x, z2};
        CHECK_OK(jag_gradcheck(run_where, mask, in2, 2, 1e-6, 1e-8, 1e-6));
        /* errors: a float mask, a mask of other raggedness */
        jag_tensor *o = NULL, *other = make((const int64_t[4]){1, 1, 1, 1}, 4, 3, false, 33), *om = NULL;
        CHECK_ERR(jag_masked_fill(x, x, 0, &o), JAG_EDTYPE, "jag_masked_fill: argument 'mask' has dtype float64, expected bool");
        CHECK_OK(jag_gt_scalar(other, 0.0, &om));
        CHECK_ERR(jag_masked_fill(x, om, 0, &o), JAG_ESHAPE, "different raggedness");
        CHECK(o == NULL);
        release_all(c, n), release_all(mc, n);
        jag_release(x), jag_release(mask), jag_release(z), jag_release(zv), jag_release(off), jag_release(len), jag_release(z2);
        jag_release(row), jag_release(other), jag_release(om);
    }
}

/* ---- truncating to_padded -------------------------------------------------- */

static jag_status run_pad_max(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    return jag_nested_to_padded_max(in[0], 0.25, *(int64_t *)ctx, out);
}

static void test_to_padded_max(void) {
    TEST_BEGIN();
    const int64_t la[4] = {2, 0, 5, 1};
    for (int holes = 0; holes < 2; holes++)
        for (int64_t L = 0; L <= 6; L += 3) {
            jag_tensor *x = make(la, 4, 3, holes, 40), *p = NULL, *c[64];
            CHECK_OK(jag_nested_to_padded_max(x, 0.25, L, &p));
            CHECK(p && !jag_is_nested(p) && jag_size(p, 0) == 4 && jag_size(p, 1) == L && jag_size(p, 2) == 3);
            int n = unbind_all(x, c);
            for (int b = 0; p && b < n; b++)
                for (int64_t r = 0; r < L; r++)
                    for (int k = 0; k < 3; k++) {
                        double want = r < jag_size(c[b], 0) ? t_get(c[b], r * 3 + k) : 0.25;
                        CHECK(t_get(p, ((int64_t)b * L + r) * 3 + k) == want);
                    }
            release_all(c, n);
            jag_release(p);
            CHECK_OK(jag_set_requires_grad(x, true));
            CHECK_OK(jag_gradcheck(run_pad_max, &L, &x, 1, 1e-6, 1e-8, 1e-6));
            jag_tensor *o = NULL;
            CHECK_ERR(jag_nested_to_padded_max(x, 0, -1, &o), JAG_EINVAL, "argument 'max_length' is -1, expected >= 0");
            CHECK(o == NULL);
            jag_release(x);
        }
    int64_t s2[2] = {2, 2};
    jag_tensor *d = NULL, *o = NULL;
    CHECK_OK(jag_zeros(s2, 2, JAG_FLOAT32, &d));
    CHECK_ERR(jag_nested_to_padded_max(d, 0, 1, &o), JAG_EINVAL, "argument 'nt' is not nested, expected a jagged nested tensor");
    CHECK(o == NULL);
    jag_release(d);
}

TEST_MAIN(test_cat_batch, test_cat_stack_dense_dims, test_index_select_batch, test_index_select_batch_large_and_strided, test_index_select_batch_split, test_where_masked_fill, test_to_padded_max)
