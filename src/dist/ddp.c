/*
 * ddp.c — data-parallel gradient averaging (torch's DistributedDataParallel
 * reducer): parameters grouped into buckets in reverse order, rank 0's
 * values broadcast at creation. A post-accumulate-grad hook on every
 * parameter marks it ready during backward; a bucket whose parameters are
 * all ready is packed and its MPI_Iallreduce started while backward goes
 * on (buckets start in bucket order on every rank, as MPI needs); when the
 * last bucket has started the hook waits for all and writes the averages.
 * jag_ddp_sync_grads is the explicit path (after backward, or to finish a
 * step in which some parameters got no gradient).
 *
 * Half parameters (float16, bfloat16) are reduced in their own dtype, as
 * torch's DDP all-reduces bf16 / fp16 gradient buckets in the gradients'
 * dtype: the bucket travels as 2-byte values and jag_dist's half sum adds
 * each pair in float32 and rounds it once (comm.c). The average is the sum
 * divided by the world size in float32 and rounded once. (torch divides
 * each rank's gradient by the world size before the all-reduce, rounding
 * there too; jag divides after the sum, so the division rounds once, and a
 * float16 sum beyond 65504 becomes inf where torch's divided values might
 * not: bfloat16 has float32's range.)
 */
#include "dist_internal.h"

#include "../core/half.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JAG_DDP_LIVE 0x50444447u  /* "GDDP" */
#define JAG_DDP_DEFAULT_BUCKET ((size_t)25 << 20)

typedef struct ddp_bucket {
    jag_dtype dtype;
    int n;          /* parameters in it */
    int *index;     /* their indices into params (into ddp->order) */
    int64_t numel;  /* elements in all */
} ddp_bucket;

/* Where the overlapped averaging stands. */
typedef enum {
    DDP_IDLE,     /* gradients not tracked: jag_ddp_sync_grads averages all */
    DDP_IN_STEP,  /* hooks have marked parameters ready this step */
    DDP_AVERAGED, /* the hooks averaged every bucket; gradients are final */
} ddp_state;

typedef struct ddp_hook_ctx {
    struct jag_ddp *ddp;
    int index;
} ddp_hook_ctx;

struct jag_ddp {
    uint32_t magic;
    int n;
    jag_tensor **params; /* one reference each */
    int n_buckets;
    ddp_bucket *buckets;
    int *order;          /* storage for the buckets' index lists */
    int *bucket_of;      /* parameter -> its bucket */
    /* overlap: one hook per parameter that requires grad */
    int64_t *hook_ids;   /* 0: none */
    ddp_hook_ctx *hook_ctx;
    bool require_sync;
    ddp_state state;
    bool *ready;         /* parameter i has its gradient this step */
    int *pending;        /* per bucket: parameters not ready yet */
    int next_launch;     /* buckets [0, next_launch) are started */
    void **bufs;         /* per bucket: its packed gradients */
    MPI_Request *reqs;
    jag_status step_error; /* a gradient this rank could not pack */
    char step_message[512];
};

static jag_status check_param(const char *fn, jag_tensor *const *params, int i) {
    const jag_tensor *p = params[i];
    char arg[32];
    snprintf(arg, sizeof arg, "params[%d]", i);
    jag_status st = jag__check_live(fn, arg, p);
    if (st) return st;
    if (jag__is_subclass(p) || jag__is_meta(p))
        return jag__error(JAG_EINVAL, "%s: %s is a %s tensor; expected a plain tensor with data", fn, arg,
                          jag__is_meta(p) ? "meta" : jag_subclass_name(jag_tensor_subclass(p)));
    if (!jag_dtype_is_floating(p->dtype))
        return jag__error(JAG_EDTYPE, "%s: %s has dtype %s; expected float32, float64, float16 or bfloat16", fn, arg,
                          jag_dtype_name(p->dtype));
    if (!jag_is_contiguous(p) || jag__is_read_only(p))
        return jag__error(JAG_EINVAL, "%s: %s is %s; expected a contiguous, writable tensor", fn, arg,
                          jag_is_contiguous(p) ? "read-only" : "not contiguous");
    for (int j = 0; j < i; j++)
        if (params[j] == p) return jag__error(JAG_EINVAL, "%s: %s is params[%d] again; give each once", fn, arg, j);
    return JAG_OK;
}

/* Buckets over the parameters in reverse order: consecutive parameters of
 * one dtype while the bucket stays within cap bytes. */
static jag_status make_buckets(jag_ddp *d, size_t cap) {
    d->order = malloc(sizeof *d->order * (size_t)d->n);
    d->bucket_of = malloc(sizeof *d->bucket_of * (size_t)d->n);
    d->buckets = calloc((size_t)d->n, sizeof *d->buckets);
    if (!d->order || !d->buckets || !d->bucket_of) return jag__error(JAG_ENOMEM, "jag_ddp_new: out of memory");
    ddp_bucket *b = NULL;
    size_t bytes = 0;
    for (int k = 0; k < d->n; k++) {
        int i = d->n - 1 - k;
        jag_tensor *p = d->params[i];
        size_t pb = (size_t)jag_numel(p) * jag_dtype_size(p->dtype);
        if (!b || b->dtype != p->dtype || (bytes + pb > cap && b->n > 0)) {
            b = &d->buckets[d->n_buckets++];
            b->dtype = p->dtype;
            b->index = d->order + k;
            bytes = 0;
        }
        b->index[b->n++] = i;
        d->bucket_of[i] = (int)(b - d->buckets);
        b->numel += jag_numel(p);
        bytes += pb;
        if (b->numel > JAG_DIST_CHUNK)
            return jag__error(JAG_ENOTIMPL, "jag_ddp_new: a bucket of %lld elements (params[%d] in it); at most 2^30 "
                              "(MPI's counts): lower bucket_bytes", (long long)b->numel, i);
    }
    return JAG_OK;
}

static void ddp_destroy(jag_ddp *d) {
    for (int i = 0; d->hook_ids && i < d->n; i++)
        if (d->hook_ids[i]) jag_remove_post_accumulate_grad_hook(d->hook_ids[i]);
    /* reductions still in flight finish before their buffers go */
    if (d->reqs && d->next_launch) MPI_Waitall(d->next_launch, d->reqs, MPI_STATUSES_IGNORE);
    for (int b = 0; d->bufs && b < d->n_buckets; b++) free(d->bufs[b]);
    free(d->bufs), free(d->reqs), free(d->ready), free(d->pending), free(d->hook_ids), free(d->hook_ctx);
    free(d->bucket_of);
    if (d->params)
        for (int i = 0; i < d->n; i++) jag_release(d->params[i]);
    free(d->params);
    free(d->buckets);
    free(d->order);
    d->magic = JAG_HANDLE_FREED;
    /* kept a while, so that a second free is refused (as generators) */
    jag__handle_retire(d, free);
}

/* A gradient the averaging can use: a plain tensor with its parameter's
 * dtype and shape. */
static jag_status check_grad(const char *fn, const jag_tensor *prm, int i, const jag_tensor *g) {
    char pshape[JAG_SHAPE_BUF], gshape[JAG_SHAPE_BUF];
    if (jag__is_subclass(g))
        return jag__error(JAG_EINVAL, "%s: the gradient of params[%d] is a %s tensor; expected a plain tensor", fn, i,
                          jag_subclass_name(jag_tensor_subclass(g)));
    if (g->dtype != prm->dtype)
        return jag__error(JAG_EDTYPE, "%s: the gradient of params[%d] has dtype %s; expected %s (its parameter's)", fn, i,
                          jag_dtype_name(g->dtype), jag_dtype_name(prm->dtype));
    if (g->ndim != prm->ndim || memcmp(g->sizes, prm->sizes, sizeof(int64_t) * (size_t)g->ndim))
        return jag__error(JAG_ESHAPE, "%s: the gradient of params[%d] has shape %s; expected %s (its parameter's)", fn, i,
                          jag__shape_str(g->sizes, g->ndim, gshape, sizeof gshape),
                          jag__shape_str(prm->sizes, prm->ndim, pshape, sizeof pshape));
    return JAG_OK;
}

/* Bucket b's buffer: its gradients' elements, then one flag per parameter
 * (1 where this rank has the gradient), so that the sum also says which
 * parameters have a gradient on some rank. */
static size_t bucket_buf_bytes(const ddp_bucket *bk) {
    return ((size_t)bk->numel + (size_t)bk->n) * jag_dtype_size(bk->dtype);
}

/* Element e of a bucket buffer of dtype d, widened (float32 and the half
 * types to float32, exactly). */
static double buf_get(const void *buf, int64_t e, jag_dtype d) {
    switch (d) {
    case JAG_FLOAT32: return ((const float *)buf)[e];
    case JAG_FLOAT16: return jag__f16_to_f32(((const uint16_t *)buf)[e]);
    case JAG_BFLOAT16: return jag__bf16_to_f32(((const uint16_t *)buf)[e]);
    default: return ((const double *)buf)[e];
    }
}

/* Flag k of a bucket (after its elements): 1 where this rank has the
 * gradient. Small integers are exact in every float dtype. */
static void set_flag(void *buf, int64_t e, jag_dtype d, bool has) {
    switch (d) {
    case JAG_FLOAT32: ((float *)buf)[e] = has; break;
    case JAG_FLOAT16: ((uint16_t *)buf)[e] = jag__f32_to_f16(has); break;
    case JAG_BFLOAT16: ((uint16_t *)buf)[e] = jag__f32_to_bf16(has); break;
    default: ((double *)buf)[e] = has; break;
    }
}

/* dst[e] = src[e] / p for m elements of dtype d: float32 and the half
 * types divide in float32 (the half types then round once), float64 in
 * float64. */
static void divide_into(void *dst, const void *src, int64_t m, jag_dtype d, int p) {
    if (d == JAG_FLOAT32) {
        const float *s = src;
        float *o = dst;
        for (int64_t e = 0; e < m; e++) o[e] = s[e] / (float)p;
    } else if (d == JAG_FLOAT16 || d == JAG_BFLOAT16) {
        const uint16_t *s = src;
        uint16_t *o = dst;
        bool bf = d == JAG_BFLOAT16;
        for (int64_t e = 0; e < m; e++) {
            float v = (bf ? jag__bf16_to_f32(s[e]) : jag__f16_to_f32(s[e])) / (float)p;
            o[e] = bf ? jag__f32_to_bf16(v) : jag__f32_to_f16(v);
        }
    } else {
        const double *s = src;
        double *o = dst;
        for (int64_t e = 0; e < m; e++) o[e] = s[e] / (double)p;
    }
}

/* The summed buffers of every bucket become each parameter's gradient (the
 * average: the sum over the world size), for the parameters with a
 * gradient on some rank (flags; NULL: read the flags in the buffers). New
 * tensors are made first and swapped in only when all are made. */
static jag_status write_averages(jag_ddp *d, const char *fn, void *const *bufs, const int *flags) {
    int p = jag_dist_world_size();
    jag_tensor **fresh = calloc((size_t)d->n, sizeof *fresh);
    jag_status st = fresh ? JAG_OK : jag__error(JAG_ENOMEM, "%s: out of memory", fn);
    for (int b = 0; !st && b < d->n_buckets; b++) {
        const ddp_bucket *bk = &d->buckets[b];
        const char *at = bufs[b];
        for (int k = 0; !st && k < bk->n; k++) {
            int i = bk->index[k];
            jag_tensor *prm = d->params[i];
            int64_t m = jag_numel(prm);
            bool has = flags ? flags[1 + i] != 0 : buf_get(bufs[b], bk->numel + k, bk->dtype) > 0;
            if (has) {
                st = jag_empty(prm->sizes, prm->ndim, prm->dtype, &fresh[i]);
                if (!st) divide_into(jag__ptr(fresh[i]), at, m, bk->dtype, p);
            }
            at += (size_t)m * jag_dtype_size(bk->dtype);
        }
    }
    for (int i = 0; !st && i < d->n; i++) {
        if (!fresh[i]) continue;
        jag_tensor *old = d->params[i]->grad;
        d->params[i]->grad = fresh[i];
        fresh[i] = NULL;
        jag_release(old);
    }
    for (int i = 0; fresh && i < d->n; i++) jag_release(fresh[i]);
    free(fresh);
    return st;
}

/* Pack bucket b from the parameters' gradients (zeros where none; the
 * flags after them) and start its reduction. A gradient this rank cannot
 * use is packed as zeros and its error kept for the end of the step: the
 * exchange still happens, or the other ranks would wait for it forever. */
static jag_status launch_bucket(jag_ddp *d, int b, const char *fn) {
    const ddp_bucket *bk = &d->buckets[b];
    size_t esz = jag_dtype_size(bk->dtype);
    char *at = d->bufs[b];
    for (int k = 0; k < bk->n; k++) {
        int i = bk->index[k];
        jag_tensor *prm = d->params[i], *g = prm->grad, *c = NULL;
        size_t bytes = (size_t)jag_numel(prm) * esz;
        jag_status st = g ? check_grad(fn, prm, i, g) : JAG_OK;
        if (!st && g && !jag_is_contiguous(g) && !(st = jag_contiguous(g, &c))) g = c;
        if (st && !d->step_error) {
            d->step_error = st;
            snprintf(d->step_message, sizeof d->step_message, "%s", jag_last_error());
        }
        bool has = g && !st;
        if (has) memcpy(at, jag__ptr(g), bytes);
        else memset(at, 0, bytes);
        jag_release(c);
        at += bytes;
        set_flag(d->bufs[b], bk->numel + k, bk->dtype, has);
    }
    /* MPI's sum for float32 / float64, jag_dist's half sum for the half
     * types (in their own dtype, as torch's DDP reduces them) */
    int rc = MPI_Iallreduce(MPI_IN_PLACE, d->bufs[b], (int)(bk->numel + bk->n), jag__dist_mpi_type(bk->dtype),
                            jag__dist_mpi_op(JAG_REDUCE_SUM, bk->dtype), jag__dist_comm(), &d->reqs[b]);
    jag_status st = jag__dist_mpi_check(fn, "MPI_Iallreduce", rc);
    if (!st) d->next_launch = b + 1;
    return st;
}

/* Start the buckets not started yet, wait for all, write the averages. */
static jag_status finish_step(jag_ddp *d, const char *fn) {
    jag_status st = JAG_OK;
    while (!st && d->next_launch < d->n_buckets) st = launch_bucket(d, d->next_launch, fn);
    if (d->next_launch) {
        int rc = MPI_Waitall(d->next_launch, d->reqs, MPI_STATUSES_IGNORE);
        if (!st) st = jag__dist_mpi_check(fn, "MPI_Waitall", rc);
    }
    d->next_launch = 0;
    if (!st && d->step_error) st = jag__error(d->step_error, "%s", d->step_message);
    if (!st) st = write_averages(d, fn, d->bufs, NULL);
    d->step_error = JAG_OK;
    d->state = st ? DDP_IDLE : DDP_AVERAGED;
    return st;
}

/* The hook on params[index]: its gradient of this backward is final. */
static jag_status ddp_grad_hook(jag_tensor *leaf, void *ctx) {
    (void)leaf;
    const char *fn = "jag_ddp (gradient hook during backward)";
    ddp_hook_ctx *h = ctx;
    jag_ddp *d = h->ddp;
    if (!d->require_sync) { /* accumulating: the next sync averages all */
        if (d->state == DDP_AVERAGED) d->state = DDP_IDLE;
        return JAG_OK;
    }
    if (d->state != DDP_IN_STEP) {
        for (int i = 0; i < d->n; i++) d->ready[i] = false;
        for (int b = 0; b < d->n_buckets; b++) d->pending[b] = 0;
        for (int i = 0; i < d->n; i++) d->pending[d->bucket_of[i]] += d->hook_ids[i] != 0;
        d->next_launch = 0;
        d->step_error = JAG_OK;
        d->state = DDP_IN_STEP;
    }
    int i = h->index;
    if (d->ready[i])
        return jag__error(JAG_ESTATE, "%s: params[%d] got a second gradient before this step's gradients were averaged; "
                          "after a backward in which some parameter got no gradient call jag_ddp_sync_grads, and "
                          "accumulate over several backward passes with jag_ddp_set_require_sync(ddp, false)", fn, i);
    d->ready[i] = true;
    d->pending[d->bucket_of[i]]--;
    /* start every bucket that is complete, in bucket order (the same order
     * on every rank, whatever order backward finishes them in) */
    jag_status st = JAG_OK;
    while (!st && d->next_launch < d->n_buckets && d->pending[d->next_launch] == 0)
        st = launch_bucket(d, d->next_launch, fn);
    if (st) return st;
    if (d->next_launch == d->n_buckets) return finish_step(d, fn);
    if (d->next_launch) { /* let MPI move the started buckets along */
        int done = 0;
        MPI_Testall(d->next_launch, d->reqs, &done, MPI_STATUSES_IGNORE);
    }
    return JAG_OK;
}

/* The buffers and the hooks of the overlapped averaging. */
static jag_status setup_overlap(jag_ddp *d, const char *fn) {
    d->ready = calloc((size_t)d->n, sizeof *d->ready);
    d->pending = calloc((size_t)d->n_buckets, sizeof *d->pending);
    d->bufs = calloc((size_t)d->n_buckets, sizeof *d->bufs);
    d->reqs = calloc((size_t)d->n_buckets, sizeof *d->reqs);
    d->hook_ids = calloc((size_t)d->n, sizeof *d->hook_ids);
    d->hook_ctx = calloc((size_t)d->n, sizeof *d->hook_ctx);
    if (!d->ready || !d->pending || !d->bufs || !d->reqs || !d->hook_ids || !d->hook_ctx)
        return jag__error(JAG_ENOMEM, "%s: out of memory", fn);
    for (int b = 0; b < d->n_buckets; b++)
        if (!(d->bufs[b] = malloc(bucket_buf_bytes(&d->buckets[b]))))
            return jag__error(JAG_ENOMEM, "%s: out of memory for bucket %d", fn, b);
    d->require_sync = true;
    d->state = DDP_IDLE;
    for (int i = 0; i < d->n; i++) {
        jag_tensor *p = d->params[i];
        if (!jag_requires_grad(p) || !jag_is_leaf(p)) continue;
        d->hook_ctx[i] = (ddp_hook_ctx){d, i};
        jag_status st = jag_register_post_accumulate_grad_hook(p, ddp_grad_hook, &d->hook_ctx[i], NULL, &d->hook_ids[i]);
        if (st) return st;
    }
    return JAG_OK;
}

jag_status jag_ddp_new(jag_tensor *const *params, int n, size_t bucket_bytes, jag_ddp **out) {
    const char *fn = "jag_ddp_new";
    jag_status st = jag__dist_require_init(fn);
    if (st) return st;
    if (!out) st = jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", fn);
    if (!st && (n < 1 || !params))
        st = jag__error(JAG_EINVAL, "%s: argument 'n' is %d (params %s); expected at least one parameter", fn, n,
                        params ? "given" : "NULL");
    for (int i = 0; !st && i < n; i++) st = check_param(fn, params, i);
    jag_ddp *d = NULL;
    if (!st) {
        d = calloc(1, sizeof *d);
        if (d) d->params = calloc((size_t)n, sizeof *d->params);
        if (!d || !d->params) st = jag__error(JAG_ENOMEM, "%s: out of memory", fn);
    }
    if (!st) {
        d->magic = JAG_DDP_LIVE, d->n = n;
        for (int i = 0; i < n; i++) d->params[i] = jag_retain(params[i]);
        st = make_buckets(d, bucket_bytes ? bucket_bytes : JAG_DDP_DEFAULT_BUCKET);
    }
    /* the ranks agree on the parameter list: count, total elements and a
     * checksum of the shapes and dtypes (unsigned arithmetic wraps; kept
     * to 62 bits, so that the exchange can negate it) */
    int64_t total = 0;
    uint64_t shape_sum = 0;
    for (int i = 0; !st && i < n; i++) {
        total += jag_numel(params[i]);
        shape_sum = shape_sum * 1000003u + (uint64_t)params[i]->dtype;
        for (int k = 0; k < params[i]->ndim; k++) shape_sum = shape_sum * 31u + (uint64_t)params[i]->sizes[k];
    }
    jag_dist_field f[] = {{"parameter count", st ? -1 : n, JAG_ESHAPE},
                          {"total parameter elements", total, JAG_ESHAPE},
                          {"checksum of the parameters' shapes and dtypes", (int64_t)(shape_sum >> 2), JAG_ESHAPE}};
    st = jag__dist_agree(fn, st, f, 3);
    /* the replicas start from rank 0's values */
    for (int i = 0; !st && i < n; i++) st = jag_dist_broadcast(d->params[i], 0);
    if (!st) st = setup_overlap(d, fn);
    if (st) {
        if (d) ddp_destroy(d);
        return st;
    }
    *out = d;
    return JAG_OK;
}

static jag_status check_ddp(const char *fn, const jag_ddp *d) {
    if (!d) return jag__error(JAG_EINVAL, "%s: argument 'ddp' is NULL", fn);
    if (d->magic != JAG_DDP_LIVE) return jag__error(JAG_EINVAL, "%s: argument 'ddp' was freed", fn);
    return JAG_OK;
}

jag_status jag_ddp_sync_grads(jag_ddp *d) {
    const char *fn = "jag_ddp_sync_grads";
    jag_status st = check_ddp(fn, d);
    if (!st) st = jag__dist_require_init(fn);
    if (st) return st;
    if (d->state == DDP_IN_STEP) return finish_step(d, fn); /* some buckets wait for it */
    if (d->state == DDP_AVERAGED) return JAG_OK;             /* backward averaged them all */
    int n = d->n;
    /* flags[0]: this rank failed; flags[1 + i]: parameter i has a gradient */
    int *flags = calloc((size_t)n + 1, sizeof *flags);
    jag_tensor **grads = calloc((size_t)n, sizeof *grads);
    MPI_Request *reqs = d->reqs;
    if (!flags || !grads) st = jag__error(JAG_ENOMEM, "%s: out of memory", fn);
    for (int i = 0; !st && i < n; i++) {
        st = jag_get_grad(d->params[i], &grads[i]);
        if (st || !grads[i]) continue;
        st = check_grad(fn, d->params[i], i, grads[i]);
        /* a strided gradient is read through a contiguous copy, made
         * now: nothing may fail once the exchanges begin */
        if (!st && !jag_is_contiguous(grads[i])) {
            jag_tensor *c = NULL;
            if (!(st = jag_contiguous(grads[i], &c))) jag_release(grads[i]), grads[i] = c;
        }
        flags[1 + i] = 1;
    }
    /* one exchange: did any rank fail, and which parameters have a
     * gradient anywhere */
    if (flags) {
        flags[0] = st != JAG_OK;
        char saved[512] = "";
        if (st) snprintf(saved, sizeof saved, "%s", jag_last_error());
        int rc = MPI_Allreduce(MPI_IN_PLACE, flags, n + 1, MPI_INT, MPI_MAX, jag__dist_comm());
        if (st) jag__error(st, "%s", saved);
        else if (rc != MPI_SUCCESS) st = jag__dist_mpi_check(fn, "MPI_Allreduce", rc);
        else if (flags[0])
            st = jag__error(JAG_EINVAL, "%s: another rank refused its gradients (see its error); nothing changed", fn);
    }
    /* pack bucket b and start its reduction before packing the next */
    int started = 0;
    for (int b = 0; !st && b < d->n_buckets; b++) {
        const ddp_bucket *bk = &d->buckets[b];
        size_t esz = jag_dtype_size(bk->dtype);
        char *at = d->bufs[b];
        for (int k = 0; k < bk->n; k++) {
            int i = bk->index[k];
            size_t bytes = (size_t)jag_numel(d->params[i]) * esz;
            if (grads[i]) memcpy(at, jag__ptr(grads[i]), bytes);
            else memset(at, 0, bytes);
            at += bytes;
        }
        int rc = MPI_Iallreduce(MPI_IN_PLACE, d->bufs[b], (int)bk->numel, jag__dist_mpi_type(bk->dtype),
                                jag__dist_mpi_op(JAG_REDUCE_SUM, bk->dtype), jag__dist_comm(), &reqs[b]);
        if ((st = jag__dist_mpi_check(fn, "MPI_Iallreduce", rc))) break;
        started++;
    }
    if (started) {
        int rc = MPI_Waitall(started, reqs, MPI_STATUSES_IGNORE);
        if (!st) st = jag__dist_mpi_check(fn, "MPI_Waitall", rc);
    }
    if (!st) st = write_averages(d, fn, d->bufs, flags);
    for (int i = 0; grads && i < n; i++) jag_release(grads[i]);
    free(flags), free(grads);
    return st;
}

jag_status jag_ddp_set_require_sync(jag_ddp *d, bool require_sync) {
    jag_status st = check_ddp("jag_ddp_set_require_sync", d);
    if (st) return st;
    d->require_sync = require_sync;
    return JAG_OK;
}

int jag_ddp_num_buckets(const jag_ddp *d) { return check_ddp("jag_ddp_num_buckets", d) ? -1 : d->n_buckets; }

jag_status jag_ddp_bucket_params(const jag_ddp *d, int b, const int **indices, int *n_out) {
    const char *fn = "jag_ddp_bucket_params";
    jag_status st = check_ddp(fn, d);
    if (st) return st;
    if (!indices || !n_out) return jag__error(JAG_EINVAL, "%s: argument 'indices' or 'n_out' is NULL", fn);
    if (b < 0 || b >= d->n_buckets)
        return jag__error(JAG_ERANGE, "%s: argument 'b' is %d; expected a bucket in [0, %d)", fn, b, d->n_buckets);
    *indices = d->buckets[b].index;
    *n_out = d->buckets[b].n;
    return JAG_OK;
}

jag_status jag_ddp_free(jag_ddp *d) {
    if (!d) return JAG_OK;
    jag_status st = check_ddp("jag_ddp_free", d);
    if (st) return st;
    ddp_destroy(d);
    return JAG_OK;
}
