/* ragged_softmax_op.c — softmax / log_softmax down each component of a
 * jagged tensor's ragged dim as ops on plain tensors: (values, offsets,
 * lengths) in, values-shaped results out. The nested handler and the
 * nested derivative rule call these ops on a jagged tensor's inner tensors
 * instead of running the kernels of nested_reduce.c on its state, so that
 * a traced program over nested tensors desugars into them (their META
 * functions need only the shapes) and a compiled program runs them.
 *
 *   ragged_softmax(values (R, D...), offsets (B+1), lengths (B) or none,
 *                  log) -> y (R, D...)
 *   ragged_softmax_backward(y (R, D...), offsets, lengths, g (R, D...),
 *                  log) -> the values' gradient (R, D...)
 *
 * Each trailing position (column) of a component's rows is normalised on
 * its own; rows outside every component (holes, when lengths are given)
 * are 0 in both results. The offsets and lengths are user input when these
 * ops are called by name (jag_op_call): the kernels check them against the
 * rows before reading one. */
#include "nested.h"

/* values (or y) at 0, offsets, lengths at 1..2, the log flag at `log_at`. */
typedef struct {
    const jag_tensor *values, *offsets, *lengths;
    bool log;
} softmax_args;

static jag_status parse(const char *op, const jag_value *args, int nargs, const char *values_name, int log_at,
                        softmax_args *r) {
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, values_name, &r->values)) ||
        (st = jag__arg_tensor(op, args, nargs, 1, "offsets", &r->offsets)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, 2, "lengths", &r->lengths)) ||
        (st = jag__arg_bool(op, args, nargs, log_at, "log", &r->log)))
        return st;
    const jag_tensor *v = r->values;
    if (v->ndim < 1 || !jag_dtype_is_floating(v->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument '%s' must be a float tensor of 1 or more dims, got %s %d-d", op,
                          values_name, jag_dtype_name(v->dtype), v->ndim);
    return jag__ragged_check_index(op, r->offsets, r->lengths);
}

static void same_spec(const jag_tensor *v, jag_spec *out) { jag__spec_set(out, v->dtype, v->sizes, v->ndim); }

jag_status jag__meta_ragged_softmax(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    softmax_args r;
    jag_status st = parse(op, args, nargs, "values", 3, &r);
    if (!st) same_spec(r.values, &outs[0]);
    return st;
}

// values (R, D...), offsets (B+1), lengths (B) -> out (R, D...)
jag_status jag__cpu_ragged_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    softmax_args r;
    nested_state s;
    jag_tensor *hold[2] = {0};
    jag_status st = parse(op, args, nargs, "values", 3, &r);
    if (!st) st = jag__ragged_state(op, r.values, r.offsets, r.lengths, &s, hold);
    if (!st) st = jag__segment_softmax_into(op, &s, r.log, outs[0]); /* outs[0]: contiguous (R, D...) */
    jag_release(hold[0]), jag_release(hold[1]);
    return st;
}

/* y, offsets, lengths, g (y's shape and dtype), log */
static jag_status parse_backward(const char *op, const jag_value *args, int nargs, softmax_args *r, const jag_tensor **g) {
    jag_status st = parse(op, args, nargs, "y", 4, r);
    if (!st) st = jag__arg_tensor(op, args, nargs, 3, "g", g);
    if (st) return st;
    const jag_tensor *y = r->values;
    if ((*g)->dtype != y->dtype || (*g)->ndim != y->ndim ||
        memcmp((*g)->sizes, y->sizes, (size_t)y->ndim * sizeof *y->sizes) != 0) {
        char b1[JAG_SHAPE_BUF], b2[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument 'g' is %s %s, expected y's dtype and shape, %s %s", op,
                          jag_dtype_name((*g)->dtype), jag__shape_str((*g)->sizes, (*g)->ndim, b1, sizeof b1),
                          jag_dtype_name(y->dtype), jag__shape_str(y->sizes, y->ndim, b2, sizeof b2));
    }
    return JAG_OK;
}

jag_status jag__meta_ragged_softmax_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    softmax_args r;
    const jag_tensor *g;
    jag_status st = parse_backward(op, args, nargs, &r, &g);
    if (!st) same_spec(r.values, &outs[0]);
    return st;
}

// y (R, D...), offsets (B+1), lengths (B), g (R, D...) -> out (R, D...): the values' gradient, 0 in holes
jag_status jag__cpu_ragged_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    softmax_args r;
    const jag_tensor *g = NULL;
    nested_state s;
    jag_tensor *hold[2] = {0};
    jag_status st = parse_backward(op, args, nargs, &r, &g);
    if (!st) st = jag__ragged_state(op, r.values, r.offsets, r.lengths, &s, hold);
    if (!st) st = jag__segment_softmax_grad_into(op, &s, g, r.log, outs[0]); /* outs[0]: contiguous (R, D...) */
    jag_release(hold[0]), jag_release(hold[1]);
    return st;
}

jag_status jag__ragged_softmax(const nested_state *s, bool log_softmax, jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(s->values), jag__v_tensor(s->offsets), jag__v_tensor(s->lengths),
                     jag__v_bool(log_softmax)};
    return jag__dispatch(JAG_OP_ragged_softmax, a, 4, out);
}

jag_status jag__ragged_softmax_backward(const nested_state *s, const jag_tensor *y, const jag_tensor *g, bool log_softmax,
                                        jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(y), jag__v_tensor(s->offsets), jag__v_tensor(s->lengths), jag__v_tensor(g),
                     jag__v_bool(log_softmax)};
    return jag__dispatch(JAG_OP_ragged_softmax_backward, a, 5, out);
}
