/* iter.c — see iter.h. */
#include "iter.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void jag__broadcast_strides(const jag_tensor *t, const int64_t *sizes, int ndim, int64_t *out) {
    int lead = ndim - t->ndim;
    for (int d = 0; d < ndim; d++) {
        int td = d - lead;
        out[d] = (td < 0 || t->sizes[td] != sizes[d]) ? 0 : t->strides[td];
    }
}

/* Whether each operand's element strides are row-major over `sizes`
 * (size-1 dims, whose strides are never used, skipped). */
static bool all_row_major(const int64_t *sizes, int ndim, int nops, const int64_t *const *elem_strides) {
    for (int k = 0; k < nops; k++) {
        int64_t want = 1;
        for (int d = ndim - 1; d >= 0; d--) {
            if (sizes[d] == 1) continue;
            if (elem_strides[k][d] != want) return false;
            want *= sizes[d];
        }
    }
    return true;
}

void jag__iter_init(jag_iter *it, const int64_t *sizes, int ndim, int nops, char *const *base,
                    const int64_t *const *elem_strides, const size_t *elem_size) {
    JAG_ASSERT(nops >= 1 && nops <= JAG_ITER_MAX_OPS);
    it->nops = nops;
    it->numel = jag__numel(sizes, ndim);
    for (int k = 0; k < nops; k++) it->base[k] = base[k];
    if (it->numel == 0) { /* nothing to visit; the strides of an empty view may be
                           * anything, so do not compute with them (fuzz regression) */
        it->ndim = 0;
        return;
    }
    /* Every operand row-major over the sizes (the common case: fresh
     * outputs, contiguous inputs): one run, what the loops below come to,
     * without them (with run_range's one-row path, dense relu on (1, 8,
     * 64): 2217 -> 2143 instructions a call). */
    if (it->numel > 1 && all_row_major(sizes, ndim, nops, elem_strides)) {
        it->ndim = 1;
        it->sizes[0] = it->numel;
        for (int k = 0; k < nops; k++) it->strides[k][0] = (int64_t)elem_size[k];
        return;
    }
    /* Drop size-1 dims, converting strides to bytes. */
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 1) continue;
        it->sizes[n] = sizes[d];
        for (int k = 0; k < nops; k++) it->strides[k][n] = elem_strides[k][d] * (int64_t)elem_size[k];
        n++;
    }
    /* Merge dim d-1 into d when every operand steps over d-1 exactly as
     * over a whole run of d. */
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0) {
            bool mergeable = true;
            for (int k = 0; k < nops && mergeable; k++)
                mergeable = it->strides[k][m - 1] == it->strides[k][d] * it->sizes[d];
            if (mergeable) {
                it->sizes[m - 1] *= it->sizes[d];
                for (int k = 0; k < nops; k++) it->strides[k][m - 1] = it->strides[k][d];
                continue;
            }
        }
        it->sizes[m] = it->sizes[d];
        for (int k = 0; k < nops; k++) it->strides[k][m] = it->strides[k][d];
        m++;
    }
    it->ndim = m;
}

/* Run rows [row_begin, row_end) of the inner dim, inner elements
 * [col_begin, col_end) of each row. */
static void run_range(const jag_iter *it, int64_t row_begin, int64_t row_end, int64_t col_begin, int64_t col_end,
                      jag_loop_fn fn, void *ctx) {
    int nd = it->ndim;
    if (nd <= 1) { /* one row (row_begin is 0): no odometer */
        char *ptrs[JAG_ITER_MAX_OPS];
        int64_t inner_stride[JAG_ITER_MAX_OPS];
        for (int k = 0; k < it->nops; k++) {
            inner_stride[k] = nd ? it->strides[k][0] : 0;
            ptrs[k] = it->base[k] + col_begin * inner_stride[k];
        }
        if (row_begin < row_end) fn(ptrs, inner_stride, col_end - col_begin, ctx);
        return;
    }
    int64_t inner_stride[JAG_ITER_MAX_OPS];
    for (int k = 0; k < it->nops; k++) inner_stride[k] = nd ? it->strides[k][nd - 1] : 0;
    /* Odometer over the outer dims, started at row_begin. */
    int64_t idx[JAG_MAX_DIMS] = {0};
    int64_t r = row_begin;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = r % it->sizes[d];
        r /= it->sizes[d];
    }
    char *ptrs[JAG_ITER_MAX_OPS];
    for (int64_t row = row_begin; row < row_end; row++) {
        for (int k = 0; k < it->nops; k++) {
            char *p = it->base[k] + col_begin * inner_stride[k];
            for (int d = 0; d < nd - 1; d++) p += idx[d] * it->strides[k][d];
            ptrs[k] = p;
        }
        fn(ptrs, inner_stride, col_end - col_begin, ctx);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < it->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

void jag__iter_run_grain(const jag_iter *it, int64_t grain, jag_loop_fn fn, void *ctx) {
    if (it->numel == 0) return;
    int64_t inner = it->ndim ? it->sizes[it->ndim - 1] : 1;
    int64_t rows = it->numel / inner;
#ifdef _OPENMP
    int nthreads = omp_get_max_threads();
    if (nthreads > 1 && it->numel >= grain) {
        if (rows >= nthreads) {
#pragma omp parallel
            {
                int t = omp_get_thread_num(), nt = omp_get_num_threads();
                int64_t b = rows * t / nt, e = rows * (t + 1) / nt;
                if (b < e) run_range(it, b, e, 0, inner, fn, ctx);
            }
        } else {
            /* Few long rows: split each row's columns across threads. */
            for (int64_t row = 0; row < rows; row++) {
#pragma omp parallel
                {
                    int t = omp_get_thread_num(), nt = omp_get_num_threads();
                    int64_t b = inner * t / nt, e = inner * (t + 1) / nt;
                    if (b < e) run_range(it, row, row + 1, b, e, fn, ctx);
                }
            }
        }
        return;
    }
#endif
    run_range(it, 0, rows, 0, inner, fn, ctx);
}
