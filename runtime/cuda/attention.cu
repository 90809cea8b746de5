/* attention.cu: multi-head attention, forward and backward, in 64×64 tiles on the tensor cores (WMMA,
 * bf16 operands, fp32 accumulation) with an online softmax: no T×T matrix is stored. Causal or not,
 * grouped-query, rotary positions; heads of other sizes up to 256 on a plain kernel, a warp per
 * row. The backward pass owns every output element in one block that sums in a fixed order: the same
 * bits on every run, no atomics. */
#include "gpu.h"

#include <mma.h>
#include <stdio.h>
#include <stdlib.h>

using namespace nvcuda;

/* Per head, with scores S = cap(Q·Kᵀ·scale) (masked causally, and outside a sliding window), cap(s) =
 * c·tanh(s/c) or s, and P = softmax(S) by rows:
 *   forward   O = P·V, lse = log Σ_t' exp(S)            (online: running max m and sum l per row)
 *   backward  P = exp(S − lse) recomputed, dP = dO·Vᵀ, Δ_t = Σ_e dO·O, dS = P·(dP − Δ)·(1 − (S/c)²),
 *             dQ = dS·K·scale, dK = dSᵀ·Q·scale, dV = Pᵀ·dO
 * With ALiBi, scores less slope_h·|t − t'|. Under rope, Q and K are rotated as they are loaded, and dQ and dK
 * turned back before they are stored. */

enum { TILE = 64, WARPS = 4, THREADS = 32 * WARPS }; /* a block: 64 rows, 16 per warp */

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> FragBt; /* a transposed operand */
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> FragB;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> FragC;

/* What every kernel reads: the shape, the tensors, the rotary tables ([T][D/2] each, or NULL). */
typedef struct {
  int64_t B, T, q_stride, kv_stride; /* from one position to the next: Hq·D and Hkv·D */
  int Hq, Hkv, group, causal;
  int64_t window; /* causal: the keys a query sees back from itself, itself included (T: all) */
  float scale;    /* the shape's, or 1/√D */
  float softcap;  /* 0: scores not capped */
  const float *slopes; /* [Hq] ALiBi's slope of each local head, or NULL */
  const __nv_bfloat16 *q, *k, *v, *out, *dout;
  const float *lse, *delta, *cos_t, *sin_t;
  __nv_bfloat16 *out_w, *dq, *dk, *dv;
  float *lse_w;
} Attn;

/* Row strides in shared memory, padded against bank conflicts (WMMA wants multiples of 8 bf16 or 4 floats). */
template <int D> struct Layout {
  static constexpr int LD = D + 8;                           /* bf16 tiles of 64 positions × D */
  static constexpr int SLD = (D > TILE ? D : TILE) + 4;      /* a warp's fp32 rows: scores, or 16 × D results */
  static constexpr int PLD = TILE + 8;                       /* a warp's bf16 probabilities: 16 × 64 */
};

/* The angle of pair i at position t is t·θ^(−2i/D), in double, rounded to float once. */
__global__ void rope_table_kernel(int64_t T, int D, double theta, float *cos_t, float *sin_t) {
  int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, half = D / 2;
  if (idx >= T * half) return;
  double angle = (double)(idx / half) * pow(theta, -2.0 * (double)(idx % half) / D);
  cos_t[idx] = (float)cos(angle);
  sin_t[idx] = (float)sin(angle);
}

/* Whether query sees key: both inside the sequence and, causally, key in (query − window, query]. */
static __device__ __forceinline__ bool sees(const Attn &a, int64_t query, int64_t key) {
  return key < a.T && query < a.T && (!a.causal || (key <= query && key > query - a.window));
}

/* A scaled score capped: c·tanh(s/c), or s uncapped. */
static __device__ __forceinline__ float cap(const Attn &a, float s) {
  return a.softcap > 0 ? a.softcap * tanhf(s / a.softcap) : s;
}

/* ALiBi's term of head h: −slope_h·|query − key|, or 0. */
static __device__ __forceinline__ float alibi(const Attn &a, int h, int64_t query, int64_t key) {
  return a.slopes ? -a.slopes[h] * (float)(query > key ? query - key : key - query) : 0.0f;
}

/* dS through the cap at capped score S: 1 − (S/c)², or 1. */
static __device__ __forceinline__ float cap_slope(const Attn &a, float capped) {
  return a.softcap > 0 ? 1 - (capped / a.softcap) * (capped / a.softcap) : 1.0f;
}

/* The first key tile a query tile starting at q0 sees: keys before q0 − window + 1 are out of every
 * window of the tile. */
static __device__ __forceinline__ int64_t first_key_tile(const Attn &a, int64_t q0) {
  return a.causal && q0 - a.window + 1 > 0 ? (q0 - a.window + 1) / TILE * TILE : 0;
}

/* tile[row][e] = x[t0 + row][e] of one head (bf16, 64 rows, zeros past T). With rotary tables the pair
 * (x_i, x_{i+D/2}) of position t becomes (x_i·cos − x_{i+D/2}·sin, x_{i+D/2}·cos + x_i·sin). */
template <int D>
static __device__ void load_tile(const __nv_bfloat16 *head, int64_t stride, int64_t t0, int64_t T, const float *cos_t,
                                 const float *sin_t, __nv_bfloat16 *tile) {
  constexpr int HALF = D / 2, LD = Layout<D>::LD;
  for (int idx = threadIdx.x; idx < TILE * HALF; idx += THREADS) {
    int row = idx / HALF, i = idx % HALF;
    int64_t t = t0 + row;
    float x1 = 0, x2 = 0;
    if (t < T) {
      x1 = ld(head[t * stride + i]);
      x2 = ld(head[t * stride + i + HALF]);
      if (cos_t) {
        float c = cos_t[t * HALF + i], s = sin_t[t * HALF + i], y1 = x1 * c - x2 * s;
        x2 = x2 * c + x1 * s;
        x1 = y1;
      }
    }
    tile[row * LD + i] = st(x1);
    tile[row * LD + i + HALF] = st(x2);
  }
}

/* Lane l of a warp holds row l/2 of the warp's 16 and half l%2 of its columns: of 64 scores, columns
 * 32·half…; of D results, columns D/2·half…. Writes 16 rows × D of acc·mul from the warp's fp32 rows F
 * (rows past T skipped), turning rotated pairs back with the tables (cos_t non-NULL). Pairs (i, i+D/2)
 * span both halves, so lane half h handles pairs i in [h·D/4, (h+1)·D/4). */
template <int D>
static __device__ void store_rows(const float *F, int64_t row0, int64_t T, float mul, const float *cos_t,
                                  const float *sin_t, __nv_bfloat16 *head, int64_t stride) {
  constexpr int HALF = D / 2, QUARTER = D / 4, SLD = Layout<D>::SLD;
  int lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  int64_t t = row0 + r;
  if (t >= T) return;
  const float *row = F + r * SLD;
  for (int i = half * QUARTER; i < (half + 1) * QUARTER; i++) {
    float x1 = row[i] * mul, x2 = row[i + HALF] * mul;
    if (cos_t) { /* the inverse turn: the transpose of the rotation */
      float c = cos_t[t * HALF + i], s = sin_t[t * HALF + i], y1 = x1 * c + x2 * s;
      x2 = x2 * c - x1 * s;
      x1 = y1;
    }
    head[t * stride + i] = st(x1);
    head[t * stride + i + HALF] = st(x2);
  }
}

/* F[16][64] (ld SLD) = A·Bᵀ for A the warp's 16 rows (fragments a, over D) and B 64 rows of a tile. */
template <int D>
static __device__ void scores(const FragA *a, const __nv_bfloat16 *tile, float *F, int ld_f) {
  constexpr int LD = Layout<D>::LD;
#pragma unroll
  for (int n = 0; n < TILE / 16; n++) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      FragBt b;
      wmma::load_matrix_sync(b, tile + n * 16 * LD + kk * 16, LD);
      wmma::mma_sync(acc, a[kk], b, acc);
    }
    wmma::store_matrix_sync(F + n * 16, acc, ld_f, wmma::mem_row_major);
  }
}

/* ---- forward ----------------------------------------------------------------------------------- */

/* Block (sequence·head, query tile): queries q0…q0+63 of head h. Per key tile j0: S = Q·Kᵀ (tensor
 * cores, into the warp's F), then per row m' = max(m, max_j cap(S·scale)), P = exp(cap(S·scale) − m')
 * (0 where masked), l ← l·exp(m − m') + Σ P, O ← O·exp(m − m') + P·V. Finally out = O/l and lse = m + log l. Causal
 * blocks with more keys start first. */
template <int D>
__global__ void __launch_bounds__(THREADS) attention_forward_kernel(Attn a) {
  constexpr int LD = Layout<D>::LD, SLD = Layout<D>::SLD, PLD = Layout<D>::PLD, HALF = D / 2;
  extern __shared__ __align__(128) unsigned char smem[];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  __nv_bfloat16 *Qs = (__nv_bfloat16 *)smem, *Ks = Qs + TILE * LD, *Vs = Ks + TILE * LD;
  float *F = (float *)(Vs + TILE * LD) + warp * 16 * SLD;
  __nv_bfloat16 *P = (__nv_bfloat16 *)((float *)(Vs + TILE * LD) + WARPS * 16 * SLD) + warp * 16 * PLD;

  int64_t tiles = (a.T + TILE - 1) / TILE, q0 = (a.causal ? tiles - 1 - blockIdx.y : blockIdx.y) * TILE;
  int64_t b = blockIdx.x / a.Hq;
  int h = blockIdx.x % a.Hq;
  const __nv_bfloat16 *q_head = a.q + b * a.T * a.q_stride + (int64_t)h * D;
  const __nv_bfloat16 *k_head = a.k + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  const __nv_bfloat16 *v_head = a.v + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  load_tile<D>(q_head, a.q_stride, q0, a.T, a.cos_t, a.sin_t, Qs);
  __syncthreads();
  FragA qf[D / 16];
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) wmma::load_matrix_sync(qf[kk], Qs + warp * 16 * LD + kk * 16, LD);

  int64_t query = q0 + warp * 16 + r, keys = a.causal ? min(a.T, q0 + TILE) : a.T;
  float o[HALF], m = -INFINITY, l = 0;
#pragma unroll
  for (int e = 0; e < HALF; e++) o[e] = 0;
  for (int64_t j0 = first_key_tile(a, q0); j0 < keys; j0 += TILE) {
    __syncthreads(); /* every warp is done with the previous K and V */
    load_tile<D>(k_head, a.kv_stride, j0, a.T, a.cos_t, a.sin_t, Ks);
    load_tile<D>(v_head, a.kv_stride, j0, a.T, NULL, NULL, Vs);
    __syncthreads();
    scores<D>(qf, Ks, F, SLD);
    __syncwarp();
    float s[32], top = -INFINITY;
#pragma unroll
    for (int c = 0; c < 32; c++) {
      int64_t key = j0 + half * 32 + c;
      s[c] = sees(a, query, key) ? cap(a, F[r * SLD + half * 32 + c] * a.scale) + alibi(a, h, query, key) : -INFINITY;
      top = fmaxf(top, s[c]);
    }
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
    float m_new = fmaxf(m, top), rescale = m_new == -INFINITY ? 1.0f : expf(m - m_new), sum = 0;
#pragma unroll
    for (int c = 0; c < 32; c++) {
      float p = s[c] == -INFINITY ? 0.0f : expf(s[c] - m_new);
      sum += p;
      P[r * PLD + half * 32 + c] = st(p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * rescale + sum;
    m = m_new;
    __syncwarp();
    /* F[16][D] = P·V, then O = O·rescale + F */
#pragma unroll
    for (int n = 0; n < D / 16; n++) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < TILE / 16; kk++) {
        FragA pf;
        FragB vf;
        wmma::load_matrix_sync(pf, P + kk * 16, PLD);
        wmma::load_matrix_sync(vf, Vs + kk * 16 * LD + n * 16, LD);
        wmma::mma_sync(acc, pf, vf, acc);
      }
      wmma::store_matrix_sync(F + n * 16, acc, SLD, wmma::mem_row_major);
    }
    __syncwarp();
#pragma unroll
    for (int e = 0; e < HALF; e++) o[e] = o[e] * rescale + F[r * SLD + half * HALF + e];
    __syncwarp();
  }
  if (query >= a.T) return;
  __nv_bfloat16 *out = a.out_w + b * a.T * a.q_stride + query * a.q_stride + (int64_t)h * D + half * HALF;
  float inverse = 1.0f / l;
#pragma unroll
  for (int e = 0; e < HALF; e++) out[e] = st(o[e] * inverse);
  if (half == 0) a.lse_w[(b * a.Hq + h) * a.T + query] = m + logf(l);
}

/* ---- backward ---------------------------------------------------------------------------------- */

/* Δ[b][h][t] = Σ_e dO·O of each query row (a warp per row). */
__global__ void attention_delta_kernel(Attn a, int D, float *delta) {
  int64_t row = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32, rows = a.B * a.T * a.Hq;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  int64_t position = row / a.Hq, h = row % a.Hq;
  const __nv_bfloat16 *o = a.out + position * a.q_stride + h * D, *g = a.dout + position * a.q_stride + h * D;
  float dot = 0;
  for (int e = lane; e < D; e += 32) dot += ld(g[e]) * ld(o[e]);
  dot = warp_sum(dot);
  if (lane == 0) delta[(position / a.T * a.Hq + h) * a.T + position % a.T] = dot;
}

/* Block (sequence·head, query tile): dQ of queries q0…q0+63 of head h, over the key tiles they see:
 * S = Q·Kᵀ and dP = dO·Vᵀ recomputed, P = exp(cap(S·scale) − lse), dS = P·(dP − Δ)·cap' (bf16),
 * dQ += dS·K (fragments, fp32), and dQ·scale stored. */
template <int D>
__global__ void __launch_bounds__(THREADS) attention_dq_kernel(Attn a) {
  constexpr int LD = Layout<D>::LD, SLD = Layout<D>::SLD, PLD = Layout<D>::PLD;
  extern __shared__ __align__(128) unsigned char smem[];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  __nv_bfloat16 *Qs = (__nv_bfloat16 *)smem, *dOs = Qs + TILE * LD, *Ks = dOs + TILE * LD, *Vs = Ks + TILE * LD;
  float *S = (float *)(Vs + TILE * LD) + warp * 2 * 16 * SLD, *dP = S + 16 * SLD;
  __nv_bfloat16 *dS = (__nv_bfloat16 *)((float *)(Vs + TILE * LD) + WARPS * 2 * 16 * SLD) + warp * 16 * PLD;

  int64_t tiles = (a.T + TILE - 1) / TILE, q0 = (a.causal ? tiles - 1 - blockIdx.y : blockIdx.y) * TILE;
  int64_t b = blockIdx.x / a.Hq;
  int h = blockIdx.x % a.Hq;
  int64_t q_offset = b * a.T * a.q_stride + (int64_t)h * D;
  const __nv_bfloat16 *k_head = a.k + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  const __nv_bfloat16 *v_head = a.v + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  load_tile<D>(a.q + q_offset, a.q_stride, q0, a.T, a.cos_t, a.sin_t, Qs);
  load_tile<D>(a.dout + q_offset, a.q_stride, q0, a.T, NULL, NULL, dOs);
  __syncthreads();
  FragA qf[D / 16], df[D / 16];
  FragC dq[D / 16];
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    wmma::load_matrix_sync(qf[kk], Qs + warp * 16 * LD + kk * 16, LD);
    wmma::load_matrix_sync(df[kk], dOs + warp * 16 * LD + kk * 16, LD);
    wmma::fill_fragment(dq[kk], 0.0f);
  }
  int64_t query = q0 + warp * 16 + r, keys = a.causal ? min(a.T, q0 + TILE) : a.T;
  float lse = query < a.T ? a.lse[(b * a.Hq + h) * a.T + query] : 0.0f;
  float delta = query < a.T ? a.delta[(b * a.Hq + h) * a.T + query] : 0.0f;
  for (int64_t j0 = first_key_tile(a, q0); j0 < keys; j0 += TILE) {
    __syncthreads();
    load_tile<D>(k_head, a.kv_stride, j0, a.T, a.cos_t, a.sin_t, Ks);
    load_tile<D>(v_head, a.kv_stride, j0, a.T, NULL, NULL, Vs);
    __syncthreads();
    scores<D>(qf, Ks, S, SLD);
    scores<D>(df, Vs, dP, SLD);
    __syncwarp();
#pragma unroll
    for (int c = 0; c < 32; c++) {
      int col = half * 32 + c;
      int64_t key = j0 + col;
      float capped = cap(a, S[r * SLD + col] * a.scale);
      float p = sees(a, query, key) ? expf(capped + alibi(a, h, query, key) - lse) : 0.0f;
      dS[r * PLD + col] = st(p * (dP[r * SLD + col] - delta) * cap_slope(a, capped));
    }
    __syncwarp();
#pragma unroll
    for (int n = 0; n < D / 16; n++)
#pragma unroll
      for (int kk = 0; kk < TILE / 16; kk++) {
        FragA sf;
        FragB kf;
        wmma::load_matrix_sync(sf, dS + kk * 16, PLD);
        wmma::load_matrix_sync(kf, Ks + kk * 16 * LD + n * 16, LD);
        wmma::mma_sync(dq[n], sf, kf, dq[n]);
      }
  }
#pragma unroll
  for (int n = 0; n < D / 16; n++) wmma::store_matrix_sync(S + n * 16, dq[n], SLD, wmma::mem_row_major);
  __syncwarp();
  store_rows<D>(S, q0 + warp * 16, a.T, a.scale, a.cos_t, a.sin_t, a.dq + q_offset, a.q_stride);
}

/* Block (sequence·kv head, key tile): dK and dV of keys j0…j0+63 of kv head g, summed over the query
 * heads of its group and the query tiles that see the keys, in order. Per query tile, with the keys as
 * rows: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, Pᵀ = exp(cap(Sᵀ·scale) − lse), dSᵀ = Pᵀ·(dPᵀ − Δ)·cap', then dV += Pᵀ·dO and
 * dK += dSᵀ·Q, accumulated in the warp's fp32 rows in shared memory; dK·scale stored. */
template <int D>
__global__ void __launch_bounds__(THREADS) attention_dkv_kernel(Attn a) {
  constexpr int LD = Layout<D>::LD, PLD = Layout<D>::PLD, FLD = TILE + 4, ALD = Layout<D>::SLD;
  extern __shared__ __align__(128) unsigned char smem[];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  __nv_bfloat16 *Ks = (__nv_bfloat16 *)smem, *Vs = Ks + TILE * LD, *Qs = Vs + TILE * LD, *dOs = Qs + TILE * LD;
  float *lse_s = (float *)(dOs + TILE * LD), *delta_s = lse_s + TILE;
  float *St = delta_s + TILE + warp * (2 * 16 * FLD + 2 * 16 * ALD), *dPt = St + 16 * FLD;
  float *dK = dPt + 16 * FLD, *dV = dK + 16 * ALD;
  __nv_bfloat16 *Pt = (__nv_bfloat16 *)(delta_s + TILE + WARPS * (2 * 16 * FLD + 2 * 16 * ALD)) + warp * 2 * 16 * PLD;
  __nv_bfloat16 *dSt = Pt + 16 * PLD;

  int64_t j0 = (int64_t)blockIdx.y * TILE, b = blockIdx.x / a.Hkv;
  int g = blockIdx.x % a.Hkv;
  int64_t kv_offset = b * a.T * a.kv_stride + (int64_t)g * D;
  load_tile<D>(a.k + kv_offset, a.kv_stride, j0, a.T, a.cos_t, a.sin_t, Ks);
  load_tile<D>(a.v + kv_offset, a.kv_stride, j0, a.T, NULL, NULL, Vs);
  for (int i = lane; i < 16 * ALD; i += 32) dK[i] = dV[i] = 0;
  __syncthreads();
  FragA kf[D / 16], vf[D / 16];
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    wmma::load_matrix_sync(kf[kk], Ks + warp * 16 * LD + kk * 16, LD);
    wmma::load_matrix_sync(vf[kk], Vs + warp * 16 * LD + kk * 16, LD);
  }
  int64_t key = j0 + warp * 16 + r;
  for (int h = g * a.group; h < (g + 1) * a.group; h++) {
    int64_t q_offset = b * a.T * a.q_stride + (int64_t)h * D, stats = (b * a.Hq + h) * a.T;
    /* the queries that see these keys: up to the window's end of the tile's last key */
    int64_t queries = a.causal ? min(a.T, j0 + TILE - 1 + a.window) : a.T;
    for (int64_t t0 = a.causal ? j0 : 0; t0 < queries; t0 += TILE) {
      __syncthreads(); /* every warp is done with the previous queries */
      load_tile<D>(a.q + q_offset, a.q_stride, t0, a.T, a.cos_t, a.sin_t, Qs);
      load_tile<D>(a.dout + q_offset, a.q_stride, t0, a.T, NULL, NULL, dOs);
      for (int i = threadIdx.x; i < TILE; i += THREADS) {
        lse_s[i] = t0 + i < a.T ? a.lse[stats + t0 + i] : 0.0f;
        delta_s[i] = t0 + i < a.T ? a.delta[stats + t0 + i] : 0.0f;
      }
      __syncthreads();
      scores<D>(kf, Qs, St, FLD);
      scores<D>(vf, dOs, dPt, FLD);
      __syncwarp();
#pragma unroll
      for (int c = 0; c < 32; c++) {
        int col = half * 32 + c;
        int64_t query = t0 + col;
        float capped = cap(a, St[r * FLD + col] * a.scale);
        float p = sees(a, query, key) ? expf(capped + alibi(a, h, query, key) - lse_s[col]) : 0.0f;
        Pt[r * PLD + col] = st(p);
        dSt[r * PLD + col] = st(p * (dPt[r * FLD + col] - delta_s[col]) * cap_slope(a, capped));
      }
      __syncwarp();
#pragma unroll
      for (int n = 0; n < D / 16; n++) {
        FragC dv, dk;
        wmma::load_matrix_sync(dv, dV + n * 16, ALD, wmma::mem_row_major);
        wmma::load_matrix_sync(dk, dK + n * 16, ALD, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < TILE / 16; kk++) {
          FragA pf, sf;
          FragB of, qf;
          wmma::load_matrix_sync(pf, Pt + kk * 16, PLD);
          wmma::load_matrix_sync(of, dOs + kk * 16 * LD + n * 16, LD);
          wmma::mma_sync(dv, pf, of, dv);
          wmma::load_matrix_sync(sf, dSt + kk * 16, PLD);
          wmma::load_matrix_sync(qf, Qs + kk * 16 * LD + n * 16, LD);
          wmma::mma_sync(dk, sf, qf, dk);
        }
        wmma::store_matrix_sync(dV + n * 16, dv, ALD, wmma::mem_row_major);
        wmma::store_matrix_sync(dK + n * 16, dk, ALD, wmma::mem_row_major);
      }
    }
  }
  __syncwarp();
  store_rows<D>(dK, j0 + warp * 16, a.T, a.scale, a.cos_t, a.sin_t, a.dk + kv_offset, a.kv_stride);
  store_rows<D>(dV, j0 + warp * 16, a.T, 1.0f, NULL, NULL, a.dv + kv_offset, a.kv_stride);
}

/* ---- heads the tiles do not take: one warp per row ------------------------------------------- */

/* Heads of other sizes (up to 256: Gemma's) run here: a warp per query (forward, dq) or per key (dk, dv),
 * the keys or queries it meets in order, each lane holding the elements lane, lane + 32, … of a row in
 * fp32; the same scores, masks, caps, ALiBi and rotary positions as the tiled kernels, each output
 * written by one warp that sums in a fixed order. CUDA cores only: slower than the tiles. */
enum { PLAIN_PER_LANE = 8 }; /* 256 / 32 */

/* Element e of row t of a head, rotated by the rotary tables when given: (x_i, x_{i+D/2}) turns by the
 * angle of pair i at position t (sign −1: back). */
static __device__ float plain_load(const __nv_bfloat16 *head, int64_t stride, int64_t t, int e, int D,
                                   const float *cos_t, const float *sin_t, float sign) {
  float x = ld(head[t * stride + e]);
  if (!cos_t) return x;
  int half = D / 2, i = e % half;
  float c = cos_t[t * half + i], sn = sign * sin_t[t * half + i];
  return e < half ? x * c - ld(head[t * stride + e + half]) * sn : x * c + ld(head[t * stride + e - half]) * sn;
}

/* Σ_e q_e·k_e · scale of the row q the lanes hold and key `key`, before the cap and ALiBi. */
static __device__ float plain_scaled_dot(const Attn &a, int D, const float *q, const __nv_bfloat16 *k_head,
                                         int64_t key) {
  int lane = threadIdx.x % 32;
  float dot = 0;
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++)
    dot += q[j] * plain_load(k_head, a.kv_stride, key, lane + 32 * j, D, a.cos_t, a.sin_t, 1);
  return warp_sum(dot) * a.scale;
}

/* The keys query t sees: [first, last). */
static __device__ void plain_keys(const Attn &a, int64_t t, int64_t *first, int64_t *last) {
  *first = a.causal && t - a.window + 1 > 0 ? t - a.window + 1 : 0;
  *last = a.causal ? t + 1 : a.T;
}

/* Warp per (sequence, head, query t): the online softmax over its keys; out and lse. */
__global__ void attention_plain_forward_kernel(Attn a, int D) {
  int64_t row = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= a.B * a.Hq * a.T) return;
  int64_t t = row % a.T, b = row / a.T / a.Hq;
  int h = (int)(row / a.T % a.Hq);
  const __nv_bfloat16 *q_head = a.q + b * a.T * a.q_stride + (int64_t)h * D;
  const __nv_bfloat16 *k_head = a.k + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  const __nv_bfloat16 *v_head = a.v + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  float q[PLAIN_PER_LANE] = {0}, o[PLAIN_PER_LANE] = {0}, m = -INFINITY, l = 0;
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++)
    q[j] = plain_load(q_head, a.q_stride, t, lane + 32 * j, D, a.cos_t, a.sin_t, 1);
  int64_t first, last;
  plain_keys(a, t, &first, &last);
  for (int64_t key = first; key < last; key++) {
    float s = cap(a, plain_scaled_dot(a, D, q, k_head, key)) + alibi(a, h, t, key), m_new = fmaxf(m, s);
    float rescale = m == -INFINITY ? 0.0f : expf(m - m_new), p = expf(s - m_new);
    l = l * rescale + p;
    for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++)
      o[j] = o[j] * rescale + p * ld(v_head[key * a.kv_stride + lane + 32 * j]);
    m = m_new;
  }
  __nv_bfloat16 *out = a.out_w + b * a.T * a.q_stride + t * a.q_stride + (int64_t)h * D;
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) out[lane + 32 * j] = st(o[j] / l);
  if (lane == 0) a.lse_w[(b * a.Hq + h) * a.T + t] = m + logf(l);
}

/* A row of fp32 gradients of rotated q or k (lanes' elements) turned back and stored: through the
 * warp's shared row, since pair partners sit in other lanes. */
static __device__ void plain_store(float *row, const float *g, float mul, int D, int64_t t, const float *cos_t,
                                   const float *sin_t, __nv_bfloat16 *head, int64_t stride) {
  int lane = threadIdx.x % 32;
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) row[lane + 32 * j] = g[j] * mul;
  __syncwarp();
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) {
    int e = lane + 32 * j, half = D / 2, i = e % half;
    float x = row[e];
    if (cos_t) { /* the transpose of the rotation */
      float c = cos_t[t * half + i], sn = sin_t[t * half + i];
      x = e < half ? row[e] * c + row[e + half] * sn : row[e] * c - row[e - half] * sn;
    }
    head[t * stride + e] = st(x);
  }
  __syncwarp();
}

/* Warp per (sequence, head, query t): dq = scale·Σ_keys dS·k over the keys it sees, dS recomputed. */
__global__ void attention_plain_dq_kernel(Attn a, int D) {
  __shared__ float rows[WARPS][256];
  int64_t row = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= a.B * a.Hq * a.T) return;
  int64_t t = row % a.T, b = row / a.T / a.Hq;
  int h = (int)(row / a.T % a.Hq);
  int64_t q_offset = b * a.T * a.q_stride + (int64_t)h * D, stat = (b * a.Hq + h) * a.T + t;
  const __nv_bfloat16 *k_head = a.k + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  const __nv_bfloat16 *v_head = a.v + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  float q[PLAIN_PER_LANE] = {0}, g[PLAIN_PER_LANE] = {0}, dq[PLAIN_PER_LANE] = {0};
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) {
    q[j] = plain_load(a.q + q_offset, a.q_stride, t, lane + 32 * j, D, a.cos_t, a.sin_t, 1);
    g[j] = ld(a.dout[q_offset + t * a.q_stride + lane + 32 * j]);
  }
  int64_t first, last;
  plain_keys(a, t, &first, &last);
  for (int64_t key = first; key < last; key++) {
    float capped = cap(a, plain_scaled_dot(a, D, q, k_head, key));
    float p = expf(capped + alibi(a, h, t, key) - a.lse[stat]), dp = 0;
    for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) dp += g[j] * ld(v_head[key * a.kv_stride + lane + 32 * j]);
    float ds = p * (warp_sum(dp) - a.delta[stat]) * cap_slope(a, capped);
    for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++)
      dq[j] += ds * plain_load(k_head, a.kv_stride, key, lane + 32 * j, D, a.cos_t, a.sin_t, 1);
  }
  plain_store(rows[threadIdx.x / 32], dq, a.scale, D, t, a.cos_t, a.sin_t, a.dq + q_offset, a.q_stride);
}

/* Warp per (sequence, kv head g, key j): dv = Σ P·dO and dk = scale·Σ dS·q over the query heads of the
 * group and the queries that see the key, in order. */
__global__ void attention_plain_dkv_kernel(Attn a, int D) {
  __shared__ float rows[WARPS][256];
  int64_t row = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= a.B * a.Hkv * a.T) return;
  int64_t key = row % a.T, b = row / a.T / a.Hkv;
  int g = (int)(row / a.T % a.Hkv);
  int64_t kv_offset = b * a.T * a.kv_stride + (int64_t)g * D;
  float k[PLAIN_PER_LANE] = {0}, dk[PLAIN_PER_LANE] = {0}, dv[PLAIN_PER_LANE] = {0};
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++)
    k[j] = plain_load(a.k + kv_offset, a.kv_stride, key, lane + 32 * j, D, a.cos_t, a.sin_t, 1);
  int64_t queries = a.causal ? min(a.T, key + a.window) : a.T;
  for (int h = g * a.group; h < (g + 1) * a.group; h++) {
    int64_t q_offset = b * a.T * a.q_stride + (int64_t)h * D;
    for (int64_t t = a.causal ? key : 0; t < queries; t++) {
      int64_t stat = (b * a.Hq + h) * a.T + t;
      float dot = 0, dp = 0;
      for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) {
        dot += k[j] * plain_load(a.q + q_offset, a.q_stride, t, lane + 32 * j, D, a.cos_t, a.sin_t, 1);
        dp += ld(a.dout[q_offset + t * a.q_stride + lane + 32 * j]) * ld(a.v[kv_offset + key * a.kv_stride + lane + 32 * j]);
      }
      float capped = cap(a, warp_sum(dot) * a.scale);
      float p = expf(capped + alibi(a, h, t, key) - a.lse[stat]);
      float ds = p * (warp_sum(dp) - a.delta[stat]) * cap_slope(a, capped);
      for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) {
        int e = lane + 32 * j;
        dv[j] += p * ld(a.dout[q_offset + t * a.q_stride + e]);
        dk[j] += ds * plain_load(a.q + q_offset, a.q_stride, t, e, D, a.cos_t, a.sin_t, 1);
      }
    }
  }
  plain_store(rows[threadIdx.x / 32], dk, a.scale, D, key, a.cos_t, a.sin_t, a.dk + kv_offset, a.kv_stride);
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++)
    a.dv[kv_offset + key * a.kv_stride + lane + 32 * j] = st(dv[j]);
}

/* Whether the tiled kernels take heads of D elements. */
static int tiled(int D) { return D == 16 || D == 32 || D == 64 || D == 128; }

/* ---- launching --------------------------------------------------------------------------------- */

static size_t forward_smem(int D) {
  int LD = D + 8, SLD = (D > TILE ? D : TILE) + 4, PLD = TILE + 8;
  return (size_t)3 * TILE * LD * 2 + (size_t)WARPS * 16 * SLD * 4 + (size_t)WARPS * 16 * PLD * 2;
}

static size_t dq_smem(int D) {
  int LD = D + 8, SLD = (D > TILE ? D : TILE) + 4, PLD = TILE + 8;
  return (size_t)4 * TILE * LD * 2 + (size_t)WARPS * 2 * 16 * SLD * 4 + (size_t)WARPS * 16 * PLD * 2;
}

static size_t dkv_smem(int D) {
  int LD = D + 8, ALD = (D > TILE ? D : TILE) + 4, PLD = TILE + 8, FLD = TILE + 4;
  return (size_t)4 * TILE * LD * 2 + (size_t)2 * TILE * 4 + (size_t)WARPS * (2 * 16 * FLD + 2 * 16 * ALD) * 4 +
         (size_t)WARPS * 2 * 16 * PLD * 2;
}

template <typename Kernel>
static void launch(Kernel kernel, dim3 grid, size_t smem, const Attn &a, const char *name) {
  gpu_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), name);
  kernel<<<grid, THREADS, smem, gpu_stream()>>>(a);
  gpu_check_launch(name);
}

/* The view of a call: strides, pointers, and the rotary tables in scratch when rope. */
static Attn attn_setup(const AttnShape *s) {
  if (s->D < 1 || s->D > 256) {
    fprintf(stderr, "plait: attention heads of %d elements are not supported by the CUDA kernels (up to 256); "
            "choose hidden and heads so that hidden/heads is at most 256\n", s->D);
    exit(1);
  }
  Attn a = {};
  a.B = s->B, a.T = s->T, a.Hq = s->Hq, a.Hkv = s->Hkv, a.group = s->Hq / s->Hkv, a.causal = s->causal;
  a.q_stride = (int64_t)s->Hq * s->D, a.kv_stride = (int64_t)s->Hkv * s->D;
  a.scale = (float)(s->scale > 0 ? s->scale : 1 / sqrt((double)s->D));
  a.window = s->window > 0 && s->window < s->T ? s->window : s->T;
  a.softcap = (float)s->softcap;
  if (s->alibi) {
    float *host = (float *)malloc((size_t)s->Hq * sizeof(float));
    for (int h = 0; h < s->Hq; h++) host[h] = (float)attention_alibi_slope(s->heads_total, s->head0 + h);
    float *slopes = (float *)gpu_scratch(GPU_SCRATCH_C, (size_t)s->Hq * sizeof(float));
    device_upload(slopes, host, (size_t)s->Hq * sizeof(float));
    free(host);
    a.slopes = slopes;
  }
  if (s->rope) {
    int64_t n = s->T * (s->D / 2);
    float *tables = (float *)gpu_scratch(GPU_SCRATCH_A, (size_t)(2 * n) * sizeof(float));
    rope_table_kernel<<<gpu_blocks(n, 256), 256, 0, gpu_stream()>>>(s->T, s->D, s->rope_theta, tables, tables + n);
    gpu_check_launch("rope_table_kernel");
    a.cos_t = tables, a.sin_t = tables + n;
  }
  return a;
}

template <int D>
static void forward(const Attn &a) {
  /* sequence·head on x (up to 2³¹ − 1 blocks), the tiles on y (at most 65535) */
  dim3 grid((unsigned)(a.B * a.Hq), (unsigned)((a.T + TILE - 1) / TILE));
  launch(attention_forward_kernel<D>, grid, forward_smem(D), a, "attention_forward_kernel");
}

template <int D>
static void backward(const Attn &a) {
  dim3 q_grid((unsigned)(a.B * a.Hq), (unsigned)((a.T + TILE - 1) / TILE));
  dim3 kv_grid((unsigned)(a.B * a.Hkv), (unsigned)((a.T + TILE - 1) / TILE));
  launch(attention_dq_kernel<D>, q_grid, dq_smem(D), a, "attention_dq_kernel");
  launch(attention_dkv_kernel<D>, kv_grid, dkv_smem(D), a, "attention_dkv_kernel");
}

void plait_attention_forward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, act_t *out, real *lse) {
  if (s->B <= 0 || s->T <= 0) return;
  Attn a = attn_setup(s);
  a.q = q, a.k = k, a.v = v, a.out_w = out, a.lse_w = lse;
  if (!tiled(s->D)) {
    int64_t rows = s->B * s->Hq * s->T;
    attention_plain_forward_kernel<<<gpu_blocks(rows, WARPS), THREADS, 0, gpu_stream()>>>(a, s->D);
    gpu_check_launch("attention_plain_forward_kernel");
    return;
  }
  switch (s->D) {
  case 16: forward<16>(a); break;
  case 32: forward<32>(a); break;
  case 64: forward<64>(a); break;
  default: forward<128>(a); break;
  }
}

void plait_attention_backward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, const act_t *out,
                              const real *lse, const act_t *dout, act_t *dq, act_t *dk, act_t *dv) {
  if (s->B <= 0 || s->T <= 0) return;
  Attn a = attn_setup(s);
  a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse, a.dout = dout, a.dq = dq, a.dk = dk, a.dv = dv;
  int64_t rows = s->B * s->T * s->Hq;
  float *delta = (float *)gpu_scratch(GPU_SCRATCH_B, (size_t)rows * sizeof(float));
  attention_delta_kernel<<<gpu_blocks(rows, WARPS), THREADS, 0, gpu_stream()>>>(a, s->D, delta);
  gpu_check_launch("attention_delta_kernel");
  a.delta = delta;
  if (!tiled(s->D)) {
    attention_plain_dq_kernel<<<gpu_blocks(rows, WARPS), THREADS, 0, gpu_stream()>>>(a, s->D);
    gpu_check_launch("attention_plain_dq_kernel");
    int64_t keys = s->B * s->Hkv * s->T;
    attention_plain_dkv_kernel<<<gpu_blocks(keys, WARPS), THREADS, 0, gpu_stream()>>>(a, s->D);
    gpu_check_launch("attention_plain_dkv_kernel");
    return;
  }
  switch (s->D) {
  case 16: backward<16>(a); break;
  case 32: backward<32>(a); break;
  case 64: backward<64>(a); break;
  default: backward<128>(a); break;
  }
}
