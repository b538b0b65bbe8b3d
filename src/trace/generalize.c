/* generalize.c — one program for inputs of several sizes, from evidence.
 *
 * A size list (view, expand, full) holds numbers. One trace cannot tell
 * what a number is: view(x, [-1, 4, 16]) may hold a model's constants, or
 * sizes the traced function read from its inputs; a 4 that equals an input
 * size may be that size or a constant that happens to equal it. The
 * executor's rule for a program of one trace (program.c: an entry equal to
 * an input size is read from it) is a guess, and a wrong guess computes
 * another function than the traced one on other sizes.
 *
 * So a compiled function (jag_compile) first runs such a program only on
 * inputs of its traced sizes (static: every input size kept). A trace of
 * the same function from inputs of other sizes is the evidence. When both
 * programs are the same in every instruction and argument but their size
 * lists, an entry that is the same number in both is a constant, and one
 * that changed is read from an input size that changed the same way
 * between the traces (several such: they must stay equal); an entry that
 * changed with no input size is not explained, and the second program
 * stays apart. The first program then serves both, keeping the input sizes
 * that were the same in both traces (a constant may have come from one of
 * those). A later trace that agrees frees the kept sizes it changes, and
 * may bind more entries to them. */
#include "program.h"
#include "../subclass/nested.h"

#include <string.h>

/* The size of input dim `dim` (inner tensor `inner`, or the input itself
 * when -1) as signature sg records it. */
static int64_t sig_size(const jag_input_sig *sg, int inner, int dim) {
    return inner < 0 ? sg->sizes[dim] : sg->inner_sizes[inner][dim];
}

/* Subclass metadata alike: every field, but those of a nested tensor that
 * its unflatten takes from its inner tensors (jag__nested_meta_alike). */
static bool meta_same(const jag_subclass *cls, const jag_subclass_meta *a, const jag_subclass_meta *b) {
    if (cls == jag__nested_class()) return jag__nested_meta_alike(a, b);
    if (a->n_ints != b->n_ints || memcmp(&a->scalar, &b->scalar, sizeof a->scalar) != 0) return false;
    for (int i = 0; i < a->n_ints; i++)
        if (a->ints[i] != b->ints[i]) return false;
    return true;
}

static bool tensor_same(const jag_trace *ta, const jag_tensor *x, const jag_trace *tb, const jag_tensor *y) {
    if (!x || !y) return x == y;
    int u = jag__trace_var(ta, x), v = jag__trace_var(tb, y);
    return u == v && (u >= 0 || x == y);
}

/* One argument alike. */
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

/* The same instruction but, for a size list, its numbers. */
static bool instr_same(const jag_exec *a, const jag_instr *ia, const jag_exec *b, const jag_instr *ib) {
    const jag_sym *s = ia->sym, *r = ib->sym;
    if (s->kind != r->kind || s->op != r->op || s->nargs != r->nargs || s->n_out != r->n_out || s->cls != r->cls ||
        memcmp(s->outs, r->outs, (size_t)s->n_out * sizeof *s->outs) != 0 || s->backward != r->backward ||
        ia->size_arg != ib->size_arg)
        return false;
    if ((s->kind == JAG_SYM_FLATTEN || s->kind == JAG_SYM_UNFLATTEN || s->kind == JAG_SYM_CTOR) && !meta_same(s->cls, &s->meta, &r->meta))
        return false;
    if (s->kind == JAG_SYM_FUSED && !jag__fused_same(s->fused, r->fused)) return false;
    for (int k = 0; k < s->nargs; k++) {
        bool same = k == ia->size_arg ? r->args[k].kind == JAG_VAL_INTS && s->args[k].u.ints.n == r->args[k].u.ints.n
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

/* Execs a and b the same program but for the numbers of their size lists. */
static bool same_structure(const jag_exec *a, const jag_exec *b) {
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
    return true;
}

/* ---- plans: what a second trace shows, checked before anything changes ---- */

typedef struct {
    int k, j;     /* instruction, entry */
    int first, n; /* its input sizes: pos[first .. first + n) */
} bind_plan;

typedef struct {
    bind_plan *b;
    int nb, cap_b;
    jag_size_cand *pos; /* input sizes that entries are read from */
    int np, cap_p;
} exec_plan;

static void plan_free(exec_plan *p) { free(p->b), free(p->pos); }

static bool grow(void **v, int *cap, int n, size_t sz) {
    if (n < *cap) return true;
    int c = *cap ? 2 * *cap : 8;
    void *g = realloc(*v, (size_t)c * sz);
    if (!g) return false;
    *v = g, *cap = c;
    return true;
}

/* What b (a trace of inputs of other sizes) shows about a: *ok when a can
 * serve b's inputs; the plan lists the entries to read from input sizes. */
static jag_status plan_exec(const jag_exec *a, const jag_exec *b, exec_plan *pl, bool *ok) {
    *ok = false;
    if (!a->generalized || !same_structure(a, b)) return JAG_OK;
    for (int c = 0; c < a->n_cands; c++) { /* a narrow's sizes: b's must be the traced ones */
        const jag_size_cand *q = &a->cands[c];
        if (q->pinned && sig_size(&b->sig[q->input], q->inner, q->dim) != q->traced) return JAG_OK;
    }
    for (int k = 0; k < a->n_code; k++) {
        const jag_instr *in = &a->code[k];
        if (in->size_arg < 0) continue;
        const jag_value *x = &in->sym->args[in->size_arg], *y = &b->code[k].sym->args[in->size_arg];
        for (int j = 0; j < x->u.ints.n; j++) {
            int64_t v1 = x->u.ints.v[j], vn = y->u.ints.v[j];
            int c = in->dyn_cand[j];
            if (c >= 0) { /* read from an input size: b's must be the entry */
                if (sig_size(&b->sig[a->cands[c].input], a->cands[c].inner, a->cands[c].dim) != vn) return JAG_OK;
                continue;
            }
            if (vn == v1) continue; /* a constant */
            /* moved: with the kept input sizes that moved the same way */
            if (!grow((void **)&pl->b, &pl->cap_b, pl->nb, sizeof *pl->b)) return jag__error(JAG_ENOMEM, "jag_compiled_call: out of memory");
            bind_plan *bp = &pl->b[pl->nb];
            *bp = (bind_plan){k, j, pl->np, 0};
            for (int q = 0; q < a->n_kept; q++) {
                const jag_size_cand *kp = &a->kept[q];
                if (kp->traced != v1 || sig_size(&b->sig[kp->input], kp->inner, kp->dim) != vn) continue;
                if (!grow((void **)&pl->pos, &pl->cap_p, pl->np, sizeof *pl->pos))
                    return jag__error(JAG_ENOMEM, "jag_compiled_call: out of memory");
                pl->pos[pl->np++] = *kp, bp->n++;
            }
            if (!bp->n) return JAG_OK; /* no input size explains it */
            pl->nb++;
        }
    }
    *ok = true;
    return JAG_OK;
}

/* The candidate for input size q (added, not pinned, when new). */
static int cand_of(jag_exec *e, const jag_size_cand *q) {
    for (int c = 0; c < e->n_cands; c++)
        if (e->cands[c].input == q->input && e->cands[c].inner == q->inner && e->cands[c].dim == q->dim) return c;
    jag_size_cand *g = realloc(e->cands, (size_t)(e->n_cands + 1) * sizeof *g);
    if (!g) return -1;
    e->cands = g;
    e->cands[e->n_cands] = (jag_size_cand){q->input, q->inner, q->dim, q->traced, false};
    return e->n_cands++;
}

/* Carry out plan pl from b on a. */
static jag_status apply_plan(jag_exec *a, const jag_exec *b, const exec_plan *pl) {
    for (int i = 0; i < pl->nb; i++) {
        const bind_plan *bp = &pl->b[i];
        int first = -1;
        for (int q = 0; q < bp->n; q++) {
            int c = cand_of(a, &pl->pos[bp->first + q]);
            if (c < 0) return jag__error(JAG_ENOMEM, "jag_compiled_call: out of memory");
            first = first < 0 ? c : first;
        }
        a->code[bp->k].dyn_cand[bp->j] = first;
    }
    int n = 0;
    for (int q = 0; q < a->n_kept; q++) { /* still kept: the same in b */
        const jag_size_cand *kp = &a->kept[q];
        if (sig_size(&b->sig[kp->input], kp->inner, kp->dim) == kp->traced) a->kept[n++] = *kp;
    }
    a->n_kept = n;
    free(a->cand_value), a->cand_value = NULL; /* sized by n_cands */
    a->last_ok = false; /* size lists read other sizes now: shapes are checked again */
    return JAG_OK;
}

jag_status jag__exec_make_static(jag_exec *e) {
    const jag_trace *t = e->trace;
    int n = 0;
    for (int i = 0; i < t->n_inputs; i++) {
        const jag_input_sig *sg = &e->sig[i];
        n += sg->cls ? 0 : sg->ndim;
        for (int k = 0; sg->cls && k < sg->n_inner; k++) n += sg->inner_ndim[k];
    }
    jag_size_cand *kept = malloc((size_t)(n ? n : 1) * sizeof *kept);
    if (!kept) return jag__error(JAG_ENOMEM, "jag_compile: out of memory");
    n = 0;
    for (int i = 0; i < t->n_inputs; i++) {
        const jag_input_sig *sg = &e->sig[i];
        for (int k = sg->cls ? 0 : -1; k < (sg->cls ? sg->n_inner : 0); k++)
            for (int d = 0; d < (k < 0 ? sg->ndim : sg->inner_ndim[k]); d++) kept[n++] = (jag_size_cand){i, k, d, sig_size(sg, k, d), true};
    }
    for (int k = 0; k < e->n_code; k++) /* every entry a constant */
        for (int j = 0; e->code[k].size_arg >= 0 && j < e->code[k].sym->args[e->code[k].size_arg].u.ints.n; j++)
            e->code[k].dyn_cand[j] = -1;
    int c = 0; /* a narrow's candidates stay (pinned) */
    for (int q = 0; q < e->n_cands; q++)
        if (e->cands[q].pinned) e->cands[c++] = e->cands[q];
    e->n_cands = c;
    free(e->cand_value), e->cand_value = NULL;
    free(e->kept);
    e->kept = kept, e->n_kept = n;
    e->generalized = true;
    e->fixed_sizes = false;
    e->last_ok = false; /* size lists are constants now: shapes are checked again */
    return JAG_OK;
}

/* Any number in a size list is a guess (a 0 or 1 too: read as a constant,
 * it may be an input size), as are fixed sizes; -1 (infer) is none. */
bool jag__exec_guesses(const jag_exec *e) {
    if (e->fixed_sizes) return true;
    for (int k = 0; k < e->n_code; k++) {
        const jag_instr *in = &e->code[k];
        for (int j = 0; in->size_arg >= 0 && j < in->sym->args[in->size_arg].u.ints.n; j++)
            if (in->sym->args[in->size_arg].u.ints.v[j] >= 0) return true;
    }
    return false;
}

jag_status jag__execs_generalize(jag_exec *const *a, const jag_exec *const *b, int n, bool *merged) {
    exec_plan pl[3] = {{0}};
    jag_status st = JAG_OK;
    bool ok = n <= 3;
    *merged = false;
    for (int i = 0; !st && ok && i < n; i++) st = plan_exec(a[i], b[i], &pl[i], &ok);
    for (int i = 0; !st && ok && i < n; i++) st = apply_plan(a[i], b[i], &pl[i]);
    for (int i = 0; i < 3; i++) plan_free(&pl[i]);
    *merged = !st && ok;
    return st;
}
