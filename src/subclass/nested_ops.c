/* nested_ops.c — how ops run on nested tensors. One function,
 * jag__nested_dispatch, is both the class's handler and, with a rule as its
 * context, the decomposition registered for each op that has a rule of its
 * own (nested_rules below, registered through jag_subclass_register_decomp).
 * Its order:
 *   1. a rule that sorts out its arguments itself (masked attention: a
 *      strided nested mask beside jagged q, k, v) runs first;
 *   2. the lead argument: the first nested one (nested arguments must share
 *      a layout; another subclass beside them is refused);
 *   3. rules about the structure itself, on either layout: `values` as a
 *      view of the packed values, to_padded, the constructors refusing
 *      nested arguments, attention, transpose (which may move the ragged
 *      dim, or swap the strided size tables);
 *   4. jagged layout: any argument ragged away from dim 1 runs on its
 *      canonical form (ragged_idx.c, which calls back here with the same
 *      rule); POINTWISE rows on the packed values (a dense operand broadcast
 *      to the packed rows) re-wrapped with the same structure; then the
 *      op's rule: mm / matmul / linear as one op on the values, reductions
 *      over the ragged dim by the ragged_reduce and ragged_reduce_indices
 *      ops and over other dims on the values, narrow along the ragged dim, select and index_select over the batch, view, unsqueeze,
 *      embedding, embedding_bag, cat, softmax / log_softmax down components
 *      or on the values, layer_norm / rms_norm on the values; an op without
 *      a jagged rule is JAG_ENOTIMPL naming the op and the layout;
 *   5. strided layout: POINTWISE rows on the buffer when every argument has
 *      the same tables, else per component (unbind, run the op on each
 *      component, nest the results), as every op with a rule does; custom
 *      ops without a registered decomposition and NO_NESTED rows refused. */
#include "nested.h"

static const char *layout_name(jag_layout l) { return l == JAG_JAGGED ? "jagged" : "strided"; }

static jag_status not_supported(const jag_op_info *info, jag_layout l, const char *why) {
    return jag__error(JAG_ENOTIMPL, "%s: not supported for nested tensors with the %s layout%s%s", info->api_name,
                      layout_name(l), why ? ": " : "", why ? why : "");
}

/* What the handler reads from its arguments, in one pass over them: the
 * lead (the first nested argument), the number of dims of the first plain
 * tensor argument that is the lead's (0 when the lead comes only in a
 * list), and whether a jagged argument has its ragged dim elsewhere than
 * dim 1. */
typedef struct {
    nested_state *lead;
    int outer_ndim;
    bool ragged_elsewhere;
} lead_facts;

/* The facts above, and a check that nested arguments agree on the layout
 * (another subclass beside them is refused). */
static jag_status find_lead(const jag_op_info *info, const jag_value *args, int nargs, lead_facts *f) {
    f->lead = NULL, f->outer_ndim = 0, f->ragged_elsewhere = false;
    for (int i = 0; i < nargs; i++) {
        int n = args[i].kind == JAG_VAL_TENSOR ? 1 : args[i].kind == JAG_VAL_TENSORS ? args[i].u.tensors.n : 0;
        for (int j = 0; j < n; j++) {
            const jag_tensor *t = args[i].kind == JAG_VAL_TENSOR ? args[i].u.t : args[i].u.tensors.v[j];
            if (!t->subclass) continue;
            nested_state *s = jag__nested(t);
            if (!s)
                return jag__error(JAG_ENOTIMPL, "%s: mixes a nested tensor with a %s tensor", info->api_name,
                                  jag_subclass_name(t->subclass));
            if (!f->lead) f->lead = s;
            else if (s->layout != f->lead->layout)
                return jag__error(JAG_EINVAL, "%s: mixes nested tensors of the jagged and strided layouts; convert one with jag_nested_to_layout",
                                  info->api_name);
            if (s->layout == JAG_JAGGED && s->ragged_idx > 1) f->ragged_elsewhere = true;
            if (!f->outer_ndim && s == f->lead && args[i].kind == JAG_VAL_TENSOR) f->outer_ndim = t->ndim;
        }
    }
    JAG_ASSERT(f->lead != NULL);
    return JAG_OK;
}

/* Args with every nested tensor replaced; tensors made along the way are
 * kept in `temps` and released by release_temps. */
#define MAX_ARGS 16
typedef struct {
    jag_value args[MAX_ARGS];
    jag_tensor *temps[MAX_ARGS];
    int n_temps;
} rewritten;

static void release_temps(rewritten *r) {
    for (int i = 0; i < r->n_temps; i++) jag_release(r->temps[i]);
    r->n_temps = 0;
}

static const char *arg_label(int i) {
    static const char *const labels[] = {"argument 0", "argument 1", "argument 2", "argument 3", "argument 4"};
    return i < 5 ? labels[i] : "an argument";
}

/* Whether a dense operand of a pointwise op on jagged (B, j, D...) with
 * outer_ndim dims broadcasts against the values (sum L, D...) as it is:
 * (D...) or (1, D...) (the first case of dense_for_jagged, which would
 * only take a reference). */
static bool broadcasts_as_is(const jag_tensor *d, int outer_ndim) {
    return d->ndim < outer_ndim - 1 || (d->ndim == outer_ndim - 1 && d->sizes[0] == 1);
}

/* A dense operand of a pointwise op on jagged (B, j, D...) as a tensor that
 * broadcasts against values (sum L, D...). Accepts shapes that broadcast over
 * the packed dims: (D...), (1, D...), (1, 1, D...) and (B, 1, D...) — the
 * last gathered per row. */
static jag_status dense_for_jagged(const jag_op_info *info, int argi, nested_state *lead, int outer_ndim,
                                   const jag_tensor *d, jag_tensor **out) {
    char ds[JAG_SHAPE_BUF];
    int dn = d->ndim;
    if (broadcasts_as_is(d, outer_ndim)) {
        *out = jag_retain((jag_tensor *)d);
        return JAG_OK;
    }
    if (dn == outer_ndim && d->sizes[1] == 1 && (d->sizes[0] == 1 || d->sizes[0] == lead->batch)) {
        /* drop the batch dim: (B, 1, D...) -> (B, D...), then one row per value row */
        int64_t sz[JAG_MAX_DIMS], st[JAG_MAX_DIMS];
        sz[0] = d->sizes[0], st[0] = d->strides[0];
        for (int k = 2; k < dn; k++) sz[k - 1] = d->sizes[k], st[k - 1] = d->strides[k];
        jag_tensor *v = jag__tensor_view(d, sz, st, dn - 1, d->offset);
        if (!v) return jag_last_status();
        if (d->sizes[0] == 1 || lead->batch == 1) {
            *out = v;
            return JAG_OK;
        }
        const jag_tensor *ids = jag__nested_row_ids(lead);
        if (!ids) {
            jag_release(v);
            return jag_last_status();
        }
        jag_value a[] = {jag__v_tensor(v), jag__v_int(0), jag__v_tensor(ids)};
        jag_status st2 = jag__dispatch_plain(JAG_OP_index_select, a, 3, out);
        jag_release(v);
        return st2;
    }
    return jag__error(JAG_ESHAPE, "%s: %s of shape %s does not broadcast over a jagged (B=%lld, j, ...) tensor with %d dims; "
                      "expected (D...), (1, 1, D...) or (B, 1, D...)",
                      info->api_name, arg_label(argi), jag__shape_str(d->sizes, d->ndim, ds, sizeof ds),
                      (long long)lead->batch, outer_ndim);
}

/* The jagged pointwise rule: replace nested args by values (raggedness must
 * match), dense args by their packed broadcast, run, re-wrap. */
static jag_status pointwise_jagged(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                   jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    rewritten r; /* args[0..nargs) are all written below */
    r.n_temps = 0;
    jag_status st = JAG_OK;
    int n_others = 0; /* nested arguments other than the lead */
    for (int i = 0; i < nargs && !st; i++) {
        r.args[i] = args[i];
        if (args[i].kind == JAG_VAL_TENSORS) { /* would come back here for ever (fuzz regression) */
            st = jag__error(JAG_EINVAL, "%s: %s is a tensor list, expected a tensor or a scalar", info->api_name, arg_label(i));
            break;
        }
        if (args[i].kind != JAG_VAL_TENSOR) continue;
        const jag_tensor *t = args[i].u.t;
        nested_state *s = jag__nested(t);
        if (s) {
            if (s != lead && !jag__nested_same_raggedness(lead, s, false))
                st = jag__error(JAG_ESHAPE, "%s: %s has different raggedness (j%lld) than the first nested argument (j%lld): offsets or lengths differ",
                                info->api_name, arg_label(i), (long long)atomic_load(&s->ragged_id),
                                (long long)atomic_load(&lead->ragged_id));
            else if (t->ndim != outer_ndim)
                st = jag__error(JAG_ESHAPE, "%s: nested %s has %d dims, the first nested argument %d", info->api_name,
                                arg_label(i), t->ndim, outer_ndim);
            else
                r.args[i].u.t = s->values, n_others += s != lead; /* (the field alone: a whole new jag_value stalls the copy after it) */
        } else if (!broadcasts_as_is(t, outer_ndim)) {
            jag_tensor *d = NULL;
            st = dense_for_jagged(info, i, lead, outer_ndim, t, &d);
            if (!st) r.temps[r.n_temps++] = d, r.args[i] = jag__v_tensor(d);
        }
    }
    jag_tensor *res = NULL;
    if (!st) st = jag__dispatch_plain(op, r.args, nargs, &res);
    release_temps(&r);
    if (st) return st;
    st = jag__nested_rewrap_jagged_taking(lead, res, outs);
    if (st) return st;
    for (int i = 0; n_others && i < nargs; i++) { /* the call succeeded: remember matches */
        nested_state *s = args[i].kind == JAG_VAL_TENSOR ? jag__nested(args[i].u.t) : NULL;
        if (s && s != lead) jag__nested_same_raggedness(lead, s, true);
    }
    return JAG_OK;
}

static bool same_table(const jag_tensor *a, const jag_tensor *b) {
    if (a == b) return true;
    if (!a->storage || !b->storage) return false; /* tables without data (tracing): only identity */
    return (jag_numel(a) == jag_numel(b) &&
                      memcmp(jag__ptr(a), jag__ptr(b), (size_t)jag_numel(a) * sizeof(int64_t)) == 0);
}

/* Strided pointwise on buffers: only when every argument is nested with the
 * very same structure (else the per-component fallback runs). */
static bool strided_buffers_apply(const jag_value *args, int nargs, nested_state *lead) {
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == JAG_VAL_TENSORS) return false;
        if (args[i].kind != JAG_VAL_TENSOR) continue;
        nested_state *s = jag__nested(args[i].u.t);
        if (!s) return false;
        if (s != lead && (s->batch != lead->batch || !same_table(s->sizes, lead->sizes) ||
                          !same_table(s->strides, lead->strides) || !same_table(s->storage_offsets, lead->storage_offsets) ||
                          jag_numel(s->buffer) != jag_numel(lead->buffer)))
            return false;
    }
    return true;
}

static jag_status pointwise_strided(jag_op_id op, const jag_value *args, int nargs, nested_state *lead,
                                    jag_tensor **outs) {
    jag_value a[MAX_ARGS];
    for (int i = 0; i < nargs; i++)
        a[i] = args[i].kind == JAG_VAL_TENSOR ? jag__v_tensor(jag__nested(args[i].u.t)->buffer) : args[i];
    jag_tensor *res = NULL;
    jag_status st = jag__dispatch_plain(op, a, nargs, &res);
    if (st) return st;
    st = jag__nested_wrap_strided(res, lead->sizes, lead->strides, lead->storage_offsets,
                                  atomic_load(&lead->ragged_id), outs);
    jag_release(res);
    return st;
}

/* ---- dims of components ------------------------------------------------- */

/* Dims of the outer tensor map to dim - 1 of each component (and, for the
 * jagged layout, of the values); the batch dim (0) has no component dim.
 * Which arguments are dims: jag__op_dim_args (read from the op's schema). */
typedef struct {
    unsigned dim_args;
    int dims_list_arg;
} dim_spec;

static dim_spec find_dim_spec(jag_op_id op) {
    dim_spec d;
    jag__op_dim_args(op, &d.dim_args, &d.dims_list_arg);
    return d;
}

/* Outer dim -> component dim; the batch dim is an error. */
static jag_status component_dim(const jag_op_info *info, int64_t dim, int outer_ndim, int64_t *out) {
    if (dim == JAG_DIM_ALL || dim < -outer_ndim || dim >= outer_ndim)
        return jag__error(JAG_ERANGE, "%s: dim %lld is out of range for a nested tensor with %d dims", info->api_name,
                          (long long)dim, outer_ndim);
    int64_t d = dim < 0 ? dim + outer_ndim : dim;
    if (d == 0)
        return jag__error(JAG_ENOTIMPL, "%s: operating over the batch dim (0) of a nested tensor is not supported",
                          info->api_name);
    *out = d - 1;
    return JAG_OK;
}

/* ---- jagged rules on values --------------------------------------------- */

/* Run `op` with args[0] replaced by values and its dim args shifted for
 * values, which drop the batch dim (dims >= 2 of (B, j, D...) are dims >= 1
 * of values); re-wrap. Dims 0 and 1 (batch, ragged) are not supported. */
static jag_status on_values_dims(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                 jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    const dim_spec dss = find_dim_spec(op), *ds = &dss;
    jag_value a[MAX_ARGS];
    int64_t dims[JAG_MAX_DIMS];
    jag_status st;
    for (int i = 0; i < nargs; i++) {
        a[i] = args[i];
        if (i == 0) {
            a[0] = jag__v_tensor(lead->values);
        } else if (ds && (ds->dim_args >> i & 1)) {
            int64_t d = 0;
            if (args[i].kind != JAG_VAL_INT)
                return jag__error(JAG_EINVAL, "%s: argument %d is %s, expected an int dim", info->api_name, i,
                                  jag__kind_name(args[i].kind));
            if ((st = component_dim(info, args[i].u.i, outer_ndim, &d))) return st;
            if (d == 0) return not_supported(info, JAG_JAGGED, "the ragged dim (1) cannot be used here yet");
            a[i] = jag__v_int(d);
        } else if (ds && ds->dims_list_arg == i) {
            if (args[i].kind != JAG_VAL_INTS || args[i].u.ints.n < 0 || args[i].u.ints.n > JAG_MAX_DIMS)
                return jag__error(JAG_EINVAL, "%s: argument %d must be a list of at most %d dims", info->api_name, i,
                                  JAG_MAX_DIMS);
            int n = args[i].u.ints.n;
            if (n == 0) return not_supported(info, JAG_JAGGED, "reducing over every dim includes the batch and ragged dims");
            for (int k = 0; k < n; k++) {
                if ((st = component_dim(info, args[i].u.ints.v[k], outer_ndim, &dims[k]))) return st;
                if (dims[k] == 0) return not_supported(info, JAG_JAGGED, "reducing over the ragged dim (1) is not supported yet");
            }
            a[i] = jag__v_ints(dims, n);
        }
    }
    jag_tensor *res[2] = {0};
    if ((st = jag__dispatch_plain(op, a, nargs, res))) return st;
    for (int k = 0; k < info->n_out && !st; k++) st = jag__nested_rewrap_jagged(lead, res[k], &outs[k]);
    for (int k = 0; k < info->n_out; k++) jag_release(res[k]);
    if (st)
        for (int k = 0; k < info->n_out; k++) jag_release(outs[k]), outs[k] = NULL;
    return st;
}

/* Zero rows (n, E) of dtype: the rows of a result in a jagged tensor's holes. */
static jag_status zero_rows(int64_t n, int64_t e, jag_dtype dtype, jag_tensor **out) {
    int64_t shape[2] = {n, e};
    jag_value a[] = {jag__v_ints(shape, 2), jag__v_double(0), jag__v_int(dtype)};
    return jag__dispatch(JAG_OP_full, a, 3, out);
}

/* matmul of a jagged (B, j, D) by a dense (B, D, E): component b times
 * matrix b (torch's nested @ dense per batch item) -> jagged (B, j, E) with
 * a's structure. One mm per component on its rows of the values; the new
 * values are the products, with zero rows for the holes between them, put
 * together by one cat (components never overlap and come in order). Runs
 * below autograd: the matmul rule (derivatives_nested.c) gives both
 * gradients. */
static jag_status matmul_per_item(const char *op, nested_state *lead, const jag_tensor *w, jag_tensor **outs) {
    const jag_tensor *v = lead->values;
    if (w->sizes[0] != lead->batch || w->sizes[1] != v->sizes[1])
        return jag__error(JAG_ESHAPE, "%s: argument 1 has shape (%lld, %lld, %lld), expected (B, D, E) = (%lld, %lld, E) "
                          "for a nested (B, j, D) argument 0",
                          op, (long long)w->sizes[0], (long long)w->sizes[1], (long long)w->sizes[2], (long long)lead->batch,
                          (long long)v->sizes[1]);
    if (w->dtype != v->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument 1 has dtype %s, expected %s like argument 0", op, jag_dtype_name(w->dtype),
                          jag_dtype_name(v->dtype));
    if (!v->storage || !w->storage || !lead->offsets->storage)
        return jag__error(JAG_ENOTIMPL, "%s: a nested tensor times a batch of matrices needs data (it cannot be traced yet)", op);
    const int64_t *o = (const int64_t *)jag__ptr(lead->offsets);
    const int64_t *l = lead->lengths ? (const int64_t *)jag__ptr(lead->lengths) : NULL;
    int64_t e = w->sizes[2], end = 0; /* the rows made so far */
    jag_tensor **parts = calloc((size_t)(2 * lead->batch + 1), sizeof *parts);
    if (!parts) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    int n_parts = 0;
    jag_status st = JAG_OK;
    for (int64_t b = 0; b < lead->batch && !st; b++) {
        int64_t n = l ? l[b] : o[b + 1] - o[b];
        if (n == 0) continue;
        if (o[b] > end && (st = zero_rows(o[b] - end, e, v->dtype, &parts[n_parts++]))) break;
        jag_tensor *rows = NULL, *mat = NULL;
        jag_value nr[] = {jag__v_tensor(v), jag__v_int(0), jag__v_int(o[b]), jag__v_int(n)};
        jag_value sel[] = {jag__v_tensor(w), jag__v_int(0), jag__v_int(b)};
        if (!(st = jag__dispatch(JAG_OP_narrow, nr, 4, &rows)) && !(st = jag__dispatch(JAG_OP_select, sel, 3, &mat))) {
            jag_value mm[] = {jag__v_tensor(rows), jag__v_tensor(mat)};
            st = jag__dispatch(JAG_OP_mm, mm, 2, &parts[n_parts++]);
        }
        jag_release(rows), jag_release(mat);
        end = o[b] + n;
    }
    if (!st && (v->sizes[0] > end || n_parts == 0)) st = zero_rows(v->sizes[0] - end, e, v->dtype, &parts[n_parts++]);
    jag_tensor *res = NULL;
    if (!st) {
        jag_value c[] = {jag__v_tensors(parts, n_parts), jag__v_int(0)};
        st = jag__dispatch(JAG_OP_cat, c, 2, &res);
    }
    for (int i = 0; i < n_parts; i++) jag_release(parts[i]);
    free(parts);
    if (st) return st;
    return jag__nested_rewrap_jagged_taking(lead, res, outs);
}

/* mm / matmul / linear with a nested first argument and dense rest: one op on
 * values (sum L, D) — a single GEMM over every row of the batch. */
static jag_status gemm_on_values(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                 jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    if (args[0].kind != JAG_VAL_TENSOR || !jag__nested(args[0].u.t))
        return not_supported(info, JAG_JAGGED, "a dense tensor times a nested tensor; transpose the problem or use the strided layout");
    for (int i = 1; i < nargs; i++)
        if (args[i].kind == JAG_VAL_TENSOR && jag__nested(args[i].u.t))
            return not_supported(info, JAG_JAGGED, "nested @ nested needs the strided layout (jag_nested_to_layout)");
    if (args[1].kind != JAG_VAL_TENSOR)
        return jag__error(JAG_EINVAL, "%s: argument 1 is %s, expected a tensor", info->api_name, jag__kind_name(args[1].kind));
    if (outer_ndim < 3 || (op == JAG_OP_mm && outer_ndim != 3))
        return jag__error(JAG_ESHAPE, "%s: argument 0 is a nested tensor with %d dims, expected (B, j, D%s)", info->api_name,
                          outer_ndim, op == JAG_OP_mm ? "" : "...");
    if (op == JAG_OP_matmul && args[1].u.t->ndim == 3 && outer_ndim == 3)
        return matmul_per_item(info->api_name, lead, args[1].u.t, outs);
    if (op == JAG_OP_matmul && args[1].u.t->ndim > 2)
        return not_supported(info, JAG_JAGGED,
                             "the dense operand must be 1-d, 2-d, or 3-d (B, D, E) beside a (B, j, D) nested tensor");
    jag_value a[MAX_ARGS];
    for (int i = 0; i < nargs; i++) a[i] = args[i];
    a[0] = jag__v_tensor(lead->values);
    jag_tensor *res = NULL;
    jag_status st = jag__dispatch_plain(op, a, nargs, &res);
    if (st) return st;
    return jag__nested_rewrap_jagged_taking(lead, res, outs);
}

/* ---- strided rules ------------------------------------------------------ */

/* transpose of two component dims: swap the columns of the size and stride
 * tables; the buffer is shared (a view). */
static jag_status transpose_strided(const jag_value *args, nested_state *lead, int outer_ndim, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[JAG_OP_transpose];
    int64_t d0 = 0, d1 = 0;
    jag_status st;
    if (args[1].kind != JAG_VAL_INT || args[2].kind != JAG_VAL_INT)
        return jag__error(JAG_EINVAL, "%s: arguments 'dim0' and 'dim1' must be ints", info->api_name);
    if (!lead->sizes->storage) return not_supported(info, JAG_STRIDED, "its size tables have no data");
    if ((st = component_dim(info, args[1].u.i, outer_ndim, &d0)) || (st = component_dim(info, args[2].u.i, outer_ndim, &d1)))
        return st;
    int n = outer_ndim - 1;
    jag_tensor *sz = NULL, *sd = NULL;
    jag_value a1[] = {jag__v_tensor(lead->sizes)}, a2[] = {jag__v_tensor(lead->strides)};
    if ((st = jag__dispatch(JAG_OP_clone, a1, 1, &sz)) || (st = jag__dispatch(JAG_OP_clone, a2, 1, &sd))) {
        jag_release(sz);
        return st;
    }
    int64_t *p = (int64_t *)jag__ptr(sz), *q = (int64_t *)jag__ptr(sd);
    for (int64_t b = 0; b < lead->batch; b++) {
        int64_t t = p[b * n + d0];
        p[b * n + d0] = p[b * n + d1], p[b * n + d1] = t;
        t = q[b * n + d0];
        q[b * n + d0] = q[b * n + d1], q[b * n + d1] = t;
    }
    st = jag__nested_wrap_strided(lead->buffer, sz, sd, lead->storage_offsets, atomic_load(&lead->ragged_id), outs);
    jag_release(sz), jag_release(sd);
    return st;
}

/* The op a component runs: bmm of nested (B, n, k) is mm of each (n, k). */
static jag_op_id component_op(jag_op_id op) { return op == JAG_OP_bmm ? JAG_OP_mm : op; }

/* A dense operand of a pointwise op with as many dims as the nested tensor
 * lines up with its batch dim: component b sees row b (or row 0 when that
 * dim is 1). Fewer dims broadcast against each component as they are. */
static bool splits_over_batch(const jag_op_info *info, const jag_tensor *t, int outer_ndim) {
    return (info->tags & JAG_TAG_POINTWISE) && !t->subclass && t->ndim == outer_ndim;
}

static jag_status dense_row(const jag_op_info *info, int argi, const jag_tensor *t, int64_t b, int64_t batch,
                            jag_tensor **out) {
    if (t->sizes[0] != 1 && t->sizes[0] != batch)
        return jag__error(JAG_ESHAPE, "%s: %s has %lld rows along the batch dim, expected 1 or %lld", info->api_name,
                          arg_label(argi), (long long)t->sizes[0], (long long)batch);
    int64_t row = t->sizes[0] == 1 ? 0 : b;
    *out = jag__tensor_view(t, t->sizes + 1, t->strides + 1, t->ndim - 1, t->offset + row * t->strides[0]);
    return *out ? JAG_OK : jag_last_status();
}

/* Unbind nested args, run the op on each component, nest each output. */
static jag_status per_component(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    const dim_spec dss = find_dim_spec(op), *ds = &dss;
    int64_t batch = lead->batch;
    jag_tensor **comps[MAX_ARGS] = {0};
    jag_tensor **results = NULL;
    jag_status st = JAG_OK;
    int64_t dims[JAG_MAX_DIMS];
    jag_value base[MAX_ARGS];
    if (nargs > MAX_ARGS) return not_supported(info, JAG_STRIDED, "too many arguments");
    /* ops whose arguments describe the outer shape cannot run per component,
     * nor can non-pointwise ops whose nested argument is not the first */
    if (op == JAG_OP_view || op == JAG_OP_expand || op == JAG_OP_permute)
        return not_supported(info, JAG_STRIDED, "its sizes describe the whole tensor, not a component");
    if (!(info->tags & JAG_TAG_POINTWISE) && !(args[0].kind == JAG_VAL_TENSOR && jag__nested(args[0].u.t) == lead))
        return not_supported(info, JAG_STRIDED, "the nested tensor must be the first argument");
    for (int i = 0; i < nargs && !st; i++) {
        base[i] = args[i];
        if (args[i].kind == JAG_VAL_TENSORS) {
            for (int j = 0; j < args[i].u.tensors.n; j++)
                if (jag__nested(args[i].u.tensors.v[j])) st = not_supported(info, JAG_STRIDED, "nested tensors inside a tensor list");
        } else if (args[i].kind == JAG_VAL_TENSOR) {
            nested_state *s = jag__nested(args[i].u.t);
            if (!s) continue;
            if (s->batch != batch) {
                st = jag__error(JAG_ESHAPE, "%s: %s has %lld components, the first nested argument %lld", info->api_name,
                                arg_label(i), (long long)s->batch, (long long)batch);
                break;
            }
            if (!s->buffer->storage) {
                st = not_supported(info, JAG_STRIDED, "the per-component fallback needs data (it cannot be traced)");
                break;
            }
            if ((info->tags & JAG_TAG_POINTWISE) && s != lead && !same_table(s->sizes, lead->sizes)) {
                st = jag__error(JAG_ESHAPE, "%s: %s has components of other sizes than the first nested argument", info->api_name,
                                arg_label(i));
                break;
            }
            comps[i] = calloc((size_t)(batch ? batch : 1), sizeof(jag_tensor *));
            if (!comps[i]) st = jag__error(JAG_ENOMEM, "%s: out of memory", info->api_name);
            else st = jag__nested_unbind(s, comps[i]);
        } else if (ds && (ds->dim_args >> i & 1)) {
            int64_t d = 0;
            if (args[i].kind != JAG_VAL_INT) {
                st = jag__error(JAG_EINVAL, "%s: argument %d is %s, expected an int dim", info->api_name, i,
                                jag__kind_name(args[i].kind));
                break;
            }
            /* unsqueeze's dim counts the dim it adds */
            int nd = op == JAG_OP_unsqueeze ? outer_ndim + 1 : outer_ndim;
            if (!(st = component_dim(info, args[i].u.i, nd, &d))) base[i] = jag__v_int(d);
        } else if (ds && ds->dims_list_arg == i) {
            if (args[i].kind != JAG_VAL_INTS || args[i].u.ints.n < 0 || args[i].u.ints.n > JAG_MAX_DIMS) {
                st = jag__error(JAG_EINVAL, "%s: argument %d must be a list of at most %d dims", info->api_name, i,
                                JAG_MAX_DIMS);
                break;
            }
            int n = args[i].u.ints.n;
            if (n == 0) st = not_supported(info, JAG_STRIDED, "reducing over every dim includes the batch dim");
            for (int k = 0; k < n && !st; k++) st = component_dim(info, args[i].u.ints.v[k], outer_ndim, &dims[k]);
            base[i] = jag__v_ints(dims, n);
        }
    }
    int n_out = info->n_out;
    if (!st) {
        results = calloc((size_t)(batch * n_out + 1), sizeof *results);
        if (!results) st = jag__error(JAG_ENOMEM, "%s: out of memory", info->api_name);
    }
    jag_op_id cop = component_op(op);
    for (int64_t b = 0; b < batch && !st; b++) {
        jag_value a[MAX_ARGS];
        jag_tensor *rows[MAX_ARGS] = {0};
        for (int i = 0; i < nargs && !st; i++) {
            a[i] = comps[i] ? jag__v_tensor(comps[i][b]) : base[i];
            if (!comps[i] && args[i].kind == JAG_VAL_TENSOR && splits_over_batch(info, args[i].u.t, outer_ndim)) {
                st = dense_row(info, i, args[i].u.t, b, batch, &rows[i]);
                a[i] = jag__v_tensor(rows[i]);
            }
        }
        jag_tensor *r[4] = {0};
        if (!st) st = jag__dispatch(cop, a, nargs, r);
        for (int i = 0; i < nargs; i++) jag_release(rows[i]);
        for (int k = 0; k < n_out; k++) results[k * batch + b] = r[k];
        if (!st)
            for (int k = 0; k < n_out && !st; k++)
                if (r[k]->ndim == 0) st = not_supported(info, JAG_STRIDED, "each component's result is 0-d, which cannot be nested");
    }
    for (int k = 0; k < n_out && !st; k++) {
        st = jag__nested_from_components(info->api_name, results + k * batch, batch, JAG_STRIDED, &outs[k]);
        if (st == JAG_OK) { /* results share the first nested argument's ragged symbol */
            nested_state *o = jag__nested(outs[k]);
            if (o) atomic_store(&o->ragged_id, atomic_load(&lead->ragged_id));
        }
    }
    if (st)
        for (int k = 0; k < n_out; k++) jag_release(outs[k]), outs[k] = NULL;
    for (int i = 0; i < nargs; i++)
        if (comps[i]) {
            for (int64_t b = 0; b < batch; b++) jag_release(comps[i][b]);
            free(comps[i]);
        }
    if (results)
        for (int64_t k = 0; k < batch * n_out; k++) jag_release(results[k]);
    free(results);
    return st;
}

/* ---- along the ragged dim ------------------------------------------------ */

bool jag__is_ragged_dim(const jag_value *dim, int outer_ndim) {
    return dim->kind == JAG_VAL_INT && (dim->u.i == 1 || dim->u.i == 1 - outer_ndim);
}

/* Whether `op` (a reduction) with these arguments reduces over the ragged dim
 * (1) of a jagged tensor with outer_ndim dims: 1 and *sp filled (kind, the
 * trailing dims reduced with it, correction, keepdim), 0 when it does not,
 * -1 with an error for a bad dim list that names the ragged dim. */
int jag__ragged_reduction(jag_op_id op, const jag_value *args, int nargs, int outer_ndim, jag_segment_spec *sp) {
    const jag_op_info *info = &jag__ops[op];
    jag_segment_kind kind;
    bool list = true;
    int keep_i = 2;
    switch (op) {
    case JAG_OP_sum: kind = JAG_SEG_SUM; break;
    case JAG_OP_mean: kind = JAG_SEG_MEAN; break;
    case JAG_OP_amax: kind = JAG_SEG_AMAX; break;
    case JAG_OP_amin: kind = JAG_SEG_AMIN; break;
    case JAG_OP_logsumexp: kind = JAG_SEG_LSE; break;
    case JAG_OP_var: kind = JAG_SEG_VAR, keep_i = 3; break;
    case JAG_OP_std: kind = JAG_SEG_STD, keep_i = 3; break;
    case JAG_OP_max_dim: kind = JAG_SEG_MAX, list = false; break;
    case JAG_OP_min_dim: kind = JAG_SEG_MIN, list = false; break;
    case JAG_OP_argmax: kind = JAG_SEG_ARGMAX, list = false; break;
    case JAG_OP_argmin: kind = JAG_SEG_ARGMIN, list = false; break;
    default: return 0;
    }
    if (nargs <= keep_i || args[0].kind != JAG_VAL_TENSOR) return 0;
    unsigned mask = 0;
    if (list) {
        if (args[1].kind != JAG_VAL_INTS) return 0;
        int n = args[1].u.ints.n;
        bool ragged = false;
        for (int k = 0; k < n; k++) {
            int64_t d = args[1].u.ints.v[k];
            ragged |= d == 1 || d == 1 - outer_ndim;
        }
        if (!ragged) return 0;
        bool seen_ragged = false;
        for (int k = 0; k < n; k++) {
            int64_t d0 = args[1].u.ints.v[k], d = d0 < 0 ? d0 + outer_ndim : d0;
            if (d < 0 || d >= outer_ndim) {
                jag__error(JAG_ERANGE, "%s: dim %lld is out of range for a nested tensor with %d dims", info->api_name,
                           (long long)d0, outer_ndim);
                return -1;
            }
            if (d == 0) {
                jag__error(JAG_ENOTIMPL, "%s: reducing over the batch dim (0) of a nested tensor is not supported",
                           info->api_name);
                return -1;
            }
            if ((d == 1 && seen_ragged) || (d >= 2 && (mask >> (d - 1) & 1))) {
                jag__error(JAG_EINVAL, "%s: dim %lld appears twice in argument 'dims'", info->api_name, (long long)d0);
                return -1;
            }
            if (d == 1) seen_ragged = true;
            else mask |= 1u << (d - 1);
        }
    } else if (!jag__is_ragged_dim(&args[1], outer_ndim)) {
        return 0;
    }
    bool keep;
    int64_t corr = 0;
    if (jag__arg_bool(info->api_name, args, nargs, keep_i, "keepdim", &keep)) return -1;
    if (keep_i == 3 && jag__arg_int(info->api_name, args, nargs, 2, "correction", &corr)) return -1;
    *sp = (jag_segment_spec){.kind = kind, .mask = mask, .correction = corr, .keepdim = keep};
    return 1;
}

/* Whether a jagged batch is one whole component: B = 1, no holes, its rows
 * all of the values from row 0, at least one of them. Real tensors only. */
static bool one_whole_component(const nested_state *s) {
    const jag_tensor *o = s->offsets, *v = s->values;
    if (s->batch != 1 || s->lengths || s->ragged_idx != 1 || !o->storage || !v->storage || v->ndim < 1 ||
        v->sizes[0] < 1)
        return false;
    const int64_t *p = (const int64_t *)jag__ptr(o);
    return p[0] == 0 && p[o->strides[0]] == v->sizes[0];
}

/* A small batch of one whole component reduced over the ragged dim alone,
 * without keepdim: the same op on the values over their dim 0 with keepdim,
 * whose result already has the nested result's shape (1, trailing dims).
 * It skips the segment plan and the ragged kernels' set-up, the fixed cost
 * that makes a tiny batch of one dearer than the same dense tensor (sum of
 * one 10 x 64 float component: 290-310 against 240 ns; max 350-370 against
 * 310-340; var of 8 x 64: 361 -> 325 ns, the dense op alone 262; of
 * 2 x 256: 527 -> 348). Not logsumexp: the dense op runs the ragged
 * kernel for it at any size. Only up to ONE_COMPONENT_MAX elements: past
 * a thousand or two the ragged kernels beat the dense ones over a middle
 * dim (30 x 64: var 525-540 against 635-650 ns; 1000 x 64: sum 4.7
 * against 6.4 us). The result is the
 * dense op's; each component of any batch is computed as that op computes
 * it (the reductions' tests check this). Not while recording a trace: a
 * trace records what holds for every batch. */
#define ONE_COMPONENT_MAX 1024
static bool reduce_one_component(jag_op_id op, const jag_value *args, int nargs, const nested_state *lead,
                                 const jag_segment_spec *sp, jag_tensor **outs, jag_status *st) {
    if (sp->kind == JAG_SEG_LSE || sp->mask || sp->keepdim || jag__trace_current || !jag_dtype_is_floating(lead->values->dtype) ||
        nargs > 4 || jag_numel(lead->values) > ONE_COMPONENT_MAX || !one_whole_component(lead))
        return false;
    static const int64_t dim0 = 0;
    int keep_i = sp->kind == JAG_SEG_VAR || sp->kind == JAG_SEG_STD ? 3 : 2;
    jag_value a[4];
    memcpy(a, args, (size_t)nargs * sizeof a[0]);
    a[0] = jag__v_tensor(lead->values);
    a[1] = args[1].kind == JAG_VAL_INTS ? jag__v_ints(&dim0, 1) : jag__v_int(0);
    a[keep_i] = jag__v_bool(true);
    *st = jag__dispatch_plain(op, a, nargs, outs);
    return true;
}

/* reductions over the ragged dim: plain ops on the inner tensors, so that
 * traces record them (ragged_reduce; max / min with indices and argmax /
 * argmin: ragged_reduce_indices) */
static jag_status reduce_ragged(jag_op_id op, const jag_value *args, int nargs, nested_state *lead,
                                const jag_segment_spec *sp, jag_tensor **outs) {
    /* integer and bool values: sum, mean, amax and amin; int32 / int64 also
     * max / min with indices and argmax / argmin (as torch's dense
     * reductions); the error names the op the caller called */
    jag_dtype dt = lead->values->dtype;
    bool int_indices = sp->kind >= JAG_SEG_MAX && (dt == JAG_INT32 || dt == JAG_INT64);
    if (sp->kind > JAG_SEG_AMIN && !jag_dtype_is_floating(dt) && !int_indices)
        return jag__error(JAG_EDTYPE, "%s: reducing over the ragged dim needs float values, got %s",
                          jag__ops[op].api_name, jag_dtype_name(lead->values->dtype));
    jag_status st;
    if (reduce_one_component(op, args, nargs, lead, sp, outs, &st)) return st;
    if (sp->kind < JAG_SEG_MAX) return jag__ragged_reduce(lead, sp, outs);
    return jag__ragged_reduce_indices(lead, sp, outs);
}

/* layer_norm / rms_norm over trailing dims that do not reach the ragged dim:
 * the same op on values */
static jag_status norm_on_values(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                 jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    int64_t nn;
    jag_status st = jag__arg_int(info->api_name, args, nargs, 1, "normalized_ndim", &nn);
    if (st) return st;
    if (nn < 1 || nn > outer_ndim - 2)
        return not_supported(info, JAG_JAGGED, "normalize over trailing dims after the ragged one (1..ndim-2 of them)");
    for (int i = 2; i < nargs; i++)
        if (args[i].kind == JAG_VAL_TENSOR && jag__nested(args[i].u.t))
            return not_supported(info, JAG_JAGGED, "weight and bias must be dense");
    jag_value a[MAX_ARGS];
    for (int i = 0; i < nargs; i++) a[i] = args[i];
    a[0] = jag__v_tensor(lead->values);
    jag_tensor *res = NULL;
    if ((st = jag__dispatch_plain(op, a, nargs, &res))) return st;
    return jag__nested_rewrap_jagged_taking(lead, res, outs);
}

/* embedding(weight, nested indices): the rows of weight for the packed
 * indices, wrapped with the indices' structure: (B, j) -> (B, j, D) */
static jag_status embedding_nested(const jag_value *args, int nargs, nested_state *lead, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[JAG_OP_embedding];
    if (args[0].kind != JAG_VAL_TENSOR || jag__nested(args[0].u.t) || args[1].kind != JAG_VAL_TENSOR ||
        jag__nested(args[1].u.t) != lead) /* (checking kinds first: fuzz regression) */
        return not_supported(info, JAG_JAGGED, "the weight must be dense and the indices nested");
    jag_value a[] = {args[0], jag__v_tensor(lead->values)};
    jag_tensor *res = NULL;
    jag_status st = jag__dispatch_plain(JAG_OP_embedding, a, nargs, &res);
    if (st) return st;
    return jag__nested_rewrap_jagged_taking(lead, res, outs);
}

/* select(nt, 0, i): component i, a view of its rows of values */
static jag_status select_component(const jag_value *args, int nargs, nested_state *lead, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[JAG_OP_select];
    int64_t i;
    jag_status st = jag__arg_int(info->api_name, args, nargs, 2, "index", &i);
    if (st) return st;
    if (i < -lead->batch || i >= lead->batch)
        return jag__error(JAG_ERANGE, "%s: argument 'index' is %lld, expected in [%lld, %lld) for the batch dim", info->api_name,
                          (long long)i, (long long)-lead->batch, (long long)lead->batch);
    if (i < 0) i += lead->batch;
    if (!lead->offsets->storage) return not_supported(info, JAG_JAGGED, "selecting a component needs data");
    const int64_t *o = (const int64_t *)jag__ptr(lead->offsets);
    int64_t len = lead->lengths ? ((const int64_t *)jag__ptr(lead->lengths))[i] : o[i + 1] - o[i];
    const jag_tensor *v = lead->values;
    int64_t sz[JAG_MAX_DIMS];
    memcpy(sz, v->sizes, (size_t)v->ndim * sizeof *sz);
    sz[0] = len;
    outs[0] = jag__tensor_view(v, sz, v->strides, v->ndim, v->offset + (len ? o[i] * v->strides[0] : 0));
    return outs[0] ? JAG_OK : jag_last_status();
}

/* narrow(nt, 1, start, length): each component's rows [start, start+length)
 * (the length clipped to the component), a view of the same values with
 * holes. A start past a component's end is refused, as dense narrow refuses
 * a start past the dim's size. */
static jag_status narrow_ragged(const jag_value *args, int nargs, nested_state *lead, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[JAG_OP_narrow];
    int64_t start, length;
    jag_status st;
    if ((st = jag__arg_int(info->api_name, args, nargs, 2, "start", &start)) ||
        (st = jag__arg_int(info->api_name, args, nargs, 3, "length", &length)))
        return st;
    if (start < 0 || length < 0)
        return jag__error(JAG_ERANGE, "%s: start %lld and length %lld along the ragged dim must be >= 0", info->api_name,
                          (long long)start, (long long)length);
    if (!lead->offsets->storage) return not_supported(info, JAG_JAGGED, "narrowing the ragged dim needs data");
    int64_t B = lead->batch, nb1 = B + 1;
    jag_tensor *off = jag__tensor_new(info->api_name, &nb1, 1, JAG_INT64, false, false);
    jag_tensor *len = off ? jag__tensor_new(info->api_name, &B, 1, JAG_INT64, false, false) : NULL;
    if (!off || !len) {
        jag_release(off);
        return jag_last_status();
    }
    const int64_t *o = (const int64_t *)jag__ptr(lead->offsets);
    const int64_t *l = lead->lengths ? (const int64_t *)jag__ptr(lead->lengths) : NULL;
    for (int64_t b = 0; b < B; b++) {
        int64_t lb = l ? l[b] : o[b + 1] - o[b];
        if (start > lb) {
            jag_release(off), jag_release(len);
            return jag__error(JAG_ERANGE, "%s: start %lld along the ragged dim is past the end of component %lld (length %lld)",
                              info->api_name, (long long)start, (long long)b, (long long)lb);
        }
    }
    int64_t *no = (int64_t *)jag__ptr(off), *nl = (int64_t *)jag__ptr(len), mn = INT64_MAX, mx = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t lb = l ? l[b] : o[b + 1] - o[b], skip = start;
        no[b] = o[b] + skip;
        nl[b] = lb - skip < length ? lb - skip : length;
        mn = nl[b] < mn ? nl[b] : mn, mx = nl[b] > mx ? nl[b] : mx;
    }
    no[B] = o[B];
    if (B == 0) mn = 0;
    /* a new structure: a fresh ragged symbol */
    st = jag__nested_wrap_jagged(lead->values, off, len, jag__new_ragged_id(), mn, mx, outs);
    jag_release(off), jag_release(len);
    return st;
}

/* view(nt, (B, -1, s...)) of a jagged (B, j, D...): the batch and ragged
 * dims stay (the -1 marks the ragged one, as torch's view(B, -1, H, Dh)),
 * the dims after them are viewed on the values: values.view(-1, s...). */
static jag_status view_jagged(const jag_value *args, int nargs, nested_state *lead, int outer_ndim, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[JAG_OP_view];
    const int64_t *sz;
    int n;
    jag_status st = jag__arg_ints(info->api_name, args, nargs, 1, "sizes", &sz, &n);
    if (st) return st;
    (void)outer_ndim;
    if (n < 2 || (sz[0] != lead->batch && sz[0] != -1) || sz[1] != -1)
        return not_supported(info, JAG_JAGGED, "a view keeps the batch and ragged dims: sizes (B, -1, ...) with -1 for "
                                               "the ragged dim, the dims after it viewed on the values");
    int64_t vs[JAG_MAX_DIMS];
    vs[0] = -1;
    for (int k = 2; k < n; k++) {
        if (sz[k] < 0)
            return jag__error(JAG_ESHAPE, "%s: size %lld at dim %d; only the ragged dim (1) may be -1 in a view of a jagged tensor",
                              info->api_name, (long long)sz[k], k);
        vs[k - 1] = sz[k];
    }
    int64_t want = jag__numel(vs + 1, n - 2), have = jag__numel(lead->values->sizes + 1, lead->values->ndim - 1);
    if (want != have) {
        char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: the dims after the ragged one %s hold %lld elements per row, sizes %s ask for %lld",
                          info->api_name, jag__shape_str(lead->values->sizes + 1, lead->values->ndim - 1, a, sizeof a),
                          (long long)have, jag__shape_str(sz + 2, n - 2, b, sizeof b), (long long)want);
    }
    jag_tensor *v = NULL;
    jag_value a[] = {jag__v_tensor(lead->values), jag__v_ints(vs, n - 1)};
    if ((st = jag__dispatch(JAG_OP_view, a, 2, &v))) return st;
    return jag__nested_rewrap_jagged_taking(lead, v, outs);
}

/* ---- the rules, one per op ----------------------------------------------- */

/* Every rule has this shape: `lead` is the first nested argument (NULL for
 * a rule that runs before it is found), `outer_ndim` its number of dims. */
typedef jag_status (*nested_rule_fn)(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                     jag_tensor **outs);

/* When a rule runs in the handler's order (see the top of this file). */
typedef enum {
    RULE_BEFORE_LEAD,   /* before the lead argument is found: the op sorts out its arguments */
    RULE_ON_STRUCTURE,  /* once the lead is found, on either layout, before the jagged prelude */
    RULE_BY_LAYOUT,     /* jagged: after the prelude, ragged dim at 1; strided: `strided` */
} rule_stage;

typedef struct nested_rule {
    jag_op_id op;
    rule_stage stage;
    nested_rule_fn fn;      /* the jagged rule (RULE_BY_LAYOUT: NULL when there is none), else the rule */
    nested_rule_fn strided; /* RULE_BY_LAYOUT: the strided rule */
} nested_rule;

static bool lead_first(const jag_value *args, const nested_state *lead) {
    return args[0].kind == JAG_VAL_TENSOR && jag__nested(args[0].u.t) == lead;
}

/* attention: a strided nested mask beside jagged q, k, v, or q, k, v with
 * their ragged dim at 2 — the composite sorts out its arguments */
static jag_status rule_attention(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                 jag_tensor **outs) {
    (void)lead, (void)outer_ndim;
    return jag__composite_sdpa(jag__ops[op].api_name, args, nargs, outs);
}

/* values: a new header over the packed values (a view) */
static jag_status rule_values(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                              jag_tensor **outs) {
    (void)args, (void)nargs, (void)outer_ndim;
    if (lead->layout != JAG_JAGGED) return not_supported(&jag__ops[op], lead->layout, "use jag_nested_buffer");
    const jag_tensor *v = lead->values;
    outs[0] = jag__tensor_view(v, v->sizes, v->strides, v->ndim, v->offset);
    return outs[0] ? JAG_OK : jag_last_status();
}

/* the constructors of nested tensors take plain tensors: a nested one is
 * the caller's mistake */
static jag_status rule_plain_arguments(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                       jag_tensor **outs) {
    (void)args, (void)nargs, (void)lead, (void)outer_ndim, (void)outs;
    return jag__error(JAG_EINVAL, "%s: arguments must be plain tensors, got a nested tensor", jag__ops[op].api_name);
}

static jag_status rule_to_padded(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                 jag_tensor **outs) {
    (void)nargs, (void)lead, (void)outer_ndim;
    if (args[0].kind != JAG_VAL_TENSOR || !jag__nested(args[0].u.t) || args[1].kind != JAG_VAL_DOUBLE ||
        args[2].kind != JAG_VAL_INTS)
        return jag__error(JAG_EINVAL, "%s: expected (nested tensor, double padding, int list output_sizes)",
                          jag__ops[op].api_name);
    return jag__nested_to_padded(args[0].u.t, args[1].u.d, args[2].u.ints.n ? args[2].u.ints.v : NULL, args[2].u.ints.n,
                                 outs);
}

/* transpose: of the size tables (strided); moving the ragged dim or from a
 * tensor ragged elsewhere than dim 1 (ragged_idx.c); else on the values */
static jag_status rule_transpose(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                 jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    if (lead->layout == JAG_STRIDED) return transpose_strided(args, lead, outer_ndim, outs);
    if (!lead_first(args, lead)) return not_supported(info, JAG_JAGGED, NULL);
    if (lead->ragged_idx != 1 || jag__is_ragged_dim(&args[1], outer_ndim) || jag__is_ragged_dim(&args[2], outer_ndim))
        return jag__nested_transpose_jagged(info, args, nargs, lead, outer_ndim, outs);
    return on_values_dims(op, args, nargs, lead, outer_ndim, outs);
}

/* the reductions: over the ragged dim by segments, over other dims on the values */
static jag_status rule_reduce(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                              jag_tensor **outs) {
    if (!lead_first(args, lead)) return not_supported(&jag__ops[op], JAG_JAGGED, NULL);
    jag_segment_spec sp;
    int r = jag__ragged_reduction(op, args, nargs, outer_ndim, &sp);
    if (r < 0) return jag_last_status();
    if (r > 0) return reduce_ragged(op, args, nargs, lead, &sp, outs);
    return on_values_dims(op, args, nargs, lead, outer_ndim, outs);
}

static jag_status rule_narrow(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                              jag_tensor **outs) {
    if (!lead_first(args, lead)) return not_supported(&jag__ops[op], JAG_JAGGED, NULL);
    if (nargs == 4 && jag__is_ragged_dim(&args[1], outer_ndim)) return narrow_ragged(args, nargs, lead, outs);
    return on_values_dims(op, args, nargs, lead, outer_ndim, outs);
}

/* select: one component along the batch dim, else on the values */
static jag_status rule_select(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                              jag_tensor **outs) {
    if (!lead_first(args, lead)) return not_supported(&jag__ops[op], JAG_JAGGED, NULL);
    if (nargs == 3 && args[1].kind == JAG_VAL_INT && (args[1].u.i == 0 || args[1].u.i == -outer_ndim))
        return select_component(args, nargs, lead, outs);
    return on_values_dims(op, args, nargs, lead, outer_ndim, outs);
}

/* index_select: components picked along the batch dim, else on the values */
static jag_status rule_index_select(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                    jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    if (!lead_first(args, lead)) return not_supported(info, JAG_JAGGED, NULL);
    if (nargs == 3 && args[1].kind == JAG_VAL_INT && (args[1].u.i == 0 || args[1].u.i == -outer_ndim) &&
        args[2].kind == JAG_VAL_TENSOR)
        return jag__nested_index_select_batch(info->api_name, lead, args[2].u.t, outs);
    if (!(args[2].kind == JAG_VAL_TENSOR && jag__nested(args[2].u.t)))
        return on_values_dims(op, args, nargs, lead, outer_ndim, outs);
    return not_supported(info, JAG_JAGGED, NULL);
}

static jag_status rule_view(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                            jag_tensor **outs) {
    if (!lead_first(args, lead)) return not_supported(&jag__ops[op], JAG_JAGGED, NULL);
    return view_jagged(args, nargs, lead, outer_ndim, outs);
}

static jag_status rule_unsqueeze(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                 jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    if (!lead_first(args, lead) || nargs != 2 || args[1].kind != JAG_VAL_INT) return not_supported(info, JAG_JAGGED, NULL);
    return jag__nested_unsqueeze(info->api_name, lead, outer_ndim, args[1].u.i, outs);
}

static jag_status rule_embedding(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                 jag_tensor **outs) {
    (void)op, (void)outer_ndim;
    return embedding_nested(args, nargs, lead, outs);
}

static jag_status rule_cat(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                           jag_tensor **outs) {
    (void)lead, (void)outer_ndim;
    return jag__nested_cat(jag__ops[op].api_name, args, nargs, outs);
}

/* embedding_bag of nested indices: their values and offsets as the bags */
static jag_status rule_embedding_bag(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                                     jag_tensor **outs) {
    (void)lead, (void)outer_ndim;
    jag_value a[MAX_ARGS];
    jag_tensor *temps[3];
    jag_status st = jag__nested_bag_args(jag__ops[op].api_name, args, nargs, a, temps);
    if (!st) st = jag__dispatch(op, a, nargs, outs);
    for (int i = 0; i < 3; i++) jag_release(temps[i]);
    return st;
}

/* softmax / log_softmax: down each component over the ragged dim (a plain
 * op, traceable), else on the values */
static jag_status rule_softmax(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                               jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    if (!lead_first(args, lead)) return not_supported(info, JAG_JAGGED, NULL);
    if (!jag__is_ragged_dim(&args[1], outer_ndim)) return on_values_dims(op, args, nargs, lead, outer_ndim, outs);
    if (!jag_dtype_is_floating(lead->values->dtype))
        return jag__error(JAG_EDTYPE, "%s: softmax over the ragged dim needs float values, got %s", info->api_name,
                          jag_dtype_name(lead->values->dtype));
    jag_tensor *v = NULL;
    jag_status st = jag__ragged_softmax(lead, op == JAG_OP_log_softmax, &v);
    if (st) return st;
    return jag__nested_rewrap_jagged_taking(lead, v, outs);
}

static jag_status rule_norm(jag_op_id op, const jag_value *args, int nargs, nested_state *lead, int outer_ndim,
                            jag_tensor **outs) {
    if (!lead_first(args, lead)) return not_supported(&jag__ops[op], JAG_JAGGED, NULL);
    return norm_on_values(op, args, nargs, lead, outer_ndim, outs);
}

/* The nested class's rules. Each is registered through the public
 * decomposition API (jag_subclass_register_decomp) with the handler itself
 * as the function and the rule as its context: a registered decomposition
 * runs instead of the class's handler, and every rule needs the handler's
 * prelude first (the lead argument, the layouts agreeing, the ragged dim
 * moved to 1, ...), so the prelude is shared by being the same function,
 * called with the rule (registered) or without one (the class's handler,
 * for POINTWISE rows, NO_NESTED rows and custom ops). The dispatcher's
 * per-op decomposition load is then the only lookup: no second table is
 * read on the hot path, and a rule replaced by a user's decomposition is
 * replaced everywhere, also when ragged_idx.c runs the op again on its
 * canonical form (it passes the context on). Rows tagged NO_NESTED have
 * none; tests/test_op_table.c checks that every other row has one. */
#define BY_LAYOUT(name, rule) {JAG_OP_##name, RULE_BY_LAYOUT, rule, per_component}
#define PER_COMPONENT(name) {JAG_OP_##name, RULE_BY_LAYOUT, NULL, per_component}
static const nested_rule nested_rules[] = {
    {JAG_OP_scaled_dot_product_attention_masked, RULE_BEFORE_LEAD, rule_attention, NULL},
    {JAG_OP_scaled_dot_product_attention, RULE_ON_STRUCTURE, rule_attention, NULL},
    {JAG_OP_values, RULE_ON_STRUCTURE, rule_values, NULL},
    {JAG_OP_nested_from_jagged, RULE_ON_STRUCTURE, rule_plain_arguments, NULL},
    {JAG_OP_from_padded, RULE_ON_STRUCTURE, rule_plain_arguments, NULL},
    {JAG_OP_to_padded, RULE_ON_STRUCTURE, rule_to_padded, NULL},
    {JAG_OP_transpose, RULE_ON_STRUCTURE, rule_transpose, NULL},
    BY_LAYOUT(mm, gemm_on_values),
    BY_LAYOUT(matmul, gemm_on_values),
    BY_LAYOUT(linear, gemm_on_values),
    BY_LAYOUT(sum, rule_reduce),
    BY_LAYOUT(mean, rule_reduce),
    BY_LAYOUT(amax, rule_reduce),
    BY_LAYOUT(amin, rule_reduce),
    BY_LAYOUT(logsumexp, rule_reduce),
    BY_LAYOUT(var, rule_reduce),
    BY_LAYOUT(std, rule_reduce),
    BY_LAYOUT(max_dim, rule_reduce),
    BY_LAYOUT(min_dim, rule_reduce),
    BY_LAYOUT(argmax, rule_reduce),
    BY_LAYOUT(argmin, rule_reduce),
    BY_LAYOUT(narrow, rule_narrow),
    BY_LAYOUT(select, rule_select),
    BY_LAYOUT(index_select, rule_index_select),
    BY_LAYOUT(view, rule_view),
    BY_LAYOUT(unsqueeze, rule_unsqueeze),
    BY_LAYOUT(embedding, rule_embedding),
    BY_LAYOUT(cat, rule_cat),
    BY_LAYOUT(embedding_bag, rule_embedding_bag),
    BY_LAYOUT(softmax, rule_softmax),
    BY_LAYOUT(log_softmax, rule_softmax),
    BY_LAYOUT(layer_norm, rule_norm),
    BY_LAYOUT(rms_norm, rule_norm),
    /* no jagged rule yet: per component on the strided layout */
    PER_COMPONENT(bmm),
    PER_COMPONENT(squeeze),
    PER_COMPONENT(prod),
    PER_COMPONENT(max),
    PER_COMPONENT(min),
    PER_COMPONENT(gather),
    PER_COMPONENT(scatter_add),
    PER_COMPONENT(native_layer_norm),
    PER_COMPONENT(native_rms_norm),
    PER_COMPONENT(layer_norm_backward),
    PER_COMPONENT(rms_norm_backward),
    PER_COMPONENT(softmax_backward),
    PER_COMPONENT(log_softmax_backward),
    PER_COMPONENT(mean_backward),
};
#undef BY_LAYOUT
#undef PER_COMPONENT

static bool rule_registered[JAG_OP_BUILTIN_COUNT];

jag_status jag__nested_register_rules(const jag_subclass *cls) {
    for (size_t i = 0; i < sizeof nested_rules / sizeof nested_rules[0]; i++) {
        const nested_rule *r = &nested_rules[i];
        jag_status st = jag_subclass_register_decomp(cls, r->op, jag__nested_dispatch, (void *)r);
        if (st) return st;
        rule_registered[r->op] = true;
    }
    return JAG_OK;
}

bool jag__nested_has_rule(jag_op_id op) {
    (void)jag__nested_class(); /* the rules go in with the class */
    return op >= 0 && op < JAG_OP_BUILTIN_COUNT && rule_registered[op];
}

/* ---- the handler ---------------------------------------------------------- */

/* The class's handler (ctx NULL) and every registered rule (ctx: the rule). */
jag_status jag__nested_dispatch(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                jag_tensor **outs, void *ctx) {
    const nested_rule *rule = ctx;
    const jag_op_info *info = &jag__ops[op];
    if (rule && rule->stage == RULE_BEFORE_LEAD) return rule->fn(op, args, nargs, NULL, 0, outs);
    lead_facts f;
    jag_status st = find_lead(info, args, nargs, &f);
    if (st) return st;
    nested_state *lead = f.lead;
    int outer_ndim = f.outer_ndim;
    if (rule && rule->stage == RULE_ON_STRUCTURE) return rule->fn(op, args, nargs, lead, outer_ndim, outs);

    if (lead->layout == JAG_JAGGED) {
        if (f.ragged_elsewhere)
            return jag__nested_dispatch_moved(cls, op, args, nargs, lead, outer_ndim, outs, ctx);
        if (info->tags & JAG_TAG_POINTWISE) return pointwise_jagged(op, args, nargs, lead, outer_ndim, outs);
        if (rule && rule->fn) return rule->fn(op, args, nargs, lead, outer_ndim, outs);
        return not_supported(info, JAG_JAGGED, NULL);
    }
    if (rule) return rule->strided(op, args, nargs, lead, outer_ndim, outs);
    if (info->tags & JAG_TAG_POINTWISE)
        return strided_buffers_apply(args, nargs, lead) ? pointwise_strided(op, args, nargs, lead, outs)
                                                        : per_component(op, args, nargs, lead, outer_ndim, outs);
    if (info->tags & JAG_TAG_CUSTOM) return not_supported(info, JAG_STRIDED, "register a nested decomposition for this custom op");
    return not_supported(info, JAG_STRIDED, "it has no nested rule: its arguments describe the whole tensor, not a component, or are "
                                            "a jagged tensor's inner tensors");
}
