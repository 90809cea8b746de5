/* cudnn_library.h: cuDNN found and loaded at run time, never linked: the folders it is looked for in,
 * the version it must have, and the calls of its backend API that plait's fused attention makes. */
#ifndef PLAIT_CUDNN_LIBRARY_H
#define PLAIT_CUDNN_LIBRARY_H

#include <limits.h>
#include <stddef.h>

#include <cudnn_graph.h>

/* The oldest cuDNN whose fused attention plait uses: 9.15.1 (9.10.0 and 9.10.1 compute it wrongly,
 * 9.14.0 fails the backward graph, before 9.15.1 a backward over keys not a multiple of 128 needs a
 * padding mask). */
enum { CUDNN_VERSION_FLOOR = 91501 };

/* Where to look, each may be NULL: $PLAIT_CUDNN (a libcudnn.so.9, or a folder holding one), $PATH (the
 * Python on it: pip's nvidia-cudnn-cu13 package under its lib/python3.*), $HOME (pip's --user folder)
 * and the CUDA toolkit's library folder. */
typedef struct {
  const char *env, *path, *home, *toolkit;
} CudnnSearch;

enum { CUDNN_CANDIDATES = 24 };

/* The files to try, in order: $PLAIT_CUDNN alone when it is set; else Python's packages, the toolkit's
 * folder and, last, the bare name for the loader's own search. Returns their count. */
int cudnn_candidates(const CudnnSearch *where, char files[][PATH_MAX], int max);

/* A loaded cuDNN: its file, version and the calls plait makes. */
typedef struct {
  void *handle;
  char file[PATH_MAX];
  size_t version, cudart;
  const char *(*error_string)(cudnnStatus_t);
  void (*last_error)(char *message, size_t size);
  cudnnStatus_t (*create)(cudnnHandle_t *);
  cudnnStatus_t (*destroy)(cudnnHandle_t);
  cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
  cudnnStatus_t (*create_descriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
  cudnnStatus_t (*destroy_descriptor)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*set_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                                 int64_t count, const void *values);
  cudnnStatus_t (*get_attribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                 cudnnBackendAttributeType_t, int64_t requested, int64_t *count, void *values);
  cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack);
} Cudnn;

/* Opens one file: 0 when it loads, is 9.15.1 or newer, was built for this CUDA major version
 * (cudart_major) and has every call; else 1 with why, the library closed again. Once it qualifies, its
 * sub-libraries are loaded from its folder, so that those it opens by name are its own and not another
 * cuDNN's found first on the loader's path. */
int cudnn_open(const char *file, int cudart_major, Cudnn *lib, char *why, size_t size);

/* The first candidate that opens; else 1 with every candidate's reason in why. */
int cudnn_load(const CudnnSearch *where, int cudart_major, Cudnn *lib, char *why, size_t size);

/* "9.19.0" of 91900. */
void cudnn_version_text(size_t version, char *out, size_t size);

#endif
