/* ragged_idx.c — jagged tensors whose ragged dim is not outer dim 1.
 *
 * transpose(1, 2) of a jagged (B, j, H, D) gives (B, H, j, D): the ragged
 * dim is now outer dim 2 (its `ragged_idx`, as PyTorch's). The values do not
 * move: they stay (sum L, H, D), ragged rows first, the other outer dims
 * after them in outer order. So every such tensor has a *canonical form* —
 * the same inner tensors with the ragged dim relabelled to dim 1 — and an op
 * whose meaning only depends on which dims its arguments name runs on the
 * canonical form with those dims relabelled:
 *
 *   (B, H, j, D).softmax(dim=3)  ==  canonical (B, j, H, D).softmax(dim=3)
 *   (B, H, j, D).sum(dims={1})   ==  canonical (B, j, H, D).sum(dims={2})
 *                                     -> (B, j, D), ragged at 1 in both
 *
 * Results are relabelled back to where the ragged dim lands. Ops that do not
 * survive the relabelling (those naming sizes of the whole tensor: view,
 * expand, unsqueeze, cat, ...) are refused with JAG_ENOTIMPL; transposing
 * back to dim 1 lets them run. transpose itself is here: it moves the ragged
 * dim, and permutes the values (a view) when the other dims change order. */
#include "nested.h"

int jag__nested_ragged_idx(const jag_tensor *nt) {
    nested_state *s = jag__nested(nt);
    return s && s->layout == JAG_JAGGED ? s->ragged_idx : 0;
}

jag_status jag__nested_relabel(const jag_tensor *nt, int r, jag_tensor **out) {
    nested_state *s = jag__nested(nt);
    JAG_ASSERT(s && s->layout == JAG_JAGGED);
    if (r < 1 || r > s->values->ndim)
        return jag__error(JAG_EINTERNAL, "nested: ragged dim %d out of range for values with %d dims", r, s->values->ndim);
    return jag__nested_wrap_jagged_at(s->values, s->offsets, s->lengths, atomic_load(&s->ragged_id), s->min_seqlen,
                                      s->max_seqlen, r, out);
}

/* A view of t with dim `from` moved to position `to`, the others in order. */
static jag_tensor *move_dim(jag_tensor *t, int from, int to) {
    int64_t sz[JAG_MAX_DIMS], sd[JAG_MAX_DIMS];
    for (int k = 0, j = 0; k < t->ndim; k++) {
        if (k == to) {
            sz[k] = t->sizes[from], sd[k] = t->strides[from];
            continue;
        }
        if (j == from) j++;
        sz[k] = t->sizes[j], sd[k] = t->strides[j];
        j++;
    }
    jag_tensor *v = jag__tensor_view(t, sz, sd, t->ndim, t->offset);
    jag_release(t);
    return v;
}

jag_tensor *jag__component_outer_order(jag_tensor *comp, int r) { return move_dim(comp, 0, r - 1); }

jag_tensor *jag__component_canonical_order(const jag_tensor *comp, int r) {
    return move_dim(jag_retain((jag_tensor *)comp), r - 1, 0);
}

bool jag__kept_ragged_result(jag_op_id op, const jag_value *args, int nargs, const jag_tensor *res, int outer_ndim) {
    return (jag__ops[op].tags & JAG_TAG_REDUCTION) && nargs > 1 && args[nargs - 1].kind == JAG_VAL_BOOL &&
           args[nargs - 1].u.b && res && !res->subclass && res->ndim == outer_ndim;
}

jag_tensor *jag__kept_ragged_reorder(const jag_tensor *res, int r, bool to_outer) {
    return to_outer ? move_dim(jag_retain((jag_tensor *)res), 1, r) : move_dim(jag_retain((jag_tensor *)res), r, 1);
}

static jag_status dim_in_range(const char *op, int64_t d, int n, int64_t *out) {
    if (d < -n || d >= n)
        return jag__error(JAG_ERANGE, "%s: dim %lld is out of range for a nested tensor with %d dims", op, (long long)d, n);
    *out = d < 0 ? d + n : d;
    return JAG_OK;
}

/* ---- transpose ---------------------------------------------------------- */

jag_status jag__nested_transpose_jagged(const jag_op_info *info, const jag_value *args, int nargs, nested_state *lead,
                                        int outer_ndim, jag_tensor **outs) {
    int64_t d0 = 0, d1 = 0;
    jag_status st;
    if (nargs != 3 || args[1].kind != JAG_VAL_INT || args[2].kind != JAG_VAL_INT)
        return jag__error(JAG_EINVAL, "%s: arguments 'dim0' and 'dim1' must be ints", info->api_name);
    if ((st = dim_in_range(info->api_name, args[1].u.i, outer_ndim, &d0)) ||
        (st = dim_in_range(info->api_name, args[2].u.i, outer_ndim, &d1)))
        return st;
    if (d0 == 0 || d1 == 0)
        return jag__error(JAG_ENOTIMPL, "%s: transposing the batch dim (0) of a nested tensor is not supported",
                          info->api_name);
    int r = lead->ragged_idx, n = outer_ndim;
    /* new outer dim i shows old outer dim from[i] */
    int from[JAG_MAX_DIMS];
    for (int i = 0; i < n; i++) from[i] = i == d0 ? (int)d1 : i == d1 ? (int)d0 : i;
    int nr = r == d0 ? (int)d1 : r == d1 ? (int)d0 : r;
    /* the values keep the ragged rows first, then the other dims in the new
     * outer order */
    int64_t perm[JAG_MAX_DIMS];
    bool identity = true;
    perm[0] = 0;
    for (int i = 1, k = 1; i < n; i++) {
        if (i == nr) continue;
        perm[k] = jag__values_dim(from[i], r);
        identity &= perm[k] == k;
        k++;
    }
    const jag_tensor *v = lead->values;
    jag_tensor *pv = NULL;
    if (!identity) {
        jag_value a[] = {jag__v_tensor(v), jag__v_ints(perm, v->ndim)};
        if ((st = jag__dispatch(JAG_OP_permute, a, 2, &pv))) return st;
    }
    st = jag__nested_wrap_jagged_at(pv ? pv : v, lead->offsets, lead->lengths, atomic_load(&lead->ragged_id),
                                    lead->min_seqlen, lead->max_seqlen, nr, outs);
    jag_release(pv);
    return st;
}

/* ---- other ops on the canonical form ------------------------------------ */

jag_status jag__dense_to_canonical(const char *op, int argi, const jag_tensor *d, int outer_ndim, int r, jag_tensor **out) {
    int dn = d->ndim, lead = outer_ndim - dn; /* d's dim k lines up with outer dim lead + k */
    if (dn > outer_ndim) {
        char ds[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument %d of shape %s has more dims than the nested tensor (%d)", op, argi,
                          jag__shape_str(d->sizes, dn, ds, sizeof ds), outer_ndim);
    }
    if (lead > r) { /* only dims after the ragged one: lines up as it is */
        *out = jag_retain((jag_tensor *)d);
        return JAG_OK;
    }
    if (d->sizes[r - lead] != 1) {
        char ds[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument %d of shape %s varies along the ragged dim (%d) of a nested tensor; "
                          "expected size 1 there", op, argi, jag__shape_str(d->sizes, dn, ds, sizeof ds), r);
    }
    /* the full rank, padded with leading 1s, then the ragged position's 1
     * moved to dim 1 */
    int64_t sz[JAG_MAX_DIMS], sd[JAG_MAX_DIMS];
    for (int k = 0; k < outer_ndim; k++) {
        sz[k] = k < lead ? 1 : d->sizes[k - lead];
        sd[k] = k < lead ? 0 : d->strides[k - lead];
    }
    jag_tensor *full = jag__tensor_view(d, sz, sd, outer_ndim, d->offset);
    if (!full) return jag_last_status();
    *out = move_dim(full, r, 1);
    return *out ? JAG_OK : jag_last_status();
}

/* Ops that mean the same on the canonical form with their dims relabelled
 * (their ops.def rows say so). */
static bool relabels(jag_op_id op) {
    return op < JAG_OP_BUILTIN_COUNT && (jag__ops[op].tags & (JAG_TAG_POINTWISE | JAG_TAG_RELABEL_DIMS));
}

jag_status jag__nested_canonical_args(jag_op_id op, const jag_value *args, int nargs, int r, int outer_ndim,
                                      jag_value *out, jag_tensor **temps, int *n_temps, int64_t *lists) {
    const jag_op_info *info = &jag__ops[op];
    unsigned bits;
    int list;
    jag__op_dim_args(op, &bits, &list);
    jag_status st = JAG_OK;
    for (int i = 0; i < nargs && !st; i++) {
        out[i] = args[i];
        if (args[i].kind == JAG_VAL_TENSORS) {
            for (int j = 0; j < args[i].u.tensors.n; j++)
                if (jag__nested_ragged_idx(args[i].u.tensors.v[j]) > 1)
                    return jag__error(JAG_ENOTIMPL, "%s: a tensor list with a jagged tensor whose ragged dim is not 1; "
                                      "transpose it back to dim 1 first", info->api_name);
        } else if (args[i].kind == JAG_VAL_TENSOR) {
            const jag_tensor *t = args[i].u.t;
            int ri = jag__nested_ragged_idx(t);
            jag_tensor *c = NULL;
            if (ri && ri != r)
                return jag__error(JAG_ESHAPE, "%s: argument %d is ragged in dim %d, the first nested argument in dim %d; "
                                  "transpose one of them", info->api_name, i, ri, r);
            if (ri) st = jag__nested_relabel(t, 1, &c);
            else if (!t->subclass && (info->tags & JAG_TAG_POINTWISE))
                st = jag__dense_to_canonical(info->api_name, i, t, outer_ndim, r, &c);
            if (c) temps[(*n_temps)++] = c, out[i] = jag__v_tensor(c);
        } else if ((bits >> i & 1) && args[i].kind == JAG_VAL_INT) {
            int64_t d = 0;
            if (!(st = dim_in_range(info->api_name, args[i].u.i, outer_ndim, &d))) out[i] = jag__v_int(jag__canonical_dim(d, r));
        } else if (i == list && args[i].kind == JAG_VAL_INTS && args[i].u.ints.n <= JAG_MAX_DIMS) {
            for (int k = 0; k < args[i].u.ints.n && !st; k++) {
                int64_t d = 0;
                if (!(st = dim_in_range(info->api_name, args[i].u.ints.v[k], outer_ndim, &d)))
                    lists[k] = jag__canonical_dim(d, r);
            }
            out[i] = jag__v_ints(lists, args[i].u.ints.n);
        }
    }
    return st;
}

int jag__nested_ragged_idx_after(jag_op_id op, const jag_value *args, int nargs, int r, int outer_ndim) {
    unsigned bits;
    int list;
    jag__op_dim_args(op, &bits, &list);
    bool removes = op == JAG_OP_select ||
                   ((jag__ops[op].tags & JAG_TAG_REDUCTION) && nargs > 1 && args[nargs - 1].kind == JAG_VAL_BOOL &&
                    !args[nargs - 1].u.b);
    if (!removes) return r;
    int below = 0;
    for (int i = 0; i < nargs; i++) {
        int n = i == list && args[i].kind == JAG_VAL_INTS ? args[i].u.ints.n : (bits >> i & 1) && args[i].kind == JAG_VAL_INT;
        for (int k = 0; k < n; k++) {
            int64_t d = i == list ? args[i].u.ints.v[k] : args[i].u.i;
            d = d < 0 ? d + outer_ndim : d;
            below += d > 0 && d < r;
        }
    }
    return r - below;
}

/* The arguments of a call with a moved ragged dim, for messages: the first
 * tensor argument whose ragged dim is not 1 (moved, its dim in *moved_r),
 * and the first two jagged tensor arguments ragged in different dims (a,
 * b), -1 where there is none. */
static void moved_args(const jag_value *args, int nargs, int *moved, int *moved_r, int *a, int *b) {
    *moved = *a = *b = -1, *moved_r = 0;
    for (int i = 0; i < nargs; i++) {
        int ri = args[i].kind == JAG_VAL_TENSOR ? jag__nested_ragged_idx(args[i].u.t) : 0;
        if (!ri) continue;
        if (ri > 1 && *moved < 0) *moved = i, *moved_r = ri;
        if (*a < 0) *a = i;
        else if (*b < 0 && ri != jag__nested_ragged_idx(args[*a].u.t)) *b = i;
    }
}

static bool is_product(jag_op_id op) {
    return op == JAG_OP_mm || op == JAG_OP_bmm || op == JAG_OP_matmul || op == JAG_OP_linear;
}

jag_status jag__nested_dispatch_moved(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                      nested_state *lead, int outer_ndim, jag_tensor **outs, void *ctx) {
    const jag_op_info *info = &jag__ops[op];
    const char *api = info->api_name;
    int r = lead->ragged_idx, n = outer_ndim;
    int mi, mr, ja, jb;
    moved_args(args, nargs, &mi, &mr, &ja, &jb);
    /* two jagged operands of a product ragged in different dims (x @ y^T
     * would be ragged in two dims, x^T @ y sums over the ragged dim):
     * refused here, whatever the op, before any decomposition is tried */
    if (is_product(op) && jb >= 0)
        return jag__error(JAG_ESHAPE, "%s: argument %d is a jagged nested tensor ragged in dim %d, argument %d one ragged "
                          "in dim %d; a product of jagged tensors ragged in different dims is not supported (expected "
                          "a jagged first argument not ragged in its last dim, and a dense 1-d or 2-d second one; for a "
                          "product per component, convert both to the strided layout with jag_nested_to_layout)", api, jb,
                          jag__nested_ragged_idx(args[jb].u.t), ja, jag__nested_ragged_idx(args[ja].u.t));
    if (!relabels(op) || nargs > 16) {
        if (mi >= 0)
            return jag__error(JAG_ENOTIMPL, "%s: argument %d is a jagged nested tensor whose ragged dim is %d; transpose "
                              "it back to dim 1 first (expected jagged nested tensors ragged in dim 1 here)%s", api, mi, mr,
                              is_product(op) ? "; for a product per component, use the strided layout "
                                               "(jag_nested_to_layout)" : "");
        for (int i = 0; i < nargs; i++) /* in a tensor list */
            for (int j = 0; args[i].kind == JAG_VAL_TENSORS && j < args[i].u.tensors.n; j++)
                if ((mr = jag__nested_ragged_idx(args[i].u.tensors.v[j])) > 1)
                    return jag__error(JAG_ENOTIMPL, "%s: argument %d (a tensor list): tensor %d is a jagged nested tensor "
                                      "whose ragged dim is %d; transpose it back to dim 1 first (expected jagged nested "
                                      "tensors ragged in dim 1 here)", api, i, j, mr);
        return jag__error(JAG_ENOTIMPL, "%s: not supported for jagged nested tensors whose ragged dim is %d; transpose it "
                          "back to dim 1 first", api, r);
    }
    if (is_product(op) && r == n - 1) {
        int li = ja >= 0 ? ja : mi; /* the jagged argument */
        return jag__error(JAG_ENOTIMPL, "%s: argument %d is a jagged nested tensor ragged in its last dim (%d); expected "
                          "its ragged dim before the last dim (transpose it back to dim 1 first)", api, li, r);
    }
    if (op == JAG_OP_layer_norm || op == JAG_OP_rms_norm) {
        int64_t nn;
        jag_status st = jag__arg_int(info->api_name, args, nargs, 1, "normalized_ndim", &nn);
        if (st) return st;
        if (nn > n - 1 - r)
            return jag__error(JAG_ENOTIMPL, "%s: normalizing %lld trailing dims reaches the ragged dim (%d)", info->api_name,
                              (long long)nn, r);
    }
    jag_value a[16];
    jag_tensor *temps[16];
    int64_t lists[JAG_MAX_DIMS];
    int n_temps = 0;
    jag_status st = jag__nested_canonical_args(op, args, nargs, r, n, a, temps, &n_temps, lists);
    jag_tensor *res[4] = {0};
    if (!st) st = jag__nested_dispatch(cls, op, a, nargs, res, ctx);
    for (int i = 0; i < n_temps; i++) jag_release(temps[i]);
    if (st) return st;
    bool component = op == JAG_OP_select && !jag__nested(res[0]); /* select(0, i): one component */
    int nr = jag__nested_ragged_idx_after(op, args, nargs, r, n);
    for (int k = 0; k < info->n_out && !st; k++) {
        if (component) {
            outs[k] = jag__component_outer_order(res[k], r), res[k] = NULL;
            if (!outs[k]) st = jag_last_status();
        } else if (jag__nested_ragged_idx(res[k])) {
            st = jag__nested_relabel(res[k], nr, &outs[k]);
        } else if (jag__kept_ragged_result(op, args, nargs, res[k], n)) {
            /* (B, H, j, D).sum(2, keepdim) is (B, H, 1, D), not the
             * canonical (B, 1, H, D) */
            if (!(outs[k] = jag__kept_ragged_reorder(res[k], r, true))) st = jag_last_status();
        } else {
            outs[k] = res[k], res[k] = NULL;
        }
    }
    for (int k = 0; k < info->n_out; k++) jag_release(res[k]);
    if (st)
        for (int k = 0; k < info->n_out; k++) jag_release(outs[k]), outs[k] = NULL;
    return st;
}
