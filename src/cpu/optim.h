/*
 * optim.h — the fused optimizer kernels of optim.c and their references,
 * shared by the optimizer objects (src/dispatch/optim.c) and the tests.
 * Buffers are contiguous float32 / float64 arrays of n elements.
 */
#ifndef JAG_CPU_OPTIM_H
#define JAG_CPU_OPTIM_H

#include "../core/internal.h"

#include <stdbool.h>
#include <stdint.h>

/* The hyperparameters of one SGD call (torch.optim.SGD's). */
typedef struct jag__sgd_hyper {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
} jag__sgd_hyper;

/* The hyperparameters of one Adam/AdamW call (torch.optim.Adam's; the step
 * scalars for the step count are computed from them in double). */
typedef struct jag__adam_hyper {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, decoupled; /* decoupled: AdamW's weight decay */
} jag__adam_hyper;

/* param, grad, buf (the momentum buffer; unused without momentum) (n):
 * one SGD step; `first`: the momentum buffer starts as the gradient. */
void jag__optim_sgd(jag_dtype dt, void *param, const void *grad, void *buf, int64_t n, const jag__sgd_hyper *h,
                    bool first);
void jag__optim_sgd_ref(jag_dtype dt, void *param, const void *grad, void *buf, int64_t n, const jag__sgd_hyper *h,
                        bool first);
/* param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only) (n): one
 * Adam/AdamW step with step count `step` (>= 1). */
void jag__optim_adam(jag_dtype dt, void *param, const void *grad, void *exp_avg, void *exp_avg_sq,
                     void *max_exp_avg_sq, int64_t n, const jag__adam_hyper *h, int64_t step);
void jag__optim_adam_ref(jag_dtype dt, void *param, const void *grad, void *exp_avg, void *exp_avg_sq,
                         void *max_exp_avg_sq, int64_t n, const jag__adam_hyper *h, int64_t step);
/* x (n): the sum of |x|^p (p finite) or the max of |x| (p = inf), in double. */
double jag__optim_norm_acc(jag_dtype dt, const void *x, int64_t n, double p);
double jag__optim_norm_acc_ref(jag_dtype dt, const void *x, int64_t n, double p);

#endif /* JAG_CPU_OPTIM_H */
