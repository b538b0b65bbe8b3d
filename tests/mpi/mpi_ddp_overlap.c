/*
 * mpi_ddp_overlap.c — jag_ddp averages gradients from hooks during
 * backward (torch DDP's reducer).
 *
 * Four float64 parameters of 3 elements; on rank r the loss is
 * sum_k c(r, k) * sum(p_k) with c(r, k) = r + 1 + k, so the gradient of p_k
 * on rank r is c(r, k) in every element and the average over P ranks is
 * (P + 1) / 2 + k. Buckets of 48 bytes hold two parameters each, in
 * reverse order: {p3, p2}, {p1, p0}.
 */
#include "mpi_harness.h"

enum { NP = 4, NE = 3 };

static double coef(int r, int k) { return r + 1 + k; }
static double avg_coef(int k) { return (jag_dist_world_size() + 1) / 2.0 + k; }

static void make_params(jag_tensor **p) {
    for (int k = 0; k < NP; k++) {
        double v[NE] = {0.1 * k, 0.2, -0.3};
        p[k] = t_from(v, (int64_t[]){NE}, 1, JAG_FLOAT64);
        jag_set_requires_grad(p[k], true);
    }
}

/* backward of sum over the used k of c(rank, k) * sum(p_k) */
static jag_status backward_loss(jag_tensor *const *p, int used) {
    jag_tensor *loss = NULL;
    jag_status st = JAG_OK;
    for (int k = 0; !st && k < used; k++) {
        jag_tensor *scaled = NULL, *s = NULL, *sum = NULL;
        st = jag_mul_scalar(p[k], coef(jag_dist_rank(), k), &scaled);
        if (!st) st = jag_sum(scaled, NULL, 0, false, &s);
        if (!st && loss) st = jag_add(loss, s, 1.0, &sum);
        jag_release(scaled);
        if (!st && sum) jag_release(loss), jag_release(s), loss = sum;
        else if (!st) loss = s;
    }
    if (!st) st = jag_backward(loss, NULL, false);
    jag_release(loss);
    return st;
}

/* every element of p_k's gradient equals want (NAN: no gradient) */
static void check_grad(jag_tensor *p, double want, int line) {
    jag_tensor *g = NULL;
    CHECK_OK(jag_get_grad(p, &g));
    if (isnan(want)) {
        CHECK_MSG(g == NULL, "line %d: a gradient where none was expected", line);
    } else {
        CHECK_MSG(g != NULL, "line %d: no gradient", line);
        for (int e = 0; g && e < NE; e++)
            CHECK_MSG(fabs(t_get(g, e) - want) < 1e-12, "line %d: grad[%d] = %g, expected %g", line, e, t_get(g, e), want);
    }
    jag_release(g);
}

static void test_backward_averages(void) {
    TEST_BEGIN();
    jag_tensor *p[NP];
    make_params(p);
    jag_ddp *ddp = NULL;
    CHECK_OK(jag_ddp_new(p, NP, 48, &ddp));
    CHECK(jag_ddp_num_buckets(ddp) == 2);
    for (int step = 0; step < 2; step++) {
        CHECK_OK(backward_loss(p, NP));
        /* averaged by the hooks: no call after backward */
        for (int k = 0; k < NP; k++) check_grad(p[k], avg_coef(k), __LINE__);
        CHECK_OK(jag_ddp_sync_grads(ddp)); /* nothing left to do */
        for (int k = 0; k < NP; k++) check_grad(p[k], avg_coef(k), __LINE__);
        for (int k = 0; k < NP; k++) jag_zero_grad(p[k]);
    }
    CHECK_OK(jag_ddp_free(ddp));
    for (int k = 0; k < NP; k++) jag_release(p[k]);
}

/* p3 gets no gradient: its bucket {p3, p2} cannot complete, and bucket
 * {p1, p0} waits for it (buckets start in order); sync_grads finishes. */
static void test_unused_parameter(void) {
    TEST_BEGIN();
    jag_tensor *p[NP];
    make_params(p);
    jag_ddp *ddp = NULL;
    CHECK_OK(jag_ddp_new(p, NP, 48, &ddp));
    int r = jag_dist_rank();
    CHECK_OK(backward_loss(p, NP - 1));
    for (int k = 0; k < NP - 1; k++) check_grad(p[k], coef(r, k), __LINE__); /* local still */
    CHECK_OK(jag_ddp_sync_grads(ddp));
    for (int k = 0; k < NP - 1; k++) check_grad(p[k], avg_coef(k), __LINE__);
    check_grad(p[NP - 1], NAN, __LINE__); /* a gradient on no rank: none */
    /* a second backward before such a step is finished is refused (the
     * first parameter it reaches has its gradient added, as torch's) */
    CHECK_OK(backward_loss(p, NP - 1));
    CHECK_ERR(backward_loss(p, NP - 1), JAG_ESTATE, "got a second gradient before this step's gradients were averaged");
    CHECK_OK(jag_ddp_sync_grads(ddp));
    CHECK_OK(jag_ddp_free(ddp));
    for (int k = 0; k < NP; k++) jag_release(p[k]);
}

/* torch's no_sync: two local backward passes accumulate, the third (sync
 * on again) averages the sums of three. */
static void test_no_sync_accumulates(void) {
    TEST_BEGIN();
    jag_tensor *p[NP];
    make_params(p);
    jag_ddp *ddp = NULL;
    CHECK_OK(jag_ddp_new(p, NP, 48, &ddp));
    int r = jag_dist_rank();
    CHECK_OK(jag_ddp_set_require_sync(ddp, false));
    CHECK_OK(backward_loss(p, NP));
    CHECK_OK(backward_loss(p, NP));
    for (int k = 0; k < NP; k++) check_grad(p[k], 2 * coef(r, k), __LINE__);
    CHECK_OK(jag_ddp_set_require_sync(ddp, true));
    CHECK_OK(backward_loss(p, NP));
    for (int k = 0; k < NP; k++) check_grad(p[k], 3 * avg_coef(k), __LINE__);
    /* accumulated without sync, then averaged explicitly */
    for (int k = 0; k < NP; k++) jag_zero_grad(p[k]);
    CHECK_OK(jag_ddp_set_require_sync(ddp, false));
    CHECK_OK(backward_loss(p, NP));
    CHECK_OK(jag_ddp_set_require_sync(ddp, true));
    CHECK_OK(jag_ddp_sync_grads(ddp));
    for (int k = 0; k < NP; k++) check_grad(p[k], avg_coef(k), __LINE__);
    CHECK_ERR(jag_ddp_set_require_sync(NULL, true), JAG_EINVAL, "'ddp' is NULL");
    CHECK_OK(jag_ddp_free(ddp));
    for (int k = 0; k < NP; k++) jag_release(p[k]);
}

MPI_TEST_MAIN(test_backward_averages, test_unused_parameter, test_no_sync_accumulates)
