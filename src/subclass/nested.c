/* nested.c — the nested subclass: state, construction (checked for user
 * input, unchecked for op results), accessors, conversions, printing. */
#include "nested.h"

#include <pthread.h>
#include <stdio.h>

static atomic_llong next_ragged_id;

static jag_status nested_from_jagged_checked(const char *op, const jag_tensor *values, const jag_tensor *offsets,
                                             const jag_tensor *lengths, jag_tensor **out);
static const int64_t *i64(const jag_tensor *t);
static bool readable(const jag_tensor *t);

int64_t jag__new_ragged_id(void) { return atomic_fetch_add(&next_ragged_id, 1); }

/* The ragged symbol of nested tensors whose offsets (jagged) or size table
 * (strided) is `t`: the one already attached to t, or a new one. */
static int64_t ragged_id_of(const jag_tensor *t) {
    jag_tensor *m = (jag_tensor *)t;
    long long id = atomic_load(&m->ragged_id);
    if (id >= 0) return id;
    long long fresh = atomic_fetch_add(&next_ragged_id, 1), expected = -1;
    if (atomic_compare_exchange_strong(&m->ragged_id, &expected, fresh)) return fresh;
    return expected; /* another thread attached one first */
}

/* ---- the class ---------------------------------------------------------- */

/* Each layout holds its own inner tensors (the other's are NULL); the
 * cached row ids and lengths are often absent: only what is there is
 * released (every nested result is freed through here). */
static void destroy_state(void *p) {
    nested_state *s = p;
    if (s->layout == JAG_JAGGED) {
        jag_release(s->values), jag_release(s->offsets);
        if (s->lengths) jag_release(s->lengths);
    } else {
        jag_release(s->buffer), jag_release(s->sizes), jag_release(s->strides), jag_release(s->storage_offsets);
    }
    jag_tensor *cached = atomic_load_explicit(&s->row_ids, memory_order_acquire);
    if (cached) jag_release(cached);
    if ((cached = atomic_load_explicit(&s->seq_lengths, memory_order_acquire))) jag_release(cached);
    jag__small_free(s, sizeof *s);
}

static jag_status nested_flatten(const jag_tensor *t, jag_tensor **inner, int *n, jag_subclass_meta *meta) {
    nested_state *s = jag__nested(t);
    meta->ints[JAG_NESTED_SLOT_LAYOUT] = s->layout;
    meta->ints[JAG_NESTED_SLOT_RAGGED_ID] = atomic_load(&s->ragged_id);
    if (s->layout == JAG_JAGGED) {
        inner[0] = jag_retain(s->values);
        inner[1] = jag_retain(s->offsets);
        *n = 2;
        if (s->lengths) inner[(*n)++] = jag_retain(s->lengths);
        meta->ints[JAG_NESTED_SLOT_HAS_LENGTHS] = s->lengths != NULL;
        meta->ints[JAG_NESTED_SLOT_MIN_SEQLEN] = s->min_seqlen;
        meta->ints[JAG_NESTED_SLOT_MAX_SEQLEN] = s->max_seqlen;
        meta->ints[JAG_NESTED_SLOT_RAGGED_IDX] = s->ragged_idx;
        meta->n_ints = JAG_NESTED_JAGGED_SLOTS;
    } else {
        inner[0] = jag_retain(s->buffer);
        inner[1] = jag_retain(s->sizes);
        inner[2] = jag_retain(s->strides);
        inner[3] = jag_retain(s->storage_offsets);
        *n = 4;
        meta->n_ints = JAG_NESTED_STRIDED_SLOTS;
    }
    return JAG_OK;
}

bool jag__nested_meta_alike(const jag_subclass_meta *a, const jag_subclass_meta *b) {
    if (a->n_ints != b->n_ints || memcmp(&a->scalar, &b->scalar, sizeof a->scalar) != 0) return false;
    for (int i = 0; i < a->n_ints; i++)
        if (a->ints[i] != b->ints[i] && i != JAG_NESTED_SLOT_RAGGED_ID && i != JAG_NESTED_SLOT_MIN_SEQLEN &&
            i != JAG_NESTED_SLOT_MAX_SEQLEN)
            return false;
    return true;
}

static jag_status nested_unflatten(const jag_subclass *cls, jag_tensor *const *inner, int n,
                                   const jag_subclass_meta *meta, jag_tensor **out) {
    (void)cls;
    if (meta->n_ints < JAG_NESTED_STRIDED_SLOTS)
        return jag__error(JAG_EINVAL, "nested unflatten: metadata has %d ints, expected >= %d", meta->n_ints,
                          JAG_NESTED_STRIDED_SLOTS);
    for (int i = 0; i < n; i++)
        if (!inner[i] || inner[i]->subclass)
            return jag__error(JAG_EINVAL, "nested unflatten: inner tensor %d is NULL or not a plain tensor", i);
    if (meta->ints[JAG_NESTED_SLOT_LAYOUT] == JAG_JAGGED) {
        if (meta->n_ints <= JAG_NESTED_SLOT_MAX_SEQLEN || n != 2 + (meta->ints[JAG_NESTED_SLOT_HAS_LENGTHS] != 0))
            return jag__error(JAG_EINVAL, "nested unflatten: jagged metadata does not match %d inner tensors", n);
        int64_t r = meta->n_ints > JAG_NESTED_SLOT_RAGGED_IDX ? meta->ints[JAG_NESTED_SLOT_RAGGED_IDX] : 1;
        if (r < 1 || r > inner[0]->ndim)
            return jag__error(JAG_EINVAL, "nested unflatten: ragged dim %lld, expected 1..%d for values with %d dims",
                              (long long)r, inner[0]->ndim, inner[0]->ndim);
        /* inner tensors may come from anywhere: validate them as user input
         * (the ragged symbol then comes from the offsets, never the caller) */
        jag_tensor *t = NULL;
        const jag_tensor *lengths = meta->ints[JAG_NESTED_SLOT_HAS_LENGTHS] ? inner[2] : NULL;
        jag_status st = nested_from_jagged_checked("nested unflatten", inner[0], inner[1], lengths, &t);
        if (st || r == 1) {
            *out = t;
            return st;
        }
        st = jag__nested_relabel(t, (int)r, out);
        jag_release(t);
        return st;
    }
    if (meta->ints[JAG_NESTED_SLOT_LAYOUT] != JAG_STRIDED || n != 4)
        return jag__error(JAG_EINVAL, "nested unflatten: layout %lld with %d inner tensors",
                          (long long)meta->ints[JAG_NESTED_SLOT_LAYOUT], n);
    const jag_tensor *buf = inner[0], *sz = inner[1], *sd = inner[2], *so = inner[3];
    if (buf->ndim != 1 || sz->dtype != JAG_INT64 || sd->dtype != JAG_INT64 || so->dtype != JAG_INT64 ||
        sz->ndim != 2 || sd->ndim != 2 || so->ndim != 1 || sz->sizes[0] != so->sizes[0] ||
        sd->sizes[0] != sz->sizes[0] || sd->sizes[1] != sz->sizes[1] || sz->sizes[1] < 1 || sz->sizes[1] + 1 > JAG_MAX_DIMS ||
        !jag_is_contiguous(sz) || !jag_is_contiguous(sd) || !jag_is_contiguous(so))
        return jag__error(JAG_EINVAL, "nested unflatten: strided inner tensors must be a 1-d buffer and contiguous int64 tables (B, n), (B, n), (B) with 1 <= n < %d",
                          JAG_MAX_DIMS);
    /* components address the buffer's storage from its offset with the
     * tables' strides: the buffer itself must be dense */
    if (buf->strides[0] != 1 && buf->sizes[0] > 1)
        return jag__error(JAG_EINVAL, "nested unflatten: the strided buffer has stride %lld, expected 1",
                          (long long)buf->strides[0]);
    if (readable(sz) && readable(sd) && readable(so)) { /* every component inside the buffer */
        int nd = (int)sz->sizes[1];
        for (int64_t b = 0; b < sz->sizes[0]; b++) {
            int64_t lo = i64(so)[b], hi = lo, count = 1;
            bool empty = false, overflow = false;
            if (lo < 0 || lo > buf->sizes[0])
                return jag__error(JAG_EINVAL, "nested unflatten: component %lld has storage offset %lld, expected 0..%lld",
                                  (long long)b, (long long)lo, (long long)buf->sizes[0]);
            for (int d = 0; d < nd; d++) {
                int64_t size = i64(sz)[b * nd + d], stride = i64(sd)[b * nd + d], step;
                if (size < 0 || stride < 0)
                    return jag__error(JAG_EINVAL, "nested unflatten: component %lld has a negative size or stride", (long long)b);
                /* stride 0 lets a component have more elements than the
                 * buffer: their count (and its non-zero sizes') must fit */
                if (__builtin_mul_overflow(count, size ? size : 1, &count))
                    return jag__error(JAG_EOVERFLOW, "nested unflatten: component %lld has sizes whose product overflows int64",
                                      (long long)b);
                if (size == 0) empty = true;
                else if (__builtin_mul_overflow(size - 1, stride, &step) || __builtin_add_overflow(hi, step, &hi))
                    overflow = true; /* sizes and strides from user input: checked (fuzz regression) */
            }
            if (!empty && (overflow || hi >= buf->sizes[0]))
                return jag__error(JAG_EINVAL, "nested unflatten: component %lld reaches outside the buffer", (long long)b);
        }
    }
    return jag__nested_wrap_strided(buf, sz, sd, so, ragged_id_of(sz), out);
}

static size_t nested_format(const jag_tensor *t, char *buf, size_t cap);

const jag_subclass *jag__nested_class_ptr;
static jag_status nested_class_status = JAG_OK;
static pthread_once_t nested_once = PTHREAD_ONCE_INIT;

static void register_nested(void) {
    jag_subclass_def def = {
        .name = "nested",
        .flatten = nested_flatten,
        .unflatten = nested_unflatten,
        .dispatch = jag__nested_dispatch,
        .destroy_state = destroy_state,
        .format = nested_format,
    };
    bool prev = jag__set_registering_builtin(true);
    nested_class_status = jag_subclass_register(&def, &jag__nested_class_ptr);
    /* the rules go in with the class, before any caller can register a
     * decomposition of its own for it (which then replaces ours) */
    if (nested_class_status == JAG_OK) nested_class_status = jag__nested_register_rules(jag__nested_class_ptr);
    jag__set_registering_builtin(prev);
}

const jag_subclass *jag__nested_class(void) {
    pthread_once(&nested_once, register_nested);
    JAG_ASSERT(nested_class_status == JAG_OK);
    return jag__nested_class_ptr;
}

/* The class of a result made like a nested tensor that exists: registered
 * already (no pthread_once on every result). */
static const jag_subclass *nested_class_registered(void) {
    JAG_ASSERT(jag__nested_class_ptr != NULL);
    return jag__nested_class_ptr;
}

jag_layout jag_tensor_layout(const jag_tensor *t) {
    nested_state *s = jag__nested(t);
    return s ? s->layout : JAG_DENSE;
}

bool jag_is_nested(const jag_tensor *t) { return jag__nested(t) != NULL; }

/* ---- unchecked constructors --------------------------------------------- */

static const int64_t *i64(const jag_tensor *t) { return (const int64_t *)jag__ptr(t); }

/* Whether a tensor has data we can read (meta tensors, while tracing, do not). */
static bool readable(const jag_tensor *t) { return t && t->storage; }

jag_status jag__nested_wrap_jagged(const jag_tensor *values, const jag_tensor *offsets, const jag_tensor *lengths,
                                   int64_t ragged_id, int64_t min_seqlen, int64_t max_seqlen, jag_tensor **out) {
    return jag__nested_wrap_jagged_at(values, offsets, lengths, ragged_id, min_seqlen, max_seqlen, 1, out);
}

/* The constructor of every jagged result; takes the reference `values` holds
 * and, with take_offsets, the one `offsets` holds (released on failure too).
 * `cls` is the nested class (registered: the caller had a nested tensor or
 * asked for the class). */
static jag_status wrap_jagged_taking(const jag_subclass *cls, jag_tensor *values, jag_tensor *offsets, bool take_offsets,
                                     const jag_tensor *lengths, int64_t ragged_id, int64_t min_seqlen,
                                     int64_t max_seqlen, int ragged_idx, jag_tensor **out) {
    JAG_ASSERT(ragged_idx >= 1 && ragged_idx <= values->ndim);
    nested_state *s = jag__small_alloc(sizeof *s);
    if (!s) {
        jag_release(values);
        if (take_offsets) jag_release(offsets);
        return jag__error(JAG_ENOMEM, "nested: out of memory");
    }
    /* every field written once, here (a memset and then the fields cost a
     * call and a second store to each on every nested result): a field
     * added to nested_state is set here too */
    s->layout = JAG_JAGGED;
    s->batch = offsets->sizes[0] - 1;
    s->ragged_idx = ragged_idx;
    s->values = values;
    s->offsets = take_offsets ? offsets : jag_retain(offsets);
    s->lengths = jag_retain((jag_tensor *)lengths);
    s->buffer = s->sizes = s->strides = s->storage_offsets = NULL;
    /* the structure cannot change under the nested tensor (user offsets
     * were copied if lent, see owned_index_vector) */
    jag__freeze(s->offsets), jag__freeze(s->lengths);
    atomic_init(&s->ragged_id, ragged_id);
    s->min_seqlen = min_seqlen;
    s->max_seqlen = max_seqlen;
    atomic_init(&s->row_ids, NULL);
    atomic_init(&s->seq_lengths, NULL);
    int64_t sizes[JAG_MAX_DIMS];
    sizes[0] = s->batch;
    for (int d = 1; d <= values->ndim; d++) sizes[d] = d == ragged_idx ? -1 : values->sizes[jag__values_dim(d, ragged_idx)];
    return jag__subclass_wrap_unchecked(cls, s, values->dtype, sizes, values->ndim + 1, out);
}

jag_status jag__nested_wrap_jagged_at(const jag_tensor *values, const jag_tensor *offsets, const jag_tensor *lengths,
                                      int64_t ragged_id, int64_t min_seqlen, int64_t max_seqlen, int ragged_idx,
                                      jag_tensor **out) {
    return wrap_jagged_taking(jag__nested_class(), jag_retain((jag_tensor *)values), (jag_tensor *)offsets, false, lengths,
                              ragged_id, min_seqlen, max_seqlen, ragged_idx, out);
}

jag_status jag__nested_wrap_jagged_taking(jag_tensor *values, jag_tensor *offsets, int64_t ragged_id, int64_t min_seqlen,
                                          int64_t max_seqlen, jag_tensor **out) {
    return wrap_jagged_taking(jag__nested_class(), values, offsets, true, NULL, ragged_id, min_seqlen, max_seqlen, 1, out);
}

static jag_status rewrap_check(const nested_state *like, const jag_tensor *values) {
    if (like->ragged_idx > values->ndim)
        return jag__error(JAG_EINTERNAL, "nested: values of %d dims cannot keep the ragged dim at %d", values->ndim,
                          like->ragged_idx);
    return JAG_OK;
}

jag_status jag__nested_rewrap_jagged(const nested_state *like, const jag_tensor *values, jag_tensor **out) {
    jag_status st = rewrap_check(like, values);
    if (st) return st;
    return jag__nested_wrap_jagged_at(values, like->offsets, like->lengths, atomic_load(&((nested_state *)like)->ragged_id),
                                      like->min_seqlen, like->max_seqlen, like->ragged_idx, out);
}

jag_status jag__nested_rewrap_jagged_taking(const nested_state *like, jag_tensor *values, jag_tensor **out) {
    jag_status st = rewrap_check(like, values);
    if (st) {
        jag_release(values);
        return st;
    }
    return wrap_jagged_taking(nested_class_registered(), values, like->offsets, false, like->lengths,
                              atomic_load(&((nested_state *)like)->ragged_id), like->min_seqlen, like->max_seqlen,
                              like->ragged_idx, out);
}

jag_status jag__nested_wrap_strided(const jag_tensor *buffer, const jag_tensor *sizes, const jag_tensor *strides,
                                    const jag_tensor *storage_offsets, int64_t ragged_id, jag_tensor **out) {
    const jag_subclass *cls = jag__nested_class();
    nested_state *s = jag__small_alloc(sizeof *s);
    if (!s) return jag__error(JAG_ENOMEM, "nested: out of memory");
    memset(s, 0, sizeof *s);
    s->layout = JAG_STRIDED;
    s->batch = sizes->sizes[0];
    s->buffer = jag_retain((jag_tensor *)buffer);
    s->sizes = jag_retain((jag_tensor *)sizes);
    s->strides = jag_retain((jag_tensor *)strides);
    s->storage_offsets = jag_retain((jag_tensor *)storage_offsets);
    jag__freeze(s->sizes), jag__freeze(s->strides), jag__freeze(s->storage_offsets);
    atomic_init(&s->ragged_id, ragged_id);
    atomic_init(&s->row_ids, NULL);
    atomic_init(&s->seq_lengths, NULL);
    int n = (int)sizes->sizes[1];
    int64_t outer[JAG_MAX_DIMS];
    outer[0] = s->batch;
    for (int c = 0; c < n; c++) {
        int64_t v = -2;
        if (readable(sizes))
            for (int64_t b = 0; b < s->batch && v != -1; b++) {
                int64_t x = i64(sizes)[b * n + c];
                v = v == -2 ? x : (v == x ? v : -1);
            }
        outer[c + 1] = v == -2 ? -1 : v;
    }
    s->min_seqlen = s->max_seqlen = -1;
    if (readable(sizes) && n > 0 && s->batch > 0) {
        s->min_seqlen = INT64_MAX, s->max_seqlen = 0;
        for (int64_t b = 0; b < s->batch; b++) {
            int64_t x = i64(sizes)[b * n];
            s->min_seqlen = x < s->min_seqlen ? x : s->min_seqlen;
            s->max_seqlen = x > s->max_seqlen ? x : s->max_seqlen;
        }
    }
    return jag_subclass_wrap(cls, s, buffer->dtype, outer, n + 1, out);
}

/* ---- raggedness --------------------------------------------------------- */

static bool same_int64_values(const jag_tensor *a, const jag_tensor *b) {
    if (a == b) return true;
    if (!a || !b || !readable(a) || !readable(b)) return false;
    if (jag_numel(a) != jag_numel(b)) return false;
    return memcmp(jag__ptr(a), jag__ptr(b), (size_t)jag_numel(a) * sizeof(int64_t)) == 0;
}

bool jag__nested_same_raggedness(nested_state *a, nested_state *b, bool remember) {
    if (a->layout != b->layout) return false;
    long long ia = atomic_load(&a->ragged_id), ib = atomic_load(&b->ragged_id);
    if (ia == ib) return true;
    bool same;
    if (a->layout == JAG_JAGGED)
        same = a->batch == b->batch && a->values->sizes[0] == b->values->sizes[0] &&
               same_int64_values(a->offsets, b->offsets) && same_int64_values(a->lengths, b->lengths) &&
               (a->lengths == NULL) == (b->lengths == NULL);
    else
        same = a->batch == b->batch && same_int64_values(a->sizes, b->sizes);
    if (same && remember) { /* both take the smaller id */
        long long m = ia < ib ? ia : ib;
        atomic_store(&a->ragged_id, m);
        atomic_store(&b->ragged_id, m);
    }
    return same;
}

const jag_tensor *jag__nested_row_ids(nested_state *s) {
    jag_tensor *ids = atomic_load(&s->row_ids);
    if (ids) return ids;
    int64_t total = s->values->sizes[0];
    ids = jag__tensor_new("nested row ids", &total, 1, JAG_INT64, false, !readable(s->offsets));
    if (!ids) return NULL;
    if (readable(ids)) {
        const int64_t *off = i64(s->offsets);
        int64_t *p = (int64_t *)jag__ptr(ids);
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t r = off[b]; r < off[b + 1]; r++) p[r] = b;
    }
    jag__freeze(ids);
    jag_tensor *expected = NULL;
    if (!atomic_compare_exchange_strong(&s->row_ids, &expected, ids)) {
        jag_release(ids); /* another thread won */
        return expected;
    }
    return ids;
}

/* ---- checked construction (user input) ---------------------------------- */

static jag_status check_index_vector(const char *op, const char *arg, const jag_tensor *t, int64_t want_n) {
    if (!t) return jag__error(JAG_EINVAL, "%s: argument '%s' is NULL", op, arg);
    if (t->subclass) return jag__error(JAG_EINVAL, "%s: argument '%s' is a nested tensor, expected a plain 1-d tensor", op, arg);
    if (t->dtype != JAG_INT64 && t->dtype != JAG_INT32)
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s, expected int64 or int32", op, arg,
                          jag_dtype_name(t->dtype));
    if (t->ndim != 1) return jag__error(JAG_ESHAPE, "%s: argument '%s' is %d-d, expected 1-d", op, arg, t->ndim);
    if (want_n >= 0 && t->sizes[0] != want_n)
        return jag__error(JAG_ESHAPE, "%s: argument '%s' has %lld entries, expected %lld", op, arg,
                          (long long)t->sizes[0], (long long)want_n);
    if (!readable(t)) return jag__error(JAG_EINVAL, "%s: argument '%s' has no data", op, arg);
    return JAG_OK;
}

/* The offsets or lengths a nested tensor keeps, as a contiguous tensor
 * whose memory no one else can change once it is frozen: t itself when jag
 * owns its storage and t spans all of it (the storage is then frozen with
 * the nested tensor, and every view of it becomes read-only), else a copy
 * (memory lent by the caller through jag_from_blob, numpy or DLPack, or a
 * part of a larger tensor). The caller validates the result, not t: what
 * was checked is what is kept. int32 entries are widened into a new int64
 * tensor: the stored structure is always int64. */
static jag_status owned_index_vector(const jag_tensor *t, jag_tensor **out) {
    const jag_storage *st = t->storage;
    if (t->dtype == JAG_INT32) {
        jag_value w[] = {jag__v_tensor(t), jag__v_int(JAG_INT64)};
        return jag__dispatch(JAG_OP_to_dtype, w, 2, out);
    }
    if (jag_is_contiguous(t) && st &&
        (atomic_load_explicit(&st->read_only, memory_order_relaxed) ||
         (!st->borrowed && t->offset == 0 && st->nbytes == (size_t)jag_numel(t) * sizeof(int64_t)))) {
        *out = jag_retain((jag_tensor *)t);
        return JAG_OK;
    }
    jag_value a[] = {jag__v_tensor(t)};
    return jag__dispatch(JAG_OP_clone, a, 1, out);
}

/* The op's kernel: values, offsets and lengths are plain tensors here (a
 * nested argument would have gone to the nested handler, which refuses). */
jag_status jag__view_nested_from_jagged(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *values, *offsets, *lengths;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "values", &values)) ||
        (st = jag__arg_tensor(op, args, nargs, 1, "offsets", &offsets)) ||
        (st = jag__arg_opt_tensor(op, args, nargs, 2, "lengths", &lengths)))
        return st;
    if (jag__is_meta(offsets) && !offsets->subclass && !values->subclass && offsets->dtype == JAG_INT64 &&
        offsets->ndim == 1 && values->ndim >= 1) { /* shape inference: nothing to validate */
        jag_tensor *inner[3] = {(jag_tensor *)values, (jag_tensor *)offsets, (jag_tensor *)lengths};
        jag_subclass_meta meta = jag__nested_jagged_meta(lengths != NULL);
        return jag__nested_proxy(inner, lengths ? 3 : 2, &meta, outs);
    }
    return nested_from_jagged_checked(op, values, offsets, lengths, outs);
}

jag_status jag_nested_from_jagged(const jag_tensor *values, const jag_tensor *offsets, const jag_tensor *lengths,
                                  jag_tensor **out) {
    const char *op = "jag_nested_from_jagged";
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if (!values) return jag__error(JAG_EINVAL, "%s: argument 'values' is NULL", op);
    if (!offsets) return jag__error(JAG_EINVAL, "%s: argument 'offsets' is NULL", op);
    jag_value a[] = {jag__v_tensor(values), jag__v_tensor(offsets), jag__v_tensor(lengths)};
    return jag__call(JAG_OP_nested_from_jagged, a, 3, out);
}

static jag_status nested_from_jagged_checked(const char *op, const jag_tensor *values, const jag_tensor *offsets,
                                             const jag_tensor *lengths, jag_tensor **out) {
    if (values->ndim < 1 || values->ndim >= JAG_MAX_DIMS)
        return jag__error(JAG_ESHAPE, "%s: argument 'values' is %d-d, expected 1..%d dims", op, values->ndim, JAG_MAX_DIMS - 1);
    jag_status st = check_index_vector(op, "offsets", offsets, -1);
    if (st) return st;
    if (offsets->sizes[0] < 1) return jag__error(JAG_ESHAPE, "%s: argument 'offsets' is empty, expected B+1 >= 1 entries", op);
    int64_t batch = offsets->sizes[0] - 1;
    if (lengths && (st = check_index_vector(op, "lengths", lengths, batch))) return st;
    jag_tensor *off = NULL, *len = NULL;
    if ((st = owned_index_vector(offsets, &off)) || (lengths && (st = owned_index_vector(lengths, &len)))) goto fail;
    const int64_t *o = i64(off);
    int64_t total = values->sizes[0], mn = INT64_MAX, mx = 0;
    /* Without lengths the offsets tile values exactly: start at 0, end at
     * values.size(0). With lengths (holes) they may start later and end
     * earlier (narrowing the ragged dim gives such views), within values. */
    if (len ? o[0] < 0 : o[0] != 0) {
        st = jag__error(JAG_EINVAL, "%s: argument 'offsets' starts at %lld, expected %s", op, (long long)o[0],
                        len ? ">= 0" : "0");
        goto fail;
    }
    for (int64_t b = 0; b < batch; b++) {
        if (o[b + 1] < o[b]) {
            st = jag__error(JAG_EINVAL, "%s: argument 'offsets' decreases at entry %lld (%lld after %lld), expected non-decreasing",
                            op, (long long)b + 1, (long long)o[b + 1], (long long)o[b]);
            goto fail;
        }
        int64_t l = o[b + 1] - o[b];
        if (len) {
            int64_t li = i64(len)[b];
            if (li < 0 || li > l) {
                st = jag__error(JAG_EINVAL, "%s: argument 'lengths' entry %lld is %lld, expected 0..%lld (offsets[%lld+1] - offsets[%lld])",
                                op, (long long)b, (long long)li, (long long)l, (long long)b, (long long)b);
                goto fail;
            }
            l = li;
        }
        mn = l < mn ? l : mn, mx = l > mx ? l : mx;
    }
    if (len ? o[batch] > total : o[batch] != total) {
        st = jag__error(JAG_EINVAL, "%s: argument 'offsets' ends at %lld, expected %svalues.size(0) = %lld", op,
                        (long long)o[batch], len ? "at most " : "", (long long)total);
        goto fail;
    }
    if (batch == 0) mn = mx = 0;
    /* with holes the raggedness is offsets and lengths together: a fresh
     * symbol (matches are then found by comparing values, then remembered) */
    st = jag__nested_wrap_jagged(values, off, len, len ? atomic_fetch_add(&next_ragged_id, 1) : ragged_id_of(off), mn,
                                 mx, out);
fail:
    jag_release(off), jag_release(len);
    return st;
}

/* A new plain tensor filled with value: the full op. */
static jag_status full_op(const int64_t *sizes, int ndim, double value, jag_dtype dtype, jag_tensor **out) {
    jag_value a[] = {jag__v_ints(sizes, ndim), jag__v_double(value), jag__v_int(dtype)};
    return jag__dispatch(JAG_OP_full, a, 3, out);
}

/* Copy `src` into rows [start, start + src.size(0)) of dst. */
static jag_status copy_rows(const char *op, jag_tensor *dst, int64_t start, const jag_tensor *src) {
    jag_tensor *v = jag__tensor_view(dst, src->sizes, dst->strides, dst->ndim, dst->offset + start * dst->strides[0]);
    if (!v) return jag_last_status();
    jag_status st = jag__copy_part(op, v, src);
    jag_release(v);
    return st;
}

static jag_status make_int64(const char *op, const int64_t *sizes, int ndim, jag_tensor **out) {
    *out = jag__tensor_new(op, sizes, ndim, JAG_INT64, true, false);
    return *out ? JAG_OK : jag_last_status();
}

jag_status jag__nested_from_components(const char *op, jag_tensor *const *items, int64_t n, jag_layout layout,
                                       jag_tensor **out) {
    if (n < 1 || !items) return jag__error(JAG_EINVAL, "%s: argument 'items' is empty, expected at least one tensor", op);
    if (layout != JAG_JAGGED && layout != JAG_STRIDED)
        return jag__error(JAG_EINVAL, "%s: argument 'layout' is %d, expected JAG_JAGGED or JAG_STRIDED", op, (int)layout);
    for (int64_t i = 0; i < n; i++) {
        const jag_tensor *t = items[i];
        if (!t) return jag__error(JAG_EINVAL, "%s: item %lld is NULL", op, (long long)i);
        if (t->subclass) return jag__error(JAG_EINVAL, "%s: item %lld is a nested tensor, expected a plain tensor", op, (long long)i);
        if (jag__is_meta(t)) return jag__error(JAG_EINVAL, "%s: item %lld has no data", op, (long long)i);
        if (t->dtype != items[0]->dtype)
            return jag__error(JAG_EDTYPE, "%s: item %lld has dtype %s, expected %s like item 0", op, (long long)i,
                              jag_dtype_name(t->dtype), jag_dtype_name(items[0]->dtype));
        if (t->ndim < 1 || t->ndim >= JAG_MAX_DIMS)
            return jag__error(JAG_ESHAPE, "%s: item %lld is %d-d, expected 1 to %d dims (a component of a nested tensor has at least one)",
                              op, (long long)i, t->ndim, JAG_MAX_DIMS - 1);
        if (t->ndim != items[0]->ndim)
            return jag__error(JAG_ESHAPE, "%s: item %lld is %d-d, expected %d-d like item 0", op, (long long)i, t->ndim,
                              items[0]->ndim);
        if (layout == JAG_JAGGED)
            for (int d = 1; d < t->ndim; d++)
                if (t->sizes[d] != items[0]->sizes[d]) {
                    char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
                    return jag__error(JAG_ESHAPE, "%s: item %lld has shape %s but item 0 has %s: the jagged layout needs equal sizes after dim 0 (use JAG_STRIDED)",
                                      op, (long long)i, jag__shape_str(t->sizes, t->ndim, a, sizeof a),
                                      jag__shape_str(items[0]->sizes, items[0]->ndim, b, sizeof b));
                }
    }
    jag_dtype dtype = items[0]->dtype;
    int nd = items[0]->ndim;
    jag_tensor *values = NULL, *offsets = NULL, *sizes = NULL, *strides = NULL, *soff = NULL;
    jag_status st = JAG_OK;
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++)
        if (__builtin_add_overflow(total, layout == JAG_JAGGED ? items[i]->sizes[0] : jag_numel(items[i]), &total))
            return jag__error(JAG_EOVERFLOW, "%s: the total size of the items overflows int64", op);
    if (layout == JAG_JAGGED) {
        int64_t vs[JAG_MAX_DIMS], nb = n + 1;
        memcpy(vs, items[0]->sizes, (size_t)nd * sizeof *vs);
        vs[0] = total;
        values = jag__tensor_new(op, vs, nd, dtype, false, false);
        if (!values) return jag_last_status();
        if ((st = make_int64(op, &nb, 1, &offsets))) goto done;
        int64_t *o = (int64_t *)jag__ptr(offsets), mn = INT64_MAX, mx = 0;
        for (int64_t i = 0; i < n && !st; i++) {
            o[i + 1] = o[i] + items[i]->sizes[0];
            if (items[i]->sizes[0] > 0 && jag_numel(items[i]) > 0) st = copy_rows(op, values, o[i], items[i]);
            mn = items[i]->sizes[0] < mn ? items[i]->sizes[0] : mn;
            mx = items[i]->sizes[0] > mx ? items[i]->sizes[0] : mx;
        }
        if (!st) st = jag__nested_wrap_jagged(values, offsets, NULL, ragged_id_of(offsets), mn, mx, out);
    } else {
        int64_t tab[2] = {n, nd};
        values = jag__tensor_new(op, &total, 1, dtype, false, false);
        if (!values) return jag_last_status();
        if ((st = make_int64(op, tab, 2, &sizes)) || (st = make_int64(op, tab, 2, &strides)) ||
            (st = make_int64(op, &n, 1, &soff)))
            goto done;
        int64_t *sz = (int64_t *)jag__ptr(sizes), *sd = (int64_t *)jag__ptr(strides), *so = (int64_t *)jag__ptr(soff);
        int64_t pos = 0;
        for (int64_t i = 0; i < n; i++) {
            memcpy(sz + i * nd, items[i]->sizes, (size_t)nd * sizeof(int64_t));
            jag__contiguous_strides(items[i]->sizes, nd, sd + i * nd);
            so[i] = pos;
            jag_tensor *dst = jag__tensor_view(values, items[i]->sizes, sd + i * nd, nd, pos);
            if (!dst) {
                st = jag_last_status();
                goto done;
            }
            st = jag__copy_part(op, dst, items[i]);
            jag_release(dst);
            if (st) goto done;
            pos += jag_numel(items[i]);
        }
        st = jag__nested_wrap_strided(values, sizes, strides, soff, ragged_id_of(sizes), out);
    }
done:
    jag_release(values), jag_release(offsets), jag_release(sizes), jag_release(strides), jag_release(soff);
    return st;
}

jag_status jag_nested_from_list(jag_tensor *const *items, int n, jag_layout layout, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "jag_nested_from_list: argument 'out' is NULL");
    jag__enter();
    jag_status st = jag__nested_from_components("jag_nested_from_list", items, n, layout, out);
    return jag__leave(st, out, st == JAG_OK);
}

/* ---- accessors ---------------------------------------------------------- */

static jag_status need_nested(const char *op, const jag_tensor *t, jag_layout layout, nested_state **s) {
    *s = jag__nested(t);
    if (!*s) return jag__error(JAG_EINVAL, "%s: argument 'nt' is not a nested tensor", op);
    if (layout != JAG_DENSE && (*s)->layout != layout)
        return jag__error(JAG_EINVAL, "%s: argument 'nt' has the %s layout, expected %s", op,
                          (*s)->layout == JAG_JAGGED ? "jagged" : "strided", layout == JAG_JAGGED ? "jagged" : "strided");
    return JAG_OK;
}

static jag_status give(jag_tensor *t, jag_tensor **out) {
    jag__enter();
    *out = jag_retain(t);
    return jag__leave(JAG_OK, out, t != NULL);
}

#define ACCESSOR(fn, layout, field)                                            \
    jag_status fn(const jag_tensor *nt, jag_tensor **out) {                    \
        nested_state *s;                                                       \
        if (!out) return jag__error(JAG_EINVAL, #fn ": argument 'out' is NULL"); \
        jag_status st = need_nested(#fn, nt, layout, &s);                      \
        return st ? st : give(s->field, out);                                  \
    }
ACCESSOR(jag_nested_offsets, JAG_JAGGED, offsets)
ACCESSOR(jag_nested_lengths, JAG_JAGGED, lengths)
ACCESSOR(jag_nested_buffer, JAG_STRIDED, buffer)
ACCESSOR(jag_nested_sizes_table, JAG_STRIDED, sizes)
ACCESSOR(jag_nested_strides_table, JAG_STRIDED, strides)
ACCESSOR(jag_nested_storage_offsets, JAG_STRIDED, storage_offsets)
#undef ACCESSOR

jag_status jag_nested_row_ids(const jag_tensor *nt, jag_tensor **out) {
    nested_state *s;
    if (!out) return jag__error(JAG_EINVAL, "jag_nested_row_ids: argument 'out' is NULL");
    jag_status st = need_nested("jag_nested_row_ids", nt, JAG_JAGGED, &s);
    if (st) return st;
    if (!readable(s->offsets)) return jag__error(JAG_EINVAL, "jag_nested_row_ids: argument 'nt' has no data");
    const jag_tensor *ids = jag__nested_row_ids(s);
    if (!ids) return jag_last_status();
    return give((jag_tensor *)ids, out);
}

jag_status jag_nested_seq_lengths(const jag_tensor *nt, jag_tensor **out) {
    nested_state *s;
    if (!out) return jag__error(JAG_EINVAL, "jag_nested_seq_lengths: argument 'out' is NULL");
    jag_status st = need_nested("jag_nested_seq_lengths", nt, JAG_JAGGED, &s);
    if (st) return st;
    if (s->lengths) return give(s->lengths, out);
    if (!readable(s->offsets)) return jag__error(JAG_EINVAL, "jag_nested_seq_lengths: argument 'nt' has no data");
    jag_tensor *l = atomic_load(&s->seq_lengths);
    if (!l) { /* computed once, kept with the state */
        l = jag__tensor_new("jag_nested_seq_lengths", &s->batch, 1, JAG_INT64, false, false);
        if (!l) return jag_last_status();
        const int64_t *o = i64(s->offsets);
        for (int64_t b = 0; b < s->batch; b++) ((int64_t *)jag__ptr(l))[b] = o[b + 1] - o[b];
        jag__freeze(l);
        jag_tensor *expected = NULL;
        if (!atomic_compare_exchange_strong(&s->seq_lengths, &expected, l)) {
            jag_release(l); /* another thread won */
            l = expected;
        }
    }
    return give(l, out);
}

/* values is an op (a differentiable view), not a plain accessor. */
jag_status jag_nested_values(const jag_tensor *nt, jag_tensor **out) {
    nested_state *s;
    if (!out) return jag__error(JAG_EINVAL, "jag_nested_values: argument 'out' is NULL");
    jag_status st = need_nested("jag_nested_values", nt, JAG_JAGGED, &s);
    if (st) return st;
    jag_value a[] = {jag__v_tensor(nt)};
    return jag__call(JAG_OP_values, a, 1, out);
}

/* The kernel of `values` for a plain argument: not nested. */
jag_status jag__view_values(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)args, (void)nargs, (void)outs;
    return jag__error(JAG_EINVAL, "%s: argument 'nt' is not a nested tensor", op);
}

int64_t jag_nested_batch_size(const jag_tensor *nt) {
    nested_state *s = jag__nested(nt);
    return s ? s->batch : -1;
}
int64_t jag_nested_min_seqlen(const jag_tensor *nt) {
    nested_state *s = jag__nested(nt);
    return s ? s->min_seqlen : -1;
}
int64_t jag_nested_max_seqlen(const jag_tensor *nt) {
    nested_state *s = jag__nested(nt);
    return s ? s->max_seqlen : -1;
}
int64_t jag_nested_ragged_id(const jag_tensor *nt) {
    nested_state *s = jag__nested(nt);
    return s ? atomic_load(&s->ragged_id) : -1;
}
int jag_nested_ragged_idx(const jag_tensor *nt) {
    nested_state *s = jag__nested(nt);
    return !s ? -1 : s->layout == JAG_JAGGED ? s->ragged_idx : 0;
}

/* ---- unbind, padding, layouts ------------------------------------------- */

jag_status jag__nested_unbind(const nested_state *s, jag_tensor **outs) {
    for (int64_t b = 0; b < s->batch; b++) {
        jag_tensor *v;
        if (s->layout == JAG_JAGGED) {
            const int64_t *o = i64(s->offsets);
            int64_t len = s->lengths ? i64(s->lengths)[b] : o[b + 1] - o[b];
            int64_t sz[JAG_MAX_DIMS];
            memcpy(sz, s->values->sizes, (size_t)s->values->ndim * sizeof *sz);
            sz[0] = len;
            v = jag__tensor_view(s->values, sz, s->values->strides, s->values->ndim,
                                 s->values->offset + (len ? o[b] * s->values->strides[0] : 0));
            if (v && s->ragged_idx != 1) v = jag__component_outer_order(v, s->ragged_idx);
        } else {
            int n = (int)s->sizes->sizes[1];
            v = jag__tensor_view(s->buffer, i64(s->sizes) + b * n, i64(s->strides) + b * n, n,
                                 s->buffer->offset + i64(s->storage_offsets)[b]);
        }
        if (!v) {
            for (int64_t i = 0; i < b; i++) jag_release(outs[i]);
            return jag_last_status();
        }
        outs[b] = v;
    }
    return JAG_OK;
}

static jag_status need_data(const char *op, const nested_state *s) {
    const jag_tensor *t = s->layout == JAG_JAGGED ? s->values : s->buffer;
    if (!readable(t)) return jag__error(JAG_EINVAL, "%s: argument 'nt' has no data (a traced nested tensor)", op);
    return JAG_OK;
}

jag_status jag_nested_unbind(const jag_tensor *nt, jag_tensor **outs, int cap, int *n_out) {
    const char *op = "jag_nested_unbind";
    nested_state *s;
    jag_status st = need_nested(op, nt, JAG_DENSE, &s);
    if (st) return st;
    if (!outs || !n_out) return jag__error(JAG_EINVAL, "%s: arguments 'outs' and 'n_out' must not be NULL", op);
    if ((st = need_data(op, s))) return st;
    if (cap < s->batch)
        return jag__error(JAG_EINVAL, "%s: the batch has %lld components but argument 'cap' is %d", op, (long long)s->batch, cap);
    jag__enter();
    st = jag__nested_unbind(s, outs);
    if (st == JAG_OK) *n_out = (int)s->batch;
    return jag__leave(st, outs, st == JAG_OK ? (int)s->batch : 0);
}

/* Components as an array (new references), freed by free_components. */
static jag_status components(const char *op, const nested_state *s, jag_tensor ***items) {
    jag_status st = need_data(op, s);
    if (st) return st;
    *items = calloc((size_t)(s->batch ? s->batch : 1), sizeof **items);
    if (!*items) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    st = jag__nested_unbind(s, *items);
    if (st) free(*items);
    return st;
}

static void free_components(jag_tensor **items, int64_t n) {
    for (int64_t i = 0; i < n; i++) jag_release(items[i]);
    free(items);
}

jag_status jag_nested_to_padded(const jag_tensor *nt, double padding, const int64_t *output_sizes, int ndim,
                                jag_tensor **out) {
    nested_state *s;
    jag_status st = need_nested("jag_nested_to_padded", nt, JAG_DENSE, &s);
    if (st) return st;
    if (!out) return jag__error(JAG_EINVAL, "jag_nested_to_padded: argument 'out' is NULL");
    if (ndim < 0 || ndim > JAG_MAX_DIMS || (ndim > 0 && !output_sizes))
        return jag__error(JAG_EINVAL, "jag_nested_to_padded: argument 'output_sizes' is NULL or has %d entries", ndim);
    jag_value a[] = {jag__v_tensor(nt), jag__v_double(padding), jag__v_ints(output_sizes, output_sizes ? ndim : 0)};
    return jag__call(JAG_OP_to_padded, a, 3, out);
}

/* to_padded's kernel for a plain argument, and its nested implementation. */
jag_status jag__composite_to_padded(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    (void)args, (void)nargs, (void)outs;
    return jag__error(JAG_EINVAL, "%s: argument 'nt' is not a nested tensor", op);
}

jag_status jag__nested_to_padded(const jag_tensor *nt, double padding, const int64_t *output_sizes, int ndim,
                                 jag_tensor **out) {
    const char *op = "jag_nested_to_padded";
    nested_state *s;
    jag_status st = need_nested(op, nt, JAG_DENSE, &s);
    if (st) return st;
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    jag_tensor **items = NULL;
    if ((st = components(op, s, &items))) return st;
    int cnd = nt->ndim - 1;
    int64_t shape[JAG_MAX_DIMS] = {s->batch};
    for (int d = 0; d < cnd; d++) {
        int64_t m = 0;
        for (int64_t b = 0; b < s->batch; b++) m = items[b]->sizes[d] > m ? items[b]->sizes[d] : m;
        /* dims other than the ragged one are known even with no components */
        shape[d + 1] = nt->sizes[d + 1] >= 0 ? nt->sizes[d + 1] : m;
    }
    if (output_sizes) {
        if (ndim != nt->ndim) {
            free_components(items, s->batch);
            return jag__error(JAG_ESHAPE, "%s: argument 'output_sizes' has %d entries, expected %d", op, ndim, nt->ndim);
        }
        for (int d = 0; d < ndim; d++)
            if (output_sizes[d] < shape[d] || (d == 0 && output_sizes[0] != s->batch)) {
                free_components(items, s->batch);
                return jag__error(JAG_ESHAPE, "%s: argument 'output_sizes' has %lld at dim %d, expected %s%lld", op,
                                  (long long)output_sizes[d], d, d == 0 ? "the batch size " : "at least ",
                                  (long long)shape[d]);
            }
        memcpy(shape, output_sizes, (size_t)ndim * sizeof *shape);
    }
    jag__enter();
    jag_tensor *p = NULL;
    if ((st = full_op(shape, nt->ndim, padding, nt->dtype, &p))) {
        free_components(items, s->batch);
        return jag__leave(st, NULL, 0);
    }
    for (int64_t b = 0; b < s->batch && !st; b++) {
        if (jag_numel(items[b]) == 0) continue;
        jag_tensor *dst = jag__tensor_view(p, items[b]->sizes, p->strides + 1, cnd, p->offset + b * p->strides[0]);
        if (!dst) {
            st = jag_last_status();
            break;
        }
        st = jag__copy_part(op, dst, items[b]);
        jag_release(dst);
    }
    free_components(items, s->batch);
    if (st) {
        jag_release(p);
        return jag__leave(st, NULL, 0);
    }
    *out = p;
    return jag__leave(JAG_OK, out, 1);
}

jag_status jag_nested_from_padded(const jag_tensor *padded, const jag_tensor *lengths, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "jag_nested_from_padded: argument 'out' is NULL");
    if (!padded || !lengths) return jag__error(JAG_EINVAL, "jag_nested_from_padded: arguments must not be NULL");
    jag_value a[] = {jag__v_tensor(padded), jag__v_tensor(lengths)};
    return jag__call(JAG_OP_from_padded, a, 2, out);
}

jag_status jag__composite_from_padded(const char *op, const jag_value *args, int nargs, jag_tensor **outs) {
    const jag_tensor *padded, *lengths;
    jag_status st;
    if ((st = jag__arg_tensor(op, args, nargs, 0, "padded", &padded)) ||
        (st = jag__arg_tensor(op, args, nargs, 1, "lengths", &lengths)))
        return st;
    return jag__nested_from_padded(padded, lengths, outs);
}

jag_status jag__nested_from_padded(const jag_tensor *padded, const jag_tensor *lengths, jag_tensor **out) {
    const char *op = "jag_nested_from_padded";
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if (!padded || padded->subclass || jag__is_meta(padded))
        return jag__error(JAG_EINVAL, "%s: argument 'padded' must be a plain tensor with data", op);
    if (padded->ndim < 2) return jag__error(JAG_ESHAPE, "%s: argument 'padded' is %d-d, expected (B, L, ...)", op, padded->ndim);
    if (!lengths || lengths->subclass || jag__is_meta(lengths) || lengths->ndim != 1 ||
        (lengths->dtype != JAG_INT64 && lengths->dtype != JAG_INT32))
        return jag__error(JAG_EINVAL, "%s: argument 'lengths' must be a 1-d int64 or int32 tensor", op);
    int64_t batch = padded->sizes[0], maxlen = padded->sizes[1];
    if (lengths->sizes[0] != batch)
        return jag__error(JAG_ESHAPE, "%s: argument 'lengths' has %lld entries, expected %lld (padded.size(0))", op,
                          (long long)lengths->sizes[0], (long long)batch);
    jag_tensor **items = calloc((size_t)(batch ? batch : 1), sizeof *items);
    if (!items) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    jag_status st = JAG_OK;
    for (int64_t b = 0; b < batch && !st; b++) {
        /* read exactly: through a double, int64 entries near 2^63 converted
         * back out of range (fuzz regression) */
        const char *lp = jag__ptr(lengths) + b * lengths->strides[0] * (int64_t)jag_dtype_size(lengths->dtype);
        int64_t l = lengths->dtype == JAG_INT64 ? *(const int64_t *)lp : *(const int32_t *)lp;
        if (l < 0 || l > maxlen) {
            st = jag__error(JAG_EINVAL, "%s: argument 'lengths' entry %lld is %lld, expected 0..%lld", op, (long long)b,
                            (long long)l, (long long)maxlen);
            break;
        }
        int64_t sz[JAG_MAX_DIMS];
        memcpy(sz, padded->sizes + 1, (size_t)(padded->ndim - 1) * sizeof *sz);
        sz[0] = l;
        items[b] = jag__tensor_view(padded, sz, padded->strides + 1, padded->ndim - 1,
                                    padded->offset + b * padded->strides[0]);
        if (!items[b]) st = jag_last_status();
    }
    jag__enter();
    if (!st && batch == 0) st = jag__error(JAG_EINVAL, "%s: argument 'padded' has batch size 0", op);
    if (!st) st = jag__nested_from_components(op, items, batch, JAG_JAGGED, out);
    free_components(items, batch);
    return jag__leave(st, out, st == JAG_OK);
}

jag_status jag_nested_to_layout(const jag_tensor *nt, jag_layout layout, jag_tensor **out) {
    const char *op = "jag_nested_to_layout";
    nested_state *s;
    jag_status st = need_nested(op, nt, JAG_DENSE, &s);
    if (st) return st;
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if (s->batch == 0) return jag__error(JAG_EINVAL, "%s: argument 'nt' has no components (B = 0) to convert", op);
    jag_tensor **items = NULL;
    if ((st = components(op, s, &items))) return st;
    jag__enter();
    st = jag__nested_from_components(op, items, s->batch, layout, out);
    free_components(items, s->batch);
    return jag__leave(st, out, st == JAG_OK);
}

jag_status jag__nested_contiguous(const jag_tensor *nt, jag_tensor **out) {
    nested_state *s = jag__nested(nt);
    if (s->batch == 0 || (s->layout == JAG_JAGGED && !s->lengths && jag_is_contiguous(s->values))) {
        *out = jag_retain((jag_tensor *)nt);
        return JAG_OK;
    }
    if (s->layout == JAG_JAGGED && s->ragged_idx != 1) { /* on the canonical form: the same values */
        jag_tensor *c = NULL, *cc = NULL;
        jag_status st = jag__nested_relabel(nt, 1, &c);
        if (!st) st = jag__nested_contiguous(c, &cc);
        if (!st) st = jag__nested_relabel(cc, s->ragged_idx, out);
        jag_release(c), jag_release(cc);
        return st;
    }
    jag_tensor **items = NULL;
    jag_status st = components("jag_contiguous", s, &items);
    if (st) return st;
    st = jag__nested_from_components("jag_contiguous", items, s->batch, s->layout, out);
    free_components(items, s->batch);
    return st;
}

/* ---- *_like factories --------------------------------------------------- */

typedef enum { LIKE_EMPTY, LIKE_FULL, LIKE_RAND, LIKE_RANDN } like_kind;

/* A plain tensor of t's shape and dtype, filled as asked. */
static jag_status plain_like(const char *op, const jag_tensor *t, like_kind kind, double value, jag_generator *g,
                             jag_tensor **out) {
    if (kind == LIKE_RAND) return jag_rand_uniform(t->sizes, t->ndim, 0, 1, t->dtype, g, out);
    if (kind == LIKE_RANDN) return jag_rand_normal(t->sizes, t->ndim, 0, 1, t->dtype, g, out);
    if (kind == LIKE_FULL && !jag__is_meta(t)) return full_op(t->sizes, t->ndim, value, t->dtype, out);
    *out = jag__tensor_new(op, t->sizes, t->ndim, t->dtype, false, jag__is_meta(t));
    return *out ? JAG_OK : jag_last_status();
}

static jag_status make_like(const char *op, const jag_tensor *x, like_kind kind, double value, jag_generator *g,
                            jag_tensor **out) {
    if (!x || !out) return jag__error(JAG_EINVAL, "%s: arguments 'x' and 'out' must not be NULL", op);
    nested_state *s = jag__nested(x);
    if (x->subclass && !s) return jag__error(JAG_ENOTIMPL, "%s: not supported for %s tensors", op, jag_subclass_name(x->subclass));
    if (jag__trace_current && (kind == LIKE_EMPTY || kind == LIKE_FULL)) { /* a recorded full_like */
        jag__enter();
        return jag__leave(jag__trace_full_like(x, value, out), out, 1);
    }
    if (jag__trace_current)
        return jag__error(JAG_ENOTIMPL, "%s: random numbers inside a traced function; pass them as an input", op);
    jag__enter();
    jag_status st;
    if (!s) {
        st = plain_like(op, x, kind, value, g, out);
        return jag__leave(st, out, st == JAG_OK);
    }
    jag_tensor *inner = NULL;
    st = plain_like(op, s->layout == JAG_JAGGED ? s->values : s->buffer, kind, value, g, &inner);
    if (!st) {
        if (s->layout == JAG_JAGGED) st = jag__nested_rewrap_jagged(s, inner, out);
        else st = jag__nested_wrap_strided(inner, s->sizes, s->strides, s->storage_offsets, atomic_load(&s->ragged_id), out);
    }
    jag_release(inner);
    return jag__leave(st, out, st == JAG_OK);
}

jag_status jag_empty_like(const jag_tensor *x, jag_tensor **out) { return make_like("jag_empty_like", x, LIKE_EMPTY, 0, NULL, out); }
jag_status jag_zeros_like(const jag_tensor *x, jag_tensor **out) { return make_like("jag_zeros_like", x, LIKE_FULL, 0, NULL, out); }
jag_status jag_ones_like(const jag_tensor *x, jag_tensor **out) { return make_like("jag_ones_like", x, LIKE_FULL, 1, NULL, out); }
jag_status jag_full_like(const jag_tensor *x, double value, jag_tensor **out) {
    return make_like("jag_full_like", x, LIKE_FULL, value, NULL, out);
}
jag_status jag_rand_like(const jag_tensor *x, jag_generator *g, jag_tensor **out) {
    return make_like("jag_rand_like", x, LIKE_RAND, 0, g, out);
}
jag_status jag_randn_like(const jag_tensor *x, jag_generator *g, jag_tensor **out) {
    return make_like("jag_randn_like", x, LIKE_RANDN, 0, g, out);
}

/* ---- printing ----------------------------------------------------------- */

static size_t nested_format(const jag_tensor *t, char *buf, size_t cap) {
    nested_state *s = jag__nested(t);
    size_t len = 0;
#define PUT(...)                                                               \
    do {                                                                       \
        int n_ = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, __VA_ARGS__); \
        if (n_ > 0) len += (size_t)n_;                                         \
    } while (0)
    long long id = atomic_load(&s->ragged_id);
    PUT("nested_tensor(layout=%s, dtype=%s, shape=(", s->layout == JAG_JAGGED ? "jagged" : "strided",
        jag_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] >= 0) PUT("%s%lld", d ? ", " : "", (long long)t->sizes[d]);
        else if (s->layout == JAG_JAGGED) PUT("%sj%lld", d ? ", " : "", id);
        else PUT("%s*", d ? ", " : "");
    }
    PUT(")");
    jag_tensor **items = NULL;
    if (!readable(s->layout == JAG_JAGGED ? s->values : s->buffer) || components("jag_format", s, &items)) {
        PUT(")");
        return len;
    }
    PUT(", [\n");
    for (int64_t b = 0; b < s->batch; b++) {
        if (b == 3 && s->batch > 6) {
            PUT("  ...,\n");
            b = s->batch - 3;
        }
        char tmp[4096];
        jag_format(items[b], tmp, sizeof tmp);
        PUT("  ");
        for (const char *c = tmp; *c; c++) { /* indent continuation lines */
            PUT("%c", *c);
            if (*c == '\n') PUT("  ");
        }
        PUT("%s\n", b + 1 < s->batch ? "," : "");
    }
    PUT("])");
#undef PUT
    free_components(items, s->batch);
    return len;
}

/* ---- proxies for the tracer ---------------------------------------------- */

jag_status jag__nested_proxy(jag_tensor *const *inner, int n, const jag_subclass_meta *meta, jag_tensor **out) {
    if (meta->n_ints <= JAG_NESTED_SLOT_LAYOUT) return jag__error(JAG_EINVAL, "nested proxy: metadata has no layout");
    if (meta->ints[JAG_NESTED_SLOT_LAYOUT] == JAG_JAGGED) {
        if (n < 2 || meta->n_ints <= JAG_NESTED_SLOT_HAS_LENGTHS)
            return jag__error(JAG_EINVAL, "nested proxy: jagged needs values and offsets");
        const jag_tensor *len = meta->ints[JAG_NESTED_SLOT_HAS_LENGTHS] && n > 2 ? inner[2] : NULL;
        int64_t mn = meta->n_ints > JAG_NESTED_SLOT_MAX_SEQLEN ? meta->ints[JAG_NESTED_SLOT_MIN_SEQLEN] : -1;
        int64_t mx = meta->n_ints > JAG_NESTED_SLOT_MAX_SEQLEN ? meta->ints[JAG_NESTED_SLOT_MAX_SEQLEN] : -1;
        int64_t r = meta->n_ints > JAG_NESTED_SLOT_RAGGED_IDX ? meta->ints[JAG_NESTED_SLOT_RAGGED_IDX] : 1;
        if (r < 1 || r > inner[0]->ndim) return jag__error(JAG_EINVAL, "nested proxy: ragged dim %lld out of range", (long long)r);
        /* the symbol lives on the offsets proxy (on lengths with holes) */
        return jag__nested_wrap_jagged_at(inner[0], inner[1], len, ragged_id_of(len ? len : inner[1]), mn, mx, (int)r, out);
    }
    if (n != 4) return jag__error(JAG_EINVAL, "nested proxy: strided needs 4 inner tensors");
    return jag__nested_wrap_strided(inner[0], inner[1], inner[2], inner[3], ragged_id_of(inner[1]), out);
}
