/* Half-precision matrix products and attention.
 *
 * bfloat16 mm / bmm / linear: the products of bfloat16 values summed in
 * float32 and the result rounded once to bfloat16 (torch's CPU bfloat16 mm,
 * on oneDNN as here). Checked against the exact sum computed here in float64
 * from the widened inputs (a product of two bfloat16 values is exact in
 * float64, and the float64 sum's own error is below 2^-50 of the terms).
 * The bound: float32 summation of K terms (the bias counted as one more)
 * errs by at most gamma_K * S <= 1.01 * K * 2^-24 * S, S = sum |a_p b_p|
 * (Higham, recursive or blocked summation, u = 2^-24); the final rounding to
 * bfloat16 adds at most 2^-8 of the float32 sum (u = 2^-8, to nearest), so
 *     |got - ref| <= 2^-8 |ref| + (1 + 2^-8) * 1.01 * K * 2^-24 * S.
 * The inputs are normal numbers well above the subnormal range, where
 * AVX512-BF16's flushing of subnormals would add an absolute error. */
#include "test.h"

#include <stdint.h>

/* a bfloat16 tensor of values in [lo, hi) */
static jag_tensor *bf16_rand(const int64_t *sizes, int ndim, double lo, double hi, uint64_t seed) {
    return t_rand(sizes, ndim, JAG_BFLOAT16, lo, hi, seed);
}

/* element (b, i, j) of a 3-d tensor through the public item API */
static double get3(const jag_tensor *t, int64_t b, int64_t i, int64_t j) {
    int64_t idx[3] = {b, i, j};
    double v = NAN;
    if (jag_item_at(t, idx, &v)) exit(2);
    return v;
}

static double bound(double ref, double sum_abs, int64_t terms) {
    return 0x1p-8 * fabs(ref) + (1 + 0x1p-8) * 1.01 * (double)terms * 0x1p-24 * sum_abs;
}

/* the values of a 2-d tensor as a row-major float64 array (malloc'd) */
static double *dvals(const jag_tensor *t) {
    jag_tensor *d = NULL, *c = NULL;
    if (jag_to_dtype(t, JAG_FLOAT64, &d) || jag_contiguous(d, &c)) exit(2);
    size_t n = (size_t)jag_numel(c);
    double *v = malloc(n * sizeof *v + 1);
    memcpy(v, jag_data(c), n * sizeof *v);
    jag_release(d), jag_release(c);
    return v;
}

/* out (n, m) of mm(a, b) against the float64 sum, element by element */
static bool mm_within_bound(const jag_tensor *a, const jag_tensor *b, const jag_tensor *out) {
    int64_t n = jag_size(a, 0), k = jag_size(a, 1), m = jag_size(b, 1);
    if (jag_tensor_dtype(out) != JAG_BFLOAT16 || jag_size(out, 0) != n || jag_size(out, 1) != m) return false;
    double *av = dvals(a), *bv = dvals(b), *ov = dvals(out);
    bool ok = true;
    for (int64_t i = 0; ok && i < n; i++)
        for (int64_t j = 0; ok && j < m; j++) {
            double ref = 0, s = 0;
            for (int64_t p = 0; p < k; p++) {
                double t = av[i * k + p] * bv[p * m + j];
                ref += t, s += fabs(t);
            }
            double got = ov[i * m + j];
            if (!(fabs(got - ref) <= bound(ref, s, k))) {
                fprintf(stderr, "mm (%lld, %lld): %.9g vs %.9g\n", (long long)i, (long long)j, got, ref);
                ok = false;
            }
        }
    free(av), free(bv), free(ov);
    return ok;
}

/* a view of the transpose of a contiguous (cols, rows) copy of x: x's
 * values, column-major */
static jag_tensor *transposed_layout(const jag_tensor *x) {
    jag_tensor *t = NULL, *c = NULL, *v = NULL;
    if (jag_transpose(x, 0, 1, &t) || jag_contiguous(t, &c) || jag_transpose(c, 0, 1, &v)) exit(2);
    jag_release(t), jag_release(c);
    return v;
}

static void test_bf16_mm_shapes_and_layouts(void) {
    TEST_BEGIN();
    /* n, k, m: square, M = 1, K odd / not a multiple of 32, N odd, K = 1;
     * products of more than 64^3 multiply-adds run on oneDNN, smaller ones
     * on sgemm after widening (the same contract): both kinds here */
    int64_t shapes[][3] = {{64, 64, 64}, {1, 37, 5},     {33, 129, 31},  {7, 1, 3},      {5, 300, 1},
                           {130, 70, 9}, {96, 96, 96},   {1, 1031, 517}, {8, 1024, 257}, {150, 257, 131},
                           {67, 33, 1}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        int64_t sa[2] = {shapes[c][0], shapes[c][1]}, sb[2] = {shapes[c][1], shapes[c][2]};
        jag_tensor *a = bf16_rand(sa, 2, -1, 1, 100 + c), *b = bf16_rand(sb, 2, -1, 1, 200 + c);
        jag_tensor *layouts_a[4] = {jag_retain(a), transposed_layout(a), t_sliced(a), t_noncontig(a)};
        jag_tensor *layouts_b[4] = {jag_retain(b), transposed_layout(b), t_noncontig(b), t_sliced(b)};
        for (int la = 0; la < 4; la++)
            for (int lb = 0; lb < 4; lb++) {
                jag_tensor *out = NULL;
                CHECK_OK(jag_mm(layouts_a[la], layouts_b[lb], &out));
                CHECK_MSG(out && mm_within_bound(a, b, out), "shape %zu, layouts %d/%d", c, la, lb);
                jag_release(out);
            }
        for (int l = 0; l < 4; l++) jag_release(layouts_a[l]), jag_release(layouts_b[l]);
        jag_release(a), jag_release(b);
    }
}

/* the matrix of batch q of a 3-d tensor, as a 2-d view */
static jag_tensor *batch_of(const jag_tensor *x, int64_t q) {
    jag_tensor *v = NULL;
    if (jag_select(x, 0, q, &v)) exit(2);
    return v;
}

static void check_bmm(int64_t B, int64_t n, int64_t k, int64_t m) {
    int64_t sa[3] = {B, n, k}, sb[3] = {B, k, m}, sb1[3] = {1, k, m};
    jag_tensor *a = bf16_rand(sa, 3, -1, 1, 1), *b = bf16_rand(sb, 3, -1, 1, 2), *b1 = bf16_rand(sb1, 3, -1, 1, 3);
    jag_tensor *bx = NULL, *out = NULL, *bt = NULL, *btc = NULL, *btv = NULL;
    /* b broadcast over the batch: stride 0 */
    CHECK_OK(jag_expand(b1, sb, 3, &bx));
    /* b transposed within each batch: (B, m, k) contiguous viewed (B, k, m) */
    CHECK_OK(jag_transpose(b, 1, 2, &bt));
    CHECK_OK(jag_contiguous(bt, &btc));
    CHECK_OK(jag_transpose(btc, 1, 2, &btv));
    const jag_tensor *bs[3] = {b, bx, btv};
    for (int c = 0; c < 3; c++) {
        CHECK_OK(jag_bmm(a, bs[c], &out));
        for (int64_t q = 0; out && q < B; q++) {
            jag_tensor *aq = batch_of(a, q), *bq = batch_of(bs[c], q), *oq = batch_of(out, q);
            CHECK_MSG(mm_within_bound(aq, bq, oq), "case %d batch %lld", c, (long long)q);
            jag_release(aq), jag_release(bq), jag_release(oq);
        }
        jag_release(out), out = NULL;
    }
    CHECK(get3(b, 1, 2, 3) == get3(btv, 1, 2, 3));
    jag_release(a), jag_release(b), jag_release(b1), jag_release(bx), jag_release(bt), jag_release(btc),
        jag_release(btv);
}

static void test_bf16_bmm(void) {
    TEST_BEGIN();
    check_bmm(3, 5, 33, 7);     /* widened to sgemm */
    check_bmm(2, 70, 130, 91);  /* oneDNN */
}

/* linear: x (..., in) w^T + bias against the float64 sum, bias as a term */
static bool linear_within_bound(const jag_tensor *x2, const jag_tensor *w, const jag_tensor *bias,
                                const jag_tensor *out2) {
    int64_t rows = jag_size(x2, 0), in = jag_size(x2, 1), out_f = jag_size(w, 0);
    double *xv = dvals(x2), *wv = dvals(w), *ov = dvals(out2), *bv = bias ? dvals(bias) : NULL;
    bool ok = true;
    for (int64_t r = 0; ok && r < rows; r++)
        for (int64_t j = 0; ok && j < out_f; j++) {
            double ref = bv ? bv[j] : 0, s = fabs(ref);
            for (int64_t p = 0; p < in; p++) {
                double t = xv[r * in + p] * wv[j * in + p];
                ref += t, s += fabs(t);
            }
            double got = ov[r * out_f + j];
            if (!(fabs(got - ref) <= bound(ref, s, in + 1))) {
                fprintf(stderr, "linear (%lld, %lld): %.9g vs %.9g\n", (long long)r, (long long)j, got, ref);
                ok = false;
            }
        }
    free(xv), free(wv), free(ov), free(bv);
    return ok;
}

static void check_linear(int64_t d0, int64_t d1, int64_t in, int64_t out_f) {
    int64_t rows = d0 * d1;
    int64_t sx[3] = {d0, d1, in}, sw[2] = {out_f, in}, s1 = in, s2[2] = {rows, in};
    jag_tensor *x = bf16_rand(sx, 3, -2, 2, 7), *w = bf16_rand(sw, 2, -1, 1, 8), *bias = bf16_rand(&out_f, 1, -1, 1, 9);
    jag_tensor *x1 = bf16_rand(&s1, 1, -2, 2, 10), *wt_store = NULL, *wt = NULL;
    /* w transposed in memory: an (in, out) contiguous tensor viewed (out, in) */
    CHECK_OK(jag_transpose(w, 0, 1, &wt_store));
    jag_tensor *wtc = NULL;
    CHECK_OK(jag_contiguous(wt_store, &wtc));
    CHECK_OK(jag_transpose(wtc, 0, 1, &wt));
    jag_tensor *xs = t_sliced(x), *ws = t_sliced(w), *x2 = NULL;
    CHECK_OK(jag_reshape(x, s2, 2, &x2));
    const jag_tensor *xs_cases[2] = {x, xs};
    const jag_tensor *w_cases[3] = {w, wt, ws};
    for (int cx = 0; cx < 2; cx++)
        for (int cw = 0; cw < 3; cw++)
            for (int cb = 0; cb < 2; cb++) {
                jag_tensor *out = NULL, *o2 = NULL;
                const jag_tensor *bb = cb ? bias : NULL;
                CHECK_OK(jag_linear(xs_cases[cx], w_cases[cw], bb, &out));
                CHECK(out && jag_tensor_dtype(out) == JAG_BFLOAT16 && jag_ndim(out) == 3 && jag_size(out, 2) == out_f);
                if (out) {
                    CHECK_OK(jag_reshape(out, (int64_t[]){rows, out_f}, 2, &o2));
                    CHECK_MSG(linear_within_bound(x2, w, bb, o2), "x %d w %d bias %d", cx, cw, cb);
                }
                jag_release(out), jag_release(o2);
            }
    /* M = 1: a 1-d x */
    jag_tensor *out = NULL, *o2 = NULL, *x12 = NULL;
    CHECK_OK(jag_linear(x1, w, bias, &out));
    CHECK_OK(jag_reshape(out, (int64_t[]){1, out_f}, 2, &o2));
    CHECK_OK(jag_reshape(x1, (int64_t[]){1, in}, 2, &x12));
    CHECK(linear_within_bound(x12, w, bias, o2));
    jag_release(out), jag_release(o2), jag_release(x12);
    jag_release(x), jag_release(w), jag_release(bias), jag_release(x1), jag_release(wt_store), jag_release(wtc),
        jag_release(wt), jag_release(xs), jag_release(ws), jag_release(x2);
}

static void test_bf16_linear(void) {
    TEST_BEGIN();
    check_linear(2, 3, 45, 13);    /* widened to sgemm */
    check_linear(4, 20, 301, 129); /* oneDNN */
    /* oneDNN in two calls of cached row counts, the rows both compute put
     * back before the second adds to the bias: 300 = 288 + the last 16,
     * 637 = 576 + the last 64 */
    check_linear(3, 100, 64, 96);
    check_linear(7, 91, 40, 72);
}

/* the bits of x, for checking that a failing call left it untouched */
static uint16_t *bits_of(const jag_tensor *x) {
    int64_t n = jag_numel(x);
    jag_tensor *c = NULL;
    if (jag_contiguous(x, &c)) exit(2);
    uint16_t *b = malloc((size_t)n * 2);
    memcpy(b, jag_data(c), (size_t)n * 2);
    jag_release(c);
    return b;
}

/* torch refuses mixed dtypes in mm / bmm / linear: "expected ... to have the
 * same dtype" */
static void test_bf16_mixed_dtypes_refused(void) {
    TEST_BEGIN();
    int64_t s[2] = {4, 4}, s3[3] = {2, 4, 4}, n4 = 4;
    jag_tensor *a = bf16_rand(s, 2, -1, 1, 1), *f = t_rand(s, 2, JAG_FLOAT32, -1, 1, 2);
    jag_tensor *h = t_rand(s, 2, JAG_FLOAT16, -1, 1, 3), *a3 = bf16_rand(s3, 3, -1, 1, 4);
    jag_tensor *f3 = t_rand(s3, 3, JAG_FLOAT32, -1, 1, 5), *bf = t_rand(&n4, 1, JAG_FLOAT32, -1, 1, 6);
    uint16_t *before = bits_of(a);
    jag_tensor *out = NULL;
    CHECK_ERR(jag_mm(a, f, &out), JAG_EDTYPE, "jag_mm: argument 'b' has dtype float32, expected bfloat16");
    CHECK_ERR(jag_mm(f, a, &out), JAG_EDTYPE, "jag_mm: argument 'b' has dtype bfloat16, expected float32");
    CHECK_ERR(jag_mm(a, h, &out), JAG_EDTYPE, "jag_mm: argument 'b' has dtype float16, expected bfloat16");
    CHECK_ERR(jag_bmm(a3, f3, &out), JAG_EDTYPE, "jag_bmm: argument 'b' has dtype float32, expected bfloat16");
    CHECK_ERR(jag_linear(a, a, bf, &out), JAG_EDTYPE, "jag_linear: argument 'bias' has dtype float32, expected bfloat16");
    CHECK_ERR(jag_linear(a, f, NULL, &out), JAG_EDTYPE, "jag_linear: argument 'w' has dtype float32");
    CHECK(out == NULL);
    uint16_t *after = bits_of(a);
    CHECK(memcmp(before, after, 32) == 0);
    free(before), free(after);
    jag_release(a), jag_release(f), jag_release(h), jag_release(a3), jag_release(f3), jag_release(bf);
}

/* ---- gradients of bfloat16 linear --------------------------------------- */

/* L = sum(linear(x, w, bias) * c) in float64 on the widened values */
static double loss64(const double *x, const double *w, const double *b, const double *c, int64_t rows, int64_t in,
                     int64_t out_f) {
    double l = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < out_f; j++) {
            double y = b[j];
            for (int64_t p = 0; p < in; p++) y += x[r * in + p] * w[j * in + p];
            l += y * c[r * out_f + j];
        }
    return l;
}

static double *values_of(const jag_tensor *t) {
    int64_t n = jag_numel(t);
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = t_get(t, i);
    return v;
}

/* Each gradient element is one sum: dx = c w (K = out), dw = c^T x
 * (K = rows), dbias = column sums of c (K = rows), rounded once to bfloat16
 * after float32 summation, so the bound above holds with S the sum of the
 * terms' magnitudes, here at most K * max|c| * max|other|. The reference is
 * the central difference of the float64 loss with step 1: L is linear in
 * each parameter, so the difference is exact up to float64 rounding. */
static void test_bf16_linear_gradients(void) {
    TEST_BEGIN();
    int64_t rows = 6, in = 11, out_f = 5;
    int64_t sx[2] = {rows, in}, sw[2] = {out_f, in}, sc[2] = {rows, out_f};
    jag_tensor *x = bf16_rand(sx, 2, -1, 1, 41), *w = bf16_rand(sw, 2, -1, 1, 42);
    jag_tensor *b = bf16_rand(&out_f, 1, -1, 1, 43), *c = bf16_rand(sc, 2, -1, 1, 44);
    CHECK_OK(jag_set_requires_grad(x, true));
    CHECK_OK(jag_set_requires_grad(w, true));
    CHECK_OK(jag_set_requires_grad(b, true));
    jag_tensor *y = NULL, *yc = NULL, *l = NULL;
    CHECK_OK(jag_linear(x, w, b, &y));
    CHECK_OK(jag_mul(y, c, &yc));
    CHECK_OK(jag_sum(yc, NULL, 0, false, &l));
    CHECK_OK(jag_backward(l, NULL, false));
    double *xv = values_of(x), *wv = values_of(w), *bv = values_of(b), *cv = values_of(c);
    jag_tensor *params[3] = {x, w, b};
    double *vals[3] = {xv, wv, bv};
    int64_t terms[3] = {out_f, rows, rows};
    for (int pi = 0; pi < 3; pi++) {
        jag_tensor *g = NULL;
        CHECK_OK(jag_get_grad(params[pi], &g));
        CHECK(g && jag_tensor_dtype(g) == JAG_BFLOAT16);
        if (!g) continue;
        int64_t n = jag_numel(params[pi]);
        for (int64_t i = 0; i < n; i++) {
            double keep = vals[pi][i];
            vals[pi][i] = keep + 1;
            double up = loss64(xv, wv, bv, cv, rows, in, out_f);
            vals[pi][i] = keep - 1;
            double down = loss64(xv, wv, bv, cv, rows, in, out_f);
            vals[pi][i] = keep;
            double ref = (up - down) / 2, got = t_get(g, i);
            double tol = bound(ref, (double)terms[pi] * 1.0 * 1.0, terms[pi]) + 1e-12;
            CHECK_MSG(fabs(got - ref) <= tol, "param %d element %lld: %.9g vs %.9g", pi, (long long)i, got, ref);
        }
        jag_release(g);
    }
    free(xv), free(wv), free(bv), free(cv);
    jag_release(y), jag_release(yc), jag_release(l);
    jag_release(x), jag_release(w), jag_release(b), jag_release(c);
}

/* ---- compiled == eager ---------------------------------------------------- */

static jag_status linear_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *y = NULL;
    jag_status st = jag_linear(in[0], in[1], in[2], &y);
    if (!st) st = jag_relu(y, &out[0]);
    jag_release(y);
    return st;
}

/* A compiled program sends bfloat16 steps through the dispatcher, so its
 * linear runs the same kernel as eager: the same bits. */
static void test_bf16_linear_compiled_matches_eager(void) {
    TEST_BEGIN();
    int64_t sx[2] = {9, 40}, sw[2] = {24, 40}, nb = 24;
    jag_tensor *in[3] = {bf16_rand(sx, 2, -1, 1, 51), bf16_rand(sw, 2, -1, 1, 52), bf16_rand(&nb, 1, -1, 1, 53)};
    jag_tensor *eager = NULL;
    CHECK_OK(linear_fn(NULL, in, 3, &eager, 1));
    jag_compiled *c = NULL;
    CHECK_OK(jag_compile(linear_fn, NULL, 1, JAG_PASSES_ALL, &c));
    for (int run = 0; run < 2; run++) {
        jag_tensor *got = NULL;
        CHECK_OK(jag_compiled_call(c, in, 3, &got, 1));
        bool same = got && jag_tensor_dtype(got) == JAG_BFLOAT16 && jag_numel(got) == jag_numel(eager);
        if (same) {
            uint16_t *g = bits_of(got), *e = bits_of(eager);
            same = memcmp(g, e, (size_t)jag_numel(got) * 2) == 0;
            free(g), free(e);
        }
        CHECK_MSG(same, "run %d", run);
        jag_release(got);
    }
    jag_compiled_free(c);
    jag_release(eager);
    for (int i = 0; i < 3; i++) jag_release(in[i]);
}

/* ---- half attention ---------------------------------------------------------
 * torch's CPU attention computes float16 / bfloat16 in float32 and rounds
 * the output once: here the same float32 attention on the widened operands
 * (exact), rounded once, must give the same bits. */

static const jag_dtype HALF_DTYPES[2] = {JAG_FLOAT16, JAG_BFLOAT16};

static jag_tensor *to(const jag_tensor *x, jag_dtype dt) {
    jag_tensor *o = NULL;
    if (jag_to_dtype(x, dt, &o)) {
        fprintf(stderr, "to: %s\n", jag_last_error());
        exit(2);
    }
    return o;
}

static bool same_bits(const jag_tensor *a, const jag_tensor *b) {
    if (jag_tensor_dtype(a) != jag_tensor_dtype(b) || jag_numel(a) != jag_numel(b)) return false;
    size_t es = jag_dtype_size(jag_tensor_dtype(a));
    jag_tensor *ca = NULL, *cb = NULL;
    if (jag_contiguous(a, &ca) || jag_contiguous(b, &cb)) exit(2);
    bool same = memcmp(jag_data(ca), jag_data(cb), (size_t)jag_numel(ca) * es) == 0;
    jag_release(ca), jag_release(cb);
    return same;
}

static void test_half_attention_dense(void) {
    TEST_BEGIN();
    int64_t sq[4] = {2, 4, 5, 8}, skv[4] = {2, 2, 7, 8}, sm[4] = {1, 1, 5, 7};
    for (int d = 0; d < 2; d++) {
        jag_dtype dt = HALF_DTYPES[d];
        jag_tensor *q = t_rand(sq, 4, dt, -2, 2, 61), *k = t_rand(skv, 4, dt, -2, 2, 62), *v = t_rand(skv, 4, dt, -2, 2, 63);
        jag_tensor *m = t_rand(sm, 4, dt, -1, 1, 64);
        jag_tensor *qw = to(q, JAG_FLOAT32), *kw = to(k, JAG_FLOAT32), *vw = to(v, JAG_FLOAT32), *mw = to(m, JAG_FLOAT32);
        for (int c = 0; c < 3; c++) { /* plain, causal, masked */
            jag_tensor *got = NULL, *wide = NULL;
            if (c < 2) {
                CHECK_OK(jag_scaled_dot_product_attention(q, k, v, c == 1, 0.0, &got));
                CHECK_OK(jag_scaled_dot_product_attention(qw, kw, vw, c == 1, 0.0, &wide));
            } else {
                CHECK_OK(jag_scaled_dot_product_attention_masked(q, k, v, m, false, 0.3, &got));
                CHECK_OK(jag_scaled_dot_product_attention_masked(qw, kw, vw, mw, false, 0.3, &wide));
            }
            jag_tensor *ref = wide ? to(wide, dt) : NULL;
            CHECK_MSG(got && ref && jag_tensor_dtype(got) == dt && t_same_shape(got, q) && same_bits(got, ref),
                      "%s case %d", jag_dtype_name(dt), c);
            jag_release(got), jag_release(wide), jag_release(ref);
        }
        /* mixed dtypes refused, as for float32 / float64 */
        jag_tensor *out = NULL;
        CHECK_ERR(jag_scaled_dot_product_attention(q, kw, v, false, 0.0, &out), JAG_EDTYPE,
                  "jag_scaled_dot_product_attention: q, k and v have dtypes");
        CHECK_ERR(jag_scaled_dot_product_attention_masked(q, k, v, mw, false, 0.0, &out), JAG_EDTYPE,
                  "argument 'mask' has dtype float32");
        CHECK(out == NULL);
        jag_release(q), jag_release(k), jag_release(v), jag_release(m);
        jag_release(qw), jag_release(kw), jag_release(vw), jag_release(mw);
    }
}

/* max |x| over a tensor */
static double max_abs(const jag_tensor *x) {
    double m = 0;
    for (int64_t i = 0; i < jag_numel(x); i++) m = fmax(m, fabs(t_get(x, i)));
    return m;
}

/* Gradients in the input dtype. The reference: the float32 gradients of
 * the widened operands, rounded once. Backward reads the forward's output
 * as stored, i.e. rounded to the half dtype (torch saves it so too); that
 * rounding (u = 2^-8 bfloat16, 2^-11 float16, relative) enters each
 * gradient through sum(dO * O) times probabilities and values, so the
 * gradients agree within rounding u |ref| plus a few u of the largest
 * gradient: |got - ref| <= u |ref| + 4 u max|ref|. */
static void test_half_attention_gradients(void) {
    TEST_BEGIN();
    int64_t sq[4] = {1, 2, 6, 4}, skv[4] = {1, 2, 5, 4}, sm[4] = {1, 1, 6, 5};
    for (int d = 0; d < 2; d++) {
        jag_dtype dt = HALF_DTYPES[d];
        double u = dt == JAG_BFLOAT16 ? 0x1p-8 : 0x1p-11;
        jag_tensor *x[4] = {t_rand(sq, 4, dt, -1, 1, 71), t_rand(skv, 4, dt, -1, 1, 72), t_rand(skv, 4, dt, -1, 1, 73),
                            t_rand(sm, 4, dt, -1, 1, 74)};
        jag_tensor *c = t_rand(sq, 4, dt, -1, 1, 75), *xw[4], *cw = to(c, JAG_FLOAT32);
        for (int i = 0; i < 4; i++) xw[i] = to(x[i], JAG_FLOAT32);
        jag_tensor *g[2][4] = {{0}};
        for (int w = 0; w < 2; w++) {
            jag_tensor **in = w ? xw : x;
            for (int i = 0; i < 4; i++) CHECK_OK(jag_set_requires_grad(in[i], true));
            jag_tensor *o = NULL, *oc = NULL, *l = NULL;
            CHECK_OK(jag_scaled_dot_product_attention_masked(in[0], in[1], in[2], in[3], false, 0.0, &o));
            CHECK_OK(jag_mul(o, w ? cw : c, &oc));
            CHECK_OK(jag_sum(oc, NULL, 0, false, &l));
            CHECK_OK(jag_backward(l, NULL, false));
            for (int i = 0; i < 4; i++) CHECK_OK(jag_get_grad(in[i], &g[w][i]));
            jag_release(o), jag_release(oc), jag_release(l);
        }
        for (int i = 0; i < 4; i++) {
            CHECK_MSG(g[0][i] && jag_tensor_dtype(g[0][i]) == dt, "%s input %d", jag_dtype_name(dt), i);
            if (!g[0][i] || !g[1][i]) continue;
            double big = max_abs(g[1][i]);
            for (int64_t e = 0; e < jag_numel(g[1][i]); e++) {
                double ref = t_get(g[1][i], e), got = t_get(g[0][i], e);
                CHECK_MSG(fabs(got - ref) <= u * fabs(ref) + 4 * u * big, "%s input %d element %lld: %.9g vs %.9g",
                          jag_dtype_name(dt), i, (long long)e, got, ref);
            }
        }
        for (int i = 0; i < 4; i++) jag_release(x[i]), jag_release(xw[i]), jag_release(g[0][i]), jag_release(g[1][i]);
        jag_release(c), jag_release(cw);
    }
}

/* a jagged (B, j, H, Dh) nested tensor of dtype dt, item lengths len[] */
static jag_tensor *jagged(const int64_t *len, int n, int64_t h, int64_t dh, jag_dtype dt, uint64_t seed) {
    jag_tensor *items[4] = {0}, *nt = NULL;
    for (int i = 0; i < n; i++) {
        int64_t s[3] = {len[i], h, dh};
        items[i] = t_rand(s, 3, dt, -2, 2, seed + (uint64_t)i);
    }
    if (jag_nested_from_list(items, n, JAG_JAGGED, &nt)) {
        fprintf(stderr, "jagged: %s\n", jag_last_error());
        exit(2);
    }
    for (int i = 0; i < n; i++) jag_release(items[i]);
    return nt;
}

static jag_tensor *values(const jag_tensor *nt) {
    jag_tensor *v = NULL;
    if (jag_nested_values(nt, &v)) exit(2);
    return v;
}

/* jagged nested q, k, v: the same rule, and gradients in the input dtype */
static void test_half_attention_jagged(void) {
    TEST_BEGIN();
    int64_t lq[2] = {3, 6}, lk[2] = {4, 2};
    for (int d = 0; d < 2; d++) {
        jag_dtype dt = HALF_DTYPES[d];
        jag_tensor *q = jagged(lq, 2, 2, 4, dt, 81), *k = jagged(lk, 2, 2, 4, dt, 83), *v = jagged(lk, 2, 2, 4, dt, 85);
        jag_tensor *qw = to(q, JAG_FLOAT32), *kw = to(k, JAG_FLOAT32), *vw = to(v, JAG_FLOAT32);
        for (int causal = 0; causal < 2; causal++) {
            jag_tensor *got = NULL, *wide = NULL;
            CHECK_OK(jag_scaled_dot_product_attention(q, k, v, causal, 0.0, &got));
            CHECK_OK(jag_scaled_dot_product_attention(qw, kw, vw, causal, 0.0, &wide));
            if (got && wide) {
                jag_tensor *ref = to(wide, dt), *gv = values(got), *rv = values(ref);
                CHECK_MSG(jag_tensor_dtype(got) == dt && same_bits(gv, rv), "%s causal %d", jag_dtype_name(dt), causal);
                jag_release(ref), jag_release(gv), jag_release(rv);
            }
            jag_release(got), jag_release(wide);
        }
        /* gradients of out . stop_gradient(out) (backward seeded with out's
         * own values) are the input's dtype, within the bound of
         * test_half_attention_gradients of the float32 ones */
        double u = dt == JAG_BFLOAT16 ? 0x1p-8 : 0x1p-11;
        jag_tensor *in[2][3] = {{q, k, v}, {qw, kw, vw}}, *g[2][3] = {{0}};
        for (int w = 0; w < 2; w++) {
            for (int i = 0; i < 3; i++) CHECK_OK(jag_set_requires_grad(in[w][i], true));
            jag_tensor *o = NULL, *seed = NULL;
            CHECK_OK(jag_scaled_dot_product_attention(in[w][0], in[w][1], in[w][2], false, 0.0, &o));
            CHECK_OK(jag_detach(o, &seed));
            CHECK_OK(jag_backward(o, seed, false));
            for (int i = 0; i < 3; i++) CHECK_OK(jag_get_grad(in[w][i], &g[w][i]));
            jag_release(o), jag_release(seed);
        }
        for (int i = 0; i < 3; i++) {
            if (!g[0][i] || !g[1][i]) continue;
            jag_tensor *gv = values(g[0][i]), *rv = values(g[1][i]);
            CHECK(jag_tensor_dtype(gv) == dt);
            double big = max_abs(rv);
            for (int64_t e = 0; e < jag_numel(rv); e++) {
                double ref = t_get(rv, e), got = t_get(gv, e);
                /* the seed is the rounded output: its rounding enters dO too */
                CHECK_MSG(fabs(got - ref) <= u * fabs(ref) + 8 * u * big, "%s input %d element %lld: %.9g vs %.9g",
                          jag_dtype_name(dt), i, (long long)e, got, ref);
            }
            jag_release(gv), jag_release(rv);
        }
        for (int w = 0; w < 2; w++)
            for (int i = 0; i < 3; i++) jag_release(g[w][i]);
        jag_release(q), jag_release(k), jag_release(v), jag_release(qw), jag_release(kw), jag_release(vw);
    }
}

TEST_MAIN(test_bf16_mm_shapes_and_layouts, test_bf16_bmm, test_bf16_linear, test_bf16_mixed_dtypes_refused,
          test_bf16_linear_gradients, test_bf16_linear_compiled_matches_eager, test_half_attention_dense,
          test_half_attention_gradients, test_half_attention_jagged)
