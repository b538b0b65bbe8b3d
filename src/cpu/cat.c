/* cat.c — joining tensors along an existing dim: the typed kernel and its
 * naive reference (the op's META function and boxed adapter are
 * src/dispatch/cat_op.c). jag_stack (composite.c) unsqueezes and calls
 * the op.
 *
 * torch's legacy rule is kept: a 1-d tensor with 0 elements (shape [0]) is
 * skipped whatever the others' shapes, so that a list started with an empty
 * placeholder still concatenates. Skipped tensors still take part in dtype
 * promotion, as in torch. */
#include "kernels.h"

// xs[i] are (s..., n_i, s...), out is (s..., sum n_i, s...) contiguous, d a
// dim of out: one strided, converting copy per input into the narrow view of
// out it fills
jag_status jag__cat_kernel(jag_tensor *const *xs, int n, int d, jag_tensor *out) {
    if (jag_numel(out) == 0) return JAG_OK;
    /* out is contiguous: with nothing but size-1 dims before d, the part a
     * tensor fills is one run of bytes */
    bool runs = true;
    for (int e = 0; e < d; e++) runs = runs && out->sizes[e] == 1;
    size_t es = jag_dtype_size(out->dtype);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        const jag_tensor *t = xs[i];
        if (jag__cat_skips(t) || t->sizes[d] == 0) continue;
        int64_t numel = jag_numel(t);
        if (runs && t->dtype == out->dtype && numel < JAG_GRAIN_MEMORY && jag_is_contiguous(t)) {
            /* small and contiguous: one memcpy, no view (larger copies take
             * jag__copy_into's threads) */
            memcpy(jag__ptr(out) + (size_t)(at * out->strides[d]) * es, jag__ptr(t), (size_t)numel * es);
            at += t->sizes[d];
            continue;
        }
        jag_tensor *piece = jag__tensor_view(out, t->sizes, out->strides, out->ndim, out->offset + at * out->strides[d]);
        if (!piece) return jag_last_status();
        jag__copy_into(piece, t);
        jag_release(piece);
        at += t->sizes[d];
    }
    return JAG_OK;
}

/* ---- naive reference ---------------------------------------------------- */

// xs[i] (s..., n_i, s...), out (s..., sum n_i, s...) any strides: element by
// element through double (exact for every value but int64 beyond 2^53)
void jag__ref_cat(jag_tensor *const *xs, int n, int dim, jag_tensor *out) {
    int64_t at = 0, c[JAG_MAX_DIMS];
    size_t os = jag_dtype_size(out->dtype);
    for (int i = 0; i < n; i++) {
        const jag_tensor *t = xs[i];
        if (jag__cat_skips(t)) continue;
        size_t ts = jag_dtype_size(t->dtype);
        int64_t numel = jag_numel(t);
        for (int64_t f = 0; f < numel; f++) {
            int64_t r = f, toff = 0, ooff = 0;
            for (int e = t->ndim - 1; e >= 0; e--) c[e] = r % t->sizes[e], r /= t->sizes[e];
            for (int e = 0; e < t->ndim; e++) {
                toff += c[e] * t->strides[e];
                ooff += (c[e] + (e == dim ? at : 0)) * out->strides[e];
            }
            double v = jag__load_as_double(jag__ptr(t) + toff * (int64_t)ts, t->dtype);
            jag__store_from_double(jag__ptr(out) + ooff * (int64_t)os, out->dtype, v);
        }
        at += t->sizes[dim];
    }
}
