/*
 * softmax_op.c — the softmax and log_softmax ops and their backward ops:
 * META functions (argument checks, output shapes) and the boxed adapters
 * ops.def names, which unbox the checked arguments and run the typed
 * kernels of src/cpu/softmax.c; the boxed forms of the naive references,
 * for the tests.
 */
#include "dispatch.h"
#include "../cpu/kernels.h"

/* ---- META ---------------------------------------------------------------- */

static jag_status parse(const char *op, const jag_value *args, int nargs, const jag_tensor **x, int *dim) {
    int64_t d;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", x)) || (st = jag__arg_int(op, args, nargs, 1, "dim", &d)))
        return st;
    int nd = (*x)->ndim ? (*x)->ndim : 1;
    if (d < -nd || d >= nd)
        return jag__error(JAG_ERANGE, "%s: argument 'dim' is %lld, expected a dim in [%d, %d] for a %d-d tensor", op,
                          (long long)d, -nd, nd - 1, (*x)->ndim);
    *dim = (int)(d < 0 ? d + nd : d);
    return JAG_OK;
}

/* (x, dim) -> y of x's shape and dtype; float dtypes only. */
jag_status jag__meta_softmax(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    int dim = 0;
    jag_status st = parse(op, args, nargs, &x, &dim);
    if (st) return st;
    if (!jag_dtype_is_floating(x->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'x' has dtype %s, expected float32 or float64", op,
                          jag_dtype_name(x->dtype));
    jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return JAG_OK;
}

/* (g, y, dim): g and y of one shape and float dtype. */
static jag_status parse_backward(const char *op, const jag_value *args, int nargs, const jag_tensor **g,
                                 const jag_tensor **y, int *dim) {
    jag_status st;
    int64_t d;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "g", g)) || (st = jag__arg_tensor(op, args, nargs, 1, "y", y)) ||
        (st = jag__arg_int(op, args, nargs, 2, "dim", &d)))
        return st;
    int nd = (*y)->ndim ? (*y)->ndim : 1;
    if (d < -nd || d >= nd)
        return jag__error(JAG_ERANGE, "%s: argument 'dim' is %lld, expected a dim in [%d, %d] for a %d-d tensor", op,
                          (long long)d, -nd, nd - 1, (*y)->ndim);
    *dim = (int)(d < 0 ? d + nd : d);
    if (!jag_dtype_is_floating((*y)->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'y' has dtype %s, expected float32 or float64", op,
                          jag_dtype_name((*y)->dtype));
    return jag__arg_grad_like(op, *g, *y, "y");
}

/* (g, y, dim) -> dx of y's shape and dtype. */
jag_status jag__meta_softmax_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *g, *y;
    int dim = 0;
    jag_status st = parse_backward(op, args, nargs, &g, &y, &dim);
    if (st == JAG_OK) jag__spec_set(&outs[0], y->dtype, y->sizes, y->ndim);
    return st;
}

/* ---- boxed adapters ------------------------------------------------------ */

static jag_status softmax_cpu(const char *op, const jag_value *args, int nargs, jag_tensor **outs, bool log_out) {
    const jag_tensor *x;
    int dim = 0;
    jag_status st = parse(op, args, nargs, &x, &dim);
    if (st) return st;
    jag__softmax_kernel(x, dim, log_out, outs[0]);
    return JAG_OK;
}

/* x is (O, R, I) around dim, out is x's shape: exp(x - max) / sum exp */
jag_status jag__cpu_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return softmax_cpu(op, args, nargs, outs, false);
}

/* x is (O, R, I) around dim, out is x's shape: x - max - log(sum exp) */
jag_status jag__cpu_log_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return softmax_cpu(op, args, nargs, outs, true);
}

static jag_status softmax_backward_cpu(const char *op, const jag_value *args, int nargs, jag_tensor **outs,
                                       bool log_out) {
    const jag_tensor *g, *y;
    int dim = 0;
    jag_status st = parse_backward(op, args, nargs, &g, &y, &dim);
    if (st) return st;
    return jag__softmax_backward_kernel(op, g, y, dim, log_out, outs[0]);
}

/* g, y = softmax(x) along dim -> dx = y (g - sum(g y)) along dim */
jag_status jag__cpu_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return softmax_backward_cpu(op, args, nargs, outs, false);
}

/* g, y = log_softmax(x) along dim -> dx = g - exp(y) sum(g) along dim */
jag_status jag__cpu_log_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return softmax_backward_cpu(op, args, nargs, outs, true);
}

/* ---- the naive references, boxed as the ops ------------------------------ */

static jag_status ref_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs, bool log_out) {
    const jag_tensor *x;
    int dim = 0;
    jag_status st = parse(op, args, nargs, &x, &dim);
    if (st) return st;
    jag__softmax_reference(x, dim, log_out, outs[0]);
    return JAG_OK;
}

jag_status jag__ref_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_softmax(op, args, nargs, outs, false);
}

jag_status jag__ref_log_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_log_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_softmax(op, args, nargs, outs, true);
}

static jag_status ref_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs,
                                       bool log_out) {
    const jag_tensor *g, *y;
    int dim = 0;
    jag_status st = parse_backward(op, args, nargs, &g, &y, &dim);
    if (st) return st;
    jag__softmax_backward_reference(g, y, dim, log_out, outs[0]);
    return JAG_OK;
}

jag_status jag__ref_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_softmax_backward(op, args, nargs, outs, false);
}

jag_status jag__ref_log_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_log_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_softmax_backward(op, args, nargs, outs, true);
}
