/*
 * iter.h — walking N-d strided operands element by element, fast.
 *
 * A jag_iter describes up to JAG_ITER_MAX_OPS operands over one shape (inputs
 * already broadcast: stride 0 on broadcast dims). jag__iter_init merges dims
 * that are contiguous for every operand and drops size-1 dims, so a
 * contiguous tensor becomes one long row. jag__iter_run_grain then calls a loop
 * function on 1-D runs, splitting the runs across OpenMP threads.
 *
 * The loop function sees byte pointers and byte strides, one per operand:
 *     fn(ptrs, strides, n, ctx): for i in 0..n: op(ptrs[k] + i * strides[k])
 * Operand 0 is by convention the output.
 */
#ifndef JAG_ITER_H
#define JAG_ITER_H

#include "../core/internal.h"

#define JAG_ITER_MAX_OPS 4

typedef void (*jag_loop_fn)(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx);

typedef struct jag_iter {
    int ndim;                                /* after merging; 0 = one element */
    int nops;
    int64_t sizes[JAG_MAX_DIMS];             /* innermost dim last */
    int64_t strides[JAG_ITER_MAX_OPS][JAG_MAX_DIMS]; /* bytes */
    char *base[JAG_ITER_MAX_OPS];
    int64_t numel;
} jag_iter;

/* Operand k: base pointer, element strides over `sizes` (already broadcast)
 * and element size in bytes. */
void jag__iter_init(jag_iter *it, const int64_t *sizes, int ndim, int nops, char *const *base,
                    const int64_t *const *elem_strides, const size_t *elem_size);
/* Run fn over all elements; in parallel from `grain` elements on (one of
 * the JAG_GRAIN_* of internal.h, as the loop's cost per element calls for). */
void jag__iter_run_grain(const jag_iter *it, int64_t grain, jag_loop_fn fn, void *ctx);

/* Strides of tensor t broadcast to `sizes` (ndim >= t->ndim): 0 on broadcast
 * dims. The shapes must already be known to broadcast. */
void jag__broadcast_strides(const jag_tensor *t, const int64_t *sizes, int ndim, int64_t *out);

#endif /* JAG_ITER_H */
