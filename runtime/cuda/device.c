/* device.c: the CUDA backend's memory and set-up: finding the GPU (or telling in one line why there is
 * none), each thread's context (stream, cuBLASLt, scratch), allocation with a clear out-of-memory line,
 * copies ordered on the rank's stream, and the bf16 peak MFU is measured against. */
#include "gpu.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WORKSPACE_BYTES = 32 << 20 };

/* ---- finding the device ------------------------------------------------------------------------ */

/* The version as "13.0" from CUDA's 1000·major + 10·minor. */
static void version_text(int version, char *out, size_t size) {
  snprintf(out, size, "%d.%d", version / 1000, version % 1000 / 10);
}

/* Ends the job with one line unless a CUDA device can be used. */
static int require_devices(void) {
  int count = 0, driver = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) return count;
  cudaDriverGetVersion(&driver);
  if (err == cudaErrorInsufficientDriver && driver > 0) {
    char have[16], need[16];
    version_text(driver, have, sizeof have);
    version_text(CUDART_VERSION, need, sizeof need);
    fprintf(stderr, "plait: the NVIDIA driver supports CUDA %s but this program was built with CUDA %s; update the "
            "driver, or build with a toolkit no newer than %s\n", have, need, have);
  } else {
    fprintf(stderr, "plait: no CUDA device: %s; run on a machine with an NVIDIA GPU and its driver, or build for the "
            "CPU (plait build without --backend cuda)\n",
            err == cudaSuccess ? "the driver reports no GPU" : driver == 0 ? "no NVIDIA driver is loaded" : cudaGetErrorString(err));
  }
  exit(1);
}

void gpu_check(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return;
  fprintf(stderr, "plait: CUDA error in %s: %s\n", what, cudaGetErrorString(err));
  exit(1);
}

void gpu_check_launch(const char *kernel) { gpu_check(cudaGetLastError(), kernel); }

/* ---- contexts ---------------------------------------------------------------------------------- */

static pthread_key_t context_key;
static pthread_once_t context_once = PTHREAD_ONCE_INIT;

static void context_free(void *arg) {
  GpuContext *c = arg;
  if (!c) return;
  cudaSetDevice(c->device);
  cudaStreamSynchronize(c->stream);
  gpu_gemm_plans_free(c);
  gpu_attention_free(c);
  for (int s = 0; s < GPU_SCRATCH_SLOTS; s++)
    if (c->scratch[s]) cudaFreeAsync(c->scratch[s], c->stream);
  cudaStreamSynchronize(c->stream);
  cudaFree(c->workspace);
  cudaFreeHost(c->pinned);
  cublasLtDestroy(c->lt);
  cudaStreamDestroy(c->stream);
  free(c);
}

static void make_context_key(void) { pthread_key_create(&context_key, context_free); }

static GpuContext *context_new(int device) {
  GpuContext *c = calloc(1, sizeof *c);
  if (!c) {
    fprintf(stderr, "plait: out of host memory for a GPU context\n");
    exit(1);
  }
  c->device = device;
  gpu_check(cudaSetDevice(device), "cudaSetDevice");
  gpu_check(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  gpu_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  if (cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "plait: cuBLASLt could not start on GPU %d\n", device);
    exit(1);
  }
  c->workspace_bytes = WORKSPACE_BYTES;
  c->workspace = gpu_alloc(c->workspace_bytes, "cuBLASLt's workspace");
  return c;
}

GpuContext *gpu_context(void) {
  pthread_once(&context_once, make_context_key);
  GpuContext *c = pthread_getspecific(context_key);
  if (!c) {
    int device = 0;
    require_devices();
    gpu_check(cudaGetDevice(&device), "cudaGetDevice");
    c = context_new(device);
    pthread_setspecific(context_key, c);
  }
  return c;
}

/* The host work of ranks that are threads (drawing the initial weights, reading data) takes its share of
 * the cores. */
static int threads_per_rank(int ranks_in_process) {
  int threads = omp_get_num_procs() / ranks_in_process;
  return threads > 0 ? threads : 1;
}

void device_init(int local_rank, int ranks_in_process) {
  omp_set_num_threads(threads_per_rank(ranks_in_process));
  int count = require_devices();
  if (local_rank < 0 || local_rank >= count) {
    fprintf(stderr, "plait: this rank's place on its node is %d but the node has %d GPU%s; start at most one rank per "
            "GPU on each node\n", local_rank, count, count == 1 ? "" : "s");
    exit(1);
  }
  pthread_once(&context_once, make_context_key);
  GpuContext *c = pthread_getspecific(context_key);
  if (c && c->device == local_rank) return;
  context_free(c);
  pthread_setspecific(context_key, context_new(local_rank));
}

/* A plan larger than the GPU's free memory cannot be allocated whatever else happens (other ranks on the
 * same GPU only take more): the job ends before allocating. */
void device_expect(size_t planned_bytes) {
  GpuContext *c = gpu_context();
  size_t free_bytes = 0, total = 0;
  c->planned_bytes = planned_bytes;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess || planned_bytes <= free_bytes) return;
  fprintf(stderr, "plait: the plan puts %zu bytes on this rank, more than the %zu of GPU %d's %zu bytes that are "
          "free; run a smaller model or microbatch, more pipeline stages (--pp) or tensor parallelism (--tp), or "
          "--recompute full\n", planned_bytes, free_bytes, c->device, total);
  exit(1);
}

/* Ranks that are threads share GPU 0 (known before they start); a process's GPU is its local rank's,
 * checked by device_expect once the process has it. */
double device_memory_available(int ranks_are_processes, int ranks_in_process, char *what, size_t size) {
  size_t free_bytes = 0, total = 0;
  (void)ranks_in_process;
  if (ranks_are_processes) return -1;
  require_devices();
  if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  snprintf(what, size, "GPU 0's free memory (of %zu bytes)", total);
  return (double)free_bytes;
}

/* Ranks that are threads share the GPU as streams; nothing here bounds their count. */
int device_local_ranks_max(char *why, size_t size) {
  snprintf(why, size, "nothing");
  return 0;
}

/* ---- names and peaks --------------------------------------------------------------------------- */

/* Dense bf16 tensor-core peaks in TFLOP/s (the vendors' figures without sparsity), by a part of the
 * name the driver reports; the first match wins, so specific names come before general ones. */
static const struct {
  const char *name;
  double tflops;
} peaks[] = {
  {"H100 PCIe", 756}, {"H100 NVL", 835}, {"H200 NVL", 835}, {"GH200", 989}, {"H100", 989}, {"H200", 989},
  {"H800", 989}, {"H20", 148}, {"B200", 2250}, {"B100", 1750}, {"A100", 312}, {"A800", 312}, {"L40S", 362},
  {"L40", 181}, {"L4", 121}, {"A10G", 70}, {"A10", 125},
};

/* Ranks that are threads share the GPU as streams of one device; the host work they do (drawing the
 * initial weights, reading data) takes its share of the cores. */
void device_share(int ranks_in_process) { omp_set_num_threads(threads_per_rank(ranks_in_process)); }

/* The name of this thread's GPU, or of GPU 0 before device_init (main() asks for the peak before the
 * ranks start; a context is not made for that). */
const char *device_name(void) {
  static _Thread_local char name[256];
  struct cudaDeviceProp prop;
  require_devices();
  pthread_once(&context_once, make_context_key);
  GpuContext *c = pthread_getspecific(context_key);
  gpu_check(cudaGetDeviceProperties(&prop, c ? c->device : 0), "cudaGetDeviceProperties");
  snprintf(name, sizeof name, "%s", prop.name);
  return name;
}

/* PLAIT_PEAK_TFLOPS overrides the table (a GPU it does not know gives 0: no MFU). */
double device_peak_flops(void) {
  const char *override = getenv("PLAIT_PEAK_TFLOPS");
  if (override && atof(override) > 0) return atof(override) * 1e12;
  const char *name = device_name();
  for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++)
    if (strstr(name, peaks[i].name)) return peaks[i].tflops * 1e12;
  return 0;
}

double device_peak_share(double process_peak, int ranks_on_machine) {
  (void)ranks_on_machine;
  return process_peak;
}

/* ---- memory ------------------------------------------------------------------------------------ */

DeviceMemory device_memory_held(void) {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) cudaGetLastError(), free_bytes = total = 0;
  return (DeviceMemory){(double)(total - free_bytes), "GPU memory in use", "the whole device, once training is done",
                        "gpu_in_use_bytes"};
}

static _Noreturn void out_of_memory(size_t bytes, const char *what) {
  size_t free_bytes = 0, total = 0;
  char planned[96] = "";
  cudaGetLastError();
  cudaMemGetInfo(&free_bytes, &total);
  pthread_once(&context_once, make_context_key);
  const GpuContext *c = pthread_getspecific(context_key); /* none yet while the context itself is made */
  size_t plan = c ? c->planned_bytes : 0;
  if (plan) snprintf(planned, sizeof planned, " (the plan puts %zu bytes on this rank)", plan);
  fprintf(stderr, "plait: out of GPU memory: %s needs %zu bytes and %zu of the GPU's %zu bytes are free%s; use a "
          "smaller --mbs, more pipeline stages (--pp), more tensor parallelism (--tp) or --recompute full\n", what,
          bytes, free_bytes, total, planned);
  exit(1);
}

void *gpu_alloc(size_t bytes, const char *what) {
  void *p = NULL;
  cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
  if (err == cudaErrorMemoryAllocation) out_of_memory(bytes, what);
  gpu_check(err, "cudaMalloc");
  return p;
}

/* Stream-ordered (the old buffer goes when the kernels queued before have used it), and without the
 * device-wide wait of cudaFree, which could hold a rank while a peer's NCCL kernel waits for it. */
void *gpu_buffer_grow(void *old, size_t bytes, const char *what) {
  cudaStream_t stream = gpu_stream();
  void *p = NULL;
  if (old) gpu_check(cudaFreeAsync(old, stream), "cudaFreeAsync");
  cudaError_t err = cudaMallocAsync(&p, bytes ? bytes : 1, stream);
  if (err == cudaErrorMemoryAllocation) out_of_memory(bytes, what);
  gpu_check(err, "cudaMallocAsync");
  return p;
}

void *gpu_scratch(int slot, size_t bytes) {
  GpuContext *c = gpu_context();
  if (bytes > c->scratch_bytes[slot]) {
    c->scratch_bytes[slot] = bytes + bytes / 4;
    c->scratch[slot] = gpu_buffer_grow(c->scratch[slot], c->scratch_bytes[slot], "kernel scratch");
  }
  return c->scratch[slot];
}

void *gpu_pinned(size_t bytes) {
  GpuContext *c = gpu_context();
  if (bytes > c->pinned_bytes) {
    gpu_check(cudaStreamSynchronize(c->stream), "pinned memory");
    cudaFreeHost(c->pinned);
    c->pinned_bytes = bytes > 4096 ? bytes : 4096;
    gpu_check(cudaMallocHost(&c->pinned, c->pinned_bytes), "cudaMallocHost");
  }
  return c->pinned;
}

int gpu_is_device_memory(const void *p) {
  struct cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

unsigned gpu_grid(const void *kernel, int threads, int64_t items) {
  int per_sm = 0;
  gpu_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0), "the occupancy of a kernel");
  int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * gpu_context()->sms, needed = gpu_blocks(items, threads);
  return (unsigned)(needed < resident ? needed : resident);
}

void gpu_sync(const char *what) { gpu_check(cudaStreamSynchronize(gpu_stream()), what); }
void device_sync(void) { gpu_sync("the work queued on the GPU"); }

void *device_alloc(size_t bytes, const char *what) {
  GpuContext *c = gpu_context();
  void *p = gpu_alloc(bytes, what);
  gpu_check(cudaMemsetAsync(p, 0, bytes, c->stream), "cudaMemset");
  return p;
}

void device_free(void *p) {
  if (!p) return;
  gpu_sync("device_free");
  gpu_check(cudaFree(p), "cudaFree");
}

/* Copies and fills are ordered on the rank's stream after the kernels before them; those that bring
 * data to the host wait for it. */
void device_copy(void *dst, const void *src, size_t bytes) {
  if (bytes) gpu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, gpu_stream()), "device_copy");
}

void device_zero(void *p, size_t bytes) {
  if (bytes) gpu_check(cudaMemsetAsync(p, 0, bytes, gpu_stream()), "device_zero");
}

void device_upload(void *dst, const void *host, size_t bytes) {
  if (!bytes) return;
  gpu_check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, gpu_stream()), "device_upload");
  gpu_sync("device_upload"); /* the host buffer may change as soon as this returns */
}

void device_download(void *host, const void *src, size_t bytes) {
  if (!bytes) return;
  gpu_check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, gpu_stream()), "device_download");
  gpu_sync("device_download");
}
