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

/* W elements from src to dst (8: one 16-byte load and store), or zeros where src is NULL. */
template <int W>
static __device__ __forceinline__ void copy_vec(__nv_bfloat16 *dst, const __nv_bfloat16 *src) {
  if constexpr (W == 8) __stwb((uint4 *)dst, src ? *(const uint4 *)src : make_uint4(0, 0, 0, 0));
  else *dst = src ? *src : st(0.0f);
}

/* Threads stride over y, W elements at a time: y[r, g·s + j] = x[r, g·period + offset + j]. With W = 8,
 * s, period and offset are multiples of 8, so the W elements come from one run of x. */
template <int W>
__global__ void split_kernel(int64_t n, Parts p, int64_t offset, int64_t s, const __nv_bfloat16 *x, __nv_bfloat16 *y) {
  int64_t first = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * W, step = (int64_t)gridDim.x * blockDim.x * W;
  for (int64_t i = first; i < n; i += step) copy_vec<W>(y + i, x + (i / s) * p.period + offset + i % s);
}

/* The parts by value: where each element of y comes from, or 0 for a missing part. */
struct PartPointers {
  const __nv_bfloat16 *part[8];
};

/* Threads stride over y, W elements at a time, each from the part and place it belongs to (with W = 8,
 * every size is a multiple of 8, so the W elements are in one part). */
template <int W>
__global__ void concat_kernel(int64_t n, Parts p, PartPointers src, __nv_bfloat16 *y) {
  int64_t first = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * W, step = (int64_t)gridDim.x * blockDim.x * W;
  for (int64_t i = first; i < n; i += step) {
    int64_t run = i / p.period, at = i % p.period;
    const __nv_bfloat16 *from = NULL;
    bool found = false;
#pragma unroll
    for (int k = 0; k < 8; k++) { /* unrolled: the parameters are not indexed at run time (no local copy) */
      if (found || k >= p.nparts) continue;
      if (at < p.sizes[k]) found = true, from = src.part[k] ? src.part[k] + run * p.sizes[k] + at : NULL;
      else at -= p.sizes[k];
    }
    copy_vec<W>(y + i, from);
  }
}

/* Whether every size is a multiple of 8 and every pointer 16-byte aligned (NULL parts pass). */
static bool parts_wide(const Parts &p, const act_t *const *pointers, int count) {
  bool wide = true;
  for (int i = 0; i < p.nparts; i++) wide = wide && p.sizes[i] % 8 == 0;
  for (int i = 0; i < count; i++) wide = wide && gpu_aligned16(pointers[i]);
  return wide;
}

void k_split(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, int part, const act_t *x, act_t *y) {
  Parts p = parts_of(nparts, sizes);
  int64_t offset = 0, n = rows * groups * sizes[part];
  for (int i = 0; i < part; i++) offset += sizes[i];
  if (n <= 0) return;
  const act_t *pointers[2] = {x, y};
  cudaStream_t stream = gpu_stream();
  if (parts_wide(p, pointers, 2))
    split_kernel<8><<<gpu_grid((const void *)split_kernel<8>, 256, n / 8), 256, 0, stream>>>(n, p, offset,
                                                                                              sizes[part], x, y);
  else
    split_kernel<1><<<gpu_grid((const void *)split_kernel<1>, 256, n), 256, 0, stream>>>(n, p, offset, sizes[part],
                                                                                          x, y);
  gpu_check_launch("split_kernel");
}

void k_concat(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, const act_t *const *parts, act_t *y) {
  Parts p = parts_of(nparts, sizes);
  PartPointers src = {};
  const act_t *pointers[9] = {y};
  for (int i = 0; i < nparts && i < 8; i++) src.part[i] = pointers[i + 1] = parts[i];
  int64_t n = rows * groups * p.period;
  if (n <= 0) return;
  cudaStream_t stream = gpu_stream();
  if (parts_wide(p, pointers, 1 + (nparts < 8 ? nparts : 8)))
    concat_kernel<8><<<gpu_grid((const void *)concat_kernel<8>, 256, n / 8), 256, 0, stream>>>(n, p, src, y);
  else
    concat_kernel<1><<<gpu_grid((const void *)concat_kernel<1>, 256, n), 256, 0, stream>>>(n, p, src, y);
  gpu_check_launch("concat_kernel");
}
