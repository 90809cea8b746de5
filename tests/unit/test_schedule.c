/* test_schedule.c: the schedule generators: Megatron-LM's interleaved order against an independent
 * transcription, the unit-cost bubble and peak in-flight formulas, edge cases and refusals, and an
 * exhaustive sweep of every schedule for pp <= 8, vpp <= 4, m <= 32 through lowering, validation and
 * simulation. */
#include <string.h>
#include <time.h>

#include "check.h"
#include "schedule/schedule.h"
#include "schedule/simulate.h"

static const char *const names[] = {"gpipe", "1f1b", "interleaved"};

/* Generates, lowers, validates and simulates with unit costs; returns 0 when all of it succeeded. */
static int run_all(const char *name, int pp, int vpp, int m, int options, Schedule *s, Timeline *t, Diag *d) {
  ScheduleFault fault;
  Costs costs;
  if (schedule_generate(name, pp, vpp, m, s, d)) return -1;
  lower_schedule(s, options);
  if (validate_schedule(s, &fault)) {
    snprintf(d->msg, sizeof d->msg, "%s", fault.message);
    schedule_free(s);
    return -1;
  }
  simulate_costs_unit(&costs, s->stages);
  int status = simulate_schedule(s, &costs, t, d);
  simulate_costs_free(&costs);
  if (status) schedule_free(s);
  return status;
}

static int min_int(int a, int b) { return a < b ? a : b; }

static void test_gpipe_and_1f1b_bubble_and_peaks(void) {
  for (int which = 0; which < 2; which++)
    for (int pp = 1; pp <= 8; pp++)
      for (int m = 1; m <= 32; m++) {
        Schedule s;
        Timeline t;
        Diag d;
        if (run_all(names[which], pp, 1, m, 0, &s, &t, &d)) {
          CHECK(0, "%s pp %d m %d: %s", names[which], pp, m, d.msg);
          continue;
        }
        double expected = (double)(pp - 1) / m;
        CHECK(t.bubble_fraction == expected, "%s pp %d m %d: bubble %.17g, expected (pp-1)/m = %.17g", names[which], pp,
              m, t.bubble_fraction, expected);
        for (int r = 0; r < pp; r++) {
          int peak = which == 0 ? m : min_int(pp - r, m);
          CHECK(t.peak_inflight[r] == peak, "%s pp %d m %d rank %d: peak in-flight %d, expected %d", names[which], pp,
                m, r, t.peak_inflight[r], peak);
        }
        simulate_timeline_free(&t);
        schedule_free(&s);
      }
}

/* Interleaved: bubble (pp-1)/(vpp·m); the peak is the warm-up plus the one forward before the first
 * backward, in (stage, microbatch) pairs. */
static void test_interleaved_bubble_and_peaks(void) {
  for (int pp = 1; pp <= 8; pp++)
    for (int vpp = 2; vpp <= 4; vpp++)
      for (int m = pp; m <= 32; m += pp) {
        Schedule s;
        Timeline t;
        Diag d;
        if (run_all("interleaved", pp, vpp, m, 0, &s, &t, &d)) {
          CHECK(0, "interleaved pp %d vpp %d m %d: %s", pp, vpp, m, d.msg);
          continue;
        }
        double expected = (double)(pp - 1) / (vpp * m);
        CHECK(t.bubble_fraction == expected, "interleaved pp %d vpp %d m %d: bubble %.17g, expected %.17g", pp, vpp, m,
              t.bubble_fraction, expected);
        for (int r = 0; r < pp; r++) {
          int peak = min_int(2 * (pp - r - 1) + (vpp - 1) * pp + 1, vpp * m);
          CHECK(t.peak_inflight[r] == peak, "interleaved pp %d vpp %d m %d rank %d: peak %d pairs, expected %d", pp,
                vpp, m, r, t.peak_inflight[r], peak);
          CHECK(t.peak_inflight_microbatches[r] == (double)peak / vpp, "rank %d: microbatch equivalents %g", r,
                t.peak_inflight_microbatches[r]);
        }
        simulate_timeline_free(&t);
        schedule_free(&s);
      }
}

/* The Megatron-LM order written out plainly: forwards take microbatch groups of pp through chunk 0,
 * then chunk 1, ...; backwards the same with the chunks reversed; warm-up, then one forward and one
 * backward, then the rest of the backwards. */
typedef struct {
  int chunk, microbatch;
} Pass;

static void expected_passes(int pp, int vpp, int m, int backward, Pass *out) {
  int n = 0;
  for (int group = 0; group < m / pp; group++)
    for (int c = 0; c < vpp; c++)
      for (int i = 0; i < pp; i++) out[n++] = (Pass){backward ? vpp - 1 - c : c, group * pp + i};
}

static void test_megatron_interleaved_order(void) {
  static const int cases[][3] = {{4, 2, 8}, {4, 2, 4}, {2, 3, 6}, {3, 2, 9}, {8, 4, 16}, {4, 3, 12}, {5, 2, 5}};
  for (unsigned k = 0; k < sizeof cases / sizeof *cases; k++) {
    int pp = cases[k][0], vpp = cases[k][1], m = cases[k][2], total = vpp * m;
    Pass forward[256], backward[256];
    Schedule s;
    Diag d;
    expected_passes(pp, vpp, m, 0, forward);
    expected_passes(pp, vpp, m, 1, backward);
    if (schedule_generate("interleaved", pp, vpp, m, &s, &d)) {
      CHECK(0, "%s", d.msg);
      continue;
    }
    for (int r = 0; r < pp; r++) {
      int warmup = 2 * (pp - r - 1) + (vpp - 1) * pp, f = 0, b = 0, step = 0;
      if (warmup > total) warmup = total;
      CHECK(s.rank[r].count == 2 * total, "pp %d vpp %d m %d rank %d: %d actions", pp, vpp, m, r, s.rank[r].count);
      for (int i = 0; i < 2 * total && i < s.rank[r].count; i++) {
        /* the i-th action: warm-up forwards, then forward/backward pairs, then backwards */
        int is_forward = i < warmup || (f < total && i >= warmup && (i - warmup) % 2 == 0);
        if (f == total) is_forward = 0;
        Pass p = is_forward ? forward[f++] : backward[b++];
        const Action *a = &s.rank[r].action[step++];
        CHECK(a->kind == (is_forward ? ACTION_F : ACTION_B) && a->stage == p.chunk * pp + r &&
                  a->microbatch == p.microbatch,
              "pp %d vpp %d m %d rank %d step %d: got kind %d stage %d mb %d, expected %s stage %d mb %d", pp, vpp, m,
              r, i, a->kind, a->stage, a->microbatch, is_forward ? "F" : "B", p.chunk * pp + r, p.microbatch);
      }
    }
    schedule_free(&s);
  }
}

static int same_action(const Action *x, const Action *y) {
  return x->kind == y->kind && x->joined == y->joined && x->stage == y->stage && x->microbatch == y->microbatch &&
         x->peer == y->peer;
}

static int same_actions(const Schedule *a, const Schedule *b) {
  if (a->pp != b->pp || a->vpp != b->vpp || a->microbatches != b->microbatches) return 0;
  for (int r = 0; r < a->pp; r++) {
    if (a->rank[r].count != b->rank[r].count) return 0;
    for (int i = 0; i < a->rank[r].count; i++)
      if (!same_action(&a->rank[r].action[i], &b->rank[r].action[i])) return 0;
  }
  return 1;
}

static void test_interleaved_with_one_chunk_is_1f1b(void) {
  for (int pp = 1; pp <= 6; pp++)
    for (int m = 1; m <= 12; m++) {
      Schedule a, b;
      Diag d;
      CHECK(schedule_generate("interleaved", pp, 1, m, &a, &d) == 0, "%s", d.msg);
      CHECK(schedule_generate("1f1b", pp, 1, m, &b, &d) == 0, "%s", d.msg);
      CHECK(same_actions(&a, &b), "pp %d m %d: interleaved with vpp 1 differs from 1f1b", pp, m);
      schedule_free(&a);
      schedule_free(&b);
    }
}

static int count_kind(const Schedule *s, int rank, ActionKind kind) {
  int n = 0;
  for (int i = 0; i < s->rank[rank].count; i++) n += s->rank[rank].action[i].kind == kind;
  return n;
}

/* pp = 1: every stage on one rank, nothing sent, no bubble. */
static void test_one_rank(void) {
  for (int k = 0; k < 3; k++)
    for (int vpp = 1; vpp <= (k == 2 ? 4 : 1); vpp++) {
      Schedule s;
      Timeline t;
      Diag d;
      if (run_all(names[k], 1, vpp, 5, LOWER_TIED_EMBEDDING, &s, &t, &d)) {
        CHECK(0, "%s pp 1 vpp %d: %s", names[k], vpp, d.msg);
        continue;
      }
      for (ActionKind kind = ACTION_SEND_F; kind <= ACTION_RECV_B; kind++)
        CHECK(count_kind(&s, 0, kind) == 0, "%s pp 1: a send or receive on a single rank", names[k]);
      CHECK(count_kind(&s, 0, ACTION_EMBED_REDUCE) == 0, "pp 1: the tied embedding needs no all-reduce");
      CHECK(count_kind(&s, 0, ACTION_REDUCE_GRAD) == vpp, "pp 1: one REDUCE_GRAD per stage");
      CHECK(t.bubble_fraction == 0, "%s pp 1: bubble %g", names[k], t.bubble_fraction);
      simulate_timeline_free(&t);
      schedule_free(&s);
    }
}

/* pp = 2: both neighbours of a rank are the same rank; activations and gradients share the pair. */
static void test_two_ranks(void) {
  for (int k = 0; k < 3; k++) {
    Schedule s;
    Timeline t;
    Diag d;
    int vpp = k == 2 ? 3 : 1;
    if (run_all(names[k], 2, vpp, 4, LOWER_TIED_EMBEDDING, &s, &t, &d)) {
      CHECK(0, "%s pp 2: %s", names[k], d.msg);
      continue;
    }
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < s.rank[r].count; i++) {
        const Action *a = &s.rank[r].action[i];
        if (schedule_is_p2p(a->kind) || a->kind == ACTION_EMBED_REDUCE)
          CHECK(a->peer == 1 - r, "%s pp 2 rank %d step %d: peer %d", names[k], r, i, a->peer);
      }
    CHECK(count_kind(&s, 0, ACTION_EMBED_REDUCE) == 1 && count_kind(&s, 1, ACTION_EMBED_REDUCE) == 1,
          "pp 2: the first and last stage each take part in the tied-embedding all-reduce once");
    CHECK(k == 2 || count_kind(&s, 0, ACTION_SEND_F) == 4, "pp 2: rank 0 sends 4 activations");
    simulate_timeline_free(&t);
    schedule_free(&s);
  }
}

/* m < pp and m = pp: fewer microbatches than ranks, and exactly as many. */
static void test_few_microbatches(void) {
  for (int k = 0; k < 3; k++)
    for (int m = 1; m <= 4; m++) {
      Schedule s;
      Timeline t;
      Diag d;
      int vpp = k == 2 ? 2 : 1, accepted = k < 2 || m == 4;
      int status = run_all(names[k], 4, vpp, m, 0, &s, &t, &d);
      CHECK(status == (accepted ? 0 : -1), "%s pp 4 m %d: status %d (%s)", names[k], m, status, status ? d.msg : "");
      if (status) continue;
      double expected = (double)3 / (vpp * m);
      CHECK(t.bubble_fraction == expected, "%s pp 4 m %d: bubble %g, expected %g", names[k], m, t.bubble_fraction,
            expected);
      simulate_timeline_free(&t);
      schedule_free(&s);
    }
}

static void expect_refusal(const char *name, int pp, int vpp, int m, const char *fragment) {
  Schedule s;
  Diag d;
  int status = schedule_generate(name, pp, vpp, m, &s, &d);
  CHECK(status == -1, "%s pp %d vpp %d m %d: accepted", name, pp, vpp, m);
  if (status == 0) schedule_free(&s);
  else CHECK(strstr(d.msg, fragment) && !strchr(d.msg, '\n'), "%s: message '%s' lacks '%s'", name, d.msg, fragment);
}

static void test_refusals(void) {
  expect_refusal("interleaved", 4, 2, 6, "interleaved needs the number of microbatches (6) to be a multiple of pp (4)");
  expect_refusal("interleaved", 4, 2, 2, "use 4 microbatches");
  expect_refusal("gpipe", 4, 2, 8, "gpipe runs one chunk per rank");
  expect_refusal("1f1b", 4, 3, 8, "use --schedule interleaved");
  expect_refusal("zigzag", 4, 1, 8, "unknown schedule 'zigzag'; use gpipe, 1f1b, interleaved, or a schedule file");
  expect_refusal("no/such/file.txt", 4, 1, 8, "schedule file no/such/file.txt: cannot open it");
  expect_refusal("1f1b", 0, 1, 8, "pp 0 is out of range");
  expect_refusal("1f1b", 4, 1, 0, "0 microbatches is out of range");
}

/* Every schedule for pp <= 8, vpp <= 4, m <= 32: accepted ones pass lowering (with and without the tied
 * embedding), validation and simulation; refused ones are exactly those the documentation names. */
static void test_exhaustive(void) {
  int accepted = 0, refused = 0;
  for (int k = 0; k < 3; k++)
    for (int pp = 1; pp <= 8; pp++)
      for (int vpp = 1; vpp <= 4; vpp++)
        for (int m = 1; m <= 32; m++)
          for (int tied = 0; tied < 2; tied++) {
            Schedule s;
            Timeline t;
            Diag d;
            int should_accept = k == 2 ? vpp == 1 || m % pp == 0 : vpp == 1;
            int status = run_all(names[k], pp, vpp, m, tied ? LOWER_TIED_EMBEDDING : 0, &s, &t, &d);
            if (status == 0) {
              accepted++;
              CHECK(should_accept, "%s pp %d vpp %d m %d: accepted", names[k], pp, vpp, m);
              CHECK(t.iteration > 0 && t.bubble_fraction >= 0, "%s pp %d vpp %d m %d: iteration %g", names[k], pp, vpp,
                    m, t.iteration);
              simulate_timeline_free(&t);
              schedule_free(&s);
            } else {
              refused++;
              CHECK(!should_accept, "%s pp %d vpp %d m %d tied %d: %s", names[k], pp, vpp, m, tied, d.msg);
              CHECK(strstr(d.msg, "multiple of pp") || strstr(d.msg, "runs one chunk per rank"), "refusal '%s'", d.msg);
            }
          }
  printf("INFO exhaustive: %d schedules accepted and passed, %d refused\n", accepted, refused);
}

/* The 1-trillion-parameter layout: pp 64, vpp 2, 512 microbatches. */
static void test_trillion_layout_speed(void) {
  struct timespec t0, t1;
  Schedule s;
  Timeline t;
  Diag d;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int status = run_all("interleaved", 64, 2, 512, LOWER_TIED_EMBEDDING, &s, &t, &d);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  CHECK(status == 0, "%s", d.msg);
  if (status) return;
  long actions = 0;
  for (int r = 0; r < s.pp; r++) actions += s.rank[r].count;
  printf("INFO pp 64 vpp 2 m 512: generate, lower, validate, simulate %ld actions in %.3f s; bubble %.6f\n", actions,
         seconds, t.bubble_fraction);
  CHECK(t.bubble_fraction == 63.0 / 1024, "bubble %.17g", t.bubble_fraction);
  CHECK(seconds < 5, "took %.2f s", seconds);
  simulate_timeline_free(&t);
  schedule_free(&s);
}

/* The index of rank r's last action of `kind` (-1 if none), and of its first REDUCE_GRAD. */
static int last_of(const Schedule *s, int r, ActionKind kind) {
  int last = -1;
  for (int i = 0; i < s->rank[r].count; i++)
    if (s->rank[r].action[i].kind == kind) last = i;
  return last;
}

static int first_of(const Schedule *s, int r, ActionKind kind) {
  for (int i = 0; i < s->rank[r].count; i++)
    if (s->rank[r].action[i].kind == kind) return i;
  return -1;
}

/* --grad-reduce after: every rank's REDUCE_GRADs (one per chunk) come after its last backward; without
 * it an interleaved rank reduces its later chunk before its last backward (that of its first chunk). */
static void test_reduce_after_the_backward(void) {
  for (int after = 0; after < 2; after++) {
    Schedule s;
    Timeline t;
    Diag d;
    if (run_all("interleaved", 4, 2, 8, after ? LOWER_REDUCE_AFTER : 0, &s, &t, &d)) {
      CHECK(0, "after %d: %s", after, d.msg);
      continue;
    }
    for (int r = 0; r < s.pp; r++) {
      int reductions = 0;
      for (int i = 0; i < s.rank[r].count; i++) reductions += s.rank[r].action[i].kind == ACTION_REDUCE_GRAD;
      int first_reduce = first_of(&s, r, ACTION_REDUCE_GRAD), last_backward = last_of(&s, r, ACTION_B);
      CHECK(reductions == 2, "after %d rank %d: %d REDUCE_GRAD, expected 2", after, r, reductions);
      CHECK((first_reduce > last_backward) == after, "after %d rank %d: first REDUCE_GRAD at %d, last backward at %d",
            after, r, first_reduce, last_backward);
    }
    simulate_timeline_free(&t);
    schedule_free(&s);
  }
}

int main(void) {
  RUN(test_gpipe_and_1f1b_bubble_and_peaks);
  RUN(test_interleaved_bubble_and_peaks);
  RUN(test_megatron_interleaved_order);
  RUN(test_interleaved_with_one_chunk_is_1f1b);
  RUN(test_one_rank);
  RUN(test_two_ranks);
  RUN(test_few_microbatches);
  RUN(test_refusals);
  RUN(test_reduce_after_the_backward);
  RUN(test_exhaustive);
  RUN(test_trillion_layout_speed);
  TEST_EXIT();
}
