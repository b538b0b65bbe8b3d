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

/* ---- additive masks ------------------------------------------------------ */

/* reference for one item with a mask component m (Lq, Lk) or (H?, Lq, Lk) */
static void ref_item_masked(const jag_tensor *q, const jag_tensor *k, const jag_tensor *v, const jag_tensor *m, bool causal,
                            double scale, double *out) {
    int64_t lq = jag_size(q, 0), hq = jag_size(q, 1), dh = jag_size(q, 2), lk = jag_size(k, 0), hk = jag_size(k, 1);
    int mh = jag_ndim(m) == 3 && jag_size(m, 0) == hq;
    for (int64_t h = 0; h < hq; h++) {
        int64_t kh = h / (hq / hk);
        for (int64_t i = 0; i < lq; i++) {
            int64_t nk = causal ? (i + 1 < lk ? i + 1 : lk) : lk;
            double s[64], mx = -INFINITY, l = 0;
            for (int64_t j = 0; j < nk; j++) {
                s[j] = 0;
                for (int64_t d = 0; d < dh; d++) s[j] += t_get(q, (i * hq + h) * dh + d) * t_get(k, (j * hk + kh) * dh + d);
                s[j] = s[j] * scale + t_get(m, ((mh ? h : 0) * lq + i) * lk + j);
                mx = fmax(mx, s[j]);
            }
            for (int64_t j = 0; j < nk && mx > -INFINITY; j++) l += exp(s[j] - mx);
            for (int64_t d = 0; d < dh; d++) {
                double acc = 0;
                for (int64_t j = 0; j < nk && l > 0; j++) acc += exp(s[j] - mx) / l * t_get(v, (j * hk + kh) * dh + d);
                out[(i * hq + h) * dh + d] = acc;
            }
        }
    }
}

/* a strided nested mask for items of (lq[b], lk[b]), heads: 0 none, 1 one, H */
static jag_tensor *nested_mask(const int64_t *lq, const int64_t *lk, int n, int64_t heads, bool with_inf, jag_dtype dt,
                               uint64_t seed) {
    jag_tensor *items[8], *out = NULL;
    for (int b = 0; b < n; b++) {
        int64_t sz[3] = {heads, lq[b], lk[b]};
        items[b] = heads ? t_rand(sz, 3, dt, -1, 1, seed + (uint64_t)b) : t_rand(sz + 1, 2, dt, -1, 1, seed + (uint64_t)b);
        if (with_inf && lq[b] > 1 && lk[b] > 1) { /* hide key 1 from query 0 (of head 0), and every key from query 1 */
            int64_t base = 0;
            double *p = NULL;
            jag_tensor *f = NULL;
            if (jag_to_dtype(items[b], JAG_FLOAT64, &f)) exit(2);
            p = jag_data(f);
            p[base + 1] = -INFINITY;
            for (int64_t j = 0; j < lk[b]; j++) p[base + lk[b] + j] = -INFINITY;
            jag_release(items[b]);
            if (jag_to_dtype(f, dt, &items[b])) exit(2);
            jag_release(f);
        }
    }
    if (jag_nested_from_list(items, n, JAG_STRIDED, &out)) {
        fprintf(stderr, "nested_mask: %s\n", jag_last_error());
        exit(2);
    }
    for (int b = 0; b < n; b++) jag_release(items[b]);
    return out;
}

static void test_masked_jagged(void) {
    TEST_BEGIN();
    int64_t lq[4] = {3, 0, 5, 2}, lk[4] = {4, 2, 5, 3}, dh = 4;
    for (int causal = 0; causal < 2; causal++)
        for (int heads = 0; heads <= 2; heads++) {
            int64_t hq = 2, hk = 1;
            jag_tensor *q = jagged(lq, 4, hq, dh, 31), *k = jagged(lk, 4, hk, dh, 32), *v = jagged(lk, 4, hk, dh, 33), *y = NULL;
            jag_tensor *m = nested_mask(lq, lk, 4, heads == 2 ? hq : heads, true, JAG_FLOAT64, 40);
            CHECK_OK(jag_scaled_dot_product_attention_masked(q, k, v, m, causal, 0.0, &y));
            jag_tensor *qc[4], *kc[4], *vc[4], *yc[4], *mc[4];
            int n;
            CHECK_OK(jag_nested_unbind(q, qc, 4, &n));
            CHECK_OK(jag_nested_unbind(k, kc, 4, &n));
            CHECK_OK(jag_nested_unbind(v, vc, 4, &n));
            CHECK_OK(jag_nested_unbind(y, yc, 4, &n));
            CHECK_OK(jag_nested_unbind(m, mc, 4, &n));
            for (int b = 0; b < 4; b++) {
                double want[256];
                ref_item_masked(qc[b], kc[b], vc[b], mc[b], causal, 0.5, want);
                for (int64_t i = 0; i < jag_numel(yc[b]); i++)
                    CHECK_MSG(fabs(t_get(yc[b], i) - want[i]) < 1e-12, "masked item %d elem %lld: %g vs %g (causal %d heads %d)", b,
                              (long long)i, t_get(yc[b], i), want[i], causal, heads);
                jag_release(qc[b]), jag_release(kc[b]), jag_release(vc[b]), jag_release(yc[b]), jag_release(mc[b]);
            }
            /* float32 (the tiled kernel) agrees with float64 */
            jag_tensor *q32 = NULL, *k32 = NULL, *v32 = NULL, *m32 = NULL, *y32 = NULL, *a = NULL, *bb = NULL;
            CHECK_OK(jag_to_dtype(q, JAG_FLOAT32, &q32));
            CHECK_OK(jag_to_dtype(k, JAG_FLOAT32, &k32));
            CHECK_OK(jag_to_dtype(v, JAG_FLOAT32, &v32));
            CHECK_OK(jag_to_dtype(m, JAG_FLOAT32, &m32));
            CHECK_OK(jag_scaled_dot_product_attention_masked(q32, k32, v32, m32, causal, 0.0, &y32));
            CHECK_OK(jag_nested_values(y, &a));
            CHECK_OK(jag_nested_values(y32, &bb));
            CHECK(t_allclose(bb, a, 1e-5, 1e-6));
            jag_release(q32), jag_release(k32), jag_release(v32), jag_release(m32), jag_release(y32), jag_release(a), jag_release(bb);
            jag_release(q), jag_release(k), jag_release(v), jag_release(m), jag_release(y);
        }
    /* errors */
    jag_tensor *q = jagged(lq, 4, 2, dh, 34), *k = jagged(lk, 4, 1, dh, 35), *o = NULL;
    int64_t lk2[4] = {4, 2, 5, 4};
    jag_tensor *bad = nested_mask(lq, lk2, 4, 0, false, JAG_FLOAT64, 41), *m32 = nested_mask(lq, lk, 4, 0, false, JAG_FLOAT32, 42);
    CHECK_ERR(jag_scaled_dot_product_attention_masked(q, k, k, bad, false, 0, &o), JAG_ESHAPE, "component 3 of argument 'mask' has shape");
    CHECK_ERR(jag_scaled_dot_product_attention_masked(q, k, k, m32, false, 0, &o), JAG_EDTYPE, "argument 'mask' has dtype float32");
    CHECK_ERR(jag_scaled_dot_product_attention_masked(q, k, k, q, false, 0, &o), JAG_EINVAL, "must be a strided nested tensor");
    CHECK(o == NULL);
    jag_release(q), jag_release(k), jag_release(bad), jag_release(m32);
}

static jag_status run_masked(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    return jag_scaled_dot_product_attention_masked(in[0], in[1], in[2], in[3], *(bool *)ctx, 0.0, out);
}

static void test_masked_gradients_and_dense(void) {
    TEST_BEGIN();
    int64_t lq[3] = {3, 0, 4}, lk[3] = {2, 3, 4}, dh = 3;
    for (int causal = 0; causal < 2; causal++)
        for (int heads = 0; heads <= 2; heads += 2) {
            bool cz = causal;
            jag_tensor *q = jagged(lq, 3, 2, dh, 51), *k = jagged(lk, 3, 2, dh, 52), *v = jagged(lk, 3, 2, dh, 53);
            jag_tensor *m = nested_mask(lq, lk, 3, heads, false, JAG_FLOAT64, 54);
            jag_tensor *in[4] = {q, k, v, m};
            for (int i = 0; i < 4; i++) CHECK_OK(jag_set_requires_grad(in[i], true));
            jag_status st = jag_gradcheck(run_masked, &cz, in, 4, 1e-6, 1e-7, 1e-6);
            CHECK_MSG(st == JAG_OK, "jagged masked causal %d heads %d: %s", causal, heads, jag_last_error());
            for (int i = 0; i < 4; i++) jag_release(in[i]);
        }
    /* dense: against composed dense ops, and gradients with a broadcast mask */
    int64_t qs[4] = {2, 2, 3, 4}, ks[4] = {2, 2, 5, 4}, ms[4] = {1, 2, 3, 5};
    jag_tensor *q = t_rand(qs, 4, JAG_FLOAT64, -1, 1, 60), *k = t_rand(ks, 4, JAG_FLOAT64, -1, 1, 61);
    jag_tensor *v = t_rand(ks, 4, JAG_FLOAT64, -1, 1, 62), *m = t_rand(ms, 4, JAG_FLOAT64, -1, 1, 63), *y = NULL;
    CHECK_OK(jag_scaled_dot_product_attention_masked(q, k, v, m, false, 0.5, &y));
    jag_tensor *kt = NULL, *s = NULL, *ss = NULL, *sm = NULL, *p = NULL, *want = NULL;
    CHECK_OK(jag_transpose(k, 2, 3, &kt));
    CHECK_OK(jag_matmul(q, kt, &s));
    CHECK_OK(jag_mul_scalar(s, 0.5, &ss));
    CHECK_OK(jag_add(ss, m, 1.0, &sm));
    CHECK_OK(jag_softmax(sm, -1, &p));
    CHECK_OK(jag_matmul(p, v, &want));
    CHECK(y && t_allclose(y, want, 1e-12, 1e-12));
    jag_tensor *y0 = NULL, *y1 = NULL; /* no mask: the plain op */
    CHECK_OK(jag_scaled_dot_product_attention_masked(q, k, v, NULL, true, 0.5, &y0));
    CHECK_OK(jag_scaled_dot_product_attention(q, k, v, true, 0.5, &y1));
    CHECK(y0 && y1 && t_allclose(y0, y1, 0, 0));
    jag_release(y0), jag_release(y1);
    jag_release(kt), jag_release(s), jag_release(ss), jag_release(sm), jag_release(p), jag_release(want), jag_release(y);
    jag_tensor *in[4] = {q, k, v, m};
    for (int i = 0; i < 4; i++) CHECK_OK(jag_set_requires_grad(in[i], true));
    bool cz = true;
    CHECK_OK(jag_gradcheck(run_masked, &cz, in, 4, 1e-6, 1e-7, 1e-6));
    int64_t bs[2] = {4, 4};
    jag_tensor *badm = t_rand(bs, 2, JAG_FLOAT64, -1, 1, 64), *o = NULL;
    CHECK_ERR(jag_scaled_dot_product_attention_masked(q, k, v, badm, false, 0, &o), JAG_ESHAPE, "does not broadcast to (B, Hq, Lq, Lk) = (2, 2, 3, 5)");
    CHECK(o == NULL);
    jag_release(badm);
    for (int i = 0; i < 4; i++) jag_release(in[i]);
}

TEST_MAIN(test_masked_jagged, test_masked_gradients_and_dense, test_tiled_vs_reference, test_jagged_forward, test_dense_forward_and_errors, test_gradients, test_long_float32)
