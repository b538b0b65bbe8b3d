/* test_io.c — safetensors files: round trips of every dtype and both nested
 * layouts (holes, empty components) in copy and mmap modes, compared element
 * by element; files made by hand (the format, not jag_save, is the
 * reference); a table of malformed files, each with its expected status and
 * message; save errors; described files (a JSON description under a key
 * jag owns); regression tests for what fuzzing found. */
#include "test.h"
#include "io/json.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- files -------------------------------------------------------------- */

static char tmp_dir[256];

static const char *tmp_path(const char *name) {
    static char bufs[4][512];
    static int k;
    char *b = bufs[k++ % 4];
    if (!tmp_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp_dir, sizeof tmp_dir, "%s/jag_test_io_XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmp_dir)) {
            perror("mkdtemp");
            exit(2);
        }
    }
    snprintf(b, 512, "%s/%s", tmp_dir, name);
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    if (fread(p, 1, (size_t)len, f) != (size_t)len) len = 0;
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* A file image: 8-byte little-endian header length, header, data. */
static unsigned char *image(const char *header, const void *data, size_t data_len, size_t *n) {
    size_t h = strlen(header);
    *n = 8 + h + data_len;
    unsigned char *p = calloc(1, *n + 1);
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(p + 8, header, h);
    if (data_len && data) memcpy(p + 8 + h, data, data_len);
    return p;
}

/* ---- comparison helpers ------------------------------------------------- */

static bool same_dense(const jag_tensor *a, const jag_tensor *b) {
    if (jag_tensor_dtype(a) != jag_tensor_dtype(b) || !t_same_shape(a, b)) {
        fprintf(stderr, "same_dense: dtype or shape differ\n");
        return false;
    }
    int64_t n = jag_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = t_get(a, i), y = t_get(b, i);
        if (!(x == y || (isnan(x) && isnan(y)))) {
            fprintf(stderr, "same_dense: element %lld: %.17g vs %.17g\n", (long long)i, x, y);
            return false;
        }
    }
    return true;
}

/* Same layout and every component equal, element by element. */
static bool same_nested(const jag_tensor *a, const jag_tensor *b) {
    if (jag_tensor_layout(a) != jag_tensor_layout(b) || jag_tensor_dtype(a) != jag_tensor_dtype(b) ||
        jag_ndim(a) != jag_ndim(b) || jag_nested_batch_size(a) != jag_nested_batch_size(b)) {
        fprintf(stderr, "same_nested: layout, dtype, ndim or batch differ\n");
        return false;
    }
    jag_tensor *ca[16], *cb[16];
    int na = 0, nb = 0;
    if (jag_nested_unbind(a, ca, 16, &na) || jag_nested_unbind(b, cb, 16, &nb)) return false;
    bool ok = na == nb;
    for (int i = 0; i < na && ok; i++) ok = same_dense(ca[i], cb[i]);
    for (int i = 0; i < na; i++) jag_release(ca[i]);
    for (int i = 0; i < nb; i++) jag_release(cb[i]);
    return ok;
}

static jag_tensor *i64_tensor(const int64_t *v, int64_t n) {
    jag_tensor *t = NULL;
    if (jag_from_data(v, &n, 1, JAG_INT64, &t)) exit(2);
    return t;
}

/* ---- a file made by hand ------------------------------------------------ */

static void test_hand_made_file(void) {
    TEST_BEGIN();
    /* b: I64 [2] = {7, -3} at [0, 16); a: F32 [2, 2] at [16, 32); c: BOOL [3]
     * at [32, 35) with a byte 5 (true); __metadata__ first, as safetensors
     * writes it when given */
    unsigned char data[35] = {0};
    int64_t b[2] = {7, -3};
    float a[4] = {1.5f, -2.0f, 0.0f, 3.25f};
    memcpy(data, b, 16);
    memcpy(data + 16, a, 16);
    data[32] = 1, data[33] = 0, data[34] = 5;
    const char *header = "{\"__metadata__\":{\"format\":\"pt\",\"who\":\"\\u00e9t\\u00e9\"},"
                         "\"b\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                         "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,32]},"
                         "\"c\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[32,35]}}";
    /* padded with spaces to 8 bytes, so the data is aligned (mmap views it) */
    char padded[512];
    snprintf(padded, sizeof padded, "%s", header);
    while (strlen(padded) % 8) strcat(padded, " ");
    size_t n;
    unsigned char *img = image(padded, data, sizeof data, &n);
    const char *path = tmp_path("hand.safetensors");
    write_bytes(path, img, n);
    for (int mode = 0; mode < 3; mode++) {
        jag_tensor_set *set = NULL;
        if (mode == 2) CHECK_OK(jag_load_buffer(img, n, JAG_LOAD_COPY, &set));
        else CHECK_OK(jag_load(path, mode ? JAG_LOAD_MMAP : JAG_LOAD_COPY, &set));
        if (!set) continue;
        CHECK(jag_tensor_set_count(set) == 3);
        CHECK(strcmp(jag_tensor_set_name(set, 0), "a") == 0 && strcmp(jag_tensor_set_name(set, 2), "c") == 0);
        jag_tensor *ta = jag_tensor_set_find(set, "a"), *tb = jag_tensor_set_find(set, "b"),
                   *tc = jag_tensor_set_find(set, "c");
        CHECK(ta && tb && tc && !jag_tensor_set_find(set, "d"));
        CHECK(jag_tensor_dtype(ta) == JAG_FLOAT32 && jag_ndim(ta) == 2 && jag_size(ta, 1) == 2);
        for (int i = 0; i < 4; i++) CHECK(t_get(ta, i) == a[i]);
        CHECK(jag_tensor_dtype(tb) == JAG_INT64 && t_get(tb, 0) == 7 && t_get(tb, 1) == -3);
        /* bool bytes other than 0/1 read as true, stored as 1 */
        CHECK(jag_tensor_dtype(tc) == JAG_BOOL && t_get(tc, 0) == 1 && t_get(tc, 1) == 0 && t_get(tc, 2) == 1);
        CHECK(((const unsigned char *)jag_data(tc))[2] == 1);
        CHECK(jag_is_read_only(ta) == (mode == 1));
        CHECK(jag_tensor_set_metadata_count(set) == 2);
        CHECK(strcmp(jag_tensor_set_metadata_key(set, 0), "format") == 0 &&
              strcmp(jag_tensor_set_metadata_value(set, 0), "pt") == 0);
        CHECK(strcmp(jag_tensor_set_metadata_value(set, 1), "\xc3\xa9t\xc3\xa9") == 0);
        CHECK(jag_tensor_set_name(set, 3) == NULL && jag_tensor_set_get(set, -1) == NULL);
        jag_tensor_set_free(set);
    }
    /* the mapping is private: fixing the bool byte did not touch the file */
    size_t m;
    unsigned char *back = read_bytes(path, &m);
    CHECK(m == n && memcmp(back, img, n) == 0);
    free(back);
    free(img);
    jag_tensor_set_free(NULL);
}

/* jag_save writes exactly the bytes the format prescribes. */
static void test_save_bytes(void) {
    TEST_BEGIN();
    float v[2] = {1.0f, 2.0f};
    int32_t w[1] = {-1};
    int64_t s2 = 2, s1 = 1;
    jag_tensor *a = NULL, *b = NULL;
    CHECK_OK(jag_from_data(w, &s1, 1, JAG_INT32, &b));
    CHECK_OK(jag_from_data(v, &s2, 1, JAG_FLOAT32, &a));
    const char *names[] = {"b", "a"};
    jag_tensor *ts[] = {b, a};
    const char *meta[] = {"k", "v\"q"};
    const char *path = tmp_path("bytes.safetensors");
    CHECK_OK(jag_save(path, names, ts, 2, meta, 1));
    /* same element size: the given order */
    const char *want = "{\"__metadata__\":{\"k\":\"v\\\"q\"},\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    size_t hl = strlen(want), padded = (hl + 7) / 8 * 8, n;
    unsigned char *got = read_bytes(path, &n);
    CHECK(n == 8 + padded + 12);
    uint64_t len = 0;
    for (int i = 7; i >= 0; i--) len = len << 8 | got[i];
    CHECK(len == padded);
    CHECK(memcmp(got + 8, want, hl) == 0);
    for (size_t i = hl; i < padded; i++) CHECK(got[8 + i] == ' ');
    CHECK(memcmp(got + 8 + padded, w, 4) == 0 && memcmp(got + 8 + padded + 4, v, 8) == 0);
    free(got);
    jag_release(a), jag_release(b);
}

/* ---- round trips -------------------------------------------------------- */

static void test_round_trip_dtypes(void) {
    TEST_BEGIN();
    int64_t s23[2] = {2, 3}, s0[2] = {0, 4}, s5 = 5;
    const char *names[3 * JAG_DTYPE_COUNT];
    jag_tensor *ts[3 * JAG_DTYPE_COUNT];
    char namebuf[3 * JAG_DTYPE_COUNT][32];
    int n = 0;
    for (int d = 0; d < JAG_DTYPE_COUNT; d++) {
        jag_dtype dt = (jag_dtype)d;
        snprintf(namebuf[n], 32, "%s_mat", jag_dtype_name(dt));
        ts[n] = t_rand(s23, 2, dt, -50, 50, 10 + (uint64_t)d);
        names[n] = namebuf[n], n++;
        snprintf(namebuf[n], 32, "%s_empty", jag_dtype_name(dt));
        CHECK_OK(jag_zeros(s0, 2, dt, &ts[n]));
        names[n] = namebuf[n], n++;
    }
    /* 0-d, non-contiguous, a float64 with NaN and inf */
    CHECK_OK(jag_full(NULL, 0, 2.5, JAG_FLOAT64, &ts[n]));
    names[n++] = "scalar";
    jag_tensor *base = t_rand(s23, 2, JAG_FLOAT32, -1, 1, 77);
    ts[n] = t_noncontig(base);
    names[n++] = "noncontig";
    jag_release(base);
    double special[5] = {NAN, INFINITY, -INFINITY, -0.0, 1e308};
    CHECK_OK(jag_from_data(special, &s5, 1, JAG_FLOAT64, &ts[n]));
    names[n++] = "special";
    const char *path = tmp_path("dtypes.safetensors");
    CHECK_OK(jag_save(path, names, ts, n, NULL, 0));
    for (int mode = 0; mode < 2; mode++) {
        jag_tensor_set *set = NULL;
        CHECK_OK(jag_load(path, mode ? JAG_LOAD_MMAP : JAG_LOAD_COPY, &set));
        if (!set) continue;
        CHECK(jag_tensor_set_count(set) == n);
        for (int i = 0; i < n; i++) {
            jag_tensor *t = jag_tensor_set_find(set, names[i]);
            CHECK_MSG(t && same_dense(t, ts[i]), "tensor %s, mode %d", names[i], mode);
            /* every tensor in a jag-written file is aligned: mmap views them all */
            if (t) CHECK(jag_is_read_only(t) == (mode == 1));
        }
        jag_tensor_set_free(set);
    }
    for (int i = 0; i < n; i++) jag_release(ts[i]);
}

static void test_mmap_lifetime_and_read_only(void) {
    TEST_BEGIN();
    int64_t s[2] = {4, 3};
    jag_tensor *x = t_rand(s, 2, JAG_FLOAT32, -1, 1, 5);
    const char *names[] = {"x"};
    const char *path = tmp_path("mmap.safetensors");
    CHECK_OK(jag_save(path, names, &x, 1, NULL, 0));
    size_t n0;
    unsigned char *before = read_bytes(path, &n0);
    jag_tensor_set *set = NULL;
    CHECK_OK(jag_load(path, JAG_LOAD_MMAP, &set));
    jag_tensor *y = jag_retain(jag_tensor_set_get(set, 0)), *v = NULL;
    jag_tensor_set_free(set); /* y keeps the mapping alive */
    CHECK(same_dense(y, x));
    CHECK_ERR(jag_fill_(y, 1.0), JAG_EINVAL, "read-only");
    CHECK_OK(jag_narrow(y, 0, 1, 2, &v));
    CHECK(jag_is_read_only(v));
    CHECK_ERR(jag_copy_(v, x), JAG_EINVAL, "read-only");
    /* ops on mapped tensors make ordinary writable results */
    jag_tensor *z = NULL;
    CHECK_OK(jag_neg(y, &z));
    CHECK(z && !jag_is_read_only(z));
    /* a write that bypasses jag stays in this process (private mapping) */
    ((float *)jag_data(y))[0] = 12345.0f;
    CHECK(t_get(y, 0) == 12345.0f);
    jag_release(y);
    CHECK(t_get(v, 0) == t_get(x, 3)); /* the view outlives y */
    jag_release(v);
    size_t n1;
    unsigned char *after = read_bytes(path, &n1);
    CHECK(n0 == n1 && memcmp(before, after, n0) == 0);
    free(before), free(after);
    jag_release(z), jag_release(x);
}

static void test_round_trip_jagged(void) {
    TEST_BEGIN();
    /* plain jagged with an empty component */
    int64_t lens[4] = {2, 0, 3, 1};
    jag_tensor *items[4];
    for (int i = 0; i < 4; i++) {
        int64_t s[2] = {lens[i], 3};
        items[i] = t_rand(s, 2, JAG_FLOAT64, -1, 1, 40 + (uint64_t)i);
    }
    jag_tensor *a = NULL, *holes = NULL, *ints = NULL, *empty = NULL;
    CHECK_OK(jag_nested_from_list(items, 4, JAG_JAGGED, &a));
    /* with holes: offsets that start late, end early, and lengths */
    int64_t vs[2] = {10, 2}, off[4] = {1, 4, 4, 9}, len[3] = {2, 0, 5};
    jag_tensor *values = t_rand(vs, 2, JAG_FLOAT32, -3, 3, 9);
    jag_tensor *o = i64_tensor(off, 4), *l = i64_tensor(len, 3);
    CHECK_OK(jag_nested_from_jagged(values, o, l, &holes));
    /* int32 jagged 1-d components */
    int64_t vs1 = 5, off1[3] = {0, 5, 5};
    jag_tensor *iv = t_rand(&vs1, 1, JAG_INT32, -100, 100, 3), *io = i64_tensor(off1, 3);
    CHECK_OK(jag_nested_from_jagged(iv, io, NULL, &ints));
    /* no components at all */
    int64_t vs0[2] = {0, 4}, off0 = 0;
    jag_tensor *ev = NULL, *eo = i64_tensor(&off0, 1);
    CHECK_OK(jag_zeros(vs0, 2, JAG_BOOL, &ev));
    CHECK_OK(jag_nested_from_jagged(ev, eo, NULL, &empty));
    int64_t ds = 3;
    jag_tensor *dense = t_rand(&ds, 1, JAG_INT64, 0, 9, 1);
    const char *names[] = {"a", "holes", "ints", "empty", "dense"};
    jag_tensor *ts[] = {a, holes, ints, empty, dense};
    const char *path = tmp_path("jagged.safetensors");
    CHECK_OK(jag_save(path, names, ts, 5, NULL, 0));
    for (int mode = 0; mode < 2; mode++) {
        jag_tensor_set *set = NULL;
        CHECK_OK(jag_load(path, mode ? JAG_LOAD_MMAP : JAG_LOAD_COPY, &set));
        if (!set) continue;
        CHECK(jag_tensor_set_count(set) == 5); /* inner tensors are not listed */
        CHECK(!jag_tensor_set_find(set, "a.values") && !jag_tensor_set_find(set, "holes.lengths"));
        for (int i = 0; i < 4; i++) {
            jag_tensor *t = jag_tensor_set_find(set, names[i]);
            CHECK_MSG(t && jag_tensor_layout(t) == JAG_JAGGED && same_nested(t, ts[i]), "%s mode %d", names[i], mode);
        }
        jag_tensor *h = jag_tensor_set_find(set, "holes"), *hl = NULL, *ho = NULL;
        CHECK_OK(jag_nested_lengths(h, &hl));
        CHECK_OK(jag_nested_offsets(h, &ho));
        CHECK(hl && same_dense(hl, l) && ho && same_dense(ho, o));
        CHECK(jag_nested_max_seqlen(h) == 5 && jag_nested_min_seqlen(h) == 0);
        jag_release(hl), jag_release(ho);
        CHECK(jag_nested_batch_size(jag_tensor_set_find(set, "empty")) == 0);
        CHECK(same_dense(jag_tensor_set_find(set, "dense"), dense));
        jag_tensor_set_free(set);
    }
    for (int i = 0; i < 4; i++) jag_release(items[i]);
    jag_release(a), jag_release(holes), jag_release(ints), jag_release(empty), jag_release(dense);
    jag_release(values), jag_release(o), jag_release(l), jag_release(iv), jag_release(io), jag_release(ev), jag_release(eo);
}

static void test_round_trip_strided(void) {
    TEST_BEGIN();
    int64_t s0[2] = {2, 3}, s1[2] = {0, 5}, s2[2] = {4, 1};
    jag_tensor *items[3] = {t_rand(s0, 2, JAG_FLOAT32, -1, 1, 1), t_rand(s1, 2, JAG_FLOAT32, -1, 1, 2),
                            t_rand(s2, 2, JAG_FLOAT32, -1, 1, 3)};
    jag_tensor *nt = NULL, *tr = NULL, *bt = NULL;
    CHECK_OK(jag_nested_from_list(items, 3, JAG_STRIDED, &nt));
    /* a transposed strided tensor: the tables describe non-contiguous components */
    CHECK_OK(jag_transpose(nt, 1, 2, &tr));
    jag_tensor *bitems[2];
    int64_t b0 = 3, b1 = 1;
    bitems[0] = t_rand(&b0, 1, JAG_BOOL, 0, 1, 4), bitems[1] = t_rand(&b1, 1, JAG_BOOL, 0, 1, 5);
    CHECK_OK(jag_nested_from_list(bitems, 2, JAG_STRIDED, &bt));
    const char *names[] = {"s", "t", "b"};
    jag_tensor *ts[] = {nt, tr, bt};
    const char *meta[] = {"note", "strided"};
    const char *path = tmp_path("strided.safetensors");
    CHECK_OK(jag_save(path, names, ts, 3, meta, 1));
    for (int mode = 0; mode < 2; mode++) {
        jag_tensor_set *set = NULL;
        CHECK_OK(jag_load(path, mode ? JAG_LOAD_MMAP : JAG_LOAD_COPY, &set));
        if (!set) continue;
        CHECK(jag_tensor_set_count(set) == 3);
        for (int i = 0; i < 3; i++) {
            jag_tensor *t = jag_tensor_set_find(set, names[i]);
            CHECK_MSG(t && jag_tensor_layout(t) == JAG_STRIDED && same_nested(t, ts[i]), "%s mode %d", names[i], mode);
        }
        CHECK(jag_tensor_set_metadata_count(set) == 1 && strcmp(jag_tensor_set_metadata_value(set, 0), "strided") == 0);
        jag_tensor_set_free(set);
    }
    for (int i = 0; i < 3; i++) jag_release(items[i]);
    jag_release(bitems[0]), jag_release(bitems[1]);
    jag_release(nt), jag_release(tr), jag_release(bt);
}

/* A tensor that is not aligned in the file is copied even in mmap mode. */
static void test_misaligned_is_copied(void) {
    TEST_BEGIN();
    unsigned char data[9] = {1};
    int64_t v = -42;
    memcpy(data + 1, &v, 8);
    const char *header = "{\"f\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]},"
                         "\"g\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[1,9]}}";
    size_t n;
    unsigned char *img = image(header, data, sizeof data, &n);
    const char *path = tmp_path("misaligned.safetensors");
    write_bytes(path, img, n);
    jag_tensor_set *set = NULL;
    CHECK_OK(jag_load(path, JAG_LOAD_MMAP, &set));
    jag_tensor *g = jag_tensor_set_find(set, "g");
    CHECK(g && jag_ndim(g) == 0 && t_get(g, 0) == -42);
    CHECK(g && ((uintptr_t)jag_data(g) % 8) == 0 && !jag_is_read_only(g));
    jag_tensor_set_free(set);
    free(img);
}

/* ---- save errors -------------------------------------------------------- */

static void test_save_errors(void) {
    TEST_BEGIN();
    int64_t s = 3;
    jag_tensor *x = t_rand(&s, 1, JAG_FLOAT32, 0, 1, 1), *m = NULL, *sc = NULL, *scale = NULL, *nt = NULL;
    CHECK_OK(jag_meta_tensor(&s, 1, JAG_FLOAT32, &m));
    CHECK_OK(jag_full(NULL, 0, 2.0, JAG_FLOAT32, &scale));
    CHECK_OK(jag_scaled_new(x, scale, &sc));
    int64_t lens[2] = {1, 2};
    jag_tensor *items[2];
    for (int i = 0; i < 2; i++) {
        int64_t sz[1] = {lens[i]};
        items[i] = t_rand(sz, 1, JAG_FLOAT32, 0, 1, 3 + (uint64_t)i);
    }
    CHECK_OK(jag_nested_from_list(items, 2, JAG_JAGGED, &nt));
    const char *path = tmp_path("errors.safetensors");
    const char *one[] = {"x"}, *two[] = {"x", "x"}, *clash[] = {"n", "n.offsets"}, *reserved[] = {"__metadata__"},
               *empty[] = {""}, *bad_utf8[] = {"\xff"};
    jag_tensor *xs[] = {x, x}, *clash_ts[] = {nt, x};
    /* an existing file that failed saves must leave alone */
    CHECK_OK(jag_save(path, one, &x, 1, NULL, 0));
    size_t n0;
    unsigned char *before = read_bytes(path, &n0);
    CHECK_ERR(jag_save(path, one, xs, 0, NULL, 0), JAG_EINVAL, "n >= 1");
    CHECK_ERR(jag_save(NULL, one, xs, 1, NULL, 0), JAG_EINVAL, "'path'");
    CHECK_ERR(jag_save(path, two, xs, 2, NULL, 0), JAG_EINVAL, "'x' is given twice");
    CHECK_ERR(jag_save(path, clash, clash_ts, 2, NULL, 0), JAG_EINVAL, "'n.offsets' is given twice");
    CHECK_ERR(jag_save(path, reserved, xs, 1, NULL, 0), JAG_EINVAL, "'__metadata__'");
    CHECK_ERR(jag_save(path, empty, xs, 1, NULL, 0), JAG_EINVAL, "NULL or empty");
    CHECK_ERR(jag_save(path, bad_utf8, xs, 1, NULL, 0), JAG_EINVAL, "UTF-8");
    CHECK_ERR(jag_save(path, one, &m, 1, NULL, 0), JAG_EINVAL, "meta tensor");
    CHECK_ERR(jag_save(path, one, &sc, 1, NULL, 0), JAG_ENOTIMPL, "scaled tensor");
    const char *jag_key[] = {"jag.nested.x", "{}"}, *dup_keys[] = {"a", "1", "a", "2"};
    CHECK_ERR(jag_save(path, one, xs, 1, jag_key, 1), JAG_EINVAL, "reserves");
    CHECK_ERR(jag_save(path, one, xs, 1, dup_keys, 2), JAG_EINVAL, "'a' is given twice");
    CHECK_ERR(jag_save(path, one, xs, 1, NULL, 1), JAG_EINVAL, "'metadata'");
    CHECK_ERR(jag_save(tmp_path("no/such/dir/f"), one, xs, 1, NULL, 0), JAG_ESTATE, "cannot create");
    size_t n1;
    unsigned char *after = read_bytes(path, &n1);
    CHECK(n0 == n1 && memcmp(before, after, n0) == 0);
    free(before), free(after);
    jag_tensor_set *set = NULL;
    CHECK_ERR(jag_load(tmp_path("missing.safetensors"), 0, &set), JAG_ESTATE, "cannot open");
    CHECK_ERR(jag_load(tmp_dir, 0, &set), JAG_ESTATE, "not a regular file");
    CHECK_ERR(jag_load(path, 8, &set), JAG_EINVAL, "'flags'");
    CHECK_ERR(jag_load_buffer("", 0, JAG_LOAD_MMAP, &set), JAG_EINVAL, "JAG_LOAD_COPY");
    CHECK(set == NULL);
    jag_release(x), jag_release(m), jag_release(sc), jag_release(scale), jag_release(nt);
    jag_release(items[0]), jag_release(items[1]);
}

/* ---- malformed files ---------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    const char *header;
    size_t data_len;      /* bytes after the header (zeros, after `prefix`) */
    const int64_t *prefix; /* int64 values written at the start of the data */
    int n_prefix;
    jag_status status;
    const char *fragment;
} bad_case;

static const int64_t off_0_5[2] = {0, 5};
static const int64_t strided_far[5] = {/* sizes */ 2, /* strides */ 3, /* offsets */ 0, 0, 0};
static const int64_t strided_overflow[5] = {INT64_MAX, 4, 0, 0, 0};
static const int64_t negative_offset[5] = {0, 1, -8, 0, 0};

#define T(name, dtype, shape, b, e) "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"
#define NESTED(name, json) "\"__metadata__\":{\"jag.nested." name "\":\"" json "\"}"
#define STRIDED_PARTS(buf_shape, buf_end)                                                                      \
    T("s.nested_sizes", "I64", "[1,1]", 0, 8) "," T("s.nested_strides", "I64", "[1,1]", 8, 16) ","               \
    T("s.storage_offsets", "I64", "[1]", 16, 24) "," T("s.buffer", "F32", buf_shape, 24, buf_end)

static const bad_case bad_cases[] = {
    {"invalid JSON", "{\"a\":}", 0, NULL, 0, JAG_EINVAL, "the header is not valid JSON at byte 5: expected a value"},
    {"trailing garbage", "{} x", 0, NULL, 0, JAG_EINVAL, "expected the end of the text after the value, got 'x'"},
    {"unterminated string", "{\"a", 0, NULL, 0, JAG_EINVAL, "closing the string"},
    {"raw control char", "{\"a\tb\":{}}", 0, NULL, 0, JAG_EINVAL, "raw control characters"},
    {"lone surrogate", "{\"\\udc00\":{}}", 0, NULL, 0, JAG_EINVAL, "lone low surrogate"},
    {"NUL escape", "{\"a\\u0000\":{}}", 0, NULL, 0, JAG_EINVAL, "other than \\u0000"},
    {"invalid UTF-8", "{\"\xc3\x28\":{}}", 0, NULL, 0, JAG_EINVAL, "expected valid UTF-8"},
    {"overlong UTF-8", "{\"\xe0\x80\xaf\":{}}", 0, NULL, 0, JAG_EINVAL, "expected valid UTF-8"},
    {"leading zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, NULL, 0, JAG_EINVAL,
     "no digit after a leading 0"},
    {"deep nesting", "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 0, NULL, 0,
     JAG_EINVAL, "nests JSON deeper than 32 levels"},
    {"root not an object", "[1, 2]", 0, NULL, 0, JAG_EINVAL, "the header is an array, expected a JSON object"},
    {"entry not an object", "{\"a\":3}", 0, NULL, 0, JAG_EINVAL, "tensor 'a': expected an object with dtype, shape and data_offsets, got an integer"},
    {"unknown dtype", "{" T("w", "X9", "[1]", 0, 4) "}", 4, NULL, 0, JAG_EDTYPE, "tensor 'w': unknown dtype 'X9', expected F32"},
    {"dtype jag lacks", "{" T("h", "I16", "[2]", 0, 4) "}", 4, NULL, 0, JAG_EDTYPE, "tensor 'h': dtype 'I16' has no jag equivalent"},
    {"dtype not a string", "{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NULL, 0, JAG_EINVAL,
     "field 'dtype' is an integer, expected a string"},
    {"missing field", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NULL, 0, JAG_EINVAL, "tensor 'w': field 'dtype' is missing"},
    {"unknown field", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"foo\":1}}", 4, NULL, 0, JAG_EINVAL,
     "tensor 'w': unknown field 'foo'"},
    {"repeated field", "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NULL, 0,
     JAG_EINVAL, "field 'dtype' appears twice"},
    {"shape overflow", "{" T("big", "F32", "[4294967296,4294967296,4]", 0, 4) "}", 4, NULL, 0, JAG_EOVERFLOW,
     "tensor 'big': shape [4294967296, 4294967296, 4] of F32 overflows"},
    /* fuzz regression: sizes around a 0 whose product overflows */
    {"shape overflow around a zero", "{" T("e", "F32", "[1099511627776,0,1099511627776]", 0, 0) "}", 0, NULL, 0,
     JAG_EOVERFLOW, "tensor 'e': shape [1099511627776, 0, 1099511627776] of F32 overflows"},
    {"shape overflow by bytes", "{" T("big", "F64", "[1152921504606846976]", 0, 8) "}", 8, NULL, 0, JAG_EOVERFLOW, "overflows"},
    {"huge integer", "{" T("big", "F32", "[99999999999999999999999]", 0, 4) "}", 4, NULL, 0, JAG_EINVAL,
     "field 'shape' entry 0 is a non-integer number, expected a size >= 0"},
    {"negative size", "{" T("n", "F32", "[-1]", 0, 0) "}", 0, NULL, 0, JAG_EINVAL, "tensor 'n': field 'shape' entry 0 is negative"},
    {"fractional size", "{" T("n", "F32", "[2.5]", 0, 0) "}", 0, NULL, 0, JAG_EINVAL, "entry 0 is a non-integer number"},
    {"too many dims", "{" T("n", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4, NULL, 0, JAG_EINVAL, "has 9 dims, expected at most 8"},
    {"offsets out of order", "{" T("a", "F32", "[2]", 8, 0) "}", 8, NULL, 0, JAG_EINVAL,
     "tensor 'a': data_offsets [8, 0] are out of order, expected begin <= end"},
    {"offsets not a pair", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, NULL, 0, JAG_EINVAL,
     "expected an array [begin, end]"},
    {"negative offset", "{" T("a", "F32", "[1]", -4, 0) "}", 4, NULL, 0, JAG_EINVAL, "two integers >= 0"},
    {"offsets past the end", "{" T("a", "F32", "[4]", 0, 16) "}", 8, NULL, 0, JAG_EINVAL,
     "tensor 'a': data_offsets [0, 16] reach past the end of the data (8 bytes)"},
    {"offsets past the end, huge", "{" T("a", "F32", "[1]", 18446744073709551612, 18446744073709551616) "}", 4, NULL, 0,
     JAG_EINVAL, "two integers >= 0"},
    {"size mismatch", "{" T("a", "F32", "[2,2]", 0, 12) "}", 12, NULL, 0, JAG_EINVAL,
     "tensor 'a': data_offsets [0, 12] hold 12 bytes, expected 16 (F32 [2, 2])"},
    {"overlap", "{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 4, 12) "}", 12, NULL, 0, JAG_EINVAL,
     "tensor 'b': data_offsets [4, 12] overlap tensor 'a' ([0, 8])"},
    {"same bytes twice", "{" T("a", "F32", "[2]", 0, 8) "," T("b", "I32", "[2]", 0, 8) "}", 8, NULL, 0, JAG_EINVAL, "overlap tensor"},
    {"hole", "{" T("a", "F32", "[1]", 0, 4) "," T("b", "F32", "[1]", 8, 12) "}", 12, NULL, 0, JAG_EINVAL,
     "tensor 'b': data_offsets begin at 8, expected 4 (bytes [4, 8) of the data belong to no tensor)"},
    {"data not covered", "{" T("a", "F32", "[2]", 0, 8) "}", 12, NULL, 0, JAG_EINVAL,
     "the data has 12 bytes but the tensors cover 8"},
    {"duplicate names", "{" T("a", "F32", "[1]", 0, 4) "," T("a", "F32", "[1]", 4, 8) "}", 8, NULL, 0, JAG_EINVAL,
     "tensor 'a' appears twice in the header"},
    {"metadata not an object", "{\"__metadata__\":[],\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, NULL, 0,
     JAG_EINVAL, "__metadata__ is an array, expected an object of strings"},
    {"metadata value not a string", "{\"__metadata__\":{\"k\":1}}", 0, NULL, 0, JAG_EINVAL,
     "__metadata__ entry 'k' is an integer, expected a string"},
    {"metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, NULL, 0, JAG_EINVAL, "__metadata__ twice"},
    {"metadata key twice", "{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"}}", 0, NULL, 0, JAG_EINVAL,
     "__metadata__ has the key 'k' twice"},
    /* nested metadata that does not match its inner tensors */
    {"jagged offsets past the values",
     "{" NESTED("x", "{\\\"layout\\\":\\\"jagged\\\",\\\"ragged_idx\\\":1}") "," T("x.offsets", "I64", "[2]", 0, 16) ","
     T("x.values", "F32", "[3]", 16, 28) "}", 28, off_0_5, 2, JAG_EINVAL,
     "nested tensor 'x' (jagged) does not fit its inner tensors: jag_nested_from_jagged: argument 'offsets' ends at 5, expected values.size(0) = 3"},
    {"jagged offsets of the wrong dtype",
     "{" NESTED("x", "{\\\"layout\\\":\\\"jagged\\\"}") "," T("x.offsets", "I32", "[2]", 12, 20) ","
     T("x.values", "F32", "[3]", 0, 12) "}", 20, NULL, 0, JAG_EDTYPE, "argument 'offsets' has dtype int32, expected int64"},
    {"jagged lengths too long",
     "{" NESTED("x", "{\\\"layout\\\":\\\"jagged\\\"}") "," T("x.offsets", "I64", "[2]", 0, 16) ","
     T("x.lengths", "I64", "[1]", 16, 24) "," T("x.values", "F32", "[5]", 24, 44) "}", 44,
     (const int64_t[]){0, 2, 3}, 3, JAG_EINVAL, "argument 'lengths' entry 0 is 3, expected 0..2"},
    {"jagged values missing", "{" NESTED("x", "{\\\"layout\\\":\\\"jagged\\\"}") "," T("x.offsets", "I64", "[1]", 0, 8) "}", 8,
     NULL, 0, JAG_EINVAL, "nested tensor 'x' (jagged): tensor 'x.values' is missing from the file"},
    {"unknown layout", "{" NESTED("x", "{\\\"layout\\\":\\\"coo\\\"}") "}", 0, NULL, 0, JAG_EINVAL,
     "field 'layout' is \"coo\", expected \"jagged\" or \"strided\""},
    {"layout missing", "{" NESTED("x", "{}") "}", 0, NULL, 0, JAG_EINVAL, "field 'layout' is missing"},
    {"ragged_idx past the values' dims",
     "{" NESTED("x", "{\\\"layout\\\":\\\"jagged\\\",\\\"ragged_idx\\\":2}") "," T("x.offsets", "I64", "[2]", 0, 16) ","
     T("x.values", "F32", "[3]", 16, 28) "}", 28, off_0_5, 2, JAG_EINVAL,
     "nested tensor 'x' (jagged) does not fit its inner tensors: ragged_idx 2, expected 1..1 for values with 1 dims"},
    {"ragged_idx of the batch dim", "{" NESTED("x", "{\\\"layout\\\":\\\"jagged\\\",\\\"ragged_idx\\\":0}") "}", 0, NULL, 0,
     JAG_EINVAL, "field 'ragged_idx' is 0, expected >= 1 (dim 0 is the batch)"},
    {"nested metadata not JSON", "{" NESTED("x", "{layout}") "}", 0, NULL, 0, JAG_EINVAL,
     "metadata 'jag.nested.x' is not valid JSON at byte 1"},
    {"nested metadata unknown field", "{" NESTED("x", "{\\\"layout\\\":\\\"jagged\\\",\\\"q\\\":1}") "}", 0, NULL, 0, JAG_EINVAL,
     "an unknown field 'q'"},
    {"nested and dense under one name",
     "{" NESTED("x", "{\\\"layout\\\":\\\"jagged\\\"}") "," T("x.offsets", "I64", "[1]", 0, 8) ","
     T("x.values", "F32", "[0]", 8, 8) "," T("x", "F32", "[1]", 8, 12) "}", 12, NULL, 0, JAG_EINVAL,
     "the name 'x' is both a tensor and a nested tensor"},
    {"strided component outside the buffer",
     "{" NESTED("s", "{\\\"layout\\\":\\\"strided\\\"}") "," STRIDED_PARTS("[3]", 36) "}", 36, strided_far, 3, JAG_EINVAL,
     "nested tensor 's' (strided) does not fit its inner tensors: nested unflatten: component 0 reaches outside the buffer"},
    {"strided sizes x strides overflow",
     "{" NESTED("s", "{\\\"layout\\\":\\\"strided\\\"}") "," STRIDED_PARTS("[3]", 36) "}", 36, strided_overflow, 3, JAG_EINVAL,
     "component 0 reaches outside the buffer"},
    {"strided empty component at a negative offset",
     "{" NESTED("s", "{\\\"layout\\\":\\\"strided\\\"}") "," STRIDED_PARTS("[3]", 36) "}", 36, negative_offset, 3, JAG_EINVAL,
     "component 0"},
    {"strided table missing", "{" NESTED("s", "{\\\"layout\\\":\\\"strided\\\"}") "," T("s.buffer", "F32", "[1]", 0, 4) "}", 4,
     NULL, 0, JAG_EINVAL, "tensor 's.nested_sizes' is missing"},
    {"strided table of the wrong shape",
     "{" NESTED("s", "{\\\"layout\\\":\\\"strided\\\"}") "," T("s.nested_sizes", "I64", "[2]", 0, 16) ","
     T("s.nested_strides", "I64", "[1,1]", 16, 24) "," T("s.storage_offsets", "I64", "[1]", 24, 32) ","
     T("s.buffer", "F32", "[1]", 32, 36) "}", 36, NULL, 0, JAG_EINVAL, "contiguous int64 tables (B, n)"},
};

static void check_bad_image(const char *what, const unsigned char *img, size_t n, jag_status status, const char *fragment) {
    const char *path = tmp_path("bad.safetensors");
    write_bytes(path, img, n);
    for (int mode = 0; mode < 3; mode++) {
        jag_tensor_set *set = NULL;
        long live = jag__live_tensors();
        jag_status st = mode == 2 ? jag_load_buffer(img, n, JAG_LOAD_COPY, &set)
                                  : jag_load(path, mode ? JAG_LOAD_MMAP : JAG_LOAD_COPY, &set);
        CHECK_MSG(st == status, "%s (mode %d): got %s, expected %s: %s", what, mode, jag_status_str(st),
                  jag_status_str(status), jag_last_error());
        CHECK_MSG(strstr(jag_last_error(), fragment) != NULL, "%s (mode %d): message '%s' lacks '%s'", what, mode,
                  jag_last_error(), fragment);
        CHECK_MSG(strncmp(jag_last_error(), "jag_load", 8) == 0, "%s: message '%s' does not name jag_load", what,
                  jag_last_error());
        CHECK_MSG(set == NULL, "%s: out written on failure", what);
        CHECK_MSG(jag__live_tensors() == live, "%s: tensors leaked", what);
    }
}

static void test_malformed_table(void) {
    TEST_BEGIN();
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        unsigned char *data = calloc(1, c->data_len + 1);
        if (c->n_prefix) memcpy(data, c->prefix, (size_t)c->n_prefix * sizeof(int64_t));
        size_t n;
        unsigned char *img = image(c->header, data, c->data_len, &n);
        check_bad_image(c->what, img, n, c->status, c->fragment);
        free(img), free(data);
    }
}

/* Files broken in their framing: length field, truncation, absurd sizes. */
static void test_malformed_framing(void) {
    TEST_BEGIN();
    unsigned char tiny[5] = {1, 2, 3, 4, 5};
    check_bad_image("5-byte file", tiny, 5, JAG_EINVAL, "the file has 5 bytes, expected at least 8");
    check_bad_image("empty file", tiny, 0, JAG_EINVAL, "the file has 0 bytes");
    const char *good = "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}";
    double vals[2] = {1, 2};
    size_t n;
    unsigned char *img = image(good, vals, 16, &n);
    /* the untouched image loads */
    jag_tensor_set *set = NULL;
    CHECK_OK(jag_load_buffer(img, n, JAG_LOAD_COPY, &set));
    jag_tensor_set_free(set);
    /* truncated data, truncated header, just the length */
    check_bad_image("truncated data", img, n - 4, JAG_EINVAL, "data_offsets [0, 16] reach past the end of the data (12 bytes)");
    check_bad_image("truncated header", img, 8 + 10, JAG_EINVAL, "the header length is 55 bytes, past the end of the file (10 bytes follow it)");
    check_bad_image("only the length", img, 8, JAG_EINVAL, "past the end of the file (0 bytes follow it)");
    /* absurd header lengths */
    unsigned char *bad = malloc(n);
    memcpy(bad, img, n);
    memset(bad, 0xff, 8);
    check_bad_image("header length 2^64-1", bad, n, JAG_EINVAL, "the header length is 18446744073709551615 bytes, past the end");
    memset(bad, 0, 8);
    bad[0] = 1;
    check_bad_image("header length 1", bad, n, JAG_EINVAL, "expected at least 2");
    free(bad);
    free(img);
    /* a header length over the limit, in a (sparse) file large enough to hold it */
    const char *path = tmp_path("huge.safetensors");
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    unsigned char len8[8] = {0};
    uint64_t h = 100000001;
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(h >> (8 * i));
    CHECK(fd >= 0 && write(fd, len8, 8) == 8 && ftruncate(fd, (off_t)(8 + h)) == 0);
    close(fd);
    for (int mode = 0; mode < 2; mode++) {
        set = NULL;
        CHECK_ERR(jag_load(path, mode ? JAG_LOAD_MMAP : JAG_LOAD_COPY, &set), JAG_EINVAL,
                  "the header length is 100000001 bytes, expected at most 100000000");
        CHECK(set == NULL);
    }
    unlink(path);
    /* a deeply nested header much deeper than the limit: no stack blowup */
    size_t depth = 200000;
    char *deep = malloc(depth + 16);
    memcpy(deep, "{\"a\":", 5);
    memset(deep + 5, '[', depth);
    deep[5 + depth] = '\0';
    img = image(deep, NULL, 0, &n);
    check_bad_image("200000 open brackets", img, n, JAG_EINVAL, "deeper than 32 levels at byte");
    free(img), free(deep);
}

/* ---- regressions (see docs/FUZZING.md) ---------------------------------- */

/* Found while writing fuzz/fuzz_nested, whose oracle checks it: strided
 * tables whose size * stride overflows int64, or whose empty
 * components sit at negative offsets, are refused by the checked
 * constructor itself (not only when loaded). */
static void test_strided_unflatten_overflow(void) {
    TEST_BEGIN();
    int64_t bs = 4, tab[2] = {1, 1}, one = 1;
    jag_tensor *buf = NULL, *sz = NULL, *sd = NULL, *so = NULL, *out = NULL;
    CHECK_OK(jag_zeros(&bs, 1, JAG_FLOAT32, &buf));
    int64_t size = INT64_MAX / 2, stride = 4, off = 0;
    CHECK_OK(jag_from_data(&size, tab, 2, JAG_INT64, &sz));
    CHECK_OK(jag_from_data(&stride, tab, 2, JAG_INT64, &sd));
    CHECK_OK(jag_from_data(&off, &one, 1, JAG_INT64, &so));
    jag_tensor *inner[4] = {buf, sz, sd, so};
    jag_subclass_meta meta = {.n_ints = 2, .ints = {JAG_STRIDED, 0}};
    const jag_subclass *cls = jag_subclass_find("nested");
    CHECK(cls != NULL);
    CHECK_ERR(jag_subclass_unflatten(cls, inner, 4, &meta, &out), JAG_EINVAL, "reaches outside the buffer");
    CHECK(out == NULL);
    jag_release(sz), jag_release(sd), jag_release(so);
    /* an empty component at a negative storage offset */
    size = 0, off = -3;
    CHECK_OK(jag_from_data(&size, tab, 2, JAG_INT64, &sz));
    CHECK_OK(jag_from_data(&stride, tab, 2, JAG_INT64, &sd));
    CHECK_OK(jag_from_data(&off, &one, 1, JAG_INT64, &so));
    jag_tensor *inner2[4] = {buf, sz, sd, so};
    CHECK_ERR(jag_subclass_unflatten(cls, inner2, 4, &meta, &out), JAG_EINVAL, "storage offset -3");
    CHECK(out == NULL);
    jag_release(sz), jag_release(sd), jag_release(so);
    /* fuzz regression: stride 0 keeps a component inside the buffer
     * whatever its sizes, whose product then overflowed int64 */
    int64_t tab2[2] = {1, 2}, sizes2[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, zeros2[2] = {0, 0};
    off = 0;
    CHECK_OK(jag_from_data(sizes2, tab2, 2, JAG_INT64, &sz));
    CHECK_OK(jag_from_data(zeros2, tab2, 2, JAG_INT64, &sd));
    CHECK_OK(jag_from_data(&off, &one, 1, JAG_INT64, &so));
    jag_tensor *inner3[4] = {buf, sz, sd, so};
    CHECK_ERR(jag_subclass_unflatten(cls, inner3, 4, &meta, &out), JAG_EOVERFLOW, "product overflows int64");
    CHECK(out == NULL);
    jag_release(sz), jag_release(sd), jag_release(so);
    /* fuzz regression: an empty component may have any stride; copying it
     * (contiguous) computed byte strides from it and overflowed */
    int64_t sizes3[2] = {0, 3}, strides3[2] = {(int64_t)1 << 61, 1};
    CHECK_OK(jag_from_data(sizes3, tab2, 2, JAG_INT64, &sz));
    CHECK_OK(jag_from_data(strides3, tab2, 2, JAG_INT64, &sd));
    CHECK_OK(jag_from_data(&off, &one, 1, JAG_INT64, &so));
    jag_tensor *inner4[4] = {buf, sz, sd, so}, *c = NULL;
    CHECK_OK(jag_subclass_unflatten(cls, inner4, 4, &meta, &out));
    CHECK_OK(jag_contiguous(out, &c));
    CHECK(c && jag_nested_batch_size(c) == 1);
    jag_release(c), jag_release(out);
    jag_release(buf), jag_release(sz), jag_release(sd), jag_release(so);
}

/* A set freed twice is refused (it was a double free); a freed set reads
 * as empty; tensors taken from it live on. */
static void test_tensor_set_freed_twice(void) {
    TEST_BEGIN();
    const char *path = tmp_path("twice.safetensors");
    jag_tensor *x = NULL, *kept = NULL;
    CHECK_OK(jag_ones((int64_t[]){3}, 1, JAG_FLOAT32, &x));
    const char *name = "x";
    CHECK_OK(jag_save(path, &name, &x, 1, NULL, 0));
    jag_tensor_set *set = NULL;
    CHECK_OK(jag_load(path, JAG_LOAD_COPY, &set));
    kept = jag_retain(jag_tensor_set_find(set, "x"));
    CHECK_OK(jag_tensor_set_free(set));
    CHECK_ERR(jag_tensor_set_free(set), JAG_EINVAL, "jag_tensor_set_free: argument 'set' was already freed");
    CHECK(jag_tensor_set_count(set) == 0 && jag_tensor_set_find(set, "x") == NULL && jag_tensor_set_get(set, 0) == NULL);
    CHECK(kept && jag_numel(kept) == 3);
    CHECK_OK(jag_tensor_set_free(NULL));
    jag_release(kept), jag_release(x);
}

/* ---- files that are not regular, headers built to exhaust memory -------- */

/* Opening a FIFO for reading blocks until a writer comes: jag_load refuses
 * it without blocking. The alarm turns a hang into a failure (SIGALRM ends
 * the program). */
static void test_load_fifo(void) {
    TEST_BEGIN();
    const char *path = tmp_path("fifo");
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0);
    for (int mode = 0; mode < 2; mode++) {
        jag_tensor_set *set = NULL;
        long live = jag__live_tensors();
        alarm(20);
        jag_status st = jag_load(path, mode ? JAG_LOAD_MMAP : JAG_LOAD_COPY, &set);
        alarm(0);
        CHECK_MSG(st == JAG_ESTATE, "FIFO (mode %d): got %s: %s", mode, jag_status_str(st), jag_last_error());
        char want[700];
        snprintf(want, sizeof want, "jag_load: argument 'path' ('%s') is not a regular file (it is a FIFO), expected a "
                 "regular safetensors file", path);
        CHECK_MSG(strcmp(jag_last_error(), want) == 0, "message '%s', expected '%s'", jag_last_error(), want);
        CHECK(set == NULL && jag__live_tensors() == live);
    }
    unlink(path);
    jag_tensor_set *set = NULL;
    CHECK_ERR(jag_load(tmp_dir, 0, &set), JAG_ESTATE, "is not a regular file (it is a directory)");
    CHECK_ERR(jag_load("/dev/null", 0, &set), JAG_ESTATE, "'/dev/null') is not a regular file (it is a character device)");
    CHECK(set == NULL);
}

static long peak_rss_kb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

/* A header of `n` bytes: `head`, then `unit` repeated, then `tail`. */
static char *repeat_text(const char *head, const char *unit, const char *tail, size_t n, size_t *len) {
    size_t h = strlen(head), u = strlen(unit), t = strlen(tail), k = 0;
    char *s = malloc(n + h + u + t + 1);
    memcpy(s, head, h), k = h;
    while (k + u + t <= n) memcpy(s + k, unit, u), k += u;
    memcpy(s + k, tail, t), k += t;
    s[k] = '\0';
    *len = k;
    return s;
}

/* A 40 MB header [0,0,...]: refused as an array at once, with no memory
 * beyond the file's bytes (building its 20 million values first would take
 * over a GB). The growth of the peak RSS is an upper bound of what the load
 * used. */
static void test_header_array_refused_at_once(void) {
    TEST_BEGIN();
    size_t len, n;
    char *text = repeat_text("[0", ",0", "]", 40000000, &len);
    unsigned char *img = image(text, NULL, 0, &n);
    free(text);
    long before = peak_rss_kb();
    jag_tensor_set *set = NULL;
    CHECK_ERR(jag_load_buffer(img, n, JAG_LOAD_COPY, &set), JAG_EINVAL,
              "jag_load_buffer: the header is an array, expected a JSON object");
    long grown_mb = (peak_rss_kb() - before) / 1024;
    CHECK_MSG(grown_mb <= 8, "refusing a 40 MB array header raised the peak RSS by %ld MB, expected at most 8", grown_mb);
    CHECK(set == NULL);
    free(img);
}

/* Valid JSON that is no safetensors header: the reader's memory stays
 * within 4 bytes per byte of text (json.h) for every shape of text that
 * packs the most values into the fewest bytes, and jag_load refuses the
 * header with its message. */
static void test_header_memory_bounded(void) {
    TEST_BEGIN();
    static const struct {
        const char *head, *unit, *tail, *fragment;
    } cases[] = {
        {"{\"a\":[0", ",0", "]}", "tensor 'a': expected an object with dtype, shape and data_offsets, got an array"},
        {"{\"a\":0", ",\"a\":0", "}", "tensor 'a': expected an object with dtype, shape and data_offsets, got an integer"},
        {"{\"\":\"\"", ",\"\":\"\"", "}", "tensor '': expected an object with dtype, shape and data_offsets, got a string"},
        {"{\"a\":[[]", ",[]", "]}", "tensor 'a': expected an object"},
        {"{\"a\":[[[[[[[[]]]]]]]", ",[[[[[[[]]]]]]]", "]}", "tensor 'a': expected an object"},
        {"{\"a\":[\"\"", ",\"\"", "]}", "tensor 'a': expected an object"},
        {"{\"a\":[1234567890", ",1234567890", "]}", "tensor 'a': expected an object"},
        {"{\"a\":[-1e5", ",-1e5", "]}", "tensor 'a': expected an object"},
        {"{\"a\":{}", ",\"a\":{}", "}", "tensor 'a': field 'dtype' is missing"},
        {"{\"a\":[{\"\":0}", ",{\"\":0}", "]}", "tensor 'a': expected an object"},
        {"{\"a\":[true", ",true", "]}", "tensor 'a': expected an object"},
    };
    const size_t size = 4000000;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len, n;
        char *text = repeat_text(cases[i].head, cases[i].unit, cases[i].tail, size, &len);
        jag_json_doc doc;
        CHECK_OK(jag__json_parse("test", "the text", text, len, "an object", &doc));
        CHECK_MSG(doc.bytes <= 4 * len + 4, "case %zu (%s...): %zu bytes for %zu of text, expected at most 4 per byte",
                  i, cases[i].head, doc.bytes, len);
        CHECK(jag__json_kind(jag__json_root(&doc)) == JAG_JSON_OBJECT);
        jag__json_free(&doc);
        /* the same header loaded: refused, the peak RSS grown by at most
         * the reader's bound and the file's bytes */
        unsigned char *img = image(text, NULL, 0, &n);
        free(text);
        long before = peak_rss_kb();
        jag_tensor_set *set = NULL;
        CHECK_ERR(jag_load_buffer(img, n, JAG_LOAD_COPY, &set), JAG_EINVAL, cases[i].fragment);
        long grown_mb = (peak_rss_kb() - before) / 1024, bound_mb = (long)(5 * size / 1000000) + 16;
        CHECK_MSG(grown_mb <= bound_mb, "case %zu (%s...): loading raised the peak RSS by %ld MB, expected at most %ld", i,
                  cases[i].head, grown_mb, bound_mb);
        CHECK(set == NULL);
        free(img);
    }
    /* text too deep, or broken at its end, is refused by the first pass */
    size_t len;
    char *text = repeat_text("{\"a\":[0", ",0", "", 1000000, &len);
    jag_json_doc doc;
    CHECK_ERR(jag__json_parse("test", "the text", text, len, NULL, &doc), JAG_EINVAL,
              "test: the text is not valid JSON at byte");
    CHECK(doc.nodes == NULL && doc.pool == NULL && doc.bytes == 0);
    free(text);
}

/* The reader's values through its accessors, by hand. */
static void test_json_reader(void) {
    TEST_BEGIN();
    const char *text = " {\"k\": [1, -2, 2147483647, -2147483648, 2147483648, -2147483649, 9223372036854775807,"
                       " -9223372036854775808, 9223372036854775808, 1.5, 1e3, 0],"
                       " \"s\": \"a\\u00e9\\ud83d\\ude00\\n\", \"t\": true, \"f\": false, \"n\": null,"
                       " \"o\": {\"x\": {}, \"y\": [[]]}, \"e\": []} ";
    jag_json_doc d;
    CHECK_OK(jag__json_parse("test", "the text", text, strlen(text), NULL, &d));
    const jag_json_node *root = jag__json_root(&d);
    CHECK(jag__json_kind(root) == JAG_JSON_OBJECT && jag__json_count(&d, root) == 7 && jag__json_key(&d, root) == NULL);
    const jag_json_node *k = jag__json_get(&d, root, "k");
    CHECK(k && jag__json_kind(k) == JAG_JSON_ARRAY && jag__json_count(&d, k) == 12);
    const int64_t want[9] = {1, -2, 2147483647, -2147483647 - 1, 2147483648LL, -2147483649LL, INT64_MAX, INT64_MIN, 0};
    int i = 0;
    for (const jag_json_node *c = jag__json_first(&d, k); c; c = jag__json_next(&d, k, c), i++) {
        CHECK(jag__json_key(&d, c) == NULL);
        if (i < 8) CHECK_MSG(jag__json_kind(c) == JAG_JSON_INT && jag__json_int(&d, c) == want[i], "entry %d", i);
        else if (i < 11) CHECK_MSG(jag__json_kind(c) == JAG_JSON_NUMBER, "entry %d", i);
        else CHECK(jag__json_kind(c) == JAG_JSON_INT && jag__json_int(&d, c) == want[8]);
    }
    CHECK(i == 12);
    const jag_json_node *s = jag__json_get(&d, root, "s");
    CHECK(s && strcmp(jag__json_str(&d, s), "a\xc3\xa9\xf0\x9f\x98\x80\n") == 0 && strcmp(jag__json_key(&d, s), "s") == 0);
    CHECK(jag__json_kind(jag__json_get(&d, root, "t")) == JAG_JSON_TRUE);
    CHECK(jag__json_kind(jag__json_get(&d, root, "f")) == JAG_JSON_FALSE);
    CHECK(jag__json_kind(jag__json_get(&d, root, "n")) == JAG_JSON_NULL);
    const jag_json_node *o = jag__json_get(&d, root, "o"), *x = jag__json_get(&d, o, "x"), *y = jag__json_get(&d, o, "y");
    CHECK(o && x && y && jag__json_count(&d, o) == 2 && jag__json_first(&d, x) == NULL && jag__json_count(&d, y) == 1);
    CHECK(jag__json_first(&d, jag__json_first(&d, y)) == NULL);
    const jag_json_node *e = jag__json_get(&d, root, "e");
    CHECK(e && jag__json_kind(e) == JAG_JSON_ARRAY && jag__json_first(&d, e) == NULL && jag__json_next(&d, root, e) == NULL);
    CHECK(jag__json_get(&d, root, "missing") == NULL && jag__json_str(&d, k) == NULL && jag__json_int(&d, s) == 0);
    jag__json_free(&d);
    /* a root of another kind where an object is expected */
    CHECK_ERR(jag__json_parse("test", "the text", "\"x\"", 3, "an object", &d), JAG_EINVAL,
              "test: the text is a string, expected an object");
    CHECK_ERR(jag__json_parse("test", "the text", " 12", 3, "an object", &d), JAG_EINVAL, "the text is an integer");
    CHECK_ERR(jag__json_parse("test", "the text", " [1, 2", 6, "an object", &d), JAG_EINVAL,
              "test: the text is an array, expected an object");
    CHECK_ERR(jag__json_parse("test", "the text", " [1, 2", 6, NULL, &d), JAG_EINVAL, "not valid JSON at byte 6");
}

static void cleanup(void) {
    if (!tmp_dir[0]) return;
    const char *names[] = {"hand.safetensors", "bytes.safetensors", "dtypes.safetensors", "mmap.safetensors",
                           "jagged.safetensors", "strided.safetensors", "misaligned.safetensors", "errors.safetensors",
                           "bad.safetensors", "fifo", "twice.safetensors", "huge.safetensors", "described.safetensors",
                           "described_bad.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp_path(names[i]));
    rmdir(tmp_dir);
}

/* ---- described files ---------------------------------------------------- */

/* jag_save_described writes the description as one more string entry of
 * __metadata__ (the bytes are the format's, checked by hand), jag_load hands
 * it back apart from the caller's metadata, and a description alone (no
 * tensors) is a valid file. */
static void test_described_file(void) {
    TEST_BEGIN();
    float v[2] = {1.0f, 2.0f};
    int64_t s2 = 2;
    jag_tensor *a = NULL;
    CHECK_OK(jag_from_data(v, &s2, 1, JAG_FLOAT32, &a));
    const char *names[] = {"a"};
    const char *meta[] = {"k", "v"};
    const char *path = tmp_path("described.safetensors");
    CHECK_OK(jag_save_described(path, names, &a, 1, meta, 1, JAG_OBJECT_KEY, "{\"dict\":[[\"a\",{\"tensor\":\"a\"}]]}"));
    const char *want = "{\"__metadata__\":{\"k\":\"v\",\"jag.object\":\"{\\\"dict\\\":[[\\\"a\\\",{\\\"tensor\\\":\\\"a\\\"}]]}\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t n;
    unsigned char *got = read_bytes(path, &n);
    CHECK(n > 8 + strlen(want) && memcmp(got + 8, want, strlen(want)) == 0);
    free(got);
    jag_tensor_set *set = NULL;
    CHECK_OK(jag_load(path, JAG_LOAD_COPY, &set));
    CHECK(jag_tensor_set_count(set) == 1 && same_dense(jag_tensor_set_find(set, "a"), a));
    CHECK(jag_tensor_set_metadata_count(set) == 1 && strcmp(jag_tensor_set_metadata_key(set, 0), "k") == 0);
    const char *d = jag_tensor_set_description(set, JAG_OBJECT_KEY);
    CHECK(d && strcmp(d, "{\"dict\":[[\"a\",{\"tensor\":\"a\"}]]}") == 0);
    CHECK(jag_tensor_set_description(set, JAG_OPTIMIZER_KEY) == NULL);
    CHECK(jag_tensor_set_description(set, "k") == NULL && jag_tensor_set_description(set, NULL) == NULL);
    jag_tensor_set_free(set);
    CHECK(jag_tensor_set_description(set, JAG_OBJECT_KEY) == NULL); /* freed: read as empty */

    /* no tensors: the description alone */
    CHECK_OK(jag_save_described(path, NULL, NULL, 0, NULL, 0, JAG_OPTIMIZER_KEY, "[1, 2.5, \"x\"]"));
    got = read_bytes(path, &n);
    const char *alone = "{\"__metadata__\":{\"jag.optimizer\":\"[1, 2.5, \\\"x\\\"]\"}}";
    CHECK(n == 8 + (strlen(alone) + 7) / 8 * 8 && memcmp(got + 8, alone, strlen(alone)) == 0);
    free(got);
    CHECK_OK(jag_load(path, JAG_LOAD_MMAP, &set));
    CHECK(jag_tensor_set_count(set) == 0 && jag_tensor_set_metadata_count(set) == 0);
    CHECK(strcmp(jag_tensor_set_description(set, JAG_OPTIMIZER_KEY), "[1, 2.5, \"x\"]") == 0);
    jag_tensor_set_free(set);

    /* a file made by another writer with the key reads the same way */
    size_t len;
    unsigned char *img = image("{\"__metadata__\":{\"jag.object\":\"null\",\"other\":\"1\"}}", NULL, 0, &len);
    CHECK_OK(jag_load_buffer(img, len, JAG_LOAD_COPY, &set));
    CHECK(strcmp(jag_tensor_set_description(set, JAG_OBJECT_KEY), "null") == 0);
    CHECK(jag_tensor_set_metadata_count(set) == 1 && strcmp(jag_tensor_set_metadata_key(set, 0), "other") == 0);
    jag_tensor_set_free(set);
    free(img);
    jag_release(a);
}

static void test_described_errors(void) {
    TEST_BEGIN();
    int64_t s1 = 1;
    float v = 1.0f;
    jag_tensor *a = NULL;
    CHECK_OK(jag_from_data(&v, &s1, 1, JAG_FLOAT32, &a));
    const char *names[] = {"a"};
    const char *path = tmp_path("described_bad.safetensors");
    unlink(path);
    CHECK_ERR(jag_save_described(path, names, &a, 1, NULL, 0, "jag.other", "{}"), JAG_EINVAL, "argument 'key' is 'jag.other'");
    CHECK_ERR(jag_save_described(path, names, &a, 1, NULL, 0, NULL, "{}"), JAG_EINVAL, "argument 'key' is NULL");
    CHECK_ERR(jag_save_described(path, names, &a, 1, NULL, 0, JAG_OBJECT_KEY, NULL), JAG_EINVAL, "'description' is NULL");
    CHECK_ERR(jag_save_described(path, names, &a, 1, NULL, 0, JAG_OBJECT_KEY, "{\"a\":"), JAG_EINVAL,
              "argument 'description' is not valid JSON at byte 5");
    CHECK_ERR(jag_save_described(path, names, &a, 1, NULL, 0, JAG_OBJECT_KEY, "[NaN]"), JAG_EINVAL, "not valid JSON");
    CHECK_ERR(jag_save_described(path, names, &a, -1, NULL, 0, JAG_OBJECT_KEY, "{}"), JAG_EINVAL, "n >= 0");
    CHECK_ERR(jag_save_described(path, NULL, NULL, 1, NULL, 0, JAG_OBJECT_KEY, "{}"), JAG_EINVAL, "n >= 0");
    /* the keys stay jag's own: callers cannot write them as metadata */
    const char *meta[] = {JAG_OBJECT_KEY, "{}"};
    CHECK_ERR(jag_save(path, names, &a, 1, meta, 1), JAG_EINVAL, "reserves");
    CHECK_ERR(jag_save_described(path, names, &a, 1, meta, 1, JAG_OPTIMIZER_KEY, "{}"), JAG_EINVAL, "reserves");
    /* jag_save itself still wants a tensor */
    CHECK_ERR(jag_save(path, NULL, NULL, 0, NULL, 0), JAG_EINVAL, "n >= 1");
    CHECK(access(path, F_OK) != 0); /* nothing was written */
    jag_release(a);
}

static void test_cleanup(void) {
    TEST_BEGIN();
    cleanup();
}

TEST_MAIN(test_hand_made_file, test_save_bytes, test_round_trip_dtypes, test_mmap_lifetime_and_read_only,
          test_round_trip_jagged, test_round_trip_strided, test_misaligned_is_copied, test_save_errors,
          test_malformed_table, test_malformed_framing, test_strided_unflatten_overflow, test_load_fifo,
          test_header_memory_bounded, test_header_array_refused_at_once, test_json_reader, test_tensor_set_freed_twice,
          test_described_file, test_described_errors, test_cleanup)
