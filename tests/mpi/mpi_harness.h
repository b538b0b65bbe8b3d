/*
 * mpi_harness.h — tests/test.h's checks for programs that run under
 * mpirun: every rank runs every test; failures print with the rank; the
 * exit status is 1 on every rank when any rank failed.
 */
#ifndef JAG_MPI_HARNESS_H
#define JAG_MPI_HARNESS_H

#include "jag.h"
#include "test.h"

#include <mpi.h>

#define MPI_TEST_MAIN(...)                                                     \
    int main(void) {                                                           \
        if (jag_dist_init()) {                                                 \
            fprintf(stderr, "jag_dist_init: %s\n", jag_last_error());          \
            return 2;                                                          \
        }                                                                      \
        void (*tests_[])(void) = {__VA_ARGS__};                                \
        for (size_t i = 0; i < sizeof tests_ / sizeof tests_[0]; i++) {        \
            int before_ = test_checks_failed;                                  \
            long live_ = jag__live_tensors();                                  \
            tests_[i]();                                                       \
            long leaked_ = jag__live_tensors() - live_;                        \
            CHECK_MSG(leaked_ == 0, "%ld tensor(s) leaked", leaked_);          \
            if (test_checks_failed > before_)                                  \
                fprintf(stderr, "rank %d FAILED: %s\n", jag_dist_rank(), test_current); \
        }                                                                      \
        int failed_ = test_checks_failed, any_ = 0;                            \
        MPI_Allreduce(&failed_, &any_, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);   \
        printf("rank %d of %d: %d passed, %d failed\n", jag_dist_rank(), jag_dist_world_size(), \
               test_checks_passed, test_checks_failed);                        \
        jag_dist_finalize();                                                   \
        return any_ ? 1 : 0;                                                   \
    }

#endif
