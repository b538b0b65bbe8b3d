/* scope.c — API depth and scopes that release what a block of C code made. */
#include "internal.h"

typedef struct scope {
    jag_tensor **items;
    size_t n, cap;
} scope;

/* Each thread has its own stack of scopes and its own API depth. Scopes
 * below `floor` belong to a caller that is tracing a function: the function
 * runs as code at the top level with no scope open (jag__scope_isolate). */
static JAG_TLS scope *scopes;
static JAG_TLS size_t n_scopes, cap_scopes, floor_scopes;
static JAG_TLS int api_depth;

void jag__enter(void) { api_depth++; }

static bool scope_push(scope *s, jag_tensor *t) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        jag_tensor **items = realloc(s->items, cap * sizeof *items);
        if (!items) return false;
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return true;
}

jag_status jag__leave(jag_status status, jag_tensor **outs, int n) {
    JAG_ASSERT(api_depth > 0);
    api_depth--;
    if (status != JAG_OK || api_depth != 0 || n_scopes == floor_scopes) return status;
    scope *s = &scopes[n_scopes - 1];
    for (int i = 0; i < n; i++) {
        if (!outs[i]) continue;
        if (!scope_push(s, outs[i])) {
            for (int j = 0; j < n; j++) {
                if (j >= i) jag_release(outs[j]);
                outs[j] = NULL;
            }
            /* Outputs recorded before the failure stay recorded: the scope
             * releases them. The caller sees a failed call and NULL outputs. */
            return jag__error(JAG_ENOMEM, "jag_scope: out of memory recording a tensor");
        }
    }
    return status;
}

jag_status jag_scope_begin(void) {
    if (n_scopes == cap_scopes) {
        size_t cap = cap_scopes ? cap_scopes * 2 : 8;
        scope *grown = realloc(scopes, cap * sizeof *grown);
        if (!grown) return jag__error(JAG_ENOMEM, "jag_scope_begin: out of memory");
        scopes = grown;
        cap_scopes = cap;
    }
    scopes[n_scopes++] = (scope){0};
    return JAG_OK;
}

jag_tensor *jag_scope_keep(jag_tensor *t) {
    if (!t || n_scopes == floor_scopes) return t;
    scope *s = &scopes[n_scopes - 1];
    for (size_t i = s->n; i-- > 0;) {
        if (s->items[i] != t) continue;
        s->items[i] = s->items[--s->n];
        if (n_scopes - 1 > floor_scopes && !scope_push(&scopes[n_scopes - 2], t)) {
            /* Could not record in the parent: hand it to the caller instead,
             * which is what keep promises at the outermost level anyway. */
        }
        break;
    }
    return t;
}

jag_status jag_scope_end(void) {
    if (n_scopes == floor_scopes) {
        if (n_scopes > 0)
            return jag__error(JAG_ESTATE, "jag_scope_end: no scope is open in the traced function (the caller's scopes are the caller's to close)");
        return jag__error(JAG_ESTATE, "jag_scope_end: no scope is open");
    }
    scope *s = &scopes[--n_scopes];
    for (size_t i = 0; i < s->n; i++) jag_release(s->items[i]);
    free(s->items);
    if (n_scopes == 0) {
        free(scopes);
        scopes = NULL;
        cap_scopes = 0;
    }
    return JAG_OK;
}

/* ---- isolation for traced functions ---------------------------------------- */

/* A traced function runs as code at the top level with no scope open: its
 * ops record in its own scopes, never in the caller's (whose scope would
 * otherwise release the function's tensors a second time), whatever the
 * caller's API depth. jag__scope_isolate saves the caller's floor and depth
 * and starts a frame; jag__scope_open_in_frame counts the scopes the function
 * opened and left open; jag__scope_restore (with none left open) returns to
 * the caller's. Declared in internal.h; the tracer calls them. */

void jag__scope_isolate(size_t *saved_floor, int *saved_depth) {
    *saved_floor = floor_scopes;
    *saved_depth = api_depth;
    floor_scopes = n_scopes;
    api_depth = 0;
}

int jag__scope_open_in_frame(void) { return (int)(n_scopes - floor_scopes); }

void jag__scope_restore(size_t saved_floor, int saved_depth) {
    JAG_ASSERT(n_scopes == floor_scopes && api_depth == 0);
    floor_scopes = saved_floor;
    api_depth = saved_depth;
}
