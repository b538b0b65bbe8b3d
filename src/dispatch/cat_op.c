/* cat_op.c — the cat op: its META function (argument checks, the output's
 * shape and promoted dtype) and the boxed adapter ops.def names, which
 * unboxes the checked arguments and runs the typed kernel of
 * src/cpu/cat.c. */
#include "dispatch.h"
#include "../cpu/kernels.h"

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
        if (ref < 0 && !jag__cat_skips(xs[i])) ref = i;
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
        if (jag__cat_skips(t)) continue;
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

// xs[i] are (s..., n_i, s...), out is (s..., sum n_i, s...)
jag_status jag__cpu_cat(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    jag_tensor *out = outs[0];
    if (jag_numel(out) == 0) return JAG_OK;
    int d;
    jag_status st = jag__wrap_dim(op, "dim", (int)args[1].u.i, out->ndim, &d);
    if (st) return st;
    return jag__cat_kernel(args[0].u.tensors.v, args[0].u.tensors.n, d, out);
}
