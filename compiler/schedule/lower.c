/* lower.c: lowering compute-only lists into a plan that runs: point-to-point sends and receives
 * posted in groups, each stage's data-parallel gradient reduction, the tied-embedding reduction,
 * the step. */
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

/* Where sends and receives go. The compute actions first run in a unit-cost timeline (forward 1,
 * backward 2; each as soon as its rank is free and its input exists). A tensor produced at time
 * τ is sent right after its producer, and received in the consumer rank's first gap between
 * compute actions that ends at or after τ (so at the latest right before the consumer). Every
 * gap's transfers form one group, ordered by τ. Why this cannot deadlock: were each gap split
 * into one group per τ, both ends of every transfer would carry the same tick τ and every rank
 * would post its groups in increasing τ, so the ranks could go through the ticks in lockstep;
 * posting a gap's groups at once only posts some sends and receives earlier, which never delays
 * a match. Each link's receives come in the order of its sends (both in τ order). A compute-only
 * schedule whose dependencies form a cycle is still lowered (the cycle broken in rank order) so
 * that validation can name the problem. */

typedef struct {
  /* the rank running a compute action and its number among the rank's compute actions */
  int rank, index;
} Where;

typedef struct {
  const Schedule *s;
  int *count;            /* [rank]: compute actions */
  const Action ***op;    /* [rank][k]: the k-th compute action */
  double **start, **end; /* [rank][k]: in the unit-cost timeline */
  /* [slot]: where each (F or B, stage, microbatch) runs; rank -1 if nowhere */
  Where *where;
} Timing;

typedef struct {
  int gap;     /* before the rank's compute action number `gap` (after the last when gap = count) */
  double tick; /* when the tensor was produced in the unit-cost timeline */
  Action action;
} Placed;

typedef struct {
  Placed *item;
  int count, capacity;
} PlacedList;

static int in_range(const Schedule *s, const Action *a) {
  return a->stage >= 0 && a->stage < s->stages && a->microbatch >= 0 &&
         a->microbatch < s->microbatches;
}

static size_t slot(const Schedule *s, ActionKind kind, int stage, int microbatch) {
  return ((size_t)(kind == ACTION_B) * s->stages + stage) * s->microbatches + microbatch;
}

/* The stage that compute action a hands its output to (a forward to the next stage, a backward
 * to the previous one) when that stage is on another rank; -1 when nothing is sent. */
static int receiver_stage(const Schedule *s, const Action *a) {
  int next = a->kind == ACTION_F ? a->stage + 1 : a->stage - 1;
  if (!in_range(s, a) || next < 0 || next >= s->stages || next % s->pp == a->stage % s->pp)
    return -1;
  return next;
}

/* Where the compute action producing a's input runs; NULL if a needs none or nothing produces
 * it. */
static const Where *producer(const Timing *t, const Action *a) {
  int from = a->kind == ACTION_F ? a->stage - 1 : a->stage + 1;
  if (!in_range(t->s, a) || from < 0 || from >= t->s->stages) return NULL;
  const Where *w = &t->where[slot(t->s, a->kind, from, a->microbatch)];
  return w->rank >= 0 ? w : NULL;
}

static void timing_init(Timing *t, const Schedule *s) {
  size_t slots = 2 * (size_t)s->stages * s->microbatches;
  t->s = s;
  t->count = schedule_alloc((size_t)s->pp, sizeof *t->count);
  t->op = schedule_alloc((size_t)s->pp, sizeof *t->op);
  t->start = schedule_alloc((size_t)s->pp, sizeof *t->start);
  t->end = schedule_alloc((size_t)s->pp, sizeof *t->end);
  t->where = schedule_alloc(slots, sizeof *t->where);
  for (size_t i = 0; i < slots; i++) t->where[i].rank = -1;
  for (int r = 0; r < s->pp; r++) {
    const ActionList *l = &s->rank[r];
    t->op[r] = schedule_alloc((size_t)l->count, sizeof **t->op);
    t->start[r] = schedule_alloc((size_t)l->count, sizeof **t->start);
    t->end[r] = schedule_alloc((size_t)l->count, sizeof **t->end);
    for (int i = 0; i < l->count; i++) {
      const Action *a = &l->action[i];
      if (!schedule_is_compute(a->kind)) continue;
      if (in_range(s, a))
        t->where[slot(s, a->kind, a->stage, a->microbatch)] = (Where){r, t->count[r]};
      t->op[r][t->count[r]++] = a;
    }
  }
}

static void timing_free(Timing *t) {
  for (int r = 0; r < t->s->pp; r++) {
    free(t->op[r]);
    free(t->start[r]);
    free(t->end[r]);
  }
  free(t->count);
  free(t->op);
  free(t->start);
  free(t->end);
  free(t->where);
}

/* Runs rank r's next compute action if its input exists (or if forced); returns whether it ran. */
static int run_next(Timing *t, int *next, double *clock, int r, int forced) {
  const Action *a = t->op[r][next[r]];
  const Where *from = producer(t, a);
  double ready = clock[r];
  if (from && !forced) {
    if (from->index >= next[from->rank]) return 0;
    double produced = t->end[from->rank][from->index];
    if (produced > ready) ready = produced;
  }
  t->start[r][next[r]] = ready;
  t->end[r][next[r]] = clock[r] = ready + (a->kind == ACTION_F ? 1 : 2);
  next[r]++;
  return 1;
}

static void run_timeline(Timing *t) {
  int pp = t->s->pp, *next = schedule_alloc((size_t)pp, sizeof *next), left = 1;
  double *clock = schedule_alloc((size_t)pp, sizeof *clock);
  while (left) {
    int moved = 0;
    left = 0;
    for (int r = 0; r < pp; r++) {
      while (next[r] < t->count[r] && run_next(t, next, clock, r, 0)) moved = 1;
      left |= next[r] < t->count[r];
    }
    /* a dependency cycle: break it at the first waiting rank */
    for (int r = 0; left && !moved; r++)
      if (next[r] < t->count[r]) moved = run_next(t, next, clock, r, 1);
  }
  free(next);
  free(clock);
}

static void place(PlacedList *l, int gap, double tick, Action a) {
  if (l->count == l->capacity) {
    l->capacity = l->capacity ? 2 * l->capacity : 64;
    l->item = realloc(l->item, (size_t)l->capacity * sizeof *l->item);
    if (!l->item) {
      fprintf(stderr, "plait: out of memory\n");
      exit(1);
    }
  }
  l->item[l->count++] = (Placed){gap, tick, a};
}

static Action p2p(const Schedule *s, ActionKind kind, int stage, int microbatch) {
  Action a = {.kind = kind, .stage = stage, .microbatch = microbatch};
  a.peer = schedule_peer(s, &a);
  return a;
}

/* The first gap on rank r that ends at or after `tick`: the number of its compute actions
 * starting before it. */
static int gap_at(const Timing *t, int r, double tick) {
  int lo = 0, hi = t->count[r];
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->start[r][mid] < tick) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The send after each producer and the receive before its consumer, both at the producer's end
 * time. */
static void place_transfers(const Timing *t, PlacedList *placed) {
  const Schedule *s = t->s;
  for (int r = 0; r < s->pp; r++)
    for (int k = 0; k < t->count[r]; k++) {
      const Action *a = t->op[r][k];
      int to = receiver_stage(s, a), forward = a->kind == ACTION_F;
      if (to < 0) continue;
      double tick = t->end[r][k];
      place(&placed[r], k + 1, tick,
            p2p(s, forward ? ACTION_SEND_F : ACTION_SEND_B, a->stage, a->microbatch));
      const Where *consumer = &t->where[slot(s, a->kind, to, a->microbatch)];
      if (consumer->rank < 0) continue;
      int gap = gap_at(t, consumer->rank, tick);
      if (gap > consumer->index) gap = consumer->index;
      place(&placed[consumer->rank], gap, tick,
            p2p(s, forward ? ACTION_RECV_F : ACTION_RECV_B, to, a->microbatch));
    }
}

static int is_receive(ActionKind kind) { return kind == ACTION_RECV_F || kind == ACTION_RECV_B; }

/* By gap, then tick; at one tick sends before receives, then by kind, stage and microbatch. */
static int placed_order(const void *x, const void *y) {
  const Placed *a = x, *b = y;
  if (a->gap != b->gap) return a->gap < b->gap ? -1 : 1;
  if (a->tick != b->tick) return a->tick < b->tick ? -1 : 1;
  if (is_receive(a->action.kind) != is_receive(b->action.kind))
    return is_receive(a->action.kind) ? 1 : -1;
  if (a->action.kind != b->action.kind) return a->action.kind < b->action.kind ? -1 : 1;
  if (a->action.stage != b->action.stage) return a->action.stage < b->action.stage ? -1 : 1;
  return (a->action.microbatch > b->action.microbatch) -
         (a->action.microbatch < b->action.microbatch);
}

/* Emits the placed transfers of one gap as one group. */
static int emit_gap(Schedule *out, int rank, const PlacedList *l, int i, int gap) {
  for (int first = i; i < l->count && l->item[i].gap == gap; i++) {
    Action a = l->item[i].action;
    a.joined = i > first;
    schedule_push(out, rank, a);
  }
  return i;
}

/* Rebuilds one rank's list: each gap's groups, then the other actions it held, then the compute
 * action. */
static void lower_rank(const Schedule *s, PlacedList *l, Schedule *out, int rank) {
  const ActionList *in = &s->rank[rank];
  int next = 0, gap = 0, kept_from = 0;
  if (l->count) qsort(l->item, (size_t)l->count, sizeof *l->item, placed_order);
  for (int i = 0; i <= in->count; i++) {
    if (i < in->count && !schedule_is_compute(in->action[i].kind)) continue;
    next = emit_gap(out, rank, l, next, gap++);
    for (; kept_from < i; kept_from++) schedule_push(out, rank, in->action[kept_from]);
    if (i < in->count) schedule_push(out, rank, in->action[i]);
    kept_from = i + 1;
  }
}

static void lower_p2p(Schedule *s) {
  Timing t;
  Schedule out = *s;
  PlacedList *placed = schedule_alloc((size_t)s->pp, sizeof *placed);
  timing_init(&t, s);
  run_timeline(&t);
  place_transfers(&t, placed);
  out.rank = schedule_alloc((size_t)s->pp, sizeof *out.rank);
  for (int r = 0; r < s->pp; r++) {
    lower_rank(s, &placed[r], &out, r);
    free(placed[r].item);
  }
  free(placed);
  timing_free(&t);
  schedule_free(s);
  *s = out;
}

static int has_finishing_actions(const Schedule *s) {
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++) {
      ActionKind kind = s->rank[r].action[i].kind;
      if (kind == ACTION_REDUCE_GRAD || kind == ACTION_EMBED_REDUCE || kind == ACTION_STEP)
        return 1;
    }
  return 0;
}

/* Each local stage's REDUCE_GRAD goes after its last backward and the group that follows it, or
 * with `after_all`, every one after the rank's last backward (and its group). */
static void add_reductions(Schedule *s, int rank, int after_all) {
  ActionList old = s->rank[rank];
  int chunks = s->vpp, *after = schedule_alloc((size_t)chunks, sizeof *after);
  for (int c = 0; c < chunks; c++) after[c] = old.count;
  for (int i = 0; i < old.count; i++) {
    const Action *a = &old.action[i];
    if (a->kind != ACTION_B || a->stage < 0 || a->stage >= s->stages || a->stage % s->pp != rank)
      continue;
    int end = i + 1;
    while (end < old.count && schedule_is_p2p(old.action[end].kind)) end++;
    after[a->stage / s->pp] = end;
  }
  int last = 0;
  for (int c = 0; c < chunks; c++) last = after[c] > last ? after[c] : last;
  for (int c = 0; c < chunks && after_all; c++) after[c] = last;
  memset(&s->rank[rank], 0, sizeof s->rank[rank]);
  for (int i = 0; i <= old.count; i++) {
    for (int c = 0; c < chunks; c++)
      if (after[c] == i)
        schedule_push(s, rank,
                      (Action){.kind = ACTION_REDUCE_GRAD,
                               .stage = c * s->pp + rank,
                               .microbatch = -1,
                               .peer = -1});
    if (i < old.count) schedule_push(s, rank, old.action[i]);
  }
  free(after);
  free(old.action);
}

static void add_finishing_actions(Schedule *s, int options) {
  int first = 0, last = s->stages - 1;
  for (int r = 0; r < s->pp; r++) add_reductions(s, r, options & LOWER_REDUCE_AFTER);
  if ((options & LOWER_TIED_EMBEDDING) && first % s->pp != last % s->pp) {
    Action embed = {.kind = ACTION_EMBED_REDUCE, .stage = first, .microbatch = -1};
    embed.peer = schedule_peer(s, &embed);
    schedule_push(s, first % s->pp, embed);
    embed.stage = last;
    embed.peer = schedule_peer(s, &embed);
    schedule_push(s, last % s->pp, embed);
  }
  for (int r = 0; r < s->pp; r++)
    schedule_push(s, r, (Action){.kind = ACTION_STEP, .stage = -1, .microbatch = -1, .peer = -1});
}

void lower_schedule(Schedule *s, int options) {
  if (!schedule_has_p2p(s)) lower_p2p(s);
  if (!has_finishing_actions(s)) add_finishing_actions(s, options);
}
