/* nested_join.c — joining and picking components of jagged nested tensors:
 * cat along the batch dim (offsets concatenated) or along a dense dim (same
 * raggedness, values joined), index_select along the batch dim (new
 * offsets), unsqueeze of a dense dim. The handler (nested_ops.c) routes
 * these ops here; their gradients are in derivatives_nested.c.
 *
 * Shapes: a jagged x is (B, j, D...) stored as values (rows, D...) with
 * component b at rows [offsets[b], offsets[b] + len_b). */
#include "nested.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static const int64_t *i64c(const jag_tensor *t) { return (const int64_t *)jag__ptr(t); }

static int64_t comp_len(const nested_state *s, int64_t b) {
    const int64_t *o = i64c(s->offsets);
    return s->lengths ? i64c(s->lengths)[b] : o[b + 1] - o[b];
}

/* Bytes [b0, b1) of a gather's output: component k of the output starts at
 * byte at[k] * row (ascending) and is lens[k] rows copied from row from[k]
 * of src. */
static void copy_byte_range(char *dst, const char *src, const int64_t *at, const int64_t *lens, const int64_t *from,
                            int64_t n, size_t row, size_t b0, size_t b1) {
    int64_t lo = 0, hi = n - 1; /* the last component starting at or before b0 */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if ((size_t)at[mid] * row <= b0) lo = mid;
        else hi = mid - 1;
    }
    for (int64_t k = lo; k < n && (size_t)at[k] * row < b1; k++) {
        size_t cs = (size_t)at[k] * row, ce = cs + (size_t)lens[k] * row;
        size_t s = cs > b0 ? cs : b0, e = ce < b1 ? ce : b1;
        if (s < e) memcpy(dst + s, src + (size_t)from[k] * row + (s - cs), e - s);
    }
}

/* The rows of components picks[0..n) of s, packed in that order: values
 * (sum of their lengths, D...), copied as blocks of bytes; *lens gets each
 * one's length. */
static jag_status gather_components(const char *op, const nested_state *s, const int64_t *picks, int64_t n, int64_t *lens,
                                    jag_tensor **out) {
    const jag_tensor *v = s->values;
    int64_t rows = 0;
    for (int64_t k = 0; k < n; k++) lens[k] = comp_len(s, picks[k]), rows += lens[k];
    int64_t sz[JAG_MAX_DIMS];
    memcpy(sz, v->sizes, (size_t)v->ndim * sizeof *sz);
    sz[0] = rows;
    jag_tensor *y = jag__tensor_new(op, sz, v->ndim, v->dtype, false, false);
    if (!y) return jag_last_status();
    const int64_t *o = i64c(s->offsets);
    if (jag_is_contiguous(v) && n > 0) { /* rows are bytes: the output's bytes split among the threads */
        int64_t per_row = jag__numel(v->sizes + 1, v->ndim - 1);
        size_t row = (size_t)per_row * jag_dtype_size(v->dtype);
        const char *src = (const char *)jag__ptr(v);
        char *dst = (char *)jag__ptr(y);
        int64_t *at = malloc(2 * (size_t)n * sizeof *at), *from = at + n;
        if (!at) {
            jag_release(y);
            return jag__error(JAG_ENOMEM, "%s: out of memory", op);
        }
        for (int64_t k = 0, r = 0; k < n; k++) at[k] = r, r += lens[k];
        for (int64_t k = 0; k < n; k++) from[k] = o[picks[k]];
        /* Each thread copies one fixed share of the output's bytes, as the
         * padded path's index_select does, rather than taking components
         * one at a time (schedule(dynamic, 1)): equal shares balance any
         * lengths, and repeated calls give a thread the same bytes. Taking
         * components ran at half the rate in some runs and not in others
         * (64 components of 256 x 64 floats: 88-101 us, while a static
         * split of the same copies took 48 us and padded 50 us, in the same
         * minutes); when neither was slow, 52 us against this split's 46.
         * One component alone is split too (256 x 256 floats: 5.0 -> 3.3 us,
         * padded 5.3). */
        size_t total = (size_t)rows * row;
        JAG_PARALLEL_IF(rows * per_row >= JAG_GRAIN_MEMORY, "omp parallel", /* copies */
            {
                size_t t = (size_t)jag__thread_index(), nt = (size_t)jag__thread_count();
                size_t b0 = total / 64 * t / nt * 64, b1 = t + 1 == nt ? total : total / 64 * (t + 1) / nt * 64;
                if (b0 < b1) copy_byte_range(dst, src, at, lens, from, n, row, b0, b1);
            });
        free(at);
        *out = y;
        return JAG_OK;
    }
    int64_t at = 0;
    jag_status st = JAG_OK;
    for (int64_t k = 0; k < n && !st; k++) {
        if (!lens[k]) continue;
        sz[0] = lens[k];
        jag_tensor *src = jag__tensor_view(v, sz, v->strides, v->ndim, v->offset + o[picks[k]] * v->strides[0]);
        jag_tensor *dst = src ? jag__tensor_view(y, sz, y->strides, y->ndim, y->offset + at * y->strides[0]) : NULL;
        if (!src || !dst) st = jag_last_status();
        else st = jag__copy_part(op, dst, src);
        jag_release(src), jag_release(dst);
        at += lens[k];
    }
    if (st) {
        jag_release(y);
        return st;
    }
    *out = y;
    return JAG_OK;
}

/* Offsets (n+1) from lengths, and the smallest / largest length. */
static jag_tensor *offsets_from(const char *op, const int64_t *lens, int64_t n, int64_t *mn, int64_t *mx) {
    int64_t n1 = n + 1;
    jag_tensor *off = jag__tensor_new(op, &n1, 1, JAG_INT64, false, false);
    if (!off) return NULL;
    int64_t *o = (int64_t *)jag__ptr(off);
    o[0] = 0, *mn = n ? INT64_MAX : 0, *mx = 0;
    for (int64_t k = 0; k < n; k++) {
        o[k + 1] = o[k] + lens[k];
        *mn = lens[k] < *mn ? lens[k] : *mn, *mx = lens[k] > *mx ? lens[k] : *mx;
    }
    return off;
}

static jag_status need_jagged_data(const char *op, const jag_tensor *t, int i, nested_state **s) {
    *s = jag__nested(t);
    if (!*s) return jag__error(JAG_EINVAL, "%s: tensor %d of argument 'xs' is dense, expected every tensor nested (jagged)", op, i);
    if ((*s)->layout != JAG_JAGGED)
        return jag__error(JAG_ENOTIMPL, "%s: tensor %d of argument 'xs' has the strided layout; joining needs jagged tensors", op, i);
    if (!(*s)->offsets->storage) return jag__error(JAG_ENOTIMPL, "%s: joining nested tensors needs data", op);
    return JAG_OK;
}

// xs[i] (B_i, j, D...) jagged -> dim 0: (sum B_i, j, D...), components in order; dim >= 2: (B, j, ..., sum D_i, ...)
// with the same raggedness (values joined along dim - 1)
jag_status jag__nested_cat(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    if (nargs != 2 || args[0].kind != JAG_VAL_TENSORS || args[1].kind != JAG_VAL_INT)
        return jag__error(JAG_EINVAL, "%s: expected (tensor list, int dim)", op);
    jag_tensor *const *xs = args[0].u.tensors.v;
    int n = args[0].u.tensors.n;
    if (n <= 0) return jag__error(JAG_EINVAL, "%s: argument 'xs' is empty", op);
    nested_state *lead = NULL;
    jag_status st;
    for (int i = 0; i < n; i++) {
        nested_state *s;
        if ((st = need_jagged_data(op, xs[i], i, &s))) return st;
        if (!lead) lead = s;
        if (xs[i]->ndim != xs[0]->ndim)
            return jag__error(JAG_ESHAPE, "%s: tensor %d has %d dims, tensor 0 has %d", op, i, xs[i]->ndim, xs[0]->ndim);
    }
    int nd = xs[0]->ndim, d;
    if ((st = jag__wrap_dim(op, "dim", args[1].u.i, nd, &d))) return st;
    if (d == 1)
        return jag__error(JAG_ENOTIMPL, "%s: joining nested tensors along the ragged dim (1) is not supported; join along the batch dim (0) or a dense dim", op);
    if (d >= 2) { /* same raggedness: values joined */
        for (int i = 1; i < n; i++)
            if (!jag__nested_same_raggedness(lead, jag__nested(xs[i]), false))
                return jag__error(JAG_ESHAPE, "%s: tensor %d has different raggedness (j%lld) than tensor 0 (j%lld), expected the same offsets and lengths to join along dim %d",
                                  op, i, (long long)atomic_load(&jag__nested(xs[i])->ragged_id),
                                  (long long)atomic_load(&lead->ragged_id), d);
        jag_tensor **vs = calloc((size_t)n, sizeof *vs);
        if (!vs) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
        for (int i = 0; i < n; i++) vs[i] = jag__nested(xs[i])->values;
        jag_tensor *res = NULL;
        jag_value a[] = {jag__v_tensors(vs, n), jag__v_int(d - 1)};
        st = jag__dispatch_plain(JAG_OP_cat, a, 2, &res);
        free(vs);
        if (st) return st;
        st = jag__nested_rewrap_jagged_taking(lead, res, outs);
        if (!st)
            for (int i = 1; i < n; i++) jag__nested_same_raggedness(lead, jag__nested(xs[i]), true);
        return st;
    }
    /* the batch dim: trailing sizes must agree */
    for (int i = 1; i < n; i++)
        for (int k = 2; k < nd; k++)
            if (xs[i]->sizes[k] != xs[0]->sizes[k]) {
                char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
                return jag__error(JAG_ESHAPE, "%s: tensor %d has dims after the ragged one %s, expected %s like tensor 0", op, i,
                                  jag__shape_str(xs[i]->sizes + 2, nd - 2, a, sizeof a),
                                  jag__shape_str(xs[0]->sizes + 2, nd - 2, b, sizeof b));
            }
    int64_t total = 0, maxb = 0;
    for (int i = 0; i < n; i++) {
        int64_t bi = jag__nested(xs[i])->batch;
        total += bi, maxb = bi > maxb ? bi : maxb;
    }
    /* small batches (the common case of a few joins) on the stack */
    enum { SMALL = 64 };
    int64_t lens_s[SMALL], picks_s[SMALL];
    jag_tensor *parts_s[SMALL / 4] = {0};
    bool small = total < SMALL && n <= SMALL / 4;
    int64_t *lens = small ? lens_s : malloc((size_t)(total + 1) * sizeof *lens);
    int64_t *picks = small ? picks_s : malloc((size_t)(maxb + 1) * sizeof *picks);
    jag_tensor **parts = small ? parts_s : calloc((size_t)n, sizeof *parts);
    if (!lens || !picks || !parts) {
        if (!small) free(lens), free(picks), free(parts);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    int64_t at = 0;
    for (int i = 0; i < n && !st; i++) {
        nested_state *s = jag__nested(xs[i]);
        const int64_t *o = i64c(s->offsets); /* (read once: each read is a call) */
        if (!s->lengths && o[0] == 0 && o[s->batch] == s->values->sizes[0]) { /* packed */
            parts[i] = s->values; /* borrowed: xs keeps it alive */
            for (int64_t b = 0; b < s->batch; b++) lens[at + b] = o[b + 1] - o[b];
        } else {
            for (int64_t b = 0; b < s->batch; b++) picks[b] = b;
            st = gather_components(op, s, picks, s->batch, lens + at, &parts[i]);
        }
        at += s->batch;
    }
    jag_tensor *vals = NULL, *off = NULL;
    int64_t mn = 0, mx = 0;
    if (!st) {
        /* written field by field: a whole jag_value copied from a
         * temporary right after its fields were stored stalls the store
         * forwarding (a tenth of this function's time at B = 1) */
        jag_value a[2];
        memset(a, 0, sizeof a);
        a[0].kind = JAG_VAL_TENSORS, a[0].u.tensors.v = parts, a[0].u.tensors.n = n;
        a[1].kind = JAG_VAL_INT, a[1].u.i = 0;
        st = jag__dispatch_plain(JAG_OP_cat, a, 2, &vals);
    }
    if (!st && !(off = offsets_from(op, lens, total, &mn, &mx))) st = jag_last_status();
    if (!st) st = jag__nested_wrap_jagged_taking(vals, off, jag__new_ragged_id(), mn, mx, outs);
    else jag_release(vals), jag_release(off);
    for (int i = 0; i < n; i++)
        if (parts[i] != jag__nested(xs[i])->values) jag_release(parts[i]); /* the gathered ones */
    if (!small) free(lens), free(picks), free(parts);
    return st;
}

// x (B, j, D...) jagged, index (n) int32/int64 in [0, B) -> (n, j, D...): component k is x's component index[k]
jag_status jag__nested_index_select_batch(const char *op, nested_state *s, const jag_tensor *index, jag_tensor **outs) {
    if (!index || index->subclass || index->ndim != 1 || (index->dtype != JAG_INT64 && index->dtype != JAG_INT32))
        return jag__error(JAG_EINVAL, "%s: argument 'index' must be a plain 1-d int32 or int64 tensor", op);
    if (!s->offsets->storage || !index->storage) return jag__error(JAG_ENOTIMPL, "%s: picking components needs data", op);
    int64_t n = index->sizes[0];
    int64_t *picks = malloc((size_t)(n + 1) * sizeof *picks), *lens = malloc((size_t)(n + 1) * sizeof *lens);
    if (!picks || !lens) {
        free(picks), free(lens);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    jag_status st = JAG_OK;
    for (int64_t k = 0; k < n && !st; k++) {
        const char *p = (const char *)jag__ptr(index) + k * index->strides[0] * (int64_t)jag_dtype_size(index->dtype);
        int64_t v = index->dtype == JAG_INT64 ? *(const int64_t *)p : *(const int32_t *)p;
        if (v < 0 || v >= s->batch)
            st = jag__error(JAG_ERANGE, "%s: argument 'index' holds %lld at position %lld, expected a component in [0, %lld)", op,
                            (long long)v, (long long)k, (long long)s->batch);
        picks[k] = v;
    }
    jag_tensor *vals = NULL, *off = NULL;
    int64_t mn = 0, mx = 0;
    if (!st) st = gather_components(op, s, picks, n, lens, &vals);
    if (!st && !(off = offsets_from(op, lens, n, &mn, &mx))) st = jag_last_status();
    if (!st) st = jag__nested_wrap_jagged(vals, off, NULL, jag__new_ragged_id(), mn, mx, outs);
    jag_release(vals), jag_release(off);
    free(picks), free(lens);
    return st;
}

// x (B, j, D...) jagged, dim d in [2, ndim] -> (B, j, ..., 1, ...): unsqueeze of the values at d - 1
jag_status jag__nested_unsqueeze(const char *op, nested_state *s, int outer_ndim, int64_t dim, jag_tensor **outs) {
    int d;
    jag_status st = jag__wrap_dim(op, "dim", dim, outer_ndim + 1, &d);
    if (st) return st;
    if (d <= 1)
        return jag__error(JAG_ENOTIMPL, "%s: a new dim before the ragged one (dim %d) is not supported for jagged tensors", op, d);
    jag_tensor *res = NULL;
    jag_value a[] = {jag__v_tensor(s->values), jag__v_int(d - 1)};
    if ((st = jag__dispatch(JAG_OP_unsqueeze, a, 2, &res))) return st;
    return jag__nested_rewrap_jagged_taking(s, res, outs);
}

/* embedding_bag with jagged nested indices (B, j): one bag per component.
 * The arguments rewritten for the dense op: the indices' packed values
 * (holes dropped) and their offsets; nested per-sample weights (same
 * raggedness) by their packed values. temps[0..2] receive what was made
 * (release them after the call). */
jag_status jag__nested_bag_args(const char *op, const jag_value *args, int nargs, jag_value *a, jag_tensor **temps) {
    temps[0] = temps[1] = temps[2] = NULL;
    if (nargs != 5) return jag__error(JAG_EINVAL, "%s: expected 5 arguments", op);
    for (int i = 0; i < nargs; i++) a[i] = args[i];
    if (args[0].kind == JAG_VAL_TENSOR && jag__nested(args[0].u.t))
        return jag__error(JAG_ENOTIMPL, "%s: argument 'weight' must be a dense table, got a nested tensor", op);
    nested_state *s = args[1].kind == JAG_VAL_TENSOR ? jag__nested(args[1].u.t) : NULL;
    if (!s || s->layout != JAG_JAGGED)
        return jag__error(JAG_ENOTIMPL, "%s: nested arguments are supported as jagged (B, j) indices (and per-sample weights)", op);
    if (args[1].u.t->ndim != 2)
        return jag__error(JAG_ESHAPE, "%s: argument 'indices' is nested with %d dims, expected (B, j)", op, args[1].u.t->ndim);
    if (args[2].kind != JAG_VAL_NONE)
        return jag__error(JAG_EINVAL, "%s: argument 'offsets' must be none with nested indices (their offsets are used)", op);
    nested_state *ps = args[4].kind == JAG_VAL_TENSOR ? jag__nested(args[4].u.t) : NULL;
    if (ps && !jag__nested_same_raggedness(s, ps, false))
        return jag__error(JAG_ESHAPE, "%s: argument 'per_sample_weights' has different raggedness than 'indices'", op);
    jag_status st = jag__nested_contiguous(args[1].u.t, &temps[0]);
    if (!st && ps) st = jag__nested_contiguous(args[4].u.t, &temps[1]);
    if (st) {
        jag_release(temps[0]), jag_release(temps[1]);
        temps[0] = temps[1] = NULL;
        return st;
    }
    nested_state *c = jag__nested(temps[0]);
    a[1] = jag__v_tensor(c->values);
    a[2] = jag__v_tensor(c->offsets);
    if (ps) a[4] = jag__v_tensor(jag__nested(temps[1])->values);
    return JAG_OK;
}
