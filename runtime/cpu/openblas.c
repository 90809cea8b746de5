/* openblas.c: what plait knows of OpenBLAS's memory (its buffers: how many it hands out at once, how
 * large each is) and its start-up under a tight address-space or data limit, which it would otherwise
 * wait out for ever: its constructor retries a failed mapping of its first buffers in a loop, before main.
 * A constructor that runs before OpenBLAS's checks the room first and ends the process with one line. */
#ifndef PLAIT_PLAIN_GEMM
#include <cblas.h>
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cpu.h"

#ifdef PLAIT_PLAIN_GEMM
void cpu_gemm_threads(int threads) { (void)threads; }
int cpu_gemm_buffers(int *max_threads) {
  *max_threads = 0;
  return 0;
}
double cpu_gemm_buffer_bytes(void) { return 0; }
#else
void cpu_gemm_threads(int threads) { openblas_set_num_threads(threads); }

/* OpenBLAS's common.h: NUM_BUFFERS = MAX(50, MAX_CPU_NUMBER · 2 · MAX_PARALLEL_NUMBER), MAX_PARALLEL_NUMBER
 * 1 unless built otherwise, and MAX_CPU_NUMBER the build's NUM_THREADS, which openblas_get_config()
 * names as MAX_THREADS=N. Past NUM_BUFFERS regions OpenBLAS 0.3.21 prints a warning and adds 512 more;
 * past those it prints that the program "is Terminated" and returns no buffer, and the GEMM crashes. */
int cpu_gemm_buffers(int *max_threads) {
  const char *found = strstr(openblas_get_config(), "MAX_THREADS=");
  *max_threads = found ? atoi(found + strlen("MAX_THREADS=")) : 0;
  if (*max_threads <= 0) return 0;
  return 2 * *max_threads > 50 ? 2 * *max_threads : 50;
}

/* OpenBLAS's BUFFER_SIZE, which the library does not report: 32 << 22 bytes in common_x86_64.h, 32 << 20
 * in common_arm64.h (its default builds), and a page more for the region's header. Mapped whole and
 * touched only in part: it counts against ulimit -v, not against the memory available. */
double cpu_gemm_buffer_bytes(void) {
#if defined(__x86_64__)
  return (32 << 22) + 4096;
#else
  return (32 << 20) + 4096;
#endif
}

/* ---- start-up under limits ---------------------------------------------------------------------- */

/* The buffers OpenBLAS's OpenMP build maps before main: one for each of its threads, OMP_NUM_THREADS's
 * first count or else the cores this process may run on, at most those cores (measured with OpenBLAS
 * 0.3.21: 1, 2 and 8 threads asked on 2 cores mapped 128, 256 and 256 MiB). */
static int start_buffers(void) {
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  const char *asked = getenv("OMP_NUM_THREADS");
  int threads = asked ? atoi(asked) : 0;
  if (cores < 1) cores = 1;
  return threads > 0 && threads < cores ? threads : cores;
}

/* This process's VmSize or VmData now, in bytes (0 when /proc does not say). */
static double process_bytes(const char *field) {
  char line[256];
  double kb = 0;
  FILE *f = fopen("/proc/self/status", "r");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, strlen(field)) == 0) kb = atof(line + strlen(field));
  if (f) fclose(f);
  return kb * 1024;
}

/* Ends the process with one line when a limit leaves less room than the buffers need. */
static void check_limit(int resource, const char *flag, const char *field, double need) {
  struct rlimit limit;
  if (getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  double used = process_bytes(field), room = (double)limit.rlim_cur - used;
  if (room >= need) return;
  double least_kb = (used + need) / 1024 + 64 * 1024; /* and 64 MiB for the program's own start */
  fprintf(stderr, "plait: OpenBLAS maps %d buffers of %.0f MB at start-up, more than the %.0f MB ulimit %s leaves; "
          "raise it to at least %.0f (ulimit %s %.0f), or run fewer threads (OMP_NUM_THREADS)\n", start_buffers(),
          cpu_gemm_buffer_bytes() / 1e6, room > 0 ? room / 1e6 : 0, flag, least_kb, flag, least_kb);
  _exit(1);
}

/* Runs before OpenBLAS's own constructor (a numbered priority runs before the unnumbered ones). */
__attribute__((constructor(101))) static void check_openblas_room(void) {
  double need = start_buffers() * cpu_gemm_buffer_bytes();
  check_limit(RLIMIT_AS, "-v", "VmSize:", need);
  check_limit(RLIMIT_DATA, "-d", "VmData:", need);
}
#endif
