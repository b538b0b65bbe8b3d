/*
 * reduce_backward_op.c — the mean_backward op (mean's gradient as one op
 * whose sizes are a size list): its META function (argument checks, output
 * shape) and the boxed adapter ops.def names, which unbox the checked
 * arguments and run the typed kernel of src/cpu/reduce_backward.c; the
 * boxed form of the naive reference, for the tests.
 */
#include "dispatch.h"
#include "../cpu/kernels.h"

/* ---- META ---------------------------------------------------------------- */

/* (g, sizes): g has len(sizes) dims, each equal to sizes' or 1 (mean's
 * gradient viewed with the reduced dims kept). */
static jag_status parse(const char *op, const jag_value *args, int nargs, const jag_tensor **g, const int64_t **sizes,
                        int *n) {
    jag_status st = jag__arg_tensor(op, args, nargs, 0, "g", g);
    if (!st) st = jag__arg_ints(op, args, nargs, 1, "sizes", sizes, n);
    if (st) return st;
    if (!jag_dtype_is_floating((*g)->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'g' has dtype %s, expected float32 or float64", op,
                          jag_dtype_name((*g)->dtype));
    if ((*g)->ndim != *n)
        return jag__error(JAG_ESHAPE, "%s: argument 'g' has %d dims and 'sizes' %d entries, expected as many", op,
                          (*g)->ndim, *n);
    for (int d = 0; d < *n; d++) {
        if ((*sizes)[d] < 0)
            return jag__error(JAG_EINVAL, "%s: argument 'sizes' has %lld at dim %d, expected a size >= 0", op,
                              (long long)(*sizes)[d], d);
        if ((*g)->sizes[d] != (*sizes)[d] && (*g)->sizes[d] != 1)
            return jag__error(JAG_ESHAPE, "%s: argument 'g' has size %lld at dim %d, expected %lld or 1", op,
                              (long long)(*g)->sizes[d], d, (long long)(*sizes)[d]);
    }
    return JAG_OK;
}

// g is (s0', ..., sn') with si' in {si, 1}, y is (s0, ..., sn) in g's dtype
jag_status jag__meta_mean_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *g;
    const int64_t *sizes;
    int n;
    jag_status st = parse(op, args, nargs, &g, &sizes, &n);
    if (!st) jag__spec_set(&outs[0], g->dtype, sizes, n);
    return st;
}

/* ---- boxed adapter ------------------------------------------------------- */

// g is (s0', ..., sn'), y is (s0, ..., sn) contiguous: y = expand(g) / N
jag_status jag__cpu_mean_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *g;
    const int64_t *sizes;
    int n;
    jag_status st = parse(op, args, nargs, &g, &sizes, &n);
    if (st) return st;
    jag__mean_backward_kernel(g, outs[0]);
    return JAG_OK;
}

/* ---- the naive reference, boxed as the op -------------------------------- */

jag_status jag__ref_mean_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_mean_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *g;
    const int64_t *sizes;
    int n;
    jag_status st = parse(op, args, nargs, &g, &sizes, &n);
    if (st) return st;
    jag__mean_backward_reference(g, outs[0]);
    return JAG_OK;
}
