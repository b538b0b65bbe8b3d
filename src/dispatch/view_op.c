/* view_op.c — the kernels of the view ops (view, transpose, permute,
 * narrow, select, unsqueeze, squeeze, expand): each unboxes its arguments,
 * checks them and makes a new header over the same storage
 * (jag__tensor_view), no copy. They run unchanged on meta tensors (storage
 * NULL). */
#include "dispatch.h"

/* Infer one -1 in `sizes` against numel; checks the count matches. */
static jag_status infer_sizes(const char *op, const jag_tensor *x, const int64_t *sizes, int ndim,
                              int64_t *out) {
    if (ndim < 0 || ndim > JAG_MAX_DIMS)
        return jag__error(JAG_EINVAL, "%s: argument 'sizes' has %d entries, expected 0..%d", op, ndim, JAG_MAX_DIMS);
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == -1) {
            if (infer >= 0) return jag__error(JAG_EINVAL, "%s: argument 'sizes' has more than one -1", op);
            infer = d;
        } else if (sizes[d] < 0) {
            return jag__error(JAG_EINVAL, "%s: argument 'sizes' has %lld at dim %d, expected a size >= 0 or -1",
                              op, (long long)sizes[d], d);
        } else if (!jag__mul_ok(known, sizes[d], &known)) {
            return jag__error(JAG_EOVERFLOW, "%s: argument 'sizes': the element count overflows int64", op);
        }
        out[d] = sizes[d];
    }
    int64_t numel = jag_numel(x);
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            char b[JAG_SHAPE_BUF];
            return jag__error(JAG_ESHAPE, "%s: cannot infer -1 in sizes %s for %lld elements", op,
                              jag__shape_str(sizes, ndim, b, sizeof b), (long long)numel);
        }
        out[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        char b[JAG_SHAPE_BUF], c[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument 'sizes' is %s (%lld elements), expected %lld elements as %s", op,
                          jag__shape_str(out, ndim, b, sizeof b), (long long)known, (long long)numel,
                          jag__shape_str(x->sizes, x->ndim, c, sizeof c));
    }
    return JAG_OK;
}

/* Strides for viewing x as `sizes` without a copy, or false when impossible
 * (torch's computeStride: merge x's dims into chunks that are contiguous
 * among themselves, and split each chunk into the new dims). */
static bool view_strides(const jag_tensor *x, const int64_t *sizes, int ndim, int64_t *strides) {
    if (jag_numel(x) == 0 || x->ndim == 0) { /* nothing to walk: any strides do */
        jag__contiguous_strides(sizes, ndim, strides);
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base_stride = x->ndim ? x->strides[x->ndim - 1] : 1;
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        tensor_numel *= x->sizes[d];
        if (d == 0 || (x->sizes[d - 1] != 1 && x->strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base_stride = x->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

jag_status jag__view_view(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    const int64_t *req;
    int n;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_ints(op, args, nargs, 1, "sizes", &req, &n)))
        return st;
    int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
    if ((st = infer_sizes(op, x, req, n, sizes))) return st;
    if (!view_strides(x, sizes, n, strides)) {
        char b[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument 'x' has strides that cannot be viewed as %s without a copy; use jag_reshape",
                          op, jag__shape_str(sizes, n, b, sizeof b));
    }
    outs[0] = jag__tensor_view(x, sizes, strides, n, x->offset);
    return outs[0] ? JAG_OK : jag_last_status();
}

jag_status jag__view_transpose(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    int64_t d0, d1;
    int a, b;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_int(op, args, nargs, 1, "dim0", &d0)) ||
        (st = jag__arg_int(op, args, nargs, 2, "dim1", &d1)) || (st = jag__wrap_dim(op, "dim0", d0, x->ndim, &a)) ||
        (st = jag__wrap_dim(op, "dim1", d1, x->ndim, &b)))
        return st;
    int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
    memcpy(sizes, x->sizes, sizeof sizes);
    memcpy(strides, x->strides, sizeof strides);
    if (x->ndim > 0) {
        sizes[a] = x->sizes[b], sizes[b] = x->sizes[a];
        strides[a] = x->strides[b], strides[b] = x->strides[a];
    }
    outs[0] = jag__tensor_view(x, sizes, strides, x->ndim, x->offset);
    return outs[0] ? JAG_OK : jag_last_status();
}

jag_status jag__view_permute(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    const int64_t *perm;
    int n;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_ints(op, args, nargs, 1, "perm", &perm, &n)))
        return st;
    if (n != x->ndim)
        return jag__error(JAG_EINVAL, "%s: argument 'perm' has %d entries, expected %d (the tensor's ndim)", op, n, x->ndim);
    int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
    bool seen[JAG_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int d;
        if ((st = jag__wrap_dim(op, "perm", perm[i], n, &d))) return st;
        if (seen[d]) return jag__error(JAG_EINVAL, "%s: argument 'perm' repeats dim %d", op, d);
        seen[d] = true;
        sizes[i] = x->sizes[d];
        strides[i] = x->strides[d];
    }
    outs[0] = jag__tensor_view(x, sizes, strides, n, x->offset);
    return outs[0] ? JAG_OK : jag_last_status();
}

jag_status jag__view_narrow(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    int64_t dim64, start, length;
    int d;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_int(op, args, nargs, 1, "dim", &dim64)) ||
        (st = jag__arg_int(op, args, nargs, 2, "start", &start)) || (st = jag__arg_int(op, args, nargs, 3, "length", &length)))
        return st;
    if (x->ndim == 0) return jag__error(JAG_ERANGE, "%s: argument 'x' is 0-d, expected at least 1 dim", op);
    if ((st = jag__wrap_dim(op, "dim", dim64, x->ndim, &d))) return st;
    int64_t size = x->sizes[d];
    if (start < 0) start += size;
    if (start < 0 || start > size || length < 0 || length > size - start)
        return jag__error(JAG_ERANGE, "%s: start %lld and length %lld are outside dim %d of size %lld", op,
                          (long long)start, (long long)length, d, (long long)size);
    int64_t sizes[JAG_MAX_DIMS];
    memcpy(sizes, x->sizes, sizeof sizes);
    sizes[d] = length;
    outs[0] = jag__tensor_view(x, sizes, x->strides, x->ndim, x->offset + (length ? start * x->strides[d] : 0));
    return outs[0] ? JAG_OK : jag_last_status();
}

jag_status jag__view_select(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    int64_t dim64, index;
    int d;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_int(op, args, nargs, 1, "dim", &dim64)) ||
        (st = jag__arg_int(op, args, nargs, 2, "index", &index)))
        return st;
    if (x->ndim == 0) return jag__error(JAG_ERANGE, "%s: argument 'x' is 0-d, expected at least 1 dim", op);
    if ((st = jag__wrap_dim(op, "dim", dim64, x->ndim, &d))) return st;
    int64_t size = x->sizes[d];
    if (index < -size || index >= size)
        return jag__error(JAG_ERANGE, "%s: argument 'index' is %lld, expected in [%lld, %lld) for dim %d", op,
                          (long long)index, (long long)-size, (long long)size, d);
    if (index < 0) index += size;
    int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != d) sizes[n] = x->sizes[i], strides[n++] = x->strides[i];
    outs[0] = jag__tensor_view(x, sizes, strides, n, x->offset + index * x->strides[d]);
    return outs[0] ? JAG_OK : jag_last_status();
}

jag_status jag__view_unsqueeze(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    int64_t dim64;
    int d;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_int(op, args, nargs, 1, "dim", &dim64)))
        return st;
    if (x->ndim == JAG_MAX_DIMS)
        return jag__error(JAG_EINVAL, "%s: argument 'x' already has %d dims, the most a tensor may have", op, JAG_MAX_DIMS);
    if ((st = jag__wrap_dim(op, "dim", dim64, x->ndim + 1, &d))) return st;
    int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
    for (int i = 0, j = 0; i <= x->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            strides[i] = d < x->ndim ? x->strides[d] * x->sizes[d] : 1;
        } else {
            sizes[i] = x->sizes[j], strides[i] = x->strides[j++];
        }
    }
    outs[0] = jag__tensor_view(x, sizes, strides, x->ndim + 1, x->offset);
    return outs[0] ? JAG_OK : jag_last_status();
}

jag_status jag__view_squeeze(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    int64_t dim64;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_int(op, args, nargs, 1, "dim", &dim64)))
        return st;
    int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
    int n = 0;
    if (dim64 == JAG_DIM_ALL) { /* every size-1 dim */
        for (int i = 0; i < x->ndim; i++)
            if (x->sizes[i] != 1) sizes[n] = x->sizes[i], strides[n++] = x->strides[i];
    } else {
        int d;
        if ((st = jag__wrap_dim(op, "dim", dim64, x->ndim, &d))) return st;
        for (int i = 0; i < x->ndim; i++)
            if (i != d || x->sizes[i] != 1) sizes[n] = x->sizes[i], strides[n++] = x->strides[i];
    }
    outs[0] = jag__tensor_view(x, sizes, strides, n, x->offset);
    return outs[0] ? JAG_OK : jag_last_status();
}

jag_status jag__view_expand(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *x;
    const int64_t *req;
    int n;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "x", &x)) || (st = jag__arg_ints(op, args, nargs, 1, "sizes", &req, &n)))
        return st;
    if (n < x->ndim || n > JAG_MAX_DIMS)
        return jag__error(JAG_EINVAL, "%s: argument 'sizes' has %d entries, expected %d..%d", op, n, x->ndim, JAG_MAX_DIMS);
    int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
    for (int i = n - 1; i >= 0; i--) {
        int xi = i - (n - x->ndim);
        int64_t want = req[i];
        if (xi < 0) {
            if (want < 0)
                return jag__error(JAG_EINVAL, "%s: argument 'sizes' has %lld at new leading dim %d, expected a size >= 0",
                                  op, (long long)want, i);
            sizes[i] = want, strides[i] = 0;
            continue;
        }
        int64_t have = x->sizes[xi];
        if (want == -1) want = have;
        if (want == have) {
            sizes[i] = have, strides[i] = x->strides[xi];
        } else if (have == 1 && want >= 0) {
            sizes[i] = want, strides[i] = 0;
        } else {
            char b[JAG_SHAPE_BUF], c[JAG_SHAPE_BUF];
            return jag__error(JAG_ESHAPE, "%s: cannot expand shape %s to %s (dim %d: %lld is not 1)", op,
                              jag__shape_str(x->sizes, x->ndim, b, sizeof b), jag__shape_str(req, n, c, sizeof c), i,
                              (long long)have);
        }
    }
    int64_t numel;
    if ((st = jag__check_shape(op, sizes, n, x->dtype, &numel))) return st;
    outs[0] = jag__tensor_view(x, sizes, strides, n, x->offset);
    return outs[0] ? JAG_OK : jag_last_status();
}
