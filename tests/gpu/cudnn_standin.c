/* cudnn_standin.c: a stand-in libcudnn.so.9 for the loader's tests (tests/cli/cuda.sh builds it as
 * several folders' libraries): it reports the version and CUDA it is built with (-DVERSION=, -DCUDART=)
 * and has each call the loader binds, except cudnnBackendExecute under -DWITHOUT_EXECUTE. No call does
 * anything: the tests only open it. */
#include <stddef.h>

size_t cudnnGetVersion(void) { return VERSION; }
size_t cudnnGetCudartVersion(void) { return CUDART; }
const char *cudnnGetErrorString(int status) { return status ? "a stand-in's error" : "success"; }
void cudnnGetLastErrorString(char *message, size_t size) {
  if (size) message[0] = 0;
}
int cudnnCreate(void *handle) { return handle == NULL; }
int cudnnDestroy(void *handle) { return handle == NULL; }
int cudnnSetStream(void *handle, void *stream) { return handle == NULL || stream != NULL; }
int cudnnBackendCreateDescriptor(int type, void *descriptor) { return type < 0 || descriptor == NULL; }
int cudnnBackendDestroyDescriptor(void *descriptor) { return descriptor == NULL; }
int cudnnBackendSetAttribute(void *d, int name, int type, long count, const void *values) {
  return d == NULL || name < 0 || type < 0 || count < 0 || values == NULL;
}
int cudnnBackendGetAttribute(void *d, int name, int type, long requested, long *count, void *values) {
  return d == NULL || name < 0 || type < 0 || requested < 0 || count == NULL || values == NULL;
}
int cudnnBackendFinalize(void *descriptor) { return descriptor == NULL; }
#ifndef WITHOUT_EXECUTE
int cudnnBackendExecute(void *handle, void *plan, void *pack) { return !handle || !plan || !pack; }
#endif
