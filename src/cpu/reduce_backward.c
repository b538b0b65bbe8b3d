/*
 * reduce_backward.c — mean_backward's typed kernel and its naive reference
 * (the op's META function and boxed adapter are
 * src/dispatch/reduce_backward_op.c).
 *
 * mean's gradient is g expanded to x's sizes and divided by the count N of
 * elements each output averaged. Written as expand then a multiply by the
 * double 1 / N, a traced program would hold N as a constant, and a program
 * compiled on one batch size would not serve another (a double is not a
 * size: the tracer cannot tell where it came from). Here N is not an
 * argument: it is numel(y) / numel(g), read from the output's sizes (the
 * op's size list) at run time, which the tracer binds to the inputs' sizes
 * as it does view's and expand's (src/trace/program.c). The result equals
 * expand(g, sizes) * s with s = 1 / N rounded to the dtype once, as the
 * multiply did.
 */
#include "kernels.h"

/* 1 / N rounded to the dtype, N = numel(y) / numel(g) (numel(g) > 0). */
static double scale_of(const jag_tensor *g, const jag_tensor *y) {
    return 1.0 / (double)(jag_numel(y) / jag_numel(g));
}

/* y[i] = g[i with broadcast dims at 0] * s, row by row: the odometer runs
 * over every dim but the last, whose loop reads g with stride 0 or its own. */
#define MEAN_BACKWARD_LOOP(T)                                                                          \
    do {                                                                                               \
        const T *gp = (const T *)jag__ptr(g);                                                          \
        T *yp = (T *)jag__ptr(y), s = (T)scale_of(g, y);                                               \
        int nd = y->ndim;                                                                              \
        int64_t cols = nd ? y->sizes[nd - 1] : 1, gs = nd && g->sizes[nd - 1] != 1 ? g->strides[nd - 1] : 0; \
        int64_t rows = cols ? jag_numel(y) / cols : 0, idx[JAG_MAX_DIMS] = {0};                        \
        for (int64_t r = 0; r < rows; r++) {                                                           \
            int64_t off = 0;                                                                           \
            for (int d = 0; d < nd - 1; d++)                                                           \
                if (g->sizes[d] != 1) off += idx[d] * g->strides[d];                                   \
            const T *gr = gp + off;                                                                    \
            T *yr = yp + r * cols;                                                                     \
            for (int64_t c = 0; c < cols; c++) yr[c] = gr[c * gs] * s;                                 \
            for (int d = nd - 2; d >= 0 && ++idx[d] == y->sizes[d]; d--) idx[d] = 0;                   \
        }                                                                                              \
    } while (0)

// g is (s0', ..., sn'), y is (s0, ..., sn) contiguous: y = expand(g) / N
void jag__mean_backward_kernel(const jag_tensor *g, jag_tensor *y) {
    if (jag_numel(y) == 0) return;
    if (g->dtype == JAG_FLOAT32) MEAN_BACKWARD_LOOP(float);
    else MEAN_BACKWARD_LOOP(double);
}

/* The naive reference: element by element from the flat index, with the
 * scale rounded to the dtype, as the kernel's one multiply. */
void jag__mean_backward_reference(const jag_tensor *g, jag_tensor *y) {
    if (jag_numel(y) == 0) return;
    const int64_t *sizes = y->sizes;
    double s = scale_of(g, y);
    for (int64_t i = 0; i < jag_numel(y); i++) {
        int64_t rest = i, off = 0;
        for (int d = y->ndim - 1; d >= 0; d--) {
            int64_t k = rest % sizes[d];
            rest /= sizes[d];
            if (g->sizes[d] != 1) off += k * g->strides[d];
        }
        if (g->dtype == JAG_FLOAT32)
            ((float *)jag__ptr(y))[i] = ((const float *)jag__ptr(g))[off] * (float)s;
        else
            ((double *)jag__ptr(y))[i] = ((const double *)jag__ptr(g))[off] * s;
    }
}
