/* compile.c — passes in order, and compiled functions: one program per kind
 * of inputs, traced and compiled on first sight of that kind. A program
 * whose size lists hold numbers that may be input sizes or constants runs
 * only on its traced sizes until a later trace of other sizes shows which
 * they are (generalize.c). */
#include "program.h"

jag_status jag__apply_passes(const jag_trace *t, unsigned passes, jag_trace **out) {
    jag_trace *cur = NULL;
    jag_status st = jag__trace_clone(t, &cur);
    jag_status (*pass[3])(const jag_trace *, jag_trace **) = {jag_trace_desugar, jag_trace_dce, jag_trace_fuse};
    unsigned bit[3] = {JAG_PASS_DESUGAR, JAG_PASS_DCE, JAG_PASS_FUSE};
    for (int i = 0; !st && i < 3; i++) {
        if (!(passes & bit[i])) continue;
        jag_trace *next = NULL;
        st = pass[i](cur, &next);
        jag_trace_free(cur);
        cur = st ? NULL : next;
    }
    if (st) {
        jag_trace_free(cur);
        return st;
    }
    *out = cur;
    return JAG_OK;
}

typedef struct entry {
    jag_program *program;
    bool grad; /* traced with inputs requiring grad */
} entry;

struct jag_compiled {
    jag_traced_fn fn;
    void *ctx;
    int n_outputs;
    unsigned passes;
    entry *entries;
    int n, cap;
};

jag_status jag_compile(jag_traced_fn fn, void *ctx, int n_outputs, unsigned passes, jag_compiled **out) {
    if (!fn || !out) return jag__error(JAG_EINVAL, "jag_compile: arguments 'fn' and 'out' must not be NULL");
    if (n_outputs < 1 || n_outputs > 64)
        return jag__error(JAG_EINVAL, "jag_compile: argument 'n_outputs' is %d, expected 1..64", n_outputs);
    jag_compiled *c = calloc(1, sizeof *c);
    if (!c) return jag__error(JAG_ENOMEM, "jag_compile: out of memory");
    c->fn = fn, c->ctx = ctx, c->n_outputs = n_outputs, c->passes = passes;
    *out = c;
    return JAG_OK;
}

struct jag_program;
jag_exec *jag__program_plain(const jag_program *p);
bool jag__program_grad_fixed(const jag_program *p);

/* Whether program p takes these inputs (kind, and requires_grad as it
 * matters now). */
static bool fits(const entry *e, jag_tensor *const *inputs, int n) {
    jag_exec *x = jag__program_plain(e->program);
    if (x->trace->n_inputs != n) return false;
    bool grad = jag_is_grad_enabled();
    for (int i = 0; i < n; i++)
        if (inputs[i] && (grad && inputs[i]->requires_grad) != x->sig[i].requires_grad) return false;
    bool any_rg = false;
    for (int i = 0; i < n; i++) any_rg |= grad && inputs[i]->requires_grad;
    jag_status st = jag__exec_check(x, inputs, n, any_rg && jag__program_grad_fixed(e->program));
    if (st) jag_clear_error();
    return st == JAG_OK;
}

/* At most this many programs per compiled function: a new kind of inputs
 * beyond it replaces the oldest program. */
#define MAX_PROGRAMS 64

static jag_status add_program(jag_compiled *c, jag_tensor *const *inputs, int n, entry **out) {
    if (c->n == MAX_PROGRAMS) {
        jag_program_free(c->entries[0].program);
        memmove(c->entries, c->entries + 1, (size_t)(c->n - 1) * sizeof *c->entries);
        c->n--;
    }
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 4;
        entry *g = realloc(c->entries, (size_t)cap * sizeof *g);
        if (!g) return jag__error(JAG_ENOMEM, "jag_compiled_call: out of memory");
        c->entries = g, c->cap = cap;
    }
    /* trace with requires_grad as it matters now */
    bool grad = jag_is_grad_enabled();
    jag_trace *t = NULL;
    jag_status st = jag_trace_function(c->fn, c->ctx, inputs, n, NULL, c->n_outputs, &t);
    if (!st && !grad)
        for (int i = 0; i < t->n_inputs; i++) t->vars[t->inputs[i]].requires_grad = false;
    jag_program *p = NULL;
    if (!st) st = jag_trace_compile(t, c->passes, &p);
    jag_trace_free(t);
    /* runs only on these sizes until a later trace shows what its size lists
     * read from the inputs (generalize.c) */
    if (!st) st = jag__program_make_static(p);
    if (st) {
        jag_program_free(p);
        return st;
    }
    c->entries[c->n] = (entry){p, grad};
    *out = &c->entries[c->n++];
    return JAG_OK;
}

static jag_status compiled_call(jag_compiled *c, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs,
                                int n_outputs) {
    if (!c || !outputs || (n_inputs > 0 && !inputs))
        return jag__error(JAG_EINVAL, "jag_compiled_call: arguments 'c', 'inputs' and 'outputs' must not be NULL");
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i]) return jag__error(JAG_EINVAL, "jag_compiled_call: input %d is NULL", i);
    entry *e = NULL;
    for (int i = 0; i < c->n && !e; i++)
        if (fits(&c->entries[i], inputs, n_inputs)) e = &c->entries[i];
    if (!e) {
        jag_status st = add_program(c, inputs, n_inputs, &e);
        if (st) return st;
        /* the new trace may show how an earlier program's size lists follow
         * the input sizes (generalize.c): that one then serves these inputs
         * too */
        for (int i = 0; i < c->n - 1; i++) {
            entry *old = &c->entries[i];
            bool merged = false;
            if (old->grad != e->grad) continue;
            if ((st = jag__program_generalize(old->program, e->program, &merged))) return st;
            if (merged && fits(old, inputs, n_inputs)) {
                jag_program_free(e->program);
                c->n--;
                e = old;
                break;
            }
        }
    }
    return jag_program_run(e->program, inputs, n_inputs, outputs, n_outputs);
}

/* The public entry: the outputs are recorded in the caller's open scope, as
 * every new tensor is; nothing made while tracing and compiling is (the
 * traced function runs with no scope of the caller's open, see trace.c). */
jag_status jag_compiled_call(jag_compiled *c, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs,
                             int n_outputs) {
    jag__enter();
    jag_status st = compiled_call(c, inputs, n_inputs, outputs, n_outputs);
    return jag__leave(st, outputs, st == JAG_OK ? n_outputs : 0);
}

int jag_compiled_num_programs(const jag_compiled *c) { return c ? c->n : 0; }

void jag_compiled_free(jag_compiled *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) jag_program_free(c->entries[i].program);
    free(c->entries);
    free(c);
}
