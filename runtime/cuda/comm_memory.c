/* comm_memory.c: the memory collectives move in the CUDA build (comm_backend.h): copies between any mix
 * of host and GPU buffers, the local backend's ordered fold on the GPU (fold.cu), and waiting for a
 * rank's kernels before other ranks read its buffers. */
#include "comm_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

void comm_copy(void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  if (!gpu_is_device_memory(dst) && !gpu_is_device_memory(src)) {
    memcpy(dst, src, bytes);
    return;
  }
  gpu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, gpu_stream()), "a copy of the communication layer");
  gpu_sync("a copy of the communication layer");
}

void comm_memory_ready(void) { gpu_sync("waiting for a rank's kernels before a collective"); }

void comm_fold(void *dst, const void *const *src, int count, int64_t n, CommType type, CommOp op) {
  int device = gpu_is_device_memory(dst);
  for (int i = 0; i < count; i++)
    if (gpu_is_device_memory(src[i]) != device) {
      fprintf(stderr, "plait: a collective mixes host and GPU buffers (a bug in plait)\n");
      exit(1);
    }
  if (device) gpu_fold(dst, src, count, n, (int)comm_type_size(type), type == COMM_ACT, op == COMM_MAX);
  else if (n > 0) comm_fold_host(dst, src, count, n, type, op);
}
