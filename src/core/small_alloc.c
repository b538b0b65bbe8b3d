/* small_alloc.c — per-thread free lists for the blocks every op makes and
 * frees: tensor headers, storage headers with the bytes of tiny tensors,
 * nested tensor state, and the data of tensors below the large-block cache
 * of storage.c (under 128 KiB). An op on a small tensor is mostly
 * bookkeeping; taking these from a list instead of malloc and free cuts its
 * cost by a third (bench_nested's dispatch overhead). The middle sizes
 * matter as much: glibc's aligned_alloc splits off fragments that the next
 * allocation over 1 KiB must consolidate, a fixed cost of about 80 ns per
 * op. Blocks come in power-of-two classes from 128 bytes to 128 KiB; a
 * class keeps at most 64 blocks and 512 KiB, so a thread keeps about 3 MiB
 * at most. Off in Debug builds (JAG_NO_ALLOC_CACHE), where the tools must see
 * every allocation at its exact size. */
#include "internal.h"

#include <pthread.h>

#define MIN_CLASS_SHIFT 7  /* 128 bytes */
#define N_CLASSES 11       /* up to 128 KiB */
#define PER_CLASS 64
#define CLASS_MAX_SHIFT 19 /* a class keeps at most 512 KiB */

typedef struct free_list {
    void *items[N_CLASSES][PER_CLASS];
    int n[N_CLASSES];
} free_list;

static size_t round_align(size_t n) { return (n + 63) / 64 * 64; }

#ifndef JAG_NO_ALLOC_CACHE
static size_t class_size(int c) { return (size_t)1 << (MIN_CLASS_SHIFT + c); }

/* Blocks a class keeps: 64, fewer for classes over 8 KiB (512 KiB / size). */
static int class_keep(int c) {
    int shift = CLASS_MAX_SHIFT - (MIN_CLASS_SHIFT + c);
    return shift >= 6 ? PER_CLASS : 1 << shift;
}

/* The class of n bytes (the smallest power of two >= n, from 128 bytes), or
 * -1 over the largest: a count of leading zeros, no loop (every op takes and
 * frees several blocks). */
static int class_of(size_t n) {
    if (n <= ((size_t)1 << MIN_CLASS_SHIFT)) return 0;
    int c = 64 - __builtin_clzll((unsigned long long)(n - 1)) - MIN_CLASS_SHIFT;
    return c < N_CLASSES ? c : -1;
}

static JAG_TLS free_list *lists;
static pthread_key_t lists_key;
static pthread_once_t lists_once = PTHREAD_ONCE_INIT;

static void free_lists(void *p) {
    free_list *l = p;
    lists = NULL; /* a later free on this thread starts a new list */
    for (int c = 0; c < N_CLASSES; c++)
        for (int i = 0; i < l->n[c]; i++) free(l->items[c][i]);
    free(l);
}

static void make_key(void) { pthread_key_create(&lists_key, free_lists); }

static free_list *my_lists(void) {
    if (lists) return lists;
    pthread_once(&lists_once, make_key);
    lists = calloc(1, sizeof *lists);
    if (lists) pthread_setspecific(lists_key, lists); /* freed at thread exit */
    return lists;
}
#endif

size_t jag__small_block_bytes(size_t n) {
#ifndef JAG_NO_ALLOC_CACHE
    int c = class_of(n);
    if (c >= 0) return class_size(c);
#endif
    return round_align(n);
}

void *jag__small_alloc(size_t n) {
#ifndef JAG_NO_ALLOC_CACHE
    int c = class_of(n);
    if (c < 0) return aligned_alloc(64, round_align(n));
    free_list *l = my_lists();
    if (l && l->n[c] > 0) return l->items[c][--l->n[c]];
    return aligned_alloc(64, class_size(c));
#else
    return aligned_alloc(64, round_align(n));
#endif
}

void jag__small_free(void *p, size_t n) {
    if (!p) return;
#ifndef JAG_NO_ALLOC_CACHE
    int c = class_of(n);
    free_list *l = c >= 0 ? my_lists() : NULL;
    if (l && l->n[c] < class_keep(c)) {
        l->items[c][l->n[c]++] = p;
        return;
    }
#endif
    (void)n;
    free(p);
}

void jag__small_trim(void) {
#ifndef JAG_NO_ALLOC_CACHE
    free_list *l = lists;
    if (!l) return;
    for (int c = 0; c < N_CLASSES; c++) {
        for (int i = 0; i < l->n[c]; i++) free(l->items[c][i]);
        l->n[c] = 0;
    }
#endif
}
