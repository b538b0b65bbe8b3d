/* desugar.c — the desugar pass: every symbol that touches a subclass proxy
 * is replaced by what the class's handler (or a registered decomposition)
 * does on the inner proxies, found by running it under the tracer; subclass
 * outputs become `unflatten` at the bottom. */
#include "trace.h"

typedef struct {
    const jag_trace *src;
    jag_tensor **repl; /* by variable of src: its proxy in the new trace (a reference), or NULL */
} desugar_ctx;

static jag_tensor *subst(void *p, const jag_tensor *t) {
    desugar_ctx *c = p;
    int v = jag__trace_var(c->src, t);
    return v >= 0 && c->repl[v] ? c->repl[v] : (jag_tensor *)t;
}

static bool touches_subclass(const jag_sym *s, desugar_ctx *c, const jag_trace *t) {
    for (int k = 0; k < jag__sym_n_inputs(s); k++)
        if (subst(c, jag__sym_input(s, k))->subclass) return true;
    for (int k = 0; k < s->n_out; k++)
        if (t->vars[s->outs[k]].proxy->subclass) return true;
    return false;
}

/* Every inner tensor of subclass proxy p is a variable of d. */
static jag_status check_inner(jag_trace *d, const jag_tensor *p, const char *what) {
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta meta;
    jag_status st = jag__flatten_quiet(p, inner, &n, &meta);
    for (int k = 0; !st && k < n; k++)
        if (jag__trace_var(d, inner[k]) < 0)
            st = jag__error(JAG_ENOTIMPL, "jag_trace_desugar: the %s handler of %s made an inner tensor that no op made",
                            jag_subclass_name(p->subclass), what);
    for (int k = 0; k < n; k++) jag_release(inner[k]);
    return st;
}

/* Run symbol s (an op on subclass proxies) under the recorder: the handler's
 * ops land in d. */
static jag_status desugar_op(jag_trace *d, desugar_ctx *c, const jag_sym *s) {
    const jag_op_info *info = &jag__ops[s->op];
    jag_value a[32];
    jag_tensor *lists[4][64];
    int nl = 0;
    if (s->nargs > 32) return jag__error(JAG_ENOTIMPL, "jag_trace_desugar: too many arguments");
    for (int i = 0; i < s->nargs; i++) {
        a[i] = s->args[i];
        if (a[i].kind == JAG_VAL_TENSOR) {
            a[i].u.t = subst(c, a[i].u.t);
            int v = jag__trace_var(c->src, s->args[i].u.t);
            if (jag__trace_var(d, a[i].u.t) < 0 && !a[i].u.t->subclass && v >= 0 && jag__trace_copy_var(d, c->src, v) < 0)
                return jag_last_status();
        } else if (a[i].kind == JAG_VAL_TENSORS) {
            if (nl == 4 || a[i].u.tensors.n > 64) return jag__error(JAG_ENOTIMPL, "jag_trace_desugar: tensor list too long");
            for (int j = 0; j < a[i].u.tensors.n; j++) lists[nl][j] = subst(c, a[i].u.tensors.v[j]);
            a[i].u.tensors.v = lists[nl++];
        }
    }
    jag_tensor *outs[4] = {0};
    jag__enter();
    jag_status st = jag__leave(jag__dispatch(s->op, a, s->nargs, outs), NULL, 0);
    for (int k = 0; !st && k < s->n_out; k++) {
        if (outs[k]->subclass) st = check_inner(d, outs[k], info->api_name);
        else if (jag__trace_var(d, outs[k]) < 0)
            st = jag__error(JAG_ENOTIMPL, "jag_trace_desugar: the handler of %s made a tensor that no op made", info->api_name);
    }
    for (int k = 0; k < s->n_out; k++) {
        if (st) {
            jag_release(outs[k]);
            continue;
        }
        jag_release(c->repl[s->outs[k]]);
        c->repl[s->outs[k]] = outs[k];
    }
    return st;
}

static jag_status desugar_pass(const jag_trace *t, jag_trace **out) {
    if (!t || !out) return jag__error(JAG_EINVAL, "jag_trace_desugar: arguments must not be NULL");
    jag_trace *d = jag__trace_new();
    desugar_ctx c = {t, calloc((size_t)t->n_vars + 1, sizeof(jag_tensor *))};
    if (!d || !c.repl || !(d->inputs = calloc((size_t)t->n_inputs + 1, sizeof *d->inputs)) ||
        !(d->outputs = calloc((size_t)t->n_outputs + 1, sizeof *d->outputs))) {
        jag_trace_free(d), free(c.repl);
        return jag__error(JAG_ENOMEM, "jag_trace_desugar: out of memory");
    }
    d->next_tmp = t->next_tmp, d->next_const = t->next_const;
    jag_status st = JAG_OK;
    for (int i = 0; !st && i < t->n_inputs; i++) {
        int v = jag__trace_copy_var(d, t, t->inputs[i]);
        if (v < 0) st = jag_last_status();
        else d->inputs[d->n_inputs++] = v;
    }
    jag_recorder rec;
    jag__recorder_push(&rec, d, JAG_REC_DESUGAR);
    for (int i = 0; !st && i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        rec.backward = s->backward;
        if (s->kind == JAG_SYM_FUNCTION) continue; /* grouping for grad only */
        if (s->kind == JAG_SYM_FLATTEN && jag__trace_var(d, subst(&c, s->args[0].u.t)) < 0) {
            /* flatten of a value the handlers made: its inner tensors */
            jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
            int n = 0;
            jag_subclass_meta meta;
            st = jag__flatten_quiet(subst(&c, s->args[0].u.t), inner, &n, &meta);
            for (int k = 0; !st && k < n && k < s->n_out; k++) {
                jag_release(c.repl[s->outs[k]]);
                c.repl[s->outs[k]] = jag_retain(inner[k]);
            }
            for (int k = 0; k < n; k++) jag_release(inner[k]);
        } else if (s->kind == JAG_SYM_OP && touches_subclass(s, &c, t)) st = desugar_op(d, &c, s);
        else if (jag__trace_copy_sym(d, t, s, subst, &c) < 0) st = jag_last_status();
    }
    jag__recorder_pop(&rec);
    for (int i = 0; !st && i < t->n_outputs; i++) {
        jag_tensor *p = subst(&c, t->vars[t->outputs[i]].proxy);
        int v = jag__trace_var(d, p);
        if (v < 0 && p->subclass) { /* reassemble it: unflatten at the bottom */
            jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
            int n = 0;
            jag_subclass_meta meta = {0};
            st = jag__flatten_quiet(p, inner, &n, &meta);
            jag_value a[JAG_SUBCLASS_MAX_INNER];
            for (int k = 0; !st && k < n; k++) {
                a[k] = jag__v_tensor(inner[k]);
                int iv = jag__trace_var(t, inner[k]);
                if (jag__trace_var(d, inner[k]) < 0 && (iv < 0 || jag__trace_copy_var(d, t, iv) < 0))
                    st = jag__error(JAG_ENOTIMPL, "jag_trace_desugar: output %d has an inner tensor no op made", i);
            }
            int zero = 0, s = -1;
            if (!st) s = jag__trace_add_sym(d, JAG_SYM_UNFLATTEN, -1, a, n, &zero, 1);
            if (!st && s < 0) st = jag_last_status();
            if (!st) {
                d->syms[s].cls = p->subclass;
                d->syms[s].meta = meta;
                d->syms[s].backward = i >= t->n_fwd_outputs;
                v = jag__trace_add_var(d, p, t->vars[t->outputs[i]].name, s);
                if (v < 0) st = jag_last_status();
                else d->syms[s].outs[0] = v;
            }
            for (int k = 0; k < n; k++) jag_release(inner[k]);
        } else if (v < 0) {
            int ov = jag__trace_var(t, p);
            v = ov >= 0 ? jag__trace_copy_var(d, t, ov) : -1;
            if (v < 0) st = jag__error(JAG_ENOTIMPL, "jag_trace_desugar: output %d is a tensor no op made", i);
        }
        if (!st) d->outputs[d->n_outputs++] = v;
    }
    d->n_fwd_outputs = t->n_fwd_outputs, d->n_fwd_inputs = t->n_fwd_inputs;
    for (int v = 0; v < t->n_vars; v++) jag_release(c.repl[v]);
    free(c.repl);
    if (st) {
        jag_trace_free(d);
        return st;
    }
    *out = d;
    return JAG_OK;
}

/* The public entry: what the pass makes inside jag (handlers wrap results
 * with public calls) is never recorded in the caller's scope. */
jag_status jag_trace_desugar(const jag_trace *t, jag_trace **out) {
    jag__enter();
    return jag__leave(desugar_pass(t, out), NULL, 0);
}
