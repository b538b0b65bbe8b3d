/* shape.c — dims, shape checks, broadcasting and shape formatting. */
#include "internal.h"

#include <stdio.h>

const char *jag__shape_str(const int64_t *sizes, int ndim, char *buf, size_t cap) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %lld" : "%lld", (long long)sizes[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

jag_status jag__wrap_dim(const char *op, const char *arg, int64_t dim, int ndim, int *out) {
    int n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dim 0 and -1 */
    int64_t d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n)
        return jag__error(JAG_ERANGE, "%s: argument '%s' is %lld, expected a dim in [%d, %d] for a %d-d tensor",
                          op, arg, (long long)dim, -n, n - 1, ndim);
    *out = (int)d;
    return JAG_OK;
}

int64_t jag__numel(const int64_t *sizes, int ndim) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= sizes[d];
    return n;
}

void jag__contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        /* an empty tensor may have other sizes whose product overflows:
         * its strides are never used to reach an element, so saturate */
        if (__builtin_mul_overflow(s, sizes[d] > 1 ? sizes[d] : 1, &s)) s = INT64_MAX;
    }
}

jag_status jag__check_shape(const char *op, const int64_t *sizes, int ndim, jag_dtype dtype,
                            int64_t *numel_out) {
    if (!jag__dtype_valid(dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'dtype' is %d, expected one of float32, float64, int32, int64, bool",
                          op, (int)dtype);
    if (ndim < 0 || ndim > JAG_MAX_DIMS)
        return jag__error(JAG_EINVAL, "%s: argument 'ndim' is %d, expected 0..%d", op, ndim, JAG_MAX_DIMS);
    if (ndim > 0 && !sizes)
        return jag__error(JAG_EINVAL, "%s: argument 'sizes' is NULL, expected %d sizes", op, ndim);
    int64_t numel = 1, extent = 1;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0)
            return jag__error(JAG_EINVAL, "%s: argument 'sizes' has %lld at dim %d, expected a size >= 0",
                              op, (long long)sizes[d], d);
        /* the product of the non-zero sizes must fit too: strides and
         * offsets of an empty tensor are computed from them */
        if (!jag__mul_ok(numel, sizes[d], &numel) || !jag__mul_ok(extent, sizes[d] ? sizes[d] : 1, &extent))
            return jag__error(JAG_EOVERFLOW, "%s: argument 'sizes': the element count overflows int64", op);
    }
    int64_t bytes;
    if (!jag__mul_ok(numel, (int64_t)jag_dtype_size(dtype), &bytes) || (uint64_t)bytes > (uint64_t)PTRDIFF_MAX)
        return jag__error(JAG_EOVERFLOW, "%s: argument 'sizes': %lld elements of %s overflow the address space",
                          op, (long long)numel, jag_dtype_name(dtype));
    if (numel_out) *numel_out = numel;
    return JAG_OK;
}

jag_status jag__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b,
                                 int nb, int64_t *out, int *nout) {
    int n = na > nb ? na : nb;
    int64_t tmp[JAG_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char ba[JAG_SHAPE_BUF], bb[JAG_SHAPE_BUF];
            return jag__error(JAG_ESHAPE, "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", op,
                              jag__shape_str(a, na, ba, sizeof ba), jag__shape_str(b, nb, bb, sizeof bb),
                              i - n, (long long)sa, (long long)sb);
        }
        tmp[i] = sa == 1 ? sb : sa;
    }
    memcpy(out, tmp, (size_t)n * sizeof *out);
    *nout = n;
    return JAG_OK;
}
