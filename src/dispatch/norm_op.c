/*
 * norm_op.c — the layer_norm and rms_norm ops: their META functions
 * (argument checks, output shapes) and the boxed adapters ops.def names,
 * which unbox the checked arguments and run the typed kernels of
 * src/cpu/norm.c; the boxed forms of the naive references, for the tests.
 */
#include "dispatch.h"
#include "../cpu/kernels.h"

/* ---- META ---------------------------------------------------------------- */

/* An optional affine tensor: same dtype as x, shape x's trailing nd sizes. */
static jag_status check_affine(const char *op, const char *name, const jag_tensor *x, int nd, const jag_tensor *t) {
    if (!t) return JAG_OK;
    const int64_t *want = x->sizes + (x->ndim - nd);
    bool same = t->ndim == nd;
    for (int d = 0; same && d < nd; d++) same = t->sizes[d] == want[d];
    if (!same) {
        char b[JAG_SHAPE_BUF], c[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument '%s' has shape %s, expected %s (the last %d sizes of x)", op, name,
                          jag__shape_str(t->sizes, t->ndim, b, sizeof b), jag__shape_str(want, nd, c, sizeof c), nd);
    }
    if (t->dtype != x->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected %s (x's dtype)", op, name,
                          jag_dtype_name(t->dtype), jag_dtype_name(x->dtype));
    return JAG_OK;
}

/* (x, normalized_ndim, weight or none, [bias or none,] eps). */
static jag_status parse(const char *op, const jag_value *args, int nargs, bool has_bias, const jag_tensor **x,
                        int *nd, const jag_tensor **w, const jag_tensor **b, double *eps) {
    int64_t n;
    jag_status st;
    *b = NULL;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", x)) ||
        (st = jag__arg_int(op, args, nargs, 1, "normalized_ndim", &n)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, 2, "weight", w)) ||
        (has_bias && (st = jag__arg_opt_tensor(op, args, nargs, 3, "bias", b))) ||
        (st = jag__arg_double(op, args, nargs, has_bias ? 4 : 3, "eps", eps)))
        return st;
    if (!jag_dtype_is_floating((*x)->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'x' has dtype %s, expected float32 or float64", op,
                          jag_dtype_name((*x)->dtype));
    if (n < 1 || n > (*x)->ndim)
        return jag__error(JAG_EINVAL, "%s: argument 'normalized_ndim' is %lld, expected 1..%d (x is %d-d)", op,
                          (long long)n, (*x)->ndim, (*x)->ndim);
    *nd = (int)n;
    if ((st = check_affine(op, "weight", *x, *nd, *w)) || (st = check_affine(op, "bias", *x, *nd, *b))) return st;
    return JAG_OK;
}

/* layer_norm: y has x's shape and dtype. */
jag_status jag__meta_layer_norm(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, true, &x, &nd, &w, &b, &eps);
    if (st == JAG_OK) jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return st;
}

/* rms_norm: y has x's shape and dtype. */
jag_status jag__meta_rms_norm(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, false, &x, &nd, &w, &b, &eps);
    if (st == JAG_OK) jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    return st;
}

/* The statistics' shape: x's leading sizes, then nd ones (torch's). */
static int stats_shape(const jag_tensor *x, int nd, int64_t *sizes) {
    for (int d = 0; d < x->ndim; d++) sizes[d] = d < x->ndim - nd ? x->sizes[d] : 1;
    return x->ndim;
}

/* native_layer_norm: (y, mean, rstd); native_rms_norm: (y, rstd). */
static jag_status meta_native(const char *op, const jag_value *args, int nargs, jag_spec *outs, bool layer) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, layer, &x, &nd, &w, &b, &eps);
    if (st) return st;
    int64_t ss[JAG_MAX_DIMS];
    int sn = stats_shape(x, nd, ss);
    jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    for (int k = 1; k <= (layer ? 2 : 1); k++) jag__spec_set(&outs[k], x->dtype, ss, sn);
    return JAG_OK;
}

jag_status jag__meta_native_layer_norm(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    return meta_native(op, args, nargs, outs, true);
}

jag_status jag__meta_native_rms_norm(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    return meta_native(op, args, nargs, outs, false);
}

/* The arguments of layer_norm_backward (g, x, mean or none, rstd or none,
 * weight or none, normalized_ndim, eps) and rms_norm_backward (g, x, rstd or
 * none, weight or none, normalized_ndim, eps). */
typedef struct norm_bwd {
    const jag_tensor *g, *x, *mean, *rstd, *w;
    int nd;
    double eps;
} norm_bwd;

/* A saved statistic: x's dtype, shaped as stats_shape says. */
static jag_status check_stat(const char *op, const char *name, const jag_tensor *x, int nd, const jag_tensor *t) {
    if (!t) return JAG_OK;
    int64_t want[JAG_MAX_DIMS];
    int wn = stats_shape(x, nd, want);
    bool same = t->ndim == wn;
    for (int d = 0; same && d < wn; d++) same = t->sizes[d] == want[d];
    if (!same) {
        char b[JAG_SHAPE_BUF], c[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument '%s' has shape %s, expected %s (x's leading sizes, then %d ones)", op,
                          name, jag__shape_str(t->sizes, t->ndim, b, sizeof b), jag__shape_str(want, wn, c, sizeof c), nd);
    }
    if (t->dtype != x->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected %s (x's dtype)", op, name,
                          jag_dtype_name(t->dtype), jag_dtype_name(x->dtype));
    return JAG_OK;
}

static jag_status parse_backward(const char *op, const jag_value *args, int nargs, bool layer, norm_bwd *a) {
    int64_t n;
    jag_status st;
    int k = layer ? 3 : 2; /* rstd's position */
    a->mean = NULL;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "g", &a->g)) || (st = jag__arg_tensor(op, args, nargs, 1, "x", &a->x)) ||
        (layer && (st = jag__arg_opt_tensor(op, args, nargs, 2, "mean", &a->mean))) ||
        (st = jag__arg_opt_tensor(op, args, nargs, k, "rstd", &a->rstd)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, k + 1, "weight", &a->w)) ||
        (st = jag__arg_int(op, args, nargs, k + 2, "normalized_ndim", &n)) ||
        (st = jag__arg_double(op, args, nargs, k + 3, "eps", &a->eps)))
        return st;
    const jag_tensor *x = a->x, *g = a->g;
    if (!jag_dtype_is_floating(x->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'x' has dtype %s, expected float32 or float64", op,
                          jag_dtype_name(x->dtype));
    if (n < 1 || n > x->ndim)
        return jag__error(JAG_EINVAL, "%s: argument 'normalized_ndim' is %lld, expected 1..%d (x is %d-d)", op,
                          (long long)n, x->ndim, x->ndim);
    a->nd = (int)n;
    if ((st = jag__arg_grad_like(op, g, x, "x"))) return st;
    if (layer && !a->mean != !a->rstd)
        return jag__error(JAG_EINVAL, "%s: arguments 'mean' and 'rstd' must be given together (or both none)", op);
    if ((st = check_stat(op, "mean", x, a->nd, a->mean)) || (st = check_stat(op, "rstd", x, a->nd, a->rstd)) ||
        (st = check_affine(op, "weight", x, a->nd, a->w)))
        return st;
    return JAG_OK;
}

/* layer_norm_backward: (dx, dweight, dbias); rms_norm_backward: (dx,
 * dweight). dx has x's shape, the others x's trailing nd sizes. */
static jag_status meta_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs, bool layer) {
    norm_bwd a;
    jag_status st = parse_backward(op, args, nargs, layer, &a);
    if (st) return st;
    const jag_tensor *x = a.x;
    jag__spec_set(&outs[0], x->dtype, x->sizes, x->ndim);
    for (int k = 1; k <= (layer ? 2 : 1); k++) jag__spec_set(&outs[k], x->dtype, x->sizes + (x->ndim - a.nd), a.nd);
    return JAG_OK;
}

jag_status jag__meta_layer_norm_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    return meta_backward(op, args, nargs, outs, true);
}

jag_status jag__meta_rms_norm_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    return meta_backward(op, args, nargs, outs, false);
}

/* ---- boxed adapters ------------------------------------------------------ */

/* layer_norm / rms_norm and their native forms: outs[0] is y, then (layer)
 * mean and rstd or (rms) rstd when `stats`. */
static jag_status norm_cpu(const char *op, const jag_value *args, int nargs, jag_tensor **outs, bool layer, bool stats) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, layer, &x, &nd, &w, &b, &eps);
    if (st) return st;
    if (layer)
        return jag__layer_norm_kernel(op, x, nd, w, b, eps, outs[0], stats ? outs[1] : NULL, stats ? outs[2] : NULL);
    return jag__rms_norm_kernel(op, x, nd, w, eps, outs[0], stats ? outs[1] : NULL);
}

/* x is (N, D) over the trailing dims, weight and bias (D), out x's shape:
 * (x - mean) / sqrt(var + eps) * weight + bias, biased var */
jag_status jag__cpu_layer_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return norm_cpu(op, args, nargs, outs, true, false);
}

/* x is (N, D), weight (D), out x's shape: x / sqrt(mean(x^2) + eps) * weight */
jag_status jag__cpu_rms_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return norm_cpu(op, args, nargs, outs, false, false);
}

/* layer_norm, and each row's mean and 1 / sqrt(var + eps) */
jag_status jag__cpu_native_layer_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return norm_cpu(op, args, nargs, outs, true, true);
}

/* rms_norm, and each row's 1 / sqrt(mean(x^2) + eps) */
jag_status jag__cpu_native_rms_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return norm_cpu(op, args, nargs, outs, false, true);
}

static jag_status norm_backward_cpu(const char *op, const jag_value *args, int nargs, jag_tensor **outs, bool layer) {
    norm_bwd a;
    jag_status st = parse_backward(op, args, nargs, layer, &a);
    if (st) return st;
    if (layer)
        return jag__layer_norm_backward_kernel(op, a.g, a.x, a.mean, a.rstd, a.w, a.nd, a.eps, outs[0], outs[1],
                                               outs[2]);
    return jag__rms_norm_backward_kernel(op, a.g, a.x, a.rstd, a.w, a.nd, a.eps, outs[0], outs[1]);
}

/* g, x (N, D) over the trailing dims, the forward's mean and rstd (N) or
 * none, weight (D) or none -> dx (x's shape), dweight = sum_rows g xhat,
 * dbias = sum_rows g (D): layer_norm's gradients (torch's
 * native_layer_norm_backward) */
jag_status jag__cpu_layer_norm_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return norm_backward_cpu(op, args, nargs, outs, true);
}

/* g, x (N, D), the forward's rstd (N) or none, weight (D) or none -> dx,
 * dweight = sum_rows g x rstd: rms_norm's gradients */
jag_status jag__cpu_rms_norm_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return norm_backward_cpu(op, args, nargs, outs, false);
}

/* ---- the naive references, boxed as the ops ------------------------------ */

static jag_status ref_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs, bool layer) {
    const jag_tensor *x, *w, *b;
    int nd = 0;
    double eps = 0;
    jag_status st = parse(op, args, nargs, layer, &x, &nd, &w, &b, &eps);
    if (st) return st;
    if (layer) jag__layer_norm_reference(x, nd, w, b, eps, outs[0]);
    else jag__rms_norm_reference(x, nd, w, eps, outs[0]);
    return JAG_OK;
}

jag_status jag__ref_layer_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_layer_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_norm(op, args, nargs, outs, true);
}

jag_status jag__ref_rms_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_rms_norm(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_norm(op, args, nargs, outs, false);
}

static jag_status ref_norm_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs, bool layer) {
    norm_bwd a;
    jag_status st = parse_backward(op, args, nargs, layer, &a);
    if (st) return st;
    if (layer)
        return jag__layer_norm_backward_reference(op, a.g, a.x, a.mean, a.rstd, a.w, a.nd, a.eps, outs[0], outs[1],
                                                  outs[2]);
    return jag__rms_norm_backward_reference(op, a.g, a.x, a.rstd, a.w, a.nd, a.eps, outs[0], outs[1]);
}

jag_status jag__ref_layer_norm_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_layer_norm_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_norm_backward(op, args, nargs, outs, true);
}

jag_status jag__ref_rms_norm_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs);
jag_status jag__ref_rms_norm_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    return ref_norm_backward(op, args, nargs, outs, false);
}
