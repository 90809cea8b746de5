/* cudnn_library.c: finding cuDNN at run time (PLAIT_CUDNN, the Python on PATH, the toolkit, the loader's
 * search), opening it with dlopen by absolute path, and refusing, with the reason, one that is too old,
 * built for another CUDA or missing a call. */
#include "cudnn_library.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char dispatcher[] = "libcudnn.so.9";

/* The parts the fused attention's plans reach, in the order they need each other. */
static const char *const sub_libraries[] = {
  "libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
  "libcudnn_heuristic.so.9", "libcudnn_ops.so.9",
};

void cudnn_version_text(size_t version, char *out, size_t size) {
  snprintf(out, size, "%zu.%zu.%zu", version / 10000, version / 100 % 100, version % 100);
}

static int is_folder(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int add_file(char files[][PATH_MAX], int count, int max, const char *file) {
  if (count >= max || strlen(file) >= PATH_MAX) return count;
  for (int i = 0; i < count; i++)
    if (strcmp(files[i], file) == 0) return count;
  snprintf(files[count], PATH_MAX, "%s", file);
  return count + 1;
}

/* Every file a glob pattern matches, in its sorted order. */
static int add_matches(char files[][PATH_MAX], int count, int max, const char *pattern) {
  glob_t found;
  if (glob(pattern, GLOB_BRACE, NULL, &found) == 0)
    for (size_t i = 0; i < found.gl_pathc; i++) count = add_file(files, count, max, found.gl_pathv[i]);
  globfree(&found);
  return count;
}

/* pip's nvidia-cudnn package beside the python3 of each folder on PATH (a virtual environment's bin/
 * has its lib/ beside it), then in the --user folder. */
static int add_python_packages(const CudnnSearch *where, char files[][PATH_MAX], int count, int max) {
  char pattern[PATH_MAX + 128], python[PATH_MAX + 16];
  const char *p = where->path;
  while (p && *p) {
    size_t n = strcspn(p, ":");
    snprintf(python, sizeof python, "%.*s/python3", (int)n, p);
    snprintf(pattern, sizeof pattern, "%.*s/../lib/python3*/{site,dist}-packages/nvidia/cudnn/lib/%s", (int)n, p,
             dispatcher);
    if (n > 0 && n < PATH_MAX && access(python, X_OK) == 0) count = add_matches(files, count, max, pattern);
    p += n + (p[n] == ':');
  }
  if (where->home && *where->home) {
    snprintf(pattern, sizeof pattern, "%s/.local/lib/python3*/site-packages/nvidia/cudnn/lib/%s", where->home,
             dispatcher);
    count = add_matches(files, count, max, pattern);
  }
  return count;
}

int cudnn_candidates(const CudnnSearch *where, char files[][PATH_MAX], int max) {
  char file[PATH_MAX + 32];
  if (where->env && *where->env) {
    if (is_folder(where->env)) snprintf(file, sizeof file, "%s/%s", where->env, dispatcher);
    else snprintf(file, sizeof file, "%s", where->env);
    return add_file(files, 0, max, file);
  }
  int count = add_python_packages(where, files, 0, max);
  if (where->toolkit && *where->toolkit) {
    snprintf(file, sizeof file, "%s/%s", where->toolkit, dispatcher);
    if (access(file, F_OK) == 0) count = add_file(files, count, max, file);
  }
  return add_file(files, count, max, dispatcher);
}

/* ---- opening one ----------------------------------------------------------------------------------- */

/* Loads the sub-libraries that sit beside file (a file named by its folder); the bare name has none. */
static void load_sub_libraries(const char *file) {
  const char *slash = strrchr(file, '/');
  char path[PATH_MAX + 64];
  if (!slash) return;
  for (size_t i = 0; i < sizeof sub_libraries / sizeof *sub_libraries; i++) {
    snprintf(path, sizeof path, "%.*s/%s", (int)(slash - file), file, sub_libraries[i]);
    if (access(path, F_OK) == 0) dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
}

/* Each call plait makes, by its name in the library; the first missing one is named in missing. */
static int bind_calls(Cudnn *lib, const char **missing) {
  struct {
    void **slot;
    const char *name;
  } calls[] = {
    {(void **)&lib->error_string, "cudnnGetErrorString"},
    {(void **)&lib->last_error, "cudnnGetLastErrorString"},
    {(void **)&lib->create, "cudnnCreate"},
    {(void **)&lib->destroy, "cudnnDestroy"},
    {(void **)&lib->set_stream, "cudnnSetStream"},
    {(void **)&lib->create_descriptor, "cudnnBackendCreateDescriptor"},
    {(void **)&lib->destroy_descriptor, "cudnnBackendDestroyDescriptor"},
    {(void **)&lib->set_attribute, "cudnnBackendSetAttribute"},
    {(void **)&lib->get_attribute, "cudnnBackendGetAttribute"},
    {(void **)&lib->finalize, "cudnnBackendFinalize"},
    {(void **)&lib->execute, "cudnnBackendExecute"},
  };
  for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
    *calls[i].slot = dlsym(lib->handle, calls[i].name);
    if (!*calls[i].slot) {
      *missing = calls[i].name;
      return 1;
    }
  }
  return 0;
}

/* Whether the library's version and CUDA qualify; why says how not. */
static int qualifies(const Cudnn *lib, int cudart_major, char *why, size_t size) {
  char have[32], floor[32];
  cudnn_version_text(lib->version, have, sizeof have);
  cudnn_version_text(CUDNN_VERSION_FLOOR, floor, sizeof floor);
  if (lib->version / 10000 != 9 || lib->version < CUDNN_VERSION_FLOOR) {
    snprintf(why, size, "%s is cuDNN %s, not 9.x from %s on", lib->file, have, floor);
    return 0;
  }
  if ((int)(lib->cudart / 1000) != cudart_major) {
    snprintf(why, size, "%s is cuDNN %s built for CUDA %zu, not %d", lib->file, have, lib->cudart / 1000,
             cudart_major);
    return 0;
  }
  return 1;
}

/* The version calls, then, for one that qualifies, its sub-libraries and every call: 0, or 1 with why. */
static int open_loaded(Cudnn *lib, int cudart_major, char *why, size_t size) {
  size_t (*version)(void) = (size_t (*)(void))dlsym(lib->handle, "cudnnGetVersion");
  size_t (*cudart)(void) = (size_t (*)(void))dlsym(lib->handle, "cudnnGetCudartVersion");
  const char *missing = version ? "cudnnGetCudartVersion" : "cudnnGetVersion";
  if (version && cudart) {
    lib->version = version(), lib->cudart = cudart();
    if (!qualifies(lib, cudart_major, why, size)) return 1;
    load_sub_libraries(lib->file);
    if (bind_calls(lib, &missing) == 0) return 0;
  }
  snprintf(why, size, "%s has no %s", lib->file, missing);
  return 1;
}

int cudnn_open(const char *file, int cudart_major, Cudnn *lib, char *why, size_t size) {
  memset(lib, 0, sizeof *lib);
  snprintf(lib->file, sizeof lib->file, "%s", file);
  lib->handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) {
    snprintf(why, size, "%s does not load (%s)", file, dlerror());
    return 1;
  }
  if (open_loaded(lib, cudart_major, why, size) == 0) return 0;
  dlclose(lib->handle);
  lib->handle = NULL;
  return 1;
}

int cudnn_load(const CudnnSearch *where, int cudart_major, Cudnn *lib, char *why, size_t size) {
  char files[CUDNN_CANDIDATES][PATH_MAX], reason[PATH_MAX + 256];
  int count = cudnn_candidates(where, files, CUDNN_CANDIDATES);
  size_t used = 0;
  why[0] = 0;
  for (int i = 0; i < count; i++) {
    if (cudnn_open(files[i], cudart_major, lib, reason, sizeof reason) == 0) return 0;
    if (used < size) used += (size_t)snprintf(why + used, size - used, "%s%s", i ? "; " : "", reason);
  }
  return 1;
}
