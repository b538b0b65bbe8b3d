/* half.h — float16 (IEEE binary16) and bfloat16 conversions to and from
 * float32, one value at a time and over contiguous arrays.
 *
 * Narrowing rounds to nearest, ties to even; NaN stays NaN (quiet), values
 * beyond the largest finite value become infinities, results below the
 * smallest normal become subnormals (or zero) correctly rounded. Widening is
 * exact. The array forms use F16C when the build targets it (the same
 * results: the instructions round to nearest even and keep subnormals);
 * the scalar forms are the reference. */
#ifndef JAG_HALF_H
#define JAG_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__F16C__)
#include <immintrin.h>
#endif

static inline uint32_t jag__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float jag__f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bfloat16 is the upper half of a float32. */
static inline float jag__bf16_to_f32(uint16_t h) { return jag__f32_from_bits((uint32_t)h << 16); }

static inline uint16_t jag__f32_to_bf16(float f) {
    uint32_t u = jag__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN, kept quiet */
    /* ties to even: add 0x7fff plus the lowest kept bit; a carry into the
     * exponent gives the next binade or infinity, as it should */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float jag__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return jag__f32_from_bits(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return jag__f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t jag__f32_to_f16(float f) {
    uint32_t u = jag__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN, kept quiet */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 (or is inf) */
    if (a < 0x38800000u) {
        /* below 2^-14: a subnormal or zero result, in units of 2^-24. Adding
         * 0.5 (2^-1 in those units) lets the float32 adder round the
         * significand to an integer count, ties to even. */
        float v = jag__f32_from_bits(a) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(jag__f32_bits(v) - jag__f32_bits(0.5f)));
    }
    /* normal: rebias the exponent (127 -> 15) and round away 13 bits */
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

/* Contiguous arrays. */
static inline void jag__f16_to_f32_n(float *dst, const uint16_t *src, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = jag__f16_to_f32(src[i]);
}

static inline void jag__f32_to_f16_n(uint16_t *dst, const float *src, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) dst[i] = jag__f32_to_f16(src[i]);
}

static inline void jag__bf16_to_f32_n(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = jag__bf16_to_f32(src[i]);
}

static inline void jag__f32_to_bf16_n(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = jag__f32_to_bf16(src[i]);
}

#endif
