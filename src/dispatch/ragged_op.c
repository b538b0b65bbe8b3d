/*
 * ragged_op.c — the ops along a jagged tensor's ragged dim, on its inner
 * tensors: META functions (argument checks, output shapes) and the boxed
 * adapters ops.def names, which check the offsets and lengths against the
 * values and run the typed kernels of src/cpu/ragged_reduce.c.
 *
 *   ragged_reduce(values (R, D...), offsets (B+1), lengths (B) or none,
 *                 kind, mask, correction, keepdim) -> (B, kept D...)
 *   ragged_reduce_backward(values, offsets, lengths, y or none, idx or
 *                 none, g (B, kept D...), kind, mask, correction, keepdim)
 *                 -> (R, D...); kind max / min (the gradient of max_dim /
 *                 min_dim over the ragged dim alone) with the forward's
 *                 indices idx (int64, g's shape): row offsets[b] + idx of
 *                 component b gets g, the other rows 0
 *   ragged_reduce_indices(values, offsets, lengths, kind (max or min),
 *                 keepdim) -> (the extreme (B, D...), its row within the
 *                 component (int64)): max_dim / min_dim over the ragged dim
 *   ragged_softmax(values (R, D...), offsets, lengths, log) -> y (R, D...)
 *   ragged_softmax_backward(y (R, D...), offsets, lengths, g (R, D...),
 *                 log) -> the values' gradient (R, D...)
 *
 * kind: a jag_segment_kind without indices (sum, mean, amax, amin,
 * logsumexp, var, std; sum, mean, amax and amin of integer and bool values
 * too, with torch's result dtypes: int64, float32, the values'); mask: the trailing dims of values reduced with the
 * ragged dim (bit d: values dim d >= 1). Softmax normalises each trailing
 * position (column) of a component's rows on its own. Rows outside every
 * component (holes, when lengths are given) are 0 in the values-shaped
 * results. The offsets and lengths are user input when these ops are
 * called by name (jag_op_call): the adapters check them against the
 * values' rows before a kernel reads one.
 *
 * Last, the same kernels on a nested tensor's state: the engine's tests
 * compare them with the references, and the losses' mask broadcast
 * (losses.c) uses jag__segment_broadcast. Nested code calls the ops.
 */
#include "dispatch.h"
#include "../cpu/ragged_kernels.h"
#include "../subclass/nested.h"

/* ---- the offsets and lengths ---------------------------------------------- */

/* offsets int64 (B+1), lengths none or int64 (B). */
static jag_status check_index(const char *op, const jag_tensor *o, const jag_tensor *l) {
    if (o->dtype != JAG_INT64 || o->ndim != 1 || o->sizes[0] < 1)
        return jag__error(JAG_EINVAL, "%s: argument 'offsets' must be int64 of shape (B+1), got %s %d-d", op,
                          jag_dtype_name(o->dtype), o->ndim);
    if (l && (l->dtype != JAG_INT64 || l->ndim != 1 || l->sizes[0] != o->sizes[0] - 1))
        return jag__error(JAG_EINVAL, "%s: argument 'lengths' must be int64 of shape (B) = (%lld)", op,
                          (long long)(o->sizes[0] - 1));
    return JAG_OK;
}

/* The components' rows of offsets and lengths (data, checked by
 * check_index), each checked to lie inside the values' rows.
 * Index tensors that are not contiguous are copied into hold[0..1]
 * (released by the caller). */
static jag_status rows_of(const char *op, const jag_tensor *values, const jag_tensor *offsets, const jag_tensor *lengths,
                          jag_ragged_rows *rows, jag_tensor **hold) {
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
    int64_t B = o->sizes[0] - 1, n_rows = values->sizes[0];
    for (int64_t i = 0; i < B; i++) {
        int64_t n = len ? len[i] : off[i + 1] - off[i];
        if (off[i] < 0 || n < 0 || off[i] > n_rows || n > n_rows - off[i] || (!len && off[i + 1] < off[i]))
            return jag__error(JAG_EINVAL, "%s: component %lld's rows [%lld, %lld + %lld) do not fit the %lld value rows", op,
                              (long long)i, (long long)off[i], (long long)off[i], (long long)n, (long long)n_rows);
    }
    *rows = (jag_ragged_rows){.batch = B, .offsets = off, .lengths = len};
    return JAG_OK;
}

/* ---- ragged_reduce and ragged_reduce_backward ----------------------------- */

/* The kinds ragged_reduce computes (no indices); its backward also takes
 * max and min (max_dim / min_dim over the ragged dim alone), given the
 * forward's indices. */
static bool kind_ok(int64_t k, bool backward) {
    return k == JAG_SEG_SUM || k == JAG_SEG_MEAN || k == JAG_SEG_AMAX || k == JAG_SEG_AMIN || k == JAG_SEG_LSE ||
           k == JAG_SEG_VAR || k == JAG_SEG_STD || (backward && (k == JAG_SEG_MAX || k == JAG_SEG_MIN));
}

/* The arguments common to both ops: values, offsets, lengths at 0..2 and
 * kind, mask, correction, keepdim from position `at`. */
typedef struct {
    const jag_tensor *values, *offsets, *lengths;
    jag_segment_spec sp;
} reduce_args;

static jag_status parse_reduce(const char *op, const jag_value *args, int nargs, int at, reduce_args *r) {
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
    bool backward = at > 3;
    if (!kind_ok(kind, backward))
        return jag__error(JAG_EINVAL, "%s: argument 'kind' is %lld, expected %s", op, (long long)kind,
                          backward ? "a reduction without indices (0-6), or max or min (7, 8)"
                                   : "a reduction without indices (0-6)");
    if (backward && kind >= JAG_SEG_MAX && mask != 0)
        return jag__error(JAG_EINVAL, "%s: max and min take the ragged dim alone (mask 0), got mask %lld", op,
                          (long long)mask);
    /* integer and bool values: the forward's sum, mean, amax and amin */
    bool int_ok = !backward && kind <= JAG_SEG_AMIN;
    if (v->ndim < 1 || (!jag_dtype_is_floating(v->dtype) && !int_ok))
        return jag__error(JAG_EDTYPE, "%s: argument 'values' must be a %s tensor of 1 or more dims, got %s %d-d", op,
                          int_ok ? "" : "float", jag_dtype_name(v->dtype), v->ndim);
    if (mask < 0 || (mask & 1) || mask >> v->ndim)
        return jag__error(JAG_EINVAL, "%s: argument 'mask' is %lld, expected bits of values dims 1..%d", op, (long long)mask,
                          v->ndim - 1);
    if ((st = check_index(op, o, l))) return st;
    if (r->sp.correction < 0) return jag__error(JAG_EINVAL, "%s: argument 'correction' must be >= 0", op);
    r->sp.kind = (jag_segment_kind)kind, r->sp.mask = (unsigned)mask;
    return JAG_OK;
}

/* (B, [1], kept trailing dims... [, 1 per reduced one with keepdim]) of the
 * values' dtype */
static void reduced_spec(const jag_tensor *values, int64_t batch, const jag_segment_spec *sp, jag_spec *out) {
    int nd = 0;
    out->dtype = values->dtype;
    out->sizes[nd++] = batch;
    if (sp->keepdim) out->sizes[nd++] = 1;
    for (int d = 1; d < values->ndim; d++) {
        if (!(sp->mask >> d & 1)) out->sizes[nd++] = values->sizes[d];
        else if (sp->keepdim) out->sizes[nd++] = 1;
    }
    out->ndim = nd;
}

jag_status jag__meta_ragged_reduce(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    reduce_args r;
    jag_status st = parse_reduce(op, args, nargs, 3, &r);
    if (st) return st;
    reduced_spec(r.values, r.offsets->sizes[0] - 1, &r.sp, &outs[0]);
    jag_dtype dt = r.values->dtype;
    if (!jag_dtype_is_floating(dt)) /* torch's result dtypes: sum int64, mean float32, amax / amin the values' */
        outs[0].dtype = r.sp.kind == JAG_SEG_SUM ? JAG_INT64 : r.sp.kind == JAG_SEG_MEAN ? JAG_FLOAT32 : dt;
    return JAG_OK;
}

// values (R, D...), offsets (B+1), lengths (B) -> out (B, kept D...)
jag_status jag__cpu_ragged_reduce(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    reduce_args r;
    jag_ragged_rows rows;
    jag_tensor *hold[2] = {0};
    jag_status st = parse_reduce(op, args, nargs, 3, &r);
    if (!st) st = rows_of(op, r.values, r.offsets, r.lengths, &rows, hold);
    if (!st)
        st = jag_dtype_is_floating(r.values->dtype) ? jag__ragged_reduce_kernel(op, r.values, &rows, &r.sp, outs[0], NULL)
                                                    : jag__ragged_reduce_int_kernel(op, r.values, &rows, &r.sp, outs[0]);
    jag_release(hold[0]), jag_release(hold[1]);
    return st;
}

/* ---- ragged_reduce_indices ---------------------------------------------------- */

/* values, offsets, lengths at 0..2, kind (max or min) and keepdim at 3..4. */
static jag_status parse_indices(const char *op, const jag_value *args, int nargs, reduce_args *r) {
    int64_t kind;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "values", &r->values)) ||
        (st = jag__arg_tensor(op, args, nargs, 1, "offsets", &r->offsets)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, 2, "lengths", &r->lengths)) ||
        (st = jag__arg_int(op, args, nargs, 3, "kind", &kind)) ||
        (st = jag__arg_bool(op, args, nargs, 4, "keepdim", &r->sp.keepdim)))
        return st;
    if (kind != JAG_SEG_MAX && kind != JAG_SEG_MIN)
        return jag__error(JAG_EINVAL, "%s: argument 'kind' is %lld, expected max (7) or min (8)", op, (long long)kind);
    jag_dtype dt = r->values->dtype;
    if (r->values->ndim < 1 || !(jag_dtype_is_floating(dt) || dt == JAG_INT32 || dt == JAG_INT64))
        return jag__error(JAG_EDTYPE, "%s: argument 'values' must be a float, int32 or int64 tensor of 1 or more dims, "
                          "got %s %d-d", op, jag_dtype_name(dt), r->values->ndim);
    r->sp.kind = (jag_segment_kind)kind, r->sp.mask = 0, r->sp.correction = 0;
    return check_index(op, r->offsets, r->lengths);
}

jag_status jag__meta_ragged_reduce_indices(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    reduce_args r;
    jag_status st = parse_indices(op, args, nargs, &r);
    if (st) return st;
    reduced_spec(r.values, r.offsets->sizes[0] - 1, &r.sp, &outs[0]);
    outs[1] = outs[0];
    outs[1].dtype = JAG_INT64;
    return JAG_OK;
}

// values (R, D...), offsets (B+1), lengths (B) -> (max or min (B, D...), its row within the component, int64)
jag_status jag__cpu_ragged_reduce_indices(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    reduce_args r;
    jag_ragged_rows rows;
    jag_tensor *hold[2] = {0};
    jag_status st = parse_indices(op, args, nargs, &r);
    if (!st) st = rows_of(op, r.values, r.offsets, r.lengths, &rows, hold);
    if (!st && jag_dtype_is_floating(r.values->dtype))
        st = jag__ragged_reduce_kernel(op, r.values, &rows, &r.sp, outs[0], outs[1]);
    else if (!st)
        st = jag__ragged_reduce_int_indices_kernel(op, r.values, &rows, r.sp.kind == JAG_SEG_MAX, outs[0], outs[1]);
    jag_release(hold[0]), jag_release(hold[1]);
    return st;
}

jag_status jag__meta_ragged_reduce_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    reduce_args r;
    const jag_tensor *y, *idx, *g;
    jag_status st = parse_reduce(op, args, nargs, 6, &r);
    if (!st) st = jag__arg_opt_tensor(op, args, nargs, 3, "y", &y);
    if (!st) st = jag__arg_opt_tensor(op, args, nargs, 4, "idx", &idx);
    if (!st) st = jag__arg_tensor(op, args, nargs, 5, "g", &g);
    if (st) return st;
    jag_spec want;
    reduced_spec(r.values, r.offsets->sizes[0] - 1, &r.sp, &want);
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
    bool needs_idx = r.sp.kind == JAG_SEG_MAX || r.sp.kind == JAG_SEG_MIN;
    if (needs_idx != (idx != NULL))
        return jag__error(JAG_EINVAL, "%s: argument 'idx' (the forward's indices) is %s for this kind", op,
                          needs_idx ? "needed" : "not taken");
    if (idx && (idx->dtype != JAG_INT64 || idx->ndim != want.ndim ||
                memcmp(idx->sizes, want.sizes, (size_t)want.ndim * sizeof *want.sizes) != 0))
        return jag__error(JAG_ESHAPE, "%s: argument 'idx' is %s of shape %s, expected int64 of shape %s", op,
                          jag_dtype_name(idx->dtype), jag__shape_str(idx->sizes, idx->ndim, b1, sizeof b1),
                          jag__shape_str(want.sizes, want.ndim, b2, sizeof b2));
    jag__spec_set(&outs[0], r.values->dtype, r.values->sizes, r.values->ndim);
    return JAG_OK;
}

/* idx (B, C) contiguous: each index names a row of its component, 0 <=
 * idx[b, c] < len b (user input when the op is called by name; the kernel
 * writes at the rows they name). */
static jag_status check_indices(const char *op, const jag_tensor *idx, const jag_ragged_rows *rows) {
    const int64_t *ip = (const int64_t *)jag__ptr(idx);
    int64_t C = rows->batch ? jag_numel(idx) / rows->batch : 0;
    for (int64_t b = 0; b < rows->batch; b++) {
        int64_t n = rows->lengths ? rows->lengths[b] : rows->offsets[b + 1] - rows->offsets[b];
        for (int64_t c = 0; c < C; c++)
            if (ip[b * C + c] < 0 || ip[b * C + c] >= n)
                return jag__error(JAG_ERANGE, "%s: argument 'idx' holds %lld for component %lld of %lld rows, expected an "
                                  "index in [0, %lld)", op, (long long)ip[b * C + c], (long long)b, (long long)n,
                                  (long long)n);
    }
    return JAG_OK;
}

// values (R, D...), y and g (B, kept D...) [idx (B, kept D...) for max / min] -> out (R, D...): the values' gradient, 0 in holes
jag_status jag__cpu_ragged_reduce_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    reduce_args r;
    jag_ragged_rows rows;
    const jag_tensor *y = NULL, *idx = NULL, *g = NULL;
    jag_tensor *hold[3] = {0};
    jag_status st = parse_reduce(op, args, nargs, 6, &r);
    if (!st) st = jag__arg_opt_tensor(op, args, nargs, 3, "y", &y);
    if (!st) st = jag__arg_opt_tensor(op, args, nargs, 4, "idx", &idx);
    if (!st) st = jag__arg_tensor(op, args, nargs, 5, "g", &g);
    if (!st) st = rows_of(op, r.values, r.offsets, r.lengths, &rows, hold);
    if (!st && idx && !jag_is_contiguous(idx)) {
        jag_value a[] = {jag__v_tensor(idx)};
        if (!(st = jag__dispatch(JAG_OP_clone, a, 1, &hold[2]))) idx = hold[2];
    }
    if (!st && idx) st = check_indices(op, idx, &rows);
    if (!st) st = jag__ragged_reduce_backward_kernel(op, r.values, &rows, &r.sp, y, idx, g, outs[0]);
    jag_release(hold[0]), jag_release(hold[1]), jag_release(hold[2]);
    return st;
}

/* ---- ragged_softmax and ragged_softmax_backward --------------------------- */

/* values (or y) at 0, offsets, lengths at 1..2, the log flag at `log_at`. */
typedef struct {
    const jag_tensor *values, *offsets, *lengths;
    bool log;
} softmax_args;

static jag_status parse_softmax(const char *op, const jag_value *args, int nargs, const char *values_name, int log_at,
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
    return check_index(op, r->offsets, r->lengths);
}

jag_status jag__meta_ragged_softmax(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    softmax_args r;
    jag_status st = parse_softmax(op, args, nargs, "values", 3, &r);
    if (!st) jag__spec_set(&outs[0], r.values->dtype, r.values->sizes, r.values->ndim);
    return st;
}

// values (R, D...), offsets (B+1), lengths (B) -> out (R, D...)
jag_status jag__cpu_ragged_softmax(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    softmax_args r;
    jag_ragged_rows rows;
    jag_tensor *hold[2] = {0};
    jag_status st = parse_softmax(op, args, nargs, "values", 3, &r);
    if (!st) st = rows_of(op, r.values, r.offsets, r.lengths, &rows, hold);
    if (!st) st = jag__ragged_softmax_kernel(op, r.values, &rows, r.log, outs[0]);
    jag_release(hold[0]), jag_release(hold[1]);
    return st;
}

/* y, offsets, lengths, g (y's shape and dtype), log */
static jag_status parse_softmax_backward(const char *op, const jag_value *args, int nargs, softmax_args *r,
                                         const jag_tensor **g) {
    jag_status st = parse_softmax(op, args, nargs, "y", 4, r);
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
    jag_status st = parse_softmax_backward(op, args, nargs, &r, &g);
    if (!st) jag__spec_set(&outs[0], r.values->dtype, r.values->sizes, r.values->ndim);
    return st;
}

// y (R, D...), offsets (B+1), lengths (B), g (R, D...) -> out (R, D...): the values' gradient, 0 in holes
jag_status jag__cpu_ragged_softmax_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    softmax_args r;
    const jag_tensor *g = NULL;
    jag_ragged_rows rows;
    jag_tensor *hold[2] = {0};
    jag_status st = parse_softmax_backward(op, args, nargs, &r, &g);
    if (!st) st = rows_of(op, r.values, r.offsets, r.lengths, &rows, hold);
    if (!st) st = jag__ragged_softmax_backward_kernel(op, r.values, &rows, g, r.log, outs[0]);
    jag_release(hold[0]), jag_release(hold[1]);
    return st;
}

/* ---- the kernels on a nested tensor's state -------------------------------- */

/* s's rows (its offsets and lengths are contiguous int64, checked when it
 * was built). */
static jag_ragged_rows state_rows(const nested_state *s) {
    return (jag_ragged_rows){.batch = s->batch,
                             .offsets = (const int64_t *)jag__ptr(s->offsets),
                             .lengths = s->lengths ? (const int64_t *)jag__ptr(s->lengths) : NULL};
}

static jag_status need_float_data(const char *op, const nested_state *s) {
    if (!s->values->storage)
        return jag__error(JAG_ENOTIMPL, "%s: reducing over the ragged dim needs data (it cannot be traced yet)", op);
    if (s->values->dtype != JAG_FLOAT32 && s->values->dtype != JAG_FLOAT64)
        return jag__error(JAG_EDTYPE, "%s: reducing over the ragged dim needs float values, got %s", op,
                          jag_dtype_name(s->values->dtype));
    return JAG_OK;
}

jag_status jag__segment_reduce_dims(const char *op, const nested_state *s, const jag_segment_spec *sp, jag_tensor **outs) {
    jag_ragged_rows rows = state_rows(s);
    jag_spec spec;
    reduced_spec(s->values, s->batch, sp, &spec);
    jag_dtype dt = s->values->dtype;
    jag_status st;
    if (s->values->storage && !jag_dtype_is_floating(dt) && sp->kind <= JAG_SEG_AMIN) {
        /* torch's result dtypes: sum int64, mean float32, amax / amin the values' */
        spec.dtype = sp->kind == JAG_SEG_SUM ? JAG_INT64 : sp->kind == JAG_SEG_MEAN ? JAG_FLOAT32 : dt;
        jag_tensor *y = jag__tensor_from_spec(op, &spec, false);
        if (!y) return jag_last_status();
        if ((st = jag__ragged_reduce_int_kernel(op, s->values, &rows, sp, y))) {
            jag_release(y);
            return st;
        }
        outs[0] = y;
        return JAG_OK;
    }
    if ((st = need_float_data(op, s))) return st;
    jag_segment_kind kind = sp->kind;
    bool has_idx = kind >= JAG_SEG_MAX, has_val = kind != JAG_SEG_ARGMAX && kind != JAG_SEG_ARGMIN;
    jag_tensor *y = has_val ? jag__tensor_from_spec(op, &spec, false) : NULL, *ix = NULL;
    spec.dtype = JAG_INT64;
    if (has_idx && (y || !has_val)) ix = jag__tensor_from_spec(op, &spec, false);
    if ((has_val && !y) || (has_idx && !ix)) st = jag_last_status();
    if (!st) st = jag__ragged_reduce_kernel(op, s->values, &rows, sp, y, ix);
    if (st) {
        jag_release(y), jag_release(ix);
        return st;
    }
    if (has_val) outs[0] = y;
    if (has_idx) outs[has_val ? 1 : 0] = ix;
    return JAG_OK;
}

jag_status jag__segment_reduce_grad(const char *op, const nested_state *s, const jag_segment_spec *sp, const jag_tensor *y,
                                    const jag_tensor *idx, const jag_tensor *g, jag_tensor **out) {
    jag_status st = need_float_data(op, s);
    if (st) return st;
    jag_ragged_rows rows = state_rows(s);
    jag_tensor *z = jag__tensor_new(op, s->values->sizes, s->values->ndim, s->values->dtype, false, false);
    if (!z) return jag_last_status();
    if ((st = jag__ragged_reduce_backward_kernel(op, s->values, &rows, sp, y, idx, g, z))) {
        jag_release(z);
        return st;
    }
    *out = z;
    return JAG_OK;
}

jag_status jag__segment_broadcast(const char *op, const nested_state *s, const jag_tensor *g, bool mean,
                                  jag_tensor **out) {
    jag_ragged_rows rows = state_rows(s);
    jag_tensor *z = jag__tensor_new(op, s->values->sizes, s->values->ndim, s->values->dtype, false, false);
    if (!z) return jag_last_status();
    jag_status st = jag__ragged_broadcast_kernel(op, &rows, g, mean, z);
    if (st) {
        jag_release(z);
        return st;
    }
    *out = z;
    return JAG_OK;
}
