/* copy_rate.c: the GPU's copy rate, the ceiling the GPU check holds its memory-bound kernels to: one
 * device-to-device copy of 2 GiB (far beyond any cache), counted as the bytes read plus those written,
 * the median of 9 rounds of 4 copies after 2 warm-up copies. The source holds non-zero data. One line:
 *   copy GB_PER_S */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"

enum { WARMUP = 2, ROUNDS = 9, COPIES = 4 };
static const size_t BYTES = (size_t)2 << 30;
static const size_t PATTERN = (size_t)64 << 20; /* the host's pattern, repeated over the source */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The source: a byte pattern that is not zeros, uploaded piece by piece. */
static void fill(unsigned char *dev) {
  unsigned char *host = malloc(PATTERN);
  if (!host) {
    fprintf(stderr, "copy_rate: out of host memory\n");
    exit(1);
  }
  for (size_t i = 0; i < PATTERN; i++) host[i] = (unsigned char)(i * 2654435761u >> 24 | 1);
  for (size_t at = 0; at < BYTES; at += PATTERN) device_upload(dev + at, host, PATTERN);
  free(host);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  device_init(0, 1);
  unsigned char *src = device_alloc(BYTES, "the copy's source"), *dst = device_alloc(BYTES, "its target");
  fill(src);
  for (int i = 0; i < WARMUP; i++) device_copy(dst, src, BYTES);
  device_sync();
  double rates[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double start = now();
    for (int i = 0; i < COPIES; i++) device_copy(dst, src, BYTES);
    device_sync();
    rates[r] = 2.0 * BYTES * COPIES / (now() - start) / 1e9;
  }
  qsort(rates, ROUNDS, sizeof *rates, by_value);
  unsigned char first = 0;
  device_download(&first, dst, 1);
  if (first != (unsigned char)1) {
    fprintf(stderr, "copy_rate: the copy's first byte is %d, not 1\n", first);
    return 1;
  }
  printf("copy %.1f\n", rates[ROUNDS / 2]);
  device_free(src);
  device_free(dst);
  return 0;
}
