/* nested_autograd.c — the README's nested example: a jagged batch, one GEMM
 * over its packed rows, and a nested gradient. Built and run by the tests. */
#include <jag.h>
#include <stdio.h>

int main(void) {
    jag_tensor *values, *offsets, *nt, *w, *h, *y, *flat, *total, *grad;
    jag_scope_begin();
    /* three sentences of 2, 4 and 3 tokens, 2 features each: values (9, 2) */
    if (jag_rand_normal((int64_t[]){9, 2}, 2, 0.0, 1.0, JAG_FLOAT32, NULL, &values) ||
        jag_from_data((int64_t[]){0, 2, 6, 9}, (int64_t[]){4}, 1, JAG_INT64, &offsets) ||
        jag_nested_from_jagged(values, offsets, NULL, &nt) || /* (3, j0, 2), no copy */
        jag_set_requires_grad(nt, true) ||
        jag_ones((int64_t[]){2, 2}, 2, JAG_FLOAT32, &w) ||
        jag_mm(nt, w, &h) ||                 /* one GEMM over the 9 packed rows */
        jag_silu(h, &y) ||                   /* pointwise on the packed values */
        jag_nested_values(y, &flat) ||       /* nested -> values, differentiable */
        jag_sum(flat, NULL, 0, false, &total) ||
        jag_backward(total, NULL, false) ||
        jag_get_grad(nt, &grad)) {           /* nested, around the same offsets */
        fprintf(stderr, "error: %s\n", jag_last_error());
        jag_scope_end();
        return 1;
    }
    char text[2048];
    jag_format(grad, text, sizeof text);
    puts(text);
    jag_scope_end();
    return 0;
}
