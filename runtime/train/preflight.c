/* preflight.c: the start-up checks of DIR/train's files, threads and memory, made before any
 * rank starts. */
#include "train/preflight.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "device.h"
#include "footprint.h"
#include "train/output.h"
#include "write_place.h"

int refuse(Refusal *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->text, sizeof r->text, fmt, ap);
  va_end(ap);
  return 1;
}

/* ---- files
 * -------------------------------------------------------------------------------------- */

/* flag's value names `path`, or the folder that holds it (a checkpoint's). */
static int regular_input(const char *flag, const char *value, const char *path, const char *what,
                         Refusal *r) {
  struct stat st;
  if (!path || stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
  if (strcmp(value, path) == 0)
    return refuse(r, "%s %s is %s, not a regular file; give the path of %s", flag, path,
                  place_kind(st.st_mode), what);
  return refuse(r, "%s %s: %s is %s, not a regular file; give the folder of %s", flag, value, path,
                place_kind(st.st_mode), what);
}

/* DIR/model.safetensors of a checkpoint directory flag. */
static const char *checkpoint_file(const char *dir, char *out, size_t size) {
  if (!dir) return NULL;
  snprintf(out, size, "%s/model.safetensors", dir);
  return out;
}

int preflight_inputs(const TrainArgs *a, Refusal *r) {
  static const char *const token_file = "a token file made with plait data";
  char load[PATH_MAX + 32], init[PATH_MAX + 32];
  const char *val_flag = a->val_data == a->val_path ? "--val (found beside --data)" : "--val";
  return regular_input("--data", a->data, a->data, token_file, r) ||
         regular_input(val_flag, a->val_data, a->val_data, token_file, r) ||
         regular_input("--eval", a->eval, a->eval, token_file, r) ||
         regular_input("--load", a->load, checkpoint_file(a->load, load, sizeof load),
                       "a checkpoint", r) ||
         regular_input("--init", a->init, checkpoint_file(a->init, init, sizeof init),
                       "a checkpoint", r);
}

/* One output path against everything the run reads, the checkpoint file it writes, the program
 * and the other output. */
static int check_output(const TrainArgs *a, const char *flag, const char *path,
                        const char *other_flag, const char *other, Refusal *r) {
  char load[PATH_MAX + 32], init[PATH_MAX + 32], save[PATH_MAX + 32], program[PATH_MAX] = "";
  ssize_t n = readlink("/proc/self/exe", program, sizeof program - 1);
  program[n > 0 ? n : 0] = 0;
  const char *const others[] = {a->data,
                                a->val_data,
                                a->eval,
                                checkpoint_file(a->load, load, sizeof load),
                                checkpoint_file(a->init, init, sizeof init),
                                checkpoint_file(a->save, save, sizeof save),
                                n > 0 ? program : NULL,
                                other};
  const char *const names[] = {"--data",
                               "--val",
                               "--eval",
                               "--load's checkpoint file",
                               "--init's checkpoint file",
                               "the checkpoint file --save writes",
                               "this program itself",
                               other_flag};
  if (!path) return 0;
  return output_check(flag, path, others, names, sizeof others / sizeof *others, r->text,
                      sizeof r->text) != 0;
}

int preflight_outputs(const TrainArgs *a, Refusal *r) {
  return check_output(a, "--log-json", a->log_json, "--trace", a->trace, r) ||
         check_output(a, "--trace", a->trace, "--log-json", a->log_json, r);
}

/* ---- threads and memory
 * ------------------------------------------------------------------------- */

int preflight_local_ranks(const Program *p, Refusal *r) {
  char why[256];
  int world = p->tp * p->pp * p->dp, most = device_local_ranks_max(why, sizeof why);
  if (comm_ranks_are_processes() || most <= 0 || world <= most) return 0;
  return refuse(
      r,
      "tp·pp·dp = %d·%d·%d = %d ranks as threads of one process, more than the %d it can run: %s; "
      "start them as processes (mpirun -np %d), or choose a smaller layout",
      p->tp, p->pp, p->dp, world, most, why, world);
}

int preflight_memory(const Program *p, Refusal *r) {
  int processes = comm_ranks_are_processes(), world = p->tp * p->pp * p->dp;
  int ranks = processes ? comm_ranks_on_machine(world) : world;
  ranks = ranks < world ? ranks : world;
  char what[1400], need_text[32], room_text[32];
  double need = footprint_bytes_least(p, ranks);
  double room = device_memory_available(processes, processes ? 1 : world, what, sizeof what);
  if (room < 0 || need <= room) return 0;
  bytes_format(need, need_text, sizeof need_text);
  bytes_format(room, room_text, sizeof room_text);
  char raise[128] = "";
  if (strstr(what, "ulimit")) /* a limit the user set: it can be raised by what is missing */
    snprintf(raise, sizeof raise, "raise that limit by at least %.0f kB, or ",
             (need - room) / 1024 + 1);
  if (processes)
    return refuse(r,
                  "the plan needs at least %s for the %d rank%s on this machine, more than the %s "
                  "of %s; %srun "
                  "fewer ranks on each machine, or a smaller model or microbatch",
                  need_text, ranks, ranks == 1 ? "" : "s", room_text, what, raise);
  if (ranks > 1)
    return refuse(r,
                  "the plan needs %s for the %d ranks of this process, more than the %s of %s; "
                  "%srun fewer ranks "
                  "per process (mpirun), or a smaller model or microbatch",
                  need_text, ranks, room_text, what, raise);
  return refuse(
      r,
      "the plan needs %s for this process's rank, more than the %s of %s; %srun a smaller model or "
      "microbatch, or split it over processes with --tp or --pp (mpirun)",
      need_text, room_text, what, raise);
}
