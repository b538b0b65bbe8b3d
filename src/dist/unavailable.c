/*
 * unavailable.c — the distributed API in a libjag built without MPI: every
 * call fails with JAG_ENOTIMPL saying so, and the queries answer "not
 * initialised".
 */
#include "../core/internal.h"
#include "jag.h"

#define JAG_NO_MPI(fn) jag__error(JAG_ENOTIMPL, "%s: jag was built without MPI (install an MPI, e.g. libopenmpi-dev, and rebuild)", fn)

bool jag_dist_is_available(void) { return false; }
jag_status jag_dist_init(void) { return JAG_NO_MPI("jag_dist_init"); }
jag_status jag_dist_init_comm(const void *mpi_comm) { return JAG_NO_MPI("jag_dist_init_comm"); }
jag_status jag_dist_finalize(void) { return JAG_OK; }
bool jag_dist_is_initialized(void) { return false; }
int jag_dist_rank(void) { return -1; }
int jag_dist_world_size(void) { return -1; }
jag_status jag_dist_barrier(void) { return JAG_NO_MPI("jag_dist_barrier"); }
const char *jag_reduce_op_name(jag_reduce_op op) {
    static const char *names[] = {"sum", "avg", "max", "min"};
    return (int)op >= 0 && op < JAG_REDUCE_OP_COUNT ? names[op] : "invalid";
}
jag_status jag_dist_all_reduce(jag_tensor *t, jag_reduce_op op) { return JAG_NO_MPI("jag_dist_all_reduce"); }
jag_status jag_dist_broadcast(jag_tensor *t, int src) { return JAG_NO_MPI("jag_dist_broadcast"); }
jag_status jag_dist_all_gather(const jag_tensor *t, jag_tensor **outs, int cap) {
    return JAG_NO_MPI("jag_dist_all_gather");
}
jag_status jag_dist_reduce_scatter(const jag_tensor *input, jag_reduce_op op, jag_tensor **out) {
    return JAG_NO_MPI("jag_dist_reduce_scatter");
}
jag_status jag_ddp_new(jag_tensor *const *params, int n, size_t bucket_bytes, jag_ddp **out) {
    return JAG_NO_MPI("jag_ddp_new");
}
jag_status jag_ddp_sync_grads(jag_ddp *ddp) { return JAG_NO_MPI("jag_ddp_sync_grads"); }
jag_status jag_ddp_set_require_sync(jag_ddp *ddp, bool require_sync) {
    (void)require_sync;
    return JAG_NO_MPI("jag_ddp_set_require_sync");
}
int jag_ddp_num_buckets(const jag_ddp *ddp) { return -1; }
jag_status jag_ddp_bucket_params(const jag_ddp *ddp, int b, const int **indices, int *n_out) {
    return JAG_NO_MPI("jag_ddp_bucket_params");
}
jag_status jag_ddp_free(jag_ddp *ddp) { return JAG_OK; }
