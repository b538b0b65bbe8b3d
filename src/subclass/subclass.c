/* subclass.c — the wrapper-subclass protocol: the class registry, outer
 * tensors, decompositions per op, and the SUBCLASS key's handler lookup. */
#include "../dispatch/dispatch.h"
#include "nested.h"

#include <pthread.h>

typedef struct decomp {
    jag_subclass_handler_fn fn;
    void *ctx;
} decomp;

struct jag_subclass {
    char name[64];
    jag_subclass_def def;
    decomp decomps[JAG_MAX_OPS]; /* by op id: a load and a test per call */
};

#define JAG_MAX_SUBCLASSES 64
static jag_subclass *classes[JAG_MAX_SUBCLASSES];
static int n_classes;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static const jag_subclass *find_registered(const char *name) {
    pthread_mutex_lock(&registry_lock);
    const jag_subclass *found = NULL;
    for (int i = 0; i < n_classes && !found; i++)
        if (strcmp(classes[i]->name, name) == 0) found = classes[i];
    pthread_mutex_unlock(&registry_lock);
    return found;
}

const jag_subclass *jag_subclass_find(const char *name) {
    if (!name) return NULL;
    jag__register_builtin_subclasses();
    return find_registered(name);
}

/* Set while a built-in class registers itself (it must not recurse into
 * registering the built-ins). */
static JAG_TLS bool registering_builtin;

bool jag__set_registering_builtin(bool on) {
    bool prev = registering_builtin;
    registering_builtin = on;
    return prev;
}

jag_status jag_subclass_register(const jag_subclass_def *def, const jag_subclass **out) {
    const char *op = "jag_subclass_register";
    /* the built-in classes take their names first, so that a user class
     * cannot claim "nested" before jag needs it */
    if (!registering_builtin) jag__register_builtin_subclasses();
    if (!def || !out) return jag__error(JAG_EINVAL, "%s: arguments 'def' and 'out' must not be NULL", op);
    if (!def->name || !def->name[0] || strlen(def->name) >= sizeof ((jag_subclass *)0)->name)
        return jag__error(JAG_EINVAL, "%s: argument 'def.name' must be 1..63 characters", op);
    if (!def->flatten || !def->unflatten || !def->dispatch)
        return jag__error(JAG_EINVAL, "%s: class '%s' needs flatten, unflatten and dispatch", op, def->name);
    jag_subclass *cls = calloc(1, sizeof *cls);
    if (!cls) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    strcpy(cls->name, def->name);
    cls->def = *def;
    cls->def.name = cls->name;
    pthread_mutex_lock(&registry_lock);
    jag_status st = JAG_OK;
    for (int i = 0; i < n_classes && !st; i++)
        if (strcmp(classes[i]->name, def->name) == 0)
            st = jag__error(JAG_EINVAL, "%s: a class named '%s' is already registered", op, def->name);
    if (!st && n_classes == JAG_MAX_SUBCLASSES)
        st = jag__error(JAG_EINVAL, "%s: at most %d classes may be registered", op, JAG_MAX_SUBCLASSES);
    if (!st) classes[n_classes++] = cls;
    pthread_mutex_unlock(&registry_lock);
    if (st) {
        free(cls);
        return st;
    }
    *out = cls;
    return JAG_OK;
}

const char *jag_subclass_name(const jag_subclass *cls) { return cls ? cls->name : "plain"; }

jag_status jag_subclass_register_decomp(const jag_subclass *cls, jag_op_id op, jag_subclass_handler_fn fn,
                                        void *ctx) {
    if (!cls || !fn) return jag__error(JAG_EINVAL, "jag_subclass_register_decomp: arguments 'cls' and 'fn' must not be NULL");
    if (!jag__op_valid(op)) return jag__error(JAG_EINVAL, "jag_subclass_register_decomp: op id %d is not a defined op", op);
    jag_subclass *c = (jag_subclass *)cls;
    /* ctx before fn, so that a concurrent caller that sees fn sees its ctx */
    c->decomps[op].ctx = ctx;
    __atomic_store_n(&c->decomps[op].fn, fn, __ATOMIC_RELEASE);
    return JAG_OK;
}

jag_status jag__subclass_run(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                             jag_tensor **outs) {
    jag_subclass_handler_fn fn = __atomic_load_n(&cls->decomps[op].fn, __ATOMIC_ACQUIRE);
    if (fn) return fn(cls, op, args, nargs, outs, cls->decomps[op].ctx);
    return cls->def.dispatch(cls, op, args, nargs, outs, cls->def.dispatch_ctx);
}

jag_status jag_subclass_wrap(const jag_subclass *cls, void *state, jag_dtype dtype, const int64_t *sizes, int ndim,
                             jag_tensor **out) {
    const char *op = "jag_subclass_wrap";
    jag_status st = JAG_OK;
    if (!cls || !out) st = jag__error(JAG_EINVAL, "%s: arguments 'cls' and 'out' must not be NULL", op);
    else if (!jag__dtype_valid(dtype)) st = jag__error(JAG_EDTYPE, "%s: argument 'dtype' is invalid", op);
    else if (ndim < 0 || ndim > JAG_MAX_DIMS || (ndim && !sizes))
        st = jag__error(JAG_EINVAL, "%s: argument 'ndim' is %d, expected 0..%d sizes", op, ndim, JAG_MAX_DIMS);
    for (int d = 0; st == JAG_OK && d < ndim; d++)
        if (sizes[d] < -1) st = jag__error(JAG_EINVAL, "%s: size %lld at dim %d, expected >= 0 or -1 (ragged)", op,
                                           (long long)sizes[d], d);
    if (st) {
        if (cls && cls->def.destroy_state && state) cls->def.destroy_state(state);
        return st;
    }
    jag__enter();
    st = jag__subclass_wrap_unchecked(cls, state, dtype, sizes, ndim, out);
    return jag__leave(st, out, st == JAG_OK);
}

jag_status jag__subclass_wrap_unchecked(const jag_subclass *cls, void *state, jag_dtype dtype, const int64_t *sizes,
                                        int ndim, jag_tensor **out) {
    jag_tensor *t = jag__tensor_wrap(NULL, dtype, sizes, NULL, ndim, 0);
    if (!t) {
        if (cls->def.destroy_state && state) cls->def.destroy_state(state);
        return jag_last_status();
    }
    /* Strides mean nothing for a wrapper; keep them row-major over known sizes. */
    t->subclass = cls;
    t->state = state;
    /* made by the traced function itself: a subclass_ctor symbol */
    if (jag__trace_current && jag__trace_wants_ctor()) {
        jag_status st = jag__trace_on_wrap(&t);
        if (st) return st;
    }
    *out = t;
    return JAG_OK;
}

void jag__subclass_destroy_state(jag_tensor *t) {
    if (t->subclass->def.destroy_state && t->state) t->subclass->def.destroy_state(t->state);
    t->state = NULL;
}

const jag_subclass *jag_tensor_subclass(const jag_tensor *t) { return t ? t->subclass : NULL; }
void *jag_subclass_state(const jag_tensor *t) { return t ? t->state : NULL; }

jag_status jag_subclass_flatten(const jag_tensor *t, jag_tensor **inner, int *n_inner, jag_subclass_meta *meta) {
    if (!t || !t->subclass) return jag__error(JAG_EINVAL, "jag_subclass_flatten: argument 't' is not a subclass tensor");
    if (!inner || !n_inner || !meta)
        return jag__error(JAG_EINVAL, "jag_subclass_flatten: arguments 'inner', 'n_inner', 'meta' must not be NULL");
    jag__enter();
    jag_tensor *got[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta m = {0};
    jag_status st = t->subclass->def.flatten(t, got, &n, &m);
    if (st == JAG_OK && (n < 0 || n > JAG_SUBCLASS_MAX_INNER))
        st = jag__error(JAG_EINTERNAL, "jag_subclass_flatten: class '%s' returned %d inner tensors", t->subclass->name, n);
    if (st) {
        for (int i = 0; i < JAG_SUBCLASS_MAX_INNER; i++) jag_release(got[i]);
        return jag__leave(st, NULL, 0);
    }
    for (int i = 0; i < n; i++) inner[i] = got[i];
    *n_inner = n;
    *meta = m;
    return jag__leave(JAG_OK, inner, n);
}

jag_status jag_subclass_unflatten(const jag_subclass *cls, jag_tensor *const *inner, int n_inner,
                                  const jag_subclass_meta *meta, jag_tensor **out) {
    if (!cls || !meta || !out || (n_inner > 0 && !inner))
        return jag__error(JAG_EINVAL, "jag_subclass_unflatten: arguments must not be NULL");
    jag__enter();
    jag_status st = cls->def.unflatten(cls, inner, n_inner, meta, out);
    return jag__leave(st, out, st == JAG_OK ? 1 : 0);
}

size_t (*jag__subclass_format_fn(const jag_subclass *cls))(const jag_tensor *, char *, size_t) {
    return cls->def.format;
}

const jag_subclass *jag__nested_class(void);
const jag_subclass *jag__scaled_class(void);

void jag__register_builtin_subclasses(void) {
    /* each registers once (pthread_once); find() is then never racing them */
    bool prev = registering_builtin;
    registering_builtin = true;
    (void)jag__nested_class();
    (void)jag__scaled_class();
    registering_builtin = prev;
}

jag_status jag__subclass_alias(const jag_tensor *t, jag_tensor **out) {
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta meta = {0};
    jag_status st = t->subclass->def.flatten(t, inner, &n, &meta);
    if (!st) st = t->subclass->def.unflatten(t->subclass, inner, n, &meta, out);
    for (int i = 0; i < JAG_SUBCLASS_MAX_INNER; i++) jag_release(inner[i]);
    return st;
}

int64_t jag__subclass_version(const jag_tensor *t) {
    const nested_state *s = jag__nested(t);
    if (s) /* its offsets and size tables are frozen: only the data can change */
        return jag__tensor_version(s->layout == JAG_JAGGED ? s->values : s->buffer);
    jag_tensor *inner[JAG_SUBCLASS_MAX_INNER] = {0};
    int n = 0;
    jag_subclass_meta m = {0};
    if (t->subclass->def.flatten(t, inner, &n, &m)) return -2; /* cannot tell: differs from any saved version */
    int64_t v = 0;
    for (int i = 0; i < n && i < JAG_SUBCLASS_MAX_INNER; i++) {
        v += jag__tensor_version(inner[i]);
        jag_release(inner[i]);
    }
    return v;
}
