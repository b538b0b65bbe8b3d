/* gradcheck.c — jag_gradcheck: every entry of the analytic Jacobian (one
 * jag_backward per output element, with a one-hot gradient) against central
 * finite differences (fn run twice per input element, grad mode off).
 *
 * Elements of a tensor are addressed in one fixed order, the same for an
 * input, its gradient, an output and the gradient seeded into it: dense
 * tensors row-major through their strides, jagged nested tensors their
 * values row-major (holes included: the ops compute them too), strided
 * nested tensors component by component, each row-major. */
#include "autograd.h"
#include "../subclass/nested.h"

#include <math.h>

static const char *const OP = "jag_gradcheck";

/* The float64 elements of a tensor, as addresses. */
typedef struct {
    double **p;
    int64_t n;
} elems;

static void elems_free(elems *e) {
    free(e->p);
    e->p = NULL;
    e->n = 0;
}

/* Append the addresses of plain t's elements, row-major. */
static void push_plain(const jag_tensor *t, elems *e) {
    int64_t n = jag_numel(t);
    if (n == 0) return;
    double *base = (double *)jag__ptr(t);
    int64_t idx[JAG_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
        e->p[e->n++] = base + off;
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

/* `what` and `which` name the tensor in messages ("input", 2). */
static jag_status elems_of(const jag_tensor *t, const char *what, int which, elems *e) {
    e->p = NULL, e->n = 0;
    if (t->dtype != JAG_FLOAT64)
        return jag__error(JAG_EDTYPE, "%s: %s %d has dtype %s, expected float64", OP, what, which, jag_dtype_name(t->dtype));
    nested_state *s = jag__nested(t);
    if (t->subclass && !s)
        return jag__error(JAG_ENOTIMPL, "%s: %s %d is a %s tensor; only dense and nested tensors are supported", OP, what,
                          which, jag_subclass_name(t->subclass));
    const jag_tensor *plain = s ? (s->layout == JAG_JAGGED ? s->values : s->buffer) : t;
    if (!plain->storage) return jag__error(JAG_EINVAL, "%s: %s %d has no data (a meta tensor)", OP, what, which);
    jag_tensor **comps = NULL;
    int64_t total = 0;
    jag_status st = JAG_OK;
    if (s && s->layout == JAG_STRIDED) {
        comps = calloc((size_t)(s->batch ? s->batch : 1), sizeof *comps);
        if (!comps) return jag__error(JAG_ENOMEM, "%s: out of memory", OP);
        if ((st = jag__nested_unbind(s, comps))) {
            free(comps);
            return st;
        }
        for (int64_t b = 0; b < s->batch; b++) total += jag_numel(comps[b]);
    } else {
        total = jag_numel(s ? s->values : t);
    }
    e->p = malloc((size_t)(total ? total : 1) * sizeof *e->p);
    if (!e->p) st = jag__error(JAG_ENOMEM, "%s: out of memory for %lld elements of %s %d", OP, (long long)total, what, which);
    else if (comps)
        for (int64_t b = 0; b < s->batch; b++) push_plain(comps[b], e);
    else push_plain(s ? s->values : t, e);
    if (comps) {
        for (int64_t b = 0; b < s->batch; b++) jag_release(comps[b]);
        free(comps);
    }
    return st;
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (double *const *)a, y = (uintptr_t) * (double *const *)b;
    return x < y ? -1 : x > y;
}

/* An input whose elements share memory (an expanded view) cannot be
 * perturbed one element at a time. */
static jag_status check_distinct(const elems *e, int which) {
    if (e->n < 2) return JAG_OK;
    double **s = malloc((size_t)e->n * sizeof *s);
    if (!s) return jag__error(JAG_ENOMEM, "%s: out of memory", OP);
    memcpy(s, e->p, (size_t)e->n * sizeof *s);
    qsort(s, (size_t)e->n, sizeof *s, cmp_ptr);
    bool dup = false;
    for (int64_t k = 1; k < e->n && !dup; k++) dup = s[k] == s[k - 1];
    free(s);
    return dup ? jag__error(JAG_EINVAL, "%s: input %d has elements that share memory (an expanded view); clone it first", OP, which)
               : JAG_OK;
}

/* Run fn with grad mode off and copy its output's elements into vals
 * (n_out of them, or fail: the structure changed). */
static jag_status run_numeric(jag_gradcheck_fn fn, void *ctx, jag_tensor *const *inputs, int n_inputs, double *vals,
                              int64_t n_out) {
    jag_tensor *o = NULL;
    jag_status st = fn(inputs, n_inputs, &o, ctx);
    if (st) return st;
    if (!o) return jag__error(JAG_EINVAL, "%s: fn returned JAG_OK but no output", OP);
    elems e;
    st = elems_of(o, "output", 0, &e);
    if (!st && e.n != n_out)
        st = jag__error(JAG_EINVAL, "%s: fn's output has %lld elements for a perturbed input, %lld before", OP, (long long)e.n,
                        (long long)n_out);
    for (int64_t k = 0; !st && k < n_out; k++) vals[k] = *e.p[k];
    elems_free(&e);
    jag_release(o);
    return st;
}

jag_status jag_gradcheck(jag_gradcheck_fn fn, void *ctx, jag_tensor *const *inputs, int n_inputs, double eps, double atol,
                         double rtol) {
    if (!fn) return jag__error(JAG_EINVAL, "%s: argument 'fn' is NULL", OP);
    if (n_inputs < 1 || !inputs)
        return jag__error(JAG_EINVAL, "%s: argument 'inputs' is empty (%d), expected at least one tensor", OP, n_inputs);
    if (!(eps > 0) || !isfinite(eps)) return jag__error(JAG_EINVAL, "%s: argument 'eps' is %g, expected a finite step > 0", OP, eps);
    if (!(atol >= 0) || !(rtol >= 0))
        return jag__error(JAG_EINVAL, "%s: arguments 'atol' (%g) and 'rtol' (%g) must be >= 0", OP, atol, rtol);
    bool any = false;
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i]) return jag__error(JAG_EINVAL, "%s: input %d is NULL", OP, i);
        for (int j = 0; j < i; j++)
            if (inputs[j] == inputs[i])
                return jag__error(JAG_EINVAL, "%s: input %d is the same tensor as input %d; pass it once", OP, i, j);
        if (!inputs[i]->requires_grad) continue;
        if (inputs[i]->dtype != JAG_FLOAT64)
            return jag__error(JAG_EDTYPE, "%s: input %d has dtype %s, expected float64", OP, i, jag_dtype_name(inputs[i]->dtype));
        any = true;
    }
    if (!any) return jag__error(JAG_EINVAL, "%s: no input requires grad; mark them with jag_set_requires_grad", OP);

    jag__enter();
    bool prev_mode = jag_is_grad_enabled();
    jag_status st = JAG_OK;
    elems *in_e = calloc((size_t)n_inputs, sizeof *in_e);
    double **num = calloc((size_t)n_inputs, sizeof *num), **ana = calloc((size_t)n_inputs, sizeof *ana);
    jag_tensor **saved = calloc((size_t)n_inputs, sizeof *saved);
    jag_tensor *out = NULL;
    elems out_e = {0};
    double *plus = NULL, *minus = NULL;
    if (!in_e || !num || !ana || !saved) {
        st = jag__error(JAG_ENOMEM, "%s: out of memory", OP);
        goto done;
    }
    /* the inputs' own gradients are put back at the end */
    for (int i = 0; i < n_inputs; i++) saved[i] = inputs[i]->grad, inputs[i]->grad = NULL;
    for (int i = 0; i < n_inputs && !st; i++)
        if (inputs[i]->requires_grad && !(st = elems_of(inputs[i], "input", i, &in_e[i]))) st = check_distinct(&in_e[i], i);
    if (st) goto done;

    /* the graph, once */
    jag_set_grad_enabled(true);
    st = fn(inputs, n_inputs, &out, ctx);
    jag_set_grad_enabled(prev_mode);
    if (!st && !out) st = jag__error(JAG_EINVAL, "%s: fn returned JAG_OK but no output", OP);
    if (!st) st = elems_of(out, "output", 0, &out_e);
    if (st) goto done;
    int64_t n_out = out_e.n;
    for (int i = 0; i < n_inputs && !st; i++) {
        int64_t cells;
        if (!inputs[i]->requires_grad) continue;
        if (!jag__mul_ok(n_out, in_e[i].n, &cells) || cells > ((int64_t)1 << 28)) {
            st = jag__error(JAG_EINVAL, "%s: the Jacobian of input %d is %lld x %lld, too large to check", OP, i,
                            (long long)n_out, (long long)in_e[i].n);
            break;
        }
        num[i] = calloc((size_t)(cells ? cells : 1), sizeof **num);
        ana[i] = calloc((size_t)(cells ? cells : 1), sizeof **ana);
        if (!num[i] || !ana[i]) st = jag__error(JAG_ENOMEM, "%s: out of memory", OP);
    }
    plus = malloc((size_t)(n_out ? n_out : 1) * sizeof *plus);
    minus = malloc((size_t)(n_out ? n_out : 1) * sizeof *minus);
    if (!st && (!plus || !minus)) st = jag__error(JAG_ENOMEM, "%s: out of memory", OP);
    if (st) goto done;

    /* numeric: J[o][e] = (f(x + eps e) - f(x - eps e))[o] / 2 eps */
    jag_set_grad_enabled(false);
    for (int i = 0; i < n_inputs && !st; i++) {
        int64_t n_in = in_e[i].n;
        for (int64_t e = 0; e < n_in && inputs[i]->requires_grad && !st; e++) {
            double *x = in_e[i].p[e], orig = *x;
            *x = orig + eps;
            st = run_numeric(fn, ctx, inputs, n_inputs, plus, n_out);
            *x = orig - eps;
            if (!st) st = run_numeric(fn, ctx, inputs, n_inputs, minus, n_out);
            *x = orig;
            for (int64_t o = 0; !st && o < n_out; o++) num[i][o * n_in + e] = (plus[o] - minus[o]) / (2 * eps);
        }
    }
    jag_set_grad_enabled(prev_mode);
    if (st) goto done;

    /* analytic: row o of J is the inputs' gradient for a one-hot seed at o */
    for (int64_t o = 0; o < n_out && !st && out->requires_grad; o++) {
        jag_tensor *seed = NULL;
        elems se = {0};
        if (!(st = jag_zeros_like(out, &seed)) && !(st = elems_of(seed, "output", 0, &se))) {
            *se.p[o] = 1.0;
            for (int i = 0; i < n_inputs; i++) jag_zero_grad(inputs[i]);
            st = jag_backward(out, seed, true);
        }
        for (int i = 0; i < n_inputs && !st; i++) {
            if (!inputs[i]->requires_grad || !inputs[i]->grad) continue;
            elems ge;
            if (!(st = elems_of(inputs[i]->grad, "gradient of input", i, &ge)) && ge.n != in_e[i].n)
                st = jag__error(JAG_EINVAL, "%s: the gradient of input %d has %lld elements, the input %lld", OP, i,
                                (long long)ge.n, (long long)in_e[i].n);
            for (int64_t e = 0; !st && e < in_e[i].n; e++) ana[i][o * in_e[i].n + e] = *ge.p[e];
            elems_free(&ge);
        }
        elems_free(&se);
        jag_release(seed);
    }
    if (st) goto done;

    /* compare every entry; report the worst */
    int64_t n_bad = 0, n_all = 0, w_e = -1, w_o = -1;
    int w_i = -1;
    double worst = -INFINITY, w_a = 0, w_n = 0;
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i]->requires_grad) continue;
        int64_t n_in = in_e[i].n;
        for (int64_t o = 0; o < n_out; o++)
            for (int64_t e = 0; e < n_in; e++) {
                double a = ana[i][o * n_in + e], n = num[i][o * n_in + e];
                double excess = fabs(a - n) - (atol + rtol * fabs(n));
                if (isnan(a) != isnan(n) || (isnan(excess) && !(isnan(a) && isnan(n)))) excess = INFINITY;
                else if (isnan(a) && isnan(n)) excess = -INFINITY;
                n_all++;
                if (excess > 0) n_bad++;
                if (excess > worst) worst = excess, w_i = i, w_e = e, w_o = o, w_a = a, w_n = n;
            }
    }
    if (n_bad)
        st = jag__error(JAG_EINVAL,
                        "%s: input %d, element %lld (output element %lld): analytic %.10g, numeric %.10g, |difference| %.3g "
                        "exceeds atol + rtol * |numeric| = %.3g (%lld of %lld Jacobian entries fail)",
                        OP, w_i, (long long)w_e, (long long)w_o, w_a, w_n, fabs(w_a - w_n), atol + rtol * fabs(w_n),
                        (long long)n_bad, (long long)n_all);

done:
    jag_set_grad_enabled(prev_mode);
    if (saved)
        for (int i = 0; i < n_inputs; i++) {
            jag_zero_grad(inputs[i]);
            inputs[i]->grad = saved[i];
        }
    if (in_e)
        for (int i = 0; i < n_inputs; i++) elems_free(&in_e[i]);
    if (num)
        for (int i = 0; i < n_inputs; i++) free(num[i]);
    if (ana)
        for (int i = 0; i < n_inputs; i++) free(ana[i]);
    elems_free(&out_e);
    jag_release(out);
    free(in_e), free(num), free(ana), free(saved), free(plus), free(minus);
    return jag__leave(st, NULL, 0);
}
