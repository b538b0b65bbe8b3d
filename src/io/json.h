/*
 * json.h — a small strict JSON reader for file headers (safetensors.c).
 *
 * Why not a library: a safetensors header needs only objects, strings,
 * integers and arrays, and it comes from files nobody vouches for. A reader
 * of a few hundred lines whose every bound is visible (nesting depth, node
 * count, string bytes, integer range, memory) is easier to prove safe than
 * a general one, and it adds no dependency.
 *
 * What it accepts: RFC 8259 JSON text (objects, arrays, strings with every
 * escape incl. surrogate pairs, numbers, true/false/null), surrounded by
 * whitespace, of at most JAG_JSON_MAX_TEXT bytes. Strings must be valid
 * UTF-8 with no raw control characters and decode to no NUL byte. Numbers
 * are kept as int64 when they are integers in range; any other number is
 * JAG_JSON_NUMBER (its value is not kept: no user of this reader needs one).
 * Nesting deeper than JAG_JSON_MAX_DEPTH is an error, and so the recursion
 * is bounded.
 *
 * Memory: the text is read twice. The first pass checks all of it and
 * counts the values, the decoded string bytes and the integers that do not
 * fit 32 bits, allocating nothing; the second allocates exactly that once
 * and fills it. Invalid text therefore costs no memory, and valid text at
 * most 4 bytes per byte of text plus a few bytes (jag__json_parse's comment
 * says why). A caller that needs an object can say so: an array at the top
 * is then refused at its first byte, before anything is read or allocated.
 */
#ifndef JAG_IO_JSON_H
#define JAG_IO_JSON_H

#include "../core/internal.h"

#define JAG_JSON_MAX_DEPTH 32
/* Keys are stored as 28-bit offsets into the decoded strings, which are
 * never longer than the text: texts up to this size can be read. */
#define JAG_JSON_MAX_TEXT ((size_t)((1u << 28) - 2))

typedef enum {
    JAG_JSON_NULL,
    JAG_JSON_FALSE,
    JAG_JSON_TRUE,
    JAG_JSON_INT,    /* an integer that fits int64 */
    JAG_JSON_NUMBER, /* any other number (fraction, exponent, out of range) */
    JAG_JSON_STRING,
    JAG_JSON_ARRAY,
    JAG_JSON_OBJECT,
} jag_json_kind;

/* One value: 8 bytes. Values are stored in document order (a value, then
 * its children and their descendants), so an array's or object's first
 * child is the node after it, and `val` says where its descendants end.
 *   tag  bits 0..27: 1 + the offset of the member's key in the pool (0: not
 *        an object member); bits 28..31: the stored kind (JSON_K_* in
 *        json.c: an int that fits 32 bits is stored in `val`, a larger one
 *        in the document's `ints`)
 *   val  array / object: the index just past its last descendant; string:
 *        its offset in the pool; int: the value, or its index in `ints`
 * Read nodes through the functions below, never their fields. */
typedef struct jag_json_node {
    uint32_t tag;
    uint32_t val;
} jag_json_node;

typedef struct jag_json_doc {
    jag_json_node *nodes; /* nodes[0] is the root */
    uint32_t n_nodes;
    int64_t *ints;        /* integers that do not fit 32 bits */
    uint32_t n_ints;
    char *pool;           /* decoded strings, each NUL-terminated */
    size_t pool_len;
    size_t bytes;         /* bytes allocated for the document in all */
} jag_json_doc;

/* Parse text[0..len) into doc. When `object_expected` is not NULL the root
 * must be an object: anything else is refused with "<op>: <what> is <kind>,
 * expected <object_expected>" (an array at its first byte, before the rest
 * is read). On failure returns JAG_EINVAL (JAG_ENOMEM) with a message
 * "<op>: <what> is not valid JSON at byte <n>: expected ..., got ..." and
 * leaves nothing allocated. Free a parsed document with jag__json_free. */
jag_status jag__json_parse(const char *op, const char *what, const char *text, size_t len, const char *object_expected,
                           jag_json_doc *doc);
void jag__json_free(jag_json_doc *doc);

/* "an object", "a string", ... for messages. */
const char *jag__json_kind_name(jag_json_kind k);

/* ---- reading a parsed document ------------------------------------------ */

enum { JAG__JSON_K_INT32 = 8, JAG__JSON_K_INT64 = 9 }; /* stored kinds beyond jag_json_kind */
#define JAG__JSON_KEY_MASK 0x0fffffffu

static inline const jag_json_node *jag__json_root(const jag_json_doc *d) { return &d->nodes[0]; }

static inline jag_json_kind jag__json_kind(const jag_json_node *n) {
    unsigned k = n->tag >> 28;
    return k >= JAG__JSON_K_INT32 ? JAG_JSON_INT : (jag_json_kind)k;
}

/* An object member's key (decoded, NUL-terminated), else NULL. */
static inline const char *jag__json_key(const jag_json_doc *d, const jag_json_node *n) {
    uint32_t k = n->tag & JAG__JSON_KEY_MASK;
    return k ? d->pool + (k - 1) : NULL;
}

/* A string's text (decoded, NUL-terminated, no NUL inside); NULL for
 * another kind. */
static inline const char *jag__json_str(const jag_json_doc *d, const jag_json_node *n) {
    return jag__json_kind(n) == JAG_JSON_STRING ? d->pool + n->val : NULL;
}

/* An integer's value; 0 for another kind. */
static inline int64_t jag__json_int(const jag_json_doc *d, const jag_json_node *n) {
    unsigned k = n->tag >> 28;
    return k == JAG__JSON_K_INT32 ? (int64_t)(int32_t)n->val : k == JAG__JSON_K_INT64 ? d->ints[n->val] : 0;
}

/* The index just past n and its descendants. */
static inline uint32_t jag__json_end(const jag_json_doc *d, const jag_json_node *n) {
    jag_json_kind k = jag__json_kind(n);
    return k == JAG_JSON_ARRAY || k == JAG_JSON_OBJECT ? n->val : (uint32_t)(n - d->nodes) + 1;
}

/* The first child of an array or object, or NULL (none, or another kind). */
static inline const jag_json_node *jag__json_first(const jag_json_doc *d, const jag_json_node *n) {
    return jag__json_end(d, n) > (uint32_t)(n - d->nodes) + 1 ? n + 1 : NULL;
}

/* The child of `parent` after child c, or NULL. */
static inline const jag_json_node *jag__json_next(const jag_json_doc *d, const jag_json_node *parent,
                                                  const jag_json_node *c) {
    uint32_t e = jag__json_end(d, c);
    return e < jag__json_end(d, parent) ? &d->nodes[e] : NULL;
}

/* The number of children of an array or object (a walk over them). */
int64_t jag__json_count(const jag_json_doc *d, const jag_json_node *n);

/* The member named `key` of an object node, or NULL. */
const jag_json_node *jag__json_get(const jag_json_doc *d, const jag_json_node *obj, const char *key);

#endif /* JAG_IO_JSON_H */
