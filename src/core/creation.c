/* creation.c — new tensors that need no op: meta tensors, arange, from
 * memory. (empty, zeros, ones and full, which a traced function records,
 * are in src/dispatch/factory_op.c.) */
#include "internal.h"

#include <math.h>

jag_status jag__finish_new(jag_tensor *t, jag_tensor **out) {
    if (!t) return jag__leave(jag_last_status(), NULL, 0);
    *out = t;
    return jag__leave(JAG_OK, out, 1);
}

jag_status jag__check_out(const char *op, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL, expected a place for the result", op);
    return JAG_OK;
}

jag_status jag_meta_tensor(const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out) {
    if (jag__check_out("jag_meta_tensor", out)) return JAG_EINVAL;
    jag__enter();
    return jag__finish_new(jag__tensor_new("jag_meta_tensor", sizes, ndim, dtype, false, true), out);
}

bool jag_is_meta(const jag_tensor *t) { return t && jag__is_meta(t); }

jag_status jag_arange(double start, double end, double step, jag_dtype dtype, jag_tensor **out) {
    const char *op = "jag_arange";
    if (jag__check_out(op, out)) return JAG_EINVAL;
    if (!isfinite(start) || !isfinite(end) || !isfinite(step))
        return jag__error(JAG_EINVAL, "%s: arguments start=%g, end=%g, step=%g must be finite", op, start, end, step);
    if (step == 0) return jag__error(JAG_EINVAL, "%s: argument 'step' is 0, expected a non-zero step", op);
    if ((end - start) / step > 9.0e15)
        return jag__error(JAG_EOVERFLOW, "%s: (end - start) / step = %g elements is too many", op, (end - start) / step);
    double count = ceil((end - start) / step);
    int64_t n = count > 0 ? (int64_t)count : 0;
    jag__enter();
    jag_tensor *t = jag__tensor_new(op, &n, 1, dtype, false, false);
    if (t) {
        char *p = jag__ptr(t);
        size_t es = jag_dtype_size(dtype);
        for (int64_t i = 0; i < n; i++) jag__store_from_double(p + i * (int64_t)es, dtype, start + (double)i * step);
    }
    return jag__finish_new(t, out);
}

jag_status jag_from_data(const void *data, const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out) {
    const char *op = "jag_from_data";
    if (jag__check_out(op, out)) return JAG_EINVAL;
    jag__enter();
    jag_tensor *t = jag__tensor_new(op, sizes, ndim, dtype, false, false);
    if (t) {
        size_t nbytes = (size_t)jag_numel(t) * jag_dtype_size(dtype);
        if (nbytes && !data) {
            jag_release(t);
            jag__error(JAG_EINVAL, "%s: argument 'data' is NULL, expected %zu bytes", op, nbytes);
            return jag__finish_new(NULL, out);
        }
        if (nbytes) memcpy(jag__ptr(t), data, nbytes);
        if (dtype == JAG_BOOL) { /* keep the bool invariant: bytes are 0 or 1 */
            uint8_t *b = (uint8_t *)jag__ptr(t);
            for (size_t i = 0; i < nbytes; i++) b[i] = b[i] != 0;
        }
    }
    return jag__finish_new(t, out);
}

jag_status jag_from_blob(void *data, const int64_t *sizes, const int64_t *strides, int ndim, jag_dtype dtype,
                         void (*release)(void *ctx, void *data), void *ctx, jag_tensor **out) {
    const char *op = "jag_from_blob";
    if (jag__check_out(op, out)) return JAG_EINVAL;
    jag_status st = jag__check_shape(op, sizes, ndim, dtype, NULL);
    if (st) return st;
    if (!data && jag__numel(sizes, ndim) > 0)
        return jag__error(JAG_EINVAL, "%s: argument 'data' is NULL for a non-empty tensor", op);
    if ((uintptr_t)data % jag_dtype_size(dtype) != 0)
        return jag__error(JAG_EINVAL, "%s: argument 'data' is not aligned to %zu bytes for %s", op,
                          jag_dtype_size(dtype), jag_dtype_name(dtype));
    if (strides)
        for (int d = 0; d < ndim; d++)
            if (strides[d] < 0)
                return jag__error(JAG_EINVAL, "%s: argument 'strides' has %lld at dim %d, expected >= 0", op,
                                  (long long)strides[d], d);
    jag_storage *s = jag__small_alloc(sizeof *s);
    if (!s) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    atomic_init(&s->read_only, false);
    s->data = data;
    s->inline_data = false;
    s->small_data = false;
    s->capacity = 0;
    s->nbytes = 0; /* unknown: the caller vouches for the strides */
    s->release = release;
    s->release_ctx = ctx;
    s->borrowed = true;
    jag__enter();
    jag_tensor *t = jag__tensor_wrap(s, dtype, sizes, strides, ndim, 0);
    if (!t) { /* the caller keeps its memory: do not call release */
        s->release = NULL;
    }
    jag__storage_release(s);
    return jag__finish_new(t, out);
}
