/* derivatives_nested.c — derivative rules of the bridge between a jagged
 * nested tensor and its values (the seed's ViewBufferFromJagged, both ways).
 * They need the nested tensor's internals, so they live apart from the
 * rules written with public ops only. */
#include "autograd.h"
#include "../subclass/nested.h"

/* values(nt): the gradient of nt is the values' gradient wrapped with nt's
 * structure — the same offsets object. */
jag_status jag__d_values(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    nested_state *s = jag__nested(c->args[0].u.t);
    if (!s) return jag__error(JAG_EINTERNAL, "%s: backward without a nested input", c->name);
    return jag__nested_rewrap_jagged(s, grad_out[0], &grad_in[0]);
}

/* nested_from_jagged(values, offsets, lengths): the values' gradient is the
 * packed values of the nested gradient. */
jag_status jag__d_nested_from_jagged(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    if (!c->needs[0]) return JAG_OK;
    nested_state *g = jag__nested(grad_out[0]);
    if (!g || g->layout != JAG_JAGGED)
        return jag__error(JAG_EINTERNAL, "%s: backward got a gradient that is not a jagged nested tensor", c->name);
    const jag_tensor *v = g->values;
    grad_in[0] = jag__tensor_view(v, v->sizes, v->strides, v->ndim, v->offset);
    return grad_in[0] ? JAG_OK : jag_last_status();
}

/* to_padded(nt): each component's gradient is its part of the padded
 * gradient; padding gets none. The result has nt's structure (zeros_like
 * keeps the offsets object or the size tables), holes included (zero). */
jag_status jag__d_to_padded(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    const jag_tensor *x = c->args[0].u.t, *g = grad_out[0];
    nested_state *s = jag__nested(x);
    if (!s) return jag__error(JAG_EINTERNAL, "%s: backward without a nested input", c->name);
    jag_tensor *z = NULL;
    jag_status st = jag_zeros_like(x, &z);
    if (st) return st;
    nested_state *zs = jag__nested(z);
    jag_tensor **comps = calloc((size_t)(zs->batch ? zs->batch : 1), sizeof *comps);
    if (!comps) {
        jag_release(z);
        return jag__error(JAG_ENOMEM, "%s: out of memory", c->name);
    }
    jag_tensor *gc = NULL;
    st = jag_contiguous(g, &gc);
    if (!st) st = jag__nested_unbind(zs, comps);
    for (int64_t b = 0; !st && b < zs->batch; b++) {
        if (jag_numel(comps[b]) == 0) continue;
        jag_tensor *src = jag__tensor_view(gc, comps[b]->sizes, gc->strides + 1, gc->ndim - 1, gc->offset + b * gc->strides[0]);
        if (!src) {
            st = jag_last_status();
            break;
        }
        jag__copy_into(comps[b], src);
        jag_release(src);
    }
    if (!st)
        for (int64_t b = 0; b < zs->batch; b++) jag_release(comps[b]);
    free(comps);
    jag_release(gc);
    if (st) {
        jag_release(z);
        return st;
    }
    grad_in[0] = z;
    return JAG_OK;
}

/* from_padded(padded, lengths): the padded gradient is the nested gradient
 * padded with zeros to padded's shape. */
jag_status jag__d_from_padded(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    if (!c->needs[0]) return JAG_OK;
    const jag_tensor *padded = c->args[0].u.t;
    return jag__nested_to_padded(grad_out[0], 0.0, padded->sizes, padded->ndim, &grad_in[0]);
}
