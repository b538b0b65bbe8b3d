/* derivatives.c — PLACEHOLDER until the derivative rules land: no op has a
 * derivative yet. */
#include "autograd.h"

const jag_derivative_fn jag__derivatives[JAG_OP_BUILTIN_COUNT] = {0};

jag_status jag__sum_to(const jag_tensor *g, const jag_tensor *like, jag_tensor **out) {
    (void)g, (void)like, (void)out;
    return jag__error(JAG_ENOTIMPL, "jag__sum_to: not written yet");
}
