/*
 * dist_internal.h — what the files of src/dist share: jag's communicator,
 * MPI's names for jag's dtypes and ops, and the header exchange every
 * collective starts with. Built only with MPI.
 */
#ifndef JAG_DIST_INTERNAL_H
#define JAG_DIST_INTERNAL_H

#include "../core/internal.h"
#include "jag.h"

#include <mpi.h>

/* jag's communicator (a duplicate: jag's messages never mix with the
 * caller's); MPI_COMM_NULL when not initialised. */
MPI_Comm jag__dist_comm(void);

/* JAG_ESTATE naming `fn` when jag_dist is not initialised. */
jag_status jag__dist_require_init(const char *fn);

/* JAG_EINTERNAL with MPI's message for `rc` (an MPI error code) when rc is
 * not MPI_SUCCESS; JAG_OK otherwise. */
jag_status jag__dist_mpi_check(const char *fn, const char *what, int rc);

/* The MPI datatype of a jag dtype, or MPI_DATATYPE_NULL for bool and
 * invalid dtypes. float16 and bfloat16 are jag's own 2-byte types (MPI has
 * none), made by init: moved as bytes, reduced by jag_dist's own ops. */
MPI_Datatype jag__dist_mpi_type(jag_dtype d);

/* The MPI reduction of `op` on dtype `d` (avg is a sum, divided after):
 * MPI's own for float32, float64 and the integers; for the half types
 * jag's, which add (or compare) in float32 and round each result to the
 * half type once, as NCCL reduces half buffers. */
MPI_Op jag__dist_mpi_op(jag_reduce_op op, jag_dtype d);

/* Check `op` for dtype `d` (valid op; avg needs a floating dtype); sets the
 * error naming fn. */
jag_status jag__dist_check_op(const char *fn, jag_reduce_op op, jag_dtype d);

/* One value every rank of a collective must agree on. */
typedef struct jag_dist_field {
    const char *name;  /* "dtype", "element count", ... (for the message) */
    int64_t value;     /* this rank's */
    jag_status status; /* the status of a disagreement */
} jag_dist_field;

/* The header exchange: one MPI_Allreduce (MAX over [failed, v..., -v...])
 * that tells every rank whether any rank refused its arguments (`local`,
 * this rank's status so far, whose message stays when it failed) and,
 * when none did, whether all ranks agree on every field. Returns JAG_OK
 * on every rank or an error on every rank: the local one, "another rank
 * refused its arguments" (JAG_EINVAL), or a disagreement naming the field
 * and the smallest and largest values among ranks. At most 16 fields. */
jag_status jag__dist_agree(const char *fn, jag_status local, const jag_dist_field *fields, int n);

/* MPI counts are int: elements move in pieces of at most this many. */
#define JAG_DIST_CHUNK ((int64_t)1 << 30)

#endif
