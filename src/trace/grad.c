/* grad.c — the grad pass (the backward program appended to a trace, from the
 * derivative table run on proxies under the tracer) and the split of such a
 * trace into a forward and a backward program. */
#include "trace.h"
#include "../autograd/autograd.h"
#include "../subclass/nested.h"

#include <stdio.h>

jag_status jag__trace_record_ctor(jag_trace *t, jag_tensor **p);


static jag_status zeros_like(const jag_tensor *p, jag_tensor **out) { return jag__trace_full_like(p, 0.0, out); }

static bool wants(const jag_trace *t, const jag_tensor *p) {
    int v = jag__trace_var(t, p);
    return v >= 0 && t->vars[v].requires_grad && jag_dtype_is_floating(p->dtype);
}

/* A cotangent input shaped like output o: float inner tensors fresh, the
 * others (offsets) shared with o. */
static jag_status add_cotangent(jag_trace *g, int o, jag_tensor **out) {
    const jag_tensor *p = g->vars[o].proxy;
    char name[24];
    snprintf(name, sizeof name, "g_%.20s", g->vars[o].name);
    jag_tensor *c = NULL;
    jag_status st = JAG_OK;
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0}, *cin[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta meta = {0};
    if (!p->subclass) {
        c = jag__meta_like(p);
        if (!c) return jag_last_status();
    } else {
        st = jag__flatten_quiet(p, inner, &n, &meta);
        for (int k = 0; !st && k < n; k++) {
            if (!jag_dtype_is_floating(inner[k]->dtype) && jag__trace_var(g, inner[k]) >= 0) cin[k] = jag_retain(inner[k]);
            else if (!(cin[k] = jag__meta_like(inner[k]))) st = jag_last_status();
        }
        if (!st) st = jag__proxy_unflatten(p->subclass, cin, n, &meta, &c);
    }
    int v = st ? -1 : jag__trace_add_var(g, c, name, -1);
    if (!st && v < 0) st = jag_last_status();
    if (!st) g->inputs[g->n_inputs++] = v;
    if (!st && p->subclass) {
        jag_value a[] = {jag__v_tensor(c)};
        int ov[JAG_SUBCLASS_MAX_INNER] = {0};
        int s = jag__trace_add_sym(g, JAG_SYM_FLATTEN, -1, a, 1, ov, n);
        if (s < 0) st = jag_last_status();
        for (int k = 0; !st && k < n; k++) {
            int iv = jag__trace_var(g, cin[k]);
            if (iv < 0) {
                char nm[40];
                snprintf(nm, sizeof nm, "%s_%d", name, k);
                iv = jag__trace_add_var(g, cin[k], nm, s);
            }
            if (iv < 0) st = jag_last_status();
            else g->syms[s].outs[k] = iv;
        }
        if (!st) g->syms[s].cls = p->subclass, g->syms[s].meta = meta;
    }
    for (int k = 0; k < n; k++) jag_release(inner[k]), jag_release(cin[k]);
    if (!st) *out = c;
    else jag_release(c);
    return st;
}

/* Ops through which no gradient flows: their rows are tagged NONDIFF. */
static bool no_gradient(jag_op_id op) { return op < JAG_OP_BUILTIN_COUNT && (jag__ops[op].tags & JAG_TAG_NONDIFF); }

static jag_status grad_op(jag_trace *g, const jag_sym *s, jag_tensor **gr) {
    int n_in = jag__sym_n_inputs(s);
    bool needs[JAG_GRAD_MAX_INPUTS] = {0}, any = false, have = false;
    if (n_in > JAG_GRAD_MAX_INPUTS) return jag__error(JAG_ENOTIMPL, "jag_trace_grad: an op with %d tensor inputs", n_in);
    for (int k = 0; k < n_in; k++) any |= needs[k] = wants(g, jag__sym_input(s, k));
    for (int i = 0; i < s->n_out; i++) have |= gr[s->outs[i]] != NULL;
    if (!any || !have) return JAG_OK;
    const char *name = s->kind == JAG_SYM_OP ? jag__ops[s->op].api_name : "subclass_ctor";
    jag_op_id op = s->op;
    jag_tensor *gout[4] = {0}, *gin[JAG_GRAD_MAX_INPUTS] = {0}, *outs[4];
    jag_status st = JAG_OK;
    for (int i = 0; i < s->n_out && i < 4; i++) {
        outs[i] = g->vars[s->outs[i]].proxy;
        if (gr[s->outs[i]]) gout[i] = jag_retain(gr[s->outs[i]]);
        else if (!st) st = zeros_like(outs[i], &gout[i]);
    }
    if (!st && s->kind == JAG_SYM_CTOR) {
        /* d ctor: the gradient's inner values; only the nested jagged class
         * has a rule */
        if (s->cls != jag__nested_class() || s->meta.ints[JAG_NESTED_SLOT_LAYOUT] != JAG_JAGGED)
            st = jag__error(JAG_ENOTIMPL, "jag_trace_grad: no derivative for constructing a %s tensor", jag_subclass_name(s->cls));
        else if (needs[0]) {
            jag_value a[] = {jag__v_tensor(gout[0])};
            st = jag__dispatch(JAG_OP_values, a, 1, &gin[0]);
        }
    } else if (!st && s->kind == JAG_SYM_FUNCTION) {
        jag_autograd_ctx *ctx = s->fctx->ctx;
        void jag__autograd_ctx_set_needs(jag_autograd_ctx *, const bool *, int);
        jag__autograd_ctx_set_needs(ctx, needs, n_in);
        jag__enter();
        st = jag__leave(s->fdef.backward(ctx, gout, gin), NULL, 0);
    } else if (!st) {
        jag_derivative_fn rule = op < JAG_OP_BUILTIN_COUNT ? jag__derivatives[op] : NULL;
        if (!rule && no_gradient(op)) goto done;
        if (!rule) {
            st = jag__error(JAG_ENOTIMPL, "jag_trace_grad: %s has no derivative (output %s)", name, g->vars[s->outs[0]].name);
            goto done;
        }
        jag_grad_ctx c = {op, name, s->args, s->nargs, outs, s->n_out, needs, n_in};
        jag__enter();
        st = jag__leave(rule(&c, gout, gin), NULL, 0);
    }
    for (int k = 0; !st && k < n_in; k++) {
        if (!gin[k] || !needs[k]) continue;
        int v = jag__trace_var(g, jag__sym_input(s, k));
        st = jag__grad_accumulate(&gr[v], gin[k]);
    }
done:
    for (int i = 0; i < 4; i++) jag_release(gout[i]);
    for (int k = 0; k < n_in; k++) jag_release(gin[k]);
    return st;
}

/* flatten(x): the gradients of the inner tensors become one of x's class */
static jag_status grad_flatten(jag_trace *g, const jag_sym *s, jag_tensor **gr) {
    const jag_tensor *x = s->args[0].u.t;
    if (!wants(g, x)) return JAG_OK;
    bool have = false;
    for (int k = 0; k < s->n_out; k++) have |= gr[s->outs[k]] != NULL;
    if (!have) return JAG_OK;
    /* only for nested tensors is a gradient of the inner values one of the
     * outer tensor (around the same offsets) */
    if (s->cls != jag__nested_class())
        return jag__error(JAG_ENOTIMPL, "jag_trace_grad: a gradient reaches the inner tensors of %s tensor '%s'; only nested tensors turn those into a gradient of the tensor",
                          jag_subclass_name(s->cls), g->vars[jag__trace_var(g, x)].name);
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
    jag_status st = JAG_OK;
    for (int k = 0; !st && k < s->n_out; k++) {
        jag_tensor *p = g->vars[s->outs[k]].proxy;
        if (!jag_dtype_is_floating(p->dtype)) inner[k] = jag_retain(p);
        else if (gr[s->outs[k]]) inner[k] = jag_retain(gr[s->outs[k]]);
        else st = zeros_like(p, &inner[k]);
    }
    jag_tensor *gx = NULL;
    if (!st) st = jag__proxy_unflatten(s->cls, inner, s->n_out, &s->meta, &gx);
    if (!st) st = jag__trace_record_ctor(g, &gx);
    if (!st) st = jag__grad_accumulate(&gr[jag__trace_var(g, x)], gx);
    jag_release(gx);
    for (int k = 0; k < s->n_out; k++) jag_release(inner[k]);
    return st;
}

static jag_status grad_pass(const jag_trace *t, jag_trace **out) {
    const char *op = "jag_trace_grad";
    if (!t || !out) return jag__error(JAG_EINVAL, "%s: arguments must not be NULL", op);
    bool any = false;
    for (int i = 0; i < t->n_inputs; i++) any |= t->vars[t->inputs[i]].requires_grad;
    if (!any) return jag__error(JAG_EINVAL, "%s: no input of the trace requires grad", op);
    if (t->n_fwd_outputs != t->n_outputs) return jag__error(JAG_EINVAL, "%s: the trace already has a backward", op);
    for (int i = 0; i < t->n_syms; i++)
        if (t->syms[i].kind == JAG_SYM_FUSED) return jag__error(JAG_EINVAL, "%s: run grad before fuse", op);
    jag_trace *g = NULL;
    jag_status st = jag__trace_clone(t, &g);
    if (st) return st;
    int n_orig_vars = g->n_vars, n_orig_syms = g->n_syms;
    jag_tensor **gr = calloc((size_t)n_orig_vars + 1, sizeof *gr);
    bool *covered = calloc((size_t)n_orig_syms + 1, sizeof *covered);
    int *grown_in = realloc(g->inputs, ((size_t)t->n_inputs + (size_t)t->n_outputs + 1) * sizeof *grown_in);
    if (grown_in) g->inputs = grown_in;
    int *grown_out = realloc(g->outputs, ((size_t)t->n_outputs + (size_t)t->n_inputs + 1) * sizeof *grown_out);
    if (grown_out) g->outputs = grown_out;
    if (!gr || !covered || !grown_in || !grown_out) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    jag_recorder rec;
    jag__recorder_push(&rec, g, JAG_REC_RECORD);
    rec.backward = true;
    bool prev = jag_set_grad_enabled(false);
    /* cotangents: one input per output that requires grad */
    for (int i = 0; !st && i < t->n_outputs; i++) {
        int o = t->outputs[i];
        if (!t->vars[o].requires_grad) continue;
        jag_tensor *c = NULL;
        st = add_cotangent(g, o, &c);
        if (!st) st = jag__grad_accumulate(&gr[o], c);
        jag_release(c);
    }
    for (int i = n_orig_syms - 1; !st && i >= 0; i--) {
        jag_sym copy = g->syms[i]; /* rules append symbols: g->syms may move */
        const jag_sym *s = &copy;
        if (covered[i]) continue;
        switch (s->kind) {
        case JAG_SYM_FUNCTION:
            for (int k = s->begin; k < s->end && k < n_orig_syms; k++) covered[k] = true;
            /* fallthrough */
        case JAG_SYM_OP:
        case JAG_SYM_CTOR: st = grad_op(g, s, gr); break;
        case JAG_SYM_FLATTEN: st = grad_flatten(g, s, gr); break;
        case JAG_SYM_UNFLATTEN: st = jag__error(JAG_ENOTIMPL, "%s: run grad before desugar", op); break;
        case JAG_SYM_FUSED: break;
        }
    }
    /* outputs: the gradient of every input that requires grad */
    for (int i = 0; !st && i < t->n_inputs; i++) {
        int x = t->inputs[i];
        if (!t->vars[x].requires_grad) continue;
        jag_tensor *gx = NULL;
        if (gr[x]) gx = jag_retain(gr[x]);
        else st = zeros_like(g->vars[x].proxy, &gx);
        int v = st ? -1 : jag__trace_var(g, gx);
        if (!st && v < 0) st = jag__error(JAG_EINTERNAL, "%s: the gradient of input %d is not a variable", op, i);
        bool taken = false;
        for (int k = 0; !st && k < g->n_outputs; k++) taken |= g->outputs[k] == v;
        if (!st && g->vars[v].def >= n_orig_syms && !taken)
            snprintf(g->vars[v].name, sizeof g->vars[v].name, "grad_%.18s", t->vars[x].name);
        if (!st) g->outputs[g->n_outputs++] = v;
        jag_release(gx);
    }
    jag_set_grad_enabled(prev);
    jag__recorder_pop(&rec);
    for (int v = 0; v < n_orig_vars && gr; v++) jag_release(gr[v]);
    free(gr), free(covered);
    if (st) {
        jag_trace_free(g);
        return st;
    }
    g->n_fwd_outputs = t->n_outputs;
    g->n_fwd_inputs = t->n_inputs;
    *out = g;
    return JAG_OK;
}

/* The public entry: what the pass makes inside jag (handlers wrap results
 * with public calls) is never recorded in the caller's scope. */
jag_status jag_trace_grad(const jag_trace *t, jag_trace **out) {
    jag__enter();
    return jag__leave(grad_pass(t, out), NULL, 0);
}

/* ---- split -------------------------------------------------------------------------- */

jag_status jag__trace_split(const jag_trace *t, jag_trace **fwd, jag_trace **bwd, int *n_saved) {
    const char *op = "jag_trace_compile";
    jag_trace *f = jag__trace_new(), *b = jag__trace_new();
    bool *saved = calloc((size_t)t->n_vars + 1, sizeof *saved), *fwd_val = calloc((size_t)t->n_vars + 1, sizeof *fwd_val);
    jag_status st = JAG_OK;
    int ns = 0;
    if (!f || !b || !saved || !fwd_val || !(f->inputs = calloc((size_t)t->n_inputs + 1, sizeof(int))) ||
        !(f->outputs = calloc((size_t)t->n_vars + 1, sizeof(int))) || !(b->inputs = calloc((size_t)t->n_vars + 1, sizeof(int))) ||
        !(b->outputs = calloc((size_t)t->n_outputs + 1, sizeof(int))))
        st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    /* forward values: inputs, and what forward symbols define */
    for (int i = 0; !st && i < t->n_fwd_inputs; i++) fwd_val[t->inputs[i]] = true;
    for (int i = 0; !st && i < t->n_syms; i++)
        if (!t->syms[i].backward)
            for (int k = 0; k < t->syms[i].n_out; k++) fwd_val[t->syms[i].outs[k]] = true;
    for (int i = 0; !st && i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        if (!s->backward) continue;
        for (int k = 0; k < jag__sym_n_inputs(s); k++) {
            int v = jag__trace_var(t, jag__sym_input(s, k));
            if (v >= 0 && fwd_val[v] && !t->vars[v].constant) saved[v] = true;
        }
        for (int k = 0; k < s->n_out; k++) /* a flatten of a cotangent may list a forward value */
            if (fwd_val[s->outs[k]]) saved[s->outs[k]] = true;
    }
    for (int i = t->n_fwd_outputs; !st && i < t->n_outputs; i++)
        if (fwd_val[t->outputs[i]]) saved[t->outputs[i]] = true;
    if (!st) {
        f->next_tmp = b->next_tmp = t->next_tmp, f->next_const = b->next_const = t->next_const;
        for (int i = 0; !st && i < t->n_fwd_inputs; i++) {
            int v = jag__trace_copy_var(f, t, t->inputs[i]);
            if (v < 0) st = jag_last_status();
            else f->inputs[f->n_inputs++] = v;
        }
        for (int i = 0; !st && i < t->n_syms; i++)
            if (!t->syms[i].backward && jag__trace_copy_sym(f, t, &t->syms[i], NULL, NULL) < 0) st = jag_last_status();
        for (int i = 0; !st && i < t->n_fwd_outputs; i++) f->outputs[f->n_outputs++] = jag__trace_var(f, t->vars[t->outputs[i]].proxy);
        for (int v = 0; !st && v < t->n_vars; v++)
            if (saved[v]) {
                int fv = jag__trace_var(f, t->vars[v].proxy);
                if (fv < 0) fv = jag__trace_copy_var(f, t, v);
                if (fv < 0) st = jag_last_status();
                else f->outputs[f->n_outputs++] = fv, ns++;
            }
        f->n_fwd_outputs = f->n_outputs, f->n_fwd_inputs = f->n_inputs;
    }
    for (int v = 0; !st && v < t->n_vars; v++)
        if (saved[v]) {
            int bv = jag__trace_copy_var(b, t, v);
            if (bv < 0) st = jag_last_status();
            else b->inputs[b->n_inputs++] = bv;
        }
    for (int i = t->n_fwd_inputs; !st && i < t->n_inputs; i++) {
        int v = jag__trace_copy_var(b, t, t->inputs[i]);
        if (v < 0) st = jag_last_status();
        else b->inputs[b->n_inputs++] = v;
    }
    for (int i = 0; !st && i < t->n_syms; i++)
        if (t->syms[i].backward && jag__trace_copy_sym(b, t, &t->syms[i], NULL, NULL) < 0) st = jag_last_status();
    for (int i = t->n_fwd_outputs; !st && i < t->n_outputs; i++) {
        int v = jag__trace_var(b, t->vars[t->outputs[i]].proxy);
        if (v < 0) v = jag__trace_copy_var(b, t, t->outputs[i]);
        if (v < 0) st = jag_last_status();
        else b->outputs[b->n_outputs++] = v;
    }
    b->n_fwd_outputs = b->n_outputs, b->n_fwd_inputs = b->n_inputs;
    free(saved), free(fwd_val);
    if (st) {
        jag_trace_free(f), jag_trace_free(b);
        return st;
    }
    *fwd = f, *bwd = b, *n_saved = ns;
    return JAG_OK;
}
