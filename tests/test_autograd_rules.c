/* test_autograd_rules.c — every derivative rule against central finite
 * differences (jag_gradcheck, float64) on dense inputs (contiguous,
 * transposed, sliced, broadcast, 0-d, empty, scalar second arguments) and
 * nested inputs of both layouts (with an empty component and, for jagged,
 * holes); a few gradients computed by hand; the structure of nested
 * gradients; jag_backward's and jag_gradcheck's error paths. */
#include "test.h"
#include "autograd/autograd.h"

#define EPS 1e-6
#define ATOL 1e-7
#define RTOL 1e-6

/* sizes as a literal: S(3, 4) -> (const int64_t[]){3, 4}, 2 */
#define S(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static jag_tensor *need_grad(jag_tensor *t) {
    if (jag_set_requires_grad(t, true)) {
        fprintf(stderr, "need_grad: %s\n", jag_last_error());
        exit(2);
    }
    return t;
}

/* A float64 leaf in [lo, hi): layout 0 contiguous, 1 t_noncontig, 2 t_sliced. */
static jag_tensor *leaf(const int64_t *sizes, int n, double lo, double hi, uint64_t seed, int layout) {
    jag_tensor *x = t_rand(sizes, n, JAG_FLOAT64, lo, hi, seed);
    if (layout) {
        jag_tensor *v = layout == 1 ? t_noncontig(x) : t_sliced(x);
        jag_release(x);
        x = v;
    }
    return need_grad(x);
}

static jag_tensor *from(const double *v, const int64_t *sizes, int n) { return t_from(v, sizes, n, JAG_FLOAT64); }

static jag_tensor *ints(const double *v, const int64_t *sizes, int n, jag_dtype dt) { return t_from(v, sizes, n, dt); }

/* Nested leaves: components (L_i, D...) of random values. */
static jag_tensor *nested(jag_layout layout, int n, const int64_t (*shapes)[3], int nd, double lo, double hi, uint64_t seed) {
    jag_tensor *items[8], *nt = NULL;
    for (int i = 0; i < n; i++) items[i] = t_rand(shapes[i], nd, JAG_FLOAT64, lo, hi, seed + (uint64_t)i);
    if (jag_nested_from_list(items, n, layout, &nt)) {
        fprintf(stderr, "nested: %s\n", jag_last_error());
        exit(2);
    }
    for (int i = 0; i < n; i++) jag_release(items[i]);
    return need_grad(nt);
}

/* The usual three components, one empty: (2, D), (0, D), (4, D). */
static jag_tensor *nested3(jag_layout layout, int64_t D, double lo, double hi, uint64_t seed) {
    const int64_t shapes[3][3] = {{2, D}, {0, D}, {4, D}};
    return nested(layout, 3, shapes, 2, lo, hi, seed);
}

/* Jagged with holes: values (9, D), offsets {0, 3, 3, 9}, lengths {2, 0, 4}. */
static jag_tensor *holes(int64_t D, double lo, double hi, uint64_t seed) {
    jag_tensor *v = t_rand(S(9, D), JAG_FLOAT64, lo, hi, seed);
    jag_tensor *off = ints((double[]){0, 3, 3, 9}, S(4), JAG_INT64), *len = ints((double[]){2, 0, 4}, S(3), JAG_INT64);
    jag_tensor *nt = NULL;
    if (jag_nested_from_jagged(v, off, len, &nt)) {
        fprintf(stderr, "holes: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(v), jag_release(off), jag_release(len);
    return need_grad(nt);
}

/* ---- gradcheck adapters --------------------------------------------------- */

typedef jag_status (*unary_fn)(const jag_tensor *, jag_tensor **);
typedef jag_status (*binary_fn)(const jag_tensor *, const jag_tensor *, jag_tensor **);
typedef jag_status (*scalar_fn)(const jag_tensor *, double, jag_tensor **);

typedef enum {
    K_UNARY, K_BINARY, K_SCALAR, K_ADD, K_ADD_SCALAR, K_WHERE, K_CLAMP, K_CLONE, K_TO_DTYPE,
    K_VIEW, K_RESHAPE, K_TRANSPOSE, K_PERMUTE, K_NARROW, K_SELECT, K_UNSQUEEZE, K_SQUEEZE, K_SQUEEZE_ALL,
    K_EXPAND, K_FLATTEN, K_SPLIT, K_CHUNK, K_STACK, K_CAT,
    K_SUM, K_MEAN, K_PROD, K_AMAX, K_AMIN, K_MAX, K_MIN, K_VAR, K_STD, K_LSE, K_MAX_DIM, K_MIN_DIM,
    K_MM, K_BMM, K_MATMUL, K_LINEAR, K_SOFTMAX, K_LOG_SOFTMAX, K_LAYER_NORM, K_RMS_NORM,
    K_INDEX_SELECT, K_GATHER, K_EMBEDDING, K_VALUES, K_FROM_JAGGED,
} kind;

typedef struct call {
    kind k;
    unary_fn u;
    binary_fn b;
    scalar_fn s;
    double x;          /* scalar operand, alpha, eps, clamp's lo */
    double hi;         /* clamp's hi */
    int dims[JAG_MAX_DIMS], nd;
    bool keep;
    int64_t corr, start, len, sizes[JAG_MAX_DIMS];
    int a, b2;         /* dims / indices */
    int has_w, has_b;  /* layer_norm, rms_norm, linear */
    const jag_tensor *idx, *cond, *off, *lens;
    jag_tensor *post;  /* not used */
} call;

/* Run the op a call describes on inputs in[...]. */
static jag_status run_call(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    const call *c = ctx;
    jag_tensor *t = NULL, *pieces[16] = {0};
    int np = 0;
    jag_status st;
    switch (c->k) {
    case K_UNARY: return c->u(in[0], out);
    case K_BINARY: return c->b(in[0], in[1], out);
    case K_SCALAR: return c->s(in[0], c->x, out);
    case K_ADD: return jag_add(in[0], in[1], c->x, out);
    case K_ADD_SCALAR: return jag_add_scalar(in[0], c->x, out);
    case K_WHERE: return jag_where(c->cond, in[0], in[1], out);
    case K_CLAMP: return jag_clamp(in[0], c->x, c->hi, out);
    case K_CLONE: return jag_clone(in[0], out);
    case K_TO_DTYPE: /* there and back: d/dx is 1 where float32 holds x exactly */
        if ((st = jag_to_dtype(in[0], JAG_FLOAT32, &t))) return st;
        st = jag_to_dtype(t, JAG_FLOAT64, out);
        jag_release(t);
        return st;
    case K_VIEW: return jag_view(in[0], c->sizes, c->nd, out);
    case K_RESHAPE: return jag_reshape(in[0], c->sizes, c->nd, out);
    case K_TRANSPOSE: return jag_transpose(in[0], c->a, c->b2, out);
    case K_PERMUTE: return jag_permute(in[0], c->dims, c->nd, out);
    case K_NARROW: return jag_narrow(in[0], c->a, c->start, c->len, out);
    case K_SELECT: return jag_select(in[0], c->a, c->start, out);
    case K_UNSQUEEZE: return jag_unsqueeze(in[0], c->a, out);
    case K_SQUEEZE: return jag_squeeze(in[0], c->a, out);
    case K_SQUEEZE_ALL: return jag_squeeze_all(in[0], out);
    case K_EXPAND: return jag_expand(in[0], c->sizes, c->nd, out);
    case K_FLATTEN: return jag_flatten(in[0], out);
    case K_SPLIT:
    case K_CHUNK: /* piece i scaled by i + 1, joined again */
        st = c->k == K_SPLIT ? jag_split(in[0], c->len, c->a, pieces, 16, &np) : jag_chunk(in[0], (int)c->len, c->a, pieces, 16, &np);
        for (int i = 0; !st && i < np; i++) {
            jag_tensor *sc = NULL;
            st = jag_mul_scalar(pieces[i], i + 1.0, &sc);
            jag_release(pieces[i]);
            pieces[i] = sc;
        }
        if (!st) st = jag_cat(pieces, np, c->a, out);
        for (int i = 0; i < np; i++) jag_release(pieces[i]);
        return st;
    case K_STACK: return jag_stack(in, n, c->a, out);
    case K_CAT: return jag_cat(in, n, c->a, out);
    case K_SUM: return jag_sum(in[0], c->dims, c->nd, c->keep, out);
    case K_MEAN: return jag_mean(in[0], c->dims, c->nd, c->keep, out);
    case K_PROD: return jag_prod(in[0], c->dims, c->nd, c->keep, out);
    case K_AMAX: return jag_amax(in[0], c->dims, c->nd, c->keep, out);
    case K_AMIN: return jag_amin(in[0], c->dims, c->nd, c->keep, out);
    case K_MAX: return jag_max(in[0], out);
    case K_MIN: return jag_min(in[0], out);
    case K_VAR: return jag_var(in[0], c->dims, c->nd, c->corr, c->keep, out);
    case K_STD: return jag_std(in[0], c->dims, c->nd, c->corr, c->keep, out);
    case K_LSE: return jag_logsumexp(in[0], c->dims, c->nd, c->keep, out);
    case K_MAX_DIM:
    case K_MIN_DIM:
        st = (c->k == K_MAX_DIM ? jag_max_dim : jag_min_dim)(in[0], c->a, c->keep, out, &t);
        jag_release(t);
        return st;
    case K_MM: return jag_mm(in[0], in[1], out);
    case K_BMM: return jag_bmm(in[0], in[1], out);
    case K_MATMUL: return jag_matmul(in[0], in[1], out);
    case K_LINEAR: return jag_linear(in[0], in[1], c->has_b ? in[2] : NULL, out);
    case K_SOFTMAX: return jag_softmax(in[0], c->a, out);
    case K_LOG_SOFTMAX: return jag_log_softmax(in[0], c->a, out);
    case K_LAYER_NORM:
        return jag_layer_norm(in[0], c->a, c->has_w ? in[1] : NULL, c->has_b ? in[1 + c->has_w] : NULL, c->x, out);
    case K_RMS_NORM: return jag_rms_norm(in[0], c->a, c->has_w ? in[1] : NULL, c->x, out);
    case K_INDEX_SELECT: return jag_index_select(in[0], c->a, c->idx, out);
    case K_GATHER: return jag_gather(in[0], c->a, c->idx, out);
    case K_EMBEDDING: return jag_embedding(in[0], c->idx, out);
    case K_VALUES: return jag_nested_values(in[0], out);
    case K_FROM_JAGGED:
        if ((st = jag_nested_from_jagged(in[0], c->off, c->lens, &t))) return st;
        st = jag_sin(t, out);
        jag_release(t);
        return st;
    }
    return JAG_EINVAL;
}

/* gradcheck a call on inputs; releases the inputs. */
static void gc_label(const char *label, int line, call c, jag_tensor **in, int n) {
    jag_status st = jag_gradcheck(run_call, &c, in, n, EPS, ATOL, RTOL);
    CHECK_MSG(st == JAG_OK, "line %d: %s: %s: %s", line, label, jag_status_str(st), jag_last_error());
    for (int i = 0; i < n; i++) jag_release(in[i]);
}
#define GC(label, c, ...)                                                      \
    do {                                                                       \
        jag_tensor *in_[] = {__VA_ARGS__};                                     \
        gc_label(label, __LINE__, c, in_, (int)(sizeof in_ / sizeof in_[0]));  \
    } while (0)

/* ---- unary pointwise ------------------------------------------------------ */

static const struct {
    const char *name;
    unary_fn f;
    double lo, hi;
} unary_ops[] = {
    {"neg", jag_neg, -2, 2},          {"abs", jag_abs, 0.1, 2},       {"exp", jag_exp, -2, 2},
    {"log", jag_log, 0.5, 3},         {"sqrt", jag_sqrt, 0.5, 3},     {"rsqrt", jag_rsqrt, 0.5, 3},
    {"sin", jag_sin, -3, 3},          {"cos", jag_cos, -3, 3},        {"tanh", jag_tanh, -2, 2},
    {"sigmoid", jag_sigmoid, -3, 3},  {"relu", jag_relu, 0.1, 2},     {"silu", jag_silu, -3, 3},
    {"gelu", jag_gelu, -3, 3},        {"gelu_tanh", jag_gelu_tanh, -3, 3}, {"reciprocal", jag_reciprocal, 0.5, 2},
    {"square", jag_square, -2, 2},    {"sign", jag_sign, 0.1, 2},
    {"log1p", jag_log1p, -0.5, 3},    {"expm1", jag_expm1, -2, 2},    {"erf", jag_erf, -2, 2},
    {"erfc", jag_erfc, -2, 2},        {"selu", jag_selu, 0.1, 2},     {"mish", jag_mish, -3, 3},
    {"logsigmoid", jag_logsigmoid, -5, 5}, {"hardswish", jag_hardswish, -2.9, 2.9},
    {"hardsigmoid", jag_hardsigmoid, -2.9, 2.9}, {"floor", jag_floor, 0.1, 0.9}, {"round", jag_round, 0.1, 0.4},
};
#define N_UNARY (int)(sizeof unary_ops / sizeof unary_ops[0])

static jag_status softplus_threshold_1(const jag_tensor *x, double beta, jag_tensor **out) {
    return jag_softplus(x, beta, 1.0, out);
}
static jag_status hardtanh_upper_1(const jag_tensor *x, double min_val, jag_tensor **out) {
    return jag_hardtanh(x, min_val, 1.0, out);
}

static void test_unary_dense(void) {
    TEST_BEGIN();
    for (int i = 0; i < N_UNARY; i++) {
        call c = {.k = K_UNARY, .u = unary_ops[i].f};
        double lo = unary_ops[i].lo, hi = unary_ops[i].hi;
        for (int layout = 0; layout < 3; layout++) GC(unary_ops[i].name, c, leaf(S(3, 4), lo, hi, 10 + i, layout));
        GC(unary_ops[i].name, c, leaf(NULL, 0, lo, hi, 40 + i, 0));   /* 0-d */
        GC(unary_ops[i].name, c, leaf(S(0, 3), lo, hi, 70 + i, 0));   /* empty */
        GC(unary_ops[i].name, c, leaf(S(2, 1, 3), lo, hi, 90 + i, 1)); /* size-1 dim */
        /* the negative side too for the ops with a kink at 0 */
        if (unary_ops[i].f == jag_abs || unary_ops[i].f == jag_relu || unary_ops[i].f == jag_sign ||
            unary_ops[i].f == jag_selu)
            GC(unary_ops[i].name, c, leaf(S(5), -2, -0.1, 120 + i, 0));
    }
    /* gelu near 0, where its rule switches to the series, and far out */
    call g = {.k = K_UNARY, .u = jag_gelu};
    GC("gelu special", g, need_grad(from((double[]){0, 1e-9, -1e-9, 2e-8, -7, 7, -30, 1e-3}, S(8))));
    call gt = {.k = K_UNARY, .u = jag_gelu_tanh};
    GC("gelu_tanh special", gt, need_grad(from((double[]){0, 1e-9, -5, 5, -12}, S(5))));
    /* the parametrised activations, across their kinks (random points, none
     * within the difference step of one) */
    call lr = {.k = K_SCALAR, .s = jag_leaky_relu, .x = 0.3};
    call el = {.k = K_SCALAR, .s = jag_elu, .x = 1.3};
    call sp = {.k = K_SCALAR, .s = softplus_threshold_1, .x = 2.0};
    call ht = {.k = K_SCALAR, .s = hardtanh_upper_1, .x = -0.5};
    for (int layout = 0; layout < 3; layout++) {
        GC("leaky_relu", lr, leaf(S(3, 4), -2, 2, 200 + layout, layout));
        GC("elu", el, leaf(S(3, 4), -2, 2, 210 + layout, layout));
        GC("softplus", sp, leaf(S(3, 4), -2, 2, 220 + layout, layout));
        GC("hardtanh", ht, leaf(S(3, 4), -2, 2, 230 + layout, layout));
    }
}

/* ---- binary pointwise ----------------------------------------------------- */

static const struct {
    const char *name;
    binary_fn f;
    scalar_fn s;
    double alo, ahi, blo, bhi;
} binary_ops[] = {
    {"sub", jag_sub, jag_sub_scalar, -2, 2, -2, 2},
    {"mul", jag_mul, jag_mul_scalar, -2, 2, -2, 2},
    {"div", jag_div, jag_div_scalar, -2, 2, 0.5, 2},
    {"pow", jag_pow, jag_pow_scalar, 0.5, 2, -1.5, 1.5},
    {"maximum", jag_maximum, jag_maximum_scalar, -2, 2, -2, 2},
    {"minimum", jag_minimum, jag_minimum_scalar, -2, 2, -2, 2},
};
#define N_BINARY (int)(sizeof binary_ops / sizeof binary_ops[0])

static const struct {
    int64_t a[4], b[4];
    int na, nb;
} bshapes[] = {
    {{3, 4}, {3, 4}, 2, 2}, {{3, 4}, {4}, 2, 1},       {{2, 1, 4}, {3, 1}, 3, 2},
    {{3, 1}, {1, 4}, 2, 2}, {{0}, {2, 3}, 0, 2},        {{2, 3}, {0}, 2, 0}, /* 0-d operands */
    {{0, 3}, {3}, 2, 1},    {{1, 4}, {3, 4}, 2, 2},
};

static void test_binary_dense(void) {
    TEST_BEGIN();
    for (int i = 0; i < N_BINARY; i++) {
        call c = {.k = K_BINARY, .b = binary_ops[i].f};
        for (size_t s = 0; s < sizeof bshapes / sizeof bshapes[0]; s++)
            for (int layout = 0; layout < 3; layout++) {
                if (layout && (bshapes[s].na == 0 || bshapes[s].nb == 0)) continue;
                GC(binary_ops[i].name, c,
                   leaf(bshapes[s].a, bshapes[s].na, binary_ops[i].alo, binary_ops[i].ahi, 200 + 10 * i + s, layout),
                   leaf(bshapes[s].b, bshapes[s].nb, binary_ops[i].blo, binary_ops[i].bhi, 300 + 10 * i + s, 2 - layout));
            }
        /* scalar second argument */
        double scalars[] = {0.5, -1.25, 2.0, 0.0};
        for (int k = 0; k < 4; k++) {
            if (k == 3 && binary_ops[i].f == jag_div) continue;
            call cs = {.k = K_SCALAR, .s = binary_ops[i].s, .x = scalars[k]};
            GC(binary_ops[i].name, cs, leaf(S(3, 4), binary_ops[i].alo, binary_ops[i].ahi, 400 + i, k % 3));
        }
    }
    /* add with alpha, tensor and scalar */
    call add = {.k = K_ADD, .x = 2.5};
    GC("add", add, leaf(S(3, 4), -2, 2, 1, 0), leaf(S(4), -2, 2, 2, 1));
    GC("add", add, leaf(S(2, 1, 4), -2, 2, 3, 1), leaf(S(3, 1), -2, 2, 4, 2));
    add.x = 1.0;
    GC("add", add, leaf(S(3, 4), -2, 2, 5, 2), leaf(S(3, 4), -2, 2, 6, 1));
    call adds = {.k = K_ADD_SCALAR, .x = -3.5};
    GC("add_scalar", adds, leaf(S(3, 4), -2, 2, 7, 1));
    /* only one operand requiring grad */
    call mul = {.k = K_BINARY, .b = jag_mul};
    GC("mul one side", mul, leaf(S(3, 4), -2, 2, 8, 0), t_rand(S(4), JAG_FLOAT64, -2, 2, 9));
    /* the same tensor on both sides (x * x) */
    call sq = {.k = K_UNARY, .u = jag_square};
    GC("square", sq, leaf(S(5), -2, 2, 10, 0));
}

static jag_status f_mul_self(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    return jag_mul(in[0], in[0], out);
}

/* the gradient of x after backward from sum(y); releases y */
static jag_tensor *grad_of_sum(jag_tensor *x, jag_tensor *y) {
    jag_tensor *s = NULL, *g = NULL;
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_OK(jag_get_grad(x, &g));
    jag_release(s), jag_release(y);
    return g;
}

static void test_where_clone_to_dtype(void) {
    TEST_BEGIN();
    jag_tensor *r = t_rand(S(3, 4), JAG_FLOAT64, -1, 1, 11), *cond = NULL;
    CHECK_OK(jag_gt_scalar(r, 0, &cond));
    call w = {.k = K_WHERE, .cond = cond};
    GC("where", w, leaf(S(3, 4), -2, 2, 12, 0), leaf(S(3, 4), -2, 2, 13, 1));
    GC("where broadcast", w, leaf(S(4), -2, 2, 14, 0), leaf(S(3, 1), -2, 2, 15, 2));
    GC("where 0-d", w, leaf(NULL, 0, -2, 2, 16, 0), leaf(S(3, 4), -2, 2, 17, 0));
    jag_release(cond), jag_release(r);
    call cl = {.k = K_CLONE};
    GC("clone", cl, leaf(S(3, 4), -2, 2, 18, 1));
    /* clamp: finite differences away from the bounds; at them (and at NaN)
     * by hand: 1 on a bound (torch), 0 outside and at NaN */
    call cp = {.k = K_CLAMP, .x = -0.5, .hi = 0.7};
    GC("clamp", cp, leaf(S(3, 4), -2, 2, 21, 0));
    call cp1 = {.k = K_CLAMP, .x = -INFINITY, .hi = 0.25};
    GC("clamp above", cp1, leaf(S(7), -2, 2, 22, 0));
    jag_tensor *xc = need_grad(from((double[]){-0.5, 0.7, 0, 2, -3, NAN}, S(6))), *yc = NULL;
    CHECK_OK(jag_clamp(xc, -0.5, 0.7, &yc));
    jag_tensor *gc = grad_of_sum(xc, yc);
    const double gw[6] = {1, 1, 1, 0, 0, 0};
    for (int i = 0; gc && i < 6; i++) CHECK_MSG(t_get(gc, i) == gw[i], "clamp gradient %d: %g, expected %g", i, t_get(gc, i), gw[i]);
    jag_release(gc), jag_release(xc);
    /* values float32 holds exactly, so the round trip is the identity */
    call td = {.k = K_TO_DTYPE};
    jag_tensor *xd = need_grad(from((double[]){0.5, -1.25, 3, 0.125}, S(2, 2)));
    /* a step float32 holds exactly around these values */
    CHECK_OK(jag_gradcheck(run_call, &td, &xd, 1, 1.0 / 1024, ATOL, RTOL));
    jag_release(xd);
    /* x * x through one node with the same input twice */
    jag_tensor *x = leaf(S(4), -2, 2, 19, 0);
    CHECK_OK(jag_gradcheck(f_mul_self, NULL, &x, 1, EPS, ATOL, RTOL));
    jag_release(x);
    /* to_dtype's gradient comes back in the input's dtype */
    jag_tensor *x32 = NULL, *y = NULL, *s = NULL, *g = NULL;
    CHECK_OK(jag_ones(S(3), JAG_FLOAT32, &x32));
    need_grad(x32);
    CHECK_OK(jag_to_dtype(x32, JAG_FLOAT64, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_OK(jag_get_grad(x32, &g));
    CHECK(g && jag_tensor_dtype(g) == JAG_FLOAT32 && t_get(g, 2) == 1.0);
    jag_release(g), jag_release(s), jag_release(y), jag_release(x32);
    /* mixed dtypes: each gradient in its input's dtype */
    jag_tensor *a32 = NULL, *b64 = need_grad(from((double[]){1.5, -2, 4}, S(3))), *ga = NULL, *gb = NULL;
    jag_tensor *a64 = from((double[]){0.5, 0.25, -1}, S(3));
    CHECK_OK(jag_to_dtype(a64, JAG_FLOAT32, &a32));
    need_grad(a32);
    CHECK_OK(jag_mul(a32, b64, &y));
    CHECK(jag_tensor_dtype(y) == JAG_FLOAT64);
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_OK(jag_get_grad(a32, &ga));
    CHECK_OK(jag_get_grad(b64, &gb));
    CHECK(ga && jag_tensor_dtype(ga) == JAG_FLOAT32 && t_get(ga, 0) == 1.5 && t_get(ga, 1) == -2);
    CHECK(gb && jag_tensor_dtype(gb) == JAG_FLOAT64 && t_get(gb, 2) == -1);
    jag_release(ga), jag_release(gb), jag_release(s), jag_release(y), jag_release(a32), jag_release(a64), jag_release(b64);
    /* an integer operand gets no gradient; the float one is scaled by it */
    jag_tensor *xi = need_grad(from((double[]){1, 2, 3}, S(3))), *bi = ints((double[]){2, -1, 5}, S(3), JAG_INT64);
    CHECK_OK(jag_mul(xi, bi, &y));
    g = grad_of_sum(xi, y);
    CHECK(g && t_get(g, 0) == 2 && t_get(g, 1) == -1 && t_get(g, 2) == 5);
    jag_release(g), jag_release(xi), jag_release(bi);
}

/* ---- views ---------------------------------------------------------------- */

static void test_views(void) {
    TEST_BEGIN();
    for (int layout = 0; layout < 3; layout++) {
        call c = {.k = K_VIEW, .sizes = {4, 3}, .nd = 2};
        if (layout == 0) GC("view", c, leaf(S(3, 4), -1, 1, 1, layout)); /* view needs viewable strides */
        c = (call){.k = K_RESHAPE, .sizes = {2, -1, 2}, .nd = 3};
        GC("reshape", c, leaf(S(3, 4), -1, 1, 2, layout));
        c = (call){.k = K_TRANSPOSE, .a = 0, .b2 = -1};
        GC("transpose", c, leaf(S(2, 3, 4), -1, 1, 3, layout));
        c = (call){.k = K_PERMUTE, .dims = {2, 0, 1}, .nd = 3};
        GC("permute", c, leaf(S(2, 3, 4), -1, 1, 4, layout));
        c = (call){.k = K_PERMUTE, .dims = {-1, 0, 1}, .nd = 3};
        GC("permute negative", c, leaf(S(2, 3, 4), -1, 1, 5, layout));
        c = (call){.k = K_NARROW, .a = 1, .start = 1, .len = 2};
        GC("narrow", c, leaf(S(2, 4, 3), -1, 1, 6, layout));
        c = (call){.k = K_NARROW, .a = -1, .start = -3, .len = 2};
        GC("narrow negative", c, leaf(S(2, 4, 3), -1, 1, 7, layout));
        c = (call){.k = K_NARROW, .a = 0, .start = 1, .len = 0};
        GC("narrow empty", c, leaf(S(2, 4, 3), -1, 1, 8, layout));
        c = (call){.k = K_SELECT, .a = 1, .start = 2};
        GC("select", c, leaf(S(2, 4, 3), -1, 1, 9, layout));
        c = (call){.k = K_SELECT, .a = -1, .start = -1};
        GC("select negative", c, leaf(S(2, 4, 3), -1, 1, 10, layout));
        c = (call){.k = K_UNSQUEEZE, .a = 1};
        GC("unsqueeze", c, leaf(S(3, 4), -1, 1, 11, layout));
        c = (call){.k = K_SQUEEZE, .a = 1};
        GC("squeeze", c, leaf(S(3, 1, 4), -1, 1, 12, layout));
        c = (call){.k = K_SQUEEZE_ALL};
        GC("squeeze_all", c, leaf(S(1, 3, 1, 4), -1, 1, 13, layout));
        c = (call){.k = K_EXPAND, .sizes = {2, 3, 4}, .nd = 3};
        GC("expand", c, leaf(S(3, 1), -1, 1, 14, layout));
        c = (call){.k = K_EXPAND, .sizes = {2, -1, 4}, .nd = 3};
        GC("expand -1", c, leaf(S(1, 3, 1), -1, 1, 15, layout));
        c = (call){.k = K_FLATTEN};
        GC("flatten", c, leaf(S(2, 3, 2), -1, 1, 16, layout));
        c = (call){.k = K_SPLIT, .a = 1, .len = 2};
        GC("split", c, leaf(S(2, 5), -1, 1, 17, layout));
        c = (call){.k = K_CHUNK, .a = 0, .len = 3};
        GC("chunk", c, leaf(S(5, 2), -1, 1, 18, layout));
        c = (call){.k = K_STACK, .a = 1};
        GC("stack", c, leaf(S(2, 3), -1, 1, 19, layout), leaf(S(2, 3), -1, 1, 20, 2 - layout));
        c = (call){.k = K_CAT, .a = -1};
        GC("cat", c, leaf(S(2, 3), -1, 1, 21, layout), leaf(S(2, 1), -1, 1, 22, 0), leaf(S(2, 4), -1, 1, 23, 2 - layout));
    }
    call e0 = {.k = K_EXPAND, .sizes = {3, 2}, .nd = 2};
    GC("expand 0-d", e0, leaf(NULL, 0, -1, 1, 24, 0));
    call u0 = {.k = K_UNSQUEEZE, .a = 0};
    GC("unsqueeze 0-d", u0, leaf(NULL, 0, -1, 1, 25, 0));
    /* cat skips empty 1-d tensors; they get an empty gradient */
    call c = {.k = K_CAT, .a = 0};
    GC("cat skipped", c, leaf(S(0), -1, 1, 26, 0), leaf(S(2, 3), -1, 1, 27, 0), leaf(S(1, 3), -1, 1, 28, 1));
}

/* ---- reductions ----------------------------------------------------------- */

static void test_reductions(void) {
    TEST_BEGIN();
    const kind ks[] = {K_SUM, K_MEAN, K_PROD, K_AMAX, K_AMIN, K_VAR, K_STD, K_LSE};
    const char *names[] = {"sum", "mean", "prod", "amax", "amin", "var", "std", "logsumexp"};
    const struct {
        int dims[3], nd;
        bool keep;
    } rd[] = {{{0}, 0, false}, {{1}, 1, false}, {{0, 2}, 2, true}, {{-1}, 1, true}, {{2, 0}, 2, false}};
    for (int k = 0; k < 8; k++)
        for (size_t r = 0; r < sizeof rd / sizeof rd[0]; r++)
            for (int layout = 0; layout < 3; layout++) {
                call c = {.k = ks[k], .nd = rd[r].nd, .keep = rd[r].keep, .corr = (int64_t)(r % 2)};
                memcpy(c.dims, rd[r].dims, sizeof c.dims[0] * 3);
                GC(names[k], c, leaf(S(2, 3, 4), k == 2 ? 0.5 : -2, 2, 500 + 10 * k + r, layout));
            }
    for (int k = 0; k < 8; k++) { /* 0-d input; size-1 and empty dims */
        call c = {.k = ks[k]};
        if (ks[k] != K_VAR && ks[k] != K_STD) GC(names[k], c, leaf(NULL, 0, 0.5, 2, 600 + k, 0));
        c = (call){.k = ks[k], .dims = {1}, .nd = 1, .corr = 0};
        GC(names[k], c, leaf(S(3, 1, 2), 0.5, 2, 610 + k, 1));
        if (ks[k] == K_SUM || ks[k] == K_MEAN || ks[k] == K_PROD) {
            c = (call){.k = ks[k], .dims = {0}, .nd = 1};
            GC(names[k], c, leaf(S(0, 3), 0.5, 2, 620 + k, 0));
        }
    }
    call mx = {.k = K_MAX}, mn = {.k = K_MIN};
    GC("max", mx, leaf(S(3, 4), -2, 2, 630, 1));
    GC("min", mn, leaf(S(3, 4), -2, 2, 631, 2));
    for (int layout = 0; layout < 3; layout++)
        for (int d = -1; d < 3; d++) {
            call c = {.k = K_MAX_DIM, .a = d, .keep = d == 1};
            GC("max_dim", c, leaf(S(2, 3, 4), -2, 2, 640 + d, layout));
            c.k = K_MIN_DIM;
            GC("min_dim", c, leaf(S(2, 3, 4), -2, 2, 650 + d, layout));
        }
    call m0 = {.k = K_MAX_DIM, .a = 0};
    GC("max_dim 0-d", m0, leaf(NULL, 0, -2, 2, 660, 0));
    /* prod with zeros in some slices: exact, not y / x */
    call p = {.k = K_PROD, .dims = {1}, .nd = 1};
    GC("prod zeros", p, need_grad(from((double[]){2, 0, 3, 0, 0, 5, 1.5, -2, 4, 0, 7, 0.5}, S(4, 3))));
    call pa = {.k = K_PROD};
    GC("prod one zero", pa, need_grad(from((double[]){2, 0, 3, 1.5}, S(4))));
}

/* ---- linear algebra, normalisation --------------------------------------- */

static void test_linalg(void) {
    TEST_BEGIN();
    for (int layout = 0; layout < 3; layout++) {
        call c = {.k = K_MM};
        GC("mm", c, leaf(S(3, 4), -1, 1, 1, layout), leaf(S(4, 2), -1, 1, 2, 2 - layout));
        GC("mm empty", c, leaf(S(0, 4), -1, 1, 3, layout), leaf(S(4, 2), -1, 1, 4, 0));
        c.k = K_BMM;
        GC("bmm", c, leaf(S(2, 3, 4), -1, 1, 5, layout), leaf(S(2, 4, 2), -1, 1, 6, 2 - layout));
        c.k = K_MATMUL;
        GC("matmul 2x2", c, leaf(S(3, 4), -1, 1, 7, layout), leaf(S(4, 2), -1, 1, 8, layout));
        GC("matmul 1x2", c, leaf(S(4), -1, 1, 9, layout), leaf(S(4, 2), -1, 1, 10, layout));
        GC("matmul 2x1", c, leaf(S(3, 4), -1, 1, 11, layout), leaf(S(4), -1, 1, 12, layout));
        GC("matmul 1x1", c, leaf(S(4), -1, 1, 13, layout), leaf(S(4), -1, 1, 14, layout));
        GC("matmul 3x2", c, leaf(S(2, 3, 4), -1, 1, 15, layout), leaf(S(4, 2), -1, 1, 16, layout));
        GC("matmul broadcast", c, leaf(S(2, 1, 3, 4), -1, 1, 17, layout), leaf(S(3, 4, 2), -1, 1, 18, layout));
        c = (call){.k = K_LINEAR, .has_b = 1};
        GC("linear", c, leaf(S(3, 4), -1, 1, 19, layout), leaf(S(2, 4), -1, 1, 20, 2 - layout), leaf(S(2), -1, 1, 21, 0));
        GC("linear 3-d", c, leaf(S(2, 3, 4), -1, 1, 22, layout), leaf(S(2, 4), -1, 1, 23, 0), leaf(S(2), -1, 1, 24, 0));
        GC("linear 1-d", c, leaf(S(4), -1, 1, 25, layout), leaf(S(2, 4), -1, 1, 26, layout), leaf(S(2), -1, 1, 27, 0));
        c.has_b = 0;
        GC("linear no bias", c, leaf(S(3, 4), -1, 1, 28, layout), leaf(S(2, 4), -1, 1, 29, layout));
    }
}

static void test_norms(void) {
    TEST_BEGIN();
    for (int layout = 0; layout < 3; layout++) {
        for (int d = -1; d < 3; d++) {
            call c = {.k = K_SOFTMAX, .a = d};
            GC("softmax", c, leaf(S(2, 3, 4), -2, 2, 10 + d, layout));
            c.k = K_LOG_SOFTMAX;
            GC("log_softmax", c, leaf(S(2, 3, 4), -2, 2, 20 + d, layout));
        }
        for (int nd = 1; nd <= 2; nd++)
            for (int wb = 0; wb < 4; wb++) {
                call c = {.k = K_LAYER_NORM, .a = nd, .has_w = wb & 1, .has_b = wb >> 1, .x = 1e-5};
                jag_tensor *x = leaf(S(2, 3, 4), -2, 2, 30 + nd * 4 + wb, layout);
                jag_tensor *w = nd == 1 ? leaf(S(4), 0.5, 1.5, 40, layout) : leaf(S(3, 4), 0.5, 1.5, 41, layout);
                jag_tensor *b = nd == 1 ? leaf(S(4), -1, 1, 42, 0) : leaf(S(3, 4), -1, 1, 43, 0);
                jag_tensor *in[3] = {x};
                int n = 1;
                if (c.has_w) in[n++] = w;
                else jag_release(w);
                if (c.has_b) in[n++] = b;
                else jag_release(b);
                gc_label("layer_norm", __LINE__, c, in, n);
                call r = {.k = K_RMS_NORM, .a = nd, .has_w = wb & 1, .x = 1e-6};
                x = leaf(S(2, 3, 4), -2, 2, 50 + nd * 4 + wb, layout);
                jag_tensor *rin[2] = {x, nd == 1 ? leaf(S(4), 0.5, 1.5, 60, layout) : leaf(S(3, 4), 0.5, 1.5, 61, layout)};
                if (!r.has_w) jag_release(rin[1]);
                gc_label("rms_norm", __LINE__, r, rin, 1 + r.has_w);
            }
    }
    call c = {.k = K_LAYER_NORM, .a = 3, .x = 1e-5};
    GC("layer_norm all dims", c, leaf(S(2, 3, 4), -2, 2, 70, 0));
}

/* ---- indexing ------------------------------------------------------------- */

static void test_indexing(void) {
    TEST_BEGIN();
    jag_dtype dts[] = {JAG_INT64, JAG_INT32};
    for (int t = 0; t < 2; t++)
        for (int layout = 0; layout < 3; layout++) {
            jag_tensor *idx = ints((double[]){2, 0, 2, 3, 2}, S(5), dts[t]); /* duplicates */
            call c = {.k = K_INDEX_SELECT, .a = 1, .idx = idx};
            GC("index_select", c, leaf(S(2, 4, 3), -1, 1, 1, layout));
            c.a = -1;
            jag_tensor *idx2 = ints((double[]){1, 1, 0}, S(3), dts[t]);
            c.idx = idx2;
            GC("index_select last", c, leaf(S(2, 4, 3), -1, 1, 2, layout));
            jag_tensor *gi = ints((double[]){0, 2, 2, 1, 1, 1, 0, 0}, S(2, 4), dts[t]);
            call g = {.k = K_GATHER, .a = 1, .idx = gi};
            GC("gather", g, leaf(S(2, 3), -1, 1, 3, layout));
            jag_tensor *gi0 = ints((double[]){1, 0, 1, 1}, S(2, 2), dts[t]); /* smaller than x outside dim */
            g = (call){.k = K_GATHER, .a = 0, .idx = gi0};
            GC("gather dim 0", g, leaf(S(2, 3), -1, 1, 4, layout));
            jag_tensor *ei = ints((double[]){3, 0, 3, 3, 1, 0}, S(2, 3), dts[t]);
            call e = {.k = K_EMBEDDING, .idx = ei};
            GC("embedding", e, leaf(S(5, 4), -1, 1, 5, layout));
            jag_release(idx), jag_release(idx2), jag_release(gi), jag_release(gi0), jag_release(ei);
        }
    jag_tensor *one = ints((double[]){0}, S(1), JAG_INT64), *e0 = NULL;
    call c = {.k = K_INDEX_SELECT, .a = 0, .idx = one};
    GC("index_select 0-d", c, leaf(NULL, 0, -1, 1, 6, 0));
    CHECK_OK(jag_empty(S(0), JAG_INT64, &e0));
    call e = {.k = K_EMBEDDING, .idx = e0};
    GC("embedding empty", e, leaf(S(5, 4), -1, 1, 7, 0));
    jag_release(one), jag_release(e0);
}

/* ---- nested: jagged ------------------------------------------------------- */

/* Each jagged case on a tensor without holes and one with holes. */
static jag_tensor *jagged_input(int variant, int64_t D, double lo, double hi, uint64_t seed) {
    return variant ? holes(D, lo, hi, seed) : nested3(JAG_JAGGED, D, lo, hi, seed);
}

static void test_jagged_pointwise(void) {
    TEST_BEGIN();
    for (int v = 0; v < 2; v++) {
        for (int i = 0; i < N_UNARY; i++) {
            call c = {.k = K_UNARY, .u = unary_ops[i].f};
            GC(unary_ops[i].name, c, jagged_input(v, 3, unary_ops[i].lo, unary_ops[i].hi, 100 + i));
        }
        for (int i = 0; i < N_BINARY; i++) {
            double alo = binary_ops[i].alo, ahi = binary_ops[i].ahi, blo = binary_ops[i].blo, bhi = binary_ops[i].bhi;
            call c = {.k = K_BINARY, .b = binary_ops[i].f};
            /* dense operands broadcast over the packed dims: (D), (1, D), (1, 1, D), (B, 1, D), (B, 1, 1) */
            GC(binary_ops[i].name, c, jagged_input(v, 3, alo, ahi, 200 + i), leaf(S(3), blo, bhi, 210 + i, 0));
            GC(binary_ops[i].name, c, jagged_input(v, 3, alo, ahi, 220 + i), leaf(S(1, 3), blo, bhi, 230 + i, 2));
            GC(binary_ops[i].name, c, jagged_input(v, 3, alo, ahi, 240 + i), leaf(S(1, 1, 3), blo, bhi, 250 + i, 1));
            GC(binary_ops[i].name, c, jagged_input(v, 3, alo, ahi, 260 + i), leaf(S(3, 1, 3), blo, bhi, 270 + i, 0));
            GC(binary_ops[i].name, c, jagged_input(v, 3, alo, ahi, 280 + i), leaf(S(3, 1, 1), blo, bhi, 290 + i, 0));
            GC(binary_ops[i].name, c, jagged_input(v, 3, alo, ahi, 300 + i), leaf(NULL, 0, blo, bhi, 310 + i, 0));
            /* scalar second argument */
            call s = {.k = K_SCALAR, .s = binary_ops[i].s, .x = 1.5};
            GC(binary_ops[i].name, s, jagged_input(v, 3, alo, ahi, 320 + i));
        }
        call add = {.k = K_ADD, .x = -0.5};
        GC("add", add, jagged_input(v, 3, -1, 1, 330), leaf(S(3, 1, 3), -1, 1, 331, 0));
        /* the dense operand first */
        for (int i = 0; i < N_BINARY; i++) {
            call c = {.k = K_BINARY, .b = binary_ops[i].f};
            GC(binary_ops[i].name, c, leaf(S(3, 1, 3), binary_ops[i].alo, binary_ops[i].ahi, 360 + i, 0),
               jagged_input(v, 3, binary_ops[i].blo, binary_ops[i].bhi, 370 + i));
            GC(binary_ops[i].name, c, leaf(S(3), binary_ops[i].alo, binary_ops[i].ahi, 380 + i, 0),
               jagged_input(v, 3, binary_ops[i].blo, binary_ops[i].bhi, 390 + i));
        }
        /* where with a nested condition */
        jag_tensor *r = jagged_input(v, 3, -1, 1, 340), *cond = NULL;
        CHECK_OK(jag_gt_scalar(r, 0, &cond));
        call w = {.k = K_WHERE, .cond = cond};
        GC("where", w, jagged_input(v, 3, -1, 1, 341), leaf(S(3), -1, 1, 342, 0));
        jag_release(cond), jag_release(r);
        call cl = {.k = K_CLONE};
        GC("clone", cl, jagged_input(v, 3, -1, 1, 343));
    }
    /* nested (*) nested with the same offsets: both get gradients */
    jag_tensor *a = nested3(JAG_JAGGED, 3, -1, 1, 350), *off = NULL, *va = NULL, *b = NULL, *bv = NULL;
    CHECK_OK(jag_nested_offsets(a, &off));
    bv = t_rand(S(6, 3), JAG_FLOAT64, -1, 1, 351);
    CHECK_OK(jag_nested_from_jagged(bv, off, NULL, &b));
    need_grad(b);
    call m = {.k = K_BINARY, .b = jag_mul};
    GC("nested * nested", m, a, b);
    jag_release(off), jag_release(va), jag_release(bv);
    /* values (B, j, 1) broadcast against (B, j, D) inside the values */
    a = nested3(JAG_JAGGED, 3, -1, 1, 352);
    CHECK_OK(jag_nested_offsets(a, &off));
    bv = t_rand(S(6, 1), JAG_FLOAT64, -1, 1, 353);
    CHECK_OK(jag_nested_from_jagged(bv, off, NULL, &b));
    need_grad(b);
    GC("nested * nested (j, 1)", m, a, b);
    jag_release(off), jag_release(bv);
}

static void test_jagged_ops(void) {
    TEST_BEGIN();
    for (int v = 0; v < 2; v++) {
        call c = {.k = K_SUM, .dims = {2}, .nd = 1};
        GC("sum", c, jagged_input(v, 3, -1, 1, 1));
        c.keep = true;
        GC("sum keepdim", c, jagged_input(v, 3, -1, 1, 2));
        c = (call){.k = K_MEAN, .dims = {-1}, .nd = 1, .keep = true};
        GC("mean", c, jagged_input(v, 3, -1, 1, 3));
        c = (call){.k = K_NARROW, .a = 2, .start = 1, .len = 2};
        GC("narrow", c, jagged_input(v, 4, -1, 1, 4));
        c = (call){.k = K_MM};
        GC("mm", c, jagged_input(v, 3, -1, 1, 5), leaf(S(3, 2), -1, 1, 6, 1));
        c = (call){.k = K_MATMUL};
        GC("matmul", c, jagged_input(v, 3, -1, 1, 50), leaf(S(3, 2), -1, 1, 51, 1));
        GC("matmul 1-d weight", c, jagged_input(v, 3, -1, 1, 52), leaf(S(3), -1, 1, 53, 0));
        c = (call){.k = K_LINEAR, .has_b = 1};
        GC("linear", c, jagged_input(v, 3, -1, 1, 7), leaf(S(2, 3), -1, 1, 8, 0), leaf(S(2), -1, 1, 9, 0));
        c.has_b = 0;
        GC("linear no bias", c, jagged_input(v, 3, -1, 1, 10), leaf(S(2, 3), -1, 1, 11, 2));
        c = (call){.k = K_VALUES};
        GC("values", c, jagged_input(v, 3, -1, 1, 12));
    }
    /* transpose of two inner dims of (B, j, 2, 3), and sum / mean over both */
    const int64_t sh[3][3] = {{2, 2, 3}, {0, 2, 3}, {3, 2, 3}};
    call t = {.k = K_TRANSPOSE, .a = 2, .b2 = -1};
    GC("transpose", t, nested(JAG_JAGGED, 3, sh, 3, -1, 1, 20));
    call s = {.k = K_SUM, .dims = {3, 2}, .nd = 2};
    GC("sum 2 dims", s, nested(JAG_JAGGED, 3, sh, 3, -1, 1, 21));
    call n = {.k = K_NARROW, .a = -1, .start = 0, .len = 2};
    GC("narrow 4-d", n, nested(JAG_JAGGED, 3, sh, 3, -1, 1, 22));
    /* max_dim / min_dim over the ragged dim (components not empty: torch
     * refuses the max of none): the gradient goes to the winning row of
     * each column (ragged_reduce_backward with the forward's indices) */
    const int64_t full3[3][3] = {{2, 3}, {1, 3}, {4, 3}};
    for (int keep = 0; keep < 2; keep++) {
        call m = {.k = K_MAX_DIM, .a = 1, .keep = keep};
        GC("max_dim ragged", m, nested(JAG_JAGGED, 3, full3, 2, -1, 1, 30 + keep));
        m.k = K_MIN_DIM;
        GC("min_dim ragged", m, nested(JAG_JAGGED, 3, full3, 2, -1, 1, 32 + keep));
    }
    /* the bridge from values to nested */
    jag_tensor *off = ints((double[]){0, 3, 3, 9}, S(4), JAG_INT64), *len = ints((double[]){2, 0, 4}, S(3), JAG_INT64);
    call fj = {.k = K_FROM_JAGGED, .off = off};
    GC("nested_from_jagged", fj, leaf(S(9, 3), -1, 1, 23, 0));
    fj.lens = len;
    GC("nested_from_jagged holes", fj, leaf(S(9, 3), -1, 1, 24, 1));
    jag_release(off), jag_release(len);
}

/* ---- nested: strided ------------------------------------------------------ */

/* components (2, 3), (0, 3), (4, 3); or differing in both dims */
static jag_tensor *strided_input(int variant, double lo, double hi, uint64_t seed) {
    if (!variant) return nested3(JAG_STRIDED, 3, lo, hi, seed);
    const int64_t sh[3][3] = {{2, 3}, {0, 2}, {3, 4}};
    return nested(JAG_STRIDED, 3, sh, 2, lo, hi, seed);
}

static void test_strided(void) {
    TEST_BEGIN();
    for (int v = 0; v < 2; v++) {
        for (int i = 0; i < N_UNARY; i += 3) {
            call c = {.k = K_UNARY, .u = unary_ops[i].f};
            GC(unary_ops[i].name, c, strided_input(v, unary_ops[i].lo, unary_ops[i].hi, 10 + i));
        }
        call sc = {.k = K_SCALAR, .s = jag_pow_scalar, .x = 2.5};
        GC("pow_scalar", sc, strided_input(v, 0.5, 2, 30));
        call c = {.k = K_SUM, .dims = {2}, .nd = 1};
        GC("sum", c, strided_input(v, -1, 1, 31));
        c = (call){.k = K_SUM, .dims = {1}, .nd = 1, .keep = true};
        GC("sum ragged dim", c, strided_input(v, -1, 1, 32));
        c = (call){.k = K_MEAN, .dims = {-1}, .nd = 1, .keep = true};
        GC("mean", c, strided_input(v, -1, 1, 33));
        c = (call){.k = K_PROD, .dims = {2}, .nd = 1};
        GC("prod", c, strided_input(v, 0.5, 2, 34));
        c = (call){.k = K_AMAX, .dims = {2}, .nd = 1};
        GC("amax", c, strided_input(v, -1, 1, 35));
        c = (call){.k = K_VAR, .dims = {2}, .nd = 1, .corr = 0};
        GC("var", c, strided_input(v, -1, 1, 36));
        c = (call){.k = K_STD, .dims = {2}, .nd = 1, .corr = 1};
        GC("std", c, strided_input(v, -1, 1, 37));
        c = (call){.k = K_MAX_DIM, .a = 2};
        GC("max_dim", c, strided_input(v, -1, 1, 38));
        c = (call){.k = K_SOFTMAX, .a = 2};
        GC("softmax", c, strided_input(v, -1, 1, 39));
        c = (call){.k = K_LOG_SOFTMAX, .a = 1};
        GC("log_softmax", c, strided_input(v, -1, 1, 40));
        c = (call){.k = K_TRANSPOSE, .a = 1, .b2 = 2};
        GC("transpose", c, strided_input(v, -1, 1, 41));
        c = (call){.k = K_NARROW, .a = 2, .start = 0, .len = 2};
        GC("narrow", c, strided_input(v, -1, 1, 42));
        c = (call){.k = K_SELECT, .a = 2, .start = 1};
        GC("select", c, strided_input(v, -1, 1, 43));
        c = (call){.k = K_UNSQUEEZE, .a = 2};
        GC("unsqueeze", c, strided_input(v, -1, 1, 44));
        jag_tensor *idx = ints((double[]){1, 0, 1}, S(3), JAG_INT64);
        c = (call){.k = K_INDEX_SELECT, .a = 2, .idx = idx};
        GC("index_select", c, strided_input(v, -1, 1, 45));
        jag_release(idx);
        c = (call){.k = K_RMS_NORM, .a = 1, .x = 1e-6};
        GC("rms_norm", c, strided_input(v, -1, 1, 46));
        /* nested (*) nested, same structure */
        call m = {.k = K_BINARY, .b = jag_mul};
        GC("nested * nested", m, strided_input(v, -1, 1, 47), strided_input(v, -1, 1, 48));
    }
    /* per-component view */
    call sq = {.k = K_SQUEEZE, .a = 2};
    const int64_t s1[2][3] = {{2, 1}, {3, 1}};
    GC("squeeze", sq, nested(JAG_STRIDED, 2, s1, 2, -1, 1, 72));
    /* a dense operand first */
    call d1 = {.k = K_BINARY, .b = jag_div};
    GC("dense / nested", d1, leaf(S(3, 1, 3), -1, 1, 74, 0), strided_input(0, 0.5, 2, 75));
    /* dense weights shared by every component: their gradient is the sum */
    call m = {.k = K_BINARY, .b = jag_mul};
    GC("mul dense (D)", m, strided_input(0, -1, 1, 50), leaf(S(3), -1, 1, 51, 0));
    GC("mul dense (B, 1, D)", m, strided_input(0, -1, 1, 52), leaf(S(3, 1, 3), -1, 1, 53, 1));
    GC("mul dense (1, 1, 1)", m, strided_input(1, -1, 1, 54), leaf(S(1, 1, 1), -1, 1, 55, 0));
    call a = {.k = K_ADD, .x = 0.5};
    GC("add dense", a, strided_input(0, -1, 1, 56), leaf(S(3, 1, 1), -1, 1, 57, 0));
    call mm = {.k = K_MM};
    GC("mm", mm, strided_input(0, -1, 1, 58), leaf(S(3, 2), -1, 1, 59, 2));
    call lin = {.k = K_LINEAR, .has_b = 1};
    GC("linear", lin, strided_input(0, -1, 1, 60), leaf(S(2, 3), -1, 1, 61, 0), leaf(S(2), -1, 1, 62, 0));
    call ln = {.k = K_LAYER_NORM, .a = 1, .has_w = 1, .has_b = 1, .x = 1e-5};
    GC("layer_norm", ln, strided_input(0, -1, 1, 63), leaf(S(3), 0.5, 1.5, 64, 0), leaf(S(3), -1, 1, 65, 0));
    /* bmm of nested (B, n_i, k) @ nested (B, k, m) */
    const int64_t sa[2][3] = {{2, 3}, {1, 3}}, sb[2][3] = {{3, 2}, {3, 4}};
    call bm = {.k = K_BMM};
    GC("bmm", bm, nested(JAG_STRIDED, 2, sa, 2, -1, 1, 66), nested(JAG_STRIDED, 2, sb, 2, -1, 1, 67));
}

/* ---- gradients by hand ----------------------------------------------------- */

/* backward from sum(f(x)) (or from f(x) when it has one element) and the
 * gradient of x */
static jag_tensor *grad_of(jag_tensor *x, jag_tensor *y) {
    jag_tensor *s = NULL, *g = NULL, *ones = NULL;
    if (jag_is_nested(y)) { /* a nested root: an explicit gradient of ones */
        CHECK_OK(jag_ones_like(y, &ones));
        CHECK_OK(jag_backward(y, ones, false));
        jag_release(ones);
        CHECK_OK(jag_get_grad(x, &g));
        jag_release(y);
        return g;
    }
    if (jag_numel(y) == 1) s = jag_retain(y);
    else CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_OK(jag_get_grad(x, &g));
    jag_release(s), jag_release(y);
    return g;
}

static bool equals(const jag_tensor *g, const double *want, int64_t n) {
    if (!g || jag_numel(g) != n) return false;
    for (int64_t i = 0; i < n; i++)
        if (fabs(t_get(g, i) - want[i]) > 1e-12) {
            fprintf(stderr, "element %lld: %.17g, expected %.17g\n", (long long)i, t_get(g, i), want[i]);
            return false;
        }
    return true;
}

static void test_by_hand(void) {
    TEST_BEGIN();
    jag_tensor *x = need_grad(from((double[]){1, -2, 3}, S(3))), *y = NULL, *g;
    /* d/dx sum(x * x) = 2x */
    CHECK_OK(jag_mul(x, x, &y));
    g = grad_of(x, y);
    CHECK(equals(g, (double[]){2, -4, 6}, 3));
    jag_release(g), jag_release(x);
    /* softmax of a 2-vector: y = (1/4, 3/4); d y0 / dx = y0 (e0 - y) */
    x = need_grad(from((double[]){0, log(3.0)}, S(2)));
    jag_tensor *sm = NULL;
    CHECK_OK(jag_softmax(x, 0, &sm));
    CHECK_OK(jag_select(sm, 0, 0, &y));
    jag_release(sm);
    g = grad_of(x, y);
    CHECK(g && fabs(t_get(g, 0) - 0.1875) < 1e-15 && fabs(t_get(g, 1) + 0.1875) < 1e-15);
    jag_release(g), jag_release(x);
    /* amax splits the gradient evenly among ties; max_dim gives it to the first */
    x = need_grad(from((double[]){1, 3, 3, 2}, S(4)));
    CHECK_OK(jag_amax(x, NULL, 0, false, &y));
    g = grad_of(x, y);
    CHECK(equals(g, (double[]){0, 0.5, 0.5, 0}, 4));
    jag_release(g), jag_zero_grad(x);
    jag_tensor *idx = NULL;
    CHECK_OK(jag_max_dim(x, 0, false, &y, &idx));
    g = grad_of(x, y);
    CHECK(equals(g, (double[]){0, 1, 0, 0}, 4));
    jag_release(g), jag_release(idx), jag_release(x);
    /* prod with zeros */
    const double pv[3][3] = {{2, 0, 3}, {0, 0, 3}, {2, 4, 0.5}}, pg[3][3] = {{0, 6, 0}, {0, 0, 0}, {2, 1, 8}};
    for (int k = 0; k < 3; k++) {
        x = need_grad(from(pv[k], S(3)));
        CHECK_OK(jag_prod(x, NULL, 0, false, &y));
        g = grad_of(x, y);
        CHECK(equals(g, pg[k], 3));
        jag_release(g), jag_release(x);
    }
    /* maximum: a tie gives each side half */
    jag_tensor *a = need_grad(from((double[]){1, 2}, S(2))), *b = need_grad(from((double[]){1, 3}, S(2))), *gb = NULL;
    CHECK_OK(jag_maximum(a, b, &y));
    g = grad_of(a, y);
    CHECK_OK(jag_get_grad(b, &gb));
    CHECK(equals(g, (double[]){0.5, 0}, 2) && equals(gb, (double[]){0.5, 1}, 2));
    jag_release(g), jag_release(gb), jag_release(a), jag_release(b);
    /* relu and abs at 0: 0 */
    x = need_grad(from((double[]){0, -1, 2}, S(3)));
    CHECK_OK(jag_relu(x, &y));
    g = grad_of(x, y);
    CHECK(equals(g, (double[]){0, 0, 1}, 3));
    jag_release(g), jag_zero_grad(x);
    CHECK_OK(jag_abs(x, &y));
    g = grad_of(x, y);
    CHECK(equals(g, (double[]){0, -1, 1}, 3));
    jag_release(g), jag_release(x);
    /* duplicate indices accumulate */
    x = need_grad(from((double[]){5, 6, 7}, S(3)));
    idx = ints((double[]){0, 0, 2, 0}, S(4), JAG_INT64);
    CHECK_OK(jag_index_select(x, 0, idx, &y));
    g = grad_of(x, y);
    CHECK(equals(g, (double[]){3, 0, 1}, 3));
    jag_release(g), jag_release(x), jag_release(idx);
    x = need_grad(from((double[]){1, 2, 3, 4, 5, 6}, S(3, 2)));
    idx = ints((double[]){2, 2, 0}, S(3), JAG_INT32);
    CHECK_OK(jag_embedding(x, idx, &y));
    g = grad_of(x, y);
    CHECK(equals(g, (double[]){1, 1, 0, 0, 2, 2}, 6));
    jag_release(g), jag_release(x), jag_release(idx);
    /* jagged mm: the weight's gradient is values^T @ grad values */
    jag_tensor *nt = nested3(JAG_JAGGED, 2, -1, 1, 7), *w = need_grad(from((double[]){1, 2, 3, 4, 5, 6}, S(2, 3)));
    CHECK_OK(jag_mm(nt, w, &y));
    g = grad_of(w, y);
    jag_tensor *vals = NULL, *cs = NULL;
    CHECK_OK(jag_nested_values(nt, &vals));
    CHECK_OK(jag_sum(vals, (int[]){0}, 1, false, &cs)); /* values^T @ ones: column sums, repeated */
    double want[6];
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++) want[r * 3 + k] = t_get(cs, r);
    CHECK(equals(g, want, 6));
    jag_release(g), jag_release(vals), jag_release(cs), jag_release(nt), jag_release(w);
}

/* ---- the structure of nested gradients ------------------------------------ */

static void check_same_structure(const jag_tensor *x, const jag_tensor *g, int line) {
    CHECK_MSG(g && jag_is_nested(g) && jag_tensor_layout(g) == jag_tensor_layout(x), "line %d: not nested like x", line);
    if (!g || !jag_is_nested(g)) return;
    jag_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    if (jag_tensor_layout(x) == JAG_JAGGED) {
        CHECK_OK(jag_nested_offsets(x, &a));
        CHECK_OK(jag_nested_offsets(g, &b));
        CHECK_OK(jag_nested_lengths(x, &c));
        CHECK_OK(jag_nested_lengths(g, &d));
    } else {
        CHECK_OK(jag_nested_sizes_table(x, &a));
        CHECK_OK(jag_nested_sizes_table(g, &b));
        CHECK_OK(jag_nested_strides_table(x, &c));
        CHECK_OK(jag_nested_strides_table(g, &d));
    }
    CHECK_MSG(a == b && c == d, "line %d: the gradient's offsets / tables are other objects than the input's", line);
    jag_release(a), jag_release(b), jag_release(c), jag_release(d);
}

static jag_status f_chain(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    /* out = sum_dim2(linear(sin(x) * w, W)) over a nested x */
    (void)n, (void)ctx;
    jag_tensor *s = NULL, *m = NULL, *l = NULL;
    jag_status st = jag_sin(in[0], &s);
    if (!st) st = jag_mul(s, in[1], &m);
    if (!st) st = jag_linear(m, in[2], NULL, &l);
    if (!st) st = jag_sum(l, (int[]){2}, 1, false, out);
    jag_release(s), jag_release(m), jag_release(l);
    return st;
}

static void test_nested_structure(void) {
    TEST_BEGIN();
    jag_tensor *xs[] = {nested3(JAG_JAGGED, 3, -1, 1, 1), holes(3, -1, 1, 2), nested3(JAG_STRIDED, 3, -1, 1, 3)};
    for (int i = 0; i < 3; i++) {
        jag_tensor *x = xs[i], *y = NULL, *g = NULL, *w = leaf(S(3, 1, 3), -1, 1, 4, 0), *d = NULL;
        /* through a chain of rules: pointwise, dense broadcast, reduction, view */
        jag_tensor *t1 = NULL, *t2 = NULL;
        CHECK_OK(jag_sin(x, &t1));
        CHECK_OK(jag_mul(t1, w, &t2));
        CHECK_OK(jag_narrow(t2, 2, 1, 2, &y));
        jag_release(t1), jag_release(t2);
        g = grad_of(x, y);
        check_same_structure(x, g, __LINE__);
        CHECK_OK(jag_get_grad(w, &d));
        CHECK(d && !jag_is_nested(d) && jag_ndim(d) == 3 && jag_size(d, 0) == 3);
        jag_release(g), jag_release(d), jag_zero_grad(x);
        /* and gradcheck of the whole chain, with a dense weight of both shapes */
        jag_tensor *W = leaf(S(2, 3), -1, 1, 5, 0);
        jag_tensor *in[] = {x, w, W};
        CHECK_MSG(jag_gradcheck(f_chain, NULL, in, 3, EPS, ATOL, RTOL) == JAG_OK, "%s", jag_last_error());
        jag_release(W), jag_release(w), jag_release(x);
    }
    /* more rules: run, backward with ones, compare structures */
    jag_tensor *w32 = leaf(S(3, 2), -1, 1, 7, 0), *w23 = leaf(S(2, 3), -1, 1, 8, 0);
    const struct {
        call c;
        int extra; /* 0: none, 1: w (3, 2), 2: w (2, 3) */
    } cases[] = {
        {{.k = K_MM}, 1},
        {{.k = K_LINEAR}, 2},
        {{.k = K_SUM, .dims = {2}, .nd = 1, .keep = true}, 0},
        {{.k = K_MEAN, .dims = {-1}, .nd = 1}, 0},
        {{.k = K_NARROW, .a = 2, .start = 1, .len = 1}, 0},
        {{.k = K_UNARY, .u = jag_gelu}, 0},
        {{.k = K_SOFTMAX, .a = 2}, 0},
        {{.k = K_LAYER_NORM, .a = 1, .x = 1e-5}, 0},
        {{.k = K_TRANSPOSE, .a = 1, .b2 = 2}, 0},
    };
    for (int layout = 0; layout < 3; layout++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            kind k = cases[i].c.k;
            if (layout < 2 && (k == K_SOFTMAX || k == K_LAYER_NORM || k == K_TRANSPOSE)) continue; /* not jagged ops */
            jag_tensor *nx = layout == 0 ? nested3(JAG_JAGGED, 3, -1, 1, 9) : layout == 1 ? holes(3, -1, 1, 10)
                                                                            : nested3(JAG_STRIDED, 3, -1, 1, 11);
            jag_tensor *in[2] = {nx, cases[i].extra == 1 ? w32 : w23}, *out = NULL;
            call c = cases[i].c;
            CHECK_OK(run_call(in, 1 + (cases[i].extra != 0), &out, &c));
            jag_tensor *gx = out ? grad_of(nx, out) : NULL;
            check_same_structure(nx, gx, __LINE__ * 100 + (int)i);
            jag_release(gx), jag_release(nx);
        }
    jag_release(w32), jag_release(w23);
    /* a strided view (transposed tables) gets a gradient with its own tables */
    jag_tensor *x = nested3(JAG_STRIDED, 3, -1, 1, 6), *xt = NULL, *det = NULL, *y = NULL, *g = NULL;
    CHECK_OK(jag_transpose(x, 1, 2, &xt));
    CHECK_OK(jag_detach(xt, &det));
    need_grad(det);
    CHECK_OK(jag_exp(det, &y));
    g = grad_of(det, y);
    check_same_structure(det, g, __LINE__);
    jag_release(g), jag_release(det), jag_release(xt), jag_release(x);
}

/* ---- errors --------------------------------------------------------------- */

static jag_status bad_forward(jag_autograd_ctx *ctx, jag_tensor *const *in, int n, jag_tensor **outs) {
    (void)n;
    jag_status st = jag_autograd_save(ctx, in, 1);
    return st ? st : jag_sin(in[0], &outs[0]);
}
/* the wrong derivative of sin: g * sin(x) instead of g * cos(x) */
static jag_status bad_backward(jag_autograd_ctx *ctx, jag_tensor *const *g, jag_tensor **gi) {
    int n = 0;
    jag_tensor *const *saved = jag_autograd_saved(ctx, &n), *s = NULL;
    jag_status st = jag_sin(saved[0], &s);
    if (!st) st = jag_mul(g[0], s, &gi[0]);
    jag_release(s);
    return st;
}
static const jag_function_def bad_sin = {.name = "bad_sin", .n_outputs = 1, .forward = bad_forward, .backward = bad_backward};
static jag_status f_bad(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)ctx;
    return jag_function_apply(&bad_sin, in, n, out);
}
static jag_status f_fails(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx, (void)out;
    jag_tensor *bad = NULL;
    return jag_mm(in[0], in[0], &bad); /* (3) @ (3): not 2-d */
}
static jag_status f_int_out(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)n, (void)ctx;
    return jag_argmax(in[0], 0, false, out);
}
static jag_status f_const(jag_tensor *const *in, int n, jag_tensor **out, void *ctx) {
    (void)in, (void)n, (void)ctx;
    return jag_ones(S(2), JAG_FLOAT64, out);
}

static void test_errors(void) {
    TEST_BEGIN();
    jag_tensor *x = leaf(S(3), -1, 1, 1, 0), *y = NULL, *s = NULL, *g = NULL, *plain = t_rand(S(3), JAG_FLOAT64, -1, 1, 2);
    CHECK_OK(jag_sin(x, &y));
    CHECK_ERR(jag_backward(y, NULL, false), JAG_ESHAPE, "a gradient is needed");
    CHECK_ERR(jag_backward(plain, NULL, false), JAG_ESTATE, "does not require grad");
    jag_tensor *g32 = NULL, *g4 = NULL;
    CHECK_OK(jag_ones(S(3), JAG_FLOAT32, &g32));
    CHECK_OK(jag_ones(S(4), JAG_FLOAT64, &g4));
    CHECK_ERR(jag_backward(y, g32, false), JAG_EDTYPE, "dtype float32");
    CHECK_ERR(jag_backward(y, g4, false), JAG_ESHAPE, "'grad' has shape [4]");
    CHECK_OK(jag_get_grad(x, &g));
    CHECK(g == NULL); /* no failed call changed .grad */
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    CHECK_ERR(jag_backward(s, NULL, false), JAG_ESTATE, "freed");
    jag_release(g32), jag_release(g4), jag_release(s), jag_release(y);
    /* grad mode off: nothing recorded */
    bool prev = jag_set_grad_enabled(false);
    CHECK_OK(jag_sin(x, &y));
    jag_set_grad_enabled(prev);
    CHECK(!jag_requires_grad(y));
    CHECK_ERR(jag_backward(y, NULL, false), JAG_ESTATE, "does not require grad");
    jag_release(y);

    /* gradcheck: a wrong derivative is found, with the worst element named */
    jag_zero_grad(x);
    CHECK_ERR(jag_gradcheck(f_bad, NULL, &x, 1, EPS, ATOL, RTOL), JAG_EINVAL, "input 0, element");
    CHECK(strstr(jag_last_error(), "analytic") && strstr(jag_last_error(), "numeric"));
    /* fn's own error comes through */
    CHECK_ERR(jag_gradcheck(f_fails, NULL, &x, 1, EPS, ATOL, RTOL), JAG_ESHAPE, "jag_mm");
    CHECK_ERR(jag_gradcheck(f_int_out, NULL, &x, 1, EPS, ATOL, RTOL), JAG_EDTYPE, "output 0 has dtype int64");
    /* an output that does not depend on the inputs: a zero Jacobian, which matches */
    CHECK_OK(jag_gradcheck(f_const, NULL, &x, 1, EPS, ATOL, RTOL));
    call c = {.k = K_UNARY, .u = jag_sin};
    CHECK_ERR(jag_gradcheck(run_call, &c, &plain, 1, EPS, ATOL, RTOL), JAG_EINVAL, "no input requires grad");
    CHECK_ERR(jag_gradcheck(run_call, &c, &x, 1, 0.0, ATOL, RTOL), JAG_EINVAL, "'eps'");
    CHECK_ERR(jag_gradcheck(run_call, &c, &x, 1, EPS, -1, RTOL), JAG_EINVAL, "'atol'");
    CHECK_ERR(jag_gradcheck(NULL, &c, &x, 1, EPS, ATOL, RTOL), JAG_EINVAL, "'fn'");
    CHECK_ERR(jag_gradcheck(run_call, &c, &x, 0, EPS, ATOL, RTOL), JAG_EINVAL, "'inputs'");
    jag_tensor *two[] = {x, x};
    CHECK_ERR(jag_gradcheck(run_call, &c, two, 2, EPS, ATOL, RTOL), JAG_EINVAL, "same tensor");
    jag_tensor *f32 = NULL, *e = NULL, *base = t_rand(S(1, 3), JAG_FLOAT64, -1, 1, 3);
    CHECK_OK(jag_ones(S(3), JAG_FLOAT32, &f32));
    need_grad(f32);
    CHECK_ERR(jag_gradcheck(run_call, &c, &f32, 1, EPS, ATOL, RTOL), JAG_EDTYPE, "expected float64");
    CHECK_OK(jag_expand(base, S(2, 3), &e));
    need_grad(e);
    CHECK_ERR(jag_gradcheck(run_call, &c, &e, 1, EPS, ATOL, RTOL), JAG_EINVAL, "share memory");
    jag_release(f32), jag_release(e), jag_release(base);

    /* gradcheck leaves inputs as they were: values bit for bit, and .grad */
    jag_tensor *before = NULL, *g0 = NULL, *g1 = NULL;
    CHECK_OK(jag_sin(x, &y));
    CHECK_OK(jag_sum(y, NULL, 0, false, &s));
    CHECK_OK(jag_backward(s, NULL, false));
    jag_release(s), jag_release(y);
    CHECK_OK(jag_get_grad(x, &g0));
    prev = jag_set_grad_enabled(false);
    CHECK_OK(jag_clone(x, &before));
    jag_set_grad_enabled(prev);
    call sq = {.k = K_UNARY, .u = jag_tanh};
    CHECK_OK(jag_gradcheck(run_call, &sq, &x, 1, EPS, ATOL, RTOL));
    CHECK(t_allclose(x, before, 0, 0));
    CHECK_OK(jag_get_grad(x, &g1));
    CHECK(g0 && g1 == g0);
    jag_release(g1), jag_release(before);
    /* and on a failure too */
    prev = jag_set_grad_enabled(false);
    CHECK_OK(jag_clone(x, &before));
    jag_set_grad_enabled(prev);
    CHECK_ERR(jag_gradcheck(f_bad, NULL, &x, 1, EPS, ATOL, RTOL), JAG_EINVAL, "analytic");
    CHECK(t_allclose(x, before, 0, 0));
    CHECK_OK(jag_get_grad(x, &g1));
    CHECK(g1 == g0);
    jag_release(g1), jag_release(before);
    /* a nested input with holes: its values are restored too */
    jag_tensor *h = holes(3, -1, 1, 4), *hv = NULL, *hv0 = NULL;
    CHECK_OK(jag_nested_values(h, &hv));
    CHECK_OK(jag_clone(hv, &hv0));
    CHECK_OK(jag_gradcheck(run_call, &sq, &h, 1, EPS, ATOL, RTOL));
    CHECK(t_allclose(hv, hv0, 0, 0));
    jag_release(hv), jag_release(hv0), jag_release(h);
    jag_release(g0), jag_release(x), jag_release(plain);
}

/* ---- the table and jag__sum_to directly ---------------------------------- */

static void test_table(void) {
    TEST_BEGIN();
    /* no derivative exactly for the rows tagged NONDIFF (comparisons, arg
     * ops) or NO_DERIVATIVE (the backward kernels: no second derivatives) */
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        bool want_null = jag_op_tags(op) & (JAG_TAG_NONDIFF | JAG_TAG_NO_DERIVATIVE);
        CHECK_MSG((jag__derivatives[op] == NULL) == want_null, "op %s: rule %s", jag_op_name(op),
                  jag__derivatives[op] ? "present" : "missing");
    }
    /* the tags where they belong, spot-checked by hand */
    const int none[] = {JAG_OP_eq, JAG_OP_ge, JAG_OP_argmax, JAG_OP_argmin, JAG_OP_ragged_reduce_backward,
                        JAG_OP_varlen_attention_backward, JAG_OP_layer_norm_backward, JAG_OP_softmax_backward,
                        JAG_OP_mean_backward, JAG_OP_ragged_softmax_backward};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) CHECK(jag__derivatives[none[i]] == NULL);
    CHECK(jag__derivatives[JAG_OP_ragged_softmax] && jag__derivatives[JAG_OP_softmax] && jag__derivatives[JAG_OP_sign]);
}

static void test_sum_to(void) {
    TEST_BEGIN();
    jag_tensor *g = from((double[]){1, 2, 3, 4, 5, 6}, S(2, 3)), *like = NULL, *r = NULL;
    CHECK_OK(jag_zeros(S(3), JAG_FLOAT64, &like));
    CHECK_OK(jag__sum_to(g, like, &r));
    CHECK(r && t_same_shape(r, like) && equals(r, (double[]){5, 7, 9}, 3));
    jag_release(r), jag_release(like);
    CHECK_OK(jag_zeros(S(2, 1), JAG_FLOAT64, &like));
    CHECK_OK(jag__sum_to(g, like, &r));
    CHECK(r && t_same_shape(r, like) && equals(r, (double[]){6, 15}, 2));
    jag_release(r), jag_release(like);
    CHECK_OK(jag_zeros(NULL, 0, JAG_FLOAT64, &like));
    CHECK_OK(jag__sum_to(g, like, &r));
    CHECK(r && jag_ndim(r) == 0 && equals(r, (double[]){21}, 1));
    jag_release(r), jag_release(like);
    CHECK_OK(jag_zeros(S(2, 3), JAG_FLOAT64, &like));
    CHECK_OK(jag__sum_to(g, like, &r));
    CHECK(r == g); /* nothing to reduce */
    jag_release(r), jag_release(like);
    CHECK_OK(jag_zeros(S(2), JAG_FLOAT64, &like));
    CHECK_ERR(jag__sum_to(g, like, &r), JAG_ESHAPE, "does not reduce to shape [2]");
    jag_release(like), jag_release(g);
    /* jagged g (components of 2, 0 and 4 rows) onto a dense (B, 1, D): a
     * segment sum per component */
    jag_tensor *nt = nested3(JAG_JAGGED, 2, -1, 1, 5), *vals = NULL;
    CHECK_OK(jag_nested_values(nt, &vals));
    CHECK_OK(jag_zeros(S(3, 1, 2), JAG_FLOAT64, &like));
    CHECK_OK(jag__sum_to(nt, like, &r));
    double want[6] = {0};
    for (int row = 0; row < 6; row++)
        for (int d = 0; d < 2; d++) want[(row < 2 ? 0 : 2) * 2 + d] += t_get(vals, row * 2 + d);
    CHECK(r && t_same_shape(r, like) && equals(r, want, 6));
    jag_release(r), jag_release(like);
    CHECK_OK(jag_zeros(S(2), JAG_FLOAT64, &like)); /* (D): over every row */
    CHECK_OK(jag__sum_to(nt, like, &r));
    CHECK(r && equals(r, (double[]){want[0] + want[4], want[1] + want[5]}, 2));
    jag_release(r), jag_release(like);
    CHECK_OK(jag_zeros(S(2, 1, 2), JAG_FLOAT64, &like)); /* B = 3 rows expected */
    CHECK_ERR(jag__sum_to(nt, like, &r), JAG_ESHAPE, "was not broadcast");
    jag_release(like), jag_release(vals), jag_release(nt);
}

/* A rule asked for a nested input its forward never takes says so, naming
 * the op. */
static void test_no_nested_rule(void) {
    TEST_BEGIN();
    jag_tensor *x = nested3(JAG_JAGGED, 3, -1, 1, 1), *g = nested3(JAG_JAGGED, 3, -1, 1, 2), *idx = NULL;
    idx = ints((double[]){0, 1}, S(2), JAG_INT64);
    jag_value args[] = {{.kind = JAG_VAL_TENSOR, .u.t = x}, {.kind = JAG_VAL_INT, .u.i = 2}, {.kind = JAG_VAL_TENSOR, .u.t = idx}};
    bool needs[2] = {true, false};
    jag_tensor *outs[1] = {g}, *gi[2] = {NULL, NULL};
    jag_grad_ctx c = {JAG_OP_gather, "jag_gather", args, 3, outs, 1, needs, 2};
    CHECK_ERR(jag__derivatives[JAG_OP_gather](&c, outs, gi), JAG_ENOTIMPL, "jag_gather: no derivative for jagged");
    CHECK(gi[0] == NULL && gi[1] == NULL);
    jag_release(x), jag_release(g), jag_release(idx);
}

TEST_MAIN(test_table, test_sum_to, test_no_nested_rule, test_unary_dense, test_binary_dense, test_where_clone_to_dtype, test_views, test_reductions, test_linalg,
          test_norms, test_indexing, test_jagged_pointwise, test_jagged_ops, test_strided, test_by_hand,
          test_nested_structure, test_errors)
