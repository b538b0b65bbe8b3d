/* test_nested.c — nested tensors: construction and its validation,
 * accessors, unbind, padding, layouts, the op handler's rules (against the
 * per-component reference), errors, printing. */
#include "test.h"

/* ---- helpers ------------------------------------------------------------ */

/* B random components of shape (lens[i], D) */
static void make_items(jag_tensor **items, int b, const int64_t *lens, int64_t d, uint64_t seed) {
    for (int i = 0; i < b; i++) {
        int64_t s[2] = {lens[i], d};
        items[i] = t_rand(s, 2, JAG_FLOAT32, -2, 2, seed + (uint64_t)i);
    }
}

static void release_all(jag_tensor **ts, int n) {
    for (int i = 0; i < n; i++) jag_release(ts[i]), ts[i] = NULL;
}

/* Every component of nt equals want[i]. */
static bool components_equal(const jag_tensor *nt, jag_tensor **want, int n, double tol) {
    jag_tensor *got[64];
    int m = 0;
    if (jag_nested_unbind(nt, got, 64, &m) != JAG_OK) {
        fprintf(stderr, "unbind: %s\n", jag_last_error());
        return false;
    }
    bool ok = m == n;
    for (int i = 0; i < m && ok; i++) ok = t_allclose(got[i], want[i], tol, tol);
    release_all(got, m);
    return ok;
}

typedef jag_status (*unary_fn)(const jag_tensor *, jag_tensor **);

/* ---- construction ------------------------------------------------------- */

static void test_from_list_jagged(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3};
    jag_tensor *items[3], *nt = NULL, *values = NULL, *offsets = NULL, *lengths = (jag_tensor *)1;
    make_items(items, 3, lens, 2, 100);
    CHECK_OK(jag_nested_from_list(items, 3, JAG_JAGGED, &nt));
    CHECK(jag_is_nested(nt) && jag_tensor_layout(nt) == JAG_JAGGED);
    CHECK(jag_ndim(nt) == 3 && jag_size(nt, 0) == 3 && jag_size(nt, 1) == -1 && jag_size(nt, 2) == 2);
    CHECK(jag_numel(nt) == -1 && jag_nested_batch_size(nt) == 3);
    CHECK(jag_nested_min_seqlen(nt) == 2 && jag_nested_max_seqlen(nt) == 4);
    CHECK_OK(jag_nested_values(nt, &values));
    CHECK_OK(jag_nested_offsets(nt, &offsets));
    CHECK_OK(jag_nested_lengths(nt, &lengths));
    CHECK(lengths == NULL);
    CHECK(jag_size(values, 0) == 9 && jag_size(values, 1) == 2);
    CHECK(t_get(offsets, 0) == 0 && t_get(offsets, 1) == 2 && t_get(offsets, 2) == 6 && t_get(offsets, 3) == 9);
    CHECK(components_equal(nt, items, 3, 0));
    /* a copy: changing an item does not change the nested tensor */
    CHECK_OK(jag_fill_(items[0], 5));
    CHECK(t_get(values, 0) != 5);
    jag_release(values), jag_release(offsets), jag_release(nt);
    release_all(items, 3);
}

static void test_from_list_strided(void) {
    TEST_BEGIN();
    int64_t s0[2] = {2, 3}, s1[2] = {4, 1}, s2[2] = {1, 5};
    jag_tensor *items[3] = {t_rand(s0, 2, JAG_FLOAT64, -1, 1, 1), t_rand(s1, 2, JAG_FLOAT64, -1, 1, 2),
                            t_rand(s2, 2, JAG_FLOAT64, -1, 1, 3)};
    jag_tensor *nt = NULL, *sizes = NULL, *strides = NULL, *offs = NULL, *buf = NULL;
    CHECK_OK(jag_nested_from_list(items, 3, JAG_STRIDED, &nt));
    CHECK(jag_tensor_layout(nt) == JAG_STRIDED && jag_size(nt, 1) == -1 && jag_size(nt, 2) == -1);
    CHECK_OK(jag_nested_sizes_table(nt, &sizes));
    CHECK_OK(jag_nested_strides_table(nt, &strides));
    CHECK_OK(jag_nested_storage_offsets(nt, &offs));
    CHECK_OK(jag_nested_buffer(nt, &buf));
    CHECK(jag_numel(buf) == 6 + 4 + 5);
    CHECK(t_get(sizes, 2) == 4 && t_get(sizes, 3) == 1 && t_get(strides, 0) == 3 && t_get(offs, 2) == 10);
    CHECK(components_equal(nt, items, 3, 0));
    jag_tensor *v = NULL;
    CHECK_ERR(jag_nested_values(nt, &v), JAG_EINVAL, "strided layout, expected jagged");
    jag_release(sizes), jag_release(strides), jag_release(offs), jag_release(buf), jag_release(nt);
    release_all(items, 3);
}

static void test_from_list_errors(void) {
    TEST_BEGIN();
    int64_t a[2] = {2, 3}, b[2] = {2, 4};
    jag_tensor *x = t_rand(a, 2, JAG_FLOAT32, 0, 1, 1), *y = t_rand(b, 2, JAG_FLOAT32, 0, 1, 2);
    jag_tensor *z = t_rand(a, 2, JAG_FLOAT64, 0, 1, 3), *out = NULL;
    jag_tensor *xy[2] = {x, y}, *xz[2] = {x, z}, *xn[2] = {x, NULL};
    CHECK_ERR(jag_nested_from_list(xy, 2, JAG_JAGGED, &out), JAG_ESHAPE, "equal sizes after dim 0");
    CHECK_ERR(jag_nested_from_list(xz, 2, JAG_STRIDED, &out), JAG_EDTYPE, "item 1 has dtype float64");
    CHECK_ERR(jag_nested_from_list(xn, 2, JAG_STRIDED, &out), JAG_EINVAL, "item 1 is NULL");
    CHECK_ERR(jag_nested_from_list(xy, 0, JAG_STRIDED, &out), JAG_EINVAL, "at least one");
    CHECK_ERR(jag_nested_from_list(xy, 2, JAG_DENSE, &out), JAG_EINVAL, "layout");
    CHECK(out == NULL);
    jag_release(x), jag_release(y), jag_release(z);
}

static jag_tensor *int64_vec(const int64_t *v, int64_t n) {
    jag_tensor *t = NULL;
    if (jag_from_data(v, &n, 1, JAG_INT64, &t)) exit(2);
    return t;
}

static void test_from_jagged_view_and_validation(void) {
    TEST_BEGIN();
    int64_t vs[2] = {9, 2};
    jag_tensor *values = t_rand(vs, 2, JAG_FLOAT32, 0, 1, 5), *nt = NULL, *v2 = NULL;
    int64_t o[4] = {0, 2, 6, 9};
    jag_tensor *offsets = int64_vec(o, 4);
    CHECK_OK(jag_nested_from_jagged(values, offsets, NULL, &nt));
    CHECK_OK(jag_nested_values(nt, &v2));
    /* zero copy: a view of the very same memory */
    CHECK(jag_shares_storage(v2, values) && jag_data(v2) == jag_data(values));
    jag_release(v2), jag_release(nt);
    /* each invalid offsets: status, message, nothing made */
    struct { int64_t o[4]; const char *msg; } bad[] = {
        {{1, 2, 6, 9}, "starts at 1, expected 0"},
        {{0, 6, 2, 9}, "decreases at entry 2"},
        {{0, 2, 6, 8}, "ends at 8, expected values.size(0) = 9"},
    };
    long live = jag__live_tensors();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jag_tensor *bo = int64_vec(bad[i].o, 4), *out = NULL;
        CHECK_ERR(jag_nested_from_jagged(values, bo, NULL, &out), JAG_EINVAL, bad[i].msg);
        CHECK(out == NULL);
        jag_release(bo);
    }
    CHECK(jag__live_tensors() == live);
    jag_tensor *f = NULL, *out = NULL, *o2 = NULL, *empty = NULL;
    CHECK_OK(jag_to_dtype(offsets, JAG_FLOAT32, &f));
    CHECK_ERR(jag_nested_from_jagged(values, f, NULL, &out), JAG_EDTYPE,
              "argument 'offsets' has dtype float32, expected int64 or int32");
    int64_t two[2] = {2, 2};
    CHECK_OK(jag_zeros(two, 2, JAG_INT64, &o2));
    CHECK_ERR(jag_nested_from_jagged(values, o2, NULL, &out), JAG_ESHAPE, "'offsets' is 2-d, expected 1-d");
    CHECK_OK(jag_zeros((int64_t[]){0}, 1, JAG_INT64, &empty));
    CHECK_ERR(jag_nested_from_jagged(values, empty, NULL, &out), JAG_ESHAPE, "empty");
    int64_t l_bad[3] = {2, 5, 1}, l_short[2] = {1, 1};
    jag_tensor *lb = int64_vec(l_bad, 3), *ls = int64_vec(l_short, 2);
    CHECK_ERR(jag_nested_from_jagged(values, offsets, lb, &out), JAG_EINVAL, "'lengths' entry 1 is 5, expected 0..4");
    CHECK_ERR(jag_nested_from_jagged(values, offsets, ls, &out), JAG_ESHAPE, "'lengths' has 2 entries, expected 3");
    CHECK_ERR(jag_nested_from_jagged(NULL, offsets, NULL, &out), JAG_EINVAL, "values");
    CHECK(out == NULL);
    jag_release(f), jag_release(o2), jag_release(empty), jag_release(lb), jag_release(ls);
    jag_release(values), jag_release(offsets);
}

/* int32 offsets and lengths (torch accepts them) are widened to the int64
 * structure jag stores: the same components as int64 ones, the caller's
 * int32 tensors left writable and unread afterwards, bad entries refused
 * with the int64 messages. */
static void test_int32_offsets_and_lengths(void) {
    TEST_BEGIN();
    int64_t vs[2] = {9, 2};
    jag_tensor *values = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 15);
    int32_t o32[4] = {0, 2, 6, 9}, l32[3] = {1, 0, 3};
    int64_t n4 = 4, n3 = 3;
    jag_tensor *offsets = NULL, *lengths = NULL, *nt = NULL, *held = NULL, *comps[3];
    CHECK_OK(jag_from_data(o32, &n4, 1, JAG_INT32, &offsets));
    CHECK_OK(jag_from_data(l32, &n3, 1, JAG_INT32, &lengths));
    for (int holes = 0; holes < 2; holes++) {
        CHECK_OK(jag_nested_from_jagged(values, offsets, holes ? lengths : NULL, &nt));
        CHECK_OK(jag_nested_offsets(nt, &held));
        CHECK(held && jag_tensor_dtype(held) == JAG_INT64 && jag_size(held, 0) == 4);
        for (int i = 0; i < 4; i++) CHECK(held && ((const int64_t *)jag_data(held))[i] == o32[i]);
        int n = 0;
        CHECK_OK(jag_nested_unbind(nt, comps, 3, &n));
        CHECK(n == 3);
        for (int b = 0; b < 3 && n == 3; b++) {
            int64_t len = holes ? l32[b] : o32[b + 1] - o32[b];
            CHECK(jag_size(comps[b], 0) == len && jag_size(comps[b], 1) == 2);
            for (int64_t i = 0; i < len * 2; i++) CHECK(t_get(comps[b], i) == t_get(values, o32[b] * 2 + i));
        }
        CHECK(!jag_is_read_only(offsets) && !jag_is_read_only(lengths));
        release_all(comps, n);
        jag_release(held), jag_release(nt);
    }
    /* the nested tensor kept its own copy: writing the int32 offsets changes nothing */
    CHECK_OK(jag_nested_from_jagged(values, offsets, NULL, &nt));
    ((int32_t *)jag_data(offsets))[1] = 5;
    int n = 0;
    CHECK_OK(jag_nested_unbind(nt, comps, 3, &n));
    CHECK(n == 3 && jag_size(comps[0], 0) == 2 && jag_size(comps[1], 0) == 4);
    release_all(comps, n);
    jag_release(nt);
    ((int32_t *)jag_data(offsets))[1] = 2;
    int32_t bad_o[4] = {0, 6, 2, 9}, bad_l[3] = {1, 5, 0};
    jag_tensor *bo = NULL, *bl = NULL, *out = NULL;
    CHECK_OK(jag_from_data(bad_o, &n4, 1, JAG_INT32, &bo));
    CHECK_OK(jag_from_data(bad_l, &n3, 1, JAG_INT32, &bl));
    CHECK_ERR(jag_nested_from_jagged(values, bo, NULL, &out), JAG_EINVAL, "'offsets' decreases at entry 2");
    CHECK_ERR(jag_nested_from_jagged(values, offsets, bl, &out), JAG_EINVAL, "'lengths' entry 1 is 5, expected 0..4");
    CHECK(out == NULL);
    jag_release(bo), jag_release(bl), jag_release(offsets), jag_release(lengths), jag_release(values);
}

static void test_holes(void) {
    TEST_BEGIN();
    int64_t vs[2] = {9, 2};
    jag_tensor *values = t_rand(vs, 2, JAG_FLOAT32, 0, 1, 7);
    int64_t o[4] = {0, 2, 6, 9}, l[3] = {1, 0, 3};
    jag_tensor *offsets = int64_vec(o, 4), *lengths = int64_vec(l, 3), *nt = NULL, *comps[3];
    int n = 0;
    CHECK_OK(jag_nested_from_jagged(values, offsets, lengths, &nt));
    CHECK(jag_nested_min_seqlen(nt) == 0 && jag_nested_max_seqlen(nt) == 3);
    CHECK_OK(jag_nested_unbind(nt, comps, 3, &n));
    CHECK(n == 3 && jag_size(comps[0], 0) == 1 && jag_size(comps[1], 0) == 0 && jag_size(comps[2], 0) == 3);
    CHECK(t_get(comps[2], 0) == t_get(values, 12)); /* row 6 */
    /* pointwise keeps the holes; contiguous removes them */
    jag_tensor *y = NULL, *c = NULL, *cl = (jag_tensor *)1, *cv = NULL;
    CHECK_OK(jag_mul_scalar(nt, 2.0, &y));
    jag_tensor *want[3];
    for (int i = 0; i < 3; i++) CHECK_OK(jag_mul_scalar(comps[i], 2.0, &want[i]));
    CHECK(components_equal(y, want, 3, 1e-6));
    CHECK_OK(jag_contiguous(y, &c));
    CHECK_OK(jag_nested_lengths(c, &cl));
    CHECK_OK(jag_nested_values(c, &cv));
    CHECK(cl == NULL && jag_size(cv, 0) == 4 && components_equal(c, want, 3, 1e-6));
    release_all(comps, 3), release_all(want, 3);
    jag_release(y), jag_release(c), jag_release(cv);
    jag_release(nt), jag_release(values), jag_release(offsets), jag_release(lengths);
}

static void test_padding_round_trip(void) {
    TEST_BEGIN();
    int64_t lens[4] = {3, 0, 1, 5};
    jag_tensor *items[4], *nt = NULL, *p = NULL, *back = NULL, *p2 = NULL;
    make_items(items, 4, lens, 3, 40);
    CHECK_OK(jag_nested_from_list(items, 4, JAG_JAGGED, &nt));
    CHECK_OK(jag_nested_to_padded(nt, -1.5, NULL, 0, &p));
    CHECK(jag_size(p, 0) == 4 && jag_size(p, 1) == 5 && jag_size(p, 2) == 3);
    for (int b = 0; b < 4; b++)
        for (int r = 0; r < 5; r++)
            for (int c = 0; c < 3; c++) {
                double want = r < lens[b] ? t_get(items[b], r * 3 + c) : -1.5;
                CHECK(t_get(p, (b * 5 + r) * 3 + c) == want);
            }
    int64_t l[4] = {3, 0, 1, 5};
    jag_tensor *lt = int64_vec(l, 4);
    CHECK_OK(jag_nested_from_padded(p, lt, &back));
    CHECK(components_equal(back, items, 4, 0));
    int64_t os[3] = {4, 7, 3}, small[3] = {4, 4, 3};
    CHECK_OK(jag_nested_to_padded(nt, 0, os, 3, &p2));
    CHECK(jag_size(p2, 1) == 7 && t_get(p2, 3 * 7 * 3 + 6 * 3) == 0);
    jag_tensor *o = NULL;
    CHECK_ERR(jag_nested_to_padded(nt, 0, small, 3, &o), JAG_ESHAPE, "has 4 at dim 1, expected at least 5");
    int64_t lbad[4] = {3, 0, 9, 1};
    jag_tensor *lb = int64_vec(lbad, 4);
    CHECK_ERR(jag_nested_from_padded(p, lb, &o), JAG_EINVAL, "'lengths' entry 2 is 9, expected 0..5");
    CHECK(o == NULL);
    release_all(items, 4);
    jag_release(nt), jag_release(p), jag_release(back), jag_release(p2), jag_release(lt), jag_release(lb);
}

static void test_layout_conversion(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 5, 1};
    jag_tensor *items[3], *nt = NULL, *st = NULL, *back = NULL;
    make_items(items, 3, lens, 4, 60);
    CHECK_OK(jag_nested_from_list(items, 3, JAG_JAGGED, &nt));
    CHECK_OK(jag_nested_to_layout(nt, JAG_STRIDED, &st));
    CHECK(jag_tensor_layout(st) == JAG_STRIDED && components_equal(st, items, 3, 0));
    CHECK_OK(jag_nested_to_layout(st, JAG_JAGGED, &back));
    CHECK(jag_tensor_layout(back) == JAG_JAGGED && components_equal(back, items, 3, 0));
    /* strided with components differing after dim 0: not representable */
    int64_t a[2] = {2, 3}, b[2] = {2, 4};
    jag_tensor *odd[2] = {t_rand(a, 2, JAG_FLOAT32, 0, 1, 1), t_rand(b, 2, JAG_FLOAT32, 0, 1, 2)}, *os = NULL, *o = NULL;
    CHECK_OK(jag_nested_from_list(odd, 2, JAG_STRIDED, &os));
    CHECK_ERR(jag_nested_to_layout(os, JAG_JAGGED, &o), JAG_ESHAPE, "jagged layout needs equal sizes after dim 0");
    release_all(items, 3), release_all(odd, 2);
    jag_release(nt), jag_release(st), jag_release(back), jag_release(os);
}

/* ---- pointwise rules ---------------------------------------------------- */

static void check_unary_on_layout(jag_layout layout, unary_fn fn, const char *name) {
    int64_t lens[4] = {3, 0, 1, 4};
    jag_tensor *items[4], *nt = NULL, *y = NULL, *want[4];
    make_items(items, 4, lens, 3, 80);
    CHECK_OK(jag_nested_from_list(items, 4, layout, &nt));
    CHECK_OK(fn(nt, &y));
    for (int i = 0; i < 4; i++) CHECK_OK(fn(items[i], &want[i]));
    CHECK_MSG(components_equal(y, want, 4, 1e-6), "%s on %s", name, layout == JAG_JAGGED ? "jagged" : "strided");
    CHECK(jag_tensor_layout(y) == layout);
    if (layout == JAG_JAGGED) { /* same offsets object: no copy of the structure */
        jag_tensor *o1 = NULL, *o2 = NULL;
        CHECK_OK(jag_nested_offsets(nt, &o1));
        CHECK_OK(jag_nested_offsets(y, &o2));
        CHECK(o1 == o2 && jag_nested_ragged_id(nt) == jag_nested_ragged_id(y));
        jag_release(o1), jag_release(o2);
    }
    release_all(items, 4), release_all(want, 4);
    jag_release(nt), jag_release(y);
}

static void test_unary_pointwise(void) {
    TEST_BEGIN();
    unary_fn fns[] = {jag_sin, jag_exp, jag_relu, jag_silu, jag_neg, jag_tanh, jag_gelu};
    const char *names[] = {"sin", "exp", "relu", "silu", "neg", "tanh", "gelu"};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        check_unary_on_layout(JAG_JAGGED, fns[i], names[i]);
        check_unary_on_layout(JAG_STRIDED, fns[i], names[i]);
    }
}

static void test_binary_nested_nested(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 1};
    jag_tensor *a_items[3], *b_items[3], *a = NULL, *b = NULL, *y = NULL, *want[3];
    make_items(a_items, 3, lens, 2, 10);
    make_items(b_items, 3, lens, 2, 20);
    /* built separately: equal offsets in different tensors still match */
    CHECK_OK(jag_nested_from_list(a_items, 3, JAG_JAGGED, &a));
    CHECK_OK(jag_nested_from_list(b_items, 3, JAG_JAGGED, &b));
    CHECK(jag_nested_ragged_id(a) != jag_nested_ragged_id(b));
    CHECK_OK(jag_mul(a, b, &y));
    for (int i = 0; i < 3; i++) CHECK_OK(jag_mul(a_items[i], b_items[i], &want[i]));
    CHECK(components_equal(y, want, 3, 1e-6));
    CHECK(jag_nested_ragged_id(a) == jag_nested_ragged_id(b)); /* remembered */
    release_all(want, 3);
    jag_release(y);
    /* strided: same structure -> on buffers */
    jag_tensor *sa = NULL, *sb = NULL;
    CHECK_OK(jag_nested_from_list(a_items, 3, JAG_STRIDED, &sa));
    CHECK_OK(jag_nested_from_list(b_items, 3, JAG_STRIDED, &sb));
    CHECK_OK(jag_add(sa, sb, 2.0, &y));
    for (int i = 0; i < 3; i++) CHECK_OK(jag_add(a_items[i], b_items[i], 2.0, &want[i]));
    CHECK(components_equal(y, want, 3, 1e-6));
    release_all(want, 3);
    jag_release(y);
    /* mismatched raggedness */
    int64_t other[3] = {2, 3, 2};
    jag_tensor *c_items[3], *c = NULL, *o = NULL;
    make_items(c_items, 3, other, 2, 30);
    CHECK_OK(jag_nested_from_list(c_items, 3, JAG_JAGGED, &c));
    CHECK_ERR(jag_add(a, c, 1.0, &o), JAG_ESHAPE, "different raggedness");
    /* mixed layouts */
    CHECK_ERR(jag_mul(a, sb, &o), JAG_EINVAL, "mixes nested tensors of the jagged and strided layouts");
    CHECK(o == NULL);
    release_all(a_items, 3), release_all(b_items, 3), release_all(c_items, 3);
    jag_release(a), jag_release(b), jag_release(c), jag_release(sa), jag_release(sb);
}

static void test_binary_nested_dense(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 0, 3}, d = 4;
    jag_tensor *items[3], *nt = NULL, *snt = NULL;
    make_items(items, 3, lens, d, 50);
    CHECK_OK(jag_nested_from_list(items, 3, JAG_JAGGED, &nt));
    CHECK_OK(jag_nested_from_list(items, 3, JAG_STRIDED, &snt));
    int64_t s_d[1] = {4}, s_11d[3] = {1, 1, 4}, s_b1d[3] = {3, 1, 4}, s_1d[2] = {1, 4};
    int64_t *shapes[4] = {s_d, s_11d, s_b1d, s_1d};
    int ndims[4] = {1, 3, 3, 2};
    for (int k = 0; k < 4; k++) {
        jag_tensor *dense = t_rand(shapes[k], ndims[k], JAG_FLOAT32, -1, 1, 90 + (uint64_t)k);
        jag_tensor *y = NULL, *ys = NULL, *want[3];
        CHECK_OK(jag_sub(nt, dense, &y));
        CHECK_OK(jag_sub(snt, dense, &ys));
        for (int i = 0; i < 3; i++) {
            jag_tensor *di = NULL;
            if (ndims[k] == 3) CHECK_OK(jag_select(dense, 0, shapes[k][0] == 3 ? i : 0, &di));
            else di = jag_retain(dense);
            CHECK_OK(jag_sub(items[i], di, &want[i]));
            jag_release(di);
        }
        CHECK_MSG(components_equal(y, want, 3, 1e-6), "jagged - dense of %d dims", ndims[k]);
        CHECK_MSG(components_equal(ys, want, 3, 1e-6), "strided - dense of %d dims", ndims[k]);
        release_all(want, 3);
        jag_release(y), jag_release(ys), jag_release(dense);
    }
    /* a dense tensor along the ragged dim does not broadcast */
    int64_t bad[2] = {5, 4};
    jag_tensor *dense = t_rand(bad, 2, JAG_FLOAT32, -1, 1, 3), *o = NULL;
    CHECK_ERR(jag_add(nt, dense, 1.0, &o), JAG_ESHAPE, "does not broadcast over a jagged");
    CHECK(o == NULL);
    /* scalars */
    jag_tensor *y = NULL, *want[3];
    CHECK_OK(jag_pow_scalar(nt, 2.0, &y));
    for (int i = 0; i < 3; i++) CHECK_OK(jag_pow_scalar(items[i], 2.0, &want[i]));
    CHECK(components_equal(y, want, 3, 1e-6));
    release_all(want, 3), release_all(items, 3);
    jag_release(y), jag_release(dense), jag_release(nt), jag_release(snt);
}

/* ---- matmul family ------------------------------------------------------ */

static void test_jagged_mm_linear(void) {
    TEST_BEGIN();
    int64_t lens[4] = {2, 4, 0, 3};
    jag_tensor *items[4], *nt = NULL;
    make_items(items, 4, lens, 3, 70);
    CHECK_OK(jag_nested_from_list(items, 4, JAG_JAGGED, &nt));
    int64_t ws[2] = {3, 5}, lw[2] = {6, 3}, bs[1] = {6};
    jag_tensor *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 1), *l = t_rand(lw, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *bias = t_rand(bs, 1, JAG_FLOAT32, -1, 1, 3);
    jag_tensor *y = NULL, *z = NULL, *m = NULL, *want[4];
    /* step 3 of examples/nested_subclass_walkthrough.py: silu(mm(nt, w)) */
    CHECK_OK(jag_mm(nt, w, &y));
    CHECK_OK(jag_silu(y, &z));
    for (int i = 0; i < 4; i++) {
        jag_tensor *p = NULL;
        CHECK_OK(jag_mm(items[i], w, &p));
        CHECK_OK(jag_silu(p, &want[i]));
        jag_release(p);
    }
    CHECK(components_equal(z, want, 4, 1e-5));
    CHECK(jag_size(z, 2) == 5);
    release_all(want, 4);
    jag_release(y), jag_release(z);
    CHECK_OK(jag_linear(nt, l, bias, &y));
    CHECK_OK(jag_matmul(nt, w, &m));
    for (int i = 0; i < 4; i++) CHECK_OK(jag_linear(items[i], l, bias, &want[i]));
    CHECK(components_equal(y, want, 4, 1e-5));
    release_all(want, 4);
    for (int i = 0; i < 4; i++) CHECK_OK(jag_matmul(items[i], w, &want[i]));
    CHECK(components_equal(m, want, 4, 1e-5));
    release_all(want, 4);
    jag_tensor *o = NULL;
    CHECK_ERR(jag_mm(w, nt, &o), JAG_ENOTIMPL, "jag_mm: not supported for nested tensors with the jagged layout");
    CHECK_ERR(jag_mm(nt, nt, &o), JAG_ENOTIMPL, "strided layout");
    CHECK(o == NULL);
    release_all(items, 4);
    jag_release(y), jag_release(m), jag_release(nt), jag_release(w), jag_release(l), jag_release(bias);
}

static void test_strided_bmm_transpose(void) {
    TEST_BEGIN();
    /* the walkthrough's steps 1 and 2 */
    double v0[4] = {1, 2, 1, 2}, v1[6] = {3, 4, 5, 3, 4, 5}, v2[4] = {6, 7, 6, 7};
    int64_t s0[2] = {2, 2}, s1[2] = {2, 3};
    jag_tensor *items[3] = {t_from(v0, s0, 2, JAG_FLOAT32), t_from(v1, s1, 2, JAG_FLOAT32), t_from(v2, s0, 2, JAG_FLOAT32)};
    jag_tensor *nt = NULL, *s = NULL, *buf = NULL, *sbuf = NULL, *sin_buf = NULL;
    CHECK_OK(jag_nested_from_list(items, 3, JAG_STRIDED, &nt));
    CHECK_OK(jag_sin(nt, &s));
    CHECK_OK(jag_nested_buffer(nt, &buf));
    CHECK_OK(jag_nested_buffer(s, &sbuf));
    CHECK_OK(jag_sin(buf, &sin_buf));
    CHECK(t_allclose(sbuf, sin_buf, 0, 0)); /* step 1: sin(nt) is sin of the buffer */
    jag_tensor *t = NULL, *p = NULL, *want[3];
    CHECK_OK(jag_transpose(nt, -1, -2, &t));
    jag_tensor *tb = NULL;
    CHECK_OK(jag_nested_buffer(t, &tb));
    CHECK(tb == buf); /* a view: same buffer */
    CHECK_OK(jag_bmm(nt, t, &p)); /* step 2 */
    for (int i = 0; i < 3; i++) {
        jag_tensor *ti = NULL;
        CHECK_OK(jag_transpose(items[i], 0, 1, &ti));
        CHECK_OK(jag_mm(items[i], ti, &want[i]));
        jag_release(ti);
    }
    CHECK(components_equal(p, want, 3, 1e-5));
    CHECK(t_get(want[1], 0) == 3 * 3 + 4 * 4 + 5 * 5); /* hand value: 50 */
    jag_tensor *m = NULL;
    CHECK_OK(jag_matmul(nt, t, &m));
    CHECK(components_equal(m, want, 3, 1e-5));
    release_all(want, 3), release_all(items, 3);
    jag_release(nt), jag_release(s), jag_release(buf), jag_release(sbuf), jag_release(sin_buf);
    jag_release(t), jag_release(tb), jag_release(p), jag_release(m);
}

/* ---- views and reductions over non-ragged dims -------------------------- */

static void test_non_ragged_dims(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 1, 3};
    jag_tensor *items[3], *nt = NULL;
    for (int i = 0; i < 3; i++) {
        int64_t s[3] = {lens[i], 4, 6};
        items[i] = t_rand(s, 3, JAG_FLOAT64, -1, 1, 200 + (uint64_t)i);
    }
    for (int lay = 0; lay < 2; lay++) {
        jag_layout layout = lay ? JAG_STRIDED : JAG_JAGGED;
        CHECK_OK(jag_nested_from_list(items, 3, layout, &nt));
        jag_tensor *y = NULL, *want[3];
        /* transpose(2, 3) */
        CHECK_OK(jag_transpose(nt, 2, 3, &y));
        for (int i = 0; i < 3; i++) CHECK_OK(jag_transpose(items[i], 1, 2, &want[i]));
        CHECK(components_equal(y, want, 3, 0));
        release_all(want, 3);
        jag_release(y);
        /* sum and mean over dim 3 and {2, 3}, keepdim both ways */
        int d3[1] = {3}, d23[2] = {2, -1}, c3[1] = {2}, c23[2] = {1, 2};
        for (int keep = 0; keep < 2; keep++) {
            CHECK_OK(jag_sum(nt, d3, 1, keep, &y));
            for (int i = 0; i < 3; i++) CHECK_OK(jag_sum(items[i], c3, 1, keep, &want[i]));
            CHECK(components_equal(y, want, 3, 1e-12));
            release_all(want, 3);
            jag_release(y);
            CHECK_OK(jag_mean(nt, d23, 2, keep, &y));
            for (int i = 0; i < 3; i++) CHECK_OK(jag_mean(items[i], c23, 2, keep, &want[i]));
            CHECK(components_equal(y, want, 3, 1e-12));
            release_all(want, 3);
            jag_release(y);
        }
        /* split and chunk along dim 3 (views) */
        jag_tensor *parts[4];
        int np = 0;
        CHECK_OK(jag_split(nt, 4, 3, parts, 4, &np));
        CHECK(np == 2);
        for (int i = 0; i < 3; i++) CHECK_OK(jag_narrow(items[i], 2, 4, 2, &want[i]));
        CHECK(components_equal(parts[1], want, 3, 0));
        release_all(want, 3), release_all(parts, np);
        CHECK_OK(jag_chunk(nt, 3, 2, parts, 4, &np));
        CHECK(np == 2);
        for (int i = 0; i < 3; i++) CHECK_OK(jag_narrow(items[i], 1, 2, 2, &want[i]));
        CHECK(components_equal(parts[1], want, 3, 0));
        release_all(want, 3), release_all(parts, np);
        /* the batch dim is not an op dim */
        jag_tensor *o = NULL;
        int d0[1] = {0};
        CHECK_ERR(jag_sum(nt, d0, 1, false, &o), JAG_ENOTIMPL, "batch");
        CHECK_ERR(jag_transpose(nt, 0, 2, &o), JAG_ENOTIMPL, "batch dim");
        CHECK(o == NULL);
        jag_release(nt);
    }
    release_all(items, 3);
}

/* narrow along the ragged dim: each component's rows [start, start + length)
 * with the length clipped to the component (a view with holes); a start past
 * a component's end is refused as dense narrow refuses it, and nothing is
 * made. */
static void test_narrow_ragged_start_past_end(void) {
    TEST_BEGIN();
    int64_t lens[3] = {2, 4, 3};
    jag_tensor *items[3], *nt = NULL, *y = NULL, *want[3];
    make_items(items, 3, lens, 2, 31);
    CHECK_OK(jag_nested_from_list(items, 3, JAG_JAGGED, &nt));
    CHECK_OK(jag_narrow(nt, 1, 2, 2, &y)); /* component 0 ends at 2: empty, not past its end */
    for (int i = 0; i < 3; i++) CHECK_OK(jag_narrow(items[i], 0, 2, lens[i] - 2 < 2 ? lens[i] - 2 : 2, &want[i]));
    CHECK(components_equal(y, want, 3, 0));
    release_all(want, 3);
    jag_release(y), y = NULL;
    CHECK_ERR(jag_narrow(nt, 1, 3, 1, &y), JAG_ERANGE, "past the end of component 0 (length 2)");
    CHECK(y == NULL);
    jag_release(nt);
    release_all(items, 3);
}

static void test_unsupported_and_fallback(void) {
    TEST_BEGIN();
    int64_t lens[2] = {2, 3};
    jag_tensor *items[2], *nt = NULL, *snt = NULL, *o = NULL, *y = NULL, *want[2];
    make_items(items, 2, lens, 4, 300);
    CHECK_OK(jag_nested_from_list(items, 2, JAG_JAGGED, &nt));
    CHECK_OK(jag_nested_from_list(items, 2, JAG_STRIDED, &snt));
    /* jagged: prod has no nested rule yet */
    int d1[1] = {1};
    CHECK_ERR(jag_prod(nt, d1, 1, false, &o), JAG_ENOTIMPL, "jag_prod: not supported for nested tensors with the jagged layout");
    CHECK(o == NULL);
    /* strided: the per-component fallback runs it */
    CHECK_OK(jag_softmax(snt, -1, &y));
    for (int i = 0; i < 2; i++) CHECK_OK(jag_softmax(items[i], -1, &want[i]));
    CHECK(components_equal(y, want, 2, 1e-6));
    release_all(want, 2), release_all(items, 2);
    jag_release(y), jag_release(nt), jag_release(snt);
}

static void test_like_factories_and_clone(void) {
    TEST_BEGIN();
    int64_t lens[3] = {1, 3, 2};
    jag_tensor *items[3], *nt = NULL, *z = NULL, *f = NULL, *r = NULL, *c = NULL, *d = NULL;
    make_items(items, 3, lens, 2, 400);
    CHECK_OK(jag_nested_from_list(items, 3, JAG_JAGGED, &nt));
    CHECK_OK(jag_zeros_like(nt, &z));
    CHECK_OK(jag_full_like(nt, 3.5, &f));
    CHECK_OK(jag_randn_like(nt, NULL, &r));
    CHECK_OK(jag_clone(nt, &c));
    CHECK_OK(jag_to_dtype(nt, JAG_FLOAT64, &d));
    CHECK(jag_nested_ragged_id(z) == jag_nested_ragged_id(nt) && jag_nested_ragged_id(r) == jag_nested_ragged_id(nt));
    jag_tensor *zc[3], *fc[3];
    int n;
    CHECK_OK(jag_nested_unbind(z, zc, 3, &n));
    CHECK_OK(jag_nested_unbind(f, fc, 3, &n));
    for (int i = 0; i < 3; i++)
        for (int64_t k = 0; k < jag_numel(zc[i]); k++) CHECK(t_get(zc[i], k) == 0 && t_get(fc[i], k) == 3.5);
    CHECK(components_equal(c, items, 3, 0) && components_equal(d, items, 3, 0));
    CHECK(jag_tensor_dtype(d) == JAG_FLOAT64 && jag_is_nested(d));
    jag_tensor *cv = NULL, *nv = NULL;
    CHECK_OK(jag_nested_values(c, &cv));
    CHECK_OK(jag_nested_values(nt, &nv));
    CHECK(!jag_shares_storage(cv, nv));
    release_all(zc, 3), release_all(fc, 3), release_all(items, 3);
    jag_release(cv), jag_release(nv);
    jag_release(nt), jag_release(z), jag_release(f), jag_release(r), jag_release(c), jag_release(d);
}

static void test_printing(void) {
    TEST_BEGIN();
    double v[6] = {1, 2, 3, 4, 5, 6};
    int64_t s0[2] = {1, 2}, s1[2] = {2, 2};
    jag_tensor *items[2] = {t_from(v, s0, 2, JAG_FLOAT32), t_from(v + 2, s1, 2, JAG_FLOAT32)}, *nt = NULL;
    CHECK_OK(jag_nested_from_list(items, 2, JAG_JAGGED, &nt));
    char buf[1024], want[64];
    jag_format(nt, buf, sizeof buf);
    snprintf(want, sizeof want, "shape=(2, j%lld, 2)", (long long)jag_nested_ragged_id(nt));
    CHECK_MSG(strstr(buf, "nested_tensor(layout=jagged, dtype=float32") != NULL, "got %s", buf);
    CHECK_MSG(strstr(buf, want) != NULL, "got %s", buf);
    CHECK_MSG(strstr(buf, "tensor([[3.0000, 4.0000],\n") != NULL, "got %s", buf);
    release_all(items, 2);
    jag_release(nt);
}

static void test_flatten_unflatten(void) {
    TEST_BEGIN();
    int64_t lens[2] = {2, 3};
    jag_tensor *items[2], *nt = NULL, *inner[JAG_SUBCLASS_MAX_INNER], *back = NULL;
    make_items(items, 2, lens, 2, 500);
    CHECK_OK(jag_nested_from_list(items, 2, JAG_JAGGED, &nt));
    int n = 0;
    jag_subclass_meta meta;
    CHECK_OK(jag_subclass_flatten(nt, inner, &n, &meta));
    CHECK(n == 2 && jag_ndim(inner[0]) == 2 && jag_ndim(inner[1]) == 1);
    CHECK_OK(jag_subclass_unflatten(jag_tensor_subclass(nt), inner, n, &meta, &back));
    CHECK(components_equal(back, items, 2, 0) && jag_nested_ragged_id(back) == jag_nested_ragged_id(nt));
    CHECK(strcmp(jag_subclass_name(jag_tensor_subclass(nt)), "nested") == 0);
    release_all(inner, n), release_all(items, 2);
    jag_release(nt), jag_release(back);
}

static void test_batch_one_and_plain_errors(void) {
    TEST_BEGIN();
    int64_t lens[1] = {5};
    jag_tensor *items[1], *nt = NULL, *y = NULL, *want[1];
    make_items(items, 1, lens, 3, 600);
    CHECK_OK(jag_nested_from_list(items, 1, JAG_JAGGED, &nt));
    int64_t bs[3] = {1, 1, 3};
    jag_tensor *bias = t_rand(bs, 3, JAG_FLOAT32, 0, 1, 1);
    CHECK_OK(jag_add(nt, bias, 1.0, &y));
    CHECK_OK(jag_add(items[0], bias, 1.0, &want[0])); /* (5,3) + (1,1,3) -> (1,5,3) */
    jag_tensor *w0 = NULL;
    CHECK_OK(jag_select(want[0], 0, 0, &w0));
    CHECK(components_equal(y, &w0, 1, 1e-6));
    jag_release(w0), jag_release(want[0]), jag_release(y), jag_release(bias);
    /* functions that need plain data refuse nested tensors clearly */
    double v;
    CHECK_ERR(jag_item(nt, &v), JAG_ENOTIMPL, "jag_item: argument 't' is a nested tensor, expected a plain tensor");
    CHECK_ERR(jag_item(NULL, &v), JAG_EINVAL, "must not be NULL");
    CHECK_ERR(jag_item_at(nt, NULL, &v), JAG_EINVAL, "must not be NULL");
    CHECK_ERR(jag_item_at(nt, (int64_t[]){0, 0}, &v), JAG_ENOTIMPL, "is a nested tensor, expected a plain tensor");
    CHECK(jag_data(nt) == NULL); /* in-place ops take nested tensors: test_inplace.c */
    int n0 = 0;
    jag_tensor *o = NULL;
    CHECK_ERR(jag_nested_unbind(nt, &o, 0, &n0), JAG_EINVAL, "cap");
    jag_release(nt);
    release_all(items, 1);
}

/* ---- the rules' calls on the packed values -------------------------------- */

/* A rule runs its op on the values by a shorter path only where the full
 * dispatcher would do nothing but run the op: half values still compute in
 * float32 and round once, values that require grad still record the op,
 * and broadcast operands, gathered components and every temporary are
 * released (the live-tensor count comes back). */
static void test_rules_on_values_keep_the_full_path(void) {
    TEST_BEGIN();
    long live0 = jag__live_tensors();
    int64_t lens[2] = {3, 2}, d = 4;
    jag_tensor *items[2], *nt = NULL;
    make_items(items, 2, lens, d, 700);
    CHECK_OK(jag_nested_from_list(items, 2, JAG_JAGGED, &nt));

    /* float16 values: the nested result is each component's float16 op
     * (torch computes half tensors in float32 and rounds once) */
    jag_tensor *h = NULL, *hitems[2], *y = NULL, *want[2];
    CHECK_OK(jag_to_dtype(nt, JAG_FLOAT16, &h));
    for (int i = 0; i < 2; i++) CHECK_OK(jag_to_dtype(items[i], JAG_FLOAT16, &hitems[i]));
    CHECK_OK(jag_mul(h, h, &y));
    for (int i = 0; i < 2; i++) CHECK_OK(jag_mul(hitems[i], hitems[i], &want[i]));
    CHECK(jag_tensor_dtype(y) == JAG_FLOAT16);
    CHECK_MSG(components_equal(y, want, 2, 0), "float16 nested mul per component");
    release_all(want, 2), release_all(hitems, 2);
    jag_release(y), jag_release(h);

    /* values that require grad: relu(nt) records, d sum(relu(x)) / dx = [x > 0] */
    int64_t vs[2] = {5, 4};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -1, 1, 701), *off = NULL, *gnt = NULL, *r = NULL, *rv = NULL, *s = NULL,
               *g = NULL;
    int64_t o[3] = {0, 3, 5};
    off = t_i64(o, 3);
    CHECK_OK(jag_set_requires_grad(v, true));
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &gnt));
    CHECK_OK(jag_relu(gnt, &r));
    CHECK(jag_requires_grad(r));
    CHECK_OK(jag_nested_values(r, &rv));
    CHECK_OK(jag_sum(rv, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_OK(jag_get_grad(v, &g));
    bool grad_ok = g != NULL;
    for (int64_t k = 0; grad_ok && k < 20; k++) grad_ok = t_get(g, k) == (t_get(v, k) > 0 ? 1.0 : 0.0);
    CHECK_MSG(grad_ok, "gradient of relu through a nested tensor is [x > 0]");
    jag_release(g), jag_release(s), jag_release(rv), jag_release(r), jag_release(gnt), jag_release(off), jag_release(v);

    /* masked_fill with a 0-d fill value and an operand of shape (D): used as
     * they are; where(mask, 0, x) per component, x - row per component */
    jag_tensor *mask = NULL, *filled = NULL, *row = t_rand(&d, 1, JAG_FLOAT32, -1, 1, 702), *sub = NULL;
    CHECK_OK(jag_gt_scalar(nt, 0.5, &mask));
    CHECK_OK(jag_masked_fill(nt, mask, 0.0, &filled));
    CHECK_OK(jag_sub(nt, row, &sub));
    jag_tensor *want_sub[2];
    bool fill_ok = true;
    jag_tensor *got[2];
    int m = 0;
    CHECK_OK(jag_nested_unbind(filled, got, 2, &m));
    for (int i = 0; i < 2; i++) {
        CHECK_OK(jag_sub(items[i], row, &want_sub[i]));
        for (int64_t k = 0; k < lens[i] * d; k++) {
            double x = t_get(items[i], k);
            fill_ok = fill_ok && t_get(got[i], k) == (x > 0.5 ? 0.0 : x);
        }
    }
    CHECK_MSG(m == 2 && fill_ok, "masked_fill per component: x > 0.5 ? 0 : x");
    CHECK(components_equal(sub, want_sub, 2, 1e-6));
    release_all(got, m), release_all(want_sub, 2);
    jag_release(mask), jag_release(filled), jag_release(row), jag_release(sub);

    /* cat along the batch dim of a packed tensor and one with holes (its
     * components gathered first): the components in order */
    int64_t hv[2] = {6, 4}, ho[3] = {0, 3, 6}, hl[2] = {2, 1};
    jag_tensor *hvals = t_rand(hv, 2, JAG_FLOAT32, -1, 1, 703), *hoff = t_i64(ho, 3), *hlen = t_i64(hl, 2), *holes = NULL,
               *cat = NULL, *parts[2], *hc[2], *all[4];
    CHECK_OK(jag_nested_from_jagged(hvals, hoff, hlen, &holes));
    parts[0] = nt, parts[1] = holes;
    CHECK_OK(jag_cat(parts, 2, 0, &cat));
    CHECK_OK(jag_nested_unbind(holes, hc, 2, &m));
    all[0] = items[0], all[1] = items[1], all[2] = hc[0], all[3] = hc[1];
    CHECK_MSG(components_equal(cat, all, 4, 0), "cat along the batch dim: components in order");
    release_all(hc, 2);
    jag_release(cat), jag_release(holes), jag_release(hvals), jag_release(hoff), jag_release(hlen);

    jag_release(nt);
    release_all(items, 2);
    CHECK_MSG(jag__live_tensors() == live0, "every temporary released: %ld live tensors left", jag__live_tensors() - live0);
}

/* ---- regressions from review ------------------------------------------- */

/* Holes: equal lengths with different offsets are different raggedness. */
static void test_shared_lengths_different_offsets(void) {
    TEST_BEGIN();
    int64_t vs[2] = {4, 1}, o1[3] = {0, 2, 4}, o2[3] = {0, 3, 4}, l[2] = {1, 1};
    jag_tensor *v1 = t_rand(vs, 2, JAG_FLOAT32, 0, 1, 1), *v2 = t_rand(vs, 2, JAG_FLOAT32, 0, 1, 2);
    jag_tensor *off1 = int64_vec(o1, 3), *off2 = int64_vec(o2, 3), *len = int64_vec(l, 2), *a = NULL, *b = NULL, *o = NULL;
    CHECK_OK(jag_nested_from_jagged(v1, off1, len, &a));
    CHECK_OK(jag_nested_from_jagged(v2, off2, len, &b));
    long long ia = jag_nested_ragged_id(a), ib = jag_nested_ragged_id(b);
    CHECK_ERR(jag_add(a, b, 1.0, &o), JAG_ESHAPE, "different raggedness");
    CHECK(o == NULL);
    /* a failed call changed nothing, ragged symbols included */
    CHECK(jag_nested_ragged_id(a) == ia && jag_nested_ragged_id(b) == ib);
    jag_release(v1), jag_release(v2), jag_release(off1), jag_release(off2), jag_release(len), jag_release(a), jag_release(b);
}

static void test_review_edge_cases(void) {
    TEST_BEGIN();
    /* linear / matmul on (B, j) with 1-d values: a clear error, no corruption */
    int64_t vn = 3, o[3] = {0, 1, 3}, ws[2] = {2, 1};
    jag_tensor *v = t_rand(&vn, 1, JAG_FLOAT32, 0, 1, 3), *off = int64_vec(o, 3), *nt = NULL, *w = t_rand(ws, 2, JAG_FLOAT32, 0, 1, 4);
    jag_tensor *out = NULL;
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
    CHECK_ERR(jag_linear(nt, w, NULL, &out), JAG_ESHAPE, "expected (B, j, D...)");
    CHECK_ERR(jag_matmul(nt, w, &out), JAG_ESHAPE, "expected (B, j, D...)");
    /* a long dim list through the boxed API: refused, no overflow */
    jag_op_id sum;
    CHECK_OK(jag_op_find("sum", &sum));
    int64_t many[40] = {0};
    jag_value args[3] = {{.kind = JAG_VAL_TENSOR, .u.t = nt}, {.kind = JAG_VAL_INTS, .u.ints = {many, 40}},
                         {.kind = JAG_VAL_BOOL, .u.b = false}};
    CHECK_ERR(jag_op_call(sum, args, 3, &out), JAG_EINVAL, "at most 8 dims");
    /* split along the ragged dim */
    jag_tensor *parts[4];
    int np = -1;
    CHECK_ERR(jag_split(nt, 1, 1, parts, 4, &np), JAG_ENOTIMPL, "is ragged");
    CHECK(np == -1 && out == NULL);
    /* B = 0: padding keeps the trailing dims */
    int64_t z[1] = {0}, vs0[2] = {0, 3};
    jag_tensor *v0 = NULL, *off0 = int64_vec(z, 1), *n0 = NULL, *p = NULL;
    CHECK_OK(jag_zeros(vs0, 2, JAG_FLOAT32, &v0));
    CHECK_OK(jag_nested_from_jagged(v0, off0, NULL, &n0));
    CHECK_OK(jag_nested_to_padded(n0, 0, NULL, 0, &p));
    CHECK(jag_ndim(p) == 3 && jag_size(p, 0) == 0 && jag_size(p, 2) == 3);
    jag_release(v), jag_release(off), jag_release(nt), jag_release(w), jag_release(v0), jag_release(off0), jag_release(n0), jag_release(p);
    /* strided: unsqueeze(-1) adds the last dim; expand and view refuse */
    int64_t a[2] = {2, 3}, b[2] = {1, 3};
    jag_tensor *items[2] = {t_rand(a, 2, JAG_FLOAT32, 0, 1, 5), t_rand(b, 2, JAG_FLOAT32, 0, 1, 6)}, *st = NULL, *u = NULL;
    CHECK_OK(jag_nested_from_list(items, 2, JAG_STRIDED, &st));
    CHECK_OK(jag_unsqueeze(st, -1, &u));
    CHECK(jag_ndim(u) == 4 && jag_size(u, 3) == 1 && jag_size(u, 2) == 3);
    int64_t es[3] = {2, 2, 3};
    CHECK_ERR(jag_expand(st, es, 3, &out), JAG_ENOTIMPL, "describe the whole tensor");
    /* strided nested + nested of other component sizes: refused (torch does too) */
    jag_tensor *items2[2] = {t_rand(b, 2, JAG_FLOAT32, 0, 1, 7), t_rand(b, 2, JAG_FLOAT32, 0, 1, 8)}, *st2 = NULL;
    CHECK_OK(jag_nested_from_list(items2, 2, JAG_STRIDED, &st2));
    CHECK_ERR(jag_add(st, st2, 1.0, &out), JAG_ESHAPE, "components of other sizes");
    CHECK(out == NULL);
    /* unflatten validates what it is given */
    jag_tensor *inner[4] = {0}, *back = NULL;
    int n = 0;
    jag_subclass_meta meta;
    CHECK_OK(jag_subclass_flatten(st, inner, &n, &meta));
    jag_tensor *swapped[4] = {inner[1], inner[0], inner[2], inner[3]};
    CHECK_ERR(jag_subclass_unflatten(jag_tensor_subclass(st), swapped, 4, &meta, &back), JAG_EINVAL, "nested unflatten");
    CHECK(back == NULL);
    release_all(inner, n), release_all(items, 2), release_all(items2, 2);
    jag_release(st), jag_release(st2), jag_release(u);
}

/* Found by fuzz/fuzz_ops and fuzz/fuzz_nested (docs/FUZZING.md). */
static void test_fuzz_regressions(void) {
    TEST_BEGIN();
    int64_t lens[2] = {2, 1};
    jag_tensor *items[2], *nt = NULL, *out = NULL;
    make_items(items, 2, lens, 2, 7);
    CHECK_OK(jag_nested_from_list(items, 2, JAG_JAGGED, &nt));
    /* a pointwise op given a tensor list holding a nested tensor recursed
     * without end (the rule replaced only tensor arguments) */
    jag_op_id add;
    CHECK_OK(jag_op_find("add", &add));
    jag_value args[3] = {{.kind = JAG_VAL_TENSORS}, {.kind = JAG_VAL_TENSOR}, {.kind = JAG_VAL_DOUBLE}};
    args[0].u.tensors.v = &nt, args[0].u.tensors.n = 1;
    args[1].u.t = nt;
    args[2].u.d = 1.0;
    CHECK_ERR(jag_op_call(add, args, 3, &out), JAG_EINVAL, "argument 'a' is a tensor list, expected a tensor");
    CHECK(out == NULL);
    /* embedding(dense weight, [nested]) read the list as if it were a tensor;
     * the dispatcher now refuses it against the op's schema */
    jag_op_id emb;
    CHECK_OK(jag_op_find("embedding", &emb));
    int64_t ws[2] = {4, 2};
    jag_tensor *w = NULL;
    CHECK_OK(jag_zeros(ws, 2, JAG_FLOAT32, &w));
    jag_value eargs[2] = {{.kind = JAG_VAL_TENSOR}, {.kind = JAG_VAL_TENSORS}};
    eargs[0].u.t = w;
    eargs[1].u.tensors.v = &nt, eargs[1].u.tensors.n = 1;
    CHECK_ERR(jag_op_call(emb, eargs, 2, &out), JAG_EINVAL, "argument 'indices' is a tensor list, expected a tensor");
    CHECK(out == NULL);
    jag_release(w);
    /* strided tables with 0-d components were accepted, and then every
     * conversion of the result failed */
    int64_t four = 4, tab[2] = {1, 0}, one = 1, zero = 0;
    jag_tensor *buf = NULL, *sz = NULL, *sd = NULL, *so = NULL;
    CHECK_OK(jag_zeros(&four, 1, JAG_FLOAT32, &buf));
    CHECK_OK(jag_empty(tab, 2, JAG_INT64, &sz));
    CHECK_OK(jag_empty(tab, 2, JAG_INT64, &sd));
    CHECK_OK(jag_from_data(&zero, &one, 1, JAG_INT64, &so));
    jag_tensor *inner[4] = {buf, sz, sd, so};
    jag_subclass_meta meta = {.n_ints = 2, .ints = {JAG_STRIDED, 0}};
    CHECK_ERR(jag_subclass_unflatten(jag_subclass_find("nested"), inner, 4, &meta, &out), JAG_EINVAL, "1 <= n < 8");
    CHECK(out == NULL);
    /* from_padded read int64 lengths through a double: INT64_MAX came back
     * out of range (undefined), and 2^53 + 1 as 2^53 */
    int64_t ps[3] = {2, 3, 1}, bad_len[2] = {1, INT64_MAX}, two = 2;
    jag_tensor *padded = NULL, *pl = NULL;
    CHECK_OK(jag_zeros(ps, 3, JAG_FLOAT32, &padded));
    CHECK_OK(jag_from_data(bad_len, &two, 1, JAG_INT64, &pl));
    CHECK_ERR(jag_nested_from_padded(padded, pl, &out), JAG_EINVAL, "entry 1 is 9223372036854775807, expected 0..3");
    CHECK(out == NULL);
    jag_release(padded), jag_release(pl);
    /* an empty tensor whose other sizes multiply past int64: its strides
     * overflowed (and printing it computed offsets from them) */
    int64_t huge[3] = {(int64_t)1 << 40, 0, (int64_t)1 << 40}, small[2] = {3, 0};
    jag_tensor *e = NULL;
    CHECK_ERR(jag_empty(huge, 3, JAG_FLOAT32, &e), JAG_EOVERFLOW, "overflows int64");
    CHECK_OK(jag_empty(small, 2, JAG_FLOAT32, &e));
    char text[128];
    jag_format(e, text, sizeof text);
    CHECK(strcmp(text, "tensor([], dtype=float32, size=[3, 0])") == 0);
    jag_release(e), jag_release(buf), jag_release(sz), jag_release(sd), jag_release(so), jag_release(nt);
    release_all(items, 2);
}

TEST_MAIN(test_fuzz_regressions, test_shared_lengths_different_offsets, test_review_edge_cases, test_from_list_jagged, test_from_list_strided, test_from_list_errors, test_from_jagged_view_and_validation,
          test_int32_offsets_and_lengths, test_holes, test_padding_round_trip, test_layout_conversion, test_unary_pointwise, test_binary_nested_nested,
          test_binary_nested_dense, test_jagged_mm_linear, test_strided_bmm_transpose, test_non_ragged_dims,
          test_unsupported_and_fallback, test_like_factories_and_clone, test_printing, test_flatten_unflatten,
          test_batch_one_and_plain_errors, test_narrow_ragged_start_past_end, test_rules_on_values_keep_the_full_path)
