/*
 * program.h — the executor's structures (program.c), shared with the
 * compiled-function cache (compile.c).
 */
#ifndef JAG_PROGRAM_H
#define JAG_PROGRAM_H

#include "trace.h"

/* What an input must be, from the trace's input proxy. */
typedef struct jag_input_sig {
    char name[24];
    const jag_subclass *cls;
    jag_dtype dtype;
    int ndim;
    int64_t sizes[JAG_MAX_DIMS];
    bool requires_grad;
    jag_subclass_meta meta;
    int n_inner;
    jag_dtype inner_dtype[JAG_SUBCLASS_MAX_INNER];
    int inner_ndim[JAG_SUBCLASS_MAX_INNER];
    int64_t inner_sizes[JAG_SUBCLASS_MAX_INNER][JAG_MAX_DIMS];
} jag_input_sig;

/* One symbol lowered: its argument slots, the slots whose last use it is,
 * and output buffers kept between runs. */
typedef struct jag_instr {
    const jag_sym *sym; /* in the exec's own trace */
    bool direct;        /* META + kept buffers + kernel, without the dispatcher */
    int *arg_slot, n_args;
    int *release, n_release;
    int group[JAG_SUBCLASS_MAX_INNER]; /* buffer group of each output (direct and fused), or -1 */
    /* direct ops: the META result of the last run and the input shapes it
     * was computed for (the same shapes again skip META) */
    bool have_specs;
    jag_dtype in_dtype[4];
    int in_ndim[4];
    int64_t in_sizes[4][JAG_MAX_DIMS];
    jag_spec specs[4];
    /* view / expand / full: the size list, with entries bound to input sizes
     * (dyn_cand[j] >= 0: entry j is that candidate's size at run time) */
    int size_arg;       /* the INTS argument, or -1 */
    int64_t *dyn_ints;  /* the list as run (owned) */
    int *dyn_cand;      /* per entry: candidate or -1 (owned) */
    /* the arguments boxed once when lowered (no tensor list): each run
     * only sets the tensors, at positions tpos[0..n_args) (owned) */
    jag_value *argv;
    int *tpos;
    /* a direct pointwise op run by its typed kernel, its scalars unboxed
     * when lowered: JAG_TYPED_UNARY (fn a jag_unary_fn) or JAG_TYPED_ARITH
     * (fn a jag_binary_fn; b_scalar: b is `scalar`) */
    int typed, fn;
    bool b_scalar;
    double scalar, alpha;
} jag_instr;

enum { JAG_TYPED_NONE, JAG_TYPED_UNARY, JAG_TYPED_ARITH };

/* A size of an input that a size list depends on: input `input`, inner
 * tensor `inner` (-1: the input itself), dim `dim`; and the group of
 * candidates that were equal when traced (they must be equal at run time). */
typedef struct jag_size_cand {
    int input, inner, dim;
    int64_t traced;
    bool pinned; /* must keep its traced value (a narrow depends on it) */
} jag_size_cand;

/* A trace ready to run (slots are variable ids). Refcounted: the autograd
 * node of a run keeps its backward alive. */
typedef struct jag_exec {
    atomic_int refcount;
    jag_trace *trace;
    jag_instr *code;
    int n_code;
    jag_tensor **slots;
    bool *borrowed; /* slot holds no reference of its own: a kept buffer, or an input the caller holds for the run */
    int n_slots;
    jag_input_sig *sig;
    /* buffer groups: values whose lifetimes do not overlap share one group;
     * a group keeps its last buffer between instructions and runs */
    jag_tensor **keep;
    int n_groups;
    bool fixed_sizes; /* some symbol fixes sizes: inputs must match them */
    /* every shape in a run follows from the plain inputs' shapes and
     * dtypes: when they are those of the last complete run (last_ok), the
     * direct ops' specs of that run serve without comparing shapes */
    bool shapes_follow_inputs;
    bool last_ok;
    jag_dtype *last_dtype;
    int *last_ndim;
    int64_t (*last_sizes)[JAG_MAX_DIMS];
    int *leftover, n_leftover; /* slots still set after a run */
    jag_size_cand *cands;
    int n_cands;
    int64_t *cand_value; /* at run time */
    /* generalized (generalize.c): the program serves inputs of other sizes
     * than its trace's; these input sizes must keep their values */
    bool generalized;
    jag_size_cand *kept;
    int n_kept;
} jag_exec;

jag_status jag__exec_new(const jag_trace *t, jag_exec **out);
void jag__exec_release(jag_exec *e);
/* fixed: check sizes too (as for an exec with fixed sizes) */
jag_status jag__exec_check(jag_exec *e, jag_tensor *const *inputs, int n_inputs, bool fixed);
/* own_headers: plain outputs as new headers (they get a grad_fn next). */
jag_status jag__exec_run(jag_exec *e, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs, int n_outputs,
                         bool own_headers);

/* ---- one program for several sizes (generalize.c) ------------------------- */

/* Whether e guesses what its size-list entries are: any entry but -1 may
 * be a constant or an input size (program.c reads one above 1 from an input
 * size it equals, and takes the rest as constants), or it fixes sizes. */
bool jag__exec_guesses(const jag_exec *e);
/* Make e static: every entry a constant, every input size kept at its
 * traced value (generalized: later traces may free them). */
jag_status jag__exec_make_static(jag_exec *e);
/* When execs b[i] (traced from inputs of other sizes) show how a[i]'s
 * entries follow the input sizes, for every i < n (at most 3: a program's
 * execs), generalize every a[i] to serve b[i]'s inputs too; *merged says
 * whether they were. */
jag_status jag__execs_generalize(jag_exec *const *a, const jag_exec *const *b, int n, bool *merged);
/* The same for a program: static when it guesses (compile.c makes every new
 * program so), and generalized by a later program of the same function. */
jag_status jag__program_make_static(jag_program *p);
jag_status jag__program_generalize(jag_program *p, const jag_program *q, bool *merged);
/* fuse.c: two fused regions that compute the same */
bool jag__fused_same(const struct jag_fused *a, const struct jag_fused *b);

#endif /* JAG_PROGRAM_H */
