/* cuda_rt.h: what a generated program's fused_cuda.c and the CUDA runtime share: the fused
 * elementwise kernels as CUDA source (the program defines them), their launch, and their
 * compilation by NVRTC for a device architecture (which needs no GPU, so the tests compile every
 * kernel of the reference models with it). */
#ifndef PLAIT_CUDA_RT_H
#define PLAIT_CUDA_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *name;   /* "ew_bias_add": the kernel's extern "C" name in the source */
  const char *source; /* one __global__ function over act_t (bf16), float arithmetic */
} CudaKernelSource;

/* The generated program's kernels. */
extern const CudaKernelSource plait_cuda_kernels[];
extern const int plait_cuda_kernel_count;

/* Launches kernel `index` of plait_cuda_kernels over n elements (its threads stride over them) on the
 * rank's stream; args points at the kernel's arguments in order. The first launch compiles every
 * kernel (or finds them in the cache). */
void cuda_launch_fused(int index, int64_t n, void **args);

/* What NVRTC made: a CUBIN for the device's own architecture, else PTX for the newest one it knows
 * below it (which the driver compiles on loading). data is malloc'd. */
typedef struct {
  char *data;
  size_t size;
  int binary;        /* 1: CUBIN, 0: PTX (NUL-terminated) */
  int arch;          /* the architecture compiled for: 90 for sm_90 */
  char options[256]; /* the options NVRTC was given, for people and for the cache's key */
} CudaCode;

/* Compiles `count` kernels into one program, the prelude in front, for compute capability `arch`
 * (90: sm_90), with the options the runtime uses. Returns 0, or -1 with `error` holding one line:
 * the kernel that failed (each is compiled alone to find it) and NVRTC's log. */
int cuda_compile_fused(const CudaKernelSource *kernels, int count, int arch, CudaCode *code, char *error,
                       size_t error_size);

/* The same kernels through the on-disk cache: PLAIT_CACHE_DIR, else $XDG_CACHE_HOME/plait, else
 * ~/.cache/plait. An entry's name is a hash of the prelude, the sources, the options, the architecture
 * and NVRTC's version; it is written to a temporary file and renamed into place, so a reader never
 * sees half of one. A cache that cannot be written is passed by. Returns as cuda_compile_fused. */
int cuda_compile_fused_cached(const CudaKernelSource *kernels, int count, int arch, CudaCode *code, char *error,
                              size_t error_size);

#ifdef __cplusplus
}
#endif

#endif
