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
