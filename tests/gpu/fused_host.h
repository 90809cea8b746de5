/* fused_host.h: what the programs tests/gpu/fused_host.py writes need to run fused kernels on the host, a
 * thread at a time: enough of CUDA for the kernels and the NVRTC prelude (the launch's indices as
 * globals, the vector types, the bit casts, __stwb counted: the vector loop's 16-byte stores), then the
 * prelude, the inputs and layout the checks draw, and their main loop. */
#ifndef PLAIT_FUSED_HOST_H
#define PLAIT_FUSED_HOST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define __global__
#define __device__
#define __forceinline__ inline

struct uint4 {
  unsigned x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
struct HostDim {
  unsigned x, y, z;
};

static HostDim blockIdx, threadIdx, blockDim, gridDim;
static long wide_stores;

static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
static inline void __stwb(uint4 *p, uint4 v) { *p = v, wide_stores++; }
static inline void __stwb(float4 *p, float4 v) { *p = v, wide_stores++; }
static inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

#define PLAIT_EWKEYS_BYTES sizeof(EwKeys) /* the host's layout is the prelude's own here */
#include "prelude.cuh"

/* Dropout on, over a layout holding the second half of a batch of 2·rows rows of p. */
static inline EwKeys test_keys(long long rows, long long p) {
  EwKeys keys;
  memset(&keys, 0, sizeof keys);
  keys.seed = 1234, keys.training = 1;
  for (int s = 0; s < 4; s++) keys.stream[s] = 99 + s;
  keys.map.ndim = 2, keys.map.local[0] = rows, keys.map.local[1] = p;
  keys.map.global[0] = 2 * rows, keys.map.global[1] = p, keys.map.offset[0] = rows;
  return keys;
}

/* Input i: `count` bf16 values in [-4, 4), the same whatever the shift, `shift` elements past a 16-byte
 * boundary. Free with free(x - shift). */
static act_t *test_input(int i, long long count, int shift) {
  act_t *x = (act_t *)aligned_alloc(16, 2 * count + 64) + shift;
  for (long long e = 0; e < count; e++) x[e] = st((float)((e * 7919 + i * 104729) % 8001) / 1000.0f - 4.0f);
  return x;
}

/* An output of `count` elements, the kernel's n and some after them, filled with a pattern; test_digest
 * returns a digest of the n, counts those after them that lost the pattern, and frees the output. */
static long strays; /* elements written past the end */
template <typename T>
static T *test_output(long long count, int shift) {
  T *out = (T *)aligned_alloc(16, 4 * count + 64) + shift;
  for (long long e = 0; e < count; e++) out[e] = (T)(e % 1000);
  return out;
}
template <typename T>
static int test_digest(T *out, long long n, long long count, int shift) {
  unsigned hash = 2166136261u;
  for (size_t b = 0; b < (size_t)n * sizeof *out; b++) hash = (hash ^ ((const unsigned char *)out)[b]) * 16777619u;
  for (long long e = n; e < count; e++) strays += out[e] != (T)(e % 1000);
  free(out - shift);
  return (int)hash;
}

/* Runs kernel(rows, p, shift) over the shapes, aligned (shift 0) and not (1), and compares. */
typedef int (*TestedCheck)(long long rows, long long p, int shift);
typedef struct {
  const char *name;
  TestedCheck check;
} TestedKernel;

static int test_kernels(const TestedKernel *tested, int count) {
  static const long long shapes[][2] = {{6, 64}, {7, 16}, {5, 24}, {3, 37}, {1, 5}, {2, 100}};
  int failed = 0;
  long wide = 0;
  blockDim.x = 32, gridDim.x = 3; /* threads stride */
  for (int k = 0; k < count; k++) {
    int same = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      wide_stores = 0;
      int aligned = tested[k].check(shapes[s][0], shapes[s][1], 0);
      wide += wide_stores;
      same = same && aligned == tested[k].check(shapes[s][0], shapes[s][1], 1);
    }
    if (same) printf("PASS %s (vector and element loops agree)\n", tested[k].name);
    else printf("FAIL %s: the vector loop differs from the element loop\n", tested[k].name), failed++;
  }
  if (wide == 0) printf("FAIL: the vector loop never ran\n"), failed++;
  if (strays) printf("FAIL: %ld elements written past the end\n", strays), failed++;
  return failed != 0;
}

#endif
