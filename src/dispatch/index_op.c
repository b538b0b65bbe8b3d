/* index_op.c — the index_select, gather, embedding and scatter_add ops:
 * their META functions (argument checks, output shapes) and the boxed
 * adapters ops.def names, which unbox the checked arguments and run the
 * typed kernels of src/cpu/index.c. */
#include "dispatch.h"
#include "../cpu/kernels.h"

/* ---- META ---------------------------------------------------------------- */

static jag_status check_index_dtype(const char *op, const char *name, const jag_tensor *t) {
    if (t->dtype != JAG_INT32 && t->dtype != JAG_INT64)
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected int32 or int64", op, name,
                          jag_dtype_name(t->dtype));
    return JAG_OK;
}

/* The (x, dim, index) arguments of index_select and gather, checked. */
static jag_status x_dim_index_args(const char *op, const jag_value *args, int nargs, const jag_tensor **x, int *d,
                                   const jag_tensor **index) {
    int64_t dim64;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", x)) || (st = jag__arg_int(op, args, nargs, 1, "dim", &dim64)) ||
        (st = jag__arg_tensor(op, args, nargs, 2, "index", index)) || (st = jag__wrap_dim(op, "dim", dim64, (*x)->ndim, d)) ||
        (st = check_index_dtype(op, "index", *index)))
        return st;
    return JAG_OK;
}

// x is (..., S, ...) with S at dim, index is (L) or 0-d -> out (..., L, ...)
jag_status jag__meta_index_select(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x, *index;
    int d;
    jag_status st;
    if ((st = x_dim_index_args(op, args, nargs, &x, &d, &index))) return st;
    if (index->ndim > 1) {
        char b[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument 'index' has shape %s, expected a 1-d tensor of indices", op,
                          jag__shape_str(index->sizes, index->ndim, b, sizeof b));
    }
    int64_t L = jag_numel(index);
    if (x->ndim == 0) {
        if (L != 1)
            return jag__error(JAG_ESHAPE, "%s: argument 'x' is 0-d, so 'index' must hold exactly 1 value, got %lld", op,
                              (long long)L);
        jag__spec_set(&outs[0], x->dtype, NULL, 0);
        return JAG_OK;
    }
    int64_t sizes[JAG_MAX_DIMS];
    memcpy(sizes, x->sizes, (size_t)x->ndim * sizeof *sizes);
    sizes[d] = L;
    jag__spec_set(&outs[0], x->dtype, sizes, x->ndim);
    return JAG_OK;
}

// x is (s0, ..., sn), index has x's ndim with index.size(e) <= x.size(e) for e != dim -> out index's shape
jag_status jag__meta_gather(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x, *index;
    int d;
    jag_status st;
    if ((st = x_dim_index_args(op, args, nargs, &x, &d, &index))) return st;
    char b1[JAG_SHAPE_BUF], b2[JAG_SHAPE_BUF];
    if (index->ndim != x->ndim)
        return jag__error(JAG_ESHAPE, "%s: argument 'index' has shape %s (%d-d), expected %d dims like 'x' of shape %s", op,
                          jag__shape_str(index->sizes, index->ndim, b1, sizeof b1), index->ndim, x->ndim,
                          jag__shape_str(x->sizes, x->ndim, b2, sizeof b2));
    for (int e = 0; e < x->ndim; e++)
        if (e != d && index->sizes[e] > x->sizes[e])
            return jag__error(JAG_ESHAPE,
                              "%s: argument 'index' has shape %s, larger than 'x' of shape %s at dim %d (%lld > %lld); "
                              "only dim %d may be larger",
                              op, jag__shape_str(index->sizes, index->ndim, b1, sizeof b1),
                              jag__shape_str(x->sizes, x->ndim, b2, sizeof b2), e, (long long)index->sizes[e],
                              (long long)x->sizes[e], d);
    jag__spec_set(&outs[0], x->dtype, index->sizes, index->ndim);
    return JAG_OK;
}

// weight is (V, D), indices are (i...) -> out (i..., D)
jag_status jag__meta_embedding(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *w, *ix;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "weight", &w)) ||
        (st = jag__arg_tensor(op, args, nargs, 1, "indices", &ix)) || (st = check_index_dtype(op, "indices", ix)))
        return st;
    char b[JAG_SHAPE_BUF];
    if (w->ndim != 2)
        return jag__error(JAG_ESHAPE, "%s: argument 'weight' has shape %s (%d-d), expected a 2-d table (V, D)", op,
                          jag__shape_str(w->sizes, w->ndim, b, sizeof b), w->ndim);
    if (ix->ndim + 1 > JAG_MAX_DIMS)
        return jag__error(JAG_ESHAPE, "%s: argument 'indices' has %d dims, expected at most %d (the result adds one)", op,
                          ix->ndim, JAG_MAX_DIMS - 1);
    int64_t sizes[JAG_MAX_DIMS];
    memcpy(sizes, ix->sizes, (size_t)ix->ndim * sizeof *sizes);
    sizes[ix->ndim] = w->sizes[1];
    jag__spec_set(&outs[0], w->dtype, sizes, ix->ndim + 1);
    return JAG_OK;
}

/* (x (s...), dim, index (i...), src (i...)) -> out of x's shape and dtype:
 * x and src float, index and src of one shape with x's dims, no larger than
 * x but along dim. */
jag_status jag__meta_scatter_add(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x, *index, *src;
    int d;
    jag_status st;
    if ((st = x_dim_index_args(op, args, nargs, &x, &d, &index)) || (st = jag__arg_tensor(op, args, nargs, 3, "src", &src)))
        return st;
    if (!jag_dtype_is_floating(x->dtype) || !jag_dtype_is_floating(src->dtype))
        return jag__error(JAG_EDTYPE, "%s: arguments 'x' and 'src' must be float, got %s and %s", op,
                          jag_dtype_name(x->dtype), jag_dtype_name(src->dtype));
    char b1[JAG_SHAPE_BUF], b2[JAG_SHAPE_BUF];
    if (src->ndim != x->ndim || index->ndim != src->ndim ||
        memcmp(index->sizes, src->sizes, (size_t)src->ndim * sizeof *src->sizes) != 0)
        return jag__error(JAG_ESHAPE, "%s: arguments 'index' %s and 'src' %s must have one shape with x's %d dims", op,
                          jag__shape_str(index->sizes, index->ndim, b1, sizeof b1),
                          jag__shape_str(src->sizes, src->ndim, b2, sizeof b2), x->ndim);
    for (int e = 0; e < x->ndim; e++)
        if (e != d && src->sizes[e] > x->sizes[e])
            return jag__error(JAG_ESHAPE, "%s: argument 'src' has shape %s, larger than 'x' of shape %s at dim %d", op,
                              jag__shape_str(src->sizes, src->ndim, b1, sizeof b1),
                              jag__shape_str(x->sizes, x->ndim, b2, sizeof b2), e);
    jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return JAG_OK;
}

/* ---- boxed adapters ------------------------------------------------------ */

// x is (outer..., S, inner...), index (L) in [0, S), out is (outer..., L, inner...) contiguous
jag_status jag__cpu_index_select(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    int d;
    jag_status st = jag__wrap_dim(op, "dim", (int)args[1].u.i, args[0].u.t->ndim, &d);
    if (st) return st;
    return jag__index_select_kernel(op, args[0].u.t, d, args[2].u.t, outs[0]);
}

// x is (s...), index and out are (i...) with out[c] = x[c with c[dim] = index[c]]
jag_status jag__cpu_gather(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    int d;
    jag_status st = jag__wrap_dim(op, "dim", (int)args[1].u.i, args[0].u.t->ndim, &d);
    if (st) return st;
    return jag__gather_kernel(op, args[0].u.t, d, args[2].u.t, outs[0]);
}

// weight is (V, D), indices (i...) in [0, V), out is (i..., D) contiguous
jag_status jag__cpu_embedding(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    return jag__embedding_kernel(op, args[0].u.t, args[1].u.t, outs[0]);
}

// x (s...), index and src (i...) -> out (s...) = x + src scattered at index along dim
jag_status jag__cpu_scatter_add(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    const jag_tensor *x = args[0].u.t;
    int d = 0;
    jag_status st = x->ndim ? jag__wrap_dim(op, "dim", (int)args[1].u.i, x->ndim, &d) : JAG_OK;
    if (st) return st;
    return jag__scatter_add_kernel(op, x, d, args[2].u.t, args[3].u.t, outs[0]);
}
