/*
 * internal.h — the tensor and storage structs and the helpers every layer of
 * jag shares. Never installed; nothing here is public API.
 */
#ifndef JAG_INTERNAL_H
#define JAG_INTERNAL_H

#include "jag.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* A thread-local variable of the library. Initial-exec: one instruction to
 * reach, where the general model (a shared library's default) calls
 * __tls_get_addr in each function that touches one, some ten calls per
 * op. glibc then places the library's whole thread-local block in the
 * static block, whose spare room must hold it when the library is loaded
 * late (dlopen: Python's import): so the thread-locals stay small, a few
 * hundred bytes in all, and a larger per-thread buffer is a heap block
 * reached through one (the error message, the released-handle ring). */
#define JAG_TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* ---- storage ------------------------------------------------------------ */

/* A refcounted block of memory. Either owned (freed with free) or borrowed
 * from the caller (given back through `release`). */
typedef struct jag_storage {
    atomic_long refcount;
    void *data;
    size_t nbytes;
    size_t capacity;  /* bytes actually allocated (owned storage) */
    bool inline_data; /* data lives in the header's own small block */
    bool small_data;  /* data is a block of small_alloc.c's lists (else glibc's, or the large cache's) */
    void (*release)(void *ctx, void *data); /* NULL: data was malloc'd by jag */
    void *release_ctx;
    bool borrowed;
    /* Bumped by every in-place write (jag__bump_version): autograd compares
     * it with the version a saved tensor had when it was saved. Views share
     * their storage and so their version, as in PyTorch. */
    atomic_llong version;
    /* No jag op may write it (a nested tensor's offsets, lengths and cached
     * row ids, from the moment the nested tensor is built): every view of
     * it is read-only (jag__is_read_only). Atomic: nested tensors on one
     * offsets tensor are built (and their op results re-wrapped, each
     * freezing it again) in several threads at once. */
    atomic_bool read_only;
} jag_storage;

/* Autograd hooks the core calls (src/autograd/engine.c). */
void jag__autograd_release_tensor(jag_tensor *t);
/* The name of the op whose output t is ("jag_mul"), or NULL for a leaf. */
const char *jag__grad_fn_name(const jag_tensor *t);

/* Blocks under 128 KiB from per-thread free lists (small_alloc.c): 64-byte
 * aligned, uninitialised; free with the size asked for or any size up to
 * jag__small_block_bytes of it (the bytes the block really has). */
void *jag__small_alloc(size_t n);
void jag__small_free(void *p, size_t n);
size_t jag__small_block_bytes(size_t n);
/* Frees the calling thread's lists (jag_empty_cache). */
void jag__small_trim(void);

/* One Philox-4x32-10 block of counter (counter, 0) under key (random.c's
 * naive reference, for the tests). */
void jag__philox_ref(uint64_t counter, uint64_t key, uint32_t out[4]);
/* A new tensor of random numbers from g (the thread's default generator when
 * NULL), advancing it: uniform in [a, b) or normal of mean a and std b.
 * Checks the arguments (errors name `op`); the public entry points
 * (src/dispatch/factory_op.c) refuse draws inside a traced function first. */
typedef enum { JAG_DIST_UNIFORM, JAG_DIST_NORMAL } jag_distribution;
jag_status jag__random_new(const char *op, const int64_t *sizes, int ndim, double a, double b, jag_dtype dtype,
                           jag_generator *g, jag_distribution kind, jag_tensor **out);

/* A new owned storage of nbytes (zeroed when `zero`), or NULL (JAG_ENOMEM set,
 * message naming `op`). */
jag_storage *jag__storage_new(size_t nbytes, bool zero, const char *op);
void jag__storage_retain(jag_storage *s);
void jag__storage_release(jag_storage *s);

/* ---- tensor ------------------------------------------------------------- */

enum {
    JAG_FLAG_READONLY = 1u << 0,
    JAG_FLAG_GRAD_HOOKS = 1u << 1, /* a leaf with post-accumulate-grad hooks
                                      (engine.c): its release drops them.
                                      Never copied to views or aliases. */
};

/* A live header holds JAG_TENSOR_LIVE in `magic`; jag_release writes
 * JAG_TENSOR_RELEASED into it and keeps the header out of reuse for a while
 * (tensor.c's quarantine), so that a released handle passed back is refused
 * instead of aliasing a new tensor. */
#define JAG_TENSOR_LIVE 0x5447414au     /* "JAGT" */
#define JAG_TENSOR_RELEASED 0x44414544u /* "DEAD" */

struct jag_tensor {
    uint32_t magic;
    atomic_long refcount;
    jag_dtype dtype;
    int ndim;
    unsigned flags;
    int64_t sizes[JAG_MAX_DIMS];
    int64_t strides[JAG_MAX_DIMS];
    int64_t offset;        /* element offset into storage */
    jag_storage *storage;  /* NULL for a meta tensor (shape and dtype only) */
    /* Wrapper subclasses (src/subclass): no storage; behaviour from the
     * class, data in the state. NULL for plain tensors. */
    const jag_subclass *subclass;
    void *state;
    /* The ragged symbol (j<id>) of nested tensors built on this tensor as
     * their offsets; -1 until one is. The offsets tensor is the symbol, as
     * in PyTorch's nested tensors. */
    atomic_llong ragged_id;
    /* Autograd (src/autograd): a leaf that wants a gradient, or an op's
     * output with the node that made it. */
    bool requires_grad;
    int output_nr;               /* which output of grad_fn this is */
    struct jag_node *grad_fn;    /* NULL for leaves */
    jag_tensor *grad;            /* accumulated gradient of a leaf */
};

/* The shape of one output as a META function infers it. */
typedef struct jag_spec {
    jag_dtype dtype;
    int ndim;
    int64_t sizes[JAG_MAX_DIMS];
} jag_spec;

/* A tensor header over `storage` (retained) with the given geometry. strides
 * NULL means row-major. Returns NULL with JAG_ENOMEM set. */
jag_tensor *jag__tensor_wrap(jag_storage *storage, jag_dtype dtype, const int64_t *sizes,
                             const int64_t *strides, int ndim, int64_t offset);
/* A new contiguous tensor with fresh storage (zeroed when `zero`); `meta`
 * makes a tensor with no storage. Validates ndim/sizes/overflow and sets the
 * error naming `op` on failure (returns NULL). */
jag_tensor *jag__tensor_new(const char *op, const int64_t *sizes, int ndim, jag_dtype dtype,
                            bool zero, bool meta);
jag_tensor *jag__tensor_from_spec(const char *op, const jag_spec *spec, bool meta);
/* A new header sharing x's storage and flags with other geometry (a view). */
jag_tensor *jag__tensor_view(const jag_tensor *x, const int64_t *sizes, const int64_t *strides,
                             int ndim, int64_t offset);

/* Objects held by pointer (generators, tensor sets) start with a magic
 * word; their free marks it JAG_HANDLE_FREED and hands the memory to
 * jag__handle_retire, which frees it 32 retirements later (handles.c). */
#define JAG_HANDLE_LIVE 0x4c415648u  /* "HVAL" */
#define JAG_HANDLE_FREED 0x45455246u /* "FREE" */
void jag__handle_retire(void *p, void (*free_fn)(void *));

/* Whether t is a live tensor handle (not NULL, not released). */
static inline bool jag__tensor_live(const jag_tensor *t) { return t && t->magic == JAG_TENSOR_LIVE; }
/* JAG_OK for a live handle; else JAG_EINVAL with "op: argument 'arg' is
 * NULL" or "... was released" (one load and compare on the hot path). */
jag_status jag__check_handle(const char *op, const char *arg, const jag_tensor *t);
static inline jag_status jag__check_live(const char *op, const char *arg, const jag_tensor *t) {
    return jag__tensor_live(t) ? JAG_OK : jag__check_handle(op, arg, t);
}

/* Whether jag may write t's data: not a loaded file's (the tensor's flag)
 * and not frozen (its storage's). */
static inline bool jag__is_read_only(const jag_tensor *t) {
    return (t->flags & JAG_FLAG_READONLY) ||
           (t->storage && atomic_load_explicit(&t->storage->read_only, memory_order_relaxed));
}
/* Make t's storage read-only for good (every view of it). */
static inline void jag__freeze(jag_tensor *t) {
    /* only ever false -> true: relaxed is enough, and a storage already
     * frozen is not written again (no cache line bouncing between threads
     * that wrap results on the same offsets) */
    if (t && t->storage && !atomic_load_explicit(&t->storage->read_only, memory_order_relaxed))
        atomic_store_explicit(&t->storage->read_only, true, memory_order_relaxed);
}

/* In-place writes: one more version of t's storage (see jag_storage). */
static inline void jag__bump_version(jag_tensor *t) {
    if (t->storage) atomic_fetch_add_explicit(&t->storage->version, 1, memory_order_relaxed);
}
/* The version of t's data: its storage's; for a subclass tensor the sum over
 * its inner tensors (subclass.c), so that a write to any of them shows. */
int64_t jag__tensor_version(const jag_tensor *t);
int64_t jag__subclass_version(const jag_tensor *t);

/* Tensor headers made minus released by this thread (leak checks in tests). */
long jag__live_tensors(void);

/* A plain tensor with no data (shape inference, tracing). */
static inline bool jag__is_meta(const jag_tensor *t) { return t->storage == NULL && t->subclass == NULL; }
static inline bool jag__is_subclass(const jag_tensor *t) { return t->subclass != NULL; }
/* Fail with a clear message when a function that needs plain data gets a
 * subclass tensor (`what` names the function and argument). */
jag_status jag__require_plain(const char *op, const char *arg, const jag_tensor *t);
/* Mark this thread as registering a built-in class (returns the previous
 * mark); jag_subclass_register then does not register the built-ins. */
bool jag__set_registering_builtin(bool on);
/* Register the classes jag ships (nested, scaled) if not yet done. */
void jag__register_builtin_subclasses(void);
/* The class's printer, or NULL (subclass.c). */
size_t (*jag__subclass_format_fn(const jag_subclass *cls))(const jag_tensor *, char *, size_t);
/* A new outer tensor over the same inner tensors (flatten + unflatten), with
 * no autograd history (subclass.c). */
jag_status jag__subclass_alias(const jag_tensor *t, jag_tensor **out);
/* Free a subclass tensor's state (subclass.c). */
void jag__subclass_destroy_state(jag_tensor *t);

/* Typed address of element 0. */
static inline char *jag__ptr(const jag_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)jag_dtype_size(t->dtype);
}

/* ---- errors ------------------------------------------------------------- */

/* Record `status` and a printf-formatted message for this thread; returns
 * `status` so that callers can `return jag__error(...)`. */
jag_status jag__error(jag_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Format a shape as "[2, 3]" into buf (returns buf). */
const char *jag__shape_str(const int64_t *sizes, int ndim, char *buf, size_t cap);
#define JAG_SHAPE_BUF 128

/* Internal invariant: a bug in jag, never user input. */
#define JAG_ASSERT(cond)                                                      \
    do {                                                                      \
        if (!(cond)) jag__assert_fail(#cond, __FILE__, __LINE__);             \
    } while (0)
_Noreturn void jag__assert_fail(const char *cond, const char *file, int line);

/* ---- shapes ------------------------------------------------------------- */

/* Normalise a possibly negative dim against ndim (a 0-d tensor accepts 0
 * and -1, as torch). Sets an error naming op/arg and returns JAG_ERANGE when
 * out of range. */
jag_status jag__wrap_dim(const char *op, const char *arg, int64_t dim, int ndim, int *out);
/* Check 0 <= ndim <= JAG_MAX_DIMS, sizes >= 0 and the element count fits
 * int64 and bytes fit size_t. */
jag_status jag__check_shape(const char *op, const int64_t *sizes, int ndim, jag_dtype dtype,
                            int64_t *numel_out);
/* Broadcast two shapes (NumPy rules). */
jag_status jag__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b,
                                 int nb, int64_t *out, int *nout);
/* Row-major strides for sizes. */
void jag__contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides);
int64_t jag__numel(const int64_t *sizes, int ndim);
bool jag__dtype_valid(jag_dtype d);
/* Checked multiply; false on overflow. */
static inline bool jag__mul_ok(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* ---- API depth and scopes ----------------------------------------------- */

/* Every public entry point that returns tensors brackets its work with
 * jag__enter() and jag__leave(): a new reference is recorded in the open
 * scope only when it leaves jag (depth back to 0), so ops built from other ops
 * never record their intermediates. */
void jag__enter(void);
/* Decrement the depth; on success at depth 0 record outs[0..n) in the open
 * scope. Returns `status`. */
jag_status jag__leave(jag_status status, jag_tensor **outs, int n);
/* The end of a public function that makes one tensor: jag__leave with t in
 * *out, or with the error of a NULL t. */
jag_status jag__finish_new(jag_tensor *t, jag_tensor **out);
/* JAG_EINVAL naming op when the caller gave no place for the result. */
jag_status jag__check_out(const char *op, jag_tensor **out);
/* The traced function runs as code at the top level with no scope open: its
 * ops record in its own scopes, never in the caller's. isolate saves the
 * caller's scope floor and API depth and starts the function's frame;
 * open_in_frame counts the scopes the function opened and has not closed;
 * restore returns to the caller's (none of the function's may be open). */
void jag__scope_isolate(size_t *saved_floor, int *saved_depth);
int jag__scope_open_in_frame(void);
void jag__scope_restore(size_t saved_floor, int saved_depth);

/* ---- element access ----------------------------------------------------- */

/* Read / write one element at a byte address as double. */
double jag__load_as_double(const void *p, jag_dtype dtype);
void jag__store_from_double(void *p, jag_dtype dtype, double v);

/* ---- reductions along a ragged dim ------------------------------------------ */

/* A reduction over the ragged dim and the trailing dims of the values set in
 * `mask` (bit d: values dim d >= 1, i.e. outer dim d + 1): the plain data
 * the nested class, the ragged ops and their kernels pass each other. */
typedef struct jag_segment_spec {
    jag_segment_kind kind;
    unsigned mask;
    int64_t correction; /* var / std */
    bool keepdim;
} jag_segment_spec;

/* ---- threading ---------------------------------------------------------- */

/* Minimum amount of work (elements) worth splitting across threads, per
 * family of loop: measured by bench/bench_grain.c (float32, 1 vs 2 threads
 * interleaved, median of the pairs' ratios t2/t1 on a shared 2-core
 * machine; under 1: two threads win).
 *             4K    8K   16K   32K   64K  128K
 *   MEMORY  copies, fills, cat, index_select, add, relu
 *            1.9-3.2 1.6-2.0 0.9-1.3 0.7-0.9 0.6-0.8 0.5-0.6
 *   COMPUTE exp, sin, gelu (SLEEF / vecmath)
 *            0.7-1.2 0.7-0.9 0.6-0.7 0.6-0.7 0.6-0.7 0.5-0.6
 *   REDUCE  sum over all / over rows of 256 (and clip_grad_norm's norm)
 *            1.1-1.3 0.9-1.2 0.7-0.9 0.7-0.8 0.7    0.5-0.6
 *   ROWS    softmax, layer_norm over rows of 256
 *            0.7-1.7 0.6-1.1 0.6-0.9 0.6-0.7 0.6    0.5-0.6
 *   OPTIM   the fused Adam step (reads 4 arrays, writes 3)
 *            0.84   0.70  0.61  0.55  0.54  0.52
 * Waking the other thread costs microseconds and leaves it spinning in
 * libgomp afterwards, taking a core from whatever runs next, so each grain
 * is the first size where two threads win clearly (t2/t1 under about 0.8),
 * not the break-even. Each may be set at build time (-DJAG_GRAIN_MEMORY=1
 * ...), as bench_grain's measuring build does. Every parallel loop takes
 * the grain of its family (there was one grain of 32768 for all before). */
#ifndef JAG_GRAIN_MEMORY
#define JAG_GRAIN_MEMORY 65536
#endif
#ifndef JAG_GRAIN_COMPUTE
#define JAG_GRAIN_COMPUTE 8192
#endif
#ifndef JAG_GRAIN_REDUCE
#define JAG_GRAIN_REDUCE 16384
#endif
#ifndef JAG_GRAIN_ROWS
#define JAG_GRAIN_ROWS 16384
#endif
#ifndef JAG_GRAIN_OPTIM
#define JAG_GRAIN_OPTIM 8192
#endif

/* JAG_PARALLEL_IF(cond, "omp parallel ...", statement): the statement under
 * the pragma when cond holds, else as plain code. An OpenMP if() clause
 * that is false still goes through the runtime, which makes and frees a
 * team of one thread: 330-350 ns a loop here (a 64-element loop under
 * `omp parallel for if (0)` against the bare loop), more than a small op's
 * whole work (layer_norm of 10 x 64 floats: about 650 ns). Every parallel
 * loop below its grain takes this instead. The statement is compiled twice
 * and, being a macro argument, holds no preprocessor lines: _Pragma and
 * jag__thread_index / jag__thread_count in place of #pragma and #ifdef. */
#define JAG_PARALLEL_IF(cond, pragma, ...) \
    do {                                    \
        if (cond) {                         \
            _Pragma(pragma) __VA_ARGS__     \
        } else {                            \
            __VA_ARGS__                     \
        }                                   \
    } while (0)

/* The same for a loop that is a SIMD loop either way: "omp parallel for
 * simd schedule(static)" when cond holds, else "omp simd". */
#define JAG_PARALLEL_SIMD_IF(cond, ...)                          \
    do {                                                          \
        if (cond) {                                               \
            _Pragma("omp parallel for simd schedule(static)") __VA_ARGS__ \
        } else {                                                  \
            _Pragma("omp simd") __VA_ARGS__                       \
        }                                                         \
    } while (0)

/* The calling thread's number in its parallel region and the region's
 * thread count (0 and 1 outside one, or without OpenMP). */
static inline int jag__thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int jag__thread_count(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

#endif /* JAG_INTERNAL_H */
