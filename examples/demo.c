/*
 * demo.c — what jag is for, on real ragged text (make demo).
 *
 *   1. loads a real corpus (the fortune files of Debian's fortunes-min),
 *      tokenizes it and builds a vocabulary;
 *   2. makes batches of documents as jagged nested tensors: token
 *      embeddings packed as (sum of lengths, D) plus offsets, no padding;
 *   3. runs a residual feed-forward block and multi-head self-attention
 *      (q, k, v in torch's (B, H, j, Dh) layout) on every batch, packed
 *      and padded, checks that both agree document by document, and times
 *      both;
 *   4. walks through PyTorch's NestedTensor wrapper-subclass prototype:
 *      pointwise ops on a strided nested tensor, bmm with a transpose, a
 *      jagged mm, and a custom op reaching a nested decomposition.
 *
 * Flags: --data PATH (repeatable; plain text, one document per line) instead
 * of the fortune files, --batch N (default 64), --dim D (default 128),
 * --repeats R (default 3): the timed passes over every batch, reported as
 * median and range.
 */
#include "corpus.h"
#include "jag.h"

#include <math.h>
#include <time.h>

#define TRY(call)                                                              \
    do {                                                                       \
        if ((call) != JAG_OK) {                                                \
            fprintf(stderr, "demo: %s failed: %s\n", #call, jag_last_error()); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ---- the model: x + W2 gelu(W1 x + b1) + b2 ------------------------------ */

typedef struct {
    jag_tensor *w1, *b1, *w2, *b2;
} ffn;

/* Works on dense (B, L, D) and on nested (B, j, D) alike: the same calls.
 * A scope owns the intermediates; the result is kept for the caller. */
static jag_tensor *ffn_forward(const ffn *m, const jag_tensor *x) {
    jag_tensor *h = NULL, *g = NULL, *o = NULL, *y = NULL;
    TRY(jag_scope_begin());
    TRY(jag_linear(x, m->w1, m->b1, &h));
    TRY(jag_gelu(h, &g));
    TRY(jag_linear(g, m->w2, m->b2, &o));
    TRY(jag_add(x, o, 1.0, &y));
    jag_scope_keep(y);
    TRY(jag_scope_end());
    return y;
}

/* ---- step 3b: self-attention in torch's layout --------------------------- */

#define HEADS 4

/* Packed: x (B, j, D) -> q, k, v (B, H, j, Dh), transposes of the (B, j, H,
 * Dh) heads (no copy) -> attention, no mask. Padded: the same projections of
 * (B, Lmax, D), (B, H, Lmax, Dh) and an additive mask hiding the padding.
 * Returns the packed output as (B, j, H, Dh) and the padded one as
 * (B, Lmax, H, Dh) through *padded_out. */
static jag_tensor *attention_both(jag_tensor *const w[3], const jag_tensor *nt, const jag_tensor *pad, const int64_t *lens,
                                  int64_t dim, double *t_nested, double *t_padded, jag_tensor **padded_out) {
    int64_t nb = jag_size(pad, 0), lmax = jag_size(pad, 1), dh = dim / HEADS;
    jag_tensor *t[3], *o = NULL, *ob = NULL;
    double a = now();
    for (int i = 0; i < 3; i++) { /* torch's q = x.linear(w).view(B, -1, H, Dh).transpose(1, 2) */
        jag_tensor *p = NULL, *n = NULL;
        TRY(jag_linear(nt, w[i], NULL, &p));                               /* (B, j, D) */
        TRY(jag_reshape(p, (int64_t[]){nb, -1, HEADS, dh}, 4, &n));       /* (B, j, H, Dh) */
        TRY(jag_transpose(n, 1, 2, &t[i]));                                /* (B, H, j, Dh) */
    }
    TRY(jag_scaled_dot_product_attention(t[0], t[1], t[2], false, 0.0, &o));
    TRY(jag_transpose(o, 1, 2, &ob)); /* (B, j, H, Dh) */
    double b = now();
    jag_tensor *mask = NULL, *pt[3], *po = NULL;
    TRY(jag_zeros((int64_t[]){nb, 1, 1, lmax}, 4, JAG_FLOAT32, &mask));
    float *m = jag_data(mask);
    for (int64_t i = 0; i < nb; i++)
        for (int64_t j = lens[i]; j < lmax; j++) m[i * lmax + j] = -INFINITY;
    for (int i = 0; i < 3; i++) {
        jag_tensor *p = NULL, *h = NULL;
        TRY(jag_linear(pad, w[i], NULL, &p));
        TRY(jag_reshape(p, (int64_t[]){nb, lmax, HEADS, dh}, 4, &h));
        TRY(jag_transpose(h, 1, 2, &pt[i])); /* (B, H, Lmax, Dh) */
    }
    TRY(jag_scaled_dot_product_attention_masked(pt[0], pt[1], pt[2], mask, false, 0.0, &po));
    TRY(jag_transpose(po, 1, 2, padded_out)); /* (B, Lmax, H, Dh) */
    double e = now();
    *t_nested += b - a, *t_padded += e - b;
    if (jag_nested_ragged_idx(o) != 2) {
        fprintf(stderr, "demo: attention in (B, H, j, Dh) gave ragged dim %d\n", jag_nested_ragged_idx(o));
        exit(1);
    }
    return ob;
}

/* ---- step 2 and 3 -------------------------------------------------------- */

enum { MAX_REPEATS = 9 };

/* median, min and max of v[0..n) */
static void spread(const double *v, int n, double *median, double *lo, double *hi) {
    double s[MAX_REPEATS];
    memcpy(s, v, (size_t)n * sizeof *s);
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double t = s[j];
            s[j] = s[j - 1], s[j - 1] = t;
        }
    *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    *lo = s[0], *hi = s[n - 1];
}

/* One line of timings: tokens/s of each pass as median (min-max). */
static void print_speed(const char *label, const double *seconds, int repeats, int64_t tokens) {
    double v[MAX_REPEATS], med, lo, hi;
    for (int r = 0; r < repeats; r++) v[r] = (double)tokens / seconds[r];
    spread(v, repeats, &med, &lo, &hi);
    printf("    %-26s %8.0f tokens/s (%.0f-%.0f)\n", label, med, lo, hi);
}

/* The speed-up pass by pass: padded time / packed time, median (min-max). */
static void print_speedup(const double *packed, const double *padded, int repeats) {
    double v[MAX_REPEATS], med, lo, hi;
    for (int r = 0; r < repeats; r++) v[r] = padded[r] / packed[r];
    spread(v, repeats, &med, &lo, &hi);
    printf("    speed-up %.2fx (%.2f-%.2fx over the passes)", med, lo, hi);
}

static void run_batches(const corpus *c, int64_t batch, int64_t dim, int repeats) {
    int64_t vocab = c->vocab_size;
    jag_tensor *table = NULL;
    jag_manual_seed(1234);
    TRY(jag_rand_normal((int64_t[]){vocab, dim}, 2, 0.0, 1.0, JAG_FLOAT32, NULL, &table));
    ffn m = {0};
    double s = 1.0 / sqrt((double)dim);
    TRY(jag_rand_normal((int64_t[]){4 * dim, dim}, 2, 0.0, s, JAG_FLOAT32, NULL, &m.w1));
    TRY(jag_zeros((int64_t[]){4 * dim}, 1, JAG_FLOAT32, &m.b1));
    TRY(jag_rand_normal((int64_t[]){dim, 4 * dim}, 2, 0.0, s / 2, JAG_FLOAT32, NULL, &m.w2));
    TRY(jag_zeros((int64_t[]){dim}, 1, JAG_FLOAT32, &m.b2));
    jag_tensor *wqkv[3] = {0};
    for (int i = 0; i < 3; i++) TRY(jag_rand_normal((int64_t[]){dim, dim}, 2, 0.0, s, JAG_FLOAT32, NULL, &wqkv[i]));
    double t_att_nested[MAX_REPEATS] = {0}, t_att_padded[MAX_REPEATS] = {0}, worst_att = 0;
    bool attention = dim % HEADS == 0;

    int64_t n_batches = (c->n_docs + batch - 1) / batch, real = 0, padded = 0;
    double t_nested[MAX_REPEATS] = {0}, t_padded[MAX_REPEATS] = {0}, worst = 0, real_sq = 0, padded_sq = 0;
    for (int pass = 0; pass < repeats; pass++)
    for (int64_t bi = 0; bi < n_batches; bi++) {
        TRY(jag_scope_begin());
        int64_t d0 = bi * batch, nb = c->n_docs - d0 < batch ? c->n_docs - d0 : batch;
        int64_t t0 = c->offsets[d0], nt_tokens = c->offsets[d0 + nb] - t0, maxlen = 0;
        int64_t *offs = malloc((size_t)(nb + 1) * sizeof *offs), *lens = malloc((size_t)nb * sizeof *lens);
        for (int64_t i = 0; i <= nb; i++) offs[i] = c->offsets[d0 + i] - t0;
        for (int64_t i = 0; i < nb; i++) {
            lens[i] = offs[i + 1] - offs[i];
            maxlen = lens[i] > maxlen ? lens[i] : maxlen;
        }
        jag_tensor *ids = NULL, *offsets = NULL, *lengths = NULL, *emb = NULL, *nt = NULL, *pad = NULL;
        TRY(jag_from_data(c->tokens + t0, &nt_tokens, 1, JAG_INT64, &ids));
        int64_t nb1 = nb + 1;
        TRY(jag_from_data(offs, &nb1, 1, JAG_INT64, &offsets));
        TRY(jag_from_data(lens, &nb, 1, JAG_INT64, &lengths));
        TRY(jag_embedding(table, ids, &emb));            /* (tokens, D), packed */
        TRY(jag_nested_from_jagged(emb, offsets, NULL, &nt)); /* (B, j, D), no copy */
        TRY(jag_nested_to_padded(nt, 0.0, NULL, 0, &pad)); /* (B, Lmax, D) */
        if (pass == 0 && bi == 0) {
            char text[160];
            snprintf(text, sizeof text, "(%lld, j%lld, %lld)", (long long)nb, (long long)jag_nested_ragged_id(nt),
                     (long long)dim);
            printf("  first batch: a nested tensor of shape %s — values (%lld, %lld) + offsets (%lld);\n"
                   "  padded it would be (%lld, %lld, %lld): %.1f%% of it padding\n",
                   text, (long long)nt_tokens, (long long)dim, (long long)nb + 1, (long long)nb, (long long)maxlen,
                   (long long)dim, 100.0 * (1.0 - (double)nt_tokens / (double)(nb * maxlen)));
        }
        if (pass == 0) {
            real += nt_tokens, padded += nb * maxlen, padded_sq += (double)nb * (double)maxlen * (double)maxlen;
            for (int64_t i = 0; i < nb; i++) real_sq += (double)lens[i] * (double)lens[i];
        }

        double a = now();
        jag_tensor *yn = ffn_forward(&m, nt);
        double b = now();
        jag_tensor *yp = ffn_forward(&m, pad);
        double e = now();
        t_nested[pass] += b - a, t_padded[pass] += e - b;

        /* agree on every real token */
        jag_tensor *back = NULL, *yv = NULL;
        TRY(jag_nested_from_padded(yp, lengths, &back));
        TRY(jag_nested_values(back, &yv));
        jag_tensor *nv = NULL;
        TRY(jag_nested_values(yn, &nv));
        const float *p = jag_data(nv), *q = jag_data(yv);
        for (int64_t i = 0; i < jag_numel(nv); i++) worst = fmax(worst, fabs((double)p[i] - (double)q[i]));
        if (attention) { /* 3b: the real tokens of both agree */
            jag_tensor *ap = NULL, *an = attention_both(wqkv, nt, pad, lens, dim, &t_att_nested[pass], &t_att_padded[pass], &ap);
            jag_tensor *aback = NULL, *av = NULL, *anv = NULL;
            TRY(jag_nested_from_padded(ap, lengths, &aback));
            TRY(jag_nested_values(aback, &av));
            TRY(jag_contiguous(an, &anv));
            jag_tensor *anvv = NULL;
            TRY(jag_nested_values(anv, &anvv));
            const float *x = jag_data(anvv), *y = jag_data(av);
            for (int64_t i = 0; i < jag_numel(anvv); i++) worst_att = fmax(worst_att, fabs((double)x[i] - (double)y[i]));
        }
        free(offs), free(lens);
        jag_scope_end();
    }
    printf("  %lld batches of up to %lld documents, %lld real tokens, %lld padded slots (%.2fx the real tokens);\n"
           "  attention scores: %.2fx the real ones when padded. Each figure: %d passes over every batch, as\n"
           "  tokens/s median (min-max); eager ops, nothing compiled, the first pass's warm-up included.\n",
           (long long)n_batches, (long long)batch, (long long)real, (long long)padded, (double)padded / (double)real,
           padded_sq / real_sq, repeats);
    printf("  feed-forward block (D=%lld, hidden %lld) on every batch:\n", (long long)dim, (long long)4 * dim);
    print_speed("packed (nested):", t_nested, repeats, real);
    print_speed("padded (dense):", t_padded, repeats, real);
    print_speedup(t_nested, t_padded, repeats);
    printf("; largest difference on real tokens %.2e\n", worst);
    printf("    (its work is per slot, so skipping the padding saves in proportion to the slots, %.2fx;\n"
           "    the per-op costs both pay and the machine's other load move the measured figure from it)\n",
           (double)padded / (double)real);
    if (attention) {
        printf("  self-attention, %d heads, q/k/v in torch's (B, H, j, Dh) layout (transposes, no copy):\n", HEADS);
        print_speed("packed (nested, no mask):", t_att_nested, repeats, real);
        print_speed("padded (dense, masked):", t_att_padded, repeats, real);
        print_speedup(t_att_nested, t_att_padded, repeats);
        printf("; largest difference on real tokens %.2e\n", worst_att);
        printf("    (the projections scale with the slots, %.2fx, the scores with their square, %.2fx:\n"
               "    the speed-up can pass the padding ratio here)\n",
               (double)padded / (double)real, padded_sq / real_sq);
    }
    for (int i = 0; i < 3; i++) jag_release(wqkv[i]);
    if (!(worst < 1e-3) || !(worst_att < 1e-3)) {
        fprintf(stderr, "demo: packed and padded results disagree on real tokens\n");
        exit(1);
    }
    jag_release(table), jag_release(m.w1), jag_release(m.b1), jag_release(m.w2), jag_release(m.b2);
}

/* ---- step 4: PyTorch's wrapper-subclass prototype, in jag ------------------ */

static void print_tensor(const char *label, const jag_tensor *t) {
    char buf[2048];
    jag_format(t, buf, sizeof buf);
    printf("%s%s\n", label, buf);
}

static jag_status sin_values_decomp(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                    jag_tensor **outs, void *ctx) {
    (void)cls, (void)op, (void)nargs, (void)ctx;
    jag_tensor *values = NULL, *offsets = NULL, *s = NULL;
    jag_status st = jag_nested_values(args[0].u.t, &values);
    if (!st) st = jag_nested_offsets(args[0].u.t, &offsets);
    if (!st) st = jag_sin(values, &s); /* the user's own kernel would go here */
    if (!st) st = jag_nested_from_jagged(s, offsets, NULL, outs);
    jag_release(values), jag_release(offsets), jag_release(s);
    return st;
}

static jag_status unreachable_cpu(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    (void)op, (void)args, (void)nargs, (void)outs, (void)ctx;
    fprintf(stderr, "demo: the dense kernel ran for a nested input\n");
    return JAG_EINTERNAL;
}

static void nested_subclass_walkthrough(void) {
    TRY(jag_scope_begin());
    jag_tensor *t0 = NULL, *t1 = NULL, *t2 = NULL, *nt = NULL, *s = NULL, *tr = NULL, *p = NULL;
    TRY(jag_from_data((float[]){1, 2, 1, 2}, (int64_t[]){2, 2}, 2, JAG_FLOAT32, &t0));
    TRY(jag_from_data((float[]){3, 4, 5, 3, 4, 5}, (int64_t[]){2, 3}, 2, JAG_FLOAT32, &t1));
    TRY(jag_from_data((float[]){6, 7, 6, 7}, (int64_t[]){2, 2}, 2, JAG_FLOAT32, &t2));
    TRY(jag_nested_from_list((jag_tensor *[]){t0, t1, t2}, 3, JAG_STRIDED, &nt));
    print_tensor("  step 0, a strided nested tensor:\n  ", nt);
    TRY(jag_sin(nt, &s));
    print_tensor("  step 1, sin runs on the packed buffer:\n  ", s);
    TRY(jag_transpose(nt, -1, -2, &tr));
    TRY(jag_bmm(nt, tr, &p));
    print_tensor("  step 2, nt.bmm(nt.transpose(-1, -2)), one GEMM per component:\n  ", p);

    float v[18] = {1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 3, 4, 6, 7, 3, 4, 6, 7};
    jag_tensor *values = NULL, *offsets = NULL, *jt = NULL, *w = NULL, *mm = NULL, *act = NULL;
    TRY(jag_from_data(v, (int64_t[]){9, 2}, 2, JAG_FLOAT32, &values));
    TRY(jag_from_data((int64_t[]){0, 2, 6, 9}, (int64_t[]){4}, 1, JAG_INT64, &offsets));
    TRY(jag_nested_from_jagged(values, offsets, NULL, &jt));
    TRY(jag_ones((int64_t[]){2, 2}, 2, JAG_FLOAT32, &w));
    TRY(jag_mm(jt, w, &mm));
    TRY(jag_silu(mm, &act));
    print_tensor("  step 3, silu(mm(jagged, ones(2, 2))), one GEMM on the (9, 2) values:\n  ", act);

    jag_op_id fw;
    if (jag_op_find("custom_ns::custom_op_fw", &fw) != JAG_OK) {
        TRY(jag_op_define("custom_ns::custom_op_fw(Tensor x) -> Tensor", &fw));
        TRY(jag_op_impl(fw, "CPU", unreachable_cpu, NULL));
        TRY(jag_subclass_register_decomp(jag_subclass_find("nested"), fw, sin_values_decomp, NULL));
    }
    jag_value args[1] = {{.kind = JAG_VAL_TENSOR, .u.t = jt}};
    jag_tensor *out = NULL;
    TRY(jag_op_call(fw, args, 1, &out));
    print_tensor("  step 4a, custom_ns::custom_op_fw on a nested tensor reaches its nested decomposition:\n  ", out);
    /* 4b: gradients through a nested tensor and its packed values */
    jag_tensor *leaf = NULL, *h = NULL, *a2 = NULL, *buf = NULL, *total = NULL, *grad = NULL;
    TRY(jag_nested_from_jagged(values, offsets, NULL, &leaf));
    TRY(jag_set_requires_grad(leaf, true));
    TRY(jag_mm(leaf, w, &h));
    TRY(jag_silu(h, &a2));
    TRY(jag_nested_values(a2, &buf)); /* nested -> packed values, differentiable */
    TRY(jag_sum(buf, NULL, 0, false, &total));
    TRY(jag_backward(total, NULL, false));
    TRY(jag_get_grad(leaf, &grad));
    jag_tensor *go = NULL;
    TRY(jag_nested_offsets(grad, &go));
    print_tensor("  step 4b, d sum(values(silu(nt @ w))) / d nt — a nested gradient:\n  ", grad);
    printf("  (its offsets are the input's offsets object: %s)\n", go == offsets ? "yes" : "no");
    jag_tensor *bad = NULL;
    if (jag_add(nt, jt, 1.0, &bad) != JAG_OK) printf("  and a clear error for mixing layouts:\n    %s\n", jag_last_error());
    jag_scope_end();
}

int main(int argc, char **argv) {
    const char *paths[8];
    int n_paths = 0;
    int64_t batch = 64, dim = 128, repeats = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc && n_paths < 8) paths[n_paths++] = argv[++i];
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atoll(argv[++i]);
        else if (strcmp(argv[i], "--dim") == 0 && i + 1 < argc) dim = atoll(argv[++i]);
        else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) repeats = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--data FILE]... [--batch N] [--dim D] [--repeats R]\n", argv[0]);
            return 2;
        }
    }
    if (batch < 1 || dim < 1 || repeats < 1 || repeats > MAX_REPEATS) {
        fprintf(stderr, "demo: --batch and --dim must be positive, --repeats in 1..%d\n", MAX_REPEATS);
        return 2;
    }
    corpus c;
    char err[512] = "";
    int rc = n_paths ? corpus_load(&c, paths, n_paths, 1, err, sizeof err) : corpus_load_fortunes(&c, err, sizeof err);
    if (rc) {
        fprintf(stderr, "demo: %s\n", err);
        return 1;
    }
    int64_t *lens = malloc((size_t)c.n_docs * sizeof *lens);
    for (int64_t d = 0; d < c.n_docs; d++) lens[d] = c.offsets[d + 1] - c.offsets[d];
    qsort(lens, (size_t)c.n_docs, sizeof *lens, cmp_i64);
    printf("jag %s — ragged batches, packed instead of padded\n\n", JAG_VERSION_STRING);
    printf("1. corpus: %d files (%s ...), %lld documents, %lld tokens, %lld distinct words\n", c.n_files, c.files[0],
           (long long)c.n_docs, (long long)c.n_tokens, (long long)c.vocab_size);
    printf("   document lengths: min %lld, median %lld, max %lld tokens\n\n", (long long)lens[0],
           (long long)lens[c.n_docs / 2], (long long)lens[c.n_docs - 1]);
    free(lens);
    printf("2-3. embeddings as nested tensors, a residual feed-forward block and self-attention, packed vs padded\n");
    run_batches(&c, batch, dim, (int)repeats);
    printf("\n4. PyTorch's NestedTensor wrapper-subclass prototype, step by step\n");
    nested_subclass_walkthrough();
    corpus_free(&c);
    return 0;
}
