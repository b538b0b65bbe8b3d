/* test_index.c — index_select, gather, embedding and cat (and stack, which is
 * built on cat): hand-computed values, the naive references in src/cpu/index.c
 * and src/cpu/cat.c over every dtype and many layouts, and every error path. */
#include "test.h"

/* Internal naive references (src/cpu/index.c, src/cpu/cat.c). */
jag_status jag__ref_index_select(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor *out);
jag_status jag__ref_gather(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor *out);
jag_status jag__ref_embedding(const jag_tensor *weight, const jag_tensor *indices, jag_tensor *out);
void jag__ref_cat(jag_tensor *const *xs, int n, int dim, jag_tensor *out);

static const jag_dtype ALL[5] = {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_BOOL};

static jag_tensor *t_empty(const int64_t *sizes, int ndim, jag_dtype dt) {
    jag_tensor *t = NULL;
    if (jag_empty(sizes, ndim, dt, &t)) exit(2);
    return t;
}

/* Same values, exact comparison (shape and every element). */
static bool t_equal(const jag_tensor *a, const jag_tensor *b) {
    return jag_tensor_dtype(a) == jag_tensor_dtype(b) && t_allclose(a, b, 0, 0);
}

/* Random indices in [0, limit) of the given shape and dtype. */
static jag_tensor *t_indices(const int64_t *sizes, int ndim, jag_dtype dt, int64_t limit, uint64_t seed) {
    return t_rand(sizes, ndim, dt, 0, (double)limit, seed);
}

/* A 1-d int tensor with stride 2: a column of an (n, 2) tensor. */
static jag_tensor *t_strided_1d(const jag_tensor *x) {
    int64_t s[2] = {jag_size(x, 0), 2};
    jag_tensor *w = NULL, *v = NULL;
    if (jag_full(s, 2, -99, jag_tensor_dtype(x), &w) || jag_select(w, 1, 0, &v) || jag_copy_(v, x)) exit(2);
    jag_release(w);
    return v;
}

/* The layouts of x a kernel must accept: contiguous, reversed, sliced. */
static void layouts(const jag_tensor *x, jag_tensor **out3) {
    out3[0] = jag_retain((jag_tensor *)x);
    out3[1] = t_noncontig(x);
    out3[2] = t_sliced(x);
}

/* ---- index_select ------------------------------------------------------- */

static void test_index_select_hand(void) {
    TEST_BEGIN();
    const double X[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    int64_t sx[2] = {3, 4}, s2[1] = {2}, s3[1] = {3};
    const double I0[2] = {2, 0}, I1[3] = {3, 3, 1};
    for (int it = 0; it < 2; it++) {
        jag_dtype idt = it ? JAG_INT64 : JAG_INT32;
        jag_tensor *x = t_from(X, sx, 2, JAG_FLOAT32), *i0 = t_from(I0, s2, 1, idt), *i1 = t_from(I1, s3, 1, idt);
        jag_tensor *y = NULL;
        CHECK_OK(jag_index_select(x, 0, i0, &y));
        const double Y0[8] = {8, 9, 10, 11, 0, 1, 2, 3};
        CHECK(jag_ndim(y) == 2 && jag_size(y, 0) == 2 && jag_size(y, 1) == 4);
        for (int i = 0; i < 8; i++) CHECK(t_get(y, i) == Y0[i]);
        jag_release(y);
        CHECK_OK(jag_index_select(x, -1, i1, &y));
        const double Y1[9] = {3, 3, 1, 7, 7, 5, 11, 11, 9};
        CHECK(jag_size(y, 0) == 3 && jag_size(y, 1) == 3);
        for (int i = 0; i < 9; i++) CHECK(t_get(y, i) == Y1[i]);
        jag_release(y);
        jag_release(x), jag_release(i0), jag_release(i1);
    }
}

static void test_index_select_vs_reference(void) {
    TEST_BEGIN();
    static const int64_t shapes[][4] = {{1, 7, 0, 0}, {2, 5, 6, 0}, {3, 3, 4, 5}, {3, 2, 1, 3}, {3, 4, 0, 3}, {2, 300, 220, 0}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int nd = (int)shapes[si][0];
        const int64_t *sx = &shapes[si][1];
        for (int di = 0; di < 5; di++) {
            jag_dtype dt = ALL[di];
            if (sx[0] == 300 && dt != JAG_FLOAT32 && dt != JAG_INT64) continue; /* large: 4- and 8-byte only */
            jag_tensor *x = t_rand(sx, nd, dt, -50, 50, 100 + si);
            jag_tensor *xl[3];
            layouts(x, xl);
            for (int dim = -nd; dim < nd; dim++) {
                int d = dim < 0 ? dim + nd : dim;
                if (sx[d] == 0) continue; /* no valid index into an empty dim */
                static const int64_t lens[3] = {0, 1, 9};
                for (int li = 0; li < 3; li++) {
                    int64_t L = lens[li] + (sx[0] == 300 ? 400 : 0); /* a large case for the parallel path */
                    for (int it = 0; it < 2; it++) {
                        jag_dtype idt = it ? JAG_INT64 : JAG_INT32;
                        jag_tensor *ix = t_indices(&L, 1, idt, sx[d], 7 * si + li), *ixs = t_strided_1d(ix);
                        int64_t so[JAG_MAX_DIMS];
                        memcpy(so, sx, (size_t)nd * sizeof *so);
                        so[d] = L;
                        jag_tensor *ref = t_empty(so, nd, dt);
                        CHECK_OK(jag__ref_index_select(x, d, ix, ref));
                        for (int l = 0; l < 3; l++)
                            for (int s = 0; s < 2; s++) {
                                jag_tensor *y = NULL;
                                CHECK_OK(jag_index_select(xl[l], dim, s ? ixs : ix, &y));
                                CHECK_MSG(y && t_equal(y, ref), "shape %d dtype %s dim %d L %lld layout %d strided %d",
                                          (int)si, jag_dtype_name(dt), dim, (long long)L, l, s);
                                jag_release(y);
                            }
                        jag_release(ix), jag_release(ixs), jag_release(ref);
                    }
                }
            }
            for (int l = 0; l < 3; l++) jag_release(xl[l]);
            jag_release(x);
        }
    }
}

static void test_index_select_special(void) {
    TEST_BEGIN();
    /* expanded x (stride 0) */
    int64_t s1[2] = {1, 4}, sx[2] = {5, 4}, s3[1] = {3};
    const double R[4] = {1, 2, 3, 4}, I[3] = {4, 0, 2};
    jag_tensor *row = t_from(R, s1, 2, JAG_FLOAT64), *x = NULL, *ix = t_from(I, s3, 1, JAG_INT64), *y = NULL;
    CHECK_OK(jag_expand(row, sx, 2, &x));
    CHECK_OK(jag_index_select(x, 0, ix, &y));
    CHECK(jag_size(y, 0) == 3);
    for (int i = 0; i < 12; i++) CHECK(t_get(y, i) == R[i % 4]);
    jag_release(y), y = NULL;
    CHECK_ERR(jag_index_select(x, 1, ix, &y), JAG_ERANGE, "value 4 at position [0], expected 0 <= value < 4");
    CHECK(y == NULL);
    /* a 0-d index keeps the dim, with size 1 */
    jag_tensor *i0 = NULL;
    CHECK_OK(jag_full(NULL, 0, 3, JAG_INT32, &i0));
    CHECK_OK(jag_index_select(x, 1, i0, &y));
    CHECK(jag_ndim(y) == 2 && jag_size(y, 0) == 5 && jag_size(y, 1) == 1 && t_get(y, 4) == 4);
    jag_release(y), y = NULL;
    /* a 0-d x with one index 0 */
    jag_tensor *s = NULL, *z = NULL, *one = NULL;
    int64_t s1d[1] = {1};
    CHECK_OK(jag_full(NULL, 0, 7.5, JAG_FLOAT32, &s));
    CHECK_OK(jag_zeros(s1d, 1, JAG_INT64, &one));
    CHECK_OK(jag_index_select(s, 0, one, &z));
    double v = 0;
    CHECK(jag_ndim(z) == 0 && jag_item(z, &v) == JAG_OK && v == 7.5);
    jag_release(z);
    /* int64 values beyond 2^53 are copied bit-exactly */
    int64_t big[2] = {INT64_MAX, INT64_MIN + 1}, s2[1] = {2};
    jag_tensor *xb = NULL, *yb = NULL;
    CHECK_OK(jag_from_data(big, s2, 1, JAG_INT64, &xb));
    const double J[3] = {1, 0, 1};
    jag_tensor *jb = t_from(J, s3, 1, JAG_INT32);
    CHECK_OK(jag_index_select(xb, 0, jb, &yb));
    const int64_t *pb = jag_data(yb);
    CHECK(pb[0] == INT64_MIN + 1 && pb[1] == INT64_MAX && pb[2] == INT64_MIN + 1);
    jag_release(row), jag_release(x), jag_release(ix), jag_release(i0), jag_release(s), jag_release(one);
    jag_release(xb), jag_release(yb), jag_release(jb);
}

static void test_index_select_errors(void) {
    TEST_BEGIN();
    int64_t sx[2] = {3, 4}, s2[1] = {2}, s22[2] = {2, 2}, s0[2] = {0, 4};
    const double BAD[2] = {1, 5}, NEG[2] = {0, -1}, OK2[2] = {0, 1};
    jag_tensor *x = t_rand(sx, 2, JAG_FLOAT32, -1, 1, 1), *bad = t_from(BAD, s2, 1, JAG_INT64);
    jag_tensor *neg = t_from(NEG, s2, 1, JAG_INT32), *fi = t_from(OK2, s2, 1, JAG_FLOAT32);
    jag_tensor *bi = t_from(OK2, s2, 1, JAG_BOOL), *i2 = t_indices(s22, 2, JAG_INT64, 3, 2);
    jag_tensor *ok = t_from(OK2, s2, 1, JAG_INT64), *e = t_empty(s0, 2, JAG_FLOAT32), *y = NULL;
    jag_tensor *s = NULL;
    CHECK_OK(jag_full(NULL, 0, 1, JAG_FLOAT32, &s));
    long live = jag__live_tensors();
    CHECK_ERR(jag_index_select(x, 1, bad, &y), JAG_ERANGE, "argument 'index' has value 5 at position [1]");
    CHECK(strstr(jag_last_error(), "jag_index_select") && strstr(jag_last_error(), "< 4"));
    CHECK_ERR(jag_index_select(x, 0, neg, &y), JAG_ERANGE, "negative indices are not supported");
    CHECK(strstr(jag_last_error(), "value -1 at position [1]") != NULL);
    CHECK_ERR(jag_index_select(x, 0, fi, &y), JAG_EDTYPE, "argument 'index' has dtype float32, expected int32 or int64");
    CHECK_ERR(jag_index_select(x, 0, bi, &y), JAG_EDTYPE, "dtype bool");
    CHECK_ERR(jag_index_select(x, 0, i2, &y), JAG_ESHAPE, "expected a 1-d tensor of indices");
    CHECK_ERR(jag_index_select(x, 2, ok, &y), JAG_ERANGE, "argument 'dim' is 2");
    CHECK_ERR(jag_index_select(e, 0, ok, &y), JAG_ERANGE, "value 0 at position [0], expected 0 <= value < 0");
    CHECK_ERR(jag_index_select(s, 0, ok, &y), JAG_ESHAPE, "exactly 1 value, got 2");
    CHECK_ERR(jag_index_select(x, 0, NULL, &y), JAG_EINVAL, "NULL");
    CHECK(y == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(x), jag_release(bad), jag_release(neg), jag_release(fi), jag_release(bi), jag_release(i2);
    jag_release(ok), jag_release(e), jag_release(s);
}

/* ---- gather ------------------------------------------------------------- */

static void test_gather_hand(void) {
    TEST_BEGIN();
    const double X[4] = {1, 2, 3, 4}, I1[4] = {0, 0, 1, 0}, I0[4] = {0, 1, 1, 0};
    int64_t s[2] = {2, 2};
    for (int it = 0; it < 2; it++) {
        jag_dtype idt = it ? JAG_INT64 : JAG_INT32;
        jag_tensor *x = t_from(X, s, 2, JAG_INT32), *i1 = t_from(I1, s, 2, idt), *i0 = t_from(I0, s, 2, idt), *y = NULL;
        CHECK_OK(jag_gather(x, 1, i1, &y));
        const double Y1[4] = {1, 1, 4, 3};
        CHECK(jag_tensor_dtype(y) == JAG_INT32);
        for (int i = 0; i < 4; i++) CHECK(t_get(y, i) == Y1[i]);
        jag_release(y);
        CHECK_OK(jag_gather(x, 0, i0, &y));
        const double Y0[4] = {1, 4, 3, 2};
        for (int i = 0; i < 4; i++) CHECK(t_get(y, i) == Y0[i]);
        jag_release(y);
        jag_release(x), jag_release(i1), jag_release(i0);
    }
}

static void test_gather_vs_reference(void) {
    TEST_BEGIN();
    /* x shape, and for the index: sizes no larger outside dim (dim's is free) */
    static const int64_t xs[][4] = {{1, 6, 0, 0}, {2, 4, 5, 0}, {3, 3, 4, 5}, {3, 2, 1, 4}, {2, 200, 300, 0}};
    for (size_t si = 0; si < sizeof xs / sizeof xs[0]; si++) {
        int nd = (int)xs[si][0];
        const int64_t *sx = &xs[si][1];
        for (int di = 0; di < 5; di++) {
            jag_dtype dt = ALL[di];
            if (sx[0] == 200 && dt != JAG_FLOAT32 && dt != JAG_INT64) continue; /* large: 4- and 8-byte only */
            jag_tensor *x = t_rand(sx, nd, dt, -50, 50, 200 + si), *xl[3];
            layouts(x, xl);
            for (int d = 0; d < nd; d++)
                for (int variant = 0; variant < 3; variant++) {
                    /* 0: index as big as x; 1: smaller outside dim, larger along it; 2: empty */
                    int64_t si_[JAG_MAX_DIMS];
                    for (int e = 0; e < nd; e++) {
                        si_[e] = sx[e];
                        if (variant == 1) si_[e] = e == d ? sx[e] + 3 : (sx[e] + 1) / 2;
                        if (variant == 2 && e == d) si_[e] = 0;
                    }
                    for (int it = 0; it < 2; it++) {
                        jag_dtype idt = it ? JAG_INT64 : JAG_INT32;
                        jag_tensor *ix = t_indices(si_, nd, idt, sx[d], 300 + d + variant), *ixn = t_noncontig(ix);
                        jag_tensor *ref = t_empty(si_, nd, dt);
                        CHECK_OK(jag__ref_gather(x, d, ix, ref));
                        for (int l = 0; l < 3; l++)
                            for (int s = 0; s < 2; s++) {
                                jag_tensor *y = NULL;
                                CHECK_OK(jag_gather(xl[l], d - (s ? nd : 0), s ? ixn : ix, &y));
                                CHECK_MSG(y && t_equal(y, ref), "gather shape %d %s dim %d variant %d layout %d idx %d",
                                          (int)si, jag_dtype_name(dt), d, variant, l, s);
                                jag_release(y);
                            }
                        jag_release(ix), jag_release(ixn), jag_release(ref);
                    }
                }
            for (int l = 0; l < 3; l++) jag_release(xl[l]);
            jag_release(x);
        }
    }
    /* 0-d x and index */
    jag_tensor *s = NULL, *i = NULL, *y = NULL;
    CHECK_OK(jag_full(NULL, 0, -3, JAG_INT64, &s));
    CHECK_OK(jag_full(NULL, 0, 0, JAG_INT64, &i));
    CHECK_OK(jag_gather(s, 0, i, &y));
    double v = 0;
    CHECK(jag_ndim(y) == 0 && jag_item(y, &v) == JAG_OK && v == -3);
    jag_release(s), jag_release(i), jag_release(y);
}

static void test_gather_errors(void) {
    TEST_BEGIN();
    int64_t sx[2] = {3, 4}, s1[1] = {3}, sbig[2] = {4, 2}, s32[2] = {3, 2};
    const double BAD[6] = {0, 1, 2, 3, 0, 4};
    jag_tensor *x = t_rand(sx, 2, JAG_FLOAT64, -1, 1, 1), *i1 = t_indices(s1, 1, JAG_INT64, 3, 2);
    jag_tensor *ibig = t_indices(sbig, 2, JAG_INT64, 3, 3), *bad = t_from(BAD, s32, 2, JAG_INT32);
    jag_tensor *fi = t_from(BAD, s32, 2, JAG_FLOAT64), *y = NULL;
    long live = jag__live_tensors();
    CHECK_ERR(jag_gather(x, 1, i1, &y), JAG_ESHAPE, "argument 'index' has shape [3] (1-d), expected 2 dims");
    CHECK_ERR(jag_gather(x, 1, ibig, &y), JAG_ESHAPE, "at dim 0 (4 > 3); only dim 1 may be larger");
    CHECK_ERR(jag_gather(x, 1, bad, &y), JAG_ERANGE, "argument 'index' has value 4 at position [2, 1]");
    CHECK_ERR(jag_gather(x, 0, bad, &y), JAG_ERANGE, "value 3 at position [1, 1], expected 0 <= value < 3");
    CHECK_ERR(jag_gather(x, 1, fi, &y), JAG_EDTYPE, "expected int32 or int64");
    CHECK_ERR(jag_gather(x, -3, bad, &y), JAG_ERANGE, "argument 'dim'");
    CHECK(y == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(x), jag_release(i1), jag_release(ibig), jag_release(bad), jag_release(fi);
}

/* ---- embedding ---------------------------------------------------------- */

static void test_embedding_hand(void) {
    TEST_BEGIN();
    const double W[12] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, I[4] = {1, 3, 0, 0};
    int64_t sw[2] = {4, 3}, si[2] = {2, 2};
    jag_tensor *w = t_from(W, sw, 2, JAG_FLOAT32), *ix = t_from(I, si, 2, JAG_INT64), *y = NULL;
    CHECK_OK(jag_embedding(w, ix, &y));
    CHECK(jag_ndim(y) == 3 && jag_size(y, 0) == 2 && jag_size(y, 1) == 2 && jag_size(y, 2) == 3);
    const double Y[12] = {10, 11, 12, 30, 31, 32, 0, 1, 2, 0, 1, 2};
    for (int i = 0; i < 12; i++) CHECK(t_get(y, i) == Y[i]);
    jag_release(y);
    /* 0-d indices: one row, shape (D) */
    jag_tensor *i0 = NULL;
    CHECK_OK(jag_full(NULL, 0, 2, JAG_INT32, &i0));
    CHECK_OK(jag_embedding(w, i0, &y));
    CHECK(jag_ndim(y) == 1 && jag_size(y, 0) == 3 && t_get(y, 0) == 20 && t_get(y, 2) == 22);
    jag_release(y);
    jag_release(w), jag_release(ix), jag_release(i0);
}

static void test_embedding_vs_reference(void) {
    TEST_BEGIN();
    static const int64_t ws[][2] = {{5, 3}, {1, 1}, {7, 1}, {4, 0}, {1000, 64}};
    static const int64_t is[][4] = {{1, 6, 0, 0}, {2, 3, 4, 0}, {3, 2, 2, 3}, {1, 0, 0, 0}, {2, 40, 30, 0}};
    for (size_t wi = 0; wi < sizeof ws / sizeof ws[0]; wi++)
        for (size_t ii = 0; ii < sizeof is / sizeof is[0]; ii++) {
            int ni = (int)is[ii][0];
            int64_t so[JAG_MAX_DIMS];
            memcpy(so, &is[ii][1], (size_t)ni * sizeof *so);
            so[ni] = ws[wi][1];
            for (int di = 0; di < 5; di++) {
                jag_dtype dt = ALL[di];
                bool large = ws[wi][0] == 1000 || is[ii][1] == 40;
                if (large && dt != JAG_FLOAT32 && dt != JAG_INT64) continue; /* large: 4- and 8-byte only */
                jag_tensor *w = t_rand(ws[wi], 2, dt, -9, 9, 400 + wi), *wl[3];
                layouts(w, wl);
                for (int it = 0; it < 2; it++) {
                    jag_dtype idt = it ? JAG_INT64 : JAG_INT32;
                    jag_tensor *ix = t_indices(&is[ii][1], ni, idt, ws[wi][0], 500 + ii), *ixn = t_noncontig(ix);
                    jag_tensor *ref = t_empty(so, ni + 1, dt);
                    CHECK_OK(jag__ref_embedding(w, ix, ref));
                    for (int l = 0; l < 3; l++)
                        for (int s = 0; s < 2; s++) {
                            jag_tensor *y = NULL;
                            CHECK_OK(jag_embedding(wl[l], s ? ixn : ix, &y));
                            CHECK_MSG(y && t_equal(y, ref), "embedding w %d idx %d %s layout %d", (int)wi, (int)ii,
                                      jag_dtype_name(dt), l);
                            jag_release(y);
                        }
                    jag_release(ix), jag_release(ixn), jag_release(ref);
                }
                for (int l = 0; l < 3; l++) jag_release(wl[l]);
                jag_release(w);
            }
        }
}

static void test_embedding_errors(void) {
    TEST_BEGIN();
    int64_t sw[2] = {4, 3}, s1[1] = {4}, s2[1] = {2}, s8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const double BAD[2] = {3, 4}, NEG[2] = {-2, 0};
    jag_tensor *w = t_rand(sw, 2, JAG_FLOAT32, -1, 1, 1), *w1 = t_rand(s1, 1, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *bad = t_from(BAD, s2, 1, JAG_INT64), *neg = t_from(NEG, s2, 1, JAG_INT32);
    jag_tensor *fi = t_from(BAD, s2, 1, JAG_FLOAT32), *i8 = NULL, *y = NULL;
    CHECK_OK(jag_zeros(s8, 8, JAG_INT64, &i8));
    long live = jag__live_tensors();
    CHECK_ERR(jag_embedding(w, bad, &y), JAG_ERANGE, "argument 'indices' has value 4 at position [1]");
    CHECK(strstr(jag_last_error(), "rows of 'weight'") != NULL);
    CHECK_ERR(jag_embedding(w, neg, &y), JAG_ERANGE, "negative indices are not supported");
    CHECK_ERR(jag_embedding(w, fi, &y), JAG_EDTYPE, "argument 'indices' has dtype float32");
    CHECK_ERR(jag_embedding(w1, bad, &y), JAG_ESHAPE, "expected a 2-d table (V, D)");
    CHECK_ERR(jag_embedding(w, i8, &y), JAG_ESHAPE, "expected at most 7");
    CHECK_ERR(jag_embedding(NULL, bad, &y), JAG_EINVAL, "NULL");
    CHECK(y == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(w), jag_release(w1), jag_release(bad), jag_release(neg), jag_release(fi), jag_release(i8);
}

/* ---- cat and stack ------------------------------------------------------ */

static void test_cat_hand(void) {
    TEST_BEGIN();
    const double A[2] = {1, 2}, B[4] = {3, 4, 5, 6};
    int64_t sa[2] = {1, 2}, sb[2] = {2, 2};
    jag_tensor *a = t_from(A, sa, 2, JAG_INT32), *b = t_from(B, sb, 2, JAG_FLOAT32), *y = NULL;
    jag_tensor *xs[2] = {a, b};
    CHECK_OK(jag_cat(xs, 2, 0, &y));
    CHECK(jag_tensor_dtype(y) == JAG_FLOAT32 && jag_size(y, 0) == 3 && jag_size(y, 1) == 2);
    for (int i = 0; i < 6; i++) CHECK(t_get(y, i) == i + 1);
    jag_release(y);
    /* along dim -1: [[1, 2]] and b's first row [[3, 4]] -> [[1, 2, 3, 4]] */
    jag_tensor *b0 = NULL;
    CHECK_OK(jag_narrow(b, 0, 0, 1, &b0));
    jag_tensor *ys[2] = {a, b0};
    CHECK_OK(jag_cat(ys, 2, -1, &y));
    CHECK(jag_size(y, 0) == 1 && jag_size(y, 1) == 4);
    const double Y[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++) CHECK(t_get(y, i) == Y[i]);
    jag_release(y);
    /* promotion: bool + int64 -> int64 */
    const double BB[2] = {1, 0};
    jag_tensor *bo = t_from(BB, sa, 2, JAG_BOOL), *i64 = t_from(A, sa, 2, JAG_INT64);
    jag_tensor *zs[2] = {bo, i64};
    CHECK_OK(jag_cat(zs, 2, 0, &y));
    CHECK(jag_tensor_dtype(y) == JAG_INT64 && t_get(y, 0) == 1 && t_get(y, 1) == 0 && t_get(y, 3) == 2);
    jag_release(y);
    /* one tensor: a copy */
    CHECK_OK(jag_cat(&b, 1, 0, &y));
    CHECK(t_equal(y, b) && !jag_shares_storage(y, b));
    jag_release(y);
    jag_release(a), jag_release(b), jag_release(b0), jag_release(bo), jag_release(i64);
}

/* torch's legacy rule: 1-d tensors of shape [0] are skipped. */
static void test_cat_skips_empty_1d(void) {
    TEST_BEGIN();
    int64_t s0[1] = {0}, s23[2] = {2, 3}, s03[2] = {0, 3};
    jag_tensor *e = t_empty(s0, 1, JAG_FLOAT64), *x = t_rand(s23, 2, JAG_FLOAT32, -1, 1, 1), *y = NULL;
    jag_tensor *xs[3] = {e, x, e};
    CHECK_OK(jag_cat(xs, 3, 1, &y)); /* dim 1 is valid for x, not for e */
    CHECK(jag_ndim(y) == 2 && jag_size(y, 0) == 2 && jag_size(y, 1) == 3);
    CHECK(jag_tensor_dtype(y) == JAG_FLOAT64); /* the skipped tensor still promotes */
    CHECK(t_allclose(y, x, 0, 0));
    jag_release(y);
    /* building a list from an empty placeholder along dim 0 */
    jag_tensor *ys[2] = {e, x};
    CHECK_OK(jag_cat(ys, 2, 0, &y));
    CHECK(jag_size(y, 0) == 2 && jag_size(y, 1) == 3);
    jag_release(y);
    /* every tensor skipped: an empty 1-d result */
    jag_tensor *es[2] = {e, e};
    CHECK_OK(jag_cat(es, 2, 0, &y));
    CHECK(jag_ndim(y) == 1 && jag_size(y, 0) == 0 && jag_tensor_dtype(y) == JAG_FLOAT64);
    jag_release(y);
    /* a 2-d empty tensor is NOT skipped: its other sizes must match */
    jag_tensor *e2 = t_empty(s03, 2, JAG_FLOAT32);
    jag_tensor *zs[2] = {e2, x};
    CHECK_OK(jag_cat(zs, 2, 0, &y));
    CHECK(jag_size(y, 0) == 2 && t_allclose(y, x, 0, 0));
    jag_release(y), y = NULL;
    CHECK_ERR(jag_cat(zs, 2, 1, &y), JAG_ESHAPE, "differ at dim 0");
    CHECK(y == NULL);
    jag_release(e), jag_release(x), jag_release(e2);
}

static void test_cat_vs_reference(void) {
    TEST_BEGIN();
    int64_t base[3] = {3, 4, 5};
    static const int64_t along[4] = {2, 3, 0, 7};
    for (int d = 0; d < 3; d++)
        for (int di = 0; di < 5; di++) {
            jag_dtype dt = ALL[di];
            jag_tensor *parts[4], *views[4];
            int64_t so[3] = {base[0], base[1], base[2]};
            so[d] = 0;
            for (int i = 0; i < 4; i++) {
                int64_t s[3] = {base[0], base[1], base[2]};
                s[d] = along[i];
                so[d] += along[i];
                /* mixed dtypes: the middle part is int32 */
                parts[i] = t_rand(s, 3, i == 1 ? JAG_INT32 : dt, -20, 20, 600 + 10 * d + i);
            }
            views[0] = t_noncontig(parts[0]), views[1] = t_sliced(parts[1]), views[2] = jag_retain(parts[2]);
            views[3] = t_noncontig(parts[3]);
            jag_dtype odt = jag_promote_types(dt, JAG_INT32);
            jag_tensor *ref = t_empty(so, 3, odt), *y = NULL, *y2 = NULL;
            jag__ref_cat(parts, 4, d, ref);
            CHECK_OK(jag_cat(parts, 4, d, &y));
            CHECK_MSG(y && t_equal(y, ref), "cat dim %d %s", d, jag_dtype_name(dt));
            CHECK_OK(jag_cat(views, 4, d - 3, &y2));
            CHECK_MSG(y2 && t_equal(y2, ref), "cat views dim %d %s", d, jag_dtype_name(dt));
            jag_release(y), jag_release(y2), jag_release(ref);
            for (int i = 0; i < 4; i++) jag_release(parts[i]), jag_release(views[i]);
        }
    /* large (parallel copies) */
    int64_t sl[2] = {300, 200};
    jag_tensor *l1 = t_rand(sl, 2, JAG_FLOAT32, -1, 1, 1), *l2 = t_rand(sl, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *ls[2] = {l1, l2}, *y = NULL;
    int64_t so[2] = {300, 400};
    jag_tensor *ref = t_empty(so, 2, JAG_FLOAT32);
    jag__ref_cat(ls, 2, 1, ref);
    CHECK_OK(jag_cat(ls, 2, 1, &y));
    CHECK(t_equal(y, ref));
    jag_release(l1), jag_release(l2), jag_release(y), jag_release(ref);
    /* leading size-1 dims (each part one run of the output's bytes): small
     * contiguous parts copied whole, beside a large one, a non-contiguous
     * one and an int32 one converted */
    for (int d = 0; d < 3; d++) {
        int64_t s0[3] = {1, 1, 6}, s1[3] = {1, 1, 6}, s2[3] = {1, 1, 6}, s3[3] = {1, 1, 6};
        s0[d] = 3, s1[d] = d == 2 ? 40000 : 20000, s2[d] = 4, s3[d] = 2;
        jag_tensor *p[4] = {t_rand(s0, 3, JAG_FLOAT32, -1, 1, 31), t_rand(s1, 3, JAG_FLOAT32, -1, 1, 32),
                            t_rand(s2, 3, JAG_FLOAT32, -1, 1, 33), t_rand(s3, 3, JAG_INT32, -9, 9, 34)};
        jag_tensor *q[4] = {jag_retain(p[0]), jag_retain(p[1]), t_noncontig(p[2]), jag_retain(p[3])};
        int64_t so3[3] = {1, 1, 6};
        so3[d] = s0[d] + s1[d] + s2[d] + s3[d];
        jag_tensor *r3 = t_empty(so3, 3, JAG_FLOAT32), *y3 = NULL;
        jag__ref_cat(p, 4, d, r3);
        CHECK_OK(jag_cat(q, 4, d, &y3));
        CHECK_MSG(y3 && t_equal(y3, r3), "cat of runs along dim %d", d);
        jag_release(y3), jag_release(r3);
        for (int i = 0; i < 4; i++) jag_release(p[i]), jag_release(q[i]);
    }
}

static void test_stack(void) {
    TEST_BEGIN();
    const double A[3] = {1, 2, 3}, B[3] = {4, 5, 6};
    int64_t s[1] = {3};
    jag_tensor *a = t_from(A, s, 1, JAG_INT64), *b = t_from(B, s, 1, JAG_INT64), *y = NULL;
    jag_tensor *xs[2] = {a, b};
    CHECK_OK(jag_stack(xs, 2, 0, &y));
    CHECK(jag_size(y, 0) == 2 && jag_size(y, 1) == 3);
    for (int i = 0; i < 6; i++) CHECK(t_get(y, i) == i + 1);
    jag_release(y);
    CHECK_OK(jag_stack(xs, 2, -1, &y));
    const double Y[6] = {1, 4, 2, 5, 3, 6};
    CHECK(jag_size(y, 0) == 3 && jag_size(y, 1) == 2);
    for (int i = 0; i < 6; i++) CHECK(t_get(y, i) == Y[i]);
    jag_release(y);
    jag_release(a), jag_release(b);
}

static void test_cat_errors(void) {
    TEST_BEGIN();
    int64_t s23[2] = {2, 3}, s24[2] = {2, 4}, s3[1] = {3}, s234[3] = {2, 3, 4};
    jag_tensor *a = t_rand(s23, 2, JAG_FLOAT32, -1, 1, 1), *b = t_rand(s24, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *v = t_rand(s3, 1, JAG_FLOAT32, -1, 1, 3), *c = t_rand(s234, 3, JAG_FLOAT32, -1, 1, 4);
    jag_tensor *s = NULL, *y = NULL;
    CHECK_OK(jag_full(NULL, 0, 1, JAG_FLOAT32, &s));
    long live = jag__live_tensors();
    jag_tensor *ab[2] = {a, b}, *av[2] = {a, v}, *ac[2] = {a, c}, *as[2] = {a, s}, *an[2] = {a, NULL};
    CHECK_ERR(jag_cat(ab, 2, 0, &y), JAG_ESHAPE, "tensor 1 of argument 'xs' has shape [2, 4], expected [2, 3]");
    CHECK(strstr(jag_last_error(), "differ at dim 1") != NULL);
    CHECK_OK(jag_cat(ab, 2, 1, &y)); /* ... but fine along dim 1 */
    jag_release(y), y = NULL;
    CHECK_ERR(jag_cat(av, 2, 0, &y), JAG_ESHAPE, "has shape [3] (1-d), expected 2 dims like tensor 0");
    CHECK_ERR(jag_cat(ac, 2, 0, &y), JAG_ESHAPE, "(3-d), expected 2 dims");
    CHECK_ERR(jag_cat(as, 2, 0, &y), JAG_ESHAPE, "tensor 1 of argument 'xs' is 0-d");
    CHECK_ERR(jag_cat(ab, 2, 2, &y), JAG_ERANGE, "argument 'dim' is 2");
    CHECK_ERR(jag_cat(ab, 0, 0, &y), JAG_EINVAL, "argument 'xs' is empty");
    CHECK_ERR(jag_cat(NULL, 2, 0, &y), JAG_EINVAL, "argument 'xs' is empty");
    CHECK_ERR(jag_cat(an, 2, 0, &y), JAG_EINVAL, "jag_cat: tensor 1 of argument 0 is NULL");
    CHECK_ERR(jag_cat(ab, 2, 0, NULL), JAG_EINVAL, "argument 'out' is NULL");
    CHECK(y == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(a), jag_release(b), jag_release(v), jag_release(c), jag_release(s);
}


/* META tensors: shapes and dtypes inferred, nothing computed (index values
 * are unknown, so only the kernels check them). */
static jag_tensor *t_meta(const int64_t *sizes, int ndim, jag_dtype dt) {
    jag_tensor *t = NULL;
    if (jag_meta_tensor(sizes, ndim, dt, &t)) exit(2);
    return t;
}

static void test_meta(void) {
    TEST_BEGIN();
    int64_t sx[2] = {3, 4}, s5[1] = {5}, s22[2] = {2, 2}, s0[1] = {0};
    jag_tensor *x = t_meta(sx, 2, JAG_FLOAT32), *i5 = t_meta(s5, 1, JAG_INT64), *i22 = t_meta(s22, 2, JAG_INT32);
    jag_tensor *e = t_meta(s0, 1, JAG_FLOAT64), *f5 = t_meta(s5, 1, JAG_FLOAT32), *y = NULL;
    CHECK_OK(jag_index_select(x, 1, i5, &y));
    CHECK(y && jag_is_meta(y) && jag_size(y, 0) == 3 && jag_size(y, 1) == 5);
    jag_release(y), y = NULL;
    CHECK_OK(jag_gather(x, 0, i22, &y));
    CHECK(y && jag_is_meta(y) && jag_size(y, 0) == 2 && jag_size(y, 1) == 2 && jag_tensor_dtype(y) == JAG_FLOAT32);
    jag_release(y), y = NULL;
    CHECK_OK(jag_embedding(x, i22, &y));
    CHECK(y && jag_is_meta(y) && jag_ndim(y) == 3 && jag_size(y, 2) == 4);
    jag_release(y), y = NULL;
    jag_tensor *xs[3] = {x, e, x};
    CHECK_OK(jag_cat(xs, 3, 0, &y));
    CHECK(y && jag_is_meta(y) && jag_size(y, 0) == 6 && jag_tensor_dtype(y) == JAG_FLOAT64);
    jag_release(y), y = NULL;
    CHECK_ERR(jag_index_select(x, 0, f5, &y), JAG_EDTYPE, "expected int32 or int64");
    CHECK(y == NULL);
    jag_release(x), jag_release(i5), jag_release(i22), jag_release(e), jag_release(f5);
}

TEST_MAIN(test_meta, test_index_select_hand, test_index_select_vs_reference, test_index_select_special, test_index_select_errors,
          test_gather_hand, test_gather_vs_reference, test_gather_errors, test_embedding_hand,
          test_embedding_vs_reference, test_embedding_errors, test_cat_hand, test_cat_skips_empty_1d,
          test_cat_vs_reference, test_stack, test_cat_errors)
