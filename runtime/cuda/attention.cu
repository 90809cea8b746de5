/* attention.cu: multi-head attention, forward and backward, in the FlashAttention-2 manner: tensor-core
 * products (mma.sync m16n8k16, bf16 operands, fp32 sums) whose score accumulators stay in registers and
 * become, rounded to bf16, the operand of the next product; tiles come into shared memory by 16-byte
 * cp.async copies, the next tile's while this one is used, and are read by ldmatrix; an online softmax in
 * base 2: no T×T matrix is stored. Causal or not, sliding windows, grouped-query heads, softcaps, ALiBi,
 * rotary positions; heads of 16, 32, 64, 80, 96 and 128 on the tiles, other sizes up to 256 on a plain
 * kernel, a warp per row. The backward pass writes every output element from one block that sums in a
 * fixed order: the same bits on every run, no atomics. */
#include "gpu.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Per head, with scores S = cap(Q·Kᵀ·scale) − slope·|t − t'| (masked causally, and outside a sliding window),
 * cap(s) = c·tanh(s/c) or s, and P = softmax(S) by rows:
 *   forward   O = P·V, lse = log Σ_t' exp(S)            (online: running max m and sum l per row)
 *   backward  P = exp(S − lse) recomputed, dP = dO·Vᵀ, Δ_t = Σ_e dO·O, dS = P·(dP − Δ)·(1 − (cap/c)²),
 *             dQ = dS·K·scale, dK = dSᵀ·Q·scale, dV = Pᵀ·dO
 * The tiled kernels keep scores in base 2 (S·log2 e, lse·log2 e) for exp2. Under rope, Q and K are rotated
 * once as their tiles land in shared memory, and dQ and dK turned back before they are stored. */

typedef __nv_bfloat16 bf16;

static constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

/* What every kernel reads: the shape, the tensors, the rotary tables ([T][D/2] each, or NULL). */
typedef struct {
  int64_t B, q_stride, kv_stride; /* from one position to the next: Hq·D and Hkv·D */
  int T, Hq, Hkv, group, causal;
  int window;                   /* causal: the keys a query sees back from itself, itself included (T: all) */
  float scale, scale_log2;      /* the shape's or 1/√D; scale·log2 e */
  float softcap, inv_softcap;   /* 0: scores not capped */
  const float *slopes;          /* [Hq] ALiBi's slope of each local head, or NULL */
  const bf16 *q, *k, *v, *out, *dout;
  const float *lse, *lse2, *delta, *cos_t, *sin_t; /* lse2 = lse·log2 e */
  bf16 *out_w, *dq, *dk, *dv;
  float *lse_w;
} Attn;

enum { WARPS = 4, THREADS = 32 * WARPS }; /* every kernel's block */

/* The tiles of each head size the tiled kernels take, chosen for sm_90: two blocks an SM, at most 255
 * registers and no spills (nvcc -Xptxas -v). Forward: query tiles of 128 rows (a warp 2 m-tiles of 16)
 * against key tiles of BC, multiplied by chunks of KC keys (KC_MOD with a cap or ALiBi), which bounds the
 * score registers; a chunk's Q·Kᵀ is KC/8 · 2 chains of D/16 dependent mma, so the chunk is as wide as
 * the registers allow (at 128 wide, 32 keys fit only with the chunk loop kept rolled, ROLL: unrolled,
 * ptxas hoists the next chunk's loads and spills). dQ: query tiles of 64·DQ_MT rows against key tiles
 * of 64, multiplied by chunks of DQ_KC keys (DQ_ROLL: that loop kept rolled). QREG, DQ_QREG: Q (and dO)
 * held in registers, else read from shared memory again for every key tile (at 128 wide they fit in
 * registers only beside 32-key chunks). dK/dV: key tiles of 64 (16 a warp) against query tiles of
 * DKV_BR; KREG: K and V held in registers. */
template <int D> struct Plan;
#define PLAN(d, bc, kc, kc_mod, qreg, roll, dq_mt, dq_qreg, dq_kc, dq_roll, dkv_br, kreg)                \
  template <> struct Plan<d> {                                                                         \
    enum { BC = bc, KC = kc, KC_MOD = kc_mod, QREG = qreg, ROLL = roll, DQ_MT = dq_mt, DQ_QREG = dq_qreg }; \
    enum { DQ_KC = dq_kc, DQ_ROLL = dq_roll, DKV_BR = dkv_br, KREG = kreg };                         \
  }
/*    D   BC  KC KC_MOD QREG ROLL  DQ_MT DQ_QREG DQ_KC DQ_ROLL  DKV_BR KREG */
PLAN(16, 128, 64, 64, 1, 0, 2, 1, 64, 0, 64, 1);
PLAN(32, 128, 64, 64, 1, 0, 2, 1, 64, 0, 64, 1);
PLAN(64, 128, 64, 32, 1, 0, 1, 1, 64, 0, 64, 1);
PLAN(80, 64, 32, 32, 0, 0, 1, 1, 64, 0, 64, 0);
PLAN(96, 64, 32, 32, 0, 0, 1, 1, 64, 0, 32, 0);
PLAN(128, 64, 32, 16, 0, 1, 1, 1, 32, 1, 32, 0);
#undef PLAN

/* The angle of pair i at position t is t·θ^(−2i/D), in double, rounded to float once. */
__global__ void rope_table_kernel(int64_t T, int D, double theta, float *cos_t, float *sin_t) {
  int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, half = D / 2;
  if (idx >= T * half) return;
  double angle = (double)(idx / half) * pow(theta, -2.0 * (double)(idx % half) / D);
  cos_t[idx] = (float)cos(angle);
  sin_t[idx] = (float)sin(angle);
}

/* Whether query sees key: the key inside the sequence and, causally, in (query − window, query]. */
static __device__ __forceinline__ bool sees(const Attn &a, int query, int key) {
  return key < a.T && (!a.causal || (key <= query && key > query - a.window));
}

/* A scaled score capped: c·tanh(s/c), or s uncapped. */
static __device__ __forceinline__ float cap(const Attn &a, float s) {
  return a.softcap > 0 ? a.softcap * tanhf(s * a.inv_softcap) : s;
}

/* dS through the cap at capped score S: 1 − (S/c)², or 1. */
static __device__ __forceinline__ float cap_slope(const Attn &a, float capped) {
  float y = capped * a.inv_softcap;
  return a.softcap > 0 ? 1 - y * y : 1.0f;
}

/* ALiBi's term: −slope·|query − key|. */
static __device__ __forceinline__ float alibi(float slope, int query, int key) {
  return -slope * (float)(query > key ? query - key : key - query);
}

/* ---- tensor cores and asynchronous copies (PTX) ---------------------------------------------------- */

static __device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 (or 4) bytes from global to shared memory, not through registers; `bytes` below that zero-fills. */
static __device__ __forceinline__ void copy16_async(uint32_t dst, const void *src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void copy4_async(uint32_t dst, const void *src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void copies_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/* This thread's copies have landed (other threads' need a barrier besides). */
static __device__ __forceinline__ void copies_wait() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* Four 8×8 bf16 matrices from shared memory, each lane giving one row address; _t: transposed. */
static __device__ __forceinline__ void ldsm(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
static __device__ __forceinline__ void ldsm_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* c (16×8, fp32) += a (16×16, bf16) · b (16×8, bf16). Fragments: lane l = 4g + q holds c[0..1] at row g,
 * columns 2q, 2q + 1 and c[2..3] at row g + 8; a[0] (row g, columns 2q, 2q + 1), a[1] (row g + 8), a[2] and
 * a[3] the same 8 columns on; b0 (rows 2q, 2q + 1 of column g), b1 the same 8 rows on. */
static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* Two floats as bf16 (round to nearest even), lo in the low half; and back. */
static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}
static __device__ __forceinline__ float low(uint32_t u) { return __uint_as_float(u << 16); }
static __device__ __forceinline__ float high(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

/* ---- tiles in shared memory ------------------------------------------------------------------------ */

/* A tile holds rows of D bf16 at a pitch of D + 8: ldmatrix's eight row addresses fall in eight different
 * bank groups. This lane's byte offset in a 16×16 block for ldmatrix ×4: lane_a orders the 8×8 matrices
 * (rows 0–7, columns 0–7), (8–15, 0–7), (0–7, 8–15), (8–15, 8–15): an A operand, or, transposed, the B
 * operand of a block whose rows run along k; lane_b orders them (0–7, 0–7), (0–7, 8–15), (8–15, 0–7),
 * (8–15, 8–15): the B operands of two n-tiles of a block whose rows run along n. */
template <int LD>
static __device__ __forceinline__ uint32_t lane_a() {
  int l = threadIdx.x & 31;
  return (uint32_t)(((l & 15) * LD + (l >> 4) * 8) * 2);
}
template <int LD>
static __device__ __forceinline__ uint32_t lane_b() {
  int l = threadIdx.x & 31;
  return (uint32_t)((((l & 7) + (l >> 4) * 8) * LD + (l >> 3 & 1) * 8) * 2);
}

/* Rows t0 … t0 + ROWS − 1 of a head (D elements each, `stride` apart) into a tile, by 16-byte copies;
 * rows at or past T become zeros. */
template <int D, int ROWS>
static __device__ __forceinline__ void load_tile(bf16 *tile, const bf16 *head, int64_t stride, int t0, int T) {
  constexpr int CHUNKS = D / 8, COPIES = ROWS * CHUNKS;
#pragma unroll
  for (int i = 0; i < (COPIES + THREADS - 1) / THREADS; i++) {
    int idx = i * THREADS + (int)threadIdx.x, row = idx / CHUNKS, c = idx % CHUNKS, t = t0 + row;
    if (COPIES % THREADS == 0 || idx < COPIES)
      copy16_async(smem_u32(tile + row * (D + 8) + c * 8), head + (int64_t)(t < T ? t : 0) * stride + c * 8,
                   t < T ? 16 : 0);
  }
}

/* ROWS statistics of a row [T] from t0 into shared memory, zeros past T (4-byte copies). */
template <int ROWS>
static __device__ __forceinline__ void load_stats(float *dst, const float *row, int t0, int T) {
  static_assert(ROWS <= THREADS, "a thread a statistic");
  int i = (int)threadIdx.x, t = t0 + i;
  if (i < ROWS) copy4_async(smem_u32(dst + i), row + (t < T ? t : 0), t < T ? 4 : 0);
}

/* The rows before T of a landed tile turned in place: the pair (x_i, x_{i+D/2}) of position t becomes
 * (x_i·cos − x_{i+D/2}·sin, x_{i+D/2}·cos + x_i·sin), in fp32, rounded to bf16 once. 8 pairs a step. */
template <int D, int ROWS>
static __device__ void rotate_tile(bf16 *tile, int t0, int T, const float *cos_t, const float *sin_t) {
  constexpr int HALF = D / 2, GROUPS = HALF / 8;
  for (int idx = (int)threadIdx.x; idx < ROWS * GROUPS; idx += THREADS) {
    int row = idx / GROUPS, i0 = idx % GROUPS * 8, t = t0 + row;
    if (t >= T) continue;
    uint4 *p1 = reinterpret_cast<uint4 *>(tile + row * (D + 8) + i0), *p2 = p1 + HALF / 8;
    const float4 *c4 = reinterpret_cast<const float4 *>(cos_t + (int64_t)t * HALF + i0);
    const float4 *s4 = reinterpret_cast<const float4 *>(sin_t + (int64_t)t * HALF + i0);
    float4 ca = c4[0], cb = c4[1], sa = s4[0], sb = s4[1];
    const float c[8] = {ca.x, ca.y, ca.z, ca.w, cb.x, cb.y, cb.z, cb.w};
    const float s[8] = {sa.x, sa.y, sa.z, sa.w, sb.x, sb.y, sb.z, sb.w};
    uint4 u1 = *p1, u2 = *p2;
    uint32_t w1[4] = {u1.x, u1.y, u1.z, u1.w}, w2[4] = {u2.x, u2.y, u2.z, u2.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
      float a0 = low(w1[k]), a1 = high(w1[k]), b0 = low(w2[k]), b1 = high(w2[k]);
      w1[k] = pack(a0 * c[2 * k] - b0 * s[2 * k], a1 * c[2 * k + 1] - b1 * s[2 * k + 1]);
      w2[k] = pack(b0 * c[2 * k] + a0 * s[2 * k], b1 * c[2 * k + 1] + a1 * s[2 * k + 1]);
    }
    *p1 = make_uint4(w1[0], w1[1], w1[2], w1[3]);
    *p2 = make_uint4(w2[0], w2[1], w2[2], w2[3]);
  }
}

/* The top of a step of a double-buffered loop: this thread's copies have landed, the barrier makes every
 * thread's seen (and every warp done with the buffers that the next copies fill), and under rope the ROWS
 * rows from t0 of `turned` are rotated. */
template <int D, int ROWS>
static __device__ __forceinline__ void landed(const Attn &a, bf16 *turned, int t0) {
  copies_wait();
  __syncthreads();
  if (a.cos_t) {
    rotate_tile<D, ROWS>(turned, t0, a.T, a.cos_t, a.sin_t);
    __syncthreads();
  }
}

/* ---- a warp's products ----------------------------------------------------------------------------- */

/* A operands of MT m-tiles × K from the tile at a (this lane's lane_a offset in): into registers. */
template <int MT, int K, int LD>
static __device__ __forceinline__ void load_a(uint32_t (&r)[MT][K / 16][4], uint32_t a) {
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int kk = 0; kk < K / 16; kk++) ldsm(r[m][kk], a + (m * 16 * LD + kk * 16) * 2);
}

/* acc[m][n] and acc[m][n + 1] += a[m]·(the B operands of two n-tiles in r), for each of the MT m-tiles. */
template <int MT, int NT>
static __device__ __forceinline__ void mma_two(float (&acc)[MT][NT][4], const uint32_t (&a)[MT][4],
                                               const uint32_t (&r)[4], int n) {
#pragma unroll
  for (int m = 0; m < MT; m++) {
    mma(acc[m][n], a[m], r[0], r[1]);
    mma(acc[m][n + 1], a[m], r[2], r[3]);
  }
}

/* acc[m] (16 × N) += A_m·Bᵀ: A_m the m-th 16 rows × K (from areg when AREG, else read at a), B the N × K
 * block at b (rows along n: read with lane_b). Each B fragment serves the MT m-tiles. */
template <int MT, int N, int K, int LD, bool AREG>
static __device__ __forceinline__ void mma_abt(float (&acc)[MT][N / 8][4],
                                               const uint32_t (&areg)[AREG ? MT : 1][AREG ? K / 16 : 1][4],
                                               uint32_t a, uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < K / 16; kk++) {
    uint32_t af[MT][4];
#pragma unroll
    for (int m = 0; m < MT; m++) {
      if constexpr (AREG) {
#pragma unroll
        for (int i = 0; i < 4; i++) af[m][i] = areg[m][kk][i];
      } else {
        ldsm(af[m], a + (m * 16 * LD + kk * 16) * 2);
      }
    }
#pragma unroll
    for (int np = 0; np < N / 16; np++) {
      uint32_t r[4];
      ldsm(r, b + (np * 16 * LD + kk * 16) * 2);
      mma_two(acc, af, r, 2 * np);
    }
  }
}

/* acc[m] (16 × N) += P_m·B: P_m the m-th 16 × K in accumulator fragments (rounded to bf16 here, the layout
 * of an A operand), B the K × N block at b (rows along k: read transposed with lane_a). */
template <int MT, int N, int K, int LD>
static __device__ __forceinline__ void mma_pb(float (&acc)[MT][N / 8][4], const float (&p)[MT][K / 8][4],
                                              uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < K / 16; kk++) {
    uint32_t pa[MT][4];
#pragma unroll
    for (int m = 0; m < MT; m++) {
      pa[m][0] = pack(p[m][2 * kk][0], p[m][2 * kk][1]);
      pa[m][1] = pack(p[m][2 * kk][2], p[m][2 * kk][3]);
      pa[m][2] = pack(p[m][2 * kk + 1][0], p[m][2 * kk + 1][1]);
      pa[m][3] = pack(p[m][2 * kk + 1][2], p[m][2 * kk + 1][3]);
    }
#pragma unroll
    for (int nd = 0; nd < N / 16; nd++) {
      uint32_t r[4];
      ldsm_t(r, b + (kk * 16 * LD + nd * 16) * 2);
      mma_two(acc, pa, r, 2 * nd);
    }
  }
}

/* ---- which tiles meet ------------------------------------------------------------------------------ */

/* Whether some query of [q_lo, q_hi] sees some key of [k_lo, k_hi] (before the sequence's end). */
static __device__ __forceinline__ bool meets(const Attn &a, int q_lo, int q_hi, int k_lo, int k_hi) {
  return !a.causal || (k_lo <= q_hi && k_hi > q_lo - a.window);
}

/* Whether the causal mask or the window hides some pair of queries [q_lo, q_hi] and keys [k_lo, k_hi]. */
static __device__ __forceinline__ bool edge(const Attn &a, int q_lo, int q_hi, int k_lo, int k_hi) {
  return a.causal && (k_hi > q_lo || k_lo <= q_hi - a.window);
}

/* The query tile of a forward or dQ block, BR rows from q0 of head h of sequence b; q_off and kv_off: where
 * the head's rows start in q (out, dout, dq) and in k, v. Blocks go by the heads of a sequence in order, and
 * in a head the tiles with the most keys first; the key tiles of BC the rows see: [first, end). */
struct QueryTile {
  int q0, h, first, end;
  int64_t b, q_off, kv_off;
};
template <int D, int BR, int BC>
static __device__ __forceinline__ QueryTile query_tile(const Attn &a) {
  QueryTile t;
  const int tiles = (a.T + BR - 1) / BR;
  const int64_t bh = blockIdx.x / tiles;
  t.q0 = (tiles - 1 - (int)(blockIdx.x % tiles)) * BR;
  t.b = bh / a.Hq, t.h = (int)(bh % a.Hq);
  t.q_off = t.b * a.T * a.q_stride + (int64_t)t.h * D;
  t.kv_off = t.b * a.T * a.kv_stride + (int64_t)(t.h / a.group) * D;
  const int lo = a.causal ? max(0, t.q0 - a.window + 1) : 0, hi = a.causal ? min(a.T, t.q0 + BR) : a.T;
  t.first = lo / BC, t.end = (hi + BC - 1) / BC;
  return t;
}

/* K and V rows from k0 (KEYS of each) into their tiles. */
template <int D, int KEYS>
static __device__ __forceinline__ void load_kv(const Attn &a, int64_t kv_off, int k0, bf16 *K, bf16 *V) {
  load_tile<D, KEYS>(K, a.k + kv_off, a.kv_stride, k0, a.T);
  load_tile<D, KEYS>(V, a.v + kv_off, a.kv_stride, k0, a.T);
}

/* ---- scores ---------------------------------------------------------------------------------------- */

/* One product s of query and key as a base-2 score: cap(s·scale) + ALiBi, times log2 e; capped: the capped
 * score (for dS's slope). */
static __device__ __forceinline__ float score2(const Attn &a, float slope, float s, int query, int key,
                                               float *capped) {
  *capped = cap(a, s * a.scale);
  return (*capped + alibi(slope, query, key)) * LOG2E;
}

/* One m-tile's forward scores where more than the scale is needed: with MOD (a cap or ALiBi) base-2 scores,
 * and where masked −∞ for the pairs not seen. query: row g's; key: column 2q's of n-tile 0. */
template <bool MOD, int NC>
static __device__ __forceinline__ void adjust(float (&s)[NC][4], const Attn &a, float slope, int query, int key,
                                              bool masked) {
#pragma unroll
  for (int n = 0; n < NC; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int qe = query + (e >> 1) * 8, ke = key + n * 8 + (e & 1);
      float capped;
      if (MOD) s[n][e] = score2(a, slope, s[n][e], qe, ke, &capped);
      if (masked && !sees(a, qe, ke)) s[n][e] = -INFINITY;
    }
}

/* The online softmax over one chunk of one m-tile's rows (half 0: row g, half 1: row g + 8): s·mul are
 * base-2 scores; the maxima m2 move on, O and the lane's partial sums l are rescaled (skipped when no row
 * of the warp's half has a new maximum), and s becomes P = exp2(s·mul − max). A row with nothing seen yet
 * subtracts 0, not −∞. */
template <int NC, int ND>
static __device__ __forceinline__ void softmax_step(float (&s)[NC][4], float (&o)[ND][4], float (&m2)[2],
                                                    float (&l)[2], float mul) {
#pragma unroll
  for (int half = 0; half < 2; half++) {
    float top = -INFINITY;
#pragma unroll
    for (int n = 0; n < NC; n++) top = fmaxf(top, fmaxf(s[n][2 * half], s[n][2 * half + 1]));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
    float m_new = fmaxf(m2[half], top * mul), base = m_new == -INFINITY ? 0.0f : m_new;
    float rescale = exp2_approx(m2[half] - base);
    m2[half] = m_new;
    if (__any_sync(0xffffffffu, rescale != 1.0f)) { /* else every factor is 1: the same bits without it */
      l[half] *= rescale;
#pragma unroll
      for (int d = 0; d < ND; d++) o[d][2 * half] *= rescale, o[d][2 * half + 1] *= rescale;
    }
#pragma unroll
    for (int n = 0; n < NC; n++)
#pragma unroll
      for (int e = 2 * half; e < 2 * half + 2; e++) {
        s[n][e] = exp2_approx(fmaf(s[n][e], mul, -base));
        l[half] += s[n][e];
      }
  }
}

/* P of one product: exp2(score·mul − lse2), 0 where masked and not seen; *slope: the cap's (1 without). */
template <bool MOD>
static __device__ __forceinline__ float probability(const Attn &a, float alibi_slope, float s, float lse2,
                                                    float mul, int query, int key, bool masked, float *slope) {
  *slope = 1.0f;
  if (MOD) {
    float capped;
    s = score2(a, alibi_slope, s, query, key, &capped);
    *slope = cap_slope(a, capped);
  }
  return masked && !sees(a, query, key) ? 0.0f : exp2_approx(fmaf(s, mul, -lse2));
}

/* One lane's half-row of D results (fragments acc[d][2h], acc[d][2h + 1]: columns 8d + 2q, + 1) times mul
 * into row t at dst, turned back by the rope tables where given (the transpose of the rotation: the
 * partner of column i < D/2 is i + D/2, held by the same lane). */
template <int D>
static __device__ __forceinline__ void store_row(const float (&acc)[D / 8][4], int h, float mul, int t,
                                                 const float *cos_t, const float *sin_t, bf16 *dst) {
  constexpr int ND = D / 8, HALF = D / 2;
  const int q = threadIdx.x & 3;
  float x[ND][2];
#pragma unroll
  for (int d = 0; d < ND; d++) x[d][0] = acc[d][2 * h] * mul, x[d][1] = acc[d][2 * h + 1] * mul;
  if (cos_t) {
#pragma unroll
    for (int d = 0; d < ND / 2; d++) {
      float2 c = *reinterpret_cast<const float2 *>(cos_t + (int64_t)t * HALF + d * 8 + 2 * q);
      float2 s = *reinterpret_cast<const float2 *>(sin_t + (int64_t)t * HALF + d * 8 + 2 * q);
      float x1 = x[d][0], x2 = x[d + ND / 2][0], y1 = x[d][1], y2 = x[d + ND / 2][1];
      x[d][0] = x1 * c.x + x2 * s.x, x[d + ND / 2][0] = x2 * c.x - x1 * s.x;
      x[d][1] = y1 * c.y + y2 * s.y, x[d + ND / 2][1] = y2 * c.y - y1 * s.y;
    }
  }
#pragma unroll
  for (int d = 0; d < ND; d++) *reinterpret_cast<uint32_t *>(dst + d * 8 + 2 * q) = pack(x[d][0], x[d][1]);
}

/* ---- forward --------------------------------------------------------------------------------------- */

/* Block: a query tile of 128 rows, a warp 2 m-tiles of 16. The key tiles it sees, K and V of the next one
 * loading while this one is used; per chunk of KC keys: S = Q·Kᵀ in registers, the online softmax, and
 * O += P·V with P from S's registers. Then out = O/l and lse = (max + log2 l)·ln 2. MOD: a cap or ALiBi. */
template <int D, bool MOD>
__global__ void __launch_bounds__(THREADS, 2) attention_forward_kernel(Attn a) {
  constexpr int MT = 2, BR = 64 * MT, BC = Plan<D>::BC, KC = MOD ? Plan<D>::KC_MOD : Plan<D>::KC, LD = D + 8;
  constexpr int ND = D / 8;
  constexpr bool QREG = Plan<D>::QREG;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *Qs = reinterpret_cast<bf16 *>(smem), *Ks = Qs + BR * LD, *Vs = Ks + 2 * BC * LD;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, q = threadIdx.x & 3;
  const QueryTile t = query_tile<D, BR, BC>(a);
  const int rows = t.q0 + warp * 16 * MT; /* this warp's first */
  const float slope = a.slopes ? a.slopes[t.h] : 0.0f, mul = MOD ? 1.0f : a.scale_log2;
  load_tile<D, BR>(Qs, a.q + t.q_off, a.q_stride, t.q0, a.T);
  load_kv<D, BC>(a, t.kv_off, t.first * BC, Ks, Vs);
  copies_commit();
  landed<D, BR>(a, Qs, t.q0);
  const uint32_t qa = smem_u32(Qs) + warp * 16 * MT * LD * 2 + lane_a<LD>();
  const uint32_t kb = smem_u32(Ks) + lane_b<LD>(), va = smem_u32(Vs) + lane_a<LD>();
  uint32_t qf[QREG ? MT : 1][QREG ? D / 16 : 1][4];
  if constexpr (QREG) load_a<MT, D, LD>(qf, qa);

  float o[MT][ND][4] = {}, m2[MT][2], l[MT][2] = {};
#pragma unroll
  for (int m = 0; m < MT; m++) m2[m][0] = m2[m][1] = -INFINITY;
  for (int j = t.first; j < t.end; j++) {
    const int buf = (j - t.first) & 1, k0 = j * BC;
    landed<D, BC>(a, Ks + buf * BC * LD, k0);
    if (j + 1 < t.end) load_kv<D, BC>(a, t.kv_off, k0 + BC, Ks + (buf ^ 1) * BC * LD, Vs + (buf ^ 1) * BC * LD);
    copies_commit();
    constexpr int STEP = Plan<D>::ROLL ? 1 : BC / KC; /* chunks an iteration of the rolled loop */
#pragma unroll 1
    for (int c0 = 0; c0 < BC / KC; c0 += STEP)
#pragma unroll
      for (int c = c0; c < c0 + STEP; c++) {
        const int kc = k0 + c * KC;
        const uint32_t chunk = (buf * BC + c * KC) * LD * 2;
        if (!meets(a, rows, rows + 16 * MT - 1, kc, kc + KC - 1)) continue;
        float s[MT][KC / 8][4] = {};
        mma_abt<MT, KC, D, LD, QREG>(s, qf, qa, kb + chunk);
        const bool masked = kc + KC > a.T || edge(a, rows, rows + 16 * MT - 1, kc, kc + KC - 1);
        if (MOD || masked)
#pragma unroll
          for (int m = 0; m < MT; m++) adjust<MOD>(s[m], a, slope, rows + m * 16 + g, kc + 2 * q, masked);
#pragma unroll
        for (int m = 0; m < MT; m++) softmax_step(s[m], o[m], m2[m], l[m], mul);
        mma_pb<MT, D, KC, LD>(o, s, va + chunk);
      }
  }

#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      float sum = l[m][half];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      int row = rows + m * 16 + g + 8 * half;
      if (row >= a.T) continue;
      float inverse = 1.0f / sum;
      bf16 *out = a.out_w + t.q_off + (int64_t)row * a.q_stride + 2 * q;
#pragma unroll
      for (int d = 0; d < ND; d++)
        *reinterpret_cast<uint32_t *>(out + d * 8) = pack(o[m][d][2 * half] * inverse,
                                                          o[m][d][2 * half + 1] * inverse);
      if (q == 0) a.lse_w[(t.b * a.Hq + t.h) * a.T + row] = (m2[m][half] + log2f(sum)) * LN2;
    }
}

/* ---- backward ---------------------------------------------------------------------------------------- */

/* Per query row (b, h, t), a thread each, rows in memory order: Δ = Σ_e dO·O, and for the tiled kernels
 * lse·log2 e (lse2 non-NULL); both [B, Hq, T]. 16-byte loads when `vector` (D a multiple of 8, aligned). */
__global__ void attention_prep_kernel(Attn a, int D, int vector, float *delta, float *lse2) {
  int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= a.B * a.T * a.Hq) return;
  int64_t position = row / a.Hq, h = row % a.Hq;
  const bf16 *o = a.out + position * a.q_stride + h * D, *g = a.dout + position * a.q_stride + h * D;
  float dot = 0;
  if (vector)
    for (int e = 0; e < D; e += 8) {
      uint4 x = *reinterpret_cast<const uint4 *>(o + e), y = *reinterpret_cast<const uint4 *>(g + e);
      const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
      for (int k = 0; k < 4; k++) dot += low(ys[k]) * low(xs[k]), dot += high(ys[k]) * high(xs[k]);
    }
  else
    for (int e = 0; e < D; e++) dot += ld(g[e]) * ld(o[e]);
  int64_t stat = (position / a.T * a.Hq + h) * a.T + position % a.T;
  delta[stat] = dot;
  if (lse2) lse2[stat] = a.lse[stat] * LOG2E;
}

/* Block: a query tile of 64·DQ_MT rows, a warp DQ_MT m-tiles of 16; dQ over the key tiles of 64 the rows
 * see, K and V of the next one loading while this one is used. Per chunk of DQ_KC keys of a tile: S = Q·Kᵀ
 * and dP = dO·Vᵀ in registers, P = exp2(S − lse2), dS = P·(dP − Δ)·cap' in place of S, dQ += dS·K.
 * dQ·scale stored. */
template <int D, bool MOD>
__global__ void __launch_bounds__(THREADS, 2) attention_dq_kernel(Attn a) {
  constexpr int MT = Plan<D>::DQ_MT, BR = 64 * MT, BC = 64, KC = Plan<D>::DQ_KC, LD = D + 8, ND = D / 8;
  constexpr int NC = KC / 8;
  constexpr bool QREG = Plan<D>::DQ_QREG;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *Qs = reinterpret_cast<bf16 *>(smem), *dOs = Qs + BR * LD, *Ks = dOs + BR * LD, *Vs = Ks + 2 * BC * LD;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, q = threadIdx.x & 3;
  const QueryTile t = query_tile<D, BR, BC>(a);
  const int rows = t.q0 + warp * 16 * MT;
  const int64_t stats = (t.b * a.Hq + t.h) * a.T;
  const float slope = a.slopes ? a.slopes[t.h] : 0.0f, mul = MOD ? 1.0f : a.scale_log2;
  load_tile<D, BR>(Qs, a.q + t.q_off, a.q_stride, t.q0, a.T);
  load_tile<D, BR>(dOs, a.dout + t.q_off, a.q_stride, t.q0, a.T);
  load_kv<D, BC>(a, t.kv_off, t.first * BC, Ks, Vs);
  copies_commit();
  float lse2[MT][2], delta[MT][2]; /* rows past T: P = 0 */
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      int row = rows + m * 16 + g + 8 * half;
      lse2[m][half] = row < a.T ? a.lse2[stats + row] : INFINITY;
      delta[m][half] = row < a.T ? a.delta[stats + row] : 0.0f;
    }
  landed<D, BR>(a, Qs, t.q0);
  const uint32_t qa = smem_u32(Qs) + warp * 16 * MT * LD * 2 + lane_a<LD>();
  const uint32_t da = smem_u32(dOs) + warp * 16 * MT * LD * 2 + lane_a<LD>();
  const uint32_t kb = smem_u32(Ks) + lane_b<LD>(), ka = smem_u32(Ks) + lane_a<LD>();
  const uint32_t vb = smem_u32(Vs) + lane_b<LD>();
  uint32_t qf[QREG ? MT : 1][QREG ? D / 16 : 1][4], df[QREG ? MT : 1][QREG ? D / 16 : 1][4];
  if constexpr (QREG) load_a<MT, D, LD>(qf, qa), load_a<MT, D, LD>(df, da);

  float dq[MT][ND][4] = {};
  for (int j = t.first; j < t.end; j++) {
    const int buf = (j - t.first) & 1, k0 = j * BC;
    const uint32_t tile = buf * BC * LD * 2;
    landed<D, BC>(a, Ks + buf * BC * LD, k0);
    if (j + 1 < t.end) load_kv<D, BC>(a, t.kv_off, k0 + BC, Ks + (buf ^ 1) * BC * LD, Vs + (buf ^ 1) * BC * LD);
    copies_commit();
    if (!meets(a, rows, rows + 16 * MT - 1, k0, k0 + BC - 1)) continue;
    if constexpr (KC == BC) {
      float s[MT][NC][4] = {}, dp[MT][NC][4] = {};
      mma_abt<MT, BC, D, LD, QREG>(s, qf, qa, kb + tile);
      mma_abt<MT, BC, D, LD, QREG>(dp, df, da, vb + tile);
      const bool masked = k0 + BC > a.T || edge(a, rows, rows + 16 * MT - 1, k0, k0 + BC - 1);
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NC; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            float slope_c, p = probability<MOD>(a, slope, s[m][n][e], lse2[m][e >> 1], mul,
                                                rows + m * 16 + g + (e >> 1) * 8, k0 + n * 8 + 2 * q + (e & 1),
                                                masked, &slope_c);
            s[m][n][e] = p * (dp[m][n][e] - delta[m][e >> 1]) * slope_c;
          }
      mma_pb<MT, D, BC, LD>(dq, s, ka + tile);
    } else { /* the chunks of KC keys, the loop kept rolled (unrolled, ptxas hoists loads and spills) */
      static_assert(Plan<D>::DQ_ROLL, "narrower chunks are for the rolled loop");
#pragma unroll 1
      for (int kc = k0; kc < k0 + BC; kc += KC) {
        const uint32_t chunk = tile + (kc - k0) * LD * 2;
        if (!meets(a, rows, rows + 16 * MT - 1, kc, kc + KC - 1)) continue;
        float s[MT][NC][4] = {}, dp[MT][NC][4] = {};
        mma_abt<MT, KC, D, LD, QREG>(s, qf, qa, kb + chunk);
        mma_abt<MT, KC, D, LD, QREG>(dp, df, da, vb + chunk);
        const bool masked = kc + KC > a.T || edge(a, rows, rows + 16 * MT - 1, kc, kc + KC - 1);
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
          for (int n = 0; n < NC; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
              float slope_c, p = probability<MOD>(a, slope, s[m][n][e], lse2[m][e >> 1], mul,
                                                  rows + m * 16 + g + (e >> 1) * 8, kc + n * 8 + 2 * q + (e & 1),
                                                  masked, &slope_c);
              s[m][n][e] = p * (dp[m][n][e] - delta[m][e >> 1]) * slope_c;
            }
        mma_pb<MT, D, KC, LD>(dq, s, ka + chunk);
      }
    }
  }

#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      int row = rows + m * 16 + g + 8 * half;
      if (row < a.T)
        store_row<D>(dq[m], half, a.scale, row, a.cos_t, a.sin_t, a.dq + t.q_off + (int64_t)row * a.q_stride);
    }
}

/* A dK/dV block's step `step`: query head head0 + step / per_head, its query tile first + step % per_head
 * of BR rows. Its Q, dO, lse2 and Δ into the buffers given. */
template <int D, int BR>
static __device__ __forceinline__ void load_step(const Attn &a, int64_t b, int head0, int first, int per_head,
                                                 int step, bf16 *Qs, bf16 *dOs, float *L2s, float *Ds) {
  const int h = head0 + step / per_head, q0 = (first + step % per_head) * BR;
  const int64_t q_off = b * a.T * a.q_stride + (int64_t)h * D, stats = (b * a.Hq + h) * a.T;
  load_tile<D, BR>(Qs, a.q + q_off, a.q_stride, q0, a.T);
  load_tile<D, BR>(dOs, a.dout + q_off, a.q_stride, q0, a.T);
  load_stats<BR>(L2s, a.lse2 + stats, q0, a.T);
  load_stats<BR>(Ds, a.delta + stats, q0, a.T);
}

/* Block: a key tile of 64 of kv head g, a warp 16 keys; blocks by the kv heads of a sequence in order, and
 * in a head causal tiles with the most queries first. dK and dV of its keys summed over the query heads of
 * the group and the query tiles of BR that see them, in order, the next tile's Q, dO, lse2 and Δ loading
 * while this one is used (rows past T are zeros: they add nothing). Per query tile, keys as rows: Sᵀ = K·Qᵀ
 * and dPᵀ = V·dOᵀ in registers, Pᵀ and dSᵀ in their place, dV += Pᵀ·dO and dK += dSᵀ·Q. dK·scale stored. */
template <int D, bool MOD>
__global__ void __launch_bounds__(THREADS, 2) attention_dkv_kernel(Attn a) {
  constexpr int BR = Plan<D>::DKV_BR, BC = 16 * WARPS, LD = D + 8, ND = D / 8, NR = BR / 8;
  constexpr bool KREG = Plan<D>::KREG;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *Ks = reinterpret_cast<bf16 *>(smem), *Vs = Ks + BC * LD, *Qs = Vs + BC * LD, *dOs = Qs + 2 * BR * LD;
  float *L2s = reinterpret_cast<float *>(dOs + 2 * BR * LD), *Ds = L2s + 2 * BR;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, q = threadIdx.x & 3;
  const int tiles = (a.T + BC - 1) / BC, k0 = (int)(blockIdx.x % tiles) * BC, keys = k0 + warp * 16;
  const int64_t bg = blockIdx.x / tiles, b = bg / a.Hkv;
  const int head0 = (int)(bg % a.Hkv) * a.group;
  const int64_t kv_off = b * a.T * a.kv_stride + (int64_t)(bg % a.Hkv) * D;
  const float mul = MOD ? 1.0f : a.scale_log2;
  const int lo = a.causal ? k0 : 0, hi = a.causal ? min(a.T, k0 + BC - 1 + a.window) : a.T;
  const int first = lo / BR, per_head = (hi + BR - 1) / BR - first, steps = a.group * per_head;
  load_kv<D, BC>(a, kv_off, k0, Ks, Vs);
  load_step<D, BR>(a, b, head0, first, per_head, 0, Qs, dOs, L2s, Ds);
  copies_commit();
  landed<D, BC>(a, Ks, k0);
  const uint32_t ka = smem_u32(Ks) + warp * 16 * LD * 2 + lane_a<LD>();
  const uint32_t va = smem_u32(Vs) + warp * 16 * LD * 2 + lane_a<LD>();
  const uint32_t qb = smem_u32(Qs) + lane_b<LD>(), qa = smem_u32(Qs) + lane_a<LD>();
  const uint32_t ob = smem_u32(dOs) + lane_b<LD>(), oa = smem_u32(dOs) + lane_a<LD>();
  uint32_t kf[1][KREG ? D / 16 : 1][4], vf[1][KREG ? D / 16 : 1][4];
  if constexpr (KREG) load_a<1, D, LD>(kf, ka), load_a<1, D, LD>(vf, va);

  float dk[1][ND][4] = {}, dv[1][ND][4] = {};
  for (int step = 0; step < steps; step++) {
    const int buf = step & 1, h = head0 + step / per_head, q0 = (first + step % per_head) * BR;
    const uint32_t tile = buf * BR * LD * 2;
    landed<D, BR>(a, Qs + buf * BR * LD, q0);
    if (step + 1 < steps)
      load_step<D, BR>(a, b, head0, first, per_head, step + 1, Qs + (buf ^ 1) * BR * LD,
                       dOs + (buf ^ 1) * BR * LD, L2s + (buf ^ 1) * BR, Ds + (buf ^ 1) * BR);
    copies_commit();
    if (!meets(a, q0, q0 + BR - 1, keys, keys + 15)) continue;
    float st[1][NR][4] = {}, dpt[1][NR][4] = {};
    mma_abt<1, BR, D, LD, KREG>(st, kf, ka, qb + tile);
    mma_abt<1, BR, D, LD, KREG>(dpt, vf, va, ob + tile);
    const bool masked = edge(a, q0, q0 + BR - 1, keys, keys + 15);
    const float slope = a.slopes ? a.slopes[h] : 0.0f, *l2 = L2s + buf * BR, *dl = Ds + buf * BR;
#pragma unroll
    for (int n = 0; n < NR; n++) {
      const float2 lse2 = *reinterpret_cast<const float2 *>(l2 + n * 8 + 2 * q);
      const float2 delta = *reinterpret_cast<const float2 *>(dl + n * 8 + 2 * q);
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float slope_c, p = probability<MOD>(a, slope, st[0][n][e], e & 1 ? lse2.y : lse2.x, mul,
                                            q0 + n * 8 + 2 * q + (e & 1), keys + g + (e >> 1) * 8, masked,
                                            &slope_c);
        dpt[0][n][e] = p * (dpt[0][n][e] - (e & 1 ? delta.y : delta.x)) * slope_c;
        st[0][n][e] = p;
      }
    }
    mma_pb<1, D, BR, LD>(dv, st, oa + tile);
    mma_pb<1, D, BR, LD>(dk, dpt, qa + tile);
  }

#pragma unroll
  for (int half = 0; half < 2; half++) {
    int key = keys + g + 8 * half;
    if (key >= a.T) continue;
    store_row<D>(dk[0], half, a.scale, key, a.cos_t, a.sin_t, a.dk + kv_off + (int64_t)key * a.kv_stride);
    store_row<D>(dv[0], half, 1.0f, key, NULL, NULL, a.dv + kv_off + (int64_t)key * a.kv_stride);
  }
}

/* ---- heads the tiles do not take: one warp per row ------------------------------------------- */

/* Heads of other sizes (up to 256: Gemma's) run here: a warp per query (forward, dq) or per key (dk, dv),
 * the keys or queries it meets in order, each lane holding the elements lane, lane + 32, … of a row in
 * fp32; the same scores, masks, caps, ALiBi and rotary positions as the tiled kernels, each output
 * written by one warp that sums in a fixed order. CUDA cores only: slower than the tiles. */
enum { PLAIN_PER_LANE = 8 /* 256 / 32 */ };

/* Element e of row t of a head, rotated by the rotary tables when given: (x_i, x_{i+D/2}) turns by the
 * angle of pair i at position t (sign −1: back). */
static __device__ float plain_load(const bf16 *head, int64_t stride, int64_t t, int e, int D, const float *cos_t,
                                   const float *sin_t, float sign) {
  float x = ld(head[t * stride + e]);
  if (!cos_t) return x;
  int half = D / 2, i = e % half;
  float c = cos_t[t * half + i], sn = sign * sin_t[t * half + i];
  return e < half ? x * c - ld(head[t * stride + e + half]) * sn : x * c + ld(head[t * stride + e - half]) * sn;
}

/* Σ_e q_e·k_e · scale of the row q the lanes hold and key `key`, before the cap and ALiBi. */
static __device__ float plain_scaled_dot(const Attn &a, int D, const float *q, const bf16 *k_head, int64_t key) {
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

/* ALiBi's slope of local head h, or 0. */
static __device__ float plain_slope(const Attn &a, int h) { return a.slopes ? a.slopes[h] : 0.0f; }

/* Warp per (sequence, head, query t): the online softmax over its keys; out and lse. */
__global__ void attention_plain_forward_kernel(Attn a, int D) {
  int64_t row = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= a.B * a.Hq * a.T) return;
  int64_t t = row % a.T, b = row / a.T / a.Hq;
  int h = (int)(row / a.T % a.Hq);
  const bf16 *q_head = a.q + b * a.T * a.q_stride + (int64_t)h * D;
  const bf16 *k_head = a.k + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  const bf16 *v_head = a.v + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  float q[PLAIN_PER_LANE] = {0}, o[PLAIN_PER_LANE] = {0}, m = -INFINITY, l = 0;
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++)
    q[j] = plain_load(q_head, a.q_stride, t, lane + 32 * j, D, a.cos_t, a.sin_t, 1);
  int64_t first, last;
  plain_keys(a, t, &first, &last);
  for (int64_t key = first; key < last; key++) {
    float s = cap(a, plain_scaled_dot(a, D, q, k_head, key)) + alibi(plain_slope(a, h), t, key);
    float m_new = fmaxf(m, s);
    float rescale = m == -INFINITY ? 0.0f : expf(m - m_new), p = expf(s - m_new);
    l = l * rescale + p;
    for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++)
      o[j] = o[j] * rescale + p * ld(v_head[key * a.kv_stride + lane + 32 * j]);
    m = m_new;
  }
  bf16 *out = a.out_w + b * a.T * a.q_stride + t * a.q_stride + (int64_t)h * D;
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) out[lane + 32 * j] = st(o[j] / l);
  if (lane == 0) a.lse_w[(b * a.Hq + h) * a.T + t] = m + logf(l);
}

/* A row of fp32 gradients of rotated q or k (lanes' elements) turned back and stored: through the
 * warp's shared row, since pair partners sit in other lanes. */
static __device__ void plain_store(float *row, const float *g, float mul, int D, int64_t t, const float *cos_t,
                                   const float *sin_t, bf16 *head, int64_t stride) {
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
  const bf16 *k_head = a.k + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  const bf16 *v_head = a.v + b * a.T * a.kv_stride + (int64_t)(h / a.group) * D;
  float q[PLAIN_PER_LANE] = {0}, g[PLAIN_PER_LANE] = {0}, dq[PLAIN_PER_LANE] = {0};
  for (int j = 0; j < PLAIN_PER_LANE && lane + 32 * j < D; j++) {
    q[j] = plain_load(a.q + q_offset, a.q_stride, t, lane + 32 * j, D, a.cos_t, a.sin_t, 1);
    g[j] = ld(a.dout[q_offset + t * a.q_stride + lane + 32 * j]);
  }
  int64_t first, last;
  plain_keys(a, t, &first, &last);
  for (int64_t key = first; key < last; key++) {
    float capped = cap(a, plain_scaled_dot(a, D, q, k_head, key));
    float p = expf(capped + alibi(plain_slope(a, h), t, key) - a.lse[stat]), dp = 0;
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
  int64_t queries = a.causal ? min((int64_t)a.T, key + a.window) : a.T;
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
      float p = expf(capped + alibi(plain_slope(a, h), t, key) - a.lse[stat]);
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

/* ---- launching --------------------------------------------------------------------------------- */

/* Whether the tiled kernels take heads of D elements. */
static int tiled(int D) { return D == 16 || D == 32 || D == 64 || D == 80 || D == 96 || D == 128; }

template <typename Kernel>
static void launch(Kernel kernel, int64_t blocks, size_t smem, const Attn &a, const char *name) {
  if (blocks > INT_MAX) {
    fprintf(stderr, "plait: attention of %lld blocks is more than one CUDA launch takes\n", (long long)blocks);
    exit(1);
  }
  gpu_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), name);
  /* all of L1 that can be shared memory: two blocks of up to 104 KB an SM */
  gpu_check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 (int)cudaSharedmemCarveoutMaxShared), name);
  kernel<<<(unsigned)blocks, THREADS, smem, gpu_stream()>>>(a);
  gpu_check_launch(name);
}

/* Shared memory: the forward's Q tile and two K and V tiles; dQ's Q and dO, two K and V; dK/dV's K and V,
 * two Q and dO tiles with their lse2 and Δ. */
template <int D, bool MOD>
static void forward_tiled(const Attn &a) {
  constexpr int BR = 128, BC = Plan<D>::BC;
  size_t smem = (size_t)(BR + 4 * BC) * (D + 8) * sizeof(bf16);
  launch(attention_forward_kernel<D, MOD>, a.B * a.Hq * ((a.T + BR - 1) / BR), smem, a,
         "attention_forward_kernel");
}

template <int D, bool MOD>
static void backward_tiled(const Attn &a) {
  constexpr int BR = 64 * Plan<D>::DQ_MT, BC = 64, QUERIES = Plan<D>::DKV_BR;
  size_t dq_smem = (size_t)(2 * BR + 4 * BC) * (D + 8) * sizeof(bf16);
  size_t dkv_smem = (size_t)(2 * BC + 4 * QUERIES) * (D + 8) * sizeof(bf16) + 4 * QUERIES * sizeof(float);
  launch(attention_dq_kernel<D, MOD>, a.B * a.Hq * ((a.T + BR - 1) / BR), dq_smem, a, "attention_dq_kernel");
  launch(attention_dkv_kernel<D, MOD>, a.B * a.Hkv * ((a.T + BC - 1) / BC), dkv_smem, a,
         "attention_dkv_kernel");
}

template <int D>
static void forward(const Attn &a) {
  if (a.softcap > 0 || a.slopes) forward_tiled<D, true>(a);
  else forward_tiled<D, false>(a);
}

template <int D>
static void backward(const Attn &a) {
  if (a.softcap > 0 || a.slopes) backward_tiled<D, true>(a);
  else backward_tiled<D, false>(a);
}

/* The view of a call: strides, pointers, and the rotary tables in scratch when rope. */
static Attn attn_setup(const AttnShape *s) {
  if (s->D < 1 || s->D > 256) {
    fprintf(stderr, "plait: attention heads of %d elements are not supported by the CUDA kernels (up to 256); "
            "choose hidden and heads so that hidden/heads is at most 256\n", s->D);
    exit(1);
  }
  if (s->T > INT_MAX / 4) {
    fprintf(stderr, "plait: attention over %lld positions is more than the CUDA kernels take\n",
            (long long)s->T);
    exit(1);
  }
  Attn a = {};
  a.B = s->B, a.T = (int)s->T, a.Hq = s->Hq, a.Hkv = s->Hkv, a.group = s->Hq / s->Hkv, a.causal = s->causal;
  a.q_stride = (int64_t)s->Hq * s->D, a.kv_stride = (int64_t)s->Hkv * s->D;
  a.scale = (float)(s->scale > 0 ? s->scale : 1 / sqrt((double)s->D));
  a.scale_log2 = a.scale * LOG2E;
  a.window = (int)(s->window > 0 && s->window < s->T ? s->window : s->T);
  a.softcap = (float)s->softcap;
  a.inv_softcap = s->softcap > 0 ? (float)(1 / s->softcap) : 0.0f;
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

/* The tiled kernels copy 16 bytes at a time: tensors must start at multiples of 16 (plait's arenas do). */
static int aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

void plait_attention_forward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, act_t *out, real *lse) {
  if (s->B <= 0 || s->T <= 0) return;
  Attn a = attn_setup(s);
  a.q = q, a.k = k, a.v = v, a.out_w = out, a.lse_w = lse;
  if (!tiled(s->D) || !aligned(q) || !aligned(k) || !aligned(v) || !aligned(out)) {
    int64_t rows = s->B * s->Hq * s->T;
    attention_plain_forward_kernel<<<gpu_blocks(rows, WARPS), THREADS, 0, gpu_stream()>>>(a, s->D);
    gpu_check_launch("attention_plain_forward_kernel");
    return;
  }
  switch (s->D) {
  case 16: forward<16>(a); break;
  case 32: forward<32>(a); break;
  case 64: forward<64>(a); break;
  case 80: forward<80>(a); break;
  case 96: forward<96>(a); break;
  default: forward<128>(a); break;
  }
}

void plait_attention_backward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, const act_t *out,
                              const real *lse, const act_t *dout, act_t *dq, act_t *dk, act_t *dv) {
  if (s->B <= 0 || s->T <= 0) return;
  Attn a = attn_setup(s);
  a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse, a.dout = dout, a.dq = dq, a.dk = dk, a.dv = dv;
  int on_tiles = tiled(s->D) && aligned(q) && aligned(k) && aligned(v) && aligned(out) && aligned(dout) &&
                 aligned(dq) && aligned(dk) && aligned(dv);
  int64_t rows = s->B * s->T * s->Hq;
  float *stats = (float *)gpu_scratch(GPU_SCRATCH_B, (size_t)(2 * rows) * sizeof(float));
  int vector = s->D % 8 == 0 && aligned(out) && aligned(dout);
  attention_prep_kernel<<<gpu_blocks(rows, THREADS), THREADS, 0, gpu_stream()>>>(a, s->D, vector, stats,
                                                                                 on_tiles ? stats + rows : NULL);
  gpu_check_launch("attention_prep_kernel");
  a.delta = stats, a.lse2 = stats + rows;
  if (!on_tiles) {
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
  case 80: backward<80>(a); break;
  case 96: backward<96>(a); break;
  default: backward<128>(a); break;
  }
}
