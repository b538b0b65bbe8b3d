/*
 * binary.c — elementwise ops of two operands with broadcasting (add ... ge),
 * where and clamp: the typed kernels and the naive references (kernels.h).
 * Their META functions (the dtype rules below) and the boxed adapters
 * ops.def names are in src/dispatch/binary_op.c.
 *
 * Operands. `a` is a tensor; `b` is a tensor or a double scalar (the
 * `_scalar` entry points). Shapes broadcast as in NumPy.
 *
 * dtypes. Two tensors compute in jag_promote_types(a, b). A tensor with a
 * scalar (torch's rule for a Python number): a floating tensor keeps its
 * dtype; an integer tensor with an integral scalar keeps its dtype (a bool
 * tensor gives int64); a non-integral scalar (or inf, NaN) gives float32. An
 * integral scalar that the result dtype cannot hold is JAG_EINVAL (torch's
 * "value cannot be converted" error) rather than a silent wrap.
 *  - add, sub, mul, pow, maximum, minimum return the compute dtype; div
 *    returns it when floating, else float32 (true division);
 *  - eq ... ge return bool and compare in the promoted dtype; against a
 *    scalar that is non-integral or outside an integer tensor's range they
 *    compare in float64 (exact, where torch's float32 would round int32
 *    values above 2^24);
 *  - where(cond, a, b): cond is bool, the result is promote(a, b);
 *  - clamp(x, lo, hi), lo <= hi: as max then min with the scalars, in one
 *    pass; an infinite bound on its own side (lo = -inf, hi = +inf) bounds
 *    nothing and leaves an integer dtype alone; NaN stays NaN.
 *
 * Semantics per op, as torch:
 *  - add is a + alpha * b; with an integer or bool result alpha must be
 *    integral (JAG_EINVAL otherwise); bool add is logical or (alpha != 0
 *    masks b), bool mul logical and, bool maximum/minimum or/and;
 *  - sub with a bool operand and pow with a bool result are JAG_EDTYPE;
 *  - integer add, sub, mul and pow wrap on overflow (computed in unsigned, no
 *    UB);
 *  - integer pow with a negative exponent is computed, not refused: the
 *    result truncated toward zero, i.e. 1 for a == 1, +-1 for a == -1 and 0
 *    otherwise (0 for a == 0 too) — torch's kernel for tensor exponents
 *    (torch raises for a negative scalar exponent; jag computes the same
 *    values for both);
 *  - maximum and minimum propagate NaN.
 *
 * Kernels. Operands whose dtype differs from the compute dtype are converted
 * first into contiguous tensors; a scalar becomes a one-element operand with
 * stride 0. The loops run under jag__iter; each loop has a fast path for
 * contiguous runs (restrict pointers, vectorised), one for a contiguous run
 * against a stride-0 (broadcast scalar) operand on either side, and a
 * strided path for anything else.
 */
#include "iter.h"
#include "kernels.h"
#include "pointwise_math.h"

/* ---- element functions ------------------------------------------------------ */

/* Integers wrap: the arithmetic runs in the unsigned twin U, converted back
 * (gcc defines that conversion as modulo 2^n). */
#define INT_OPS(sfx, T, U)                                                     \
    static inline T add_##sfx(T a, T b, T alpha) { return (T)((U)a + (U)alpha * (U)b); } \
    static inline T sub_##sfx(T a, T b) { return (T)((U)a - (U)b); }          \
    static inline T mul_##sfx(T a, T b) { return (T)((U)a * (U)b); }          \
    static inline T max_##sfx(T a, T b) { return a > b ? a : b; }             \
    static inline T min_##sfx(T a, T b) { return a < b ? a : b; }             \
    /* a^b by squaring (mod 2^n); negative b: see the file comment */         \
    static inline T pow_##sfx(T a, T b) {                                     \
        if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;      \
        U r = 1, base = (U)a;                                                  \
        for (U e = (U)b; e; e >>= 1) {                                         \
            if (e & 1) r *= base;                                              \
            base *= base;                                                      \
        }                                                                      \
        return (T)r;                                                           \
    }
INT_OPS(i32, int32_t, uint32_t)
INT_OPS(i64, int64_t, uint64_t)
#undef INT_OPS

/* Floats: maximum/minimum return NaN when either side is NaN. */
#define FLOAT_OPS(sfx, T, pow_fn)                                              \
    static inline T add_##sfx(T a, T b, T alpha) { return a + alpha * b; }    \
    static inline T sub_##sfx(T a, T b) { return a - b; }                     \
    static inline T mul_##sfx(T a, T b) { return a * b; }                     \
    static inline T div_##sfx(T a, T b) { return a / b; }                     \
    static inline T max_##sfx(T a, T b) { return ((a != a) | (a > b)) ? a : b; } \
    static inline T min_##sfx(T a, T b) { return ((a != a) | (a < b)) ? a : b; } \
    static inline T pow_##sfx(T a, T b) { return pow_fn(a, b); }
FLOAT_OPS(f32, float, powf)
FLOAT_OPS(f64, double, pow)
#undef FLOAT_OPS

/* bool (0 or 1): add is or (alpha, converted to bool, masks b), mul and
 * minimum are and, maximum is or. */
static inline uint8_t add_b(uint8_t a, uint8_t b, uint8_t alpha) { return (uint8_t)(a | (alpha & b)); }
static inline uint8_t mul_b(uint8_t a, uint8_t b) { return (uint8_t)(a & b); }
static inline uint8_t max_b(uint8_t a, uint8_t b) { return (uint8_t)(a | b); }
static inline uint8_t min_b(uint8_t a, uint8_t b) { return (uint8_t)(a & b); }

/* ---- loops ------------------------------------------------------------------- */

/* A jag_loop_fn: ptrs[0] is y (type OT), ptrs[1] a and ptrs[2] b (type T).
 * PRE runs once per call (reads ctx); EXPR computes y from a and b. */
#define BINARY_LOOP(NAME, T, OT, PRE, EXPR)                                    \
    static void NAME(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        PRE;                                                                   \
        const int64_t ys = strides[0], as = strides[1], bs = strides[2];      \
        const int64_t st = (int64_t)sizeof(T);                                 \
        if (ys == (int64_t)sizeof(OT) && as == st && (bs == st || bs == 0)) {  \
            OT *restrict y = (OT *)ptrs[0];                                    \
            const T *restrict pa = (const T *)ptrs[1];                         \
            const T *restrict pb = (const T *)ptrs[2];                         \
            if (bs) {                                                          \
                for (int64_t i = 0; i < n; i++) {                              \
                    const T a = pa[i], b = pb[i];                              \
                    y[i] = (EXPR);                                             \
                }                                                              \
            } else {                                                           \
                const T b = *pb;                                               \
                for (int64_t i = 0; i < n; i++) {                              \
                    const T a = pa[i];                                         \
                    y[i] = (EXPR);                                             \
                }                                                              \
            }                                                                  \
        } else if (ys == (int64_t)sizeof(OT) && as == 0 && bs == st) {         \
            OT *restrict y = (OT *)ptrs[0];                                    \
            const T *restrict pb = (const T *)ptrs[2];                         \
            const T a = *(const T *)ptrs[1];                                   \
            for (int64_t i = 0; i < n; i++) {                                  \
                const T b = pb[i];                                             \
                y[i] = (EXPR);                                                 \
            }                                                                  \
        } else {                                                               \
            char *y = ptrs[0];                                                 \
            const char *pa = ptrs[1], *pb = ptrs[2];                           \
            for (int64_t i = 0; i < n; i++) {                                  \
                const T a = *(const T *)(pa + i * as), b = *(const T *)(pb + i * bs); \
                *(OT *)(y + i * ys) = (EXPR);                                  \
            }                                                                  \
        }                                                                      \
    }

#define NO_PRE (void)ctx
#define ALPHA_PRE(T) const T alpha = *(const T *)ctx

/* Loops for op over the dtype suffixes given, and its table [dtype] -> loop
 * (NULL where the META function never lets that dtype through). */
#define LOOP_F(op, fn, PRE_F, PRE_D, ARGS)                                     \
    BINARY_LOOP(loop_##op##_f32, float, float, PRE_F, fn##_f32 ARGS)           \
    BINARY_LOOP(loop_##op##_f64, double, double, PRE_D, fn##_f64 ARGS)
#define LOOP_I(op, fn, PRE_I, PRE_L, ARGS)                                     \
    BINARY_LOOP(loop_##op##_i32, int32_t, int32_t, PRE_I, fn##_i32 ARGS)       \
    BINARY_LOOP(loop_##op##_i64, int64_t, int64_t, PRE_L, fn##_i64 ARGS)

LOOP_F(add, add, ALPHA_PRE(float), ALPHA_PRE(double), (a, b, alpha))
LOOP_I(add, add, ALPHA_PRE(int32_t), ALPHA_PRE(int64_t), (a, b, alpha))
BINARY_LOOP(loop_add_b, uint8_t, uint8_t, ALPHA_PRE(uint8_t), add_b(a, b, alpha))
LOOP_F(sub, sub, NO_PRE, NO_PRE, (a, b))
LOOP_I(sub, sub, NO_PRE, NO_PRE, (a, b))
LOOP_F(mul, mul, NO_PRE, NO_PRE, (a, b))
LOOP_I(mul, mul, NO_PRE, NO_PRE, (a, b))
BINARY_LOOP(loop_mul_b, uint8_t, uint8_t, NO_PRE, mul_b(a, b))
LOOP_F(div, div, NO_PRE, NO_PRE, (a, b))
LOOP_F(pow_any, pow, NO_PRE, NO_PRE, (a, b))
LOOP_I(pow, pow, NO_PRE, NO_PRE, (a, b))
LOOP_F(maximum, max, NO_PRE, NO_PRE, (a, b))
LOOP_I(maximum, max, NO_PRE, NO_PRE, (a, b))
BINARY_LOOP(loop_maximum_b, uint8_t, uint8_t, NO_PRE, max_b(a, b))
LOOP_F(minimum, min, NO_PRE, NO_PRE, (a, b))
LOOP_I(minimum, min, NO_PRE, NO_PRE, (a, b))
BINARY_LOOP(loop_minimum_b, uint8_t, uint8_t, NO_PRE, min_b(a, b))

/* Float pow against the scalar 2 (x ** 2, common) is a multiply; float32
 * against another scalar, SLEEF's vector powf where the build has it, whose
 * bits differ from libm's powf by up to an ulp: so a strided run against a
 * scalar goes through a stack buffer to the same kernel (gathered, computed
 * in place, scattered), and the result does not depend on the layout. */
#define POW_BUF 256
#ifdef JAG_HAVE_SLEEF
#define POW_SCALAR_f32(y, a, n, b) jag__sleef_pow_scalar_f32(y, a, n, (const double[2]){b, 0})
#else
#define POW_SCALAR_f32(y, a, n, b) for (int64_t i_ = 0; i_ < (n); i_++) (y)[i_] = powf((a)[i_], b)
#endif
#define POW_SCALAR_f64(y, a, n, b) for (int64_t i_ = 0; i_ < (n); i_++) (y)[i_] = pow((a)[i_], b)
#define POW_LOOP(sfx, T)                                                       \
    static void pow_scalar_run_##sfx(T *y, const T *a, int64_t n, T b) {        \
        if (b == 2)                                                            \
            for (int64_t i = 0; i < n; i++) y[i] = a[i] * a[i];                \
        else                                                                   \
            POW_SCALAR_##sfx(y, a, n, b);                                      \
    }                                                                          \
    static void loop_pow_##sfx(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        if (strides[2] != 0) {                                                 \
            loop_pow_any_##sfx(ptrs, strides, n, ctx);                         \
            return;                                                            \
        }                                                                      \
        T b = *(const T *)ptrs[2];                                             \
        if (strides[0] == (int64_t)sizeof(T) && strides[1] == (int64_t)sizeof(T)) { \
            pow_scalar_run_##sfx((T *)ptrs[0], (const T *)ptrs[1], n, b);      \
            return;                                                            \
        }                                                                      \
        T buf[POW_BUF];                                                        \
        for (int64_t i0 = 0; i0 < n; i0 += POW_BUF) {                          \
            int64_t m = n - i0 < POW_BUF ? n - i0 : POW_BUF;                   \
            for (int64_t i = 0; i < m; i++) buf[i] = *(const T *)(ptrs[1] + (i0 + i) * strides[1]); \
            pow_scalar_run_##sfx(buf, buf, m, b);                              \
            for (int64_t i = 0; i < m; i++) *(T *)(ptrs[0] + (i0 + i) * strides[0]) = buf[i]; \
        }                                                                      \
    }
POW_LOOP(f32, float)
POW_LOOP(f64, double)
#undef POW_LOOP

#define TABLE_ALL(op)                                                          \
    static const jag_loop_fn op##_loops[JAG_DTYPE_COUNT] = {                   \
        loop_##op##_f32, loop_##op##_f64, loop_##op##_i32, loop_##op##_i64, loop_##op##_b};
#define TABLE_NUMBERS(op)                                                      \
    static const jag_loop_fn op##_loops[JAG_DTYPE_COUNT] = {                   \
        loop_##op##_f32, loop_##op##_f64, loop_##op##_i32, loop_##op##_i64, NULL};
TABLE_ALL(add)
TABLE_NUMBERS(sub)
TABLE_ALL(mul)
TABLE_NUMBERS(pow)
TABLE_ALL(maximum)
TABLE_ALL(minimum)
static const jag_loop_fn div_loops[JAG_DTYPE_COUNT] = {[JAG_FLOAT32] = loop_div_f32, [JAG_FLOAT64] = loop_div_f64};

/* Comparisons: T operands, bool (uint8_t) result, every compute dtype. */
#define COMPARE_LOOPS(op, OPER)                                                \
    BINARY_LOOP(loop_##op##_f32, float, uint8_t, NO_PRE, (uint8_t)(a OPER b))   \
    BINARY_LOOP(loop_##op##_f64, double, uint8_t, NO_PRE, (uint8_t)(a OPER b))  \
    BINARY_LOOP(loop_##op##_i32, int32_t, uint8_t, NO_PRE, (uint8_t)(a OPER b)) \
    BINARY_LOOP(loop_##op##_i64, int64_t, uint8_t, NO_PRE, (uint8_t)(a OPER b)) \
    BINARY_LOOP(loop_##op##_b, uint8_t, uint8_t, NO_PRE, (uint8_t)(a OPER b))   \
    TABLE_ALL(op)
COMPARE_LOOPS(eq, ==)
COMPARE_LOOPS(ne, !=)
COMPARE_LOOPS(lt, <)
COMPARE_LOOPS(le, <=)
COMPARE_LOOPS(gt, >)
COMPARE_LOOPS(ge, >=)
#undef COMPARE_LOOPS

/* where: ptrs[0] is y, [1] cond (bool), [2] a, [3] b (type T). */
#define WHERE_LOOP(sfx, T)                                                     \
    static void loop_where_##sfx(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        (void)ctx;                                                             \
        const int64_t st = (int64_t)sizeof(T);                                 \
        if (strides[0] == st && strides[1] == 1 && strides[2] == st && strides[3] == st) { \
            T *restrict y = (T *)ptrs[0];                                      \
            const uint8_t *restrict c = (const uint8_t *)ptrs[1];              \
            const T *restrict a = (const T *)ptrs[2], *restrict b = (const T *)ptrs[3]; \
            for (int64_t i = 0; i < n; i++) {                                  \
                const T av = a[i], bv = b[i];                                  \
                y[i] = c[i] ? av : bv;                                         \
            }                                                                  \
        } else if (strides[0] == st && strides[1] == 1 && (strides[2] == 0) != (strides[3] == 0) && \
                   (strides[2] == st || strides[3] == st)) {                   \
            /* one side a broadcast scalar (masked_fill): a select against a \
             * constant, which vectorises; the strided loop below does not */ \
            T *restrict y = (T *)ptrs[0];                                      \
            const uint8_t *restrict c = (const uint8_t *)ptrs[1];              \
            if (strides[2] == 0) {                                             \
                const T av = *(const T *)ptrs[2];                              \
                const T *restrict b = (const T *)ptrs[3];                      \
                for (int64_t i = 0; i < n; i++) {                              \
                    const T bv = b[i];                                         \
                    y[i] = c[i] ? av : bv;                                     \
                }                                                              \
            } else {                                                           \
                const T *restrict a = (const T *)ptrs[2];                      \
                const T bv = *(const T *)ptrs[3];                              \
                for (int64_t i = 0; i < n; i++) {                              \
                    const T av = a[i];                                         \
                    y[i] = c[i] ? av : bv;                                     \
                }                                                              \
            }                                                                  \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++) {                                  \
                const T av = *(const T *)(ptrs[2] + i * strides[2]);           \
                const T bv = *(const T *)(ptrs[3] + i * strides[3]);           \
                *(T *)(ptrs[0] + i * strides[0]) = *(const uint8_t *)(ptrs[1] + i * strides[1]) ? av : bv; \
            }                                                                  \
        }                                                                      \
    }
WHERE_LOOP(f32, float)
WHERE_LOOP(f64, double)
WHERE_LOOP(i32, int32_t)
WHERE_LOOP(i64, int64_t)
WHERE_LOOP(b, uint8_t)
#undef WHERE_LOOP
TABLE_ALL(where)

/* clamp: ptrs[0] is y, [1] x (type T); ctx the bounds, two jag__pw_scalar
 * of type T. Two selects: NaN fails both tests and stays. */
#define CLAMP_LOOP(sfx, T)                                                     \
    static void loop_clamp_##sfx(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx) { \
        const jag__pw_scalar *bound = ctx;                                     \
        const T lo = *(const T *)&bound[0], hi = *(const T *)&bound[1];        \
        if (strides[0] == (int64_t)sizeof(T) && strides[1] == (int64_t)sizeof(T)) { \
            T *restrict y = (T *)ptrs[0];                                      \
            const T *restrict x = (const T *)ptrs[1];                          \
            for (int64_t i = 0; i < n; i++) {                                  \
                const T v = x[i];                                              \
                y[i] = v < lo ? lo : v > hi ? hi : v;                          \
            }                                                                  \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++) {                                  \
                const T v = *(const T *)(ptrs[1] + i * strides[1]);            \
                *(T *)(ptrs[0] + i * strides[0]) = v < lo ? lo : v > hi ? hi : v; \
            }                                                                  \
        }                                                                      \
    }
CLAMP_LOOP(f32, float)
CLAMP_LOOP(f64, double)
CLAMP_LOOP(i32, int32_t)
CLAMP_LOOP(i64, int64_t)
#undef CLAMP_LOOP
static const jag_loop_fn clamp_loops[JAG_DTYPE_COUNT] = {loop_clamp_f32, loop_clamp_f64, loop_clamp_i32, loop_clamp_i64, NULL};

/* ---- kernels ------------------------------------------------------------------ */

/* One operand of a loop: its base address, element strides over the output
 * shape (0 on broadcast dims) and element size. */
typedef struct {
    char *base;
    int64_t strides[JAG_MAX_DIMS];
    size_t elem;
} loop_operand;

static loop_operand tensor_operand(const jag_tensor *t, const jag_tensor *y) {
    loop_operand o = {.base = jag__ptr(t), .elem = jag_dtype_size(t->dtype)};
    jag__broadcast_strides(t, y->sizes, y->ndim, o.strides);
    return o;
}

/* A scalar: stride 0 everywhere. */
static loop_operand scalar_operand(jag__pw_scalar *s, jag_dtype dtype) {
    loop_operand o = {.base = (char *)s, .elem = jag_dtype_size(dtype)};
    return o;
}

/* Run loop fn over y (contiguous, operand 0) and the inputs. */
/* grain: the loop's JAG_GRAIN_* family (internal.h) */
static void run_loop(jag_tensor *y, const loop_operand *in, int n_in, jag_loop_fn fn, void *ctx, int64_t grain) {
    char *base[JAG_ITER_MAX_OPS] = {jag__ptr(y)};
    const int64_t *strides[JAG_ITER_MAX_OPS] = {y->strides};
    size_t elem[JAG_ITER_MAX_OPS] = {jag_dtype_size(y->dtype)};
    for (int k = 0; k < n_in; k++) {
        base[k + 1] = in[k].base;
        strides[k + 1] = in[k].strides;
        elem[k + 1] = in[k].elem;
    }
    jag_iter it;
    jag__iter_init(&it, y->sizes, y->ndim, n_in + 1, base, strides, elem);
    jag__iter_run_grain(&it, grain, fn, ctx);
}

/* Every op's loops by compute dtype, indexed by jag_binary_fn. */
static const jag_loop_fn *const binary_loops[JAG_BINARY_FN_COUNT] = {
    [JAG_BINARY_add] = add_loops,
#define LOOPS_ENTRY(name) [JAG_BINARY_##name] = name##_loops,
    JAG_BINARY_OP_LIST(LOOPS_ENTRY)
#undef LOOPS_ENTRY
};

// a (...), b (...) or a scalar, y broadcast(a, b) contiguous: y = f(a, b) in dtype `compute`
jag_status jag__binary_kernel(const char *op, jag_binary_fn f, const jag_tensor *a0, const jag_tensor *b0,
                              double b_scalar, double alpha, jag_dtype compute, jag_tensor *y) {
    if (jag_numel(y) == 0) return JAG_OK;
    JAG_ASSERT(f >= 0 && f < JAG_BINARY_FN_COUNT);
    jag_loop_fn fn = binary_loops[f][compute];
    JAG_ASSERT(fn != NULL);
    jag_tensor *ac, *bc = NULL;
    const jag_tensor *a = jag__pw_as_dtype(op, a0, compute, &ac);
    const jag_tensor *b = a && b0 ? jag__pw_as_dtype(op, b0, compute, &bc) : NULL;
    if (!a || (b0 && !b)) {
        jag_release(ac);
        return jag_last_status();
    }
    jag__pw_scalar s, alpha_s;
    jag__store_from_double(&alpha_s, compute, alpha);
    loop_operand in[2] = {tensor_operand(a, y)};
    if (b) {
        in[1] = tensor_operand(b, y);
    } else {
        jag__store_from_double(&s, compute, b_scalar);
        in[1] = scalar_operand(&s, compute);
    }
    /* pow calls exp and log per element (COMPUTE); the rest are an
     * arithmetic op or a compare per element read (MEMORY) */
    run_loop(y, in, 2, fn, f == JAG_BINARY_add ? &alpha_s : NULL, f == JAG_BINARY_pow ? JAG_GRAIN_COMPUTE : JAG_GRAIN_MEMORY);
    jag_release(ac);
    jag_release(bc);
    return JAG_OK;
}

// cond (...) bool, a (...), b (...), y broadcast(cond, a, b): y = cond ? a : b
jag_status jag__where_kernel(const char *op, const jag_tensor *cond, const jag_tensor *a0, const jag_tensor *b0,
                             jag_tensor *y) {
    if (jag_numel(y) == 0) return JAG_OK;
    jag_tensor *ac, *bc = NULL;
    const jag_tensor *a = jag__pw_as_dtype(op, a0, y->dtype, &ac);
    const jag_tensor *b = a ? jag__pw_as_dtype(op, b0, y->dtype, &bc) : NULL;
    if (!b) {
        jag_release(ac);
        return jag_last_status();
    }
    loop_operand in[3] = {tensor_operand(cond, y), tensor_operand(a, y), tensor_operand(b, y)};
    run_loop(y, in, 3, where_loops[y->dtype], NULL, JAG_GRAIN_MEMORY);
    jag_release(ac);
    jag_release(bc);
    return JAG_OK;
}

/* A bound in dtype dt: the dtype's own extreme for an infinite bound of an
 * integer dtype (clamp's META function lets only lo = -inf and hi = +inf
 * through). */
static void clamp_bound(jag__pw_scalar *s, jag_dtype dt, double v) {
    if (!jag_dtype_is_floating(dt) && isinf(v)) {
        bool neg = v < 0;
        if (dt == JAG_INT32) s->i32 = neg ? INT32_MIN : INT32_MAX;
        else s->i64 = neg ? INT64_MIN : INT64_MAX;
        return;
    }
    jag__store_from_double(s, dt, v);
}

// x (...) any strides and dtype, y (...) contiguous: y = min(max(x, lo), hi)
jag_status jag__clamp_kernel(const char *op, const jag_tensor *x0, double lo, double hi, jag_tensor *y) {
    if (jag_numel(y) == 0) return JAG_OK;
    jag_tensor *xc;
    const jag_tensor *x = jag__pw_as_dtype(op, x0, y->dtype, &xc);
    if (!x) return jag_last_status();
    jag__pw_scalar bound[2];
    clamp_bound(&bound[0], y->dtype, lo);
    clamp_bound(&bound[1], y->dtype, hi);
    loop_operand in[1] = {tensor_operand(x, y)};
    run_loop(y, in, 1, clamp_loops[y->dtype], bound, JAG_GRAIN_MEMORY);
    jag_release(xc);
    return JAG_OK;
}

/* ---- naive reference ----------------------------------------------------------- */

/* The textbook formula of each op in double, on operands already rounded
 * through the dtype `compute` the op computes in. */
static double ref_value(jag_binary_fn f, double a, double b, double alpha, jag_dtype compute) {
    switch (f) {
    case JAG_BINARY_add: return a + alpha * b;
    case JAG_BINARY_sub: return a - b;
    case JAG_BINARY_mul: return a * b;
    case JAG_BINARY_div: return a / b;
    case JAG_BINARY_pow:
        if (!jag_dtype_is_floating(compute) && b < 0) /* integer: truncated toward zero */
            return a == 1 ? 1 : a == -1 ? (fmod(b, 2) != 0 ? -1 : 1) : 0;
        return pow(a, b);
    case JAG_BINARY_maximum: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case JAG_BINARY_minimum: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case JAG_BINARY_eq: return a == b;
    case JAG_BINARY_ne: return a != b;
    case JAG_BINARY_lt: return a < b;
    case JAG_BINARY_le: return a <= b;
    case JAG_BINARY_gt: return a > b;
    case JAG_BINARY_ge: return a >= b;
    default: JAG_ASSERT(!"not a binary op"); return 0;
    }
}

/* Element `idx` of t broadcast to an output of `ndim` dims, as double. */
static double ref_load(const jag_tensor *t, const int64_t *idx, int ndim) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) {
        int od = d + ndim - t->ndim;
        if (t->sizes[d] != 1) off += idx[od] * t->strides[d];
    }
    return jag__load_as_double(jag__ptr(t) + off * (int64_t)jag_dtype_size(t->dtype), t->dtype);
}

/* y's flat index e advanced: idx is its multi-index over y's sizes. */
static void ref_next(const jag_tensor *y, int64_t *idx) {
    for (int d = y->ndim - 1; d >= 0; d--) {
        if (++idx[d] < y->sizes[d]) break;
        idx[d] = 0;
    }
}

static void ref_store(jag_tensor *y, int64_t e, double v) {
    jag__store_from_double(jag__ptr(y) + e * (int64_t)jag_dtype_size(y->dtype), y->dtype, v);
}

// a, b (or the scalar b_scalar) broadcast to y (contiguous): y = f(a, b), the
// operands (and alpha) rounded through `compute`
void jag__binary_reference(jag_binary_fn f, const jag_tensor *a, const jag_tensor *b, double b_scalar, double alpha,
                           jag_dtype compute, jag_tensor *y) {
    alpha = jag__pw_round_to(alpha, compute);
    double scalar = b ? 0 : jag__pw_round_to(b_scalar, compute);
    int64_t n = jag_numel(y), idx[JAG_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++, ref_next(y, idx)) {
        double av = jag__pw_round_to(ref_load(a, idx, y->ndim), compute);
        double bv = b ? jag__pw_round_to(ref_load(b, idx, y->ndim), compute) : scalar;
        ref_store(y, e, ref_value(f, av, bv, alpha, compute));
    }
}

// cond, a, b broadcast to y (contiguous): y = cond ? a : b, a and b rounded
// through y's dtype
void jag__where_reference(const jag_tensor *cond, const jag_tensor *a, const jag_tensor *b, jag_tensor *y) {
    int64_t n = jag_numel(y), idx[JAG_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++, ref_next(y, idx)) {
        double av = jag__pw_round_to(ref_load(a, idx, y->ndim), y->dtype);
        double bv = jag__pw_round_to(ref_load(b, idx, y->ndim), y->dtype);
        ref_store(y, e, ref_load(cond, idx, y->ndim) != 0 ? av : bv);
    }
}

// x (...) -> y (contiguous, x's shape): through double, the bounds rounded
// through y's dtype (an integer dtype's infinite bound bounds nothing)
void jag__clamp_reference(const jag_tensor *x, double lo, double hi, jag_tensor *y) {
    if (!isinf(lo)) lo = jag__pw_round_to(lo, y->dtype);
    if (!isinf(hi)) hi = jag__pw_round_to(hi, y->dtype);
    int64_t n = jag_numel(y), idx[JAG_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++, ref_next(y, idx)) {
        double v = jag__pw_round_to(ref_load(x, idx, y->ndim), y->dtype);
        if (!isnan(v)) v = v < lo ? lo : v > hi ? hi : v;
        ref_store(y, e, v);
    }
}
