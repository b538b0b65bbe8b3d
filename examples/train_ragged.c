/*
 * train_ragged.c — trains a small transformer classifier on real ragged
 * text, nested end to end: no padding anywhere.
 *
 * Data: the fortune files of Debian's fortunes-min, or --data PATH... (a
 * file: one document per line; a directory: one document per file); the
 * label of a document is the path it came from.
 * Model: embedding -> [layer_norm -> attention over the ragged dim -> +x]
 * -> [layer_norm -> linear -> gelu -> linear -> +x] -> mean over the ragged
 * dim -> linear -> cross entropy. Optimiser: Adam, written with jag ops.
 *
 * Then (--compare N) the same model runs N steps on padded dense tensors
 * and N steps nested, from the same initial parameters on the same batches,
 * each in a child process of its own so that its peak memory is its own;
 * their losses must agree, and their speed and peak memory are printed.
 *
 * The same steps also run compiled (jag_compile of the loss, forward and
 * backward: one program for batches of every length), and --print-trace
 * shows the compiled program of one step.
 *
 * Flags: --steps N (default 60), --batch B (default 32), --compare N
 * (default 0), --print-trace, --data PATH... (--mode nested|padded|compiled
 * runs one child.)
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

/* The same model on padded dense tensors, as a framework without nested
 * tensors runs it: ids (B, T) padded with token 0, an additive key mask
 * (B, 1, 1, T) of 0 / -inf in attention, and a (B, T, 1) mask of 1 / 0 in
 * the mean pooling. Its loss equals the nested model's on the same batch
 * (padded rows get no gradient), at the cost of computing on T * B rows. */
static jag_tensor *forward_padded(const model *m, const jag_tensor *ids, const jag_tensor *key_mask,
                                  const jag_tensor *row_mask, const jag_tensor *lengths,
                                  const jag_tensor *labels) {
    const int64_t B = jag_size(ids, 0), T = jag_size(ids, 1);
    jag_tensor *x, *h, *qkv, *parts[3], *hd[3], *scores, *scaled, *masked, *p, *ctx, *ctx_t, *a2, *o, *x2, *h2,
        *f1, *f2, *f3, *x3, *kept, *summed, *pool, *logits, *loss, *kt;
    int np;
    TRY(jag_embedding(m->p[EMB], ids, &x));                           /* (B, T, D) */
    TRY(jag_layer_norm(x, 1, m->p[LN1_W], m->p[LN1_B], 1e-5, &h));
    TRY(jag_linear(h, m->p[WQKV], NULL, &qkv));                        /* (B, T, 3D) */
    TRY(jag_split(qkv, D, 2, parts, 3, &np));
    for (int i = 0; i < 3; i++) {
        jag_tensor *r;
        TRY(jag_reshape(parts[i], (int64_t[]){B, T, H, DH}, 4, &r));
        TRY(jag_transpose(r, 1, 2, &hd[i]));                           /* (B, H, T, DH) */
    }
    TRY(jag_transpose(hd[1], 2, 3, &kt));                              /* (B, H, DH, T) */
    TRY(jag_matmul(hd[0], kt, &scores));                               /* (B, H, T, T) */
    TRY(jag_mul_scalar(scores, 1.0 / sqrt((double)DH), &scaled));
    TRY(jag_add(scaled, key_mask, 1.0, &masked));                      /* padded keys -> -inf */
    TRY(jag_softmax(masked, 3, &p));
    TRY(jag_matmul(p, hd[2], &ctx));                                   /* (B, H, T, DH) */
    TRY(jag_transpose(ctx, 1, 2, &ctx_t));
    TRY(jag_reshape(ctx_t, (int64_t[]){B, T, D}, 3, &a2));
    TRY(jag_linear(a2, m->p[WO], NULL, &o));
    TRY(jag_add(x, o, 1.0, &x2));
    TRY(jag_layer_norm(x2, 1, m->p[LN2_W], m->p[LN2_B], 1e-5, &h2));
    TRY(jag_linear(h2, m->p[W1], m->p[B1], &f1));
    TRY(jag_gelu(f1, &f2));
    TRY(jag_linear(f2, m->p[W2], m->p[B2], &f3));
    TRY(jag_add(x2, f3, 1.0, &x3));
    TRY(jag_mul(x3, row_mask, &kept));                                 /* padded rows -> 0 */
    TRY(jag_sum(kept, (int[]){1}, 1, false, &summed));                 /* (B, D) */
    TRY(jag_div(summed, lengths, &pool));                              /* lengths (B, 1) */
    TRY(jag_linear(pool, m->p[WC], m->p[BC], &logits));
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

/* One batch of documents: token ids packed, their offsets and labels. */
typedef struct {
    int64_t nb, total, max_len;
    int64_t *ids, *offs, *labels;
} batch_data;

static void batch_next(batch_data *bd, const corpus *c, const int64_t *order, int64_t *cursor, long batch) {
    int64_t nb = batch < c->n_docs ? batch : c->n_docs;
    bd->ids = malloc((size_t)c->n_tokens * sizeof *bd->ids);
    bd->offs = malloc((size_t)(nb + 1) * sizeof *bd->offs);
    bd->labels = malloc((size_t)nb * sizeof *bd->labels);
    if (!bd->ids || !bd->offs || !bd->labels) {
        fprintf(stderr, "train: out of memory\n");
        exit(1);
    }
    bd->nb = nb, bd->total = 0, bd->max_len = 0, bd->offs[0] = 0;
    for (int64_t b = 0; b < nb; b++) {
        int64_t d = order[(*cursor)++ % c->n_docs], len = c->offsets[d + 1] - c->offsets[d];
        if (len > 128) len = 128; /* a bound on the longest document */
        memcpy(bd->ids + bd->total, c->tokens + c->offsets[d], (size_t)len * sizeof *bd->ids);
        bd->total += len, bd->offs[b + 1] = bd->total, bd->labels[b] = c->labels[d];
        if (len > bd->max_len) bd->max_len = len;
    }
}

static void batch_free(batch_data *bd) { free(bd->ids), free(bd->offs), free(bd->labels); }

/* The batch as a nested (B, j) tensor of ids -> the model's loss. */
static jag_tensor *loss_nested(const model *m, const batch_data *bd) {
    jag_tensor *idv, *off, *lab, *nt;
    int64_t nb1 = bd->nb + 1, total = bd->total, nb = bd->nb;
    TRY(jag_from_data(bd->ids, &total, 1, JAG_INT64, &idv));
    TRY(jag_from_data(bd->offs, &nb1, 1, JAG_INT64, &off));
    TRY(jag_from_data(bd->labels, &nb, 1, JAG_INT64, &lab));
    TRY(jag_nested_from_jagged(idv, off, NULL, &nt)); /* (B, j) token ids, packed */
    return forward(m, nt, off, lab);
}

/* The batch padded to (B, T) with its masks -> the padded model's loss. */
static jag_tensor *loss_padded(const model *m, const batch_data *bd) {
    const int64_t B = bd->nb, T = bd->max_len > 0 ? bd->max_len : 1;
    int64_t *ids = calloc((size_t)(B * T), sizeof *ids);
    float *key_mask = malloc((size_t)(B * T) * sizeof *key_mask), *row_mask = malloc((size_t)(B * T) * sizeof *row_mask);
    float *lengths = malloc((size_t)B * sizeof *lengths);
    if (!ids || !key_mask || !row_mask || !lengths) {
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
    jag_tensor *idt, *km, *rm, *lt, *lab;
    int64_t nb = B;
    TRY(jag_from_data(ids, (int64_t[]){B, T}, 2, JAG_INT64, &idt));
    TRY(jag_from_data(key_mask, (int64_t[]){B, 1, 1, T}, 4, JAG_FLOAT32, &km));
    TRY(jag_from_data(row_mask, (int64_t[]){B, T, 1}, 3, JAG_FLOAT32, &rm));
    TRY(jag_from_data(lengths, (int64_t[]){B, 1}, 2, JAG_FLOAT32, &lt));
    TRY(jag_from_data(bd->labels, &nb, 1, JAG_INT64, &lab));
    free(ids), free(key_mask), free(row_mask), free(lengths);
    return forward_padded(m, idt, km, rm, lt, lab);
}

/* The training step's loss as a function the tracer records: inputs are
 * the nested ids (B, j), the labels (B) and the N_PARAMS parameters; the
 * output is the loss. jag_compile traces it on the first batch (forward,
 * and backward because the parameters require grad); the trace of a second
 * batch, of another length, shows that the program's fixed sizes (the heads
 * and head size of its views) are the model's, and the first program then
 * runs every later batch untraced. */
static jag_status traced_loss(void *ctx, jag_tensor *const *in, int n_in, jag_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    model pm;
    memset(&pm, 0, sizeof pm);
    for (int i = 0; i < N_PARAMS; i++) pm.p[i] = in[2 + i];
    jag_tensor *off = NULL;
    TRY(jag_scope_begin());
    TRY(jag_nested_offsets(in[0], &off));
    jag_tensor *loss = jag_retain(forward(&pm, in[0], off, in[1])); /* ours: the scope gives its own back */
    TRY(jag_scope_end());
    out[0] = loss;
    return JAG_OK;
}

/* The batch's inputs for traced_loss: nested ids, labels, parameters. */
static void step_inputs(const model *m, const batch_data *bd, jag_tensor **in) {
    jag_tensor *idv, *off;
    int64_t nb1 = bd->nb + 1, total = bd->total, nb = bd->nb;
    TRY(jag_from_data(bd->ids, &total, 1, JAG_INT64, &idv));
    TRY(jag_from_data(bd->offs, &nb1, 1, JAG_INT64, &off));
    TRY(jag_from_data(bd->labels, &nb, 1, JAG_INT64, &in[1]));
    TRY(jag_nested_from_jagged(idv, off, NULL, &in[0]));
    for (int i = 0; i < N_PARAMS; i++) in[2 + i] = m->p[i];
}

typedef enum { RUN_TRAIN, RUN_CHILD_NESTED, RUN_CHILD_PADDED, RUN_CHILD_COMPILED } run_mode;

/* One training step traced and compiled: prints the forward program (after
 * desugar, dce and fuse: plain ops on packed values, no nested tensor left
 * but at the edges) and the size of its backward program. */
static void show_compiled_step(const corpus *c, long batch) {
    int64_t classes = c->n_files > 1 ? c->n_files : 2, cursor = 0, *order = malloc((size_t)c->n_docs * sizeof *order);
    for (int64_t i = 0; i < c->n_docs; i++) order[i] = i;
    jag_manual_seed(42);
    model m;
    model_init(&m, c->vocab_size, classes);
    TRY(jag_scope_begin());
    batch_data bd;
    batch_next(&bd, c, order, &cursor, batch);
    jag_tensor *in[2 + N_PARAMS];
    step_inputs(&m, &bd, in);
    static const char *names[2 + N_PARAMS] = {"ids", "labels", "emb", "ln1_w", "ln1_b", "wqkv", "wo", "ln2_w", "ln2_b",
                                              "w1", "b1", "w2", "b2", "wc", "bc"};
    jag_trace *t = NULL;
    jag_program *p = NULL;
    TRY(jag_trace_function(traced_loss, NULL, in, 2 + N_PARAMS, names, 1, &t));
    TRY(jag_trace_compile(t, JAG_PASSES_ALL, &p));
    printf("one training step, traced (%d symbols) and compiled: the forward program\n", jag_trace_num_symbols(t));
    jag_trace_print(jag_program_trace(p));
    const jag_trace *bw = jag_program_backward_trace(p);
    printf("and a backward program of %d symbols (gradients of the 13 parameters)\n\n", bw ? jag_trace_num_symbols(bw) : 0);
    jag_program_free(p);
    jag_trace_free(t);
    TRY(jag_scope_end());
    batch_free(&bd);
    model_free(&m);
    free(order);
}



/* Train for `steps` steps. RUN_TRAIN prints progress for people; a child
 * prints one "loss STEP VALUE" line a step and "tokens_per_s VALUE" at the
 * end for its parent to read. */
static void train(const corpus *c, run_mode mode, long steps, long batch) {
    int64_t classes = c->n_files > 1 ? c->n_files : 2;
    jag_manual_seed(42);
    model m;
    model_init(&m, c->vocab_size, classes);
    /* a fixed shuffle of the documents */
    int64_t *order = malloc((size_t)c->n_docs * sizeof *order);
    uint64_t s = 12345;
    for (int64_t i = 0; i < c->n_docs; i++) order[i] = i;
    for (int64_t i = c->n_docs - 1; i > 0; i--) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int64_t j = (int64_t)((s >> 33) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    double first = NAN, last = NAN, tokens = 0, t0 = now(), avg = 0;
    int64_t cursor = 0;
    jag_compiled *step_fn = NULL;
    if (mode == RUN_CHILD_COMPILED) TRY(jag_compile(traced_loss, NULL, 1, JAG_PASSES_ALL, &step_fn));
    for (long step = 1; step <= steps; step++) {
        TRY(jag_scope_begin());
        batch_data bd;
        batch_next(&bd, c, order, &cursor, batch);
        jag_tensor *loss = NULL, *in[2 + N_PARAMS];
        if (mode == RUN_CHILD_COMPILED) {
            step_inputs(&m, &bd, in);
            TRY(jag_compiled_call(step_fn, in, 2 + N_PARAMS, &loss, 1));
        } else {
            loss = mode == RUN_CHILD_PADDED ? loss_padded(&m, &bd) : loss_nested(&m, &bd);
        }
        double l;
        TRY(jag_item(loss, &l));
        TRY(jag_backward(loss, NULL, false));
        TRY(jag_scope_end()); /* the loss too, compiled or not: the scope's */
        adam_step(&m, 3e-3);
        tokens += (double)bd.total;
        batch_free(&bd);
        avg = step == 1 ? l : 0.9 * avg + 0.1 * l;
        if (step == 1) first = l;
        last = avg;
        if (mode != RUN_TRAIN) printf("loss %ld %.9g\n", step, l);
        else if (step == 1 || step % 10 == 0 || step == steps)
            printf("  step %4ld  loss %.4f (smoothed %.4f)  %8.0f tokens/s\n", step, l, avg, tokens / (now() - t0));
    }
    if (mode == RUN_TRAIN)
        printf("loss %.4f -> %.4f (smoothed) over %ld steps: %s\n", first, last, steps,
               last < first ? "it learns" : "it did not fall");
    else
        printf("tokens_per_s %.9g\n", tokens / (now() - t0));
    if (step_fn) printf("programs %d\n", jag_compiled_num_programs(step_fn));
    jag_compiled_free(step_fn);
    model_free(&m);
    free(order);
}

/* What one child run reported. */
typedef struct {
    double loss[64];
    long n_loss;
    double tokens_per_s, peak_rss_mib;
    int programs; /* programs compiled (the compiled run) */
} child_report;

/* Run this program again as `--mode NAME` with the same data and batch and
 * read its report; its peak RSS comes from wait4. Returns 0 on success. */
static int run_child(const char *self, const char *mode, long steps, long batch, char **paths, int n_paths,
                     child_report *r) {
    char steps_s[32], batch_s[32];
    snprintf(steps_s, sizeof steps_s, "%ld", steps);
    snprintf(batch_s, sizeof batch_s, "%ld", batch);
    char *argv[8 + 2 * 8];
    int a = 0;
    argv[a++] = (char *)self, argv[a++] = "--mode", argv[a++] = (char *)mode;
    argv[a++] = "--steps", argv[a++] = steps_s, argv[a++] = "--batch", argv[a++] = batch_s;
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
        double v;
        if (sscanf(line, "loss %ld %lf", &step, &v) == 2 && step == r->n_loss + 1 && r->n_loss < 64)
            r->loss[r->n_loss++] = v;
        else if (sscanf(line, "tokens_per_s %lf", &v) == 1)
            r->tokens_per_s = v;
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

/* The padded model against the nested one on the same batches. */
static int compare_padded(const char *self, long steps, long batch, char **paths, int n_paths) {
    child_report nested, padded, compiled;
    printf("the same model on padded dense tensors, and compiled (jag_compile), %ld steps from the same start on the same batches:\n",
           steps);
    if (run_child(self, "padded", steps, batch, paths, n_paths, &padded) ||
        run_child(self, "nested", steps, batch, paths, n_paths, &nested) ||
        run_child(self, "compiled", steps, batch, paths, n_paths, &compiled))
        return 1;
    double worst = 0, worst_c = 0;
    for (long i = 0; i < steps; i++) {
        double d = fabs(nested.loss[i] - padded.loss[i]) / fmax(1.0, fabs(padded.loss[i]));
        double dc = fabs(nested.loss[i] - compiled.loss[i]) / fmax(1.0, fabs(nested.loss[i]));
        if (!(d <= worst)) worst = d; /* NaN counts as the worst */
        if (!(dc <= worst_c)) worst_c = dc;
        if (i < 3 || i == steps - 1)
            printf("  step %4ld  loss nested %.6f  padded %.6f  compiled %.6f\n", i + 1, nested.loss[i], padded.loss[i],
                   compiled.loss[i]);
    }
    printf("  %-9s %10.0f tokens/s  peak RSS %6.1f MiB\n", "nested", nested.tokens_per_s, nested.peak_rss_mib);
    printf("  %-9s %10.0f tokens/s  peak RSS %6.1f MiB\n", "padded", padded.tokens_per_s, padded.peak_rss_mib);
    printf("  %-9s %10.0f tokens/s  peak RSS %6.1f MiB  (%d program%s for batches of every length)\n", "compiled",
           compiled.tokens_per_s, compiled.peak_rss_mib, compiled.programs, compiled.programs == 1 ? "" : "s");
    printf("  nested runs %.2fx the speed of padded, compiled %.2fx; losses agree within %.1e (padded), %.1e (compiled)\n",
           nested.tokens_per_s / padded.tokens_per_s, compiled.tokens_per_s / padded.tokens_per_s, worst, worst_c);
    if (!(worst <= 1e-3) || !(worst_c <= 1e-3)) {
        fprintf(stderr, "train: the losses disagree (padded %.3g, compiled %.3g)\n", worst, worst_c);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    char *paths[8];
    int n_paths = 0;
    long steps = 60, batch = 32, compare = 0;
    bool print_trace = false;
    run_mode mode = RUN_TRAIN;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = atol(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atol(argv[++i]);
        else if (strcmp(argv[i], "--compare") == 0 && i + 1 < argc) compare = atol(argv[++i]);
        else if (strcmp(argv[i], "--print-trace") == 0) print_trace = true;
        else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc && n_paths < 8) paths[n_paths++] = argv[++i];
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "nested") == 0)
            mode = RUN_CHILD_NESTED, i++;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "padded") == 0)
            mode = RUN_CHILD_PADDED, i++;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "compiled") == 0)
            mode = RUN_CHILD_COMPILED, i++;
        else {
            fprintf(stderr, "usage: %s [--steps N] [--batch B] [--compare N] [--print-trace] [--data FILE|DIR]...\n", argv[0]);
            return 2;
        }
    }
    if (steps < 1 || batch < 1 || compare < 0 || compare > 64) {
        fprintf(stderr, "train: --steps and --batch must be positive, --compare in 0..64\n");
        return 2;
    }
    corpus c;
    char err[512] = "";
    if (n_paths ? corpus_load(&c, (const char *const *)paths, n_paths, 1, err, sizeof err)
                : corpus_load_fortunes(&c, err, sizeof err)) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    if (mode == RUN_TRAIN) {
        int64_t classes = c.n_files > 1 ? c.n_files : 2;
        printf("training on %lld documents (%lld tokens, %lld words), %lld classes (the path each came from)\n",
               (long long)c.n_docs, (long long)c.n_tokens, (long long)c.vocab_size, (long long)classes);
    }
    if (print_trace) show_compiled_step(&c, batch);
    train(&c, mode, steps, batch);
    corpus_free(&c);
    if (mode == RUN_TRAIN && compare > 0) {
        fflush(stdout);
        return compare_padded("/proc/self/exe", compare, batch, paths, n_paths);
    }
    return 0;
}
