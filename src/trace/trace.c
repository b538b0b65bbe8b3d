/* trace.c — traces and the recorder: the TRACE key of the dispatcher, input
 * proxies, constants, subclass construction and custom autograd functions
 * under tracing, and jag_trace. */
#include "trace.h"
#include "../autograd/autograd.h"
#include "../subclass/nested.h"

#include <stdio.h>

/* ---- the trace object ---------------------------------------------------- */

jag_trace *jag__trace_new(void) {
    jag_trace *t = calloc(1, sizeof *t);
    return t;
}

static size_t hash_ptr(const void *p, int cap) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 20) & (size_t)(cap - 1);
}

int jag__trace_var(const jag_trace *t, const jag_tensor *p) {
    if (!t->map_cap || !p) return -1;
    for (size_t i = hash_ptr(p, t->map_cap);; i = (i + 1) & (size_t)(t->map_cap - 1)) {
        int v = t->map[i];
        if (!v) return -1;
        if (t->vars[v - 1].proxy == p) return v - 1;
    }
}

static bool map_grow(jag_trace *t) {
    int cap = t->map_cap ? t->map_cap * 2 : 64;
    int *m = calloc((size_t)cap, sizeof *m);
    if (!m) return false;
    free(t->map);
    t->map = m;
    t->map_cap = cap;
    for (int v = 0; v < t->n_vars; v++) {
        size_t i = hash_ptr(t->vars[v].proxy, cap);
        while (m[i]) i = (i + 1) & (size_t)(cap - 1);
        m[i] = v + 1;
    }
    return true;
}

int jag__trace_add_var(jag_trace *t, jag_tensor *p, const char *name, int def) {
    if (t->n_vars == t->cap_vars) {
        int cap = t->cap_vars ? t->cap_vars * 2 : 32;
        jag_tvar *g = realloc(t->vars, (size_t)cap * sizeof *g);
        if (!g) return jag__error(JAG_ENOMEM, "trace: out of memory"), -1;
        t->vars = g, t->cap_vars = cap;
    }
    if ((t->n_vars + 1) * 2 > t->map_cap && !map_grow(t)) return jag__error(JAG_ENOMEM, "trace: out of memory"), -1;
    int v = t->n_vars++;
    jag_tvar *var = &t->vars[v];
    memset(var, 0, sizeof *var);
    var->proxy = jag_retain(p);
    var->def = def;
    if (name) snprintf(var->name, sizeof var->name, "%s", name);
    else snprintf(var->name, sizeof var->name, "t%d", t->next_tmp++);
    size_t i = hash_ptr(p, t->map_cap);
    while (t->map[i]) i = (i + 1) & (size_t)(t->map_cap - 1);
    t->map[i] = v + 1;
    return v;
}

int jag__trace_copy_var(jag_trace *dst, const jag_trace *src, int v) {
    int have = jag__trace_var(dst, src->vars[v].proxy);
    if (have >= 0) return have;
    int n = jag__trace_add_var(dst, src->vars[v].proxy, src->vars[v].name, -1);
    if (n < 0) return -1;
    dst->vars[n].requires_grad = src->vars[v].requires_grad;
    dst->vars[n].constant = jag_retain(src->vars[v].constant);
    if (dst->next_tmp < src->next_tmp) dst->next_tmp = src->next_tmp;
    if (dst->next_const < src->next_const) dst->next_const = src->next_const;
    return n;
}

jag_status jag__copy_values(const jag_value *args, int nargs, jag_value **out) {
    jag_value *c = calloc((size_t)(nargs ? nargs : 1), sizeof *c);
    if (!c) return jag__error(JAG_ENOMEM, "trace: out of memory");
    for (int i = 0; i < nargs; i++) {
        jag_value v = args[i];
        if (v.kind == JAG_VAL_INTS) {
            int64_t *p = malloc((size_t)(v.u.ints.n ? v.u.ints.n : 1) * sizeof *p);
            if (!p) return jag__free_values(c, i), jag__error(JAG_ENOMEM, "trace: out of memory");
            if (v.u.ints.n) memcpy(p, v.u.ints.v, (size_t)v.u.ints.n * sizeof *p);
            v.u.ints.v = p;
        } else if (v.kind == JAG_VAL_TENSORS) {
            jag_tensor **p = malloc((size_t)(v.u.tensors.n ? v.u.tensors.n : 1) * sizeof *p);
            if (!p) return jag__free_values(c, i), jag__error(JAG_ENOMEM, "trace: out of memory");
            if (v.u.tensors.n) memcpy(p, v.u.tensors.v, (size_t)v.u.tensors.n * sizeof *p);
            v.u.tensors.v = p;
        }
        c[i] = v;
    }
    *out = c;
    return JAG_OK;
}

void jag__free_values(jag_value *args, int nargs) {
    if (!args) return;
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == JAG_VAL_INTS) free((void *)args[i].u.ints.v);
        else if (args[i].kind == JAG_VAL_TENSORS) free((void *)args[i].u.tensors.v);
    }
    free(args);
}

void jag__autograd_ctx_free(jag_autograd_ctx *ctx);

void jag__sym_clear(jag_sym *s) {
    jag__free_values(s->args, s->nargs);
    free(s->outs);
    if (s->fctx && atomic_fetch_sub(&s->fctx->refcount, 1) == 1) {
        jag__autograd_ctx_free(s->fctx->ctx);
        free(s->fctx);
    }
    if (s->fused) jag__fused_free(s->fused);
    memset(s, 0, sizeof *s);
}

int jag__trace_add_sym(jag_trace *t, jag_sym_kind kind, jag_op_id op, const jag_value *args, int nargs,
                       const int *outs, int n_out) {
    if (t->n_syms == t->cap_syms) {
        int cap = t->cap_syms ? t->cap_syms * 2 : 32;
        jag_sym *g = realloc(t->syms, (size_t)cap * sizeof *g);
        if (!g) return jag__error(JAG_ENOMEM, "trace: out of memory"), -1;
        t->syms = g, t->cap_syms = cap;
    }
    jag_sym s = {.kind = kind, .op = op, .nargs = nargs, .n_out = n_out};
    if (jag__copy_values(args, nargs, &s.args)) return -1;
    s.outs = malloc((size_t)(n_out ? n_out : 1) * sizeof *s.outs);
    if (!s.outs) {
        jag__free_values(s.args, nargs);
        return jag__error(JAG_ENOMEM, "trace: out of memory"), -1;
    }
    if (n_out) memcpy(s.outs, outs, (size_t)n_out * sizeof *outs);
    jag_recorder *r = jag__recorder();
    s.backward = r && r->trace == t && r->backward;
    t->syms[t->n_syms] = s;
    return t->n_syms++;
}

int jag__sym_n_inputs(const jag_sym *s) {
    int n = 0;
    for (int i = 0; i < s->nargs; i++)
        n += s->args[i].kind == JAG_VAL_TENSOR ? 1 : s->args[i].kind == JAG_VAL_TENSORS ? s->args[i].u.tensors.n : 0;
    return n;
}

const jag_tensor *jag__sym_input(const jag_sym *s, int k) { return jag__grad_input(s->args, s->nargs, k); }

int jag__trace_copy_sym(jag_trace *dst, const jag_trace *src, const jag_sym *s, jag_tensor *(*subst)(void *, const jag_tensor *),
                        void *ctx) {
    jag_value a[64];
    jag_tensor *lists[4][64];
    int nl = 0;
    if (s->nargs > 64) return jag__error(JAG_ENOTIMPL, "trace: too many arguments"), -1;
    for (int i = 0; i < s->nargs; i++) {
        a[i] = s->args[i];
        if (a[i].kind == JAG_VAL_TENSOR) {
            const jag_tensor *p = subst ? subst(ctx, a[i].u.t) : a[i].u.t;
            if (jag__trace_var(dst, p) < 0) {
                int v = jag__trace_var(src, p);
                if (v < 0 || jag__trace_copy_var(dst, src, v) < 0)
                    return jag__error(JAG_EINTERNAL, "trace: argument %d of a symbol is not a variable", i), -1;
            }
            a[i].u.t = p;
        } else if (a[i].kind == JAG_VAL_TENSORS) {
            if (nl == 4 || a[i].u.tensors.n > 64) return jag__error(JAG_ENOTIMPL, "trace: tensor list too long"), -1;
            for (int j = 0; j < a[i].u.tensors.n; j++) {
                jag_tensor *p = subst ? subst(ctx, a[i].u.tensors.v[j]) : a[i].u.tensors.v[j];
                if (jag__trace_var(dst, p) < 0) {
                    int v = jag__trace_var(src, p);
                    if (v < 0 || jag__trace_copy_var(dst, src, v) < 0)
                        return jag__error(JAG_EINTERNAL, "trace: argument %d of a symbol is not a variable", i), -1;
                }
                lists[nl][j] = p;
            }
            a[i].u.tensors.v = lists[nl++];
        }
    }
    int outs[64];
    if (s->n_out > 64) return jag__error(JAG_ENOTIMPL, "trace: too many outputs"), -1;
    int n = jag__trace_add_sym(dst, s->kind, s->op, a, s->nargs, outs, 0);
    if (n < 0) return -1;
    jag_sym *d = &dst->syms[n];
    for (int k = 0; k < s->n_out; k++) {
        int v = jag__trace_var(dst, src->vars[s->outs[k]].proxy);
        if (v < 0) v = jag__trace_copy_var(dst, src, s->outs[k]);
        if (v < 0) return -1;
        if (dst->vars[v].def < 0) dst->vars[v].def = n;
        outs[k] = v;
    }
    free(d->outs);
    d->outs = malloc((size_t)(s->n_out ? s->n_out : 1) * sizeof *d->outs);
    if (!d->outs) return jag__error(JAG_ENOMEM, "trace: out of memory"), -1;
    memcpy(d->outs, outs, (size_t)s->n_out * sizeof *outs);
    d->n_out = s->n_out;
    d->cls = s->cls;
    d->meta = s->meta;
    d->fdef = s->fdef;
    d->begin = s->begin, d->end = s->end;
    d->backward = s->backward;
    if (s->fctx) atomic_fetch_add(&s->fctx->refcount, 1), d->fctx = s->fctx;
    if (s->fused) d->fused = jag__fused_retain(s->fused);
    return n;
}

jag_status jag__trace_clone(const jag_trace *t, jag_trace **out) {
    jag_trace *c = jag__trace_new();
    if (!c || !(c->inputs = calloc((size_t)t->n_inputs + 1, sizeof *c->inputs)) ||
        !(c->outputs = calloc((size_t)t->n_outputs + 1, sizeof *c->outputs))) {
        jag_trace_free(c);
        return jag__error(JAG_ENOMEM, "trace: out of memory");
    }
    for (int v = 0; v < t->n_vars; v++)
        if (jag__trace_copy_var(c, t, v) != v) {
            jag_trace_free(c);
            return jag__error(JAG_ENOMEM, "trace: out of memory");
        }
    for (int v = 0; v < t->n_vars; v++) c->vars[v].def = t->vars[v].def;
    for (int i = 0; i < t->n_syms; i++)
        if (jag__trace_copy_sym(c, t, &t->syms[i], NULL, NULL) != i) {
            jag_trace_free(c);
            return jag_last_status() ? jag_last_status() : jag__error(JAG_EINTERNAL, "trace: clone failed");
        }
    memcpy(c->inputs, t->inputs, (size_t)t->n_inputs * sizeof *c->inputs);
    memcpy(c->outputs, t->outputs, (size_t)t->n_outputs * sizeof *c->outputs);
    c->n_inputs = t->n_inputs, c->n_outputs = t->n_outputs;
    c->n_fwd_inputs = t->n_fwd_inputs, c->n_fwd_outputs = t->n_fwd_outputs;
    c->next_tmp = t->next_tmp, c->next_const = t->next_const;
    *out = c;
    return JAG_OK;
}

void jag_trace_free(jag_trace *t) {
    if (!t) return;
    for (int i = 0; i < t->n_syms; i++) jag__sym_clear(&t->syms[i]);
    for (int v = 0; v < t->n_vars; v++) jag_release(t->vars[v].proxy), jag_release(t->vars[v].constant);
    free(t->syms), free(t->vars), free(t->inputs), free(t->outputs), free(t->map);
    free(t);
}

int jag_trace_num_inputs(const jag_trace *t) { return t ? t->n_inputs : -1; }
int jag_trace_num_outputs(const jag_trace *t) { return t ? t->n_outputs : -1; }
int jag_trace_num_symbols(const jag_trace *t) { return t ? t->n_syms : -1; }

/* ---- the recorder -------------------------------------------------------- */

JAG_TLS void *jag__trace_current;
#define current ((jag_recorder *)jag__trace_current)

void jag__recorder_push(jag_recorder *r, jag_trace *trace, jag_rec_mode mode) {
    memset(r, 0, sizeof *r);
    r->trace = trace;
    r->mode = mode;
    r->prev = current;
    jag__trace_current = r;
}

void jag__recorder_pop(jag_recorder *r) { jag__trace_current = r->prev; }
jag_recorder *jag__recorder(void) { return current; }

bool jag__tracing(void) { return current && !current->suppress; }

/* ---- proxies -------------------------------------------------------------- */

jag_tensor *jag__meta_like(const jag_tensor *t) {
    return jag__tensor_wrap(NULL, t->dtype, t->sizes, t->strides, t->ndim, 0);
}

jag_status jag__proxy_unflatten(const jag_subclass *cls, jag_tensor *const *inner, int n, const jag_subclass_meta *meta,
                                jag_tensor **out) {
    jag_status st;
    if (current) current->suppress++;
    jag__enter(); /* nothing recorded in the caller's scope (jag_subclass_wrap is public) */
    if (cls == jag__nested_class()) st = jag__nested_proxy(inner, n, meta, out);
    else st = jag_subclass_unflatten(cls, inner, n, meta, out);
    st = jag__leave(st, NULL, 0);
    if (current) current->suppress--;
    return st;
}

/* The class's flatten, with nothing recorded in the caller's scope. */
jag_status jag__flatten_quiet(const jag_tensor *t, jag_tensor **inner, int *n, jag_subclass_meta *meta) {
    jag__enter();
    jag_status st = jag_subclass_flatten(t, inner, n, meta);
    return jag__leave(st, NULL, 0);
}

static bool var_rg(const jag_trace *t, const jag_tensor *p) {
    int v = jag__trace_var(t, p);
    return v >= 0 && t->vars[v].requires_grad;
}

static bool is_float(const jag_tensor *t) { return jag_dtype_is_floating(t->dtype); }

static jag_status flatten_on_demand(jag_trace *t, const jag_tensor *a, jag_tensor **out) {
    for (int v = t->n_vars - 1; v >= 0; v--) {
        jag_tensor *p = t->vars[v].proxy;
        if (!p->subclass) continue;
        jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
        int n = 0, hit = -1;
        jag_subclass_meta meta = {0};
        if (jag__flatten_quiet(p, inner, &n, &meta)) {
            jag_clear_error();
            continue;
        }
        for (int k = 0; k < n; k++)
            if (inner[k] == a) hit = k;
        jag_status st = JAG_OK;
        if (hit >= 0) {
            jag_value args[] = {jag__v_tensor(p)};
            int ov[JAG_SUBCLASS_MAX_INNER] = {0};
            current->suppress++;
            int s = jag__trace_add_sym(t, JAG_SYM_FLATTEN, -1, args, 1, ov, n);
            current->suppress--;
            if (s < 0) st = jag_last_status();
            else t->syms[s].cls = p->subclass, t->syms[s].meta = meta;
            for (int k = 0; !st && k < n; k++) {
                int iv = jag__trace_var(t, inner[k]);
                if (iv < 0) iv = jag__trace_add_var(t, inner[k], NULL, s);
                if (iv < 0) st = jag_last_status();
                else t->syms[s].outs[k] = iv;
            }
            if (!st) *out = inner[hit];
        }
        for (int k = 0; k < n; k++) jag_release(inner[k]);
        if (hit >= 0) return st;
    }
    return JAG_ENOTIMPL;
}

/* The proxy standing for argument tensor a: a's own variable; for a plain
 * tensor with data, a constant (captured once). */
static jag_status proxy_of(jag_trace *t, const jag_tensor *a, const char *op, jag_tensor **out) {
    int v = jag__trace_var(t, a);
    if (v >= 0) {
        *out = t->vars[v].proxy;
        return JAG_OK;
    }
    for (int c = 0; c < t->n_vars; c++)
        if (t->vars[c].constant == a) {
            *out = t->vars[c].proxy;
            return JAG_OK;
        }
    if (a->subclass && current && current->mode == JAG_REC_DESUGAR) { /* a handler's result */
        *out = (jag_tensor *)a;
        return JAG_OK;
    }
    if (a->subclass)
        return jag__error(JAG_ENOTIMPL, "%s: a %s tensor that is not an input of the traced function; pass it as an input",
                          op, jag_subclass_name(a->subclass));
    if (jag__is_meta(a) && current && current->mode == JAG_REC_RECORD) {
        /* an inner tensor of a subclass value, reached into directly (a
         * derivative rule, a handler): flatten that value here */
        jag_status st = flatten_on_demand(t, a, out);
        if (st != JAG_ENOTIMPL) return st;
    }
    if (jag__is_meta(a))
        return jag__error(JAG_ENOTIMPL, "%s: a tensor without data that no traced op made (made outside the ops the tracer sees)", op);
    jag_tensor *p = jag__meta_like(a);
    if (!p) return jag_last_status();
    char name[24];
    snprintf(name, sizeof name, "c%d", t->next_const++);
    v = jag__trace_add_var(t, p, name, -1);
    jag_release(p);
    if (v < 0) return jag_last_status();
    t->vars[v].constant = jag_retain((jag_tensor *)a);
    *out = t->vars[v].proxy;
    return JAG_OK;
}

/* Boxed args with every tensor replaced by its proxy. Lists get arrays from
 * `lists` (caller frees with free_lists). */
#define MAX_LIST_ARGS 4
static jag_status map_args(jag_trace *t, const char *op, const jag_value *args, int nargs, jag_value *out,
                           jag_tensor ***lists, bool *any_sub, bool *any_rg) {
    int nl = 0;
    *any_sub = *any_rg = false;
    for (int i = 0; i < nargs; i++) {
        out[i] = args[i];
        if (args[i].kind == JAG_VAL_TENSOR) {
            jag_tensor *p;
            jag_status st = proxy_of(t, args[i].u.t, op, &p);
            if (st) return st;
            out[i].u.t = p;
            int v = jag__trace_var(t, p);
            *any_sub |= p->subclass != NULL;
            *any_rg |= v >= 0 && t->vars[v].requires_grad;
        } else if (args[i].kind == JAG_VAL_TENSORS) {
            int n = args[i].u.tensors.n;
            if (nl == MAX_LIST_ARGS) return jag__error(JAG_ENOTIMPL, "%s: too many tensor lists to trace", op);
            jag_tensor **l = calloc((size_t)(n ? n : 1), sizeof *l);
            if (!l) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
            lists[nl++] = l;
            for (int j = 0; j < n; j++) {
                jag_status st = proxy_of(t, args[i].u.tensors.v[j], op, &l[j]);
                if (st) return st;
                int v = jag__trace_var(t, l[j]);
                *any_sub |= l[j]->subclass != NULL;
                *any_rg |= v >= 0 && t->vars[v].requires_grad;
            }
            out[i].u.tensors.v = l;
        }
    }
    return JAG_OK;
}

static void free_lists(jag_tensor ***lists) {
    for (int i = 0; i < MAX_LIST_ARGS; i++) free(lists[i]), lists[i] = NULL;
}

/* Record outs as outputs of symbol `s`: new variables (requires_grad from
 * the inputs when grad mode is on). */
static jag_status add_outputs(jag_trace *t, int s, jag_tensor **outs, int n, bool rg) {
    for (int i = 0; i < n; i++) {
        int v = jag__trace_add_var(t, outs[i], NULL, s);
        if (v < 0) return jag_last_status();
        t->vars[v].requires_grad = rg && is_float(outs[i]) && jag_is_grad_enabled();
        t->syms[s].outs[i] = v;
    }
    return JAG_OK;
}

/* Record a subclass tensor made by code under the tracer as subclass_ctor
 * over its inner tensors. *p may be replaced by a proxy over the inner
 * tensors' proxies (when some were constants). */
static jag_status record_ctor(jag_trace *t, jag_tensor **p) {
    const jag_subclass *cls = (*p)->subclass;
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0}, *prox[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta meta = {0};
    jag_status st = jag__flatten_quiet(*p, inner, &n, &meta);
    bool same = true, rg = false;
    for (int i = 0; !st && i < n; i++) {
        st = proxy_of(t, inner[i], "subclass_ctor", &prox[i]);
        if (!st) same &= prox[i] == inner[i], rg |= var_rg(t, prox[i]);
    }
    jag_tensor *made = NULL;
    if (!st && !same) st = jag__proxy_unflatten(cls, prox, n, &meta, &made);
    if (!st) {
        jag_value a[JAG_SUBCLASS_MAX_INNER];
        for (int i = 0; i < n; i++) a[i] = jag__v_tensor(prox[i]);
        int zero = 0;
        int s = jag__trace_add_sym(t, JAG_SYM_CTOR, -1, a, n, &zero, 1);
        if (s < 0) st = jag_last_status();
        else {
            t->syms[s].cls = cls;
            t->syms[s].meta = meta;
            st = add_outputs(t, s, made ? &made : p, 1, rg);
        }
    }
    for (int i = 0; i < n; i++) jag_release(inner[i]);
    if (!st && made) {
        jag_release(*p);
        *p = made;
    } else {
        jag_release(made);
    }
    return st;
}

jag_status jag__trace_record_ctor(jag_trace *t, jag_tensor **p) {
    if (current) current->suppress++;
    jag_status st = record_ctor(t, p);
    if (current) current->suppress--;
    return st;
}

bool jag__trace_wants_ctor(void) { return current && !current->suppress && current->mode == JAG_REC_RECORD; }

jag_status jag__trace_on_wrap(jag_tensor **p) {
    current->suppress++; /* flatten and unflatten of the new tensor are not the function's ops */
    jag_status st = record_ctor(current->trace, p);
    current->suppress--;
    if (st) {
        jag_release(*p);
        *p = NULL;
    }
    return st;
}

/* ---- the TRACE key --------------------------------------------------------- */

jag_status jag__dispatch_untraced(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);

static int count_tensors(const jag_value *args, int nargs) {
    int n = 0;
    for (int i = 0; i < nargs; i++)
        n += args[i].kind == JAG_VAL_TENSOR ? 1 : args[i].kind == JAG_VAL_TENSORS ? args[i].u.tensors.n : 0;
    return n;
}

/* Meta outputs of an op from its META function (ops with no tensor input). */
static jag_status meta_outputs(const jag_op_info *info, const jag_value *args, int nargs, jag_tensor **outs) {
    jag_spec specs[4];
    jag_status st = info->meta(info->api_name, args, nargs, specs);
    for (int i = 0; !st && i < info->n_out; i++) {
        outs[i] = jag__tensor_from_spec(info->api_name, &specs[i], true);
        if (!outs[i]) st = jag_last_status();
    }
    if (st)
        for (int i = 0; i < info->n_out; i++) jag_release(outs[i]), outs[i] = NULL;
    return st;
}

static bool is_known(const jag_trace *t, const jag_tensor *p) { return jag__trace_var(t, p) >= 0; }

jag_status jag__trace_dispatch(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    jag_recorder *r = current;
    jag_trace *t = r->trace;
    const jag_op_info *info = &jag__ops[op];
    jag_value a[32];
    jag_tensor **lists[MAX_LIST_ARGS] = {0};
    if (nargs > 32) return jag__error(JAG_ENOTIMPL, "%s: too many arguments to trace", info->api_name);
    bool any_sub, any_rg;
    jag_status st = map_args(t, info->api_name, args, nargs, a, lists, &any_sub, &any_rg);
    if (st) goto done;
    jag_derivative_fn rule = op < JAG_OP_BUILTIN_COUNT ? jag__derivatives[op] : NULL;

    if (r->mode == JAG_REC_DESUGAR && any_sub) {
        /* the handler's own ops are recorded; the call itself is not */
        if (op == JAG_OP_values) { /* values' handler makes a header over the inner values */
            nested_state *s = jag__nested(a[0].u.t);
            if (s && s->layout == JAG_JAGGED) {
                outs[0] = jag_retain(s->values);
                goto done;
            }
        }
        st = jag__dispatch_untraced(op, a, nargs, outs);
        goto done;
    }
    if (info->custom && jag__custom_has_autograd(info) && any_rg && jag_is_grad_enabled()) {
        st = jag__custom_run_autograd(info, a, nargs, outs); /* records through jag_function_apply */
        goto done;
    }
    if ((info->tags & JAG_TAG_COMPOSITE) && !rule && (!any_sub || r->mode == JAG_REC_DESUGAR)) {
        st = info->cpu(info->api_name, a, nargs, outs); /* its parts are recorded */
        goto done;
    }
    jag_tensor *made[4] = {0};
    bool ctor = op == JAG_OP_nested_from_jagged && !any_sub;
    r->suppress++;
    if (ctor) {
        jag_tensor *inner[3] = {(jag_tensor *)a[0].u.t, (jag_tensor *)a[1].u.t,
                                a[2].kind == JAG_VAL_TENSOR ? (jag_tensor *)a[2].u.t : NULL};
        jag_subclass_meta meta = jag__nested_jagged_meta(inner[2] != NULL);
        if (inner[1]->dtype != JAG_INT64 || inner[1]->ndim != 1 || inner[0]->ndim < 1 ||
            (inner[2] && (inner[2]->dtype != JAG_INT64 || inner[2]->ndim != 1)))
            st = jag__error(JAG_EINVAL, "%s: expected values with >= 1 dim and 1-d int64 offsets (and lengths)", info->api_name);
        else
            st = jag__nested_proxy(inner, inner[2] ? 3 : 2, &meta, &made[0]);
    } else if (count_tensors(a, nargs) == 0 && info->meta && !info->custom) {
        st = meta_outputs(info, a, nargs, made);
    } else {
        st = jag__dispatch_untraced(op, a, nargs, made);
    }
    r->suppress--;
    if (st) goto done;
    if (ctor && r->mode == JAG_REC_DESUGAR) {
        outs[0] = made[0];
        goto done;
    }
    if (ctor) {
        r->suppress++;
        st = record_ctor(t, &made[0]);
        r->suppress--;
        if (st) jag_release(made[0]);
        else outs[0] = made[0];
        goto done;
    }
    /* an op that hands back a variable computes nothing: nothing is recorded */
    int known = 0;
    for (int i = 0; i < info->n_out; i++) known += is_known(t, made[i]);
    if (known == info->n_out) {
        for (int i = 0; i < info->n_out; i++) outs[i] = made[i];
        goto done;
    }
    if (known) {
        st = jag__error(JAG_ENOTIMPL, "%s: returned some of its inputs among new tensors; cannot trace it", info->api_name);
    } else {
        int zeros[4] = {0};
        int s = jag__trace_add_sym(t, JAG_SYM_OP, op, a, nargs, zeros, info->n_out);
        st = s < 0 ? jag_last_status() : add_outputs(t, s, made, info->n_out, any_rg);
    }
    if (st) {
        for (int i = 0; i < info->n_out; i++) jag_release(made[i]);
    } else {
        for (int i = 0; i < info->n_out; i++) outs[i] = made[i];
    }
done:
    free_lists(lists);
    return st;
}

/* ---- factories ---------------------------------------------------------------- */

jag_status jag__trace_full(const int64_t *sizes, int ndim, double value, jag_dtype dtype, jag_tensor **out) {
    jag_value a[] = {jag__v_ints(sizes, ndim), jag__v_double(value), jag__v_int(dtype)};
    if (!jag__tracing()) { /* inside a symbol: shape only */
        jag_spec s;
        jag_status st = jag__meta_full("jag_full", a, 3, &s);
        if (st) return st;
        *out = jag__tensor_from_spec("jag_full", &s, true);
        return *out ? JAG_OK : jag_last_status();
    }
    return jag__dispatch(JAG_OP_full, a, 3, out);
}

jag_status jag__trace_full_like(const jag_tensor *x, double value, jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(x), jag__v_double(value)};
    return jag__dispatch(JAG_OP_full_like, a, 2, out);
}

/* ---- custom autograd functions ------------------------------------------------ */

jag_autograd_ctx *jag__autograd_ctx_new(void *user, bool traced);
void jag__autograd_ctx_set_needs(jag_autograd_ctx *ctx, const bool *needs, int n);

jag_status jag__trace_function_apply(const jag_function_def *def, jag_tensor *const *inputs, int n_inputs,
                                     jag_tensor **outs) {
    jag_trace *t = current->trace;
    const char *op = "jag_function_apply";
    jag_tensor *prox[JAG_GRAD_MAX_INPUTS];
    bool rg = false, needs[JAG_GRAD_MAX_INPUTS];
    for (int i = 0; i < n_inputs; i++) {
        jag_status st = proxy_of(t, inputs[i], op, &prox[i]);
        if (st) return st;
        needs[i] = var_rg(t, prox[i]) && is_float(prox[i]);
        rg |= needs[i];
    }
    rg = rg && jag_is_grad_enabled();
    jag_autograd_ctx *ctx = jag__autograd_ctx_new(def->user, true);
    if (!ctx) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    int begin = t->n_syms;
    jag_tensor *made[4] = {0};
    jag__enter();
    bool prev = jag_set_grad_enabled(false);
    jag_status st = def->forward(ctx, prox, n_inputs, made);
    jag_set_grad_enabled(prev);
    jag__leave(st, NULL, 0);
    int ov[4];
    for (int i = 0; !st && i < def->n_outputs; i++) {
        if (!made[i]) st = jag__error(JAG_EINVAL, "%s: forward of '%s' returned no output %d", op, def->name ? def->name : "?", i);
        else if ((ov[i] = jag__trace_var(t, made[i])) < 0) {
            jag_tensor *p = NULL;
            st = proxy_of(t, made[i], op, &p);
            if (!st) jag_release(made[i]), made[i] = jag_retain(p), ov[i] = jag__trace_var(t, p);
        }
    }
    /* an output that existed before the function (an input, or a view
     * recorded as nothing) gets its own variable: the function's backward,
     * not the earlier symbols, carries its gradient */
    for (int i = 0; !st && i < def->n_outputs; i++) {
        if (t->vars[ov[i]].def >= begin) continue;
        if (made[i]->subclass) {
            st = jag__error(JAG_ENOTIMPL, "%s: '%s' returns an existing %s tensor; return a new one", op,
                            def->name ? def->name : "?", jag_subclass_name(made[i]->subclass));
            break;
        }
        jag_tensor *alias = NULL;
        jag_value va[] = {jag__v_tensor(made[i]), jag__v_ints(made[i]->sizes, made[i]->ndim)};
        prev = jag_set_grad_enabled(false);
        st = jag__dispatch(JAG_OP_view, va, 2, &alias);
        jag_set_grad_enabled(prev);
        if (!st) jag_release(made[i]), made[i] = alias, ov[i] = jag__trace_var(t, alias);
    }
    int s = -1;
    if (!st) {
        jag_value a[JAG_GRAD_MAX_INPUTS];
        for (int i = 0; i < n_inputs; i++) a[i] = jag__v_tensor(prox[i]);
        s = jag__trace_add_sym(t, JAG_SYM_FUNCTION, -1, a, n_inputs, ov, def->n_outputs);
        if (s < 0) st = jag_last_status();
    }
    if (st) {
        for (int i = 0; i < 4; i++) jag_release(made[i]);
        jag__autograd_ctx_free(ctx);
        return st;
    }
    jag_sym *sym = &t->syms[s];
    sym->fdef = *def;
    sym->fctx = malloc(sizeof *sym->fctx);
    if (!sym->fctx) {
        for (int i = 0; i < 4; i++) jag_release(made[i]);
        jag__autograd_ctx_free(ctx);
        t->n_syms--;
        jag__sym_clear(&t->syms[s]);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    atomic_init(&sym->fctx->refcount, 1);
    sym->fctx->ctx = ctx;
    sym->begin = begin;
    sym->end = s;
    jag__autograd_ctx_set_needs(ctx, needs, n_inputs);
    for (int i = 0; i < def->n_outputs; i++) {
        t->vars[ov[i]].requires_grad = rg && is_float(made[i]);
        outs[i] = made[i];
    }
    return JAG_OK;
}

/* ---- inputs and jag_trace ------------------------------------------------------- */

/* real inner tensor -> its proxy, so that inputs sharing offsets share them */
typedef struct {
    const jag_tensor *real[64];
    jag_tensor *proxy[64];
    int n;
} inner_cache;

static jag_status input_proxy(jag_trace *t, const jag_tensor *x, const char *name, inner_cache *cache) {
    if (!x->subclass) {
        jag_tensor *p = jag__meta_like(x);
        if (!p) return jag_last_status();
        int v = jag__trace_add_var(t, p, name, -1);
        jag_release(p);
        if (v < 0) return jag_last_status();
        t->vars[v].requires_grad = x->requires_grad && is_float(x);
        t->inputs[t->n_inputs++] = v;
        return JAG_OK;
    }
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0}, *prox[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta meta = {0};
    jag_status st = jag__flatten_quiet(x, inner, &n, &meta);
    bool fresh[JAG_SUBCLASS_MAX_INNER] = {0};
    for (int i = 0; !st && i < n; i++) {
        if (inner[i]->subclass) {
            st = jag__error(JAG_ENOTIMPL, "jag_trace: input '%s' has a subclass inner tensor", name);
            break;
        }
        for (int c = 0; c < cache->n && !prox[i]; c++)
            if (cache->real[c] == inner[i]) prox[i] = jag_retain(cache->proxy[c]);
        if (!prox[i]) {
            prox[i] = jag__meta_like(inner[i]);
            if (!prox[i]) st = jag_last_status();
            else if (cache->n < 64) cache->real[cache->n] = inner[i], cache->proxy[cache->n++] = prox[i];
            fresh[i] = true;
        }
    }
    jag_tensor *outer = NULL;
    if (!st) st = jag__proxy_unflatten(x->subclass, prox, n, &meta, &outer);
    int v = -1;
    if (!st) {
        v = jag__trace_add_var(t, outer, name, -1);
        if (v < 0) st = jag_last_status();
        else t->vars[v].requires_grad = x->requires_grad && is_float(x), t->inputs[t->n_inputs++] = v;
    }
    if (!st) {
        jag_value a[] = {jag__v_tensor(outer)};
        int ov[JAG_SUBCLASS_MAX_INNER] = {0};
        int s = jag__trace_add_sym(t, JAG_SYM_FLATTEN, -1, a, 1, ov, n);
        if (s < 0) st = jag_last_status();
        else {
            t->syms[s].cls = x->subclass;
            t->syms[s].meta = meta;
        }
        static const char *jagged_names[] = {"values", "offsets", "lengths"};
        static const char *strided_names[] = {"buffer", "sizes", "strides", "offsets"};
        for (int i = 0; !st && i < n; i++) {
            int iv = jag__trace_var(t, prox[i]);
            if (iv < 0 || fresh[i]) {
                char nm[64];
                const char *part = "inner";
                char num[16];
                bool jagged = x->subclass == jag__nested_class() && meta.ints[JAG_NESTED_SLOT_LAYOUT] == JAG_JAGGED;
                if (jagged && i < 3) part = jagged_names[i];
                else if (x->subclass == jag__nested_class() && i < 4) part = strided_names[i];
                else snprintf(num, sizeof num, "%d", i), part = num;
                snprintf(nm, sizeof nm, "%s_%s", name, part);
                iv = jag__trace_add_var(t, prox[i], nm, s);
                if (iv < 0) st = jag_last_status();
            }
            if (!st) t->syms[s].outs[i] = iv;
        }
    }
    for (int i = 0; i < n; i++) jag_release(inner[i]), jag_release(prox[i]);
    jag_release(outer);
    return st;
}

jag_status jag_trace_function(jag_traced_fn fn, void *ctx, jag_tensor *const *inputs, int n_inputs,
                        const char *const *names, int n_outputs, jag_trace **out) {
    const char *op = "jag_trace";
    if (!fn || !out || (n_inputs > 0 && !inputs))
        return jag__error(JAG_EINVAL, "%s: arguments 'fn', 'inputs' and 'out' must not be NULL", op);
    if (n_inputs < 0 || n_inputs > 64 || n_outputs < 1 || n_outputs > 64)
        return jag__error(JAG_EINVAL, "%s: %d inputs and %d outputs, expected 0..64 and 1..64", op, n_inputs, n_outputs);
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i]) return jag__error(JAG_EINVAL, "%s: input %d is NULL", op, i);
    if (current) return jag__error(JAG_ESTATE, "%s: already tracing on this thread", op);
    jag_trace *t = jag__trace_new();
    jag_tensor **prox = calloc((size_t)(n_inputs + n_outputs + 1), sizeof *prox);
    if (!t || !prox || !(t->inputs = calloc((size_t)n_inputs + 1, sizeof *t->inputs)) ||
        !(t->outputs = calloc((size_t)n_outputs, sizeof *t->outputs))) {
        jag_trace_free(t), free(prox);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    jag_tensor **outs = prox + n_inputs;
    jag_recorder rec;
    jag__recorder_push(&rec, t, JAG_REC_RECORD);
    inner_cache cache = {.n = 0};
    jag_status st = JAG_OK;
    rec.suppress++;
    for (int i = 0; !st && i < n_inputs; i++) {
        char nm[24];
        if (names && names[i]) snprintf(nm, sizeof nm, "%s", names[i]);
        else snprintf(nm, sizeof nm, "x%d", i);
        st = input_proxy(t, inputs[i], nm, &cache);
        if (!st) prox[i] = t->vars[t->inputs[i]].proxy;
    }
    rec.suppress--;
    /* the function runs as code at the top level with no scope open: what
     * its ops make is its own (released by it or by its own scopes), never
     * recorded in a scope the caller has open */
    size_t caller_floor;
    int caller_depth;
    jag__scope_isolate(&caller_floor, &caller_depth);
    if (!st) st = fn(ctx, prox, n_inputs, outs, n_outputs);
    int left = jag__scope_open_in_frame();
    for (int k = 0; k < left; k++) { /* its outputs leave the scopes it left open */
        for (int i = 0; i < n_outputs; i++)
            if (outs[i]) jag_scope_keep(outs[i]);
        jag_scope_end();
    }
    jag__scope_restore(caller_floor, caller_depth);
    if (!st && left > 0)
        st = jag__error(JAG_ESTATE, "%s: the traced function returned with %d scope%s of its own still open, expected each jag_scope_begin matched by jag_scope_end",
                        op, left, left == 1 ? "" : "s");
    for (int i = 0; !st && i < n_outputs; i++) {
        jag_tensor *p = NULL;
        if (!outs[i]) st = jag__error(JAG_EINVAL, "%s: the function returned no output %d", op, i);
        else st = proxy_of(t, outs[i], op, &p);
        if (!st) t->outputs[i] = jag__trace_var(t, p);
    }
    t->n_outputs = n_outputs;
    t->n_fwd_outputs = n_outputs;
    t->n_fwd_inputs = t->n_inputs;
    for (int i = 0; i < n_outputs; i++) jag_release(outs[i]);
    jag__recorder_pop(&rec);
    free(prox);
    if (st) {
        jag_trace_free(t);
        return st;
    }
    *out = t;
    return JAG_OK;
}
