/*
 * comm.c — jag's process group over MPI: init (from the launcher's
 * environment or a caller's communicator), finalize, rank, world size,
 * barrier, and the helpers the collectives share (error translation, dtype
 * and op mapping, the header exchange).
 */
#include "dist_internal.h"
#include "../core/half.h"

#include <stdio.h>
#include <string.h>

/* The group is process-wide (MPI is): set by init, read by every call. The
 * collectives are called from one thread at a time (MPI_THREAD_SERIALIZED),
 * so plain variables are enough. */
static MPI_Comm g_comm = MPI_COMM_NULL;
static bool g_finalize_mpi; /* jag_dist_init initialised MPI */
static int g_rank = -1, g_size = -1;
/* The half types and their reductions (made by init, freed by finalize). */
static MPI_Datatype g_f16 = MPI_DATATYPE_NULL, g_bf16 = MPI_DATATYPE_NULL;
static MPI_Op g_half_sum = MPI_OP_NULL, g_half_max = MPI_OP_NULL, g_half_min = MPI_OP_NULL;

bool jag_dist_is_available(void) { return true; }

MPI_Comm jag__dist_comm(void) { return g_comm; }

jag_status jag__dist_require_init(const char *fn) {
    if (g_comm == MPI_COMM_NULL)
        return jag__error(JAG_ESTATE, "%s: the process group is not initialised; call jag_dist_init first", fn);
    return JAG_OK;
}

jag_status jag__dist_mpi_check(const char *fn, const char *what, int rc) {
    if (rc == MPI_SUCCESS) return JAG_OK;
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len] = '\0';
    return jag__error(JAG_EINTERNAL, "%s: %s failed: %s (MPI error %d)", fn, what, len ? msg : "unknown", rc);
}

MPI_Datatype jag__dist_mpi_type(jag_dtype d) {
    switch (d) {
    case JAG_FLOAT32: return MPI_FLOAT;
    case JAG_FLOAT64: return MPI_DOUBLE;
    case JAG_INT32: return MPI_INT32_T;
    case JAG_INT64: return MPI_INT64_T;
    case JAG_FLOAT16: return g_f16;
    case JAG_BFLOAT16: return g_bf16;
    default: return MPI_DATATYPE_NULL;
    }
}

/* inout[i] = in[i] (op) inout[i] on half values: widened to float32,
 * combined, rounded once. MPI passes the datatype, which says which half
 * type the buffers hold. max/min keep inout unless in is larger (smaller),
 * so a NaN in inout stays and one in in is ignored, as MPI's comparisons. */
#define JAG_DIST_HALF_OP(name, combine)                                                 \
    static void name(void *in, void *inout, int *len, MPI_Datatype *type) {            \
        const uint16_t *a = in;                                                         \
        uint16_t *b = inout;                                                            \
        bool bf = *type == g_bf16;                                                      \
        for (int i = 0; i < *len; i++) {                                                \
            float x = bf ? jag__bf16_to_f32(a[i]) : jag__f16_to_f32(a[i]);              \
            float y = bf ? jag__bf16_to_f32(b[i]) : jag__f16_to_f32(b[i]);              \
            float r = combine;                                                          \
            b[i] = bf ? jag__f32_to_bf16(r) : jag__f32_to_f16(r);                       \
        }                                                                               \
    }
JAG_DIST_HALF_OP(half_sum, x + y)
JAG_DIST_HALF_OP(half_max, x > y ? x : y)
JAG_DIST_HALF_OP(half_min, x < y ? x : y)
#undef JAG_DIST_HALF_OP

MPI_Op jag__dist_mpi_op(jag_reduce_op op, jag_dtype d) {
    bool half = d == JAG_FLOAT16 || d == JAG_BFLOAT16;
    if (op == JAG_REDUCE_MAX) return half ? g_half_max : MPI_MAX;
    if (op == JAG_REDUCE_MIN) return half ? g_half_min : MPI_MIN;
    return half ? g_half_sum : MPI_SUM;
}

static void free_half_types(void) {
    if (g_f16 != MPI_DATATYPE_NULL) MPI_Type_free(&g_f16);
    if (g_bf16 != MPI_DATATYPE_NULL) MPI_Type_free(&g_bf16);
    if (g_half_sum != MPI_OP_NULL) MPI_Op_free(&g_half_sum);
    if (g_half_max != MPI_OP_NULL) MPI_Op_free(&g_half_max);
    if (g_half_min != MPI_OP_NULL) MPI_Op_free(&g_half_min);
    g_f16 = g_bf16 = MPI_DATATYPE_NULL;
    g_half_sum = g_half_max = g_half_min = MPI_OP_NULL;
}

static jag_status make_half_types(const char *fn) {
    int rc = MPI_Type_contiguous(1, MPI_UINT16_T, &g_f16);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&g_f16);
    if (rc == MPI_SUCCESS) rc = MPI_Type_contiguous(1, MPI_UINT16_T, &g_bf16);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&g_bf16);
    if (rc == MPI_SUCCESS) rc = MPI_Op_create(half_sum, 1, &g_half_sum);
    if (rc == MPI_SUCCESS) rc = MPI_Op_create(half_max, 1, &g_half_max);
    if (rc == MPI_SUCCESS) rc = MPI_Op_create(half_min, 1, &g_half_min);
    if (rc != MPI_SUCCESS) free_half_types();
    return jag__dist_mpi_check(fn, "making the half-precision types", rc);
}

const char *jag_reduce_op_name(jag_reduce_op op) {
    switch (op) {
    case JAG_REDUCE_SUM: return "sum";
    case JAG_REDUCE_AVG: return "avg";
    case JAG_REDUCE_MAX: return "max";
    case JAG_REDUCE_MIN: return "min";
    default: return "invalid";
    }
}

jag_status jag__dist_check_op(const char *fn, jag_reduce_op op, jag_dtype d) {
    if ((int)op < 0 || op >= JAG_REDUCE_OP_COUNT)
        return jag__error(JAG_EINVAL, "%s: argument 'op' is %d; expected JAG_REDUCE_SUM, _AVG, _MAX or _MIN", fn,
                          (int)op);
    if (op == JAG_REDUCE_AVG && !jag_dtype_is_floating(d))
        return jag__error(JAG_EDTYPE, "%s: op avg needs a floating tensor; got %s (use sum and divide)", fn,
                          jag_dtype_name(d));
    return JAG_OK;
}

jag_status jag__dist_agree(const char *fn, jag_status local, const jag_dist_field *fields, int n) {
    enum { MAXF = 16 };
    JAG_ASSERT(n >= 0 && n <= MAXF);
    int64_t buf[1 + 2 * MAXF];
    buf[0] = local != JAG_OK;
    for (int i = 0; i < n; i++) {
        buf[1 + i] = fields[i].value;
        buf[1 + n + i] = -fields[i].value; /* the max of -v is -min(v) */
    }
    /* keep this rank's own message across the exchange */
    char saved[512] = "";
    if (local) snprintf(saved, sizeof saved, "%s", jag_last_error());
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, 1 + 2 * n, MPI_INT64_T, MPI_MAX, g_comm);
    if (rc != MPI_SUCCESS) return jag__dist_mpi_check(fn, "the header exchange (MPI_Allreduce)", rc);
    if (local) return jag__error(local, "%s", saved);
    if (buf[0])
        return jag__error(JAG_EINVAL, "%s: another rank refused its arguments (see its error); nothing was exchanged",
                          fn);
    for (int i = 0; i < n; i++) {
        int64_t hi = buf[1 + i], lo = -buf[1 + n + i];
        if (hi != lo)
            return jag__error(fields[i].status,
                              "%s: the ranks disagree on the %s: this rank (%d) has %lld, the smallest is %lld, the "
                              "largest %lld",
                              fn, fields[i].name, g_rank, (long long)fields[i].value, (long long)lo, (long long)hi);
    }
    return JAG_OK;
}

static jag_status adopt(const char *fn, MPI_Comm src, bool finalize_mpi) {
    MPI_Comm dup = MPI_COMM_NULL;
    jag_status st = jag__dist_mpi_check(fn, "MPI_Comm_dup", MPI_Comm_dup(src, &dup));
    if (st) return st;
    /* MPI errors on jag's communicator come back as codes (then as jag
     * statuses) instead of aborting the job */
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    if ((st = make_half_types(fn))) {
        MPI_Comm_free(&dup);
        return st;
    }
    int rank = 0, size = 0;
    MPI_Comm_rank(dup, &rank);
    MPI_Comm_size(dup, &size);
    g_comm = dup, g_rank = rank, g_size = size, g_finalize_mpi = finalize_mpi;
    return JAG_OK;
}

jag_status jag_dist_init(void) {
    const char *fn = "jag_dist_init";
    if (g_comm != MPI_COMM_NULL)
        return jag__error(JAG_ESTATE, "%s: already initialised; call jag_dist_finalize first", fn);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) return jag__error(JAG_ESTATE, "%s: MPI was finalised already (it cannot start twice)", fn);
    bool ours = false;
    if (!inited) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return jag__error(JAG_EINTERNAL, "%s: MPI_Init_thread failed (MPI error %d)", fn, rc);
        ours = true;
    }
    jag_status st = adopt(fn, MPI_COMM_WORLD, ours);
    if (st && ours) MPI_Finalize();
    return st;
}

jag_status jag_dist_init_comm(const void *mpi_comm) {
    const char *fn = "jag_dist_init_comm";
    if (!mpi_comm) return jag__error(JAG_EINVAL, "%s: argument 'mpi_comm' is NULL; expected a MPI_Comm *", fn);
    if (g_comm != MPI_COMM_NULL)
        return jag__error(JAG_ESTATE, "%s: already initialised; call jag_dist_finalize first", fn);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return jag__error(JAG_ESTATE, "%s: MPI is not initialised (initialise it, or call jag_dist_init)", fn);
    MPI_Comm c = *(const MPI_Comm *)mpi_comm;
    if (c == MPI_COMM_NULL) return jag__error(JAG_EINVAL, "%s: argument 'mpi_comm' is MPI_COMM_NULL", fn);
    return adopt(fn, c, false);
}

jag_status jag_dist_finalize(void) {
    if (g_comm == MPI_COMM_NULL) return JAG_OK;
    MPI_Comm_free(&g_comm);
    free_half_types();
    g_comm = MPI_COMM_NULL, g_rank = -1, g_size = -1;
    if (g_finalize_mpi) {
        g_finalize_mpi = false;
        int rc = MPI_Finalize();
        if (rc != MPI_SUCCESS) return jag__dist_mpi_check("jag_dist_finalize", "MPI_Finalize", rc);
    }
    return JAG_OK;
}

bool jag_dist_is_initialized(void) { return g_comm != MPI_COMM_NULL; }
int jag_dist_rank(void) { return g_rank; }
int jag_dist_world_size(void) { return g_size; }

jag_status jag_dist_barrier(void) {
    jag_status st = jag__dist_require_init("jag_dist_barrier");
    if (st) return st;
    return jag__dist_mpi_check("jag_dist_barrier", "MPI_Barrier", MPI_Barrier(g_comm));
}
