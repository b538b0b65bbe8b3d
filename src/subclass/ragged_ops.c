/* ragged_ops.c — reductions over the ragged dim as ops on plain tensors:
 * (values, offsets, lengths) in, dense results out. The nested handler and
 * the nested derivative rules call these ops on a jagged tensor's inner
 * tensors instead of running the kernels of nested_reduce.c on its state,
 * so that a traced program over nested tensors desugars into them (their
 * META functions need only the shapes) and a compiled program runs them.
 *
 *   ragged_reduce(values (R, D...), offsets (B+1), lengths (B) or none,
 *                 kind, mask, correction, keepdim) -> (B, kept D...)
 *   ragged_reduce_backward(values, offsets, lengths, y or none, g (B, kept
 *                 D...), kind, mask, correction, keepdim) -> (R, D...)
 *
 * kind: a jag_segment_kind without indices (sum, mean, amax, amin,
 * logsumexp, var, std); mask: the trailing dims of values reduced with the
 * ragged dim (bit d: values dim d >= 1). The offsets and lengths are user
 * input when these ops are called by name (jag_op_call): the kernels check
 * them against the values before reading a row (jag__ragged_check_index and
 * jag__ragged_state, which ragged_softmax_op.c shares). */
#include "nested.h"

static bool kind_ok(int64_t k) {
    return k == JAG_SEG_SUM || k == JAG_SEG_MEAN || k == JAG_SEG_AMAX || k == JAG_SEG_AMIN || k == JAG_SEG_LSE ||
           k == JAG_SEG_VAR || k == JAG_SEG_STD;
}

jag_status jag__ragged_check_index(const char *op, const jag_tensor *o, const jag_tensor *l) {
    if (o->dtype != JAG_INT64 || o->ndim != 1 || o->sizes[0] < 1)
        return jag__error(JAG_EINVAL, "%s: argument 'offsets' must be int64 of shape (B+1), got %s %d-d", op,
                          jag_dtype_name(o->dtype), o->ndim);
    if (l && (l->dtype != JAG_INT64 || l->ndim != 1 || l->sizes[0] != o->sizes[0] - 1))
        return jag__error(JAG_EINVAL, "%s: argument 'lengths' must be int64 of shape (B) = (%lld)", op,
                          (long long)(o->sizes[0] - 1));
    return JAG_OK;
}

/* The arguments common to both ops: values, offsets, lengths at 0..2 and
 * kind, mask, correction, keepdim from position `at`. */
typedef struct {
    const jag_tensor *values, *offsets, *lengths;
    jag_segment_spec sp;
} ragged_args;

static jag_status parse(const char *op, const jag_value *args, int nargs, int at, ragged_args *r) {
    int64_t kind, mask;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "values", &r->values)) ||
        (st = jag__arg_tensor(op, args, nargs, 1, "offsets", &r->offsets)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, 2, "lengths", &r->lengths)) ||
        (st = jag__arg_int(op, args, nargs, at, "kind", &kind)) || (st = jag__arg_int(op, args, nargs, at + 1, "mask", &mask)) ||
        (st = jag__arg_int(op, args, nargs, at + 2, "correction", &r->sp.correction)) ||
        (st = jag__arg_bool(op, args, nargs, at + 3, "keepdim", &r->sp.keepdim)))
        return st;
    const jag_tensor *v = r->values, *o = r->offsets, *l = r->lengths;
    if (!kind_ok(kind))
        return jag__error(JAG_EINVAL, "%s: argument 'kind' is %lld, expected a reduction without indices (0-2, 3-6)", op,
                          (long long)kind);
    if (v->ndim < 1 || !jag_dtype_is_floating(v->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'values' must be a float tensor of 1 or more dims, got %s %d-d", op,
                          jag_dtype_name(v->dtype), v->ndim);
    if (mask < 0 || (mask & 1) || mask >> v->ndim)
        return jag__error(JAG_EINVAL, "%s: argument 'mask' is %lld, expected bits of values dims 1..%d", op, (long long)mask,
                          v->ndim - 1);
    if ((st = jag__ragged_check_index(op, o, l))) return st;
    if (r->sp.correction < 0) return jag__error(JAG_EINVAL, "%s: argument 'correction' must be >= 0", op);
    r->sp.kind = (jag_segment_kind)kind, r->sp.mask = (unsigned)mask;
    return JAG_OK;
}

/* (B, kept D...) */
static void reduced_spec(const ragged_args *r, jag_spec *out) {
    const jag_tensor *v = r->values;
    int nd = 0;
    out->dtype = v->dtype;
    out->sizes[nd++] = r->offsets->sizes[0] - 1;
    if (r->sp.keepdim) out->sizes[nd++] = 1;
    for (int d = 1; d < v->ndim; d++) {
        if (!(r->sp.mask >> d & 1)) out->sizes[nd++] = v->sizes[d];
        else if (r->sp.keepdim) out->sizes[nd++] = 1;
    }
    out->ndim = nd;
}

jag_status jag__ragged_state(const char *op, const jag_tensor *values, const jag_tensor *offsets, const jag_tensor *lengths,
                             nested_state *s, jag_tensor **hold) {
    jag_value a[] = {jag__v_tensor(offsets)}, b[] = {jag__v_tensor(lengths)};
    const jag_tensor *o = offsets, *l = lengths;
    jag_status st;
    if (!jag_is_contiguous(o)) {
        if ((st = jag__dispatch(JAG_OP_clone, a, 1, &hold[0]))) return st;
        o = hold[0];
    }
    if (l && !jag_is_contiguous(l)) {
        if ((st = jag__dispatch(JAG_OP_clone, b, 1, &hold[1]))) return st;
        l = hold[1];
    }
    const int64_t *off = (const int64_t *)jag__ptr(o), *len = l ? (const int64_t *)jag__ptr(l) : NULL;
    int64_t B = o->sizes[0] - 1, rows = values->sizes[0];
    for (int64_t i = 0; i < B; i++) {
        int64_t n = len ? len[i] : off[i + 1] - off[i];
        if (off[i] < 0 || n < 0 || off[i] > rows || n > rows - off[i] || (!len && off[i + 1] < off[i]))
            return jag__error(JAG_EINVAL, "%s: component %lld's rows [%lld, %lld + %lld) do not fit the %lld value rows", op,
                              (long long)i, (long long)off[i], (long long)off[i], (long long)n, (long long)rows);
    }
    memset(s, 0, sizeof *s);
    s->layout = JAG_JAGGED, s->batch = B;
    s->values = (jag_tensor *)values, s->offsets = (jag_tensor *)o, s->lengths = (jag_tensor *)l;
    return JAG_OK;
}

static jag_status state_of(const char *op, const ragged_args *r, nested_state *s, jag_tensor **hold) {
    return jag__ragged_state(op, r->values, r->offsets, r->lengths, s, hold);
}

jag_status jag__meta_ragged_reduce(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    ragged_args r;
    jag_status st = parse(op, args, nargs, 3, &r);
    if (!st) reduced_spec(&r, &outs[0]);
    return st;
}

// values (R, D...), offsets (B+1), lengths (B) -> out (B, kept D...)
jag_status jag__cpu_ragged_reduce(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    ragged_args r;
    nested_state s;
    jag_tensor *hold[2] = {0};
    jag_status st = parse(op, args, nargs, 3, &r);
    if (!st) st = state_of(op, &r, &s, hold);
    if (!st) st = jag__segment_reduce_into(op, &s, &r.sp, outs[0], NULL); /* outs[0]: contiguous (B, kept D...) */
    jag_release(hold[0]), jag_release(hold[1]);
    return st;
}

jag_status jag__meta_ragged_reduce_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    ragged_args r;
    const jag_tensor *y, *g;
    jag_status st = parse(op, args, nargs, 5, &r);
    if (!st) st = jag__arg_opt_tensor(op, args, nargs, 3, "y", &y);
    if (!st) st = jag__arg_tensor(op, args, nargs, 4, "g", &g);
    if (st) return st;
    jag_spec want;
    reduced_spec(&r, &want);
    char b1[JAG_SHAPE_BUF], b2[JAG_SHAPE_BUF];
    const jag_tensor *chk[2] = {g, y};
    for (int i = 0; i < 2; i++) {
        if (!chk[i]) continue;
        if (chk[i]->ndim != want.ndim || memcmp(chk[i]->sizes, want.sizes, (size_t)want.ndim * sizeof *want.sizes) != 0 ||
            !jag_dtype_is_floating(chk[i]->dtype))
            return jag__error(JAG_ESHAPE, "%s: argument '%s' has shape %s, expected a float tensor of shape %s", op,
                              i ? "y" : "g", jag__shape_str(chk[i]->sizes, chk[i]->ndim, b1, sizeof b1),
                              jag__shape_str(want.sizes, want.ndim, b2, sizeof b2));
    }
    bool needs_y = r.sp.kind == JAG_SEG_AMAX || r.sp.kind == JAG_SEG_AMIN || r.sp.kind == JAG_SEG_LSE ||
                   r.sp.kind == JAG_SEG_STD;
    if (needs_y && !y) return jag__error(JAG_EINVAL, "%s: argument 'y' (the forward's output) is needed for this kind", op);
    outs[0].dtype = r.values->dtype, outs[0].ndim = r.values->ndim;
    memcpy(outs[0].sizes, r.values->sizes, (size_t)r.values->ndim * sizeof *outs[0].sizes);
    return JAG_OK;
}

// values (R, D...), y and g (B, kept D...) -> out (R, D...): the values' gradient, 0 in holes
jag_status jag__cpu_ragged_reduce_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    ragged_args r;
    nested_state s;
    const jag_tensor *y = NULL, *g = NULL;
    jag_tensor *hold[2] = {0};
    jag_status st = parse(op, args, nargs, 5, &r);
    if (!st) st = jag__arg_opt_tensor(op, args, nargs, 3, "y", &y);
    if (!st) st = jag__arg_tensor(op, args, nargs, 4, "g", &g);
    if (!st) st = state_of(op, &r, &s, hold);
    if (!st) st = jag__segment_reduce_grad_into(op, &s, &r.sp, y, NULL, g, outs[0]); /* outs[0]: contiguous (R, D...) */
    jag_release(hold[0]), jag_release(hold[1]);
    return st;
}

/* The boxed arguments of either op for a jagged state. */
static int box(const nested_state *s, const jag_segment_spec *sp, const jag_tensor *y, const jag_tensor *g,
               jag_value *a) {
    int n = 0;
    a[n++] = jag__v_tensor(s->values), a[n++] = jag__v_tensor(s->offsets), a[n++] = jag__v_tensor(s->lengths);
    if (g) a[n++] = jag__v_tensor(y), a[n++] = jag__v_tensor(g);
    a[n++] = jag__v_int(sp->kind), a[n++] = jag__v_int(sp->mask), a[n++] = jag__v_int(sp->correction);
    a[n++] = jag__v_bool(sp->keepdim);
    return n;
}

jag_status jag__ragged_reduce(const nested_state *s, const jag_segment_spec *sp, jag_tensor **out) {
    jag_value a[9];
    return jag__dispatch(JAG_OP_ragged_reduce, a, box(s, sp, NULL, NULL, a), out);
}

jag_status jag__ragged_reduce_backward(const nested_state *s, const jag_segment_spec *sp, const jag_tensor *y,
                                       const jag_tensor *g, jag_tensor **out) {
    jag_value a[9];
    return jag__dispatch(JAG_OP_ragged_reduce_backward, a, box(s, sp, y, g, a), out);
}
