/* json.c — the strict, bounded JSON reader described in json.h. */
#include "json.h"

#include <stdio.h>

/* Stored kinds (a node's tag bits 28..31): jag_json_kind, then these. */
#define K_INT32 JAG__JSON_K_INT32 /* an int that fits 32 bits, in the node */
#define K_INT64 JAG__JSON_K_INT64 /* a larger int, in doc->ints */

typedef struct {
    const char *op, *what;
    const unsigned char *t;
    size_t len, pos;
    jag_json_doc *doc;
    bool build; /* false: the first pass, which counts and writes nothing */
    /* counted in both passes: nodes, ints in doc->ints, pool bytes */
    uint32_t n_nodes, n_ints;
    size_t n_pool;
} parser;

const char *jag__json_kind_name(jag_json_kind k) {
    switch (k) {
    case JAG_JSON_NULL: return "null";
    case JAG_JSON_FALSE:
    case JAG_JSON_TRUE: return "a boolean";
    case JAG_JSON_INT: return "an integer";
    case JAG_JSON_NUMBER: return "a non-integer number";
    case JAG_JSON_STRING: return "a string";
    case JAG_JSON_ARRAY: return "an array";
    case JAG_JSON_OBJECT: return "an object";
    }
    return "?";
}

/* What is at `pos`, for messages. */
static const char *got(const parser *p, size_t pos, char *buf, size_t cap) {
    if (pos >= p->len) snprintf(buf, cap, "the end of the text");
    else if (p->t[pos] >= 0x20 && p->t[pos] < 0x7f) snprintf(buf, cap, "'%c'", p->t[pos]);
    else snprintf(buf, cap, "byte 0x%02x", p->t[pos]);
    return buf;
}

static jag_status fail(const parser *p, size_t pos, const char *expected) {
    char g[32];
    return jag__error(JAG_EINVAL, "%s: %s is not valid JSON at byte %zu: expected %s, got %s", p->op, p->what, pos,
                      expected, got(p, pos, g, sizeof g));
}

static void skip_ws(parser *p) {
    while (p->pos < p->len &&
           (p->t[p->pos] == ' ' || p->t[p->pos] == '\t' || p->t[p->pos] == '\n' || p->t[p->pos] == '\r'))
        p->pos++;
}

/* A new node of stored kind `kind`; its index in *out. The second pass
 * makes exactly the nodes the first one counted. */
static jag_status new_node(parser *p, unsigned kind, uint32_t *out) {
    jag_json_doc *d = p->doc;
    if (p->build) {
        if (p->n_nodes >= d->n_nodes)
            return jag__error(JAG_EINTERNAL, "%s: reading %s made more JSON values than it counted", p->op, p->what);
        d->nodes[p->n_nodes] = (jag_json_node){.tag = (uint32_t)kind << 28, .val = 0};
    }
    *out = p->n_nodes++;
    return JAG_OK;
}

/* Append k decoded bytes to the pool (the first pass only counts them). */
static void emit(parser *p, const void *bytes, size_t k) {
    if (p->build) memcpy(p->doc->pool + p->n_pool, bytes, k);
    p->n_pool += k;
}

/* Append code point cp as UTF-8. */
static void put_utf8(parser *p, uint32_t cp) {
    unsigned char o[4];
    size_t k;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp, k = 1;
    } else if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | (cp >> 6)), o[1] = (unsigned char)(0x80 | (cp & 0x3f)), k = 2;
    } else if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | (cp >> 12)), o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f)), k = 3;
    } else {
        o[0] = (unsigned char)(0xf0 | (cp >> 18)), o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)), o[3] = (unsigned char)(0x80 | (cp & 0x3f)), k = 4;
    }
    emit(p, o, k);
}

static int hex4(const unsigned char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    *out = v;
    return 0;
}

/* The length of the valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k;
    uint32_t lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0) lo = 0xa0;      /* no overlong forms */
        if (c == 0xed) hi = 0x9f;      /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;      /* at most U+10FFFF */
    } else
        return 0;
    if (n < k) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return k;
}

/* A string at p->pos (the opening quote), decoded into the pool; its
 * offset there in *out. */
static jag_status parse_string(parser *p, size_t *out) {
    if (p->pos >= p->len || p->t[p->pos] != '"') return fail(p, p->pos, "a string");
    p->pos++;
    size_t start = p->n_pool;
    for (;;) {
        if (p->pos >= p->len) return fail(p, p->pos, "'\"' closing the string");
        unsigned c = p->t[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) return fail(p, p->pos, "a character (raw control characters must be escaped)");
        if (c == '\\') {
            if (p->pos + 1 >= p->len) return fail(p, p->pos + 1, "an escape character");
            unsigned e = p->t[p->pos + 1];
            const char *simple = strchr("\"\\/bfnrt", (int)e);
            if (e && simple) {
                static const char map[] = "\"\\/\b\f\n\r\t";
                emit(p, &map[simple - "\"\\/bfnrt"], 1);
                p->pos += 2;
                continue;
            }
            if (e != 'u') return fail(p, p->pos + 1, "one of \" \\ / b f n r t u after '\\'");
            uint32_t cp;
            if (p->len - p->pos < 6 || hex4(p->t + p->pos + 2, &cp))
                return fail(p, p->pos + 2, "4 hex digits after '\\u'");
            p->pos += 6;
            if (cp >= 0xdc00 && cp <= 0xdfff) return fail(p, p->pos - 6, "a code point (a lone low surrogate came)");
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t lo;
                if (p->len - p->pos < 6 || p->t[p->pos] != '\\' || p->t[p->pos + 1] != 'u' ||
                    hex4(p->t + p->pos + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return fail(p, p->pos, "'\\u' and a low surrogate after a high surrogate");
                p->pos += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp == 0) return fail(p, p->pos - 6, "a character other than \\u0000");
            put_utf8(p, cp);
            continue;
        }
        size_t k = utf8_len(p->t + p->pos, p->len - p->pos);
        if (!k) return fail(p, p->pos, "valid UTF-8");
        emit(p, p->t + p->pos, k);
        p->pos += k;
    }
    emit(p, "", 1);
    *out = start;
    return JAG_OK;
}

/* A number at p->pos: its node (an int of 32 or 64 bits, or a number). */
static jag_status parse_number(parser *p, uint32_t *out) {
    bool neg = false, integral = true, in_range = true;
    uint64_t mag = 0;
    if (p->t[p->pos] == '-') neg = true, p->pos++;
    if (p->pos >= p->len || p->t[p->pos] < '0' || p->t[p->pos] > '9') return fail(p, p->pos, "a digit");
    if (p->t[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->len && p->t[p->pos] >= '0' && p->t[p->pos] <= '9')
            return fail(p, p->pos, "no digit after a leading 0");
    } else {
        while (p->pos < p->len && p->t[p->pos] >= '0' && p->t[p->pos] <= '9') {
            unsigned dgt = p->t[p->pos++] - '0';
            if (mag > (UINT64_MAX - dgt) / 10) in_range = false;
            else mag = mag * 10 + dgt;
        }
    }
    if (p->pos < p->len && p->t[p->pos] == '.') {
        integral = false;
        p->pos++;
        if (p->pos >= p->len || p->t[p->pos] < '0' || p->t[p->pos] > '9') return fail(p, p->pos, "a digit after '.'");
        while (p->pos < p->len && p->t[p->pos] >= '0' && p->t[p->pos] <= '9') p->pos++;
    }
    if (p->pos < p->len && (p->t[p->pos] == 'e' || p->t[p->pos] == 'E')) {
        integral = false;
        p->pos++;
        if (p->pos < p->len && (p->t[p->pos] == '+' || p->t[p->pos] == '-')) p->pos++;
        if (p->pos >= p->len || p->t[p->pos] < '0' || p->t[p->pos] > '9')
            return fail(p, p->pos, "a digit in the exponent");
        while (p->pos < p->len && p->t[p->pos] >= '0' && p->t[p->pos] <= '9') p->pos++;
    }
    if (!integral || !in_range || mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
        return new_node(p, JAG_JSON_NUMBER, out);
    int64_t v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    bool small = v >= INT32_MIN && v <= INT32_MAX;
    jag_status st = new_node(p, small ? K_INT32 : K_INT64, out);
    if (st) return st;
    if (small) {
        if (p->build) p->doc->nodes[*out].val = (uint32_t)(int32_t)v;
        return JAG_OK;
    }
    if (p->build) {
        if (p->n_ints >= p->doc->n_ints)
            return jag__error(JAG_EINTERNAL, "%s: reading %s found more integers than it counted", p->op, p->what);
        p->doc->ints[p->n_ints] = v;
        p->doc->nodes[*out].val = p->n_ints;
    }
    p->n_ints++;
    return JAG_OK;
}

static jag_status parse_value(parser *p, int depth, uint32_t *out);

/* The members of an array or object; p->pos is just past the opener. */
static jag_status parse_children(parser *p, int depth, bool object) {
    char close = object ? '}' : ']';
    skip_ws(p);
    if (p->pos < p->len && p->t[p->pos] == close) {
        p->pos++;
        return JAG_OK;
    }
    for (;;) {
        size_t key = 0;
        jag_status st;
        if (object) {
            skip_ws(p);
            if (p->pos >= p->len || p->t[p->pos] != '"') return fail(p, p->pos, "a string key in the object");
            if ((st = parse_string(p, &key))) return st;
            skip_ws(p);
            if (p->pos >= p->len || p->t[p->pos] != ':') return fail(p, p->pos, "':' after the object key");
            p->pos++;
        }
        uint32_t child;
        if ((st = parse_value(p, depth + 1, &child))) return st;
        if (object && p->build) p->doc->nodes[child].tag |= (uint32_t)(key + 1);
        skip_ws(p);
        if (p->pos < p->len && p->t[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->t[p->pos] == close) {
            p->pos++;
            return JAG_OK;
        }
        return fail(p, p->pos, object ? "',' or '}' in the object" : "',' or ']' in the array");
    }
}

static jag_status parse_value(parser *p, int depth, uint32_t *out) {
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, p->pos, "a value");
    unsigned c = p->t[p->pos];
    jag_status st;
    uint32_t id = 0;
    if (c == '{' || c == '[') {
        if (depth >= JAG_JSON_MAX_DEPTH) {
            return jag__error(JAG_EINVAL, "%s: %s nests JSON deeper than %d levels at byte %zu", p->op, p->what,
                              JAG_JSON_MAX_DEPTH, p->pos);
        }
        if ((st = new_node(p, c == '{' ? JAG_JSON_OBJECT : JAG_JSON_ARRAY, &id))) return st;
        p->pos++;
        if ((st = parse_children(p, depth, c == '{'))) return st;
        if (p->build) p->doc->nodes[id].val = p->n_nodes; /* past its last descendant */
    } else if (c == '"') {
        if ((st = new_node(p, JAG_JSON_STRING, &id))) return st;
        size_t s;
        if ((st = parse_string(p, &s))) return st;
        if (p->build) p->doc->nodes[id].val = (uint32_t)s;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        if ((st = parse_number(p, &id))) return st;
    } else {
        static const struct { const char *word; jag_json_kind kind; } lits[] = {
            {"true", JAG_JSON_TRUE}, {"false", JAG_JSON_FALSE}, {"null", JAG_JSON_NULL}};
        int k = -1;
        for (int i = 0; i < 3; i++) {
            size_t n = strlen(lits[i].word);
            if (p->len - p->pos >= n && memcmp(p->t + p->pos, lits[i].word, n) == 0) k = i;
        }
        if (k < 0) return fail(p, p->pos, "a value (object, array, string, number, true, false or null)");
        if ((st = new_node(p, lits[k].kind, &id))) return st;
        p->pos += strlen(lits[k].word);
    }
    *out = id;
    return JAG_OK;
}

/* One pass over the whole text. */
static jag_status parse_text(parser *p) {
    uint32_t root;
    jag_status st = parse_value(p, 0, &root);
    if (st) return st;
    skip_ws(p);
    return p->pos == p->len ? JAG_OK : fail(p, p->pos, "the end of the text after the value");
}

/*
 * Memory: the second pass allocates 8 bytes per value, 8 per integer that
 * does not fit 32 bits and the decoded strings with their NULs, and these
 * total at most 4 * len + 4 bytes. Every value but the root follows its own
 * separator ('[', '{' or ',' before it or before its key), every array and
 * object ends with a closer, and an opener is the first byte of its own
 * value: counting first bytes, commas and closers, a text of n values has
 * len >= 2n - 1, so the nodes take at most 4 (len + 1) bytes. The bytes
 * not counted there pay for the rest: a string's content and closing quote
 * (at least the bytes it decodes to, with its NUL), a key's quotes, content
 * and ':' (the same), a 64-bit integer's other 9 or more characters (its 8
 * bytes).
 */
jag_status jag__json_parse(const char *op, const char *what, const char *text, size_t len, const char *object_expected,
                           jag_json_doc *doc) {
    memset(doc, 0, sizeof *doc);
    if (len > JAG_JSON_MAX_TEXT)
        return jag__error(JAG_EINVAL, "%s: %s has %zu bytes, expected at most %zu for the JSON reader", op, what, len,
                          JAG_JSON_MAX_TEXT);
    parser p = {op, what, (const unsigned char *)text, len, 0, doc, false, 0, 0, 0};
    if (object_expected) {
        /* an array at the top is refused before it is read */
        skip_ws(&p);
        if (p.pos < len && p.t[p.pos] == '[')
            return jag__error(JAG_EINVAL, "%s: %s is an array, expected %s", op, what, object_expected);
        p.pos = 0;
    }
    jag_status st = parse_text(&p);
    if (st) return st;
    /* the second pass, into memory of the counted sizes */
    doc->n_nodes = p.n_nodes, doc->n_ints = p.n_ints, doc->pool_len = p.n_pool;
    doc->bytes = (size_t)p.n_nodes * sizeof *doc->nodes + (size_t)p.n_ints * sizeof *doc->ints + p.n_pool;
    doc->nodes = malloc((size_t)p.n_nodes * sizeof *doc->nodes);
    doc->ints = p.n_ints ? malloc((size_t)p.n_ints * sizeof *doc->ints) : NULL;
    doc->pool = malloc(p.n_pool ? p.n_pool : 1);
    if (!doc->nodes || (p.n_ints && !doc->ints) || !doc->pool) {
        jag__json_free(doc);
        return jag__error(JAG_ENOMEM, "%s: out of memory parsing %s (%zu bytes)", op, what, len);
    }
    parser q = {op, what, (const unsigned char *)text, len, 0, doc, true, 0, 0, 0};
    st = parse_text(&q);
    if (!st && (q.n_nodes != p.n_nodes || q.n_ints != p.n_ints || q.n_pool != p.n_pool))
        st = jag__error(JAG_EINTERNAL, "%s: reading %s twice gave different counts", op, what);
    if (!st && object_expected && jag__json_kind(jag__json_root(doc)) != JAG_JSON_OBJECT)
        st = jag__error(JAG_EINVAL, "%s: %s is %s, expected %s", op, what,
                        jag__json_kind_name(jag__json_kind(jag__json_root(doc))), object_expected);
    if (st) jag__json_free(doc);
    return st;
}

void jag__json_free(jag_json_doc *doc) {
    free(doc->nodes);
    free(doc->ints);
    free(doc->pool);
    memset(doc, 0, sizeof *doc);
}

int64_t jag__json_count(const jag_json_doc *d, const jag_json_node *n) {
    int64_t k = 0;
    for (const jag_json_node *c = jag__json_first(d, n); c; c = jag__json_next(d, n, c)) k++;
    return k;
}

const jag_json_node *jag__json_get(const jag_json_doc *d, const jag_json_node *obj, const char *key) {
    if (!obj || jag__json_kind(obj) != JAG_JSON_OBJECT) return NULL;
    for (const jag_json_node *c = jag__json_first(d, obj); c; c = jag__json_next(d, obj, c))
        if (strcmp(jag__json_key(d, c), key) == 0) return c;
    return NULL;
}
