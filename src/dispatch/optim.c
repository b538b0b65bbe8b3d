/*
 * optim.c — the optimizers of the public API (jag.h, "Optimizers"): the
 * functional updates jag_optim_sgd_update / jag_optim_adam_update over lists
 * of tensors, the jag_optimizer object built on them (parameters, state,
 * step counts), its checkpoints (jag_optim_save / jag_optim_load: one
 * safetensors file with the parameters, the state and a JSON description)
 * and jag_clip_grad_norm. The element loops are the fused
 * kernels of src/cpu/optim.c.
 *
 * Every update validates all its tensors and makes every buffer it needs
 * (contiguous gradients, new state) before it writes anything, so a refused
 * or failed call changes nothing. Parameters and state are then written in
 * place through their data and their versions bumped, as the in-place ops
 * do; the update is never recorded by autograd (torch's optimizers step
 * under no_grad).
 */
#include "../cpu/optim.h"
#include "../cpu/kernels.h" /* jag__copy_into, jag__fill */

#include "../io/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>


/* ---- checks ------------------------------------------------------------------ */

static bool float_dtype(jag_dtype d) { return d == JAG_FLOAT32 || d == JAG_FLOAT64; }

/* params[i] may be written by an optimizer: a live, plain, contiguous,
 * writable float leaf. */
static jag_status check_param(const char *op, int i, const jag_tensor *p) {
    char arg[32];
    snprintf(arg, sizeof arg, "params[%d]", i);
    jag_status st = jag__check_live(op, arg, p);
    if (st) return st;
    if (jag__is_subclass(p))
        return jag__error(JAG_ENOTIMPL, "%s: argument '%s' is a subclass (nested) tensor; expected a plain tensor", op,
                          arg);
    if (jag__is_meta(p)) return jag__error(JAG_EINVAL, "%s: argument '%s' is a meta tensor (no data)", op, arg);
    if (!float_dtype(p->dtype))
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s; expected float32 or float64", op, arg,
                          jag_dtype_name(p->dtype));
    if (p->grad_fn)
        return jag__error(JAG_EINVAL, "%s: argument '%s' is the output of %s; expected a leaf tensor", op, arg,
                          p->grad_fn ? jag__grad_fn_name(p) : "an op");
    if (!jag_is_contiguous(p))
        return jag__error(JAG_EINVAL, "%s: argument '%s' is not contiguous; expected a contiguous tensor", op, arg);
    return JAG_OK;
}

/* A tensor that goes with params[i] (its gradient or a state buffer): live,
 * plain, p's dtype and shape; `state` ones must also be contiguous and
 * writable. */
static jag_status check_like(const char *op, const char *what, int i, const jag_tensor *t, const jag_tensor *p,
                             bool state) {
    char arg[48], a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
    snprintf(arg, sizeof arg, "%s[%d]", what, i);
    jag_status st = jag__check_live(op, arg, t);
    if (st) return st;
    if (jag__is_subclass(t) || jag__is_meta(t))
        return jag__error(JAG_EINVAL, "%s: argument '%s' must be a plain tensor with data", op, arg);
    if (t->dtype != p->dtype)
        return jag__error(JAG_EDTYPE, "%s: argument '%s' has dtype %s; expected params[%d]'s %s", op, arg,
                          jag_dtype_name(t->dtype), i, jag_dtype_name(p->dtype));
    if (t->ndim != p->ndim || memcmp(t->sizes, p->sizes, sizeof(int64_t) * (size_t)p->ndim))
        return jag__error(JAG_ESHAPE, "%s: argument '%s' has shape %s; expected params[%d]'s %s", op, arg,
                          jag__shape_str(t->sizes, t->ndim, a, sizeof a), i,
                          jag__shape_str(p->sizes, p->ndim, b, sizeof b));
    if (state && !jag_is_contiguous(t))
        return jag__error(JAG_EINVAL, "%s: argument '%s' is not contiguous", op, arg);
    if (state && jag__is_read_only(t)) return jag__error(JAG_EINVAL, "%s: argument '%s' is read-only", op, arg);
    return JAG_OK;
}

static jag_status check_writable(const char *op, int i, const jag_tensor *p) {
    if (jag__is_read_only(p))
        return jag__error(JAG_EINVAL, "%s: argument 'params[%d]' is read-only; expected a writable tensor", op, i);
    return JAG_OK;
}

static jag_status check_list(const char *op, const void *v, int n, const char *name) {
    if (n < 0) return jag__error(JAG_EINVAL, "%s: argument 'n' is %d; expected n >= 0", op, n);
    if (n > 0 && !v) return jag__error(JAG_EINVAL, "%s: argument '%s' is NULL", op, name);
    return JAG_OK;
}

static jag_status check_sgd_hyper(const char *op, const jag__sgd_hyper *h) {
    if (!(h->lr >= 0) || isinf(h->lr)) return jag__error(JAG_EINVAL, "%s: argument 'lr' is %g; expected a finite lr >= 0", op, h->lr);
    if (!(h->momentum >= 0) || isinf(h->momentum))
        return jag__error(JAG_EINVAL, "%s: argument 'momentum' is %g; expected a finite momentum >= 0", op, h->momentum);
    if (!isfinite(h->dampening))
        return jag__error(JAG_EINVAL, "%s: argument 'dampening' is %g; expected a finite value", op, h->dampening);
    if (!(h->weight_decay >= 0) || isinf(h->weight_decay))
        return jag__error(JAG_EINVAL, "%s: argument 'weight_decay' is %g; expected a finite weight_decay >= 0", op,
                          h->weight_decay);
    if (h->nesterov && (h->momentum <= 0 || h->dampening != 0))
        return jag__error(JAG_EINVAL, "%s: nesterov momentum requires a momentum > 0 and zero dampening (momentum %g, dampening %g)",
                          op, h->momentum, h->dampening);
    return JAG_OK;
}

static jag_status check_adam_hyper(const char *op, const jag__adam_hyper *h) {
    if (!(h->lr >= 0) || isinf(h->lr)) return jag__error(JAG_EINVAL, "%s: argument 'lr' is %g; expected a finite lr >= 0", op, h->lr);
    if (!(h->eps >= 0) || isinf(h->eps)) return jag__error(JAG_EINVAL, "%s: argument 'eps' is %g; expected a finite eps >= 0", op, h->eps);
    if (!(h->beta1 >= 0 && h->beta1 < 1))
        return jag__error(JAG_EINVAL, "%s: argument 'beta1' is %g; expected 0 <= beta1 < 1", op, h->beta1);
    if (!(h->beta2 >= 0 && h->beta2 < 1))
        return jag__error(JAG_EINVAL, "%s: argument 'beta2' is %g; expected 0 <= beta2 < 1", op, h->beta2);
    if (!(h->weight_decay >= 0) || isinf(h->weight_decay))
        return jag__error(JAG_EINVAL, "%s: argument 'weight_decay' is %g; expected a finite weight_decay >= 0", op,
                          h->weight_decay);
    return JAG_OK;
}

/* ---- the functional updates --------------------------------------------- */

/* Contiguous versions of the gradients (new references; NULL where the
 * gradient is NULL). */
static jag_status contiguous_grads(const char *op, jag_tensor *const *grads, int n, jag_tensor **cg) {
    for (int i = 0; i < n; i++) {
        cg[i] = NULL;
        if (!grads[i]) continue;
        jag_status st = jag_contiguous(grads[i], &cg[i]);
        if (st) {
            for (int k = 0; k < i; k++) jag_release(cg[k]), cg[k] = NULL;
            return jag__error(st, "%s: making grads[%d] contiguous failed: %s", op, i, jag_last_error());
        }
    }
    return JAG_OK;
}

static void release_all(jag_tensor **v, int n) {
    for (int i = 0; v && i < n; i++) jag_release(v[i]), v[i] = NULL;
}

static jag_status sgd_update(const char *op, jag_tensor *const *params, jag_tensor *const *grads, jag_tensor **bufs,
                             int n, const jag__sgd_hyper *h, jag_tensor **made, int *n_made) {
    jag_status st;
    *n_made = 0;
    if ((st = check_sgd_hyper(op, h)) || (st = check_list(op, params, n, "params")) ||
        (st = check_list(op, grads, n, "grads")))
        return st;
    bool mom = h->momentum != 0;
    if (mom && n > 0 && !bufs) return jag__error(JAG_EINVAL, "%s: argument 'momentum_buffers' is NULL with momentum %g", op, h->momentum);
    for (int i = 0; i < n; i++) {
        if (!grads[i]) continue;
        if ((st = check_param(op, i, params[i])) || (st = check_writable(op, i, params[i])) ||
            (st = check_like(op, "grads", i, grads[i], params[i], false)))
            return st;
        if (mom && bufs[i] && (st = check_like(op, "momentum_buffers", i, bufs[i], params[i], true))) return st;
        for (int k = 0; k < i; k++)
            if (grads[k] && params[k] == params[i])
                return jag__error(JAG_EINVAL, "%s: params[%d] and params[%d] are the same tensor", op, k, i);
    }
    jag_tensor **cg = calloc((size_t)(n > 0 ? n : 1), sizeof *cg);
    jag_tensor **nb = calloc((size_t)(n > 0 ? n : 1), sizeof *nb);
    if (!cg || !nb) {
        free(cg), free(nb);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    st = contiguous_grads(op, grads, n, cg);
    for (int i = 0; !st && mom && i < n; i++)
        if (grads[i] && !bufs[i]) st = jag_empty(params[i]->sizes, params[i]->ndim, params[i]->dtype, &nb[i]);
    if (st) {
        release_all(cg, n), release_all(nb, n);
        free(cg), free(nb);
        return st;
    }
    for (int i = 0; i < n; i++) {
        if (!grads[i]) continue;
        jag_tensor *p = params[i], *b = mom ? (bufs[i] ? bufs[i] : nb[i]) : NULL;
        jag__optim_sgd(p->dtype, jag__ptr(p), jag__ptr(cg[i]), b ? jag__ptr(b) : NULL, jag_numel(p), h,
                       mom && !bufs[i]);
        jag__bump_version(p);
        if (b) jag__bump_version(b);
        if (nb[i]) bufs[i] = made[(*n_made)++] = nb[i];
    }
    release_all(cg, n);
    free(cg), free(nb);
    return JAG_OK;
}

jag_status jag_optim_sgd_update(jag_tensor *const *params, jag_tensor *const *grads, jag_tensor **momentum_buffers,
                                int n, double lr, double momentum, double dampening, double weight_decay,
                                bool nesterov) {
    jag__sgd_hyper h = {lr, momentum, dampening, weight_decay, nesterov};
    jag_tensor **made = calloc((size_t)(n > 0 ? n : 1), sizeof *made);
    if (!made) return jag__error(JAG_ENOMEM, "jag_optim_sgd_update: out of memory");
    int n_made = 0;
    jag__enter();
    bool prev = jag_set_grad_enabled(false);
    jag_status st = sgd_update("jag_optim_sgd_update", params, grads, momentum_buffers, n, &h, made, &n_made);
    jag_set_grad_enabled(prev);
    st = jag__leave(st, made, n_made);
    free(made);
    return st;
}

static jag_status adam_update(const char *op, jag_tensor *const *params, jag_tensor *const *grads,
                              jag_tensor *const *m, jag_tensor *const *v, jag_tensor *const *vmax,
                              const int64_t *steps, int n, const jag__adam_hyper *h) {
    jag_status st;
    if ((st = check_adam_hyper(op, h)) || (st = check_list(op, params, n, "params")) ||
        (st = check_list(op, grads, n, "grads")) || (st = check_list(op, m, n, "exp_avgs")) ||
        (st = check_list(op, v, n, "exp_avg_sqs")) || (st = check_list(op, steps, n, "steps")))
        return st;
    if (h->amsgrad && (st = check_list(op, vmax, n, "max_exp_avg_sqs"))) return st;
    for (int i = 0; i < n; i++) {
        if (!grads[i]) continue;
        if ((st = check_param(op, i, params[i])) || (st = check_writable(op, i, params[i])) ||
            (st = check_like(op, "grads", i, grads[i], params[i], false)) ||
            (st = check_like(op, "exp_avgs", i, m[i], params[i], true)) ||
            (st = check_like(op, "exp_avg_sqs", i, v[i], params[i], true)) ||
            (h->amsgrad && (st = check_like(op, "max_exp_avg_sqs", i, vmax[i], params[i], true))))
            return st;
        if (steps[i] < 1)
            return jag__error(JAG_EINVAL, "%s: argument 'steps[%d]' is %lld; expected the step count after this step, >= 1",
                              op, i, (long long)steps[i]);
        for (int k = 0; k < i; k++)
            if (grads[k] && params[k] == params[i])
                return jag__error(JAG_EINVAL, "%s: params[%d] and params[%d] are the same tensor", op, k, i);
    }
    jag_tensor **cg = calloc((size_t)(n > 0 ? n : 1), sizeof *cg);
    if (!cg) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    if ((st = contiguous_grads(op, grads, n, cg))) {
        free(cg);
        return st;
    }
    for (int i = 0; i < n; i++) {
        if (!grads[i]) continue;
        jag_tensor *p = params[i];
        jag__optim_adam(p->dtype, jag__ptr(p), jag__ptr(cg[i]), jag__ptr(m[i]), jag__ptr(v[i]),
                        h->amsgrad ? jag__ptr(vmax[i]) : NULL, jag_numel(p), h, steps[i]);
        jag__bump_version(p), jag__bump_version(m[i]), jag__bump_version(v[i]);
        if (h->amsgrad) jag__bump_version(vmax[i]);
    }
    release_all(cg, n);
    free(cg);
    return JAG_OK;
}

jag_status jag_optim_adam_update(jag_tensor *const *params, jag_tensor *const *grads, jag_tensor *const *exp_avgs,
                                 jag_tensor *const *exp_avg_sqs, jag_tensor *const *max_exp_avg_sqs,
                                 const int64_t *steps, int n, double lr, double beta1, double beta2, double eps,
                                 double weight_decay, bool amsgrad, bool decoupled) {
    jag__adam_hyper h = {lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled};
    jag__enter();
    bool prev = jag_set_grad_enabled(false);
    jag_status st = adam_update("jag_optim_adam_update", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                                steps, n, &h);
    jag_set_grad_enabled(prev);
    return jag__leave(st, NULL, 0);
}

/* ---- the optimizer object ------------------------------------------------- */

enum { OPT_SGD, OPT_ADAM, OPT_ADAMW };
enum { ST_MOMENTUM, ST_EXP_AVG, ST_EXP_AVG_SQ, ST_MAX_EXP_AVG_SQ, ST_COUNT };
static const char *const state_names[ST_COUNT] = {"momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};

struct jag_optimizer {
    uint32_t magic; /* JAG_HANDLE_LIVE; JAG_HANDLE_FREED once freed */
    int kind, n;
    jag_tensor **params;          /* n references */
    jag_tensor **state[ST_COUNT]; /* n entries each (NULL: not made yet) */
    int64_t *steps;               /* steps taken by each param */
    jag__sgd_hyper sgd;
    jag__adam_hyper adam;
};

static const char *kind_new_name(int kind) {
    return kind == OPT_SGD ? "jag_optim_sgd_new" : kind == OPT_ADAM ? "jag_optim_adam_new" : "jag_optim_adamw_new";
}

static jag_status check_opt(const char *op, const jag_optimizer *o) {
    if (!o) return jag__error(JAG_EINVAL, "%s: argument 'opt' is NULL", op);
    if (o->magic != JAG_HANDLE_LIVE) return jag__error(JAG_EINVAL, "%s: argument 'opt' was freed", op);
    return JAG_OK;
}

static void opt_destroy(jag_optimizer *o) {
    for (int i = 0; i < o->n; i++) {
        jag_release(o->params[i]);
        for (int s = 0; s < ST_COUNT; s++)
            if (o->state[s]) jag_release(o->state[s][i]);
    }
    free(o->params), free(o->steps);
    for (int s = 0; s < ST_COUNT; s++) free(o->state[s]);
}

static jag_status opt_new(int kind, jag_tensor *const *params, int n, const jag__sgd_hyper *sh,
                          const jag__adam_hyper *ah, jag_optimizer **out) {
    const char *op = kind_new_name(kind);
    jag_status st;
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if ((st = check_list(op, params, n, "params"))) return st;
    if ((st = sh ? check_sgd_hyper(op, sh) : check_adam_hyper(op, ah))) return st;
    for (int i = 0; i < n; i++) {
        if ((st = check_param(op, i, params[i]))) return st;
        for (int k = 0; k < i; k++)
            if (params[k] == params[i])
                return jag__error(JAG_EINVAL, "%s: params[%d] and params[%d] are the same tensor", op, k, i);
    }
    jag_optimizer *o = calloc(1, sizeof *o);
    if (!o) return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    size_t cap = (size_t)(n > 0 ? n : 1);
    o->params = calloc(cap, sizeof *o->params);
    o->steps = calloc(cap, sizeof *o->steps);
    bool ok = o->params && o->steps;
    for (int s = 0; s < ST_COUNT; s++) ok = ok && (o->state[s] = calloc(cap, sizeof(jag_tensor *)));
    if (!ok) {
        opt_destroy(o);
        free(o);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    o->magic = JAG_HANDLE_LIVE;
    o->kind = kind;
    o->n = n;
    for (int i = 0; i < n; i++) o->params[i] = jag_retain(params[i]);
    if (sh) o->sgd = *sh;
    if (ah) o->adam = *ah;
    *out = o;
    return JAG_OK;
}

jag_status jag_optim_sgd_new(jag_tensor *const *params, int n, double lr, double momentum, double dampening,
                             double weight_decay, bool nesterov, jag_optimizer **out) {
    jag__sgd_hyper h = {lr, momentum, dampening, weight_decay, nesterov};
    return opt_new(OPT_SGD, params, n, &h, NULL, out);
}

jag_status jag_optim_adam_new(jag_tensor *const *params, int n, double lr, double beta1, double beta2, double eps,
                              double weight_decay, bool amsgrad, jag_optimizer **out) {
    jag__adam_hyper h = {lr, beta1, beta2, eps, weight_decay, amsgrad, false};
    return opt_new(OPT_ADAM, params, n, NULL, &h, out);
}

jag_status jag_optim_adamw_new(jag_tensor *const *params, int n, double lr, double beta1, double beta2, double eps,
                               double weight_decay, bool amsgrad, jag_optimizer **out) {
    jag__adam_hyper h = {lr, beta1, beta2, eps, weight_decay, amsgrad, true};
    return opt_new(OPT_ADAMW, params, n, NULL, &h, out);
}

jag_status jag_optim_free(jag_optimizer *opt) {
    if (!opt) return JAG_OK;
    jag_status st = check_opt("jag_optim_free", opt);
    if (st) return st;
    opt_destroy(opt);
    opt->magic = JAG_HANDLE_FREED;
    jag__handle_retire(opt, free);
    return JAG_OK;
}

static jag_status opt_step(jag_optimizer *o) {
    const char *op = "jag_optim_step";
    int n = o->n;
    size_t cap = (size_t)(n > 0 ? n : 1);
    jag_tensor **grads = calloc(cap, sizeof *grads);
    jag_tensor **made[ST_COUNT] = {0}; /* state made by this step (released on failure) */
    int64_t *steps = calloc(cap, sizeof *steps);
    jag_status st = (grads && steps) ? JAG_OK : jag__error(JAG_ENOMEM, "%s: out of memory", op);
    for (int s = 0; !st && s < ST_COUNT; s++)
        if (!(made[s] = calloc(cap, sizeof(jag_tensor *)))) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    for (int i = 0; !st && i < n; i++) {
        st = jag_get_grad(o->params[i], &grads[i]);
        steps[i] = o->steps[i] + 1;
    }
    if (!st && o->kind != OPT_SGD) {
        /* Adam's state starts as zeros at a param's first step (torch's);
         * made before anything is written */
        for (int i = 0; !st && i < n; i++) {
            if (!grads[i]) continue;
            jag_tensor *p = o->params[i];
            for (int s = ST_EXP_AVG; !st && s <= ST_MAX_EXP_AVG_SQ; s++) {
                if (s == ST_MAX_EXP_AVG_SQ && !o->adam.amsgrad) continue;
                if (!o->state[s][i] && jag__tensor_live(p) && !jag__is_subclass(p) && float_dtype(p->dtype))
                    st = jag_zeros(p->sizes, p->ndim, p->dtype, &made[s][i]);
            }
        }
    }
    if (!st) {
        if (o->kind == OPT_SGD) {
            /* the momentum buffers sgd_update makes go straight into state */
            jag_tensor **bufs = o->state[ST_MOMENTUM];
            jag_tensor **mk = calloc(cap, sizeof *mk);
            int n_made = 0;
            st = mk ? sgd_update(op, o->params, grads, bufs, n, &o->sgd, mk, &n_made)
                    : jag__error(JAG_ENOMEM, "%s: out of memory", op);
            free(mk);
        } else {
            jag_tensor **m = calloc(cap, sizeof *m), **v = calloc(cap, sizeof *v), **vm = calloc(cap, sizeof *vm);
            if (!m || !v || !vm) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
            for (int i = 0; !st && i < n; i++) {
                m[i] = o->state[ST_EXP_AVG][i] ? o->state[ST_EXP_AVG][i] : made[ST_EXP_AVG][i];
                v[i] = o->state[ST_EXP_AVG_SQ][i] ? o->state[ST_EXP_AVG_SQ][i] : made[ST_EXP_AVG_SQ][i];
                vm[i] = o->state[ST_MAX_EXP_AVG_SQ][i] ? o->state[ST_MAX_EXP_AVG_SQ][i] : made[ST_MAX_EXP_AVG_SQ][i];
            }
            if (!st) st = adam_update(op, o->params, grads, m, v, vm, steps, n, &o->adam);
            free(m), free(v), free(vm);
            for (int i = 0; !st && i < n; i++)
                for (int s = ST_EXP_AVG; s <= ST_MAX_EXP_AVG_SQ; s++)
                    if (made[s][i]) o->state[s][i] = made[s][i], made[s][i] = NULL;
        }
    }
    for (int i = 0; !st && i < n; i++)
        if (grads[i]) o->steps[i] = steps[i];
    for (int s = 0; s < ST_COUNT; s++) release_all(made[s], n), free(made[s]);
    release_all(grads, n);
    free(grads), free(steps);
    return st;
}

jag_status jag_optim_step(jag_optimizer *opt) {
    jag_status st = check_opt("jag_optim_step", opt);
    if (st) return st;
    jag__enter();
    bool prev = jag_set_grad_enabled(false);
    st = opt_step(opt);
    jag_set_grad_enabled(prev);
    return jag__leave(st, NULL, 0);
}

jag_status jag_optim_zero_grad(jag_optimizer *opt) {
    jag_status st = check_opt("jag_optim_zero_grad", opt);
    if (st) return st;
    for (int i = 0; i < opt->n; i++) jag_zero_grad(opt->params[i]);
    return JAG_OK;
}

jag_status jag_optim_set_lr(jag_optimizer *opt, double lr) {
    jag_status st = check_opt("jag_optim_set_lr", opt);
    if (st) return st;
    if (!(lr >= 0) || isinf(lr))
        return jag__error(JAG_EINVAL, "jag_optim_set_lr: argument 'lr' is %g; expected a finite lr >= 0", lr);
    if (opt->kind == OPT_SGD) opt->sgd.lr = lr;
    else opt->adam.lr = lr;
    return JAG_OK;
}

double jag_optim_get_lr(const jag_optimizer *opt) {
    if (check_opt("jag_optim_get_lr", opt)) return NAN;
    return opt->kind == OPT_SGD ? opt->sgd.lr : opt->adam.lr;
}

int jag_optim_num_params(const jag_optimizer *opt) {
    if (check_opt("jag_optim_num_params", opt)) return -1;
    return opt->n;
}

/* The state slot `name` of param i, or an error. */
static jag_status state_slot(const char *op, const jag_optimizer *o, int i, const char *name, int *slot) {
    jag_status st = check_opt(op, o);
    if (st) return st;
    if (i < 0 || i >= o->n)
        return jag__error(JAG_ERANGE, "%s: argument 'param_index' is %d; expected 0 <= param_index < %d", op, i, o->n);
    if (!name) return jag__error(JAG_EINVAL, "%s: argument 'name' is NULL", op);
    for (int s = 0; s < ST_COUNT; s++) {
        if (strcmp(name, state_names[s])) continue;
        bool ok = o->kind == OPT_SGD ? s == ST_MOMENTUM
                                     : (s == ST_EXP_AVG || s == ST_EXP_AVG_SQ || (s == ST_MAX_EXP_AVG_SQ && o->adam.amsgrad));
        if (ok) {
            *slot = s;
            return JAG_OK;
        }
        break;
    }
    return jag__error(JAG_EINVAL, "%s: argument 'name' is \"%s\"; expected %s", op, name,
                      o->kind == OPT_SGD ? "\"momentum_buffer\""
                      : o->adam.amsgrad  ? "\"exp_avg\", \"exp_avg_sq\" or \"max_exp_avg_sq\""
                                         : "\"exp_avg\" or \"exp_avg_sq\" (\"max_exp_avg_sq\" needs amsgrad)");
}

jag_status jag_optim_state(const jag_optimizer *opt, int param_index, const char *name, jag_tensor **out) {
    const char *op = "jag_optim_state";
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    int s = 0;
    jag_status st = state_slot(op, opt, param_index, name, &s);
    if (st) return st;
    jag__enter();
    *out = jag_retain(opt->state[s][param_index]);
    return jag__leave(JAG_OK, out, *out != NULL);
}

jag_status jag_optim_set_state(jag_optimizer *opt, int param_index, const char *name, const jag_tensor *value) {
    const char *op = "jag_optim_set_state";
    int s = 0;
    jag_status st = state_slot(op, opt, param_index, name, &s);
    if (st) return st;
    if (!value) return jag__error(JAG_EINVAL, "%s: argument 'value' is NULL", op);
    jag_tensor *p = opt->params[param_index];
    if ((st = check_like(op, "value", param_index, value, p, false))) return st;
    jag__enter();
    bool prev = jag_set_grad_enabled(false);
    jag_tensor *t = NULL;
    st = jag_empty(p->sizes, p->ndim, p->dtype, &t);
    if (!st) {
        jag__copy_into(t, value);
        jag_release(opt->state[s][param_index]);
        opt->state[s][param_index] = t;
    }
    jag_set_grad_enabled(prev);
    return jag__leave(st, NULL, 0);
}

jag_status jag_optim_step_count(const jag_optimizer *opt, int param_index, int64_t *out) {
    const char *op = "jag_optim_step_count";
    jag_status st = check_opt(op, opt);
    if (st) return st;
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if (param_index < 0 || param_index >= opt->n)
        return jag__error(JAG_ERANGE, "%s: argument 'param_index' is %d; expected 0 <= param_index < %d", op,
                          param_index, opt->n);
    *out = opt->steps[param_index];
    return JAG_OK;
}

jag_status jag_optim_set_step_count(jag_optimizer *opt, int param_index, int64_t step) {
    const char *op = "jag_optim_set_step_count";
    jag_status st = check_opt(op, opt);
    if (st) return st;
    if (param_index < 0 || param_index >= opt->n)
        return jag__error(JAG_ERANGE, "%s: argument 'param_index' is %d; expected 0 <= param_index < %d", op,
                          param_index, opt->n);
    if (step < 0) return jag__error(JAG_EINVAL, "%s: argument 'step' is %lld; expected step >= 0", op, (long long)step);
    opt->steps[param_index] = step;
    return JAG_OK;
}

/* ---- checkpoints ----------------------------------------------------------- */

/* Files written by jag_optim_save hold the parameters under their names,
 * the state as "optim.state.<i>.<state name>" and, under JAG_OPTIMIZER_KEY,
 *   {"kind": "sgd" | "adam" | "adamw", <hyperparameters>,
 *    "params": [{"name": ..., "step": ...}, ...]}
 * with every double as a "%.17g" string (jag's JSON reader keeps integers
 * only; 17 significant digits give the same double back). */

static const char *const kind_names[] = {"sgd", "adam", "adamw"};
#define STATE_NAME_FMT "optim.state.%d.%s"

/* The state slots an optimizer of this kind and hyperparameters keeps. */
static bool slot_used(int kind, const jag__adam_hyper *ah, int s) {
    if (kind == OPT_SGD) return s == ST_MOMENTUM;
    return s == ST_EXP_AVG || s == ST_EXP_AVG_SQ || (s == ST_MAX_EXP_AVG_SQ && ah->amsgrad);
}

typedef struct strbuf {
    char *p;
    size_t len, cap;
    bool oom;
} strbuf;

static void text_add(strbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(strbuf *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            t->oom = true;
            return;
        }
        if (t->p && t->len + (size_t)w < t->cap) {
            t->len += (size_t)w;
            return;
        }
        size_t cap = t->cap ? t->cap : 256;
        while (cap <= t->len + (size_t)w) cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->p = p, t->cap = cap;
    }
}

/* A JSON string literal of s (its bytes as they are; jag_save_described
 * checks the whole text). */
static void text_json_string(strbuf *t, const char *s) {
    text_add(t, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') text_add(t, "\\%c", *c);
        else if (*c < 0x20) text_add(t, "\\u%04x", *c);
        else text_add(t, "%c", *c);
    }
    text_add(t, "\"");
}

static void describe(const jag_optimizer *o, const char *const *names, strbuf *t) {
    text_add(t, "{\"kind\":\"%s\",", kind_names[o->kind]);
    if (o->kind == OPT_SGD)
        text_add(t, "\"lr\":\"%.17g\",\"momentum\":\"%.17g\",\"dampening\":\"%.17g\",\"weight_decay\":\"%.17g\",\"nesterov\":%s,",
                 o->sgd.lr, o->sgd.momentum, o->sgd.dampening, o->sgd.weight_decay, o->sgd.nesterov ? "true" : "false");
    else
        text_add(t, "\"lr\":\"%.17g\",\"beta1\":\"%.17g\",\"beta2\":\"%.17g\",\"eps\":\"%.17g\",\"weight_decay\":\"%.17g\",\"amsgrad\":%s,",
                 o->adam.lr, o->adam.beta1, o->adam.beta2, o->adam.eps, o->adam.weight_decay,
                 o->adam.amsgrad ? "true" : "false");
    text_add(t, "\"params\":[");
    for (int i = 0; i < o->n; i++) {
        text_add(t, "%s{\"name\":", i ? "," : "");
        text_json_string(t, names[i]);
        text_add(t, ",\"step\":%lld}", (long long)o->steps[i]);
    }
    text_add(t, "]}");
}

jag_status jag_optim_save(const jag_optimizer *opt, const char *path, const char *const *param_names,
                          const char *const *metadata, int n_metadata) {
    const char *op = "jag_optim_save";
    jag_status st = check_opt(op, opt);
    if (st) return st;
    if (!path) return jag__error(JAG_EINVAL, "%s: argument 'path' is NULL", op);
    int n = opt->n, cap = n * (1 + ST_COUNT) + 1;
    const char **names = calloc((size_t)cap, sizeof *names);
    char **owned = calloc((size_t)cap, sizeof *owned); /* the names made here */
    jag_tensor **tensors = calloc((size_t)cap, sizeof *tensors);
    strbuf desc = {0};
    int k = 0;
    if (!names || !owned || !tensors) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    for (int i = 0; !st && i < n; i++) {
        if (param_names && !param_names[i])
            st = jag__error(JAG_EINVAL, "%s: argument 'param_names[%d]' is NULL; expected a name", op, i);
        else if (!param_names && !(owned[k] = malloc(32)))
            st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
        if (st) break;
        if (!param_names) snprintf(owned[k], 32, "param.%d", i);
        names[k] = param_names ? param_names[i] : owned[k];
        tensors[k++] = opt->params[i];
    }
    for (int i = 0; !st && i < n; i++)
        for (int s = 0; !st && s < ST_COUNT; s++) {
            if (!opt->state[s][i]) continue;
            size_t len = strlen(STATE_NAME_FMT) + strlen(state_names[s]) + 16;
            if (!(owned[k] = malloc(len))) {
                st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
                break;
            }
            snprintf(owned[k], len, STATE_NAME_FMT, i, state_names[s]);
            names[k] = owned[k];
            tensors[k++] = opt->state[s][i];
        }
    if (!st) {
        describe(opt, names, &desc);
        if (desc.oom) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    if (!st && (st = jag_save_described(path, names, tensors, k, metadata, n_metadata, JAG_OPTIMIZER_KEY, desc.p))) {
        char msg[768];
        snprintf(msg, sizeof msg, "%s", jag_last_error());
        st = jag__error(st, "%s: %s", op, msg);
    }
    for (int i = 0; owned && i < cap; i++) free(owned[i]);
    free(names), free(owned), free(tensors), free(desc.p);
    return st;
}

/* The member `key` of the description's root, of kind `kind`, or an error. */
static jag_status desc_member(const char *op, const jag_json_doc *d, const jag_json_node *obj, const char *key,
                              jag_json_kind kind, const jag_json_node **out) {
    const jag_json_node *m = jag__json_get(d, obj, key);
    if (!m || jag__json_kind(m) != kind)
        return jag__error(JAG_EINVAL, "%s: metadata '" JAG_OPTIMIZER_KEY "': field '%s' is %s; expected %s", op, key,
                          m ? jag__json_kind_name(jag__json_kind(m)) : "missing", jag__json_kind_name(kind));
    *out = m;
    return JAG_OK;
}

static jag_status desc_double(const char *op, const jag_json_doc *d, const jag_json_node *root, const char *key,
                              double *out) {
    const jag_json_node *m = NULL;
    jag_status st = desc_member(op, d, root, key, JAG_JSON_STRING, &m);
    if (st) return st;
    const char *s = jag__json_str(d, m);
    char *end = NULL;
    *out = strtod(s, &end);
    if (!*s || *end)
        return jag__error(JAG_EINVAL, "%s: metadata '" JAG_OPTIMIZER_KEY "': field '%s' is \"%.64s\"; expected a number",
                          op, key, s);
    return JAG_OK;
}

static jag_status desc_bool(const char *op, const jag_json_doc *d, const jag_json_node *root, const char *key,
                            bool *out) {
    const jag_json_node *m = jag__json_get(d, root, key);
    jag_json_kind k = m ? jag__json_kind(m) : JAG_JSON_NULL;
    if (!m || (k != JAG_JSON_TRUE && k != JAG_JSON_FALSE))
        return jag__error(JAG_EINVAL, "%s: metadata '" JAG_OPTIMIZER_KEY "': field '%s' is %s; expected true or false",
                          op, key, m ? jag__json_kind_name(k) : "missing");
    *out = k == JAG_JSON_TRUE;
    return JAG_OK;
}

/* The hyperparameters of the description, checked as jag_optim_*_new does. */
static jag_status desc_hyper(const char *op, const jag_json_doc *d, const jag_json_node *root, int kind,
                             jag__sgd_hyper *sh, jag__adam_hyper *ah) {
    jag_status st;
    if (kind == OPT_SGD) {
        if ((st = desc_double(op, d, root, "lr", &sh->lr)) || (st = desc_double(op, d, root, "momentum", &sh->momentum)) ||
            (st = desc_double(op, d, root, "dampening", &sh->dampening)) ||
            (st = desc_double(op, d, root, "weight_decay", &sh->weight_decay)) ||
            (st = desc_bool(op, d, root, "nesterov", &sh->nesterov)))
            return st;
        return check_sgd_hyper(op, sh);
    }
    if ((st = desc_double(op, d, root, "lr", &ah->lr)) || (st = desc_double(op, d, root, "beta1", &ah->beta1)) ||
        (st = desc_double(op, d, root, "beta2", &ah->beta2)) || (st = desc_double(op, d, root, "eps", &ah->eps)) ||
        (st = desc_double(op, d, root, "weight_decay", &ah->weight_decay)) ||
        (st = desc_bool(op, d, root, "amsgrad", &ah->amsgrad)))
        return st;
    ah->decoupled = kind == OPT_ADAMW;
    return check_adam_hyper(op, ah);
}

/* The set's tensor `name` fits the optimizer's parameter i: plain, with
 * data, of its dtype and shape. */
static jag_status check_saved(const char *op, const char *name, const jag_tensor *t, int i, const jag_tensor *p) {
    char a[JAG_SHAPE_BUF], b[JAG_SHAPE_BUF];
    if (jag__is_subclass(t) || jag__is_meta(t))
        return jag__error(JAG_EINVAL, "%s: the set's tensor '%.200s' is not a plain tensor with data", op, name);
    if (t->dtype != p->dtype)
        return jag__error(JAG_EDTYPE, "%s: the set's tensor '%.200s' has dtype %s; expected %s (the optimizer's params[%d])",
                          op, name, jag_dtype_name(t->dtype), jag_dtype_name(p->dtype), i);
    if (t->ndim != p->ndim || memcmp(t->sizes, p->sizes, sizeof(int64_t) * (size_t)p->ndim))
        return jag__error(JAG_ESHAPE, "%s: the set's tensor '%.200s' has shape %s; expected %s (the optimizer's params[%d])",
                          op, name, jag__shape_str(t->sizes, t->ndim, a, sizeof a), jag__shape_str(p->sizes, p->ndim, b, sizeof b),
                          i);
    return JAG_OK;
}

/* What a load prepares before it changes anything. */
typedef struct restore {
    jag__sgd_hyper sgd;
    jag__adam_hyper adam;
    int64_t *steps;
    jag_tensor **values;          /* the parameters' new values (contiguous) */
    jag_tensor **state[ST_COUNT]; /* new state tensors (NULL: none) */
} restore;

static jag_status prepare_param(const char *op, const jag_optimizer *o, const jag_tensor_set *set, const jag_json_doc *d,
                                const jag_json_node *entry, int i, restore *r) {
    jag_status st;
    const jag_json_node *nm = NULL, *stp = NULL;
    if (jag__json_kind(entry) != JAG_JSON_OBJECT)
        return jag__error(JAG_EINVAL, "%s: metadata '" JAG_OPTIMIZER_KEY "': params[%d] is %s; expected an object", op, i,
                          jag__json_kind_name(jag__json_kind(entry)));
    if ((st = desc_member(op, d, entry, "name", JAG_JSON_STRING, &nm)) ||
        (st = desc_member(op, d, entry, "step", JAG_JSON_INT, &stp)))
        return st;
    const char *name = jag__json_str(d, nm);
    r->steps[i] = jag__json_int(d, stp);
    if (r->steps[i] < 0)
        return jag__error(JAG_EINVAL, "%s: metadata '" JAG_OPTIMIZER_KEY "': params[%d] has step %lld; expected >= 0", op,
                          i, (long long)r->steps[i]);
    jag_tensor *p = o->params[i], *t = jag_tensor_set_find(set, name);
    if (!t)
        return jag__error(JAG_EINVAL, "%s: parameter %d's tensor '%.200s' is missing from the set", op, i, name);
    if ((st = check_saved(op, name, t, i, p)) || (st = check_writable(op, i, p))) return st;
    if ((st = jag_contiguous(t, &r->values[i]))) return st;
    for (int s = 0; s < ST_COUNT; s++) {
        if (!slot_used(o->kind, &r->adam, s)) continue;
        char sname[64];
        snprintf(sname, sizeof sname, STATE_NAME_FMT, i, state_names[s]);
        const jag_tensor *v = jag_tensor_set_find(set, sname);
        bool needed = r->steps[i] > 0 && (o->kind != OPT_SGD || r->sgd.momentum != 0);
        if (!v) {
            if (needed)
                return jag__error(JAG_EINVAL, "%s: tensor '%s' is missing from the set; expected it after %lld steps", op,
                                  sname, (long long)r->steps[i]);
            continue;
        }
        if ((st = check_saved(op, sname, v, i, p)) || (st = jag_empty(p->sizes, p->ndim, p->dtype, &r->state[s][i])))
            return st;
        jag__copy_into(r->state[s][i], v);
    }
    return JAG_OK;
}

static jag_status load_prepare(const char *op, const jag_optimizer *o, const jag_tensor_set *set, const char *text,
                               restore *r) {
    jag_json_doc d;
    jag_status st = jag__json_parse(op, "metadata '" JAG_OPTIMIZER_KEY "'", text, strlen(text), "an object", &d);
    if (st) return st;
    const jag_json_node *root = jag__json_root(&d), *kind = NULL, *params = NULL;
    if ((st = desc_member(op, &d, root, "kind", JAG_JSON_STRING, &kind))) goto done;
    const char *ks = jag__json_str(&d, kind);
    if (strcmp(ks, kind_names[o->kind]) != 0) {
        st = jag__error(JAG_EINVAL, "%s: the set holds a \"%.32s\" optimizer; argument 'opt' is \"%s\"", op, ks,
                        kind_names[o->kind]);
        goto done;
    }
    if ((st = desc_hyper(op, &d, root, o->kind, &r->sgd, &r->adam)) ||
        (st = desc_member(op, &d, root, "params", JAG_JSON_ARRAY, &params)))
        goto done;
    int64_t count = jag__json_count(&d, params);
    if (count != o->n) {
        st = jag__error(JAG_EINVAL, "%s: the set holds %lld parameters; argument 'opt' has %d", op, (long long)count, o->n);
        goto done;
    }
    int i = 0;
    for (const jag_json_node *c = jag__json_first(&d, params); c && !st; c = jag__json_next(&d, params, c), i++)
        st = prepare_param(op, o, set, &d, c, i, r);
done:
    jag__json_free(&d);
    return st;
}

static void restore_free(restore *r, int n) {
    release_all(r->values, n);
    free(r->values), free(r->steps);
    for (int s = 0; s < ST_COUNT; s++) release_all(r->state[s], n), free(r->state[s]);
}

jag_status jag_optim_load(jag_optimizer *opt, const jag_tensor_set *set) {
    const char *op = "jag_optim_load";
    jag_status st = check_opt(op, opt);
    if (st) return st;
    if (!set) return jag__error(JAG_EINVAL, "%s: argument 'set' is NULL", op);
    const char *text = jag_tensor_set_description(set, JAG_OPTIMIZER_KEY);
    if (!text)
        return jag__error(JAG_EINVAL, "%s: the set has no metadata '" JAG_OPTIMIZER_KEY "'; expected a file written by "
                          "jag_optim_save", op);
    int n = opt->n;
    size_t cap = (size_t)(n > 0 ? n : 1);
    restore r = {.steps = calloc(cap, sizeof(int64_t)), .values = calloc(cap, sizeof(jag_tensor *))};
    bool ok = r.steps && r.values;
    for (int s = 0; s < ST_COUNT; s++) ok = ok && (r.state[s] = calloc(cap, sizeof(jag_tensor *)));
    jag__enter();
    st = ok ? load_prepare(op, opt, set, text, &r) : jag__error(JAG_ENOMEM, "%s: out of memory", op);
    if (!st) {
        /* nothing below can fail */
        for (int i = 0; i < n; i++) {
            jag_tensor *p = opt->params[i];
            if (jag_data(p) != jag_data(r.values[i])) {
                memcpy(jag_data(p), jag_data(r.values[i]), (size_t)jag_numel(p) * jag_dtype_size(p->dtype));
                jag__bump_version(p);
            }
            for (int s = 0; s < ST_COUNT; s++) {
                jag_release(opt->state[s][i]);
                opt->state[s][i] = r.state[s][i], r.state[s][i] = NULL;
            }
            opt->steps[i] = r.steps[i];
        }
        if (opt->kind == OPT_SGD) opt->sgd = r.sgd;
        else opt->adam = r.adam;
    }
    restore_free(&r, n);
    return jag__leave(st, NULL, 0);
}

/* ---- clip_grad_norm ------------------------------------------------------- */

static jag_status clip(const char *op, jag_tensor *const *params, int n, double max_norm, double p, double *total) {
    jag_status st;
    if ((st = check_list(op, params, n, "params"))) return st;
    if (!(p > 0)) return jag__error(JAG_EINVAL, "%s: argument 'norm_type' is %g; expected a norm_type > 0 (inf allowed)", op, p);
    if (isnan(max_norm)) return jag__error(JAG_EINVAL, "%s: argument 'max_norm' is NaN", op);
    size_t cap = (size_t)(n > 0 ? n : 1);
    jag_tensor **g = calloc(cap, sizeof *g), **cg = calloc(cap, sizeof *cg);
    if (!g || !cg) {
        free(g), free(cg);
        return jag__error(JAG_ENOMEM, "%s: out of memory", op);
    }
    char arg[32];
    for (int i = 0; !st && i < n; i++) {
        snprintf(arg, sizeof arg, "params[%d]", i);
        if ((st = jag__check_live(op, arg, params[i]))) break;
        if ((st = jag_get_grad(params[i], &g[i])) || !g[i]) continue;
        if (jag__is_subclass(g[i]))
            st = jag__error(JAG_ENOTIMPL, "%s: the gradient of params[%d] is a subclass (nested) tensor; expected a plain tensor", op, i);
        else if (!float_dtype(g[i]->dtype))
            st = jag__error(JAG_EDTYPE, "%s: the gradient of params[%d] has dtype %s; expected float32 or float64", op, i,
                            jag_dtype_name(g[i]->dtype));
        else
            st = jag_contiguous(g[i], &cg[i]);
    }
    double acc = 0;
    for (int i = 0; !st && i < n; i++) {
        if (!cg[i]) continue;
        double a = jag__optim_norm_acc(cg[i]->dtype, jag__ptr(cg[i]), jag_numel(cg[i]), p);
        if (isinf(p)) acc = (isnan(a) || isnan(acc)) ? NAN : (a > acc ? a : acc);
        else acc += a;
    }
    double tot = isinf(p) ? acc : p == 2 ? sqrt(acc) : p == 1 ? acc : pow(acc, 1.0 / p);
    double coef = max_norm / (tot + 1e-6);
    /* torch multiplies by min(coef, 1); by 1 changes nothing, so only a
     * coefficient below 1 (or NaN) writes */
    jag_tensor **scaled = calloc(cap, sizeof *scaled);
    if (!st && !scaled) st = jag__error(JAG_ENOMEM, "%s: out of memory", op);
    bool write = !st && !(coef >= 1.0) && !(isinf(max_norm) && max_norm > 0);
    /* A gradient held by nobody but its leaf is scaled in place (torch
     * steals such gradients too); one shared with another tensor or view (an
     * alias the engine handed to two leaves, a caller's seed, an expanded
     * view) is replaced by a scaled copy, so no other tensor changes. */
    for (int i = 0; write && !st && i < n; i++) {
        if (!g[i]) continue;
        bool exclusive = cg[i] == g[i] && atomic_load(&g[i]->refcount) == 3 && /* leaf, g[i], cg[i] */
                         atomic_load(&g[i]->storage->refcount) == 1 && !jag__is_read_only(g[i]);
        if (!exclusive) st = jag_clone(cg[i], &scaled[i]);
    }
    if (write && !st) {
        for (int i = 0; i < n; i++) {
            if (!g[i]) continue;
            jag_tensor *t = scaled[i] ? scaled[i] : g[i];
            int64_t k = jag_numel(t);
            if (t->dtype == JAG_FLOAT32) {
                float c = (float)coef, *x = (float *)jag__ptr(t);
                JAG_PARALLEL_SIMD_IF(k >= JAG_GRAIN_MEMORY,
                    for (int64_t e = 0; e < k; e++) x[e] *= c;);
            } else {
                double *x = (double *)jag__ptr(t);
                JAG_PARALLEL_SIMD_IF(k >= JAG_GRAIN_MEMORY,
                    for (int64_t e = 0; e < k; e++) x[e] *= coef;);
            }
            jag__bump_version(t);
            if (scaled[i]) {
                /* the leaf takes the scaled copy (not while a backward
                 * writes into the same leaf: see jag.h) */
                jag_tensor *old = params[i]->grad;
                params[i]->grad = scaled[i];
                scaled[i] = NULL;
                jag_release(old);
            }
        }
    }
    if (!st && total) *total = tot;
    release_all(scaled, n), release_all(cg, n), release_all(g, n);
    free(scaled), free(cg), free(g);
    return st;
}

jag_status jag_clip_grad_norm(jag_tensor *const *params, int n, double max_norm, double norm_type,
                              double *total_norm) {
    jag__enter();
    bool prev = jag_set_grad_enabled(false);
    jag_status st = clip("jag_clip_grad_norm", params, n, max_norm, norm_type, total_norm);
    jag_set_grad_enabled(prev);
    return jag__leave(st, NULL, 0);
}
