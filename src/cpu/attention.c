/* attention.c — scaled dot-product attention over variable-length
 * sequences, forward and backward, never building the (Lq, Lk) matrix.
 *
 * Layout: q (Rq, Hq, Dh), k and v (Rk, Hk, Dh) as rows of packed sequences
 * (any strides): sequence b's queries are rows [qo[b], qo[b] + ql[b]) and its
 * keys rows [ko[b], ko[b] + kl[b]). Hq is a multiple of Hk (grouped-query
 * attention: query head h reads key/value head h / (Hq / Hk)). Outputs:
 * out (Rq, Hq, Dh) contiguous and lse (Rq, Hq), the log-sum-exp of each
 * query's scores (saved for backward). Causal: query i sees keys j <= i
 * (top-left aligned, as torch). A query that sees no key gets 0 and lse
 * -inf.
 *
 * Forward: an online softmax over key blocks (flash-attention's
 * recurrence): running max m, running sum l and an accumulator of p * v,
 * rescaled when the max grows. float32 with contiguous head dims runs tiles
 * of queries x keys on sgemm (split across threads by (sequence, head,
 * query tile)); everything else one query at a time in double, split by
 * (sequence, head). */
#include "attention.h"
#include "vecmath.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define KEY_BLOCK 64

static inline double ld(const char *base, bool f64, int64_t off) {
    return f64 ? ((const double *)base)[off] : (double)((const float *)base)[off];
}

/* the additive mask of (b, h, query i, key j), 0 without one */
static inline double mask_at(const attn_args *a, int64_t b, int64_t h, int64_t i, int64_t j) {
    return a->mbase ? ld(a->mbase, a->f64, a->mo[b] + h * a->mh[b] + i * a->mi[b] + j * a->mj[b]) : 0.0;
}

/* dot(q row, k row) over Dh with element strides */
static inline double dot(const attn_view *a, int64_t ra, int64_t ha, const attn_view *b, int64_t rb, int64_t hb,
                         int64_t dh, bool f64) {
    double s = 0;
    int64_t oa = ra * a->sr + ha * a->sh, ob = rb * b->sr + hb * b->sh;
    for (int64_t d = 0; d < dh; d++) s += ld(a->base, f64, oa + d * a->sd) * ld(b->base, f64, ob + d * b->sd);
    return s;
}

/* Naive reference (tests compare the kernel with it): the (Lq, Lk) scores of
 * one (sequence, head) built in full, softmax, product with v. */
void jag__ref_attention(const attn_args *a, char *out, double *lse) {
    bool f64 = a->f64;
    int64_t group = a->hq / a->hk;
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t h = 0; h < a->hq; h++) {
            int64_t kh = h / group, lq = a->ql[b], lk = a->kl[b];
            double *s = malloc((size_t)(lk ? lk : 1) * sizeof *s);
            for (int64_t i = 0; i < lq; i++) {
                int64_t ri = a->qo[b] + i, nk = a->causal ? (i + 1 < lk ? i + 1 : lk) : lk;
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < nk; j++) {
                    s[j] = a->scale * dot(&a->q, ri, h, &a->k, a->ko[b] + j, kh, a->dh, f64) + mask_at(a, b, h, i, j);
                    m = fmax(m, s[j]);
                }
                if (m == -INFINITY) nk = 0; /* every key masked out */
                for (int64_t j = 0; j < nk; j++) l += exp(s[j] - m);
                for (int64_t d = 0; d < a->dh; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < nk; j++)
                        acc += exp(s[j] - m) / l * ld(a->v.base, f64, (a->ko[b] + j) * a->v.sr + kh * a->v.sh + d * a->v.sd);
                    int64_t o = (ri * a->hq + h) * a->dh + d;
                    if (f64) ((double *)out)[o] = nk ? acc : 0;
                    else ((float *)out)[o] = nk ? (float)acc : 0;
                }
                lse[ri * a->hq + h] = nk ? m + log(l) : -INFINITY;
            }
            free(s);
        }
}

/* The float32 fast path, tiled (flash-attention's forward): a tile of TQ
 * query rows against tiles of TK keys. S = scale Q K^T is one sgemm on the
 * operands' own rows (head dims contiguous), the causal part of a diagonal
 * tile is set to -inf, each row's running max m and sum l are updated with
 * the vectorised exp (P = exp(S - m) in place), the accumulator is rescaled
 * by exp(m_old - m_new) per row and acc += P V is a second sgemm. The
 * (Lq, Lk) matrix never exists: only a (TQ, TK) tile per thread. */
#define TQ 64
#define TK 128

// q rows [qo + i0, qo + i0 + nq) of head h, k/v rows of head kh -> out rows (Rq, Hq, Dh), lse (Rq, Hq)
static void forward_f32_tile(const attn_args *a, int64_t b, int64_t h, int64_t i0, int64_t nq, float *out, float *lse_out,
                             float *S, float *acc, float *m, float *l) {
    int64_t kh = h / (a->hq / a->hk), lk = a->kl[b], dh = a->dh;
    const float *qb = (const float *)a->q.base, *kb = (const float *)a->k.base, *vb = (const float *)a->v.base;
    const float *Q = qb + (a->qo[b] + i0) * a->q.sr + h * a->q.sh;
    int64_t kend = a->causal ? (i0 + nq < lk ? i0 + nq : lk) : lk;
    for (int64_t i = 0; i < nq; i++) m[i] = -INFINITY, l[i] = 0;
    memset(acc, 0, (size_t)(nq * dh) * sizeof *acc);
    for (int64_t j0 = 0; j0 < kend; j0 += TK) {
        int64_t nb = kend - j0 < TK ? kend - j0 : TK;
        const float *K = kb + (a->ko[b] + j0) * a->k.sr + kh * a->k.sh, *V = vb + (a->ko[b] + j0) * a->v.sr + kh * a->v.sh;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)nq, (blasint)nb, (blasint)dh, (float)a->scale, Q,
                    (blasint)a->q.sr, K, (blasint)a->k.sr, 0.0f, S, TK);
        if (a->mbase) /* the additive mask */
            for (int64_t i = 0; i < nq; i++) {
                const float *mb = (const float *)a->mbase + a->mo[b] + h * a->mh[b] + (i0 + i) * a->mi[b] + j0 * a->mj[b];
                float *srow = S + i * TK;
                int64_t mj = a->mj[b];
                for (int64_t j = 0; j < nb; j++) srow[j] += mb[j * mj];
            }
        for (int64_t i = 0; i < nq; i++) {
            float *srow = S + i * TK;
            if (a->causal && j0 + nb - 1 > i0 + i) /* keys after query i0 + i are hidden */
                for (int64_t j = i0 + i + 1 - j0 < 0 ? 0 : i0 + i + 1 - j0; j < nb; j++) srow[j] = -INFINITY;
            float bm = -INFINITY;
#pragma omp simd reduction(max : bm)
            for (int64_t j = 0; j < nb; j++) bm = srow[j] > bm ? srow[j] : bm;
            float mn = bm > m[i] ? bm : m[i];
            if (mn == -INFINITY) { /* nothing visible yet */
                for (int64_t j = 0; j < nb; j++) srow[j] = 0;
                continue;
            }
            if (mn > m[i]) {
                float r = jag__vm_exp_f32(m[i] - mn);
                l[i] *= r;
                float *arow = acc + i * dh;
#pragma omp simd
                for (int64_t d = 0; d < dh; d++) arow[d] *= r;
                m[i] = mn;
            }
            float sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < nb; j++) {
                float p = jag__vm_exp_f32(srow[j] - mn);
                srow[j] = p;
                sum += p;
            }
            l[i] += sum;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)nq, (blasint)dh, (blasint)nb, 1.0f, S, TK, V,
                    (blasint)a->v.sr, 1.0f, acc, (blasint)dh);
    }
    for (int64_t i = 0; i < nq; i++) {
        int64_t ri = a->qo[b] + i0 + i, nk = a->causal ? (i0 + i + 1 < lk ? i0 + i + 1 : lk) : lk;
        float inv = nk && l[i] > 0 ? 1.0f / l[i] : 0.0f;
        float *orow = out + (ri * a->hq + h) * dh, *arow = acc + i * dh;
#pragma omp simd
        for (int64_t d = 0; d < dh; d++) orow[d] = arow[d] * inv;
        lse_out[ri * a->hq + h] = nk && l[i] > 0 ? m[i] + logf(l[i]) : -INFINITY;
    }
}

// q (Rq, Hq, Dh), k/v (Rk, Hk, Dh) -> out (Rq, Hq, Dh), lse (Rq, Hq)
jag_status jag__attention_forward(const attn_args *a, char *out, char *lse_out) {
    bool f64 = a->f64, failed = false;
    int64_t dh = a->dh;
    bool rows_ok = a->q.sr >= (dh ? dh : 1) && a->k.sr >= (dh ? dh : 1) && a->v.sr >= (dh ? dh : 1);
    if (!f64 && a->q.sd == 1 && a->k.sd == 1 && a->v.sd == 1 && rows_ok && dh > 0) {
        /* tasks: (sequence, head, tile of queries), longest sequences first in the order they come */
        int64_t tiles = 0, *first = malloc((size_t)(a->batch + 1) * sizeof *first);
        if (!first) return jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention: out of memory");
        for (int64_t b = 0; b < a->batch; b++) first[b] = tiles, tiles += (a->ql[b] + TQ - 1) / TQ;
        first[a->batch] = tiles;
        int64_t tasks = tiles * a->hq;
#pragma omp parallel
        {
            float *S = malloc((size_t)(TQ * TK + TQ * dh + 2 * TQ) * sizeof *S);
            if (!S) {
#pragma omp atomic write
                failed = true;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < tasks; t++) {
                if (!S) continue;
                int64_t tile = t / a->hq, h = t % a->hq, lo = 0, hi = a->batch;
                while (hi - lo > 1) { /* the sequence holding this tile */
                    int64_t mid = (lo + hi) / 2;
                    if (first[mid] <= tile) lo = mid;
                    else hi = mid;
                }
                while (lo + 1 < a->batch && first[lo + 1] <= tile) lo++;
                int64_t i0 = (tile - first[lo]) * TQ, nq = a->ql[lo] - i0 < TQ ? a->ql[lo] - i0 : TQ;
                float *acc = S + TQ * TK, *m = acc + TQ * dh, *l = m + TQ;
                forward_f32_tile(a, lo, h, i0, nq, (float *)out, (float *)lse_out, S, acc, m, l);
            }
            free(S);
        }
        free(first);
        return failed ? jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention: out of memory") : JAG_OK;
    }
    int64_t group = a->hq / a->hk, tasks = a->batch * a->hq;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t b = t / a->hq, h = t % a->hq, kh = h / group, lq = a->ql[b], lk = a->kl[b];
        double *acc = malloc((size_t)(dh ? dh : 1) * sizeof *acc), s[KEY_BLOCK];
        if (!acc) {
#pragma omp atomic write
            failed = true;
        }
        for (int64_t i = 0; acc && i < lq; i++) {
            int64_t ri = a->qo[b] + i, nk = a->causal ? (i + 1 < lk ? i + 1 : lk) : lk;
            double m = -INFINITY, l = 0;
            for (int64_t d = 0; d < dh; d++) acc[d] = 0;
            for (int64_t j0 = 0; j0 < nk; j0 += KEY_BLOCK) {
                int64_t nb = nk - j0 < KEY_BLOCK ? nk - j0 : KEY_BLOCK;
                double bm = -INFINITY;
                for (int64_t j = 0; j < nb; j++) {
                    s[j] = a->scale * dot(&a->q, ri, h, &a->k, a->ko[b] + j0 + j, kh, dh, f64) + mask_at(a, b, h, i, j0 + j);
                    bm = fmax(bm, s[j]);
                }
                if (bm == -INFINITY) continue; /* nothing visible in this block */
                if (bm > m) { /* rescale what was accumulated under the old max */
                    double r = exp(m - bm);
                    l *= r;
                    for (int64_t d = 0; d < dh; d++) acc[d] *= r;
                    m = bm;
                }
                for (int64_t j = 0; j < nb; j++) {
                    double p = exp(s[j] - m);
                    l += p;
                    int64_t vo = (a->ko[b] + j0 + j) * a->v.sr + kh * a->v.sh;
                    for (int64_t d = 0; d < dh; d++) acc[d] += p * ld(a->v.base, f64, vo + d * a->v.sd);
                }
            }
            for (int64_t d = 0; d < dh; d++) {
                int64_t o = (ri * a->hq + h) * dh + d;
                double val = nk && l > 0 ? acc[d] / l : 0;
                if (f64) ((double *)out)[o] = val;
                else ((float *)out)[o] = (float)val;
            }
            double lse = nk && l > 0 ? m + log(l) : -INFINITY;
            if (f64) ((double *)lse_out)[ri * a->hq + h] = lse;
            else ((float *)lse_out)[ri * a->hq + h] = (float)lse;
        }
        free(acc);
    }
    return failed ? jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention: out of memory") : JAG_OK;
}

/* Backward, split by (sequence, key/value head) so that dk and dv rows are
 * written by one thread: for every query i of every query head in the
 * group, with P_ij = exp(s_ij - lse_i), D_i = dO_i . O_i, dP_ij = dO_i . v_j:
 *   dS_ij = P_ij (dP_ij - D_i)
 *   dq_i += scale sum_j dS_ij k_j,  dk_j += scale dS_ij q_i,  dv_j += P_ij dO_i
 * dq, dk, dv are contiguous (R, H, Dh), zeroed by the caller. */
jag_status jag__attention_backward(const attn_args *a, const attn_view *o, const attn_view *go, const char *lse,
                                   char *dq, char *dk, char *dv, char *dmask, const int64_t *fo) {
    bool f64 = a->f64, failed = false;
    int64_t group = a->hq / a->hk, dh = a->dh, tasks = a->batch * a->hk;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t b = t / a->hk, kh = t % a->hk, lq = a->ql[b], lk = a->kl[b];
        double *dkb = calloc((size_t)(lk * dh + 1), sizeof *dkb), *dvb = calloc((size_t)(lk * dh + 1), sizeof *dvb);
        double *dqr = malloc((size_t)(dh + 1) * sizeof *dqr);
        if (!dkb || !dvb || !dqr) {
            free(dkb), free(dvb), free(dqr);
#pragma omp atomic write
            failed = true;
            continue;
        }
        for (int64_t h = kh * group; h < (kh + 1) * group; h++)
            for (int64_t i = 0; i < lq; i++) {
                int64_t ri = a->qo[b] + i, nk = a->causal ? (i + 1 < lk ? i + 1 : lk) : lk;
                double li = ld(lse, f64, ri * a->hq + h);
                if (!nk || !isfinite(li)) continue;
                double di = dot(go, ri, h, o, ri, h, dh, f64);
                for (int64_t d = 0; d < dh; d++) dqr[d] = 0;
                for (int64_t j = 0; j < nk; j++) {
                    int64_t rj = a->ko[b] + j;
                    double s = a->scale * dot(&a->q, ri, h, &a->k, rj, kh, dh, f64) + mask_at(a, b, h, i, j), p = exp(s - li);
                    double dp = dot(go, ri, h, &a->v, rj, kh, dh, f64), ds = p * (dp - di);
                    if (dmask) { /* the score's gradient is the mask's */
                        int64_t x = fo[b] + (h * lq + i) * lk + j;
                        if (f64) ((double *)dmask)[x] = ds;
                        else ((float *)dmask)[x] = (float)ds;
                    }
                    int64_t ko = rj * a->k.sr + kh * a->k.sh, qo = ri * a->q.sr + h * a->q.sh, gof = ri * go->sr + h * go->sh;
                    for (int64_t d = 0; d < dh; d++) {
                        dqr[d] += a->scale * ds * ld(a->k.base, f64, ko + d * a->k.sd);
                        dkb[j * dh + d] += a->scale * ds * ld(a->q.base, f64, qo + d * a->q.sd);
                        dvb[j * dh + d] += p * ld(go->base, f64, gof + d * go->sd);
                    }
                }
                for (int64_t d = 0; d < dh; d++) {
                    int64_t x = (ri * a->hq + h) * dh + d;
                    if (f64) ((double *)dq)[x] = dqr[d];
                    else ((float *)dq)[x] = (float)dqr[d];
                }
            }
        for (int64_t j = 0; j < lk; j++)
            for (int64_t d = 0; d < dh; d++) {
                int64_t x = ((a->ko[b] + j) * a->hk + kh) * dh + d;
                if (f64) ((double *)dk)[x] = dkb[j * dh + d], ((double *)dv)[x] = dvb[j * dh + d];
                else ((float *)dk)[x] = (float)dkb[j * dh + d], ((float *)dv)[x] = (float)dvb[j * dh + d];
            }
        free(dkb), free(dvb), free(dqr);
    }
    return failed ? jag__error(JAG_ENOMEM, "jag_scaled_dot_product_attention backward: out of memory") : JAG_OK;
}
