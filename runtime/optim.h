/* optim.h: the optimizer: AdamW, gradient-norm clipping and the learning-rate schedule. */
#ifndef PLAIT_OPTIM_H
#define PLAIT_OPTIM_H

#include <stdint.h>

#include "real.h"

typedef struct {
  double beta1, beta2, eps;
  double weight_decay; /* decoupled; applied only to tensors flagged `decay` (not norms, not biases) */
} AdamW;

/* β1 0.9, β2 0.95, ε 1e-8, weight decay 0.01. */
AdamW optim_adamw_default(void);

/* One AdamW step t (1 for the first) over n elements of one tensor, in place on param, m and v, in one
 * pass that also clears the gradient (the next step's gradients accumulate from zero):
 *   g = grad_scale·grad          (grad_scale: the clip coefficient, times any loss scaling to undo)
 *   m = β1·m + (1-β1)·g,  v = β2·v + (1-β2)·g²
 *   param -= lr·( (m/(1-β1^t)) / (sqrt(v/(1-β2^t)) + ε) + wd·param ),  wd = weight_decay if decay else 0
 *   grad = 0 */
void optim_adamw_step(const AdamW *opt, int64_t t, double lr, int decay, double grad_scale, int64_t n, real *param,
                      real *grad, real *m, real *v);

/* One tensor of optim_adamw_many: its elements, whether weight decay applies, its four streams, and
 * w, the copy compute reads, rounded from the new weights in the same pass (NULL where compute reads
 * param itself: every backend without ACT_SEPARATE). */
typedef struct {
  int64_t n;
  int decay;
  real *param, *grad, *m, *v;
  act_t *w;
} AdamwTensor;

/* optim_adamw_step over tensors[0 .. count) (each with its own decay), in one pass over them all where
 * the backend allows; each tensor's results are the same bits optim_adamw_step gives it. */
void optim_adamw_many(const AdamW *opt, int64_t t, double lr, double grad_scale, int count,
                      const AdamwTensor *tensors);

/* Σ g² over n elements, accumulated in double in a fixed order (the same bits whatever the thread
 * count). Callers add these over their tensors, then across ranks, counting each parameter once. */
double optim_norm_sq(int64_t n, const real *grad);

/* Σ g² over tensors[0 .. count) of n[i] elements: on the CPU the tensors' optim_norm_sq added in order;
 * on the GPU one pass over them all, its blocks' sums added in an order fixed by the sizes alone. */
double optim_norm_sq_many(int count, const int64_t *n, const real *const *grad);

/* The clip coefficient for a global gradient norm: min(1, max_norm/(norm + 1e-6)) (max_norm 1.0 by default). */
double optim_clip_coef(double norm, double max_norm);

/* Linear warm-up from 0 at step 0 to lr_max at step `warmup`, then a cosine from lr_max down to lr_min
 * at step `total`, lr_min after it. */
typedef struct {
  double lr_max, lr_min;
  int64_t warmup, total;
} LrSchedule;

/* The schedule with lr_min = 0.1·lr_max. */
LrSchedule optim_schedule(double lr_max, int64_t warmup, int64_t total);
double optim_lr(const LrSchedule *s, int64_t step);

#endif
