/* small_alloc.c — per-thread free lists for the small objects every op makes
 * (tensor headers, storage headers with their bytes of tiny tensors, nested
 * tensor state). An op on a tiny tensor is mostly bookkeeping; taking these
 * from a list instead of malloc and free cuts its cost by a third
 * (bench_nested's dispatch overhead). Off in Debug builds
 * (JAG_NO_ALLOC_CACHE), where the tools must see every allocation. */
#include "internal.h"

#include <pthread.h>

#define N_CLASSES 4
#define PER_CLASS 64
static const size_t class_size[N_CLASSES] = {128, 256, 512, 1024};

typedef struct free_list {
    void *items[N_CLASSES][PER_CLASS];
    int n[N_CLASSES];
} free_list;

#ifndef JAG_NO_ALLOC_CACHE
static _Thread_local free_list *lists;
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

static int class_of(size_t n) {
    for (int c = 0; c < N_CLASSES; c++)
        if (n <= class_size[c]) return c;
    return -1;
}

void *jag__small_alloc(size_t n) {
    int c = class_of(n);
    if (c < 0) return aligned_alloc(64, (n + 63) / 64 * 64);
#ifndef JAG_NO_ALLOC_CACHE
    free_list *l = my_lists();
    if (l && l->n[c] > 0) return l->items[c][--l->n[c]];
#endif
    return aligned_alloc(64, class_size[c]);
}

void jag__small_free(void *p, size_t n) {
    if (!p) return;
#ifndef JAG_NO_ALLOC_CACHE
    int c = class_of(n);
    free_list *l = c >= 0 ? my_lists() : NULL;
    if (l && l->n[c] < PER_CLASS) {
        l->items[c][l->n[c]++] = p;
        return;
    }
#endif
    (void)n;
    free(p);
}
