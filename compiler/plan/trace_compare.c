/* trace_compare.c: a planned trace beside a measured one (`plait check PLANNED.json
 * MEASURED.json`): the same schedule, each action's duration in both, and where the iteration's
 * time went in each. */
#include "plan/trace_compare.h"

#include <string.h>

/* The two traces ran the same actions on the same ranks, in the same order. */
static int same_schedule(const Schedule *a, const Schedule *b) {
  if (a->pp != b->pp || a->vpp != b->vpp) return 0;
  for (int r = 0; r < a->pp; r++) {
    if (a->rank[r].count != b->rank[r].count) return 0;
    for (int i = 0; i < a->rank[r].count; i++) {
      const Action *x = &a->rank[r].action[i], *y = &b->rank[r].action[i];
      if (x->kind != y->kind || x->stage != y->stage || x->microbatch != y->microbatch) return 0;
    }
  }
  return 1;
}

static double length(const Span *s) { return s->end - s->start; }

/* Each action's planned and measured duration (ms) and their ratio. */
static void print_actions(const Schedule *s, const Timeline *planned, const Timeline *measured,
                          FILE *f) {
  fprintf(f, "%-5s %-14s %12s %12s %9s\n", "rank", "action", "planned ms", "measured ms",
          "measured/planned");
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++) {
      char name[64];
      schedule_action_name(&s->rank[r].action[i], name, sizeof name);
      double p = length(&planned->span[r][i]) * 1e3, m = length(&measured->span[r][i]) * 1e3;
      fprintf(f, "%-5d %-14s %12.4f %12.4f", r, name, p, m);
      if (p > 0) fprintf(f, " %9.2f\n", m / p);
      else fprintf(f, " %9s\n", "-");
    }
}

/* Per kind of action (forward, backward, transfers, reductions, step), the sums over every rank. */
static void print_kinds(const Schedule *s, const Timeline *planned, const Timeline *measured,
                        FILE *f) {
  double p[ACTION_KINDS] = {0}, m[ACTION_KINDS] = {0};
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++) {
      int k = s->rank[r].action[i].kind;
      p[k] += length(&planned->span[r][i]), m[k] += length(&measured->span[r][i]);
    }
  for (int k = 0; k < ACTION_KINDS; k++) {
    if (p[k] == 0 && m[k] == 0) continue;
    fprintf(f, "total %-14s %12.4f %12.4f", schedule_kind_name((ActionKind)k), p[k] * 1e3,
            m[k] * 1e3);
    if (p[k] > 0) fprintf(f, " %9.2f\n", m[k] / p[k]);
    else fprintf(f, " %9s\n", "-");
  }
}

int trace_compare(const char *planned_path, const char *measured_path, FILE *f, Diag *d) {
  Schedule ps, ms;
  Timeline pt, mt;
  if (trace_read(planned_path, &ps, &pt, d)) return -1;
  if (trace_read(measured_path, &ms, &mt, d)) {
    simulate_timeline_free(&pt);
    schedule_free(&ps);
    return -1;
  }
  int status = same_schedule(&ps, &ms) ? 0
                                       : diag(d,
                                              "%s and %s ran different schedules (ranks, stages or "
                                              "actions differ); compare the plan and "
                                              "the run of one layout",
                                              planned_path, measured_path);
  if (status == 0) {
    fprintf(f, "planned  %s: iteration %.4f ms, bubble %.4f\n", planned_path, pt.iteration * 1e3,
            pt.bubble_fraction);
    fprintf(f, "measured %s: iteration %.4f ms, bubble %.4f (measured/planned %.2f)\n",
            measured_path, mt.iteration * 1e3, mt.bubble_fraction,
            pt.iteration > 0 ? mt.iteration / pt.iteration : 0);
    print_actions(&ps, &pt, &mt, f);
    print_kinds(&ps, &pt, &mt, f);
  }
  simulate_timeline_free(&pt);
  simulate_timeline_free(&mt);
  schedule_free(&ps);
  schedule_free(&ms);
  return status;
}
