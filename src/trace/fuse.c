/* fuse.c — the fuse pass and fused regions.
 *
 * A region is a set of pointwise symbols over one element space (the same
 * sizes and float dtype; 0-d tensors and scalars broadcast). It runs tile by
 * tile: for each tile of TILE elements the region's steps run on headers
 * over the tile of each input and output and over small scratch buffers for
 * values used only inside the region, with the existing vectorised kernels.
 * Values stay in L1/L2 between steps: one pass over memory for the inputs
 * and the outputs. Tiles are shared among OpenMP threads. */
#include "trace.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */
#include "../cpu/stream.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>

#define TILE 2048 /* elements: 8 KiB of float32, 16 KiB of float64; the few live tiles stay in L1/L2 */
#define PREFETCH_TILES 2 /* inputs are prefetched (to the outer caches) this many tiles ahead */
#define CHUNK_TILES 32   /* threads take tiles this many at a time, as they come free */
#define MAX_STEPS 64
#define MAX_VALS 96

typedef struct fstep {
    jag_op_id op;
    int nargs;
    jag_value args[3]; /* non-tensor arguments as recorded */
    int src[3];        /* value of each tensor argument, or -1 */
    int dst;           /* value it writes */
} fstep;

typedef struct jag_fused {
    atomic_int refcount;
    jag_dtype dtype;
    int n_in;            /* values [0, n_in): the symbol's tensor arguments */
    int n_val;
    int n_steps;
    fstep steps[MAX_STEPS];
    int n_out;
    int out_val[MAX_VALS]; /* the symbol's outputs */
    bool internal[MAX_VALS];
    int slot[MAX_VALS];    /* scratch slot of an internal value (reused once it is dead) */
    int n_slots;
    /* scratch per thread, kept between runs */
    char **scratch;
    int n_scratch;
} jag_fused;

bool jag__fused_same(const jag_fused *a, const jag_fused *b) {
    if (a->dtype != b->dtype || a->n_in != b->n_in || a->n_val != b->n_val || a->n_steps != b->n_steps || a->n_out != b->n_out ||
        memcmp(a->out_val, b->out_val, sizeof a->out_val) != 0 || memcmp(a->internal, b->internal, sizeof a->internal) != 0)
        return false;
    for (int i = 0; i < a->n_steps; i++) {
        const fstep *x = &a->steps[i], *y = &b->steps[i];
        if (x->op != y->op || x->nargs != y->nargs || x->dst != y->dst || memcmp(x->src, y->src, sizeof x->src) != 0) return false;
        for (int k = 0; k < x->nargs && k < 3; k++) {
            const jag_value *u = &x->args[k], *v = &y->args[k];
            if (u->kind != v->kind) return false;
            if (u->kind == JAG_VAL_INT && u->u.i != v->u.i) return false;
            if (u->kind == JAG_VAL_DOUBLE && memcmp(&u->u.d, &v->u.d, sizeof u->u.d) != 0) return false;
            if (u->kind == JAG_VAL_BOOL && u->u.b != v->u.b) return false;
            if (u->kind == JAG_VAL_INTS || u->kind == JAG_VAL_TENSORS) return false; /* not in fused steps */
        }
    }
    return true;
}

void jag__fused_free(jag_fused *f) {
    if (!f || atomic_fetch_sub(&f->refcount, 1) != 1) return;
    for (int i = 0; i < f->n_scratch; i++) free(f->scratch[i]);
    free(f->scratch);
    free(f);
}

jag_fused *jag__fused_private(const jag_fused *f) {
    jag_fused *c = malloc(sizeof *c);
    if (!c) return NULL;
    memcpy(c, f, sizeof *c);
    atomic_init(&c->refcount, 1);
    c->scratch = NULL, c->n_scratch = 0;
    return c;
}

jag_fused *jag__fused_retain(jag_fused *f) {
    atomic_fetch_add(&f->refcount, 1);
    return f;
}

void jag__fused_format(const jag_fused *f, const jag_trace *t, char *buf, size_t cap) {
    (void)t;
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i < f->n_steps; i++) {
        int n = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, "%s%s", i ? ", " : "",
                         jag__ops[f->steps[i].op].name);
        if (n > 0) len += (size_t)n;
    }
}

bool jag__fusable_op(jag_op_id op) { return op < JAG_OP_BUILTIN_COUNT && (jag__ops[op].tags & JAG_TAG_FUSABLE); }

/* ---- the pass --------------------------------------------------------------------- */

static bool same_sizes(const jag_tensor *a, const jag_tensor *b) {
    return a->ndim == b->ndim && memcmp(a->sizes, b->sizes, (size_t)a->ndim * sizeof *a->sizes) == 0;
}

/* s can join a region over the element space of `like` */
static bool fits(const jag_trace *t, const jag_sym *s, const jag_tensor *like) {
    if (s->kind != JAG_SYM_OP || !jag__fusable_op(s->op) || s->n_out != 1 || s->nargs > 3) return false;
    const jag_tensor *o = t->vars[s->outs[0]].proxy;
    /* the fused loops compute in float32 and float64 only */
    if (o->subclass || (o->dtype != JAG_FLOAT32 && o->dtype != JAG_FLOAT64) || o->ndim == 0) return false;
    if (like && (o->dtype != like->dtype || !same_sizes(o, like))) return false;
    for (int i = 0; i < s->nargs; i++) {
        const jag_value *a = &s->args[i];
        if (a->kind == JAG_VAL_TENSORS || a->kind == JAG_VAL_NONE) return false;
        if (a->kind != JAG_VAL_TENSOR) continue;
        if (a->u.t->subclass || a->u.t->dtype != o->dtype) return false;
        if (a->u.t->ndim != 0 && !same_sizes(a->u.t, o)) return false;
    }
    return true;
}

typedef struct {
    int syms[MAX_STEPS];
    int n;
    const jag_tensor *like;
} region;

static bool in_region(const jag_trace *t, const region *r, const jag_tensor *p) {
    int v = jag__trace_var(t, p);
    for (int i = 0; i < r->n; i++)
        if (t->syms[r->syms[i]].outs[0] == v) return true;
    return false;
}

static bool uses_region(const jag_trace *t, const region *r, const jag_sym *s) {
    for (int k = 0; k < jag__sym_n_inputs(s); k++)
        if (in_region(t, r, jag__sym_input(s, k))) return true;
    return false;
}

/* Emit region r into d as one fused symbol (or its one symbol). */
static jag_status flush(jag_trace *d, const jag_trace *t, region *r, const bool *used_outside) {
    jag_status st = JAG_OK;
    if (r->n == 0) return JAG_OK;
    if (r->n == 1) {
        st = jag__trace_copy_sym(d, t, &t->syms[r->syms[0]], NULL, NULL) < 0 ? jag_last_status() : JAG_OK;
        r->n = 0;
        return st;
    }
    jag_fused *f = calloc(1, sizeof *f);
    if (!f) return jag__error(JAG_ENOMEM, "jag_trace_fuse: out of memory");
    atomic_init(&f->refcount, 1);
    f->dtype = r->like->dtype;
    const jag_tensor *val[MAX_VALS];
    jag_value args[MAX_VALS];
    int n_args = 0;
    /* external inputs first */
    for (int i = 0; i < r->n; i++) {
        const jag_sym *s = &t->syms[r->syms[i]];
        for (int k = 0; k < s->nargs; k++) {
            if (s->args[k].kind != JAG_VAL_TENSOR || in_region(t, r, s->args[k].u.t)) continue;
            bool have = false;
            for (int j = 0; j < f->n_in; j++) have |= val[j] == s->args[k].u.t;
            if (!have && f->n_in < MAX_VALS / 2) val[f->n_in++] = s->args[k].u.t, args[n_args++] = s->args[k];
        }
    }
    f->n_val = f->n_in;
    int outs[MAX_STEPS];
    int n_outs = 0;
    for (int i = 0; i < r->n; i++) {
        const jag_sym *s = &t->syms[r->syms[i]];
        fstep *p = &f->steps[f->n_steps++];
        p->op = s->op;
        p->nargs = s->nargs;
        for (int k = 0; k < s->nargs; k++) {
            p->args[k] = s->args[k];
            p->src[k] = -1;
            if (s->args[k].kind == JAG_VAL_TENSOR)
                for (int j = 0; j < f->n_val; j++)
                    if (val[j] == s->args[k].u.t) p->src[k] = j;
        }
        p->dst = f->n_val;
        val[f->n_val++] = t->vars[s->outs[0]].proxy;
        if (used_outside[s->outs[0]]) f->out_val[f->n_out++] = p->dst, outs[n_outs++] = s->outs[0];
        else f->internal[p->dst] = true;
    }
    /* scratch slots: an internal value's slot is free after its last use */
    int last_use[MAX_VALS], slot_busy[MAX_VALS];
    for (int v = 0; v < f->n_val; v++) last_use[v] = -1;
    for (int i = 0; i < f->n_steps; i++)
        for (int k = 0; k < f->steps[i].nargs; k++)
            if (f->steps[i].src[k] >= 0) last_use[f->steps[i].src[k]] = i;
    for (int i = 0; i < f->n_steps; i++) {
        int v = f->steps[i].dst;
        int sl = 0;
        while (sl < f->n_slots && slot_busy[sl] >= i) sl++; /* a value read by this step is still busy */
        if (sl == f->n_slots) f->n_slots++;
        /* an output's tile is streamed out after the last step: busy to the end */
        slot_busy[sl] = !f->internal[v] ? f->n_steps : last_use[v] > i ? last_use[v] : i;
        f->slot[v] = sl;
    }
    int s_new = jag__trace_add_sym(d, JAG_SYM_FUSED, -1, args, n_args, outs, 0);
    if (s_new < 0) {
        jag__fused_free(f);
        r->n = 0;
        return jag_last_status();
    }
    for (int j = 0; j < n_args; j++) {
        int v = jag__trace_var(t, args[j].u.t);
        if (jag__trace_var(d, args[j].u.t) < 0 && jag__trace_copy_var(d, t, v) < 0) st = jag_last_status();
    }
    int *o = malloc((size_t)(n_outs ? n_outs : 1) * sizeof *o);
    if (!o) st = jag__error(JAG_ENOMEM, "jag_trace_fuse: out of memory");
    for (int k = 0; !st && k < n_outs; k++) {
        int v = jag__trace_copy_var(d, t, outs[k]);
        if (v < 0) st = jag_last_status();
        else o[k] = v, d->vars[v].def = s_new;
    }
    free(d->syms[s_new].outs);
    d->syms[s_new].outs = o;
    d->syms[s_new].n_out = n_outs;
    d->syms[s_new].fused = f;
    d->syms[s_new].backward = t->syms[r->syms[r->n - 1]].backward;
    r->n = 0;
    return st;
}

static jag_status fuse_pass(const jag_trace *t, jag_trace **out) {
    if (!t || !out) return jag__error(JAG_EINVAL, "jag_trace_fuse: arguments must not be NULL");
    jag_trace *d = jag__trace_new();
    bool *used_outside = calloc((size_t)t->n_vars + 1, sizeof *used_outside);
    jag_status st = JAG_OK;
    if (!d || !used_outside || !(d->inputs = calloc((size_t)t->n_inputs + 1, sizeof(int))) ||
        !(d->outputs = calloc((size_t)t->n_outputs + 1, sizeof(int))))
        st = jag__error(JAG_ENOMEM, "jag_trace_fuse: out of memory");
    /* pass 1: regions, to know which values leave their region */
    region r = {.n = 0};
    int *region_of = calloc((size_t)t->n_syms + 1, sizeof *region_of);
    if (!st && !region_of) st = jag__error(JAG_ENOMEM, "jag_trace_fuse: out of memory");
    int rid = 0, next_rid = 1;
    for (int i = 0; !st && i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        if (r.n && r.n < MAX_STEPS && fits(t, s, r.like)) {
            r.syms[r.n++] = i;
            region_of[i] = rid;
            continue;
        }
        r.n = 0; /* a symbol outside closes the region (it may use it) */
        if (fits(t, s, NULL)) {
            rid = next_rid++;
            r.like = t->vars[s->outs[0]].proxy;
            r.syms[r.n++] = i;
            region_of[i] = rid;
        }
    }
    for (int i = 0; !st && i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        for (int k = 0; k < jag__sym_n_inputs(s); k++) {
            int v = jag__trace_var(t, jag__sym_input(s, k));
            if (v < 0 || t->vars[v].def < 0) continue;
            if (!region_of[t->vars[v].def] || region_of[t->vars[v].def] != region_of[i]) used_outside[v] = true;
        }
    }
    for (int i = 0; i < t->n_outputs; i++) used_outside[t->outputs[i]] = true;
    /* pass 2: emit */
    if (!st) {
        d->next_tmp = t->next_tmp, d->next_const = t->next_const;
        for (int i = 0; !st && i < t->n_inputs; i++) {
            int v = jag__trace_copy_var(d, t, t->inputs[i]);
            if (v < 0) st = jag_last_status();
            else d->inputs[d->n_inputs++] = v;
        }
    }
    r.n = 0;
    int cur = 0;
    for (int i = 0; !st && i < t->n_syms; i++) {
        const jag_sym *s = &t->syms[i];
        if (region_of[i] && region_of[i] != cur) {
            st = flush(d, t, &r, used_outside);
            cur = region_of[i];
            r.like = t->vars[s->outs[0]].proxy;
        }
        if (st) break;
        if (region_of[i]) {
            r.syms[r.n++] = i;
            continue;
        }
        if (r.n && uses_region(t, &r, s)) st = flush(d, t, &r, used_outside), cur = 0;
        if (!st && jag__trace_copy_sym(d, t, s, NULL, NULL) < 0) st = jag_last_status();
    }
    if (!st) st = flush(d, t, &r, used_outside);
    for (int i = 0; !st && i < t->n_outputs; i++) {
        int v = jag__trace_copy_var(d, t, t->outputs[i]);
        if (v < 0) st = jag_last_status();
        else d->outputs[d->n_outputs++] = v;
    }
    if (!st) d->n_fwd_outputs = t->n_fwd_outputs, d->n_fwd_inputs = t->n_fwd_inputs;
    free(used_outside), free(region_of);
    if (st) {
        jag_trace_free(d);
        return st;
    }
    *out = d;
    return JAG_OK;
}

/* The public entry: what the pass makes inside jag (handlers wrap results
 * with public calls) is never recorded in the caller's scope. */
jag_status jag_trace_fuse(const jag_trace *t, jag_trace **out) {
    jag__enter();
    return jag__leave(fuse_pass(t, out), NULL, 0);
}

/* ---- running ------------------------------------------------------------------------ */

/* The element space: the first tensor argument with dims. */
static const jag_tensor *space(const jag_value *args, int nargs) {
    for (int i = 0; i < nargs; i++)
        if (args[i].kind == JAG_VAL_TENSOR && args[i].u.t->ndim > 0) return args[i].u.t;
    return NULL;
}

jag_status jag__fused_specs(const jag_fused *f, const jag_value *args, int nargs, jag_spec *specs) {
    const jag_tensor *x = space(args, nargs);
    if (!x) return jag__error(JAG_EINTERNAL, "fused: no input with dims");
    for (int i = 0; i < f->n_out; i++) jag__spec_set(&specs[i], f->dtype, x->sizes, x->ndim);
    return JAG_OK;
}

/* One step at a time over whole tensors: inputs that are not contiguous or
 * not all of one shape at run time. */
static jag_status run_unfused(jag_fused *f, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)nargs;
    jag_tensor *v[MAX_VALS] = {0};
    jag_status st = JAG_OK;
    for (int i = 0; i < f->n_in; i++) v[i] = (jag_tensor *)args[i].u.t;
    for (int s = 0; !st && s < f->n_steps; s++) {
        const fstep *p = &f->steps[s];
        jag_value a[3];
        for (int k = 0; k < p->nargs; k++) a[k] = p->src[k] >= 0 ? jag__v_tensor(v[p->src[k]]) : p->args[k];
        st = jag__dispatch_untraced(p->op, a, p->nargs, &v[p->dst]);
    }
    for (int i = 0; !st && i < f->n_out; i++) jag__copy_into(outs[i], v[f->out_val[i]]);
    for (int i = f->n_in; i < f->n_val; i++) jag_release(v[i]);
    return st;
}

/* Simple arithmetic on float tiles as plain loops (the compiler vectorises
 * them), with the kernels' own formulas: the per-call setup of a kernel is
 * then not paid per tile. Other ops run their kernel on the tile. */
#define FAST_STEP(SFX, T, FABS)                                                 \
    static bool fast_##SFX(const fstep *p, const jag_tensor *const *val, int64_t n, T *restrict y) { \
        const T *a = NULL, *b = NULL;                                           \
        T bs = 0;                                                               \
        if (p->src[0] < 0 || val[p->src[0]]->ndim == 0) return false;           \
        a = (const T *)jag__ptr(val[p->src[0]]);                                \
        if (p->nargs >= 2) {                                                    \
            if (p->src[1] >= 0) {                                               \
                const jag_tensor *bt = val[p->src[1]];                          \
                if (bt->ndim == 0) bs = *(const T *)jag__ptr(bt);               \
                else b = (const T *)jag__ptr(bt);                               \
            } else if (p->args[1].kind == JAG_VAL_DOUBLE) {                     \
                bs = (T)p->args[1].u.d;                                         \
            } else if (p->args[1].kind == JAG_VAL_INT) {                        \
                bs = (T)p->args[1].u.i;                                         \
            } else {                                                            \
                return false;                                                   \
            }                                                                   \
        }                                                                       \
        switch (p->op) {                                                        \
        case JAG_OP_neg: for (int64_t i = 0; i < n; i++) y[i] = -a[i]; return true; \
        case JAG_OP_abs: for (int64_t i = 0; i < n; i++) y[i] = FABS(a[i]); return true; \
        case JAG_OP_relu: for (int64_t i = 0; i < n; i++) y[i] = a[i] < 0 ? (T)0 : a[i]; return true; \
        case JAG_OP_square: for (int64_t i = 0; i < n; i++) y[i] = a[i] * a[i]; return true; \
        case JAG_OP_add: {                                                      \
            if (p->nargs < 3 || (p->args[2].kind != JAG_VAL_DOUBLE && p->args[2].kind != JAG_VAL_INT)) return false; \
            T al = p->args[2].kind == JAG_VAL_DOUBLE ? (T)p->args[2].u.d : (T)p->args[2].u.i; \
            if (b) for (int64_t i = 0; i < n; i++) y[i] = a[i] + al * b[i];     \
            else for (int64_t i = 0; i < n; i++) y[i] = a[i] + al * bs;         \
            return true;                                                        \
        }                                                                       \
        case JAG_OP_sub:                                                        \
            if (b) for (int64_t i = 0; i < n; i++) y[i] = a[i] - b[i];          \
            else for (int64_t i = 0; i < n; i++) y[i] = a[i] - bs;              \
            return true;                                                        \
        case JAG_OP_mul:                                                        \
            if (b) for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];          \
            else for (int64_t i = 0; i < n; i++) y[i] = a[i] * bs;              \
            return true;                                                        \
        case JAG_OP_div:                                                        \
            if (b) for (int64_t i = 0; i < n; i++) y[i] = a[i] / b[i];          \
            else for (int64_t i = 0; i < n; i++) y[i] = a[i] / bs;              \
            return true;                                                        \
        default: return false;                                                  \
        }                                                                       \
    }
FAST_STEP(f32, float, fabsf)
FAST_STEP(f64, double, fabs)
#undef FAST_STEP

static bool fast_step(const fstep *p, const jag_tensor *const *val, const jag_tensor *dst, int64_t n) {
    if (dst->dtype == JAG_FLOAT32) return fast_f32(p, val, n, (float *)jag__ptr(dst));
    if (dst->dtype == JAG_FLOAT64) return fast_f64(p, val, n, (double *)jag__ptr(dst));
    return false;
}

static void header(jag_tensor *h, jag_storage *store, jag_dtype dt, int64_t offset, int64_t len) {
    memset(h, 0, sizeof *h);
    atomic_init(&h->refcount, 1);
    atomic_init(&h->ragged_id, -1);
    h->dtype = dt;
    h->ndim = 1;
    h->sizes[0] = len;
    h->strides[0] = 1;
    h->offset = offset;
    h->storage = store;
}

/* Tiles [t0, t1) of n elements, with `scratch` for the internal values.
 * Returns nonzero if a kernel failed. */
static int run_tiles(const jag_fused *f, const jag_value *args, jag_tensor **outs, int64_t n, int64_t t0, int64_t t1,
                     char *scratch) {
    size_t es = jag_dtype_size(f->dtype);
    jag_storage scratch_store = {.data = scratch, .nbytes = (size_t)MAX_VALS * TILE * 8};
    atomic_init(&scratch_store.refcount, 1);
    jag_tensor h[MAX_VALS];
    const jag_tensor *val[MAX_VALS];
    int failed = 0;
    for (int64_t tile = t0; tile < t1; tile++) {
        int64_t start = tile * TILE, len = n - start < TILE ? n - start : TILE;
        for (int i = 0; i < f->n_in; i++) {
            const jag_tensor *a = args[i].u.t;
            if (a->ndim == 0) {
                val[i] = a;
                continue;
            }
            header(&h[i], a->storage, a->dtype, a->offset + start, len), val[i] = &h[i];
            if (tile + PREFETCH_TILES < t1) { /* a later tile's inputs are on their way while this one computes */
                int64_t ns = start + PREFETCH_TILES * TILE;
                const char *next = jag__ptr(a) + ns * (int64_t)es;
                int64_t bytes = (n - ns < TILE ? n - ns : TILE) * (int64_t)es;
                for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(next + b, 0, 1);
            }
        }
        for (int v = f->n_in; v < f->n_val; v++) {
            header(&h[v], &scratch_store, f->dtype, (int64_t)f->slot[v] * TILE * 8 / (int64_t)es, len);
            val[v] = &h[v];
        }
        for (int s = 0; s < f->n_steps; s++) {
            const fstep *p = &f->steps[s];
            jag_tensor *dst = &h[p->dst];
            if (fast_step(p, val, dst, len)) continue;
            jag_value a[3];
            for (int k = 0; k < p->nargs; k++) a[k] = p->src[k] >= 0 ? jag__v_tensor(val[p->src[k]]) : p->args[k];
            if (jag__ops[p->op].cpu(jag__ops[p->op].api_name, a, p->nargs, &dst)) failed = 1;
        }
        /* outputs leave the cache with streaming stores: no read of the
         * destination before it is written */
        for (int o = 0; o < f->n_out; o++)
            jag__stream_copy(jag__ptr(outs[o]) + start * (int64_t)es, jag__ptr(&h[f->out_val[o]]), (size_t)len * es);
    }
    jag__stream_fence();
    return failed;
}

jag_status jag__fused_run(jag_fused *f, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x = space(args, nargs);
    bool fast = x != NULL;
    for (int i = 0; fast && i < f->n_in; i++) {
        const jag_tensor *a = args[i].u.t;
        fast = a->storage && a->dtype == f->dtype && jag_is_contiguous(a) && (a->ndim == 0 || same_sizes(a, x));
    }
    if (!fast) return run_unfused(f, args, nargs, outs);
    int64_t n = jag_numel(x), n_tiles = (n + TILE - 1) / TILE;
    /* threads from JAG_GRAIN_MEMORY elements of work (internal.h): each step
     * is a pointwise op on the tile, so the region counts as n_steps such
     * loops over n elements (one read and one write of memory, the rest in
     * cache) */
    int nt = n * (f->n_steps > 0 ? f->n_steps : 1) >= JAG_GRAIN_MEMORY ? omp_get_max_threads() : 1;
    if (nt > n_tiles) nt = (int)(n_tiles ? n_tiles : 1);
    if (f->n_scratch < nt) {
        char **g = realloc(f->scratch, (size_t)nt * sizeof *g);
        if (!g) return jag__error(JAG_ENOMEM, "fused: out of memory");
        f->scratch = g;
        for (int i = f->n_scratch; i < nt; i++) {
            f->scratch[i] = aligned_alloc(64, (size_t)MAX_VALS * TILE * 8);
            if (!f->scratch[i]) {
                f->n_scratch = i;
                return jag__error(JAG_ENOMEM, "fused: out of memory");
            }
        }
        f->n_scratch = nt;
    }
    int failed = 0;
    if (nt == 1) {
        failed = run_tiles(f, args, outs, n, 0, n_tiles, f->scratch[0]);
    } else {
        /* chunks handed out as threads come free: a thread the machine
         * delays does not hold back a fixed share of the tiles */
        int64_t n_chunks = (n_tiles + CHUNK_TILES - 1) / CHUNK_TILES;
#pragma omp parallel num_threads(nt)
        {
            int tid = omp_get_thread_num(), bad = 0;
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t c = 0; c < n_chunks; c++) {
                int64_t t0 = c * CHUNK_TILES, t1 = t0 + CHUNK_TILES < n_tiles ? t0 + CHUNK_TILES : n_tiles;
                bad |= run_tiles(f, args, outs, n, t0, t1, f->scratch[tid]);
            }
            if (bad) {
#pragma omp atomic write
                failed = 1;
            }
        }
    }
    return failed ? jag__error(JAG_EINTERNAL, "fused: a kernel failed") : JAG_OK;
}
