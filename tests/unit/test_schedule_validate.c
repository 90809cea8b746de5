/* test_schedule_validate.c: validation rejects broken plans and names the rank and step: mutations of
 * valid lowered plans (a dropped receive, two sends swapped, a backward before its forward, a
 * microbatch run twice) at every place they can be made, and hand-written faults (transfers ordered
 * differently on the two ends, a deadlock, misplaced and missing actions). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "schedule/schedule.h"

typedef struct {
  const char *name;
  int pp, vpp, m;
} Layout;

static const Layout layouts[] = {{"1f1b", 4, 1, 8},        {"gpipe", 3, 1, 5}, {"interleaved", 4, 2, 8},
                                 {"interleaved", 2, 3, 4}, {"1f1b", 2, 1, 3},  {"interleaved", 3, 2, 3}};

static int lowered(const Layout *l, Schedule *s) {
  Diag d;
  if (schedule_generate(l->name, l->pp, l->vpp, l->m, s, &d)) {
    CHECK(0, "%s", d.msg);
    return -1;
  }
  lower_schedule(s, LOWER_TIED_EMBEDDING);
  return 0;
}

static void copy_schedule(const Schedule *from, Schedule *to) {
  Diag d;
  schedule_init(to, from->pp, from->vpp, from->microbatches, &d);
  for (int r = 0; r < from->pp; r++)
    for (int i = 0; i < from->rank[r].count; i++) schedule_push(to, r, from->rank[r].action[i]);
}

static void remove_at(ActionList *l, int i) {
  memmove(&l->action[i], &l->action[i + 1], (size_t)(l->count - i - 1) * sizeof *l->action);
  l->count--;
}

static void insert_at(Schedule *s, int rank, int i, Action a) {
  ActionList *l = &s->rank[rank];
  schedule_push(s, rank, a);
  memmove(&l->action[i + 1], &l->action[i], (size_t)(l->count - 1 - i) * sizeof *l->action);
  l->action[i] = a;
}

static int find(const ActionList *l, ActionKind kind, int stage, int microbatch) {
  for (int i = 0; i < l->count; i++)
    if (l->action[i].kind == kind && l->action[i].stage == stage && l->action[i].microbatch == microbatch) return i;
  return -1;
}

static char *action_text(const Action *a, char *buf) {
  schedule_action_name(a, buf, 64);
  return buf;
}

/* The fault must be at (rank, step), one line, naming the action there. */
static void expect_fault(const Schedule *s, int rank, int step, const char *what, const char *name) {
  ScheduleFault f;
  char at[64];
  snprintf(at, sizeof at, "rank %d, step %d: ", rank, step);
  if (validate_schedule(s, &f) == 0) {
    CHECK(0, "%s: accepted", what);
    return;
  }
  CHECK(f.rank == rank && f.step == step, "%s: expected rank %d step %d, got %s", what, rank, step, f.message);
  CHECK(strncmp(f.message, at, strlen(at)) == 0 && !strchr(f.message, '\n'), "%s: message '%s'", what, f.message);
  CHECK(!name || strstr(f.message, name), "%s: message '%s' does not name %s", what, f.message, name);
  CHECK(strstr(f.context, "neighbourhood") && strstr(f.context, "rank 0 |"), "%s: context '%s'", what, f.context);
}

static void test_valid_plans_pass(void) {
  for (unsigned k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    Schedule s;
    ScheduleFault f;
    if (lowered(&layouts[k], &s)) continue;
    CHECK(validate_schedule(&s, &f) == 0, "%s pp %d: %s", layouts[k].name, layouts[k].pp, f.message);
    schedule_free(&s);
  }
}

/* Each receive dropped in turn: its consumer, one step earlier now, has no input. */
static void test_dropped_receive(void) {
  int tried = 0;
  for (unsigned k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    Schedule base;
    if (lowered(&layouts[k], &base)) continue;
    for (int r = 0; r < base.pp; r++)
      for (int i = 0; i < base.rank[r].count; i++) {
        Action a = base.rank[r].action[i];
        if (a.kind != ACTION_RECV_F && a.kind != ACTION_RECV_B) continue;
        Schedule s;
        char name[64];
        copy_schedule(&base, &s);
        int consumer = find(&s.rank[r], a.kind == ACTION_RECV_F ? ACTION_F : ACTION_B, a.stage, a.microbatch);
        Action c = s.rank[r].action[consumer];
        remove_at(&s.rank[r], i);
        expect_fault(&s, r, consumer - 1, "dropped receive", action_text(&c, name));
        tried++;
        schedule_free(&s);
      }
    schedule_free(&base);
  }
  CHECK(tried > 100, "only %d mutations", tried);
}

/* Each pair of consecutive sends on one link swapped: the first now sends what is not yet produced. */
static void test_sends_swapped(void) {
  int tried = 0;
  for (unsigned k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    Schedule base;
    if (lowered(&layouts[k], &base)) continue;
    for (int r = 0; r < base.pp; r++)
      for (int i = 0; i < base.rank[r].count; i++) {
        ActionKind kind = base.rank[r].action[i].kind;
        if (kind != ACTION_SEND_F && kind != ACTION_SEND_B) continue;
        int j = i + 1;
        while (j < base.rank[r].count && base.rank[r].action[j].kind != kind) j++;
        if (j == base.rank[r].count) continue;
        Schedule s;
        char name[64];
        copy_schedule(&base, &s);
        Action first = s.rank[r].action[i], second = s.rank[r].action[j];
        s.rank[r].action[i] = (Action){.kind = second.kind,
                                       .joined = first.joined,
                                       .stage = second.stage,
                                       .microbatch = second.microbatch,
                                       .peer = second.peer};
        s.rank[r].action[j] = (Action){.kind = first.kind,
                                       .joined = second.joined,
                                       .stage = first.stage,
                                       .microbatch = first.microbatch,
                                       .peer = first.peer};
        expect_fault(&s, r, i, "sends swapped", action_text(&second, name));
        tried++;
        schedule_free(&s);
      }
    schedule_free(&base);
  }
  CHECK(tried > 100, "only %d mutations", tried);
}

/* Each backward moved to just before its forward. */
static void test_backward_before_forward(void) {
  int tried = 0;
  for (unsigned k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    Schedule base;
    if (lowered(&layouts[k], &base)) continue;
    for (int r = 0; r < base.pp; r++)
      for (int i = 0; i < base.rank[r].count; i++) {
        Action b = base.rank[r].action[i];
        if (b.kind != ACTION_B) continue;
        Schedule s;
        char name[64];
        copy_schedule(&base, &s);
        int f = find(&s.rank[r], ACTION_F, b.stage, b.microbatch);
        remove_at(&s.rank[r], i);
        insert_at(&s, r, f, b);
        expect_fault(&s, r, f, "backward before forward", action_text(&b, name));
        tried++;
        schedule_free(&s);
      }
    schedule_free(&base);
  }
  CHECK(tried > 100, "only %d mutations", tried);
}

/* Each forward run a second time right after itself. */
static void test_microbatch_twice(void) {
  int tried = 0;
  for (unsigned k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    Schedule base;
    if (lowered(&layouts[k], &base)) continue;
    for (int r = 0; r < base.pp; r++)
      for (int i = 0; i < base.rank[r].count; i++) {
        Action a = base.rank[r].action[i];
        if (a.kind != ACTION_F) continue;
        Schedule s;
        char name[64];
        copy_schedule(&base, &s);
        insert_at(&s, r, i + 1, a);
        expect_fault(&s, r, i + 1, "microbatch run twice", action_text(&a, name));
        CHECK(strstr(name, "F") != NULL, "named %s", name);
        tried++;
        schedule_free(&s);
      }
    schedule_free(&base);
  }
  CHECK(tried > 100, "only %d mutations", tried);
}

static int read_text(const char *text, Schedule *s) {
  Diag d;
  if (schedule_read_text("test.txt", text, strlen(text), s, &d) == 0) return 0;
  CHECK(0, "%s", d.msg);
  return -1;
}

static void expect_text_fault(const char *text, int rank, int step, const char *what, const char *fragment) {
  Schedule s;
  if (read_text(text, &s)) return;
  expect_fault(&s, rank, step, what, fragment);
  schedule_free(&s);
}

/* Each send happens after what it sends exists, but the two ranks order the transfers differently. */
static void test_transfers_in_different_orders(void) {
  expect_text_fault("rank 0: 0F0 0F1 {0SEND_F1 0SEND_F0} {0RECV_B0 0RECV_B1} 0B0 0B1 0REDUCE_GRAD STEP\n"
                    "rank 1: 1RECV_F0 1RECV_F1 1F0 1F1 1B0 1B1 {1SEND_B0 1SEND_B1} 1REDUCE_GRAD STEP\n",
                    0, 2, "transfers in different orders", "order their transfers differently");
}

/* Blocking groups: rank 0 waits to send 0F1 before it receives 0B0's gradient; rank 1 sends that gradient
 * before it receives 0F1's activation. */
static void test_deadlock(void) {
  expect_text_fault("rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0REDUCE_GRAD STEP\n"
                    "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1REDUCE_GRAD STEP\n",
                    0, 3, "deadlock", "deadlock: every rank is blocked; 0SEND_F1 waits for rank 1's 1RECV_F1");
  Schedule s;
  ScheduleFault f;
  if (read_text("rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0REDUCE_GRAD STEP\n"
                "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1REDUCE_GRAD STEP\n",
                &s))
    return;
  validate_schedule(&s, &f);
  CHECK(strstr(f.context, ">0SEND_F1<") && strstr(f.context, ">1SEND_B0<"),
        "context marks where each rank is blocked: %s", f.context);
  schedule_free(&s);
}

static void test_hand_written_faults(void) {
  expect_text_fault("rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE_GRAD STEP\nrank 1: 1RECV_F0 1F0 1B0 1SEND_B0 STEP\n", 1,
                    4, "missing REDUCE_GRAD", "1REDUCE_GRAD");
  expect_text_fault(
      "rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE_GRAD\nrank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD STEP\n", 0, 5,
      "missing STEP", "STEP");
  expect_text_fault(
      "rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 STEP 0REDUCE_GRAD\nrank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD STEP\n", 0,
      4, "STEP before a reduction", "STEP runs before 0REDUCE_GRAD");
  expect_text_fault("rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE_GRAD STEP 0REDUCE_GRAD\n"
                    "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD STEP\n",
                    0, 5, "STEP not last", "not the last action");
  expect_text_fault(
      "rank 0: 0F0 0SEND_F0 0REDUCE_GRAD 0RECV_B0 0B0 STEP\nrank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD STEP\n", 0,
      2, "early REDUCE_GRAD", "runs before the last backward");
  expect_text_fault(
      "rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE_GRAD STEP\nrank 1: 0F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD STEP\n", 1, 0,
      "stage on the wrong rank", "stage 0 runs on rank 0");
  expect_text_fault("rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE_GRAD STEP\nrank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1SEND_F0 "
                    "1REDUCE_GRAD STEP\n",
                    1, 4, "send from the last stage", "no neighbour");
  expect_text_fault("rank 0: 0F0 0RECV_B0 0B0 0REDUCE_GRAD STEP\nrank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD STEP\n",
                    0, 5, "output never sent", "never sent");
  expect_text_fault("rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 0EMBED_REDUCE 0REDUCE_GRAD STEP\n"
                    "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD STEP\n",
                    0, 4, "EMBED_REDUCE without a partner", "no partner 1EMBED_REDUCE");
  Schedule s;
  ScheduleFault f;
  if (read_text("rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 0EMBED_REDUCE 0REDUCE_GRAD STEP\n"
                "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD 1EMBED_REDUCE STEP\n",
                &s) == 0) {
    CHECK(validate_schedule(&s, &f) == 0, "tied embedding by hand: %s", f.message);
    schedule_free(&s);
  }
}

/* A compute-only schedule whose order cannot run: lowering still produces a plan, and validation rejects it. */
static void test_compute_only_cycle(void) {
  Schedule s;
  ScheduleFault f;
  if (read_text("rank 0: 0F0 0B0 0F1 0B1\nrank 1: 1F1 1B1 1F0 1B0\n", &s)) return;
  lower_schedule(&s, 0);
  CHECK(validate_schedule(&s, &f) == -1 && (strstr(f.message, "deadlock") || strstr(f.message, "differently")),
        "cycle: %s", f.message);
  schedule_free(&s);
}

int main(void) {
  RUN(test_valid_plans_pass);
  RUN(test_dropped_receive);
  RUN(test_sends_swapped);
  RUN(test_backward_before_forward);
  RUN(test_microbatch_twice);
  RUN(test_transfers_in_different_orders);
  RUN(test_deadlock);
  RUN(test_hand_written_faults);
  RUN(test_compute_only_cycle);
  TEST_EXIT();
}
