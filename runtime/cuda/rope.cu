/* rope.cu: rotary positions on the GPU, forward and back. */
#include "gpu.h"

#include <stdlib.h>

/* cos and sin of t·freq_i for t < T and i < half, the angle in double, rounded to float once. */
__global__ void rope_angles_kernel(int64_t T, int half, const double *freq, float *cos_t, float *sin_t) {
  int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= T * half) return;
  double angle = (double)(idx / half) * freq[idx % half];
  cos_t[idx] = (float)cos(angle);
  sin_t[idx] = (float)sin(angle);
}

/* One thread per (position, head, dim of the head): the first `rotary` dims of a head come in pairs
 * (a, b), (y_a, y_b) = (x_a·cos − x_b·sin, x_b·cos + x_a·sin), sin negated for the inverse; each
 * thread writes its own dim and reads its partner's, so y is not x. The dims past `rotary` are copied. */
__global__ void rope_kernel(RopeShape s, const float *cos_t, const float *sin_t, const __nv_bfloat16 *x,
                            __nv_bfloat16 *y) {
  int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t width = (int64_t)s.heads * s.head_dim;
  if (idx >= s.B * s.T * width) return;
  int64_t t = (idx / width) % s.T;
  int e = (int)(idx % s.head_dim), half = s.rotary / 2;
  if (e >= s.rotary) {
    y[idx] = x[idx];
    return;
  }
  int pair = s.interleaved ? e / 2 : e % half, first = s.interleaved ? e % 2 == 0 : e < half;
  int64_t partner = s.interleaved ? (first ? idx + 1 : idx - 1) : (first ? idx + half : idx - half);
  float c = cos_t[t * half + pair], sn = (s.inverse ? -1.0f : 1.0f) * sin_t[t * half + pair];
  float own = ld(x[idx]), other = ld(x[partner]);
  y[idx] = st(first ? own * c - other * sn : own * c + other * sn);
}

void k_rope(const RopeShape *s, const act_t *x, act_t *y) {
  int half = s->rotary / 2;
  int64_t n = s->B * s->T * s->heads * s->head_dim, angles = s->T * half;
  if (n <= 0) return;
  double *freq = (double *)malloc((size_t)half * sizeof(double));
  rope_frequencies(s, freq);
  double *device_freq = (double *)gpu_scratch(GPU_SCRATCH_A, (size_t)half * sizeof(double));
  device_upload(device_freq, freq, (size_t)half * sizeof(double));
  free(freq);
  float *tables = (float *)gpu_scratch(GPU_SCRATCH_B, (size_t)(2 * angles) * sizeof(float));
  rope_angles_kernel<<<gpu_blocks(angles, 256), 256, 0, gpu_stream()>>>(s->T, half, device_freq, tables, tables + angles);
  gpu_check_launch("rope_angles_kernel");
  const act_t *src = x;
  if (x == y) { /* each thread reads its partner: rotate from a copy */
    act_t *copy = (act_t *)gpu_scratch(GPU_SCRATCH_C, (size_t)n * sizeof(act_t));
    device_copy(copy, x, (size_t)n * sizeof(act_t));
    src = copy;
  }
  rope_kernel<<<gpu_blocks(n, 256), 256, 0, gpu_stream()>>>(*s, tables, tables + angles, src, y);
  gpu_check_launch("rope_kernel");
}
