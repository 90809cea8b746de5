// emu.h: runs CUDA kernel source on the CPU, one fiber (ucontext) per thread: warp collectives
// (ldmatrix, mma.sync, shuffles, vote), block barriers and cp.async emulated from the PTX ISA's
// definitions, for checking the tiled attention kernels' index math without a GPU. C++17, not C11:
// the kernels it runs are CUDA C++ (templates, constexpr, references), and so is this stand-in.
#pragma once
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n)
#define __shared__

using std::max;
using std::min;

struct Dim {
  unsigned x, y, z;
};
struct uint4 {
  uint32_t x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
struct float2 {
  float x, y;
};
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return {a, b, c, d};
}
struct __nv_bfloat16 {
  uint16_t bits;
};

static inline float __uint_as_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline uint16_t bf16_bits(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u = u + 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float ld(__nv_bfloat16 x) { return __uint_as_float((uint32_t)x.bits << 16); }
static inline __nv_bfloat16 st(float x) { return {bf16_bits(x)}; }

enum { MAX_THREADS = 256, SMEM_BYTES = 232448 };
extern unsigned char smem[];
extern Dim emu_block_idx, emu_block_dim;

struct Copy {
  uint32_t dst;
  const void *src;
  int bytes, size;
};
enum State { READY, AT_WARP, AT_BLOCK, DONE };
enum Op { OP_LDSM, OP_LDSM_T, OP_MMA, OP_SHFL, OP_SYNCWARP, OP_SHFL_ANY };
struct EmuThread {
  ucontext_t ctx;
  std::vector<char> stack;
  Dim tidx;
  State state;
  Op op;
  uint32_t in[8];
  float fin[4];
  uint32_t out[4];
  float fout[4];
  std::vector<Copy> pending;
};
extern EmuThread *emu_cur;
extern EmuThread emu_threads[MAX_THREADS];
void emu_yield();

#define threadIdx (emu_cur->tidx)
#define blockIdx emu_block_idx
#define blockDim emu_block_dim

static inline void __syncthreads() {
  emu_cur->state = AT_BLOCK;
  emu_yield();
}
static inline void __syncwarp() {
  emu_cur->state = AT_WARP, emu_cur->op = OP_SYNCWARP;
  emu_yield();
}
static inline float __shfl_xor_sync(unsigned, float v, int mask) {
  emu_cur->state = AT_WARP, emu_cur->op = OP_SHFL, emu_cur->fin[0] = v,
  emu_cur->in[0] = (uint32_t)mask;
  emu_yield();
  return emu_cur->fout[0];
}

// ---- the PTX primitives of attention.cu ----
static inline uint32_t smem_u32(const void *p) {
  return (uint32_t)((const unsigned char *)p - smem);
}
static inline void copy16_async(uint32_t dst, const void *src, int bytes) {
  if (dst % 16 || (uintptr_t)src % 16) {
    fprintf(stderr, "misaligned cp.async 16\n");
    abort();
  }
  emu_cur->pending.push_back({dst, src, bytes, 16});
}
static inline void copy4_async(uint32_t dst, const void *src, int bytes) {
  if (dst % 4 || (uintptr_t)src % 4) {
    fprintf(stderr, "misaligned cp.async 4\n");
    abort();
  }
  emu_cur->pending.push_back({dst, src, bytes, 4});
}
static inline void copies_commit() {}
static inline void copies_wait() {
  for (const Copy &c : emu_cur->pending) {
    if (c.dst + c.size > SMEM_BYTES) {
      fprintf(stderr, "cp.async past shared memory\n");
      abort();
    }
    memset(smem + c.dst, 0, c.size);
    memcpy(smem + c.dst, c.src, c.bytes);
  }
  emu_cur->pending.clear();
}
static inline void ldsm(uint32_t (&r)[4], uint32_t addr) {
  emu_cur->state = AT_WARP, emu_cur->op = OP_LDSM, emu_cur->in[0] = addr;
  emu_yield();
  for (int i = 0; i < 4; i++)
    r[i] = emu_cur->out[i];
}
static inline void ldsm_t(uint32_t (&r)[4], uint32_t addr) {
  emu_cur->state = AT_WARP, emu_cur->op = OP_LDSM_T, emu_cur->in[0] = addr;
  emu_yield();
  for (int i = 0; i < 4; i++)
    r[i] = emu_cur->out[i];
}
static inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  emu_cur->state = AT_WARP, emu_cur->op = OP_MMA;
  for (int i = 0; i < 4; i++)
    emu_cur->in[i] = a[i], emu_cur->fin[i] = c[i];
  emu_cur->in[4] = b0, emu_cur->in[5] = b1;
  emu_yield();
  for (int i = 0; i < 4; i++)
    c[i] = emu_cur->fout[i];
}
static inline float exp2_approx(float x) { return exp2f(x); }
static inline uint32_t pack(float lo, float hi) {
  return (uint32_t)bf16_bits(lo) | (uint32_t)bf16_bits(hi) << 16;
}
static inline float low(uint32_t u) { return __uint_as_float(u << 16); }
static inline float high(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

// Runs kernel(args) over `blocks` blocks of `threads` threads, one block at a time, shared memory
// poisoned.
void emu_launch(unsigned blocks, unsigned threads, const std::function<void()> &kernel);
static inline int __any_sync(unsigned, int pred) {
  emu_cur->state = AT_WARP, emu_cur->op = OP_SHFL_ANY, emu_cur->in[0] = pred != 0;
  emu_yield();
  return (int)emu_cur->out[0];
}
