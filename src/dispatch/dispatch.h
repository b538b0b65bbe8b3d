/*
 * dispatch.h — the op table, boxed values and the dispatcher.
 *
 * Every built-in op is a row of ops.def; custom ops are rows added at run
 * time. A call boxes its arguments into jag_value[] and goes through
 * jag__dispatch, which picks the key — SUBCLASS when an argument is a wrapper
 * subclass, else META when the tensors have no data, else CPU — and runs it:
 * the subclass's handler, or the META function (validate, infer outputs),
 * allocation and the kernel.
 */
#ifndef JAG_DISPATCH_H
#define JAG_DISPATCH_H

#include "../core/internal.h"

/* ---- boxed values (jag_value is public, see jag.h): constructors -------- */

/* Each value in one initializer: built field by field after a zeroing
 * store, a value was copied into its argument array by 16-byte loads that
 * straddled the narrower stores (failed store-to-load forwarding, 7% of a
 * small nested sum: 256 -> 243 ns). */

static inline jag_value jag__v_tensor(const jag_tensor *t) {
    return (jag_value){.kind = t ? JAG_VAL_TENSOR : JAG_VAL_NONE, .u.t = t};
}
static inline jag_value jag__v_int(int64_t i) { return (jag_value){.kind = JAG_VAL_INT, .u.i = i}; }
static inline jag_value jag__v_double(double d) { return (jag_value){.kind = JAG_VAL_DOUBLE, .u.d = d}; }
static inline jag_value jag__v_bool(bool b) { return (jag_value){.kind = JAG_VAL_BOOL, .u.b = b}; }
static inline jag_value jag__v_ints(const int64_t *p, int n) {
    return (jag_value){.kind = JAG_VAL_INTS, .u.ints = {p, n}};
}
static inline jag_value jag__v_tensors(jag_tensor *const *p, int n) {
    return (jag_value){.kind = JAG_VAL_TENSORS, .u.tensors = {p, n}};
}

/* ---- ops ---------------------------------------------------------------- */

/* Built-in ops take the first ids, in ops.def order; custom ops follow. */
enum jag_builtin_op {
#define JAG_OP(name, n_in, n_out, tags, meta, cpu, schema, doc) JAG_OP_##name,
#include "ops.def"
#undef JAG_OP
    JAG_OP_BUILTIN_COUNT
};

/* The op table's capacity: built-in ops plus custom ops defined at run time.
 * Fixed, so that a lookup never races with a table that grows. */
#define JAG_MAX_OPS 1024

/* `op` is the public name ("jag_sin") for error messages. A META function
 * checks every argument (kinds, dtypes, shapes) and fills outs[0..n_out). */
typedef jag_status (*jag_meta_fn)(const char *op, const jag_value *args, int nargs, jag_spec *outs);
/* A kernel computes into outs (allocated, contiguous, shaped as the specs).
 * A VIEW kernel creates outs[0] itself and must work on meta tensors. A
 * kernel may still fail (e.g. an index out of range found while reading):
 * it then returns the status with the error set, and the dispatcher frees the
 * outputs. */
typedef jag_status (*jag__cpu_fn)(const char *op, const jag_value *args, int nargs, jag_tensor **outs);

struct jag_custom_op; /* custom_op.c */

typedef struct jag_op_info {
    const char *name;     /* "sin", "custom_ns::my_op" */
    const char *api_name; /* for messages: "jag_sin", "custom_ns::my_op" */
    int n_in, n_out;
    unsigned tags;
    jag_meta_fn meta;     /* built-in ops */
    jag__cpu_fn cpu;      /* built-in ops */
    struct jag_custom_op *custom; /* custom ops: schema and kernels */
    const char *schema;   /* "sin(Tensor x) -> Tensor" */
    const char *doc;      /* one line: what the op computes */
} jag_op_info;

/* ---- schemas (schema.c) ------------------------------------------------- */

/* An argument's type in a schema, and the boxed kinds it accepts. */
typedef enum {
    JAG_ARG_TENSOR,          /* Tensor */
    JAG_ARG_OPT_TENSOR,      /* Tensor?: a tensor or none */
    JAG_ARG_TENSORS,         /* Tensor[] */
    JAG_ARG_TENSOR_OR_FLOAT, /* Tensor|float: a tensor or a number */
    JAG_ARG_INT,             /* int */
    JAG_ARG_INTS,            /* int[] */
    JAG_ARG_FLOAT,           /* float: a double or an int */
    JAG_ARG_BOOL,            /* bool */
} jag_arg_type;

#define JAG_SCHEMA_MAX_ARGS 16

typedef struct {
    char name[132]; /* "sin", or ns (63) + "::" + name (63) for custom ops */
    int n_args, n_out;
    jag_arg_type types[JAG_SCHEMA_MAX_ARGS];
    char arg_names[JAG_SCHEMA_MAX_ARGS][32];
} jag_schema;

/* Parse `text`; `namespaced` requires "ns::name". Errors (JAG_EINVAL, the
 * message led by `who` and pointing at the column): a malformed schema. */
jag_status jag__schema_parse(const char *who, const char *text, bool namespaced, jag_schema *out);
/* Whether a boxed value of kind k may be passed as an argument of type t. */
bool jag__arg_fits(jag_arg_type t, jag_value_kind k);
/* "Tensor?", "int[]", ... as in schemas; "a tensor or none", "an int
 * list", ... for messages. */
const char *jag__arg_type_text(jag_arg_type t);
const char *jag__arg_type_phrase(jag_arg_type t);
/* The op's parsed schema (NULL only when a built-in row is malformed:
 * jag__builtin_schemas_check says which). */
const jag_schema *jag__op_schema(jag_op_id op);
/* Parse every ops.def row once; JAG_EINTERNAL when a row's schema does not
 * parse or disagrees with the row's name or counts. */
jag_status jag__builtin_schemas_check(void);
/* Which arguments are dims, read from the schema: bit i of *bits for an
 * int argument named dim, dim0 or dim1; *list the index of an int[]
 * argument named dims (-1 when none). Custom ops have none. */
void jag__op_dim_args(jag_op_id op, unsigned *bits, int *list);
/* A custom op's schema (custom_op.c). */
const jag_schema *jag__custom_schema(const jag_op_info *info);

/* Rows [0, jag__n_ops) are valid; built-in rows are filled statically. */
extern jag_op_info jag__ops[JAG_MAX_OPS];
extern atomic_int jag__n_ops;

static inline bool jag__op_valid(jag_op_id op) { return op >= 0 && op < atomic_load_explicit(&jag__n_ops, memory_order_acquire); }

/* Declarations of every META function and kernel named in ops.def. */
#define JAG_OP(name, n_in, n_out, tags, meta, cpu, schema, doc)                \
    jag_status cpu(const char *, const jag_value *, int, jag_tensor **);
#include "ops.def"
#undef JAG_OP
jag_status jag__meta_unary_keep(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_unary_float(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_unary_param(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_binary_arith(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_binary_float(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_binary_compare(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_where(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_clamp(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_clone(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_to_dtype(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_reduce_sum(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_reduce_float(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_reduce_keep(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_reduce_var(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_reduce_index(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_reduce_index2(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_mm(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_bmm(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_linear(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_softmax(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_layer_norm(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_rms_norm(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_index_select(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_gather(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_embedding(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_cat(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_full_like(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_embedding_bag(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_ragged_reduce(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_scatter_add(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_varlen_attention(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_varlen_attention_backward(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_ragged_reduce_backward(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_ragged_reduce_indices(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_ragged_softmax(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_ragged_softmax_backward(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_native_layer_norm(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_native_rms_norm(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_layer_norm_backward(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_mean_backward(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_rms_norm_backward(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_softmax_backward(const char *, const jag_value *, int, jag_spec *);
jag_status jag__meta_activation_backward(const char *, const jag_value *, int, jag_spec *);

/* Custom ops (custom_op.c): check args against the schema; run the kernel
 * for a key (`meta` selects the Meta kernel). */
jag_status jag__custom_check_args(const jag_op_info *info, const jag_value *args, int nargs);
jag_status jag__custom_run(const jag_op_info *info, bool meta, const jag_value *args, int nargs, jag_tensor **outs);
/* Whether the custom op has an Autograd kernel, and running it (it records
 * its own graph, typically with jag_function_apply). */
bool jag__custom_has_autograd(const jag_op_info *info);
jag_status jag__custom_run_autograd(const jag_op_info *info, const jag_value *args, int nargs, jag_tensor **outs);

/* Subclasses (src/subclass/subclass.c): run op for the class of a subclass
 * argument (a registered decomposition first, else the class's handler). */
jag_status jag__subclass_run(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                             jag_tensor **outs);
/* jag_subclass_wrap without its argument checks, for jag's own classes
 * (their sizes are known good): the same ownership of state. */
jag_status jag__subclass_wrap_unchecked(const jag_subclass *cls, void *state, jag_dtype dtype, const int64_t *sizes,
                                        int ndim, jag_tensor **out);

/* Run `op` on boxed args; on success outs[0..n_out) hold new references.
 * Callers inside jag use this; public entry points wrap it with
 * jag__enter/jag__leave (jag__call does both). */
jag_status jag__dispatch(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);
/* jag__dispatch for a subclass rule's call of an op on plain tensors of
 * its own (a nested tensor's values, offsets, ...), made from a call that
 * jag__dispatch already checked: `args` must fit op's schema (the outer
 * call's arguments with tensors replaced by tensors). When the full path
 * would only run the META function and the kernel (not tracing, a built-in
 * op that is neither a view nor a composite, every tensor operand plain,
 * with data, not requiring grad and not of a half dtype) it runs them
 * directly; otherwise it is jag__dispatch. Same results, errors and
 * ownership as jag__dispatch. */
jag_status jag__dispatch_plain(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);
/* The TRACE key (src/trace/trace.c): while a thread records a trace, every
 * dispatched op goes to the recorder first. jag__trace_current is that
 * thread's recorder (NULL when none: one load on the hot path), also read
 * by the public entry points that behave differently while tracing. */
extern JAG_TLS void *jag__trace_current;
bool jag__tracing(void);      /* recording, and not inside a symbol */
jag_status jag__trace_dispatch(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);
/* jag__dispatch without the TRACE key (the recorder's own calls). */
jag_status jag__dispatch_untraced(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);
/* Factories under tracing: a recorded `full` / `full_like` (meta inside a
 * symbol). */
jag_status jag__trace_full(const int64_t *sizes, int ndim, double value, jag_dtype dtype, jag_tensor **out);
jag_status jag__trace_full_like(const jag_tensor *x, double value, jag_tensor **out);
jag_status jag__meta_full(const char *, const jag_value *, int, jag_spec *);
/* Subclass construction under tracing (jag_subclass_wrap): whether to record
 * it, and recording it (may replace *t; releases it on failure). */
bool jag__trace_wants_ctor(void);
jag_status jag__trace_on_wrap(jag_tensor **t);

/* In-place ops' fast path: run a plain op's kernel straight into `out`
 * (`name` for messages). *done says whether it ran; it runs only when out
 * is plain, contiguous, of the op's result dtype and shape, and every
 * operand over out's memory is out itself. Otherwise nothing happens and
 * the caller computes a new tensor and copies it in. Errors: the op's
 * argument checks. */
jag_status jag__dispatch_into(jag_op_id op, const char *name, const jag_value *args, int nargs, jag_tensor *out,
                              bool *done);
/* Write src into dst (src's shape; dst a part of a tensor being built: a
 * component of a nested tensor, a slice of a gradient): the clone op's
 * kernel straight into a contiguous dst (jag__dispatch_into), else the
 * copy_ op with grad mode off, as building a tensor copies its inputs'
 * data and whatever autograd records, it records for the op as a whole.
 * `op` names the caller in errors. */
jag_status jag__copy_part(const char *op, jag_tensor *dst, const jag_tensor *src);

/* jag__dispatch bracketed as a public entry point (records outputs in the
 * open scope). */
jag_status jag__call(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);

/* ---- helpers for META functions ----------------------------------------- */

/* "a tensor", "an int", ... for messages. */
const char *jag__kind_name(jag_value_kind k);

/* Check that args[i] is a tensor (with `name` for messages); sets the error. */
jag_status jag__arg_tensor(const char *op, const jag_value *args, int nargs, int i,
                           const char *name, const jag_tensor **out);
/* Check that a gradient operand g has `like`'s shape and dtype (the fused
 * backward ops: like_name, "x" or "y", names `like` in the messages). */
jag_status jag__arg_grad_like(const char *op, const jag_tensor *g, const jag_tensor *like, const char *like_name);
/* Same for an optional tensor: *out is NULL when absent. */
jag_status jag__arg_opt_tensor(const char *op, const jag_value *args, int nargs, int i,
                               const char *name, const jag_tensor **out);
jag_status jag__arg_int(const char *op, const jag_value *args, int nargs, int i,
                        const char *name, int64_t *out);
jag_status jag__arg_double(const char *op, const jag_value *args, int nargs, int i,
                           const char *name, double *out);
jag_status jag__arg_bool(const char *op, const jag_value *args, int nargs, int i,
                         const char *name, bool *out);
jag_status jag__arg_ints(const char *op, const jag_value *args, int nargs, int i,
                         const char *name, const int64_t **v, int *n);
/* Fill a spec (0 <= ndim <= JAG_MAX_DIMS; the bound is asserted so that
 * the compiler sees the copy stays inside s->sizes). */
static inline void jag__spec_set(jag_spec *s, jag_dtype dtype, const int64_t *sizes, int ndim) {
    JAG_ASSERT(ndim >= 0 && ndim <= JAG_MAX_DIMS);
    s->dtype = dtype;
    s->ndim = ndim;
    /* element by element over the fixed bound: a memcpy of ndim * 8 bytes
     * compiles to `rep movs` here (gcc, -march=znver3), whose start-up cost
     * was 13% of a small nested relu */
#pragma GCC unroll 8
    for (int d = 0; d < JAG_MAX_DIMS; d++)
        if (d < ndim) s->sizes[d] = sizes[d];
}

#endif /* JAG_DISPATCH_H */
