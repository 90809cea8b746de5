/* gemm.cu: matrix products through cuBLASLt (bf16 operands, fp32 accumulation; fp32 weight gradients),
 * the GPU's measured GEMM rate, the bf16 copies of master weights, and the row sums of bias gradients. */
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- plans ------------------------------------------------------------------------------------- */

/* The largest power of two (up to 256) that divides the address: what cuBLASLt may assume of it. */
static int64_t alignment(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uintptr_t low = a & (~a + 1);
  return a == 0 || low > 256 ? 256 : (int64_t)low;
}

static void lt_check(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fprintf(stderr, "plait: cuBLASLt failed in %s (status %d)\n", what, (int)status);
  exit(1);
}

void gpu_gemm_plans_free(GpuContext *c) {
  for (int i = 0; i < GPU_GEMM_PLANS; i++) {
    GpuGemmPlan *p = &c->plans[i];
    if (!p->used) continue;
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->c);
    cublasLtMatmulDescDestroy(p->op);
    p->used = 0;
  }
}

/* Row-major C[M,N] = op(A)·op(B) is column-major Cᵀ[N,M] = op(B)ᵀ·op(A)ᵀ: cuBLASLt's first operand is
 * our B (N×K, stored K×N with ld N, or N×K with ld K and transposed), its second our A (K×M, stored
 * M×K with ld K, or K×M with ld M and transposed), and the result is N×M with ld N. */
static void plan_build(GpuContext *ctx, GpuGemmPlan *p, const int64_t *key) {
  int trans_a = (int)key[0], trans_b = (int)key[1];
  int64_t M = key[2], N = key[3], K = key[4];
  cudaDataType_t out = key[5] & 1 ? CUDA_R_32F : CUDA_R_16BF;
  cublasOperation_t first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt_check(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  lt_check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first), "TRANSA");
  lt_check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &second, sizeof second), "TRANSB");
  lt_check(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, trans_b ? K : N, trans_b ? N : K, trans_b ? K : N), "layout A");
  lt_check(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, trans_a ? M : K, trans_a ? K : M, trans_a ? M : K), "layout B");
  lt_check(cublasLtMatrixLayoutCreate(&p->c, out, N, M, N), "layout C");
  cublasLtMatmulPreference_t pref;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  uint64_t workspace = ctx->workspace_bytes;
  uint32_t align_first = (uint32_t)key[7], align_second = (uint32_t)key[6], align_c = (uint32_t)(key[5] >> 8);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first, sizeof align_first);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second, sizeof align_second);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    fprintf(stderr, "plait: cuBLASLt has no algorithm for a %lld×%lld×%lld product (transposes %d %d, %s output)\n",
            (long long)M, (long long)N, (long long)K, trans_a, trans_b, key[5] & 1 ? "fp32" : "bf16");
    exit(1);
  }
  p->algo = result.algo;
  for (int i = 0; i < 8; i++) p->key[i] = key[i];
  p->used = 1;
}

/* The plan of a shape, built on first use; the table is a cache, so a full table starts over. */
static GpuGemmPlan *plan_for(GpuContext *ctx, const int64_t *key) {
  uint64_t hash = 1469598103934665603ull;
  for (int i = 0; i < 8; i++) hash = (hash ^ (uint64_t)key[i]) * 1099511628211ull;
  for (int probe = 0; probe < GPU_GEMM_PLANS; probe++) {
    GpuGemmPlan *p = &ctx->plans[(hash + probe) % GPU_GEMM_PLANS];
    if (!p->used) {
      plan_build(ctx, p, key);
      return p;
    }
    int same = 1;
    for (int i = 0; i < 8 && same; i++) same = p->key[i] == key[i];
    if (same) return p;
  }
  gpu_gemm_plans_free(ctx);
  return plan_for(ctx, key);
}

/* C = alpha·op(A)·op(B) + beta·C with C in bf16 (fp32 = 0) or fp32 (fp32 = 1). */
static void matmul(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const void *A, const void *B,
                   float beta, void *C, int fp32) {
  GpuContext *ctx = gpu_context();
  int64_t key[8] = {trans_a, trans_b, M, N, K, fp32 | alignment(C) << 8, alignment(A), alignment(B)};
  GpuGemmPlan *p = plan_for(ctx, key);
  lt_check(cublasLtMatmul(ctx->lt, p->op, &alpha, B, p->a, A, p->b, &beta, C, p->c, C, p->c, &p->algo, ctx->workspace,
                          ctx->workspace_bytes, ctx->stream), "cublasLtMatmul");
}

/* ---- the API ----------------------------------------------------------------------------------- */

/* x[i] = beta·x[i] (0 when beta is 0, even over NaN): a product over an empty inner dimension. */
template <typename T>
__global__ void scale_kernel(int64_t n, float beta, T *x) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = beta == 0.0f ? (T)0.0f : (T)(beta * (float)x[i]);
}

void k_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, real alpha, const act_t *A, const act_t *B,
            real beta, act_t *C) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    scale_kernel<<<gpu_blocks(M * N, 256), 256, 0, gpu_stream()>>>(M * N, beta, C);
    gpu_check_launch("scale_kernel");
    return;
  }
  matmul(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, 0);
}

void k_gemm_grad(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const act_t *A, const act_t *B, real *C) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  matmul(trans_a, trans_b, M, N, K, 1.0f, A, B, 1.0f, C, 1);
}

/* x[i] = a small pattern, so that the rate is not measured on zeros. */
__global__ void pattern_kernel(int64_t n, __nv_bfloat16 *x) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = st((float)(i % 7 - 3) / 8.0f);
}

double k_gemm_rate(int64_t n, int repeats) {
  if (n <= 0 || repeats <= 0) return 0;
  cudaStream_t stream = gpu_stream();
  __nv_bfloat16 *a = (__nv_bfloat16 *)gpu_alloc((size_t)(3 * n * n) * sizeof *a, "the GEMM rate");
  __nv_bfloat16 *b = a + n * n, *c = b + n * n;
  pattern_kernel<<<gpu_blocks(2 * n * n, 256), 256, 0, stream>>>(2 * n * n, a);
  gpu_check_launch("pattern_kernel");
  cudaEvent_t start, stop;
  gpu_check(cudaEventCreate(&start), "cudaEventCreate");
  gpu_check(cudaEventCreate(&stop), "cudaEventCreate");
  k_gemm(0, 0, n, n, n, 1, a, b, 0, c);
  float best = 0;
  for (int r = 0; r < repeats; r++) {
    float ms;
    cudaEventRecord(start, stream);
    k_gemm(0, 0, n, n, n, 1, a, b, 0, c);
    cudaEventRecord(stop, stream);
    gpu_check(cudaEventSynchronize(stop), "the GEMM rate");
    cudaEventElapsedTime(&ms, start, stop);
    if (r == 0 || ms < best) best = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  gpu_check(cudaFree(a), "cudaFree");
  return best > 0 ? 2.0 * (double)n * (double)n * (double)n / (best * 1e-3) : 0;
}

/* dst[i] = bf16(src[i]), rounded to nearest even: the first `vectors` runs of 8 with 16-byte accesses,
 * the rest one at a time, threads striding over the grid. */
__global__ void to_act_kernel(int64_t n, int64_t vectors, const float *src, __nv_bfloat16 *dst) {
  int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t v = first; v < vectors; v += step) {
    float x[8];
    load8(src + 8 * v, x);
    store8(dst + 8 * v, x);
  }
  for (int64_t i = 8 * vectors + first; i < n; i += step) dst[i] = st(src[i]);
}

void k_to_act(int64_t n, const real *src, act_t *dst) {
  if (n <= 0) return;
  int64_t vectors = gpu_aligned16(src) && gpu_aligned16(dst) ? n / 8 : 0;
  unsigned blocks = gpu_grid((const void *)to_act_kernel, 256, vectors ? vectors : n);
  to_act_kernel<<<blocks, 256, 0, gpu_stream()>>>(n, vectors, src, dst);
  gpu_check_launch("to_act_kernel");
}

/* ---- row sums ---------------------------------------------------------------------------------- */

/* The row sums' blocks: SUM_SLICE threads across (a thread takes W columns: 8, 16-byte loads, or
 * 1) by SUM_LANES down; lane j of chunk k sums its rows k·R + j, k·R + j + SUM_LANES, ... in order,
 * then the lanes' sums meet in lane order. R, the rows of a chunk, a multiple of SUM_LANES, comes
 * from the shape alone, so that about SUM_BLOCKS blocks cover x (the bits depend on the shape). */
enum { SUM_SLICE = 32, SUM_LANES = 8, SUM_BLOCKS = 1024 };

static int64_t chunk_rows(int64_t rows, int64_t slices) {
  int64_t r = (rows * slices + SUM_BLOCKS - 1) / SUM_BLOCKS;
  return (r + SUM_LANES - 1) / SUM_LANES * SUM_LANES;
}

/* partial[k][c] = Σ_r x[r][c] over the R rows r of chunk k (blockIdx.y), for the SUM_SLICE·W
 * columns of slice blockIdx.x: each lane's sum in float, then the lanes' in order through shared
 * memory. */
template <int W>
__global__ void column_partials_kernel(int64_t rows, int64_t C, int64_t R, const __nv_bfloat16 *x,
                                       float *partial) {
  __shared__ float lane_sums[SUM_LANES][SUM_SLICE * W];
  int64_t c0 = (int64_t)blockIdx.x * SUM_SLICE * W, c = c0 + threadIdx.x * W, k = blockIdx.y;
  int64_t last = min(rows, (k + 1) * R);
  float sum[W] = {};
  if (c < C) {
#pragma unroll 8
    for (int64_t r = k * R + threadIdx.y; r < last; r += SUM_LANES) {
      float v[W];
      load_vec<W>(x + r * C + c, v);
#pragma unroll
      for (int j = 0; j < W; j++) sum[j] += v[j];
    }
  }
#pragma unroll
  for (int j = 0; j < W; j++) lane_sums[threadIdx.y][threadIdx.x * W + j] = sum[j];
  __syncthreads();
  int first = threadIdx.y * SUM_SLICE + threadIdx.x;
  for (int i = first; i < SUM_SLICE * W; i += SUM_SLICE * SUM_LANES) {
    float total = 0;
#pragma unroll
    for (int l = 0; l < SUM_LANES; l++) total += lane_sums[l][i];
    if (c0 + i < C) partial[k * C + c0 + i] = total;
  }
}

/* out[c] = Σ_k partial[k][c] into a float (+=) or a bf16 (=) column: lane j of a column sums chunks
 * j, j + FINISH_LANES, ... in order, then the lanes' sums meet in lane order. */
enum { FINISH_LANES = 32 };
static __device__ __forceinline__ void finish_column(float *out, float sum) { *out += sum; }
static __device__ __forceinline__ void finish_column(__nv_bfloat16 *out, float sum) {
  *out = st(sum);
}

template <typename T>
__global__ void finish_sums_kernel(int64_t chunks, int64_t C, const float *partial, T *out) {
  __shared__ float lane_sums[FINISH_LANES][SUM_SLICE];
  int64_t c = (int64_t)blockIdx.x * SUM_SLICE + threadIdx.x;
  float sum = 0;
  if (c < C) {
#pragma unroll 8
    for (int64_t k = threadIdx.y; k < chunks; k += FINISH_LANES) sum += partial[k * C + c];
  }
  lane_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y > 0 || c >= C) return;
  float total = 0;
#pragma unroll
  for (int l = 0; l < FINISH_LANES; l++) total += lane_sums[l][threadIdx.x];
  finish_column(out + c, total);
}

template <typename T>
static void finish_sums(int64_t chunks, int64_t C, const float *partial, T *out) {
  dim3 block(SUM_SLICE, FINISH_LANES);
  finish_sums_kernel<<<gpu_blocks(C, SUM_SLICE), block, 0, gpu_stream()>>>(chunks, C, partial, out);
  gpu_check_launch("finish_sums_kernel");
}

void gpu_finish_column_sums(int64_t chunks, int64_t C, const float *partial, float *out) {
  finish_sums(chunks, C, partial, out);
}

/* The chunks' partial sums of x's columns (scratch slot A); *chunks gets their number. */
static float *column_partials(int64_t rows, int64_t C, const act_t *x, int64_t *chunks) {
  bool vec = C % 8 == 0 && gpu_aligned16(x);
  int64_t slices = vec ? (C / 8 + SUM_SLICE - 1) / SUM_SLICE : gpu_blocks(C, SUM_SLICE);
  int64_t R = chunk_rows(rows, slices);
  *chunks = (rows + R - 1) / R;
  float *partial = (float *)gpu_scratch(GPU_SCRATCH_A, (size_t)(*chunks * C) * sizeof(float));
  dim3 grid((unsigned)slices, (unsigned)*chunks), block(SUM_SLICE, SUM_LANES);
  if (vec) column_partials_kernel<8><<<grid, block, 0, gpu_stream()>>>(rows, C, R, x, partial);
  else column_partials_kernel<1><<<grid, block, 0, gpu_stream()>>>(rows, C, R, x, partial);
  gpu_check_launch("column_partials_kernel");
  return partial;
}

void k_sum_rows(int64_t rows, int64_t C, const act_t *x, real *out) {
  if (rows <= 0 || C <= 0) return;
  int64_t chunks;
  float *partial = column_partials(rows, C, x, &chunks);
  finish_sums(chunks, C, partial, out);
}

void k_sum_rows_act(int64_t rows, int64_t C, const act_t *x, act_t *out) {
  if (C <= 0) return;
  if (rows <= 0) {
    gpu_check(cudaMemsetAsync(out, 0, (size_t)C * sizeof *out, gpu_stream()), "k_sum_rows_act");
    return;
  }
  int64_t chunks;
  float *partial = column_partials(rows, C, x, &chunks);
  finish_sums(chunks, C, partial, out);
}
