/* ab.c — jag_mm / jag_linear of two libjag builds (A = before, B = after a
 * change to gemm.c) in one process, alternated sample by sample; prints
 * best and median seconds of each and the ratio A/B (> 1: B faster).
 * Build: cc -O2 -std=c11 -Wall -Wextra -Iinclude bench/gemm_libs/ab.c -o ab -ldl -lm
 * (each libjag is dlopen'd with RTLD_LOCAL | RTLD_DEEPBIND, so the two do
 * not share symbols). Usage: ab A.so B.so nn|nt M,M,.. K:N,K:N,..  */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <jag.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
struct lib {
    jag_status (*mm)(const jag_tensor *, const jag_tensor *, jag_tensor **);
    jag_status (*lin)(const jag_tensor *, const jag_tensor *, const jag_tensor *, jag_tensor **);
    jag_status (*blob)(void *, const int64_t *, const int64_t *, int, jag_dtype, void (*)(void *, void *), void *,
                       jag_tensor **);
    jag_status (*rel)(jag_tensor *);
    void *(*data)(const jag_tensor *);
};
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}
#define SUB 9
int main(int argc, char **argv) {
    if (argc < 6) return 2;
    struct lib L[2];
    for (int i = 0; i < 2; i++) {
        void *h = dlopen(argv[1 + i], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        *(void **)&L[i].mm = dlsym(h, "jag_mm");
        *(void **)&L[i].lin = dlsym(h, "jag_linear");
        *(void **)&L[i].blob = dlsym(h, "jag_from_blob");
        *(void **)&L[i].rel = dlsym(h, "jag_release");
        *(void **)&L[i].data = dlsym(h, "jag_data");
        void (*nt)(int);
        *(void **)&nt = dlsym(h, "jag_set_num_threads");
        nt(2);
    }
    int nt = !strcmp(argv[3], "nt");
    long ms[32], kn[64];
    int nm = 0, nkn = 0;
    for (char *p = argv[4]; *p;) { ms[nm++] = strtol(p, &p, 10); if (*p) p++; }
    for (char *p = argv[5]; *p;) { kn[nkn++] = strtol(p, &p, 10); if (*p) p++; }
    printf("mode,M,K,N,A_best_s,B_best_s,A_med_s,B_med_s,A/B_best,A/B_med,maxdiff\n");
    for (int ik = 0; ik < nkn / 2; ik++)
        for (int im = 0; im < nm; im++) {
            int64_t m = ms[im], k = kn[2 * ik], n = kn[2 * ik + 1];
            float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
            for (int64_t i = 0; i < m * k; i++) a[i] = (float)rand() / RAND_MAX - 0.5f;
            for (int64_t i = 0; i < k * n; i++) b[i] = (float)rand() / RAND_MAX - 0.5f;
            int64_t as[2] = {m, k}, bs[2] = {nt ? n : k, nt ? k : n};
            jag_tensor *ta[2], *tb[2], *o[2];
            for (int i = 0; i < 2; i++) {
                L[i].blob(a, as, NULL, 2, JAG_FLOAT32, NULL, NULL, &ta[i]);
                L[i].blob(b, bs, NULL, 2, JAG_FLOAT32, NULL, NULL, &tb[i]);
                if (nt ? L[i].lin(ta[i], tb[i], NULL, &o[i]) : L[i].mm(ta[i], tb[i], &o[i])) return 1;
            }
            double md = 0;
            const float *c0 = L[0].data(o[0]), *c1 = L[1].data(o[1]);
            for (int64_t i = 0; i < m * n; i++) {
                double d = c0[i] - c1[i];
                if (d < 0) d = -d;
                if (d > md) md = d;
            }
            L[0].rel(o[0]), L[1].rel(o[1]);
            double t0 = now();
            int reps = 0;
            while (now() - t0 < 0.004 || reps < 1) {
                if (nt) L[0].lin(ta[0], tb[0], NULL, &o[0]);
                else L[0].mm(ta[0], tb[0], &o[0]);
                L[0].rel(o[0]);
                reps++;
            }
            long inner = (long)(0.004 / ((now() - t0) / reps)) + 1;
            double t[2][SUB];
            for (int s = 0; s < SUB; s++)
                for (int q = 0; q < 2; q++) {
                    int i = (q + s) % 2;
                    double t1 = now();
                    for (long r = 0; r < inner; r++) {
                        if (nt) L[i].lin(ta[i], tb[i], NULL, &o[i]);
                        else L[i].mm(ta[i], tb[i], &o[i]);
                        L[i].rel(o[i]);
                    }
                    t[i][s] = (now() - t1) / inner;
                }
            qsort(t[0], SUB, sizeof(double), cmp);
            qsort(t[1], SUB, sizeof(double), cmp);
            printf("%s,%lld,%lld,%lld,%.3g,%.3g,%.3g,%.3g,%.2f,%.2f,%.2g\n", nt ? "nt" : "nn", (long long)m,
                   (long long)k, (long long)n, t[0][0], t[1][0], t[0][SUB / 2], t[1][SUB / 2], t[0][0] / t[1][0],
                   t[0][SUB / 2] / t[1][SUB / 2], md);
            fflush(stdout);
            for (int i = 0; i < 2; i++) L[i].rel(ta[i]), L[i].rel(tb[i]);
            free(a), free(b);
        }
    return 0;
}
