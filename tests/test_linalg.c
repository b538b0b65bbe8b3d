/* test_linalg.c — mm, bmm, linear (OpenBLAS kernels) and the composite
 * matmul: hand-computed values, the naive references in src/cpu/gemm.c over
 * many layouts and shapes, the no-copy paths, and every error path. */
#include "test.h"

/* Internal (src/cpu/gemm.c): the naive references, and the count of operands
 * the GEMM kernels had to copy because BLAS could not read their layout. */
void jag__ref_mm(const jag_tensor *a, const jag_tensor *b, jag_tensor *out);
void jag__ref_bmm(const jag_tensor *a, const jag_tensor *b, jag_tensor *out);
void jag__ref_linear(const jag_tensor *x, const jag_tensor *w, const jag_tensor *bias, jag_tensor *out);
long jag__gemm_copy_count(void);

static const jag_dtype FLOATS[2] = {JAG_FLOAT32, JAG_FLOAT64};

/* Tolerances against a float64 reference for a sum of k products of values
 * in [-1, 1]: a few ulps per term, far below any real mistake (which is
 * O(0.1) or more). */
static double atol_for(jag_dtype dt, int64_t k) {
    double per = dt == JAG_FLOAT32 ? 1e-6 : 1e-14;
    return per * (double)(k > 1 ? k : 1);
}
static double rtol_for(jag_dtype dt) { return dt == JAG_FLOAT32 ? 1e-5 : 1e-12; }

static void free_blob(void *ctx, void *data) {
    (void)ctx;
    free(data);
}

/* The values of x in a buffer laid out with the given element strides (no
 * overlap), surrounded by NaN/-1 sentinels (0xFF bytes). */
static jag_tensor *t_strided(const jag_tensor *x, const int64_t *strides) {
    int n = jag_ndim(x);
    size_t es = jag_dtype_size(jag_tensor_dtype(x));
    int64_t span = 1;
    if (jag_numel(x) > 0)
        for (int d = 0; d < n; d++) span += (jag_size(x, d) - 1) * strides[d];
    void *buf = malloc((size_t)span * es);
    if (!buf) exit(2);
    memset(buf, 0xFF, (size_t)span * es);
    jag_tensor *t = NULL;
    /* (jag_copy_ rejects stride-0 dims even on an empty tensor: nothing to copy there) */
    if (jag_from_blob(buf, jag_sizes(x), strides, n, jag_tensor_dtype(x), free_blob, NULL, &t) ||
        (jag_numel(x) > 0 && jag_copy_(t, x))) {
        fprintf(stderr, "t_strided: %s\n", jag_last_error());
        exit(2);
    }
    return t;
}

static jag_tensor *t_empty(const int64_t *sizes, int ndim, jag_dtype dt) {
    jag_tensor *t = NULL;
    if (jag_empty(sizes, ndim, dt, &t)) exit(2);
    return t;
}

static jag_tensor *t_expand(const jag_tensor *x, const int64_t *sizes, int ndim) {
    jag_tensor *t = NULL;
    if (jag_expand(x, sizes, ndim, &t)) {
        fprintf(stderr, "t_expand: %s\n", jag_last_error());
        exit(2);
    }
    return t;
}

static jag_tensor *t_clone(const jag_tensor *x) {
    jag_tensor *t = NULL;
    if (jag_clone(x, &t)) exit(2);
    return t;
}

/* ---- mm ----------------------------------------------------------------- */

static void test_mm_hand_values(void) {
    TEST_BEGIN();
    const double A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {7, 8, 9, 10, 11, 12};
    const double C[4] = {58, 64, 139, 154};
    int64_t sa[2] = {2, 3}, sb[2] = {3, 2};
    for (int t = 0; t < 2; t++) {
        jag_tensor *a = t_from(A, sa, 2, FLOATS[t]), *b = t_from(B, sb, 2, FLOATS[t]), *c = NULL;
        CHECK_OK(jag_mm(a, b, &c));
        CHECK(jag_tensor_dtype(c) == FLOATS[t] && jag_ndim(c) == 2 && jag_size(c, 0) == 2 && jag_size(c, 1) == 2);
        CHECK(jag_is_contiguous(c));
        for (int i = 0; i < 4; i++) CHECK(t_get(c, i) == C[i]);
        jag_release(c);
        /* b^T b: (2, 3) @ (3, 2) read through a transposed view of b */
        jag_tensor *bt = NULL, *g = NULL;
        CHECK_OK(jag_transpose(b, 0, 1, &bt));
        CHECK_OK(jag_mm(bt, b, &g));
        const double G[4] = {7 * 7 + 9 * 9 + 11 * 11, 7 * 8 + 9 * 10 + 11 * 12, 7 * 8 + 9 * 10 + 11 * 12,
                             8 * 8 + 10 * 10 + 12 * 12};
        for (int i = 0; i < 4; i++) CHECK(t_get(g, i) == G[i]);
        jag_release(bt), jag_release(g), jag_release(a), jag_release(b);
    }
}

/* The no-copy paths. jag_mm(a, jag_transpose(b)) must hand b's memory to BLAS
 * as CblasTrans. Verified here through the kernel's operand-copy counter
 * (jag__gemm_copy_count, which make_operand/linear bump on every operand
 * copy): it must not move for transposed, sliced, padded and size-1 layouts,
 * and must move for a stride-2 operand that no BLAS layout expresses.
 * jag__live_tensors() would not show it (a copy is released before return);
 * the counter does. */
static void test_mm_transposed_no_copy(void) {
    TEST_BEGIN();
    int64_t sa[2] = {37, 300}, sb[2] = {45, 300};
    for (int t = 0; t < 2; t++) {
        jag_dtype dt = FLOATS[t];
        jag_tensor *a = t_rand(sa, 2, dt, -1, 1, 1), *b = t_rand(sb, 2, dt, -1, 1, 2);
        jag_tensor *bt = NULL, *c = NULL, *bt_c = NULL;
        CHECK_OK(jag_transpose(b, 0, 1, &bt)); /* (300, 45), strides (1, 300) */
        CHECK(!jag_is_contiguous(bt));
        long copies = jag__gemm_copy_count(), live = jag__live_tensors();
        CHECK_OK(jag_mm(a, bt, &c));
        CHECK(jag__gemm_copy_count() == copies);     /* b was not copied */
        CHECK(jag__live_tensors() == live + 1);       /* only the result is new */
        int64_t so[2] = {37, 45};
        jag_tensor *ref = t_empty(so, 2, JAG_FLOAT64);
        jag__ref_mm(a, bt, ref);
        CHECK(t_allclose(c, ref, rtol_for(dt), atol_for(dt, 300)));
        /* the same product from a contiguous copy of b^T gives the same answer */
        CHECK_OK(jag_clone(bt, &bt_c));
        jag_tensor *c2 = NULL;
        CHECK_OK(jag_mm(a, bt_c, &c2));
        CHECK(t_allclose(c, c2, rtol_for(dt), atol_for(dt, 300)));
        /* both operands transposed: (a^T)^T is a, read as CblasTrans twice */
        jag_tensor *at = NULL, *att = NULL, *c3 = NULL, *at_c = NULL;
        CHECK_OK(jag_transpose(a, 0, 1, &at));
        CHECK_OK(jag_clone(at, &at_c));
        CHECK_OK(jag_transpose(at_c, 0, 1, &att)); /* a's values, column-major */
        copies = jag__gemm_copy_count();
        CHECK_OK(jag_mm(att, bt, &c3));
        CHECK(jag__gemm_copy_count() == copies);
        CHECK(t_allclose(c3, ref, rtol_for(dt), atol_for(dt, 300)));
        /* a stride-2 operand is copied, once */
        int64_t st2[2] = {4 * 300, 2};
        jag_tensor *a2 = t_strided(a, st2), *c4 = NULL;
        copies = jag__gemm_copy_count();
        CHECK_OK(jag_mm(a2, bt, &c4));
        CHECK(jag__gemm_copy_count() == copies + 1);
        CHECK(t_allclose(c4, ref, rtol_for(dt), atol_for(dt, 300)));
        jag_release(a), jag_release(b), jag_release(bt), jag_release(c), jag_release(bt_c), jag_release(c2);
        jag_release(at), jag_release(att), jag_release(c3), jag_release(at_c), jag_release(a2), jag_release(c4);
        jag_release(ref);
    }
}

/* 2-d layouts of an (r, c) operand. */
enum { L_ROW, L_COL, L_PADROW, L_PADCOL, L_ODD1, L_STRIDE2, L_COUNT2 };
static const char *L2_NAMES[L_COUNT2] = {"row", "col", "padrow", "padcol", "odd1", "stride2"};

static jag_tensor *layout2(const jag_tensor *x, int kind) {
    int64_t r = jag_size(x, 0), c = jag_size(x, 1), s[2];
    switch (kind) {
    case L_ROW: s[0] = c, s[1] = 1; break;
    case L_COL: s[0] = 1, s[1] = r; break;
    case L_PADROW: s[0] = c + 3, s[1] = 1; break;
    case L_PADCOL: s[0] = 1, s[1] = r + 2; break;
    case L_ODD1: /* arbitrary strides on size-1 dims, row-major otherwise */
        s[0] = r == 1 ? 1000 : c, s[1] = c == 1 ? 77 : 1;
        break;
    default: s[0] = 4 * c, s[1] = 2; break;
    }
    return t_strided(x, s);
}

static void test_mm_vs_reference(void) {
    TEST_BEGIN();
    static const int64_t shapes[][3] = {{2, 3, 4},  {1, 1, 1},  {1, 7, 1},   {7, 1, 5},     {5, 6, 1},
                                        {1, 6, 5},  {0, 3, 4},  {3, 0, 4},   {3, 4, 0},     {0, 0, 0},
                                        {33, 17, 65}, {257, 260, 130},
                                        {96, 40, 512}}; /* (b's rows 512 apart: gemm.c's OpenBLAS route on AVX2) */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si][0], k = shapes[si][1], m = shapes[si][2];
        int64_t sa[2] = {n, k}, sb[2] = {k, m}, so[2] = {n, m};
        for (int t = 0; t < 2; t++) {
            jag_dtype dt = FLOATS[t];
            jag_tensor *a = t_rand(sa, 2, dt, -1, 1, 10 + si), *b = t_rand(sb, 2, dt, -1, 1, 20 + si);
            jag_tensor *ref = t_empty(so, 2, JAG_FLOAT64);
            jag__ref_mm(a, b, ref);
            for (int la = 0; la < L_COUNT2; la++)
                for (int lb = 0; lb < L_COUNT2; lb++) {
                    jag_tensor *av = layout2(a, la), *bv = layout2(b, lb), *c = NULL;
                    long copies = jag__gemm_copy_count();
                    CHECK_OK(jag_mm(av, bv, &c));
                    long made = jag__gemm_copy_count() - copies;
                    CHECK_MSG(c && t_allclose(c, ref, rtol_for(dt), atol_for(dt, k)), "mm %lldx%lldx%lld %s a=%s b=%s",
                              (long long)n, (long long)k, (long long)m, jag_dtype_name(dt), L2_NAMES[la], L2_NAMES[lb]);
                    /* only the stride-2 layout may need a copy, and only when
                     * both its dims exceed 1 */
                    bool empty = n == 0 || k == 0 || m == 0;
                    long expect = 0;
                    if (!empty && la == L_STRIDE2 && n > 1 && k > 1) expect++;
                    if (!empty && lb == L_STRIDE2 && k > 1 && m > 1) expect++;
                    if (la != L_STRIDE2 && lb != L_STRIDE2) CHECK_MSG(made == 0, "%ld copies", made);
                    else if (expect == 2) CHECK_MSG(made == 2, "%ld copies", made);
                    jag_release(av), jag_release(bv), jag_release(c);
                }
            /* k == 0: an empty sum, zeros */
            if (k == 0 && n * m > 0) {
                jag_tensor *c = NULL;
                CHECK_OK(jag_mm(a, b, &c));
                for (int64_t i = 0; i < n * m; i++) CHECK(t_get(c, i) == 0);
                jag_release(c);
            }
            jag_release(a), jag_release(b), jag_release(ref);
        }
    }
}

/* gemm.c's OpenBLAS route for exactly 512 rows with k >= 512 (b's rows
 * 512 floats apart, on AVX2): float32 contiguous against the double
 * reference, and the same product with 513 rows (oneDNN's route) row for
 * row. (Apart from test_mm_vs_reference's layouts: a 512^3 product on
 * every layout pair costs seconds, minutes under valgrind.) */
static void test_mm_512_rows(void) {
    TEST_BEGIN();
    int64_t sa[2] = {513, 512}, sb[2] = {512, 512}, so[2] = {512, 512};
    jag_tensor *a = t_rand(sa, 2, JAG_FLOAT32, -1, 1, 51), *b = t_rand(sb, 2, JAG_FLOAT32, -1, 1, 52);
    jag_tensor *a512 = NULL, *c = NULL, *c513 = NULL, *ref = t_empty(so, 2, JAG_FLOAT64);
    CHECK_OK(jag_narrow(a, 0, 0, 512, &a512));
    jag__ref_mm(a512, b, ref);
    CHECK_OK(jag_mm(a512, b, &c));
    CHECK_OK(jag_mm(a, b, &c513));
    CHECK(c && t_allclose(c, ref, rtol_for(JAG_FLOAT32), atol_for(JAG_FLOAT32, 512)));
    for (int64_t i = 0; c513 && i < 512 * 512; i += 4099) /* the first 512 rows of the 513-row product */
        CHECK_MSG(fabs(t_get(c513, i) - t_get(ref, i)) <= atol_for(JAG_FLOAT32, 512) + 1e-5 * fabs(t_get(ref, i)),
                  "513 rows, element %lld", (long long)i);
    jag_release(a), jag_release(b), jag_release(a512), jag_release(c), jag_release(c513), jag_release(ref);
}

static void test_mm_expanded_operands(void) {
    TEST_BEGIN();
    /* stride-0 operands cannot go to BLAS as they are: they are copied */
    int64_t s1m[2] = {1, 5}, sk1[2] = {4, 1}, skm[2] = {4, 5}, snk[2] = {3, 4}, sn1[2] = {3, 1};
    for (int t = 0; t < 2; t++) {
        jag_dtype dt = FLOATS[t];
        jag_tensor *row = t_rand(s1m, 2, dt, -1, 1, 3), *col = t_rand(sn1, 2, dt, -1, 1, 4);
        jag_tensor *b = t_expand(row, skm, 2), *a = t_expand(col, snk, 2); /* strides (0, 1) and (1, 0) */
        jag_tensor *bc = t_clone(b), *ac = t_clone(a), *c = NULL, *ref = NULL;
        int64_t so[2] = {3, 5};
        ref = t_empty(so, 2, JAG_FLOAT64);
        jag__ref_mm(ac, bc, ref);
        CHECK_OK(jag_mm(a, b, &c));
        CHECK(t_allclose(c, ref, rtol_for(dt), atol_for(dt, 4)));
        jag_release(c);
        /* an expanded column vector (k, 1) -> (k, 1) has stride 0 only on a size-1 dim: no copy */
        jag_tensor *v = t_rand(sk1, 2, dt, -1, 1, 5), *c2 = NULL, *ref2 = NULL;
        int64_t so2[2] = {3, 1};
        ref2 = t_empty(so2, 2, JAG_FLOAT64);
        jag__ref_mm(ac, v, ref2);
        long copies = jag__gemm_copy_count();
        jag_tensor *a_plain = t_clone(a);
        CHECK_OK(jag_mm(a_plain, v, &c2));
        CHECK(jag__gemm_copy_count() == copies);
        CHECK(t_allclose(c2, ref2, rtol_for(dt), atol_for(dt, 4)));
        jag_release(row), jag_release(col), jag_release(a), jag_release(b), jag_release(ac), jag_release(bc);
        jag_release(ref), jag_release(v), jag_release(c2), jag_release(ref2), jag_release(a_plain);
    }
}

static void test_mm_errors(void) {
    TEST_BEGIN();
    int64_t s23[2] = {2, 3}, s34[2] = {3, 4}, s43[2] = {4, 3}, s3[1] = {3}, s234[3] = {2, 3, 4};
    jag_tensor *a = t_rand(s23, 2, JAG_FLOAT32, -1, 1, 1), *b = t_rand(s34, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *b64 = t_rand(s34, 2, JAG_FLOAT64, -1, 1, 3), *bad = t_rand(s43, 2, JAG_FLOAT32, -1, 1, 4);
    jag_tensor *ai = t_rand(s23, 2, JAG_INT32, -5, 5, 5), *bi = t_rand(s34, 2, JAG_INT32, -5, 5, 6);
    jag_tensor *v = t_rand(s3, 1, JAG_FLOAT32, -1, 1, 7), *x3 = t_rand(s234, 3, JAG_FLOAT32, -1, 1, 8);
    jag_tensor *out = NULL;
    long live = jag__live_tensors();
    CHECK_ERR(jag_mm(a, bad, &out), JAG_ESHAPE, "inner sizes differ");
    CHECK(strstr(jag_last_error(), "jag_mm") && strstr(jag_last_error(), "[2, 3]") && strstr(jag_last_error(), "[4, 3]"));
    CHECK_ERR(jag_mm(ai, bi, &out), JAG_EDTYPE, "integer matrix products are not supported");
    CHECK(strstr(jag_last_error(), "int32") != NULL);
    CHECK_ERR(jag_mm(a, b64, &out), JAG_EDTYPE, "argument 'b' has dtype float64, expected float32");
    CHECK_ERR(jag_mm(a, v, &out), JAG_ESHAPE, "argument 'b' has shape [3] (1-d), expected a 2-d matrix");
    CHECK_ERR(jag_mm(x3, b, &out), JAG_ESHAPE, "argument 'a' has shape [2, 3, 4] (3-d)");
    CHECK_ERR(jag_mm(NULL, b, &out), JAG_EINVAL, "NULL");
    CHECK_ERR(jag_mm(a, b, NULL), JAG_EINVAL, "argument 'out' is NULL");
    CHECK(out == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(a), jag_release(b), jag_release(b64), jag_release(bad), jag_release(ai), jag_release(bi);
    jag_release(v), jag_release(x3);
}

/* ---- bmm ---------------------------------------------------------------- */

static void test_bmm_hand_values(void) {
    TEST_BEGIN();
    /* batch 0: [[1,2],[3,4]] @ I = itself; batch 1: [[1,0],[0,2]] @ [[5,6],[7,8]] */
    const double A[8] = {1, 2, 3, 4, 1, 0, 0, 2}, B[8] = {1, 0, 0, 1, 5, 6, 7, 8};
    const double C[8] = {1, 2, 3, 4, 5, 6, 14, 16};
    int64_t s[3] = {2, 2, 2};
    for (int t = 0; t < 2; t++) {
        jag_tensor *a = t_from(A, s, 3, FLOATS[t]), *b = t_from(B, s, 3, FLOATS[t]), *c = NULL;
        CHECK_OK(jag_bmm(a, b, &c));
        CHECK(jag_ndim(c) == 3 && jag_size(c, 0) == 2 && jag_tensor_dtype(c) == FLOATS[t]);
        for (int i = 0; i < 8; i++) CHECK(t_get(c, i) == C[i]);
        jag_release(a), jag_release(b), jag_release(c);
    }
}

/* 3-d layouts of a (B, r, c) operand; L3_EXP is a stride-0 batch (jag_expand
 * of one matrix). */
enum { L3_ROW, L3_COL, L3_BMID, L3_BINNER, L3_PAD, L3_EXP, L3_COUNT };
static const char *L3_NAMES[L3_COUNT] = {"row", "col", "batch-mid", "batch-inner", "pad", "expanded"};

static jag_tensor *layout3(const jag_tensor *x, const jag_tensor *one, int kind) {
    int64_t B = jag_size(x, 0), r = jag_size(x, 1), c = jag_size(x, 2), s[3];
    switch (kind) {
    case L3_ROW: s[0] = r * c, s[1] = c, s[2] = 1; break;
    case L3_COL: s[0] = r * c, s[1] = 1, s[2] = r; break;
    case L3_BMID: s[0] = c, s[1] = B * c, s[2] = 1; break;
    case L3_BINNER: s[0] = 1, s[1] = B, s[2] = B * r; break;
    case L3_PAD: s[0] = r * (c + 2) + 5, s[1] = c + 2, s[2] = 1; break;
    default: return t_expand(one, jag_sizes(x), 3);
    }
    return t_strided(x, s);
}

static void test_bmm_vs_reference(void) {
    TEST_BEGIN();
    static const int64_t shapes[][4] = {{3, 2, 3, 4}, {1, 1, 1, 1}, {0, 2, 3, 4},  {2, 0, 3, 4},    {2, 3, 0, 4},
                                        {2, 3, 4, 0}, {3, 1, 5, 1}, {16, 5, 7, 3}, {2, 129, 130, 131}, {4, 257, 3, 2}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t B = shapes[si][0], n = shapes[si][1], k = shapes[si][2], m = shapes[si][3];
        int64_t sa[3] = {B, n, k}, sb[3] = {B, k, m}, so[3] = {B, n, m}, sa1[3] = {1, n, k}, sb1[3] = {1, k, m};
        for (int t = 0; t < 2; t++) {
            jag_dtype dt = FLOATS[t];
            /* varying batches, and batch-constant ones (for expanded layouts) */
            jag_tensor *a = t_rand(sa, 3, dt, -1, 1, 30 + si), *b = t_rand(sb, 3, dt, -1, 1, 40 + si);
            jag_tensor *a1 = t_rand(sa1, 3, dt, -1, 1, 50 + si), *b1 = t_rand(sb1, 3, dt, -1, 1, 60 + si);
            jag_tensor *ae = t_expand(a1, sa, 3), *be = t_expand(b1, sb, 3);
            jag_tensor *ac = t_clone(ae), *bc = t_clone(be);
            jag_tensor *ref = t_empty(so, 3, JAG_FLOAT64), *ref_c = t_empty(so, 3, JAG_FLOAT64);
            jag__ref_bmm(a, b, ref);
            jag__ref_bmm(ac, bc, ref_c);
            for (int la = 0; la < L3_COUNT; la++)
                for (int lb = 0; lb < L3_COUNT; lb++) {
                    bool constant = la == L3_EXP || lb == L3_EXP;
                    jag_tensor *av = layout3(constant ? ac : a, a1, la), *bv = layout3(constant ? bc : b, b1, lb);
                    jag_tensor *c = NULL;
                    long copies = jag__gemm_copy_count();
                    CHECK_OK(jag_bmm(av, bv, &c));
                    long made = jag__gemm_copy_count() - copies;
                    CHECK_MSG(c && t_allclose(c, constant ? ref_c : ref, rtol_for(dt), atol_for(dt, k)),
                              "bmm %lldx%lldx%lldx%lld %s a=%s b=%s", (long long)B, (long long)n, (long long)k,
                              (long long)m, jag_dtype_name(dt), L3_NAMES[la], L3_NAMES[lb]);
                    if (la != L3_BINNER && lb != L3_BINNER) CHECK_MSG(made == 0, "%ld copies", made);
                    jag_release(av), jag_release(bv), jag_release(c);
                }
            jag_release(a), jag_release(b), jag_release(a1), jag_release(b1), jag_release(ae), jag_release(be);
            jag_release(ac), jag_release(bc), jag_release(ref), jag_release(ref_c);
        }
    }
}

static void test_bmm_errors(void) {
    TEST_BEGIN();
    int64_t s234[3] = {2, 3, 4}, s345[3] = {3, 4, 5}, s245[3] = {2, 4, 5}, s255[3] = {2, 5, 5}, s34[2] = {3, 4};
    jag_tensor *a = t_rand(s234, 3, JAG_FLOAT32, -1, 1, 1), *b = t_rand(s245, 3, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *b3 = t_rand(s345, 3, JAG_FLOAT32, -1, 1, 3), *bk = t_rand(s255, 3, JAG_FLOAT32, -1, 1, 4);
    jag_tensor *m2 = t_rand(s34, 2, JAG_FLOAT32, -1, 1, 5), *b64 = t_rand(s245, 3, JAG_FLOAT64, -1, 1, 6);
    jag_tensor *ai = t_rand(s234, 3, JAG_INT64, -1, 1, 7), *out = NULL;
    CHECK_ERR(jag_bmm(a, b3, &out), JAG_ESHAPE, "batch sizes differ");
    CHECK_ERR(jag_bmm(a, bk, &out), JAG_ESHAPE, "inner sizes differ");
    CHECK_ERR(jag_bmm(a, m2, &out), JAG_ESHAPE, "expected a 3-d batch");
    CHECK_ERR(jag_bmm(a, b64, &out), JAG_EDTYPE, "expected float32 like 'a'");
    CHECK_ERR(jag_bmm(ai, b, &out), JAG_EDTYPE, "int64");
    CHECK(out == NULL);
    jag_release(a), jag_release(b), jag_release(b3), jag_release(bk), jag_release(m2), jag_release(b64);
    jag_release(ai);
}

/* ---- linear ------------------------------------------------------------- */

static void test_linear_hand_values(void) {
    TEST_BEGIN();
    const double X[4] = {1, 2, 3, 4}, W[6] = {1, 0, 0, 1, 1, 1}, BIAS[3] = {10, 20, 30};
    int64_t sx[2] = {2, 2}, sw[2] = {3, 2}, sbias[1] = {3};
    for (int t = 0; t < 2; t++) {
        jag_dtype dt = FLOATS[t];
        jag_tensor *x = t_from(X, sx, 2, dt), *w = t_from(W, sw, 2, dt), *bias = t_from(BIAS, sbias, 1, dt);
        jag_tensor *y = NULL, *y0 = NULL, *y1 = NULL, *x1 = NULL;
        CHECK_OK(jag_linear(x, w, bias, &y));
        const double Y[6] = {11, 22, 33, 13, 24, 37};
        CHECK(jag_ndim(y) == 2 && jag_size(y, 0) == 2 && jag_size(y, 1) == 3);
        for (int i = 0; i < 6; i++) CHECK(t_get(y, i) == Y[i]);
        CHECK_OK(jag_linear(x, w, NULL, &y0));
        const double Y0[6] = {1, 2, 3, 3, 4, 7};
        for (int i = 0; i < 6; i++) CHECK(t_get(y0, i) == Y0[i]);
        /* 1-d x: (2,) -> (3,) */
        CHECK_OK(jag_select(x, 0, 1, &x1));
        CHECK_OK(jag_linear(x1, w, bias, &y1));
        CHECK(jag_ndim(y1) == 1 && jag_size(y1, 0) == 3);
        for (int i = 0; i < 3; i++) CHECK(t_get(y1, i) == Y[3 + i]);
        jag_release(x), jag_release(w), jag_release(bias), jag_release(y), jag_release(y0), jag_release(y1);
        jag_release(x1);
    }
}

/* x layouts: contiguous, sliced (rows padded: leading dims still merge), fully
 * reversed (leading dims do not merge: copied), and expanded rows. */
static void test_linear_vs_reference(void) {
    TEST_BEGIN();
    static const int64_t xshapes[][4] = {
        /* ndim, sizes... (the last is `in`) */
        {1, 5, 0, 0}, {2, 4, 5, 0}, {3, 2, 3, 5}, {3, 2, 0, 5}, {2, 3, 0, 0}, {2, 1, 1, 0},
        /* on oneDNN's matmul primitive (257 x 260 weights) in two calls:
         * rows 0..287, then the last 16 (rows 284..287 computed twice, the
         * bias put back in between) */
        {2, 300, 257, 0}};
    static const int64_t outs[] = {3, 1, 0, 260};
    for (size_t si = 0; si < sizeof xshapes / sizeof xshapes[0]; si++) {
        int nd = (int)xshapes[si][0];
        int64_t sx[3] = {xshapes[si][1], xshapes[si][2], xshapes[si][3]};
        int64_t in = sx[nd - 1];
        for (size_t oi = 0; oi < sizeof outs / sizeof outs[0]; oi++) {
            int64_t of = outs[oi];
            if ((of == 260) != (in == 257)) continue; /* keep the large case large only with itself */
            int64_t sw[2] = {of, in}, sbias[1] = {of}, sy[3];
            memcpy(sy, sx, sizeof sy);
            sy[nd - 1] = of;
            for (int t = 0; t < 2; t++) {
                jag_dtype dt = FLOATS[t];
                jag_tensor *x = t_rand(sx, nd, dt, -1, 1, 70 + si), *w = t_rand(sw, 2, dt, -1, 1, 80 + oi);
                jag_tensor *bias = t_rand(sbias, 1, dt, -1, 1, 90 + oi);
                jag_tensor *ref = t_empty(sy, nd, JAG_FLOAT64), *ref0 = t_empty(sy, nd, JAG_FLOAT64);
                jag__ref_linear(x, w, bias, ref);
                jag__ref_linear(x, w, NULL, ref0);
                jag_tensor *xs[3] = {jag_retain(x), t_sliced(x), t_noncontig(x)};
                /* w stored transposed (as (in, out)), and w sliced */
                jag_tensor *ws[3] = {jag_retain(w), t_noncontig(w), t_sliced(w)};
                for (int xi = 0; xi < 3; xi++)
                    for (int wi = 0; wi < 3; wi++)
                        for (int hb = 0; hb < 2; hb++) {
                            jag_tensor *y = NULL;
                            long copies = jag__gemm_copy_count();
                            CHECK_OK(jag_linear(xs[xi], ws[wi], hb ? bias : NULL, &y));
                            CHECK_MSG(y && t_allclose(y, hb ? ref : ref0, rtol_for(dt), atol_for(dt, in)),
                                      "linear nd=%d in=%lld out=%lld %s x=%d w=%d bias=%d", nd, (long long)in,
                                      (long long)of, jag_dtype_name(dt), xi, wi, hb);
                            if (xi < 2) CHECK(jag__gemm_copy_count() == copies); /* no copy of x or w */
                            jag_release(y);
                        }
                for (int i = 0; i < 3; i++) jag_release(xs[i]), jag_release(ws[i]);
                jag_release(x), jag_release(w), jag_release(bias), jag_release(ref), jag_release(ref0);
            }
        }
    }
}

static void test_linear_special_operands(void) {
    TEST_BEGIN();
    for (int t = 0; t < 2; t++) {
        jag_dtype dt = FLOATS[t];
        /* expanded x rows (stride 0), strided bias (a column of a matrix) */
        int64_t s1[2] = {1, 6}, sx[2] = {4, 6}, sw[2] = {3, 6}, sbm[2] = {3, 2}, sy[2] = {4, 3};
        jag_tensor *row = t_rand(s1, 2, dt, -1, 1, 1), *w = t_rand(sw, 2, dt, -1, 1, 2);
        jag_tensor *bm = t_rand(sbm, 2, dt, -1, 1, 3), *bias = NULL, *y = NULL;
        jag_tensor *x = t_expand(row, sx, 2), *xc = t_clone(x);
        CHECK_OK(jag_select(bm, 1, 1, &bias)); /* stride 2 */
        CHECK(jag_stride(bias, 0) == 2);
        jag_tensor *ref = t_empty(sy, 2, JAG_FLOAT64);
        jag__ref_linear(xc, w, bias, ref);
        CHECK_OK(jag_linear(x, w, bias, &y));
        CHECK(t_allclose(y, ref, rtol_for(dt), atol_for(dt, 6)));
        jag_release(y);
        /* in == 0: the result is the bias in every row, or zeros */
        int64_t sx0[2] = {3, 0}, sw0[2] = {2, 0}, sb0[1] = {2};
        const double BV[2] = {1.5, -2};
        jag_tensor *x0 = t_empty(sx0, 2, dt), *w0 = t_empty(sw0, 2, dt), *b0 = t_from(BV, sb0, 1, dt);
        CHECK_OK(jag_linear(x0, w0, b0, &y));
        CHECK(jag_size(y, 0) == 3 && jag_size(y, 1) == 2);
        for (int i = 0; i < 6; i++) CHECK(t_get(y, i) == BV[i % 2]);
        jag_release(y);
        CHECK_OK(jag_linear(x0, w0, NULL, &y));
        for (int i = 0; i < 6; i++) CHECK(t_get(y, i) == 0);
        jag_release(y);
        jag_release(row), jag_release(w), jag_release(bm), jag_release(bias), jag_release(x), jag_release(xc);
        jag_release(ref), jag_release(x0), jag_release(w0), jag_release(b0);
    }
}

static void test_linear_errors(void) {
    TEST_BEGIN();
    int64_t sx[2] = {2, 3}, sw[2] = {4, 3}, swb[2] = {4, 5}, sb[1] = {4}, sbb[1] = {5}, s3[1] = {3}, sb2[2] = {1, 4};
    jag_tensor *x = t_rand(sx, 2, JAG_FLOAT32, -1, 1, 1), *w = t_rand(sw, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *wbad = t_rand(swb, 2, JAG_FLOAT32, -1, 1, 3), *bias = t_rand(sb, 1, JAG_FLOAT32, -1, 1, 4);
    jag_tensor *bbad = t_rand(sbb, 1, JAG_FLOAT32, -1, 1, 5), *b64 = t_rand(sb, 1, JAG_FLOAT64, -1, 1, 6);
    jag_tensor *w1 = t_rand(s3, 1, JAG_FLOAT32, -1, 1, 7), *xi = t_rand(sx, 2, JAG_INT32, -3, 3, 8);
    jag_tensor *w64 = t_rand(sw, 2, JAG_FLOAT64, -1, 1, 9), *b2 = t_rand(sb2, 2, JAG_FLOAT32, -1, 1, 10);
    jag_tensor *x0 = NULL, *out = NULL;
    CHECK_OK(jag_full(NULL, 0, 1.0, JAG_FLOAT32, &x0));
    CHECK_ERR(jag_linear(x, wbad, bias, &out), JAG_ESHAPE, "argument 'w' has shape [4, 5], expected (out, 3)");
    CHECK_ERR(jag_linear(x, w, bbad, &out), JAG_ESHAPE, "argument 'bias' has shape [5], expected [4]");
    CHECK_ERR(jag_linear(x, w, b2, &out), JAG_ESHAPE, "argument 'bias' has shape [1, 4], expected [4]");
    CHECK_ERR(jag_linear(x, w, b64, &out), JAG_EDTYPE, "argument 'bias' has dtype float64");
    CHECK_ERR(jag_linear(x, w1, NULL, &out), JAG_ESHAPE, "expected a 2-d weight");
    CHECK_ERR(jag_linear(xi, w, NULL, &out), JAG_EDTYPE, "argument 'x' has dtype int32");
    CHECK_ERR(jag_linear(x, w64, NULL, &out), JAG_EDTYPE, "argument 'w' has dtype float64");
    CHECK_ERR(jag_linear(x0, w, NULL, &out), JAG_ESHAPE, "argument 'x' is 0-d");
    CHECK_ERR(jag_linear(x, NULL, NULL, &out), JAG_EINVAL, "NULL");
    CHECK(out == NULL);
    jag_release(x), jag_release(w), jag_release(wbad), jag_release(bias), jag_release(bbad), jag_release(b64);
    jag_release(w1), jag_release(xi), jag_release(w64), jag_release(b2), jag_release(x0);
}

/* ---- matmul (composite.c) ----------------------------------------------- */

/* Expected matmul of a (..., n, k) and b (..., k, m) already broadcast to a
 * common batch `bat` (nb dims): per batch, the reference mm on selected
 * slices. Both given with full batch dims (expanded views are fine). */
static void check_batched(const jag_tensor *r, const jag_tensor *a, const jag_tensor *b, jag_dtype dt, int64_t k) {
    int nb = jag_ndim(r) - 2;
    int64_t nbat = 1;
    for (int d = 0; d < nb; d++) nbat *= jag_size(r, d);
    for (int64_t q = 0; q < nbat; q++) {
        jag_tensor *as = jag_retain((jag_tensor *)a), *bs = jag_retain((jag_tensor *)b), *rs = jag_retain((jag_tensor *)r);
        int64_t rem = q, idx[JAG_MAX_DIMS];
        for (int d = nb - 1; d >= 0; d--) idx[d] = rem % jag_size(r, d), rem /= jag_size(r, d);
        for (int d = 0; d < nb; d++) {
            jag_tensor *t1 = NULL, *t2 = NULL, *t3 = NULL;
            CHECK_OK(jag_select(as, 0, idx[d], &t1));
            CHECK_OK(jag_select(bs, 0, idx[d], &t2));
            CHECK_OK(jag_select(rs, 0, idx[d], &t3));
            jag_release(as), jag_release(bs), jag_release(rs);
            as = t1, bs = t2, rs = t3;
        }
        int64_t so[2] = {jag_size(rs, 0), jag_size(rs, 1)};
        jag_tensor *ref = t_empty(so, 2, JAG_FLOAT64);
        jag__ref_mm(as, bs, ref);
        CHECK_MSG(t_allclose(rs, ref, rtol_for(dt), atol_for(dt, k)), "batch %lld", (long long)q);
        jag_release(as), jag_release(bs), jag_release(rs), jag_release(ref);
    }
}

static void test_matmul(void) {
    TEST_BEGIN();
    for (int t = 0; t < 2; t++) {
        jag_dtype dt = FLOATS[t];
        /* 1-d @ 1-d: the dot product, 0-d */
        const double U[3] = {1, 2, 3}, V[3] = {4, 5, 6};
        int64_t s3[1] = {3};
        jag_tensor *u = t_from(U, s3, 1, dt), *v = t_from(V, s3, 1, dt), *r = NULL;
        CHECK_OK(jag_matmul(u, v, &r));
        double val = 0;
        CHECK(jag_ndim(r) == 0 && jag_item(r, &val) == JAG_OK && val == 32);
        jag_release(r);
        /* 2-d @ 1-d and 1-d @ 2-d */
        const double M[6] = {1, 2, 3, 4, 5, 6};
        int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
        jag_tensor *m23 = t_from(M, s23, 2, dt), *m32 = t_from(M, s32, 2, dt);
        CHECK_OK(jag_matmul(m23, u, &r));
        CHECK(jag_ndim(r) == 1 && jag_size(r, 0) == 2 && t_get(r, 0) == 14 && t_get(r, 1) == 32);
        jag_release(r);
        CHECK_OK(jag_matmul(u, m32, &r)); /* [1,2,3] @ [[1,2],[3,4],[5,6]] = [22, 28] */
        CHECK(jag_ndim(r) == 1 && jag_size(r, 0) == 2 && t_get(r, 0) == 22 && t_get(r, 1) == 28);
        jag_release(r);
        /* 2-d @ 2-d */
        CHECK_OK(jag_matmul(m23, m32, &r));
        CHECK(jag_ndim(r) == 2 && t_get(r, 0) == 22 && t_get(r, 3) == 64);
        jag_release(r);

        /* (B, n, k) @ (k, m): one folded GEMM */
        int64_t sa[3] = {4, 5, 6}, sb[2] = {6, 7};
        jag_tensor *a = t_rand(sa, 3, dt, -1, 1, 1), *b = t_rand(sb, 2, dt, -1, 1, 2);
        CHECK_OK(jag_matmul(a, b, &r));
        CHECK(jag_ndim(r) == 3 && jag_size(r, 0) == 4 && jag_size(r, 1) == 5 && jag_size(r, 2) == 7);
        int64_t sbe[3] = {4, 6, 7};
        jag_tensor *be = t_expand(b, sbe, 3);
        check_batched(r, a, be, dt, 6);
        jag_release(r);
        /* the same with a non-contiguous batch (copied by reshape) */
        jag_tensor *an = t_noncontig(a);
        CHECK_OK(jag_matmul(an, b, &r));
        check_batched(r, a, be, dt, 6);
        jag_release(r);
        /* (k,) @ (B, k, m) -> (B, m); (B, n, k) @ (k,) -> (B, n) */
        int64_t s6[1] = {6}, s4m[3] = {4, 6, 7};
        jag_tensor *w6 = t_rand(s6, 1, dt, -1, 1, 3), *b3 = t_rand(s4m, 3, dt, -1, 1, 4);
        CHECK_OK(jag_matmul(w6, b3, &r));
        CHECK(jag_ndim(r) == 2 && jag_size(r, 0) == 4 && jag_size(r, 1) == 7);
        {
            jag_tensor *rr = NULL, *w_row = NULL, *w_exp = NULL;
            int64_t s1k[2] = {1, 6}, se[3] = {4, 1, 6}, sr[3] = {4, 1, 7};
            CHECK_OK(jag_view(w6, s1k, 2, &w_row));
            w_exp = t_expand(w_row, se, 3);
            CHECK_OK(jag_view(r, sr, 3, &rr));
            check_batched(rr, w_exp, b3, dt, 6);
            jag_release(rr), jag_release(w_row), jag_release(w_exp);
        }
        jag_release(r);
        CHECK_OK(jag_matmul(a, w6, &r));
        CHECK(jag_ndim(r) == 2 && jag_size(r, 0) == 4 && jag_size(r, 1) == 5);
        {
            jag_tensor *rr = NULL, *w_col = NULL, *w_exp = NULL;
            int64_t sk1[2] = {6, 1}, se[3] = {4, 6, 1}, sr[3] = {4, 5, 1};
            CHECK_OK(jag_view(w6, sk1, 2, &w_col));
            w_exp = t_expand(w_col, se, 3);
            CHECK_OK(jag_view(r, sr, 3, &rr));
            check_batched(rr, a, w_exp, dt, 6);
            jag_release(rr), jag_release(w_col), jag_release(w_exp);
        }
        jag_release(r);

        /* batch broadcasting: (2, 1, n, k) @ (3, k, m) -> (2, 3, n, m) */
        int64_t sA[4] = {2, 1, 5, 4}, sB[3] = {3, 4, 6}, sAe[4] = {2, 3, 5, 4}, sBe[4] = {2, 3, 4, 6};
        jag_tensor *A = t_rand(sA, 4, dt, -1, 1, 5), *Bm = t_rand(sB, 3, dt, -1, 1, 6);
        CHECK_OK(jag_matmul(A, Bm, &r));
        CHECK(jag_ndim(r) == 4 && jag_size(r, 0) == 2 && jag_size(r, 1) == 3 && jag_size(r, 2) == 5 &&
              jag_size(r, 3) == 6);
        jag_tensor *Ae = t_expand(A, sAe, 4), *Be = t_expand(Bm, sBe, 4);
        check_batched(r, Ae, Be, dt, 4);
        jag_release(r);
        /* (n, k) @ (B, k, m): a is broadcast with a stride-0 batch */
        int64_t s54[2] = {5, 4}, s354[3] = {3, 5, 4};
        jag_tensor *a2 = t_rand(s54, 2, dt, -1, 1, 7), *a2e = t_expand(a2, s354, 3);
        CHECK_OK(jag_matmul(a2, Bm, &r));
        CHECK(jag_ndim(r) == 3 && jag_size(r, 0) == 3);
        check_batched(r, a2e, Bm, dt, 4);
        jag_release(r);

        jag_release(u), jag_release(v), jag_release(m23), jag_release(m32), jag_release(a), jag_release(b);
        jag_release(be), jag_release(an), jag_release(w6), jag_release(b3), jag_release(A), jag_release(Bm);
        jag_release(Ae), jag_release(Be), jag_release(a2), jag_release(a2e);
    }
}

static void test_matmul_empty(void) {
    TEST_BEGIN();
    /* empty batch and empty inner dims */
    int64_t s0nk[3] = {0, 2, 3}, s34[2] = {3, 4}, s230[3] = {2, 3, 0}, s0[1] = {0}, s05[2] = {0, 5};
    jag_tensor *a = t_empty(s0nk, 3, JAG_FLOAT32), *b = t_rand(s34, 2, JAG_FLOAT32, -1, 1, 1), *r = NULL;
    CHECK_OK(jag_matmul(a, b, &r));
    CHECK(r && jag_ndim(r) == 3 && jag_size(r, 0) == 0 && jag_size(r, 2) == 4);
    jag_release(r), r = NULL;
    /* (2, 3, 0) @ (0,) -> zeros of shape (2, 3), as torch */
    jag_tensor *e = t_empty(s230, 3, JAG_FLOAT32), *z = t_empty(s0, 1, JAG_FLOAT32);
    CHECK_OK(jag_matmul(e, z, &r));
    CHECK(r && jag_ndim(r) == 2 && jag_size(r, 0) == 2 && jag_size(r, 1) == 3);
    for (int i = 0; r && i < 6; i++) CHECK(t_get(r, i) == 0);
    jag_release(r), r = NULL;
    /* (0,) @ (0, 5) -> zeros (5,) */
    jag_tensor *z5 = t_empty(s05, 2, JAG_FLOAT64), *z64 = t_empty(s0, 1, JAG_FLOAT64);
    CHECK_OK(jag_matmul(z64, z5, &r));
    CHECK(r && jag_ndim(r) == 1 && jag_size(r, 0) == 5 && t_get(r, 4) == 0);
    jag_release(r);
    jag_release(a), jag_release(b), jag_release(e), jag_release(z), jag_release(z5), jag_release(z64);
}

static void test_matmul_errors(void) {
    TEST_BEGIN();
    int64_t s3[1] = {3}, s4[1] = {4}, s23[2] = {2, 3}, s243[3] = {2, 4, 3}, s334[3] = {3, 3, 4}, s2[1] = {2};
    jag_tensor *u = t_rand(s3, 1, JAG_FLOAT32, -1, 1, 1), *v = t_rand(s4, 1, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *m = t_rand(s23, 2, JAG_FLOAT32, -1, 1, 3), *a = t_rand(s243, 3, JAG_FLOAT32, -1, 1, 4);
    jag_tensor *b = t_rand(s334, 3, JAG_FLOAT32, -1, 1, 5), *mi = t_rand(s23, 2, JAG_INT32, -2, 2, 6);
    jag_tensor *ui = t_rand(s3, 1, JAG_INT32, -2, 2, 7), *w2 = t_rand(s2, 1, JAG_FLOAT32, -1, 1, 8);
    jag_tensor *s = NULL, *out = NULL;
    CHECK_OK(jag_full(NULL, 0, 2.0, JAG_FLOAT32, &s));
    long live = jag__live_tensors();
    /* Inner-size and dtype errors come from the inner jag_mm/jag_bmm and so
     * name "jag_mm" with the unsqueezed/folded shapes (e.g. 'b' [4, 1] for a
     * 1-d b of [4]): reported as a bug in composite.c; checked here only by
     * status and the part that will stay. */
    CHECK_ERR(jag_matmul(s, u, &out), JAG_EINVAL, "at least 1 dim");
    CHECK_ERR(jag_matmul(u, v, &out), JAG_ESHAPE, "jag_matmul: inner sizes differ: [3] @ [4] (3 vs 4)");
    CHECK_ERR(jag_matmul(m, v, &out), JAG_ESHAPE, "jag_matmul: inner sizes differ: [2, 3] @ [4] (3 vs 4)");
    CHECK_ERR(jag_matmul(a, w2, &out), JAG_ESHAPE, "jag_matmul: inner sizes differ: [2, 4, 3] @ [2] (3 vs 2)");
    CHECK_ERR(jag_matmul(a, b, &out), JAG_ESHAPE, "do not broadcast");
    CHECK_ERR(jag_matmul(mi, ui, &out), JAG_EDTYPE, "jag_matmul: arguments have dtypes int32 and int32, expected the same float dtype");
    CHECK_ERR(jag_matmul(NULL, u, &out), JAG_EINVAL, "argument 'a' is NULL");
    CHECK_ERR(jag_matmul(u, u, NULL), JAG_EINVAL, "argument 'out' is NULL");
    CHECK(out == NULL);
    CHECK(jag__live_tensors() == live);
    jag_release(u), jag_release(v), jag_release(m), jag_release(a), jag_release(b), jag_release(mi);
    jag_release(ui), jag_release(w2), jag_release(s);
}

/* Scopes record only the final output of a composite. */
static void test_matmul_in_scope(void) {
    TEST_BEGIN();
    int64_t sa[3] = {2, 3, 4}, sb[2] = {4, 5};
    jag_tensor *a = t_rand(sa, 3, JAG_FLOAT32, -1, 1, 1), *b = t_rand(sb, 2, JAG_FLOAT32, -1, 1, 2), *r = NULL;
    long live = jag__live_tensors();
    CHECK_OK(jag_scope_begin());
    CHECK_OK(jag_matmul(a, b, &r));
    CHECK(jag__live_tensors() == live + 1);
    CHECK_OK(jag_scope_end());
    CHECK(jag__live_tensors() == live);
    jag_release(a), jag_release(b);
}


/* META tensors: shapes and dtypes inferred, nothing computed; the same
 * validation errors. */
static jag_tensor *t_meta(const int64_t *sizes, int ndim, jag_dtype dt) {
    jag_tensor *t = NULL;
    if (jag_meta_tensor(sizes, ndim, dt, &t)) exit(2);
    return t;
}

static bool has_shape(const jag_tensor *t, int ndim, const int64_t *sizes) {
    if (!t || jag_ndim(t) != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (jag_size(t, d) != sizes[d]) return false;
    return true;
}

static void test_meta(void) {
    TEST_BEGIN();
    int64_t s23[2] = {2, 3}, s34[2] = {3, 4}, s24[2] = {2, 4}, s523[3] = {5, 2, 3}, s534[3] = {5, 3, 4};
    int64_t s524[3] = {5, 2, 4}, s43[2] = {4, 3}, s4[1] = {4}, s3[1] = {3}, s2[1] = {2};
    jag_tensor *a = t_meta(s23, 2, JAG_FLOAT32), *b = t_meta(s34, 2, JAG_FLOAT32), *r = NULL;
    CHECK_OK(jag_mm(a, b, &r));
    CHECK(has_shape(r, 2, s24) && jag_is_meta(r) && jag_tensor_dtype(r) == JAG_FLOAT32);
    jag_release(r), r = NULL;
    jag_tensor *ba = t_meta(s523, 3, JAG_FLOAT64), *bb = t_meta(s534, 3, JAG_FLOAT64);
    CHECK_OK(jag_bmm(ba, bb, &r));
    CHECK(has_shape(r, 3, s524) && jag_is_meta(r) && jag_tensor_dtype(r) == JAG_FLOAT64);
    jag_release(r), r = NULL;
    CHECK_ERR(jag_matmul(ba, b, &r), JAG_EDTYPE, "dtypes float64 and float32, expected the same float dtype"); /* float64 @ float32 */
    jag_tensor *w = t_meta(s43, 2, JAG_FLOAT32), *bias = t_meta(s4, 1, JAG_FLOAT32), *x = t_meta(s523, 3, JAG_FLOAT32);
    CHECK_OK(jag_linear(x, w, bias, &r));
    CHECK(has_shape(r, 3, s524) && jag_is_meta(r));
    jag_release(r), r = NULL;
    jag_tensor *v = t_meta(s3, 1, JAG_FLOAT32);
    CHECK_OK(jag_matmul(a, v, &r));
    CHECK(has_shape(r, 1, s2) && jag_is_meta(r));
    jag_release(r), r = NULL;
    CHECK_ERR(jag_mm(a, a, &r), JAG_ESHAPE, "inner sizes differ");
    jag_tensor *real = t_rand(s34, 2, JAG_FLOAT32, -1, 1, 1);
    CHECK_ERR(jag_mm(a, real, &r), JAG_EINVAL, "mixes meta tensors");
    CHECK(r == NULL);
    jag_release(a), jag_release(b), jag_release(ba), jag_release(bb), jag_release(w), jag_release(bias);
    jag_release(x), jag_release(v), jag_release(real);
}

/* OpenBLAS's kernels: never its SSE3 fallback on a CPU with AVX2 and FMA
 * (jag re-picks them when OpenBLAS does not know the CPU), unless the user
 * chose a core. */
/* From the OpenBLAS this program links (jag's header does not declare it). */
char *openblas_get_corename(void);

/* OpenBLAS's kernels as blas_core.c corrects them, in a program that links
 * libjag.a and never names jag_blas_core (whose file must be linked in
 * anyway: the correction runs in its constructor). */
static void test_blas_core(void) {
    TEST_BEGIN();
    const char *core = openblas_get_corename();
    CHECK(core && core[0]);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (core && !getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        CHECK_MSG(strcmp(core, "Prescott") != 0, "OpenBLAS runs its %s kernels on a CPU with AVX2", core);
#endif
}

TEST_MAIN(test_meta, test_mm_hand_values, test_mm_transposed_no_copy, test_mm_vs_reference, test_mm_512_rows, test_mm_expanded_operands,
          test_mm_errors, test_bmm_hand_values, test_bmm_vs_reference, test_bmm_errors, test_linear_hand_values,
          test_linear_vs_reference, test_linear_special_operands, test_linear_errors, test_matmul, test_matmul_empty,
          test_matmul_errors, test_matmul_in_scope, test_blas_core)
