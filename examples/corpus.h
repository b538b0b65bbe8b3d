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
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* Loading state: the vocabulary table and the growing arrays. */
typedef struct {
    corpus *c;
    vocab_table table;
    int64_t cap_tok, cap_off, cap_lab, doc_start;
} corpus_loader;

/* Tokenize one line into the current document: lower-cased words with the
 * punctuation at their ends stripped. Returns 0, or -1 out of memory. */
static int corpus_add_words(corpus_loader *L, char *line) {
    char *save = NULL;
    for (char *w = strtok_r(line, " \t\r\n", &save); w; w = strtok_r(NULL, " \t\r\n", &save)) {
        char *end = w + strlen(w);
        while (*w && ispunct((unsigned char)*w)) w++;
        while (end > w && ispunct((unsigned char)end[-1])) *--end = '\0';
        if (!*w) continue;
        for (char *p = w; *p; p++) *p = (char)tolower((unsigned char)*p);
        int64_t id = corpus_intern(L->c, &L->table, w);
        if (id < 0 || corpus_push(&L->c->tokens, &L->cap_tok, L->c->n_tokens++, id)) return -1;
    }
    return 0;
}

/* Close the current document (if it has words) with label `label`. */
static int corpus_end_doc(corpus_loader *L, int64_t label) {
    corpus *c = L->c;
    if (c->n_tokens == L->doc_start) return 0;
    if (corpus_push(&c->offsets, &L->cap_off, c->n_docs + 1, c->n_tokens) ||
        corpus_push(&c->labels, &L->cap_lab, c->n_docs, label))
        return -1;
    c->n_docs++;
    L->doc_start = c->n_tokens;
    return 0;
}

/* One file: documents separated by lines holding "%" (fortune files), one
 * document per line (per_line), or the whole file as one document
 * (whole). Returns 0, or -1 out of memory. */
static int corpus_read_file(corpus_loader *L, FILE *fp, int per_line, int whole, int64_t label) {
    char line[4096];
    while (fgets(line, sizeof line, fp)) {
        int sep = !per_line && !whole && line[0] == '%' && (line[1] == '\n' || line[1] == '\0');
        if (!sep && corpus_add_words(L, line)) return -1;
        if ((per_line || sep) && corpus_end_doc(L, label)) return -1;
    }
    return corpus_end_doc(L, label);
}

static int corpus_cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Load `paths`; the label of a document is the index of the path it came
 * from. A path that is a directory holds one document per file (its
 * regular files, in name order); a file holds fortunes (documents separated
 * by lines holding "%") or, with `per_line`, one document per line. Words
 * are lower-cased and stripped of the punctuation at their ends; documents
 * with no words are skipped. Returns 0, or -1 with a message in err. */
static int corpus_load(corpus *c, const char *const *paths, int n_paths, int per_line, char *err, size_t err_cap) {
    memset(c, 0, sizeof *c);
    corpus_loader L = {.c = c};
    int rc = corpus_push(&c->offsets, &L.cap_off, 0, 0);
    err[0] = '\0';
    for (int f = 0; f < n_paths && rc == 0; f++) {
        if (c->n_files < 8) snprintf(c->files[c->n_files++], sizeof c->files[0], "%s", paths[f]);
        DIR *dir = opendir(paths[f]);
        if (dir) {
            char **names = NULL;
            size_t n = 0, cap = 0;
            for (struct dirent *e; rc == 0 && (e = readdir(dir));) {
                if (e->d_name[0] == '.') continue;
                if (n == cap) {
                    char **grown = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
                    if (!grown) { rc = -1; break; }
                    names = grown;
                }
                if (!(names[n] = malloc(strlen(paths[f]) + strlen(e->d_name) + 2))) { rc = -1; break; }
                sprintf(names[n++], "%s/%s", paths[f], e->d_name);
            }
            closedir(dir);
            if (names) qsort(names, n, sizeof *names, corpus_cmp_names);
            for (size_t i = 0; i < n; i++) {
                struct stat st;
                FILE *fp = rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode) ? fopen(names[i], "r") : NULL;
                if (fp) {
                    rc = corpus_read_file(&L, fp, 0, 1, f);
                    fclose(fp);
                }
                free(names[i]);
            }
            free(names);
            continue;
        }
        FILE *fp = fopen(paths[f], "r");
        if (!fp) {
            snprintf(err, err_cap, "cannot open '%s': %s", paths[f], strerror(errno));
            rc = -1;
            break;
        }
        rc = corpus_read_file(&L, fp, per_line, 0, f);
        fclose(fp);
    }
    free(L.table.keys), free(L.table.ids);
    if (rc == 0 && c->n_docs == 0) {
        snprintf(err, err_cap, "no documents with words in the given %s", n_paths == 1 ? "path" : "paths");
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
    int rc = corpus_load(c, paths, 3, 0, err, err_cap);
    if (rc) snprintf(err + strlen(err), err_cap - strlen(err), " (the fortunes-min package: scripts/setup.sh installs it)");
    return rc;
}

#endif /* JAG_CORPUS_H */
