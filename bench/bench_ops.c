/*
 * bench_ops.c — the rest of the ragged-batch ops against their padded dense
 * equivalents: norms, the ragged reductions bench_nested does not time,
 * log_softmax, embedding, dropout, clamp, the losses and the transcendental
 * unary ops (exp, log, sin, cos, tanh, sigmoid, silu, gelu, gelu_tanh). Each op runs on a
 * jagged batch (values + offsets) and, interleaved in the same run, jag's
 * own dense path on the padded (B, max length, D) batch — the cheapest
 * padded version: no mask, so padded reductions and losses also average
 * over the padding (a correct padded version pays for a mask on top).
 *
 * Figures: "op_vs_padded" {lengths, B, D, op, real_rows, padded_rows}:
 * {nested_s, padded_s, speedup, real_over_padded, never_slower}.
 */
#include "bench.h"
#include "bench_lengths.h"

typedef enum {
    OP_LAYER_NORM, OP_RMS_NORM, OP_MEAN_RAGGED, OP_ARGMAX_RAGGED, OP_LOG_SOFTMAX_RAGGED, OP_EMBEDDING, OP_DROPOUT,
    OP_CLAMP, OP_CROSS_ENTROPY, OP_MSE_LOSS, OP_EXP, OP_LOG, OP_SIN, OP_COS, OP_TANH, OP_SIGMOID, OP_SILU, OP_GELU,
    OP_GELU_TANH, OP_COUNT
} op_kind;
static const char *const op_names[OP_COUNT] = {"layer_norm", "rms_norm", "mean_ragged", "argmax_ragged",
                                               "log_softmax_ragged", "embedding", "dropout", "clamp",
                                               "cross_entropy", "mse_loss", "exp", "log", "sin", "cos",
                                               "tanh", "sigmoid", "silu", "gelu", "gelu_tanh"};

/* One side of a comparison: the nested batch or its padded equivalent. */
typedef struct {
    op_kind op;
    jag_tensor *x;       /* (B, j, D) or (B, L, D) */
    jag_tensor *y;       /* mse_loss's target, shaped like x */
    jag_tensor *logits;  /* cross_entropy: (B, j, D) nested or (B * L, D) */
    jag_tensor *target;  /* cross_entropy: int64 (B, j) nested or (B * L) */
    jag_tensor *ids;     /* embedding: int64 (B, j) nested or (B, L) */
    jag_tensor *table;   /* embedding: (V, D) */
    jag_tensor *w, *b;   /* norms: (D) */
    jag_generator *gen;  /* dropout */
} side;

static void run(void *p) {
    side *c = p;
    jag_tensor *o = NULL;
    int d1[1] = {1};
    jag_status st;
    switch (c->op) {
    case OP_LAYER_NORM: st = jag_layer_norm(c->x, 1, c->w, c->b, 1e-5, &o); break;
    case OP_RMS_NORM: st = jag_rms_norm(c->x, 1, c->w, 1e-5, &o); break;
    case OP_MEAN_RAGGED: st = jag_mean(c->x, d1, 1, false, &o); break;
    case OP_ARGMAX_RAGGED: st = jag_argmax(c->x, 1, false, &o); break;
    case OP_LOG_SOFTMAX_RAGGED: st = jag_log_softmax(c->x, 1, &o); break;
    case OP_EMBEDDING: st = jag_embedding(c->table, c->ids, &o); break;
    case OP_DROPOUT: st = jag_dropout(c->x, 0.1, true, c->gen, &o); break;
    case OP_CLAMP: st = jag_clamp(c->x, -0.5, 0.5, &o); break;
    case OP_CROSS_ENTROPY: st = jag_cross_entropy(c->logits, c->target, &o); break;
    case OP_MSE_LOSS: st = jag_mse_loss(c->x, c->y, &o); break;
    case OP_EXP: st = jag_exp(c->x, &o); break;
    case OP_LOG: st = jag_log(c->x, &o); break;
    case OP_SIN: st = jag_sin(c->x, &o); break;
    case OP_COS: st = jag_cos(c->x, &o); break;
    case OP_TANH: st = jag_tanh(c->x, &o); break;
    case OP_SIGMOID: st = jag_sigmoid(c->x, &o); break;
    case OP_SILU: st = jag_silu(c->x, &o); break;
    case OP_GELU: st = jag_gelu(c->x, &o); break;
    default: st = jag_gelu_tanh(c->x, &o); break;
    }
    bench_check(st, op_names[c->op]);
    jag_release(o);
}

/* A jagged tensor around `values` with the batch's offsets. */
static jag_tensor *nest(jag_tensor *values, jag_tensor *offsets) {
    jag_tensor *nt = NULL;
    bench_check(jag_nested_from_jagged(values, offsets, NULL, &nt), "nested");
    jag_release(values);
    return nt;
}

static jag_tensor *padded_of(const jag_tensor *nt) {
    jag_tensor *p = NULL;
    bench_check(jag_nested_to_padded(nt, 0, NULL, 0, &p), "pad");
    return p;
}

static void bench_case(const corpus *cp, const char *dist, int64_t batch, int64_t dim) {
    int64_t *lens = malloc((size_t)batch * sizeof *lens), real = 0, maxlen = 0, V = 50000;
    make_lengths(dist, cp, batch, (uint64_t)batch * 131, lens);
    for (int64_t i = 0; i < batch; i++) real += lens[i], maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    char params[192];
    snprintf(params, sizeof params,
             "\"lengths\": \"%s\", \"B\": %lld, \"D\": %lld, \"real_rows\": %lld, \"padded_rows\": %lld", dist,
             (long long)batch, (long long)dim, (long long)real, (long long)(batch * maxlen));
    if ((double)batch * (double)maxlen * (double)dim * 4.0 > (bench_quick ? 64.0 : 512.0) * 1024 * 1024) {
        bench_emit("nested", "op_vs_padded", params, "\"skipped\": \"padded tensor too large for this machine's budget\"");
        free(lens);
        return;
    }
    int64_t nb1 = batch + 1, *offs = malloc((size_t)nb1 * sizeof *offs);
    offs[0] = 0;
    for (int64_t i = 0; i < batch; i++) offs[i + 1] = offs[i] + lens[i];
    jag_tensor *offsets = NULL, *v = NULL;
    bench_check(jag_from_data(offs, &nb1, 1, JAG_INT64, &offsets), "offsets");
    int64_t vs[2] = {real, dim}, ts[2] = {V, dim};
    side n = {0}, p = {0};
    bench_check(jag_rand_normal(vs, 2, 0, 1, JAG_FLOAT32, NULL, &v), "x");
    n.x = nest(v, offsets), p.x = padded_of(n.x);
    bench_check(jag_rand_normal(vs, 2, 0, 1, JAG_FLOAT32, NULL, &v), "y");
    n.y = nest(v, offsets), p.y = padded_of(n.y);
    /* cross_entropy over D classes; padded logits flattened to (B * L, D) */
    n.logits = n.x;
    int64_t flat[2] = {batch * maxlen, dim}, flat1 = batch * maxlen;
    bench_check(jag_reshape(p.x, flat, 2, &p.logits), "reshape");
    bench_check(jag_rand_uniform(&real, 1, 0, (double)dim, JAG_FLOAT64, NULL, &v), "target");
    jag_tensor *t64 = NULL; /* truncation: the floor of these positive numbers */
    bench_check(jag_to_dtype(v, JAG_INT64, &t64), "to int64"), jag_release(v);
    n.target = nest(t64, offsets);
    jag_tensor *tp = padded_of(n.target);
    bench_check(jag_reshape(tp, &flat1, 1, &p.target), "reshape"), jag_release(tp);
    /* embedding ids in [0, V) */
    bench_check(jag_rand_uniform(&real, 1, 0, (double)V, JAG_FLOAT64, NULL, &v), "ids");
    bench_check(jag_to_dtype(v, JAG_INT64, &t64), "to int64"), jag_release(v);
    n.ids = nest(t64, offsets), p.ids = padded_of(n.ids);
    bench_check(jag_rand_normal(ts, 2, 0, 1, JAG_FLOAT32, NULL, &n.table), "table");
    p.table = n.table;
    bench_check(jag_ones(&dim, 1, JAG_FLOAT32, &n.w), "w");
    bench_check(jag_zeros(&dim, 1, JAG_FLOAT32, &n.b), "b");
    p.w = n.w, p.b = n.b;
    bench_check(jag_generator_new(11, &n.gen), "gen");
    bench_check(jag_generator_new(11, &p.gen), "gen");
    double ratio = (double)real / (double)(batch * maxlen);
    for (int op = 0; op < OP_COUNT; op++) {
        n.op = p.op = (op_kind)op;
        bench_stats sn, sp;
        bench_pair(run, &n, run, &p, 10, bench_quick ? 0.2 : 0.5, &sn, &sp);
        char p2[256], vals[512];
        snprintf(p2, sizeof p2, "%s, \"op\": \"%s\"", params, op_names[op]);
        snprintf(vals, sizeof vals,
                 "\"nested_s\": %.6g, \"nested_s_min\": %.6g, \"nested_s_max\": %.6g, \"padded_s\": %.6g, "
                 "\"padded_s_min\": %.6g, \"padded_s_max\": %.6g, \"speedup\": %.3f, \"real_over_padded\": %.4f, "
                 "\"never_slower\": %s",
                 sn.median, sn.min, sn.max, sp.median, sp.min, sp.max, sp.median / sn.median, ratio,
                 sn.median <= sp.median ? "true" : "false");
        bench_emit("nested", "op_vs_padded", p2, vals);
    }
    jag_release(n.x), jag_release(p.x), jag_release(n.y), jag_release(p.y), jag_release(p.logits);
    jag_release(n.target), jag_release(p.target), jag_release(n.ids), jag_release(p.ids), jag_release(n.table);
    jag_release(n.w), jag_release(n.b), jag_release(offsets);
    jag_generator_free(n.gen), jag_generator_free(p.gen);
    free(offs), free(lens);
}

int main(int argc, char **argv) {
    bench_parse_args(argc, argv);
    jag_manual_seed(7);
    corpus c;
    char err[256] = "";
    int have_corpus = corpus_load_fortunes(&c, err, sizeof err) == 0;
    if (!have_corpus) fprintf(stderr, "bench_ops: no corpus (%s); corpus lengths skipped\n", err);
    int64_t batches[] = {1, 8, 64, 512}, dims[] = {64, 256, 1024};
    const char *dists[] = {"uniform", "corpus"};
    for (int di = 0; di < 2; di++) {
        if (di == 1 && !have_corpus) break;
        for (size_t bi = 0; bi < 4; bi++)
            for (size_t ki = 0; ki < 3; ki++) {
                if (bench_quick && (batches[bi] == 512 || dims[ki] == 1024)) continue;
                bench_case(&c, dists[di], batches[bi], dims[ki]);
            }
    }
    if (have_corpus) corpus_free(&c);
    return 0;
}
