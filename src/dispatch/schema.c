/* schema.c — op schemas: "name(Tensor x, int[] dims, bool keepdim) -> Tensor".
 *
 * Built-in ops carry one in their ops.def row, custom ops are defined from
 * one (jag_op_define, whose schemas are namespaced: "ns::name(...)"). The
 * parsed form names each argument and its type; the dispatcher checks a
 * call's boxed kinds against it, and the tables that depend on an op's
 * arguments (which of them are dims, for the nested class) are read from
 * it instead of being kept by hand. */
#include "dispatch.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>

static const struct {
    const char *text;
    jag_arg_type type;
} arg_types[] = {
    /* longest first: "Tensor|float" and "Tensor?" before "Tensor" */
    {"Tensor|float", JAG_ARG_TENSOR_OR_FLOAT}, {"Tensor?", JAG_ARG_OPT_TENSOR}, {"Tensor[]", JAG_ARG_TENSORS},
    {"Tensor", JAG_ARG_TENSOR}, {"int[]", JAG_ARG_INTS}, {"int", JAG_ARG_INT}, {"float", JAG_ARG_FLOAT},
    {"bool", JAG_ARG_BOOL},
};

const char *jag__arg_type_text(jag_arg_type t) {
    for (size_t i = 0; i < sizeof arg_types / sizeof arg_types[0]; i++)
        if (arg_types[i].type == t) return arg_types[i].text;
    return "?";
}

const char *jag__arg_type_phrase(jag_arg_type t) {
    switch (t) {
    case JAG_ARG_TENSOR: return "a tensor";
    case JAG_ARG_OPT_TENSOR: return "a tensor or none";
    case JAG_ARG_TENSORS: return "a tensor list";
    case JAG_ARG_TENSOR_OR_FLOAT: return "a tensor or a scalar";
    case JAG_ARG_INT: return "an int";
    case JAG_ARG_INTS: return "an int list";
    case JAG_ARG_FLOAT: return "a double";
    case JAG_ARG_BOOL: return "a bool";
    }
    return "?";
}

bool jag__arg_fits(jag_arg_type t, jag_value_kind k) {
    switch (t) {
    case JAG_ARG_TENSOR: return k == JAG_VAL_TENSOR;
    case JAG_ARG_OPT_TENSOR: return k == JAG_VAL_TENSOR || k == JAG_VAL_NONE;
    case JAG_ARG_INT: return k == JAG_VAL_INT;
    case JAG_ARG_FLOAT: return k == JAG_VAL_DOUBLE || k == JAG_VAL_INT;
    case JAG_ARG_BOOL: return k == JAG_VAL_BOOL;
    case JAG_ARG_INTS: return k == JAG_VAL_INTS;
    case JAG_ARG_TENSORS: return k == JAG_VAL_TENSORS;
    case JAG_ARG_TENSOR_OR_FLOAT: return k == JAG_VAL_TENSOR || k == JAG_VAL_DOUBLE || k == JAG_VAL_INT;
    }
    return false;
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct {
    const char *who, *text, *p;
} parser;

static void skip_space(parser *ps) {
    while (isspace((unsigned char)*ps->p)) ps->p++;
}

static jag_status parse_error(parser *ps, const char *what) {
    return jag__error(JAG_EINVAL, "%s: schema '%s': %s at column %d", ps->who, ps->text, what,
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

static jag_status parse_args(parser *ps, jag_schema *s) {
    s->n_args = 0;
    skip_space(ps);
    if (accept(ps, ")")) return JAG_OK;
    for (;;) {
        if (s->n_args == JAG_SCHEMA_MAX_ARGS) return parse_error(ps, "more than 16 arguments");
        bool found = false;
        skip_space(ps);
        for (size_t i = 0; i < sizeof arg_types / sizeof arg_types[0] && !found; i++) {
            size_t n = strlen(arg_types[i].text);
            if (strncmp(ps->p, arg_types[i].text, n) == 0 && !isalnum((unsigned char)ps->p[n])) {
                s->types[s->n_args] = arg_types[i].type;
                ps->p += n;
                found = true;
            }
        }
        if (!found)
            return parse_error(ps, "expected an argument type (Tensor, Tensor?, Tensor[], Tensor|float, int, int[], "
                                   "float, bool)");
        if (!parse_ident(ps, s->arg_names[s->n_args], sizeof s->arg_names[0]))
            return parse_error(ps, "expected an argument name");
        for (int i = 0; i < s->n_args; i++)
            if (strcmp(s->arg_names[i], s->arg_names[s->n_args]) == 0) return parse_error(ps, "duplicate argument name");
        s->n_args++;
        skip_space(ps);
        if (*ps->p == '=') return parse_error(ps, "default values are not supported; pass every argument");
        if (accept(ps, ")")) return JAG_OK;
        if (!accept(ps, ",")) return parse_error(ps, "expected ',' or ')'");
    }
}

static jag_status parse_returns(parser *ps, jag_schema *s) {
    if (!accept(ps, "->")) return parse_error(ps, "expected '->' and the return type");
    if (accept(ps, "(")) {
        s->n_out = 0;
        for (;;) {
            if (!accept(ps, "Tensor")) return parse_error(ps, "expected 'Tensor' in the return tuple");
            if (++s->n_out > 4) return parse_error(ps, "more than 4 outputs");
            if (accept(ps, ")")) break;
            if (!accept(ps, ",")) return parse_error(ps, "expected ',' or ')'");
        }
    } else if (accept(ps, "Tensor")) {
        s->n_out = 1;
    } else {
        return parse_error(ps, "expected 'Tensor' or '(Tensor, ...)' as the return type");
    }
    skip_space(ps);
    if (*ps->p) return parse_error(ps, "unexpected text after the return type");
    return JAG_OK;
}

jag_status jag__schema_parse(const char *who, const char *text, bool namespaced, jag_schema *out) {
    parser ps = {who, text, text};
    char ns[64], name[64];
    memset(out, 0, sizeof *out);
    if (namespaced) {
        if (!parse_ident(&ps, ns, sizeof ns)) return parse_error(&ps, "expected a namespace");
        if (!accept(&ps, "::"))
            return parse_error(&ps, "expected '::' after the namespace (ops are namespaced: ns::name)");
    }
    if (!parse_ident(&ps, name, sizeof name)) return parse_error(&ps, "expected the op's name");
    if (namespaced) snprintf(out->name, sizeof out->name, "%s::%s", ns, name);
    else snprintf(out->name, sizeof out->name, "%s", name);
    if (!accept(&ps, "(")) return parse_error(&ps, "expected '('");
    jag_status st = parse_args(&ps, out);
    return st ? st : parse_returns(&ps, out);
}

/* ---- built-in rows --------------------------------------------------------- */

/* The built-in rows' schemas, parsed once, and what is read from them. */
static jag_schema builtin[JAG_OP_BUILTIN_COUNT];
static unsigned dim_bits[JAG_OP_BUILTIN_COUNT];
static int dims_list[JAG_OP_BUILTIN_COUNT];
static jag_status builtin_status;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

/* Arguments named dim, dim0 or dim1 (int) are dims; one named dims (int[])
 * is a list of dims. */
static void read_dims(int op) {
    const jag_schema *s = &builtin[op];
    dims_list[op] = -1;
    for (int i = 0; i < s->n_args; i++) {
        const char *n = s->arg_names[i];
        if (s->types[i] == JAG_ARG_INT && (!strcmp(n, "dim") || !strcmp(n, "dim0") || !strcmp(n, "dim1")))
            dim_bits[op] |= 1u << i;
        else if (s->types[i] == JAG_ARG_INTS && !strcmp(n, "dims"))
            dims_list[op] = i;
    }
}

static void parse_builtin(void) {
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        jag_status st = jag__schema_parse("ops.def", jag__ops[op].schema, false, &builtin[op]);
        if (!st && (strcmp(builtin[op].name, jag__ops[op].name) || builtin[op].n_args != jag__ops[op].n_in ||
                    builtin[op].n_out != jag__ops[op].n_out))
            st = jag__error(JAG_EINTERNAL, "ops.def: row '%s' has schema '%s', which disagrees with its name or its "
                            "%d arguments and %d outputs", jag__ops[op].name, jag__ops[op].schema,
                            jag__ops[op].n_in, jag__ops[op].n_out);
        if (st) {
            builtin_status = st;
            return;
        }
        read_dims(op);
    }
}

jag_status jag__builtin_schemas_check(void) {
    pthread_once(&builtin_once, parse_builtin);
    return builtin_status;
}

const jag_schema *jag__op_schema(jag_op_id op) {
    if (op >= JAG_OP_BUILTIN_COUNT) return jag__custom_schema(&jag__ops[op]);
    pthread_once(&builtin_once, parse_builtin);
    return builtin_status ? NULL : &builtin[op];
}

void jag__op_dim_args(jag_op_id op, unsigned *bits, int *list) {
    *bits = 0, *list = -1;
    if (op >= JAG_OP_BUILTIN_COUNT) return;
    pthread_once(&builtin_once, parse_builtin);
    if (builtin_status) return;
    *bits = dim_bits[op], *list = dims_list[op];
}
