/* attention.c — scaled dot-product attention over variable-length
 * sequences, forward and backward, never building the (Lq, Lk) matrix.
 *
 * Layout: q (Rq, Hq, Dh), k and v (Rk, Hk, Dh) as rows of packed sequences
 * (any strides): sequence b's queries are rows [qo[b], qo[b] + ql[b]) and its
 * keys rows [ko[b], ko[b] + kl[b]). Hq is a multiple of Hk (grouped-query
 * attention: query head h reads key/value head h / (Hq / Hk)). Outputs:
 * out (Rq, Hq, Dh) contiguous and lse (Rq, Hq), the log-sum-exp of each
 * query's scores (saved for backward). Causal: query i sees keys j <= i
 * (top-left aligned, as torch). A query that sees no key gets 0 and lse
 * -inf.
 *
 * float32 with contiguous head dims runs tiles (flash-attention's forward
 * and backward) whose products are `tile_mm` calls: a register-blocked
 * AVX-512 kernel where the compiler targets AVX-512, else sgemm (OpenBLAS;
 * a GEMM called inside a parallel region runs single-threaded). Everything
 * else (float64, strided head dims) runs one query at a time in double.
 * Beside each kernel is a naive reference that builds the full score
 * matrices; the tests compare them. */
#include "attention.h"
#include "lanes.h"
#include "vecmath.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#define KEY_BLOCK 64

static inline double ld(const char *base, bool f64, int64_t off) {
    return f64 ? ((const double *)base)[off] : (double)((const float *)base)[off];
}

/* the additive mask of (b, h, query i, key j), 0 without one */
static inline double mask_at(const attn_args *a, int64_t b, int64_t h, int64_t i, int64_t j) {
    return a->mbase ? ld(a->mbase, a->f64, a->mo[b] + h * a->mh[b] + i * a->mi[b] + j * a->mj[b]) : 0.0;
}

/* dot(q row, k row) over Dh with element strides */
static inline double dot(const attn_view *a, int64_t ra, int64_t ha, const attn_view *b, int64_t rb, int64_t hb,
                         int64_t dh, bool f64) {
    double s = 0;
    int64_t oa = ra * a->sr + ha * a->sh, ob = rb * b->sr + hb * b->sh;
    for (int64_t d = 0; d < dh; d++) s += ld(a->base, f64, oa + d * a->sd) * ld(b->base, f64, ob + d * b->sd);
    return s;
}

/* ---- naive references ------------------------------------------------------ */

/* The scores of one (sequence, head), (Lq, Lk) in full: scale q k^T + mask,
 * -inf where causal hides a key; then each row's softmax in place (a row
 * with every key hidden or masked becomes zeros). */
static void ref_probs(const attn_args *a, int64_t b, int64_t h, double *p) {
    int64_t kh = h / (a->hq / a->hk), lq = a->ql[b], lk = a->kl[b];
    for (int64_t i = 0; i < lq; i++) {
        double *row = p + i * lk, m = -INFINITY, l = 0;
        for (int64_t j = 0; j < lk; j++) {
            row[j] = a->causal && j > i ? -INFINITY
                                        : a->scale * dot(&a->q, a->qo[b] + i, h, &a->k, a->ko[b] + j, kh, a->dh, a->f64) +
                                              mask_at(a, b, h, i, j);
            m = fmax(m, row[j]);
        }
        for (int64_t j = 0; j < lk; j++) l += m == -INFINITY ? 0 : exp(row[j] - m);
        for (int64_t j = 0; j < lk; j++) row[j] = m == -INFINITY ? 0 : exp(row[j] - m) / l;
    }
}

/* Naive reference forward: P = softmax(scale q k^T + mask) in full, out = P v. */
void jag__ref_attention(const attn_args *a, char *out, double *lse) {
    bool f64 = a->f64;
    int64_t group = a->hq / a->hk;
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t h = 0; h < a->hq; h++) {
            int64_t kh = h / group, lq = a->ql[b], lk = a->kl[b];
            double *s = malloc((size_t)(lk ? lk : 1) * sizeof *s);
            for (int64_t i = 0; i < lq; i++) {
                int64_t ri = a->qo[b] + i, nk = a->causal ? (i + 1 < lk ? i + 1 : lk) : lk;
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < nk; j++) {
                    s[j] = a->scale * dot(&a->q, ri, h, &a->k, a->ko[b] + j, kh, a->dh, f64) + mask_at(a, b, h, i, j);
                    m = fmax(m, s[j]);
                }
                if (m == -INFINITY) nk = 0; /* every key masked out */
                for (int64_t j = 0; j < nk; j++) l += exp(s[j] - m);
                for (int64_t d = 0; d < a->dh; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < nk; j++)
                        acc += exp(s[j] - m) / l * ld(a->v.base, f64, (a->ko[b] + j) * a->v.sr + kh * a->v.sh + d * a->v.sd);
                    int64_t o = (ri * a->hq + h) * a->dh + d;
                    if (f64) ((double *)out)[o] = nk ? acc : 0;
                    else ((float *)out)[o] = nk ? (float)acc : 0;
                }
                lse[ri * a->hq + h] = nk ? m + log(l) : -INFINITY;
            }
            free(s);
        }
}

/* Naive reference backward, in double from q, k, v and go alone (the
 * forward is recomputed): per (sequence, head) with the full (Lq, Lk) P,
 *   O = P V, D_i = dO_i . O_i, dP = dO V^T, dS = P (dP - D),
 *   dq += scale dS K, dk += scale dS^T Q, dv += P^T dO, dmask = dS.
 * dq (Rq, Hq, Dh), dk and dv (Rk, Hk, Dh) contiguous, zeroed by the caller;
 * dmask (may be NULL) as jag__attention_backward's. */
void jag__ref_attention_backward(const attn_args *a, const attn_view *go, double *dq, double *dk, double *dv, double *dmask,
                                 const int64_t *fo) {
    bool f64 = a->f64;
    int64_t dh = a->dh;
    for (int64_t b = 0; b < a->batch; b++) {
        int64_t lq = a->ql[b], lk = a->kl[b];
        double *p = malloc((size_t)(lq * lk + 1) * sizeof *p), *o = malloc((size_t)(dh + 1) * sizeof *o);
        for (int64_t h = 0; h < a->hq; h++) {
            int64_t kh = h / (a->hq / a->hk);
            ref_probs(a, b, h, p);
            for (int64_t i = 0; i < lq; i++) {
                int64_t ri = a->qo[b] + i;
                double di = 0;
                for (int64_t d = 0; d < dh; d++) {
                    o[d] = 0;
                    for (int64_t j = 0; j < lk; j++)
                        o[d] += p[i * lk + j] * ld(a->v.base, f64, (a->ko[b] + j) * a->v.sr + kh * a->v.sh + d * a->v.sd);
                    di += o[d] * ld(go->base, f64, ri * go->sr + h * go->sh + d * go->sd);
                }
                for (int64_t j = 0; j < lk; j++) {
                    int64_t rj = a->ko[b] + j;
                    double pij = p[i * lk + j], ds = pij * (dot(go, ri, h, &a->v, rj, kh, dh, f64) - di);
                    if (dmask) dmask[fo[b] + (h * lq + i) * lk + j] = ds;
                    for (int64_t d = 0; d < dh; d++) {
                        dq[(ri * a->hq + h) * dh + d] += a->scale * ds * ld(a->k.base, f64, rj * a->k.sr + kh * a->k.sh + d * a->k.sd);
                        dk[(rj * a->hk + kh) * dh + d] += a->scale * ds * ld(a->q.base, f64, ri * a->q.sr + h * a->q.sh + d * a->q.sd);
                        dv[(rj * a->hk + kh) * dh + d] += pij * ld(go->base, f64, ri * go->sr + h * go->sh + d * go->sd);
                    }
                }
            }
        }
        free(p), free(o);
    }
}

/* ---- tile products ----------------------------------------------------------- */

bool jag__attention_blas_tiles;

// C (m, n) = alpha A B + beta C, beta 0 or 1; A (m, k) read as A[r ar + x ax] (a row-major matrix, or the
// transpose of one), B (k, n) rows ldb apart, C (m, n) rows ldc apart (unit column strides)
static void tile_mm_blas(int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t ar, int64_t ax,
                         const float *B, int64_t ldb, bool beta, float *C, int64_t ldc) {
    bool tr = ax != 1; /* A[x ax + r]: the transpose of a (k, m) matrix */
    cblas_sgemm(CblasRowMajor, tr ? CblasTrans : CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, alpha, A,
                (blasint)(tr ? ax : ar), B, (blasint)ldb, beta ? 1.0f : 0.0f, C, (blasint)ldc);
}

#if defined(__AVX512F__)
/* The AVX-512 tile product. C is computed in blocks of R rows x NV vectors
 * of 16 columns whose R x NV sums stay in registers while x runs over k:
 * per x, NV loads of B's row, R broadcasts of A(r, x), R x NV fused
 * multiply-adds. A block's rows past `rows` repeat its last row (computed,
 * not stored); `last` masks the columns of its last vector. Small tiles
 * (a short sentence's 10 x 10 scores) cost a few such blocks, where a BLAS
 * call would cost more than it computes. */
static inline __attribute__((always_inline)) void mm_block(const int R, const int NV, int64_t rows, int64_t k, float alpha,
                                                           const float *A, int64_t ar, int64_t ax, const float *B,
                                                           int64_t ldb, bool beta, float *C, int64_t ldc, __mmask16 last) {
    __m512 acc[8][4];
    const float *p[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) p[r] = A + (r < rows ? r : rows - 1) * ar;
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
    for (int64_t x = 0, xa = 0; x < k; x++, xa += ax, B += ldb) {
        __m512 bv[4];
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            bv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, B + 16 * v) : _mm512_loadu_ps(B + 16 * v);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            __m512 s = _mm512_set1_ps(p[r][xa]);
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(s, bv[v], acc[r][v]);
        }
    }
    __m512 al = _mm512_set1_ps(alpha);
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {
            if (r >= rows) continue;
            float *c = C + r * ldc + 16 * v;
            __mmask16 mk = v == NV - 1 ? last : (__mmask16)0xffff;
            __m512 o = _mm512_mul_ps(al, acc[r][v]);
            if (beta) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(mk, c));
            _mm512_mask_storeu_ps(c, mk, o);
        }
}

typedef void (*mm_block_fn)(int64_t rows, int64_t k, float alpha, const float *A, int64_t ar, int64_t ax, const float *B,
                            int64_t ldb, bool beta, float *C, int64_t ldc, __mmask16 last);
#define MM_BLOCK(R, NV)                                                                                                  \
    static void mm_block_##R##_##NV(int64_t rows, int64_t k, float alpha, const float *A, int64_t ar, int64_t ax,         \
                                    const float *B, int64_t ldb, bool beta, float *C, int64_t ldc, __mmask16 last) {     \
        mm_block(R, NV, rows, k, alpha, A, ar, ax, B, ldb, beta, C, ldc, last);                                          \
    }
MM_BLOCK(8, 1) MM_BLOCK(4, 1) MM_BLOCK(2, 1)
MM_BLOCK(8, 2) MM_BLOCK(4, 2) MM_BLOCK(2, 2)
MM_BLOCK(8, 3) MM_BLOCK(4, 3) MM_BLOCK(2, 3)
MM_BLOCK(6, 4) MM_BLOCK(4, 4) MM_BLOCK(2, 4)
/* by vectors per block: the tallest block (24 or 32 sums in registers), then 4 and 2 rows for the last rows */
static const mm_block_fn mm_blocks[4][3] = {{mm_block_8_1, mm_block_4_1, mm_block_2_1},
                                            {mm_block_8_2, mm_block_4_2, mm_block_2_2},
                                            {mm_block_8_3, mm_block_4_3, mm_block_2_3},
                                            {mm_block_6_4, mm_block_4_4, mm_block_2_4}};

// as tile_mm_blas
static void tile_mm(int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t ar, int64_t ax, const float *B,
                    int64_t ldb, bool beta, float *C, int64_t ldc) {
    if (jag__attention_blas_tiles) {
        tile_mm_blas(m, n, k, alpha, A, ar, ax, B, ldb, beta, C, ldc);
        return;
    }
    for (int64_t c0 = 0; c0 < n; c0 += 64) { /* panels of up to 4 vectors */
        int64_t w = n - c0 < 64 ? n - c0 : 64;
        int nv = (int)((w + 15) / 16), tall = nv == 4 ? 6 : 8;
        __mmask16 last = (__mmask16)(w % 16 ? (1u << (w % 16)) - 1 : 0xffffu);
        const mm_block_fn *f = mm_blocks[nv - 1];
        for (int64_t r0 = 0; r0 < m;) {
            int64_t left = m - r0, rows = left < tall ? left : tall;
            mm_block_fn g = left > 4 ? f[0] : left > 2 ? f[1] : f[2];
            g(rows, k, alpha, A + r0 * ar, ar, ax, B + c0, ldb, beta, C + r0 * ldc + c0, ldc, last);
            r0 += rows;
        }
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
/* The same on AVX2 (8-float vectors, 16 registers): blocks of R rows x NV
 * vectors of 8 columns, R x NV sums in registers (6 x 2 at most: 12 sums,
 * the two B vectors and a broadcast); the last vector's columns masked
 * (`last`, a lane mask; stored through lanes.h, nlast of them), full
 * vectors read plainly. The sums are the
 * AVX-512 kernel's (one FMA chain over x per element), so both give the
 * same bits. On a Zen 3 pair (bench_nested --only=attention; sgemm per
 * tile before), the rate against a GEMM of the real FLOPs: forward on
 * the corpus batch (64 sentences of 5-25 tokens, 4 heads of 32) 0.39 ->
 * 0.62, its backward 0.33 -> 0.67, against padding 23.5 -> 27.8x and 21.2
 * -> 26.7x (the padding ratio 26.0); a uniform batch 0.54 -> 0.64. */
static inline __attribute__((always_inline)) void mm_block(const int R, const int NV, int64_t rows, int64_t k, float alpha,
                                                           const float *A, int64_t ar, int64_t ax, const float *B,
                                                           int64_t ldb, bool beta, float *C, int64_t ldc, __m256i last,
                                                           int nlast) {
    const bool last_full = nlast == 8;
    __m256 acc[8][2];
    const float *p[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) p[r] = A + (r < rows ? r : rows - 1) * ar;
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[r][v] = _mm256_setzero_ps();
    for (int64_t x = 0, xa = 0; x < k; x++, xa += ax, B += ldb) {
        __m256 bv[2];
        _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++)
            bv[v] = v == NV - 1 && !last_full ? _mm256_maskload_ps(B + 8 * v, last) : _mm256_loadu_ps(B + 8 * v);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            __m256 s = _mm256_broadcast_ss(p[r] + xa);
            _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[r][v] = _mm256_fmadd_ps(s, bv[v], acc[r][v]);
        }
    }
    __m256 al = _mm256_set1_ps(alpha);
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) {
            if (r >= rows) continue;
            float *c = C + r * ldc + 8 * v;
            __m256 o = _mm256_mul_ps(al, acc[r][v]);
            if (v == NV - 1 && !last_full) {
                if (beta) o = _mm256_add_ps(o, _mm256_maskload_ps(c, last));
                jag__store_first8_ps(c, o, nlast);
            } else {
                if (beta) o = _mm256_add_ps(o, _mm256_loadu_ps(c));
                _mm256_storeu_ps(c, o);
            }
        }
}

typedef void (*mm_block_fn)(int64_t rows, int64_t k, float alpha, const float *A, int64_t ar, int64_t ax, const float *B,
                            int64_t ldb, bool beta, float *C, int64_t ldc, __m256i last, int nlast);
#define MM_BLOCK(R, NV)                                                                                                  \
    static void mm_block_##R##_##NV(int64_t rows, int64_t k, float alpha, const float *A, int64_t ar, int64_t ax,         \
                                    const float *B, int64_t ldb, bool beta, float *C, int64_t ldc, __m256i last,          \
                                    int nlast) {                                                                          \
        mm_block(R, NV, rows, k, alpha, A, ar, ax, B, ldb, beta, C, ldc, last, nlast);                                   \
    }
MM_BLOCK(8, 1) MM_BLOCK(4, 1) MM_BLOCK(2, 1)
MM_BLOCK(6, 2) MM_BLOCK(4, 2) MM_BLOCK(2, 2)
/* by vectors per block: the tallest block, then 4 and 2 rows for the last rows */
static const mm_block_fn mm_blocks[2][3] = {{mm_block_8_1, mm_block_4_1, mm_block_2_1},
                                            {mm_block_6_2, mm_block_4_2, mm_block_2_2}};

// as tile_mm_blas
static void tile_mm(int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t ar, int64_t ax, const float *B,
                    int64_t ldb, bool beta, float *C, int64_t ldc) {
    if (jag__attention_blas_tiles) {
        tile_mm_blas(m, n, k, alpha, A, ar, ax, B, ldb, beta, C, ldc);
        return;
    }
    for (int64_t c0 = 0; c0 < n; c0 += 16) { /* panels of up to 2 vectors */
        int64_t w = n - c0 < 16 ? n - c0 : 16;
        int nv = (int)((w + 7) / 8), tall = nv == 2 ? 6 : 8;
        int nlast = w % 8 == 0 ? 8 : (int)(w % 8); /* columns in the last vector */
        __m256i last = jag__mask_first8_epi32(nlast);
        const mm_block_fn *f = mm_blocks[nv - 1];
        for (int64_t r0 = 0; r0 < m;) {
            int64_t left = m - r0, rows = left < tall ? left : tall;
            mm_block_fn g = left > 4 ? f[0] : left > 2 ? f[1] : f[2];
            g(rows, k, alpha, A + r0 * ar, ar, ax, B + c0, ldb, beta, C + r0 * ldc + c0, ldc, last, nlast);
            r0 += rows;
        }
    }
}
#else
#define tile_mm tile_mm_blas
#endif

/* ---- the element-wise steps of a tile ----------------------------------------- */

/* 16 columns at a time: a strip of VL columns of a tile is one vector */
#define VL 16

/* P = exp(x) is 0 below -87 (where expf is under FLT_MIN, 1.2e-38), and
 * those lanes are never computed: a result that underflows costs a
 * microcode assist on x86 (about 20 times an exp), and masked or causally
 * hidden scores are -inf. */
#define EXP_MIN -87.0f

#if defined(__AVX512F__)
/* exp(x) for 16 lanes as jag__vm_exp_f32 computes it (the same reduction
 * and polynomial, the same results) from -87 up, with AVX-512's scalef for
 * the power of two: about half the instructions. NaN passes. */
static inline __m512 exp16(__m512 x) {
    __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_MIN), _CMP_NLT_UQ);
    x = _mm512_min_ps(_mm512_set1_ps(90.0f), _mm512_max_ps(_mm512_set1_ps(EXP_MIN), x));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269502f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-0.693359375f), x);
    r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(1.381456153e-03f), r, _mm512_set1_ps(8.368735202e-03f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.166838899e-02f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.666652113e-01f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.999999404e-01f));
    __m512 p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r));
    return _mm512_maskz_scalef_ps(live, p, k);
}

/* dst[c ldd + r] = src[r lds + c], r < rows, c < cols: blocks of 16 x 16
 * transposed in registers (unpacks, then 128-bit lane shuffles) */
static void pack_t(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows, int64_t cols) {
    for (int64_t r0 = 0; r0 < rows; r0 += VL)
        for (int64_t c0 = 0; c0 < cols; c0 += VL) {
            int64_t nr = rows - r0 < VL ? rows - r0 : VL, nc = cols - c0 < VL ? cols - c0 : VL;
            __mmask16 cm = (__mmask16)((1u << nc) - 1), rm = (__mmask16)((1u << nr) - 1);
            __m512 x[VL], t[VL];
            for (int i = 0; i < VL; i++) x[i] = i < nr ? _mm512_maskz_loadu_ps(cm, src + (r0 + i) * lds + c0) : _mm512_setzero_ps();
            for (int i = 0; i < VL; i += 2) /* lane k of t[i]: (i, 4k), (i+1, 4k), (i, 4k+1), (i+1, 4k+1); t[i+1]: 4k+2, 4k+3 */
                t[i] = _mm512_unpacklo_ps(x[i], x[i + 1]), t[i + 1] = _mm512_unpackhi_ps(x[i], x[i + 1]);
            for (int g = 0; g < 4; g++) { /* lane k of x[4g + c]: rows 4g..4g+3 of column 4k + c */
                __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
                __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
                x[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c)), x[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
                x[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d)), x[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
            }
            for (int c = 0; c < 4; c++) { /* the 4 x 4 transpose of 128-bit lanes of x[c], x[4+c], x[8+c], x[12+c] */
                __m512 v0 = _mm512_shuffle_f32x4(x[c], x[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(x[c], x[4 + c], 0xdd);
                __m512 w0 = _mm512_shuffle_f32x4(x[8 + c], x[12 + c], 0x88), w1 = _mm512_shuffle_f32x4(x[8 + c], x[12 + c], 0xdd);
                t[c] = _mm512_shuffle_f32x4(v0, w0, 0x88), t[8 + c] = _mm512_shuffle_f32x4(v0, w0, 0xdd);
                t[4 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88), t[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xdd);
            }
            for (int c = 0; c < nc; c++) _mm512_mask_storeu_ps(dst + (c0 + c) * ldd + r0, rm, t[c]);
        }
}

/* One strip of VL query columns of a scores tile st (nb keys x columns, rows
 * ld apart): the running max m grows to the strip's column max, r =
 * exp(m_old - m_new) (1 where it did not grow), P = exp(S - m) in place,
 * l = l r + column sums of P. Returns whether some r is not 1. */
static bool softmax_strip(float *st, int64_t ld, int64_t nb, float *m, float *l, float *r) {
    __m512 old = _mm512_loadu_ps(m), x0 = old, x1 = old, x2 = old, x3 = old, sum = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 4 <= nb; j += 4) { /* four chains of max; a NaN score is skipped */
        x0 = _mm512_max_ps(_mm512_loadu_ps(st + j * ld), x0), x1 = _mm512_max_ps(_mm512_loadu_ps(st + (j + 1) * ld), x1);
        x2 = _mm512_max_ps(_mm512_loadu_ps(st + (j + 2) * ld), x2), x3 = _mm512_max_ps(_mm512_loadu_ps(st + (j + 3) * ld), x3);
    }
    for (; j < nb; j++) x0 = _mm512_max_ps(_mm512_loadu_ps(st + j * ld), x0);
    __m512 mx = _mm512_max_ps(_mm512_max_ps(x0, x1), _mm512_max_ps(x2, x3));
    __mmask16 grew = _mm512_cmp_ps_mask(mx, old, _CMP_GT_OQ);
    __m512 ninf = _mm512_set1_ps(-INFINITY);
    /* r = exp(old - mx) where m grew, else 1; the first key tile's old is -inf (r = 0 where it grew) */
    __m512 shrink = _mm512_cmp_ps_mask(old, ninf, _CMP_EQ_OQ) == 0xffff ? _mm512_setzero_ps() : exp16(_mm512_sub_ps(old, mx));
    _mm512_storeu_ps(r, _mm512_mask_blend_ps(grew, _mm512_set1_ps(1.0f), shrink));
    _mm512_storeu_ps(m, mx);
    /* nothing visible yet: exp(-inf - 0) = 0 */
    __m512 base = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mx, ninf, _CMP_EQ_OQ), mx, _mm512_setzero_ps());
    for (j = 0; j < nb; j++) {
        __m512 p = exp16(_mm512_sub_ps(_mm512_loadu_ps(st + j * ld), base));
        _mm512_storeu_ps(st + j * ld, p);
        sum = _mm512_add_ps(sum, p);
    }
    _mm512_storeu_ps(l, _mm512_fmadd_ps(_mm512_loadu_ps(l), _mm512_loadu_ps(r), sum));
    return grew != 0;
}

/* a row of the backward: P = exp(S - lse) in place, dS = P (dP - D) in place of dP */
static void probs_row(float *p, float *ds, int64_t nb, float lse, float di) {
    __m512 ls = _mm512_set1_ps(lse), dv = _mm512_set1_ps(di);
    for (int64_t j = 0; j < nb; j += VL) {
        __mmask16 mk = (__mmask16)(nb - j >= VL ? 0xffffu : (1u << (nb - j)) - 1);
        __m512 pj = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, p + j), ls));
        _mm512_mask_storeu_ps(p + j, mk, pj);
        _mm512_mask_storeu_ps(ds + j, mk, _mm512_mul_ps(pj, _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, ds + j), dv)));
    }
}
#else
/* jag__vm_exp_f32(x), 0 below EXP_MIN (computed on a clamped x, so that nothing underflows) */
static inline float exp_or_0(float x) {
    float e = jag__vm_exp_f32(x < EXP_MIN ? EXP_MIN : x);
    return x < EXP_MIN ? 0.0f : e;
}

#if defined(__AVX2__) && defined(__FMA__)
/* The backward's packing and its row of probabilities on AVX2 (the scalar
 * loops below are their naive form): on the corpus batch (64 sentences of
 * 5-25 tokens) a row is 5-25 floats, where the compiler's vector loop left
 * most of each to its scalar remainder, and the packing moved one float at
 * a time. */

/* exp_or_0 on 8 lanes: vecmath.h's jag__vm8_exp_parts_f32, the scalar's
 * parts lane by lane, so the same bits (every float from -100 to 100 and
 * the specials compared when this was written); max(EXP_MIN, x) keeps a
 * NaN, the second operand, as the scalar compare does. */
static inline __m256 exp8_or_0(__m256 x) {
    __m256 dead = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_MIN), _CMP_LT_OQ);
    jag__vm8_exp_parts e = jag__vm8_exp_parts_f32(_mm256_max_ps(_mm256_set1_ps(EXP_MIN), x));
    return _mm256_andnot_ps(dead, _mm256_mul_ps(_mm256_mul_ps(e.p, e.s1), e.s2));
}

/* dst[c ldd + r] = src[r lds + c], r < rows, c < cols: blocks of 8 x 8
 * transposed in registers (unpacks, shuffles, then 128-bit lane swaps) */
static void pack_t(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows, int64_t cols) {
    for (int64_t r0 = 0; r0 < rows; r0 += 8)
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
            int64_t nr = rows - r0 < 8 ? rows - r0 : 8, nc = cols - c0 < 8 ? cols - c0 : 8;
            __m256i cm = jag__mask_first8_epi32(nc);
            __m256 x[8], t[8], u[8];
            for (int i = 0; i < 8; i++)
                x[i] = i < nr ? (nc == 8 ? _mm256_loadu_ps(src + (r0 + i) * lds + c0) : _mm256_maskload_ps(src + (r0 + i) * lds + c0, cm))
                              : _mm256_setzero_ps();
            for (int i = 0; i < 8; i += 2) /* t[i]: (i, 0) (i+1, 0) (i, 1) (i+1, 1) | the same for columns 4, 5; t[i+1]: 2, 3 | 6, 7 */
                t[i] = _mm256_unpacklo_ps(x[i], x[i + 1]), t[i + 1] = _mm256_unpackhi_ps(x[i], x[i + 1]);
            for (int g = 0; g < 8; g += 4) { /* u[g + c]: rows g..g+3 of columns c | c + 4 */
                u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44), u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xee);
                u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44), u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xee);
            }
            for (int c = 0; c < 4; c++) { /* column c: rows 0..3 from u[c], 4..7 from u[4 + c] */
                t[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
                t[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
            }
            for (int c = 0; c < nc; c++) {
                float *d = dst + (c0 + c) * ldd + r0;
                jag__store_first8_ps(d, t[c], nr);
            }
        }
}
#else
static void pack_t(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[c * ldd + r] = src[r * lds + c];
}
#endif

static bool softmax_strip(float *st, int64_t ld, int64_t nb, float *m, float *l, float *r) {
    float mx[VL], base[VL], sum[VL];
    bool grew = false;
#pragma omp simd
    for (int v = 0; v < VL; v++) mx[v] = m[v], sum[v] = 0;
    for (int64_t j = 0; j < nb; j++) {
        const float *s = st + j * ld;
#pragma omp simd
        for (int v = 0; v < VL; v++) mx[v] = s[v] > mx[v] ? s[v] : mx[v]; /* a NaN score is skipped */
    }
    for (int v = 0; v < VL; v++) {
        r[v] = mx[v] > m[v] ? exp_or_0(m[v] - mx[v]) : 1.0f;
        grew |= mx[v] > m[v];
        m[v] = mx[v];
        base[v] = mx[v] == -INFINITY ? 0.0f : mx[v]; /* nothing visible yet: exp(-inf - 0) = 0 */
    }
    for (int64_t j = 0; j < nb; j++) {
        float *s = st + j * ld;
#pragma omp simd
        for (int v = 0; v < VL; v++) {
            float p = exp_or_0(s[v] - base[v]);
            s[v] = p;
            sum[v] += p;
        }
    }
#pragma omp simd
    for (int v = 0; v < VL; v++) l[v] = l[v] * r[v] + sum[v];
    return grew;
}

#if defined(__AVX2__) && defined(__FMA__)
static void probs_row(float *p, float *ds, int64_t nb, float lse, float di) {
    __m256 ls = _mm256_set1_ps(lse), dv = _mm256_set1_ps(di);
    int64_t j = 0;
    for (; j + 8 <= nb; j += 8) {
        __m256 pj = exp8_or_0(_mm256_sub_ps(_mm256_loadu_ps(p + j), ls));
        _mm256_storeu_ps(p + j, pj);
        _mm256_storeu_ps(ds + j, _mm256_mul_ps(pj, _mm256_sub_ps(_mm256_loadu_ps(ds + j), dv)));
    }
    if (j < nb) {
        __m256i mk = jag__mask_first8_epi32(nb - j);
        __m256 pj = exp8_or_0(_mm256_sub_ps(_mm256_maskload_ps(p + j, mk), ls));
        jag__store_first8_ps(p + j, pj, nb - j);
        jag__store_first8_ps(ds + j, _mm256_mul_ps(pj, _mm256_sub_ps(_mm256_maskload_ps(ds + j, mk), dv)), nb - j);
    }
}
#else
static void probs_row(float *p, float *ds, int64_t nb, float lse, float di) {
#pragma omp simd
    for (int64_t j = 0; j < nb; j++) {
        float pj = exp_or_0(p[j] - lse);
        p[j] = pj;
        ds[j] = pj * (ds[j] - di);
    }
}
#endif
#endif

/* ---- float32 forward, tiled ------------------------------------------------ */

/* flash-attention's forward on tiles of TQ queries x TK keys, with the
 * scores kept transposed: S^T = scale K Q^T (keys x queries), so that Q^T
 * is packed once per task and K is read in place, and each query's running
 * max m and sum l are vectors along the tile's columns. Per key tile: the
 * mask and the causal -inf, m grows to the tile's column max, the
 * accumulator's rows are rescaled by exp(m_old - m_new), P = exp(S - m) in
 * place, l += column sums, acc += P^T^T V. The (Lq, Lk) matrix never
 * exists: only a (TK, TQ) tile per thread. */
#define TQ 64
#define TK 128
/* short sequences: every head of one in a single task, so that tasks are not
 * mostly scheduling */
#define SMALL_TASK_MACS ((int64_t)64 * 64 * 64)

typedef struct attn_task {
    int64_t b, h0, nh;   /* sequence, query heads [h0, h0 + nh) */
    int64_t i0, ni;      /* queries [i0, i0 + ni) */
    int64_t j0, nj;      /* keys [j0, j0 + nj) (backward) */
    bool dq, dkv;        /* backward: which gradients the task makes */
    double cost;
} attn_task;

static int task_cmp(const void *x, const void *y) { /* costliest first */
    double a = ((const attn_task *)x)->cost, b = ((const attn_task *)y)->cost;
    return (a < b) - (a > b);
}

/* keys that query i0 + ni - 1 sees (all of them without causal) */
static inline int64_t keys_seen(const attn_args *a, int64_t b, int64_t i_end) {
    return a->causal && i_end < a->kl[b] ? i_end : a->kl[b];
}

// queries [i0, i0 + nq) of head h of sequence b -> their out rows (Rq, Hq, Dh) and lse (Rq, Hq)
// scratch (zeroed once): qt (Dh, TQ), st (TK, TQ), acc (TQ, Dh), m, l, r (TQ); columns of qt and st past nq
// are computed too (never used)
static void forward_f32_tile(const attn_args *a, int64_t b, int64_t h, int64_t i0, int64_t nq, float *out, float *lse_out,
                             float *scratch) {
    int64_t kh = h / (a->hq / a->hk), dh = a->dh, kend = keys_seen(a, b, i0 + nq);
    const float *Q = (const float *)a->q.base + (a->qo[b] + i0) * a->q.sr + h * a->q.sh;
    const float *K = (const float *)a->k.base + a->ko[b] * a->k.sr + kh * a->k.sh;
    const float *V = (const float *)a->v.base + a->ko[b] * a->v.sr + kh * a->v.sh;
    float *qt = scratch, *st = qt + dh * TQ, *acc = st + TK * TQ, *m = acc + TQ * dh, *l = m + TQ, *r = l + TQ;
    pack_t(qt, TQ, Q, a->q.sr, nq, dh);
    for (int64_t i = 0; i < TQ; i++) m[i] = -INFINITY, l[i] = 0;
    memset(acc, 0, (size_t)(nq * dh) * sizeof *acc);
    for (int64_t j0 = 0; j0 < kend; j0 += TK) {
        int64_t nb = kend - j0 < TK ? kend - j0 : TK;
        bool diagonal = a->causal && j0 + nb - 1 > i0; /* some key here is hidden from some query */
        if (!diagonal) tile_mm(nb, nq, dh, (float)a->scale, K + j0 * a->k.sr, a->k.sr, 1, qt, TQ, false, st, TQ);
        for (int64_t jr = 0; diagonal && jr < nb; jr += VL) { /* VL keys at a time, from the first strip of queries that sees one */
            int64_t c = j0 + jr - i0 > 0 ? (j0 + jr - i0) / VL * VL : 0, nr = nb - jr < VL ? nb - jr : VL;
            tile_mm(nr, nq - c, dh, (float)a->scale, K + (j0 + jr) * a->k.sr, a->k.sr, 1, qt + c, TQ, false, st + jr * TQ + c, TQ);
        }
        if (a->mbase) { /* the additive mask */
            const float *mb = (const float *)a->mbase + a->mo[b] + h * a->mh[b] + i0 * a->mi[b] + j0 * a->mj[b];
            int64_t mi = a->mi[b], mj = a->mj[b];
            for (int64_t j = 0; j < nb; j++)
                for (int64_t i = 0; i < nq; i++) st[j * TQ + i] += mb[i * mi + j * mj];
        }
        if (a->causal) /* key j0 + j is hidden from queries before it */
            for (int64_t j = i0 + 1 - j0 > 0 ? i0 + 1 - j0 : 0; j < nb; j++) {
                int64_t hidden = j0 + j - i0 < nq ? j0 + j - i0 : nq;
                float *row = st + j * TQ;
#pragma omp simd
                for (int64_t i = 0; i < hidden; i++) row[i] = -INFINITY;
            }
        bool rescale = false;
        for (int64_t c = 0; c < nq; c += VL) { /* on a diagonal tile, only the keys the strip's queries see */
            int64_t seen = diagonal ? i0 + (c + VL < nq ? c + VL : nq) - j0 : nb;
            seen = seen < 0 ? 0 : seen > nb ? nb : seen;
            rescale |= softmax_strip(st + c, TQ, seen, m + c, l + c, r + c);
        }
        for (int64_t i = 0; rescale && i < nq; i++) {
            float *arow = acc + i * dh, ri = r[i];
#pragma omp simd
            for (int64_t d = 0; d < dh; d++) arow[d] *= ri;
        }
        if (!diagonal) tile_mm(nq, dh, nb, 1.0f, st, 1, TQ, V + j0 * a->v.sr, a->v.sr, true, acc, dh);
        for (int64_t ic = 0; diagonal && ic < nq; ic += VL) { /* VL queries at a time, with the keys they see */
            int64_t nr = nq - ic < VL ? nq - ic : VL, kk = i0 + ic + nr - j0 < nb ? i0 + ic + nr - j0 : nb;
            if (kk > 0) tile_mm(nr, dh, kk, 1.0f, st + ic, 1, TQ, V + j0 * a->v.sr, a->v.sr, true, acc + ic * dh, dh);
        }
    }
    for (int64_t i = 0; i < nq; i++) {
        int64_t ri = a->qo[b] + i0 + i;
        bool any = l[i] > 0;
        float inv = any ? 1.0f / l[i] : 0.0f;
        float *orow = out + (ri * a->hq + h) * dh, *arow = acc + i * dh;
#pragma omp simd
        for (int64_t d = 0; d < dh; d++) orow[d] = arow[d] * inv;
        lse_out[ri * a->hq + h] = any ? m[i] + logf(l[i]) : -INFINITY;
    }
}

/* float32 with unit head-dim strides (and rows at least Dh apart, as BLAS
 * wants its leading dimensions) */
static bool tiled_ok(const attn_args *a) {
    int64_t dh = a->dh;
    return !a->f64 && dh > 0 && a->q.sd == 1 && a->k.sd == 1 && a->v.sd == 1 && a->q.sr >= dh && a->k.sr >= dh &&
           a->v.sr >= dh;
}

// q (Rq, Hq, Dh), k/v (Rk, Hk, Dh) -> out (Rq, Hq, Dh), lse (Rq, Hq): tasks of (sequence, heads, query tile)
static jag_status forward_f32(const attn_args *a, float *out, float *lse_out) {
    int64_t n = 0, dh = a->dh;
    for (int64_t b = 0; b < a->batch; b++) n += (a->ql[b] + TQ - 1) / TQ * a->hq;
    attn_task *tasks = malloc((size_t)(n ? n : 1) * sizeof *tasks);
    if (!tasks) return jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention: out of memory");
    n = 0;
    for (int64_t b = 0; b < a->batch; b++) {
        bool small = a->ql[b] * a->kl[b] * a->hq * dh <= SMALL_TASK_MACS;
        for (int64_t i0 = 0; i0 < a->ql[b]; i0 += TQ) {
            int64_t nq = a->ql[b] - i0 < TQ ? a->ql[b] - i0 : TQ, nh = small ? a->hq : 1;
            for (int64_t h0 = 0; h0 < a->hq; h0 += nh)
                tasks[n++] = (attn_task){.b = b, .h0 = h0, .nh = nh, .i0 = i0, .ni = nq,
                                         .cost = (double)nh * (double)nq * (double)(keys_seen(a, b, i0 + nq) + 16)};
        }
    }
    qsort(tasks, (size_t)n, sizeof *tasks, task_cmp);
    bool failed = false;
#pragma omp parallel
    {
        float *scratch = calloc((size_t)(dh * TQ + TK * TQ + TQ * dh + 3 * TQ), sizeof *scratch);
        if (!scratch) {
#pragma omp atomic write
            failed = true;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < n; t++)
            for (int64_t h = tasks[t].h0; scratch && h < tasks[t].h0 + tasks[t].nh; h++)
                forward_f32_tile(a, tasks[t].b, h, tasks[t].i0, tasks[t].ni, out, lse_out, scratch);
        free(scratch);
    }
    free(tasks);
    return failed ? jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention: out of memory") : JAG_OK;
}

// q (Rq, Hq, Dh), k/v (Rk, Hk, Dh) -> out (Rq, Hq, Dh), lse (Rq, Hq)
jag_status jag__attention_forward(const attn_args *a, char *out, char *lse_out) {
    if (tiled_ok(a)) return forward_f32(a, (float *)out, (float *)lse_out);
    bool f64 = a->f64, failed = false;
    int64_t dh = a->dh, group = a->hq / a->hk, tasks = a->batch * a->hq;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t b = t / a->hq, h = t % a->hq, kh = h / group, lq = a->ql[b], lk = a->kl[b];
        double *acc = malloc((size_t)(dh ? dh : 1) * sizeof *acc), s[KEY_BLOCK];
        if (!acc) {
#pragma omp atomic write
            failed = true;
        }
        for (int64_t i = 0; acc && i < lq; i++) {
            int64_t ri = a->qo[b] + i, nk = a->causal ? (i + 1 < lk ? i + 1 : lk) : lk;
            double m = -INFINITY, l = 0;
            for (int64_t d = 0; d < dh; d++) acc[d] = 0;
            for (int64_t j0 = 0; j0 < nk; j0 += KEY_BLOCK) {
                int64_t nb = nk - j0 < KEY_BLOCK ? nk - j0 : KEY_BLOCK;
                double bm = -INFINITY;
                for (int64_t j = 0; j < nb; j++) {
                    s[j] = a->scale * dot(&a->q, ri, h, &a->k, a->ko[b] + j0 + j, kh, dh, f64) + mask_at(a, b, h, i, j0 + j);
                    bm = fmax(bm, s[j]);
                }
                if (bm == -INFINITY) continue; /* nothing visible in this block */
                if (bm > m) { /* rescale what was accumulated under the old max */
                    double r = exp(m - bm);
                    l *= r;
                    for (int64_t d = 0; d < dh; d++) acc[d] *= r;
                    m = bm;
                }
                for (int64_t j = 0; j < nb; j++) {
                    double p = exp(s[j] - m);
                    l += p;
                    int64_t vo = (a->ko[b] + j0 + j) * a->v.sr + kh * a->v.sh;
                    for (int64_t d = 0; d < dh; d++) acc[d] += p * ld(a->v.base, f64, vo + d * a->v.sd);
                }
            }
            for (int64_t d = 0; d < dh; d++) {
                int64_t o = (ri * a->hq + h) * dh + d;
                double val = nk && l > 0 ? acc[d] / l : 0;
                if (f64) ((double *)out)[o] = val;
                else ((float *)out)[o] = (float)val;
            }
            double lse = nk && l > 0 ? m + log(l) : -INFINITY;
            if (f64) ((double *)lse_out)[ri * a->hq + h] = lse;
            else ((float *)lse_out)[ri * a->hq + h] = (float)lse;
        }
        free(acc);
    }
    return failed ? jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention: out of memory") : JAG_OK;
}

/* ---- float32 backward, tiled ----------------------------------------------- */

/* flash-attention-2's backward. Per (query tile i, key tile j) of head h,
 * from the forward's lse and D = rowsum(dO o O):
 *   S = scale Q_i K_j^T (+ mask, causal -inf),  P = exp(S - lse_i)
 *   dV_j += P^T dO_i,  dP = dO_i V_j^T,  dS = P o (dP - D_i)  (= dmask)
 *   dQ_i += scale dS K_j,  dK_j += scale dS^T Q_i
 * K_j^T and V_j^T are packed once per key tile. A task loops key tiles,
 * then query heads, then query tiles, accumulating straight into dq, dk,
 * dv; the tasks own disjoint outputs:
 *   - one pass: a task per (sequence, key/value head) makes dq of the
 *     group's query heads and dk, dv of that head;
 *   - when a few long sequences would leave threads idle, two kinds of
 *     tasks instead: (sequence, kv head, key tiles) make dk, dv and
 *     (sequence, query head, query tile) makes dq, at the cost of S and dP
 *     computed twice.
 * Each output element is summed in the same order either way (dq over key
 * tiles, dk and dv over heads then query tiles), so results do not depend
 * on the thread count. */
#define BQ 64
#define BK 64
/* keys per task of the two-pass split */
#define SPLIT_KEYS (4 * BK)

typedef struct bw_ctx {
    const attn_args *a;
    const float *go, *lse, *dd; /* dO rows (unit head-dim stride), lse (Rq, Hq), D (Rq, Hq) */
    int64_t gsr, gsh;           /* dO's row and head strides */
    float *dq, *dk, *dv, *dmask;
    const int64_t *fo;
} bw_ctx;

// queries [i0, i0 + nq) x keys [j0, j0 + nb) of query head h of sequence b; kt, vt (Dh, BK): K_j^T, V_j^T;
// scratch p, ds (BQ, BK)
static void backward_f32_tile(const bw_ctx *c, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0, int64_t nb,
                              const float *kt, const float *vt, float *p, float *ds, bool want_dq, bool want_dkv) {
    const attn_args *a = c->a;
    int64_t kh = h / (a->hq / a->hk), dh = a->dh, lq = a->ql[b], lk = a->kl[b], rq = a->qo[b] + i0, rk = a->ko[b] + j0;
    float scale = (float)a->scale;
    const float *Q = (const float *)a->q.base + rq * a->q.sr + h * a->q.sh;
    const float *K = (const float *)a->k.base + rk * a->k.sr + kh * a->k.sh;
    const float *dO = c->go + rq * c->gsr + h * c->gsh;
    /* a diagonal tile of causal attention: its products run VL queries (or keys) at a time, over the keys
     * (queries) those see, and its hidden scores get S = -inf and dP = 0 */
    bool diagonal = a->causal && j0 + nb - 1 > i0;
    if (!diagonal) {
        tile_mm(nq, nb, dh, scale, Q, a->q.sr, 1, kt, BK, false, p, BK); /* S */
        tile_mm(nq, nb, dh, 1.0f, dO, c->gsr, 1, vt, BK, false, ds, BK); /* dP */
    }
    for (int64_t ic = 0; diagonal && ic < nq; ic += VL) {
        int64_t nr = nq - ic < VL ? nq - ic : VL, w = i0 + ic + nr - j0 < nb ? i0 + ic + nr - j0 : nb;
        if (w <= 0) continue;
        tile_mm(nr, w, dh, scale, Q + ic * a->q.sr, a->q.sr, 1, kt, BK, false, p + ic * BK, BK);
        tile_mm(nr, w, dh, 1.0f, dO + ic * c->gsr, c->gsr, 1, vt, BK, false, ds + ic * BK, BK);
    }
    for (int64_t i = 0; i < nq; i++) {
        float *prow = p + i * BK, *drow = ds + i * BK, lse = c->lse[(rq + i) * a->hq + h], di = c->dd[(rq + i) * a->hq + h];
        if (lse == -INFINITY) { /* the query saw no key: no gradient */
            memset(prow, 0, (size_t)nb * sizeof *prow);
            memset(drow, 0, (size_t)nb * sizeof *drow);
            continue;
        }
        if (a->mbase) {
            const float *mb = (const float *)a->mbase + a->mo[b] + h * a->mh[b] + (i0 + i) * a->mi[b] + j0 * a->mj[b];
            int64_t mj = a->mj[b];
            for (int64_t j = 0; j < nb; j++) prow[j] += mb[j * mj];
        }
        if (a->causal) /* keys after query i0 + i are hidden */
            for (int64_t j = i0 + i + 1 - j0 > 0 ? i0 + i + 1 - j0 : 0; j < nb; j++) prow[j] = -INFINITY, drow[j] = 0;
        probs_row(prow, drow, nb, lse, di);
        if (c->dmask) memcpy(c->dmask + c->fo[b] + (h * lq + i0 + i) * lk + j0, drow, (size_t)nb * sizeof *drow);
    }
    if (want_dkv) {
        float *dV = c->dv + (rk * a->hk + kh) * dh, *dK = c->dk + (rk * a->hk + kh) * dh;
        if (!diagonal) {
            tile_mm(nb, dh, nq, 1.0f, p, 1, BK, dO, c->gsr, true, dV, a->hk * dh);   /* dV += P^T dO */
            tile_mm(nb, dh, nq, scale, ds, 1, BK, Q, a->q.sr, true, dK, a->hk * dh); /* dK += scale dS^T Q */
        }
        for (int64_t jc = 0; diagonal && jc < nb; jc += VL) { /* from the first query that sees key j0 + jc */
            int64_t nr = nb - jc < VL ? nb - jc : VL, f = j0 + jc - i0 > 0 ? j0 + jc - i0 : 0;
            if (f >= nq) break;
            tile_mm(nr, dh, nq - f, 1.0f, p + f * BK + jc, 1, BK, dO + f * c->gsr, c->gsr, true, dV + jc * a->hk * dh, a->hk * dh);
            tile_mm(nr, dh, nq - f, scale, ds + f * BK + jc, 1, BK, Q + f * a->q.sr, a->q.sr, true, dK + jc * a->hk * dh, a->hk * dh);
        }
    }
    if (!want_dq) return;
    float *dQ = c->dq + (rq * a->hq + h) * dh;
    if (!diagonal) tile_mm(nq, dh, nb, scale, ds, BK, 1, K, a->k.sr, true, dQ, a->hq * dh); /* dQ += scale dS K */
    for (int64_t ic = 0; diagonal && ic < nq; ic += VL) {
        int64_t nr = nq - ic < VL ? nq - ic : VL, w = i0 + ic + nr - j0 < nb ? i0 + ic + nr - j0 : nb;
        if (w > 0) tile_mm(nr, dh, w, scale, ds + ic * BK, BK, 1, K, a->k.sr, true, dQ + ic * a->hq * dh, a->hq * dh);
    }
}

// one task: keys [j0, j0 + nj) (aligned to BK) x query heads [h0, h0 + nh) x queries [i0, i0 + ni) (aligned to BQ)
// of sequence b; scratch: kt, vt (Dh, BK), p, ds (BQ, BK)
static void backward_f32_task(const bw_ctx *c, const attn_task *t, float *scratch) {
    const attn_args *a = c->a;
    int64_t group = a->hq / a->hk, dh = a->dh, b = t->b;
    float *kt = scratch, *vt = kt + dh * BK, *p = vt + dh * BK, *ds = p + BQ * BK;
    for (int64_t kh = t->h0 / group; kh * group < t->h0 + t->nh; kh++) {
        const float *K = (const float *)a->k.base + a->ko[b] * a->k.sr + kh * a->k.sh;
        const float *V = (const float *)a->v.base + a->ko[b] * a->v.sr + kh * a->v.sh;
        int64_t hs = t->h0 > kh * group ? t->h0 : kh * group, he = t->h0 + t->nh < (kh + 1) * group ? t->h0 + t->nh : (kh + 1) * group;
        for (int64_t j0 = t->j0; j0 < t->j0 + t->nj; j0 += BK) {
            int64_t nb = t->j0 + t->nj - j0 < BK ? t->j0 + t->nj - j0 : BK;
            pack_t(kt, BK, K + j0 * a->k.sr, a->k.sr, nb, dh);
            pack_t(vt, BK, V + j0 * a->v.sr, a->v.sr, nb, dh);
            /* causal: queries before key j0 see none of this tile */
            int64_t first = a->causal && j0 > t->i0 ? t->i0 + (j0 - t->i0) / BQ * BQ : t->i0;
            for (int64_t h = hs; h < he; h++)
                for (int64_t i0 = first; i0 < t->i0 + t->ni; i0 += BQ) {
                    int64_t nq = t->i0 + t->ni - i0 < BQ ? t->i0 + t->ni - i0 : BQ;
                    if (a->causal && i0 + nq <= j0) continue; /* a last short tile before the keys */
                    backward_f32_tile(c, b, h, i0, nq, j0, nb, kt, vt, p, ds, t->dq, t->dkv);
                }
        }
    }
}

static double bw_cost(const attn_args *a, int64_t b, int64_t ni, int64_t nj) {
    double c = (double)ni * (double)nj;
    return (a->causal ? c / 2 : c) + 64.0 * (double)(ni + nj);
}

/* The task list: one pass, or the two-pass split when the costliest
 * (sequence, kv head) exceeds 40% of a thread's share (one pass costs 5
 * tile products per tile pair, the split 7: idle threads cost more). */
static attn_task *backward_tasks(const attn_args *a, int threads, int64_t *count) {
    int64_t group = a->hq / a->hk, n = 0;
    double total = 0, worst = 0;
    for (int64_t b = 0; b < a->batch; b++) {
        double c = bw_cost(a, b, a->ql[b], a->kl[b]) * (double)group;
        total += c * (double)a->hk, worst = c > worst ? c : worst;
    }
    bool split = threads > 1 && worst * threads > 0.4 * total;
    for (int64_t b = 0; b < a->batch; b++)
        n += split ? a->hk * ((a->kl[b] + SPLIT_KEYS - 1) / SPLIT_KEYS) + a->hq * ((a->ql[b] + BQ - 1) / BQ) : a->hk;
    attn_task *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    if (!t) return NULL;
    n = 0;
    for (int64_t b = 0; b < a->batch; b++) {
        int64_t lq = a->ql[b], lk = a->kl[b];
        if (!lq || !lk) continue;
        if (!split) {
            bool small = lq * lk * a->hq * a->dh <= SMALL_TASK_MACS; /* every head in one task */
            for (int64_t kh = 0; kh < a->hk; kh += small ? a->hk : 1) {
                int64_t nh = small ? a->hq : group;
                t[n++] = (attn_task){.b = b, .h0 = kh * group, .nh = nh, .i0 = 0, .ni = lq, .j0 = 0, .nj = keys_seen(a, b, lq), .dq = true,
                                     .dkv = true, .cost = bw_cost(a, b, lq, lk) * (double)nh};
            }
            continue;
        }
        for (int64_t kh = 0; kh < a->hk; kh++)
            for (int64_t j0 = 0; j0 < keys_seen(a, b, lq); j0 += SPLIT_KEYS) {
                int64_t nj = keys_seen(a, b, lq) - j0 < SPLIT_KEYS ? keys_seen(a, b, lq) - j0 : SPLIT_KEYS;
                t[n++] = (attn_task){.b = b, .h0 = kh * group, .nh = group, .i0 = 0, .ni = lq, .j0 = j0, .nj = nj,
                                     .dkv = true, .cost = 0.8 * bw_cost(a, b, lq, nj) * (double)group};
            }
        for (int64_t h = 0; h < a->hq; h++)
            for (int64_t i0 = 0; i0 < lq; i0 += BQ) {
                int64_t nq = lq - i0 < BQ ? lq - i0 : BQ;
                t[n++] = (attn_task){.b = b, .h0 = h, .nh = 1, .i0 = i0, .ni = nq, .j0 = 0, .nj = keys_seen(a, b, i0 + nq),
                                     .dq = true, .cost = 0.6 * bw_cost(a, b, nq, keys_seen(a, b, i0 + nq))};
            }
    }
    qsort(t, (size_t)n, sizeof *t, task_cmp);
    *count = n;
    return t;
}

// q, k, v, o, go (rows, heads, Dh), lse (Rq, Hq) -> dq (Rq, Hq, Dh), dk, dv (Rk, Hk, Dh), dmask
static jag_status backward_f32(const attn_args *a, const attn_view *o, const attn_view *go, const float *lse, float *dq,
                               float *dk, float *dv, float *dmask, const int64_t *fo) {
    int64_t rq = 0, dh = a->dh, hq = a->hq;
    for (int64_t b = 0; b < a->batch; b++) rq = a->qo[b] + a->ql[b] > rq ? a->qo[b] + a->ql[b] : rq;
    bool pack = go->sd != 1 || go->sr < dh; /* dO copied to (Rq, Hq, Dh) for the tile products */
    float *dd = malloc((size_t)(rq * hq + 1) * sizeof *dd), *gp = pack ? malloc((size_t)(rq * hq * dh + 1) * sizeof *gp) : NULL;
    int64_t n = 0;
    attn_task *tasks = dd && (gp || !pack) ? backward_tasks(a, jag_get_num_threads(), &n) : NULL;
    if (!tasks) {
        free(dd), free(gp);
        return jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention backward: out of memory");
    }
    bw_ctx c = {a, pack ? gp : (const float *)go->base, lse, dd, pack ? hq * dh : go->sr, pack ? dh : go->sh, dq, dk, dv, dmask, fo};
    bool failed = false;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int64_t b = 0; b < a->batch; b++) /* D = rowsum(dO o O), and dO packed */
            for (int64_t r = a->qo[b]; r < a->qo[b] + a->ql[b]; r++)
                for (int64_t h = 0; h < hq; h++) {
                    const float *g = (const float *)go->base + r * go->sr + h * go->sh, *y = (const float *)o->base + r * o->sr + h * o->sh;
                    double sum = 0;
                    if (go->sd == 1 && o->sd == 1) {
#pragma omp simd reduction(+ : sum)
                        for (int64_t d = 0; d < dh; d++) sum += (double)g[d] * (double)y[d];
                    } else {
                        sum = dot(go, r, h, o, r, h, dh, false);
                    }
                    dd[r * hq + h] = (float)sum;
                    for (int64_t d = 0; pack && d < dh; d++) gp[(r * hq + h) * dh + d] = g[d * go->sd];
                }
        float *scratch = malloc((size_t)(2 * dh * BK + 2 * BQ * BK) * sizeof *scratch);
        if (!scratch) {
#pragma omp atomic write
            failed = true;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < n; t++)
            if (scratch) backward_f32_task(&c, &tasks[t], scratch);
        free(scratch);
    }
    free(tasks), free(dd), free(gp);
    return failed ? jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention backward: out of memory") : JAG_OK;
}

/* The general backward (float64, strided head dims), split by (sequence,
 * key/value head) so that dk and dv rows are written by one thread: for
 * every query i of every query head in the group, with P_ij = exp(s_ij -
 * lse_i), D_i = dO_i . O_i, dP_ij = dO_i . v_j:
 *   dS_ij = P_ij (dP_ij - D_i)
 *   dq_i += scale sum_j dS_ij k_j,  dk_j += scale dS_ij q_i,  dv_j += P_ij dO_i
 * dq, dk, dv are contiguous (R, H, Dh), zeroed by the caller. */
jag_status jag__attention_backward(const attn_args *a, const attn_view *o, const attn_view *go, const char *lse,
                                   char *dq, char *dk, char *dv, char *dmask, const int64_t *fo) {
    if (tiled_ok(a))
        return backward_f32(a, o, go, (const float *)lse, (float *)dq, (float *)dk, (float *)dv, (float *)dmask, fo);
    bool f64 = a->f64, failed = false;
    int64_t group = a->hq / a->hk, dh = a->dh, tasks = a->batch * a->hk;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t b = t / a->hk, kh = t % a->hk, lq = a->ql[b], lk = a->kl[b];
        double *dkb = calloc((size_t)(lk * dh + 1), sizeof *dkb), *dvb = calloc((size_t)(lk * dh + 1), sizeof *dvb);
        double *dqr = malloc((size_t)(dh + 1) * sizeof *dqr);
        if (!dkb || !dvb || !dqr) {
            free(dkb), free(dvb), free(dqr);
#pragma omp atomic write
            failed = true;
            continue;
        }
        for (int64_t h = kh * group; h < (kh + 1) * group; h++)
            for (int64_t i = 0; i < lq; i++) {
                int64_t ri = a->qo[b] + i, nk = a->causal ? (i + 1 < lk ? i + 1 : lk) : lk;
                double li = ld(lse, f64, ri * a->hq + h);
                if (!nk || !isfinite(li)) continue;
                double di = dot(go, ri, h, o, ri, h, dh, f64);
                for (int64_t d = 0; d < dh; d++) dqr[d] = 0;
                for (int64_t j = 0; j < nk; j++) {
                    int64_t rj = a->ko[b] + j;
                    double s = a->scale * dot(&a->q, ri, h, &a->k, rj, kh, dh, f64) + mask_at(a, b, h, i, j), p = exp(s - li);
                    double dp = dot(go, ri, h, &a->v, rj, kh, dh, f64), ds = p * (dp - di);
                    if (dmask) { /* the score's gradient is the mask's */
                        int64_t x = fo[b] + (h * lq + i) * lk + j;
                        if (f64) ((double *)dmask)[x] = ds;
                        else ((float *)dmask)[x] = (float)ds;
                    }
                    int64_t ko = rj * a->k.sr + kh * a->k.sh, qo = ri * a->q.sr + h * a->q.sh, gof = ri * go->sr + h * go->sh;
                    for (int64_t d = 0; d < dh; d++) {
                        dqr[d] += a->scale * ds * ld(a->k.base, f64, ko + d * a->k.sd);
                        dkb[j * dh + d] += a->scale * ds * ld(a->q.base, f64, qo + d * a->q.sd);
                        dvb[j * dh + d] += p * ld(go->base, f64, gof + d * go->sd);
                    }
                }
                for (int64_t d = 0; d < dh; d++) {
                    int64_t x = (ri * a->hq + h) * dh + d;
                    if (f64) ((double *)dq)[x] = dqr[d];
                    else ((float *)dq)[x] = (float)dqr[d];
                }
            }
        for (int64_t j = 0; j < lk; j++)
            for (int64_t d = 0; d < dh; d++) {
                int64_t x = ((a->ko[b] + j) * a->hk + kh) * dh + d;
                if (f64) ((double *)dk)[x] = dkb[j * dh + d], ((double *)dv)[x] = dvb[j * dh + d];
                else ((float *)dk)[x] = (float)dkb[j * dh + d], ((float *)dv)[x] = (float)dvb[j * dh + d];
            }
        free(dkb), free(dvb), free(dqr);
    }
    return failed ? jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention backward: out of memory") : JAG_OK;
}
