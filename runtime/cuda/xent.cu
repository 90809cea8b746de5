/* xent.cu: softmax cross entropy over logits split by columns (vocabulary-parallel): the row max, the
 * sums, the loss (summed in a fixed order, returned to the host) and the in-place backward. One block
 * per row. */
#include "gpu.h"

enum { THREADS = 512 };

/* The columns of this shard that are real vocabulary entries (the rest is padding): [0, valid). */
static int64_t xent_valid(int64_t cols, int64_t col0, int64_t vocab) {
  return col0 >= vocab ? 0 : (cols < vocab - col0 ? cols : vocab - col0);
}

/* A row counts when its target is a token (0 or more) and not the ignored id: -1 marks a position with
 * nothing to predict (masked-LM data off the mask, evaluation past the file's end). */
static __device__ bool xent_counts(int32_t target, int64_t ignore) { return target >= 0 && target != ignore; }

/* max[n] = max_j z[n, j] over the valid columns; -inf when the shard holds none. */
__global__ void xent_max_kernel(int64_t cols, int64_t valid, const __nv_bfloat16 *logits, float *max) {
  const __nv_bfloat16 *z = logits + (int64_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) m = fmaxf(m, ld(z[j]));
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
  if (m != -INFINITY)
    for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) sum += expf(ld(z[j]) - m);
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    int64_t t = (int64_t)targets[n] - col0;
    sumexp[n] = sum;
    target[n] = t >= 0 && t < valid ? ld(z[t]) : 0.0f;
  }
}

/* One block: lse[n] = max[n] + log(sumexp[n]) for every row, and
 *   loss = scale·Σ_n (lse[n] − target[n]) over the rows that count,
 * in double: thread i sums rows i, i + THREADS, … in order, then the threads' sums meet in a fixed tree. */
__global__ void xent_loss_kernel(int64_t N, const int32_t *targets, int64_t ignore, const float *max,
                                 const float *sumexp, const float *target, float *lse, double *loss) {
  __shared__ double partial[THREADS];
  double sum = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    double row_lse = (double)max[n] + log((double)sumexp[n]);
    lse[n] = (float)row_lse;
    if (xent_counts(targets[n], ignore)) sum += row_lse - (double)target[n];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0];
}

/* In place: z[n, j] ← scale·(exp(z − lse[n]) − [col0 + j = t_n]) on valid columns, 0 on padding and on
 * rows that do not count. */
__global__ void xent_backward_kernel(int64_t cols, int64_t valid, __nv_bfloat16 *logits, int64_t col0,
                                     const int32_t *targets, int64_t ignore, const float *lse, float scale) {
  int64_t n = blockIdx.x;
  __nv_bfloat16 *z = logits + n * cols;
  int64_t t = (int64_t)targets[n] - col0, kept = xent_counts(targets[n], ignore) ? valid : 0;
  float row_lse = lse[n];
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float g = 0;
    if (j < kept) g = scale * (expf(ld(z[j]) - row_lse) - (j == t ? 1.0f : 0.0f));
    z[j] = st(g);
  }
}

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
  double *loss = (double *)gpu_scratch(GPU_SCRATCH_C, sizeof(double)), host = 0;
  xent_loss_kernel<<<1, THREADS, 0, gpu_stream()>>>(N, targets, ignore, max, sumexp, target, lse, loss);
  gpu_check_launch("xent_loss_kernel");
  device_download(&host, loss, sizeof host);
  return scale * host;
}

void k_xent_backward(int64_t N, int64_t cols, act_t *logits, int64_t col0, int64_t vocab, const int32_t *targets,
                     int64_t ignore, const real *lse, real scale) {
  if (N <= 0) return;
  xent_backward_kernel<<<(unsigned)N, THREADS, 0, gpu_stream()>>>(cols, xent_valid(cols, col0, vocab), logits, col0,
                                                                   targets, ignore, lse, scale);
  gpu_check_launch("xent_backward_kernel");
}

/* The steps one after another (each already a pass of its own on the GPU), then the gradient. */
double k_xent_forward_grad(int64_t N, int64_t cols, act_t *logits, int64_t vocab, const int32_t *targets,
                           int64_t ignore, real scale, real *max, real *sumexp, real *target, real *lse) {
  k_xent_max(N, cols, logits, 0, vocab, max);
  k_xent_sums(N, cols, logits, 0, vocab, targets, max, sumexp, target);
  double loss = k_xent_loss(N, targets, ignore, max, sumexp, target, scale, lse);
  k_xent_backward(N, cols, logits, 0, vocab, targets, ignore, lse, scale);
  return loss;
}
