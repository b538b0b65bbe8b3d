/*
 * kernels.h — the typed CPU kernels below the dispatcher, and the naive
 * references the tests compare them with.
 *
 * A kernel takes plain tensors with data (any strides unless said), C
 * scalars already checked by the op's META function, and outputs the
 * caller allocated (contiguous, shaped and typed as the META function
 * said); it writes the outputs and nothing else. `op` names the op in the
 * few errors a kernel can still raise (out of memory, a value found out of
 * range while reading). The boxed adapters that unbox an op's arguments
 * and call these live in src/dispatch/<family>_op.c.
 */
#ifndef JAG_CPU_KERNELS_H
#define JAG_CPU_KERNELS_H

#include "../core/internal.h"

/* ---- copy.c: copies and fills, which the dispatcher, the tracer's factory
 * ops and other kernels call (above the dispatcher, src/subclass and
 * src/autograd copy and fill through ops: copy_, clone, full) ----------- */

/* Copy src, broadcast to dst's shape and converted to dst's dtype, into dst.
 * Shapes are the caller's to check. */
void jag__copy_into(jag_tensor *dst, const jag_tensor *src);
/* One element at a time through double: the reference for jag__copy_into. */
void jag__copy_ref(jag_tensor *dst, const jag_tensor *src);
/* Set every element of dst to value (converted to dst's dtype). */
void jag__fill(jag_tensor *dst, double value);

/* ---- norm.c: layer_norm and rms_norm over the trailing dims --------------
 *
 * x (N, D) over its trailing normalized_ndim dims (D their product, N the
 * rest), float32 or float64, any strides; weight and bias x's trailing
 * sizes and dtype, any strides, or NULL; y contiguous, x's shape and dtype;
 * mean and rstd contiguous (N) of x's dtype (the statistics' shape: x's
 * leading sizes, then ones), or NULL when not wanted. */

/* y = (x - mean) * rstd * weight + bias per row, rstd = 1 / sqrt(var + eps)
 * with the biased var; the row's mean and rstd go to mean and rstd. */
jag_status jag__layer_norm_kernel(const char *op, const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                                  const jag_tensor *bias, double eps, jag_tensor *y, jag_tensor *mean,
                                  jag_tensor *rstd);
/* y = x * rstd * weight per row, rstd = 1 / sqrt(mean(x^2) + eps). */
jag_status jag__rms_norm_kernel(const char *op, const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                                double eps, jag_tensor *y, jag_tensor *rstd);
/* g, x (N, D) of one shape and dtype, any strides; mean and rstd the
 * forward's statistics (x's leading sizes then ones, any strides) or both
 * NULL (recomputed from x with eps); weight or NULL. dx contiguous like x;
 * dweight and dbias contiguous (D) shaped as x's trailing sizes:
 * dx = rstd (h - mean(h) - xhat mean(h xhat)) with xhat = (x - mean) rstd,
 * h = g weight; dweight = sum over rows of g xhat, dbias = sum of g
 * (torch's native_layer_norm_backward). */
jag_status jag__layer_norm_backward_kernel(const char *op, const jag_tensor *g, const jag_tensor *x,
                                           const jag_tensor *mean, const jag_tensor *rstd, const jag_tensor *weight,
                                           int normalized_ndim, double eps, jag_tensor *dx, jag_tensor *dweight,
                                           jag_tensor *dbias);
/* As above for rms_norm (rstd given or NULL): dx = rstd (h - x rstd^2
 * mean(h x)), dweight = sum over rows of g x rstd. */
jag_status jag__rms_norm_backward_kernel(const char *op, const jag_tensor *g, const jag_tensor *x,
                                         const jag_tensor *rstd, const jag_tensor *weight, int normalized_ndim,
                                         double eps, jag_tensor *dx, jag_tensor *dweight);
/* The naive references: one row at a time in double, two plain passes,
 * reading every tensor through its strides; the same arguments and outputs
 * as the kernels above (no statistics out). */
void jag__layer_norm_reference(const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                               const jag_tensor *bias, double eps, jag_tensor *y);
void jag__rms_norm_reference(const jag_tensor *x, int normalized_ndim, const jag_tensor *weight, double eps,
                             jag_tensor *y);
jag_status jag__layer_norm_backward_reference(const char *op, const jag_tensor *g, const jag_tensor *x,
                                              const jag_tensor *mean, const jag_tensor *rstd,
                                              const jag_tensor *weight, int normalized_ndim, double eps,
                                              jag_tensor *dx, jag_tensor *dweight, jag_tensor *dbias);
jag_status jag__rms_norm_backward_reference(const char *op, const jag_tensor *g, const jag_tensor *x,
                                            const jag_tensor *rstd, const jag_tensor *weight, int normalized_ndim,
                                            double eps, jag_tensor *dx, jag_tensor *dweight);

/* ---- softmax.c: softmax and log_softmax along one dim --------------------
 *
 * x (O, R, I) around dim (R its size, O the dims before it, I those after
 * it; dim in [0, ndim), 0 for a 0-d x), float32 or float64, any strides;
 * y contiguous, x's shape and dtype. */

/* y = exp(x - max) / sum exp(x - max) along dim, or with log_softmax
 * y = x - max - log(sum exp(x - max)); a line with a NaN, a +inf or only
 * -inf comes out NaN (as torch). */
void jag__softmax_kernel(const jag_tensor *x, int dim, bool log_softmax, jag_tensor *y);
/* g and y (the forward's output) of one shape and dtype, any strides; dx
 * contiguous like y: dx = y (g - sum(g y)) along dim, or with log_softmax
 * dx = g - exp(y) sum(g) (torch's _softmax_backward_data /
 * _log_softmax_backward_data). */
jag_status jag__softmax_backward_kernel(const char *op, const jag_tensor *g, const jag_tensor *y, int dim,
                                        bool log_softmax, jag_tensor *dx);
/* The naive references: one line at a time through double and libm, every
 * element read through its full index; the same arguments as above. */
void jag__softmax_reference(const jag_tensor *x, int dim, bool log_softmax, jag_tensor *y);
void jag__softmax_backward_reference(const jag_tensor *g, const jag_tensor *y, int dim, bool log_softmax,
                                     jag_tensor *dx);

/* ---- cat.c: joining tensors along an existing dim ------------------------ */

/* torch's legacy rule: a 1-d tensor with 0 elements (shape [0]) is skipped
 * whatever the others' shapes (it still takes part in dtype promotion). */
static inline bool jag__cat_skips(const jag_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }
/* xs[0..n) (s..., n_i, s...) with n_i at dim d, any dtypes and strides, of
 * the shapes cat's META function accepted; out (s..., sum n_i, s...)
 * contiguous, of the promoted dtype, d in [0, out's ndim). Each input is
 * copied, converted, into its part of out. */
jag_status jag__cat_kernel(jag_tensor *const *xs, int n, int d, jag_tensor *out);
/* The naive reference: element by element through double, out any
 * strides (exact for every value but int64 beyond 2^53). */
void jag__ref_cat(jag_tensor *const *xs, int n, int dim, jag_tensor *out);

/* ---- embedding_bag.c: sums, means or maxima of bags of table rows --------
 *
 * weight (V, D) float32 or float64, indices (N) int32 or int64, offsets
 * (B+1) int64 (bag b is indices[offsets[b] : offsets[b+1]]), mode
 * JAG_BAG_SUM, JAG_BAG_MEAN or JAG_BAG_MAX, per_sample_weights (N) of
 * weight's dtype (sum mode) or NULL; any strides. The kernels check the
 * values of offsets (0 first, non-decreasing, N last: JAG_EINVAL) and of
 * indices (in [0, V): JAG_ERANGE) before writing anything. */

/* out (B, D) contiguous: each bag's rows (scaled by their per-sample
 * weights) summed, averaged or maxed (the first NaN kept); an empty bag
 * gives zeros. */
jag_status jag__embedding_bag_kernel(const char *op, const jag_tensor *weight, const jag_tensor *indices,
                                     const jag_tensor *offsets, int mode, const jag_tensor *per_sample_weights,
                                     jag_tensor *out);
/* The naive reference: element by element in double through the strides;
 * out (B, D) any strides. */
jag_status jag__embedding_bag_reference(const char *op, const jag_tensor *weight, const jag_tensor *indices,
                                        const jag_tensor *offsets, int mode, const jag_tensor *per_sample_weights,
                                        jag_tensor *out);
/* The backward: y the forward's output and g its gradient, (B, D) any
 * strides. grad_weight (V, D) contiguous and zeroed, or NULL: the rows the
 * bags use get g * per-sample weight (sum), g / count (mean), or g on the
 * first row that reached the max (max). grad_psw (N) contiguous, or NULL:
 * the dot product of each sample's row with its bag's g. */
jag_status jag__embedding_bag_backward_kernel(const char *op, const jag_tensor *weight, const jag_tensor *indices,
                                              const jag_tensor *offsets, int mode,
                                              const jag_tensor *per_sample_weights, const jag_tensor *y,
                                              const jag_tensor *g, jag_tensor *grad_weight, jag_tensor *grad_psw);

/* ---- gemm.c: matrix products on BLAS -------------------------------------
 *
 * Operands float32 or float64 of one dtype, any strides (handed to BLAS as
 * they are whenever their strides can be said to it, else copied); out
 * contiguous of their dtype. Errors: JAG_EOVERFLOW when a size exceeds the
 * BLAS library's integer range. */

/* a (n, k) @ b (k, m) -> out (n, m). */
jag_status jag__mm_kernel(const char *op, const jag_tensor *a, const jag_tensor *b, jag_tensor *out);
/* a (B, n, k) @ b (B, k, m) -> out (B, n, m), batch by batch. */
jag_status jag__bmm_kernel(const char *op, const jag_tensor *a, const jag_tensor *b, jag_tensor *out);
/* x (..., in) @ w^T, w (out, in), + bias (out) or NULL -> out (..., out). */
jag_status jag__linear_kernel(const char *op, const jag_tensor *x, const jag_tensor *w, const jag_tensor *bias,
                              jag_tensor *out);
/* Operands the kernels copied because BLAS could not read their layout (a
 * count over the process, for tests of the no-copy paths). */
long jag__gemm_copy_count(void);
/* The naive references: triple loops accumulating in double, any strides
 * (out too), the same shapes as the kernels. */
void jag__ref_mm(const jag_tensor *a, const jag_tensor *b, jag_tensor *out);
void jag__ref_bmm(const jag_tensor *a, const jag_tensor *b, jag_tensor *out);
void jag__ref_linear(const jag_tensor *x, const jag_tensor *w, const jag_tensor *bias, jag_tensor *out);

/* ---- reduce_backward.c: mean's gradient ---------------------------------
 *
 * g (s0', ..., sn') float32 or float64, any strides, each si' equal to si
 * or 1 (mean's gradient with the reduced dims kept); y (s0, ..., sn)
 * contiguous, g's dtype. */

/* y = expand(g, y's sizes) * s, s = 1 / N rounded to the dtype once, N =
 * numel(y) / numel(g) (the count each output of mean averaged). */
void jag__mean_backward_kernel(const jag_tensor *g, jag_tensor *y);
/* The naive reference: element by element from y's flat index, the same
 * arguments and rounding as the kernel. */
void jag__mean_backward_reference(const jag_tensor *g, jag_tensor *y);

/* ---- index.c: indexing by index tensors ----------------------------------
 *
 * Index tensors are int32 or int64, any strides; the kernels read them
 * first, checking every value against the size it indexes (negative values
 * are rejected, as torch does): one out of range is JAG_ERANGE naming its
 * position and value, before anything is written. Data tensors any dtype
 * (scatter_add: float) and any strides; outputs contiguous, of the shape
 * and dtype the op's META function said. A dim is already wrapped into
 * [0, ndim) (0 for a 0-d x). */

/* x (outer..., S, inner...) with S at dim d, index (L) or 0-d with values in
 * [0, S) -> out (outer..., L, inner...): out[.., j, ..] = x[.., index[j], ..]
 * (a 0-d x: one index, 0, and out 0-d). */
jag_status jag__index_select_kernel(const char *op, const jag_tensor *x, int d, const jag_tensor *index,
                                    jag_tensor *out);
/* x (s...), index (i...) of x's ndim with i_e <= s_e for e != d, values in
 * [0, s_d) -> out (i...): out[c] = x[c with c[d] = index[c]]. */
jag_status jag__gather_kernel(const char *op, const jag_tensor *x, int d, const jag_tensor *index, jag_tensor *out);
/* weight (V, D), indices (i...) with values in [0, V) -> out (i..., D):
 * out[c, :] = weight[indices[c], :]. */
jag_status jag__embedding_kernel(const char *op, const jag_tensor *weight, const jag_tensor *indices,
                                 jag_tensor *out);
/* x (s...) float, index and src (i...) of x's ndim with i_e <= s_e for
 * e != d, src float of any dtype (converted to out's) -> out (s...) of x's
 * dtype: a copy of x with out[c with c[d] = index[c]] += src[c] for every
 * position c of src, in src's row-major order (exactly reproducible). The
 * backward of index_select, gather, embedding and max_dim; it is its own
 * reference. */
jag_status jag__scatter_add_kernel(const char *op, const jag_tensor *x, int d, const jag_tensor *index,
                                   const jag_tensor *src, jag_tensor *out);
/* The naive references: one element at a time through the strides, out any
 * strides, the same shapes (dim already wrapped); an index out of range is
 * JAG_ERANGE. */
jag_status jag__ref_index_select(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor *out);
jag_status jag__ref_gather(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor *out);
jag_status jag__ref_embedding(const jag_tensor *weight, const jag_tensor *indices, jag_tensor *out);

/* ---- unary.c: elementwise ops of one tensor ------------------------------
 *
 * x (...) any dtype and strides; y (...) contiguous, x's shape, of the
 * dtype the op's META function said (x is converted to it first when they
 * differ). y may be x itself (the in-place ops): each element is read
 * before it is written. */

/* The parametrised unary ops (torch.nn.functional's), after x their
 * scalars: leaky_relu (negative_slope), elu (alpha), softplus (beta,
 * threshold), hardtanh (min_val, max_val). */
#define JAG_UNARY_PARAM_OP_LIST(X) X(leaky_relu) X(elu) X(softplus) X(hardtanh)

/* Which function a unary kernel applies: JAG_UNARY_<op> for every op of
 * JAG_UNARY_OP_LIST (jag.h), then the parametrised ones. */
typedef enum jag_unary_fn {
#define JAG_UNARY_FN_ENTRY(name) JAG_UNARY_##name,
    JAG_UNARY_OP_LIST(JAG_UNARY_FN_ENTRY) JAG_UNARY_PARAM_OP_LIST(JAG_UNARY_FN_ENTRY)
#undef JAG_UNARY_FN_ENTRY
    JAG_UNARY_FN_COUNT
} jag_unary_fn;

/* Whether f takes scalars after x, and how many. */
static inline bool jag__unary_has_params(jag_unary_fn f) { return f >= JAG_UNARY_leaky_relu && f < JAG_UNARY_FN_COUNT; }
static inline int jag__unary_param_count(jag_unary_fn f) {
    return !jag__unary_has_params(f) ? 0 : f == JAG_UNARY_softplus || f == JAG_UNARY_hardtanh ? 2 : 1;
}

/* y = f(x), or f(x; params) for a parametrised f: params holds its scalars
 * (NULL for the others), which the kernel rounds through y's dtype first,
 * as torch converts them to the tensor's type. Errors: JAG_ENOMEM (the
 * converted copy of x). */
jag_status jag__unary_kernel(const char *op, jag_unary_fn f, const jag_tensor *x, const double *params,
                             jag_tensor *y);
/* The naive reference: element by element through double, each value of x
 * rounded through y's dtype, then the op's textbook formula; the same
 * arguments as the kernel. */
void jag__unary_reference(jag_unary_fn f, const jag_tensor *x, const double *params, jag_tensor *y);

/* dx = g act'(x), the activations' gradients: gelu's Phi(x) + x phi(x)
 * (Phi, phi: the standard normal CDF and density), gelu_tanh's 1/2 (1 + t)
 * + x/2 (1 - t^2) k (1 + 3 a x^2) with t = tanh(u), u = k (x + a x^3),
 * computed as s (1 + 2 x (1 - s) k (1 + 3 a x^2)), s = sigmoid(2 u) (1 + t
 * cancels where u is very negative, s keeps its relative accuracy), silu's
 * s (1 + x (1 - s)) with s = sigmoid(x). g, x and dx float32 or float64 of
 * one shape, any strides (dx from the META function). float32 runs 16
 * lanes at a time on vecmath.h's exp and sigmoid and the float32 erfc
 * kernel of unary.c (SLEEF's or the AVX-512 tables); float64 runs
 * libm in double. The reference: the formula in double, element by
 * element, through libm. sigmoid and tanh take their op's output y in
 * x's place: g (y (1 - y)) and g (1 - y y), in the operands' dtype in
 * that order (the bits of the three ops they replace), the reference in
 * double. logsigmoid's: g sigmoid(-x); softplus's (prm: beta, threshold,
 * rounded to float32 for float32 operands as torch does): g where
 * beta x > threshold, else g sigmoid(beta x). hardswish's: 0 where x <=
 * -3, g (x / 3 + 1/2) where x < 3, else g (NaN x: g); hardsigmoid's: g / 6
 * where -3 < x < 3, else 0; both in the operands' dtype in that order
 * (torch 2.15's rules, hardsigmoid's g / 6 rounded once where torch
 * multiplies by 1/6 rounded). prm is NULL for the ops without scalars. */
typedef enum {
    JAG_ACT_gelu, JAG_ACT_gelu_tanh, JAG_ACT_silu, JAG_ACT_sigmoid, JAG_ACT_tanh, JAG_ACT_logsigmoid, JAG_ACT_softplus,
    JAG_ACT_hardswish, JAG_ACT_hardsigmoid
} jag_act_fn;
void jag__act_backward_kernel(jag_act_fn f, const double *prm, const jag_tensor *g, const jag_tensor *x, jag_tensor *dx);
void jag__act_backward_reference(jag_act_fn f, const double *prm, const jag_tensor *g, const jag_tensor *x,
                                 jag_tensor *dx);

/* ---- binary.c: elementwise ops of two operands, where and clamp ----------
 *
 * Operands any dtype and strides, broadcasting to y's shape (their META
 * functions checked that); y contiguous, of the dtype the META function
 * said. Operands of another dtype than the one the op computes in are
 * converted first. y may be an operand itself, element for element (the
 * in-place ops). */

/* Which function a binary kernel applies: JAG_BINARY_add, then
 * JAG_BINARY_<op> for every op of JAG_BINARY_OP_LIST (jag.h). */
typedef enum jag_binary_fn {
    JAG_BINARY_add,
#define JAG_BINARY_FN_ENTRY(name) JAG_BINARY_##name,
    JAG_BINARY_OP_LIST(JAG_BINARY_FN_ENTRY)
#undef JAG_BINARY_FN_ENTRY
    JAG_BINARY_FN_COUNT
} jag_binary_fn;

/* y = f(a, b) computed in `compute` (add ... minimum: y's dtype; eq ... ge:
 * the dtype they compare in, y bool), b a tensor or, when NULL, the scalar
 * b_scalar; add is a + alpha * b (alpha unused by the others). The scalar
 * and alpha are converted to `compute`, which holds them (the META function
 * checked). Integers wrap; the rules per op are in binary.c. Errors:
 * JAG_ENOMEM (converted copies). */
jag_status jag__binary_kernel(const char *op, jag_binary_fn f, const jag_tensor *a, const jag_tensor *b,
                              double b_scalar, double alpha, jag_dtype compute, jag_tensor *y);
/* cond bool, a and b any dtype: y = cond ? a : b, in y's dtype. */
jag_status jag__where_kernel(const char *op, const jag_tensor *cond, const jag_tensor *a, const jag_tensor *b,
                             jag_tensor *y);
/* x (...) -> y (...) of x's shape: y = min(max(x, lo), hi) in y's dtype,
 * lo <= hi; for an integer y only lo = -inf and hi = +inf may be infinite
 * (they bound nothing). NaN stays NaN. */
jag_status jag__clamp_kernel(const char *op, const jag_tensor *x, double lo, double hi, jag_tensor *y);
/* The naive references: element by element through double, each operand
 * rounded through the compute dtype (where, clamp: y's), the textbook
 * formula, stored into y (contiguous); the same arguments as the kernels. */
void jag__binary_reference(jag_binary_fn f, const jag_tensor *a, const jag_tensor *b, double b_scalar, double alpha,
                           jag_dtype compute, jag_tensor *y);
void jag__where_reference(const jag_tensor *cond, const jag_tensor *a, const jag_tensor *b, jag_tensor *y);
void jag__clamp_reference(const jag_tensor *x, double lo, double hi, jag_tensor *y);

/* ---- reduce.c: reductions over a set of dims -----------------------------
 *
 * x (...) any strides, of a dtype the op's META function accepts; mask[d]
 * (d < x's ndim) says whether dim d is reduced (all false for a 0-d x);
 * outs contiguous, x's sizes without (or with size 1 at) the reduced dims,
 * of the META function's dtypes: sum and prod int64 for integer and bool
 * x, else x's; argmax, argmin and max_dim / min_dim's indices int64 (the
 * position along the reduced dims, first of equal values; NaN counts as
 * the largest and the smallest); the others x's dtype. amax ... argmin
 * need at least one element per output (their META functions check). */

/* Which reduction a kernel runs; max_dim and min_dim write two outputs
 * (values, indices), the others one. */
typedef enum jag_reduction {
    JAG_REDUCTION_sum, JAG_REDUCTION_mean, JAG_REDUCTION_prod, JAG_REDUCTION_amax,
    JAG_REDUCTION_amin, JAG_REDUCTION_logsumexp, JAG_REDUCTION_var, JAG_REDUCTION_std,
    JAG_REDUCTION_max_dim, JAG_REDUCTION_min_dim, JAG_REDUCTION_argmax, JAG_REDUCTION_argmin,
    JAG_REDUCTION_COUNT
} jag_reduction;

static inline int jag__reduction_outputs(jag_reduction r) {
    return r == JAG_REDUCTION_max_dim || r == JAG_REDUCTION_min_dim ? 2 : 1;
}

/* outs = r(x) over the dims in mask; correction is var's and std's (the
 * sum of squared deviations is divided by max(count - correction, 0), as
 * torch; nothing to reduce gives NaN), unused by the others. Float32 accumulates in float64; integers wrap.
 * The result does not depend on the thread count. Errors: JAG_ENOMEM (a
 * copy of x for a layout read neither by rows nor by columns). */
jag_status jag__reduce_kernel(const char *op, jag_reduction r, const jag_tensor *x, const bool *mask,
                              int64_t correction, jag_tensor *const *outs);
/* The naive reference: one pass over x in row-major order (two for var,
 * std and logsumexp) accumulating per output in double (integers in
 * wrapping int64); the same arguments as the kernel. Errors: JAG_ENOMEM. */
jag_status jag__reduce_reference(const char *op, jag_reduction r, const jag_tensor *x, const bool *mask,
                                 int64_t correction, jag_tensor *const *outs);

#endif /* JAG_CPU_KERNELS_H */
