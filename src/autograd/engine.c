/* engine.c — the autograd tape: grad mode, the AUTOGRAD key, nodes, custom
 * functions and jag_backward. Derivative rules live in derivatives.c. */
#include "autograd.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- grad mode ---------------------------------------------------------- */

static JAG_TLS bool grad_disabled; /* grad mode is on by default */
static JAG_TLS int below_autograd; /* > 0: inside an op already recorded */

bool jag_set_grad_enabled(bool enabled) {
    bool prev = !grad_disabled;
    grad_disabled = !enabled;
    return prev;
}

bool jag_is_grad_enabled(void) { return !grad_disabled; }

/* ---- nodes -------------------------------------------------------------- */

typedef enum { NODE_OP, NODE_ACCUMULATE, NODE_FUNCTION } node_kind;

typedef struct edge {
    struct jag_node *node; /* NULL: that input needs no gradient */
    int slot;              /* which output (grad slot) of node */
} edge;

struct jag_autograd_ctx {
    jag_tensor *saved[8];
    int64_t saved_versions[8]; /* their versions when saved */
    int n_saved;
    double values[8];
    const bool *needs;
    int n_inputs;
    void *user;
    bool traced;         /* under the tracer: save the proxies themselves */
    bool own_needs[JAG_GRAD_MAX_INPUTS];
    /* a node attached by jag__autograd_attach (compiled programs) */
    jag__extern_backward_fn ext_bw;
    void (*ext_free)(void *);
    void *ext_state;
    int ext_n_out;
};

jag_autograd_ctx *jag__autograd_ctx_new(void *user, bool traced);
void jag__autograd_ctx_free(jag_autograd_ctx *ctx);
void jag__autograd_ctx_set_needs(jag_autograd_ctx *ctx, const bool *needs, int n);

jag_autograd_ctx *jag__autograd_ctx_new(void *user, bool traced) {
    jag_autograd_ctx *c = calloc(1, sizeof *c);
    if (c) c->user = user, c->traced = traced;
    return c;
}

void jag__autograd_ctx_free(jag_autograd_ctx *ctx) {
    if (!ctx) return;
    for (int i = 0; i < ctx->n_saved; i++) jag_release(ctx->saved[i]);
    if (ctx->ext_free) ctx->ext_free(ctx->ext_state);
    free(ctx);
}

void jag__autograd_ctx_set_needs(jag_autograd_ctx *ctx, const bool *needs, int n) {
    ctx->n_inputs = n;
    for (int i = 0; i < n && i < JAG_GRAD_MAX_INPUTS; i++) ctx->own_needs[i] = needs ? needs[i] : true;
    ctx->needs = ctx->own_needs;
}

typedef struct jag_node {
    atomic_long refcount;
    node_kind kind;
    jag_op_id op;       /* NODE_OP */
    const char *name;   /* for messages */
    bool freed;         /* saved data released by a backward without retain_graph */
    /* NODE_OP: the call's arguments, owned (tensors retained, lists copied) */
    jag_value *args;
    int nargs;
    /* outputs: aliases without grad_fn (shapes, dtypes, data for rules) */
    jag_tensor *outputs[4];
    int n_out;
    /* inputs */
    edge *edges;
    bool *needs;
    int n_inputs;
    /* versions of the saved tensors when the node was made: tensor inputs
     * 0..n_inputs, then outputs (NODE_OP), or the inputs (NODE_FUNCTION);
     * -1: not checked (values its rule never reads) */
    int64_t *versions;
    /* NODE_FUNCTION: the inputs' shapes and dtypes, for checking the
     * gradients a custom backward returns; in_class: the input's subclass */
    jag_spec *in_specs;
    const jag_subclass **in_class;
    /* NODE_ACCUMULATE: the leaf */
    jag_tensor *leaf;
    /* NODE_FUNCTION */
    jag_function_def def;
    jag_autograd_ctx *ctx;
    /* backward bookkeeping (one backward at a time per graph) */
    int deps;
    unsigned visit;
    jag_tensor *slots[4];
} jag_node;

static void node_retain(jag_node *n) {
    if (n) atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

/* Release the data a node saved (arguments, output aliases, ctx). */
static void node_free_saved(jag_node *n) {
    for (int i = 0; i < n->nargs; i++) {
        jag_value *v = &n->args[i];
        if (v->kind == JAG_VAL_TENSOR) jag_release((jag_tensor *)v->u.t);
        else if (v->kind == JAG_VAL_TENSORS) {
            for (int j = 0; j < v->u.tensors.n; j++) jag_release(v->u.tensors.v[j]);
            free((void *)v->u.tensors.v);
        } else if (v->kind == JAG_VAL_INTS) {
            free((void *)v->u.ints.v);
        }
    }
    free(n->args);
    n->args = NULL;
    n->nargs = 0;
    for (int i = 0; i < n->n_out; i++) jag_release(n->outputs[i]), n->outputs[i] = NULL;
    if (n->ctx) {
        jag__autograd_ctx_free(n->ctx);
        n->ctx = NULL;
    }
    n->freed = true;
}

/* Release a node; nodes freed in turn are released iteratively (a long chain
 * of ops must not recurse once per op). */
static void node_release(jag_node *n) {
    jag_node **stack = NULL;
    size_t len = 0, cap = 0;
    while (n) {
        if (atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) == 1) {
            if (!n->freed) node_free_saved(n);
            for (int i = 0; i < 4; i++) jag_release(n->slots[i]);
            jag_release(n->leaf);
            for (int k = 0; k < n->n_inputs; k++) {
                jag_node *next = n->edges[k].node;
                if (!next) continue;
                if (len == cap) {
                    size_t nc = cap ? cap * 2 : 16;
                    jag_node **grown = realloc(stack, nc * sizeof *grown);
                    JAG_ASSERT(grown != NULL); /* freeing must not fail midway */
                    stack = grown, cap = nc;
                }
                stack[len++] = next;
            }
            free(n->edges);
            free(n->needs);
            free(n->versions);
            free(n->in_specs);
            free(n->in_class);
            free(n);
        }
        n = len ? stack[--len] : NULL;
    }
    free(stack);
}

const char *jag__grad_fn_name(const jag_tensor *t) { return t->grad_fn ? t->grad_fn->name : NULL; }

static void drop_grad_hooks(const jag_tensor *leaf);

/* jag_release calls it for a tensor with history, a gradient or hooks. */
void jag__autograd_release_tensor(jag_tensor *t) {
    if (t->flags & JAG_FLAG_GRAD_HOOKS) drop_grad_hooks(t);
    node_release(t->grad_fn);
    t->grad_fn = NULL;
    jag_release(t->grad);
    t->grad = NULL;
}

/* A new header over the same data with no autograd history. */
static jag_status shallow_alias(const jag_tensor *t, jag_tensor **out) {
    if (t->subclass) return jag__subclass_alias(t, out);
    *out = jag__tensor_wrap(t->storage, t->dtype, t->sizes, t->strides, t->ndim, t->offset);
    if (!*out) return jag_last_status();
    (*out)->flags = t->flags & JAG_FLAG_READONLY;
    return JAG_OK;
}

/* ---- tensor inputs ------------------------------------------------------ */

const jag_tensor *jag__grad_input(const jag_value *args, int nargs, int k) {
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == JAG_VAL_TENSOR) {
            if (k-- == 0) return args[i].u.t;
        } else if (args[i].kind == JAG_VAL_TENSORS) {
            if (k < args[i].u.tensors.n) return args[i].u.tensors.v[k];
            k -= args[i].u.tensors.n;
        }
    }
    return NULL;
}

static int count_tensor_inputs(const jag_value *args, int nargs) {
    int n = 0;
    for (int i = 0; i < nargs; i++)
        n += args[i].kind == JAG_VAL_TENSOR ? 1 : args[i].kind == JAG_VAL_TENSORS ? args[i].u.tensors.n : 0;
    return n;
}

static bool wants_grad(const jag_tensor *t) { return t && t->requires_grad && jag_dtype_is_floating(t->dtype); }

bool jag__autograd_wanted(const jag_value *args, int nargs) {
    if (grad_disabled || below_autograd) return false;
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == JAG_VAL_TENSOR && args[i].u.t && args[i].u.t->requires_grad) return true;
        if (args[i].kind == JAG_VAL_TENSORS)
            for (int j = 0; j < args[i].u.tensors.n; j++)
                if (args[i].u.tensors.v[j] && args[i].u.tensors.v[j]->requires_grad) return true;
    }
    return false;
}

static jag_node *node_new(node_kind kind, const char *name, int n_inputs) {
    jag_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    atomic_init(&n->refcount, 1);
    n->kind = kind;
    n->name = name;
    n->op = -1;
    n->n_inputs = n_inputs;
    if (n_inputs) {
        n->edges = calloc((size_t)n_inputs, sizeof *n->edges);
        n->needs = calloc((size_t)n_inputs, sizeof *n->needs);
        if (!n->edges || !n->needs) {
            free(n->edges), free(n->needs), free(n);
            return NULL;
        }
    }
    return n;
}

/* The edge for a tensor input: its grad_fn, or a new accumulator for a leaf
 * that requires grad. */
static jag_status make_edge(jag_node *n, int k, const jag_tensor *t) {
    if (!wants_grad(t)) return JAG_OK;
    n->needs[k] = true;
    if (t->grad_fn) {
        node_retain(t->grad_fn);
        n->edges[k] = (edge){t->grad_fn, t->output_nr};
        return JAG_OK;
    }
    jag_node *acc = node_new(NODE_ACCUMULATE, "leaf", 0);
    if (!acc) return jag__error(JAG_ENOMEM, "autograd: out of memory");
    acc->leaf = jag_retain((jag_tensor *)t);
    acc->n_out = 1;
    n->edges[k] = (edge){acc, 0};
    return JAG_OK;
}

/* Deep copy of boxed args: tensors retained, arrays copied. */
static jag_status copy_args(jag_node *n, const jag_value *args, int nargs) {
    n->args = calloc((size_t)(nargs ? nargs : 1), sizeof *n->args);
    if (!n->args) return jag__error(JAG_ENOMEM, "autograd: out of memory");
    n->nargs = nargs;
    for (int i = 0; i < nargs; i++) {
        jag_value v = args[i];
        if (v.kind == JAG_VAL_TENSOR) {
            jag_retain((jag_tensor *)v.u.t);
        } else if (v.kind == JAG_VAL_INTS) {
            int64_t *c = malloc((size_t)(v.u.ints.n ? v.u.ints.n : 1) * sizeof *c);
            if (!c) {
                n->args[i].kind = JAG_VAL_NONE;
                return jag__error(JAG_ENOMEM, "autograd: out of memory");
            }
            if (v.u.ints.n) memcpy(c, v.u.ints.v, (size_t)v.u.ints.n * sizeof *c);
            v.u.ints.v = c;
        } else if (v.kind == JAG_VAL_TENSORS) {
            jag_tensor **c = malloc((size_t)(v.u.tensors.n ? v.u.tensors.n : 1) * sizeof *c);
            if (!c) {
                n->args[i].kind = JAG_VAL_NONE;
                return jag__error(JAG_ENOMEM, "autograd: out of memory");
            }
            for (int j = 0; j < v.u.tensors.n; j++) c[j] = jag_retain(v.u.tensors.v[j]);
            v.u.tensors.v = c;
        }
        n->args[i] = v;
    }
    return JAG_OK;
}

/* Give outs[0..n_out) the node as grad_fn (float outputs only). An output
 * that is one of the inputs (a kernel may hand an input back) is replaced by
 * an alias first, so that the input's history is not overwritten. */
static jag_status attach_outputs(jag_node *n, const jag_value *args, int nargs, jag_tensor **outs, int n_out) {
    n->n_out = n_out;
    for (int i = 0; i < n_out; i++) {
        for (int k = 0; k < count_tensor_inputs(args, nargs); k++)
            if (outs[i] == jag__grad_input(args, nargs, k) || outs[i]->grad_fn || outs[i]->requires_grad) {
                jag_tensor *a = NULL;
                jag_status st = shallow_alias(outs[i], &a);
                if (st) return st;
                jag_release(outs[i]);
                outs[i] = a;
                break;
            }
        jag_status st = shallow_alias(outs[i], &n->outputs[i]);
        if (st) return st;
    }
    for (int i = 0; i < n_out; i++) {
        if (!jag_dtype_is_floating(outs[i]->dtype)) continue;
        node_retain(n);
        outs[i]->grad_fn = n;
        outs[i]->output_nr = i;
        outs[i]->requires_grad = true;
    }
    return JAG_OK;
}

static bool any_float(jag_tensor *const *outs, int n) {
    for (int i = 0; i < n; i++)
        if (jag_dtype_is_floating(outs[i]->dtype)) return true;
    return false;
}

/* ---- saved tensors and in-place changes ----------------------------------
 * A node keeps its op's tensor arguments and aliases of its outputs for the
 * derivative rule, and the version of each (the version counter of its
 * storage, which every in-place write bumps). Backward refuses a node whose
 * saved tensor changed since: its rule would read the new values and give a
 * wrong gradient without a word. Ops tagged JAG_TAG_GRAD_SHAPES_ONLY read
 * only the shapes of their floating inputs and outputs: those are not
 * checked (their integer inputs, indices or offsets, still are). */
static jag_status record_versions(jag_node *n, bool shapes_only) {
    int total = n->n_inputs + n->n_out;
    n->versions = malloc((size_t)(total ? total : 1) * sizeof *n->versions);
    if (!n->versions) return jag__error(JAG_ENOMEM, "%s: out of memory recording autograd", n->name);
    for (int k = 0; k < n->n_inputs; k++) {
        const jag_tensor *t = jag__grad_input(n->args, n->nargs, k);
        n->versions[k] = !t || (shapes_only && jag_dtype_is_floating(t->dtype)) ? -1 : jag__tensor_version(t);
    }
    for (int i = 0; i < n->n_out; i++)
        n->versions[n->n_inputs + i] = shapes_only ? -1 : jag__tensor_version(n->outputs[i]);
    return JAG_OK;
}

static jag_status modified_error(const jag_node *n, const char *what, int index, const jag_tensor *t, int64_t saved,
                                 int64_t now) {
    char s[JAG_SHAPE_BUF];
    return jag__error(JAG_ESTATE,
                      "jag_backward: %s %d of %s (%s %s) was modified by an in-place op after %s saved it for the "
                      "gradient (its version was %lld, now %lld); change it after backward, or pass a clone",
                      what, index, n->name, jag_dtype_name(t->dtype), jag__shape_str(t->sizes, t->ndim, s, sizeof s),
                      n->name, (long long)saved, (long long)now);
}

static jag_status check_versions(const jag_node *n) {
    if (n->kind == NODE_FUNCTION && n->ctx) {
        const jag_autograd_ctx *ctx = n->ctx;
        for (int i = 0; i < ctx->n_saved; i++) {
            const jag_tensor *t = ctx->saved[i];
            if (t && !ctx->traced && jag__tensor_version(t) != ctx->saved_versions[i])
                return modified_error(n, "saved tensor", i, t, ctx->saved_versions[i], jag__tensor_version(t));
        }
        return JAG_OK;
    }
    if (!n->versions) return JAG_OK;
    for (int k = 0; k < n->n_inputs; k++) {
        if (n->versions[k] < 0) continue;
        const jag_tensor *t = jag__grad_input(n->args, n->nargs, k);
        int64_t now = jag__tensor_version(t);
        if (now != n->versions[k]) return modified_error(n, "input", k, t, n->versions[k], now);
    }
    for (int i = 0; i < n->n_out; i++) {
        int64_t was = n->versions[n->n_inputs + i], now;
        if (was >= 0 && (now = jag__tensor_version(n->outputs[i])) != was)
            return modified_error(n, "output", i, n->outputs[i], was, now);
    }
    return JAG_OK;
}

/* NODE_FUNCTION: the inputs' shapes, dtypes and classes, to check what a
 * custom backward returns. */
static jag_status record_input_specs(jag_node *n, jag_tensor *const *inputs) {
    if (!n->n_inputs) return JAG_OK;
    n->in_specs = calloc((size_t)n->n_inputs, sizeof *n->in_specs);
    n->in_class = calloc((size_t)n->n_inputs, sizeof *n->in_class);
    if (!n->in_specs || !n->in_class) return jag__error(JAG_ENOMEM, "%s: out of memory recording autograd", n->name);
    for (int k = 0; k < n->n_inputs; k++) {
        const jag_tensor *t = inputs[k];
        n->in_specs[k].dtype = t->dtype;
        n->in_specs[k].ndim = t->ndim;
        memcpy(n->in_specs[k].sizes, t->sizes, sizeof t->sizes);
        n->in_class[k] = t->subclass;
    }
    return JAG_OK;
}

static jag_status check_function_grad(const jag_node *n, int k, const jag_tensor *g) {
    const jag_spec *sp = &n->in_specs[k];
    char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
    if (!jag__tensor_live(g))
        return jag__error(JAG_EINVAL, "jag_backward: the backward of '%s' returned a released tensor as the gradient of input %d",
                          n->name, k);
    if (g->subclass != n->in_class[k])
        return jag__error(JAG_ESHAPE, "jag_backward: the backward of '%s' returned a %s gradient for input %d, a %s tensor",
                          n->name, g->subclass ? jag_subclass_name(g->subclass) : "plain", k,
                          n->in_class[k] ? jag_subclass_name(n->in_class[k]) : "plain");
    bool same = g->ndim == sp->ndim;
    for (int d = 0; same && d < sp->ndim; d++) same = g->sizes[d] == sp->sizes[d];
    if (!same)
        return jag__error(JAG_ESHAPE, "jag_backward: the backward of '%s' returned a gradient of shape %s for input %d of shape %s",
                          n->name, jag__shape_str(g->sizes, g->ndim, a, sizeof a), k,
                          jag__shape_str(sp->sizes, sp->ndim, b, sizeof b));
    if (g->dtype != sp->dtype)
        return jag__error(JAG_EDTYPE, "jag_backward: the backward of '%s' returned a %s gradient for input %d of dtype %s",
                          n->name, jag_dtype_name(g->dtype), k, jag_dtype_name(sp->dtype));
    return JAG_OK;
}

jag_status jag__autograd_dispatch(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    jag_derivative_fn rule = op < JAG_OP_BUILTIN_COUNT ? jag__derivatives[op] : NULL;
    if (!rule && (info->tags & JAG_TAG_COMPOSITE)) /* record its parts instead */
        return info->cpu(info->api_name, args, nargs, outs);
    below_autograd++;
    jag_status st = jag__dispatch(op, args, nargs, outs);
    below_autograd--;
    if (st || !any_float(outs, info->n_out)) return st;
    int n_in = count_tensor_inputs(args, nargs);
    jag_node *n = node_new(NODE_OP, info->api_name, n_in);
    if (!n) st = jag__error(JAG_ENOMEM, "%s: out of memory recording autograd", info->api_name);
    if (!st) {
        n->op = op;
        st = copy_args(n, args, nargs);
    }
    for (int k = 0; !st && k < n_in; k++) st = make_edge(n, k, jag__grad_input(args, nargs, k));
    if (!st) st = attach_outputs(n, args, nargs, outs, info->n_out);
    if (!st) st = record_versions(n, (info->tags & JAG_TAG_GRAD_SHAPES_ONLY) != 0);
    if (n) node_release(n); /* the outputs hold it now */
    if (st)
        for (int i = 0; i < info->n_out; i++) jag_release(outs[i]), outs[i] = NULL;
    return st;
}

/* ---- leaves ------------------------------------------------------------- */

/* A leaf's .grad is read, summed and replaced under a lock chosen by the
 * leaf's address, so that threads running backward at once on their own
 * graphs over a shared weight add every gradient (PyTorch allows this). One
 * lock per leaf would grow the header of every tensor; 64 striped locks are
 * shared by all leaves and taken once per leaf per backward. */
#define GRAD_LOCKS 64
static pthread_mutex_t grad_locks[GRAD_LOCKS];
static pthread_once_t grad_locks_once = PTHREAD_ONCE_INIT;

static void grad_locks_init(void) {
    for (int i = 0; i < GRAD_LOCKS; i++) pthread_mutex_init(&grad_locks[i], NULL);
}

static pthread_mutex_t *grad_lock(const jag_tensor *leaf) {
    pthread_once(&grad_locks_once, grad_locks_init);
    uintptr_t h = (uintptr_t)leaf >> 6; /* headers are 64-byte aligned */
    return &grad_locks[(h ^ (h >> 6)) % GRAD_LOCKS];
}

/* ---- post-accumulate-grad hooks ------------------------------------------
 * One registry for the process: hooks are few (one per parameter) and
 * looked up once per backward, so a list under a mutex suffices. A
 * backward snapshots which leaves have hooks; hooks themselves are looked
 * up by id when they run, so that one removed meanwhile does not run.
 * The registry holds no reference on a leaf (as torch keeps the hooks on
 * the tensor): releasing a leaf's last reference drops its hooks
 * (drop_grad_hooks, from jag__autograd_release_tensor). A backward that
 * reaches a leaf holds a reference on it through its graph, so a leaf
 * never goes while its hooks may run. */

typedef struct grad_hook {
    int64_t id;
    jag_tensor *leaf; /* not a reference: the leaf's release drops the hook */
    jag_post_accumulate_grad_hook fn;
    void *ctx;
    void (*free_ctx)(void *);
} grad_hook;

static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static grad_hook *hooks;
static size_t n_hooks, cap_hooks;
static int64_t next_hook_id = 1;
static atomic_long hooks_live;

jag_status jag_register_post_accumulate_grad_hook(jag_tensor *leaf, jag_post_accumulate_grad_hook fn, void *ctx,
                                                  void (*free_ctx)(void *), int64_t *handle) {
    const char *op = "jag_register_post_accumulate_grad_hook";
    if (!fn || !handle) return jag__error(JAG_EINVAL, "%s: argument '%s' is NULL", op, fn ? "handle" : "fn");
    jag_status st = jag__check_live(op, "leaf", leaf);
    if (st) return st;
    if (leaf->grad_fn)
        return jag__error(JAG_EINVAL, "%s: argument 'leaf' is the output of %s, not a leaf; only leaves accumulate a gradient",
                          op, leaf->grad_fn->name);
    if (!leaf->requires_grad)
        return jag__error(JAG_EINVAL, "%s: argument 'leaf' does not require grad; expected a leaf that requires grad", op);
    pthread_mutex_lock(&hooks_lock);
    if (n_hooks == cap_hooks) {
        size_t cap = cap_hooks ? cap_hooks * 2 : 16;
        grad_hook *g = realloc(hooks, cap * sizeof *g);
        if (!g) {
            pthread_mutex_unlock(&hooks_lock);
            return jag__error(JAG_ENOMEM, "%s: out of memory", op);
        }
        hooks = g, cap_hooks = cap;
    }
    int64_t id = next_hook_id++;
    hooks[n_hooks++] = (grad_hook){id, leaf, fn, ctx, free_ctx};
    leaf->flags |= JAG_FLAG_GRAD_HOOKS;
    atomic_fetch_add(&hooks_live, 1);
    pthread_mutex_unlock(&hooks_lock);
    *handle = id;
    return JAG_OK;
}

/* Take the first hook with id `id` (leaf NULL) or on `leaf` out of the
 * registry; {0} when there is none. */
static grad_hook take_hook(int64_t id, const jag_tensor *leaf) {
    grad_hook h = {0};
    pthread_mutex_lock(&hooks_lock);
    for (size_t i = 0; i < n_hooks; i++)
        if (leaf ? hooks[i].leaf == leaf : hooks[i].id == id) {
            h = hooks[i];
            memmove(hooks + i, hooks + i + 1, (n_hooks - i - 1) * sizeof *hooks);
            n_hooks--;
            bool more = false; /* another hook on the same leaf */
            for (size_t k = 0; k < n_hooks && !more; k++) more = hooks[k].leaf == h.leaf;
            if (!more) h.leaf->flags &= ~(unsigned)JAG_FLAG_GRAD_HOOKS;
            atomic_fetch_sub(&hooks_live, 1);
            break;
        }
    if (!n_hooks) free(hooks), hooks = NULL, cap_hooks = 0;
    pthread_mutex_unlock(&hooks_lock);
    return h;
}

jag_status jag_remove_post_accumulate_grad_hook(int64_t handle) {
    grad_hook h = take_hook(handle, NULL);
    if (!h.id)
        return jag__error(JAG_EINVAL, "jag_remove_post_accumulate_grad_hook: argument 'handle' (%lld) is not a registered "
                          "hook (never registered, removed already, or its leaf was released)", (long long)handle);
    if (h.free_ctx) h.free_ctx(h.ctx);
    return JAG_OK;
}

/* The hooks of `leaf`, whose last reference is going: each leaves the
 * registry, then its free_ctx runs outside the lock (it may release
 * tensors or remove other hooks), in registration order. */
static void drop_grad_hooks(const jag_tensor *leaf) {
    if (!atomic_load(&hooks_live)) return;
    for (grad_hook h; (h = take_hook(0, leaf)).id;)
        if (h.free_ctx) h.free_ctx(h.ctx);
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* Run leaf's hooks in registration order. */
static jag_status run_grad_hooks(jag_tensor *leaf) {
    int64_t ids_small[8], *ids = ids_small;
    size_t n = 0;
    pthread_mutex_lock(&hooks_lock);
    for (size_t i = 0; i < n_hooks; i++) n += hooks[i].leaf == leaf;
    if (n > 8 && !(ids = malloc(n * sizeof *ids))) {
        pthread_mutex_unlock(&hooks_lock);
        return jag__error(JAG_ENOMEM, "jag_backward: out of memory running hooks");
    }
    n = 0;
    for (size_t i = 0; i < n_hooks; i++)
        if (hooks[i].leaf == leaf) ids[n++] = hooks[i].id;
    pthread_mutex_unlock(&hooks_lock);
    jag_status st = JAG_OK;
    for (size_t k = 0; !st && k < n; k++) {
        grad_hook h = {0};
        pthread_mutex_lock(&hooks_lock);
        for (size_t i = 0; i < n_hooks; i++)
            if (hooks[i].id == ids[k]) h = hooks[i];
        pthread_mutex_unlock(&hooks_lock);
        if (h.id) st = h.fn(leaf, h.ctx);
    }
    if (ids != ids_small) free(ids);
    return st;
}

/* A leaf with hooks, during one backward: its accumulators still to run and
 * the sum of the gradients they brought. */
typedef struct hooked_leaf {
    jag_tensor *leaf;
    int remaining;
    jag_tensor *sum;
} hooked_leaf;

typedef struct hooked_leaves {
    hooked_leaf *v; /* sorted by leaf address */
    size_t n;
} hooked_leaves;

static hooked_leaf *find_hooked(const hooked_leaves *h, const jag_tensor *leaf) {
    size_t lo = 0, hi = h->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((uintptr_t)h->v[mid].leaf < (uintptr_t)leaf) lo = mid + 1;
        else hi = mid;
    }
    return lo < h->n && h->v[lo].leaf == leaf ? &h->v[lo] : NULL;
}

jag_status jag_set_requires_grad(jag_tensor *t, bool requires_grad) {
    if (!t) return jag__error(JAG_EINVAL, "jag_set_requires_grad: argument 't' is NULL");
    if (t->grad_fn)
        return jag__error(JAG_EINVAL, "jag_set_requires_grad: argument 't' is the output of %s, not a leaf; detach it first",
                          t->grad_fn->name);
    if (requires_grad && !jag_dtype_is_floating(t->dtype))
        return jag__error(JAG_EINVAL, "jag_set_requires_grad: argument 't' has dtype %s; only float tensors can require grad",
                          jag_dtype_name(t->dtype));
    t->requires_grad = requires_grad;
    return JAG_OK;
}

bool jag_requires_grad(const jag_tensor *t) { return t && t->requires_grad; }
bool jag_is_leaf(const jag_tensor *t) { return t && !t->grad_fn; }

jag_status jag_get_grad(const jag_tensor *t, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "jag_get_grad: argument 'out' is NULL");
    jag_status st = jag__check_live("jag_get_grad", "t", t);
    if (st) return st;
    jag__enter();
    pthread_mutex_lock(grad_lock(t));
    *out = jag_retain(t->grad);
    pthread_mutex_unlock(grad_lock(t));
    return jag__leave(JAG_OK, out, *out != NULL);
}

void jag_zero_grad(jag_tensor *t) {
    if (!jag__tensor_live(t)) return;
    pthread_mutex_lock(grad_lock(t));
    jag_tensor *g = t->grad;
    t->grad = NULL;
    pthread_mutex_unlock(grad_lock(t));
    jag_release(g);
}

jag_status jag_detach(const jag_tensor *x, jag_tensor **out) {
    if (!x || !out) return jag__error(JAG_EINVAL, "jag_detach: arguments must not be NULL");
    jag__enter();
    jag_status st = shallow_alias(x, out);
    return jag__leave(st, out, st == JAG_OK);
}

/* ---- custom functions --------------------------------------------------- */

jag_status jag_autograd_save(jag_autograd_ctx *ctx, jag_tensor *const *tensors, int n) {
    if (!ctx || (n > 0 && !tensors)) return jag__error(JAG_EINVAL, "jag_autograd_save: arguments must not be NULL");
    if (ctx->n_saved + n > 8) return jag__error(JAG_EINVAL, "jag_autograd_save: at most 8 tensors may be saved");
    for (int i = 0; i < n; i++) {
        /* an alias without history: saving an output must not make a cycle */
        jag_tensor *a = NULL;
        jag_status st = JAG_OK;
        if (ctx->traced) a = jag_retain(tensors[i]); /* proxies: the trace's variables */
        else if (tensors[i]) st = shallow_alias(tensors[i], &a);
        if (st) return st;
        ctx->saved_versions[ctx->n_saved] = a ? jag__tensor_version(a) : 0;
        ctx->saved[ctx->n_saved++] = a;
    }
    return JAG_OK;
}

jag_tensor *const *jag_autograd_saved(const jag_autograd_ctx *ctx, int *n) {
    if (n) *n = ctx ? ctx->n_saved : 0;
    return ctx ? ctx->saved : NULL;
}

bool jag_autograd_needs_input_grad(const jag_autograd_ctx *ctx, int i) {
    return ctx && ctx->needs && i >= 0 && i < ctx->n_inputs && ctx->needs[i];
}

double *jag_autograd_values(jag_autograd_ctx *ctx) { return ctx ? ctx->values : NULL; }
void *jag_autograd_user(const jag_autograd_ctx *ctx) { return ctx ? ctx->user : NULL; }

jag_status jag_function_apply(const jag_function_def *def, jag_tensor *const *inputs, int n_inputs, jag_tensor **outs) {
    const char *op = "jag_function_apply";
    if (!def || !def->forward || !def->backward || !outs || (n_inputs > 0 && !inputs))
        return jag__error(JAG_EINVAL, "%s: def (with forward and backward), inputs and outs must not be NULL", op);
    if (def->n_outputs < 1 || def->n_outputs > 4)
        return jag__error(JAG_EINVAL, "%s: '%s' declares %d outputs, expected 1..4", op, def->name ? def->name : "?",
                          def->n_outputs);
    if (n_inputs < 0 || n_inputs > JAG_GRAD_MAX_INPUTS)
        return jag__error(JAG_EINVAL, "%s: %d inputs, expected 0..%d", op, n_inputs, JAG_GRAD_MAX_INPUTS);
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i]) return jag__error(JAG_EINVAL, "%s: input %d is NULL", op, i);
    if (jag__trace_current && jag__tracing()) { /* a FUNCTION symbol around its forward's symbols */
        jag__enter();
        jag_status st = jag__trace_function_apply(def, inputs, n_inputs, outs);
        return jag__leave(st, outs, st == JAG_OK ? def->n_outputs : 0);
    }
    bool record = !grad_disabled;
    bool any = false;
    for (int i = 0; i < n_inputs; i++) any = any || wants_grad(inputs[i]);
    record = record && any;
    jag_autograd_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    ctx->user = def->user;
    jag__enter();
    jag_tensor *made[4] = {0};
    bool prev = jag_set_grad_enabled(false);
    jag_status st = def->forward(ctx, inputs, n_inputs, made);
    jag_set_grad_enabled(prev);
    for (int i = 0; !st && i < def->n_outputs; i++)
        if (!made[i]) st = jag__error(JAG_EINVAL, "%s: forward of '%s' returned no output %d", op, def->name ? def->name : "?", i);
    jag_node *n = NULL;
    if (!st && record) {
        n = node_new(NODE_FUNCTION, def->name ? def->name : "custom function", n_inputs);
        if (!n) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
        if (!st) {
            n->def = *def;
            n->ctx = ctx;
            ctx->needs = n->needs;
            ctx->n_inputs = n_inputs;
            ctx = NULL;
        }
        for (int k = 0; !st && k < n_inputs; k++) st = make_edge(n, k, inputs[k]);
        if (!st) st = record_input_specs(n, inputs);
        jag_value args[JAG_GRAD_MAX_INPUTS];
        for (int k = 0; k < n_inputs; k++) args[k] = jag__v_tensor(inputs[k]);
        if (!st) st = attach_outputs(n, args, n_inputs, made, def->n_outputs);
    }
    if (n) node_release(n);
    if (ctx) {
        for (int i = 0; i < ctx->n_saved; i++) jag_release(ctx->saved[i]);
        free(ctx);
    }
    if (st) {
        for (int i = 0; i < 4; i++) jag_release(made[i]);
        return jag__leave(st, NULL, 0);
    }
    for (int i = 0; i < def->n_outputs; i++) outs[i] = made[i];
    return jag__leave(JAG_OK, outs, def->n_outputs);
}

/* ---- backward ----------------------------------------------------------- */

typedef struct {
    jag_node **v;
    size_t n, cap;
} node_list;

static bool list_push(node_list *l, jag_node *n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        jag_node **g = realloc(l->v, cap * sizeof *g);
        if (!g) return false;
        l->v = g, l->cap = cap;
    }
    l->v[l->n++] = n;
    return true;
}

static atomic_uint visit_epoch;

/* Every node reachable from root, with deps = edges into it from reachable
 * nodes. */
static jag_status collect(jag_node *root, node_list *all) {
    unsigned epoch = atomic_fetch_add(&visit_epoch, 1) + 1;
    node_list stack = {0};
    jag_status st = JAG_OK;
    root->visit = epoch;
    root->deps = 0;
    if (!list_push(&stack, root) || !list_push(all, root)) st = jag__error(JAG_ENOMEM, "jag_backward: out of memory");
    while (!st && stack.n) {
        jag_node *n = stack.v[--stack.n];
        for (int k = 0; k < n->n_inputs; k++) {
            jag_node *next = n->edges[k].node;
            if (!next) continue;
            if (next->visit != epoch) {
                next->visit = epoch;
                next->deps = 0;
                if (!list_push(&stack, next) || !list_push(all, next)) {
                    st = jag__error(JAG_ENOMEM, "jag_backward: out of memory");
                    break;
                }
            }
            next->deps++;
        }
    }
    free(stack.v);
    return st;
}

static bool same_shape(const jag_tensor *a, const jag_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d]) return false;
    return true;
}

/* Whether acc += g may be written into acc's own memory: acc is a plain
 * contiguous tensor that nothing but its holder references (its header and
 * its storage each referenced once, jag's own data, writable), and g has
 * its shape and dtype. Then no one can see acc change, and the sum is the
 * out-of-place add's bit for bit, without a new block and without the
 * read of its lines that writing a fresh block costs: layer_norm's
 * backward of (8192, 256) floats with x, weight and bias accumulating their
 * gradients, 1.21-1.73 -> 1.02-1.37 ms (five runs of each build in turn).
 * torch accumulates a leaf's .grad in place as well; a gradient the
 * caller holds (jag_get_grad's reference) or shares a storage with is
 * summed into a new tensor, as before, so what the caller holds never
 * changes. Never while tracing, which records no in-place op. */
static bool accumulates_in_place(const jag_tensor *acc, const jag_tensor *g) {
    if (acc->subclass || g->subclass || acc->requires_grad || g->requires_grad || !acc->storage || acc->dtype != g->dtype ||
        !same_shape(acc, g) || !jag_is_contiguous(acc) || (jag__trace_current && jag__tracing()))
        return false;
    const jag_storage *s = acc->storage;
    return atomic_load(&acc->refcount) == 1 && atomic_load(&s->refcount) == 1 && !s->borrowed && !s->release &&
           !atomic_load(&s->read_only);
}

/* acc += g in acc's memory (accumulates_in_place(acc, g) holds); *done says
 * whether it ran */
static jag_status add_in_place(jag_tensor *acc, const jag_tensor *g, bool *done) {
    jag_value a[] = {jag__v_tensor(acc), jag__v_tensor(g), jag__v_double(1.0)};
    jag_status st = jag__dispatch_into(JAG_OP_add, "jag_backward", a, 3, acc, done);
    if (!st && *done) jag__bump_version(acc);
    return st;
}

/* slot += g (a new tensor when the slot is empty) */
jag_status jag__grad_accumulate(jag_tensor **slot, jag_tensor *g) {
    if (!*slot) {
        *slot = jag_retain(g);
        return JAG_OK;
    }
    bool done = false;
    if (accumulates_in_place(*slot, g)) {
        jag_status st = add_in_place(*slot, g, &done);
        if (st || done) return st;
    }
    jag_tensor *sum = NULL;
    jag_value a[] = {jag__v_tensor(*slot), jag__v_tensor(g), jag__v_double(1.0)};
    jag_status st = jag__dispatch(JAG_OP_add, a, 3, &sum);
    if (st) return st;
    jag_release(*slot);
    *slot = sum;
    return JAG_OK;
}

static jag_status zeros_like_internal(const jag_tensor *t, jag_tensor **out) {
    jag__enter();
    jag_status st = jag_zeros_like(t, out);
    jag__leave(st, NULL, 0);
    return st;
}

/* Run one node: its rule (or the custom backward) from its slots into the
 * slots of the nodes its edges lead to, or the leaf's pending gradient. */
static jag_status run_node(jag_node *n, node_list *pending_leaves) {
    if (n->kind == NODE_ACCUMULATE) {
        if (!n->slots[0]) return JAG_OK;
        return list_push(pending_leaves, n) ? JAG_OK : jag__error(JAG_ENOMEM, "jag_backward: out of memory");
    }
    if (n->freed)
        return jag__error(JAG_ESTATE, "jag_backward: the graph through %s was freed by an earlier backward; pass retain_graph to backward through it again",
                          n->name);
    jag_status st = check_versions(n);
    for (int i = 0; i < n->n_out && !st; i++)
        if (!n->slots[i]) st = zeros_like_internal(n->outputs[i], &n->slots[i]);
    if (st) return st;
    jag_tensor *grads[JAG_GRAD_MAX_INPUTS] = {0};
    if (n->n_inputs > JAG_GRAD_MAX_INPUTS) return jag__error(JAG_ENOTIMPL, "jag_backward: %s has too many inputs", n->name);
    if (n->kind == NODE_FUNCTION) {
        jag__enter();
        st = n->def.backward(n->ctx, n->slots, grads);
        jag__leave(st, NULL, 0);
    } else {
        jag_derivative_fn rule = n->op < JAG_OP_BUILTIN_COUNT ? jag__derivatives[n->op] : NULL;
        if (!rule) return jag__error(JAG_ENOTIMPL, "jag_backward: %s has no derivative", n->name);
        jag_grad_ctx c = {n->op, n->name, n->args, n->nargs, n->outputs, n->n_out, n->needs, n->n_inputs};
        jag__enter();
        st = rule(&c, n->slots, grads);
        jag__leave(st, NULL, 0);
    }
    for (int k = 0; !st && k < n->n_inputs; k++) {
        if (!grads[k] || !n->edges[k].node) continue;
        if (n->in_specs && (st = check_function_grad(n, k, grads[k]))) break;
        const jag_tensor *in = n->kind == NODE_FUNCTION ? NULL : jag__grad_input(n->args, n->nargs, k);
        if (in && !in->subclass && !grads[k]->subclass && (!same_shape(in, grads[k]) || in->dtype != grads[k]->dtype)) {
            char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
            st = jag__error(JAG_EINTERNAL, "jag_backward: the derivative of %s gave input %d a %s gradient of shape %s for an input of %s %s",
                            n->name, k, jag_dtype_name(grads[k]->dtype), jag__shape_str(grads[k]->sizes, grads[k]->ndim, a, sizeof a),
                            jag_dtype_name(in->dtype), jag__shape_str(in->sizes, in->ndim, b, sizeof b));
            break;
        }
        st = jag__grad_accumulate(&n->edges[k].node->slots[n->edges[k].slot], grads[k]);
    }
    for (int k = 0; k < n->n_inputs; k++) jag_release(grads[k]);
    for (int i = 0; i < 4; i++) jag_release(n->slots[i]), n->slots[i] = NULL;
    return st;
}

/* leaf.grad += g (g borrowed: an alias of it is stored), under the leaf's
 * lock. */
static jag_status commit_leaf_grad(jag_tensor *leaf, const jag_tensor *grad) {
    jag_tensor *g = NULL, *old = NULL;
    jag_status st = shallow_alias(grad, &g);
    if (st) return st;
    pthread_mutex_lock(grad_lock(leaf));
    bool done = false;
    if (leaf->grad && accumulates_in_place(leaf->grad, g) && ((st = add_in_place(leaf->grad, g, &done)) || done)) {
        pthread_mutex_unlock(grad_lock(leaf));
        jag_release(g);
        return st;
    }
    if (leaf->grad) {
        jag_tensor *sum = NULL;
        jag_value v[] = {jag__v_tensor(leaf->grad), jag__v_tensor(g), jag__v_double(1.0)};
        st = jag__dispatch(JAG_OP_add, v, 3, &sum);
        jag_release(g);
        g = sum;
    }
    if (!st) {
        old = leaf->grad;
        leaf->grad = g;
    }
    pthread_mutex_unlock(grad_lock(leaf));
    jag_release(old);
    return st;
}

/* The leaves reached by this backward that have hooks, with the number of
 * their accumulators among `all` (a leaf used by k ops has k). */
static jag_status find_hooked_leaves(const node_list *all, hooked_leaves *out) {
    if (!atomic_load(&hooks_live)) return JAG_OK;
    pthread_mutex_lock(&hooks_lock);
    size_t n = n_hooks;
    out->v = calloc(n ? n : 1, sizeof *out->v);
    for (size_t i = 0; out->v && i < n; i++) out->v[i].leaf = hooks[i].leaf;
    pthread_mutex_unlock(&hooks_lock);
    if (!out->v) return jag__error(JAG_ENOMEM, "jag_backward: out of memory");
    qsort(out->v, n, sizeof *out->v, cmp_ptr); /* the leaf is the first member */
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || out->v[u - 1].leaf != out->v[i].leaf) out->v[u++] = out->v[i];
    out->n = u;
    for (size_t i = 0; i < all->n; i++) {
        hooked_leaf *h = all->v[i]->kind == NODE_ACCUMULATE ? find_hooked(out, all->v[i]->leaf) : NULL;
        if (h) h->remaining++;
    }
    return JAG_OK;
}

/* An accumulator of a hooked leaf ran: add what it brought; after the
 * last one, write the leaf's gradient and run its hooks. */
static jag_status hooked_leaf_arrived(hooked_leaf *h, jag_node *acc) {
    jag_status st = JAG_OK;
    if (acc->slots[0]) {
        st = jag__grad_accumulate(&h->sum, acc->slots[0]);
        jag_release(acc->slots[0]), acc->slots[0] = NULL;
    }
    if (!st && --h->remaining == 0 && h->sum) {
        st = commit_leaf_grad(h->leaf, h->sum);
        jag_release(h->sum), h->sum = NULL;
        if (!st) st = run_grad_hooks(h->leaf);
    }
    return st;
}

static jag_status check_root_grad(const jag_tensor *root, const jag_tensor *grad) {
    const char *op = "jag_backward";
    if (!grad) {
        if (root->subclass || jag_numel(root) != 1) {
            char s[JAG_SHAPE_BUF];
            return jag__error(JAG_ESHAPE, "%s: argument 'root' has shape %s; a gradient is needed unless it has one element",
                              op, jag__shape_str(root->sizes, root->ndim, s, sizeof s));
        }
        return JAG_OK;
    }
    if (grad->dtype != root->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument 'grad' has dtype %s, expected %s like 'root'", op,
                          jag_dtype_name(grad->dtype), jag_dtype_name(root->dtype));
    if ((grad->subclass != NULL) != (root->subclass != NULL) || grad->ndim != root->ndim)
        return jag__error(JAG_ESHAPE, "%s: argument 'grad' does not have the shape and kind of 'root'", op);
    for (int d = 0; d < root->ndim; d++)
        if (grad->sizes[d] != root->sizes[d]) {
            char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
            return jag__error(JAG_ESHAPE, "%s: argument 'grad' has shape %s, expected %s like 'root'", op,
                              jag__shape_str(grad->sizes, grad->ndim, a, sizeof a),
                              jag__shape_str(root->sizes, root->ndim, b, sizeof b));
        }
    return JAG_OK;
}

jag_status jag_backward(const jag_tensor *root, const jag_tensor *grad, bool retain_graph) {
    const char *op = "jag_backward";
    if (!root) return jag__error(JAG_EINVAL, "%s: argument 'root' is NULL", op);
    if (!root->requires_grad)
        return jag__error(JAG_ESTATE, "%s: argument 'root' does not require grad (no input of it required grad, or grad mode was off)", op);
    jag_status st = check_root_grad(root, grad);
    if (st) return st;
    jag__enter();
    bool prev = jag_set_grad_enabled(false);
    jag_tensor *seed = NULL;
    if (grad) {
        st = shallow_alias(grad, &seed);
    } else {
        jag_value ones[] = {jag__v_ints(root->sizes, root->ndim), jag__v_double(1.0), jag__v_int(root->dtype)};
        st = jag__dispatch(JAG_OP_full, ones, 3, &seed); /* d root / d root */
    }
    node_list all = {0}, leaves = {0};
    jag_node *rootn = root->grad_fn, *tmp_acc = NULL;
    if (!st && !rootn) { /* a leaf: accumulate straight into it */
        tmp_acc = node_new(NODE_ACCUMULATE, "leaf", 0);
        if (!tmp_acc) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
        else tmp_acc->leaf = jag_retain((jag_tensor *)root), tmp_acc->n_out = 1, rootn = tmp_acc;
    }
    hooked_leaves hooked = {0};
    if (!st) st = collect(rootn, &all);
    if (!st) st = find_hooked_leaves(&all, &hooked);
    if (!st) st = jag__grad_accumulate(&rootn->slots[root->grad_fn ? root->output_nr : 0], seed);
    /* Kahn's algorithm: a node runs once every node feeding it has run */
    node_list ready = {0};
    if (!st && !list_push(&ready, rootn)) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    while (!st && ready.n) {
        jag_node *n = ready.v[--ready.n];
        hooked_leaf *h = hooked.n && n->kind == NODE_ACCUMULATE ? find_hooked(&hooked, n->leaf) : NULL;
        st = h ? hooked_leaf_arrived(h, n) : run_node(n, &leaves);
        for (int k = 0; !st && k < n->n_inputs; k++) {
            jag_node *next = n->edges[k].node;
            if (next && --next->deps == 0 && !list_push(&ready, next)) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
        }
    }
    /* commit the other leaves' gradients only when everything succeeded */
    for (size_t i = 0; !st && i < leaves.n; i++) st = commit_leaf_grad(leaves.v[i]->leaf, leaves.v[i]->slots[0]);
    for (size_t i = 0; i < all.n; i++) {
        for (int s = 0; s < 4; s++) jag_release(all.v[i]->slots[s]), all.v[i]->slots[s] = NULL;
        if (!st && !retain_graph && all.v[i]->kind != NODE_ACCUMULATE) node_free_saved(all.v[i]);
    }
    for (size_t i = 0; i < hooked.n; i++) jag_release(hooked.v[i].sum);
    free(hooked.v);
    free(all.v), free(leaves.v), free(ready.v);
    if (tmp_acc) node_release(tmp_acc);
    jag_release(seed);
    jag_set_grad_enabled(prev);
    return jag__leave(st, NULL, 0);
}

/* ---- nodes for compiled programs ------------------------------------------ */

static jag_status ext_backward(jag_autograd_ctx *ctx, jag_tensor *const *grad_outputs, jag_tensor **grad_inputs) {
    return ctx->ext_bw(ctx->ext_state, grad_outputs, ctx->ext_n_out, grad_inputs, ctx->n_inputs);
}

static jag_status ext_forward_unused(jag_autograd_ctx *ctx, jag_tensor *const *in, int n, jag_tensor **outs) {
    (void)ctx, (void)in, (void)n, (void)outs;
    return jag__error(JAG_EINTERNAL, "compiled program: forward of an attached node is never called");
}

jag_status jag__autograd_attach(const char *name, jag_tensor *const *inputs, int n_inputs, jag_tensor **outs,
                                int n_out, jag__extern_backward_fn bw, void *state, void (*free_state)(void *)) {
    if (n_inputs > JAG_GRAD_MAX_INPUTS || n_out > 4 || n_out < 1) {
        if (free_state) free_state(state);
        return jag__error(JAG_ENOTIMPL, "%s: autograd through a compiled program with %d inputs and %d outputs (at most %d and 4)",
                          name, n_inputs, n_out, JAG_GRAD_MAX_INPUTS);
    }
    jag_node *n = node_new(NODE_FUNCTION, name, n_inputs);
    jag_autograd_ctx *ctx = jag__autograd_ctx_new(NULL, false);
    if (!n || !ctx) {
        if (n) node_release(n);
        free(ctx);
        if (free_state) free_state(state);
        return jag__error(JAG_ENOMEM, "%s: out of memory", name);
    }
    n->def = (jag_function_def){.name = name, .n_outputs = n_out, .forward = ext_forward_unused, .backward = ext_backward};
    ctx->ext_bw = bw, ctx->ext_free = free_state, ctx->ext_state = state, ctx->ext_n_out = n_out;
    ctx->needs = n->needs;
    ctx->n_inputs = n_inputs;
    n->ctx = ctx;
    jag_status st = JAG_OK;
    for (int k = 0; !st && k < n_inputs; k++) st = make_edge(n, k, inputs[k]);
    jag_value args[JAG_GRAD_MAX_INPUTS];
    for (int k = 0; k < n_inputs; k++) args[k] = jag__v_tensor(inputs[k]);
    if (!st) st = attach_outputs(n, args, n_inputs, outs, n_out);
    node_release(n);
    return st;
}
