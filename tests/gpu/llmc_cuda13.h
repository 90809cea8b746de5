/* llmc_cuda13.h: lets llm.c's train_gpt2.cu (the peer of the GPU check) build with CUDA 13, whose
 * cudaMemAdvise names the memory's place by a cudaMemLocation where CUDA 12 took a device number
 * (cudaCpuDeviceId for the host). Given to nvcc with -include by tests/gpu/bundle.sh and run.sh; the
 * peer's own sources are built as they are. */
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
static inline cudaError_t cudaMemAdvise(const void *p, size_t bytes, cudaMemoryAdvise advice, int device) {
  cudaMemLocation place;
  place.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  place.id = device == cudaCpuDeviceId ? 0 : device;
  return cudaMemAdvise(p, bytes, advice, place);
}
#endif
