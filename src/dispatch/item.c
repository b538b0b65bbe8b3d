/* item.c — reading one element as a double (jag_item_at, jag_item). A
 * tensor without data is refused, with the reason: a proxy of a function
 * being traced (the value is known only when the program runs) or a meta
 * tensor. */
#include "dispatch.h"

jag_status jag_item_at(const jag_tensor *t, const int64_t *index, double *value) {
    if (!t || !value || (t->ndim > 0 && !index))
        return jag__error(JAG_EINVAL, "jag_item_at: arguments 't', 'index' (for ndim > 0) and 'value' must not be NULL");
    jag_status st = jag__require_plain("jag_item_at", "t", t);
    if (st) return st;
    if (jag__is_meta(t) && jag__trace_current) /* a proxy of the function being traced */
        return jag__error(JAG_ENOTIMPL, "jag_item_at: argument 't' has no data: a tensor's data cannot be read while a function is being traced (jag_trace_function, jag_compile; jag.trace, jag.compile in Python); pass the value as an input, or compute it outside the traced function");
    if (jag__is_meta(t)) return jag__error(JAG_EINVAL, "jag_item_at: argument 't' has no data (a meta tensor)");
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) {
        int64_t i = index[d];
        if (i < 0 || i >= t->sizes[d])
            return jag__error(JAG_ERANGE,
                              "jag_item_at: argument 'index' entry %d is %lld, expected 0 <= index < %lld",
                              d, (long long)i, (long long)t->sizes[d]);
        off += i * t->strides[d];
    }
    *value = jag__load_as_double(jag__ptr(t) + off * (int64_t)jag_dtype_size(t->dtype), t->dtype);
    return JAG_OK;
}

jag_status jag_item(const jag_tensor *t, double *value) {
    if (!t || !value) return jag__error(JAG_EINVAL, "jag_item: arguments 't' and 'value' must not be NULL");
    jag_status st = jag__require_plain("jag_item", "t", t);
    if (st) return st;
    if (jag_numel(t) != 1)
        return jag__error(JAG_ESHAPE, "jag_item: argument 't' has %lld elements, expected exactly 1",
                          (long long)jag_numel(t));
    int64_t zeros[JAG_MAX_DIMS] = {0};
    return jag_item_at(t, zeros, value);
}
