/* optim.cu: AdamW and the squared gradient norm over lists of tensors of fp32 master weights on the
 * GPU, each in one launch over all the tensors (a block finds its tensor in a table),
 * deterministic: the norm's sums run in an order fixed by the sizes alone. And the ordered total of
 * per-block sums that the cross entropy's loss uses. */
#include "gpu.h"

#include <math.h>

/* The step's constants: c1 and c2 are the bias corrections 1/(1 − β^t). */
struct AdamwStep {
  float b1, b2, eps, scale, lr, c1, c2;
};

/* g = s·grad; m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; p −= lr·(m·c1 / (sqrt(v·c2) + ε) + wd·p);
 * grad = 0 (the next step accumulates from zero). */
static __device__ __forceinline__ void adamw_element(const AdamwStep &s, float wd, float &param,
                                                     float &grad, float &m, float &v) {
  float g = s.scale * grad;
  float mi = s.b1 * m + (1 - s.b1) * g;
  float vi = s.b2 * v + (1 - s.b2) * g * g;
  m = mi;
  v = vi;
  param -= s.lr * (mi * s.c1 / (sqrtf(vi * s.c2) + s.eps) + wd * param);
  grad = 0;
}

/* A tensor of a multi-tensor kernel: its blocks are first, first + 1, ... (each over a fixed run of
 * its elements, the last one short); wide: every pointer allows 16-byte accesses. */
struct AdamTensor {
  float *param, *grad, *m, *v;
  __nv_bfloat16 *w; /* the compute copy, or NULL */
  int64_t n, first;
  float wd;
  int wide;
};
struct NormTensor {
  const float *grad;
  int64_t n, first;
  int wide;
};

/* The tensor that block b belongs to: the last of tensors[0 .. count) whose first block is at most
 * b (every tensor has at least one block). */
template <typename T>
static __device__ __forceinline__ T tensor_of(const T *tensors, int count, int64_t b) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (tensors[mid].first <= b) lo = mid;
    else hi = mid - 1;
  }
  return tensors[lo];
}

enum { ADAM_THREADS = 256, ADAM_BLOCK = 4 * 8 * ADAM_THREADS }; /* elements a block updates */

/* 8 floats at p (16-byte aligned) with two 16-byte global loads: the table's pointers are global
 * memory, which the compiler cannot see (a plain load would be a generic one). */
static __device__ __forceinline__ void load8_global(const float *p, float *x) {
  float4 a = __ldca((const float4 *)p), b = __ldca((const float4 *)p + 1);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

/* 8 elements at i of a wide tensor, with 16-byte accesses. */
static __device__ __forceinline__ void adamw8(const AdamwStep &s, const AdamTensor &t, int64_t i) {
  float p8[8], g8[8], m8[8], v8[8];
  load8_global(t.param + i, p8), load8_global(t.grad + i, g8);
  load8_global(t.m + i, m8), load8_global(t.v + i, v8);
#pragma unroll
  for (int k = 0; k < 8; k++) adamw_element(s, t.wd, p8[k], g8[k], m8[k], v8[k]);
  store8(t.param + i, p8), store8(t.grad + i, g8), store8(t.m + i, m8), store8(t.v + i, v8);
  if (t.w) store8(t.w + i, p8);
}

/* Block b updates elements [o, o + ADAM_BLOCK) of its tensor (fewer at its end): runs of 8 with
 * 16-byte accesses where the tensor is wide, the rest one at a time. */
__global__ void adamw_kernel(const AdamTensor *tensors, int count, AdamwStep s) {
  const AdamTensor t = tensor_of(tensors, count, blockIdx.x);
  int64_t o = (blockIdx.x - t.first) * (int64_t)ADAM_BLOCK;
  int64_t len = min(t.n - o, (int64_t)ADAM_BLOCK);
  int64_t vectors = t.wide ? len / 8 : 0;
  for (int64_t k = threadIdx.x; k < vectors; k += ADAM_THREADS) adamw8(s, t, o + 8 * k);
  for (int64_t i = o + 8 * vectors + threadIdx.x; i < o + len; i += ADAM_THREADS) {
    adamw_element(s, t.wd, t.param[i], t.grad[i], t.m[i], t.v[i]);
    if (t.w) t.w[i] = st(t.param[i]);
  }
}

/* Whether every pointer of a allows 16-byte accesses. */
static bool adam_wide(const AdamwTensor *a) {
  return gpu_aligned16(a->param) && gpu_aligned16(a->grad) && gpu_aligned16(a->m) &&
         gpu_aligned16(a->v) && (!a->w || gpu_aligned16(a->w));
}

/* The table of the tensors that have elements, uploaded to scratch slot B; *blocks gets the blocks
 * of ADAM_BLOCK elements that cover them. Returns the entries (0: nothing to do). */
static int adam_table(float wd, int count, const AdamwTensor *in, AdamTensor **table,
                      int64_t *blocks) {
  AdamTensor *host = (AdamTensor *)malloc((size_t)(count > 0 ? count : 1) * sizeof *host);
  int used = 0;
  *blocks = 0;
  for (int i = 0; i < count; i++) {
    const AdamwTensor *a = &in[i];
    if (a->n <= 0) continue;
    host[used++] = {a->param, a->grad, a->m, a->v, a->w, a->n, *blocks, a->decay ? wd : 0.0f,
                    adam_wide(a)};
    *blocks += (a->n + ADAM_BLOCK - 1) / ADAM_BLOCK;
  }
  *table = (AdamTensor *)gpu_scratch(GPU_SCRATCH_B, (size_t)(used > 0 ? used : 1) * sizeof *host);
  device_upload(*table, host, (size_t)used * sizeof *host);
  free(host);
  return used;
}

void optim_adamw_many(const AdamW *opt, int64_t t, double lr, double grad_scale, int count,
                      const AdamwTensor *tensors) {
  AdamwStep s = {(float)opt->beta1, (float)opt->beta2, (float)opt->eps, (float)grad_scale,
                 (float)lr, (float)(1 / (1 - pow(opt->beta1, (double)t))),
                 (float)(1 / (1 - pow(opt->beta2, (double)t)))};
  AdamTensor *table;
  int64_t blocks;
  int used = adam_table((float)opt->weight_decay, count, tensors, &table, &blocks);
  if (!used) return;
  adamw_kernel<<<(unsigned)blocks, ADAM_THREADS, 0, gpu_stream()>>>(table, used, s);
  gpu_check_launch("adamw_kernel");
}

void optim_adamw_step(const AdamW *opt, int64_t t, double lr, int decay, double grad_scale,
                      int64_t n, real *param, real *grad, real *m, real *v) {
  AdamwTensor one = {n, decay, param, grad, m, v, NULL};
  optim_adamw_many(opt, t, lr, grad_scale, 1, &one);
}

enum { NORM_THREADS = 256, NORM_BLOCK = 1 << 14 }; /* elements per block of the first pass */

/* partial[b] = Σ g² over block b's elements [o, o + NORM_BLOCK) of its tensor (fewer at its end),
 * in double: thread i takes every NORM_THREADS-th run of 8 from run i (16-byte loads where the
 * tensor is wide), then the rest one at a time, and the threads' sums meet in a fixed tree. */
__global__ void norm_partials_kernel(const NormTensor *tensors, int count, double *partial) {
  const NormTensor t = tensor_of(tensors, count, blockIdx.x);
  int64_t o = (blockIdx.x - t.first) * (int64_t)NORM_BLOCK;
  int64_t len = min(t.n - o, (int64_t)NORM_BLOCK);
  int64_t vectors = t.wide ? len / 8 : 0;
  const float *g = t.grad + o;
  double sum = 0;
#pragma unroll 4
  for (int64_t k = threadIdx.x; k < vectors; k += NORM_THREADS) {
    float x[8];
    load8(g + 8 * k, x);
#pragma unroll
    for (int j = 0; j < 8; j++) sum += (double)x[j] * x[j];
  }
  for (int64_t i = 8 * vectors + threadIdx.x; i < len; i += NORM_THREADS)
    sum += (double)g[i] * g[i];
  sum = block_tree_sum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

/* partial[count] = Σ_b partial[b]: thread i adds blocks i, i + NORM_THREADS, ... in order, then
 * the threads' sums meet in a fixed tree (one block: the order depends on count alone). */
__global__ void norm_total_kernel(int64_t count, double *partial) {
  double sum = 0;
  for (int64_t b = threadIdx.x; b < count; b += NORM_THREADS) sum += partial[b];
  sum = block_tree_sum(sum);
  if (threadIdx.x == 0) partial[count] = sum;
}

/* The table of the tensors that have elements, uploaded to scratch slot B; *blocks gets their
 * blocks. Returns the entries (0: nothing to do). */
static int norm_table(int count, const int64_t *n, const real *const *grad, NormTensor **table,
                      int64_t *blocks) {
  NormTensor *host = (NormTensor *)malloc((size_t)(count > 0 ? count : 1) * sizeof *host);
  int used = 0;
  *blocks = 0;
  for (int i = 0; i < count; i++) {
    if (n[i] <= 0) continue;
    host[used++] = {grad[i], n[i], *blocks, gpu_aligned16(grad[i])};
    *blocks += (n[i] + NORM_BLOCK - 1) / NORM_BLOCK;
  }
  *table = (NormTensor *)gpu_scratch(GPU_SCRATCH_B, (size_t)(used > 0 ? used : 1) * sizeof *host);
  device_upload(*table, host, (size_t)used * sizeof *host);
  free(host);
  return used;
}

double optim_norm_sq_many(int count, const int64_t *n, const real *const *grad) {
  NormTensor *table;
  int64_t blocks;
  int used = norm_table(count, n, grad, &table, &blocks);
  if (!used) return 0;
  double *partial = (double *)gpu_scratch(GPU_SCRATCH_C, (size_t)(blocks + 1) * sizeof(double));
  double total = 0;
  norm_partials_kernel<<<(unsigned)blocks, NORM_THREADS, 0, gpu_stream()>>>(table, used, partial);
  gpu_check_launch("norm_partials_kernel");
  norm_total_kernel<<<1, NORM_THREADS, 0, gpu_stream()>>>(blocks, partial);
  gpu_check_launch("norm_total_kernel");
  device_download(&total, partial + blocks, sizeof total);
  return total;
}

double optim_norm_sq(int64_t n, const real *grad) { return optim_norm_sq_many(1, &n, &grad); }

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
