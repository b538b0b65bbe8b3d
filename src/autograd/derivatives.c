/* derivatives.c — the derivative rule of every differentiable op, in one
 * table beside ops.def (PyTorch's derivatives.yaml), and jag__sum_to.
 *
 * Rules are written with jag's public ops (they run with grad mode off), so
 * the same code serves dense and nested tensors:
 *   - pointwise rules call pointwise ops, which run on a nested tensor's
 *     values / buffer; a dense operand broadcast over a nested one gets its
 *     gradient back through jag__sum_to;
 *   - every other rule is written for dense tensors and carried to nested
 *     inputs by one of two runners that mirror how the forward ran: on the
 *     packed values (jagged: transpose, narrow, sum, mean, mm, linear) or
 *     component by component (strided: the forward's per-component
 *     fallback);
 *   - a nested gradient is always re-wrapped around the input's own
 *     structure (conform): same offsets object (jagged), same tables
 *     (strided).
 * Scatter-adds (the backward of index_select, gather, embedding, max_dim)
 * are the scatter_add op, so that traces record them. */
#include "autograd.h"
#include "../subclass/nested.h"

#include <math.h>

/* ---- a rule's temporaries ------------------------------------------------ */

/* Every tensor a rule makes goes into its pool and is released at the end;
 * the first failure is remembered and every later call is skipped, so a
 * rule reads as straight-line math and the error that comes out is the
 * first one. */
#define POOL_CAP 96
typedef struct pool {
    jag_status st;
    int n;
    jag_tensor *t[POOL_CAP];
} pool;

static jag_tensor *take(pool *p, jag_status st, jag_tensor *t) {
    if (st) {
        p->st = st;
        return NULL;
    }
    if (p->n == POOL_CAP) {
        jag_release(t);
        p->st = jag__error(JAG_EINTERNAL, "autograd: a derivative rule needs more than %d temporaries", POOL_CAP);
        return NULL;
    }
    p->t[p->n++] = t;
    return t;
}

static void pool_free(pool *p) {
    for (int i = 0; i < p->n; i++) jag_release(p->t[i]);
    p->n = 0;
}

static jag_tensor *fail(pool *p, jag_status st) {
    if (!p->st) p->st = st;
    return NULL;
}

/* The body of a wrapper: run `call` (it writes `o`) unless the pool has
 * failed already, and keep the result. */
#define POOL_RUN(call)                                                         \
    jag_tensor *o = NULL;                                                      \
    if (p->st) return NULL;                                                    \
    jag_status st = (call);                                                    \
    return take(p, st, o)

typedef jag_status (*unary_fn)(const jag_tensor *, jag_tensor **);
typedef jag_status (*binary_fn)(const jag_tensor *, const jag_tensor *, jag_tensor **);
typedef jag_status (*scalar_fn)(const jag_tensor *, double, jag_tensor **);
typedef jag_status (*reduce_fn)(const jag_tensor *, const int *, int, bool, jag_tensor **);

static jag_tensor *un(pool *p, unary_fn f, const jag_tensor *x) { POOL_RUN(f(x, &o)); }
static jag_tensor *bin(pool *p, binary_fn f, const jag_tensor *a, const jag_tensor *b) {
    POOL_RUN(f(a, b, &o));
}
static jag_tensor *sca(pool *p, scalar_fn f, const jag_tensor *a, double s) { POOL_RUN(f(a, s, &o)); }
static jag_tensor *red(pool *p, reduce_fn f, const jag_tensor *x, const int *dims, int nd, bool keepdim) {
    POOL_RUN(f(x, dims, nd, keepdim, &o));
}
static jag_tensor *add_(pool *p, const jag_tensor *a, const jag_tensor *b) { POOL_RUN(jag_add(a, b, 1.0, &o)); }
static jag_tensor *where_(pool *p, const jag_tensor *c, const jag_tensor *a, const jag_tensor *b) {
    POOL_RUN(jag_where(c, a, b, &o));
}
static jag_tensor *to_(pool *p, const jag_tensor *x, jag_dtype dt) { POOL_RUN(jag_to_dtype(x, dt, &o)); }
static jag_tensor *reshape_(pool *p, const jag_tensor *x, const int64_t *sizes, int n) {
    jag_tensor *o = NULL;
    if (p->st) return NULL;
    /* jag_view refuses to view a 0-d tensor as (1, ..., 1); expanding it is
     * the same view */
    bool scalar_to_ones = jag_ndim(x) == 0 && !jag_is_nested(x) && jag__numel(sizes, n) == 1;
    jag_status st = scalar_to_ones ? jag_expand(x, sizes, n, &o) : jag_reshape(x, sizes, n, &o);
    return take(p, st, o);
}
static jag_tensor *expand_(pool *p, const jag_tensor *x, const int64_t *sizes, int n) {
    POOL_RUN(jag_expand(x, sizes, n, &o));
}
static jag_tensor *transpose_(pool *p, const jag_tensor *x, int d0, int d1) { POOL_RUN(jag_transpose(x, d0, d1, &o)); }
static jag_tensor *narrow_(pool *p, const jag_tensor *x, int d, int64_t start, int64_t len) {
    POOL_RUN(jag_narrow(x, d, start, len, &o));
}
static jag_tensor *select_(pool *p, const jag_tensor *x, int d, int64_t i) { POOL_RUN(jag_select(x, d, i, &o)); }
static jag_tensor *permute_(pool *p, const jag_tensor *x, const int *perm, int n) { POOL_RUN(jag_permute(x, perm, n, &o)); }
static jag_tensor *zeros_(pool *p, const int64_t *sizes, int n, jag_dtype dt) { POOL_RUN(jag_zeros(sizes, n, dt, &o)); }
static jag_tensor *scalar_(pool *p, double v, jag_dtype dt) { POOL_RUN(jag_full(NULL, 0, v, dt, &o)); }
static jag_tensor *contig_(pool *p, const jag_tensor *x) { POOL_RUN(jag_contiguous(x, &o)); }
static void copy_into_(pool *p, jag_tensor *dst, const jag_tensor *src) {
    if (!p->st) p->st = jag_copy_(dst, src);
}

/* Short names inside rules (`p` is the rule's pool). */
#define NEG(x) un(p, jag_neg, (x))
#define ABS(x) un(p, jag_abs, (x))
#define EXP(x) un(p, jag_exp, (x))
#define LOG(x) un(p, jag_log, (x))
#define SIN(x) un(p, jag_sin, (x))
#define COS(x) un(p, jag_cos, (x))
#define TANH(x) un(p, jag_tanh, (x))
#define SIGMOID(x) un(p, jag_sigmoid, (x))
#define SIGN(x) un(p, jag_sign, (x))
#define SQUARE(x) un(p, jag_square, (x))
#define RSQRT(x) un(p, jag_rsqrt, (x))
#define ZEROS_LIKE(x) un(p, jag_zeros_like, (x))
#define ADD(a, b) add_(p, (a), (b))
#define SUB(a, b) bin(p, jag_sub, (a), (b))
#define MUL(a, b) bin(p, jag_mul, (a), (b))
#define DIV(a, b) bin(p, jag_div, (a), (b))
#define POW(a, b) bin(p, jag_pow, (a), (b))
#define EQ(a, b) bin(p, jag_eq, (a), (b))
#define LT(a, b) bin(p, jag_lt, (a), (b))
#define GT(a, b) bin(p, jag_gt, (a), (b))
#define MM(a, b) bin(p, jag_mm, (a), (b))
#define BMM(a, b) bin(p, jag_bmm, (a), (b))
#define ADDS(a, s) sca(p, jag_add_scalar, (a), (s))
#define MULS(a, s) sca(p, jag_mul_scalar, (a), (s))
#define DIVS(a, s) sca(p, jag_div_scalar, (a), (s))
#define POWS(a, s) sca(p, jag_pow_scalar, (a), (s))
#define EQS(a, s) sca(p, jag_eq_scalar, (a), (s))
#define LTS(a, s) sca(p, jag_lt_scalar, (a), (s))
#define GTS(a, s) sca(p, jag_gt_scalar, (a), (s))
#define GES(a, s) sca(p, jag_ge_scalar, (a), (s))
#define LES(a, s) sca(p, jag_le_scalar, (a), (s))
#define RSUB(s, a) ADDS(NEG(a), (s)) /* s - a */
#define SUM(x, d, n, k) red(p, jag_sum, (x), (d), (n), (k))
#define MEAN(x, d, n, k) red(p, jag_mean, (x), (d), (n), (k))
#define PROD(x, d, n, k) red(p, jag_prod, (x), (d), (n), (k))
#define WHERE(c, a, b) where_(p, (c), (a), (b))
#define TO(x, dt) to_(p, (x), (dt))
#define RESHAPE(x, s, n) reshape_(p, (x), (s), (n))
#define EXPAND(x, s, n) expand_(p, (x), (s), (n))
#define TRANSPOSE(x, a, b) transpose_(p, (x), (a), (b))
#define NARROW(x, d, s, l) narrow_(p, (x), (d), (s), (l))
#define SELECT(x, d, i) select_(p, (x), (d), (i))
#define PERMUTE(x, perm, n) permute_(p, (x), (perm), (n))
#define ZEROS(s, n, dt) zeros_(p, (s), (n), (dt))
#define SCALAR(v, dt) scalar_(p, (v), (dt))
#define CONTIG(x) contig_(p, (x))
#define SUMTO(g, like) sum_to_p(p, (g), (like))

static jag_tensor *sum_to_p(pool *p, const jag_tensor *g, const jag_tensor *like);

/* ---- rule scaffolding ---------------------------------------------------- */

typedef jag_status (*rule_fn)(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi);

#define RULE(name) static jag_status r_##name(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi)
#define BEGIN                                                                  \
    pool pool_ = {0};                                                          \
    pool *p = &pool_;                                                          \
    for (int k_ = 0; k_ < c->n_inputs; k_++) gi[k_] = NULL
#define IN(k) jag__grad_input(c->args, c->nargs, (k))
#define NEED(k) ((k) >= 0 && (k) < c->n_inputs && c->needs[(k)])
#define SET(k, t) set_grad(p, c, gi, (k), (t))
#define END return finish(p, c, gi)

static const char *layout_word(jag_layout l) { return l == JAG_JAGGED ? "jagged" : "strided"; }

static bool same_table(const jag_tensor *a, const jag_tensor *b) {
    if (a == b) return true;
    if (!a || !b || jag_numel(a) != jag_numel(b) || !jag_data(a) || !jag_data(b)) return false;
    if (!jag_is_contiguous(a) || !jag_is_contiguous(b)) return false; /* tables are made contiguous */
    return memcmp(jag_data(a), jag_data(b), (size_t)jag_numel(a) * sizeof(int64_t)) == 0;
}

/* Components of a nested tensor as views (new references in a calloc'd
 * array of its batch size; free with free_comps). */
static jag_status comps_of(const jag_tensor *t, jag_tensor ***out) {
    nested_state *s = jag__nested(t);
    *out = calloc((size_t)(s->batch ? s->batch : 1), sizeof **out);
    if (!*out) return jag__error(JAG_ENOMEM, "autograd: out of memory");
    jag_status st = jag__nested_unbind(s, *out);
    if (st) {
        free(*out);
        *out = NULL;
    }
    return st;
}

static void free_comps(jag_tensor **v, int64_t n) {
    if (!v) return;
    for (int64_t i = 0; i < n; i++) jag_release(v[i]);
    free(v);
}

/* A nested gradient with exactly `in`'s structure: jagged values re-wrapped
 * around in's offsets (and lengths); strided gradients re-wrapped around
 * in's tables when the layouts agree, else copied component by component
 * into zeros shaped like `in`. */
static jag_tensor *conform_nested(pool *p, const char *name, const jag_tensor *in, jag_tensor *g) {
    if (p->st) return NULL;
    nested_state *is = jag__nested(in), *gs = jag__nested(g);
    if (!gs || gs->layout != is->layout)
        return fail(p, jag__error(JAG_EINTERNAL, "%s: the derivative gave a %s gradient for a %s nested input", name,
                                  gs ? layout_word(gs->layout) : "dense", layout_word(is->layout)));
    jag_tensor *o = NULL;
    if (is->layout == JAG_JAGGED) {
        if (gs->offsets == is->offsets && gs->lengths == is->lengths) return g;
        if (gs->values->sizes[0] != is->values->sizes[0])
            return fail(p, jag__error(JAG_EINTERNAL, "%s: the derivative gave a jagged gradient with %lld value rows for an input with %lld",
                                      name, (long long)gs->values->sizes[0], (long long)is->values->sizes[0]));
        jag_status st = jag__nested_rewrap_jagged(is, gs->values, &o);
        return take(p, st, o);
    }
    if (gs->sizes == is->sizes && gs->strides == is->strides && gs->storage_offsets == is->storage_offsets) return g;
    jag_status st;
    if (same_table(gs->sizes, is->sizes) && same_table(gs->strides, is->strides) &&
        same_table(gs->storage_offsets, is->storage_offsets) && jag_numel(gs->buffer) == jag_numel(is->buffer)) {
        st = jag__nested_wrap_strided(gs->buffer, is->sizes, is->strides, is->storage_offsets,
                                      atomic_load(&is->ragged_id), &o);
        return take(p, st, o);
    }
    jag_tensor *z = ZEROS_LIKE(in);
    if (!z) return NULL;
    jag_tensor **zc = NULL, **gc = NULL;
    st = comps_of(z, &zc);
    if (!st) st = comps_of(g, &gc);
    if (!st && gs->batch != is->batch)
        st = jag__error(JAG_EINTERNAL, "%s: the derivative gave a gradient with %lld components for an input with %lld", name,
                        (long long)gs->batch, (long long)is->batch);
    for (int64_t b = 0; !st && b < is->batch; b++) st = jag_copy_(zc[b], gc[b]);
    free_comps(zc, is->batch);
    free_comps(gc, gs->batch);
    return st ? fail(p, st) : z;
}

/* Store the gradient of input k: the input's dtype and, for nested inputs,
 * its structure. */
static void set_grad(pool *p, const jag_grad_ctx *c, jag_tensor **gi, int k, jag_tensor *g) {
    if (p->st || !NEED(k)) return;
    const jag_tensor *in = IN(k);
    if (!g || !in) {
        fail(p, jag__error(JAG_EINTERNAL, "%s: the derivative produced no gradient for input %d", c->name, k));
        return;
    }
    if (g->dtype != in->dtype) g = TO(g, in->dtype);
    if (g && jag_is_nested(in)) g = conform_nested(p, c->name, in, g);
    if (p->st) return;
    if (!jag_is_nested(in) && jag_is_nested(g)) {
        fail(p, jag__error(JAG_EINTERNAL, "%s: the derivative gave a nested gradient for dense input %d", c->name, k));
        return;
    }
    jag_release(gi[k]);
    gi[k] = jag_retain(g);
}

static jag_status finish(pool *p, const jag_grad_ctx *c, jag_tensor **gi) {
    pool_free(p);
    if (p->st)
        for (int k = 0; k < c->n_inputs; k++) jag_release(gi[k]), gi[k] = NULL;
    return p->st;
}

/* Normalise a dim against ndim (a 0-d tensor takes 0 and -1). */
static int wrap(int64_t d, int ndim) {
    int n = ndim ? ndim : 1;
    return (int)(d < 0 ? d + n : d);
}

/* The reduction dims of (x, dims: ints, ...): mask, their int list (for the
 * forward's own dims argument) and x's shape with them kept as 1. */
typedef struct {
    bool mask[JAG_MAX_DIMS];
    int dims[JAG_MAX_DIMS];
    int n_dims;           /* as given (0: every dim) */
    int64_t keep[JAG_MAX_DIMS];
    int64_t count;        /* elements reduced into each output */
} reduce_info;

static reduce_info reduce_dims(const jag_tensor *x, const jag_value *dims) {
    reduce_info r;
    int n = dims->u.ints.n;
    for (int d = 0; d < JAG_MAX_DIMS; d++) r.mask[d] = n == 0 && d < x->ndim;
    r.n_dims = n;
    for (int i = 0; i < n; i++) {
        r.dims[i] = (int)dims->u.ints.v[i];
        if (x->ndim) r.mask[wrap(dims->u.ints.v[i], x->ndim)] = true;
    }
    r.count = 1;
    for (int d = 0; d < x->ndim; d++) {
        r.keep[d] = r.mask[d] ? 1 : x->sizes[d];
        if (r.mask[d]) r.count *= x->sizes[d];
    }
    return r;
}

/* dst with src added at index along dim: the scatter_add op (so that traces
 * record it). NULL (the pool failed) on error. */
static jag_tensor *scatter_add(pool *p, const jag_tensor *dst, int dim, const jag_tensor *index, const jag_tensor *src) {
    if (p->st || !dst || !index || !src) return NULL;
    jag_value a[] = {jag__v_tensor(dst), jag__v_int(dim), jag__v_tensor(index), jag__v_tensor(src)};
    jag_tensor *o = NULL;
    jag_status st = jag__dispatch(JAG_OP_scatter_add, a, 4, &o); /* before reading o */
    return take(p, st, o);
}

/* ---- jag__sum_to --------------------------------------------------------- */

/* Sum dense g down to `sizes` (g's shape broadcast from it). */
static jag_tensor *sum_to_shape(pool *p, const jag_tensor *g, const int64_t *sizes, int n) {
    if (p->st) return NULL;
    int lead = g->ndim - n, dims[JAG_MAX_DIMS], nd = 0;
    bool bad = lead < 0;
    for (int d = 0; d < lead; d++) dims[nd++] = d;
    for (int i = 0; i < n && !bad; i++) {
        if (sizes[i] == g->sizes[lead + i]) continue;
        if (sizes[i] == 1) dims[nd++] = lead + i;
        else bad = true;
    }
    if (bad) {
        char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
        return fail(p, jag__error(JAG_ESHAPE, "jag__sum_to: a gradient of shape %s does not reduce to shape %s",
                                  jag__shape_str(g->sizes, g->ndim, a, sizeof a), jag__shape_str(sizes, n, b, sizeof b)));
    }
    if (nd == 0) return (jag_tensor *)g; /* same shape */
    return RESHAPE(SUM(g, dims, nd, true), sizes, n);
}

/* A dense tensor `like` broadcast against a jagged nested (B, j, D...): as
 * the nested handler does, (D...) and (1, D...) broadcast against the values
 * (sum L, D...), (1, 1, D...) drops its batch dim, and (B, 1, D...) is
 * gathered per value row — so its gradient is a segment sum over rows. */
static jag_tensor *sum_to_jagged_dense(pool *p, nested_state *s, int outer_ndim, const jag_tensor *like) {
    const jag_tensor *gv = s->values;
    int ln = like->ndim;
    if (ln < outer_ndim - 1 || (ln == outer_ndim - 1 && like->sizes[0] == 1)) return sum_to_shape(p, gv, like->sizes, ln);
    if (ln == outer_ndim && like->sizes[1] == 1 && (like->sizes[0] == 1 || like->sizes[0] == s->batch)) {
        int64_t inner[JAG_MAX_DIMS]; /* (B or 1, D'...): like without its ragged dim */
        inner[0] = like->sizes[0];
        for (int d = 2; d < ln; d++) inner[d - 1] = like->sizes[d];
        jag_tensor *r;
        if (like->sizes[0] == 1 || s->batch == 1) {
            r = sum_to_shape(p, gv, inner, ln - 1);
        } else {
            /* rows of values -> their component: seg[b] = sum of rows of b */
            int64_t seg[JAG_MAX_DIMS], ones[JAG_MAX_DIMS];
            seg[0] = s->batch, ones[0] = gv->sizes[0];
            for (int d = 1; d < gv->ndim; d++) seg[d] = gv->sizes[d], ones[d] = 1;
            const jag_tensor *ids = jag__nested_row_ids(s);
            if (!ids) return fail(p, jag_last_status());
            jag_tensor *idx = EXPAND(RESHAPE(ids, ones, gv->ndim), gv->sizes, gv->ndim);
            jag_tensor *acc = ZEROS(seg, gv->ndim, gv->dtype);
            acc = scatter_add(p, acc, 0, idx, gv);
            r = sum_to_shape(p, acc, inner, ln - 1);
        }
        return RESHAPE(r, like->sizes, ln);
    }
    char a[JAG_SHAPE_BUF];
    return fail(p, jag__error(JAG_ESHAPE, "jag__sum_to: a dense tensor of shape %s was not broadcast over a jagged tensor with %d dims",
                              jag__shape_str(like->sizes, ln, a, sizeof a), outer_ndim));
}

/* A dense tensor `like` broadcast against a strided nested tensor: the
 * per-component fallback gives component b row b (or row 0) of a `like`
 * with the nested tensor's ndim, and all of a smaller `like`. */
static jag_tensor *sum_to_strided_dense(pool *p, const jag_tensor *g, const jag_tensor *like) {
    nested_state *s = jag__nested(g);
    bool split = like->ndim == g->ndim;
    jag_tensor *acc = ZEROS(like->sizes, like->ndim, g->dtype);
    jag_tensor **gc = NULL;
    if (!acc) return NULL;
    jag_status st = comps_of(g, &gc);
    if (st) return fail(p, st);
    for (int64_t b = 0; b < s->batch && !p->st; b++) {
        pool q = {0};
        if (split) {
            jag_tensor *r = sum_to_shape(&q, gc[b], like->sizes + 1, like->ndim - 1);
            jag_tensor *row = select_(&q, acc, 0, like->sizes[0] == 1 ? 0 : b);
            jag_tensor *sum = r && row ? add_(&q, row, r) : NULL;
            if (sum) copy_into_(&q, row, sum);
        } else {
            jag_tensor *r = sum_to_shape(&q, gc[b], like->sizes, like->ndim);
            jag_tensor *sum = r ? add_(&q, acc, r) : NULL;
            if (sum) copy_into_(&q, acc, sum);
        }
        pool_free(&q);
        if (q.st) fail(p, q.st);
    }
    free_comps(gc, s->batch);
    return p->st ? NULL : acc;
}

static jag_tensor *sum_to_p(pool *p, const jag_tensor *g, const jag_tensor *like) {
    if (p->st) return NULL;
    nested_state *gs = jag__nested(g), *ls = jag__nested(like);
    if (!gs && !ls) return sum_to_shape(p, g, like->sizes, like->ndim);
    if (!gs) return fail(p, jag__error(JAG_EINTERNAL, "jag__sum_to: a dense gradient for a nested tensor"));
    if (!ls) {
        if (gs->layout == JAG_JAGGED && gs->ragged_idx != 1) { /* like lined up with the canonical form */
            jag_tensor *lc = NULL;
            jag_status st = jag__dense_to_canonical("jag__sum_to", 1, like, g->ndim, gs->ragged_idx, &lc);
            if (!take(p, st, lc)) return NULL;
            return RESHAPE(sum_to_jagged_dense(p, gs, g->ndim, lc), like->sizes, like->ndim);
        }
        if (gs->layout == JAG_JAGGED) return sum_to_jagged_dense(p, gs, g->ndim, like);
        return sum_to_strided_dense(p, g, like);
    }
    if (gs->layout != ls->layout)
        return fail(p, jag__error(JAG_EINTERNAL, "jag__sum_to: a %s gradient for a %s nested tensor", layout_word(gs->layout),
                                  layout_word(ls->layout)));
    if (gs->layout == JAG_JAGGED) { /* nested operands broadcast on their values */
        jag_tensor *r = sum_to_shape(p, gs->values, ls->values->sizes, ls->values->ndim), *o = NULL;
        if (!r) return NULL;
        if (r == gs->values && gs->offsets == ls->offsets && gs->lengths == ls->lengths) return (jag_tensor *)g;
        jag_status st = jag__nested_rewrap_jagged(ls, r, &o);
        return take(p, st, o);
    }
    /* strided: component by component into zeros shaped like `like` */
    jag_tensor *z = ZEROS_LIKE(like);
    jag_tensor **zc = NULL, **gc = NULL, **lc = NULL;
    if (!z) return NULL;
    jag_status st = comps_of(z, &zc);
    if (!st) st = comps_of(g, &gc);
    if (!st) st = comps_of(like, &lc);
    if (!st && gs->batch != ls->batch)
        st = jag__error(JAG_ESHAPE, "jag__sum_to: a gradient with %lld components for a tensor with %lld", (long long)gs->batch,
                        (long long)ls->batch);
    for (int64_t b = 0; !st && b < ls->batch; b++) {
        pool q = {0};
        jag_tensor *r = sum_to_shape(&q, gc[b], jag_sizes(lc[b]), jag_ndim(lc[b]));
        if (r) copy_into_(&q, zc[b], r);
        pool_free(&q);
        st = q.st;
    }
    free_comps(zc, ls->batch), free_comps(gc, gs->batch), free_comps(lc, ls->batch);
    return st ? fail(p, st) : z;
}

jag_status jag__sum_to(const jag_tensor *g, const jag_tensor *like, jag_tensor **out) {
    pool P = {0};
    jag_tensor *r = sum_to_p(&P, g, like);
    if (!P.st) *out = jag_retain(r);
    pool_free(&P);
    return P.st;
}

/* ---- unary pointwise ----------------------------------------------------- */
/* x, g and the output y share one shape (dense or nested). */

RULE(neg) { BEGIN; SET(0, NEG(go[0])); END; }
RULE(abs) { BEGIN; SET(0, MUL(go[0], SIGN(IN(0)))); END; }
RULE(exp) { BEGIN; SET(0, MUL(go[0], c->outputs[0])); END; }
RULE(log) { BEGIN; SET(0, DIV(go[0], IN(0))); END; }
/* d sqrt(x) = 1 / (2 y) */
RULE(sqrt) { BEGIN; SET(0, DIV(MULS(go[0], 0.5), c->outputs[0])); END; }
/* d x^-1/2 = -1/2 x^-3/2 = -y^3 / 2 */
RULE(rsqrt) {
    BEGIN;
    const jag_tensor *y = c->outputs[0];
    SET(0, MUL(go[0], MULS(MUL(y, SQUARE(y)), -0.5)));
    END;
}
RULE(sin) { BEGIN; SET(0, MUL(go[0], COS(IN(0)))); END; }
RULE(cos) { BEGIN; SET(0, NEG(MUL(go[0], SIN(IN(0))))); END; }
/* relu' = 1 where x > 0 (0 at 0 and for NaN, as torch's threshold) */
RULE(relu) {
    BEGIN;
    const jag_tensor *g = go[0];
    SET(0, WHERE(GTS(IN(0), 0.0), g, SCALAR(0.0, g->dtype)));
    END;
}
static void run_backward_op(pool *p, jag_op_id op, const jag_value *a, int n, jag_tensor **r);
/* An activation's gradient, its fused op (gelu_backward ...) on (g, x) in
 * the output's dtype, float32 for the half types (then rounded once to
 * theirs, as torch computes them: a composite of ops in float16 lost
 * gelu_tanh's gradient to 1 + tanh cancelling from x = -3.4 on). */
static jag_status act_grad(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, jag_op_id bw) {
    BEGIN;
    const jag_tensor *y = c->outputs[0];
    /* sigmoid's and tanh's gradients read their output */
    const jag_tensor *x = bw == JAG_OP_sigmoid_backward || bw == JAG_OP_tanh_backward ? y : IN(0);
    jag_dtype dt = jag_tensor_dtype(y), ct = dt == JAG_FLOAT64 ? JAG_FLOAT64 : JAG_FLOAT32;
    const jag_tensor *g = go[0]->dtype == ct ? go[0] : TO(go[0], ct);
    jag_value a[4] = {jag__v_tensor(g), jag__v_tensor(x->dtype == ct ? x : TO(x, ct))};
    int n = 2;
    if (bw == JAG_OP_softplus_backward) a[2] = c->args[1], a[3] = c->args[2], n = 4; /* beta, threshold */
    jag_tensor *r[1];
    run_backward_op(p, bw, a, n, r);
    SET(0, dt == ct ? r[0] : TO(r[0], dt));
    END;
}
/* silu = x s(x): s (1 + x (1 - s)) */
RULE(silu) { return act_grad(c, go, gi, JAG_OP_silu_backward); }
/* gelu = x Phi(x): Phi(x) + x phi(x) */
RULE(gelu) { return act_grad(c, go, gi, JAG_OP_gelu_backward); }
/* gelu_tanh = x/2 (1 + t), t = tanh(k (x + a x^3)):
 * 1/2 (1 + t) + x/2 (1 - t^2) k (1 + 3 a x^2) */
RULE(gelu_tanh) { return act_grad(c, go, gi, JAG_OP_gelu_tanh_backward); }
/* sigmoid: y (1 - y); tanh: 1 - y^2, from the output y (one pass where
 * three ops were, the same bits in float32 and float64) */
RULE(sigmoid) { return act_grad(c, go, gi, JAG_OP_sigmoid_backward); }
RULE(tanh) { return act_grad(c, go, gi, JAG_OP_tanh_backward); }
RULE(reciprocal) { BEGIN; SET(0, NEG(MUL(go[0], SQUARE(c->outputs[0])))); END; }
RULE(square) { BEGIN; SET(0, MUL(go[0], MULS(IN(0), 2.0))); END; }
RULE(sign) { BEGIN; SET(0, ZEROS_LIKE(IN(0))); END; }

/* ---- binary pointwise ---------------------------------------------------- */
/* (a, b: tensor or double): g has the broadcast shape; each gradient is
 * summed back to its input's shape. */

static bool b_is_tensor(const jag_grad_ctx *c) { return c->args[1].kind == JAG_VAL_TENSOR; }

RULE(add) {
    BEGIN;
    const jag_tensor *g = go[0];
    SET(0, SUMTO(g, IN(0)));
    if (b_is_tensor(c) && NEED(1)) {
        double alpha = c->args[2].u.d;
        SET(1, SUMTO(alpha == 1.0 ? g : MULS(g, alpha), IN(1)));
    }
    END;
}

RULE(sub) {
    BEGIN;
    SET(0, SUMTO(go[0], IN(0)));
    if (b_is_tensor(c) && NEED(1)) SET(1, SUMTO(NEG(go[0]), IN(1)));
    END;
}

RULE(mul) {
    BEGIN;
    const jag_tensor *g = go[0], *a = IN(0);
    if (!b_is_tensor(c)) {
        SET(0, MULS(g, c->args[1].u.d));
        END;
    }
    const jag_tensor *b = IN(1);
    if (NEED(0)) SET(0, SUMTO(MUL(g, b), a));
    if (NEED(1)) SET(1, SUMTO(MUL(g, a), b));
    END;
}

/* y = a / b: g / b and -g y / b */
RULE(div) {
    BEGIN;
    const jag_tensor *g = go[0], *a = IN(0);
    if (!b_is_tensor(c)) {
        SET(0, DIVS(g, c->args[1].u.d));
        END;
    }
    const jag_tensor *b = IN(1);
    if (NEED(0)) SET(0, SUMTO(DIV(g, b), a));
    if (NEED(1)) SET(1, SUMTO(NEG(DIV(MUL(g, c->outputs[0]), b)), b));
    END;
}

/* y = a^b: g b a^(b-1) (0 where b == 0) and g y log(a) (0 where a == 0 and
 * b >= 0), as torch. */
RULE(pow) {
    BEGIN;
    const jag_tensor *g = go[0], *a = IN(0);
    jag_tensor *zero = SCALAR(0.0, g->dtype);
    if (!b_is_tensor(c)) {
        double s = c->args[1].u.d;
        SET(0, s == 0.0 ? ZEROS_LIKE(a) : MUL(g, MULS(POWS(a, s - 1.0), s)));
        END;
    }
    const jag_tensor *b = IN(1);
    if (NEED(0)) SET(0, SUMTO(WHERE(EQS(b, 0.0), zero, MUL(MUL(g, b), POW(a, ADDS(b, -1.0)))), a));
    if (NEED(1)) {
        jag_tensor *mask = MUL(EQS(a, 0.0), GES(b, 0.0)); /* bool * bool: and */
        SET(1, SUMTO(WHERE(mask, zero, MUL(MUL(g, c->outputs[0]), LOG(a))), b));
    }
    END;
}

/* maximum / minimum: the winner gets g, a tie splits it in halves (torch). */
static jag_status minmax_rule(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, bool is_max) {
    BEGIN;
    const jag_tensor *g = go[0], *a = IN(0);
    bool tb = b_is_tensor(c);
    const jag_tensor *b = tb ? IN(1) : NULL;
    double s = tb ? 0.0 : c->args[1].u.d;
    jag_dtype dt = g->dtype;
    jag_tensor *half = MULS(TO(tb ? EQ(a, b) : EQS(a, s), dt), 0.5);
    if (NEED(0)) {
        jag_tensor *win = tb ? (is_max ? GT(a, b) : LT(a, b)) : (is_max ? GTS(a, s) : LTS(a, s));
        SET(0, SUMTO(MUL(g, ADD(TO(win, dt), half)), a));
    }
    if (tb && NEED(1)) {
        jag_tensor *win = is_max ? LT(a, b) : GT(a, b);
        SET(1, SUMTO(MUL(g, ADD(TO(win, dt), half)), b));
    }
    END;
}
RULE(maximum) { return minmax_rule(c, go, gi, true); }
RULE(minimum) { return minmax_rule(c, go, gi, false); }

/* (cond, a, b): g where cond to a, elsewhere to b; cond gets none. */
RULE(where) {
    BEGIN;
    const jag_tensor *g = go[0], *cond = IN(0);
    jag_tensor *zero = SCALAR(0.0, g->dtype);
    if (NEED(1)) SET(1, SUMTO(WHERE(cond, g, zero), IN(1)));
    if (NEED(2)) SET(2, SUMTO(WHERE(cond, zero, g), IN(2)));
    END;
}

/* (x, lo, hi): g where lo <= x <= hi, the bounds included (torch); 0 where
 * x was clamped, and at NaN */
RULE(clamp) {
    BEGIN;
    const jag_tensor *g = go[0], *x = IN(0);
    jag_tensor *inside = MUL(GES(x, c->args[1].u.d), LES(x, c->args[2].u.d)); /* bool * bool: and */
    SET(0, WHERE(inside, g, SCALAR(0.0, g->dtype)));
    END;
}

/* ---- more unary ops ------------------------------------------------------ */

/* floor, ceil, round, trunc: zero almost everywhere, zero everywhere as torch */
RULE(rounding) { BEGIN; SET(0, ZEROS_LIKE(IN(0))); END; }
/* d log(1 + x) = 1 / (1 + x) */
RULE(log1p) { BEGIN; SET(0, DIV(go[0], ADDS(IN(0), 1.0))); END; }
/* d atan(x) = 1 / (1 + x^2) */
RULE(atan) { BEGIN; SET(0, DIV(go[0], ADDS(SQUARE(IN(0)), 1.0))); END; }
/* d sinh(x) = cosh(x), d cosh(x) = sinh(x) */
RULE(sinh) { BEGIN; SET(0, MUL(go[0], un(p, jag_cosh, IN(0)))); END; }
RULE(cosh) { BEGIN; SET(0, MUL(go[0], un(p, jag_sinh, IN(0)))); END; }
/* d asinh(x) = 1 / sqrt(x^2 + 1) */
RULE(asinh) { BEGIN; SET(0, MUL(go[0], RSQRT(ADDS(SQUARE(IN(0)), 1.0)))); END; }
/* d (e^x - 1) = e^x = y + 1 */
RULE(expm1) { BEGIN; SET(0, MUL(go[0], ADDS(c->outputs[0], 1.0))); END; }
/* d erf(x) = 2 / sqrt(pi) e^(-x^2); erfc's is its negative */
#define JAG_2_SQRTPI 1.12837916709551257390
RULE(erf) { BEGIN; SET(0, MUL(go[0], MULS(EXP(NEG(SQUARE(IN(0)))), JAG_2_SQRTPI))); END; }
RULE(erfc) { BEGIN; SET(0, MUL(go[0], MULS(EXP(NEG(SQUARE(IN(0)))), -JAG_2_SQRTPI))); END; }
/* selu: x > 0 ? scale : scale alpha e^x (torch's elu_backward) */
RULE(selu) {
    BEGIN;
    const jag_tensor *g = go[0], *x = IN(0);
    const double scale = 1.0507009873554804934193349852946, alpha = 1.6732632423543772848170429916717;
    SET(0, WHERE(GTS(x, 0.0), MULS(g, scale), MUL(g, MULS(EXP(x), scale * alpha))));
    END;
}
/* elu: x > 0 ? 1 : alpha e^x (alpha at 0, as torch) */
RULE(elu) {
    BEGIN;
    const jag_tensor *g = go[0], *x = IN(0);
    SET(0, WHERE(GTS(x, 0.0), g, MUL(g, MULS(EXP(x), c->args[1].u.d))));
    END;
}
/* leaky_relu: x > 0 ? 1 : negative_slope */
RULE(leaky_relu) {
    BEGIN;
    const jag_tensor *g = go[0];
    SET(0, WHERE(GTS(IN(0), 0.0), g, MULS(g, c->args[1].u.d)));
    END;
}
/* hardtanh: 1 where min_val < x < max_val, the bounds excluded (torch) */
RULE(hardtanh) {
    BEGIN;
    const jag_tensor *g = go[0], *x = IN(0);
    jag_tensor *inside = MUL(GTS(x, c->args[1].u.d), LTS(x, c->args[2].u.d)); /* bool * bool: and */
    SET(0, WHERE(inside, g, SCALAR(0.0, g->dtype)));
    END;
}
/* hardswish: x <= -3 ? 0 : x < 3 ? x / 3 + 1/2 : 1 (torch 2.15; a NaN x
 * passes g, as torch's scalar loop does) */
RULE(hardswish) { return act_grad(c, go, gi, JAG_OP_hardswish_backward); }
/* hardsigmoid: 1/6 where -3 < x < 3, else 0 (torch) */
RULE(hardsigmoid) { return act_grad(c, go, gi, JAG_OP_hardsigmoid_backward); }
/* softplus: beta x > threshold ? 1 : sigmoid(beta x) */
RULE(softplus) { return act_grad(c, go, gi, JAG_OP_softplus_backward); }
static jag_tensor *softplus_(pool *p, const jag_tensor *x) { POOL_RUN(jag_softplus(x, 1.0, 20.0, &o)); }
/* mish = x t, t = tanh(softplus(x)): t + x sigmoid(x) (1 - t^2) */
RULE(mish) {
    BEGIN;
    const jag_tensor *x = IN(0);
    jag_tensor *t = TANH(softplus_(p, x));
    SET(0, MUL(go[0], ADD(t, MUL(MUL(x, SIGMOID(x)), RSUB(1.0, SQUARE(t))))));
    END;
}
/* d log(sigmoid(x)) = sigmoid(-x) */
RULE(logsigmoid) { return act_grad(c, go, gi, JAG_OP_logsigmoid_backward); }

RULE(clone) { BEGIN; SET(0, go[0]); END; }
/* the gradient goes back to the input's dtype (set_grad converts) */
RULE(to_dtype) { BEGIN; SET(0, go[0]); END; }

/* ---- views --------------------------------------------------------------- */

/* view, unsqueeze, squeeze: g back to x's shape */
RULE(view) { BEGIN; SET(0, RESHAPE(go[0], jag_sizes(IN(0)), jag_ndim(IN(0)))); END; }

RULE(transpose) { BEGIN; SET(0, TRANSPOSE(go[0], (int)c->args[1].u.i, (int)c->args[2].u.i)); END; }

/* the inverse permutation */
RULE(permute) {
    BEGIN;
    int n = c->args[1].u.ints.n, inv[JAG_MAX_DIMS];
    for (int i = 0; i < n; i++) inv[wrap(c->args[1].u.ints.v[i], n)] = i;
    SET(0, PERMUTE(go[0], inv, n));
    END;
}

/* x is (..., S, ...), g (..., length, ...): zeros with g in the slice */
/* g between zeros along dim d: [zeros (start), g, zeros (rest)] joined by
 * cat, so that the gradient is made by ops a trace records (no write into a
 * view). The zeros are shaped like slices of x (zeros_like of its narrow),
 * so that a compiled backward takes their sizes from x at run time. x has
 * `size` along d; g covers [start, start + g.size(d)). */
static jag_tensor *pad_along(pool *p, const jag_tensor *x, const jag_tensor *g, int d, int64_t start) {
    if (p->st || !g) return NULL;
    int64_t size = x->sizes[d], len = g->sizes[d], rest = size - start - len;
    if (start == 0 && rest == 0) return (jag_tensor *)g;
    jag_tensor *parts[3];
    int n = 0;
    if (start > 0) parts[n++] = ZEROS_LIKE(NARROW(x, d, 0, start));
    parts[n++] = (jag_tensor *)g;
    if (rest > 0) parts[n++] = ZEROS_LIKE(NARROW(x, d, start + len, rest));
    for (int i = 0; i < n; i++)
        if (!parts[i]) return NULL;
    jag_tensor *o = NULL;
    jag_status st = jag_cat(parts, n, d, &o);
    return take(p, st, o);
}

RULE(narrow) {
    BEGIN;
    const jag_tensor *x = IN(0);
    int d = wrap(c->args[1].u.i, x->ndim);
    int64_t start = c->args[2].u.i < 0 ? c->args[2].u.i + x->sizes[d] : c->args[2].u.i;
    SET(0, pad_along(p, x, go[0], d, start));
    END;
}

RULE(select) {
    BEGIN;
    const jag_tensor *x = IN(0);
    int d = wrap(c->args[1].u.i, x->ndim);
    int64_t i = c->args[2].u.i < 0 ? c->args[2].u.i + x->sizes[d] : c->args[2].u.i, sz[JAG_MAX_DIMS];
    memcpy(sz, x->sizes, (size_t)x->ndim * sizeof *sz);
    sz[d] = 1;
    SET(0, pad_along(p, x, RESHAPE(go[0], sz, x->ndim), d, i));
    END;
}

RULE(expand) { BEGIN; SET(0, SUMTO(go[0], IN(0))); END; }

/* ---- reductions ---------------------------------------------------------- */
/* (x, dims, keepdim): g is x's shape with the dims removed (or 1); gk is g
 * viewed with them kept, which broadcasts against x. */

static jag_tensor *keepdim_view(pool *p, const jag_tensor *t, const jag_tensor *x, const reduce_info *r) {
    return reshape_(p, t, r->keep, x->ndim);
}

RULE(sum) {
    BEGIN;
    const jag_tensor *x = IN(0);
    reduce_info r = reduce_dims(x, &c->args[1]);
    SET(0, CONTIG(EXPAND(keepdim_view(p, go[0], x, &r), x->sizes, x->ndim)));
    END;
}

/* mean_backward (g kept-dims view, x's sizes): expand(g) / N with N read
 * from the sizes when it runs, so that a traced program serves every
 * batch size (a double 1 / N would be a constant of the trace) */
RULE(mean) {
    BEGIN;
    const jag_tensor *x = IN(0);
    reduce_info r = reduce_dims(x, &c->args[1]);
    jag_tensor *gk = keepdim_view(p, go[0], x, &r), *gx = NULL;
    if (!p->st) {
        jag_value a[] = {jag__v_tensor(gk), jag__v_ints(x->sizes, x->ndim)};
        jag_status st = jag__dispatch(JAG_OP_mean_backward, a, 2, &gx);
        gx = take(p, st, gx);
    }
    SET(0, gx);
    END;
}

/* d prod / d x_i = prod of the others, exact with zeros: with no zero in a
 * slice it is y / x_i; with one zero, only the zero gets the product of the
 * rest; with more, nothing. */
RULE(prod) {
    BEGIN;
    const jag_tensor *x = IN(0);
    reduce_info r = reduce_dims(x, &c->args[1]);
    jag_tensor *gk = keepdim_view(p, go[0], x, &r);
    jag_tensor *zero = SCALAR(0.0, x->dtype), *one = SCALAR(1.0, x->dtype);
    jag_tensor *isz = EQS(x, 0.0);
    jag_tensor *x1 = WHERE(isz, one, x);
    jag_tensor *gp = MUL(gk, PROD(x1, r.dims, r.n_dims, true)); /* g * product of the non-zeros */
    jag_tensor *nz = SUM(isz, r.dims, r.n_dims, true);           /* zeros per slice (int64) */
    jag_tensor *one_zero = WHERE(MUL(EQS(nz, 1.0), isz), gp, zero);
    SET(0, WHERE(EQS(nz, 0.0), DIV(gp, x1), one_zero));
    END;
}

/* amax, amin, max, min: the gradient is split evenly among the elements
 * equal to the result (torch's rule for ties). */
RULE(amax) {
    BEGIN;
    const jag_tensor *x = IN(0);
    reduce_info r = reduce_dims(x, &c->args[1]);
    jag_tensor *gk = keepdim_view(p, go[0], x, &r), *yk = keepdim_view(p, c->outputs[0], x, &r);
    jag_tensor *hit = EQ(x, yk);
    jag_tensor *count = TO(SUM(hit, r.dims, r.n_dims, true), x->dtype);
    SET(0, WHERE(hit, DIV(gk, count), SCALAR(0.0, x->dtype)));
    END;
}

/* var: g 2 (x - mean) / max(N - correction, 0); std: var's with g / (2 y),
 * 0 where y == 0. */
static jag_status var_rule(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, bool is_std) {
    BEGIN;
    const jag_tensor *x = IN(0);
    reduce_info r = reduce_dims(x, &c->args[1]);
    int64_t corr = c->args[2].u.i;
    double denom = (double)r.count - (double)corr;
    if (denom < 0) denom = 0;
    jag_tensor *gk = keepdim_view(p, go[0], x, &r);
    jag_tensor *xc = SUB(x, MEAN(x, r.dims, r.n_dims, true));
    if (is_std) {
        jag_tensor *yk = keepdim_view(p, c->outputs[0], x, &r);
        jag_tensor *t = WHERE(EQS(yk, 0.0), SCALAR(0.0, x->dtype), DIV(gk, yk));
        SET(0, MULS(MUL(t, xc), 1.0 / denom));
    } else {
        SET(0, MULS(MUL(gk, xc), 2.0 / denom));
    }
    END;
}
RULE(var) { return var_rule(c, go, gi, false); }

/* logsumexp: g exp(x - y), y kept as 1 along the reduced dims (0 where y is
 * -inf: nothing took part) */
RULE(logsumexp) {
    BEGIN;
    const jag_tensor *x = IN(0);
    reduce_info r = reduce_dims(x, &c->args[1]);
    jag_tensor *gk = keepdim_view(p, go[0], x, &r), *yk = keepdim_view(p, c->outputs[0], x, &r);
    jag_tensor *e = EXP(SUB(x, yk));
    SET(0, WHERE(EQS(yk, -INFINITY), SCALAR(0.0, x->dtype), MUL(gk, e)));
    END;
}
RULE(std) { return var_rule(c, go, gi, true); }

/* max_dim / min_dim (x, dim, keepdim) -> values, indices: g goes to the
 * index that won (the first one, as the forward picks). */
RULE(max_dim) {
    BEGIN;
    const jag_tensor *x = IN(0);
    if (x->ndim == 0) {
        SET(0, RESHAPE(go[0], NULL, 0));
        END;
    }
    int d = wrap(c->args[1].u.i, x->ndim);
    int64_t keep[JAG_MAX_DIMS];
    memcpy(keep, x->sizes, sizeof keep);
    keep[d] = 1;
    jag_tensor *gk = RESHAPE(go[0], keep, x->ndim), *ik = RESHAPE(c->outputs[1], keep, x->ndim);
    jag_tensor *z = ZEROS(x->sizes, x->ndim, x->dtype);
    SET(0, scatter_add(p, z, d, ik, gk));
    END;
}

/* ---- linear algebra ------------------------------------------------------ */

/* a (n, k) @ b (k, m) = y (n, m): g b^T and a^T g */
RULE(mm) {
    BEGIN;
    const jag_tensor *a = IN(0), *b = IN(1), *g = go[0];
    if (NEED(0)) SET(0, MM(g, TRANSPOSE(b, 0, 1)));
    if (NEED(1)) SET(1, MM(TRANSPOSE(a, 0, 1), g));
    END;
}

/* a (B, n, k) @ b (B, k, m) */
RULE(bmm) {
    BEGIN;
    const jag_tensor *a = IN(0), *b = IN(1), *g = go[0];
    if (NEED(0)) SET(0, BMM(g, TRANSPOSE(b, 1, 2)));
    if (NEED(1)) SET(1, BMM(TRANSPOSE(a, 1, 2), g));
    END;
}

/* torch.matmul: 1-d operands become matrices (a: (1, k), b: (k, 1)) and g
 * gets those dims back; then ga = g @ b^T and gb = a^T @ g, each summed back
 * over broadcast batch dims. */
RULE(matmul) {
    BEGIN;
    const jag_tensor *a = IN(0), *b = IN(1), *g = go[0];
    int na = jag_ndim(a), nb = jag_ndim(b);
    const jag_tensor *a2 = a, *b2 = b, *g2 = g;
    int64_t s[JAG_MAX_DIMS];
    if (na == 1) {
        s[0] = 1, s[1] = jag_size(a, 0);
        a2 = RESHAPE(a, s, 2);
    }
    if (nb == 1) {
        s[0] = jag_size(b, 0), s[1] = 1;
        b2 = RESHAPE(b, s, 2);
    }
    if (!p->st && (na == 1 || nb == 1)) { /* g with the dims 1-d operands dropped */
        int ng = 0;
        for (int d = 0; d < jag_ndim(g); d++) s[ng++] = jag_size(g, d);
        if (na == 1) { /* insert the n = 1 dim before the last (or as the last for a 0-d g) */
            int at = nb == 1 ? ng : ng - 1;
            for (int d = ng; d > at; d--) s[d] = s[d - 1];
            s[at] = 1, ng++;
        }
        if (nb == 1) s[ng++] = 1;
        g2 = RESHAPE(g, s, ng);
    }
    if (NEED(0)) {
        jag_tensor *ga = SUMTO(bin(p, jag_matmul, g2, TRANSPOSE(b2, -1, -2)), a2);
        SET(0, na == 1 ? RESHAPE(ga, jag_sizes(a), 1) : ga);
    }
    if (NEED(1)) {
        jag_tensor *gb = SUMTO(bin(p, jag_matmul, TRANSPOSE(a2, -1, -2), g2), b2);
        SET(1, nb == 1 ? RESHAPE(gb, jag_sizes(b), 1) : gb);
    }
    END;
}

/* x (..., in) @ w (out, in)^T + bias (out) = y (..., out). With X, G the
 * rows of x and g (N = the product of the leading dims): gx = G w,
 * gw = G^T X, gbias = the column sums of G. */
RULE(linear) {
    BEGIN;
    const jag_tensor *x = IN(0), *w = IN(1), *g = go[0];
    int64_t in = w->sizes[1], out = w->sizes[0], n = 1;
    for (int d = 0; d < x->ndim - 1; d++) n *= x->sizes[d];
    int64_t gs[2] = {n, out}, xs[2] = {n, in};
    jag_tensor *G = RESHAPE(g, gs, 2);
    if (NEED(0)) SET(0, RESHAPE(MM(G, w), x->sizes, x->ndim));
    if (NEED(1)) SET(1, MM(TRANSPOSE(G, 0, 1), RESHAPE(x, xs, 2)));
    if (NEED(2)) SET(2, SUMTO(G, IN(2)));
    END;
}

/* ---- normalisation ------------------------------------------------------- */

/* The rules below call the fused backward ops (softmax.c, norm.c), one op
 * each. These ops have no derivative of their own: rules run with grad mode
 * off (jag has no second derivatives). */

/* Run a backward op; its outputs go into the pool (r[k], NULL on failure). */
static void run_backward_op(pool *p, jag_op_id op, const jag_value *a, int n, jag_tensor **r) {
    int n_out = jag__ops[op].n_out;
    for (int k = 0; k < n_out; k++) r[k] = NULL;
    if (p->st) return;
    jag_tensor *o[4] = {0};
    jag_status st = jag__dispatch(op, a, n, o);
    for (int k = 0; k < n_out; k++) r[k] = take(p, st, o[k]);
}

/* The output gradient in the dtype of `like` (the op's output). */
static const jag_tensor *grad_as(pool *p, const jag_tensor *g, const jag_tensor *like) {
    return g && like && g->dtype != like->dtype ? TO(g, like->dtype) : g;
}

/* softmax / log_softmax: softmax_backward / log_softmax_backward (g, y, dim):
 * y (g - sum(g y)) and g - exp(y) sum(g) along dim */
static jag_status softmax_grad(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, jag_op_id bw) {
    BEGIN;
    const jag_tensor *y = c->outputs[0];
    jag_value a[] = {jag__v_tensor(grad_as(p, go[0], y)), jag__v_tensor(y), c->args[1]};
    jag_tensor *r[1];
    run_backward_op(p, bw, a, 3, r);
    SET(0, r[0]);
    END;
}

RULE(softmax) { return softmax_grad(c, go, gi, JAG_OP_softmax_backward); }
RULE(log_softmax) { return softmax_grad(c, go, gi, JAG_OP_log_softmax_backward); }

/* The tensor input number of argument `pos` (-1 when it is absent). */
static int input_of_arg(const jag_grad_ctx *c, int pos) {
    if (c->args[pos].kind != JAG_VAL_TENSOR) return -1;
    int k = 0;
    for (int i = 0; i < pos; i++)
        k += c->args[i].kind == JAG_VAL_TENSOR ? 1 : c->args[i].kind == JAG_VAL_TENSORS ? c->args[i].u.tensors.n : 0;
    return k;
}

/* layer_norm (x, nd, w, b, eps) and native_layer_norm (the same, and the
 * outputs mean, rstd): layer_norm_backward (g, x, mean, rstd, w, nd, eps)
 * -> gx, gw = sum g xhat, gb = sum g over the leading dims. layer_norm
 * keeps only y, so the op computes the statistics again from x (each row
 * is then read from cache a second time); native_layer_norm's saved ones
 * are reused (its mean and rstd take no gradient). */
static jag_status layer_norm_grad(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, bool saved) {
    BEGIN;
    const jag_tensor *x = IN(0);
    int kw = input_of_arg(c, 2), kb = input_of_arg(c, 3);
    jag_value none = jag__v_tensor(NULL);
    jag_value a[] = {jag__v_tensor(grad_as(p, go[0], x)), jag__v_tensor(x),
                     saved ? jag__v_tensor(c->outputs[1]) : none, saved ? jag__v_tensor(c->outputs[2]) : none,
                     c->args[2], c->args[1], c->args[4]};
    jag_tensor *r[3];
    run_backward_op(p, JAG_OP_layer_norm_backward, a, 7, r);
    SET(0, r[0]);
    if (kw >= 0) SET(kw, r[1]);
    if (kb >= 0) SET(kb, r[2]);
    END;
}

/* rms_norm (x, nd, w, eps) and native_rms_norm (and the output rstd):
 * rms_norm_backward (g, x, rstd, w, nd, eps) -> gx, gw = sum g x rstd. */
static jag_status rms_norm_grad(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, bool saved) {
    BEGIN;
    const jag_tensor *x = IN(0);
    int kw = input_of_arg(c, 2);
    jag_value a[] = {jag__v_tensor(grad_as(p, go[0], x)), jag__v_tensor(x),
                     saved ? jag__v_tensor(c->outputs[1]) : jag__v_tensor(NULL), c->args[2], c->args[1], c->args[3]};
    jag_tensor *r[2];
    run_backward_op(p, JAG_OP_rms_norm_backward, a, 6, r);
    SET(0, r[0]);
    if (kw >= 0) SET(kw, r[1]);
    END;
}

RULE(layer_norm) { return layer_norm_grad(c, go, gi, false); }
RULE(native_layer_norm) { return layer_norm_grad(c, go, gi, true); }
RULE(rms_norm) { return rms_norm_grad(c, go, gi, false); }
RULE(native_rms_norm) { return rms_norm_grad(c, go, gi, true); }

/* ---- indexing and joining ------------------------------------------------ */

/* x (..., S, ...), index (L) -> g (..., L, ...): g rows added back at their
 * index (duplicates accumulate) */
RULE(index_select) {
    BEGIN;
    const jag_tensor *x = IN(0), *index = IN(1), *g = go[0];
    if (x->ndim == 0) {
        SET(0, RESHAPE(g, NULL, 0));
        END;
    }
    int d = wrap(c->args[1].u.i, x->ndim);
    int64_t shape[JAG_MAX_DIMS];
    for (int e = 0; e < x->ndim; e++) shape[e] = e == d ? jag_numel(index) : 1;
    jag_tensor *idx = EXPAND(RESHAPE(index, shape, x->ndim), g->sizes, g->ndim);
    jag_tensor *z = ZEROS(x->sizes, x->ndim, x->dtype);
    SET(0, scatter_add(p, z, d, idx, g));
    END;
}

/* x (s...), index (i...) -> g (i...): scatter-add g into zeros at index */
RULE(gather) {
    BEGIN;
    const jag_tensor *x = IN(0), *index = IN(1), *g = go[0];
    if (x->ndim == 0) {
        SET(0, RESHAPE(g, NULL, 0));
        END;
    }
    jag_tensor *z = ZEROS(x->sizes, x->ndim, x->dtype);
    SET(0, scatter_add(p, z, wrap(c->args[1].u.i, x->ndim), index, g));
    END;
}

/* weight (V, D), indices (I...) -> g (I..., D): rows of g added into the
 * rows of weight they were read from */
RULE(embedding) {
    BEGIN;
    const jag_tensor *w = IN(0), *ix = IN(1), *g = go[0];
    int64_t n = jag_numel(ix), D = w->sizes[1];
    int64_t gs[2] = {n, D}, is[2] = {n, 1};
    jag_tensor *idx = EXPAND(RESHAPE(ix, is, 2), gs, 2);
    jag_tensor *z = ZEROS(w->sizes, 2, w->dtype);
    SET(0, scatter_add(p, z, 0, idx, RESHAPE(g, gs, 2)));
    END;
}

/* (xs, dim): each input's slice of g; skipped empty 1-d inputs get zeros */
RULE(cat) {
    BEGIN;
    const jag_value *l = &c->args[0];
    int n = l->u.tensors.n, ref = -1;
    for (int i = 0; i < n && ref < 0; i++)
        if (!(l->u.tensors.v[i]->ndim == 1 && l->u.tensors.v[i]->sizes[0] == 0)) ref = i;
    int d = ref >= 0 ? wrap(c->args[1].u.i, l->u.tensors.v[ref]->ndim) : 0;
    int64_t off = 0;
    for (int i = 0; i < n && !p->st; i++) {
        const jag_tensor *x = l->u.tensors.v[i];
        bool skipped = ref >= 0 && x->ndim == 1 && x->sizes[0] == 0;
        int64_t len = skipped || ref < 0 ? 0 : x->sizes[d];
        if (NEED(i)) SET(i, skipped || ref < 0 ? ZEROS(x->sizes, x->ndim, x->dtype) : NARROW(go[0], d, off, len));
        off += len;
    }
    END;
}

/* ---- nested inputs for non-pointwise rules ------------------------------- */

#define MAX_ARGS 16

/* c's arguments with dims shifted for components/values; `jagged` also
 * refuses the ragged dim (1). The forward ran with the same shift, so these
 * checks only fail on a graph the forward could not have made. */
static jag_status shift_dims(const jag_grad_ctx *c, int outer_ndim, bool jagged, jag_value *a, int64_t *lists) {
    unsigned bits;
    int list;
    jag__op_dim_args(c->op, &bits, &list);
    for (int i = 0; i < c->nargs; i++) {
        int n = i == list ? c->args[i].u.ints.n : (bits >> i & 1) ? 1 : 0;
        if (i == list && n == 0)
            return jag__error(JAG_ENOTIMPL, "%s: no derivative for a nested reduction over every dim", c->name);
        for (int k = 0; k < n; k++) {
            int64_t d = i == list ? c->args[i].u.ints.v[k] : c->args[i].u.i;
            if (d < 0) d += outer_ndim;
            if (d <= (jagged ? 1 : 0) || d >= outer_ndim)
                return jag__error(JAG_ENOTIMPL, "%s: no derivative over dim %lld of a %s nested tensor", c->name,
                                  (long long)d, jagged ? "jagged" : "strided");
            if (i == list) lists[k] = d - 1;
            else a[i] = jag__v_int(d - 1);
        }
        if (i == list) a[i] = jag__v_ints(lists, n);
    }
    return JAG_OK;
}

/* The first nested argument (tensor lists included). */
static const jag_tensor *first_nested(const jag_grad_ctx *c, int *arg) {
    for (int i = 0; i < c->nargs; i++) {
        if (c->args[i].kind == JAG_VAL_TENSOR && jag_is_nested(c->args[i].u.t)) {
            if (arg) *arg = i;
            return c->args[i].u.t;
        }
        if (c->args[i].kind == JAG_VAL_TENSORS)
            for (int j = 0; j < c->args[i].u.tensors.n; j++)
                if (jag_is_nested(c->args[i].u.tensors.v[j])) {
                    if (arg) *arg = i;
                    return c->args[i].u.tensors.v[j];
                }
    }
    return NULL;
}

static jag_status on_values(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, rule_fn rule);

/* transpose that moved the ragged dim: the gradient is the output's
 * gradient transposed back (the nested handler moves it again). */
static jag_status transpose_back(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi) {
    if (!c->needs[0]) return JAG_OK;
    jag_value a[] = {jag__v_tensor(go[0]), c->args[1], c->args[2]};
    return jag__dispatch(JAG_OP_transpose, a, 3, &gi[0]);
}

/* on_values through jag__grad_on_canonical */
static jag_status on_values_fn(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, void *rule) {
    return on_values(c, go, gi, *(rule_fn *)rule);
}

/* Jagged: the forward ran as one op on the packed values (transpose,
 * narrow, sum, mean over non-ragged dims; mm / linear with a nested first
 * argument), so the dense rule runs on the values and each nested input's
 * gradient is re-wrapped around its offsets. */
static jag_status on_values(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, rule_fn rule) {
    if (c->op == JAG_OP_transpose && c->args[0].kind == JAG_VAL_TENSOR && jag__nested(c->args[0].u.t) &&
        (jag__grad_ctx_moved(c) || jag__is_ragged_dim(&c->args[1], c->args[0].u.t->ndim) ||
         jag__is_ragged_dim(&c->args[2], c->args[0].u.t->ndim)))
        return transpose_back(c, go, gi); /* the ragged dim moved */
    if (jag__grad_ctx_moved(c)) return jag__grad_on_canonical(c, go, gi, on_values_fn, &rule);
    bool handled = false;
    jag_status hs = jag__d_jagged_ragged(c, go, gi, &handled); /* along the ragged dim */
    if (handled) return hs;
    switch (c->op) {
    case JAG_OP_transpose: case JAG_OP_narrow: case JAG_OP_sum: case JAG_OP_mean: case JAG_OP_mm: case JAG_OP_linear: case JAG_OP_matmul:
    case JAG_OP_amax: case JAG_OP_amin: case JAG_OP_softmax: case JAG_OP_log_softmax: case JAG_OP_layer_norm: case JAG_OP_rms_norm:
    case JAG_OP_var: case JAG_OP_std: case JAG_OP_logsumexp: case JAG_OP_max_dim: case JAG_OP_min_dim:
    case JAG_OP_index_select: case JAG_OP_view:
        break;
    default:
        return jag__error(JAG_ENOTIMPL, "%s: no derivative for jagged nested inputs (the forward does not run on them)", c->name);
    }
    int arg0 = -1;
    const jag_tensor *lead = first_nested(c, &arg0);
    if (arg0 != 0 || c->args[0].kind != JAG_VAL_TENSOR)
        return jag__error(JAG_ENOTIMPL, "%s: no derivative when a nested tensor is not the first argument", c->name);
    if (c->nargs > MAX_ARGS || c->n_out > 4) return jag__error(JAG_ENOTIMPL, "%s: too many arguments", c->name);
    jag_value a[MAX_ARGS];
    int64_t lists[JAG_MAX_DIMS];
    for (int i = 0; i < c->nargs; i++) {
        a[i] = c->args[i];
        if (i > 0 && a[i].kind == JAG_VAL_TENSOR && jag_is_nested(a[i].u.t))
            return jag__error(JAG_ENOTIMPL, "%s: no derivative for a nested argument %d with the jagged layout", c->name, i);
    }
    a[0] = jag__v_tensor(jag__nested(lead)->values);
    jag_status st = shift_dims(c, jag_ndim(lead), true, a, lists);
    if (st) return st;
    jag_tensor *outs[4], *gos[4];
    for (int k = 0; k < c->n_out; k++) {
        nested_state *so = jag__nested(c->outputs[k]), *sg = jag__nested(go[k]);
        if (!so || !sg || so->layout != JAG_JAGGED || sg->layout != JAG_JAGGED)
            return jag__error(JAG_EINTERNAL, "%s: a jagged op's output or its gradient is not jagged", c->name);
        outs[k] = so->values, gos[k] = sg->values;
    }
    jag_grad_ctx vc = *c;
    vc.args = a, vc.outputs = outs;
    jag_tensor *vg[JAG_GRAD_MAX_INPUTS] = {0};
    if ((st = rule(&vc, gos, vg))) return st;
    for (int k = 0; k < c->n_inputs; k++) gi[k] = NULL;
    for (int k = 0; k < c->n_inputs && !st; k++) {
        if (!vg[k]) continue;
        nested_state *s = jag__nested(IN(k));
        if (s) st = jag__nested_rewrap_jagged(s, vg[k], &gi[k]);
        else gi[k] = jag_retain(vg[k]);
    }
    for (int k = 0; k < c->n_inputs; k++) jag_release(vg[k]);
    if (st)
        for (int k = 0; k < c->n_inputs; k++) jag_release(gi[k]), gi[k] = NULL;
    return st;
}

/* Strided: the forward unbound the nested arguments and ran the op on each
 * component (bmm as mm), so the dense rule runs per component. A nested
 * input's gradient is its components' gradients copied into zeros shaped
 * like it; a dense input's is their sum. */
static jag_status per_component(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, rule_fn rule) {
    const jag_tensor *lead = first_nested(c, NULL);
    nested_state *ls = jag__nested(lead);
    int64_t B = ls->batch;
    if (c->nargs > MAX_ARGS || c->n_out > 4) return jag__error(JAG_ENOTIMPL, "%s: too many arguments", c->name);
    for (int i = 0; i < c->nargs; i++) {
        if (c->args[i].kind == JAG_VAL_TENSORS)
            for (int j = 0; j < c->args[i].u.tensors.n; j++)
                if (jag_is_nested(c->args[i].u.tensors.v[j]))
                    return jag__error(JAG_ENOTIMPL, "%s: no derivative for nested tensors inside a tensor list", c->name);
        if (c->args[i].kind == JAG_VAL_TENSOR && jag_tensor_layout(c->args[i].u.t) == JAG_JAGGED)
            return jag__error(JAG_ENOTIMPL, "%s: no derivative for a mix of jagged and strided nested tensors", c->name);
    }
    jag_value base[MAX_ARGS];
    int64_t lists[JAG_MAX_DIMS];
    for (int i = 0; i < c->nargs; i++) base[i] = c->args[i];
    jag_status st = shift_dims(c, jag_ndim(lead), false, base, lists);
    if (st) return st;
    jag_tensor **arg_c[MAX_ARGS] = {0}, **out_c[4] = {0}, **go_c[4] = {0};
    jag_tensor **grad_c[JAG_GRAD_MAX_INPUTS] = {0}; /* nested inputs: per component */
    jag_tensor *acc[JAG_GRAD_MAX_INPUTS] = {0};     /* dense inputs: the sum */
    for (int i = 0; i < c->nargs && !st; i++)
        if (c->args[i].kind == JAG_VAL_TENSOR && jag_is_nested(c->args[i].u.t)) {
            if (jag_nested_batch_size(c->args[i].u.t) != B)
                st = jag__error(JAG_ESHAPE, "%s: nested arguments differ in batch size", c->name);
            else st = comps_of(c->args[i].u.t, &arg_c[i]);
        }
    for (int k = 0; k < c->n_out && !st; k++) {
        if (!jag_is_nested(c->outputs[k]) || !jag_is_nested(go[k]) || jag_nested_batch_size(go[k]) != B)
            st = jag__error(JAG_EINTERNAL, "%s: a per-component op's output or its gradient is not nested like its input", c->name);
        if (!st) st = comps_of(c->outputs[k], &out_c[k]);
        if (!st) st = comps_of(go[k], &go_c[k]);
    }
    for (int k = 0; k < c->n_inputs && !st; k++)
        if (c->needs[k] && jag_is_nested(IN(k)) && !(grad_c[k] = calloc((size_t)(B ? B : 1), sizeof(jag_tensor *))))
            st = jag__error(JAG_ENOMEM, "autograd: out of memory");
    jag_grad_ctx cc = *c;
    if (c->op == JAG_OP_bmm) cc.op = JAG_OP_mm, rule = r_mm; /* as the forward's components */
    for (int64_t b = 0; b < B && !st; b++) {
        jag_value a[MAX_ARGS];
        jag_tensor *outs[4], *gos[4], *g[JAG_GRAD_MAX_INPUTS] = {0};
        for (int i = 0; i < c->nargs; i++) a[i] = arg_c[i] ? jag__v_tensor(arg_c[i][b]) : base[i];
        for (int k = 0; k < c->n_out; k++) outs[k] = out_c[k][b], gos[k] = go_c[k][b];
        cc.args = a, cc.outputs = outs;
        st = rule(&cc, gos, g);
        for (int k = 0; k < c->n_inputs; k++) {
            if (!g[k]) continue;
            if (st) {
                jag_release(g[k]);
            } else if (grad_c[k]) {
                grad_c[k][b] = g[k];
            } else if (!acc[k]) {
                acc[k] = g[k];
            } else {
                jag_tensor *s = NULL;
                st = jag_add(acc[k], g[k], 1.0, &s);
                jag_release(g[k]);
                if (!st) jag_release(acc[k]), acc[k] = s;
            }
        }
    }
    for (int k = 0; k < c->n_inputs; k++) gi[k] = NULL;
    for (int k = 0; k < c->n_inputs && !st; k++) {
        if (!c->needs[k]) continue;
        const jag_tensor *in = IN(k);
        if (grad_c[k]) { /* nested: components into zeros with in's tables */
            jag_tensor *z = NULL, **zc = NULL;
            st = jag_zeros_like(in, &z);
            if (!st) st = comps_of(z, &zc);
            for (int64_t b = 0; b < B && !st; b++)
                if (grad_c[k][b]) st = jag_copy_(zc[b], grad_c[k][b]);
            free_comps(zc, B);
            if (st) jag_release(z);
            else gi[k] = z;
        } else if (acc[k]) {
            gi[k] = acc[k], acc[k] = NULL;
        } else { /* no component: nothing flowed */
            st = jag_zeros(in->sizes, in->ndim, in->dtype, &gi[k]);
        }
    }
    for (int i = 0; i < MAX_ARGS; i++) free_comps(arg_c[i], B);
    for (int k = 0; k < 4; k++) free_comps(out_c[k], B), free_comps(go_c[k], B);
    for (int k = 0; k < JAG_GRAD_MAX_INPUTS; k++) free_comps(grad_c[k], B), jag_release(acc[k]);
    if (st)
        for (int k = 0; k < c->n_inputs; k++) jag_release(gi[k]), gi[k] = NULL;
    return st;
}

/* A non-pointwise rule for any input: dense as written, nested through the
 * runner that mirrors how the forward ran. */
static jag_status run_rule(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi, rule_fn rule) {
    const jag_tensor *nt = first_nested(c, NULL);
    if (!nt) return rule(c, go, gi);
    return jag_tensor_layout(nt) == JAG_JAGGED ? on_values(c, go, gi, rule) : per_component(c, go, gi, rule);
}

#define NESTED_BY_RUNNER(name)                                                 \
    static jag_status d_##name(const jag_grad_ctx *c, jag_tensor *const *go, jag_tensor **gi) { \
        return run_rule(c, go, gi, r_##name);                                  \
    }
NESTED_BY_RUNNER(view)
NESTED_BY_RUNNER(transpose)
NESTED_BY_RUNNER(permute)
NESTED_BY_RUNNER(narrow)
NESTED_BY_RUNNER(select)
NESTED_BY_RUNNER(expand)
NESTED_BY_RUNNER(sum)
NESTED_BY_RUNNER(mean)
NESTED_BY_RUNNER(prod)
NESTED_BY_RUNNER(amax)
NESTED_BY_RUNNER(var)
NESTED_BY_RUNNER(logsumexp)
NESTED_BY_RUNNER(std)
NESTED_BY_RUNNER(max_dim)
NESTED_BY_RUNNER(mm)
NESTED_BY_RUNNER(bmm)
NESTED_BY_RUNNER(matmul)
NESTED_BY_RUNNER(linear)
NESTED_BY_RUNNER(softmax)
NESTED_BY_RUNNER(log_softmax)
NESTED_BY_RUNNER(layer_norm)
NESTED_BY_RUNNER(rms_norm)
NESTED_BY_RUNNER(native_layer_norm)
NESTED_BY_RUNNER(native_rms_norm)
NESTED_BY_RUNNER(index_select)
NESTED_BY_RUNNER(gather)
NESTED_BY_RUNNER(embedding)
NESTED_BY_RUNNER(cat)
#undef NESTED_BY_RUNNER

/* scatter_add (x, dim, index, src): x's gradient is g, src's is g read back
 * at index (gather). */
RULE(scatter_add) {
    BEGIN;
    const jag_tensor *x = IN(0), *index = IN(1), *g = go[0];
    SET(0, (jag_tensor *)g);
    if (NEED(2)) {
        jag_tensor *o = NULL;
        jag_value a[] = {jag__v_tensor(g), jag__v_int(x->ndim ? wrap(c->args[1].u.i, x->ndim) : 0), jag__v_tensor(index)};
        jag_status st = jag__dispatch(JAG_OP_gather, a, 3, &o);
        SET(2, take(p, st, o));
    }
    END;
}

/* ---- the table ----------------------------------------------------------- */

/* NULL: the rows tagged NONDIFF (no float output: eq ne lt le gt ge argmax
 * argmin) or NO_DERIVATIVE (gradient ops); test_op_table checks that every
 * other row has a rule, COMPOSITE rows excepted (autograd then records the
 * ops they call). matmul has a
 * rule of its own (rather than recording its view/mm parts), so that it
 * also differentiates nested operands, whose views it cannot take. */
const jag_derivative_fn jag__derivatives[JAG_OP_BUILTIN_COUNT] = {
    [JAG_OP_neg] = r_neg,
    [JAG_OP_abs] = r_abs,
    [JAG_OP_exp] = r_exp,
    [JAG_OP_log] = r_log,
    [JAG_OP_sqrt] = r_sqrt,
    [JAG_OP_rsqrt] = r_rsqrt,
    [JAG_OP_sin] = r_sin,
    [JAG_OP_cos] = r_cos,
    [JAG_OP_tanh] = r_tanh,
    [JAG_OP_sigmoid] = r_sigmoid,
    [JAG_OP_relu] = r_relu,
    [JAG_OP_silu] = r_silu,
    [JAG_OP_gelu] = r_gelu,
    [JAG_OP_gelu_tanh] = r_gelu_tanh,
    [JAG_OP_reciprocal] = r_reciprocal,
    [JAG_OP_square] = r_square,
    [JAG_OP_sign] = r_sign,
    [JAG_OP_add] = r_add,
    [JAG_OP_sub] = r_sub,
    [JAG_OP_mul] = r_mul,
    [JAG_OP_div] = r_div,
    [JAG_OP_pow] = r_pow,
    [JAG_OP_maximum] = r_maximum,
    [JAG_OP_clamp] = r_clamp,
    [JAG_OP_minimum] = r_minimum,
    [JAG_OP_where] = r_where,
    [JAG_OP_clone] = r_clone,
    [JAG_OP_to_dtype] = r_to_dtype,
    [JAG_OP_view] = d_view,
    [JAG_OP_transpose] = d_transpose,
    [JAG_OP_permute] = d_permute,
    [JAG_OP_narrow] = d_narrow,
    [JAG_OP_select] = d_select,
    [JAG_OP_unsqueeze] = d_view,
    [JAG_OP_squeeze] = d_view,
    [JAG_OP_expand] = d_expand,
    [JAG_OP_sum] = d_sum,
    [JAG_OP_mean] = d_mean,
    [JAG_OP_prod] = d_prod,
    [JAG_OP_amax] = d_amax,
    [JAG_OP_amin] = d_amax,
    [JAG_OP_max] = d_amax,
    [JAG_OP_min] = d_amax,
    [JAG_OP_var] = d_var,
    [JAG_OP_std] = d_std,
    [JAG_OP_max_dim] = d_max_dim,
    [JAG_OP_min_dim] = d_max_dim,
    [JAG_OP_mm] = d_mm,
    [JAG_OP_bmm] = d_bmm,
    [JAG_OP_linear] = d_linear,
    [JAG_OP_matmul] = d_matmul,
    [JAG_OP_softmax] = d_softmax,
    [JAG_OP_log_softmax] = d_log_softmax,
    [JAG_OP_layer_norm] = d_layer_norm,
    [JAG_OP_rms_norm] = d_rms_norm,
    [JAG_OP_native_layer_norm] = d_native_layer_norm,
    [JAG_OP_native_rms_norm] = d_native_rms_norm,
    [JAG_OP_index_select] = d_index_select,
    [JAG_OP_gather] = d_gather,
    [JAG_OP_scatter_add] = r_scatter_add,
    [JAG_OP_embedding] = d_embedding,
    [JAG_OP_cat] = d_cat,
    [JAG_OP_values] = jag__d_values,                         /* derivatives_nested.c */
    [JAG_OP_nested_from_jagged] = jag__d_nested_from_jagged,
    [JAG_OP_to_padded] = jag__d_to_padded,
    [JAG_OP_scaled_dot_product_attention] = jag__d_sdpa,
    [JAG_OP_from_padded] = jag__d_from_padded,
    [JAG_OP_full] = jag__d_factory, /* src/trace/factory.c */
    [JAG_OP_full_like] = jag__d_factory,
    [JAG_OP_logsumexp] = d_logsumexp,
    [JAG_OP_embedding_bag] = jag__d_embedding_bag,
    [JAG_OP_ragged_reduce] = jag__d_ragged_reduce,
    [JAG_OP_ragged_reduce_indices] = jag__d_ragged_reduce_indices,
    [JAG_OP_ragged_softmax] = jag__d_ragged_softmax,
    [JAG_OP_varlen_attention] = jag__d_varlen_attention,
    [JAG_OP_scaled_dot_product_attention_masked] = jag__d_sdpa,
    [JAG_OP_floor] = r_rounding,
    [JAG_OP_ceil] = r_rounding,
    [JAG_OP_round] = r_rounding,
    [JAG_OP_trunc] = r_rounding,
    [JAG_OP_log1p] = r_log1p,
    [JAG_OP_atan] = r_atan,
    [JAG_OP_sinh] = r_sinh,
    [JAG_OP_cosh] = r_cosh,
    [JAG_OP_asinh] = r_asinh,
    [JAG_OP_expm1] = r_expm1,
    [JAG_OP_erf] = r_erf,
    [JAG_OP_erfc] = r_erfc,
    [JAG_OP_selu] = r_selu,
    [JAG_OP_hardswish] = r_hardswish,
    [JAG_OP_hardsigmoid] = r_hardsigmoid,
    [JAG_OP_mish] = r_mish,
    [JAG_OP_logsigmoid] = r_logsigmoid,
    [JAG_OP_leaky_relu] = r_leaky_relu,
    [JAG_OP_elu] = r_elu,
    [JAG_OP_softplus] = r_softplus,
    [JAG_OP_hardtanh] = r_hardtanh,
};
