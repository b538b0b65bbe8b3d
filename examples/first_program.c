/* first_program.c — the README's example, built and run by the tests. */
#include <jag.h>
#include <stdio.h>

int main(void) {
    int64_t shape[2] = {2, 3};
    jag_tensor *x = NULL, *w = NULL, *y = NULL;
    jag_scope_begin();                    /* releases what is made inside */
    if (jag_rand_normal(shape, 2, 0.0, 1.0, JAG_FLOAT32, NULL, &x) ||
        jag_ones((int64_t[]){3, 4}, 2, JAG_FLOAT32, &w) ||
        jag_mm(x, w, &y)) {
        fprintf(stderr, "error: %s\n", jag_last_error());
        jag_scope_end();
        return 1;
    }
    char text[512];
    jag_format(y, text, sizeof text);
    puts(text);                            /* tensor([[...]], dtype=float32, size=[2, 4]) */
    jag_tensor *bad = NULL;
    if (jag_mm(y, w, &bad) != JAG_OK)      /* (2, 4) @ (3, 4): a clear error */
        fprintf(stderr, "%s\n", jag_last_error());
    jag_scope_end();
    return 0;
}
