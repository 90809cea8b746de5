/* cudnn_check.c: what of cuDNN's attention can be checked without a GPU. `cudnn_check STANDINS [TOOLKIT]`:
 *   - the search order: PLAIT_CUDNN alone when set (a file, or a folder's libcudnn.so.9), else pip's
 *     package beside the python3 of each PATH folder, then the --user folder, the toolkit, the bare name;
 *   - the stand-in libraries tests/cli/cuda.sh built in STANDINS (old/, cuda12/, noexec/, good/): each
 *     refused with its reason or taken, and cudnn_load taking the first that qualifies;
 *   - with the toolkit's own cuDNN (TOOLKIT, where it is 9.15.1 or newer): every tensor and operation
 *     descriptor of the forward and backward graphs finalized, for plain, grouped-query, windowed and
 *     bidirectional attention (the operation graph and its plans need a GPU).
 * Prints PASS/FAIL lines; exits non-zero on any failure. */
#include <stdio.h>
#include <string.h>

#include "cudnn_sdpa.h"

static int failures;

static void verdict(int ok, const char *name, const char *detail) {
  printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, *detail ? ": " : "", detail);
  failures += !ok;
}

static void search_order(const char *standins) {
  char files[CUDNN_CANDIDATES][PATH_MAX], env[PATH_MAX], path[PATH_MAX + 64], home[PATH_MAX], venv[PATH_MAX + 80];
  snprintf(env, sizeof env, "%s/good", standins);
  CudnnSearch folder = {env, NULL, NULL, NULL};
  int n = cudnn_candidates(&folder, files, CUDNN_CANDIDATES);
  verdict(n == 1 && strcmp(files[0], strcat(env, "/libcudnn.so.9")) == 0, "cudnn_search_env_folder", files[0]);
  snprintf(path, sizeof path, "/nonexistent:%s/venv/bin", standins);
  snprintf(home, sizeof home, "%s/home", standins);
  CudnnSearch all = {"", path, home, standins};
  n = cudnn_candidates(&all, files, CUDNN_CANDIDATES);
  snprintf(venv, sizeof venv, "%s/venv/bin/../lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9", standins);
  int ok = n == 3 && strcmp(files[0], venv) == 0 && strstr(files[1], "/home/.local/lib/python3.11/") &&
           strcmp(files[2], "libcudnn.so.9") == 0;
  verdict(ok, "cudnn_search_python_home_bare", n > 0 ? files[0] : "no candidates");
}

/* Opening STANDINS/dir's library: refused with `reason` in why, or taken when reason is NULL. */
static void opens(const char *standins, const char *dir, const char *reason) {
  char file[PATH_MAX + 32], why[1024] = "", name[64];
  Cudnn lib;
  snprintf(file, sizeof file, "%s/%s/libcudnn.so.9", standins, dir);
  snprintf(name, sizeof name, "cudnn_open_%s", dir);
  int refused = cudnn_open(file, 13, &lib, why, sizeof why);
  verdict(reason ? refused && strstr(why, reason) : !refused && lib.version == 91900, name, why);
}

static void loads_first_qualifying(const char *standins) {
  char path[PATH_MAX + 64], why[4096];
  Cudnn lib;
  snprintf(path, sizeof path, "%s/venv/bin", standins);
  CudnnSearch old_only = {NULL, NULL, NULL, NULL};
  char env[PATH_MAX + 32];
  snprintf(env, sizeof env, "%s/old", standins);
  old_only.env = env;
  int refused = cudnn_load(&old_only, 13, &lib, why, sizeof why);
  verdict(refused && strstr(why, "is cuDNN 9.14.0, not 9.x from 9.15.1 on"), "cudnn_load_refuses_old", why);
  CudnnSearch venv = {NULL, path, NULL, NULL};
  refused = cudnn_load(&venv, 13, &lib, why, sizeof why);
  verdict(!refused && strstr(lib.file, "/venv/"), "cudnn_load_takes_python_package", refused ? why : lib.file);
}

static void graphs(const char *toolkit) {
  char why[4096], name[96];
  Cudnn lib;
  CudnnSearch where = {NULL, NULL, NULL, toolkit};
  if (cudnn_load(&where, 13, &lib, why, sizeof why) || !strstr(lib.file, toolkit)) {
    printf("PASS cudnn_graphs (skipped: no cuDNN 9.15.1 or newer in %s: %s)\n", toolkit, why);
    return;
  }
  struct {
    const char *name;
    SdpaShape shape;
  } cases[] = {
    {"gpt2", {2, 128, 768, 768, 12, 12, 64, 1, 0, 0.125f}},
    {"grouped", {2, 100, 512, 128, 8, 2, 64, 1, 0, 0.125f}},
    {"window", {1, 200, 256, 128, 4, 2, 64, 1, 70, 0.125f}},
    {"bidirectional", {2, 64, 256, 256, 2, 2, 128, 0, 0, 0.088f}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int pass = SDPA_FORWARD; pass <= SDPA_BACKWARD_ACCUMULATED; pass++) {
      SdpaGraph g;
      int bad = sdpa_graph_build(&g, &lib, &cases[i].shape, (SdpaPass)pass);
      snprintf(name, sizeof name, "cudnn_graph_%s_%s", cases[i].name,
               pass == SDPA_FORWARD ? "forward" : pass == SDPA_BACKWARD ? "backward" : "backward_accumulated");
      verdict(!bad && g.op_count > 0, name, g.failed);
      sdpa_graph_free(&g);
    }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s STANDINS [TOOLKIT]\n", argv[0]);
    return 2;
  }
  search_order(argv[1]);
  opens(argv[1], "old", "is cuDNN 9.14.0, not 9.x from 9.15.1 on");
  opens(argv[1], "cuda12", "built for CUDA 12, not 13");
  opens(argv[1], "noexec", "has no cudnnBackendExecute");
  opens(argv[1], "absent", "does not load");
  opens(argv[1], "good", NULL);
  loads_first_qualifying(argv[1]);
  if (argc > 2) graphs(argv[2]);
  return failures != 0;
}
