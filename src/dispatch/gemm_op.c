/* gemm_op.c — the mm, bmm and linear ops: their META functions (argument
 * checks, output shapes) and the boxed adapters ops.def names, which unbox
 * the checked arguments and run the typed kernels of src/cpu/gemm.c. */
#include "dispatch.h"
#include "../cpu/kernels.h"

/* ---- META --------------------------------------------------------------- */

static jag_status check_float(const char *op, const char *name, const jag_tensor *t) {
    if (!jag_dtype_is_floating(t->dtype))
        return jag__error(JAG_EDTYPE,
                          "%s: argument '%s' has dtype %s, expected a floating dtype (integer matrix products are not "
                          "supported; convert with jag_to_dtype)",
                          op, name, jag_dtype_name(t->dtype));
    return JAG_OK;
}

static jag_status check_same_dtype(const char *op, const char *name, const jag_tensor *t, const char *ref_name,
                                   const jag_tensor *ref) {
    if (t->dtype != ref->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected %s like '%s'", op, name,
                          jag_dtype_name(t->dtype), jag_dtype_name(ref->dtype), ref_name);
    return JAG_OK;
}

static jag_status check_ndim(const char *op, const char *name, const jag_tensor *t, int ndim, const char *what) {
    if (t->ndim != ndim) {
        char b[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument '%s' has shape %s (%d-d), expected %s", op, name,
                          jag__shape_str(t->sizes, t->ndim, b, sizeof b), t->ndim, what);
    }
    return JAG_OK;
}

static jag_status inner_mismatch(const char *op, const jag_tensor *a, const jag_tensor *b, int64_t ka, int64_t kb) {
    char x[JAG_SHAPE_BUF], y[JAG_SHAPE_BUF];
    return jag__error(JAG_ESHAPE, "%s: inner sizes differ: 'a' has shape %s and 'b' has shape %s (%lld vs %lld)", op,
                      jag__shape_str(a->sizes, a->ndim, x, sizeof x), jag__shape_str(b->sizes, b->ndim, y, sizeof y),
                      (long long)ka, (long long)kb);
}

// a is (n, k), b is (k, m) -> out (n, m)
jag_status jag__meta_mm(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *a, *b;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "a", &a)) || (st = jag__arg_tensor(op, args, nargs, 1, "b", &b)) ||
        (st = check_ndim(op, "a", a, 2, "a 2-d matrix (n, k); use jag_bmm or jag_matmul for other ranks")) ||
        (st = check_ndim(op, "b", b, 2, "a 2-d matrix (k, m); use jag_bmm or jag_matmul for other ranks")) ||
        (st = check_float(op, "a", a)) || (st = check_same_dtype(op, "b", b, "a", a)))
        return st;
    if (a->sizes[1] != b->sizes[0]) return inner_mismatch(op, a, b, a->sizes[1], b->sizes[0]);
    int64_t sizes[2] = {a->sizes[0], b->sizes[1]};
    jag__spec_set(&outs[0], a->dtype, sizes, 2);
    return JAG_OK;
}

// a is (B, n, k), b is (B, k, m) -> out (B, n, m)
jag_status jag__meta_bmm(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *a, *b;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "a", &a)) || (st = jag__arg_tensor(op, args, nargs, 1, "b", &b)) ||
        (st = check_ndim(op, "a", a, 3, "a 3-d batch of matrices (B, n, k)")) ||
        (st = check_ndim(op, "b", b, 3, "a 3-d batch of matrices (B, k, m)")) || (st = check_float(op, "a", a)) ||
        (st = check_same_dtype(op, "b", b, "a", a)))
        return st;
    if (a->sizes[0] != b->sizes[0]) {
        char x[JAG_SHAPE_BUF], y[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE,
                          "%s: batch sizes differ: 'a' has shape %s and 'b' has shape %s (%lld vs %lld); use "
                          "jag_matmul to broadcast batches",
                          op, jag__shape_str(a->sizes, 3, x, sizeof x), jag__shape_str(b->sizes, 3, y, sizeof y),
                          (long long)a->sizes[0], (long long)b->sizes[0]);
    }
    if (a->sizes[2] != b->sizes[1]) return inner_mismatch(op, a, b, a->sizes[2], b->sizes[1]);
    int64_t sizes[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
    jag__spec_set(&outs[0], a->dtype, sizes, 3);
    return JAG_OK;
}

// x is (..., in), w is (out, in), bias is (out) or absent -> out (..., out)
jag_status jag__meta_linear(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x, *w, *bias;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_tensor(op, args, nargs, 1, "w", &w)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, 2, "bias", &bias)))
        return st;
    if (x->ndim < 1) return jag__error(JAG_ESHAPE, "%s: argument 'x' is 0-d, expected at least 1 dim (..., in)", op);
    if ((st = check_ndim(op, "w", w, 2, "a 2-d weight (out, in)")) || (st = check_float(op, "x", x)) ||
        (st = check_same_dtype(op, "w", w, "x", x)))
        return st;
    char b1[JAG_SHAPE_BUF], b2[JAG_SHAPE_BUF];
    int64_t in = x->sizes[x->ndim - 1], out_f = w->sizes[0];
    if (w->sizes[1] != in)
        return jag__error(JAG_ESHAPE, "%s: argument 'w' has shape %s, expected (out, %lld) to match 'x' of shape %s", op,
                          jag__shape_str(w->sizes, 2, b1, sizeof b1), (long long)in,
                          jag__shape_str(x->sizes, x->ndim, b2, sizeof b2));
    if (bias) {
        if ((st = check_same_dtype(op, "bias", bias, "x", x))) return st;
        if (bias->ndim != 1 || bias->sizes[0] != out_f)
            return jag__error(JAG_ESHAPE, "%s: argument 'bias' has shape %s, expected [%lld] (w's out features)", op,
                              jag__shape_str(bias->sizes, bias->ndim, b1, sizeof b1), (long long)out_f);
    }
    int64_t sizes[JAG_MAX_DIMS];
    memcpy(sizes, x->sizes, (size_t)x->ndim * sizeof *sizes);
    sizes[x->ndim - 1] = out_f;
    jag__spec_set(&outs[0], x->dtype, sizes, x->ndim);
    return JAG_OK;
}

/* ---- boxed adapters ------------------------------------------------------ */

// a is (n, k), b is (k, m), out is (n, m)
jag_status jag__cpu_mm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    return jag__mm_kernel(op, args[0].u.t, args[1].u.t, outs[0]);
}

// a is (B, n, k), b is (B, k, m), out is (B, n, m)
jag_status jag__cpu_bmm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    return jag__bmm_kernel(op, args[0].u.t, args[1].u.t, outs[0]);
}

// x is (..., in), w is (out, in), bias is (out) or none, out is (..., out)
jag_status jag__cpu_linear(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    const jag_tensor *bias = args[2].kind == JAG_VAL_TENSOR ? args[2].u.t : NULL;
    return jag__linear_kernel(op, args[0].u.t, args[1].u.t, bias, outs[0]);
}
