/* test_lanes.c — src/cpu/lanes.h: the first n lanes of a vector stored with
 * plain stores, and their masks. Each n from 0 to the width, at every
 * offset of a 16-float window: exactly lanes [0, n) are written, with v's
 * values in order, and every other float of the buffer keeps its
 * sentinel. The masks: all ones in lanes [0, n) and zeros after, for n
 * from below 0 to past the width. */
#include "test.h"

#include "cpu/lanes.h"

#include <string.h>

#if defined(__AVX2__)
static void test_store_first_lanes(void) {
    TEST_BEGIN();
    float buf[32], want[32];
    double dbuf[16], dwant[16];
    const float sentinel = -7.5f;
    for (int width = 4; width <= 8; width += 4)
        for (int n = 0; n <= width; n++)
            for (int at = 0; at < 16; at++) {
                for (int i = 0; i < 32; i++) buf[i] = want[i] = sentinel;
                float src[8];
                for (int i = 0; i < 8; i++) src[i] = (float)(i + 1) * 1.25f;
                for (int i = 0; i < n; i++) want[at + i] = src[i];
                if (width == 8) jag__store_first8_ps(buf + at, _mm256_loadu_ps(src), n);
                else jag__store_first4_ps(buf + at, _mm_loadu_ps(src), n);
                CHECK_MSG(memcmp(buf, want, sizeof buf) == 0, "float width %d, n %d, at %d", width, n, at);
            }
    for (int n = 0; n <= 4; n++)
        for (int at = 0; at < 8; at++) {
            for (int i = 0; i < 16; i++) dbuf[i] = dwant[i] = -7.5;
            double src[4] = {1.5, -2.25, 3.0, 4.125};
            for (int i = 0; i < n; i++) dwant[at + i] = src[i];
            jag__store_first4_pd(dbuf + at, _mm256_loadu_pd(src), n);
            CHECK_MSG(memcmp(dbuf, dwant, sizeof dbuf) == 0, "double n %d, at %d", n, at);
        }
}

static void test_mask_first_lanes(void) {
    TEST_BEGIN();
    for (int64_t n = -2; n <= 10; n++) {
        int32_t m4[4], m8[8];
        int64_t m64[4];
        _mm_storeu_si128((__m128i *)m4, jag__mask_first4_epi32(n));
        _mm256_storeu_si256((__m256i *)m8, jag__mask_first8_epi32(n));
        _mm256_storeu_si256((__m256i *)m64, jag__mask_first4_epi64(n));
        for (int i = 0; i < 8; i++) {
            if (i < 4) {
                CHECK_MSG(m4[i] == (i < n ? -1 : 0), "epi32 x 4, n %lld, lane %d", (long long)n, i);
                CHECK_MSG(m64[i] == (i < n ? -1 : 0), "epi64 x 4, n %lld, lane %d", (long long)n, i);
            }
            CHECK_MSG(m8[i] == (i < n ? -1 : 0), "epi32 x 8, n %lld, lane %d", (long long)n, i);
        }
    }
}
#else
/* lanes.h is AVX2 code: a build for another target has none of it */
static void test_store_first_lanes(void) { printf("test_lanes: no AVX2 in this build\n"); }
static void test_mask_first_lanes(void) {}
#endif

TEST_MAIN(test_store_first_lanes, test_mask_first_lanes)
