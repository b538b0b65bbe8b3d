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

TEST_MAIN(test_reductions_over_ragged, test_softmax_and_norms, test_gradients)
