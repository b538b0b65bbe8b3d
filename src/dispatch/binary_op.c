/*
 * binary_op.c — the binary pointwise ops (add ... ge), where and clamp:
 * their META functions (broadcast shapes and the dtype rules, stated in
 * src/cpu/binary.c's comment) and the boxed adapters ops.def names, which
 * unbox the checked arguments and run the typed kernels of
 * src/cpu/binary.c; the boxed forms of the naive references, for the tests.
 */
#include "dispatch.h"
#include "pointwise_op.h"
#include "../cpu/kernels.h"

#include <math.h>

/* ---- operands ------------------------------------------------------------ */

/* a, and b as a tensor or (b == NULL) the scalar `scalar`. */
typedef struct {
    const jag_tensor *a, *b;
    double scalar;
} operands;

static jag_status get_operands(const char *op, const jag_value *args, int nargs, operands *p) {
    jag_status st = jag__arg_tensor(op, args, nargs, 0, "a", &p->a);
    if (st != JAG_OK) return st;
    p->b = NULL;
    p->scalar = 0;
    if (nargs > 1 && (args[1].kind == JAG_VAL_DOUBLE || args[1].kind == JAG_VAL_INT))
        return jag__arg_double(op, args, nargs, 1, "b", &p->scalar);
    return jag__arg_tensor(op, args, nargs, 1, "b", &p->b);
}

static bool is_integral(double v) { return isfinite(v) && v == trunc(v); }

/* Whether integral v is a value of integer dtype d. */
static bool fits(jag_dtype d, double v) {
    switch (d) {
    case JAG_INT32: return v >= -2147483648.0 && v <= 2147483647.0;
    case JAG_INT64: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case JAG_BOOL: return v == 0 || v == 1;
    default: return true;
    }
}

static jag_status out_shape(const char *op, const operands *p, int64_t *sizes, int *ndim) {
    if (p->b) return jag__broadcast_shapes(op, p->a->sizes, p->a->ndim, p->b->sizes, p->b->ndim, sizes, ndim);
    *ndim = p->a->ndim;
    if (p->a->ndim) memcpy(sizes, p->a->sizes, (size_t)p->a->ndim * sizeof *sizes);
    return JAG_OK;
}

/* The dtype add ... minimum compute in and return (see src/cpu/binary.c's comment). */
static jag_status arith_dtype(const char *op, const operands *p, jag_dtype *out) {
    jag_dtype t = p->a->dtype;
    if (p->b) {
        *out = jag_promote_types(t, p->b->dtype);
    } else if (jag_dtype_is_floating(t)) {
        *out = t;
    } else if (!is_integral(p->scalar)) {
        *out = JAG_FLOAT32;
    } else {
        *out = t == JAG_BOOL ? JAG_INT64 : t;
        if (!fits(*out, p->scalar))
            return jag__error(JAG_EINVAL,
                              "%s: argument 'b' is %.17g, outside the range of %s (the result dtype for a %s "
                              "tensor with an integral scalar); convert 'a' to a wider dtype first",
                              op, p->scalar, jag_dtype_name(*out), jag_dtype_name(t));
    }
    return JAG_OK;
}

/* The dtype eq ... ge compare in (see src/cpu/binary.c's comment). */
static jag_dtype compare_dtype(const operands *p) {
    jag_dtype t = p->a->dtype;
    if (p->b) return jag_promote_types(t, p->b->dtype);
    if (jag_dtype_is_floating(t)) return t;
    jag_dtype as_int = t == JAG_BOOL ? JAG_INT64 : t;
    return is_integral(p->scalar) && fits(as_int, p->scalar) ? as_int : JAG_FLOAT64;
}

/* ---- META ------------------------------------------------------------------- */

// a is (...), b is (...) or a double, [alpha double for add]; y is broadcast(a, b)
jag_status jag__meta_binary_arith(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    operands p;
    int64_t sizes[JAG_MAX_DIMS];
    int ndim;
    jag_dtype dtype;
    jag_status st;
    if ((st = get_operands(op, args, nargs, &p)) || (st = out_shape(op, &p, sizes, &ndim)) ||
        (st = arith_dtype(op, &p, &dtype)))
        return st;
    if (jag__pw_op_is(op, "sub")) {
        const char *arg = p.a->dtype == JAG_BOOL ? "a" : p.b && p.b->dtype == JAG_BOOL ? "b" : NULL;
        if (arg)
            return jag__error(JAG_EDTYPE,
                              "%s: argument '%s' is bool, expected a number dtype (subtraction of bool is not "
                              "supported; jag_ne is exclusive or)",
                              op, arg);
    }
    if (jag__pw_op_is(op, "pow") && dtype == JAG_BOOL)
        return jag__error(JAG_EDTYPE, "%s: arguments 'a' and 'b' are bool, expected a number dtype for pow", op);
    if (jag__pw_op_is(op, "add")) {
        double alpha;
        if ((st = jag__arg_double(op, args, nargs, 2, "alpha", &alpha))) return st;
        if (!jag_dtype_is_floating(dtype) && (!is_integral(alpha) || !fits(dtype == JAG_BOOL ? JAG_INT64 : dtype, alpha)))
            return jag__error(JAG_EINVAL, "%s: argument 'alpha' is %.17g, expected an integral value that %s holds "
                                          "(the result dtype)",
                              op, alpha, jag_dtype_name(dtype));
    }
    jag__spec_set(&outs[0], dtype, sizes, ndim);
    return JAG_OK;
}

// a is (...), b is (...) or a double; y is broadcast(a, b), floating
jag_status jag__meta_binary_float(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    operands p;
    int64_t sizes[JAG_MAX_DIMS];
    int ndim;
    jag_status st;
    if ((st = get_operands(op, args, nargs, &p)) || (st = out_shape(op, &p, sizes, &ndim))) return st;
    jag_dtype dtype = p.b ? jag_promote_types(p.a->dtype, p.b->dtype) : p.a->dtype;
    jag__spec_set(&outs[0], jag_dtype_is_floating(dtype) ? dtype : JAG_FLOAT32, sizes, ndim);
    return JAG_OK;
}

// a is (...), b is (...) or a double; y is broadcast(a, b), bool
jag_status jag__meta_binary_compare(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    operands p;
    int64_t sizes[JAG_MAX_DIMS];
    int ndim;
    jag_status st;
    if ((st = get_operands(op, args, nargs, &p)) || (st = out_shape(op, &p, sizes, &ndim))) return st;
    jag__spec_set(&outs[0], JAG_BOOL, sizes, ndim);
    return JAG_OK;
}

// cond (...) bool, a (...), b (...); y is broadcast(cond, a, b) of promote(a, b)
jag_status jag__meta_where(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *c, *a, *b;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "cond", &c)) || (st = jag__arg_tensor(op, args, nargs, 1, "a", &a)) ||
        (st = jag__arg_tensor(op, args, nargs, 2, "b", &b)))
        return st;
    if (c->dtype != JAG_BOOL)
        return jag__error(JAG_EDTYPE, "%s: argument 'cond' is %s, expected bool (compare with jag_ne(cond, 0) first)",
                          op, jag_dtype_name(c->dtype));
    int64_t ab[JAG_MAX_DIMS], sizes[JAG_MAX_DIMS];
    int nab, ndim;
    if (jag__broadcast_shapes(op, a->sizes, a->ndim, b->sizes, b->ndim, ab, &nab) != JAG_OK ||
        jag__broadcast_shapes(op, c->sizes, c->ndim, ab, nab, sizes, &ndim) != JAG_OK) {
        char sc[JAG_SHAPE_BUF], sa[JAG_SHAPE_BUF], sb[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: shapes of 'cond' %s, 'a' %s and 'b' %s do not broadcast", op,
                          jag__shape_str(c->sizes, c->ndim, sc, sizeof sc), jag__shape_str(a->sizes, a->ndim, sa, sizeof sa),
                          jag__shape_str(b->sizes, b->ndim, sb, sizeof sb));
    }
    jag__spec_set(&outs[0], jag_promote_types(a->dtype, b->dtype), sizes, ndim);
    return JAG_OK;
}

/* clamp's bounds: lo <= hi (no NaN). The result dtype: a float x keeps its
 * dtype; an integer x (bool: int64) keeps it while every finite bound is
 * integral (a bound outside its range is JAG_EINVAL), else float32, as max
 * and min with those scalars would give. lo = -inf and hi = +inf bound
 * nothing and count for neither. */
static jag_status clamp_args(const char *op, const jag_value *args, int nargs, const jag_tensor **x, double *lo,
                             double *hi, jag_dtype *dtype) {
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", x)) || (st = jag__arg_double(op, args, nargs, 1, "lo", lo)) ||
        (st = jag__arg_double(op, args, nargs, 2, "hi", hi)))
        return st;
    if (!(*lo <= *hi)) return jag__error(JAG_EINVAL, "%s: arguments lo = %g and hi = %g, expected lo <= hi", op, *lo, *hi);
    jag_dtype t = (*x)->dtype;
    if (jag_dtype_is_floating(t)) {
        *dtype = t;
        return JAG_OK;
    }
    *dtype = t == JAG_BOOL ? JAG_INT64 : t;
    const double bound[2] = {*lo, *hi};
    for (int k = 0; k < 2; k++) {
        if (bound[k] == (k ? INFINITY : -INFINITY)) continue;
        if (!is_integral(bound[k])) {
            *dtype = JAG_FLOAT32;
            return JAG_OK;
        }
    }
    for (int k = 0; k < 2; k++)
        if (isfinite(bound[k]) && !fits(*dtype, bound[k]))
            return jag__error(JAG_EINVAL, "%s: argument '%s' is %.17g, outside the range of %s (the result dtype for a %s tensor with integral bounds); convert 'x' to a wider dtype first",
                              op, k ? "hi" : "lo", bound[k], jag_dtype_name(*dtype), jag_dtype_name(t));
    return JAG_OK;
}

// x (...) -> y (...) in clamp_args' dtype
jag_status jag__meta_clamp(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x;
    double lo, hi;
    jag_dtype dtype = JAG_FLOAT32;
    jag_status st = clamp_args(op, args, nargs, &x, &lo, &hi, &dtype);
    if (st == JAG_OK) jag__spec_set(&outs[0], dtype, x->sizes, x->ndim);
    return st;
}

/* ---- boxed adapters ------------------------------------------------------ */

// sub, mul, div, pow, maximum, minimum: a (...), b (...) or a scalar,
// y broadcast(a, b): y = name(a, b) in y's dtype
#define ARITH_ADAPTER(name)                                                    \
    jag_status jag__cpu_##name(const char *op, const jag_value *args, int nargs, jag_tensor **outs) { \
        operands p;                                                            \
        jag_status st = get_operands(op, args, nargs, &p);                     \
        if (st != JAG_OK) return st;                                           \
        return jag__binary_kernel(op, JAG_BINARY_##name, p.a, p.b, p.scalar, 1.0, outs[0]->dtype, outs[0]); \
    }
ARITH_ADAPTER(sub)
ARITH_ADAPTER(mul)
ARITH_ADAPTER(div)
ARITH_ADAPTER(pow)
ARITH_ADAPTER(maximum)
ARITH_ADAPTER(minimum)
#undef ARITH_ADAPTER

// eq ... ge: a (...), b (...) or a scalar, y broadcast(a, b) bool: y = a OP b in compare_dtype
#define COMPARE_ADAPTER(name)                                                  \
    jag_status jag__cpu_##name(const char *op, const jag_value *args, int nargs, jag_tensor **outs) { \
        operands p;                                                            \
        jag_status st = get_operands(op, args, nargs, &p);                     \
        if (st != JAG_OK) return st;                                           \
        return jag__binary_kernel(op, JAG_BINARY_##name, p.a, p.b, p.scalar, 1.0, compare_dtype(&p), outs[0]); \
    }
COMPARE_ADAPTER(eq)
COMPARE_ADAPTER(ne)
COMPARE_ADAPTER(lt)
COMPARE_ADAPTER(le)
COMPARE_ADAPTER(gt)
COMPARE_ADAPTER(ge)
#undef COMPARE_ADAPTER

// a (...), b (...) or a scalar, y broadcast(a, b): y = a + alpha * b
jag_status jag__cpu_add(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    operands p;
    double alpha;
    jag_status st;
    if ((st = get_operands(op, args, nargs, &p)) || (st = jag__arg_double(op, args, nargs, 2, "alpha", &alpha)))
        return st;
    return jag__binary_kernel(op, JAG_BINARY_add, p.a, p.b, p.scalar, alpha, outs[0]->dtype, outs[0]);
}

// cond (...) bool, a (...), b (...), y broadcast(cond, a, b): y = cond ? a : b
jag_status jag__cpu_where(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    return jag__where_kernel(op, args[0].u.t, args[1].u.t, args[2].u.t, outs[0]);
}

// x (...) any strides and dtype, y (...) contiguous: y = min(max(x, lo), hi)
jag_status jag__cpu_clamp(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    double lo, hi;
    jag_dtype dtype = JAG_FLOAT32;
    jag_status st = clamp_args(op, args, nargs, &x, &lo, &hi, &dtype);
    if (st) return st;
    return jag__clamp_kernel(op, x, lo, hi, outs[0]);
}

/* ---- the naive references, boxed as the ops ------------------------------ */

/* The kernel function of a binary op, or -1 (where, or not a binary op). */
static int binary_fn_of(jag_op_id op) {
    switch (op) {
    case JAG_OP_add: return JAG_BINARY_add;
#define FN_CASE(name) case JAG_OP_##name: return JAG_BINARY_##name;
        JAG_BINARY_OP_LIST(FN_CASE)
#undef FN_CASE
    default: return -1;
    }
}

// a, b (or a scalar) [, alpha] broadcast; or cond, a, b for where. y new contiguous.
jag_status jag__ref_binary(jag_op_id op, const jag_value *args, int nargs, jag_tensor **out) {
    const jag_op_info *info = &jag__ops[op];
    jag_tensor *y = NULL;
    jag_status st = jag__pw_ref_output(op, args, nargs, &y);
    if (st != JAG_OK) return st;
    if (op == JAG_OP_where) {
        jag__where_reference(args[0].u.t, args[1].u.t, args[2].u.t, y);
    } else {
        int f = binary_fn_of(op);
        JAG_ASSERT(f >= 0);
        operands p = {0};
        get_operands(info->api_name, args, nargs, &p);
        jag_dtype compute = info->meta == jag__meta_binary_compare ? compare_dtype(&p) : y->dtype;
        double alpha = 1;
        if (op == JAG_OP_add) jag__arg_double(info->api_name, args, nargs, 2, "alpha", &alpha);
        jag__binary_reference((jag_binary_fn)f, p.a, p.b, p.scalar, alpha, compute, y);
    }
    *out = y;
    return JAG_OK;
}

// x (...), lo, hi -> y new contiguous: through double, the bounds rounded
// through the result dtype (an integer dtype's infinite bound bounds nothing)
jag_status jag__ref_clamp(const jag_value *args, int nargs, jag_tensor **out) {
    const jag_op_info *info = &jag__ops[JAG_OP_clamp];
    const jag_tensor *x;
    double lo, hi;
    jag_dtype dtype = JAG_FLOAT32;
    jag_status st = clamp_args(info->api_name, args, nargs, &x, &lo, &hi, &dtype);
    if (st != JAG_OK) return st;
    jag_tensor *y = jag__tensor_new(info->api_name, x->sizes, x->ndim, dtype, false, false);
    if (!y) return jag_last_status();
    jag__clamp_reference(x, lo, hi, y);
    *out = y;
    return JAG_OK;
}
