/* factory.c — the factory ops the tracer records: full (sizes, value, dtype)
 * and full_like (x, value). Eager code makes these tensors directly
 * (src/dispatch/factory_op.c); inside a traced function they are symbols, so a compiled
 * program makes them again on each run. */
#include "../autograd/autograd.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */

jag_status jag__meta_full(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const int64_t *sizes;
    int n;
    double value;
    int64_t dtype;
    jag_status st;
    if ((st = jag__arg_ints(op, args, nargs, 0, "sizes", &sizes, &n)) ||
        (st = jag__arg_double(op, args, nargs, 1, "value", &value)) ||
        (st = jag__arg_int(op, args, nargs, 2, "dtype", &dtype)))
        return st;
    if (!jag__dtype_valid((jag_dtype)dtype)) return jag__error(JAG_EDTYPE, "%s: argument 'dtype' is %lld, not a dtype", op, (long long)dtype);
    if ((st = jag__check_shape(op, sizes, n, (jag_dtype)dtype, NULL))) return st;
    jag__spec_set(&outs[0], (jag_dtype)dtype, sizes, n);
    return JAG_OK;
}

jag_status jag__cpu_full(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)op, (void)nargs;
    jag__fill(outs[0], args[1].kind == JAG_VAL_INT ? (double)args[1].u.i : args[1].u.d);
    return JAG_OK;
}

jag_status jag__meta_full_like(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    double value;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_double(op, args, nargs, 1, "value", &value)))
        return st;
    jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return JAG_OK;
}

jag_status jag__cpu_full_like(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)op, (void)nargs;
    jag__fill(outs[0], args[1].kind == JAG_VAL_INT ? (double)args[1].u.i : args[1].u.d);
    return JAG_OK;
}

jag_status jag__d_factory(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    (void)c, (void)grad_out, (void)grad_in; /* no gradient flows to x */
    return JAG_OK;
}
