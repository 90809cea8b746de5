/* optim_cpu.c: AdamW over a tensor and the squared gradient norm, on the CPU (OpenMP, deterministic). */
#include <tgmath.h> /* sqrt in the precision of real */

#include "optim.h"

void optim_adamw_step(const AdamW *opt, int64_t t, double lr, int decay, double grad_scale, int64_t n, real *param,
                      const real *grad, real *m, real *v) {
  const real b1 = (real)opt->beta1, b2 = (real)opt->beta2, eps = (real)opt->eps, scale = (real)grad_scale;
  const real step = (real)lr, wd = decay ? (real)opt->weight_decay : 0;
  const real c1 = (real)(1 / (1 - pow(opt->beta1, (double)t))); /* bias corrections */
  const real c2 = (real)(1 / (1 - pow(opt->beta2, (double)t)));
  /* g = s·grad; m = β1·m + (1-β1)·g; v = β2·v + (1-β2)·g²; p -= lr·(m·c1 / (sqrt(v·c2) + ε) + wd·p) */
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) {
    real g = scale * grad[i];
    real mi = b1 * m[i] + (1 - b1) * g;
    real vi = b2 * v[i] + (1 - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= step * (mi * c1 / (sqrt(vi * c2) + eps) + wd * param[i]);
  }
}

enum { NORM_BLOCK = 1 << 14, NORM_BATCH = 4096 }; /* blocks of elements; block sums held at once */

/* Σ g² over one block, in index order. */
static double block_norm_sq(const real *g, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += (double)g[i] * g[i];
  return sum;
}

double optim_norm_sq(int64_t n, const real *grad) {
  /* Fixed blocks of NORM_BLOCK elements, each summed in order (in parallel), then the block sums added in
   * block order: the result does not depend on the number of threads. */
  int64_t blocks = (n + NORM_BLOCK - 1) / NORM_BLOCK;
  double total = 0;
  for (int64_t first = 0; first < blocks; first += NORM_BATCH) {
    double partial[NORM_BATCH];
    int64_t count = blocks - first < NORM_BATCH ? blocks - first : NORM_BATCH;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < count; b++) {
      int64_t start = (first + b) * NORM_BLOCK, len = n - start < NORM_BLOCK ? n - start : NORM_BLOCK;
      partial[b] = block_norm_sq(grad + start, len);
    }
    for (int64_t b = 0; b < count; b++) total += partial[b];
  }
  return total;
}

