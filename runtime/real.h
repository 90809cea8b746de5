/* real.h: the number types of generated programs. `real`: parameters' master copies, gradients,
 * optimizer state and statistics (float; double when built with PLAIT_REAL_DOUBLE, for gradient checks
 * against finite differences). `act_t`: activations and the weights compute reads — `real` on the CPU;
 * bf16 in the CUDA build (PLAIT_CUDA), where host code only moves its bits. */
#ifndef PLAIT_REAL_H
#define PLAIT_REAL_H

#include <stdint.h>

#if defined(PLAIT_CUDA)
typedef float real;
#define REAL_NAME "f32"
#if defined(__CUDACC__)
#include <cuda_bf16.h>
typedef __nv_bfloat16 act_t;
#else
typedef uint16_t act_t;
/* The value of bf16 bits: the top half of a float. */
static inline double act_value(act_t x) {
  union { uint32_t bits; float value; } u = {(uint32_t)x << 16};
  return u.value;
}
/* x as bf16 bits, rounded to nearest even (x finite). */
static inline act_t act_round(double x) {
  union { float value; uint32_t bits; } u = {(float)x};
  return (act_t)((u.bits + 0x7fffu + (u.bits >> 16 & 1u)) >> 16);
}
#endif
#define ACT_SEPARATE 1 /* activations and weights for compute are not the master copies */
#elif defined(PLAIT_REAL_DOUBLE)
typedef double real;
typedef double act_t;
#define REAL_NAME "f64"
#define ACT_SEPARATE 0
static inline double act_value(act_t x) { return x; }
static inline act_t act_round(double x) { return x; }
#else
typedef float real;
typedef float act_t;
#define REAL_NAME "f32"
#define ACT_SEPARATE 0
static inline double act_value(act_t x) { return x; }
static inline act_t act_round(double x) { return (act_t)x; }
#endif

#endif
