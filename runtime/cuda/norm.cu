/* norm.cu: layer norm and RMS norm over the rows of a matrix, forward and backward: one warp per row,
 * sums in fp32, parameter gradients summed over rows in a fixed order. */
#include "gpu.h"

/* A row is read VEC elements at a time: 8 (16-byte loads) when the width and the pointers allow, else
 * one (gpu.h's load_vec and store_vec). Lane l of the warp holds elements l·VEC + 32·VEC·j of the row. */

enum { ROWS_PER_BLOCK = 8 }; /* warps of 32 in a block of 256 */

/* The weights of columns c..c+VEC, or ones for a norm without weight (w NULL). */
template <int VEC>
static __device__ __forceinline__ void load_weight(const __nv_bfloat16 *w, int64_t c, float *out) {
  if (w) {
    load_vec<VEC>(w + c, out);
    return;
  }
#pragma unroll
  for (int k = 0; k < VEC; k++) out[k] = 1.0f;
}

/* y = (x − mean)·rstd·w + b over columns c..c+VEC of row r (no b: RMS norm, or a norm without bias). */
template <int VEC>
static __device__ __forceinline__ void norm_write(int64_t r, int64_t C, int64_t c, const float *v, float mean,
                                                  float rstd, const __nv_bfloat16 *w, const __nv_bfloat16 *b,
                                                  __nv_bfloat16 *y) {
  float wv[VEC], bv[VEC], out[VEC];
  load_weight<VEC>(w, c, wv);
  if (b) load_vec<VEC>(b + c, bv);
#pragma unroll
  for (int k = 0; k < VEC; k++) out[k] = (v[k] - mean) * rstd * wv[k] + (b ? bv[k] : 0.0f);
  store_vec<VEC>(y + r * C + c, out);
}

/* f(c, v) for the lane's vectors of a row, v its VEC columns from c = lane·VEC, lane·VEC + 32·VEC, … < C:
 * read from xr each time, or with HELD > 0 (VEC 8, C ≤ 256·HELD) kept in `held` by the first call and
 * widened from there, so that the row is read from memory once. */
template <int VEC, int HELD, typename F>
static __device__ __forceinline__ void lane_vectors(const __nv_bfloat16 *xr, int64_t C, uint4 *held, bool first, F f) {
  int lane = threadIdx.x % 32;
  float v[VEC];
  if constexpr (HELD == 0) {
    for (int64_t c = lane * VEC; c < C; c += 32 * VEC) {
      load_vec<VEC>(xr + c, v);
      f(c, v);
    }
  } else {
    static_assert(VEC == 8, "rows are held as 16-byte vectors");
#pragma unroll
    for (int h = 0; h < HELD; h++) {
      int64_t c = (lane + 32 * h) * 8;
      if (c >= C) continue;
      if (first) held[h] = *(const uint4 *)(xr + c);
      widen8(held[h], v);
      f(c, v);
    }
  }
}

/* Per row (layer norm when centred, RMS norm otherwise):
 *   mean = Σx/C (0 for RMS), var = Σ(x − mean)²/C, rstd = 1/sqrt(var + eps)
 *   y = (x − mean)·rstd·w + b   (no b for RMS)
 * mean (layer norm) and rstd are saved for the backward pass. Rows of up to 256·HELD columns are held in
 * registers (HELD > 0), wider ones read again for each sum. */
template <int VEC, bool CENTRED, int HELD>
__global__ void norm_forward_kernel(int64_t rows, int64_t C, const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                                    const __nv_bfloat16 *b, float eps, __nv_bfloat16 *y, float *mean_out,
                                    float *rstd_out) {
  int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
  if (r >= rows) return;
  const __nv_bfloat16 *xr = x + r * C;
  uint4 held[HELD > 0 ? HELD : 1];
  float sum = 0, square = 0;
  lane_vectors<VEC, HELD>(xr, C, held, true, [&](int64_t, const float *v) {
#pragma unroll
    for (int k = 0; k < VEC; k++) sum += v[k];
  });
  float mean = CENTRED ? warp_sum(sum) / (float)C : 0.0f;
  lane_vectors<VEC, HELD>(xr, C, held, false, [&](int64_t, const float *v) {
#pragma unroll
    for (int k = 0; k < VEC; k++) square += (v[k] - mean) * (v[k] - mean);
  });
  float rstd = 1.0f / sqrtf(warp_sum(square) / (float)C + eps);
  lane_vectors<VEC, HELD>(xr, C, held, false,
                          [&](int64_t c, const float *v) { norm_write<VEC>(r, C, c, v, mean, rstd, w, b, y); });
  if (threadIdx.x % 32 == 0) {
    if (CENTRED) mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

/* Per row, with g = w·dy and x̂ = (x − mean)·rstd:
 *   dx = rstd·(g − mean_C(g) − x̂·mean_C(g·x̂))   (RMS norm: mean 0 and no mean_C(g) term) */
template <int VEC, bool CENTRED>
__global__ void norm_backward_kernel(int64_t rows, int64_t C, const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                                     const float *mean_in, const float *rstd_in, const __nv_bfloat16 *dy,
                                     __nv_bfloat16 *dx) {
  int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const __nv_bfloat16 *xr = x + r * C, *dyr = dy + r * C;
  float mean = CENTRED ? mean_in[r] : 0.0f, rstd = rstd_in[r], sum_g = 0, sum_gx = 0;
  float xv[VEC], wv[VEC], gv[VEC];
  for (int64_t c = lane * VEC; c < C; c += 32 * VEC) {
    load_vec<VEC>(xr + c, xv);
    load_weight<VEC>(w, c, wv);
    load_vec<VEC>(dyr + c, gv);
#pragma unroll
    for (int k = 0; k < VEC; k++) {
      float g = wv[k] * gv[k];
      sum_g += g;
      sum_gx += g * (xv[k] - mean) * rstd;
    }
  }
  float mean_g = CENTRED ? warp_sum(sum_g) / (float)C : 0.0f, mean_gx = warp_sum(sum_gx) / (float)C;
  for (int64_t c = lane * VEC; c < C; c += 32 * VEC) {
    float out[VEC];
    load_vec<VEC>(xr + c, xv);
    load_weight<VEC>(w, c, wv);
    load_vec<VEC>(dyr + c, gv);
#pragma unroll
    for (int k = 0; k < VEC; k++) out[k] = rstd * (wv[k] * gv[k] - mean_g - (xv[k] - mean) * rstd * mean_gx);
    store_vec<VEC>(dx + r * C + c, out);
  }
}

/* Per chunk k of rows (blockIdx.x) and column c: dw_partial[k][c] = Σ_r dy·x̂ and, for layer norm,
 * db_partial[k][c] = Σ_r dy, rows in order; a thread takes VEC columns from c. */
template <int VEC, bool CENTRED>
__global__ void norm_param_partials_kernel(int64_t rows, int64_t C, const __nv_bfloat16 *x, const float *mean_in,
                                           const float *rstd_in, const __nv_bfloat16 *dy, float *dw_partial,
                                           float *db_partial) {
  int64_t c = ((int64_t)blockIdx.y * blockDim.x + threadIdx.x) * VEC, k = blockIdx.x;
  if (c >= C) return;
  int64_t first = k * GPU_ROW_CHUNK, last = min(rows, first + GPU_ROW_CHUNK);
  float sum_w[VEC] = {}, sum_b[VEC] = {};
#pragma unroll 4
  for (int64_t r = first; r < last; r++) {
    float g[VEC], xv[VEC], mean = CENTRED ? mean_in[r] : 0.0f, rstd = rstd_in[r];
    load_vec<VEC>(dy + r * C + c, g);
    load_vec<VEC>(x + r * C + c, xv);
#pragma unroll
    for (int j = 0; j < VEC; j++) {
      sum_w[j] += g[j] * (xv[j] - mean) * rstd;
      sum_b[j] += g[j];
    }
  }
  store_vec<VEC>(dw_partial + k * C + c, sum_w);
  if (CENTRED) store_vec<VEC>(db_partial + k * C + c, sum_b);
}

/* The fused backward (norm_backward_fused_kernel): a block takes NORM_CHUNK rows, each warp every
 * WARPS-th of them, a row held in registers (HELD 16-byte vectors a lane, C ≤ 256·HELD). */
enum { NORM_CHUNK = 64 };

/* The words of v, hidden from the compiler's reuse: the second pass over a held row widens it again
 * rather than keep the first pass's floats alive across the row's sums. */
static __device__ __forceinline__ uint4 rewiden(uint4 v) {
  asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w));
  return v;
}

/* acc[0..4) += a[0..4), acc[4..8) += a[4..8): a lane's 8 column sums, two float4s 32 apart. */
static __device__ __forceinline__ void add8(float4 *acc, const float *a) {
  float4 lo = acc[0], hi = acc[32];
  acc[0] = make_float4(lo.x + a[0], lo.y + a[1], lo.z + a[2], lo.w + a[3]);
  acc[32] = make_float4(hi.x + a[4], hi.y + a[5], hi.z + a[6], hi.w + a[7]);
}

/* One row r of the fused backward: dx as norm_backward_kernel, and dy·x̂ (and dy, layer norm) added
 * to the lane's column sums in `sums`, the warp's own: vector h of array a at (a·held + h)·64 +
 * lane (columns 0..4) and 32 further (4..8). */
template <bool CENTRED, int HELD>
static __device__ __forceinline__ void backward_row(int64_t r, int64_t C, const __nv_bfloat16 *x,
                                                    const __nv_bfloat16 *w, const float *mean_in,
                                                    const float *rstd_in, const __nv_bfloat16 *dy,
                                                    __nv_bfloat16 *dx, float4 *sums, int held) {
  int lane = threadIdx.x % 32;
  uint4 xh[HELD], gh[HELD];
#pragma unroll
  for (int h = 0; h < HELD; h++) {
    int64_t c = (lane + 32 * h) * 8;
    if (c < C) xh[h] = *(const uint4 *)(x + r * C + c), gh[h] = *(const uint4 *)(dy + r * C + c);
  }
  float mean = CENTRED ? mean_in[r] : 0.0f, rstd = rstd_in[r], sum_g = 0, sum_gx = 0;
  float xv[8], wv[8], gv[8];
#pragma unroll
  for (int h = 0; h < HELD; h++) {
    if ((lane + 32 * h) * 8 >= C) continue;
    widen8(xh[h], xv), widen8(gh[h], gv), load_weight<8>(w, (lane + 32 * h) * 8, wv);
#pragma unroll
    for (int k = 0; k < 8; k++) {
      float g = wv[k] * gv[k];
      sum_g += g;
      sum_gx += g * (xv[k] - mean) * rstd;
    }
  }
  float mean_g = CENTRED ? warp_sum(sum_g) / (float)C : 0.0f, mean_gx = warp_sum(sum_gx) / (float)C;
#pragma unroll
  for (int h = 0; h < HELD; h++) {
    int64_t c = (lane + 32 * h) * 8;
    if (c >= C) continue;
    float out[8], xhat_g[8];
    widen8(rewiden(xh[h]), xv), widen8(rewiden(gh[h]), gv), load_weight<8>(w, c, wv);
#pragma unroll
    for (int k = 0; k < 8; k++) {
      out[k] = rstd * (wv[k] * gv[k] - mean_g - (xv[k] - mean) * rstd * mean_gx);
      xhat_g[k] = gv[k] * (xv[k] - mean) * rstd;
    }
    store8(dx + r * C + c, out);
    add8(sums + h * 64 + lane, xhat_g);
    if (CENTRED) add8(sums + (held + h) * 64 + lane, gv);
  }
}

/* The block's column sums over its warps, in warp order, into row blockIdx.x of dw_partial (array
 * 0) and, for layer norm, db_partial (array 1); a thread takes 8 columns at a time. */
template <bool CENTRED, int WARPS>
static __device__ __forceinline__ void store_block_sums(int64_t C, const float4 *sums, int held,
                                                        float *dw_partial, float *db_partial) {
  int arrays = CENTRED ? 2 : 1, stride = arrays * held * 64; /* float4s a warp */
  for (int64_t v = threadIdx.x; v < C / 8; v += WARPS * 32)
    for (int a = 0; a < arrays; a++) {
      float total[8] = {};
      const float4 *p = sums + (a * held + v / 32) * 64 + v % 32;
#pragma unroll
      for (int warp = 0; warp < WARPS; warp++) {
        float4 lo = p[warp * stride], hi = p[warp * stride + 32];
        const float add[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int k = 0; k < 8; k++) total[k] += add[k];
      }
      store8((a ? db_partial : dw_partial) + blockIdx.x * C + v * 8, total);
    }
}

/* norm_backward_kernel and norm_param_partials_kernel at once, x and dy read once (C a multiple of
 * 8 up to 256·HELD, 16-byte aligned rows): dx per row, and per block k of NORM_CHUNK rows
 * dw_partial[k][c] = Σ_r dy·x̂ (and db_partial[k][c] = Σ_r dy), each warp's rows in order, then the
 * warps in order. Dynamic shared memory: WARPS·(CENTRED ? 2 : 1)·held KB, held = ⌈C/256⌉. */
template <bool CENTRED, int HELD, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, 3)
    norm_backward_fused_kernel(int64_t rows, int64_t C, const __nv_bfloat16 *x,
                               const __nv_bfloat16 *w, const float *mean_in, const float *rstd_in,
                               const __nv_bfloat16 *dy, __nv_bfloat16 *dx, float *dw_partial,
                               float *db_partial) {
  extern __shared__ float4 sums[];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, held = (int)((C + 255) / 256);
  int slots = (CENTRED ? 2 : 1) * held * 64; /* a warp's float4s; slot i is lane i % 32's */
  float4 *mine = sums + warp * slots;
  for (int i = lane; i < slots; i += 32) mine[i] = make_float4(0, 0, 0, 0);
  int64_t first = (int64_t)blockIdx.x * NORM_CHUNK, last = min(rows, first + NORM_CHUNK);
  for (int64_t r = first + warp; r < last; r += WARPS)
    backward_row<CENTRED, HELD>(r, C, x, w, mean_in, rstd_in, dy, dx, mine, held);
  __syncthreads();
  store_block_sums<CENTRED, WARPS>(C, sums, held, dw_partial, db_partial);
}

/* dw[c] += Σ_k dw_partial[k][c] over the chunks k (blockIdx.y 0), and db from db_partial
 * (blockIdx.y 1): FINISH_GROUPS runs of consecutive chunks (threadIdx.y) each summed in order, then
 * the runs in order; 32 columns a block (threadIdx.x). */
enum { FINISH_GROUPS = 32 };
__global__ void __launch_bounds__(32 * FINISH_GROUPS)
    norm_finish_kernel(int64_t chunks, int64_t C, const float *dw_partial, float *dw,
                       const float *db_partial, float *db) {
  __shared__ float run_sums[FINISH_GROUPS][32];
  const float *partial = blockIdx.y ? db_partial : dw_partial;
  int64_t c = (int64_t)blockIdx.x * 32 + threadIdx.x, g = threadIdx.y;
  int64_t k = chunks * g / FINISH_GROUPS, end = chunks * (g + 1) / FINISH_GROUPS;
  float sum = 0;
  if (c < C) {
#pragma unroll 4
    for (; k < end; k++) sum += partial[k * C + c];
  }
  run_sums[g][threadIdx.x] = sum;
  __syncthreads();
  if (g != 0 || c >= C) return;
  float total = 0;
  for (int i = 0; i < FINISH_GROUPS; i++) total += run_sums[i][threadIdx.x];
  (blockIdx.y ? db : dw)[c] += total;
}

/* 8-wide loads need the width to be a multiple of 8 and every row pointer 16-byte aligned. */
static bool wide(int64_t C, const void *a, const void *b, const void *c, const void *d) {
  uintptr_t any = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d;
  return C % 8 == 0 && any % 16 == 0;
}

template <bool CENTRED>
static void norm_forward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const act_t *b, real eps, act_t *y,
                         real *mean, real *rstd) {
  if (rows <= 0 || C <= 0) return;
  unsigned blocks = gpu_blocks(rows, ROWS_PER_BLOCK);
  cudaStream_t stream = gpu_stream();
  if (!wide(C, x, w, b, y))
    norm_forward_kernel<1, CENTRED, 0><<<blocks, 256, 0, stream>>>(rows, C, x, w, b, eps, y, mean, rstd);
  else if (C <= 256 * 4)
    norm_forward_kernel<8, CENTRED, 4><<<blocks, 256, 0, stream>>>(rows, C, x, w, b, eps, y, mean, rstd);
  else if (C <= 256 * 8)
    norm_forward_kernel<8, CENTRED, 8><<<blocks, 256, 0, stream>>>(rows, C, x, w, b, eps, y, mean, rstd);
  else
    norm_forward_kernel<8, CENTRED, 0><<<blocks, 256, 0, stream>>>(rows, C, x, w, b, eps, y, mean, rstd);
  gpu_check_launch("norm_forward_kernel");
}

/* The column sums of the partials (chunks × C) into dw and, for layer norm, db. */
static void finish_param_sums(int64_t chunks, int64_t C, const float *dw_partial, real *dw,
                              const float *db_partial, real *db) {
  dim3 grid(gpu_blocks(C, 32), db ? 2 : 1), block(32, FINISH_GROUPS);
  norm_finish_kernel<<<grid, block, 0, gpu_stream()>>>(chunks, C, dw_partial, dw, db_partial, db);
  gpu_check_launch("norm_finish_kernel");
}

/* dx, and dw and db's partials per NORM_CHUNK rows, in one pass (C ≤ 2,048, a multiple of 8). */
template <bool CENTRED, int HELD, int WARPS>
static void backward_fused(int64_t rows, int64_t C, const act_t *x, const act_t *w,
                           const real *mean, const real *rstd, const act_t *dy, act_t *dx, real *dw,
                           real *db) {
  int64_t chunks = (rows + NORM_CHUNK - 1) / NORM_CHUNK;
  float *dw_partial = (float *)gpu_scratch(GPU_SCRATCH_A, (size_t)(chunks * C) * sizeof(float));
  float *db_partial =
      CENTRED ? (float *)gpu_scratch(GPU_SCRATCH_B, (size_t)(chunks * C) * sizeof(float)) : NULL;
  size_t shared = (size_t)WARPS * (CENTRED ? 2 : 1) * ((C + 255) / 256) * 1024;
  auto kernel = norm_backward_fused_kernel<CENTRED, HELD, WARPS>;
  gpu_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared),
            "norm_backward_fused_kernel");
  kernel<<<(unsigned)chunks, WARPS * 32, shared, gpu_stream()>>>(rows, C, x, w, mean, rstd, dy, dx,
                                                                 dw_partial, db_partial);
  gpu_check_launch("norm_backward_fused_kernel");
  finish_param_sums(chunks, C, dw_partial, dw, db_partial, db);
}

/* dw and db's partials per GPU_ROW_CHUNK rows from x and dy, where the fused kernel does not. */
template <bool CENTRED>
static void param_partials(int64_t rows, int64_t C, const act_t *x, const real *mean,
                           const real *rstd, const act_t *dy, bool vec, real *dw, real *db) {
  int64_t chunks = gpu_row_chunks(rows), vectors = vec ? C / 8 : C;
  float *dw_partial = (float *)gpu_scratch(GPU_SCRATCH_A, (size_t)(chunks * C) * sizeof(float));
  float *db_partial =
      CENTRED ? (float *)gpu_scratch(GPU_SCRATCH_B, (size_t)(chunks * C) * sizeof(float)) : NULL;
  int threads = gpu_column_threads(vectors);
  /* the chunks on x: any number of rows */
  dim3 grid((unsigned)chunks, gpu_blocks(vectors, threads));
  cudaStream_t stream = gpu_stream();
  if (vec)
    norm_param_partials_kernel<8, CENTRED>
        <<<grid, threads, 0, stream>>>(rows, C, x, mean, rstd, dy, dw_partial, db_partial);
  else
    norm_param_partials_kernel<1, CENTRED>
        <<<grid, threads, 0, stream>>>(rows, C, x, mean, rstd, dy, dw_partial, db_partial);
  gpu_check_launch("norm_param_partials_kernel");
  finish_param_sums(chunks, C, dw_partial, dw, db_partial, db);
}

/* One pass where the rows are 16-byte vectors of at most 2,048 columns and the weight has a
 * gradient; else dx, then the partials from a second read of x and dy. */
template <bool CENTRED>
static void norm_backward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const real *mean,
                          const real *rstd, const act_t *dy, act_t *dx, real *dw, real *db) {
  if (rows <= 0 || C <= 0) return;
  bool vec = wide(C, x, w, dy, dx);
  if (dw && vec && C <= 256 * 4)
    return backward_fused<CENTRED, 4, 8>(rows, C, x, w, mean, rstd, dy, dx, dw, db);
  if (dw && vec && C <= 256 * 8)
    return backward_fused<CENTRED, 8, 4>(rows, C, x, w, mean, rstd, dy, dx, dw, db);
  cudaStream_t stream = gpu_stream();
  unsigned blocks = gpu_blocks(rows, ROWS_PER_BLOCK);
  if (vec)
    norm_backward_kernel<8, CENTRED><<<blocks, 256, 0, stream>>>(rows, C, x, w, mean, rstd, dy, dx);
  else
    norm_backward_kernel<1, CENTRED><<<blocks, 256, 0, stream>>>(rows, C, x, w, mean, rstd, dy, dx);
  gpu_check_launch("norm_backward_kernel");
  if (dw) param_partials<CENTRED>(rows, C, x, mean, rstd, dy, vec, dw, db); /* else no weight */
}

void k_layernorm_forward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const act_t *b, real eps, act_t *y,
                         real *mean, real *rstd) {
  norm_forward<true>(rows, C, x, w, b, eps, y, mean, rstd);
}

void k_rmsnorm_forward(int64_t rows, int64_t C, const act_t *x, const act_t *w, real eps, act_t *y, real *rstd) {
  norm_forward<false>(rows, C, x, w, NULL, eps, y, NULL, rstd);
}

void k_layernorm_backward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const real *mean, const real *rstd,
                          const act_t *dy, act_t *dx, real *dw, real *db) {
  norm_backward<true>(rows, C, x, w, mean, rstd, dy, dx, dw, db);
}

void k_rmsnorm_backward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const real *rstd, const act_t *dy,
                        act_t *dx, real *dw) {
  norm_backward<false>(rows, C, x, w, NULL, rstd, dy, dx, dw, NULL);
}
