/* nvrtc_check.c: `nvrtc_check ARCH FILE...` compiles, with NVRTC and the runtime's prelude and
 * options, every fused kernel of the generated fused_cuda.c files, each alone and each file's all
 * together (as the runtime does at start-up), for compute capability ARCH (90: sm_90); NVRTC needs
 * no GPU. Then it goes through the on-disk cache twice (PLAIT_CACHE_DIR): the second time must find
 * what the first wrote, byte for byte. Prints a PASS or FAIL line per kernel, per file and per
 * cache check. The sources are read back from the C string literals the compiler writes
 * (emit_kernels_cuda): a line `  {"ew_NAME",` opens a kernel, lines of string literals hold its
 * text, `};` ends the table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_rt.h"

enum { MAX_KERNELS = 512, MAX_SOURCE = 1 << 16 };

/* Appends the text of the C string literal at *p (escapes: \n, \", \\) to out. */
static void unquote(const char *p, char *out, size_t *used) {
  p = strchr(p, '"');
  for (p = p ? p + 1 : ""; *p && *p != '"' && *used + 1 < MAX_SOURCE; p++) {
    if (*p == '\\' && p[1]) p++, out[(*used)++] = *p == 'n' ? '\n' : *p;
    else out[(*used)++] = *p;
  }
  out[*used] = 0;
}

/* The kernels of one fused_cuda.c; returns their count, or -1 when the file cannot be read. */
static int read_kernels(const char *path, CudaKernelSource *kernels, char names[][64]) {
  FILE *f = fopen(path, "r");
  char line[8192];
  int count = -1;
  size_t used = 0;
  if (!f) return -1;
  char *source = NULL;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "  {\"ew_", 5) == 0 && count + 1 < MAX_KERNELS) {
      count++;
      sscanf(line + 4, "%63[^\"]", names[count]);
      source = calloc(MAX_SOURCE, 1);
      used = 0;
      kernels[count] = (CudaKernelSource){names[count], source};
    } else if (source && strncmp(line, "    \"", 5) == 0) {
      unquote(line, source, &used);
    } else if (source && strncmp(line, "};", 2) == 0) {
      break;
    }
  }
  fclose(f);
  return count + 1;
}

/* Through the cache twice: both give what the compiler gave. Returns 1 on a failure. */
static int check_cache(const char *file, const CudaKernelSource *kernels, int count, int arch, const CudaCode *fresh) {
  char error[8192];
  for (int pass = 0; pass < 2; pass++) {
    CudaCode cached;
    if (cuda_compile_fused_cached(kernels, count, arch, &cached, error, sizeof error) != 0) {
      printf("FAIL nvrtc cache %s: %s\n", file, error);
      return 1;
    }
    int same = cached.size == fresh->size && memcmp(cached.data, fresh->data, fresh->size) == 0;
    free(cached.data);
    if (!same) {
      printf("FAIL nvrtc cache %s: pass %d gave other bytes than the compiler\n", file, pass + 1);
      return 1;
    }
  }
  printf("PASS nvrtc cache %s (written, then read back the same)\n", file);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ARCH FILE...\n", argv[0]);
    return 2;
  }
  int arch = atoi(argv[1]), failed = 0;
  static CudaKernelSource kernels[MAX_KERNELS];
  static char names[MAX_KERNELS][64];
  char error[8192];
  for (int a = 2; a < argc; a++) {
    int count = read_kernels(argv[a], kernels, names);
    if (count <= 0) {
      printf("FAIL nvrtc %s: no kernels found\n", argv[a]);
      failed++;
      continue;
    }
    for (int k = 0; k < count; k++) {
      CudaCode code;
      if (cuda_compile_fused(&kernels[k], 1, arch, &code, error, sizeof error) == 0 && code.binary && code.arch == arch) {
        printf("PASS nvrtc %s %s (sm_%d, %zu bytes of CUBIN)\n", argv[a], kernels[k].name, code.arch, code.size);
        free(code.data);
      } else {
        printf("FAIL nvrtc %s %s: %s\n", argv[a], kernels[k].name, error);
        failed++;
      }
    }
    CudaCode code;
    if (cuda_compile_fused(kernels, count, arch, &code, error, sizeof error) == 0) {
      printf("PASS nvrtc %s: all %d kernels in one program (%s)\n", argv[a], count, code.options);
      failed += check_cache(argv[a], kernels, count, arch, &code);
      free(code.data);
    } else {
      printf("FAIL nvrtc %s: all together: %s\n", argv[a], error);
      failed++;
    }
    for (int k = 0; k < count; k++) free((char *)kernels[k].source);
  }
  return failed ? 1 : 0;
}
