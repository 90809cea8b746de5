/* layout_fields.c: the table of the parallel layout's settings, and the spellings of their values
 * that the flags, the model file, parallel.c and the printers share. */
#include "front/layout_fields.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT(f) .offset = offsetof(Parallel, f), .size = sizeof((Parallel *)0)->f

const LayoutField layout_fields[LAYOUT_FIELDS] = {
    {"tp", "--tp", FIELD_SIZE, AT(tp), .standard = "1", .text = "tp %s", .in_shape = 1,
     .tune = TUNE_SEARCHED, .column = {1, 4}},
    {"pp", "--pp", FIELD_SIZE, AT(pp), .standard = "1", .text = "pp %s", .in_shape = 1,
     .tune = TUNE_SEARCHED, .column = {2, 4}},
    {"vpp", "--vpp", FIELD_SIZE, AT(vpp), .standard = "1", .text = "vpp %s", .in_shape = 1,
     .tune = TUNE_SEARCHED, .column = {4, 3}},
    {"dp", "--dp", FIELD_SIZE, AT(dp), .standard = "1", .text = "dp %s", .in_shape = 1,
     .tune = TUNE_SEARCHED, .column = {3, 5}},
    {"ep", "--ep", FIELD_SIZE, AT(ep), .standard = "1", .text = "ep %s", .in_shape = 1,
     .tune = TUNE_PINNED, .alias = "--expert-model-parallel-size"},
    {"mbs", "--mbs", FIELD_SIZE, AT(mbs), .standard = "1", .text = "microbatch %s", .in_shape = 1,
     .tune = TUNE_SEARCHED, .column = {5, 3}},
    {"gbs", "--gbs", FIELD_SIZE, AT(gbs), .text = "global batch %s", .in_shape = 1,
     .tune = TUNE_HIDDEN},
    {"schedule", "--schedule", FIELD_NAME, AT(schedule), .text = "%s schedule",
     .tune = TUNE_SEARCHED, .column = {6, -11}},
    {"recompute", "--recompute", FIELD_CHOICE, AT(recompute),
     .words = {"none", "full", "selective"},
     .standard = "none", .text = "recompute %s", .tune = TUNE_SEARCHED, .column = {7, -9}},
    {"sequence_parallel", "--sequence-parallel", FIELD_SWITCH, AT(sequence_parallel),
     .words = {"off", "on"}, .standard = "off", .text = "sequence parallel %s",
     .tune = TUNE_SEARCHED, .column = {8, -3, "sp", {"no", "yes"}}},
    {"partition", "--partition", FIELD_NAME, AT(partition), .words = {"balanced", "uniform"},
     .standard = "balanced", .text = "partition %s", .tune = TUNE_PINNED},
    {"grad_reduce", "--grad-reduce", FIELD_CHOICE, AT(grad_reduce_after),
     .words = {"overlap", "after"}, .standard = "overlap", .text = "grad reduce %s",
     .tune = TUNE_PINNED},
    {"distributed_optimizer", "--distributed-optimizer", FIELD_SWITCH, AT(distributed_optimizer),
     .alias = "--use-distributed-optimizer", .words = {"off", "on"}, .standard = "off",
     .text = "distributed optimizer %s", .tune = TUNE_SEARCHED,
     .column = {9, -4, "dopt", {"no", "yes"}}},
    {"scatter_gather", "--scatter-gather", FIELD_CHOICE, AT(scatter_gather),
     .words = {"off", "on"}, .standard = "on", .text = "scatter/gather %s",
     .tune = TUNE_PINNED},
};
_Static_assert(sizeof((Parallel *)0)->schedule <= LAYOUT_VALUE_LEN,
               "a schedule's name fits a value");

static const LayoutField *find(const char *name, int by_flag) {
  for (int i = 0; i < LAYOUT_FIELDS; i++)
    if (strcmp(by_flag ? layout_fields[i].flag : layout_fields[i].key, name) == 0 ||
        (by_flag && layout_fields[i].alias && strcmp(layout_fields[i].alias, name) == 0))
      return &layout_fields[i];
  return NULL;
}

const LayoutField *layout_field_by_flag(const char *flag) { return find(flag, 1); }
const LayoutField *layout_field_by_key(const char *key) { return find(key, 0); }

int layout_field_size(const char *text) {
  char *end;
  long v = strtol(text, &end, 10);
  return *end || v < 1 || v > LAYOUT_MOST_SIZE ? -1 : (int)v;
}

int layout_field_word(const char *const words[4], const char *word) {
  for (int i = 0; i < 4 && words[i]; i++)
    if (strcmp(words[i], word) == 0) return i;
  return -1;
}

LayoutFieldSet layout_field_set(const LayoutField *field, const char *text, Parallel *p) {
  if (field->kind == FIELD_NAME) {
    if (strlen(text) >= field->size) return FIELD_TOO_LONG;
    strcpy(LAYOUT_NAME(field, p), text);
    return FIELD_SET;
  }
  int value =
      field->kind == FIELD_SIZE ? layout_field_size(text) : layout_field_word(field->words, text);
  if (value < 0) return FIELD_BAD_VALUE;
  LAYOUT_INT(field, p) = value;
  return FIELD_SET;
}

const char *layout_field_value(const LayoutField *field, const Parallel *p,
                               const char *const words[4], char *buf, size_t len) {
  int value = field->kind == FIELD_NAME ? 0 : LAYOUT_INT(field, p);
  if (field->kind == FIELD_NAME) snprintf(buf, len, "%s", LAYOUT_NAME(field, p));
  if (field->kind == FIELD_SIZE) snprintf(buf, len, "%d", value);
  const char *const *spelled = words && words[0] ? words : field->words;
  if (field->kind == FIELD_CHOICE || field->kind == FIELD_SWITCH)
    snprintf(buf, len, "%s", value >= 0 && value < 4 && spelled[value] ? spelled[value] : "");
  return buf;
}

const char *layout_field_words(const LayoutField *field, const char *before, const char *after,
                               char *buf, size_t len) {
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < 4 && field->words[i] && used < len; i++) {
    const char *separator = i == 0 ? "" : i == 3 || !field->words[i + 1] ? " or " : ", ";
    used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s", separator, before, field->words[i],
                             after);
  }
  return buf;
}
