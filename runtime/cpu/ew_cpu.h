/* ew_cpu.h: what the fused elementwise kernels of a generated program call on the CPU: GeLU (the tanh
 * approximation, as GPT-2 and Megatron use, and the exact one), SiLU, sigmoid, ReLU, erf, square roots,
 * log, abs, min, max, comparisons and dropout; the activations branch-free over the vectorisable exp of
 * cpu.h so that the kernels' loops vectorise. */
#ifndef PLAIT_EW_CPU_H
#define PLAIT_EW_CPU_H

#include "cpu.h"
#include "philox.h"
#include "rt.h"

static inline real rt_exp(real x) { return cpu_exp(x); }
static inline real rt_sigmoid(real x) { return 1 / (1 + cpu_exp(-x)); }
/* tanh(x) = 2·sigmoid(2x) - 1 */
static inline real rt_tanh(real x) { return 2 * rt_sigmoid(2 * x) - 1; }
static inline real rt_silu(real x) { return x * rt_sigmoid(x); }
static inline real rt_relu(real x) { return x > 0 ? x : 0; }
static inline real rt_step(real x) { return x > 0 ? 1 : 0; }

/* gelu(x) = x/2·(1 + tanh(u)) = x·sigmoid(2u), u = sqrt(2/pi)·(x + 0.044715·x³) */
static inline real rt_gelu(real x) {
  const real c = (real)1.5957691216057308; /* 2·sqrt(2/pi) */
  return x * rt_sigmoid(c * (x + (real)0.044715 * x * x * x));
}

/* d gelu / dx = s + x·s·(1 - s)·2u', s = sigmoid(2u), 2u' = 2·sqrt(2/pi)·(1 + 3·0.044715·x²) */
static inline real rt_gelu_grad(real x) {
  const real c = (real)1.5957691216057308;
  real s = rt_sigmoid(c * (x + (real)0.044715 * x * x * x));
  return s + x * s * (1 - s) * c * (1 + (real)0.134145 * x * x);
}

/* gelu_exact(x) = x·Φ(x) = x/2·(1 + erf(x/√2)); erf in double, rounded to real */
static inline real rt_erf(real x) { return (real)erf((double)x); }
static inline real rt_gelu_exact(real x) { return (real)0.5 * x * (1 + rt_erf(x * (real)0.7071067811865476)); }
/* d gelu_exact / dx = Φ(x) + x·φ(x), φ(x) = exp(−x²/2)/√(2π) */
static inline real rt_gelu_exact_grad(real x) {
  return (real)0.5 * (1 + rt_erf(x * (real)0.7071067811865476)) + x * (real)0.3989422804014327 * cpu_exp(-x * x / 2);
}
static inline real rt_sqrt(real x) { return (real)sqrt((double)x); }
static inline real rt_rsqrt(real x) { return (real)(1 / sqrt((double)x)); }
static inline real rt_log(real x) { return (real)log((double)x); }
static inline real rt_abs(real x) { return x < 0 ? -x : x; }
static inline real rt_sign(real x) { return (real)((x > 0) - (x < 0)); }
static inline real rt_min(real a, real b) { return a <= b ? a : b; }
static inline real rt_max(real a, real b) { return a >= b ? a : b; }
static inline real rt_gt(real a, real b) { return a > b ? 1 : 0; }
static inline real rt_ge(real a, real b) { return a >= b ? 1 : 0; }

/* Inverted dropout of the value of local element i: kept with probability 1 - p and scaled by 1/(1 - p). */
static inline real rt_dropout(real v, double p, const EwKeys *k, int which, int64_t i) {
  if (!k->training) return v;
  return philox_keep(k->seed, k->stream[which], rt_global_index(&k->map, i), p) ? (real)(v / (1.0 - p)) : 0;
}

#endif
