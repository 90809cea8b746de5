/* fold.cu: the ordered fold of the local backend's collectives on the GPU (comm_memory.c): every
 * element folded over the members' buffers left to right, as the host fold does. */
#include "gpu.h"

/* Sources one kernel folds: every member of a group, in one kernel, so the running result is never
 * written over a source still to be read (the destination is a member's own buffer) and bf16 is rounded
 * once. 256 pointers keep the kernel's parameters within the 4 KB every driver takes. */
enum { FOLD_SOURCES = 256 };

typedef struct {
  const void *p[FOLD_SOURCES];
} FoldSources;

/* Element loads and stores in the type of the fold's sums: bf16 widens to float (and is rounded once,
 * at the end), float and double stay. */
static __device__ __forceinline__ float fold_load(const __nv_bfloat16 *p, int64_t i) { return ld(p[i]); }
static __device__ __forceinline__ float fold_load(const float *p, int64_t i) { return p[i]; }
static __device__ __forceinline__ double fold_load(const double *p, int64_t i) { return p[i]; }
static __device__ __forceinline__ void fold_store(__nv_bfloat16 *p, int64_t i, float v) { p[i] = st(v); }
static __device__ __forceinline__ void fold_store(float *p, int64_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void fold_store(double *p, int64_t i, double v) { p[i] = v; }

/* dst[i] = src[0][i] ⊕ src[1][i] ⊕ … left to right, ⊕ = + or max (a NaN in any source wins). */
template <typename T, typename Acc>
__global__ void fold_kernel(T *dst, FoldSources src, int count, int64_t n, int max) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Acc acc = fold_load((const T *)src.p[0], i);
  for (int j = 1; j < count; j++) {
    Acc x = fold_load((const T *)src.p[j], i);
    acc = max ? (x > acc || x != x ? x : acc) : acc + x;
  }
  fold_store(dst, i, acc);
}

template <typename T, typename Acc>
static void fold(void *dst, const void *const *src, int count, int64_t n, int max) {
  FoldSources s;
  for (int j = 0; j < count; j++) s.p[j] = src[j];
  fold_kernel<T, Acc><<<gpu_blocks(n, 256), 256, 0, gpu_stream()>>>((T *)dst, s, count, n, max);
  gpu_check_launch("fold_kernel");
  gpu_sync("a fold of the communication layer");
}

void gpu_fold(void *dst, const void *const *src, int count, int64_t n, int element_bytes, int bf16, int max) {
  if (n <= 0) return;
  if (count > FOLD_SOURCES) {
    fprintf(stderr, "plait: a group of %d ranks as threads on one GPU is more than the %d the local backend folds; "
            "run the ranks as processes (mpirun, srun or torchrun's variables)\n", count, FOLD_SOURCES);
    exit(1);
  }
  if (bf16) fold<__nv_bfloat16, float>(dst, src, count, n, max);
  else if (element_bytes == 4) fold<float, float>(dst, src, count, n, max);
  else fold<double, double>(dst, src, count, n, max);
}
