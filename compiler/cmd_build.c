/* cmd_build.c: `plait build`: plans a model, writes the generated sources to DIR/, and compiles DIR/train
 * against the runtime (mpicc: the program runs alone, or as many ranks under mpirun). */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "emit.h"
#include "options.h"
#include "plan.h"

#ifndef OPENBLAS
#error "OPENBLAS: the OpenMP build of OpenBLAS to link generated programs with (set by the Makefile)"
#endif

static const char *const build_flags[] = {"--tp", "--pp", "--vpp", "--dp", "--mbs", "--gbs", "--schedule", "--recompute",
                                          "--sequence-parallel", "--partition", "--set", "--machine", "-o",
                                          "--emit-only", "--double", "--backend", NULL};

/* The checkout plait runs from: PLAIT_HOME, else the folder above the binary's (build/plait). */
static int find_home(char *home, size_t len, Diag *d) {
  const char *env = getenv("PLAIT_HOME");
  if (env) {
    snprintf(home, len, "%s", env);
    return 0;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n < 0) return diag(d, "cannot find plait's own path; set PLAIT_HOME to the plait checkout");
  exe[n] = 0;
  snprintf(home, len, "%s", dirname(dirname(exe)));
  return 0;
}

static int run_compiler(const char *command, Diag *d) {
  int status = system(command);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return diag(d, "compiling the generated program failed (the compiler's messages are above): %s", command);
  return 0;
}

/* DIR/train from DIR/model.c and DIR/kernels.c with the CPU runtime (fp32, or fp64 with --double). */
static int compile_cpu(const Options *o, const char *dir, Diag *d) {
  char home[PATH_MAX], library[PATH_MAX + 64], command[4 * PATH_MAX + 512];
  if (find_home(home, sizeof home, d)) return -1;
  snprintf(library, sizeof library, "%s/build/libplait_rt%s.a", home, o->double_precision ? "64" : "");
  if (access(library, R_OK) != 0) return diag(d, "the runtime library %s is missing; run make in %s", library, home);
  snprintf(command, sizeof command,
           "mpicc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -fopenmp %s -I'%s/runtime' -I'%s/runtime/cpu' -I'%s' "
           "'%s/model.c' '%s/kernels.c' '%s' %s -lm -o '%s/train'",
           o->double_precision ? "-DPLAIT_REAL_DOUBLE" : "", home, home, dir, dir, dir, library, OPENBLAS, dir);
  return run_compiler(command, d);
}

static int run(const Options *o, Diag *d) {
  if (!o->output) return diag(d, "build needs an output directory: plait build MODEL.lua -o DIR");
  if (o->backend && strcmp(o->backend, "cpu") != 0) return diag(d, "--backend %s: this build knows cpu", o->backend);
  Plan p;
  int status = plan_build(o, &p, stdout, d);
  if (status == 0) status = emit_program(&p, o->output, d);
  plan_free(&p);
  if (status == 0 && !o->emit_only) status = compile_cpu(o, o->output, d);
  return status;
}

int cmd_build(int argc, char **argv) {
  Options o;
  Diag d;
  if (options_parse(argc, argv, 2, build_flags, &o, &d) == 0 && run(&o, &d) == 0) return 0;
  fprintf(stderr, "plait: %s\n", d.msg);
  return 1;
}
