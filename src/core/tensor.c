/* tensor.c — tensor headers: creation of headers, lifetime, metadata. */
#include "internal.h"

#include <pthread.h>

/* Tensor headers made minus released by this thread, for leak checks in
 * tests. Per thread and plain (no atomic): ops never make or release tensors
 * inside their worker threads, and a shared atomic counter cost more than the
 * rest of a tiny op's bookkeeping. */
static JAG_TLS long live_tensors;
long jag__live_tensors(void) { return live_tensors; }

/* A new header over storage, taking over one reference the caller holds. */
static jag_tensor *wrap_adopting(jag_storage *storage, jag_dtype dtype, const int64_t *sizes,
                                 const int64_t *strides, int ndim, int64_t offset) {
    JAG_ASSERT(ndim >= 0 && ndim <= JAG_MAX_DIMS);
    jag_tensor *t = jag__small_alloc(sizeof *t);
    if (!t) {
        jag__error(JAG_ENOMEM, "jag: out of memory allocating a tensor header");
        return NULL;
    }
    t->magic = JAG_TENSOR_LIVE;
    atomic_init(&t->refcount, 1);
    atomic_init(&t->ragged_id, -1);
    t->flags = 0;
    t->subclass = NULL;
    t->state = NULL;
    t->requires_grad = false;
    t->output_nr = 0;
    t->grad_fn = NULL;
    t->grad = NULL;
    live_tensors++;
    t->dtype = dtype;
    t->ndim = ndim;
    /* whole arrays zeroed by fixed-size stores, then the used dims copied
     * (zeroing just the unused tail compiles to rep stos: slower on a tiny op) */
    memset(t->sizes, 0, sizeof t->sizes);
    memset(t->strides, 0, sizeof t->strides);
    for (int d = 0; d < ndim; d++) t->sizes[d] = sizes[d];
    if (strides) {
        for (int d = 0; d < ndim; d++) t->strides[d] = strides[d];
    } else {
        jag__contiguous_strides(sizes, ndim, t->strides);
    }
    t->offset = offset;
    t->storage = storage;
    return t;
}

jag_tensor *jag__tensor_wrap(jag_storage *storage, jag_dtype dtype, const int64_t *sizes,
                             const int64_t *strides, int ndim, int64_t offset) {
    jag_tensor *t = wrap_adopting(storage, dtype, sizes, strides, ndim, offset);
    if (t) jag__storage_retain(storage);
    return t;
}

jag_tensor *jag__tensor_new(const char *op, const int64_t *sizes, int ndim, jag_dtype dtype,
                            bool zero, bool meta) {
    int64_t numel;
    if (jag__check_shape(op, sizes, ndim, dtype, &numel) != JAG_OK) return NULL;
    if (meta) return jag__tensor_wrap(NULL, dtype, sizes, NULL, ndim, 0);
    jag_storage *s = jag__storage_new((size_t)numel * jag_dtype_size(dtype), zero, op);
    if (!s) return NULL;
    jag_tensor *t = wrap_adopting(s, dtype, sizes, NULL, ndim, 0); /* the tensor holds the only reference */
    if (!t) jag__storage_release(s);
    return t;
}

jag_tensor *jag__tensor_from_spec(const char *op, const jag_spec *spec, bool meta) {
    return jag__tensor_new(op, spec->sizes, spec->ndim, spec->dtype, false, meta);
}

jag_tensor *jag__tensor_view(const jag_tensor *x, const int64_t *sizes, const int64_t *strides,
                             int ndim, int64_t offset) {
    jag_tensor *t = jag__tensor_wrap(x->storage, x->dtype, sizes, strides, ndim, offset);
    if (t) t->flags = x->flags & JAG_FLAG_READONLY;
    return t;
}

/* ---- released handles ---------------------------------------------------
 * A released header is marked JAG_TENSOR_RELEASED and waits in a per-thread
 * ring of the last QUARANTINE headers before its memory goes back to the
 * allocator, so that a handle used again soon after its release (the common
 * mistake: a double release, or a release followed by a use) finds the mark
 * and is refused, instead of aliasing the next tensor made in its place.
 * The ring costs two stores per release; the checks one load and compare.
 * It is a heap block per thread (the thread-locals stay small: JAG_TLS),
 * made at the thread's first release and drained at its exit; without
 * memory for it, headers go back at once. */
#define QUARANTINE 64
static JAG_TLS jag_tensor **quarantine;
static JAG_TLS unsigned quarantine_next;
static pthread_key_t quarantine_key;
static pthread_once_t quarantine_once = PTHREAD_ONCE_INIT;

static void quarantine_drain(void *ring) {
    jag_tensor **q = ring;
    for (int i = 0; i < QUARANTINE; i++)
        if (q[i]) jag__small_free(q[i], sizeof *q[i]);
    free(q);
    quarantine = NULL;
}

static void quarantine_make_key(void) { pthread_key_create(&quarantine_key, quarantine_drain); }

static void quarantine_put(jag_tensor *t) {
    t->magic = JAG_TENSOR_RELEASED;
    if (!quarantine) {
        if (!(quarantine = calloc(QUARANTINE, sizeof *quarantine))) {
            jag__small_free(t, sizeof *t);
            return;
        }
        pthread_once(&quarantine_once, quarantine_make_key);
        pthread_setspecific(quarantine_key, quarantine); /* drained at thread exit */
    }
    unsigned i = quarantine_next++ % QUARANTINE;
    jag_tensor *old = quarantine[i];
    quarantine[i] = t;
    if (old) jag__small_free(old, sizeof *old);
}

jag_status jag__check_handle(const char *op, const char *arg, const jag_tensor *t) {
    if (!t) return jag__error(JAG_EINVAL, "%s: argument '%s' is NULL", op, arg);
    if (t->magic == JAG_TENSOR_RELEASED)
        return jag__error(JAG_EINVAL, "%s: argument '%s': tensor was released", op, arg);
    if (t->magic != JAG_TENSOR_LIVE)
        return jag__error(JAG_EINVAL, "%s: argument '%s' is not a jag tensor (or was released long ago)", op, arg);
    return JAG_OK;
}

jag_tensor *jag_retain(jag_tensor *t) {
    if (!t) return NULL;
    if (!jag__tensor_live(t)) {
        jag__check_handle("jag_retain", "t", t);
        return NULL;
    }
    atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}

jag_status jag_release(jag_tensor *t) {
    if (!t) return JAG_OK;
    if (!jag__tensor_live(t)) return jag__check_handle("jag_release", "t", t);
    /* the last reference (most tensors die with their first): nobody else
     * can take one, so no read-modify-write (a locked instruction costs a
     * tiny op's kernel) */
    if (atomic_load_explicit(&t->refcount, memory_order_acquire) != 1 &&
        atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1)
        return JAG_OK;
    jag__storage_release(t->storage);
    if (t->subclass) jag__subclass_destroy_state(t);
    /* history, a gradient, or a leaf with post-accumulate-grad hooks */
    if (t->grad_fn || t->grad || (t->flags & JAG_FLAG_GRAD_HOOKS)) jag__autograd_release_tensor(t);
    live_tensors--;
    quarantine_put(t);
    return JAG_OK;
}

int64_t jag__tensor_version(const jag_tensor *t) {
    if (t->subclass) return jag__subclass_version(t);
    return t->storage ? (int64_t)atomic_load_explicit(&t->storage->version, memory_order_relaxed) : 0;
}

bool jag_is_read_only(const jag_tensor *t) { return jag__tensor_live(t) && jag__is_read_only(t); }

int64_t jag_version(const jag_tensor *t) {
    if (jag__check_live("jag_version", "t", t)) return -1;
    return jag__tensor_version(t);
}

/* ---- metadata: a NULL or released handle gives -1 / NULL / false with
 * jag_last_error() saying which ---------------------------------------------- */
#define LIVE_OR(fn, value)                                          \
    do {                                                            \
        if (!jag__tensor_live(t)) {                                 \
            jag__check_handle(fn, "t", t);                          \
            return value;                                           \
        }                                                           \
    } while (0)

jag_dtype jag_tensor_dtype(const jag_tensor *t) {
    LIVE_OR("jag_tensor_dtype", (jag_dtype)-1);
    return t->dtype;
}

int jag_ndim(const jag_tensor *t) {
    LIVE_OR("jag_ndim", -1);
    return t->ndim;
}

int64_t jag_size(const jag_tensor *t, int dim) {
    LIVE_OR("jag_size", -1);
    if (dim < 0) dim += t->ndim;
    if (dim < 0 || dim >= t->ndim) return -1;
    return t->sizes[dim];
}

int64_t jag_stride(const jag_tensor *t, int dim) {
    LIVE_OR("jag_stride", -1);
    if (dim < 0) dim += t->ndim;
    if (dim < 0 || dim >= t->ndim) return -1;
    return t->strides[dim];
}

const int64_t *jag_sizes(const jag_tensor *t) {
    LIVE_OR("jag_sizes", NULL);
    return t->sizes;
}

const int64_t *jag_strides(const jag_tensor *t) {
    LIVE_OR("jag_strides", NULL);
    return t->strides;
}

int64_t jag_storage_offset(const jag_tensor *t) {
    LIVE_OR("jag_storage_offset", -1);
    return t->offset;
}

int64_t jag_numel(const jag_tensor *t) {
    LIVE_OR("jag_numel", -1);
    for (int d = 0; d < t->ndim; d++)
        if (t->sizes[d] < 0) return -1; /* a ragged dim */
    return jag__numel(t->sizes, t->ndim);
}

bool jag_is_contiguous(const jag_tensor *t) {
    LIVE_OR("jag_is_contiguous", false);
    if (t->subclass) return false;
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->sizes[d] == 0) return true;
        if (t->sizes[d] != 1 && t->strides[d] != expected) return false;
        expected *= t->sizes[d];
    }
    return true;
}

void *jag_data(const jag_tensor *t) {
    LIVE_OR("jag_data", NULL);
    return t->storage ? jag__ptr(t) : NULL;
}

bool jag_shares_storage(const jag_tensor *a, const jag_tensor *b) {
    if (!jag__tensor_live(a) || !jag__tensor_live(b)) {
        if (!jag__check_live("jag_shares_storage", "a", a)) jag__check_live("jag_shares_storage", "b", b);
        return false;
    }
    return a->storage && a->storage == b->storage;
}

jag_status jag__require_plain(const char *op, const char *arg, const jag_tensor *t) {
    if (t && t->subclass)
        return jag__error(JAG_ENOTIMPL, "%s: argument '%s' is a %s tensor, expected a plain tensor", op, arg,
                          jag_subclass_name(t->subclass));
    return JAG_OK;
}

