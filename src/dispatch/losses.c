/* losses.c — cross_entropy and mse_loss, composed of differentiable ops, for
 * dense and jagged nested inputs. For nested inputs the loss runs on the
 * packed values; rows in holes are masked out of the mean. */
#include "dispatch.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */
#include "../subclass/nested.h"

#include <math.h>
#include <stdio.h>

static jag_status call(jag_op_id op, const jag_value *a, int n, jag_tensor **out) { return jag__dispatch(op, a, n, out); }

/* For a jagged input with holes: a float mask (rows of values) with 1 on
 * real rows, and the count of real rows; NULL mask when every row is real. */
static jag_status real_rows(const nested_state *s, jag_dtype dt, jag_tensor **mask, int64_t *count) {
    *mask = NULL;
    *count = s->values->sizes[0];
    if (!s->lengths) return JAG_OK;
    if (!s->lengths->storage)
        return jag__error(JAG_ENOTIMPL, "loss: a jagged input with holes needs data (it cannot be traced yet)");
    int64_t bc[2] = {s->batch, 1};
    jag_tensor *ones = jag__tensor_new("loss mask", bc, 2, dt, false, false), *m = NULL;
    if (!ones) return jag_last_status();
    jag__fill(ones, 1.0);
    /* the mask needs rows only: (R, 1, ..., 1) with values' ndim, so that it
     * broadcasts against values */
    nested_state narrow = *s;
    int64_t vs[JAG_MAX_DIMS];
    vs[0] = s->values->sizes[0];
    for (int d = 1; d < s->values->ndim; d++) vs[d] = 1;
    narrow.values = jag__tensor_new("loss mask", vs, s->values->ndim, dt, false, true);
    jag_status st = narrow.values ? jag__segment_broadcast("loss mask", &narrow, ones, false, &m) : jag_last_status();
    jag_release(narrow.values), jag_release(ones);
    if (st) return st;
    *count = 0;
    const int64_t *l = (const int64_t *)jag__ptr(s->lengths);
    for (int64_t b = 0; b < s->batch; b++) *count += l[b];
    *mask = m;
    return JAG_OK;
}

/* sum(x [* mask]) / count; without a mask the mean op, whose count comes
 * from x at run time (a traced program then fits every batch size) */
static jag_status masked_mean(const jag_tensor *x, const jag_tensor *mask, int64_t count, jag_tensor **out) {
    jag_tensor *mx = NULL, *s = NULL;
    jag_status st;
    if (!mask) {
        jag_value m[] = {jag__v_tensor(x), jag__v_ints(NULL, 0), jag__v_bool(false)};
        return call(JAG_OP_mean, m, 3, out);
    }
    jag_value a[] = {jag__v_tensor(x), jag__v_tensor(mask)};
    st = call(JAG_OP_mul, a, 2, &mx);
    jag_value b[] = {jag__v_tensor(mx ? mx : x), jag__v_ints(NULL, 0), jag__v_bool(false)};
    if (!st) st = call(JAG_OP_sum, b, 3, &s);
    jag_value c[] = {jag__v_tensor(s), jag__v_double(count ? 1.0 / (double)count : NAN)};
    if (!st) st = call(JAG_OP_mul, c, 2, out);
    jag_release(mx), jag_release(s);
    return st;
}

static jag_status need(const char *op, const char *arg, const jag_tensor *t) {
    return t ? JAG_OK : jag__error(JAG_EINVAL, "%s: argument '%s' is NULL", op, arg);
}

/* Plain (N, C) logits and (N) targets, or the values of nested ones. */
static jag_status cross_entropy_rows(const char *op, const jag_tensor *logits, const jag_tensor *target,
                                     const jag_tensor *mask, int64_t count, jag_tensor **out) {
    if (logits->ndim != 2 || target->ndim != 1 || target->sizes[0] != logits->sizes[0]) {
        char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: logits of shape %s and target of shape %s, expected (N, C) and (N)", op,
                          jag__shape_str(logits->sizes, logits->ndim, a, sizeof a),
                          jag__shape_str(target->sizes, target->ndim, b, sizeof b));
    }
    if (target->dtype != JAG_INT64 && target->dtype != JAG_INT32)
        return jag__error(JAG_EDTYPE, "%s: argument 'target' has dtype %s, expected int64 or int32 class indices", op,
                          jag_dtype_name(target->dtype));
    jag_tensor *ls = NULL, *idx = NULL, *picked = NULL, *nll = NULL;
    jag_value a[] = {jag__v_tensor(logits), jag__v_int(1)};
    jag_status st = call(JAG_OP_log_softmax, a, 2, &ls);
    int64_t col[2] = {target->sizes[0], 1};
    jag_value b[] = {jag__v_tensor(target), jag__v_ints(col, 2)};
    if (!st) st = call(JAG_OP_view, b, 2, &idx);
    if (st == JAG_ESHAPE) { /* a non-viewable target: copy it */
        jag_tensor *c = NULL;
        jag_value cl[] = {jag__v_tensor(target)};
        st = call(JAG_OP_clone, cl, 1, &c);
        jag_value b2[] = {jag__v_tensor(c), jag__v_ints(col, 2)};
        if (!st) st = call(JAG_OP_view, b2, 2, &idx);
        jag_release(c);
    }
    jag_value g[] = {jag__v_tensor(ls), jag__v_int(1), jag__v_tensor(idx)};
    if (!st) {
        st = call(JAG_OP_gather, g, 3, &picked); /* (N, 1) */
        if (st == JAG_ERANGE) {
            char inner[512];
            snprintf(inner, sizeof inner, "%s", jag_last_error());
            st = jag__error(JAG_ERANGE, "%s: argument 'target' holds a class outside [0, %lld): %s", op,
                            (long long)logits->sizes[1], inner);
        }
    }
    jag_value n[] = {jag__v_tensor(picked)};
    if (!st) st = call(JAG_OP_neg, n, 1, &nll);
    jag_tensor *m2 = NULL;
    if (!st && mask) { /* mask is (R, 1) like nll */
        m2 = jag_retain((jag_tensor *)mask);
    }
    if (!st) st = masked_mean(nll, m2, count, out);
    jag_release(ls), jag_release(idx), jag_release(picked), jag_release(nll), jag_release(m2);
    return st;
}

jag_status jag_cross_entropy(const jag_tensor *logits, const jag_tensor *target, jag_tensor **out) {
    const char *op = "jag_cross_entropy";
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    jag_status st;
    if ((st = need(op, "logits", logits)) || (st = need(op, "target", target))) return st;
    nested_state *ls = jag__nested(logits), *ts = jag__nested(target);
    jag__enter();
    if (!ls && !ts) {
        st = cross_entropy_rows(op, logits, target, NULL, logits->ndim == 2 ? logits->sizes[0] : 0, out);
        return jag__leave(st, out, 1);
    }
    if (!ls || !ts || ls->layout != JAG_JAGGED || ts->layout != JAG_JAGGED) {
        st = jag__error(JAG_EINVAL, "%s: logits and target must both be jagged nested tensors, or both dense", op);
        return jag__leave(st, NULL, 0);
    }
    if (!jag__nested_same_raggedness(ls, ts, true)) {
        st = jag__error(JAG_ESHAPE, "%s: logits and target have different raggedness", op);
        return jag__leave(st, NULL, 0);
    }
    jag_tensor *lv = NULL, *mask = NULL;
    int64_t count = 0;
    jag_value a[] = {jag__v_tensor(logits)};
    st = call(JAG_OP_values, a, 1, &lv); /* differentiable */
    if (!st) st = real_rows(ls, logits->dtype, &mask, &count);
    if (!st) st = cross_entropy_rows(op, lv, ts->values, mask, count, out);
    jag_release(lv), jag_release(mask);
    return jag__leave(st, out, 1);
}

jag_status jag_mse_loss(const jag_tensor *pred, const jag_tensor *target, jag_tensor **out) {
    const char *op = "jag_mse_loss";
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    jag_status st;
    if ((st = need(op, "pred", pred)) || (st = need(op, "target", target))) return st;
    nested_state *ps = jag__nested(pred);
    if ((ps != NULL) != (jag__nested(target) != NULL))
        return jag__error(JAG_EINVAL, "%s: pred and target must both be nested, or both dense", op);
    if (!ps) {
        if (pred->ndim != target->ndim || memcmp(pred->sizes, target->sizes, (size_t)pred->ndim * sizeof(int64_t))) {
            char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
            return jag__error(JAG_ESHAPE, "%s: pred has shape %s and target %s, expected the same shape", op,
                              jag__shape_str(pred->sizes, pred->ndim, a, sizeof a),
                              jag__shape_str(target->sizes, target->ndim, b, sizeof b));
        }
    } else if (ps->layout != JAG_JAGGED || jag__nested(target)->layout != JAG_JAGGED) {
        return jag__error(JAG_ENOTIMPL, "%s: not supported for nested tensors with the strided layout", op);
    }
    nested_state *ts = jag__nested(target);
    if (ps && !jag__nested_same_raggedness(ps, ts, true))
        return jag__error(JAG_ESHAPE, "%s: pred and target have different raggedness (j%lld and j%lld): offsets or lengths differ",
                          op, (long long)atomic_load(&ps->ragged_id), (long long)atomic_load(&ts->ragged_id));
    if (ps && (ps->ragged_idx != ts->ragged_idx || ps->values->ndim != ts->values->ndim ||
               memcmp(ps->values->sizes, ts->values->sizes, (size_t)ps->values->ndim * sizeof(int64_t)))) {
        char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: pred's values have shape %s and target's %s, expected the same shape and ragged dim", op,
                          jag__shape_str(ps->values->sizes, ps->values->ndim, a, sizeof a),
                          jag__shape_str(ts->values->sizes, ts->values->ndim, b, sizeof b));
    }
    jag__enter();
    /* nested: on the packed values (the differentiable values op), so that
     * the difference and its square are plain ops, not nested ones */
    jag_tensor *pv = NULL, *tv = NULL, *d = NULL, *sq = NULL, *mask = NULL;
    int64_t count = jag_numel(pred);
    st = JAG_OK;
    if (ps) {
        jag_value a[] = {jag__v_tensor(pred)}, b[] = {jag__v_tensor(target)};
        if (!(st = call(JAG_OP_values, a, 1, &pv))) st = call(JAG_OP_values, b, 1, &tv);
        if (!st) st = real_rows(ps, pred->dtype, &mask, &count);
        count *= jag__numel(ps->values->sizes + 1, ps->values->ndim - 1);
    }
    jag_value a[] = {jag__v_tensor(pv ? pv : pred), jag__v_tensor(tv ? tv : target), jag__v_double(-1.0)};
    if (!st) st = call(JAG_OP_add, a, 3, &d);
    jag_value b[] = {jag__v_tensor(d)};
    if (!st) st = call(JAG_OP_square, b, 1, &sq);
    if (!st) st = masked_mean(sq, mask, count, out);
    jag_release(pv), jag_release(tv), jag_release(d), jag_release(sq), jag_release(mask);
    return jag__leave(st, out, 1);
}
