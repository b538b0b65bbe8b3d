/*
 * ragged_kernels.h — the typed CPU kernels along the ragged dim of a jagged
 * batch (ragged_reduce.c), and the naive references the tests compare them
 * with.
 *
 * A jagged batch is plain data here: values (R, D...) whose component b is
 * the rows [offsets[b], offsets[b] + len_b), len_b = lengths[b] when
 * lengths are given, else offsets[b+1] - offsets[b] (jag_ragged_rows); C is
 * the product of D... (the columns). The callers (src/dispatch/ragged_op.c)
 * have checked that every component lies inside the values' rows. Values
 * are float32 or float64 (the integer reductions say otherwise) with any
 * strides (a strided input is copied once); outputs are contiguous, shaped
 * and typed as said, and given by the caller. `op` names the op in the few
 * errors a kernel can still raise (out of memory, an empty component's
 * max).
 */
#ifndef JAG_CPU_RAGGED_KERNELS_H
#define JAG_CPU_RAGGED_KERNELS_H

#include "../core/internal.h"

/* jag_segment_kind (what a reduction over the ragged dim computes) is in
 * jag.h; jag_segment_spec (the kind with its dims) in core/internal.h. */

/* The components' rows: batch B, offsets (B+1 entries; the first B are
 * read when lengths are given), lengths (B) or NULL; contiguous int64
 * arrays the caller keeps alive for the call. */
typedef struct jag_ragged_rows {
    int64_t batch;
    const int64_t *offsets;
    const int64_t *lengths;
} jag_ragged_rows;

/* ---- reductions over the ragged dim (and trailing dims) ------------------
 *
 * values (R, D...) float; sp->mask the trailing dims reduced with the
 * ragged dim; y (B, kept D...) contiguous of the values' dtype (NULL for
 * ARGMAX / ARGMIN), ix (B, kept D...) contiguous int64, the row inside its
 * component of each extreme (MAX, MIN, ARGMAX, ARGMIN over the ragged dim
 * alone; NULL for the other kinds). sum, mean (NaN for an empty
 * component), amax / amin (a NaN wins), logsumexp, var / std = M2 /
 * max(count - correction, 0) (NaN for an empty component), as torch's
 * reductions over the same elements. An empty component is JAG_EINVAL for
 * the extreme kinds (torch: no identity). */
jag_status jag__ragged_reduce_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                     const jag_segment_spec *sp, jag_tensor *y, jag_tensor *ix);
/* The same for int32, int64 and bool values and SUM, MEAN, AMAX or AMIN,
 * with torch's result dtypes: y int64 (sum, wrapping), float32 (mean: the
 * int64 sum / count in double; NaN when empty) or the values' dtype (amax /
 * amin: an empty component gives the dtype's lowest / highest value). */
jag_status jag__ragged_reduce_int_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                         const jag_segment_spec *sp, jag_tensor *y);
/* max (max true) or min with indices of int32 / int64 values over the
 * ragged dim alone: y (B, D...) of the values' dtype gets each component's
 * extreme per column, ix (B, D...) int64 the row of its first occurrence
 * within the component (torch's max(dim) / argmax: the first index). y and
 * ix contiguous (a keepdim shape has the same layout). An empty component
 * is JAG_EINVAL, as for float values. */
jag_status jag__ragged_reduce_int_indices_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                                 bool max, jag_tensor *y, jag_tensor *ix);
/* The values' gradient of the reduction above: y its output (needed by
 * amax, amin, logsumexp, std; else may be NULL), idx its indices (MAX, MIN;
 * else NULL), g (B, kept D...) float -> z (R, D...) contiguous of the
 * values' dtype; rows outside every component 0. sum: g; mean: g / count;
 * amax / amin: g split evenly among the ties (torch's amax rule); max / min:
 * g on the winning row; logsumexp: g exp(x - y); var: 2 g (x - mean) /
 * (count - correction); std: var's / (2 y). */
jag_status jag__ragged_reduce_backward_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                              const jag_segment_spec *sp, const jag_tensor *y, const jag_tensor *idx,
                                              const jag_tensor *g, jag_tensor *z);
/* g (B, C) float -> z (R, C) contiguous of z's dtype: every row of
 * component b is g[b] (divided by len_b when `mean`); rows outside every
 * component 0. */
jag_status jag__ragged_broadcast_kernel(const char *op, const jag_ragged_rows *rows, const jag_tensor *g, bool mean,
                                        jag_tensor *z);

/* ---- softmax down the ragged dim ----------------------------------------
 *
 * Each column of a component is normalised on its own; rows outside every
 * component are 0. */

/* values (R, D...) -> y (R, D...) contiguous: exp(x - max) / sum exp(x -
 * max), or x - max - log(sum exp(x - max)) with log_softmax; a column with a
 * NaN or a +inf comes out NaN (torch's softmax). */
jag_status jag__ragged_softmax_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                      bool log_softmax, jag_tensor *y);
/* y the forward's output, g (y's shape and dtype) -> z (R, D...)
 * contiguous: y (g - sum g y), or g - exp(y) sum g with log_softmax
 * (torch's _softmax_backward_data / _log_softmax_backward_data). */
jag_status jag__ragged_softmax_backward_kernel(const char *op, const jag_tensor *y, const jag_ragged_rows *rows,
                                               const jag_tensor *g, bool log_softmax, jag_tensor *z);

/* ---- the naive references ------------------------------------------------
 *
 * Element by element in double with libm's exp and log, the same arguments
 * and outputs as the kernels above; rows outside every component are left
 * untouched (softmax) or 0 (the reduction's gradient). */
jag_status jag__ragged_reduce_reference(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                        const jag_segment_spec *sp, jag_tensor *y, jag_tensor *ix);
jag_status jag__ragged_reduce_backward_reference(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                                 const jag_segment_spec *sp, const jag_tensor *y,
                                                 const jag_tensor *idx, const jag_tensor *g, jag_tensor *z);
jag_status jag__ragged_softmax_reference(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                         bool log_softmax, jag_tensor *y);
jag_status jag__ragged_softmax_backward_reference(const char *op, const jag_tensor *y, const jag_ragged_rows *rows,
                                                  const jag_tensor *g, bool log_softmax, jag_tensor *z);

/* ---- row kernels ---------------------------------------------------------
 *
 * x (n, C) float32 rows (row stride C), their first nc columns -> acc (nc):
 * the column sums, each in double in row order (the ragged sum's kernel;
 * _ref is its plain loop, with the same bits). */
void jag__sum_rows_f32(const float *x, int64_t C, int64_t n, int64_t nc, double *acc);
void jag__sum_rows_f32_ref(const float *x, int64_t C, int64_t n, int64_t nc, double *acc);
/* The same rows -> mean, m2 (nc): each column's mean and sum of squared
 * deviations, in double (the ragged var's kernel; _ref its plain loop, with
 * the same bits). nc <= 512. */
void jag__var_rows_f32(const float *x, int64_t C, int64_t n, int64_t nc, double *mean, double *m2);
void jag__var_rows_f32_ref(const float *x, int64_t C, int64_t n, int64_t nc, double *mean, double *m2);

/* The same rows (n >= 1) -> m (nc): each column's max (is_max) or min, the
 * first NaN of a column winning over every number and the first of equal
 * values kept (amax / amin's kernel; _ref its plain loop, with the same
 * bits). */
void jag__ext_rows_f32(const float *x, int64_t C, int64_t n, int64_t nc, bool is_max, float *m);
void jag__ext_rows_f32_ref(const float *x, int64_t C, int64_t n, int64_t nc, bool is_max, float *m);

/* ---- dense tensors as uniform segments ------------------------------------ */

/* A contiguous float x of at least min_numel elements (JAG_SEGMENTS_MIN
 * unless said otherwise) reduced, or softmaxed, over one dim with dims
 * after it (a middle dim): the dims
 * before make O segments of R = x.size(dim) rows of C columns (the dims
 * after). The engine above runs these faster than the dense kernels' column
 * layout (reduce.c COL, softmax.c's tiles), which hands whole columns to
 * the threads and so runs one thread on few columns. *values is x viewed as
 * (O R, C) (release it), *offsets the O + 1 segment starts (free it), *rows
 * their batch. Errors: JAG_ENOMEM. */
#define JAG_SEGMENTS_MIN 2048
bool jag__dense_segments_apply(const jag_tensor *x, int dim, int64_t min_numel);
jag_status jag__dense_as_segments(const char *op, const jag_tensor *x, int dim, jag_tensor **values, jag_ragged_rows *rows,
                                  int64_t **offsets);

#endif /* JAG_CPU_RAGGED_KERNELS_H */
