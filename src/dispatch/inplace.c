/* inplace.c — in-place ops: copy_, fill_, zero_, add_, sub_, mul_, div_,
 * clamp_, dense and nested (jagged: on the packed values, the structure
 * unchanged).
 *
 * The rules, PyTorch's where jag records no history:
 * - the destination must be a live, writable tensor with data (not
 *   read-only, not a meta tensor, no element reachable twice);
 * - every write bumps the version of the destination's storage, which
 *   autograd compares with the versions it saved (engine.c);
 * - with grad mode on, an in-place op on a tensor that requires grad, or
 *   with an operand that does, is refused: autograd does not record
 *   in-place ops (a leaf's update goes under jag_set_grad_enabled(false), as
 *   under torch.no_grad; elsewhere the out-of-place op does the same work);
 * - the out-of-place result must have the destination's shape, and its
 *   dtype must convert to the destination's without leaving its kind (a
 *   float result into an integer tensor is refused, as torch refuses it);
 * - nothing is written when a check fails.
 * A binary op whose result already has the destination's dtype and shape
 * runs its kernel straight into a contiguous destination
 * (jag__dispatch_into); otherwise the result is computed aside and copied
 * in. */
#include "dispatch.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */
#include "../subclass/nested.h"

/* Whether some element of t is reachable by two indices (stride 0 on a dim
 * of size > 1, or dims whose strides interleave). Conservative: sorted
 * strides must each clear the extent of the smaller dims. */
static bool has_internal_overlap(const jag_tensor *t) {
    if (jag_numel(t) == 0) return false; /* no elements, no overlap */
    int64_t st[JAG_MAX_DIMS], sz[JAG_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->sizes[d] > 1) st[n] = t->strides[d], sz[n++] = t->sizes[d];
    for (int i = 1; i < n; i++) /* insertion sort by stride */
        for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
            int64_t a = st[j]; st[j] = st[j - 1]; st[j - 1] = a;
            a = sz[j]; sz[j] = sz[j - 1]; sz[j - 1] = a;
        }
    int64_t extent = 0; /* largest offset reachable with the smaller dims */
    for (int i = 0; i < n; i++) {
        if (st[i] <= extent) return true;
        extent += st[i] * (sz[i] - 1);
    }
    return false;
}

/* The plain tensor an in-place op writes: dst itself, or a jagged nested
 * tensor's values. */
static jag_status write_target(const char *op, jag_tensor *dst, jag_tensor **target) {
    if (dst->subclass) {
        nested_state *s = jag__nested(dst);
        if (!s)
            return jag__error(JAG_ENOTIMPL, "%s: argument 'self' is a %s tensor; in-place ops take plain and nested tensors",
                              op, jag_subclass_name(dst->subclass));
        if (s->layout != JAG_JAGGED)
            return jag__error(JAG_ENOTIMPL, "%s: argument 'self' is a strided nested tensor; in-place ops take the jagged layout",
                              op);
        dst = s->values;
    }
    if (jag__is_meta(dst))
        return jag__error(JAG_EINVAL, "%s: argument 'self' has no data (a meta tensor, or a proxy while tracing)", op);
    if (jag__is_read_only(dst))
        return jag__error(JAG_EINVAL, "%s: argument 'self' is read-only (a loaded file's data, or a nested tensor's offsets or lengths); clone it first",
                          op);
    if (has_internal_overlap(dst))
        return jag__error(JAG_EINVAL, "%s: argument 'self' has overlapping elements (an expanded view); clone it first", op);
    *target = dst;
    return JAG_OK;
}

static jag_status refuse_grad(const char *op, const char *arg, const jag_tensor *t) {
    if (!t->grad_fn && strcmp(arg, "self") == 0)
        return jag__error(JAG_ESTATE,
                          "%s: argument 'self' is a leaf that requires grad; in-place ops on it are refused while grad "
                          "mode is on (update it with grad mode off: jag_set_grad_enabled(false), jag.no_grad() in Python)",
                          op);
    const char *by = jag__grad_fn_name(t);
    return jag__error(JAG_ESTATE,
                      "%s: argument '%s' requires grad%s%s%s; autograd does not record in-place ops: use the out-of-place "
                      "op, or turn grad mode off",
                      op, arg, by ? " (the output of " : "", by ? by : "", by ? ")" : "");
}

/* Every check an in-place op makes before it writes; *target is the plain
 * tensor it will write. */
static jag_status check_inplace(const char *op, jag_tensor *self, const jag_tensor *other, jag_tensor **target) {
    jag_status st = jag__check_live(op, "self", self);
    if (st) return st;
    if (other && (st = jag__check_live(op, "other", other))) return st;
    if (jag__trace_current && jag__tracing())
        return jag__error(JAG_ENOTIMPL, "%s: in-place ops cannot be traced; use the out-of-place op inside a traced or compiled function",
                          op);
    if (jag_is_grad_enabled()) {
        if (self->requires_grad) return refuse_grad(op, "self", self);
        if (other && other->requires_grad) return refuse_grad(op, "other", other);
    }
    return write_target(op, self, target);
}

/* Whether a value of dtype `from` may be written into `to` in place: same
 * kind or a lower one (bool < integer < float), as torch's can_cast. */
static bool castable(jag_dtype from, jag_dtype to) {
    int a = jag_dtype_is_floating(from) ? 2 : from == JAG_BOOL ? 0 : 1;
    int b = jag_dtype_is_floating(to) ? 2 : to == JAG_BOOL ? 0 : 1;
    return a <= b;
}

/* Write r (the out-of-place result) into target, after checking that it has
 * self's shape and a dtype self can hold. */
static jag_status write_result(const char *op, const jag_tensor *self, jag_tensor *target, const jag_tensor *r) {
    char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
    bool same = r->ndim == self->ndim && (r->subclass != NULL) == (self->subclass != NULL);
    for (int d = 0; same && d < self->ndim; d++) same = r->sizes[d] == self->sizes[d];
    const jag_tensor *src = r;
    if (same && self->subclass) { /* the same structure: values of one shape */
        nested_state *rs = jag__nested(r);
        src = rs ? rs->values : NULL;
        same = src && src->ndim == target->ndim;
        for (int d = 0; same && d < target->ndim; d++) same = src->sizes[d] == target->sizes[d];
    }
    if (!same)
        return jag__error(JAG_ESHAPE, "%s: the result has shape %s, expected self's shape %s (an operand may broadcast to self, not self to it)",
                          op, jag__shape_str(r->sizes, r->ndim, a, sizeof a),
                          jag__shape_str(self->sizes, self->ndim, b, sizeof b));
    if (!castable(r->dtype, self->dtype))
        return jag__error(JAG_EDTYPE, "%s: the result has dtype %s, which cannot be written into self's %s in place", op,
                          jag_dtype_name(r->dtype), jag_dtype_name(self->dtype));
    jag__copy_into(target, src);
    return JAG_OK;
}

/* self = op(self, args...) in place. args[0] is self. */
static jag_status run_inplace(const char *name, jag_op_id op, jag_tensor *self, const jag_tensor *other,
                              const jag_value *args, int nargs) {
    jag_tensor *target = NULL;
    jag_status st = check_inplace(name, self, other, &target);
    if (st) return st;
    jag__enter();
    bool prev = jag_set_grad_enabled(false);
    bool done = false;
    if (!self->subclass) st = jag__dispatch_into(op, name, args, nargs, target, &done);
    if (!st && !done) {
        jag_tensor *r = NULL;
        st = jag__dispatch(op, args, nargs, &r);
        if (!st) st = write_result(name, self, target, r);
        jag_release(r);
    }
    jag_set_grad_enabled(prev);
    if (!st) jag__bump_version(target);
    return jag__leave(st, NULL, 0);
}

jag_status jag_add_(jag_tensor *self, const jag_tensor *other, double alpha) {
    jag_value a[] = {jag__v_tensor(self), jag__v_tensor(other), jag__v_double(alpha)};
    if (!other) return jag__check_live("jag_add_", "other", other);
    return run_inplace("jag_add_", JAG_OP_add, self, other, a, 3);
}

jag_status jag_sub_(jag_tensor *self, const jag_tensor *other, double alpha) {
    jag_value a[] = {jag__v_tensor(self), jag__v_tensor(other), jag__v_double(-alpha)};
    if (!other) return jag__check_live("jag_sub_", "other", other);
    return run_inplace("jag_sub_", JAG_OP_add, self, other, a, 3);
}

jag_status jag_mul_(jag_tensor *self, const jag_tensor *other) {
    jag_value a[] = {jag__v_tensor(self), jag__v_tensor(other)};
    if (!other) return jag__check_live("jag_mul_", "other", other);
    return run_inplace("jag_mul_", JAG_OP_mul, self, other, a, 2);
}

jag_status jag_div_(jag_tensor *self, const jag_tensor *other) {
    jag_value a[] = {jag__v_tensor(self), jag__v_tensor(other)};
    if (!other) return jag__check_live("jag_div_", "other", other);
    return run_inplace("jag_div_", JAG_OP_div, self, other, a, 2);
}

jag_status jag_add_scalar_(jag_tensor *self, double value) {
    jag_value a[] = {jag__v_tensor(self), jag__v_double(value), jag__v_double(1.0)};
    return run_inplace("jag_add_scalar_", JAG_OP_add, self, NULL, a, 3);
}

jag_status jag_mul_scalar_(jag_tensor *self, double value) {
    jag_value a[] = {jag__v_tensor(self), jag__v_double(value)};
    return run_inplace("jag_mul_scalar_", JAG_OP_mul, self, NULL, a, 2);
}

jag_status jag_div_scalar_(jag_tensor *self, double value) {
    jag_value a[] = {jag__v_tensor(self), jag__v_double(value)};
    return run_inplace("jag_div_scalar_", JAG_OP_div, self, NULL, a, 2);
}

jag_status jag_clamp_(jag_tensor *self, double lo, double hi) {
    jag_value a[] = {jag__v_tensor(self), jag__v_double(lo), jag__v_double(hi)};
    return run_inplace("jag_clamp_", JAG_OP_clamp, self, NULL, a, 3);
}

jag_status jag_fill_(jag_tensor *self, double value) {
    jag_tensor *target = NULL;
    jag_status st = check_inplace("jag_fill_", self, NULL, &target);
    if (st) return st;
    jag__fill(target, value);
    jag__bump_version(target);
    return JAG_OK;
}

jag_status jag_zero_(jag_tensor *self) {
    jag_tensor *target = NULL;
    jag_status st = check_inplace("jag_zero_", self, NULL, &target);
    if (st) return st;
    jag__fill(target, 0.0);
    jag__bump_version(target);
    return JAG_OK;
}

/* The plain tensor copy_ reads for a nested destination: the values of a
 * nested src of the same raggedness, or a dense src that broadcasts over
 * the packed values (trailing dims only). */
static jag_status nested_copy_source(const char *op, jag_tensor *self, const jag_tensor *src, const jag_tensor **out) {
    nested_state *d = jag__nested(self), *s = jag__nested(src);
    if (src->subclass) {
        if (!s || s->layout != JAG_JAGGED || s->ragged_idx != d->ragged_idx || src->ndim != self->ndim ||
            !jag__nested_same_raggedness(d, s, true))
            return jag__error(JAG_ESHAPE, "%s: argument 'src' is not a jagged nested tensor of self's raggedness", op);
        *out = s->values;
        return JAG_OK;
    }
    /* the values hold the outer dims after the batch and ragged ones in
     * order, so a dense src lines up with them as with the outer shape only
     * when the ragged dim is dim 1 (or src has at most the last dim) */
    int most = d->ragged_idx == 1 || self->ndim - 2 < 1 ? self->ndim - 2 : 1;
    if (src->ndim > most)
        return jag__error(JAG_ESHAPE, "%s: argument 'src' is a dense %d-d tensor; into this nested tensor it must broadcast over the packed values (at most %d trailing dim%s)",
                          op, src->ndim, most, most == 1 ? "" : "s");
    *out = src;
    return JAG_OK;
}

jag_status jag_copy_(jag_tensor *dst, const jag_tensor *src) {
    const char *op = "jag_copy_";
    jag_status st = jag__check_live(op, "src", src);
    jag_tensor *target = NULL;
    if (!st) st = check_inplace(op, dst, src, &target);
    if (st) return st;
    if (jag__is_meta(src) || (!src->subclass && !src->storage))
        return jag__error(JAG_EINVAL, "%s: argument 'src' has no data (a meta tensor)", op);
    if (dst->subclass && (st = nested_copy_source(op, dst, src, &src))) return st;
    if (src->subclass) return jag__require_plain(op, "src", src);
    int64_t shape[JAG_MAX_DIMS];
    int n;
    if ((st = jag__broadcast_shapes(op, target->sizes, target->ndim, src->sizes, src->ndim, shape, &n))) return st;
    if (n != target->ndim || memcmp(shape, target->sizes, (size_t)n * sizeof *shape) != 0) {
        char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument 'src' of shape %s does not broadcast to dst's shape %s", op,
                          jag__shape_str(src->sizes, src->ndim, a, sizeof a),
                          jag__shape_str(target->sizes, target->ndim, b, sizeof b));
    }
    jag__enter();
    jag_tensor *tmp = NULL;
    if (jag_shares_storage(target, src) && jag_numel(target) > 0) {
        /* src may overlap dst: read it out first */
        jag_value a[] = {jag__v_tensor(src)};
        if ((st = jag__dispatch(JAG_OP_clone, a, 1, &tmp))) return jag__leave(st, NULL, 0);
        src = tmp;
    }
    jag__copy_into(target, src);
    jag__bump_version(target);
    jag_release(tmp);
    return jag__leave(JAG_OK, NULL, 0);
}

jag_status jag__copy_part(const char *op, jag_tensor *dst, const jag_tensor *src) {
    jag_value a[] = {jag__v_tensor(src)};
    bool done = false;
    jag_status st = jag__dispatch_into(JAG_OP_clone, op, a, 1, dst, &done);
    if (st || done) return st;
    bool prev = jag_set_grad_enabled(false);
    st = jag_copy_(dst, src);
    jag_set_grad_enabled(prev);
    return st;
}
