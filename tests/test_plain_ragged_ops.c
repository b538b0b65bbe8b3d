/* The plain ops a traced nested program desugars into — ragged_reduce,
 * ragged_reduce_backward, varlen_attention(_backward), scatter_add — called
 * by name as a user may: results against hand-computed values and against
 * the nested ops they stand for, and offsets, lengths and indices that do
 * not fit refused with a clear error, nothing written, nothing leaked. */
#include "test.h"

#include <math.h>

static jag_op_id op_id(const char *name) {
    jag_op_id id = -1;
    if (jag_op_find(name, &id) != JAG_OK) {
        fprintf(stderr, "no op %s\n", name);
        exit(2);
    }
    return id;
}

static jag_tensor *i64(const int64_t *v, int64_t n) {
    jag_tensor *t = NULL;
    if (jag_from_data(v, &n, 1, JAG_INT64, &t)) exit(2);
    return t;
}

static jag_tensor *f32(const float *v, const int64_t *sizes, int nd) {
    jag_tensor *t = NULL;
    if (jag_from_data(v, sizes, nd, JAG_FLOAT32, &t)) exit(2);
    return t;
}

static float at(const jag_tensor *t, int64_t i) { return ((const float *)jag_data(t))[i]; }

/* values (5, 2), components rows [0, 2) and [2, 5): sums and means by hand */
static void test_ragged_reduce_by_hand(void) {
    TEST_BEGIN();
    const float v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    jag_tensor *values = f32(v, (int64_t[]){5, 2}, 2), *off = i64((int64_t[]){0, 2, 5}, 3), *out = NULL, *g = NULL;
    jag_value a[7] = {{.kind = JAG_VAL_TENSOR, .u.t = values}, {.kind = JAG_VAL_TENSOR, .u.t = off}, {.kind = JAG_VAL_NONE},
                      {.kind = JAG_VAL_INT, .u.i = 0 /* sum */}, {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_INT, .u.i = 0},
                      {.kind = JAG_VAL_BOOL, .u.b = false}};
    CHECK_OK(jag_op_call(op_id("ragged_reduce"), a, 7, &out));
    CHECK(jag_ndim(out) == 2 && jag_size(out, 0) == 2 && jag_size(out, 1) == 2);
    CHECK(at(out, 0) == 4 && at(out, 1) == 6 && at(out, 2) == 21 && at(out, 3) == 24);
    jag_release(out);
    a[3].u.i = 1; /* mean */
    CHECK_OK(jag_op_call(op_id("ragged_reduce"), a, 7, &out));
    CHECK(at(out, 0) == 2 && at(out, 1) == 3 && at(out, 2) == 7 && at(out, 3) == 8);
    /* its backward: the mean's gradient spreads g / length over each component's rows */
    const float gv[4] = {2, 4, 3, 6};
    g = f32(gv, (int64_t[]){2, 2}, 2);
    jag_value b[9] = {a[0], a[1], a[2], {.kind = JAG_VAL_TENSOR, .u.t = out}, {.kind = JAG_VAL_TENSOR, .u.t = g}, a[3], a[4], a[5], a[6]};
    jag_tensor *gx = NULL;
    CHECK_OK(jag_op_call(op_id("ragged_reduce_backward"), b, 9, &gx));
    CHECK(jag_size(gx, 0) == 5 && at(gx, 0) == 1 && at(gx, 1) == 2 && at(gx, 2) == 1 && at(gx, 4) == 1 && at(gx, 5) == 2 &&
          at(gx, 9) == 2);
    /* lengths make holes: component 1 keeps rows [2, 3) only */
    jag_tensor *len = i64((int64_t[]){2, 1}, 2), *h = NULL;
    a[2] = (jag_value){.kind = JAG_VAL_TENSOR, .u.t = len};
    a[3].u.i = 0;
    CHECK_OK(jag_op_call(op_id("ragged_reduce"), a, 7, &h));
    CHECK(at(h, 2) == 5 && at(h, 3) == 6);
    jag_release(out), jag_release(g), jag_release(gx), jag_release(h), jag_release(len);
    jag_release(values), jag_release(off);
}

/* The nested mean over the ragged dim goes through ragged_reduce: equal to
 * the mean of each unbound component. */
static void test_nested_mean_matches_components(void) {
    TEST_BEGIN();
    int64_t vs[2] = {9, 3};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 7), *off = i64((int64_t[]){0, 4, 4, 9}, 4), *nt = NULL, *m = NULL;
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
    CHECK_OK(jag_mean(nt, (int[]){1}, 1, false, &m));
    const double *pv = jag_data(v), *pm = jag_data(m);
    for (int b = 0; b < 3; b++)
        for (int d = 0; d < 3; d++) {
            int64_t r0 = b == 0 ? 0 : b == 1 ? 4 : 4, r1 = b == 0 ? 4 : b == 1 ? 4 : 9;
            double s = 0;
            for (int64_t r = r0; r < r1; r++) s += pv[r * 3 + d];
            double want = r1 > r0 ? s / (double)(r1 - r0) : NAN;
            CHECK_MSG(isnan(want) ? isnan(pm[b * 3 + d]) : fabs(pm[b * 3 + d] - want) < 1e-12, "b %d d %d", b, d);
        }
    jag_release(m), jag_release(nt), jag_release(v), jag_release(off);
}

static void test_bad_offsets_refused(void) {
    TEST_BEGIN();
    const float v[6] = {1, 2, 3, 4, 5, 6};
    jag_tensor *values = f32(v, (int64_t[]){3, 2}, 2), *past = i64((int64_t[]){0, 2, 7}, 3), *down = i64((int64_t[]){0, 3, 1}, 3);
    jag_tensor *out = NULL;
    jag_value a[7] = {{.kind = JAG_VAL_TENSOR, .u.t = values}, {.kind = JAG_VAL_TENSOR, .u.t = past}, {.kind = JAG_VAL_NONE},
                      {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_INT, .u.i = 0},
                      {.kind = JAG_VAL_BOOL, .u.b = false}};
    CHECK_ERR(jag_op_call(op_id("ragged_reduce"), a, 7, &out), JAG_EINVAL, "do not fit the 3 value rows");
    CHECK(out == NULL);
    a[1].u.t = down;
    CHECK_ERR(jag_op_call(op_id("ragged_reduce"), a, 7, &out), JAG_EINVAL, "component 1");
    a[3].u.i = 8; /* max with indices: not this op's */
    CHECK_ERR(jag_op_call(op_id("ragged_reduce"), a, 7, &out), JAG_EINVAL, "argument 'kind'");
    CHECK(out == NULL);
    /* attention: q's offsets past its rows */
    int64_t qs[3] = {3, 1, 2};
    jag_tensor *q = t_rand(qs, 3, JAG_FLOAT32, -1, 1, 3), *outs[2] = {0};
    jag_value at9[9] = {{.kind = JAG_VAL_TENSOR, .u.t = q}, {.kind = JAG_VAL_TENSOR, .u.t = q}, {.kind = JAG_VAL_TENSOR, .u.t = q},
                        {.kind = JAG_VAL_TENSOR, .u.t = past}, {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_TENSOR, .u.t = past},
                        {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_BOOL, .u.b = false}, {.kind = JAG_VAL_DOUBLE, .u.d = 0}};
    CHECK_ERR(jag_op_call(op_id("varlen_attention"), at9, 9, outs), JAG_EINVAL, "do not fit the 3 rows");
    CHECK(outs[0] == NULL && outs[1] == NULL);
    jag_tensor *empty = NULL; /* no offsets at all: not even B = 0 */
    CHECK_OK(jag_empty((int64_t[]){0}, 1, JAG_INT64, &empty));
    at9[3].u.t = empty, at9[5].u.t = empty;
    CHECK_ERR(jag_op_call(op_id("varlen_attention"), at9, 9, outs), JAG_EINVAL, "'q_offsets' must be int64 of shape (B+1)");
    a[1].u.t = empty, a[3].u.i = 0;
    CHECK_ERR(jag_op_call(op_id("ragged_reduce"), a, 7, &out), JAG_EINVAL, "'offsets' must be int64 of shape (B+1)");
    CHECK(outs[0] == NULL && outs[1] == NULL && out == NULL);
    jag_release(empty);
    jag_release(q), jag_release(values), jag_release(past), jag_release(down);
}

/* varlen_attention on two sequences equals attention of each alone (the
 * dense op on (1, H, L, Dh)). */
static void test_varlen_attention_matches_items(void) {
    TEST_BEGIN();
    int64_t qs[3] = {5, 2, 4};
    jag_tensor *q = t_rand(qs, 3, JAG_FLOAT64, -1, 1, 11), *k = t_rand(qs, 3, JAG_FLOAT64, -1, 1, 12);
    jag_tensor *v = t_rand(qs, 3, JAG_FLOAT64, -1, 1, 13), *off = i64((int64_t[]){0, 2, 5}, 3), *outs[2] = {0};
    jag_value a[9] = {{.kind = JAG_VAL_TENSOR, .u.t = q}, {.kind = JAG_VAL_TENSOR, .u.t = k}, {.kind = JAG_VAL_TENSOR, .u.t = v},
                      {.kind = JAG_VAL_TENSOR, .u.t = off}, {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_TENSOR, .u.t = off},
                      {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_BOOL, .u.b = true}, {.kind = JAG_VAL_DOUBLE, .u.d = 0}};
    CHECK_OK(jag_op_call(op_id("varlen_attention"), a, 9, outs));
    const int64_t r0[2] = {0, 2}, n[2] = {2, 3};
    for (int b = 0; b < 2; b++) {
        jag_tensor *qi = NULL, *ki = NULL, *vi = NULL, *q4 = NULL, *k4 = NULL, *v4 = NULL, *o = NULL, *want = NULL;
        jag_tensor *oi = NULL;
        CHECK_OK(jag_narrow(q, 0, r0[b], n[b], &qi));
        CHECK_OK(jag_narrow(k, 0, r0[b], n[b], &ki));
        CHECK_OK(jag_narrow(v, 0, r0[b], n[b], &vi));
        int64_t s4[4] = {1, n[b], 2, 4};
        jag_tensor *r = NULL;
        jag_tensor *src3[3] = {qi, ki, vi}, **dst4[3] = {&q4, &k4, &v4};
        for (int i = 0; i < 3; i++) {
            CHECK_OK(jag_reshape(src3[i], s4, 4, &r));
            CHECK_OK(jag_transpose(r, 1, 2, dst4[i]));
            jag_release(r);
        }
        CHECK_OK(jag_scaled_dot_product_attention(q4, k4, v4, true, 0.0, &o)); /* (1, 2, n, 4) */
        CHECK_OK(jag_transpose(o, 1, 2, &r));
        CHECK_OK(jag_reshape(r, (int64_t[]){n[b], 2, 4}, 3, &want));
        jag_release(r);
        CHECK_OK(jag_narrow(outs[0], 0, r0[b], n[b], &oi));
        CHECK(t_allclose(oi, want, 1e-12, 1e-12));
        jag_release(qi), jag_release(ki), jag_release(vi), jag_release(q4), jag_release(k4), jag_release(v4);
        jag_release(o), jag_release(want), jag_release(oi);
    }
    jag_release(outs[0]), jag_release(outs[1]);
    jag_release(q), jag_release(k), jag_release(v), jag_release(off);
}

static void test_scatter_add(void) {
    TEST_BEGIN();
    jag_tensor *x = NULL, *src = NULL, *out = NULL;
    CHECK_OK(jag_ones((int64_t[]){3, 2}, 2, JAG_FLOAT32, &x));
    const float s[4] = {1, 2, 3, 4};
    src = f32(s, (int64_t[]){2, 2}, 2);
    const int64_t iv[4] = {2, 0, 2, 2};
    int64_t is[2] = {2, 2};
    jag_tensor *ix = NULL, *bad = NULL;
    CHECK_OK(jag_from_data(iv, is, 2, JAG_INT64, &ix));
    jag_value a[4] = {{.kind = JAG_VAL_TENSOR, .u.t = x}, {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_TENSOR, .u.t = ix},
                      {.kind = JAG_VAL_TENSOR, .u.t = src}};
    CHECK_OK(jag_op_call(op_id("scatter_add"), a, 4, &out));
    /* out[2][0] += 1 + 3, out[0][1] += 2, out[2][1] += 4 */
    const float want[6] = {1, 3, 1, 1, 5, 5};
    for (int i = 0; i < 6; i++) CHECK_MSG(at(out, i) == want[i], "element %d", i);
    CHECK(at(x, 0) == 1 && at(x, 4) == 1); /* x untouched */
    const int64_t ov[4] = {0, 3, 0, 0};
    CHECK_OK(jag_from_data(ov, is, 2, JAG_INT64, &bad));
    a[2].u.t = bad;
    jag_tensor *none = NULL;
    CHECK_ERR(jag_op_call(op_id("scatter_add"), a, 4, &none), JAG_ERANGE, "index 3 is outside [0, 3)");
    CHECK(none == NULL);
    jag_release(out), jag_release(x), jag_release(src), jag_release(ix), jag_release(bad);
}

TEST_MAIN(test_ragged_reduce_by_hand, test_nested_mean_matches_components, test_bad_offsets_refused,
          test_varlen_attention_matches_items, test_scatter_add)
