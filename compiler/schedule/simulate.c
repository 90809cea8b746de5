/* simulate.c: an event simulation of one iteration of a lowered schedule: compute, transfers and
 * reductions on separate tracks per rank; the iteration time, the bubble, the in-flight peaks. */
#include "schedule/simulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void simulate_costs_init(Costs *c, int stages) {
  memset(c, 0, sizeof *c);
  c->stages = stages;
  c->stage = schedule_alloc((size_t)stages, sizeof *c->stage);
}

void simulate_costs_unit(Costs *c, int stages) {
  simulate_costs_init(c, stages);
  c->unit = 1;
  for (int i = 0; i < stages; i++) {
    c->stage[i].forward = 1;
    c->stage[i].backward = 2;
  }
}

void simulate_costs_free(Costs *c) {
  free(c->stage);
  memset(c, 0, sizeof *c);
}

typedef struct {
  const Schedule *s;
  const Costs *c;
  Timeline *t;
  int **partner;        /* [rank][step]: the matching step on the peer (SEND/RECV, EMBED_REDUCE) */
  double **posted_at;   /* [rank][step]: when a transfer or EMBED_REDUCE was posted; NAN before */
  int *pc;              /* [rank]: the next step */
  double *clock;        /* [rank]: the end of its last compute action */
  double *inputs_ready; /* [rank]: the latest end of the receives posted since its last compute */
  int *waiting;         /* [rank]: receives posted since its last compute and not yet on the wire */
  int *open;            /* [rank]: its transfers and EMBED_REDUCE not yet on the wire */
  double *comm_done;    /* [rank]: the latest end of its transfers and reductions */
  double *reduce_free;  /* [rank]: when its reduction track is free */
  double *link_free;    /* [rank·2 + 0 forward, 1 backward]: when its outgoing link is free */
  double *backward_end; /* [stage]: the end of its latest backward */
} Sim;

static const Action *at(const Schedule *s, int rank, int step) {
  return &s->rank[rank].action[step];
}

/* The k-th send on a link meets the k-th receive (validation has checked that they agree). */
static void pair_link(Sim *m, int sender, ActionKind send_kind, ActionKind recv_kind,
                      int receiver) {
  const ActionList *out = &m->s->rank[sender], *in = &m->s->rank[receiver];
  int i = 0, j = 0;
  for (;;) {
    while (i < out->count && out->action[i].kind != send_kind) i++;
    while (j < in->count && in->action[j].kind != recv_kind) j++;
    if (i == out->count || j == in->count) return;
    m->partner[sender][i] = j;
    m->partner[receiver][j] = i;
    i++, j++;
  }
}

static void pair_all(Sim *m) {
  const Schedule *s = m->s;
  for (int r = 0; r < s->pp; r++) {
    pair_link(m, r, ACTION_SEND_F, ACTION_RECV_F, (r + 1) % s->pp);
    pair_link(m, r, ACTION_SEND_B, ACTION_RECV_B, (r - 1 + s->pp) % s->pp);
    for (int i = 0; i < s->rank[r].count; i++) {
      const Action *a = at(s, r, i);
      if (a->kind != ACTION_EMBED_REDUCE) continue;
      for (int j = 0; j < s->rank[a->peer].count; j++)
        if (at(s, a->peer, j)->kind == ACTION_EMBED_REDUCE) m->partner[r][i] = j;
    }
  }
}

static double max2(double a, double b) { return a > b ? a : b; }

/* Both ends of a transfer are posted: it goes on the wire when the link is free. */
static void transfer(Sim *m, int r, int i) {
  const Action *a = at(m->s, r, i);
  int q = a->peer, j = m->partner[r][i];
  int send = a->kind == ACTION_SEND_F || a->kind == ACTION_SEND_B;
  int sender = send ? r : q, send_step = send ? i : j, recv_step = send ? j : i,
      receiver = send ? q : r;
  const Action *sent = at(m->s, sender, send_step);
  int backward = sent->kind == ACTION_SEND_B;
  const StageCost *cost = &m->c->stage[sent->stage];
  double *link = &m->link_free[sender * 2 + backward];
  double start = max2(max2(m->posted_at[sender][send_step], m->posted_at[receiver][recv_step]),
                      *link);
  double end = start + (backward ? cost->send_backward : cost->send_forward);
  double gather = backward ? cost->gather_backward : cost->gather_forward;
  *link = end;
  m->t->span[sender][send_step] = m->t->span[receiver][recv_step] = (Span){start, end, gather};
  m->comm_done[sender] = max2(m->comm_done[sender], end);
  m->comm_done[receiver] = max2(m->comm_done[receiver], end);
  m->inputs_ready[receiver] = max2(m->inputs_ready[receiver], end);
  m->waiting[receiver]--;
  m->open[sender]--;
  m->open[receiver]--;
}

/* Both ranks reached EMBED_REDUCE: it runs when both reduction tracks are free. */
static void embed_reduce(Sim *m, int r, int i) {
  int q = at(m->s, r, i)->peer, j = m->partner[r][i];
  double start = max2(max2(m->posted_at[r][i], m->posted_at[q][j]),
                      max2(m->reduce_free[r], m->reduce_free[q]));
  double end = start + m->c->embed_reduce;
  m->t->span[r][i] = m->t->span[q][j] = (Span){start, end, 0};
  m->reduce_free[r] = m->reduce_free[q] = end;
  m->comm_done[r] = max2(m->comm_done[r], end);
  m->comm_done[q] = max2(m->comm_done[q], end);
  m->open[r]--;
  m->open[q]--;
}

static void post(Sim *m, int r, int i) {
  const Action *a = at(m->s, r, i);
  m->posted_at[r][i] = m->clock[r];
  m->open[r]++;
  if (a->kind == ACTION_RECV_F || a->kind == ACTION_RECV_B) m->waiting[r]++;
  if (isnan(m->posted_at[a->peer][m->partner[r][i]])) return;
  if (a->kind == ACTION_EMBED_REDUCE) embed_reduce(m, r, i);
  else transfer(m, r, i);
}

static void compute(Sim *m, int r, int i) {
  const Action *a = at(m->s, r, i);
  const StageCost *cost = &m->c->stage[a->stage];
  double seconds = a->kind == ACTION_F ? cost->forward : cost->backward;
  double start = max2(m->clock[r], m->inputs_ready[r]);
  m->t->span[r][i] = (Span){start, start + seconds, 0};
  m->clock[r] = start + seconds;
  m->t->busy[r] += seconds;
  if (a->kind != ACTION_B) return;
  m->t->flush = max2(m->t->flush, m->clock[r]);
  m->backward_end[a->stage] = m->clock[r];
}

/* With buckets, the reduction starts during the stage's last backward and its last bucket
 * follows it. */
static void reduce(Sim *m, int r, int i) {
  int stage = at(m->s, r, i)->stage;
  const StageCost *cost = &m->c->stage[stage];
  double ready = cost->reduce_overlap > 0 ? m->backward_end[stage] - cost->reduce_overlap
                                          : m->clock[r];
  double start = max2(ready, m->reduce_free[r]);
  double end = max2(start + cost->reduce, m->backward_end[stage] + cost->reduce_tail);
  m->t->span[r][i] = (Span){start, end, 0};
  m->reduce_free[r] = end;
  m->comm_done[r] = max2(m->comm_done[r], end);
}

/* Runs rank r until it must wait; returns whether it moved. */
static int advance(Sim *m, int r) {
  int start = m->pc[r];
  for (; m->pc[r] < m->s->rank[r].count; m->pc[r]++) {
    int i = m->pc[r];
    ActionKind kind = at(m->s, r, i)->kind;
    if (schedule_is_compute(kind)) {
      if (m->waiting[r]) break;
      compute(m, r, i);
    } else if (schedule_is_p2p(kind) || kind == ACTION_EMBED_REDUCE) {
      post(m, r, i);
    } else if (kind == ACTION_REDUCE_GRAD) {
      reduce(m, r, i);
    } else {
      if (m->open[r]) break;
      double begin = max2(m->clock[r], m->comm_done[r]);
      double end = begin + m->c->optimizer + m->c->gather;
      m->t->span[r][i] = (Span){begin, end, m->c->gather};
      m->clock[r] = end;
    }
  }
  return m->pc[r] != start;
}

/* Peaks from the order alone: each rank runs its compute actions one at a time. */
static void measure_peaks(const Schedule *s, const Costs *c, Timeline *t, int r) {
  int inflight = 0;
  double bytes = 0;
  for (int i = 0; i < s->rank[r].count; i++) {
    const Action *a = at(s, r, i);
    if (!schedule_is_compute(a->kind)) continue;
    int sign = a->kind == ACTION_F ? 1 : -1;
    inflight += sign;
    bytes += sign * c->stage[a->stage].activation_bytes;
    if (inflight > t->peak_inflight[r]) t->peak_inflight[r] = inflight;
    if (bytes > t->peak_activation_bytes[r]) t->peak_activation_bytes[r] = bytes;
  }
  t->peak_inflight_microbatches[r] = (double)t->peak_inflight[r] / s->vpp;
}

static void timeline_init(Timeline *t, const Schedule *s) {
  memset(t, 0, sizeof *t);
  t->pp = s->pp;
  t->vpp = s->vpp;
  t->span = schedule_alloc((size_t)s->pp, sizeof *t->span);
  for (int r = 0; r < s->pp; r++)
    t->span[r] = schedule_alloc((size_t)s->rank[r].count, sizeof **t->span);
  t->busy = schedule_alloc((size_t)s->pp, sizeof *t->busy);
  t->peak_inflight = schedule_alloc((size_t)s->pp, sizeof *t->peak_inflight);
  t->peak_inflight_microbatches = schedule_alloc((size_t)s->pp,
                                                 sizeof *t->peak_inflight_microbatches);
  t->peak_activation_bytes = schedule_alloc((size_t)s->pp, sizeof *t->peak_activation_bytes);
}

void simulate_timeline_free(Timeline *t) {
  for (int r = 0; t->span && r < t->pp; r++) free(t->span[r]);
  free(t->span);
  free(t->busy);
  free(t->peak_inflight);
  free(t->peak_inflight_microbatches);
  free(t->peak_activation_bytes);
  memset(t, 0, sizeof *t);
}

static void sim_init(Sim *m, const Schedule *s, const Costs *c, Timeline *t) {
  size_t pp = (size_t)s->pp;
  m->s = s;
  m->c = c;
  m->t = t;
  m->partner = schedule_alloc(pp, sizeof *m->partner);
  m->posted_at = schedule_alloc(pp, sizeof *m->posted_at);
  for (int r = 0; r < s->pp; r++) {
    m->partner[r] = schedule_alloc((size_t)s->rank[r].count, sizeof **m->partner);
    m->posted_at[r] = schedule_alloc((size_t)s->rank[r].count, sizeof **m->posted_at);
    for (int i = 0; i < s->rank[r].count; i++) m->posted_at[r][i] = NAN;
  }
  m->pc = schedule_alloc(pp, sizeof *m->pc);
  m->waiting = schedule_alloc(pp, sizeof *m->waiting);
  m->open = schedule_alloc(pp, sizeof *m->open);
  m->clock = schedule_alloc(pp, sizeof *m->clock);
  m->inputs_ready = schedule_alloc(pp, sizeof *m->inputs_ready);
  m->comm_done = schedule_alloc(pp, sizeof *m->comm_done);
  m->reduce_free = schedule_alloc(pp, sizeof *m->reduce_free);
  m->link_free = schedule_alloc(2 * pp, sizeof *m->link_free);
  m->backward_end = schedule_alloc((size_t)s->stages, sizeof *m->backward_end);
  pair_all(m);
}

static void sim_free(Sim *m) {
  for (int r = 0; r < m->s->pp; r++) {
    free(m->partner[r]);
    free(m->posted_at[r]);
  }
  free(m->partner);
  free(m->posted_at);
  free(m->pc);
  free(m->waiting);
  free(m->open);
  free(m->clock);
  free(m->inputs_ready);
  free(m->comm_done);
  free(m->reduce_free);
  free(m->link_free);
  free(m->backward_end);
}

static int run(Sim *m) {
  int moved = 1, done = 0;
  while (moved && !done) {
    moved = 0;
    done = 1;
    for (int r = 0; r < m->s->pp; r++) {
      moved |= advance(m, r);
      done &= m->pc[r] == m->s->rank[r].count;
    }
  }
  return done;
}

static void summarise(const Schedule *s, const Costs *c, Timeline *t) {
  for (int r = 0; r < s->pp; r++) {
    for (int i = 0; i < s->rank[r].count; i++) t->iteration = max2(t->iteration, t->span[r][i].end);
    t->ideal = max2(t->ideal, t->busy[r]);
    measure_peaks(s, c, t, r);
  }
  t->bubble_fraction = t->ideal > 0 ? (t->flush - t->ideal) / t->ideal : 0;
}

int simulate_schedule(const Schedule *s, const Costs *c, Timeline *t, Diag *d) {
  Sim m;
  if (c->stages != s->stages)
    return diag(d, "the costs describe %d stages but the schedule has %d", c->stages, s->stages);
  timeline_init(t, s);
  t->unit = c->unit;
  sim_init(&m, s, c, t);
  int done = run(&m);
  sim_free(&m);
  if (!done) {
    simulate_timeline_free(t);
    return diag(d, "the simulation stalled: validate the schedule first (validate_schedule)");
  }
  summarise(s, c, t);
  return 0;
}
