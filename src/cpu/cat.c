/* cat.c — joining tensors along an existing dim (its META function, CPU
 * kernel and naive reference). jag_stack (composite.c) unsqueezes and calls
 * this.
 *
 * torch's legacy rule is kept: a 1-d tensor with 0 elements (shape [0]) is
 * skipped whatever the others' shapes, so that a list started with an empty
 * placeholder still concatenates. Skipped tensors still take part in dtype
 * promotion, as in torch. */
#include "../dispatch/dispatch.h"

static bool skipped(const jag_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

/* The tensor list argument (the dispatcher has rejected NULL entries). */
static jag_status arg_tensors(const char *op, const jag_value *args, int nargs, jag_tensor *const **xs, int *n) {
    if (nargs < 1 || args[0].kind != JAG_VAL_TENSORS)
        return jag__error(JAG_EINVAL, "%s: argument 'xs' is missing or not a tensor list", op);
    *xs = args[0].u.tensors.v;
    *n = args[0].u.tensors.n;
    if (*n <= 0 || !*xs) return jag__error(JAG_EINVAL, "%s: argument 'xs' is empty, expected at least one tensor", op);
    return JAG_OK;
}

// xs[i] are (s..., n_i, s...) with n_i at dim -> out (s..., sum n_i, s...)
jag_status jag__meta_cat(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    jag_tensor *const *xs = NULL;
    int n = 0;
    int64_t dim64;
    jag_status st;
    if ((st = arg_tensors(op, args, nargs, &xs, &n)) || (st = jag__arg_int(op, args, nargs, 1, "dim", &dim64)))
        return st;
    jag_dtype dtype = xs[0]->dtype;
    int ref = -1;
    for (int i = 0; i < n; i++) {
        if (xs[i]->ndim == 0)
            return jag__error(JAG_ESHAPE,
                              "%s: tensor %d of argument 'xs' is 0-d; 0-d tensors cannot be concatenated (unsqueeze them "
                              "or use jag_stack)",
                              op, i);
        dtype = jag_promote_types(dtype, xs[i]->dtype);
        if (ref < 0 && !skipped(xs[i])) ref = i;
    }
    if (ref < 0) { /* every tensor is an empty 1-d placeholder: the result is one too */
        int64_t zero = 0;
        jag__spec_set(&outs[0], dtype, &zero, 1);
        return JAG_OK;
    }
    const jag_tensor *r = xs[ref];
    int d;
    if ((st = jag__wrap_dim(op, "dim", (int)dim64, r->ndim, &d))) return st;
    int64_t sizes[JAG_MAX_DIMS];
    memcpy(sizes, r->sizes, (size_t)r->ndim * sizeof *sizes);
    sizes[d] = 0;
    char b1[JAG_SHAPE_BUF], b2[JAG_SHAPE_BUF];
    for (int i = 0; i < n; i++) {
        const jag_tensor *t = xs[i];
        if (skipped(t)) continue;
        if (t->ndim != r->ndim)
            return jag__error(JAG_ESHAPE, "%s: tensor %d of argument 'xs' has shape %s (%d-d), expected %d dims like tensor %d (%s)",
                              op, i, jag__shape_str(t->sizes, t->ndim, b1, sizeof b1), t->ndim, r->ndim, ref,
                              jag__shape_str(r->sizes, r->ndim, b2, sizeof b2));
        for (int e = 0; e < r->ndim; e++)
            if (e != d && t->sizes[e] != r->sizes[e])
                return jag__error(JAG_ESHAPE,
                                  "%s: tensor %d of argument 'xs' has shape %s, expected %s like tensor %d except along "
                                  "dim %d (they differ at dim %d: %lld vs %lld)",
                                  op, i, jag__shape_str(t->sizes, t->ndim, b1, sizeof b1),
                                  jag__shape_str(r->sizes, r->ndim, b2, sizeof b2), ref, d, e, (long long)t->sizes[e],
                                  (long long)r->sizes[e]);
        if (__builtin_add_overflow(sizes[d], t->sizes[d], &sizes[d]))
            return jag__error(JAG_EOVERFLOW, "%s: the sizes along dim %d add up past int64", op, d);
    }
    jag__spec_set(&outs[0], dtype, sizes, r->ndim);
    return JAG_OK;
}

// xs[i] are (s..., n_i, s...), out is (s..., sum n_i, s...): one strided,
// converting copy per input into the narrow view of out it fills
jag_status jag__cpu_cat(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    jag_tensor *const *xs = args[0].u.tensors.v;
    int n = args[0].u.tensors.n;
    jag_tensor *out = outs[0];
    if (jag_numel(out) == 0) return JAG_OK;
    int d;
    jag_status st = jag__wrap_dim(op, "dim", (int)args[1].u.i, out->ndim, &d);
    if (st) return st;
    /* out is contiguous: with nothing but size-1 dims before d, the part a
     * tensor fills is one run of bytes */
    bool runs = true;
    for (int e = 0; e < d; e++) runs = runs && out->sizes[e] == 1;
    size_t es = jag_dtype_size(out->dtype);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        const jag_tensor *t = xs[i];
        if (skipped(t) || t->sizes[d] == 0) continue;
        int64_t numel = jag_numel(t);
        if (runs && t->dtype == out->dtype && numel < JAG_PARALLEL_GRAIN && jag_is_contiguous(t)) {
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
        if (skipped(t)) continue;
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
