/* index.c — indexing by index tensors: index_select, gather, embedding
 * and scatter_add (typed kernels and naive references; the ops' META
 * functions and boxed adapters are src/dispatch/index_op.c).
 *
 * Every kernel first reads its index tensor (int32 or int64, any strides)
 * into a row-major int64 buffer, checking each value against the size it
 * indexes: a value out of range is only knowable while reading, so the
 * kernel reports it (JAG_ERANGE, naming the position and the value) and the
 * dispatcher frees the output. Negative indices are rejected, as torch's
 * index_select, gather and embedding do. */
#include "kernels.h"

#include <stdio.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- shared helpers ----------------------------------------------------- */

/* Copy one element of `es` bytes (constant sizes let the compiler inline). */
static inline void copy_elem(char *dst, const char *src, size_t es) {
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
    }
}

/* Read index values [b, e) (row-major positions) of `ix` into buf[b..e),
 * noting in *first_bad the first position whose value is outside
 * [0, limit). */
static void read_index_range(const jag_tensor *ix, int64_t b, int64_t e, int64_t limit, int64_t *buf,
                             int64_t *first_bad) {
    const char *base = jag__ptr(ix);
    bool i64 = ix->dtype == JAG_INT64;
    int nd = ix->ndim;
    int64_t idx[JAG_MAX_DIMS], off = 0, r = b;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = r % ix->sizes[d];
        r /= ix->sizes[d];
        off += idx[d] * ix->strides[d];
    }
    for (int64_t f = b; f < e; f++) {
        int64_t v = i64 ? ((const int64_t *)base)[off] : ((const int32_t *)base)[off];
        buf[f] = v;
        if ((v < 0 || v >= limit) && f < *first_bad) *first_bad = f;
        for (int d = nd - 1; d >= 0; d--) { /* odometer */
            if (++idx[d] < ix->sizes[d]) {
                off += ix->strides[d];
                break;
            }
            off -= (ix->sizes[d] - 1) * ix->strides[d];
            idx[d] = 0;
        }
    }
}

/* The values of the int32/int64 tensor `ix` in row-major order as a new
 * int64 array (free() it), each checked to lie in [0, limit). `what` says
 * what `limit` is, for the message. */
static jag_status read_indices(const char *op, const char *name, const jag_tensor *ix, int64_t limit, const char *what,
                               int64_t **out) {
    int64_t n = jag_numel(ix);
    int64_t *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
    if (!buf) return jag__error(JAG_ENOMEM, "%s: out of memory reading argument '%s'", op, name);
    int64_t first_bad = INT64_MAX;
    if (n > 0) {
        JAG_PARALLEL_IF(n >= JAG_GRAIN_MEMORY, "omp parallel",
            {
                int64_t t = jag__thread_index(), nt = jag__thread_count();
                int64_t b = n * t / nt, e = n * (t + 1) / nt, bad = INT64_MAX;
                if (b < e) read_index_range(ix, b, e, limit, buf, &bad);
                _Pragma("omp critical(jag_index_first_bad)")
                if (bad < first_bad) first_bad = bad;
            });
    }
    if (first_bad != INT64_MAX) {
        int64_t pos[JAG_MAX_DIMS], r = first_bad, v = buf[first_bad];
        for (int d = ix->ndim - 1; d >= 0; d--) pos[d] = r % ix->sizes[d], r /= ix->sizes[d];
        char p[JAG_SHAPE_BUF];
        free(buf);
        return jag__error(JAG_ERANGE, "%s: argument '%s' has value %lld at position %s, expected 0 <= value < %lld (%s)%s",
                          op, name, (long long)v, jag__shape_str(pos, ix->ndim, p, sizeof p), (long long)limit, what,
                          v < 0 ? "; negative indices are not supported" : "");
    }
    *out = buf;
    return JAG_OK;
}

/* Whether dims [from, ndim) of t are laid out row-major with no gaps (size-1
 * dims' strides do not matter). */
static bool trailing_contiguous(const jag_tensor *t, int from) {
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= from; d--) {
        if (t->sizes[d] == 1) continue;
        if (t->strides[d] != expected) return false;
        expected *= t->sizes[d];
    }
    return true;
}

/* Element offset in t of the leading coordinates of row r, for a row-major
 * walk over `sizes` (ndim dims, the last one excluded from the row index),
 * with dim `skip` left out (its coordinate is written to *skip_coord). */
static int64_t row_base(const jag_tensor *t, const int64_t *sizes, int ndim, int64_t r, int skip, int64_t *skip_coord) {
    int64_t off = 0;
    for (int d = ndim - 2; d >= 0; d--) {
        int64_t c = r % sizes[d];
        r /= sizes[d];
        if (d == skip) *skip_coord = c;
        else off += c * t->strides[d];
    }
    return off;
}

/* ---- index_select ------------------------------------------------------- */

// x is (outer..., S, inner...), idx (L) in [0, S), out is (outer..., L, inner...) contiguous
jag_status jag__index_select_kernel(const char *op, const jag_tensor *x, int d, const jag_tensor *index,
                                    jag_tensor *out) {
    jag_status st;
    int64_t *idx = NULL;
    int64_t S = x->ndim ? x->sizes[d] : 1;
    char what[64];
    snprintf(what, sizeof what, "the size of dim %d of 'x'", d);
    if ((st = read_indices(op, "index", index, S, what, &idx))) return st;
    size_t es = jag_dtype_size(x->dtype);
    const char *xb = jag__ptr(x);
    char *ob = jag__ptr(out);
    int64_t total = jag_numel(out);
    if (x->ndim == 0 || total == 0) {
        if (total) copy_elem(ob, xb, es);
        free(idx);
        return JAG_OK;
    }
    int64_t L = out->sizes[d], outer = jag__numel(x->sizes, d), inner = jag__numel(x->sizes + d + 1, x->ndim - d - 1);
    int64_t sd = x->strides[d] * (int64_t)es;
    if (trailing_contiguous(x, d + 1) && inner > 1) {
        /* Fast path: each (outer, j) pair copies one contiguous block of
         * `inner` elements. */
        size_t bytes = (size_t)inner * es;
        int64_t rows = outer * L;
        JAG_PARALLEL_IF(total >= JAG_GRAIN_MEMORY, "omp parallel",
            {
                int64_t t = jag__thread_index(), nt = jag__thread_count();
                int64_t b = rows * t / nt, e = rows * (t + 1) / nt, last_o = -1, obase = 0, unused;
                for (int64_t r = b; r < e; r++) {
                    int64_t o = r / L, j = r % L;
                    if (o != last_o) { /* offset of the outer coordinates o */
                        obase = row_base(x, x->sizes, d + 1, o, -1, &unused) * (int64_t)es;
                        last_o = o;
                    }
                    memcpy(ob + r * (int64_t)bytes, xb + obase + idx[j] * sd, bytes);
                }
            });
    } else {
        /* General path: out as (rows, C) over its last dim; each element's
         * source offset comes from its coordinates, dim d mapped via idx. */
        int nd = out->ndim, last = nd - 1;
        int64_t C = out->sizes[last], rows = total / C, sl = x->strides[last] * (int64_t)es;
        JAG_PARALLEL_IF(total >= JAG_GRAIN_MEMORY, "omp parallel for schedule(static)",
            for (int64_t r = 0; r < rows; r++) {
                int64_t cd = 0;
                int64_t base = row_base(x, out->sizes, nd, r, d, &cd) * (int64_t)es;
                char *o = ob + r * C * (int64_t)es;
                if (d == last) {
                    for (int64_t c = 0; c < C; c++) copy_elem(o + c * (int64_t)es, xb + base + idx[c] * sd, es);
                } else {
                    const char *s = xb + base + idx[cd] * sd;
                    for (int64_t c = 0; c < C; c++) copy_elem(o + c * (int64_t)es, s + c * sl, es);
                }
            });
    }
    free(idx);
    return JAG_OK;
}

/* ---- gather ------------------------------------------------------------- */

// x is (s...), index and out are (i...) with out[c] = x[c with c[dim] = index[c]]
jag_status jag__gather_kernel(const char *op, const jag_tensor *x, int d, const jag_tensor *index, jag_tensor *out) {
    jag_status st;
    int64_t *idx = NULL;
    char what[64];
    snprintf(what, sizeof what, "the size of dim %d of 'x'", d);
    if ((st = read_indices(op, "index", index, x->ndim ? x->sizes[d] : 1, what, &idx))) return st;
    size_t es = jag_dtype_size(x->dtype);
    const char *xb = jag__ptr(x);
    char *ob = jag__ptr(out);
    int64_t total = jag_numel(out);
    if (x->ndim == 0 || total == 0) {
        if (total) copy_elem(ob, xb, es);
        free(idx);
        return JAG_OK;
    }
    int nd = out->ndim, last = nd - 1;
    int64_t C = out->sizes[last], rows = total / C;
    int64_t sd = x->strides[d] * (int64_t)es, sl = x->strides[last] * (int64_t)es;
    JAG_PARALLEL_IF(total >= JAG_GRAIN_MEMORY, "omp parallel for schedule(static)",
        for (int64_t r = 0; r < rows; r++) {
            int64_t unused;
            int64_t base = row_base(x, out->sizes, nd, r, d, &unused) * (int64_t)es;
            const int64_t *ir = idx + r * C;
            char *o = ob + r * C * (int64_t)es;
            if (d == last) {
                for (int64_t c = 0; c < C; c++) copy_elem(o + c * (int64_t)es, xb + base + ir[c] * sd, es);
            } else {
                for (int64_t c = 0; c < C; c++) copy_elem(o + c * (int64_t)es, xb + base + c * sl + ir[c] * sd, es);
            }
        });
    free(idx);
    return JAG_OK;
}

/* ---- embedding ---------------------------------------------------------- */

// weight is (V, D), indices flattened to (N) in [0, V), out is (N, D) contiguous
jag_status jag__embedding_kernel(const char *op, const jag_tensor *w, const jag_tensor *ix, jag_tensor *out) {
    int64_t V = w->sizes[0], D = w->sizes[1], N = jag_numel(ix);
    int64_t *idx = NULL;
    jag_status st = read_indices(op, "indices", ix, V, "the number of rows of 'weight'", &idx);
    if (st) return st;
    if (N == 0 || D == 0) {
        free(idx);
        return JAG_OK;
    }
    size_t es = jag_dtype_size(w->dtype);
    const char *wb = jag__ptr(w);
    char *ob = jag__ptr(out);
    int64_t s0 = w->strides[0] * (int64_t)es, s1 = w->strides[1] * (int64_t)es;
    size_t row_bytes = (size_t)D * es;
    if (D == 1 || s1 == (int64_t)es) { /* rows of the table are contiguous */
        JAG_PARALLEL_IF(N * D >= JAG_GRAIN_MEMORY, "omp parallel for schedule(static)",
            for (int64_t i = 0; i < N; i++) memcpy(ob + i * (int64_t)row_bytes, wb + idx[i] * s0, row_bytes););
    } else {
        JAG_PARALLEL_IF(N * D >= JAG_GRAIN_MEMORY, "omp parallel for schedule(static)",
            for (int64_t i = 0; i < N; i++) {
                const char *src = wb + idx[i] * s0;
                char *dst = ob + i * (int64_t)row_bytes;
                for (int64_t j = 0; j < D; j++) copy_elem(dst + j * (int64_t)es, src + j * s1, es);
            });
    }
    free(idx);
    return JAG_OK;
}

/* ---- naive references: one element at a time, any strides -------------- */

/* The coordinates of row-major position f over `sizes`. */
static void unravel(int64_t f, const int64_t *sizes, int ndim, int64_t *coord) {
    for (int d = ndim - 1; d >= 0; d--) coord[d] = f % sizes[d], f /= sizes[d];
}

static int64_t offset_of(const jag_tensor *t, const int64_t *coord) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += coord[d] * t->strides[d];
    return off;
}

static int64_t index_at(const jag_tensor *ix, const int64_t *coord) {
    const char *p = jag__ptr(ix) + offset_of(ix, coord) * (int64_t)jag_dtype_size(ix->dtype);
    return ix->dtype == JAG_INT64 ? *(const int64_t *)p : *(const int32_t *)p;
}

static void copy_at(jag_tensor *out, const int64_t *oc, const jag_tensor *x, const int64_t *xc) {
    size_t es = jag_dtype_size(x->dtype);
    memcpy(jag__ptr(out) + offset_of(out, oc) * (int64_t)es, jag__ptr(x) + offset_of(x, xc) * (int64_t)es, es);
}

static jag_status ref_range(const char *op, int64_t v, int64_t limit) {
    if (v < 0 || v >= limit)
        return jag__error(JAG_ERANGE, "%s: index %lld is outside [0, %lld)", op, (long long)v, (long long)limit);
    return JAG_OK;
}

// x is (..., S, ...), index (L) or 0-d, out (..., L, ...) any strides
jag_status jag__ref_index_select(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor *out) {
    int64_t n = jag_numel(out), oc[JAG_MAX_DIMS], xc[JAG_MAX_DIMS], zero[JAG_MAX_DIMS] = {0};
    for (int64_t f = 0; f < n; f++) {
        unravel(f, out->sizes, out->ndim, oc);
        memcpy(xc, oc, sizeof oc);
        int64_t ic[1] = {out->ndim ? oc[dim] : 0};
        int64_t v = index_at(index, index->ndim ? ic : zero);
        jag_status st = ref_range("jag__ref_index_select", v, x->ndim ? x->sizes[dim] : 1);
        if (st) return st;
        if (x->ndim) xc[dim] = v;
        copy_at(out, oc, x, xc);
    }
    return JAG_OK;
}

// x is (s...), index and out are (i...)
jag_status jag__ref_gather(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor *out) {
    int64_t n = jag_numel(out), c[JAG_MAX_DIMS], xc[JAG_MAX_DIMS];
    for (int64_t f = 0; f < n; f++) {
        unravel(f, out->sizes, out->ndim, c);
        memcpy(xc, c, sizeof c);
        int64_t v = index_at(index, c);
        jag_status st = ref_range("jag__ref_gather", v, x->ndim ? x->sizes[dim] : 1);
        if (st) return st;
        if (x->ndim) xc[dim] = v;
        copy_at(out, c, x, xc);
    }
    return JAG_OK;
}

// weight is (V, D), indices (i...), out (i..., D)
jag_status jag__ref_embedding(const jag_tensor *weight, const jag_tensor *indices, jag_tensor *out) {
    int64_t n = jag_numel(out), oc[JAG_MAX_DIMS], wc[2];
    for (int64_t f = 0; f < n; f++) {
        unravel(f, out->sizes, out->ndim, oc);
        int64_t v = index_at(indices, oc); /* the first indices->ndim coordinates */
        jag_status st = ref_range("jag__ref_embedding", v, weight->sizes[0]);
        if (st) return st;
        wc[0] = v, wc[1] = oc[out->ndim - 1];
        copy_at(out, oc, weight, wc);
    }
    return JAG_OK;
}

/* ---- scatter_add: gather's adjoint ------------------------------------------
 * (x (s...), dim, index (i...), src (i...)) -> out (s...): a copy of x with
 * out[c with c[dim] = index[c]] += src[c] for every position c of src. The
 * backward of index_select, gather, embedding and max_dim. One loop over
 * src (the accumulation order is src's order, so results are exactly
 * reproducible); it is its own reference. */

/* Whether scatter_add moves whole rows: index constant along every dim but
 * d (stride 0 there, as the backward of embedding and index_select builds
 * it), src and out of one shape but for dim d, src contiguous. Then slab j
 * of src (along d) goes to slab index[j] of out, a vectorised add of
 * `inner` elements per outer position. */
static bool scatter_rows(const jag_tensor *index, const jag_tensor *src, const jag_tensor *out, int d) {
    if (src->ndim == 0 || index->ndim != src->ndim || out->ndim != src->ndim || !jag_is_contiguous(src)) return false;
    for (int k = 0; k < src->ndim; k++)
        if (k != d && (index->strides[k] != 0 || src->sizes[k] != out->sizes[k])) return false;
    return true;
}

static int64_t index_along(const jag_tensor *ix, int d, int64_t j) {
    const char *p = jag__ptr(ix) + j * ix->strides[d] * (int64_t)jag_dtype_size(ix->dtype);
    return ix->dtype == JAG_INT64 ? *(const int64_t *)p : *(const int32_t *)p;
}

// out (A, No, I) contiguous += src (A, Ns, I) contiguous at rows index[j] along the middle dim; the
// same order of additions as the element loop (j, then the row's elements, per a)
#define SCATTER_ROWS(SFX, T)                                                   \
    static void scatter_rows_##SFX(T *out, const T *src, const jag_tensor *ix, int d, int64_t A, int64_t no, \
                                   int64_t ns, int64_t inner) {                \
        for (int64_t a = 0; a < A; a++)                                        \
            for (int64_t j = 0; j < ns; j++) {                                 \
                T *restrict o = out + (a * no + index_along(ix, d, j)) * inner; \
                const T *restrict s = src + (a * ns + j) * inner;              \
                for (int64_t k = 0; k < inner; k++) o[k] += s[k];              \
            }                                                                  \
    }
SCATTER_ROWS(f32, float)
SCATTER_ROWS(f64, double)
#undef SCATTER_ROWS

// x (s...), index and src (i...) -> out (s...) = x + src scattered at index along dim
jag_status jag__scatter_add_kernel(const char *op, const jag_tensor *x, int d, const jag_tensor *index,
                                   const jag_tensor *src, jag_tensor *out) {
    jag_tensor *conv = NULL;
    jag_status st;
    int64_t n = jag_numel(src), limit = x->ndim ? x->sizes[d] : 1, coord[JAG_MAX_DIMS];
    bool rows = scatter_rows(index, src, out, d);
    if (rows) { /* every index first: a failure writes nothing */
        for (int64_t j = 0; n && j < src->sizes[d]; j++)
            if ((st = ref_range(op, index_along(index, d, j), limit))) return st;
    } else {
        for (int64_t f = 0; f < n; f++) {
            unravel(f, src->sizes, src->ndim, coord);
            if ((st = ref_range(op, index_at(index, coord), limit))) return st;
        }
    }
    jag__copy_into(out, x);
    if (src->dtype != out->dtype) { /* src converted to out's dtype, as to_dtype would */
        if (!(conv = jag__tensor_new(op, src->sizes, src->ndim, out->dtype, false, false))) return jag_last_status();
        jag__copy_into(conv, src);
        src = conv;
    }
    bool f64 = out->dtype == JAG_FLOAT64;
    if (rows && n && jag_is_contiguous(src) && jag_is_contiguous(out)) {
        int64_t A = jag__numel(out->sizes, d), inner = jag__numel(out->sizes + d + 1, out->ndim - d - 1);
        if (f64)
            scatter_rows_f64((double *)jag__ptr(out), (const double *)jag__ptr(src), index, d, A, out->sizes[d],
                             src->sizes[d], inner);
        else
            scatter_rows_f32((float *)jag__ptr(out), (const float *)jag__ptr(src), index, d, A, out->sizes[d],
                             src->sizes[d], inner);
        jag_release(conv);
        return JAG_OK;
    }
    for (int64_t f = 0; f < n; f++) {
        unravel(f, src->sizes, src->ndim, coord);
        int64_t so = offset_of(src, coord);
        if (src->ndim) coord[d] = index_at(index, coord);
        int64_t oo = offset_of(out, coord);
        if (f64) ((double *)jag__ptr(out))[oo] += ((const double *)jag__ptr(src))[so];
        else ((float *)jag__ptr(out))[oo] += ((const float *)jag__ptr(src))[so];
    }
    jag_release(conv);
    return JAG_OK;
}
