/*
 * test_threads.c — jag called from several threads at once.
 *
 * Backward: NT threads each build their own graphs over one shared leaf
 * (dense float32, dense float64 used twice in a graph, jagged nested, and
 * through each thread's own compiled program) and run jag_backward at once,
 * many times; the leaf's accumulated gradient is then compared, element by
 * element and exactly, with the sum the test computes in integers. The
 * values are small integers, so every partial sum is an integer far below
 * 2^24 and exact in float32 and float64 whatever the order of the
 * additions: any lost or doubled gradient shows as a wrong number, not as a
 * rounding difference.
 *
 * Forward: NT threads run the same ops (GEMM, softmax, reductions,
 * pointwise ops above the parallel grain, nested pointwise, broadcast and
 * ragged ops) on shared read-only inputs, and each result is compared bit
 * for bit with the one computed by one thread alone before. First use: the
 * threads of a fresh process are the first to make nested and scaled
 * tensors, draw random numbers and define custom ops.
 *
 * Worker threads never touch test.h's counters (plain ints): each records
 * its first failure in its own slot, and the thread that started them
 * checks the slots after joining. Each test runs in a child process: two threads replacing
 * one gradient at once can free it twice and abort the process, and that
 * is then reported as the test's failure (killed by signal 6) while the
 * other tests still run. Under ThreadSanitizer (make tsan) the same runs
 * also check that no two threads touch one location unordered.
 */
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define NT 8

/* Rounds: enough that two threads meet inside the update of one gradient
 * in nearly every run even on two cores, where threads mostly interleave by
 * preemption. ThreadSanitizer needs no actual collision (it reports two
 * accesses not ordered by any synchronisation) and runs 5-15x slower:
 * fewer there. */
#if defined(__SANITIZE_THREAD__)
#define JAG_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define JAG_TEST_TSAN 1
#endif
#endif
#ifdef JAG_TEST_TSAN
#define ITERS 250
#define FWD_ITERS 4
#else
#define ITERS 3000
#define FWD_ITERS 20
#endif

/* ---- per-thread results ---------------------------------------------- */

typedef struct worker {
    int id;
    const void *shared; /* the test's shared inputs */
    int failed;         /* 0, or the first failure below */
    char msg[512];
    long live; /* tensors this thread made minus those it released */
    jag_tensor *res[4]; /* results compared after joining */
} worker;

static pthread_barrier_t start_line;

static void fail(worker *w, const char *what, jag_status st) {
    if (w->failed) return;
    w->failed = 1;
    snprintf(w->msg, sizeof w->msg, "thread %d: %s -> %s: %s", w->id, what, jag_status_str(st), jag_last_error());
}

/* Tensors made minus released by the workers of the last run_threads: the
 * library counts per thread, and a gradient made by a worker is released by
 * whoever releases the leaf. */
static long workers_live;

/* Runs fn on NT threads that start together; checks each thread's slot and
 * copies the slots to keep (NULL, or NT entries). */
static void run_threads(void *(*fn)(void *), const void *shared, worker *keep) {
    pthread_t th[NT];
    worker ws[NT];
    int started = 0;
    CHECK(pthread_barrier_init(&start_line, NULL, NT) == 0);
    for (int i = 0; i < NT; i++) {
        ws[i] = (worker){.id = i, .shared = shared};
        if (pthread_create(&th[i], NULL, fn, &ws[i]) != 0) break;
        started++;
    }
    CHECK_MSG(started == NT, "only %d of %d threads started", started, NT);
    if (started != NT) exit(2); /* the others wait at the barrier for ever */
    for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start_line);
    for (int i = 0; i < NT; i++) {
        CHECK_MSG(!ws[i].failed, "%s", ws[i].msg);
        workers_live += ws[i].live;
        if (keep) keep[i] = ws[i];
    }
}

/* A worker's first and last statements. */
static void worker_begin(worker *w) { w->live = jag__live_tensors(); }
static void worker_end(worker *w) { w->live = jag__live_tensors() - w->live; }

typedef struct body_run {
    void (*body)(void);
    long live;
} body_run;

static void *body_thread(void *arg) {
    body_run *r = arg;
    long live = jag__live_tensors();
    workers_live = 0;
    r->body();
    r->live = jag__live_tensors() - live + workers_live;
    return NULL;
}

/* Runs body on a thread of its own (which starts the workers), so that the
 * tensors it and its workers make and release are all counted, and checks
 * that none is left. */
static void run_body(void (*body)(void)) {
    body_run r = {body, 0};
    pthread_t th;
    if (pthread_create(&th, NULL, body_thread, &r) != 0) {
        CHECK_MSG(0, "pthread_create: %s", strerror(errno));
        return;
    }
    pthread_join(th, NULL);
    CHECK_MSG(r.live == 0, "%ld tensor(s) leaked%s", r.live,
              r.live < 0 ? " (negative: released more often than made)" : "");
}

/* Runs body (through run_body) in a child process and counts its checks
 * here: the child sends its counts through a pipe; a child that dies, or
 * exits non-zero (a sanitizer's or valgrind's report), is one more failure.
 * Under ThreadSanitizer body runs in this process: the OpenMP tool that
 * tells ThreadSanitizer about OpenMP's barriers (libarcher) crashes when a
 * forked child exits, and ThreadSanitizer stops at the first race anyway. */
static void in_child(void (*body)(void)) {
#ifdef JAG_TEST_TSAN
    run_body(body);
#else
    int fd[2];
    if (pipe(fd) != 0) {
        CHECK_MSG(0, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL); /* nothing buffered here is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        CHECK_MSG(0, "fork: %s", strerror(errno));
        close(fd[0]), close(fd[1]);
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        test_checks_passed = test_checks_failed = 0;
        run_body(body);
        int counts[2] = {test_checks_passed, test_checks_failed};
        ssize_t wrote = write(fd[1], counts, sizeof counts);
        close(fd[1]);
        fflush(NULL);
        exit(wrote == (ssize_t)sizeof counts ? 0 : 1); /* failed checks travel in counts */
    }
    close(fd[1]);
    int counts[2] = {0, 0}, status = 0;
    ssize_t got = read(fd[0], counts, sizeof counts);
    close(fd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    bool counted = got == (ssize_t)sizeof counts;
    if (counted) test_checks_passed += counts[0], test_checks_failed += counts[1];
    CHECK_MSG(!WIFSIGNALED(status), "the process running the threads was killed by signal %d (%s)%s",
              WTERMSIG(status), strsignal(WTERMSIG(status)), counted ? "" : " before its checks ran");
    CHECK_MSG(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0 && counted),
              "the process running the threads exited with status %d%s", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
              counted ? " (a sanitizer's or valgrind's report above)" : " before its checks ran");
#endif
}

static jag_tensor *from_doubles(const double *v, const int64_t *sizes, int ndim, jag_dtype dtype) {
    return t_from(v, sizes, ndim, dtype);
}

static jag_tensor *int64_vec(const int64_t *v, int64_t n) {
    jag_tensor *t = NULL;
    if (jag_from_data(v, &n, 1, JAG_INT64, &t)) {
        fprintf(stderr, "int64_vec: %s\n", jag_last_error());
        exit(2);
    }
    return t;
}

/* Compares g (may be NULL: no gradient at all) with want[0..n) exactly;
 * reports the first wrong element and how many are wrong. */
static void check_grad_exact(const jag_tensor *g, const double *want, int64_t n, int iters, const char *what) {
    CHECK_MSG(g != NULL, "%s: no gradient accumulated at all", what);
    if (!g) return;
    CHECK_MSG(jag_numel(g) == n, "%s: gradient has %lld elements, expected %lld", what, (long long)jag_numel(g),
              (long long)n);
    if (jag_numel(g) != n) return;
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (t_get(g, i) != want[i]) {
            if (first < 0) first = i;
            wrong++;
        }
    CHECK_MSG(wrong == 0, "%s: %lld of %lld gradient elements wrong; element %lld is %.17g, expected %.17g "
              "(%d threads x %d backwards)", what, (long long)wrong, (long long)n, (long long)first,
              first >= 0 ? t_get(g, first) : 0.0, first >= 0 ? want[first] : 0.0, NT, iters);
}

/* ---- backward over a shared dense float32 leaf ------------------------- */
/* Thread t: loss = sum(W * x_t) with x_t[i] = 1 + t + 8 (i mod 16), so
 * each backward adds x_t to W.grad: W.grad[i] = ITERS * sum_t x_t[i]
 * (at most 2,988,000: exact in float32). */

#define D1_ROWS 8
#define D1_COLS 8
#define D1_N (D1_ROWS * D1_COLS)

static double d1_x(int t, int i) { return 1 + t + 8 * (i % 16); }

static void *d1_worker(void *arg) {
    worker *w = arg;
    worker_begin(w);
    const jag_tensor *W = w->shared;
    double xv[D1_N];
    for (int i = 0; i < D1_N; i++) xv[i] = d1_x(w->id, i);
    int64_t sz[2] = {D1_ROWS, D1_COLS};
    jag_tensor *x = from_doubles(xv, sz, 2, JAG_FLOAT32);
    pthread_barrier_wait(&start_line);
    for (int it = 0; it < ITERS; it++) {
        jag_tensor *p = NULL, *loss = NULL;
        jag_status st = jag_mul(W, x, &p);
        if (!st) st = jag_sum(p, NULL, 0, false, &loss);
        if (!st) st = jag_backward(loss, NULL, false);
        if (st) fail(w, "mul, sum, backward", st);
        jag_release(loss), jag_release(p);
        if (st) break;
    }
    jag_release(x);
    worker_end(w);
    return NULL;
}

static void run_backward_shared_leaf_dense(void) {
    int64_t sz[2] = {D1_ROWS, D1_COLS};
    double wv[D1_N], want[D1_N];
    for (int i = 0; i < D1_N; i++) {
        wv[i] = i - 2;
        want[i] = 0;
        for (int t = 0; t < NT; t++) want[i] += (double)ITERS * d1_x(t, i);
    }
    jag_tensor *W = from_doubles(wv, sz, 2, JAG_FLOAT32), *g = NULL;
    CHECK_OK(jag_set_requires_grad(W, true));
    run_threads(d1_worker, W, NULL);
    CHECK_OK(jag_get_grad(W, &g));
    check_grad_exact(g, want, D1_N, ITERS, "float32 W shared by 8 threads, loss = sum(W * x_t)");
    /* W itself is unchanged */
    for (int i = 0; i < D1_N; i++) CHECK(t_get(W, i) == wv[i]);
    jag_release(g), jag_release(W);
}

/* ---- backward over a shared float64 leaf used twice per graph ---------- */
/* Thread t: loss = sum(A_t @ W) + sum(W * W), A_t (N, K) with
 * A_t[n][k] = t + n + 2 k, W (K, M). d loss / d W[k][m] =
 * sum_n A_t[n][k] + 2 W[k][m]; the two uses reach W through two edges of
 * one graph. */

#define D2_N 5
#define D2_K 3
#define D2_M 4

static double d2_a(int t, int n, int k) { return t + n + 2 * k; }
static double d2_w(int k, int m) { return (k * D2_M + m) % 5 - 2; }

static void *d2_worker(void *arg) {
    worker *w = arg;
    worker_begin(w);
    const jag_tensor *W = w->shared;
    double av[D2_N * D2_K];
    for (int n = 0; n < D2_N; n++)
        for (int k = 0; k < D2_K; k++) av[n * D2_K + k] = d2_a(w->id, n, k);
    int64_t sz[2] = {D2_N, D2_K};
    jag_tensor *A = from_doubles(av, sz, 2, JAG_FLOAT64);
    pthread_barrier_wait(&start_line);
    for (int it = 0; it < ITERS; it++) {
        jag_tensor *y = NULL, *s1 = NULL, *sq = NULL, *s2 = NULL, *loss = NULL;
        jag_status st = jag_mm(A, W, &y);
        if (!st) st = jag_sum(y, NULL, 0, false, &s1);
        if (!st) st = jag_mul(W, W, &sq);
        if (!st) st = jag_sum(sq, NULL, 0, false, &s2);
        if (!st) st = jag_add(s1, s2, 1.0, &loss);
        if (!st) st = jag_backward(loss, NULL, false);
        if (st) fail(w, "mm, mul, sum, add, backward", st);
        jag_release(loss), jag_release(s2), jag_release(sq), jag_release(s1), jag_release(y);
        if (st) break;
    }
    jag_release(A);
    worker_end(w);
    return NULL;
}

static void run_backward_shared_leaf_mm(void) {
    int64_t sz[2] = {D2_K, D2_M};
    double wv[D2_K * D2_M], want[D2_K * D2_M];
    for (int k = 0; k < D2_K; k++)
        for (int m = 0; m < D2_M; m++) {
            wv[k * D2_M + m] = d2_w(k, m);
            double per = 0; /* over all threads, one backward each */
            for (int t = 0; t < NT; t++) {
                for (int n = 0; n < D2_N; n++) per += d2_a(t, n, k);
                per += 2 * d2_w(k, m);
            }
            want[k * D2_M + m] = (double)ITERS * per;
        }
    jag_tensor *W = from_doubles(wv, sz, 2, JAG_FLOAT64), *g = NULL;
    CHECK_OK(jag_set_requires_grad(W, true));
    run_threads(d2_worker, W, NULL);
    CHECK_OK(jag_get_grad(W, &g));
    check_grad_exact(g, want, D2_K * D2_M, ITERS, "float64 W shared by 8 threads, loss = sum(A_t @ W) + sum(W * W)");
    jag_release(g), jag_release(W);
}

/* ---- backward over a shared jagged nested leaf ------------------------- */
/* V: 3 components of 2, 0 and 5 rows of 2 columns. Thread t makes X_t on
 * the same offsets with values x[i] = 1 + t + 3 i and takes
 * loss = sum(sum(V * X_t, dims 1 and 2)): each backward adds X_t's values
 * to V's gradient. */

#define NV_ROWS 7
#define NV_COLS 2
#define NV_N (NV_ROWS * NV_COLS)

typedef struct nested_shared {
    const jag_tensor *V, *offsets;
} nested_shared;

static double nv_x(int t, int i) { return 1 + t + 3 * i; }

static void *nv_worker(void *arg) {
    worker *w = arg;
    worker_begin(w);
    const nested_shared *sh = w->shared;
    double xv[NV_N];
    for (int i = 0; i < NV_N; i++) xv[i] = nv_x(w->id, i);
    int64_t sz[2] = {NV_ROWS, NV_COLS};
    jag_tensor *xvals = from_doubles(xv, sz, 2, JAG_FLOAT32), *X = NULL;
    jag_status st0 = jag_nested_from_jagged(xvals, sh->offsets, NULL, &X);
    if (st0) fail(w, "jag_nested_from_jagged", st0);
    pthread_barrier_wait(&start_line);
    for (int it = 0; it < ITERS && !st0; it++) {
        jag_tensor *p = NULL, *rows = NULL, *loss = NULL;
        int dims[2] = {1, 2};
        jag_status st = jag_mul(sh->V, X, &p);
        if (!st) st = jag_sum(p, dims, 2, false, &rows);
        if (!st) st = jag_sum(rows, NULL, 0, false, &loss);
        if (!st) st = jag_backward(loss, NULL, false);
        if (st) fail(w, "nested mul, sum over ragged dim, sum, backward", st);
        jag_release(loss), jag_release(rows), jag_release(p);
        if (st) break;
    }
    jag_release(X), jag_release(xvals);
    worker_end(w);
    return NULL;
}

static void run_backward_shared_leaf_nested(void) {
    int64_t sz[2] = {NV_ROWS, NV_COLS}, o[4] = {0, 2, 2, 7};
    double vv[NV_N], want[NV_N];
    for (int i = 0; i < NV_N; i++) {
        vv[i] = i % 3;
        want[i] = 0;
        for (int t = 0; t < NT; t++) want[i] += (double)ITERS * nv_x(t, i);
    }
    jag_tensor *vals = from_doubles(vv, sz, 2, JAG_FLOAT32), *offsets = int64_vec(o, 4), *V = NULL, *g = NULL,
               *gv = NULL;
    CHECK_OK(jag_nested_from_jagged(vals, offsets, NULL, &V));
    CHECK_OK(jag_set_requires_grad(V, true));
    nested_shared sh = {V, offsets};
    run_threads(nv_worker, &sh, NULL);
    CHECK_OK(jag_get_grad(V, &g));
    CHECK(g == NULL || jag_is_nested(g));
    if (g && jag_is_nested(g)) {
        CHECK_OK(jag_nested_values(g, &gv));
        check_grad_exact(gv, want, NV_N, ITERS, "nested V shared by 8 threads, loss = sum(V * X_t)");
    } else {
        check_grad_exact(g, want, NV_N, ITERS, "nested V shared by 8 threads, loss = sum(V * X_t)");
    }
    jag_release(gv), jag_release(g), jag_release(V), jag_release(offsets), jag_release(vals);
}

/* ---- first use from many threads at once ------------------------------ */
/* In a fresh process (each test runs in its own) the threads are the first
 * to make nested and scaled tensors (their classes register on first use)
 * and to draw from their default generators, and each defines a custom op
 * of its own and calls it while the others append theirs to the op table;
 * then one thread alone makes the same tensors and they are compared bit
 * for bit. */

#define FU_RAND 40000 /* above the parallel grain: OpenMP inside each thread */

static jag_status first_use_make(int t, jag_tensor **res) {
    int64_t n = FU_RAND, s0[2] = {2, 3}, s1[2] = {4, 3}, s2[2] = {0, 3};
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = t * 100 + i;
    jag_tensor *items[3] = {t_from(v, s0, 2, JAG_FLOAT32), t_from(v, s1, 2, JAG_FLOAT32),
                            t_from(v, s2, 2, JAG_FLOAT32)};
    jag_tensor *scale = NULL, *nt = NULL, *scaled = NULL;
    jag_manual_seed(1000 + (uint64_t)t);
    jag_status st = jag_full(NULL, 0, 0.5 + t, JAG_FLOAT32, &scale);
    if (!st) st = jag_rand_normal(&n, 1, 0.0, 1.0, JAG_FLOAT32, NULL, &res[0]);
    if (!st) st = jag_nested_from_list(items, 3, JAG_JAGGED, &nt);
    if (!st) st = jag_nested_to_padded(nt, -1.0, NULL, 0, &res[1]);
    if (!st) st = jag_scaled_new(items[1], scale, &scaled);
    if (!st) st = jag_scaled_materialize(scaled, &res[2]);
    jag_release(scaled), jag_release(nt), jag_release(scale);
    for (int i = 0; i < 3; i++) jag_release(items[i]);
    return st;
}

/* CPU kernel of threads::scale<t>(Tensor x, float alpha) -> Tensor. */
static jag_status fu_scale_cpu(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)nargs, (void)ctx;
    return jag_mul_scalar(args[0].u.t, args[1].u.d, &outs[0]);
}

static void *first_use_worker(void *arg) {
    worker *w = arg;
    worker_begin(w);
    char schema[96];
    snprintf(schema, sizeof schema, "threads::scale%d(Tensor x, float alpha) -> Tensor", w->id);
    pthread_barrier_wait(&start_line);
    jag_status st = first_use_make(w->id, w->res);
    if (st) fail(w, "rand_normal, nested_from_list, nested_to_padded, scaled_new, scaled_materialize", st);
    jag_op_id op = -1;
    if (!st && (st = jag_op_define(schema, &op))) fail(w, "jag_op_define", st);
    if (!st && (st = jag_op_impl(op, "CPU", fu_scale_cpu, NULL))) fail(w, "jag_op_impl", st);
    if (!st) {
        jag_value a[2] = {{.kind = JAG_VAL_TENSOR, .u.t = w->res[1]}, {.kind = JAG_VAL_DOUBLE, .u.d = 0.5 + w->id}};
        if ((st = jag_op_call(op, a, 2, &w->res[3]))) fail(w, "jag_op_call of the thread's own op", st);
    }
    worker_end(w);
    return NULL;
}

static bool same_bits(const jag_tensor *a, const jag_tensor *b);

static void run_first_use(void) {
    worker ws[NT];
    run_threads(first_use_worker, NULL, ws);
    for (int t = 0; t < NT; t++) {
        jag_tensor *ref[4] = {0};
        if (!ws[t].failed) {
            CHECK_OK(first_use_make(t, ref));
            CHECK_OK(jag_mul_scalar(ref[1], 0.5 + t, &ref[3]));
            char name[32];
            snprintf(name, sizeof name, "threads::scale%d", t);
            jag_op_id op = -1;
            CHECK_OK(jag_op_find(name, &op));
            CHECK(op >= 0 && strcmp(jag_op_name(op), name) == 0);
            static const char *const what[4] = {"rand_normal", "nested_to_padded", "scaled_materialize",
                                                "the thread's custom op"};
            for (int i = 0; i < 4; i++)
                CHECK_MSG(ws[t].res[i] && ref[i] && same_bits(ws[t].res[i], ref[i]),
                          "thread %d: %s differs from the same call made alone", t, what[i]);
        }
        for (int i = 0; i < 4; i++) jag_release(ref[i]), jag_release(ws[t].res[i]);
    }
}

/* ---- compiled programs over a shared leaf ------------------------------ */
/* Each thread compiles its own step, loss = sum(2 (x @ W) + x @ W) (a GEMM
 * and a fused pointwise region), and runs it and its compiled backward on
 * its own x_t with the shared W: d loss / d W[k][m] = 3 sum_n x_t[n][k].
 * x_t[n][k] = t + n + k and W[k][m] = k - m, so loss_t is an integer the
 * worker checks too. */

#define CP_N 4
#define CP_K 3
#define CP_M 5
#define CP_ITERS (ITERS / 3)

static double cp_x(int t, int n, int k) { return t + n + k; }

static jag_status cp_step(void *ctx, jag_tensor *const *in, int n_in, jag_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    jag_tensor *y = NULL, *y2 = NULL, *z = NULL;
    jag_status st = jag_mm(in[0], in[1], &y);
    if (!st) st = jag_mul_scalar(y, 2.0, &y2);
    if (!st) st = jag_add(y2, y, 1.0, &z);
    if (!st) st = jag_sum(z, NULL, 0, false, &out[0]);
    jag_release(z), jag_release(y2), jag_release(y);
    return st;
}

static void *cp_worker(void *arg) {
    worker *w = arg;
    worker_begin(w);
    jag_tensor *W = (jag_tensor *)w->shared;
    double xv[CP_N * CP_K], want = 0;
    for (int n = 0; n < CP_N; n++)
        for (int k = 0; k < CP_K; k++) {
            xv[n * CP_K + k] = cp_x(w->id, n, k);
            for (int m = 0; m < CP_M; m++) want += 3 * cp_x(w->id, n, k) * (k - m);
        }
    int64_t sz[2] = {CP_N, CP_K};
    jag_tensor *x = from_doubles(xv, sz, 2, JAG_FLOAT64);
    jag_compiled *c = NULL;
    jag_status st = jag_compile(cp_step, NULL, 1, JAG_PASSES_ALL, &c);
    if (st) fail(w, "jag_compile", st);
    pthread_barrier_wait(&start_line);
    for (int it = 0; it < CP_ITERS && !st; it++) {
        jag_tensor *in[2] = {x, W}, *loss = NULL;
        double got = NAN;
        st = jag_compiled_call(c, in, 2, &loss, 1);
        if (st) {
            fail(w, "jag_compiled_call", st);
        } else if ((st = jag_item(loss, &got))) {
            fail(w, "jag_item", st);
        } else if (got != want) {
            w->failed = 1;
            snprintf(w->msg, sizeof w->msg, "thread %d, call %d: compiled loss %.17g, expected %.17g", w->id, it, got,
                     want);
            st = JAG_EINTERNAL;
        } else if ((st = jag_backward(loss, NULL, false))) {
            fail(w, "jag_backward through the compiled program", st);
        }
        jag_release(loss);
    }
    jag_compiled_free(c);
    jag_release(x);
    worker_end(w);
    return NULL;
}

static void run_compiled_shared_leaf(void) {
    int64_t sz[2] = {CP_K, CP_M};
    double wv[CP_K * CP_M], want[CP_K * CP_M];
    for (int k = 0; k < CP_K; k++)
        for (int m = 0; m < CP_M; m++) {
            wv[k * CP_M + m] = k - m;
            double per = 0;
            for (int t = 0; t < NT; t++)
                for (int n = 0; n < CP_N; n++) per += 3 * cp_x(t, n, k);
            want[k * CP_M + m] = (double)CP_ITERS * per;
        }
    jag_tensor *W = from_doubles(wv, sz, 2, JAG_FLOAT64), *g = NULL;
    CHECK_OK(jag_set_requires_grad(W, true));
    run_threads(cp_worker, W, NULL);
    CHECK_OK(jag_get_grad(W, &g));
    check_grad_exact(g, want, CP_K * CP_M, CP_ITERS,
                     "float64 W shared by 8 threads' compiled programs, loss = sum(3 (x_t @ W))");
    jag_release(g), jag_release(W);
}

/* ---- forward ops on shared read-only inputs ---------------------------- */

enum { F_MM, F_SOFTMAX, F_SUM0, F_ADD, F_EXP, F_NMUL_ROW, F_NSUM_RAGGED, F_NSOFTMAX, F_NADD_OTHER_OFFSETS, F_COUNT };
static const char *const f_names[F_COUNT] = {
    "mm (256x300 @ 300x64)",  "softmax over dim 1",     "sum over dim 0",
    "add (above the grain)",  "exp (above the grain)",  "nested * (B, 1, D) dense",
    "nested sum over dim 1",  "nested softmax over dim 1", "nested + nested on equal offsets",
};

typedef struct fwd_shared {
    const jag_tensor *A, *B, *N, *row, *nvals;
    const int64_t *offs; /* the offsets' entries, for each thread's own copy */
    int64_t n_offs;
    jag_tensor *ref[F_COUNT]; /* the results computed by one thread alone */
} fwd_shared;

/* The dense result of op k (nested results: their packed values). */
static jag_status fwd_op(const fwd_shared *sh, int k, const jag_tensor *own_offsets, jag_tensor **out) {
    jag_tensor *r = NULL, *n2 = NULL;
    int d1[1] = {1}, d0[1] = {0};
    jag_status st = JAG_OK;
    switch (k) {
    case F_MM: st = jag_mm(sh->A, sh->B, &r); break;
    case F_SOFTMAX: st = jag_softmax(sh->A, 1, &r); break;
    case F_SUM0: st = jag_sum(sh->A, d0, 1, false, &r); break;
    case F_ADD: st = jag_add(sh->A, sh->A, 0.5, &r); break;
    case F_EXP: st = jag_exp(sh->A, &r); break;
    case F_NMUL_ROW: st = jag_mul(sh->N, sh->row, &r); break;
    case F_NSUM_RAGGED: st = jag_sum(sh->N, d1, 1, false, &r); break;
    case F_NSOFTMAX: st = jag_softmax(sh->N, 1, &r); break;
    case F_NADD_OTHER_OFFSETS:
        st = jag_nested_from_jagged(sh->nvals, own_offsets, NULL, &n2);
        if (!st) st = jag_add(sh->N, n2, 1.0, &r);
        jag_release(n2);
        break;
    }
    if (st) return st;
    if (jag_is_nested(r)) {
        jag_tensor *v = NULL;
        st = jag_nested_values(r, &v);
        jag_release(r);
        if (st) return st;
        r = v;
    }
    st = jag_contiguous(r, out);
    jag_release(r);
    return st;
}

/* Same dtype, sizes and bits. */
static bool same_bits(const jag_tensor *a, const jag_tensor *b) {
    if (jag_tensor_dtype(a) != jag_tensor_dtype(b) || !t_same_shape(a, b)) return false;
    size_t bytes = (size_t)jag_numel(a) * jag_dtype_size(jag_tensor_dtype(a));
    return memcmp(jag_data(a), jag_data(b), bytes) == 0;
}

static void *fwd_worker(void *arg) {
    worker *w = arg;
    worker_begin(w);
    const fwd_shared *sh = w->shared;
    jag_tensor *own = int64_vec(sh->offs, sh->n_offs);
    pthread_barrier_wait(&start_line);
    for (int it = 0; it < FWD_ITERS && !w->failed; it++)
        for (int j = 0; j < F_COUNT && !w->failed; j++) {
            int k = (j + w->id) % F_COUNT; /* threads run different ops at one time */
            jag_tensor *r = NULL;
            jag_status st = fwd_op(sh, k, own, &r);
            if (st) {
                fail(w, f_names[k], st);
            } else if (!same_bits(r, sh->ref[k])) {
                w->failed = 1;
                snprintf(w->msg, sizeof w->msg, "thread %d, round %d: %s differs from the single-threaded result",
                         w->id, it, f_names[k]);
            }
            jag_release(r);
            /* the large-block cache emptied while the other threads take
             * and give back blocks (the GEMM and softmax outputs are large) */
            if (j == F_COUNT / 2) jag_empty_cache();
        }
    jag_release(own);
    worker_end(w);
    return NULL;
}

static void run_forward_shared_inputs(void) {
    int64_t sa[2] = {256, 300}, sb[2] = {300, 64}, sv[2] = {1100, 16}, srow[3] = {6, 1, 16};
    /* 6 components, one empty, one long (above the grain with 16 columns) */
    static const int64_t offs[7] = {0, 3, 3, 40, 41, 1060, 1100};
    fwd_shared sh = {0};
    jag_tensor *A = t_rand(sa, 2, JAG_FLOAT32, -2, 2, 11), *B = t_rand(sb, 2, JAG_FLOAT32, -1, 1, 12);
    jag_tensor *nvals = t_rand(sv, 2, JAG_FLOAT32, -3, 3, 13), *row = t_rand(srow, 3, JAG_FLOAT32, -1, 1, 14);
    jag_tensor *offsets = int64_vec(offs, 7), *N = NULL;
    CHECK_OK(jag_nested_from_jagged(nvals, offsets, NULL, &N));
    sh = (fwd_shared){.A = A, .B = B, .N = N, .row = row, .nvals = nvals, .offs = offs, .n_offs = 7};
    jag_tensor *own = int64_vec(offs, 7);
    int made = 0;
    for (int k = 0; k < F_COUNT; k++) {
        jag_status st = fwd_op(&sh, k, own, &sh.ref[k]);
        CHECK_MSG(st == JAG_OK, "%s -> %s: %s", f_names[k], jag_status_str(st), jag_last_error());
        made += st == JAG_OK;
    }
    jag_release(own);
    if (made == F_COUNT) run_threads(fwd_worker, &sh, NULL);
    for (int k = 0; k < F_COUNT; k++) jag_release(sh.ref[k]);
    jag_release(N), jag_release(offsets), jag_release(row), jag_release(nvals), jag_release(B), jag_release(A);
}

/* ---- the tests, each in its own process ------------------------------- */

static void test_backward_shared_leaf_dense(void) {
    TEST_BEGIN();
    in_child(run_backward_shared_leaf_dense);
}

static void test_backward_shared_leaf_mm(void) {
    TEST_BEGIN();
    in_child(run_backward_shared_leaf_mm);
}

static void test_backward_shared_leaf_nested(void) {
    TEST_BEGIN();
    in_child(run_backward_shared_leaf_nested);
}

static void test_forward_shared_inputs(void) {
    TEST_BEGIN();
    in_child(run_forward_shared_inputs);
}

static void test_first_use(void) {
    TEST_BEGIN();
    in_child(run_first_use);
}

static void test_compiled_shared_leaf(void) {
    TEST_BEGIN();
    in_child(run_compiled_shared_leaf);
}

TEST_MAIN(test_first_use, test_backward_shared_leaf_dense, test_backward_shared_leaf_mm,
          test_backward_shared_leaf_nested, test_compiled_shared_leaf, test_forward_shared_inputs)
