/* tune_print.c: plait tune's report: the best few layouts (iteration time, TFLOP/s per device,
 * memory, bubble, traffic), then the rest counted by why they lost, with the best of each; as
 * text or JSON. */
#include <string.h>

#include "bytes.h"
#include "escape.h"
#include "front/layout_fields.h"
#include "plan/tune.h"

static const char *const loss_names[LOST_REASONS] = {
    "best",          "does not fit",   "bubble", "communication", "small GEMMs",
    "recomputation", "optimizer step", "slower on every count"};

const char *tune_loss_name(TuneLoss loss) { return loss_names[loss]; }

/* tune's columns, in order: the searched field at each place (NULL past the last). */
static const LayoutField *tune_column(int place) {
  for (int i = 0; i < LAYOUT_FIELDS; i++)
    if (layout_fields[i].tune == TUNE_SEARCHED && layout_fields[i].column.place == place)
      return &layout_fields[i];
  return NULL;
}

/* The field as plan's flag appended to buf (a switch only when on); returns the bytes taken. */
static int append_flag(const LayoutField *field, const Parallel *p, char *buf, int len, int used) {
  char value[LAYOUT_VALUE_LEN];
  int is_switch = field->kind == FIELD_SWITCH;
  if (used >= len || (is_switch && !LAYOUT_INT(field, p))) return used;
  if (!is_switch) layout_field_value(field, p, NULL, value, sizeof value);
  return used + snprintf(buf + used, len - used, "%s%s%s%s", used ? " " : "", field->flag,
                         is_switch ? "" : " ", is_switch ? "" : value);
}

/* The searched fields, then the pinned ones away from their default. */
void tune_layout_flags(const Parallel *p, char *buf, int len) {
  char value[LAYOUT_VALUE_LEN];
  int used = 0;
  const LayoutField *field;
  buf[0] = 0;
  for (int place = 1; (field = tune_column(place)); place++)
    used = append_flag(field, p, buf, len, used);
  for (field = layout_fields; field < layout_fields + LAYOUT_FIELDS; field++)
    if (field->tune == TUNE_PINNED &&
        strcmp(layout_field_value(field, p, NULL, value, sizeof value), field->standard) != 0)
      used = append_flag(field, p, buf, len, used);
}

static int best_count(const Tune *t) { return t->fitting < TUNE_BEST ? t->fitting : TUNE_BEST; }

/* The ep column, after dp's, where the model has experts (a dense model's table is without it). */
enum { EP_WIDTH = 3 };
static int ep_after(const Tune *t, const LayoutField *column) {
  return t->experts > 0 && strcmp(column->key, "dp") == 0;
}

static void write_best(const Tune *t, FILE *f) {
  fprintf(f, "%2s", "#");
  const LayoutField *column;
  for (int place = 1; (column = tune_column(place)); place++) {
    fprintf(f, " %*s", column->column.width,
            column->column.title ? column->column.title : column->key);
    if (ep_after(t, column)) fprintf(f, " %*s", EP_WIDTH, "ep");
  }
  fprintf(f, " %11s %8s %10s %7s %10s\n", "iteration", "TFLOP/s", "memory", "bubble", "traffic");
  for (int i = 0; i < best_count(t); i++) {
    const TuneLayout *l = &t->layouts[i];
    char memory[32], traffic[32], value[LAYOUT_VALUE_LEN], shown[ESCAPED_SIZE(LAYOUT_VALUE_LEN)];
    bytes_format(l->memory, memory, sizeof memory);
    bytes_format(l->traffic, traffic, sizeof traffic);
    fprintf(f, "%2d", i + 1);
    for (int place = 1; (column = tune_column(place)); place++) {
      layout_field_value(column, &l->par, column->column.words, value, sizeof value);
      fprintf(f, " %*s", column->column.width, escape(ESC_TEXT, value, shown, sizeof shown));
      if (ep_after(t, column)) fprintf(f, " %*d", EP_WIDTH, l->par.ep);
    }
    fprintf(f, " %9.4g s %8.4g %10s %7.3f %10s\n", l->iteration, l->flops_per_device / 1e12,
            memory, l->bubble, traffic);
  }
}

/* "needs N GB, more than the M a device has" when the other layout does not fit: returns 1. */
static int write_too_big(const Tune *t, const TuneLayout *other, FILE *f) {
  char amount[32], capacity[32];
  if (other->memory <= t->machine.memory_bytes) return 0;
  bytes_format(other->memory, amount, sizeof amount);
  bytes_format(t->machine.memory_bytes, capacity, sizeof capacity);
  fprintf(f, "needs %s%s, more than the %s a device has\n", other->planned ? "" : "at least ",
          amount, capacity);
  return 1;
}

/* Why a layout among the best uses the distributed optimizer: the same layout without it does not
 * fit, or is slower (its optimizer step over every parameter rather than a 1/dp shard). */
static void write_why_sharded(const Tune *t, int i, FILE *f) {
  const TuneLayout *l = &t->layouts[i], *without = &t->layouts[l->without];
  fprintf(f, "%2d uses the distributed optimizer: without it the same layout ", i + 1);
  if (write_too_big(t, without, f)) return;
  fprintf(f, "takes %s%.4g s (%+.1f%%), its optimizer step %.4g ms against %.4g ms\n",
          without->planned ? "" : "at least ", without->iteration,
          100 * (without->iteration / l->iteration - 1), 1e3 * without->bound.optimizer,
          1e3 * l->bound.optimizer);
}

/* Why a layout among the best recomputes selectively: the same layout keeping everything does not
 * fit, or is slower. */
static void write_why_selective(const Tune *t, int i, FILE *f) {
  const TuneLayout *l = &t->layouts[i], *none = &t->layouts[l->unrecomputed];
  fprintf(f, "%2d recomputes selectively: with --recompute none the same layout ", i + 1);
  if (write_too_big(t, none, f)) return;
  fprintf(f, "takes %s%.4g s (%+.1f%%)\n", none->planned ? "" : "at least ", none->iteration,
          100 * (none->iteration / l->iteration - 1));
}

/* Why a layout among the best spreads its experts over ep ranks: with ep 1 the same layout does
 * not fit (every rank holding every expert), or is slower (its all-to-all priced in). */
static void write_why_spread(const Tune *t, int i, FILE *f) {
  const TuneLayout *l = &t->layouts[i], *single = &t->layouts[l->single];
  char memory[32], spread[32];
  fprintf(f, "%2d spreads the experts over ep %d ranks: with ep 1 the same layout ", i + 1,
          l->par.ep);
  if (write_too_big(t, single, f)) return;
  bytes_format(single->memory, memory, sizeof memory);
  bytes_format(l->memory, spread, sizeof spread);
  fprintf(f, "takes %s%.4g s (%+.1f%%) and needs %s%s against %s\n",
          single->planned ? "" : "at least ", single->iteration,
          100 * (single->iteration / l->iteration - 1), single->planned ? "" : "at least ", memory,
          spread);
}

/* The first (best) layout of each reason, and how many lost for it. */
static void losers(const Tune *t, int count[LOST_REASONS], const TuneLayout *first[LOST_REASONS]) {
  memset(count, 0, LOST_REASONS * sizeof *count);
  memset(first, 0, LOST_REASONS * sizeof *first);
  for (int i = best_count(t); i < t->count; i++) {
    const TuneLayout *l = &t->layouts[i];
    if (!first[l->loss] || (l->loss == LOST_MEMORY && l->memory < first[l->loss]->memory))
      first[l->loss] = l;
    count[l->loss]++;
  }
}

static void write_loser(const Tune *t, TuneLoss loss, int count, const TuneLayout *l, FILE *f) {
  char flags[512], amount[64], shown[ESCAPED_SIZE(sizeof flags)];
  tune_layout_flags(&l->par, flags, sizeof flags);
  escape(ESC_TEXT, flags, shown, sizeof shown);
  if (loss == LOST_MEMORY) {
    bytes_format(l->memory, amount, sizeof amount);
    fprintf(f, "  %-22s %6d   closest: %s%s (%s)\n", tune_loss_name(loss), count,
            l->planned ? "" : "at least ", amount, shown);
    return;
  }
  double slower = 100 * (l->iteration / t->layouts[0].iteration - 1);
  fprintf(f, "  %-22s %6d   best of them: %s%.4g s, %+.1f%% (%s)\n", tune_loss_name(loss), count,
          l->planned ? "" : "at least ", l->iteration, slower, shown);
}

void tune_write_text(const Tune *t, FILE *f) {
  char capacity[32];
  bytes_format(t->machine.memory_bytes, capacity, sizeof capacity);
  int planned = 0;
  for (int i = 0; i < t->count; i++) planned += t->layouts[i].planned;
  fprintf(f, "tune: ");
  escape_write(ESC_TEXT, t->model_file, f);
  fprintf(f, " over %d devices of ", t->devices);
  escape_write(ESC_TEXT, t->machine.name, f);
  fprintf(f, " (%s each), global batch %d\n", capacity, t->gbs);
  fprintf(f, "searched %d layouts in %.2f s (%d planned in full)", t->count, t->seconds, planned);
  if (t->refused) {
    fprintf(f, "; %d more refused by plan's rules (the first: ", t->refused);
    escape_write(ESC_TEXT, t->refusal, f);
    fprintf(f, ")");
  }
  fprintf(f, "\n");
  write_best(t, f);
  for (int i = 0; i < best_count(t); i++) {
    if (t->layouts[i].without >= 0) write_why_sharded(t, i, f);
    if (t->layouts[i].unrecomputed >= 0) write_why_selective(t, i, f);
    if (t->layouts[i].single >= 0) write_why_spread(t, i, f);
  }
  int count[LOST_REASONS];
  const TuneLayout *first[LOST_REASONS];
  losers(t, count, first);
  if (t->count > best_count(t))
    fprintf(f, "the other %d, by why they lost to the first:\n", t->count - best_count(t));
  for (int k = LOST_MEMORY; k < LOST_REASONS; k++)
    if (count[k]) write_loser(t, (TuneLoss)k, count[k], first[k], f);
  char flags[512];
  tune_layout_flags(&t->layouts[0].par, flags, sizeof flags);
  fprintf(f, "the first as plan's flags: ");
  escape_write(ESC_TEXT, flags, f);
  fprintf(f, "\n");
}

/* A searched field in tune's JSON: a choice or a switch as whether it is on. */
static void write_json_value(const LayoutField *field, const Parallel *p, FILE *f) {
  if (field->kind == FIELD_CHOICE || field->kind == FIELD_SWITCH)
    fputs(LAYOUT_INT(field, p) ? "true" : "false", f);
  else if (field->kind == FIELD_SIZE) fprintf(f, "%d", LAYOUT_INT(field, p));
  else escape_write(ESC_JSON, LAYOUT_NAME(field, p), f);
}

/* A layout among the best with the distributed optimizer or selective recomputation: the same
 * layout without it, under `key` (keys of their own, so that the layout's own come first on a
 * search for them); the distributed optimizer's with its optimizer step. */
static void write_other_json(const Tune *t, const char *key, const TuneLayout *other, int step,
                             FILE *f) {
  fprintf(f, "     \"%s\": {\"planned\": %s, \"fits\": %s, \"iteration\": %.17g, \"memory\": %.0f",
          key, other->planned ? "true" : "false",
          other->memory <= t->machine.memory_bytes ? "true" : "false", other->iteration,
          other->memory);
  if (step) fprintf(f, ", \"optimizer_step\": %.17g", other->bound.optimizer);
  fprintf(f, "},\n");
}

static void write_layout_json(const Tune *t, const TuneLayout *l, FILE *f) {
  char flags[512], flags_json[ESCAPED_SIZE(sizeof flags)];
  const LayoutField *column;
  tune_layout_flags(&l->par, flags, sizeof flags);
  fprintf(f, "    {");
  for (int place = 1; (column = tune_column(place)); place++) {
    fprintf(f, "%s\"%s\": ", place > 1 ? ", " : "", column->key);
    write_json_value(column, &l->par, f);
  }
  fprintf(f, ",\n     \"iteration_time\": %.17g, \"flops_per_device\": %.17g, "
             "\"memory_bytes\": %.0f, \"bubble_fraction\": %.17g, \"traffic_bytes\": %.0f,\n",
          l->iteration, l->flops_per_device, l->memory, l->bubble, l->traffic);
  if (l->par.ep > 1) fprintf(f, "     \"ep\": %d,\n", l->par.ep);
  if (l->without >= 0)
    write_other_json(t, "without_distributed_optimizer", &t->layouts[l->without], 1, f);
  if (l->unrecomputed >= 0)
    write_other_json(t, "with_recompute_none", &t->layouts[l->unrecomputed], 0, f);
  if (l->single >= 0) write_other_json(t, "with_ep_1", &t->layouts[l->single], 0, f);
  fprintf(f, "     \"flags\": %s}", escape(ESC_JSON, flags, flags_json, sizeof flags_json));
}

void tune_write_json(const Tune *t, FILE *f) {
  int count[LOST_REASONS];
  const TuneLayout *first[LOST_REASONS];
  losers(t, count, first);
  fprintf(f, "{\n  \"model\": ");
  escape_write(ESC_JSON, t->model_file, f);
  fprintf(f, ", \"devices\": %d, \"machine\": ", t->devices);
  escape_write(ESC_JSON, t->machine.name, f);
  fprintf(f, ", \"memory_capacity\": %.0f, \"gbs\": %d,\n", t->machine.memory_bytes, t->gbs);
  fprintf(f, "  \"seconds\": %.6g, \"layouts\": %d, \"refused\": %d,\n  \"best\": [\n", t->seconds,
          t->count, t->refused);
  for (int i = 0; i < best_count(t); i++) {
    write_layout_json(t, &t->layouts[i], f);
    fprintf(f, "%s\n", i + 1 < best_count(t) ? "," : "");
  }
  fprintf(f, "  ],\n  \"lost\": {");
  for (int k = LOST_MEMORY; k < LOST_REASONS; k++)
    fprintf(f, "\"%s\": %d%s", tune_loss_name((TuneLoss)k), count[k],
            k + 1 < LOST_REASONS ? ", " : "");
  fprintf(f, "}\n}\n");
}
