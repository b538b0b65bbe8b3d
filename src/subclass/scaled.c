/* scaled.c — the scaled subclass: data * scale kept apart. It is built only
 * on the public subclass protocol plus the internal dispatcher, to show that
 * the protocol carries a second, quite different subclass. */
#include "../dispatch/dispatch.h"

#include <pthread.h>

typedef struct scaled_state {
    jag_tensor *data;  /* plain, float */
    jag_tensor *scale; /* 0-d, data's dtype */
} scaled_state;

static jag_status scaled_dispatch(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                  jag_tensor **outs, void *ctx);

static void destroy_state(void *p) {
    scaled_state *s = p;
    jag_release(s->data), jag_release(s->scale);
    free(s);
}

static jag_status scaled_flatten(const jag_tensor *t, jag_tensor **inner, int *n, jag_subclass_meta *meta) {
    scaled_state *s = t->state;
    inner[0] = jag_retain(s->data);
    inner[1] = jag_retain(s->scale);
    *n = 2;
    meta->n_ints = 0;
    return JAG_OK;
}

static jag_status wrap(const jag_tensor *data, const jag_tensor *scale, jag_tensor **out);

static jag_status scaled_unflatten(const jag_subclass *cls, jag_tensor *const *inner, int n,
                                   const jag_subclass_meta *meta, jag_tensor **out) {
    (void)cls, (void)meta;
    if (n != 2) return jag__error(JAG_EINVAL, "scaled unflatten: expected 2 inner tensors, got %d", n);
    return wrap(inner[0], inner[1], out);
}

static const jag_subclass *scaled_class;
static jag_status scaled_class_status;
static pthread_once_t scaled_once = PTHREAD_ONCE_INIT;

static void register_scaled(void) {
    jag_subclass_def def = {
        .name = "scaled",
        .flatten = scaled_flatten,
        .unflatten = scaled_unflatten,
        .dispatch = scaled_dispatch,
        .destroy_state = destroy_state,
    };
    bool prev = jag__set_registering_builtin(true);
    scaled_class_status = jag_subclass_register(&def, &scaled_class);
    jag__set_registering_builtin(prev);
}

static const jag_subclass *the_class(void) {
    pthread_once(&scaled_once, register_scaled);
    JAG_ASSERT(scaled_class_status == JAG_OK);
    return scaled_class;
}

const jag_subclass *jag__scaled_class(void) { return the_class(); }

static scaled_state *scaled(const jag_tensor *t) {
    return t && t->subclass && t->subclass == scaled_class ? t->state : NULL;
}

bool jag_is_scaled(const jag_tensor *t) { return scaled(t) != NULL; }

/* Unchecked: data and scale are known good. */
static jag_status wrap(const jag_tensor *data, const jag_tensor *scale, jag_tensor **out) {
    scaled_state *s = malloc(sizeof *s);
    if (!s) return jag__error(JAG_ENOMEM, "scaled: out of memory");
    s->data = jag_retain((jag_tensor *)data);
    s->scale = jag_retain((jag_tensor *)scale);
    return jag_subclass_wrap(the_class(), s, data->dtype, data->sizes, data->ndim, out);
}

jag_status jag_scaled_new(const jag_tensor *data, const jag_tensor *scale, jag_tensor **out) {
    const char *op = "jag_scaled_new";
    if (!data || !scale || !out) return jag__error(JAG_EINVAL, "%s: arguments must not be NULL", op);
    if (data->subclass || scale->subclass) return jag__error(JAG_EINVAL, "%s: 'data' and 'scale' must be plain tensors", op);
    if (!jag_dtype_is_floating(data->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'data' has dtype %s, expected float32 or float64", op,
                          jag_dtype_name(data->dtype));
    if (scale->dtype != data->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument 'scale' has dtype %s, expected %s like 'data'", op,
                          jag_dtype_name(scale->dtype), jag_dtype_name(data->dtype));
    if (scale->ndim != 0) return jag__error(JAG_ESHAPE, "%s: argument 'scale' is %d-d, expected a 0-d tensor", op, scale->ndim);
    jag__enter();
    jag_status st = wrap(data, scale, out);
    return jag__leave(st, out, st == JAG_OK);
}

#define ACCESSOR(fn, field)                                                    \
    jag_status fn(const jag_tensor *t, jag_tensor **out) {                     \
        scaled_state *s = scaled(t);                                           \
        if (!s || !out) return jag__error(JAG_EINVAL, #fn ": argument 't' is not a scaled tensor"); \
        jag__enter();                                                          \
        *out = jag_retain(s->field);                                           \
        return jag__leave(JAG_OK, out, 1);                                     \
    }
ACCESSOR(jag_scaled_data, data)
ACCESSOR(jag_scaled_scale, scale)
#undef ACCESSOR

static jag_status materialize(const scaled_state *s, jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(s->data), jag__v_tensor(s->scale)};
    return jag__dispatch(JAG_OP_mul, a, 2, out);
}

jag_status jag_scaled_materialize(const jag_tensor *t, jag_tensor **out) {
    scaled_state *s = scaled(t);
    if (!s || !out) return jag__error(JAG_EINVAL, "jag_scaled_materialize: argument 't' is not a scaled tensor");
    jag__enter();
    return jag__leave(materialize(s, out), out, 1);
}

/* ---- the handler -------------------------------------------------------- */

/* Run op with scaled args replaced by their data; wrap outs[0] with `scale`. */
static jag_status on_data(jag_op_id op, const jag_value *args, int nargs, const jag_tensor *scale, jag_tensor **outs) {
    jag_value a[16] = {{0}};
    if (nargs > 16) return jag__error(JAG_ENOTIMPL, "%s: too many arguments for a scaled tensor", jag__ops[op].api_name);
    for (int i = 0; i < nargs; i++) {
        scaled_state *s = args[i].kind == JAG_VAL_TENSOR ? scaled(args[i].u.t) : NULL;
        a[i] = s ? jag__v_tensor(s->data) : args[i];
    }
    jag_tensor *r = NULL;
    jag_status st = jag__dispatch(op, a, nargs, &r);
    if (st) return st;
    st = wrap(r, scale, outs);
    jag_release(r);
    return st;
}

/* The product of every scaled argument's scale (a new reference). */
static jag_status product_of_scales(const jag_value *args, int nargs, jag_tensor **out) {
    *out = NULL;
    for (int i = 0; i < nargs; i++) {
        scaled_state *s = args[i].kind == JAG_VAL_TENSOR ? scaled(args[i].u.t) : NULL;
        if (!s) continue;
        if (!*out) {
            *out = jag_retain(s->scale);
            continue;
        }
        jag_tensor *p = NULL;
        jag_value a[] = {jag__v_tensor(*out), jag__v_tensor(s->scale)};
        jag_status st = jag__dispatch(JAG_OP_mul, a, 2, &p);
        jag_release(*out);
        *out = p;
        if (st) return st;
    }
    return JAG_OK;
}

/* Fallback: materialise every scaled argument, run the op on plain tensors. */
static jag_status materialized(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    jag_value a[16] = {{0}};
    if (nargs > 16) return jag__error(JAG_ENOTIMPL, "%s: too many arguments for a scaled tensor", jag__ops[op].api_name);
    jag_tensor *temps[16] = {0};
    jag_status st = JAG_OK;
    for (int i = 0; i < nargs && !st; i++) {
        a[i] = args[i];
        if (args[i].kind == JAG_VAL_TENSORS) {
            for (int j = 0; j < args[i].u.tensors.n; j++)
                if (scaled(args[i].u.tensors.v[j]))
                    st = jag__error(JAG_ENOTIMPL, "%s: scaled tensors inside a tensor list are not supported", jag__ops[op].api_name);
            continue;
        }
        scaled_state *s = args[i].kind == JAG_VAL_TENSOR ? scaled(args[i].u.t) : NULL;
        if (s && !(st = materialize(s, &temps[i]))) a[i] = jag__v_tensor(temps[i]);
    }
    if (!st) st = jag__dispatch(op, a, nargs, outs);
    for (int i = 0; i < nargs; i++) jag_release(temps[i]);
    return st;
}

static jag_status scaled_dispatch(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                  jag_tensor **outs, void *ctx) {
    (void)cls, (void)ctx;
    for (int i = 0; i < nargs; i++)
        if (args[i].kind == JAG_VAL_TENSOR && args[i].u.t->subclass && !scaled(args[i].u.t))
            return jag__error(JAG_ENOTIMPL, "%s: mixes a scaled tensor with a %s tensor", jag__ops[op].api_name,
                              jag_subclass_name(args[i].u.t->subclass));
    scaled_state *first = scaled(args[0].kind == JAG_VAL_TENSOR ? args[0].u.t : NULL);
    unsigned tags = jag__ops[op].tags;
    jag_status st;
    /* the nested bridge takes plain tensors: materialise */
    if (op == JAG_OP_values || op == JAG_OP_nested_from_jagged || op == JAG_OP_to_padded || op == JAG_OP_from_padded)
        return materialized(op, args, nargs, outs);
    /* views, and sums and means: linear in data */
    if (first && ((tags & JAG_TAG_VIEW) || op == JAG_OP_sum || op == JAG_OP_mean))
        return on_data(op, args, nargs, first->scale, outs);
    /* products: bilinear, scales multiply */
    bool product = op == JAG_OP_mm || op == JAG_OP_bmm || op == JAG_OP_matmul ||
                   (op == JAG_OP_mul && args[1].kind != JAG_VAL_DOUBLE) ||
                   (op == JAG_OP_linear && args[2].kind == JAG_VAL_NONE && !scaled(args[1].u.t));
    if (product) {
        /* the product of a scaled tensor and a tensor of another dtype has
         * that other dtype: the scale would not match it, so materialise */
        for (int i = 0; i < nargs; i++)
            if (args[i].kind == JAG_VAL_TENSOR && args[i].u.t->dtype != args[0].u.t->dtype)
                return materialized(op, args, nargs, outs);
        jag_tensor *scale = NULL;
        if ((st = product_of_scales(args, nargs, &scale))) return st;
        st = on_data(op, args, nargs, scale, outs);
        jag_release(scale);
        return st;
    }
    /* scaled * scalar, scaled / scalar, -scaled: fold into the scale */
    if (first && (op == JAG_OP_mul || op == JAG_OP_div) && args[1].kind == JAG_VAL_DOUBLE) {
        if (op == JAG_OP_div && args[1].u.d == 0) return materialized(op, args, nargs, outs);
        jag_tensor *scale = NULL;
        jag_value a[] = {jag__v_tensor(first->scale), args[1]};
        if ((st = jag__dispatch(op, a, 2, &scale))) return st;
        st = wrap(first->data, scale, outs);
        jag_release(scale);
        return st;
    }
    if (first && op == JAG_OP_neg) {
        jag_tensor *scale = NULL;
        jag_value a[] = {jag__v_tensor(first->scale)};
        if ((st = jag__dispatch(JAG_OP_neg, a, 1, &scale))) return st;
        st = wrap(first->data, scale, outs);
        jag_release(scale);
        return st;
    }
    return materialized(op, args, nargs, outs);
}
