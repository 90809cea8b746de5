/* device.c: the CPU backend: memory is the host's, threads are shared among the ranks of the process, and
 * the peak GEMM rate is measured at start-up. */
#include "device.h"
#include "cpu.h"
#include "kernels.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* Each rank's kernels and GEMMs run on cores/ranks threads. */
static int threads_per_rank(int ranks_in_process) {
  int threads = omp_get_num_procs() / ranks_in_process;
  return threads > 0 ? threads : 1;
}

/* OpenBLAS's OpenMP build sets its own count to the calling thread's OpenMP count before each product:
 * a rank thread left at OpenMP's default (every core) would run every GEMM on all cores, and the ranks'
 * GEMMs would spin waiting for OpenBLAS's one set of thread buffers (127 ranks on 2 cores made no step
 * in two minutes; with the count set, 4 s for three steps). */
void device_init(int local_rank, int ranks_in_process) {
  (void)local_rank;
  omp_set_num_threads(threads_per_rank(ranks_in_process));
}

/* Host memory is overcommitted, so the plan is compared with what the process used in the last log
 * line instead. */
void device_expect(size_t planned_bytes) { (void)planned_bytes; }

/* Each rank's kernels and GEMMs run on cores/ranks threads: OpenBLAS's OpenMP build keeps its own count,
 * so it is set too (else every rank's GEMM would take every core, and the teams would spin on each
 * other). */
void device_share(int ranks_in_process) {
  omp_set_num_threads(threads_per_rank(ranks_in_process));
  cpu_gemm_threads(threads_per_rank(ranks_in_process));
}

/* The buffers OpenBLAS keeps for its own threads: one for each of its count, every core at start-up (no
 * more than the threads it was built for). */
static int kept_buffers(int threads) {
  int max_threads;
  cpu_gemm_buffers(&max_threads);
  return max_threads > 0 && threads > max_threads ? max_threads : threads;
}

/* The cores the peak rate times at once: every one, or as many products as OpenBLAS can run beside the
 * buffers it keeps. */
static int peak_team(int cores) {
  int max_threads, buffers = cpu_gemm_buffers(&max_threads), room = buffers - kept_buffers(cores);
  return buffers <= 0 || cores <= room ? cores : room > 1 ? room : 1;
}

/* OpenBLAS's buffers in use at once: while the peak rate is measured, each timed core's product and the
 * buffers OpenBLAS keeps; while training, each rank's product and its threads' buffers. */
static int gemm_buffers_at_once(int ranks_in_process) {
  int procs = omp_get_num_procs(), measuring = peak_team(procs) + kept_buffers(procs);
  int training = ranks_in_process + threads_per_rank(ranks_in_process);
  return measuring > training ? measuring : training;
}

double device_memory_available(int ranks_are_processes, int ranks_in_process, char *what, size_t size) {
  (void)ranks_are_processes; /* processes on one machine share its memory too */
  int buffers = gemm_buffers_at_once(ranks_in_process);
  double besides = buffers * cpu_gemm_buffer_bytes();
  char besides_what[128];
  snprintf(besides_what, sizeof besides_what, "OpenBLAS's %d buffers of %.0f MB", buffers, cpu_gemm_buffer_bytes() / 1e6);
  return cpu_memory_available(besides, besides_what, what, size);
}

/* Every rank's GEMM holds one of OpenBLAS's buffers while it runs, and OpenBLAS keeps one for each thread
 * of its count: ranks + threads per rank must not pass the buffers it was built with. */
int device_local_ranks_max(char *why, size_t size) {
  int max_threads, buffers = cpu_gemm_buffers(&max_threads), ranks = buffers;
  if (buffers <= 0) return 0;
  while (ranks > 1 && ranks + threads_per_rank(ranks) > buffers) ranks--;
  snprintf(why, size, "this program's OpenBLAS hands out %d GEMM buffers at once (built for %d threads)", buffers,
           max_threads);
  return ranks;
}

DeviceMemory device_memory_held(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (DeviceMemory){usage.ru_maxrss * 1024.0 /* KiB */, "peak resident memory", "this process",
                        "peak_resident_bytes"};
}

const char *device_name(void) { return "CPU"; }

/* The MFU's denominator, this machine's peak GEMM rate: every core at once (one OpenMP thread each, on
 * which OpenBLAS runs the thread's products by itself) times 512³ products of its own for a quarter of a
 * second, and the fastest rate each core reached is summed. Timed as one team, a product waits for its
 * slowest thread, so on a busy machine one thread that lost its core spoiled the timing: a few such
 * products on all cores gave 13 to 160 GFLOP/s over start-ups of a shared 2-core machine whose cores
 * peak at about 210. A core's fastest product is one it ran without interruption, at the speed the
 * hardware gives. The best rather than the median: MFU is a fraction of the peak, and a rate measured
 * through a busy spell would let it pass 100% once the machine is quiet. On a machine with more cores than
 * OpenBLAS has buffers for products at once (beside those it keeps for its own threads), as many cores as
 * it can serve are timed and the sum is scaled to every core. */
enum { PEAK_GEMM_SIZE = 512, PEAK_GEMM_REPEATS = 8 };
static const double peak_gemm_seconds = 0.25;

static void *measure_peak(void *result) {
  double start = omp_get_wtime(), total = 0;
  int cores = omp_get_num_procs(), team = peak_team(cores);
#pragma omp parallel num_threads(team) reduction(+ : total)
  {
    double best = 0;
    do {
      double rate = k_gemm_rate(PEAK_GEMM_SIZE, PEAK_GEMM_REPEATS);
      if (rate > best) best = rate;
    } while (omp_get_wtime() - start < peak_gemm_seconds);
    total += best;
  }
  *(double *)result = total * cores / team;
  return NULL;
}

/* Measured on a thread of its own, whose OpenMP team ends with it. A team outlives its region, and while
 * libgomp keeps more threads than there are cores it lets idle team threads spin only briefly before
 * sleeping: the start-up team beside a rank's own made every kernel of the rank wake its threads through
 * the kernel (tiny at one rank on 2 cores: a fifth of the step in futex calls). */
double device_peak_flops(void) {
  double rate = 0;
  pthread_t thread;
  if (pthread_create(&thread, NULL, measure_peak, &rate) != 0) return measure_peak(&rate), rate;
  pthread_join(thread, NULL);
  return rate;
}

double device_peak_share(double process_peak, int ranks_on_machine) {
  double per_core = process_peak / omp_get_num_procs();
  double even_share = per_core * (double)sysconf(_SC_NPROCESSORS_ONLN) / ranks_on_machine;
  return process_peak < even_share ? process_peak : even_share;
}

enum { HUGE_PAGE = 2 << 20 };

/* Arenas of a huge page or more are aligned to huge pages, marked for them (the kernel's "madvise" mode),
 * and written through once here: every page is faulted in now, 512 at a time, rather than read first
 * (mapping the shared zero page) and copied on the first write in the middle of a step, each copy
 * flushing the other cores' TLBs. Smaller arenas are calloc'd. */
void *device_alloc(size_t bytes, const char *what) {
  void *p = NULL;
  if (bytes >= HUGE_PAGE) {
    size_t rounded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (posix_memalign(&p, HUGE_PAGE, rounded) != 0) p = NULL;
    if (p) {
      madvise(p, rounded, MADV_HUGEPAGE); /* advice only: without huge pages the touch below still helps */
      memset(p, 0, rounded);
    }
  } else {
    p = calloc(bytes ? bytes : 1, 1);
  }
  if (!p) {
    fprintf(stderr, "plait: out of memory: %zu bytes of %s\n", bytes, what);
    exit(1);
  }
  return p;
}

void device_free(void *p) { free(p); }
void device_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
void device_sync(void) {}
void device_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
void device_upload(void *dst, const void *host, size_t bytes) { memcpy(dst, host, bytes); }
void device_download(void *host, const void *src, size_t bytes) { memcpy(host, src, bytes); }
