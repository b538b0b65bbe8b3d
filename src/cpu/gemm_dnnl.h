/* gemm_dnnl.h — matrix products on oneDNN's matmul primitive: bfloat16
 * (AVX512-BF16; float32 accumulation, each result rounded once) and float32
 * (linear's transposed weight, where the primitive is the fastest measured;
 * bench/gemm_libs/README.md). Used by gemm.c. */
#ifndef JAG_CPU_GEMM_DNNL_H
#define JAG_CPU_GEMM_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "jag.h"

/* Whether this CPU has oneDNN's bfloat16 matmul (AVX-512 and up); the
 * first call probes once. Without it, callers compute bfloat16 products as
 * float32 (widened, summed in float32, rounded once). */
bool jag__gemm_bf16_available(void);

/* c (n, m), bfloat16, contiguous = op(a) (n, k) @ op(b) (k, m) [+ c when
 * `accumulate`], the products summed in float32 and rounded once.
 * op(a) is a row-major (n, k) with leading dimension lda, or (a_trans) the
 * transpose of a row-major (k, n) with leading dimension lda; likewise b.
 * n, m, k >= 1. Fails with JAG_ENOMEM / JAG_EINTERNAL (op named) when the
 * library cannot make or run the product; c is then unspecified. */
jag_status jag__gemm_bf16(const char *op, int64_t n, int64_t m, int64_t k, const uint16_t *a, bool a_trans,
                          int64_t lda, const uint16_t *b, bool b_trans, int64_t ldb, bool accumulate, uint16_t *c);

/* c (n, m), float32, contiguous = op(a) (n, k) @ op(b) (k, m) [+ c when
 * `accumulate`] on the matmul primitive, operands as jag__gemm_bf16's.
 * *ran = true and JAG_OK when it ran; *ran = false and JAG_OK, c untouched
 * and no error set, when oneDNN cannot make the product (no engine, no
 * kernel for this CPU, no memory): the caller then runs another library;
 * an error (op named) when it failed while running, c then unspecified. */
jag_status jag__gemm_f32_dnnl(const char *op, int64_t n, int64_t m, int64_t k, const float *a, bool a_trans,
                              int64_t lda, const float *b, bool b_trans, int64_t ldb, bool accumulate, float *c,
                              bool *ran);

/* The naive reference of jag__gemm_bf16: the inputs widened, the products
 * summed in float64, each result rounded to float32 and then to bfloat16. */
void jag__ref_gemm_bf16(int64_t n, int64_t m, int64_t k, const uint16_t *a, bool a_trans, int64_t lda,
                        const uint16_t *b, bool b_trans, int64_t ldb, bool accumulate, uint16_t *c);

#endif
