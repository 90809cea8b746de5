/* optim_cpu.c: AdamW over a tensor and the squared gradient norm, on the CPU (OpenMP, deterministic,
 * vectorised at the widest width the CPU has). */
#include <tgmath.h> /* sqrt in the precision of real */

#include "cpu.h"
#include "optim.h"

/* AdamW's constants for one tensor's step, in the precision of real. */
typedef struct {
  real b1, b2, eps, scale, lr, wd, c1, c2;
} AdamConstants;

enum { ADAM_BLOCK = 1 << 14 }; /* elements a task updates at once */

/* One block of the pass over the four streams; every operation is an IEEE one (no contraction into FMA
 * under C11), so each element gets the same bits at any vector width and thread count:
 *   g = s·grad; m = β1·m + (1-β1)·g; v = β2·v + (1-β2)·g²; p -= lr·(m·c1 / (sqrt(v·c2) + ε) + wd·p); grad = 0 */
CPU_WIDE static void adamw_block(const AdamConstants *k, int64_t n, real *restrict param, real *restrict grad,
                                 real *restrict m, real *restrict v) {
  const AdamConstants c = *k;
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    real g = c.scale * grad[i];
    real mi = c.b1 * m[i] + (1 - c.b1) * g;
    real vi = c.b2 * v[i] + (1 - c.b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= c.lr * (mi * c.c1 / (sqrt(vi * c.c2) + c.eps) + c.wd * param[i]);
    grad[i] = 0;
  }
}

void optim_adamw_step(const AdamW *opt, int64_t t, double lr, int decay, double grad_scale, int64_t n, real *param,
                      real *grad, real *m, real *v) {
  const AdamConstants k = {
      .b1 = (real)opt->beta1, .b2 = (real)opt->beta2, .eps = (real)opt->eps, .scale = (real)grad_scale,
      .lr = (real)lr, .wd = decay ? (real)opt->weight_decay : 0,
      .c1 = (real)(1 / (1 - pow(opt->beta1, (double)t))), /* bias corrections */
      .c2 = (real)(1 / (1 - pow(opt->beta2, (double)t))),
  };
  int64_t blocks = (n + ADAM_BLOCK - 1) / ADAM_BLOCK;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; b++) {
    int64_t start = b * ADAM_BLOCK, len = cpu_min(ADAM_BLOCK, n - start);
    adamw_block(&k, len, param + start, grad + start, m + start, v + start);
  }
}

/* Tensor by tensor, in order: compute reads the master weights here, so there is no w to refresh. */
void optim_adamw_many(const AdamW *opt, int64_t t, double lr, double grad_scale, int count,
                      const AdamwTensor *tensors) {
  for (int i = 0; i < count; i++) {
    const AdamwTensor *a = &tensors[i];
    optim_adamw_step(opt, t, lr, a->decay, grad_scale, a->n, a->param, a->grad, a->m, a->v);
  }
}

/* Blocks of elements, block sums held at once, the running sums of a block (one per vector lane), and
 * the blocks a thread reads side by side. */
enum { NORM_BLOCK = 1 << 14, NORM_BATCH = 4096, NORM_LANES = 16, NORM_STREAMS = 4 };

/* Σ g² over one block: lane j sums elements j, j + NORM_LANES, ... in order (independent sums, so the
 * loop runs at the vector width rather than at one add's latency), then the lanes are added in order
 * and the tail after them. The same bits at any vector width. */
CPU_WIDE static double block_norm_sq(const real *g, int64_t n) {
  double lane[NORM_LANES] = {0};
  int64_t whole = n / NORM_LANES * NORM_LANES;
  for (int64_t i = 0; i < whole; i += NORM_LANES)
#pragma omp simd
    for (int j = 0; j < NORM_LANES; j++) lane[j] += (double)g[i + j] * g[i + j];
  double sum = 0;
  for (int j = 0; j < NORM_LANES; j++) sum += lane[j];
  for (int64_t i = whole; i < n; i++) sum += (double)g[i] * g[i];
  return sum;
}

/* NORM_STREAMS whole blocks from g at once, each summed exactly as block_norm_sq sums it: one core
 * reading several streams keeps more loads in flight than one stream lets it (a pure read runs at
 * ~21 GB/s on two cores one block at a time, ~25 four at a time), and asking for each stream's line
 * NORM_AHEAD elements ahead keeps more still (~30 GB/s; 2 KB ahead was the best of 1 to 16 KB). */
enum { NORM_AHEAD = 512 };
CPU_WIDE static void blocks_norm_sq(const real *g, double *out) {
  double lane[NORM_STREAMS][NORM_LANES] = {{0}};
  for (int64_t i = 0; i < NORM_BLOCK; i += NORM_LANES)
    for (int s = 0; s < NORM_STREAMS; s++) {
      if (i + NORM_AHEAD < NORM_BLOCK) __builtin_prefetch(g + s * NORM_BLOCK + i + NORM_AHEAD);
#pragma omp simd
      for (int j = 0; j < NORM_LANES; j++) lane[s][j] += (double)g[s * NORM_BLOCK + i + j] * g[s * NORM_BLOCK + i + j];
    }
  for (int s = 0; s < NORM_STREAMS; s++) {
    out[s] = 0;
    for (int j = 0; j < NORM_LANES; j++) out[s] += lane[s][j];
  }
}

double optim_norm_sq(int64_t n, const real *grad) {
  /* Fixed blocks of NORM_BLOCK elements, each summed in parallel (NORM_STREAMS whole blocks a task, the
   * rest one a task), then the block sums added in block order: the result does not depend on the
   * number of threads. */
  int64_t blocks = (n + NORM_BLOCK - 1) / NORM_BLOCK, whole = n / NORM_BLOCK;
  double total = 0;
  for (int64_t first = 0; first < blocks; first += NORM_BATCH) {
    double partial[NORM_BATCH];
    int64_t count = blocks - first < NORM_BATCH ? blocks - first : NORM_BATCH;
    int64_t grouped = (whole - first < count ? whole - first : count) / NORM_STREAMS * NORM_STREAMS;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < grouped / NORM_STREAMS + (count - grouped); t++) {
      int64_t b = t < grouped / NORM_STREAMS ? t * NORM_STREAMS : grouped + (t - grouped / NORM_STREAMS);
      int64_t start = (first + b) * NORM_BLOCK, len = n - start < NORM_BLOCK ? n - start : NORM_BLOCK;
      if (b < grouped) blocks_norm_sq(grad + start, partial + b);
      else partial[b] = block_norm_sq(grad + start, len);
    }
    for (int64_t b = 0; b < count; b++) total += partial[b];
  }
  return total;
}

double optim_norm_sq_many(int count, const int64_t *n, const real *const *grad) {
  double total = 0;
  for (int i = 0; i < count; i++) total += optim_norm_sq(n[i], grad[i]);
  return total;
}
