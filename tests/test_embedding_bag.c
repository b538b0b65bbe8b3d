/* test_embedding_bag.c — embedding_bag (sum, mean, max; per-sample
 * weights): the kernel against the naive reference and against embedding +
 * a reduction per bag, empty bags, non-contiguous tables, nested indices
 * (one bag per component, holes included), gradients (only used rows get
 * any) and error paths. */
#include "test.h"

#include "dispatch/dispatch.h"

jag_status jag__ref_embedding_bag(const jag_value *args, int nargs, jag_tensor *out);

static const int64_t IDX[10] = {3, 1, 3, 0, 6, 1, 2, 6, 6, 4};
static const int64_t OFF[5] = {0, 3, 3, 7, 10};

static jag_tensor *i64(const int64_t *v, int64_t n) {
    jag_tensor *t = NULL;
    if (jag_from_data(v, &n, 1, JAG_INT64, &t)) exit(2);
    return t;
}

/* bag b of the reference composition: embedding rows, reduced over dim 0 */
static jag_tensor *compose_bag(const jag_tensor *w, const jag_tensor *ix, const jag_tensor *psw, int64_t j0, int64_t j1,
                               int mode) {
    int64_t D = jag_size(w, 1);
    jag_tensor *out = NULL;
    if (j0 == j1) {
        CHECK_OK(jag_zeros(&D, 1, jag_tensor_dtype(w), &out));
        return out;
    }
    jag_tensor *part = NULL, *e = NULL, *pw = NULL, *pw2 = NULL, *scaled = NULL;
    int d0[1] = {0};
    CHECK_OK(jag_narrow(ix, 0, j0, j1 - j0, &part));
    CHECK_OK(jag_embedding(w, part, &e));
    if (psw) {
        CHECK_OK(jag_narrow(psw, 0, j0, j1 - j0, &pw));
        CHECK_OK(jag_unsqueeze(pw, 1, &pw2));
        CHECK_OK(jag_mul(e, pw2, &scaled));
    }
    const jag_tensor *src = scaled ? scaled : e;
    CHECK_OK(mode == JAG_BAG_SUM ? jag_sum(src, d0, 1, false, &out)
                                 : mode == JAG_BAG_MEAN ? jag_mean(src, d0, 1, false, &out) : jag_amax(src, d0, 1, false, &out));
    jag_release(part), jag_release(e), jag_release(pw), jag_release(pw2), jag_release(scaled);
    return out;
}

static void test_dense(void) {
    TEST_BEGIN();
    int64_t ws[2] = {7, 5};
    for (int f = 0; f < 2; f++)
        for (int i32 = 0; i32 < 2; i32++)
            for (int nc = 0; nc < 2; nc++)
                for (int mode = 0; mode < 3; mode++)
                    for (int use_psw = 0; use_psw < (mode == JAG_BAG_SUM ? 2 : 1); use_psw++) {
                        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
                        jag_tensor *w0 = t_rand(ws, 2, dt, -2, 2, 1 + (uint64_t)mode), *w = nc ? t_noncontig(w0) : jag_retain(w0);
                        jag_tensor *ix64 = i64(IDX, 10), *ix = NULL, *off = i64(OFF, 5), *y = NULL, *ref = NULL;
                        int64_t ten = 10;
                        jag_tensor *psw = use_psw ? t_rand(&ten, 1, dt, -1, 1, 9) : NULL;
                        CHECK_OK(jag_to_dtype(ix64, i32 ? JAG_INT32 : JAG_INT64, &ix));
                        CHECK_OK(jag_embedding_bag(w, ix, off, mode, psw, &y));
                        CHECK(y && jag_ndim(y) == 2 && jag_size(y, 0) == 4 && jag_size(y, 1) == 5);
                        int64_t rs[2] = {4, 5};
                        CHECK_OK(jag_empty(rs, 2, dt, &ref));
                        jag_value a[5] = {jag__v_tensor(w), jag__v_tensor(ix), jag__v_tensor(off), jag__v_int(mode), jag__v_tensor(psw)};
                        CHECK_OK(jag__ref_embedding_bag(a, 5, ref));
                        double tol = f ? 1e-12 : 1e-5;
                        CHECK_MSG(y && t_allclose(y, ref, tol, tol), "mode %d f64 %d psw %d", mode, f, use_psw);
                        for (int b = 0; y && b < 4; b++) {
                            jag_tensor *want = compose_bag(w, ix, psw, OFF[b], OFF[b + 1], mode), *row = NULL;
                            CHECK_OK(jag_select(y, 0, b, &row));
                            CHECK_MSG(t_allclose(row, want, tol, tol), "bag %d mode %d", b, mode);
                            jag_release(want), jag_release(row);
                        }
                        jag_release(w0), jag_release(w), jag_release(ix64), jag_release(ix), jag_release(off), jag_release(y);
                        jag_release(ref), jag_release(psw);
                    }
}

typedef struct {
    int mode;
    const jag_tensor *ix, *off;
    bool psw;
} bag_case;

static jag_status run_bag(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n;
    bag_case *c = ctx;
    return jag_embedding_bag(in[0], c->ix, c->off, c->mode, c->psw ? in[1] : NULL, out);
}

static void test_gradients(void) {
    TEST_BEGIN();
    int64_t ws[2] = {7, 4}, ten = 10;
    jag_tensor *ix = i64(IDX, 10), *off = i64(OFF, 5);
    for (int mode = 0; mode < 3; mode++)
        for (int use_psw = 0; use_psw < (mode == JAG_BAG_SUM ? 2 : 1); use_psw++) {
            jag_tensor *w = t_rand(ws, 2, JAG_FLOAT64, -2, 2, 20 + (uint64_t)mode), *psw = t_rand(&ten, 1, JAG_FLOAT64, -1, 1, 21);
            CHECK_OK(jag_set_requires_grad(w, true));
            CHECK_OK(jag_set_requires_grad(psw, true));
            bag_case c = {mode, ix, off, use_psw};
            jag_tensor *in[2] = {w, psw};
            jag_status st = jag_gradcheck(run_bag, &c, in, use_psw ? 2 : 1, 1e-6, 1e-8, 1e-6);
            CHECK_MSG(st == JAG_OK, "mode %d psw %d: %s", mode, use_psw, jag_last_error());
            /* row 5 is in no bag: its gradient is exactly zero */
            jag_tensor *y = NULL, *s = NULL, *g = NULL;
            CHECK_OK(run_bag(in, 2, &y, &c));
            CHECK_OK(jag_sum(y, NULL, 0, false, &s));
            CHECK_OK(jag_backward(s, NULL, false));
            CHECK_OK(jag_get_grad(w, &g));
            for (int k = 0; g && k < 4; k++) CHECK(t_get(g, 5 * 4 + k) == 0);
            jag_release(y), jag_release(s), jag_release(g), jag_release(w), jag_release(psw);
        }
    jag_release(ix), jag_release(off);
}

static void test_nested_indices(void) {
    TEST_BEGIN();
    int64_t ws[2] = {7, 3}, four = 4, five = 5, lens[4] = {3, 0, 4, 2}, ho[5] = {0, 4, 4, 9, 12}, hv[12];
    for (int i = 0; i < 12; i++) hv[i] = (i * 5 + 1) % 7;
    for (int holes = 0; holes < 2; holes++)
        for (int mode = 0; mode < 3; mode++) {
            jag_tensor *w = t_rand(ws, 2, JAG_FLOAT64, -2, 2, 30 + (uint64_t)mode), *vals = i64(hv, 12), *off = NULL, *len = NULL;
            jag_tensor *nix = NULL, *y = NULL, *c[8];
            int64_t po[5] = {0, 3, 3, 7, 9};
            CHECK_OK(jag_from_data(holes ? ho : po, &five, 1, JAG_INT64, &off));
            if (holes) CHECK_OK(jag_from_data(lens, &four, 1, JAG_INT64, &len));
            jag_tensor *v9 = NULL;
            CHECK_OK(jag_narrow(vals, 0, 0, holes ? 12 : 9, &v9));
            CHECK_OK(jag_nested_from_jagged(v9, off, len, &nix));
            CHECK_OK(jag_embedding_bag(w, nix, NULL, mode, NULL, &y));
            CHECK(y && !jag_is_nested(y) && jag_size(y, 0) == 4 && jag_size(y, 1) == 3);
            int n = 0;
            CHECK_OK(jag_nested_unbind(nix, c, 8, &n));
            for (int b = 0; y && b < n; b++) {
                int64_t zero_off[2] = {0, jag_size(c[b], 0)}, two = 2;
                jag_tensor *o1 = NULL, *want = NULL, *row = NULL;
                CHECK_OK(jag_from_data(zero_off, &two, 1, JAG_INT64, &o1));
                CHECK_OK(jag_embedding_bag(w, c[b], o1, mode, NULL, &want));
                CHECK_OK(jag_select(y, 0, b, &row));
                jag_tensor *w0 = NULL;
                CHECK_OK(jag_select(want, 0, 0, &w0));
                CHECK_MSG(t_allclose(row, w0, 1e-12, 1e-12), "nested bag %d mode %d holes %d", b, mode, holes);
                jag_release(o1), jag_release(want), jag_release(row), jag_release(w0), jag_release(c[b]);
            }
            CHECK_OK(jag_set_requires_grad(w, true));
            bag_case bc = {mode, nix, NULL, false};
            CHECK_OK(jag_gradcheck(run_bag, &bc, &w, 1, 1e-6, 1e-8, 1e-6));
            /* nested per-sample weights (no holes) */
            if (!holes && mode == JAG_BAG_SUM) {
                int64_t nine = 9;
                jag_tensor *pv = t_rand(&nine, 1, JAG_FLOAT64, -1, 1, 35), *pn = NULL;
                CHECK_OK(jag_nested_from_jagged(pv, off, NULL, &pn));
                CHECK_OK(jag_set_requires_grad(pn, true));
                bag_case pc = {mode, nix, NULL, true};
                jag_tensor *in[2] = {w, pn};
                CHECK_OK(jag_gradcheck(run_bag, &pc, in, 2, 1e-6, 1e-8, 1e-6));
                jag_release(pv), jag_release(pn);
            }
            jag_tensor *o = NULL;
            CHECK_ERR(jag_embedding_bag(w, nix, off, mode, NULL, &o), JAG_EINVAL, "argument 'offsets' must be none with nested indices");
            CHECK(o == NULL);
            jag_release(w), jag_release(vals), jag_release(off), jag_release(len), jag_release(nix), jag_release(y), jag_release(v9);
        }
}

static void test_errors(void) {
    TEST_BEGIN();
    int64_t ws[2] = {7, 3}, ten = 10;
    jag_tensor *w = t_rand(ws, 2, JAG_FLOAT32, -1, 1, 40), *ix = i64(IDX, 10), *off = i64(OFF, 5), *o = NULL, *w0 = NULL;
    int64_t bad_ix[10] = {3, 1, 3, 0, 7, 1, 2, 6, 6, 4}, bad_off[5] = {0, 3, 2, 7, 10}, short_off[5] = {0, 3, 3, 7, 9};
    jag_tensor *bix = i64(bad_ix, 10), *boff = i64(bad_off, 5), *soff = i64(short_off, 5);
    jag_tensor *w_before = NULL;
    CHECK_OK(jag_clone(w, &w_before));
    CHECK_ERR(jag_embedding_bag(w, bix, off, JAG_BAG_SUM, NULL, &o), JAG_ERANGE,
              "jag_embedding_bag: argument 'indices' has 7 at position 4, expected 0 <= value < 7");
    CHECK_ERR(jag_embedding_bag(w, ix, boff, JAG_BAG_SUM, NULL, &o), JAG_EINVAL, "argument 'offsets' has 2 at position 2");
    CHECK_ERR(jag_embedding_bag(w, ix, soff, JAG_BAG_SUM, NULL, &o), JAG_EINVAL, "offsets[B] == 10");
    CHECK_ERR(jag_embedding_bag(w, ix, off, 3, NULL, &o), JAG_EINVAL, "argument 'mode' is 3");
    jag_tensor *psw = t_rand(&ten, 1, JAG_FLOAT32, 0, 1, 41), *psw64 = t_rand(&ten, 1, JAG_FLOAT64, 0, 1, 42);
    CHECK_ERR(jag_embedding_bag(w, ix, off, JAG_BAG_MEAN, psw, &o), JAG_EINVAL, "'per_sample_weights' needs mode 0 (sum)");
    CHECK_ERR(jag_embedding_bag(w, ix, off, JAG_BAG_SUM, psw64, &o), JAG_ESHAPE, "argument 'per_sample_weights' is float64");
    CHECK_ERR(jag_embedding_bag(w, ix, NULL, JAG_BAG_SUM, NULL, &o), JAG_EINVAL, "offsets");
    CHECK_OK(jag_to_dtype(w, JAG_INT64, &w0));
    CHECK_ERR(jag_embedding_bag(w0, ix, off, JAG_BAG_SUM, NULL, &o), JAG_EDTYPE, "argument 'weight' has dtype int64");
    CHECK(o == NULL);
    CHECK(t_allclose(w, w_before, 0, 0));
    jag_release(w), jag_release(ix), jag_release(off), jag_release(bix), jag_release(boff), jag_release(soff);
    jag_release(psw), jag_release(psw64), jag_release(w0), jag_release(w_before);
}

/* Wide tables (D of 128, 256 and 300: whole blocks of columns and a tail),
 * bags of 0 to 7 rows (odd and even counts, repeats) in sum and mean mode,
 * float32 and float64, against sum_j w[ix[j]][c] (divided by the count for
 * mean; 0 for an empty bag, as torch) computed here in double. A bag's sum
 * is rounded once to float32 apart from the 2^-24 of a pair of rows: the
 * tolerance is 2 float32 ulps of the sum of magnitudes (float64: the
 * roundings of up to 7 adds and a division, 2^-53 each). */
static void test_wide_tables(void) {
    TEST_BEGIN();
    const int64_t Ds[3] = {128, 256, 300}, V = 11;
    const int64_t idx[16] = {3, 10, 0, 7, 7, 1, 9, 2, 5, 4, 3, 8, 6, 0, 10, 2};
    const int64_t off[6] = {0, 0, 1, 3, 9, 16}; /* bags of 0, 1, 2, 6 and 7 rows */
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 3; k++) {
            jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
            int64_t D = Ds[k], ws[2] = {V, D};
            jag_tensor *w = t_rand(ws, 2, dt, -3, 3, 50 + (uint64_t)k), *ix = i64(idx, 16), *offs = i64(off, 6);
            for (int mode = JAG_BAG_SUM; mode <= JAG_BAG_MEAN; mode++) {
                jag_tensor *y = NULL;
                CHECK_OK(jag_embedding_bag(w, ix, offs, mode, NULL, &y));
                int bad = 0;
                for (int b = 0; y && b < 5; b++)
                    for (int64_t c = 0; c < D; c++) {
                        double sum = 0, mag = 0;
                        for (int64_t j = off[b]; j < off[b + 1]; j++) {
                            double v = t_get(w, idx[j] * D + c);
                            sum += v, mag += fabs(v);
                        }
                        int64_t n = off[b + 1] - off[b];
                        double want = mode == JAG_BAG_MEAN && n ? sum / (double)n : sum;
                        double scale = mode == JAG_BAG_MEAN && n ? mag / (double)n : mag;
                        double tol = (f ? 8e-16 : 2.4e-7) * scale;
                        bad += !(fabs(t_get(y, b * D + c) - want) <= tol);
                    }
                CHECK_MSG(y && bad == 0, "D %lld mode %d f64 %d: %d elements off", (long long)D, mode, f, bad);
                jag_release(y);
            }
            jag_release(w), jag_release(ix), jag_release(offs);
        }
}

TEST_MAIN(test_dense, test_wide_tables, test_gradients, test_nested_indices, test_errors)
