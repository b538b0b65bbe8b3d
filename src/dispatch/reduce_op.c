/*
 * reduce_op.c — the reductions (sum, mean, prod, amax, amin, logsumexp,
 * var, std over a list of dims; max_dim, min_dim, argmax, argmin over one
 * dim): their META functions (dims, dtypes, output shapes) and the boxed
 * adapters ops.def names, which unbox the checked arguments and run the
 * typed kernel of src/cpu/reduce.c; the boxed forms of the naive
 * reference, for the tests.
 */
#include "dispatch.h"
#include "../cpu/kernels.h"

/* ---- META ---------------------------------------------------------------- */

/* mask[d] for each dim of x named in dims (every dim when n == 0). A 0-d
 * tensor accepts dim 0 / -1 and has nothing to mask. */
static jag_status dims_mask(const char *op, const jag_tensor *x, const int64_t *dims, int n, bool *mask) {
    int nd = x->ndim ? x->ndim : 1;
    bool seen[JAG_MAX_DIMS] = {0};
    for (int d = 0; d < JAG_MAX_DIMS; d++) mask[d] = n == 0 && d < x->ndim;
    for (int i = 0; i < n; i++) {
        int64_t d = dims[i];
        if (d < -nd || d >= nd)
            return jag__error(JAG_ERANGE, "%s: argument 'dims' has %lld at entry %d, expected a dim in [%d, %d] for a %d-d tensor",
                              op, (long long)d, i, -nd, nd - 1, x->ndim);
        int w = (int)(d < 0 ? d + nd : d);
        if (seen[w])
            return jag__error(JAG_EINVAL, "%s: argument 'dims' names dim %d more than once (entry %d is %lld), expected distinct dims",
                              op, w, i, (long long)d);
        seen[w] = true;
        if (x->ndim) mask[w] = true;
    }
    return JAG_OK;
}

static void reduced_spec(const jag_tensor *x, const bool *mask, bool keepdim, jag_dtype dtype, jag_spec *s) {
    int64_t sizes[JAG_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!mask[d])
            sizes[n++] = x->sizes[d];
        else if (keepdim)
            sizes[n++] = 1;
    }
    jag__spec_set(s, dtype, sizes, n);
}

/* (x, dims, [correction,] keepdim): keepdim is argument keep_i. */
static jag_status parse_dims(const char *op, const jag_value *args, int nargs, int keep_i, const jag_tensor **x,
                             bool *mask, bool *keepdim) {
    const int64_t *dims;
    int n;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", x)) || (st = jag__arg_ints(op, args, nargs, 1, "dims", &dims, &n)) ||
        (st = jag__arg_bool(op, args, nargs, keep_i, "keepdim", keepdim)))
        return st;
    if (n < 0 || n > JAG_MAX_DIMS || (n > 0 && !dims))
        return jag__error(JAG_EINVAL, "%s: argument 'dims' has %d entries, expected 0..%d", op, n, JAG_MAX_DIMS);
    return dims_mask(op, *x, dims, n, mask);
}

/* (x, dim, keepdim): dim JAG_DIM_ALL reduces every dim, in order. */
static jag_status parse_dim(const char *op, const jag_value *args, int nargs, bool allow_all, const jag_tensor **x,
                            bool *mask, bool *keepdim) {
    int64_t dim;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", x)) || (st = jag__arg_int(op, args, nargs, 1, "dim", &dim)) ||
        (st = jag__arg_bool(op, args, nargs, 2, "keepdim", keepdim)))
        return st;
    if (allow_all && dim == JAG_DIM_ALL) return dims_mask(op, *x, NULL, 0, mask);
    int nd = (*x)->ndim ? (*x)->ndim : 1;
    if (dim < -nd || dim >= nd)
        return jag__error(JAG_ERANGE, "%s: argument 'dim' is %lld, expected a dim in [%d, %d] for a %d-d tensor%s", op,
                          (long long)dim, -nd, nd - 1, (*x)->ndim, allow_all ? " or JAG_DIM_ALL" : "");
    return dims_mask(op, *x, &dim, 1, mask);
}

static jag_status need_float(const char *op, const jag_tensor *x) {
    if (jag_dtype_is_floating(x->dtype)) return JAG_OK;
    return jag__error(JAG_EDTYPE, "%s: argument 'x' has dtype %s, expected float32 or float64", op,
                      jag_dtype_name(x->dtype));
}

static jag_status need_nonempty(const char *op, const jag_tensor *x, const bool *mask) {
    for (int d = 0; d < x->ndim; d++) {
        if (mask[d] && x->sizes[d] == 0) {
            char b[JAG_SHAPE_BUF];
            return jag__error(JAG_EINVAL, "%s: argument 'x' of shape %s is empty along reduced dim %d, expected at least one element to reduce",
                              op, jag__shape_str(x->sizes, x->ndim, b, sizeof b), d);
        }
    }
    return JAG_OK;
}

/* sum, prod: bool and integers give int64, floats keep their dtype. */
jag_status jag__meta_reduce_sum(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    bool mask[JAG_MAX_DIMS], keepdim;
    jag_status st = parse_dims(op, args, nargs, 2, &x, mask, &keepdim);
    if (st) return st;
    reduced_spec(x, mask, keepdim, jag_dtype_is_floating(x->dtype) ? x->dtype : JAG_INT64, &outs[0]);
    return JAG_OK;
}

/* mean: float dtypes only. */
jag_status jag__meta_reduce_float(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    bool mask[JAG_MAX_DIMS], keepdim;
    jag_status st;
    if ((st = parse_dims(op, args, nargs, 2, &x, mask, &keepdim)) || (st = need_float(op, x))) return st;
    reduced_spec(x, mask, keepdim, x->dtype, &outs[0]);
    return JAG_OK;
}

/* amax, amin: any dtype, kept; nothing to reduce is an error. */
jag_status jag__meta_reduce_keep(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    bool mask[JAG_MAX_DIMS], keepdim;
    jag_status st;
    if ((st = parse_dims(op, args, nargs, 2, &x, mask, &keepdim)) || (st = need_nonempty(op, x, mask))) return st;
    reduced_spec(x, mask, keepdim, x->dtype, &outs[0]);
    return JAG_OK;
}

/* var, std: (x, dims, correction, keepdim), float dtypes only. */
jag_status jag__meta_reduce_var(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    bool mask[JAG_MAX_DIMS], keepdim;
    int64_t correction;
    jag_status st;
    if ((st = parse_dims(op, args, nargs, 3, &x, mask, &keepdim)) ||
        (st = jag__arg_int(op, args, nargs, 2, "correction", &correction)) || (st = need_float(op, x)))
        return st;
    reduced_spec(x, mask, keepdim, x->dtype, &outs[0]);
    return JAG_OK;
}

/* argmax, argmin: (x, dim or JAG_DIM_ALL, keepdim) -> int64. */
jag_status jag__meta_reduce_index(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    bool mask[JAG_MAX_DIMS], keepdim;
    jag_status st;
    if ((st = parse_dim(op, args, nargs, true, &x, mask, &keepdim)) || (st = need_nonempty(op, x, mask))) return st;
    reduced_spec(x, mask, keepdim, JAG_INT64, &outs[0]);
    return JAG_OK;
}

/* max_dim, min_dim: (x, dim, keepdim) -> values (x's dtype), indices (int64). */
jag_status jag__meta_reduce_index2(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    bool mask[JAG_MAX_DIMS], keepdim;
    jag_status st;
    if ((st = parse_dim(op, args, nargs, false, &x, mask, &keepdim)) || (st = need_nonempty(op, x, mask))) return st;
    reduced_spec(x, mask, keepdim, x->dtype, &outs[0]);
    reduced_spec(x, mask, keepdim, JAG_INT64, &outs[1]);
    return JAG_OK;
}

/* ---- boxed adapters ------------------------------------------------------ */

/* The unboxed arguments of a reduction: x, the reduced dims as a mask, and
 * var's and std's correction. */
typedef struct reduce_args {
    const jag_tensor *x;
    bool mask[JAG_MAX_DIMS];
    int64_t correction;
} reduce_args;

/* Unbox the arguments of reduction r: (x, dims, keepdim), (x, dims,
 * correction, keepdim) for var and std, (x, dim, keepdim) for the index
 * reductions (argmax and argmin also take JAG_DIM_ALL). */
static jag_status unbox(const char *op, jag_reduction r, const jag_value *args, int nargs, reduce_args *a) {
    bool keepdim;
    a->correction = 0;
    if (r >= JAG_REDUCTION_max_dim)
        return parse_dim(op, args, nargs, r >= JAG_REDUCTION_argmax, &a->x, a->mask, &keepdim);
    bool has_correction = r == JAG_REDUCTION_var || r == JAG_REDUCTION_std;
    jag_status st = parse_dims(op, args, nargs, has_correction ? 3 : 2, &a->x, a->mask, &keepdim);
    if (st == JAG_OK && has_correction) st = jag__arg_int(op, args, nargs, 2, "correction", &a->correction);
    return st;
}

static jag_status run_kernel(const char *op, jag_reduction r, const jag_value *args, int nargs, jag_tensor **outs) {
    reduce_args a;
    jag_status st = unbox(op, r, args, nargs, &a);
    if (st) return st;
    return jag__reduce_kernel(op, r, a.x, a.mask, a.correction, outs);
}

/* sum ... std: x is (...), out is x's shape without (or with size 1 at) the
 * reduced dims; max_dim, min_dim: values and indices x's shape without dim;
 * argmax, argmin: x's shape without dim, or 0-d for JAG_DIM_ALL */
#define REDUCE_ADAPTER(NAME)                                                   \
    jag_status jag__cpu_##NAME(const char *op, const jag_value *args, int nargs, jag_tensor **outs) { \
        return run_kernel(op, JAG_REDUCTION_##NAME, args, nargs, outs);        \
    }
#define REDUCE_REFERENCE(NAME)                                                 \
    jag_status jag__ref_##NAME(const char *op, const jag_value *args, int nargs, jag_tensor **outs); \
    jag_status jag__ref_##NAME(const char *op, const jag_value *args, int nargs, jag_tensor **outs) { \
        return run_reference(op, JAG_REDUCTION_##NAME, args, nargs, outs);     \
    }
#define REDUCTIONS(X)                                                          \
    X(sum) X(mean) X(prod) X(amax) X(amin) X(logsumexp) X(var) X(std)         \
    X(max_dim) X(min_dim) X(argmax) X(argmin)
REDUCTIONS(REDUCE_ADAPTER)

/* ---- the naive reference, boxed as the ops ------------------------------- */

/* The same signature and arguments as the adapters; outs allocated by the
 * caller from the op's META function. */
static jag_status run_reference(const char *op, jag_reduction r, const jag_value *args, int nargs,
                                jag_tensor **outs) {
    reduce_args a;
    jag_status st = unbox(op, r, args, nargs, &a);
    if (st) return st;
    return jag__reduce_reference(op, r, a.x, a.mask, a.correction, outs);
}

REDUCTIONS(REDUCE_REFERENCE)
