/* printer.c — a trace as readable source: a header comment per input, one
 * symbol a line with the output's type in a comment, the return. */
#include "trace.h"
#include "../subclass/nested.h"

#include <stdio.h>

typedef struct {
    char *buf;
    size_t cap, len;
} out_buf;

static void put(out_buf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_buf *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->len < o->cap ? o->buf + o->len : NULL, o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

static const char *short_dtype(jag_dtype d) {
    switch (d) {
    case JAG_FLOAT32: return "f32";
    case JAG_FLOAT64: return "f64";
    case JAG_INT32: return "i32";
    case JAG_INT64: return "i64";
    case JAG_BOOL: return "bool";
    default: return "?";
    }
}

/* j<k>: ragged ids numbered in order of first appearance among the trace's
 * variables. */
static int ragged_index(const jag_trace *t, int64_t id) {
    int64_t seen[64];
    int n = 0;
    for (int v = 0; v < t->n_vars; v++) {
        nested_state *s = jag__nested(t->vars[v].proxy);
        if (!s) continue;
        int64_t r = atomic_load(&s->ragged_id);
        int k = 0;
        while (k < n && seen[k] != r) k++;
        if (k == n && n < 64) seen[n++] = r;
        if (r == id) return k;
    }
    return -1;
}

static void put_shape(out_buf *o, const jag_trace *t, const jag_tensor *p) {
    nested_state *s = jag__nested(p);
    put(o, "%s[", short_dtype(p->dtype));
    for (int d = 0; d < p->ndim; d++) {
        if (d) put(o, ", ");
        if (p->sizes[d] < 0 && s) put(o, "j%d", ragged_index(t, atomic_load(&s->ragged_id)));
        else if (p->sizes[d] < 0) put(o, "?");
        else put(o, "%lld", (long long)p->sizes[d]);
    }
    put(o, "]");
}

static void put_type(out_buf *o, const jag_trace *t, const jag_tensor *p) {
    if (p->subclass) {
        nested_state *s = jag__nested(p);
        if (s) put(o, "nested(%s) ", s->layout == JAG_JAGGED ? "jagged" : "strided");
        else put(o, "%s ", jag_subclass_name(p->subclass));
    }
    put_shape(o, t, p);
}

static const char *var_name(const jag_trace *t, const jag_tensor *p) {
    int v = jag__trace_var(t, p);
    return v >= 0 ? t->vars[v].name : "?";
}

static void put_args(out_buf *o, const jag_trace *t, const jag_value *args, int nargs) {
    for (int i = 0; i < nargs; i++) {
        const jag_value *a = &args[i];
        if (i) put(o, ", ");
        switch (a->kind) {
        case JAG_VAL_NONE: put(o, "None"); break;
        case JAG_VAL_TENSOR: put(o, "%s", var_name(t, a->u.t)); break;
        case JAG_VAL_INT: put(o, "%lld", (long long)a->u.i); break;
        case JAG_VAL_DOUBLE: put(o, "%.9g", a->u.d); break;
        case JAG_VAL_BOOL: put(o, "%s", a->u.b ? "True" : "False"); break;
        case JAG_VAL_INTS:
            put(o, "[");
            for (int k = 0; k < a->u.ints.n; k++) put(o, "%s%lld", k ? ", " : "", (long long)a->u.ints.v[k]);
            put(o, "]");
            break;
        case JAG_VAL_TENSORS:
            put(o, "[");
            for (int k = 0; k < a->u.tensors.n; k++) put(o, "%s%s", k ? ", " : "", var_name(t, a->u.tensors.v[k]));
            put(o, "]");
            break;
        }
    }
}

static void put_outs(out_buf *o, const jag_trace *t, const int *outs, int n) {
    for (int i = 0; i < n; i++) put(o, "%s%s", i ? ", " : "", t->vars[outs[i]].name);
}

/* pad the current line to `col` characters, then the comment */
static void comment_types(out_buf *o, size_t line_start, const jag_trace *t, const int *outs, int n) {
    size_t col = 40, used = o->len - line_start;
    put(o, "%*s# ", used < col ? (int)(col - used) : 1, "");
    for (int i = 0; i < n; i++) {
        if (i) put(o, ", ");
        put_type(o, t, t->vars[outs[i]].proxy);
    }
}

void jag__fused_format(const struct jag_fused *f, const jag_trace *t, char *buf, size_t cap);

static void put_sym(out_buf *o, const jag_trace *t, const jag_sym *s) {
    size_t start = o->len;
    put(o, "  ");
    switch (s->kind) {
    case JAG_SYM_OP:
        put_outs(o, t, s->outs, s->n_out);
        put(o, " = %s(", jag__ops[s->op].name);
        put_args(o, t, s->args, s->nargs);
        put(o, ")");
        comment_types(o, start, t, s->outs, s->n_out);
        break;
    case JAG_SYM_FLATTEN:
        put_outs(o, t, s->outs, s->n_out);
        put(o, " = flatten(");
        put_args(o, t, s->args, s->nargs);
        put(o, ")");
        break;
    case JAG_SYM_UNFLATTEN:
    case JAG_SYM_CTOR:
        put_outs(o, t, s->outs, s->n_out);
        put(o, " = %s[%s](", s->kind == JAG_SYM_CTOR ? "subclass_ctor" : "unflatten", jag_subclass_name(s->cls));
        put_args(o, t, s->args, s->nargs);
        put(o, ")");
        comment_types(o, start, t, s->outs, s->n_out);
        break;
    case JAG_SYM_FUNCTION:
        put(o, "# ");
        put_outs(o, t, s->outs, s->n_out);
        put(o, " <- autograd_function[%s](", s->fdef.name ? s->fdef.name : "?");
        put_args(o, t, s->args, s->nargs);
        put(o, "): the %d symbol%s above; grad runs its backward", s->end - s->begin, s->end - s->begin == 1 ? "" : "s");
        break;
    case JAG_SYM_FUSED: {
        char desc[512];
        jag__fused_format(s->fused, t, desc, sizeof desc);
        put_outs(o, t, s->outs, s->n_out);
        put(o, " = fused[%s](", desc);
        put_args(o, t, s->args, s->nargs);
        put(o, ")");
        comment_types(o, start, t, s->outs, s->n_out);
        break;
    }
    }
    put(o, "\n");
}

/* "(values f32[9, 2], offsets i64[4])": the inner tensors of a subclass
 * input, named by the part after "<input>_" */
static void put_inner(out_buf *o, const jag_trace *t, int input) {
    for (int i = 0; i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        if (s->kind != JAG_SYM_FLATTEN || s->args[0].u.t != t->vars[input].proxy) continue;
        put(o, "  (");
        size_t pre = strlen(t->vars[input].name);
        for (int k = 0; k < s->n_out; k++) {
            const char *nm = t->vars[s->outs[k]].name;
            if (strncmp(nm, t->vars[input].name, pre) == 0 && nm[pre] == '_') nm += pre + 1;
            put(o, "%s%s ", k ? ", " : "", nm);
            put_shape(o, t, t->vars[s->outs[k]].proxy);
        }
        put(o, ")");
        return;
    }
}

size_t jag_trace_format(const jag_trace *t, char *buf, size_t cap) {
    if (!buf) cap = 0; /* a NULL buffer only measures, as jag_format */
    out_buf o = {buf, cap, 0};
    if (cap) buf[0] = 0;
    if (!t) return 0;
    put(&o, "def computation(");
    for (int i = 0; i < t->n_inputs; i++) put(&o, "%s%s", i ? ", " : "", t->vars[t->inputs[i]].name);
    put(&o, "):\n");
    for (int i = 0; i < t->n_inputs; i++) {
        const jag_tvar *v = &t->vars[t->inputs[i]];
        put(&o, "  # %s: ", v->name);
        put_type(&o, t, v->proxy);
        if (v->proxy->subclass) put_inner(&o, t, t->inputs[i]);
        if (v->requires_grad) put(&o, "  requires_grad");
        put(&o, "\n");
    }
    for (int c = 0; c < t->n_vars; c++) {
        if (!t->vars[c].constant) continue;
        bool used = false;
        for (int i = 0; i < t->n_syms && !used; i++)
            for (int k = 0; k < jag__sym_n_inputs(&t->syms[i]) && !used; k++)
                used = jag__sym_input(&t->syms[i], k) == t->vars[c].proxy;
        for (int i = 0; i < t->n_outputs && !used; i++) used = t->outputs[i] == c;
        if (!used) continue;
        put(&o, "  # %s: constant ", t->vars[c].name);
        put_type(&o, t, t->vars[c].proxy);
        put(&o, "\n");
    }
    for (int i = 0; i < t->n_syms; i++) put_sym(&o, t, &t->syms[i]);
    put(&o, "  return ");
    put_outs(&o, t, t->outputs, t->n_outputs);
    put(&o, "\n");
    return o.len;
}

void jag_trace_print(const jag_trace *t) {
    size_t n = jag_trace_format(t, NULL, 0);
    char *buf = malloc(n + 1);
    if (!buf) return;
    jag_trace_format(t, buf, n + 1);
    fputs(buf, stdout);
    free(buf);
}
