/* factory_op.c — the public entry points of the factories that a traced
 * function sees differently: jag_empty, jag_zeros, jag_ones and jag_full
 * (inside a traced function a recorded `full` op, see src/trace/factory.c)
 * and the random draws jag_rand_uniform / jag_rand_normal (refused inside a
 * traced function). Outside a trace they make the tensor with the core's
 * allocation (src/core/tensor.c), the fill kernel (src/cpu/copy.c) and the
 * core's generator (src/core/random.c). */
#include "dispatch.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */

/* A tensor of `sizes` whose elements are `value` (any when !fill, zero when
 * zeroed): a recorded full op while tracing. */
static jag_status make_filled(const char *op, const int64_t *sizes, int ndim, double value, jag_dtype dtype, bool fill,
                              bool zeroed, jag_tensor **out) {
    if (jag__check_out(op, out)) return JAG_EINVAL;
    jag__enter();
    if (jag__trace_current) return jag__leave(jag__trace_full(sizes, ndim, value, dtype, out), out, 1);
    jag_tensor *t = jag__tensor_new(op, sizes, ndim, dtype, zeroed, false);
    if (t && fill) jag__fill(t, value);
    return jag__finish_new(t, out);
}

jag_status jag_empty(const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out) {
    return make_filled("jag_empty", sizes, ndim, 0.0, dtype, false, false, out);
}

jag_status jag_zeros(const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out) {
    return make_filled("jag_zeros", sizes, ndim, 0.0, dtype, false, true, out);
}

jag_status jag_ones(const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out) {
    return make_filled("jag_ones", sizes, ndim, 1.0, dtype, true, false, out);
}

jag_status jag_full(const int64_t *sizes, int ndim, double value, jag_dtype dtype, jag_tensor **out) {
    return make_filled("jag_full", sizes, ndim, value, dtype, true, false, out);
}

/* A traced program would hold the numbers as a constant and give the same
 * ones on every run: refused. */
static jag_status draw(const char *op, const int64_t *sizes, int ndim, double a, double b, jag_dtype dtype,
                       jag_generator *g, jag_distribution kind, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if (jag__trace_current)
        return jag__error(JAG_ENOTIMPL, "%s: random numbers inside a traced function are refused (the program would repeat the same numbers on every run); draw them outside and pass them as an input",
                          op);
    return jag__random_new(op, sizes, ndim, a, b, dtype, g, kind, out);
}

jag_status jag_rand_uniform(const int64_t *sizes, int ndim, double low, double high, jag_dtype dtype,
                            jag_generator *g, jag_tensor **out) {
    return draw("jag_rand_uniform", sizes, ndim, low, high, dtype, g, JAG_DIST_UNIFORM, out);
}

jag_status jag_rand_normal(const int64_t *sizes, int ndim, double mean, double std, jag_dtype dtype,
                           jag_generator *g, jag_tensor **out) {
    return draw("jag_rand_normal", sizes, ndim, mean, std, dtype, g, JAG_DIST_NORMAL, out);
}
