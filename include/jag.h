/*
 * jag.h — the public C API of jag, a library of dense and nested tensors.
 *
 * Conventions that hold for every function below unless its comment says
 * otherwise:
 *
 * Errors.   A fallible function returns a jag_status. JAG_OK (0) is success.
 *           On failure a message naming the function, the argument, what was
 *           expected and what came is left in jag_last_error() (thread-local),
 *           no output is written (every `out` keeps the value it had), no
 *           input is changed and nothing is leaked.
 *
 * Ownership. A `jag_tensor **out` receives a NEW reference: the caller owns it
 *           and gives it back with jag_release() (or lets an open scope do so,
 *           see jag_scope_begin). Tensor arguments are BORROWED: the function
 *           takes its own references where it needs to keep one.
 *
 * Views.    Functions documented as views share storage with their input
 *           (writes through one are visible through the other) and hold a
 *           reference on that storage, so the input may be released first.
 *
 * Dims.     A dimension argument may be negative (counted from the end, as in
 *           PyTorch). Sizes and strides are int64 and counted in elements.
 *
 * Threads.  Tensors may be read from several threads at once; reference
 *           counts are atomic. Writing one tensor from two threads at once is
 *           the caller's race. Error messages and scopes are per thread.
 */
#ifndef JAG_H
#define JAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JAG_VERSION_MAJOR 0
#define JAG_VERSION_MINOR 1
#define JAG_VERSION_PATCH 0
#define JAG_VERSION_STRING "0.1.0"

/* The most dimensions a tensor may have. */
#define JAG_MAX_DIMS 8

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

#define JAG_STATUS_LIST(X)                                                    \
    X(JAG_OK, "ok")                                                           \
    X(JAG_EINVAL, "invalid argument")                                         \
    X(JAG_ESHAPE, "shape mismatch")                                           \
    X(JAG_EDTYPE, "unsupported or mismatched dtype")                          \
    X(JAG_ERANGE, "index or dimension out of range")                          \
    X(JAG_EOVERFLOW, "size overflow")                                         \
    X(JAG_ENOMEM, "out of memory")                                            \
    X(JAG_ENOTIMPL, "not implemented")                                        \
    X(JAG_ESTATE, "invalid state")                                            \
    X(JAG_EINTERNAL, "internal error")

typedef enum jag_status {
#define JAG_X_ENUM(name, text) name,
    JAG_STATUS_LIST(JAG_X_ENUM)
#undef JAG_X_ENUM
    JAG_STATUS_COUNT
} jag_status;

/* A static string describing `s` ("ok", "shape mismatch", ...). Never NULL. */
const char *jag_status_str(jag_status s);

/* The message of the last failed call on this thread, or "" if none.
 * The string stays valid until the next jag call on this thread. */
const char *jag_last_error(void);

/* The status of the last failed call on this thread (JAG_OK if none). */
jag_status jag_last_status(void);

/* Forget the last error on this thread. */
void jag_clear_error(void);

/* ------------------------------------------------------------------------ */
/* Dtypes                                                                    */
/* ------------------------------------------------------------------------ */

#define JAG_DTYPE_LIST(X)                                                     \
    X(JAG_FLOAT32, float32, float, 4)                                         \
    X(JAG_FLOAT64, float64, double, 8)                                        \
    X(JAG_INT32, int32, int32_t, 4)                                           \
    X(JAG_INT64, int64, int64_t, 8)                                           \
    X(JAG_BOOL, bool, uint8_t, 1)                                             \
    X(JAG_FLOAT16, float16, uint16_t, 2)                                      \
    X(JAG_BFLOAT16, bfloat16, uint16_t, 2)

typedef enum jag_dtype {
#define JAG_X_ENUM(E, name, ctype, size) E,
    JAG_DTYPE_LIST(JAG_X_ENUM)
#undef JAG_X_ENUM
    JAG_DTYPE_COUNT
} jag_dtype;

/* "float32", "float64", "int32", "int64", "bool", "float16", "bfloat16";
 * "invalid" otherwise. */
const char *jag_dtype_name(jag_dtype d);
/* Bytes per element (bool is stored as one byte: 0 or 1; float16 and
 * bfloat16 as their 16 bits in a uint16_t); 0 if invalid. */
size_t jag_dtype_size(jag_dtype d);
/* True for float32, float64, float16 and bfloat16. */
bool jag_dtype_is_floating(jag_dtype d);
/* True for the 16-bit floating dtypes, float16 and bfloat16. Ops compute
 * on them in float32 and round each result once to the half dtype (as
 * PyTorch's CPU kernels do); ops that only move elements (views, clone,
 * copies, cat, index_select) keep their bits. */
bool jag_dtype_is_half(jag_dtype d);
/* The dtype of a binary op's result, PyTorch's rules for same-category
 * tensors: bool < int32 < int64 < {float16, bfloat16} < float32 < float64;
 * float16 with bfloat16 gives float32. */
jag_dtype jag_promote_types(jag_dtype a, jag_dtype b);
/* One value converted: float32 to float16 / bfloat16 rounds to nearest,
 * ties to even (NaN stays NaN, beyond the largest finite value gives an
 * infinity, subnormal results are kept); the widening conversions are
 * exact. The uint16_t holds the value's bits. No errors. */
uint16_t jag_float_to_float16(float v);
float jag_float16_to_float(uint16_t bits);
uint16_t jag_float_to_bfloat16(float v);
float jag_bfloat16_to_float(uint16_t bits);

/* ------------------------------------------------------------------------ */
/* Tensors: lifetime and metadata                                            */
/* ------------------------------------------------------------------------ */

/* An opaque, reference-counted tensor handle. */
typedef struct jag_tensor jag_tensor;

/* Take one more reference on `t` (NULL is ignored). Returns `t`, or NULL
 * with jag_last_error() set when `t` was released. */
jag_tensor *jag_retain(jag_tensor *t);
/* Give back one reference; the tensor is freed with the last one, and its
 * storage with the last tensor using it. NULL is ignored (JAG_OK).
 * Released handles: a released header is marked and kept out of reuse for
 * the next 64 releases on the same thread, so that passing it again to
 * jag_release, to an op or to an accessor is refused with JAG_EINVAL
 * ("tensor was released") instead of aliasing a tensor made since. This is
 * a cheap net (one load and compare per call), not a guarantee: a handle
 * kept long after its release may still alias a new tensor. */
jag_status jag_release(jag_tensor *t);

/* Metadata accessors. A NULL or released `t` gives -1 (NULL for pointers,
 * false for jag_is_contiguous, an invalid dtype for jag_tensor_dtype) and
 * sets jag_last_error(). jag_size/jag_stride take a possibly negative dim
 * and return -1 when it is out of range. */
jag_dtype jag_tensor_dtype(const jag_tensor *t);
int jag_ndim(const jag_tensor *t);
int64_t jag_size(const jag_tensor *t, int dim);
int64_t jag_stride(const jag_tensor *t, int dim);
/* Pointers to the ndim sizes / strides. Valid while `t` lives. */
const int64_t *jag_sizes(const jag_tensor *t);
const int64_t *jag_strides(const jag_tensor *t);
/* Element offset of element 0 inside the storage. */
int64_t jag_storage_offset(const jag_tensor *t);
/* Number of elements (product of sizes; 1 for a 0-d tensor). */
int64_t jag_numel(const jag_tensor *t);
/* True when the elements are laid out densely in row-major order. */
bool jag_is_contiguous(const jag_tensor *t);
/* Address of element 0, or NULL for a tensor with no data (meta tensors).
 * Writable unless the tensor was made read-only. */
void *jag_data(const jag_tensor *t);
/* True when `a` and `b` share one storage. */
bool jag_shares_storage(const jag_tensor *a, const jag_tensor *b);

/* Read one element, converted to double. `index` has ndim entries (may be
 * NULL for 0-d). Errors: JAG_ERANGE for an index out of bounds. */
jag_status jag_item_at(const jag_tensor *t, const int64_t *index, double *value);
/* The value of a tensor with exactly one element. */
jag_status jag_item(const jag_tensor *t, double *value);

/* Print `t` (dtype, shape and values, torch-style) into `buf` of `cap` bytes,
 * always NUL-terminated. Returns the length the full text needs (as snprintf).
 * Large tensors are summarised with "...". */
size_t jag_format(const jag_tensor *t, char *buf, size_t cap);

/* ------------------------------------------------------------------------ */
/* Scopes                                                                    */
/* ------------------------------------------------------------------------ */

/* Open a scope on this thread. Until the matching jag_scope_end, every new
 * tensor reference that a jag function hands to the caller is recorded in it
 * and owned by it: do not jag_release such a reference yourself (keep it
 * with jag_scope_keep, or jag_retain your own). Scopes nest.
 * Errors: JAG_ENOMEM (no scope was opened). */
jag_status jag_scope_begin(void);
/* Keep `t` alive past the innermost scope: its recorded reference moves to
 * the enclosing scope, or to the caller when there is none. Returns `t`.
 * Errors: keeping a tensor the scope did not record is a no-op. */
jag_tensor *jag_scope_keep(jag_tensor *t);
/* Close the innermost scope, releasing every reference recorded in it and not
 * kept. Errors: JAG_ESTATE if no scope is open. */
jag_status jag_scope_end(void);

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */
/* ------------------------------------------------------------------------ */

/* New contiguous tensors of shape sizes[0..ndim). ndim may be 0 (a scalar).
 * Errors: JAG_EINVAL (ndim outside 0..JAG_MAX_DIMS, negative size, bad
 * dtype), JAG_EOVERFLOW (element count or bytes overflow), JAG_ENOMEM. */
jag_status jag_empty(const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out);
jag_status jag_zeros(const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out);
jag_status jag_ones(const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out);
jag_status jag_full(const int64_t *sizes, int ndim, double value, jag_dtype dtype, jag_tensor **out);
/* 1-D tensor start, start+step, ... < end (> end for negative step).
 * Errors: JAG_EINVAL for step == 0 or a non-finite bound. */
jag_status jag_arange(double start, double end, double step, jag_dtype dtype, jag_tensor **out);
/* A contiguous copy of `numel(sizes)` elements read from `data`. */
jag_status jag_from_data(const void *data, const int64_t *sizes, int ndim, jag_dtype dtype,
                         jag_tensor **out);
/* A tensor that borrows caller memory (no copy). `strides` may be NULL for
 * row-major. `release(ctx, data)` (may be NULL) is called once when the last
 * tensor using the memory goes away. The caller keeps the memory valid and
 * aligned for the dtype until then. On failure `release` is NOT called. */
jag_status jag_from_blob(void *data, const int64_t *sizes, const int64_t *strides, int ndim,
                         jag_dtype dtype, void (*release)(void *ctx, void *data), void *ctx,
                         jag_tensor **out);

/* A meta tensor: shape and dtype, no data. Ops on meta tensors infer the
 * shapes and dtypes of their results without computing anything. */
jag_status jag_meta_tensor(const int64_t *sizes, int ndim, jag_dtype dtype, jag_tensor **out);
/* True for a meta tensor. */
bool jag_is_meta(const jag_tensor *t);

/* A reproducible random generator (Philox-style counter hashing): the same
 * seed gives the same numbers on every run and machine, whatever the thread
 * count. */
typedef struct jag_generator jag_generator;
jag_status jag_generator_new(uint64_t seed, jag_generator **out);
/* Free a generator (NULL: JAG_OK). Freeing it twice, or drawing from it
 * after its free, is JAG_EINVAL rather than a crash while its memory is
 * kept (the last 32 freed generators and tensor sets). */
jag_status jag_generator_free(jag_generator *g);
/* Uniform in [low, high) and normal(mean, std) float tensors. `g` may be NULL
 * for the thread's default generator (seeded by jag_manual_seed, default 0).
 * Errors: as jag_empty, plus JAG_EDTYPE for a non-float dtype, JAG_EINVAL
 * for high < low or std < 0, and JAG_ENOTIMPL inside a traced function (a
 * program would repeat the same numbers on every run: pass them as an input;
 * the generator does not advance). */
jag_status jag_rand_uniform(const int64_t *sizes, int ndim, double low, double high,
                            jag_dtype dtype, jag_generator *g, jag_tensor **out);
jag_status jag_rand_normal(const int64_t *sizes, int ndim, double mean, double std,
                           jag_dtype dtype, jag_generator *g, jag_tensor **out);
void jag_manual_seed(uint64_t seed);

/* ------------------------------------------------------------------------ */
/* Views (no copy; see "Views" above)                                        */
/* ------------------------------------------------------------------------ */

/* A view with new sizes; one size may be -1 (inferred). Errors: JAG_ESHAPE
 * when the element count differs or the strides cannot express it (then use
 * jag_reshape). */
jag_status jag_view(const jag_tensor *x, const int64_t *sizes, int ndim, jag_tensor **out);
/* As jag_view when the strides allow it, else a contiguous copy (torch's
 * reshape). On a jagged nested x (B, j, D...) (ragged dim 1) both keep the
 * batch and ragged dims and view the rest: sizes (B, -1, s...) with -1 for
 * the ragged dim and s... holding as many elements as D... (torch's
 * x.view(B, -1, H, Dh)); other sizes are JAG_ENOTIMPL. */
jag_status jag_reshape(const jag_tensor *x, const int64_t *sizes, int ndim, jag_tensor **out);
jag_status jag_transpose(const jag_tensor *x, int dim0, int dim1, jag_tensor **out);
/* perm is a permutation of 0..ndim-1 (negative entries allowed). */
jag_status jag_permute(const jag_tensor *x, const int *perm, int ndim, jag_tensor **out);
/* Elements start..start+length-1 along dim. */
jag_status jag_narrow(const jag_tensor *x, int dim, int64_t start, int64_t length, jag_tensor **out);
/* Removes dim, keeping index `index` (negative counts from the end). */
jag_status jag_select(const jag_tensor *x, int dim, int64_t index, jag_tensor **out);
jag_status jag_unsqueeze(const jag_tensor *x, int dim, jag_tensor **out);
/* Removes dim if its size is 1 (else returns a view equal to x). */
jag_status jag_squeeze(const jag_tensor *x, int dim, jag_tensor **out);
/* Removes every size-1 dim. */
jag_status jag_squeeze_all(const jag_tensor *x, jag_tensor **out);
/* Broadcast to `sizes` (ndim >= x's); -1 keeps a size. Stride 0 on expanded
 * dims. */
jag_status jag_expand(const jag_tensor *x, const int64_t *sizes, int ndim, jag_tensor **out);
/* A view of all elements as 1-D (a copy when strides forbid, as reshape). */
jag_status jag_flatten(const jag_tensor *x, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Copies and conversions                                                    */
/* ------------------------------------------------------------------------ */

/* `x` itself (a new reference) when contiguous, else a contiguous copy. */
jag_status jag_contiguous(const jag_tensor *x, jag_tensor **out);
/* A contiguous copy with its own storage. */
jag_status jag_clone(const jag_tensor *x, jag_tensor **out);
/* Converted copy (a new reference to x when dtype is already x's). */
jag_status jag_to_dtype(const jag_tensor *x, jag_dtype dtype, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* In-place ops                                                              */
/* ------------------------------------------------------------------------ */

/* These write into `self` (`dst`) and change nothing else. `self` is a plain
 * tensor or a jagged nested tensor (the op writes its packed values; its
 * offsets and lengths never change). The rules, PyTorch's:
 * - `self` must have data and be writable: not read-only (jag_is_read_only:
 *   a loaded file's tensors, a nested tensor's offsets and lengths), not a
 *   meta tensor, no element reachable twice (an expanded view);
 * - the result of the out-of-place op (jag_add, jag_mul, ...) must have
 *   self's shape (other operands broadcast to self, never self to them),
 *   and a dtype self can hold without leaving its kind: a float result into
 *   an integer self is JAG_EDTYPE (float32 into float64 and back is fine);
 * - with grad mode on, `self` or an operand that requires grad is refused
 *   with JAG_ESTATE: autograd does not record in-place ops. Update
 *   parameters with grad mode off (jag_set_grad_enabled(false), Python's
 *   `with jag.no_grad()`), and use the out-of-place op inside a graph;
 * - every write bumps the version of self's storage (jag_version), shared
 *   by every view of it: a gradient that would read data changed since the
 *   forward pass saved it is refused by jag_backward (JAG_ESTATE);
 * - refused while a function is traced (JAG_ENOTIMPL).
 * Errors leave `self` untouched. */

/* Copy src into dst (src broadcasts to dst's shape; dtypes are converted).
 * A nested dst takes a nested src of the same raggedness, or a dense src
 * that broadcasts over its packed values (at most its trailing dims).
 * Errors: as above; JAG_ESHAPE when src does not broadcast to dst. */
jag_status jag_copy_(jag_tensor *dst, const jag_tensor *src);
/* Fill every element of `self` with `value` / with 0. */
jag_status jag_fill_(jag_tensor *self, double value);
jag_status jag_zero_(jag_tensor *self);
/* self += alpha * other; self -= alpha * other. */
jag_status jag_add_(jag_tensor *self, const jag_tensor *other, double alpha);
jag_status jag_sub_(jag_tensor *self, const jag_tensor *other, double alpha);
/* self *= other; self /= other (true division: an integer self is
 * JAG_EDTYPE, as torch's div_). */
jag_status jag_mul_(jag_tensor *self, const jag_tensor *other);
jag_status jag_div_(jag_tensor *self, const jag_tensor *other);
/* The same with a scalar operand. */
jag_status jag_add_scalar_(jag_tensor *self, double value);
jag_status jag_mul_scalar_(jag_tensor *self, double value);
jag_status jag_div_scalar_(jag_tensor *self, double value);
/* self = clamp(self, lo, hi) (jag_clamp's bounds). */
jag_status jag_clamp_(jag_tensor *self, double lo, double hi);
/* The version counter of t's data (PyTorch's `_version`): 0 when made,
 * one more at every in-place write through jag, shared by every view of
 * the same storage; a nested tensor's is its values'. Writes through the
 * pointer of jag_data or an exported buffer are not counted. -1 for a NULL
 * or released t. */
int64_t jag_version(const jag_tensor *t);

/* ------------------------------------------------------------------------ */
/* Pointwise                                                                 */
/* ------------------------------------------------------------------------ */

/* Unary ops. exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, silu, gelu
 * (erf form), gelu_tanh (tanh approximation) and reciprocal keep a float
 * dtype and promote integer/bool inputs to float32. neg, abs, square, sign
 * and relu keep integer dtypes. On bool: neg and relu are JAG_EDTYPE (as
 * torch), abs and sign return the input, square gives int64. Integer
 * overflow wraps (as torch). relu and sign pass NaN through; sign keeps
 * signed zeros.
 * floor, ceil, round (halves to even, as torch.round) and trunc keep every
 * dtype but bool (JAG_EDTYPE); on integers they are the identity; their
 * gradient is zero. log1p, expm1, erf, erfc, atan, sinh, cosh, asinh and
 * the activations selu,
 * hardswish (x relu6(x + 3) / 6), hardsigmoid (relu6(x + 3) / 6), mish
 * (x tanh(softplus(x))) and logsigmoid (log(sigmoid(x)), computed without
 * overflow) are float ops, formulas and gradients as torch's. */
#define JAG_UNARY_OP_LIST(X)                                                  \
    X(neg) X(abs) X(exp) X(log) X(sqrt) X(rsqrt) X(sin) X(cos) X(tanh)        \
    X(sigmoid) X(relu) X(silu) X(gelu) X(gelu_tanh) X(reciprocal) X(square)  \
    X(sign) X(floor) X(ceil) X(round) X(trunc) X(log1p) X(expm1) X(erf)       \
    X(erfc) X(selu) X(hardswish) X(hardsigmoid) X(mish) X(logsigmoid) X(atan)  \
    X(sinh) X(cosh) X(asinh)

#define JAG_X_DECL(name) jag_status jag_##name(const jag_tensor *x, jag_tensor **out);
JAG_UNARY_OP_LIST(JAG_X_DECL)
#undef JAG_X_DECL

/* torch.nn.functional's parametrised activations, dense or nested (the
 * pointwise rule), differentiable. Float ops: a float x keeps its dtype,
 * integer and bool x promote to float32; the scalars are converted to the
 * result's dtype, as torch does. NaN gives NaN.
 *   leaky_relu  x > 0 ? x : negative_slope x (torch default 0.01)
 *   elu         x > 0 ? x : alpha (exp(x) - 1) (torch default 1.0); the
 *               gradient at 0 is alpha, as torch's
 *   softplus    beta x > threshold ? x : log(1 + exp(beta x)) / beta
 *               (defaults 1 and 20). JAG_EINVAL when beta is 0.
 *   hardtanh    min(max(x, min_val), max_val) (defaults -1 and 1); the
 *               gradient passes where min_val < x < max_val, the bounds
 *               excluded, as torch's. JAG_EINVAL when min_val > max_val.
 * *out is a new reference, NULL on error. */
jag_status jag_leaky_relu(const jag_tensor *x, double negative_slope, jag_tensor **out);
jag_status jag_elu(const jag_tensor *x, double alpha, jag_tensor **out);
jag_status jag_softplus(const jag_tensor *x, double beta, double threshold, jag_tensor **out);
jag_status jag_hardtanh(const jag_tensor *x, double min_val, double max_val, jag_tensor **out);

/* Binary ops with NumPy/PyTorch broadcasting and type promotion. Comparison
 * ops return bool. div always returns a float dtype (true division).
 * maximum/minimum propagate NaN. Integer add/sub/mul/pow wrap on overflow;
 * an integer pow with a negative exponent gives 1 for base 1, +-1 for base
 * -1 and 0 otherwise. On bool, add/maximum are logical or, mul/minimum
 * logical and; sub and a bool pow are JAG_EDTYPE. Comparing an integer
 * tensor with a non-integral scalar is exact (done in float64).
 * Errors: JAG_ESHAPE when shapes do not broadcast; JAG_EINVAL for a scalar
 * (or alpha) the integer result dtype cannot hold. */
#define JAG_BINARY_OP_LIST(X)                                                 \
    X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum)                          \
    X(eq) X(ne) X(lt) X(le) X(gt) X(ge)

#define JAG_X_DECL(name)                                                      \
    jag_status jag_##name(const jag_tensor *a, const jag_tensor *b, jag_tensor **out);   \
    jag_status jag_##name##_scalar(const jag_tensor *a, double b, jag_tensor **out);
JAG_BINARY_OP_LIST(JAG_X_DECL)
#undef JAG_X_DECL

/* a + alpha * b. */
jag_status jag_add(const jag_tensor *a, const jag_tensor *b, double alpha, jag_tensor **out);
jag_status jag_add_scalar(const jag_tensor *a, double b, jag_tensor **out);
/* cond ? a : b elementwise; cond is bool; the three broadcast together.
 * Nested operands follow the pointwise rule (same raggedness, or dense
 * tensors that broadcast over the packed dims). */
jag_status jag_where(const jag_tensor *cond, const jag_tensor *a, const jag_tensor *b,
                     jag_tensor **out);
/* min(max(x, lo), hi) elementwise in one pass, dense or nested (the
 * pointwise rule), differentiable: the gradient passes where lo <= x <= hi,
 * the bounds included, as torch's. NaN stays NaN. lo = -inf or hi = +inf
 * bounds nothing on its side. dtype: a float x keeps its dtype; an integer
 * x (bool: int64) keeps it while its finite bounds are integral, else the
 * result is float32. *out is a new tensor (release it). Errors: JAG_EINVAL
 * when !(lo <= hi) (a NaN bound too) or when an integral bound is outside
 * the integer result dtype's range. */
jag_status jag_clamp(const jag_tensor *x, double lo, double hi, jag_tensor **out);
/* where(mask, value, x): value where the bool mask is set, else x (dense or
 * nested; the mask as a where operand). Differentiable in x. Errors:
 * JAG_EDTYPE for a non-bool mask; as jag_where for shapes. */
jag_status jag_masked_fill(const jag_tensor *x, const jag_tensor *mask, double value, jag_tensor **out);

/* A scalar operand of a `_scalar` op takes the tensor's dtype when the tensor
 * is floating; an integer tensor with a non-integral scalar gives float32. */

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

/* Reduce over dims[0..ndims) (ndims == 0: over every dim). Duplicate dims are
 * an error (JAG_EINVAL). keepdim keeps reduced dims with size 1.
 * sum/prod of bool/int promote to int64 (wrapping on overflow); mean/var/std
 * need a float dtype. float32 sums accumulate in float64. An empty
 * reduction gives 0 (sum), 1 (prod), NaN (mean, var, std) and is an error
 * for amax/amin/max/min/argmax/argmin (JAG_EINVAL, "empty"). NaN is both the
 * largest and the smallest value (it wins amax, amin and the arg ops); ties
 * give the first index. var/std divide by max(n - correction, 0): inf or NaN
 * when the correction reaches the count, as torch.
 * On a jagged nested x (B, j, D...): a dim list holding the ragged dim (1)
 * reduces each component over its rows, together with any trailing dims
 * listed (e.g. {1, 2}), into a dense (B, kept D...) tensor (keepdim: size 1
 * at the reduced dims); holes are skipped. An empty component gives 0
 * (sum), NaN (mean, var, std), -inf (logsumexp) and is an error for amax,
 * amin and the ops below with indices (JAG_EINVAL, "component i is empty").
 * max_dim, min_dim, argmax and argmin along dim 1 give the row inside each
 * component. Float values, and for sum, mean, amax and amin over the
 * ragged dim also int32, int64 and bool with torch's result dtypes (sum:
 * int64; mean: float32; amax/amin: the input's, an empty component giving
 * the dtype's lowest / highest value); other integer reductions over the
 * ragged dim are JAG_EDTYPE. The batch dim (0) cannot be
 * reduced (JAG_ENOTIMPL). Dims without the ragged one run on the values and
 * give a nested result. All are differentiable (argmax/argmin give no
 * gradient). */
jag_status jag_sum(const jag_tensor *x, const int *dims, int ndims, bool keepdim, jag_tensor **out);
jag_status jag_mean(const jag_tensor *x, const int *dims, int ndims, bool keepdim, jag_tensor **out);
jag_status jag_prod(const jag_tensor *x, const int *dims, int ndims, bool keepdim, jag_tensor **out);
jag_status jag_amax(const jag_tensor *x, const int *dims, int ndims, bool keepdim, jag_tensor **out);
jag_status jag_amin(const jag_tensor *x, const int *dims, int ndims, bool keepdim, jag_tensor **out);
/* log(sum(exp(x))) over dims, computed stably (the max is taken out): a
 * NaN gives NaN, a +inf gives +inf, only -inf (or nothing) gives -inf.
 * Float dtypes (JAG_EDTYPE otherwise). On a jagged nested tensor, as the
 * other reductions: over the ragged dim (1), alone or with the dims after
 * it, gives a dense (B, ...); an empty component gives -inf. */
jag_status jag_logsumexp(const jag_tensor *x, const int *dims, int ndims, bool keepdim, jag_tensor **out);
/* Variance / standard deviation with `correction` (1 = Bessel). */
jag_status jag_var(const jag_tensor *x, const int *dims, int ndims, int64_t correction,
                   bool keepdim, jag_tensor **out);
jag_status jag_std(const jag_tensor *x, const int *dims, int ndims, int64_t correction,
                   bool keepdim, jag_tensor **out);
/* Maximum / minimum along one dim: values and their int64 indices (first
 * occurrence). Errors: JAG_EINVAL on an empty dim. */
jag_status jag_max_dim(const jag_tensor *x, int dim, bool keepdim, jag_tensor **values,
                       jag_tensor **indices);
jag_status jag_min_dim(const jag_tensor *x, int dim, bool keepdim, jag_tensor **values,
                       jag_tensor **indices);
/* Largest / smallest element of the whole tensor (0-d). */
jag_status jag_max(const jag_tensor *x, jag_tensor **out);
jag_status jag_min(const jag_tensor *x, jag_tensor **out);
/* int64 index of the first max / min along dim; JAG_DIM_ALL flattens. */
#define JAG_DIM_ALL (-1000)
jag_status jag_argmax(const jag_tensor *x, int dim, bool keepdim, jag_tensor **out);
jag_status jag_argmin(const jag_tensor *x, int dim, bool keepdim, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Linear algebra (oneDNN and OpenBLAS)                                      */
/* ------------------------------------------------------------------------ */

/* (n, k) @ (k, m) -> (n, m). Float dtypes, both the same. float32 products
 * of 64^3 multiply-adds and more run on oneDNN (dnnl_sgemm, or its matmul
 * primitive for a transposed right operand of 16 rows and more, as linear
 * has), smaller ones and float64 on OpenBLAS: float32 sums in a blocked
 * order either way (bench/gemm_libs/README.md measured the choice against
 * BLIS, MKL and torch). bfloat16 operands run on oneDNN (AVX512-BF16 where the CPU has it): products
 * summed in float32, each result rounded once to bfloat16, as torch's CPU
 * bfloat16 mm; float16 operands are widened to float32, multiplied by
 * OpenBLAS and rounded once. The same holds for jag_bmm and jag_linear
 * (whose bias is added in float32 before the one rounding).
 * Errors: JAG_ESHAPE (inner sizes), JAG_EDTYPE. */
jag_status jag_mm(const jag_tensor *a, const jag_tensor *b, jag_tensor **out);
/* (B, n, k) @ (B, k, m) -> (B, n, m). */
jag_status jag_bmm(const jag_tensor *a, const jag_tensor *b, jag_tensor **out);
/* torch.matmul: 1-D, 2-D and batched operands with batch broadcasting; a
 * jagged nested (B, j, k) by a dense (k, m), or by a dense batch (B, k, m)
 * (component b times matrix b; needs data: not traced). */
jag_status jag_matmul(const jag_tensor *a, const jag_tensor *b, jag_tensor **out);
/* x (..., in) @ w(out, in)^T + bias(out); bias may be NULL. */
jag_status jag_linear(const jag_tensor *x, const jag_tensor *w, const jag_tensor *bias,
                      jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Normalisation                                                             */
/* ------------------------------------------------------------------------ */

/* Numerically stable softmax / log_softmax along dim. Float dtypes. A NaN
 * spreads through its line; a line of only -inf gives NaN, as torch. */
jag_status jag_softmax(const jag_tensor *x, int dim, jag_tensor **out);
jag_status jag_log_softmax(const jag_tensor *x, int dim, jag_tensor **out);
/* Normalise over the trailing `normalized_ndim` dims (1..ndim, else
 * JAG_EINVAL); weight and bias (may be NULL) have exactly those trailing
 * sizes and x's dtype. Biased variance, as torch. Statistics in float64. */
jag_status jag_layer_norm(const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                          const jag_tensor *bias, double eps, jag_tensor **out);
/* x / sqrt(mean(x^2) + eps) * weight over the trailing dims. */
jag_status jag_rms_norm(const jag_tensor *x, int normalized_ndim, const jag_tensor *weight,
                        double eps, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Indexing and joining                                                      */
/* ------------------------------------------------------------------------ */

/* Rows of x along dim picked by the 1-D int32/int64 `index`.
 * Errors: JAG_ERANGE for an index outside [0, size) (negative indices are
 * rejected, as torch does), naming its position and value.
 * On a jagged nested x, dim 0 picks components (repeats allowed): a nested
 * result with new offsets; index values outside [0, B) are JAG_ERANGE. */
jag_status jag_index_select(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor **out);
/* out[i][j][k] = x[i][index[i][j][k]][k] (for dim 1); index has x's ndim and
 * sizes no larger than x's outside dim. Errors: JAG_ERANGE for an index
 * value outside [0, x.size(dim)). */
jag_status jag_gather(const jag_tensor *x, int dim, const jag_tensor *index, jag_tensor **out);
/* weight (V, D), indices of any shape -> (indices..., D). Errors: JAG_ERANGE
 * for an index outside [0, V). */
jag_status jag_embedding(const jag_tensor *weight, const jag_tensor *indices, jag_tensor **out);
/* Bags of rows of a table, reduced: weight (V, D) float; indices (N) int32
 * or int64 in [0, V); offsets (B+1) int64 with offsets[0] == 0,
 * non-decreasing, offsets[B] == N: bag b is indices[offsets[b] :
 * offsets[b+1]]. mode JAG_BAG_SUM, JAG_BAG_MEAN or JAG_BAG_MAX (the first
 * NaN wins, as amax). per_sample_weights (may be NULL; sum mode only): (N)
 * of weight's dtype, scaling each row. Result (B, D); an empty bag gives
 * zeros. With jagged nested indices (B, j) pass offsets NULL: one bag per
 * component (per_sample_weights then nested like the indices, or dense
 * (N) over their packed values). Differentiable in weight (only the rows
 * used are accumulated; max: the first row holding the max) and
 * per_sample_weights. Errors: JAG_EINVAL (mode, offsets, dtypes of the
 * index tensors), JAG_ERANGE (an index outside [0, V)), JAG_ESHAPE,
 * JAG_EDTYPE (non-float weight). */
#define JAG_BAG_SUM 0
#define JAG_BAG_MEAN 1
#define JAG_BAG_MAX 2
jag_status jag_embedding_bag(const jag_tensor *weight, const jag_tensor *indices, const jag_tensor *offsets, int mode,
                             const jag_tensor *per_sample_weights, jag_tensor **out);
/* Join n tensors along an existing dim (cat) or a new one (stack). Shapes
 * must match except along dim (cat); dtypes are promoted. As torch, cat
 * skips 1-d tensors of size 0 in the shape checks (lists built up from an
 * empty tensor work).
 * Jagged nested tensors join along the batch dim (0: components in order,
 * offsets concatenated, holes dropped; the dims after the ragged one must
 * agree) or along a dense dim >= 2 (every tensor of the same raggedness,
 * JAG_ESHAPE otherwise); the ragged dim is JAG_ENOTIMPL. stack of nested
 * tensors inserts a dense dim >= 2. Differentiable. */
jag_status jag_cat(jag_tensor *const *xs, int n, int dim, jag_tensor **out);
jag_status jag_stack(jag_tensor *const *xs, int n, int dim, jag_tensor **out);
/* Views of consecutive pieces of `split_size` along dim (the last may be
 * smaller). Writes at most `cap` outputs into outs and their count into
 * *n_out. Errors: JAG_EINVAL for split_size <= 0 or cap too small (then no
 * output is written). */
jag_status jag_split(const jag_tensor *x, int64_t split_size, int dim, jag_tensor **outs,
                     int cap, int *n_out);
/* torch.chunk: at most `chunks` views of size ceil(size / chunks). */
jag_status jag_chunk(const jag_tensor *x, int chunks, int dim, jag_tensor **outs, int cap,
                     int *n_out);

/* ------------------------------------------------------------------------ */
/* Ops and boxed calls                                                       */
/* ------------------------------------------------------------------------ */

/* Every op — built in or defined at run time — has an id in one table. The
 * boxed calling convention below lets one piece of code (a subclass handler,
 * a fallback, a custom op's kernel) call any op.
 *
 * A few built-in ops have no jag_<name> function: they are what nested ops
 * become in a traced program, and are called by name (jag_op_find) when
 * needed. Arguments in order:
 *   ragged_reduce (values (R, D...), offsets int64 (B+1), lengths (B) or
 *     none, kind int, mask int, correction int, keepdim bool) -> (B, kept
 *     D...): a reduction over each component's rows [offsets[b], offsets[b]
 *     + length b) and the values dims in `mask` (bit d: dim d >= 1); kind 0
 *     sum, 1 mean, 2 amax, 3 amin, 4 logsumexp, 5 var, 6 std.
 *   ragged_reduce_backward (values, offsets, lengths, y or none, g, kind,
 *     mask, correction, keepdim) -> the values' gradient (0 in holes).
 *   ragged_softmax (values (R, D...), offsets int64 (B+1), lengths (B) or
 *     none, log bool) -> (R, D...): softmax (log_softmax when `log`) of
 *     each component's rows [offsets[b], offsets[b] + length b), each
 *     trailing position on its own; rows outside every component 0.
 *   ragged_softmax_backward (y, offsets, lengths, g (y's shape and dtype),
 *     log) -> the values' gradient from the output y (0 in holes).
 *   varlen_attention (q (Rq, Hq, Dh), k, v (Rk, Hk, Dh), q_offsets,
 *     q_lengths or none, k_offsets, k_lengths or none, causal bool, scale
 *     double, <= 0 for 1/sqrt(Dh)) -> (out (Rq, Hq, Dh), lse (Rq, Hq)).
 *   varlen_attention_backward (q, k, v, out, grad_out, lse, the four index
 *     tensors, causal, scale) -> (dq, dk, dv).
 *   scatter_add (x, dim int, index, src) -> x with src added at index along
 *     dim (gather's adjoint; index shaped like src).
 *   full (sizes ints, value double, dtype int), full_like (x, value).
 * Offsets, lengths and indices are checked against the rows they index:
 * JAG_EINVAL / JAG_ERANGE naming the component or index, nothing written. */
typedef int jag_op_id;

typedef enum jag_value_kind {
    JAG_VAL_NONE,    /* an absent optional argument */
    JAG_VAL_TENSOR,
    JAG_VAL_INT,
    JAG_VAL_DOUBLE,
    JAG_VAL_BOOL,
    JAG_VAL_INTS,    /* borrowed int64 array */
    JAG_VAL_TENSORS, /* borrowed tensor array */
} jag_value_kind;

/* One boxed argument. Tensors and arrays are borrowed for the call. */
typedef struct jag_value {
    jag_value_kind kind;
    union {
        const jag_tensor *t;
        int64_t i;
        double d;
        bool b;
        struct { const int64_t *v; int n; } ints;
        struct { jag_tensor *const *v; int n; } tensors;
    } u;
} jag_value;

/* Op tags (jag_op_tags). */
#define JAG_TAG_POINTWISE (1u << 0) /* elementwise over broadcast inputs */
#define JAG_TAG_REDUCTION (1u << 1)
#define JAG_TAG_VIEW (1u << 2)      /* output aliases input 0 */
#define JAG_TAG_CUSTOM (1u << 3)    /* defined at run time */
#define JAG_TAG_COMPOSITE (1u << 4) /* implemented by calling other ops; a
                                       subclass may handle it or let it
                                       decompose */
#define JAG_TAG_GRAD_SHAPES_ONLY (1u << 5) /* its derivative reads only the
                                       shapes of its floating inputs and
                                       outputs, never their values: writing
                                       to them after the call leaves its
                                       gradient right (see jag_version) */
#define JAG_TAG_FUSABLE (1u << 6)   /* pointwise on floats, with a scalar
                                       form the compiler fuses into one loop */
#define JAG_TAG_RELABEL_DIMS (1u << 7) /* on a tensor whose dims are
                                       permuted, the op with its dim
                                       arguments relabelled the same way
                                       gives the permuted result (pointwise
                                       ops too); the nested class runs such
                                       ops on its canonical form */
#define JAG_TAG_NONDIFF (1u << 8)   /* no gradient flows through it (its
                                       outputs are indices or booleans) */
#define JAG_TAG_NO_DERIVATIVE (1u << 9) /* a gradient op: it has no
                                       derivative of its own, and a backward
                                       through it (double backward) fails
                                       with JAG_ENOTIMPL */
#define JAG_TAG_NO_NESTED (1u << 10) /* no nested rule: a nested argument is
                                       refused with JAG_ENOTIMPL naming the
                                       op (a factory, an op on the packed
                                       inner tensors of a jagged tensor, or
                                       one whose arguments describe the
                                       whole outer shape). Every other row
                                       has a nested rule: the generic one of
                                       POINTWISE rows, or one the nested
                                       class registers for it */

/* The id of the op named `name` ("sin", "mm", "custom_ns::my_op").
 * Errors: JAG_EINVAL when no op has that name. */
jag_status jag_op_find(const char *name, jag_op_id *out);
/* The op's name ("sin", "custom_ns::my_op"), or NULL for a bad id. */
const char *jag_op_name(jag_op_id op);
/* Tags, and the numbers of arguments and outputs (-1 for a bad id). */
unsigned jag_op_tags(jag_op_id op);
int jag_op_num_inputs(jag_op_id op);
int jag_op_num_outputs(jag_op_id op);
/* Call `op` with boxed arguments; outs receives jag_op_num_outputs new
 * references. Errors: whatever the op reports; JAG_EINVAL for a bad id or a
 * wrong argument count or kind. */
jag_status jag_op_call(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);

/* The `kind` argument of the ops along a jagged tensor's ragged dim on its
 * inner tensors, ragged_reduce (0..6) and ragged_reduce_backward (0..8:
 * MAX / MIN, the gradients of max_dim / min_dim, take the forward's
 * indices); jag_op_schema gives their arguments. ARGMAX / ARGMIN are the
 * nested class's own. */
typedef enum jag_segment_kind {
    JAG_SEG_SUM, JAG_SEG_MEAN, JAG_SEG_AMAX, JAG_SEG_AMIN, /* integer values too */
    JAG_SEG_LSE, JAG_SEG_VAR, JAG_SEG_STD,
    JAG_SEG_MAX, JAG_SEG_MIN, JAG_SEG_ARGMAX, JAG_SEG_ARGMIN, /* with indices (ragged dim alone); integer values too */
} jag_segment_kind;

/* ------------------------------------------------------------------------ */
/* Tensor subclasses                                                         */
/* ------------------------------------------------------------------------ */

/* A wrapper subclass is an outer tensor with no storage of its own whose
 * behaviour comes from inner plain tensors and a little metadata (PyTorch's
 * __torch_dispatch__ wrapper subclasses). Any op that receives one as an
 * argument is routed to its class: first to a decomposition registered for
 * that op (jag_subclass_register_decomp), else to the class's `dispatch`.
 * Those run ops on the inner tensors and wrap the results. The nested tensor
 * and the scaled tensor are subclasses built on this same public protocol. */
typedef struct jag_subclass jag_subclass;

/* Metadata that, with the inner tensors, rebuilds an outer tensor. Plain
 * values, so that it can be copied, compared and printed (the tracer keys
 * compiled programs on it). */
#define JAG_META_MAX_INTS 16
typedef struct jag_subclass_meta {
    int n_ints;
    int64_t ints[JAG_META_MAX_INTS];
    double scalar;
} jag_subclass_meta;

#define JAG_SUBCLASS_MAX_INNER 8

/* A handler: run `op` on args (at least one is of this class) and write
 * jag_op_num_outputs(op) new references into outs. Return JAG_ENOTIMPL with
 * a message naming the op when the class does not support it. `ctx` is the
 * pointer given at registration. */
typedef jag_status (*jag_subclass_handler_fn)(const jag_subclass *cls, jag_op_id op, const jag_value *args,
                                              int nargs, jag_tensor **outs, void *ctx);

typedef struct jag_subclass_def {
    const char *name; /* "nested", "scaled", ... (copied) */
    /* The inner tensors of t (new references) and its metadata. */
    jag_status (*flatten)(const jag_tensor *t, jag_tensor **inner, int *n_inner, jag_subclass_meta *meta);
    /* Rebuild an outer tensor from inner tensors and metadata. */
    jag_status (*unflatten)(const jag_subclass *cls, jag_tensor *const *inner, int n_inner,
                            const jag_subclass_meta *meta, jag_tensor **out);
    /* The fallback handler for ops with no registered decomposition. */
    jag_subclass_handler_fn dispatch;
    void *dispatch_ctx;
    /* Free the per-tensor state given to jag_subclass_wrap (may be NULL). */
    void (*destroy_state)(void *state);
    /* Optional: print t (as jag_format); NULL prints the outer shape. */
    size_t (*format)(const jag_tensor *t, char *buf, size_t cap);
} jag_subclass_def;

/* Register a subclass (the definition is copied). Classes live until the
 * process ends. Errors: JAG_EINVAL for a missing name/flatten/unflatten/
 * dispatch or a name already registered. */
jag_status jag_subclass_register(const jag_subclass_def *def, const jag_subclass **out);
/* The class registered under `name`, or NULL. */
const jag_subclass *jag_subclass_find(const char *name);
const char *jag_subclass_name(const jag_subclass *cls);
/* Register `fn` as the class's implementation of `op` (built-in or custom),
 * tried before `dispatch`. Registering again replaces the previous one. */
jag_status jag_subclass_register_decomp(const jag_subclass *cls, jag_op_id op, jag_subclass_handler_fn fn,
                                        void *ctx);
/* A new outer tensor of class `cls` owning `state` (given back through
 * destroy_state when the tensor dies; also on failure of this call). The
 * outer shape and dtype are what users see; a size of -1 marks a ragged dim.
 * Errors: JAG_EINVAL (bad class, ndim or dtype). */
jag_status jag_subclass_wrap(const jag_subclass *cls, void *state, jag_dtype dtype, const int64_t *sizes, int ndim,
                             jag_tensor **out);
/* The class of t, or NULL for a plain tensor. */
const jag_subclass *jag_tensor_subclass(const jag_tensor *t);
/* The state given to jag_subclass_wrap (NULL for plain tensors). */
void *jag_subclass_state(const jag_tensor *t);
/* The class's flatten / unflatten, checked. */
jag_status jag_subclass_flatten(const jag_tensor *t, jag_tensor **inner, int *n_inner, jag_subclass_meta *meta);
jag_status jag_subclass_unflatten(const jag_subclass *cls, jag_tensor *const *inner, int n_inner,
                                  const jag_subclass_meta *meta, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Custom operators                                                          */
/* ------------------------------------------------------------------------ */

/* A kernel of a custom op: read args (as the schema declares them), make
 * the outputs (new references in outs), return a status. `ctx` is the
 * pointer given with the kernel. A META kernel receives meta tensors (no
 * data) and returns meta tensors of the right shape and dtype, typically by
 * calling jag ops on its inputs (they run as shape inference). */
typedef jag_status (*jag_kernel_fn)(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx);

/* Define an op from a schema:
 *     "custom_ns::my_op(Tensor x, Tensor? w, int n, float alpha, bool flag,
 *                       int[] dims, Tensor[] xs) -> Tensor"
 * returning "Tensor" or "(Tensor, Tensor)" (up to 4). The namespace is
 * required. Errors: JAG_EINVAL for a malformed schema (the message points at
 * the place) or a name already defined. */
jag_status jag_op_define(const char *schema, jag_op_id *out);
/* Give a custom op a kernel for a key: "CPU", "Meta" or "Autograd". The
 * Autograd kernel runs instead of the others when an input requires grad and
 * grad mode is on; it usually calls jag_function_apply with a function
 * whose forward calls the op again (then below the Autograd key) and whose
 * backward calls the op's backward op. Errors: JAG_EINVAL for an unknown
 * key, a built-in op, or a key that already has a kernel. */
jag_status jag_op_impl(jag_op_id op, const char *key, jag_kernel_fn fn, void *ctx);
/* The op's schema: a custom op's text as defined, a built-in op's from its
 * row of the op table ("softmax(Tensor x, int dim) -> Tensor"; argument
 * types Tensor, Tensor?, Tensor[], Tensor|float, int, int[], float, bool).
 * NULL for a bad id. The string lives as long as the process. */
const char *jag_op_schema(jag_op_id op);
/* A built-in op's one-line description ("exp(x) / sum(exp(x)) along dim");
 * NULL for a custom op or a bad id. */
const char *jag_op_doc(jag_op_id op);

/* ------------------------------------------------------------------------ */
/* Nested tensors                                                            */
/* ------------------------------------------------------------------------ */

/* A nested tensor is a batch of B tensors ("components") that may differ in
 * size. It is a wrapper subclass (class "nested"), so every op above accepts
 * it and routes to the nested handler. Two layouts:
 *
 * JAG_JAGGED   shape (B, j, D...): components (L_i, D...) differ only in
 *              their first dim. Storage: `values` (sum L_i, D...) and int64
 *              `offsets` (B+1): component i is values[offsets[i] :
 *              offsets[i+1]]. Optional int64 `lengths` (B) make holes:
 *              component i is values[offsets[i] : offsets[i] + lengths[i]].
 * JAG_STRIDED  components may differ in every dim. Storage: a 1-D `buffer`
 *              and int64 tables `nested_sizes` (B, n), `nested_strides`
 *              (B, n) and `storage_offsets` (B).
 *
 * A jagged tensor's ragged dim is outer dim 1 when made; jag_transpose
 * moves it (the ragged_idx of PyTorch): the transpose (B, H, j, D) of
 * (B, j, H, D) shares its values (sum L_i, H, D) and offsets, and its
 * components are (H, L_i, D). Ops whose meaning depends only on the dims
 * they name (pointwise, matmul/linear on a non-ragged last dim, reductions,
 * softmax, norms over dims after the ragged one, narrow, select,
 * index_select, attention) take such tensors; others are JAG_ENOTIMPL until
 * the ragged dim is transposed back to dim 1.
 *
 * The outer shape has -1 for a dim whose size differs between components
 * (jag_size returns -1 there; jag_numel returns -1). Offsets are shared,
 * refcounted tensors: ops re-wrap their results around the same offsets, and
 * two nested tensors match when their offsets are the same tensor or hold
 * equal values (compared once, then remembered). */
typedef enum jag_layout { JAG_DENSE, JAG_JAGGED, JAG_STRIDED } jag_layout;

/* JAG_DENSE for plain tensors (and other subclasses), else the layout. */
jag_layout jag_tensor_layout(const jag_tensor *t);
bool jag_is_nested(const jag_tensor *t);

/* A nested tensor holding copies of items[0..n) (n >= 1, same dtype and
 * ndim >= 1). JAG_JAGGED needs every item to have the same sizes after dim
 * 0. Errors: JAG_EINVAL (n, NULL items, nested items), JAG_EDTYPE (dtypes
 * differ), JAG_ESHAPE (ndim differs; for jagged, trailing sizes differ). */
jag_status jag_nested_from_list(jag_tensor *const *items, int n, jag_layout layout, jag_tensor **out);
/* A jagged nested tensor viewing `values` (no copy) with int64 `offsets`
 * (1-D, B+1 entries, non-decreasing, offsets[0] == 0 and offsets[B] ==
 * values.size(0); with lengths, 0 <= offsets[0] and offsets[B] <=
 * values.size(0)) and optional int64 `lengths` (1-D, B entries, 0 <=
 * lengths[i] <= offsets[i+1] - offsets[i]). The nested tensor holds
 * references to all three. Its structure cannot change under it: offsets
 * and lengths that jag owns and that span their whole storage are kept as
 * they are and become read-only (jag_is_read_only, with every view of
 * them: in-place ops refuse them; clone them first to keep a writable
 * copy); others (memory lent through jag_from_blob, numpy or DLPack, or a
 * part of a larger tensor) are copied into a read-only tensor of jag's
 * own, then validated, so that a later write by the lender cannot reach
 * the nested tensor (they are B+1 integers next to the values). int32
 * offsets and lengths are accepted too: they are widened into a read-only
 * int64 copy (the caller's tensor stays writable and is not read again).
 * Errors: JAG_EINVAL / JAG_EDTYPE / JAG_ESHAPE naming the argument and the
 * first bad entry. */
jag_status jag_nested_from_jagged(const jag_tensor *values, const jag_tensor *offsets, const jag_tensor *lengths,
                                  jag_tensor **out);
/* A jagged nested tensor from padded (B, L, D...) keeping the first
 * lengths[i] rows of item i (a copy). lengths: int64 or int32, 1-D, B
 * entries in [0, L]. */
jag_status jag_nested_from_padded(const jag_tensor *padded, const jag_tensor *lengths, jag_tensor **out);
/* A dense tensor (B, max sizes...) with every component copied in and the
 * rest filled with `padding`. output_sizes (may be NULL) fixes the padded
 * shape; each size must be at least the largest component's (no truncation
 * here; jag_nested_to_padded_max truncates). */
jag_status jag_nested_to_padded(const jag_tensor *nt, double padding, const int64_t *output_sizes, int ndim,
                                jag_tensor **out);
/* Jagged nt (B, j, D...) -> dense (B, max_length, D...): each component's
 * first max_length rows (longer ones are truncated), the rest filled with
 * `padding`. Differentiable (truncated rows get no gradient). Errors:
 * JAG_EINVAL for a non-jagged nt or max_length < 0. */
jag_status jag_nested_to_padded_max(const jag_tensor *nt, double padding, int64_t max_length, jag_tensor **out);
/* The same components in the other layout (a copy). Jagged -> strided always
 * works; strided -> jagged needs components that differ only in dim 0.
 * Errors: JAG_ESHAPE when not representable. */
jag_status jag_nested_to_layout(const jag_tensor *nt, jag_layout layout, jag_tensor **out);
/* Views of the components (outs[0..B)). Errors: JAG_EINVAL when cap < B. */
jag_status jag_nested_unbind(const jag_tensor *nt, jag_tensor **outs, int cap, int *n_out);
/* The number of components. */
int64_t jag_nested_batch_size(const jag_tensor *nt);
/* Inner tensors, as new references. values/offsets/lengths for jagged
 * (lengths: *out = NULL when there are no holes); buffer, sizes, strides
 * and storage offsets for strided. Errors: JAG_EINVAL for the wrong
 * layout or a plain tensor. */
jag_status jag_nested_values(const jag_tensor *nt, jag_tensor **out);
jag_status jag_nested_offsets(const jag_tensor *nt, jag_tensor **out);
jag_status jag_nested_lengths(const jag_tensor *nt, jag_tensor **out);
jag_status jag_nested_buffer(const jag_tensor *nt, jag_tensor **out);
jag_status jag_nested_sizes_table(const jag_tensor *nt, jag_tensor **out);
jag_status jag_nested_strides_table(const jag_tensor *nt, jag_tensor **out);
jag_status jag_nested_storage_offsets(const jag_tensor *nt, jag_tensor **out);
/* Smallest / largest component length along the ragged dim (cached). */
int64_t jag_nested_min_seqlen(const jag_tensor *nt);
int64_t jag_nested_max_seqlen(const jag_tensor *nt);
/* Derived on demand and cached: int64 (sum L) with the component of each
 * value row (PyTorch's value_rowids; rows in holes belong to the component
 * whose span holds them), and int64 (B) component lengths (the lengths
 * tensor when there are holes, else offsets[i+1] - offsets[i]). New
 * references. Errors: JAG_EINVAL for a non-jagged tensor. */
jag_status jag_nested_row_ids(const jag_tensor *nt, jag_tensor **out);
jag_status jag_nested_seq_lengths(const jag_tensor *nt, jag_tensor **out);
/* The id of the ragged dim's symbol: nested tensors with matching raggedness
 * share it; it prints as "j<id>". */
int64_t jag_nested_ragged_id(const jag_tensor *nt);
/* Which outer dim of a jagged tensor is ragged (1 unless a transpose moved
 * it); 0 for a strided nested tensor, -1 for a plain one. */
int jag_nested_ragged_idx(const jag_tensor *nt);

/* Tensors shaped like x (dense or nested; nested results share x's offsets).
 * rand/randn use `g` (NULL: the thread's default generator); inside a
 * traced function they fail with JAG_ENOTIMPL, as jag_rand_uniform. */
jag_status jag_empty_like(const jag_tensor *x, jag_tensor **out);
jag_status jag_zeros_like(const jag_tensor *x, jag_tensor **out);
jag_status jag_ones_like(const jag_tensor *x, jag_tensor **out);
jag_status jag_full_like(const jag_tensor *x, double value, jag_tensor **out);
jag_status jag_rand_like(const jag_tensor *x, jag_generator *g, jag_tensor **out);
jag_status jag_randn_like(const jag_tensor *x, jag_generator *g, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Scaled tensors                                                            */
/* ------------------------------------------------------------------------ */

/* A scaled tensor (class "scaled") stands for data * scale without
 * computing the product: scaling, negation, views, sums and matrix products
 * work on `data` and fold the factor into `scale`; any other op materialises
 * data * scale and runs on the plain result. data: a plain float tensor;
 * scale: a 0-d tensor of the same dtype. The scaled tensor holds references
 * to both. Errors: JAG_EINVAL (not plain), JAG_EDTYPE, JAG_ESHAPE (scale not
 * 0-d). */
jag_status jag_scaled_new(const jag_tensor *data, const jag_tensor *scale, jag_tensor **out);
bool jag_is_scaled(const jag_tensor *t);
/* The parts, as new references. Errors: JAG_EINVAL for a non-scaled t. */
jag_status jag_scaled_data(const jag_tensor *t, jag_tensor **out);
jag_status jag_scaled_scale(const jag_tensor *t, jag_tensor **out);
/* data * scale as a plain tensor. */
jag_status jag_scaled_materialize(const jag_tensor *t, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Autograd                                                                  */
/* ------------------------------------------------------------------------ */

/* Reverse-mode automatic differentiation on a dynamic tape, as PyTorch's:
 * an op that runs while grad mode is on and an input requires grad gives its
 * outputs a node (the op, what it saved, edges to its inputs' nodes).
 * jag_backward walks the nodes from a root in reverse topological order and
 * accumulates into the `grad` of leaf tensors that require grad. Gradients of
 * nested tensors are nested tensors with the same layout and the same
 * offsets object as the input. */

/* Mark a leaf tensor (dense or nested) as needing a gradient, or not.
 * Errors: JAG_EINVAL for a non-leaf (an op's output) or a non-float dtype. */
jag_status jag_set_requires_grad(jag_tensor *t, bool requires_grad);
bool jag_requires_grad(const jag_tensor *t);
/* True when t was not made by a recorded op (user-made, or detached). */
bool jag_is_leaf(const jag_tensor *t);
/* The accumulated gradient of a leaf as a new reference (*out = NULL when
 * there is none yet, and always for a non-leaf: only leaves accumulate, as
 * in torch). Errors: JAG_EINVAL for NULL arguments. */
jag_status jag_get_grad(const jag_tensor *t, jag_tensor **out);
/* Forget t's accumulated gradient. */
void jag_zero_grad(jag_tensor *t);

/* Backpropagate from `root`. grad (may be NULL for a one-element root,
 * meaning 1) has root's shape, dtype and (for nested) structure. The graph
 * is freed afterwards unless retain_graph; a second backward through a freed
 * graph is JAG_ESTATE. Errors: JAG_ESTATE (root does not require grad, or
 * its graph was freed), JAG_ESHAPE / JAG_EDTYPE (grad does not match root;
 * a non-scalar root without grad), JAG_ENOTIMPL (an op on the path has no
 * derivative). On error no .grad is changed. Rules run with grad mode off
 * (no higher-order gradients yet). One thread at a time may backpropagate
 * through a given graph. Leaves with a post-accumulate-grad hook (below)
 * are the exception: their .grad is written, and their hooks run, as soon
 * as backward has summed all of their incoming gradients, so an error later
 * in the same backward leaves those written. */
jag_status jag_backward(const jag_tensor *root, const jag_tensor *grad, bool retain_graph);

/* Post-accumulate-grad hooks (torch's Tensor.register_post_accumulate_grad_
 * hook): fn(leaf, ctx) runs on the thread running jag_backward, once per
 * backward that gives `leaf` a gradient, after every gradient flowing into
 * the leaf in that backward has been summed into leaf's .grad (the hook
 * reads the final .grad with jag_get_grad, and may replace it). Hooks of one
 * leaf run in the order registered. A hook returning an error stops the
 * backward with that error. A backward in which no gradient reaches the
 * leaf runs none of its hooks.
 * `leaf`: a leaf that requires grad. The hook belongs to the leaf and
 * holds no reference on it (as torch keeps hooks on the tensor): releasing
 * the leaf's last reference removes its hooks, running each free_ctx once,
 * in registration order; their handles are then no longer registered.
 * Turning the leaf's requires_grad off keeps its hooks (they run again
 * once it is back on). *handle receives an id (> 0) for
 * jag_remove_post_accumulate_grad_hook. free_ctx (may be NULL) runs on ctx
 * exactly once: when the hook is removed or its leaf released. Errors:
 * JAG_EINVAL (NULL leaf, fn or handle; a non-leaf; a leaf that does not
 * require grad), JAG_ENOMEM. */
typedef jag_status (*jag_post_accumulate_grad_hook)(jag_tensor *leaf, void *ctx);
jag_status jag_register_post_accumulate_grad_hook(jag_tensor *leaf, jag_post_accumulate_grad_hook fn, void *ctx,
                                                  void (*free_ctx)(void *), int64_t *handle);
/* Remove a hook (it does not run again, its free_ctx runs). May be called
 * from inside a hook. Errors: JAG_EINVAL for a handle that is not
 * registered (never was, removed already, or its leaf was released). */
jag_status jag_remove_post_accumulate_grad_hook(int64_t handle);

/* Grad mode for this thread (on by default). Returns the previous mode, so
 * a "no_grad" block is: bool prev = jag_set_grad_enabled(false); ...;
 * jag_set_grad_enabled(prev); */
bool jag_set_grad_enabled(bool enabled);
bool jag_is_grad_enabled(void);
/* A new tensor sharing x's data (or x's inner tensors, for a subclass) that
 * is a leaf and does not require grad. */
jag_status jag_detach(const jag_tensor *x, jag_tensor **out);

/* Custom autograd functions: a forward and a backward callback with saved
 * tensors and a context for anything else (as torch.autograd.Function). forward runs with grad mode off and returns its outputs; the
 * outputs then get a node whose backward calls `backward`. */
typedef struct jag_autograd_ctx jag_autograd_ctx;
typedef struct jag_function_def {
    const char *name;
    int n_outputs; /* 1..4 */
    /* inputs[0..n_inputs): borrowed; write n_outputs new references to outs */
    jag_status (*forward)(jag_autograd_ctx *ctx, jag_tensor *const *inputs, int n_inputs, jag_tensor **outs);
    /* grad_outputs[0..n_outputs) (NULL entries: that output got no grad);
     * write one new reference or NULL per input into grad_inputs */
    jag_status (*backward)(jag_autograd_ctx *ctx, jag_tensor *const *grad_outputs, jag_tensor **grad_inputs);
    void *user; /* given back by jag_autograd_ctx_user */
} jag_function_def;
/* Keep tensors for backward (new references are taken); at most 8. */
jag_status jag_autograd_save(jag_autograd_ctx *ctx, jag_tensor *const *tensors, int n);
/* The saved tensors, borrowed, valid during backward. */
jag_tensor *const *jag_autograd_saved(const jag_autograd_ctx *ctx, int *n);
/* Which inputs need a gradient (valid in backward). */
bool jag_autograd_needs_input_grad(const jag_autograd_ctx *ctx, int i);
/* Free-form storage for non-tensor values (up to 8 doubles), and the def's
 * user pointer. */
double *jag_autograd_values(jag_autograd_ctx *ctx);
void *jag_autograd_user(const jag_autograd_ctx *ctx);
/* Run a custom function on inputs[0..n_inputs). */
jag_status jag_function_apply(const jag_function_def *def, jag_tensor *const *inputs, int n_inputs, jag_tensor **outs);

/* Compare the analytic gradient of fn with central finite differences in
 * float64. fn maps inputs (float64, dense or nested, each requiring grad) to
 * one output. Every element of the Jacobian is checked:
 * |analytic - numeric| <= atol + rtol * |numeric|. On a mismatch returns
 * JAG_EINVAL with the worst element in the message (input, element, both
 * values). eps is the finite-difference step (1e-6 is usual). */
typedef jag_status (*jag_gradcheck_fn)(jag_tensor *const *inputs, int n_inputs, jag_tensor **out, void *ctx);
jag_status jag_gradcheck(jag_gradcheck_fn fn, void *ctx, jag_tensor *const *inputs, int n_inputs, double eps,
                         double atol, double rtol);

/* ------------------------------------------------------------------------ */
/* Composite ops (dense and nested alike, differentiable)                    */
/* ------------------------------------------------------------------------ */

/* Inverted dropout: each element is zeroed with probability p and the rest
 * scaled by 1 / (1 - p), with numbers from `g` (NULL: the thread's default
 * generator), so a seeded generator reproduces the mask. With train false,
 * or p == 0, a new reference to x; with p == 1, x * 0 (torch's result: zeros,
 * NaN where x is inf or NaN; no numbers drawn). Errors: JAG_EINVAL for p
 * outside [0, 1], JAG_EDTYPE for a non-float x. */
jag_status jag_dropout(const jag_tensor *x, double p, bool train, jag_generator *g, jag_tensor **out);

/* Scaled dot-product attention, softmax(q k^T * scale [causal]) v, for
 *   dense q (B, Hq, Lq, Dh), k and v (B, Hk, Lk, Dh), or
 *   jagged nested q (B, jq, Hq, Dh), k and v (B, jk, Hk, Dh), where every
 *   item may have its own query and key lengths (k and v share raggedness),
 *   or all three in torch's layout (B, Hq, jq, Dh), (B, Hk, jk, Dh): their
 *   transposes (jag_transpose(x, 1, 2), no copy); the output then has it too.
 * Hq must be a multiple of Hk (grouped-query / multi-query attention).
 * scale <= 0 or NaN means 1/sqrt(Dh). causal: query i sees keys j <= i
 * (top-left aligned, as torch). The (L, L) score matrix is never built: an
 * online softmax over key blocks, parallel over items and heads. A query
 * that sees no key gets zeros. float16 / bfloat16 operands compute in
 * float32 (widened, the output rounded once to their dtype, as torch's CPU
 * attention; gradients in the input dtype). Differentiable. Errors: JAG_ESHAPE (shapes,
 * head counts, raggedness), JAG_EDTYPE, JAG_EINVAL (mixing nested and
 * dense), JAG_ENOTIMPL (strided nested). */
jag_status jag_scaled_dot_product_attention(const jag_tensor *q, const jag_tensor *k, const jag_tensor *v, bool causal,
                                            double scale, jag_tensor **out);

/* As jag_scaled_dot_product_attention, with an additive mask on the
 * scores (may be NULL): softmax(q k^T * scale + mask) v. For dense
 * q the mask is dense and broadcasts to (B, Hq, Lq, Lk); for jagged q it is
 * a strided nested tensor (jag_nested_from_list with JAG_STRIDED) whose
 * component b is (Lq_b, Lk_b) or (Hq or 1, Lq_b, Lk_b). -inf hides a key; a
 * query that sees no key gets zeros. Differentiable in q, k, v and the
 * mask. Errors: as jag_scaled_dot_product_attention, plus JAG_EDTYPE (the
 * mask's dtype differs from q's), JAG_ESHAPE (a mask that does not fit),
 * JAG_EINVAL (a nested mask for dense q, or a jagged one; a mask with
 * causal true, as torch refuses attn_mask with is_causal: put the causal
 * part into the mask; a NULL mask with causal is the causal op). */
jag_status jag_scaled_dot_product_attention_masked(const jag_tensor *q, const jag_tensor *k, const jag_tensor *v,
                                                   const jag_tensor *mask, bool causal, double scale, jag_tensor **out);

/* Losses, averaged over the real elements (padding and holes excluded).
 * cross_entropy: logits (N, C) with int64/int32 targets (N) in [0, C), or a
 * jagged nested (B, j, C) with a jagged (B, j) target of the same
 * raggedness: -mean over tokens of log_softmax(logits)[target]. mse_loss:
 * mean of (pred - target)^2 over every real element; pred and target of the
 * same shape (both dense, or both nested with the same raggedness).
 * Errors: JAG_ESHAPE / JAG_EDTYPE naming the argument; JAG_ERANGE for a
 * target outside [0, C). */
jag_status jag_cross_entropy(const jag_tensor *logits, const jag_tensor *target, jag_tensor **out);
jag_status jag_mse_loss(const jag_tensor *pred, const jag_tensor *target, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Library-wide settings                                                     */
/* ------------------------------------------------------------------------ */

/* jag keeps recently freed large blocks (>= 128 KiB; at most 256 blocks and
 * 512 MiB in all; sizes rounded up by at most 12.5% and at most 2 MiB) to
 * hand back to new tensors without page faults, and per thread the smaller
 * blocks of tensor data and headers (at most about 3 MiB a thread). Give
 * back to the system the large blocks and the calling thread's small ones
 * now; other threads' small blocks go back when those threads exit. */
void jag_empty_cache(void);

/* The OpenBLAS kernels GEMMs run on ("SkylakeX", "Haswell", ...; a string
 * owned by OpenBLAS). When OpenBLAS does not know the CPU and falls back to
 * its SSE3 "Prescott" kernels, jag re-picks, as it loads, the kernels the
 * CPU's features call for (AVX-512: SkylakeX; AVX2 and FMA: Haswell), unless
 * OPENBLAS_CORETYPE is set. */
const char *jag_blas_core(void);

/* Threads used by jag's own kernels, OpenBLAS and oneDNN (0 = all cores). */
void jag_set_num_threads(int n);
int jag_get_num_threads(void);

/* ------------------------------------------------------------------------ */
/* Tracing and compiling                                                     */
/* ------------------------------------------------------------------------ */

/* A trace is a function recorded as a program: it runs the function once on
 * proxies (tensors with shape, dtype and layout but no data) and records one
 * bound symbol per op (op, input proxies, output proxies, non-tensor
 * arguments). Proxies have stable names: inputs as given (or x0, x1, ...),
 * temporaries t0, t1, ..., captured constants c0, ...; ragged sizes print as
 * j0, j1, ..., tied to their offsets proxy. A subclass input is `flatten`ed
 * into its inner proxies at the top; a subclass made inside the function is
 * a `subclass_ctor` symbol; a custom autograd function is a symbol around the
 * symbols of its forward. Passes map a trace to a new trace; a trace compiles
 * to a program that runs on new inputs of the same kind (same dtypes, ranks,
 * subclasses and layouts; lengths and batch sizes may differ). Sizes that a
 * view, expand or full names are taken from the input sizes they equalled
 * when traced (input sizes that were equal then must be equal at run time);
 * a size that equals no input size, and narrow's start and length, fix the
 * program's sizes: then the inputs' sizes must match the traced ones.
 *
 * Traces, programs and compiled functions are not thread-safe objects: use
 * one from one thread at a time. Tracing is per thread. */
typedef struct jag_trace jag_trace;
typedef struct jag_program jag_program;
typedef struct jag_compiled jag_compiled;

/* The function to trace: read inputs[0..n_inputs) (borrowed) and write
 * n_outputs new references into outputs; return JAG_OK or an error. While
 * tracing, inputs are proxies: call jag ops on them (and jag_function_apply,
 * custom ops, subclass constructors); reading data (jag_data, jag_item) is
 * not possible, nor are random numbers (JAG_ENOTIMPL). Tensors with data
 * that the function uses without getting them as inputs are captured as
 * constants (held by the trace; they get no gradient: pass parameters as
 * inputs). The function runs as code at the top level with no scope open,
 * whatever scopes its caller has open: what its ops make is its own, to
 * release by hand or through scopes it opens and closes itself; it cannot
 * close a scope of its caller's. */
typedef jag_status (*jag_traced_fn)(void *ctx, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs,
                                    int n_outputs);

/* Trace fn on proxies of inputs[0..n_inputs) (example inputs, borrowed;
 * only their kind and sizes are read, and requires_grad, which the grad pass
 * and compiled autograd follow). names (may be NULL, or NULL entries) names
 * the inputs in the printed trace. *out receives a new trace (free with
 * jag_trace_free). Errors: JAG_EINVAL (NULL arguments, counts outside 0..64
 * inputs / 1..64 outputs), JAG_ESTATE (already tracing on this thread; fn
 * returned with a scope of its own still open), JAG_ENOTIMPL (the function
 * does something the tracer cannot record: the message says what), or
 * whatever fn returns. */
jag_status jag_trace_function(jag_traced_fn fn, void *ctx, jag_tensor *const *inputs, int n_inputs,
                              const char *const *names, int n_outputs, jag_trace **out);
/* Free a trace (NULL is ignored). */
void jag_trace_free(jag_trace *t);
int jag_trace_num_inputs(const jag_trace *t);
int jag_trace_num_outputs(const jag_trace *t);
int jag_trace_num_symbols(const jag_trace *t);
/* The trace as readable source, one symbol a line with the output's type in
 * a comment, into buf of cap bytes (always NUL-terminated). Returns the
 * length the full text needs (as snprintf). jag_trace_print writes it to
 * stdout. */
size_t jag_trace_format(const jag_trace *t, char *buf, size_t cap);
void jag_trace_print(const jag_trace *t);

/* Passes: each reads t and writes a new trace to *out (t is unchanged).
 * desugar: every symbol on a subclass proxy is replaced by what the class's
 *   handler (or registered decomposition) does on the inner proxies, found by
 *   running it under the tracer; subclass outputs become `unflatten` at the
 *   bottom. Errors: JAG_ENOTIMPL when a handler makes tensors no op made.
 * dce: drops symbols no output needs, `flatten` of a value built by
 *   unflatten / subclass_ctor (uses its inner tensors instead), and ctors
 *   whose result is only flattened.
 * fuse: merges chains and trees of pointwise ops over one element space into
 *   `fused` symbols that run in one pass over memory, tile by tile.
 * grad: appends the backward program: inputs get one cotangent per output
 *   (named g_<output>, shaped like it), outputs get the gradient of every
 *   input that requires grad, in input order. Errors: JAG_EINVAL when no
 *   input requires grad; JAG_ENOTIMPL for an op with no derivative.
 * All: JAG_ENOMEM. */
jag_status jag_trace_desugar(const jag_trace *t, jag_trace **out);
jag_status jag_trace_dce(const jag_trace *t, jag_trace **out);
jag_status jag_trace_fuse(const jag_trace *t, jag_trace **out);
jag_status jag_trace_grad(const jag_trace *t, jag_trace **out);

/* Passes jag_trace_compile and jag_compile apply, in this order. */
#define JAG_PASS_DESUGAR (1u << 0)
#define JAG_PASS_DCE (1u << 1)
#define JAG_PASS_FUSE (1u << 2)
#define JAG_PASSES_ALL (JAG_PASS_DESUGAR | JAG_PASS_DCE | JAG_PASS_FUSE)

/* Compile t (borrowed; the program keeps what it needs) with `passes` into a
 * program (free with jag_program_free). When an input of t requires grad
 * the program also holds a backward program (t's grad, split), used when it
 * runs with grad mode on and inputs that require grad. Errors: as the passes. */
jag_status jag_trace_compile(const jag_trace *t, unsigned passes, jag_program **out);
/* Run p on inputs[0..n_inputs) (borrowed) and write its n_outputs outputs
 * (new references, recorded in an open scope as every new tensor is) to
 * outputs. Inputs are checked first: JAG_EINVAL with a
 * message naming the input, what was expected and what came when the count,
 * a subclass or layout, or an inner tensor does not fit; JAG_EDTYPE for a
 * dtype; JAG_ESHAPE for a rank (or a size, for a program with fixed sizes);
 * nothing runs then; JAG_ESHAPE also when input sizes that were equal when
 * traced differ now (see above). Errors of the ops while running are reported as eager
 * ones would be; outputs are then not written. When grad mode is on and an
 * input requires grad, the outputs get one autograd node whose backward runs
 * the compiled backward program (jag_backward then fills the inputs' grads as
 * eager would). Buffers are planned at compile time and kept between runs: a
 * run whose sizes fit the previous ones allocates no tensor data. */
jag_status jag_program_run(jag_program *p, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs,
                           int n_outputs);
/* The program's final forward trace (after the passes), borrowed from p. */
const jag_trace *jag_program_trace(const jag_program *p);
/* The backward program's trace, or NULL when there is none. */
const jag_trace *jag_program_backward_trace(const jag_program *p);
void jag_program_free(jag_program *p);

/* A compiled function: fn (with ctx, both kept by pointer) traced and
 * compiled with `passes` on the first call with each new kind of inputs
 * (dtypes, ranks, subclasses and layouts, requires_grad), then the program
 * for that kind runs. A program whose size lists (view, expand, full) hold
 * numbers runs at first only on inputs of its traced sizes: one trace cannot
 * tell a constant (the heads of view(x, [-1, heads, head_dim])) from an
 * input size. A call with other sizes traces again; when the new program is
 * the same but for those numbers, the first serves both: a number the same
 * in both traces is a constant, one that changed is read from the input
 * sizes that changed the same way (they must then stay equal), and input
 * sizes that were the same in both traces must keep that value. So a
 * training step over ragged batches is one program from its second batch
 * on. The rule reads evidence, not the function: a number computed from
 * input sizes otherwise than by equality (2 * C, R * heads) that, between
 * the two traces, changed exactly as some input size did is read from that
 * size, which is wrong on later sizes. Free with jag_compiled_free.
 * Errors: JAG_EINVAL for NULL arguments or n_outputs outside 1..64. */
jag_status jag_compile(jag_traced_fn fn, void *ctx, int n_outputs, unsigned passes, jag_compiled **out);
/* Call it: as jag_program_run, with tracing and compiling when needed
 * (their errors are returned; nothing is cached then). */
jag_status jag_compiled_call(jag_compiled *c, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs,
                             int n_outputs);
/* Programs compiled so far (one per kind of inputs; at most 64 are kept, a
 * new kind beyond that replaces the oldest). */
int jag_compiled_num_programs(const jag_compiled *c);
void jag_compiled_free(jag_compiled *c);

/* ------------------------------------------------------------------------ */
/* Optimizers                                                                */
/* ------------------------------------------------------------------------ */

/* torch.optim's SGD, Adam and AdamW as fused steps: one pass over each
 * parameter that reads param, grad and state once and writes param and
 * state in place, in the param's dtype (float32 or float64) with the step
 * scalars (bias corrections, step size) computed in double, in the order of
 * torch's single-tensor updates:
 *
 *   SGD:   d = g + weight_decay * p
 *          buf = d at the first step, else momentum * buf + (1 - dampening) * d
 *          d = nesterov ? d + momentum * buf : buf        (when momentum != 0)
 *          p = p - lr * d
 *   Adam:  g = g + weight_decay * p          (L2 on the gradient)
 *   AdamW: p = p * (1 - lr * weight_decay)   (decoupled decay, before the rest)
 *   both:  m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g
 *          amsgrad: vmax = max(vmax, v), and vmax is used for v below
 *          p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *
 * with t the parameter's step count after this step (from 1). Parameters
 * are plain contiguous float leaves; nested parameters are not supported
 * yet (JAG_ENOTIMPL). A step is not recorded by autograd (it runs with grad
 * mode off, whatever the caller's mode, as torch's optimizer.step runs under
 * no_grad) and bumps the version (jag_version) of every parameter and state
 * tensor it writes, so a graph that saved a parameter before the step
 * refuses its backward afterwards, as after any in-place op.
 * Errors (nothing is written): JAG_EINVAL for a hyperparameter out of range
 * (lr, eps, momentum, weight_decay < 0 or not finite; betas outside [0, 1);
 * nesterov without momentum or with dampening), a read-only, non-contiguous
 * or non-leaf parameter, a parameter given twice; JAG_EDTYPE / JAG_ESHAPE for
 * a non-float parameter, or a gradient or state whose dtype or shape differs
 * from its parameter's. Every parameter is checked before any is written. */

/* The functional updates over lists of n tensors (what the Python
 * optimizers call, once per parameter group). Tensors are borrowed.
 * grads[i] NULL skips parameter i (torch skips params whose .grad is None).
 * momentum_buffers (ignored when momentum == 0; else n entries): an entry
 * NULL is the first step of that parameter: a new buffer is made and
 * stored there (a NEW reference the caller owns); others are updated in
 * place. steps[i]: parameter i's step count after this step (>= 1);
 * max_exp_avg_sqs is read only with amsgrad (may be NULL otherwise).
 * decoupled: AdamW's weight decay, else Adam's. Gradients may be
 * non-contiguous (read through a contiguous copy); state must be
 * contiguous, writable and of the parameter's shape and dtype. */
jag_status jag_optim_sgd_update(jag_tensor *const *params, jag_tensor *const *grads, jag_tensor **momentum_buffers,
                                int n, double lr, double momentum, double dampening, double weight_decay,
                                bool nesterov);
jag_status jag_optim_adam_update(jag_tensor *const *params, jag_tensor *const *grads, jag_tensor *const *exp_avgs,
                                 jag_tensor *const *exp_avg_sqs, jag_tensor *const *max_exp_avg_sqs,
                                 const int64_t *steps, int n, double lr, double beta1, double beta2, double eps,
                                 double weight_decay, bool amsgrad, bool decoupled);

/* An optimizer object: the parameters (one reference each, taken at
 * creation), the hyperparameters, and per parameter its state and step
 * count. Used from one thread at a time. */
typedef struct jag_optimizer jag_optimizer;

/* New optimizers over params[0..n) (each a plain contiguous float leaf,
 * given once). torch's defaults: SGD(lr, momentum 0, dampening 0,
 * weight_decay 0, nesterov false); Adam(lr 1e-3, betas (0.9, 0.999), eps
 * 1e-8, weight_decay 0, amsgrad false); AdamW the same with weight_decay
 * 1e-2. *out is freed with jag_optim_free. Errors: as above; JAG_ENOMEM. */
jag_status jag_optim_sgd_new(jag_tensor *const *params, int n, double lr, double momentum, double dampening,
                             double weight_decay, bool nesterov, jag_optimizer **out);
jag_status jag_optim_adam_new(jag_tensor *const *params, int n, double lr, double beta1, double beta2, double eps,
                              double weight_decay, bool amsgrad, jag_optimizer **out);
jag_status jag_optim_adamw_new(jag_tensor *const *params, int n, double lr, double beta1, double beta2, double eps,
                               double weight_decay, bool amsgrad, jag_optimizer **out);
/* One step over every parameter whose .grad (jag_get_grad) is not NULL;
 * the others are skipped and keep their step count. State is made at a
 * parameter's first step (Adam's zeros; SGD's momentum buffer, a copy of
 * the first update). Errors: as above (the step count and state stay). */
jag_status jag_optim_step(jag_optimizer *opt);
/* Forget every parameter's gradient (torch's zero_grad(set_to_none=True)). */
jag_status jag_optim_zero_grad(jag_optimizer *opt);
/* The learning rate used by the next steps (a scheduler's hook). Errors:
 * JAG_EINVAL for lr < 0 or not finite. get_lr: NaN for a NULL or freed opt. */
jag_status jag_optim_set_lr(jag_optimizer *opt, double lr);
double jag_optim_get_lr(const jag_optimizer *opt);
/* The number of parameters, -1 for a NULL or freed opt. */
int jag_optim_num_params(const jag_optimizer *opt);
/* Free the optimizer and its state, and give back its references on the
 * parameters (NULL: JAG_OK). A second free is JAG_EINVAL while its memory
 * is kept (as generators). */
jag_status jag_optim_free(jag_optimizer *opt);

/* Checkpoints. jag_optim_state: a NEW reference to the live state tensor
 * `name` of parameter param_index (writes through it change the
 * optimizer's state), or *out = NULL before that parameter's first step.
 * Names: SGD "momentum_buffer"; Adam/AdamW "exp_avg", "exp_avg_sq" and,
 * with amsgrad, "max_exp_avg_sq". jag_optim_set_state copies `value` (the
 * parameter's shape and dtype) into a new state tensor that replaces the
 * old one. Step counts: the number of steps parameter param_index has
 * taken (Adam's bias corrections read it). Errors: JAG_ERANGE for an index
 * outside [0, n), JAG_EINVAL for a name this optimizer has not or a negative
 * step, JAG_EDTYPE / JAG_ESHAPE for a value unlike its parameter. */
jag_status jag_optim_state(const jag_optimizer *opt, int param_index, const char *name, jag_tensor **out);
jag_status jag_optim_set_state(jag_optimizer *opt, int param_index, const char *name, const jag_tensor *value);
jag_status jag_optim_step_count(const jag_optimizer *opt, int param_index, int64_t *out);
jag_status jag_optim_set_step_count(jag_optimizer *opt, int param_index, int64_t step);

/* Checkpoint files: everything a C program needs to resume training in one
 * safetensors file (see "Files: safetensors"). jag_optim_save writes
 * parameter i under param_names[i] (param_names NULL: "param.<i>"), each
 * state tensor that exists as "optim.state.<i>.<name>" (the names above),
 * the caller's metadata pairs (as jag_save's) and, under the metadata key
 * JAG_OPTIMIZER_KEY, a JSON description:
 *   {"kind": "sgd" | "adam" | "adamw", "lr": "<%.17g>", ... the other
 *    hyperparameters of jag_optim_*_new by their argument names (doubles as
 *    strings of 17 significant digits, so that they read back exactly;
 *    amsgrad, nesterov as true/false) ...,
 *    "params": [{"name": "<param_names[i]>", "step": <step count>}, ...]}
 * The optimizer is not changed. Errors: JAG_EINVAL for a NULL or freed
 * opt, NULL path or a NULL param_names[i]; jag_save's errors (duplicate or
 * empty names, a metadata key starting with "jag.", JAG_ESTATE when the
 * file cannot be written: an existing file is then left as it was).
 *
 * jag_optim_load restores into `opt`, from a set loaded from such a file
 * (jag_load), the parameters' values (copied into opt's parameters, their
 * versions bumped), the state (copied: the set is not referenced
 * afterwards), the step counts and the hyperparameters (lr, betas, ...,
 * amsgrad, nesterov: the saved ones replace opt's). opt must be of the saved
 * kind (SGD / Adam / AdamW) over as many parameters, parameter i with the
 * dtype and shape of the saved one. So a program resumes by loading the
 * file, building its parameters (from the set's tensors or anew), making an
 * optimizer of the same kind over them and calling jag_optim_load; its
 * next steps are those the saved optimizer would have taken, bit for bit.
 * The set's other tensors and metadata are ignored. Errors (opt is left
 * exactly as it was): JAG_EINVAL for a NULL or freed argument, a set without
 * JAG_OPTIMIZER_KEY or whose description is malformed (a missing field,
 * a hyperparameter jag_optim_*_new would refuse, a negative step), another
 * kind of optimizer or number of parameters, a tensor missing from the set
 * (a parameter, or the state of a parameter that has taken steps), a
 * read-only parameter of opt; JAG_EDTYPE / JAG_ESHAPE for a saved tensor
 * whose dtype / shape differs from opt's parameter (the message names the
 * tensor and the parameter); JAG_ENOMEM. */
typedef struct jag_tensor_set jag_tensor_set;
jag_status jag_optim_save(const jag_optimizer *opt, const char *path, const char *const *param_names,
                          const char *const *metadata, int n_metadata);
jag_status jag_optim_load(jag_optimizer *opt, const jag_tensor_set *set);

/* torch.nn.utils.clip_grad_norm_: the norm_type-norm of all the gradients
 * of params[0..n) together (params without a gradient count for nothing),
 * computed in double in one pass over each gradient, into *total_norm (may
 * be NULL); norm_type is any p > 0 or INFINITY (max |g|). When
 * max_norm / (total + 1e-6) is below 1 (or NaN), every gradient is
 * multiplied by it (never when max_norm is +INFINITY: then the call only
 * measures): in place (its version bumped) when only its leaf holds
 * it, else the leaf's .grad is replaced by a scaled copy, so that no other
 * tensor sharing its memory changes. Not while a jag_backward accumulates
 * into the same parameters. Errors: JAG_EINVAL (norm_type <= 0 or NaN,
 * max_norm NaN, a released param), JAG_ENOTIMPL for a nested gradient,
 * JAG_EDTYPE for a non-float one; nothing is changed. */
jag_status jag_clip_grad_norm(jag_tensor *const *params, int n, double max_norm, double norm_type,
                              double *total_norm);

/* ------------------------------------------------------------------------ */
/* Files: safetensors                                                        */
/* ------------------------------------------------------------------------ */

/* jag reads and writes the safetensors format, so files interoperate with
 * the `safetensors` Python package in both directions: an 8-byte
 * little-endian header length N, N bytes of JSON header
 *     {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
 *      ..., "__metadata__": {"key": "value", ...}}
 * padded with spaces to a multiple of 8, then the raw little-endian data of
 * every tensor, back to back. dtypes map to F32, F64, I32, I64 and BOOL; a
 * file with any other dtype (F16, U8, ...) is refused with JAG_EDTYPE.
 *
 * A nested tensor `x` is stored as its inner plain tensors plus one metadata
 * entry naming its layout:
 *   jagged:  x.values, x.offsets (int64), x.lengths (int64, only with holes),
 *            "jag.nested.x": "{\"layout\":\"jagged\",\"ragged_idx\":1}"
 *   strided: x.buffer, x.nested_sizes, x.nested_strides, x.storage_offsets,
 *            "jag.nested.x": "{\"layout\":\"strided\"}"
 * and loads back as the same nested tensor, its inner tensors validated as
 * user input. Metadata keys starting with "jag." are jag's own.
 *
 * Loading never trusts the file: a malformed one (truncated, header length
 * past the end, invalid or too deeply nested JSON, unknown dtypes, shapes
 * whose size overflows, data offsets out of order, overlapping, leaving
 * holes, past the end or not matching dtype x shape, duplicate names, nested
 * metadata that does not fit its inner tensors) fails with a message naming
 * jag_load, the tensor or field, what was expected and what came; nothing is
 * read outside the file and no allocation is sized by an unchecked number.
 * Files are read as they are when loaded: truncating a file that is mapped
 * (JAG_LOAD_MMAP) while its tensors live is the caller's race. */

/* Load flags. */
#define JAG_LOAD_COPY 0u        /* tensors own copies of their data */
#define JAG_LOAD_MMAP (1u << 0) /* tensors view a private mapping of the file */

/* Save tensors[0..n) under names[0..n) to `path`, with optional string
 * metadata as pairs metadata[2k] (key), metadata[2k+1] (value), k <
 * n_metadata (metadata may be NULL when n_metadata is 0). Tensors may be
 * dense (any layout in memory: saved as contiguous data) or nested (jagged
 * or strided, see above). Data is written largest element size first (as
 * the safetensors package does), in the given order within one size, so
 * every tensor in the file is aligned for mmap. The file is written to a
 * temporary file beside `path` and renamed over it, so a failed call leaves
 * `path` as it was. Borrows everything.
 * Errors: JAG_EINVAL (n < 1 or NULL arguments, empty or duplicate names, a
 * name that is not valid UTF-8 or is "__metadata__", a nested tensor's inner
 * name clashing with another name, a metadata key starting with "jag.", a
 * meta tensor), JAG_ENOTIMPL (a subclass other than nested), JAG_ESTATE
 * (the file cannot be written; the message has the system's reason). */
jag_status jag_save(const char *path, const char *const *names, jag_tensor *const *tensors, int n,
                    const char *const *metadata, int n_metadata);

/* Described files. Besides "jag.nested.*", jag owns two metadata keys, each
 * holding a JSON document that says what the file's tensors make up:
 *   JAG_OBJECT_KEY     the Python package's jag.save of an object (nested
 *                      dicts, lists and tuples of tensors, numbers, strings,
 *                      None): the object with each tensor replaced by the
 *                      name it has in the file;
 *   JAG_OPTIMIZER_KEY  jag_optim_save's optimizer: its kind, its
 *                      hyperparameters and, per parameter, its name and
 *                      step count (see "Optimizers").
 * Other readers see them as ordinary string metadata. */
#define JAG_OBJECT_KEY "jag.object"
#define JAG_OPTIMIZER_KEY "jag.optimizer"

/* As jag_save, plus the metadata entry `key` (JAG_OBJECT_KEY or
 * JAG_OPTIMIZER_KEY) = `description`, a JSON text (RFC 8259, checked with
 * the reader jag_load uses). n may be 0 here (names and tensors may then
 * be NULL): a file may hold a description alone. Borrows everything.
 * Errors: as jag_save; JAG_EINVAL for another key or a description that is
 * NULL or not valid JSON (the message gives the byte). */
jag_status jag_save_described(const char *path, const char *const *names, jag_tensor *const *tensors, int n,
                              const char *const *metadata, int n_metadata, const char *key, const char *description);

/* A loaded set of named tensors (and the file's other metadata). */
typedef struct jag_tensor_set jag_tensor_set;

/* Load every tensor of the safetensors file at `path` into a new set (*out,
 * owned by the caller: jag_tensor_set_free). flags: JAG_LOAD_COPY, or
 * JAG_LOAD_MMAP for zero-copy tensors over a private (copy-on-write) mapping
 * of the file: those tensors are read-only (jag_is_read_only; in-place jag
 * ops refuse them) and a write that reaches their memory anyway stays in
 * this process, never in the file. The mapping lives as long as any tensor
 * (or view) made from it. A tensor whose data is not aligned for its dtype
 * in the file is copied even with JAG_LOAD_MMAP; bool bytes other than 0
 * and 1 are read as true (1). Nested tensors appear under their own name
 * (their inner x.values, ... are not listed separately). Entries are sorted
 * by name. Errors: see above (JAG_EINVAL, JAG_EDTYPE, JAG_EOVERFLOW,
 * JAG_ENOTIMPL for a nested layout jag lacks), JAG_ESTATE (the file cannot
 * be opened or mapped, or is not a regular file: a FIFO, device or
 * directory is refused without blocking), JAG_ENOMEM. On failure *out is
 * untouched. Reading the JSON header takes at most 4 bytes of memory per
 * byte of header (a header that is not an object is refused at its first
 * byte). */
jag_status jag_load(const char *path, unsigned flags, jag_tensor_set **out);
/* As jag_load on the file's bytes data[0..len) in memory (copied: flags
 * must be JAG_LOAD_COPY; the caller's buffer is not kept). */
jag_status jag_load_buffer(const void *data, size_t len, unsigned flags, jag_tensor_set **out);

/* The number of entries, and entry i's name (valid while the set lives) and
 * tensor (BORROWED: valid while the set lives; jag_retain it to keep it
 * longer). NULL for i out of range. The set owns its tensors: an open scope
 * records none of them. */
int jag_tensor_set_count(const jag_tensor_set *set);
const char *jag_tensor_set_name(const jag_tensor_set *set, int i);
jag_tensor *jag_tensor_set_get(const jag_tensor_set *set, int i);
/* The tensor named `name` (BORROWED), or NULL. */
jag_tensor *jag_tensor_set_find(const jag_tensor_set *set, const char *name);
/* The file's __metadata__ entries other than jag's own ("jag.nested.*",
 * JAG_OBJECT_KEY, JAG_OPTIMIZER_KEY), in file order. */
int jag_tensor_set_metadata_count(const jag_tensor_set *set);
const char *jag_tensor_set_metadata_key(const jag_tensor_set *set, int i);
const char *jag_tensor_set_metadata_value(const jag_tensor_set *set, int i);
/* The value of the described-file key `key` (JAG_OBJECT_KEY or
 * JAG_OPTIMIZER_KEY) in the file (valid while the set lives), or NULL when
 * the file has none (or for another key). It comes from the file as it is:
 * its reader checks it (it is valid UTF-8; jag_load does not parse it). */
const char *jag_tensor_set_description(const jag_tensor_set *set, const char *key);
/* Release the set's references (tensors retained by the caller live on).
 * NULL is ignored (JAG_OK). Freeing a set twice is JAG_EINVAL rather than a
 * crash while its header is kept (the last 32 freed sets and generators);
 * the accessors read a freed set as empty. */
jag_status jag_tensor_set_free(jag_tensor_set *set);

/* True when jag refuses to write into t's memory: tensors loaded with
 * JAG_LOAD_MMAP and their views, and the offsets, lengths, row ids and
 * size tables of nested tensors and every view of their storage. In-place
 * ops refuse such a tensor, and the Python package exports it read-only
 * (buffer protocol, __array_interface__, numpy(), DLPack). */
bool jag_is_read_only(const jag_tensor *t);

/* ------------------------------------------------------------------------ */
/* Distributed training (MPI)                                                */
/* ------------------------------------------------------------------------ */

/*
 * Data-parallel training over MPI: a process group, collectives
 * on dense and nested tensors, and gradient averaging for data-parallel
 * training (DDP).
 *
 * The conventions above hold here (statuses and jag_last_error(), ownership of
 * `out` tensors, borrowed arguments). On top of them:
 *
 * Availability. These functions exist in every libjag. A libjag built without
 *           MPI (CMake says so when it configures) has jag_dist_is_available()
 *           false, and every other function below fails with JAG_ENOTIMPL
 *           ("jag was built without MPI").
 *
 * Collectives. Every rank of the group calls the same collective in the same
 *           order (as MPI). Each call first exchanges a small header (one
 *           MPI_Allreduce of a few int64: whether this rank accepted its
 *           arguments, the dtype, the element count, the op, ...), so that
 *           a rank refusing its arguments, or ranks that disagree on dtype
 *           or size, make EVERY rank return an error (JAG_EINVAL,
 *           JAG_EDTYPE, JAG_ESHAPE naming the function, the quantity and
 *           the smallest and largest values among ranks) instead of a hang
 *           or a wrong result. Ranks that call different collectives, or
 *           one that never calls, cannot be detected: MPI blocks.
 *           A tensor written in place keeps its value when any rank fails
 *           before the payload moves (the header is exchanged before).
 *
 * Dtypes.   float32 and float64 (every op); int32 and int64 (sum, max, min;
 *           not avg). bool is refused (JAG_EDTYPE). jag has no bfloat16 or
 *           float16 dtype yet, so neither is offered here.
 *
 * Nested.   A nested tensor is reduced and broadcast on its packed values
 *           (a jagged tensor's values, holes included; a strided one's
 *           buffer): ranks must agree on the component count and the
 *           element count. jag_dist_all_gather gathers whole components
 *           with their lengths (ranks may hold different numbers of
 *           components of different lengths).
 *
 * Failures of the job. jag sets MPI_ERRORS_RETURN on its communicator, so an
 *           error MPI reports becomes JAG_EINTERNAL with MPI's own message.
 *           A rank that dies (crash, kill, exit without jag_dist_finalize)
 *           is not such an error: Open MPI's mpirun notices the dead process
 *           and terminates every other rank of the job (they print "mpirun
 *           noticed that process rank N ... exited"), whatever the error
 *           handler; without mpirun, the survivors block in their next
 *           collective. jag sets no timeout of its own: a collective waits
 *           as long as MPI does.
 *
 * Threads.  MPI is initialised with MPI_THREAD_SERIALIZED: call these
 *           functions from one thread at a time. jag's OpenMP threads never
 *           call MPI.
 */

/* ------------------------------------------------------------------------ */
/* The process group                                                         */
/* ------------------------------------------------------------------------ */

/* True when this libjag was built with MPI. */
bool jag_dist_is_available(void);

/* Join the job that mpirun (or another MPI launcher) started: initialises
 * MPI if nobody has (then jag_dist_finalize finalises it) and makes jag's
 * group a duplicate of MPI_COMM_WORLD. A process run without a launcher is
 * a group of one. Errors: JAG_ESTATE when already initialised (call
 * jag_dist_finalize first), JAG_EINTERNAL when MPI fails to start,
 * JAG_ENOTIMPL without MPI. */
jag_status jag_dist_init(void);
/* Use the caller's communicator instead: `mpi_comm` points at an MPI_Comm
 * (a `MPI_Comm *`, typed void * so that this header needs no mpi.h) of an
 * MPI the caller has initialised. jag duplicates it (the caller may free
 * its own) and never finalises MPI. Errors: JAG_EINVAL for NULL,
 * JAG_ESTATE when MPI is not initialised or jag already is. */
jag_status jag_dist_init_comm(const void *mpi_comm);
/* Free jag's communicator; finalise MPI if jag_dist_init initialised it.
 * Every rank calls it. Not initialised: JAG_OK (nothing to do). */
jag_status jag_dist_finalize(void);
/* Whether jag_dist_init / jag_dist_init_comm succeeded and no finalize
 * since. */
bool jag_dist_is_initialized(void);
/* This process's rank in [0, world size), and the number of ranks; -1 when
 * not initialised. */
int jag_dist_rank(void);
int jag_dist_world_size(void);
/* Block until every rank has called it. Errors: JAG_ESTATE when not
 * initialised. */
jag_status jag_dist_barrier(void);

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */
/* ------------------------------------------------------------------------ */

typedef enum jag_reduce_op {
    JAG_REDUCE_SUM,
    JAG_REDUCE_AVG, /* the sum divided by the world size (floating dtypes) */
    JAG_REDUCE_MAX,
    JAG_REDUCE_MIN,
    JAG_REDUCE_OP_COUNT
} jag_reduce_op;

/* "sum", "avg", "max", "min"; "invalid" otherwise. */
const char *jag_reduce_op_name(jag_reduce_op op);

/* Reduce `t` elementwise over all ranks, in place (torch.distributed.
 * all_reduce): every rank ends with the same values. `t` dense or nested
 * (its packed values), writable (not read-only); a non-contiguous `t` is
 * reduced through a contiguous copy and written back. max/min of a NaN
 * follow MPI's comparison (not NaN-propagating as torch.maximum).
 * Dtypes: float32, float64, int32, int64, float16 and bfloat16 (MPI has no
 * half types: jag's reductions add or compare in float32 and round each
 * partial result to the half type, as NCCL reduces half buffers).
 * Errors: JAG_EINVAL (NULL or released t, read-only t, bad op, not
 * initialised is JAG_ESTATE), JAG_EDTYPE (bool; avg on integers; dtypes
 * differ between ranks), JAG_ESHAPE (element counts or component counts
 * differ between ranks). On error t is unchanged. */
jag_status jag_dist_all_reduce(jag_tensor *t, jag_reduce_op op);

/* Copy rank `src`'s `t` into every other rank's `t`, in place
 * (torch.distributed.broadcast). Every rank passes a tensor of the same
 * dtype and element count (nested: the same component count). Errors: as
 * jag_dist_all_reduce; JAG_ERANGE for src outside [0, world size) or
 * ranks disagreeing on src. */
jag_status jag_dist_broadcast(jag_tensor *t, int src);

/* Every rank's `t`, on every rank: outs[r] (r < world size <= cap) is a
 * NEW reference holding rank r's tensor (outs[rank] a copy of t).
 * Dense: every rank's t has the same dtype and shape (as torch's
 * all_gather); the outputs are views into one shared buffer.
 * Nested (jagged, ragged dim 1, no holes): ranks agree on the dtype and the
 * sizes after the ragged dim; each may hold any number of components of
 * any lengths; outs[r] is a jagged nested tensor with rank r's components
 * and lengths. At most INT_MAX elements per rank (MPI's counts).
 * Errors: JAG_EINVAL (cap < world size, NULL outs), JAG_ESHAPE / JAG_EDTYPE
 * (ranks disagree), JAG_ENOTIMPL (a strided nested tensor, holes, a
 * transposed ragged dim). On error no outs[r] is written. */
jag_status jag_dist_all_gather(const jag_tensor *t, jag_tensor **outs, int cap);

/* Reduce `input` elementwise over all ranks and give rank r the r-th of
 * world size equal slices along dim 0 (torch.distributed.
 * reduce_scatter_tensor): *out is a NEW contiguous tensor of shape
 * (input.size(0) / world size, input.size(1), ...). Dense tensors only.
 * Errors: JAG_ESHAPE (input.size(0) not divisible by the world size; shapes
 * differ between ranks; a 0-d input), JAG_EDTYPE as jag_dist_all_reduce,
 * JAG_ENOTIMPL for a nested input. */
jag_status jag_dist_reduce_scatter(const jag_tensor *input, jag_reduce_op op, jag_tensor **out);

/* ------------------------------------------------------------------------ */
/* Data-parallel training (torch's DistributedDataParallel, in C)            */
/* ------------------------------------------------------------------------ */

/* Gradient averaging over a fixed list of parameters. Every rank runs the
 * same model on its own part of the global batch; after backward,
 * jag_ddp_sync_grads leaves every rank with the average of the ranks'
 * gradients, so identical optimizer steps keep the replicas identical.
 * For the averaged gradient to be the gradient of the global batch's mean
 * loss, scale each rank's loss by (its share of the global batch) * world
 * size when ranks hold unequal shares. */
typedef struct jag_ddp jag_ddp;

/* A DDP over params[0..n) (plain contiguous float leaves, writable; each
 * once; the same list, in the same order, on every rank). Collective:
 * broadcasts rank 0's parameter values into every rank's parameters (in
 * place), so the replicas start equal. Gradients are averaged in buckets of
 * at most `bucket_bytes` bytes (0: 25 MiB, torch's bucket_cap_mb=25), made
 * from the parameters in reverse order (the order backward finishes them)
 * and never mixing dtypes; a parameter larger than a bucket gets one of its
 * own. Parameters are float32, float64, float16 or bfloat16: a half bucket
 * is all-reduced in its dtype (each pairwise sum computed in float32 and
 * rounded to the dtype, as torch's DDP reduces half gradients in their
 * dtype), and the average is the sum / world size in float32, rounded once.
 * The DDP holds a reference on each parameter until jag_ddp_free.
 *
 * Overlap with backward (torch's reducer): the DDP registers a post-
 * accumulate-grad hook on every parameter that requires grad. During
 * jag_backward, once every such parameter of a bucket has its gradient, the
 * bucket is packed and its MPI_Iallreduce started while backward goes on;
 * buckets start in bucket order on every rank (a complete bucket waits for
 * the ones before it). When the last bucket has started, the hook waits for
 * all of them and writes the averaged gradients, so after backward returns
 * the gradients are averaged: nothing more to call. jag_backward must then
 * run on the thread that uses MPI (see Threads).
 * Parameters that get no gradient in a step (as torch's
 * find_unused_parameters=False, jag does not search the graph for them):
 * their buckets cannot complete during backward; call jag_ddp_sync_grads
 * after such a backward to start them and write the averages (a parameter
 * with no gradient on some rank counts as zeros there; one with a gradient
 * on no rank keeps none). Every rank must do the same: a rank whose
 * backward averaged everything while another still waits for a sync
 * blocks that rank in MPI.
 * Gradient accumulation: jag_ddp_set_require_sync(ddp, false) (torch's
 * no_sync) makes the hooks do nothing; the next backward with it true
 * averages the accumulated gradients (or jag_ddp_sync_grads does).
 * Errors: JAG_EINVAL (n < 1, NULL or repeated parameter, nested or
 * non-contiguous or read-only parameter), JAG_EDTYPE (non-float),
 * JAG_ESHAPE (ranks disagree on the parameter count, shapes or dtypes),
 * JAG_ESTATE (not initialised), JAG_ENOMEM. */
jag_status jag_ddp_new(jag_tensor *const *params, int n, size_t bucket_bytes, jag_ddp **out);
/* Average the gradients over the ranks, explicitly. Collective. After a
 * backward whose hooks averaged every bucket it returns at once (JAG_OK);
 * after one that left buckets waiting (parameters without a gradient) it
 * starts those and finishes the step; otherwise (no backward since the
 * last averaging, gradients set by hand, or accumulated with require_sync
 * off) it averages every gradient. A parameter with no
 * gradient on some ranks counts as zeros there; one with a gradient on no
 * rank keeps none. Each bucket is packed and its MPI_Iallreduce started
 * before the next is packed; the averaged values become each parameter's
 * new gradient (a new tensor: tensors that held the old gradient keep
 * their values). Errors: JAG_EDTYPE / JAG_ESHAPE (a gradient unlike its
 * parameter, on any rank), JAG_EINVAL (NULL ddp); on error no gradient
 * changes. */
jag_status jag_ddp_sync_grads(jag_ddp *ddp);
/* Whether the hooks average gradients during backward (true, the
 * default) or leave them to accumulate locally (false: torch's no_sync).
 * Local: no communication. Errors: JAG_EINVAL (NULL or freed ddp). */
jag_status jag_ddp_set_require_sync(jag_ddp *ddp, bool require_sync);
/* The number of buckets and the parameters of bucket `b` (indices into the
 * params given to jag_ddp_new, in bucket order; *n_out of them) — for
 * tests and tuning. Errors: JAG_ERANGE for b outside [0, buckets). */
int jag_ddp_num_buckets(const jag_ddp *ddp);
jag_status jag_ddp_bucket_params(const jag_ddp *ddp, int b, const int **indices, int *n_out);
/* Give back the parameters' references and free the DDP (NULL: JAG_OK). */
jag_status jag_ddp_free(jag_ddp *ddp);

#ifdef __cplusplus
}
#endif
#endif /* JAG_H */
