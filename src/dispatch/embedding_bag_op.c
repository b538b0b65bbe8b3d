/* embedding_bag_op.c — the embedding_bag op: its META function (argument
 * checks, the output's shape) and the boxed adapter ops.def names, which
 * unboxes the checked arguments and runs the typed kernel of
 * src/cpu/embedding_bag.c; the backward the derivative rule calls and the
 * boxed form of the naive reference, for the tests. */
#include "dispatch.h"
#include "../cpu/kernels.h"

/* The op's arguments: (weight, indices, offsets, mode, per_sample_weights
 * or none). */
typedef struct bag_args {
    const jag_tensor *w, *ix, *off, *psw;
    int64_t mode;
} bag_args;

static jag_status parse(const char *op, const jag_value *args, int nargs, bag_args *a) {
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "weight", &a->w)) ||
        (st = jag__arg_tensor(op, args, nargs, 1, "indices", &a->ix)) ||
        (st = jag__arg_tensor(op, args, nargs, 2, "offsets", &a->off)) ||
        (st = jag__arg_int(op, args, nargs, 3, "mode", &a->mode)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, 4, "per_sample_weights", &a->psw)))
        return st;
    char b[JAG_SHAPE_BUF];
    if (!jag_dtype_is_floating(a->w->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'weight' has dtype %s, expected float32 or float64", op, jag_dtype_name(a->w->dtype));
    if (a->w->ndim != 2)
        return jag__error(JAG_ESHAPE, "%s: argument 'weight' has shape %s, expected a 2-d table (V, D)", op,
                          jag__shape_str(a->w->sizes, a->w->ndim, b, sizeof b));
    if (a->ix->ndim != 1 || (a->ix->dtype != JAG_INT64 && a->ix->dtype != JAG_INT32))
        return jag__error(JAG_EINVAL, "%s: argument 'indices' is %s %s, expected a 1-d int32 or int64 tensor", op,
                          jag_dtype_name(a->ix->dtype), jag__shape_str(a->ix->sizes, a->ix->ndim, b, sizeof b));
    if (a->off->ndim != 1 || a->off->dtype != JAG_INT64 || a->off->sizes[0] < 1)
        return jag__error(JAG_EINVAL, "%s: argument 'offsets' is %s %s, expected a 1-d int64 tensor of B+1 bag bounds", op,
                          jag_dtype_name(a->off->dtype), jag__shape_str(a->off->sizes, a->off->ndim, b, sizeof b));
    if (a->mode < JAG_BAG_SUM || a->mode > JAG_BAG_MAX)
        return jag__error(JAG_EINVAL, "%s: argument 'mode' is %lld, expected 0 (sum), 1 (mean) or 2 (max)", op, (long long)a->mode);
    if (a->psw) {
        if (a->mode != JAG_BAG_SUM)
            return jag__error(JAG_EINVAL, "%s: argument 'per_sample_weights' needs mode 0 (sum), got mode %lld", op, (long long)a->mode);
        if (a->psw->ndim != 1 || a->psw->sizes[0] != a->ix->sizes[0] || a->psw->dtype != a->w->dtype)
            return jag__error(JAG_ESHAPE, "%s: argument 'per_sample_weights' is %s %s, expected %s (%lld) like 'indices'", op,
                              jag_dtype_name(a->psw->dtype), jag__shape_str(a->psw->sizes, a->psw->ndim, b, sizeof b),
                              jag_dtype_name(a->w->dtype), (long long)a->ix->sizes[0]);
    }
    return JAG_OK;
}

/* (weight, indices, offsets, mode, per_sample_weights or none) -> (B, D) */
jag_status jag__meta_embedding_bag(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    bag_args a;
    jag_status st = parse(op, args, nargs, &a);
    if (st) return st;
    int64_t sizes[2] = {a.off->sizes[0] - 1, a.w->sizes[1]};
    jag__spec_set(&outs[0], a.w->dtype, sizes, 2);
    return JAG_OK;
}

// weight (V, D), indices (N), offsets (B+1), per_sample_weights (N) or none -> out (B, D) contiguous
jag_status jag__cpu_embedding_bag(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    bag_args a;
    jag_status st = parse(op, args, nargs, &a);
    if (st) return st;
    return jag__embedding_bag_kernel(op, a.w, a.ix, a.off, (int)a.mode, a.psw, outs[0]);
}

/* The reference on the op's boxed arguments. */
jag_status jag__ref_embedding_bag(const jag_value *args, int nargs, jag_tensor *out);
jag_status jag__ref_embedding_bag(const jag_value *args, int nargs, jag_tensor *out) {
    const char *op = "jag__ref_embedding_bag";
    bag_args a;
    jag_status st = parse(op, args, nargs, &a);
    if (st) return st;
    return jag__embedding_bag_reference(op, a.w, a.ix, a.off, (int)a.mode, a.psw, out);
}

// the backward on the op's boxed arguments: g (B, D), y the forward's output (B, D) -> *grad_w (V, D) and
// *grad_psw (N) (when asked for; grad_psw only when the op had per-sample weights): new tensors
jag_status jag__embedding_bag_backward(const char *op, const jag_value *args, int nargs, const jag_tensor *y,
                                       const jag_tensor *g, jag_tensor **grad_w, jag_tensor **grad_psw);
jag_status jag__embedding_bag_backward(const char *op, const jag_value *args, int nargs, const jag_tensor *y,
                                       const jag_tensor *g, jag_tensor **grad_w, jag_tensor **grad_psw) {
    bag_args a;
    jag_status st = parse(op, args, nargs, &a);
    if (st) return st;
    jag_tensor *gw = NULL, *gp = NULL;
    int64_t N = a.ix->sizes[0];
    if (grad_w && !(gw = jag__tensor_new(op, a.w->sizes, 2, a.w->dtype, true, false))) st = jag_last_status();
    if (!st && grad_psw && a.psw && !(gp = jag__tensor_new(op, &N, 1, a.w->dtype, false, false))) st = jag_last_status();
    if (!st) st = jag__embedding_bag_backward_kernel(op, a.w, a.ix, a.off, (int)a.mode, a.psw, y, g, gw, gp);
    if (st) {
        jag_release(gw), jag_release(gp);
        return st;
    }
    if (grad_w) *grad_w = gw;
    if (grad_psw) *grad_psw = gp;
    return JAG_OK;
}
