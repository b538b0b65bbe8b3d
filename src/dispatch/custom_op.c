/* custom_op.c — ops defined at run time from a schema, with user kernels per
 * key. They are rows of the same op table as built-in ops, so subclasses,
 * autograd and the tracer treat them alike. */
#include "dispatch.h"

#include <stdio.h>
#include <pthread.h>

struct jag_custom_op {
    char schema[512];
    jag_schema parsed; /* name, argument names and types, outputs */
    jag_kernel_fn cpu, meta, autograd;
    void *cpu_ctx, *meta_ctx, *autograd_ctx;
};

static pthread_mutex_t define_lock = PTHREAD_MUTEX_INITIALIZER;

const jag_schema *jag__custom_schema(const jag_op_info *info) { return info->custom ? &info->custom->parsed : NULL; }

jag_status jag_op_define(const char *schema, jag_op_id *out) {
    if (!schema || !out) return jag__error(JAG_EINVAL, "jag_op_define: arguments 'schema' and 'out' must not be NULL");
    if (strlen(schema) >= sizeof ((struct jag_custom_op *)0)->schema)
        return jag__error(JAG_EINVAL, "jag_op_define: schema is longer than 511 characters");
    struct jag_custom_op *op = calloc(1, sizeof *op);
    if (!op) return jag__error(JAG_ENOMEM, "jag_op_define: out of memory");
    strcpy(op->schema, schema);
    jag_status st = jag__schema_parse("jag_op_define", schema, true, &op->parsed);
    if (st) {
        free(op);
        return st;
    }
    pthread_mutex_lock(&define_lock);
    jag_op_id existing;
    int n = atomic_load(&jag__n_ops);
    if (jag_op_find(op->parsed.name, &existing) == JAG_OK) {
        st = jag__error(JAG_EINVAL, "jag_op_define: an op named '%s' is already defined", op->parsed.name);
    } else if (n == JAG_MAX_OPS) {
        st = jag__error(JAG_EINVAL, "jag_op_define: the op table is full (%d ops)", JAG_MAX_OPS);
    } else {
        jag_clear_error(); /* jag_op_find's "no op" message is not an error here */
        const char *name = op->parsed.name;
        jag__ops[n] = (jag_op_info){name, name, op->parsed.n_args, op->parsed.n_out, JAG_TAG_CUSTOM, NULL, NULL, op,
                                    op->schema, NULL};
        atomic_store_explicit(&jag__n_ops, n + 1, memory_order_release);
        *out = n;
    }
    pthread_mutex_unlock(&define_lock);
    if (st) free(op);
    return st;
}

jag_status jag_op_impl(jag_op_id id, const char *key, jag_kernel_fn fn, void *ctx) {
    if (!jag__op_valid(id)) return jag__error(JAG_EINVAL, "jag_op_impl: op id %d is not a defined op", id);
    struct jag_custom_op *op = jag__ops[id].custom;
    if (!op)
        return jag__error(JAG_EINVAL, "jag_op_impl: '%s' is a built-in op; only custom ops take kernels",
                          jag__ops[id].name);
    if (!key || !fn) return jag__error(JAG_EINVAL, "jag_op_impl: arguments 'key' and 'fn' must not be NULL");
    jag_kernel_fn *slot;
    void **ctx_slot;
    if (strcmp(key, "CPU") == 0) slot = &op->cpu, ctx_slot = &op->cpu_ctx;
    else if (strcmp(key, "Meta") == 0) slot = &op->meta, ctx_slot = &op->meta_ctx;
    else if (strcmp(key, "Autograd") == 0) slot = &op->autograd, ctx_slot = &op->autograd_ctx;
    else return jag__error(JAG_EINVAL, "jag_op_impl: argument 'key' is '%s', expected \"CPU\", \"Meta\" or \"Autograd\"", key);
    pthread_mutex_lock(&define_lock);
    jag_status st = JAG_OK;
    if (*slot) {
        st = jag__error(JAG_EINVAL, "jag_op_impl: '%s' already has a %s kernel", op->parsed.name, key);
    } else {
        *ctx_slot = ctx;
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&define_lock);
    return st;
}

const char *jag_op_schema(jag_op_id id) { return jag__op_valid(id) ? jag__ops[id].schema : NULL; }

const char *jag_op_doc(jag_op_id id) { return jag__op_valid(id) ? jag__ops[id].doc : NULL; }

/* ---- calls -------------------------------------------------------------- */

jag_status jag__custom_check_args(const jag_op_info *info, const jag_value *args, int nargs) {
    const struct jag_custom_op *op = info->custom;
    for (int i = 0; i < nargs; i++)
        if (!jag__arg_fits(op->parsed.types[i], args[i].kind))
            return jag__error(JAG_EINVAL, "%s: argument '%s' is %s, but the schema '%s' declares %s", op->parsed.name,
                              op->parsed.arg_names[i], jag__kind_name(args[i].kind), op->schema,
                              jag__arg_type_text(op->parsed.types[i]));
    return JAG_OK;
}

jag_status jag__custom_run(const jag_op_info *info, bool meta, const jag_value *args, int nargs, jag_tensor **outs) {
    const struct jag_custom_op *op = info->custom;
    jag_kernel_fn fn = __atomic_load_n(meta ? &op->meta : &op->cpu, __ATOMIC_ACQUIRE);
    if (!fn)
        return jag__error(JAG_ENOTIMPL, "%s: no %s kernel is registered (jag_op_impl(op, \"%s\", ...))", op->parsed.name,
                          meta ? "Meta" : "CPU", meta ? "Meta" : "CPU");
    jag_op_id id = (jag_op_id)(info - jag__ops);
    jag_status st = fn(id, args, nargs, outs, meta ? op->meta_ctx : op->cpu_ctx);
    if (st) return st;
    for (int i = 0; i < op->parsed.n_out; i++) {
        if (!outs[i]) return jag__error(JAG_EINTERNAL, "%s: the %s kernel returned no output %d", op->parsed.name,
                                        meta ? "Meta" : "CPU", i);
        if (meta && !jag__is_meta(outs[i]))
            return jag__error(JAG_EINVAL, "%s: the Meta kernel returned a tensor with data as output %d", op->parsed.name, i);
    }
    return JAG_OK;
}

bool jag__custom_has_autograd(const jag_op_info *info) {
    return __atomic_load_n(&info->custom->autograd, __ATOMIC_ACQUIRE) != NULL;
}

jag_status jag__custom_run_autograd(const jag_op_info *info, const jag_value *args, int nargs, jag_tensor **outs) {
    const struct jag_custom_op *op = info->custom;
    jag_op_id id = (jag_op_id)(info - jag__ops);
    jag_status st = op->autograd(id, args, nargs, outs, op->autograd_ctx);
    for (int i = 0; !st && i < op->parsed.n_out; i++)
        if (!outs[i]) st = jag__error(JAG_EINTERNAL, "%s: the Autograd kernel returned no output %d", op->parsed.name, i);
    if (st)
        for (int i = 0; i < op->parsed.n_out; i++) jag_release(outs[i]), outs[i] = NULL;
    return st;
}
