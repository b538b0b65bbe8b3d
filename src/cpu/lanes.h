/* lanes.h — the first n lanes of an AVX2 vector: their masks (for masked
 * loads), and stores of them with plain stores.
 *
 * VMASKMOVPS / VMASKMOVPD stores cost 13-18 cycles each on Zen 3 (a loop
 * of them against plain stores: 13.5 against 1.0 cycles a store), where
 * these take two or three ordinary stores and a shuffle or two (2.6
 * cycles). Masked loads stay: 1.5 against 0.75 cycles. For the tails of
 * rows that are a few vectors long (a short sentence's attention tile, a
 * strip of columns), where a masked store per row was a measurable share. */
#ifndef JAG_CPU_LANES_H
#define JAG_CPU_LANES_H

#if defined(__AVX2__)
#include <immintrin.h>
#include <stdint.h>

/* masks of the lanes [0, n) (none for n <= 0, all for n >= the width):
 * 4 and 8 lanes of 32 bits, 4 of 64 */
static inline __m128i jag__mask_first4_epi32(int64_t n) {
    return _mm_cmpgt_epi32(_mm_set1_epi32((int)(n > 4 ? 4 : n < 0 ? 0 : n)), _mm_setr_epi32(0, 1, 2, 3));
}
static inline __m256i jag__mask_first8_epi32(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n > 8 ? 8 : n < 0 ? 0 : n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline __m256i jag__mask_first4_epi64(int64_t n) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}

/* lanes [0, n) of v at p, n in 0..4 */
static inline void jag__store_first4_ps(float *p, __m128 v, int64_t n) {
    if (n >= 4) {
        _mm_storeu_ps(p, v);
        return;
    }
    if (n & 2) {
        _mm_storel_pi((__m64 *)p, v);
        v = _mm_movehl_ps(v, v);
        p += 2;
    }
    if (n & 1) _mm_store_ss(p, v);
}

/* lanes [0, n) of v at p, n in 0..8 */
static inline void jag__store_first8_ps(float *p, __m256 v, int64_t n) {
    if (n >= 8) {
        _mm256_storeu_ps(p, v);
        return;
    }
    __m128 lo = _mm256_castps256_ps128(v);
    if (n >= 4) {
        _mm_storeu_ps(p, lo);
        lo = _mm256_extractf128_ps(v, 1);
        p += 4, n -= 4;
    }
    jag__store_first4_ps(p, lo, n);
}

/* lanes [0, n) of v at p, n in 0..4 */
static inline void jag__store_first4_pd(double *p, __m256d v, int64_t n) {
    if (n >= 4) {
        _mm256_storeu_pd(p, v);
        return;
    }
    __m128d lo = _mm256_castpd256_pd128(v);
    if (n >= 2) {
        _mm_storeu_pd(p, lo);
        lo = _mm256_extractf128_pd(v, 1);
        p += 2, n -= 2;
    }
    if (n) _mm_store_sd(p, lo);
}
#endif

#endif
