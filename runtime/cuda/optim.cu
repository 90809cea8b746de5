/* optim.cu: AdamW over a tensor of fp32 master weights and the squared gradient norm, on the GPU
 * (deterministic: the norm's sums run in an order fixed by the size alone), and the ordered total of
 * per-block sums the norm and the cross entropy's loss share. */
#include "gpu.h"

#include <math.h>

/* The step's constants: c1 and c2 are the bias corrections 1/(1 − β^t). */
struct AdamwStep {
  float b1, b2, eps, scale, lr, wd, c1, c2;
};

/* g = s·grad; m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; p −= lr·(m·c1 / (sqrt(v·c2) + ε) + wd·p);
 * grad = 0 (the next step accumulates from zero). */
static __device__ __forceinline__ void adamw_element(const AdamwStep &s, float &param, float &grad, float &m,
                                                     float &v) {
  float g = s.scale * grad;
  float mi = s.b1 * m + (1 - s.b1) * g;
  float vi = s.b2 * v + (1 - s.b2) * g * g;
  m = mi;
  v = vi;
  param -= s.lr * (mi * s.c1 / (sqrtf(vi * s.c2) + s.eps) + s.wd * param);
  grad = 0;
}

/* Threads stride over the grid: the first `vectors` runs of 8 elements with 16-byte accesses, the rest
 * one at a time. */
__global__ void adamw_kernel(int64_t n, int64_t vectors, AdamwStep s, float *param, float *grad, float *m,
                             float *v) {
  int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t w = first; w < vectors; w += step) {
    float p8[8], g8[8], m8[8], v8[8];
    load8(param + 8 * w, p8), load8(grad + 8 * w, g8), load8(m + 8 * w, m8), load8(v + 8 * w, v8);
#pragma unroll
    for (int k = 0; k < 8; k++) adamw_element(s, p8[k], g8[k], m8[k], v8[k]);
    store8(param + 8 * w, p8), store8(grad + 8 * w, g8), store8(m + 8 * w, m8), store8(v + 8 * w, v8);
  }
  for (int64_t i = 8 * vectors + first; i < n; i += step) adamw_element(s, param[i], grad[i], m[i], v[i]);
}

void optim_adamw_step(const AdamW *opt, int64_t t, double lr, int decay, double grad_scale, int64_t n, real *param,
                      real *grad, real *m, real *v) {
  if (n <= 0) return;
  AdamwStep s = {(float)opt->beta1, (float)opt->beta2, (float)opt->eps, (float)grad_scale, (float)lr,
                 decay ? (float)opt->weight_decay : 0.0f, (float)(1 / (1 - pow(opt->beta1, (double)t))),
                 (float)(1 / (1 - pow(opt->beta2, (double)t)))};
  bool wide = gpu_aligned16(param) && gpu_aligned16(grad) && gpu_aligned16(m) && gpu_aligned16(v);
  int64_t vectors = wide ? n / 8 : 0;
  unsigned blocks = gpu_grid((const void *)adamw_kernel, 256, vectors ? vectors : n);
  adamw_kernel<<<blocks, 256, 0, gpu_stream()>>>(n, vectors, s, param, grad, m, v);
  gpu_check_launch("adamw_kernel");
}

enum { NORM_BLOCK = 1 << 14, NORM_THREADS = 256 }; /* elements per block of the first pass */

/* partial[b] = Σ g² over elements [b·NORM_BLOCK, (b+1)·NORM_BLOCK), in double: thread i takes every
 * NORM_THREADS-th element from i, then the threads' sums meet in a fixed tree. */
__global__ void norm_partials_kernel(int64_t n, const float *grad, double *partial) {
  int64_t first = (int64_t)blockIdx.x * NORM_BLOCK, last = min(n, first + NORM_BLOCK);
  double sum = 0;
  for (int64_t i = first + threadIdx.x; i < last; i += NORM_THREADS) sum += (double)grad[i] * grad[i];
  sum = block_tree_sum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

/* total = Σ_b partial[b] in block order (one thread: the blocks are few). */
__global__ void total_in_order_kernel(int64_t count, double *partial) {
  double sum = 0;
  for (int64_t b = 0; b < count; b++) sum += partial[b];
  partial[count] = sum;
}

double gpu_total_in_order(int64_t count, double *partial) {
  double total = 0;
  total_in_order_kernel<<<1, 1, 0, gpu_stream()>>>(count, partial);
  gpu_check_launch("total_in_order_kernel");
  device_download(&total, partial + count, sizeof total);
  return total;
}

double optim_norm_sq(int64_t n, const real *grad) {
  if (n <= 0) return 0;
  int64_t blocks = (n + NORM_BLOCK - 1) / NORM_BLOCK;
  double *partial = (double *)gpu_scratch(GPU_SCRATCH_C, (size_t)(blocks + 1) * sizeof(double));
  norm_partials_kernel<<<(unsigned)blocks, NORM_THREADS, 0, gpu_stream()>>>(n, grad, partial);
  gpu_check_launch("norm_partials_kernel");
  return gpu_total_in_order(blocks, partial);
}
