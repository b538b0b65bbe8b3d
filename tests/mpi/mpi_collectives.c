/*
 * mpi_collectives.c — the collectives of jag.h on every rank count it
 * runs with: all_reduce (sum, avg, max, min) and broadcast on dense and
 * nested tensors of each dtype, all_gather of dense and ragged data,
 * reduce_scatter, the errors every rank must see together, and DDP's
 * buckets and gradient averaging. Rank r's data is a formula of r and the
 * element index, so each result is checked against the formula over ranks
 * (torch.distributed's semantics: all_reduce leaves op(x_0, ..., x_{p-1})
 * on every rank, avg is sum / p, broadcast copies src's tensor).
 */
#include "mpi_harness.h"

static const jag_dtype dtypes[] = {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_FLOAT16, JAG_BFLOAT16};

/* Rank r's element i: small integers and quarters, exact in every dtype's
 * sums (integer dtypes see the integral part only: x4 keeps it integral;
 * the sums over 3 ranks need 6 significant bits, bfloat16 has 8). */
static double val(int r, int64_t i, jag_dtype d) {
    double v = (double)((r * 7 + i * 3) % 11) - 4.0 + (r % 2 ? 0.5 : 0.25);
    return jag_dtype_is_floating(d) ? v : 4.0 * v;
}

static jag_tensor *rank_tensor(int r, const int64_t *sizes, int ndim, jag_dtype d) {
    int64_t n = 1;
    for (int k = 0; k < ndim; k++) n *= sizes[k];
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = val(r, i, d);
    jag_tensor *t = t_from(v, sizes, ndim, d);
    free(v);
    return t;
}

/* op over ranks of element i, as torch defines it */
static double reduced(jag_reduce_op op, int64_t i, jag_dtype d, int p) {
    double acc = val(0, i, d);
    for (int r = 1; r < p; r++) {
        double v = val(r, i, d);
        acc = op == JAG_REDUCE_MAX ? fmax(acc, v) : op == JAG_REDUCE_MIN ? fmin(acc, v) : acc + v;
    }
    return op == JAG_REDUCE_AVG ? acc / p : acc;
}

/* the tolerance of avg: one division by p rounded in the dtype (the half
 * types divide in float32, then round: their unit roundoff plus float32's) */
static double tol(jag_reduce_op op, jag_dtype d) {
    if (op != JAG_REDUCE_AVG) return 0.0;
    double u32 = ldexp(1.0, -24);
    return d == JAG_FLOAT32 ? 1e-6 : d == JAG_FLOAT16 ? ldexp(1.0, -11) + u32 : d == JAG_BFLOAT16 ? ldexp(1.0, -8) + u32 : 0.0;
}

static void check_values(const jag_tensor *x, jag_reduce_op op, jag_dtype d, int p) {
    int64_t n = jag_numel(x);
    for (int64_t i = 0; i < n; i++) {
        double got = 0;
        jag_item_at(x, (int64_t[]){i}, &got);
        double want = reduced(op, i, d, p);
        CHECK_MSG(fabs(got - want) <= tol(op, d) * fabs(want), "%s %s element %lld: %g, expected %g",
                  jag_reduce_op_name(op), jag_dtype_name(d), (long long)i, got, want);
    }
}

static void test_group(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    int wp = 0, wr = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    CHECK(jag_dist_is_available() && jag_dist_is_initialized());
    CHECK(p == wp && r == wr);
    CHECK_OK(jag_dist_barrier());
    CHECK_ERR(jag_dist_init(), JAG_ESTATE, "already initialised");
}

static void test_all_reduce_dense(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
        for (int op = 0; op < JAG_REDUCE_OP_COUNT; op++) {
            jag_dtype d = dtypes[k];
            jag_tensor *t = rank_tensor(r, (int64_t[]){13}, 1, d);
            int64_t v0 = jag_version(t);
            if (op == JAG_REDUCE_AVG && !jag_dtype_is_floating(d)) {
                /* every rank refuses: no rank waits for the others */
                CHECK_ERR(jag_dist_all_reduce(t, op), JAG_EDTYPE, "avg needs a floating tensor");
                CHECK(jag_version(t) == v0);
            } else {
                CHECK_OK(jag_dist_all_reduce(t, op));
                check_values(t, op, d, p);
            }
            jag_release(t);
        }
}

/* A strided (transposed) tensor is reduced through a copy and written back. */
static void test_all_reduce_strided(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    jag_tensor *base = rank_tensor(r, (int64_t[]){3, 4}, 2, JAG_FLOAT64), *tr = NULL, *flat = NULL;
    CHECK_OK(jag_transpose(base, 0, 1, &tr));
    CHECK(!jag_is_contiguous(tr));
    CHECK_OK(jag_dist_all_reduce(tr, JAG_REDUCE_SUM));
    /* base (the same storage) now holds the sum in its own order */
    CHECK_OK(jag_flatten(base, &flat));
    check_values(flat, JAG_REDUCE_SUM, JAG_FLOAT64, p);
    jag_release(flat), jag_release(tr), jag_release(base);
}

/* Rank-independent ragged structure: B components of lengths 1 + (i % 3),
 * each row of 2 features; values rank r's formula. */
static jag_tensor *nested_of(int r, int b, int shift, jag_dtype d) {
    jag_tensor *items[8] = {0};
    int64_t at = 0;
    for (int i = 0; i < b; i++) {
        int64_t len = (i + shift) % 3, n = len * 2;
        double v[16];
        for (int64_t e = 0; e < n; e++) v[e] = val(r, at + e, d);
        items[i] = t_from(v, (int64_t[]){len, 2}, 2, d);
        at += n;
    }
    jag_tensor *nt = NULL;
    if (jag_nested_from_list(items, b, JAG_JAGGED, &nt)) fprintf(stderr, "nested_of: %s\n", jag_last_error());
    for (int i = 0; i < b; i++) jag_release(items[i]);
    return nt;
}

static void test_all_reduce_nested(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    for (size_t k = 0; k < 2; k++)
        for (int op = 0; op < JAG_REDUCE_OP_COUNT; op++) {
            jag_tensor *nt = nested_of(r, 4, 1, dtypes[k]), *v = NULL, *flat = NULL;
            CHECK_OK(jag_dist_all_reduce(nt, op));
            CHECK_OK(jag_nested_values(nt, &v));
            CHECK_OK(jag_flatten(v, &flat));
            check_values(flat, op, dtypes[k], p);
            jag_release(flat), jag_release(v), jag_release(nt);
        }
}

static void test_broadcast(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank(), src = p - 1;
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        jag_tensor *t = rank_tensor(r, (int64_t[]){2, 5}, 2, dtypes[k]);
        CHECK_OK(jag_dist_broadcast(t, src));
        for (int64_t i = 0; i < 10; i++) {
            double got = 0;
            jag_item_at(t, (int64_t[]){i / 5, i % 5}, &got);
            CHECK(got == val(src, i, dtypes[k]));
        }
        jag_release(t);
    }
    jag_tensor *nt = nested_of(r, 3, 0, JAG_FLOAT32), *v = NULL, *flat = NULL;
    CHECK_OK(jag_dist_broadcast(nt, 0));
    CHECK_OK(jag_nested_values(nt, &v));
    CHECK_OK(jag_flatten(v, &flat));
    for (int64_t i = 0; i < jag_numel(flat); i++) {
        double got = 0;
        jag_item_at(flat, (int64_t[]){i}, &got);
        CHECK(got == val(0, i, JAG_FLOAT32));
    }
    jag_release(flat), jag_release(v), jag_release(nt);
    jag_tensor *t = rank_tensor(r, (int64_t[]){4}, 1, JAG_FLOAT32);
    int64_t v0 = jag_version(t);
    CHECK_ERR(jag_dist_broadcast(t, p), JAG_ERANGE, "expected a rank in");
    CHECK_ERR(jag_dist_broadcast(t, -1), JAG_ERANGE, "expected a rank in");
    /* ranks naming different sources: every rank refuses */
    if (p > 1) CHECK_ERR(jag_dist_broadcast(t, r % 2), JAG_ERANGE, "disagree on the source rank");
    CHECK(jag_version(t) == v0);
    jag_release(t);
}

/* Disagreements and refusals fail on every rank, before data moves. */
static void test_mismatch(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    jag_tensor *t = rank_tensor(r, (int64_t[]){r == 1 ? 5 : 4}, 1, JAG_FLOAT32);
    double first = 0;
    jag_item_at(t, (int64_t[]){0}, &first);
    int64_t tv = jag_version(t);
    if (p > 1) {
        CHECK_ERR(jag_dist_all_reduce(t, JAG_REDUCE_SUM), JAG_ESHAPE, "disagree on the element count");
        CHECK(strstr(jag_last_error(), "smallest is 4, the largest 5") != NULL);
    }
    jag_tensor *u = rank_tensor(r, (int64_t[]){4}, 1, r == p - 1 ? JAG_FLOAT64 : JAG_FLOAT32);
    int64_t uv = jag_version(u);
    if (p > 1) CHECK_ERR(jag_dist_all_reduce(u, JAG_REDUCE_SUM), JAG_EDTYPE, "disagree on the dtype");
    /* rank 0 passes NULL: it gets its own error, the others "another rank" */
    jag_status st = jag_dist_all_reduce(r == 0 ? NULL : u, JAG_REDUCE_SUM);
    CHECK(st == JAG_EINVAL);
    CHECK(strstr(jag_last_error(), r == 0 ? "is NULL" : "another rank refused") != NULL);
    double after = 0;
    jag_item_at(t, (int64_t[]){0}, &after);
    CHECK(after == first && jag_version(t) == tv && jag_version(u) == uv);
    jag_release(t), jag_release(u);
    /* a dense tensor on one rank, a nested one on another */
    jag_tensor *a = r == 0 ? rank_tensor(r, (int64_t[]){6}, 1, JAG_FLOAT32) : nested_of(r, 2, 2, JAG_FLOAT32);
    jag_tensor *outs[8] = {NULL};
    if (p > 1) CHECK_ERR(jag_dist_all_gather(a, outs, 8), JAG_EINVAL, "disagree on the layout");
    CHECK(outs[0] == NULL);
    CHECK_ERR(jag_dist_all_gather(a, outs, p - 1), JAG_EINVAL, "expected at least the world size");
    jag_release(a);
}

static void test_all_gather_dense(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    jag_tensor *t = rank_tensor(r, (int64_t[]){2, 3}, 2, JAG_FLOAT64), *outs[8] = {NULL};
    CHECK_OK(jag_dist_all_gather(t, outs, 8));
    for (int q = 0; q < p; q++) {
        CHECK(jag_ndim(outs[q]) == 2 && jag_size(outs[q], 0) == 2 && jag_size(outs[q], 1) == 3);
        for (int64_t i = 0; i < 6; i++) {
            double got = 0;
            jag_item_at(outs[q], (int64_t[]){i / 3, i % 3}, &got);
            CHECK(got == val(q, i, JAG_FLOAT64));
        }
        jag_release(outs[q]);
    }
    jag_release(t);
}

/* Rank q holds q + 1 components of lengths (i + q) % 3 (a zero length
 * among them): every rank gets every rank's components and lengths. */
static void test_all_gather_nested(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    jag_tensor *nt = nested_of(r, r + 1, r, JAG_FLOAT32), *outs[8] = {NULL};
    CHECK_OK(jag_dist_all_gather(nt, outs, 8));
    for (int q = 0; q < p; q++) {
        CHECK(jag_is_nested(outs[q]) && jag_nested_batch_size(outs[q]) == q + 1);
        jag_tensor *comps[8] = {NULL};
        int nc = 0;
        CHECK_OK(jag_nested_unbind(outs[q], comps, 8, &nc));
        int64_t at = 0;
        for (int i = 0; i < nc; i++) {
            int64_t len = (i + q) % 3;
            CHECK(jag_size(comps[i], 0) == len && jag_size(comps[i], 1) == 2);
            for (int64_t e = 0; e < len * 2; e++) {
                double got = 0;
                jag_item_at(comps[i], (int64_t[]){e / 2, e % 2}, &got);
                CHECK(got == val(q, at + e, JAG_FLOAT32));
            }
            at += len * 2;
            jag_release(comps[i]);
        }
        jag_release(outs[q]);
    }
    jag_release(nt);
}

static void test_reduce_scatter(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    for (int op = 0; op < JAG_REDUCE_OP_COUNT; op++) {
        jag_tensor *in = rank_tensor(r, (int64_t[]){2 * p, 3}, 2, JAG_FLOAT32), *out = NULL;
        CHECK_OK(jag_dist_reduce_scatter(in, op, &out));
        CHECK(jag_size(out, 0) == 2 && jag_size(out, 1) == 3);
        /* rank r's block: elements [6r, 6r + 6) of the reduced input */
        for (int64_t i = 0; i < 6; i++) {
            double got = 0, want = reduced(op, 6 * r + i, JAG_FLOAT32, p);
            jag_item_at(out, (int64_t[]){i / 3, i % 3}, &got);
            CHECK_MSG(fabs(got - want) <= tol(op, JAG_FLOAT32) * fabs(want), "%s: %g vs %g",
                      jag_reduce_op_name(op), got, want);
        }
        jag_release(out), jag_release(in);
    }
    if (p > 1) {
        jag_tensor *in = rank_tensor(r, (int64_t[]){2 * p + 1}, 1, JAG_FLOAT32), *out = NULL;
        CHECK_ERR(jag_dist_reduce_scatter(in, JAG_REDUCE_SUM, &out), JAG_ESHAPE, "expected a multiple of");
        CHECK(out == NULL);
        jag_release(in);
    }
}

/* DDP: buckets by the documented rule, rank 0's values broadcast, averaged
 * gradients (rank r's gradient is (r + 1) g: the average is g (p + 1) / 2),
 * a gradient missing on rank 0 counting as zeros there. */
static void test_ddp(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    int64_t shapes[4] = {10, 3, 7, 5}; /* float32 x 10, float32 x 3, float64 x 7, float32 x 5 */
    jag_dtype dts[4] = {JAG_FLOAT32, JAG_FLOAT32, JAG_FLOAT64, JAG_FLOAT32};
    jag_tensor *params[4];
    for (int i = 0; i < 4; i++) {
        params[i] = rank_tensor(r + 10 * i, &shapes[i], 1, dts[i]);
        jag_set_requires_grad(params[i], true);
    }
    jag_ddp *ddp = NULL;
    /* 32-byte buckets, reverse order: {3} (20 B; +param 2 is float64), {2},
     * {1} (12 B; + 40 B of param 0 would pass 32), {0} alone (40 B > 32) */
    CHECK_OK(jag_ddp_new(params, 4, 32, &ddp));
    CHECK(jag_ddp_num_buckets(ddp) == 4);
    for (int b = 0; b < 4; b++) {
        const int *idx = NULL;
        int n = 0;
        CHECK_OK(jag_ddp_bucket_params(ddp, b, &idx, &n));
        CHECK(n == 1 && idx[0] == 3 - b);
    }
    for (int i = 0; i < 4; i++)
        for (int64_t e = 0; e < shapes[i]; e++) {
            double got = 0;
            jag_item_at(params[i], (int64_t[]){e}, &got);
            CHECK(got == val(10 * i, e, dts[i]));
        }
    /* gradients: sum of (r + 1) * x * param over a product with fixed x */
    for (int i = 0; i < 4; i++) {
        if (i == 1 && r == 0) continue; /* rank 0 never uses param 1 */
        jag_tensor *w = NULL, *s = NULL;
        jag_full(&shapes[i], 1, (double)(r + 1) * (i + 1), dts[i], &w);
        jag_tensor *prod = NULL;
        jag_mul(params[i], w, &prod);
        jag_sum(prod, NULL, 0, false, &s);
        CHECK_OK(jag_backward(s, NULL, false));
        jag_release(s), jag_release(prod), jag_release(w);
    }
    CHECK_OK(jag_ddp_sync_grads(ddp));
    for (int i = 0; i < 4; i++) {
        jag_tensor *g = NULL;
        CHECK_OK(jag_get_grad(params[i], &g));
        double sum = 0;
        for (int q = 0; q < p; q++) sum += (i == 1 && q == 0) ? 0 : (double)(q + 1) * (i + 1);
        for (int64_t e = 0; g && e < shapes[i]; e++) {
            double got = 0;
            jag_item_at(g, (int64_t[]){e}, &got);
            CHECK_MSG(fabs(got - sum / p) <= 1e-6 * sum, "param %d: %g, expected %g", i, got, sum / p);
        }
        /* a parameter without a gradient on every rank keeps none */
        CHECK(g != NULL || (i == 1 && p == 1));
        jag_release(g);
    }
    CHECK_OK(jag_ddp_free(ddp));
    /* ranks disagreeing on the parameter list: every rank refuses */
    if (p > 1) CHECK_ERR(jag_ddp_new(params, r == 0 ? 3 : 4, 0, &ddp), JAG_ESHAPE, "disagree on the parameter count");
    CHECK_ERR(jag_ddp_new((jag_tensor *[]){params[0], params[0]}, 2, 0, &ddp), JAG_EINVAL, "again");
    for (int i = 0; i < 4; i++) jag_release(params[i]);
}

MPI_TEST_MAIN(test_group, test_all_reduce_dense, test_all_reduce_strided, test_all_reduce_nested, test_broadcast,
              test_mismatch, test_all_gather_dense, test_all_gather_nested, test_reduce_scatter, test_ddp)
