/* copy.c — strided, converting, broadcasting copies and fills: the kernels
 * behind clone, to_dtype, copy_, contiguous, reshape and fill_ (declared in
 * src/core/internal.h; the ops' META functions and boxed adapter are
 * src/dispatch/copy_op.c). */
#include "../core/half.h"
#include "../core/internal.h"
#include "kernels.h"
#include "iter.h"

#include <math.h>

/* A copy loop for each (destination, source) dtype pair. Conversions to an
 * integer type go through jag__store_from_double's saturation when the source
 * is floating (C leaves out-of-range float->int undefined). A source
 * broadcast along the row (stride 0: expand(g).contiguous(), the gradient
 * of a sum over the last dim) is read and converted once: the strided loop
 * stays scalar there (1024 x 1024 float32: 335 -> about 60 us). */

#define COPY_LOOP_BODY(DT, ST, CONVERT)                                        \
    {                                                                          \
        char *d = ptrs[0];                                                     \
        const char *s = ptrs[1];                                               \
        int64_t ds = strides[0], ss = strides[1];                              \
        if (ds == (int64_t)sizeof(DT) && ss == (int64_t)sizeof(ST)) {          \
            DT *dp = (DT *)d;                                                  \
            const ST *sp = (const ST *)s;                                      \
            for (int64_t i = 0; i < n; i++) dp[i] = CONVERT(sp[i]);            \
        } else if (ds == (int64_t)sizeof(DT) && ss == 0) { /* broadcast: one value */ \
            DT *dp = (DT *)d, v = CONVERT(*(const ST *)s);                     \
            for (int64_t i = 0; i < n; i++) dp[i] = v;                         \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++) *(DT *)(d + i * ds) = CONVERT(*(const ST *)(s + i * ss)); \
        }                                                                      \
    }

#define CONV_PLAIN(v) (v)
#define CONV_BOOL(v) ((uint8_t)((v) != 0))
static inline int32_t conv_f_i32(double v) {
    return isnan(v) ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v;
}
static inline int64_t conv_f_i64(double v) {
    return isnan(v) ? 0 : v <= -9223372036854775808.0 ? INT64_MIN : v >= 9223372036854774784.0 ? INT64_MAX : (int64_t)v;
}
#define CONV_F_I32(v) conv_f_i32((double)(v))
#define CONV_F_I64(v) conv_f_i64((double)(v))
#define CONV_I64_I32(v) ((int32_t)(v)) /* wraps, as torch does */

#define DEFINE_LOOP(NAME, DT, ST, CONVERT)                                     \
    static void NAME(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        (void)ctx;                                                             \
        COPY_LOOP_BODY(DT, ST, CONVERT)                                        \
    }

/* dst float32 */
DEFINE_LOOP(copy_f32_f32, float, float, CONV_PLAIN)
DEFINE_LOOP(copy_f32_f64, float, double, (float))
DEFINE_LOOP(copy_f32_i32, float, int32_t, (float))
DEFINE_LOOP(copy_f32_i64, float, int64_t, (float))
DEFINE_LOOP(copy_f32_b, float, uint8_t, (float))
/* dst float64 */
DEFINE_LOOP(copy_f64_f32, double, float, (double))
DEFINE_LOOP(copy_f64_f64, double, double, CONV_PLAIN)
DEFINE_LOOP(copy_f64_i32, double, int32_t, (double))
DEFINE_LOOP(copy_f64_i64, double, int64_t, (double))
DEFINE_LOOP(copy_f64_b, double, uint8_t, (double))
/* dst int32 */
DEFINE_LOOP(copy_i32_f32, int32_t, float, CONV_F_I32)
DEFINE_LOOP(copy_i32_f64, int32_t, double, CONV_F_I32)
DEFINE_LOOP(copy_i32_i32, int32_t, int32_t, CONV_PLAIN)
DEFINE_LOOP(copy_i32_i64, int32_t, int64_t, CONV_I64_I32)
DEFINE_LOOP(copy_i32_b, int32_t, uint8_t, (int32_t))
/* dst int64 */
DEFINE_LOOP(copy_i64_f32, int64_t, float, CONV_F_I64)
DEFINE_LOOP(copy_i64_f64, int64_t, double, CONV_F_I64)
DEFINE_LOOP(copy_i64_i32, int64_t, int32_t, (int64_t))
DEFINE_LOOP(copy_i64_i64, int64_t, int64_t, CONV_PLAIN)
DEFINE_LOOP(copy_i64_b, int64_t, uint8_t, (int64_t))
/* dst bool */
DEFINE_LOOP(copy_b_f32, uint8_t, float, CONV_BOOL)
DEFINE_LOOP(copy_b_f64, uint8_t, double, CONV_BOOL)
DEFINE_LOOP(copy_b_i32, uint8_t, int32_t, CONV_BOOL)
DEFINE_LOOP(copy_b_i64, uint8_t, int64_t, CONV_BOOL)
DEFINE_LOOP(copy_b_b, uint8_t, uint8_t, CONV_PLAIN)

/* To and from the half types: a half value widens exactly to float32, and
 * every other source narrows through float32 (as torch converts a double or
 * an integer to a half type); float32 to float32 then runs the plain loop. */
#define F16_IN(v) jag__f16_to_f32(v)
#define BF16_IN(v) jag__bf16_to_f32(v)
#define F16_OUT(v) jag__f32_to_f16((float)(v))
#define BF16_OUT(v) jag__f32_to_bf16((float)(v))
#define F16_I32(v) conv_f_i32((double)jag__f16_to_f32(v))
#define BF16_I32(v) conv_f_i32((double)jag__bf16_to_f32(v))
#define F16_I64(v) conv_f_i64((double)jag__f16_to_f32(v))
#define BF16_I64(v) conv_f_i64((double)jag__bf16_to_f32(v))
#define F16_B(v) ((uint8_t)(((v) & 0x7fffu) != 0)) /* nonzero, NaN included */
#define F16_TO_BF16(v) jag__f32_to_bf16(jag__f16_to_f32(v))
#define BF16_TO_F16(v) jag__f32_to_f16(jag__bf16_to_f32(v))

DEFINE_LOOP(copy_f32_f16_scalar, float, uint16_t, F16_IN)
DEFINE_LOOP(copy_f32_bf16_scalar, float, uint16_t, BF16_IN)
DEFINE_LOOP(copy_f16_f32_scalar, uint16_t, float, F16_OUT)
DEFINE_LOOP(copy_bf16_f32_scalar, uint16_t, float, BF16_OUT)
DEFINE_LOOP(copy_f64_f16, double, uint16_t, F16_IN)
DEFINE_LOOP(copy_f64_bf16, double, uint16_t, BF16_IN)
DEFINE_LOOP(copy_i32_f16, int32_t, uint16_t, F16_I32)
DEFINE_LOOP(copy_i32_bf16, int32_t, uint16_t, BF16_I32)
DEFINE_LOOP(copy_i64_f16, int64_t, uint16_t, F16_I64)
DEFINE_LOOP(copy_i64_bf16, int64_t, uint16_t, BF16_I64)
DEFINE_LOOP(copy_b_f16, uint8_t, uint16_t, F16_B)
DEFINE_LOOP(copy_b_bf16, uint8_t, uint16_t, F16_B)
DEFINE_LOOP(copy_f16_f64, uint16_t, double, F16_OUT)
DEFINE_LOOP(copy_f16_i32, uint16_t, int32_t, F16_OUT)
DEFINE_LOOP(copy_f16_i64, uint16_t, int64_t, F16_OUT)
DEFINE_LOOP(copy_f16_b, uint16_t, uint8_t, F16_OUT)
DEFINE_LOOP(copy_f16_f16, uint16_t, uint16_t, CONV_PLAIN)
DEFINE_LOOP(copy_f16_bf16, uint16_t, uint16_t, BF16_TO_F16)
DEFINE_LOOP(copy_bf16_f64, uint16_t, double, BF16_OUT)
DEFINE_LOOP(copy_bf16_i32, uint16_t, int32_t, BF16_OUT)
DEFINE_LOOP(copy_bf16_i64, uint16_t, int64_t, BF16_OUT)
DEFINE_LOOP(copy_bf16_b, uint16_t, uint8_t, BF16_OUT)
DEFINE_LOOP(copy_bf16_f16, uint16_t, uint16_t, F16_TO_BF16)
DEFINE_LOOP(copy_bf16_bf16, uint16_t, uint16_t, CONV_PLAIN)

/* float32 <-> half on contiguous rows take the array conversions of half.h
 * (F16C when the build targets it); strided rows the scalar loops. */
static void copy_f32_f16(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) {
    if (strides[0] == 4 && strides[1] == 2) jag__f16_to_f32_n((float *)ptrs[0], (const uint16_t *)ptrs[1], n);
    else copy_f32_f16_scalar(ptrs, strides, n, ctx);
}
static void copy_f16_f32(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) {
    if (strides[0] == 2 && strides[1] == 4) jag__f32_to_f16_n((uint16_t *)ptrs[0], (const float *)ptrs[1], n);
    else copy_f16_f32_scalar(ptrs, strides, n, ctx);
}
static void copy_f32_bf16(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) {
    if (strides[0] == 4 && strides[1] == 2) jag__bf16_to_f32_n((float *)ptrs[0], (const uint16_t *)ptrs[1], n);
    else copy_f32_bf16_scalar(ptrs, strides, n, ctx);
}
static void copy_bf16_f32(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) {
    if (strides[0] == 2 && strides[1] == 4) jag__f32_to_bf16_n((uint16_t *)ptrs[0], (const float *)ptrs[1], n);
    else copy_bf16_f32_scalar(ptrs, strides, n, ctx);
}

/* [dst dtype][src dtype], in jag_dtype order: float32, float64, int32,
 * int64, bool, float16, bfloat16. */
static const jag_loop_fn copy_loops[JAG_DTYPE_COUNT][JAG_DTYPE_COUNT] = {
    {copy_f32_f32, copy_f32_f64, copy_f32_i32, copy_f32_i64, copy_f32_b, copy_f32_f16, copy_f32_bf16},
    {copy_f64_f32, copy_f64_f64, copy_f64_i32, copy_f64_i64, copy_f64_b, copy_f64_f16, copy_f64_bf16},
    {copy_i32_f32, copy_i32_f64, copy_i32_i32, copy_i32_i64, copy_i32_b, copy_i32_f16, copy_i32_bf16},
    {copy_i64_f32, copy_i64_f64, copy_i64_i32, copy_i64_i64, copy_i64_b, copy_i64_f16, copy_i64_bf16},
    {copy_b_f32, copy_b_f64, copy_b_i32, copy_b_i64, copy_b_b, copy_b_f16, copy_b_bf16},
    {copy_f16_f32, copy_f16_f64, copy_f16_i32, copy_f16_i64, copy_f16_b, copy_f16_f16, copy_f16_bf16},
    {copy_bf16_f32, copy_bf16_f64, copy_bf16_i32, copy_bf16_i64, copy_bf16_b, copy_bf16_f16, copy_bf16_bf16},
};

/* Naive reference: one element at a time through double (exact for every
 * value float32/int32/bool hold; int64 beyond 2^53 is compared in tests only
 * below that). */
void jag__copy_ref(jag_tensor *dst, const jag_tensor *src) {
    int64_t strides[JAG_MAX_DIMS];
    jag__broadcast_strides(src, dst->sizes, dst->ndim, strides);
    int64_t n = jag_numel(dst), idx[JAG_MAX_DIMS] = {0};
    size_t ds = jag_dtype_size(dst->dtype), ss = jag_dtype_size(src->dtype);
    for (int64_t e = 0; e < n; e++) {
        int64_t od = 0, os = 0;
        for (int d = 0; d < dst->ndim; d++) od += idx[d] * dst->strides[d], os += idx[d] * strides[d];
        double v = jag__load_as_double(jag__ptr(src) + os * (int64_t)ss, src->dtype);
        jag__store_from_double(jag__ptr(dst) + od * (int64_t)ds, dst->dtype, v);
        for (int d = dst->ndim - 1; d >= 0; d--) {
            if (++idx[d] < dst->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

/* ---- copies that read the source across its rows --------------------------
 *
 * A transposed or permuted source made contiguous: the destination's inner
 * dim steps through the source by a whole row, so the element-by-element
 * loop touches a new cache line (and soon a new page) per element. Instead
 * the copy goes by blocks over the two dims involved (dim a, along which
 * the source is contiguous, and the destination's inner dim): a task takes
 * BLOCK destination rows (BLOCK consecutive source columns, a whole line of
 * float32) and walks the inner dim 8 at a time, 4-byte types transposing
 * 8 x 8 blocks in registers (AVX). Rows a power of two apart fall in one
 * set of the L1 cache (4 KiB apart here, 8 ways), which is what limits the
 * block: 32 x 32 tiles copied element by element took 1.08 ms on float32
 * (1024, 1024), 8 x 8 ones 0.40 ms. float32 transposes made contiguous,
 * against the loop (best of 20, the two builds in turn): (1024, 1024)
 * 1.68-1.79 -> 0.16-0.19 ms, (1000, 1000) 0.36-0.37 -> 0.08 ms, (4096,
 * 1024) 13.5-13.9 -> 1.8-2.3 ms (a memcpy-like clone of the same bytes:
 * 0.05, 0.05 and 0.6-0.9 ms). Same dtype only (conversions keep the loops
 * above); jag__copy_ref is the reference (test_copy_across_rows). */
#define BLOCK 16

#if defined(__AVX__)
#include <immintrin.h>
/* d[c ld + r] = s[r ls + c] for r, c < 8: 8 x 8 floats (any 4-byte type) */
static inline void transpose8x8(const uint32_t *s, int64_t ls, uint32_t *d, int64_t ld) {
    __m256 r[8], t[8];
    for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps((const float *)(s + k * ls));
    for (int k = 0; k < 8; k += 2) t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]), t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    for (int k = 0; k < 8; k += 4) {
        r[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps((float *)(d + k * ld), _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
        _mm256_storeu_ps((float *)(d + (k + 4) * ld), _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
    }
}
#endif

/* dst[i da + j es] = src[i es + j sj] for i < ni (<= BLOCK), j < nj;
 * elements of es bytes, strides in bytes */
#define BLOCK_COPY(T)                                                          \
    static void block_copy_##T(char *dst, const char *src, int64_t ni, int64_t nj, int64_t da, int64_t sj) { \
        for (int64_t j0 = 0; j0 < nj; j0 += BLOCK) {                           \
            int64_t mj = nj - j0 < BLOCK ? nj - j0 : BLOCK;                    \
            for (int64_t i = 0; i < ni; i++) {                                 \
                T *d = (T *)(dst + i * da) + j0;                               \
                const char *s = src + i * (int64_t)sizeof(T) + j0 * sj;        \
                for (int64_t j = 0; j < mj; j++) d[j] = *(const T *)(s + j * sj); \
            }                                                                  \
        }                                                                      \
    }
BLOCK_COPY(uint8_t)
BLOCK_COPY(uint16_t)
BLOCK_COPY(uint64_t)
#if defined(__AVX__)
static void block_copy_uint32_t(char *dst, const char *src, int64_t ni, int64_t nj, int64_t da, int64_t sj) {
    int64_t j0 = 0;
    if (ni % 8 == 0 && da % 4 == 0 && sj % 4 == 0) /* whole blocks in registers */
        for (; j0 + 8 <= nj; j0 += 8)
            for (int64_t i = 0; i < ni; i += 8)
                transpose8x8((const uint32_t *)(src + i * 4 + j0 * sj), sj / 4, (uint32_t *)(dst + i * da) + j0, da / 4);
    for (; j0 < nj; j0++)
        for (int64_t i = 0; i < ni; i++) ((uint32_t *)(dst + i * da))[j0] = *(const uint32_t *)(src + i * 4 + j0 * sj);
}
#else
BLOCK_COPY(uint32_t)
#endif

static bool copy_across_rows(const jag_iter *it, size_t es) {
    int nd = it->ndim, in = nd - 1, a = -1;
    if (nd < 2 || (es != 1 && es != 2 && es != 4 && es != 8)) return false;
    const int64_t *ds = it->strides[0], *ss = it->strides[1];
    if (ds[in] != (int64_t)es || ss[in] == (int64_t)es || ss[in] == 0 || it->sizes[in] < 4) return false;
    for (int d = nd - 2; d >= 0 && a < 0; d--)
        if (ss[d] == (int64_t)es && it->sizes[d] >= BLOCK) a = d;
    if (a < 0) return false;
    /* the other dims, flattened: outer index o -> their offsets */
    int od[JAG_MAX_DIMS], no = 0;
    int64_t outer = 1;
    for (int d = 0; d < in; d++)
        if (d != a) od[no++] = d, outer *= it->sizes[d];
    int64_t ni = it->sizes[a], nj = it->sizes[in], ti = (ni + BLOCK - 1) / BLOCK, tasks = outer * ti;
    void (*fn)(char *, const char *, int64_t, int64_t, int64_t, int64_t) =
        es == 1 ? block_copy_uint8_t : es == 2 ? block_copy_uint16_t : es == 4 ? block_copy_uint32_t : block_copy_uint64_t;
    JAG_PARALLEL_IF(it->numel >= JAG_GRAIN_MEMORY, "omp parallel for schedule(static)",
        for (int64_t t = 0; t < tasks; t++) {
            int64_t o = t / ti, i0 = (t % ti) * BLOCK, rest = o;
            char *dst = it->base[0] + i0 * ds[a];
            const char *src = it->base[1] + i0 * ss[a];
            for (int k = no - 1; k >= 0; k--) { /* o's index in each other dim, the last fastest */
                int d = od[k];
                int64_t x = rest % it->sizes[d];
                rest /= it->sizes[d];
                dst += x * ds[d], src += x * ss[d];
            }
            fn(dst, src, ni - i0 < BLOCK ? ni - i0 : BLOCK, nj, ds[a], ss[in]);
        });
    return true;
}

/* Copy src (broadcast to dst's shape, converted) into dst. Shapes are already
 * checked. Overlap between src and dst is handled by the caller. */
void jag__copy_into(jag_tensor *dst, const jag_tensor *src) {
    int64_t src_strides[JAG_MAX_DIMS];
    jag__broadcast_strides(src, dst->sizes, dst->ndim, src_strides);
    char *base[2] = {jag__ptr(dst), jag__ptr(src)};
    const int64_t *strides[2] = {dst->strides, src_strides};
    size_t sizes[2] = {jag_dtype_size(dst->dtype), jag_dtype_size(src->dtype)};
    jag_iter it;
    jag__iter_init(&it, dst->sizes, dst->ndim, 2, base, strides, sizes);
    if (dst->dtype == src->dtype && copy_across_rows(&it, sizes[0])) return;
    jag__iter_run_grain(&it, JAG_GRAIN_MEMORY, copy_loops[dst->dtype][src->dtype], NULL);
}

/* ---- fill --------------------------------------------------------------- */

typedef struct { unsigned char bytes[8]; size_t size; } fill_ctx;

static void fill_loop(char *const *ptrs, const int64_t *strides, int64_t n, void *vctx) {
    const fill_ctx *c = vctx;
    char *d = ptrs[0];
    if (c->size == 2 && strides[0] == 2) {
        uint16_t v;
        memcpy(&v, c->bytes, 2);
        for (int64_t i = 0; i < n; i++) ((uint16_t *)d)[i] = v;
    } else if (c->size == 4 && strides[0] == 4) {
        uint32_t v;
        memcpy(&v, c->bytes, 4);
        for (int64_t i = 0; i < n; i++) ((uint32_t *)d)[i] = v;
    } else if (c->size == 8 && strides[0] == 8) {
        uint64_t v;
        memcpy(&v, c->bytes, 8);
        for (int64_t i = 0; i < n; i++) ((uint64_t *)d)[i] = v;
    } else {
        for (int64_t i = 0; i < n; i++) memcpy(d + i * strides[0], c->bytes, c->size);
    }
}

void jag__fill(jag_tensor *dst, double value) {
    fill_ctx c = {.size = jag_dtype_size(dst->dtype)};
    jag__store_from_double(c.bytes, dst->dtype, value);
    char *base[1] = {jag__ptr(dst)};
    const int64_t *strides[1] = {dst->strides};
    size_t sizes[1] = {c.size};
    jag_iter it;
    jag__iter_init(&it, dst->sizes, dst->ndim, 1, base, strides, sizes);
    jag__iter_run_grain(&it, JAG_GRAIN_MEMORY, fill_loop, &c);
}
