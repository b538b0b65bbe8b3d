/* test_core.c — creation, metadata, views, copies, conversions, scopes,
 * errors, random numbers and printing. */
#include "test.h"
#include "core/internal.h"
#include "cpu/kernels.h" /* jag__copy_into, jag__copy_ref */

static const double V6[6] = {1, 2, 3, 4, 5, 6};

static void test_status_strings(void) {
    TEST_BEGIN();
    CHECK(strcmp(jag_status_str(JAG_OK), "ok") == 0);
    CHECK(strcmp(jag_status_str(JAG_ESHAPE), "shape mismatch") == 0);
    CHECK(strcmp(jag_status_str((jag_status)999), "unknown status") == 0);
    CHECK(strcmp(jag_dtype_name(JAG_FLOAT32), "float32") == 0);
    CHECK(strcmp(jag_dtype_name((jag_dtype)77), "invalid") == 0);
    CHECK(jag_dtype_size(JAG_BOOL) == 1 && jag_dtype_size(JAG_INT64) == 8 && jag_dtype_size((jag_dtype)77) == 0);
    CHECK(jag_promote_types(JAG_INT32, JAG_FLOAT32) == JAG_FLOAT32);
    CHECK(jag_promote_types(JAG_BOOL, JAG_INT32) == JAG_INT32);
    CHECK(jag_promote_types(JAG_INT64, JAG_INT32) == JAG_INT64);
    CHECK(jag_promote_types(JAG_FLOAT64, JAG_FLOAT32) == JAG_FLOAT64);
    jag_clear_error();
    CHECK(jag_last_status() == JAG_OK && jag_last_error()[0] == '\0');
}

static void test_creation(void) {
    TEST_BEGIN();
    int64_t s[3] = {2, 3, 4};
    for (int dt = 0; dt < JAG_DTYPE_COUNT; dt++) {
        jag_tensor *z = NULL, *o = NULL, *f = NULL;
        CHECK_OK(jag_zeros(s, 3, (jag_dtype)dt, &z));
        CHECK_OK(jag_ones(s, 3, (jag_dtype)dt, &o));
        CHECK_OK(jag_full(s, 3, 7, (jag_dtype)dt, &f));
        CHECK(jag_numel(z) == 24 && jag_ndim(z) == 3 && jag_size(z, -1) == 4 && jag_stride(z, 0) == 12);
        CHECK(jag_is_contiguous(z) && jag_tensor_dtype(z) == (jag_dtype)dt);
        for (int64_t i = 0; i < 24; i++) {
            CHECK(t_get(z, i) == 0);
            CHECK(t_get(o, i) == 1);
            CHECK(t_get(f, i) == (dt == JAG_BOOL ? 1 : 7));
        }
        jag_release(z), jag_release(o), jag_release(f);
    }
    /* 0-d and empty tensors */
    jag_tensor *sc = NULL, *e = NULL;
    CHECK_OK(jag_full(NULL, 0, 2.5, JAG_FLOAT64, &sc));
    double v;
    CHECK_OK(jag_item(sc, &v));
    CHECK(v == 2.5 && jag_numel(sc) == 1 && jag_ndim(sc) == 0);
    int64_t es[2] = {0, 5};
    CHECK_OK(jag_zeros(es, 2, JAG_FLOAT32, &e));
    CHECK(jag_numel(e) == 0);
    jag_release(sc), jag_release(e);
    /* arange: float and integer, negative step, empty */
    jag_tensor *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(jag_arange(0, 5, 1, JAG_INT64, &a));
    CHECK(jag_numel(a) == 5 && t_get(a, 4) == 4);
    CHECK_OK(jag_arange(1, 0, -0.25, JAG_FLOAT32, &b));
    CHECK(jag_numel(b) == 4 && t_get(b, 3) == 0.25);
    CHECK_OK(jag_arange(3, 3, 1, JAG_FLOAT32, &c));
    CHECK(jag_numel(c) == 0);
    jag_release(a), jag_release(b), jag_release(c);
    /* from_data copies */
    double buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t s2[2] = {2, 3};
    jag_tensor *d = NULL;
    CHECK_OK(jag_from_data(buf, s2, 2, JAG_FLOAT64, &d));
    buf[0] = 100;
    CHECK(t_get(d, 0) == 1 && t_get(d, 5) == 6);
    jag_release(d);
    /* bools from arbitrary bytes are normalised to 0/1 */
    uint8_t bytes[3] = {0, 2, 255};
    int64_t s3 = 3;
    CHECK_OK(jag_from_data(bytes, &s3, 1, JAG_BOOL, &d));
    CHECK(((uint8_t *)jag_data(d))[1] == 1 && ((uint8_t *)jag_data(d))[2] == 1);
    jag_release(d);
}

static int blob_released;
static void blob_release(void *ctx, void *data) {
    blob_released++;
    CHECK(ctx == (void *)&blob_released);
    CHECK(data != NULL);
}

static void test_from_blob(void) {
    TEST_BEGIN();
    float mem[6] = {1, 2, 3, 4, 5, 6};
    int64_t s[2] = {2, 3}, st[2] = {1, 2}; /* column-major view */
    jag_tensor *t = NULL, *v = NULL;
    blob_released = 0;
    CHECK_OK(jag_from_blob(mem, s, st, 2, JAG_FLOAT32, blob_release, &blob_released, &t));
    CHECK(jag_data(t) == mem && !jag_is_contiguous(t));
    CHECK(t_get(t, 1) == 3); /* element (0, 1) is mem[2] */
    CHECK_OK(jag_transpose(t, 0, 1, &v));
    jag_release(t);
    CHECK(blob_released == 0); /* the view keeps the memory alive */
    mem[1] = 42;
    CHECK(t_get(v, 1) == 42); /* writes by the owner are visible: no copy */
    jag_release(v);
    CHECK(blob_released == 1);
    /* errors: the release callback is not called on failure */
    int64_t bad[2] = {2, -1};
    CHECK_ERR(jag_from_blob(mem, bad, NULL, 2, JAG_FLOAT32, blob_release, &blob_released, &t), JAG_EINVAL, "sizes");
    CHECK_ERR(jag_from_blob((char *)mem + 1, s, NULL, 2, JAG_FLOAT32, blob_release, &blob_released, &t), JAG_EINVAL,
              "aligned");
    CHECK(blob_released == 1);
}

/* Blocks of every size class (headers with their bytes, per-thread lists,
 * the large-block cache) come back aligned, and zeros() zeroes a block that
 * a freed tensor left dirty; jag_empty_cache() in between changes nothing. */
static void test_storage_reuse(void) {
    TEST_BEGIN();
    const int64_t counts[] = {1, 100, 255, 256, 1000, 1025, 5000, 16384, 32767, 32768, 50000, 200000};
    for (int round = 0; round < 3; round++) {
        if (round == 2) jag_empty_cache();
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
            int64_t n = counts[i];
            jag_tensor *z = NULL;
            CHECK_OK(jag_zeros(&n, 1, JAG_FLOAT32, &z));
            float *p = jag_data(z);
            CHECK(((uintptr_t)p & 63) == 0);
            int64_t nonzero = 0;
            for (int64_t k = 0; k < n; k++) nonzero += p[k] != 0.0f;
            CHECK(nonzero == 0);
            for (int64_t k = 0; k < n; k++) p[k] = (float)k + 1.0f; /* dirty for the next round */
            jag_release(z);
        }
    }
}

/* The block sizes behind small tensors: powers of two from 128 bytes up to
 * 128 KiB (each size at its class's boundary and one past), plain 64-byte
 * rounding above, and in builds without the cache. A block taken and freed at
 * every size comes back usable. */
static void test_small_block_classes(void) {
    TEST_BEGIN();
    const size_t asks[] = {1, 64, 127, 128, 129, 255, 256, 257, 4096, 4097, 65535, 65536, 65537, 131071, 131072,
                           131073, 1000000};
    for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
        size_t n = asks[i], want = (n + 63) / 64 * 64;
#ifndef JAG_NO_ALLOC_CACHE
        if (n <= 131072) {
            want = 128;
            while (want < n) want *= 2;
        }
#endif
        CHECK_MSG(jag__small_block_bytes(n) == want, "%zu bytes: block of %zu, expected %zu", n,
                  jag__small_block_bytes(n), want);
        for (int round = 0; round < 2; round++) {
            unsigned char *p = jag__small_alloc(n);
            CHECK(p && ((uintptr_t)p & 63) == 0);
            if (p) memset(p, 0xa5, jag__small_block_bytes(n));
            jag__small_free(p, n);
        }
    }
    jag_empty_cache();
}

/* A freed block comes back for the next tensor of its size, from the small
 * lists (up to their top class, 128 KiB) or from the large-block cache: no
 * fresh pages from the system per op. Only where the caches are on. */
static void test_storage_blocks_come_back(void) {
    TEST_BEGIN();
#ifndef JAG_NO_ALLOC_CACHE
    const int64_t counts[] = {300, 10000, 19200, 25000, 32768, 40000, 300000};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int64_t n = counts[i];
        jag_tensor *a = NULL, *b = NULL;
        CHECK_OK(jag_empty(&n, 1, JAG_FLOAT32, &a));
        void *p = a ? jag_data(a) : NULL;
        jag_release(a);
        CHECK_OK(jag_empty(&n, 1, JAG_FLOAT32, &b));
        CHECK_MSG(b && jag_data(b) == p, "%lld floats: the freed block did not come back", (long long)n);
        jag_release(b);
    }
    /* a large block serves a slightly larger tensor too (sizes come in
     * classes, eight per power of two): ragged batches vary in size */
    const int64_t pairs[][2] = {{40000, 40900}, {300000, 310000}, {1000000, 1040000}, {5000000, 5100000}};
    for (int i = 0; i < 4; i++) {
        jag_tensor *a = NULL, *b = NULL;
        CHECK_OK(jag_empty(&pairs[i][0], 1, JAG_FLOAT32, &a));
        void *p = a ? jag_data(a) : NULL;
        jag_release(a);
        CHECK_OK(jag_empty(&pairs[i][1], 1, JAG_FLOAT32, &b));
        CHECK_MSG(b && jag_data(b) == p, "%lld floats after %lld: the freed block did not come back", (long long)pairs[i][1],
                  (long long)pairs[i][0]);
        jag_release(b);
    }
    jag_empty_cache();
#endif
}

/* Of several cached blocks that fit, the most recently freed comes back: a
 * loop of ops of one size keeps reusing the block still in the caches, not
 * the oldest of them in turn. Only where the cache is on. */
static void test_storage_newest_block_first(void) {
    TEST_BEGIN();
#ifndef JAG_NO_ALLOC_CACHE
    jag_empty_cache();
    int64_t n = 1 << 20; /* 4 MiB of floats: the large-block cache */
    jag_tensor *t[4] = {NULL};
    void *p[4] = {NULL};
    for (int i = 0; i < 4; i++) {
        CHECK_OK(jag_empty(&n, 1, JAG_FLOAT32, &t[i]));
        p[i] = t[i] ? jag_data(t[i]) : NULL;
    }
    for (int i = 0; i < 4; i++) jag_release(t[i]); /* p[3] is the newest */
    for (int round = 0; round < 3; round++) {
        jag_tensor *b = NULL;
        CHECK_OK(jag_empty(&n, 1, JAG_FLOAT32, &b));
        CHECK_MSG(b && jag_data(b) == p[3], "round %d: not the most recently freed block", round);
        jag_release(b);
    }
    /* one of a slightly different size in between: the newest that fits */
    int64_t m = n + 1000;
    jag_tensor *c = NULL, *d = NULL;
    CHECK_OK(jag_empty(&m, 1, JAG_FLOAT32, &c));
    CHECK_OK(jag_empty(&n, 1, JAG_FLOAT32, &d)); /* takes p[3] */
    void *pc = c ? jag_data(c) : NULL;
    jag_release(d);
    jag_release(c); /* newest now: c's block, which also fits n */
    CHECK_OK(jag_empty(&n, 1, JAG_FLOAT32, &d));
    CHECK_MSG(d && jag_data(d) == pc, "the newest fitting block did not come back");
    jag_release(d);
    jag_empty_cache();
#endif
}

/* Blocks of 8 MiB and more start on a 2 MiB boundary and carry the
 * kernel's huge-page advice (the "hg" flag of their mapping in
 * /proc/self/smaps), so that a first touch faults once per 2 MiB, not once
 * per 4 KiB; their bytes are all usable. */
static void test_storage_huge_page_advice(void) {
    TEST_BEGIN();
#if defined(__linux__)
    jag_empty_cache();
    int64_t n = 4 << 20; /* 16 MiB of floats */
    jag_tensor *t = NULL;
    CHECK_OK(jag_full(&n, 1, 2.5, JAG_FLOAT32, &t));
    if (!t) return;
    const float *d = jag_data(t);
    uintptr_t p = (uintptr_t)d;
    CHECK_MSG(p % ((uintptr_t)2 << 20) == 0, "a 16 MiB block at %p: not on a 2 MiB boundary", (void *)d);
    CHECK(d[0] == 2.5f && d[n / 2] == 2.5f && d[n - 1] == 2.5f);
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) {
        printf("  (no transparent huge pages in this kernel: the advice is not checked)\n");
    } else {
        fclose(f);
        FILE *m = fopen("/proc/self/smaps", "r");
        CHECK(m != NULL);
        char line[512];
        bool inside = false, found = false, advised = false;
        while (m && fgets(line, sizeof line, m)) {
            unsigned long a, b;
            if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
                inside = p >= a && p < b;
                found = found || inside;
            } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
                advised = strstr(line, " hg") != NULL;
            }
        }
        if (m) fclose(m);
        CHECK_MSG(found && advised, "the 16 MiB block's mapping %s the huge-page advice", found ? "lacks" : "was not found, nor");
    }
    jag_release(t);
    jag_empty_cache();
#endif
}

char *openblas_get_corename(void); /* from the OpenBLAS this program links */

/* jag_blas_core() names the kernels OpenBLAS runs (test_linalg checks which). */
static void test_blas_core_name(void) {
    TEST_BEGIN();
    const char *core = jag_blas_core(), *ob = openblas_get_corename();
    CHECK(core && ob && strcmp(core, ob) == 0);
}

static void test_creation_errors(void) {
    TEST_BEGIN();
    jag_tensor *t = NULL;
    int64_t neg[2] = {2, -3}, huge[3] = {INT64_MAX / 2, 4, 2}, big[2] = {(int64_t)1 << 40, (int64_t)1 << 22};
    CHECK_ERR(jag_zeros(neg, 2, JAG_FLOAT32, &t), JAG_EINVAL, "argument 'sizes' has -3 at dim 1");
    CHECK_ERR(jag_zeros(huge, 3, JAG_FLOAT32, &t), JAG_EOVERFLOW, "overflows");
    CHECK_ERR(jag_zeros(big, 2, JAG_FLOAT64, &t), JAG_EOVERFLOW, "overflow");
    CHECK_ERR(jag_zeros(neg, 9, JAG_FLOAT32, &t), JAG_EINVAL, "ndim");
    CHECK_ERR(jag_zeros(neg, 1, (jag_dtype)42, &t), JAG_EDTYPE, "dtype");
    CHECK_ERR(jag_zeros(neg, 1, JAG_FLOAT32, NULL), JAG_EINVAL, "out");
    CHECK_ERR(jag_arange(0, 1, 0, JAG_FLOAT32, &t), JAG_EINVAL, "step");
    CHECK_ERR(jag_arange(0, INFINITY, 1, JAG_FLOAT32, &t), JAG_EINVAL, "finite");
    CHECK_ERR(jag_arange(0, 1e300, 1e-10, JAG_FLOAT32, &t), JAG_EOVERFLOW, "too many");
    CHECK_ERR(jag_from_data(NULL, neg + 0, 1, JAG_FLOAT32, &t), JAG_EINVAL, "data");
    CHECK(t == NULL);
    /* a huge allocation fails cleanly with ENOMEM */
    int64_t enormous[1] = {(int64_t)1 << 60};
    CHECK_ERR(jag_empty(enormous, 1, JAG_BOOL, &t), JAG_ENOMEM, "out of memory");
    CHECK(t == NULL);
}

static void test_views(void) {
    TEST_BEGIN();
    int64_t s[2] = {2, 3};
    jag_tensor *x = t_from(V6, s, 2, JAG_FLOAT32);
    jag_tensor *tr = NULL, *pm = NULL, *nr = NULL, *se = NULL, *un = NULL, *sq = NULL, *ex = NULL, *vw = NULL;
    CHECK_OK(jag_transpose(x, 0, -1, &tr));
    CHECK(jag_size(tr, 0) == 3 && jag_stride(tr, 0) == 1 && jag_shares_storage(tr, x));
    CHECK(t_get(tr, 1) == 4 && t_get(tr, 2) == 2);
    int perm[2] = {1, 0};
    CHECK_OK(jag_permute(x, perm, 2, &pm));
    CHECK(t_allclose(pm, tr, 0, 0));
    CHECK_OK(jag_narrow(x, 1, 1, 2, &nr));
    CHECK(jag_size(nr, 1) == 2 && t_get(nr, 0) == 2 && t_get(nr, 3) == 6 && jag_storage_offset(nr) == 1);
    CHECK_OK(jag_select(x, 0, -1, &se));
    CHECK(jag_ndim(se) == 1 && t_get(se, 0) == 4);
    CHECK_OK(jag_unsqueeze(x, 1, &un));
    CHECK(jag_ndim(un) == 3 && jag_size(un, 1) == 1);
    CHECK_OK(jag_squeeze(un, 1, &sq));
    CHECK(t_allclose(sq, x, 0, 0));
    int64_t es[3] = {4, -1, 3};
    CHECK_OK(jag_expand(x, es, 3, &ex));
    CHECK(jag_stride(ex, 0) == 0 && jag_numel(ex) == 24 && t_get(ex, 23) == 6);
    int64_t vs[2] = {3, -1};
    CHECK_OK(jag_view(x, vs, 2, &vw));
    CHECK(jag_size(vw, 1) == 2 && t_get(vw, 2) == 3);
    /* writes through a view are visible in the base */
    double one = 0;
    CHECK_OK(jag_fill_(nr, 9));
    CHECK_OK(jag_item_at(x, (int64_t[]){1, 2}, &one));
    CHECK(one == 9 && t_get(x, 0) == 1);
    jag_release(tr), jag_release(pm), jag_release(nr), jag_release(se), jag_release(un);
    jag_release(sq), jag_release(ex), jag_release(vw), jag_release(x);
}

static void test_view_reshape_strides(void) {
    TEST_BEGIN();
    int64_t s[3] = {2, 3, 4};
    jag_tensor *x = t_rand(s, 3, JAG_FLOAT32, -1, 1, 1), *t = NULL, *v = NULL, *r = NULL, *f = NULL;
    /* a transposed tensor cannot be viewed flat, but reshape copies */
    CHECK_OK(jag_transpose(x, 0, 2, &t));
    int64_t flat = -1;
    CHECK_ERR(jag_view(t, &flat, 1, &v), JAG_ESHAPE, "jag_reshape");
    CHECK(v == NULL);
    CHECK_OK(jag_reshape(t, &flat, 1, &r));
    CHECK(jag_is_contiguous(r) && !jag_shares_storage(r, x));
    for (int64_t i = 0; i < 24; i++) {
        int64_t a = i / 6, b = (i / 2) % 3, c = i % 2; /* t is (4, 3, 2) */
        CHECK(t_get(r, i) == t_get(x, c * 12 + b * 4 + a));
    }
    /* merging dims that are contiguous among themselves is a view */
    jag_tensor *n = NULL;
    CHECK_OK(jag_narrow(x, 0, 1, 1, &n)); /* (1, 3, 4) */
    int64_t m[2] = {3, 4};
    CHECK_OK(jag_view(n, m, 2, &f));
    CHECK(jag_shares_storage(f, x) && t_get(f, 0) == t_get(x, 12));
    CHECK_OK(jag_flatten(n, &v));
    CHECK(jag_shares_storage(v, x) && jag_numel(v) == 12);
    /* a 0-d tensor views as (1, 1) and back */
    jag_tensor *sc = NULL, *sv = NULL;
    CHECK_OK(jag_full(NULL, 0, 3.0, JAG_FLOAT32, &sc));
    CHECK_OK(jag_view(sc, (int64_t[]){1, 1}, 2, &sv));
    CHECK(jag_ndim(sv) == 2 && t_get(sv, 0) == 3.0 && jag_shares_storage(sv, sc));
    jag_release(sc), jag_release(sv);
    int64_t wrong[2] = {5, 5};
    jag_tensor *w = NULL;
    CHECK_ERR(jag_view(x, wrong, 2, &w), JAG_ESHAPE, "expected 24 elements");
    int64_t two_inf[2] = {-1, -1};
    CHECK_ERR(jag_reshape(x, two_inf, 2, &w), JAG_EINVAL, "more than one -1");
    CHECK(w == NULL);
    jag_release(x), jag_release(t), jag_release(r), jag_release(n), jag_release(f), jag_release(v);
}

static void test_view_errors(void) {
    TEST_BEGIN();
    int64_t s[2] = {2, 3};
    jag_tensor *x = t_from(V6, s, 2, JAG_FLOAT32), *o = NULL;
    CHECK_ERR(jag_transpose(x, 0, 2, &o), JAG_ERANGE, "argument 'dim1' is 2, expected a dim in [-2, 1]");
    CHECK_ERR(jag_narrow(x, 1, 2, 2, &o), JAG_ERANGE, "outside dim 1 of size 3");
    CHECK_ERR(jag_select(x, 0, 2, &o), JAG_ERANGE, "argument 'index' is 2");
    int perm[2] = {0, 0};
    CHECK_ERR(jag_permute(x, perm, 2, &o), JAG_EINVAL, "repeats dim 0");
    CHECK_ERR(jag_permute(x, perm, 1, &o), JAG_EINVAL, "expected 2");
    int64_t e[2] = {4, 3};
    CHECK_ERR(jag_expand(x, e, 2, &o), JAG_ESHAPE, "cannot expand shape [2, 3] to [4, 3]");
    CHECK_ERR(jag_unsqueeze(x, 5, &o), JAG_ERANGE, "argument 'dim'");
    CHECK_ERR(jag_transpose(NULL, 0, 1, &o), JAG_EINVAL, "NULL");
    CHECK_ERR(jag_transpose(x, 0, 1, NULL), JAG_EINVAL, "out");
    CHECK(o == NULL);
    int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    jag_tensor *big = NULL;
    CHECK_OK(jag_zeros(eight, 8, JAG_FLOAT32, &big));
    CHECK_ERR(jag_unsqueeze(big, 0, &o), JAG_EINVAL, "already has 8 dims");
    jag_release(big), jag_release(x);
}

static void test_copy_and_convert(void) {
    TEST_BEGIN();
    int64_t s[3] = {3, 4, 5};
    for (int from = 0; from < JAG_DTYPE_COUNT; from++) {
        jag_tensor *x = t_rand(s, 3, (jag_dtype)from, -50, 50, 7 + from);
        jag_tensor *views[3] = {jag_retain(x), t_noncontig(x), t_sliced(x)};
        for (int to = 0; to < JAG_DTYPE_COUNT; to++) {
            for (int k = 0; k < 3; k++) {
                jag_tensor *y = NULL;
                CHECK_OK(jag_to_dtype(views[k], (jag_dtype)to, &y));
                CHECK(jag_tensor_dtype(y) == (jag_dtype)to);
                for (int64_t i = 0; i < jag_numel(x); i++) {
                    double v = t_get(x, i), want;
                    if (to == JAG_BOOL) want = v != 0;
                    else if (to == JAG_INT32 || to == JAG_INT64) want = trunc(v);
                    else if (to == JAG_FLOAT32) want = (float)v;
                    /* half: rounded once from float32 (the values are exact in float32) */
                    else if (to == JAG_FLOAT16) want = jag_float16_to_float(jag_float_to_float16((float)v));
                    else if (to == JAG_BFLOAT16) want = jag_bfloat16_to_float(jag_float_to_bfloat16((float)v));
                    else want = v;
                    CHECK_MSG(t_get(y, i) == want, "%s -> %s element %lld: %g vs %g", jag_dtype_name((jag_dtype)from),
                              jag_dtype_name((jag_dtype)to), (long long)i, t_get(y, i), want);
                }
                jag_release(y);
            }
        }
        for (int k = 0; k < 3; k++) jag_release(views[k]);
        jag_release(x);
    }
    /* same dtype: a new reference to the same tensor */
    jag_tensor *x = t_rand(s, 3, JAG_FLOAT32, 0, 1, 3), *y = NULL, *c = NULL, *k = NULL;
    CHECK_OK(jag_to_dtype(x, JAG_FLOAT32, &y));
    CHECK(y == x);
    CHECK_OK(jag_contiguous(x, &c));
    CHECK(c == x);
    CHECK_OK(jag_clone(x, &k));
    CHECK(k != x && !jag_shares_storage(k, x) && t_allclose(k, x, 0, 0));
    jag_release(x), jag_release(y), jag_release(c), jag_release(k);
    /* float -> int saturates instead of undefined behaviour */
    double big[4] = {1e30, -1e30, NAN, 3.9};
    int64_t four = 4;
    jag_tensor *b = t_from(big, &four, 1, JAG_FLOAT64), *bi = NULL;
    CHECK_OK(jag_to_dtype(b, JAG_INT32, &bi));
    CHECK(t_get(bi, 0) == 2147483647.0 && t_get(bi, 1) == -2147483648.0 && t_get(bi, 2) == 0 && t_get(bi, 3) == 3);
    jag_release(b), jag_release(bi);
}

static void test_copy_inplace(void) {
    TEST_BEGIN();
    int64_t s[2] = {2, 3}, row = 3;
    jag_tensor *x = NULL, *r = t_from(V6, &row, 1, JAG_FLOAT64), *t = NULL;
    CHECK_OK(jag_zeros(s, 2, JAG_FLOAT32, &x));
    CHECK_OK(jag_copy_(x, r)); /* broadcast a row into both rows, converting */
    for (int64_t i = 0; i < 6; i++) CHECK(t_get(x, i) == V6[i % 3]);
    /* overlapping self-copy: x[:, 0:2] = x[:, 1:3] */
    jag_tensor *a = NULL, *b = NULL;
    CHECK_OK(jag_narrow(x, 1, 0, 2, &a));
    CHECK_OK(jag_narrow(x, 1, 1, 2, &b));
    CHECK_OK(jag_copy_(a, b));
    CHECK(t_get(x, 0) == 2 && t_get(x, 1) == 3 && t_get(x, 2) == 3);
    /* a tensor copied onto its own transpose */
    int64_t sq[2] = {3, 3};
    jag_tensor *m = t_rand(sq, 2, JAG_FLOAT32, 0, 1, 5), *mc = NULL;
    CHECK_OK(jag_clone(m, &mc));
    CHECK_OK(jag_transpose(m, 0, 1, &t));
    CHECK_OK(jag_copy_(m, t));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) CHECK(t_get(m, i * 3 + j) == t_get(mc, j * 3 + i));
    /* errors: bad broadcast, expanded destination; dst unchanged */
    jag_tensor *e = NULL, *wrong = NULL;
    int64_t four = 4, es[2] = {2, 3};
    CHECK_OK(jag_zeros(&four, 1, JAG_FLOAT32, &wrong));
    CHECK_ERR(jag_copy_(x, wrong), JAG_ESHAPE, "do not broadcast");
    CHECK(t_get(x, 0) == 2);
    CHECK_OK(jag_expand(r, es, 2, &e));
    CHECK_ERR(jag_copy_(e, x), JAG_EINVAL, "overlapping");
    CHECK_ERR(jag_fill_(e, 1), JAG_EINVAL, "overlapping");
    CHECK(t_get(r, 0) == 1);
    jag_release(x), jag_release(r), jag_release(t), jag_release(a), jag_release(b), jag_release(m), jag_release(mc);
    jag_release(e), jag_release(wrong);
}

static void test_copy_large_parallel(void) {
    TEST_BEGIN();
    /* > JAG_GRAIN_MEMORY elements (copies' grain) on both the many-rows and the few-long-rows paths */
    int64_t s1[2] = {300, 257}, s2[2] = {2, 70001};
    int64_t *shapes[2] = {s1, s2};
    for (int k = 0; k < 2; k++) {
        jag_tensor *x = t_rand(shapes[k], 2, JAG_FLOAT32, -1, 1, 11), *nc = t_noncontig(x), *y = NULL, *ref = NULL;
        CHECK_OK(jag_to_dtype(nc, JAG_FLOAT64, &y));
        CHECK_OK(jag_zeros(shapes[k], 2, JAG_FLOAT64, &ref));
        extern void jag__copy_ref(jag_tensor *dst, const jag_tensor *src);
        jag__copy_ref(ref, nc);
        CHECK(t_allclose(y, ref, 0, 0));
        jag_release(x), jag_release(nc), jag_release(y), jag_release(ref);
    }
}

/* Copies whose source is read across its rows (a transpose or a permute
 * made contiguous: copy.c's blocks, in registers for 4-byte types), for
 * every dtype, against the element-by-element reference, bit for bit:
 * sizes that are and are not multiples of the blocks, an inner dim of 4 to
 * 8, a sliced source (rows further apart than their length), a batch dim
 * around the transposed pair, and one large enough for threads. */
static void test_copy_across_rows(void) {
    TEST_BEGIN();
    const jag_dtype dts[] = {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_BOOL, JAG_FLOAT16, JAG_BFLOAT16};
    const struct {
        int nd;
        int64_t sizes[3];
        int perm[3];
        bool sliced;
    } cases[] = {
        {2, {37, 29}, {1, 0}, false}, {2, {64, 48}, {1, 0}, false},  {2, {16, 8}, {1, 0}, false},
        {2, {5, 100}, {1, 0}, false}, {2, {130, 6}, {1, 0}, true},   {2, {33, 70}, {1, 0}, true},
        {3, {5, 33, 20}, {2, 0, 1}, false}, {3, {8, 40, 24}, {2, 1, 0}, false}, {3, {3, 48, 17}, {0, 2, 1}, true},
        {2, {300, 257}, {1, 0}, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
            jag_tensor *x = t_rand(cases[c].sizes, cases[c].nd, dts[k], -50, 50, 31 + c), *src = NULL, *p = NULL;
            jag_tensor *y = NULL, *ref = NULL;
            src = cases[c].sliced ? t_sliced(x) : jag_retain(x);
            CHECK_OK(jag_permute(src, cases[c].perm, cases[c].nd, &p));
            CHECK_OK(jag_contiguous(p, &y));
            CHECK_OK(jag_zeros(jag_sizes(p), cases[c].nd, dts[k], &ref));
            if (y && ref) {
                jag__copy_ref(ref, p);
                CHECK_MSG(jag_is_contiguous(y) && memcmp(jag_data(y), jag_data(ref), (size_t)jag_numel(y) * jag_dtype_size(dts[k])) == 0,
                          "case %zu (%s): not the reference's bits", c, jag_dtype_name(dts[k]));
            }
            jag_release(x), jag_release(src), jag_release(p), jag_release(y), jag_release(ref);
        }
}

/* Copies from a source broadcast along the inner dim (a stride of 0: the
 * gradient of a sum over the last dim, expand(g).contiguous()), between
 * every pair of dtypes, against the element-by-element reference, bit for
 * bit: copy.c reads the one value once per row. Through an expanded view
 * made contiguous and through copy_ with broadcasting. */
static void test_copy_broadcast_rows(void) {
    TEST_BEGIN();
    const jag_dtype dts[] = {JAG_FLOAT32, JAG_FLOAT64, JAG_INT32, JAG_INT64, JAG_BOOL, JAG_FLOAT16, JAG_BFLOAT16};
    const int nd = (int)(sizeof dts / sizeof dts[0]);
    for (int i = 0; i < nd; i++)
        for (int k = 0; k < nd; k++) {
            int64_t col[2] = {37, 1}, full[2] = {37, 45};
            jag_tensor *x = t_rand(col, 2, dts[i], -50, 50, 7 + i), *e = NULL, *y = NULL, *z = NULL, *ref = NULL;
            CHECK_OK(jag_expand(x, full, 2, &e));
            CHECK_OK(i == k ? jag_contiguous(e, &y) : jag_to_dtype(e, dts[k], &y)); /* to_dtype of its own dtype is e */
            CHECK_OK(jag_zeros(full, 2, dts[k], &z));
            CHECK_OK(jag_copy_(z, x));
            CHECK_OK(jag_zeros(full, 2, dts[k], &ref));
            if (y && z && ref) {
                jag__copy_ref(ref, e);
                size_t bytes = (size_t)jag_numel(ref) * jag_dtype_size(dts[k]);
                CHECK_MSG(jag_is_contiguous(y) && memcmp(jag_data(y), jag_data(ref), bytes) == 0,
                          "%s -> %s, expanded: not the reference's bits", jag_dtype_name(dts[i]), jag_dtype_name(dts[k]));
                CHECK_MSG(memcmp(jag_data(z), jag_data(ref), bytes) == 0, "%s -> %s, copy_: not the reference's bits",
                          jag_dtype_name(dts[i]), jag_dtype_name(dts[k]));
            }
            jag_release(x), jag_release(e), jag_release(y), jag_release(z), jag_release(ref);
        }
}

static void test_scopes(void) {
    TEST_BEGIN();
    long live = jag__live_tensors();
    int64_t s[2] = {4, 4};
    jag_tensor *kept = NULL;
    CHECK_OK(jag_scope_begin());
    {
        jag_tensor *a = NULL, *b = NULL, *c = NULL;
        CHECK_OK(jag_ones(s, 2, JAG_FLOAT32, &a));
        CHECK_OK(jag_transpose(a, 0, 1, &b));
        CHECK_OK(jag_scope_begin());
        CHECK_OK(jag_clone(b, &c));
        jag_scope_keep(c); /* moves to the outer scope */
        CHECK_OK(jag_scope_end());
        CHECK(jag_numel(c) == 16); /* still alive */
        CHECK_OK(jag_reshape(c, (int64_t[]){16}, 1, &kept));
        jag_scope_keep(kept); /* handed to us */
    }
    CHECK_OK(jag_scope_end());
    CHECK(jag__live_tensors() == live + 1);
    CHECK(t_get(kept, 15) == 1);
    jag_release(kept);
    CHECK(jag__live_tensors() == live);
    CHECK_ERR(jag_scope_end(), JAG_ESTATE, "no scope is open");
    /* composite ops record only their result, not their intermediates */
    CHECK_OK(jag_scope_begin());
    int64_t s3[3] = {2, 3, 4}, s4[2] = {4, 5};
    jag_tensor *a = NULL, *b = NULL, *m = NULL;
    CHECK_OK(jag_ones(s3, 3, JAG_FLOAT32, &a));
    CHECK_OK(jag_ones(s4, 2, JAG_FLOAT32, &b));
    (void)jag_matmul(a, b, &m); /* the result is the scope's, kernel or not */
    CHECK_OK(jag_scope_end());
    CHECK(jag__live_tensors() == live);
}

static void test_random(void) {
    TEST_BEGIN();
    int64_t s[1] = {100001};
    jag_generator *g1 = NULL, *g2 = NULL;
    CHECK_OK(jag_generator_new(42, &g1));
    CHECK_OK(jag_generator_new(42, &g2));
    jag_tensor *a = NULL, *b = NULL, *c = NULL, *n = NULL;
    CHECK_OK(jag_rand_uniform(s, 1, -2, 3, JAG_FLOAT32, g1, &a));
    CHECK_OK(jag_rand_uniform(s, 1, -2, 3, JAG_FLOAT32, g2, &b));
    CHECK(t_allclose(a, b, 0, 0)); /* same seed, same numbers */
    CHECK_OK(jag_rand_uniform(s, 1, -2, 3, JAG_FLOAT32, g1, &c));
    CHECK(t_get(c, 0) != t_get(a, 0)); /* the generator advanced */
    double sum = 0, lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < s[0]; i++) {
        double v = t_get(a, i);
        sum += v, lo = fmin(lo, v), hi = fmax(hi, v);
    }
    CHECK(lo >= -2 && hi < 3);
    CHECK_CLOSE(sum / s[0], 0.5, 0.03); /* mean of U(-2, 3), 5 sigma ~ 0.023 */
    CHECK_OK(jag_rand_normal(s, 1, 1.0, 2.0, JAG_FLOAT64, g1, &n));
    double m = 0, m2 = 0;
    for (int64_t i = 0; i < s[0]; i++) {
        double v = t_get(n, i);
        m += v, m2 += v * v;
    }
    m /= s[0];
    CHECK_CLOSE(m, 1.0, 0.035);
    CHECK_CLOSE(sqrt(m2 / s[0] - m * m), 2.0, 0.03);
    /* independent of the thread count: a generator re-seeded gives the same
     * stream drawn one thread at a time */
    jag_generator *g3 = NULL;
    CHECK_OK(jag_generator_new(42, &g3));
    int threads = jag_get_num_threads();
    jag_set_num_threads(1);
    jag_tensor *d = NULL;
    CHECK_OK(jag_rand_uniform(s, 1, -2, 3, JAG_FLOAT32, g3, &d));
    jag_set_num_threads(threads);
    CHECK(t_allclose(a, d, 0, 0));
    jag_tensor *o = NULL;
    CHECK_ERR(jag_rand_uniform(s, 1, 3, -2, JAG_FLOAT32, g1, &o), JAG_EINVAL, "below");
    CHECK_ERR(jag_rand_normal(s, 1, 0, -1, JAG_FLOAT32, g1, &o), JAG_EINVAL, "std");
    CHECK_ERR(jag_rand_normal(s, 1, 0, 1, JAG_INT32, g1, &o), JAG_EDTYPE, "expected a floating dtype");
    CHECK(o == NULL);
    jag_release(a), jag_release(b), jag_release(c), jag_release(n), jag_release(d);
    jag_generator_free(g1), jag_generator_free(g2), jag_generator_free(g3);
}

/* JAG_PARALLEL_IF: below its condition the statement runs as plain code,
 * outside any OpenMP region (an if() clause would run it in an inactive
 * region of one thread: omp_get_level() 1), once; above, in a region of the
 * threads asked for, once per thread for a plain region. */
static void test_parallel_if(void) {
    TEST_BEGIN();
    int runs = 0, level = -1, count = -1, index = -1;
    JAG_PARALLEL_IF(0, "omp parallel", {
        runs++;
        count = jag__thread_count(), index = jag__thread_index();
#ifdef _OPENMP
        level = omp_get_level();
#endif
    });
    CHECK(runs == 1 && count == 1 && index == 0);
#ifdef _OPENMP
    CHECK(level == 0);
    int threads = jag_get_num_threads();
    jag_set_num_threads(2);
    int seen[2] = {0, 0};
    runs = 0;
    JAG_PARALLEL_IF(runs == 0, "omp parallel num_threads(2)", {
        int t = jag__thread_index();
        if (t < 2 && jag__thread_count() == 2) seen[t] = omp_get_level();
    });
    CHECK(seen[0] == 1 && seen[1] == 1);
    for (int big = 0; big < 2; big++) {
        int64_t a[1000];
        JAG_PARALLEL_SIMD_IF(big, for (int64_t i = 0; i < 1000; i++) a[i] = 3 * i;);
        bool ok = true;
        for (int64_t i = 0; i < 1000; i++) ok &= a[i] == 3 * i;
        CHECK(ok);
    }
    jag_set_num_threads(threads);
#endif
}

/* The generator against Philox-4x32-10 itself: Random123's known answer for
 * counter 0 under key 0, then every element of draws of several sizes (the
 * blocks are made many at a time) against the one-block reference, from an
 * offset left by an earlier odd-sized draw. */
static double u01_from(uint32_t a, uint32_t b) { return (double)(((uint64_t)a << 21) ^ b) * 0x1.0p-53; }

static void test_random_is_philox(void) {
    TEST_BEGIN();
    uint32_t w[4];
    jag__philox_ref(0, 0, w);
    CHECK(w[0] == 0x6627e8d5u && w[1] == 0xe169c58du && w[2] == 0xbc57ac4cu && w[3] == 0x9b00dbd8u);
    jag_generator *g = NULL;
    CHECK_OK(jag_generator_new(0, &g));
    int64_t two = 2;
    jag_tensor *t = NULL;
    CHECK_OK(jag_rand_uniform(&two, 1, 0, 1, JAG_FLOAT64, g, &t));
    CHECK(t && t_get(t, 0) == u01_from(w[0], w[1]) && t_get(t, 1) == u01_from(w[2], w[3]));
    jag_release(t), jag_generator_free(g);
    const uint64_t seed = 0x123456789abcdefull;
    const int64_t sizes[] = {1, 63, 64, 65, 1000, 40001};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t n = sizes[si], skip = 77;
        for (int kind = 0; kind < 3; kind++) { /* float64 uniform, float32 uniform, float64 normal */
            jag_tensor *first = NULL, *x = NULL;
            CHECK_OK(jag_generator_new(seed, &g));
            CHECK_OK(jag_rand_uniform(&skip, 1, 0, 1, JAG_FLOAT32, g, &first)); /* 39 blocks */
            if (kind == 2) CHECK_OK(jag_rand_normal(&n, 1, 0.5, 2.0, JAG_FLOAT64, g, &x));
            else CHECK_OK(jag_rand_uniform(&n, 1, -2, 3, kind ? JAG_FLOAT32 : JAG_FLOAT64, g, &x));
            int bad = 0;
            for (int64_t i = 0; x && i < n && bad < 5; i++) {
                jag__philox_ref(39 + (uint64_t)(i / 2), seed, w);
                double u1 = u01_from(w[0], w[1]), u2 = u01_from(w[2], w[3]), want;
                if (kind == 2) {
                    double r = sqrt(-2.0 * log(1.0 - u1));
                    want = 0.5 + 2.0 * r * (i % 2 ? sin(2.0 * M_PI * u2) : cos(2.0 * M_PI * u2));
                } else {
                    want = -2 + 5 * (i % 2 ? u2 : u1);
                    if (kind == 1) {
                        float f = (float)want;
                        want = f >= 3.0f ? nextafterf(3.0f, 0) : f;
                    }
                }
                double got = t_get(x, i);
                bool ok = kind == 2 ? fabs(got - want) <= 1e-14 * (1 + fabs(want)) : got == want;
                if (!ok) bad++;
                CHECK_MSG(ok, "n %lld kind %d element %lld: %.17g, Philox gives %.17g", (long long)n, kind, (long long)i, got, want);
            }
            jag_release(first), jag_release(x), jag_generator_free(g);
        }
    }
}

static void test_format(void) {
    TEST_BEGIN();
    int64_t s[2] = {2, 3};
    jag_tensor *x = t_from(V6, s, 2, JAG_INT64), *b = NULL;
    char buf[256];
    size_t n = jag_format(x, buf, sizeof buf);
    CHECK(n == strlen(buf));
    CHECK_MSG(strcmp(buf, "tensor([[1, 2, 3],\n        [4, 5, 6]], dtype=int64, size=[2, 3])") == 0, "got %s", buf);
    char tiny[8];
    size_t need = jag_format(x, tiny, sizeof tiny);
    CHECK(need == n && strlen(tiny) == 7); /* truncated, terminated, reports the full length */
    /* torch's print options: every entry up to 1000 elements, then the
     * first and last 3 of each dim */
    int64_t big = 1001, some = 8;
    CHECK_OK(jag_zeros(&big, 1, JAG_BOOL, &b));
    jag_format(b, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "[False, False, False, ..., False, False, False]") != NULL, "got %s", buf);
    jag_release(b);
    CHECK_OK(jag_full(&some, 1, 2.5, JAG_FLOAT32, &b));
    jag_format(b, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "tensor([2.5000, 2.5000, 2.5000, 2.5000, 2.5000, 2.5000, 2.5000, 2.5000], dtype=float32, size=[8])") == 0,
              "got %s", buf);
    jag_release(x), jag_release(b);
}

static void test_item_errors(void) {
    TEST_BEGIN();
    int64_t s[2] = {2, 3};
    jag_tensor *x = t_from(V6, s, 2, JAG_FLOAT32);
    double v = -1;
    CHECK_ERR(jag_item(x, &v), JAG_ESHAPE, "6 elements");
    CHECK_ERR(jag_item_at(x, (int64_t[]){0, 3}, &v), JAG_ERANGE, "entry 1 is 3");
    CHECK(v == -1);
    CHECK(jag_size(x, 2) == -1 && jag_stride(x, -3) == -1);
    jag_release(x);
}

TEST_MAIN(test_status_strings, test_creation, test_from_blob, test_storage_reuse, test_small_block_classes, test_storage_blocks_come_back, test_storage_newest_block_first, test_storage_huge_page_advice, test_blas_core_name, test_creation_errors, test_views,
          test_view_reshape_strides, test_view_errors, test_copy_and_convert, test_copy_inplace,
          test_copy_large_parallel, test_copy_across_rows, test_copy_broadcast_rows, test_scopes, test_random, test_random_is_philox, test_format, test_item_errors, test_parallel_if)
