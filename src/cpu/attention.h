/*
 * attention.h — the variable-length attention kernels (attention.c) and what
 * the op glue (src/dispatch/attention_op.c) passes them.
 */
#ifndef JAG_ATTENTION_H
#define JAG_ATTENTION_H

#include "../core/internal.h"

/* rows x heads x dims, element strides; base is the typed address of
 * element (0, 0, 0) */
typedef struct attn_view {
    const char *base;
    int64_t sr, sh, sd;
} attn_view;

typedef struct attn_args {
    bool f64; /* float64, else float32 (every tensor has the same dtype) */
    int64_t batch, hq, hk, dh;
    const int64_t *qo, *ql, *ko, *kl; /* per sequence: first row and row count */
    attn_view q, k, v;
    bool causal;
    double scale;
    /* optional additive mask (mbase NULL: none), a's dtype: the score of
     * (sequence b, head h, query i, key j) gets mbase[mo[b] + h mh[b] +
     * i mi[b] + j mj[b]] added (strides 0 broadcast) */
    const char *mbase;
    const int64_t *mo, *mh, *mi, *mj;
} attn_args;

/* out (Rq, Hq, Dh) and lse (Rq, Hq) contiguous, a->f64's dtype. Returns
 * JAG_ENOMEM (with the error set) when scratch memory runs out. */
jag_status jag__attention_forward(const attn_args *a, char *out, char *lse);
/* o / go: the forward's output and its gradient (views like q); dq (Rq, Hq,
 * Dh), dk and dv (Rk, Hk, Dh) contiguous, zeroed by the caller. dmask (may
 * be NULL): the scores' gradient, item b's (Hq, Lq_b, Lk_b) block
 * contiguous from element fo[b], zeroed by the caller. */
jag_status jag__attention_backward(const attn_args *a, const attn_view *o, const attn_view *go, const char *lse,
                                   char *dq, char *dk, char *dv, char *dmask, const int64_t *fo);
/* The naive references: full score matrices, in double. The forward's lse
 * is double; the backward recomputes the forward from q, k, v and takes go,
 * its dq, dk, dv (zeroed by the caller) and dmask are double, laid out as
 * jag__attention_backward's. */
void jag__ref_attention(const attn_args *a, char *out, double *lse);
void jag__ref_attention_backward(const attn_args *a, const attn_view *go, double *dq, double *dk, double *dv, double *dmask,
                                 const int64_t *fo);
/* Tests set this to run the float32 tiles' products on BLAS where the
 * AVX-512 tile kernel is built in, so that both stay tested on one machine
 * (without AVX-512 they always run on BLAS). */
extern bool jag__attention_blas_tiles;

#endif /* JAG_ATTENTION_H */
