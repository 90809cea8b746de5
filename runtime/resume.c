/* resume.c: a full checkpoint's seed and learning-rate schedule: written as metadata, and on --load held
 * against the command line's. */
#include "resume.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One setting of the run. Every value the command line can give is a double exactly (integer flags are
 * read as doubles), so they are compared as doubles. */
typedef struct {
  const char *key;          /* its metadata key */
  const char *what, *unit;  /* how the message says it: "learning rate decays over " 1000 " steps" */
  const char *flag;         /* the flag that gave the command line's value */
  const char *keep_flag;    /* the flag that keeps the checkpoint's value */
  int given;                /* the command line gives it */
  double value;             /* the command line's value (given or default); then the run's */
} Setting;

/* The shortest text that reads back as x: "0.003" rather than "0.0030000000000000001". */
static void exact_text(double x, char *text, size_t len) {
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(text, len, "%.*g", digits, x);
    if (strtod(text, NULL) == x) return;
  }
}

/* The checkpoint's value where the command line gives none; the command line's where it gives the same
 * or --override-schedule says so; else one line naming both values and both ways on. */
static void settle(Trainer *t, const Ckpt *c, Setting *s) {
  const char *saved = ckpt_meta(c, s->key);
  if (!saved || t->args->override_schedule) return;
  char *end;
  double value = strtod(saved, &end);
  if (end == saved || *end)
    comm_fail(t->comm, "%s: metadata %s = '%s' is not a number; the file is damaged, use another checkpoint", c->path,
              s->key, saved);
  if (s->given && value != s->value) {
    char theirs[RESUME_TEXT_LEN], ours[RESUME_TEXT_LEN];
    exact_text(value, theirs, sizeof theirs);
    exact_text(s->value, ours, sizeof ours);
    comm_fail(t->comm,
              "%s: the checkpoint's %s%s%s, %s %s would change that; give %s %s to continue as saved, or "
              "--override-schedule to go on with %s %s",
              c->path, s->what, theirs, s->unit, s->flag, ours, s->keep_flag, theirs, s->flag, ours);
  }
  s->value = value;
}

void resume_settle(Trainer *t, const Ckpt *c) {
  const TrainArgs *a = t->args;
  int64_t decay = a->decay_steps ? a->decay_steps : a->steps;
  const char *decay_flag = a->decay_steps ? "--decay-steps" : "--steps";
  Setting seed = {"seed", "seed is ", "", "--seed", "--seed", a->given & GIVEN_SEED, (double)a->seed},
          lr = {"lr", "learning rate peaks at ", "", "--lr", "--lr", a->given & GIVEN_LR, a->lr},
          warmup = {"warmup", "learning rate warms up over ", " steps", "--warmup", "--warmup",
                    a->given & GIVEN_WARMUP, (double)a->warmup},
          decay_steps = {"decay_steps", "learning rate decays over ", " steps", decay_flag, "--decay-steps", decay > 0,
                         (double)decay},
          weight_decay = {"weight_decay", "weight decay is ", "", "--weight-decay", "--weight-decay",
                          a->given & GIVEN_WEIGHT_DECAY, a->weight_decay};
  Setting *all[] = {&seed, &lr, &warmup, &decay_steps, &weight_decay};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) settle(t, c, all[i]);
  t->seed = (uint64_t)seed.value;
  t->schedule = optim_schedule(lr.value, (int64_t)warmup.value, (int64_t)decay_steps.value);
  t->adamw.weight_decay = weight_decay.value;
}

static void add(CkptMeta *meta, char (*text)[RESUME_TEXT_LEN], int *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add(CkptMeta *meta, char (*text)[RESUME_TEXT_LEN], int *n, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text[*n], RESUME_TEXT_LEN, fmt, ap);
  va_end(ap);
  meta[*n] = (CkptMeta){key, text[*n]};
  (*n)++;
}

int resume_metadata(const Trainer *t, CkptMeta *meta, char (*text)[RESUME_TEXT_LEN]) {
  int n = 0;
  add(meta, text, &n, "seed", "%llu", (unsigned long long)t->seed);
  add(meta, text, &n, "lr", "%.17g", t->schedule.lr_max);
  add(meta, text, &n, "warmup", "%lld", (long long)t->schedule.warmup);
  if (t->schedule.total > 0) add(meta, text, &n, "decay_steps", "%lld", (long long)t->schedule.total);
  add(meta, text, &n, "weight_decay", "%.17g", t->adamw.weight_decay);
  return n;
}
