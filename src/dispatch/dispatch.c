/* dispatch.c — the op table and the dispatcher: key choice, then the
 * subclass handler, or META + allocation + kernel. */
#include "dispatch.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */
#include "../autograd/autograd.h"

#include <stdio.h>

jag_op_info jag__ops[JAG_MAX_OPS] = {
#define JAG_OP(name, n_in, n_out, tags, meta, cpu, schema, doc) \
    {#name, "jag_" #name, n_in, n_out, tags, meta, cpu, NULL, schema, doc},
#include "ops.def"
#undef JAG_OP
};
atomic_int jag__n_ops = JAG_OP_BUILTIN_COUNT;

#define JAG_MAX_OUTS 4

/* The keys below AUTOGRAD (which jag__dispatch checks first). */
typedef enum { KEY_CPU, KEY_META, KEY_SUBCLASS } dispatch_key;

/* A released tensor among the arguments (a header marked by jag_release):
 * the error naming it. The key's loop below finds one at the cost of a
 * compare per tensor it reads anyway; the trace key asks first. */
static jag_status check_handles(const jag_op_info *info, const jag_value *args, int nargs) {
    char arg[32];
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == JAG_VAL_TENSOR && args[i].u.t && !jag__tensor_live(args[i].u.t)) {
            snprintf(arg, sizeof arg, "%d", i);
            return jag__check_handle(info->api_name, arg, args[i].u.t);
        }
        if (args[i].kind == JAG_VAL_TENSORS && args[i].u.tensors.v)
            for (int j = 0; j < args[i].u.tensors.n; j++) {
                const jag_tensor *t = args[i].u.tensors.v[j];
                if (t && !jag__tensor_live(t)) {
                    snprintf(arg, sizeof arg, "%d[%d]", i, j);
                    return jag__check_handle(info->api_name, arg, t);
                }
            }
    }
    return JAG_OK;
}

/* The key of a call: SUBCLASS when a tensor argument is a wrapper subclass
 * (the first in argument order decides the class), else META when every
 * tensor is a meta tensor, CPU when every one has data. */
static jag_status compute_key(const jag_op_info *info, const jag_value *args, int nargs, dispatch_key *key,
                              const jag_subclass **cls) {
    int n_meta = 0, n_data = 0;
    *cls = NULL;
    for (int i = 0; i < nargs; i++) {
        int n = 0;
        const jag_tensor *const *ts = NULL;
        if (args[i].kind == JAG_VAL_TENSOR) {
            ts = &args[i].u.t, n = 1;
        } else if (args[i].kind == JAG_VAL_TENSORS) {
            ts = (const jag_tensor *const *)args[i].u.tensors.v, n = args[i].u.tensors.n;
            if (n > 0 && !ts) return jag__error(JAG_EINVAL, "%s: argument %d is a NULL tensor list", info->api_name, i);
        }
        for (int j = 0; j < n; j++) {
            const jag_tensor *t = ts[j];
            if (!t && args[i].kind == JAG_VAL_TENSORS)
                return jag__error(JAG_EINVAL, "%s: tensor %d of argument %d is NULL", info->api_name, j, i);
            if (!t) return jag__error(JAG_EINVAL, "%s: argument %d is a NULL tensor", info->api_name, i);
            if (t->magic != JAG_TENSOR_LIVE) return check_handles(info, args, nargs); /* released */
            if (t->subclass) {
                if (!*cls) *cls = t->subclass;
            } else {
                jag__is_meta(t) ? n_meta++ : n_data++;
            }
        }
    }
    if (*cls) {
        *key = KEY_SUBCLASS;
        return JAG_OK;
    }
    if (n_meta && n_data)
        return jag__error(JAG_EINVAL, "%s: mixes meta tensors (no data) with tensors that have data", info->api_name);
    *key = n_meta ? KEY_META : KEY_CPU;
    return JAG_OK;
}

static jag_status check_call(jag_op_id op, const jag_value *args, int nargs) {
    if (!jag__op_valid(op)) return jag__error(JAG_EINVAL, "jag_op_call: op id %d is not a defined op", op);
    const jag_op_info *info = &jag__ops[op];
    if (nargs != info->n_in)
        return jag__error(JAG_EINVAL, "%s: takes %d arguments, got %d", info->api_name, info->n_in, nargs);
    if (nargs > 0 && !args) return jag__error(JAG_EINVAL, "%s: argument list is NULL", info->api_name);
    if (info->custom) return jag__custom_check_args(info, args, nargs);
    const jag_schema *sc = jag__op_schema(op);
    if (!sc) return jag__builtin_schemas_check();
    for (int i = 0; i < nargs; i++)
        if (!jag__arg_fits(sc->types[i], args[i].kind))
            return jag__error(JAG_EINVAL, "%s: argument '%s' is %s, expected %s", info->api_name, sc->arg_names[i],
                              args[i].kind == JAG_VAL_NONE ? "NULL" : jag__kind_name(args[i].kind),
                              jag__arg_type_phrase(sc->types[i]));
    return JAG_OK;
}

/* ---- half dtypes -------------------------------------------------------- */

/* float16 and bfloat16 tensors keep their bits through the ops that only
 * move or fill elements (views, composites, which dispatch their parts,
 * clone, to_dtype, cat, index_select, gather, embedding, full, full_like;
 * custom ops make their own outputs). Every other op computes in float32:
 * its half operands are widened (exactly), the float32 kernel runs, and
 * its float32 results are rounded once to the half dtype, as PyTorch's CPU
 * kernels compute half tensors; bfloat16 matrix products run their own
 * kernel (computes_bf16), with the same contract. The other kernels know
 * float32 and float64 only: code that runs a kernel below the dispatcher (a compiled
 * program's direct path, fused regions) leaves half operands to the
 * dispatcher (program.c, fuse.c). */
static bool keeps_half(jag_op_id op) {
    if (op >= JAG_OP_BUILTIN_COUNT) return true;
    switch (op) {
    case JAG_OP_clone:
    case JAG_OP_to_dtype:
    case JAG_OP_cat:
    case JAG_OP_index_select:
    case JAG_OP_gather:
    case JAG_OP_embedding:
    case JAG_OP_full:
    case JAG_OP_full_like: return true;
    default: return (jag__ops[op].tags & (JAG_TAG_VIEW | JAG_TAG_COMPOSITE)) != 0;
    }
}

/* The tensors of argument i (one, a list, or none), through *ts and *n. */
static void arg_tensors(const jag_value *a, const jag_tensor *const **ts, int *n) {
    *ts = NULL, *n = 0;
    if (a->kind == JAG_VAL_TENSOR && a->u.t) *ts = &a->u.t, *n = 1;
    else if (a->kind == JAG_VAL_TENSORS && a->u.tensors.v)
        *ts = (const jag_tensor *const *)a->u.tensors.v, *n = a->u.tensors.n;
}

/* Ops whose kernels compute bfloat16 themselves when every tensor operand
 * is bfloat16: the matrix products (src/cpu/gemm_dnnl.c: float32
 * accumulation, one rounding). Mixed operands go to run_in_float32, whose
 * META call refuses them (JAG_EDTYPE); float16 is widened there. */
static bool computes_bf16(jag_op_id op, const jag_value *args, int nargs) {
    if (op != JAG_OP_mm && op != JAG_OP_bmm && op != JAG_OP_linear) return false;
    for (int i = 0; i < nargs; i++) {
        const jag_tensor *const *ts;
        int n;
        arg_tensors(&args[i], &ts, &n);
        for (int j = 0; j < n; j++)
            if (ts[j] && ts[j]->dtype != JAG_BFLOAT16) return false;
    }
    return true;
}

/* The first half tensor among the arguments: its argument's index, or -1. */
static int first_half_arg(const jag_value *args, int nargs, jag_dtype *dtype) {
    for (int i = 0; i < nargs; i++) {
        const jag_tensor *const *ts;
        int n;
        arg_tensors(&args[i], &ts, &n);
        for (int j = 0; j < n; j++)
            if (ts[j] && jag_dtype_is_half(ts[j]->dtype)) {
                *dtype = ts[j]->dtype;
                return i;
            }
    }
    return -1;
}

/* META, allocation of the outputs from its specs, and (with data) the
 * kernel. */
static jag_status run_meta_and_kernel(jag_op_id op, bool meta, const jag_value *args, int nargs, jag_tensor **made) {
    const jag_op_info *info = &jag__ops[op];
    jag_spec specs[JAG_MAX_OUTS];
    jag_status st = info->meta(info->api_name, args, nargs, specs);
    for (int i = 0; st == JAG_OK && i < info->n_out; i++) {
        made[i] = jag__tensor_from_spec(info->api_name, &specs[i], meta);
        if (!made[i]) st = jag_last_status();
    }
    if (st == JAG_OK && !meta) st = info->cpu(info->api_name, args, nargs, made);
    return st;
}

/* t converted to `dtype` (contiguous; a meta tensor stays one), or NULL
 * with the error set. */
static jag_tensor *converted(const char *name, const jag_tensor *t, jag_dtype dtype, bool meta) {
    jag_spec s;
    jag__spec_set(&s, dtype, t->sizes, t->ndim);
    jag_tensor *c = jag__tensor_from_spec(name, &s, meta);
    if (c && !meta) jag__copy_into(c, t);
    return c;
}

/* An op on half operands, computed in float32: the op's META function
 * checks the call as it is (dtypes that must agree, ...) and says the
 * result dtypes; the half operands are widened, the op runs, and each
 * result whose dtype is a half one is rounded to it from float32. */
static jag_status run_in_float32(jag_op_id op, bool meta, const jag_value *args, int nargs, jag_tensor **made) {
    const jag_op_info *info = &jag__ops[op];
    jag_spec want[JAG_MAX_OUTS];
    jag_status st = info->meta(info->api_name, args, nargs, want);
    if (st) return st;
    int n_tensors = 0;
    for (int i = 0; i < nargs; i++) {
        const jag_tensor *const *ts;
        int n;
        arg_tensors(&args[i], &ts, &n);
        n_tensors += n;
    }
    /* wide[]: the arguments, with half tensors replaced by float32 copies
     * (owned[] keeps them for release; list arguments get new arrays) */
    jag_value *wide = malloc((size_t)nargs * sizeof *wide);
    jag_tensor **owned = calloc((size_t)n_tensors + 1, sizeof *owned);
    jag_tensor **lists = calloc((size_t)n_tensors + 1, sizeof *lists);
    if (!wide || !owned || !lists) {
        free(wide), free(owned), free(lists);
        return jag__error(JAG_ENOMEM, "%s: out of memory widening half operands", info->api_name);
    }
    int n_owned = 0, n_listed = 0;
    for (int i = 0; st == JAG_OK && i < nargs; i++) {
        wide[i] = args[i];
        const jag_tensor *const *ts;
        int n;
        arg_tensors(&args[i], &ts, &n);
        if (args[i].kind == JAG_VAL_TENSORS && n > 0) {
            wide[i].u.tensors.v = &lists[n_listed];
            n_listed += n;
        }
        for (int j = 0; st == JAG_OK && j < n; j++) {
            jag_tensor *t = (jag_tensor *)ts[j];
            if (t && jag_dtype_is_half(t->dtype)) {
                if (!(t = converted(info->api_name, t, JAG_FLOAT32, meta))) st = jag_last_status();
                else owned[n_owned++] = t;
            }
            if (args[i].kind == JAG_VAL_TENSORS) lists[n_listed - n + j] = t;
            else wide[i].u.t = t;
        }
    }
    if (st == JAG_OK) st = run_meta_and_kernel(op, meta, wide, nargs, made);
    for (int i = 0; i < n_owned; i++) jag_release(owned[i]);
    free(wide), free(owned), free(lists);
    for (int i = 0; st == JAG_OK && i < info->n_out; i++) {
        if (!jag_dtype_is_half(want[i].dtype) || made[i]->dtype == want[i].dtype) continue;
        jag_tensor *narrow = converted(info->api_name, made[i], want[i].dtype, meta);
        if (!narrow) st = jag_last_status();
        else jag_release(made[i]), made[i] = narrow;
    }
    return st;
}

static jag_status dispatch_below_trace(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs);

jag_status jag__dispatch(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    jag_status st = check_call(op, args, nargs);
    if (st) return st;
    /* TRACE: above every other key, while this thread records a trace */
    if (jag__trace_current && jag__tracing()) {
        if ((st = check_handles(&jag__ops[op], args, nargs))) return st;
        return jag__trace_dispatch(op, args, nargs, outs);
    }
    return dispatch_below_trace(op, args, nargs, outs);
}

jag_status jag__dispatch_untraced(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    jag_status st = check_call(op, args, nargs);
    return st ? st : dispatch_below_trace(op, args, nargs, outs);
}

static jag_status dispatch_below_trace(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    jag_status st;
    /* AUTOGRAD: above the backend keys */
    if (jag__autograd_wanted(args, nargs)) {
        if (info->custom && jag__custom_has_autograd(info)) return jag__custom_run_autograd(info, args, nargs, outs);
        return jag__autograd_dispatch(op, args, nargs, outs);
    }
    dispatch_key key = KEY_CPU;
    const jag_subclass *cls = NULL;
    if ((st = compute_key(info, args, nargs, &key, &cls))) return st;

    jag_tensor *made[JAG_MAX_OUTS] = {0};
    JAG_ASSERT(info->n_out <= JAG_MAX_OUTS);
    if (key == KEY_SUBCLASS) {
        st = jag__subclass_run(cls, op, args, nargs, made);
        if (st == JAG_ENOTIMPL && (info->tags & JAG_TAG_COMPOSITE)) {
            /* the class does not handle it: decompose into ops it may. When
             * a part is not supported either, the class's message is kept:
             * it speaks of the op called, the part's of an op the caller
             * never named. */
            char why[512];
            snprintf(why, sizeof why, "%s", jag_last_error());
            for (int i = 0; i < info->n_out; i++) jag_release(made[i]), made[i] = NULL;
            st = info->cpu(info->api_name, args, nargs, made);
            if (st == JAG_ENOTIMPL) jag__error(JAG_ENOTIMPL, "%s", why);
        }
        for (int i = 0; st == JAG_OK && i < info->n_out; i++)
            if (!made[i])
                st = jag__error(JAG_EINTERNAL, "%s: the %s handler returned no output %d", info->api_name,
                                jag_subclass_name(cls), i);
    } else if (info->custom) {
        st = jag__custom_run(info, key == KEY_META, args, nargs, made);
    } else if (info->tags & (JAG_TAG_VIEW | JAG_TAG_COMPOSITE)) {
        st = info->cpu(info->api_name, args, nargs, made);
    } else {
        jag_dtype half;
        if (!keeps_half(op) && !computes_bf16(op, args, nargs) && first_half_arg(args, nargs, &half) >= 0)
            st = run_in_float32(op, key == KEY_META, args, nargs, made);
        else
            st = run_meta_and_kernel(op, key == KEY_META, args, nargs, made);
    }
    if (st != JAG_OK) {
        for (int i = 0; i < info->n_out; i++) jag_release(made[i]);
        return st;
    }
    for (int i = 0; i < info->n_out; i++) outs[i] = made[i];
    return JAG_OK;
}

/* Whether a call of a built-in op on these arguments reaches
 * run_meta_and_kernel through the full path with nothing else to do: not
 * tracing, the op neither a view nor a composite, and every tensor operand
 * live, plain, with data, not requiring grad and of no half dtype (the
 * keys SUBCLASS / META / AUTOGRAD and the float32 widening would apply). */
static bool plain_call(const jag_op_info *info, const jag_value *args, int nargs) {
    if (jag__trace_current || info->custom || (info->tags & (JAG_TAG_VIEW | JAG_TAG_COMPOSITE))) return false;
    for (int i = 0; i < nargs; i++) {
        const jag_tensor *const *ts;
        int n;
        if (args[i].kind == JAG_VAL_TENSOR) ts = &args[i].u.t, n = 1;
        else if (args[i].kind == JAG_VAL_TENSORS) ts = (const jag_tensor *const *)args[i].u.tensors.v, n = args[i].u.tensors.n;
        else continue;
        if (n > 0 && !ts) return false;
        for (int j = 0; j < n; j++) {
            const jag_tensor *t = ts[j];
            if (!t || t->magic != JAG_TENSOR_LIVE || t->subclass || !t->storage || t->requires_grad ||
                jag_dtype_is_half(t->dtype))
                return false;
        }
    }
    return true;
}

jag_status jag__dispatch_plain(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_op_info *info = &jag__ops[op];
    if (!plain_call(info, args, nargs)) return jag__dispatch(op, args, nargs, outs);
    jag_tensor *made[JAG_MAX_OUTS] = {0};
    JAG_ASSERT(info->n_out <= JAG_MAX_OUTS);
    jag_status st = run_meta_and_kernel(op, false, args, nargs, made);
    if (st != JAG_OK) {
        for (int i = 0; i < info->n_out; i++) jag_release(made[i]);
        return st;
    }
    for (int i = 0; i < info->n_out; i++) outs[i] = made[i];
    return JAG_OK;
}

jag_status jag__dispatch_into(jag_op_id op, const char *name, const jag_value *args, int nargs, jag_tensor *out,
                              bool *done) {
    *done = false;
    jag_status st = check_call(op, args, nargs);
    if (st) return st;
    const jag_op_info *info = &jag__ops[op];
    if (info->custom || info->n_out != 1 || !info->meta || (info->tags & (JAG_TAG_VIEW | JAG_TAG_COMPOSITE)))
        return JAG_OK;
    if (out->subclass || !out->storage || !jag_is_contiguous(out)) return JAG_OK;
    jag_dtype half;
    /* half operands compute in float32, aside (run_in_float32) */
    if (jag_dtype_is_half(out->dtype) || first_half_arg(args, nargs, &half) >= 0) return JAG_OK;
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == JAG_VAL_TENSORS) return JAG_OK;
        if (args[i].kind != JAG_VAL_TENSOR) continue;
        const jag_tensor *t = args[i].u.t;
        if (!t || t->subclass || !t->storage) return JAG_OK;
        /* an operand over out's memory must be out itself, element for
         * element: the kernel reads each element before writing it */
        if (t->storage == out->storage &&
            (t->offset != out->offset || t->ndim != out->ndim ||
             memcmp(t->sizes, out->sizes, (size_t)t->ndim * sizeof *t->sizes) != 0 ||
             memcmp(t->strides, out->strides, (size_t)t->ndim * sizeof *t->strides) != 0))
            return JAG_OK;
    }
    jag_spec spec;
    if ((st = info->meta(name, args, nargs, &spec))) return st;
    if (spec.dtype != out->dtype || spec.ndim != out->ndim ||
        memcmp(spec.sizes, out->sizes, (size_t)spec.ndim * sizeof *spec.sizes) != 0)
        return JAG_OK;
    jag_tensor *outs[1] = {out};
    st = info->cpu(name, args, nargs, outs);
    *done = st == JAG_OK;
    return st;
}

/* blas_core.c corrects OpenBLAS's choice of kernels in a constructor. An
 * archive member nothing refers to is left out of a program, constructor
 * and all: this reference links it into every program that links libjag.a
 * statically (every op comes through here). */
__attribute__((used)) static const char *(*const link_blas_core)(void) = jag_blas_core;

jag_status jag__call(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    jag__enter();
    jag_status st = jag__dispatch(op, args, nargs, outs);
    return jag__leave(st, outs, st == JAG_OK ? jag__ops[op].n_out : 0);
}

/* ---- the public op API -------------------------------------------------- */

jag_status jag_op_find(const char *name, jag_op_id *out) {
    if (!name || !out) return jag__error(JAG_EINVAL, "jag_op_find: arguments 'name' and 'out' must not be NULL");
    int n = atomic_load_explicit(&jag__n_ops, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (strcmp(jag__ops[i].name, name) == 0) {
            *out = i;
            return JAG_OK;
        }
    return jag__error(JAG_EINVAL, "jag_op_find: no op is named '%s'", name);
}

const char *jag_op_name(jag_op_id op) { return jag__op_valid(op) ? jag__ops[op].name : NULL; }
unsigned jag_op_tags(jag_op_id op) { return jag__op_valid(op) ? jag__ops[op].tags : 0; }
int jag_op_num_inputs(jag_op_id op) { return jag__op_valid(op) ? jag__ops[op].n_in : -1; }
int jag_op_num_outputs(jag_op_id op) { return jag__op_valid(op) ? jag__ops[op].n_out : -1; }

jag_status jag_op_call(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs) {
    if (!outs) return jag__error(JAG_EINVAL, "jag_op_call: argument 'outs' is NULL");
    if (!jag__op_valid(op)) return jag__error(JAG_EINVAL, "jag_op_call: op id %d is not a defined op", op);
    return jag__call(op, args, nargs, outs);
}

/* ---- argument helpers --------------------------------------------------- */

const char *jag__kind_name(jag_value_kind k) {
    switch (k) {
    case JAG_VAL_NONE: return "nothing";
    case JAG_VAL_TENSOR: return "a tensor";
    case JAG_VAL_INT: return "an int";
    case JAG_VAL_DOUBLE: return "a double";
    case JAG_VAL_BOOL: return "a bool";
    case JAG_VAL_INTS: return "an int list";
    case JAG_VAL_TENSORS: return "a tensor list";
    }
    return "?";
}

static jag_status check_kind(const char *op, const jag_value *args, int nargs, int i,
                             const char *name, jag_value_kind want) {
    if (i >= nargs) return jag__error(JAG_EINVAL, "%s: argument '%s' is missing", op, name);
    if (args[i].kind != want)
        return jag__error(JAG_EINVAL, "%s: argument '%s' is %s, expected %s", op, name,
                          jag__kind_name(args[i].kind), jag__kind_name(want));
    return JAG_OK;
}

jag_status jag__arg_tensor(const char *op, const jag_value *args, int nargs, int i,
                           const char *name, const jag_tensor **out) {
    if (i < nargs && args[i].kind == JAG_VAL_NONE)
        return jag__error(JAG_EINVAL, "%s: argument '%s' is NULL, expected a tensor", op, name);
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_TENSOR);
    if (st == JAG_OK) *out = args[i].u.t;
    return st;
}

jag_status jag__arg_grad_like(const char *op, const jag_tensor *g, const jag_tensor *like, const char *like_name) {
    bool same = g->ndim == like->ndim;
    for (int d = 0; same && d < like->ndim; d++) same = g->sizes[d] == like->sizes[d];
    if (!same) {
        char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
        return jag__error(JAG_ESHAPE, "%s: argument 'g' has shape %s, expected %s (%s's shape)", op,
                          jag__shape_str(g->sizes, g->ndim, a, sizeof a), jag__shape_str(like->sizes, like->ndim, b, sizeof b),
                          like_name);
    }
    if (g->dtype != like->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument 'g' has dtype %s, expected %s (%s's dtype)", op,
                          jag_dtype_name(g->dtype), jag_dtype_name(like->dtype), like_name);
    return JAG_OK;
}

jag_status jag__arg_opt_tensor(const char *op, const jag_value *args, int nargs, int i,
                               const char *name, const jag_tensor **out) {
    if (i < nargs && args[i].kind == JAG_VAL_NONE) {
        *out = NULL;
        return JAG_OK;
    }
    return jag__arg_tensor(op, args, nargs, i, name, out);
}

jag_status jag__arg_int(const char *op, const jag_value *args, int nargs, int i,
                        const char *name, int64_t *out) {
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_INT);
    if (st == JAG_OK) *out = args[i].u.i;
    return st;
}

jag_status jag__arg_double(const char *op, const jag_value *args, int nargs, int i,
                           const char *name, double *out) {
    if (i < nargs && args[i].kind == JAG_VAL_INT) {
        *out = (double)args[i].u.i;
        return JAG_OK;
    }
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_DOUBLE);
    if (st == JAG_OK) *out = args[i].u.d;
    return st;
}

jag_status jag__arg_bool(const char *op, const jag_value *args, int nargs, int i,
                         const char *name, bool *out) {
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_BOOL);
    if (st == JAG_OK) *out = args[i].u.b;
    return st;
}

jag_status jag__arg_ints(const char *op, const jag_value *args, int nargs, int i,
                         const char *name, const int64_t **v, int *n) {
    jag_status st = check_kind(op, args, nargs, i, name, JAG_VAL_INTS);
    if (st == JAG_OK) {
        *v = args[i].u.ints.v;
        *n = args[i].u.ints.n;
    }
    return st;
}
