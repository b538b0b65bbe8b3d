/* embedding_bag.c — sums, means or maxima of bags of rows of a table:
 * weight (V, D), indices (N) int32/int64 in [0, V), offsets (B+1) int64
 * (bag b is indices[offsets[b] : offsets[b+1]], offsets[0] == 0 and
 * offsets[B] == N), optional per-sample weights (N) scaling each row (sum
 * mode). out (B, D); an empty bag gives zeros. Sums in double, rounded
 * once to the output (float32 tables without per-sample weights: rows
 * added in pairs in float32 first, see block_sums_f32). The backward
 * touches only the rows the bags use. The typed kernels and the naive
 * reference (the op's META function and boxed adapters are
 * src/dispatch/embedding_bag_op.c). */
#include "kernels.h"

#include <math.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* The arguments every kernel here reads. */
typedef struct bag_args {
    const jag_tensor *w, *ix, *off, *psw;
    int64_t mode;
} bag_args;

static int64_t load_index(const jag_tensor *t, int64_t i) {
    const char *p = (const char *)jag__ptr(t) + i * t->strides[0] * (int64_t)jag_dtype_size(t->dtype);
    return t->dtype == JAG_INT64 ? *(const int64_t *)p : *(const int32_t *)p;
}

/* The indices and offsets as int64 arrays, checked: offsets start at 0, do
 * not decrease and end at N; indices in [0, V). */
static jag_status read_bags(const char *op, const bag_args *a, int64_t **ix, int64_t **off) {
    int64_t N = a->ix->sizes[0], B1 = a->off->sizes[0], V = a->w->sizes[0];
    *ix = malloc((size_t)(N + 1) * sizeof **ix), *off = malloc((size_t)B1 * sizeof **off);
    if (!*ix || !*off) {
        free(*ix), free(*off);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    jag_status st = JAG_OK;
    for (int64_t b = 0; b < B1 && !st; b++) {
        int64_t v = (*off)[b] = load_index(a->off, b);
        if ((b == 0 && v != 0) || (b > 0 && v < (*off)[b - 1]) || (b == B1 - 1 && v != N) || v > N)
            st = jag__error(JAG_EINVAL, "%s: argument 'offsets' has %lld at position %lld, expected offsets[0] == 0, non-decreasing, offsets[B] == %lld (the number of indices)",
                            op, (long long)v, (long long)b, (long long)N);
    }
    for (int64_t i = 0; i < N && !st; i++) {
        int64_t v = (*ix)[i] = load_index(a->ix, i);
        if (v < 0 || v >= V)
            st = jag__error(JAG_ERANGE, "%s: argument 'indices' has %lld at position %lld, expected 0 <= value < %lld (the rows of 'weight')",
                            op, (long long)v, (long long)i, (long long)V);
    }
    if (st) free(*ix), free(*off);
    return st;
}

/* t as contiguous memory: t itself (retained) or a contiguous copy; NULL
 * stays NULL. */
static jag_status contiguous(const char *op, const jag_tensor *t, jag_tensor **out) {
    if (!t || jag_is_contiguous(t)) {
        *out = t ? jag_retain((jag_tensor *)t) : NULL;
        return JAG_OK;
    }
    if (!(*out = jag__tensor_new(op, t->sizes, t->ndim, t->dtype, false, false))) return jag_last_status();
    jag__copy_into(*out, t);
    return JAG_OK;
}

/* w (V, D) row-major, ix (N), y (D): the sums (times inv) of the bag's
 * rows ix[j0..j1) of w over its first columns, in blocks of BLOCK_COLS,
 * into y; returns how many columns were done (the rest go through
 * bag_row_*). With AVX-512, a block's BLOCK_COLS double sums stay in
 * registers and each row is read once per block; two rows are added in
 * float32 first (one rounding, at most 2^-24 of the pair's magnitude),
 * halving the conversions and adds in double. */
#define BLOCK_COLS 128
/* The rows of the pair PF_ROWS ahead are requested (the block's columns of
 * each) while a pair is summed: the rows are random rows of the table, and
 * a row's first miss is not one the hardware prefetchers foresee. B = 64
 * bags of long-tailed lengths (4218 rows), D = 512, vocab 10000 (the
 * torch comparison's case): 105-114 -> 96-100 us; 3 and 10 rows ahead:
 * 100-106 us. */
#define PF_ROWS 6
#if defined(__AVX512F__)
static int64_t block_sums_f32(const float *w, const int64_t *ix, int64_t j0, int64_t j1, int64_t D, double inv,
                              float *y) {
    enum { NV = BLOCK_COLS / 16 }; /* float vectors per block */
    int64_t c0 = 0;
    for (; c0 + BLOCK_COLS <= D; c0 += BLOCK_COLS) {
        __m512d acc[2 * NV];
        for (int k = 0; k < 2 * NV; k++) acc[k] = _mm512_setzero_pd();
        int64_t j = j0;
        for (; j < j1; j += 2) {
            const float *r0 = w + ix[j] * D + c0, *r1 = j + 1 < j1 ? w + ix[j + 1] * D + c0 : NULL;
            for (int64_t q = j + PF_ROWS; q < j + PF_ROWS + 2 && q < j1; q++) /* rows a few pairs ahead */
                for (int k = 0; k < BLOCK_COLS * 4; k += 64) _mm_prefetch((const char *)(w + ix[q] * D + c0) + k, _MM_HINT_T0);
            for (int k = 0; k < NV; k++) {
                __m512 p = _mm512_loadu_ps(r0 + 16 * k);
                if (r1) p = _mm512_add_ps(p, _mm512_loadu_ps(r1 + 16 * k));
                __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1));
                acc[2 * k] = _mm512_add_pd(acc[2 * k], _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
                acc[2 * k + 1] = _mm512_add_pd(acc[2 * k + 1], _mm512_cvtps_pd(hi));
            }
        }
        __m512d vinv = _mm512_set1_pd(inv);
        for (int k = 0; k < NV; k++) {
            __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(acc[2 * k], vinv));
            __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(acc[2 * k + 1], vinv));
            _mm256_storeu_ps(y + c0 + 16 * k, lo);
            _mm256_storeu_ps(y + c0 + 16 * k + 8, hi);
        }
    }
    return c0;
}
#elif defined(__AVX2__)
/* The same on AVX2: blocks of 32 columns (8 vectors of 4 double sums in
 * registers, of the 16), two rows added in float32 first, as AVX-512's.
 * 32 bags of 10-129 rows (3544 in all), vocab 10000, mean, on a Zen 3
 * pair, best of 300, the builds before and after in turn (bag_row_f32's
 * sums in memory before): D = 256 129-181 -> 83-120 us, D = 512 182 ->
 * 120 us. */
#define AV2_BLOCK_COLS 32
static int64_t block_sums_f32(const float *w, const int64_t *ix, int64_t j0, int64_t j1, int64_t D, double inv,
                              float *y) {
    int64_t c0 = 0;
    for (; c0 + AV2_BLOCK_COLS <= D; c0 += AV2_BLOCK_COLS) {
        __m256d acc[8];
        for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_pd();
        for (int64_t j = j0; j < j1; j += 2) {
            const float *r0 = w + ix[j] * D + c0, *r1 = j + 1 < j1 ? w + ix[j + 1] * D + c0 : NULL;
            for (int64_t q = j + PF_ROWS; q < j + PF_ROWS + 2 && q < j1; q++) /* rows a few pairs ahead */
                for (int k = 0; k < AV2_BLOCK_COLS * 4; k += 64) _mm_prefetch((const char *)(w + ix[q] * D + c0) + k, _MM_HINT_T0);
            for (int k = 0; k < 4; k++) {
                __m256 p = _mm256_loadu_ps(r0 + 8 * k);
                if (r1) p = _mm256_add_ps(p, _mm256_loadu_ps(r1 + 8 * k));
                acc[2 * k] = _mm256_add_pd(acc[2 * k], _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
                acc[2 * k + 1] = _mm256_add_pd(acc[2 * k + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
            }
        }
        __m256d vinv = _mm256_set1_pd(inv);
        for (int k = 0; k < 8; k++) _mm_storeu_ps(y + c0 + 4 * k, _mm256_cvtpd_ps(_mm256_mul_pd(acc[k], vinv)));
    }
    return c0;
}
#else
static int64_t block_sums_f32(const float *w, const int64_t *ix, int64_t j0, int64_t j1, int64_t D, double inv,
                              float *y) {
    (void)w, (void)ix, (void)j0, (void)j1, (void)D, (void)inv, (void)y;
    return 0;
}
#endif
static int64_t no_block_sums(const double *w, const int64_t *ix, int64_t j0, int64_t j1, int64_t D, double inv,
                             double *y) {
    (void)w, (void)ix, (void)j0, (void)j1, (void)D, (void)inv, (void)y;
    return 0;
}

/* One bag: rows ix[j0..j1) of w (V, D) -> y (D). Max keeps the first NaN. */
#define DEF_BAG(SUF, T, BLOCK_SUMS)                                             \
    /* acc (nc) += s * r (nc): one row into the bag's accumulators */          \
    static inline void bag_row_##SUF(double *restrict acc, const T *restrict r, double s, int64_t nc) { \
        if (s == 1.0)                                                          \
            for (int64_t c = 0; c < nc; c++) acc[c] += (double)r[c];           \
        else                                                                   \
            for (int64_t c = 0; c < nc; c++) acc[c] += (double)r[c] * s;       \
    }                                                                          \
    /* y (nc) = max(y, r), the first NaN kept */                              \
    static inline void bag_max_row_##SUF(T *restrict y, const T *restrict r, int64_t nc) { \
        for (int64_t c = 0; c < nc; c++) y[c] = y[c] != y[c] || !(r[c] > y[c] || r[c] != r[c]) ? y[c] : r[c]; \
    }                                                                          \
    static void bag_##SUF(const T *w, const int64_t *ix, const T *psw, int64_t j0, int64_t j1, int64_t D, int64_t mode, \
                          T *y) {                                              \
        if (j0 == j1) {                                                        \
            for (int64_t c = 0; c < D; c++) y[c] = 0;                          \
            return;                                                            \
        }                                                                      \
        if (mode == JAG_BAG_MAX) {                                             \
            const T *r = w + ix[j0] * D;                                       \
            for (int64_t c = 0; c < D; c++) y[c] = r[c];                       \
            for (int64_t j = j0 + 1; j < j1; j++) bag_max_row_##SUF(y, w + ix[j] * D, D); \
            return;                                                            \
        }                                                                      \
        double inv = mode == JAG_BAG_MEAN ? 1.0 / (double)(j1 - j0) : 1.0;     \
        int64_t c0 = 0;                                                        \
        if (!psw) c0 = BLOCK_SUMS(w, ix, j0, j1, D, inv, y);                   \
        double acc[256];                                                       \
        for (; c0 < D; c0 += 256) {                                            \
            int64_t nc = D - c0 < 256 ? D - c0 : 256;                          \
            for (int64_t c = 0; c < nc; c++) acc[c] = 0;                       \
            for (int64_t j = j0; j < j1; j++)                                  \
                bag_row_##SUF(acc, w + ix[j] * D + c0, psw ? (double)psw[j] : 1.0, nc); \
            for (int64_t c = 0; c < nc; c++) y[c0 + c] = (T)(acc[c] * inv);    \
        }                                                                      \
    }
DEF_BAG(f32, float, block_sums_f32)
DEF_BAG(f64, double, no_block_sums)
#undef DEF_BAG


// weight (V, D), indices (N), offsets (B+1), per_sample_weights (N) or none -> out (B, D) contiguous
jag_status jag__embedding_bag_kernel(const char *op, const jag_tensor *weight, const jag_tensor *indices,
                                     const jag_tensor *offsets, int mode, const jag_tensor *per_sample_weights,
                                     jag_tensor *out) {
    bag_args a = {weight, indices, offsets, per_sample_weights, mode};
    int64_t *ix = NULL, *off = NULL;
    jag_status st;
    if ((st = read_bags(op, &a, &ix, &off))) return st;
    jag_tensor *w = NULL, *psw = NULL;
    st = contiguous(op, a.w, &w);
    if (!st) st = contiguous(op, a.psw, &psw);
    if (!st) {
        int64_t B = a.off->sizes[0] - 1, D = a.w->sizes[1];
        bool f64 = w->dtype == JAG_FLOAT64;
        const void *wp = jag__ptr(w), *pp = psw ? jag__ptr(psw) : NULL;
        char *y = jag__ptr(out);
        /* a gathered sum: the bags' rows (ix x D elements) read, reduced into B x D (REDUCE) */
        JAG_PARALLEL_IF(a.ix->sizes[0] * D >= JAG_GRAIN_REDUCE, "omp parallel for schedule(dynamic, 1)",
            for (int64_t b = 0; b < B; b++) {
                if (f64) bag_f64(wp, ix, pp, off[b], off[b + 1], D, a.mode, (double *)y + b * D);
                else bag_f32(wp, ix, pp, off[b], off[b + 1], D, a.mode, (float *)y + b * D);
            });
    }
    jag_release(w), jag_release(psw);
    free(ix), free(off);
    return st;
}

/* The reference: element by element in double through the tensors' strides. */
jag_status jag__embedding_bag_reference(const char *op, const jag_tensor *weight, const jag_tensor *indices,
                                        const jag_tensor *offsets, int mode, const jag_tensor *per_sample_weights,
                                        jag_tensor *out) {
    bag_args a = {weight, indices, offsets, per_sample_weights, mode};
    int64_t *ix = NULL, *off = NULL;
    jag_status st;
    if ((st = read_bags(op, &a, &ix, &off))) return st;
    int64_t B = a.off->sizes[0] - 1, D = a.w->sizes[1];
    size_t es = jag_dtype_size(a.w->dtype);
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < D; c++) {
            double acc = a.mode == JAG_BAG_MAX ? -INFINITY : 0;
            for (int64_t j = off[b]; j < off[b + 1]; j++) {
                double v = jag__load_as_double((const char *)jag__ptr(a.w) + (ix[j] * a.w->strides[0] + c * a.w->strides[1]) * (int64_t)es, a.w->dtype);
                if (a.psw) v *= jag__load_as_double((const char *)jag__ptr(a.psw) + j * a.psw->strides[0] * (int64_t)es, a.w->dtype);
                if (a.mode == JAG_BAG_MAX) acc = isnan(acc) ? acc : isnan(v) || v > acc ? v : acc;
                else acc += v;
            }
            if (off[b] == off[b + 1]) acc = 0;
            else if (a.mode == JAG_BAG_MEAN) acc /= (double)(off[b + 1] - off[b]);
            jag__store_from_double((char *)jag__ptr(out) + (b * out->strides[0] + c * out->strides[1]) * (int64_t)es, out->dtype, acc);
        }
    free(ix), free(off);
    return JAG_OK;
}

// the backward: g (B, D), y the forward's output (B, D) -> grad_weight (V, D) zeros with the used rows accumulated
// (sum: g * psw, mean: g / count, max: g to the first row that reached the max), grad_psw (N): <weight[ix[j]], g[b]>
jag_status jag__embedding_bag_backward_kernel(const char *op, const jag_tensor *weight, const jag_tensor *indices,
                                              const jag_tensor *offsets, int mode,
                                              const jag_tensor *per_sample_weights, const jag_tensor *y,
                                              const jag_tensor *g, jag_tensor *grad_weight, jag_tensor *grad_psw) {
    bag_args a = {weight, indices, offsets, per_sample_weights, mode};
    int64_t *ix = NULL, *off = NULL;
    jag_status st;
    if ((st = read_bags(op, &a, &ix, &off))) return st;
    jag_tensor *w = NULL, *psw = NULL, *gc = NULL, *yc = NULL, *gw = grad_weight, *gp = grad_psw;
    st = contiguous(op, a.w, &w);
    if (!st) st = contiguous(op, a.psw, &psw);
    if (!st) st = contiguous(op, g, &gc);
    if (!st) st = contiguous(op, y, &yc);
    int64_t D = a.w->sizes[1], B = a.off->sizes[0] - 1;
    if (!st) {
        bool f64 = w->dtype == JAG_FLOAT64;
#define LD(p, i) (f64 ? ((const double *)(p))[i] : (double)((const float *)(p))[i])
#define ST(p, i, v) (f64 ? (void)(((double *)(p))[i] = (v)) : (void)(((float *)(p))[i] = (float)(v)))
        const void *wp = jag__ptr(w), *pp = psw ? jag__ptr(psw) : NULL, *gpp = jag__ptr(gc), *yp = jag__ptr(yc);
        /* serial over bags: rows repeat across bags, and only used rows are touched */
        for (int64_t b = 0; gw && b < B; b++) {
            int64_t n = off[b + 1] - off[b];
            if (n == 0) continue;
            char *o = jag__ptr(gw);
            for (int64_t c = 0; c < D; c++) {
                double gv = LD(gpp, b * D + c);
                if (a.mode == JAG_BAG_MAX) { /* the first row holding the max */
                    double m = LD(yp, b * D + c);
                    for (int64_t j = off[b]; j < off[b + 1]; j++) {
                        double v = LD(wp, ix[j] * D + c);
                        if (v == m || (isnan(v) && isnan(m))) {
                            ST(o, ix[j] * D + c, LD(o, ix[j] * D + c) + gv);
                            break;
                        }
                    }
                    continue;
                }
                for (int64_t j = off[b]; j < off[b + 1]; j++) {
                    double s = a.mode == JAG_BAG_MEAN ? 1.0 / (double)n : pp ? LD(pp, j) : 1.0;
                    ST(o, ix[j] * D + c, LD(o, ix[j] * D + c) + gv * s);
                }
            }
        }
        for (int64_t b = 0; gp && b < B; b++)
            for (int64_t j = off[b]; j < off[b + 1]; j++) {
                double dot = 0;
                for (int64_t c = 0; c < D; c++) dot += LD(wp, ix[j] * D + c) * LD(gpp, b * D + c);
                ST(jag__ptr(gp), j, dot);
            }
#undef LD
#undef ST
    }
    jag_release(w), jag_release(psw), jag_release(gc), jag_release(yc);
    free(ix), free(off);
    return st;
}
