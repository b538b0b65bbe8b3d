/* format.c — printing tensors as text, torch-style. */
#include "internal.h"

#include <stdio.h>

typedef struct {
    char *buf;
    size_t cap, len; /* len counts every byte wanted, even past cap */
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}

/* A tensor of more than SUMMARIZE_ABOVE elements shows at most the first and
 * last EDGE entries of each dim (torch's print options: threshold 1000,
 * edgeitems 3); a smaller one shows every entry. */
#define SUMMARIZE_ABOVE 1000
#define EDGE 3

static void put_value(text *t, const jag_tensor *x, int64_t off) {
    const char *p = jag__ptr(x) + off * (int64_t)jag_dtype_size(x->dtype);
    switch (x->dtype) {
    case JAG_FLOAT32:
    case JAG_FLOAT64:
    case JAG_FLOAT16:
    case JAG_BFLOAT16: put(t, "%.4f", jag__load_as_double(p, x->dtype)); break;
    case JAG_INT32: put(t, "%d", *(const int32_t *)p); break;
    case JAG_INT64: put(t, "%lld", (long long)*(const int64_t *)p); break;
    case JAG_BOOL: put(t, "%s", *(const uint8_t *)p ? "True" : "False"); break;
    default: put(t, "?");
    }
}

static void put_dim(text *t, const jag_tensor *x, int d, int64_t off, int indent, bool summarize) {
    if (d == x->ndim) {
        put_value(t, x, off);
        return;
    }
    put(t, "[");
    int64_t n = x->sizes[d];
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 2 * EDGE && i == EDGE) {
            put(t, "...");
            i = n - EDGE - 1;
            put(t, d == x->ndim - 1 ? ", " : ",\n%*s", d == x->ndim - 1 ? 0 : indent + 1, "");
            continue;
        }
        put_dim(t, x, d + 1, off + i * x->strides[d], indent + 1, summarize);
        if (i + 1 < n) put(t, d == x->ndim - 1 ? ", " : ",\n%*s", d == x->ndim - 1 ? 0 : indent + 1, "");
    }
    put(t, "]");
}

size_t jag_format(const jag_tensor *x, char *buf, size_t cap) {
    text t = {buf, cap, 0};
    if (cap && buf) buf[0] = '\0';
    if (!buf) t.cap = 0;
    if (!x) {
        put(&t, "(null)");
        return t.len;
    }
    if (!jag__tensor_live(x)) {
        put(&t, "(released tensor)");
        return t.len;
    }
    char shape[JAG_SHAPE_BUF];
    jag__shape_str(x->sizes, x->ndim, shape, sizeof shape);
    if (x->subclass) {
        size_t (*fmt)(const jag_tensor *, char *, size_t) = jag__subclass_format_fn(x->subclass);
        if (fmt) return fmt(x, buf, cap);
        put(&t, "%s(size=%s, dtype=%s)", jag_subclass_name(x->subclass), shape, jag_dtype_name(x->dtype));
        return t.len;
    }
    if (jag__is_meta(x)) {
        put(&t, "tensor(..., size=%s, dtype=%s, device=meta)", shape, jag_dtype_name(x->dtype));
        return t.len;
    }
    put(&t, "tensor(");
    if (jag__numel(x->sizes, x->ndim) == 0) put(&t, "[]"); /* no element: no offsets to compute */
    else put_dim(&t, x, 0, 0, 7, jag_numel(x) > SUMMARIZE_ABOVE);
    put(&t, ", dtype=%s, size=%s)", jag_dtype_name(x->dtype), shape);
    return t.len;
}
