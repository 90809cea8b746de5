/* moe.cu: a mixture of experts' kernels on the GPU: top-k a thread per row; the route by CUB's
 * stable radix sorts (by expert, then by priority within an expert where a capacity drops rows);
 * dispatch, combine and its backward as gathers through each row's source pair, with 16-byte
 * accesses and no atomics; the grouped GEMMs bring the counts (device memory) to the host once per
 * call, then run a cuBLASLt product per expert (k_gemm, gemm.cu), an expert of no rows skipped.
 * Everything is deterministic: sums run in a fixed order, in float. */
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>

#include <cub/device/device_radix_sort.cuh>

enum {
  THREADS = 256,
  PRIORITY_BITS = 16, /* a bf16 priority as an order-preserving key */
};

/* ---- top-k ----------------------------------------------------------------------------------- */

/* The k largest of row r, largest first, a tie to the lower index; the row's earlier picks are read
 * back from `indices` to skip them. */
__global__ void topk_kernel(int64_t rows, int64_t n, int k, const __nv_bfloat16 *x,
                            __nv_bfloat16 *values, int32_t *indices) {
  int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const __nv_bfloat16 *row = x + r * n;
  int32_t *picked = indices + r * k;
  for (int j = 0; j < k; j++) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++) {
      bool taken = false;
      for (int p = 0; p < j && !taken; p++) taken = picked[p] == i;
      if (!taken && (best < 0 || ld(row[i]) > ld(row[best]))) best = i;
    }
    picked[j] = (int32_t)best;
    values[r * k + j] = row[best];
  }
}

void k_topk(int64_t rows, int64_t n, int k, const act_t *x, act_t *values, int32_t *indices) {
  if (rows <= 0 || n <= 0 || k <= 0) return;
  topk_kernel<<<gpu_blocks(rows, THREADS), THREADS, 0, gpu_stream()>>>(rows, n, k, x, values,
                                                                       indices);
  gpu_check_launch("topk_kernel");
}

/* dx[r, i] = the sum of dvalues[r, j] over the picks j of index i (one at most), 0 elsewhere. */
__global__ void topk_backward_kernel(int64_t rows, int64_t n, int k, const int32_t *indices,
                                     const __nv_bfloat16 *dvalues, __nv_bfloat16 *dx) {
  int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (at >= rows * n) return;
  int64_t r = at / n, i = at % n;
  float sum = 0.0f;
  for (int j = 0; j < k; j++)
    if (indices[r * k + j] == i) sum += ld(dvalues[r * k + j]);
  dx[at] = st(sum);
}

void k_topk_backward(int64_t rows, int64_t n, int k, const int32_t *indices, const act_t *dvalues,
                     act_t *dx) {
  if (rows <= 0 || n <= 0) return;
  topk_backward_kernel<<<gpu_blocks(rows * n, THREADS), THREADS, 0, gpu_stream()>>>(
      rows, n, k, indices, dvalues, dx);
  gpu_check_launch("topk_backward_kernel");
}

/* ---- the route ------------------------------------------------------------------------------- */

/* The first p in [0, n) whose key is at least `key` (n when none); keys ascending. */
static __device__ int64_t lower_bound(const uint32_t *keys, int64_t n, uint32_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* A bf16 priority as 16 bits that sort the larger first: the value's order-preserving bits inverted
 * (−0 as +0, so that the two tie as they compare). */
static __device__ uint32_t descending_priority(__nv_bfloat16 p) {
  uint32_t bits = ld(p) == 0.0f ? 0u : (uint32_t)__bfloat16_as_ushort(p);
  uint32_t ascending = bits & 0x8000u ? ~bits & 0xffffu : bits | 0x8000u;
  return 0xffffu - ascending;
}

/* key[i] = the expert of row i, then (with a priority) its rank by priority; row[i] = i. */
__global__ void route_rank_keys_kernel(int64_t n, const int32_t *indices,
                                       const __nv_bfloat16 *priority, uint32_t *key, int32_t *row) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  key[i] =
      (uint32_t)indices[i] << PRIORITY_BITS | (priority ? descending_priority(priority[i]) : 0u);
  row[i] = (int32_t)i;
}

/* Over the rows sorted by expert then priority (a tie in token order): the first `capacity` of each
 * expert keep their expert as key[row]; the others get E (sorted after every kept row). */
__global__ void route_keep_kernel(int64_t n, int64_t E, int64_t capacity, const uint32_t *ranked,
                                  const int32_t *order, uint32_t *key) {
  int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  uint32_t expert = ranked[p] >> PRIORITY_BITS;
  int64_t first = lower_bound(ranked, n, expert << PRIORITY_BITS);
  key[order[p]] = p - first < capacity ? expert : (uint32_t)E;
}

/* Every row kept: key[i] = its expert, row[i] = i. */
__global__ void route_all_keys_kernel(int64_t n, const int32_t *indices, uint32_t *key,
                                      int32_t *row) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  key[i] = (uint32_t)indices[i];
  row[i] = (int32_t)i;
}

/* Over the rows sorted by kept expert (E: dropped) in token order: each row's slot is its place. */
__global__ void route_slots_kernel(int64_t n, int64_t E, const uint32_t *sorted,
                                   const int32_t *order, int32_t *slots) {
  int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p < n) slots[order[p]] = sorted[p] < (uint32_t)E ? (int32_t)p : -1;
}

__global__ void route_counts_kernel(int64_t n, int64_t E, const uint32_t *sorted, int32_t *counts) {
  int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < E)
    counts[e] =
        (int32_t)(lower_bound(sorted, n, (uint32_t)e + 1) - lower_bound(sorted, n, (uint32_t)e));
}

/* The bits that hold every value in [0, top]. */
static int bits_for(int64_t top) {
  int bits = 1;
  while (bits < 32 && (top >> bits) != 0) bits++;
  return bits;
}

/* The route's device temporaries: keys and rows before and after a sort, and CUB's. */
typedef struct {
  uint32_t *key, *sorted;
  int32_t *row, *order;
  void *temp;
  size_t temp_bytes;
} RouteScratch;

static RouteScratch route_scratch(int64_t n, int64_t E) {
  RouteScratch s;
  s.key = (uint32_t *)gpu_scratch(GPU_SCRATCH_A, (size_t)(4 * n) * sizeof(int32_t));
  s.sorted = s.key + n;
  s.row = (int32_t *)(s.sorted + n);
  s.order = s.row + n;
  s.temp_bytes = 0;
  const int widths[2] = {bits_for(E), PRIORITY_BITS + bits_for(E - 1)}; /* the two sorts' keys */
  for (int w = 0; w < 2; w++) {
    size_t bytes = 0;
    gpu_check(cub::DeviceRadixSort::SortPairs(NULL, bytes, s.key, s.sorted, s.row, s.order, n, 0,
                                              widths[w], gpu_stream()),
              "sorting the experts' rows");
    if (bytes > s.temp_bytes) s.temp_bytes = bytes;
  }
  s.temp = gpu_scratch(GPU_SCRATCH_B, s.temp_bytes);
  return s;
}

/* key and row sorted by the low `bits` of the key into sorted and order, stably. */
static void route_sort(RouteScratch *s, int64_t n, int bits) {
  gpu_check(cub::DeviceRadixSort::SortPairs(s->temp, s->temp_bytes, s->key, s->sorted, s->row,
                                            s->order, n, 0, bits, gpu_stream()),
            "sorting the experts' rows");
}

/* With a capacity: the rows sorted by expert and priority, then key[i] = E for those past it. */
static void route_drop_past_capacity(RouteScratch *s, int64_t n, int64_t E, int64_t capacity,
                                     const int32_t *indices, const act_t *priority) {
  unsigned blocks = gpu_blocks(n, THREADS);
  route_rank_keys_kernel<<<blocks, THREADS, 0, gpu_stream()>>>(n, indices, priority, s->key,
                                                               s->row);
  gpu_check_launch("route_rank_keys_kernel");
  route_sort(s, n, PRIORITY_BITS + bits_for(E - 1));
  route_keep_kernel<<<blocks, THREADS, 0, gpu_stream()>>>(n, E, capacity, s->sorted, s->order,
                                                          s->key);
  gpu_check_launch("route_keep_kernel");
}

void k_moe_route(int64_t T, int64_t k, int64_t E, int64_t capacity, const int32_t *indices,
                 const act_t *priority, int32_t *slots, int32_t *counts) {
  if (E <= 0) return;
  if (E >= 1 << (32 - PRIORITY_BITS)) {
    fprintf(stderr, "plait: %lld experts: the CUDA route takes fewer than %d\n", (long long)E,
            1 << (32 - PRIORITY_BITS));
    exit(1);
  }
  int64_t n = T * k;
  if (n <= 0) {
    device_zero(counts, (size_t)E * sizeof *counts);
    return;
  }
  unsigned blocks = gpu_blocks(n, THREADS);
  RouteScratch s = route_scratch(n, E);
  if (capacity > 0)
    route_drop_past_capacity(&s, n, E, capacity, indices, priority);
  else {
    route_all_keys_kernel<<<blocks, THREADS, 0, gpu_stream()>>>(n, indices, s.key, s.row);
    gpu_check_launch("route_all_keys_kernel");
  }
  route_sort(&s, n, bits_for(E));
  route_slots_kernel<<<blocks, THREADS, 0, gpu_stream()>>>(n, E, s.sorted, s.order, slots);
  gpu_check_launch("route_slots_kernel");
  route_counts_kernel<<<gpu_blocks(E, THREADS), THREADS, 0, gpu_stream()>>>(n, E, s.sorted, counts);
  gpu_check_launch("route_counts_kernel");
}

/* fractions[e] = counts[e] / Σ counts, each thread summing the counts itself (integers: exact). */
__global__ void fractions_kernel(int64_t E, const int32_t *counts, __nv_bfloat16 *fractions) {
  int64_t rows = 0;
  for (int64_t e = 0; e < E; e++) rows += counts[e];
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    fractions[e] = st(rows ? (float)((double)counts[e] / (double)rows) : 0.0f);
}

void k_moe_fractions(int64_t E, const int32_t *counts, act_t *fractions) {
  if (E <= 0) return;
  fractions_kernel<<<1, THREADS, 0, gpu_stream()>>>(E, counts, fractions);
  gpu_check_launch("fractions_kernel");
}

/* ---- rows to experts and back ---------------------------------------------------------------- */

/* source[slot] = the pair t·k + j routed to it, -1 for the rows no slot names. */
__global__ void slot_sources_kernel(int64_t n, const int32_t *slots, int32_t *source) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && slots[i] >= 0) source[slots[i]] = (int32_t)i;
}

/* The source pair of each of the n = T·k rows (device scratch A). */
static const int32_t *slot_sources(int64_t n, const int32_t *slots) {
  int32_t *source = (int32_t *)gpu_scratch(GPU_SCRATCH_A, (size_t)n * sizeof(int32_t));
  gpu_check(cudaMemsetAsync(source, 0xff, (size_t)n * sizeof(int32_t), gpu_stream()),
            "the rows' sources");
  slot_sources_kernel<<<gpu_blocks(n, THREADS), THREADS, 0, gpu_stream()>>>(n, slots, source);
  gpu_check_launch("slot_sources_kernel");
  return source;
}

/* rows[r] = x[t] for the pair (t, j) of row r, zeros for a row no slot names; W columns a thread.
 */
template <int W>
__global__ void dispatch_kernel(int64_t n, int k, int64_t D, const __nv_bfloat16 *x,
                                const int32_t *source, __nv_bfloat16 *rows) {
  int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, per_row = D / W;
  if (at >= n * per_row) return;
  int64_t r = at / per_row, c = at % per_row * W;
  float v[W] = {};
  if (source[r] >= 0) load_vec<W>(x + source[r] / k * D + c, v);
  store_vec<W>(rows + r * D + c, v);
}

void k_moe_dispatch(int64_t T, int64_t k, int64_t D, const act_t *x, const int32_t *slots,
                    act_t *rows) {
  int64_t n = T * k;
  if (n <= 0 || D <= 0) return;
  const int32_t *source = slot_sources(n, slots);
  if (D % 8 == 0 && gpu_aligned16(x) && gpu_aligned16(rows))
    dispatch_kernel<8><<<gpu_blocks(n * D / 8, THREADS), THREADS, 0, gpu_stream()>>>(
        n, (int)k, D, x, source, rows);
  else
    dispatch_kernel<1>
        <<<gpu_blocks(n * D, THREADS), THREADS, 0, gpu_stream()>>>(n, (int)k, D, x, source, rows);
  gpu_check_launch("dispatch_kernel");
}

/* out[t] = Σ_j weights[t, j]·rows[slots[t, j]], j in order, over the kept slots; W columns a
 * thread. */
template <int W>
__global__ void combine_kernel(int64_t T, int k, int64_t D, const __nv_bfloat16 *rows,
                               const int32_t *slots, const __nv_bfloat16 *weights,
                               __nv_bfloat16 *out) {
  int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, per_row = D / W;
  if (at >= T * per_row) return;
  int64_t t = at / per_row, c = at % per_row * W;
  float sum[W] = {}, row[W];
  for (int j = 0; j < k; j++) {
    int32_t slot = slots[t * k + j];
    if (slot < 0) continue;
    float w = weights ? ld(weights[t * k + j]) : 1.0f;
    load_vec<W>(rows + (int64_t)slot * D + c, row);
#pragma unroll
    for (int u = 0; u < W; u++) sum[u] += w * row[u];
  }
  store_vec<W>(out + t * D + c, sum);
}

void k_moe_combine(int64_t T, int64_t k, int64_t D, const act_t *rows, const int32_t *slots,
                   const act_t *weights, act_t *out) {
  if (T <= 0 || D <= 0) return;
  if (D % 8 == 0 && gpu_aligned16(rows) && gpu_aligned16(out))
    combine_kernel<8><<<gpu_blocks(T * D / 8, THREADS), THREADS, 0, gpu_stream()>>>(
        T, (int)k, D, rows, slots, weights, out);
  else
    combine_kernel<1><<<gpu_blocks(T * D, THREADS), THREADS, 0, gpu_stream()>>>(
        T, (int)k, D, rows, slots, weights, out);
  gpu_check_launch("combine_kernel");
}

/* drows[r] = weights[i]·dout[t] for the pair i = (t, j) of row r, zeros for a row no slot names. */
template <int W>
__global__ void combine_drows_kernel(int64_t n, int k, int64_t D, const int32_t *source,
                                     const __nv_bfloat16 *weights, const __nv_bfloat16 *dout,
                                     __nv_bfloat16 *drows) {
  int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, per_row = D / W;
  if (at >= n * per_row) return;
  int64_t r = at / per_row, c = at % per_row * W;
  float v[W] = {};
  int32_t i = source[r];
  if (i >= 0) {
    float w = ld(weights[i]);
    load_vec<W>(dout + (int64_t)(i / k) * D + c, v);
#pragma unroll
    for (int u = 0; u < W; u++) v[u] *= w;
  }
  store_vec<W>(drows + r * D + c, v);
}

/* dweights[i] = rows[slots[i]]·dout[t] for the pair i = (t, j), a warp a pair (lanes over the
 * columns, then a fixed tree); 0 for a dropped slot. */
__global__ void combine_dweights_kernel(int64_t n, int k, int64_t D, const __nv_bfloat16 *rows,
                                        const int32_t *slots, const __nv_bfloat16 *dout,
                                        __nv_bfloat16 *dweights) {
  int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (i >= n) return;
  int32_t slot = slots[i];
  float dot = 0.0f;
  if (slot >= 0) {
    const __nv_bfloat16 *row = rows + (int64_t)slot * D, *g = dout + i / k * D;
    for (int64_t d = lane; d < D; d += 32) dot += ld(row[d]) * ld(g[d]);
  }
  dot = warp_sum(dot);
  if (lane == 0) dweights[i] = st(dot);
}

void k_moe_combine_backward(int64_t T, int64_t k, int64_t D, const act_t *rows,
                            const int32_t *slots, const act_t *weights, const act_t *dout,
                            act_t *drows, act_t *dweights) {
  int64_t n = T * k;
  if (n <= 0) return;
  combine_dweights_kernel<<<gpu_blocks(n * 32, THREADS), THREADS, 0, gpu_stream()>>>(
      n, (int)k, D, rows, slots, dout, dweights);
  gpu_check_launch("combine_dweights_kernel");
  if (D <= 0) return;
  const int32_t *source = slot_sources(n, slots);
  if (D % 8 == 0 && gpu_aligned16(dout) && gpu_aligned16(drows))
    combine_drows_kernel<8><<<gpu_blocks(n * D / 8, THREADS), THREADS, 0, gpu_stream()>>>(
        n, (int)k, D, source, weights, dout, drows);
  else
    combine_drows_kernel<1><<<gpu_blocks(n * D, THREADS), THREADS, 0, gpu_stream()>>>(
        n, (int)k, D, source, weights, dout, drows);
  gpu_check_launch("combine_drows_kernel");
}

/* ---- a GEMM per expert ----------------------------------------------------------------------- */

/* The E counts on the host (pinned memory of this thread's context, valid until its next use). */
static const int32_t *host_counts(int64_t E, const int32_t *counts) {
  int32_t *host = (int32_t *)gpu_pinned((size_t)E * sizeof *host);
  gpu_check(
      cudaMemcpyAsync(host, counts, (size_t)E * sizeof *host, cudaMemcpyDefault, gpu_stream()),
      "the experts' counts");
  gpu_sync("the experts' counts");
  return host;
}

void k_grouped_gemm(int trans_b, int64_t E, const int32_t *counts, int64_t rows, int64_t N,
                    int64_t K, const act_t *A, const act_t *W, act_t *C) {
  if (E <= 0) return;
  const int32_t *count = host_counts(E, counts);
  int64_t first = 0;
  for (int64_t e = 0; e < E && first < rows; first += count[e], e++)
    if (count[e] > 0)
      k_gemm(0, trans_b, count[e], N, K, 1, A + first * K, W + e * K * N, 0, C + first * N);
}

void k_grouped_gemm_grad(int64_t E, const int32_t *counts, int64_t rows, int64_t M, int64_t N,
                         const act_t *A, const act_t *B, real *C) {
  if (E <= 0) return;
  const int32_t *count = host_counts(E, counts);
  int64_t first = 0;
  for (int64_t e = 0; e < E && first < rows; first += count[e], e++)
    if (count[e] > 0)
      k_gemm_grad(1, 0, M, N, count[e], A + first * M, B + first * N, C + e * M * N);
}
