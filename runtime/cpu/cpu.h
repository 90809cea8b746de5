/* cpu.h: what the CPU kernels share: exp, vector-width clones, column blocks, allocation. */
#ifndef PLAIT_CPU_H
#define PLAIT_CPU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "real.h"

/* Sums over rows into a per-column result (parameter and bias gradients) are split into blocks of
 * columns, one block per task, each summing its rows in order: the same bits for any thread count. */
enum { CPU_COLUMN_BLOCK = 64 };

/* The hot loops are compiled for AVX-512, AVX2 and baseline x86-64 and the loader picks the one this
 * CPU runs (one choice per machine, so the bits are still the same for any thread count). Built with
 * PLAIT_CPU_BASELINE (plait build under PLAIT_CPU=baseline, with the runtime built alike), only the
 * baseline path is compiled: what a CPU without AVX2 runs, tested on any host. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PLAIT_CPU_BASELINE)
#define CPU_WIDE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_WIDE
#endif

/* e^x in float, within about 1 ulp (measured: 1.05 at most), branch-free so that loops over it vectorise:
 * x = n·ln2 + r with n = round(x·log2 e) and |r| ≤ ln2/2 (ln2 split in two parts so n·ln2 is exact),
 * e^r = 1 + (r + r²·q(r)) with q the Taylor series of (e^r − 1 − r)/r² to r⁵/7! (truncation below 1e-8
 * relative; the large terms added last), e^x = e^r·2^(n−1)·2 with 2^(n−1) built from its exponent bits.
 * Results below e^-86 (about 4e-38) are flushed to 0; above e^88.72, inf. */
static inline float cpu_expf(float x) {
  float xc = x == x ? x : 0; /* clamped, so that converting n to an integer stays defined */
  xc = xc < -87.0f ? -87.0f : xc > 89.0f ? 89.0f : xc;
  float t = xc * 1.44269504088896341f;
  float n = (t + 12582912.0f) - 12582912.0f; /* adding and removing 1.5·2^23 rounds to an integer */
  float r = xc - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  float q = 1.0f / 5040;
  q = q * r + 1.0f / 720;
  q = q * r + 1.0f / 120;
  q = q * r + 1.0f / 24;
  q = q * r + 1.0f / 6;
  q = q * r + 0.5f;
  float p = 1 + (r + r * r * q);
  int32_t bits = ((int32_t)n + 126) << 23;
  float half_scale;
  memcpy(&half_scale, &bits, sizeof half_scale);
  float y = p * half_scale * 2;
  y = x < -86.0f ? 0.0f : y;
  y = x > 88.72f ? INFINITY : y;
  return x != x ? x : y;
}

/* e^x in `real`: the vectorisable one above in float, the C library's in double. */
#ifdef PLAIT_REAL_DOUBLE
static inline real cpu_exp(real x) { return exp(x); }
#else
static inline real cpu_exp(real x) { return cpu_expf(x); }
#endif

static inline int64_t cpu_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* The threads one GEMM may use (OpenBLAS keeps its own count; the plain C GEMM takes OpenMP's). */
void cpu_gemm_threads(int threads);
/* The memory regions OpenBLAS was built to hand out at once, one to each GEMM while it runs and one to
 * each thread of its own, and the thread count it was built for; 0 when there is no such limit (the
 * plain C GEMM) or the library does not say. */
int cpu_gemm_buffers(int *max_threads);
/* The bytes OpenBLAS maps for each of its buffers; 0 for the plain C GEMM. */
double cpu_gemm_buffer_bytes(void);

/* The memory this process can still take (the least of the machine's available memory, its ulimit -v and
 * -d, its cgroups' limits), what bounds it in `what`; negative when none of them can be read. The limits
 * of mapped memory leave room for mapped_besides bytes the process will map besides (besides_what names
 * them). */
double cpu_memory_available(double mapped_besides, const char *besides_what, char *what, size_t size);

/* Kernels take no scratch from their caller; running out of memory here ends the program with one line. */
static inline void *cpu_alloc(size_t count, size_t size, const char *what) {
  void *p = calloc(count ? count : 1, size);
  if (!p) {
    fprintf(stderr, "plait: out of memory for %s (%zu bytes); use a smaller batch or sequence\n", what, count * size);
    exit(1);
  }
  return p;
}

#endif
