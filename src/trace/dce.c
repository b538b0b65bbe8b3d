/* dce.c — dead code elimination: `flatten` of a value that unflatten or
 * subclass_ctor built in the trace is replaced by that symbol's inner
 * tensors, then every symbol no output needs is dropped (a ctor whose result
 * was only flattened goes with it). */
#include "trace.h"

typedef struct {
    const jag_trace *src;
    jag_tensor **repl; /* by variable: replacement proxy (borrowed) */
} dce_ctx;

static jag_tensor *subst(void *p, const jag_tensor *t) {
    dce_ctx *c = p;
    for (int guard = 0; guard < 64; guard++) { /* chains of replacements */
        int v = jag__trace_var(c->src, t);
        if (v < 0 || !c->repl[v]) break;
        t = c->repl[v];
    }
    return (jag_tensor *)t;
}

static jag_status dce_pass(const jag_trace *t, jag_trace **out) {
    if (!t || !out) return jag__error(JAG_EINVAL, "jag_trace_dce: arguments must not be NULL");
    dce_ctx c = {t, calloc((size_t)t->n_vars + 1, sizeof(jag_tensor *))};
    bool *live_var = calloc((size_t)t->n_vars + 1, sizeof *live_var);
    bool *live_sym = calloc((size_t)t->n_syms + 1, sizeof *live_sym);
    jag_trace *d = jag__trace_new();
    jag_status st = JAG_OK;
    if (!c.repl || !live_var || !live_sym || !d || !(d->inputs = calloc((size_t)t->n_inputs + 1, sizeof *d->inputs)) ||
        !(d->outputs = calloc((size_t)t->n_outputs + 1, sizeof *d->outputs)))
        st = jag__error(JAG_ENOMEM, "jag_trace_dce: out of memory");
    /* flatten(unflatten(x)) and flatten(subclass_ctor(x)): the inner tensors */
    bool *dropped = calloc((size_t)t->n_syms + 1, sizeof *dropped);
    if (!st && !dropped) st = jag__error(JAG_ENOMEM, "jag_trace_dce: out of memory");
    for (int i = 0; !st && i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        if (s->kind != JAG_SYM_FLATTEN) continue;
        int pv = jag__trace_var(t, s->args[0].u.t);
        int def = pv >= 0 ? t->vars[pv].def : -1;
        if (def < 0) continue;
        const jag_sym *u = &t->syms[def];
        if ((u->kind != JAG_SYM_UNFLATTEN && u->kind != JAG_SYM_CTOR) || u->nargs != s->n_out) continue;
        for (int k = 0; k < s->n_out; k++) c.repl[s->outs[k]] = (jag_tensor *)u->args[k].u.t;
        dropped[i] = true;
    }
    /* liveness, backwards from the outputs */
    for (int i = 0; !st && i < t->n_outputs; i++) live_var[jag__trace_var(t, subst(&c, t->vars[t->outputs[i]].proxy))] = true;
    for (int i = t->n_syms - 1; !st && i >= 0; i--) {
        const jag_sym *s = &t->syms[i];
        if (dropped[i] || s->kind == JAG_SYM_FUNCTION) continue; /* grouping for grad: gone after passes */
        bool live = false;
        for (int k = 0; k < s->n_out; k++) live |= live_var[s->outs[k]];
        if (!live) continue;
        live_sym[i] = true;
        for (int k = 0; k < jag__sym_n_inputs(s); k++) {
            int v = jag__trace_var(t, subst(&c, jag__sym_input(s, k)));
            if (v >= 0) live_var[v] = true;
        }
    }
    /* a shared inner tensor keeps every flatten that lists it (the check
     * that the inputs still share it) */
    for (int i = 0; !st && i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        if (s->kind != JAG_SYM_FLATTEN || dropped[i] || live_sym[i]) continue;
        for (int k = 0; k < s->n_out; k++)
            if (live_var[s->outs[k]] && t->vars[s->outs[k]].def != i) live_sym[i] = true;
    }
    if (!st) {
        d->next_tmp = t->next_tmp, d->next_const = t->next_const;
        for (int i = 0; !st && i < t->n_inputs; i++) {
            int v = jag__trace_copy_var(d, t, t->inputs[i]);
            if (v < 0) st = jag_last_status();
            else d->inputs[d->n_inputs++] = v;
        }
    }
    for (int i = 0; !st && i < t->n_syms; i++)
        if (live_sym[i] && jag__trace_copy_sym(d, t, &t->syms[i], subst, &c) < 0) st = jag_last_status();
    for (int i = 0; !st && i < t->n_outputs; i++) {
        int ov = jag__trace_var(t, subst(&c, t->vars[t->outputs[i]].proxy));
        int v = jag__trace_copy_var(d, t, ov);
        if (v < 0) st = jag_last_status();
        else d->outputs[d->n_outputs++] = v;
    }
    if (!st) d->n_fwd_outputs = t->n_fwd_outputs, d->n_fwd_inputs = t->n_fwd_inputs;
    free(c.repl), free(live_var), free(live_sym), free(dropped);
    if (st) {
        jag_trace_free(d);
        return st;
    }
    *out = d;
    return JAG_OK;
}

/* The public entry: what the pass makes inside jag (handlers wrap results
 * with public calls) is never recorded in the caller's scope. */
jag_status jag_trace_dce(const jag_trace *t, jag_trace **out) {
    jag__enter();
    return jag__leave(dce_pass(t, out), NULL, 0);
}
