/* device.h: the memory the backend computes in: the host's for the CPU runtime, the GPU's for the CUDA
 * runtime. The common runtime (parameters, the plan's walk, checkpoints, sampling) moves data through
 * these calls only, so that both backends share it. */
#ifndef PLAIT_DEVICE_H
#define PLAIT_DEVICE_H

#include <stddef.h>

/* Picks the device of this rank (the GPU of its local rank); ends the job with one line when there is
 * none. Called on the rank's thread: gives it its share of the cores for OpenMP, as device_share counts
 * them (a thread the process starts does not inherit the count main's thread was given). */
void device_init(int local_rank, int ranks_in_process);
/* The bytes the plan puts on this rank: named when device memory runs out; a GPU with less free memory
 * ends the job at once with one line. */
void device_expect(size_t planned_bytes);
/* Ranks that are threads of this process share its compute: each gets its part (CPU: cores for
 * OpenMP and OpenBLAS). Called once, on main's thread, before the ranks start. */
void device_share(int ranks_in_process);
/* Before the ranks start: the memory the plan of the ranks that share this process's memory can still
 * take, with what bounds it in `what` ("the machine's available memory (MemAvailable)"); negative when
 * it is not known here (CPU: the host's, less what the process maps besides the plan where a limit
 * counts mapped memory; GPU: GPU 0's free memory where the ranks are threads sharing it, not known
 * before start-up where each process has its own, which device_expect checks). */
double device_memory_available(int ranks_are_processes, int ranks_in_process, char *what, size_t size);
/* The most ranks this process can run as its threads, 0 for no limit; `why` says what limits it. */
int device_local_ranks_max(char *why, size_t size);
/* The memory the log's last line gives: on the CPU this process's peak resident set ("peak resident
 * memory", this process); on a GPU the device memory in use when asked, every allocation on the GPU with
 * the CUDA context and libraries ("GPU memory in use", the whole device): asked once training is done,
 * when every arena and buffer the run took is still held. `json_key` names it in --log-json. */
typedef struct {
  double bytes;
  const char *what, *scope, *json_key;
} DeviceMemory;
DeviceMemory device_memory_held(void);
/* What computes: "CPU", or the GPU's name. */
const char *device_name(void);
/* The FLOP/s MFU is measured against: the CPU's peak GEMM rate measured now (every core at once, the best
 * each reached), or a GPU's bf16 dense peak. */
double device_peak_flops(void);
/* This process's part of the job's peak when each rank is a process (a launcher started the job) and
 * ranks_on_machine of them share this machine: a GPU's whole peak (one GPU each); the CPU's peak of the
 * cores this process may use, but no more than its even share of the machine's cores (processes that
 * are not bound to cores all see every core). */
double device_peak_share(double process_peak, int ranks_on_machine);

/* Zeroed memory; ends the job with one line naming `what` and the bytes when there is not enough. */
void *device_alloc(size_t bytes, const char *what);
void device_free(void *p);
void device_copy(void *dst, const void *src, size_t bytes);
/* Returns once the work queued on the device is done (the CPU's is done when its call returns). */
void device_sync(void);
void device_zero(void *p, size_t bytes);
void device_upload(void *dst, const void *host, size_t bytes);
void device_download(void *host, const void *src, size_t bytes);

#endif
