/*
 * corpus.h — a real ragged text corpus for the demo and the benchmarks: the
 * fortune files of Debian's fortunes-min package (scripts/setup.sh installs
 * it), split into documents at "%" lines, tokenized by whitespace, with a
 * vocabulary built on the fly. Each document's label is the file it came
 * from. Header-only so that examples and benchmarks share it.
 */
#ifndef JAG_CORPUS_H
#define JAG_CORPUS_H

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS_DIR "/usr/share/games/fortunes"

typedef struct corpus {
    int64_t n_docs;
    int64_t *offsets;  /* n_docs + 1: document d's tokens are tokens[offsets[d] .. offsets[d+1]) */
    int64_t *tokens;   /* token ids */
    int64_t *labels;   /* source file of each document */
    int64_t n_tokens;
    int64_t vocab_size;
    char **words;      /* vocab_size words */
    int n_files;
    char files[8][256];
} corpus;

/* ---- a small open-addressing string -> id table ------------------------- */

typedef struct {
    char **keys;
    int64_t *ids;
    size_t cap;
} vocab_table;

static uint64_t corpus_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int corpus_grow(vocab_table *t) {
    size_t cap = t->cap ? t->cap * 2 : 4096;
    char **keys = calloc(cap, sizeof *keys);
    int64_t *ids = calloc(cap, sizeof *ids);
    if (!keys || !ids) {
        free(keys), free(ids);
        return -1;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->keys[i]) continue;
        size_t j = corpus_hash(t->keys[i]) & (cap - 1);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = t->keys[i], ids[j] = t->ids[i];
    }
    free(t->keys), free(t->ids);
    t->keys = keys, t->ids = ids, t->cap = cap;
    return 0;
}

static int64_t corpus_intern(corpus *c, vocab_table *t, const char *w) {
    if (t->cap == 0 || (size_t)c->vocab_size * 2 >= t->cap)
        if (corpus_grow(t)) return -1;
    size_t j = corpus_hash(w) & (t->cap - 1);
    while (t->keys[j]) {
        if (strcmp(t->keys[j], w) == 0) return t->ids[j];
        j = (j + 1) & (t->cap - 1);
    }
    char *copy = strdup(w);
    char **words = realloc(c->words, (size_t)(c->vocab_size + 1) * sizeof *words);
    if (!copy || !words) {
        free(copy);
        if (words) c->words = words;
        return -1;
    }
    c->words = words;
    c->words[c->vocab_size] = copy;
    t->keys[j] = copy, t->ids[j] = c->vocab_size;
    return c->vocab_size++;
}

static int corpus_push(int64_t **arr, int64_t *cap, int64_t n, int64_t v) {
    if (n >= *cap) {
        int64_t nc = *cap ? *cap * 2 : 1024;
        int64_t *a = realloc(*arr, (size_t)nc * sizeof *a);
        if (!a) return -1;
        *arr = a, *cap = nc;
    }
    (*arr)[n] = v;
    return 0;
}

static void corpus_free(corpus *c) {
    for (int64_t i = 0; i < c->vocab_size; i++) free(c->words[i]);
    free(c->words), free(c->offsets), free(c->tokens), free(c->labels);
    memset(c, 0, sizeof *c);
}

/* Load `paths` (fortune files: documents separated by lines holding "%",
 * or plain text: one document per line when `per_line`). Lower-cases words
 * and strips punctuation at their ends. Returns 0, or -1 with a message in
 * err. Documents with no tokens are skipped. */
static int corpus_load(corpus *c, const char *const *paths, int n_paths, int per_line, char *err, size_t err_cap) {
    memset(c, 0, sizeof *c);
    vocab_table table = {0};
    int64_t cap_tok = 0, cap_off = 0, cap_lab = 0, n_tok = 0, n_docs = 0;
    int rc = 0;
    if (corpus_push(&c->offsets, &cap_off, 0, 0)) rc = -1;
    for (int f = 0; f < n_paths && rc == 0; f++) {
        FILE *fp = fopen(paths[f], "r");
        if (!fp) {
            snprintf(err, err_cap, "cannot open '%s' (is fortunes-min installed? run scripts/setup.sh)", paths[f]);
            rc = -1;
            break;
        }
        if (c->n_files < 8) snprintf(c->files[c->n_files++], sizeof c->files[0], "%s", paths[f]);
        char line[4096];
        int64_t doc_start = n_tok;
        int at_eof = 0;
        while (rc == 0 && !at_eof) {
            at_eof = fgets(line, sizeof line, fp) == NULL;
            int boundary = at_eof || per_line || (line[0] == '%' && (line[1] == '\n' || line[1] == '\0'));
            if (!at_eof && !(line[0] == '%' && !per_line)) {
                char *save = NULL;
                for (char *w = strtok_r(line, " \t\r\n", &save); w && rc == 0; w = strtok_r(NULL, " \t\r\n", &save)) {
                    char *end = w + strlen(w);
                    while (*w && ispunct((unsigned char)*w)) w++;
                    while (end > w && ispunct((unsigned char)end[-1])) *--end = '\0';
                    if (!*w) continue;
                    for (char *p = w; *p; p++) *p = (char)tolower((unsigned char)*p);
                    int64_t id = corpus_intern(c, &table, w);
                    if (id < 0 || corpus_push(&c->tokens, &cap_tok, n_tok++, id)) rc = -1;
                }
            }
            if (boundary && n_tok > doc_start && rc == 0) {
                if (corpus_push(&c->offsets, &cap_off, n_docs + 1, n_tok) ||
                    corpus_push(&c->labels, &cap_lab, n_docs, f))
                    rc = -1;
                n_docs++;
                doc_start = n_tok;
            }
        }
        fclose(fp);
    }
    free(table.keys), free(table.ids);
    c->n_docs = n_docs, c->n_tokens = n_tok;
    if (rc == 0 && n_docs == 0) {
        snprintf(err, err_cap, "no documents with words in the given files");
        rc = -1;
    } else if (rc != 0 && err[0] == '\0') {
        snprintf(err, err_cap, "out of memory reading the corpus");
    }
    if (rc) corpus_free(c);
    return rc;
}

/* The fortunes-min files. */
static int corpus_load_fortunes(corpus *c, char *err, size_t err_cap) {
    static const char *const paths[] = {CORPUS_DIR "/fortunes", CORPUS_DIR "/literature", CORPUS_DIR "/riddles"};
    return corpus_load(c, paths, 3, 0, err, err_cap);
}

#endif /* JAG_CORPUS_H */
