/* storage.c — refcounted memory blocks, owned or borrowed. */
#include "internal.h"

/* Data is aligned to 64 bytes: one cache line, and enough for any SIMD. */
#define JAG_ALIGN 64

jag_storage *jag__storage_new(size_t nbytes, bool zero, const char *op) {
    jag_storage *s = malloc(sizeof *s);
    if (!s) {
        jag__error(JAG_ENOMEM, "%s: out of memory allocating a storage header", op);
        return NULL;
    }
    size_t rounded = (nbytes + JAG_ALIGN - 1) / JAG_ALIGN * JAG_ALIGN;
    if (rounded < nbytes) rounded = 0; /* wrapped: caught below */
    void *data = rounded ? aligned_alloc(JAG_ALIGN, rounded) : NULL;
    if (nbytes && !data) {
        free(s);
        jag__error(JAG_ENOMEM, "%s: out of memory allocating %zu bytes", op, nbytes);
        return NULL;
    }
    if (zero && data) memset(data, 0, rounded);
    atomic_init(&s->refcount, 1);
    s->data = data;
    s->nbytes = nbytes;
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
    if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1) return;
    if (s->borrowed) {
        if (s->release) s->release(s->release_ctx, s->data);
    } else {
        free(s->data);
    }
    free(s);
}
