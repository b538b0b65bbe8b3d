/* The plain ops a traced nested program desugars into — ragged_reduce,
 * ragged_reduce_backward, varlen_attention(_backward), scatter_add — called
 * by name as a user may: results against hand-computed values and against
 * the nested ops they stand for, and offsets, lengths and indices that do
 * not fit refused with a clear error, nothing written, nothing leaked. */
#include "test.h"
#include "cpu/ragged_kernels.h"
#include "cpu/stream.h"
#include "cpu/vecmath.h"
#include "subclass/nested.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif


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
    jag_tensor *values = f32(v, (int64_t[]){5, 2}, 2), *off = t_i64((int64_t[]){0, 2, 5}, 3), *out = NULL, *g = NULL;
    jag_value a[7] = {{.kind = JAG_VAL_TENSOR, .u.t = values}, {.kind = JAG_VAL_TENSOR, .u.t = off}, {.kind = JAG_VAL_NONE},
                      {.kind = JAG_VAL_INT, .u.i = 0 /* sum */}, {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_INT, .u.i = 0},
                      {.kind = JAG_VAL_BOOL, .u.b = false}};
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out));
    CHECK(jag_ndim(out) == 2 && jag_size(out, 0) == 2 && jag_size(out, 1) == 2);
    CHECK(at(out, 0) == 4 && at(out, 1) == 6 && at(out, 2) == 21 && at(out, 3) == 24);
    jag_release(out);
    a[3].u.i = 1; /* mean */
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out));
    CHECK(at(out, 0) == 2 && at(out, 1) == 3 && at(out, 2) == 7 && at(out, 3) == 8);
    /* its backward: the mean's gradient spreads g / length over each component's rows */
    const float gv[4] = {2, 4, 3, 6};
    g = f32(gv, (int64_t[]){2, 2}, 2);
    jag_value b[10] = {a[0], a[1], a[2], {.kind = JAG_VAL_TENSOR, .u.t = out}, {.kind = JAG_VAL_NONE},
                       {.kind = JAG_VAL_TENSOR, .u.t = g}, a[3], a[4], a[5], a[6]};
    jag_tensor *gx = NULL;
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce_backward"), b, 10, &gx));
    CHECK(jag_size(gx, 0) == 5 && at(gx, 0) == 1 && at(gx, 1) == 2 && at(gx, 2) == 1 && at(gx, 4) == 1 && at(gx, 5) == 2 &&
          at(gx, 9) == 2);
    /* max (kind 7) given the forward's indices, as max_dim's backward: g goes
     * to row offsets[b] + idx[b, c] of its column, every other row gets 0 */
    jag_tensor *ix = t_i64((int64_t[]){1, 0, 2, 1}, 4), *ix2 = NULL, *gm = NULL;
    CHECK_OK(jag_view(ix, (int64_t[]){2, 2}, 2, &ix2));
    jag_value m[10] = {b[0], b[1], b[2], {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_TENSOR, .u.t = ix2}, b[5],
                       {.kind = JAG_VAL_INT, .u.i = 7}, b[7], b[8], b[9]};
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce_backward"), m, 10, &gm));
    /* column 0: rows 1 and 2 + 2 get 2 and 3; column 1: rows 0 and 2 + 1 get 4 and 6 */
    const float want_m[10] = {0, 4, 2, 0, 0, 0, 0, 6, 3, 0};
    for (int i = 0; i < 10; i++) CHECK_MSG(at(gm, i) == want_m[i], "max backward element %d: %g", i, at(gm, i));
    jag_release(gm), gm = NULL;
    /* an index past its component (component 0 has 2 rows) is refused before anything is written */
    ((int64_t *)jag_data(ix))[0] = 2;
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce_backward"), m, 10, &gm), JAG_ERANGE,
              "argument 'idx' holds 2 for component 0 of 2 rows");
    CHECK(gm == NULL);
    m[4] = (jag_value){.kind = JAG_VAL_NONE};
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce_backward"), m, 10, &gm), JAG_EINVAL, "argument 'idx'");
    jag_release(ix), jag_release(ix2);
    /* lengths make holes: component 1 keeps rows [2, 3) only */
    jag_tensor *len = t_i64((int64_t[]){2, 1}, 2), *h = NULL;
    a[2] = (jag_value){.kind = JAG_VAL_TENSOR, .u.t = len};
    a[3].u.i = 0;
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce"), a, 7, &h));
    CHECK(at(h, 2) == 5 && at(h, 3) == 6);
    jag_release(out), jag_release(g), jag_release(gx), jag_release(h), jag_release(len);
    jag_release(values), jag_release(off);
}

/* ragged_reduce on integer values (torch's result dtypes: sum int64, mean
 * float32, amax the values'), ragged_reduce_indices by hand, and the
 * arguments both refuse. */
static void test_integer_values_and_indices_by_hand(void) {
    TEST_BEGIN();
    int32_t iv[5] = {4, -1, 7, 2, 9};
    jag_tensor *vi = NULL, *off = t_i64((int64_t[]){0, 2, 5}, 3), *out = NULL, *outs[2] = {0};
    CHECK_OK(jag_from_data(iv, (int64_t[]){5}, 1, JAG_INT32, &vi));
    jag_value a[7] = {{.kind = JAG_VAL_TENSOR, .u.t = vi}, {.kind = JAG_VAL_TENSOR, .u.t = off}, {.kind = JAG_VAL_NONE},
                      {.kind = JAG_VAL_INT, .u.i = 0 /* sum */}, {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_INT, .u.i = 0},
                      {.kind = JAG_VAL_BOOL, .u.b = false}};
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out));
    CHECK(jag_tensor_dtype(out) == JAG_INT64 && t_get(out, 0) == 3 && t_get(out, 1) == 18);
    jag_release(out), out = NULL;
    a[3].u.i = 1; /* mean: float32 */
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out));
    CHECK(jag_tensor_dtype(out) == JAG_FLOAT32 && t_get(out, 0) == 1.5 && t_get(out, 1) == 6);
    jag_release(out), out = NULL;
    a[3].u.i = 2; /* amax: the values' dtype */
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out));
    CHECK(jag_tensor_dtype(out) == JAG_INT32 && t_get(out, 0) == 4 && t_get(out, 1) == 9);
    jag_release(out), out = NULL;
    a[3].u.i = 4; /* logsumexp needs float values */
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out), JAG_EDTYPE, "argument 'values' must be a float tensor");
    CHECK(out == NULL);
    /* ragged_reduce_indices: min of (1, 2), (3, 4, 0.5) per column -> values and rows */
    const float fv[10] = {1, 2, 3, 4, 5, 6, 0.5f, 8, 9, -1};
    jag_tensor *vf = f32(fv, (int64_t[]){5, 2}, 2);
    jag_value m[5] = {{.kind = JAG_VAL_TENSOR, .u.t = vf}, {.kind = JAG_VAL_TENSOR, .u.t = off}, {.kind = JAG_VAL_NONE},
                      {.kind = JAG_VAL_INT, .u.i = 8 /* min */}, {.kind = JAG_VAL_BOOL, .u.b = true}};
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce_indices"), m, 5, outs));
    CHECK(jag_ndim(outs[0]) == 3 && jag_size(outs[0], 1) == 1 && jag_tensor_dtype(outs[1]) == JAG_INT64);
    CHECK(at(outs[0], 0) == 1 && at(outs[0], 1) == 2 && at(outs[0], 2) == 0.5f && at(outs[0], 3) == -1);
    CHECK(t_get(outs[1], 0) == 0 && t_get(outs[1], 1) == 0 && t_get(outs[1], 2) == 1 && t_get(outs[1], 3) == 2);
    jag_release(outs[0]), jag_release(outs[1]), outs[0] = outs[1] = NULL;
    m[3].u.i = 0; /* a kind without indices */
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce_indices"), m, 5, outs), JAG_EINVAL, "expected max (7) or min (8)");
    /* int32 values: max of (4, -1), (7, 2, 9) and its row within the component */
    m[3].u.i = 7, m[0].u.t = vi;
    CHECK_OK(jag_op_call(t_op_id("ragged_reduce_indices"), m, 5, outs));
    CHECK(jag_tensor_dtype(outs[0]) == JAG_INT32 && t_get(outs[0], 0) == 4 && t_get(outs[0], 1) == 9);
    CHECK(jag_tensor_dtype(outs[1]) == JAG_INT64 && t_get(outs[1], 0) == 0 && t_get(outs[1], 1) == 2);
    jag_release(outs[0]), jag_release(outs[1]), outs[0] = outs[1] = NULL;
    /* bool values: refused */
    jag_tensor *vb = NULL;
    CHECK_OK(jag_from_data((bool[]){true, false, true, true, false}, (int64_t[]){5}, 1, JAG_BOOL, &vb));
    m[0].u.t = vb;
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce_indices"), m, 5, outs), JAG_EDTYPE, "must be a float, int32 or int64 tensor");
    CHECK(outs[0] == NULL && outs[1] == NULL);
    jag_release(vb);
    /* ragged_reduce_backward: max takes the ragged dim alone, idx int64 of g's shape, and only for max / min */
    jag_tensor *g = f32((const float[]){1, 1, 1, 1}, (int64_t[]){2, 2}, 2), *ix = t_i64((int64_t[]){0, 1, 0, 1}, 4);
    jag_tensor *ix2 = NULL, *y = NULL;
    CHECK_OK(jag_view(ix, (int64_t[]){2, 2}, 2, &ix2));
    jag_value b[10] = {{.kind = JAG_VAL_TENSOR, .u.t = vf}, {.kind = JAG_VAL_TENSOR, .u.t = off}, {.kind = JAG_VAL_NONE},
                       {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_TENSOR, .u.t = ix2}, {.kind = JAG_VAL_TENSOR, .u.t = g},
                       {.kind = JAG_VAL_INT, .u.i = 7}, {.kind = JAG_VAL_INT, .u.i = 2}, {.kind = JAG_VAL_INT, .u.i = 0},
                       {.kind = JAG_VAL_BOOL, .u.b = false}};
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce_backward"), b, 10, &y), JAG_EINVAL, "max and min take the ragged dim alone");
    b[7].u.i = 0, b[4].u.t = g; /* float indices */
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce_backward"), b, 10, &y), JAG_ESHAPE, "argument 'idx' is float32");
    b[4].u.t = ix2, b[6].u.i = 0; /* sum takes no indices */
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce_backward"), b, 10, &y), JAG_EINVAL, "'idx' (the forward's indices) is not taken");
    CHECK(y == NULL);
    jag_release(g), jag_release(ix), jag_release(ix2), jag_release(vf), jag_release(vi), jag_release(off);
}

/* The nested mean over the ragged dim goes through ragged_reduce: equal to
 * the mean of each unbound component. */
static void test_nested_mean_matches_components(void) {
    TEST_BEGIN();
    int64_t vs[2] = {9, 3};
    jag_tensor *v = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 7), *off = t_i64((int64_t[]){0, 4, 4, 9}, 4), *nt = NULL, *m = NULL;
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
    jag_tensor *values = f32(v, (int64_t[]){3, 2}, 2), *past = t_i64((int64_t[]){0, 2, 7}, 3), *down = t_i64((int64_t[]){0, 3, 1}, 3);
    jag_tensor *out = NULL;
    jag_value a[7] = {{.kind = JAG_VAL_TENSOR, .u.t = values}, {.kind = JAG_VAL_TENSOR, .u.t = past}, {.kind = JAG_VAL_NONE},
                      {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_INT, .u.i = 0},
                      {.kind = JAG_VAL_BOOL, .u.b = false}};
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out), JAG_EINVAL, "do not fit the 3 value rows");
    CHECK(out == NULL);
    a[1].u.t = down;
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out), JAG_EINVAL, "component 1");
    a[3].u.i = 8; /* max with indices: not this op's */
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out), JAG_EINVAL, "argument 'kind'");
    CHECK(out == NULL);
    /* attention: q's offsets past its rows */
    int64_t qs[3] = {3, 1, 2};
    jag_tensor *q = t_rand(qs, 3, JAG_FLOAT32, -1, 1, 3), *outs[2] = {0};
    jag_value at9[9] = {{.kind = JAG_VAL_TENSOR, .u.t = q}, {.kind = JAG_VAL_TENSOR, .u.t = q}, {.kind = JAG_VAL_TENSOR, .u.t = q},
                        {.kind = JAG_VAL_TENSOR, .u.t = past}, {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_TENSOR, .u.t = past},
                        {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_BOOL, .u.b = false}, {.kind = JAG_VAL_DOUBLE, .u.d = 0}};
    CHECK_ERR(jag_op_call(t_op_id("varlen_attention"), at9, 9, outs), JAG_EINVAL, "do not fit the 3 rows");
    CHECK(outs[0] == NULL && outs[1] == NULL);
    jag_tensor *empty = NULL; /* no offsets at all: not even B = 0 */
    CHECK_OK(jag_empty((int64_t[]){0}, 1, JAG_INT64, &empty));
    at9[3].u.t = empty, at9[5].u.t = empty;
    CHECK_ERR(jag_op_call(t_op_id("varlen_attention"), at9, 9, outs), JAG_EINVAL, "'q_offsets' must be int64 of shape (B+1)");
    a[1].u.t = empty, a[3].u.i = 0;
    CHECK_ERR(jag_op_call(t_op_id("ragged_reduce"), a, 7, &out), JAG_EINVAL, "'offsets' must be int64 of shape (B+1)");
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
    jag_tensor *v = t_rand(qs, 3, JAG_FLOAT64, -1, 1, 13), *off = t_i64((int64_t[]){0, 2, 5}, 3), *outs[2] = {0};
    jag_value a[9] = {{.kind = JAG_VAL_TENSOR, .u.t = q}, {.kind = JAG_VAL_TENSOR, .u.t = k}, {.kind = JAG_VAL_TENSOR, .u.t = v},
                      {.kind = JAG_VAL_TENSOR, .u.t = off}, {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_TENSOR, .u.t = off},
                      {.kind = JAG_VAL_NONE}, {.kind = JAG_VAL_BOOL, .u.b = true}, {.kind = JAG_VAL_DOUBLE, .u.d = 0}};
    CHECK_OK(jag_op_call(t_op_id("varlen_attention"), a, 9, outs));
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
    CHECK_OK(jag_op_call(t_op_id("scatter_add"), a, 4, &out));
    /* out[2][0] += 1 + 3, out[0][1] += 2, out[2][1] += 4 */
    const float want[6] = {1, 3, 1, 1, 5, 5};
    for (int i = 0; i < 6; i++) CHECK_MSG(at(out, i) == want[i], "element %d", i);
    CHECK(at(x, 0) == 1 && at(x, 4) == 1); /* x untouched */
    const int64_t ov[4] = {0, 3, 0, 0};
    CHECK_OK(jag_from_data(ov, is, 2, JAG_INT64, &bad));
    a[2].u.t = bad;
    jag_tensor *none = NULL;
    CHECK_ERR(jag_op_call(t_op_id("scatter_add"), a, 4, &none), JAG_ERANGE, "index 3 is outside [0, 3)");
    CHECK(none == NULL);
    jag_release(out), jag_release(x), jag_release(src), jag_release(ix), jag_release(bad);
    /* whole rows: an index constant along every dim but `dim` (expanded, as
     * the backward of embedding and index_select builds it), repeats
     * included, int32 and int64, float32 and float64; against the element
     * formula written out here, bit for bit */
    for (int f = 0; f < 2; f++)
        for (int i32 = 0; i32 < 2; i32++)
            for (int dim = 0; dim < 2; dim++) {
                jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
                int64_t xs[3] = {3, 5, 7}, ss[3] = {3, 5, 7}, n = 9;
                ss[dim] = n;
                jag_tensor *xx = t_rand(xs, 3, dt, -1, 1, 40 + f), *ssrc = t_rand(ss, 3, dt, -1, 1, 42 + f);
                int64_t raw[9] = {2, 0, 2, 1, 2, 4, 0, 2, 1}, lim = xs[dim];
                for (int k = 0; k < 9; k++) raw[k] %= lim;
                jag_tensor *iv64 = NULL, *ivec = NULL, *iview = NULL, *iexp = NULL, *o = NULL;
                CHECK_OK(jag_from_data(raw, &n, 1, JAG_INT64, &iv64));
                CHECK_OK(jag_to_dtype(iv64, i32 ? JAG_INT32 : JAG_INT64, &ivec));
                int64_t vsz[3] = {1, 1, 1};
                vsz[dim] = n;
                CHECK_OK(jag_reshape(ivec, vsz, 3, &iview));
                CHECK_OK(jag_expand(iview, ss, 3, &iexp));
                jag_value b[4] = {{.kind = JAG_VAL_TENSOR, .u.t = xx}, {.kind = JAG_VAL_INT, .u.i = dim},
                                  {.kind = JAG_VAL_TENSOR, .u.t = iexp}, {.kind = JAG_VAL_TENSOR, .u.t = ssrc}};
                CHECK_OK(jag_op_call(t_op_id("scatter_add"), b, 4, &o));
                double expect[105];
                for (int e = 0; e < 105; e++) expect[e] = t_get(xx, e);
                for (int64_t a0 = 0; a0 < ss[0]; a0++)
                    for (int64_t a1 = 0; a1 < ss[1]; a1++)
                        for (int64_t a2 = 0; a2 < 7; a2++) {
                            int64_t c[3] = {a0, a1, a2};
                            c[dim] = raw[dim ? a1 : a0];
                            int64_t e = (c[0] * 5 + c[1]) * 7 + c[2];
                            double v = t_get(ssrc, (a0 * ss[1] + a1) * 7 + a2);
                            expect[e] = f ? expect[e] + v : (double)((float)expect[e] + (float)v);
                        }
                for (int e = 0; o && e < 105; e++)
                    CHECK_MSG(t_get(o, e) == expect[e], "rows along dim %d (%s, %s index) element %d", dim,
                              jag_dtype_name(dt), i32 ? "int32" : "int64", e);
                jag_release(o), o = NULL;
                /* an index out of range: refused before anything is written */
                raw[4] = lim;
                jag_tensor *bad64 = NULL, *badv = NULL, *bade = NULL;
                CHECK_OK(jag_from_data(raw, &n, 1, JAG_INT64, &bad64));
                CHECK_OK(jag_reshape(bad64, vsz, 3, &badv));
                CHECK_OK(jag_expand(badv, ss, 3, &bade));
                b[2].u.t = bade;
                CHECK_ERR(jag_op_call(t_op_id("scatter_add"), b, 4, &o), JAG_ERANGE, "is outside [0,");
                CHECK(o == NULL);
                jag_release(bad64), jag_release(badv), jag_release(bade);
                jag_release(xx), jag_release(ssrc), jag_release(iv64), jag_release(ivec), jag_release(iview), jag_release(iexp);
            }
}

/* ---- the engine along the ragged dim against its naive references -------- */

/* The exps of the ragged softmax and logsumexp (as this file is compiled:
 * with or without FMA) against libm's double exp, over every 61st float in
 * [-90, 0] and the special values: within their documented bounds. */
static void test_engine_exps(void) {
    TEST_BEGIN();
#ifdef FP_FAST_FMAF
    const double ulp_bound = 1.052, abs_bound = 1.8e-7, rel0 = 2.5e-7, rel1 = 1.3e-8;
#else
    const double ulp_bound = 1.341, abs_bound = 1.9e-7, rel0 = 6.6e-7, rel1 = 6.2e-8;
#endif
    double worst_ulp = 0, worst_abs = 0, worst_rel = 0;
    int bad_flush = 0;
    for (uint32_t u = 0x80000000u; u <= 0xc2b40000u; u += 61) { /* -0 .. -90 */
        float x;
        memcpy(&x, &u, sizeof x);
        double ref = exp((double)x), y = jag__vm_exp_nonpos_f32(x), z = jag__vm_exp_sum_f32(x);
        if (x > -86.5f) {
            int e;
            frexp(ref, &e);
            double err = fabs(y - ref) / ldexp(1.0, e - 24);
            worst_ulp = err > worst_ulp ? err : worst_ulp;
        } else {
            bad_flush += y != 0;
        }
        if (x > -86.0f) {
            double ab = fabs(z - ref), rel = ab / ref - rel1 * fabs((double)x);
            worst_abs = ab > worst_abs ? ab : worst_abs;
            worst_rel = rel > worst_rel ? rel : worst_rel;
        }
    }
    CHECK_MSG(worst_ulp <= ulp_bound, "exp_nonpos: %.3f ulp", worst_ulp);
    CHECK_MSG(worst_abs <= abs_bound, "exp_sum: absolute error %.3g", worst_abs);
    CHECK_MSG(worst_rel <= rel0, "exp_sum: relative error %.3g beyond %.2g |x|", worst_rel, rel1);
    CHECK(bad_flush == 0);
    CHECK(jag__vm_exp_nonpos_f32(0.0f) == 1.0f && jag__vm_exp_nonpos_f32(-INFINITY) == 0.0f && jag__vm_exp_nonpos_f32(NAN) == 0.0f);
    CHECK(fabs(jag__vm_exp_sum_f32(0.0f) - 1.0) <= abs_bound && jag__vm_exp_sum_f32(-INFINITY) < 1e-37f &&
          jag__vm_exp_sum_f32(NAN) < 1e-37f);
}

/* The log of a float32 logsumexp's sum against libm's: relative error
 * below 1e-11 for s in [1, 2^40): every 997th float above 1 (as doubles),
 * the values around sqrt(2) times powers of two (where the reduction
 * switches), and 1 (log 0, exactly). */
static void test_engine_log(void) {
    TEST_BEGIN();
    double worst = 0;
    for (uint32_t u = 0x3f800000u; u < 0x53800000u; u += 997) {
        float f;
        memcpy(&f, &u, sizeof f);
        double s = (double)f, ref = log(s), rel = fabs(jag__vm_log_ge1_for_f32(s) - ref) / (ref > 0 ? ref : 1);
        worst = rel > worst ? rel : worst;
    }
    for (int e = 0; e < 40; e++)
        for (int k = -4; k <= 4; k++) {
            double s = nextafter(ldexp(sqrt(2.0), e), k < 0 ? 0 : INFINITY);
            for (int i = 1; i < (k < 0 ? -k : k); i++) s = nextafter(s, k < 0 ? 0 : INFINITY);
            double ref = log(s), rel = fabs(jag__vm_log_ge1_for_f32(s) - ref) / ref;
            worst = rel > worst ? rel : worst;
        }
    CHECK_MSG(worst < 1e-11, "log: relative error %.3g", worst);
    CHECK(jag__vm_log_ge1_for_f32(1.0) == 0.0);
}

/* y and want contiguous of one float dtype: |y - want| <= atol + rtol |want|,
 * NaN equal to NaN, infinities equal. */
static bool close_data(const jag_tensor *y, const jag_tensor *want, double rtol, double atol, const char *what) {
    int64_t n = jag_numel(want);
    bool f64 = jag_tensor_dtype(want) == JAG_FLOAT64;
    if (jag_numel(y) != n || jag_tensor_dtype(y) != jag_tensor_dtype(want)) return false;
    for (int64_t i = 0; i < n; i++) {
        double a = f64 ? ((const double *)jag_data(y))[i] : ((const float *)jag_data(y))[i];
        double b = f64 ? ((const double *)jag_data(want))[i] : ((const float *)jag_data(want))[i];
        if ((isnan(a) && isnan(b)) || a == b) continue;
        if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
            fprintf(stderr, "%s: element %lld: %.9g, expected %.9g\n", what, (long long)i, a, b);
            return false;
        }
    }
    return true;
}

static bool same_bits(const jag_tensor *a, const jag_tensor *b) {
    size_t n = (size_t)jag_numel(a) * (jag_tensor_dtype(a) == JAG_FLOAT32 ? 4 : 8);
    return jag_numel(a) == jag_numel(b) && memcmp(jag_data(a), jag_data(b), n) == 0;
}

/* n elements at a and b (float32, or float64 when f64): the same bits, or
 * both NaN. A NaN result's sign and payload are not specified: x86
 * returns the first operand's NaN when both are NaN, and compilers order a
 * product's operands either way (clang's scalar loop and the vector
 * kernel give -NaN and +NaN for the same element). */
static bool same_values(const void *a, const void *b, int64_t n, bool f64) {
    for (int64_t i = 0; i < n; i++) {
        double x = f64 ? ((const double *)a)[i] : ((const float *)a)[i];
        double y = f64 ? ((const double *)b)[i] : ((const float *)b)[i];
        if (x != x && y != y) continue;
        if (memcmp((const char *)a + i * (f64 ? 8 : 4), (const char *)b + i * (f64 ? 8 : 4), f64 ? 8 : 4) != 0) return false;
    }
    return true;
}

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* A jagged (B, j, D) tensor of dtype dt: components of lengths len, each
 * followed by `gap` rows of a hole (lengths given when gap > 0); values in
 * [-2, 2), and with `specials` some columns of some components hold -inf,
 * +inf, NaN, only -inf, or large values. */
static jag_tensor *engine_input(jag_dtype dt, const int64_t *len, int64_t B, int64_t D, int64_t gap, bool specials,
                                uint64_t seed) {
    int64_t *o = malloc((size_t)(B + 1) * sizeof *o), nb1 = B + 1;
    o[0] = 0;
    for (int64_t b = 0; b < B; b++) o[b + 1] = o[b] + len[b] + gap;
    int64_t vs[2] = {o[B], D};
    jag_tensor *values = t_rand(vs, 2, dt, -2, 2, seed), *off = NULL, *lens = NULL, *nt = NULL;
    if (specials) {
        bool f64 = dt == JAG_FLOAT64;
        for (int64_t b = 0; b < B; b++) {
            for (int64_t r = 0; r < len[b]; r++) {
                int64_t i = (o[b] + r) * D;
                double v[5] = {r == 1 ? -INFINITY : NAN, r == len[b] - 1 ? INFINITY : NAN, r == len[b] / 2 ? NAN : NAN,
                               -INFINITY, 1000.0 + (double)r};
                /* column c of component b: c % 5 == b % 5 gets its special, where one is defined */
                for (int64_t c = 0; c < D; c++) {
                    int kind = (int)((c + b) % 7);
                    double x = kind == 0 && r == 1 ? v[0] : kind == 1 && r == len[b] - 1 ? v[1] : kind == 2 && r == len[b] / 2 ? v[2]
                             : kind == 3 ? v[3] : kind == 4 ? v[4] + (double)c : NAN;
                    if (isnan(x) && kind != 2) continue;
                    if (f64) ((double *)jag_data(values))[i + c] = x;
                    else ((float *)jag_data(values))[i + c] = (float)x;
                }
            }
        }
    }
    if (jag_from_data(o, &nb1, 1, JAG_INT64, &off) || (gap && jag_from_data(len, &B, 1, JAG_INT64, &lens)) ||
        jag_nested_from_jagged(values, off, lens, &nt)) {
        fprintf(stderr, "engine_input: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(values), jag_release(off), jag_release(lens), free(o);
    return nt;
}

/* A jagged tensor's components' rows, as the kernels take them. */
static jag_ragged_rows rows_of(const nested_state *s) {
    return (jag_ragged_rows){.batch = s->batch,
                             .offsets = jag_data(s->offsets),
                             .lengths = s->lengths ? jag_data(s->lengths) : NULL};
}

/* Every kind over the ragged dim of nt, by the engine with 1 and 2 threads
 * (the same bits) and against the naive reference; softmax and log_softmax
 * and their gradient too. */
static void check_engine(const jag_tensor *nt, bool any_empty, const char *what) {
    const nested_state *s = jag__nested(nt);
    jag_ragged_rows rows = rows_of(s);
    bool f64 = jag_tensor_dtype(s->values) == JAG_FLOAT64;
    static const char *names[] = {"sum", "mean", "amax", "amin", "logsumexp", "var", "std", "max", "min", "argmax", "argmin"};
    for (int k = JAG_SEG_SUM; k <= JAG_SEG_ARGMIN; k++)
        for (int corr = 0; corr < (k == JAG_SEG_VAR || k == JAG_SEG_STD ? 2 : 1); corr++) {
            jag_segment_spec sp = {.kind = (jag_segment_kind)k, .correction = corr};
            bool extreme = k == JAG_SEG_AMAX || k == JAG_SEG_AMIN || k >= JAG_SEG_MAX;
            jag_tensor *o1[2] = {0}, *o2[2] = {0}, *want = NULL, *wix = NULL;
            set_threads(1);
            jag_status st = jag__segment_reduce_dims("engine", s, &sp, o1);
            set_threads(2);
            if (extreme && any_empty) {
                CHECK_MSG(st == JAG_EINVAL && o1[0] == NULL, "%s %s: empty component refused", what, names[k]);
                continue;
            }
            CHECK_OK(st);
            CHECK_OK(jag__segment_reduce_dims("engine", s, &sp, o2));
            bool has_val = k != JAG_SEG_ARGMAX && k != JAG_SEG_ARGMIN, has_idx = k >= JAG_SEG_MAX;
            jag_tensor *y1 = has_val ? o1[0] : NULL, *i1 = has_idx ? o1[has_val ? 1 : 0] : NULL;
            jag_tensor *y2 = has_val ? o2[0] : NULL, *i2 = has_idx ? o2[has_val ? 1 : 0] : NULL;
            int64_t shp[2] = {s->batch, jag_numel(s->values) / (s->values->sizes[0] ? s->values->sizes[0] : 1)};
            if (has_val) CHECK_OK(jag_empty(shp, 2, jag_tensor_dtype(s->values), &want));
            if (has_idx) CHECK_OK(jag_empty(shp, 2, JAG_INT64, &wix));
            CHECK_OK(jag__ragged_reduce_reference("ref", s->values, &rows, &sp, want, wix));
            double tol = f64 ? 1e-12 : k == JAG_SEG_LSE ? 2e-6 : 1e-6;
            char w2[160];
            snprintf(w2, sizeof w2, "%s %s corr %d", what, names[k], corr);
            if (has_val) {
                CHECK_MSG(same_bits(y1, y2), "%s: 1 and 2 threads differ", w2);
                CHECK_MSG(close_data(y1, want, tol, tol, w2), "%s", w2);
            }
            if (has_idx) {
                bool ok = same_bits(i1, i2) && same_bits(i1, wix);
                CHECK_MSG(ok, "%s: indices", w2);
            }
            /* the gradient (argmax / argmin have none), against the plain one, 1 and 2 threads */
            if (has_val) {
                jag_tensor *g = t_rand(shp, 2, f64 ? JAG_FLOAT64 : JAG_FLOAT32, -1, 1, 900 + (uint64_t)k), *z1 = NULL, *z2 = NULL,
                           *zr = NULL;
                set_threads(1);
                CHECK_OK(jag__segment_reduce_grad("engine", s, &sp, y1, i1, g, &z1));
                set_threads(2);
                CHECK_OK(jag__segment_reduce_grad("engine", s, &sp, y1, i1, g, &z2));
                CHECK_OK(jag_empty(s->values->sizes, s->values->ndim, jag_tensor_dtype(s->values), &zr));
                CHECK_OK(jag__ragged_reduce_backward_reference("ref", s->values, &rows, &sp, y1, i1, g, zr));
                CHECK_MSG(z1 && z2 && same_bits(z1, z2), "%s: gradient, 1 and 2 threads differ", w2);
                CHECK_MSG(z1 && zr && close_data(z1, zr, f64 ? 1e-12 : 1e-6, f64 ? 1e-12 : 1e-7, w2), "%s: gradient", w2);
                /* into a given tensor that holds garbage: the same (rows in holes zeroed) */
                jag_tensor *zi = NULL;
                CHECK_OK(jag_full(s->values->sizes, s->values->ndim, NAN, jag_tensor_dtype(s->values), &zi));
                CHECK_OK(jag__ragged_reduce_backward_kernel("engine", s->values, &rows, &sp, y1, i1, g, zi));
                CHECK_MSG(z1 && same_bits(zi, z1), "%s: gradient into a given tensor", w2);
                jag_release(zi);
                jag_release(g), jag_release(z1), jag_release(z2), jag_release(zr);
            }
            jag_release(o1[0]), jag_release(o1[1]), jag_release(o2[0]), jag_release(o2[1]), jag_release(want), jag_release(wix);
        }
    /* softmax and its gradient into tensors that hold garbage (NaN): rows in
     * holes must come out 0, as the references' zeroed outputs keep them */
    const int64_t *vsz = s->values->sizes;
    int vnd = s->values->ndim;
    jag_dtype vdt = jag_tensor_dtype(s->values);
    for (int lg = 0; lg < 2; lg++) {
        jag_tensor *y1 = NULL, *y2 = NULL, *want = NULL, *g = t_rand(vsz, vnd, vdt, -1, 1, 950 + (uint64_t)lg);
        jag_tensor *z1 = NULL, *z2 = NULL, *zwant = NULL;
        CHECK_OK(jag_full(vsz, vnd, NAN, vdt, &y1));
        CHECK_OK(jag_full(vsz, vnd, NAN, vdt, &y2));
        CHECK_OK(jag_full(vsz, vnd, NAN, vdt, &z1));
        CHECK_OK(jag_full(vsz, vnd, NAN, vdt, &z2));
        set_threads(1);
        CHECK_OK(jag__ragged_softmax_kernel("engine", s->values, &rows, lg, y1));
        set_threads(2);
        CHECK_OK(jag__ragged_softmax_kernel("engine", s->values, &rows, lg, y2));
        CHECK_OK(jag_zeros(vsz, vnd, vdt, &want));
        CHECK_OK(jag__ragged_softmax_reference("ref", s->values, &rows, lg, want));
        char w2[160];
        snprintf(w2, sizeof w2, "%s %s", what, lg ? "log_softmax" : "softmax");
        CHECK_MSG(same_bits(y1, y2), "%s: 1 and 2 threads differ", w2);
        CHECK_MSG(close_data(y1, want, f64 ? 1e-12 : 1e-5, f64 ? 1e-12 : 1e-6, w2), "%s", w2);
        /* the gradient from the reference's output (y's NaN columns give NaN, alike in both) */
        set_threads(1);
        CHECK_OK(jag__ragged_softmax_backward_kernel("engine", want, &rows, g, lg, z1));
        set_threads(2);
        CHECK_OK(jag__ragged_softmax_backward_kernel("engine", want, &rows, g, lg, z2));
        CHECK_OK(jag_zeros(vsz, vnd, vdt, &zwant));
        CHECK_OK(jag__ragged_softmax_backward_reference("ref", want, &rows, g, lg, zwant));
        CHECK_MSG(same_bits(z1, z2), "%s gradient: 1 and 2 threads differ", w2);
        CHECK_MSG(close_data(z1, zwant, f64 ? 1e-12 : 1e-5, f64 ? 1e-12 : 1e-6, w2), "%s gradient", w2);
        jag_release(y1), jag_release(y2), jag_release(want), jag_release(g);
        jag_release(z1), jag_release(z2), jag_release(zwant);
    }
}

static void test_engine_matches_references(void) {
    TEST_BEGIN();
    const int64_t dims[] = {1, 3, 17, 255, 600};
    const int64_t few[7] = {3, 0, 1, 40, 2, 17, 1}, full[7] = {3, 5, 1, 40, 2, 17, 1};
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (int gap = 0; gap <= 2; gap += 2)
                for (int special = 0; special < 2; special++)
                    for (int empty = 0; empty < 2; empty++) {
                        jag_tensor *nt = engine_input(dt, empty ? few : full, 7, dims[di], gap, special, 500 + di);
                        char what[96];
                        snprintf(what, sizeof what, "%s D %lld gap %d specials %d empty %d", jag_dtype_name(dt),
                                 (long long)dims[di], gap, special, empty);
                        check_engine(nt, empty, what);
                        jag_release(nt);
                    }
        /* one long component (cut into chunks that threads share), alone and among short ones */
        const int64_t one[1] = {5000};
        int64_t mixed[40];
        for (int b = 0; b < 40; b++) mixed[b] = b == 17 ? 3000 : 1 + (b * 7) % 23;
        for (int di = 1; di <= 3; di++) {
            jag_tensor *a = engine_input(dt, one, 1, dims[di] == 255 ? 64 : dims[di], 0, false, 600 + (uint64_t)di);
            jag_tensor *b = engine_input(dt, mixed, 40, dims[di], di == 2 ? 1 : 0, di == 3, 610 + (uint64_t)di);
            char what[96];
            snprintf(what, sizeof what, "%s B 1 long D %lld", jag_dtype_name(dt), (long long)jag_size(a, 2));
            check_engine(a, false, what);
            snprintf(what, sizeof what, "%s B 40 mixed D %lld", jag_dtype_name(dt), (long long)dims[di]);
            check_engine(b, false, what);
            jag_release(a), jag_release(b);
        }
        /* a long component cut into chunks, over two blocks of columns (a
         * segment's blocks are consecutive tasks, each block's chunks too),
         * between short ones */
        const int64_t wide[3] = {4, 1200, 7};
        jag_tensor *w = engine_input(dt, wide, 3, 600, 0, false, 630);
        check_engine(w, false, f ? "float64 B 3 long D 600" : "float32 B 3 long D 600");
        jag_release(w);
        /* many short components (grouped into tasks), some empty */
        int64_t *many = malloc(3000 * sizeof *many);
        for (int b = 0; b < 3000; b++) many[b] = (b * 5) % 4;
        jag_tensor *m = engine_input(dt, many, 3000, 17, 0, false, 620);
        check_engine(m, true, f ? "float64 B 3000 short D 17" : "float32 B 3000 short D 17");
        jag_release(m), free(many);
    }
}

/* var and std of float32 values far from 0 (a large common offset), and
 * of a component whose first row is an outlier: no cancellation, against
 * the two-pass reference in double. */
static void test_engine_var_offsets(void) {
    TEST_BEGIN();
    const double offs[5] = {0, 1e3, 1e4, 1e5, -3e4};
    int64_t vs[2] = {900, 5}, o[4] = {0, 300, 600, 900}, four = 4;
    jag_tensor *u = t_rand(vs, 2, JAG_FLOAT64, -1, 1, 41), *v = NULL, *off = NULL, *nt = NULL;
    CHECK_OK(jag_empty(vs, 2, JAG_FLOAT32, &v));
    float *pv = jag_data(v);
    const double *pu = jag_data(u);
    for (int64_t r = 0; r < 900; r++)
        for (int c = 0; c < 5; c++) {
            double x = offs[c] + (r < 600 ? pu[r * 5 + c] : 1e-2 * pu[r * 5 + c]); /* the third component: spread 1e-2 */
            if (r == 600) x = offs[c] + 1000; /* ... after an outlier */
            pv[r * 5 + c] = (float)x;
        }
    CHECK_OK(jag_from_data(o, &four, 1, JAG_INT64, &off));
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
    const nested_state *s = jag__nested(nt);
    jag_ragged_rows rows = rows_of(s);
    for (int k = JAG_SEG_VAR; k <= JAG_SEG_STD; k++)
        for (int corr = 0; corr < 2; corr++) {
            jag_segment_spec sp = {.kind = (jag_segment_kind)k, .correction = corr};
            jag_tensor *y = NULL, *want = NULL;
            int64_t shp[2] = {3, 5};
            CHECK_OK(jag__segment_reduce_dims("engine", s, &sp, &y));
            CHECK_OK(jag_empty(shp, 2, JAG_FLOAT32, &want));
            CHECK_OK(jag__ragged_reduce_reference("ref", s->values, &rows, &sp, want, NULL));
            CHECK_MSG(y && close_data(y, want, 1e-6, 0, "var offsets"), "kind %d corr %d", k, corr);
            jag_release(y), jag_release(want);
        }
    jag_release(u), jag_release(v), jag_release(off), jag_release(nt);
}

/* logsumexp of float32 in one pass, its max growing block after block:
 * against log(sum(exp)) in double. Columns: 20 rows of -inf before finite
 * ones far below 0 (the terms of -inf must not count once a finite max
 * comes); values rising row after row (the sum rescaled at every block);
 * falling; a +inf late; a NaN late; all -inf. */
static void test_engine_lse_growing_max(void) {
    TEST_BEGIN();
    enum { R = 70, NC = 6 };
    int64_t vs[2] = {R, NC}, o[3] = {0, 30, R}, three = 3;
    jag_tensor *v = NULL, *off = NULL, *nt = NULL, *y = NULL;
    CHECK_OK(jag_empty(vs, 2, JAG_FLOAT32, &v));
    float *pv = jag_data(v);
    for (int64_t r = 0; r < R; r++) {
        int64_t i = r < 30 ? r : r - 30; /* row inside its component */
        pv[r * NC + 0] = i < 20 ? -INFINITY : -100.0f - 0.25f * (float)i;
        pv[r * NC + 1] = 0.5f * (float)i - 3.0f;
        pv[r * NC + 2] = 3.0f - 0.5f * (float)i;
        pv[r * NC + 3] = i == 25 ? INFINITY : (float)i;
        pv[r * NC + 4] = i == 27 ? NAN : (float)i;
        pv[r * NC + 5] = -INFINITY;
    }
    CHECK_OK(jag_from_data(o, &three, 1, JAG_INT64, &off));
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
    int dim = 1;
    CHECK_OK(jag_logsumexp(nt, &dim, 1, false, &y));
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < NC; c++) {
            double m = -INFINITY, sum = 0, got = t_get(y, b * NC + c);
            bool nan = false;
            for (int64_t r = o[b]; r < o[b + 1]; r++) nan |= pv[r * NC + c] != pv[r * NC + c], m = fmax(m, pv[r * NC + c]);
            for (int64_t r = o[b]; r < o[b + 1] && isfinite(m); r++) sum += exp((double)pv[r * NC + c] - m);
            double want = nan ? NAN : isfinite(m) ? m + log(sum) : m;
            bool ok = nan ? isnan(got) : isfinite(want) ? fabs(got - want) <= 2e-6 * fmax(1.0, fabs(want)) : got == want;
            CHECK_MSG(ok, "component %d column %d: %.9g, want %.9g", b, c, got, want);
        }
    jag_release(v), jag_release(off), jag_release(nt), jag_release(y);
}

/* float32 logsumexp down the ragged dim through the engine's fast path
 * (all values of a task finite: blocks of 32 rows, 16 columns a vector)
 * against log(sum(exp)) in double per item and column, within the
 * contract of the float32 kernel (2e-6 relative, as check_engine): lengths
 * around the 32-row blocks (0, 1, 31, 32, 33, 65, 300), holes, columns
 * not a multiple of 16 (37) and over two blocks of columns (520 = 512 +
 * 8), values rising row after row in some columns (the shift grows at
 * every block, the sum rescaled each time), falling in others, spread
 * over [-300, 0] (terms below exp(-86) clamped) and around +-60; a NaN
 * in one component and a +inf in another (their columns alone redone by
 * the plain kernel); 1 and 2 threads (other widths of the column blocks)
 * give the same bits. */
static void test_engine_lse_fast_blocks(void) {
    TEST_BEGIN();
    const int64_t lens[7] = {0, 1, 31, 32, 33, 65, 300}, cols[3] = {5, 37, 520};
    for (size_t ci = 0; ci < 3; ci++)
        for (int gap = 0; gap <= 3; gap += 3)
            for (int nan = 0; nan < 2; nan++) {
                int64_t C = cols[ci], B = 7, o[8], nb1 = 8;
                o[0] = 0;
                for (int64_t b = 0; b < B; b++) o[b + 1] = o[b] + lens[b] + gap;
                int64_t vs[2] = {o[B], C};
                jag_tensor *v = t_rand(vs, 2, JAG_FLOAT32, -1, 1, 700 + ci), *off = NULL, *ln = NULL, *nt = NULL;
                float *pv = jag_data(v);
                for (int64_t b = 0; b < B; b++)
                    for (int64_t r = 0; r < lens[b]; r++)
                        for (int64_t c = 0; c < C; c++) {
                            float *x = &pv[(o[b] + r) * C + c], u = *x;
                            switch (c % 5) {
                            case 0: *x = 0.05f * (float)r + u; break;      /* rising */
                            case 1: *x = -0.05f * (float)r + u; break;     /* falling */
                            case 2: *x = 150.0f * (u - 1.0f); break;       /* [-300, 0] */
                            case 3: *x = 60.0f * u; break;
                            default: break;
                            }
                        }
                if (nan) pv[(o[5] + 40) * C + 3 % C] = NAN, pv[(o[6] + 100) * C + C - 1] = INFINITY;
                CHECK_OK(jag_from_data(o, &nb1, 1, JAG_INT64, &off));
                if (gap) CHECK_OK(jag_from_data(lens, &B, 1, JAG_INT64, &ln));
                CHECK_OK(jag_nested_from_jagged(v, off, ln, &nt));
                int dim = 1;
                jag_tensor *y1 = NULL, *y2 = NULL;
                set_threads(1);
                CHECK_OK(jag_logsumexp(nt, &dim, 1, false, &y1));
                set_threads(2);
                CHECK_OK(jag_logsumexp(nt, &dim, 1, false, &y2));
                char what[96];
                snprintf(what, sizeof what, "C %lld gap %d nan %d", (long long)C, gap, nan);
                CHECK_MSG(y1 && y2 && same_bits(y1, y2), "%s: 1 and 2 threads differ", what);
                int bad = 0;
                for (int64_t b = 0; b < B && y1; b++)
                    for (int64_t c = 0; c < C; c++) {
                        double m = -INFINITY, sum = 0, got = t_get(y1, b * C + c);
                        bool isn = false;
                        for (int64_t r = o[b]; r < o[b] + lens[b]; r++) isn |= isnan(pv[r * C + c]), m = fmax(m, pv[r * C + c]);
                        for (int64_t r = o[b]; r < o[b] + lens[b] && isfinite(m); r++) sum += exp((double)pv[r * C + c] - m);
                        double want = isn ? NAN : isfinite(m) ? m + log(sum) : m;
                        bool ok = isn ? isnan(got) : isfinite(want) ? fabs(got - want) <= 2e-6 * fmax(1.0, fabs(want)) : got == want;
                        if (!ok && bad++ < 5)
                            fprintf(stderr, "%s: component %lld column %lld: %.9g, want %.9g\n", what, (long long)b, (long long)c, got, want);
                    }
                CHECK_MSG(bad == 0, "%s: %d values off", what, bad);
                jag_release(v), jag_release(off), jag_release(ln), jag_release(nt), jag_release(y1), jag_release(y2);
            }
}

/* The ragged sum's, var's and amax / amin's float32 row kernels against
 * their plain loops, bit for bit, and columns by hand: column counts around
 * the strips (64, 32 and 16 columns) and the masked tails, row counts from
 * none up, a row stride wider than the columns. Values of mixed
 * magnitudes, so that a change of order would change bits, and inf, -inf
 * and NaN in the first row and later ones (var's x0); for amax / amin also
 * coarse values full of ties (+0 and -0 among them), with and without NaNs
 * of two payloads. */
static void test_row_kernels(void) {
    TEST_BEGIN();
    const int64_t ncs[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 72, 100, 128, 135, 256, 512};
    const int64_t ns[] = {0, 1, 2, 5, 33};
    uint64_t st = 12345;
    enum { CMAX = 520, NMAX = 33 };
    float *x = malloc(sizeof(float) * CMAX * NMAX);
    double got[2][CMAX + 8], want[2][CMAX + 8];
    for (int i = 0; i < CMAX * NMAX; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)ldexp((double)(st >> 40) / (double)(1 << 24) - 0.5, (int)(st >> 20 & 31) - 10);
    }
    x[3 + 5] = INFINITY, x[3 + 40] = NAN, x[3 + 530 + 70] = -INFINITY, x[3 + 2 * 525 + 7] = NAN; /* row 0, then later rows */
    /* coarse: a few values, +0 and -0 among them (ties, where the first must
     * stay), and in one column NaNs of two payloads (the first must win) */
    float *coarse = malloc(sizeof(float) * CMAX * NMAX);
    for (int i = 0; i < CMAX * NMAX; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)(st >> 33 & 7);
        coarse[i] = k == 0 ? 0.0f : k == 1 ? -0.0f : (float)(k - 4);
    }
    float *ties = malloc(sizeof(float) * CMAX * NMAX);
    memcpy(ties, coarse, sizeof(float) * CMAX * NMAX);
    float nan1 = nanf("1"), nan2 = -nanf("2");
    for (int r = 1; r < NMAX; r += 3) coarse[3 + r * 77 + 6] = r % 2 ? nan1 : nan2; /* column 6 at row stride 77 (nc 72) */
    for (size_t a = 0; a < sizeof ncs / sizeof *ncs; a++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++) {
            int64_t nc = ncs[a], n = ns[b], C = nc + 5;
            for (int k = 0; k < 2; k++)
                for (int i = 0; i < CMAX + 8; i++) got[k][i] = want[k][i] = -1.0; /* the sentinels past nc must stay */
            jag__sum_rows_f32(x + 3, C, n, nc, got[0]);
            jag__sum_rows_f32_ref(x + 3, C, n, nc, want[0]);
            CHECK_MSG(memcmp(got[0], want[0], sizeof got[0]) == 0, "sum: nc %lld n %lld", (long long)nc, (long long)n);
            double by_hand = 0;
            for (int64_t r = 0; r < n; r++) by_hand += (double)x[3 + r * C + nc - 1];
            CHECK_MSG(got[0][nc - 1] == by_hand, "sum: nc %lld n %lld: last column", (long long)nc, (long long)n);
            jag__var_rows_f32(x + 3, C, n, nc, got[0], got[1]);
            jag__var_rows_f32_ref(x + 3, C, n, nc, want[0], want[1]);
            CHECK_MSG(memcmp(got, want, sizeof got) == 0, "var: nc %lld n %lld", (long long)nc, (long long)n);
            for (int mx = 0; n >= 1 && mx < 2; mx++) { /* amax / amin, on the data and on coarse data full of ties */
                for (int tie = 0; tie < 3; tie++) {
                    const float *xs = (tie == 0 ? x : tie == 1 ? coarse : ties) + 3;
                    float gm[CMAX + 8], wm[CMAX + 8];
                    for (int i = 0; i < CMAX + 8; i++) gm[i] = wm[i] = -1.0f;
                    jag__ext_rows_f32(xs, C, n, nc, mx, gm);
                    jag__ext_rows_f32_ref(xs, C, n, nc, mx, wm);
                    CHECK_MSG(memcmp(gm, wm, sizeof gm) == 0, "%s: nc %lld n %lld tie %d", mx ? "amax" : "amin", (long long)nc,
                              (long long)n, tie);
                    for (int64_t c = 0; c < nc; c += nc - 1 > 0 ? nc - 1 : 1) { /* first and last column by hand */
                        float h = xs[c];
                        bool h_nan = h != h;
                        for (int64_t r = 1; r < n && !h_nan; r++) {
                            float v = xs[r * C + c];
                            if (v != v) h = v, h_nan = true;
                            else if (mx ? v > h : v < h) h = v;
                        }
                        CHECK_MSG(memcmp(&gm[c], &h, sizeof h) == 0, "%s: nc %lld n %lld tie %d column %lld: %g, want %g",
                                  mx ? "amax" : "amin", (long long)nc, (long long)n, tie, (long long)c, gm[c], h);
                    }
                }
            }
            if (n >= 2) { /* the last column's mean and M2 against the two-pass formula */
                double mu = 0, q = 0;
                for (int64_t r = 0; r < n; r++) mu += (double)x[3 + r * C + nc - 1];
                mu /= (double)n;
                for (int64_t r = 0; r < n; r++) q += ((double)x[3 + r * C + nc - 1] - mu) * ((double)x[3 + r * C + nc - 1] - mu);
                bool ok = isfinite(q) ? fabs(got[0][nc - 1] - mu) <= 1e-12 * (1 + fabs(mu)) && fabs(got[1][nc - 1] - q) <= 1e-9 * (1 + q)
                                      : isnan(got[1][nc - 1]);
                CHECK_MSG(ok, "var: nc %lld n %lld: last column %g %g, want %g %g", (long long)nc, (long long)n, got[0][nc - 1],
                          got[1][nc - 1], mu, q);
            }
        }
    free(x), free(coarse), free(ties);
}

/* ragged_reduce on non-contiguous values (a slice of wider rows, and a
 * transposed layout): the same results as on contiguous ones. */
static void test_ragged_reduce_noncontiguous(void) {
    TEST_BEGIN();
    int64_t vs[2] = {300, 17};
    for (int f = 0; f < 2; f++) {
        jag_tensor *v = t_rand(vs, 2, f ? JAG_FLOAT64 : JAG_FLOAT32, -2, 2, 77), *off = t_i64((int64_t[]){0, 1, 1, 250, 300}, 5);
        jag_tensor *views[2] = {t_sliced(v), t_noncontig(v)};
        for (int kind = 0; kind <= 6; kind++) {
            jag_value a[7] = {{.kind = JAG_VAL_TENSOR, .u.t = v}, {.kind = JAG_VAL_TENSOR, .u.t = off}, {.kind = JAG_VAL_NONE},
                              {.kind = JAG_VAL_INT, .u.i = kind}, {.kind = JAG_VAL_INT, .u.i = 0}, {.kind = JAG_VAL_INT, .u.i = 1},
                              {.kind = JAG_VAL_BOOL, .u.b = false}};
            jag_tensor *want = NULL;
            if (kind == 2 || kind == 3) a[1].u.t = NULL; /* amax/amin: no empty component */
            jag_tensor *off2 = kind == 2 || kind == 3 ? t_i64((int64_t[]){0, 1, 2, 250, 300}, 5) : NULL;
            if (off2) a[1].u.t = off2;
            CHECK_OK(jag_op_call(t_op_id("ragged_reduce"), a, 7, &want));
            for (int i = 0; i < 2; i++) {
                jag_tensor *y = NULL;
                a[0].u.t = views[i];
                CHECK_OK(jag_op_call(t_op_id("ragged_reduce"), a, 7, &y));
                CHECK_MSG(y && want && same_bits(y, want), "kind %d view %d", kind, i);
                jag_release(y);
            }
            a[0].u.t = v;
            jag_release(want), jag_release(off2);
        }
        jag_release(v), jag_release(off), jag_release(views[0]), jag_release(views[1]);
    }
}

/* softmax down a component whose column holds +inf (the whole column NaN,
 * as the dense op and torch: x - max is inf - inf), -inf only (NaN), a NaN
 * (NaN), or a -inf among finite values (0, or -inf for log): the engine
 * with 1 and 2 threads (a long component in several chunks too) and the
 * naive reference, against values by hand. */
static void test_engine_softmax_inf_columns(void) {
    TEST_BEGIN();
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        for (int lng = 0; lng < 2; lng++) {
            /* component 0: 3 rows (by hand below); component 1: n rows of 1, 2, 1, 2, ... with
             * +inf in column 0, a NaN among -inf in column 1, -inf in column 3 at row n * 3 / 4 (in
             * a later chunk when long), -inf only in column 2 */
            int64_t n = lng ? 40000 : 4, R = 3 + n, C = 4, vs[2] = {R, C}, off3[3] = {0, 3, R}, three = 3;
            const double c0[3][4] = {{1, -INFINITY, NAN, 1}, {INFINITY, -INFINITY, 1, -INFINITY}, {2, -INFINITY, 2, 2}};
            double *v = malloc((size_t)(R * C) * sizeof *v);
            for (int64_t r = 0; r < 3; r++)
                for (int64_t c = 0; c < C; c++) v[r * C + c] = c0[r][c];
            for (int64_t r = 0; r < n; r++)
                for (int64_t c = 0; c < C; c++) {
                    double sp[4] = {INFINITY, NAN, -INFINITY, -INFINITY};
                    v[(3 + r) * C + c] = c == 2                 ? -INFINITY
                                         : r == n * 3 / 4         ? sp[c]
                                         : c == 1 && r > 0        ? -INFINITY
                                                                  : (double)(1 + r % 2);
                }
            jag_tensor *values = t_from(v, vs, 2, dt), *off = NULL, *nt = NULL;
            CHECK_OK(jag_from_data(off3, &three, 1, JAG_INT64, &off));
            CHECK_OK(jag_nested_from_jagged(values, off, NULL, &nt));
            const nested_state *s = jag__nested(nt);
            jag_ragged_rows rows = rows_of(s);
            for (int lg = 0; lg < 2; lg++) {
                jag_tensor *y1 = NULL, *y2 = NULL, *yr = NULL;
                CHECK_OK(jag_empty(vs, 2, dt, &y1));
                CHECK_OK(jag_empty(vs, 2, dt, &y2));
                set_threads(1);
                CHECK_OK(jag__ragged_softmax_kernel("engine", s->values, &rows, lg, y1));
                set_threads(2);
                CHECK_OK(jag__ragged_softmax_kernel("engine", s->values, &rows, lg, y2));
                CHECK_OK(jag_zeros(vs, 2, dt, &yr));
                CHECK_OK(jag__ragged_softmax_reference("ref", s->values, &rows, lg, yr));
                CHECK(y1 && y2 && same_bits(y1, y2));
                /* by hand: columns 0, 1, 2 NaN in both components; column 3 of component 0: 1,
                 * -inf, 2; of component 1: finite and one -inf */
                double e = 1 / (1 + exp(1.0)), l1 = -log1p(exp(1.0));
                const double want3[3] = {lg ? l1 : e, lg ? -INFINITY : 0, lg ? l1 + 1 : 1 - e};
                jag_tensor *ys[3] = {y1, y2, yr};
                for (int k = 0; k < 3; k++) {
                    bool ok = ys[k] != NULL;
                    for (int64_t r = 0; ok && r < R; r++)
                        for (int64_t c = 0; ok && c < C; c++) {
                            double y = f ? ((const double *)jag_data(ys[k]))[r * C + c]
                                         : ((const float *)jag_data(ys[k]))[r * C + c];
                            if (c < 3) ok = isnan(y);
                            else if (r < 3) ok = y == want3[r] || fabs(y - want3[r]) <= (f ? 1e-15 : 1e-6) * (1 + fabs(want3[r]));
                            else ok = r - 3 == n * 3 / 4 ? y == (lg ? -INFINITY : 0) : !isnan(y) && !isinf(y);
                            if (!ok)
                                fprintf(stderr, "%s %s n %lld: %s row %lld column %lld: %.9g\n", jag_dtype_name(dt),
                                        lg ? "log_softmax" : "softmax", (long long)n, k == 2 ? "reference" : "engine",
                                        (long long)r, (long long)c, y);
                        }
                    CHECK_MSG(ok, "%s %s n %lld: %s", jag_dtype_name(dt), lg ? "log_softmax" : "softmax", (long long)n,
                              k == 2 ? "reference" : "engine");
                }
                jag_release(y1), jag_release(y2), jag_release(yr);
            }
            jag_release(values), jag_release(off), jag_release(nt);
            free(v);
        }
    }
}

/* A softmax output of jag__stream_stores's size (16 MiB, lowered here to
 * 1 MiB so that the test stays small under valgrind): tasks that are not
 * chunks and fit the engine's buffer (an eighth of that size: 128 KiB
 * here) put their exps there and stream the scaled rows into y (with AVX;
 * without, the plain path runs); larger tasks (the 210-row component's
 * blocks of 352 columns, 289 KiB) write y and scale it in place. Each
 * component's rows have the bits of the same component alone (an output
 * under the size: the plain path; NaN for NaN, see same_values), with 1
 * and 2 threads, and the reference's values. Rows of 1028 values (every
 * other row 32-byte aligned, for the streaming stores): float32 and
 * float64, components of 3, 5, 70, 1, 210 and 40 rows (groups of short
 * ones with longer ones, one alone). A +inf in column 3 of the last
 * component and a NaN in column 1000 of the third (their columns NaN):
 * the other columns keep their bits whatever the width of their block,
 * which differs between the batch, a component alone on 2 threads and on
 * 1. */
static void test_engine_softmax_streamed(void) {
    TEST_BEGIN();
    const int64_t saved = jag__stream_min_bytes;
    jag__stream_min_bytes = 1 << 20;
    for (int f = 0; f < 2; f++) {
        jag_dtype dt = f ? JAG_FLOAT64 : JAG_FLOAT32;
        size_t es = f ? 8 : 4;
        const int64_t C = 1028, B = 6, nb1 = 7, lens[6] = {3, 5, 70, 1, 210, 40};
        int64_t off[7] = {0};
        for (int b = 0; b < B; b++) off[b + 1] = off[b] + lens[b];
        const int64_t R = off[B], vs[2] = {R, C};
        jag_tensor *values = t_rand(vs, 2, dt, -4, 4, 4242), *offs = NULL, *nt = NULL;
        double *vd = jag_data(values);
        float *vf = jag_data(values);
        int64_t at_inf = (off[5] + 20) * C + 3, at_nan = (off[2] + 10) * C + 1000;
        if (f) vd[at_inf] = INFINITY, vd[at_nan] = NAN;
        else vf[at_inf] = INFINITY, vf[at_nan] = NAN;
        CHECK_OK(jag_from_data(off, &nb1, 1, JAG_INT64, &offs));
        CHECK_OK(jag_nested_from_jagged(values, offs, NULL, &nt));
        jag_ragged_rows rows = rows_of(jag__nested(nt));
        CHECK((int64_t)((size_t)(R * C) * es) >= jag__stream_min_bytes); /* the streamed path's size */
        for (int lg = 0; lg < 2; lg++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s", jag_dtype_name(dt), lg ? "log_softmax" : "softmax");
            jag_tensor *y1 = NULL, *y2 = NULL, *yr = NULL;
            CHECK_OK(jag_full(vs, 2, NAN, dt, &y1));
            CHECK_OK(jag_full(vs, 2, NAN, dt, &y2));
            set_threads(1);
            CHECK_OK(jag__ragged_softmax_kernel("engine", values, &rows, lg, y1));
            set_threads(2);
            CHECK_OK(jag__ragged_softmax_kernel("engine", values, &rows, lg, y2));
            CHECK_MSG(y1 && y2 && same_values(jag_data(y1), jag_data(y2), R * C, f), "%s: 1 and 2 threads differ", what);
            for (int b = 0; b < B && y2; b++) { /* the component alone */
                int64_t one[2] = {0, lens[b]}, cs[2] = {lens[b], C};
                jag_ragged_rows r1 = {.batch = 1, .offsets = one};
                jag_tensor *part = NULL, *yp = NULL;
                CHECK_OK(jag_narrow(values, 0, off[b], lens[b], &part));
                CHECK_OK(jag_empty(cs, 2, dt, &yp));
                CHECK_OK(jag__ragged_softmax_kernel("engine", part, &r1, lg, yp));
                CHECK_MSG(yp && same_values(jag_data(yp), (const char *)jag_data(y2) + (size_t)(off[b] * C) * es, lens[b] * C, f),
                          "%s component %d: not the bits of the component alone", what, b);
                /* alone on one thread: blocks of other widths (2 threads narrow them), the same bits */
                jag_tensor *yp1 = NULL;
                CHECK_OK(jag_empty(cs, 2, dt, &yp1));
                set_threads(1);
                CHECK_OK(jag__ragged_softmax_kernel("engine", part, &r1, lg, yp1));
                set_threads(2);
                CHECK_MSG(yp && yp1 && same_values(jag_data(yp), jag_data(yp1), lens[b] * C, f),
                          "%s component %d alone: 1 and 2 threads differ", what, b);
                jag_release(part), jag_release(yp), jag_release(yp1);
            }
            CHECK_OK(jag_zeros(vs, 2, dt, &yr));
            CHECK_OK(jag__ragged_softmax_reference("ref", values, &rows, lg, yr));
            CHECK_MSG(y2 && close_data(y2, yr, f ? 1e-12 : 1e-5, f ? 1e-12 : 1e-6, what), "%s: reference", what);
            int64_t nan_at[3] = {(off[5] + 5) * C + 3, off[2] * C + 1000, off[2] * C + 999}; /* NaN, NaN, a number */
            for (int k = 0; y2 && k < 3; k++) {
                double y = f ? ((const double *)jag_data(y2))[nan_at[k]] : ((const float *)jag_data(y2))[nan_at[k]];
                CHECK_MSG((k < 2) == (y != y), "%s: element %lld is %g", what, (long long)nan_at[k], y);
            }
            jag_release(y1), jag_release(y2), jag_release(yr);
        }
        jag_release(values), jag_release(offs), jag_release(nt);
    }
    jag__stream_min_bytes = saved;
}

TEST_MAIN(test_ragged_reduce_by_hand, test_integer_values_and_indices_by_hand, test_nested_mean_matches_components, test_bad_offsets_refused,
          test_varlen_attention_matches_items, test_scatter_add, test_engine_exps, test_engine_log, test_engine_matches_references, test_engine_var_offsets, test_engine_lse_growing_max,
          test_engine_lse_fast_blocks,
          test_ragged_reduce_noncontiguous, test_row_kernels, test_engine_softmax_inf_columns,
          test_engine_softmax_streamed)
