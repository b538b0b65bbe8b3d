/* generalize.c — one program for inputs of several sizes.
 *
 * The executor reads an entry of a size list (view, expand, full) from the
 * inputs at run time when it equals an input size when traced; an entry that
 * equals none fixes the program's sizes, as one trace cannot tell a model's
 * constant (the heads and head size of view(x, [-1, 4, 16])) from a size
 * computed from the inputs' (view(x, [-1, T * D]) of a padded (B, T, D)).
 *
 * A second trace of the same function, from inputs of other sizes, is the
 * evidence. When both programs are the same in every instruction and
 * argument, except the size-list entries the first reads from its inputs
 * (and those read, in the second trace, the same input sizes), the entries
 * the first did not bind are the same numbers in both: they did not move
 * with the sizes that changed. The first program then serves both, with every
 * input size that was the same in both traces kept: a constant may have been
 * computed from one of those. A third trace that changes a kept size and
 * still agrees frees that one too. */
#include "program.h"
#include "../subclass/nested.h"

#include <string.h>

/* The size of input dim `dim` (inner tensor `inner`, or the input itself
 * when -1) as signature sg records it. */
static int64_t sig_size(const jag_input_sig *sg, int inner, int dim) {
    return inner < 0 ? sg->sizes[dim] : sg->inner_sizes[inner][dim];
}

/* Subclass metadata alike: every field, but those of a nested tensor that
 * its unflatten takes from the offsets (the ragged id, the length bounds). */
static bool meta_same(const jag_subclass *cls, const jag_subclass_meta *a, const jag_subclass_meta *b) {
    if (a->n_ints != b->n_ints || memcmp(&a->scalar, &b->scalar, sizeof a->scalar) != 0) return false;
    bool nested = cls == jag__nested_class();
    for (int i = 0; i < a->n_ints; i++)
        if (a->ints[i] != b->ints[i] && !(nested && (i == 1 || i == 3 || i == 4))) return false;
    return true;
}

static bool tensor_same(const jag_trace *ta, const jag_tensor *x, const jag_trace *tb, const jag_tensor *y) {
    if (!x || !y) return x == y;
    int u = jag__trace_var(ta, x), v = jag__trace_var(tb, y);
    return u == v && (u >= 0 || x == y);
}

/* One argument alike (a size list only when equal). */
static bool value_same(const jag_trace *ta, const jag_value *x, const jag_trace *tb, const jag_value *y) {
    if (x->kind != y->kind) return false;
    switch (x->kind) {
    case JAG_VAL_NONE: return true;
    case JAG_VAL_TENSOR: return tensor_same(ta, x->u.t, tb, y->u.t);
    case JAG_VAL_INT: return x->u.i == y->u.i;
    case JAG_VAL_DOUBLE: return memcmp(&x->u.d, &y->u.d, sizeof x->u.d) == 0;
    case JAG_VAL_BOOL: return x->u.b == y->u.b;
    case JAG_VAL_INTS:
        return x->u.ints.n == y->u.ints.n && (!x->u.ints.n || memcmp(x->u.ints.v, y->u.ints.v, (size_t)x->u.ints.n * sizeof(int64_t)) == 0);
    case JAG_VAL_TENSORS:
        if (x->u.tensors.n != y->u.tensors.n) return false;
        for (int k = 0; k < x->u.tensors.n; k++)
            if (!tensor_same(ta, x->u.tensors.v[k], tb, y->u.tensors.v[k])) return false;
        return true;
    }
    return false;
}

/* Size list x of instruction ia (of exec a) against y (of exec b): an entry
 * a reads from input size c must be, in b, what b's inputs have there; any
 * other entry must be the same number. */
static bool sizes_same(const jag_exec *a, const jag_instr *ia, const jag_value *x, const jag_exec *b, const jag_value *y) {
    if (x->kind != JAG_VAL_INTS || y->kind != JAG_VAL_INTS || x->u.ints.n != y->u.ints.n) return false;
    for (int j = 0; j < x->u.ints.n; j++) {
        int c = ia->dyn_cand[j];
        int64_t want = c >= 0 ? sig_size(&b->sig[a->cands[c].input], a->cands[c].inner, a->cands[c].dim) : x->u.ints.v[j];
        if (y->u.ints.v[j] != want) return false;
    }
    return true;
}

static bool instr_same(const jag_exec *a, const jag_instr *ia, const jag_exec *b, const jag_instr *ib) {
    const jag_sym *s = ia->sym, *r = ib->sym;
    if (s->kind != r->kind || s->op != r->op || s->nargs != r->nargs || s->n_out != r->n_out || s->cls != r->cls ||
        memcmp(s->outs, r->outs, (size_t)s->n_out * sizeof *s->outs) != 0 || s->backward != r->backward)
        return false;
    if ((s->kind == JAG_SYM_FLATTEN || s->kind == JAG_SYM_UNFLATTEN || s->kind == JAG_SYM_CTOR) && !meta_same(s->cls, &s->meta, &r->meta))
        return false;
    if (s->kind == JAG_SYM_FUSED && !jag__fused_same(s->fused, r->fused)) return false;
    for (int k = 0; k < s->nargs; k++) {
        bool same = k == ia->size_arg ? sizes_same(a, ia, &s->args[k], b, &r->args[k])
                                      : value_same(a->trace, &s->args[k], b->trace, &r->args[k]);
        if (!same) return false;
    }
    return true;
}

static bool sig_same(const jag_input_sig *a, const jag_input_sig *b) {
    if (a->cls != b->cls || a->dtype != b->dtype || a->ndim != b->ndim || a->requires_grad != b->requires_grad ||
        a->n_inner != b->n_inner || (a->cls && !meta_same(a->cls, &a->meta, &b->meta)))
        return false;
    for (int k = 0; k < a->n_inner; k++)
        if (a->inner_dtype[k] != b->inner_dtype[k] || a->inner_ndim[k] != b->inner_ndim[k]) return false;
    return true;
}

static bool var_same(const jag_tvar *u, const jag_tvar *v) {
    const jag_tensor *p = u->proxy, *q = v->proxy;
    return u->def == v->def && u->requires_grad == v->requires_grad && u->constant == v->constant &&
           p->subclass == q->subclass && p->dtype == q->dtype && p->ndim == q->ndim;
}

bool jag__execs_same_but_sizes(const jag_exec *a, const jag_exec *b) {
    const jag_trace *ta = a->trace, *tb = b->trace;
    if (ta->n_vars != tb->n_vars || ta->n_syms != tb->n_syms || ta->n_inputs != tb->n_inputs ||
        ta->n_outputs != tb->n_outputs || ta->n_fwd_outputs != tb->n_fwd_outputs || ta->n_fwd_inputs != tb->n_fwd_inputs ||
        a->n_code != b->n_code)
        return false;
    if (memcmp(ta->inputs, tb->inputs, (size_t)ta->n_inputs * sizeof *ta->inputs) != 0 ||
        memcmp(ta->outputs, tb->outputs, (size_t)ta->n_outputs * sizeof *ta->outputs) != 0)
        return false;
    for (int v = 0; v < ta->n_vars; v++)
        if (!var_same(&ta->vars[v], &tb->vars[v])) return false;
    for (int i = 0; i < ta->n_syms; i++) /* a custom function's context holds what it saved: not compared */
        if (ta->syms[i].kind == JAG_SYM_FUNCTION || tb->syms[i].kind == JAG_SYM_FUNCTION) return false;
    for (int i = 0; i < ta->n_inputs; i++)
        if (!sig_same(&a->sig[i], &b->sig[i])) return false;
    for (int k = 0; k < a->n_code; k++)
        if (!instr_same(a, &a->code[k], b, &b->code[k])) return false;
    /* a narrow's dim keeps its size */
    for (int c = 0; c < a->n_cands; c++)
        if (a->cands[c].pinned && sig_size(&b->sig[a->cands[c].input], a->cands[c].inner, a->cands[c].dim) != a->cands[c].traced)
            return false;
    return true;
}

jag_status jag__exec_keep_alike(jag_exec *e, const jag_input_sig *other) {
    const jag_trace *t = e->trace;
    jag_size_cand *kept = NULL;
    int n = 0, cap = 0;
    bool had = e->generalized;
    for (int i = 0; i < t->n_inputs; i++) {
        const jag_input_sig *sg = &e->sig[i];
        for (int k = sg->cls ? 0 : -1; k < (sg->cls ? sg->n_inner : 0); k++) {
            int nd = k < 0 ? sg->ndim : sg->inner_ndim[k];
            for (int d = 0; d < nd; d++) {
                int64_t v = sig_size(sg, k, d);
                if (v != sig_size(&other[i], k, d)) continue;
                bool was = !had;
                for (int q = 0; had && q < e->n_kept && !was; q++)
                    was = e->kept[q].input == i && e->kept[q].inner == k && e->kept[q].dim == d;
                if (!was) continue; /* freed by an earlier trace */
                if (n == cap) {
                    cap = cap ? 2 * cap : 16;
                    jag_size_cand *g = realloc(kept, (size_t)cap * sizeof *g);
                    if (!g) {
                        free(kept);
                        return jag__error(JAG_ENOMEM, "jag_compiled_call: out of memory");
                    }
                    kept = g;
                }
                kept[n++] = (jag_size_cand){i, k, d, v, true};
            }
        }
    }
    free(e->kept);
    e->kept = kept, e->n_kept = n;
    e->generalized = true;
    e->fixed_sizes = false;
    return JAG_OK;
}
