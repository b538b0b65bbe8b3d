/* stream.h — non-temporal (streaming) stores: when a kernel uses them and
 * how it writes with them. A streamed line goes to memory without being
 * read into the caches first. */
#ifndef JAG_CPU_STREAM_H
#define JAG_CPU_STREAM_H

#include "../core/internal.h"

#include <stdint.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

/* Whether a kernel writing `bytes` of output at p should use streaming
 * stores (which need p 32-byte aligned, and a target with AVX). Ordinary
 * stores read each output line in before writing it (a third of a
 * streaming op's memory traffic) and evict the input; from 16 MiB on, half
 * the last-level cache here (32 MiB), an output and its input do not both
 * stay there for the next op, which then reads the output from memory
 * either way. layer_norm of float32 rows of 1024, streamed against
 * ordinary stores: 4096 rows (16 MiB out) 0.94-1.12 -> 0.65 ms, 16384 rows
 * (64 MiB) 4.6-5.7 -> 3.7 ms. A fixed size, not the machine's: glibc's
 * sysconf(_SC_LEVEL3_CACHE_SIZE) reads 320 MiB on this virtual machine. */
#define JAG_STREAM_MIN_BYTES ((int64_t)16 << 20)
/* The size from which jag__stream_stores says yes: JAG_STREAM_MIN_BYTES,
 * lowered by tests only (stream.c), so that they reach the streamed paths
 * with small tensors (every test also runs under valgrind). */
extern int64_t jag__stream_min_bytes;
static inline bool jag__stream_stores(const void *p, int64_t bytes) {
#if defined(__AVX__)
    return bytes >= jag__stream_min_bytes && (uintptr_t)p % 32 == 0;
#else
    (void)p, (void)bytes;
    return false;
#endif
}

/* dst = src (n bytes), streamed where dst is 32-byte aligned (the bytes
 * past the last whole 32 copied as usual) */
static inline void jag__stream_copy(void *dst, const void *src, size_t n) {
    size_t i = 0;
#if defined(__AVX__)
    char *d = dst;
    const char *s = src;
    if ((uintptr_t)d % 32 == 0)
        for (; i + 32 <= n; i += 32) _mm256_stream_si256((__m256i *)(d + i), _mm256_loadu_si256((const __m256i *)(s + i)));
#endif
    memcpy((char *)dst + i, (const char *)src + i, n - i);
}

/* After a thread's streaming stores: they reach memory before its later
 * stores (the end of a parallel region), so the next op reads them. */
static inline void jag__stream_fence(void) {
#if defined(__AVX__)
    _mm_sfence();
#endif
}

#endif
