/* custom_op.c — ops defined at run time from a schema, with user kernels per
 * key. They are rows of the same op table as built-in ops, so subclasses,
 * autograd and the tracer treat them alike. */
#include "dispatch.h"

#include <ctype.h>
#include <stdio.h>
#include <pthread.h>

#define MAX_ARGS 16

typedef enum { ARG_TENSOR, ARG_OPT_TENSOR, ARG_INT, ARG_FLOAT, ARG_BOOL, ARG_INTS, ARG_TENSORS } arg_type;

static const struct {
    const char *text;
    arg_type type;
} arg_types[] = {
    {"Tensor?", ARG_OPT_TENSOR}, {"Tensor[]", ARG_TENSORS}, {"Tensor", ARG_TENSOR}, {"int[]", ARG_INTS},
    {"int", ARG_INT},            {"float", ARG_FLOAT},      {"bool", ARG_BOOL},
};

struct jag_custom_op {
    char schema[512];
    char name[132]; /* ns (63) + "::" + name (63) + NUL */
    int n_args, n_out;
    arg_type types[MAX_ARGS];
    char arg_names[MAX_ARGS][32];
    jag_kernel_fn cpu, meta, autograd;
    void *cpu_ctx, *meta_ctx, *autograd_ctx;
};

static pthread_mutex_t define_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- schema parsing ----------------------------------------------------- */

typedef struct {
    const char *text, *p;
} parser;

static void skip_space(parser *ps) {
    while (isspace((unsigned char)*ps->p)) ps->p++;
}

static jag_status parse_error(parser *ps, const char *what) {
    return jag__error(JAG_EINVAL, "jag_op_define: schema '%s': %s at column %d", ps->text, what,
                      (int)(ps->p - ps->text) + 1);
}

static bool accept(parser *ps, const char *tok) {
    skip_space(ps);
    size_t n = strlen(tok);
    if (strncmp(ps->p, tok, n) != 0) return false;
    ps->p += n;
    return true;
}

/* An identifier [A-Za-z_][A-Za-z0-9_]* into buf. */
static bool parse_ident(parser *ps, char *buf, size_t cap) {
    skip_space(ps);
    size_t n = 0;
    if (!isalpha((unsigned char)*ps->p) && *ps->p != '_') return false;
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_') {
        if (n + 1 >= cap) return false;
        buf[n++] = *ps->p++;
    }
    buf[n] = '\0';
    return true;
}

static jag_status parse_schema(const char *schema, struct jag_custom_op *op) {
    parser ps = {schema, schema};
    char ns[64], name[64];
    if (!parse_ident(&ps, ns, sizeof ns)) return parse_error(&ps, "expected a namespace");
    if (!accept(&ps, "::")) return parse_error(&ps, "expected '::' after the namespace (ops are namespaced: ns::name)");
    if (!parse_ident(&ps, name, sizeof name)) return parse_error(&ps, "expected the op's name");
    snprintf(op->name, sizeof op->name, "%s::%s", ns, name);
    if (!accept(&ps, "(")) return parse_error(&ps, "expected '('");
    op->n_args = 0;
    skip_space(&ps);
    if (!accept(&ps, ")")) {
        for (;;) {
            if (op->n_args == MAX_ARGS) return parse_error(&ps, "more than 16 arguments");
            bool found = false;
            skip_space(&ps);
            for (size_t i = 0; i < sizeof arg_types / sizeof arg_types[0] && !found; i++) {
                size_t n = strlen(arg_types[i].text);
                if (strncmp(ps.p, arg_types[i].text, n) == 0 && !isalnum((unsigned char)ps.p[n])) {
                    op->types[op->n_args] = arg_types[i].type;
                    ps.p += n;
                    found = true;
                }
            }
            if (!found) return parse_error(&ps, "expected an argument type (Tensor, Tensor?, Tensor[], int, int[], float, bool)");
            if (!parse_ident(&ps, op->arg_names[op->n_args], sizeof op->arg_names[0]))
                return parse_error(&ps, "expected an argument name");
            for (int i = 0; i < op->n_args; i++)
                if (strcmp(op->arg_names[i], op->arg_names[op->n_args]) == 0)
                    return parse_error(&ps, "duplicate argument name");
            op->n_args++;
            skip_space(&ps);
            if (*ps.p == '=') return parse_error(&ps, "default values are not supported; pass every argument");
            if (accept(&ps, ")")) break;
            if (!accept(&ps, ",")) return parse_error(&ps, "expected ',' or ')'");
        }
    }
    if (!accept(&ps, "->")) return parse_error(&ps, "expected '->' and the return type");
    if (accept(&ps, "(")) {
        op->n_out = 0;
        for (;;) {
            if (!accept(&ps, "Tensor")) return parse_error(&ps, "expected 'Tensor' in the return tuple");
            if (++op->n_out > 4) return parse_error(&ps, "more than 4 outputs");
            if (accept(&ps, ")")) break;
            if (!accept(&ps, ",")) return parse_error(&ps, "expected ',' or ')'");
        }
    } else if (accept(&ps, "Tensor")) {
        op->n_out = 1;
    } else {
        return parse_error(&ps, "expected 'Tensor' or '(Tensor, ...)' as the return type");
    }
    skip_space(&ps);
    if (*ps.p) return parse_error(&ps, "unexpected text after the return type");
    return JAG_OK;
}

jag_status jag_op_define(const char *schema, jag_op_id *out) {
    if (!schema || !out) return jag__error(JAG_EINVAL, "jag_op_define: arguments 'schema' and 'out' must not be NULL");
    if (strlen(schema) >= sizeof ((struct jag_custom_op *)0)->schema)
        return jag__error(JAG_EINVAL, "jag_op_define: schema is longer than 511 characters");
    struct jag_custom_op *op = calloc(1, sizeof *op);
    if (!op) return jag__error(JAG_ENOMEM, "jag_op_define: out of memory");
    strcpy(op->schema, schema);
    jag_status st = parse_schema(schema, op);
    if (st) {
        free(op);
        return st;
    }
    pthread_mutex_lock(&define_lock);
    jag_op_id existing;
    int n = atomic_load(&jag__n_ops);
    if (jag_op_find(op->name, &existing) == JAG_OK) {
        st = jag__error(JAG_EINVAL, "jag_op_define: an op named '%s' is already defined", op->name);
    } else if (n == JAG_MAX_OPS) {
        st = jag__error(JAG_EINVAL, "jag_op_define: the op table is full (%d ops)", JAG_MAX_OPS);
    } else {
        jag_clear_error(); /* jag_op_find's "no op" message is not an error here */
        jag__ops[n] = (jag_op_info){op->name, op->name, op->n_args, op->n_out, JAG_TAG_CUSTOM, NULL, NULL, op};
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
        st = jag__error(JAG_EINVAL, "jag_op_impl: '%s' already has a %s kernel", op->name, key);
    } else {
        *ctx_slot = ctx;
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&define_lock);
    return st;
}

const char *jag_op_schema(jag_op_id id) {
    return jag__op_valid(id) && jag__ops[id].custom ? jag__ops[id].custom->schema : NULL;
}

/* ---- calls -------------------------------------------------------------- */

static const char *type_text(arg_type t) {
    for (size_t i = 0; i < sizeof arg_types / sizeof arg_types[0]; i++)
        if (arg_types[i].type == t) return arg_types[i].text;
    return "?";
}

jag_status jag__custom_check_args(const jag_op_info *info, const jag_value *args, int nargs) {
    const struct jag_custom_op *op = info->custom;
    for (int i = 0; i < nargs; i++) {
        jag_value_kind k = args[i].kind;
        bool ok;
        switch (op->types[i]) {
        case ARG_TENSOR: ok = k == JAG_VAL_TENSOR; break;
        case ARG_OPT_TENSOR: ok = k == JAG_VAL_TENSOR || k == JAG_VAL_NONE; break;
        case ARG_INT: ok = k == JAG_VAL_INT; break;
        case ARG_FLOAT: ok = k == JAG_VAL_DOUBLE || k == JAG_VAL_INT; break;
        case ARG_BOOL: ok = k == JAG_VAL_BOOL; break;
        case ARG_INTS: ok = k == JAG_VAL_INTS; break;
        default: ok = k == JAG_VAL_TENSORS; break;
        }
        if (!ok)
            return jag__error(JAG_EINVAL, "%s: argument '%s' is %s, but the schema '%s' declares %s", op->name,
                              op->arg_names[i], jag__kind_name(k), op->schema, type_text(op->types[i]));
    }
    return JAG_OK;
}

jag_status jag__custom_run(const jag_op_info *info, bool meta, const jag_value *args, int nargs, jag_tensor **outs) {
    const struct jag_custom_op *op = info->custom;
    jag_kernel_fn fn = __atomic_load_n(meta ? &op->meta : &op->cpu, __ATOMIC_ACQUIRE);
    if (!fn)
        return jag__error(JAG_ENOTIMPL, "%s: no %s kernel is registered (jag_op_impl(op, \"%s\", ...))", op->name,
                          meta ? "Meta" : "CPU", meta ? "Meta" : "CPU");
    jag_op_id id = (jag_op_id)(info - jag__ops);
    jag_status st = fn(id, args, nargs, outs, meta ? op->meta_ctx : op->cpu_ctx);
    if (st) return st;
    for (int i = 0; i < op->n_out; i++) {
        if (!outs[i]) return jag__error(JAG_EINTERNAL, "%s: the %s kernel returned no output %d", op->name,
                                        meta ? "Meta" : "CPU", i);
        if (meta && !jag__is_meta(outs[i]))
            return jag__error(JAG_EINVAL, "%s: the Meta kernel returned a tensor with data as output %d", op->name, i);
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
    for (int i = 0; !st && i < op->n_out; i++)
        if (!outs[i]) st = jag__error(JAG_EINTERNAL, "%s: the Autograd kernel returned no output %d", op->name, i);
    if (st)
        for (int i = 0; i < op->n_out; i++) jag_release(outs[i]), outs[i] = NULL;
    return st;
}
