/* fuzz_ops — the dispatcher fed arbitrary ops and arguments.
 *
 * The bytes choose an op id (a few past the table too), an argument count
 * (usually the op's own), and each argument: a dense, jagged (sometimes
 * transposed so that its ragged dim is 2) or strided tensor of any dtype
 * and a small shape, an int, a double, a bool, an int
 * list, a tensor list or none. Every call must either succeed or fail with a
 * status and a message, leaving no tensor alive; when a unary pointwise op
 * succeeds on a nested tensor, each component of the result must equal the
 * op applied to that component alone (the per-component reference). */
#include "fuzz.h"

#include <math.h>

/* at least the most inputs an op takes (varlen_attention_backward: 12) */
#define MAX_ARGS 16

typedef struct {
    jag_tensor *owned[64];
    int n_owned;
    int64_t ints[MAX_ARGS][4];
    jag_tensor *lists[MAX_ARGS][3];
} pool;

/* The pool owns t (NULL stays NULL; past its capacity t is dropped). */
static jag_tensor *keep(pool *p, jag_tensor *t) {
    if (!t) return NULL;
    if (p->n_owned == 64) {
        jag_release(t);
        return NULL;
    }
    return p->owned[p->n_owned++] = t;
}

/* A dense tensor of `dtype` and `sizes` with values from the bytes. */
static jag_tensor *dense(fuzz_reader *r, jag_dtype dtype, const int64_t *sizes, int ndim) {
    jag_tensor *t = NULL, *f = NULL;
    if (jag_empty(sizes, ndim, JAG_FLOAT64, &f)) return NULL;
    double *p = jag_data(f);
    for (int64_t i = 0; i < jag_numel(f); i++) p[i] = fz_double(r);
    jag_status st = jag_to_dtype(f, dtype, &t);
    jag_release(f);
    return st ? NULL : t;
}

static jag_tensor *make_tensor(fuzz_reader *r, pool *p) {
    jag_dtype dtype = (jag_dtype)(fz_u8(r) % JAG_DTYPE_COUNT);
    uint8_t how = fz_u8(r) % 4;
    if (how <= 1) { /* dense, sometimes non-contiguous */
        int ndim = fz_u8(r) % 4;
        int64_t sizes[4];
        for (int d = 0; d < ndim; d++) sizes[d] = fz_u8(r) % 4;
        jag_tensor *t = dense(r, dtype, sizes, ndim);
        if (t && how == 1 && ndim >= 2) {
            jag_tensor *v = NULL;
            if (jag_transpose(t, 0, 1, &v) == JAG_OK) jag_release(t), t = v;
        }
        return keep(p, t);
    }
    /* nested: jagged (how 2) or strided (how 3), 1..3 components */
    int b = 1 + fz_u8(r) % 3, cdims = 1 + fz_u8(r) % 2;
    int64_t trailing = 1 + fz_u8(r) % 3;
    jag_tensor *items[3] = {NULL, NULL, NULL}, *nt = NULL;
    for (int i = 0; i < b; i++) {
        int64_t sizes[2] = {fz_u8(r) % 4, how == 2 ? trailing : fz_u8(r) % 4};
        items[i] = dense(r, dtype, sizes, cdims);
    }
    if (items[0] && (b < 2 || items[1]) && (b < 3 || items[2]))
        (void)jag_nested_from_list(items, b, how == 2 ? JAG_JAGGED : JAG_STRIDED, &nt);
    for (int i = 0; i < b; i++) jag_release(items[i]);
    if (nt && how == 2 && cdims == 2 && (fz_u8(r) & 1)) { /* (B, D, j): the ragged dim moved to 2 */
        jag_tensor *t = NULL;
        if (jag_transpose(nt, 1, 2, &t) == JAG_OK) jag_release(nt), nt = t;
    }
    return keep(p, nt);
}

static jag_value make_arg(fuzz_reader *r, pool *p, int slot) {
    jag_value v = {.kind = JAG_VAL_NONE};
    switch (fz_u8(r) % 12) {
    case 0: case 1: case 2: case 3: case 4:
        v.u.t = make_tensor(r, p);
        v.kind = v.u.t ? JAG_VAL_TENSOR : JAG_VAL_NONE;
        break;
    case 5: v.kind = JAG_VAL_INT, v.u.i = (int64_t)(fz_u8(r) % 10) - 3; break;
    case 6: v.kind = JAG_VAL_DOUBLE, v.u.d = fz_double(r); break;
    case 7: v.kind = JAG_VAL_BOOL, v.u.b = fz_u8(r) & 1; break;
    case 8: case 9: {
        int n = fz_u8(r) % 5;
        for (int i = 0; i < n; i++) p->ints[slot][i] = (int64_t)(fz_u8(r) % 9) - 3;
        v.kind = JAG_VAL_INTS, v.u.ints.v = p->ints[slot], v.u.ints.n = n;
        break;
    }
    case 10: {
        int n = 1 + fz_u8(r) % 3, k = 0;
        for (int i = 0; i < n; i++) {
            jag_tensor *t = make_tensor(r, p);
            if (t) p->lists[slot][k++] = t;
        }
        v.kind = JAG_VAL_TENSORS, v.u.tensors.v = p->lists[slot], v.u.tensors.n = k;
        break;
    }
    default: break; /* none */
    }
    return v;
}

static bool close_enough(double a, double b) {
    if (a == b || (isnan(a) && isnan(b))) return true;
    return fabs(a - b) <= 1e-5 * fmax(1.0, fabs(b));
}

/* op(nested x) == nested(op(component_i)) for a unary pointwise op. */
static void check_per_component(jag_op_id op, const jag_tensor *x, const jag_tensor *y) {
    FUZZ_CHECK(jag_is_nested(y) && jag_nested_batch_size(y) == jag_nested_batch_size(x));
    jag_tensor *xs[3], *ys[3];
    int nx = 0, ny = 0;
    FUZZ_CHECK(jag_nested_unbind(x, xs, 3, &nx) == JAG_OK && jag_nested_unbind(y, ys, 3, &ny) == JAG_OK && nx == ny);
    for (int i = 0; i < nx; i++) {
        jag_value a = {.kind = JAG_VAL_TENSOR};
        a.u.t = xs[i];
        jag_tensor *ref = NULL;
        FUZZ_CHECK(jag_op_call(op, &a, 1, &ref) == JAG_OK);
        FUZZ_CHECK(jag_tensor_dtype(ref) == jag_tensor_dtype(ys[i]) && jag_ndim(ref) == jag_ndim(ys[i]));
        int64_t n = jag_numel(ref), idx[JAG_MAX_DIMS];
        FUZZ_CHECK(n == jag_numel(ys[i]));
        for (int64_t f = 0; f < n; f++) {
            int64_t rem = f;
            for (int d = jag_ndim(ref) - 1; d >= 0; d--) idx[d] = rem % jag_size(ref, d), rem /= jag_size(ref, d);
            double u = 0, w = 0;
            FUZZ_CHECK(jag_item_at(ref, idx, &u) == JAG_OK && jag_item_at(ys[i], idx, &w) == JAG_OK);
            FUZZ_CHECK(close_enough(w, u));
        }
        jag_release(ref);
    }
    for (int i = 0; i < nx; i++) jag_release(xs[i]), jag_release(ys[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader r = {data, size};
    long live = jag__live_tensors();
    int n_ops = 0;
    while (jag_op_name(n_ops)) n_ops++;
    jag_op_id op = (jag_op_id)(((unsigned)fz_u8(&r) << 8 | fz_u8(&r)) % (unsigned)(n_ops + 2));
    int nargs = jag_op_num_inputs(op);
    if (nargs < 0) nargs = 1;
    if (nargs > MAX_ARGS) nargs = MAX_ARGS;
    uint8_t c = fz_u8(&r);
    if (c % 8 == 0) nargs = (nargs + 1 + c / 8) % (MAX_ARGS + 1); /* sometimes a wrong count */
    bool grad = fz_u8(&r) & 1;
    pool p = {.n_owned = 0};
    jag_value args[MAX_ARGS];
    for (int i = 0; i < nargs; i++) {
        args[i] = make_arg(&r, &p, i);
        if (grad && args[i].kind == JAG_VAL_TENSOR && jag_dtype_is_floating(jag_tensor_dtype(args[i].u.t)))
            (void)jag_set_requires_grad((jag_tensor *)args[i].u.t, true);
    }
    jag_tensor *outs[4] = {NULL, NULL, NULL, NULL};
    jag_clear_error();
    jag_status st = jag_op_call(op, args, nargs, outs);
    if (st != JAG_OK) {
        FUZZ_CHECK(st > JAG_OK && st < JAG_STATUS_COUNT && jag_last_error()[0]);
        for (int i = 0; i < 4; i++) FUZZ_CHECK(outs[i] == NULL);
    } else {
        int n_out = jag_op_num_outputs(op);
        FUZZ_CHECK(n_out >= 1 && n_out <= 4);
        for (int i = 0; i < n_out; i++) FUZZ_CHECK(outs[i] != NULL);
        if ((jag_op_tags(op) & JAG_TAG_POINTWISE) && jag_op_num_inputs(op) == 1 && nargs == 1 &&
            args[0].kind == JAG_VAL_TENSOR && jag_is_nested(args[0].u.t))
            check_per_component(op, args[0].u.t, outs[0]);
        /* a result is printable and (for a one-element float result that
         * needs a gradient) differentiable */
        char buf[256];
        jag_format(outs[0], buf, sizeof buf);
        if (grad && jag_requires_grad(outs[0]) && !jag_is_nested(outs[0]) && jag_numel(outs[0]) == 1)
            (void)jag_backward(outs[0], NULL, false);
        for (int i = 0; i < n_out; i++) jag_release(outs[i]);
    }
    for (int i = 0; i < p.n_owned; i++) jag_release(p.owned[i]);
    FUZZ_CHECK(jag__live_tensors() == live);
    return 0;
}
