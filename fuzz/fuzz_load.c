/* fuzz_load — jag_load on arbitrary bytes.
 *
 * Every input either loads or fails with a status and a message naming
 * jag_load, leaving the output untouched and no tensor alive. A file that
 * loads is read entirely (every dense element, every nested component), and
 * goes through the other entry points too: jag_load on the same bytes as a
 * file, copied and mapped, gives the same result, and jag_save of what was
 * loaded loads back equal. The JSON reader is checked on its own as well
 * (the header's bytes and the whole input as text): it parses or refuses
 * with JAG_EINVAL leaving nothing allocated, a parsed document's values form
 * one tree of exactly its nodes, and its memory stays within 4 bytes per
 * byte of text (json.h). */
#include "fuzz.h"
#include "io/json.h"

#include <sys/mman.h>
#include <unistd.h>

static double checksum_dense(const jag_tensor *t) {
    int n = jag_ndim(t);
    int64_t total = jag_numel(t), idx[JAG_MAX_DIMS] = {0};
    double s = 0;
    /* a strided nested tensor's tables may give a component many elements
     * over few bytes (stride 0, as an expanded view): read a bounded prefix */
    if (total > 4096) total = 4096;
    for (int64_t k = 0; k < total; k++) {
        int64_t f = k;
        for (int d = n - 1; d >= 0; d--) {
            int64_t size = jag_size(t, d);
            idx[d] = f % size;
            f /= size;
        }
        double v = 0;
        FUZZ_CHECK(jag_item_at(t, idx, &v) == JAG_OK);
        if (v == v) s += v; /* NaN-free sum */
    }
    return s;
}

static double checksum(const jag_tensor *t) {
    if (!jag_is_nested(t)) return checksum_dense(t);
    int64_t b = jag_nested_batch_size(t);
    jag_tensor **parts = calloc((size_t)(b ? b : 1), sizeof *parts);
    int n = 0;
    FUZZ_CHECK(jag_nested_unbind(t, parts, (int)b, &n) == JAG_OK && n == b);
    double s = 0;
    for (int i = 0; i < n; i++) s += checksum_dense(parts[i]), jag_release(parts[i]);
    free(parts);
    char buf[256];
    jag_format(t, buf, sizeof buf);
    return s;
}

/* Same names, same kinds, same sums. */
static void same_sets(const jag_tensor_set *a, const jag_tensor_set *b) {
    FUZZ_CHECK(jag_tensor_set_count(a) == jag_tensor_set_count(b));
    for (int i = 0; i < jag_tensor_set_count(a); i++) {
        FUZZ_CHECK(strcmp(jag_tensor_set_name(a, i), jag_tensor_set_name(b, i)) == 0);
        jag_tensor *x = jag_tensor_set_get(a, i), *y = jag_tensor_set_get(b, i);
        FUZZ_CHECK(jag_tensor_layout(x) == jag_tensor_layout(y) && jag_tensor_dtype(x) == jag_tensor_dtype(y));
        double cx = checksum(x), cy = checksum(y);
        FUZZ_CHECK(cx == cy);
    }
}

/* The values under n (n included), each checked: keys exactly on object
 * members, strings inside the pool, no deeper than the reader allows, and
 * every container ending where its descendants do. */
static uint32_t json_walk(const jag_json_doc *d, const jag_json_node *n, bool member, int depth) {
    FUZZ_CHECK(depth <= JAG_JSON_MAX_DEPTH);
    FUZZ_CHECK((jag__json_key(d, n) != NULL) == member);
    jag_json_kind k = jag__json_kind(n);
    if (k == JAG_JSON_STRING) {
        const char *s = jag__json_str(d, n);
        FUZZ_CHECK(s && s >= d->pool && s + strlen(s) < d->pool + d->pool_len);
    }
    uint32_t count = 1;
    for (const jag_json_node *c = jag__json_first(d, n); c; c = jag__json_next(d, n, c))
        count += json_walk(d, c, k == JAG_JSON_OBJECT, depth + 1);
    FUZZ_CHECK(count == jag__json_end(d, n) - (uint32_t)(n - d->nodes));
    return count;
}

static void json_check(const char *text, size_t len, bool object) {
    jag_json_doc d;
    jag_status st = jag__json_parse("fuzz", "the text", text, len, object ? "an object" : NULL, &d);
    if (st != JAG_OK) {
        FUZZ_CHECK(st == JAG_EINVAL && strncmp(jag_last_error(), "fuzz: the text ", 15) == 0);
        FUZZ_CHECK(d.nodes == NULL && d.ints == NULL && d.pool == NULL && d.bytes == 0);
        return;
    }
    FUZZ_CHECK(d.bytes <= 4 * len + 4);
    FUZZ_CHECK(!object || jag__json_kind(jag__json_root(&d)) == JAG_JSON_OBJECT);
    FUZZ_CHECK(json_walk(&d, jag__json_root(&d), false, 0) == d.n_nodes);
    jag__json_free(&d);
}

static char save_path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_check((const char *)data, size, false);
    if (size >= 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | data[i];
        json_check((const char *)data + 8, n < size - 8 ? (size_t)n : size - 8, true);
    }
    long live = jag__live_tensors();
    jag_tensor_set *set = NULL;
    jag_status st = jag_load_buffer(data, size, JAG_LOAD_COPY, &set);
    if (st != JAG_OK) {
        FUZZ_CHECK(set == NULL);
        FUZZ_CHECK(st != JAG_EINTERNAL);
        FUZZ_CHECK(strncmp(jag_last_error(), "jag_load", 8) == 0);
        FUZZ_CHECK(jag__live_tensors() == live);
        return 0;
    }
    for (int i = 0; i < jag_tensor_set_count(set); i++) (void)checksum(jag_tensor_set_get(set, i));
    /* the same bytes as a file, copied and mapped */
    int fd = memfd_create("fuzz_load", 0);
    if (fd >= 0) {
        if (write(fd, data, size) == (ssize_t)size) {
            char path[64];
            snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
            for (unsigned flags = 0; flags <= JAG_LOAD_MMAP; flags++) {
                jag_tensor_set *again = NULL;
                FUZZ_CHECK(jag_load(path, flags, &again) == JAG_OK);
                same_sets(set, again);
                jag_tensor_set_free(again);
            }
        }
        close(fd);
    }
    /* save what was loaded; it loads back the same */
    int n = jag_tensor_set_count(set);
    if (n > 0) {
        if (!save_path[0]) snprintf(save_path, sizeof save_path, "/tmp/jag_fuzz_load_%d.safetensors", (int)getpid());
        const char **names = calloc((size_t)n, sizeof *names);
        jag_tensor **ts = calloc((size_t)n, sizeof *ts);
        for (int i = 0; i < n; i++) names[i] = jag_tensor_set_name(set, i), ts[i] = jag_tensor_set_get(set, i);
        const char **meta = calloc((size_t)jag_tensor_set_metadata_count(set) * 2 + 1, sizeof *meta);
        int n_meta = 0;
        for (int i = 0; i < jag_tensor_set_metadata_count(set); i++) {
            const char *k = jag_tensor_set_metadata_key(set, i);
            if (strncmp(k, "jag.", 4) == 0) continue; /* reserved on save */
            meta[2 * n_meta] = k, meta[2 * n_meta + 1] = jag_tensor_set_metadata_value(set, i), n_meta++;
        }
        st = jag_save(save_path, names, ts, n, meta, n_meta);
        /* a loaded name may be refused on save only for reasons the loader
         * does not have: an empty name, or a nested inner name clash */
        if (st == JAG_OK) {
            jag_tensor_set *back = NULL;
            FUZZ_CHECK(jag_load(save_path, JAG_LOAD_MMAP, &back) == JAG_OK);
            same_sets(set, back);
            jag_tensor_set_free(back);
        } else {
            FUZZ_CHECK(st == JAG_EINVAL);
        }
        unlink(save_path);
        free(names), free(ts), free(meta);
    }
    jag_tensor_set_free(set);
    FUZZ_CHECK(jag__live_tensors() == live);
    return 0;
}
