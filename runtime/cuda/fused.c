/* fused.c: launching the generated program's fused elementwise kernels: the first launch compiles them
 * all (through the cache) for the device's architecture and loads them; each launch then runs one on
 * the rank's stream, its threads striding over the elements on as many blocks as the device holds at
 * once (fewer for fewer elements). */
#include "cuda_rt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu.h"

enum { THREADS = 256 };

/* The kernels of this process, loaded once: a CUDA library is not tied to one context, so ranks that
 * are threads on one GPU (or processes' single ranks) share it. */
typedef struct {
  pthread_mutex_t lock;
  int loaded;
  cudaLibrary_t library;
  cudaKernel_t *kernels;
} FusedKernels;

static FusedKernels fused = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void fused_load(void) {
  struct cudaDeviceProp prop;
  gpu_check(cudaGetDeviceProperties(&prop, gpu_context()->device), "cudaGetDeviceProperties");
  CudaCode code;
  char error[8192];
  if (cuda_compile_fused_cached(plait_cuda_kernels, plait_cuda_kernel_count, prop.major * 10 + prop.minor, &code, error,
                                sizeof error) != 0) {
    fprintf(stderr, "plait: %s\n", error);
    exit(1);
  }
  gpu_check(cudaLibraryLoadData(&fused.library, code.data, NULL, NULL, 0, NULL, NULL, 0), "loading the fused kernels");
  free(code.data);
  fused.kernels = calloc((size_t)plait_cuda_kernel_count + 1, sizeof *fused.kernels);
  for (int i = 0; i < plait_cuda_kernel_count; i++)
    gpu_check(cudaLibraryGetKernel(&fused.kernels[i], fused.library, plait_cuda_kernels[i].name),
              plait_cuda_kernels[i].name);
  fused.loaded = 1;
}

void cuda_launch_fused(int index, int64_t n, void **args) {
  if (n <= 0) return;
  pthread_mutex_lock(&fused.lock);
  if (!fused.loaded) fused_load();
  pthread_mutex_unlock(&fused.lock);
  const void *kernel = (const void *)fused.kernels[index];
  dim3 grid = {gpu_grid(kernel, THREADS, n), 1, 1}, block = {THREADS, 1, 1};
  gpu_check(cudaLaunchKernel(kernel, grid, block, args, 0, gpu_stream()),
            plait_cuda_kernels[index].name);
}
