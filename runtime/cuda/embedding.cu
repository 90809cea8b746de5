/* embedding.cu: token embedding over a vocabulary shard of the table, forward and a deterministic
 * backward: the positions sorted by row on the GPU (a stable radix sort), then summed in that order,
 * chunk by chunk of positions, with 16-byte accesses and no atomics. */
#include "gpu.h"

#include <cub/device/device_radix_sort.cuh>

enum {
  THREADS = 256,
  CHUNK = 64, /* sorted positions a block of the backward sums */
  BATCH = 8,  /* positions whose loads are in flight at once */
};

/* p[0 .. W) += x. */
template <int W>
static __device__ __forceinline__ void add_vec(float *p, const float *x) {
  float sum[W];
  load_vec<W>(p, sum);
#pragma unroll
  for (int k = 0; k < W; k++) sum[k] += x[k];
  store_vec<W>(p, sum);
}

/* ---- forward ---------------------------------------------------------------------------------------- */

/* out[n, c] = table[ids[n] − row0, c] when row0 ≤ ids[n] < row0 + rows, else 0: a thread copies W
 * columns at a time (8: one 16-byte load and store), striding over the grid. */
template <int W>
__global__ void embedding_forward_kernel(int64_t N, int64_t C, const int32_t *ids, const __nv_bfloat16 *table,
                                         int64_t row0, int64_t rows, __nv_bfloat16 *out) {
  int64_t per_row = C / W, items = N * per_row;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < items; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t n = i / per_row, c = i % per_row * W, row = (int64_t)ids[n] - row0;
    const __nv_bfloat16 *from = row >= 0 && row < rows ? table + row * C + c : NULL;
    if constexpr (W == 8) __stwb((uint4 *)(out + n * C + c), from ? *(const uint4 *)from : make_uint4(0, 0, 0, 0));
    else out[n * C + c] = from ? *from : st(0.0f);
  }
}

template <int W>
static void embedding_forward(int64_t N, int64_t C, const int32_t *ids, const act_t *table, int64_t row0,
                              int64_t rows, act_t *out) {
  unsigned blocks = gpu_grid((const void *)embedding_forward_kernel<W>, THREADS, N * (C / W));
  embedding_forward_kernel<W><<<blocks, THREADS, 0, gpu_stream()>>>(N, C, ids, table, row0, rows, out);
  gpu_check_launch("embedding_forward_kernel");
}

void k_embedding_forward(int64_t N, int64_t C, const int32_t *ids, const act_t *table, int64_t row0, int64_t rows,
                         act_t *out) {
  if (N <= 0 || C <= 0) return;
  if (C % 8 == 0 && gpu_aligned16(table) && gpu_aligned16(out)) embedding_forward<8>(N, C, ids, table, row0, rows, out);
  else embedding_forward<1>(N, C, ids, table, row0, rows, out);
}

/* ---- backward ----------------------------------------------------------------------------------------- */

/* key[n] = the row of ids[n] in the shard, or `rows` for an id outside it (sorted after every row, and
 * left out); position[n] = n. */
__global__ void embedding_keys_kernel(int64_t N, const int32_t *ids, int64_t row0, int64_t rows, uint32_t *key,
                                      int32_t *position) {
  int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  int64_t row = (int64_t)ids[n] - row0;
  key[n] = (uint32_t)(row >= 0 && row < rows ? row : rows);
  position[n] = (int32_t)n;
}

/* The sorted positions: key[k] ascending, order[k] the position of the k-th, ascending within a key.
 * Chunk b holds k in [b·CHUNK, min(N, (b + 1)·CHUNK)). */
struct Sorted {
  int64_t N, C, rows;
  const uint32_t *key;
  const int32_t *order;
};

static __device__ __forceinline__ int64_t chunk_end(const Sorted &s, int64_t b) {
  return min(s.N, (b + 1) * CHUNK);
}

/* Block b (blockIdx.x) sums the positions of chunk b row by row, in order, over W columns from c of each
 * thread (blockIdx.y, threadIdx.x). A row's sum goes to dtable when all its positions are in the chunk;
 * to lead[b] when the row continues from the chunk before (only the chunk's first row can); to own[b]
 * when it starts here and continues into the next chunk (only the last row can). embedding_carry_kernel
 * then adds those in order. */
template <int W>
__global__ void embedding_chunk_kernel(Sorted s, const __nv_bfloat16 *dout, float *dtable, float *lead, float *own) {
  int64_t b = blockIdx.x, k0 = b * CHUNK, k1 = chunk_end(s, b);
  int64_t c = ((int64_t)blockIdx.y * blockDim.x + threadIdx.x) * W;
  if (c >= s.C) return;
  uint32_t before = k0 > 0 ? s.key[k0 - 1] : UINT32_MAX, after = k1 < s.N ? s.key[k1] : UINT32_MAX;
  uint32_t row = s.key[k0];
  if (row >= s.rows) return; /* the chunk holds ids outside the shard alone (they sort last) */
  float sum[W] = {};
  auto flush = [&](bool continues) {
    if (row >= s.rows) return; /* ids outside the shard */
    if (row == before) store_vec<W>(lead + b * s.C + c, sum);
    else if (continues) store_vec<W>(own + b * s.C + c, sum);
    else add_vec<W>(dtable + row * s.C + c, sum);
  };
  for (int64_t k = k0; k < k1; k += BATCH) {
    float x[BATCH][W];
#pragma unroll
    for (int u = 0; u < BATCH; u++)
      if (k + u < k1 && s.key[k + u] < s.rows) load_vec<W>(dout + (int64_t)s.order[k + u] * s.C + c, x[u]);
#pragma unroll
    for (int u = 0; u < BATCH; u++) {
      if (k + u >= k1) break;
      if (s.key[k + u] != row) {
        flush(false);
        row = s.key[k + u];
#pragma unroll
        for (int j = 0; j < W; j++) sum[j] = 0;
      }
#pragma unroll
      for (int j = 0; j < W; j++) sum[j] += x[u][j];
    }
  }
  flush(row == after);
}

/* The first k ≥ from whose key is above `row` (N when none). */
static __device__ int64_t rows_end(const Sorted &s, int64_t from, uint32_t row) {
  int64_t lo = from, hi = s.N;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (s.key[mid] > row) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/* Chunk b whose last row starts in it and continues past it: dtable[row] += own[b] + lead[b + 1] + … up
 * to the chunk where the row ends, in that order. */
template <int W>
__global__ void embedding_carry_kernel(Sorted s, const float *lead, const float *own, float *dtable) {
  int64_t b = blockIdx.x, k0 = b * CHUNK, k1 = chunk_end(s, b);
  int64_t c = ((int64_t)blockIdx.y * blockDim.x + threadIdx.x) * W;
  uint32_t row = s.key[k1 - 1];
  if (c >= s.C || row >= s.rows || k1 == s.N || s.key[k1] != row || (k0 > 0 && s.key[k0 - 1] == row)) return;
  int64_t last = (rows_end(s, k1, row) - 1) / CHUNK; /* the chunk holding the row's last position */
  float sum[W], x[BATCH][W];
  load_vec<W>(own + b * s.C + c, sum);
  for (int64_t d = b + 1; d <= last; d += BATCH) {
#pragma unroll
    for (int u = 0; u < BATCH; u++)
      if (d + u <= last) load_vec<W>(lead + (d + u) * s.C + c, x[u]);
#pragma unroll
    for (int u = 0; u < BATCH; u++)
      if (d + u <= last)
#pragma unroll
        for (int j = 0; j < W; j++) sum[j] += x[u][j];
  }
  add_vec<W>(dtable + row * s.C + c, sum);
}

template <int W>
static void embedding_sums(const Sorted &s, const act_t *dout, real *dtable, float *lead, float *own) {
  int64_t vectors = s.C / W, chunks = (s.N + CHUNK - 1) / CHUNK;
  int threads = gpu_column_threads(vectors);
  dim3 grid((unsigned)chunks, gpu_blocks(vectors, threads));
  embedding_chunk_kernel<W><<<grid, threads, 0, gpu_stream()>>>(s, dout, dtable, lead, own);
  gpu_check_launch("embedding_chunk_kernel");
  embedding_carry_kernel<W><<<grid, threads, 0, gpu_stream()>>>(s, lead, own, dtable);
  gpu_check_launch("embedding_carry_kernel");
}

/* The ids' rows as keys, sorted with their positions by CUB's radix sort (stable: the positions of a row
 * stay in increasing order; the bits depend on the ids alone), then summed row by row in that order. */
void k_embedding_backward(int64_t N, int64_t C, const int32_t *ids, const act_t *dout, int64_t row0, int64_t rows,
                          real *dtable) {
  if (N <= 0 || C <= 0 || rows <= 0) return;
  cudaStream_t stream = gpu_stream();
  int64_t chunks = (N + CHUNK - 1) / CHUNK;
  int bits = 1;
  while (bits < 32 && (rows >> bits) != 0) bits++; /* the keys are at most `rows` */
  uint32_t *keys = (uint32_t *)gpu_scratch(GPU_SCRATCH_A, (size_t)(4 * N) * sizeof(int32_t)), *sorted = keys + N;
  int32_t *positions = (int32_t *)(sorted + N), *order = positions + N;
  size_t temp_bytes = 0;
  gpu_check(cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, keys, sorted, positions, order, N, 0, bits, stream),
            "sorting the embedding's positions");
  void *temp = gpu_scratch(GPU_SCRATCH_B, temp_bytes);
  float *lead = (float *)gpu_scratch(GPU_SCRATCH_C, (size_t)(2 * chunks * C) * sizeof(float)), *own = lead + chunks * C;
  embedding_keys_kernel<<<gpu_blocks(N, THREADS), THREADS, 0, stream>>>(N, ids, row0, rows, keys, positions);
  gpu_check_launch("embedding_keys_kernel");
  gpu_check(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, sorted, positions, order, N, 0, bits, stream),
            "sorting the embedding's positions");
  Sorted s = {N, C, rows, sorted, order};
  if (C % 8 == 0 && gpu_aligned16(dout) && gpu_aligned16(dtable)) embedding_sums<8>(s, dout, dtable, lead, own);
  else embedding_sums<1>(s, dout, dtable, lead, own);
}
