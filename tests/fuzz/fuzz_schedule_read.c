/* fuzz_schedule_read.c: a libFuzzer target for the schedule readers: any input, read as the text form
 * and as CSV, must give a schedule or one diagnostic, never a crash; a schedule read must write and read
 * back identically, and small ones must go through lowering, validation and (when valid) simulation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"
#include "schedule/simulate.h"

static int same_action(const Action *x, const Action *y) {
  return x->kind == y->kind && x->joined == y->joined && x->stage == y->stage && x->microbatch == y->microbatch &&
         x->peer == y->peer;
}

static int same(const Schedule *a, const Schedule *b) {
  if (a->pp != b->pp || a->vpp != b->vpp || a->microbatches != b->microbatches) return 0;
  for (int r = 0; r < a->pp; r++) {
    if (a->rank[r].count != b->rank[r].count) return 0;
    for (int i = 0; i < a->rank[r].count; i++)
      if (!same_action(&a->rank[r].action[i], &b->rank[r].action[i])) return 0;
  }
  return 1;
}

static void text_round_trip(const Schedule *s) {
  char *text = NULL;
  size_t len = 0;
  Schedule back;
  Diag d;
  FILE *f = open_memstream(&text, &len);
  schedule_write_text(s, f, 0);
  fclose(f);
  if (schedule_read_text("written", text, len, &back, &d) != 0 || !same(s, &back)) {
    fprintf(stderr, "the text form does not read back: %s\n%s", d.msg, text);
    abort();
  }
  schedule_free(&back);
  free(text);
}

static void lower_validate_simulate(Schedule *s) {
  long actions = 0;
  for (int r = 0; r < s->pp; r++) actions += s->rank[r].count;
  if ((long)s->stages * s->microbatches > 4096 || actions > 20000) return;
  ScheduleFault fault;
  lower_schedule(s, LOWER_TIED_EMBEDDING);
  if (validate_schedule(s, &fault) != 0) return;
  Costs costs;
  Timeline t;
  Diag d;
  simulate_costs_unit(&costs, s->stages);
  if (simulate_schedule(s, &costs, &t, &d) != 0) {
    fprintf(stderr, "a valid schedule does not simulate: %s\n", d.msg);
    abort();
  }
  simulate_timeline_free(&t);
  simulate_costs_free(&costs);
}

static void exercise(Schedule *s) {
  text_round_trip(s);
  lower_validate_simulate(s);
  schedule_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Schedule s;
  Diag d;
  if (schedule_read_text("fuzz.txt", (const char *)data, size, &s, &d) == 0) exercise(&s);
  else if (strchr(d.msg, '\n')) abort();
  if (schedule_csv_read("fuzz.csv", (const char *)data, size, &s, &d) == 0) exercise(&s);
  else if (strchr(d.msg, '\n')) abort();
  return 0;
}
