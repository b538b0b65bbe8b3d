/* derivatives_nested.c — derivative rules of the bridge between a jagged
 * nested tensor and its values (PyTorch's prototype's ViewBufferFromJagged, both ways).
 * They need the nested tensor's internals, so they live apart from the
 * rules written with public ops only. */
#include "autograd.h"
#include "../subclass/nested.h"

/* values(nt): the gradient of nt is the values' gradient wrapped with nt's
 * structure — the same offsets object. */
jag_status jag__d_values(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    nested_state *s = jag__nested(c->args[0].u.t);
    if (!s) return jag__error(JAG_EINTERNAL, "%s: backward without a nested input", c->name);
    return jag__nested_rewrap_jagged(s, grad_out[0], &grad_in[0]);
}

/* nested_from_jagged(values, offsets, lengths): the values' gradient is the
 * packed values of the nested gradient. */
jag_status jag__d_nested_from_jagged(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    if (!c->needs[0]) return JAG_OK;
    nested_state *g = jag__nested(grad_out[0]);
    if (!g || g->layout != JAG_JAGGED)
        return jag__error(JAG_EINTERNAL, "%s: backward got a gradient that is not a jagged nested tensor", c->name);
    const jag_tensor *v = g->values;
    grad_in[0] = jag__tensor_view(v, v->sizes, v->strides, v->ndim, v->offset);
    return grad_in[0] ? JAG_OK : jag_last_status();
}

/* to_padded(nt): each component's gradient is its part of the padded
 * gradient; padding gets none. The result has nt's structure (zeros_like
 * keeps the offsets object or the size tables), holes included (zero). */
jag_status jag__d_to_padded(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    const jag_tensor *x = c->args[0].u.t, *g = grad_out[0];
    nested_state *s = jag__nested(x);
    if (!s) return jag__error(JAG_EINTERNAL, "%s: backward without a nested input", c->name);
    jag_tensor *z = NULL;
    jag_status st = jag_zeros_like(x, &z);
    if (st) return st;
    nested_state *zs = jag__nested(z);
    jag_tensor **comps = calloc((size_t)(zs->batch ? zs->batch : 1), sizeof *comps);
    if (!comps) {
        jag_release(z);
        return jag__error(JAG_ENOMEM, "%s: out of memory", c->name);
    }
    jag_tensor *gc = NULL;
    st = jag_contiguous(g, &gc);
    if (!st) st = jag__nested_unbind(zs, comps);
    for (int64_t b = 0; !st && b < zs->batch; b++) {
        if (jag_numel(comps[b]) == 0) continue;
        jag_tensor *src = jag__tensor_view(gc, comps[b]->sizes, gc->strides + 1, gc->ndim - 1, gc->offset + b * gc->strides[0]);
        if (!src) {
            st = jag_last_status();
            break;
        }
        st = jag__copy_part(c->name, comps[b], src);
        jag_release(src);
    }
    if (!st)
        for (int64_t b = 0; b < zs->batch; b++) jag_release(comps[b]);
    free(comps);
    jag_release(gc);
    if (st) {
        jag_release(z);
        return st;
    }
    grad_in[0] = z;
    return JAG_OK;
}

/* from_padded(padded, lengths): the padded gradient is the nested gradient
 * padded with zeros to padded's shape. */
jag_status jag__d_from_padded(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    if (!c->needs[0]) return JAG_OK;
    const jag_tensor *padded = c->args[0].u.t;
    return jag__nested_to_padded(grad_out[0], 0.0, padded->sizes, padded->ndim, &grad_in[0]);
}

/* ---- along the ragged dim of a jagged tensor ----------------------------- */

static jag_status rewrap_grad(nested_state *s, jag_status st, jag_tensor *gv, jag_tensor **grad_in) {
    if (st) {
        jag_release(gv);
        return st;
    }
    return jag__nested_rewrap_jagged_taking(s, gv, &grad_in[0]);
}

/* rows [r0, r0 + n) of src's values copied into the same rows of dst's */
static jag_status copy_rows(const char *op, const jag_tensor *dst_values, const jag_tensor *src_values, int64_t r0,
                            int64_t n) {
    if (n <= 0) return JAG_OK;
    const jag_tensor *d = dst_values, *s = src_values;
    int64_t sz[JAG_MAX_DIMS];
    memcpy(sz, d->sizes, (size_t)d->ndim * sizeof *sz);
    sz[0] = n;
    jag_tensor *dv = jag__tensor_view(d, sz, d->strides, d->ndim, d->offset + r0 * d->strides[0]);
    jag_tensor *sv = jag__tensor_view(s, sz, s->strides, s->ndim, s->offset + r0 * s->strides[0]);
    jag_status st = dv && sv ? jag__copy_part(op, dv, sv) : jag_last_status();
    jag_release(dv), jag_release(sv);
    return st;
}

/* components of a nested tensor as views; NULL on failure (status set) */
static jag_tensor **comps_view(const jag_tensor *t) {
    nested_state *s = jag__nested(t);
    jag_tensor **v = calloc((size_t)(s->batch ? s->batch : 1), sizeof *v);
    if (!v) {
        jag__error(JAG_ENOMEM, "autograd: out of memory");
        return NULL;
    }
    if (jag__nested_unbind(s, v)) {
        free(v);
        return NULL;
    }
    return v;
}

static void comps_free(jag_tensor **v, int64_t n) {
    if (!v) return;
    for (int64_t b = 0; b < n; b++) jag_release(v[b]);
    free(v);
}

/* cat of jagged tensors (nested_join.c): along the batch dim each input
 * gets its run of the gradient's components; along a dense dim its slice of
 * the gradient's values */
static jag_status cat_grad(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    jag_tensor *const *xs = c->args[0].u.tensors.v;
    int n = c->args[0].u.tensors.n;
    nested_state *gs = jag__nested(grad_out[0]);
    if (!gs || gs->layout != JAG_JAGGED) return jag__error(JAG_EINTERNAL, "%s: backward got a gradient that is not jagged", c->name);
    int d = (int)(c->args[1].u.i < 0 ? c->args[1].u.i + xs[0]->ndim : c->args[1].u.i);
    jag_status st = JAG_OK;
    jag_tensor **gc = d == 0 ? comps_view(grad_out[0]) : NULL;
    if (d == 0 && !gc) return jag_last_status();
    int64_t at = 0, col = 0;
    for (int i = 0; i < n && !st; i++) {
        nested_state *s = jag__nested(xs[i]);
        int64_t width = d == 0 ? 0 : xs[i]->sizes[d];
        if (c->needs[i]) {
            if (d == 0) { /* zeros shaped like x_i, its components copied in */
                jag_tensor *z = NULL, **zc = NULL;
                st = jag_zeros_like(xs[i], &z);
                if (!st && !(zc = comps_view(z))) st = jag_last_status();
                for (int64_t b = 0; !st && b < s->batch; b++) st = jag_copy_(zc[b], gc[at + b]);
                comps_free(zc, s->batch);
                if (st) jag_release(z);
                else grad_in[i] = z;
            } else {
                jag_tensor *nv = NULL, *cv = NULL;
                jag_value a[] = {jag__v_tensor(gs->values), jag__v_int(d - 1), jag__v_int(col), jag__v_int(width)};
                st = jag__dispatch(JAG_OP_narrow, a, 4, &nv);
                jag_value b[] = {jag__v_tensor(nv)};
                if (!st) st = jag__dispatch(JAG_OP_clone, b, 1, &cv);
                if (!st) st = jag__nested_rewrap_jagged(s, cv, &grad_in[i]);
                jag_release(nv), jag_release(cv);
            }
        }
        at += s->batch, col += width;
    }
    comps_free(gc, gs->batch);
    return st;
}

/* index_select along the batch dim: component k of the gradient goes back
 * to component index[k], accumulating repeats */
static jag_status index_select_batch_grad(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    const jag_tensor *x = c->args[0].u.t, *ix = c->args[2].u.t;
    jag_tensor *z = NULL, **zc = NULL, **gc = NULL;
    jag_status st = jag_zeros_like(x, &z);
    if (!st && !(zc = comps_view(z))) st = jag_last_status();
    if (!st && !(gc = comps_view(grad_out[0]))) st = jag_last_status();
    int64_t n = ix->sizes[0];
    for (int64_t k = 0; k < n && !st; k++) {
        const char *p = (const char *)jag__ptr(ix) + k * ix->strides[0] * (int64_t)jag_dtype_size(ix->dtype);
        int64_t b = ix->dtype == JAG_INT64 ? *(const int64_t *)p : *(const int32_t *)p;
        jag_tensor *sum = NULL;
        st = jag_add(zc[b], gc[k], 1.0, &sum);
        if (!st) st = jag_copy_(zc[b], sum);
        jag_release(sum);
    }
    comps_free(zc, jag__nested(x)->batch);
    comps_free(gc, n);
    if (st) {
        jag_release(z);
        return st;
    }
    grad_in[0] = z;
    return JAG_OK;
}

/* embedding with nested indices, select of a component, narrow along the
 * ragged dim (see nested_ops.c); cat, index_select along the batch dim and
 * unsqueeze (nested_join.c) */
static jag_status jagged_structural(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in,
                                    bool *handled) {
    if (c->op == JAG_OP_cat && c->args[0].kind == JAG_VAL_TENSORS && c->args[0].u.tensors.n > 0 &&
        jag__nested(c->args[0].u.tensors.v[0])) {
        *handled = true;
        return cat_grad(c, grad_out, grad_in);
    }
    if ((c->op == JAG_OP_index_select || c->op == JAG_OP_unsqueeze) && c->args[0].kind == JAG_VAL_TENSOR &&
        jag_tensor_layout(c->args[0].u.t) == JAG_JAGGED) {
        const jag_tensor *x = c->args[0].u.t;
        if (c->op == JAG_OP_index_select && (c->args[1].u.i == 0 || c->args[1].u.i == -x->ndim)) {
            *handled = true;
            return c->needs[0] ? index_select_batch_grad(c, grad_out, grad_in) : JAG_OK;
        }
        if (c->op == JAG_OP_unsqueeze) { /* the values' gradient viewed back */
            *handled = true;
            if (!c->needs[0]) return JAG_OK;
            nested_state *s = jag__nested(x), *gs = jag__nested(grad_out[0]);
            jag_tensor *r = NULL;
            jag_status st = jag_reshape(gs->values, s->values->sizes, s->values->ndim, &r);
            if (!st) st = jag__nested_rewrap_jagged(s, r, &grad_in[0]);
            jag_release(r);
            return st;
        }
    }
    if (c->op == JAG_OP_embedding) {
        nested_state *ix = c->args[1].kind == JAG_VAL_TENSOR ? jag__nested(c->args[1].u.t) : NULL;
        nested_state *g = jag__nested(grad_out[0]);
        if (!ix || !g) return JAG_OK;
        *handled = true;
        if (!c->needs[0]) return JAG_OK;
        jag_value a[2] = {c->args[0], jag__v_tensor(ix->values)};
        bool needs[2] = {true, false};
        jag_grad_ctx cc = *c;
        cc.args = a, cc.needs = needs;
        jag_tensor *go[1] = {g->values}, *gi[2] = {0};
        jag_status st = jag__derivatives[JAG_OP_embedding](&cc, go, gi);
        jag_release(gi[1]);
        if (!st) grad_in[0] = gi[0];
        return st;
    }
    const jag_tensor *x = c->args[0].kind == JAG_VAL_TENSOR ? c->args[0].u.t : NULL;
    nested_state *s = jag__nested(x);
    if (!s || s->layout != JAG_JAGGED) return JAG_OK;
    bool sel = c->op == JAG_OP_select && c->args[1].kind == JAG_VAL_INT && (c->args[1].u.i == 0 || c->args[1].u.i == -x->ndim);
    bool nar = c->op == JAG_OP_narrow && jag__is_ragged_dim(&c->args[1], x->ndim);
    if (!sel && !nar) return JAG_OK;
    *handled = true;
    if (!c->needs[0]) return JAG_OK;
    jag_tensor *z = NULL;
    jag_status st = jag_zeros_like(x, &z);
    if (st) return st;
    nested_state *zs = jag__nested(z);
    const int64_t *o = (const int64_t *)jag__ptr(s->offsets);
    if (sel) { /* g is the component: its rows go back to where it was read */
        int64_t i = c->args[2].u.i < 0 ? c->args[2].u.i + s->batch : c->args[2].u.i;
        const jag_tensor *g = grad_out[0];
        int64_t n = g->ndim ? g->sizes[0] : 0;
        jag_tensor *gv = jag__tensor_view(zs->values, g->sizes, zs->values->strides, g->ndim,
                                          zs->values->offset + (n ? o[i] * zs->values->strides[0] : 0));
        if (!gv) st = jag_last_status();
        else st = jag__copy_part(c->name, gv, g), jag_release(gv);
    } else { /* the output viewed the same values rows: those rows get g */
        nested_state *os = jag__nested(c->outputs[0]), *gs = jag__nested(grad_out[0]);
        if (!os || !gs) st = jag__error(JAG_EINTERNAL, "%s: backward without a nested output or gradient", c->name);
        const int64_t *no = st ? NULL : (const int64_t *)jag__ptr(os->offsets);
        const int64_t *nl = st ? NULL : (const int64_t *)jag__ptr(os->lengths);
        for (int64_t b = 0; !st && b < s->batch; b++) st = copy_rows(c->name, zs->values, gs->values, no[b], nl[b]);
    }
    if (st) {
        jag_release(z);
        return st;
    }
    grad_in[0] = z;
    return JAG_OK;
}

/* matmul of a jagged a (B, j, D) by a dense batch of matrices w (B, D, E):
 * per component, ga_b = g_b w_b^T (the same op: g @ w^T, nested by dense
 * (B, E, D)) and gw_b = a_b^T g_b, summed over the component's rows, which
 * is a_pad^T g_pad with both padded with zeros to the longest component
 * (padding rows add nothing). Other matmuls are not handled here. */
static jag_status matmul_per_item_grad(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in,
                                       bool *handled) {
    const jag_tensor *a = c->args[0].kind == JAG_VAL_TENSOR ? c->args[0].u.t : NULL;
    const jag_tensor *w = c->nargs > 1 && c->args[1].kind == JAG_VAL_TENSOR ? c->args[1].u.t : NULL;
    nested_state *s = jag__nested(a);
    if (!s || s->layout != JAG_JAGGED || !w || jag__nested(w) || a->ndim != 3 || w->ndim != 3) return JAG_OK;
    *handled = true;
    jag_status st = JAG_OK;
    jag_tensor *wt = NULL, *ap = NULL, *apt = NULL, *gp = NULL;
    if (c->needs[0] && !(st = jag_transpose(w, 1, 2, &wt))) st = jag_matmul(grad_out[0], wt, &grad_in[0]);
    if (!st && c->needs[1] && !(st = jag_nested_to_padded(a, 0.0, NULL, 0, &ap)) && !(st = jag_transpose(ap, 1, 2, &apt)) &&
        !(st = jag_nested_to_padded(grad_out[0], 0.0, NULL, 0, &gp)))
        st = jag_matmul(apt, gp, &grad_in[1]);
    jag_release(wt), jag_release(ap), jag_release(apt), jag_release(gp);
    return st;
}

jag_status jag__d_jagged_ragged(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in,
                                bool *handled) {
    *handled = false;
    jag_status sst = jagged_structural(c, grad_out, grad_in, handled);
    if (*handled || sst) return sst;
    if (c->op == JAG_OP_matmul) return matmul_per_item_grad(c, grad_out, grad_in, handled);
    const jag_tensor *x = c->args[0].kind == JAG_VAL_TENSOR ? c->args[0].u.t : NULL;
    nested_state *s = jag__nested(x);
    if (!s || s->layout != JAG_JAGGED || !c->needs[0]) return JAG_OK;
    int on = x->ndim;
    jag_status st = JAG_OK;
    jag_tensor *gv = NULL;
    switch (c->op) {
    case JAG_OP_sum:
    case JAG_OP_mean:
    case JAG_OP_amax:
    case JAG_OP_amin:
    case JAG_OP_logsumexp:
    case JAG_OP_var:
    case JAG_OP_std:
    case JAG_OP_max_dim:
    case JAG_OP_min_dim: {
        jag_segment_spec sp;
        int r = jag__ragged_reduction(c->op, c->args, c->nargs, on, &sp);
        if (r < 0) return jag_last_status();
        if (r == 0) return JAG_OK;
        *handled = true;
        bool idx = sp.kind == JAG_SEG_MAX || sp.kind == JAG_SEG_MIN;
        if (sp.kind < JAG_SEG_MAX || idx) /* a plain op on the inner tensors: traceable */
            st = jag__ragged_reduce_backward(s, &sp, c->outputs[0], idx ? c->outputs[1] : NULL, grad_out[0], &gv);
        else
            st = jag__error(JAG_EINTERNAL, "%s: no gradient for ragged reduction kind %d", c->name, (int)sp.kind);
        return rewrap_grad(s, st, gv, grad_in);
    }
    case JAG_OP_softmax:
    case JAG_OP_log_softmax: {
        if (!jag__is_ragged_dim(&c->args[1], on)) return JAG_OK;
        *handled = true;
        /* the ragged_softmax op's rule on the inner tensors: a plain op, traceable */
        nested_state *ys = jag__nested(c->outputs[0]), *gs = jag__nested(grad_out[0]);
        if (!ys || !gs) return jag__error(JAG_EINTERNAL, "%s: backward without nested output or gradient", c->name);
        st = jag__ragged_softmax_backward(s, ys->values, gs->values, c->op == JAG_OP_log_softmax, &gv);
        return rewrap_grad(s, st, gv, grad_in);
    }
    default: return JAG_OK;
    }
}

/* ---- embedding_bag --------------------------------------------------------- */

jag_status jag__embedding_bag_backward(const char *op, const jag_value *args, int nargs, const jag_tensor *y,
                                       const jag_tensor *g, jag_tensor **grad_w, jag_tensor **grad_psw);

/* (weight, indices, offsets, mode, per_sample_weights): the weight's rows
 * used get the bags' gradients; each per-sample weight the dot product of
 * its row with its bag's gradient. Nested indices run as the forward did. */
jag_status jag__d_embedding_bag(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    jag_value a[5];
    jag_tensor *temps[3] = {0};
    bool nested = c->args[1].kind == JAG_VAL_TENSOR && jag__nested(c->args[1].u.t);
    jag_status st = JAG_OK;
    if (nested) st = jag__nested_bag_args(c->name, c->args, c->nargs, a, temps);
    else
        for (int i = 0; i < 5; i++) a[i] = c->args[i];
    int k_psw = 1 + (c->args[2].kind == JAG_VAL_TENSOR) + 1; /* tensor inputs: weight, indices, [offsets], psw */
    bool want_psw = c->args[4].kind == JAG_VAL_TENSOR && k_psw < c->n_inputs && c->needs[k_psw];
    jag_tensor *gw = NULL, *gp = NULL;
    if (!st) st = jag__embedding_bag_backward(c->name, a, 5, c->outputs[0], grad_out[0], c->needs[0] ? &gw : NULL,
                                              want_psw ? &gp : NULL);
    if (!st && gp && jag__nested(c->args[4].u.t)) { /* back to the weights' structure */
        nested_state *ps = jag__nested(c->args[4].u.t);
        jag_tensor *r = NULL;
        if (ps->lengths || jag__nested(temps[1]) != ps)
            st = jag__error(JAG_ENOTIMPL, "%s: no gradient for nested per_sample_weights with holes or gaps", c->name);
        else st = jag__nested_rewrap_jagged(ps, gp, &r);
        jag_release(gp);
        gp = r;
    }
    for (int i = 0; i < 3; i++) jag_release(temps[i]);
    if (st) {
        jag_release(gw), jag_release(gp);
        return st;
    }
    grad_in[0] = gw;
    if (want_psw) grad_in[k_psw] = gp;
    return JAG_OK;
}

/* ragged_reduce (values, offsets, lengths, kind, mask, correction, keepdim):
 * the values' gradient is ragged_reduce_backward; offsets and lengths are
 * indices (no gradient). */
jag_status jag__d_ragged_reduce(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    if (!c->needs[0]) return JAG_OK;
    jag_value a[10] = {c->args[0], c->args[1], c->args[2], jag__v_tensor(c->outputs[0]), jag__v_tensor(NULL),
                       jag__v_tensor(grad_out[0]), c->args[3], c->args[4], c->args[5], c->args[6]};
    return jag__dispatch(JAG_OP_ragged_reduce_backward, a, 10, &grad_in[0]);
}

/* ragged_reduce_indices (values, offsets, lengths, kind, keepdim): the
 * values' gradient goes to the winning rows, ragged_reduce_backward with
 * the forward's indices (as torch's max(dim) backward scatters at them). */
jag_status jag__d_ragged_reduce_indices(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    if (!c->needs[0] || !grad_out[0]) return JAG_OK;
    jag_value a[10] = {c->args[0], c->args[1], c->args[2], jag__v_tensor(NULL), jag__v_tensor(c->outputs[1]),
                       jag__v_tensor(grad_out[0]), c->args[3], jag__v_int(0), jag__v_int(0), c->args[4]};
    return jag__dispatch(JAG_OP_ragged_reduce_backward, a, 10, &grad_in[0]);
}

/* ragged_softmax (values, offsets, lengths, log): the values' gradient is
 * ragged_softmax_backward from the output, y (g - sum_j g y) per component
 * and column (log: g - exp(y) sum_j g); offsets and lengths are indices (no
 * gradient). */
jag_status jag__d_ragged_softmax(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    if (!c->needs[0]) return JAG_OK;
    jag_value a[5] = {jag__v_tensor(c->outputs[0]), c->args[1], c->args[2], jag__v_tensor(grad_out[0]), c->args[3]};
    return jag__dispatch(JAG_OP_ragged_softmax_backward, a, 5, &grad_in[0]);
}

/* ---- jagged tensors whose ragged dim is not 1 (see ragged_idx.c) -------- */

jag_status jag__canonical_grad_ctx(const jag_grad_ctx *c, jag_tensor *const *go, jag_canonical_ctx *cc) {
    memset(cc, 0, sizeof *cc);
    const jag_tensor *lead = NULL;
    for (int i = 0; i < c->nargs && !lead; i++)
        if (c->args[i].kind == JAG_VAL_TENSOR && jag__nested_ragged_idx(c->args[i].u.t)) lead = c->args[i].u.t;
    JAG_ASSERT(lead && c->nargs <= 16 && c->n_out <= 4);
    int r = jag__nested_ragged_idx(lead), n = lead->ndim;
    jag_status st = jag__nested_canonical_args(c->op, c->args, c->nargs, r, n, cc->args, cc->temps, &cc->n_temps, cc->lists);
    bool component = c->op == JAG_OP_select && c->n_out == 1 && !jag__nested(c->outputs[0]);
    for (int k = 0; k < c->n_out && !st; k++) {
        jag_tensor *o = NULL, *g = NULL;
        if (jag__nested_ragged_idx(c->outputs[k]) > 0) {
            st = jag__nested_relabel(c->outputs[k], 1, &o);
            if (!st && go[k]) st = jag__nested_relabel(go[k], 1, &g);
        } else if (component) { /* the component back in canonical order */
            o = jag__component_canonical_order(c->outputs[k], r);
            g = go[k] ? jag__component_canonical_order(go[k], r) : NULL;
            if (!o || (go[k] && !g)) st = jag_last_status();
        } else if (jag__kept_ragged_result(c->op, c->args, c->nargs, c->outputs[k], n)) { /* back to canonical */
            o = jag__kept_ragged_reorder(c->outputs[k], r, false);
            g = go[k] ? jag__kept_ragged_reorder(go[k], r, false) : NULL;
            if (!o || (go[k] && !g)) st = jag_last_status();
        } else {
            o = jag_retain(c->outputs[k]), g = jag_retain(go[k]);
        }
        cc->outputs[k] = o, cc->go[k] = g;
    }
    cc->ctx = *c;
    cc->ctx.args = cc->args, cc->ctx.outputs = cc->outputs;
    if (st) jag__canonical_grad_ctx_free(cc);
    return st;
}

void jag__canonical_grad_ctx_free(jag_canonical_ctx *cc) {
    for (int i = 0; i < cc->n_temps; i++) jag_release(cc->temps[i]);
    for (int k = 0; k < 4; k++) jag_release(cc->outputs[k]), jag_release(cc->go[k]);
    memset(cc, 0, sizeof *cc);
}

bool jag__grad_ctx_moved(const jag_grad_ctx *c) {
    for (int i = 0; i < c->nargs; i++) {
        if (c->args[i].kind == JAG_VAL_TENSOR && jag__nested_ragged_idx(c->args[i].u.t) > 1) return true;
        if (c->args[i].kind == JAG_VAL_TENSORS)
            for (int j = 0; j < c->args[i].u.tensors.n; j++)
                if (jag__nested_ragged_idx(c->args[i].u.tensors.v[j]) > 1) return true;
    }
    for (int k = 0; k < c->n_out; k++)
        if (jag__nested_ragged_idx(c->outputs[k]) > 1) return true;
    return false;
}

jag_status jag__grad_on_canonical(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi,
                                  jag_status (*fn)(const jag_grad_ctx *, jag_tensor *const *, jag_tensor **, void *),
                                  void *data) {
    jag_canonical_ctx cc;
    jag_status st = jag__canonical_grad_ctx(c, go, &cc);
    if (st) return st;
    jag_tensor *cg[JAG_GRAD_MAX_INPUTS] = {0};
    st = fn(&cc.ctx, cc.go, cg, data);
    jag__canonical_grad_ctx_free(&cc);
    for (int k = 0; k < c->n_inputs; k++) {
        int r = jag__nested_ragged_idx(jag__grad_input(c->args, c->nargs, k));
        gi[k] = NULL;
        if (st || !cg[k]) continue;
        if (r > 1 && jag__nested(cg[k])) st = jag__nested_relabel(cg[k], r, &gi[k]);
        else gi[k] = jag_retain(cg[k]);
    }
    for (int k = 0; k < c->n_inputs; k++) jag_release(cg[k]);
    if (st)
        for (int k = 0; k < c->n_inputs; k++) jag_release(gi[k]), gi[k] = NULL;
    return st;
}
