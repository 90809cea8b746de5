/* membw.c: this machine's memory bandwidth, for the benchmarks' floor of a training step: a STREAM-like
 * triad and an Adam-like pass over seven streams, each on every core over arrays far larger than the
 * caches, the best of several repetitions. The arrays come from the allocator a program's arenas come
 * from (device_alloc: huge pages where the kernel gives them). Prints "triad GB/s" and "adam GB/s" lines.
 * usage: membw [MILLION_ELEMENTS] (elements of each array; 124 by default, GPT-2 124M's parameters) */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "cpu/cpu.h"
#include "device.h"

enum { REPEATS = 5 };

/* a = b + s·c: 12 bytes an element (two reads, one write). */
CPU_WIDE static void triad(int64_t n, float *restrict a, const float *restrict b, const float *restrict c, float s) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

/* The streams of one AdamW step without its arithmetic: read p, g, m, v; write p, m, v (28 bytes an
 * element):  m = β1·m + (1-β1)·g,  v = β2·v + (1-β2)·g²,  p -= lr·(m + v). */
CPU_WIDE static void adam_streams(int64_t n, float *restrict p, const float *restrict g, float *restrict m,
                                  float *restrict v) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i], mi = 0.9f * m[i] + 0.1f * gi, vi = 0.95f * v[i] + 0.05f * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= 1e-4f * (mi + vi);
  }
}

/* Pages touched by the threads that will stream them (first touch places them). */
static void fill(int64_t n, float *x, float value) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) x[i] = value;
}

static double best_triad(int64_t n, float **x) {
  double best = 0;
  for (int r = 0; r < REPEATS; r++) {
    double start = clock_seconds();
    triad(n, x[0], x[1], x[2], 0.5f);
    double rate = 12.0 * (double)n / (clock_seconds() - start);
    if (rate > best) best = rate;
  }
  return best;
}

static double best_adam(int64_t n, float **x) {
  double best = 0;
  for (int r = 0; r < REPEATS; r++) {
    double start = clock_seconds();
    adam_streams(n, x[0], x[1], x[2], x[3]);
    double rate = 28.0 * (double)n / (clock_seconds() - start);
    if (rate > best) best = rate;
  }
  return best;
}

int main(int argc, char **argv) {
  int64_t n = (int64_t)((argc > 1 ? atof(argv[1]) : 124) * 1e6);
  if (argc > 2 || n <= 0) {
    fprintf(stderr, "usage: membw [MILLION_ELEMENTS]\n");
    return 2;
  }
  float *x[4];
  for (int k = 0; k < 4; k++) {
    x[k] = device_alloc((size_t)n * sizeof(float), "membw's arrays");
    fill(n, x[k], 0.25f * (float)(k + 1));
  }
  printf("triad GB/s %.2f\n", best_triad(n, x) / 1e9);
  printf("adam GB/s %.2f\n", best_adam(n, x) / 1e9);
  for (int k = 0; k < 4; k++) device_free(x[k]);
  return 0;
}
