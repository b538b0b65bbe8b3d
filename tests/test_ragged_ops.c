/* test_ragged_ops.c — jagged ops along the ragged dim (sum, mean, amax,
 * amin to dense (B, D...); softmax and log_softmax down each component) and
 * over the trailing dims (softmax, layer_norm, rms_norm on values), each
 * against the per-component reference and with gradchecks, holes and empty
 * components included. */
#include "test.h"

/* a jagged (B, j, 3) float64 tensor with an empty component; holes when
 * `holes` (lengths shorter than the offsets' spans) */
static jag_tensor *make_jagged(bool holes, uint64_t seed) {
    int64_t vs[2] = {9, 3}, o[5] = {0, 2, 2, 6, 9}, l[4] = {2, 0, 3, 1}, five = 5, four = 4;
    jag_tensor *values = t_rand(vs, 2, JAG_FLOAT64, -2, 2, seed), *offsets = NULL, *lengths = NULL, *nt = NULL;
    if (jag_from_data(o, &five, 1, JAG_INT64, &offsets) || (holes && jag_from_data(l, &four, 1, JAG_INT64, &lengths)) ||
        jag_nested_from_jagged(values, offsets, lengths, &nt)) {
        fprintf(stderr, "make_jagged: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(values), jag_release(offsets), jag_release(lengths);
    return nt;
}

static int unbind_all(const jag_tensor *nt, jag_tensor **c) {
    int n = 0;
    if (jag_nested_unbind(nt, c, 16, &n)) exit(2);
    return n;
}

typedef jag_status (*reduce_fn)(const jag_tensor *, const int *, int, bool, jag_tensor **);

static void test_reductions_over_ragged(void) {
    TEST_BEGIN();
    reduce_fn fns[4] = {jag_sum, jag_mean, jag_amax, jag_amin};
    const char *names[4] = {"sum", "mean", "amax", "amin"};
    for (int holes = 0; holes < 2; holes++)
        for (int k = 0; k < 4; k++)
            for (int keep = 0; keep < 2; keep++) {
                jag_tensor *nt = make_jagged(holes, 10 + (uint64_t)k), *y = NULL, *c[16];
                int d1[1] = {1}, d0[1] = {0};
                int n = unbind_all(nt, c);
                if (k >= 2) { /* the empty component has no max: a clear error */
                    CHECK_ERR(fns[k](nt, d1, 1, keep, &y), JAG_EINVAL, "component 1 is empty");
                } else {
                    CHECK_OK(fns[k](nt, d1, 1, keep, &y));
                    CHECK(y && !jag_is_nested(y) && jag_size(y, 0) == 4 && jag_size(y, keep ? 2 : 1) == 3);
                    for (int b = 0; y && b < n; b++) {
                        jag_tensor *want = NULL, *row = NULL, *r2 = NULL;
                        CHECK_OK(fns[k](c[b], d0, 1, false, &want)); /* (3,): sum 0 / mean NaN when empty */
                        CHECK_OK(jag_select(y, 0, b, &row));
                        if (keep) CHECK_OK(jag_select(row, 0, 0, &r2));
                        CHECK_MSG(t_allclose(keep ? r2 : row, want, 1e-12, 1e-12), "%s holes=%d keep=%d b=%d", names[k], holes,
                                  keep, b);
                        jag_release(want), jag_release(row), jag_release(r2);
                    }
                }
                for (int i = 0; i < n; i++) jag_release(c[i]);
                jag_release(y), jag_release(nt);
            }
    /* amax/amin without empty components: against the reference */
    int64_t vs[2] = {5, 2}, o[3] = {0, 2, 5}, three = 3;
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -1, 1, 3), *off = NULL, *nt = NULL, *y = NULL;
    CHECK_OK(jag_from_data(o, &three, 1, JAG_INT64, &off));
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
    int d1[1] = {-2};
    CHECK_OK(jag_amax(nt, d1, 1, false, &y));
    for (int b = 0; b < 2; b++)
        for (int col = 0; col < 2; col++) {
            double m = -1e9;
            for (int64_t r = o[b]; r < o[b + 1]; r++) m = fmax(m, t_get(v, r * 2 + col));
            CHECK(t_get(y, b * 2 + col) == m);
        }
    jag_release(v), jag_release(off), jag_release(nt), jag_release(y);
}

static void test_softmax_and_norms(void) {
    TEST_BEGIN();
    for (int holes = 0; holes < 2; holes++) {
        jag_tensor *nt = make_jagged(holes, 30), *c[16];
        int n = unbind_all(nt, c);
        /* down each component (the ragged dim), and along the last dim */
        for (int dim = 1; dim <= 2; dim++)
            for (int lg = 0; lg < 2; lg++) {
                jag_tensor *y = NULL, *yc[16];
                CHECK_OK(lg ? jag_log_softmax(nt, dim, &y) : jag_softmax(nt, dim, &y));
                CHECK(jag_is_nested(y) && jag_nested_ragged_id(y) == jag_nested_ragged_id(nt));
                int m = unbind_all(y, yc);
                CHECK(m == n);
                for (int b = 0; b < n; b++) {
                    jag_tensor *want = NULL;
                    CHECK_OK(lg ? jag_log_softmax(c[b], dim - 1, &want) : jag_softmax(c[b], dim - 1, &want));
                    CHECK_MSG(t_allclose(yc[b], want, 1e-12, 1e-12), "softmax dim %d log %d holes %d comp %d", dim, lg, holes, b);
                    jag_release(want), jag_release(yc[b]);
                }
                jag_release(y);
            }
        /* layer_norm and rms_norm over the last dim, with weight and bias */
        int64_t three = 3;
        jag_tensor *w = t_rand(&three, 1, JAG_FLOAT64, 0.5, 1.5, 31), *bias = t_rand(&three, 1, JAG_FLOAT64, -1, 1, 32);
        jag_tensor *ln = NULL, *rn = NULL, *lc[16], *rc[16];
        CHECK_OK(jag_layer_norm(nt, 1, w, bias, 1e-5, &ln));
        CHECK_OK(jag_rms_norm(nt, 1, w, 1e-6, &rn));
        unbind_all(ln, lc), unbind_all(rn, rc);
        for (int b = 0; b < n; b++) {
            jag_tensor *wl = NULL, *wr = NULL;
            CHECK_OK(jag_layer_norm(c[b], 1, w, bias, 1e-5, &wl));
            CHECK_OK(jag_rms_norm(c[b], 1, w, 1e-6, &wr));
            CHECK(t_allclose(lc[b], wl, 1e-12, 1e-12) && t_allclose(rc[b], wr, 1e-12, 1e-12));
            jag_release(wl), jag_release(wr), jag_release(lc[b]), jag_release(rc[b]);
        }
        jag_tensor *o = NULL;
        CHECK_ERR(jag_layer_norm(nt, 2, NULL, NULL, 1e-5, &o), JAG_ENOTIMPL, "normalize over trailing dims after the ragged one");
        CHECK(o == NULL);
        for (int i = 0; i < n; i++) jag_release(c[i]);
        jag_release(w), jag_release(bias), jag_release(ln), jag_release(rn), jag_release(nt);
    }
}

/* ---- gradients ----------------------------------------------------------- */

typedef struct {
    int kind; /* 0 sum, 1 mean, 2 amax, 3 softmax ragged, 4 log_softmax ragged, 5 softmax last, 6 layer_norm */
    bool keep;
} gcase;

static jag_status run_case(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    gcase *g = ctx;
    int d1[1] = {1};
    switch (g->kind) {
    case 0: return jag_sum(in[0], d1, 1, g->keep, out);
    case 1: return jag_mean(in[0], d1, 1, g->keep, out);
    case 2: return jag_amax(in[0], d1, 1, g->keep, out);
    case 3: return jag_softmax(in[0], 1, out);
    case 4: return jag_log_softmax(in[0], 1, out);
    case 5: return jag_softmax(in[0], -1, out);
    default: return jag_layer_norm(in[0], 1, in[1], in[2], 1e-5, out);
    }
}

static void test_gradients(void) {
    TEST_BEGIN();
    for (int holes = 0; holes < 2; holes++)
        for (int kind = 0; kind <= 6; kind++) {
            gcase g = {kind, holes == 1};
            jag_tensor *nt = NULL;
            if (kind == 1 || kind == 2) { /* no empty component: mean and max need rows */
                int64_t vs[2] = {7, 3}, o[4] = {0, 2, 5, 7}, four = 4;
                jag_tensor *v = t_rand(vs, 2, JAG_FLOAT64, -2, 2, 40 + (uint64_t)kind), *off = NULL;
                CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &off));
                CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
                jag_release(v), jag_release(off);
            } else {
                nt = make_jagged(holes, 50 + (uint64_t)kind);
            }
            CHECK_OK(jag_set_requires_grad(nt, true));
            int64_t three = 3;
            jag_tensor *w = t_rand(&three, 1, JAG_FLOAT64, 0.5, 1.5, 60), *b = t_rand(&three, 1, JAG_FLOAT64, -1, 1, 61);
            CHECK_OK(jag_set_requires_grad(w, true));
            CHECK_OK(jag_set_requires_grad(b, true));
            jag_tensor *in[3] = {nt, w, b};
            jag_status st = jag_gradcheck(run_case, &g, in, kind == 6 ? 3 : 1, 1e-6, 1e-7, 1e-6);
            CHECK_MSG(st == JAG_OK, "kind %d holes %d: %s", kind, holes, jag_last_error());
            /* the gradient is a nested tensor around the same offsets */
            jag_tensor *y = NULL, *s = NULL, *vals = NULL, *grad = NULL, *go = NULL, *io = NULL;
            CHECK_OK(run_case(in, 3, &y, &g));
            if (jag_is_nested(y)) CHECK_OK(jag_nested_values(y, &vals));
            CHECK_OK(jag_sum(vals ? vals : y, NULL, 0, false, &s));
            jag_zero_grad(nt);
            CHECK_OK(jag_backward(s, NULL, false));
            CHECK_OK(jag_get_grad(nt, &grad));
            CHECK_OK(jag_nested_offsets(grad, &go));
            CHECK_OK(jag_nested_offsets(nt, &io));
            CHECK(go == io);
            jag_release(y), jag_release(s), jag_release(vals), jag_release(grad), jag_release(go), jag_release(io);
            jag_release(nt), jag_release(w), jag_release(b);
        }
}

/* ---- structure: select, narrow along the ragged dim, embedding ----------- */

static jag_status run_select(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    return jag_select(in[0], 0, 2, out);
}

/* through to_padded: the narrowed tensor's holes are not part of its value
 * (gradcheck would otherwise perturb rows the view does not contain) */
static jag_status run_narrow(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    jag_tensor *y = NULL;
    jag_status st = jag_narrow(in[0], 1, 0, 2, &y);
    if (!st) st = jag_nested_to_padded(y, 0.0, NULL, 0, out);
    jag_release(y);
    return st;
}

static jag_status run_embedding(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    return jag_embedding(in[0], ctx, out);
}

static void test_structure_ops(void) {
    TEST_BEGIN();
    for (int holes = 0; holes < 2; holes++) {
        jag_tensor *nt = make_jagged(holes, 70), *c[16], *sel = NULL, *nar = NULL, *nc[16];
        int n = unbind_all(nt, c);
        CHECK_OK(jag_select(nt, 0, 2, &sel)); /* one component, no unbinding */
        CHECK(!jag_is_nested(sel) && t_allclose(sel, c[2], 0, 0));
        /* a start past a component's end is refused, as dense narrow refuses it
         * (component 1 of make_jagged is empty) */
        CHECK_ERR(jag_narrow(nt, 1, 1, 2, &nar), JAG_ERANGE, "past the end of component 1");
        CHECK(nar == NULL);
        CHECK_OK(jag_narrow(nt, 1, 0, 2, &nar)); /* rows 0..1 of each component: holes */
        CHECK(jag_is_nested(nar) && jag_nested_ragged_id(nar) != jag_nested_ragged_id(nt));
        int m = unbind_all(nar, nc);
        CHECK(m == n);
        for (int b = 0; b < n; b++) {
            int64_t lb = jag_size(c[b], 0), from = 0, len = lb < 2 ? lb : 2;
            jag_tensor *want = NULL;
            CHECK_OK(jag_narrow(c[b], 0, from, len, &want));
            CHECK_MSG(t_allclose(nc[b], want, 0, 0), "narrow comp %d", b);
            jag_release(want), jag_release(nc[b]);
        }
        jag_tensor *o = NULL;
        CHECK_ERR(jag_select(nt, 0, 4, &o), JAG_ERANGE, "argument 'index' is 4");
        CHECK_ERR(jag_narrow(nt, 1, -1, 2, &o), JAG_ERANGE, "must be >= 0");
        CHECK(o == NULL);
        /* gradients */
        CHECK_OK(jag_set_requires_grad(nt, true));
        CHECK_OK(jag_gradcheck(run_select, NULL, &nt, 1, 1e-6, 1e-8, 1e-6));
        CHECK_OK(jag_gradcheck(run_narrow, NULL, &nt, 1, 1e-6, 1e-8, 1e-6));
        for (int i = 0; i < n; i++) jag_release(c[i]);
        jag_release(sel), jag_release(nar), jag_release(nt);
    }
    /* embedding: nested indices -> nested embeddings, and the weight's gradient */
    int64_t ids[6] = {3, 1, 3, 0, 4, 1}, six = 6, o[4] = {0, 2, 2, 6}, four = 4, ws[2] = {5, 3};
    jag_tensor *iv = NULL, *off = NULL, *ix = NULL, *w = t_rand(ws, 2, JAG_FLOAT64, -1, 1, 71), *e = NULL, *ec[4];
    CHECK_OK(jag_from_data(ids, &six, 1, JAG_INT64, &iv));
    CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &off));
    CHECK_OK(jag_nested_from_jagged(iv, off, NULL, &ix));
    CHECK_OK(jag_embedding(w, ix, &e));
    CHECK(jag_is_nested(e) && jag_ndim(e) == 3 && jag_size(e, 2) == 3);
    int m = unbind_all(e, ec);
    CHECK(m == 3 && jag_size(ec[1], 0) == 0 && jag_size(ec[2], 0) == 4);
    for (int k = 0; k < 3; k++) CHECK(t_get(ec[2], 0 * 3 + k) == t_get(w, 3 * 3 + k)); /* ids[2] = 3 */
    for (int i = 0; i < m; i++) jag_release(ec[i]);
    CHECK_OK(jag_set_requires_grad(w, true));
    CHECK_OK(jag_gradcheck(run_embedding, ix, &w, 1, 1e-6, 1e-8, 1e-6));
    jag_release(iv), jag_release(off), jag_release(ix), jag_release(w), jag_release(e);
}

/* ---- clamp, dropout, row ids and lengths --------------------------------- */

static jag_status run_clamp(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    return jag_clamp(in[0], -0.5, 0.7, out);
}

static void test_clamp_dropout_rowids(void) {
    TEST_BEGIN();
    jag_tensor *nt = make_jagged(true, 80), *y = NULL, *c[16], *yc[16];
    int n = unbind_all(nt, c);
    CHECK_OK(jag_clamp(nt, -0.5, 0.7, &y));
    unbind_all(y, yc);
    for (int b = 0; b < n; b++) {
        for (int64_t i = 0; i < jag_numel(c[b]); i++) CHECK(t_get(yc[b], i) == fmin(fmax(t_get(c[b], i), -0.5), 0.7));
        jag_release(yc[b]);
    }
    jag_release(y);
    jag_tensor *o = NULL;
    CHECK_ERR(jag_clamp(nt, 1, 0, &o), JAG_EINVAL, "expected lo <= hi");
    CHECK_OK(jag_set_requires_grad(nt, true));
    CHECK_OK(jag_gradcheck(run_clamp, NULL, &nt, 1, 1e-6, 1e-8, 1e-6));
    /* dropout: reproducible with a seeded generator, zero or scaled */
    jag_generator *g1 = NULL, *g2 = NULL;
    CHECK_OK(jag_generator_new(9, &g1));
    CHECK_OK(jag_generator_new(9, &g2));
    jag_tensor *d1 = NULL, *d2 = NULL, *v = NULL, *v1 = NULL, *v2 = NULL, *same = NULL;
    int64_t big = 20000;
    CHECK_OK(jag_ones(&big, 1, JAG_FLOAT32, &v));
    CHECK_OK(jag_dropout(v, 0.25, true, g1, &d1));
    CHECK_OK(jag_dropout(v, 0.25, true, g2, &d2));
    CHECK(t_allclose(d1, d2, 0, 0));
    int64_t zeros = 0;
    for (int64_t i = 0; i < big; i++) {
        double x = t_get(d1, i);
        CHECK(x == 0 || fabs(x - 1 / 0.75) < 1e-6);
        zeros += x == 0;
    }
    CHECK_CLOSE((double)zeros / (double)big, 0.25, 0.02);
    CHECK_OK(jag_dropout(v, 0.25, false, g1, &same));
    CHECK(same == v);
    CHECK_ERR(jag_dropout(v, 1.5, true, g1, &o), JAG_EINVAL, "expected 0 <= p <= 1");
    CHECK(o == NULL);
    { /* p == 1: torch returns input * 0 (zeros; NaN where the input is inf
       * or NaN), gradient 0, dense and nested alike */
        int64_t four = 4;
        float xs[4] = {1.5f, -2.0f, INFINITY, 0.25f};
        jag_tensor *x = NULL, *all = NULL, *loss = NULL, *gx = NULL, *an = NULL;
        CHECK_OK(jag_from_data(xs, &four, 1, JAG_FLOAT32, &x));
        CHECK_OK(jag_set_requires_grad(x, true));
        CHECK_OK(jag_dropout(x, 1.0, true, g1, &all));
        CHECK(t_get(all, 0) == 0 && t_get(all, 1) == 0 && isnan(t_get(all, 2)) && t_get(all, 3) == 0);
        CHECK_OK(jag_sum(all, NULL, 0, false, &loss));
        CHECK_OK(jag_backward(loss, NULL, false));
        CHECK_OK(jag_get_grad(x, &gx));
        for (int i = 0; i < 4; i++) CHECK(t_get(gx, i) == 0);
        CHECK_OK(jag_dropout(nt, 1.0, true, g1, &an));
        CHECK(jag_is_nested(an) && jag_nested_ragged_id(an) == jag_nested_ragged_id(nt));
        jag_tensor *parts[16];
        int np_ = unbind_all(an, parts);
        for (int b = 0; b < np_; b++) {
            for (int64_t i = 0; i < jag_numel(parts[b]); i++) CHECK(t_get(parts[b], i) == 0);
            jag_release(parts[b]);
        }
        jag_release(x), jag_release(all), jag_release(loss), jag_release(gx), jag_release(an);
    }
    jag_tensor *dn = NULL;
    CHECK_OK(jag_dropout(nt, 0.5, true, g1, &dn)); /* nested too */
    CHECK(jag_is_nested(dn) && jag_nested_ragged_id(dn) == jag_nested_ragged_id(nt));
    /* the mask against its formula from the ops, from the same seed:
     * x * ((u >= p) / (1 - p)), u = rand_like(x); a jagged x draws u over its
     * values, so its result is the dense dropout of its values; the gradient
     * is the mask */
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        int64_t ms[2] = {37, 5};
        jag_tensor *x = t_rand(ms, 2, dt, -2, 2, 85), *u = NULL, *keep = NULL, *m01 = NULL, *m = NULL, *want = NULL, *got = NULL;
        jag_generator *ga = NULL, *gb = NULL;
        CHECK_OK(jag_generator_new(31, &ga));
        CHECK_OK(jag_generator_new(31, &gb));
        CHECK_OK(jag_rand_like(x, ga, &u));
        CHECK_OK(jag_ge_scalar(u, 0.3, &keep));
        CHECK_OK(jag_to_dtype(keep, dt, &m01));
        CHECK_OK(jag_mul_scalar(m01, 1.0 / 0.7, &m));
        CHECK_OK(jag_mul(x, m, &want));
        CHECK_OK(jag_dropout(x, 0.3, true, gb, &got));
        CHECK_MSG(got && want && t_allclose(got, want, 0, 0), "dropout %s against its formula", jag_dtype_name(dt));
        jag_tensor *nd = NULL, *nv = NULL, *dv = NULL, *vals = NULL, *gd = NULL;
        jag_generator *gc = NULL, *gd2 = NULL;
        for (int holes = 0; holes < 2; holes++) {
            jag_tensor *n64 = make_jagged(holes, 86), *nx = NULL;
            CHECK_OK(jag_to_dtype(n64, dt, &nx));
            CHECK_OK(jag_nested_values(nx, &vals));
            CHECK_OK(jag_generator_new(32, &gc));
            CHECK_OK(jag_generator_new(32, &gd2));
            CHECK_OK(jag_set_requires_grad(nx, true));
            CHECK_OK(jag_dropout(nx, 0.4, true, gc, &nd));
            CHECK_OK(jag_dropout(vals, 0.4, true, gd2, &dv));
            if (nd) CHECK_OK(jag_nested_values(nd, &nv));
            CHECK_MSG(nv && dv && t_allclose(nv, dv, 0, 0), "nested dropout (%s, holes %d) against the dense one of its values",
                      jag_dtype_name(dt), holes);
            /* the gradient of sum(dropout(x)) is the mask: dv / vals where vals is not 0 */
            jag_tensor *sum = NULL;
            CHECK_OK(jag_sum(nv, NULL, 0, false, &sum));
            CHECK_OK(jag_backward(sum, NULL, false));
            CHECK_OK(jag_get_grad(nx, &gd));
            jag_tensor *gvals = NULL;
            if (gd) CHECK_OK(jag_nested_values(gd, &gvals));
            for (int64_t i = 0; gvals && i < jag_numel(vals); i++) {
                double mk = t_get(dv, i) == 0 ? 0 : 1 / 0.6;
                if (t_get(vals, i) != 0) CHECK_MSG(fabs(t_get(gvals, i) - mk) < 1e-6, "dropout gradient element %lld", (long long)i);
            }
            jag_release(sum), jag_release(gvals), jag_release(gd), gd = NULL;
            jag_release(nd), jag_release(nv), jag_release(dv), jag_release(vals), nd = nv = dv = vals = NULL;
            jag_generator_free(gc), jag_generator_free(gd2);
            jag_release(nx), jag_release(n64);
        }
        jag_generator_free(ga), jag_generator_free(gb);
        jag_release(x), jag_release(u), jag_release(keep), jag_release(m01), jag_release(m), jag_release(want), jag_release(got);
    }
    /* row ids and lengths */
    CHECK_OK(jag_nested_row_ids(nt, &v1));
    CHECK_OK(jag_nested_seq_lengths(nt, &v2));
    int64_t want_ids[9] = {0, 0, 2, 2, 2, 2, 3, 3, 3}, want_len[4] = {2, 0, 3, 1};
    for (int i = 0; i < 9; i++) CHECK(t_get(v1, i) == want_ids[i]);
    for (int i = 0; i < 4; i++) CHECK(t_get(v2, i) == want_len[i]);
    /* without holes: derived once and cached (the same tensors come back) */
    jag_tensor *full = make_jagged(false, 81), *l1 = NULL, *l2 = NULL, *r1 = NULL, *r2 = NULL;
    CHECK_OK(jag_nested_seq_lengths(full, &l1));
    CHECK_OK(jag_nested_seq_lengths(full, &l2));
    CHECK_OK(jag_nested_row_ids(full, &r1));
    CHECK_OK(jag_nested_row_ids(full, &r2));
    CHECK(l1 == l2 && r1 == r2);
    int64_t want_full[4] = {2, 0, 4, 3};
    for (int i = 0; i < 4; i++) CHECK(t_get(l1, i) == want_full[i]);
    jag_release(l1), jag_release(l2), jag_release(r1), jag_release(r2), jag_release(full);
    for (int i = 0; i < n; i++) jag_release(c[i]);
    jag_release(nt), jag_release(v), jag_release(d1), jag_release(d2), jag_release(same), jag_release(dn);
    jag_release(v1), jag_release(v2);
    jag_generator_free(g1), jag_generator_free(g2);
}


/* ---- more reductions over the ragged dim, and over it with trailing dims -- */

/* a jagged (4, j, trail...) tensor of dtype dt: components of 2, 0 (unless
 * `full`), 3, 1 rows; with holes the offsets' spans are longer */
static jag_tensor *make_nt(bool holes, bool full, jag_dtype dt, const int64_t *trail, int nt, uint64_t seed) {
    int64_t vs[JAG_MAX_DIMS] = {11}, o[5] = {0, 2, full ? 4 : 2, 8, 11}, l[4] = {2, full ? 1 : 0, 3, 1}, five = 5, four = 4;
    if (!holes) o[1] = 2, o[2] = full ? 3 : 2, o[3] = o[2] + 3, o[4] = o[3] + 1, vs[0] = o[4];
    for (int i = 0; i < nt; i++) vs[1 + i] = trail[i];
    jag_tensor *values = t_rand(vs, 1 + nt, dt, -2, 2, seed), *offsets = NULL, *lengths = NULL, *out = NULL;
    if (jag_from_data(o, &five, 1, JAG_INT64, &offsets) || (holes && jag_from_data(l, &four, 1, JAG_INT64, &lengths)) ||
        jag_nested_from_jagged(values, offsets, lengths, &out)) {
        fprintf(stderr, "make_nt: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(values), jag_release(offsets), jag_release(lengths);
    return out;
}

typedef enum { R_SUM, R_MEAN, R_AMAX, R_AMIN, R_LSE, R_VAR, R_STD, R_N } rkind;
static const char *rk_name[] = {"sum", "mean", "amax", "amin", "logsumexp", "var", "std"};

static jag_status rk_call(rkind k, const jag_tensor *x, const int *dims, int n, int64_t corr, bool keep, jag_tensor **out) {
    switch (k) {
    case R_SUM: return jag_sum(x, dims, n, keep, out);
    case R_MEAN: return jag_mean(x, dims, n, keep, out);
    case R_AMAX: return jag_amax(x, dims, n, keep, out);
    case R_AMIN: return jag_amin(x, dims, n, keep, out);
    case R_LSE: return jag_logsumexp(x, dims, n, keep, out);
    case R_VAR: return jag_var(x, dims, n, corr, keep, out);
    default: return jag_std(x, dims, n, corr, keep, out);
    }
}

/* y (B, ...) dense against the op on each component with dims shifted by one */
static void check_per_component(rkind k, const jag_tensor *nt, const jag_tensor *y, const int *dims, int n, int64_t corr,
                                bool keep, double tol, const char *what) {
    jag_tensor *c[16];
    int nb = unbind_all(nt, c), cd[JAG_MAX_DIMS];
    for (int i = 0; i < n; i++) cd[i] = (dims[i] < 0 ? dims[i] + jag_ndim(nt) : dims[i]) - 1;
    CHECK_MSG(y && !jag_is_nested(y) && jag_size(y, 0) == nb, "%s %s: dense (B, ...)", rk_name[k], what);
    for (int b = 0; y && b < nb; b++) {
        jag_tensor *want = NULL, *row = NULL;
        CHECK_OK(rk_call(k, c[b], cd, n, corr, keep, &want));
        CHECK_OK(jag_select(y, 0, b, &row));
        CHECK_MSG(want && row && t_allclose(row, want, tol, tol), "%s %s comp %d", rk_name[k], what, b);
        jag_release(want), jag_release(row);
    }
    for (int i = 0; i < nb; i++) jag_release(c[i]);
}

static void test_more_reductions_over_ragged(void) {
    TEST_BEGIN();
    const int64_t t3[1] = {3}, t23[2] = {2, 3};
    static const int sets[][3] = {{1}, {1, 2}, {1, 3}, {3, 1}, {1, 2, 3}, {-3, -1}};
    static const int set_n[] = {1, 2, 2, 2, 3, 2};
    for (int f = 0; f < 2; f++)
        for (int holes = 0; holes < 2; holes++)
            for (int full = 0; full < 2; full++) {
                jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
                double tol = f ? 1e-12 : 2e-5;
                jag_tensor *x3 = make_nt(holes, full, dt, t3, 1, 100 + (uint64_t)(holes * 2 + full));
                jag_tensor *x4 = make_nt(holes, full, dt, t23, 2, 110 + (uint64_t)(holes * 2 + full));
                for (int k = 0; k < R_N; k++)
                    for (int keep = 0; keep < 2; keep++)
                        for (int corr = 0; corr < (k >= R_VAR ? 2 : 1); corr++) {
                            char what[96];
                            bool needs_rows = k == R_AMAX || k == R_AMIN;
                            /* (B, j, 3) over the ragged dim */
                            jag_tensor *y = NULL;
                            int d1[1] = {1};
                            snprintf(what, sizeof what, "%s holes %d full %d keep %d corr %d", jag_dtype_name(dt), holes, full, keep, corr);
                            if (needs_rows && !full) {
                                CHECK_ERR(rk_call((rkind)k, x3, d1, 1, corr, keep, &y), JAG_EINVAL, "component 1 is empty");
                                CHECK(y == NULL);
                            } else {
                                CHECK_OK(rk_call((rkind)k, x3, d1, 1, corr, keep, &y));
                                check_per_component((rkind)k, x3, y, d1, 1, corr, keep, tol, what);
                            }
                            jag_release(y);
                            /* (B, j, 2, 3) over the ragged dim with trailing dims */
                            for (size_t si = 0; si < sizeof set_n / sizeof set_n[0]; si++) {
                                y = NULL;
                                snprintf(what, sizeof what, "%s dims set %d holes %d full %d keep %d corr %d", jag_dtype_name(dt),
                                         (int)si, holes, full, keep, corr);
                                if (needs_rows && !full) {
                                    CHECK_ERR(rk_call((rkind)k, x4, sets[si], set_n[si], corr, keep, &y), JAG_EINVAL,
                                              "component 1 is empty");
                                } else {
                                    CHECK_OK(rk_call((rkind)k, x4, sets[si], set_n[si], corr, keep, &y));
                                    check_per_component((rkind)k, x4, y, sets[si], set_n[si], corr, keep, tol, what);
                                }
                                jag_release(y);
                            }
                        }
                /* max_dim / min_dim / argmax / argmin along the ragged dim */
                for (int mx = 0; mx < 2; mx++)
                    for (int keep = 0; keep < 2; keep++) {
                        jag_tensor *v = NULL, *ix = NULL, *am = NULL;
                        jag_status st = (mx ? jag_max_dim : jag_min_dim)(x3, 1, keep, &v, &ix);
                        jag_status st2 = (mx ? jag_argmax : jag_argmin)(x3, 1, keep, &am);
                        if (!full) {
                            CHECK(st == JAG_EINVAL && st2 == JAG_EINVAL && v == NULL && ix == NULL && am == NULL);
                            CHECK(strstr(jag_last_error(), "component 1 is empty") != NULL);
                            continue;
                        }
                        CHECK_OK(st);
                        CHECK_OK(st2);
                        CHECK(jag_tensor_dtype(ix) == JAG_INT64 && jag_tensor_dtype(am) == JAG_INT64);
                        jag_tensor *c[16];
                        int nb = unbind_all(x3, c);
                        for (int b = 0; b < nb; b++) {
                            jag_tensor *wv = NULL, *wi = NULL, *rv = NULL, *ri = NULL, *ra = NULL;
                            CHECK_OK((mx ? jag_max_dim : jag_min_dim)(c[b], 0, keep, &wv, &wi));
                            CHECK_OK(jag_select(v, 0, b, &rv));
                            CHECK_OK(jag_select(ix, 0, b, &ri));
                            CHECK_OK(jag_select(am, 0, b, &ra));
                            CHECK_MSG(t_allclose(rv, wv, 0, 0) && t_allclose(ri, wi, 0, 0) && t_allclose(ra, wi, 0, 0),
                                      "max %d keep %d comp %d", mx, keep, b);
                            jag_release(wv), jag_release(wi), jag_release(rv), jag_release(ri), jag_release(ra), jag_release(c[b]);
                        }
                        jag_release(v), jag_release(ix), jag_release(am);
                    }
                jag_release(x3), jag_release(x4);
            }
    /* NaN wins max and argmax; ties give the first row */
    double vals[6] = {1, 5, NAN, 5, 2, 5};
    int64_t vs[2] = {3, 2}, o[3] = {0, 2, 3}, three = 3;
    jag_tensor *v = t_from(vals, vs, 2, JAG_FLOAT64), *off = NULL, *nt = NULL, *y = NULL, *ix = NULL;
    CHECK_OK(jag_from_data(o, &three, 1, JAG_INT64, &off));
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
    CHECK_OK(jag_max_dim(nt, 1, false, &y, &ix));
    CHECK(isnan(t_get(y, 0)) && t_get(y, 1) == 5 && t_get(ix, 0) == 1 && t_get(ix, 1) == 0);
    jag_release(y), jag_release(ix);
    /* errors: the batch dim, a repeated dim, integer values; inputs untouched */
    int bad0[2] = {0, 1}, bad1[2] = {1, -2}, bad2[2] = {1, 5};
    jag_tensor *o2 = NULL;
    CHECK_ERR(jag_sum(nt, bad0, 2, false, &o2), JAG_ENOTIMPL, "jag_sum: reducing over the batch dim (0)");
    CHECK_ERR(jag_var(nt, bad1, 2, 1, false, &o2), JAG_EINVAL, "jag_var: dim -2 appears twice");
    CHECK_ERR(jag_logsumexp(nt, bad2, 2, false, &o2), JAG_ERANGE, "jag_logsumexp: dim 5 is out of range");
    CHECK(o2 == NULL);
    CHECK(isnan(t_get(v, 2)) && t_get(v, 0) == 1);
    int64_t iv[3] = {1, 2, 3};
    jag_tensor *ivt = NULL, *ioff = NULL, *int_nt = NULL;
    int64_t o1[3] = {0, 1, 3};
    CHECK_OK(jag_from_data(iv, &three, 1, JAG_INT64, &ivt));
    CHECK_OK(jag_from_data(o1, &three, 1, JAG_INT64, &ioff));
    CHECK_OK(jag_nested_from_jagged(ivt, ioff, NULL, &int_nt));
    /* integer values: argmax of (1), (2, 3) by hand; logsumexp refused */
    CHECK_OK(jag_argmax(int_nt, 1, false, &o2));
    CHECK(o2 && jag_tensor_dtype(o2) == JAG_INT64 && t_get(o2, 0) == 0 && t_get(o2, 1) == 1);
    jag_release(o2), o2 = NULL;
    CHECK_ERR(jag_logsumexp(int_nt, (int[]){1}, 1, false, &o2), JAG_EDTYPE, "needs float values");
    CHECK(o2 == NULL);
    jag_release(v), jag_release(off), jag_release(nt), jag_release(ivt), jag_release(ioff), jag_release(int_nt);
}

/* a jagged tensor of `n` components of lens[i] rows and 3 columns; with
 * `hole`, each component's span in the values is one row longer than it */
static jag_tensor *rows_nt(const int64_t *lens, int n, bool hole, jag_dtype dt, uint64_t seed) {
    int64_t o[8] = {0}, l[8], nb1 = n + 1, nb = n;
    for (int i = 0; i < n; i++) o[i + 1] = o[i] + lens[i] + hole, l[i] = lens[i];
    int64_t vs[2] = {o[n], 3};
    jag_tensor *values = t_rand(vs, 2, dt, -2, 2, seed), *offsets = NULL, *lengths = NULL, *out = NULL;
    if (jag_from_data(o, &nb1, 1, JAG_INT64, &offsets) || (hole && jag_from_data(l, &nb, 1, JAG_INT64, &lengths)) ||
        jag_nested_from_jagged(values, offsets, lengths, &out)) {
        fprintf(stderr, "rows_nt: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(values), jag_release(offsets), jag_release(lengths);
    return out;
}

static jag_status traced_sum(void *ctx, jag_tensor *const *in, int n_in, jag_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    return jag_sum(in[0], (int[]){1}, 1, false, out);
}

/* A batch of one component reduced over the ragged dim (which runs the dense
 * op on its values when small): the same numbers as that component gives inside a batch
 * of three (the ragged kernels), the shape of the nested result, keepdim and
 * a component with a hole after it included; a program traced on a batch of
 * one runs a batch of three as eager does. */
static void test_reductions_batch_of_one(void) {
    TEST_BEGIN();
    for (int f = 0; f < 2; f++)
        for (int li = 0; li < 3; li++) /* 400 x 3: past the size the dense op takes */
            for (int hole = 0; hole < 2; hole++) {
                const int64_t L = (int64_t[]){1, 7, 400}[li];
                jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
                double tol = f ? 1e-12 : 2e-6;
                int64_t lens3[3] = {2, L, 4};
                jag_tensor *one = rows_nt(&L, 1, hole, dt, 300 + (uint64_t)L), *three = rows_nt(lens3, 3, false, dt, 301), *c = NULL;
                /* component 1 of `three` holds the same rows as `one` */
                jag_tensor *one_vals = NULL, *three_vals = NULL, *dst = NULL;
                CHECK_OK(jag_nested_values(one, &one_vals));
                CHECK_OK(jag_nested_values(three, &three_vals));
                CHECK_OK(jag_narrow(one_vals, 0, 0, L, &c));
                CHECK_OK(jag_narrow(three_vals, 0, 2, L, &dst));
                CHECK_OK(jag_copy_(dst, c));
                jag_release(c), jag_release(dst), jag_release(one_vals), jag_release(three_vals);
                int d1[1] = {1};
                for (int k = 0; k < R_N; k++)
                    for (int keep = 0; keep < 2; keep++)
                        for (int corr = 0; corr < (k >= R_VAR ? 2 : 1); corr++) {
                            jag_tensor *y1 = NULL, *y3 = NULL, *row = NULL, *want = NULL;
                            CHECK_OK(rk_call((rkind)k, one, d1, 1, corr, keep, &y1));
                            CHECK_OK(rk_call((rkind)k, three, d1, 1, corr, keep, &y3));
                            CHECK_OK(jag_narrow(y3, 0, 1, 1, &row));
                            CHECK_OK(jag_contiguous(row, &want));
                            CHECK_MSG(y1 && !jag_is_nested(y1) && jag_ndim(y1) == 2 + keep && jag_size(y1, 0) == 1 &&
                                          jag_size(y1, 1 + keep) == 3 && (!keep || jag_size(y1, 1) == 1),
                                      "%s keep %d: shape", rk_name[k], keep);
                            CHECK_MSG(want && y1 && t_allclose(y1, want, tol, tol), "%s %s L %lld hole %d keep %d corr %d",
                                      rk_name[k], jag_dtype_name(dt), (long long)L, hole, keep, corr);
                            jag_release(y1), jag_release(y3), jag_release(row), jag_release(want);
                        }
                for (int mx = 0; mx < 2; mx++)
                    for (int keep = 0; keep < 2; keep++) {
                        jag_tensor *v1 = NULL, *i1 = NULL, *a1 = NULL, *v3 = NULL, *i3 = NULL, *a3 = NULL;
                        CHECK_OK((mx ? jag_max_dim : jag_min_dim)(one, 1, keep, &v1, &i1));
                        CHECK_OK((mx ? jag_argmax : jag_argmin)(one, 1, keep, &a1));
                        CHECK_OK((mx ? jag_max_dim : jag_min_dim)(three, 1, keep, &v3, &i3));
                        CHECK_OK((mx ? jag_argmax : jag_argmin)(three, 1, keep, &a3));
                        jag_tensor *r[3] = {NULL}, *w[3] = {NULL}, *got[3] = {v1, i1, a1}, *all[3] = {v3, i3, a3};
                        for (int q = 0; q < 3; q++) {
                            CHECK_OK(jag_narrow(all[q], 0, 1, 1, &r[q]));
                            CHECK_OK(jag_contiguous(r[q], &w[q]));
                            CHECK_MSG(got[q] && w[q] && jag_ndim(got[q]) == 2 + keep && t_allclose(got[q], w[q], 0, 0),
                                      "max %d keep %d output %d L %lld hole %d", mx, keep, q, (long long)L, hole);
                            jag_release(r[q]), jag_release(w[q]);
                        }
                        CHECK(jag_tensor_dtype(i1) == JAG_INT64 && jag_tensor_dtype(a1) == JAG_INT64);
                        jag_release(v1), jag_release(i1), jag_release(a1), jag_release(v3), jag_release(i3), jag_release(a3);
                    }
                jag_release(one), jag_release(three);
            }
    /* traced on a batch of one, run on batches of three and one */
    int64_t L = 5, lens3[3] = {2, 5, 4};
    jag_tensor *one = rows_nt(&L, 1, false, JAG_FLOAT64, 310), *three = rows_nt(lens3, 3, false, JAG_FLOAT64, 311);
    jag_trace *tr = NULL;
    jag_program *prog = NULL;
    CHECK_OK(jag_trace_function(traced_sum, NULL, &one, 1, NULL, 1, &tr));
    CHECK_OK(jag_trace_compile(tr, JAG_PASSES_ALL, &prog));
    jag_tensor *inputs[2] = {three, one};
    for (int i = 0; prog && i < 2; i++) {
        jag_tensor *got = NULL, *want = NULL;
        CHECK_OK(jag_program_run(prog, &inputs[i], 1, &got, 1));
        CHECK_OK(jag_sum(inputs[i], (int[]){1}, 1, false, &want));
        CHECK_MSG(got && want && jag_size(got, 0) == jag_size(want, 0) && t_allclose(got, want, 1e-12, 1e-12),
                  "compiled sum, batch of %lld", (long long)jag_size(inputs[i], 0));
        jag_release(got), jag_release(want);
    }
    jag_program_free(prog), jag_trace_free(tr);
    jag_release(one), jag_release(three);
}

typedef struct {
    int k; /* rkind, or R_N for max_dim, R_N + 1 for min_dim */
    int dims[3], n;
    int64_t corr;
    bool keep;
} rcase;

static jag_status run_rcase(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    rcase *r = ctx;
    if (r->k >= R_N) {
        jag_tensor *ix = NULL;
        jag_status st = (r->k == R_N ? jag_max_dim : jag_min_dim)(in[0], r->dims[0], r->keep, out, &ix);
        jag_release(ix);
        return st;
    }
    return rk_call((rkind)r->k, in[0], r->dims, r->n, r->corr, r->keep, out);
}

static void test_more_reduction_gradients(void) {
    TEST_BEGIN();
    const int64_t t3[1] = {3}, t23[2] = {2, 3};
    const rcase cases[] = {
        {R_LSE, {1}, 1, 0, false},      {R_VAR, {1}, 1, 0, false},     {R_STD, {1}, 1, 0, true},
        {R_N, {1}, 1, 0, false},        {R_N + 1, {-3}, 1, 0, true},   {R_SUM, {1, 2}, 2, 0, false},
        {R_MEAN, {1, 3}, 2, 0, true},   {R_AMAX, {1, 2, 3}, 3, 0, false}, {R_VAR, {1, 2}, 2, 1, false},
        {R_SUM, {1}, 1, 0, true},
        /* over trailing dims only: on the values, nested results */
        {R_VAR, {2}, 1, 1, false},      {R_LSE, {-1}, 1, 0, true},     {R_N, {2}, 1, 0, false},
        {R_LSE, {1, 3}, 2, 0, false},   {R_STD, {3, 1, 2}, 3, 1, true}, {R_AMIN, {1, 3}, 2, 0, false},
    };
    for (int holes = 0; holes < 2; holes++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            rcase r = cases[i];
            bool four = r.n > 1 || r.dims[0] == -3 || r.dims[0] == 2;
            /* an empty component has no max; its mean, var and logsumexp are NaN or -inf, whose finite differences
             * are NaN: those run on components with rows (the sums keep one empty component) */
            bool full = r.k != R_SUM;
            jag_tensor *nt = make_nt(holes, full, JAG_FLOAT64, four ? t23 : t3, four ? 2 : 1, 200 + i);
            CHECK_OK(jag_set_requires_grad(nt, true));
            jag_status st = jag_gradcheck(run_rcase, &r, &nt, 1, 1e-6, 1e-7, 1e-6);
            CHECK_MSG(st == JAG_OK, "case %d (%s) holes %d: %s", (int)i, r.k < R_N ? rk_name[r.k] : "max_dim/min_dim", holes,
                      jag_last_error());
            /* the gradient is nested around the input's offsets */
            jag_tensor *y = NULL, *s = NULL, *g = NULL, *go = NULL, *io = NULL, *yv = NULL;
            CHECK_OK(run_rcase(&nt, 1, &y, &r));
            CHECK(jag_is_nested(y) == (r.dims[0] == 2 || r.dims[0] == -1));
            if (jag_is_nested(y)) CHECK_OK(jag_nested_values(y, &yv));
            CHECK_OK(jag_sum(yv ? yv : y, NULL, 0, false, &s));
            jag_release(yv);
            CHECK_OK(jag_backward(s, NULL, false));
            CHECK_OK(jag_get_grad(nt, &g));
            CHECK_OK(jag_nested_offsets(g, &go));
            CHECK_OK(jag_nested_offsets(nt, &io));
            CHECK(go == io);
            jag_release(y), jag_release(s), jag_release(g), jag_release(go), jag_release(io), jag_release(nt);
        }
}

/* ---- losses -------------------------------------------------------------- */

static jag_status run_ce(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    return jag_cross_entropy(in[0], ctx, out);
}

static jag_status run_mse(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    return jag_mse_loss(in[0], in[1], out);
}

static void test_losses(void) {
    TEST_BEGIN();
    /* dense cross entropy against a hand computation */
    double lv[6] = {1, 2, 3, 0, 0, 1};
    int64_t ls[2] = {2, 3}, two = 2, tv[2] = {2, 0};
    jag_tensor *logits = t_from(lv, ls, 2, JAG_FLOAT64), *target = NULL, *ce = NULL;
    CHECK_OK(jag_from_data(tv, &two, 1, JAG_INT64, &target));
    CHECK_OK(jag_cross_entropy(logits, target, &ce));
    double l0 = log(exp(1) + exp(2) + exp(3)) - 3, l1 = log(2 + exp(1)) - 0;
    CHECK_CLOSE(t_get(ce, 0), (l0 + l1) / 2, 1e-12);
    jag_tensor *o = NULL, *bad = NULL;
    int64_t bv[2] = {3, 0};
    CHECK_OK(jag_from_data(bv, &two, 1, JAG_INT64, &bad));
    CHECK_ERR(jag_cross_entropy(logits, bad, &o), JAG_ERANGE, "jag_cross_entropy: argument 'target' holds a class outside [0, 3)");
    CHECK_ERR(jag_cross_entropy(logits, logits, &o), JAG_ESHAPE, "expected (N, C) and (N)");
    CHECK(o == NULL);
    jag_release(logits), jag_release(target), jag_release(ce), jag_release(bad);
    /* nested (with holes): the mean over real tokens of the per-token loss */
    for (int holes = 0; holes < 2; holes++) {
        jag_tensor *nt = make_jagged(holes, 90), *vals = NULL, *offs = NULL, *lens = NULL, *tgt_v = NULL, *tgt = NULL;
        CHECK_OK(jag_nested_values(nt, &vals));
        CHECK_OK(jag_nested_offsets(nt, &offs));
        CHECK_OK(jag_nested_lengths(nt, &lens));
        int64_t t9[9] = {0, 2, 1, 1, 0, 2, 2, 1, 0}, nine = 9;
        CHECK_OK(jag_from_data(t9, &nine, 1, JAG_INT64, &tgt_v));
        CHECK_OK(jag_nested_from_jagged(tgt_v, offs, lens, &tgt));
        jag_tensor *loss = NULL;
        CHECK_OK(jag_cross_entropy(nt, tgt, &loss));
        /* reference: every real row, by hand */
        jag_tensor *c[16], *tc[16];
        int n = unbind_all(nt, c);
        unbind_all(tgt, tc);
        double sum = 0;
        int64_t count = 0;
        for (int b = 0; b < n; b++) {
            for (int64_t r = 0; r < jag_size(c[b], 0); r++) {
                double z = 0, m = -1e300;
                for (int k = 0; k < 3; k++) m = fmax(m, t_get(c[b], r * 3 + k));
                for (int k = 0; k < 3; k++) z += exp(t_get(c[b], r * 3 + k) - m);
                sum += log(z) + m - t_get(c[b], r * 3 + (int)t_get(tc[b], r));
                count++;
            }
            jag_release(c[b]), jag_release(tc[b]);
        }
        CHECK_CLOSE(t_get(loss, 0), sum / (double)count, 1e-12);
        CHECK_OK(jag_set_requires_grad(nt, true));
        CHECK_OK(jag_gradcheck(run_ce, tgt, &nt, 1, 1e-6, 1e-8, 1e-6));
        /* mse between two nested tensors of the same raggedness */
        jag_tensor *other = NULL, *ov = NULL;
        CHECK_OK(jag_rand_normal(jag_sizes(vals), 2, 0, 1, JAG_FLOAT64, NULL, &ov));
        CHECK_OK(jag_nested_from_jagged(ov, offs, lens, &other));
        CHECK_OK(jag_set_requires_grad(other, true));
        jag_tensor *in2[2] = {nt, other}, *mse = NULL;
        CHECK_OK(jag_mse_loss(nt, other, &mse));
        double want = 0;
        int64_t cnt = 0;
        n = unbind_all(nt, c);
        unbind_all(other, tc);
        for (int b = 0; b < n; b++) {
            for (int64_t i = 0; i < jag_numel(c[b]); i++, cnt++) want += pow(t_get(c[b], i) - t_get(tc[b], i), 2);
            jag_release(c[b]), jag_release(tc[b]);
        }
        CHECK_CLOSE(t_get(mse, 0), want / (double)cnt, 1e-12);
        CHECK_OK(jag_gradcheck(run_mse, NULL, in2, 2, 1e-6, 1e-8, 1e-6));
        jag_release(nt), jag_release(vals), jag_release(offs), jag_release(lens), jag_release(tgt_v), jag_release(tgt);
        jag_release(loss), jag_release(other), jag_release(ov), jag_release(mse);
    }
    /* mse's nested errors: another raggedness, other trailing sizes, a
     * strided target; no output, inputs unchanged */
    jag_tensor *a = make_jagged(false, 95), *b = make_jagged(true, 96), *wide = NULL, *wv = NULL, *woff = NULL, *o2 = NULL;
    int64_t ws[2] = {9, 4};
    CHECK_OK(jag_rand_normal(ws, 2, 0, 1, JAG_FLOAT64, NULL, &wv));
    CHECK_OK(jag_nested_offsets(a, &woff));
    CHECK_OK(jag_nested_from_jagged(wv, woff, NULL, &wide));
    CHECK_ERR(jag_mse_loss(a, b, &o2), JAG_ESHAPE, "jag_mse_loss: pred and target have different raggedness");
    CHECK_ERR(jag_mse_loss(a, wide, &o2), JAG_ESHAPE, "pred's values have shape [9, 3] and target's [9, 4]");
    jag_tensor *strided = NULL;
    CHECK_OK(jag_nested_to_layout(a, JAG_STRIDED, &strided));
    CHECK_ERR(jag_mse_loss(a, strided, &o2), JAG_ENOTIMPL, "jag_mse_loss: not supported for nested tensors with the strided layout");
    CHECK_ERR(jag_mse_loss(strided, a, &o2), JAG_ENOTIMPL, "strided layout");
    CHECK(o2 == NULL);
    jag_tensor *av = NULL;
    CHECK_OK(jag_nested_values(a, &av));
    jag_tensor *a2 = make_jagged(false, 95), *av2 = NULL;
    CHECK_OK(jag_nested_values(a2, &av2));
    CHECK(av && av2 && t_allclose(av, av2, 0, 0));
    jag_release(a), jag_release(b), jag_release(wide), jag_release(wv), jag_release(woff), jag_release(strided);
    jag_release(av), jag_release(a2), jag_release(av2);
}

/* ---- softmax on lines holding inf and NaN ------------------------------- */

/* Element r of a line of n by pattern p (x: a random value): a +inf makes
 * the whole line NaN (inf - inf), as a NaN does and a line of -inf only;
 * a -inf among finite values gives 0 (softmax) or -inf (log_softmax). */
static double special_at(int p, int64_t r, int64_t n, double x) {
    switch (p % 10) {
    case 1: return r == n / 2 ? INFINITY : x;
    case 2: return r == 0 ? -INFINITY : x;
    case 3: return -INFINITY;
    case 4: return r == n - 1 ? NAN : x;
    case 5: return r == n / 2 ? INFINITY : r == 0 ? -INFINITY : x;
    case 6: return r == n / 2 || r == n - 1 ? INFINITY : x;
    case 7: return r == n - 1 ? NAN : r == n / 2 ? INFINITY : x;
    case 8: return r == n - 1 ? NAN : r == 0 ? -INFINITY : x;
    case 9: return r % 2 ? 1000.0 : -1000.0;
    default: return x;
    }
}

/* A contiguous tensor of `sizes` whose lines along `dim` follow patterns
 * base, base + 1, ... (random values in [-3, 3) elsewhere). */
static jag_tensor *special_tensor(const int64_t *sizes, int nd, int dim, jag_dtype dt, int base, uint64_t seed) {
    int64_t O = 1, R = sizes[dim], I = 1, n;
    for (int d = 0; d < dim; d++) O *= sizes[d];
    for (int d = dim + 1; d < nd; d++) I *= sizes[d];
    n = O * R * I;
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    uint64_t st = seed * 2654435761u + 1;
    for (int64_t k = 0; k < n; k++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        v[k] = -3 + 6 * (double)(st >> 11) / 9007199254740992.0;
    }
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++)
            for (int64_t r = 0; r < R; r++) {
                int64_t k = (o * R + r) * I + i;
                v[k] = special_at(base + (int)(o * I + i), r, R, v[k]);
            }
    jag_tensor *t = t_from(v, sizes, nd, dt);
    free(v);
    return t;
}

/* t's elements as doubles (row-major), n of them */
static double *as_doubles(const jag_tensor *t, int64_t *n) {
    jag_tensor *c = NULL;
    if (jag_contiguous(t, &c)) exit(2);
    *n = jag_numel(c);
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    for (int64_t k = 0; k < *n; k++)
        v[k] = jag_tensor_dtype(c) == JAG_FLOAT32 ? ((const float *)jag_data(c))[k] : ((const double *)jag_data(c))[k];
    jag_release(c);
    return v;
}

/* softmax (log_softmax) of x along dim in double, one line at a time, by
 * the rule special_at states */
static double *softmax_by_hand(const jag_tensor *x, int dim, bool lg) {
    int64_t n, O = 1, R = jag_size(x, dim), I = 1;
    for (int d = 0; d < dim; d++) O *= jag_size(x, d);
    for (int d = dim + 1; d < jag_ndim(x); d++) I *= jag_size(x, d);
    double *v = as_doubles(x, &n), *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            double m = -INFINITY, s = 0;
            bool nan = false;
            for (int64_t r = 0; r < R; r++) {
                double a = v[(o * R + r) * I + i];
                nan |= isnan(a);
                m = a > m ? a : m;
            }
            nan |= isinf(m); /* +inf, or -inf only */
            for (int64_t r = 0; r < R && !nan; r++) s += exp(v[(o * R + r) * I + i] - m);
            for (int64_t r = 0; r < R; r++) {
                double a = v[(o * R + r) * I + i] - m;
                y[(o * R + r) * I + i] = nan ? NAN : lg ? a - log(s) : exp(a) / s;
            }
        }
    free(v);
    return y;
}

/* got against want: NaN at the same places, the same infinities, finite
 * values within tol (relative, with 1 as the floor) */
static bool same_softmax(const jag_tensor *got, const double *want, int64_t n, double tol, const char *what) {
    int64_t m;
    double *g = as_doubles(got, &m);
    bool ok = m == n;
    for (int64_t k = 0; ok && k < n; k++) {
        double a = g[k], b = want[k];
        ok = isnan(a) == isnan(b) && (isnan(a) || (isinf(a) || isinf(b) ? a == b : fabs(a - b) <= tol * (1 + fabs(b))));
        if (!ok) fprintf(stderr, "%s: element %lld: %.9g, expected %.9g\n", what, (long long)k, a, b);
    }
    free(g);
    return ok;
}

/* softmax and log_softmax of the nested nt along `dim`, whose components'
 * dim is `cdim`: each component against the dense op on it and against
 * the rule by hand */
static void check_special_softmax(const jag_tensor *nt, int dim, int cdim, const char *what) {
    bool f64 = jag_tensor_dtype(nt) == JAG_FLOAT64;
    for (int lg = 0; lg < 2; lg++) {
        jag_tensor *y = NULL, *cx[64], *cy[64];
        CHECK_OK((lg ? jag_log_softmax : jag_softmax)(nt, dim, &y));
        if (!y) continue;
        int n = 0, ny = 0;
        CHECK_OK(jag_nested_unbind(nt, cx, 64, &n));
        CHECK_OK(jag_nested_unbind(y, cy, 64, &ny));
        CHECK(n == ny);
        for (int b = 0; b < n && b < ny; b++) {
            char w[200];
            snprintf(w, sizeof w, "%s %s component %d", what, lg ? "log_softmax" : "softmax", b);
            jag_tensor *d = NULL;
            int64_t nd;
            CHECK_OK((lg ? jag_log_softmax : jag_softmax)(cx[b], cdim, &d));
            double *dv = as_doubles(d, &nd), *hv = softmax_by_hand(cx[b], cdim, lg);
            CHECK_MSG(same_softmax(cy[b], dv, nd, f64 ? 1e-12 : 1e-5, w), "%s: against the dense op", w);
            CHECK_MSG(same_softmax(cy[b], hv, nd, f64 ? 1e-12 : 1e-5, w), "%s: against the rule by hand", w);
            CHECK_MSG(same_softmax(d, hv, nd, f64 ? 1e-12 : 1e-5, w), "%s: the dense op against the rule by hand", w);
            free(dv), free(hv);
            jag_release(d);
        }
        for (int b = 0; b < n; b++) jag_release(cx[b]);
        for (int b = 0; b < ny; b++) jag_release(cy[b]);
        jag_release(y);
    }
}

/* components of `lens` rows, trailing dims `rest`, lines along component
 * dim `cdim` patterned (the pattern number continues across components) */
static jag_tensor *special_nested(jag_dtype dt, const int64_t *lens, int n, const int64_t *rest, int nrest, int cdim,
                                  uint64_t seed) {
    jag_tensor *items[64], *nt = NULL;
    int base = 0;
    for (int b = 0; b < n; b++) {
        int64_t sz[JAG_MAX_DIMS] = {lens[b]}, lines = 1;
        for (int k = 0; k < nrest; k++) sz[k + 1] = rest[k];
        for (int k = 0; k <= nrest; k++) lines *= k == cdim ? 1 : sz[k];
        items[b] = special_tensor(sz, nrest + 1, cdim, dt, base, seed + (uint64_t)b);
        base += (int)lines;
    }
    if (jag_nested_from_list(items, n, JAG_JAGGED, &nt)) {
        fprintf(stderr, "special_nested: %s\n", jag_last_error());
        exit(2);
    }
    for (int b = 0; b < n; b++) jag_release(items[b]);
    return nt;
}

/* softmax / log_softmax of lines with +inf, -inf (some, or all) and NaN,
 * along the ragged dim (the row-streaming engine, one chunk or several a
 * component), along other dims (the dense kernel on the values: its row
 * and its tile paths) and along a ragged dim moved by a transpose: as the
 * dense op on each component (and torch): a +inf in a line makes all of it
 * NaN, not only the +inf's place. */
static void test_softmax_special_values(void) {
    TEST_BEGIN();
    const int64_t lens[10] = {5, 1, 0, 3, 7, 2, 10, 4, 1, 6}, ten[1] = {10}, h4d10[2] = {4, 10};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        char w[64];
        /* (B, j): one line a component, each with its own pattern */
        jag_tensor *nt = special_nested(dt, lens, 10, NULL, 0, 0, 1);
        snprintf(w, sizeof w, "%s (B, j) dim 1", jag_dtype_name(dt));
        check_special_softmax(nt, 1, 0, w);
        snprintf(w, sizeof w, "%s (B, j) dim -1", jag_dtype_name(dt));
        check_special_softmax(nt, -1, 0, w);
        jag_release(nt);
        /* (B, j, 10) down each component: a pattern a column */
        nt = special_nested(dt, lens, 10, ten, 1, 0, 2);
        snprintf(w, sizeof w, "%s (B, j, 10) dim 1", jag_dtype_name(dt));
        check_special_softmax(nt, 1, 0, w);
        /* the same transposed to (B, 10, j): its ragged dim is 2 */
        jag_tensor *tr = NULL;
        CHECK_OK(jag_transpose(nt, 1, 2, &tr));
        snprintf(w, sizeof w, "%s (B, 10, j) dim 2", jag_dtype_name(dt));
        if (tr) check_special_softmax(tr, 2, 1, w);
        jag_release(tr), jag_release(nt);
        /* (B, j, 10) along its last dim: the dense row path on the values */
        nt = special_nested(dt, lens, 10, ten, 1, 1, 3);
        snprintf(w, sizeof w, "%s (B, j, 10) dim 2", jag_dtype_name(dt));
        check_special_softmax(nt, 2, 1, w);
        jag_release(nt);
        /* (B, j, 4, 10) along dim 2: the dense tile path on the values */
        nt = special_nested(dt, lens, 10, h4d10, 2, 1, 4);
        snprintf(w, sizeof w, "%s (B, j, 4, 10) dim 2", jag_dtype_name(dt));
        check_special_softmax(nt, 2, 1, w);
        jag_release(nt);
        /* a component long enough to be cut into chunks that threads share:
         * the +inf, -inf and NaN of a column lie in different chunks */
        const int64_t long_lens[3] = {3, 40000, 5};
        nt = special_nested(dt, long_lens, 3, ten, 1, 0, 5);
        snprintf(w, sizeof w, "%s (B, j, 10) with 40000 rows dim 1", jag_dtype_name(dt));
        check_special_softmax(nt, 1, 0, w);
        jag_release(nt);
    }
}

TEST_MAIN(test_more_reductions_over_ragged, test_reductions_batch_of_one, test_more_reduction_gradients, test_losses, test_reductions_over_ragged, test_softmax_and_norms, test_gradients, test_structure_ops,
          test_clamp_dropout_rowids, test_softmax_special_values)
