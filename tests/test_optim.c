/*
 * test_optim.c — the optimizers (jag.h, "Optimizers"): several steps of
 * SGD, Adam and AdamW against their update rules written out per element in
 * double here (torch.optim's formulas), the fused kernels against their
 * naive references on odd sizes, state access for checkpoints, checkpoint
 * files (a run resumed from one is bit for bit a run that never stopped;
 * refused loads change nothing), refusals
 * that change nothing, version counters, and clip_grad_norm against the
 * norm computed here.
 */
#include "test.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <unistd.h>

/* src/cpu/optim.c's kernels (internal; the test links the static library). */
#include "../src/cpu/optim.h"

#define N 11     /* elements of the test parameter */
#define STEPS 6

/* The gradient at step s (0-based): large at first, then small, so that
 * amsgrad's max differs from exp_avg_sq. */
static double grad_at(int s, int i) { return (s == 0 ? 3.0 : 0.25) * sin(1.3 * i + 0.7 * s + 0.1) + 0.01 * i; }

/* Give p the gradient grad_at(s, .) through backward of sum(p * c). */
static void set_grad(jag_tensor *p, int s) {
    double c[N];
    for (int i = 0; i < N; i++) c[i] = grad_at(s, i);
    int64_t n = N;
    jag_tensor *ct = t_from(c, &n, 1, jag_tensor_dtype(p)), *pc = NULL, *loss = NULL;
    jag_zero_grad(p);
    CHECK_OK(jag_mul(p, ct, &pc));
    CHECK_OK(jag_sum(pc, NULL, 0, false, &loss));
    CHECK_OK(jag_backward(loss, NULL, false));
    jag_release(loss), jag_release(pc), jag_release(ct);
}

static double p0_at(int i) { return 0.5 - 0.09 * i; }

static jag_tensor *make_param(jag_dtype dt) {
    double v[N];
    for (int i = 0; i < N; i++) v[i] = p0_at(i);
    int64_t n = N;
    jag_tensor *p = t_from(v, &n, 1, dt);
    CHECK_OK(jag_set_requires_grad(p, true));
    return p;
}

/* ---- SGD against torch.optim.SGD's rule ----------------------------------- */

static void sgd_case(jag_dtype dt, double lr, double mom, double damp, double wd, bool nest) {
    jag_tensor *p = make_param(dt);
    jag_optimizer *opt = NULL;
    CHECK_OK(jag_optim_sgd_new(&p, 1, lr, mom, damp, wd, nest, &opt));
    double rp[N], buf[N];
    for (int i = 0; i < N; i++) rp[i] = p0_at(i);
    for (int s = 0; s < STEPS; s++) {
        set_grad(p, s);
        int64_t v0 = jag_version(p);
        CHECK_OK(jag_optim_step(opt));
        CHECK(jag_version(p) == v0 + 1);
        /* torch.optim.SGD: d = g + wd p; buf = d (first) or mom buf + (1 - damp) d;
         * d = nesterov ? d + mom buf : buf; p -= lr d */
        for (int i = 0; i < N; i++) {
            double d = grad_at(s, i) + wd * rp[i];
            if (mom != 0) {
                buf[i] = s == 0 ? d : mom * buf[i] + (1 - damp) * d;
                d = nest ? d + mom * buf[i] : buf[i];
            }
            rp[i] -= lr * d;
        }
    }
    double tol = dt == JAG_FLOAT64 ? 1e-13 : 2e-6;
    for (int i = 0; i < N; i++) CHECK_CLOSE(t_get(p, i), rp[i], tol);
    jag_tensor *b = NULL;
    if (mom != 0) {
        CHECK_OK(jag_optim_state(opt, 0, "momentum_buffer", &b));
        CHECK(b != NULL);
        for (int i = 0; b && i < N; i++) CHECK_CLOSE(t_get(b, i), buf[i], tol);
        jag_release(b);
    }
    int64_t steps = -1;
    CHECK_OK(jag_optim_step_count(opt, 0, &steps));
    CHECK(steps == STEPS);
    CHECK_OK(jag_optim_free(opt));
    jag_release(p);
}

static void test_sgd_rules(void) {
    TEST_BEGIN();
    for (int d = 0; d < 2; d++) {
        jag_dtype dt = d ? JAG_FLOAT32 : JAG_FLOAT64;
        sgd_case(dt, 0.1, 0, 0, 0, false);      /* plain */
        sgd_case(dt, 0.1, 0, 0, 0.05, false);   /* weight decay */
        sgd_case(dt, 0.1, 0.9, 0, 0, false);    /* momentum */
        sgd_case(dt, 0.1, 0.9, 0.3, 0, false);  /* dampening (not at the first step) */
        sgd_case(dt, 0.1, 0.9, 0, 0, true);     /* nesterov */
        sgd_case(dt, 0.05, 0.8, 0, 0.1, true);  /* nesterov + weight decay */
        sgd_case(dt, 0.05, 0.5, 0.5, 0.2, false);
    }
}

/* ---- Adam / AdamW against torch.optim.Adam / AdamW's rule ---------------- */

static void adam_case(jag_dtype dt, bool adamw, double lr, double b1, double b2, double eps, double wd, bool ams) {
    jag_tensor *p = make_param(dt);
    jag_optimizer *opt = NULL;
    if (adamw) CHECK_OK(jag_optim_adamw_new(&p, 1, lr, b1, b2, eps, wd, ams, &opt));
    else CHECK_OK(jag_optim_adam_new(&p, 1, lr, b1, b2, eps, wd, ams, &opt));
    double rp[N], m[N] = {0}, v[N] = {0}, vmax[N] = {0};
    for (int i = 0; i < N; i++) rp[i] = p0_at(i);
    for (int s = 0; s < STEPS; s++) {
        set_grad(p, s);
        int64_t v0 = jag_version(p);
        CHECK_OK(jag_optim_step(opt));
        CHECK(jag_version(p) == v0 + 1);
        int t = s + 1;
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        for (int i = 0; i < N; i++) {
            double g = grad_at(s, i);
            if (adamw) rp[i] *= 1 - lr * wd; /* decoupled */
            else g += wd * rp[i];             /* L2 on the gradient */
            m[i] = b1 * m[i] + (1 - b1) * g;
            v[i] = b2 * v[i] + (1 - b2) * g * g;
            vmax[i] = fmax(vmax[i], v[i]);
            double vv = ams ? vmax[i] : v[i];
            /* torch: eps is added after dividing sqrt(v) by sqrt(bc2) */
            rp[i] -= lr / bc1 * m[i] / (sqrt(vv) / sqrt(bc2) + eps);
        }
    }
    double tol = dt == JAG_FLOAT64 ? 1e-12 : 3e-6;
    for (int i = 0; i < N; i++) CHECK_CLOSE(t_get(p, i), rp[i], tol);
    jag_tensor *st = NULL;
    CHECK_OK(jag_optim_state(opt, 0, "exp_avg", &st));
    for (int i = 0; st && i < N; i++) CHECK_CLOSE(t_get(st, i), m[i], tol);
    jag_release(st), st = NULL;
    CHECK_OK(jag_optim_state(opt, 0, "exp_avg_sq", &st));
    for (int i = 0; st && i < N; i++) CHECK_CLOSE(t_get(st, i), v[i], tol * (1 + fabs(v[i])));
    jag_release(st), st = NULL;
    if (ams) {
        CHECK_OK(jag_optim_state(opt, 0, "max_exp_avg_sq", &st));
        for (int i = 0; st && i < N; i++) CHECK_CLOSE(t_get(st, i), vmax[i], tol * (1 + fabs(vmax[i])));
        jag_release(st), st = NULL;
    } else {
        CHECK_ERR(jag_optim_state(opt, 0, "max_exp_avg_sq", &st), JAG_EINVAL, "amsgrad");
        CHECK(st == NULL);
    }
    CHECK_OK(jag_optim_free(opt));
    jag_release(p);
}

static void test_adam_rules(void) {
    TEST_BEGIN();
    for (int d = 0; d < 2; d++) {
        jag_dtype dt = d ? JAG_FLOAT32 : JAG_FLOAT64;
        for (int w = 0; w < 2; w++)
            for (int a = 0; a < 2; a++) {
                adam_case(dt, w, 0.05, 0.9, 0.999, 1e-8, 0, a);
                adam_case(dt, w, 0.05, 0.9, 0.99, 1e-3, 0.1, a); /* a large eps shows where it goes */
                adam_case(dt, w, 0.02, 0.3, 0.5, 1e-6, 0.3, a);  /* beta1 < 0.5: torch's other lerp form */
            }
    }
}

/* amsgrad and the decay kinds change the result: the cases above could fail. */
static void test_options_matter(void) {
    TEST_BEGIN();
    double out[4];
    for (int k = 0; k < 4; k++) {
        jag_tensor *p = make_param(JAG_FLOAT64);
        jag_optimizer *opt = NULL;
        if (k < 2) CHECK_OK(jag_optim_adam_new(&p, 1, 0.05, 0.9, 0.99, 1e-8, 0.1, k == 1, &opt));
        else CHECK_OK(jag_optim_adamw_new(&p, 1, 0.05, 0.9, 0.99, 1e-8, 0.1, k == 3, &opt));
        for (int s = 0; s < STEPS; s++) { set_grad(p, s); CHECK_OK(jag_optim_step(opt)); }
        out[k] = t_get(p, 3);
        jag_optim_free(opt);
        jag_release(p);
    }
    CHECK(fabs(out[0] - out[1]) > 1e-6); /* amsgrad */
    CHECK(fabs(out[0] - out[2]) > 1e-6); /* Adam's L2 vs AdamW's decoupled decay */
    CHECK(fabs(out[2] - out[3]) > 1e-6);
}

/* ---- kernels against their naive references --------------------------------- */

static void fill(double *x, int64_t n, double a, double b, int seed) {
    for (int64_t i = 0; i < n; i++) x[i] = a + b * sin(0.37 * (double)i * (seed + 1) + seed);
}

static void test_kernels_vs_reference(void) {
    TEST_BEGIN();
    const int64_t sizes[] = {1, 7, 33, 1001, 40000 + 13}; /* the last above the parallel grain */
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        int64_t n = sizes[si];
        double *base = malloc(sizeof(double) * (size_t)n * 5);
        fill(base, n, 0.2, 1.0, 1);
        fill(base + n, n, 0.0, 0.5, 2);
        fill(base + 2 * n, n, 0.0, 0.1, 3);
        fill(base + 3 * n, n, 0.02, 0.01, 4); /* v >= 0 */
        fill(base + 4 * n, n, 0.03, 0.02, 5); /* vmax >= 0 */
        for (int d = 0; d < 2; d++) {
            jag_dtype dt = d ? JAG_FLOAT32 : JAG_FLOAT64;
            size_t es = d ? 4 : 8;
            char *a = malloc(es * (size_t)n * 5), *b = malloc(es * (size_t)n * 5);
            for (int64_t i = 0; i < 5 * n; i++) {
                if (d) ((float *)a)[i] = (float)base[i];
                else ((double *)a)[i] = base[i];
            }
#define PTR(x, k) ((x) + (size_t)(k) * (size_t)n * es)
            jag__sgd_hyper sh[] = {{0.1, 0, 0, 0, false}, {0.1, 0.9, 0.1, 0.01, false}, {0.1, 0.9, 0, 0.01, true}};
            for (size_t c = 0; c < 3; c++)
                for (int first = 0; first < 2; first++) {
                    memcpy(b, a, es * (size_t)n * 5);
                    char *a2 = malloc(es * (size_t)n * 5);
                    memcpy(a2, a, es * (size_t)n * 5);
                    jag__optim_sgd(dt, PTR(a2, 0), PTR(a2, 1), sh[c].momentum ? PTR(a2, 2) : NULL, n, &sh[c], first);
                    jag__optim_sgd_ref(dt, PTR(b, 0), PTR(b, 1), sh[c].momentum ? PTR(b, 2) : NULL, n, &sh[c], first);
                    CHECK_MSG(memcmp(a2, b, es * (size_t)n * 5) == 0, "sgd case %zu first %d n %lld dtype %d", c, first,
                              (long long)n, d);
                    free(a2);
                }
            jag__adam_hyper ah[] = {{1e-3, 0.9, 0.999, 1e-8, 0, false, false},
                               {1e-2, 0.9, 0.99, 1e-6, 0.1, true, false},
                               {1e-2, 0.4, 0.9, 1e-6, 0.1, true, true},
                               {1e-2, 0.9, 0.999, 1e-8, 0.01, false, true}};
            for (size_t c = 0; c < 4; c++) {
                char *a2 = malloc(es * (size_t)n * 5);
                memcpy(a2, a, es * (size_t)n * 5);
                memcpy(b, a, es * (size_t)n * 5);
                for (int64_t step = 1; step <= 3; step++) {
                    jag__optim_adam(dt, PTR(a2, 0), PTR(a2, 1), PTR(a2, 2), PTR(a2, 3),
                                    ah[c].amsgrad ? PTR(a2, 4) : NULL, n, &ah[c], step);
                    jag__optim_adam_ref(dt, PTR(b, 0), PTR(b, 1), PTR(b, 2), PTR(b, 3), ah[c].amsgrad ? PTR(b, 4) : NULL,
                                        n, &ah[c], step);
                }
                CHECK_MSG(memcmp(a2, b, es * (size_t)n * 5) == 0, "adam case %zu n %lld dtype %d", c, (long long)n, d);
                free(a2);
            }
            const double ps[] = {2.0, 1.0, 3.0, INFINITY};
            for (size_t k = 0; k < 4; k++) {
                double x = jag__optim_norm_acc(dt, PTR(a, 1), n, ps[k]);
                double r = jag__optim_norm_acc_ref(dt, PTR(a, 1), n, ps[k]);
                CHECK_CLOSE(x, r, 1e-12 * fabs(r) + 1e-300);
                /* the same bits whatever the thread count */
                int nt = omp_get_max_threads();
                omp_set_num_threads(nt > 1 ? 1 : 3);
                double y = jag__optim_norm_acc(dt, PTR(a, 1), n, ps[k]);
                omp_set_num_threads(nt);
                CHECK_MSG(x == y, "norm_acc p %g n %lld: %.17g with %d threads, %.17g with another count", ps[k],
                          (long long)n, x, nt, y);
            }
#undef PTR
            free(a), free(b);
        }
        free(base);
    }
}

/* ---- the functional updates, state access, refusals ------------------------------ */

static void test_functional_updates(void) {
    TEST_BEGIN();
    /* two params, one without a gradient (skipped); momentum buffers made */
    jag_tensor *p[2] = {make_param(JAG_FLOAT32), make_param(JAG_FLOAT32)};
    set_grad(p[0], 0);
    jag_tensor *g0 = NULL;
    CHECK_OK(jag_get_grad(p[0], &g0));
    jag_tensor *grads[2] = {g0, NULL}, *bufs[2] = {NULL, NULL};
    int64_t v1 = jag_version(p[1]);
    CHECK_OK(jag_optim_sgd_update(p, grads, bufs, 2, 0.1, 0.9, 0, 0, false));
    CHECK(bufs[0] != NULL && bufs[1] == NULL);
    CHECK(jag_version(p[1]) == v1);
    for (int i = 0; i < N; i++) {
        CHECK_CLOSE(t_get(p[0], i), p0_at(i) - 0.1 * grad_at(0, i), 1e-6);
        CHECK_CLOSE(t_get(p[1], i), (float)p0_at(i), 0); /* skipped: untouched */
        if (bufs[0]) CHECK_CLOSE(t_get(bufs[0], i), grad_at(0, i), 1e-6);
    }
    /* Adam through the functional form equals the object's first step */
    jag_tensor *m = NULL, *v = NULL;
    CHECK_OK(jag_zeros_like(p[0], &m));
    CHECK_OK(jag_zeros_like(p[0], &v));
    jag_tensor *ms[2] = {m, NULL}, *vs[2] = {v, NULL};
    int64_t steps[2] = {1, 0};
    double before = t_get(p[0], 2);
    CHECK_OK(jag_optim_adam_update(p, grads, ms, vs, NULL, steps, 2, 0.01, 0.9, 0.999, 1e-8, 0, false, false));
    /* the first Adam step moves by lr * sign(g) (m / sqrt(v) = g / |g|) */
    CHECK_CLOSE(t_get(p[0], 2), before - 0.01 * (grad_at(0, 2) > 0 ? 1 : -1), 1e-6);
    jag_release(m), jag_release(v), jag_release(bufs[0]), jag_release(g0);
    jag_release(p[0]), jag_release(p[1]);
}

/* Snapshot of a tensor's values and version, to check that a refused call
 * changed nothing. */
static bool unchanged(const jag_tensor *t, const double *vals, int64_t ver) {
    if (jag_version(t) != ver) return false;
    for (int64_t i = 0; i < jag_numel(t); i++)
        if (t_get(t, i) != vals[i]) return false;
    return true;
}

static void test_refusals_change_nothing(void) {
    TEST_BEGIN();
    jag_tensor *a = make_param(JAG_FLOAT32), *b = make_param(JAG_FLOAT32);
    set_grad(a, 0);
    double va[N];
    for (int i = 0; i < N; i++) va[i] = t_get(a, i);
    jag_optimizer *opt = NULL;
    /* bad hyperparameters */
    jag_tensor *ps[2] = {a, b};
    CHECK_ERR(jag_optim_sgd_new(ps, 2, -0.1, 0, 0, 0, false, &opt), JAG_EINVAL, "'lr'");
    CHECK_ERR(jag_optim_sgd_new(ps, 2, 0.1, 0, 0, 0, true, &opt), JAG_EINVAL, "nesterov");
    CHECK_ERR(jag_optim_sgd_new(ps, 2, 0.1, 0.9, 0.1, 0, true, &opt), JAG_EINVAL, "dampening");
    CHECK_ERR(jag_optim_adam_new(ps, 2, 0.1, 1.0, 0.999, 1e-8, 0, false, &opt), JAG_EINVAL, "'beta1'");
    CHECK_ERR(jag_optim_adamw_new(ps, 2, 0.1, 0.9, -0.5, 1e-8, 0, false, &opt), JAG_EINVAL, "'beta2'");
    CHECK_ERR(jag_optim_adam_new(ps, 2, 0.1, 0.9, 0.999, -1, 0, false, &opt), JAG_EINVAL, "'eps'");
    CHECK_ERR(jag_optim_adam_new(ps, 2, 0.1, 0.9, 0.999, 1e-8, NAN, false, &opt), JAG_EINVAL, "'weight_decay'");
    jag_tensor *twice[2] = {a, a};
    CHECK_ERR(jag_optim_adam_new(twice, 2, 0.1, 0.9, 0.999, 1e-8, 0, false, &opt), JAG_EINVAL, "same tensor");
    /* a non-leaf and an integer tensor */
    jag_tensor *nl = NULL, *it = NULL;
    CHECK_OK(jag_mul_scalar(a, 2.0, &nl));
    jag_tensor *bad[2] = {b, nl};
    CHECK_ERR(jag_optim_sgd_new(bad, 2, 0.1, 0, 0, 0, false, &opt), JAG_EINVAL, "leaf");
    int64_t n = N;
    CHECK_OK(jag_zeros(&n, 1, JAG_INT64, &it));
    bad[1] = it;
    CHECK_ERR(jag_optim_sgd_new(bad, 2, 0.1, 0, 0, 0, false, &opt), JAG_EDTYPE, "float32 or float64");
    CHECK(opt == NULL);

    /* a step where the second param is bad writes nothing into the first */
    CHECK_OK(jag_optim_adam_new(ps, 2, 0.1, 0.9, 0.999, 1e-8, 0, false, &opt));
    jag_tensor *g_wrong = NULL;
    int64_t n2 = N + 1;
    CHECK_OK(jag_zeros(&n2, 1, JAG_FLOAT32, &g_wrong));
    jag_tensor *grads[2] = {NULL, g_wrong};
    jag_tensor *g0 = NULL;
    CHECK_OK(jag_get_grad(a, &g0));
    grads[0] = g0;
    jag_tensor *m[2] = {NULL, NULL}, *v[2] = {NULL, NULL};
    CHECK_OK(jag_zeros_like(a, &m[0]));
    CHECK_OK(jag_zeros_like(a, &v[0]));
    CHECK_OK(jag_zeros_like(b, &m[1]));
    CHECK_OK(jag_zeros_like(b, &v[1]));
    int64_t steps[2] = {1, 1}, va_ver = jag_version(a), vm_ver = jag_version(m[0]);
    CHECK_ERR(jag_optim_adam_update(ps, grads, m, v, NULL, steps, 2, 0.1, 0.9, 0.999, 1e-8, 0, false, false),
              JAG_ESHAPE, "grads[1]");
    CHECK(unchanged(a, va, va_ver));
    CHECK(jag_version(m[0]) == vm_ver && t_get(m[0], 0) == 0);
    /* a wrong dtype of gradient, a wrong step */
    jag_tensor *g64 = NULL;
    CHECK_OK(jag_zeros(&n, 1, JAG_FLOAT64, &g64));
    grads[1] = g64;
    CHECK_ERR(jag_optim_adam_update(ps, grads, m, v, NULL, steps, 2, 0.1, 0.9, 0.999, 1e-8, 0, false, false),
              JAG_EDTYPE, "grads[1]");
    grads[1] = NULL;
    steps[0] = 0;
    CHECK_ERR(jag_optim_adam_update(ps, grads, m, v, NULL, steps, 2, 0.1, 0.9, 0.999, 1e-8, 0, false, false),
              JAG_EINVAL, "steps[0]");
    CHECK(unchanged(a, va, va_ver));

    /* step count and state stay after a refused step of the object */
    int64_t sc = -1;
    CHECK_OK(jag_optim_step(opt)); /* a has a grad, b has none: fine */
    CHECK_OK(jag_optim_step_count(opt, 0, &sc));
    CHECK(sc == 1);
    CHECK_OK(jag_optim_step_count(opt, 1, &sc));
    CHECK(sc == 0);
    jag_tensor *st = NULL;
    CHECK_OK(jag_optim_state(opt, 1, "exp_avg", &st));
    CHECK(st == NULL);
    CHECK_ERR(jag_optim_state(opt, 2, "exp_avg", &st), JAG_ERANGE, "param_index");
    CHECK_ERR(jag_optim_state(opt, 0, "momentum_buffer", &st), JAG_EINVAL, "'name'");
    CHECK_ERR(jag_optim_set_lr(opt, -1), JAG_EINVAL, "'lr'");
    CHECK(jag_optim_get_lr(opt) == 0.1);
    CHECK_OK(jag_optim_set_lr(opt, 0.2));
    CHECK(jag_optim_get_lr(opt) == 0.2);
    CHECK_ERR(jag_optim_set_state(opt, 0, "exp_avg", g_wrong), JAG_ESHAPE, "value");
    CHECK_ERR(jag_optim_set_step_count(opt, 0, -3), JAG_EINVAL, "'step'");
    CHECK_OK(jag_optim_free(opt));
    CHECK_ERR(jag_optim_free(opt), JAG_EINVAL, "freed");
    CHECK(isnan(jag_optim_get_lr(opt)));

    for (int k = 0; k < 2; k++) jag_release(m[k]), jag_release(v[k]);
    jag_release(g_wrong), jag_release(g64), jag_release(g0), jag_release(nl), jag_release(it);
    jag_release(a), jag_release(b);
}

/* A loaded (read-only) tensor as a param: the step refuses it and writes no
 * other param. */
static void test_read_only_param(void) {
    TEST_BEGIN();
    jag_tensor *a = make_param(JAG_FLOAT32);
    set_grad(a, 0);
    /* a read-only float leaf: a view of frozen storage is not reachable
     * from the public API except through a loaded file */
    const char *path = "test_optim_ro.safetensors";
    jag_tensor *w = make_param(JAG_FLOAT32);
    const char *names[1] = {"w"};
    jag_tensor *ts[1] = {w};
    CHECK_OK(jag_save(path, names, ts, 1, NULL, 0));
    jag_tensor_set *set = NULL;
    CHECK_OK(jag_load(path, JAG_LOAD_MMAP, &set));
    jag_tensor *ro = jag_retain(jag_tensor_set_find(set, "w"));
    CHECK(jag_is_read_only(ro));
    CHECK_OK(jag_set_requires_grad(ro, true));
    set_grad(ro, 1);
    double va[N];
    for (int i = 0; i < N; i++) va[i] = t_get(a, i);
    int64_t ver = jag_version(a);
    jag_tensor *ps[2] = {a, ro};
    jag_optimizer *opt = NULL;
    CHECK_OK(jag_optim_sgd_new(ps, 2, 0.1, 0.9, 0, 0, false, &opt));
    CHECK_ERR(jag_optim_step(opt), JAG_EINVAL, "read-only");
    CHECK(unchanged(a, va, ver));
    jag_tensor *b = NULL;
    CHECK_OK(jag_optim_state(opt, 0, "momentum_buffer", &b));
    CHECK(b == NULL); /* no buffer was kept */
    int64_t sc = -1;
    CHECK_OK(jag_optim_step_count(opt, 0, &sc));
    CHECK(sc == 0);
    jag_optim_free(opt);
    jag_release(ro), jag_tensor_set_free(set), jag_release(w), jag_release(a);
    remove(path);
}

/* A graph that saved the param before the step refuses its backward after
 * it (the version counter), as after an in-place op. */
static void test_version_counter_seen_by_autograd(void) {
    TEST_BEGIN();
    jag_tensor *p = make_param(JAG_FLOAT64);
    jag_tensor *sq = NULL, *loss = NULL;
    CHECK_OK(jag_mul(p, p, &sq)); /* saves p */
    CHECK_OK(jag_sum(sq, NULL, 0, false, &loss));
    set_grad(p, 0);
    jag_optimizer *opt = NULL;
    CHECK_OK(jag_optim_sgd_new(&p, 1, 0.1, 0, 0, 0, false, &opt));
    int64_t v0 = jag_version(p);
    CHECK(jag_set_grad_enabled(true) == true); /* steps under grad mode on too */
    CHECK_OK(jag_optim_step(opt));
    CHECK(jag_is_grad_enabled());
    CHECK(jag_version(p) == v0 + 1);
    CHECK(jag_is_leaf(p) && jag_requires_grad(p));
    CHECK_ERR(jag_backward(loss, NULL, false), JAG_ESTATE, "");
    jag_optim_free(opt);
    jag_release(loss), jag_release(sq), jag_release(p);
}

/* Checkpoint round trip: a second optimizer given the first's state and step
 * counts continues exactly as the first. */
static void test_state_round_trip(void) {
    TEST_BEGIN();
    jag_tensor *p1 = make_param(JAG_FLOAT64), *p2 = make_param(JAG_FLOAT64);
    jag_optimizer *o1 = NULL, *o2 = NULL;
    CHECK_OK(jag_optim_adamw_new(&p1, 1, 0.05, 0.9, 0.99, 1e-8, 0.1, true, &o1));
    CHECK_OK(jag_optim_adamw_new(&p2, 1, 0.05, 0.9, 0.99, 1e-8, 0.1, true, &o2));
    for (int s = 0; s < 3; s++) { set_grad(p1, s); CHECK_OK(jag_optim_step(o1)); }
    /* p2 takes p1's values and o2 takes o1's state */
    bool prev = jag_set_grad_enabled(false);
    CHECK_OK(jag_copy_(p2, p1));
    jag_set_grad_enabled(prev);
    const char *names[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int k = 0; k < 3; k++) {
        jag_tensor *st = NULL;
        CHECK_OK(jag_optim_state(o1, 0, names[k], &st));
        CHECK_OK(jag_optim_set_state(o2, 0, names[k], st));
        jag_release(st);
    }
    int64_t sc = 0;
    CHECK_OK(jag_optim_step_count(o1, 0, &sc));
    CHECK_OK(jag_optim_set_step_count(o2, 0, sc));
    for (int s = 3; s < STEPS; s++) {
        { set_grad(p1, s); CHECK_OK(jag_optim_step(o1)); }
        { set_grad(p2, s); CHECK_OK(jag_optim_step(o2)); }
    }
    for (int i = 0; i < N; i++) CHECK(t_get(p1, i) == t_get(p2, i));
    jag_optim_free(o1), jag_optim_free(o2);
    jag_release(p1), jag_release(p2);
}

/* ---- checkpoint files (jag_optim_save / jag_optim_load) ------------------ */

static const char *ckpt_path(const char *name) {
    static char buf[2][512];
    static int k;
    char *b = buf[k++ % 2];
    const char *base = getenv("TMPDIR");
    snprintf(b, 512, "%s/jag_test_optim_%d_%s", base && *base ? base : "/tmp", (int)getpid(), name);
    return b;
}

/* A second parameter, shaped (1, N) with other values: several parameters,
 * shapes and step counts go through the file. */
static jag_tensor *make_param_2d(jag_dtype dt, double scale) {
    double v[N];
    for (int i = 0; i < N; i++) v[i] = scale * cos(0.4 * i + 0.2);
    int64_t sizes[2] = {1, N};
    jag_tensor *p = t_from(v, sizes, 2, dt);
    CHECK_OK(jag_set_requires_grad(p, true));
    return p;
}

enum { CK_SGD, CK_ADAM_AMSGRAD, CK_ADAMW };

static jag_optimizer *ckpt_optimizer(int which, jag_tensor **params, double lr) {
    jag_optimizer *o = NULL;
    if (which == CK_SGD) CHECK_OK(jag_optim_sgd_new(params, 2, lr, 0.9, 0.0, 0.01, true, &o));
    else if (which == CK_ADAM_AMSGRAD) CHECK_OK(jag_optim_adam_new(params, 2, lr, 0.8, 0.95, 1e-6, 0.02, true, &o));
    else CHECK_OK(jag_optim_adamw_new(params, 2, lr, 0.9, 0.99, 1e-8, 0.1, false, &o));
    return o;
}

/* Steps [from, to): the second parameter has no gradient at step 2 (it is
 * skipped, so the two step counts differ); the learning rate drops after
 * step 1 (a schedule: the file must keep it). */
static void ckpt_train(jag_optimizer *o, jag_tensor **params, int from, int to, double lr) {
    for (int s = from; s < to; s++) {
        set_grad(params[0], s);
        if (s == 2) jag_zero_grad(params[1]);
        else set_grad(params[1], s + 1);
        CHECK_OK(jag_optim_step(o));
        if (s == 1) CHECK_OK(jag_optim_set_lr(o, lr * 0.5));
    }
}

static bool same_bits(const jag_tensor *a, const jag_tensor *b) {
    return jag_tensor_dtype(a) == jag_tensor_dtype(b) && t_same_shape(a, b) &&
           memcmp(jag_data(a), jag_data(b), (size_t)jag_numel(a) * jag_dtype_size(jag_tensor_dtype(a))) == 0;
}

/* A new leaf with its own copy of a tensor of the set. */
static jag_tensor *param_from_set(const jag_tensor_set *set, const char *name) {
    jag_tensor *t = jag_tensor_set_find(set, name), *p = NULL;
    CHECK(t != NULL);
    CHECK_OK(jag_clone(t, &p));
    CHECK_OK(jag_set_requires_grad(p, true));
    return p;
}

/* Save after K steps, resume in a fresh optimizer over fresh parameters
 * (one built from the file, one with other values that jag_optim_load
 * overwrites) and other hyperparameters: the parameters after STEPS steps
 * are those of a run that never stopped, bit for bit. */
static void ckpt_resume_case(int which, jag_dtype dt) {
    enum { K = 3 };
    const double lr = which == CK_SGD ? 0.05 : 0.02;
    jag_tensor *ref[2] = {make_param(dt), make_param_2d(dt, 0.7)};
    jag_optimizer *o_ref = ckpt_optimizer(which, ref, lr);
    ckpt_train(o_ref, ref, 0, STEPS, lr);

    jag_tensor *a[2] = {make_param(dt), make_param_2d(dt, 0.7)};
    jag_optimizer *o_a = ckpt_optimizer(which, a, lr);
    ckpt_train(o_a, a, 0, K, lr);
    const char *path = ckpt_path("resume.safetensors");
    const char *names[] = {"layer.weight", "layer.bias"};
    const char *meta[] = {"epoch", "3"};
    CHECK_OK(jag_optim_save(o_a, path, names, meta, 1));
    int64_t saved_steps[2];
    for (int i = 0; i < 2; i++) CHECK_OK(jag_optim_step_count(o_a, i, &saved_steps[i]));
    CHECK(saved_steps[0] == K && saved_steps[1] == K - 1);
    jag_optim_free(o_a);
    jag_release(a[0]), jag_release(a[1]);

    jag_tensor_set *set = NULL;
    CHECK_OK(jag_load(path, JAG_LOAD_MMAP, &set));
    CHECK(jag_tensor_set_metadata_count(set) == 1 && strcmp(jag_tensor_set_metadata_key(set, 0), "epoch") == 0);
    jag_tensor *b[2] = {param_from_set(set, "layer.weight"), make_param_2d(dt, -2.0)};
    jag_optimizer *o_b = ckpt_optimizer(which, b, 1.0); /* lr 1.0: the file's must replace it */
    if (which == CK_ADAM_AMSGRAD) { /* and amsgrad off: the file turns it back on */
        jag_optim_free(o_b);
        CHECK_OK(jag_optim_adam_new(b, 2, 1.0, 0.5, 0.5, 1.0, 0.0, false, &o_b));
    }
    CHECK_OK(jag_optim_load(o_b, set));
    jag_tensor_set_free(set); /* the optimizer keeps copies */
    CHECK(jag_optim_get_lr(o_b) == lr * 0.5);
    for (int i = 0; i < 2; i++) {
        int64_t sc = -1;
        CHECK_OK(jag_optim_step_count(o_b, i, &sc));
        CHECK(sc == saved_steps[i]);
    }
    ckpt_train(o_b, b, K, STEPS, lr);
    for (int i = 0; i < 2; i++) CHECK_MSG(same_bits(b[i], ref[i]), "case %d dtype %s param %d", which, jag_dtype_name(dt), i);
    /* the state too: the next steps would agree */
    const char *st_name = which == CK_SGD ? "momentum_buffer" : "exp_avg_sq";
    for (int i = 0; i < 2; i++) {
        jag_tensor *s_ref = NULL, *s_b = NULL;
        CHECK_OK(jag_optim_state(o_ref, i, st_name, &s_ref));
        CHECK_OK(jag_optim_state(o_b, i, st_name, &s_b));
        CHECK(s_ref && s_b && same_bits(s_ref, s_b));
        jag_release(s_ref), jag_release(s_b);
    }
    unlink(path);
    jag_optim_free(o_ref), jag_optim_free(o_b);
    for (int i = 0; i < 2; i++) jag_release(ref[i]), jag_release(b[i]);
}

static void test_checkpoint_resume(void) {
    TEST_BEGIN();
    ckpt_resume_case(CK_SGD, JAG_FLOAT32);
    ckpt_resume_case(CK_ADAM_AMSGRAD, JAG_FLOAT64);
    ckpt_resume_case(CK_ADAMW, JAG_FLOAT32);
}

/* What an optimizer holds, to show that a refused load changed nothing. */
typedef struct opt_snapshot {
    double values[2][N], lr;
    int64_t steps[2], versions[2];
    jag_tensor *state[2][2]; /* exp_avg, exp_avg_sq: the live tensors */
    double state_values[2][2][N];
} opt_snapshot;

static void snapshot(jag_optimizer *o, jag_tensor **p, opt_snapshot *s) {
    const char *names[2] = {"exp_avg", "exp_avg_sq"};
    s->lr = jag_optim_get_lr(o);
    for (int i = 0; i < 2; i++) {
        for (int e = 0; e < N; e++) s->values[i][e] = t_get(p[i], e);
        s->versions[i] = jag_version(p[i]);
        CHECK_OK(jag_optim_step_count(o, i, &s->steps[i]));
        for (int k = 0; k < 2; k++) {
            CHECK_OK(jag_optim_state(o, i, names[k], &s->state[i][k]));
            for (int e = 0; e < N; e++) s->state_values[i][k][e] = t_get(s->state[i][k], e);
        }
    }
}

static bool optimizer_unchanged(jag_optimizer *o, jag_tensor **p, opt_snapshot *s) {
    const char *names[2] = {"exp_avg", "exp_avg_sq"};
    bool same = jag_optim_get_lr(o) == s->lr;
    for (int i = 0; i < 2; i++) {
        int64_t sc = -1;
        CHECK_OK(jag_optim_step_count(o, i, &sc));
        same = same && sc == s->steps[i] && jag_version(p[i]) == s->versions[i];
        for (int e = 0; e < N; e++) same = same && t_get(p[i], e) == s->values[i][e];
        for (int k = 0; k < 2; k++) {
            jag_tensor *now = NULL;
            CHECK_OK(jag_optim_state(o, i, names[k], &now));
            same = same && now == s->state[i][k];
            for (int e = 0; e < N; e++) same = same && t_get(now, e) == s->state_values[i][k][e];
            jag_release(now);
        }
    }
    return same;
}

static void snapshot_free(opt_snapshot *s) {
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) jag_release(s->state[i][k]);
}

/* Load `path` into o; the load fails with status and message, o unchanged. */
static void check_refused_load(jag_optimizer *o, jag_tensor **p, const char *path, jag_status status, const char *msg) {
    opt_snapshot s;
    snapshot(o, p, &s);
    jag_tensor_set *set = NULL;
    CHECK_OK(jag_load(path, JAG_LOAD_COPY, &set));
    CHECK_ERR(jag_optim_load(o, set), status, msg);
    CHECK_MSG(optimizer_unchanged(o, p, &s), "after the refused load (%s)", msg);
    jag_tensor_set_free(set);
    snapshot_free(&s);
}

/* A file with the given description and tensors "w" (N) and "b" (1, N) of
 * dtype dt, and the state of parameter 0 unless `no_state`. */
static void write_described(const char *path, jag_dtype dt, const char *description, bool no_state) {
    jag_tensor *w = make_param(dt), *b = make_param_2d(dt, 1.0), *m = make_param(dt), *v = make_param(dt);
    const char *names[] = {"w", "b", "optim.state.0.exp_avg", "optim.state.0.exp_avg_sq"};
    jag_tensor *ts[] = {w, b, m, v};
    CHECK_OK(jag_save_described(path, names, ts, no_state ? 2 : 4, NULL, 0, JAG_OPTIMIZER_KEY, description));
    jag_release(w), jag_release(b), jag_release(m), jag_release(v);
}

static void test_checkpoint_refusals(void) {
    TEST_BEGIN();
    const char *path = ckpt_path("refused.safetensors");
    jag_tensor *p[2] = {make_param(JAG_FLOAT64), make_param_2d(JAG_FLOAT64, 0.3)};
    jag_optimizer *o = NULL;
    CHECK_OK(jag_optim_adam_new(p, 2, 0.01, 0.9, 0.999, 1e-8, 0.0, false, &o));
    ckpt_train(o, p, 0, 2, 0.01); /* state and step counts exist: a refused load must keep them */

    /* save */
    const char *bad_names[] = {"w", NULL};
    CHECK_ERR(jag_optim_save(NULL, path, NULL, NULL, 0), JAG_EINVAL, "'opt' is NULL");
    CHECK_ERR(jag_optim_save(o, NULL, NULL, NULL, 0), JAG_EINVAL, "'path' is NULL");
    CHECK_ERR(jag_optim_save(o, path, bad_names, NULL, 0), JAG_EINVAL, "param_names[1]");
    const char *dup[] = {"w", "w"};
    CHECK_ERR(jag_optim_save(o, path, dup, NULL, 0), JAG_EINVAL, "jag_optim_save: jag_save_described: the name 'w' is given twice");
    const char *reserved[] = {"jag.x", "1"};
    CHECK_ERR(jag_optim_save(o, path, NULL, reserved, 1), JAG_EINVAL, "reserves");
    CHECK_ERR(jag_optim_save(o, "/nonexistent-dir/x.safetensors", NULL, NULL, 0), JAG_ESTATE, "cannot create");
    CHECK(access(path, F_OK) != 0);

    /* load: arguments, and a file that is no optimizer checkpoint */
    jag_tensor_set *set = NULL;
    CHECK_ERR(jag_optim_load(NULL, set), JAG_EINVAL, "'opt' is NULL");
    CHECK_ERR(jag_optim_load(o, NULL), JAG_EINVAL, "'set' is NULL");
    const char *wn[] = {"w"};
    CHECK_OK(jag_save(path, wn, p, 1, NULL, 0));
    check_refused_load(o, p, path, JAG_EINVAL, "has no metadata 'jag.optimizer'");

    /* another kind, another number of parameters */
    jag_tensor *q[2] = {make_param(JAG_FLOAT64), make_param_2d(JAG_FLOAT64, 0.3)};
    jag_optimizer *other = NULL;
    CHECK_OK(jag_optim_sgd_new(q, 2, 0.1, 0.0, 0.0, 0.0, false, &other));
    CHECK_OK(jag_optim_save(other, path, NULL, NULL, 0));
    check_refused_load(o, p, path, JAG_EINVAL, "the set holds a \"sgd\" optimizer; argument 'opt' is \"adam\"");
    jag_optim_free(other);
    CHECK_OK(jag_optim_adamw_new(q, 2, 0.1, 0.9, 0.999, 1e-8, 0.0, false, &other));
    CHECK_OK(jag_optim_save(other, path, NULL, NULL, 0));
    check_refused_load(o, p, path, JAG_EINVAL, "\"adamw\" optimizer");
    jag_optim_free(other);
    CHECK_OK(jag_optim_adam_new(q, 1, 0.1, 0.9, 0.999, 1e-8, 0.0, false, &other));
    CHECK_OK(jag_optim_save(other, path, NULL, NULL, 0));
    check_refused_load(o, p, path, JAG_EINVAL, "the set holds 1 parameters; argument 'opt' has 2");
    jag_optim_free(other);

    /* shapes and dtypes: the message names the tensor and the parameter */
    jag_tensor *r[2] = {make_param(JAG_FLOAT64), make_param(JAG_FLOAT64)};
    CHECK_OK(jag_optim_adam_new(r, 2, 0.1, 0.9, 0.999, 1e-8, 0.0, false, &other));
    CHECK_OK(jag_optim_save(other, path, NULL, NULL, 0));
    check_refused_load(o, p, path, JAG_ESHAPE, "tensor 'param.1' has shape [11]; expected [1, 11] (the optimizer's params[1])");
    jag_optim_free(other);
    jag_release(r[1]);
    r[1] = make_param_2d(JAG_FLOAT32, 0.3);
    CHECK_OK(jag_optim_adam_new(r, 2, 0.1, 0.9, 0.999, 1e-8, 0.0, false, &other));
    set_grad(r[0], 0), set_grad(r[1], 0);
    CHECK_OK(jag_optim_step(other));
    CHECK_OK(jag_optim_save(other, path, NULL, NULL, 0));
    check_refused_load(o, p, path, JAG_EDTYPE, "tensor 'param.1' has dtype float32; expected float64");
    jag_optim_free(other);

    /* malformed descriptions */
    static const struct {
        const char *desc;
        bool no_state;
        const char *msg;
    } bad[] = {
        {"[]", false, "metadata 'jag.optimizer' is an array, expected an object"},
        {"{\"lr\":\"0.1\"}", false, "field 'kind' is missing; expected a string"},
        {"{\"kind\":\"adam\",\"lr\":\"-1\",\"beta1\":\"0.9\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
         "\"amsgrad\":false,\"params\":[]}", false, "argument 'lr' is -1"},
        {"{\"kind\":\"adam\",\"lr\":\"0.1x\",\"beta1\":\"0.9\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
         "\"amsgrad\":false,\"params\":[]}", false, "field 'lr' is \"0.1x\"; expected a number"},
        {"{\"kind\":\"adam\",\"lr\":\"0.1\",\"beta1\":\"1\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
         "\"amsgrad\":false,\"params\":[]}", false, "expected 0 <= beta1 < 1"},
        {"{\"kind\":\"adam\",\"lr\":\"0.1\",\"beta1\":\"0.9\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
         "\"params\":[]}", false, "field 'amsgrad' is missing; expected true or false"},
        {"{\"kind\":\"adam\",\"lr\":\"0.1\",\"beta1\":\"0.9\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
         "\"amsgrad\":false,\"params\":[{\"name\":\"w\",\"step\":-1},{\"name\":\"b\",\"step\":0}]}", false,
         "params[0] has step -1; expected >= 0"},
        {"{\"kind\":\"adam\",\"lr\":\"0.1\",\"beta1\":\"0.9\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
         "\"amsgrad\":false,\"params\":[{\"name\":\"w\",\"step\":1},{\"name\":\"nope\",\"step\":0}]}", false,
         "parameter 1's tensor 'nope' is missing from the set"},
        /* parameter 0 has taken 4 steps, so its state must be there; the failure comes after parameter 0's state was
         * read: what was made is dropped */
        {"{\"kind\":\"adam\",\"lr\":\"0.1\",\"beta1\":\"0.9\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
         "\"amsgrad\":false,\"params\":[{\"name\":\"w\",\"step\":4},{\"name\":\"b\",\"step\":4}]}", false,
         "tensor 'optim.state.1.exp_avg' is missing from the set; expected it after 4 steps"},
        {"{\"kind\":\"adam\",\"lr\":\"0.1\",\"beta1\":\"0.9\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
         "\"amsgrad\":false,\"params\":[{\"name\":\"w\",\"step\":4},{\"name\":\"b\",\"step\":0}]}", true,
         "tensor 'optim.state.0.exp_avg' is missing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_described(path, JAG_FLOAT64, bad[i].desc, bad[i].no_state);
        check_refused_load(o, p, path, JAG_EINVAL, bad[i].msg);
    }
    /* the same file with a valid description loads (the table's files differ from it in one place each) */
    write_described(path, JAG_FLOAT64,
                    "{\"kind\":\"adam\",\"lr\":\"0.125\",\"beta1\":\"0.9\",\"beta2\":\"0.9\",\"eps\":\"0\",\"weight_decay\":\"0\","
                    "\"amsgrad\":false,\"params\":[{\"name\":\"w\",\"step\":4},{\"name\":\"b\",\"step\":0}]}", false);
    CHECK_OK(jag_load(path, JAG_LOAD_COPY, &set));
    CHECK_OK(jag_optim_load(o, set));
    jag_tensor_set_free(set);
    int64_t sc = -1;
    jag_tensor *st = NULL;
    CHECK(jag_optim_get_lr(o) == 0.125);
    CHECK_OK(jag_optim_step_count(o, 1, &sc));
    CHECK(sc == 0);
    CHECK_OK(jag_optim_state(o, 1, "exp_avg", &st));
    CHECK(st == NULL); /* parameter 1 starts again: no state in the file */
    for (int e = 0; e < N; e++) CHECK(t_get(p[1], e) == 1.0 * cos(0.4 * e + 0.2));

    unlink(path);
    jag_optim_free(o);
    for (int i = 0; i < 2; i++) jag_release(p[i]), jag_release(q[i]), jag_release(r[i]);
}

/* ---- clip_grad_norm ------------------------------------------------------ */

static void test_clip_grad_norm(void) {
    TEST_BEGIN();
    const double types[] = {2.0, INFINITY, 1.0, 3.0};
    for (int k = 0; k < 4; k++) {
        double pt = types[k];
        jag_tensor *a = make_param(JAG_FLOAT64), *b = make_param(JAG_FLOAT32), *c = make_param(JAG_FLOAT64);
        set_grad(a, 0), set_grad(b, 2); /* c has no gradient */
        double ref = 0;
        for (int i = 0; i < N; i++) {
            double x = fabs(grad_at(0, i)), y = fabs((double)(float)grad_at(2, i));
            if (isinf(pt)) ref = fmax(ref, fmax(x, y));
            else ref += pow(x, pt) + pow(y, pt);
        }
        if (!isinf(pt)) ref = pow(ref, 1 / pt);
        jag_tensor *ps[3] = {a, b, c};
        double total = -1;
        /* max_norm above the norm: nothing written (compared with the values
         * read before, not with grad_at: a compiler may fold a constant
         * grad_at(0, 1) with another sin than the run-time one) */
        jag_tensor *g = NULL;
        double before[N];
        CHECK_OK(jag_get_grad(a, &g));
        for (int i = 0; i < N; i++) before[i] = t_get(g, i);
        int64_t vg = jag_version(g);
        jag_release(g), g = NULL;
        CHECK_OK(jag_clip_grad_norm(ps, 3, ref * 2, pt, &total));
        CHECK_CLOSE(total, ref, 1e-12 * ref);
        CHECK_OK(jag_get_grad(a, &g));
        CHECK(jag_version(g) == vg);
        for (int i = 0; i < N; i++) CHECK(t_get(g, i) == before[i]);
        jag_release(g);
        /* below: every gradient scaled by max_norm / (total + 1e-6) (torch's clip_coef) */
        double maxn = ref / 4, coef = maxn / (ref + 1e-6);
        CHECK_OK(jag_clip_grad_norm(ps, 3, maxn, pt, &total));
        CHECK_CLOSE(total, ref, 1e-12 * ref);
        jag_tensor *ga = NULL, *gb = NULL, *gc = NULL;
        CHECK_OK(jag_get_grad(a, &ga));
        CHECK_OK(jag_get_grad(b, &gb));
        CHECK_OK(jag_get_grad(c, &gc));
        CHECK(gc == NULL);
        for (int i = 0; i < N; i++) {
            CHECK_CLOSE(t_get(ga, i), grad_at(0, i) * coef, 1e-14);
            CHECK_CLOSE(t_get(gb, i), (double)(float)grad_at(2, i) * coef, 1e-6);
        }
        jag_release(ga), jag_release(gb);
        jag_release(a), jag_release(b), jag_release(c);
    }
}

/* A gradient shared with another tensor is replaced by a scaled copy: the
 * other tensor keeps its values. */
static void test_clip_shared_gradient(void) {
    TEST_BEGIN();
    jag_tensor *a = make_param(JAG_FLOAT64);
    set_grad(a, 0);
    jag_tensor *keep = NULL;
    CHECK_OK(jag_get_grad(a, &keep)); /* a second holder of the gradient */
    double total = 0;
    CHECK_OK(jag_clip_grad_norm(&a, 1, 0.5, 2.0, &total));
    CHECK(total > 0.5);
    for (int i = 0; i < N; i++) CHECK_CLOSE(t_get(keep, i), grad_at(0, i), 0);
    jag_tensor *g = NULL;
    CHECK_OK(jag_get_grad(a, &g));
    CHECK(g != keep);
    double s = 0;
    for (int i = 0; i < N; i++) s += t_get(g, i) * t_get(g, i);
    CHECK_CLOSE(sqrt(s), 0.5 * total / (total + 1e-6), 1e-9);
    CHECK_ERR(jag_clip_grad_norm(&a, 1, 0.5, 0.0, &total), JAG_EINVAL, "norm_type");
    CHECK_ERR(jag_clip_grad_norm(&a, 1, NAN, 2.0, &total), JAG_EINVAL, "max_norm");
    jag_release(g), jag_release(keep), jag_release(a);
}

TEST_MAIN(test_sgd_rules, test_adam_rules, test_options_matter, test_kernels_vs_reference, test_functional_updates,
          test_refusals_change_nothing, test_read_only_param, test_version_counter_seen_by_autograd,
          test_state_round_trip, test_checkpoint_resume, test_checkpoint_refusals, test_clip_grad_norm,
          test_clip_shared_gradient)
