/*
 * trace.h — traces (the tracer's program representation), shared by the
 * recorder (trace.c), the printer, the passes and the executor.
 *
 * A trace is a list of bound symbols over variables. A variable is a proxy:
 * a meta tensor (shape, dtype, no data) or a subclass tensor whose inner
 * tensors are proxies. A trace holds one reference on every proxy, and a
 * proxy is a variable of a trace by its address (a small hash map).
 */
#ifndef JAG_TRACE_H
#define JAG_TRACE_H

#include "../dispatch/dispatch.h"

typedef enum {
    JAG_SYM_OP,        /* outs = op(args) */
    JAG_SYM_FLATTEN,   /* outs = inner tensors of args[0] (a subclass input) */
    JAG_SYM_UNFLATTEN, /* outs[0] = cls(args..., meta): an output reassembled */
    JAG_SYM_CTOR,      /* outs[0] = cls(args..., meta): made inside the function */
    JAG_SYM_FUNCTION,  /* a custom autograd function over symbols [begin, end):
                          no work at run time; grad calls its backward */
    JAG_SYM_FUSED,     /* a fused region of pointwise ops (fuse.c) */
} jag_sym_kind;

struct jag_fused; /* fuse.c; refcounted (jag__fused_retain / jag__fused_free) */

/* A custom function's context, shared by the copies of its symbol. */
typedef struct jag_fctx {
    atomic_int refcount;
    jag_autograd_ctx *ctx; /* saved tensors are proxies */
} jag_fctx;

typedef struct jag_sym {
    jag_sym_kind kind;
    jag_op_id op;          /* JAG_SYM_OP; -1 otherwise */
    jag_value *args;       /* owned copies; tensors are proxies of the trace */
    int nargs;
    int *outs;             /* variable ids */
    int n_out;
    const jag_subclass *cls; /* FLATTEN / UNFLATTEN / CTOR */
    jag_subclass_meta meta;
    /* FUNCTION */
    jag_function_def fdef;
    jag_fctx *fctx;        /* one reference */
    int begin, end;
    struct jag_fused *fused; /* FUSED, owned */
    bool backward;           /* made by the grad pass */
} jag_sym;

typedef struct jag_tvar {
    jag_tensor *proxy;    /* one reference */
    char name[24];
    int def;              /* defining symbol, -1 for inputs and constants */
    bool requires_grad;
    jag_tensor *constant; /* a captured tensor with data, or NULL */
} jag_tvar;

struct jag_trace {
    jag_tvar *vars;
    int n_vars, cap_vars;
    jag_sym *syms;
    int n_syms, cap_syms;
    int *inputs, n_inputs;   /* variable ids, in argument order */
    int *outputs, n_outputs; /* variable ids */
    int n_fwd_outputs;       /* after grad: outputs[0..n_fwd) are the forward's */
    int n_fwd_inputs;        /* after grad: inputs[n_fwd..) are cotangents */
    int *map;                /* open addressing: proxy address -> var id + 1 */
    int map_cap;
    int next_tmp;            /* t<k> names */
    int next_const;
};

/* ---- trace building (trace.c) --------------------------------------------- */

jag_trace *jag__trace_new(void);
/* The variable of proxy p, or -1. */
int jag__trace_var(const jag_trace *t, const jag_tensor *p);
/* Add p (retained) as a new variable named `name` (NULL: the next t<k>);
 * def is the defining symbol or -1. Returns the id or -1 (error set). */
int jag__trace_add_var(jag_trace *t, jag_tensor *p, const char *name, int def);
/* Append a symbol (args deep-copied); outs are variable ids (copied).
 * Returns its index or -1 (error set). */
int jag__trace_add_sym(jag_trace *t, jag_sym_kind kind, jag_op_id op, const jag_value *args, int nargs,
                       const int *outs, int n_out);
/* Free a symbol's owned parts. */
void jag__sym_clear(jag_sym *s);
/* Deep copy of boxed args (int lists and tensor lists copied; tensors are
 * not retained: the trace's variables hold them). */
jag_status jag__copy_values(const jag_value *args, int nargs, jag_value **out);
void jag__free_values(jag_value *args, int nargs);
/* Tensor arguments of a symbol, in order (lists expanded): count, and the
 * k-th one. */
int jag__sym_n_inputs(const jag_sym *s);
const jag_tensor *jag__sym_input(const jag_sym *s, int k);

/* A proxy for a subclass from inner proxies (meta tensors) and metadata,
 * without reading data: the nested class gets an unchecked constructor, other
 * classes their unflatten. */
jag_status jag__proxy_unflatten(const jag_subclass *cls, jag_tensor *const *inner, int n, const jag_subclass_meta *meta,
                                jag_tensor **out);
/* jag_subclass_flatten without recording in the caller's scope. */
jag_status jag__flatten_quiet(const jag_tensor *t, jag_tensor **inner, int *n, jag_subclass_meta *meta);
/* A meta tensor with t's dtype, sizes and strides. */
jag_tensor *jag__meta_like(const jag_tensor *t);


/* ---- the recorder -------------------------------------------------------- */

typedef enum { JAG_REC_RECORD, JAG_REC_DESUGAR } jag_rec_mode;

typedef struct jag_recorder {
    jag_trace *trace;
    jag_rec_mode mode;
    int suppress;   /* > 0: inside a symbol being recorded (shape inference) */
    bool backward;  /* symbols recorded now belong to the backward program */
    struct jag_recorder *prev;
} jag_recorder;

/* Start / stop recording into `trace` on this thread (recorders nest). */
void jag__recorder_push(jag_recorder *r, jag_trace *trace, jag_rec_mode mode);
void jag__recorder_pop(jag_recorder *r);
jag_recorder *jag__recorder(void);

/* ---- passes and executor helpers ----------------------------------------- */

/* Copy variable `v` of `src` into `dst` (same proxy, name, flags); returns
 * the new id or -1. */
int jag__trace_copy_var(jag_trace *dst, const jag_trace *src, int v);
/* Whether the op is a pointwise kernel the fuser and executor can run on
 * tiles (fuse.c). */
bool jag__fusable_op(jag_op_id op);
void jag__fused_free(struct jag_fused *f);
struct jag_fused *jag__fused_retain(struct jag_fused *f);
/* A copy with its own scratch buffers (each program gets its own). */
struct jag_fused *jag__fused_private(const struct jag_fused *f);
/* A deep copy of t (symbols, variables; proxies shared). */
jag_status jag__trace_clone(const jag_trace *t, jag_trace **out);
/* Copy symbol s of src into dst, with every tensor argument replaced through
 * `subst` (old proxy -> new proxy; NULL: same), outputs becoming variables of
 * dst (copied from src when new). Returns the new index or -1. */
int jag__trace_copy_sym(jag_trace *dst, const jag_trace *src, const jag_sym *s, jag_tensor *(*subst)(void *, const jag_tensor *),
                        void *ctx);
/* Run a fused region on real tensors (fuse.c); ins/outs in the region's
 * order. */
struct jag_fused_run;
/* Split a gradient trace into a forward program (outputs: the forward's,
 * then what backward needs) and a backward program (inputs: those saved
 * values, then the cotangents; outputs: the input gradients) (grad.c). */
jag_status jag__trace_split(const jag_trace *t, jag_trace **fwd, jag_trace **bwd, int *n_saved);

#endif /* JAG_TRACE_H */
