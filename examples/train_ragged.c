/*
 * train_ragged.c — trains a small transformer classifier on real ragged
 * text, nested end to end: no padding anywhere.
 *
 * Data: the fortune files of Debian's fortunes-min (or --data FILE..., one
 * document per line); the label of a document is the file it came from.
 * Model: embedding -> [layer_norm -> attention over the ragged dim -> +x]
 * -> [layer_norm -> linear -> gelu -> linear -> +x] -> mean over the ragged
 * dim -> linear -> cross entropy. Optimiser: Adam, written with jag ops.
 *
 * Flags: --steps N (default 60), --batch B (default 32), --data PATH...
 */
#include "corpus.h"
#include "jag.h"

#include <math.h>
#include <time.h>

#define TRY(call)                                                              \
    do {                                                                       \
        if ((call) != JAG_OK) {                                                \
            fprintf(stderr, "train: %s failed: %s\n", #call, jag_last_error()); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

enum { D = 64, H = 4, DH = D / H, HID = 4 * D, N_PARAMS = 13 };

typedef struct {
    jag_tensor *p[N_PARAMS], *m[N_PARAMS], *v[N_PARAMS];
    int64_t step;
} model;

/* parameter slots */
enum { EMB, LN1_W, LN1_B, WQKV, WO, LN2_W, LN2_B, W1, B1, W2, B2, WC, BC };

static void model_init(model *m, int64_t vocab, int64_t classes) {
    memset(m, 0, sizeof *m);
    double s = 1.0 / sqrt((double)D);
    TRY(jag_rand_normal((int64_t[]){vocab, D}, 2, 0, 0.5, JAG_FLOAT32, NULL, &m->p[EMB]));
    TRY(jag_ones((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[LN1_W]));
    TRY(jag_zeros((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[LN1_B]));
    TRY(jag_rand_normal((int64_t[]){3 * D, D}, 2, 0, s, JAG_FLOAT32, NULL, &m->p[WQKV]));
    TRY(jag_rand_normal((int64_t[]){D, D}, 2, 0, s, JAG_FLOAT32, NULL, &m->p[WO]));
    TRY(jag_ones((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[LN2_W]));
    TRY(jag_zeros((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[LN2_B]));
    TRY(jag_rand_normal((int64_t[]){HID, D}, 2, 0, s, JAG_FLOAT32, NULL, &m->p[W1]));
    TRY(jag_zeros((int64_t[]){HID}, 1, JAG_FLOAT32, &m->p[B1]));
    TRY(jag_rand_normal((int64_t[]){D, HID}, 2, 0, 1.0 / sqrt((double)HID), JAG_FLOAT32, NULL, &m->p[W2]));
    TRY(jag_zeros((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[B2]));
    TRY(jag_rand_normal((int64_t[]){classes, D}, 2, 0, s, JAG_FLOAT32, NULL, &m->p[WC]));
    TRY(jag_zeros((int64_t[]){classes}, 1, JAG_FLOAT32, &m->p[BC]));
    for (int i = 0; i < N_PARAMS; i++) {
        TRY(jag_set_requires_grad(m->p[i], true));
        TRY(jag_zeros_like(m->p[i], &m->m[i]));
        TRY(jag_zeros_like(m->p[i], &m->v[i]));
    }
}

static void model_free(model *m) {
    for (int i = 0; i < N_PARAMS; i++) jag_release(m->p[i]), jag_release(m->m[i]), jag_release(m->v[i]);
}

/* nested (B, j, X) -> nested (B, j, sizes...) through its values (a
 * differentiable view: values and construction from values are ops) */
static jag_tensor *nested_view(const jag_tensor *nt, const jag_tensor *offsets, const int64_t *sizes, int n) {
    jag_tensor *v = NULL, *r = NULL, *out = NULL;
    TRY(jag_nested_values(nt, &v));
    int64_t s[JAG_MAX_DIMS] = {-1};
    memcpy(s + 1, sizes, (size_t)n * sizeof *s);
    TRY(jag_reshape(v, s, n + 1, &r));
    TRY(jag_nested_from_jagged(r, offsets, NULL, &out));
    return out; /* v and r belong to the caller's scope */
}

/* The forward pass: ids (B, j) nested -> loss (0-d). Everything made here
 * is owned by the caller's scope except what it keeps. */
static jag_tensor *forward(const model *m, const jag_tensor *ids, const jag_tensor *offsets, const jag_tensor *labels) {
    jag_tensor *x, *h, *qkv, *parts[3], *att, *o, *x2, *h2, *f1, *f2, *f3, *x3, *pool, *logits, *loss;
    int np;
    TRY(jag_embedding(m->p[EMB], ids, &x));                         /* (B, j, D) */
    TRY(jag_layer_norm(x, 1, m->p[LN1_W], m->p[LN1_B], 1e-5, &h));
    TRY(jag_linear(h, m->p[WQKV], NULL, &qkv));                      /* (B, j, 3D) */
    TRY(jag_split(qkv, D, 2, parts, 3, &np));                       /* q, k, v (B, j, D) */
    jag_tensor *q = nested_view(parts[0], offsets, (int64_t[]){H, DH}, 2);
    jag_tensor *k = nested_view(parts[1], offsets, (int64_t[]){H, DH}, 2);
    jag_tensor *v = nested_view(parts[2], offsets, (int64_t[]){H, DH}, 2);
    TRY(jag_scaled_dot_product_attention(q, k, v, false, 0.0, &att)); /* (B, j, H, DH) */
    jag_tensor *a2 = nested_view(att, offsets, (int64_t[]){D}, 1);
    TRY(jag_linear(a2, m->p[WO], NULL, &o));
    TRY(jag_add(x, o, 1.0, &x2));                                   /* residual */
    TRY(jag_layer_norm(x2, 1, m->p[LN2_W], m->p[LN2_B], 1e-5, &h2));
    TRY(jag_linear(h2, m->p[W1], m->p[B1], &f1));
    TRY(jag_gelu(f1, &f2));
    TRY(jag_linear(f2, m->p[W2], m->p[B2], &f3));
    TRY(jag_add(x2, f3, 1.0, &x3));                                 /* residual */
    TRY(jag_mean(x3, (int[]){1}, 1, false, &pool));                 /* (B, D): mean over each document */
    TRY(jag_linear(pool, m->p[WC], m->p[BC], &logits));             /* (B, classes) */
    TRY(jag_cross_entropy(logits, labels, &loss));
    return loss;
}

/* Adam with jag ops, grad mode off; parameters are replaced by new leaves */
static void adam_step(model *m, double lr) {
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    m->step++;
    double c1 = 1 - pow(b1, (double)m->step), c2 = 1 - pow(b2, (double)m->step);
    bool prev = jag_set_grad_enabled(false);
    for (int i = 0; i < N_PARAMS; i++) {
        jag_tensor *g = NULL;
        TRY(jag_get_grad(m->p[i], &g));
        if (!g) continue;
        TRY(jag_scope_begin());
        jag_tensor *m1, *m2, *mn, *g2, *v1, *v2, *vn, *vh, *den, *upd, *pn;
        TRY(jag_mul_scalar(m->m[i], b1, &m1));
        TRY(jag_mul_scalar(g, 1 - b1, &m2));
        TRY(jag_add(m1, m2, 1.0, &mn));
        TRY(jag_square(g, &g2));
        TRY(jag_mul_scalar(m->v[i], b2, &v1));
        TRY(jag_mul_scalar(g2, 1 - b2, &v2));
        TRY(jag_add(v1, v2, 1.0, &vn));
        TRY(jag_mul_scalar(vn, 1 / c2, &vh));
        TRY(jag_sqrt(vh, &den));
        TRY(jag_add_scalar(den, eps, &den));
        TRY(jag_div(mn, den, &upd));
        TRY(jag_add(m->p[i], upd, -lr / c1, &pn));
        jag_scope_keep(mn), jag_scope_keep(vn), jag_scope_keep(pn);
        TRY(jag_scope_end());
        jag_release(g);
        jag_release(m->m[i]), jag_release(m->v[i]), jag_release(m->p[i]);
        m->m[i] = mn, m->v[i] = vn, m->p[i] = pn;
        TRY(jag_set_requires_grad(pn, true));
    }
    jag_set_grad_enabled(prev);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *paths[8];
    int n_paths = 0;
    long steps = 60, batch = 32;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = atol(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atol(argv[++i]);
        else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc && n_paths < 8) paths[n_paths++] = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--steps N] [--batch B] [--data FILE]...\n", argv[0]);
            return 2;
        }
    }
    if (steps < 1 || batch < 1) {
        fprintf(stderr, "train: --steps and --batch must be positive\n");
        return 2;
    }
    corpus c;
    char err[512] = "";
    if (n_paths ? corpus_load(&c, paths, n_paths, 1, err, sizeof err) : corpus_load_fortunes(&c, err, sizeof err)) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    int64_t classes = c.n_files > 1 ? c.n_files : 2;
    printf("training on %lld documents (%lld tokens, %lld words), %lld classes (the source file)\n",
           (long long)c.n_docs, (long long)c.n_tokens, (long long)c.vocab_size, (long long)classes);
    jag_manual_seed(42);
    model m;
    model_init(&m, c.vocab_size, classes);
    /* a fixed shuffle of the documents */
    int64_t *order = malloc((size_t)c.n_docs * sizeof *order);
    uint64_t s = 12345;
    for (int64_t i = 0; i < c.n_docs; i++) order[i] = i;
    for (int64_t i = c.n_docs - 1; i > 0; i--) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int64_t j = (int64_t)((s >> 33) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    double first = NAN, last = NAN, tokens = 0, t0 = now(), avg = 0;
    int64_t cursor = 0;
    for (long step = 1; step <= steps; step++) {
        TRY(jag_scope_begin());
        int64_t nb = batch < c.n_docs ? batch : c.n_docs, total = 0;
        int64_t *ids = malloc((size_t)c.n_tokens * sizeof *ids), *offs = malloc((size_t)(nb + 1) * sizeof *offs);
        int64_t *labels = malloc((size_t)nb * sizeof *labels);
        offs[0] = 0;
        for (int64_t b = 0; b < nb; b++) {
            int64_t d = order[cursor++ % c.n_docs], len = c.offsets[d + 1] - c.offsets[d];
            if (len > 128) len = 128; /* a bound on the longest document */
            memcpy(ids + total, c.tokens + c.offsets[d], (size_t)len * sizeof *ids);
            total += len, offs[b + 1] = total, labels[b] = c.labels[d];
        }
        jag_tensor *idv, *off, *lab, *nt, *loss;
        int64_t nb1 = nb + 1;
        TRY(jag_from_data(ids, &total, 1, JAG_INT64, &idv));
        TRY(jag_from_data(offs, &nb1, 1, JAG_INT64, &off));
        TRY(jag_from_data(labels, &nb, 1, JAG_INT64, &lab));
        TRY(jag_nested_from_jagged(idv, off, NULL, &nt)); /* (B, j) token ids, packed */
        loss = forward(&m, nt, off, lab);
        double l;
        TRY(jag_item(loss, &l));
        TRY(jag_backward(loss, NULL, false));
        TRY(jag_scope_end());
        adam_step(&m, 3e-3);
        tokens += (double)total;
        avg = step == 1 ? l : 0.9 * avg + 0.1 * l;
        if (step == 1) first = l;
        last = avg;
        if (step == 1 || step % 10 == 0 || step == steps)
            printf("  step %4ld  loss %.4f (smoothed %.4f)  %8.0f tokens/s\n", step, l, avg, tokens / (now() - t0));
        free(ids), free(offs), free(labels);
    }
    printf("loss %.4f -> %.4f (smoothed) over %ld steps: %s\n", first, last, steps,
           last < first ? "it learns" : "it did not fall");
    model_free(&m);
    free(order);
    corpus_free(&c);
    return 0;
}
