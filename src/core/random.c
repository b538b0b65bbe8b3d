/* random.c — reproducible random numbers: Philox-4x32-10, counter based.
 *
 * Element i of a draw uses counter (offset + i / 2, 0) under key seed (a
 * block's four words make two 53-bit uniforms), so the numbers depend only on
 * the seed and how many were drawn before, never on the thread count; blocks
 * are made 32 at a time. Written here rather than taken from a library: the
 * generator is a few dozen lines, and a dependency would not make it more
 * reproducible. */
#include "internal.h"
#include "half.h"

#include <math.h>

struct jag_generator {
    uint32_t magic; /* JAG_HANDLE_LIVE; JAG_HANDLE_FREED once freed */
    uint64_t seed;
    uint64_t offset; /* Philox blocks consumed so far */
};

static JAG_TLS jag_generator default_generator;

void jag_manual_seed(uint64_t seed) {
    default_generator.seed = seed;
    default_generator.offset = 0;
}

jag_status jag_generator_new(uint64_t seed, jag_generator **out) {
    if (!out) return jag__error(JAG_EINVAL, "jag_generator_new: argument 'out' is NULL");
    jag_generator *g = malloc(sizeof *g);
    if (!g) return jag__error(JAG_ENOMEM, "jag_generator_new: out of memory");
    g->magic = JAG_HANDLE_LIVE;
    g->seed = seed;
    g->offset = 0;
    *out = g;
    return JAG_OK;
}

jag_status jag_generator_free(jag_generator *g) {
    if (!g) return JAG_OK;
    if (g->magic != JAG_HANDLE_LIVE)
        return jag__error(JAG_EINVAL, "jag_generator_free: argument 'g' was already freed");
    g->magic = JAG_HANDLE_FREED;
    jag__handle_retire(g, free);
    return JAG_OK;
}

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* Philox-4x32-10 of the counter (counter, 0) under key: the naive reference,
 * one block (tests check the vector version below against it). */
void jag__philox_ref(uint64_t counter, uint64_t key, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1, c3 = (uint32_t)p0, c0 = n0, c2 = n2;
        k0 += PHILOX_W0, k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* The same for the PHILOX_LANES counters base, base + 1, ...: w[k][j] is word
 * k of block base + j. The rounds run across the blocks, sixteen to a
 * vector: one block alone is bound by its chain of dependent multiplies. */
#define PHILOX_LANES 32
#if defined(__AVX512F__)
#include <immintrin.h>
/* The high and low 32 bits of m * x for each of the 16 lanes of x: even
 * lanes from the 64-bit products of the even lanes, odd lanes from those of
 * the odd lanes shifted down (gcc would use a 64-bit multiply per lane). */
static inline void mul_hi_lo(__m512i x, __m512i m, __m512i *hi, __m512i *lo) {
    __m512i even = _mm512_mul_epu32(x, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

/* Two independent sets of 16 blocks per call, their rounds interleaved: one
 * set alone waits on its multiplies' latency. */
static void philox_lanes(uint64_t base, uint64_t key, uint32_t w[4][PHILOX_LANES]) {
    uint32_t lo[PHILOX_LANES], hi[PHILOX_LANES];
    for (int j = 0; j < PHILOX_LANES; j++) {
        uint64_t c = base + (uint64_t)j;
        lo[j] = (uint32_t)c, hi[j] = (uint32_t)(c >> 32);
    }
    __m512i a0 = _mm512_loadu_si512(lo), a1 = _mm512_loadu_si512(hi), a2 = _mm512_setzero_si512(), a3 = a2;
    __m512i b0 = _mm512_loadu_si512(lo + 16), b1 = _mm512_loadu_si512(hi + 16), b2 = a2, b3 = a2;
    const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        const __m512i kk0 = _mm512_set1_epi32((int)k0), kk1 = _mm512_set1_epi32((int)k1);
        __m512i ha0, la0, ha1, la1, hb0, lb0, hb1, lb1;
        mul_hi_lo(a0, m0, &ha0, &la0);
        mul_hi_lo(a2, m1, &ha1, &la1);
        mul_hi_lo(b0, m0, &hb0, &lb0);
        mul_hi_lo(b2, m1, &hb1, &lb1);
        a0 = _mm512_xor_si512(_mm512_xor_si512(ha1, a1), kk0), a2 = _mm512_xor_si512(_mm512_xor_si512(ha0, a3), kk1);
        b0 = _mm512_xor_si512(_mm512_xor_si512(hb1, b1), kk0), b2 = _mm512_xor_si512(_mm512_xor_si512(hb0, b3), kk1);
        a1 = la1, a3 = la0, b1 = lb1, b3 = lb0;
        k0 += PHILOX_W0, k1 += PHILOX_W1;
    }
    _mm512_storeu_si512(w[0], a0), _mm512_storeu_si512(w[1], a1), _mm512_storeu_si512(w[2], a2), _mm512_storeu_si512(w[3], a3);
    _mm512_storeu_si512(w[0] + 16, b0), _mm512_storeu_si512(w[1] + 16, b1), _mm512_storeu_si512(w[2] + 16, b2),
        _mm512_storeu_si512(w[3] + 16, b3);
}
#else
static void philox_lanes(uint64_t base, uint64_t key, uint32_t w[4][PHILOX_LANES]) {
    for (int j = 0; j < PHILOX_LANES; j++) {
        uint32_t o[4];
        jag__philox_ref(base + (uint64_t)j, key, o);
        for (int k = 0; k < 4; k++) w[k][j] = o[k];
    }
}
#endif

/* Uniform in [0, 1) with 24 (float) or 53 (double) random bits. */
static double u01_53(uint32_t a, uint32_t b) { return (double)(((uint64_t)a << 21) ^ b) * 0x1.0p-53; }

/* The half value just below the finite value with bits h (toward -inf). */
static uint16_t half_step_down(uint16_t h) {
    if ((h & 0x7fff) == 0) return 0x8001; /* below zero: the smallest negative subnormal */
    return h & 0x8000 ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

jag_status jag__random_new(const char *op, const int64_t *sizes, int ndim, double a, double b, jag_dtype dtype,
                           jag_generator *g, jag_distribution kind, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if (!jag_dtype_is_floating(dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'dtype' is %s, expected a floating dtype", op, jag_dtype_name(dtype));
    if (!isfinite(a) || !isfinite(b))
        return jag__error(JAG_EINVAL, "%s: parameters %g and %g must be finite", op, a, b);
    if (kind == JAG_DIST_UNIFORM && b < a)
        return jag__error(JAG_EINVAL, "%s: argument 'high' (%g) is below 'low' (%g)", op, b, a);
    if (kind == JAG_DIST_NORMAL && b < 0)
        return jag__error(JAG_EINVAL, "%s: argument 'std' is %g, expected >= 0", op, b);
    if (g && g->magic != JAG_HANDLE_LIVE)
        return jag__error(JAG_EINVAL, "%s: argument 'generator' was freed", op);
    if (!g) g = &default_generator;
    jag__enter();
    jag_tensor *t = jag__tensor_new(op, sizes, ndim, dtype, false, false);
    if (!t) return jag__leave(jag_last_status(), NULL, 0);
    int64_t n = jag_numel(t);
    /* Two uniforms per element (53-bit doubles; Box-Muller pairs): 4 words
     * per Philox block give 2 elements. */
    int64_t blocks = (n + 1) / 2;
    float *f32 = dtype == JAG_FLOAT32 ? (float *)jag__ptr(t) : NULL;
    double *f64 = dtype == JAG_FLOAT64 ? (double *)jag__ptr(t) : NULL;
    int64_t chunks = (blocks + PHILOX_LANES - 1) / PHILOX_LANES;
    /* float32 uniforms that round up to `high` move just below it (half-open) */
    const float fb = (float)b, below = nextafterf(fb, -INFINITY);
    const bool clamp_f32 = kind == JAG_DIST_UNIFORM && b > a;
    /* half dtypes: the float32 draw rounded once; uniforms that round up to
     * `high` move to the half value below it */
    uint16_t *f16 = jag_dtype_is_half(dtype) ? (uint16_t *)jag__ptr(t) : NULL;
    const bool bf16 = dtype == JAG_BFLOAT16;
    uint16_t half_below = 0;
    if (f16) {
        uint16_t hb = bf16 ? jag__f32_to_bf16(fb) : jag__f32_to_f16(fb);
        half_below = (bf16 ? jag__bf16_to_f32(hb) : jag__f16_to_f32(hb)) >= fb ? half_step_down(hb) : hb;
    }
    /* Philox rounds per element, and log and sincos for normals: COMPUTE */
    JAG_PARALLEL_IF(n >= JAG_GRAIN_COMPUTE, "omp parallel for schedule(static)",
        for (int64_t ch = 0; ch < chunks; ch++) {
            uint32_t w[4][PHILOX_LANES];
            philox_lanes(g->offset + (uint64_t)(ch * PHILOX_LANES), g->seed, w);
            double v[2 * PHILOX_LANES]; /* element 2 j from words 0, 1 of block j; 2 j + 1 from words 2, 3 */
            if (kind == JAG_DIST_UNIFORM) {
                for (int j = 0; j < PHILOX_LANES; j++) {
                    v[2 * j] = a + (b - a) * u01_53(w[0][j], w[1][j]);
                    v[2 * j + 1] = a + (b - a) * u01_53(w[2][j], w[3][j]);
                }
            } else {
                for (int j = 0; j < PHILOX_LANES; j++) {
                    double u1 = u01_53(w[0][j], w[1][j]), u2 = u01_53(w[2][j], w[3][j]);
                    double r = sqrt(-2.0 * log(1.0 - u1)); /* 1 - u1 is in (0, 1] */
                    v[2 * j] = a + b * r * cos(2.0 * M_PI * u2);
                    v[2 * j + 1] = a + b * r * sin(2.0 * M_PI * u2);
                }
            }
            int64_t i0 = ch * 2 * PHILOX_LANES, m = n - i0 < 2 * PHILOX_LANES ? n - i0 : 2 * PHILOX_LANES;
            if (f32) {
                for (int64_t i = 0; i < m; i++) {
                    float x = (float)v[i];
                    f32[i0 + i] = clamp_f32 && x >= fb ? below : x;
                }
            } else if (f16) {
                for (int64_t i = 0; i < m; i++) {
                    float x = (float)v[i];
                    uint16_t h = bf16 ? jag__f32_to_bf16(x) : jag__f32_to_f16(x);
                    float back = bf16 ? jag__bf16_to_f32(h) : jag__f16_to_f32(h);
                    f16[i0 + i] = clamp_f32 && back >= fb ? half_below : h;
                }
            } else {
                memcpy(f64 + i0, v, (size_t)m * sizeof *v);
            }
        });
    g->offset += (uint64_t)blocks;
    *out = t;
    return jag__leave(JAG_OK, out, 1);
}
