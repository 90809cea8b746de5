/* trace_read.c: reading back a trace of plait's own form (the plan's simulated one, or a program's
 * measured one from train --trace) into a schedule and its timeline, so both draw alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infile.h"
#include "schedule/simulate.h"

typedef struct {
  int rank, step;
  Action action;
  double start, end; /* seconds */
  double gather;     /* seconds of it that are an all-gather (args.gather_us; 0 without) */
} Event;

/* One "ph":"X" line: name, pid, ts, dur (µs), args.step and args.gather_us if there; 0 when the
 * line is something else. */
static int parse_event(const char *line, Event *e) {
  const char *name = strstr(line, "\"name\":\""), *pid = strstr(line, "\"pid\":"),
             *ts = strstr(line, "\"ts\":");
  const char *dur = strstr(line, "\"dur\":"), *step = strstr(line, "\"step\":");
  if (!strstr(line, "\"ph\":\"X\"") || !name || !pid || !ts || !dur || !step) return 0;
  name += 8;
  const char *close = strchr(name, '"');
  if (!close || schedule_read_action(name, (size_t)(close - name), &e->action)) return -1;
  double start, length;
  if (sscanf(pid + 6, "%d", &e->rank) != 1 || sscanf(ts + 5, "%lf", &start) != 1 ||
      sscanf(dur + 6, "%lf", &length) != 1 || sscanf(step + 7, "%d", &e->step) != 1 ||
      e->rank < 0 || e->rank >= SCHEDULE_MAX_RANKS || e->step < 0)
    return -1;
  e->start = start * 1e-6, e->end = (start + length) * 1e-6;
  const char *gather = strstr(line, "\"gather_us\":");
  double gathered = 0;
  if (gather && (sscanf(gather + 12, "%lf", &gathered) != 1 || gathered < 0 || gathered > length))
    return -1;
  e->gather = gathered * 1e-6;
  return 1;
}

static int by_rank_and_step(const void *a, const void *b) {
  const Event *x = a, *y = b;
  return x->rank != y->rank ? x->rank - y->rank : x->step - y->step;
}

static int read_events(const char *path, Event **out, int *count, Diag *d) {
  char why[512];
  FILE *f = infile_open(path, why, sizeof why);
  if (!f) return diag(d, "trace %s: %s; give a trace written by DIR/train --trace", path, why);
  char line[1024];
  int n = 0, room = 0, lineno = 0;
  Event *events = NULL;
  while (fgets(line, sizeof line, f)) {
    Event e;
    int got = parse_event(line, &e);
    lineno++;
    if (got < 0) {
      fclose(f);
      free(events);
      return diag(d,
                  "%s:%d: a trace event plait cannot read (its name is not an action, or a field "
                  "is missing)",
                  path, lineno);
    }
    if (!got) continue;
    if (n == room)
      events = realloc(events, (size_t)(room = room ? 2 * room : 256) * sizeof *events);
    events[n++] = e;
  }
  fclose(f);
  if (n == 0)
    return diag(
        d, "%s: no trace events (write one with plait plan --format trace or train --trace)", path);
  qsort(events, (size_t)n, sizeof *events, by_rank_and_step);
  *out = events, *count = n;
  return 0;
}

/* Sizes from the actions themselves: ranks, stages per rank, microbatches. */
static int sizes(const Event *e, int n, int *pp, int *vpp, int *microbatches) {
  int stages = 0;
  *pp = *microbatches = 0;
  for (int i = 0; i < n; i++) {
    if (e[i].rank + 1 > *pp) *pp = e[i].rank + 1;
    if (e[i].action.stage + 1 > stages) stages = e[i].action.stage + 1;
    if (e[i].action.microbatch + 1 > *microbatches) *microbatches = e[i].action.microbatch + 1;
  }
  *vpp = stages > *pp ? (stages + *pp - 1) / *pp : 1;
  return 0;
}

/* The most (stage, microbatch) pairs forwarded and not yet backwarded, per rank. */
static void peaks(const Schedule *s, Timeline *t) {
  for (int r = 0; r < s->pp; r++) {
    int live = 0;
    for (int i = 0; i < s->rank[r].count; i++) {
      ActionKind kind = s->rank[r].action[i].kind;
      live += kind == ACTION_F ? 1 : kind == ACTION_B ? -1 : 0;
      if (live > t->peak_inflight[r]) t->peak_inflight[r] = live;
    }
    t->peak_inflight_microbatches[r] = (double)t->peak_inflight[r] / s->vpp;
  }
}

/* The bubble as the simulation defines it, from the measured spans. */
static void measure(const Schedule *s, Timeline *t) {
  double origin = t->span[0][0].start, busiest = 0;
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++)
      origin = t->span[r][i].start < origin ? t->span[r][i].start : origin;
  for (int r = 0; r < s->pp; r++) {
    for (int i = 0; i < s->rank[r].count; i++) {
      Span *span = &t->span[r][i];
      span->start -= origin, span->end -= origin;
      if (span->end > t->iteration) t->iteration = span->end;
      if (s->rank[r].action[i].kind == ACTION_B && span->end > t->flush) t->flush = span->end;
      if (schedule_is_compute(s->rank[r].action[i].kind)) t->busy[r] += span->end - span->start;
    }
    busiest = t->busy[r] > busiest ? t->busy[r] : busiest;
  }
  t->ideal = busiest;
  t->bubble_fraction = busiest > 0 ? (t->flush - busiest) / busiest : 0;
}

int trace_read(const char *path, Schedule *s, Timeline *t, Diag *d) {
  Event *events;
  int n, pp, vpp, microbatches;
  if (read_events(path, &events, &n, d)) return -1;
  sizes(events, n, &pp, &vpp, &microbatches);
  if (schedule_init(s, pp, vpp, microbatches, d)) return free(events), -1;
  memset(t, 0, sizeof *t);
  t->pp = pp, t->vpp = vpp;
  t->span = schedule_alloc((size_t)pp, sizeof *t->span);
  t->busy = schedule_alloc((size_t)pp, sizeof *t->busy);
  t->peak_inflight = schedule_alloc((size_t)pp, sizeof *t->peak_inflight);
  t->peak_inflight_microbatches = schedule_alloc((size_t)pp, sizeof *t->peak_inflight_microbatches);
  t->peak_activation_bytes = schedule_alloc((size_t)pp, sizeof *t->peak_activation_bytes);
  for (int i = 0; i < n; i++) {
    /* peers follow from the stages; a group of sends and receives shares one span */
    Action a = events[i].action;
    a.peer = schedule_peer(s, &a);
    a.joined = i > 0 && events[i - 1].rank == events[i].rank && schedule_is_p2p(a.kind) &&
               schedule_is_p2p(events[i - 1].action.kind) &&
               events[i - 1].start == events[i].start && events[i - 1].end == events[i].end;
    schedule_push(s, events[i].rank, a);
  }
  for (int r = 0; r < pp; r++)
    t->span[r] = schedule_alloc((size_t)s->rank[r].count + 1, sizeof **t->span);
  for (int i = 0, r = -1, k = 0; i < n; i++) {
    if (events[i].rank != r) r = events[i].rank, k = 0;
    t->span[r][k++] = (Span){events[i].start, events[i].end, events[i].gather};
  }
  free(events);
  measure(s, t);
  peaks(s, t);
  return 0;
}
