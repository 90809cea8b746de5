/* nvrtc.c: compiling the fused elementwise kernels with NVRTC (the prelude and philox.h carried in the
 * library), and the on-disk cache of what it makes. */
#include "cuda_rt.h"

#include <errno.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h" /* EwKeys, whose size the prelude checks */

/* The texts NVRTC is given beside the kernels (build/gen/cuda_prelude.c, made by the Makefile). */
extern const char gpu_prelude_text[], gpu_philox_text[];

/* The headers philox.h includes, as NVRTC sees them: its math is built in, and `real` is float. */
static const char stdint_text[] =
    "typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;\n"
    "typedef unsigned long long uint64_t; typedef int int32_t; typedef long long int64_t;\n";
static const char real_text[] = "typedef float real;\n";

/* NVRTC's options besides the architecture and the size of EwKeys (both added where they are known). */
static const char *const base_options[] = {"--std=c++17", "-default-device"};
enum { BASE_OPTIONS = sizeof base_options / sizeof base_options[0] };

/* ---- compiling ----------------------------------------------------------------------------------- */

/* The newest architecture NVRTC can make a CUBIN for that is not newer than the device's (0: none). */
static int best_arch(int arch) {
  int count = 0, best = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return 0;
  int *archs = malloc(sizeof(int) * (size_t)count);
  nvrtcGetSupportedArchs(archs);
  for (int i = 0; i < count; i++)
    if (archs[i] <= arch && archs[i] > best) best = archs[i];
  free(archs);
  return best;
}

/* The program's text: the prelude, then every kernel. */
static char *program_text(const CudaKernelSource *kernels, int count) {
  size_t size = strlen(gpu_prelude_text) + 2;
  for (int i = 0; i < count; i++) size += strlen(kernels[i].source) + 2;
  char *text = malloc(size), *at = text;
  at += sprintf(at, "%s\n", gpu_prelude_text);
  for (int i = 0; i < count; i++) at += sprintf(at, "%s\n", kernels[i].source);
  return text;
}

/* "a | b | c": NVRTC's log on one line. */
static void log_line(const char *log, char *out, size_t size) {
  size_t used = 0;
  for (const char *c = log; *c && used + 4 < size; c++) {
    if (*c != '\n') out[used++] = *c;
    else if (c[1]) used += (size_t)snprintf(out + used, size - used, " | ");
  }
  out[used < size ? used : size - 1] = 0;
}

/* One NVRTC run over `count` kernels; on failure, error holds NVRTC's log. */
static int compile_once(const CudaKernelSource *kernels, int count, CudaCode *code, char *error, size_t error_size) {
  const char *headers[] = {gpu_philox_text, stdint_text, "", real_text};
  const char *names[] = {"philox.h", "stdint.h", "math.h", "real.h"};
  char keys_size[64], arch_option[32];
  snprintf(keys_size, sizeof keys_size, "-DPLAIT_EWKEYS_BYTES=%zu", sizeof(EwKeys));
  snprintf(arch_option, sizeof arch_option, "-arch=%s_%d", code->binary ? "sm" : "compute", code->arch);
  const char *options[BASE_OPTIONS + 2] = {arch_option, keys_size};
  int used = snprintf(code->options, sizeof code->options, "%s %s", arch_option, keys_size);
  for (int i = 0; i < BASE_OPTIONS; i++) {
    options[2 + i] = base_options[i];
    used += snprintf(code->options + used, sizeof code->options - (size_t)used, " %s", base_options[i]);
  }
  char *text = program_text(kernels, count);
  nvrtcProgram program;
  nvrtcResult result = nvrtcCreateProgram(&program, text, "plait_fused.cu", 4, headers, names);
  free(text);
  if (result != NVRTC_SUCCESS) {
    snprintf(error, error_size, "%s", nvrtcGetErrorString(result));
    return -1;
  }
  result = nvrtcCompileProgram(program, BASE_OPTIONS + 2, options);
  if (result != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetProgramLogSize(program, &size);
    char *log = malloc(size + 1);
    log[0] = 0;
    nvrtcGetProgramLog(program, log);
    log_line(log, error, error_size);
    free(log);
    nvrtcDestroyProgram(&program);
    return -1;
  }
  if (code->binary) nvrtcGetCUBINSize(program, &code->size);
  else nvrtcGetPTXSize(program, &code->size);
  code->data = malloc(code->size + 1);
  if (code->binary) nvrtcGetCUBIN(program, code->data);
  else nvrtcGetPTX(program, code->data);
  code->data[code->size] = 0;
  nvrtcDestroyProgram(&program);
  return 0;
}

int cuda_compile_fused(const CudaKernelSource *kernels, int count, int arch, CudaCode *code, char *error,
                       size_t error_size) {
  memset(code, 0, sizeof *code);
  int best = best_arch(arch);
  if (best == 0) {
    snprintf(error, error_size, "NVRTC knows no architecture at or below sm_%d", arch);
    return -1;
  }
  code->arch = best;
  code->binary = best == arch;
  char log[4096];
  if (compile_once(kernels, count, code, log, sizeof log) == 0) return 0;
  /* name the kernel that fails: each alone (the first that fails is reported) */
  for (int i = 0; i < count; i++) {
    CudaCode one = *code;
    if (compile_once(&kernels[i], 1, &one, log, sizeof log) != 0) {
      snprintf(error, error_size, "NVRTC could not compile fused kernel %s for %s_%d: %s", kernels[i].name,
               code->binary ? "sm" : "compute", code->arch, log);
      return -1;
    }
    free(one.data);
  }
  snprintf(error, error_size, "NVRTC could not compile the fused kernels together for %s_%d: %s",
           code->binary ? "sm" : "compute", code->arch, log);
  return -1;
}

/* ---- the cache ------------------------------------------------------------------------------------ */

/* 64-bit FNV-1a over a string, continued from hash. */
static uint64_t hash_text(uint64_t hash, const char *text) {
  for (const unsigned char *c = (const unsigned char *)text; *c; c++) hash = (hash ^ *c) * 0x100000001b3ull;
  return (hash ^ 0xff) * 0x100000001b3ull; /* a separator, so that ("ab", "c") and ("a", "bc") differ */
}

static int cache_dir(char *dir, size_t size) {
  const char *env = getenv("PLAIT_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (env && *env) snprintf(dir, size, "%s", env);
  else if (xdg && *xdg) snprintf(dir, size, "%s/plait", xdg);
  else if (home && *home) snprintf(dir, size, "%s/.cache/plait", home);
  else return -1;
  /* each missing folder of the path, from the top */
  for (char *slash = strchr(dir + 1, '/');; slash = strchr(slash + 1, '/')) {
    if (slash) *slash = 0;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return -1;
    if (!slash) return 0;
    *slash = '/';
  }
}

typedef struct {
  char magic[8];
  uint64_t key;
  uint64_t size;
  int32_t binary, arch;
} CacheHeader;

static int cache_read(const char *path, uint64_t key, CudaCode *code) {
  FILE *f = fopen(path, "rb");
  CacheHeader h;
  if (!f) return -1;
  int ok = fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, "plaitfk1", 8) == 0 && h.key == key && h.size < (1u << 30);
  if (ok) {
    code->data = malloc(h.size + 1);
    ok = fread(code->data, 1, h.size, f) == h.size;
    code->data[ok ? h.size : 0] = 0;
    code->size = h.size, code->binary = h.binary, code->arch = h.arch;
    if (!ok) free(code->data), code->data = NULL;
  }
  fclose(f);
  return ok ? 0 : -1;
}

static void cache_write(const char *dir, const char *path, uint64_t key, const CudaCode *code) {
  char temp[4200];
  snprintf(temp, sizeof temp, "%s/.fused-XXXXXX", dir);
  int fd = mkstemp(temp);
  if (fd < 0) return;
  FILE *f = fdopen(fd, "wb");
  CacheHeader h = {.key = key, .size = code->size, .binary = code->binary, .arch = code->arch};
  memcpy(h.magic, "plaitfk1", 8);
  int ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(code->data, 1, code->size, f) == code->size;
  ok = f && fclose(f) == 0 && ok;
  if (!f) close(fd);
  if (!ok || rename(temp, path) != 0) unlink(temp);
}

int cuda_compile_fused_cached(const CudaKernelSource *kernels, int count, int arch, CudaCode *code, char *error,
                              size_t error_size) {
  int major = 0, minor = 0;
  char version[64], dir[4096], path[4200];
  nvrtcVersion(&major, &minor);
  snprintf(version, sizeof version, "nvrtc %d.%d sm_%d ewkeys %zu", major, minor, arch, sizeof(EwKeys));
  uint64_t key = hash_text(hash_text(hash_text(0xcbf29ce484222325ull, version), gpu_prelude_text), gpu_philox_text);
  for (int i = 0; i < BASE_OPTIONS; i++) key = hash_text(key, base_options[i]);
  for (int i = 0; i < count; i++) key = hash_text(hash_text(key, kernels[i].name), kernels[i].source);
  int cached = cache_dir(dir, sizeof dir) == 0;
  if (cached) snprintf(path, sizeof path, "%s/fused-%016llx.bin", dir, (unsigned long long)key);
  memset(code, 0, sizeof *code);
  if (cached && cache_read(path, key, code) == 0) return 0;
  if (cuda_compile_fused(kernels, count, arch, code, error, error_size) != 0) return -1;
  if (cached) cache_write(dir, path, key, code);
  return 0;
}
