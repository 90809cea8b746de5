/* device.c: the CPU backend: memory is the host's, threads are shared among the ranks of the process, and
 * the peak GEMM rate is measured at start-up. */
#include "device.h"
#include "cpu.h"
#include "kernels.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The MFU's denominator, this machine's peak GEMM rate: every core at once (one OpenMP thread each, on
 * which OpenBLAS runs the thread's products by itself) times 512³ products of its own for a quarter of a
 * second, and the fastest rate each core reached is summed. Timed as one team, a product waits for its
 * slowest thread, so on a busy machine one thread that lost its core spoiled the timing: a few such
 * products on all cores gave 13 to 160 GFLOP/s over start-ups of a shared 2-core machine whose cores
 * peak at about 210. A core's fastest product is one it ran without interruption, at the speed the
 * hardware gives. The best rather than the median: MFU is a fraction of the peak, and a rate measured
 * through a busy spell would let it pass 100% once the machine is quiet. */
enum { PEAK_GEMM_SIZE = 512, PEAK_GEMM_REPEATS = 8 };
static const double peak_gemm_seconds = 0.25;

double device_peak_flops(void) {
  double start = omp_get_wtime(), total = 0;
#pragma omp parallel num_threads(omp_get_num_procs()) reduction(+ : total)
  {
    double best = 0;
    do {
      double rate = k_gemm_rate(PEAK_GEMM_SIZE, PEAK_GEMM_REPEATS);
      if (rate > best) best = rate;
    } while (omp_get_wtime() - start < peak_gemm_seconds);
    total += best;
  }
  return total;
}

double device_peak_share(double process_peak, int ranks_on_machine) {
  double per_core = process_peak / omp_get_num_procs();
  double even_share = per_core * (double)sysconf(_SC_NPROCESSORS_ONLN) / ranks_on_machine;
  return process_peak < even_share ? process_peak : even_share;
}

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
