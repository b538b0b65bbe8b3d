/*
 * autograd.h — the tape: nodes, the derivative table's interface, and the
 * hooks the dispatcher calls.
 *
 * A node is made when an op runs under the AUTOGRAD key (grad mode on, an
 * input requires grad). It holds the op's boxed arguments (tensors retained:
 * the inputs themselves), shallow aliases of its outputs (new headers over
 * the same data with no grad_fn, so that no reference cycle forms) and one
 * edge per tensor input (the node that produced it, or the leaf's gradient
 * accumulator). jag_backward walks nodes in reverse topological order and
 * calls each op's derivative rule.
 */
#ifndef JAG_AUTOGRAD_H
#define JAG_AUTOGRAD_H

#include "../dispatch/dispatch.h"

#define JAG_GRAD_MAX_INPUTS 32 /* tensor inputs of one op, tensor lists expanded */

/* What a derivative rule sees. Tensor inputs are numbered in argument order
 * with tensor lists expanded: input k is the k-th tensor among the args. */
typedef struct jag_grad_ctx {
    jag_op_id op;
    const char *name;          /* "jag_sin", for messages */
    const jag_value *args;     /* the op's arguments, as called */
    int nargs;
    jag_tensor *const *outputs; /* aliases of the op's outputs (no grad_fn) */
    int n_out;
    const bool *needs;         /* needs[k]: tensor input k wants a gradient */
    int n_inputs;              /* tensor inputs */
} jag_grad_ctx;

/* A derivative rule: from grad_out[0..n_out) (never NULL: missing ones are
 * zeros) compute grad_in[k] for every k with needs[k] (new references; leave
 * the others NULL). Written with jag ops, so that nested inputs get nested
 * gradients. Gradients must have the input's shape and dtype (reduce
 * broadcast dims with jag__sum_to). */
typedef jag_status (*jag_derivative_fn)(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);

/* The derivative table (derivatives.c), by built-in op id; NULL: the op has
 * no derivative (its outputs do not require grad when the op does not
 * produce floats, else backward through it is JAG_ENOTIMPL). */
extern const jag_derivative_fn jag__derivatives[JAG_OP_BUILTIN_COUNT];

/* Rules of the nested values bridge (derivatives_nested.c). */
jag_status jag__d_values(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
jag_status jag__d_nested_from_jagged(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
/* Rules for jagged ops along the ragged dim; *handled says whether this was
 * one (derivatives_nested.c). */
jag_status jag__d_jagged_ragged(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in,
                                bool *handled);
/* A derivative's context with its jagged tensors whose ragged dim is not 1
 * in canonical form (see src/subclass/ragged_idx.c): args, outputs and
 * output gradients relabelled to ragged dim 1 (dims relabelled too; a
 * component picked by select back in canonical order), so that the rules
 * written for dim 1 apply. Input gradients then get the inputs' ragged dim
 * back (jag__nested_relabel). Free with jag__canonical_grad_ctx_free. */
typedef struct jag_canonical_ctx {
    jag_grad_ctx ctx;
    jag_value args[16];
    jag_tensor *outputs[4], *go[4];
    jag_tensor *temps[16];
    int n_temps;
    int64_t lists[JAG_MAX_DIMS];
} jag_canonical_ctx;
jag_status jag__canonical_grad_ctx(const jag_grad_ctx *c, jag_tensor *const *go, jag_canonical_ctx *cc);
void jag__canonical_grad_ctx_free(jag_canonical_ctx *cc);
/* fn(canonical context, data), then each jagged input's gradient relabelled
 * back to that input's ragged dim. */
jag_status jag__grad_on_canonical(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi,
                                  jag_status (*fn)(const jag_grad_ctx *, jag_tensor *const *, jag_tensor **, void *),
                                  void *data);
/* Whether a derivative context holds a jagged tensor whose ragged dim is
 * not 1. */
bool jag__grad_ctx_moved(const jag_grad_ctx *c);
/* The rule of sdpa (src/dispatch/attention_op.c). */
jag_status jag__d_sdpa(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
/* *slot += g through the add op (g borrowed; a new reference when the slot
 * is empty): the gradient sum of the engine and of the grad pass. */
jag_status jag__grad_accumulate(jag_tensor **slot, jag_tensor *g);
jag_status jag__d_varlen_attention(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
jag_status jag__d_ragged_reduce(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
jag_status jag__d_ragged_reduce_indices(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
/* ragged_softmax's rule (derivatives_nested.c): ragged_softmax_backward. */
jag_status jag__d_ragged_softmax(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
jag_status jag__d_to_padded(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
jag_status jag__d_embedding_bag(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
jag_status jag__d_from_padded(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);
/* full / full_like: the result does not depend on the input's values: no
 * gradient (src/trace/factory.c). */
jag_status jag__d_factory(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in);

/* The k-th tensor input of a call (tensor lists expanded), or NULL. */
const jag_tensor *jag__grad_input(const jag_value *args, int nargs, int k);

/* Reduce g to `like`'s shape by summing broadcast dims (leading dims g has
 * and like lacks, and dims where like has size 1): the gradient of an
 * implicit broadcast. Works for dense g and like; for a nested g and a dense
 * like (a dense operand broadcast over a nested tensor) it sums over the
 * packed dims. Returns a new reference. */
jag_status jag__sum_to(const jag_tensor *g, const jag_tensor *like, jag_tensor **out);

/* ---- dispatcher hooks (engine.c) ----------------------------------------- */

/* True when this call must go through the AUTOGRAD key: grad mode is on, the
 * thread is not already below the key, and a tensor argument requires grad. */
bool jag__autograd_wanted(const jag_value *args, int nargs);
/* Run op below the AUTOGRAD key and record a node for its outputs. */
jag_status jag__autograd_dispatch(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);

/* ---- compiled programs and the tracer (engine.c) ----------------------------- */

/* Backward of a node attached by jag__autograd_attach: grad_outputs[0..n_out)
 * (zeros where none came) to grad_inputs[0..n_in) (new references or NULL). */
typedef jag_status (*jag__extern_backward_fn)(void *state, jag_tensor *const *grad_outputs, int n_out,
                                              jag_tensor **grad_inputs, int n_in);
/* Give outs[0..n_out) one node over inputs whose backward is `bw(state)`;
 * free_state(state) runs when the node's saved data goes (also on failure). */
jag_status jag__autograd_attach(const char *name, jag_tensor *const *inputs, int n_inputs, jag_tensor **outs,
                                int n_out, jag__extern_backward_fn bw, void *state, void (*free_state)(void *));
/* jag_function_apply while tracing (src/trace/trace.c). */
jag_status jag__trace_function_apply(const jag_function_def *def, jag_tensor *const *inputs, int n_inputs,
                                     jag_tensor **outs);

#endif /* JAG_AUTOGRAD_H */
