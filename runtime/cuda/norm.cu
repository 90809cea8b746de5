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

template <bool CENTRED>
static void norm_backward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const real *mean, const real *rstd,
                          const act_t *dy, act_t *dx, real *dw, real *db) {
  if (rows <= 0 || C <= 0) return;
  cudaStream_t stream = gpu_stream();
  unsigned blocks = gpu_blocks(rows, ROWS_PER_BLOCK);
  bool vec = wide(C, x, w, dy, dx);
  if (vec) norm_backward_kernel<8, CENTRED><<<blocks, 256, 0, stream>>>(rows, C, x, w, mean, rstd, dy, dx);
  else norm_backward_kernel<1, CENTRED><<<blocks, 256, 0, stream>>>(rows, C, x, w, mean, rstd, dy, dx);
  gpu_check_launch("norm_backward_kernel");
  if (!dw) return; /* a norm without weight (and bias) */
  int64_t chunks = gpu_row_chunks(rows), vectors = vec ? C / 8 : C;
  float *dw_partial = (float *)gpu_scratch(GPU_SCRATCH_A, (size_t)(chunks * C) * sizeof(float));
  float *db_partial = CENTRED ? (float *)gpu_scratch(GPU_SCRATCH_B, (size_t)(chunks * C) * sizeof(float)) : NULL;
  int threads = gpu_column_threads(vectors);
  dim3 grid((unsigned)chunks, gpu_blocks(vectors, threads)); /* the chunks on x: any number of rows */
  if (vec)
    norm_param_partials_kernel<8, CENTRED><<<grid, threads, 0, stream>>>(rows, C, x, mean, rstd, dy, dw_partial,
                                                                         db_partial);
  else
    norm_param_partials_kernel<1, CENTRED><<<grid, threads, 0, stream>>>(rows, C, x, mean, rstd, dy, dw_partial,
                                                                         db_partial);
  gpu_check_launch("norm_param_partials_kernel");
  gpu_finish_column_sums(chunks, C, dw_partial, dw);
  if (CENTRED) gpu_finish_column_sums(chunks, C, db_partial, db);
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
