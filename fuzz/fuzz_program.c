/* fuzz_program — compiled programs fed inputs that may not fit them.
 *
 * Three programs are compiled once, from fixed example inputs: the step of
 * examples/nested_subclass_walkthrough.py (silu(sin(x) @ w) on a jagged x
 * and a dense w), a fused pointwise
 * chain on a dense tensor, and the walkthrough's step with w requiring grad (a
 * forward and a backward program). Two compiled functions (jag_compile)
 * live across the inputs, so that later inputs generalize the programs of
 * earlier ones: one views to constants (heads of 3), one to a size read
 * from its input (a program must never serve an input where that size, or
 * one that was equal to it in every trace, differs). Each input of the
 * fuzzer picks a program or a function and builds its inputs from the
 * bytes: any count, dense, jagged (with or without holes) or strided
 * tensors of any dtype and small shapes, with requires_grad or not. Every run must either fail with a status and a
 * message, writing no output, or succeed with the result eager code gives
 * on the same inputs; running it again on them must leave exactly as many
 * tensors alive (nothing leaks, a steady run allocates nothing new). */
#include "fuzz.h"

#include <math.h>

static jag_status walkthrough_step(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *s = NULL, *m = NULL;
    jag_status st = jag_sin(in[0], &s);
    if (!st) st = jag_matmul(s, in[1], &m);
    if (!st) st = jag_silu(m, out);
    jag_release(s), jag_release(m);
    return st;
}

static jag_status chain(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL, *c = NULL;
    jag_status st = jag_sigmoid(in[0], &a);
    if (!st) st = jag_mul_scalar(a, 1.5, &b);
    if (!st) st = jag_add(b, in[0], 1.0, &c);
    if (!st) st = jag_tanh(c, out);
    jag_release(a), jag_release(b), jag_release(c);
    return st;
}

/* x (or a nested x's values) viewed as (-1, 2, 3), summed over the last dim */
static jag_status heads(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n_out;
    if (n != 1) return jag_sin(NULL, out); /* a wrong count: sin's error */
    jag_tensor *v = NULL, *r = NULL, *s = NULL;
    int d2[1] = {2};
    jag_status st = jag_is_nested(in[0]) ? jag_nested_values(in[0], &v) : (v = jag_retain(in[0]), JAG_OK);
    if (!st) st = jag_view(v, (int64_t[]){-1, 2, 3}, 3, &r);
    if (!st) st = jag_sum(r, d2, 1, false, &s);
    if (!st) st = jag_mul_scalar(s, 0.5, out);
    jag_release(v), jag_release(r), jag_release(s);
    return st;
}

/* x viewed as (-1, its last size) (a plain x of at least one dim): an
 * entry read from an input size */
static jag_status flat(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n_out;
    if (n != 1) return jag_sin(NULL, out);
    if (jag_is_nested(in[0]) || jag_ndim(in[0]) < 1) return jag_sin(in[0], out);
    jag_tensor *r = NULL;
    jag_status st = jag_view(in[0], (int64_t[]){-1, jag_size(in[0], -1)}, 2, &r);
    if (!st) st = jag_mul_scalar(r, 2.0, out);
    jag_release(r);
    return st;
}

typedef struct {
    jag_traced_fn fn;
    int n_in;
    jag_program *p;
    jag_compiled *c; /* a compiled function instead of p */
} target;

static target targets[5] = {{walkthrough_step, 2, NULL, NULL}, {chain, 1, NULL, NULL}, {walkthrough_step, 2, NULL, NULL},
                            {heads, 1, NULL, NULL}, {flat, 1, NULL, NULL}};

static jag_tensor *jagged_example(void) {
    jag_tensor *v = NULL, *o = NULL, *nt = NULL;
    int64_t vs[2] = {5, 3}, n = 3, off[3] = {0, 2, 5};
    if (jag_ones(vs, 2, JAG_FLOAT32, &v) || jag_from_data(off, &n, 1, JAG_INT64, &o) ||
        jag_nested_from_jagged(v, o, NULL, &nt))
        abort();
    jag_release(v), jag_release(o);
    return nt;
}

static void setup(void) {
    jag_tensor *x = jagged_example(), *w = NULL, *d = NULL;
    if (jag_ones((int64_t[]){3, 4}, 2, JAG_FLOAT32, &w) || jag_ones((int64_t[]){6, 5}, 2, JAG_FLOAT32, &d)) abort();
    jag_tensor *in0[2] = {x, w}, *in1[1] = {d};
    jag_tensor *const *ins[3] = {in0, in1, in0};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && jag_set_requires_grad(w, true)) abort();
        jag_trace *t = NULL;
        if (jag_trace_function(targets[i].fn, NULL, ins[i], targets[i].n_in, NULL, 1, &t) ||
            jag_trace_compile(t, JAG_PASSES_ALL, &targets[i].p))
            abort();
        jag_trace_free(t);
    }
    for (int i = 3; i < 5; i++)
        if (jag_compile(targets[i].fn, NULL, 1, JAG_PASSES_ALL, &targets[i].c)) abort();
    jag_release(x), jag_release(w), jag_release(d);
}

/* A tensor from the bytes: dense, jagged (holes sometimes) or strided. */
static jag_tensor *make_input(fuzz_reader *r) {
    jag_dtype dtype = fz_u8(r) % 4 == 0 ? (jag_dtype)(fz_u8(r) % JAG_DTYPE_COUNT) : JAG_FLOAT32;
    uint8_t how = fz_u8(r) % 4;
    int64_t rows = fz_u8(r) % 7, cols = 1 + fz_u8(r) % 5;
    jag_tensor *f = NULL, *v = NULL, *out = NULL;
    int ndim = how == 0 ? fz_u8(r) % 4 : 2;
    int64_t sizes[3] = {rows, cols, 1 + fz_u8(r) % 3};
    if (jag_empty(sizes, ndim, JAG_FLOAT64, &f)) return NULL;
    double *p = jag_data(f);
    for (int64_t i = 0; i < jag_numel(f); i++) p[i] = fz_double(r);
    jag_status st = jag_to_dtype(f, dtype, &v);
    jag_release(f);
    if (st) return NULL;
    if (how == 0) return v;
    int64_t b = 1 + fz_u8(r) % 3, off[4] = {0}, len[3];
    for (int64_t i = 0; i < b; i++) {
        int64_t step = i == b - 1 ? rows - off[i] : fz_u8(r) % (rows - off[i] + 1);
        off[i + 1] = off[i] + step;
        len[i] = step ? fz_u8(r) % (step + 1) : 0;
    }
    jag_tensor *o = NULL, *l = NULL;
    int64_t nb1 = b + 1;
    if (!jag_from_data(off, &nb1, 1, JAG_INT64, &o) && (how != 2 || !jag_from_data(len, &b, 1, JAG_INT64, &l)))
        (void)jag_nested_from_jagged(v, o, l, &out);
    if (out && how == 3) { /* the strided layout of the same components */
        jag_tensor *s = NULL;
        if (jag_nested_to_layout(out, JAG_STRIDED, &s) == JAG_OK) jag_release(out), out = s;
    }
    jag_release(o), jag_release(l), jag_release(v);
    return out;
}

static bool same(const jag_tensor *a, const jag_tensor *b) {
    jag_tensor *pa = NULL, *pb = NULL, *ca = NULL, *cb = NULL;
    bool ok = false;
    if (jag_is_nested(a) != jag_is_nested(b)) return false;
    if (jag_is_nested(a)) {
        if (jag_nested_to_padded(a, 0.0, NULL, 0, &pa) || jag_nested_to_padded(b, 0.0, NULL, 0, &pb)) goto done;
        a = pa, b = pb;
    }
    if (jag_ndim(a) != jag_ndim(b) || jag_numel(a) != jag_numel(b)) goto done;
    if (jag_to_dtype(a, JAG_FLOAT64, &ca) || jag_to_dtype(b, JAG_FLOAT64, &cb)) goto done;
    {
        jag_tensor *da = NULL, *db = NULL;
        if (jag_contiguous(ca, &da) || jag_contiguous(cb, &db)) {
            jag_release(da), jag_release(db);
            goto done;
        }
        const double *x = jag_data(da), *y = jag_data(db);
        ok = true;
        for (int64_t i = 0; i < jag_numel(da) && ok; i++)
            ok = x[i] == y[i] || (isnan(x[i]) && isnan(y[i])) || fabs(x[i] - y[i]) <= 1e-4 * fmax(1.0, fabs(y[i]));
        jag_release(da), jag_release(db);
    }
done:
    jag_release(pa), jag_release(pb), jag_release(ca), jag_release(cb);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) setup(), ready = 1;
    fuzz_reader r = {data, size};
    target *t = &targets[fz_u8(&r) % 5];
    int n = t->n_in;
    uint8_t c = fz_u8(&r);
    if (c % 8 == 0) n = c / 8 % 4; /* sometimes a wrong count */
    jag_tensor *in[3] = {NULL, NULL, NULL};
    bool built = true;
    for (int i = 0; i < n; i++) {
        in[i] = make_input(&r);
        if (!in[i]) built = false;
        else if (fz_u8(&r) % 3 == 0 && jag_dtype_is_floating(jag_tensor_dtype(in[i])))
            (void)jag_set_requires_grad(in[i], true);
    }
    if (built) {
        /* twice on the same inputs: the same answer, and the second run (its
         * buffers kept from the first) leaves exactly as many tensors alive:
         * nothing leaks and a steady run allocates nothing new */
        long after_first = 0;
        for (int pass = 0; pass < 2; pass++) {
            jag_tensor *out = NULL;
            jag_clear_error();
            jag_status st = t->c ? jag_compiled_call(t->c, in, n, &out, 1) : jag_program_run(t->p, in, n, &out, 1);
            if (st != JAG_OK) {
                FUZZ_CHECK(st > JAG_OK && st < JAG_STATUS_COUNT && jag_last_error()[0] && out == NULL);
            } else {
                jag_tensor *want = NULL;
                bool prev = jag_set_grad_enabled(false);
                jag_status est = t->fn(NULL, in, n, &want, 1); /* eager on the same inputs */
                jag_set_grad_enabled(prev);
                FUZZ_CHECK(est == JAG_OK && same(out, want));
                jag_release(want);
                jag_release(out);
            }
            if (pass == 0) after_first = jag__live_tensors();
            else FUZZ_CHECK(jag__live_tensors() == after_first);
        }
    }
    for (int i = 0; i < 3; i++) jag_release(in[i]);
    return 0;
}
