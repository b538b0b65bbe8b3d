/* storage.c — refcounted memory blocks, owned or borrowed, and a small cache
 * of large freed blocks.
 *
 * Why a cache: an op on a large tensor allocates its output; glibc serves a
 * large malloc with fresh pages from the kernel, and touching them costs a
 * page fault per 4 KiB — more than the op itself for memory-bound ops. Keeping
 * a few recently freed large blocks and handing them back (pages already
 * mapped) is what allocators inside ML frameworks do; large sizes come in
 * classes so that a freed block fits the next tensor of a similar size. The
 * cache is off in
 * sanitizer and valgrind builds (JAG_NO_ALLOC_CACHE), where reusing blocks
 * would hide use-after-free bugs. */
#include "internal.h"

#include <pthread.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* Data is aligned to 64 bytes: one cache line, and enough for any SIMD. */
#define JAG_ALIGN 64
/* Blocks of at least this size are cached when freed. */
#define CACHE_MIN_BYTES ((size_t)128 << 10) /* glibc maps blocks this large afresh (M_MMAP_THRESHOLD) */
/* At most this many bytes (and blocks) are kept. */
#define CACHE_MAX_BYTES ((size_t)512 << 20)
#define CACHE_SLOTS 256

typedef struct {
    void *data;
    size_t bytes;
} cached_block;

static cached_block cache[CACHE_SLOTS];
static int cache_n;
static size_t cache_bytes;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The most recently freed cached block of at least `bytes` and at most 1.25x
 * that (its size in *real), or NULL. The newest, not the best fit: it is the
 * one most likely still in the caches. Taking the oldest of several equal
 * blocks made a loop of relu over 4 MiB rotate through all of them: 46 us
 * with one such block cached, 57 us with four, 69 us with eight. */
static void *cache_take(size_t bytes, size_t *real) {
#ifdef JAG_NO_ALLOC_CACHE
    (void)bytes, (void)real;
    return NULL;
#else
    if (bytes < CACHE_MIN_BYTES) return NULL;
    void *found = NULL;
    pthread_mutex_lock(&cache_lock);
    int best = -1;
    for (int i = cache_n - 1; i >= 0 && best < 0; i--)
        if (cache[i].bytes >= bytes && cache[i].bytes - bytes <= bytes / 4) best = i;
    if (best >= 0) {
        found = cache[best].data;
        *real = cache[best].bytes;
        cache_bytes -= cache[best].bytes;
        memmove(cache + best, cache + best + 1, (size_t)(--cache_n - best) * sizeof cache[0]); /* oldest stay first */
    }
    pthread_mutex_unlock(&cache_lock);
    return found;
#endif
}

/* Keep a freed block (evicting the oldest), or free it. */
static void cache_give(void *data, size_t bytes) {
#ifndef JAG_NO_ALLOC_CACHE
    if (bytes >= CACHE_MIN_BYTES && bytes <= CACHE_MAX_BYTES / 2) {
        pthread_mutex_lock(&cache_lock);
        while (cache_n > 0 && (cache_n == CACHE_SLOTS || cache_bytes + bytes > CACHE_MAX_BYTES)) {
            free(cache[0].data);
            cache_bytes -= cache[0].bytes;
            memmove(cache, cache + 1, (size_t)--cache_n * sizeof cache[0]);
        }
        cache[cache_n++] = (cached_block){data, bytes};
        cache_bytes += bytes;
        pthread_mutex_unlock(&cache_lock);
        return;
    }
#endif
    (void)bytes;
    free(data);
}

void jag_empty_cache(void) {
    jag__small_trim();
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < cache_n; i++) free(cache[i].data);
    cache_n = 0;
    cache_bytes = 0;
    pthread_mutex_unlock(&cache_lock);
}

/* Large blocks come in eight sizes per power of two (at most 12.5% more
 * than asked), in steps of at most 2 MiB (so a huge tensor wastes at most
 * that): the sizes of a training step's tensors vary with every batch of
 * ragged lengths, and without classes a freed block would rarely fit the
 * next request (fresh pages, a fault per 4 KiB, each time). */
#define LARGE_STEP_MAX ((size_t)2 << 20)
static size_t large_class(size_t bytes) {
    int e = 63 - __builtin_clzll((unsigned long long)bytes);
    size_t step = (size_t)1 << (e - 3);
    if (step > LARGE_STEP_MAX) step = LARGE_STEP_MAX;
    size_t up = (bytes + step - 1) / step * step;
    return up < bytes ? bytes : up; /* (wrapped: the allocation fails on its own) */
}

/* A large block from the system. From HUGE_MIN_BYTES on it is aligned to
 * 2 MiB, rounded up to whole 2 MiB pages, and asks the kernel for
 * transparent huge pages (where the system leaves that to madvise, as this
 * machine does): the first touch of fresh 4 KiB pages costs a fault each,
 * which made relu of 272 MB take 63 ms against a 22 ms memcpy into touched
 * memory; in 2 MiB pages the faults are 512 times fewer, and so are the TLB
 * misses of a stream over the block (relu over a cached 64 MiB block: 1.83
 * -> 1.51 ms). The price on this machine, a virtual machine whose host backs
 * the guest's free memory lazily: a huge page the host no longer backs
 * costs more on its first touch (the first exp of a fresh 64 MiB in a new
 * process: 6-79 ms against 18 ms in 4 KiB pages, bimodal), while pages
 * reused in a loop are the fast case. */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)
#define HUGE_MIN_BYTES ((size_t)8 << 20)
static void *large_alloc(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= HUGE_MIN_BYTES) {
        size_t whole = (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
        if (whole < bytes) return NULL; /* wrapped: no such block */
        void *p = aligned_alloc(HUGE_PAGE_BYTES, whole);
        if (p) (void)madvise(p, whole, MADV_HUGEPAGE); /* advice only: a refusal changes nothing */
        return p;
    }
#endif
    return aligned_alloc(JAG_ALIGN, bytes);
}

/* Tiny tensors keep their bytes in the header's block: one allocation. */
#define HEADER_BYTES ((sizeof(jag_storage) + JAG_ALIGN - 1) / JAG_ALIGN * JAG_ALIGN)
#define INLINE_MAX ((size_t)1024 - HEADER_BYTES)

jag_storage *jag__storage_new(size_t nbytes, bool zero, const char *op) {
    if (nbytes <= INLINE_MAX) {
        jag_storage *s = jag__small_alloc(HEADER_BYTES + nbytes);
        if (!s) {
            jag__error(JAG_ENOMEM, "%s: out of memory allocating %zu bytes", op, nbytes);
            return NULL;
        }
        atomic_init(&s->refcount, 1);
        atomic_init(&s->version, 0);
        atomic_init(&s->read_only, false);
        s->data = (char *)s + HEADER_BYTES;
        s->nbytes = nbytes;
        s->capacity = nbytes;
        s->inline_data = true;
        s->small_data = false;
        s->release = NULL;
        s->release_ctx = NULL;
        s->borrowed = false;
        if (zero) memset(s->data, 0, nbytes);
        return s;
    }
    jag_storage *s = jag__small_alloc(sizeof *s);
    if (!s) {
        jag__error(JAG_ENOMEM, "%s: out of memory allocating a storage header", op);
        return NULL;
    }
    size_t rounded = (nbytes + JAG_ALIGN - 1) / JAG_ALIGN * JAG_ALIGN;
    if (rounded < nbytes) rounded = 0; /* wrapped: caught below */
    size_t capacity = rounded;
    void *data = NULL;
    bool small = rounded && rounded < CACHE_MIN_BYTES;
    if (rounded >= CACHE_MIN_BYTES) {
        capacity = large_class(rounded);
        data = cache_take(capacity, &capacity);
        if (!data) data = large_alloc(capacity);
    } else if (small) { /* the per-thread lists of small_alloc.c (whose top class, 128 KiB, is CACHE_MIN_BYTES) */
        capacity = jag__small_block_bytes(rounded);
        data = jag__small_alloc(rounded);
    }
    if (nbytes && !data) {
        jag__small_free(s, sizeof *s);
        jag__error(JAG_ENOMEM, "%s: out of memory allocating %zu bytes", op, nbytes);
        return NULL;
    }
    if (zero && data) memset(data, 0, rounded);
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    atomic_init(&s->read_only, false);
    s->data = data;
    s->nbytes = nbytes;
    s->capacity = capacity;
    s->inline_data = false;
    s->small_data = small;
    s->release = NULL;
    s->release_ctx = NULL;
    s->borrowed = false;
    return s;
}

void jag__storage_retain(jag_storage *s) {
    if (s) atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void jag__storage_release(jag_storage *s) {
    if (!s) return;
    if (atomic_load_explicit(&s->refcount, memory_order_acquire) != 1 && /* the last reference: as jag_release */
        atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (s->inline_data) {
        jag__small_free(s, HEADER_BYTES + s->nbytes);
        return;
    }
    if (s->borrowed) {
        if (s->release) s->release(s->release_ctx, s->data);
    } else if (s->data) {
        if (s->small_data) /* (by where it came from: a small block's capacity may equal CACHE_MIN_BYTES) */
            jag__small_free(s->data, s->capacity);
        else
            cache_give(s->data, s->capacity);
    }
    jag__small_free(s, sizeof *s);
}
