/* flags.c: DIR/train's flags as one table (name, kind, field, range), read with every value checked
 * against its range, and written back as the settings the ranks of a job compare. */
#include "train/flags.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const flags_usage =
    "train --data FILE --steps N [--seed S] [--lr X] [--warmup N] [--decay-steps N] "
    "[--weight-decay X] [--grad-clip X] "
    "[--save DIR] [--save-every N] [--load DIR [--override-schedule] | --init DIR] [--eval-every "
    "N] [--eval-batches N] "
    "[--val FILE] [--eval FILE] [--log-json FILE] [--sample N [--tokenizer FILE]] [--trace FILE] "
    "[--gradcheck N] "
    "[--profile] "
    "[--attention auto|cudnn|plait]; "
    "or train --eval FILE [--load DIR | --init DIR] [--log-json FILE]";

typedef enum {
  FLAG_PATH,   /* const char *: a file or a directory */
  FLAG_WHOLE,  /* int64_t in [min, max] */
  FLAG_SEED,   /* uint64_t, any */
  FLAG_REAL,   /* double, finite, at least min (above it when min_excluded) */
  FLAG_SWITCH, /* int, set to 1 */
  FLAG_CHOICE  /* int: the place of the value among the words of `takes`, "a|b|c" */
} FlagKind;

/* What the ranks of a job compare: the value, only whether it is given (--trace: every rank
 * takes part in writing it, rank 0 alone names the file), or nothing (--log-json: rank 0 alone
 * writes it). */
typedef enum { AGREE_VALUE, AGREE_PRESENCE, AGREE_NONE } FlagAgreement;

typedef struct {
  const char *name;
  FlagKind kind;
  size_t offset;      /* its field in TrainArgs */
  const char *takes;  /* paths: "a file" or "a directory"; whole numbers: what they count, or "" */
  double min, max;
  int min_excluded;
  int given;          /* the GIVEN_* bit it sets, if any */
  FlagAgreement agree;
} TrainFlag;

/* Steps, and anything counted like them: 10^12 keeps every product of a step with a batch's
 * samples and tokens within int64_t. */
#define MOST_STEPS 1e12
/* --sample's text is generated a token at a time, each a forward pass over the whole model;
 * --gradcheck takes several forward passes per element. */
#define MOST_SAMPLE_BYTES 1e6
#define MOST_GRADCHECK_ELEMENTS 1e6
#define FIELD(f) offsetof(TrainArgs, f)

static const TrainFlag train_flags[] = {
    {"--data", FLAG_PATH, FIELD(data), "a file", 0, 0, 0, 0, AGREE_VALUE},
    {"--val", FLAG_PATH, FIELD(val_data), "a file", 0, 0, 0, 0, AGREE_VALUE},
    {"--eval", FLAG_PATH, FIELD(eval), "a file", 0, 0, 0, 0, AGREE_VALUE},
    {"--save", FLAG_PATH, FIELD(save), "a directory", 0, 0, 0, 0, AGREE_VALUE},
    {"--load", FLAG_PATH, FIELD(load), "a directory", 0, 0, 0, 0, AGREE_VALUE},
    {"--init", FLAG_PATH, FIELD(init), "a directory", 0, 0, 0, 0, AGREE_VALUE},
    {"--log-json", FLAG_PATH, FIELD(log_json), "a file", 0, 0, 0, 0, AGREE_NONE},
    {"--trace", FLAG_PATH, FIELD(trace), "a file", 0, 0, 0, 0, AGREE_PRESENCE},
    {"--tokenizer", FLAG_PATH, FIELD(tokenizer), "a file", 0, 0, 0, 0, AGREE_VALUE},
    {"--steps", FLAG_WHOLE, FIELD(steps), "", 0, MOST_STEPS, 0, 0, AGREE_VALUE},
    {"--warmup", FLAG_WHOLE, FIELD(warmup), "", 0, MOST_STEPS, 0, GIVEN_WARMUP, AGREE_VALUE},
    {"--decay-steps", FLAG_WHOLE, FIELD(decay_steps), "", 1, MOST_STEPS, 0, 0, AGREE_VALUE},
    {"--save-every", FLAG_WHOLE, FIELD(save_every), "", 1, MOST_STEPS, 0, 0, AGREE_VALUE},
    {"--eval-every", FLAG_WHOLE, FIELD(eval_every), "", 1, MOST_STEPS, 0, 0, AGREE_VALUE},
    {"--eval-batches", FLAG_WHOLE, FIELD(eval_batches), "", 1, MOST_STEPS, 0, 0, AGREE_VALUE},
    {"--sample", FLAG_WHOLE, FIELD(sample), " (bytes of text)", 1, MOST_SAMPLE_BYTES, 0, 0,
     AGREE_VALUE},
    {"--gradcheck", FLAG_WHOLE, FIELD(gradcheck), " (elements to check)", 1,
     MOST_GRADCHECK_ELEMENTS, 0, 0, AGREE_VALUE},
    {"--seed", FLAG_SEED, FIELD(seed), "", 0, 0, 0, GIVEN_SEED, AGREE_VALUE},
    {"--lr", FLAG_REAL, FIELD(lr), "", 0, 0, 0, GIVEN_LR, AGREE_VALUE},
    {"--weight-decay", FLAG_REAL, FIELD(weight_decay), "", 0, 0, 0, GIVEN_WEIGHT_DECAY,
     AGREE_VALUE},
    {"--grad-clip", FLAG_REAL, FIELD(grad_clip), "", 0, 0, 1, 0, AGREE_VALUE},
    {"--override-schedule", FLAG_SWITCH, FIELD(override_schedule), "", 0, 0, 0, 0, AGREE_VALUE},
    {"--profile", FLAG_SWITCH, FIELD(profile), "", 0, 0, 0, 0, AGREE_NONE},
    {"--attention", FLAG_CHOICE, FIELD(attention), "auto|cudnn|plait", 0, 0, 0, 0, AGREE_VALUE},
};
#define TRAIN_FLAGS ((int)(sizeof train_flags / sizeof *train_flags))
_Static_assert(sizeof train_flags / sizeof *train_flags <= FLAGS_MAX_SETTINGS,
               "room for every setting");

#define FIELD_OF(type, a, f) ((type *)((char *)(a) + (f)->offset))

/* ---- reading
 * -------------------------------------------------------------------------------------- */

static const char *what_it_takes(const TrainFlag *f) {
  return f->kind == FLAG_PATH     ? f->takes
         : f->kind == FLAG_CHOICE ? "one of auto, cudnn and plait"
                                  : "a number";
}

static int read_whole(const TrainFlag *f, const char *text, TrainArgs *a, Refusal *r) {
  char *end;
  double v = strtod(text, &end);
  if (end == text || *end) return refuse(r, "%s takes a number, not '%s'", f->name, text);
  if (!(v >= f->min && v <= f->max) || v != floor(v))
    return refuse(r, "%s takes a whole number from %.0f to %.0f%s, not '%s'", f->name, f->min,
                  f->max, f->takes, text);
  *FIELD_OF(int64_t, a, f) = (int64_t)v;
  return 0;
}

static int read_seed(const TrainFlag *f, const char *text, TrainArgs *a, Refusal *r) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (text[0] < '0' || text[0] > '9' || *end || errno == ERANGE)
    return refuse(r, "%s takes a whole number from 0 to %llu, not '%s'", f->name,
                  (unsigned long long)UINT64_MAX, text);
  *FIELD_OF(uint64_t, a, f) = (uint64_t)v;
  return 0;
}

static int read_real(const TrainFlag *f, const char *text, TrainArgs *a, Refusal *r) {
  char *end;
  double v = strtod(text, &end);
  if (end == text || *end) return refuse(r, "%s takes a number, not '%s'", f->name, text);
  if (!isfinite(v) || v < f->min || (f->min_excluded && v == f->min))
    return refuse(r, "%s takes a finite number %s %g, not '%s'", f->name,
                  f->min_excluded ? "above" : "of at least", f->min, text);
  *FIELD_OF(double, a, f) = v;
  return 0;
}

/* The place of text among the words of f->takes. */
static int read_choice(const TrainFlag *f, const char *text, TrainArgs *a, Refusal *r) {
  const char *word = f->takes;
  for (int place = 0; *word; place++) {
    size_t n = strcspn(word, "|");
    if (strlen(text) == n && strncmp(text, word, n) == 0) {
      *FIELD_OF(int, a, f) = place;
      return 0;
    }
    word += n + (word[n] == '|');
  }
  return refuse(r, "%s takes %s, not '%s'", f->name, what_it_takes(f), text);
}

static int read_value(const TrainFlag *f, const char *text, TrainArgs *a, Refusal *r) {
  switch (f->kind) {
  case FLAG_PATH:
    if (!*text) return refuse(r, "%s takes %s, not an empty name", f->name, f->takes);
    *FIELD_OF(const char *, a, f) = text;
    return 0;
  case FLAG_WHOLE: return read_whole(f, text, a, r);
  case FLAG_SEED: return read_seed(f, text, a, r);
  case FLAG_REAL: return read_real(f, text, a, r);
  case FLAG_SWITCH: *FIELD_OF(int, a, f) = 1; return 0;
  case FLAG_CHOICE: return read_choice(f, text, a, r);
  }
  return 0;
}

static const TrainFlag *flag_named(const char *name) {
  for (int k = 0; k < TRAIN_FLAGS; k++)
    if (strcmp(train_flags[k].name, name) == 0) return &train_flags[k];
  return NULL;
}

/* A flag's value: the next argument, which is missing at the end or when it is another flag. */
static int value_of(const TrainFlag *f, int argc, char **argv, int i, const char **value,
                    Refusal *r) {
  *value = "";
  if (f->kind == FLAG_SWITCH) return 0;
  if (i + 1 >= argc)
    return refuse(r, "%s takes %s; give it after %s", f->name, what_it_takes(f), f->name);
  if (strncmp(argv[i + 1], "--", 2) == 0)
    return refuse(r, "%s takes %s, but the flag %s follows it; give the value after %s", f->name,
                  what_it_takes(f), argv[i + 1], f->name);
  *value = argv[i + 1];
  return 0;
}

int flags_parse(int argc, char **argv, TrainArgs *a, Refusal *r) {
  const char *seen[TRAIN_FLAGS] = {0};
  for (int i = 1; i < argc; i++) {
    const TrainFlag *f = flag_named(argv[i]);
    const char *value;
    if (!f) return refuse(r, "unknown flag %s; usage: %s", argv[i], flags_usage);
    if (value_of(f, argc, argv, i, &value, r)) return 1;
    int k = (int)(f - train_flags);
    if (seen[k] && f->kind == FLAG_SWITCH)
      return refuse(r, "%s is given twice; give it once", f->name);
    if (seen[k])
      return refuse(r, "%s is given twice ('%s', then '%s'); give it once", f->name, seen[k],
                    value);
    seen[k] = value;
    if (read_value(f, value, a, r)) return 1;
    a->given |= f->given;
    i += f->kind != FLAG_SWITCH;
  }
  return 0;
}

/* ---- the settings as text
 * ------------------------------------------------------------------------- */

/* The shortest text that reads back as x: "0.003" rather than "0.0030000000000000001". */
static void shortest_text(double x, char *text, size_t size) {
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(text, size, "%.*g", digits, x);
    if (strtod(text, NULL) == x) return;
  }
}

/* The word of f->takes at `place`. */
static void choice_text(const TrainFlag *f, int place, char *text, size_t size) {
  const char *word = f->takes;
  for (int i = 0; i < place && *word; i++)
    word += strcspn(word, "|") + (word[strcspn(word, "|")] == '|');
  snprintf(text, size, "%.*s", (int)strcspn(word, "|"), word);
}

static void setting_of(const TrainFlag *f, const TrainArgs *a, FlagSetting *s) {
  snprintf(s->flag, sizeof s->flag, "%s", f->name);
  s->value[0] = 0;
  s->given = 1;
  switch (f->kind) {
  case FLAG_PATH: {
    const char *path = *FIELD_OF(const char *const, a, f);
    s->given = path != NULL;
    if (path && f->agree == AGREE_VALUE) snprintf(s->value, sizeof s->value, "%s", path);
    break;
  }
  case FLAG_WHOLE:
    snprintf(s->value, sizeof s->value, "%lld", (long long)*FIELD_OF(const int64_t, a, f));
    break;
  case FLAG_SEED:
    snprintf(s->value, sizeof s->value, "%llu",
             (unsigned long long)*FIELD_OF(const uint64_t, a, f));
    break;
  case FLAG_REAL: shortest_text(*FIELD_OF(const double, a, f), s->value, sizeof s->value); break;
  case FLAG_SWITCH: s->given = *FIELD_OF(const int, a, f); break;
  case FLAG_CHOICE: choice_text(f, *FIELD_OF(const int, a, f), s->value, sizeof s->value); break;
  }
}

int flags_settings(const TrainArgs *a, FlagSetting *settings) {
  int n = 0;
  for (int k = 0; k < TRAIN_FLAGS; k++)
    if (train_flags[k].agree != AGREE_NONE) setting_of(&train_flags[k], a, &settings[n++]);
  return n;
}
