/* device.c: the CPU backend's memory is the host's. */
#include "device.h"
#include "cpu.h"
#include "kernels.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void device_init(int local_rank) { (void)local_rank; }

/* Host memory is overcommitted, so the plan is compared with what the process used in the last log
 * line instead. */
void device_expect(size_t planned_bytes) { (void)planned_bytes; }

/* Each rank's kernels and GEMMs run on cores/ranks threads: OpenBLAS's OpenMP build keeps its own count,
 * so it is set too (else every rank's GEMM would take every core, and the teams would spin on each
 * other). */
void device_share(int ranks_in_process) {
  int threads = omp_get_num_procs() / ranks_in_process;
  omp_set_num_threads(threads > 0 ? threads : 1);
  cpu_gemm_threads(threads > 0 ? threads : 1);
}

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
