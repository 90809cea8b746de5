/* resume.c: a full checkpoint's seed and learning-rate schedule: written as metadata, and on
 * --load held against the command line's. */
#include "train/resume.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors_meta.h"
#include "message.h"

/* One setting of the run: a whole number (the seed, step counts) or a real one (rates). */
typedef struct {
  const char *key;          /* its metadata key */
  /* how the message says it: "learning rate decays over " 1000 " steps" */
  const char *what, *unit;
  const char *flag;         /* the flag that gave the command line's value */
  const char *keep_flag;    /* the flag that keeps the checkpoint's value */
  int given;                /* the command line gives it */
  uint64_t most;            /* a whole number, from 0 to most; 0: a finite number of at least 0 */
  /* the value when whole: the command line's (given or default), then the run's */
  uint64_t count;
  double value;             /* the value otherwise */
} Setting;

/* The shortest text that reads back as x: "0.003" rather than "0.0030000000000000001". */
static void exact_text(double x, char *text, size_t len) {
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(text, len, "%.*g", digits, x);
    if (strtod(text, NULL) == x) return;
  }
}

static void value_text(const Setting *s, char *text, size_t len) {
  if (s->most) snprintf(text, len, "%llu", (unsigned long long)s->count);
  else exact_text(s->value, text, len);
}

static int same_value(const Setting *a, const Setting *b) {
  return a->most ? a->count == b->count : a->value == b->value;
}

/* The checkpoint's value of s in *saved: 0, or 1 when it has none; a malformed or out-of-range
 * one (a seed of "abc", a negative warm-up, a learning rate of nan) ends the job naming the key. */
static int read_saved(Trainer *t, const Ckpt *c, const Setting *s, Setting *saved) {
  char error[MESSAGE_TEXT];
  *saved = *s;
  int found = s->most ? ckpt_meta_whole(c, s->key, 0, s->most, &saved->count, error, sizeof error)
                      : ckpt_meta_real(c, s->key, 0, &saved->value, error, sizeof error);
  if (found < 0) comm_fail_all(t->comm, "%s", error);
  return found;
}

/* The checkpoint's value where the command line gives none; the command line's where it gives
 * the same or --override-schedule says so; else one line naming both values and both ways on. */
static void settle(Trainer *t, const Ckpt *c, Setting *s) {
  Setting saved;
  if (t->args->override_schedule || read_saved(t, c, s, &saved) != 0) return;
  if (s->given && !same_value(s, &saved)) {
    char theirs[RESUME_TEXT_LEN], ours[RESUME_TEXT_LEN];
    value_text(&saved, theirs, sizeof theirs);
    value_text(s, ours, sizeof ours);
    comm_fail(
        t->comm,
        "%s: the checkpoint's %s%s%s, %s %s would change that; give %s %s to continue as saved, or "
        "--override-schedule to go on with %s %s",
        c->path, s->what, theirs, s->unit, s->flag, ours, s->keep_flag, theirs, s->flag, ours);
  }
  *s = saved;
}

void resume_settle(Trainer *t, const Ckpt *c) {
  const TrainArgs *a = t->args;
  int64_t decay = a->decay_steps ? a->decay_steps : a->steps;
  const char *decay_flag = a->decay_steps ? "--decay-steps" : "--steps";
  Setting seed = {"seed",     "seed is ", "", "--seed", "--seed", a->given & GIVEN_SEED,
                  UINT64_MAX, a->seed,    0},
          lr = {"lr", "learning rate peaks at ", "", "--lr", "--lr", a->given & GIVEN_LR, 0, 0,
                a->lr},
          warmup = {"warmup",   "learning rate warms up over ", " steps",  "--warmup",
                    "--warmup", a->given & GIVEN_WARMUP,        INT64_MAX, (uint64_t)a->warmup,
                    0},
          decay_steps = {"decay_steps",
                         "learning rate decays over ",
                         " steps",
                         decay_flag,
                         "--decay-steps",
                         decay > 0,
                         INT64_MAX,
                         (uint64_t)decay,
                         0},
          weight_decay = {"weight_decay",
                          "weight decay is ",
                          "",
                          "--weight-decay",
                          "--weight-decay",
                          a->given & GIVEN_WEIGHT_DECAY,
                          0,
                          0,
                          a->weight_decay};
  Setting *all[] = {&seed, &lr, &warmup, &decay_steps, &weight_decay};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) settle(t, c, all[i]);
  t->seed = seed.count;
  t->schedule = optim_schedule(lr.value, (int64_t)warmup.count, (int64_t)decay_steps.count);
  t->adamw.weight_decay = weight_decay.value;
}

static void add(CkptMeta *meta, char (*text)[RESUME_TEXT_LEN], int *n, const char *key,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add(CkptMeta *meta, char (*text)[RESUME_TEXT_LEN], int *n, const char *key,
                const char *fmt, ...) {
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
  if (t->schedule.total > 0)
    add(meta, text, &n, "decay_steps", "%lld", (long long)t->schedule.total);
  add(meta, text, &n, "weight_decay", "%.17g", t->adamw.weight_decay);
  return n;
}
