/* test_op_harness.c — one harness over every built-in op (the rows of
 * src/dispatch/ops.def), in the manner of ggml's test-backend-ops and
 * PyTorch's OpInfo tests.
 *
 * Each op row is given a family: a function that builds its sample inputs
 * as boxed arguments (OpInfo's sample_inputs) for a dtype, and a reference
 * that computes the same outputs independently (the naive jag__ref_*
 * functions beside the kernels, or a formula written here). The loop over
 * every row 0..JAG_OP_BUILTIN_COUNT-1 then runs, where they apply:
 *   (a) kernel vs reference, float32 and float64 (and int32 / int64 where
 *       the op takes them), on contiguous, transposed, sliced and broadcast
 *       (stride 0) inputs;
 *   (b) strided vs contiguous: op(non-contiguous copy) equals op(x) exactly
 *       (families that sum in an order following the layout: reductions,
 *       GEMMs, norms, softmax, attention, within the reference tolerance);
 *   (c) nested vs per-component: op(nt) unbound equals op(component) for
 *       each component (torch.nested's semantics for these ops), on jagged
 *       tensors and, for pointwise ops, reductions and gather, strided ones;
 *   (d) gradcheck by central finite differences in float64 (jag_gradcheck);
 *   (e) compiled vs eager: the op traced and compiled with every pass; for
 *       pointwise ops inside a chain with scalar operands on either side of a
 *       subtraction (y - 2.5, 2.5 - (y - 2.5), ...), which the fuser turns
 *       into one fused kernel.
 * A row with no family fails the test unless it is in `not_covered` below
 * with its reason. One summary line per check kind is printed. */
#include "test.h"
#include "dispatch/dispatch.h"
#include "dispatch/pointwise_op.h"
#include "cpu/kernels.h"
#include "cpu/pointwise_math.h"
#include "cpu/attention.h"
#include "trace/trace.h"

/* References beside the kernels (src/cpu), declared where they are defined. */
jag_status jag__ref_sum(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_mean(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_prod(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_amax(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_amin(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_logsumexp(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_var(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_std(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_max_dim(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_min_dim(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_argmax(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_argmin(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_mean_backward(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_softmax(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_log_softmax(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_softmax_backward(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_activation_backward(jag_op_id, const jag_value *, int, jag_tensor **);
jag_status jag__ref_log_softmax_backward(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_layer_norm(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_rms_norm(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_layer_norm_backward(const char *, const jag_value *, int, jag_tensor **);
jag_status jag__ref_rms_norm_backward(const char *, const jag_value *, int, jag_tensor **);
void jag__ref_mm(const jag_tensor *a, const jag_tensor *b, jag_tensor *out);
void jag__ref_bmm(const jag_tensor *a, const jag_tensor *b, jag_tensor *out);
void jag__ref_linear(const jag_tensor *x, const jag_tensor *w, const jag_tensor *bias, jag_tensor *out);
jag_status jag__ref_index_select(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor *out);
jag_status jag__ref_gather(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor *out);
jag_status jag__ref_embedding(const jag_tensor *weight, const jag_tensor *indices, jag_tensor *out);
jag_status jag__ref_embedding_bag(const jag_value *args, int nargs, jag_tensor *out);
void jag__ref_cat(jag_tensor *const *xs, int n, int dim, jag_tensor *out);

#define MAX_ARGS 12
#define MAX_SLOTS 12
#define MAX_OUT 3

/* ---- samples: boxed arguments that own their tensors ---------------------- */

typedef struct sample {
    jag_value a[MAX_ARGS];
    int n;
    jag_tensor *own[24];
    int n_own;
    int64_t ints[4][8];
    int n_ints;
    jag_tensor *list[6];
    char what[96];
    unsigned grad_slots; /* bit i: tensor slot i is perturbed by gradcheck */
    unsigned dim_args;   /* bit i: arg i is a dim (or dim list) of the outer tensor,
                            one less for a component (check c) */
    unsigned size_args;  /* bit i: arg i is the outer sizes (B, ...); a component
                            takes them without the batch size (check c) */
    bool batch_of_one;   /* check c: the op takes each component as a batch of
                            one (unsqueezed at 0) and gives its result's item 0 */
    bool no_strided;     /* a layout variant would change what the op means */
} sample;

static jag_tensor *own(sample *s, jag_tensor *t) {
    s->own[s->n_own++] = t;
    return t;
}
static void arg_t(sample *s, jag_tensor *t) { s->a[s->n++] = jag__v_tensor(own(s, t)); }
static void arg_none(sample *s) { s->a[s->n++] = jag__v_tensor(NULL); }
static void arg_d(sample *s, double d) { s->a[s->n++] = jag__v_double(d); }
static void arg_i(sample *s, int64_t i) { s->a[s->n++] = jag__v_int(i); }
static void arg_b(sample *s, bool b) { s->a[s->n++] = jag__v_bool(b); }
static void arg_ints(sample *s, const int64_t *v, int n) {
    int64_t *p = s->ints[s->n_ints++];
    if (n) memcpy(p, v, (size_t)n * sizeof *v);
    s->a[s->n++] = jag__v_ints(p, n);
}
static void arg_list(sample *s, jag_tensor *const *ts, int n) {
    for (int i = 0; i < n; i++) s->list[i] = own(s, ts[i]);
    s->a[s->n++] = jag__v_tensors(s->list, n);
}
static void sample_free(sample *s) {
    for (int i = 0; i < s->n_own; i++) jag_release(s->own[i]);
    memset(s, 0, sizeof *s);
}

/* Tensor slots: every tensor argument and every element of a tensor list, in
 * order. */
static int slots(const sample *s, jag_tensor **ts) {
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->a[i].kind == JAG_VAL_TENSOR) ts[n++] = (jag_tensor *)s->a[i].u.t;
        else if (s->a[i].kind == JAG_VAL_TENSORS)
            for (int k = 0; k < s->a[i].u.tensors.n; k++) ts[n++] = s->a[i].u.tensors.v[k];
    }
    return n;
}

/* s's arguments with the tensor slots replaced by ts (lists stored in lst). */
typedef struct bound {
    jag_value a[MAX_ARGS];
    jag_tensor *lst[MAX_SLOTS];
} bound;
static void bind(const sample *s, jag_tensor *const *ts, bound *b) {
    int k = 0, l = 0;
    for (int i = 0; i < s->n; i++) {
        b->a[i] = s->a[i];
        if (s->a[i].kind == JAG_VAL_TENSOR) b->a[i] = jag__v_tensor(ts[k++]);
        else if (s->a[i].kind == JAG_VAL_TENSORS) {
            int n = s->a[i].u.tensors.n;
            for (int j = 0; j < n; j++) b->lst[l + j] = ts[k++];
            b->a[i] = jag__v_tensors(b->lst + l, n);
            l += n;
        }
    }
}

/* ---- inputs ------------------------------------------------------------------- */

static uint64_t seed_counter = 1;

/* Random values in [lo, hi) of dtype (integers floored). */
static jag_tensor *rnd(jag_dtype dt, double lo, double hi, int nd, int64_t s0, int64_t s1, int64_t s2) {
    int64_t sz[3] = {s0, s1, s2};
    return t_rand(sz, nd, dt, lo, hi, seed_counter++);
}

static jag_tensor *from_i64(const int64_t *v, int64_t n) {
    jag_tensor *t = NULL;
    if (jag_from_data(v, &n, 1, JAG_INT64, &t)) exit(2);
    return t;
}

static const int64_t comp_lens[3] = {2, 3, 1};
static const int64_t comp_offsets[4] = {0, 2, 5, 6};

/* A jagged (3, j, d) nested tensor with component lengths 2, 3, 1. */
static jag_tensor *jagged(jag_dtype dt, double lo, double hi, int64_t d) {
    jag_tensor *v = rnd(dt, lo, hi, 2, 6, d, 0), *o = from_i64(comp_offsets, 4), *nt = NULL;
    if (jag_nested_from_jagged(v, o, NULL, &nt)) {
        fprintf(stderr, "jagged: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(v), jag_release(o);
    return nt;
}

/* A nested tensor over the same offsets tensor as `like` (same raggedness). */
static jag_tensor *jagged_like(const jag_tensor *like, double lo, double hi) {
    jag_tensor *o = NULL, *v = NULL, *nt = NULL;
    if (jag_nested_offsets(like, &o) || jag_nested_values(like, &v)) exit(2);
    jag_tensor *v2 = rnd(jag_tensor_dtype(v), lo, hi, jag_ndim(v), jag_size(v, 0), jag_size(v, 1), 0);
    if (jag_nested_from_jagged(v2, o, NULL, &nt)) exit(2);
    jag_release(o), jag_release(v), jag_release(v2);
    return nt;
}

/* The same components as a strided nested tensor (takes nt). */
static jag_tensor *strided_of(jag_tensor *nt) {
    jag_tensor *st = NULL;
    if (jag_nested_to_layout(nt, JAG_STRIDED, &st)) {
        fprintf(stderr, "strided_of: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(nt);
    return st;
}

/* A jagged (3, h, j, d) over `offsets` (lengths 2, 3, 1), its ragged dim at
 * 2: values (6, h, d) transposed as attention's q, k, v are. */
static jag_tensor *jagged_heads(jag_dtype dt, const jag_tensor *offsets, int64_t h, int64_t d) {
    jag_tensor *v = rnd(dt, -1, 1, 3, 6, h, d), *nt = NULL, *t = NULL;
    if (jag_nested_from_jagged(v, offsets, NULL, &nt) || jag_transpose(nt, 1, 2, &t)) {
        fprintf(stderr, "jagged_heads: %s\n", jag_last_error());
        exit(2);
    }
    jag_release(v), jag_release(nt);
    return t;
}

/* ---- comparisons ------------------------------------------------------------- */

static bool values_close(const jag_tensor *a, const jag_tensor *b, double rtol, double atol) {
    if (jag_is_nested(a) != jag_is_nested(b)) return false;
    if (!jag_is_nested(a)) return jag_tensor_dtype(a) == jag_tensor_dtype(b) && t_allclose(a, b, rtol, atol);
    jag_tensor *ua[8], *ub[8];
    int na = 0, nb = 0;
    if (jag_nested_unbind(a, ua, 8, &na) || jag_nested_unbind(b, ub, 8, &nb)) return false;
    bool ok = na == nb;
    for (int i = 0; ok && i < na; i++) ok = t_allclose(ua[i], ub[i], rtol, atol);
    for (int i = 0; i < na; i++) jag_release(ua[i]);
    for (int i = 0; i < nb; i++) jag_release(ub[i]);
    return ok;
}

static void tol_for(jag_dtype dt, double *rtol, double *atol) {
    /* as test_pointwise.c: float32 kernels are within a few ulp of the
     * double reference rounded once (1e-6 is ~8 ulp); float64 ones are
     * libm or within 2.75 ulp; integers exact */
    if (dt == JAG_FLOAT32) *rtol = 1e-5, *atol = 1e-6;
    else if (dt == JAG_FLOAT64) *rtol = 1e-12, *atol = 1e-13;
    else *rtol = 0, *atol = 0;
}

/* ---- families ------------------------------------------------------------------ */

enum {
    F_INTS = 1u << 0,      /* also int32 / int64 inputs */
    F_GRAD = 1u << 1,      /* differentiable: gradcheck */
    F_NESTED = 1u << 2,    /* takes a jagged nested tensor: per-component check */
    F_CHAIN = 1u << 3,     /* pointwise: compiled inside a fused chain */
    F_LAYOUT_ORDER = 1u << 5, /* sums in an order that follows the layout: (b)
                                 within the reference tolerance, not exact */
};

/* sample k of op for dtype dt (nested: the nested sample k); false when there
 * is no sample k. */
typedef bool (*sample_fn)(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s);
/* The op's outputs computed independently (new tensors). */
typedef jag_status (*ref_fn)(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);

typedef struct family {
    const char *name;
    sample_fn samples;
    ref_fn ref;
    unsigned flags;
    double tol_scale; /* widens the float tolerance for ops that sum many terms */
} family;

/* Outputs allocated from the op's META function, for references that write
 * into given outputs. */
static jag_status alloc_outs(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    jag_spec specs[MAX_OUT];
    jag_status st = info->meta(info->api_name, args, nargs, specs);
    if (st) return st;
    for (int i = 0; i < info->n_out; i++) outs[i] = jag__tensor_from_spec(info->api_name, &specs[i], false);
    return JAG_OK;
}

/* --- pointwise ------------------------------------------------------------------ */

static bool positive_domain(jag_op_id op) {
    return op == JAG_OP_log || op == JAG_OP_sqrt || op == JAG_OP_rsqrt || op == JAG_OP_reciprocal ||
           op == JAG_OP_log1p;
}

/* Layout samples of one operand: 0 contiguous (3, 4), 1 transposed storage,
 * 2 sliced rows, 3 broadcast (a (1, 4) row expanded to (3, 4), stride 0). */
static jag_tensor *operand(jag_dtype dt, double lo, double hi, int layout) {
    jag_tensor *x = rnd(dt, lo, hi, 2, 3, 4, 0), *v = NULL;
    if (layout == 1) v = t_noncontig(x);
    else if (layout == 2) v = t_sliced(x);
    else if (layout == 3) {
        jag_tensor *row = rnd(dt, lo, hi, 2, 1, 4, 0);
        int64_t to[2] = {3, 4};
        if (jag_expand(row, to, 2, &v)) exit(2);
        jag_release(row);
    } else return x;
    jag_release(x);
    return v;
}
static const char *layout_name[4] = {"contiguous", "transposed", "sliced", "broadcast"};

static bool unary_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    double lo = positive_domain(op) ? 0.25 : -2.5, hi = 2.5;
    if (!jag_dtype_is_floating(dt)) lo = positive_domain(op) ? 1 : -4, hi = 5;
    if (nested) { /* 0 jagged; 1 strided (on the buffer: every argument has the same tables) */
        if (k > 1) return false;
        jag_tensor *x = jagged(dt, lo, hi, 4);
        arg_t(s, k ? strided_of(x) : x);
        snprintf(s->what, sizeof s->what, "%s (3, j, 4)", k ? "strided" : "jagged");
    } else {
        if (k > 3) return false;
        arg_t(s, operand(dt, lo, hi, k));
        snprintf(s->what, sizeof s->what, "%s (3, 4)", layout_name[k]);
    }
    switch (op) { /* scalar parameters of the parametrised activations */
    case JAG_OP_leaky_relu: arg_d(s, 0.125); break;
    case JAG_OP_elu: arg_d(s, 0.75); break;
    case JAG_OP_softplus: arg_d(s, 2.0), arg_d(s, 1.5); break;
    case JAG_OP_hardtanh: arg_d(s, -0.5), arg_d(s, 0.75); break;
    case JAG_OP_clamp: arg_d(s, -1.25), arg_d(s, 1.5); break;
    default: break;
    }
    s->grad_slots = 1;
    return true;
}
static jag_status unary_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    if (op == JAG_OP_clamp) return jag__ref_clamp(a, n, o);
    if (n > 1) return jag__ref_unary_param(op, a, n, o);
    return jag__ref_unary(op, a, n, o);
}

static bool is_compare(jag_op_id op) { return op >= JAG_OP_eq && op <= JAG_OP_ge; }

/* a, b: 0-3 the layouts of both operands (3, 4); 4 (3, 1) with (1, 4)
 * broadcast; 5 tensor op scalar; 6 scalar op tensor. */
static bool binary_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    bool fl = jag_dtype_is_floating(dt);
    double lo = fl ? -2 : -4, hi = fl ? 2 : 5, blo = lo, bhi = hi;
    if (op == JAG_OP_pow) lo = fl ? 0.5 : 0, hi = fl ? 2 : 4, blo = fl ? -1.5 : 0, bhi = fl ? 2 : 3;
    if (op == JAG_OP_div) blo = fl ? 0.5 : 1, bhi = fl ? 2 : 5;
    if (is_compare(op) || op == JAG_OP_maximum || op == JAG_OP_minimum)
        lo = blo = -2, hi = bhi = 2; /* few values: ties */
    double scalar = op == JAG_OP_pow ? 1.5 : op == JAG_OP_div ? 1.75 : 0.5;
    if (nested) {
        if (k > 2) return false;
        jag_tensor *x = jagged(dt, lo, hi, 4);
        arg_t(s, x);
        if (k == 0) arg_t(s, jagged_like(x, blo, bhi)), snprintf(s->what, sizeof s->what, "jagged op jagged");
        else if (k == 1) arg_t(s, rnd(dt, blo, bhi, 1, 4, 0, 0)), snprintf(s->what, sizeof s->what, "jagged op dense (4)");
        else arg_d(s, scalar), snprintf(s->what, sizeof s->what, "jagged op scalar");
    } else if (k <= 3) {
        arg_t(s, operand(dt, lo, hi, k)), arg_t(s, operand(dt, blo, bhi, 3 - k));
        snprintf(s->what, sizeof s->what, "%s op %s", layout_name[k], layout_name[3 - k]);
    } else if (k == 4) {
        arg_t(s, rnd(dt, lo, hi, 2, 3, 1, 0)), arg_t(s, rnd(dt, blo, bhi, 2, 1, 4, 0));
        snprintf(s->what, sizeof s->what, "(3, 1) op (1, 4)");
    } else if (k == 5) {
        arg_t(s, operand(dt, lo, hi, 0)), arg_d(s, scalar);
        snprintf(s->what, sizeof s->what, "tensor op %g", scalar);
    } else if (k == 6) {
        /* a scalar on the left is a 0-d tensor, as torch's 2.5 - x
         * (x.__rsub__) and jag's Python operators pass it */
        double left = op == JAG_OP_pow ? 1.25 : scalar;
        jag_tensor *l = NULL;
        if (jag_full(NULL, 0, left, dt, &l)) exit(2);
        arg_t(s, l), arg_t(s, operand(dt, blo, bhi, 0));
        snprintf(s->what, sizeof s->what, "%g op tensor", left);
    } else return false;
    if (op == JAG_OP_add) arg_d(s, fl ? 0.5 : 2); /* alpha */
    s->grad_slots = 3;
    return true;
}
static jag_status binary_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) { return jag__ref_binary(op, a, n, o); }

static bool where_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    (void)op;
    if (nested) {
        if (k > 0) return false;
        jag_tensor *x = jagged(dt, -2, 2, 4);
        arg_t(s, jagged_like(x, 0, 2)); /* float cond, made bool below */
        jag_tensor *c = NULL;
        if (jag_to_dtype(s->own[0], JAG_BOOL, &c)) exit(2);
        s->a[0] = jag__v_tensor(own(s, c));
        arg_t(s, x), arg_t(s, jagged_like(x, -2, 2));
        snprintf(s->what, sizeof s->what, "jagged");
    } else {
        if (k > 3) return false;
        arg_t(s, operand(JAG_BOOL, 0, 2, k)), arg_t(s, operand(dt, -3, 3, (k + 1) % 4)), arg_t(s, operand(dt, -3, 3, k));
        snprintf(s->what, sizeof s->what, "cond %s", layout_name[k]);
    }
    s->grad_slots = 6;
    return true;
}

/* --- copies --------------------------------------------------------------------- */

static bool copy_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (k > 3 || (nested && k > 0)) return false;
    arg_t(s, nested ? jagged(dt, -3, 3, 4) : operand(dt, -3, 3, k));
    if (op == JAG_OP_to_dtype) arg_i(s, dt == JAG_FLOAT64 ? JAG_FLOAT32 : JAG_FLOAT64);
    snprintf(s->what, sizeof s->what, "%s", nested ? "jagged" : layout_name[k]);
    s->grad_slots = 1;
    return true;
}
static jag_status copy_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    jag_status st = alloc_outs(op, a, n, o);
    if (!st) jag__copy_ref(o[0], a[0].u.t);
    return st;
}

/* --- views ---------------------------------------------------------------------- */

/* x (2, 3, 4) in layouts 0-2; view takes (4, 3) -> (2, 2, 3); expand (3, 1). */
static bool view_nested_samples(jag_op_id op, jag_dtype dt, int k, sample *s);

static bool view_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (nested) return view_nested_samples(op, dt, k, s);
    if (k > 2) return false;
    jag_tensor *x = op == JAG_OP_view ? rnd(dt, -3, 3, 2, 4, 3, 0)
                    : op == JAG_OP_expand ? rnd(dt, -3, 3, 3, 3, 1, 4)
                    : op == JAG_OP_squeeze ? rnd(dt, -3, 3, 3, 2, 1, 4)
                                           : rnd(dt, -3, 3, 3, 2, 3, 4);
    jag_tensor *v = k == 1 ? t_noncontig(x) : k == 2 ? t_sliced(x) : jag_retain(x);
    jag_release(x);
    arg_t(s, v);
    switch (op) {
    case JAG_OP_view: { int64_t sz[3] = {2, 2, 3}; arg_ints(s, sz, 3); break; }
    case JAG_OP_transpose: arg_i(s, 0), arg_i(s, 2); break;
    case JAG_OP_permute: { int64_t p[3] = {2, 0, 1}; arg_ints(s, p, 3); break; }
    case JAG_OP_narrow: arg_i(s, 1), arg_i(s, 1), arg_i(s, 2); break;
    case JAG_OP_select: arg_i(s, 1), arg_i(s, 2); break;
    case JAG_OP_unsqueeze: arg_i(s, 1); break;
    case JAG_OP_squeeze: arg_i(s, 1); break;
    case JAG_OP_expand: { int64_t sz[4] = {2, 3, 5, 4}; arg_ints(s, sz, 4); break; }
    default: return false;
    }
    snprintf(s->what, sizeof s->what, "%s", layout_name[k]);
    s->grad_slots = 1;
    return true;
}

/* Jagged (3, j, 4), as torch.nested's jagged views: view (3, -1, 2, 2)
 * (each component viewed (-1, 2, 2)), transpose(1, 2) moving the ragged
 * dim (each component transposed (1, 0)), narrow along dim 2 and along the
 * ragged dim (each component's rows [0, 1)), select along dim 2,
 * unsqueeze at 2 and at the end. */
static bool view_nested_samples(jag_op_id op, jag_dtype dt, int k, sample *s) {
    bool two = op == JAG_OP_narrow || op == JAG_OP_unsqueeze;
    if (k > (two ? 1 : 0)) return false;
    switch (op) {
    case JAG_OP_view: {
        int64_t sz[4] = {3, -1, 2, 2};
        arg_t(s, jagged(dt, -3, 3, 4)), arg_ints(s, sz, 4);
        s->size_args = 2;
        break;
    }
    case JAG_OP_transpose: arg_t(s, jagged(dt, -3, 3, 4)), arg_i(s, 1), arg_i(s, 2), s->dim_args = 6; break;
    case JAG_OP_narrow:
        arg_t(s, jagged(dt, -3, 3, 4));
        if (k == 0) arg_i(s, 2), arg_i(s, 1), arg_i(s, 2);
        else arg_i(s, 1), arg_i(s, 0), arg_i(s, 1);
        s->dim_args = 2;
        break;
    case JAG_OP_select: arg_t(s, jagged(dt, -3, 3, 4)), arg_i(s, 2), arg_i(s, 1), s->dim_args = 2; break;
    case JAG_OP_unsqueeze: arg_t(s, jagged(dt, -3, 3, 4)), arg_i(s, k ? 3 : 2), s->dim_args = 2; break;
    default: return false;
    }
    snprintf(s->what, sizeof s->what, "jagged (3, j, 4) form %d", k);
    s->grad_slots = 1;
    return true;
}

/* The index of x that out index oi reads, by each view's definition. */
static void view_source(jag_op_id op, const jag_value *a, const jag_tensor *x, const int64_t *oi, int on, int64_t *xi) {
    int xn = jag_ndim(x);
    switch (op) {
    case JAG_OP_view: case JAG_OP_unsqueeze: case JAG_OP_squeeze: { /* same row-major position */
        int64_t flat = 0;
        int64_t sz[JAG_MAX_DIMS];
        if (op == JAG_OP_view) for (int d = 0; d < on; d++) sz[d] = a[1].u.ints.v[d];
        else if (op == JAG_OP_unsqueeze) { sz[0] = 2, sz[1] = 1, sz[2] = 3, sz[3] = 4; }
        else { sz[0] = 2, sz[1] = 4; }
        for (int d = 0; d < on; d++) flat = flat * sz[d] + oi[d];
        for (int d = xn - 1; d >= 0; d--) xi[d] = flat % jag_size(x, d), flat /= jag_size(x, d);
        break;
    }
    case JAG_OP_transpose:
        for (int d = 0; d < xn; d++) xi[d] = oi[d];
        xi[a[1].u.i] = oi[a[2].u.i], xi[a[2].u.i] = oi[a[1].u.i];
        break;
    case JAG_OP_permute:
        for (int d = 0; d < xn; d++) xi[a[1].u.ints.v[d]] = oi[d];
        break;
    case JAG_OP_narrow:
        for (int d = 0; d < xn; d++) xi[d] = oi[d] + (d == a[1].u.i ? a[2].u.i : 0);
        break;
    case JAG_OP_select:
        for (int d = 0, j = 0; d < xn; d++) xi[d] = d == a[1].u.i ? a[2].u.i : oi[j++];
        break;
    case JAG_OP_expand:
        for (int d = 0; d < xn; d++) xi[d] = jag_size(x, d) == 1 ? 0 : oi[on - xn + d];
        break;
    default: break;
    }
}

static jag_status view_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    (void)n;
    const jag_tensor *x = a[0].u.t;
    int64_t osz[JAG_MAX_DIMS];
    int on = 0, xn = jag_ndim(x);
    for (int d = 0; d < xn; d++) osz[d] = jag_size(x, d);
    switch (op) {
    case JAG_OP_view: case JAG_OP_expand:
        on = a[1].u.ints.n;
        for (int d = 0; d < on; d++) osz[d] = a[1].u.ints.v[d];
        break;
    case JAG_OP_transpose: on = xn, osz[a[1].u.i] = jag_size(x, (int)a[2].u.i), osz[a[2].u.i] = jag_size(x, (int)a[1].u.i); break;
    case JAG_OP_permute: on = xn; for (int d = 0; d < xn; d++) osz[d] = jag_size(x, (int)a[1].u.ints.v[d]); break;
    case JAG_OP_narrow: on = xn, osz[a[1].u.i] = a[3].u.i; break;
    case JAG_OP_select: on = 0; for (int d = 0; d < xn; d++) if (d != a[1].u.i) osz[on++] = jag_size(x, d); break;
    case JAG_OP_unsqueeze: on = 0; for (int d = 0; d <= xn; d++) osz[on++] = d == a[1].u.i ? 1 : jag_size(x, d - (d > a[1].u.i)); break;
    case JAG_OP_squeeze: on = 0; for (int d = 0; d < xn; d++) if (d != a[1].u.i) osz[on++] = jag_size(x, d); break;
    default: return JAG_ENOTIMPL;
    }
    jag_tensor *y = NULL;
    jag_status st = jag_empty(osz, on, jag_tensor_dtype(x), &y);
    if (st) return st;
    int64_t total = jag_numel(y), oi[JAG_MAX_DIMS], xi[JAG_MAX_DIMS];
    for (int64_t f = 0; f < total; f++) {
        int64_t r = f;
        for (int d = on - 1; d >= 0; d--) oi[d] = r % osz[d], r /= osz[d];
        view_source(op, a, x, oi, on, xi);
        double v;
        jag_item_at(x, xi, &v);
        jag__store_from_double((char *)jag_data(y) + f * (int64_t)jag_dtype_size(jag_tensor_dtype(y)), jag_tensor_dtype(y), v);
    }
    o[0] = y;
    return JAG_OK;
}

/* --- reductions ------------------------------------------------------------------- */

static bool is_index_reduction(jag_op_id op) {
    return op == JAG_OP_max_dim || op == JAG_OP_min_dim || op == JAG_OP_argmax || op == JAG_OP_argmin;
}

/* x (3, 4, 5): sample 0 over dim 1, 1 over dims (0, 2) keeping them, 2 over
 * all (max / min: always all; index reductions: dim 2 keeping it, all),
 * in layouts 0-2 (k / 3). Nested (3, j, 4): over the ragged dim 1, over dim 2. */
static bool reduce_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    bool fl = jag_dtype_is_floating(dt);
    double lo = op == JAG_OP_prod ? 0.5 : -3, hi = op == JAG_OP_prod ? 1.5 : 3;
    if (!fl) lo = op == JAG_OP_prod ? -2 : -9, hi = op == JAG_OP_prod ? 3 : 9;
    bool whole = op == JAG_OP_max || op == JAG_OP_min;
    int which;
    if (nested) {
        /* the index reductions take integers along dim 2 only */
        /* 0, 1 jagged over dims 1, 2; 2 strided over dim 2 (per component) */
        if (k > 2 || (!fl && is_index_reduction(op) && k > 0)) return false;
        which = (!fl && is_index_reduction(op)) || k == 2 ? 1 : k;
        jag_tensor *x = jagged(dt, lo, hi, 4);
        arg_t(s, k == 2 ? strided_of(x) : x);
        snprintf(s->what, sizeof s->what, "%s (3, j, 4) over dim %d", k == 2 ? "strided" : "jagged", which + 1);
    } else {
        if (whole) k = 3 * k + 2; /* the whole tensor only */
        if (k > 8) return false;
        jag_tensor *x = rnd(dt, lo, hi, 3, 3, 4, 5), *v = k / 3 == 1 ? t_noncontig(x) : k / 3 == 2 ? t_sliced(x) : jag_retain(x);
        jag_release(x);
        arg_t(s, v);
        which = k % 3;
        snprintf(s->what, sizeof s->what, "%s (3, 4, 5) form %d", layout_name[k / 3], which);
    }
    bool keep = !nested && which == 1;
    if (is_index_reduction(op)) {
        arg_i(s, nested ? which + 1 : which == 2 && (op == JAG_OP_argmax || op == JAG_OP_argmin) ? JAG_DIM_ALL
                                       : which == 0 ? 1 : 2);
        arg_b(s, keep);
    } else {
        int64_t dims[2] = {0, 2};
        if (whole || (!nested && which == 2)) arg_ints(s, dims, 0);
        else if (nested) { int64_t d = which + 1; arg_ints(s, &d, 1); }
        else if (which == 0) { int64_t d = 1; arg_ints(s, &d, 1); }
        else arg_ints(s, dims, 2);
        if (op == JAG_OP_var || op == JAG_OP_std) arg_i(s, 1);
        arg_b(s, keep);
    }
    if (nested) s->dim_args = 2;
    s->grad_slots = 1;
    return true;
}
static jag_status reduce_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    jag_status (*f)(const char *, const jag_value *, int, jag_tensor **) = NULL;
    switch (op) {
    case JAG_OP_sum: f = jag__ref_sum; break;
    case JAG_OP_mean: f = jag__ref_mean; break;
    case JAG_OP_prod: f = jag__ref_prod; break;
    case JAG_OP_amax: case JAG_OP_max: f = jag__ref_amax; break;
    case JAG_OP_amin: case JAG_OP_min: f = jag__ref_amin; break;
    case JAG_OP_var: f = jag__ref_var; break;
    case JAG_OP_std: f = jag__ref_std; break;
    case JAG_OP_logsumexp: f = jag__ref_logsumexp; break;
    case JAG_OP_max_dim: f = jag__ref_max_dim; break;
    case JAG_OP_min_dim: f = jag__ref_min_dim; break;
    case JAG_OP_argmax: f = jag__ref_argmax; break;
    case JAG_OP_argmin: f = jag__ref_argmin; break;
    default: return JAG_ENOTIMPL;
    }
    jag_status st = alloc_outs(op, a, n, o);
    return st ? st : f(jag__ops[op].api_name, a, n, o);
}

/* --- linear algebra ------------------------------------------------------------------ */

static bool gemm_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (nested) {
        if (k > 0 || op == JAG_OP_bmm) return false;
        arg_t(s, jagged(dt, -1, 1, 4));
        if (op == JAG_OP_linear) arg_t(s, rnd(dt, -1, 1, 2, 5, 4, 0)), arg_t(s, rnd(dt, -1, 1, 1, 5, 0, 0));
        else arg_t(s, rnd(dt, -1, 1, 2, 4, 5, 0));
        snprintf(s->what, sizeof s->what, "jagged (3, j, 4)");
        s->grad_slots = op == JAG_OP_linear ? 7 : 3;
        return true;
    }
    if (k > 2 + (op == JAG_OP_matmul)) return false;
    int lay = k > 2 ? 0 : k;
    jag_tensor *a, *b, *c = NULL;
    if (op == JAG_OP_mm) a = rnd(dt, -1, 1, 2, 3, 4, 0), b = rnd(dt, -1, 1, 2, 4, 5, 0);
    else if (op == JAG_OP_bmm) a = rnd(dt, -1, 1, 3, 2, 3, 4), b = rnd(dt, -1, 1, 3, 2, 4, 5);
    else if (op == JAG_OP_linear) a = rnd(dt, -1, 1, 3, 2, 3, 4), b = rnd(dt, -1, 1, 2, 5, 4, 0), c = rnd(dt, -1, 1, 1, 5, 0, 0);
    else if (k == 3) a = rnd(dt, -1, 1, 3, 2, 3, 4), b = rnd(dt, -1, 1, 2, 4, 5, 0); /* batched @ matrix */
    else a = rnd(dt, -1, 1, 2, 3, 4, 0), b = rnd(dt, -1, 1, 2, 4, 5, 0);
    jag_tensor *ins[3] = {a, b, c};
    for (int i = 0; i < 3 && ins[i]; i++) {
        jag_tensor *v = lay == 1 ? t_noncontig(ins[i]) : lay == 2 ? t_sliced(ins[i]) : jag_retain(ins[i]);
        jag_release(ins[i]);
        arg_t(s, v);
    }
    if (op == JAG_OP_linear && k == 2) { /* no bias: (x, w, none) */
        jag_release(s->own[2]);
        s->own[2] = s->own[--s->n_own];
        s->a[2] = jag__v_tensor(NULL);
    }
    snprintf(s->what, sizeof s->what, "%s%s", layout_name[lay], k == 3 ? ", batched @ matrix" : "");
    s->grad_slots = 7;
    return true;
}
static jag_status gemm_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    const jag_tensor *x = a[0].u.t, *w = a[1].u.t;
    if (op == JAG_OP_matmul) { /* torch.matmul: the matrix product of each batch item */
        int64_t sz[3] = {jag_size(x, 0), jag_size(x, -2), jag_size(w, -1)};
        int nd = jag_ndim(x);
        jag_status st = jag_empty(nd == 3 ? sz : sz + 1, nd, jag_tensor_dtype(x), &o[0]);
        if (st) return st;
        for (int64_t b = 0; b < (nd == 3 ? sz[0] : 1); b++) {
            jag_tensor *xb = NULL, *yb = NULL;
            if (nd == 3) jag_select(x, 0, b, &xb), jag_select(o[0], 0, b, &yb);
            else xb = jag_retain((jag_tensor *)x), yb = jag_retain(o[0]);
            jag__ref_mm(xb, w, yb);
            jag_release(xb), jag_release(yb);
        }
        return JAG_OK;
    }
    jag_status st = alloc_outs(op, a, n, o);
    if (st) return st;
    if (op == JAG_OP_mm) jag__ref_mm(x, w, o[0]);
    else if (op == JAG_OP_bmm) jag__ref_bmm(x, w, o[0]);
    else jag__ref_linear(x, w, a[2].kind == JAG_VAL_TENSOR ? a[2].u.t : NULL, o[0]);
    return JAG_OK;
}

/* --- softmax and norms -------------------------------------------------------------- */

static bool softmax_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    (void)op;
    if (nested) {
        if (k > 1) return false;
        arg_t(s, jagged(dt, -3, 3, 4)), arg_i(s, k + 1);
        s->dim_args = 2;
        snprintf(s->what, sizeof s->what, "jagged over dim %d", k + 1);
    } else {
        if (k > 5) return false;
        jag_tensor *x = rnd(dt, -3, 3, 3, 2, 3, 4), *v = k / 2 == 1 ? t_noncontig(x) : k / 2 == 2 ? t_sliced(x) : jag_retain(x);
        jag_release(x);
        arg_t(s, v), arg_i(s, k % 2 ? 1 : -1);
        snprintf(s->what, sizeof s->what, "%s dim %d", layout_name[k / 2], k % 2 ? 1 : -1);
    }
    s->grad_slots = 1;
    return true;
}

/* layer_norm / rms_norm and their native forms: x (2, 3, 4) normalised over
 * 1 or 2 trailing dims, with and without weight (and bias). */
static bool norm_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    bool layer = op == JAG_OP_layer_norm || op == JAG_OP_native_layer_norm;
    if (nested ? k > 0 : k > 5) return false;
    int nd = nested ? 1 : 1 + k % 2, lay = nested ? 0 : k / 2;
    bool affine = nested || k % 3 != 2;
    jag_tensor *x = nested ? jagged(dt, -2, 2, 4) : rnd(dt, -2, 2, 3, 2, 3, 4);
    if (!nested) {
        jag_tensor *v = lay == 1 ? t_noncontig(x) : lay == 2 ? t_sliced(x) : jag_retain(x);
        jag_release(x);
        x = v;
    }
    arg_t(s, x), arg_i(s, nd);
    if (affine) arg_t(s, nd == 1 ? rnd(dt, 0.5, 1.5, 1, 4, 0, 0) : rnd(dt, 0.5, 1.5, 2, 3, 4, 0));
    else arg_none(s);
    if (layer) {
        if (affine) arg_t(s, nd == 1 ? rnd(dt, -1, 1, 1, 4, 0, 0) : rnd(dt, -1, 1, 2, 3, 4, 0));
        else arg_none(s);
    }
    arg_d(s, 1e-5);
    snprintf(s->what, sizeof s->what, "%s over %d dims%s", nested ? "jagged" : layout_name[lay], nd,
             affine ? " affine" : "");
    s->grad_slots = 7;
    return true;
}
static jag_status norm_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    jag_status st = alloc_outs(op, a, n, o);
    if (st) return st;
    const char *name = jag__ops[op].api_name;
    switch (op) {
    case JAG_OP_softmax: return jag__ref_softmax(name, a, n, o);
    case JAG_OP_log_softmax: return jag__ref_log_softmax(name, a, n, o);
    case JAG_OP_layer_norm: return jag__ref_layer_norm(name, a, n, o);
    case JAG_OP_rms_norm: return jag__ref_rms_norm(name, a, n, o);
    case JAG_OP_layer_norm_backward: return jag__ref_layer_norm_backward(name, a, n, o);
    case JAG_OP_rms_norm_backward: return jag__ref_rms_norm_backward(name, a, n, o);
    case JAG_OP_gelu_backward: case JAG_OP_gelu_tanh_backward: case JAG_OP_silu_backward:
    case JAG_OP_sigmoid_backward: case JAG_OP_tanh_backward: case JAG_OP_logsigmoid_backward:
    case JAG_OP_softplus_backward: case JAG_OP_hardswish_backward: case JAG_OP_hardsigmoid_backward:
        return jag__ref_activation_backward(op, a, n, o);
    case JAG_OP_softmax_backward: return jag__ref_softmax_backward(name, a, n, o);
    case JAG_OP_log_softmax_backward: return jag__ref_log_softmax_backward(name, a, n, o);
    case JAG_OP_mean_backward: return jag__ref_mean_backward(name, a, n, o);
    default: break;
    }
    /* native_layer_norm / native_rms_norm: y as the plain op's reference;
     * the statistics by their definition, mean = sum x / D and rstd =
     * 1 / sqrt(sum (x - mean)^2 / D + eps) (mean 0 for rms), per row */
    bool layer = op == JAG_OP_native_layer_norm;
    jag_tensor *y[1] = {o[0]};
    st = layer ? jag__ref_layer_norm(name, a, n, y) : jag__ref_rms_norm(name, a, n, y);
    if (st) return st;
    const jag_tensor *x = a[0].u.t;
    int nd = (int)a[1].u.i;
    int64_t D = 1;
    for (int d = jag_ndim(x) - nd; d < jag_ndim(x); d++) D *= jag_size(x, d);
    double eps = a[layer ? 4 : 3].u.d;
    jag_tensor *mean = layer ? o[1] : NULL, *rstd = o[layer ? 2 : 1];
    for (int64_t r = 0; r < jag_numel(x) / D; r++) {
        double m = 0, q = 0;
        for (int64_t i = 0; i < D; i++) m += t_get(x, r * D + i);
        m = layer ? m / (double)D : 0;
        for (int64_t i = 0; i < D; i++) q += (t_get(x, r * D + i) - m) * (t_get(x, r * D + i) - m);
        if (mean) jag__store_from_double((char *)jag_data(mean) + r * (int64_t)jag_dtype_size(jag_tensor_dtype(mean)), jag_tensor_dtype(mean), m);
        jag__store_from_double((char *)jag_data(rstd) + r * (int64_t)jag_dtype_size(jag_tensor_dtype(rstd)), jag_tensor_dtype(rstd),
                               1.0 / sqrt(q / (double)D + eps));
    }
    return JAG_OK;
}

/* The fused backward ops: g and x (2, 3, 4) and what the op reads. */
static bool backward_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (nested || k > 2) return false;
    if (!jag_dtype_is_floating(dt)) return false;
    jag_tensor *g = rnd(dt, -1, 1, 3, 2, 3, 4), *x = rnd(dt, -2, 2, 3, 2, 3, 4);
    if (k == 1) {
        jag_tensor *v = t_noncontig(g);
        jag_release(g);
        g = v;
    }
    switch (op) {
    case JAG_OP_softmax_backward: case JAG_OP_log_softmax_backward: {
        jag_value xa[2] = {jag__v_tensor(x), jag__v_int(-1)};
        jag_tensor *y = NULL;
        if (jag_op_call(op == JAG_OP_softmax_backward ? JAG_OP_softmax : JAG_OP_log_softmax, xa, 2, &y)) exit(2);
        jag_release(x);
        arg_t(s, g), arg_t(s, y), arg_i(s, k == 2 ? 1 : -1);
        break;
    }
    case JAG_OP_layer_norm_backward: case JAG_OP_rms_norm_backward: {
        bool layer = op == JAG_OP_layer_norm_backward;
        arg_t(s, g), arg_t(s, x);
        if (k == 2) { /* the statistics given, from the native forward */
            jag_value na[5] = {jag__v_tensor(x), jag__v_int(1), jag__v_tensor(NULL), jag__v_tensor(NULL), jag__v_double(1e-5)};
            if (!layer) na[3] = jag__v_double(1e-5);
            jag_tensor *outs[3] = {0};
            if (jag_op_call(layer ? JAG_OP_native_layer_norm : JAG_OP_native_rms_norm, na, layer ? 5 : 4, outs)) exit(2);
            jag_release(outs[0]);
            if (layer) arg_t(s, outs[1]);
            arg_t(s, outs[layer ? 2 : 1]);
        } else {
            if (layer) arg_none(s);
            arg_none(s);
        }
        if (k == 0) arg_none(s);
        else arg_t(s, rnd(dt, 0.5, 1.5, 1, 4, 0, 0));
        arg_i(s, 1), arg_d(s, 1e-5);
        break;
    }
    case JAG_OP_gelu_backward: case JAG_OP_gelu_tanh_backward: case JAG_OP_silu_backward: /* x over the whole range: the tails and the middle */
    case JAG_OP_logsigmoid_backward: case JAG_OP_softplus_backward:
    case JAG_OP_hardswish_backward: case JAG_OP_hardsigmoid_backward: /* both sides of -3 and 3 */
        jag_release(x);
        x = rnd(dt, -9, 9, 3, 2, 3, 4);
        arg_t(s, g), arg_t(s, k == 2 ? t_noncontig(x) : jag_retain(x));
        jag_release(x);
        if (op == JAG_OP_softplus_backward) arg_d(s, k == 1 ? 0.5 : 2.0), arg_d(s, k == 1 ? 3.0 : 5.0); /* beta x crosses the threshold */
        break;
    case JAG_OP_sigmoid_backward: case JAG_OP_tanh_backward: /* y: the op's outputs, (0, 1) and (-1, 1) */
        jag_release(x);
        x = rnd(dt, op == JAG_OP_sigmoid_backward ? 0 : -1, 1, 3, 2, 3, 4);
        arg_t(s, g), arg_t(s, k == 2 ? t_noncontig(x) : jag_retain(x));
        jag_release(x);
        break;
    case JAG_OP_mean_backward: {
        jag_release(x), jag_release(g);
        g = rnd(dt, -1, 1, 3, 2, 1, 4);
        if (k == 1) {
            jag_tensor *v = t_noncontig(g);
            jag_release(g);
            g = v;
        }
        int64_t sz[3] = {2, k == 2 ? 1 : 3, 4};
        if (k == 2) { jag_release(g); g = rnd(dt, -1, 1, 3, 2, 1, 1); sz[2] = 4; sz[1] = 3; }
        arg_t(s, g), arg_ints(s, sz, 3);
        break;
    }
    default: return false;
    }
    snprintf(s->what, sizeof s->what, "form %d", k);
    s->grad_slots = 1;
    return true;
}

/* --- indexing and joining ------------------------------------------------------------ */

static jag_tensor *index_tensor(const int64_t *v, int n, jag_dtype dt) {
    jag_tensor *i64 = from_i64(v, n), *t = NULL;
    if (jag_to_dtype(i64, dt, &t)) exit(2);
    jag_release(i64);
    return t;
}

/* index_select along dim 2 of a jagged (3, j, 4) (each component's dim 1,
 * the same index); gather along dim 2 of a strided one with a dense index
 * (1, 2) (per component, as torch's strided nested tensors run it). */
static bool index_nested_samples(jag_op_id op, jag_dtype dt, int k, sample *s) {
    if (k > 0) return false;
    static const int64_t idx[3] = {3, 0, 2};
    if (op == JAG_OP_index_select) {
        arg_t(s, jagged(dt, -3, 3, 4)), arg_i(s, 2), arg_t(s, index_tensor(idx, 3, JAG_INT64));
        snprintf(s->what, sizeof s->what, "jagged (3, j, 4) along dim 2");
    } else if (op == JAG_OP_gather) {
        jag_tensor *i = index_tensor(idx, 2, JAG_INT64), *i2 = NULL;
        int64_t sz[2] = {1, 2};
        if (jag_view(i, sz, 2, &i2)) exit(2);
        jag_release(i);
        arg_t(s, strided_of(jagged(dt, -3, 3, 4))), arg_i(s, 2), arg_t(s, i2);
        snprintf(s->what, sizeof s->what, "strided (3, j, 4) along dim 2");
    } else return false;
    s->dim_args = 2;
    s->grad_slots = 1;
    return true;
}

static bool index_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (nested) return index_nested_samples(op, dt, k, s);
    if (k > 2) return false;
    jag_dtype ix = k == 1 ? JAG_INT32 : JAG_INT64;
    jag_tensor *x = rnd(dt, -3, 3, 2, 4, 5, 0), *v = k == 2 ? t_noncontig(x) : jag_retain(x);
    jag_release(x);
    switch (op) {
    case JAG_OP_index_select: {
        static const int64_t idx[5] = {3, 0, 0, 2, 1};
        arg_t(s, v), arg_i(s, k == 1 ? 1 : 0), arg_t(s, index_tensor(idx, k == 1 ? 5 : 3, ix));
        break;
    }
    case JAG_OP_gather: {
        static const int64_t idx[6] = {4, 0, 2, 2, 1, 3};
        jag_tensor *i = index_tensor(idx, 6, JAG_INT64), *i2 = NULL;
        int64_t sz[2] = {2, 3};
        jag_view(i, sz, 2, &i2);
        jag_release(i);
        arg_t(s, v), arg_i(s, 1), arg_t(s, i2);
        break;
    }
    case JAG_OP_embedding: {
        static const int64_t idx[6] = {3, 0, 0, 2, 1, 3};
        jag_tensor *i = index_tensor(idx, 6, ix), *i2 = NULL;
        int64_t sz[2] = {2, 3};
        jag_view(i, sz, 2, &i2);
        jag_release(i);
        arg_t(s, v), arg_t(s, i2);
        break;
    }
    case JAG_OP_scatter_add: {
        static const int64_t idx[6] = {3, 0, 0, 2, 1, 3};
        jag_tensor *i = index_tensor(idx, 6, JAG_INT64), *i2 = NULL;
        int64_t sz[2] = {2, 3};
        jag_view(i, sz, 2, &i2);
        jag_release(i);
        arg_t(s, v), arg_i(s, 0), arg_t(s, i2), arg_t(s, rnd(dt, -3, 3, 2, 2, 3, 0));
        s->grad_slots = 5;
        break;
    }
    case JAG_OP_cat: {
        jag_release(v);
        jag_tensor *p[3] = {rnd(dt, -3, 3, 2, 2, 3, 0), rnd(dt, -3, 3, 2, 2, 1, 0), rnd(dt, -3, 3, 2, 2, 4, 0)};
        if (k == 2) {
            jag_tensor *nc = t_noncontig(p[2]);
            jag_release(p[2]);
            p[2] = nc;
        }
        if (k == 1) { /* along dim 0 */
            jag_release(p[1]), jag_release(p[2]);
            p[1] = rnd(dt, -3, 3, 2, 3, 3, 0), p[2] = rnd(dt, -3, 3, 2, 1, 3, 0);
        }
        arg_list(s, p, 3), arg_i(s, k == 1 ? 0 : 1);
        s->grad_slots = 7;
        break;
    }
    case JAG_OP_embedding_bag: {
        if (!jag_dtype_is_floating(dt)) { jag_release(v); return false; }
        static const int64_t idx[7] = {3, 0, 0, 2, 1, 3, 2}, off[4] = {0, 3, 3, 7};
        arg_t(s, v), arg_t(s, index_tensor(idx, 7, ix)), arg_t(s, from_i64(off, 4)), arg_i(s, k);
        if (k == 0) arg_t(s, rnd(dt, 0.5, 1.5, 1, 7, 0, 0));
        else arg_none(s);
        s->grad_slots = 1;
        break;
    }
    default: jag_release(v); return false;
    }
    if (!s->grad_slots) s->grad_slots = 1;
    snprintf(s->what, sizeof s->what, "form %d", k);
    return true;
}
static jag_status index_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    jag_status st = alloc_outs(op, a, n, o);
    if (st) return st;
    switch (op) {
    case JAG_OP_index_select: return jag__ref_index_select(a[0].u.t, (int)a[1].u.i, a[2].u.t, o[0]);
    case JAG_OP_gather: return jag__ref_gather(a[0].u.t, (int)a[1].u.i, a[2].u.t, o[0]);
    case JAG_OP_embedding: return jag__ref_embedding(a[0].u.t, a[1].u.t, o[0]);
    case JAG_OP_embedding_bag: return jag__ref_embedding_bag(a, n, o[0]);
    case JAG_OP_cat: jag__ref_cat(a[0].u.tensors.v, a[0].u.tensors.n, (int)a[1].u.i, o[0]); return JAG_OK;
    case JAG_OP_scatter_add: { /* y = x; y[index[i][j]][j] += src[i][j] (dim 0) */
        const jag_tensor *x = a[0].u.t, *ix = a[2].u.t, *src = a[3].u.t;
        jag_dtype dt = jag_tensor_dtype(o[0]);
        size_t es = jag_dtype_size(dt);
        int64_t C = jag_size(x, 1);
        for (int64_t f = 0; f < jag_numel(x); f++) jag__store_from_double((char *)jag_data(o[0]) + f * (int64_t)es, dt, t_get(x, f));
        for (int64_t i = 0; i < jag_size(ix, 0); i++)
            for (int64_t j = 0; j < jag_size(ix, 1); j++) {
                int64_t r = (int64_t)t_get(ix, i * jag_size(ix, 1) + j);
                char *p = (char *)jag_data(o[0]) + (r * C + j) * (int64_t)es;
                jag__store_from_double(p, dt, jag__load_as_double(p, dt) + t_get(src, i * jag_size(src, 1) + j));
            }
        return JAG_OK;
    }
    default: return JAG_ENOTIMPL;
    }
}

/* --- factories ------------------------------------------------------------------------ */

static bool factory_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (k > 1 || (nested && op == JAG_OP_full)) return false;
    if (nested) {
        if (k > 0) return false;
        arg_t(s, jagged(dt, -1, 1, 4)), arg_d(s, 2.5);
    } else if (op == JAG_OP_full) {
        int64_t sz[3] = {2, 3, 4};
        arg_ints(s, sz, k ? 3 : 2), arg_d(s, -1.5), arg_i(s, dt);
    } else {
        arg_t(s, k ? operand(dt, -1, 1, 1) : operand(dt, -1, 1, 0)), arg_d(s, -1.5);
    }
    snprintf(s->what, sizeof s->what, "form %d", k);
    s->grad_slots = 1;
    return true;
}
/* every element is the value, converted to the dtype */
static jag_status factory_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    jag_status st = alloc_outs(op, a, n, o);
    if (st) return st;
    double v = a[1].u.d; /* full's value and full_like's are both argument 1 */
    jag_dtype dt = jag_tensor_dtype(o[0]);
    for (int64_t f = 0; f < jag_numel(o[0]); f++) jag__store_from_double((char *)jag_data(o[0]) + f * (int64_t)jag_dtype_size(dt), dt, v);
    return JAG_OK;
}

/* --- the jagged bridges ----------------------------------------------------------------- */

static bool bridge_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (nested || k > 1) return false;
    switch (op) {
    case JAG_OP_values: arg_t(s, jagged(dt, -2, 2, 4)); break;
    case JAG_OP_nested_from_jagged: {
        jag_tensor *v = rnd(dt, -2, 2, 2, 6, 4, 0);
        arg_t(s, k ? t_noncontig(v) : jag_retain(v)), arg_t(s, from_i64(comp_offsets, 4)), arg_none(s);
        jag_release(v);
        break;
    }
    case JAG_OP_to_padded: {
        int64_t sz[3] = {3, 5, 4};
        arg_t(s, jagged(dt, -2, 2, 4)), arg_d(s, -7.0), arg_ints(s, sz, k ? 3 : 0);
        break;
    }
    case JAG_OP_from_padded: {
        jag_tensor *p = rnd(dt, -2, 2, 3, 3, 4, 2);
        arg_t(s, k ? t_noncontig(p) : jag_retain(p)), arg_t(s, from_i64(comp_lens, 3));
        jag_release(p);
        break;
    }
    default: return false;
    }
    snprintf(s->what, sizeof s->what, "form %d", k);
    s->grad_slots = 1;
    return true;
}
/* By the definitions: values are the components one after the other; a
 * nested tensor from (values, offsets) has component b = values[offsets[b]
 * : offsets[b + 1]]; to_padded puts component b at [b, :len_b] and the
 * padding elsewhere; from_padded keeps padded[b, :lengths[b]]. */
static jag_status bridge_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    (void)n;
    const jag_tensor *x = a[0].u.t;
    jag_tensor *comps[3] = {0};
    jag_status st = JAG_OK;
    switch (op) {
    case JAG_OP_values: case JAG_OP_to_padded: {
        int nb = 0;
        if ((st = jag_nested_unbind(x, comps, 3, &nb))) return st;
        if (op == JAG_OP_values) {
            jag_tensor *tmp = NULL;
            if (!(st = jag_empty((int64_t[]){6, 4}, 2, jag_tensor_dtype(x), &tmp))) jag__ref_cat(comps, 3, 0, tmp);
            o[0] = tmp;
        } else {
            jag_tensor *y = NULL;
            int64_t L = a[2].u.ints.n ? a[2].u.ints.v[1] : 3;
            if (!(st = jag_full((int64_t[]){3, L, 4}, 3, a[1].u.d, jag_tensor_dtype(x), &y))) {
                for (int b = 0; b < 3; b++)
                    for (int64_t i = 0; i < comp_lens[b]; i++)
                        for (int64_t d = 0; d < 4; d++) {
                            double v = t_get(comps[b], i * 4 + d);
                            jag__store_from_double((char *)jag_data(y) + ((b * L + i) * 4 + d) * (int64_t)jag_dtype_size(jag_tensor_dtype(y)),
                                                   jag_tensor_dtype(y), v);
                        }
            }
            o[0] = y;
        }
        break;
    }
    case JAG_OP_nested_from_jagged: case JAG_OP_from_padded:
        for (int b = 0; b < 3 && !st; b++) {
            jag_tensor *src = NULL;
            if (op == JAG_OP_nested_from_jagged) st = jag_narrow(x, 0, comp_offsets[b], comp_lens[b], &comps[b]);
            else if (!(st = jag_select(x, 0, b, &src))) st = jag_narrow(src, 0, 0, comp_lens[b], &comps[b]);
            jag_release(src);
        }
        if (!st) st = jag_nested_from_list(comps, 3, JAG_JAGGED, &o[0]);
        break;
    default: st = JAG_ENOTIMPL;
    }
    for (int b = 0; b < 3; b++) jag_release(comps[b]);
    return st;
}

/* --- attention ---------------------------------------------------------------------------- */

/* Dense q (2, Hq, 3, 4), k and v (2, Hk, 5, 4); varlen q (6, Hq, 4) with the
 * components' offsets, k and v (9, Hk, 4). */
/* q, k, v jagged (3, 2, j, 4) over the same offsets (torch.nested's
 * attention: each component's (2, L, 4) attends within itself), full and
 * causal. */
static bool attention_nested_samples(jag_op_id op, jag_dtype dt, int k, sample *s) {
    if (op != JAG_OP_scaled_dot_product_attention || k > 1) return false;
    jag_tensor *o = from_i64(comp_offsets, 4);
    for (int i = 0; i < 3; i++) arg_t(s, jagged_heads(dt, o, 2, 4));
    jag_release(o);
    arg_b(s, k == 1), arg_d(s, 0);
    snprintf(s->what, sizeof s->what, "jagged (3, 2, j, 4) %s", k ? "causal" : "full");
    s->grad_slots = 7;
    s->batch_of_one = true;
    return true;
}

static bool attention_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (!jag_dtype_is_floating(dt)) return false;
    if (nested) return attention_nested_samples(op, dt, k, s);
    if (k > 2) return false;
    bool causal = k == 1;
    int64_t hq = k == 2 ? 4 : 2, hk = 2;
    if (op == JAG_OP_varlen_attention || op == JAG_OP_varlen_attention_backward) {
        static const int64_t ko[4] = {0, 4, 6, 9}, kl[3] = {3, 2, 2};
        jag_tensor *q = rnd(dt, -1, 1, 3, 6, hq, 4), *kk = rnd(dt, -1, 1, 3, 9, hk, 4), *v = rnd(dt, -1, 1, 3, 9, hk, 4);
        jag_tensor *qo = from_i64(comp_offsets, 4), *koff = from_i64(ko, 4), *kll = k == 2 ? from_i64(kl, 3) : NULL;
        if (op == JAG_OP_varlen_attention) {
            arg_t(s, q), arg_t(s, kk), arg_t(s, v), arg_t(s, qo), arg_none(s), arg_t(s, koff);
            if (kll) arg_t(s, kll);
            else arg_none(s);
        } else {
            jag_value fa[9] = {jag__v_tensor(q), jag__v_tensor(kk), jag__v_tensor(v), jag__v_tensor(qo), jag__v_tensor(NULL),
                               jag__v_tensor(koff), jag__v_tensor(kll), jag__v_bool(causal), jag__v_double(k == 2 ? 0.3 : 0)};
            jag_tensor *fo[2] = {0};
            if (jag_op_call(JAG_OP_varlen_attention, fa, 9, fo)) { fprintf(stderr, "%s\n", jag_last_error()); exit(2); }
            arg_t(s, q), arg_t(s, kk), arg_t(s, v), arg_t(s, fo[0]), arg_t(s, rnd(dt, -1, 1, 3, 6, hq, 4)), arg_t(s, fo[1]);
            arg_t(s, qo), arg_none(s), arg_t(s, koff);
            if (kll) arg_t(s, kll);
            else arg_none(s);
        }
        arg_b(s, causal), arg_d(s, k == 2 ? 0.3 : 0);
        s->grad_slots = 7;
        s->no_strided = op == JAG_OP_varlen_attention_backward;
    } else {
        jag_tensor *q = rnd(dt, -1, 1, 3, 2 * hq, 3, 4), *kk = rnd(dt, -1, 1, 3, 2 * hk, 5, 4), *v = rnd(dt, -1, 1, 3, 2 * hk, 5, 4);
        int64_t qs[4] = {2, hq, 3, 4}, ks[4] = {2, hk, 5, 4};
        jag_tensor *t[3] = {q, kk, v};
        for (int i = 0; i < 3; i++) {
            jag_tensor *r = NULL;
            if (jag_view(t[i], i ? ks : qs, 4, &r)) exit(2);
            jag_release(t[i]);
            arg_t(s, r);
        }
        if (op == JAG_OP_scaled_dot_product_attention_masked) {
            causal = false;
            if (k == 0) arg_t(s, rnd(dt, -1, 1, 2, 3, 5, 0));
            else {
                jag_tensor *m = rnd(dt, -1, 1, 3, 2, 3, 5), *m4 = NULL;
                int64_t ms[4] = {2, 1, 3, 5};
                jag_view(m, ms, 4, &m4);
                jag_release(m);
                arg_t(s, m4);
            }
        }
        arg_b(s, causal), arg_d(s, k == 2 ? 0.3 : 0);
        s->grad_slots = op == JAG_OP_scaled_dot_product_attention_masked ? 15 : 7;
    }
    snprintf(s->what, sizeof s->what, "%s%s", causal ? "causal" : "full", k == 2 ? ", grouped heads, scale 0.3" : "");
    return true;
}

static attn_view view_of(const jag_tensor *t) {
    attn_view v = {(const char *)jag_data(t), jag_stride(t, 0), jag_stride(t, 1), jag_stride(t, 2)};
    return v;
}
static const int64_t *i64_data(const jag_tensor *t) { return t ? (const int64_t *)jag_data(t) : NULL; }

/* Fill attn_args for rows-layout q, k, v (R, H, Dh) with per-sequence first
 * rows and counts. */
static void attn_setup(attn_args *a, const jag_tensor *q, const jag_tensor *k, const jag_tensor *v, int64_t B,
                       const int64_t *qo, const int64_t *ql, const int64_t *ko, const int64_t *kl, bool causal, double scale) {
    memset(a, 0, sizeof *a);
    a->f64 = jag_tensor_dtype(q) == JAG_FLOAT64;
    a->batch = B, a->hq = jag_size(q, 1), a->hk = jag_size(k, 1), a->dh = jag_size(q, 2);
    a->qo = qo, a->ql = ql, a->ko = ko, a->kl = kl;
    a->q = view_of(q), a->k = view_of(k), a->v = view_of(v);
    a->causal = causal;
    a->scale = scale > 0 ? scale : 1.0 / sqrt((double)a->dh);
}

static jag_tensor *tensor_from_doubles(const double *p, const int64_t *sz, int nd, jag_dtype dt) { return t_from(p, sz, nd, dt); }

/* The naive attention (jag__ref_attention: full score matrices in double),
 * dense inputs moved to the rows layout (B L, H, Dh) first. */
static jag_status attention_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    (void)n;
    jag_dtype dt = jag_tensor_dtype(a[0].u.t);
    if (op == JAG_OP_varlen_attention || op == JAG_OP_varlen_attention_backward) {
        bool bwd = op == JAG_OP_varlen_attention_backward;
        int base = bwd ? 6 : 3;
        const jag_tensor *q = a[0].u.t, *k = a[1].u.t, *v = a[2].u.t;
        int64_t ql[3], kl[3];
        const int64_t *qo = i64_data(a[base].u.t), *ko = i64_data(a[base + 2].u.t);
        for (int b = 0; b < 3; b++) {
            ql[b] = a[base + 1].kind == JAG_VAL_TENSOR ? i64_data(a[base + 1].u.t)[b] : qo[b + 1] - qo[b];
            kl[b] = a[base + 3].kind == JAG_VAL_TENSOR ? i64_data(a[base + 3].u.t)[b] : ko[b + 1] - ko[b];
        }
        jag_tensor *qc = NULL, *kc = NULL, *vc = NULL;
        jag_contiguous(q, &qc), jag_contiguous(k, &kc), jag_contiguous(v, &vc);
        attn_args at;
        attn_setup(&at, qc, kc, vc, 3, qo, ql, ko, kl, a[base + 4].u.b, a[base + 5].u.d);
        int64_t Rq = jag_size(q, 0), Rk = jag_size(k, 0), H = at.hq, Hk = at.hk, Dh = at.dh;
        jag_status st = JAG_OK;
        if (!bwd) {
            jag_tensor *out = NULL;
            double *lse = calloc((size_t)(Rq * H), sizeof *lse);
            st = jag_zeros((int64_t[]){Rq, H, Dh}, 3, dt, &out);
            if (!st) {
                jag__ref_attention(&at, (char *)jag_data(out), lse);
                o[0] = out;
                o[1] = tensor_from_doubles(lse, (int64_t[]){Rq, H}, 2, dt);
            }
            free(lse);
        } else {
            jag_tensor *goc = NULL;
            jag_contiguous(a[4].u.t, &goc);
            attn_view go = view_of(goc);
            double *dq = calloc((size_t)(Rq * H * Dh), sizeof(double)), *dk = calloc((size_t)(Rk * Hk * Dh), sizeof(double)),
                   *dv = calloc((size_t)(Rk * Hk * Dh), sizeof(double));
            jag__ref_attention_backward(&at, &go, dq, dk, dv, NULL, NULL);
            o[0] = tensor_from_doubles(dq, (int64_t[]){Rq, H, Dh}, 3, dt);
            o[1] = tensor_from_doubles(dk, (int64_t[]){Rk, Hk, Dh}, 3, dt);
            o[2] = tensor_from_doubles(dv, (int64_t[]){Rk, Hk, Dh}, 3, dt);
            free(dq), free(dk), free(dv);
            jag_release(goc);
        }
        jag_release(qc), jag_release(kc), jag_release(vc);
        return st;
    }
    /* dense (B, H, L, Dh): rows (B L, H, Dh) by a transpose copy */
    const jag_tensor *q = a[0].u.t, *k = a[1].u.t, *v = a[2].u.t;
    bool masked = op == JAG_OP_scaled_dot_product_attention_masked;
    const jag_tensor *mask = masked ? a[3].u.t : NULL;
    bool causal = a[masked ? 4 : 3].u.b;
    double scale = a[masked ? 5 : 4].u.d;
    int64_t B = jag_size(q, 0), H = jag_size(q, 1), Lq = jag_size(q, 2), Lk = jag_size(k, 2), Dh = jag_size(q, 3);
    jag_tensor *rows[3] = {0};
    const jag_tensor *in[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        jag_tensor *t = NULL, *c = NULL;
        jag_transpose(in[i], 1, 2, &t), jag_contiguous(t, &c);
        int64_t sz[3] = {jag_size(c, 0) * jag_size(c, 1), jag_size(c, 2), Dh};
        jag_view(c, sz, 3, &rows[i]);
        jag_release(t), jag_release(c);
    }
    int64_t qo[2], ql[2], ko[2], kl[2], mo[2], mh[2], mi[2], mj[2];
    for (int b = 0; b < B; b++) qo[b] = b * Lq, ql[b] = Lq, ko[b] = b * Lk, kl[b] = Lk;
    attn_args at;
    attn_setup(&at, rows[0], rows[1], rows[2], B, qo, ql, ko, kl, causal, scale);
    jag_tensor *mc = NULL;
    if (mask) {
        jag_tensor *me = NULL;
        jag_expand(mask, (int64_t[]){B, H, Lq, Lk}, 4, &me);
        jag_contiguous(me, &mc);
        jag_release(me);
        for (int b = 0; b < B; b++) mo[b] = b * H * Lq * Lk, mh[b] = Lq * Lk, mi[b] = Lk, mj[b] = 1;
        at.mbase = (const char *)jag_data(mc), at.mo = mo, at.mh = mh, at.mi = mi, at.mj = mj;
    }
    jag_tensor *out = NULL;
    double *lse = calloc((size_t)(B * Lq * H), sizeof *lse);
    jag_status st = jag_zeros((int64_t[]){B * Lq, H, Dh}, 3, dt, &out);
    if (!st) {
        jag__ref_attention(&at, (char *)jag_data(out), lse);
        /* back to (B, H, Lq, Dh) and lse (B, H, Lq) */
        jag_tensor *o4 = NULL, *ot = NULL, *l = tensor_from_doubles(lse, (int64_t[]){B, Lq, H}, 3, dt), *lt = NULL;
        jag_view(out, (int64_t[]){B, Lq, H, Dh}, 4, &o4), jag_transpose(o4, 1, 2, &ot), jag_contiguous(ot, &o[0]);
        jag_transpose(l, 1, 2, &lt), jag_contiguous(lt, &o[1]);
        jag_release(o4), jag_release(ot), jag_release(l), jag_release(lt);
    }
    free(lse);
    jag_release(out), jag_release(mc);
    for (int i = 0; i < 3; i++) jag_release(rows[i]);
    return st;
}

/* --- reductions over the ragged dim on inner tensors ----------------------------------------- */

static const jag_op_id ragged_kind_op[7] = {JAG_OP_sum, JAG_OP_mean, JAG_OP_amax, JAG_OP_amin, JAG_OP_logsumexp,
                                            JAG_OP_var, JAG_OP_std};

/* values (7, 4), offsets of 3 components (the last row a hole with lengths
 * (2, 3, 1)), k = kind + 7 * form: form 0 over the ragged dim, form 1 with
 * dim 1 too and lengths. The backward: y none or given. */
static bool ragged_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (nested || k >= 14 || !jag_dtype_is_floating(dt)) return false;
    static const int64_t off[4] = {0, 2, 5, 7}, lens[3] = {2, 3, 1};
    int kind = k % 7, form = k / 7;
    jag_tensor *values = rnd(dt, -2, 2, 2, 7, 4, 0);
    jag_tensor *o = from_i64(off, 4), *l = form ? from_i64(lens, 3) : NULL;
    int64_t mask = form ? 2 : 0;
    if (op == JAG_OP_ragged_reduce) {
        arg_t(s, values), arg_t(s, o);
        if (l) arg_t(s, l);
        else arg_none(s);
        arg_i(s, kind), arg_i(s, mask), arg_i(s, 1), arg_b(s, false);
    } else {
        jag_value fa[7] = {jag__v_tensor(values), jag__v_tensor(o), jag__v_tensor(l), jag__v_int(kind), jag__v_int(mask),
                           jag__v_int(1), jag__v_bool(false)};
        jag_tensor *y = NULL;
        if (jag_op_call(JAG_OP_ragged_reduce, fa, 7, &y)) { fprintf(stderr, "%s\n", jag_last_error()); exit(2); }
        jag_tensor *g = form ? rnd(dt, -1, 1, 1, 3, 0, 0) : rnd(dt, -1, 1, 2, 3, 4, 0);
        arg_t(s, values), arg_t(s, o);
        if (l) arg_t(s, l);
        else arg_none(s);
        if (form || kind == 2 || kind == 3 || kind == 4 || kind == 6) arg_t(s, y); /* needed by these kinds */
        else { jag_release(y); arg_none(s); }
        arg_none(s); /* idx: the max / min kinds only */
        arg_t(s, g), arg_i(s, kind), arg_i(s, mask), arg_i(s, 1), arg_b(s, false);
    }
    snprintf(s->what, sizeof s->what, "kind %d, %s", kind, form ? "with dim 1 and lengths" : "ragged dim alone");
    s->grad_slots = 1;
    return true;
}

/* Per component: the plain reduction of values rows [offsets[b], offsets[b]
 * + len b) over dim 0 (and 1); the backward: the gradient of sum(reduce * g)
 * through those plain ops (their own derivative rules), by jag_backward. */
static jag_status ragged_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    (void)n;
    bool bwd = op == JAG_OP_ragged_reduce_backward;
    const jag_tensor *values = a[0].u.t;
    const int64_t *off = i64_data(a[1].u.t);
    const int64_t *lens = a[2].kind == JAG_VAL_TENSOR ? i64_data(a[2].u.t) : NULL;
    int kind = (int)a[bwd ? 6 : 3].u.i;
    bool with_dim1 = a[bwd ? 7 : 4].u.i & 2;
    const jag_tensor *g = bwd ? a[5].u.t : NULL;
    jag_op_id rop = ragged_kind_op[kind];
    jag_tensor *leaf = NULL, *loss = NULL;
    jag_status st = jag_clone(values, &leaf);
    if (bwd) jag_set_requires_grad(leaf, true);
    jag_tensor *rows[3] = {0};
    for (int b = 0; b < 3 && !st; b++) {
        jag_tensor *part = NULL;
        int64_t len = lens ? lens[b] : off[b + 1] - off[b], dims[2] = {0, 1};
        st = jag_narrow(leaf, 0, off[b], len, &part);
        jag_value ra[4] = {jag__v_tensor(part), jag__v_ints(dims, with_dim1 ? 2 : 1), jag__v_bool(false), jag__v_bool(false)};
        if (rop == JAG_OP_var || rop == JAG_OP_std) ra[2] = jag__v_int(1);
        if (!st) st = jag_op_call(rop, ra, rop == JAG_OP_var || rop == JAG_OP_std ? 4 : 3, &rows[b]);
        jag_release(part);
    }
    if (!st && !bwd) {
        jag_tensor *u[3] = {0};
        for (int b = 0; b < 3; b++) jag_unsqueeze(rows[b], 0, &u[b]);
        st = jag_cat(u, 3, 0, &o[0]);
        for (int b = 0; b < 3; b++) jag_release(u[b]);
    } else if (!st) {
        for (int b = 0; b < 3 && !st; b++) {
            jag_tensor *gb = NULL, *p = NULL, *sp = NULL, *acc = NULL;
            st = jag_select(g, 0, b, &gb);
            if (!st) st = jag_mul(rows[b], gb, &p);
            if (!st) st = jag_sum(p, NULL, 0, false, &sp);
            if (!st) st = loss ? jag_add(loss, sp, 1.0, &acc) : (acc = jag_retain(sp), JAG_OK);
            jag_release(loss), jag_release(gb), jag_release(p), jag_release(sp);
            loss = acc;
        }
        if (!st) st = jag_backward(loss, NULL, false);
        if (!st) st = jag_get_grad(leaf, &o[0]);
        if (!st && !o[0]) st = jag_zeros_like(values, &o[0]);
    }
    for (int b = 0; b < 3; b++) jag_release(rows[b]);
    jag_release(loss), jag_release(leaf);
    return st;
}

/* values (7, 4), offsets of 3 components (0, 2, 5, 7), k = kind + 2 * form +
 * 4 * keepdim: kind max / min, form 1 with lengths (2, 3, 1) (row 6 a
 * hole). */
static bool ragged_idx_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    (void)op;
    if (nested || k >= 8 || !jag_dtype_is_floating(dt)) return false;
    static const int64_t off[4] = {0, 2, 5, 7}, lens[3] = {2, 3, 1};
    int kind = k % 2 ? 8 : 7, form = (k / 2) % 2;
    bool keep = k / 4;
    arg_t(s, rnd(dt, -2, 2, 2, 7, 4, 0)), arg_t(s, from_i64(off, 4));
    if (form) arg_t(s, from_i64(lens, 3));
    else arg_none(s);
    arg_i(s, kind), arg_b(s, keep);
    snprintf(s->what, sizeof s->what, "%s, %s%s", kind == 7 ? "max" : "min", form ? "with lengths" : "every row",
             keep ? ", keepdim" : "");
    s->grad_slots = 1;
    return true;
}

/* Per component: max_dim / min_dim of rows [offsets[b], offsets[b] + len b)
 * over dim 0, the values and indices stacked along a new dim 0. */
static jag_status ragged_idx_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    (void)op, (void)n;
    const int64_t *off = i64_data(a[1].u.t);
    const int64_t *lens = a[2].kind == JAG_VAL_TENSOR ? i64_data(a[2].u.t) : NULL;
    bool max = a[3].u.i == 7, keep = a[4].u.b;
    jag_tensor *vals[3] = {0}, *idxs[3] = {0};
    jag_status st = JAG_OK;
    for (int b = 0; b < 3 && !st; b++) {
        jag_tensor *part = NULL, *v = NULL, *i = NULL;
        int64_t len = lens ? lens[b] : off[b + 1] - off[b];
        st = jag_narrow(a[0].u.t, 0, off[b], len, &part);
        if (!st) st = (max ? jag_max_dim : jag_min_dim)(part, 0, keep, &v, &i);
        if (!st) st = jag_unsqueeze(v, 0, &vals[b]);
        if (!st) st = jag_unsqueeze(i, 0, &idxs[b]);
        jag_release(part), jag_release(v), jag_release(i);
    }
    if (!st) st = jag_cat(vals, 3, 0, &o[0]);
    if (!st) st = jag_cat(idxs, 3, 0, &o[1]);
    for (int b = 0; b < 3; b++) jag_release(vals[b]), jag_release(idxs[b]);
    return st;
}

/* --- softmax down the ragged dim on inner tensors -------------------------------------------- */

/* values (7, 4), offsets of 3 components (0, 2, 5, 7), k = log + 2 * form:
 * form 0 every row in a component, form 1 with lengths (2, 3, 1) (row 6 a
 * hole). The backward: y the forward's output, g random (its hole row too). */
static bool ragged_softmax_samples(jag_op_id op, jag_dtype dt, int k, bool nested, sample *s) {
    if (nested || k >= 4 || !jag_dtype_is_floating(dt)) return false;
    static const int64_t off[4] = {0, 2, 5, 7}, lens[3] = {2, 3, 1};
    bool log = k % 2, form = k / 2;
    jag_tensor *values = rnd(dt, -3, 3, 2, 7, 4, 0);
    jag_tensor *o = from_i64(off, 4), *l = form ? from_i64(lens, 3) : NULL;
    if (op == JAG_OP_ragged_softmax) {
        arg_t(s, values), arg_t(s, o);
        if (l) arg_t(s, l);
        else arg_none(s);
        arg_b(s, log);
    } else {
        jag_value fa[4] = {jag__v_tensor(values), jag__v_tensor(o), jag__v_tensor(l), jag__v_bool(log)};
        jag_tensor *y = NULL;
        if (jag_op_call(JAG_OP_ragged_softmax, fa, 4, &y)) { fprintf(stderr, "%s\n", jag_last_error()); exit(2); }
        jag_release(values);
        arg_t(s, y), arg_t(s, o);
        if (l) arg_t(s, l);
        else arg_none(s);
        arg_t(s, rnd(dt, -1, 1, 2, 7, 4, 0)), arg_b(s, log);
    }
    snprintf(s->what, sizeof s->what, "%s, %s", log ? "log_softmax" : "softmax", form ? "with lengths (a hole)" : "no holes");
    s->grad_slots = 1;
    return true;
}

/* Per component: the dense softmax (log_softmax) reference over dim 0 of
 * values rows [offsets[b], offsets[b] + len b), written into those rows of
 * a zero tensor; the backward: the dense softmax_backward (log_softmax_
 * backward) reference on the same rows of g and y, torch's
 * y (g - sum g y) and g - exp(y) sum g. Rows outside every component 0. */
static jag_status ragged_softmax_ref(jag_op_id op, const jag_value *a, int n, jag_tensor **o) {
    (void)n;
    bool bwd = op == JAG_OP_ragged_softmax_backward, log = a[bwd ? 4 : 3].u.b;
    const jag_tensor *x = a[0].u.t, *g = bwd ? a[3].u.t : NULL;
    const int64_t *off = i64_data(a[1].u.t);
    const int64_t *lens = a[2].kind == JAG_VAL_TENSOR ? i64_data(a[2].u.t) : NULL;
    jag_tensor *oc = NULL, *lc = NULL;
    jag_status st = jag_contiguous(a[1].u.t, &oc);
    if (!st && lens) st = jag_contiguous(a[2].u.t, &lc);
    if (!st) st = jag_zeros(jag_sizes(x), jag_ndim(x), jag_tensor_dtype(x), &o[0]);
    if (!st) off = i64_data(oc), lens = lc ? i64_data(lc) : NULL;
    for (int b = 0; b < 3 && !st; b++) {
        int64_t len = lens ? lens[b] : off[b + 1] - off[b];
        jag_tensor *xb = NULL, *gb = NULL, *ob = NULL;
        st = jag_narrow(x, 0, off[b], len, &xb);
        if (!st && g) st = jag_narrow(g, 0, off[b], len, &gb);
        if (!st) st = jag_narrow(o[0], 0, off[b], len, &ob);
        if (!st && !bwd) {
            jag_value ra[2] = {jag__v_tensor(xb), jag__v_int(0)};
            st = log ? jag__ref_log_softmax("log_softmax", ra, 2, &ob) : jag__ref_softmax("softmax", ra, 2, &ob);
        } else if (!st) {
            jag_value ra[3] = {jag__v_tensor(gb), jag__v_tensor(xb), jag__v_int(0)};
            st = log ? jag__ref_log_softmax_backward("log_softmax_backward", ra, 3, &ob)
                     : jag__ref_softmax_backward("softmax_backward", ra, 3, &ob);
        }
        jag_release(xb), jag_release(gb), jag_release(ob);
    }
    jag_release(oc), jag_release(lc);
    return st;
}

/* ---- the op table -------------------------------------------------------------------- */

static const family fam_unary = {"unary", unary_samples, unary_ref, F_INTS | F_GRAD | F_NESTED | F_CHAIN, 1};
static const family fam_binary = {"binary", binary_samples, binary_ref, F_INTS | F_GRAD | F_NESTED | F_CHAIN, 1};
static const family fam_compare = {"compare", binary_samples, binary_ref, F_INTS | F_NESTED, 1};
static const family fam_where = {"where", where_samples, binary_ref, F_INTS | F_GRAD | F_NESTED, 1};
static const family fam_copy = {"copy", copy_samples, copy_ref, F_INTS | F_GRAD | F_NESTED, 1};
/* to_dtype's samples convert float64 to float32: no float64 gradcheck */
static const family fam_convert = {"copy", copy_samples, copy_ref, F_INTS | F_NESTED, 1};
static const family fam_view = {"view", view_samples, view_ref, F_INTS | F_GRAD, 1};
/* the views with a jagged rule */
static const family fam_view_nested = {"view", view_samples, view_ref, F_INTS | F_GRAD | F_NESTED, 1};
static const family fam_reduce = {"reduce", reduce_samples, reduce_ref, F_GRAD | F_NESTED | F_LAYOUT_ORDER, 4};
static const family fam_reduce_int = {"reduce", reduce_samples, reduce_ref, F_INTS | F_GRAD | F_NESTED | F_LAYOUT_ORDER, 4};
/* prod has no rule on jagged tensors (JAG_ENOTIMPL): no check (c) */
static const family fam_prod = {"reduce", reduce_samples, reduce_ref, F_INTS | F_GRAD | F_LAYOUT_ORDER, 4};
/* max / min of the whole tensor have no rule on jagged tensors */
static const family fam_whole = {"reduce", reduce_samples, reduce_ref, F_INTS | F_GRAD | F_LAYOUT_ORDER, 4};
static const family fam_argreduce = {"reduce", reduce_samples, reduce_ref, F_INTS | F_NESTED, 1};
static const family fam_gemm = {"gemm", gemm_samples, gemm_ref, F_GRAD | F_NESTED | F_LAYOUT_ORDER, 4};
static const family fam_bmm = {"gemm", gemm_samples, gemm_ref, F_GRAD | F_LAYOUT_ORDER, 4};
static const family fam_softmax = {"softmax", softmax_samples, norm_ref, F_GRAD | F_NESTED | F_LAYOUT_ORDER, 4};
static const family fam_norm = {"norm", norm_samples, norm_ref, F_GRAD | F_NESTED | F_LAYOUT_ORDER, 10};
/* the native forms have no rule on jagged tensors */
static const family fam_native_norm = {"norm", norm_samples, norm_ref, F_GRAD | F_LAYOUT_ORDER, 10};
static const family fam_backward = {"backward", backward_samples, norm_ref, F_LAYOUT_ORDER, 10};
static const family fam_index = {"index", index_samples, index_ref, F_INTS | F_GRAD, 4};
static const family fam_index_nested = {"index", index_samples, index_ref, F_INTS | F_GRAD | F_NESTED, 4};
static const family fam_index_float = {"index", index_samples, index_ref, F_GRAD, 4};
static const family fam_factory = {"factory", factory_samples, factory_ref, F_INTS, 1};
static const family fam_bridge = {"bridge", bridge_samples, bridge_ref, F_INTS | F_GRAD, 1};
static const family fam_attention = {"attention", attention_samples, attention_ref, F_GRAD | F_LAYOUT_ORDER, 10};
static const family fam_attention_nested = {"attention", attention_samples, attention_ref, F_GRAD | F_NESTED | F_LAYOUT_ORDER, 10};
static const family fam_attention_bwd = {"attention", attention_samples, attention_ref, F_LAYOUT_ORDER, 10};
static const family fam_ragged = {"ragged", ragged_samples, ragged_ref, F_GRAD, 4};
static const family fam_ragged_bwd = {"ragged", ragged_samples, ragged_ref, 0, 4};
static const family fam_ragged_idx = {"ragged", ragged_idx_samples, ragged_idx_ref, F_GRAD, 1};
static const family fam_ragged_softmax = {"ragged", ragged_softmax_samples, ragged_softmax_ref, F_GRAD | F_LAYOUT_ORDER, 4};
static const family fam_ragged_softmax_bwd = {"ragged", ragged_softmax_samples, ragged_softmax_ref, F_LAYOUT_ORDER, 4};

/* Whether op's row is a unary pointwise op, "name(Tensor x) -> Tensor"
 * (clone aside): such a row needs no entry below, its samples and its
 * reference (jag__ref_unary) are the unary family's. */
static bool unary_row(jag_op_id op) {
    char unary[160];
    snprintf(unary, sizeof unary, "%s(Tensor x) -> Tensor", jag__ops[op].name);
    return (jag__ops[op].tags & JAG_TAG_POINTWISE) && strcmp(jag__ops[op].schema, unary) == 0 && op != JAG_OP_clone;
}

static const family *family_of(jag_op_id op) {
    if (unary_row(op)) return &fam_unary;
    switch (op) {
    case JAG_OP_leaky_relu: case JAG_OP_elu: case JAG_OP_softplus: case JAG_OP_hardtanh: case JAG_OP_clamp:
        return &fam_unary;
    case JAG_OP_add: case JAG_OP_sub: case JAG_OP_mul: case JAG_OP_div: case JAG_OP_pow: case JAG_OP_maximum:
    case JAG_OP_minimum:
        return &fam_binary;
    case JAG_OP_eq: case JAG_OP_ne: case JAG_OP_lt: case JAG_OP_le: case JAG_OP_gt: case JAG_OP_ge:
        return &fam_compare;
    case JAG_OP_where: return &fam_where;
    case JAG_OP_clone: return &fam_copy;
    case JAG_OP_to_dtype: return &fam_convert;
    case JAG_OP_view: case JAG_OP_transpose: case JAG_OP_narrow: case JAG_OP_select: case JAG_OP_unsqueeze:
        return &fam_view_nested;
    case JAG_OP_permute: case JAG_OP_squeeze: case JAG_OP_expand: return &fam_view;
    case JAG_OP_prod: return &fam_prod;
    case JAG_OP_max: case JAG_OP_min: return &fam_whole;
    case JAG_OP_sum: case JAG_OP_amax: case JAG_OP_amin:
    case JAG_OP_max_dim: case JAG_OP_min_dim:
        return &fam_reduce_int;
    case JAG_OP_mean: case JAG_OP_var: case JAG_OP_std: case JAG_OP_logsumexp: return &fam_reduce;
    case JAG_OP_argmax: case JAG_OP_argmin: return &fam_argreduce;
    case JAG_OP_mm: case JAG_OP_linear: case JAG_OP_matmul: return &fam_gemm;
    case JAG_OP_bmm: return &fam_bmm;
    case JAG_OP_softmax: case JAG_OP_log_softmax: return &fam_softmax;
    case JAG_OP_layer_norm: case JAG_OP_rms_norm: return &fam_norm;
    case JAG_OP_native_layer_norm: case JAG_OP_native_rms_norm: return &fam_native_norm;
    case JAG_OP_layer_norm_backward: case JAG_OP_rms_norm_backward: case JAG_OP_softmax_backward:
    case JAG_OP_log_softmax_backward: case JAG_OP_mean_backward: case JAG_OP_gelu_backward:
    case JAG_OP_gelu_tanh_backward: case JAG_OP_silu_backward: case JAG_OP_sigmoid_backward:
    case JAG_OP_tanh_backward: case JAG_OP_logsigmoid_backward: case JAG_OP_softplus_backward:
    case JAG_OP_hardswish_backward: case JAG_OP_hardsigmoid_backward:
        return &fam_backward;
    case JAG_OP_index_select: case JAG_OP_gather: return &fam_index_nested;
    case JAG_OP_embedding: case JAG_OP_cat: return &fam_index;
    case JAG_OP_embedding_bag: case JAG_OP_scatter_add: return &fam_index_float;
    case JAG_OP_full: case JAG_OP_full_like: return &fam_factory;
    case JAG_OP_values: case JAG_OP_nested_from_jagged: case JAG_OP_to_padded: case JAG_OP_from_padded:
        return &fam_bridge;
    case JAG_OP_scaled_dot_product_attention: return &fam_attention_nested;
    case JAG_OP_scaled_dot_product_attention_masked: case JAG_OP_varlen_attention: return &fam_attention;
    case JAG_OP_varlen_attention_backward: return &fam_attention_bwd;
    case JAG_OP_ragged_reduce: return &fam_ragged;
    case JAG_OP_ragged_reduce_indices: return &fam_ragged_idx;
    case JAG_OP_ragged_reduce_backward: return &fam_ragged_bwd;
    case JAG_OP_ragged_softmax: return &fam_ragged_softmax;
    case JAG_OP_ragged_softmax_backward: return &fam_ragged_softmax_bwd;
    default: return NULL;
    }
}

/* Rows the harness does not cover, each with its reason. */
static const struct {
    const char *op;
    const char *reason;
} not_covered[] = {
    {"", ""},
};

/* Rows that a traced function cannot call yet (check e does not apply):
 * the trace must fail with a message naming the op, so that this list is
 * shortened when one becomes traceable. */
static const struct {
    jag_op_id op;
    const char *reason;
} untraceable_ops[] = {
    {JAG_OP_to_padded, "reads the offsets' data (the padded length)"},
    {JAG_OP_from_padded, "reads the lengths' data"},
    {JAG_OP_scaled_dot_product_attention, "its composite kernel has no META shapes on dense proxies"},
    {JAG_OP_scaled_dot_product_attention_masked, "its composite kernel has no META shapes on dense proxies"},
};

static bool untraceable(jag_op_id op) {
    for (size_t i = 0; i < sizeof untraceable_ops / sizeof untraceable_ops[0]; i++)
        if (untraceable_ops[i].op == op) return true;
    return false;
}

static bool is_not_covered(const char *name) {
    for (size_t i = 0; i < sizeof not_covered / sizeof not_covered[0]; i++)
        if (not_covered[i].op[0] && !strcmp(not_covered[i].op, name)) return true;
    return false;
}

/* ---- the checks ------------------------------------------------------------------------ */

enum { CK_REF, CK_STRIDED, CK_NESTED, CK_GRAD, CK_COMPILE, N_CHECKS };
static const char *check_name[N_CHECKS] = {"(a) kernel vs reference", "(b) strided vs contiguous",
                                           "(c) nested vs per-component", "(d) gradcheck (float64)",
                                           "(e) compiled vs eager"};
static int rows_checked[N_CHECKS], rows_applicable[N_CHECKS];
static bool row_ran[N_CHECKS];
/* whether some sample of the row has a dense operand to lay out otherwise */
static bool row_has_strided;

static void release_outs(jag_tensor **o, int n) {
    for (int i = 0; i < n; i++) jag_release(o[i]), o[i] = NULL;
}

/* The dtype of an output (a nested one's values). */
static jag_dtype out_dtype(const jag_tensor *t) {
    if (!jag_is_nested(t)) return jag_tensor_dtype(t);
    jag_tensor *v = NULL;
    jag_nested_values(t, &v);
    jag_dtype dt = jag_tensor_dtype(v);
    jag_release(v);
    return dt;
}

static double family_tol(const family *f, jag_dtype dt, double *atol) {
    double rtol;
    tol_for(dt, &rtol, atol);
    *atol *= f->tol_scale;
    return rtol * f->tol_scale;
}

/* (a) and (b) on one sample: the kernel against the reference, then the
 * same op on non-contiguous copies of every dense operand, exactly. */
static void check_ref_and_strided(jag_op_id op, const family *f, jag_dtype dt, sample *s) {
    const char *name = jag_op_name(op);
    int nout = jag_op_num_outputs(op);
    jag_tensor *got[MAX_OUT] = {0}, *want[MAX_OUT] = {0};
    jag_status st = jag_op_call(op, s->a, s->n, got);
    CHECK_MSG(st == JAG_OK, "%s: %s, %s %s: %s", name, check_name[CK_REF], jag_dtype_name(dt), s->what, jag_last_error());
    if (st) return;
    st = f->ref(op, s->a, s->n, want);
    CHECK_MSG(st == JAG_OK, "%s: reference failed (%s): %s", name, s->what, jag_last_error());
    if (!st) {
        for (int i = 0; i < nout; i++) {
            double atol, rtol = family_tol(f, out_dtype(want[i]), &atol);
            CHECK_MSG(values_close(got[i], want[i], rtol, atol), "%s: %s, %s %s, output %d", name, check_name[CK_REF],
                      jag_dtype_name(dt), s->what, i);
        }
        row_ran[CK_REF] = true;
    }
    release_outs(want, nout);
    if (!s->no_strided) {
        jag_tensor *ts[MAX_SLOTS], *nc[MAX_SLOTS];
        int n = slots(s, ts);
        bool any = false;
        for (int i = 0; i < n; i++) {
            bool dense = !jag_is_nested(ts[i]) && jag_ndim(ts[i]) >= 1 && jag_numel(ts[i]) > 1;
            nc[i] = dense ? t_noncontig(ts[i]) : jag_retain(ts[i]);
            any |= dense && !jag_is_contiguous(nc[i]);
        }
        if (any) {
            row_has_strided = true;
            bound b;
            bind(s, nc, &b);
            jag_tensor *alt[MAX_OUT] = {0};
            st = jag_op_call(op, b.a, s->n, alt);
            CHECK_MSG(st == JAG_OK, "%s: %s, %s %s: %s", name, check_name[CK_STRIDED], jag_dtype_name(dt), s->what,
                      jag_last_error());
            for (int i = 0; !st && i < nout; i++) {
                double atol = 0, rtol = 0;
                if (f->flags & F_LAYOUT_ORDER) rtol = family_tol(f, out_dtype(got[i]), &atol);
                CHECK_MSG(values_close(alt[i], got[i], rtol, atol), "%s: %s, %s %s, output %d differs", name,
                          check_name[CK_STRIDED], jag_dtype_name(dt), s->what, i);
            }
            if (!st) row_ran[CK_STRIDED] = true;
            release_outs(alt, nout);
        }
        for (int i = 0; i < n; i++) jag_release(nc[i]);
    }
    release_outs(got, nout);
}

/* (c): op on the nested sample, each result component against op on the
 * arguments' components (dims one less). */
static void check_nested(jag_op_id op, const family *f, jag_dtype dt, sample *s) {
    const char *name = jag_op_name(op);
    int nout = jag_op_num_outputs(op);
    jag_tensor *got[MAX_OUT] = {0};
    jag_status st = jag_op_call(op, s->a, s->n, got);
    CHECK_MSG(st == JAG_OK, "%s: %s, %s %s: %s", name, check_name[CK_NESTED], jag_dtype_name(dt), s->what, jag_last_error());
    if (st) return;
    jag_tensor *comps[MAX_ARGS][3] = {{0}};
    for (int i = 0; i < s->n; i++) {
        int nb = 0;
        if (s->a[i].kind == JAG_VAL_TENSOR && jag_is_nested(s->a[i].u.t)) jag_nested_unbind(s->a[i].u.t, comps[i], 3, &nb);
    }
    double atol, rtol = family_tol(f, dt, &atol);
    for (int b = 0; b < 3; b++) {
        jag_value ca[MAX_ARGS];
        int64_t shifted[MAX_ARGS][8];
        for (int i = 0; i < s->n; i++) {
            ca[i] = comps[i][0] ? jag__v_tensor(comps[i][b]) : s->a[i];
            if ((s->size_args & (1u << i)) && ca[i].kind == JAG_VAL_INTS) ca[i].u.ints.v++, ca[i].u.ints.n--;
            if (s->dim_args & (1u << i)) {
                if (ca[i].kind == JAG_VAL_INT) ca[i].u.i -= 1;
                else if (ca[i].kind == JAG_VAL_INTS) {
                    for (int k = 0; k < ca[i].u.ints.n; k++) shifted[i][k] = ca[i].u.ints.v[k] - 1;
                    ca[i].u.ints.v = shifted[i];
                }
            }
        }
        jag_tensor *one[MAX_ARGS] = {0}, *want[MAX_OUT] = {0};
        for (int i = 0; s->batch_of_one && i < s->n; i++)
            if (comps[i][0]) jag_unsqueeze(comps[i][b], 0, &one[i]), ca[i] = jag__v_tensor(one[i]);
        st = jag_op_call(op, ca, s->n, want);
        for (int i = 0; i < s->n; i++) jag_release(one[i]);
        CHECK_MSG(st == JAG_OK, "%s: %s, component %d: %s", name, check_name[CK_NESTED], b, jag_last_error());
        for (int i = 0; !st && s->batch_of_one && i < nout; i++) {
            jag_tensor *item = NULL;
            jag_select(want[i], 0, 0, &item);
            jag_release(want[i]), want[i] = item;
        }
        for (int i = 0; !st && i < nout; i++) {
            jag_tensor *part = NULL, *all[3] = {0};
            int nb = 0;
            if (jag_is_nested(got[i])) jag_nested_unbind(got[i], all, 3, &nb), part = jag_retain(all[b]);
            else jag_select(got[i], 0, b, &part);
            CHECK_MSG(part && t_allclose(part, want[i], rtol, atol), "%s: %s, %s %s, component %d output %d", name,
                      check_name[CK_NESTED], jag_dtype_name(dt), s->what, b, i);
            for (int k = 0; k < nb; k++) jag_release(all[k]);
            jag_release(part);
        }
        if (!st) row_ran[CK_NESTED] = true;
        release_outs(want, nout);
    }
    for (int i = 0; i < s->n; i++)
        for (int b = 0; b < 3; b++) jag_release(comps[i][b]);
    release_outs(got, nout);
}

/* (d) */
typedef struct grad_ctx {
    jag_op_id op;
    const sample *s;
    int slot_of_input[MAX_SLOTS];
} grad_ctx;

static jag_status grad_fn(jag_tensor *const *inputs, int n_inputs, jag_tensor **out, void *vctx) {
    grad_ctx *c = vctx;
    jag_tensor *ts[MAX_SLOTS];
    slots(c->s, ts);
    for (int i = 0; i < n_inputs; i++) ts[c->slot_of_input[i]] = inputs[i];
    bound b;
    bind(c->s, ts, &b);
    jag_tensor *o[MAX_OUT] = {0};
    jag_status st = jag_op_call(c->op, b.a, c->s->n, o);
    if (st) return st;
    *out = o[0];
    release_outs(o + 1, jag_op_num_outputs(c->op) - 1);
    return JAG_OK;
}

static void check_grad(jag_op_id op, sample *s) {
    const char *name = jag_op_name(op);
    jag_tensor *ts[MAX_SLOTS], *in[MAX_SLOTS];
    int n = slots(s, ts), m = 0;
    grad_ctx c = {op, s, {0}};
    for (int i = 0; i < n; i++) {
        if (!(s->grad_slots & (1u << i)) || !jag_dtype_is_floating(jag_tensor_dtype(ts[i]))) continue;
        jag_clone(ts[i], &in[m]);
        jag_set_requires_grad(in[m], true);
        c.slot_of_input[m++] = i;
    }
    if (m) {
        jag_status st = jag_gradcheck(grad_fn, &c, in, m, 1e-6, 1e-6, 1e-5);
        CHECK_MSG(st == JAG_OK, "%s: %s, %s: %s", name, check_name[CK_GRAD], s->what, jag_last_error());
        if (!st) row_ran[CK_GRAD] = true;
    }
    for (int i = 0; i < m; i++) jag_release(in[i]);
}

/* (e): the op traced (for pointwise ops with float results: then y - 2.5,
 * 2.5 - that, and a product with y, one fused region), compiled with every
 * pass, run on the same inputs, against the same function run eagerly. */
typedef struct trace_ctx {
    jag_op_id op;
    const sample *s;
    bool chain;
} trace_ctx;

static jag_status traced(void *vctx, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs, int n_outputs) {
    (void)n_inputs;
    trace_ctx *c = vctx;
    bound b;
    bind(c->s, inputs, &b);
    jag_tensor *o[MAX_OUT] = {0};
    jag_status st = jag_op_call(c->op, b.a, c->s->n, o);
    if (st) return st;
    if (!c->chain) {
        for (int i = 0; i < n_outputs; i++) outputs[i] = o[i];
        return JAG_OK;
    }
    jag_tensor *z = NULL, *w = NULL;
    jag_value sa[2] = {jag__v_tensor(o[0]), jag__v_double(2.5)};
    st = jag_op_call(JAG_OP_sub, sa, 2, &z); /* y - 2.5 */
    if (!st) {
        jag_tensor *l = NULL;
        st = jag_full(NULL, 0, 2.5, jag_tensor_dtype(z), &l);
        jag_value sb[2] = {jag__v_tensor(l), jag__v_tensor(z)};
        if (!st) st = jag_op_call(JAG_OP_sub, sb, 2, &w); /* 2.5 - (y - 2.5) */
        jag_release(l);
    }
    if (!st) {
        jag_value sc[2] = {jag__v_tensor(w), jag__v_tensor(o[0])};
        st = jag_op_call(JAG_OP_mul, sc, 2, &outputs[0]);
    }
    jag_release(z), jag_release(w), jag_release(o[0]);
    return st;
}

static void check_compile(jag_op_id op, const family *f, jag_dtype dt, sample *s, bool chain) {
    const char *name = jag_op_name(op);
    jag_tensor *ts[MAX_SLOTS];
    int n = slots(s, ts), nout = chain ? 1 : jag_op_num_outputs(op);
    trace_ctx c = {op, s, chain};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    jag_status st = jag_trace_function(traced, &c, ts, n, NULL, nout, &t);
    if (!st) st = jag_trace_compile(t, JAG_PASSES_ALL, &p);
    CHECK_MSG(st == JAG_OK, "%s: %s, %s %s%s: %s", name, check_name[CK_COMPILE], jag_dtype_name(dt), s->what,
              chain ? " in a chain" : "", jag_last_error());
    if (!st && chain && jag__fusable_op(op) && jag_ndim(ts[0]) > 0) {
        static char text[8192];
        jag_trace_format(jag_program_trace(p), text, sizeof text);
        CHECK_MSG(strstr(text, "fused") != NULL, "%s: %s: the chain was not fused:\n%s", name, check_name[CK_COMPILE], text);
    }
    jag_tensor *got[MAX_OUT] = {0}, *want[MAX_OUT] = {0};
    if (!st) st = jag_program_run(p, ts, n, got, nout);
    CHECK_MSG(st == JAG_OK, "%s: %s, run: %s", name, check_name[CK_COMPILE], jag_last_error());
    if (!st) {
        jag_status est = traced(&c, ts, n, want, nout);
        CHECK_MSG(est == JAG_OK, "%s: eager: %s", name, jag_last_error());
        double atol, rtol = family_tol(f, dt, &atol);
        for (int i = 0; !est && i < nout; i++)
            CHECK_MSG(values_close(got[i], want[i], rtol, atol), "%s: %s, %s %s%s, output %d differs", name,
                      check_name[CK_COMPILE], jag_dtype_name(dt), s->what, chain ? " in a fused chain" : "", i);
        if (!est) row_ran[CK_COMPILE] = true;
    }
    release_outs(got, nout), release_outs(want, nout);
    jag_program_free(p);
    jag_trace_free(t);
}

static void check_untraceable(jag_op_id op, sample *s) {
    jag_tensor *ts[MAX_SLOTS];
    int n = slots(s, ts);
    trace_ctx c = {op, s, false};
    jag_trace *t = NULL;
    jag_status st = jag_trace_function(traced, &c, ts, n, NULL, jag_op_num_outputs(op), &t);
    CHECK_MSG(st != JAG_OK && strstr(jag_last_error(), jag_op_name(op)) != NULL,
              "%s: traced now (%s): take it off the untraceable list", jag_op_name(op), jag_last_error());
    jag_trace_free(t);
}

static bool float_result(jag_op_id op, const sample *s) {
    jag_tensor *o[MAX_OUT] = {0};
    if (jag_op_call(op, s->a, s->n, o)) return false;
    bool fl = jag_dtype_is_floating(jag_tensor_dtype(o[0])) && !jag_is_nested(o[0]);
    release_outs(o, jag_op_num_outputs(op));
    return fl;
}

static void run_row(jag_op_id op, const family *f) {
    static const jag_dtype dts[4] = {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64};
    memset(row_ran, 0, sizeof row_ran);
    row_has_strided = false;
    for (int d = 0; d < ((f->flags & F_INTS) ? 4 : 2); d++) {
        for (int k = 0;; k++) {
            sample s = {0};
            if (!f->samples(op, dts[d], k, false, &s)) break;
            check_ref_and_strided(op, f, dts[d], &s);
            if (k == 0 && untraceable(op)) check_untraceable(op, &s);
            else if (k == 0) check_compile(op, f, dts[d], &s, false);
            if ((f->flags & F_CHAIN) && dts[d] != JAG_INT32 && dts[d] != JAG_INT64 && float_result(op, &s) &&
                (k == 0 || k == 5 || k == 6))
                check_compile(op, f, dts[d], &s, true);
            if (dts[d] == JAG_FLOAT64 && (f->flags & F_GRAD) && k < 3) check_grad(op, &s);
            sample_free(&s);
        }
        if (f->flags & F_NESTED)
            for (int k = 0;; k++) {
                sample s = {0};
                if (!f->samples(op, dts[d], k, true, &s)) break;
                check_nested(op, f, dts[d], &s);
                sample_free(&s);
            }
    }
    bool applies[N_CHECKS] = {true, row_has_strided, (f->flags & F_NESTED) != 0, (f->flags & F_GRAD) != 0,
                              !untraceable(op)};
    for (int c = 0; c < N_CHECKS; c++) {
        if (!applies[c]) continue;
        rows_applicable[c]++;
        if (row_ran[c]) rows_checked[c]++;
        else fprintf(stderr, "%s: %s: no sample ran\n", jag_op_name(op), check_name[c]);
    }
}

static void test_every_op(void) {
    TEST_BEGIN();
    int covered = 0, listed = 0;
    for (jag_op_id op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        const char *name = jag_op_name(op);
        const family *f = family_of(op);
        if (!f) {
            CHECK_MSG(is_not_covered(name), "%s: no sample inputs and not in the not-covered list", name);
            listed += is_not_covered(name);
            continue;
        }
        CHECK_MSG(!is_not_covered(name), "%s: in the not-covered list but has samples", name);
        run_row(op, f);
        covered++;
    }
    printf("untraceable rows (check e does not apply): %d\n", (int)(sizeof untraceable_ops / sizeof untraceable_ops[0]));
    printf("rows with samples: %d / %d (%d not covered, listed with reasons)\n", covered, JAG_OP_BUILTIN_COUNT, listed);
    for (int c = 0; c < N_CHECKS; c++)
        printf("%-30s %3d / %3d rows (%d rows it does not apply to)\n", check_name[c], rows_checked[c], JAG_OP_BUILTIN_COUNT,
               JAG_OP_BUILTIN_COUNT - rows_applicable[c]);
    for (int c = 0; c < N_CHECKS; c++) CHECK_MSG(rows_checked[c] == rows_applicable[c], "%s: %d of %d rows ran", check_name[c],
                                                 rows_checked[c], rows_applicable[c]);
}

TEST_MAIN(test_every_op)
