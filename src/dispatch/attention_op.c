/* attention_op.c — the sdpa op: arguments, dense and jagged layouts, the
 * derivative rule. The kernels are in src/cpu/attention.c.
 *
 *   dense:  q (B, Hq, Lq, Dh), k and v (B, Hk, Lk, Dh)      (torch's layout)
 *   jagged: q (B, jq, Hq, Dh), k and v (B, jk, Hk, Dh) nested tensors; k and
 *           v of the same raggedness, q's lengths may differ from k's; or
 *           all three transposed to torch's (B, H, j, Dh) (ragged dim 2),
 *           run on their canonical forms (see src/subclass/ragged_idx.c).
 * Outputs: out shaped like q, and the log-sum-exp of each query's scores
 * ((B, Hq, Lq) dense, (B, jq, Hq) jagged), kept for backward. */
#include "../autograd/autograd.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */
#include "../cpu/attention.h"
#include "../subclass/nested.h"

#include <math.h>

/* Everything a kernel call needs, with the memory it owns. */
typedef struct {
    attn_args a;
    int64_t *seg;          /* qo, ql, ko, kl (4 * B), then mo, mh, mi, mj (4 * B) and fo (B + 1) */
    jag_tensor *hold[4];   /* contiguous copies the views point into */
    bool nested;
    int64_t lq, lk;        /* dense: sequence lengths */
} attn_setup;

static void setup_free(attn_setup *s) {
    free(s->seg);
    for (int i = 0; i < 4; i++) jag_release(s->hold[i]);
}

static attn_view view_of(const jag_tensor *t) { /* a (R, H, Dh) plain tensor */
    attn_view v = {jag__ptr(t), t->strides[0], t->strides[1], t->strides[2]};
    return v;
}

/* Dense (B, H, L, Dh) as packed rows: a contiguous (B * L, H, Dh) copy. */
static jag_status rows_of_dense(const jag_tensor *x, jag_tensor **out) {
    jag_tensor *t = NULL, *c = NULL;
    jag_value a[] = {jag__v_tensor(x), jag__v_int(1), jag__v_int(2)};
    jag_status st = jag__dispatch(JAG_OP_transpose, a, 3, &t);
    jag_value b[] = {jag__v_tensor(t)};
    if (!st) st = jag__dispatch(JAG_OP_clone, b, 1, &c);
    jag_release(t);
    if (st) return st;
    int64_t sz[3] = {x->sizes[0] * x->sizes[2], x->sizes[1], x->sizes[3]};
    jag_value v[] = {jag__v_tensor(c), jag__v_ints(sz, 3)};
    st = jag__dispatch(JAG_OP_view, v, 2, out);
    jag_release(c);
    return st;
}

static void fill_segments(const nested_state *s, int64_t *o, int64_t *l) {
    const int64_t *off = (const int64_t *)jag__ptr(s->offsets);
    for (int64_t b = 0; b < s->batch; b++) {
        o[b] = off[b];
        l[b] = s->lengths ? ((const int64_t *)jag__ptr(s->lengths))[b] : off[b + 1] - off[b];
    }
}

/* The checks on q, k and v shared by every path: layouts, dtypes, ranks,
 * batch, heads, raggedness. */
static jag_status check_qkv(const char *op, const jag_tensor *q, const jag_tensor *k, const jag_tensor *v) {
    nested_state *qs = jag__nested(q), *ks = jag__nested(k), *vs = jag__nested(v);
    if ((qs || ks || vs) && !(qs && ks && vs))
        return jag__error(JAG_EINVAL, "%s: q, k and v must all be nested or all dense", op);
    if (q->dtype != k->dtype || q->dtype != v->dtype || !jag_dtype_is_floating(q->dtype))
        return jag__error(JAG_EDTYPE, "%s: q, k and v have dtypes %s, %s, %s; expected one float dtype", op,
                          jag_dtype_name(q->dtype), jag_dtype_name(k->dtype), jag_dtype_name(v->dtype));
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return jag__error(JAG_ESHAPE, "%s: q, k and v must be 4-d (%s), got %d-d, %d-d, %d-d", op,
                          qs ? "(B, j, H, Dh) or (B, H, j, Dh)" : "(B, H, L, Dh)", q->ndim, k->ndim, v->ndim);
    /* which dims hold heads and the sequence */
    int hd = qs ? 2 : 1;
    int64_t B = q->sizes[0], hq = q->sizes[hd], hk = k->sizes[hd], dh = q->sizes[3];
    if (k->sizes[0] != B || v->sizes[0] != B)
        return jag__error(JAG_ESHAPE, "%s: batch sizes differ: q %lld, k %lld, v %lld", op, (long long)B,
                          (long long)k->sizes[0], (long long)v->sizes[0]);
    if (v->sizes[hd] != hk || k->sizes[3] != dh || v->sizes[3] != dh)
        return jag__error(JAG_ESHAPE, "%s: k and v need the same heads as each other and q's head size %lld", op, (long long)dh);
    if (hk == 0 || hq % hk != 0)
        return jag__error(JAG_ESHAPE, "%s: q has %lld heads, expected a multiple of k's %lld (grouped-query attention)", op,
                          (long long)hq, (long long)hk);
    if (qs) {
        if (qs->layout != JAG_JAGGED || ks->layout != JAG_JAGGED || vs->layout != JAG_JAGGED)
            return jag__error(JAG_ENOTIMPL, "%s: not supported for nested tensors with the strided layout", op);
        if (!jag__nested_same_raggedness(ks, vs, true))
            return jag__error(JAG_ESHAPE, "%s: k and v have different raggedness", op);
    } else if (k->sizes[2] != v->sizes[2]) {
        return jag__error(JAG_ESHAPE, "%s: k and v have %lld and %lld keys", op, (long long)k->sizes[2], (long long)v->sizes[2]);
    }
    return JAG_OK;
}

static jag_status setup(const char *op, const jag_tensor *q, const jag_tensor *k, const jag_tensor *v, bool causal,
                        double scale, attn_setup *su) {
    memset(su, 0, sizeof *su);
    jag_status st = check_qkv(op, q, k, v);
    if (st) return st;
    nested_state *qs = jag__nested(q), *ks = jag__nested(k), *vs = jag__nested(v);
    int hd = qs ? 2 : 1;
    int64_t B = q->sizes[0], hq = q->sizes[hd], hk = k->sizes[hd], dh = q->sizes[3];
    if (qs && (!qs->values->storage || !ks->values->storage || !vs->values->storage))
        return jag__error(JAG_ENOTIMPL, "%s: nested attention with a mask needs data (it cannot be traced yet)", op);
    su->seg = malloc((size_t)(9 * B + 2) * sizeof *su->seg);
    if (!su->seg) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    int64_t *qo = su->seg, *ql = qo + B, *ko = ql + B, *kl = ko + B;
    su->nested = qs != NULL;
    if (qs) {
        fill_segments(qs, qo, ql);
        fill_segments(ks, ko, kl);
        su->a.q = view_of(qs->values), su->a.k = view_of(ks->values), su->a.v = view_of(vs->values);
    } else {
        su->lq = q->sizes[2], su->lk = k->sizes[2];
        for (int64_t b = 0; b < B; b++) qo[b] = b * su->lq, ql[b] = su->lq, ko[b] = b * su->lk, kl[b] = su->lk;
        if (!q->storage) return jag__error(JAG_ENOTIMPL, "%s: no meta shapes yet", op);
        if ((st = rows_of_dense(q, &su->hold[0])) || (st = rows_of_dense(k, &su->hold[1])) ||
            (st = rows_of_dense(v, &su->hold[2])))
            return st;
        su->a.q = view_of(su->hold[0]), su->a.k = view_of(su->hold[1]), su->a.v = view_of(su->hold[2]);
    }
    su->a.f64 = q->dtype == JAG_FLOAT64;
    su->a.batch = B, su->a.hq = hq, su->a.hk = hk, su->a.dh = dh;
    su->a.qo = qo, su->a.ql = ql, su->a.ko = ko, su->a.kl = kl;
    su->a.causal = causal;
    su->a.scale = isfinite(scale) && scale > 0 ? scale : 1.0 / sqrt((double)(dh ? dh : 1));
    return JAG_OK;
}

/* The additive mask: dense, broadcast to (B, Hq, Lq, Lk), for dense q; a
 * strided nested tensor whose component b is (Lq_b, Lk_b) or (Hq or 1,
 * Lq_b, Lk_b), for jagged q. Fills the per-item offsets and strides, and
 * fo: where item b's (Hq, Lq_b, Lk_b) block of the scores' gradient starts. */
static jag_status setup_mask(const char *op, const jag_tensor *q, const jag_tensor *mask, attn_setup *su) {
    int64_t B = su->a.batch, *mo = su->seg + 4 * B, *mh = mo + B, *mi = mh + B, *mj = mi + B, *fo = mj + B;
    fo[0] = 0;
    for (int64_t b = 0; b < B; b++) fo[b + 1] = fo[b] + su->a.hq * su->a.ql[b] * su->a.kl[b];
    if (!mask) return JAG_OK;
    su->a.mo = mo, su->a.mh = mh, su->a.mi = mi, su->a.mj = mj;
    if (mask->dtype != q->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument 'mask' has dtype %s, expected %s like q", op, jag_dtype_name(mask->dtype),
                          jag_dtype_name(q->dtype));
    nested_state *ms = jag__nested(mask);
    char b1[JAG_SHAPE_BUF];
    if (!su->nested) {
        if (ms) return jag__error(JAG_EINVAL, "%s: argument 'mask' is nested, expected a dense mask for dense q", op);
        int64_t full[4] = {B, su->a.hq, su->lq, su->lk};
        jag_tensor *e = NULL;
        jag_value a[] = {jag__v_tensor(mask), jag__v_ints(full, 4)};
        if (mask->ndim > 4 || jag__dispatch(JAG_OP_expand, a, 2, &e))
            return jag__error(JAG_ESHAPE, "%s: argument 'mask' of shape %s does not broadcast to (B, Hq, Lq, Lk) = (%lld, %lld, %lld, %lld)",
                              op, jag__shape_str(mask->sizes, mask->ndim, b1, sizeof b1), (long long)B, (long long)su->a.hq,
                              (long long)su->lq, (long long)su->lk);
        su->hold[3] = e;
        su->a.mbase = jag__ptr(e);
        for (int64_t b = 0; b < B; b++) mo[b] = b * e->strides[0], mh[b] = e->strides[1], mi[b] = e->strides[2], mj[b] = e->strides[3];
        return JAG_OK;
    }
    if (!ms || ms->layout != JAG_STRIDED)
        return jag__error(JAG_EINVAL, "%s: argument 'mask' must be a strided nested tensor with components (Lq_b, Lk_b) or (Hq, Lq_b, Lk_b) for jagged q", op);
    if (ms->batch != B || (mask->ndim != 3 && mask->ndim != 4))
        return jag__error(JAG_ESHAPE, "%s: argument 'mask' has %lld components of %d dims, expected %lld of 2 or 3 dims", op,
                          (long long)ms->batch, mask->ndim - 1, (long long)B);
    if (!ms->buffer->storage) return jag__error(JAG_ENOTIMPL, "%s: a nested mask needs data", op);
    int n = (int)ms->sizes->sizes[1];
    const int64_t *sz = (const int64_t *)jag__ptr(ms->sizes), *st = (const int64_t *)jag__ptr(ms->strides);
    const int64_t *so = (const int64_t *)jag__ptr(ms->storage_offsets);
    for (int64_t b = 0; b < B; b++) {
        const int64_t *cs = sz + b * n, *cst = st + b * n;
        int64_t hm = n == 3 ? cs[0] : 1;
        if ((hm != 1 && hm != su->a.hq) || cs[n - 2] != su->a.ql[b] || cs[n - 1] != su->a.kl[b])
            return jag__error(JAG_ESHAPE, "%s: component %lld of argument 'mask' has shape %s, expected (%lld, %lld) or (%lld, %lld, %lld) (heads, queries, keys)",
                              op, (long long)b, jag__shape_str(cs, n, b1, sizeof b1), (long long)su->a.ql[b], (long long)su->a.kl[b],
                              (long long)su->a.hq, (long long)su->a.ql[b], (long long)su->a.kl[b]);
        mo[b] = so[b];
        mh[b] = n == 3 && hm != 1 ? cst[0] : 0, mi[b] = cst[n - 2], mj[b] = cst[n - 1];
    }
    su->a.mbase = jag__ptr(ms->buffer);
    return JAG_OK;
}

/* rows (R, H, X...) back to the input's form: nested around `like`'s
 * structure, or dense (B, H, L, X...) from (B * L, H, X...). */
static jag_status to_input_form(const attn_setup *su, const jag_tensor *like, const jag_tensor *rows, int64_t len,
                                jag_tensor **out) {
    if (su->nested) return jag__nested_rewrap_jagged(jag__nested(like), rows, out);
    int64_t sz[JAG_MAX_DIMS];
    int n = 0;
    sz[n++] = su->a.batch, sz[n++] = len;
    for (int d = 1; d < rows->ndim; d++) sz[n++] = rows->sizes[d];
    jag_tensor *v = NULL;
    jag_value a[] = {jag__v_tensor(rows), jag__v_ints(sz, n)};
    jag_status st = jag__dispatch(JAG_OP_view, a, 2, &v);
    jag_value b[] = {jag__v_tensor(v), jag__v_int(1), jag__v_int(2)};
    if (!st) st = jag__dispatch(JAG_OP_transpose, b, 3, out);
    jag_release(v);
    return st;
}

static jag_status new_rows(const char *op, int64_t r, int64_t h, int64_t dh, bool f64, bool zero, jag_tensor **out) {
    int64_t sz[3] = {r, h, dh};
    *out = jag__tensor_new(op, sz, dh < 0 ? 2 : 3, f64 ? JAG_FLOAT64 : JAG_FLOAT32, zero, false);
    return *out ? JAG_OK : jag_last_status();
}

/* Rows covered by the nested values (holes included), or B * L. */
static int64_t all_rows(const attn_setup *su, const jag_tensor *t, bool keys) {
    if (su->nested) return jag__nested(t)->values->sizes[0];
    (void)keys;
    return su->a.batch * (keys ? su->lk : su->lq);
}

/* The arguments of either op: (q, k, v, causal, scale) or (q, k, v, mask
 * or none, causal, scale). */
static jag_status parse_args(const char *op, const jag_value *args, int nargs, const jag_tensor **q, const jag_tensor **k,
                             const jag_tensor **v, const jag_tensor **mask, bool *causal, double *scale) {
    jag_status st;
    int c = nargs == 6 ? 4 : 3;
    *mask = NULL;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "q", q)) || (st = jag__arg_tensor(op, args, nargs, 1, "k", k)) ||
        (st = jag__arg_tensor(op, args, nargs, 2, "v", v)) ||
        (nargs == 6 && (st = jag__arg_opt_tensor(op, args, nargs, 3, "mask", mask))) ||
        (st = jag__arg_bool(op, args, nargs, c, "causal", causal)) || (st = jag__arg_double(op, args, nargs, c + 1, "scale", scale)))
        return st;
    return JAG_OK;
}

/* Jagged q, k, v without a mask: the varlen_attention op on their values
 * and offsets, the results re-wrapped around q's structure (lse as a
 * (B, jq, Hq) nested tensor). Traceable: it reads no data. */
static jag_status sdpa_jagged(const char *op, const jag_tensor *q, const jag_tensor *k, const jag_tensor *v, bool causal,
                              double scale, jag_tensor **outs) {
    jag_status st = check_qkv(op, q, k, v);
    if (st) return st;
    nested_state *qs = jag__nested(q), *ks = jag__nested(k), *vs = jag__nested(v);
    jag_value a[] = {jag__v_tensor(qs->values), jag__v_tensor(ks->values), jag__v_tensor(vs->values),
                     jag__v_tensor(qs->offsets), jag__v_tensor(qs->lengths), jag__v_tensor(ks->offsets),
                     jag__v_tensor(ks->lengths), jag__v_bool(causal), jag__v_double(scale)};
    jag_tensor *r[2] = {0};
    if ((st = jag__dispatch(JAG_OP_varlen_attention, a, 9, r))) return st;
    st = jag__nested_rewrap_jagged(qs, r[0], &outs[0]);
    if (!st && (st = jag__nested_rewrap_jagged(qs, r[1], &outs[1]))) jag_release(outs[0]), outs[0] = NULL;
    jag_release(r[0]), jag_release(r[1]);
    return st;
}

/* Its gradient: varlen_attention_backward on the inner tensors, each
 * gradient around its input's structure. */
static jag_status d_sdpa_jagged(const jag_grad_ctx *c, const jag_tensor *q, const jag_tensor *k, const jag_tensor *v,
                                bool causal, double scale, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    nested_state *qs = jag__nested(q), *ks = jag__nested(k), *vs = jag__nested(v);
    nested_state *os = jag__nested(c->outputs[0]), *gs = jag__nested(grad_out[0]), *ls = jag__nested(c->outputs[1]);
    if (!qs || !ks || !vs || !os || !gs || !ls)
        return jag__error(JAG_EINTERNAL, "%s: backward of jagged attention without nested outputs or gradient", c->name);
    jag_value a[] = {jag__v_tensor(qs->values), jag__v_tensor(ks->values), jag__v_tensor(vs->values),
                     jag__v_tensor(os->values), jag__v_tensor(gs->values), jag__v_tensor(ls->values),
                     jag__v_tensor(qs->offsets), jag__v_tensor(qs->lengths), jag__v_tensor(ks->offsets),
                     jag__v_tensor(ks->lengths), jag__v_bool(causal), jag__v_double(scale)};
    jag_tensor *r[3] = {0};
    jag_status st = jag__dispatch(JAG_OP_varlen_attention_backward, a, 12, r);
    nested_state *like[3] = {qs, ks, vs};
    for (int i = 0; !st && i < 3; i++)
        if (c->needs[i]) st = jag__nested_rewrap_jagged(like[i], r[i], &grad_in[i]);
    if (st)
        for (int i = 0; i < 3; i++) jag_release(grad_in[i]), grad_in[i] = NULL;
    for (int i = 0; i < 3; i++) jag_release(r[i]);
    return st;
}

/* Jagged q, k, v of torch's layout (B, H, j, Dh) (a transpose of (B, j, H,
 * Dh): ragged dim 2, the same values): attention on their canonical forms,
 * the output and lse ((B, H, j)) relabelled back. */
static jag_status sdpa_heads_first(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *t[3] = {args[0].u.t, args[1].u.t, args[2].u.t};
    int r[3];
    for (int i = 0; i < 3; i++) r[i] = jag__nested_ragged_idx(t[i]);
    if (r[0] != 2 || r[1] != 2 || r[2] != 2 || t[0]->ndim != 4 || t[1]->ndim != 4 || t[2]->ndim != 4)
        return jag__error(JAG_ESHAPE, "%s: q, k and v must all be jagged (B, j, H, Dh) or all jagged (B, H, j, Dh); "
                          "got %d-d, %d-d, %d-d tensors ragged in dims %d, %d, %d (0: not jagged)", op, t[0]->ndim,
                          t[1]->ndim, t[2]->ndim, r[0], r[1], r[2]);
    jag_value a[6];
    jag_tensor *c[3] = {0}, *res[2] = {0};
    jag_status st = JAG_OK;
    for (int i = 0; i < nargs; i++) a[i] = args[i];
    for (int i = 0; i < 3 && !st; i++)
        if (!(st = jag__nested_relabel(t[i], 1, &c[i]))) a[i] = jag__v_tensor(c[i]);
    if (!st) st = jag__composite_sdpa(op, a, nargs, res);
    for (int i = 0; i < 2 && !st; i++) st = jag__nested_relabel(res[i], 2, &outs[i]);
    if (st) jag_release(outs[0]), outs[0] = NULL;
    for (int i = 0; i < 3; i++) jag_release(c[i]);
    jag_release(res[0]), jag_release(res[1]);
    return st;
}

/* Whether the queries' segments cover rows [0, rows) end to end (no holes):
 * then the kernels write every row of out and lse, and nothing need be
 * filled first. */
static bool queries_cover(const attn_args *a, int64_t rows) {
    int64_t end = 0;
    for (int64_t b = 0; b < a->batch; b++) {
        if (a->qo[b] != end) return false;
        end += a->ql[b];
    }
    return end == rows;
}

/* ---- half dtypes ---------------------------------------------------------
 * float16 / bfloat16 q, k, v (and mask) compute in float32, as torch's CPU
 * attention does: the operands are widened (exactly), the float32 attention
 * runs, and the output is rounded once to the input dtype. The log-sum-exp
 * stays float32 (torch's CPU attention keeps it in float for reduced
 * precision too), so that backward reads it unrounded; the gradients are
 * computed in float32 and each rounded once to its input's dtype. */

static bool is_half_call(const jag_value *args, int nargs) {
    (void)nargs;
    return args[0].kind == JAG_VAL_TENSOR && args[0].u.t && jag_dtype_is_half(args[0].u.t->dtype);
}

/* x converted to dtype (dense or nested), a new reference */
static jag_status converted_to(const jag_tensor *x, jag_dtype dtype, jag_tensor **out) {
    jag_value a[] = {jag__v_tensor(x), jag__v_int((int64_t)dtype)};
    return jag__dispatch(JAG_OP_to_dtype, a, 2, out);
}

/* args with each tensor argument (q, k, v, mask) widened to float32 into
 * wide[]; *held keeps the new references (release with release_held).
 * k, v and mask must have q's dtype, as for every dtype. */
static jag_status widen_args(const char *op, const jag_value *args, int nargs, jag_value *wide, jag_tensor **held) {
    const jag_tensor *q = args[0].u.t;
    static const char *const names[4] = {"q", "k", "v", "mask"};
    for (int i = 0; i < nargs; i++) wide[i] = args[i];
    for (int i = 0; i < 4 && i < nargs; i++) {
        held[i] = NULL;
        if (args[i].kind != JAG_VAL_TENSOR || !args[i].u.t) continue;
        const jag_tensor *t = args[i].u.t;
        if (i > 0 && t->dtype != q->dtype) {
            if (i < 3)
                return jag__error(JAG_EDTYPE, "%s: q, k and v have dtypes %s, %s, %s; expected one float dtype", op,
                                  jag_dtype_name(q->dtype), jag_dtype_name(args[1].u.t->dtype),
                                  jag_dtype_name(args[2].u.t->dtype));
            return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected %s like q", op, names[i],
                              jag_dtype_name(t->dtype), jag_dtype_name(q->dtype));
        }
        jag_status st = converted_to(t, JAG_FLOAT32, &held[i]);
        if (st) return st;
        wide[i] = jag__v_tensor(held[i]);
    }
    return JAG_OK;
}

static void release_held(jag_tensor **held, int n) {
    for (int i = 0; i < n; i++) jag_release(held[i]), held[i] = NULL;
}

/* The forward on half operands: widened, run in float32, the output
 * rounded once; lse float32. */
static jag_status sdpa_in_float32(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    jag_value wide[6];
    jag_tensor *held[4] = {0}, *r[2] = {0};
    jag_dtype half = args[0].u.t->dtype;
    jag_status st = widen_args(op, args, nargs, wide, held);
    if (!st) st = jag__composite_sdpa(op, wide, nargs, r);
    if (!st) st = converted_to(r[0], half, &outs[0]);
    if (!st) outs[1] = r[1], r[1] = NULL;
    release_held(held, 4);
    jag_release(r[0]), jag_release(r[1]);
    return st;
}

static jag_status d_sdpa_in_float32(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    jag_value wide[6];
    jag_tensor *held[4] = {0}, *o = NULL, *go = NULL, *wi[4] = {0};
    jag_status st = widen_args(c->name, c->args, c->nargs, wide, held);
    if (!st) st = converted_to(c->outputs[0], JAG_FLOAT32, &o);
    if (!st) st = converted_to(grad_out[0], JAG_FLOAT32, &go);
    if (!st) {
        jag_tensor *outs[2] = {o, c->outputs[1]}, *gos[2] = {go, grad_out[1]};
        jag_grad_ctx w = *c;
        w.args = wide, w.outputs = outs;
        st = jag__d_sdpa(&w, gos, wi);
    }
    for (int i = 0; !st && i < 4 && i < c->n_inputs; i++)
        if (wi[i]) st = converted_to(wi[i], c->args[i].u.t->dtype, &grad_in[i]);
    if (st)
        for (int i = 0; i < 4 && i < c->n_inputs; i++) jag_release(grad_in[i]), grad_in[i] = NULL;
    for (int i = 0; i < 4; i++) jag_release(wi[i]);
    release_held(held, 4);
    jag_release(o), jag_release(go);
    return st;
}

jag_status jag__composite_sdpa(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *q, *k, *v, *mask;
    bool causal;
    double scale;
    jag_status st;
    if ((st = parse_args(op, args, nargs, &q, &k, &v, &mask, &causal, &scale))) return st;
    /* torch refuses an explicit mask with is_causal ("Explicit attn_mask
     * should not be set when is_causal=True"): a causal mask is part of the
     * mask then */
    if (mask && causal)
        return jag__error(JAG_EINVAL,
                          "%s: argument 'mask' is set with causal = true, expected one of them: an explicit mask should "
                          "not be set when causal is true (put the causal part into the mask)",
                          op);
    if (jag__nested_ragged_idx(q) > 1 || jag__nested_ragged_idx(k) > 1 || jag__nested_ragged_idx(v) > 1)
        return sdpa_heads_first(op, args, nargs, outs);
    if (is_half_call(args, nargs)) return sdpa_in_float32(op, args, nargs, outs);
    if (!mask && jag__nested(q)) return sdpa_jagged(op, q, k, v, causal, scale, outs);
    attn_setup su;
    if ((st = setup(op, q, k, v, causal, scale, &su)) || (st = setup_mask(op, q, mask, &su))) {
        setup_free(&su);
        return st;
    }
    jag_tensor *o = NULL, *lse = NULL;
    int64_t rq = all_rows(&su, q, false);
    bool cover = queries_cover(&su.a, rq);
    if (!(st = new_rows(op, rq, su.a.hq, su.a.dh, su.a.f64, !cover, &o)) &&
        !(st = new_rows(op, rq, su.a.hq, -1, su.a.f64, false, &lse))) {
        if (!cover) jag__fill(lse, -INFINITY); /* rows in holes */
        st = jag__attention_forward(&su.a, jag__ptr(o), jag__ptr(lse));
    }
    if (!st) st = to_input_form(&su, q, o, su.lq, &outs[0]);
    if (!st) st = to_input_form(&su, q, lse, su.lq, &outs[1]);
    if (st) jag_release(outs[0]), outs[0] = NULL;
    jag_release(o), jag_release(lse);
    setup_free(&su);
    return st;
}

/* A (R, H, X) view of a tensor in input form: nested values, or the dense
 * (B, H, L, X) transposed back to rows (a contiguous copy). */
static jag_status rows_for(const attn_setup *su, const jag_tensor *t, jag_tensor **out) {
    if (su->nested) {
        const jag_tensor *v = jag__nested(t)->values;
        *out = jag__tensor_view(v, v->sizes, v->strides, v->ndim, v->offset);
        return *out ? JAG_OK : jag_last_status();
    }
    if (t->ndim == 4) return rows_of_dense(t, out);
    /* lse (B, H, L): transpose to (B, L, H), copy, view (B * L, H) */
    jag_tensor *tt = NULL, *c = NULL;
    jag_value a[] = {jag__v_tensor(t), jag__v_int(1), jag__v_int(2)};
    jag_status st = jag__dispatch(JAG_OP_transpose, a, 3, &tt);
    jag_value b[] = {jag__v_tensor(tt)};
    if (!st) st = jag__dispatch(JAG_OP_clone, b, 1, &c);
    int64_t sz[2] = {t->sizes[0] * t->sizes[2], t->sizes[1]};
    jag_value vv[] = {jag__v_tensor(c), jag__v_ints(sz, 2)};
    if (!st) st = jag__dispatch(JAG_OP_view, vv, 2, out);
    jag_release(tt), jag_release(c);
    return st;
}

/* The mask's gradient from the scores' gradient dm (item b's (Hq, Lq_b,
 * Lk_b) block at fo[b]): dense, summed to the mask's shape; nested, each
 * component's block (summed over heads when the mask has none or one)
 * copied into zeros shaped like the mask. */
static jag_status mask_grad(const char *op, const attn_setup *su, const jag_tensor *mask, const jag_tensor *dm,
                            jag_tensor **out) {
    const int64_t *fo = su->seg + 8 * su->a.batch;
    jag_status st;
    if (!su->nested) {
        int64_t full[4] = {su->a.batch, su->a.hq, su->lq, su->lk};
        jag_tensor *v = NULL;
        jag_value a[] = {jag__v_tensor(dm), jag__v_ints(full, 4)};
        if ((st = jag__dispatch(JAG_OP_view, a, 2, &v))) return st;
        st = jag__sum_to(v, mask, out);
        jag_release(v);
        return st;
    }
    jag_tensor *z = NULL;
    if ((st = jag_zeros_like(mask, &z))) return st;
    nested_state *zs = jag__nested(z);
    jag_tensor **comps = calloc((size_t)(zs->batch ? zs->batch : 1), sizeof *comps);
    if (!comps) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    if (!st) st = jag__nested_unbind(zs, comps);
    for (int64_t b = 0; !st && b < zs->batch; b++) {
        int64_t blk[3] = {su->a.hq, su->a.ql[b], su->a.kl[b]}, st3[3] = {blk[1] * blk[2], blk[2], 1};
        jag_tensor *g = jag__tensor_view(dm, blk, st3, 3, dm->offset + fo[b]), *r = NULL;
        if (!g) {
            st = jag_last_status();
            break;
        }
        if (comps[b]->ndim == 3 && comps[b]->sizes[0] == su->a.hq) r = jag_retain(g);
        else {
            int d0[1] = {0};
            st = jag_sum(g, d0, 1, comps[b]->ndim == 3, &r);
        }
        if (!st) st = jag_copy_(comps[b], r);
        jag_release(g), jag_release(r);
    }
    if (comps && !st)
        for (int64_t b = 0; b < zs->batch; b++) jag_release(comps[b]);
    free(comps);
    if (st) {
        jag_release(z);
        return st;
    }
    *out = z;
    return JAG_OK;
}

static jag_status d_sdpa_fn(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in, void *data) {
    (void)data;
    return jag__d_sdpa(c, grad_out, grad_in);
}

jag_status jag__d_sdpa(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    if (jag__grad_ctx_moved(c)) return jag__grad_on_canonical(c, grad_out, grad_in, d_sdpa_fn, NULL); /* (B, H, j, Dh) */
    const jag_tensor *q, *k, *v, *mask;
    bool causal;
    double scale;
    jag_status st = parse_args(c->name, c->args, c->nargs, &q, &k, &v, &mask, &causal, &scale);
    if (st) return st;
    if (is_half_call(c->args, c->nargs)) return d_sdpa_in_float32(c, grad_out, grad_in);
    if (!mask && jag__nested(q)) return d_sdpa_jagged(c, q, k, v, causal, scale, grad_out, grad_in);
    attn_setup su;
    st = setup(c->name, q, k, v, causal, scale, &su);
    if (!st) st = setup_mask(c->name, q, mask, &su);
    bool want_mask = mask && c->n_inputs > 3 && c->needs[3];
    jag_tensor *o = NULL, *go = NULL, *lse = NULL, *lc = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *dm = NULL;
    if (!st) st = rows_for(&su, c->outputs[0], &o);
    if (!st) st = rows_for(&su, grad_out[0], &go);
    if (!st) st = rows_for(&su, c->outputs[1], &lse);
    jag_value a[] = {jag__v_tensor(lse)};
    if (!st) st = jag__dispatch(JAG_OP_clone, a, 1, &lc); /* contiguous (R, H) */
    int64_t rq = st ? 0 : all_rows(&su, q, false), rk = st ? 0 : all_rows(&su, k, true);
    if (!st) st = new_rows(c->name, rq, su.a.hq, su.a.dh, su.a.f64, true, &dq);
    if (!st) st = new_rows(c->name, rk, su.a.hk, su.a.dh, su.a.f64, true, &dk);
    if (!st) st = new_rows(c->name, rk, su.a.hk, su.a.dh, su.a.f64, true, &dv);
    const int64_t *fo = st ? NULL : su.seg + 8 * su.a.batch;
    if (!st && want_mask) { /* every item's (Hq, Lq_b, Lk_b) block of score gradients */
        int64_t n = fo[su.a.batch];
        dm = jag__tensor_new(c->name, &n, 1, su.a.f64 ? JAG_FLOAT64 : JAG_FLOAT32, true, false);
        if (!dm) st = jag_last_status();
    }
    if (!st) {
        attn_view ov = view_of(o), gv = view_of(go);
        st = jag__attention_backward(&su.a, &ov, &gv, jag__ptr(lc), jag__ptr(dq), jag__ptr(dk), jag__ptr(dv),
                                     dm ? jag__ptr(dm) : NULL, fo);
    }
    if (!st && c->needs[0]) st = to_input_form(&su, q, dq, su.lq, &grad_in[0]);
    if (!st && c->needs[1]) st = to_input_form(&su, k, dk, su.lk, &grad_in[1]);
    if (!st && c->needs[2]) st = to_input_form(&su, v, dv, su.lk, &grad_in[2]);
    if (!st && dm) st = mask_grad(c->name, &su, mask, dm, &grad_in[3]);
    if (st)
        for (int i = 0; i < 4 && i < c->n_inputs; i++) jag_release(grad_in[i]), grad_in[i] = NULL;
    jag_release(o), jag_release(go), jag_release(lse), jag_release(lc), jag_release(dq), jag_release(dk), jag_release(dv);
    jag_release(dm);
    setup_free(&su);
    return st;
}

jag_status jag_scaled_dot_product_attention(const jag_tensor *q, const jag_tensor *k, const jag_tensor *v, bool causal,
                                            double scale, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "jag_scaled_dot_product_attention: argument 'out' is NULL");
    jag_tensor *outs[2] = {0};
    jag_value a[] = {jag__v_tensor(q), jag__v_tensor(k), jag__v_tensor(v), jag__v_bool(causal), jag__v_double(scale)};
    jag__enter();
    jag_status st = jag__dispatch(JAG_OP_scaled_dot_product_attention, a, 5, outs);
    jag_release(outs[1]); /* the log-sum-exp lives on in the autograd node */
    if (!st) *out = outs[0];
    return jag__leave(st, out, st == JAG_OK);
}

jag_status jag_scaled_dot_product_attention_masked(const jag_tensor *q, const jag_tensor *k, const jag_tensor *v,
                                                   const jag_tensor *mask, bool causal, double scale, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "jag_scaled_dot_product_attention_masked: argument 'out' is NULL");
    jag_tensor *outs[2] = {0};
    jag_value a[] = {jag__v_tensor(q), jag__v_tensor(k), jag__v_tensor(v), jag__v_tensor(mask), jag__v_bool(causal),
                     jag__v_double(scale)};
    jag__enter();
    jag_status st = jag__dispatch(JAG_OP_scaled_dot_product_attention_masked, a, 6, outs);
    jag_release(outs[1]);
    if (!st) *out = outs[0];
    return jag__leave(st, out, st == JAG_OK);
}

/* ---- attention on a jagged batch's inner tensors --------------------------
 * The ops the sdpa op runs for jagged q, k, v without a mask, on their
 * values and offsets, so that a trace over nested tensors desugars into a
 * plain op (the META functions need only shapes) and a compiled program
 * runs it:
 *
 *   varlen_attention(q (Rq, Hq, Dh), k (Rk, Hk, Dh), v (Rk, Hk, Dh),
 *       q_offsets (B+1), q_lengths (B) or none, k_offsets (B+1), k_lengths
 *       or none, causal, scale) -> (out (Rq, Hq, Dh), lse (Rq, Hq))
 *   varlen_attention_backward(q, k, v, out, grad_out, lse, q_offsets,
 *       q_lengths, k_offsets, k_lengths, causal, scale) -> (dq, dk, dv)
 *
 * Rows outside every component (holes) get 0 in out, dq, dk, dv and -inf
 * in lse. Offsets and lengths are user input when these ops are called by
 * name: they are checked against the rows before a row is read. */

typedef struct {
    const jag_tensor *t[6]; /* q, k, v [, out, grad_out, lse] */
    const jag_tensor *qo, *ql, *ko, *kl;
    bool causal;
    double scale;
} varlen_args;

static jag_status varlen_parse(const char *op, const jag_value *args, int nargs, int n_t, varlen_args *r) {
    static const char *names[6] = {"q", "k", "v", "out", "grad_out", "lse"};
    jag_status st;
    for (int i = 0; i < n_t; i++)
        if ((st = jag__arg_tensor(op, args, nargs, i, names[i], &r->t[i]))) return st;
    if ((st = jag__arg_tensor(op, args, nargs, n_t, "q_offsets", &r->qo)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, n_t + 1, "q_lengths", &r->ql)) ||
        (st = jag__arg_tensor(op, args, nargs, n_t + 2, "k_offsets", &r->ko)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, n_t + 3, "k_lengths", &r->kl)) ||
        (st = jag__arg_bool(op, args, nargs, n_t + 4, "causal", &r->causal)) ||
        (st = jag__arg_double(op, args, nargs, n_t + 5, "scale", &r->scale)))
        return st;
    const jag_tensor *q = r->t[0], *k = r->t[1], *v = r->t[2];
    char b1[JAG_SHAPE_BUF], b2[JAG_SHAPE_BUF];
    for (int i = 0; i < n_t; i++) {
        const jag_tensor *x = r->t[i];
        if (x->dtype != q->dtype || !jag_dtype_is_floating(x->dtype))
            return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected one float dtype for every tensor", op,
                              names[i], jag_dtype_name(x->dtype));
        if (x->ndim != (i == 5 ? 2 : 3))
            return jag__error(JAG_ESHAPE, "%s: argument '%s' must be %s, got %d-d", op, names[i],
                              i == 5 ? "(R, H)" : "(R, H, Dh)", x->ndim);
    }
    int64_t hq = q->sizes[1], hk = k->sizes[1], dh = q->sizes[2];
    if (k->sizes[2] != dh || v->sizes[2] != dh || v->sizes[1] != hk || v->sizes[0] != k->sizes[0])
        return jag__error(JAG_ESHAPE, "%s: k %s and v %s must be (Rk, Hk, Dh) with q's Dh = %lld", op,
                          jag__shape_str(k->sizes, 3, b1, sizeof b1), jag__shape_str(v->sizes, 3, b2, sizeof b2), (long long)dh);
    if (hk == 0 || hq % hk != 0)
        return jag__error(JAG_ESHAPE, "%s: q has %lld heads, expected a multiple of k's %lld (grouped-query attention)", op,
                          (long long)hq, (long long)hk);
    for (int i = 3; i < n_t; i++) /* out, grad_out, lse: shaped like q (lse without Dh) */
        if (r->t[i]->sizes[0] != q->sizes[0] || r->t[i]->sizes[1] != hq || (i < 5 && r->t[i]->sizes[2] != dh))
            return jag__error(JAG_ESHAPE, "%s: argument '%s' has shape %s, expected q's rows and heads", op, names[i],
                              jag__shape_str(r->t[i]->sizes, r->t[i]->ndim, b1, sizeof b1));
    const jag_tensor *ix[4] = {r->qo, r->ql, r->ko, r->kl};
    static const char *ixn[4] = {"q_offsets", "q_lengths", "k_offsets", "k_lengths"};
    if (r->qo->ndim != 1 || r->qo->sizes[0] < 1)
        return jag__error(JAG_EINVAL, "%s: argument 'q_offsets' must be int64 of shape (B+1), B >= 0", op);
    int64_t B = r->qo->sizes[0] - 1;
    for (int i = 0; i < 4; i++) {
        if (!ix[i]) continue;
        int64_t want = i % 2 ? B : B + 1;
        if (ix[i]->dtype != JAG_INT64 || ix[i]->ndim != 1 || ix[i]->sizes[0] != want || want < 0)
            return jag__error(JAG_EINVAL, "%s: argument '%s' must be int64 of shape (%lld)", op, ixn[i], (long long)want);
    }
    return JAG_OK;
}

/* Per-sequence first rows and counts of one side, checked against rows. */
static jag_status varlen_segments(const char *op, const jag_tensor *off, const jag_tensor *len, int64_t rows,
                                  const char *side, int64_t *o, int64_t *l) {
    int64_t B = off->sizes[0] - 1;
    for (int64_t b = 0; b < B; b++) {
        const int64_t *po = (const int64_t *)jag__ptr(off);
        int64_t ob = po[b * off->strides[0]], nb;
        if (len) nb = ((const int64_t *)jag__ptr(len))[b * len->strides[0]];
        else nb = po[(b + 1) * off->strides[0]] - ob;
        if (ob < 0 || nb < 0 || ob > rows || nb > rows - ob)
            return jag__error(JAG_EINVAL, "%s: %s component %lld's rows [%lld, %lld + %lld) do not fit the %lld rows", op,
                              side, (long long)b, (long long)ob, (long long)ob, (long long)nb, (long long)rows);
        o[b] = ob, l[b] = nb;
    }
    return JAG_OK;
}

/* The kernels' arguments; seg (owned by the caller) holds 4B + B + 1 values. */
static jag_status varlen_setup(const char *op, const varlen_args *r, int64_t **seg, attn_args *a) {
    const jag_tensor *q = r->t[0], *k = r->t[1], *v = r->t[2];
    int64_t B = r->qo->sizes[0] - 1;
    if (r->ko->sizes[0] - 1 != B)
        return jag__error(JAG_ESHAPE, "%s: q has %lld sequences, k %lld", op, (long long)B, (long long)(r->ko->sizes[0] - 1));
    *seg = malloc((size_t)(5 * B + 1) * sizeof **seg);
    if (!*seg) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    int64_t *qo = *seg, *ql = qo + B, *ko = ql + B, *kl = ko + B, *fo = kl + B;
    jag_status st;
    if ((st = varlen_segments(op, r->qo, r->ql, q->sizes[0], "q", qo, ql)) ||
        (st = varlen_segments(op, r->ko, r->kl, k->sizes[0], "k", ko, kl)))
        return st;
    memset(a, 0, sizeof *a);
    a->f64 = q->dtype == JAG_FLOAT64;
    a->batch = B, a->hq = q->sizes[1], a->hk = k->sizes[1], a->dh = q->sizes[2];
    a->qo = qo, a->ql = ql, a->ko = ko, a->kl = kl;
    a->q = view_of(q), a->k = view_of(k), a->v = view_of(v);
    a->causal = r->causal;
    a->scale = isfinite(r->scale) && r->scale > 0 ? r->scale : 1.0 / sqrt((double)(a->dh ? a->dh : 1));
    fo[0] = 0;
    for (int64_t b = 0; b < B; b++) fo[b + 1] = fo[b] + a->hq * ql[b] * kl[b];
    return JAG_OK;
}

static void spec_like(jag_spec *s, const jag_tensor *t, int ndim) {
    s->dtype = t->dtype, s->ndim = ndim;
    memcpy(s->sizes, t->sizes, (size_t)ndim * sizeof *s->sizes);
}

jag_status jag__meta_varlen_attention(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    varlen_args r;
    jag_status st = varlen_parse(op, args, nargs, 3, &r);
    if (st) return st;
    spec_like(&outs[0], r.t[0], 3);
    spec_like(&outs[1], r.t[0], 2);
    return JAG_OK;
}

// q (Rq, Hq, Dh), k and v (Rk, Hk, Dh), per-sequence rows -> out (Rq, Hq, Dh), lse (Rq, Hq)
jag_status jag__cpu_varlen_attention(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    varlen_args r;
    attn_args a;
    int64_t *seg = NULL;
    jag_status st = varlen_parse(op, args, nargs, 3, &r);
    if (!st) st = varlen_setup(op, &r, &seg, &a);
    if (!st && !queries_cover(&a, outs[0]->sizes[0])) {
        jag__fill(outs[0], 0.0); /* rows in holes */
        jag__fill(outs[1], -INFINITY);
    }
    if (!st) st = jag__attention_forward(&a, jag__ptr(outs[0]), jag__ptr(outs[1]));
    free(seg);
    return st;
}

jag_status jag__meta_varlen_attention_backward(const char *op, const jag_value *args, int nargs, jag_spec *outs) {
    varlen_args r;
    jag_status st = varlen_parse(op, args, nargs, 6, &r);
    if (st) return st;
    for (int i = 0; i < 3; i++) spec_like(&outs[i], r.t[i], 3);
    return JAG_OK;
}

// q, k, v, out, grad_out (rows, heads, Dh), lse (Rq, Hq) -> dq (Rq, Hq, Dh), dk and dv (Rk, Hk, Dh)
jag_status jag__cpu_varlen_attention_backward(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    varlen_args r;
    attn_args a;
    int64_t *seg = NULL;
    jag_tensor *lse = NULL;
    jag_status st = varlen_parse(op, args, nargs, 6, &r);
    if (!st) st = varlen_setup(op, &r, &seg, &a);
    jag_value c[] = {jag__v_tensor(r.t[5])};
    if (!st) st = jag__dispatch(JAG_OP_clone, c, 1, &lse); /* contiguous (Rq, Hq) */
    if (!st) {
        for (int i = 0; i < 3; i++) jag__fill(outs[i], 0.0);
        attn_view ov = view_of(r.t[3]), gv = view_of(r.t[4]);
        st = jag__attention_backward(&a, &ov, &gv, jag__ptr(lse), jag__ptr(outs[0]), jag__ptr(outs[1]), jag__ptr(outs[2]),
                                     NULL, seg + 4 * a.batch);
    }
    jag_release(lse);
    free(seg);
    return st;
}

/* varlen_attention's rule: varlen_attention_backward with the forward's
 * output and log-sum-exp (the lse output takes no gradient). */
jag_status jag__d_varlen_attention(const jag_grad_ctx *c, jag_tensor *const *grad_out, jag_tensor **grad_in) {
    const jag_value *x = c->args;
    jag_value a[] = {x[0], x[1], x[2], jag__v_tensor(c->outputs[0]), jag__v_tensor(grad_out[0]),
                     jag__v_tensor(c->outputs[1]), x[3], x[4], x[5], x[6], x[7], x[8]};
    jag_tensor *r[3] = {0};
    jag_status st = jag__dispatch(JAG_OP_varlen_attention_backward, a, 12, r);
    for (int i = 0; i < 3; i++) {
        if (!st && c->needs[i]) grad_in[i] = r[i];
        else jag_release(r[i]);
    }
    return st;
}
