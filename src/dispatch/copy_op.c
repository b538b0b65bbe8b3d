/* copy_op.c — the clone and to_dtype ops: their META functions (argument
 * checks, the output's shape and dtype) and the boxed adapter ops.def names
 * for both, which runs the typed copy kernel (jag__copy_into,
 * src/cpu/copy.c). */
#include "dispatch.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */

jag_status jag__meta_clone(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    jag_status st = jag__arg_tensor(op, args, nargs, 0, "x", &x);
    if (st == JAG_OK) jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return st;
}

jag_status jag__meta_to_dtype(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    int64_t dtype;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_int(op, args, nargs, 1, "dtype", &dtype)))
        return st;
    if (!jag__dtype_valid((jag_dtype)dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'dtype' is %lld, expected one of float32, float64, int32, int64, bool, float16, bfloat16",
                          op, (long long)dtype);
    jag__spec_set(&outs[0], (jag_dtype)dtype, x->sizes, x->ndim);
    return JAG_OK;
}

/* x (any strides, any dtype) -> out contiguous, x's shape, converted to
 * out's dtype */
jag_status jag__cpu_copy(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)op, (void)nargs;
    jag__copy_into(outs[0], args[0].u.t);
    return JAG_OK;
}
