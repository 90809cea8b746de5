/* parts.cu: tensors taken apart and joined along the last dim in groups of parts, on the GPU. */
#include "gpu.h"

/* The parts' sizes by value, so that a kernel reads them from its parameters. */
struct Parts {
  int nparts;
  int64_t sizes[8];
  int64_t period;
};

static Parts parts_of(int nparts, const int64_t *sizes) {
  Parts p = {};
  p.nparts = nparts;
  for (int i = 0; i < nparts && i < 8; i++) p.sizes[i] = sizes[i], p.period += sizes[i];
  return p;
}

/* One thread per element of y: y[r, g·s + j] = x[r, g·period + offset + j]. */
__global__ void split_kernel(int64_t n, Parts p, int64_t offset, int64_t s, const __nv_bfloat16 *x, __nv_bfloat16 *y) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = x[(i / s) * p.period + offset + i % s];
}

/* One thread per element of y: the part and place it comes from, or 0 for a missing part. */
struct PartPointers {
  const __nv_bfloat16 *part[8];
};

__global__ void concat_kernel(int64_t n, Parts p, PartPointers src, __nv_bfloat16 *y) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t run = i / p.period, at = i % p.period;
  int k = 0;
  while (at >= p.sizes[k]) at -= p.sizes[k++];
  y[i] = src.part[k] ? src.part[k][run * p.sizes[k] + at] : st(0.0f);
}

void k_split(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, int part, const act_t *x, act_t *y) {
  Parts p = parts_of(nparts, sizes);
  int64_t offset = 0, n = rows * groups * sizes[part];
  for (int i = 0; i < part; i++) offset += sizes[i];
  if (n <= 0) return;
  split_kernel<<<gpu_blocks(n, 256), 256, 0, gpu_stream()>>>(n, p, offset, sizes[part], x, y);
  gpu_check_launch("split_kernel");
}

void k_concat(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, const act_t *const *parts, act_t *y) {
  Parts p = parts_of(nparts, sizes);
  PartPointers src = {};
  for (int i = 0; i < nparts && i < 8; i++) src.part[i] = parts[i];
  int64_t n = rows * groups * p.period;
  if (n <= 0) return;
  concat_kernel<<<gpu_blocks(n, 256), 256, 0, gpu_stream()>>>(n, p, src, y);
  gpu_check_launch("concat_kernel");
}
