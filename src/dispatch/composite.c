/* composite.c — public ops built from dispatched ops: reshape, contiguous,
 * to_dtype, matmul, stack, split, chunk (in-place ops: inplace.c). Each runs inside
 * jag__enter/jag__leave so that only its final outputs reach the scope. */
#include "dispatch.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */
#include "../subclass/nested.h"

static jag_status no_out(const char *op) {
    return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL, expected a place for the result", op);
}

static jag_status need_tensor(const char *op, const char *arg, const jag_tensor *t) {
    return jag__check_live(op, arg, t);
}

/* ---- internal helpers (depth > 0: nothing recorded) --------------------- */

static jag_status d_view(const jag_tensor *x, const int64_t *sizes, int n, jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(x), jag__v_ints(sizes, n)};
    return jag__dispatch(JAG_OP_view, a, 2, out);
}

static jag_status d_clone(const jag_tensor *x, jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(x)};
    return jag__dispatch(JAG_OP_clone, a, 1, out);
}

/* A view when the strides allow it, else a view of a contiguous copy. */
static jag_status d_reshape(const jag_tensor *x, const int64_t *sizes, int n, jag_tensor **out) {
    jag_status st = d_view(x, sizes, n, out);
    if (st != JAG_ESHAPE || jag_is_contiguous(x)) return st;
    jag_tensor *c = NULL;
    if ((st = d_clone(x, &c))) return st;
    st = d_view(c, sizes, n, out);
    jag_release(c);
    return st;
}

jag_status jag_reshape(const jag_tensor *x, const int64_t *sizes, int ndim, jag_tensor **out) {
    if (!out) return no_out("jag_reshape");
    if (need_tensor("jag_reshape", "x", x)) return JAG_EINVAL;
    if (ndim < 0 || ndim > JAG_MAX_DIMS || (ndim && !sizes))
        return jag__error(JAG_EINVAL, "jag_reshape: argument 'sizes' is NULL or has %d entries, expected 0..%d", ndim,
                          JAG_MAX_DIMS);
    jag__enter();
    return jag__leave(d_reshape(x, sizes, ndim, out), out, 1);
}

jag_status jag_flatten(const jag_tensor *x, jag_tensor **out) {
    int64_t n = -1;
    return jag_reshape(x, &n, 1, out);
}

jag_status jag_contiguous(const jag_tensor *x, jag_tensor **out) {
    if (!out) return no_out("jag_contiguous");
    if (need_tensor("jag_contiguous", "x", x)) return JAG_EINVAL;
    if (jag_is_nested(x)) {
        jag__enter();
        return jag__leave(jag__nested_contiguous(x, out), out, 1);
    }
    if (jag_is_contiguous(x)) {
        jag__enter();
        *out = jag_retain((jag_tensor *)x);
        return jag__leave(JAG_OK, out, 1);
    }
    return jag_clone(x, out);
}

jag_status jag_to_dtype(const jag_tensor *x, jag_dtype dtype, jag_tensor **out) {
    if (!out) return no_out("jag_to_dtype");
    if (need_tensor("jag_to_dtype", "x", x)) return JAG_EINVAL;
    jag__enter();
    jag_status st;
    if (dtype == x->dtype) {
        *out = jag_retain((jag_tensor *)x);
        st = JAG_OK;
    } else {
        jag_value a[] = {jag__v_tensor(x), jag__v_int(dtype)};
        st = jag__dispatch(JAG_OP_to_dtype, a, 2, out);
    }
    return jag__leave(st, out, 1);
}

/* ---- matmul ------------------------------------------------------------- */

static jag_status d_mm(const jag_tensor *a, const jag_tensor *b, jag_tensor **out) {
    jag_value v[] = {jag__v_tensor(a), jag__v_tensor(b)};
    return jag__dispatch(JAG_OP_mm, v, 2, out);
}

static jag_status d_bmm(const jag_tensor *a, const jag_tensor *b, jag_tensor **out) {
    jag_value v[] = {jag__v_tensor(a), jag__v_tensor(b)};
    return jag__dispatch(JAG_OP_bmm, v, 2, out);
}

static jag_status d_unsqueeze(const jag_tensor *x, int dim, jag_tensor **out) {
    jag_value v[] = {jag__v_tensor(x), jag__v_int(dim)};
    return jag__dispatch(JAG_OP_unsqueeze, v, 2, out);
}

static jag_status d_expand(const jag_tensor *x, const int64_t *sizes, int n, jag_tensor **out) {
    jag_value v[] = {jag__v_tensor(x), jag__v_ints(sizes, n)};
    return jag__dispatch(JAG_OP_expand, v, 2, out);
}

static jag_status matmul_impl(const jag_tensor *a, const jag_tensor *b, jag_tensor **out) {
    const char *op = "jag_matmul";
    int na = a->ndim, nb = b->ndim;
    if (na == 0 || nb == 0)
        return jag__error(JAG_EINVAL, "%s: both arguments need at least 1 dim, got %d-d and %d-d", op, na, nb);
    /* check here, so that errors name matmul and the caller's shapes */
    if (a->dtype != b->dtype || !jag_dtype_is_floating(a->dtype))
        return jag__error(JAG_EDTYPE, "%s: arguments have dtypes %s and %s, expected the same float dtype", op,
                          jag_dtype_name(a->dtype), jag_dtype_name(b->dtype));
    int64_t ka = a->sizes[na - 1], kb = b->sizes[nb == 1 ? 0 : nb - 2];
    if (ka != kb) {
        char x[JAG_SHAPE_BUF], y[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: inner sizes differ: %s @ %s (%lld vs %lld)", op,
                          jag__shape_str(a->sizes, na, x, sizeof x), jag__shape_str(b->sizes, nb, y, sizeof y),
                          (long long)ka, (long long)kb);
    }
    jag_tensor *a2 = NULL, *b2 = NULL, *r = NULL;
    jag_status st = JAG_OK;
    /* 1-D operands become matrices and lose that dim at the end, as torch. */
    if (na == 1) st = d_unsqueeze(a, 0, &a2);
    else a2 = jag_retain((jag_tensor *)a);
    if (!st) {
        if (nb == 1) st = d_unsqueeze(b, 1, &b2);
        else b2 = jag_retain((jag_tensor *)b);
    }
    if (st) goto done;
    if (a2->ndim == 2 && b2->ndim == 2) {
        st = d_mm(a2, b2, &r);
    } else if (b2->ndim == 2) {
        /* (..., n, k) @ (k, m): one GEMM over the folded batch. */
        int64_t k = a2->sizes[a2->ndim - 1];
        int64_t flat[2] = {jag__numel(a2->sizes, a2->ndim - 1), k}; /* not -1: k may be 0 */
        jag_tensor *af = NULL, *rf = NULL;
        st = d_reshape(a2, flat, 2, &af);
        if (!st) st = d_mm(af, b2, &rf);
        if (!st) {
            int64_t shape[JAG_MAX_DIMS];
            memcpy(shape, a2->sizes, (size_t)a2->ndim * sizeof *shape);
            shape[a2->ndim - 1] = b2->sizes[1];
            st = d_view(rf, shape, a2->ndim, &r);
        }
        jag_release(af);
        jag_release(rf);
    } else {
        /* Broadcast batch dims, fold them into one, bmm, unfold. */
        int64_t batch[JAG_MAX_DIMS];
        int nbatch;
        st = jag__broadcast_shapes(op, a2->sizes, a2->ndim - 2, b2->sizes, b2->ndim - 2, batch, &nbatch);
        if (st) goto done;
        int64_t n = a2->sizes[a2->ndim - 2], k = a2->sizes[a2->ndim - 1];
        int64_t k2 = b2->sizes[b2->ndim - 2], m = b2->sizes[b2->ndim - 1];
        if (k != k2) {
            char x[JAG_SHAPE_BUF], y[JAG_SHAPE_BUF];
            st = jag__error(JAG_ESHAPE, "%s: inner sizes differ: %s @ %s (%lld vs %lld)", op,
                            jag__shape_str(a->sizes, a->ndim, x, sizeof x), jag__shape_str(b->sizes, b->ndim, y, sizeof y),
                            (long long)k, (long long)k2);
            goto done;
        }
        int64_t ea[JAG_MAX_DIMS], eb[JAG_MAX_DIMS], shape[JAG_MAX_DIMS];
        int64_t nbat = jag__numel(batch, nbatch);
        memcpy(ea, batch, (size_t)nbatch * sizeof *ea);
        memcpy(eb, batch, (size_t)nbatch * sizeof *eb);
        ea[nbatch] = n, ea[nbatch + 1] = k;
        eb[nbatch] = k, eb[nbatch + 1] = m;
        jag_tensor *ae = NULL, *be = NULL, *af = NULL, *bf = NULL, *rf = NULL;
        int64_t fa[3] = {nbat, n, k}, fb[3] = {nbat, k, m};
        st = d_expand(a2, ea, nbatch + 2, &ae);
        if (!st) st = d_expand(b2, eb, nbatch + 2, &be);
        if (!st) st = d_reshape(ae, fa, 3, &af);
        if (!st) st = d_reshape(be, fb, 3, &bf);
        if (!st) st = d_bmm(af, bf, &rf);
        if (!st) {
            memcpy(shape, batch, (size_t)nbatch * sizeof *shape);
            shape[nbatch] = n, shape[nbatch + 1] = m;
            st = d_view(rf, shape, nbatch + 2, &r);
        }
        jag_release(ae), jag_release(be), jag_release(af), jag_release(bf), jag_release(rf);
    }
    if (!st && (na == 1 || nb == 1)) {
        /* drop the dims that 1-D operands added */
        jag_tensor *s = r;
        int64_t shape[JAG_MAX_DIMS];
        int n = 0;
        for (int d = 0; d < s->ndim; d++) {
            if (na == 1 && d == s->ndim - 2) continue;
            if (nb == 1 && d == s->ndim - 1) continue;
            shape[n++] = s->sizes[d];
        }
        r = NULL;
        st = d_view(s, shape, n, &r);
        jag_release(s);
    }
done:
    jag_release(a2);
    jag_release(b2);
    if (!st) *out = r;
    else jag_release(r);
    return st;
}

jag_status jag__composite_matmul(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *a, *b;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "a", &a)) || (st = jag__arg_tensor(op, args, nargs, 1, "b", &b)))
        return st;
    return matmul_impl(a, b, outs);
}

/* ---- stack, split, chunk ------------------------------------------------ */

jag_status jag_stack(jag_tensor *const *xs, int n, int dim, jag_tensor **out) {
    const char *op = "jag_stack";
    if (!out) return no_out(op);
    if (n <= 0 || !xs) return jag__error(JAG_EINVAL, "%s: argument 'xs' is empty, expected at least one tensor", op);
    for (int i = 0; i < n; i++)
        if (!xs[i]) return jag__error(JAG_EINVAL, "%s: tensor %d of argument 'xs' is NULL", op, i);
    for (int i = 1; i < n; i++)
        if (xs[i]->ndim != xs[0]->ndim || memcmp(xs[i]->sizes, xs[0]->sizes, (size_t)xs[0]->ndim * sizeof(int64_t))) {
            char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
            return jag__error(JAG_ESHAPE, "%s: tensor %d has shape %s, expected %s like tensor 0", op, i,
                              jag__shape_str(xs[i]->sizes, xs[i]->ndim, a, sizeof a),
                              jag__shape_str(xs[0]->sizes, xs[0]->ndim, b, sizeof b));
        }
    int d;
    jag_status st = jag__wrap_dim(op, "dim", dim, xs[0]->ndim + 1, &d);
    if (st) return st;
    jag_tensor **u = calloc((size_t)n, sizeof *u);
    if (!u) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    jag__enter();
    for (int i = 0; i < n && !st; i++) st = d_unsqueeze(xs[i], d, &u[i]);
    if (!st) {
        jag_value v[] = {jag__v_tensors(u, n), jag__v_int(d)};
        st = jag__dispatch(JAG_OP_cat, v, 2, out);
    }
    for (int i = 0; i < n; i++) jag_release(u[i]);
    free(u);
    return jag__leave(st, out, 1);
}

static jag_status split_sizes(const char *op, const jag_tensor *x, int64_t piece, int dim, jag_tensor **outs, int cap,
                              int *n_out) {
    if (!outs || !n_out) return jag__error(JAG_EINVAL, "%s: arguments 'outs' and 'n_out' must not be NULL", op);
    if (need_tensor(op, "x", x)) return JAG_EINVAL;
    if (x->ndim == 0) return jag__error(JAG_EINVAL, "%s: argument 'x' is 0-d, expected at least 1 dim", op);
    int d;
    jag_status st = jag__wrap_dim(op, "dim", dim, x->ndim, &d);
    if (st) return st;
    int64_t size = x->sizes[d];
    if (size < 0)
        return jag__error(JAG_ENOTIMPL, "%s: dim %d of argument 'x' is ragged; split it with jag_nested_unbind", op, d);
    int64_t count = size == 0 ? 1 : size / piece + (size % piece != 0);
    if (count > cap)
        return jag__error(JAG_EINVAL, "%s: gives %lld pieces but argument 'cap' is %d", op, (long long)count, cap);
    jag_tensor **made = calloc((size_t)count, sizeof *made);
    if (!made) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    jag__enter();
    for (int64_t i = 0; i < count && !st; i++) {
        int64_t start = i * piece, len = size - start < piece ? size - start : piece;
        jag_value v[] = {jag__v_tensor(x), jag__v_int(d), jag__v_int(start), jag__v_int(len)};
        st = jag__dispatch(JAG_OP_narrow, v, 4, &made[i]);
    }
    if (st) { /* outs stay untouched */
        for (int64_t i = 0; i < count; i++) jag_release(made[i]);
        free(made);
        return jag__leave(st, NULL, 0);
    }
    for (int64_t i = 0; i < count; i++) outs[i] = made[i];
    free(made);
    *n_out = (int)count;
    return jag__leave(JAG_OK, outs, (int)count);
}

jag_status jag_split(const jag_tensor *x, int64_t split_size, int dim, jag_tensor **outs, int cap, int *n_out) {
    if (split_size <= 0)
        return jag__error(JAG_EINVAL, "jag_split: argument 'split_size' is %lld, expected > 0", (long long)split_size);
    return split_sizes("jag_split", x, split_size, dim, outs, cap, n_out);
}

jag_status jag_chunk(const jag_tensor *x, int chunks, int dim, jag_tensor **outs, int cap, int *n_out) {
    if (chunks <= 0) return jag__error(JAG_EINVAL, "jag_chunk: argument 'chunks' is %d, expected > 0", chunks);
    if (need_tensor("jag_chunk", "x", x)) return JAG_EINVAL;
    int d;
    jag_status st = jag__wrap_dim("jag_chunk", "dim", dim, x->ndim, &d);
    if (st) return st;
    int64_t size = x->ndim ? x->sizes[d] : 1;
    if (size < 0)
        return jag__error(JAG_ENOTIMPL, "jag_chunk: dim %d of argument 'x' is ragged; split it with jag_nested_unbind", d);
    int64_t piece = size / chunks + (size % chunks != 0);
    if (piece == 0) piece = 1;
    return split_sizes("jag_chunk", x, piece, dim, outs, cap, n_out);
}

/* ---- dropout ------------------------------------------------------------- */

/* dropout's mask from uniform u: (u >= p) / (1 - p) in dtype dt. A plain
 * contiguous float u with data (what jag_rand_like makes) becomes the mask in
 * place, one loop; anything else (a user subclass) goes through the ops.
 * The same values either way: 1 or 0 in dt, times 1 / (1 - p) rounded to dt. */
static jag_status dropout_mask(jag_tensor *u, double p, jag_dtype dt, jag_tensor **mask) {
    double scale = 1.0 / (1.0 - p);
    if (!u->subclass && u->dtype == dt && (dt == JAG_FLOAT32 || dt == JAG_FLOAT64) && !jag__is_meta(u) &&
        jag_is_contiguous(u)) {
        int64_t n = jag_numel(u);
        if (dt == JAG_FLOAT32) {
            float *v = (float *)jag__ptr(u), sc = (float)scale, pf = (float)p;
            /* u >= p as the ge op compares: in float32 against p rounded */
            for (int64_t i = 0; i < n; i++) v[i] = v[i] >= pf ? sc : 0.0f;
        } else {
            double *v = (double *)jag__ptr(u);
            for (int64_t i = 0; i < n; i++) v[i] = v[i] >= p ? scale : 0.0;
        }
        *mask = jag_retain(u);
        return JAG_OK;
    }
    jag_tensor *keep = NULL, *m = NULL;
    jag_value a[] = {jag__v_tensor(u), jag__v_double(p)};
    jag_status st = jag__dispatch(JAG_OP_ge, a, 2, &keep);
    jag_value b[] = {jag__v_tensor(keep), jag__v_int(dt)};
    if (!st) st = jag__dispatch(JAG_OP_to_dtype, b, 2, &m);
    jag_value c[] = {jag__v_tensor(m), jag__v_double(scale)};
    if (!st) st = jag__dispatch(JAG_OP_mul, c, 2, mask);
    jag_release(keep), jag_release(m);
    return st;
}

jag_status jag_dropout(const jag_tensor *x, double p, bool train, jag_generator *g, jag_tensor **out) {
    const char *op = "jag_dropout";
    if (!out) return no_out(op);
    if (need_tensor(op, "x", x)) return JAG_EINVAL;
    if (!(p >= 0 && p <= 1)) return jag__error(JAG_EINVAL, "%s: argument 'p' is %g, expected 0 <= p <= 1", op, p);
    if (!jag_dtype_is_floating(x->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'x' has dtype %s, expected a float dtype", op, jag_dtype_name(x->dtype));
    jag__enter();
    jag_status st;
    if (!train || p == 0) {
        *out = jag_retain((jag_tensor *)x);
        return jag__leave(JAG_OK, out, 1);
    }
    if (p == 1) { /* every element dropped: x * 0, as torch (NaN where x is inf or NaN, gradient 0) */
        jag_value z[] = {jag__v_tensor(x), jag__v_double(0.0)};
        return jag__leave(jag__dispatch(JAG_OP_mul, z, 2, out), out, 1);
    }
    /* mask = (u >= p) / (1 - p) with u uniform: a constant for autograd. A
     * jagged x draws u over its packed values, as jag_rand_like does, and
     * gets the mask as a nested tensor of its own structure: one nested op
     * (the product), not one per step. */
    nested_state *s = jag__nested(x);
    bool jagged = s && s->layout == JAG_JAGGED;
    jag_tensor *u = NULL, *mask = NULL;
    bool prev = jag_set_grad_enabled(false);
    st = jag_rand_like(jagged ? s->values : x, g, &u);
    if (!st) st = dropout_mask(u, p, x->dtype, &mask);
    jag_set_grad_enabled(prev);
    if (!st && jagged) {
        jag_tensor *m = mask;
        mask = NULL;
        st = jag__nested_rewrap_jagged_taking(s, m, &mask);
    }
    jag_value d[] = {jag__v_tensor(x), jag__v_tensor(mask)};
    if (!st) st = jag__dispatch(JAG_OP_mul, d, 2, out);
    jag_release(u), jag_release(mask);
    return jag__leave(st, out, 1);
}

/* ---- masked_fill, truncating to_padded ----------------------------------- */

/* where(mask, value, x): value as a 0-d tensor of x's dtype, so that it
 * broadcasts over dense and nested x alike */
jag_status jag_masked_fill(const jag_tensor *x, const jag_tensor *mask, double value, jag_tensor **out) {
    const char *op = "jag_masked_fill";
    if (!out) return no_out(op);
    if (need_tensor(op, "x", x) || need_tensor(op, "mask", mask)) return JAG_EINVAL;
    if (mask->dtype != JAG_BOOL)
        return jag__error(JAG_EDTYPE, "%s: argument 'mask' has dtype %s, expected bool", op, jag_dtype_name(mask->dtype));
    jag__enter();
    jag_tensor *v = jag__tensor_new(op, NULL, 0, x->dtype, false, false);
    jag_status st = v ? JAG_OK : jag_last_status();
    if (!st) jag__fill(v, value);
    jag_value a[] = {jag__v_tensor(mask), jag__v_tensor(v), jag__v_tensor(x)};
    if (!st) st = jag__dispatch(JAG_OP_where, a, 3, out);
    jag_release(v);
    return jag__leave(st, out, 1);
}

/* narrow along the ragged dim to max_length rows (holes), then pad every
 * component to exactly max_length: both differentiable */
jag_status jag_nested_to_padded_max(const jag_tensor *nt, double padding, int64_t max_length, jag_tensor **out) {
    const char *op = "jag_nested_to_padded_max";
    if (!out) return no_out(op);
    if (need_tensor(op, "nt", nt)) return JAG_EINVAL;
    nested_state *s = jag__nested(nt);
    if (!s || s->layout != JAG_JAGGED)
        return jag__error(JAG_EINVAL, "%s: argument 'nt' is %s, expected a jagged nested tensor", op,
                          s ? "a strided nested tensor" : "not nested");
    if (max_length < 0) return jag__error(JAG_EINVAL, "%s: argument 'max_length' is %lld, expected >= 0", op, (long long)max_length);
    jag__enter();
    jag_tensor *cut = NULL;
    jag_value a[] = {jag__v_tensor(nt), jag__v_int(1), jag__v_int(0), jag__v_int(max_length)};
    jag_status st = jag__dispatch(JAG_OP_narrow, a, 4, &cut);
    int64_t sizes[JAG_MAX_DIMS];
    sizes[0] = s->batch, sizes[1] = max_length;
    for (int d = 2; d < nt->ndim; d++) sizes[d] = nt->sizes[d];
    jag_value b[] = {jag__v_tensor(cut), jag__v_double(padding), jag__v_ints(sizes, nt->ndim)};
    if (!st) st = jag__dispatch(JAG_OP_to_padded, b, 3, out);
    jag_release(cut);
    return jag__leave(st, out, 1);
}
