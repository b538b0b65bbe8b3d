/* json.c — the strict, bounded JSON reader described in json.h. */
#include "json.h"

#include <stdio.h>

typedef struct {
    const char *op, *what;
    const unsigned char *t;
    size_t len, pos;
    jag_json_doc *doc;
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

static jag_status new_node(parser *p, jag_json_kind kind, int32_t *out) {
    jag_json_doc *d = p->doc;
    if (d->n_nodes == d->cap_nodes) {
        if (d->cap_nodes >= INT32_MAX / 2)
            return jag__error(JAG_EINVAL, "%s: %s has too many JSON values", p->op, p->what);
        int32_t cap = d->cap_nodes ? d->cap_nodes * 2 : 64;
        jag_json_node *n = realloc(d->nodes, (size_t)cap * sizeof *n);
        if (!n) return jag__error(JAG_ENOMEM, "%s: out of memory parsing %s", p->op, p->what);
        d->nodes = n;
        d->cap_nodes = cap;
    }
    jag_json_node *n = &d->nodes[d->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->first = n->next = -1;
    n->pos = p->pos;
    *out = d->n_nodes++;
    return JAG_OK;
}

/* Append code point cp as UTF-8 to the pool. */
static void put_utf8(jag_json_doc *d, uint32_t cp) {
    char *o = d->pool + d->pool_len;
    if (cp < 0x80) {
        o[0] = (char)cp;
        d->pool_len += 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3f));
        d->pool_len += 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[2] = (char)(0x80 | (cp & 0x3f));
        d->pool_len += 3;
    } else {
        o[0] = (char)(0xf0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f));
        d->pool_len += 4;
    }
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

/* A string at p->pos (the opening quote), decoded into the pool. */
static jag_status parse_string(parser *p, const char **out, size_t *out_len) {
    jag_json_doc *d = p->doc;
    if (p->pos >= p->len || p->t[p->pos] != '"') return fail(p, p->pos, "a string");
    p->pos++;
    size_t start = d->pool_len;
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
                d->pool[d->pool_len++] = map[simple - "\"\\/bfnrt"];
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
            put_utf8(d, cp);
            continue;
        }
        size_t k = utf8_len(p->t + p->pos, p->len - p->pos);
        if (!k) return fail(p, p->pos, "valid UTF-8");
        memcpy(d->pool + d->pool_len, p->t + p->pos, k);
        d->pool_len += k;
        p->pos += k;
    }
    d->pool[d->pool_len++] = '\0';
    *out = d->pool + start;
    *out_len = d->pool_len - start - 1;
    return JAG_OK;
}

static jag_status parse_number(parser *p, jag_json_node *n) {
    size_t s = p->pos;
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
    n->pos = s;
    if (integral && in_range && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX)) {
        n->kind = JAG_JSON_INT;
        n->i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    } else {
        n->kind = JAG_JSON_NUMBER;
    }
    return JAG_OK;
}

static jag_status parse_value(parser *p, int depth, int32_t *out);

/* The members of an array or object; p->pos is just past the opener. */
static jag_status parse_children(parser *p, int depth, int32_t self, bool object) {
    char close = object ? '}' : ']';
    int32_t last = -1;
    skip_ws(p);
    if (p->pos < p->len && p->t[p->pos] == close) {
        p->pos++;
        return JAG_OK;
    }
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        jag_status st;
        if (object) {
            skip_ws(p);
            if (p->pos >= p->len || p->t[p->pos] != '"') return fail(p, p->pos, "a string key in the object");
            if ((st = parse_string(p, &key, &key_len))) return st;
            skip_ws(p);
            if (p->pos >= p->len || p->t[p->pos] != ':') return fail(p, p->pos, "':' after the object key");
            p->pos++;
        }
        int32_t child;
        if ((st = parse_value(p, depth + 1, &child))) return st;
        jag_json_node *c = &p->doc->nodes[child];
        c->key = key;
        c->key_len = key_len;
        if (last < 0) p->doc->nodes[self].first = child;
        else p->doc->nodes[last].next = child;
        last = child;
        p->doc->nodes[self].count++;
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

static jag_status parse_value(parser *p, int depth, int32_t *out) {
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, p->pos, "a value");
    unsigned c = p->t[p->pos];
    jag_status st;
    int32_t id;
    if (c == '{' || c == '[') {
        if (depth >= JAG_JSON_MAX_DEPTH) {
            return jag__error(JAG_EINVAL, "%s: %s nests JSON deeper than %d levels at byte %zu", p->op, p->what,
                              JAG_JSON_MAX_DEPTH, p->pos);
        }
        if ((st = new_node(p, c == '{' ? JAG_JSON_OBJECT : JAG_JSON_ARRAY, &id))) return st;
        p->pos++;
        if ((st = parse_children(p, depth, id, c == '{'))) return st;
    } else if (c == '"') {
        if ((st = new_node(p, JAG_JSON_STRING, &id))) return st;
        const char *s;
        size_t n;
        if ((st = parse_string(p, &s, &n))) return st;
        p->doc->nodes[id].s = s;
        p->doc->nodes[id].len = n;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        if ((st = new_node(p, JAG_JSON_INT, &id))) return st;
        if ((st = parse_number(p, &p->doc->nodes[id]))) return st;
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

jag_status jag__json_parse(const char *op, const char *what, const char *text, size_t len, jag_json_doc *doc) {
    memset(doc, 0, sizeof *doc);
    parser p = {op, what, (const unsigned char *)text, len, 0, doc};
    /* decoded strings (with their NULs) are never longer than the text */
    doc->pool_cap = len + 1;
    doc->pool = malloc(doc->pool_cap);
    if (!doc->pool) return jag__error(JAG_ENOMEM, "%s: out of memory parsing %s (%zu bytes)", op, what, len);
    int32_t root;
    jag_status st = parse_value(&p, 0, &root);
    if (!st) {
        skip_ws(&p);
        if (p.pos != len) st = fail(&p, p.pos, "the end of the text after the value");
    }
    if (st) jag__json_free(doc);
    return st;
}

void jag__json_free(jag_json_doc *doc) {
    free(doc->nodes);
    free(doc->pool);
    memset(doc, 0, sizeof *doc);
}

const jag_json_node *jag__json_get(const jag_json_doc *doc, const jag_json_node *obj, const char *key) {
    if (!obj || obj->kind != JAG_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (int32_t i = obj->first; i >= 0; i = doc->nodes[i].next)
        if (doc->nodes[i].key_len == n && memcmp(doc->nodes[i].key, key, n) == 0) return &doc->nodes[i];
    return NULL;
}
