/* ragged_reduce.c — kernels along the ragged dim of a jagged batch, on
 * packed values with no padding (ragged_kernels.h): reductions (sum, mean,
 * amax, amin, logsumexp, var, std, max/min with indices, argmax/argmin)
 * over the ragged dim alone or with trailing dims, softmax / log_softmax
 * down the ragged dim, their gradients, the broadcast of a per-component
 * row back to the rows, and the naive references.
 *
 * Shapes: values (R, D...) with component b's rows at [offsets[b],
 * offsets[b] + len_b) (len_b from lengths, or offsets[b+1] - offsets[b]);
 * C = the product of D... ("columns"). Kernels read values as (R, C), or
 * as (rows, K, R) when R elements of trailing dims are reduced too. */
#include "ragged_kernels.h"
#include "kernels.h" /* jag__copy_into */
#include "vecmath.h"
#include "lanes.h"
#include "stream.h"

#include <math.h>
#include <stdatomic.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* One call's batch: the values and the components' rows. */
typedef struct ragged_batch {
    const jag_tensor *values;
    int64_t batch;
    const int64_t *offsets, *lengths;
} ragged_batch;

static ragged_batch batch_of(const jag_tensor *values, const jag_ragged_rows *rows) {
    return (ragged_batch){.values = values, .batch = rows->batch, .offsets = rows->offsets, .lengths = rows->lengths};
}

static int64_t seg_len(const ragged_batch *s, int64_t b) {
    return s->lengths ? s->lengths[b] : s->offsets[b + 1] - s->offsets[b];
}

/* A contiguous new reference to t (NULL stays NULL): t itself, or a copy. */
static jag_status contiguous(const char *op, const jag_tensor *t, jag_tensor **out) {
    *out = NULL;
    if (!t) return JAG_OK;
    if (jag_is_contiguous(t)) {
        *out = jag_retain((jag_tensor *)t);
        return JAG_OK;
    }
    jag_tensor *c = jag__tensor_new(op, t->sizes, t->ndim, t->dtype, false, false);
    if (!c) return jag_last_status();
    jag__copy_into(c, t);
    *out = c;
    return JAG_OK;
}

static jag_status contiguous_values(const char *op, const ragged_batch *s, jag_tensor **out) {
    return contiguous(op, s->values, out);
}

static int64_t columns(const ragged_batch *s) { return jag__numel(s->values->sizes + 1, s->values->ndim - 1); }

/* Zeroes t's elements (rows no component writes). */
static void zero_all(jag_tensor *t) { memset(jag__ptr(t), 0, (size_t)jag_numel(t) * jag_dtype_size(t->dtype)); }
#define LOAD(p, f64, i) ((f64) ? ((const double *)(p))[i] : (double)((const float *)(p))[i])
#define STORE(p, f64, i, v) ((f64) ? (void)(((double *)(p))[i] = (v)) : (void)(((float *)(p))[i] = (float)(v)))

/* ---- along the ragged dim alone: the row-streaming engine ----------------
 *
 * The values are read as (rows, C). The work is cut into tasks: one block
 * of at most COL_BLOCK columns of one segment (or of a group of short
 * ones), or of one chunk of a long segment's rows. A task streams its rows
 * in order with the block's columns in the inner loop (contiguous,
 * vectorised) and keeps the block's accumulators in L1; logsumexp reads
 * its rows once (a running max, block by block), softmax reads them again
 * from L2 or L3, as a chunk is at most CHUNK_BYTES (SOFTMAX_CHUNK_BYTES),
 * and requests the next task's rows while its exps run, so that their max
 * pass reads from cache; a float32 logsumexp of finite values takes the
 * AVX-512 or AVX2 path of rows_lse_fast_f32 (one exp per element, in
 * registers).
 * A group's or a segment's blocks are consecutive tasks, so that a thread
 * reads one stretch of memory at a time. Only when the input is large
 * enough for threads are long segments (B = 1) cut into chunks; the last chunk of a
 * segment to finish merges their partial results in order. Chunks depend
 * on the shapes alone, never on the thread count, so neither do the
 * results; blocks narrow when there are too few tasks for the threads,
 * which changes no result. Small inputs run without entering an OpenMP
 * region. Float32 sums and variances accumulate in double; exp is one of
 * the vectorised ones of vecmath.h. Tasks go to the threads in fixed runs
 * of equal work (seg_first_task). The naive references are
 * jag__ragged_reduce_reference, jag__ragged_softmax_reference and
 * jag__ragged_reduce_backward_reference. */

#define COL_BLOCK 512        /* most columns in a task */
#define COL_MIN 64           /* fewest, when blocks narrow to feed the threads */
#define GROUP_ELEMS 16384    /* short segments grouped into tasks of about this many elements */
#define GROUP_SHARES 2       /* (with threads: a group holds at most 1 / this of a wanted task's rows) */
#define CHUNK_ELEMS 65536    /* fewest elements in a chunk of a long segment */
#define CHUNK_TASKS 32       /* and at least (all rows) / CHUNK_TASKS rows (reductions: merging chunks is cheap) */
#define SOFTMAX_TASKS 4      /* (softmax: a segment of several chunks takes one more pass over its rows) */
#define SOFTMAX_UNCHUNKED_COLS (4 * COL_MIN) /* (softmax: from this many columns, blocks of them alone feed the threads) */
#define CHUNK_BYTES (512 << 10) /* but at most this many bytes of values */
#define SOFTMAX_CHUNK_BYTES (2 << 20) /* (softmax: a segment cut into chunks takes one more pass over its output, from
                                        memory when it is large: longer chunks, their later passes in L2 or L3) */
/* (softmax to memory: the most of a task's exps kept aside, per thread: 2
 * MiB at the streaming size of 16 MiB; tests that lower that size reach
 * tasks too large for the buffer with small tensors) */
#define SOFTMAX_TMP_BYTES (jag__stream_min_bytes / 8)
#define SUM_ROWS 16          /* rows whose exps are summed in T before they go into a double */

typedef struct seg_task {
    int64_t b, nb;      /* segments [b, b + nb): a group of short ones, or one (then possibly a chunk of it) */
    int64_t c0, nc;     /* first column, columns */
    int64_t r0, n;      /* rows [r0, r0 + n) of the values (nb == 1) */
    int64_t row0;       /* r0's row inside its segment */
    int64_t k, nch;     /* chunk k of the segment's nch (its tasks of one block are consecutive) */
    int64_t slot;       /* where the partial results go when nch > 1, else -1 */
    int64_t rows;       /* rows the task reads (all of a group's) */
} seg_task;

typedef struct seg_plan {
    seg_task *t;
    int64_t ntasks, nslots;
    int64_t C, width; /* columns of the values; most columns of a task */
    int64_t work;     /* rows x columns of all tasks */
    bool par;         /* large enough for threads */
    const ragged_batch *s;
} seg_plan;

/* The tasks of segments s over values (rows, C) of es-byte elements: the
 * segments in order, short ones grouped up to GROUP_ELEMS elements a task,
 * each group (or a long segment's chunks) over every block of columns.
 * Threads from `grain` elements on (the loop's JAG_GRAIN_* family of
 * internal.h: REDUCE for the reductions, ROWS for softmax and the
 * gradients). With threads, segments longer than a chunk (CHUNK_ELEMS elements and
 * (all rows) / `tasks` rows at least, chunk_bytes at most) are cut into
 * chunks, from the shapes alone; blocks of columns narrow (not under
 * COL_MIN) while there are fewer than per_thread tasks a thread, which
 * changes no result. The reductions take one a thread, as the dense
 * reduction's column tiles: a single segment of 256 x 256 floats then goes
 * in two blocks of 128 columns, not four of 64 (max with indices: 5.1
 * against 5.6 us); softmax keeps two. */
static jag_status seg_plan_make(const char *op, const ragged_batch *s, int64_t C, size_t es, int64_t tasks,
                                int64_t chunk_bytes, int64_t grain, int64_t per_thread, seg_plan *p) {
    const int64_t *off = s->offsets;
    int64_t B = s->batch, rows = 0;
    memset(p, 0, sizeof *p);
    for (int64_t b = 0; b < B; b++) rows += seg_len(s, b);
    p->C = C, p->s = s, p->par = rows * C >= grain;
    if (!C) return JAG_OK;
    int64_t cw = C < COL_BLOCK ? C : COL_BLOCK, chunk = INT64_MAX; /* one chunk a segment unless threads share the work */
    if (p->par) {
        int64_t most = chunk_bytes / (cw * (int64_t)es), by_tasks = (rows + tasks - 1) / tasks;
        chunk = CHUNK_ELEMS / cw > by_tasks ? CHUNK_ELEMS / cw : by_tasks;
        chunk = chunk < most ? chunk : most;
        chunk = chunk > 0 ? chunk : 1;
    }
    /* With threads, `share` rows are the most a task holds for its runs to
     * balance (1 / GROUP_SHARES of a wanted task's rows): a group stops
     * there, and a segment that long is a task alone (one long segment
     * among short ones: else a group takes it and one thread the work). */
    int64_t group = GROUP_ELEMS / cw > 0 ? GROUP_ELEMS / cw : 1, nthreads = jag_get_num_threads();
    int64_t want = per_thread * nthreads, share = INT64_MAX;
    if (p->par) share = rows / (GROUP_SHARES * want) > 0 ? rows / (GROUP_SHARES * want) : 1;
    group = group < share ? group : share;
    /* two sweeps over the segments: count (one block), then fill. A group
     * of short segments, or a segment's chunks, take every block before the
     * next segments: a run of tasks reads one stretch of the values, not a
     * block of columns out of every row (which streams from memory at a
     * fraction of the rate). The chunks of one block stay consecutive. */
    int64_t per_blk = 0, slots_blk = 0, nblk = 0, width = 0, most_rows = 0;
    for (int fill = 0; fill < 2; fill++) {
        int64_t i = 0, slot = 0;
        for (int64_t b = 0; b < B;) {
            int64_t n = seg_len(s, b), nch = n > chunk ? (n + chunk - 1) / chunk : 1, b1 = b + 1, rs = n;
            if (nch == 1) /* a group of short segments */
                while (b1 < B && rs < group && seg_len(s, b1) < share && seg_len(s, b1) <= chunk) rs += seg_len(s, b1++);
            int64_t per = (n + nch - 1) / nch;
            most_rows = most_rows > (nch == 1 ? rs : per) ? most_rows : (nch == 1 ? rs : per);
            for (int64_t k0 = 0; k0 < (fill ? C : 1); k0 += fill ? width : 1) {
                int64_t nc = C - k0 < width ? C - k0 : width;
                if (nch == 1) {
                    if (fill)
                        p->t[i] = (seg_task){.b = b, .nb = b1 - b, .c0 = k0, .nc = nc, .r0 = off[b], .n = n, .nch = 1, .slot = -1, .rows = rs};
                    i++;
                    continue;
                }
                for (int64_t k = 0; k < nch; k++, i++, slot++) {
                    int64_t r = k * per < n ? k * per : n;
                    if (fill)
                        p->t[i] = (seg_task){.b = b, .nb = 1, .c0 = k0, .nc = nc, .r0 = off[b] + r, .n = n - r < per ? n - r : per,
                                             .row0 = r, .k = k, .nch = nch, .slot = slot, .rows = n - r < per ? n - r : per};
                }
            }
            b = b1;
        }
        if (fill) break;
        per_blk = i, slots_blk = slot;
        nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
        width = ((C + nblk - 1) / nblk + 15) / 16 * 16; /* even blocks, whole vectors */
        /* narrower blocks while there are fewer tasks than wanted, or the
         * largest task holds more than a thread's share of the work (one
         * long segment among short ones) */
        while (p->par && width > COL_MIN &&
               (per_blk * ((C + width - 1) / width) < want || most_rows * width * nthreads > rows * C))
            width = (width / 2 + 15) / 16 * 16;
        width = width < C ? width : C;
        nblk = (C + width - 1) / width;
        p->ntasks = per_blk * nblk, p->nslots = slots_blk * nblk, p->par = p->par && p->ntasks > 1, p->width = width;
        if (!p->ntasks) return JAG_OK;
        if (!(p->t = malloc((size_t)p->ntasks * sizeof *p->t))) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    for (int64_t i = 0; i < p->ntasks; i++) p->work += p->t[i].rows * p->t[i].nc;
    return JAG_OK;
}

/* The `bytes` bytes at p on their way into the caches (a row of a later
 * block: rows C columns apart are short runs the hardware prefetchers
 * barely follow). */
static inline void seg_prefetch(const void *p, int64_t bytes) {
#if defined(__GNUC__)
    for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch((const char *)p + i, 0, 2);
#else
    (void)p, (void)bytes;
#endif
}

/* Rows of the next task to prefetch while a task computes: `rows` rows
 * of `bytes` bytes, `stride` bytes apart from `at`; `per` rows a step. */
typedef struct seg_pf {
    const char *at;
    int64_t stride, bytes, rows, per;
} seg_pf;

static inline void seg_pf_step(seg_pf *f) {
    for (int64_t k = 0; k < f->per && f->rows > 0; k++, f->rows--, f->at += f->stride) seg_prefetch(f->at, f->bytes);
}

/* The first `rows` rows (at most) of the task after t, when that task is
 * a segment of its own, as a seg_pf spread over `steps` steps; rows 0
 * when there is none (t last, or a group's copy of a task). es: bytes an
 * element. */
static seg_pf seg_next_task_rows(const seg_plan *p, const void *in, size_t es, const seg_task *t, int64_t rows,
                                 int64_t steps) {
    uintptr_t at = (uintptr_t)t, t0 = (uintptr_t)p->t;
    if (!(at >= t0 && at + sizeof *t < t0 + (uintptr_t)p->ntasks * sizeof *t && t[1].nb == 1)) return (seg_pf){0};
    const seg_task *u = t + 1;
    int64_t n = u->n < rows ? u->n : rows;
    steps = steps > 0 ? steps : 1;
    return (seg_pf){(const char *)in + (size_t)(u->r0 * p->C + u->c0) * es, p->C * (int64_t)es, u->nc * (int64_t)es,
                    n, (n + steps - 1) / steps};
}

/* The shift of a max-shifted sum: the max when finite, else 0. */
#define SEG_SHIFT(m) ((m) - (m) == 0 ? (m) : 0)
/* logsumexp's: the max unless -inf or NaN (then 0), so that every argument
 * of exp is <= 0, or NaN where the max is +inf (and the result +inf) */
#define LSE_SHIFT(m) ((m) > -INFINITY ? (m) : 0)
/* NaN is the largest and the smallest value; the first extreme wins. */
#define SEG_MAX_BETTER(v, a) ((v) > (a) || ((v) != (v) && (a) == (a)))
#define SEG_MIN_BETTER(v, a) ((v) < (a) || ((v) != (v) && (a) == (a)))

/* x (n, C) float32 rows, first nc columns -> acc (nc) = the column sums,
 * each in double in row order. The plain loop adds a row into acc in
 * memory: a load, two converts, an add and a store for every eight values.
 * With AVX-512 the rows go in blocks that fit in L1 (read once from
 * memory, in order); over a block, a strip of 64 columns stays in eight
 * registers, so that only the converts and adds remain (about 20% faster
 * out of L2 here, the same bits). jag__sum_rows_f32_ref is the plain loop. */
void jag__sum_rows_f32_ref(const float *in, int64_t C, int64_t n, int64_t nc, double *restrict acc) {
    for (int64_t c = 0; c < nc; c++) acc[c] = 0;
    for (int64_t r = 0; r < n; r++) {
        const float *restrict x = in + r * C;
#pragma omp simd
        for (int64_t c = 0; c < nc; c++) acc[c] += (double)x[c];
    }
}

/* rows of nc float32 columns that fit in 16 KiB (at least 4) */
static inline int64_t l1_rows(int64_t nc) { return nc <= 1024 ? 4096 / (nc > 0 ? nc : 1) : 4; }

#if defined(__AVX512F__)
void jag__sum_rows_f32(const float *in, int64_t C, int64_t n, int64_t nc, double *restrict acc) {
    for (int64_t c = 0; c < nc; c++) acc[c] = 0;
    for (int64_t r0 = 0, rb = l1_rows(nc); r0 < n; r0 += rb) {
        int64_t e = n - r0 < rb ? n : r0 + rb, c = 0;
        for (; c + 64 <= nc; c += 64) {
            __m512d a[8];
            for (int k = 0; k < 8; k++) a[k] = _mm512_loadu_pd(acc + c + 8 * k);
            for (int64_t r = r0; r < e; r++) {
                const float *x = in + r * C + c;
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++) a[k] = _mm512_add_pd(a[k], _mm512_cvtps_pd(_mm256_loadu_ps(x + 8 * k)));
            }
            for (int k = 0; k < 8; k++) _mm512_storeu_pd(acc + c + 8 * k, a[k]);
        }
        for (; c < nc; c += 8) { /* the last < 64 columns, eight (or fewer, masked) at a time */
            __mmask8 m = (__mmask8)(nc - c >= 8 ? 0xff : (1u << (nc - c)) - 1);
            __m512d a = _mm512_maskz_loadu_pd(m, acc + c);
            for (int64_t r = r0; r < e; r++) a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, in + r * C + c)));
            _mm512_mask_storeu_pd(acc + c, m, a);
        }
    }
}
#elif defined(__AVX2__)
/* The same on AVX2 (8 lanes): a strip of 32 columns in eight vectors of 4
 * doubles, then 4 columns at a time, the last < 4 column by column; each
 * column summed in row order as the plain loop (its bits). On a Zen 3
 * pair, best of 200 calls, the two builds in turn: (32, 128, 256) float32
 * summed over dim 1 65 -> 48 us, (3312, 256) over dim 0 (a bias's
 * gradient) 61 -> 42 us. (jag__ext_rows_f32 written the same way ran no
 * faster than the plain loop, which gcc vectorises over the columns.) */
void jag__sum_rows_f32(const float *in, int64_t C, int64_t n, int64_t nc, double *restrict acc) {
    for (int64_t c = 0; c < nc; c++) acc[c] = 0;
    for (int64_t r0 = 0, rb = l1_rows(nc); r0 < n; r0 += rb) {
        int64_t e = n - r0 < rb ? n : r0 + rb, c = 0;
        for (; c + 32 <= nc; c += 32) {
            __m256d a[8];
            for (int k = 0; k < 8; k++) a[k] = _mm256_loadu_pd(acc + c + 4 * k);
            for (int64_t r = r0; r < e; r++) {
                const float *x = in + r * C + c;
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++) a[k] = _mm256_add_pd(a[k], _mm256_cvtps_pd(_mm_loadu_ps(x + 4 * k)));
            }
            for (int k = 0; k < 8; k++) _mm256_storeu_pd(acc + c + 4 * k, a[k]);
        }
        for (; c + 4 <= nc; c += 4) {
            __m256d a = _mm256_loadu_pd(acc + c);
            for (int64_t r = r0; r < e; r++) a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm_loadu_ps(in + r * C + c)));
            _mm256_storeu_pd(acc + c, a);
        }
        for (; c < nc; c++)
            for (int64_t r = r0; r < e; r++) acc[c] += (double)in[r * C + c];
    }
}
#else
void jag__sum_rows_f32(const float *in, int64_t C, int64_t n, int64_t nc, double *restrict acc) {
    jag__sum_rows_f32_ref(in, C, n, nc, acc);
}
#endif

/* x (n >= 1, C) float32 rows, first nc columns -> m (nc): each column's max
 * (is_max) or min, a NaN winning over every number (the first NaN of the
 * column, by row) and the first of equal values (+0 and -0) kept. The plain
 * loop keeps m in memory and folds each row into it. With AVX-512 the rows
 * go in blocks that fit in L1, as jag__sum_rows_f32, and over a block a
 * strip of 64 columns (AVX2: 32) stays in four registers. MAXPS / MINPS return the
 * second operand unless the first is strictly greater (smaller), so
 * max(x, m) keeps the earlier of equal values, as the plain loop, but drops
 * a NaN: NaNs are only recorded, and a call that met one is redone by the
 * plain loop (the same bits either way). jag__ext_rows_f32_ref is the plain
 * loop. */
void jag__ext_rows_f32_ref(const float *in, int64_t C, int64_t n, int64_t nc, bool is_max, float *restrict m) {
    memcpy(m, in, (size_t)nc * sizeof *m);
    for (int64_t r = 1; r < n; r++) {
        const float *restrict x = in + r * C;
        if (is_max)
            for (int64_t c = 0; c < nc; c++) m[c] = SEG_MAX_BETTER(x[c], m[c]) ? x[c] : m[c];
        else
            for (int64_t c = 0; c < nc; c++) m[c] = SEG_MIN_BETTER(x[c], m[c]) ? x[c] : m[c];
    }
}

#if defined(__AVX512F__)
/* rows [r0, e) folded into columns [c, c + 16 * k) of m, lanes past nc masked */
static inline bool ext_strip_f32(const float *in, int64_t C, int64_t r0, int64_t e, int64_t c, int64_t nc, bool is_max,
                                 float *restrict m) {
    __mmask16 mk[4];
    __m512 a[4];
    __mmask16 nan = 0;
    for (int k = 0; k < 4; k++) {
        int64_t left = nc - c - 16 * k;
        mk[k] = (__mmask16)(left >= 16 ? 0xffff : left > 0 ? (1u << left) - 1 : 0);
        a[k] = _mm512_maskz_loadu_ps(mk[k], m + c + 16 * k);
    }
    for (int64_t r = r0; r < e; r++) {
        const float *x = in + r * C + c;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512 v = _mm512_maskz_loadu_ps(mk[k], x + 16 * k);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            a[k] = is_max ? _mm512_max_ps(v, a[k]) : _mm512_min_ps(v, a[k]);
        }
    }
    for (int k = 0; k < 4; k++) _mm512_mask_storeu_ps(m + c + 16 * k, mk[k], a[k]);
    return nan != 0;
}

void jag__ext_rows_f32(const float *in, int64_t C, int64_t n, int64_t nc, bool is_max, float *restrict m) {
    memcpy(m, in, (size_t)nc * sizeof *m);
    bool nan = false;
    for (int64_t c = 0; c < nc; c++) nan |= m[c] != m[c];
    for (int64_t r0 = 1, rb = l1_rows(nc); r0 < n && !nan; r0 += rb) {
        int64_t e = n - r0 < rb ? n : r0 + rb;
        for (int64_t c = 0; c < nc; c += 64)
            if (is_max) nan |= ext_strip_f32(in, C, r0, e, c, nc, true, m);
            else nan |= ext_strip_f32(in, C, r0, e, c, nc, false, m);
    }
    if (nan) jag__ext_rows_f32_ref(in, C, n, nc, is_max, m);
}
#elif defined(__AVX2__)
/* rows [r0, e) folded into columns [c, c + 32) of m, all below nc: plain
 * loads and stores (masked ones cost 13-18 cycles each on Zen 3; an
 * earlier version of this kernel with masked strips ran no faster than
 * the plain loop) */
static inline __attribute__((always_inline)) bool ext_strip_avx2_f32(const float *in, int64_t C, int64_t r0, int64_t e,
                                                                     int64_t c, bool is_max, float *restrict m) {
    __m256 a[4], nan = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) a[k] = _mm256_loadu_ps(m + c + 8 * k);
    for (int64_t r = r0; r < e; r++) {
        const float *x = in + r * C + c;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256 v = _mm256_loadu_ps(x + 8 * k);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            a[k] = is_max ? _mm256_max_ps(v, a[k]) : _mm256_min_ps(v, a[k]);
        }
    }
    for (int k = 0; k < 4; k++) _mm256_storeu_ps(m + c + 8 * k, a[k]);
    return _mm256_movemask_ps(nan) != 0;
}

/* The same on AVX2: strips of 32 columns over blocks of rows in L1, the
 * last nc % 32 columns by the plain loop. (32, 128, 256) float32, amax
 * over dim 1: from Python 125-133 -> 51-65 us (torch 59-93 beside each);
 * jag_amax from C, best of 500, the two builds in turn: 51-54 -> 45 us. */
void jag__ext_rows_f32(const float *in, int64_t C, int64_t n, int64_t nc, bool is_max, float *restrict m) {
    int64_t full = nc / 32 * 32;
    if (!full || n <= 1) {
        jag__ext_rows_f32_ref(in, C, n, nc, is_max, m);
        return;
    }
    memcpy(m, in, (size_t)full * sizeof *m);
    bool nan = false;
    for (int64_t c = 0; c < full; c++) nan |= m[c] != m[c];
    for (int64_t r0 = 1, rb = l1_rows(nc); r0 < n && !nan; r0 += rb) {
        int64_t e = n - r0 < rb ? n : r0 + rb;
        for (int64_t c = 0; c < full; c += 32)
            if (is_max) nan |= ext_strip_avx2_f32(in, C, r0, e, c, true, m);
            else nan |= ext_strip_avx2_f32(in, C, r0, e, c, false, m);
    }
    if (nan) jag__ext_rows_f32_ref(in, C, n, full, is_max, m); /* the NaN rules, from the start */
    if (full < nc) jag__ext_rows_f32_ref(in + full, C, n, nc - full, is_max, m + full);
}
#else
void jag__ext_rows_f32(const float *in, int64_t C, int64_t n, int64_t nc, bool is_max, float *restrict m) {
    jag__ext_rows_f32_ref(in, C, n, nc, is_max, m);
}
#endif

/* x (n, C) float32 rows, first nc columns -> mean, m2 (nc): each column's
 * mean and M2 (sum of squared deviations). The sums of d = x - x0 and d^2
 * in double, x0 the first row (d is exact; as x0 is one of the values,
 * (mean - x0)^2 is at most n times the variance, so M2 = sum d^2 -
 * (sum d)^2 / n loses at most log2(n) of double's 53 bits). With AVX-512
 * (and FMA, as the plain loop's JAG__VM_FMAD) a strip of 32 columns (16 on AVX2) keeps
 * x0 and both sums in registers over a block of rows in L1: the same
 * operations in the same order as jag__var_rows_f32_ref, the plain loop, so
 * the same bits. */
static void var_rows_finish(int64_t n, int64_t nc, const double *x0, double *restrict mean, double *restrict m2) {
    double dn = (double)n;
    for (int64_t c = 0; c < nc; c++) {
        double s1 = mean[c], q = m2[c] - s1 * (s1 / dn);
        mean[c] = x0[c] + s1 / dn;
        m2[c] = (q < 0 ? 0 : q) + (x0[c] - x0[c]); /* NaN when x0 is inf or NaN */
    }
}

void jag__var_rows_f32_ref(const float *in, int64_t C, int64_t n, int64_t nc, double *restrict mean, double *restrict m2) {
    double x0[COL_BLOCK];
    for (int64_t c = 0; c < nc; c++) mean[c] = 0, m2[c] = 0;
    if (!n) return;
    for (int64_t c = 0; c < nc; c++) x0[c] = (double)in[c];
    for (int64_t r = 1; r < n; r++) {
        const float *restrict x = in + r * C;
#pragma omp simd
        for (int64_t c = 0; c < nc; c++) {
            double d = (double)x[c] - x0[c];
            mean[c] += d;
            m2[c] = JAG__VM_FMAD(d, d, m2[c]);
        }
    }
    var_rows_finish(n, nc, x0, mean, m2);
}

#if (defined(__AVX512F__) || defined(__AVX2__)) && defined(FP_FAST_FMA)
/* The rows of the block after [.., e) (rb rows, n in all) requested while
 * the block's strip si of ns runs: strip si takes its share of them, so
 * that the next block comes from L2, not memory. Worth it only where the
 * rows cannot all be in L2 (PREFETCH_SPAN bytes or more apart, first to
 * last): over rows in L2 the requests cost more than they save (var of
 * 2449 rows x 256 floats: 31 -> 32 us; of 14534 x 4096 from memory: 7.0-7.2
 * -> 6.7-6.8 ms). */
#define PREFETCH_SPAN (2 << 20)
static inline void next_block_prefetch(const float *in, int64_t C, int64_t e, int64_t n, int64_t rb, int64_t nc,
                                       int64_t si, int64_t ns) {
    int64_t a = e + si * rb / ns, b = e + (si + 1) * rb / ns;
    for (int64_t r = a; r < b && r < n; r++) seg_prefetch(in + r * C, nc * (int64_t)sizeof(float));
}
#endif

#if defined(__AVX512F__) && defined(FP_FAST_FMA)
#define VAR_STRIP 32 /* columns a strip */
/* rows [r0, e) folded into the strip of 32 columns [c0, c0 + 32), or the
 * last ones masked 8 at a time */
static inline void var_strip_f32(const float *in, int64_t C, int64_t r0, int64_t e, int64_t c0, int64_t nc,
                                 const double *x0, double *restrict mean, double *restrict m2) {
    __mmask8 m[4];
    __m512d z[4], s[4], q[4];
    for (int k = 0; k < 4; k++) {
        int64_t left = nc - c0 - 8 * k;
        m[k] = (__mmask8)(left >= 8 ? 0xff : left > 0 ? (1u << left) - 1 : 0);
        z[k] = _mm512_maskz_loadu_pd(m[k], x0 + c0 + 8 * k);
        s[k] = _mm512_maskz_loadu_pd(m[k], mean + c0 + 8 * k);
        q[k] = _mm512_maskz_loadu_pd(m[k], m2 + c0 + 8 * k);
    }
    for (int64_t r = r0; r < e; r++) {
        const float *x = in + r * C + c0;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(m[k], x + 8 * k)), z[k]);
            s[k] = _mm512_add_pd(s[k], d);
            q[k] = _mm512_fmadd_pd(d, d, q[k]);
        }
    }
    for (int k = 0; k < 4; k++) {
        _mm512_mask_storeu_pd(mean + c0 + 8 * k, m[k], s[k]);
        _mm512_mask_storeu_pd(m2 + c0 + 8 * k, m[k], q[k]);
    }
}
#elif defined(__AVX2__) && defined(FP_FAST_FMA)
#define VAR_STRIP 16
/* rows [r0, e) folded into the strip of 16 columns [c0, c0 + 16) (full:
 * all 16 below nc, plain loads; else the lanes past nc masked) */
static inline __attribute__((always_inline)) void var_strip_avx2_f32(const float *in, int64_t C, int64_t r0, int64_t e,
                                                                    int64_t c0, int64_t nc, bool full, const double *x0,
                                                                    double *restrict mean, double *restrict m2) {
    __m256i m[4];
    __m128i mf[4];
    __m256d z[4], s[4], q[4];
    for (int k = 0; k < 4; k++) {
        m[k] = jag__mask_first4_epi64(nc - c0 - 4 * k), mf[k] = jag__mask_first4_epi32(nc - c0 - 4 * k);
        z[k] = full ? _mm256_loadu_pd(x0 + c0 + 4 * k) : _mm256_maskload_pd(x0 + c0 + 4 * k, m[k]);
        s[k] = full ? _mm256_loadu_pd(mean + c0 + 4 * k) : _mm256_maskload_pd(mean + c0 + 4 * k, m[k]);
        q[k] = full ? _mm256_loadu_pd(m2 + c0 + 4 * k) : _mm256_maskload_pd(m2 + c0 + 4 * k, m[k]);
    }
    for (int64_t r = r0; r < e; r++) {
        const float *x = in + r * C + c0;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m128 v = full ? _mm_loadu_ps(x + 4 * k) : _mm_maskload_ps(x + 4 * k, mf[k]);
            __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(v), z[k]);
            s[k] = _mm256_add_pd(s[k], d);
            q[k] = _mm256_fmadd_pd(d, d, q[k]);
        }
    }
    for (int k = 0; k < 4; k++) {
        int64_t left = nc - c0 - 4 * k; /* plain stores: lanes.h */
        jag__store_first4_pd(mean + c0 + 4 * k, s[k], left < 0 ? 0 : left);
        jag__store_first4_pd(m2 + c0 + 4 * k, q[k], left < 0 ? 0 : left);
    }
}

/* var_strip_f32 on AVX2: 16 columns, x0 and both sums in 12 registers;
 * whole strips load the sums plainly, and every strip stores them with
 * plain stores (lanes.h): with masked stores (13-18 cycles each on Zen 3)
 * this kernel was slower than the plain loop. */
static inline void var_strip_f32(const float *in, int64_t C, int64_t r0, int64_t e, int64_t c0, int64_t nc,
                                 const double *x0, double *restrict mean, double *restrict m2) {
    if (c0 + 16 <= nc) var_strip_avx2_f32(in, C, r0, e, c0, nc, true, x0, mean, m2);
    else var_strip_avx2_f32(in, C, r0, e, c0, nc, false, x0, mean, m2);
}
#endif

#ifdef VAR_STRIP
/* A strip of VAR_STRIP columns (32 on AVX-512, 16 on AVX2) keeps x0 and
 * both sums in registers over a block of rows in L1, the same operations
 * in the same order as jag__var_rows_f32_ref, so the same bits. On AVX2,
 * var over the ragged dim of 16 float32 items of 1-512 rows x 1024 (16
 * MiB, in the last-level cache): 0.58-0.64 -> 0.36-0.51 ms (the two
 * builds in turn); from memory (64 items x 4096) both 12.7-16 ms, within
 * the machine's noise. */
void jag__var_rows_f32(const float *in, int64_t C, int64_t n, int64_t nc, double *restrict mean, double *restrict m2) {
    double x0[COL_BLOCK];
    for (int64_t c = 0; c < nc; c++) mean[c] = 0, m2[c] = 0;
    if (!n) return;
    for (int64_t c = 0; c < nc; c++) x0[c] = (double)in[c];
    bool far = n * C * (int64_t)sizeof(float) >= PREFETCH_SPAN;
    /* rows in blocks that fit in L1, as jag__sum_rows_f32; the next block
     * requested meanwhile where the rows are far apart */
    for (int64_t r0 = 1, rb = l1_rows(nc); r0 < n; r0 += rb) {
        int64_t e = n - r0 < rb ? n : r0 + rb;
        for (int64_t c0 = 0; c0 < nc; c0 += VAR_STRIP) {
            if (far) next_block_prefetch(in, C, e, n, rb, nc, c0 / VAR_STRIP, (nc + VAR_STRIP - 1) / VAR_STRIP);
            var_strip_f32(in, C, r0, e, c0, nc, x0, mean, m2);
        }
    }
    var_rows_finish(n, nc, x0, mean, m2);
}
#else
void jag__var_rows_f32(const float *in, int64_t C, int64_t n, int64_t nc, double *restrict mean, double *restrict m2) {
    jag__var_rows_f32_ref(in, C, n, nc, mean, m2);
}
#endif

/* x (n, C) float64 rows, first nc columns -> acc (nc): the column sums */
static void sum_rows_f64(const double *in, int64_t C, int64_t n, int64_t nc, double *restrict acc) {
    for (int64_t c = 0; c < nc; c++) acc[c] = 0;
    for (int64_t r = 0; r < n; r++) {
        const double *restrict x = in + r * C;
#pragma omp simd
        for (int64_t c = 0; c < nc; c++) acc[c] += x[c];
    }
}

/* The same rows -> mean, m2 (nc): Welford's update */
static void var_rows_f64(const double *in, int64_t C, int64_t n, int64_t nc, double *restrict mean, double *restrict m2) {
    for (int64_t c = 0; c < nc; c++) mean[c] = 0, m2[c] = 0;
    for (int64_t r = 0; r < n; r++) {
        const double *restrict x = in + r * C;
        double inv = 1.0 / (double)(r + 1);
#pragma omp simd
        for (int64_t c = 0; c < nc; c++) {
            double v = x[c], d = v - mean[c];
            mean[c] = JAG__VM_FMAD(d, inv, mean[c]);
            m2[c] = JAG__VM_FMAD(d, v - mean[c], m2[c]);
        }
    }
}

/* The max / min of rows without indices, when a type has its own kernel:
 * float32 has jag__ext_rows_f32; float64 answers false and keeps the
 * grouped loop of rows_ext_f64. */
static bool ext_rows_own_f32(const float *in, int64_t C, int64_t n, int64_t nc, bool is_max, float *m) {
    jag__ext_rows_f32(in, C, n, nc, is_max, m);
    return true;
}
static bool ext_rows_own_f64(const double *in, int64_t C, int64_t n, int64_t nc, bool is_max, double *m) {
    (void)in, (void)C, (void)n, (void)nc, (void)is_max, (void)m;
    return false;
}

/* dst (n) = src * f (softmax) or src - f (log_softmax, lg), per column:
 * the last pass of a softmax whose output goes to memory. Streaming
 * stores where dst is 32-byte aligned (jag__stream_stores chose them:
 * without AVX this is never called on a large output), the same
 * operations as rows_scale_* (the same bits). Scaling the buffer in place
 * and then jag__stream_copy'ing each row read 41-59 against 35-41 ms on
 * the 251 MiB batch (three runs each, in turn): the one pass stays. */
static void stream_scale_row_f32(float *dst, const float *src, const float *f, int64_t n, bool lg) {
    int64_t c = 0;
#if defined(__AVX__)
    if ((uintptr_t)dst % 32 == 0)
        for (; c + 8 <= n; c += 8) {
            __m256 a = _mm256_loadu_ps(src + c), b = _mm256_loadu_ps(f + c);
            _mm256_stream_ps(dst + c, lg ? _mm256_sub_ps(a, b) : _mm256_mul_ps(a, b));
        }
#endif
    for (; c < n; c++) dst[c] = lg ? src[c] - f[c] : src[c] * f[c];
}
static void stream_scale_row_f64(double *dst, const double *src, const double *f, int64_t n, bool lg) {
    int64_t c = 0;
#if defined(__AVX__)
    if ((uintptr_t)dst % 32 == 0)
        for (; c + 4 <= n; c += 4) {
            __m256d a = _mm256_loadu_pd(src + c), b = _mm256_loadu_pd(f + c);
            _mm256_stream_pd(dst + c, lg ? _mm256_sub_pd(a, b) : _mm256_mul_pd(a, b));
        }
#endif
    for (; c < n; c++) dst[c] = lg ? src[c] - f[c] : src[c] * f[c];
}

/* The kernels of one task, typed. SUMF and VARF are the row kernels of
 * sum and var; EXP is the exp of softmax's max-shifted values (arguments
 * <= 0 where the max is finite; in a column whose max is NaN or +inf the
 * shift is 0 and its exps mean nothing: the column is NaN), EXP_SUM the
 * exp of logsumexp's terms (arguments <= 0 or NaN). */
#define DEF_SEG_ROWS(SUF, T, SUMF, VARF, EXP, EXP_SUM)                         \
    /* sum: acc (nc) = the sum of the rows, in double (SUMF) */          \
    static void rows_sum_##SUF(const seg_plan *p, const T *in, const seg_task *t, double *restrict acc) { \
        SUMF(in + t->r0 * p->C + t->c0, p->C, t->n, t->nc, acc);              \
    }                                                                          \
    /* max / min (t->n >= 1): m (nc) and, when ix is not NULL, the row of     \
     * the first extreme inside the segment (nc) */                            \
    static void rows_ext_##SUF(const seg_plan *p, const T *in, const seg_task *t, bool is_max, T *restrict m, \
                               int64_t *restrict ix) {                         \
        int64_t C = p->C, c0 = t->c0, nc = t->nc, r0 = t->r0, e = t->r0 + t->n; \
        if (!ix && ext_rows_own_##SUF(in + r0 * C + c0, C, t->n, nc, is_max, m)) return; \
        memcpy(m, in + r0 * C + c0, (size_t)nc * sizeof(T));                   \
        if (ix)                                                                \
            for (int64_t c = 0; c < nc; c++) ix[c] = t->row0;                  \
        if (ix && is_max)                                                      \
            SEG_EXT_ROWS(T, SEG_MAX_BETTER, 1)                                 \
        else if (ix)                                                           \
            SEG_EXT_ROWS(T, SEG_MIN_BETTER, 1)                                 \
        else if (is_max)                                                       \
            SEG_EXT_ROWS(T, SEG_MAX_BETTER, 0)                                 \
        else                                                                   \
            SEG_EXT_ROWS(T, SEG_MIN_BETTER, 0)                                 \
    }                                                                          \
    /* var: the mean and M2 (sum of squared deviations) of the rows (nc      \
     * each), by VARF */                                                       \
    static void rows_var_##SUF(const seg_plan *p, const T *in, const seg_task *t, double *restrict mean, \
                               double *restrict m2) {                          \
        VARF(in + t->r0 * p->C + t->c0, p->C, t->n, t->nc, mean, m2);         \
    }                                                                          \
    /* logsumexp: m (nc) the rows' max (a NaN wins) and s (nc) the sum of   \
     * exp(x - LSE_SHIFT(m)) in double, in one pass over the rows (each read \
     * once from memory). Rows go in blocks of SUM_ROWS: at each block, s is \
     * rescaled to the shift of the running max through the block (exp(old - \
     * new) <= 1 in double, once per column and block), then the block's exps \
     * are summed in T and added to s, while the same loop folds the next    \
     * block's rows into the running max (the exps of one block overlap the  \
     * loads of the next). Every term stays <= 1 and the max's row gives 1,   \
     * as with the final max as the shift: the same error bound. While the   \
     * max is -inf the terms are the exp's clamped floor, not 0: s restarts   \
     * at the first finite max. Where m is NaN or +inf, s means nothing       \
     * (seg_lse_finish). */                                                   \
    static void rows_lse_##SUF(const seg_plan *p, const T *in, const seg_task *t, T *restrict m, double *restrict s) { \
        int64_t C = p->C, c0 = t->c0, nc = t->nc, e = t->r0 + t->n;            \
        T sh[COL_BLOCK], es[COL_BLOCK], mo[COL_BLOCK], nm[COL_BLOCK];          \
        for (int64_t c = 0; c < nc; c++) m[c] = -INFINITY, mo[c] = -INFINITY, sh[c] = 0, s[c] = 0; \
        for (int64_t r = t->r0; r < e && r < t->r0 + SUM_ROWS; r++) {          \
            const T *restrict x = in + r * C + c0;                             \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) m[c] = x[c] > m[c] || x[c] != x[c] ? x[c] : m[c]; \
        }                                                                      \
        for (int64_t r = t->r0; r < e; r += SUM_ROWS) {                        \
            int64_t nr = e - r < SUM_ROWS ? e - r : SUM_ROWS, rn = r + nr;     \
            int64_t nn = e - rn < SUM_ROWS ? e - rn : SUM_ROWS;                \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) {                                 \
                T nsh = LSE_SHIFT(m[c]);                                       \
                double f = nsh == sh[c] ? 1.0 : jag__vm_exp_f64((double)sh[c] - (double)nsh); \
                s[c] = mo[c] == -INFINITY ? 0.0 : s[c] * f, sh[c] = nsh, es[c] = 0; \
                mo[c] = m[c], nm[c] = m[c];                                    \
            }                                                                  \
            for (int64_t q = 0; q < nr || q < nn; q++) {                       \
                const T *restrict x = in + (r + q) * C + c0, *restrict xn = in + (rn + q) * C + c0; \
                if (q < nr && q < nn) {                                        \
                    _Pragma("omp simd")                                        \
                    for (int64_t c = 0; c < nc; c++) {                         \
                        es[c] += EXP_SUM(x[c] - sh[c]);                        \
                        nm[c] = xn[c] > nm[c] || xn[c] != xn[c] ? xn[c] : nm[c]; \
                    }                                                          \
                } else if (q < nr) {                                           \
                    _Pragma("omp simd")                                        \
                    for (int64_t c = 0; c < nc; c++) es[c] += EXP_SUM(x[c] - sh[c]); \
                } else {                                                       \
                    _Pragma("omp simd")                                        \
                    for (int64_t c = 0; c < nc; c++) nm[c] = xn[c] > nm[c] || xn[c] != xn[c] ? xn[c] : nm[c]; \
                }                                                              \
            }                                                                  \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) s[c] += (double)es[c], m[c] = nm[c]; \
        }                                                                      \
    }                                                                          \
    /* softmax / log_softmax, first part: m (nc) the chunk's max (a NaN      \
     * wins), s (nc) the sum of exp(x - sh) in double with sh = SEG_SHIFT(m)  \
     * (NaN where m is NaN or +inf: the whole column is then NaN, as in the   \
     * dense op and torch, where x - max is inf - inf); y = exp(x - sh), or   \
     * x - sh for log; into tmp (t->n rows of t->nc, contiguous) when it is  \
     * not NULL, else into out */                                              \
    static void rows_softmax_##SUF(const seg_plan *p, const T *in, T *out, const seg_task *t, bool lg, \
                                   T *restrict m, double *restrict s, seg_pf *pf, T *tmp) { \
        int64_t C = p->C, c0 = t->c0, nc = t->nc, r0 = t->r0, e = t->r0 + t->n; \
        T *yb = tmp ? tmp : out + r0 * C + c0; /* row r0 of y, rows ys apart */ \
        int64_t ys = tmp ? nc : C;                                             \
        T sh[COL_BLOCK];                                                       \
        for (int64_t c = 0; c < nc; c++) m[c] = -INFINITY, s[c] = 0;           \
        /* the max: amax's row kernel where the type has one (its NaN is   \
         * the column's first, this loop's the last: either makes the     \
         * column NaN) */                                                      \
        if (e == r0 || !ext_rows_own_##SUF(in + r0 * C + c0, C, e - r0, nc, true, m)) \
            for (int64_t r = r0; r < e; r++) {                                 \
                const T *restrict x = in + r * C + c0;                         \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) m[c] = x[c] > m[c] || x[c] != x[c] ? x[c] : m[c]; \
            }                                                                  \
        /* one exp for every column, whatever the others hold: a column's   \
         * bits do not depend on the task's width (which the thread count    \
         * can narrow) */                                                      \
        for (int64_t c = 0; c < nc; c++) sh[c] = SEG_SHIFT(m[c]);              \
        if (lg)                                                                \
            SEG_SOFTMAX_EXPS(T, EXP, 1)                                        \
        else                                                                   \
            SEG_SOFTMAX_EXPS(T, EXP, 0)                                        \
        /* a NaN, or +inf (inf - inf), makes the column NaN, as the dense op */ \
        for (int64_t c = 0; c < nc; c++) s[c] = m[c] != m[c] || m[c] == INFINITY ? NAN : s[c]; \
    }                                                                          \
    /* softmax / log_softmax, last part: y = y * f (softmax) or y - f (log),  \
     * f (nc) per column */                                                    \
    static void rows_scale_##SUF(const seg_plan *p, T *out, const seg_task *t, bool lg, const T *restrict f) { \
        int64_t C = p->C, c0 = t->c0, nc = t->nc, e = t->r0 + t->n;            \
        for (int64_t r = t->r0; r < e; r++) {                                  \
            T *restrict y = out + r * C + c0;                                  \
            if (lg) {                                                          \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) y[c] -= f[c];                 \
            } else {                                                           \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) y[c] *= f[c];                 \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    /* the same from tmp (rows_softmax_'s, t->n rows of t->nc) into out with \
     * streaming stores (stream_scale_row_*) */                              \
    static void rows_scale_stream_##SUF(const seg_plan *p, T *out, const seg_task *t, bool lg, const T *f, \
                                        const T *tmp) {                        \
        for (int64_t r = 0; r < t->n; r++)                                     \
            stream_scale_row_##SUF(out + (t->r0 + r) * p->C + t->c0, tmp + r * t->nc, f, t->nc, lg); \
    }

/* The rows after the first of rows_ext_*, four at a time: their best
 * (the first of equals) first, then against m; IDX (a constant): track
 * the rows in ix. No "omp simd": the compiler's own vectorisation of
 * these loops is faster (one segment of 256 x 256 floats, max with
 * indices, one thread: 7.5 against 9.8 us). */
#define SEG_EXT_ROWS(T, BETTER, IDX)                                           \
    {                                                                          \
        int64_t r = r0 + 1;                                                    \
        for (; r + 4 <= e; r += 4) {                                           \
            const T *restrict x0 = in + r * C + c0, *restrict x1 = x0 + C;     \
            const T *restrict x2 = x1 + C, *restrict x3 = x2 + C;              \
            int64_t row = t->row0 + (r - r0);                                  \
            for (int64_t c = 0; c < nc; c++) {                                 \
                T u = x0[c];                                                   \
                int64_t ui = row;                                              \
                bool b = BETTER(x1[c], u);                                     \
                u = b ? x1[c] : u;                                             \
                if (IDX) ui = b ? row + 1 : ui;                                \
                b = BETTER(x2[c], u);                                          \
                u = b ? x2[c] : u;                                             \
                if (IDX) ui = b ? row + 2 : ui;                                \
                b = BETTER(x3[c], u);                                          \
                u = b ? x3[c] : u;                                             \
                if (IDX) ui = b ? row + 3 : ui;                                \
                b = BETTER(u, m[c]);                                           \
                m[c] = b ? u : m[c];                                           \
                if (IDX) ix[c] = b ? ui : ix[c];                               \
            }                                                                  \
        }                                                                      \
        for (; r < e; r++) {                                                   \
            const T *restrict x = in + r * C + c0;                             \
            int64_t row = t->row0 + (r - r0);                                  \
            for (int64_t c = 0; c < nc; c++) {                                 \
                bool b = BETTER(x[c], m[c]);                                   \
                m[c] = b ? x[c] : m[c];                                        \
                if (IDX) ix[c] = b ? row : ix[c];                              \
            }                                                                  \
        }                                                                      \
    }

/* The rows of rows_softmax_*'s second pass, four at a time (their exps
 * summed in T, then added to s in double); LG (a constant): y = x - sh. */
#define SEG_SOFTMAX_EXPS(T, EXPF, LG)                                              \
    {                                                                          \
        int64_t r = r0;                                                        \
        for (; r + 4 <= e; r += 4) {                                           \
            const T *restrict x0 = in + r * C + c0, *restrict x1 = x0 + C;     \
            const T *restrict x2 = x1 + C, *restrict x3 = x2 + C;              \
            if (pf) seg_pf_step(pf);                                           \
            T *restrict y0 = yb + (r - r0) * ys, *restrict y1 = y0 + ys;       \
            T *restrict y2 = y1 + ys, *restrict y3 = y2 + ys;                  \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) {                                 \
                T z0 = x0[c] - sh[c], z1 = x1[c] - sh[c], z2 = x2[c] - sh[c], z3 = x3[c] - sh[c]; \
                T e0 = EXPF(z0), e1 = EXPF(z1), e2 = EXPF(z2), e3 = EXPF(z3);  \
                s[c] += (double)((e0 + e1) + (e2 + e3));                       \
                y0[c] = LG ? z0 : e0, y1[c] = LG ? z1 : e1;                    \
                y2[c] = LG ? z2 : e2, y3[c] = LG ? z3 : e3;                    \
            }                                                                  \
        }                                                                      \
        for (; r < e; r++) {                                                   \
            const T *restrict x = in + r * C + c0;                             \
            T *restrict y = yb + (r - r0) * ys;                                \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) {                                 \
                T z = x[c] - sh[c], ez = EXPF(z);                              \
                s[c] += (double)ez;                                            \
                y[c] = LG ? z : ez;                                            \
            }                                                                  \
        }                                                                      \
    }

DEF_SEG_ROWS(f32, float, jag__sum_rows_f32, jag__var_rows_f32, jag__vm_exp_nonpos_f32, jag__vm_exp_sum_f32)
DEF_SEG_ROWS(f64, double, sum_rows_f64, var_rows_f64, jag__vm_exp_f64, jag__vm_exp_f64)
#undef DEF_SEG_ROWS

/* ---- float32 logsumexp: registers, one exp per element ------------------
 *
 * rows_lse_f32 keeps its sums and maxima in arrays and checks for NaN at
 * every element, about 1.3 x the work of a dense exp per element. The fast
 * path below (AVX-512) does a task whose values are all finite in blocks
 * of LSE_ROWS rows, row by row inside a block, each row's nc columns in
 * order (rows are C columns apart: 16 columns of 32 rows would all fall in
 * one set of L1), the next block's rows prefetched meanwhile:
 *   1. the block's max per column (one max and one fused multiply-add a
 *      vector: x * 0 + fin turns fin NaN at a NaN or an infinity);
 *   2. the shift sh_b = the running max; where it grew, s (double) is
 *      rescaled by exp(old - new) <= 1, in double;
 *   3. the block's rows again (from L2): exp(x - sh_b), four rows at a
 *      time ((e0 + e1) + (e2 + e3)) summed in float over at most SUM_ROWS
 *      rows, then into s in double.
 * The terms are jag__vm_exp_sum_f32's bit for bit, each <= 1 with the
 * max's row giving 1, and at most SUM_ROWS of them are summed in float
 * before going into double, as in rows_lse_f32: the same contract (the
 * log of the sum off by at most 1.9e-7 from the terms, plus the float
 * sums' roundings: within 2e-6 relative of the double reference, tested
 * per item and column in test_plain_ragged_ops.c). Each column's result
 * depends on that column alone (lane by lane; a factor 1 where the shift
 * did not grow is exact), whatever the task's width: the columns with a
 * non-finite value (found by a second look at the task's values when fin
 * ends NaN) are redone one by one by rows_lse_f32, so that the result
 * stays the same for any thread count (which changes the widths). */
#define LSE_ROWS 32
#if defined(__AVX512F__)
/* jag__vm_exp_sum_f32 on 16 lanes, the same operations */
static inline __m512 lse_exp16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-86.0f));
    __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504f), _mm512_set1_ps(12582912.0f));
    __m512 k = _mm512_sub_ps(t, _mm512_set1_ps(12582912.0f));
    __m512 f = _mm512_fmsub_ps(x, _mm512_set1_ps(1.44269504f), k);
    __m512 q = _mm512_set1_ps(1.32764725e-03f);
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(9.67554096e-03f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(5.55071309e-02f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.40221202e-01f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.93146944e-01f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.00000012f));
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(q), _mm512_slli_epi32(_mm512_castps_si512(t), 23)));
}

/* the low / high 8 floats of v in double */
static inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
static inline __m512d hi_pd(__m512 v) { return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))); }

/* s (ncp doubles) += es (ncp floats); es = 0 */
static inline void fast_flush(double *restrict s, float *restrict es, int64_t ncp) {
    for (int64_t c = 0; c < ncp; c += 16) {
        __m512 e = _mm512_load_ps(es + c);
        _mm512_store_pd(s + c, _mm512_add_pd(_mm512_load_pd(s + c), lo_pd(e)));
        _mm512_store_pd(s + c + 8, _mm512_add_pd(_mm512_load_pd(s + c + 8), hi_pd(e)));
        _mm512_store_ps(es + c, _mm512_setzero_ps());
    }
}

// in (n, C) float32 rows from the task's first row and column, nc columns (ncp = nc rounded up to 16) ->
// sh (ncp) the max, s (ncp) the sum of exp(x - max) in double, meaningful in the columns of finite values;
// false when some value is not finite
static bool rows_exp_fast_f32(const float *in, int64_t C, int64_t n, int64_t nc, float *restrict sh, double *restrict s,
                              seg_pf *next) {
    int64_t ncp = (nc + 15) / 16 * 16;
    _Alignas(64) float bm[COL_BLOCK + 16], es[COL_BLOCK + 16];
    __mmask16 kt = (__mmask16)(nc % 16 ? (1u << (nc % 16)) - 1 : 0xffff); /* the last vector's lanes */
    __m512 zero = _mm512_setzero_ps(), fin0 = zero, fin1 = zero, fin2 = zero, fin3 = zero;
    for (int64_t c = 0; c < ncp; c += 16) _mm512_store_ps(es + c, zero);
    for (int64_t rb = 0; rb < n; rb += LSE_ROWS) {
        int64_t nr = n - rb < LSE_ROWS ? n - rb : LSE_ROWS, nxt = n - rb - nr < LSE_ROWS ? n - rb - nr : LSE_ROWS;
        const float *xb = in + rb * C;
        /* 1: the block's max, four rows at a time (four chains of fin);
         * meanwhile the next block's rows requested, or in the last block
         * the next task's first rows */
        int64_t r = 0;
        for (; r + 4 <= nr; r += 4) {
            const float *x0 = xb + r * C;
            for (int64_t k = r; k < r + 4; k++)
                if (k < nxt) seg_prefetch(x0 + (nr + k - r) * C, nc * (int64_t)sizeof(float));
                else if (next) seg_pf_step(next);
            for (int64_t c = 0; c < ncp; c += 16) {
                __mmask16 km = c + 16 <= nc ? (__mmask16)0xffff : kt;
                __m512 v0 = _mm512_maskz_loadu_ps(km, x0 + c), v1 = _mm512_maskz_loadu_ps(km, x0 + C + c);
                __m512 v2 = _mm512_maskz_loadu_ps(km, x0 + 2 * C + c), v3 = _mm512_maskz_loadu_ps(km, x0 + 3 * C + c);
                fin0 = _mm512_fmadd_ps(v0, zero, fin0), fin1 = _mm512_fmadd_ps(v1, zero, fin1);
                fin2 = _mm512_fmadd_ps(v2, zero, fin2), fin3 = _mm512_fmadd_ps(v3, zero, fin3);
                __m512 v = _mm512_max_ps(_mm512_max_ps(v0, v1), _mm512_max_ps(v2, v3));
                _mm512_store_ps(bm + c, r ? _mm512_max_ps(_mm512_load_ps(bm + c), v) : v);
            }
        }
        for (; r < nr; r++) {
            const float *x = xb + r * C;
            if (r < nxt) seg_prefetch(x + nr * C, nc * (int64_t)sizeof(float));
            else if (next) seg_pf_step(next);
            for (int64_t c = 0; c < ncp; c += 16) {
                __m512 v = _mm512_maskz_loadu_ps(c + 16 <= nc ? (__mmask16)0xffff : kt, x + c);
                fin0 = _mm512_fmadd_ps(v, zero, fin0);
                _mm512_store_ps(bm + c, r ? _mm512_max_ps(_mm512_load_ps(bm + c), v) : v);
            }
        }
        /* 2: the shift */
        for (int64_t c = 0; c < ncp; c += 16) {
            __m512 b = _mm512_load_ps(bm + c);
            if (rb == 0) {
                _mm512_store_ps(sh + c, b);
                _mm512_store_pd(s + c, _mm512_setzero_pd()), _mm512_store_pd(s + c + 8, _mm512_setzero_pd());
            } else {
                __m512 old = _mm512_load_ps(sh + c), nw = _mm512_max_ps(old, b);
                if (_mm512_cmp_ps_mask(nw, old, _CMP_GT_OQ)) { /* s to the new shift: exp(old - new) <= 1 */
                    _Alignas(64) double d[16], f[16];
                    _mm512_store_pd(d, _mm512_sub_pd(lo_pd(old), lo_pd(nw)));
                    _mm512_store_pd(d + 8, _mm512_sub_pd(hi_pd(old), hi_pd(nw)));
#pragma omp simd
                    for (int l = 0; l < 16; l++) f[l] = d[l] == 0 ? 1.0 : jag__vm_exp_f64(d[l]);
                    _mm512_store_pd(s + c, _mm512_mul_pd(_mm512_load_pd(s + c), _mm512_load_pd(f)));
                    _mm512_store_pd(s + c + 8, _mm512_mul_pd(_mm512_load_pd(s + c + 8), _mm512_load_pd(f + 8)));
                }
                _mm512_store_ps(sh + c, nw);
            }
        }
        /* 3: the exps, four rows at a time */
        r = 0;
        for (; r + 4 <= nr; r += 4) {
            const float *x0 = xb + r * C;
            for (int64_t c = 0; c < ncp; c += 16) {
                __mmask16 km = c + 16 <= nc ? (__mmask16)0xffff : kt;
                __m512 h = _mm512_load_ps(sh + c);
                __m512 z0 = _mm512_sub_ps(_mm512_maskz_loadu_ps(km, x0 + c), h);
                __m512 z1 = _mm512_sub_ps(_mm512_maskz_loadu_ps(km, x0 + C + c), h);
                __m512 z2 = _mm512_sub_ps(_mm512_maskz_loadu_ps(km, x0 + 2 * C + c), h);
                __m512 z3 = _mm512_sub_ps(_mm512_maskz_loadu_ps(km, x0 + 3 * C + c), h);
                __m512 e0 = lse_exp16(z0), e1 = lse_exp16(z1), e2 = lse_exp16(z2), e3 = lse_exp16(z3);
                _mm512_store_ps(es + c, _mm512_add_ps(_mm512_load_ps(es + c), _mm512_add_ps(_mm512_add_ps(e0, e1), _mm512_add_ps(e2, e3))));
            }
            if ((r + 4) % SUM_ROWS == 0) fast_flush(s, es, ncp); /* SUM_ROWS rows summed in float: into double */
        }
        for (; r < nr; r++) {
            const float *x = xb + r * C;
            for (int64_t c = 0; c < ncp; c += 16) {
                __mmask16 km = c + 16 <= nc ? (__mmask16)0xffff : kt;
                __m512 z = _mm512_sub_ps(_mm512_maskz_loadu_ps(km, x + c), _mm512_load_ps(sh + c));
                __m512 e = lse_exp16(z);
                _mm512_store_ps(es + c, _mm512_add_ps(_mm512_load_ps(es + c), e));
            }
        }
        fast_flush(s, es, ncp);
    }
    __m512 fin = _mm512_add_ps(_mm512_add_ps(fin0, fin1), _mm512_add_ps(fin2, fin3));
    return !_mm512_cmp_ps_mask(fin, fin, _CMP_UNORD_Q);
}

#define JAG_LSE_FAST 1

#elif defined(__AVX2__) && defined(__FMA__)
/* The same on AVX2, 8 lanes: each lane (column) goes through the same
 * operations in the same order as on AVX-512, so each column's m and s
 * are the AVX-512 path's bits. Ragged logsumexp of a uniform batch of 64
 * x 4096 floats (251 MB, from memory) on a Zen 3 pair, against one exp
 * pass over the same values (bench_nested --only=bandwidth): 0.70 of it
 * with the plain kernel, 1.12-1.13 with this one; from L2, the corpus
 * batch of 64: 0.79-0.88. */

/* jag__vm_exp_sum_f32 on 8 lanes, the same operations */
static inline __m256 lse_exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-86.0f));
    __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504f), _mm256_set1_ps(12582912.0f));
    __m256 k = _mm256_sub_ps(t, _mm256_set1_ps(12582912.0f));
    __m256 f = _mm256_fmsub_ps(x, _mm256_set1_ps(1.44269504f), k);
    __m256 q = _mm256_set1_ps(1.32764725e-03f);
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(9.67554096e-03f));
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(5.55071309e-02f));
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(2.40221202e-01f));
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(6.93146944e-01f));
    q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(1.00000012f));
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(q), _mm256_slli_epi32(_mm256_castps_si256(t), 23)));
}

/* the low / high 4 floats of v in double */
static inline __m256d lo_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
static inline __m256d hi_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

/* s (ncp doubles) += es (ncp floats); es = 0 */
static inline void fast_flush(double *restrict s, float *restrict es, int64_t ncp) {
    for (int64_t c = 0; c < ncp; c += 8) {
        __m256 e = _mm256_load_ps(es + c);
        _mm256_store_pd(s + c, _mm256_add_pd(_mm256_load_pd(s + c), lo_pd(e)));
        _mm256_store_pd(s + c + 4, _mm256_add_pd(_mm256_load_pd(s + c + 4), hi_pd(e)));
        _mm256_store_ps(es + c, _mm256_setzero_ps());
    }
}

/* 8 floats at p, the lanes of km (the last vector's) or all of them */
static inline __m256 lse_load(const float *p, bool whole, __m256i km) {
    return whole ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, km);
}

// as the AVX-512 rows_exp_fast_f32 (ncp = nc rounded up to 8)
static bool rows_exp_fast_f32(const float *in, int64_t C, int64_t n, int64_t nc, float *restrict sh, double *restrict s,
                              seg_pf *next) {
    int64_t ncp = (nc + 7) / 8 * 8;
    _Alignas(64) float bm[COL_BLOCK + 16], es[COL_BLOCK + 16];
    __m256i kt = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc % 8 ? (int)(nc % 8) : 8), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 zero = _mm256_setzero_ps(), fin0 = zero, fin1 = zero, fin2 = zero, fin3 = zero;
    for (int64_t c = 0; c < ncp; c += 8) _mm256_store_ps(es + c, zero);
    for (int64_t rb = 0; rb < n; rb += LSE_ROWS) {
        int64_t nr = n - rb < LSE_ROWS ? n - rb : LSE_ROWS, nxt = n - rb - nr < LSE_ROWS ? n - rb - nr : LSE_ROWS;
        const float *xb = in + rb * C;
        /* 1: the block's max, four rows at a time */
        int64_t r = 0;
        for (; r + 4 <= nr; r += 4) {
            const float *x0 = xb + r * C;
            for (int64_t k = r; k < r + 4; k++)
                if (k < nxt) seg_prefetch(x0 + (nr + k - r) * C, nc * (int64_t)sizeof(float));
                else if (next) seg_pf_step(next);
            for (int64_t c = 0; c < ncp; c += 8) {
                bool w = c + 8 <= nc;
                __m256 v0 = lse_load(x0 + c, w, kt), v1 = lse_load(x0 + C + c, w, kt);
                __m256 v2 = lse_load(x0 + 2 * C + c, w, kt), v3 = lse_load(x0 + 3 * C + c, w, kt);
                fin0 = _mm256_fmadd_ps(v0, zero, fin0), fin1 = _mm256_fmadd_ps(v1, zero, fin1);
                fin2 = _mm256_fmadd_ps(v2, zero, fin2), fin3 = _mm256_fmadd_ps(v3, zero, fin3);
                __m256 v = _mm256_max_ps(_mm256_max_ps(v0, v1), _mm256_max_ps(v2, v3));
                _mm256_store_ps(bm + c, r ? _mm256_max_ps(_mm256_load_ps(bm + c), v) : v);
            }
        }
        for (; r < nr; r++) {
            const float *x = xb + r * C;
            if (r < nxt) seg_prefetch(x + nr * C, nc * (int64_t)sizeof(float));
            else if (next) seg_pf_step(next);
            for (int64_t c = 0; c < ncp; c += 8) {
                __m256 v = lse_load(x + c, c + 8 <= nc, kt);
                fin0 = _mm256_fmadd_ps(v, zero, fin0);
                _mm256_store_ps(bm + c, r ? _mm256_max_ps(_mm256_load_ps(bm + c), v) : v);
            }
        }
        /* 2: the shift */
        for (int64_t c = 0; c < ncp; c += 8) {
            __m256 b = _mm256_load_ps(bm + c);
            if (rb == 0) {
                _mm256_store_ps(sh + c, b);
                _mm256_store_pd(s + c, _mm256_setzero_pd()), _mm256_store_pd(s + c + 4, _mm256_setzero_pd());
            } else {
                __m256 old = _mm256_load_ps(sh + c), nw = _mm256_max_ps(old, b);
                if (_mm256_movemask_ps(_mm256_cmp_ps(nw, old, _CMP_GT_OQ))) { /* s to the new shift: exp(old - new) <= 1 */
                    _Alignas(32) double d[8], f[8];
                    _mm256_store_pd(d, _mm256_sub_pd(lo_pd(old), lo_pd(nw)));
                    _mm256_store_pd(d + 4, _mm256_sub_pd(hi_pd(old), hi_pd(nw)));
#pragma omp simd
                    for (int l = 0; l < 8; l++) f[l] = d[l] == 0 ? 1.0 : jag__vm_exp_f64(d[l]);
                    _mm256_store_pd(s + c, _mm256_mul_pd(_mm256_load_pd(s + c), _mm256_load_pd(f)));
                    _mm256_store_pd(s + c + 4, _mm256_mul_pd(_mm256_load_pd(s + c + 4), _mm256_load_pd(f + 4)));
                }
                _mm256_store_ps(sh + c, nw);
            }
        }
        /* 3: the exps, four rows at a time */
        r = 0;
        for (; r + 4 <= nr; r += 4) {
            const float *x0 = xb + r * C;
            for (int64_t c = 0; c < ncp; c += 8) {
                bool w = c + 8 <= nc;
                __m256 h = _mm256_load_ps(sh + c);
                __m256 z0 = _mm256_sub_ps(lse_load(x0 + c, w, kt), h);
                __m256 z1 = _mm256_sub_ps(lse_load(x0 + C + c, w, kt), h);
                __m256 z2 = _mm256_sub_ps(lse_load(x0 + 2 * C + c, w, kt), h);
                __m256 z3 = _mm256_sub_ps(lse_load(x0 + 3 * C + c, w, kt), h);
                __m256 e0 = lse_exp8(z0), e1 = lse_exp8(z1), e2 = lse_exp8(z2), e3 = lse_exp8(z3);
                _mm256_store_ps(es + c, _mm256_add_ps(_mm256_load_ps(es + c), _mm256_add_ps(_mm256_add_ps(e0, e1), _mm256_add_ps(e2, e3))));
            }
            if ((r + 4) % SUM_ROWS == 0) fast_flush(s, es, ncp); /* SUM_ROWS rows summed in float: into double */
        }
        for (; r < nr; r++) {
            const float *x = xb + r * C;
            for (int64_t c = 0; c < ncp; c += 8) {
                __m256 z = _mm256_sub_ps(lse_load(x + c, c + 8 <= nc, kt), _mm256_load_ps(sh + c));
                _mm256_store_ps(es + c, _mm256_add_ps(_mm256_load_ps(es + c), lse_exp8(z)));
            }
        }
        fast_flush(s, es, ncp);
    }
    __m256 fin = _mm256_add_ps(_mm256_add_ps(fin0, fin1), _mm256_add_ps(fin2, fin3));
    return !_mm256_movemask_ps(_mm256_cmp_ps(fin, fin, _CMP_UNORD_Q));
}
#define JAG_LSE_FAST 1
#endif

#ifdef JAG_LSE_FAST
// in (n, C) float32 rows from the task's first row and column, nc columns -> m (nc) the max, s (nc) the
// sum of exp(x - m) in double, in the columns of finite values; *nonfinite: some column has another;
// false (nothing done) when n == 0
static bool rows_lse_fast_f32(const float *in, int64_t C, int64_t n, int64_t nc, float *restrict m, double *restrict s,
                              bool *nonfinite, seg_pf *next) {
    if (n <= 0 || nc <= 0) return false;
    _Alignas(64) float sh[COL_BLOCK + 16];
    _Alignas(64) double sd[COL_BLOCK + 16];
    *nonfinite = !rows_exp_fast_f32(in, C, n, nc, sh, sd, next);
    memcpy(m, sh, (size_t)nc * sizeof *m), memcpy(s, sd, (size_t)nc * sizeof *s);
    return true;
}
#else
static bool rows_lse_fast_f32(const float *in, int64_t C, int64_t n, int64_t nc, float *restrict m, double *restrict s,
                              bool *nonfinite, seg_pf *next) {
    (void)in, (void)C, (void)n, (void)nc, (void)m, (void)s, (void)nonfinite, (void)next;
    return false;
}
#endif

/* logsumexp's m and s of task t: the fast path, then rows_lse_f32 on
 * each column it left (non-finite values), or on the task (no fast path) */
static void rows_lse_task_f32(const seg_plan *p, const float *in, const seg_task *t, float *restrict m, double *restrict s) {
    int64_t C = p->C;
    bool nonfinite = false;
    /* the next task's first block, requested over the rows of this one's last */
    seg_pf next = seg_next_task_rows(p, in, sizeof *in, t, LSE_ROWS, t->n - (t->n - 1) / LSE_ROWS * LSE_ROWS);
    if (!rows_lse_fast_f32(in + t->r0 * C + t->c0, C, t->n, t->nc, m, s, &nonfinite, next.rows > 0 ? &next : NULL)) {
        rows_lse_f32(p, in, t, m, s);
        return;
    }
    for (int64_t c = 0; nonfinite && c < t->nc; c++) {
        bool fin = true;
        for (int64_t r = t->r0; r < t->r0 + t->n && fin; r++) fin = isfinite(in[r * C + t->c0 + c]);
        if (fin) continue;
        seg_task one = *t;
        one.c0 = t->c0 + c, one.nc = 1;
        rows_lse_f32(p, in, &one, m + c, s + c);
    }
}

static void rows_lse_task_f64(const seg_plan *p, const double *in, const seg_task *t, double *restrict m, double *restrict s) {
    rows_lse_f64(p, in, t, m, s);
}

/* M2 / max(n - correction, 0), as the dense var: NaN when n == 0 */
static double seg_var_finish(double m2, double n, int64_t correction) {
    if (n == 0) return NAN;
    double div = n - (double)correction;
    return m2 / (div > 0 ? div : 0.0);
}

/* m: the max (NaN if any), s: the sum of exp(x - m) when m is finite */
static double seg_lse_finish(double m, double s) { return m != m || isinf(m) ? m : m + log(s); }

static bool seg_extreme(jag_segment_kind k) {
    return k == JAG_SEG_AMAX || k == JAG_SEG_AMIN || k >= JAG_SEG_MAX;
}

static bool seg_is_max(jag_segment_kind k) {
    return k == JAG_SEG_AMAX || k == JAG_SEG_MAX || k == JAG_SEG_ARGMAX;
}

/* A task's result over its nc columns: a (the value: sum, max, mean of
 * var, max of logsumexp) and q (M2 of var, s of logsumexp) in double, ix
 * (the extremes' rows). Views of a task's own arrays (seg_part_mem), or
 * of a slot of a call's partial results (3 * width doubles a slot). */
typedef struct seg_part {
    double *a, *q;
    int64_t *ix;
} seg_part;

typedef struct seg_part_mem {
    double a[COL_BLOCK], q[COL_BLOCK];
    int64_t ix[COL_BLOCK];
} seg_part_mem;

static seg_part seg_part_of(seg_part_mem *m) { return (seg_part){m->a, m->q, m->ix}; }

static seg_part seg_slot(double *parts, int64_t width, int64_t slot) {
    double *b = parts + slot * 3 * width;
    return (seg_part){b, b + width, (int64_t *)(b + 2 * width)};
}

/* out[0..t->nc) = the sum of the `a` parts of the chunks t[0..t->nch) of
 * one component's columns (their first task t, k == 0), in chunk order. */
static void seg_sum_chunk_parts(double *parts, int64_t width, const seg_task *t, double *out) {
    for (int64_t c = 0; c < t->nc; c++) out[c] = 0;
    for (int64_t k = 0; k < t->nch; k++)
        for (int64_t c = 0; c < t->nc; c++) out[c] += seg_slot(parts, width, t[k].slot).a[c];
}

/* The partial results of a plan's slots, or NULL with an error set. */
static double *seg_parts_new(const char *op, const seg_plan *p) {
    double *parts = malloc((size_t)(p->nslots * 3 * p->width) * sizeof *parts);
    if (!parts) jag__error(JAG_ENOMEM, "%s: out of memory", op);
    return parts;
}

/* A task's reduction into *r (typed). */
#define DEF_SEG_TASK(SUF, T)                                                   \
    static void task_reduce_##SUF(const seg_plan *p, const T *in, const seg_task *t, jag_segment_kind kind, \
                                  bool idx, seg_part *r) {                     \
        T m[COL_BLOCK];                                                        \
        switch (kind) {                                                        \
        case JAG_SEG_SUM: case JAG_SEG_MEAN: rows_sum_##SUF(p, in, t, r->a); break; \
        case JAG_SEG_VAR: case JAG_SEG_STD: rows_var_##SUF(p, in, t, r->a, r->q); break; \
        case JAG_SEG_LSE:                                                      \
            rows_lse_task_##SUF(p, in, t, m, r->q);                            \
            for (int64_t c = 0; c < t->nc; c++) r->a[c] = m[c];                \
            break;                                                             \
        default:                                                               \
            rows_ext_##SUF(p, in, t, seg_is_max(kind), m, idx ? r->ix : NULL); \
            for (int64_t c = 0; c < t->nc; c++) r->a[c] = m[c];                \
        }                                                                      \
    }
DEF_SEG_TASK(f32, float)
DEF_SEG_TASK(f64, double)
#undef DEF_SEG_TASK

/* The partial results of a segment's chunks k = 1.. merged in order into r
 * (chunk 0's); n0 counts r's rows, nk those of chunk k. */
static void seg_merge(jag_segment_kind kind, seg_part *r, double n0, const seg_part *k, double nk, int64_t nc) {
    switch (kind) {
    case JAG_SEG_SUM: case JAG_SEG_MEAN:
        for (int64_t c = 0; c < nc; c++) r->a[c] += k->a[c];
        break;
    case JAG_SEG_VAR: case JAG_SEG_STD: { /* Chan et al. */
        double n = n0 + nk, fb = n ? nk / n : 0;
        for (int64_t c = 0; c < nc; c++) {
            double delta = k->a[c] - r->a[c];
            r->a[c] += delta * fb;
            r->q[c] += k->q[c] + delta * delta * n0 * fb;
        }
        break;
    }
    case JAG_SEG_LSE:
        for (int64_t c = 0; c < nc; c++) {
            double ma = r->a[c], mb = k->a[c], m = mb > ma || mb != mb ? mb : ma, sh = LSE_SHIFT(m);
            double da = LSE_SHIFT(ma) - sh, db = LSE_SHIFT(mb) - sh;
            r->q[c] = r->q[c] * exp(da < 0 ? da : 0) + k->q[c] * exp(db < 0 ? db : 0);
            r->a[c] = m;
        }
        break;
    default: {
        bool mx = seg_is_max(kind);
        for (int64_t c = 0; c < nc; c++)
            if (mx ? SEG_MAX_BETTER(k->a[c], r->a[c]) : SEG_MIN_BETTER(k->a[c], r->a[c])) r->a[c] = k->a[c], r->ix[c] = k->ix[c];
    }
    }
}

/* A segment's result (n rows) into y (its dtype; NULL for argmax/argmin) and
 * ix (int64; NULL unless the kind has indices), at element o. */
static void seg_store(jag_segment_kind kind, seg_part *r, double n, int64_t corr, char *y, bool f64, int64_t *ix,
                      int64_t o, int64_t nc) {
    double *a = r->a;
    switch (kind) {
    case JAG_SEG_MEAN:
        for (int64_t c = 0; c < nc; c++) a[c] = n ? a[c] / n : NAN;
        break;
    case JAG_SEG_VAR: case JAG_SEG_STD:
        for (int64_t c = 0; c < nc; c++) {
            double v = seg_var_finish(r->q[c], n, corr);
            a[c] = kind == JAG_SEG_STD ? sqrt(v) : v;
        }
        break;
    case JAG_SEG_LSE:
        if (y && !f64) { /* a float result: a log that vectorises (s >= 1 where m is finite) */
            const double *q = r->q;
#pragma omp simd
            for (int64_t c = 0; c < nc; c++) {
                double m = a[c], lg = jag__vm_log_ge1_for_f32(q[c] >= 1.0 ? q[c] : 1.0);
                a[c] = m != m || isinf(m) ? m : m + lg;
            }
        } else {
            for (int64_t c = 0; c < nc; c++) a[c] = seg_lse_finish(a[c], r->q[c]);
        }
        break;
    default: break;
    }
    if (y && f64) memcpy((double *)y + o, a, (size_t)nc * sizeof *a);
    else if (y)
        for (int64_t c = 0; c < nc; c++) ((float *)y)[o + c] = (float)a[c];
    if (ix) memcpy(ix + o, r->ix, (size_t)nc * sizeof *ix);
}

/* One call's work: task i reduced (and stored unless its segment has
 * several chunks), or the chunks of the segment whose first task is i
 * merged and stored. */
typedef struct seg_job {
    const seg_plan *p;
    const ragged_batch *s;
    const char *in;
    char *y;
    int64_t *ix;
    double *parts; /* the slots' partial results (seg_slot) */
    atomic_llong *left; /* per segment of several chunks (at its first chunk's slot): chunks not done */
    jag_segment_kind kind;
    int64_t corr;
    bool f64, lg; /* lg: log_softmax (softmax's jobs) */
    char *tmp;          /* softmax: tmp_elems elements per thread (task_softmax_*), or NULL */
    int64_t tmp_elems;
} seg_job;

/* The chunks of the segment whose first task is t, merged in order and
 * stored. */
static void seg_job_merge(const seg_job *j, const seg_task *t) {
    seg_part r = seg_slot(j->parts, j->p->width, t->slot);
    double n = (double)t->n;
    for (int64_t k = 1; k < t->nch; k++) {
        seg_part rk = seg_slot(j->parts, j->p->width, t[k].slot);
        seg_merge(j->kind, &r, n, &rk, (double)t[k].n, t->nc);
        n += (double)t[k].n;
    }
    seg_store(j->kind, &r, n, j->corr, j->y, j->f64, j->ix, t->b * j->p->C + t->c0, t->nc);
}

/* Task t reduced and stored, or, for a chunk, kept; the last chunk of a
 * segment to finish merges them all (in order: the same result whichever
 * thread it is). */
static void seg_job_task(const seg_job *j, const seg_task *t) {
    seg_part_mem mem;
    seg_part r = t->slot >= 0 ? seg_slot(j->parts, j->p->width, t->slot) : seg_part_of(&mem);
    if (j->f64) task_reduce_f64(j->p, (const double *)j->in, t, j->kind, j->ix != NULL, &r);
    else task_reduce_f32(j->p, (const float *)j->in, t, j->kind, j->ix != NULL, &r);
    if (t->slot < 0) seg_store(j->kind, &r, (double)t->n, j->corr, j->y, j->f64, j->ix, t->b * j->p->C + t->c0, t->nc);
    else if (atomic_fetch_sub(&j->left[t[-t->k].slot], 1) == 1) seg_job_merge(j, t - t->k);
}

/* fn(j, t) for every task t, a group of segments as one task per segment:
 * shared by the threads when the plan says so, else a plain loop (no
 * OpenMP region: small inputs stay cheap). */
static void seg_run(const seg_plan *p, void (*fn)(const seg_job *, const seg_task *), const seg_job *j, int64_t i) {
    const seg_task *t = &p->t[i];
    if (t->nb == 1) {
        fn(j, t);
        return;
    }
    for (int64_t b = t->b; b < t->b + t->nb; b++) {
        seg_task one = *t;
        one.b = b, one.nb = 1, one.r0 = p->s->offsets[b], one.n = seg_len(p->s, b);
        fn(j, &one);
    }
}

/* The first task of thread k of nt: the tasks go to the threads in order,
 * in runs of about equal work (rows x columns), each task to the thread its
 * middle falls in. The same tasks go to the same thread on every call, as
 * the dense kernels' static schedules do: a thread reads the rows it (or
 * the op before, split the same way) touched last, from its own cache. */
static int64_t seg_first_task(const seg_plan *p, int k, int nt) {
    if (k == nt) return p->ntasks;
    double goal = (double)p->work * k / nt, at = 0;
    int64_t i = 0;
    for (; i < p->ntasks; i++) {
        double w = (double)(p->t[i].rows * p->t[i].nc);
        if (at + w / 2 >= goal) break;
        at += w;
    }
    return i;
}

/* The threads seg_for runs p's tasks on (at most), and which one this is. */
static int seg_threads(const seg_plan *p) {
#ifdef _OPENMP
    if (p->par) return omp_get_max_threads();
#endif
    (void)p;
    return 1;
}
static int seg_thread(const seg_plan *p) {
#ifdef _OPENMP
    if (p->par) return omp_get_thread_num();
#endif
    (void)p;
    return 0;
}

static void seg_for(const seg_plan *p, void (*fn)(const seg_job *, const seg_task *), const seg_job *j) {
    if (p->par) {
#pragma omp parallel
        {
#ifdef _OPENMP
            int k = omp_get_thread_num(), nt = omp_get_num_threads();
#else
            int k = 0, nt = 1;
#endif
            for (int64_t i = seg_first_task(p, k, nt), e = seg_first_task(p, k + 1, nt); i < e; i++) seg_run(p, fn, j, i);
        }
    } else {
        for (int64_t i = 0; i < p->ntasks; i++) seg_run(p, fn, j, i);
    }
}

// values v (rows, C) contiguous, segments of rows -> y (B, C) [ix (B, C) int64]: the kind over each segment's rows
static jag_status seg_rows_reduce(const char *op, const ragged_batch *s, const jag_tensor *v, int64_t C,
                                  jag_segment_kind kind, int64_t corr, jag_tensor *y, jag_tensor *ix) {
    bool f64 = v->dtype == JAG_FLOAT64;
    seg_plan p;
    jag_status st = seg_plan_make(op, s, C, f64 ? 8 : 4, CHUNK_TASKS, CHUNK_BYTES, JAG_GRAIN_REDUCE, 1, &p);
    if (st) return st;
    /* the partial results of segments of several chunks, one per task */
    double *parts = p.nslots ? seg_parts_new(op, &p) : NULL;
    atomic_llong *left = p.nslots ? malloc((size_t)p.nslots * sizeof *left) : NULL;
    if (p.nslots && (!parts || !left)) {
        free(parts), free(left), free(p.t);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    for (int64_t i = 0; i < p.ntasks; i++)
        if (p.t[i].slot >= 0 && p.t[i].k == 0) atomic_init(&left[p.t[i].slot], (long long)p.t[i].nch);
    seg_job j = {.p = &p, .in = jag__ptr(v), .y = y ? jag__ptr(y) : NULL, .ix = ix ? (int64_t *)jag__ptr(ix) : NULL,
                 .parts = parts, .left = left, .kind = kind, .corr = corr, .f64 = f64};
    seg_for(&p, seg_job_task, &j);
    free(parts), free(left), free(p.t);
    return JAG_OK;
}

/* The factors of softmax's last pass from the column sums q (nc): 1 / q
 * (softmax) or log q (log_softmax). float32 takes vecmath.h's log for q >=
 * 1 (every column whose max is finite: its max's row adds exp(0) = 1),
 * which vectorises, and libm's for the rest (0 for a column of -inf only,
 * NaN): a call per column was most of a short component's log_softmax
 * (512 components of one row x 64 floats: 412 against softmax's 117 us). */
static void softmax_factors_f32(const double *q, float *f, int64_t nc, bool lg) {
    if (!lg) {
#pragma omp simd
        for (int64_t c = 0; c < nc; c++) f[c] = (float)(1.0 / q[c]);
        return;
    }
#pragma omp simd
    for (int64_t c = 0; c < nc; c++) f[c] = (float)jag__vm_log_ge1_for_f32(q[c] >= 1.0 ? q[c] : 1.0);
    for (int64_t c = 0; c < nc; c++)
        if (!(q[c] >= 1.0)) f[c] = (float)log(q[c]);
}
static void softmax_factors_f64(const double *q, double *f, int64_t nc, bool lg) {
    for (int64_t c = 0; c < nc; c++) f[c] = lg ? log(q[c]) : 1.0 / q[c];
}

/* softmax / log_softmax of one task: its rows of y, and the chunk's max and
 * sum into r when its segment has several chunks (else scaled at once).
 * tmp (tmp_elems elements, or NULL): where a task that is not a chunk and
 * fits puts its exps, which its last pass scales into y with streaming
 * stores. The output then costs one write to memory: exps written into y
 * and scaled there read each line of y in first, a third more traffic
 * (64 items of 1-512 rows x 4096 floats: 0.65 of a dense exp pass's rate
 * before). */
#define DEF_SEG_SOFTMAX_TASK(SUF, T)                                           \
    static void task_softmax_##SUF(const seg_plan *p, const T *in, T *out, const seg_task *t, bool lg, seg_part *r, \
                                   T *tmp, int64_t tmp_elems) {                \
        T m[COL_BLOCK], f[COL_BLOCK];                                          \
        /* the next task's rows (a segment of its own) requested while this \
         * one's exps run from cache: its max pass then reads from cache */  \
        seg_pf pf = seg_next_task_rows(p, in, sizeof(T), t, INT64_MAX, t->n / 4);         \
        seg_pf *pfp = pf.rows > 0 ? &pf : NULL;                                \
        if (t->slot >= 0 || t->n * t->nc > tmp_elems) tmp = NULL;             \
        rows_softmax_##SUF(p, in, out, t, lg, m, r->q, pfp, tmp);              \
        if (t->slot >= 0) {                                                    \
            for (int64_t c = 0; c < t->nc; c++) r->a[c] = m[c];                \
            return;                                                            \
        }                                                                      \
        softmax_factors_##SUF(r->q, f, t->nc, lg);                             \
        if (tmp)                                                               \
            rows_scale_stream_##SUF(p, out, t, lg, f, tmp);                    \
        else                                                                   \
            rows_scale_##SUF(p, out, t, lg, f);                                \
    }                                                                          \
    /* a chunk of a segment of several: scaled by the merged max and sum   \
     * (the chunks' maxima, sums to the merged shift, column by column in  \
     * vectors; exp(0) = 1 not computed) */                                \
    static void task_rescale_##SUF(const seg_plan *p, T *out, const seg_task *t, double *parts, \
                                   const seg_task *first, bool lg) {           \
        T f[COL_BLOCK];                                                        \
        double sh[COL_BLOCK], sum[COL_BLOCK];                                  \
        int64_t nc = t->nc;                                                    \
        for (int64_t c = 0; c < nc; c++) sh[c] = -INFINITY, sum[c] = 0;        \
        for (int64_t k = 0; k < first->nch; k++) {                             \
            const double *a = seg_slot(parts, p->width, first[k].slot).a;      \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) sh[c] = a[c] > sh[c] ? a[c] : sh[c]; \
        }                                                                      \
        for (int64_t c = 0; c < nc; c++) sh[c] = SEG_SHIFT(sh[c]);             \
        for (int64_t k = 0; k < first->nch; k++) {                             \
            seg_part rk = seg_slot(parts, p->width, first[k].slot);            \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) {                                 \
                double d = SEG_SHIFT(rk.a[c]) - sh[c];                         \
                sum[c] += rk.q[c] * (d < 0 ? jag__vm_exp_f64(d) : 1.0);        \
            }                                                                  \
        }                                                                      \
        const double *own = seg_slot(parts, p->width, t->slot).a;              \
        for (int64_t c = 0; c < nc; c++) {                                     \
            double d = SEG_SHIFT(own[c]) - sh[c];                              \
            f[c] = lg ? (T)(log(sum[c]) - d) : (T)((d < 0 ? jag__vm_exp_f64(d) : 1.0) / sum[c]); \
        }                                                                      \
        rows_scale_##SUF(p, out, t, lg, f);                                    \
    }
DEF_SEG_SOFTMAX_TASK(f32, float)
DEF_SEG_SOFTMAX_TASK(f64, double)
#undef DEF_SEG_SOFTMAX_TASK

/* softmax's jobs: task i's rows, then the chunks of segments of several
 * rescaled */
static void softmax_job_task(const seg_job *j, const seg_task *t) {
    seg_part_mem mem;
    seg_part r = t->slot >= 0 ? seg_slot(j->parts, j->p->width, t->slot) : seg_part_of(&mem);
    char *tmp = NULL;
    if (j->tmp) tmp = j->tmp + (size_t)seg_thread(j->p) * (size_t)j->tmp_elems * (j->f64 ? 8 : 4);
    if (j->f64) task_softmax_f64(j->p, (const double *)j->in, (double *)j->y, t, j->lg, &r, (double *)tmp, j->tmp_elems);
    else task_softmax_f32(j->p, (const float *)j->in, (float *)j->y, t, j->lg, &r, (float *)tmp, j->tmp_elems);
    if (tmp) jag__stream_fence(); /* this thread's streamed rows before anything after them */
}

static void softmax_job_rescale(const seg_job *j, const seg_task *t) {
    if (t->slot < 0) return;
    if (j->f64) task_rescale_f64(j->p, (double *)j->y, t, j->parts, t - t->k, j->lg);
    else task_rescale_f32(j->p, (float *)j->y, t, j->parts, t - t->k, j->lg);
}

/* Whether the segments write every row of the values: no holes, no rows
 * before the first segment or after the last. */
static bool seg_tiles(const ragged_batch *s) {
    const int64_t *off = s->offsets;
    int64_t B = s->batch, rows = s->values->sizes[0];
    return !s->lengths && (B == 0 ? rows == 0 : off[0] == 0 && off[B] == rows);
}

// values (R, C) -> y (R, C) contiguous, values-shaped: softmax (or log_softmax) down each segment's rows,
// per column; rows outside every segment are 0
jag_status jag__ragged_softmax_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                      bool log_softmax, jag_tensor *y) {
    ragged_batch sb = batch_of(values, rows), *s = &sb;
    jag_tensor *v = NULL;
    jag_status st = contiguous_values(op, s, &v);
    if (st) return st;
    if (!seg_tiles(s)) zero_all(y); /* rows not written */
    bool f64 = v->dtype == JAG_FLOAT64;
    seg_plan p = {0};
    /* segments are cut into chunks for the threads only when there are too
     * few columns for blocks of them to feed the threads (a chunked segment
     * takes one more pass); from the shapes alone, as the results must not
     * depend on the thread count */
    int64_t C = columns(s), tasks = C >= SOFTMAX_UNCHUNKED_COLS ? 1 : SOFTMAX_TASKS;
    st = seg_plan_make(op, s, C, f64 ? 8 : 4, tasks, SOFTMAX_CHUNK_BYTES, JAG_GRAIN_ROWS, 2, &p);
    double *parts = !st && p.nslots ? seg_parts_new(op, &p) : NULL;
    if (st || (p.nslots && !parts)) {
        if (!st) st = jag_last_status();
        jag_release(v), free(p.t);
        return st;
    }
    seg_job j = {.p = &p, .in = jag__ptr(v), .y = jag__ptr(y), .parts = parts, .f64 = f64, .lg = log_softmax};
    /* an output for memory: the exps of each task that is not a chunk go
     * through a buffer per thread (task_softmax_*), as large as the
     * largest such task up to SOFTMAX_TMP_BYTES; larger tasks, and every
     * task when the buffer cannot be had, write y and scale it there */
    size_t es = f64 ? 8 : 4;
    if (jag__stream_stores(j.y, jag_numel(y) * (int64_t)es)) {
        int64_t most = 0;
        for (int64_t i = 0; i < p.ntasks; i++) {
            const seg_task *t = &p.t[i];
            int64_t n = t->nb == 1 ? t->n : t->rows, el = n * t->nc; /* a group: its segments one at a time */
            if (t->slot < 0 && el > most && el * (int64_t)es <= SOFTMAX_TMP_BYTES) most = el;
        }
        j.tmp = most ? malloc((size_t)seg_threads(&p) * (size_t)most * es) : NULL;
        j.tmp_elems = j.tmp ? most : 0;
    }
    seg_for(&p, softmax_job_task, &j);
    if (p.nslots) seg_for(&p, softmax_job_rescale, &j);
    free(j.tmp), free(parts), free(p.t);
    jag_release(v);
    return JAG_OK;
}

/* softmax / log_softmax's gradient down each segment, on the engine's
 * tasks: a first pass sums, per column of a segment, g y (softmax) or g
 * (log_softmax) in double (a segment's chunks summed in order), then one
 * pass writes each row: y (g - sum) or g - exp(y) sum. */
#define DEF_SEG_SOFTMAX_GRAD(SUF, T)                                           \
    static void softmax_grad_sum_##SUF(const seg_plan *p, const T *y, const T *g, const seg_task *t, bool lg, \
                                       double *restrict acc) {                 \
        int64_t C = p->C, c0 = t->c0, nc = t->nc, e = t->r0 + t->n;            \
        for (int64_t c = 0; c < nc; c++) acc[c] = 0;                           \
        for (int64_t r = t->r0; r < e; r++) {                                  \
            const T *restrict yr = y + r * C + c0, *restrict gr = g + r * C + c0; \
            if (lg) {                                                          \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) acc[c] += (double)gr[c];      \
            } else {                                                           \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) acc[c] += (double)gr[c] * (double)yr[c]; \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    /* exp(y) of vecmath.h: y <= 0 (a log_softmax's output) */                \
    static void softmax_grad_rows_##SUF(const seg_plan *p, const T *y, const T *g, T *z, const seg_task *t, bool lg, \
                                        const double *restrict sum) {          \
        int64_t C = p->C, c0 = t->c0, nc = t->nc, e = t->r0 + t->n;            \
        for (int64_t r = t->r0; r < e; r++) {                                  \
            const T *restrict yr = y + r * C + c0, *restrict gr = g + r * C + c0; \
            T *restrict zr = z + r * C + c0;                                   \
            if (lg) {                                                          \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) {                             \
                    double ey = yr[c] == -INFINITY ? 0.0 : jag__vm_exp_f64((double)yr[c]); \
                    zr[c] = (T)((double)gr[c] - ey * sum[c]);                  \
                }                                                              \
            } else {                                                           \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) zr[c] = (T)((double)yr[c] * ((double)gr[c] - sum[c])); \
            }                                                                  \
        }                                                                      \
    }
DEF_SEG_SOFTMAX_GRAD(f32, float)
DEF_SEG_SOFTMAX_GRAD(f64, double)
#undef DEF_SEG_SOFTMAX_GRAD

/* One softmax gradient call (seg_for's job: in is y, y is z). */
typedef struct softmax_grad_job {
    seg_job j;
    const char *g;
    double *sum; /* (B, C): the per-column sums of the first pass */
} softmax_grad_job;

static void softmax_grad_job_sum(const seg_job *sj, const seg_task *t) {
    const softmax_grad_job *j = (const softmax_grad_job *)sj;
    double *acc = t->slot >= 0 ? seg_slot(sj->parts, sj->p->width, t->slot).a : j->sum + t->b * sj->p->C + t->c0;
    if (sj->f64) softmax_grad_sum_f64(sj->p, (const double *)sj->in, (const double *)j->g, t, sj->lg, acc);
    else softmax_grad_sum_f32(sj->p, (const float *)sj->in, (const float *)j->g, t, sj->lg, acc);
}

static void softmax_grad_job_merge(const seg_job *sj, const seg_task *t) {
    const softmax_grad_job *j = (const softmax_grad_job *)sj;
    if (t->slot < 0 || t->k != 0) return;
    seg_sum_chunk_parts(sj->parts, sj->p->width, t, j->sum + t->b * sj->p->C + t->c0);
}

static void softmax_grad_job_rows(const seg_job *sj, const seg_task *t) {
    const softmax_grad_job *j = (const softmax_grad_job *)sj;
    const double *sum = j->sum + t->b * sj->p->C + t->c0;
    if (sj->f64) softmax_grad_rows_f64(sj->p, (const double *)sj->in, (const double *)j->g, (double *)sj->y, t, sj->lg, sum);
    else softmax_grad_rows_f32(sj->p, (const float *)sj->in, (const float *)j->g, (float *)sj->y, t, sj->lg, sum);
}

// y = the forward's output (R, C) (s's values), g (R, C) of y's dtype -> z (R, C) contiguous: the values'
// gradient; rows outside every segment are 0
jag_status jag__ragged_softmax_backward_kernel(const char *op, const jag_tensor *y, const jag_ragged_rows *rows,
                                               const jag_tensor *g, bool log_softmax, jag_tensor *z) {
    ragged_batch sb = batch_of(y, rows), *s = &sb;
    jag_tensor *yc = NULL, *gc = NULL;
    jag_status st = contiguous_values(op, s, &yc);
    if (st) return st;
    if ((st = contiguous(op, g, &gc))) {
        jag_release(yc);
        return st;
    }
    if (!seg_tiles(s)) zero_all(z);
    int64_t C = columns(s), B = s->batch;
    bool f64 = yc->dtype == JAG_FLOAT64;
    seg_plan p = {0};
    st = seg_plan_make(op, s, C, f64 ? 8 : 4, SOFTMAX_TASKS, SOFTMAX_CHUNK_BYTES, JAG_GRAIN_ROWS, 2, &p);
    double *parts = !st && p.nslots ? seg_parts_new(op, &p) : NULL;
    double *sum = !st ? malloc((size_t)(B * C > 0 ? B * C : 1) * sizeof *sum) : NULL;
    if (!st && (!sum || (p.nslots && !parts))) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    if (!st) {
        softmax_grad_job j = {.j = {.p = &p, .s = s, .in = jag__ptr(yc), .y = jag__ptr(z), .parts = parts, .f64 = f64,
                                    .lg = log_softmax},
                              .g = jag__ptr(gc), .sum = sum};
        seg_for(&p, softmax_grad_job_sum, &j.j);
        if (p.nslots) seg_for(&p, softmax_grad_job_merge, &j.j);
        seg_for(&p, softmax_grad_job_rows, &j.j);
    }
    free(parts), free(sum), free(p.t);
    jag_release(yc), jag_release(gc);
    return st;
}

// g (B, C) [scaled per segment by 1/len when `mean`] -> z values-shaped (R, C): row r of segment b gets g[b];
// rows in holes get 0
jag_status jag__ragged_broadcast_kernel(const char *op, const jag_ragged_rows *rows, const jag_tensor *g, bool mean,
                                        jag_tensor *z) {
    ragged_batch sb = batch_of(z, rows), *s = &sb;
    jag_tensor *gc = NULL, *y = z;
    jag_status st = contiguous(op, g, &gc);
    if (st) return st;
    const int64_t *off = s->offsets;
    int64_t B = s->batch, C = columns(s);
    if (!seg_tiles(s)) zero_all(z); /* rows no segment covers */
    bool f64 = y->dtype == JAG_FLOAT64, gf64 = gc->dtype == JAG_FLOAT64;
    size_t es = f64 ? 8 : 4;
    const char *gp = jag__ptr(gc);
    char *o = jag__ptr(y);
    JAG_PARALLEL_IF(jag_numel(y) >= JAG_GRAIN_MEMORY, "omp parallel for schedule(dynamic, 4)", /* copies */
        for (int64_t b = 0; b < B; b++) { /* a block of g's row, scaled, then copied into each row */
            int64_t r0 = off[b], n = seg_len(s, b);
            double scale = mean && n ? 1.0 / (double)n : 1.0;
            _Alignas(64) char row[COL_BLOCK * 8];
            for (int64_t c0 = 0; c0 < C && n; c0 += COL_BLOCK) {
                int64_t nc = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
                for (int64_t c = 0; c < nc; c++) STORE(row, f64, c, LOAD(gp, gf64, b * C + c0 + c) * scale);
                for (int64_t r = r0; r < r0 + n; r++) memcpy(o + (r * C + c0) * (int64_t)es, row, (size_t)nc * es);
            }
        });
    jag_release(gc);
    return JAG_OK;
}

/* ---- reductions over the ragged dim and a set of trailing dims ----------- */

/* Every kind, over the ragged dim alone or with trailing dims. The values
 * are read as (rows, K, R): K kept columns and, for each, R trailing
 * elements reduced together with the segment's rows (R = 1: the ragged dim
 * alone, which the engine above runs). A set of trailing dims that is not a
 * suffix is moved to the end first (one copy). */
typedef struct seg_geom {
    jag_tensor *v;        /* contiguous (rows, K, R), a new reference */
    const int64_t *off;   /* offsets (B+1) */
    const ragged_batch *s;
    int64_t B, K, R;
    int perm[JAG_MAX_DIMS]; /* values dims in v's order (identity when not moved) */
    int64_t psz[JAG_MAX_DIMS];
    int nd;               /* values ndim */
    bool moved;
} seg_geom;

/* A contiguous copy of x with its dims in the order perm (x's dim perm[d]
 * becomes dim d). */
static jag_status permuted_copy(const char *op, const jag_tensor *x, const int *perm, jag_tensor **out) {
    int64_t sz[JAG_MAX_DIMS], st[JAG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) sz[d] = x->sizes[perm[d]], st[d] = x->strides[perm[d]];
    jag_tensor *view = jag__tensor_view(x, sz, st, x->ndim, x->offset);
    if (!view) return jag_last_status();
    jag_status s = contiguous(op, view, out);
    jag_release(view);
    return s;
}

static jag_status seg_geom_make(const char *op, const ragged_batch *s, unsigned mask, seg_geom *g) {
    const jag_tensor *x = s->values;
    int nd = x->ndim, n = 0;
    memset(g, 0, sizeof *g);
    g->s = s, g->B = s->batch, g->nd = nd, g->off = s->offsets, g->K = 1, g->R = 1;
    g->perm[n++] = 0;
    for (int d = 1; d < nd; d++)
        if (!(mask >> d & 1)) g->perm[n++] = d, g->K *= x->sizes[d];
    for (int d = 1; d < nd; d++)
        if (mask >> d & 1) g->perm[n++] = d, g->R *= x->sizes[d];
    for (int d = 0; d < nd; d++) {
        g->psz[d] = x->sizes[g->perm[d]];
        if (g->perm[d] != d) g->moved = true;
    }
    if (!g->moved) return contiguous_values(op, s, &g->v);
    return permuted_copy(op, x, g->perm, &g->v);
}

/* One segment b, columns [k0, k0 + nk) of (rows, K, R) -> out (B, K), for
 * the kinds without indices. Typed: rows in order, columns inner, the R
 * trailing elements of a column innermost; double accumulators. */
#define DEF_SEG_GENERIC(NAME, T)                                               \
    static void NAME(const T *in, T *out, int64_t K, int64_t R, int64_t r0, int64_t n, int64_t b, int64_t k0, \
                     int64_t nk, jag_segment_kind kind, int64_t corr) {        \
        double a[COL_BLOCK], m[COL_BLOCK];                                     \
        bool nan[COL_BLOCK];                                                   \
        int64_t C = K * R;                                                     \
        double cnt = (double)n * (double)R;                                    \
        bool is_max = kind == JAG_SEG_AMAX || kind == JAG_SEG_LSE;             \
        for (int64_t k = 0; k < nk; k++) a[k] = 0, m[k] = is_max ? -INFINITY : INFINITY, nan[k] = false; \
        if (kind == JAG_SEG_AMAX || kind == JAG_SEG_AMIN || kind == JAG_SEG_LSE) { \
            for (int64_t r = r0; r < r0 + n; r++)                              \
                for (int64_t k = 0; k < nk; k++) {                             \
                    const T *x = in + r * C + (k0 + k) * R;                    \
                    for (int64_t q = 0; q < R; q++) {                          \
                        double v = (double)x[q];                               \
                        nan[k] |= v != v;                                      \
                        m[k] = is_max ? (v > m[k] ? v : m[k]) : (v < m[k] ? v : m[k]); \
                    }                                                          \
                }                                                              \
            if (kind != JAG_SEG_LSE) {                                         \
                for (int64_t k = 0; k < nk; k++) out[b * K + k0 + k] = (T)(nan[k] ? NAN : m[k]); \
                return;                                                        \
            }                                                                  \
            for (int64_t r = r0; r < r0 + n; r++)                              \
                for (int64_t k = 0; k < nk; k++) {                             \
                    if (nan[k] || isinf(m[k])) continue;                       \
                    const T *x = in + r * C + (k0 + k) * R;                    \
                    double acc = 0;                                            \
                    for (int64_t q = 0; q < R; q++) acc += exp((double)x[q] - m[k]); \
                    a[k] += acc;                                               \
                }                                                              \
            for (int64_t k = 0; k < nk; k++)                                   \
                out[b * K + k0 + k] = (T)(nan[k] ? NAN : isinf(m[k]) ? m[k] : m[k] + log(a[k])); \
            return;                                                            \
        }                                                                      \
        for (int64_t r = r0; r < r0 + n; r++) /* sum, mean, var, std */        \
            for (int64_t k = 0; k < nk; k++) {                                 \
                const T *x = in + r * C + (k0 + k) * R;                        \
                double acc = 0;                                                \
                for (int64_t q = 0; q < R; q++) acc += (double)x[q];           \
                a[k] += acc;                                                   \
            }                                                                  \
        if (kind == JAG_SEG_SUM || kind == JAG_SEG_MEAN) {                     \
            for (int64_t k = 0; k < nk; k++)                                   \
                out[b * K + k0 + k] = (T)(kind == JAG_SEG_SUM ? a[k] : cnt ? a[k] / cnt : NAN); \
            return;                                                            \
        }                                                                      \
        for (int64_t k = 0; k < nk; k++) m[k] = cnt ? a[k] / cnt : 0, a[k] = 0; \
        for (int64_t r = r0; r < r0 + n; r++)                                  \
            for (int64_t k = 0; k < nk; k++) {                                 \
                const T *x = in + r * C + (k0 + k) * R;                        \
                double acc = 0;                                                \
                for (int64_t q = 0; q < R; q++) {                              \
                    double d = (double)x[q] - m[k];                            \
                    acc += d * d;                                              \
                }                                                              \
                a[k] += acc;                                                   \
            }                                                                  \
        for (int64_t k = 0; k < nk; k++) {                                     \
            double v = seg_var_finish(a[k], cnt, corr);                        \
            out[b * K + k0 + k] = (T)(kind == JAG_SEG_STD ? sqrt(v) : v);      \
        }                                                                      \
    }
DEF_SEG_GENERIC(seg_generic_f32, float)
DEF_SEG_GENERIC(seg_generic_f64, double)
#undef DEF_SEG_GENERIC

static const char *seg_kind_word(jag_segment_kind k) {
    switch (k) {
    case JAG_SEG_AMAX: case JAG_SEG_MAX: case JAG_SEG_ARGMAX: return "max";
    default: return "min";
    }
}

// values (rows, D...) with segments of rows; mask: the trailing dims of values (bit d: values dim d >= 1) reduced
// with the ragged dim -> y (B, kept D...) of the values' dtype [ix (B, kept D...) int64 indices for max/min/arg],
// both contiguous and given (y NULL for argmax/argmin)
jag_status jag__ragged_reduce_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                     const jag_segment_spec *sp, jag_tensor *y, jag_tensor *ix) {
    ragged_batch sb = batch_of(values, rows), *s = &sb;
    jag_status st;
    jag_segment_kind kind = sp->kind;
    int64_t Rall = 1;
    for (int d = 1; d < s->values->ndim; d++)
        if (sp->mask >> d & 1) Rall *= s->values->sizes[d];
    if (seg_extreme(kind))
        for (int64_t b = 0; b < s->batch; b++)
            if (seg_len(s, b) == 0 || Rall == 0)
                return jag__error(JAG_EINVAL, "%s: component %lld is empty: its %s over the ragged dim is undefined", op,
                                  (long long)b, seg_kind_word(kind));
    if (Rall == 1) { /* the ragged dim alone (reduced dims of size 1 change nothing) */
        jag_tensor *v = NULL;
        if ((st = contiguous_values(op, s, &v))) return st;
        st = seg_rows_reduce(op, s, v, columns(s), kind, sp->correction, y, seg_extreme(kind) && kind >= JAG_SEG_MAX ? ix : NULL);
        jag_release(v);
        return st;
    }
    seg_geom g;
    if ((st = seg_geom_make(op, s, sp->mask, &g))) return st;
    bool f64 = g.v->dtype == JAG_FLOAT64;
    const char *in = jag__ptr(g.v);
    char *o = jag__ptr(y);
    int64_t blocks = (g.K + COL_BLOCK - 1) / COL_BLOCK, K = g.K, R = g.R, B = g.B;
    if (K == 0) blocks = 0;
    const int64_t *off = g.off;
    JAG_PARALLEL_IF(jag_numel(g.v) >= JAG_GRAIN_REDUCE, "omp parallel for schedule(dynamic, 1)",
        for (int64_t task = 0; task < B * blocks; task++) {
            int64_t b = task / blocks, k0 = task % blocks * COL_BLOCK, nk = K - k0 < COL_BLOCK ? K - k0 : COL_BLOCK;
            if (f64) seg_generic_f64((const double *)in, (double *)o, K, R, off[b], seg_len(s, b), b, k0, nk, kind, sp->correction);
            else seg_generic_f32((const float *)in, (float *)o, K, R, off[b], seg_len(s, b), b, k0, nk, kind, sp->correction);
        });
    jag_release(g.v);
    return JAG_OK;
}

/* ---- integer values ---------------------------------------------------- */

static int64_t int_at(const void *p, jag_dtype dt, int64_t i) {
    switch (dt) {
    case JAG_INT32: return ((const int32_t *)p)[i];
    case JAG_INT64: return ((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i]; /* bool */
    }
}

static void int_store(void *p, jag_dtype dt, int64_t i, int64_t v) {
    switch (dt) {
    case JAG_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case JAG_INT64: ((int64_t *)p)[i] = v; break;
    default: ((uint8_t *)p)[i] = (uint8_t)v; break; /* bool */
    }
}

/* sum, mean, amax and amin of integer (or bool) values over the ragged dim
 * and the trailing dims in sp->mask, with torch's result dtypes: sum int64
 * (wrapping on overflow, as torch), mean float32 (torch's default dtype; the
 * int64 sum divided by the count in double; NaN for an empty component),
 * amax / amin the values' dtype (an empty component gives the dtype's
 * lowest / highest value, as torch's padded reduction does). One plain pass
 * over each component's rows; column c of a row adds into the output column
 * it keeps. */
jag_status jag__ragged_reduce_int_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                         const jag_segment_spec *sp, jag_tensor *y) {
    ragged_batch sb = batch_of(values, rows), *s = &sb;
    jag_segment_kind kind = sp->kind; /* SUM, MEAN, AMAX or AMIN */
    jag_dtype dt = s->values->dtype, odt = y->dtype;
    int64_t C = columns(s), n_out = jag__numel(y->sizes + 1, y->ndim - 1);
    jag_tensor *v = NULL;
    int64_t *col = malloc((size_t)(C > 0 ? C : 1) * sizeof *col), *acc = malloc((size_t)(n_out > 0 ? n_out : 1) * sizeof *acc);
    int64_t *cnt = malloc((size_t)(n_out > 0 ? n_out : 1) * sizeof *cnt);
    jag_status st = (!col || !acc || !cnt) ? jag__error(JAG_ENOMEM, "%s: out of memory", op) : JAG_OK;
    if (!st) st = contiguous_values(op, s, &v);
    if (st) goto done;
    /* col[c]: the output column that values column c reduces into */
    for (int64_t c = 0; c < C; c++) {
        int64_t rem = c, o = 0, stride_in = C, stride_out = n_out;
        for (int d = 1; d < s->values->ndim; d++) {
            int64_t sz = s->values->sizes[d];
            stride_in /= sz;
            int64_t i = rem / stride_in;
            rem %= stride_in;
            if (!(sp->mask >> d & 1)) stride_out /= sz, o += i * stride_out;
        }
        col[c] = o;
    }
    int64_t lo = dt == JAG_INT32 ? INT32_MIN : dt == JAG_INT64 ? INT64_MIN : 0;
    int64_t hi = dt == JAG_INT32 ? INT32_MAX : dt == JAG_INT64 ? INT64_MAX : 1;
    const void *src = jag__ptr(v);
    void *dst = jag__ptr(y);
    for (int64_t b = 0; b < s->batch; b++) {
        int64_t start = s->offsets[b], len = seg_len(s, b);
        for (int64_t k = 0; k < n_out; k++) acc[k] = kind == JAG_SEG_AMAX ? lo : kind == JAG_SEG_AMIN ? hi : 0, cnt[k] = 0;
        for (int64_t r = start; r < start + len; r++)
            for (int64_t c = 0; c < C; c++) {
                int64_t x = int_at(src, dt, r * C + c), *a = &acc[col[c]];
                if (kind == JAG_SEG_AMAX) *a = x > *a ? x : *a;
                else if (kind == JAG_SEG_AMIN) *a = x < *a ? x : *a;
                else *a = (int64_t)((uint64_t)*a + (uint64_t)x), cnt[col[c]]++;
            }
        for (int64_t k = 0; k < n_out; k++) {
            if (kind == JAG_SEG_MEAN) ((float *)dst)[b * n_out + k] = cnt[k] ? (float)((double)acc[k] / (double)cnt[k]) : NAN;
            else int_store(dst, odt, b * n_out + k, acc[k]);
        }
    }
done:
    free(col), free(acc), free(cnt), jag_release(v);
    return st;
}

jag_status jag__ragged_reduce_int_indices_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                                 bool max, jag_tensor *y, jag_tensor *ix) {
    ragged_batch sb = batch_of(values, rows), *s = &sb;
    jag_dtype dt = s->values->dtype;
    int64_t C = columns(s);
    for (int64_t b = 0; b < s->batch; b++)
        if (seg_len(s, b) == 0 || C == 0)
            return jag__error(JAG_EINVAL, "%s: component %lld is empty: its %s over the ragged dim is undefined", op,
                              (long long)b, max ? "max" : "min");
    jag_tensor *v = NULL;
    jag_status st = contiguous_values(op, s, &v);
    if (st) return st;
    const void *src = jag__ptr(v);
    void *best = jag__ptr(y);
    int64_t *at = (int64_t *)jag__ptr(ix);
    for (int64_t b = 0; b < s->batch; b++) {
        int64_t start = s->offsets[b], len = seg_len(s, b), o = b * C;
        for (int64_t c = 0; c < C; c++) int_store(best, dt, o + c, int_at(src, dt, start * C + c)), at[o + c] = 0;
        /* row by row; a later row wins only when strictly better: the first index */
        for (int64_t r = 1; r < len; r++)
            for (int64_t c = 0; c < C; c++) {
                int64_t x = int_at(src, dt, (start + r) * C + c), cur = int_at(best, dt, o + c);
                if (max ? x > cur : x < cur) int_store(best, dt, o + c, x), at[o + c] = r;
            }
    }
    jag_release(v);
    return JAG_OK;
}

/* ---- gradients ------------------------------------------------------------ */

/* The gradient of any reduction over the ragged dim and trailing dims,
 * plainly: for each segment and kept column, its rows and R trailing
 * elements, element by element in double. What runs when R > 1, and the
 * reference of the row-streaming version below. */
static jag_status seg_grad_generic(const char *op, const ragged_batch *s, const jag_segment_spec *sp, const jag_tensor *y,
                                   const jag_tensor *idx, const jag_tensor *g, jag_tensor *out) {
    seg_geom geo;
    jag_tensor *yc = NULL, *gc = NULL, *ic = NULL, *z = NULL;
    jag_status st = seg_geom_make(op, s, sp->mask, &geo);
    if (st) return st;
    st = contiguous(op, y, &yc);
    if (!st) st = contiguous(op, g, &gc);
    if (!st) st = contiguous(op, idx, &ic);
    /* z: out itself, or (trailing dims moved) a zeroed (rows, K, R) copied into out at the end */
    if (!st && !geo.moved) zero_all(z = jag_retain(out));
    else if (!st && !(z = jag__tensor_new(op, geo.psz, geo.nd, geo.v->dtype, true, false))) st = jag_last_status();
    if (!st) {
        int64_t B = geo.B, K = geo.K, R = geo.R, C = K * R;
        bool f64 = geo.v->dtype == JAG_FLOAT64, gf64 = gc->dtype == JAG_FLOAT64, yf64 = yc && yc->dtype == JAG_FLOAT64;
        const char *in = jag__ptr(geo.v), *yp = yc ? jag__ptr(yc) : NULL, *gp = jag__ptr(gc);
        const int64_t *ip = ic ? (const int64_t *)jag__ptr(ic) : NULL;
        char *o = jag__ptr(z);
        jag_segment_kind kind = sp->kind;
        const int64_t *off = geo.off;
        /* per element: g and the stats (an exp for logsumexp) */
        JAG_PARALLEL_IF(jag_numel(z) >= JAG_GRAIN_ROWS, "omp parallel for schedule(dynamic, 1)",
            for (int64_t b = 0; b < B; b++) {
                int64_t r0 = off[b], n = seg_len(s, b);
                double cnt = (double)n * (double)R;
                for (int64_t k = 0; k < K; k++) {
                    double gv = LOAD(gp, gf64, b * K + k), yv = yp ? LOAD(yp, yf64, b * K + k) : 0;
                    switch (kind) {
                    case JAG_SEG_SUM: case JAG_SEG_MEAN: {
                        double v = kind == JAG_SEG_MEAN ? gv / cnt : gv;
                        for (int64_t r = r0; r < r0 + n; r++)
                            for (int64_t q = 0; q < R; q++) STORE(o, f64, r * C + k * R + q, v);
                        break;
                    }
                    case JAG_SEG_AMAX: case JAG_SEG_AMIN: { /* split evenly among the ties, as the dense rule */
                        int64_t ties = 0;
                        for (int64_t r = r0; r < r0 + n; r++)
                            for (int64_t q = 0; q < R; q++) {
                                double x = LOAD(in, f64, r * C + k * R + q);
                                ties += x == yv || (isnan(x) && isnan(yv));
                            }
                        for (int64_t r = r0; r < r0 + n && ties; r++)
                            for (int64_t q = 0; q < R; q++) {
                                double x = LOAD(in, f64, r * C + k * R + q);
                                if (x == yv || (isnan(x) && isnan(yv))) STORE(o, f64, r * C + k * R + q, gv / (double)ties);
                            }
                        break;
                    }
                    case JAG_SEG_LSE: /* g exp(x - y); nothing when y is -inf */
                        if (yv == -INFINITY) break;
                        for (int64_t r = r0; r < r0 + n; r++)
                            for (int64_t q = 0; q < R; q++)
                                STORE(o, f64, r * C + k * R + q, gv * exp(LOAD(in, f64, r * C + k * R + q) - yv));
                        break;
                    case JAG_SEG_VAR: case JAG_SEG_STD: { /* var: g 2 (x - mean) / max(N - c, 0); std: g (x - mean) / (max(N - c, 0) y) */
                        double mean = 0, div = cnt - (double)sp->correction;
                        if (div < 0) div = 0;
                        for (int64_t r = r0; r < r0 + n; r++)
                            for (int64_t q = 0; q < R; q++) mean += LOAD(in, f64, r * C + k * R + q);
                        mean = cnt ? mean / cnt : 0;
                        double f = kind == JAG_SEG_VAR ? 2.0 * gv / div : yv == 0 ? 0.0 : gv / (div * yv);
                        for (int64_t r = r0; r < r0 + n; r++)
                            for (int64_t q = 0; q < R; q++)
                                STORE(o, f64, r * C + k * R + q, f * (LOAD(in, f64, r * C + k * R + q) - mean));
                        break;
                    }
                    default: /* max / min: the winning row */
                        if (n) STORE(o, f64, (r0 + ip[b * K + k]) * C + k, gv);
                        break;
                    }
                }
            });
    }
    jag_release(yc), jag_release(gc), jag_release(ic);
    if (!st && geo.moved) { /* back to the values' dim order */
        int64_t sz[JAG_MAX_DIMS], sd[JAG_MAX_DIMS];
        for (int d = 0; d < geo.nd; d++) sz[geo.perm[d]] = z->sizes[d], sd[geo.perm[d]] = z->strides[d];
        jag_tensor *back = jag__tensor_view(z, sz, sd, geo.nd, z->offset);
        if (back) jag__copy_into(out, back);
        else st = jag_last_status();
        jag_release(back);
    }
    jag_release(z), jag_release(geo.v);
    return st;
}

/* The row-streaming gradient (the ragged dim alone, R = 1), on the tasks of
 * the engine above: a first pass for the kinds that need a per-column
 * statistic of the segment (var, std: the sum for the mean; amax, amin: how
 * many rows equal the max), summed over a segment's chunks, then one pass
 * that writes each row. Element math in double, as seg_grad_generic,
 * except where T gives the same answer or the dense rule's: the maxima are
 * found by comparing in T, and logsumexp's g exp(x - y) is computed in T,
 * as the dense rule computes it (float32: half the double lanes, and
 * vecmath.h's float exp). */
#define DEF_SEG_GRAD(SUF, T, SUMF, EXPF)                                       \
    /* sum of x (var, std: SUMF, in double) or count of x equal to y (amax,  \
     * amin), per column */                                                    \
    static void grad_stat_##SUF(const seg_plan *p, const T *in, const seg_task *t, jag_segment_kind kind, \
                                const double *restrict yv, double *restrict acc) { \
        int64_t C = p->C, c0 = t->c0, nc = t->nc, e = t->r0 + t->n;            \
        if (kind == JAG_SEG_VAR || kind == JAG_SEG_STD) {                      \
            SUMF(in + t->r0 * C + c0, C, t->n, nc, acc);                       \
            return;                                                            \
        }                                                                      \
        T y[COL_BLOCK];                                                        \
        int64_t cnt[COL_BLOCK];                                                \
        for (int64_t c = 0; c < nc; c++) y[c] = (T)yv[c], cnt[c] = 0;          \
        for (int64_t r = t->r0; r < e; r++) {                                  \
            const T *restrict x = in + r * C + c0;                             \
            _Pragma("omp simd")                                                \
            for (int64_t c = 0; c < nc; c++) cnt[c] += x[c] == y[c] || (x[c] != x[c] && y[c] != y[c]); \
        }                                                                      \
        for (int64_t c = 0; c < nc; c++) acc[c] = (double)cnt[c];              \
    }                                                                          \
    /* the task's rows of z from the columns' g, y and statistic st (the     \
     * segment's mean or count of maxima); n: the segment's rows */           \
    static void grad_rows_##SUF(const seg_plan *p, const T *in, T *out, const seg_task *t, jag_segment_kind kind, \
                                int64_t corr, double n, const double *restrict gv, const double *restrict yv, \
                                const double *restrict st) {                   \
        int64_t C = p->C, c0 = t->c0, nc = t->nc, e = t->r0 + t->n;            \
        double f[COL_BLOCK], a[COL_BLOCK];                                     \
        T v[COL_BLOCK], gw[COL_BLOCK], yw[COL_BLOCK]; /* amax, amin, logsumexp: \
            the share of g and y in T (y of T is exact; exp(x - y) in T, as \
            the dense rule) */                                                 \
        double div = n - (double)corr;                                         \
        div = div > 0 ? div : 0;                                               \
        for (int64_t c = 0; c < nc; c++) {                                     \
            switch (kind) {                                                    \
            case JAG_SEG_MEAN: v[c] = (T)(gv[c] / n); break;                   \
            case JAG_SEG_VAR: f[c] = 2.0 * gv[c] / div, a[c] = n ? st[c] / n : 0; break; \
            case JAG_SEG_STD: f[c] = yv[c] == 0 ? 0.0 : gv[c] / (div * yv[c]), a[c] = n ? st[c] / n : 0; break; \
            case JAG_SEG_AMAX: case JAG_SEG_AMIN: gw[c] = (T)(gv[c] / st[c]), yw[c] = (T)yv[c]; break; \
            case JAG_SEG_LSE: gw[c] = (T)gv[c], yw[c] = (T)yv[c]; break;       \
            default: v[c] = (T)gv[c];                                          \
            }                                                                  \
        }                                                                      \
        for (int64_t r = t->r0; r < e; r++) {                                  \
            const T *restrict x = in + r * C + c0;                             \
            T *restrict z = out + r * C + c0;                                  \
            switch (kind) {                                                    \
            case JAG_SEG_LSE: /* g exp(x - y); nothing when y is -inf */      \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++)                               \
                    z[c] = yw[c] == -INFINITY ? (T)0 : gw[c] * EXPF(x[c] - yw[c]);  \
                break;                                                         \
            case JAG_SEG_VAR: case JAG_SEG_STD:                                \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++) z[c] = (T)(f[c] * ((double)x[c] - a[c])); \
                break;                                                         \
            case JAG_SEG_AMAX: case JAG_SEG_AMIN: /* split evenly among the ties */ \
                _Pragma("omp simd")                                            \
                for (int64_t c = 0; c < nc; c++)                               \
                    z[c] = x[c] == yw[c] || (x[c] != x[c] && yw[c] != yw[c]) ? gw[c] : (T)0; \
                break;                                                         \
            default: memcpy(z, v, (size_t)nc * sizeof(T)); /* sum, mean */     \
            }                                                                  \
        }                                                                      \
    }
DEF_SEG_GRAD(f32, float, jag__sum_rows_f32, jag__vm_exp_f32)
DEF_SEG_GRAD(f64, double, sum_rows_f64, jag__vm_exp_f64)
#undef DEF_SEG_GRAD

/* One gradient call's work (seg_for's job: j->y is z, the gradient). */
typedef struct grad_job {
    seg_job j;
    const char *gp, *yp; /* g, y (B, C), their own dtypes */
    bool gf64, yf64;
    double *st;          /* (B, C): the statistic of grad_stat_*, summed */
} grad_job;

/* columns [c0, c0 + nc) of row b of t (float32 or float64) as doubles */
static void load_row(double *dst, const char *t, bool f64, int64_t b, int64_t C, int64_t c0, int64_t nc) {
    for (int64_t c = 0; c < nc; c++) dst[c] = t ? LOAD(t, f64, b * C + c0 + c) : 0;
}

static void grad_job_stat(const seg_job *sj, const seg_task *t) {
    const grad_job *j = (const grad_job *)sj;
    double yv[COL_BLOCK];
    load_row(yv, j->yp, j->yf64, t->b, sj->p->C, t->c0, t->nc);
    double *acc = t->slot >= 0 ? seg_slot(sj->parts, sj->p->width, t->slot).a : j->st + t->b * sj->p->C + t->c0;
    if (sj->f64) grad_stat_f64(sj->p, (const double *)sj->in, t, sj->kind, yv, acc);
    else grad_stat_f32(sj->p, (const float *)sj->in, t, sj->kind, yv, acc);
}

static void grad_job_stat_merge(const seg_job *sj, const seg_task *t) {
    const grad_job *j = (const grad_job *)sj;
    if (t->slot < 0 || t->k != 0) return;
    seg_sum_chunk_parts(sj->parts, sj->p->width, t, j->st + t->b * sj->p->C + t->c0);
}

static void grad_job_rows(const seg_job *sj, const seg_task *t) {
    const grad_job *j = (const grad_job *)sj;
    if (sj->kind >= JAG_SEG_MAX) return; /* max / min: one row per column, written by the caller */
    int64_t C = sj->p->C, o = t->b * C + t->c0;
    double gv[COL_BLOCK], yv[COL_BLOCK];
    load_row(gv, j->gp, j->gf64, t->b, C, t->c0, t->nc);
    load_row(yv, j->yp, j->yf64, t->b, C, t->c0, t->nc);
    double n = (double)seg_len(j->j.s, t->b);
    const double *seg_stat = j->st ? j->st + o : NULL; /* var / std only; NULL for sum / mean */
    if (sj->f64) grad_rows_f64(sj->p, (const double *)sj->in, (double *)sj->y, t, sj->kind, sj->corr, n, gv, yv, seg_stat);
    else grad_rows_f32(sj->p, (const float *)sj->in, (float *)sj->y, t, sj->kind, sj->corr, n, gv, yv, seg_stat);
}

/* R = 1: values v (rows, C) contiguous; y, g (B, C) contiguous; idx (B, C) for max/min -> z (rows, C) */
static jag_status seg_rows_grad(const char *op, const ragged_batch *s, const jag_segment_spec *sp, const jag_tensor *v,
                                const jag_tensor *y, const jag_tensor *idx, const jag_tensor *g, jag_tensor *z) {
    int64_t C = columns(s), B = s->batch;
    bool f64 = v->dtype == JAG_FLOAT64;
    jag_segment_kind kind = sp->kind;
    bool stat = kind == JAG_SEG_VAR || kind == JAG_SEG_STD || kind == JAG_SEG_AMAX || kind == JAG_SEG_AMIN;
    seg_plan p;
    jag_status st = seg_plan_make(op, s, C, f64 ? 8 : 4, CHUNK_TASKS, CHUNK_BYTES, JAG_GRAIN_ROWS, 2, &p);
    if (st) return st;
    double *parts = stat && p.nslots ? seg_parts_new(op, &p) : NULL;
    double *sv = stat ? malloc((size_t)(B * C > 0 ? B * C : 1) * sizeof *sv) : NULL;
    if ((stat && p.nslots && !parts) || (stat && !sv)) {
        free(parts), free(sv), free(p.t);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    grad_job j = {.j = {.p = &p, .s = s, .in = jag__ptr(v), .y = jag__ptr(z), .parts = parts, .kind = kind,
                        .corr = sp->correction, .f64 = f64},
                  .gp = jag__ptr(g), .yp = y ? jag__ptr(y) : NULL, .gf64 = g->dtype == JAG_FLOAT64,
                  .yf64 = y && y->dtype == JAG_FLOAT64, .st = sv};
    if (stat) {
        seg_for(&p, grad_job_stat, &j.j);
        if (p.nslots) seg_for(&p, grad_job_stat_merge, &j.j);
    }
    seg_for(&p, grad_job_rows, &j.j);
    if (kind >= JAG_SEG_MAX) { /* max / min: the winning row of each column (z is zeroed) */
        const int64_t *ip = (const int64_t *)jag__ptr(idx), *off = s->offsets;
        const char *gp = jag__ptr(g);
        char *o = jag__ptr(z);
        for (int64_t b = 0; b < B; b++)
            if (seg_len(s, b))
                for (int64_t c = 0; c < C; c++) STORE(o, f64, (off[b] + ip[b * C + c]) * C + c, LOAD(gp, j.gf64, b * C + c));
    }
    free(parts), free(sv), free(p.t);
    return JAG_OK;
}

/* The ragged dim alone (reduced trailing dims of size 1 change nothing). */
static bool seg_ragged_alone(const ragged_batch *s, unsigned mask) {
    int64_t R = 1;
    for (int d = 1; d < s->values->ndim; d++)
        if (mask >> d & 1) R *= s->values->sizes[d];
    return R == 1;
}

/* The row-streaming gradient into z (values-shaped, contiguous), zeroed
 * first where rows may stay unwritten unless `zeroed` says it is. */
static jag_status seg_grad_rows_into(const char *op, const ragged_batch *s, const jag_segment_spec *sp, const jag_tensor *y,
                                     const jag_tensor *idx, const jag_tensor *g, jag_tensor *z, bool zeroed) {
    jag_tensor *v = NULL, *yc = NULL, *gc = NULL, *ic = NULL;
    const int64_t *off = s->offsets;
    int64_t B = s->batch, rows = s->values->sizes[0];
    /* every row written: no holes, no rows outside the segments, not max/min (one row a column) */
    bool tiles = !s->lengths && sp->kind < JAG_SEG_MAX && (B == 0 ? rows == 0 : off[0] == 0 && off[B] == rows);
    jag_status st = contiguous_values(op, s, &v);
    if (!st) st = contiguous(op, y, &yc);
    if (!st) st = contiguous(op, g, &gc);
    if (!st) st = contiguous(op, idx, &ic);
    if (!st && !tiles && !zeroed) zero_all(z);
    if (!st) st = seg_rows_grad(op, s, sp, v, yc, ic, gc, z);
    jag_release(v), jag_release(yc), jag_release(gc), jag_release(ic);
    return st;
}

// x values (rows, D...), y = the forward's output (B, kept...) [idx its indices for max/min], g (B, kept...)
// -> z values-shaped (rows, D...) contiguous: the values' gradient; rows in holes get 0
jag_status jag__ragged_reduce_backward_kernel(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                              const jag_segment_spec *sp, const jag_tensor *y, const jag_tensor *idx,
                                              const jag_tensor *g, jag_tensor *z) {
    ragged_batch sb = batch_of(values, rows), *s = &sb;
    if (seg_ragged_alone(s, sp->mask)) return seg_grad_rows_into(op, s, sp, y, idx, g, z, false);
    return seg_grad_generic(op, s, sp, y, idx, g, z);
}

/* The reference of jag__ragged_reduce_backward_kernel: the plain loops of
 * seg_grad_generic, which the row-streaming version (R = 1) is checked
 * against. */
jag_status jag__ragged_reduce_backward_reference(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                                 const jag_segment_spec *sp, const jag_tensor *y,
                                                 const jag_tensor *idx, const jag_tensor *g, jag_tensor *z) {
    ragged_batch sb = batch_of(values, rows);
    return seg_grad_generic(op, &sb, sp, y, idx, g, z);
}

/* ---- naive references ------------------------------------------------------ */

/* The reductions of jag__ragged_reduce_kernel computed plainly, element by
 * element in double with libm's exp and log: for each segment b and kept
 * column k, the segment's rows and the column's R trailing elements in
 * order. Same outputs and contract (y, ix contiguous and given); the tests
 * compare the engine with it. */
jag_status jag__ragged_reduce_reference(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                        const jag_segment_spec *sp, jag_tensor *y, jag_tensor *ix) {
    ragged_batch sb = batch_of(values, rows), *s = &sb;
    seg_geom g;
    jag_status st = seg_geom_make(op, s, sp->mask, &g);
    if (st) return st;
    bool f64 = g.v->dtype == JAG_FLOAT64, mx = seg_is_max(sp->kind);
    const char *in = jag__ptr(g.v);
    char *yo = y ? jag__ptr(y) : NULL;
    int64_t *io = ix ? (int64_t *)jag__ptr(ix) : NULL;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t k = 0; k < g.K; k++) {
            int64_t r0 = g.off[b], n = seg_len(s, b), R = g.R, C = g.K * R, cnt = n * R, best = 0;
            double sum = 0, m = mx ? -INFINITY : INFINITY, sq = 0, e = 0, ext = NAN;
            bool nan = false;
            for (int64_t i = 0; i < cnt; i++) {
                double x = LOAD(in, f64, (r0 + i / R) * C + k * R + i % R);
                sum += x;
                nan |= x != x;
                m = mx ? fmax(m, x) : fmin(m, x);
                if (i == 0 || (mx ? SEG_MAX_BETTER(x, ext) : SEG_MIN_BETTER(x, ext))) ext = x, best = i;
            }
            double mean = sum / (double)cnt;
            for (int64_t i = 0; i < cnt; i++) {
                double x = LOAD(in, f64, (r0 + i / R) * C + k * R + i % R);
                sq += (x - mean) * (x - mean);
                e += exp(x - m);
            }
            double v;
            switch (sp->kind) {
            case JAG_SEG_SUM: v = sum; break;
            case JAG_SEG_MEAN: v = cnt ? mean : NAN; break;
            case JAG_SEG_VAR: v = seg_var_finish(sq, (double)cnt, sp->correction); break;
            case JAG_SEG_STD: v = sqrt(seg_var_finish(sq, (double)cnt, sp->correction)); break;
            case JAG_SEG_LSE: v = nan ? NAN : isinf(m) ? m : m + log(e); break;
            default: v = ext;
            }
            if (yo) STORE(yo, f64, b * g.K + k, v);
            if (io) io[b * g.K + k] = best;
        }
    jag_release(g.v);
    return JAG_OK;
}

/* softmax / log_softmax down each segment's rows into out (values-shaped,
 * contiguous, rows in holes untouched), plainly: per column, the max (a NaN
 * makes the column NaN; an infinite max shifts by 0), the sum of exp(x -
 * shift) in double, then each row. */
jag_status jag__ragged_softmax_reference(const char *op, const jag_tensor *values, const jag_ragged_rows *rows,
                                         bool log_softmax, jag_tensor *out) {
    ragged_batch sb = batch_of(values, rows), *s = &sb;
    jag_tensor *v = NULL;
    jag_status st = contiguous_values(op, s, &v);
    if (st) return st;
    bool f64 = v->dtype == JAG_FLOAT64;
    int64_t C = columns(s);
    const char *in = jag__ptr(v);
    char *o = jag__ptr(out);
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t r0 = s->offsets[b], n = seg_len(s, b);
            double m = -INFINITY, sum = 0;
            bool nan = false;
            for (int64_t r = r0; r < r0 + n; r++) {
                double x = LOAD(in, f64, r * C + c);
                nan |= x != x;
                m = fmax(m, x);
            }
            nan |= m == INFINITY; /* x - max is inf - inf, as the dense op */
            double sh = isinf(m) ? 0 : m;
            for (int64_t r = r0; r < r0 + n; r++) sum += exp(LOAD(in, f64, r * C + c) - sh);
            for (int64_t r = r0; r < r0 + n; r++) {
                double z = LOAD(in, f64, r * C + c) - sh;
                STORE(o, f64, r * C + c, nan ? NAN : log_softmax ? z - log(sum) : exp(z) / sum);
            }
        }
    jag_release(v);
    return JAG_OK;
}

/* softmax / log_softmax's gradient down each segment into out
 * (values-shaped, contiguous, rows in holes untouched), plainly: y_in is
 * the forward's output y; per column, the sum of g y (or of g) in
 * double, then each row y (g - sum) or g - exp(y) sum with libm's exp. */
jag_status jag__ragged_softmax_backward_reference(const char *op, const jag_tensor *y_in, const jag_ragged_rows *rows,
                                                  const jag_tensor *g, bool log_softmax, jag_tensor *out) {
    ragged_batch sb = batch_of(y_in, rows), *s = &sb;
    jag_tensor *y = NULL, *gc = NULL;
    jag_status st = contiguous_values(op, s, &y);
    if (st) return st;
    if ((st = contiguous(op, g, &gc))) {
        jag_release(y);
        return st;
    }
    bool f64 = y->dtype == JAG_FLOAT64, gf64 = gc->dtype == JAG_FLOAT64;
    int64_t C = columns(s);
    const char *yp = jag__ptr(y), *gp = jag__ptr(gc);
    char *o = jag__ptr(out);
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t r0 = s->offsets[b], n = seg_len(s, b);
            double sum = 0;
            for (int64_t r = r0; r < r0 + n; r++)
                sum += LOAD(gp, gf64, r * C + c) * (log_softmax ? 1.0 : LOAD(yp, f64, r * C + c));
            for (int64_t r = r0; r < r0 + n; r++) {
                double yv = LOAD(yp, f64, r * C + c), gv = LOAD(gp, gf64, r * C + c);
                STORE(o, f64, r * C + c, log_softmax ? gv - exp(yv) * sum : yv * (gv - sum));
            }
        }
    jag_release(y), jag_release(gc);
    return JAG_OK;
}

/* ---- dense tensors as uniform segments ---------------------------------- */

bool jag__dense_segments_apply(const jag_tensor *x, int dim, int64_t min_numel) {
    return (x->dtype == JAG_FLOAT32 || x->dtype == JAG_FLOAT64) && x->ndim >= 2 && dim < x->ndim - 1 &&
           jag_is_contiguous(x) && jag_numel(x) >= min_numel &&
           jag__numel(x->sizes + dim + 1, x->ndim - dim - 1) > 1;
}

jag_status jag__dense_as_segments(const char *op, const jag_tensor *x, int dim, jag_tensor **values, jag_ragged_rows *rows,
                                  int64_t **offsets) {
    int64_t O = jag__numel(x->sizes, dim), R = x->sizes[dim], C = jag__numel(x->sizes + dim + 1, x->ndim - dim - 1);
    int64_t vs[2] = {O * R, C}, st[2] = {C, 1};
    int64_t *off = malloc((size_t)(O + 1) * sizeof *off);
    jag_tensor *v = off ? jag__tensor_view(x, vs, st, 2, x->offset) : NULL;
    if (!v) {
        free(off);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    for (int64_t o = 0; o <= O; o++) off[o] = o * R;
    *values = v, *offsets = off;
    *rows = (jag_ragged_rows){.batch = O, .offsets = off, .lengths = NULL};
    return JAG_OK;
}
