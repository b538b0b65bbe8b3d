/* program.c — the executor: a trace lowered to instructions over slots,
 * input checks on entry, output buffers kept between runs, and programs
 * (forward, and forward + backward for autograd across compiled code). */
#include "program.h"
#include "../autograd/autograd.h"
#include "../subclass/nested.h"
#include "../cpu/kernels.h" /* the typed pointwise kernels */

#include <stdio.h>

/* ---- lowering -------------------------------------------------------------- */

/* Plain kernels the executor runs itself (META, kept output buffers,
 * kernel): built-in, not views, not composite. */
static bool direct_op(jag_op_id op) {
    if (op >= JAG_OP_BUILTIN_COUNT) return false;
    const jag_op_info *info = &jag__ops[op];
    return info->meta && !(info->tags & (JAG_TAG_VIEW | JAG_TAG_COMPOSITE));
}

void jag__exec_release(jag_exec *e) {
    if (!e || atomic_fetch_sub(&e->refcount, 1) != 1) return;
    for (int i = 0; i < e->n_code; i++) {
        jag_instr *in = &e->code[i];
        free(in->arg_slot), free(in->release), free(in->dyn_ints), free(in->dyn_cand), free(in->argv), free(in->tpos);
    }
    free(e->cands), free(e->cand_value), free(e->kept), free(e->leftover);
    if (e->slots)
        for (int s = 0; s < e->n_slots; s++)
            if (!e->borrowed || !e->borrowed[s]) jag_release(e->slots[s]);
    for (int g = 0; g < e->n_groups; g++) jag_release(e->keep[g]);
    free(e->keep);
    free(e->code);
    free(e->slots), free(e->borrowed);
    free(e->last_dtype), free(e->last_ndim), free(e->last_sizes);
    free(e->sig);
    jag_trace_free(e->trace);
    free(e);
}

/* What an input must look like: from the trace's input proxy (and, for a
 * subclass, its flatten symbol). */
static void input_sig(const jag_trace *t, int i, jag_input_sig *sg) {
    const jag_tvar *v = &t->vars[t->inputs[i]];
    const jag_tensor *p = v->proxy;
    memset(sg, 0, sizeof *sg);
    snprintf(sg->name, sizeof sg->name, "%s", v->name);
    sg->cls = p->subclass;
    sg->dtype = p->dtype;
    sg->ndim = p->ndim;
    sg->requires_grad = v->requires_grad;
    memcpy(sg->sizes, p->sizes, sizeof sg->sizes);
    if (!p->subclass) return;
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    if (jag__flatten_quiet(p, inner, &n, &sg->meta)) {
        jag_clear_error();
        return;
    }
    sg->n_inner = n;
    for (int k = 0; k < n; k++) {
        sg->inner_dtype[k] = inner[k]->dtype;
        sg->inner_ndim[k] = inner[k]->ndim;
        memcpy(sg->inner_sizes[k], inner[k]->sizes, sizeof sg->inner_sizes[k]);
        jag_release(inner[k]);
    }
}

/* The candidate (input, inner, dim) of every input size equal to v when
 * traced; adds them to e->cands (deduplicated); returns the first or -1. */
static int find_cands(jag_exec *e, int64_t v) {
    const jag_trace *t = e->trace;
    int first = -1;
    for (int i = 0; i < t->n_inputs; i++) {
        const jag_input_sig *sg = &e->sig[i];
        int n_inner = sg->cls ? sg->n_inner : 0;
        for (int k = -1; k < n_inner; k++) {
            int nd = k < 0 ? (sg->cls ? 0 : sg->ndim) : sg->inner_ndim[k];
            const int64_t *sz = k < 0 ? sg->sizes : sg->inner_sizes[k];
            for (int d = 0; d < nd; d++) {
                if (sz[d] != v) continue;
                int c = 0;
                while (c < e->n_cands && !(e->cands[c].input == i && e->cands[c].inner == k && e->cands[c].dim == d)) c++;
                if (c == e->n_cands) {
                    jag_size_cand *g = realloc(e->cands, (size_t)(e->n_cands + 1) * sizeof *g);
                    if (!g) return -2;
                    e->cands = g;
                    e->cands[e->n_cands++] = (jag_size_cand){i, k, d, v, false};
                }
                if (first < 0) first = c;
            }
        }
    }
    return first;
}

/* view, expand, mean_backward and full take sizes as a list: an entry above 1 that equals
 * some input size when traced is taken from that input at run time (every
 * input size that was equal then must be equal at run time: the entry
 * cannot tell them apart); an entry that equals none fixes the program's
 * sizes. narrow's start and length are kept: the size of the dim it narrows
 * must stay what it was, so the input sizes equal to it are pinned (a
 * feature dim split in parts: the ragged and batch sizes stay free), and
 * when no input size equals it the program's sizes are fixed. */
static jag_status bind_sizes(jag_exec *e, jag_instr *in) {
    const jag_sym *s = in->sym;
    in->size_arg = -1;
    if (s->kind != JAG_SYM_OP) return JAG_OK;
    if (s->op == JAG_OP_narrow) {
        const jag_tensor *x = s->nargs > 1 && s->args[0].kind == JAG_VAL_TENSOR ? s->args[0].u.t : NULL;
        int64_t d = s->args[1].kind == JAG_VAL_INT ? s->args[1].u.i : 0;
        if (x && d < 0) d += x->ndim;
        int64_t v = x && d >= 0 && d < x->ndim ? x->sizes[d] : -1;
        int c = v > 1 ? find_cands(e, v) : -1;
        if (c == -2) return jag__error(JAG_ENOMEM, "jag_trace_compile: out of memory");
        if (c < 0) e->fixed_sizes = true;
        for (int k = 0; k < e->n_cands; k++)
            if (e->cands[k].traced == v) e->cands[k].pinned = true;
        return JAG_OK;
    }
    int a = s->op == JAG_OP_view || s->op == JAG_OP_expand || s->op == JAG_OP_mean_backward ? 1
            : s->op == JAG_OP_full                                                          ? 0
                                                                                            : -1;
    if (a < 0 || a >= s->nargs || s->args[a].kind != JAG_VAL_INTS) return JAG_OK;
    int n = s->args[a].u.ints.n;
    in->dyn_ints = malloc((size_t)(n ? n : 1) * sizeof *in->dyn_ints);
    in->dyn_cand = malloc((size_t)(n ? n : 1) * sizeof *in->dyn_cand);
    if (!in->dyn_ints || !in->dyn_cand) return jag__error(JAG_ENOMEM, "jag_trace_compile: out of memory");
    in->size_arg = a;
    for (int j = 0; j < n; j++) {
        int64_t v = s->args[a].u.ints.v[j];
        in->dyn_ints[j] = v;
        in->dyn_cand[j] = -1;
        if (v <= 1) continue;
        int c = find_cands(e, v);
        if (c == -2) return jag__error(JAG_ENOMEM, "jag_trace_compile: out of memory");
        if (c < 0) e->fixed_sizes = true;
        else in->dyn_cand[j] = c;
    }
    return JAG_OK;
}

/* A generalized program's kept sizes (generalize.c). They are listed input
 * by input, so a subclass input is flattened once for all of its own. */
static jag_status check_kept(const jag_exec *e, jag_tensor *const *inputs) {
    jag_tensor *in[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0, flat = -1; /* in[0..n): the inner tensors of input `flat` */
    jag_status st = JAG_OK;
    for (int c = 0; c < e->n_kept && !st; c++) {
        const jag_size_cand *q = &e->kept[c];
        const jag_tensor *x = inputs[q->input];
        if (q->inner >= 0 && flat != q->input) {
            for (int k = 0; k < n; k++) jag_release(in[k]), in[k] = NULL;
            jag_subclass_meta meta;
            n = 0, flat = q->input;
            if (jag__flatten_quiet(x, in, &n, &meta)) jag_clear_error(), n = 0;
        }
        const jag_tensor *t = q->inner < 0 ? x : q->inner < n ? in[q->inner] : NULL;
        int64_t v = t && q->dim < t->ndim ? t->sizes[q->dim] : -1;
        if (v != q->traced)
            st = jag__error(JAG_ESHAPE, "jag_program_run: input %d ('%s') has size %lld at dim %d%s, expected %lld: every trace of this program had that size",
                            q->input, e->sig[q->input].name, (long long)v, q->dim, q->inner >= 0 ? " of an inner tensor" : "",
                            (long long)q->traced);
    }
    for (int k = 0; k < n; k++) jag_release(in[k]);
    return st;
}

/* Read the candidates' sizes from the inputs and check that those equal
 * when traced are equal now. */
static jag_status eval_sizes(jag_exec *e, jag_tensor *const *inputs) {
    if (!e->n_cands) return JAG_OK;
    if (!e->cand_value && !(e->cand_value = malloc((size_t)e->n_cands * sizeof *e->cand_value)))
        return jag__error(JAG_ENOMEM, "jag_program_run: out of memory");
    for (int c = 0; c < e->n_cands; c++) {
        const jag_size_cand *q = &e->cands[c];
        const jag_tensor *x = inputs[q->input];
        if (q->inner < 0) {
            e->cand_value[c] = x->sizes[q->dim];
            continue;
        }
        jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
        int n = 0;
        jag_subclass_meta meta;
        jag_status st = jag__flatten_quiet(x, inner, &n, &meta);
        if (st) return st;
        e->cand_value[c] = q->inner < n ? inner[q->inner]->sizes[q->dim] : -1;
        for (int k = 0; k < n; k++) jag_release(inner[k]);
    }
    for (int c = 0; c < e->n_cands; c++)
        if (e->cands[c].pinned && e->cand_value[c] != e->cands[c].traced)
            return jag__error(JAG_ESHAPE, "jag_program_run: input %d has size %lld at dim %d, expected %lld as when traced (the program narrows along it)",
                              e->cands[c].input, (long long)e->cand_value[c], e->cands[c].dim, (long long)e->cands[c].traced);
    for (int c = 0; c < e->n_cands; c++)
        for (int d = c + 1; d < e->n_cands; d++)
            if (e->cands[c].traced == e->cands[d].traced && e->cand_value[c] != e->cand_value[d])
                return jag__error(JAG_ESHAPE, "jag_program_run: sizes of inputs %d and %d were both %lld when traced, now %lld and %lld; the program cannot tell them apart (trace it again)",
                                  e->cands[c].input, e->cands[d].input, (long long)e->cands[c].traced,
                                  (long long)e->cand_value[c], (long long)e->cand_value[d]);
    return JAG_OK;
}

static bool is_number(const jag_value *v) { return v->kind == JAG_VAL_DOUBLE || v->kind == JAG_VAL_INT; }
static double number(const jag_value *v) { return v->kind == JAG_VAL_DOUBLE ? v->u.d : (double)v->u.i; }

/* Unary ops and add ... minimum: their typed kernels, called as their boxed
 * adapters call them (arithmetic computes in the result's dtype). */
static void plan_typed(jag_instr *in) {
    const jag_sym *s = in->sym;
    in->typed = JAG_TYPED_NONE;
    switch (s->op) {
#define UNARY_CASE(name) case JAG_OP_##name: in->fn = JAG_UNARY_##name, in->typed = JAG_TYPED_UNARY; break;
        JAG_UNARY_OP_LIST(UNARY_CASE)
#undef UNARY_CASE
    case JAG_OP_add: in->fn = JAG_BINARY_add, in->typed = JAG_TYPED_ARITH; break;
    case JAG_OP_sub: in->fn = JAG_BINARY_sub, in->typed = JAG_TYPED_ARITH; break;
    case JAG_OP_mul: in->fn = JAG_BINARY_mul, in->typed = JAG_TYPED_ARITH; break;
    case JAG_OP_div: in->fn = JAG_BINARY_div, in->typed = JAG_TYPED_ARITH; break;
    case JAG_OP_maximum: in->fn = JAG_BINARY_maximum, in->typed = JAG_TYPED_ARITH; break;
    case JAG_OP_minimum: in->fn = JAG_BINARY_minimum, in->typed = JAG_TYPED_ARITH; break;
    default: return;
    }
    if (in->typed == JAG_TYPED_UNARY && !(s->nargs == 1 && s->args[0].kind == JAG_VAL_TENSOR)) in->typed = JAG_TYPED_NONE;
    if (in->typed != JAG_TYPED_ARITH) return;
    int want = s->op == JAG_OP_add ? 3 : 2;
    if (s->nargs != want || s->args[0].kind != JAG_VAL_TENSOR ||
        !(s->args[1].kind == JAG_VAL_TENSOR || is_number(&s->args[1])) || (want == 3 && !is_number(&s->args[2]))) {
        in->typed = JAG_TYPED_NONE;
        return;
    }
    in->b_scalar = s->args[1].kind != JAG_VAL_TENSOR;
    in->scalar = in->b_scalar ? number(&s->args[1]) : 0.0;
    in->alpha = want == 3 ? number(&s->args[2]) : 1.0;
}

/* Box an instruction's arguments once (not one with a tensor list: those
 * are boxed per run): each run sets only its tensors. A direct op whose
 * operands are nested or half goes through the dispatcher, which unwraps
 * the one and widens the other to float32; the proxies say which, and the
 * inputs' checks make every run's tensors agree with them. */
static jag_status box_args(jag_instr *in) {
    const jag_sym *s = in->sym;
    for (int i = 0; i < s->nargs; i++) {
        if (s->args[i].kind == JAG_VAL_TENSORS) {
            in->direct = false;
            return JAG_OK;
        }
        if (s->args[i].kind == JAG_VAL_TENSOR && (s->args[i].u.t->subclass || jag_dtype_is_half(s->args[i].u.t->dtype)))
            in->direct = false;
    }
    in->argv = malloc((size_t)(s->nargs ? s->nargs : 1) * sizeof *in->argv);
    in->tpos = malloc((size_t)(in->n_args ? in->n_args : 1) * sizeof *in->tpos);
    if (!in->argv || !in->tpos) return jag__error(JAG_ENOMEM, "jag_trace_compile: out of memory");
    int k = 0;
    for (int i = 0; i < s->nargs; i++) {
        in->argv[i] = s->args[i];
        if (s->args[i].kind == JAG_VAL_TENSOR) in->tpos[k++] = i;
    }
    if (in->size_arg >= 0) in->argv[in->size_arg].u.ints.v = in->dyn_ints;
    if (in->direct) plan_typed(in);
    return JAG_OK;
}

/* Whether the shapes an instruction makes follow from its operands' shapes
 * alone (plain kernels, fused regions, views), not from data or from a
 * subclass's inner tensors. */
static bool shape_follows(const jag_instr *in) {
    const jag_sym *s = in->sym;
    if (s->kind == JAG_SYM_FUSED) return true;
    if (s->kind != JAG_SYM_OP || s->op >= JAG_OP_BUILTIN_COUNT) return false;
    return in->direct || (jag__ops[s->op].tags & JAG_TAG_VIEW);
}

jag_status jag__exec_new(const jag_trace *src, jag_exec **out) {
    const char *op = "jag_trace_compile";
    jag_exec *e = calloc(1, sizeof *e);
    if (!e) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    atomic_init(&e->refcount, 1);
    jag_status st = jag__trace_clone(src, &e->trace);
    if (st) {
        free(e);
        return st;
    }
    /* fused regions keep scratch buffers: one set per program */
    for (int i = 0; i < e->trace->n_syms; i++) {
        jag_sym *s = &e->trace->syms[i];
        if (!s->fused) continue;
        struct jag_fused *own = jag__fused_private(s->fused);
        if (!own) {
            jag__exec_release(e);
            return jag__error(JAG_ENOMEM, "%s: out of memory", op);
        }
        jag__fused_free(s->fused);
        s->fused = own;
    }
    const jag_trace *t = e->trace;
    e->n_slots = t->n_vars;
    e->slots = calloc((size_t)e->n_slots + 1, sizeof *e->slots);
    e->borrowed = calloc((size_t)e->n_slots + 1, sizeof *e->borrowed);
    e->code = calloc((size_t)t->n_syms + 1, sizeof *e->code);
    e->sig = calloc((size_t)t->n_inputs + 1, sizeof *e->sig);
    e->last_dtype = calloc((size_t)t->n_inputs + 1, sizeof *e->last_dtype);
    e->last_ndim = calloc((size_t)t->n_inputs + 1, sizeof *e->last_ndim);
    e->last_sizes = calloc((size_t)t->n_inputs + 1, sizeof *e->last_sizes);
    int *last = malloc(((size_t)t->n_vars + 1) * sizeof *last);
    if (!e->slots || !e->borrowed || !e->code || !e->sig || !e->last_dtype || !e->last_ndim || !e->last_sizes || !last) {
        free(last);
        jag__exec_release(e);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    for (int i = 0; i < t->n_inputs; i++) input_sig(t, i, &e->sig[i]);
    for (int v = 0; v < t->n_vars; v++) last[v] = -1;
    for (int i = 0; i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        if (s->kind == JAG_SYM_FUNCTION) continue;
        for (int k = 0; k < jag__sym_n_inputs(s); k++) {
            int v = jag__trace_var(t, jag__sym_input(s, k));
            if (v >= 0) last[v] = i;
        }
    }
    for (int i = 0; i < t->n_outputs; i++) last[t->outputs[i]] = t->n_syms; /* kept to the end */
    for (int i = 0; i < t->n_syms && !st; i++) {
        const jag_sym *s = &t->syms[i];
        jag_instr *in = &e->code[e->n_code];
        if (s->kind == JAG_SYM_FUNCTION) continue;
        in->sym = s;
        in->direct = s->kind == JAG_SYM_OP && direct_op(s->op);
        int n = jag__sym_n_inputs(s);
        in->n_args = n;
        in->arg_slot = malloc((size_t)(n ? n : 1) * sizeof *in->arg_slot);
        in->release = malloc((size_t)(n ? n : 1) * sizeof *in->release);
        if (!in->arg_slot || !in->release) {
            st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
            break;
        }
        for (int k = 0; k < n; k++) {
            int v = jag__trace_var(t, jag__sym_input(s, k));
            JAG_ASSERT(v >= 0);
            in->arg_slot[k] = v;
            bool dup = false;
            for (int j = 0; j < in->n_release; j++) dup |= in->release[j] == v;
            if (last[v] == i && !dup && !t->vars[v].constant) in->release[in->n_release++] = v;
        }
        e->n_code++;
    }
    /* values that no instruction releases (released at the end of a run) */
    e->leftover = malloc(((size_t)t->n_vars + 1) * sizeof *e->leftover);
    if (!st && !e->leftover) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    for (int v = 0; !st && v < t->n_vars; v++) {
        bool released = t->vars[v].constant != NULL;
        for (int i = 0; !released && i < e->n_code; i++)
            for (int k = 0; k < e->code[i].n_release && !released; k++) released = e->code[i].release[k] == v;
        if (!released) e->leftover[e->n_leftover++] = v;
    }
    /* size lists: entries bound to input sizes, or the program fixes sizes */
    for (int i = 0; !st && i < e->n_code; i++) st = bind_sizes(e, &e->code[i]);
    for (int i = 0; !st && i < e->n_code; i++) st = box_args(&e->code[i]);
    e->shapes_follow_inputs = true;
    for (int i = 0; i < e->n_code; i++) e->shapes_follow_inputs &= shape_follows(&e->code[i]);
    /* buffer groups by liveness: an output takes a group whose value's last
     * use came before this instruction */
    int *busy = malloc(((size_t)e->n_code * JAG_SUBCLASS_MAX_INNER + 1) * sizeof *busy);
    e->keep = calloc((size_t)e->n_code * JAG_SUBCLASS_MAX_INNER + 1, sizeof *e->keep);
    if (!st && (!busy || !e->keep)) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    for (int i = 0; !st && i < e->n_code; i++) {
        jag_instr *in = &e->code[i];
        int at = (int)(in->sym - t->syms);
        for (int k = 0; k < JAG_SUBCLASS_MAX_INNER; k++) in->group[k] = -1;
        if (!in->direct && in->sym->kind != JAG_SYM_FUSED) continue;
        for (int k = 0; k < in->sym->n_out; k++) {
            int g = 0;
            while (g < e->n_groups && busy[g] >= at) g++;
            if (g == e->n_groups) e->n_groups++;
            /* a value nothing reads stays in its slot to the end of the run */
            int v = in->sym->outs[k];
            busy[g] = last[v] >= 0 ? last[v] : t->n_syms;
            in->group[k] = g;
        }
    }
    free(busy);
    free(last);
    if (st) {
        jag__exec_release(e);
        return st;
    }
    /* constants live in their slots */
    for (int v = 0; v < t->n_vars; v++)
        if (t->vars[v].constant) e->slots[v] = jag_retain(t->vars[v].constant);
    *out = e;
    return JAG_OK;
}

/* ---- input checks ------------------------------------------------------------- */

static const char *cls_name(const jag_subclass *c) { return c ? jag_subclass_name(c) : "plain"; }

static jag_status check_input(const jag_input_sig *sg, int i, const jag_tensor *x, bool fixed) {
    const char *op = "jag_program_run";
    char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
    if (!x) return jag__error(JAG_EINVAL, "%s: input %d ('%s') is NULL", op, i, sg->name);
    if (x->subclass != sg->cls)
        return jag__error(JAG_EINVAL, "%s: input %d ('%s') is a %s tensor, expected a %s tensor", op, i, sg->name,
                          cls_name(x->subclass), cls_name(sg->cls));
    if (!x->subclass && !x->storage)
        return jag__error(JAG_EINVAL, "%s: input %d ('%s') has no data (a meta tensor)", op, i, sg->name);
    if (x->dtype != sg->dtype)
        return jag__error(JAG_EDTYPE, "%s: input %d ('%s') has dtype %s, expected %s", op, i, sg->name,
                          jag_dtype_name(x->dtype), jag_dtype_name(sg->dtype));
    if (x->ndim != sg->ndim)
        return jag__error(JAG_ESHAPE, "%s: input %d ('%s') has %d dims (%s), expected %d", op, i, sg->name, x->ndim,
                          jag__shape_str(x->sizes, x->ndim, a, sizeof a), sg->ndim);
    if (!x->subclass) {
        if (fixed && memcmp(x->sizes, sg->sizes, (size_t)x->ndim * sizeof *x->sizes) != 0)
            return jag__error(JAG_ESHAPE, "%s: input %d ('%s') has shape %s, expected %s (the program fixes sizes: it views, expands or narrows)",
                              op, i, sg->name, jag__shape_str(x->sizes, x->ndim, a, sizeof a),
                              jag__shape_str(sg->sizes, sg->ndim, b, sizeof b));
        return JAG_OK;
    }
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta meta = {0};
    jag_status st = jag__flatten_quiet(x, inner, &n, &meta);
    if (st) return st;
    const int64_t *got = meta.ints, *want = sg->meta.ints; /* slots: JAG_NESTED_SLOT_* when nested */
    bool jagged = jag__nested(x) && got[JAG_NESTED_SLOT_LAYOUT] == JAG_JAGGED;
    bool want_jagged = want[JAG_NESTED_SLOT_LAYOUT] == JAG_JAGGED;
    if (jagged && want_jagged && got[JAG_NESTED_SLOT_RAGGED_IDX] != want[JAG_NESTED_SLOT_RAGGED_IDX]) {
        st = jag__error(JAG_EINVAL, "%s: input %d ('%s') is ragged in dim %lld, expected dim %lld", op, i, sg->name,
                        (long long)got[JAG_NESTED_SLOT_RAGGED_IDX], (long long)want[JAG_NESTED_SLOT_RAGGED_IDX]);
    } else if (jag__nested(x) && (got[JAG_NESTED_SLOT_LAYOUT] != want[JAG_NESTED_SLOT_LAYOUT] ||
                                  (jagged && got[JAG_NESTED_SLOT_HAS_LENGTHS] != want[JAG_NESTED_SLOT_HAS_LENGTHS]))) {
        const char *lay[] = {"dense", "jagged", "strided"};
        st = jag__error(JAG_EINVAL, "%s: input %d ('%s') has the %s layout%s, expected %s%s", op, i, sg->name,
                        lay[got[JAG_NESTED_SLOT_LAYOUT] % 3], jagged && got[JAG_NESTED_SLOT_HAS_LENGTHS] ? " with holes" : "",
                        lay[want[JAG_NESTED_SLOT_LAYOUT] % 3],
                        want_jagged && want[JAG_NESTED_SLOT_HAS_LENGTHS] ? " with holes" : "");
    } else if (n != sg->n_inner) {
        st = jag__error(JAG_EINVAL, "%s: input %d ('%s') has %d inner tensors, expected %d", op, i, sg->name, n, sg->n_inner);
    }
    for (int k = 0; !st && k < n; k++) {
        const jag_tensor *q = inner[k];
        if (q->subclass || q->dtype != sg->inner_dtype[k] || q->ndim != sg->inner_ndim[k])
            st = jag__error(JAG_EINVAL, "%s: input %d ('%s'): inner tensor %d is %s %s, expected %s with %d dims", op, i,
                            sg->name, k, jag_dtype_name(q->dtype), jag__shape_str(q->sizes, q->ndim, a, sizeof a),
                            jag_dtype_name(sg->inner_dtype[k]), sg->inner_ndim[k]);
        else if (fixed && memcmp(q->sizes, sg->inner_sizes[k], (size_t)q->ndim * sizeof *q->sizes) != 0)
            st = jag__error(JAG_ESHAPE, "%s: input %d ('%s'): inner tensor %d has shape %s, expected %s (the program fixes sizes)",
                            op, i, sg->name, k, jag__shape_str(q->sizes, q->ndim, a, sizeof a),
                            jag__shape_str(sg->inner_sizes[k], q->ndim, b, sizeof b));
    }
    for (int k = 0; k < n; k++) jag_release(inner[k]);
    return st;
}

jag_status jag__exec_check(jag_exec *e, jag_tensor *const *inputs, int n_inputs, bool fixed) {
    const jag_trace *t = e->trace;
    if (n_inputs != t->n_inputs)
        return jag__error(JAG_EINVAL, "jag_program_run: %d inputs, expected %d", n_inputs, t->n_inputs);
    if (n_inputs > 0 && !inputs) return jag__error(JAG_EINVAL, "jag_program_run: argument 'inputs' is NULL");
    for (int i = 0; i < n_inputs; i++) {
        jag_status st = check_input(&e->sig[i], i, inputs[i], e->fixed_sizes || fixed);
        if (st) return st;
    }
    jag_status st = check_kept(e, inputs);
    return st ? st : eval_sizes(e, inputs);
}

/* ---- running ------------------------------------------------------------------- */

/* An output buffer for spec: the kept one when nobody else holds it and its
 * storage is large enough (reshaped in place), else a new tensor that
 * becomes the kept one. The result is borrowed: *keep holds its one
 * reference, the slot it goes into none (a result the caller keeps has a
 * reference of its own, so the next run does not write into it). */
static bool same_dims(const int64_t *a, const int64_t *b, int ndim) {
    for (int d = 0; d < ndim; d++)
        if (a[d] != b[d]) return false;
    return true;
}

static jag_tensor *take_buffer(jag_tensor **keep, const jag_spec *spec, const char *op) {
    jag_tensor *k = *keep;
    if (k && atomic_load_explicit(&k->refcount, memory_order_acquire) == 1 && k->storage &&
        atomic_load_explicit(&k->storage->refcount, memory_order_acquire) == 1 && !k->storage->borrowed &&
        !k->storage->release && !k->grad_fn && !k->grad) {
        if (k->dtype == spec->dtype && k->ndim == spec->ndim && k->offset == 0 &&
            same_dims(k->sizes, spec->sizes, spec->ndim)) { /* as last time */
            k->flags = 0;
            k->requires_grad = false;
            return k;
        }
        int64_t numel = jag__numel(spec->sizes, spec->ndim);
        size_t nbytes = (size_t)numel * jag_dtype_size(spec->dtype);
        size_t cap = k->storage->capacity ? k->storage->capacity : k->storage->nbytes;
        if (nbytes <= cap && numel >= 0) {
            k->dtype = spec->dtype;
            k->ndim = spec->ndim;
            memcpy(k->sizes, spec->sizes, (size_t)spec->ndim * sizeof *k->sizes);
            jag__contiguous_strides(k->sizes, k->ndim, k->strides);
            k->offset = 0;
            k->flags = 0;
            k->requires_grad = false;
            k->storage->nbytes = nbytes;
            return k;
        }
    }
    jag_tensor *t = jag__tensor_from_spec(op, spec, false);
    if (!t) return NULL;
    jag_release(*keep);
    *keep = t;
    return t;
}

/* Empty slot v: its reference goes unless it is borrowed. */
static inline void slot_clear(jag_exec *e, int v) {
    if (!e->borrowed[v] && e->slots[v]) jag_release(e->slots[v]);
    e->slots[v] = NULL;
    e->borrowed[v] = false;
}

static jag_status run_flatten(jag_exec *e, const jag_instr *in, jag_tensor *x) {
    const jag_sym *s = in->sym;
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta meta = {0};
    jag_status st = jag__flatten_quiet(x, inner, &n, &meta);
    if (!st && n != s->n_out)
        st = jag__error(JAG_EINVAL, "jag_program_run: a %s tensor has %d inner tensors, expected %d", cls_name(x->subclass), n,
                        s->n_out);
    for (int k = 0; !st && k < n; k++) {
        jag_tensor **slot = &e->slots[s->outs[k]];
        if (!*slot) {
            *slot = inner[k], inner[k] = NULL;
            continue;
        }
        /* shared with an earlier input when traced: must be equal now */
        const jag_tensor *a = *slot, *b = inner[k];
        bool same = a == b;
        if (!same && a->dtype == b->dtype && a->ndim == b->ndim && a->storage && b->storage &&
            memcmp(a->sizes, b->sizes, (size_t)a->ndim * sizeof *a->sizes) == 0 && jag_is_contiguous(a) &&
            jag_is_contiguous(b))
            same = memcmp(jag__ptr(a), jag__ptr(b), (size_t)jag_numel(a) * jag_dtype_size(a->dtype)) == 0;
        if (!same)
            st = jag__error(JAG_EINVAL, "jag_program_run: '%s' must equal the '%s' it shared with an earlier input when traced",
                            e->trace->vars[s->outs[k]].name, e->trace->vars[s->outs[k]].name);
    }
    for (int k = 0; k < JAG_SUBCLASS_MAX_INNER; k++) jag_release(inner[k]);
    return st;
}

jag_status jag__fused_specs(const struct jag_fused *f, const jag_value *args, int nargs, jag_spec *specs);
jag_status jag__fused_run(struct jag_fused *f, const jag_value *args, int nargs, jag_tensor **outs);

/* Whether a direct instruction's operands have the shapes its specs were
 * computed for. */
static bool same_operand_shapes(const jag_exec *e, const jag_instr *in) {
    for (int j = 0; j < in->n_args; j++) {
        const jag_tensor *x = e->slots[in->arg_slot[j]];
        if (x->dtype != in->in_dtype[j] || x->ndim != in->in_ndim[j] || !same_dims(x->sizes, in->in_sizes[j], x->ndim))
            return false;
    }
    return true;
}

/* same_shapes: every operand has the shape it had in the last complete run
 * (the inputs do, and the program's shapes follow from them). */
static jag_status run_instr(jag_exec *e, jag_instr *in, bool same_shapes) {
    const jag_sym *s = in->sym;
    jag_value boxed[32];
    jag_tensor *lists[4][64];
    jag_value *a = in->argv;
    if (a) { /* boxed when lowered: set the tensors */
        for (int k = 0; k < in->n_args; k++) a[in->tpos[k]].u.t = e->slots[in->arg_slot[k]];
    } else {
        int nl = 0, k = 0;
        if (s->nargs > 32) return jag__error(JAG_ENOTIMPL, "jag_program_run: too many arguments");
        a = boxed;
        for (int i = 0; i < s->nargs; i++) {
            a[i] = s->args[i];
            if (a[i].kind == JAG_VAL_TENSOR) {
                a[i].u.t = e->slots[in->arg_slot[k++]];
            } else if (a[i].kind == JAG_VAL_TENSORS) {
                if (nl == 4 || a[i].u.tensors.n > 64) return jag__error(JAG_ENOTIMPL, "jag_program_run: tensor list too long");
                for (int j = 0; j < a[i].u.tensors.n; j++) lists[nl][j] = e->slots[in->arg_slot[k++]];
                a[i].u.tensors.v = lists[nl++];
            }
        }
        if (in->size_arg >= 0) a[in->size_arg].u.ints.v = in->dyn_ints;
    }
    if (in->size_arg >= 0)
        for (int j = 0; j < a[in->size_arg].u.ints.n; j++)
            if (in->dyn_cand[j] >= 0) in->dyn_ints[j] = e->cand_value[in->dyn_cand[j]];
    jag_tensor *outs[JAG_SUBCLASS_MAX_INNER] = {0};
    bool kept = false; /* outs are kept buffers, borrowed */
    jag_status st = JAG_OK;
    switch (s->kind) {
    case JAG_SYM_FLATTEN: return run_flatten(e, in, (jag_tensor *)a[0].u.t);
    case JAG_SYM_UNFLATTEN:
    case JAG_SYM_CTOR: {
        jag_tensor *inner[JAG_SUBCLASS_MAX_INNER];
        for (int i = 0; i < s->nargs; i++) inner[i] = (jag_tensor *)a[i].u.t;
        jag__enter();
        st = jag__leave(jag_subclass_unflatten(s->cls, inner, s->nargs, &s->meta, &outs[0]), NULL, 0);
        break;
    }
    case JAG_SYM_FUSED: {
        jag_spec specs[JAG_SUBCLASS_MAX_INNER];
        kept = true;
        st = jag__fused_specs(s->fused, a, s->nargs, specs);
        for (int i = 0; !st && i < s->n_out; i++)
            if (!(outs[i] = take_buffer(&e->keep[in->group[i]], &specs[i], "fused"))) st = jag_last_status();
        if (!st) st = jag__fused_run(s->fused, a, s->nargs, outs);
        break;
    }
    case JAG_SYM_OP: {
        const jag_op_info *info = &jag__ops[s->op];
        if (!in->direct) {
            st = jag__dispatch_untraced(s->op, a, s->nargs, outs);
            break;
        }
        /* the specs of the last run serve while the tensor arguments keep
         * their shapes, unless the op takes a size list read from the
         * inputs (full, mean_backward): its numbers change them */
        kept = true;
        if (!(in->have_specs && in->size_arg < 0 && (same_shapes || same_operand_shapes(e, in)))) {
            in->have_specs = false;
            st = info->meta(info->api_name, a, s->nargs, in->specs);
            if (!st && in->n_args <= 4) {
                for (int j = 0; j < in->n_args; j++) {
                    const jag_tensor *x = e->slots[in->arg_slot[j]];
                    in->in_dtype[j] = x->dtype, in->in_ndim[j] = x->ndim;
                    memcpy(in->in_sizes[j], x->sizes, (size_t)x->ndim * sizeof *x->sizes);
                }
                in->have_specs = true;
            }
        }
        for (int i = 0; !st && i < info->n_out; i++)
            if (!(outs[i] = take_buffer(&e->keep[in->group[i]], &in->specs[i], info->api_name))) st = jag_last_status();
        if (st) break;
        if (in->typed == JAG_TYPED_UNARY)
            st = jag__unary_kernel(info->api_name, (jag_unary_fn)in->fn, a[0].u.t, NULL, outs[0]);
        else if (in->typed == JAG_TYPED_ARITH)
            st = jag__binary_kernel(info->api_name, (jag_binary_fn)in->fn, a[0].u.t, in->b_scalar ? NULL : a[1].u.t,
                                    in->scalar, in->alpha, outs[0]->dtype, outs[0]);
        else
            st = info->cpu(info->api_name, a, s->nargs, outs);
        break;
    }
    case JAG_SYM_FUNCTION: break;
    }
    if (st) {
        if (!kept)
            for (int i = 0; i < JAG_SUBCLASS_MAX_INNER; i++) jag_release(outs[i]);
        return st;
    }
    for (int i = 0; i < s->n_out; i++) {
        slot_clear(e, s->outs[i]);
        e->slots[s->outs[i]] = outs[i];
        e->borrowed[s->outs[i]] = kept;
    }
    for (int i = 0; i < in->n_release; i++) slot_clear(e, in->release[i]);
    return JAG_OK;
}

/* Whether the inputs have the dtypes and shapes of the last complete run,
 * all plain, and the program's shapes follow from them. */
static bool inputs_as_last_run(const jag_exec *e, jag_tensor *const *inputs, int n_inputs) {
    if (!e->shapes_follow_inputs || !e->last_ok) return false;
    for (int i = 0; i < n_inputs; i++) {
        const jag_tensor *x = inputs[i];
        if (x->subclass || x->dtype != e->last_dtype[i] || x->ndim != e->last_ndim[i] ||
            !same_dims(x->sizes, e->last_sizes[i], x->ndim))
            return false;
    }
    return true;
}

static void remember_inputs(jag_exec *e, jag_tensor *const *inputs, int n_inputs) {
    bool plain = e->shapes_follow_inputs;
    for (int i = 0; plain && i < n_inputs; i++) {
        const jag_tensor *x = inputs[i];
        plain = !x->subclass;
        e->last_dtype[i] = x->dtype, e->last_ndim[i] = x->ndim;
        memcpy(e->last_sizes[i], x->sizes, (size_t)x->ndim * sizeof *x->sizes);
    }
    e->last_ok = plain;
}

jag_status jag__exec_run(jag_exec *e, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs, int n_outputs,
                         bool own_headers) {
    const jag_trace *t = e->trace;
    if (n_outputs != t->n_outputs)
        return jag__error(JAG_EINVAL, "jag_program_run: %d outputs asked, the program has %d", n_outputs, t->n_outputs);
    if (!outputs) return jag__error(JAG_EINVAL, "jag_program_run: argument 'outputs' is NULL");
    jag_status st = jag__exec_check(e, inputs, n_inputs, false);
    if (st) return st;
    bool same_shapes = inputs_as_last_run(e, inputs, n_inputs);
    e->last_ok = false; /* until this run completes */
    bool prev = jag_set_grad_enabled(false);
    jag__enter();
    /* the caller holds the inputs for the whole run: their slots borrow them */
    for (int i = 0; i < n_inputs; i++) {
        int v = t->inputs[i];
        slot_clear(e, v);
        e->slots[v] = inputs[i];
        e->borrowed[v] = true;
    }
    for (int i = 0; !st && i < e->n_code; i++) st = run_instr(e, &e->code[i], same_shapes);
    for (int i = 0; !st && i < n_outputs; i++)
        if (!e->slots[t->outputs[i]]) st = jag__error(JAG_EINTERNAL, "jag_program_run: output %d was not computed", i);
    jag_tensor *res[64] = {0};
    for (int i = 0; !st && i < n_outputs; i++) {
        jag_tensor *o = e->slots[t->outputs[i]];
        bool is_input = false;
        for (int k = 0; k < n_inputs; k++) is_input |= o == inputs[k];
        /* with own_headers (the outputs get a grad_fn next) a plain output
         * is handed out as a new header over its data; otherwise the tensor
         * itself (a kept buffer is reused once the caller lets it go) */
        if (is_input || o->subclass || !own_headers) {
            res[i] = jag_retain(o);
        } else {
            res[i] = jag__tensor_view(o, o->sizes, o->strides, o->ndim, o->offset);
            if (!res[i]) st = jag_last_status();
        }
    }
    if (st) { /* a run that stopped midway: every slot */
        for (int s = 0; s < e->n_slots; s++)
            if (!t->vars[s].constant) slot_clear(e, s);
    } else { /* the values no instruction let go: inputs, outputs, unused */
        for (int k = 0; k < e->n_leftover; k++) slot_clear(e, e->leftover[k]);
        remember_inputs(e, inputs, n_inputs);
    }
    jag__leave(st, NULL, 0);
    jag_set_grad_enabled(prev);
    if (st) {
        for (int i = 0; i < n_outputs; i++) jag_release(res[i]);
        return st;
    }
    for (int i = 0; i < n_outputs; i++) outputs[i] = res[i];
    return JAG_OK;
}

/* ---- programs ---------------------------------------------------------------------- */

struct jag_program {
    jag_exec *plain; /* forward only */
    jag_exec *fwd;   /* forward, then the values backward needs */
    jag_exec *bwd;   /* saved values and cotangents -> input gradients */
    int n_inputs, n_outputs, n_saved;
    int n_cot;           /* cotangents: forward outputs that require grad */
    int cot_of[64];      /* forward output of each cotangent */
    int n_grads;         /* gradient outputs: inputs that required grad */
    bool grad_fixed;     /* the forward or backward program fixes sizes */
    int grad_of[64];     /* input of each gradient output */
};

jag_status jag__apply_passes(const jag_trace *t, unsigned passes, jag_trace **out);

static jag_status compile_program(const jag_trace *t, unsigned passes, jag_program **out) {
    const char *op = "jag_trace_compile";
    if (!t || !out) return jag__error(JAG_EINVAL, "%s: arguments 't' and 'out' must not be NULL", op);
    jag_program *p = calloc(1, sizeof *p);
    if (!p) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    p->n_inputs = t->n_inputs;
    p->n_outputs = t->n_outputs;
    jag__enter();
    jag_trace *ft = NULL;
    jag_status st = jag__apply_passes(t, passes, &ft);
    if (!st) st = jag__exec_new(ft, &p->plain);
    jag_trace_free(ft);
    bool any_rg = false;
    for (int i = 0; i < t->n_inputs; i++) any_rg |= t->vars[t->inputs[i]].requires_grad;
    /* a backward program for compiled autograd (not for a trace that already
     * is a forward + backward) */
    if (!st && any_rg && t->n_outputs <= 4 && t->n_fwd_outputs == t->n_outputs) {
        jag_trace *g = NULL, *f = NULL, *b = NULL, *fp = NULL, *bp = NULL;
        st = jag_trace_grad(t, &g);
        if (!st) st = jag__apply_passes(g, passes & JAG_PASS_DESUGAR, &fp);
        if (!st) st = jag__trace_split(fp, &f, &b, &p->n_saved);
        jag_trace_free(fp), fp = NULL;
        if (!st) st = jag__apply_passes(f, passes & ~JAG_PASS_DESUGAR, &fp);
        if (!st) st = jag__apply_passes(b, passes & ~JAG_PASS_DESUGAR, &bp);
        if (!st) st = jag__exec_new(fp, &p->fwd);
        if (!st) st = jag__exec_new(bp, &p->bwd);
        if (!st) p->grad_fixed = p->fwd->fixed_sizes || p->bwd->fixed_sizes;
        if (!st) {
            for (int i = 0; i < t->n_outputs; i++)
                if (t->vars[t->outputs[i]].requires_grad) p->cot_of[p->n_cot++] = i;
            for (int i = 0; i < t->n_inputs; i++)
                if (t->vars[t->inputs[i]].requires_grad) p->grad_of[p->n_grads++] = i;
        }
        jag_trace_free(g), jag_trace_free(f), jag_trace_free(b), jag_trace_free(fp), jag_trace_free(bp);
    }
    jag__leave(st, NULL, 0);
    if (st) {
        jag_program_free(p);
        return st;
    }
    *out = p;
    return JAG_OK;
}

/* The public entry: nothing made while compiling lands in the caller's scope. */
jag_status jag_trace_compile(const jag_trace *t, unsigned passes, jag_program **out) {
    jag__enter();
    return jag__leave(compile_program(t, passes, out), NULL, 0);
}

void jag_program_free(jag_program *p) {
    if (!p) return;
    jag__exec_release(p->plain), jag__exec_release(p->fwd), jag__exec_release(p->bwd);
    free(p);
}

const jag_trace *jag_program_trace(const jag_program *p) { return p ? p->plain->trace : NULL; }
const jag_trace *jag_program_backward_trace(const jag_program *p) { return p && p->bwd ? p->bwd->trace : NULL; }

/* What the autograd node of one run keeps. */
typedef struct {
    jag_exec *bwd;
    jag_tensor **saved;
    int64_t *saved_versions; /* their versions after the forward pass */
    int n_saved;
    int n_cot, cot_of[64], n_grads, grad_of[64], n_inputs;
} run_state;

static void free_run_state(void *p) {
    run_state *r = p;
    for (int i = 0; i < r->n_saved; i++) jag_release(r->saved[i]);
    free(r->saved);
    free(r->saved_versions);
    jag__exec_release(r->bwd);
    free(r);
}

static jag_status run_backward(void *state, jag_tensor *const *grad_outputs, int n_out, jag_tensor **grad_inputs,
                               int n_in) {
    (void)n_out;
    run_state *r = state;
    /* what the forward pass saved (inputs among them) must be unchanged */
    for (int i = 0; i < r->n_saved; i++) {
        int64_t now = jag__tensor_version(r->saved[i]);
        if (now != r->saved_versions[i]) {
            char s[JAG_SHAPE_BUF];
            const jag_tensor *t = r->saved[i];
            return jag__error(JAG_ESTATE,
                              "jag_backward: tensor %d that the compiled program saved for its gradient (%s %s) was "
                              "modified by an in-place op after the forward pass (its version was %lld, now %lld); "
                              "change it after backward, or pass a clone",
                              i, jag_dtype_name(t->dtype), jag__shape_str(t->sizes, t->ndim, s, sizeof s),
                              (long long)r->saved_versions[i], (long long)now);
        }
    }
    int n = r->n_saved + r->n_cot;
    jag_tensor **in = malloc((size_t)(n ? n : 1) * sizeof *in), *g[64] = {0};
    if (!in) return jag__error(JAG_ENOMEM, "compiled backward: out of memory");
    for (int i = 0; i < r->n_saved; i++) in[i] = r->saved[i];
    for (int i = 0; i < r->n_cot; i++) in[r->n_saved + i] = grad_outputs[r->cot_of[i]];
    jag_status st = jag__exec_run(r->bwd, in, n, g, r->n_grads, false);
    free(in);
    if (st) return st;
    for (int i = 0; i < r->n_grads; i++) {
        int k = r->grad_of[i];
        if (k < n_in) grad_inputs[k] = g[i];
        else jag_release(g[i]);
    }
    return JAG_OK;
}

static jag_status run_program(jag_program *p, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs,
                              int n_outputs) {
    if (!p) return jag__error(JAG_EINVAL, "jag_program_run: argument 'p' is NULL");
    bool want = false;
    if (jag_is_grad_enabled() && inputs)
        for (int i = 0; i < n_inputs && i < p->n_inputs; i++) want |= inputs[i] && inputs[i]->requires_grad;
    if (want && !p->bwd) {
        for (int i = 0; i < n_inputs; i++)
            if (inputs[i] && inputs[i]->requires_grad)
                return jag__error(JAG_EINVAL, "jag_program_run: input %d ('%s') requires grad, but the program was traced with no input requiring grad; trace it again, or turn grad mode off",
                                  i, p->plain->sig[i].name);
    }
    if (!want) return jag__exec_run(p->plain, inputs, n_inputs, outputs, n_outputs, false);
    for (int i = 0; i < n_inputs && i < p->n_inputs; i++)
        if (inputs[i] && inputs[i]->requires_grad && !p->plain->sig[i].requires_grad)
            return jag__error(JAG_EINVAL, "jag_program_run: input %d ('%s') requires grad, but it did not when traced", i,
                              p->plain->sig[i].name);
    if (n_outputs != p->n_outputs)
        return jag__error(JAG_EINVAL, "jag_program_run: %d outputs asked, the program has %d", n_outputs, p->n_outputs);
    if (!outputs) return jag__error(JAG_EINVAL, "jag_program_run: argument 'outputs' is NULL");
    /* the backward's sizes are fixed by its trace: check them now, before
     * anything runs */
    jag_status cst = jag__exec_check(p->plain, inputs, n_inputs, p->grad_fixed);
    if (cst) return cst;
    int n_all = p->n_outputs + p->n_saved;
    jag_tensor **all = calloc((size_t)n_all, sizeof *all);
    run_state *r = calloc(1, sizeof *r);
    if (!all || !r) {
        free(all), free(r);
        return jag__error(JAG_ENOMEM, "jag_program_run: out of memory");
    }
    jag_status st = jag__exec_run(p->fwd, inputs, n_inputs, all, n_all, true);
    if (st) {
        free(all), free(r);
        return st;
    }
    r->bwd = p->bwd;
    atomic_fetch_add(&p->bwd->refcount, 1);
    r->n_saved = p->n_saved;
    r->saved = malloc((size_t)(p->n_saved ? p->n_saved : 1) * sizeof *r->saved);
    r->saved_versions = malloc((size_t)(p->n_saved ? p->n_saved : 1) * sizeof *r->saved_versions);
    r->n_cot = p->n_cot, r->n_grads = p->n_grads, r->n_inputs = n_inputs;
    memcpy(r->cot_of, p->cot_of, sizeof r->cot_of);
    memcpy(r->grad_of, p->grad_of, sizeof r->grad_of);
    if (!r->saved || !r->saved_versions) {
        for (int i = 0; i < n_all; i++) jag_release(all[i]);
        free(all);
        r->n_saved = 0;
        free_run_state(r);
        return jag__error(JAG_ENOMEM, "jag_program_run: out of memory");
    }
    for (int i = 0; i < p->n_saved; i++) {
        r->saved[i] = all[p->n_outputs + i];
        r->saved_versions[i] = jag__tensor_version(r->saved[i]);
    }
    st = jag__autograd_attach("compiled program", inputs, n_inputs, all, p->n_outputs, run_backward, r, free_run_state);
    if (st) {
        for (int i = 0; i < p->n_outputs; i++) jag_release(all[i]);
        free(all);
        return st;
    }
    for (int i = 0; i < p->n_outputs; i++) outputs[i] = all[i];
    free(all);
    return JAG_OK;
}

/* The public entry: the outputs are recorded in the caller's open scope, as
 * every new tensor is; nothing else made while running is. */
jag_status jag_program_run(jag_program *p, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs,
                           int n_outputs) {
    jag__enter();
    jag_status st = run_program(p, inputs, n_inputs, outputs, n_outputs);
    return jag__leave(st, outputs, st == JAG_OK ? n_outputs : 0);
}

jag_exec *jag__program_plain(const jag_program *p) { return p->plain; }
bool jag__program_grad_fixed(const jag_program *p) { return p->bwd && p->grad_fixed; }

jag_status jag__program_make_static(jag_program *p) {
    jag_exec *e[3] = {p->plain, p->fwd, p->bwd};
    int n = p->fwd ? 3 : 1;
    bool guesses = false;
    for (int i = 0; i < n; i++) guesses |= jag__exec_guesses(e[i]);
    jag_status st = JAG_OK;
    for (int i = 0; guesses && !st && i < n; i++) st = jag__exec_make_static(e[i]);
    if (!st && guesses) p->grad_fixed = false;
    return st;
}

jag_status jag__program_generalize(jag_program *p, const jag_program *q, bool *merged) {
    *merged = false;
    if (!p->plain->generalized || !p->fwd != !q->fwd || p->n_saved != q->n_saved || p->n_cot != q->n_cot ||
        p->n_grads != q->n_grads)
        return JAG_OK;
    jag_exec *a[3] = {p->plain, p->fwd, p->bwd};
    const jag_exec *b[3] = {q->plain, q->fwd, q->bwd};
    return jag__execs_generalize(a, b, p->fwd ? 3 : 1, merged);
}
