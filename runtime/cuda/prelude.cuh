/* prelude.cuh: the text NVRTC compiles in front of a program's fused elementwise kernels (carried inside
 * the runtime library, not read at run time): bf16 storage with float arithmetic, the activations of
 * runtime/cpu/ew_cpu.h by the same formulas, and dropout drawn from Philox exactly as on the CPU
 * (philox.h, given to NVRTC as a header of that name with stdint.h, math.h and real.h beside it). */

typedef unsigned short act_t; /* bf16 bits */

/* bf16 → float: the bits are the top half of a float. */
static __device__ __forceinline__ float ld(act_t x) { return __uint_as_float((unsigned)x << 16); }

/* float → bf16, rounded to nearest even (NaN stays NaN). */
static __device__ __forceinline__ act_t st(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (act_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (act_t)(u >> 16);
}

/* The fused kernels' 16-byte accesses: 8 consecutive elements at p (16-byte aligned: rt_wide) widened to
 * float, or rounded (act_t) and stored; parameter gradients are float. */
static __device__ __forceinline__ bool rt_wide(const void *p) { return (unsigned long long)p % 16 == 0; }
static __device__ __forceinline__ void rt_load8(const act_t *p, float *x) {
  uint4 raw = *(const uint4 *)p;
  const unsigned word[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    x[2 * k] = __uint_as_float(word[k] << 16);
    x[2 * k + 1] = __uint_as_float(word[k] & 0xffff0000u);
  }
}
static __device__ __forceinline__ void rt_load8(const float *p, float *x) {
  float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
static __device__ __forceinline__ void rt_store8(act_t *p, const float *y) {
  unsigned word[4];
#pragma unroll
  for (int k = 0; k < 4; k++) word[k] = (unsigned)st(y[2 * k]) | (unsigned)st(y[2 * k + 1]) << 16;
  __stwb((uint4 *)p, make_uint4(word[0], word[1], word[2], word[3])); /* one store (a plain one may be split) */
}
static __device__ __forceinline__ void rt_store8(float *p, const float *y) {
  __stwb((float4 *)p, make_float4(y[0], y[1], y[2], y[3]));
  __stwb((float4 *)p + 1, make_float4(y[4], y[5], y[6], y[7]));
}

static __device__ __forceinline__ float rt_exp(float x) { return expf(x); }
static __device__ __forceinline__ float rt_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
/* tanh(x) = 2·sigmoid(2x) − 1 */
static __device__ __forceinline__ float rt_tanh(float x) { return 2.0f * rt_sigmoid(2.0f * x) - 1.0f; }
static __device__ __forceinline__ float rt_silu(float x) { return x * rt_sigmoid(x); }
static __device__ __forceinline__ float rt_relu(float x) { return x > 0.0f ? x : 0.0f; }
static __device__ __forceinline__ float rt_step(float x) { return x > 0.0f ? 1.0f : 0.0f; }

/* gelu(x) = x/2·(1 + tanh(u)) = x·sigmoid(2u), u = sqrt(2/pi)·(x + 0.044715·x³) */
static __device__ __forceinline__ float rt_gelu(float x) {
  const float c = 1.5957691216057308f; /* 2·sqrt(2/pi) */
  return x * rt_sigmoid(c * (x + 0.044715f * x * x * x));
}

/* d gelu / dx = s + x·s·(1 − s)·2u', s = sigmoid(2u), 2u' = 2·sqrt(2/pi)·(1 + 3·0.044715·x²) */
static __device__ __forceinline__ float rt_gelu_grad(float x) {
  const float c = 1.5957691216057308f;
  float s = rt_sigmoid(c * (x + 0.044715f * x * x * x));
  return s + x * s * (1.0f - s) * c * (1.0f + 0.134145f * x * x);
}

/* gelu_exact(x) = x·Φ(x) = x/2·(1 + erf(x/√2)); its derivative Φ(x) + x·φ(x), φ(x) = exp(−x²/2)/√(2π) */
static __device__ __forceinline__ float rt_erf(float x) { return erff(x); }
static __device__ __forceinline__ float rt_gelu_exact(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }
static __device__ __forceinline__ float rt_gelu_exact_grad(float x) {
  return 0.5f * (1.0f + erff(x * 0.7071067811865476f)) + x * 0.3989422804014327f * expf(-0.5f * x * x);
}
static __device__ __forceinline__ float rt_sqrt(float x) { return sqrtf(x); }
static __device__ __forceinline__ float rt_rsqrt(float x) { return rsqrtf(x); }
static __device__ __forceinline__ float rt_log(float x) { return logf(x); }
static __device__ __forceinline__ float rt_abs(float x) { return fabsf(x); }
static __device__ __forceinline__ float rt_sign(float x) { return (float)((x > 0.0f) - (x < 0.0f)); }
static __device__ __forceinline__ float rt_min(float a, float b) { return a <= b ? a : b; }
static __device__ __forceinline__ float rt_max(float a, float b) { return a >= b ? a : b; }
static __device__ __forceinline__ float rt_gt(float a, float b) { return a > b ? 1.0f : 0.0f; }
static __device__ __forceinline__ float rt_ge(float a, float b) { return a >= b ? 1.0f : 0.0f; }

#define PHILOX_FN static __device__ __forceinline__
#include "philox.h"

/* The layouts of rt.h's IndexMap and EwKeys (checked against the host's size, passed as
 * PLAIT_EWKEYS_BYTES, so that the keys a launcher passes by value read the same here). */
typedef struct {
  int ndim;
  long long local[6], global[6], offset[6];
} IndexMap;

typedef struct {
  unsigned long long seed;
  unsigned long long stream[4];
  IndexMap map;
  int training;
} EwKeys;

static_assert(sizeof(EwKeys) == PLAIT_EWKEYS_BYTES, "EwKeys differs from runtime/rt.h");

/* The element's index in the whole logical tensor of the global batch (rt.h's rt_global_index). */
static __device__ __forceinline__ unsigned long long rt_global_index(const IndexMap *m, long long i) {
  unsigned long long index = 0, stride = 1;
  for (int a = m->ndim - 1; a >= 0; a--) {
    long long coord = i % m->local[a];
    i /= m->local[a];
    index += (unsigned long long)(coord + m->offset[a]) * stride;
    stride *= (unsigned long long)m->global[a];
  }
  return index;
}

/* Inverted dropout of the value of local element i: kept with probability 1 − p and scaled by 1/(1 − p). */
static __device__ __forceinline__ float rt_dropout(float v, double p, const EwKeys *k, int which, long long i) {
  if (!k->training) return v;
  return philox_keep(k->seed, k->stream[which], rt_global_index(&k->map, i), p) ? (float)(v / (1.0 - p)) : 0.0f;
}
