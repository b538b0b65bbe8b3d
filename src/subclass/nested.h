/*
 * nested.h — the nested subclass's state and its internal constructors,
 * shared by nested.c (construction, conversion, printing) and nested_ops.c
 * (the op handler).
 */
#ifndef JAG_NESTED_H
#define JAG_NESTED_H

#include "../dispatch/dispatch.h"

typedef struct nested_state {
    jag_layout layout;
    int64_t batch;
    /* jagged: outer dim `ragged_idx` (1 unless a transpose moved it) is
     * ragged; the values keep the ragged rows first and the other outer
     * dims after them in outer order: (B, j, H, D) and its transpose
     * (B, H, j, D) share values (sum L, H, D). */
    int ragged_idx;
    jag_tensor *values;   /* (sum L, D...) */
    jag_tensor *offsets;  /* int64 (B+1) */
    jag_tensor *lengths;  /* int64 (B) or NULL */
    /* strided */
    jag_tensor *buffer;   /* 1-D */
    jag_tensor *sizes;    /* int64 (B, n) contiguous */
    jag_tensor *strides;  /* int64 (B, n) contiguous */
    jag_tensor *storage_offsets; /* int64 (B) contiguous */
    /* shared facts */
    atomic_llong ragged_id;
    int64_t min_seqlen, max_seqlen;
    _Atomic(jag_tensor *) row_ids; /* jagged: int64 (sum L) owner row of each value row, lazily */
    _Atomic(jag_tensor *) seq_lengths; /* jagged without holes: int64 (B) component lengths, lazily */
} nested_state;

/* The nested class (registered on first use). */
const jag_subclass *jag__nested_class(void);
/* What each slot of a nested tensor's flatten metadata
 * (jag_subclass_meta.ints) holds. Its inner tensors are values, offsets
 * and, with holes, lengths (jagged) or buffer, sizes, strides and storage
 * offsets (strided). */
enum {
    JAG_NESTED_SLOT_LAYOUT = 0,      /* jag_layout: JAG_JAGGED or JAG_STRIDED */
    JAG_NESTED_SLOT_RAGGED_ID = 1,   /* the ragged symbol (unflatten takes it from the inner tensors) */
    JAG_NESTED_SLOT_HAS_LENGTHS = 2, /* jagged: 1 with holes (lengths is the third inner tensor), else 0 */
    JAG_NESTED_SLOT_MIN_SEQLEN = 3,  /* jagged: the cached minimum component length, -1 when unknown */
    JAG_NESTED_SLOT_MAX_SEQLEN = 4,  /* jagged: the cached maximum component length, -1 when unknown */
    JAG_NESTED_SLOT_RAGGED_IDX = 5,  /* jagged: the ragged outer dim (1 unless a transpose moved it) */
    JAG_NESTED_JAGGED_SLOTS = 6,     /* slots a jagged tensor's metadata holds */
    JAG_NESTED_STRIDED_SLOTS = 2,    /* slots a strided tensor's metadata holds (layout, ragged id) */
};
/* The metadata of a jagged tensor about to be built from values, offsets
 * and, when has_lengths, lengths: ragged dim 1, the ragged id and the length
 * bounds unknown (-1), to be taken from the inner tensors. */
static inline jag_subclass_meta jag__nested_jagged_meta(bool has_lengths) {
    jag_subclass_meta m = {.n_ints = JAG_NESTED_JAGGED_SLOTS};
    m.ints[JAG_NESTED_SLOT_LAYOUT] = JAG_JAGGED;
    m.ints[JAG_NESTED_SLOT_RAGGED_ID] = -1;
    m.ints[JAG_NESTED_SLOT_HAS_LENGTHS] = has_lengths;
    m.ints[JAG_NESTED_SLOT_MIN_SEQLEN] = -1;
    m.ints[JAG_NESTED_SLOT_MAX_SEQLEN] = -1;
    m.ints[JAG_NESTED_SLOT_RAGGED_IDX] = 1;
    return m;
}
/* Two nested tensors' flatten metadata alike but for what unflatten takes
 * from the inner tensors (the ragged id, the length bounds): the same
 * layout, holes and ragged dim. */
bool jag__nested_meta_alike(const jag_subclass_meta *a, const jag_subclass_meta *b);
/* The class once registered (NULL before: no tensor is nested then). */
extern const jag_subclass *jag__nested_class_ptr;
/* t's state, or NULL when t is not nested (inline: on every nested op's
 * path, many times). */
static inline nested_state *jag__nested(const jag_tensor *t) {
    return t && t->subclass && t->subclass == jag__nested_class_ptr ? (nested_state *)t->state : NULL;
}

/* A ragged symbol no nested tensor has yet. */
int64_t jag__new_ragged_id(void);

/* Unchecked constructors for results whose structure is already known good
 * (validation is for user input only): they take new references on the
 * tensors given. */
jag_status jag__nested_wrap_jagged(const jag_tensor *values, const jag_tensor *offsets, const jag_tensor *lengths,
                                   int64_t ragged_id, int64_t min_seqlen, int64_t max_seqlen, jag_tensor **out);
/* The same (ragged dim 1, no lengths), taking the references values and
 * offsets hold (released on failure too): for tensors just made. */
jag_status jag__nested_wrap_jagged_taking(jag_tensor *values, jag_tensor *offsets, int64_t ragged_id, int64_t min_seqlen,
                                          int64_t max_seqlen, jag_tensor **out);
/* The same with the ragged dim at outer dim ragged_idx (1..values.ndim). */
jag_status jag__nested_wrap_jagged_at(const jag_tensor *values, const jag_tensor *offsets, const jag_tensor *lengths,
                                      int64_t ragged_id, int64_t min_seqlen, int64_t max_seqlen, int ragged_idx,
                                      jag_tensor **out);
/* A jagged result with x's structure (offsets, lengths, ragged id, ragged
 * dim) around new values. */
jag_status jag__nested_rewrap_jagged(const nested_state *like, const jag_tensor *values, jag_tensor **out);
/* The same, taking the reference `values` holds (released on failure too):
 * for values just made, it saves a retain and a release. */
jag_status jag__nested_rewrap_jagged_taking(const nested_state *like, jag_tensor *values, jag_tensor **out);

/* Register the nested class's rules (nested_ops.c), one decomposition per
 * op that has a rule of its own, through jag_subclass_register_decomp: run
 * once, with the class. jag__nested_has_rule: whether `op` got one. */
jag_status jag__nested_register_rules(const jag_subclass *cls);
bool jag__nested_has_rule(jag_op_id op);
jag_status jag__nested_wrap_strided(const jag_tensor *buffer, const jag_tensor *sizes, const jag_tensor *strides,
                                    const jag_tensor *storage_offsets, int64_t ragged_id, jag_tensor **out);

/* ---- the ragged dim away from dim 1 (ragged_idx.c) ----------------------
 * A jagged tensor whose ragged dim is outer dim r has the same values as
 * the one whose ragged dim is dim 1 and whose other dims keep their order
 * (its "canonical" form): moving the ragged dim relabels dims, it never
 * moves data. Ops on such tensors run on the canonical form with their dim
 * arguments relabelled. */

/* The jagged tensor's ragged dim, 0 when nt is not jagged. */
int jag__nested_ragged_idx(const jag_tensor *nt);
/* The values dim that outer dim d (1..ndim-1) of a jagged tensor with its
 * ragged dim at r reads: 0 for d == r. */
static inline int jag__values_dim(int d, int r) { return d < r ? d : d == r ? 0 : d - 1; }
/* Outer dim d of a tensor with its ragged dim at r, as a dim of the
 * canonical form (ragged dim 1). */
static inline int64_t jag__canonical_dim(int64_t d, int r) { return d == 0 ? 0 : d == r ? 1 : d < r ? d + 1 : d; }
/* nt (jagged) with its ragged dim relabelled to outer dim r: a new header
 * over the same inner tensors. */
jag_status jag__nested_relabel(const jag_tensor *nt, int r, jag_tensor **out);
/* A component (canonical order: ragged rows first) as a view in outer
 * order: its dim 0 moves to dim r - 1. Takes over `comp`. */
jag_tensor *jag__component_outer_order(jag_tensor *comp, int r);
/* Inverse of jag__component_outer_order: a component in outer order back
 * to the canonical order (ragged rows first). New reference; NULL on
 * failure (status set). */
jag_tensor *jag__component_canonical_order(const jag_tensor *comp, int r);
/* args of op with every jagged tensor (ragged dim r, outer_ndim dims) in its
 * canonical form, dense operands of pointwise ops lined up with it
 * (jag__dense_to_canonical) and dim arguments relabelled. New tensors go to
 * temps[*n_temps...] (at most one per argument); a relabelled dim list to
 * lists. JAG_ESHAPE when jagged arguments are ragged in different dims. */
jag_status jag__nested_canonical_args(jag_op_id op, const jag_value *args, int nargs, int r, int outer_ndim,
                                      jag_value *out, jag_tensor **temps, int *n_temps, int64_t *lists);
/* Whether res, a result of op on a jagged tensor with outer_ndim dims, is
 * the dense result of a reduction over the ragged dim with keepdim: every
 * dim kept, the reduced ragged dim's 1 where the ragged dim was. Run on
 * the canonical form it has that 1 at dim 1. */
bool jag__kept_ragged_result(jag_op_id op, const jag_value *args, int nargs, const jag_tensor *res, int outer_ndim);
/* Such a result between the canonical order (its dim 1) and outer order
 * (its dim r), as a view: to_outer moves dim 1 to r, else r to 1. New
 * reference; NULL on failure (status set). */
jag_tensor *jag__kept_ragged_reorder(const jag_tensor *res, int r, bool to_outer);
/* Where the ragged dim (at r before) lands in op's nested results. */
int jag__nested_ragged_idx_after(jag_op_id op, const jag_value *args, int nargs, int r, int outer_ndim);
/* transpose of a jagged tensor that involves its ragged dim or a tensor
 * whose ragged dim is not 1: the ragged dim moves, the values are
 * permuted (a view) when the other dims change order. */
jag_status jag__nested_transpose_jagged(const jag_op_info *info, const jag_value *args, int nargs, nested_state *lead,
                                        int outer_ndim, jag_tensor **outs);
/* Any other op with a jagged argument whose ragged dim is not 1: run on the
 * canonical forms with dims relabelled, results relabelled back. Ops whose
 * meaning does not survive the relabelling are JAG_ENOTIMPL. */
jag_status jag__nested_dispatch_moved(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                      nested_state *lead, int outer_ndim, jag_tensor **outs, void *ctx);
/* A dense operand of a pointwise op against a jagged (B, ..., j at r, ...)
 * tensor of outer_ndim dims, as a view that lines up with the canonical
 * form (its dim at the ragged position, which must be 1 if present, moved
 * to dim 1). JAG_ESHAPE when it varies along the ragged dim. */
jag_status jag__dense_to_canonical(const char *op, int argi, const jag_tensor *d, int outer_ndim, int r, jag_tensor **out);

/* Whether a and b have the same raggedness (same ragged id, or equal
 * offsets and lengths). With `remember`, a match by value unifies their ids,
 * so that the next check is one comparison; callers remember only once the
 * op succeeded (a failed call changes nothing). */
bool jag__nested_same_raggedness(nested_state *a, nested_state *b, bool remember);
/* Row ids of a jagged tensor: int64 (sum L), entry r = the component owning
 * value row r. Cached; borrowed. */
const jag_tensor *jag__nested_row_ids(nested_state *s);
/* Components as views (outs[0..batch), new references). */
jag_status jag__nested_unbind(const nested_state *s, jag_tensor **outs);
/* Copy components into a new nested tensor of `layout` (validates shapes). */
jag_status jag__nested_from_components(const char *op, jag_tensor *const *items, int64_t n, jag_layout layout,
                                       jag_tensor **out);
/* The implementations behind the to_padded / from_padded ops. */
jag_status jag__nested_to_padded(const jag_tensor *nt, double padding, const int64_t *output_sizes, int ndim,
                                 jag_tensor **out);
jag_status jag__nested_from_padded(const jag_tensor *padded, const jag_tensor *lengths, jag_tensor **out);
/* The kernels along the ragged dim (src/cpu/ragged_reduce.c) on s's inner
 * tensors, for the callers that run them directly rather than through the
 * ragged ops (src/dispatch/ragged_op.c). outs[0]: values (B, kept dims...)
 * dense, outs[1]: int64 indices (the row inside each component) for
 * MAX/MIN; ARGMAX/ARGMIN give only the indices (outs[0]). Empty components
 * are an error for the extreme kinds. */
jag_status jag__segment_reduce_dims(const char *op, const nested_state *s, const jag_segment_spec *sp, jag_tensor **outs);
/* The values-shaped gradient of the reduction above: y its output, idx its
 * indices (MAX/MIN; else NULL), g the output's gradient. */
jag_status jag__segment_reduce_grad(const char *op, const nested_state *s, const jag_segment_spec *sp, const jag_tensor *y,
                                    const jag_tensor *idx, const jag_tensor *g, jag_tensor **out);
/* g (B, C) [scaled per component by 1 / its length when `mean`] -> a new
 * values-shaped tensor: every row of component b is g[b]; rows in holes 0. */
jag_status jag__segment_broadcast(const char *op, const nested_state *s, const jag_tensor *g, bool mean,
                                  jag_tensor **out);
/* The reductions without indices, through the ragged_reduce and
 * ragged_reduce_backward ops on s's inner tensors (ragged_ops.c): what the
 * handler and the rules call, so that traces record plain ops. The
 * backward also serves max / min (max_dim / min_dim over the ragged dim
 * alone) given the forward's indices idx (else NULL). */
jag_status jag__ragged_reduce(const nested_state *s, const jag_segment_spec *sp, jag_tensor **out);
jag_status jag__ragged_reduce_backward(const nested_state *s, const jag_segment_spec *sp, const jag_tensor *y,
                                       const jag_tensor *idx, const jag_tensor *g, jag_tensor **out);
/* max_dim / min_dim (outs: values, indices) or argmax / argmin (outs:
 * indices) over the ragged dim alone, through the ragged_reduce_indices op. */
jag_status jag__ragged_reduce_indices(const nested_state *s, const jag_segment_spec *sp, jag_tensor **outs);
/* softmax / log_softmax down each component of s's ragged dim and its
 * gradient (y: the forward's output values, g: their gradient), through the
 * ragged_softmax and ragged_softmax_backward ops on s's inner tensors
 * (ragged_ops.c): new values-shaped tensors. */
jag_status jag__ragged_softmax(const nested_state *s, bool log_softmax, jag_tensor **out);
jag_status jag__ragged_softmax_backward(const nested_state *s, const jag_tensor *y, const jag_tensor *g, bool log_softmax,
                                        jag_tensor **out);
/* Whether a single dim argument names the ragged dim (1) of a jagged tensor
 * with outer_ndim dims. */
bool jag__is_ragged_dim(const jag_value *dim, int outer_ndim);

/* Whether a reduction's arguments reduce over the ragged dim: 1 (and *sp
 * filled), 0, or -1 with an error set (nested_ops.c). */
int jag__ragged_reduction(jag_op_id op, const jag_value *args, int nargs, int outer_ndim, jag_segment_spec *sp);
/* Joining and picking components (nested_join.c). */
jag_status jag__nested_cat(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__nested_index_select_batch(const char *op, nested_state *s, const jag_tensor *index, jag_tensor **outs);
jag_status jag__nested_unsqueeze(const char *op, nested_state *s, int outer_ndim, int64_t dim, jag_tensor **outs);
jag_status jag__nested_bag_args(const char *op, const jag_value *args, int nargs, jag_value *a, jag_tensor **temps);
/* The op handler (nested_ops.c). */
jag_status jag__nested_dispatch(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                jag_tensor **outs, void *ctx);
/* contiguous for nested tensors: removes holes and gaps. */
jag_status jag__nested_contiguous(const jag_tensor *nt, jag_tensor **out);

/* A nested proxy (tracing) from inner proxies and flatten metadata: the
 * unchecked constructors, the ragged symbol tied to the offsets proxy. */
jag_status jag__nested_proxy(jag_tensor *const *inner, int n, const jag_subclass_meta *meta, jag_tensor **out);

#endif /* JAG_NESTED_H */
