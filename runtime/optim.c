/* optim.c: AdamW's defaults, clipping and the warm-up plus cosine schedule (the per-element work is the
 * backend's: runtime/cpu/optim_cpu.c). */
#include "optim.h"

#include <math.h>

AdamW optim_adamw_default(void) { return (AdamW){.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.01}; }

double optim_clip_coef(double norm, double max_norm) {
  double coef = max_norm / (norm + 1e-6);
  return coef < 1 ? coef : 1;
}

LrSchedule optim_schedule(double lr_max, int64_t warmup, int64_t total) {
  return (LrSchedule){.lr_max = lr_max, .lr_min = 0.1 * lr_max, .warmup = warmup, .total = total};
}

double optim_lr(const LrSchedule *s, int64_t step) {
  if (step < s->warmup) return s->lr_max * (double)step / (double)s->warmup;
  if (step >= s->total) return s->lr_min;
  /* lr = lr_min + (lr_max - lr_min)·(1 + cos(π·progress))/2, progress from 0 at warm-up's end to 1 at total */
  double progress = (double)(step - s->warmup) / (double)(s->total - s->warmup);
  return s->lr_min + (s->lr_max - s->lr_min) * 0.5 * (1 + cos(3.141592653589793 * progress));
}
