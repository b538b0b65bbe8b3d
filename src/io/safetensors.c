/* safetensors.c — jag_save / jag_load: named dense and nested tensors in the
 * safetensors format (see jag.h for the format and the nested convention).
 *
 * Loading treats the file as hostile. Every number read from it is checked
 * before it sizes anything: the header length against the file's size and a
 * limit, shapes by checked multiplication, data offsets against each other
 * and the data's size. Allocations are sized by the file's real size (the
 * JSON reader's arrays) or by checked tensor sizes whose bytes the file
 * actually holds. Nested tensors are rebuilt through the checked
 * constructors, so offsets that do not fit their values are refused as any
 * user input is.
 *
 * Mapped loads (JAG_LOAD_MMAP) map the file MAP_PRIVATE with PROT_READ |
 * PROT_WRITE: copy-on-write, so nothing can write into the file, and a write
 * that bypasses jag's read-only flag changes only this process's pages
 * instead of faulting. The mapping is refcounted: every tensor made from it
 * holds one reference through jag_from_blob's release callback. */
#include "json.h"
#include "../subclass/nested.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes and reads data in host order: a little-endian host is required"
#endif

/* As the safetensors package: a header larger than this is refused. */
#define MAX_HEADER_BYTES ((uint64_t)100000000)
#define NESTED_PREFIX "jag.nested."

/* ---- dtypes ------------------------------------------------------------- */

static const char *const st_names[JAG_DTYPE_COUNT] = {
    [JAG_FLOAT32] = "F32", [JAG_FLOAT64] = "F64", [JAG_INT32] = "I32",    [JAG_INT64] = "I64",
    [JAG_BOOL] = "BOOL",   [JAG_FLOAT16] = "F16", [JAG_BFLOAT16] = "BF16",
};
/* safetensors dtypes jag has no equivalent for (a clearer message). */
static const char *const st_foreign[] = {"F8_E4M3", "F8_E5M2", "I8", "U8", "I16", "U16", "U32", "U64"};
#define SUPPORTED "F32, F64, F16, BF16, I32, I64 or BOOL"

static jag_status dtype_from_name(const char *op, const char *tensor, const char *s, jag_dtype *out) {
    for (int d = 0; d < JAG_DTYPE_COUNT; d++)
        if (strcmp(s, st_names[d]) == 0) {
            *out = (jag_dtype)d;
            return JAG_OK;
        }
    for (size_t i = 0; i < sizeof st_foreign / sizeof st_foreign[0]; i++)
        if (strcmp(s, st_foreign[i]) == 0)
            return jag__error(JAG_EDTYPE, "%s: tensor '%.200s': dtype '%s' has no jag equivalent, expected " SUPPORTED, op,
                              tensor, s);
    return jag__error(JAG_EDTYPE, "%s: tensor '%.200s': unknown dtype '%.64s', expected " SUPPORTED, op, tensor, s);
}

/* ---- the mapping shared by mapped tensors --------------------------------- */

typedef struct file_map {
    atomic_long refs;
    void *base;
    size_t len;
} file_map;

static void map_unref(file_map *m) {
    if (m && atomic_fetch_sub(&m->refs, 1) == 1) {
        munmap(m->base, m->len);
        free(m);
    }
}

static void map_release(void *ctx, void *data) {
    (void)data;
    map_unref(ctx);
}

/* ---- the set ------------------------------------------------------------ */

/* The metadata keys jag owns besides jag.nested.*: each holds a JSON
 * document describing what the file's tensors make up (jag_save_described). */
static const char *const described_keys[] = {JAG_OBJECT_KEY, JAG_OPTIMIZER_KEY};
#define N_DESCRIBED ((int)(sizeof described_keys / sizeof described_keys[0]))

static int described_index(const char *key) {
    for (int k = 0; k < N_DESCRIBED; k++)
        if (strcmp(key, described_keys[k]) == 0) return k;
    return -1;
}

struct jag_tensor_set {
    uint32_t magic; /* JAG_HANDLE_LIVE; JAG_HANDLE_FREED once freed */
    int n;
    char **names;
    jag_tensor **tensors;
    int n_meta;
    char **keys, **values;
    char *described[N_DESCRIBED]; /* the values of described_keys, or NULL */
};

/* Frees what the set holds; the header itself is freed by
 * jag_tensor_set_free through the handle ring (handles.c), or at once
 * when a load fails before handing the set out. */
static void set_free_contents(jag_tensor_set *set) {
    for (int i = 0; i < set->n; i++) free(set->names[i]), jag_release(set->tensors[i]);
    for (int i = 0; i < set->n_meta; i++) free(set->keys[i]), free(set->values[i]);
    for (int k = 0; k < N_DESCRIBED; k++) free(set->described[k]), set->described[k] = NULL;
    free(set->names), free(set->tensors), free(set->keys), free(set->values);
    set->n = set->n_meta = 0;
    set->names = set->keys = set->values = NULL;
    set->tensors = NULL;
}

jag_status jag_tensor_set_free(jag_tensor_set *set) {
    if (!set) return JAG_OK;
    if (set->magic != JAG_HANDLE_LIVE)
        return jag__error(JAG_EINVAL, "jag_tensor_set_free: argument 'set' was already freed");
    set_free_contents(set);
    set->magic = JAG_HANDLE_FREED;
    jag__handle_retire(set, free);
    return JAG_OK;
}

/* A set the accessors may read (NULL and freed sets read as empty). */
static bool set_live(const jag_tensor_set *set) { return set && set->magic == JAG_HANDLE_LIVE; }

int jag_tensor_set_count(const jag_tensor_set *set) { return set_live(set) ? set->n : 0; }
const char *jag_tensor_set_name(const jag_tensor_set *set, int i) {
    return set_live(set) && i >= 0 && i < set->n ? set->names[i] : NULL;
}
jag_tensor *jag_tensor_set_get(const jag_tensor_set *set, int i) {
    return set_live(set) && i >= 0 && i < set->n ? set->tensors[i] : NULL;
}
jag_tensor *jag_tensor_set_find(const jag_tensor_set *set, const char *name) {
    if (!set_live(set) || !name) return NULL;
    int lo = 0, hi = set->n - 1; /* names are sorted */
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(set->names[mid], name);
        if (c == 0) return set->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}
int jag_tensor_set_metadata_count(const jag_tensor_set *set) { return set_live(set) ? set->n_meta : 0; }
const char *jag_tensor_set_metadata_key(const jag_tensor_set *set, int i) {
    return set_live(set) && i >= 0 && i < set->n_meta ? set->keys[i] : NULL;
}
const char *jag_tensor_set_metadata_value(const jag_tensor_set *set, int i) {
    return set_live(set) && i >= 0 && i < set->n_meta ? set->values[i] : NULL;
}
const char *jag_tensor_set_description(const jag_tensor_set *set, const char *key) {
    int k = set_live(set) && key ? described_index(key) : -1;
    return k >= 0 ? set->described[k] : NULL;
}


static bool readable(const jag_tensor *t) { return t && t->storage; }

/* ---- loading ------------------------------------------------------------ */

typedef struct entry {
    const char *name;
    jag_dtype dtype;
    int ndim;
    int64_t sizes[JAG_MAX_DIMS];
    uint64_t begin, end;
    jag_tensor *tensor; /* built in the last step */
    bool consumed;      /* an inner tensor of a nested entry */
} entry;

typedef struct nested_entry {
    const char *name;
    jag_layout layout;
    int inner[4]; /* indices into the entries */
    int n_inner;
    int64_t ragged_idx; /* jagged: the outer dim that is ragged */
    jag_tensor *tensor;
} nested_entry;

typedef struct loader {
    const char *op;
    const unsigned char *data; /* the tensors' bytes (after the header) */
    uint64_t data_len;
    file_map *map; /* mapped loads: tensors view it */
    jag_json_doc doc;
    entry *entries;
    int n_entries;
    nested_entry *nested;
    int n_nested;
    const jag_json_node *meta; /* __metadata__ or NULL */
} loader;

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

static int cmp_entry_offsets(const void *a, const void *b) {
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int find_entry(const loader *L, const char *name) {
    int lo = 0, hi = L->n_entries - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(L->entries[mid].name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* One tensor's header entry: {"dtype": s, "shape": [ints], "data_offsets": [b, e]}. */
static jag_status parse_entry(loader *L, const jag_json_node *v, entry *e) {
    const char *op = L->op, *nm = e->name;
    const jag_json_doc *d = &L->doc;
    if (jag__json_kind(v) != JAG_JSON_OBJECT)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': expected an object with dtype, shape and data_offsets, got %s",
                          op, nm, jag__json_kind_name(jag__json_kind(v)));
    const jag_json_node *dt = NULL, *shape = NULL, *offs = NULL;
    for (const jag_json_node *c = jag__json_first(d, v); c; c = jag__json_next(d, v, c)) {
        const char *key = jag__json_key(d, c);
        const jag_json_node **slot = strcmp(key, "dtype") == 0          ? &dt
                                     : strcmp(key, "shape") == 0        ? &shape
                                     : strcmp(key, "data_offsets") == 0 ? &offs
                                                                        : NULL;
        if (!slot)
            return jag__error(JAG_EINVAL, "%s: tensor '%.200s': unknown field '%.64s', expected dtype, shape and data_offsets",
                              op, nm, key);
        if (*slot) return jag__error(JAG_EINVAL, "%s: tensor '%.200s': field '%s' appears twice", op, nm, key);
        *slot = c;
    }
    if (!dt || !shape || !offs)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': field '%s' is missing", op, nm,
                          !dt ? "dtype" : !shape ? "shape" : "data_offsets");
    if (jag__json_kind(dt) != JAG_JSON_STRING)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': field 'dtype' is %s, expected a string", op, nm,
                          jag__json_kind_name(jag__json_kind(dt)));
    jag_status st = dtype_from_name(op, nm, jag__json_str(d, dt), &e->dtype);
    if (st) return st;
    if (jag__json_kind(shape) != JAG_JSON_ARRAY)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': field 'shape' is %s, expected an array of sizes", op, nm,
                          jag__json_kind_name(jag__json_kind(shape)));
    int64_t ndim = jag__json_count(d, shape);
    if (ndim > JAG_MAX_DIMS)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': field 'shape' has %lld dims, expected at most %d", op, nm,
                          (long long)ndim, JAG_MAX_DIMS);
    e->ndim = 0;
    uint64_t nbytes = jag_dtype_size(e->dtype), extent = nbytes;
    bool overflow = false;
    for (const jag_json_node *c = jag__json_first(d, shape); c; c = jag__json_next(d, shape, c)) {
        int64_t size = jag__json_int(d, c);
        if (jag__json_kind(c) != JAG_JSON_INT || size < 0)
            return jag__error(JAG_EINVAL, "%s: tensor '%.200s': field 'shape' entry %d is %s, expected a size >= 0", op, nm,
                              e->ndim, jag__json_kind(c) == JAG_JSON_INT ? "negative" : jag__json_kind_name(jag__json_kind(c)));
        e->sizes[e->ndim++] = size;
        if (__builtin_mul_overflow(nbytes, (uint64_t)size, &nbytes)) overflow = true;
        /* the non-zero sizes must fit as well (jag computes strides from them) */
        if (__builtin_mul_overflow(extent, (uint64_t)(size ? size : 1), &extent)) overflow = true;
    }
    char sh[JAG_SHAPE_BUF];
    jag__shape_str(e->sizes, e->ndim, sh, sizeof sh);
    /* numel must fit int64 too (jag's sizes are int64) */
    if (overflow || extent > (uint64_t)INT64_MAX)
        return jag__error(JAG_EOVERFLOW, "%s: tensor '%.200s': shape %s of %s overflows the size of a tensor", op, nm, sh,
                          st_names[e->dtype]);
    if (jag__json_kind(offs) != JAG_JSON_ARRAY || jag__json_count(d, offs) != 2)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': field 'data_offsets' is %s, expected an array [begin, end]", op,
                          nm, jag__json_kind(offs) == JAG_JSON_ARRAY ? "an array of another length"
                                                                      : jag__json_kind_name(jag__json_kind(offs)));
    const jag_json_node *b = jag__json_first(d, offs), *en = jag__json_next(d, offs, b);
    if (jag__json_kind(b) != JAG_JSON_INT || jag__json_kind(en) != JAG_JSON_INT || jag__json_int(d, b) < 0 ||
        jag__json_int(d, en) < 0)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': field 'data_offsets' must hold two integers >= 0", op, nm);
    e->begin = (uint64_t)jag__json_int(d, b), e->end = (uint64_t)jag__json_int(d, en);
    if (e->begin > e->end)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': data_offsets [%llu, %llu] are out of order, expected begin <= end",
                          op, nm, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > L->data_len)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': data_offsets [%llu, %llu] reach past the end of the data (%llu bytes)",
                          op, nm, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)L->data_len);
    if (e->end - e->begin != nbytes)
        return jag__error(JAG_EINVAL, "%s: tensor '%.200s': data_offsets [%llu, %llu] hold %llu bytes, expected %llu (%s %s)",
                          op, nm, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)(e->end - e->begin), (unsigned long long)nbytes, st_names[e->dtype], sh);
    return JAG_OK;
}

/* The tensors' bytes must tile [0, data_len) exactly, as the safetensors
 * package requires: no overlap, no hole, nothing after the last. */
static jag_status check_tiling(loader *L) {
    entry **by = malloc((size_t)(L->n_entries ? L->n_entries : 1) * sizeof *by);
    if (!by) return jag__error(JAG_ENOMEM, "%s: out of memory", L->op);
    for (int i = 0; i < L->n_entries; i++) by[i] = &L->entries[i];
    qsort(by, (size_t)L->n_entries, sizeof *by, cmp_entry_offsets);
    uint64_t pos = 0;
    const entry *prev = NULL;
    jag_status st = JAG_OK;
    for (int i = 0; i < L->n_entries && !st; i++) {
        const entry *e = by[i];
        if (e->begin < pos)
            st = jag__error(JAG_EINVAL, "%s: tensor '%.200s': data_offsets [%llu, %llu] overlap tensor '%.200s' ([%llu, %llu])",
                            L->op, e->name, (unsigned long long)e->begin, (unsigned long long)e->end, prev->name,
                            (unsigned long long)prev->begin, (unsigned long long)prev->end);
        else if (e->begin > pos)
            st = jag__error(JAG_EINVAL, "%s: tensor '%.200s': data_offsets begin at %llu, expected %llu (bytes [%llu, %llu) of the data belong to no tensor)",
                            L->op, e->name, (unsigned long long)e->begin, (unsigned long long)pos,
                            (unsigned long long)pos, (unsigned long long)e->begin);
        if (e->end > pos) pos = e->end, prev = e;
        else if (!prev) prev = e;
    }
    if (!st && pos != L->data_len)
        st = jag__error(JAG_EINVAL, "%s: the data has %llu bytes but the tensors cover %llu, expected all of it", L->op,
                        (unsigned long long)L->data_len, (unsigned long long)pos);
    free(by);
    return st;
}

/* A key of __metadata__ that the set does not list as the caller's. */
static bool jag_owned_key(const char *key) {
    return strncmp(key, NESTED_PREFIX, strlen(NESTED_PREFIX)) == 0 || described_index(key) >= 0;
}

/* Parse a nested entry's value: a JSON object in a string. */
static jag_status parse_nested(loader *L, const char *name, const char *value, size_t len, nested_entry *ne) {
    const char *op = L->op;
    jag_json_doc d;
    char what[256];
    snprintf(what, sizeof what, "metadata '" NESTED_PREFIX "%.200s'", name);
    jag_status st = jag__json_parse(op, what, value, len, "an object {\"layout\": ...}", &d);
    if (st) return st;
    const jag_json_node *root = jag__json_root(&d), *layout = NULL, *ridx = NULL;
    for (const jag_json_node *c = jag__json_first(&d, root); c; c = jag__json_next(&d, root, c)) {
        const char *key = jag__json_key(&d, c);
        const jag_json_node **slot = strcmp(key, "layout") == 0 ? &layout : strcmp(key, "ragged_idx") == 0 ? &ridx : NULL;
        if (!slot || *slot) {
            st = jag__error(JAG_EINVAL, "%s: %s has %s field '%.64s', expected layout and ragged_idx", op, what,
                            slot ? "a repeated" : "an unknown", key);
            goto done;
        }
        *slot = c;
    }
    const char *ls = layout ? jag__json_str(&d, layout) : NULL; /* NULL unless a string */
    if (!ls || (strcmp(ls, "jagged") != 0 && strcmp(ls, "strided") != 0)) {
        st = jag__error(JAG_EINVAL, "%s: %s: field 'layout' is %s%.32s%s, expected \"jagged\" or \"strided\"", op, what,
                        !layout ? "missing" : ls ? "\"" : jag__json_kind_name(jag__json_kind(layout)), ls ? ls : "",
                        ls ? "\"" : "");
        goto done;
    }
    ne->name = name;
    ne->layout = strcmp(ls, "jagged") == 0 ? JAG_JAGGED : JAG_STRIDED;
    if (ridx) {
        if (jag__json_kind(ridx) != JAG_JSON_INT || ne->layout != JAG_JAGGED) {
            st = jag__error(JAG_EINVAL, "%s: %s: field 'ragged_idx' must be an integer, and only for the jagged layout", op, what);
            goto done;
        }
        if (jag__json_int(&d, ridx) < 1) {
            st = jag__error(JAG_EINVAL, "%s: %s: field 'ragged_idx' is %lld, expected >= 1 (dim 0 is the batch)", op, what,
                            (long long)jag__json_int(&d, ridx));
            goto done;
        }
    }
    ne->ragged_idx = ridx ? jag__json_int(&d, ridx) : 1; /* checked against the values' dims once they are read */
    static const char *const jagged_parts[] = {"values", "offsets", "lengths"};
    static const char *const strided_parts[] = {"buffer", "nested_sizes", "nested_strides", "storage_offsets"};
    const char *const *parts = ne->layout == JAG_JAGGED ? jagged_parts : strided_parts;
    int n_parts = ne->layout == JAG_JAGGED ? 3 : 4;
    ne->n_inner = 0;
    for (int k = 0; k < n_parts; k++) {
        char inner[1024];
        int w = snprintf(inner, sizeof inner, "%s.%s", name, parts[k]);
        int idx = w > 0 && (size_t)w < sizeof inner ? find_entry(L, inner) : -1;
        if (idx < 0) {
            if (ne->layout == JAG_JAGGED && k == 2) break; /* lengths are optional */
            st = jag__error(JAG_EINVAL, "%s: nested tensor '%.200s' (%s): tensor '%.200s.%s' is missing from the file", op,
                            name, ls, name, parts[k]);
            goto done;
        }
        if (L->entries[idx].consumed) {
            st = jag__error(JAG_EINVAL, "%s: nested tensor '%.200s': tensor '%.200s' already belongs to another nested tensor",
                            op, name, inner);
            goto done;
        }
        L->entries[idx].consumed = true;
        ne->inner[ne->n_inner++] = idx;
    }
done:
    jag__json_free(&d);
    return st;
}

static jag_status metadata_check(loader *L) {
    const jag_json_node *m = L->meta;
    const jag_json_doc *d = &L->doc;
    if (!m) return JAG_OK;
    if (jag__json_kind(m) != JAG_JSON_OBJECT)
        return jag__error(JAG_EINVAL, "%s: __metadata__ is %s, expected an object of strings", L->op,
                          jag__json_kind_name(jag__json_kind(m)));
    int64_t count = 0;
    for (const jag_json_node *c = jag__json_first(d, m); c; c = jag__json_next(d, m, c), count++) {
        if (jag__json_kind(c) != JAG_JSON_STRING)
            return jag__error(JAG_EINVAL, "%s: __metadata__ entry '%.200s' is %s, expected a string", L->op,
                              jag__json_key(d, c), jag__json_kind_name(jag__json_kind(c)));
    }
    if (count > INT_MAX) return jag__error(JAG_EINVAL, "%s: __metadata__ has %lld entries, expected at most %d", L->op,
                                           (long long)count, INT_MAX);
    /* duplicate keys: sorted, then neighbours (never quadratic) */
    const char **keys = malloc((size_t)(count ? count : 1) * sizeof *keys);
    if (!keys) return jag__error(JAG_ENOMEM, "%s: out of memory", L->op);
    int n = 0;
    for (const jag_json_node *c = jag__json_first(d, m); c; c = jag__json_next(d, m, c)) keys[n++] = jag__json_key(d, c);
    qsort(keys, (size_t)n, sizeof *keys, cmp_str);
    jag_status st = JAG_OK;
    for (int i = 1; i < n && !st; i++)
        if (strcmp(keys[i], keys[i - 1]) == 0)
            st = jag__error(JAG_EINVAL, "%s: __metadata__ has the key '%.200s' twice", L->op, keys[i]);
    free(keys);
    return st;
}

/* Build entry e's tensor: a view of the mapping when allowed, else a copy. */
static jag_status make_tensor(loader *L, entry *e) {
    const unsigned char *src = L->data + e->begin;
    size_t nbytes = (size_t)(e->end - e->begin);
    size_t es = jag_dtype_size(e->dtype);
    jag_status st;
    if (L->map && (uintptr_t)src % es == 0) {
        atomic_fetch_add(&L->map->refs, 1);
        st = jag_from_blob((void *)src, e->sizes, NULL, e->ndim, e->dtype, map_release, L->map, &e->tensor);
        if (st) {
            atomic_fetch_sub(&L->map->refs, 1); /* the first reference is the loader's: never the last */
            return st;
        }
        e->tensor->flags |= JAG_FLAG_READONLY;
        if (e->dtype == JAG_BOOL) { /* bool bytes are 0 or 1 in jag; a private page takes the fix */
            unsigned char *b = (unsigned char *)src;
            for (size_t i = 0; i < nbytes; i++)
                if (b[i] > 1) b[i] = 1;
        }
        return JAG_OK;
    }
    /* jag_from_data copies and normalises bool bytes */
    return jag_from_data(src, e->sizes, e->ndim, e->dtype, &e->tensor);
}

/* Prefix the message of a failed inner call with the nested tensor's name. */
static jag_status nested_fail(const loader *L, const nested_entry *ne, jag_status st) {
    char inner[768];
    snprintf(inner, sizeof inner, "%s", jag_last_error());
    return jag__error(st, "%s: nested tensor '%.200s' (%s) does not fit its inner tensors: %s", L->op, ne->name,
                      ne->layout == JAG_JAGGED ? "jagged" : "strided", inner);
}

static jag_status make_nested(loader *L, nested_entry *ne) {
    jag_tensor *in[4];
    for (int k = 0; k < ne->n_inner; k++) in[k] = L->entries[ne->inner[k]].tensor;
    jag_status st;
    if (ne->layout == JAG_JAGGED) {
        if (ne->ragged_idx > in[0]->ndim)
            return nested_fail(L, ne, jag__error(JAG_EINVAL, "ragged_idx %lld, expected 1..%d for values with %d dims",
                                                 (long long)ne->ragged_idx, in[0]->ndim, in[0]->ndim));
        for (int k = 1; k < ne->n_inner; k++) /* the format stores them int64 (jag_save writes int64) */
            if (in[k]->dtype != JAG_INT64)
                return nested_fail(L, ne, jag__error(JAG_EDTYPE, "argument '%s' has dtype %s, expected int64",
                                                     k == 1 ? "offsets" : "lengths", jag_dtype_name(in[k]->dtype)));
        jag_tensor *t = NULL;
        st = jag_nested_from_jagged(in[0], in[1], ne->n_inner > 2 ? in[2] : NULL, &t);
        if (!st && ne->ragged_idx != 1) {
            st = jag__nested_relabel(t, (int)ne->ragged_idx, &ne->tensor);
            jag_release(t);
        } else {
            ne->tensor = t;
        }
    } else {
        jag_subclass_meta meta = {.n_ints = JAG_NESTED_STRIDED_SLOTS, .ints = {[JAG_NESTED_SLOT_LAYOUT] = JAG_STRIDED}};
        st = jag_subclass_unflatten(jag__nested_class(), in, 4, &meta, &ne->tensor);
    }
    return st ? nested_fail(L, ne, st) : JAG_OK;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

typedef struct named {
    const char *name;
    jag_tensor *t;
} named;

static int cmp_named(const void *a, const void *b) { return strcmp(((const named *)a)->name, ((const named *)b)->name); }

static jag_status build_set(loader *L, jag_tensor_set **out) {
    const char *op = L->op;
    int n = L->n_nested;
    for (int i = 0; i < L->n_entries; i++) n += !L->entries[i].consumed;
    named *list = malloc((size_t)(n ? n : 1) * sizeof *list);
    jag_tensor_set *set = calloc(1, sizeof *set);
    if (!list || !set) goto oom;
    set->magic = JAG_HANDLE_LIVE;
    int k = 0;
    for (int i = 0; i < L->n_entries; i++)
        if (!L->entries[i].consumed) list[k++] = (named){L->entries[i].name, L->entries[i].tensor};
    for (int i = 0; i < L->n_nested; i++) list[k++] = (named){L->nested[i].name, L->nested[i].tensor};
    qsort(list, (size_t)n, sizeof *list, cmp_named);
    for (int i = 1; i < n; i++)
        if (strcmp(list[i].name, list[i - 1].name) == 0) {
            jag_status st = jag__error(JAG_EINVAL, "%s: the name '%.200s' is both a tensor and a nested tensor (metadata '" NESTED_PREFIX "%.200s')",
                                       op, list[i].name, list[i].name);
            free(list), free(set);
            return st;
        }
    const jag_json_doc *d = &L->doc;
    int n_meta = 0;
    if (L->meta)
        for (const jag_json_node *c = jag__json_first(d, L->meta); c; c = jag__json_next(d, L->meta, c))
            n_meta += !jag_owned_key(jag__json_key(d, c));
    set->names = calloc((size_t)(n ? n : 1), sizeof *set->names);
    set->tensors = calloc((size_t)(n ? n : 1), sizeof *set->tensors);
    set->keys = calloc((size_t)(n_meta ? n_meta : 1), sizeof *set->keys);
    set->values = calloc((size_t)(n_meta ? n_meta : 1), sizeof *set->values);
    if (!set->names || !set->tensors || !set->keys || !set->values) goto oom;
    for (int i = 0; i < n; i++) {
        if (!(set->names[i] = dup_str(list[i].name))) goto oom;
        set->tensors[i] = jag_retain(list[i].t);
        set->n = i + 1;
    }
    if (L->meta)
        for (const jag_json_node *c = jag__json_first(d, L->meta); c; c = jag__json_next(d, L->meta, c)) {
            int dk = described_index(jag__json_key(d, c));
            if (dk >= 0) {
                if (!(set->described[dk] = dup_str(jag__json_str(d, c)))) goto oom;
                continue;
            }
            if (jag_owned_key(jag__json_key(d, c))) continue;
            set->keys[set->n_meta] = dup_str(jag__json_key(d, c));
            set->values[set->n_meta] = dup_str(jag__json_str(d, c));
            set->n_meta++;
            if (!set->keys[set->n_meta - 1] || !set->values[set->n_meta - 1]) goto oom;
        }
    free(list);
    *out = set;
    return JAG_OK;
oom:
    free(list);
    if (set) set_free_contents(set), free(set);
    return jag__error(JAG_ENOMEM, "%s: out of memory", op);
}

static jag_status load_entries(loader *L, const char *header, size_t header_len) {
    const char *op = L->op;
    /* an array at the top is refused at its first byte: a header of
     * millions of values costs nothing to refuse */
    jag_status st = jag__json_parse(op, "the header", header, header_len, "a JSON object", &L->doc);
    if (st) return st;
    const jag_json_doc *d = &L->doc;
    const jag_json_node *root = jag__json_root(d);
    /* the entries grow as they are read, so that members refused early cost
     * no memory (an entry is larger than the text of a bad member) */
    int cap = 0;
    for (const jag_json_node *c = jag__json_first(d, root); c; c = jag__json_next(d, root, c)) {
        const char *key = jag__json_key(d, c);
        if (strcmp(key, "__metadata__") == 0) {
            if (L->meta) return jag__error(JAG_EINVAL, "%s: the header has __metadata__ twice", op);
            L->meta = c;
            continue;
        }
        if (L->n_entries == cap) {
            if (cap > INT_MAX / 2) return jag__error(JAG_EINVAL, "%s: the header has more than %d tensors", op, cap);
            int nc = cap ? cap * 2 : 16;
            entry *ne = realloc(L->entries, (size_t)nc * sizeof *ne);
            if (!ne) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
            L->entries = ne, cap = nc;
        }
        entry *e = &L->entries[L->n_entries];
        memset(e, 0, sizeof *e);
        e->name = key;
        if ((st = parse_entry(L, c, e))) return st;
        L->n_entries++;
    }
    if ((st = metadata_check(L))) return st;
    if (L->n_entries) qsort(L->entries, (size_t)L->n_entries, sizeof *L->entries, cmp_entry_name);
    for (int i = 1; i < L->n_entries; i++)
        if (strcmp(L->entries[i].name, L->entries[i - 1].name) == 0)
            return jag__error(JAG_EINVAL, "%s: tensor '%.200s' appears twice in the header, expected unique names", op,
                              L->entries[i].name);
    if ((st = check_tiling(L))) return st;
    /* nested entries */
    if (L->meta) {
        int nn = 0;
        for (const jag_json_node *c = jag__json_first(d, L->meta); c; c = jag__json_next(d, L->meta, c))
            nn += strncmp(jag__json_key(d, c), NESTED_PREFIX, strlen(NESTED_PREFIX)) == 0;
        L->nested = calloc((size_t)(nn ? nn : 1), sizeof *L->nested);
        if (!L->nested) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
        for (const jag_json_node *c = jag__json_first(d, L->meta); c; c = jag__json_next(d, L->meta, c)) {
            const char *key = jag__json_key(d, c), *value = jag__json_str(d, c);
            if (strncmp(key, NESTED_PREFIX, strlen(NESTED_PREFIX)) != 0) continue;
            if ((st = parse_nested(L, key + strlen(NESTED_PREFIX), value, strlen(value), &L->nested[L->n_nested])))
                return st;
            L->n_nested++;
        }
    }
    return JAG_OK;
}

static void loader_free(loader *L) {
    for (int i = 0; i < L->n_entries; i++) jag_release(L->entries[i].tensor);
    for (int i = 0; i < L->n_nested; i++) jag_release(L->nested[i].tensor);
    free(L->entries);
    free(L->nested);
    jag__json_free(&L->doc);
}

/* Load from bytes buf[0..len); `map` (may be NULL) is the mapping they lie
 * in when tensors may view them. */
static jag_status load_bytes(const char *op, const unsigned char *buf, size_t len, file_map *map, jag_tensor_set **out) {
    if (len < 8)
        return jag__error(JAG_EINVAL, "%s: the file has %zu bytes, expected at least 8 (the header length)", op, len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
    if (n > len - 8)
        return jag__error(JAG_EINVAL, "%s: the header length is %llu bytes, past the end of the file (%zu bytes follow it)",
                          op, (unsigned long long)n, len - 8);
    if (n > MAX_HEADER_BYTES)
        return jag__error(JAG_EINVAL, "%s: the header length is %llu bytes, expected at most %llu", op,
                          (unsigned long long)n, (unsigned long long)MAX_HEADER_BYTES);
    if (n < 2) return jag__error(JAG_EINVAL, "%s: the header length is %llu bytes, expected at least 2 ({})", op,
                                 (unsigned long long)n);
    loader L = {.op = op, .data = buf + 8 + n, .data_len = len - 8 - n, .map = map};
    jag__enter();
    jag_status st = load_entries(&L, (const char *)buf + 8, (size_t)n);
    for (int i = 0; i < L.n_entries && !st; i++) st = make_tensor(&L, &L.entries[i]);
    for (int i = 0; i < L.n_nested && !st; i++) st = make_nested(&L, &L.nested[i]);
    if (!st) st = build_set(&L, out);
    loader_free(&L);
    return jag__leave(st, NULL, 0);
}

jag_status jag_load_buffer(const void *data, size_t len, unsigned flags, jag_tensor_set **out) {
    const char *op = "jag_load_buffer";
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if (!data && len) return jag__error(JAG_EINVAL, "%s: argument 'data' is NULL with len %zu", op, len);
    if (flags != JAG_LOAD_COPY)
        return jag__error(JAG_EINVAL, "%s: argument 'flags' is %u, expected JAG_LOAD_COPY (a buffer is always copied)", op,
                          flags);
    return load_bytes(op, data ? data : (const void *)"", len, NULL, out);
}

/* A file's kind, for messages. */
static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "of another kind";
}

jag_status jag_load(const char *path, unsigned flags, jag_tensor_set **out) {
    const char *op = "jag_load";
    if (!path || !out) return jag__error(JAG_EINVAL, "%s: arguments 'path' and 'out' must not be NULL", op);
    if (flags & ~JAG_LOAD_MMAP)
        return jag__error(JAG_EINVAL, "%s: argument 'flags' is %u, expected JAG_LOAD_COPY or JAG_LOAD_MMAP", op, flags);
    /* O_NONBLOCK: opening a FIFO with no writer (or some devices) would
     * block; the file's kind is checked on the open descriptor (no race
     * with a rename), then the flag is cleared */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return jag__error(JAG_ESTATE, "%s: cannot open '%.200s': %s", op, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return jag__error(JAG_ESTATE, "%s: cannot read the status of '%.200s': %s", op, path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return jag__error(JAG_ESTATE, "%s: argument 'path' ('%.200s') is not a regular file (it is %s), expected a "
                          "regular safetensors file", op, path, file_kind(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return jag__error(JAG_ESTATE, "%s: cannot set up '%.200s' for reading: %s", op, path, strerror(err));
    }
    size_t len = (size_t)sb.st_size;
    if (len < 8) {
        close(fd);
        return jag__error(JAG_EINVAL, "%s: the file has %zu bytes, expected at least 8 (the header length)", op, len);
    }
    bool zero_copy = flags & JAG_LOAD_MMAP;
    void *base = mmap(NULL, len, zero_copy ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (base == MAP_FAILED) return jag__error(JAG_ESTATE, "%s: cannot map '%.200s': %s", op, path, strerror(err));
    file_map *m = malloc(sizeof *m);
    if (!m) {
        munmap(base, len);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    atomic_init(&m->refs, 1);
    m->base = base;
    m->len = len;
    jag_status st = load_bytes(op, base, len, zero_copy ? m : NULL, out);
    map_unref(m); /* mapped tensors keep their own references */
    return st;
}

/* ---- saving ------------------------------------------------------------- */

typedef struct out_tensor {
    char *name;
    jag_tensor *t; /* plain and contiguous */
    size_t nbytes;
    int order; /* given position (stable sort key) */
} out_tensor;

typedef struct strbuf {
    char *p;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
static void sb_str(strbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_fmt(strbuf *b, const char *fmt, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    sb_put(b, tmp, (size_t)n);
}
/* A JSON string literal of s (valid UTF-8, checked by the caller). */
static void sb_json_string(strbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            char e[2] = {'\\', (char)*c};
            sb_put(b, e, 2);
        } else if (*c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", *c);
            sb_put(b, e, 6);
        } else {
            sb_put(b, (const char *)c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static bool valid_utf8(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if ((p[i + j] & 0xc0) != 0x80) return false;
        if (k == 3 && ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] > 0x9f))) return false;
        if (k == 4 && ((c == 0xf0 && p[i + 1] < 0x90) || (c == 0xf4 && p[i + 1] > 0x8f))) return false;
        i += k;
    }
    return true;
}

static int cmp_out(const void *a, const void *b) {
    const out_tensor *x = a, *y = b;
    size_t ex = jag_dtype_size(x->t->dtype), ey = jag_dtype_size(y->t->dtype);
    if (ex != ey) return ex > ey ? -1 : 1;
    return x->order - y->order;
}

static int cmp_out_name(const void *a, const void *b) {
    return strcmp((*(const out_tensor *const *)a)->name, (*(const out_tensor *const *)b)->name);
}

typedef struct saver {
    const char *op;
    out_tensor *outs;
    int n, cap;
    strbuf meta; /* the jag.nested.* entries, already as JSON members */
} saver;

static jag_status add_out(saver *S, const char *name, const char *suffix, const jag_tensor *t) {
    if (S->n == S->cap) {
        int cap = S->cap ? S->cap * 2 : 16;
        out_tensor *o = realloc(S->outs, (size_t)cap * sizeof *o);
        if (!o) return jag__error(JAG_ENOMEM, "%s: out of memory", S->op);
        S->outs = o, S->cap = cap;
    }
    size_t n = strlen(name) + (suffix ? strlen(suffix) + 1 : 0) + 1;
    char *full = malloc(n);
    if (!full) return jag__error(JAG_ENOMEM, "%s: out of memory", S->op);
    snprintf(full, n, suffix ? "%s.%s" : "%s", name, suffix ? suffix : "");
    jag_tensor *c = NULL;
    jag_status st = jag_contiguous(t, &c);
    if (st) {
        free(full);
        return st;
    }
    S->outs[S->n] = (out_tensor){full, c, (size_t)jag_numel(c) * jag_dtype_size(c->dtype), S->n};
    S->n++;
    return JAG_OK;
}

static jag_status add_tensor(saver *S, const char *name, const jag_tensor *t) {
    const char *op = S->op;
    if (!t) return jag__error(JAG_EINVAL, "%s: tensor '%.200s' is NULL", op, name);
    nested_state *s = jag__nested(t);
    if (!s) {
        if (t->subclass)
            return jag__error(JAG_ENOTIMPL, "%s: tensor '%.200s' is a %s tensor, expected a plain or nested tensor", op, name,
                              jag_subclass_name(t->subclass));
        if (jag__is_meta(t)) return jag__error(JAG_EINVAL, "%s: tensor '%.200s' is a meta tensor with no data", op, name);
        return add_out(S, name, NULL, t);
    }
    jag_status st;
    if (s->layout == JAG_JAGGED) {
        if (!readable(s->values) || !readable(s->offsets))
            return jag__error(JAG_EINVAL, "%s: nested tensor '%.200s' has no data", op, name);
        if ((st = add_out(S, name, "values", s->values)) || (st = add_out(S, name, "offsets", s->offsets)) ||
            (s->lengths && (st = add_out(S, name, "lengths", s->lengths))))
            return st;
    } else {
        if (!readable(s->buffer) || !readable(s->sizes))
            return jag__error(JAG_EINVAL, "%s: nested tensor '%.200s' has no data", op, name);
        if ((st = add_out(S, name, "buffer", s->buffer)) || (st = add_out(S, name, "nested_sizes", s->sizes)) ||
            (st = add_out(S, name, "nested_strides", s->strides)) ||
            (st = add_out(S, name, "storage_offsets", s->storage_offsets)))
            return st;
    }
    sb_str(&S->meta, ",");
    size_t n = strlen(NESTED_PREFIX) + strlen(name) + 1;
    char *key = malloc(n);
    if (!key) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    snprintf(key, n, NESTED_PREFIX "%s", name);
    sb_json_string(&S->meta, key);
    free(key);
    sb_str(&S->meta, ":");
    char desc[64];
    snprintf(desc, sizeof desc, "{\"layout\":\"jagged\",\"ragged_idx\":%d}", s->ragged_idx);
    sb_json_string(&S->meta, s->layout == JAG_JAGGED ? desc : "{\"layout\":\"strided\"}");
    return JAG_OK;
}

/* n_min: 1 for jag_save, 0 for jag_save_described (the description alone
 * may be the whole content). */
static jag_status check_save_args(const char *op, const char *path, const char *const *names, jag_tensor *const *tensors,
                                  int n, int n_min, const char *const *metadata, int n_metadata) {
    if (!path) return jag__error(JAG_EINVAL, "%s: argument 'path' is NULL", op);
    if (n < n_min || (n > 0 && (!names || !tensors)))
        return jag__error(JAG_EINVAL, "%s: arguments 'names' and 'tensors' must hold n >= %d entries (n is %d)", op, n_min,
                          n);
    if (n_metadata < 0 || (n_metadata > 0 && !metadata))
        return jag__error(JAG_EINVAL, "%s: argument 'metadata' is NULL or n_metadata (%d) is negative", op, n_metadata);
    for (int i = 0; i < n; i++) {
        if (!names[i] || !names[i][0]) return jag__error(JAG_EINVAL, "%s: name %d is NULL or empty", op, i);
        if (!valid_utf8(names[i])) return jag__error(JAG_EINVAL, "%s: name %d is not valid UTF-8", op, i);
        if (strcmp(names[i], "__metadata__") == 0)
            return jag__error(JAG_EINVAL, "%s: name %d is '__metadata__', which the format reserves", op, i);
    }
    for (int k = 0; k < n_metadata; k++) {
        const char *key = metadata[2 * k], *val = metadata[2 * k + 1];
        if (!key || !val) return jag__error(JAG_EINVAL, "%s: metadata entry %d has a NULL key or value", op, k);
        if (!valid_utf8(key) || !valid_utf8(val))
            return jag__error(JAG_EINVAL, "%s: metadata entry '%.200s' is not valid UTF-8", op, valid_utf8(key) ? key : "?");
        if (strncmp(key, "jag.", 4) == 0)
            return jag__error(JAG_EINVAL, "%s: metadata key '%.200s' starts with 'jag.', which jag reserves", op, key);
        for (int j = 0; j < k; j++)
            if (strcmp(metadata[2 * j], key) == 0)
                return jag__error(JAG_EINVAL, "%s: metadata key '%.200s' is given twice", op, key);
    }
    return JAG_OK;
}

static jag_status write_file(const char *op, const char *path, const strbuf *header, const out_tensor *outs, int n) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        jag_status st = jag__error(JAG_ESTATE, "%s: cannot create a file beside '%.200s': %s", op, path, strerror(errno));
        free(tmp);
        return st;
    }
    (void)fchmod(fd, 0644);
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return jag__error(JAG_ESTATE, "%s: cannot write '%.200s': %s", op, path, strerror(errno));
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(header->p, 1, header->len, f) == header->len;
    for (int i = 0; i < n && ok; i++)
        if (outs[i].nbytes) ok = fwrite(jag_data(outs[i].t), 1, outs[i].nbytes, f) == outs[i].nbytes;
    int err = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) ok = false, err = errno;
    if (ok && rename(tmp, path) != 0) ok = false, err = errno;
    if (!ok) unlink(tmp);
    free(tmp);
    if (!ok) return jag__error(JAG_ESTATE, "%s: cannot write '%.200s': %s", op, path, strerror(err ? err : EIO));
    return JAG_OK;
}

/* The described entry (key, value) of jag_save_described: a key jag owns
 * and a JSON document. */
static jag_status check_description(const char *op, const char *key, const char *description) {
    if (!key || described_index(key) < 0)
        return jag__error(JAG_EINVAL, "%s: argument 'key' is %s%.200s%s; expected JAG_OBJECT_KEY (\"" JAG_OBJECT_KEY
                          "\") or JAG_OPTIMIZER_KEY (\"" JAG_OPTIMIZER_KEY "\")", op, key ? "'" : "NULL", key ? key : "",
                          key ? "'" : "");
    if (!description) return jag__error(JAG_EINVAL, "%s: argument 'description' is NULL", op);
    jag_json_doc doc;
    jag_status st = jag__json_parse(op, "argument 'description'", description, strlen(description), NULL, &doc);
    if (!st) jag__json_free(&doc);
    return st;
}

static jag_status save_file(const char *op, const char *path, const char *const *names, jag_tensor *const *tensors,
                            int n, const char *const *metadata, int n_metadata, const char *described_key,
                            const char *description) {
    jag_status st = JAG_OK;
    jag__enter();
    bool grad = jag_set_grad_enabled(false); /* contiguous copies are not part of any graph */
    saver S = {.op = op};
    strbuf h = {0};
    out_tensor **by_name = NULL;
    for (int i = 0; i < n && !st; i++) st = add_tensor(&S, names[i], tensors[i]);
    if (st) goto done;
    by_name = malloc((size_t)(S.n ? S.n : 1) * sizeof *by_name);
    if (!by_name) {
        st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
        goto done;
    }
    for (int i = 0; i < S.n; i++) by_name[i] = &S.outs[i];
    qsort(by_name, (size_t)S.n, sizeof *by_name, cmp_out_name);
    for (int i = 1; i < S.n && !st; i++)
        if (strcmp(by_name[i]->name, by_name[i - 1]->name) == 0)
            st = jag__error(JAG_EINVAL, "%s: the name '%.200s' is given twice (nested tensors also use name.values, "
                            "name.offsets, name.lengths, name.buffer, name.nested_sizes, name.nested_strides, "
                            "name.storage_offsets)", op, by_name[i]->name);
    if (st) goto done;
    if (S.n) qsort(S.outs, (size_t)S.n, sizeof *S.outs, cmp_out); /* none: a described file's description alone */
    /* the header */
    sb_str(&h, "{");
    bool any_meta = n_metadata > 0 || S.meta.len > 0 || described_key;
    if (any_meta) {
        sb_str(&h, "\"__metadata__\":{");
        for (int k = 0; k < n_metadata; k++) {
            if (k) sb_str(&h, ",");
            sb_json_string(&h, metadata[2 * k]);
            sb_str(&h, ":");
            sb_json_string(&h, metadata[2 * k + 1]);
        }
        if (described_key) {
            if (n_metadata) sb_str(&h, ",");
            sb_json_string(&h, described_key);
            sb_str(&h, ":");
            sb_json_string(&h, description);
        }
        bool first = !n_metadata && !described_key; /* S.meta's members each start with a comma */
        if (S.meta.len) sb_put(&h, S.meta.p + (first ? 1 : 0), S.meta.len - (first ? 1 : 0));
        sb_str(&h, "}");
    }
    uint64_t pos = 0;
    for (int i = 0; i < S.n; i++) {
        const out_tensor *o = &S.outs[i];
        if (i || any_meta) sb_str(&h, ",");
        sb_json_string(&h, o->name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, st_names[o->t->dtype]);
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < o->t->ndim; d++) sb_fmt(&h, d ? ",%lld" : "%lld", (long long)o->t->sizes[d]);
        sb_fmt(&h, "],\"data_offsets\":[%lld,", (long long)pos);
        pos += o->nbytes;
        sb_fmt(&h, "%lld]}", (long long)pos);
    }
    sb_str(&h, "}");
    while (h.len % 8) sb_str(&h, " "); /* as the safetensors package: data starts 8-aligned */
    if (h.oom || S.meta.oom) {
        st = jag__error(JAG_ENOMEM, "%s: out of memory building the header", op);
        goto done;
    }
    if ((uint64_t)h.len > MAX_HEADER_BYTES) {
        st = jag__error(JAG_EINVAL, "%s: the header would have %zu bytes, more than readers accept (%llu)", op, h.len,
                        (unsigned long long)MAX_HEADER_BYTES);
        goto done;
    }
    st = write_file(op, path, &h, S.outs, S.n);
done:
    for (int i = 0; i < S.n; i++) free(S.outs[i].name), jag_release(S.outs[i].t);
    free(S.outs);
    free(S.meta.p);
    free(h.p);
    free(by_name);
    jag_set_grad_enabled(grad);
    return jag__leave(st, NULL, 0);
}

jag_status jag_save(const char *path, const char *const *names, jag_tensor *const *tensors, int n,
                    const char *const *metadata, int n_metadata) {
    const char *op = "jag_save";
    jag_status st = check_save_args(op, path, names, tensors, n, 1, metadata, n_metadata);
    return st ? st : save_file(op, path, names, tensors, n, metadata, n_metadata, NULL, NULL);
}

jag_status jag_save_described(const char *path, const char *const *names, jag_tensor *const *tensors, int n,
                              const char *const *metadata, int n_metadata, const char *key, const char *description) {
    const char *op = "jag_save_described";
    jag_status st = check_save_args(op, path, names, tensors, n, 0, metadata, n_metadata);
    if (!st) st = check_description(op, key, description);
    return st ? st : save_file(op, path, names, tensors, n, metadata, n_metadata, key, description);
}
