/* fuzz_nested — nested construction from arbitrary tables.
 *
 * The bytes choose a constructor (jagged values/offsets/lengths, strided
 * buffer and size/stride/offset tables, padded + lengths) and its inputs.
 * An independent validity rule, written here from the documented contract,
 * says whether the inputs are valid; the constructor must succeed exactly
 * then, and its components (unbind) must hold exactly the elements the
 * tables describe. A failure must be a status with a message and leave no
 * tensor alive. */
#include "fuzz.h"

static jag_tensor *ints(const int64_t *v, int64_t n) {
    jag_tensor *t = NULL;
    FUZZ_CHECK(jag_from_data(v, &n, 1, JAG_INT64, &t) == JAG_OK);
    return t;
}

/* A float64 tensor whose element at flat index i is i. */
static jag_tensor *iota(const int64_t *sizes, int ndim) {
    jag_tensor *t = NULL;
    FUZZ_CHECK(jag_empty(sizes, ndim, JAG_FLOAT64, &t) == JAG_OK);
    double *p = jag_data(t);
    for (int64_t i = 0; i < jag_numel(t); i++) p[i] = (double)i;
    return t;
}

static double at(const jag_tensor *t, const int64_t *idx) {
    double v = -1;
    FUZZ_CHECK(jag_item_at(t, idx, &v) == JAG_OK);
    return v;
}

/* Elements in all components (stride-0 strided components may have far
 * more than the buffer). */
static int64_t total_elements(const jag_tensor *nt) {
    jag_tensor *parts[6];
    int n = 0;
    int64_t total = 0, maxes[JAG_MAX_DIMS] = {0};
    FUZZ_CHECK(jag_nested_unbind(nt, parts, 6, &n) == JAG_OK);
    for (int i = 0; i < n; i++) {
        int64_t e = jag_numel(parts[i]);
        total = total > INT64_MAX - e ? INT64_MAX : total + e;
        for (int d = 0; d < jag_ndim(parts[i]); d++)
            if (jag_size(parts[i], d) > maxes[d]) maxes[d] = jag_size(parts[i], d);
        jag_release(parts[i]);
    }
    /* and the padded tensor's elements */
    int64_t padded = n;
    for (int d = 0; d < jag_ndim(nt) - 1; d++)
        if (__builtin_mul_overflow(padded, maxes[d], &padded)) padded = INT64_MAX;
    return total > padded ? total : padded;
}

static void exercise(const jag_tensor *nt) {
    /* copies of a component of 2^40 elements would only test the allocator */
    if (total_elements(nt) > ((int64_t)1 << 20)) return;
    /* a few consumers of the structure: printing, padding, layout change, an op */
    char buf[512];
    jag_format(nt, buf, sizeof buf);
    jag_tensor *p = NULL, *l = NULL, *s = NULL, *c = NULL;
    if (jag_nested_to_padded(nt, -1.0, NULL, 0, &p) == JAG_OK) jag_release(p);
    if (jag_nested_batch_size(nt) > 0) {
        jag_layout other = jag_tensor_layout(nt) == JAG_JAGGED ? JAG_STRIDED : JAG_JAGGED;
        if (jag_nested_to_layout(nt, other, &l) == JAG_OK) jag_release(l);
    }
    FUZZ_CHECK(jag_sin(nt, &s) == JAG_OK);
    jag_release(s);
    FUZZ_CHECK(jag_contiguous(nt, &c) == JAG_OK);
    jag_release(c);
}

static void fuzz_jagged(fuzz_reader *r) {
    int64_t rows = fz_u8(r) % 12, d = fz_u8(r) % 3, batch = fz_u8(r) % 6;
    bool has_len = fz_u8(r) & 1;
    int64_t off[7], len[6];
    for (int64_t b = 0; b <= batch; b++) off[b] = fz_i64(r);
    for (int64_t b = 0; b < batch; b++) len[b] = fz_i64(r);
    int64_t vs[2] = {rows, d};
    jag_tensor *values = iota(vs, d ? 2 : 1), *o = ints(off, batch + 1), *l = has_len ? ints(len, batch) : NULL;
    /* the contract (jag.h, jag_nested_from_jagged) */
    bool valid = has_len ? off[0] >= 0 : off[0] == 0;
    for (int64_t b = 0; b < batch && valid; b++) {
        if (off[b + 1] < off[b]) valid = false;
        else if (has_len && (len[b] < 0 || len[b] > off[b + 1] - off[b])) valid = false;
    }
    if (valid) valid = has_len ? off[batch] <= rows : off[batch] == rows;
    long live = jag__live_tensors();
    jag_tensor *nt = NULL;
    jag_status st = jag_nested_from_jagged(values, o, l, &nt);
    FUZZ_CHECK((st == JAG_OK) == valid);
    if (st) {
        FUZZ_CHECK(nt == NULL && jag__live_tensors() == live && jag_last_error()[0]);
    } else {
        jag_tensor *parts[6];
        int n = 0;
        FUZZ_CHECK(jag_nested_unbind(nt, parts, 6, &n) == JAG_OK && n == batch);
        for (int b = 0; b < n; b++) {
            int64_t want = has_len ? len[b] : off[b + 1] - off[b];
            FUZZ_CHECK(jag_size(parts[b], 0) == want);
            for (int64_t i = 0; i < want; i++)
                for (int64_t k = 0; k < (d ? d : 1); k++) {
                    int64_t idx[2] = {i, k};
                    FUZZ_CHECK(at(parts[b], idx) == (double)((off[b] + i) * (d ? d : 1) + k));
                }
            jag_release(parts[b]);
        }
        exercise(nt);
        jag_release(nt);
    }
    jag_release(values), jag_release(o), jag_release(l);
}

static void fuzz_strided(fuzz_reader *r) {
    int64_t buflen = fz_u8(r) % 16, nd = fz_u8(r) % 3, batch = fz_u8(r) % 5;
    int64_t sz[10], sd[10], so[5];
    for (int64_t i = 0; i < batch * nd; i++) sz[i] = fz_i64(r), sd[i] = fz_i64(r);
    for (int64_t b = 0; b < batch; b++) so[b] = fz_i64(r);
    int64_t tab[2] = {batch, nd};
    jag_tensor *buf = iota(&buflen, 1), *tsz = NULL, *tsd = NULL, *tso = ints(so, batch);
    FUZZ_CHECK(jag_from_data(sz, tab, 2, JAG_INT64, &tsz) == JAG_OK);
    FUZZ_CHECK(jag_from_data(sd, tab, 2, JAG_INT64, &tsd) == JAG_OK);
    /* the contract: every component lies inside the buffer */
    bool valid = nd >= 1; /* components are at least 1-d */
    for (int64_t b = 0; b < batch && valid; b++) {
        if (so[b] < 0 || so[b] > buflen) valid = false;
        __int128 hi = so[b];
        bool empty = false;
        __int128 count = 1;
        for (int64_t k = 0; k < nd && valid; k++) {
            int64_t s = sz[b * nd + k], t = sd[b * nd + k];
            if (s < 0 || t < 0) valid = false;
            else {
                count *= s ? s : 1;
                if (count > INT64_MAX) valid = false;
                if (s == 0) empty = true;
                else hi += (__int128)(s - 1) * t;
            }
        }
        if (valid && !empty && hi >= buflen) valid = false;
    }
    jag_tensor *inner[4] = {buf, tsz, tsd, tso}, *nt = NULL;
    jag_subclass_meta meta = {.n_ints = 2, .ints = {JAG_STRIDED, 0}};
    long live = jag__live_tensors();
    jag_status st = jag_subclass_unflatten(jag_subclass_find("nested"), inner, 4, &meta, &nt);
    FUZZ_CHECK((st == JAG_OK) == valid);
    if (st) {
        FUZZ_CHECK(nt == NULL && jag__live_tensors() == live && jag_last_error()[0]);
    } else {
        jag_tensor *parts[5];
        int n = 0;
        FUZZ_CHECK(jag_nested_unbind(nt, parts, 5, &n) == JAG_OK && n == batch);
        for (int b = 0; b < n; b++) {
            int64_t total = 1;
            for (int64_t k = 0; k < nd; k++) total *= sz[b * nd + k]; /* fits: the constructor checked */
            /* stride 0 may give a component many elements: check a prefix */
            for (int64_t f = 0; f < total && f < 4096; f++) {
                int64_t idx[2] = {0, 0}, rem = f, want = so[b];
                for (int64_t k = nd - 1; k >= 0; k--) {
                    idx[k] = rem % sz[b * nd + k];
                    rem /= sz[b * nd + k];
                    want += idx[k] * sd[b * nd + k];
                }
                FUZZ_CHECK(at(parts[b], idx) == (double)want);
            }
            jag_release(parts[b]);
        }
        exercise(nt);
        jag_release(nt);
    }
    jag_release(buf), jag_release(tsz), jag_release(tsd), jag_release(tso);
}

static void fuzz_padded(fuzz_reader *r) {
    int64_t shape[3] = {fz_u8(r) % 5, fz_u8(r) % 6, 1 + fz_u8(r) % 3}, len[4];
    for (int64_t b = 0; b < shape[0]; b++) len[b] = fz_i64(r);
    jag_tensor *padded = iota(shape, 3), *l = NULL, *nt = NULL;
    bool i32 = fz_u8(r) & 1;
    if (i32) {
        int32_t l32[4];
        bool fits = true;
        for (int64_t b = 0; b < shape[0]; b++) {
            if (len[b] < INT32_MIN || len[b] > INT32_MAX) fits = false;
            l32[b] = (int32_t)len[b];
        }
        if (!fits) i32 = false;
        else FUZZ_CHECK(jag_from_data(l32, shape, 1, JAG_INT32, &l) == JAG_OK);
    }
    if (!i32) l = ints(len, shape[0]);
    bool valid = shape[0] > 0;
    for (int64_t b = 0; b < shape[0]; b++) valid = valid && len[b] >= 0 && len[b] <= shape[1];
    long live = jag__live_tensors();
    jag_status st = jag_nested_from_padded(padded, l, &nt);
    FUZZ_CHECK((st == JAG_OK) == valid);
    if (st) {
        FUZZ_CHECK(nt == NULL && jag__live_tensors() == live);
    } else {
        jag_tensor *parts[4];
        int n = 0;
        FUZZ_CHECK(jag_nested_unbind(nt, parts, 4, &n) == JAG_OK && n == shape[0]);
        for (int b = 0; b < n; b++) {
            FUZZ_CHECK(jag_size(parts[b], 0) == len[b]);
            for (int64_t i = 0; i < len[b]; i++)
                for (int64_t k = 0; k < shape[2]; k++) {
                    int64_t idx[2] = {i, k};
                    FUZZ_CHECK(at(parts[b], idx) == (double)((b * shape[1] + i) * shape[2] + k));
                }
            jag_release(parts[b]);
        }
        exercise(nt);
        jag_release(nt);
    }
    jag_release(padded), jag_release(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader r = {data, size};
    long live = jag__live_tensors();
    switch (fz_u8(&r) % 3) {
    case 0: fuzz_jagged(&r); break;
    case 1: fuzz_strided(&r); break;
    default: fuzz_padded(&r); break;
    }
    FUZZ_CHECK(jag__live_tensors() == live);
    return 0;
}
