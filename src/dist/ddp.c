/*
 * ddp.c — data-parallel gradient averaging (torch's DistributedDataParallel
 * reducer, without autograd hooks): parameters grouped into buckets in
 * reverse order, rank 0's values broadcast at creation, and after backward
 * one MPI_Iallreduce per bucket, each started as soon as it is packed.
 */
#include "dist_internal.h"

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

struct jag_ddp {
    uint32_t magic;
    int n;
    jag_tensor **params; /* one reference each */
    int n_buckets;
    ddp_bucket *buckets;
    int *order;          /* storage for the buckets' index lists */
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
        return jag__error(JAG_EDTYPE, "%s: %s has dtype %s; expected float32 or float64", fn, arg,
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
    d->buckets = calloc((size_t)d->n, sizeof *d->buckets);
    if (!d->order || !d->buckets) return jag__error(JAG_ENOMEM, "jag_ddp_new: out of memory");
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
        b->numel += jag_numel(p);
        bytes += pb;
        if (b->numel > JAG_DIST_CHUNK)
            return jag__error(JAG_ENOTIMPL, "jag_ddp_new: a bucket of %lld elements (params[%d] in it); at most 2^30 "
                              "(MPI's counts): lower bucket_bytes", (long long)b->numel, i);
    }
    return JAG_OK;
}

static void ddp_destroy(jag_ddp *d) {
    if (d->params)
        for (int i = 0; i < d->n; i++) jag_release(d->params[i]);
    free(d->params);
    free(d->buckets);
    free(d->order);
    d->magic = JAG_HANDLE_FREED;
    /* kept a while, so that a second free is refused (as generators) */
    jag__handle_retire(d, free);
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
     * checksum of the shapes and dtypes */
    int64_t total = 0, shape_sum = 0;
    for (int i = 0; !st && i < n; i++) {
        total += jag_numel(params[i]);
        shape_sum = shape_sum * 1000003 + params[i]->dtype;
        for (int k = 0; k < params[i]->ndim; k++) shape_sum = shape_sum * 31 + params[i]->sizes[k];
    }
    jag_dist_field f[] = {{"parameter count", st ? -1 : n, JAG_ESHAPE},
                          {"total parameter elements", total, JAG_ESHAPE},
                          {"checksum of the parameters' shapes and dtypes", shape_sum, JAG_ESHAPE}};
    st = jag__dist_agree(fn, st, f, 3);
    /* the replicas start from rank 0's values */
    for (int i = 0; !st && i < n; i++) st = jag_dist_broadcast(d->params[i], 0);
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
    int n = d->n, p = jag_dist_world_size();
    /* flags[0]: this rank failed; flags[1 + i]: parameter i has a gradient */
    int *flags = calloc((size_t)n + 1, sizeof *flags);
    jag_tensor **grads = calloc((size_t)n, sizeof *grads), **fresh = calloc((size_t)n, sizeof *fresh);
    void **bufs = calloc((size_t)d->n_buckets, sizeof *bufs);
    MPI_Request *reqs = malloc(sizeof *reqs * (size_t)d->n_buckets);
    if (!flags || !grads || !fresh || !bufs || !reqs) st = jag__error(JAG_ENOMEM, "%s: out of memory", fn);
    for (int i = 0; !st && i < n; i++) {
        st = jag_get_grad(d->params[i], &grads[i]);
        jag_tensor *g = grads[i], *prm = d->params[i];
        if (st || !g) continue;
        char pshape[JAG_SHAPE_BUF], gshape[JAG_SHAPE_BUF];
        if (jag__is_subclass(g))
            st = jag__error(JAG_EINVAL, "%s: the gradient of params[%d] is a %s tensor; expected a plain tensor", fn,
                            i, jag_subclass_name(jag_tensor_subclass(g)));
        else if (g->dtype != prm->dtype)
            st = jag__error(JAG_EDTYPE, "%s: the gradient of params[%d] has dtype %s; expected %s (its parameter's)",
                            fn, i, jag_dtype_name(g->dtype), jag_dtype_name(prm->dtype));
        else if (g->ndim != prm->ndim || memcmp(g->sizes, prm->sizes, sizeof(int64_t) * (size_t)g->ndim))
            st = jag__error(JAG_ESHAPE, "%s: the gradient of params[%d] has shape %s; expected %s (its parameter's)",
                            fn, i, jag__shape_str(g->sizes, g->ndim, gshape, sizeof gshape),
                            jag__shape_str(prm->sizes, prm->ndim, pshape, sizeof pshape));
        /* a strided gradient is read through a contiguous copy, made
         * now: nothing may fail once the exchanges begin */
        if (!st && !jag_is_contiguous(g)) {
            jag_tensor *c = NULL;
            if (!(st = jag_contiguous(g, &c))) jag_release(g), grads[i] = c;
        }
        flags[1 + i] = 1;
    }
    for (int b = 0; !st && b < d->n_buckets; b++) {
        bufs[b] = malloc((size_t)d->buckets[b].numel * jag_dtype_size(d->buckets[b].dtype) + 1);
        if (!bufs[b]) st = jag__error(JAG_ENOMEM, "%s: out of memory for bucket %d", fn, b);
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
        char *at = bufs[b];
        for (int k = 0; !st && k < bk->n; k++) {
            int i = bk->index[k];
            size_t bytes = (size_t)jag_numel(d->params[i]) * esz;
            if (grads[i]) memcpy(at, jag__ptr(grads[i]), bytes);
            else memset(at, 0, bytes);
            at += bytes;
        }
        int rc = MPI_Iallreduce(MPI_IN_PLACE, bufs[b], (int)bk->numel, jag__dist_mpi_type(bk->dtype), MPI_SUM,
                                jag__dist_comm(), &reqs[b]);
        if ((st = jag__dist_mpi_check(fn, "MPI_Iallreduce", rc))) break;
        started++;
    }
    if (started) {
        int rc = MPI_Waitall(started, reqs, MPI_STATUSES_IGNORE);
        if (!st) st = jag__dist_mpi_check(fn, "MPI_Waitall", rc);
    }
    /* the averages become new gradients: made first, then swapped in */
    for (int b = 0; !st && b < d->n_buckets; b++) {
        const ddp_bucket *bk = &d->buckets[b];
        const char *at = bufs[b];
        for (int k = 0; !st && k < bk->n; k++) {
            int i = bk->index[k];
            jag_tensor *prm = d->params[i];
            int64_t m = jag_numel(prm);
            if (flags[1 + i]) {
                st = jag_empty(prm->sizes, prm->ndim, prm->dtype, &fresh[i]);
                if (!st && bk->dtype == JAG_FLOAT32) {
                    const float *src = (const float *)at;
                    float *dst = (float *)jag__ptr(fresh[i]);
                    for (int64_t e = 0; e < m; e++) dst[e] = src[e] / (float)p;
                } else if (!st) {
                    const double *src = (const double *)at;
                    double *dst = (double *)jag__ptr(fresh[i]);
                    for (int64_t e = 0; e < m; e++) dst[e] = src[e] / (double)p;
                }
            }
            at += (size_t)m * jag_dtype_size(bk->dtype);
        }
    }
    for (int i = 0; !st && i < n; i++) {
        if (!fresh[i]) continue;
        jag_tensor *old = d->params[i]->grad;
        d->params[i]->grad = fresh[i];
        fresh[i] = NULL;
        jag_release(old);
    }
    for (int i = 0; grads && i < n; i++) jag_release(grads[i]);
    for (int i = 0; fresh && i < n; i++) jag_release(fresh[i]);
    for (int b = 0; bufs && b < d->n_buckets; b++) free(bufs[b]);
    free(flags), free(grads), free(fresh), free(bufs), free(reqs);
    return st;
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
