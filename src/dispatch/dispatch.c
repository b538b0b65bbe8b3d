/* dispatch.c — the op table and the dispatcher: key choice, META, kernel. */
#include "dispatch.h"

const jag_op_info jag__ops[JAG_OP_COUNT] = {
#define JAG_OP(name, n_in, n_out, tags, meta, cpu) {"jag_" #name, n_in, n_out, tags, meta, cpu},
#include "ops.def"
#undef JAG_OP
};

#define JAG_MAX_OUTS 4

/* Which key a call runs under. Issue-by-issue this grows the SUBCLASS,
 * AUTOGRAD and TRACE keys above CPU; today a call is META when every tensor
 * argument is a meta tensor and CPU when every one has data. */
typedef enum { KEY_CPU, KEY_META } dispatch_key;

static jag_status compute_key(const jag_op_info *info, const jag_value *args, int nargs,
                              dispatch_key *key) {
    int n_meta = 0, n_data = 0;
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == JAG_VAL_TENSOR) {
            if (!args[i].u.t) return jag__error(JAG_EINVAL, "%s: argument %d is a NULL tensor", info->name, i);
            jag__is_meta(args[i].u.t) ? n_meta++ : n_data++;
        } else if (args[i].kind == JAG_VAL_TENSORS) {
            for (int j = 0; j < args[i].u.tensors.n; j++) {
                const jag_tensor *t = args[i].u.tensors.v[j];
                if (!t) return jag__error(JAG_EINVAL, "%s: tensor %d of argument %d is NULL", info->name, j, i);
                jag__is_meta(t) ? n_meta++ : n_data++;
            }
        }
    }
    if (n_meta && n_data)
        return jag__error(JAG_EINVAL, "%s: mixes meta tensors (no data) with tensors that have data", info->name);
    *key = n_meta ? KEY_META : KEY_CPU;
    return JAG_OK;
}

jag_status jag__dispatch(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    JAG_ASSERT(op >= 0 && op < JAG_OP_COUNT);
    const jag_op_info *info = &jag__ops[op];
    if (nargs != info->n_in)
        return jag__error(JAG_EINVAL, "%s: takes %d arguments, got %d", info->name, info->n_in, nargs);
    dispatch_key key = KEY_CPU;
    jag_status st = compute_key(info, args, nargs, &key);
    if (st != JAG_OK) return st;

    jag_tensor *made[JAG_MAX_OUTS] = {0};
    JAG_ASSERT(info->n_out <= JAG_MAX_OUTS);
    if (info->tags & JAG_TAG_VIEW) {
        st = info->cpu(info->name, args, nargs, made);
    } else {
        jag_spec specs[JAG_MAX_OUTS];
        st = info->meta(info->name, args, nargs, specs);
        for (int i = 0; st == JAG_OK && i < info->n_out; i++) {
            made[i] = jag__tensor_from_spec(info->name, &specs[i], key == KEY_META);
            if (!made[i]) st = jag_last_status();
        }
        if (st == JAG_OK && key == KEY_CPU) st = info->cpu(info->name, args, nargs, made);
    }
    if (st != JAG_OK) {
        for (int i = 0; i < info->n_out; i++) jag_release(made[i]);
        return st;
    }
    for (int i = 0; i < info->n_out; i++) outs[i] = made[i];
    return JAG_OK;
}

jag_status jag__call(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    jag__enter();
    jag_status st = jag__dispatch(op, args, nargs, outs);
    return jag__leave(st, outs, st == JAG_OK ? jag__ops[op].n_out : 0);
}

/* ---- argument helpers --------------------------------------------------- */

static const char *kind_name(jag_value_kind k) {
    switch (k) {
    case JAG_VAL_NONE: return "nothing";
    case JAG_VAL_TENSOR: return "a tensor";
    case JAG_VAL_INT: return "an int";
    case JAG_VAL_DOUBLE: return "a double";
    case JAG_VAL_BOOL: return "a bool";
    case JAG_VAL_INTS: return "an int list";
    case JAG_VAL_TENSORS: return "a tensor list";
    }
    return "?";
}

static jag_status check_kind(const char *op, const jag_value *args, int nargs, int i,
                             const char *name, jag_value_kind want) {
    if (i >= nargs) return jag__error(JAG_EINVAL, "%s: argument '%s' is missing", op, name);
    if (args[i].kind != want)
        return jag__error(JAG_EINVAL, "%s: argument '%s' is %s, expected %s", op, name,
                          kind_name(args[i].kind), kind_name(want));
    return JAG_OK;
}

jag_status jag__arg_tensor(const char *op, const jag_value *args, int nargs, int i,
                           const char *name, const jag_tensor **out) {
    if (i < nargs && args[i].kind == JAG_VAL_NONE)
        return jag__error(JAG_EINVAL, "%s: argument '%s' is NULL, expected a tensor", op, name);
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_TENSOR);
    if (st == JAG_OK) *out = args[i].u.t;
    return st;
}

jag_status jag__arg_opt_tensor(const char *op, const jag_value *args, int nargs, int i,
                               const char *name, const jag_tensor **out) {
    if (i < nargs && args[i].kind == JAG_VAL_NONE) {
        *out = NULL;
        return JAG_OK;
    }
    return jag__arg_tensor(op, args, nargs, i, name, out);
}

jag_status jag__arg_int(const char *op, const jag_value *args, int nargs, int i,
                        const char *name, int64_t *out) {
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_INT);
    if (st == JAG_OK) *out = args[i].u.i;
    return st;
}

jag_status jag__arg_double(const char *op, const jag_value *args, int nargs, int i,
                           const char *name, double *out) {
    if (i < nargs && args[i].kind == JAG_VAL_INT) {
        *out = (double)args[i].u.i;
        return JAG_OK;
    }
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_DOUBLE);
    if (st == JAG_OK) *out = args[i].u.d;
    return st;
}

jag_status jag__arg_bool(const char *op, const jag_value *args, int nargs, int i,
                         const char *name, bool *out) {
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_BOOL);
    if (st == JAG_OK) *out = args[i].u.b;
    return st;
}

jag_status jag__arg_ints(const char *op, const jag_value *args, int nargs, int i,
                         const char *name, const int64_t **v, int *n) {
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_INTS);
    if (st == JAG_OK) {
        *v = args[i].u.ints.v;
        *n = args[i].u.ints.n;
    }
    return st;
}
