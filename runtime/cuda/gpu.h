/* gpu.h: what the CUDA runtime's files share: each rank thread's context (device, stream, cuBLASLt,
 * scratch), checks that end the job with one line, and, for kernels, bf16 loads and stores and the
 * launch shapes. Included by the host C files (gcc) and the kernel files (nvcc). */
#ifndef PLAIT_GPU_H
#define PLAIT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#ifdef __CUDACC__
#include <cuda_bf16.h> /* before kernels.h, whose act_t it defines, is read as C */
#include <math.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#include "device.h"
#include "kernels.h"
#include "optim.h"

/* GEMM plans (cuBLASLt descriptors and the algorithm its heuristic chose) kept per shape. */
enum { GPU_GEMM_PLANS = 64 };
typedef struct {
  int used;
  int64_t key[8]; /* transposes, M, N, K, output type, alignments */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
} GpuGemmPlan;

/* Which kernels run each shape of attention, and cuDNN's plans and buffers (attention_path.c). */
typedef struct GpuAttention GpuAttention;

/* Device scratch a kernel call may use for its temporaries; contents do not outlive the call. */
enum { GPU_SCRATCH_A, GPU_SCRATCH_B, GPU_SCRATCH_C, GPU_SCRATCH_SLOTS };

/* The state behind the kernel API, one per thread that computes: a rank (a thread of the local backend,
 * or a process under NCCL) gets its own from device_init; other threads that touch device memory (the
 * local backend's worker) get one for the current device on first use. Kernels of a rank run in order
 * on its stream; host code that reads results waits on it. Freed when the thread ends. */
typedef struct {
  int device;
  int sms; /* the device's multiprocessors */
  cudaStream_t stream;
  cublasLtHandle_t lt;
  void *workspace; /* cuBLASLt's */
  size_t workspace_bytes;
  void *scratch[GPU_SCRATCH_SLOTS];
  size_t scratch_bytes[GPU_SCRATCH_SLOTS];
  void *pinned; /* host memory results come back through */
  size_t pinned_bytes;
  size_t planned_bytes; /* what the plan puts on this rank (device_expect), 0 until known */
  GpuGemmPlan plans[GPU_GEMM_PLANS];
  GpuAttention *attention; /* NULL until the first attention call or choice */
} GpuContext;

GpuContext *gpu_context(void);
static inline cudaStream_t gpu_stream(void) { return gpu_context()->stream; }

/* Ends the job with "plait: CUDA error in <what>: <cause>" unless err is cudaSuccess. */
void gpu_check(cudaError_t err, const char *what);
/* After a kernel launch: its configuration was accepted. */
void gpu_check_launch(const char *kernel);
/* Device memory, ending the job with the out-of-memory line of device_alloc when there is not enough. */
void *gpu_alloc(size_t bytes, const char *what);
/* old (NULL, or from here) freed and `bytes` of device memory allocated in order on this thread's stream:
 * buffers that grow while the job runs. */
void *gpu_buffer_grow(void *old, size_t bytes, const char *what);
/* Scratch slot `slot` of this thread's context with room for `bytes` (device memory). */
void *gpu_scratch(int slot, size_t bytes);
/* Pinned host memory of this thread's context with room for `bytes`. */
void *gpu_pinned(size_t bytes);
/* Whether p is GPU memory (device or managed); host memory, registered or not, is not. */
int gpu_is_device_memory(const void *p);
/* Waits for this thread's stream. */
void gpu_sync(const char *what);
/* dst[i] = src[0][i] ⊕ … ⊕ src[count-1][i] over GPU buffers, left to right (⊕: + or, with max, max
 * with NaN winning); bf16 elements are summed in float and rounded once (fold.cu). Returns when done. */
void gpu_fold(void *dst, const void *const *src, int count, int64_t n, int element_bytes, int bf16, int max);
/* The cuBLASLt plans' teardown (gemm.cu), called when a context is freed. */
void gpu_gemm_plans_free(GpuContext *c);
/* The attention's plans and buffers freed with the context (attention_path.c). */
void gpu_attention_free(GpuContext *c);
/* plait's own attention kernels (attention.cu), for what k_attention_forward and k_attention_backward
 * do not give to cuDNN. */
void plait_attention_forward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, act_t *out,
                             real *lse);
void plait_attention_backward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, const act_t *out,
                              const real *lse, const act_t *dout, act_t *dq, act_t *dk, act_t *dv);

/* Deterministic sums over rows come in two kernels: per chunk of GPU_ROW_CHUNK rows, partial[k][c] is
 * the chunk's sum of column c (rows in order); then out[c] += Σ_k partial[k][c], the chunks in an
 * order fixed by their number (gemm.cu). The bits depend on the shape alone. */
enum { GPU_ROW_CHUNK = 128 };
static inline int64_t gpu_row_chunks(int64_t rows) { return (rows + GPU_ROW_CHUNK - 1) / GPU_ROW_CHUNK; }
void gpu_finish_column_sums(int64_t chunks, int64_t C, const float *partial, float *out);

/* Deterministic sums in double: a block's values meet in a fixed tree (block_tree_sum below), then the
 * blocks' sums partial[0 .. count) in order, into partial[count] (which the caller leaves room for), and
 * the total comes back to the host (it waits for the stream; optim.cu). */
double gpu_total_in_order(int64_t count, double *partial);

/* The blocks of `threads` that cover n items. */
static inline unsigned gpu_blocks(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }
/* The blocks of `threads` for a kernel whose threads stride over `items` (a grid-stride loop): as many as
 * the kernel's occupancy keeps on every multiprocessor at once, fewer when the items are fewer. */
unsigned gpu_grid(const void *kernel, int threads, int64_t items);
/* The threads of a block that gives a thread to each of `items` columns (or vectors of 8): a whole number
 * of warps, at most 256; more items take more blocks. */
static inline int gpu_column_threads(int64_t items) { return items < 256 ? (int)(items + 31) / 32 * 32 : 256; }
/* Whether p allows 16-byte accesses. */
static inline int gpu_aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* bf16 ↔ float: loads widen exactly, stores round to nearest even. */
static __device__ __forceinline__ float ld(__nv_bfloat16 x) { return __bfloat162float(x); }
static __device__ __forceinline__ __nv_bfloat16 st(float x) { return __float2bfloat16_rn(x); }

/* 16-byte accesses: eight consecutive elements at p (16-byte aligned) widened to float, or rounded (bf16)
 * and stored (global memory); widen8 widens 8 bf16 already loaded. */
static __device__ __forceinline__ void widen8(uint4 raw, float *x) {
  const unsigned word[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    x[2 * k] = __uint_as_float(word[k] << 16);
    x[2 * k + 1] = __uint_as_float(word[k] & 0xffff0000u);
  }
}
static __device__ __forceinline__ void load8(const __nv_bfloat16 *p, float *x) { widen8(*(const uint4 *)p, x); }
static __device__ __forceinline__ void store8(__nv_bfloat16 *p, const float *y) {
  unsigned word[4];
#pragma unroll
  for (int k = 0; k < 4; k++) { /* a pair rounded to nearest even by one instruction, the first in the low half */
    __nv_bfloat162 pair = __floats2bfloat162_rn(y[2 * k], y[2 * k + 1]);
    memcpy(&word[k], &pair, sizeof word[k]);
  }
  __stwb((uint4 *)p, make_uint4(word[0], word[1], word[2], word[3])); /* one store (a plain one may be split) */
}
static __device__ __forceinline__ void load8(const float *p, float *x) {
  float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
static __device__ __forceinline__ void store8(float *p, const float *y) {
  __stwb((float4 *)p, make_float4(y[0], y[1], y[2], y[3]));
  __stwb((float4 *)p + 1, make_float4(y[4], y[5], y[6], y[7]));
}

/* W consecutive elements at p, bf16 or float: 8 through the 16-byte accesses above, or 1. */
static __device__ __forceinline__ void store1(__nv_bfloat16 *p, float y) { *p = st(y); }
static __device__ __forceinline__ void store1(float *p, float y) { *p = y; }
template <int W, typename T>
static __device__ __forceinline__ void load_vec(const T *p, float *x) {
  if constexpr (W == 8) load8(p, x);
  else x[0] = (float)p[0];
}
template <int W, typename T>
static __device__ __forceinline__ void store_vec(T *p, const float *y) {
  if constexpr (W == 8) store8(p, y);
  else store1(p, y[0]);
}

/* Sum and max over a warp; every lane gets the result (the same bits on every lane and every run). */
static __device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
static __device__ __forceinline__ double warp_sum_double(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
static __device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/* Sum in double over a block of a power-of-two size up to 1024, pairs meeting in a fixed tree; thread 0
 * gets the result. */
static __device__ __forceinline__ double block_tree_sum(double v) {
  __shared__ double sums[1024];
  sums[threadIdx.x] = v;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  return sums[0];
}

/* Sum over a block of up to 1024 threads (a multiple of 32); every thread gets the result. */
static __device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads(); /* partial may still be read by a previous call */
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : 0.0f;
  return warp_sum(v);
}
static __device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : -INFINITY;
  return warp_max(v);
}
#endif

#endif
