/* device.c: the CPU backend's memory is the host's. */
#include "device.h"
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void device_init(int local_rank) { (void)local_rank; }

const char *device_name(void) { return "CPU"; }

double device_peak_flops(void) { return k_gemm_rate(512, 4); }

void *device_alloc(size_t bytes, const char *what) {
  void *p = calloc(bytes ? bytes : 1, 1);
  if (!p) {
    fprintf(stderr, "plait: out of memory: %zu bytes of %s\n", bytes, what);
    exit(1);
  }
  return p;
}

void device_free(void *p) { free(p); }
void device_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
void device_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
void device_upload(void *dst, const void *host, size_t bytes) { memcpy(dst, host, bytes); }
void device_download(void *host, const void *src, size_t bytes) { memcpy(host, src, bytes); }
