/* test_schedule_io.c: the text and CSV forms of schedules (round trips, hand-written input, a plan
 * printed with other sections around the schedule, malformed input with file:line:column), and the
 * trace and SVG writers. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "schedule/schedule.h"
#include "schedule/simulate.h"

typedef struct {
  const char *name;
  int pp, vpp, m, options;
} Layout;

static const Layout layouts[] = {{"gpipe", 4, 1, 6, 0},        {"1f1b", 4, 1, 8, LOWER_TIED_EMBEDDING},
                                 {"interleaved", 4, 2, 8, 0},  {"interleaved", 2, 3, 4, LOWER_TIED_EMBEDDING},
                                 {"interleaved", 1, 3, 3, 0},  {"1f1b", 8, 1, 3, 0},
                                 {"interleaved", 16, 2, 32, 0}};

static int lowered(const Layout *l, Schedule *s) {
  Diag d;
  if (schedule_generate(l->name, l->pp, l->vpp, l->m, s, &d)) {
    CHECK(0, "%s", d.msg);
    return -1;
  }
  lower_schedule(s, l->options);
  return 0;
}

static int same_schedule(const Schedule *a, const Schedule *b) {
  if (a->pp != b->pp || a->vpp != b->vpp || a->stages != b->stages || a->microbatches != b->microbatches) return 0;
  for (int r = 0; r < a->pp; r++) {
    if (a->rank[r].count != b->rank[r].count) return 0;
    for (int i = 0; i < a->rank[r].count; i++) {
      const Action *x = &a->rank[r].action[i], *y = &b->rank[r].action[i];
      if (x->kind != y->kind || x->joined != y->joined || x->stage != y->stage || x->microbatch != y->microbatch ||
          x->peer != y->peer)
        return 0;
    }
  }
  return 1;
}

typedef void (*Writer)(const Schedule *s, FILE *f, int options);
typedef int (*Reader)(const char *name, const char *text, size_t len, Schedule *s, Diag *d);

/* Writes s with `write`, reads it back with `read` into out; returns 0 when that worked. */
static int round_trip(const Schedule *s, Writer write, int options, Reader read, Schedule *out) {
  char *text = NULL;
  size_t len = 0;
  Diag d;
  FILE *f = open_memstream(&text, &len);
  write(s, f, options);
  fclose(f);
  int status = read("round-trip", text, len, out, &d);
  CHECK(status == 0, "reading back: %s", d.msg);
  free(text);
  return status;
}

static void test_text_round_trip(void) {
  for (unsigned k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    Schedule s, back;
    if (lowered(&layouts[k], &s)) continue;
    if (round_trip(&s, schedule_write_text, 0, schedule_read_text, &back) == 0) {
      CHECK(same_schedule(&s, &back), "%s pp %d vpp %d m %d: the text form reads back differently", layouts[k].name,
            layouts[k].pp, layouts[k].vpp, layouts[k].m);
      schedule_free(&back);
    }
    schedule_free(&s);
  }
}

/* The compute-only text form lowers to the same plan. */
static void test_compute_only_text_lowers_the_same(void) {
  for (unsigned k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    Schedule s, back;
    if (lowered(&layouts[k], &s)) continue;
    if (round_trip(&s, schedule_write_text, WRITE_COMPUTE_ONLY, schedule_read_text, &back) == 0) {
      CHECK(!schedule_has_p2p(&back), "compute-only form has transfers");
      lower_schedule(&back, layouts[k].options);
      CHECK(same_schedule(&s, &back), "%s pp %d: lowering the compute-only form gives another plan", layouts[k].name,
            layouts[k].pp);
      schedule_free(&back);
    }
    schedule_free(&s);
  }
}

static void test_csv_round_trip(void) {
  for (unsigned k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    Schedule s, back;
    if (lowered(&layouts[k], &s)) continue;
    if (round_trip(&s, schedule_csv_write, 0, schedule_csv_read, &back) == 0) {
      CHECK(same_schedule(&s, &back), "%s pp %d: the CSV form reads back differently", layouts[k].name, layouts[k].pp);
      schedule_free(&back);
    }
    if (round_trip(&s, schedule_csv_write, WRITE_COMPUTE_ONLY, schedule_csv_read, &back) == 0) {
      lower_schedule(&back, layouts[k].options);
      CHECK(same_schedule(&s, &back), "%s pp %d: the compute-only CSV lowers to another plan", layouts[k].name,
            layouts[k].pp);
      schedule_free(&back);
    }
    schedule_free(&s);
  }
}

static int read_text(const char *text, Schedule *s, Diag *d) {
  return schedule_read_text("t.txt", text, strlen(text), s, d);
}

/* Ranges, comments, continuation lines, groups; a plan printed around the schedule block. */
static void test_hand_written_text(void) {
  Schedule s, generated;
  ScheduleFault f;
  Diag d;
  const char *text = "# GPipe on two ranks, written by hand\n"
                     "rank 0: 0F0..3   # all forwards\n"
                     "        0B0..3\n"
                     "rank 1: 1F0 1F1 1F2\t1F3 1B0..3\n";
  if (read_text(text, &s, &d)) {
    CHECK(0, "%s", d.msg);
    return;
  }
  CHECK(s.pp == 2 && s.vpp == 1 && s.microbatches == 4 && s.rank[0].count == 8, "pp %d vpp %d m %d count %d", s.pp,
        s.vpp, s.microbatches, s.rank[0].count);
  CHECK(schedule_generate("gpipe", 2, 1, 4, &generated, &d) == 0, "%s", d.msg);
  lower_schedule(&s, 0);
  lower_schedule(&generated, 0);
  CHECK(same_schedule(&s, &generated), "the hand-written GPipe lowers differently from the generated one");
  CHECK(validate_schedule(&s, &f) == 0, "%s", f.message);
  schedule_free(&s);
  schedule_free(&generated);

  const char *plan = "plan: gpt, pp 2\nmemory: rank 0: 1 GB\nschedule: 1f1b\n"
                     "schedule 1f1b pp=2 vpp=1 microbatches=2 {\n"
                     "rank 0: 0F0 0SEND_F0 0F1 {0SEND_F1 0RECV_B0} 0B0 0RECV_B1 0B1 0REDUCE_GRAD STEP\n"
                     "rank 1: 1RECV_F0 1F0 {1RECV_F1} 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1REDUCE_GRAD STEP\n"
                     "}\ncollectives: none }{ 0X\n";
  if (read_text(plan, &s, &d)) {
    CHECK(0, "plan text: %s", d.msg);
  } else {
    CHECK(s.pp == 2 && s.microbatches == 2, "pp %d", s.pp);
    CHECK(s.rank[0].action[3].kind == ACTION_SEND_F && s.rank[0].action[4].joined == 1, "group read");
    CHECK(validate_schedule(&s, &f) == 0, "%s", f.message);
    schedule_free(&s);
  }
}

static void expect_error(Reader read, const char *text, size_t len, const char *expected) {
  Schedule s;
  Diag d;
  if (read("t.txt", text, len, &s, &d) == 0) {
    CHECK(0, "'%s' was accepted", text);
    schedule_free(&s);
    return;
  }
  CHECK(strncmp(d.msg, expected, strlen(expected)) == 0 && !strchr(d.msg, '\n'), "'%s': got '%s', expected '%s...'",
        text, d.msg, expected);
}

static void test_malformed_text(void) {
  static const char *const cases[][2] = {
      {"rank 0: 0F0 0X1\n", "t.txt:1:13: expected an action such as 0F3, '{' or 'rank N:', found '0X1'"},
      {"rank 0: 0F0\nrank 2: 2F0\n", "t.txt:2:1: expected 'rank 1:' here"},
      {"rank 0: {0F0}\n",
       "t.txt:1:10: expected a SEND_F, RECV_F, SEND_B or RECV_B action or '}' in this group, found '0F0}'"},
      {"rank 0: 0F0 {}\n", "t.txt:1:14: empty group"},
      {"rank 0: 0F0 {0SEND_F0\n", "t.txt:2:1: expected a SEND_F"},
      {"rank 0:\n  0F5..3\n", "t.txt:2:3: the range runs backwards"},
      {"rank 0: {0SEND_F0..2}\n", "t.txt:1:10: ranges are not allowed inside a group"},
      {"rank 0: 0F99999999999\n", "t.txt:1:9: the microbatch is too large"},
      {"rank 0: 99999999999F0\n", "t.txt:1:9: the stage is too large"},
      {"0F0\n", "t.txt:1:1: expected 'rank 0:' or a 'schedule {' header, found '0F0'"},
      {"rank 0: 0F0 }\n", "t.txt:1:13: expected an action such as 0F3"},
      {"schedule pp=2 {\nrank 0: 0F0\n", "t.txt:1:1: the schedule block opened here is not closed"},
      {"schedule pp=2 {\nrank 0: 0F0\n}\n", "t.txt:1:1: the header says pp=2 but 1 ranks are listed"},
      {"# plan\nschedule size=3 {\n",
       "t.txt:2:10: expected pp=, vpp= or microbatches= in the schedule header, found 'size=3'"},
      {"schedule pp=1 vpp=1 microbatches=2 {\nrank 0: 0F2\n}\n", "t.txt:2:9: the microbatch is too large (at most 1)"},
      {"schedule pp=1 vpp=2 {\nrank 0: 2F0\n}\n", "t.txt:2:9: the stage is too large (at most 1)"},
      {"schedule pp=0 {", "t.txt:1:10: header values must be at least 1"},
      {"schedule vpp=1 {\nrank 0: 1F0\n}\n", "t.txt:1:1: the header says vpp=1, but stage 1 needs vpp 2 on 1 ranks"},
      {"", "t.txt: the schedule lists no ranks"},
      {"rank 0: STEP\n", "t.txt: the schedule has no forward or backward actions"},
      {"rank 0: 0F0 rank\n", "t.txt:1:13: expected an action such as 0F3, '{' or 'rank N:', found 'rank'"},
      {"rank 0: 0F0 0F1\xff\n", "t.txt:1:16: expected an action such as 0F3, '{' or 'rank N:', found byte 0xff"},
  };
  for (unsigned k = 0; k < sizeof cases / sizeof *cases; k++)
    expect_error(schedule_read_text, cases[k][0], strlen(cases[k][0]), cases[k][1]);
  expect_error(schedule_read_text, "rank 0: 0F0\0 0F1\n", 17,
               "t.txt:1:12: expected an action such as 0F3, '{' or 'rank N:', found byte 0x00");
}

static void test_malformed_csv(void) {
  static const char *const cases[][2] = {
      {"0F0,0X1\n", "t.txt:1:5: expected an action such as 0F3, 1SEND_F2 or 0REDUCE_GRAD, found '0X1'"},
      {"0F0,,0B0\n\n1F0,1B0\n", "t.txt:2:1: empty row"},
      {"0F0,0I0,0W0\n",
       "t.txt:1:5: '0I0': split backward (I, W) and FSDP actions (UNSHARD, RESHARD) are not supported"},
      {"0UNSHARD,0F0\n", "t.txt:1:1: '0UNSHARD': split backward"},
      {"", "t.txt: the CSV file is empty"},
      {"STEP\n", "t.txt: the schedule has no forward or backward actions"},
      {"0F0, 0F1..3\n", "t.txt:1:6: expected an action"},
  };
  for (unsigned k = 0; k < sizeof cases / sizeof *cases; k++)
    expect_error(schedule_csv_read, cases[k][0], strlen(cases[k][0]), cases[k][1]);
}

/* PyTorch's CSV as it writes compute-only orders: empty cells for idle steps, quoted cells allowed. */
static void test_csv_with_idle_cells(void) {
  const char *csv = "0F0,0F1,,,0B0,,0B1\n,1F0,1B0,1F1,,1B1,\n";
  Schedule s;
  ScheduleFault f;
  Diag d;
  if (schedule_csv_read("t.csv", csv, strlen(csv), &s, &d)) {
    CHECK(0, "%s", d.msg);
    return;
  }
  CHECK(s.pp == 2 && s.rank[0].count == 4 && s.rank[1].count == 4, "pp %d", s.pp);
  lower_schedule(&s, 0);
  CHECK(validate_schedule(&s, &f) == 0, "%s", f.message);
  schedule_free(&s);
}

static void test_read_action(void) {
  static const struct {
    const char *text;
    int ok;
    ActionKind kind;
    int stage, microbatch;
  } cases[] = {{"3F12", 1, ACTION_F, 3, 12},
               {"0SEND_B7", 1, ACTION_SEND_B, 0, 7},
               {"11REDUCE_GRAD", 1, ACTION_REDUCE_GRAD, 11, -1},
               {"5EMBED_REDUCE", 1, ACTION_EMBED_REDUCE, 5, -1},
               {"STEP", 1, ACTION_STEP, -1, -1},
               {"3F", 0, 0, 0, 0},
               {"F3", 0, 0, 0, 0},
               {"3F1..2", 0, 0, 0, 0},
               {"3F1 ", 0, 0, 0, 0},
               {"", 0, 0, 0, 0},
               {"0RECV_F1x", 0, 0, 0, 0}};
  for (unsigned k = 0; k < sizeof cases / sizeof *cases; k++) {
    Action a;
    int ok = schedule_read_action(cases[k].text, strlen(cases[k].text), &a) == 0;
    CHECK(ok == cases[k].ok, "'%s': read %d", cases[k].text, ok);
    if (ok && cases[k].ok) {
      char name[64];
      schedule_action_name(&a, name, sizeof name);
      CHECK(a.kind == cases[k].kind && a.stage == cases[k].stage && a.microbatch == cases[k].microbatch &&
                !strcmp(name, cases[k].text),
            "'%s': kind %d stage %d mb %d, named %s", cases[k].text, a.kind, a.stage, a.microbatch, name);
    }
  }
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++) n++;
  return n;
}

static int simulated(const Layout *l, Schedule *s, Timeline *t) {
  Costs c;
  Diag d;
  if (lowered(l, s)) return -1;
  simulate_costs_unit(&c, s->stages);
  int status = simulate_schedule(s, &c, t, &d);
  CHECK(status == 0, "%s", d.msg);
  simulate_costs_free(&c);
  return status;
}

static void test_trace(void) {
  Schedule s;
  Timeline t;
  char *text = NULL;
  size_t len = 0;
  if (simulated(&layouts[2], &s, &t)) return;
  FILE *f = open_memstream(&text, &len);
  timeline_trace_write(&s, &t, f);
  fclose(f);
  int actions = 0;
  for (int r = 0; r < s.pp; r++) actions += s.rank[r].count;
  CHECK(strncmp(text, "{\"traceEvents\":[", 16) == 0, "starts with %.20s", text);
  CHECK(count(text, "\"ph\":\"X\"") == actions, "%d complete events for %d actions", count(text, "\"ph\":\"X\""),
        actions);
  CHECK(count(text, "\"name\":\"thread_name\"") == 4 * s.pp, "thread names");
  CHECK(strstr(text, "{\"name\":\"4F0\",\"cat\":\"forward\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":") != NULL,
        "4F0 on rank 0");
  free(text);
  simulate_timeline_free(&t);
  schedule_free(&s);
}

static void test_svg(void) {
  Schedule s;
  Timeline t;
  char *text = NULL;
  size_t len = 0;
  if (simulated(&layouts[2], &s, &t)) return;
  FILE *f = open_memstream(&text, &len);
  timeline_svg_write(&s, &t, f);
  fclose(f);
  int compute = 0;
  for (int r = 0; r < s.pp; r++)
    for (int i = 0; i < s.rank[r].count; i++) compute += schedule_is_compute(s.rank[r].action[i].kind);
  CHECK(strncmp(text, "<svg ", 5) == 0 && strstr(text, "</svg>\n"), "an svg element");
  CHECK(count(text, "<rect") >= compute + s.pp, "%d rects for %d compute actions", count(text, "<rect"), compute);
  CHECK(count(text, "<text") >= compute, "labels");
  CHECK(strstr(text, "forward, chunk 1") && strstr(text, "backward, chunk 0") && strstr(text, "idle (bubble)"),
        "legend");
  free(text);
  simulate_timeline_free(&t);
  schedule_free(&s);
}

/* Costs: a slow link shows up in the iteration time and transfers take their time. */
static void test_costs(void) {
  Schedule s;
  Timeline t;
  Costs c;
  Diag d;
  if (lowered(&layouts[1], &s)) return;
  simulate_costs_unit(&c, s.stages);
  for (int i = 0; i < s.stages; i++) {
    c.stage[i].send_forward = c.stage[i].send_backward = 0.5;
    c.stage[i].activation_bytes = 1000;
    c.stage[i].reduce = 4;
  }
  c.optimizer = 1;
  c.embed_reduce = 2;
  c.unit = 0;
  CHECK(simulate_schedule(&s, &c, &t, &d) == 0, "%s", d.msg);
  CHECK(t.iteration > 33 + 3 * 0.5 * 2, "iteration %g with slow links", t.iteration);
  CHECK(t.peak_activation_bytes[0] == 4000 && t.peak_activation_bytes[3] == 1000, "bytes %g %g",
        t.peak_activation_bytes[0], t.peak_activation_bytes[3]);
  for (int i = 0; i < s.rank[0].count; i++)
    if (s.rank[0].action[i].kind == ACTION_SEND_F)
      CHECK(t.span[0][i].end - t.span[0][i].start == 0.5, "a send takes its time");
  simulate_timeline_free(&t);
  c.stages = 3;
  CHECK(simulate_schedule(&s, &c, &t, &d) == -1 && strstr(d.msg, "3 stages"), "costs for another number of stages: %s",
        d.msg);
  simulate_costs_free(&c);
  schedule_free(&s);
}

int main(void) {
  RUN(test_text_round_trip);
  RUN(test_compute_only_text_lowers_the_same);
  RUN(test_csv_round_trip);
  RUN(test_hand_written_text);
  RUN(test_malformed_text);
  RUN(test_malformed_csv);
  RUN(test_csv_with_idle_cells);
  RUN(test_read_action);
  RUN(test_trace);
  RUN(test_svg);
  RUN(test_costs);
  TEST_EXIT();
}
