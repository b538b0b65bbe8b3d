/* ragged_ops.c — the nested class's calls of the ops along the ragged dim
 * (src/dispatch/ragged_op.c), on a jagged tensor's inner tensors: the
 * reductions over the ragged dim without indices and softmax /
 * log_softmax down it, and their gradients; max / min with indices and
 * argmax / argmin (ragged_reduce_indices). The nested handler and the
 * nested derivative rules call these rather than the kernels, so that a
 * traced program over nested tensors desugars into plain ops (their META
 * functions need only the shapes) and a compiled program runs them. */
#include "nested.h"

/* The boxed arguments of ragged_reduce (g NULL) or ragged_reduce_backward
 * for a jagged state. */
static int box_reduce(const nested_state *s, const jag_segment_spec *sp, const jag_tensor *y, const jag_tensor *idx,
                      const jag_tensor *g, jag_value *a) {
    int n = 0;
    a[n++] = jag__v_tensor(s->values), a[n++] = jag__v_tensor(s->offsets), a[n++] = jag__v_tensor(s->lengths);
    if (g) a[n++] = jag__v_tensor(y), a[n++] = jag__v_tensor(idx), a[n++] = jag__v_tensor(g);
    a[n++] = jag__v_int(sp->kind), a[n++] = jag__v_int(sp->mask), a[n++] = jag__v_int(sp->correction);
    a[n++] = jag__v_bool(sp->keepdim);
    return n;
}

jag_status jag__ragged_reduce(const nested_state *s, const jag_segment_spec *sp, jag_tensor **out) {
    jag_value a[10];
    return jag__dispatch_plain(JAG_OP_ragged_reduce, a, box_reduce(s, sp, NULL, NULL, NULL, a), out);
}

jag_status jag__ragged_reduce_backward(const nested_state *s, const jag_segment_spec *sp, const jag_tensor *y,
                                       const jag_tensor *idx, const jag_tensor *g, jag_tensor **out) {
    jag_value a[10];
    return jag__dispatch_plain(JAG_OP_ragged_reduce_backward, a, box_reduce(s, sp, y, idx, g, a), out);
}

jag_status jag__ragged_reduce_indices(const nested_state *s, const jag_segment_spec *sp, jag_tensor **outs) {
    bool arg = sp->kind == JAG_SEG_ARGMAX || sp->kind == JAG_SEG_ARGMIN; /* the indices of max / min */
    bool max = sp->kind == JAG_SEG_MAX || sp->kind == JAG_SEG_ARGMAX;
    jag_value a[] = {jag__v_tensor(s->values), jag__v_tensor(s->offsets), jag__v_tensor(s->lengths),
                     jag__v_int(max ? JAG_SEG_MAX : JAG_SEG_MIN), jag__v_bool(sp->keepdim)};
    jag_tensor *both[2] = {0};
    jag_status st = jag__dispatch_plain(JAG_OP_ragged_reduce_indices, a, 5, both);
    if (st) return st;
    if (arg) {
        jag_release(both[0]);
        outs[0] = both[1];
    } else {
        outs[0] = both[0], outs[1] = both[1];
    }
    return JAG_OK;
}

jag_status jag__ragged_softmax(const nested_state *s, bool log_softmax, jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(s->values), jag__v_tensor(s->offsets), jag__v_tensor(s->lengths),
                     jag__v_bool(log_softmax)};
    return jag__dispatch_plain(JAG_OP_ragged_softmax, a, 4, out);
}

jag_status jag__ragged_softmax_backward(const nested_state *s, const jag_tensor *y, const jag_tensor *g, bool log_softmax,
                                        jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(y), jag__v_tensor(s->offsets), jag__v_tensor(s->lengths), jag__v_tensor(g),
                     jag__v_bool(log_softmax)};
    return jag__dispatch_plain(JAG_OP_ragged_softmax_backward, a, 5, out);
}
