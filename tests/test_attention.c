/* test_attention.c — scaled dot-product attention: dense and jagged, causal,
 * grouped-query, different query and key lengths per item, empty items;
 * against a reference built from dense ops (softmax(q k^T s + mask) v) per
 * item and head, gradchecks, and errors. */
#include "test.h"

#include "cpu/attention.h"

/* Reference for one item: q (Lq, Hq, Dh), k/v (Lk, Hk, Dh) -> (Lq, Hq, Dh),
 * by hand in double. */
static void ref_item(const jag_tensor *q, const jag_tensor *k, const jag_tensor *v, bool causal, double scale,
                     double *out) {
    int64_t lq = jag_size(q, 0), hq = jag_size(q, 1), dh = jag_size(q, 2), lk = jag_size(k, 0), hk = jag_size(k, 1);
    for (int64_t h = 0; h < hq; h++) {
        int64_t kh = h / (hq / hk);
        for (int64_t i = 0; i < lq; i++) {
            int64_t nk = causal ? (i + 1 < lk ? i + 1 : lk) : lk;
            double s[64], m = -1e300, l = 0;
            for (int64_t j = 0; j < nk; j++) {
                s[j] = 0;
                for (int64_t d = 0; d < dh; d++) s[j] += t_get(q, (i * hq + h) * dh + d) * t_get(k, (j * hk + kh) * dh + d);
                s[j] *= scale;
                m = fmax(m, s[j]);
            }
            for (int64_t j = 0; j < nk; j++) l += exp(s[j] - m);
            for (int64_t d = 0; d < dh; d++) {
                double acc = 0;
                for (int64_t j = 0; j < nk; j++) acc += exp(s[j] - m) / l * t_get(v, (j * hk + kh) * dh + d);
                out[(i * hq + h) * dh + d] = nk ? acc : 0;
            }
        }
    }
}

static jag_tensor *jagged(const int64_t *lens, int b, int64_t h, int64_t dh, uint64_t seed) {
    int64_t offs[9] = {0};
    for (int i = 0; i < b; i++) offs[i + 1] = offs[i] + lens[i];
    int64_t vs[3] = {offs[b], h, dh}, nb = b + 1;
    jag_tensor *v = t_rand(vs, 3, JAG_FLOAT64, -1, 1, seed), *o = NULL, *nt = NULL;
    if (jag_from_data(offs, &nb, 1, JAG_INT64, &o) || jag_nested_from_jagged(v, o, NULL, &nt)) exit(2);
    jag_release(v), jag_release(o);
    return nt;
}

static void check_jagged(bool causal, int64_t hq, int64_t hk) {
    int64_t lq[4] = {3, 0, 5, 1}, lk[4] = {4, 2, 5, 0}, dh = 4;
    jag_tensor *q = jagged(lq, 4, hq, dh, 1), *k = jagged(lk, 4, hk, dh, 2), *v = jagged(lk, 4, hk, dh, 3), *y = NULL;
    /* k and v built apart: equal offsets in different tensors */
    CHECK_OK(jag_scaled_dot_product_attention(q, k, v, causal, 0.0, &y));
    CHECK(jag_is_nested(y) && jag_nested_ragged_id(y) == jag_nested_ragged_id(q));
    jag_tensor *qc[4], *kc[4], *vc[4], *yc[4];
    int n;
    CHECK_OK(jag_nested_unbind(q, qc, 4, &n));
    CHECK_OK(jag_nested_unbind(k, kc, 4, &n));
    CHECK_OK(jag_nested_unbind(v, vc, 4, &n));
    CHECK_OK(jag_nested_unbind(y, yc, 4, &n));
    for (int b = 0; b < 4; b++) {
        double want[256];
        ref_item(qc[b], kc[b], vc[b], causal, 1.0 / sqrt((double)dh), want);
        for (int64_t i = 0; i < jag_numel(yc[b]); i++)
            CHECK_MSG(fabs(t_get(yc[b], i) - want[i]) < 1e-12, "item %d elem %lld: %g vs %g (causal %d, Hq %lld, Hk %lld)", b,
                      (long long)i, t_get(yc[b], i), want[i], causal, (long long)hq, (long long)hk);
        jag_release(qc[b]), jag_release(kc[b]), jag_release(vc[b]), jag_release(yc[b]);
    }
    jag_release(q), jag_release(k), jag_release(v), jag_release(y);
}

static void test_jagged_forward(void) {
    TEST_BEGIN();
    check_jagged(false, 2, 2);
    check_jagged(true, 2, 2);
    check_jagged(false, 4, 1); /* multi-query */
    check_jagged(true, 4, 2);  /* grouped-query */
}

static void test_dense_forward_and_errors(void) {
    TEST_BEGIN();
    int64_t qs[4] = {2, 2, 3, 4}, ks[4] = {2, 2, 5, 4};
    jag_tensor *q = t_rand(qs, 4, JAG_FLOAT64, -1, 1, 4), *k = t_rand(ks, 4, JAG_FLOAT64, -1, 1, 5);
    jag_tensor *v = t_rand(ks, 4, JAG_FLOAT64, -1, 1, 6), *y = NULL;
    CHECK_OK(jag_scaled_dot_product_attention(q, k, v, true, 0.5, &y));
    CHECK(jag_ndim(y) == 4 && jag_size(y, 2) == 3 && jag_size(y, 3) == 4);
    /* reference per (b, h) through permuted item views */
    for (int b = 0; b < 2; b++) {
        jag_tensor *qb = NULL, *kb = NULL, *vb = NULL, *yb = NULL, *qt = NULL, *kt = NULL, *vt = NULL, *yt = NULL;
        CHECK_OK(jag_select(q, 0, b, &qb));
        CHECK_OK(jag_select(k, 0, b, &kb));
        CHECK_OK(jag_select(v, 0, b, &vb));
        CHECK_OK(jag_select(y, 0, b, &yb));
        CHECK_OK(jag_transpose(qb, 0, 1, &qt)); /* (L, H, Dh) */
        CHECK_OK(jag_transpose(kb, 0, 1, &kt));
        CHECK_OK(jag_transpose(vb, 0, 1, &vt));
        CHECK_OK(jag_transpose(yb, 0, 1, &yt));
        double want[64];
        ref_item(qt, kt, vt, true, 0.5, want);
        for (int64_t i = 0; i < jag_numel(yt); i++) CHECK(fabs(t_get(yt, i) - want[i]) < 1e-12);
        jag_release(qb), jag_release(kb), jag_release(vb), jag_release(yb);
        jag_release(qt), jag_release(kt), jag_release(vt), jag_release(yt);
    }
    jag_tensor *o = NULL, *f32 = NULL, *bad = NULL;
    CHECK_OK(jag_to_dtype(k, JAG_FLOAT32, &f32));
    CHECK_ERR(jag_scaled_dot_product_attention(q, f32, v, false, 0, &o), JAG_EDTYPE, "expected one float dtype");
    int64_t hs[4] = {2, 3, 5, 4};
    CHECK_OK(jag_zeros(hs, 4, JAG_FLOAT64, &bad));
    CHECK_ERR(jag_scaled_dot_product_attention(q, bad, bad, false, 0, &o), JAG_ESHAPE, "multiple of k's 3");
    int64_t lq[2] = {2, 1};
    jag_tensor *nq = jagged(lq, 2, 2, 4, 7);
    CHECK_ERR(jag_scaled_dot_product_attention(nq, k, v, false, 0, &o), JAG_EINVAL, "jag_scaled_dot_product_attention: q, k and v must all be nested or all dense");
    CHECK(o == NULL);
    jag_release(q), jag_release(k), jag_release(v), jag_release(y), jag_release(f32), jag_release(bad), jag_release(nq);
}

/* ---- gradients ----------------------------------------------------------- */

typedef struct {
    bool causal;
} gctx;

static jag_status run_attn(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    return jag_scaled_dot_product_attention(in[0], in[1], in[2], ((gctx *)ctx)->causal, 0.0, out);
}

static void test_gradients(void) {
    TEST_BEGIN();
    for (int causal = 0; causal < 2; causal++) {
        gctx g = {causal};
        /* dense, grouped-query */
        int64_t qs[4] = {2, 4, 3, 3}, ks[4] = {2, 2, 4, 3};
        jag_tensor *in[3] = {t_rand(qs, 4, JAG_FLOAT64, -1, 1, 8), t_rand(ks, 4, JAG_FLOAT64, -1, 1, 9),
                             t_rand(ks, 4, JAG_FLOAT64, -1, 1, 10)};
        for (int i = 0; i < 3; i++) CHECK_OK(jag_set_requires_grad(in[i], true));
        CHECK_OK(jag_gradcheck(run_attn, &g, in, 3, 1e-6, 1e-8, 1e-6));
        for (int i = 0; i < 3; i++) jag_release(in[i]);
        /* jagged, an empty item and different lengths */
        int64_t lq[3] = {2, 0, 3}, lk[3] = {3, 1, 2};
        jag_tensor *jn[3] = {jagged(lq, 3, 2, 3, 11), jagged(lk, 3, 1, 3, 12), jagged(lk, 3, 1, 3, 13)};
        for (int i = 0; i < 3; i++) CHECK_OK(jag_set_requires_grad(jn[i], true));
        CHECK_OK(jag_gradcheck(run_attn, &g, jn, 3, 1e-6, 1e-8, 1e-6));
        /* the gradients are nested around the inputs' offsets */
        jag_tensor *y = NULL, *yv = NULL, *s = NULL, *gq = NULL, *o1 = NULL, *o2 = NULL;
        CHECK_OK(jag_scaled_dot_product_attention(jn[0], jn[1], jn[2], causal, 0.0, &y));
        CHECK_OK(jag_nested_values(y, &yv));
        CHECK_OK(jag_sum(yv, NULL, 0, false, &s));
        CHECK_OK(jag_backward(s, NULL, false));
        CHECK_OK(jag_get_grad(jn[0], &gq));
        CHECK_OK(jag_nested_offsets(gq, &o1));
        CHECK_OK(jag_nested_offsets(jn[0], &o2));
        CHECK(o1 == o2);
        jag_release(y), jag_release(yv), jag_release(s), jag_release(gq), jag_release(o1), jag_release(o2);
        for (int i = 0; i < 3; i++) jag_release(jn[i]);
    }
}

/* a float32 batch large enough for several key blocks and threads, against
 * the float64 computation */
static void test_long_float32(void) {
    TEST_BEGIN();
    int64_t lq[2] = {150, 70}, lk[2] = {200, 90};
    jag_tensor *q = jagged(lq, 2, 2, 8, 20), *k = jagged(lk, 2, 2, 8, 21), *v = jagged(lk, 2, 2, 8, 22);
    jag_tensor *q32 = NULL, *k32 = NULL, *v32 = NULL, *y = NULL, *y32 = NULL, *a = NULL, *b = NULL;
    CHECK_OK(jag_to_dtype(q, JAG_FLOAT32, &q32));
    CHECK_OK(jag_to_dtype(k, JAG_FLOAT32, &k32));
    CHECK_OK(jag_to_dtype(v, JAG_FLOAT32, &v32));
    CHECK_OK(jag_scaled_dot_product_attention(q, k, v, true, 0.0, &y));
    CHECK_OK(jag_scaled_dot_product_attention(q32, k32, v32, true, 0.0, &y32));
    CHECK_OK(jag_nested_values(y, &a));
    CHECK_OK(jag_nested_values(y32, &b));
    CHECK(t_allclose(b, a, 1e-5, 1e-6));
    jag_release(q), jag_release(k), jag_release(v), jag_release(q32), jag_release(k32), jag_release(v32);
    jag_release(y), jag_release(y32), jag_release(a), jag_release(b);
}


/* the tiled float32 kernel against the naive reference (full score
 * matrices), directly on packed rows: several query and key tiles, queries
 * longer and shorter than keys, empty items, causal or not, grouped heads,
 * rows strided inside a wider buffer */
static void test_tiled_vs_reference(void) {
    TEST_BEGIN();
    const int64_t ql[5] = {1, 130, 0, 64, 300}, kl[5] = {3, 70, 5, 0, 257};
    for (int causal = 0; causal < 2; causal++)
        for (int gq = 0; gq < 2; gq++)
            for (int wide = 0; wide < 2; wide++) {
                int64_t hq = 4, hk = gq ? 2 : 4, dh = 16, qo[5], ko[5], rq = 0, rk = 0;
                for (int b = 0; b < 5; b++) qo[b] = rq, ko[b] = rk, rq += ql[b], rk += kl[b];
                int64_t extra = wide ? 8 : 0; /* rows hold 8 more floats than the heads use */
                int64_t qs[2] = {rq, hq * dh + extra}, ks[2] = {rk, hk * dh + extra};
                jag_tensor *q = t_rand(qs, 2, JAG_FLOAT32, -2, 2, 70), *k = t_rand(ks, 2, JAG_FLOAT32, -2, 2, 71);
                jag_tensor *v = t_rand(ks, 2, JAG_FLOAT32, -2, 2, 72);
                attn_args a = {.f64 = false, .batch = 5, .hq = hq, .hk = hk, .dh = dh, .qo = qo, .ql = ql, .ko = ko, .kl = kl,
                               .q = {jag_data(q), hq * dh + extra, dh, 1}, .k = {jag_data(k), hk * dh + extra, dh, 1},
                               .v = {jag_data(v), hk * dh + extra, dh, 1}, .causal = causal, .scale = 0.3};
                float *out = malloc((size_t)(rq * hq * dh) * sizeof *out), *lse = malloc((size_t)(rq * hq) * sizeof *lse);
                float *ref = malloc((size_t)(rq * hq * dh) * sizeof *ref);
                double *rlse = malloc((size_t)(rq * hq) * sizeof *rlse);
                CHECK_OK(jag__attention_forward(&a, (char *)out, (char *)lse));
                jag__ref_attention(&a, (char *)ref, rlse);
                double worst = 0, worst_l = 0;
                for (int64_t i = 0; i < rq * hq * dh; i++) worst = fmax(worst, fabs((double)out[i] - (double)ref[i]));
                for (int64_t i = 0; i < rq * hq; i++)
                    worst_l = isinf(rlse[i]) ? (lse[i] == rlse[i] ? worst_l : INFINITY) : fmax(worst_l, fabs(lse[i] - rlse[i]));
                CHECK_MSG(worst < 2e-5 && worst_l < 2e-5, "causal %d gq %d wide %d: out off by %g, lse by %g", causal, gq, wide,
                          worst, worst_l);
                free(out), free(lse), free(ref), free(rlse);
                jag_release(q), jag_release(k), jag_release(v);
            }
}

TEST_MAIN(test_tiled_vs_reference, test_jagged_forward, test_dense_forward_and_errors, test_gradients, test_long_float32)
