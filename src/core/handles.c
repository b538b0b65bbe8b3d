/* handles.c — freed objects that callers hold by pointer (generators,
 * tensor sets) are marked and kept for a while before their memory goes,
 * so that freeing one twice, or using it after its free, is refused with a
 * message instead of corrupting the heap. Tensors have their own per-thread
 * ring (tensor.c): they are freed on every op, these rarely. */
#include "internal.h"

#include <pthread.h>

#define KEPT 32

static void *kept[KEPT];
static void (*kept_free[KEPT])(void *);
static unsigned kept_next;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

void jag__handle_retire(void *p, void (*free_fn)(void *)) {
    pthread_mutex_lock(&kept_lock);
    unsigned i = kept_next++ % KEPT;
    void *old = kept[i];
    void (*old_free)(void *) = kept_free[i];
    kept[i] = p, kept_free[i] = free_fn;
    pthread_mutex_unlock(&kept_lock);
    if (old) old_free(old);
}

/* At exit the kept ones go too (leak checkers see none). */
__attribute__((destructor)) static void free_kept(void) {
    for (int i = 0; i < KEPT; i++)
        if (kept[i]) kept_free[i](kept[i]), kept[i] = NULL;
}
