/* bench_gemm_libs.c — float32 GEMM libraries side by side over the shapes
 * ragged batches produce: OpenBLAS (what jag links), BLIS (OpenMP build),
 * oneDNN f32 (dnnl_sgemm and the matmul primitive), MKL (libmkl_rt, GNU
 * OpenMP layer) and jag itself (jag_mm / jag_linear through libjag, output
 * allocated per call as users do). One process = one round: for every shape
 * each library runs timed samples (loops of `inner` calls),
 * libraries alternated in a rotating order: SUB sub-samples of >= ~4 ms
 * per library, printed as their best and median. Torch's side is
 * bench_gemm_libs.py beside it; run_table.sh runs the rounds and
 * table.py makes the table (README.md beside it says how).
 *
 * Shapes: C (M, N) = A (M, K) @ B, float32, row-major, where
 *   mode "nn": B is (K, N) row-major                (torch.mm / jag_mm)
 *   mode "nt": B = W^T with W (N, K) row-major      (F.linear / jag_linear)
 *
 * Accuracy check (first call of each library on each shape): 64 sampled
 * entries of C against a double-precision dot product, bound
 *   |c - ref| <= 2 * K * 2^-24 * sum_p |a_ip| |b_pj| + 1e-30
 * (the standard float32 summation bound with a factor 2 of slack for
 * blocked/FMA orders); a miss is printed as "#BAD" and fails the run.
 *
 * BLIS and MKL export the same cblas_sgemm symbol as OpenBLAS, so they are
 * dlopen'd with RTLD_LOCAL | RTLD_DEEPBIND and called through dlsym; either
 * one that cannot be loaded is left out of the rounds (a "#skip" line).
 *
 * Build: see README.md beside this file (by hand, not a CMake target: it
 * loads BLIS and MKL when they are there). MKL's library is $JAG_MKL_SO
 * (run_table.sh sets it), BLIS's the Debian OpenMP variant's.
 * Run: bench_gemm_libs ROUND MODE(nn|nt|both) [shapes: M1,M2,..  K:N,K:N,..]
 */
#include <jag.h>

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLIS_SO "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4"
#define MKL_SO_DEFAULT "libmkl_rt.so.3"

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);

static sgemm_fn blis_sgemm, mkl_sgemm;
static dnnl_engine_t engine;
static dnnl_stream_t stream;

enum { L_JAG, L_OPENBLAS, L_BLIS, L_DNNL_SGEMM, L_DNNL_MATMUL, L_MKL, L_COUNT };
static const char *lib_name[L_COUNT] = {"jag", "openblas", "blis", "dnnl_sgemm", "dnnl_matmul", "mkl"};

typedef struct shape {
    int nt; /* B transposed (linear) */
    int64_t m, k, n;
    float *a, *b, *c; /* b is (k, n) for nn, (n, k) for nt */
    jag_tensor *ta, *tb;
} shape;

/* sub-samples per library per shape in one round */
#define SUB 5

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* oneDNN f32 matmul primitive, made per call (oneDNN's primitive cache makes
 * the second creation of a shape cheap), as src/cpu/gemm_dnnl.c does. */
static int dnnl_matmul_f32(const shape *s) {
    dnnl_memory_desc_t da, db, dc;
    dnnl_dims_t dims_a = {s->m, s->k}, dims_b = {s->k, s->n}, dims_c = {s->m, s->n};
    dnnl_dims_t str_b = {s->nt ? 1 : s->n, s->nt ? s->k : 1};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&da, 2, dims_a, dnnl_f32, dnnl_ab);
    if (!st) st = dnnl_memory_desc_init_by_strides(&db, 2, dims_b, dnnl_f32, str_b);
    if (!st) st = dnnl_memory_desc_init_by_tag(&dc, 2, dims_c, dnnl_f32, dnnl_ab);
    if (!st) st = dnnl_matmul_desc_init(&md, &da, &db, NULL, &dc);
    if (!st) st = dnnl_primitive_desc_create(&pd, &md, NULL, engine, NULL);
    if (!st) st = dnnl_primitive_create(&prim, pd);
    if (!st) st = dnnl_memory_create(&ma, &da, engine, s->a);
    if (!st) st = dnnl_memory_create(&mb, &db, engine, s->b);
    if (!st) st = dnnl_memory_create(&mc, &dc, engine, s->c);
    if (!st) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        st = dnnl_primitive_execute(prim, stream, 3, args);
        if (!st) st = dnnl_stream_wait(stream);
    }
    if (mc) dnnl_memory_destroy(mc);
    if (mb) dnnl_memory_destroy(mb);
    if (ma) dnnl_memory_destroy(ma);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return st == dnnl_success ? 0 : -1;
}

/* one call of library `lib` on shape s; writes s->c (jag: its own output,
 * copied to s->c only when `keep`) */
static int call(int lib, shape *s, int keep) {
    int m = (int)s->m, k = (int)s->k, n = (int)s->n;
    int tb = s->nt ? CblasTrans : CblasNoTrans, ldb = s->nt ? k : n;
    switch (lib) {
    case L_JAG: {
        jag_tensor *out = NULL;
        jag_status st = s->nt ? jag_linear(s->ta, s->tb, NULL, &out) : jag_mm(s->ta, s->tb, &out);
        if (st) {
            fprintf(stderr, "jag: %s\n", jag_last_error());
            return -1;
        }
        if (keep) memcpy(s->c, jag_data(out), (size_t)(m * n) * sizeof(float));
        jag_release(out);
        return 0;
    }
    case L_OPENBLAS:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, (enum CBLAS_TRANSPOSE)tb, m, n, k, 1.0f, s->a, k, s->b, ldb, 0.0f,
                    s->c, n);
        return 0;
    case L_BLIS:
        blis_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, s->a, k, s->b, ldb, 0.0f, s->c, n);
        return 0;
    case L_MKL:
        mkl_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, s->a, k, s->b, ldb, 0.0f, s->c, n);
        return 0;
    case L_DNNL_SGEMM: /* row-major, like cblas RowMajor */
        return dnnl_sgemm('N', s->nt ? 'T' : 'N', m, n, k, 1.0f, s->a, k, s->b, ldb, 0.0f, s->c, n) ? -1 : 0;
    case L_DNNL_MATMUL:
        return dnnl_matmul_f32(s);
    }
    return -1;
}

/* whether library `lib` was loaded (BLIS and MKL are optional) */
static int present(int lib) { return (lib != L_BLIS || blis_sgemm) && (lib != L_MKL || mkl_sgemm); }

static float bval(const shape *s, int64_t p, int64_t j) { return s->nt ? s->b[j * s->k + p] : s->b[p * s->n + j]; }

/* sampled entries of s->c against double sums, bound in the header */
static int check(int lib, const shape *s) {
    memset(s->c, 0xff, (size_t)(s->m * s->n) * sizeof(float)); /* NaN: a library that writes nothing fails */
    if (call(lib, (shape *)s, 1)) return -1;
    unsigned x = 12345u;
    for (int t = 0; t < 64; t++) {
        x = x * 1664525u + 1013904223u;
        int64_t i = (int64_t)(x >> 8) % s->m;
        x = x * 1664525u + 1013904223u;
        int64_t j = (int64_t)(x >> 8) % s->n;
        double ref = 0, mag = 0;
        for (int64_t p = 0; p < s->k; p++) {
            double v = (double)s->a[i * s->k + p] * (double)bval(s, p, j);
            ref += v, mag += fabs(v);
        }
        double got = s->c[i * s->n + j], bound = 2.0 * (double)s->k * ldexp(1.0, -24) * mag + 1e-30;
        if (!(fabs(got - ref) <= bound)) {
            printf("#BAD %s %s M=%lld K=%lld N=%lld c[%lld,%lld]=%g ref=%g bound=%g\n", lib_name[lib],
                   s->nt ? "nt" : "nn", (long long)s->m, (long long)s->k, (long long)s->n, (long long)i, (long long)j,
                   got, ref, bound);
            return -1;
        }
    }
    return 0;
}

static int parse_list(const char *txt, int64_t *v, int max, char sep) {
    int c = 0;
    const char *p = txt;
    while (*p && c < max) {
        char *end;
        v[c++] = strtoll(p, &end, 10);
        if (*end == sep || *end == ',') end++;
        p = end;
    }
    return c;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ROUND nn|nt|both [M,M,..] [K:N,K:N,..]\n", argv[0]);
        return 2;
    }
    int round = atoi(argv[1]);
    const char *modes = argv[2];
    int64_t ms[32] = {1, 7, 26, 64, 128, 512, 2048}, kn[64] = {64,   64,   256,  256,  256,  1024, 1024,
                                                                 256,  1024, 1024, 4096, 1024, 1024, 4096};
    int nm = 7, nkn = 7;
    if (argc > 3) nm = parse_list(argv[3], ms, 32, ',');
    if (argc > 4) nkn = parse_list(argv[4], kn, 64, ':') / 2;
    double min_sample = getenv("GEMM_MIN_SAMPLE") ? atof(getenv("GEMM_MIN_SAMPLE")) : 0.004;

    /* MKL on libgomp, 2 threads (env set by the driver too) */
    setenv("MKL_THREADING_LAYER", "GNU", 0);
    /* BLIS and MKL are optional: a library that cannot be loaded is left
     * out of the round (a "#skip" line says which), so that the others can
     * be compared on a machine without it */
    void *hb = dlopen(BLIS_SO, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!hb) printf("#skip blis: %s\n", dlerror());
    const char *mkl_so = getenv("JAG_MKL_SO") ? getenv("JAG_MKL_SO") : MKL_SO_DEFAULT;
    void *hm = dlopen(mkl_so, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!hm) printf("#skip mkl: %s\n", dlerror());
    blis_sgemm = hb ? (sgemm_fn)(uintptr_t)dlsym(hb, "cblas_sgemm") : NULL;
    mkl_sgemm = hm ? (sgemm_fn)(uintptr_t)dlsym(hm, "cblas_sgemm") : NULL;
    void (*blis_nt)(long) = hb ? (void (*)(long))(uintptr_t)dlsym(hb, "bli_thread_set_num_threads") : NULL;
    void (*mkl_nt)(int) = hm ? (void (*)(int))(uintptr_t)dlsym(hm, "MKL_Set_Num_Threads") : NULL;
    void (*mkl_ver)(char *, int) = hm ? (void (*)(char *, int))(uintptr_t)dlsym(hm, "MKL_Get_Version_String") : NULL;
    if ((hb && (!blis_sgemm || !blis_nt)) || (hm && (!mkl_sgemm || !mkl_nt))) {
        fprintf(stderr, "dlsym failed\n");
        return 1;
    }
    int threads = getenv("OMP_NUM_THREADS") ? atoi(getenv("OMP_NUM_THREADS")) : 2;
    if (blis_nt) blis_nt(threads);
    if (mkl_nt) mkl_nt(threads);
    openblas_set_num_threads(threads);
    jag_set_num_threads(threads);
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) || dnnl_stream_create(&stream, engine, dnnl_stream_default_flags)) {
        fprintf(stderr, "dnnl engine failed\n");
        return 1;
    }
    if (round == 0 && mkl_ver) {
        char v[256] = {0};
        mkl_ver(v, (int)sizeof v - 1);
        printf("#mkl %s\n#openblas %s\n", v, openblas_get_config());
    }
    printf("#round,lib,mode,M,K,N,best_sec_per_call,inner,median_sec_per_call\n");
    int bad = 0, rot = round;
    for (int mode = 0; mode < 2; mode++) {
        if (strcmp(modes, "both") && strcmp(modes, mode ? "nt" : "nn")) continue;
        for (int ik = 0; ik < nkn; ik++)
            for (int im = 0; im < nm; im++) {
                shape s = {.nt = mode, .m = ms[im], .k = kn[2 * ik], .n = kn[2 * ik + 1]};
                int64_t bs[2] = {s.nt ? s.n : s.k, s.nt ? s.k : s.n}, as[2] = {s.m, s.k};
                s.a = malloc((size_t)(s.m * s.k) * sizeof(float));
                s.b = malloc((size_t)(s.k * s.n) * sizeof(float));
                s.c = malloc((size_t)(s.m * s.n) * sizeof(float));
                if (!s.a || !s.b || !s.c) return 1;
                unsigned x = 7u + (unsigned)ik * 31u + (unsigned)im;
                for (int64_t i = 0; i < s.m * s.k; i++)
                    x = x * 1664525u + 1013904223u, s.a[i] = (float)((double)(x >> 8) / 8388608.0 - 1.0);
                for (int64_t i = 0; i < s.k * s.n; i++)
                    x = x * 1664525u + 1013904223u, s.b[i] = (float)((double)(x >> 8) / 8388608.0 - 1.0);
                /* jag's tensors borrow the same memory: the same data */
                if (jag_from_blob(s.a, as, NULL, 2, JAG_FLOAT32, NULL, NULL, &s.ta) ||
                    jag_from_blob(s.b, bs, NULL, 2, JAG_FLOAT32, NULL, NULL, &s.tb)) {
                    fprintf(stderr, "%s\n", jag_last_error());
                    return 1;
                }
                /* warm-up + check, and the inner count from OpenBLAS's time */
                for (int l = 0; l < L_COUNT; l++)
                    if (present(l) && check(l, &s)) bad = 1;
                double t0 = now();
                int reps = 0;
                while (now() - t0 < 0.005 || reps < 1) call(L_OPENBLAS, &s, 0), reps++;
                double per = (now() - t0) / reps;
                long inner = (long)(min_sample / per) + 1;
                /* S sub-samples per library, libraries alternated inside
                 * each, the order rotating per shape */
                double t[L_COUNT][SUB];
                int base = rot++;
                for (int sub = 0; sub < SUB; sub++)
                    for (int q = 0; q < L_COUNT; q++) {
                        int l = (q + base + sub) % L_COUNT;
                        if (!present(l)) continue;
                        call(l, &s, 0);
                        double t1 = now();
                        for (long r = 0; r < inner; r++) call(l, &s, 0);
                        t[l][sub] = (now() - t1) / (double)inner;
                    }
                for (int l = 0; l < L_COUNT; l++) {
                    if (!present(l)) continue;
                    qsort(t[l], SUB, sizeof(double), cmp_double);
                    printf("%d,%s,%s,%lld,%lld,%lld,%.9g,%ld,%.9g\n", round, lib_name[l], mode ? "nt" : "nn",
                           (long long)s.m, (long long)s.k, (long long)s.n, t[l][0], inner, t[l][SUB / 2]);
                }
                fflush(stdout);
                jag_release(s.ta);
                jag_release(s.tb);
                free(s.a);
                free(s.b);
                free(s.c);
            }
    }
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return bad;
}
