/* api.c — the public entry points of dispatched ops: box the arguments, call
 * the dispatcher, record the outputs in the open scope. Ops built from other
 * ops (reshape, matmul, stack, split, ...) live in composite.c. */
#include "dispatch.h"

#define CALL(op, ...)                                                          \
    do {                                                                       \
        const jag_value args_[] = {__VA_ARGS__};                               \
        return jag__call(JAG_OP_##op, args_, (int)(sizeof args_ / sizeof args_[0]), out); \
    } while (0)

static jag_status null_out(const char *op) {
    return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL, expected a place for the result", op);
}
#define CHECK_OUT(name)                                                        \
    if (!out) return null_out("jag_" #name)

/* ---- pointwise ---------------------------------------------------------- */

#define JAG_X_UNARY(name)                                                      \
    jag_status jag_##name(const jag_tensor *x, jag_tensor **out) {              \
        CHECK_OUT(name);                                                       \
        CALL(name, jag__v_tensor(x));                                          \
    }
JAG_UNARY_OP_LIST(JAG_X_UNARY)
#undef JAG_X_UNARY

#define JAG_X_BINARY(name)                                                     \
    jag_status jag_##name(const jag_tensor *a, const jag_tensor *b, jag_tensor **out) { \
        CHECK_OUT(name);                                                       \
        CALL(name, jag__v_tensor(a), jag__v_tensor(b));                        \
    }                                                                          \
    jag_status jag_##name##_scalar(const jag_tensor *a, double b, jag_tensor **out) { \
        CHECK_OUT(name##_scalar);                                              \
        CALL(name, jag__v_tensor(a), jag__v_double(b));                        \
    }
JAG_BINARY_OP_LIST(JAG_X_BINARY)
#undef JAG_X_BINARY

jag_status jag_add(const jag_tensor *a, const jag_tensor *b, double alpha, jag_tensor **out) {
    CHECK_OUT(add);
    CALL(add, jag__v_tensor(a), jag__v_tensor(b), jag__v_double(alpha));
}

jag_status jag_add_scalar(const jag_tensor *a, double b, jag_tensor **out) {
    CHECK_OUT(add_scalar);
    CALL(add, jag__v_tensor(a), jag__v_double(b), jag__v_double(1.0));
}

jag_status jag_where(const jag_tensor *cond, const jag_tensor *a, const jag_tensor *b, jag_tensor **out) {
    CHECK_OUT(where);
    CALL(where, jag__v_tensor(cond), jag__v_tensor(a), jag__v_tensor(b));
}

jag_status jag_clamp(const jag_tensor *x, double lo, double hi, jag_tensor **out) {
    CHECK_OUT(clamp);
    CALL(clamp, jag__v_tensor(x), jag__v_double(lo), jag__v_double(hi));
}

jag_status jag_leaky_relu(const jag_tensor *x, double negative_slope, jag_tensor **out) {
    CHECK_OUT(leaky_relu);
    CALL(leaky_relu, jag__v_tensor(x), jag__v_double(negative_slope));
}

jag_status jag_elu(const jag_tensor *x, double alpha, jag_tensor **out) {
    CHECK_OUT(elu);
    CALL(elu, jag__v_tensor(x), jag__v_double(alpha));
}

jag_status jag_softplus(const jag_tensor *x, double beta, double threshold, jag_tensor **out) {
    CHECK_OUT(softplus);
    CALL(softplus, jag__v_tensor(x), jag__v_double(beta), jag__v_double(threshold));
}

jag_status jag_hardtanh(const jag_tensor *x, double min_val, double max_val, jag_tensor **out) {
    CHECK_OUT(hardtanh);
    CALL(hardtanh, jag__v_tensor(x), jag__v_double(min_val), jag__v_double(max_val));
}

jag_status jag_clone(const jag_tensor *x, jag_tensor **out) {
    CHECK_OUT(clone);
    CALL(clone, jag__v_tensor(x));
}

/* ---- views -------------------------------------------------------------- */

jag_status jag_view(const jag_tensor *x, const int64_t *sizes, int ndim, jag_tensor **out) {
    CHECK_OUT(view);
    if (ndim > 0 && !sizes) return jag__error(JAG_EINVAL, "jag_view: argument 'sizes' is NULL");
    CALL(view, jag__v_tensor(x), jag__v_ints(sizes, ndim));
}

jag_status jag_transpose(const jag_tensor *x, int dim0, int dim1, jag_tensor **out) {
    CHECK_OUT(transpose);
    CALL(transpose, jag__v_tensor(x), jag__v_int(dim0), jag__v_int(dim1));
}

jag_status jag_permute(const jag_tensor *x, const int *perm, int ndim, jag_tensor **out) {
    CHECK_OUT(permute);
    if (ndim < 0 || ndim > JAG_MAX_DIMS || (ndim > 0 && !perm))
        return jag__error(JAG_EINVAL, "jag_permute: argument 'perm' is NULL or has %d entries, expected 0..%d", ndim,
                          JAG_MAX_DIMS);
    int64_t p[JAG_MAX_DIMS];
    for (int i = 0; i < ndim; i++) p[i] = perm[i];
    CALL(permute, jag__v_tensor(x), jag__v_ints(p, ndim));
}

jag_status jag_narrow(const jag_tensor *x, int dim, int64_t start, int64_t length, jag_tensor **out) {
    CHECK_OUT(narrow);
    CALL(narrow, jag__v_tensor(x), jag__v_int(dim), jag__v_int(start), jag__v_int(length));
}

jag_status jag_select(const jag_tensor *x, int dim, int64_t index, jag_tensor **out) {
    CHECK_OUT(select);
    CALL(select, jag__v_tensor(x), jag__v_int(dim), jag__v_int(index));
}

jag_status jag_unsqueeze(const jag_tensor *x, int dim, jag_tensor **out) {
    CHECK_OUT(unsqueeze);
    CALL(unsqueeze, jag__v_tensor(x), jag__v_int(dim));
}

jag_status jag_squeeze(const jag_tensor *x, int dim, jag_tensor **out) {
    CHECK_OUT(squeeze);
    if (dim == JAG_DIM_ALL) return jag__error(JAG_ERANGE, "jag_squeeze: argument 'dim' is JAG_DIM_ALL; use jag_squeeze_all");
    CALL(squeeze, jag__v_tensor(x), jag__v_int(dim));
}

jag_status jag_squeeze_all(const jag_tensor *x, jag_tensor **out) {
    CHECK_OUT(squeeze_all);
    CALL(squeeze, jag__v_tensor(x), jag__v_int(JAG_DIM_ALL));
}

jag_status jag_expand(const jag_tensor *x, const int64_t *sizes, int ndim, jag_tensor **out) {
    CHECK_OUT(expand);
    if (ndim > 0 && !sizes) return jag__error(JAG_EINVAL, "jag_expand: argument 'sizes' is NULL");
    CALL(expand, jag__v_tensor(x), jag__v_ints(sizes, ndim));
}

/* ---- reductions --------------------------------------------------------- */

/* Box an int dim list; NULL/0 means every dim (an empty list). */
static jag_status box_dims(const char *op, const int *dims, int ndims, int64_t *buf) {
    if (ndims < 0 || ndims > JAG_MAX_DIMS || (ndims > 0 && !dims))
        return jag__error(JAG_EINVAL, "%s: argument 'dims' is NULL or has %d entries, expected 0..%d", op, ndims,
                          JAG_MAX_DIMS);
    for (int i = 0; i < ndims; i++) buf[i] = dims[i];
    return JAG_OK;
}

#define JAG_X_REDUCE(name)                                                     \
    jag_status jag_##name(const jag_tensor *x, const int *dims, int ndims, bool keepdim, jag_tensor **out) { \
        CHECK_OUT(name);                                                       \
        int64_t d[JAG_MAX_DIMS];                                               \
        jag_status st = box_dims("jag_" #name, dims, ndims, d);                \
        if (st) return st;                                                     \
        CALL(name, jag__v_tensor(x), jag__v_ints(d, ndims), jag__v_bool(keepdim)); \
    }
JAG_X_REDUCE(sum)
JAG_X_REDUCE(mean)
JAG_X_REDUCE(prod)
JAG_X_REDUCE(amax)
JAG_X_REDUCE(amin)
JAG_X_REDUCE(logsumexp)
#undef JAG_X_REDUCE

jag_status jag_var(const jag_tensor *x, const int *dims, int ndims, int64_t correction, bool keepdim,
                   jag_tensor **out) {
    CHECK_OUT(var);
    int64_t d[JAG_MAX_DIMS];
    jag_status st = box_dims("jag_var", dims, ndims, d);
    if (st) return st;
    CALL(var, jag__v_tensor(x), jag__v_ints(d, ndims), jag__v_int(correction), jag__v_bool(keepdim));
}

jag_status jag_std(const jag_tensor *x, const int *dims, int ndims, int64_t correction, bool keepdim,
                   jag_tensor **out) {
    CHECK_OUT(std);
    int64_t d[JAG_MAX_DIMS];
    jag_status st = box_dims("jag_std", dims, ndims, d);
    if (st) return st;
    CALL(std, jag__v_tensor(x), jag__v_ints(d, ndims), jag__v_int(correction), jag__v_bool(keepdim));
}

static jag_status reduce_index2(jag_op_id op, const jag_tensor *x, int dim, bool keepdim, jag_tensor **values,
                                jag_tensor **indices) {
    if (!values || !indices)
        return jag__error(JAG_EINVAL, "%s: arguments 'values' and 'indices' must not be NULL", jag__ops[op].api_name);
    const jag_value args[] = {jag__v_tensor(x), jag__v_int(dim), jag__v_bool(keepdim)};
    jag_tensor *outs[2];
    jag_status st = jag__call(op, args, 3, outs);
    if (st == JAG_OK) *values = outs[0], *indices = outs[1];
    return st;
}

jag_status jag_max_dim(const jag_tensor *x, int dim, bool keepdim, jag_tensor **values, jag_tensor **indices) {
    return reduce_index2(JAG_OP_max_dim, x, dim, keepdim, values, indices);
}

jag_status jag_min_dim(const jag_tensor *x, int dim, bool keepdim, jag_tensor **values, jag_tensor **indices) {
    return reduce_index2(JAG_OP_min_dim, x, dim, keepdim, values, indices);
}

jag_status jag_argmax(const jag_tensor *x, int dim, bool keepdim, jag_tensor **out) {
    CHECK_OUT(argmax);
    CALL(argmax, jag__v_tensor(x), jag__v_int(dim), jag__v_bool(keepdim));
}

jag_status jag_argmin(const jag_tensor *x, int dim, bool keepdim, jag_tensor **out) {
    CHECK_OUT(argmin);
    CALL(argmin, jag__v_tensor(x), jag__v_int(dim), jag__v_bool(keepdim));
}

jag_status jag_embedding_bag(const jag_tensor *weight, const jag_tensor *indices, const jag_tensor *offsets, int mode,
                             const jag_tensor *per_sample_weights, jag_tensor **out) {
    CHECK_OUT(embedding_bag);
    CALL(embedding_bag, jag__v_tensor(weight), jag__v_tensor(indices), jag__v_tensor(offsets),
         jag__v_int(mode), jag__v_tensor(per_sample_weights));
}

jag_status jag_max(const jag_tensor *x, jag_tensor **out) {
    CHECK_OUT(max);
    CALL(max, jag__v_tensor(x), jag__v_ints(NULL, 0), jag__v_bool(false));
}

jag_status jag_min(const jag_tensor *x, jag_tensor **out) {
    CHECK_OUT(min);
    CALL(min, jag__v_tensor(x), jag__v_ints(NULL, 0), jag__v_bool(false));
}

/* ---- linear algebra, normalisation, indexing ---------------------------- */

jag_status jag_mm(const jag_tensor *a, const jag_tensor *b, jag_tensor **out) {
    CHECK_OUT(mm);
    CALL(mm, jag__v_tensor(a), jag__v_tensor(b));
}

jag_status jag_bmm(const jag_tensor *a, const jag_tensor *b, jag_tensor **out) {
    CHECK_OUT(bmm);
    CALL(bmm, jag__v_tensor(a), jag__v_tensor(b));
}

jag_status jag_matmul(const jag_tensor *a, const jag_tensor *b, jag_tensor **out) {
    CHECK_OUT(matmul);
    CALL(matmul, jag__v_tensor(a), jag__v_tensor(b));
}

jag_status jag_linear(const jag_tensor *x, const jag_tensor *w, const jag_tensor *bias, jag_tensor **out) {
    CHECK_OUT(linear);
    CALL(linear, jag__v_tensor(x), jag__v_tensor(w), jag__v_tensor(bias));
}

jag_status jag_softmax(const jag_tensor *x, int dim, jag_tensor **out) {
    CHECK_OUT(softmax);
    CALL(softmax, jag__v_tensor(x), jag__v_int(dim));
}

jag_status jag_log_softmax(const jag_tensor *x, int dim, jag_tensor **out) {
    CHECK_OUT(log_softmax);
    CALL(log_softmax, jag__v_tensor(x), jag__v_int(dim));
}

jag_status jag_layer_norm(const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                          const jag_tensor *bias, double eps, jag_tensor **out) {
    CHECK_OUT(layer_norm);
    CALL(layer_norm, jag__v_tensor(x), jag__v_int(normalized_ndim), jag__v_tensor(weight), jag__v_tensor(bias),
         jag__v_double(eps));
}

jag_status jag_rms_norm(const jag_tensor *x, int normalized_ndim, const jag_tensor *weight, double eps,
                        jag_tensor **out) {
    CHECK_OUT(rms_norm);
    CALL(rms_norm, jag__v_tensor(x), jag__v_int(normalized_ndim), jag__v_tensor(weight), jag__v_double(eps));
}

jag_status jag_index_select(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor **out) {
    CHECK_OUT(index_select);
    CALL(index_select, jag__v_tensor(x), jag__v_int(dim), jag__v_tensor(index));
}

jag_status jag_gather(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor **out) {
    CHECK_OUT(gather);
    CALL(gather, jag__v_tensor(x), jag__v_int(dim), jag__v_tensor(index));
}

jag_status jag_embedding(const jag_tensor *weight, const jag_tensor *indices, jag_tensor **out) {
    CHECK_OUT(embedding);
    CALL(embedding, jag__v_tensor(weight), jag__v_tensor(indices));
}

jag_status jag_cat(jag_tensor *const *xs, int n, int dim, jag_tensor **out) {
    CHECK_OUT(cat);
    if (n <= 0 || !xs) return jag__error(JAG_EINVAL, "jag_cat: argument 'xs' is empty, expected at least one tensor");
    CALL(cat, jag__v_tensors(xs, n), jag__v_int(dim));
}
