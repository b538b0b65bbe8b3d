/*
 * mpi_train_equiv.c — data-parallel training gives what one process gives.
 *
 * A global batch of G ragged sequences (lengths 1..4, 4 features per token)
 * and a small model: tanh(linear) per token, the mean over each sequence's
 * tokens (the ragged dim), a linear head, mean squared error against a
 * target per sequence; SGD with momentum. Under mpirun each rank takes a
 * contiguous block of the batch (G = 8: 4 + 4 on 2 ranks, 3 + 3 + 2 on 3),
 * scales its mean loss by (its items / G) * world size so that the average
 * of the ranks' gradients (jag_ddp_sync_grads) is the gradient of the
 * global mean loss, and steps. The ranks start from different parameters:
 * jag_ddp_new broadcasts rank 0's. Rank 0 then trains the same model from
 * the same start on the whole batch in one process; the losses (the sum
 * over ranks of each rank's share) and the parameters after every step
 * must agree within 1e-5 relative: float32 sums of 8 items' gradients
 * taken in another order (per rank, then across ranks) differ by a few
 * units of float32's 6e-8 rounding per step, and 5 steps of SGD carry it.
 */
#include "mpi_harness.h"

enum { G = 8, D = 4, H = 8, STEPS = 5 };
#define TOL 1e-5

static int64_t seq_len(int i) { return 1 + (i * 5) % 4; }
static double feature(int i, int64_t t, int d) { return sin(0.7 * i + 1.3 * (double)t + 0.5 * d); }
static double target(int i) { return 0.8 * sin(1.9 * i); }

/* Items [lo, hi) as a jagged (B, j, D) batch and a (B, 1) target. */
static void make_batch(int lo, int hi, jag_tensor **x, jag_tensor **y) {
    jag_tensor *items[G];
    double tv[G];
    for (int i = lo; i < hi; i++) {
        double v[4 * D];
        for (int64_t t = 0; t < seq_len(i); t++)
            for (int d = 0; d < D; d++) v[t * D + d] = feature(i, t, d);
        items[i - lo] = t_from(v, (int64_t[]){seq_len(i), D}, 2, JAG_FLOAT32);
        tv[i - lo] = target(i);
    }
    if (jag_nested_from_list(items, hi - lo, JAG_JAGGED, x)) fprintf(stderr, "batch: %s\n", jag_last_error());
    *y = t_from(tv, (int64_t[]){hi - lo, 1}, 2, JAG_FLOAT32);
    for (int i = 0; i < hi - lo; i++) jag_release(items[i]);
}

/* W1 (H, D), b1 (H), W2 (1, H), b2 (1) from a formula of `seed`. */
static void init_params(int seed, jag_tensor **p) {
    const int64_t shapes[4][2] = {{H, D}, {H, 1}, {1, H}, {1, 1}};
    const int ndims[4] = {2, 1, 2, 1};
    for (int k = 0; k < 4; k++) {
        double v[H * D];
        int64_t n = shapes[k][0] * shapes[k][1];
        for (int64_t e = 0; e < n; e++) v[e] = 0.4 * sin(1.1 * (double)e + 0.37 * seed + k);
        p[k] = t_from(v, shapes[k], ndims[k], JAG_FLOAT32);
        jag_set_requires_grad(p[k], true);
    }
}

/* mse(model(x), y) * scale, the loss this process backpropagates */
static jag_tensor *loss_of(jag_tensor *const *p, const jag_tensor *x, const jag_tensor *y, double scale) {
    jag_tensor *h = NULL, *a = NULL, *pooled = NULL, *out = NULL, *mse = NULL, *loss = NULL;
    jag_status st = jag_linear(x, p[0], p[1], &h);
    if (!st) st = jag_tanh(h, &a);
    if (!st) st = jag_mean(a, (int[]){1}, 1, false, &pooled);
    if (!st) st = jag_linear(pooled, p[2], p[3], &out);
    if (!st) st = jag_mse_loss(out, y, &mse);
    if (!st) st = jag_mul_scalar(mse, scale, &loss);
    if (st) fprintf(stderr, "loss_of: %s\n", jag_last_error());
    jag_release(h), jag_release(a), jag_release(pooled), jag_release(out), jag_release(mse);
    return loss;
}

/* STEPS steps of SGD on items [lo, hi); ddp: average gradients over ranks.
 * losses[s]: the global mean loss at step s (before the update). */
static void train(jag_tensor **p, int lo, int hi, bool ddp_on, double *losses) {
    jag_tensor *x = NULL, *y = NULL;
    make_batch(lo, hi, &x, &y);
    int world = ddp_on ? jag_dist_world_size() : 1;
    double share = (double)(hi - lo) / G;
    jag_optimizer *opt = NULL;
    CHECK_OK(jag_optim_sgd_new(p, 4, 0.2, 0.9, 0.0, 0.0, false, &opt));
    jag_ddp *ddp = NULL;
    if (ddp_on) CHECK_OK(jag_ddp_new(p, 4, 64, &ddp)); /* small buckets: several in flight */
    for (int s = 0; s < STEPS; s++) {
        CHECK_OK(jag_optim_zero_grad(opt));
        jag_tensor *loss = loss_of(p, x, y, share * world);
        CHECK_OK(jag_backward(loss, NULL, false));
        double mine = 0;
        jag_item(loss, &mine);
        mine /= world; /* this rank's share of the global mean loss */
        if (ddp_on) {
            CHECK_OK(jag_ddp_sync_grads(ddp));
            jag_tensor *l = t_from(&mine, NULL, 0, JAG_FLOAT64);
            CHECK_OK(jag_dist_all_reduce(l, JAG_REDUCE_SUM));
            jag_item(l, &mine);
            jag_release(l);
        }
        losses[s] = mine;
        CHECK_OK(jag_optim_step(opt));
        jag_release(loss);
    }
    jag_ddp_free(ddp);
    jag_optim_free(opt);
    jag_release(x), jag_release(y);
}

static void test_ddp_matches_one_process(void) {
    TEST_BEGIN();
    int p = jag_dist_world_size(), r = jag_dist_rank();
    int lo = r * (G / p) + (r < G % p ? r : G % p), hi = lo + G / p + (r < G % p);
    jag_tensor *dp[4], *ref[4];
    init_params(3 + r, dp); /* replicas differ until jag_ddp_new */
    double dl[STEPS], rl[STEPS];
    train(dp, lo, hi, true, dl);
    if (r == 0) {
        init_params(3, ref);
        train(ref, 0, G, false, rl);
        for (int s = 0; s < STEPS; s++)
            CHECK_MSG(fabs(dl[s] - rl[s]) <= TOL * fabs(rl[s]), "step %d: loss %.9g (ranks) vs %.9g (one process)", s,
                      dl[s], rl[s]);
        CHECK(rl[STEPS - 1] < rl[0]); /* it trains */
    }
    /* every rank's parameters, against rank 0's one-process run */
    for (int k = 0; k < 4; k++) {
        int64_t n = jag_numel(dp[k]);
        jag_tensor *want = NULL;
        if (r == 0) CHECK_OK(jag_contiguous(ref[k], &want));
        else jag_empty(jag_sizes(dp[k]), jag_ndim(dp[k]), JAG_FLOAT32, &want);
        jag_set_grad_enabled(false);
        CHECK_OK(jag_dist_broadcast(want, 0));
        jag_set_grad_enabled(true);
        const float *a = jag_data(dp[k]), *b = jag_data(want);
        for (int64_t e = 0; e < n; e++)
            CHECK_MSG(fabs(a[e] - b[e]) <= TOL * (fabs(b[e]) + 1e-2), "rank %d param %d[%lld]: %.9g vs %.9g", r, k,
                      (long long)e, a[e], b[e]);
        jag_release(want);
    }
    if (r == 0)
        for (int k = 0; k < 4; k++) jag_release(ref[k]);
    for (int k = 0; k < 4; k++) jag_release(dp[k]);
}

MPI_TEST_MAIN(test_ddp_matches_one_process)
