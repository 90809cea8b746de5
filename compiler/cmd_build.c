/* cmd_build.c: `plait build`: plans a model, writes the generated sources to DIR/, and compiles
 * DIR/train against the runtime: the CPU's (mpicc: the program runs alone, or as many ranks
 * under mpirun), or with --backend cuda the GPU's (build/libplait_rt_cuda.a, with the compiler
 * and flags the Makefile found). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "constants_file.h"
#include "emit/emit.h"
#include "options.h"
#include "outfile.h"
#include "plan/plan.h"

#ifndef OPENBLAS
#error \
    "OPENBLAS: the OpenMP build of OpenBLAS to link generated programs with (set by the Makefile)"
#endif

const char *const build_flags[] = {OPTIONS_LAYOUT, "--set", "--machine", "-o", "--emit-only",
                                   "--double", "--backend", "--lua-instructions", "--lua-memory",
                                   "--separate-gemms", NULL};

/* What plait build writes into DIR, a program's folder of its own; the last, constants.bin, only
 * for a model with constants too large for model.c (one left by an earlier build is removed). */
static const char *const program_files[] = {"model.c", "fused.h", "fused.c", "fused_cuda.c",
                                            "train",   CONSTANTS_FILE_NAME};
enum { PROGRAM_FILES = sizeof program_files / sizeof *program_files };

/* A new temporary of DIR for the program the compiler writes (its name in temp). */
static int program_temp(const OwnFolder *dir, char *temp, size_t len, Diag *d) {
  own_folder_temp(dir, "train", temp, len);
  int fd = mkstemp(temp);
  if (fd < 0)
    return diag(d, "cannot write in %s: %s; check that it is writable and has space", dir->path,
                strerror(errno));
  close(fd);
  return 0;
}

/* Runs the compile command, which writes the program to temp, and renames that over DIR/train
 * only when it succeeded: a failed rebuild leaves the last working program as it was. */
static int run_compiler(const char *command, const char *temp, const OwnFolder *dir, Diag *d) {
  char program[PATH_MAX + 16];
  snprintf(program, sizeof program, "%s/train", dir->path);
  int status = system(command);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    unlink(temp);
    return diag(d,
                "compiling the generated program failed (the compiler's messages are above; %s is "
                "as it was): %s",
                program, command);
  }
  if (rename(temp, program) != 0) {
    unlink(temp);
    return diag(d, "cannot put the program in place as %s: %s", program, strerror(errno));
  }
  return 0;
}

/* PLAIT_CPU=baseline in the environment: the program's kernels and the runtime's only on their
 * baseline x86-64 path (the one a CPU without AVX2 takes), to test it on any host; 1 then, 0
 * when unset, -1 (with a diagnostic) for any other value. */
static int baseline_cpu(Diag *d) {
  const char *cpu = getenv("PLAIT_CPU");
  if (!cpu || !*cpu) return 0;
  if (strcmp(cpu, "baseline") == 0) return 1;
  diag(d,
       "PLAIT_CPU=%s: the one value it takes is baseline (the kernels' baseline x86-64 path); "
       "unset it for the "
       "CPU's widest",
       cpu);
  return -1;
}

/* DIR/train from DIR/model.c and DIR/fused.c with the CPU runtime (fp32, or fp64 with --double). */
static int compile_cpu(const Options *o, const OwnFolder *folder, Diag *d) {
  char home[PATH_MAX], library[PATH_MAX + 64], command[8 * PATH_MAX + 512], temp[PATH_MAX + 64];
  const char *dir = folder->path;
  int baseline = baseline_cpu(d);
  if (baseline < 0 || plait_home(home, sizeof home, d)) return -1;
  snprintf(library, sizeof library, "%s/build/libplait_rt%s%s.a", home,
           o->double_precision ? "64" : "", baseline ? "_baseline" : "");
  if (access(library, R_OK) != 0)
    return diag(d, "the runtime library %s is missing; run make%s in %s", library,
                baseline ? " baseline" : "", home);
  if (program_temp(folder, temp, sizeof temp, d)) return -1;
  snprintf(command, sizeof command,
           "mpicc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -fopenmp %s%s -I'%s/runtime' "
           "-I'%s/runtime/cpu' -I'%s' '%s/model.c' '%s/fused.c' '%s' %s -lm -o '%s'",
           o->double_precision ? "-DPLAIT_REAL_DOUBLE " : "",
           baseline ? "-DPLAIT_CPU_BASELINE" : "", home, home, dir, dir, dir, library, OPENBLAS,
           temp);
  return run_compiler(command, temp, folder, d);
}

/* DIR/train from DIR/model.c and DIR/fused_cuda.c with the CUDA runtime (bf16 compute, fp32 master
 * weights), linked with cudart, cuBLASLt, NVRTC, NCCL and MPI where the Makefile found them. */
static int compile_cuda(const OwnFolder *folder, Diag *d) {
#ifdef PLAIT_CUDA_LINK
  char home[PATH_MAX], library[PATH_MAX + 64], command[8 * PATH_MAX + 2048], temp[PATH_MAX + 64];
  const char *dir = folder->path;
  if (plait_home(home, sizeof home, d)) return -1;
  snprintf(library, sizeof library, "%s/build/libplait_rt_cuda.a", home);
  if (access(library, R_OK) != 0)
    return diag(d, "the CUDA runtime library %s is missing; run make in %s", library, home);
  if (program_temp(folder, temp, sizeof temp, d)) return -1;
  snprintf(command, sizeof command,
           "%s %s -I'%s/runtime' -I'%s/runtime/cuda' -I'%s' '%s/model.c' '%s/fused_cuda.c' '%s' %s "
           "-o '%s'",
           PLAIT_CUDA_CC, PLAIT_CUDA_CFLAGS, home, home, dir, dir, dir, library, PLAIT_CUDA_LINK,
           temp);
  return run_compiler(command, temp, folder, d);
#else
  (void)folder;
  return diag(d,
              "--backend cuda: this plait was built where nvcc was not found; install the CUDA "
              "toolkit and run make "
              "again (or use --emit-only)");
#endif
}

/* The CUDA attention kernels take heads of up to 256 elements (16, 32, 64, 80, 96 and 128 on the
 * tensor-core tiles, the others on a plain kernel): another size is refused here, with the node
 * that asks for it, before anything is compiled. */
static int check_cuda_attention(const Model *m, Diag *d) {
  const Graph *graphs[] = {&m->embed, &m->block, &m->head};
  for (int g = 0; g < 3; g++)
    for (int i = 0; i < graphs[g]->nnodes; i++) {
      const Node *n = &graphs[g]->nodes[i];
      int dim = n->a.attn.head_dim;
      if (n->op == OP_ATTENTION && dim > 256)
        return diag(d,
                    "%s: attention heads of %d elements: the CUDA kernels take heads of up to 256; "
                    "choose hidden "
                    "and heads so that hidden/heads is at most 256, or build for the CPU",
                    n->where, dim);
    }
  return 0;
}

static int run(const Options *o, Diag *d) {
  if (!o->output) return diag(d, "build needs an output directory: plait build MODEL.lua -o DIR");
  int cuda = o->backend && strcmp(o->backend, "cuda") == 0;
  if (o->backend && !cuda && strcmp(o->backend, "cpu") != 0)
    return diag(d, "--backend %s: the backends are cpu and cuda", o->backend);
  if (cuda && o->double_precision)
    return diag(d,
                "--double is for gradient checks on the CPU; the CUDA backend computes in bf16 and "
                "fp32 (drop one)");
  Plan p;
  OwnFolder dir = {0};
  int status = plan_build(o, &p, stdout, d);
  if (status == 0 && cuda) status = check_cuda_attention(&p.model, d);
  if (status == 0)
    status = own_folder_claim(&dir, "-o", o->output, FOLDER_PROGRAM, program_files,
                              PROGRAM_FILES, d->msg, sizeof d->msg);
  if (status == 0) status = emit_program(&p, &dir, d);
  if (status == 0)
    status = own_folder_settle(&dir, program_files,
                               PROGRAM_FILES - !emit_has_constants_file(&p.model), d->msg,
                               sizeof d->msg);
  plan_free(&p);
  if (status == 0 && !o->emit_only) status = cuda ? compile_cuda(&dir, d) : compile_cpu(o, &dir, d);
  own_folder_free(&dir);
  return status;
}

int cmd_build(int argc, char **argv) {
  Options o;
  Diag d;
  if (options_parse(argc, argv, 2, build_flags, 1, &o, &d) == 0 && run(&o, &d) == 0) return 0;
  diag_print(d.msg);
  return 1;
}
