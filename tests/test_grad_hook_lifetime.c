/*
 * test_grad_hook_lifetime.c — a post-accumulate-grad hook belongs to its
 * leaf (as torch keeps hooks on the tensor): releasing the leaf's last
 * reference frees it and its hooks, running each hook's free_ctx exactly
 * once, whether or not the hook was removed first. Under AddressSanitizer
 * and LeakSanitizer a leaf or a context that stayed alive is a leak; the
 * harness counts live tensor headers after every test.
 */
#include "test.h"

/* A hook's context: how often the hook ran and its free_ctx ran, the order
 * of the free_ctx calls, and optionally a tensor to release when freed. */
typedef struct hook_ctx {
    int calls, freed;
    int tag;
    int *free_order; /* shared: tags in the order free_ctx ran */
    int *n_freed;
    jag_tensor *release_on_free;
} hook_ctx;

static jag_status count_hook(jag_tensor *leaf, void *ctx) {
    (void)leaf;
    ((hook_ctx *)ctx)->calls++;
    return JAG_OK;
}

static void count_free(void *ctx) {
    hook_ctx *h = ctx;
    h->freed++;
    if (h->free_order) h->free_order[(*h->n_freed)++] = h->tag;
    jag_release(h->release_on_free);
    h->release_on_free = NULL;
}

static jag_tensor *leaf_of(double value) {
    int64_t two = 2;
    double v[2] = {value, -value};
    jag_tensor *t = t_from(v, &two, 1, JAG_FLOAT64);
    jag_set_requires_grad(t, true);
    return t;
}

/* A heap context freed by free(): LeakSanitizer reports it if the hook
 * outlives its released leaf. */
static void test_released_leaf_frees_its_hook(void) {
    TEST_BEGIN();
    jag_tensor *x = leaf_of(1.5);
    int *ctx = malloc(64 * sizeof *ctx);
    int64_t id = 0;
    CHECK_OK(jag_register_post_accumulate_grad_hook(x, count_hook, ctx, free, &id));
    CHECK_OK(jag_release(x)); /* the hook was never removed */
    CHECK_ERR(jag_remove_post_accumulate_grad_hook(id), JAG_EINVAL, "not a registered hook");
}

static void test_free_ctx_runs_exactly_once(void) {
    TEST_BEGIN();
    int64_t id = 0;
    /* removed, then the leaf released: once, at the removal */
    hook_ctx a = {0};
    jag_tensor *x = leaf_of(1.0);
    CHECK_OK(jag_register_post_accumulate_grad_hook(x, count_hook, &a, count_free, &id));
    CHECK_OK(jag_remove_post_accumulate_grad_hook(id));
    CHECK(a.freed == 1);
    CHECK_OK(jag_release(x));
    CHECK(a.freed == 1);
    /* the leaf released without a removal: once, at the release; a later
     * removal is refused and frees nothing */
    hook_ctx b = {0};
    x = leaf_of(2.0);
    CHECK_OK(jag_register_post_accumulate_grad_hook(x, count_hook, &b, count_free, &id));
    jag_tensor *extra = jag_retain(x);
    CHECK_OK(jag_release(x));
    CHECK(b.freed == 0); /* a reference is left */
    CHECK_OK(jag_release(extra));
    CHECK(b.freed == 1);
    CHECK_ERR(jag_remove_post_accumulate_grad_hook(id), JAG_EINVAL, "its leaf was released");
    CHECK(b.freed == 1 && b.calls == 0);
}

/* Several hooks on one leaf go with it, freed in registration order; a
 * free_ctx may release another hooked leaf (whose hooks go then too). */
static void test_hooks_go_with_their_leaf_in_order(void) {
    TEST_BEGIN();
    int order[4], n = 0;
    hook_ctx h1 = {.tag = 1, .free_order = order, .n_freed = &n};
    hook_ctx h2 = {.tag = 2, .free_order = order, .n_freed = &n};
    hook_ctx other = {.tag = 3, .free_order = order, .n_freed = &n};
    jag_tensor *x = leaf_of(1.0), *y = leaf_of(3.0);
    int64_t id = 0, id_other = 0;
    CHECK_OK(jag_register_post_accumulate_grad_hook(y, count_hook, &other, count_free, &id_other));
    CHECK_OK(jag_register_post_accumulate_grad_hook(x, count_hook, &h1, count_free, &id));
    CHECK_OK(jag_register_post_accumulate_grad_hook(x, count_hook, &h2, count_free, &id));
    h2.release_on_free = y; /* y's last reference */
    CHECK_OK(jag_release(x));
    CHECK(n == 3 && order[0] == 1 && order[1] == 2 && order[2] == 3);
    CHECK(h1.freed == 1 && h2.freed == 1 && other.freed == 1);
    CHECK_ERR(jag_remove_post_accumulate_grad_hook(id_other), JAG_EINVAL, "not a registered hook");
}

/* A backward's graph holds the leaves it reaches: a leaf whose user
 * reference is gone still gets its gradient and runs its hook, and goes
 * (with the hook) when the graph does. */
static void test_graph_keeps_a_hooked_leaf_until_freed(void) {
    TEST_BEGIN();
    hook_ctx h = {0};
    jag_tensor *x = leaf_of(0.25), *y = NULL, *loss = NULL;
    int64_t id = 0;
    CHECK_OK(jag_register_post_accumulate_grad_hook(x, count_hook, &h, count_free, &id));
    CHECK_OK(jag_mul_scalar(x, 2.0, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &loss));
    CHECK_OK(jag_release(x));
    CHECK(h.freed == 0);
    CHECK_OK(jag_backward(loss, NULL, false));
    CHECK(h.calls == 1);
    CHECK_OK(jag_release(y));
    CHECK_OK(jag_release(loss));
    CHECK(h.freed == 1);
}

/* Turning requires_grad off keeps the hooks (as torch: they stay on the
 * tensor and do not run while it takes no gradient); the release still
 * drops them, and a view or alias of the leaf going first drops nothing. */
static void test_requires_grad_off_keeps_hooks_until_release(void) {
    TEST_BEGIN();
    hook_ctx h = {0};
    jag_tensor *x = leaf_of(1.0), *v = NULL, *d = NULL;
    int64_t id = 0;
    CHECK_OK(jag_register_post_accumulate_grad_hook(x, count_hook, &h, count_free, &id));
    CHECK_OK(jag_set_requires_grad(x, false));
    CHECK(!jag_requires_grad(x) && h.freed == 0);
    int64_t one[1] = {2};
    CHECK_OK(jag_view(x, one, 1, &v));
    CHECK_OK(jag_detach(x, &d));
    CHECK_OK(jag_release(v));
    CHECK_OK(jag_release(d));
    CHECK(h.freed == 0); /* the hook belongs to x alone */
    CHECK_OK(jag_release(x));
    CHECK(h.freed == 1);
    CHECK_ERR(jag_remove_post_accumulate_grad_hook(id), JAG_EINVAL, "its leaf was released");
}

TEST_MAIN(test_released_leaf_frees_its_hook, test_free_ctx_runs_exactly_once, test_hooks_go_with_their_leaf_in_order,
          test_graph_keeps_a_hooked_leaf_until_freed, test_requires_grad_off_keeps_hooks_until_release)
