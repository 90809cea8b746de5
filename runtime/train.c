/* train.c: main() of every generated program: its flags, checks made before any work, this machine's
 * GEMM rate (MFU's denominator), threads per rank, and the ranks' launch. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "save_folder.h"
#include "trainer.h"

static const char *const usage =
    "train --data FILE --steps N [--seed S] [--lr X] [--warmup N] [--decay-steps N] [--weight-decay X] [--grad-clip X] "
    "[--save DIR] [--save-every N] [--load DIR [--override-schedule] | --init DIR] [--eval-every N] [--eval-batches N] "
    "[--val FILE] [--eval FILE] [--log-json FILE] [--sample N] [--trace FILE] [--gradcheck N]; "
    "or train --eval FILE [--load DIR | --init DIR] [--log-json FILE]";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "plait: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 1;
}

static int number(const char *flag, const char *text, double *out) {
  char *end;
  if (!text) return fail("%s takes a value", flag);
  *out = strtod(text, &end);
  if (*end || end == text) return fail("%s takes a number, not '%s'", flag, text);
  return 0;
}

static int integer(const char *flag, const char *text, int64_t *out) {
  double v = 0;
  if (number(flag, text, &v)) return 1;
  if (v < 0 || v != (double)(int64_t)v) return fail("%s takes a whole number of at least 0, not '%s'", flag, text);
  *out = (int64_t)v;
  return 0;
}

static int parse(int argc, char **argv, TrainArgs *a) {
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int64_t seed;
    int status;
    if (strcmp(f, "--override-schedule") == 0) {
      a->override_schedule = 1;
      continue;
    }
    if (strcmp(f, "--data") == 0) a->data = v, status = v ? 0 : fail("%s takes a file", f);
    else if (strcmp(f, "--val") == 0) a->val_data = v, status = v ? 0 : fail("%s takes a file", f);
    else if (strcmp(f, "--save") == 0) a->save = v, status = v ? 0 : fail("%s takes a directory", f);
    else if (strcmp(f, "--load") == 0) a->load = v, status = v ? 0 : fail("%s takes a directory", f);
    else if (strcmp(f, "--init") == 0) a->init = v, status = v ? 0 : fail("%s takes a directory", f);
    else if (strcmp(f, "--eval") == 0) a->eval = v, status = v ? 0 : fail("%s takes a file", f);
    else if (strcmp(f, "--log-json") == 0) a->log_json = v, status = v ? 0 : fail("%s takes a file", f);
    else if (strcmp(f, "--trace") == 0) a->trace = v, status = v ? 0 : fail("%s takes a file", f);
    else if (strcmp(f, "--steps") == 0) status = integer(f, v, &a->steps);
    else if (strcmp(f, "--warmup") == 0) status = integer(f, v, &a->warmup), a->given |= GIVEN_WARMUP;
    else if (strcmp(f, "--decay-steps") == 0) status = integer(f, v, &a->decay_steps);
    else if (strcmp(f, "--save-every") == 0) status = integer(f, v, &a->save_every);
    else if (strcmp(f, "--eval-every") == 0) status = integer(f, v, &a->eval_every);
    else if (strcmp(f, "--eval-batches") == 0) status = integer(f, v, &a->eval_batches);
    else if (strcmp(f, "--sample") == 0) status = integer(f, v, &a->sample);
    else if (strcmp(f, "--gradcheck") == 0) status = integer(f, v, &a->gradcheck);
    else if (strcmp(f, "--seed") == 0) status = integer(f, v, &seed), a->seed = (uint64_t)seed, a->given |= GIVEN_SEED;
    else if (strcmp(f, "--lr") == 0) status = number(f, v, &a->lr), a->given |= GIVEN_LR;
    else if (strcmp(f, "--weight-decay") == 0) status = number(f, v, &a->weight_decay), a->given |= GIVEN_WEIGHT_DECAY;
    else if (strcmp(f, "--grad-clip") == 0) status = number(f, v, &a->grad_clip);
    else return fail("unknown flag %s; usage: %s", f, usage);
    if (status) return 1;
    i++;
  }
  return 0;
}

/* The validation file `plait data` writes beside OUT.bin: OUT.val.bin, if it is there. */
static const char *default_val(TrainArgs *a) {
  if (!a->data) return NULL;
  size_t n = strlen(a->data);
  if (n < 4 || strcmp(a->data + n - 4, ".bin") != 0 || n + 5 > sizeof a->val_path) return NULL;
  snprintf(a->val_path, sizeof a->val_path, "%.*s.val.bin", (int)(n - 4), a->data);
  return access(a->val_path, R_OK) == 0 ? a->val_path : NULL;
}

/* Mistakes found before any rank starts: one line each. */
static int check(TrainArgs *a) {
  const Program *p = &plait_program;
  if (!a->data && (a->steps > 0 || a->gradcheck || !a->eval))
    return fail("--data FILE is missing (a token file; make one with plait data --bytes TEXT -o FILE)");
  if (a->eval_every && !a->val_data && !(a->val_data = default_val(a)))
    return fail("--eval-every needs validation data: --val FILE (or %s's .val.bin beside it)",
                a->data ? a->data : "--data");
  if (a->init && a->load)
    return fail("--init %s and --load %s both name a checkpoint: --init starts from its weights alone, --load resumes "
                "its run; give one of them", a->init, a->load);
  if (a->override_schedule && !a->load)
    return fail("--override-schedule sets a loaded checkpoint's seed and schedule from the command line; give it with "
                "--load DIR");
  if (a->sample && p->pp != 1) return fail("--sample runs on one pipeline stage (pp = 1); this program has pp = %d", p->pp);
  if (a->gradcheck && p->tp * p->pp * p->dp != 1) return fail("--gradcheck runs on one rank; this program has %d", p->tp * p->pp * p->dp);
  if (a->gradcheck && strcmp(REAL_NAME, "f64") != 0)
    return fail("--gradcheck needs double precision: build with plait build --double");
  char error[4400];
  if (a->save && save_folder_prepare(a->save, a->init, error, sizeof error)) return fail("%s", error);
  return 0;
}

int main(int argc, char **argv) {
  TrainArgs args = {.steps = 0, .seed = 1234, .lr = 1e-3, .warmup = 0, .grad_clip = 1.0, .weight_decay = 0.01,
                    .eval_batches = 4};
  if (argc < 2) return fail("usage: %s", usage);
  if (parse(argc, argv, &args) || check(&args)) return 1;
  args.gemm_rate = device_peak_flops();
  device_share(comm_ranks_on_machine(plait_program.tp * plait_program.pp * plait_program.dp));
  return comm_launch(plait_program.tp, plait_program.pp, plait_program.dp, trainer_main, &args);
}
