/* embedding.cu: token embedding over a vocabulary shard of the table, forward and a deterministic
 * backward (the positions of each token summed in their order, no atomics). */
#include "gpu.h"

#include <stdlib.h>

/* out[n, c] = table[ids[n] − row0, c] when row0 ≤ ids[n] < row0 + rows, else 0. */
__global__ void embedding_forward_kernel(int64_t N, int64_t C, const int32_t *ids, const __nv_bfloat16 *table,
                                         int64_t row0, int64_t rows, __nv_bfloat16 *out) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  int64_t n = i / C, c = i % C, row = (int64_t)ids[n] - row0;
  out[i] = row >= 0 && row < rows ? table[row * C + c] : st(0.0f);
}

void k_embedding_forward(int64_t N, int64_t C, const int32_t *ids, const act_t *table, int64_t row0, int64_t rows,
                         act_t *out) {
  if (N <= 0 || C <= 0) return;
  embedding_forward_kernel<<<gpu_blocks(N * C, 256), 256, 0, gpu_stream()>>>(N, C, ids, table, row0, rows, out);
  gpu_check_launch("embedding_forward_kernel");
}

/* Segment s (blockIdx.y) lists the positions holding one token of the shard, in increasing n:
 * order[start[s] .. start[s + 1]). dtable[row_s, c] += Σ over those n of dout[n, c], in that order. */
__global__ void embedding_backward_kernel(int64_t C, const int32_t *order, const int32_t *start, const int32_t *row_of,
                                          const __nv_bfloat16 *dout, float *dtable) {
  int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int s = blockIdx.y;
  if (c >= C) return;
  float sum = 0;
  for (int32_t k = start[s]; k < start[s + 1]; k++) sum += ld(dout[(int64_t)order[k] * C + c]);
  dtable[(int64_t)row_of[s] * C + c] += sum;
}

static int compare_keys(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The ids come to the host, where sorting by row groups each token's positions (in
 * order of n) into a segment; the segments go back and one kernel sums each. */
void k_embedding_backward(int64_t N, int64_t C, const int32_t *ids, const act_t *dout, int64_t row0, int64_t rows,
                          real *dtable) {
  if (N <= 0 || C <= 0) return;
  /* pinned: the ids, then the order, the segment starts and the segments' rows (3N + 1 ints) */
  int32_t *host = (int32_t *)gpu_pinned((size_t)(4 * N + 1) * sizeof(int32_t));
  int32_t *order = host + N, *start = order + N, *row_of = start + N + 1;
  device_download(host, ids, (size_t)N * sizeof(int32_t));
  int64_t kept = 0, segments = 0;
  for (int64_t n = 0; n < N; n++) {
    int64_t row = (int64_t)host[n] - row0;
    if (row >= 0 && row < rows) order[kept++] = (int32_t)n;
  }
  /* sorted by (row, n): every key differs, so the order is the same on every run */
  int64_t *keys = (int64_t *)malloc((size_t)(kept + 1) * sizeof(int64_t));
  for (int64_t k = 0; k < kept; k++) keys[k] = ((int64_t)host[order[k]] - row0) << 32 | order[k];
  qsort(keys, (size_t)kept, sizeof *keys, compare_keys);
  for (int64_t k = 0; k < kept; k++) {
    int32_t row = (int32_t)(keys[k] >> 32);
    order[k] = (int32_t)(keys[k] & 0xffffffff);
    if (k == 0 || row != row_of[segments - 1]) start[segments] = (int32_t)k, row_of[segments++] = row;
  }
  start[segments] = (int32_t)kept;
  free(keys);
  if (segments == 0) return;
  int32_t *device = (int32_t *)gpu_scratch(GPU_SCRATCH_A, (size_t)(kept + 2 * segments + 1) * sizeof(int32_t));
  int32_t *d_order = device, *d_start = d_order + kept, *d_row = d_start + segments + 1;
  cudaStream_t stream = gpu_stream();
  gpu_check(cudaMemcpyAsync(d_order, order, (size_t)kept * sizeof(int32_t), cudaMemcpyHostToDevice, stream), "upload");
  gpu_check(cudaMemcpyAsync(d_start, start, (size_t)(segments + 1) * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
            "upload");
  gpu_check(cudaMemcpyAsync(d_row, row_of, (size_t)segments * sizeof(int32_t), cudaMemcpyHostToDevice, stream), "upload");
  for (int64_t s0 = 0; s0 < segments; s0 += 65535) { /* the grid's y extent */
    dim3 grid(gpu_blocks(C, 128), (unsigned)(segments - s0 < 65535 ? segments - s0 : 65535));
    embedding_backward_kernel<<<grid, 128, 0, stream>>>(C, d_order, d_start + s0, d_row + s0, dout, dtable);
    gpu_check_launch("embedding_backward_kernel");
  }
  gpu_sync("k_embedding_backward"); /* the pinned buffers are reused by the next call */
}
