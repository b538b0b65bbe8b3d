/* blas_core.c — OpenBLAS's choice of kernels, corrected when it does not
 * know the CPU.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels from the CPU model
 * when it loads. An Intel model it does not know (0.3.21, Debian 12's, knows
 * none after Sapphire Rapids) falls back to its oldest x86-64 kernels,
 * "Prescott" (SSE3): GEMM then runs at a quarter of what the machine can do
 * (measured here: 40-60 against 200-260 GFLOP/s on two cores of a CPU with
 * AVX-512). OpenBLAS reads OPENBLAS_CORETYPE only while it loads, before
 * jag could set it, and it has no call to change its kernels afterwards; it
 * does export the pair that loading runs, gotoblas_dynamic_quit and
 * gotoblas_dynamic_init. So when libjag loads, if OpenBLAS fell back to
 * Prescott on a CPU that has AVX-512 (or AVX2 and FMA), and the user did
 * not choose a core with OPENBLAS_CORETYPE, jag runs that pair again with
 * the core the features call for (SkylakeX, or Haswell). Nothing has called
 * BLAS yet at that point. The symbols are weak: an OpenBLAS built for one
 * core (no dynamic dispatch) is left alone. jag_blas_core() says which core
 * runs. */
#include "../core/internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

/* The OpenBLAS core the CPU's features call for, or NULL. */
static const char *core_for_features(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

__attribute__((constructor)) static void repick_blas_core(void) {
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || getenv("OPENBLAS_CORETYPE")) return;
    const char *core = openblas_get_corename();
    const char *want = core && strcmp(core, "Prescott") == 0 ? core_for_features() : NULL;
    if (!want) return;
    /* OpenBLAS reads the variable in gotoblas_dynamic_init; it is ours only
     * for that call */
    if (setenv("OPENBLAS_CORETYPE", want, 0) != 0) return;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
}

const char *jag_blas_core(void) {
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}
