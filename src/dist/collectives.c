/*
 * collectives.c — all_reduce, broadcast, all_gather and reduce_scatter on
 * dense tensors and on nested tensors' packed values. Each starts with the
 * header exchange (jag__dist_agree), so that argument errors and
 * disagreements between ranks fail on every rank before any payload moves.
 */
#include "dist_internal.h"
#include "../core/half.h"

#include <limits.h>
#include <stdlib.h>

/* The plain tensor a collective reads and writes: t itself, or a nested
 * tensor's packed values (jagged) or buffer (strided). A new reference in
 * *plain; *batch is the component count (-1 for a dense t). */
static jag_status payload_of(const char *fn, const jag_tensor *t, jag_tensor **plain, int64_t *batch) {
    jag_status st = jag__check_live(fn, "t", t);
    if (st) return st;
    jag_layout layout = jag_tensor_layout(t);
    if (layout == JAG_JAGGED || layout == JAG_STRIDED) {
        *batch = jag_nested_batch_size(t);
        return layout == JAG_JAGGED ? jag_nested_values(t, plain) : jag_nested_buffer(t, plain);
    }
    if (jag__is_subclass(t))
        return jag__error(JAG_ENOTIMPL, "%s: argument 't' is a %s tensor; expected a dense or nested tensor", fn,
                          jag_subclass_name(jag_tensor_subclass(t)));
    if (jag__is_meta(t)) return jag__error(JAG_EINVAL, "%s: argument 't' is a meta tensor (it has no data)", fn);
    *batch = -1;
    *plain = jag_retain((jag_tensor *)t);
    return *plain ? JAG_OK : jag_last_status();
}

static jag_status check_dtype(const char *fn, jag_dtype d) {
    if (jag__dist_mpi_type(d) == MPI_DATATYPE_NULL)
        return jag__error(JAG_EDTYPE,
                          "%s: argument 't' has dtype %s; expected float32, float64, float16, bfloat16, int32 or int64", fn,
                          jag_dtype_name(d));
    return JAG_OK;
}

/* Divide n elements by the world size (the avg op); half values in
 * float32, rounded once. */
static void divide(void *data, int64_t n, jag_dtype d, int p) {
    if (d == JAG_FLOAT32) {
        float *x = data;
        for (int64_t i = 0; i < n; i++) x[i] /= (float)p;
    } else if (d == JAG_FLOAT16 || d == JAG_BFLOAT16) {
        uint16_t *x = data;
        bool bf = d == JAG_BFLOAT16;
        for (int64_t i = 0; i < n; i++) {
            float v = (bf ? jag__bf16_to_f32(x[i]) : jag__f16_to_f32(x[i])) / (float)p;
            x[i] = bf ? jag__f32_to_bf16(v) : jag__f32_to_f16(v);
        }
    } else {
        double *x = data;
        for (int64_t i = 0; i < n; i++) x[i] /= (double)p;
    }
}

/* The in-place collectives: all_reduce with `op`, or (bcast) broadcast
 * from `src`. */
static jag_status in_place(const char *fn, jag_tensor *t, jag_reduce_op op, bool bcast, int src) {
    jag_status st = jag__dist_require_init(fn);
    if (st) return st;
    jag_tensor *plain = NULL, *work = NULL;
    int64_t batch = -1;
    int p = jag_dist_world_size();
    st = payload_of(fn, t, &plain, &batch);
    if (!st) st = check_dtype(fn, plain->dtype);
    if (!st && !bcast) st = jag__dist_check_op(fn, op, plain->dtype);
    if (!st && bcast && (src < 0 || src >= p))
        st = jag__error(JAG_ERANGE, "%s: argument 'src' is %d; expected a rank in [0, %d)", fn, src, p);
    if (!st && jag__is_read_only(plain))
        st = jag__error(JAG_EINVAL, "%s: argument 't' is read-only; the collective writes into it", fn);
    if (!st) {
        work = jag_is_contiguous(plain) ? jag_retain(plain) : NULL;
        if (!work) st = jag_contiguous(plain, &work);
    }
    jag_dist_field f[] = {
        {"dtype", plain ? (int64_t)plain->dtype : -1, JAG_EDTYPE},
        {"element count", plain ? jag_numel(plain) : -1, JAG_ESHAPE},
        {"component count (-1: dense)", batch, JAG_ESHAPE},
        {bcast ? "source rank" : "op", bcast ? src : (int64_t)op, bcast ? JAG_ERANGE : JAG_EINVAL},
    };
    st = jag__dist_agree(fn, st, f, 4);
    if (!st) {
        MPI_Datatype type = jag__dist_mpi_type(work->dtype);
        char *data = jag__ptr(work);
        size_t esz = jag_dtype_size(work->dtype);
        int64_t n = jag_numel(work);
        for (int64_t at = 0; !st && at < n; at += JAG_DIST_CHUNK) {
            int k = (int)(n - at < JAG_DIST_CHUNK ? n - at : JAG_DIST_CHUNK);
            int rc = bcast ? MPI_Bcast(data + at * esz, k, type, src, jag__dist_comm())
                           : MPI_Allreduce(MPI_IN_PLACE, data + at * esz, k, type, jag__dist_mpi_op(op, work->dtype),
                                           jag__dist_comm());
            st = jag__dist_mpi_check(fn, bcast ? "MPI_Bcast" : "MPI_Allreduce", rc);
        }
        if (!st && !bcast && op == JAG_REDUCE_AVG) divide(data, n, work->dtype, p);
        if (!st && work != plain) {
            /* write back into the strided tensor (never recorded: torch's
             * collectives write the data, not the autograd graph) */
            bool prev = jag_set_grad_enabled(false);
            st = jag_copy_(plain, work);
            jag_set_grad_enabled(prev);
        } else if (!st) {
            jag__bump_version(plain);
        }
    }
    jag_release(work);
    jag_release(plain);
    return st;
}

jag_status jag_dist_all_reduce(jag_tensor *t, jag_reduce_op op) {
    return in_place("jag_dist_all_reduce", t, op, false, 0);
}

jag_status jag_dist_broadcast(jag_tensor *t, int src) {
    return in_place("jag_dist_broadcast", t, JAG_REDUCE_SUM, true, src);
}

/* ---- all_gather ---------------------------------------------------------- */

static void release_n(jag_tensor **ts, int n) {
    for (int i = 0; i < n; i++) jag_release(ts[i]), ts[i] = NULL;
}

/* The shape fields every rank must agree on: dtype, ndim and the sizes
 * from dim `from` on (dims before it may differ). */
static int shape_fields(const jag_tensor *x, int from, jag_dist_field *f) {
    int n = 0;
    f[n++] = (jag_dist_field){"dtype", x ? (int64_t)x->dtype : -1, JAG_EDTYPE};
    f[n++] = (jag_dist_field){"number of dims", x ? x->ndim : -1, JAG_ESHAPE};
    static const char *names[JAG_MAX_DIMS] = {"size of dim 0", "size of dim 1", "size of dim 2", "size of dim 3",
                                              "size of dim 4", "size of dim 5", "size of dim 6", "size of dim 7"};
    for (int d = from; d < JAG_MAX_DIMS; d++)
        f[n++] = (jag_dist_field){names[d], x && d < x->ndim ? x->sizes[d] : -1, JAG_ESHAPE};
    return n;
}

static jag_status gather_dense(const char *fn, const jag_tensor *t, jag_status st, jag_tensor **outs) {
    int p = jag_dist_world_size();
    jag_tensor *c = NULL, *big = NULL;
    int64_t numel = st ? 0 : jag_numel(t);
    if (!st && numel > INT_MAX)
        st = jag__error(JAG_ENOTIMPL, "%s: %lld elements per rank; at most INT_MAX (MPI's counts)", fn,
                        (long long)numel);
    if (!st) st = jag_contiguous(t, &c);
    int64_t total = 0;
    if (!st && !jag__mul_ok(numel, p, &total))
        st = jag__error(JAG_EOVERFLOW, "%s: world size x element count overflows", fn);
    if (!st) st = jag_empty(&total, 1, t->dtype, &big);
    jag_dist_field f[2 + JAG_MAX_DIMS + 1];
    int nf = shape_fields(st ? NULL : t, 0, f);
    f[nf++] = (jag_dist_field){"layout (0 dense, 1 nested)", 0, JAG_EINVAL};
    st = jag__dist_agree(fn, st, f, nf);
    if (!st)
        st = jag__dist_mpi_check(fn, "MPI_Allgather",
                                 MPI_Allgather(jag__ptr(c), (int)numel, jag__dist_mpi_type(t->dtype), jag__ptr(big),
                                               (int)numel, jag__dist_mpi_type(t->dtype), jag__dist_comm()));
    jag_tensor *res[p > 0 ? p : 1];
    for (int r = 0; r < p; r++) res[r] = NULL;
    for (int r = 0; !st && r < p; r++) {
        jag_tensor *part = NULL;
        st = jag_narrow(big, 0, r * numel, numel, &part);
        if (!st) st = jag_view(part, t->sizes, t->ndim, &res[r]);
        jag_release(part);
    }
    if (st) release_n(res, p);
    else
        for (int r = 0; r < p; r++) outs[r] = res[r];
    jag_release(big);
    jag_release(c);
    return st;
}

/* Exclusive prefix sums of n counts (as int displacements; false when a
 * sum passes INT_MAX). */
static bool displacements(const int *counts, int n, int *displs) {
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (at > INT_MAX) return false;
        displs[i] = (int)at;
        at += counts[i];
    }
    return at <= INT_MAX;
}

static jag_status gather_nested(const char *fn, const jag_tensor *t, jag_status st, jag_tensor **outs) {
    int p = jag_dist_world_size();
    MPI_Comm comm = jag__dist_comm();
    jag_tensor *values = NULL, *lengths = NULL, *holes = NULL, *cvals = NULL;
    if (!st && jag_tensor_layout(t) != JAG_JAGGED)
        st = jag__error(JAG_ENOTIMPL, "%s: a strided nested tensor; expected a jagged one (convert it first)", fn);
    if (!st && jag_nested_ragged_idx(t) != 1)
        st = jag__error(JAG_ENOTIMPL, "%s: the ragged dim is dim %d; expected dim 1 (transpose it back)", fn,
                        jag_nested_ragged_idx(t));
    if (!st) st = jag_nested_lengths(t, &holes);
    if (!st && holes)
        st = jag__error(JAG_ENOTIMPL, "%s: a nested tensor with holes (lengths); expected a compact one", fn);
    if (!st) st = jag_nested_values(t, &values);
    if (!st) st = check_dtype(fn, values->dtype);
    if (!st) st = jag_contiguous(values, &cvals);
    if (!st) st = jag_nested_seq_lengths(t, &lengths);
    int64_t batch = st ? 0 : jag_nested_batch_size(t), numel = st ? 0 : jag_numel(cvals);
    if (!st && (numel > INT_MAX || batch > INT_MAX))
        st = jag__error(JAG_ENOTIMPL, "%s: %lld elements per rank; at most INT_MAX (MPI's counts)", fn,
                        (long long)numel);
    int *bcounts = NULL, *bdispl = NULL, *ecounts = NULL, *edispl = NULL;
    jag_tensor **res = NULL, *all_len = NULL, *all_vals = NULL;
    if (!st) {
        bcounts = malloc(4 * sizeof(int) * (size_t)p);
        res = calloc((size_t)p, sizeof *res);
        if (!bcounts || !res) st = jag__error(JAG_ENOMEM, "%s: out of memory", fn);
        else bdispl = bcounts + p, ecounts = bcounts + 2 * p, edispl = bcounts + 3 * p;
    }
    jag_dist_field f[2 + JAG_MAX_DIMS + 1];
    int nf = shape_fields(st ? NULL : cvals, 1, f);
    f[nf++] = (jag_dist_field){"layout (0 dense, 1 nested)", 1, JAG_EINVAL};
    st = jag__dist_agree(fn, st, f, nf);
    if (st) goto done;

    /* every rank's component count, then every component's length */
    int my_b = (int)batch;
    st = jag__dist_mpi_check(fn, "MPI_Allgather", MPI_Allgather(&my_b, 1, MPI_INT, bcounts, 1, MPI_INT, comm));
    if (st) goto done;
    int64_t row = 1;
    for (int d = 1; d < cvals->ndim; d++) row *= cvals->sizes[d];
    jag_status local = displacements(bcounts, p, bdispl) ? JAG_OK
                       : jag__error(JAG_ENOTIMPL, "%s: more than INT_MAX components in all", fn);
    int64_t total_b = 0;
    for (int r = 0; r < p; r++) total_b += bcounts[r];
    if (!local) local = jag_empty(&total_b, 1, JAG_INT64, &all_len);
    /* every allocation made before the next exchange: a rank that fails
     * here tells the others instead of leaving them waiting */
    st = jag__dist_agree(fn, local, NULL, 0);
    if (!st)
        st = jag__dist_mpi_check(fn, "MPI_Allgatherv",
                                 MPI_Allgatherv(jag__ptr(lengths), my_b, MPI_INT64_T, jag__ptr(all_len), bcounts,
                                                bdispl, MPI_INT64_T, comm));
    if (st) goto done;
    const int64_t *len = (const int64_t *)jag__ptr(all_len);
    int64_t total_rows = 0;
    local = JAG_OK;
    for (int r = 0; r < p; r++) {
        int64_t rows = 0;
        for (int i = 0; i < bcounts[r]; i++) rows += len[bdispl[r] + i];
        total_rows += rows;
        if (rows * row > INT_MAX) local = jag__error(JAG_ENOTIMPL, "%s: rank %d has more than INT_MAX elements", fn, r);
        ecounts[r] = (int)(rows * row);
    }
    if (!local && !displacements(ecounts, p, edispl))
        local = jag__error(JAG_ENOTIMPL, "%s: more than INT_MAX elements in all", fn);
    int64_t vsizes[JAG_MAX_DIMS];
    for (int d = 0; d < cvals->ndim; d++) vsizes[d] = d ? cvals->sizes[d] : total_rows;
    if (!local) local = jag_empty(vsizes, cvals->ndim, cvals->dtype, &all_vals);
    st = jag__dist_agree(fn, local, NULL, 0);
    if (!st) {
        MPI_Datatype type = jag__dist_mpi_type(cvals->dtype);
        st = jag__dist_mpi_check(fn, "MPI_Allgatherv",
                                 MPI_Allgatherv(jag__ptr(cvals), (int)numel, type, jag__ptr(all_vals), ecounts, edispl,
                                                type, comm));
    }
    /* rank r's components: a view of its rows and offsets from its lengths */
    int64_t row_at = 0;
    for (int r = 0; !st && r < p; r++) {
        int64_t b = bcounts[r], rows = row ? ecounts[r] / row : 0;
        if (!row) /* rows of zero elements: count them from the lengths */
            for (int i = 0; i < b; i++) rows += len[bdispl[r] + i];
        jag_tensor *part = NULL, *offs = NULL;
        st = jag_narrow(all_vals, 0, row_at, rows, &part);
        if (!st) st = jag_empty(&(int64_t){b + 1}, 1, JAG_INT64, &offs);
        if (!st) {
            int64_t *o = (int64_t *)jag__ptr(offs);
            o[0] = 0;
            for (int i = 0; i < b; i++) o[i + 1] = o[i] + len[bdispl[r] + i];
            st = jag_nested_from_jagged(part, offs, NULL, &res[r]);
        }
        jag_release(part);
        jag_release(offs);
        row_at += rows;
    }
done:
    if (st && res) release_n(res, p);
    else if (res)
        for (int r = 0; r < p; r++) outs[r] = res[r];
    jag_release(all_vals);
    jag_release(all_len);
    free(res);
    free(bcounts);
    jag_release(cvals);
    jag_release(lengths);
    jag_release(holes);
    jag_release(values);
    return st;
}

jag_status jag_dist_all_gather(const jag_tensor *t, jag_tensor **outs, int cap) {
    const char *fn = "jag_dist_all_gather";
    jag_status st = jag__dist_require_init(fn);
    if (st) return st;
    int p = jag_dist_world_size();
    st = jag__check_live(fn, "t", t);
    if (!st && !outs) st = jag__error(JAG_EINVAL, "%s: argument 'outs' is NULL", fn);
    if (!st && cap < p)
        st = jag__error(JAG_EINVAL, "%s: argument 'cap' is %d; expected at least the world size %d", fn, cap, p);
    bool nested = !st && jag_is_nested(t);
    if (!st && !nested) {
        if (jag__is_subclass(t))
            st = jag__error(JAG_ENOTIMPL, "%s: argument 't' is a %s tensor; expected a dense or nested tensor", fn,
                            jag_subclass_name(jag_tensor_subclass(t)));
        else if (jag__is_meta(t))
            st = jag__error(JAG_EINVAL, "%s: argument 't' is a meta tensor (it has no data)", fn);
        else
            st = check_dtype(fn, t->dtype);
    }
    /* the kind decides the protocol: a dense rank and a nested rank would
     * exchange different headers; both carry the layout field, in the same
     * place only for equal ndim, so the kind is agreed first */
    jag_dist_field kind = {"layout (0 dense, 1 nested)", nested, JAG_EINVAL};
    st = jag__dist_agree(fn, st, &kind, 1);
    if (st) return st;
    return nested ? gather_nested(fn, t, JAG_OK, outs) : gather_dense(fn, t, JAG_OK, outs);
}

/* ---- reduce_scatter ------------------------------------------------------ */

jag_status jag_dist_reduce_scatter(const jag_tensor *input, jag_reduce_op op, jag_tensor **out) {
    const char *fn = "jag_dist_reduce_scatter";
    jag_status st = jag__dist_require_init(fn);
    if (st) return st;
    int p = jag_dist_world_size();
    jag_tensor *c = NULL, *res = NULL;
    st = jag__check_live(fn, "input", input);
    if (!st && !out) st = jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", fn);
    if (!st && jag__is_subclass(input))
        st = jag__error(JAG_ENOTIMPL, "%s: argument 'input' is a %s tensor; expected a dense tensor", fn,
                        jag_subclass_name(jag_tensor_subclass(input)));
    if (!st && jag__is_meta(input)) st = jag__error(JAG_EINVAL, "%s: argument 'input' is a meta tensor", fn);
    if (!st) st = check_dtype(fn, input->dtype);
    if (!st) st = jag__dist_check_op(fn, op, input->dtype);
    if (!st && (input->ndim == 0 || input->sizes[0] % p))
        st = jag__error(JAG_ESHAPE, "%s: argument 'input' has shape with dim 0 of size %lld; expected a multiple of "
                        "the world size %d", fn, input->ndim ? (long long)input->sizes[0] : 0LL, p);
    int64_t block = 0;
    if (!st) {
        block = jag_numel(input) / p;
        if (block > INT_MAX) st = jag__error(JAG_ENOTIMPL, "%s: more than INT_MAX elements per rank", fn);
    }
    if (!st) st = jag_contiguous(input, &c);
    if (!st) {
        int64_t sizes[JAG_MAX_DIMS];
        for (int d = 0; d < input->ndim; d++) sizes[d] = d ? input->sizes[d] : input->sizes[0] / p;
        st = jag_empty(sizes, input->ndim, input->dtype, &res);
    }
    jag_dist_field f[2 + JAG_MAX_DIMS + 1];
    int nf = shape_fields(st ? NULL : input, 0, f);
    f[nf++] = (jag_dist_field){"op", (int64_t)op, JAG_EINVAL};
    st = jag__dist_agree(fn, st, f, nf);
    if (!st) {
        MPI_Datatype type = jag__dist_mpi_type(input->dtype);
        st = jag__dist_mpi_check(fn, "MPI_Reduce_scatter_block",
                                 MPI_Reduce_scatter_block(jag__ptr(c), jag__ptr(res), (int)block, type, jag__dist_mpi_op(op, input->dtype),
                                                          jag__dist_comm()));
    }
    if (!st && op == JAG_REDUCE_AVG) divide(jag__ptr(res), block, res->dtype, p);
    jag_release(c);
    if (st) {
        jag_release(res);
        return st;
    }
    *out = res;
    return JAG_OK;
}
