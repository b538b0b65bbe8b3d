/*
 * unary_op.c — the unary pointwise ops (neg ... hardtanh): their META
 * functions (the result dtype; the parametrised ops' scalars) and the boxed
 * adapters ops.def names, which unbox the checked arguments and run the
 * typed kernel of src/cpu/unary.c; the boxed forms of the naive reference,
 * for the tests. dtypes: float ops compute in float32 or float64 and
 * promote integer and bool inputs to float32; neg, abs, relu, square,
 * sign, floor, ceil, round and trunc keep the input dtype (the last four
 * and neg and relu refuse bool; a bool square gives int64, as torch).
 */
#include "dispatch.h"
#include "pointwise_op.h"
#include "../cpu/kernels.h"

/* ---- META ---------------------------------------------------------------- */

// x is (...), y is (...) of x's dtype (bool: see the file comment)
jag_status jag__meta_unary_keep(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    jag_status st = jag__arg_tensor(op, args, nargs, 0, "x", &x);
    if (st != JAG_OK) return st;
    jag_dtype dtype = x->dtype;
    if (dtype == JAG_BOOL) {
        if (jag__pw_op_is(op, "neg") || jag__pw_op_is(op, "relu") || jag__pw_op_is(op, "floor") ||
            jag__pw_op_is(op, "ceil") || jag__pw_op_is(op, "round") || jag__pw_op_is(op, "trunc"))
            return jag__error(JAG_EDTYPE,
                              "%s: argument 'x' is bool, expected float32, float64, int32 or int64 "
                              "(convert it with jag_to_dtype first)",
                              op);
        if (jag__pw_op_is(op, "square")) dtype = JAG_INT64;
    }
    jag__spec_set(&outs[0], dtype, x->sizes, x->ndim);
    return JAG_OK;
}

// x is (...), y is (...) float: float32 for integer/bool x, else x's dtype
jag_status jag__meta_unary_float(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    jag_status st = jag__arg_tensor(op, args, nargs, 0, "x", &x);
    if (st != JAG_OK) return st;
    jag__spec_set(&outs[0], jag_dtype_is_floating(x->dtype) ? x->dtype : JAG_FLOAT32, x->sizes, x->ndim);
    return JAG_OK;
}

/* The scalar arguments of the parametrised ops: how many follow x, their
 * names for messages. */
static int param_names(const char *op, const char **names) {
    if (jag__pw_op_is(op, "leaky_relu")) { names[0] = "negative_slope"; return 1; }
    if (jag__pw_op_is(op, "elu")) { names[0] = "alpha"; return 1; }
    if (jag__pw_op_is(op, "softplus")) { names[0] = "beta"; names[1] = "threshold"; return 2; }
    names[0] = "min_val";
    names[1] = "max_val";
    return 2; /* hardtanh */
}

// (x, scalars...) -> y (...) float: float32 for integer/bool x, else x's dtype.
// softplus: beta != 0; hardtanh: min_val <= max_val (torch's checks).
jag_status jag__meta_unary_param(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const char *names[2];
    int np = param_names(op, names);
    double prm[2] = {0, 0};
    if (nargs != 1 + np)
        return jag__error(JAG_EINVAL, "%s: expected %d arguments (x and %d scalars), got %d", op, 1 + np, np, nargs);
    for (int k = 0; k < np; k++) {
        jag_status st = jag__arg_double(op, args, nargs, 1 + k, names[k], &prm[k]);
        if (st != JAG_OK) return st;
    }
    if (jag__pw_op_is(op, "softplus") && prm[0] == 0)
        return jag__error(JAG_EINVAL, "%s: argument 'beta' is 0, expected a nonzero number", op);
    if (jag__pw_op_is(op, "hardtanh") && !(prm[0] <= prm[1]))
        return jag__error(JAG_EINVAL, "%s: argument 'min_val' (%g) is greater than 'max_val' (%g), expected min_val <= max_val",
                          op, prm[0], prm[1]);
    return jag__meta_unary_float(op, args, 1, outs);
}

/* gelu_backward, gelu_tanh_backward, silu_backward: (g, x) -> dx of x's
 * shape and dtype, g and x float32 or float64 of one dtype and one shape
 * (their rules' operands); sigmoid_backward, tanh_backward: the same with
 * the op's output y for x; logsigmoid_backward; softplus_backward, with
 * softplus's beta (nonzero) and threshold; hardswish_backward,
 * hardsigmoid_backward */
jag_status jag__meta_activation_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *g, *x;
    const char *xn = jag__pw_op_is(op, "sigmoid_backward") || jag__pw_op_is(op, "tanh_backward") ? "y" : "x";
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "g", &g)) || (st = jag__arg_tensor(op, args, nargs, 1, xn, &x)))
        return st;
    if (x->dtype != JAG_FLOAT32 && x->dtype != JAG_FLOAT64)
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected float32 or float64", op, xn,
                          jag_dtype_name(x->dtype));
    if ((st = jag__arg_grad_like(op, g, x, xn))) return st;
    if (jag__pw_op_is(op, "softplus_backward")) {
        double beta, thr;
        if ((st = jag__arg_double(op, args, nargs, 2, "beta", &beta)) ||
            (st = jag__arg_double(op, args, nargs, 3, "threshold", &thr)))
            return st;
        if (beta == 0) return jag__error(JAG_EINVAL, "%s: argument 'beta' is 0, expected a nonzero number", op);
    }
    jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return JAG_OK;
}

/* ---- boxed adapters ------------------------------------------------------ */

/* softplus_backward's beta and threshold (an int or a float each, the
 * META function checked them); 0 for the other gradient ops */
static void act_params(const char *op, const jag_value *args, int nargs, double *prm) {
    prm[0] = prm[1] = 0;
    if (nargs > 2) (void)jag__arg_double(op, args, nargs, 2, "beta", &prm[0]);
    if (nargs > 3) (void)jag__arg_double(op, args, nargs, 3, "threshold", &prm[1]);
}

// jag__cpu_gelu_backward ... jag__cpu_silu_backward: g, x are (...), dx is (...): dx = g act'(x);
// jag__cpu_sigmoid_backward, jag__cpu_tanh_backward: g, y (the op's output) are (...): dx = g act'(x) from y;
// jag__cpu_softplus_backward: g, x, beta, threshold
#define ACT_BACKWARD_ADAPTER(name)                                             \
    jag_status jag__cpu_##name##_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) { \
        double prm[2];                                                         \
        act_params(op, args, nargs, prm);                                      \
        jag__act_backward_kernel(JAG_ACT_##name, prm, args[0].u.t, args[1].u.t, outs[0]); \
        return JAG_OK;                                                         \
    }
ACT_BACKWARD_ADAPTER(gelu)
ACT_BACKWARD_ADAPTER(gelu_tanh)
ACT_BACKWARD_ADAPTER(silu)
ACT_BACKWARD_ADAPTER(sigmoid)
ACT_BACKWARD_ADAPTER(tanh)
ACT_BACKWARD_ADAPTER(logsigmoid)
ACT_BACKWARD_ADAPTER(softplus)
ACT_BACKWARD_ADAPTER(hardswish)
ACT_BACKWARD_ADAPTER(hardsigmoid)
#undef ACT_BACKWARD_ADAPTER

/* The scalars of a parametrised op (its META function checked them). */
static void unbox_params(const char *op, const jag_value *args, int nargs, jag_unary_fn f, double *prm) {
    const char *names[2];
    param_names(op, names);
    prm[0] = prm[1] = 0;
    for (int k = 0; k < jag__unary_param_count(f); k++) (void)jag__arg_double(op, args, nargs, 1 + k, names[k], &prm[k]);
}

// jag__cpu_neg ... jag__cpu_atan: x is (...), y is (...): y = name(x)
#define UNARY_ADAPTER(name)                                                    \
    jag_status jag__cpu_##name(const char *op, const jag_value *args, int nargs, jag_tensor **outs) { \
        (void)nargs;                                                           \
        return jag__unary_kernel(op, JAG_UNARY_##name, args[0].u.t, NULL, outs[0]); \
    }
JAG_UNARY_OP_LIST(UNARY_ADAPTER)
#undef UNARY_ADAPTER

// jag__cpu_leaky_relu ... jag__cpu_hardtanh: (x, scalars) -> y = name(x; scalars)
#define PARAM_ADAPTER(name)                                                    \
    jag_status jag__cpu_##name(const char *op, const jag_value *args, int nargs, jag_tensor **outs) { \
        double prm[2];                                                         \
        unbox_params(op, args, nargs, JAG_UNARY_##name, prm);                  \
        return jag__unary_kernel(op, JAG_UNARY_##name, args[0].u.t, prm, outs[0]); \
    }
JAG_UNARY_PARAM_OP_LIST(PARAM_ADAPTER)
#undef PARAM_ADAPTER

/* ---- the naive reference, boxed as the ops ------------------------------- */

/* The kernel function of op, or -1 when op is not a unary op. */
static int unary_fn_of(jag_op_id op) {
    switch (op) {
#define FN_CASE(name) case JAG_OP_##name: return JAG_UNARY_##name;
        JAG_UNARY_OP_LIST(FN_CASE) JAG_UNARY_PARAM_OP_LIST(FN_CASE)
#undef FN_CASE
    default: return -1;
    }
}

/* y (new, from op's META function) = the reference of op on args[0] (and
 * its scalars, for a parametrised op). */
static jag_status ref_run(jag_op_id op, const jag_value *args, int nargs, jag_tensor **out) {
    int f = unary_fn_of(op);
    JAG_ASSERT(f >= 0);
    const jag_op_info *info = &jag__ops[op];
    jag_tensor *y = NULL;
    jag_status st = jag__pw_ref_output(op, args, nargs, &y);
    if (st != JAG_OK) return st;
    double prm[2] = {0, 0};
    unbox_params(info->api_name, args, nargs, (jag_unary_fn)f, prm);
    jag__unary_reference((jag_unary_fn)f, args[0].u.t, prm, y);
    *out = y;
    return JAG_OK;
}

// x is (...), y is (...) new contiguous: y = f(x), one element at a time
jag_status jag__ref_unary(jag_op_id op, const jag_value *args, int nargs, jag_tensor **out) {
    return ref_run(op, args, nargs, out);
}

// (x, scalars) -> y (...) new contiguous, one element at a time (x contiguous or not)
jag_status jag__ref_unary_param(jag_op_id op, const jag_value *args, int nargs, jag_tensor **out) {
    return ref_run(op, args, nargs, out);
}

// g, x are (...), outs[0] (...) contiguous, from the META function's spec: g act'(x) in double, one
// element at a time (act the op's activation, JAG_OP_gelu_backward ...)
jag_status jag__ref_activation_backward(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_activation_backward(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    jag_spec spec;
    jag_status st = jag__meta_activation_backward(jag__ops[op].api_name, args, nargs, &spec);
    if (st) return st;
    jag_act_fn f = op == JAG_OP_gelu_backward        ? JAG_ACT_gelu
                   : op == JAG_OP_gelu_tanh_backward ? JAG_ACT_gelu_tanh
                   : op == JAG_OP_silu_backward      ? JAG_ACT_silu
                   : op == JAG_OP_sigmoid_backward   ? JAG_ACT_sigmoid
                   : op == JAG_OP_tanh_backward      ? JAG_ACT_tanh
                   : op == JAG_OP_logsigmoid_backward ? JAG_ACT_logsigmoid
                   : op == JAG_OP_softplus_backward   ? JAG_ACT_softplus
                   : op == JAG_OP_hardswish_backward  ? JAG_ACT_hardswish
                                                      : JAG_ACT_hardsigmoid;
    double prm[2];
    act_params(jag__ops[op].api_name, args, nargs, prm);
    jag__act_backward_reference(f, prm, args[0].u.t, args[1].u.t, outs[0]);
    return JAG_OK;
}
