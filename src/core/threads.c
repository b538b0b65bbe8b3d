/* threads.c — one thread count for jag's OpenMP loops and OpenBLAS. */
#include "internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void openblas_set_num_threads(int n); /* from OpenBLAS's cblas.h */

void jag_set_num_threads(int n) {
#ifdef _OPENMP
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
#endif
    if (n > 0) openblas_set_num_threads(n);
}

int jag_get_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
