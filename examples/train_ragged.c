/*
 * train_ragged.c — trains a small transformer classifier on real ragged
 * text, nested end to end: no padding anywhere.
 *
 * Data: the fortune files of Debian's fortunes-min, or --data PATH... (a
 * file: one document per line; a directory: one document per file); the
 * label of a document is the path it came from. Documents longer than 128
 * tokens are cut to their first 128.
 *
 * Validation: the documents d whose draw u[d] is below 0.1, with u the
 * n_docs float64 uniforms of jag_generator_new(1) (Python: jag.rand(n,
 * dtype=jag.float64, generator=jag.Generator().manual_seed(1))), are held out; the model
 * never trains on them. Their loss and accuracy are printed at the end of
 * every epoch and after the last step, next to the majority class's
 * accuracy (the most common label of the training documents).
 *
 * Batches: jag.utils.data.TokenBudgetBatchSampler's algorithm (its class
 * docstring), reimplemented here: at most --max-tokens tokens a batch,
 * documents of similar length together, shuffled with seed 0 + epoch; the
 * validation batches the same without shuffle.
 *
 * Model (the modules of train_ragged.py, initialised as they are, in the
 * same order from jag_manual_seed(42)): Embedding -> [LayerNorm ->
 * MultiheadAttention (4 heads, no biases) over the ragged dim -> +x] ->
 * [LayerNorm -> Linear -> gelu -> Linear -> +x] -> mean over the ragged
 * dim -> Linear -> cross entropy. Optimiser: jag_optim_adam_new (lr 3e-3,
 * betas 0.9 and 0.999, eps 1e-8).
 *
 * Then (--compare N) the same model runs N steps nested, on padded dense
 * tensors and compiled (jag_compile of the loss, forward and backward: one
 * program for batches of every length) from the same initial parameters
 * on the same batches, --repeats times each, each run in a child process
 * of its own so that its peak memory is its own; their losses must agree,
 * and their speed (median and range over the runs) and peak memory are
 * printed. --print-trace shows the compiled program of one step.
 *
 * Data-parallel (--distributed, under mpirun): every rank builds the same
 * global batches and trains on its share of each, split by tokens as
 * jag.utils.distributed_sampler.split_by_tokens does (the documents longest
 * first, ties by position, each to the rank with the fewest tokens so far,
 * ties to the lowest rank; each share in batch order). A rank scales its
 * mean loss by (its documents / the global batch's) * ranks, and jag_ddp
 * averages the gradients in buckets while backward runs, so every step is
 * the one-process step on the global batch (the same losses, up to float
 * rounding of sums taken in another order); rank 0 prints the global
 * batch's loss and validates. A rank whose share is empty backpropagates
 * 0 * sum(parameters): zero gradients that take part in the averaging.
 *
 * Flags: --steps N (default 60), --max-tokens T (default 640, at least
 * 128), --compare N (default 0), --repeats R (default 3), --print-trace,
 * --data PATH..., --distributed (--mode nested|padded|compiled runs one
 * child; --mode nested also with --distributed.)
 */
#include "corpus.h"
#include "jag.h"

#include <math.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRY(call)                                                              \
    do {                                                                       \
        if ((call) != JAG_OK) {                                                \
            fprintf(stderr, "train: %s failed: %s\n", #call, jag_last_error()); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

enum { D = 64, H = 4, DH = D / H, HID = 4 * D, MAX_LEN = 128, N_PARAMS = 13, MAX_COMPARE = 64, MAX_REPEATS = 9 };

#define LR 3e-3
#define INIT_SEED 42
#define SPLIT_SEED 1
#define VAL_FRACTION 0.1
#define SAMPLER_SEED 0

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "train: out of memory\n");
        exit(1);
    }
    return p;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the held-out split ----------------------------------------------- */

typedef struct {
    int64_t n_train, n_val;
    int64_t *train, *val;         /* document ids */
    int64_t *train_len, *val_len; /* their lengths, cut to MAX_LEN */
} split;

static int64_t doc_len(const corpus *c, int64_t d) {
    int64_t len = c->offsets[d + 1] - c->offsets[d];
    return len < MAX_LEN ? len : MAX_LEN;
}

/* Document d is held out when u[d] < VAL_FRACTION, u the float64 uniforms
 * of a generator seeded SPLIT_SEED. */
static void split_make(split *s, const corpus *c) {
    jag_generator *g = NULL;
    jag_tensor *u = NULL;
    TRY(jag_generator_new(SPLIT_SEED, &g));
    TRY(jag_rand_uniform((int64_t[]){c->n_docs}, 1, 0.0, 1.0, JAG_FLOAT64, g, &u));
    const double *uv = jag_data(u);
    size_t bytes = (size_t)c->n_docs * sizeof(int64_t);
    s->train = xmalloc(bytes), s->val = xmalloc(bytes), s->train_len = xmalloc(bytes), s->val_len = xmalloc(bytes);
    s->n_train = s->n_val = 0;
    for (int64_t d = 0; d < c->n_docs; d++) {
        if (uv[d] < VAL_FRACTION) s->val_len[s->n_val] = doc_len(c, d), s->val[s->n_val++] = d;
        else s->train_len[s->n_train] = doc_len(c, d), s->train[s->n_train++] = d;
    }
    jag_release(u);
    jag_generator_free(g);
}

static void split_free(split *s) { free(s->train), free(s->val), free(s->train_len), free(s->val_len); }

/* ---- TokenBudgetBatchSampler (bucket_size None, drop_last False) --------- */

/* batch b holds items[starts[b] .. starts[b + 1]) (indices into lengths) */
typedef struct {
    int64_t n_batches;
    int64_t *starts, *items;
} batch_plan;

typedef struct {
    double key; /* u[i], or the length */
    int64_t tie, index;
} sort_entry;

static int sort_entry_cmp(const void *a, const void *b) {
    const sort_entry *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->tie > y->tie) - (x->tie < y->tie);
}

/* 0..n-1 sorted by (u[i], i), u the next n float64 uniforms of g. */
static void permutation(jag_generator *g, int64_t n, int64_t *out) {
    if (n == 0) return;
    jag_tensor *u = NULL;
    TRY(jag_rand_uniform((int64_t[]){n}, 1, 0.0, 1.0, JAG_FLOAT64, g, &u));
    const double *uv = jag_data(u);
    sort_entry *e = xmalloc((size_t)n * sizeof *e);
    for (int64_t i = 0; i < n; i++) e[i] = (sort_entry){uv[i], i, i};
    qsort(e, (size_t)n, sizeof *e, sort_entry_cmp);
    for (int64_t i = 0; i < n; i++) out[i] = e[i].index;
    free(e);
    jag_release(u);
}

/* Epoch `epoch`'s batches of items 0..n-1 of lengths len (each <= max_tokens):
 * 1. g = generator(seed + epoch) (shuffle only); 2. order: the permutation
 * of g, or 0..n-1; 3. one bucket: order sorted by (length, position);
 * 4. greedy batches: an item closes the batch first when it would take it
 * over max_tokens; 5. batches in the order of a second permutation of g
 * (shuffle only). */
static void plan_batches(batch_plan *p, const int64_t *len, int64_t n, int64_t max_tokens, bool shuffle, int64_t epoch) {
    jag_generator *g = NULL;
    int64_t *order = xmalloc((size_t)n * sizeof *order);
    if (shuffle) {
        TRY(jag_generator_new((uint64_t)SAMPLER_SEED + (uint64_t)epoch, &g));
        permutation(g, n, order);
    } else {
        for (int64_t i = 0; i < n; i++) order[i] = i;
    }
    sort_entry *e = xmalloc((size_t)n * sizeof *e);
    for (int64_t k = 0; k < n; k++) e[k] = (sort_entry){(double)len[order[k]], k, order[k]};
    qsort(e, (size_t)n, sizeof *e, sort_entry_cmp);
    int64_t *starts = xmalloc((size_t)(n + 1) * sizeof *starts), m = 0, tokens = 0;
    for (int64_t k = 0; k < n; k++) {
        if (k > 0 && tokens + len[e[k].index] > max_tokens) starts[m++] = k, tokens = 0;
        if (k == 0) starts[m++] = 0;
        tokens += len[e[k].index];
    }
    /* starts[0..m) are the batches' first positions; batch b ends at starts[b + 1] or n */
    int64_t *rank = xmalloc((size_t)(m ? m : 1) * sizeof *rank);
    if (shuffle) permutation(g, m, rank);
    else
        for (int64_t b = 0; b < m; b++) rank[b] = b;
    p->n_batches = m;
    p->starts = xmalloc((size_t)(m + 1) * sizeof *p->starts);
    p->items = xmalloc((size_t)n * sizeof *p->items);
    int64_t at = 0;
    for (int64_t r = 0; r < m; r++) {
        int64_t b = rank[r], end = b + 1 < m ? starts[b + 1] : n;
        p->starts[r] = at;
        for (int64_t k = starts[b]; k < end; k++) p->items[at++] = e[k].index;
    }
    p->starts[m] = at;
    free(rank), free(starts), free(e), free(order);
    jag_generator_free(g);
}

static void plan_free(batch_plan *p) { free(p->starts), free(p->items); }

/* ---- one batch of documents ------------------------------------------------ */

typedef struct {
    int64_t nb, total, max_len;
    int64_t *ids, *offs, *labels;
} batch_data;

/* The documents docs[items[0..nb)] (docs: a split's list) as a batch. */
static void batch_fill(batch_data *bd, const corpus *c, const int64_t *items, int64_t nb, const int64_t *docs) {
    bd->ids = xmalloc((size_t)(nb * MAX_LEN) * sizeof *bd->ids);
    bd->offs = xmalloc((size_t)(nb + 1) * sizeof *bd->offs);
    bd->labels = xmalloc((size_t)nb * sizeof *bd->labels);
    bd->nb = nb, bd->total = 0, bd->max_len = 0, bd->offs[0] = 0;
    for (int64_t i = 0; i < nb; i++) {
        int64_t d = docs[items[i]], len = doc_len(c, d);
        memcpy(bd->ids + bd->total, c->tokens + c->offsets[d], (size_t)len * sizeof *bd->ids);
        bd->total += len, bd->offs[i + 1] = bd->total, bd->labels[i] = c->labels[d];
        if (len > bd->max_len) bd->max_len = len;
    }
}

/* Batch b of plan p over the documents docs[] (a split's list). */
static void batch_make(batch_data *bd, const corpus *c, const batch_plan *p, int64_t b, const int64_t *docs) {
    batch_fill(bd, c, p->items + p->starts[b], p->starts[b + 1] - p->starts[b], docs);
}

static void batch_free(batch_data *bd) { free(bd->ids), free(bd->offs), free(bd->labels); }

/* ---- data-parallel: the ranks' shares of a global batch ------------------- */

/* This process's rank and the number of ranks (0 and 1 without --distributed). */
static int dist_rank = 0, dist_world = 1;

/* jag.utils.distributed_sampler.split_by_tokens: positions 0..nb-1 of a
 * global batch whose documents have lengths len[], longest first (ties:
 * the earlier position), each go to the rank with the fewest tokens so far
 * (ties: the lowest rank). Writes rank's positions, in batch order, to
 * mine[] and returns how many. */
static int64_t share_of_rank(const int64_t *len, int64_t nb, int rank, int world, int64_t *mine) {
    sort_entry *e = xmalloc((size_t)nb * sizeof *e);
    int64_t *load = calloc((size_t)world, sizeof *load), *owner = xmalloc((size_t)nb * sizeof *owner), n = 0;
    if (!load) {
        fprintf(stderr, "train: out of memory\n");
        exit(1);
    }
    for (int64_t k = 0; k < nb; k++) e[k] = (sort_entry){-(double)len[k], k, k};
    qsort(e, (size_t)nb, sizeof *e, sort_entry_cmp);
    for (int64_t k = 0; k < nb; k++) {
        int lightest = 0;
        for (int r = 1; r < world; r++)
            if (load[r] < load[lightest]) lightest = r;
        owner[e[k].index] = lightest, load[lightest] += len[e[k].index];
    }
    for (int64_t k = 0; k < nb; k++)
        if (owner[k] == rank) mine[n++] = k;
    free(e), free(load), free(owner);
    return n;
}

/* ---- the model ------------------------------------------------------------ */

/* Parameters in train_ragged.py's model.parameters() order. */
enum { EMB, LN1_W, LN1_B, IN_PROJ, OUT_PROJ, LN2_W, LN2_B, FF1_W, FF1_B, FF2_W, FF2_B, HEAD_W, HEAD_B };

static const char *const param_names[N_PARAMS] = {"embed.weight", "norm1.weight", "norm1.bias", "attn.in_proj_weight",
                                                  "attn.out_proj.weight", "norm2.weight", "norm2.bias", "ff1.weight",
                                                  "ff1.bias", "ff2.weight", "ff2.bias", "head.weight", "head.bias"};

typedef struct {
    jag_tensor *p[N_PARAMS];
} model;

/* jag.nn.init.uniform_(t, a, b): u * (b - a) + a, u uniform in [0, 1). */
static jag_tensor *init_uniform(const int64_t *sizes, int ndim, double a, double b) {
    jag_tensor *u = NULL, *s = NULL, *out = NULL;
    TRY(jag_rand_uniform(sizes, ndim, 0.0, 1.0, JAG_FLOAT32, NULL, &u));
    TRY(jag_mul_scalar(u, b - a, &s));
    TRY(jag_add_scalar(s, a, &out));
    jag_release(u), jag_release(s);
    return out;
}

/* nn.Linear's weight: kaiming_uniform_(a=sqrt(5)), bound gain * sqrt(3 / fan_in). */
static jag_tensor *init_linear_weight(int64_t out_f, int64_t in_f) {
    double gain = sqrt(2.0 / (1 + pow(sqrt(5.0), 2))), bound = sqrt(3.0) * (gain / sqrt((double)in_f));
    return init_uniform((int64_t[]){out_f, in_f}, 2, -bound, bound);
}

/* nn.Linear's bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
static jag_tensor *init_linear_bias(int64_t out_f, int64_t in_f) {
    double bound = 1 / sqrt((double)in_f);
    return init_uniform((int64_t[]){out_f}, 1, -bound, bound);
}

/* The draws in the order train_ragged.py's modules make them: Embedding
 * N(0, 1); MultiheadAttention's out_proj (a Linear without bias) before its
 * in_proj_weight (xavier_uniform_); the Linears' weight then bias.
 * LayerNorms: ones and zeros. */
static void model_init(model *m, int64_t vocab, int64_t classes) {
    memset(m, 0, sizeof *m);
    jag_manual_seed(INIT_SEED);
    jag_tensor *n = NULL, *n1 = NULL;
    TRY(jag_rand_normal((int64_t[]){vocab, D}, 2, 0.0, 1.0, JAG_FLOAT32, NULL, &n));
    TRY(jag_mul_scalar(n, 1.0, &n1)); /* normal_: n * std + mean */
    TRY(jag_add_scalar(n1, 0.0, &m->p[EMB]));
    jag_release(n), jag_release(n1);
    TRY(jag_ones((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[LN1_W]));
    TRY(jag_zeros((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[LN1_B]));
    m->p[OUT_PROJ] = init_linear_weight(D, D);
    double xavier = sqrt(3.0) * (1.0 * sqrt(2.0 / (double)(D + 3 * D)));
    m->p[IN_PROJ] = init_uniform((int64_t[]){3 * D, D}, 2, -xavier, xavier);
    TRY(jag_ones((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[LN2_W]));
    TRY(jag_zeros((int64_t[]){D}, 1, JAG_FLOAT32, &m->p[LN2_B]));
    m->p[FF1_W] = init_linear_weight(HID, D), m->p[FF1_B] = init_linear_bias(HID, D);
    m->p[FF2_W] = init_linear_weight(D, HID), m->p[FF2_B] = init_linear_bias(D, HID);
    m->p[HEAD_W] = init_linear_weight(classes, D), m->p[HEAD_B] = init_linear_bias(classes, D);
    for (int i = 0; i < N_PARAMS; i++) TRY(jag_set_requires_grad(m->p[i], true));
}

static void model_free(model *m) {
    for (int i = 0; i < N_PARAMS; i++) jag_release(m->p[i]);
}

/* (B, j, X) nested -> (B, j, sizes...) nested through its packed values
 * (a differentiable view: values and construction from values are ops),
 * so that no batch size is written into a compiled program. */
static jag_tensor *nested_view(const jag_tensor *nt, const int64_t *sizes, int n) {
    jag_tensor *v, *r, *offsets, *out;
    int64_t s[JAG_MAX_DIMS] = {-1};
    memcpy(s + 1, sizes, (size_t)n * sizeof *s);
    TRY(jag_nested_values(nt, &v));
    TRY(jag_nested_offsets(nt, &offsets));
    TRY(jag_reshape(v, s, n + 1, &r));
    TRY(jag_nested_from_jagged(r, offsets, NULL, &out));
    return out;
}

/* nn.MultiheadAttention(D, H, bias=False, batch_first=True)(h, h, h): per
 * head softmax(q k^T / sqrt(DH) + mask) v with q, k, v the thirds of
 * in_proj_weight applied to h, then out_proj. h is (B, j, D) nested (the
 * heads as (B, j, H, DH), the layout jag's attention takes besides torch's
 * (B, H, j, DH)) or (B, T, D) dense with an additive key mask (B, 1, 1, T)
 * (the heads as (B, H, T, DH)). Everything made here belongs to the
 * caller's scope. */
static jag_tensor *self_attention(const model *m, const jag_tensor *h, const jag_tensor *key_mask) {
    const bool nested = key_mask == NULL;
    const int64_t B = jag_size(h, 0);
    jag_tensor *qkv[3], *att, *merged, *out;
    for (int k = 0; k < 3; k++) {
        jag_tensor *w, *proj, *heads;
        TRY(jag_narrow(m->p[IN_PROJ], 0, k * D, D, &w));
        TRY(jag_linear(h, w, NULL, &proj));
        if (nested) {
            qkv[k] = nested_view(proj, (int64_t[]){H, DH}, 2);
        } else {
            TRY(jag_reshape(proj, (int64_t[]){B, -1, H, DH}, 4, &heads));
            TRY(jag_transpose(heads, 1, 2, &qkv[k]));
        }
    }
    if (nested) {
        TRY(jag_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], false, 0.0, &att)); /* (B, j, H, DH) */
        merged = nested_view(att, (int64_t[]){D}, 1);
    } else {
        jag_tensor *att_t;
        TRY(jag_scaled_dot_product_attention_masked(qkv[0], qkv[1], qkv[2], key_mask, false, 0.0, &att));
        TRY(jag_transpose(att, 1, 2, &att_t));
        TRY(jag_reshape(att_t, (int64_t[]){B, -1, D}, 3, &merged));
    }
    TRY(jag_linear(merged, m->p[OUT_PROJ], NULL, &out));
    return out;
}

/* The encoder layer (pre-norm): x + attention(norm1(x)), then + the
 * feed-forward block of norm2. */
static jag_tensor *encoder(const model *m, const jag_tensor *x, const jag_tensor *key_mask) {
    jag_tensor *h, *x2, *h2, *f1, *f2, *f3, *x3;
    TRY(jag_layer_norm(x, 1, m->p[LN1_W], m->p[LN1_B], 1e-5, &h));
    TRY(jag_add(x, self_attention(m, h, key_mask), 1.0, &x2));
    TRY(jag_layer_norm(x2, 1, m->p[LN2_W], m->p[LN2_B], 1e-5, &h2));
    TRY(jag_linear(h2, m->p[FF1_W], m->p[FF1_B], &f1));
    TRY(jag_gelu(f1, &f2));
    TRY(jag_linear(f2, m->p[FF2_W], m->p[FF2_B], &f3));
    TRY(jag_add(x2, f3, 1.0, &x3));
    return x3;
}

/* ids (B, j) nested -> logits (B, classes). */
static jag_tensor *logits_nested(const model *m, const jag_tensor *ids) {
    jag_tensor *x, *pool, *logits;
    TRY(jag_embedding(m->p[EMB], ids, &x)); /* (B, j, D) */
    jag_tensor *x3 = encoder(m, x, NULL);
    TRY(jag_mean(x3, (int[]){1}, 1, false, &pool)); /* (B, D): mean over each document */
    TRY(jag_linear(pool, m->p[HEAD_W], m->p[HEAD_B], &logits));
    return logits;
}

/* The same model on padded dense tensors, as a framework without nested
 * tensors runs it: ids (B, T) padded with token 0, an additive key mask
 * (B, 1, 1, T) of 0 / -inf in attention, and a (B, T, 1) mask of 1 / 0 in
 * the mean pooling. Its loss equals the nested model's on the same batch
 * (padded rows get no gradient), at the cost of computing on B * T rows. */
static jag_tensor *logits_padded(const model *m, const jag_tensor *ids, const jag_tensor *key_mask,
                                 const jag_tensor *row_mask, const jag_tensor *lengths) {
    jag_tensor *x, *kept, *summed, *pool, *logits;
    TRY(jag_embedding(m->p[EMB], ids, &x)); /* (B, T, D) */
    jag_tensor *x3 = encoder(m, x, key_mask);
    TRY(jag_mul(x3, row_mask, &kept));                 /* padded rows -> 0 */
    TRY(jag_sum(kept, (int[]){1}, 1, false, &summed)); /* (B, D) */
    TRY(jag_div(summed, lengths, &pool));              /* lengths (B, 1) */
    TRY(jag_linear(pool, m->p[HEAD_W], m->p[HEAD_B], &logits));
    return logits;
}

/* The batch as a nested (B, j) tensor of token ids (packed) and its labels. */
static void batch_tensors(const batch_data *bd, jag_tensor **ids, jag_tensor **labels) {
    jag_tensor *idv, *off;
    int64_t nb1 = bd->nb + 1, total = bd->total, nb = bd->nb;
    TRY(jag_from_data(bd->ids, &total, 1, JAG_INT64, &idv));
    TRY(jag_from_data(bd->offs, &nb1, 1, JAG_INT64, &off));
    TRY(jag_from_data(bd->labels, &nb, 1, JAG_INT64, labels));
    TRY(jag_nested_from_jagged(idv, off, NULL, ids));
}

/* The batch padded to (B, T) with its masks -> the padded model's logits. */
static jag_tensor *padded_logits(const model *m, const batch_data *bd) {
    const int64_t B = bd->nb, T = bd->max_len > 0 ? bd->max_len : 1;
    int64_t *ids = calloc((size_t)(B * T), sizeof *ids);
    float *key_mask = xmalloc((size_t)(B * T) * sizeof *key_mask), *row_mask = xmalloc((size_t)(B * T) * sizeof *row_mask);
    float *lengths = xmalloc((size_t)B * sizeof *lengths);
    if (!ids) {
        fprintf(stderr, "train: out of memory\n");
        exit(1);
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t len = bd->offs[b + 1] - bd->offs[b];
        memcpy(ids + b * T, bd->ids + bd->offs[b], (size_t)len * sizeof *ids);
        for (int64_t t = 0; t < T; t++) {
            key_mask[b * T + t] = t < len ? 0.0f : -INFINITY;
            row_mask[b * T + t] = t < len ? 1.0f : 0.0f;
        }
        lengths[b] = (float)len;
    }
    jag_tensor *idt, *km, *rm, *lt;
    TRY(jag_from_data(ids, (int64_t[]){B, T}, 2, JAG_INT64, &idt));
    TRY(jag_from_data(key_mask, (int64_t[]){B, 1, 1, T}, 4, JAG_FLOAT32, &km));
    TRY(jag_from_data(row_mask, (int64_t[]){B, T, 1}, 3, JAG_FLOAT32, &rm));
    TRY(jag_from_data(lengths, (int64_t[]){B, 1}, 2, JAG_FLOAT32, &lt));
    free(ids), free(key_mask), free(row_mask), free(lengths);
    return logits_padded(m, idt, km, rm, lt);
}

/* The training step's loss as a function the tracer records: inputs are
 * the nested ids (B, j), the labels (B) and the N_PARAMS parameters; the
 * output is the loss. jag_compile traces it on the first batch (forward,
 * and backward because the parameters require grad), and the program then
 * runs every later batch, of any lengths, untraced. */
static jag_status traced_loss(void *ctx, jag_tensor *const *in, int n_in, jag_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    model pm;
    memset(&pm, 0, sizeof pm);
    for (int i = 0; i < N_PARAMS; i++) pm.p[i] = in[2 + i];
    jag_tensor *loss = NULL;
    TRY(jag_scope_begin());
    TRY(jag_cross_entropy(logits_nested(&pm, in[0]), in[1], &loss));
    jag_retain(loss); /* ours: the scope gives its own back */
    TRY(jag_scope_end());
    out[0] = loss;
    return JAG_OK;
}

/* The batch's inputs for traced_loss: nested ids, labels, parameters. */
static void step_inputs(const model *m, const batch_data *bd, jag_tensor **in) {
    batch_tensors(bd, &in[0], &in[1]);
    for (int i = 0; i < N_PARAMS; i++) in[2 + i] = m->p[i];
}

/* ---- evaluation and training ------------------------------------------- */

typedef struct {
    const corpus *c;
    split s;
    int64_t max_tokens, classes;
} dataset;

/* Validation loss (the mean over documents of the cross entropy) and
 * accuracy (argmax of the logits, the first on ties) over the held-out
 * documents, in the unshuffled sampler's batches, grad mode off. */
static void evaluate(const model *m, const dataset *ds, double *loss, double *accuracy) {
    batch_plan plan;
    plan_batches(&plan, ds->s.val_len, ds->s.n_val, ds->max_tokens, false, 0);
    bool prev = jag_set_grad_enabled(false);
    double sum = 0;
    int64_t correct = 0;
    for (int64_t b = 0; b < plan.n_batches; b++) {
        batch_data bd;
        batch_make(&bd, ds->c, &plan, b, ds->s.val);
        TRY(jag_scope_begin());
        jag_tensor *ids, *labels, *logits, *l, *lc;
        batch_tensors(&bd, &ids, &labels);
        logits = logits_nested(m, ids);
        TRY(jag_cross_entropy(logits, labels, &l));
        double v;
        TRY(jag_item(l, &v));
        sum += v * (double)bd.nb;
        TRY(jag_contiguous(logits, &lc));
        const float *z = jag_data(lc);
        for (int64_t i = 0; i < bd.nb; i++) {
            int64_t best = 0;
            for (int64_t k = 1; k < ds->classes; k++)
                if (z[i * ds->classes + k] > z[i * ds->classes + best]) best = k;
            correct += best == bd.labels[i];
        }
        TRY(jag_scope_end());
        batch_free(&bd);
    }
    jag_set_grad_enabled(prev);
    plan_free(&plan);
    *loss = sum / (double)ds->s.n_val;
    *accuracy = (double)correct / (double)ds->s.n_val;
}

/* The share of validation documents whose label is the training split's
 * most common one (the lowest label on ties): what always answering it scores. */
static double majority_accuracy(const dataset *ds) {
    int64_t *count = calloc((size_t)ds->classes, sizeof *count), best = 0, hits = 0;
    if (!count) return NAN;
    for (int64_t i = 0; i < ds->s.n_train; i++) count[ds->c->labels[ds->s.train[i]]]++;
    for (int64_t k = 1; k < ds->classes; k++)
        if (count[k] > count[best]) best = k;
    for (int64_t i = 0; i < ds->s.n_val; i++) hits += ds->c->labels[ds->s.val[i]] == best;
    free(count);
    return (double)hits / (double)ds->s.n_val;
}

typedef enum { RUN_TRAIN, RUN_CHILD_NESTED, RUN_CHILD_PADDED, RUN_CHILD_COMPILED } run_mode;

/* The training batches step after step: epoch e is the sampler's epoch e. */
typedef struct {
    const dataset *ds;
    batch_plan plan;
    int64_t epoch, next;
} batch_stream;

static void stream_begin(batch_stream *st, const dataset *ds) {
    st->ds = ds, st->epoch = 0, st->next = 0;
    plan_batches(&st->plan, ds->s.train_len, ds->s.n_train, ds->max_tokens, true, 0);
}

static void stream_next(batch_stream *st, batch_data *bd) {
    if (st->next == st->plan.n_batches) {
        plan_free(&st->plan);
        st->epoch++, st->next = 0;
        plan_batches(&st->plan, st->ds->s.train_len, st->ds->s.n_train, st->ds->max_tokens, true, st->epoch);
    }
    batch_make(bd, st->ds->c, &st->plan, st->next++, st->ds->s.train);
}

/* This rank's share of the next global batch (the whole batch with one
 * rank); *global_nb and *global_tokens: the global batch's documents and
 * tokens. */
static void stream_next_share(batch_stream *st, batch_data *bd, int64_t *global_nb, int64_t *global_tokens) {
    if (st->next == st->plan.n_batches) {
        plan_free(&st->plan);
        st->epoch++, st->next = 0;
        plan_batches(&st->plan, st->ds->s.train_len, st->ds->s.n_train, st->ds->max_tokens, true, st->epoch);
    }
    int64_t b = st->next++, first = st->plan.starts[b], nb = st->plan.starts[b + 1] - first;
    const int64_t *items = st->plan.items + first;
    int64_t *len = xmalloc((size_t)nb * sizeof *len), *mine = xmalloc((size_t)nb * sizeof *mine);
    *global_tokens = 0;
    for (int64_t k = 0; k < nb; k++) len[k] = st->ds->s.train_len[items[k]], *global_tokens += len[k];
    int64_t n = share_of_rank(len, nb, dist_rank, dist_world, mine);
    for (int64_t k = 0; k < n; k++) mine[k] = items[mine[k]];
    batch_fill(bd, st->ds->c, mine, n, st->ds->s.train);
    *global_nb = nb;
    free(len), free(mine);
}

static bool stream_epoch_done(const batch_stream *st) { return st->next == st->plan.n_batches; }

/* One training step traced and compiled: prints the forward program (after
 * desugar, dce and fuse: plain ops on packed values, no nested tensor left
 * but at the edges) and the size of its backward program. */
static void show_compiled_step(const dataset *ds) {
    model m;
    model_init(&m, ds->c->vocab_size, ds->classes);
    batch_stream st;
    stream_begin(&st, ds);
    batch_data bd;
    stream_next(&st, &bd);
    TRY(jag_scope_begin());
    jag_tensor *in[2 + N_PARAMS];
    step_inputs(&m, &bd, in);
    const char *names[2 + N_PARAMS] = {"ids", "labels"};
    for (int i = 0; i < N_PARAMS; i++) names[2 + i] = param_names[i];
    jag_trace *t = NULL;
    jag_program *p = NULL;
    TRY(jag_trace_function(traced_loss, NULL, in, 2 + N_PARAMS, names, 1, &t));
    TRY(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    printf("one training step, traced (%d symbols) and compiled: the forward program\n", jag_trace_num_symbols(t));
    jag_trace_print(jag_program_trace(p));
    const jag_trace *bw = jag_program_backward_trace(p);
    printf("and a backward program of %d symbols (gradients of the %d parameters)\n\n", bw ? jag_trace_num_symbols(bw) : 0,
           N_PARAMS);
    jag_program_free(p);
    jag_trace_free(t);
    TRY(jag_scope_end());
    batch_free(&bd);
    plan_free(&st.plan);
    model_free(&m);
}

static void print_validation(const model *m, const dataset *ds, const char *when, double *accuracy) {
    double loss;
    evaluate(m, ds, &loss, accuracy);
    printf("  %s: validation loss %.4f  accuracy %.1f%%\n", when, loss, 100.0 * *accuracy);
}

/* One data-parallel step's forward and backward on this rank's share bd
 * of a global batch of global_nb documents: the share's mean loss scaled
 * by (bd->nb / global_nb) * ranks, so that jag_ddp's average of the ranks'
 * gradients (taken during backward) is the gradient of the global batch's
 * mean loss; an empty share backpropagates 0 * sum(parameters). Returns
 * the global batch's mean loss: the sum over ranks of loss * bd->nb /
 * global_nb, in float64. Everything made here belongs to the caller's
 * scope. */
static double distributed_forward_backward(const model *m, const batch_data *bd, int64_t global_nb) {
    double mine = 0;
    jag_tensor *scaled = NULL;
    if (bd->nb > 0) {
        jag_tensor *ids, *labels, *loss;
        batch_tensors(bd, &ids, &labels);
        TRY(jag_cross_entropy(logits_nested(m, ids), labels, &loss));
        TRY(jag_item(loss, &mine));
        TRY(jag_mul_scalar(loss, (double)bd->nb * dist_world / (double)global_nb, &scaled));
    } else {
        jag_tensor *total = NULL;
        for (int i = 0; i < N_PARAMS; i++) {
            jag_tensor *s, *sum = NULL;
            TRY(jag_sum(m->p[i], NULL, 0, false, &s));
            if (total) TRY(jag_add(total, s, 1.0, &sum));
            total = total ? sum : s;
        }
        TRY(jag_mul_scalar(total, 0.0, &scaled));
    }
    TRY(jag_backward(scaled, NULL, false));
    double part = mine * (double)bd->nb / (double)global_nb;
    jag_tensor *sum;
    TRY(jag_from_data(&part, NULL, 0, JAG_FLOAT64, &sum));
    TRY(jag_dist_all_reduce(sum, JAG_REDUCE_SUM));
    TRY(jag_item(sum, &part));
    return part;
}

/* Train for `steps` steps. RUN_TRAIN prints progress for people; a child
 * prints one "loss STEP VALUE TOKENS SECONDS" line a step for its parent.
 * With --distributed (ddp set up here) the ranks share each batch and
 * rank 0 alone prints. */
static void train(const dataset *ds, run_mode mode, long steps, bool distributed) {
    model m;
    model_init(&m, ds->c->vocab_size, ds->classes);
    jag_optimizer *opt = NULL;
    TRY(jag_optim_adam_new(m.p, N_PARAMS, LR, 0.9, 0.999, 1e-8, 0.0, false, &opt));
    jag_ddp *ddp = NULL;
    if (distributed) TRY(jag_ddp_new(m.p, N_PARAMS, 0, &ddp)); /* 25 MiB buckets, as torch's DDP */
    const bool speak = dist_rank == 0;
    jag_compiled *step_fn = NULL;
    if (mode == RUN_CHILD_COMPILED) TRY(jag_compile(traced_loss, NULL, 1, JAG_PASSES_ALL, &step_fn));
    batch_stream st;
    stream_begin(&st, ds);
    if (mode == RUN_TRAIN && speak)
        printf("batches of at most %lld tokens (TokenBudgetBatchSampler, seed %d): %lld in the first epoch\n",
               (long long)ds->max_tokens, SAMPLER_SEED, (long long)st.plan.n_batches);
    if (mode == RUN_TRAIN && speak && distributed)
        printf("data-parallel over %d rank%s: each global batch split by tokens, gradients averaged during backward "
               "(jag_ddp, %d bucket%s)\n",
               dist_world, dist_world == 1 ? "" : "s", jag_ddp_num_buckets(ddp),
               jag_ddp_num_buckets(ddp) == 1 ? "" : "s");
    double first = NAN, avg = 0, tokens = 0, seconds = 0, accuracy = NAN;
    for (long step = 1; step <= steps; step++) {
        double t0 = now();
        batch_data bd;
        int64_t global_nb, global_tokens;
        if (distributed) stream_next_share(&st, &bd, &global_nb, &global_tokens);
        else stream_next(&st, &bd), global_nb = bd.nb, global_tokens = bd.total;
        TRY(jag_scope_begin());
        double l;
        if (distributed) {
            l = distributed_forward_backward(&m, &bd, global_nb);
        } else {
            jag_tensor *loss = NULL, *in[2 + N_PARAMS], *ids, *labels;
            if (mode == RUN_CHILD_COMPILED) {
                step_inputs(&m, &bd, in);
                TRY(jag_compiled_call(step_fn, in, 2 + N_PARAMS, &loss, 1));
            } else {
                batch_tensors(&bd, &ids, &labels);
                TRY(jag_cross_entropy(mode == RUN_CHILD_PADDED ? padded_logits(&m, &bd) : logits_nested(&m, ids),
                                      labels, &loss));
            }
            TRY(jag_item(loss, &l));
            TRY(jag_backward(loss, NULL, false));
        }
        TRY(jag_scope_end()); /* the loss too, compiled or not: the scope's */
        TRY(jag_optim_step(opt));
        TRY(jag_optim_zero_grad(opt));
        double dt = now() - t0;
        seconds += dt, tokens += (double)global_tokens;
        avg = step == 1 ? l : 0.9 * avg + 0.1 * l;
        if (step == 1) first = l;
        batch_free(&bd);
        if (!speak) continue;
        if (mode != RUN_TRAIN) {
            printf("loss %ld %.9g %lld %.9g\n", step, l, (long long)global_tokens, dt);
            continue;
        }
        if (step == 1 || step % 10 == 0 || step == steps)
            printf("  step %4ld/%ld  epoch %lld  loss %.4f (smoothed %.4f)  %6.0f tokens/s\n", step, steps,
                   (long long)st.epoch + 1, l, avg, tokens / seconds);
        if (ds->s.n_val > 0 && (stream_epoch_done(&st) || step == steps)) {
            char when[64];
            if (stream_epoch_done(&st)) snprintf(when, sizeof when, "epoch %lld done", (long long)st.epoch + 1);
            else snprintf(when, sizeof when, "step %ld", step);
            print_validation(&m, ds, when, &accuracy);
        }
        fflush(stdout);
    }
    if (mode == RUN_TRAIN && speak && ds->s.n_val > 0)
        printf("validation accuracy %.1f%% after %ld steps (majority class %.1f%%; %lld held-out documents); "
               "training loss %.4f -> %.4f (smoothed)\n",
               100.0 * accuracy, steps, 100.0 * majority_accuracy(ds), (long long)ds->s.n_val, first, avg);
    else if (mode == RUN_TRAIN && speak)
        printf("no document was held out (too few documents): training loss %.4f -> %.4f (smoothed)\n", first, avg);
    if (step_fn) printf("programs %d\n", jag_compiled_num_programs(step_fn));
    jag_compiled_free(step_fn);
    TRY(jag_ddp_free(ddp));
    jag_optim_free(opt);
    plan_free(&st.plan);
    model_free(&m);
}

/* ---- nested, padded and compiled side by side ----------------------------- */

/* What one child run reported. */
typedef struct {
    double loss[MAX_COMPARE], seconds[MAX_COMPARE];
    int64_t tokens[MAX_COMPARE];
    long n_loss;
    double peak_rss_mib;
    int programs; /* programs compiled (the compiled run) */
} child_report;

/* Run this program again as `--mode NAME` with the same data and budget
 * and read its report; its peak RSS comes from wait4. Returns 0 on success. */
static int run_child(const char *self, const char *mode, long steps, int64_t max_tokens, char **paths, int n_paths,
                     child_report *r) {
    char steps_s[32], tokens_s[32];
    snprintf(steps_s, sizeof steps_s, "%ld", steps);
    snprintf(tokens_s, sizeof tokens_s, "%lld", (long long)max_tokens);
    char *argv[8 + 2 * 8];
    int a = 0;
    argv[a++] = (char *)self, argv[a++] = "--mode", argv[a++] = (char *)mode;
    argv[a++] = "--steps", argv[a++] = steps_s, argv[a++] = "--max-tokens", argv[a++] = tokens_s;
    for (int i = 0; i < n_paths; i++) argv[a++] = "--data", argv[a++] = paths[i];
    argv[a] = NULL;
    int fd[2];
    if (pipe(fd) != 0) return perror("train: pipe"), -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    extern char **environ;
    int err = posix_spawn(&pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (err != 0) {
        close(fd[0]);
        fprintf(stderr, "train: cannot run %s: %s\n", self, strerror(err));
        return -1;
    }
    memset(r, 0, sizeof *r);
    FILE *in = fdopen(fd[0], "r");
    char line[256];
    while (in && fgets(line, sizeof line, in)) {
        long step;
        long long tok;
        double v, sec;
        if (sscanf(line, "loss %ld %lf %lld %lf", &step, &v, &tok, &sec) == 4 && step == r->n_loss + 1 &&
            r->n_loss < MAX_COMPARE)
            r->loss[r->n_loss] = v, r->tokens[r->n_loss] = tok, r->seconds[r->n_loss++] = sec;
        else if (sscanf(line, "programs %lf", &v) == 1)
            r->programs = (int)v;
    }
    if (in) fclose(in);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "train: the %s run failed\n", mode);
        return -1;
    }
    r->peak_rss_mib = (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
    return r->n_loss == steps ? 0 : -1;
}

/* Tokens per second over steps 2..n (all n steps when n == 1): step 1 is
 * reported apart, since it includes the compiled run's tracing and compiling. */
static double steady_tokens_per_s(const child_report *r) {
    double tok = 0, sec = 0;
    for (long i = r->n_loss > 1 ? 1 : 0; i < r->n_loss; i++) tok += (double)r->tokens[i], sec += r->seconds[i];
    return tok / sec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median, min and max of v[0..n) */
static void spread(const double *v, int n, double *median, double *lo, double *hi) {
    double s[MAX_REPEATS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    *lo = s[0], *hi = s[n - 1];
}

/* The padding of the first `steps` training batches: padded slots B * T
 * against real tokens, and attention scores B * T^2 against sum L^2; and
 * how many batch sizes B they have. */
static void padding_ratios(const dataset *ds, long steps, double *slots_ratio, double *scores_ratio, int *n_sizes) {
    int64_t sizes[MAX_COMPARE];
    *n_sizes = 0;
    batch_stream st;
    stream_begin(&st, ds);
    double real = 0, slots = 0, real_sq = 0, slots_sq = 0;
    for (long s = 0; s < steps; s++) {
        batch_data bd;
        stream_next(&st, &bd);
        real += (double)bd.total, slots += (double)(bd.nb * bd.max_len);
        slots_sq += (double)bd.nb * (double)bd.max_len * (double)bd.max_len;
        int seen = 0;
        for (int k = 0; k < *n_sizes; k++) seen |= sizes[k] == bd.nb;
        if (!seen) sizes[(*n_sizes)++] = bd.nb;
        for (int64_t i = 0; i < bd.nb; i++) {
            double len = (double)(bd.offs[i + 1] - bd.offs[i]);
            real_sq += len * len;
        }
        batch_free(&bd);
    }
    plan_free(&st.plan);
    *slots_ratio = slots / real, *scores_ratio = slots_sq / real_sq;
}

enum { NESTED, PADDED, COMPILED, N_MODES };
static const char *const mode_names[N_MODES] = {"nested", "padded", "compiled"};

/* The three ways on the same batches, `repeats` runs each, interleaved so
 * that a slow moment of the machine does not fall on one way only. */
static int compare_runs(const char *self, const dataset *ds, long steps, int repeats, char **paths, int n_paths) {
    static child_report r[N_MODES][MAX_REPEATS];
    printf("the same model nested, on padded dense tensors and compiled (jag_compile): %ld steps from the same start\n"
           "on the same batches, %d runs of each (child processes, one at a time):\n",
           steps, repeats);
    for (int k = 0; k < repeats; k++)
        for (int w = 0; w < N_MODES; w++)
            if (run_child(self, mode_names[w], steps, ds->max_tokens, paths, n_paths, &r[w][k])) return 1;
    double worst[N_MODES] = {0};
    for (int w = 0; w < N_MODES; w++)
        for (int k = 0; k < repeats; k++)
            for (long i = 0; i < steps; i++) {
                double d = fabs(r[w][k].loss[i] - r[NESTED][0].loss[i]) / fmax(1.0, fabs(r[NESTED][0].loss[i]));
                if (!(d <= worst[w])) worst[w] = d; /* NaN counts as the worst */
            }
    for (long i = 0; i < steps; i++)
        if (i < 3 || i == steps - 1)
            printf("  step %4ld  loss nested %.6f  padded %.6f  compiled %.6f\n", i + 1, r[NESTED][0].loss[i],
                   r[PADDED][0].loss[i], r[COMPILED][0].loss[i]);
    printf("  tokens/s over steps %s, median (min-max) of %d runs; step 1 apart (median):\n",
           steps > 1 ? "2.." : "1", repeats);
    double speed[N_MODES][MAX_REPEATS];
    for (int w = 0; w < N_MODES; w++) {
        double first[MAX_REPEATS], rss[MAX_REPEATS], med, lo, hi, f, flo, fhi, mem, mlo, mhi;
        for (int k = 0; k < repeats; k++)
            speed[w][k] = steady_tokens_per_s(&r[w][k]), first[k] = r[w][k].seconds[0] * 1e3,
            rss[k] = r[w][k].peak_rss_mib;
        spread(speed[w], repeats, &med, &lo, &hi);
        spread(first, repeats, &f, &flo, &fhi);
        spread(rss, repeats, &mem, &mlo, &mhi);
        printf("  %-8s %7.0f (%.0f-%.0f) tokens/s  step 1 %6.0f ms%s  peak RSS %6.1f MiB\n", mode_names[w], med, lo, hi, f,
               w == COMPILED ? " (tracing and compiling included)" : "", mhi);
    }
    double ratio[N_MODES][MAX_REPEATS], rn, rnlo, rnhi, rc, rclo, rchi;
    for (int k = 0; k < repeats; k++)
        ratio[NESTED][k] = speed[NESTED][k] / speed[PADDED][k], ratio[COMPILED][k] = speed[COMPILED][k] / speed[PADDED][k];
    spread(ratio[NESTED], repeats, &rn, &rnlo, &rnhi);
    spread(ratio[COMPILED], repeats, &rc, &rclo, &rchi);
    printf("  against padded, run by run: nested %.2fx (%.2f-%.2fx), compiled %.2fx (%.2f-%.2fx)\n", rn, rnlo, rnhi, rc,
           rclo, rchi);
    double slots, scores;
    int n_sizes;
    padding_ratios(ds, steps, &slots, &scores, &n_sizes);
    printf("  the compiled run made %d program%s for these batches of %d different sizes (of any lengths)\n",
           r[COMPILED][0].programs, r[COMPILED][0].programs == 1 ? "" : "s", n_sizes);
    printf("  padding: these padded batches hold %.2fx the real tokens and %.2fx the real attention scores\n"
           "  (the sampler batches documents of similar length). Skipping padding saves work only in those\n"
           "  proportions; the rest of the speed-up comes from the kernels themselves (padded attention is\n"
           "  dense and masked, nested is jagged) and per-op costs, and the ranges show the machine's noise.\n",
           slots, scores);
    printf("  losses agree within %.1e (padded), %.1e (compiled), relative\n", worst[PADDED], worst[COMPILED]);
    if (!(worst[PADDED] <= 1e-3) || !(worst[COMPILED] <= 1e-3) || !(worst[NESTED] <= 1e-3)) {
        fprintf(stderr, "train: the losses disagree (padded %.3g, compiled %.3g, nested runs %.3g)\n", worst[PADDED],
                worst[COMPILED], worst[NESTED]);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    char *paths[8];
    int n_paths = 0;
    long steps = 60, max_tokens = 640, compare = 0, repeats = 3;
    bool print_trace = false, distributed = false;
    run_mode mode = RUN_TRAIN;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = atol(argv[++i]);
        else if (strcmp(argv[i], "--max-tokens") == 0 && i + 1 < argc) max_tokens = atol(argv[++i]);
        else if (strcmp(argv[i], "--compare") == 0 && i + 1 < argc) compare = atol(argv[++i]);
        else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) repeats = atol(argv[++i]);
        else if (strcmp(argv[i], "--print-trace") == 0) print_trace = true;
        else if (strcmp(argv[i], "--distributed") == 0) distributed = true;
        else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc && n_paths < 8) paths[n_paths++] = argv[++i];
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "nested") == 0)
            mode = RUN_CHILD_NESTED, i++;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "padded") == 0)
            mode = RUN_CHILD_PADDED, i++;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "compiled") == 0)
            mode = RUN_CHILD_COMPILED, i++;
        else {
            fprintf(stderr,
                    "usage: %s [--steps N] [--max-tokens T] [--compare N] [--repeats R] [--print-trace] "
                    "[--data FILE|DIR]... [--distributed]\n",
                    argv[0]);
            return 2;
        }
    }
    if (steps < 1 || max_tokens < MAX_LEN || compare < 0 || compare > MAX_COMPARE || repeats < 1 ||
        repeats > MAX_REPEATS) {
        fprintf(stderr, "train: --steps must be positive, --max-tokens at least %d (the longest document), "
                        "--compare in 0..%d, --repeats in 1..%d\n",
                MAX_LEN, MAX_COMPARE, MAX_REPEATS);
        return 2;
    }
    if (distributed && !jag_dist_is_available()) {
        fprintf(stderr, "train: --distributed needs a libjag built with MPI, and this one was built without it "
                        "(install MPI, e.g. libopenmpi-dev and openmpi-bin, and configure with -DJAG_USE_MPI=ON)\n");
        return 2;
    }
    if (distributed && (compare > 0 || (mode != RUN_TRAIN && mode != RUN_CHILD_NESTED))) {
        fprintf(stderr, "train: --distributed trains the nested model; --compare and the padded and compiled "
                        "runs are single-process\n");
        return 2;
    }
    corpus c;
    char err[512] = "";
    if (n_paths ? corpus_load(&c, (const char *const *)paths, n_paths, 1, err, sizeof err)
                : corpus_load_fortunes(&c, err, sizeof err)) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    dataset ds = {.c = &c, .max_tokens = max_tokens, .classes = c.n_files > 1 ? c.n_files : 2};
    split_make(&ds.s, &c);
    if (ds.s.n_train == 0) {
        fprintf(stderr, "train: all %lld documents were drawn for validation: give more documents\n",
                (long long)c.n_docs);
        split_free(&ds.s), corpus_free(&c);
        return 1;
    }
    if (distributed) {
        TRY(jag_dist_init());
        dist_rank = jag_dist_rank(), dist_world = jag_dist_world_size();
    }
    if (mode == RUN_TRAIN && dist_rank == 0) {
        printf("training on %lld documents (%lld tokens, %lld words), %lld classes (the path each came from)\n",
               (long long)c.n_docs, (long long)c.n_tokens, (long long)c.vocab_size, (long long)ds.classes);
        printf("held out for validation: %lld documents (u[d] < %.1f, u the uniforms of generator seed %d), "
               "%lld left to train on\n",
               (long long)ds.s.n_val, VAL_FRACTION, SPLIT_SEED, (long long)ds.s.n_train);
    }
    if (print_trace && dist_rank == 0) show_compiled_step(&ds);
    train(&ds, mode, steps, distributed);
    int rc = 0;
    if (mode == RUN_TRAIN && compare > 0) {
        fflush(stdout);
        rc = compare_runs("/proc/self/exe", &ds, compare, (int)repeats, paths, n_paths);
    }
    if (distributed) TRY(jag_dist_finalize());
    split_free(&ds.s);
    corpus_free(&c);
    return rc;
}
