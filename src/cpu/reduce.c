/*
 * reduce.c — reductions over any set of dims: sum, mean, prod, amax, amin,
 * var, std, logsumexp, and the index reductions max_dim, min_dim, argmax,
 * argmin: the typed kernel and the naive reference (kernels.h). Their META
 * functions and the boxed adapters ops.def names are in
 * src/dispatch/reduce_op.c.
 *
 * How a reduction runs. x's dims split into KEPT dims (they index the output,
 * in order) and REDUCED dims. Each group drops size-1 dims and merges dims
 * that are contiguous with each other; order-insensitive ops sort the reduced
 * dims by stride first (largest first), so that any layout whose reduced
 * elements are dense reads them as one run. Then one of three layouts runs:
 *
 *   ROW   the innermost reduced dim has stride 1: output element n reduces RO
 *         pieces of Ri contiguous elements (one plain row when RO == 1).
 *         Pieces are cut into segments of at most SEG elements; a segment is
 *         reduced with LANES independent accumulators (vectorised, no
 *         -ffast-math needed), and segments are combined pairwise along a
 *         fixed binary tree (float32 on AVX-512: sum and mean in eight
 *         vectors of doubles, amax and amin in four of floats; logsumexp
 *         of finite values with vecmath.h's exp, see lse_leaf_fast_f32).
 *         Float32 accumulates in float64. Rows are shared
 *         out across threads; when there are fewer rows than threads, the
 *         tree of each row is. The tree is fixed, so the result does not
 *         depend on the thread count.
 *   COL   the innermost kept dim has stride 1 (e.g. sum over dim 0 of a
 *         contiguous (R, C), or over dim 1 of its transpose): out[c]
 *         accumulates row after row, vectorised over c, in tiles of at most
 *         COL_BLOCK columns that threads share out. Order-free ops fold four
 *         rows per pass over the accumulators (a quarter of the traffic).
 *         Float32 accumulates in float64.
 *   COPY  neither: x is copied, kept dims first, into a contiguous (N, R)
 *         buffer, which is reduced as ROW.
 *
 * Before these: one middle dim of a contiguous float x of JAG_SEGMENTS_MIN
 * elements or more (logsumexp: any size), except prod, runs as uniform
 * segments of the ragged engine (ragged_reduce.c): COL gives threads whole
 * column tiles, so a few columns ran on one thread, and its logsumexp was
 * 8-20x slower.
 *
 * Every op is a "kind" per dtype: a leaf (one contiguous segment -> partial),
 * a combine (two partials of consecutive ranges -> one), a store (partial ->
 * output element), and the COL-mode pair col_add / col_store.
 */
#include "kernels.h"
#include "ragged_kernels.h" /* a middle dim as uniform segments */
#include "vecmath.h"

#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define LANES 16        /* independent accumulators in a leaf */
#define SEG 4096        /* elements in a leaf segment */
#define COL_BLOCK 1024  /* most columns in a COL-mode tile */
#define COL_MIN 128     /* fewest, when narrowing tiles to feed threads */
#define MAX_NODES 256   /* parallel subtrees of one long row */

/* A partial result of a contiguous range of a row. */
typedef struct red_part {
    double f0, f1;  /* float value or sum / mean; M2 (var) */
    int64_t i0, i1; /* integer value or sum; count (var) or index (arg ops) */
} red_part;

typedef struct red_ctx {
    int64_t correction; /* var / std */
} red_ctx;

typedef struct red_kind {
    /* p[0..n) contiguous; `start` is p[0]'s position in the reduced range */
    red_part (*leaf)(const char *p, int64_t n, int64_t start);
    /* a covers the range just before b */
    red_part (*combine)(red_part a, red_part b);
    /* write output element o (of every output) from the row's partial;
     * count is the number of elements reduced (0: `empty` is passed) */
    void (*store)(char *const *outs, int64_t o, red_part v, int64_t count, const red_ctx *ctx);
    /* COL mode: fold rows r0..r0+nrows (w contiguous elements each, rows
     * rs bytes apart) into the accumulators (row 0 initialises them), then
     * write outputs o..o+w */
    void (*col_add)(void *acc, const char *p, int64_t rs, int64_t nrows, int64_t w, int64_t r0);
    void (*col_store)(char *const *outs, int64_t o, const void *acc, int64_t w, int64_t count,
                      const red_ctx *ctx);
    red_part empty; /* the result of reducing nothing */
    bool ordered;   /* reduced dims keep their order (index ops) */
} red_kind;

/* COL-mode accumulators: up to two 8-byte slots per column. */
#define COL_SLOT2(acc) ((void *)((char *)(acc) + COL_BLOCK * 8))

/* ------------------------------------------------------------------------ */
/* Typed leaves, combines and stores                                        */
/* ------------------------------------------------------------------------ */

#define F_ACC(v) ((double)(v))
#define I_ACC(v) ((uint64_t)(int64_t)(v))
#define PACK_F(v) ((red_part){.f0 = (double)(v)})
#define PACK_I(v) ((red_part){.i0 = (int64_t)(v)})
#define GET_F(p) ((p).f0)
#define GET_I(p) ((p).i0)

/* NaN is larger (smaller) than everything and the first NaN wins. */
#define MAX_BETTER_F(v, a) ((v) > (a) || ((v) != (v) && (a) == (a)))
#define MIN_BETTER_F(v, a) ((v) < (a) || ((v) != (v) && (a) == (a)))
#define MAX_BETTER_I(v, a) ((v) > (a))
#define MIN_BETTER_I(v, a) ((v) < (a))
#define IS_NAN_F(v) ((v) != (v))
#define IS_NAN_I(v) 0

/* Fold LANES accumulators pairwise into acc[0]. */
#define FOLD_LANES(acc, OP)                                                    \
    for (int w_ = LANES / 2; w_ > 0; w_ /= 2)                                  \
        for (int j_ = 0; j_ < w_; j_++) acc[j_] = OP(acc[j_], acc[j_ + w_])
#define OP_ADD(a, b) ((a) + (b))
#define OP_MUL(a, b) ((a) * (b))

static red_part comb_add_f(red_part a, red_part b) { return PACK_F(a.f0 + b.f0); }
static red_part comb_mul_f(red_part a, red_part b) { return PACK_F(a.f0 * b.f0); }
static red_part comb_add_i(red_part a, red_part b) { return PACK_I((uint64_t)a.i0 + (uint64_t)b.i0); }
static red_part comb_mul_i(red_part a, red_part b) { return PACK_I((uint64_t)a.i0 * (uint64_t)b.i0); }

/* sum and prod: ACC is double for floats, uint64 for integers (wrapping as
 * int64 does in torch, without signed-overflow UB). */
#define DEF_ACCUM(NAME, SUF, T, ACC, TO_ACC, OP, INIT, PACK)                   \
    /* p is (n), reduced to one value (float32 sum on AVX-512:              \
     * sum_leaf_fast_f32) */                                                   \
    __attribute__((unused)) static red_part NAME##_leaf_##SUF(const char *pc, int64_t n, int64_t start) { \
        (void)start;                                                           \
        const T *restrict p = (const T *)pc;                                   \
        ACC acc[LANES];                                                        \
        for (int j = 0; j < LANES; j++) acc[j] = INIT;                         \
        int64_t i = 0;                                                         \
        for (; i + LANES <= n; i += LANES) {                                   \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) acc[j] = OP(acc[j], TO_ACC(p[i + j])); \
        }                                                                      \
        for (int j = 0; i < n; i++, j++) acc[j] = OP(acc[j], TO_ACC(p[i]));    \
        FOLD_LANES(acc, OP);                                                   \
        return PACK(acc[0]);                                                   \
    }                                                                          \
    /* p is (nrows, w) with rows rs bytes apart; acc is (w) */                 \
    static void NAME##_col_##SUF(void *accv, const char *pc, int64_t rs, int64_t nrows, int64_t w, \
                                 int64_t r0) {                                 \
        ACC *restrict a = accv;                                                \
        int64_t i = 0;                                                         \
        if (r0 == 0) {                                                         \
            const T *restrict p = (const T *)pc;                               \
            for (int64_t c = 0; c < w; c++) a[c] = TO_ACC(p[c]);               \
            i = 1;                                                             \
        }                                                                      \
        for (; i + 4 <= nrows; i += 4) {                                       \
            const T *restrict p0 = (const T *)(pc + i * rs);                   \
            const T *restrict p1 = (const T *)(pc + (i + 1) * rs);             \
            const T *restrict p2 = (const T *)(pc + (i + 2) * rs);             \
            const T *restrict p3 = (const T *)(pc + (i + 3) * rs);             \
            for (int64_t c = 0; c < w; c++)                                    \
                a[c] = OP(a[c], OP(OP(TO_ACC(p0[c]), TO_ACC(p1[c])), OP(TO_ACC(p2[c]), TO_ACC(p3[c])))); \
        }                                                                      \
        for (; i < nrows; i++) {                                               \
            const T *restrict p = (const T *)(pc + i * rs);                    \
            for (int64_t c = 0; c < w; c++) a[c] = OP(a[c], TO_ACC(p[c]));     \
        }                                                                      \
    }

DEF_ACCUM(sum, f32, float, double, F_ACC, OP_ADD, 0.0, PACK_F)
DEF_ACCUM(sum, f64, double, double, F_ACC, OP_ADD, 0.0, PACK_F)
DEF_ACCUM(sum, i32, int32_t, uint64_t, I_ACC, OP_ADD, 0, PACK_I)
DEF_ACCUM(sum, i64, int64_t, uint64_t, I_ACC, OP_ADD, 0, PACK_I)
DEF_ACCUM(sum, b, uint8_t, uint64_t, I_ACC, OP_ADD, 0, PACK_I)
DEF_ACCUM(prod, f32, float, double, F_ACC, OP_MUL, 1.0, PACK_F)
DEF_ACCUM(prod, f64, double, double, F_ACC, OP_MUL, 1.0, PACK_F)
DEF_ACCUM(prod, i32, int32_t, uint64_t, I_ACC, OP_MUL, 1, PACK_I)
DEF_ACCUM(prod, i64, int64_t, uint64_t, I_ACC, OP_MUL, 1, PACK_I)
DEF_ACCUM(prod, b, uint8_t, uint64_t, I_ACC, OP_MUL, 1, PACK_I)

/* Stores for sum / prod / mean. OT is the output type, ACC the COL type. */
#define DEF_STORE_ACC(NAME, SUF, OT, ACC, GET, DIVIDE)                         \
    static void NAME##_store_##SUF(char *const *outs, int64_t o, red_part v, int64_t count, \
                                   const red_ctx *ctx) {                       \
        (void)ctx, (void)count;                                                \
        ((OT *)outs[0])[o] = (OT)(DIVIDE(GET(v), count));                      \
    }                                                                          \
    static void NAME##_cstore_##SUF(char *const *outs, int64_t o, const void *accv, int64_t w, \
                                    int64_t count, const red_ctx *ctx) {       \
        (void)ctx, (void)count;                                                \
        const ACC *restrict a = accv;                                          \
        OT *restrict y = (OT *)outs[0] + o;                                    \
        for (int64_t c = 0; c < w; c++) y[c] = (OT)(DIVIDE(a[c], count));      \
    }
#define NO_DIVIDE(v, n) (v)
#define MEAN_DIVIDE(v, n) ((v) / (double)(n))

DEF_STORE_ACC(sum, f32, float, double, GET_F, NO_DIVIDE)
DEF_STORE_ACC(sum, f64, double, double, GET_F, NO_DIVIDE)
DEF_STORE_ACC(sum, i, int64_t, uint64_t, (uint64_t)GET_I, NO_DIVIDE)
DEF_STORE_ACC(mean, f32, float, double, GET_F, MEAN_DIVIDE)
DEF_STORE_ACC(mean, f64, double, double, GET_F, MEAN_DIVIDE)

/* amax / amin (leaf: the extremum with LANES accumulators) and the index
 * ops (ileaf: each lane also keeps the index of its first best element; a
 * tie between lanes goes to the smaller index). */
#define DEF_EXTREMUM(NAME, SUF, T, BETTER, IS_NAN, PACK, GET)                  \
    static red_part NAME##_leaf_##SUF(const char *pc, int64_t n, int64_t start) { \
        (void)start;                                                           \
        const T *restrict p = (const T *)pc;                                   \
        T acc[LANES];                                                          \
        for (int j = 0; j < LANES; j++) acc[j] = p[0];                         \
        int64_t i = 0;                                                         \
        for (; i + LANES <= n; i += LANES) {                                   \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) acc[j] = BETTER(p[i + j], acc[j]) ? p[i + j] : acc[j]; \
        }                                                                      \
        for (; i < n; i++) acc[0] = BETTER(p[i], acc[0]) ? p[i] : acc[0];      \
        for (int w = LANES / 2; w > 0; w /= 2)                                 \
            for (int j = 0; j < w; j++) acc[j] = BETTER(acc[j + w], acc[j]) ? acc[j + w] : acc[j]; \
        return PACK(acc[0]);                                                   \
    }                                                                          \
    static red_part NAME##_ileaf_##SUF(const char *pc, int64_t n, int64_t start) { \
        const T *restrict p = (const T *)pc;                                   \
        T acc[LANES];                                                          \
        int64_t ix[LANES];                                                     \
        for (int j = 0; j < LANES; j++) acc[j] = p[0], ix[j] = 0;              \
        int64_t i = 0;                                                         \
        for (; i + LANES <= n; i += LANES) {                                   \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) {                                  \
                T v = p[i + j];                                                \
                bool b = BETTER(v, acc[j]);                                    \
                acc[j] = b ? v : acc[j];                                       \
                ix[j] = b ? i + j : ix[j];                                     \
            }                                                                  \
        }                                                                      \
        for (; i < n; i++)                                                     \
            if (BETTER(p[i], acc[0])) acc[0] = p[i], ix[0] = i;                \
        int best = 0;                                                          \
        for (int j = 1; j < LANES; j++)                                        \
            if (BETTER(acc[j], acc[best]) || (!BETTER(acc[best], acc[j]) && ix[j] < ix[best])) best = j; \
        red_part r = PACK(acc[best]);                                          \
        r.i1 = start + ix[best];                                               \
        return r;                                                              \
    }                                                                          \
    static red_part NAME##_comb_##SUF(red_part a, red_part b) {               \
        return BETTER(GET(b), GET(a)) ? b : a;                                 \
    }                                                                          \
    /* values only; p is (nrows, w), rows rs bytes apart; acc is (w) of T */  \
    static void NAME##_col_##SUF(void *accv, const char *pc, int64_t rs, int64_t nrows, int64_t w, \
                                 int64_t r0) {                                 \
        T *restrict a = accv;                                                  \
        int64_t i = 0;                                                         \
        if (r0 == 0) {                                                         \
            memcpy(a, pc, (size_t)w * sizeof(T));                              \
            i = 1;                                                             \
        }                                                                      \
        for (; i + 4 <= nrows; i += 4) {                                       \
            const T *restrict p0 = (const T *)(pc + i * rs);                   \
            const T *restrict p1 = (const T *)(pc + (i + 1) * rs);             \
            const T *restrict p2 = (const T *)(pc + (i + 2) * rs);             \
            const T *restrict p3 = (const T *)(pc + (i + 3) * rs);             \
            for (int64_t c = 0; c < w; c++) {                                  \
                T u = BETTER(p1[c], p0[c]) ? p1[c] : p0[c];                    \
                T v = BETTER(p3[c], p2[c]) ? p3[c] : p2[c];                    \
                u = BETTER(v, u) ? v : u;                                      \
                a[c] = BETTER(u, a[c]) ? u : a[c];                             \
            }                                                                  \
        }                                                                      \
        for (; i < nrows; i++) {                                               \
            const T *restrict p = (const T *)(pc + i * rs);                    \
            for (int64_t c = 0; c < w; c++) a[c] = BETTER(p[c], a[c]) ? p[c] : a[c]; \
        }                                                                      \
    }                                                                          \
    /* values and indices, row by row (the first best row wins); acc is (w)   \
     * of T then, at COL_SLOT2, (w) of int64 */                                \
    static void NAME##_icol_##SUF(void *accv, const char *pc, int64_t rs, int64_t nrows, int64_t w, \
                                  int64_t r0) {                                \
        T *restrict a = accv;                                                  \
        int64_t *restrict ix = COL_SLOT2(accv);                                \
        int64_t i = 0;                                                         \
        if (r0 == 0) {                                                         \
            memcpy(a, pc, (size_t)w * sizeof(T));                              \
            for (int64_t c = 0; c < w; c++) ix[c] = 0;                         \
            i = 1;                                                             \
        }                                                                      \
        for (; i + 4 <= nrows; i += 4) { /* best of 4 rows, then vs acc */  \
            const T *restrict p0 = (const T *)(pc + i * rs);                   \
            const T *restrict p1 = (const T *)(pc + (i + 1) * rs);             \
            const T *restrict p2 = (const T *)(pc + (i + 2) * rs);             \
            const T *restrict p3 = (const T *)(pc + (i + 3) * rs);             \
            int64_t r = r0 + i;                                                \
            for (int64_t c = 0; c < w; c++) {                                  \
                T u = p0[c];                                                   \
                int64_t ui = r;                                                \
                bool b = BETTER(p1[c], u);                                     \
                u = b ? p1[c] : u, ui = b ? r + 1 : ui;                        \
                b = BETTER(p2[c], u);                                          \
                u = b ? p2[c] : u, ui = b ? r + 2 : ui;                        \
                b = BETTER(p3[c], u);                                          \
                u = b ? p3[c] : u, ui = b ? r + 3 : ui;                        \
                b = BETTER(u, a[c]);                                           \
                a[c] = b ? u : a[c];                                           \
                ix[c] = b ? ui : ix[c];                                        \
            }                                                                  \
        }                                                                      \
        for (; i < nrows; i++) {                                               \
            const T *restrict p = (const T *)(pc + i * rs);                    \
            int64_t r = r0 + i;                                                \
            for (int64_t c = 0; c < w; c++) {                                  \
                bool b = BETTER(p[c], a[c]);                                   \
                a[c] = b ? p[c] : a[c];                                        \
                ix[c] = b ? r : ix[c];                                         \
            }                                                                  \
        }                                                                      \
    }

#define DEF_EXTREMUM_ALL(NAME, BF, BI)                                         \
    DEF_EXTREMUM(NAME, f32, float, BF, IS_NAN_F, PACK_F, GET_F)                \
    DEF_EXTREMUM(NAME, f64, double, BF, IS_NAN_F, PACK_F, GET_F)               \
    DEF_EXTREMUM(NAME, i32, int32_t, BI, IS_NAN_I, PACK_I, GET_I)              \
    DEF_EXTREMUM(NAME, i64, int64_t, BI, IS_NAN_I, PACK_I, GET_I)              \
    DEF_EXTREMUM(NAME, b, uint8_t, BI, IS_NAN_I, PACK_I, GET_I)
DEF_EXTREMUM_ALL(max, MAX_BETTER_F, MAX_BETTER_I)
DEF_EXTREMUM_ALL(min, MIN_BETTER_F, MIN_BETTER_I)

/* Stores: values (amax), indices (argmax), both (max_dim). */
#define DEF_STORE_EXT(SUF, T, GET)                                             \
    static void val_store_##SUF(char *const *outs, int64_t o, red_part v, int64_t count, \
                                const red_ctx *ctx) {                          \
        (void)ctx, (void)count;                                                \
        ((T *)outs[0])[o] = (T)GET(v);                                         \
    }                                                                          \
    static void val_cstore_##SUF(char *const *outs, int64_t o, const void *accv, int64_t w, \
                                 int64_t count, const red_ctx *ctx) {          \
        (void)ctx, (void)count;                                                \
        memcpy((T *)outs[0] + o, accv, (size_t)w * sizeof(T));                 \
    }                                                                          \
    static void both_store_##SUF(char *const *outs, int64_t o, red_part v, int64_t count, \
                                 const red_ctx *ctx) {                         \
        (void)ctx, (void)count;                                                \
        ((T *)outs[0])[o] = (T)GET(v);                                         \
        ((int64_t *)outs[1])[o] = v.i1;                                        \
    }                                                                          \
    static void both_cstore_##SUF(char *const *outs, int64_t o, const void *accv, int64_t w, \
                                  int64_t count, const red_ctx *ctx) {         \
        (void)ctx, (void)count;                                                \
        memcpy((T *)outs[0] + o, accv, (size_t)w * sizeof(T));                 \
        memcpy((int64_t *)outs[1] + o, COL_SLOT2(accv), (size_t)w * sizeof(int64_t)); \
    }
DEF_STORE_EXT(f32, float, GET_F)
DEF_STORE_EXT(f64, double, GET_F)
DEF_STORE_EXT(i32, int32_t, GET_I)
DEF_STORE_EXT(i64, int64_t, GET_I)
DEF_STORE_EXT(b, uint8_t, GET_I)

static void idx_store(char *const *outs, int64_t o, red_part v, int64_t count, const red_ctx *ctx) {
    (void)ctx, (void)count;
    ((int64_t *)outs[0])[o] = v.i1;
}

static void idx_cstore(char *const *outs, int64_t o, const void *accv, int64_t w, int64_t count,
                       const red_ctx *ctx) {
    (void)ctx, (void)count;
    memcpy((int64_t *)outs[0] + o, COL_SLOT2(accv), (size_t)w * sizeof(int64_t));
}

/* var / std. A leaf is two-pass (mean, then squared deviations); partials
 * merge with Chan's formula; COL mode runs Welford's update per column. */
#define DEF_VAR(SUF, T)                                                        \
    static red_part var_leaf_##SUF(const char *pc, int64_t n, int64_t start) { \
        (void)start;                                                           \
        const T *restrict p = (const T *)pc;                                   \
        double s[LANES] = {0}, q[LANES] = {0};                                 \
        int64_t i = 0;                                                         \
        for (; i + LANES <= n; i += LANES) {                                   \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) s[j] += (double)p[i + j];          \
        }                                                                      \
        for (int j = 0; i < n; i++, j++) s[j] += (double)p[i];                 \
        FOLD_LANES(s, OP_ADD);                                                 \
        double mean = s[0] / (double)n;                                        \
        for (i = 0; i + LANES <= n; i += LANES) {                              \
            _Pragma("omp simd")                                                \
            for (int j = 0; j < LANES; j++) {                                  \
                double d = (double)p[i + j] - mean;                            \
                q[j] += d * d;                                                 \
            }                                                                  \
        }                                                                      \
        for (int j = 0; i < n; i++, j++) {                                     \
            double d = (double)p[i] - mean;                                    \
            q[j] += d * d;                                                     \
        }                                                                      \
        FOLD_LANES(q, OP_ADD);                                                 \
        return (red_part){.f0 = mean, .f1 = q[0], .i0 = n};                    \
    }                                                                          \
    /* p is (nrows, w), rows rs bytes apart; acc: mean (w) then, at           \
     * COL_SLOT2, M2 (w) */                                                    \
    static void var_col_##SUF(void *accv, const char *pc, int64_t rs, int64_t nrows, int64_t w, int64_t r0) { \
        double *restrict mean = accv, *restrict m2 = COL_SLOT2(accv);          \
        int64_t i = 0;                                                         \
        if (r0 == 0) {                                                         \
            const T *restrict p = (const T *)pc;                               \
            for (int64_t c = 0; c < w; c++) mean[c] = (double)p[c], m2[c] = 0; \
            i = 1;                                                             \
        }                                                                      \
        for (; i < nrows; i++) {                                               \
            const T *restrict p = (const T *)(pc + i * rs);                    \
            double inv = 1.0 / (double)(r0 + i + 1);                           \
            for (int64_t c = 0; c < w; c++) {                                  \
                double x = (double)p[c], d = x - mean[c];                      \
                mean[c] += d * inv;                                            \
                m2[c] += d * (x - mean[c]);                                    \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    static void var_store_##SUF(char *const *outs, int64_t o, red_part v, int64_t count, \
                                const red_ctx *ctx) {                          \
        ((T *)outs[0])[o] = (T)var_finish(v.f1, count, ctx->correction);       \
    }                                                                          \
    static void var_cstore_##SUF(char *const *outs, int64_t o, const void *accv, int64_t w, \
                                 int64_t count, const red_ctx *ctx) {          \
        const double *m2 = COL_SLOT2(accv);                                    \
        for (int64_t c = 0; c < w; c++) ((T *)outs[0])[o + c] = (T)var_finish(m2[c], count, ctx->correction); \
    }                                                                          \
    static void std_store_##SUF(char *const *outs, int64_t o, red_part v, int64_t count, \
                                const red_ctx *ctx) {                          \
        ((T *)outs[0])[o] = (T)sqrt(var_finish(v.f1, count, ctx->correction)); \
    }                                                                          \
    static void std_cstore_##SUF(char *const *outs, int64_t o, const void *accv, int64_t w, \
                                 int64_t count, const red_ctx *ctx) {          \
        const double *m2 = COL_SLOT2(accv);                                    \
        for (int64_t c = 0; c < w; c++)                                        \
            ((T *)outs[0])[o + c] = (T)sqrt(var_finish(m2[c], count, ctx->correction)); \
    }

/* M2 / max(n - correction, 0), as torch: NaN for n == 0; inf or NaN when the
 * correction reaches the count. */
static double var_finish(double m2, int64_t n, int64_t correction) {
    if (n == 0) return NAN;
    double div = (double)n - (double)correction;
    return m2 / (div > 0 ? div : 0.0);
}

static red_part var_comb(red_part a, red_part b) {
    int64_t n = a.i0 + b.i0;
    double delta = b.f0 - a.f0, fb = (double)b.i0 / (double)n;
    return (red_part){.f0 = a.f0 + delta * fb, .f1 = a.f1 + b.f1 + delta * delta * (double)a.i0 * fb, .i0 = n};
}

DEF_VAR(f32, float)
DEF_VAR(f64, double)

/* logsumexp: a partial is (m, s) with the range's logsumexp m + log(s).
 * A NaN spreads; a +inf gives +inf; a range of only -inf gives -inf. A leaf
 * is two-pass (max, then sum of exp(x - max)); partials rescale to the
 * larger max; COL mode pushes one row at a time (online). */
static red_part lse_comb(red_part a, red_part b) {
    if (a.f0 != a.f0 || b.f0 != b.f0) return (red_part){.f0 = NAN};
    double m = a.f0 > b.f0 ? a.f0 : b.f0;
    if (isinf(m)) return (red_part){.f0 = m, .f1 = 1};
    double s = (a.f0 == -INFINITY ? 0 : a.f1 * exp(a.f0 - m)) + (b.f0 == -INFINITY ? 0 : b.f1 * exp(b.f0 - m));
    return (red_part){.f0 = m, .f1 = s};
}
static inline void lse_push(double *m, double *s, double x) {
    if (*m != *m) return;
    if (x != x) {
        *m = NAN;
        return;
    }
    if (x <= *m) {
        if (!isinf(*m)) *s += exp(x - *m);
    } else if (x == INFINITY) {
        *m = INFINITY;
    } else {
        *s = *m == -INFINITY ? 1.0 : *s * exp(*m - x) + 1.0;
        *m = x;
    }
}
static double lse_finish(double m, double s) { return m != m || isinf(m) ? m : m + log(s); }
#define DEF_LSE(SUF, T)                                                        \
    /* p is (n), reduced to (max, sum of exp(p - max)) */                      \
    static red_part lse_leaf_##SUF(const char *pc, int64_t n, int64_t start) { \
        (void)start;                                                           \
        const T *restrict p = (const T *)pc;                                   \
        double m = -INFINITY;                                                  \
        bool nan = false;                                                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            double x = (double)p[i];                                           \
            nan |= x != x;                                                     \
            m = x > m ? x : m;                                                 \
        }                                                                      \
        if (nan) return (red_part){.f0 = NAN};                                 \
        if (isinf(m)) return (red_part){.f0 = m, .f1 = 1};                     \
        double s[LANES] = {0};                                                 \
        int64_t i = 0;                                                         \
        for (; i + LANES <= n; i += LANES)                                     \
            for (int j = 0; j < LANES; j++) s[j] += exp((double)p[i + j] - m); \
        for (int j = 0; i < n; i++, j++) s[j] += exp((double)p[i] - m);        \
        FOLD_LANES(s, OP_ADD);                                                 \
        return (red_part){.f0 = m, .f1 = s[0]};                                \
    }                                                                          \
    /* p is (nrows, w), rows rs bytes apart; acc: max (w) then, at            \
     * COL_SLOT2, the scaled sum (w) */                                        \
    static void lse_col_##SUF(void *accv, const char *pc, int64_t rs, int64_t nrows, int64_t w, int64_t r0) { \
        double *restrict m = accv, *restrict s = COL_SLOT2(accv);              \
        if (r0 == 0)                                                           \
            for (int64_t c = 0; c < w; c++) m[c] = -INFINITY, s[c] = 0;        \
        for (int64_t i = 0; i < nrows; i++) {                                  \
            const T *restrict p = (const T *)(pc + i * rs);                    \
            for (int64_t c = 0; c < w; c++) lse_push(&m[c], &s[c], (double)p[c]); \
        }                                                                      \
    }                                                                          \
    static void lse_store_##SUF(char *const *outs, int64_t o, red_part v, int64_t count, const red_ctx *ctx) { \
        (void)count, (void)ctx;                                                \
        ((T *)outs[0])[o] = (T)lse_finish(v.f0, v.f1);                         \
    }                                                                          \
    static void lse_cstore_##SUF(char *const *outs, int64_t o, const void *accv, int64_t w, int64_t count, \
                                 const red_ctx *ctx) {                         \
        (void)count, (void)ctx;                                                \
        const double *m = accv, *s = COL_SLOT2(accv);                          \
        for (int64_t c = 0; c < w; c++) ((T *)outs[0])[o + c] = (T)lse_finish(m[c], s[c]); \
    }
DEF_LSE(f32, float)
DEF_LSE(f64, double)

#if defined(__AVX512F__)
#include <immintrin.h>
/* float32 amax / amin of a leaf on AVX-512: four vectors of 16 lanes (the
 * generic leaf's one vector was a chain of dependent selects, 112 us over
 * the last dim of (1024, 1024) floats against torch's 30), the tail
 * masked; a leaf with a NaN goes to the generic leaf, whose first NaN wins
 * (the NaN's own bits). */
#define EXT_LEAF_F32(NAME, OP, FILL)                                           \
    static red_part NAME##_leaf_fast_f32(const char *pc, int64_t n, int64_t start) { \
        const float *p = (const float *)pc;                                    \
        __m512 a[4];                                                           \
        __mmask16 nan = 0;                                                     \
        for (int k = 0; k < 4; k++) a[k] = _mm512_set1_ps(p[0]);               \
        int64_t i = 0;                                                         \
        for (; i + 64 <= n; i += 64)                                           \
            for (int k = 0; k < 4; k++) {                                      \
                __m512 v = _mm512_loadu_ps(p + i + 16 * k);                    \
                nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);                 \
                a[k] = OP(a[k], v);                                            \
            }                                                                  \
        for (; i < n; i += 16) {                                               \
            __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1); \
            __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(FILL), m, p + i);   \
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);                     \
            a[0] = OP(a[0], v);                                                \
        }                                                                      \
        if (nan) return NAME##_leaf_f32(pc, n, start);                         \
        return PACK_F(_mm512_reduce_##NAME##_ps(OP(OP(a[0], a[1]), OP(a[2], a[3])))); \
    }
EXT_LEAF_F32(max, _mm512_max_ps, -INFINITY)
EXT_LEAF_F32(min, _mm512_min_ps, INFINITY)
/* float32 sum of a leaf on AVX-512, in double as the generic leaf: eight
 * vectors of 8 lanes, each float widened from memory (the generic leaf's
 * two chains of dependent adds, with an extract per 16 floats, took 63 us
 * over the last dim of (1024, 1024) floats against torch's 27), the tail
 * masked */
static red_part sum_leaf_fast_f32(const char *pc, int64_t n, int64_t start) {
    (void)start;
    const float *p = (const float *)pc;
    __m512d a[8];
    for (int k = 0; k < 8; k++) a[k] = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 8; k++) a[k] = _mm512_add_pd(a[k], _mm512_cvtps_pd(_mm256_loadu_ps(p + i + 8 * k)));
    for (int k = 0; i < n; i += 8, k++) {
        __mmask8 m = (__mmask8)(n - i >= 8 ? 0xff : (1u << (n - i)) - 1);
        a[k] = _mm512_add_pd(a[k], _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, p + i)));
    }
    for (int k = 0; k < 4; k++) a[k] = _mm512_add_pd(a[k], a[k + 4]);
    return PACK_F(_mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a[0], a[1]), _mm512_add_pd(a[2], a[3]))));
}

/* the amax and amin kinds below take them (K_EXT pastes max_leaf_f32) */
#define max_leaf_f32 max_leaf_fast_f32
#define min_leaf_f32 min_leaf_fast_f32
#define SUM_LEAF_F32 sum_leaf_fast_f32
#elif defined(__AVX2__)
#include <immintrin.h>
/* The same leaves on AVX2 (8 lanes; AMD Zen, Intel client chips), the
 * tails element by element: over the last dim of (1024, 1024) floats on a
 * Zen 3 pair, best of 200 calls, the builds before and after in turn (the
 * generic leaves before): amax 88 -> 37-42 us, sum 60-79 -> 50-57 us
 * (torch about 38-60 and 40-50 from Python). */
#define EXT_LEAF_F32(NAME, OP, CMP)                                            \
    static red_part NAME##_leaf_fast_f32(const char *pc, int64_t n, int64_t start) { \
        const float *p = (const float *)pc;                                    \
        __m256 a[4], nan = _mm256_setzero_ps();                                \
        for (int k = 0; k < 4; k++) a[k] = _mm256_set1_ps(p[0]);               \
        int64_t i = 0;                                                         \
        for (; i + 32 <= n; i += 32)                                           \
            for (int k = 0; k < 4; k++) {                                      \
                __m256 v = _mm256_loadu_ps(p + i + 8 * k);                     \
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));    \
                a[k] = OP(a[k], v);                                            \
            }                                                                  \
        if (_mm256_movemask_ps(nan)) return NAME##_leaf_f32(pc, n, start);     \
        __m256 r = OP(OP(a[0], a[1]), OP(a[2], a[3]));                         \
        __m128 h = OP##_128(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1)); \
        h = OP##_128(h, _mm_movehl_ps(h, h));                                  \
        h = OP##_128(h, _mm_shuffle_ps(h, h, 1));                              \
        float m = _mm_cvtss_f32(h);                                            \
        for (; i < n; i++) {                                                   \
            if (p[i] != p[i]) return NAME##_leaf_f32(pc, n, start);            \
            m = p[i] CMP m ? p[i] : m;                                         \
        }                                                                      \
        return PACK_F(m);                                                      \
    }
#define _mm256_max_ps_128 _mm_max_ps
#define _mm256_min_ps_128 _mm_min_ps
EXT_LEAF_F32(max, _mm256_max_ps, >)
EXT_LEAF_F32(min, _mm256_min_ps, <)
#undef _mm256_max_ps_128
#undef _mm256_min_ps_128
/* float32 sum and prod of a leaf, in double as the generic leaf: 8
 * vectors of 4 doubles, each float widened from memory (prod over the last
 * dim of (1024, 1024) floats ran the generic leaf at 0.54 of torch) */
#define ACC_LEAF_F32(NAME, OP_PD, OP, INIT)                                    \
    static red_part NAME##_leaf_fast_f32(const char *pc, int64_t n, int64_t start) { \
        (void)start;                                                           \
        const float *p = (const float *)pc;                                    \
        __m256d a[8];                                                          \
        for (int k = 0; k < 8; k++) a[k] = _mm256_set1_pd(INIT);               \
        int64_t i = 0;                                                         \
        for (; i + 32 <= n; i += 32)                                           \
            for (int k = 0; k < 8; k++) a[k] = OP_PD(a[k], _mm256_cvtps_pd(_mm_loadu_ps(p + i + 4 * k))); \
        for (int k = 0; k < 4; k++) a[k] = OP_PD(a[k], a[k + 4]);              \
        __m256d r = OP_PD(OP_PD(a[0], a[1]), OP_PD(a[2], a[3]));               \
        _Alignas(32) double l[4];                                              \
        _mm256_store_pd(l, r);                                                 \
        double t = OP(OP(l[0], l[2]), OP(l[1], l[3])); /* the halves, then the pair */ \
        for (; i < n; i++) t = OP(t, (double)p[i]);                            \
        return PACK_F(t);                                                      \
    }
ACC_LEAF_F32(sum, _mm256_add_pd, OP_ADD, 0.0)
ACC_LEAF_F32(prod, _mm256_mul_pd, OP_MUL, 1.0)
#undef ACC_LEAF_F32
#define max_leaf_f32 max_leaf_fast_f32
#define min_leaf_f32 min_leaf_fast_f32
#define SUM_LEAF_F32 sum_leaf_fast_f32
#define PROD_LEAF_F32 prod_leaf_fast_f32
#endif

/* float32 logsumexp of a leaf whose values are all finite (x * 0 sums to 0
 * over them), else lse_leaf_f32: the max in 64 lanes, then the sum of
 * jag__vm_exp_sum_f32(x - max), at most 16 terms a lane summed in float
 * before each goes into a double lane, as the ragged engine's float32
 * logsumexp (its contract: the log of the sum within 1.9e-7 of the terms',
 * plus the float sums' roundings). lse_leaf_f32's double exp per element
 * took 2.5 ms over the last dim of (1024, 1024) floats, 3.7 times torch. */
#define LSE_LANES 64
static red_part lse_leaf_fast_f32(const char *pc, int64_t n, int64_t start) {
    const float *restrict p = (const float *)pc;
    /* 64 lanes on long leaves, 16 on short ones (a short row's cost is
     * the lanes' fold) */
    const int lanes = n >= 4 * LSE_LANES ? LSE_LANES : LANES;
    float mx[LSE_LANES], z[LSE_LANES];
    for (int j = 0; j < lanes; j++) mx[j] = p[0], z[j] = 0;
    int64_t i = 0;
    for (; lanes == LSE_LANES && i + LSE_LANES <= n; i += LSE_LANES) {
        _Pragma("omp simd")
        for (int j = 0; j < LSE_LANES; j++) {
            float v = p[i + j];
            mx[j] = v > mx[j] ? v : mx[j];
            z[j] += v * 0.0f; /* NaN at an infinity or a NaN */
        }
    }
    for (; i + LANES <= n; i += LANES) {
        _Pragma("omp simd")
        for (int j = 0; j < LANES; j++) {
            float v = p[i + j];
            mx[j] = v > mx[j] ? v : mx[j];
            z[j] += v * 0.0f;
        }
    }
    for (int j = 0; i < n; i++, j++) mx[j] = p[i] > mx[j] ? p[i] : mx[j], z[j] += p[i] * 0.0f;
    float m = mx[0], zz = 0;
    for (int j = 0; j < lanes; j++) m = mx[j] > m ? mx[j] : m, zz += z[j];
    if (zz != 0) return lse_leaf_f32(pc, n, start); /* NaN: some value is not finite */
    double s[LANES] = {0};
    float t[LANES];
    for (i = 0; i + LANES <= n;) {
        for (int j = 0; j < LANES; j++) t[j] = 0;
        for (int k = 0; k < 16 && i + LANES <= n; k++, i += LANES) {
            _Pragma("omp simd")
            for (int j = 0; j < LANES; j++) t[j] += jag__vm_exp_sum_f32(p[i + j] - m);
        }
        for (int j = 0; j < LANES; j++) s[j] += (double)t[j];
    }
    for (int j = 0; i < n; i++, j++) s[j] += (double)jag__vm_exp_sum_f32(p[i] - m);
    FOLD_LANES(s, OP_ADD);
    return (red_part){.f0 = m, .f1 = s[0]};
}

/* ---- the kinds, per dtype ------------------------------------------------ */

#ifndef SUM_LEAF_F32
#define SUM_LEAF_F32 sum_leaf_f32
#endif
#ifndef PROD_LEAF_F32
#define PROD_LEAF_F32 prod_leaf_f32
#endif
#define K_SUM(S, ST, COMB) {sum_leaf_##S, COMB, sum_store_##ST, sum_col_##S, sum_cstore_##ST, {0}, false}
static const red_kind sum_kinds[JAG_DTYPE_COUNT] = {
    [JAG_FLOAT32] = {SUM_LEAF_F32, comb_add_f, sum_store_f32, sum_col_f32, sum_cstore_f32, {0}, false},
    [JAG_FLOAT64] = K_SUM(f64, f64, comb_add_f),
    [JAG_INT32] = K_SUM(i32, i, comb_add_i),     [JAG_INT64] = K_SUM(i64, i, comb_add_i),
    [JAG_BOOL] = K_SUM(b, i, comb_add_i),
};
static const red_kind mean_kinds[JAG_DTYPE_COUNT] = {
    [JAG_FLOAT32] = {SUM_LEAF_F32, comb_add_f, mean_store_f32, sum_col_f32, mean_cstore_f32, {0}, false},
    [JAG_FLOAT64] = {sum_leaf_f64, comb_add_f, mean_store_f64, sum_col_f64, mean_cstore_f64, {0}, false},
};
#define K_PROD(S, ST, COMB) {prod_leaf_##S, COMB, sum_store_##ST, prod_col_##S, sum_cstore_##ST, {.f0 = 1, .i0 = 1}, false}
static const red_kind prod_kinds[JAG_DTYPE_COUNT] = {
    [JAG_FLOAT32] = {PROD_LEAF_F32, comb_mul_f, sum_store_f32, prod_col_f32, sum_cstore_f32, {.f0 = 1, .i0 = 1}, false},
    [JAG_FLOAT64] = K_PROD(f64, f64, comb_mul_f),
    [JAG_INT32] = K_PROD(i32, i, comb_mul_i),     [JAG_INT64] = K_PROD(i64, i, comb_mul_i),
    [JAG_BOOL] = K_PROD(b, i, comb_mul_i),
};
/* E: max / min; COL: leaf and col (values) or ileaf and icol (indices);
 * ST: val (amax), both (max_dim), idx (argmax); ordered. */
#define K_EXT(E, S, COL, ST, CST, ORD) {E##_##COL##leaf_##S, E##_comb_##S, ST, E##_##COL##col_##S, CST, {0}, ORD}
#define K_EXT_ALL(E, COL, ST, CST, ORD)                                        \
    {[JAG_FLOAT32] = K_EXT(E, f32, COL, ST##_store_f32, CST##_cstore_f32, ORD), \
     [JAG_FLOAT64] = K_EXT(E, f64, COL, ST##_store_f64, CST##_cstore_f64, ORD), \
     [JAG_INT32] = K_EXT(E, i32, COL, ST##_store_i32, CST##_cstore_i32, ORD),   \
     [JAG_INT64] = K_EXT(E, i64, COL, ST##_store_i64, CST##_cstore_i64, ORD),   \
     [JAG_BOOL] = K_EXT(E, b, COL, ST##_store_b, CST##_cstore_b, ORD)}
#define idx_store_f32 idx_store
#define idx_store_f64 idx_store
#define idx_store_i32 idx_store
#define idx_store_i64 idx_store
#define idx_store_b idx_store
#define idx_cstore_f32 idx_cstore
#define idx_cstore_f64 idx_cstore
#define idx_cstore_i32 idx_cstore
#define idx_cstore_i64 idx_cstore
#define idx_cstore_b idx_cstore
static const red_kind amax_kinds[JAG_DTYPE_COUNT] = K_EXT_ALL(max, , val, val, false);
static const red_kind amin_kinds[JAG_DTYPE_COUNT] = K_EXT_ALL(min, , val, val, false);
static const red_kind max_dim_kinds[JAG_DTYPE_COUNT] = K_EXT_ALL(max, i, both, both, true);
static const red_kind min_dim_kinds[JAG_DTYPE_COUNT] = K_EXT_ALL(min, i, both, both, true);
static const red_kind argmax_kinds[JAG_DTYPE_COUNT] = K_EXT_ALL(max, i, idx, idx, true);
static const red_kind argmin_kinds[JAG_DTYPE_COUNT] = K_EXT_ALL(min, i, idx, idx, true);
static const red_kind var_kinds[JAG_DTYPE_COUNT] = {
    [JAG_FLOAT32] = {var_leaf_f32, var_comb, var_store_f32, var_col_f32, var_cstore_f32, {0}, false},
    [JAG_FLOAT64] = {var_leaf_f64, var_comb, var_store_f64, var_col_f64, var_cstore_f64, {0}, false},
};
static const red_kind logsumexp_kinds[JAG_DTYPE_COUNT] = {
    [JAG_FLOAT32] = {lse_leaf_fast_f32, lse_comb, lse_store_f32, lse_col_f32, lse_cstore_f32, {.f0 = -INFINITY}, false},
    [JAG_FLOAT64] = {lse_leaf_f64, lse_comb, lse_store_f64, lse_col_f64, lse_cstore_f64, {.f0 = -INFINITY}, false},
};
static const red_kind std_kinds[JAG_DTYPE_COUNT] = {
    [JAG_FLOAT32] = {var_leaf_f32, var_comb, std_store_f32, var_col_f32, std_cstore_f32, {0}, false},
    [JAG_FLOAT64] = {var_leaf_f64, var_comb, std_store_f64, var_col_f64, std_cstore_f64, {0}, false},
};

/* ------------------------------------------------------------------------ */
/* Geometry and the driver                                                  */
/* ------------------------------------------------------------------------ */

typedef struct red_geom {
    int nk, nr; /* kept / reduced dims after squashing */
    int64_t ksz[JAG_MAX_DIMS], kst[JAG_MAX_DIMS];
    int64_t rsz[JAG_MAX_DIMS], rst[JAG_MAX_DIMS];
    int64_t N, R; /* outputs, elements reduced per output */
} red_geom;

/* Drop size-1 dims; merge a dim into the one before it when they are
 * contiguous with each other. Returns the new dim count. */
static int squash(int n, int64_t *sz, int64_t *st) {
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (sz[d] == 1) continue;
        if (m > 0 && st[m - 1] == st[d] * sz[d]) {
            sz[m - 1] *= sz[d];
            st[m - 1] = st[d];
            continue;
        }
        sz[m] = sz[d], st[m] = st[d], m++;
    }
    return m;
}

/* Stride-0 (broadcast) dims sort outermost, then by decreasing stride. */
static int64_t stride_key(int64_t s) { return s == 0 ? INT64_MAX : s; }

static void geom_init(red_geom *g, const jag_tensor *x, const bool *mask, bool ordered) {
    int nk = 0, nr = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (mask[d])
            g->rsz[nr] = x->sizes[d], g->rst[nr++] = x->strides[d];
        else
            g->ksz[nk] = x->sizes[d], g->kst[nk++] = x->strides[d];
    }
    g->N = jag__numel(g->ksz, nk);
    g->R = jag__numel(g->rsz, nr);
    if (!ordered) { /* insertion sort, stable */
        for (int i = 1; i < nr; i++) {
            int64_t sz = g->rsz[i], st = g->rst[i];
            int j = i;
            for (; j > 0 && stride_key(g->rst[j - 1]) < stride_key(st); j--)
                g->rsz[j] = g->rsz[j - 1], g->rst[j] = g->rst[j - 1];
            g->rsz[j] = sz, g->rst[j] = st;
        }
    }
    g->nk = squash(nk, g->ksz, g->kst);
    g->nr = squash(nr, g->rsz, g->rst);
}

/* Element offset of row-major position `lin` over (sz, st). */
static int64_t lin_offset(int64_t lin, int n, const int64_t *sz, const int64_t *st) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (lin % sz[d]) * st[d];
        lin /= sz[d];
    }
    return off;
}

/* An odometer over (sz, st) that tracks the element offset. */
typedef struct odo {
    int n;
    const int64_t *sz, *st;
    int64_t idx[JAG_MAX_DIMS];
    int64_t off;
} odo;

static void odo_start(odo *o, int64_t lin, int n, const int64_t *sz, const int64_t *st) {
    o->n = n, o->sz = sz, o->st = st, o->off = 0;
    for (int d = n - 1; d >= 0; d--) {
        o->idx[d] = lin % sz[d];
        o->off += o->idx[d] * st[d];
        lin /= sz[d];
    }
}

static inline void odo_next(odo *o) {
    for (int d = o->n - 1; d >= 0; d--) {
        o->off += o->st[d];
        if (++o->idx[d] < o->sz[d]) return;
        o->off -= o->idx[d] * o->st[d];
        o->idx[d] = 0;
    }
}

/* Thread t of nt's share [*b, *e) of n items. */
static void share(int64_t n, int t, int nt, int64_t *b, int64_t *e) {
    int64_t q = n / nt, rem = n % nt;
    *b = t * q + (t < rem ? t : rem);
    *e = *b + q + (t < rem ? 1 : 0);
}

/* One output's row in ROW mode: RO pieces (outer reduced dims) of Ri
 * contiguous elements, cut into segments of at most SEG. */
typedef struct row_job {
    const red_kind *k;
    const char *row; /* the row's element 0 */
    size_t es;
    int64_t Ri, spp; /* piece length, segments per piece */
    int nro;         /* outer reduced dims */
    const int64_t *rosz, *rost;
} row_job;

static red_part seg_leaf(const row_job *j, int64_t s) {
    int64_t ro = s / j->spp, e0 = (s % j->spp) * SEG;
    int64_t n = j->Ri - e0 < SEG ? j->Ri - e0 : SEG;
    int64_t off = lin_offset(ro, j->nro, j->rosz, j->rost) + e0;
    return j->k->leaf(j->row + off * (int64_t)j->es, n, ro * j->Ri + e0);
}

/* Segments [s0, s1) combined along the fixed midpoint tree. */
static red_part tree(const row_job *j, int64_t s0, int64_t s1) {
    if (s1 - s0 == 1) return seg_leaf(j, s0);
    int64_t mid = s0 + (s1 - s0) / 2;
    red_part a = tree(j, s0, mid);
    return j->k->combine(a, tree(j, mid, s1));
}

/* The subtrees at depth D of the tree over [s0, s1), in order. */
static void collect(int64_t s0, int64_t s1, int depth, int D, int64_t *ranges, int *cnt) {
    if (depth == D || s1 - s0 == 1) {
        ranges[2 * *cnt] = s0, ranges[2 * *cnt + 1] = s1, (*cnt)++;
        return;
    }
    int64_t mid = s0 + (s1 - s0) / 2;
    collect(s0, mid, depth + 1, D, ranges, cnt);
    collect(mid, s1, depth + 1, D, ranges, cnt);
}

static red_part fold(const red_kind *k, int64_t s0, int64_t s1, int depth, int D, const red_part *parts, int *next) {
    if (depth == D || s1 - s0 == 1) return parts[(*next)++];
    int64_t mid = s0 + (s1 - s0) / 2;
    red_part a = fold(k, s0, mid, depth + 1, D, parts, next);
    return k->combine(a, fold(k, mid, s1, depth + 1, D, parts, next));
}

/* The same tree as tree(j, 0, S), its subtrees computed by several threads. */
static red_part tree_parallel(const row_job *j, int64_t S, int nt) {
    int D = 0;
    while ((1 << D) < 4 * nt && (1 << D) < MAX_NODES) D++;
    int64_t ranges[2 * MAX_NODES];
    red_part parts[MAX_NODES];
    int cnt = 0, next = 0;
    collect(0, S, 0, D, ranges, &cnt);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < cnt; i++) parts[i] = tree(j, ranges[2 * i], ranges[2 * i + 1]);
    return fold(j->k, 0, S, 0, D, parts, &next);
}

/* ROW mode: g's innermost reduced dim has stride 1 (or there is none). A
 * row that is one leaf is reduced by a direct call, without the tree's
 * walk (sum over the last dim of (16384, 64) floats: 283 -> 234 us). */
static void run_rows(const red_geom *g, const red_kind *k, const red_ctx *ctx, const char *base, size_t es,
                     char *const *outs) {
    int64_t Ri = g->nr ? g->rsz[g->nr - 1] : 1;
    row_job proto = {.k = k, .es = es, .Ri = Ri, .spp = (Ri + SEG - 1) / SEG, .nro = g->nr ? g->nr - 1 : 0,
                     .rosz = g->rsz, .rost = g->rst};
    int64_t S = (g->R / Ri) * proto.spp;
    int nt = jag_get_num_threads();
    bool par = nt > 1 && g->N * g->R >= JAG_GRAIN_REDUCE;
    if (par && g->N < nt && S > 1) { /* few long rows: split each row's tree */
        odo o;
        odo_start(&o, 0, g->nk, g->ksz, g->kst);
        for (int64_t n = 0; n < g->N; n++, odo_next(&o)) {
            row_job j = proto;
            j.row = base + o.off * (int64_t)es;
            k->store(outs, n, tree_parallel(&j, S, nt), g->R, ctx);
        }
        return;
    }
    JAG_PARALLEL_IF(par, "omp parallel",
        {
            int t = jag__thread_index(), T = jag__thread_count();
            int64_t b, e;
            share(g->N, t, T, &b, &e);
            if (b < e) {
                odo o;
                odo_start(&o, b, g->nk, g->ksz, g->kst);
                row_job j = proto;
                if (S == 1 && proto.nro == 0) /* each row one leaf: no tree to walk */
                    for (int64_t n = b; n < e; n++, odo_next(&o))
                        k->store(outs, n, k->leaf(base + o.off * (int64_t)es, Ri, 0), g->R, ctx);
                else
                    for (int64_t n = b; n < e; n++, odo_next(&o)) {
                        j.row = base + o.off * (int64_t)es;
                        k->store(outs, n, tree(&j, 0, S), g->R, ctx);
                    }
            }
        });
}

/* COL mode: g's innermost kept dim has stride 1. Tiles of (one outer kept
 * position, up to COL_BLOCK columns) are independent; tiles narrow (not
 * below COL_MIN) when there are fewer than threads. Each column's order of
 * accumulation is the same whatever the tiling. */
static void run_cols(const red_geom *g, const red_kind *k, const red_ctx *ctx, const char *base, size_t es,
                     char *const *outs) {
    int64_t C = g->ksz[g->nk - 1], O = g->N / C;
    int nt = jag_get_num_threads();
    bool par = nt > 1 && g->N * g->R >= JAG_GRAIN_REDUCE;
    int64_t cb = COL_BLOCK;
    while (par && cb > COL_MIN && O * ((C + cb - 1) / cb) < nt) cb /= 2;
    int64_t nb = (C + cb - 1) / cb, tiles = O * nb;
    /* rows of the innermost reduced dim go to col_add together */
    int64_t rin = g->nr ? g->rsz[g->nr - 1] : 1, rs = g->nr ? g->rst[g->nr - 1] * (int64_t)es : 0;
    int64_t nout = g->R / rin;
    JAG_PARALLEL_IF(par, "omp parallel for schedule(static)",
        for (int64_t t = 0; t < tiles; t++) {
            _Alignas(64) unsigned char acc[COL_BLOCK * 16];
            int64_t o = t / nb, c0 = (t % nb) * cb, w = C - c0 < cb ? C - c0 : cb;
            const char *p0 = base + (lin_offset(o, g->nk - 1, g->ksz, g->kst) + c0) * (int64_t)es;
            odo r;
            odo_start(&r, 0, g->nr ? g->nr - 1 : 0, g->rsz, g->rst);
            for (int64_t i = 0; i < nout; i++, odo_next(&r)) k->col_add(acc, p0 + r.off * (int64_t)es, rs, rin, w, i * rin);
            k->col_store(outs, o * C + c0, acc, w, g->R, ctx);
        });
}

/* Reduce x over the dims in mask into outs (contiguous, from the META spec). */
static jag_status reduce_run(const char *op, const jag_tensor *x, const bool *mask, const red_kind *k,
                             const red_ctx *ctx, jag_tensor *const *out_tensors, int n_out) {
    JAG_ASSERT(k->leaf != NULL);
    red_geom g = {0};
    geom_init(&g, x, mask, k->ordered);
    if (g.N == 0) return JAG_OK;
    char *outs[2] = {jag__ptr(out_tensors[0]), n_out > 1 ? jag__ptr(out_tensors[1]) : NULL};
    if (g.R == 0) {
        for (int64_t o = 0; o < g.N; o++) k->store(outs, o, k->empty, 0, ctx);
        return JAG_OK;
    }
    size_t es = jag_dtype_size(x->dtype);
    bool row_ok = g.nr == 0 || g.rst[g.nr - 1] == 1;
    bool col_ok = g.nk > 0 && g.kst[g.nk - 1] == 1;
    int64_t Ri = g.nr ? g.rsz[g.nr - 1] : 1;
    if (row_ok && (Ri >= 16 || (!col_ok && g.nr <= 1))) {
        run_rows(&g, k, ctx, jag__ptr(x), es, outs);
    } else if (col_ok) {
        run_cols(&g, k, ctx, jag__ptr(x), es, outs);
    } else {
        /* Copy to (kept..., reduced...) contiguous: rows of R. */
        int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
        int n = 0;
        for (int d = 0; d < g.nk; d++) sizes[n] = g.ksz[d], strides[n++] = g.kst[d];
        for (int d = 0; d < g.nr; d++) sizes[n] = g.rsz[d], strides[n++] = g.rst[d];
        jag_tensor *view = jag__tensor_view(x, sizes, strides, n, x->offset);
        jag_tensor *tmp = view ? jag__tensor_new(op, sizes, n, x->dtype, false, false) : NULL;
        if (!tmp) {
            jag_release(view);
            return jag_last_status();
        }
        jag__copy_into(tmp, view);
        red_geom cg = {.nk = 1, .nr = 1, .ksz = {g.N}, .kst = {g.R}, .rsz = {g.R}, .rst = {1}, .N = g.N, .R = g.R};
        run_rows(&cg, k, ctx, jag__ptr(tmp), es, outs);
        jag_release(tmp);
        jag_release(view);
    }
    return JAG_OK;
}

/* ------------------------------------------------------------------------ */
/* The kernel                                                               */
/* ------------------------------------------------------------------------ */

/* Each reduction's kinds by dtype, indexed by jag_reduction. */
static const red_kind *const reduction_kinds[JAG_REDUCTION_COUNT] = {
    [JAG_REDUCTION_sum] = sum_kinds,         [JAG_REDUCTION_mean] = mean_kinds,
    [JAG_REDUCTION_prod] = prod_kinds,       [JAG_REDUCTION_amax] = amax_kinds,
    [JAG_REDUCTION_amin] = amin_kinds,       [JAG_REDUCTION_logsumexp] = logsumexp_kinds,
    [JAG_REDUCTION_var] = var_kinds,         [JAG_REDUCTION_std] = std_kinds,
    [JAG_REDUCTION_max_dim] = max_dim_kinds, [JAG_REDUCTION_min_dim] = min_dim_kinds,
    [JAG_REDUCTION_argmax] = argmax_kinds,   [JAG_REDUCTION_argmin] = argmin_kinds,
};

/* The segment kind of each reduction the ragged engine runs (prod: none). */
static const int segment_kind[JAG_REDUCTION_COUNT] = {
    [JAG_REDUCTION_sum] = JAG_SEG_SUM,         [JAG_REDUCTION_mean] = JAG_SEG_MEAN,
    [JAG_REDUCTION_prod] = -1,                 [JAG_REDUCTION_amax] = JAG_SEG_AMAX,
    [JAG_REDUCTION_amin] = JAG_SEG_AMIN,       [JAG_REDUCTION_logsumexp] = JAG_SEG_LSE,
    [JAG_REDUCTION_var] = JAG_SEG_VAR,         [JAG_REDUCTION_std] = JAG_SEG_STD,
    [JAG_REDUCTION_max_dim] = JAG_SEG_MAX,     [JAG_REDUCTION_min_dim] = JAG_SEG_MIN,
    [JAG_REDUCTION_argmax] = JAG_SEG_ARGMAX,   [JAG_REDUCTION_argmin] = JAG_SEG_ARGMIN,
};

/* One middle dim of a contiguous float x reduced: the ragged engine's
 * uniform segments (ragged_kernels.h), true when it ran (*st its status).
 * Figures, one call, 2 threads, float32, over dim 1: (1, 1000, 64) sum 7.2
 * -> 4.7 us, var 15.4 -> 7.6, logsumexp 353 -> 19; (32, 128, 256) sum 60 ->
 * 51, var 115 -> 70, logsumexp 3260 -> 157. logsumexp at any size: COL's
 * took 4.1 us on (1, 10, 64), the engine 0.5. */
static bool reduce_by_segments(const char *op, jag_reduction r, const jag_tensor *x, const bool *mask,
                               int64_t correction, jag_tensor *const *outs, jag_status *st) {
    int dim = -1, n = 0;
    for (int d = 0; d < x->ndim; d++)
        if (mask[d]) dim = d, n++;
    int64_t min_numel = r == JAG_REDUCTION_logsumexp ? 1 : JAG_SEGMENTS_MIN;
    if (n != 1 || segment_kind[r] < 0 || !jag__dense_segments_apply(x, dim, min_numel)) return false;
    jag_tensor *values = NULL;
    jag_ragged_rows rows;
    int64_t *offsets = NULL;
    if ((*st = jag__dense_as_segments(op, x, dim, &values, &rows, &offsets))) return true;
    jag_segment_spec sp = {.kind = (jag_segment_kind)segment_kind[r], .correction = correction};
    bool arg = r == JAG_REDUCTION_argmax || r == JAG_REDUCTION_argmin, two = jag__reduction_outputs(r) == 2;
    *st = jag__ragged_reduce_kernel(op, values, &rows, &sp, arg ? NULL : outs[0], arg ? outs[0] : two ? outs[1] : NULL);
    jag_release(values);
    free(offsets);
    return true;
}

// x is (...), outs are x's shape without (or with size 1 at) the dims in mask
jag_status jag__reduce_kernel(const char *op, jag_reduction r, const jag_tensor *x, const bool *mask,
                              int64_t correction, jag_tensor *const *outs) {
    JAG_ASSERT(r >= 0 && r < JAG_REDUCTION_COUNT);
    jag_status st;
    if (reduce_by_segments(op, r, x, mask, correction, outs, &st)) return st;
    red_ctx ctx = {correction};
    return reduce_run(op, x, mask, &reduction_kinds[r][x->dtype], &ctx, outs, jag__reduction_outputs(r));
}

/* ------------------------------------------------------------------------ */
/* Naive references                                                         */
/* ------------------------------------------------------------------------ */

static int64_t ref_load_int(const char *p, jag_dtype dt) {
    switch (dt) {
    case JAG_INT32: return *(const int32_t *)p;
    case JAG_INT64: return *(const int64_t *)p;
    case JAG_BOOL: return *(const uint8_t *)p;
    default: return (int64_t)jag__load_as_double(p, dt);
    }
}

static void ref_store(jag_tensor *t, int64_t o, double f, int64_t i, bool integer) {
    char *p = jag__ptr(t) + o * (int64_t)jag_dtype_size(t->dtype);
    if (!integer || jag_dtype_is_floating(t->dtype)) {
        jag__store_from_double(p, t->dtype, f);
        return;
    }
    switch (t->dtype) {
    case JAG_INT32: *(int32_t *)p = (int32_t)i; break;
    case JAG_INT64: *(int64_t *)p = i; break;
    default: *(uint8_t *)p = (uint8_t)(i != 0); break;
    }
}

/* One pass over every element of x in row-major order: element (o, r) is
 * output o's r-th reduced element. Accumulates into per-output arrays. */
jag_status jag__reduce_reference(const char *op, jag_reduction which, const jag_tensor *x, const bool *mask,
                                 int64_t correction, jag_tensor *const *outs) {
    int64_t N = jag_numel(outs[0]), numel = jag_numel(x);
    size_t cap = (size_t)(N ? N : 1);
    double *fa = calloc(cap, sizeof *fa), *fb = calloc(cap, sizeof *fb);
    int64_t *ia = calloc(cap, sizeof *ia), *cnt = calloc(cap, sizeof *cnt), *arg = calloc(cap, sizeof *arg);
    if (!fa || !fb || !ia || !cnt || !arg) {
        free(fa), free(fb), free(ia), free(cnt), free(arg);
        return jag__error(JAG_ENOMEM, "%s: out of memory in the reference", op);
    }
    bool fp = jag_dtype_is_floating(x->dtype);
    bool is_max = which == JAG_REDUCTION_amax || which == JAG_REDUCTION_max_dim || which == JAG_REDUCTION_argmax;
    size_t es = jag_dtype_size(x->dtype);
    for (int64_t o = 0; o < N; o++) fa[o] = which == JAG_REDUCTION_prod ? 1.0 : 0.0, ia[o] = which == JAG_REDUCTION_prod ? 1 : 0;
    if (which == JAG_REDUCTION_logsumexp)
        for (int64_t o = 0; o < N; o++) fa[o] = -INFINITY;
    for (int pass = 0; pass < (which == JAG_REDUCTION_var || which == JAG_REDUCTION_std || which == JAG_REDUCTION_logsumexp ? 2 : 1); pass++) {
        int64_t idx[JAG_MAX_DIMS] = {0};
        for (int64_t e = 0; e < numel; e++) {
            int64_t o = 0, r = 0, off = 0;
            for (int d = 0; d < x->ndim; d++) {
                off += idx[d] * x->strides[d];
                if (mask[d])
                    r = r * x->sizes[d] + idx[d];
                else
                    o = o * x->sizes[d] + idx[d];
            }
            const char *p = jag__ptr(x) + off * (int64_t)es;
            double v = jag__load_as_double(p, x->dtype);
            int64_t iv = fp ? 0 : ref_load_int(p, x->dtype); /* integers only: a float may be inf or NaN */
            switch (which) {
            case JAG_REDUCTION_sum: case JAG_REDUCTION_mean: fa[o] += v, ia[o] = (int64_t)((uint64_t)ia[o] + (uint64_t)iv); break;
            case JAG_REDUCTION_prod: fa[o] *= v, ia[o] = (int64_t)((uint64_t)ia[o] * (uint64_t)iv); break;
            case JAG_REDUCTION_logsumexp: /* the max (NaN wins), then the sum of exp(x - max) */
                if (pass == 0) fa[o] = isnan(v) || isnan(fa[o]) ? NAN : fmax(fa[o], v);
                else if (!isinf(fa[o])) fb[o] += exp(v - fa[o]);
                break;
            case JAG_REDUCTION_var: case JAG_REDUCTION_std:
                if (pass == 0) fa[o] += v;
                else fb[o] += (v - fa[o]) * (v - fa[o]);
                break;
            default: { /* extremum: strictly better replaces, NaN beats numbers */
                bool better;
                if (cnt[o] == 0) better = true;
                else if (fp) better = is_max ? (v > fa[o] || (isnan(v) && !isnan(fa[o]))) : (v < fa[o] || (isnan(v) && !isnan(fa[o])));
                else better = is_max ? iv > ia[o] : iv < ia[o];
                if (better) fa[o] = v, ia[o] = iv, arg[o] = r;
            }
            }
            if (pass == 0) cnt[o]++;
            for (int d = x->ndim - 1; d >= 0; d--) {
                if (++idx[d] < x->sizes[d]) break;
                idx[d] = 0;
            }
        }
        if (pass == 0 && (which == JAG_REDUCTION_var || which == JAG_REDUCTION_std))
            for (int64_t o = 0; o < N; o++) fa[o] /= (double)cnt[o];
    }
    for (int64_t o = 0; o < N; o++) {
        switch (which) {
        case JAG_REDUCTION_sum: case JAG_REDUCTION_prod: ref_store(outs[0], o, fa[o], ia[o], !fp); break;
        case JAG_REDUCTION_mean: ref_store(outs[0], o, fa[o] / (double)cnt[o], 0, false); break;
        case JAG_REDUCTION_logsumexp: ref_store(outs[0], o, isnan(fa[o]) || isinf(fa[o]) ? fa[o] : fa[o] + log(fb[o]), 0, false); break;
        case JAG_REDUCTION_var: case JAG_REDUCTION_std: {
            double div = (double)cnt[o] - (double)correction, var = cnt[o] == 0 ? NAN : fb[o] / (div > 0 ? div : 0.0);
            ref_store(outs[0], o, which == JAG_REDUCTION_std ? sqrt(var) : var, 0, false);
            break;
        }
        case JAG_REDUCTION_amax: case JAG_REDUCTION_amin: ref_store(outs[0], o, fa[o], ia[o], !fp); break;
        case JAG_REDUCTION_max_dim: case JAG_REDUCTION_min_dim:
            ref_store(outs[0], o, fa[o], ia[o], !fp);
            ref_store(outs[1], o, 0, arg[o], true);
            break;
        default: ref_store(outs[0], o, 0, arg[o], true); break;
        }
    }
    free(fa), free(fb), free(ia), free(cnt), free(arg);
    return JAG_OK;
}
