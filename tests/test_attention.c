/* test_attention.c — scaled dot-product attention: dense and jagged, causal,
 * grouped-query, different query and key lengths per item, empty items;
 * against a reference built from dense ops (softmax(q k^T s + mask) v) per
 * item and head, gradchecks, and errors. */
#include "test.h"

#include "cpu/attention.h"

#include <omp.h>

/* Reference for one item: q (Lq, Hq, Dh), k/v (Lk, Hk, Dh) -> (Lq, Hq, Dh),
 * by hand in double. */
static void ref_item(const jag_tensor *q, const jag_tensor *k, const jag_tensor *v, bool causal, double scale,
                     double *out) {
    int64_t lq = jag_size(q, 0), hq = jag_size(q, 1), dh = jag_size(q, 2), lk = jag_size(k, 0), hk = jag_size(k, 1);
    for (int64_t h = 0; h < hq; h++) {
        int64_t kh = h / (hq / hk);
        for (int64_t i = 0; i < lq; i++) {
            int64_t nk = causal ? (i + 1 < lk ? i + 1 : lk) : lk;
            double s[256], m = -1e300, l = 0;
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

/* Items with holes between them (rows no component covers), float32 on
 * the tiled kernel, several query and key tiles: each item matches the
 * reference, and the rows in holes of the output's values are 0 even when
 * the output's memory was left dirty by a freed tensor (the kernels write
 * every covered row; holes are filled first). */
static void test_jagged_holes_float32(void) {
    TEST_BEGIN();
    const int64_t h = 2, dh = 8, lens[4] = {5, 0, 150, 3}, offs[5] = {0, 7, 9, 165, 168};
    int64_t vs[3] = {170, h, dh}, nb = 5, b4 = 4;
    jag_tensor *off = NULL, *len = NULL, *in[3];
    CHECK_OK(jag_from_data(offs, &nb, 1, JAG_INT64, &off));
    CHECK_OK(jag_from_data(lens, &b4, 1, JAG_INT64, &len));
    for (int i = 0; i < 3; i++) {
        jag_tensor *v = t_rand(vs, 3, JAG_FLOAT32, -1, 1, 40 + (uint64_t)i);
        CHECK_OK(jag_nested_from_jagged(v, off, len, &in[i]));
        jag_release(v);
    }
    jag_tensor *qc[4], *kc[4], *vc[4];
    int n;
    CHECK_OK(jag_nested_unbind(in[0], qc, 4, &n));
    CHECK_OK(jag_nested_unbind(in[1], kc, 4, &n));
    CHECK_OK(jag_nested_unbind(in[2], vc, 4, &n));
    for (int causal = 0; causal < 2; causal++)
        for (int round = 0; round < 2; round++) {
            jag_tensor *dirty = NULL, *y = NULL, *yv = NULL, *yc[4];
            CHECK_OK(jag_full(vs, 3, 1e30, JAG_FLOAT32, &dirty));
            jag_release(dirty); /* its block is the next one of this size */
            CHECK_OK(jag_scaled_dot_product_attention(in[0], in[1], in[2], causal, 0.0, &y));
            CHECK_OK(jag_nested_values(y, &yv));
            CHECK(jag_size(yv, 0) == 170);
            for (int64_t r = 0; r < 170; r++) {
                bool hole = true;
                for (int b = 0; b < 4; b++) hole &= !(r >= offs[b] && r < offs[b] + lens[b]);
                for (int64_t e = 0; hole && e < h * dh; e++)
                    CHECK_MSG(t_get(yv, r * h * dh + e) == 0, "row %lld in a hole: %g", (long long)r, t_get(yv, r * h * dh + e));
            }
            CHECK_OK(jag_nested_unbind(y, yc, 4, &n));
            for (int b = 0; b < 4; b++) {
                double *want = malloc((size_t)(lens[b] * h * dh + 1) * sizeof *want);
                ref_item(qc[b], kc[b], vc[b], causal, 1.0 / sqrt((double)dh), want);
                for (int64_t i = 0; i < jag_numel(yc[b]); i++)
                    CHECK_MSG(fabs(t_get(yc[b], i) - want[i]) < 2e-6, "item %d elem %lld: %g vs %g (causal %d)", b,
                              (long long)i, t_get(yc[b], i), want[i], causal);
                free(want);
                jag_release(yc[b]);
            }
            jag_release(yv), jag_release(y);
        }
    for (int b = 0; b < 4; b++) jag_release(qc[b]), jag_release(kc[b]), jag_release(vc[b]);
    for (int i = 0; i < 3; i++) jag_release(in[i]);
    jag_release(off), jag_release(len);
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


/* ---- the kernels on packed rows against the naive references --------------- */

/* One problem on raw buffers: nb items with lq[b] queries and lk[b] keys,
 * two unused rows after each item (rows in holes), q, k, v, go and the mask
 * filled from one seeded sequence, rounded to the dtype, so that the
 * reference reads exactly what the kernel reads. */
typedef struct {
    bool f64, causal;
    int64_t hq, hk, dh;
    int mask;     /* 0 none, 1 per head (Hq, Lq, Lk), 2 shared by heads with -inf (a whole row of one), 3 per key */
    int layout;   /* q, k, v: 0 contiguous rows, 1 rows 5 elements wider, 2 head dims strided (R, Dh, H) */
    int golayout; /* go: 0 contiguous, 1 one row for all (row stride 0), 2 head dims strided */
} bw_case;

typedef struct {
    attn_args a;
    int64_t seg[9][9]; /* qo, ql, ko, kl, mo, mh, mi, mj, fo */
    int64_t rq, rk, nm;
    void *q, *k, *v, *m, *go, *out, *lse;
    attn_view gv, ov;
} bw_prob;

static double urand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * 0x1.0p-53 * 4.0 - 2.0;
}

static void put(void *buf, bool f64, int64_t i, double x) {
    if (f64) ((double *)buf)[i] = x;
    else ((float *)buf)[i] = (float)x;
}

static double get(const void *buf, bool f64, int64_t i) { return f64 ? ((const double *)buf)[i] : ((const float *)buf)[i]; }

/* an (R, H, Dh) operand in the case's layout, filled at random */
static void *operand(const bw_case *c, int layout, int64_t rows, int64_t h, attn_view *view, uint64_t *s) {
    int64_t es = c->f64 ? 8 : 4, dh = c->dh, n = rows * (h * dh + 5) + 1;
    void *buf = calloc((size_t)n, (size_t)es);
    if (layout == 2) *view = (attn_view){buf, h * dh, 1, h};
    else if (layout == 1) *view = (attn_view){buf, h * dh + 5, dh, 1};
    else *view = (attn_view){buf, h * dh, dh, 1};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t x = 0; x < h; x++)
            for (int64_t d = 0; d < dh; d++) put(buf, c->f64, r * view->sr + x * view->sh + d * view->sd, urand(s));
    return buf;
}

static void prob_init(bw_prob *p, const bw_case *c, int nb, const int64_t *lq, const int64_t *lk, uint64_t seed) {
    memset(p, 0, sizeof *p);
    int64_t *qo = p->seg[0], *ql = p->seg[1], *ko = p->seg[2], *kl = p->seg[3], *mo = p->seg[4], *mh = p->seg[5];
    int64_t *mi = p->seg[6], *mj = p->seg[7], *fo = p->seg[8];
    fo[0] = 0;
    for (int b = 0; b < nb; b++) {
        qo[b] = p->rq, ql[b] = lq[b], ko[b] = p->rk, kl[b] = lk[b];
        p->rq += lq[b] + 2, p->rk += lk[b] + 2;
        fo[b + 1] = fo[b] + c->hq * lq[b] * lk[b];
        int64_t hm = c->mask == 1 ? c->hq : 1;
        mo[b] = p->nm, mh[b] = c->mask == 1 ? lq[b] * lk[b] : 0, mi[b] = c->mask == 3 ? 0 : lk[b], mj[b] = 1;
        p->nm += c->mask == 3 ? lk[b] : hm * lq[b] * lk[b];
    }
    uint64_t s = seed;
    attn_view qv, kv, vv;
    p->q = operand(c, c->layout, p->rq, c->hq, &qv, &s);
    p->k = operand(c, c->layout, p->rk, c->hk, &kv, &s);
    p->v = operand(c, c->layout, p->rk, c->hk, &vv, &s);
    p->go = operand(c, c->golayout == 2 ? 2 : 0, p->rq, c->hq, &p->gv, &s);
    if (c->golayout == 1) p->gv.sr = 0;
    p->m = calloc((size_t)(p->nm + 1), c->f64 ? 8 : 4);
    for (int64_t i = 0; i < p->nm; i++) put(p->m, c->f64, i, urand(&s) / 2);
    if (c->mask == 2 || c->mask == 3)
        for (int b = 0; b < nb; b++) { /* hide key 1 from query 0 (every key, per key), and every key from query 1; */
            if (lk[b] > 1 && lq[b] > 0) put(p->m, c->f64, mo[b] + 1, -INFINITY);
            for (int64_t j = 0; c->mask == 2 && lq[b] > 1 && j < lk[b]; j++) put(p->m, c->f64, mo[b] + lk[b] + j, -INFINITY);
            /* query 2 sees every key 95 down (far below exp's range, but the softmax is relative), key 0 100 more */
            for (int64_t j = 0; c->mask == 2 && lq[b] > 2 && j < lk[b]; j++)
                put(p->m, c->f64, mo[b] + 2 * lk[b] + j, get(p->m, c->f64, mo[b] + 2 * lk[b] + j) - (j ? 95 : 195));
        }
    p->a = (attn_args){.f64 = c->f64, .batch = nb, .hq = c->hq, .hk = c->hk, .dh = c->dh, .qo = qo, .ql = ql, .ko = ko,
                       .kl = kl, .q = qv, .k = kv, .v = vv, .causal = c->causal, .scale = 0.7 / sqrt((double)c->dh)};
    if (c->mask) p->a.mbase = p->m, p->a.mo = mo, p->a.mh = mh, p->a.mi = mi, p->a.mj = mj;
    p->out = calloc((size_t)(p->rq * c->hq * c->dh + 1), c->f64 ? 8 : 4);
    p->lse = calloc((size_t)(p->rq * c->hq + 1), c->f64 ? 8 : 4);
    p->ov = (attn_view){p->out, c->hq * c->dh, c->dh, 1};
}

static void prob_free(bw_prob *p) {
    free(p->q), free(p->k), free(p->v), free(p->m), free(p->go), free(p->out), free(p->lse);
}

/* max |x - ref| over max(1, max |ref|); NaN where either has one */
static double rel_err(const void *x, bool f64, const double *ref, int64_t n) {
    double worst = 0, big = 1;
    for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(get(x, f64, i) - ref[i]);
        if (!(d <= worst)) worst = d; /* NaN sticks */
    }
    return worst / big;
}

/* The kernels' forward and backward against the references; returns the
 * worst relative error over out, dq, dk, dv and dmask, and the largest
 * finite |lse| in *lse_max. */
static double check_backward_case(const bw_case *c, int nb, const int64_t *lq, const int64_t *lk, uint64_t seed,
                                  double *lse_max) {
    bw_prob p;
    prob_init(&p, c, nb, lq, lk, seed);
    bool f64 = c->f64;
    int64_t nq = p.rq * c->hq * c->dh, nk = p.rk * c->hk * c->dh, nmask = p.seg[8][nb];
    double *rout = calloc((size_t)nq + 1, 8), *rlse = calloc((size_t)(p.rq * c->hq) + 1, 8);
    double *rdq = calloc((size_t)nq + 1, 8), *rdk = calloc((size_t)nk + 1, 8), *rdv = calloc((size_t)nk + 1, 8);
    double *rdm = calloc((size_t)nmask + 1, 8);
    void *dq = calloc((size_t)nq + 1, 8), *dk = calloc((size_t)nk + 1, 8), *dv = calloc((size_t)nk + 1, 8);
    void *dm = calloc((size_t)nmask + 1, 8);
    CHECK_OK(jag__attention_forward(&p.a, p.out, p.lse));
    jag__ref_attention(&p.a, f64 ? (char *)rout : (char *)dq, rlse); /* dq: room for the float32 reference's out */
    if (!f64)
        for (int64_t i = 0; i < nq; i++) rout[i] = ((float *)dq)[i], ((float *)dq)[i] = 0;
    double worst = rel_err(p.out, f64, rout, nq);
    CHECK_OK(jag__attention_backward(&p.a, &p.ov, &p.gv, p.lse, dq, dk, dv, c->mask ? dm : NULL, p.seg[8]));
    jag__ref_attention_backward(&p.a, &p.gv, rdq, rdk, rdv, rdm, p.seg[8]);
    worst = fmax(worst, rel_err(dq, f64, rdq, nq));
    worst = fmax(worst, rel_err(dk, f64, rdk, nk));
    worst = fmax(worst, rel_err(dv, f64, rdv, nk));
    if (c->mask) worst = fmax(worst, rel_err(dm, f64, rdm, nmask));
    *lse_max = 0;
    for (int64_t i = 0; i < p.rq * c->hq; i++) { /* lse: -inf exactly where the reference has it */
        double x = get(p.lse, f64, i);
        if (isinf(rlse[i]) || isinf(x)) worst = x == rlse[i] ? worst : INFINITY;
        else *lse_max = fmax(*lse_max, fabs(rlse[i]));
    }
    free(rout), free(rlse), free(rdq), free(rdk), free(rdv), free(rdm), free(dq), free(dk), free(dv), free(dm);
    prob_free(&p);
    return worst;
}

/* float32 (the tiled kernels, on the vector tile kernel and on BLAS) and
 * float64 against the references: causal or not, grouped heads (Hq = Hk,
 * 2 Hk, 4 Hk), head sizes 1, 17, 64, 128, queries longer and shorter than
 * keys, empty items, single rows, several tiles, masks (per head, shared
 * with -inf and a row far below exp's range, per key), wider rows, strided
 * head dims, an output gradient with one row for all or strided head dims. */
static void test_backward_vs_reference(void) {
    TEST_BEGIN();
    const int64_t lq[6] = {1, 130, 0, 64, 7, 3}, lk[6] = {3, 70, 5, 0, 1, 200};
    const int64_t dhs[4] = {1, 17, 64, 128};
    int n = 0;
    for (int f64 = 0; f64 < 2; f64++)
        for (int causal = 0; causal < 2; causal++)
            for (int g = 0; g < 3; g++)
                for (int di = 0; di < 4; di++) {
                    bw_case c = {.f64 = f64, .causal = causal, .hq = 4, .hk = g == 0 ? 4 : g == 1 ? 2 : 1, .dh = dhs[di],
                                 .mask = (di + g + causal) % 4, .layout = (di + causal) % 3, .golayout = (g + di) % 3};
                    for (int blas = 0; blas < (f64 ? 1 : 2); blas++) {
                        jag__attention_blas_tiles = blas;
                        double lse_max, err = check_backward_case(&c, 6, lq, lk, 100 + (uint64_t)n++, &lse_max);
                        /* float32's lse is off by up to |lse| 2^-24, which P = exp(S - lse) makes a relative error */
                        double tol = f64 ? 1e-12 : (c.dh >= 64 ? 5e-6 : 2e-6) + lse_max * 0x1p-24;
                        CHECK_MSG(err <= tol, "f64 %d causal %d Hq %lld Hk %lld Dh %lld mask %d layout %d go %d blas %d: error %g",
                                  f64, causal, (long long)c.hq, (long long)c.hk, (long long)c.dh, c.mask, c.layout, c.golayout,
                                  blas, err);
                    }
                    jag__attention_blas_tiles = false;
                }
}


/* sum(out * go) over every row, in double */
static double fd_loss(bw_prob *p, const bw_case *c) {
    if (jag__attention_forward(&p->a, p->out, p->lse)) return NAN;
    double l = 0;
    for (int64_t i = 0; i < p->rq * c->hq * c->dh; i++) l += get(p->out, c->f64, i) * get(p->go, c->f64, i);
    return l;
}

/* The kernels' gradients against central differences of the forward
 * along a random direction per input (q, k, v, mask): the difference of
 * the losses against the gradient's dot with the difference of the inputs
 * as stored (so float32's rounding of x +- h u is not an error). The
 * direction follows the gradient, plus noise, so that the dot does not
 * cancel and a gradient off by a factor shows in full. float32 runs the
 * tiled kernels. */
static void test_backward_finite_differences(void) {
    TEST_BEGIN();
    const int64_t lq[4] = {1, 70, 0, 5}, lk[4] = {3, 130, 2, 0};
    for (int f64 = 0; f64 < 2; f64++)
        for (int causal = 0; causal < 2; causal++)
            for (int64_t dh = 17; dh <= 64; dh += 47) {
                bw_case c = {.f64 = f64, .causal = causal, .hq = 4, .hk = 2, .dh = dh, .mask = 1};
                bw_prob p;
                prob_init(&p, &c, 4, lq, lk, 300 + (uint64_t)dh + 2 * (uint64_t)causal + 4 * (uint64_t)f64);
                int64_t nq = p.rq * c.hq * dh, nk = p.rk * c.hk * dh, es = f64 ? 8 : 4;
                void *g[4] = {calloc((size_t)nq + 1, 8), calloc((size_t)nk + 1, 8), calloc((size_t)nk + 1, 8),
                              calloc((size_t)p.nm + 1, 8)};
                CHECK_OK(jag__attention_forward(&p.a, p.out, p.lse));
                CHECK_OK(jag__attention_backward(&p.a, &p.ov, &p.gv, p.lse, g[0], g[1], g[2], g[3], p.seg[8]));
                void *x[4] = {p.q, p.k, p.v, p.m};
                int64_t n[4] = {nq, nk, nk, p.nm};
                double h = f64 ? 1e-6 : 4e-3;
                uint64_t s = 77;
                for (int t = 0; t < 4; t++) {
                    char *keep = malloc((size_t)(n[t] * es + 1));
                    double *plus = malloc((size_t)(n[t] + 1) * 8), *u = malloc((size_t)(n[t] + 1) * 8);
                    memcpy(keep, x[t], (size_t)(n[t] * es));
                    double gmax = 1e-300; /* u: along the gradient (no cancellation in the sum) plus noise */
                    for (int64_t i = 0; i < n[t]; i++) gmax = fmax(gmax, fabs(get(g[t], f64, i)));
                    for (int64_t i = 0; i < n[t]; i++) u[i] = get(g[t], f64, i) / gmax + 0.5 * urand(&s);
                    for (int64_t i = 0; i < n[t]; i++) put(x[t], f64, i, get(keep, f64, i) + h * u[i]), plus[i] = get(x[t], f64, i);
                    double lp = fd_loss(&p, &c);
                    for (int64_t i = 0; i < n[t]; i++) put(x[t], f64, i, get(keep, f64, i) - h * u[i]);
                    double lm = fd_loss(&p, &c), an = 0;
                    for (int64_t i = 0; i < n[t]; i++) {
                        double di = plus[i] - get(x[t], f64, i);
                        an += get(g[t], f64, i) * di;
                    }
                    memcpy(x[t], keep, (size_t)(n[t] * es));
                    double err = fabs((lp - lm) - an) / fabs(an);
                    CHECK_MSG(err < (f64 ? 1e-8 : 4e-5), "f64 %d causal %d Dh %lld input %d: difference %.9g, gradient %.9g (%g)", f64,
                              causal, (long long)dh, t, lp - lm, an, err);
                    free(keep), free(plus), free(u);
                }
                for (int t = 0; t < 4; t++) free(g[t]);
                prob_free(&p);
            }
}

/* The float32 backward gives the same bits with one thread as with two,
 * where one long sequence makes it split into key-tile and query-tile
 * tasks (every sum runs in the same order either way). */
static void test_backward_threads_agree(void) {
    TEST_BEGIN();
    const int64_t lq[2] = {300, 20}, lk[2] = {290, 40};
    for (int causal = 0; causal < 2; causal++) {
        bw_case c = {.causal = causal, .hq = 2, .hk = 1, .dh = 32, .mask = 2};
        bw_prob p;
        prob_init(&p, &c, 2, lq, lk, 400 + (uint64_t)causal);
        int64_t nq = p.rq * c.hq * c.dh, nk = p.rk * c.hk * c.dh, nm = p.seg[8][2];
        float *r[2][4];
        int threads = omp_get_max_threads();
        CHECK_OK(jag__attention_forward(&p.a, p.out, p.lse));
        for (int run = 0; run < 2; run++) {
            omp_set_num_threads(run ? 2 : 1);
            r[run][0] = calloc((size_t)nq, 4), r[run][1] = calloc((size_t)nk, 4), r[run][2] = calloc((size_t)nk, 4);
            r[run][3] = calloc((size_t)nm, 4);
            CHECK_OK(jag__attention_backward(&p.a, &p.ov, &p.gv, p.lse, (char *)r[run][0], (char *)r[run][1], (char *)r[run][2],
                                             (char *)r[run][3], p.seg[8]));
        }
        omp_set_num_threads(threads);
        int64_t n[4] = {nq, nk, nk, nm}, diff = 0;
        for (int t = 0; t < 4; t++)
            for (int64_t i = 0; i < n[t]; i++) diff += r[0][t][i] != r[1][t][i];
        CHECK_MSG(diff == 0, "causal %d: %lld elements differ", causal, (long long)diff);
        for (int run = 0; run < 2; run++)
            for (int t = 0; t < 4; t++) free(r[run][t]);
        prob_free(&p);
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

/* float32 gradients through the op (the tiled backward, with the output
 * gradient of a sum: one value broadcast to every row) against float64's,
 * causal, or with a mask (whose gradient is the scores'), or neither */
static void test_float32_gradients(void) {
    TEST_BEGIN();
    int64_t lq[4] = {70, 0, 5, 130}, lk[4] = {100, 3, 1, 130};
    for (int causal = 0; causal < 2; causal++)
        for (int masked = 0; masked < 2 - causal; masked++) { /* a mask with causal is refused (test_mask_with_causal) */
            jag_tensor *in[2][4] = {{jagged(lq, 4, 4, 16, 80), jagged(lk, 4, 2, 16, 81), jagged(lk, 4, 2, 16, 82),
                                     nested_mask(lq, lk, 4, 4, false, JAG_FLOAT64, 83)}};
            jag_tensor *g[2][4] = {{0}};
            for (int i = 0; i < 4; i++) CHECK_OK(jag_to_dtype(in[0][i], JAG_FLOAT32, &in[1][i]));
            for (int t = 0; t < 2; t++) {
                jag_tensor *y = NULL, *yv = NULL, *sum = NULL;
                for (int i = 0; i < 4; i++) CHECK_OK(jag_set_requires_grad(in[t][i], true));
                if (masked) CHECK_OK(jag_scaled_dot_product_attention_masked(in[t][0], in[t][1], in[t][2], in[t][3], causal, 0.0, &y));
                else CHECK_OK(jag_scaled_dot_product_attention(in[t][0], in[t][1], in[t][2], causal, 0.0, &y));
                CHECK_OK(jag_nested_values(y, &yv));
                CHECK_OK(jag_sum(yv, NULL, 0, false, &sum));
                CHECK_OK(jag_backward(sum, NULL, false));
                for (int i = 0; i < 3 + masked; i++) {
                    jag_tensor *gr = NULL;
                    CHECK_OK(jag_get_grad(in[t][i], &gr));
                    if (i < 3) CHECK_OK(jag_nested_values(gr, &g[t][i]));
                    else CHECK_OK(jag_nested_buffer(gr, &g[t][i]));
                    jag_release(gr);
                }
                jag_release(y), jag_release(yv), jag_release(sum);
            }
            for (int i = 0; i < 3 + masked; i++)
                CHECK_MSG(g[1][i] && g[0][i] && t_allclose(g[1][i], g[0][i], 1e-4, 1e-5), "causal %d masked %d: gradient %d", causal,
                          masked, i);
            for (int t = 0; t < 2; t++)
                for (int i = 0; i < 4; i++) jag_release(in[t][i]), jag_release(g[t][i]);
        }
}

static void test_masked_jagged(void) {
    TEST_BEGIN();
    int64_t lq[4] = {3, 0, 5, 2}, lk[4] = {4, 2, 5, 3}, dh = 4;
    const bool causal = false; /* a mask with causal is refused (test_mask_with_causal) */
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
    const bool causal = false; /* a mask with causal is refused (test_mask_with_causal) */
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
    bool cz = false;
    CHECK_OK(jag_gradcheck(run_masked, &cz, in, 4, 1e-6, 1e-7, 1e-6));
    int64_t bs[2] = {4, 4};
    jag_tensor *badm = t_rand(bs, 2, JAG_FLOAT64, -1, 1, 64), *o = NULL;
    CHECK_ERR(jag_scaled_dot_product_attention_masked(q, k, v, badm, false, 0, &o), JAG_ESHAPE, "does not broadcast to (B, Hq, Lq, Lk) = (2, 2, 3, 5)");
    CHECK(o == NULL);
    jag_release(badm);
    for (int i = 0; i < 4; i++) jag_release(in[i]);
}

/* torch's scaled_dot_product_attention raises "Explicit attn_mask should
 * not be set when is_causal=True": jag refuses a mask with causal the same
 * way, dense and nested (jagged, and in torch's (B, H, j, D) layout), with
 * and without gradients, and leaves the output untouched. A NULL mask with
 * causal is the plain causal op. */
static void test_mask_with_causal(void) {
    TEST_BEGIN();
    int64_t qs[4] = {2, 2, 3, 4}, ks[4] = {2, 2, 5, 4}, ms[2] = {3, 5};
    jag_tensor *q = t_rand(qs, 4, JAG_FLOAT64, -1, 1, 70), *k = t_rand(ks, 4, JAG_FLOAT64, -1, 1, 71);
    jag_tensor *m = t_rand(ms, 2, JAG_FLOAT64, -1, 1, 72), *o = NULL;
    CHECK_ERR(jag_scaled_dot_product_attention_masked(q, k, k, m, true, 0, &o), JAG_EINVAL,
              "argument 'mask' is set with causal = true");
    CHECK(o == NULL);
    CHECK_OK(jag_set_requires_grad(q, true));
    CHECK_ERR(jag_scaled_dot_product_attention_masked(q, k, k, m, true, 0, &o), JAG_EINVAL,
              "should not be set when causal is true");
    CHECK(o == NULL);
    jag_release(q), jag_release(k), jag_release(m);
    int64_t lq[3] = {3, 0, 4}, lk[3] = {2, 3, 4};
    jag_tensor *qj = jagged(lq, 3, 2, 3, 73), *kj = jagged(lk, 3, 2, 3, 74);
    jag_tensor *mj = nested_mask(lq, lk, 3, 0, false, JAG_FLOAT64, 75);
    CHECK_ERR(jag_scaled_dot_product_attention_masked(qj, kj, kj, mj, true, 0, &o), JAG_EINVAL,
              "argument 'mask' is set with causal = true");
    CHECK(o == NULL);
    jag_tensor *qt = NULL, *kt = NULL;
    CHECK_OK(jag_transpose(qj, 1, 2, &qt));
    CHECK_OK(jag_transpose(kj, 1, 2, &kt));
    CHECK_ERR(jag_scaled_dot_product_attention_masked(qt, kt, kt, mj, true, 0, &o), JAG_EINVAL,
              "argument 'mask' is set with causal = true");
    CHECK(o == NULL);
    /* the same call without causal runs */
    CHECK_OK(jag_scaled_dot_product_attention_masked(qj, kj, kj, mj, false, 0, &o));
    CHECK(o != NULL);
    jag_release(o), jag_release(qt), jag_release(kt), jag_release(qj), jag_release(kj), jag_release(mj);
}

TEST_MAIN(test_mask_with_causal, test_float32_gradients, test_backward_vs_reference, test_backward_finite_differences, test_backward_threads_agree, test_masked_jagged, test_masked_gradients_and_dense, test_tiled_vs_reference, test_jagged_forward, test_jagged_holes_float32, test_dense_forward_and_errors, test_gradients, test_long_float32)
