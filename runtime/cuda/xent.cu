/* xent.cu: softmax cross entropy over logits split by columns (vocabulary-parallel): the row max, the
 * sums, the loss (summed in a fixed order, returned to the host) and the in-place backward, a block per
 * row with 16-byte accesses; over whole rows, one pass that reads each row once into shared memory and
 * writes its gradient from there. */
#include "gpu.h"

enum { THREADS = 512 };

/* The columns of this shard that are real vocabulary entries (the rest is padding): [0, valid). */
static int64_t xent_valid(int64_t cols, int64_t col0, int64_t vocab) {
  return col0 >= vocab ? 0 : (cols < vocab - col0 ? cols : vocab - col0);
}

/* A row counts when its target is a token (0 or more) and not the ignored id: -1 marks a position with
 * nothing to predict (masked-LM data off the mask, evaluation past the file's end). */
static __device__ bool xent_counts(int32_t target, int64_t ignore) { return target >= 0 && target != ignore; }

/* ---- a row in 16-byte vectors ---------------------------------------------------------------------- */

/* The columns of row z before its first 16-byte boundary (at most 7, and at most count): a row is read
 * as those, then whole vectors of 8 columns, then the columns left over. */
static __device__ __forceinline__ int64_t row_head(const __nv_bfloat16 *z, int64_t count) {
  int64_t head = (int64_t)((16 - (uintptr_t)z % 16) % 16 / 2);
  return head < count ? head : count;
}

/* f(j, z[j]) for the columns j in [0, count) of this thread; the block's threads share the row. */
template <typename F>
static __device__ __forceinline__ void row_each(const __nv_bfloat16 *z, int64_t count, F f) {
  int64_t head = row_head(z, count), vectors = (count - head) / 8, tail = head + 8 * vectors;
  for (int64_t j = threadIdx.x; j < head; j += blockDim.x) f(j, ld(z[j]));
#pragma unroll 4
  for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) {
    float x[8];
    load8(z + head + 8 * v, x);
#pragma unroll
    for (int k = 0; k < 8; k++) f(head + 8 * v + k, x[k]);
  }
  for (int64_t j = tail + threadIdx.x; j < count; j += blockDim.x) f(j, ld(z[j]));
}

/* z[j] = f(j, z[j]) for the columns j in [0, count) of this thread, in place: the vectors come in
 * batches, all loaded before any is stored, so that several loads are in flight. */
template <typename F>
static __device__ __forceinline__ void row_update(__nv_bfloat16 *z, int64_t count, F f) {
  enum { BATCH = 4 };
  int64_t head = row_head(z, count), vectors = (count - head) / 8, tail = head + 8 * vectors;
  for (int64_t j = threadIdx.x; j < head; j += blockDim.x) z[j] = st(f(j, ld(z[j])));
  for (int64_t v0 = threadIdx.x; v0 < vectors; v0 += BATCH * blockDim.x) {
    float x[BATCH][8];
#pragma unroll
    for (int b = 0; b < BATCH; b++)
      if (v0 + b * blockDim.x < vectors) load8(z + head + 8 * (v0 + b * blockDim.x), x[b]);
#pragma unroll
    for (int b = 0; b < BATCH; b++) {
      int64_t j0 = head + 8 * (v0 + b * blockDim.x);
      if (j0 >= tail) continue;
#pragma unroll
      for (int k = 0; k < 8; k++) x[b][k] = f(j0 + k, x[b][k]);
      store8(z + j0, x[b]);
    }
  }
  for (int64_t j = tail + threadIdx.x; j < count; j += blockDim.x) z[j] = st(f(j, ld(z[j])));
}

/* ---- the vocabulary-parallel steps ----------------------------------------------------------------- */

/* max[n] = max_j z[n, j] over the valid columns; -inf when the shard holds none. */
__global__ void xent_max_kernel(int64_t cols, int64_t valid, const __nv_bfloat16 *logits, float *max) {
  float m = -INFINITY;
  row_each(logits + (int64_t)blockIdx.x * cols, valid, [&](int64_t, float x) { m = fmaxf(m, x); });
  m = block_max(m);
  if (threadIdx.x == 0) max[blockIdx.x] = m;
}

/* sumexp[n] = Σ_j exp(z[n, j] − max[n]) over the valid columns; target[n] = z[n, t_n] when this shard
 * holds column t_n, else 0. */
__global__ void xent_sums_kernel(int64_t cols, int64_t valid, const __nv_bfloat16 *logits, int64_t col0,
                                 const int32_t *targets, const float *max, float *sumexp, float *target) {
  int64_t n = blockIdx.x;
  const __nv_bfloat16 *z = logits + n * cols;
  float m = max[n], sum = 0;
  if (m != -INFINITY) row_each(z, valid, [&](int64_t, float x) { sum += expf(x - m); });
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    int64_t t = (int64_t)targets[n] - col0;
    sumexp[n] = sum;
    target[n] = t >= 0 && t < valid ? ld(z[t]) : 0.0f;
  }
}

/* lse[n] = max[n] + log(sumexp[n]) for every row, and the loss's partial sum over the rows
 * [b·THREADS, (b + 1)·THREADS) of block b, Σ (lse[n] − target[n]) over those that count, in double, a row
 * a thread, the threads' terms meeting in a fixed tree; gpu_total_in_order adds the blocks in order. */
__global__ void xent_loss_kernel(int64_t N, const int32_t *targets, int64_t ignore, const float *max,
                                 const float *sumexp, const float *target, float *lse, double *partial) {
  int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  double term = 0;
  if (n < N) {
    double row_lse = (double)max[n] + log((double)sumexp[n]);
    lse[n] = (float)row_lse;
    if (xent_counts(targets[n], ignore)) term = row_lse - (double)target[n];
  }
  term = block_tree_sum(term);
  if (threadIdx.x == 0) partial[blockIdx.x] = term;
}

/* In place: z[n, j] ← scale·(exp(z − lse[n]) − [col0 + j = t_n]) on valid columns, 0 on padding and on
 * rows that do not count. */
__global__ void __launch_bounds__(THREADS, 2)
    xent_backward_kernel(int64_t cols, int64_t valid, __nv_bfloat16 *logits, int64_t col0,
                         const int32_t *targets, int64_t ignore, const float *lse, float scale) {
  int64_t n = blockIdx.x;
  int64_t t = (int64_t)targets[n] - col0, kept = xent_counts(targets[n], ignore) ? valid : 0;
  float row_lse = lse[n];
  row_update(logits + n * cols, cols, [&](int64_t j, float x) {
    return j < kept ? scale * (expf(x - row_lse) - (j == t ? 1.0f : 0.0f)) : 0.0f;
  });
}

/* ---- whole rows in one pass ------------------------------------------------------------------------ */

/* 16 bytes from global to shared memory without passing through registers (cp.async), and the wait for
 * every such copy of this thread. */
static __device__ __forceinline__ void copy16_async(void *shared, const void *global) {
  unsigned address = (unsigned)__cvta_generic_to_shared(shared);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global) : "memory");
}
static __device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/* A row kept in shared memory from element `lead` on (lead = the row's offset past a 16-byte boundary,
 * so that its vectors are aligned in both memories): vector u holds columns [8u − lead, 8u − lead + 8).
 * x = those columns widened, the ones outside [0, limit) −inf (out of the max, exp 0 in the sums). */
static __device__ __forceinline__ void kept_vector(const uint4 *kept, int64_t u, int lead, int64_t limit, float *x) {
  load8((const __nv_bfloat16 *)(kept + u), x);
  int64_t j0 = 8 * u - lead;
  if (j0 < 0 || j0 + 8 > limit)
#pragma unroll
    for (int k = 0; k < 8; k++)
      if (j0 + k < 0 || j0 + k >= limit) x[k] = -INFINITY;
}

/* The gradient of columns [j0, j0 + 8) to the row z of `cols` columns: one 16-byte store when all are in
 * the row (then aligned), else each that is. */
static __device__ __forceinline__ void store_columns(__nv_bfloat16 *z, int64_t cols, int64_t j0, const float *g) {
  if (j0 >= 0 && j0 + 8 <= cols) {
    store8(z + j0, g);
    return;
  }
#pragma unroll
  for (int k = 0; k < 8; k++)
    if (j0 + k >= 0 && j0 + k < cols) z[j0 + k] = st(g[k]);
}

/* Row n (a block): copied once into shared memory (cp.async), then from there the max, Σe with
 * e = exp(z − max), the target's logit, and the gradient scale·(e/Σe − onehot(t)) written over the row
 * (0 on padding, and on every column of a row that does not count): the row is read from memory once
 * and written once. max, sumexp and target as the steps write them. */
__global__ void __launch_bounds__(THREADS, 2)
    xent_forward_grad_kernel(int64_t cols, int64_t valid, __nv_bfloat16 *logits, const int32_t *targets,
                             int64_t ignore, float scale, float *max, float *sumexp, float *target) {
  extern __shared__ uint4 kept[];
  const float log2e = 1.4426950408889634f;
  int64_t n = blockIdx.x, t = targets[n];
  __nv_bfloat16 *z = logits + n * cols;
  int lead = (int)((uintptr_t)z % 16 / 2);
  __nv_bfloat16 *copy = (__nv_bfloat16 *)kept + lead; /* copy[j] = z[j] */
  int64_t head = row_head(z, cols), vectors = (cols - head) / 8, tail = head + 8 * vectors;
  for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) copy16_async(copy + head + 8 * v, z + head + 8 * v);
  for (int64_t j = threadIdx.x; j < head; j += blockDim.x) copy[j] = z[j];
  for (int64_t j = tail + threadIdx.x; j < cols; j += blockDim.x) copy[j] = z[j];
  copy_async_wait();
  __syncthreads();
  int64_t spans = (lead + cols + 7) / 8;
  float m = -INFINITY, sum = 0, x[8];
  for (int64_t u = threadIdx.x; u < spans; u += blockDim.x) {
    kept_vector(kept, u, lead, valid, x);
#pragma unroll
    for (int k = 0; k < 8; k++) m = fmaxf(m, x[k]);
  }
  m = block_max(m);
  float shift = m == -INFINITY ? 0.0f : -m * log2e; /* e = 2^(z·log2 e − max·log2 e) */
  for (int64_t u = threadIdx.x; u < spans && m != -INFINITY; u += blockDim.x) {
    kept_vector(kept, u, lead, valid, x);
#pragma unroll
    for (int k = 0; k < 8; k++) sum += exp2f(fmaf(x[k], log2e, shift));
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    max[n] = m;
    sumexp[n] = sum;
    target[n] = t >= 0 && t < valid ? ld(copy[t]) : 0.0f;
  }
  bool live = xent_counts((int32_t)t, ignore) && m != -INFINITY; /* then Σe ≥ 1 */
  float mul = live ? scale / sum : 0.0f;
  int64_t onehot = t < valid ? t : -1; /* the column that loses `scale` (none past the vocabulary) */
  for (int64_t u = threadIdx.x; u < spans; u += blockDim.x) {
    int64_t j0 = 8 * u - lead;
    int hit = onehot >= j0 && onehot < j0 + 8 ? (int)(onehot - j0) : -1; /* its place in this vector */
    float g[8] = {};
    if (live) {
      kept_vector(kept, u, lead, valid, x);
#pragma unroll
      for (int k = 0; k < 8; k++) g[k] = exp2f(fmaf(x[k], log2e, shift)) * mul - (k == hit ? scale : 0.0f);
    }
    store_columns(z, cols, j0, g);
  }
}

/* The shared memory xent_forward_grad_kernel keeps a row of `cols` in: whole vectors from the 16-byte
 * boundary at or before the row's start (up to 7 columns earlier) past its end. */
static size_t xent_kept_bytes(int64_t cols) { return (size_t)((cols + 14) / 8) * 16; }

/* Whether a row of `cols` fits in the shared memory a block may opt into (227 KB on sm_90); if it does,
 * the kernel is allowed that much, with the multiprocessor's memory given to shared memory first. */
static int xent_row_fits(int64_t cols) {
  int optin = 0;
  struct cudaFuncAttributes attr;
  size_t bytes = xent_kept_bytes(cols);
  gpu_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, gpu_context()->device),
            "the shared memory of a block");
  gpu_check(cudaFuncGetAttributes(&attr, xent_forward_grad_kernel), "xent_forward_grad_kernel's attributes");
  if (bytes + attr.sharedSizeBytes > (size_t)optin) return 0;
  gpu_check(cudaFuncSetAttribute(xent_forward_grad_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
            "xent_forward_grad_kernel's shared memory");
  gpu_check(cudaFuncSetAttribute(xent_forward_grad_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 (int)cudaSharedmemCarveoutMaxShared),
            "xent_forward_grad_kernel's carveout");
  return 1;
}

/* ---- the API ----------------------------------------------------------------------------------------- */

void k_xent_max(int64_t N, int64_t cols, const act_t *logits, int64_t col0, int64_t vocab, real *max) {
  if (N <= 0) return;
  xent_max_kernel<<<(unsigned)N, THREADS, 0, gpu_stream()>>>(cols, xent_valid(cols, col0, vocab), logits, max);
  gpu_check_launch("xent_max_kernel");
}

void k_xent_sums(int64_t N, int64_t cols, const act_t *logits, int64_t col0, int64_t vocab, const int32_t *targets,
                 const real *max, real *sumexp, real *target) {
  if (N <= 0) return;
  xent_sums_kernel<<<(unsigned)N, THREADS, 0, gpu_stream()>>>(cols, xent_valid(cols, col0, vocab), logits, col0,
                                                               targets, max, sumexp, target);
  gpu_check_launch("xent_sums_kernel");
}

double k_xent_loss(int64_t N, const int32_t *targets, int64_t ignore, const real *max, const real *sumexp,
                   const real *target, real scale, real *lse) {
  if (N <= 0) return 0;
  unsigned blocks = gpu_blocks(N, THREADS);
  double *partial = (double *)gpu_scratch(GPU_SCRATCH_C, (size_t)(blocks + 1) * sizeof(double));
  xent_loss_kernel<<<blocks, THREADS, 0, gpu_stream()>>>(N, targets, ignore, max, sumexp, target, lse, partial);
  gpu_check_launch("xent_loss_kernel");
  return scale * gpu_total_in_order(blocks, partial);
}

void k_xent_backward(int64_t N, int64_t cols, act_t *logits, int64_t col0, int64_t vocab, const int32_t *targets,
                     int64_t ignore, const real *lse, real scale) {
  if (N <= 0) return;
  xent_backward_kernel<<<(unsigned)N, THREADS, 0, gpu_stream()>>>(cols, xent_valid(cols, col0, vocab), logits, col0,
                                                                   targets, ignore, lse, scale);
  gpu_check_launch("xent_backward_kernel");
}

/* One pass where a row fits in a block's shared memory (GPT-2's 50,304 columns take 100.6 KB: two blocks a
 * multiprocessor), then the loss; a longer row takes the steps one after another, then the backward. */
double k_xent_forward_grad(int64_t N, int64_t cols, act_t *logits, int64_t vocab, const int32_t *targets,
                           int64_t ignore, real scale, real *max, real *sumexp, real *target, real *lse) {
  if (N <= 0) return 0;
  if (!xent_row_fits(cols)) {
    k_xent_max(N, cols, logits, 0, vocab, max);
    k_xent_sums(N, cols, logits, 0, vocab, targets, max, sumexp, target);
    double loss = k_xent_loss(N, targets, ignore, max, sumexp, target, scale, lse);
    k_xent_backward(N, cols, logits, 0, vocab, targets, ignore, lse, scale);
    return loss;
  }
  xent_forward_grad_kernel<<<(unsigned)N, THREADS, xent_kept_bytes(cols), gpu_stream()>>>(
      cols, xent_valid(cols, 0, vocab), logits, targets, ignore, scale, max, sumexp, target);
  gpu_check_launch("xent_forward_grad_kernel");
  return k_xent_loss(N, targets, ignore, max, sumexp, target, scale, lse);
}
