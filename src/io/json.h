/*
 * json.h — a small strict JSON reader for file headers (safetensors.c).
 *
 * Why not a library: a safetensors header needs only objects, strings,
 * integers and arrays, and it comes from files nobody vouches for. A reader
 * of a few hundred lines whose every bound is visible (nesting depth, node
 * count, string bytes, integer range) is easier to prove safe than a general
 * one, and it adds no dependency.
 *
 * What it accepts: RFC 8259 JSON text (objects, arrays, strings with every
 * escape incl. surrogate pairs, numbers, true/false/null), surrounded by
 * whitespace. Strings must be valid UTF-8 with no raw control characters and
 * decode to no NUL byte. Numbers are kept as int64 when they are integers in
 * range; any other number is JAG_JSON_NUMBER (its value is not kept: no user
 * of this reader needs one). Nesting deeper than JAG_JSON_MAX_DEPTH is an
 * error, and so the recursion is bounded.
 *
 * Memory: every node is one entry of a growing array and every decoded
 * string lives in one pool of at most the text's length, so what is
 * allocated is bounded by the text's size, which the caller has checked.
 */
#ifndef JAG_IO_JSON_H
#define JAG_IO_JSON_H

#include "../core/internal.h"

#define JAG_JSON_MAX_DEPTH 32

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

/* One value. Children of an array or object form a list through `next`
 * (indices into the document's node array; -1 ends it). Object members
 * carry their key. */
typedef struct jag_json_node {
    jag_json_kind kind;
    int32_t first;  /* first child, -1 if none */
    int32_t next;   /* next sibling, -1 if none */
    int32_t count;  /* number of children */
    int64_t i;      /* JAG_JSON_INT */
    const char *s;  /* JAG_JSON_STRING: decoded, NUL-terminated */
    size_t len;
    const char *key; /* member of an object: its key, decoded */
    size_t key_len;
    size_t pos;     /* byte offset of the value in the text (messages) */
} jag_json_node;

typedef struct jag_json_doc {
    jag_json_node *nodes; /* nodes[0] is the root */
    int32_t n_nodes, cap_nodes;
    char *pool;           /* decoded strings */
    size_t pool_len, pool_cap;
} jag_json_doc;

/* Parse text[0..len) into doc. On failure returns JAG_EINVAL (JAG_ENOMEM)
 * with a message "<op>: <what> at byte <n>: expected ..., got ..." and
 * leaves nothing allocated. Free a parsed document with jag__json_free. */
jag_status jag__json_parse(const char *op, const char *what, const char *text, size_t len, jag_json_doc *doc);
void jag__json_free(jag_json_doc *doc);

/* The member named `key` of an object node, or NULL. */
const jag_json_node *jag__json_get(const jag_json_doc *doc, const jag_json_node *obj, const char *key);
static inline const jag_json_node *jag__json_child(const jag_json_doc *doc, int32_t i) {
    return i >= 0 ? &doc->nodes[i] : NULL;
}
/* "an object", "a string", ... for messages. */
const char *jag__json_kind_name(jag_json_kind k);

#endif /* JAG_IO_JSON_H */
