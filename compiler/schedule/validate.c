/* validate.c: checking a lowered schedule: every action in its place, one forward and one
 * backward per (stage, microbatch) in causal order, sends matched by receives of the same tensor
 * in the same order, reductions and the step in place, and a dry run with blocking groups that
 * never deadlocks. */
#include "schedule/schedule.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const Schedule *s;
  ScheduleFault *fault;
  /* [rank][step]: the step of the matching action on the peer (SEND/RECV, EMBED_REDUCE) */
  int **partner;
  /* [rank]: where each rank is blocked, for a deadlock's neighbourhood; NULL otherwise */
  const int *focus;
} Check;

/* ---- reporting: one line, then the neighbourhood ---- */

typedef struct {
  char *text;
  size_t size, used;
} Buffer;

__attribute__((format(printf, 2, 3))) static void put(Buffer *b, const char *fmt, ...) {
  va_list ap;
  if (b->used + 1 >= b->size) return;
  va_start(ap, fmt);
  int n = vsnprintf(b->text + b->used, b->size - b->used, fmt, ap);
  va_end(ap);
  if (n > 0) b->used = b->used + (size_t)n < b->size ? b->used + (size_t)n : b->size - 1;
}

static const Action *at(const Schedule *s, int rank, int step) {
  return &s->rank[rank].action[step];
}

static int in_group(const Schedule *s, int rank, int step) {
  return step < s->rank[rank].count && schedule_is_p2p(at(s, rank, step)->kind) &&
         at(s, rank, step)->joined;
}

static int group_size(const Schedule *s, int rank, int step) {
  int end = step + 1;
  while (in_group(s, rank, end)) end++;
  return end - step;
}

/* One line: the rank's actions around `focus` (whole groups), the focus marked >like this< if
 * `mark`. */
static void put_window(Buffer *b, const Schedule *s, int rank, int focus, int mark) {
  int count = s->rank[rank].count, lo = focus - 3, hi = focus + 4;
  if (lo < 0) lo = 0;
  if (hi > count) hi = count;
  while (lo > 0 && lo < count && in_group(s, rank, lo)) lo--;
  while (in_group(s, rank, hi)) hi++;
  put(b, "\n  rank %d | steps %d-%d:%s", rank, lo, hi > lo ? hi - 1 : lo, lo > 0 ? " ..." : "");
  for (int i = lo; i < hi; i++) {
    char name[64];
    schedule_action_name(at(s, rank, i), name, sizeof name);
    int opens = schedule_is_p2p(at(s, rank, i)->kind) && !at(s, rank, i)->joined &&
                in_group(s, rank, i + 1);
    int closes = i > 0 && in_group(s, rank, i) && !in_group(s, rank, i + 1);
    int marked = mark && i == focus;
    put(b, " %s%s%s%s%s", opens ? "{" : "", marked ? ">" : "", name, marked ? "<" : "",
        closes ? "}" : "");
  }
  put(b, "%s%s", hi < count ? " ..." : "", mark && focus >= count ? " >end<" : "");
}

static int shown(const Schedule *s, int rank, int faulty, int other) {
  int distance = abs(rank - faulty);
  if (s->pp <= 8 || rank == other) return 1;
  return distance <= 2 || s->pp - distance <= 2;
}

/* Records the fault at (rank, step); `other` is a rank involved (-1 if none) and other_step its
 * step (-1 if unknown). Each rank's window is centred on c->focus[r] (marked) when set;
 * otherwise on the faulty step (marked), on other_step of `other` (marked), and on the same step
 * number elsewhere. */
static int vfail(Check *c, int rank, int step, int other, int other_step, const char *fmt,
                 va_list ap) {
  ScheduleFault *f = c->fault;
  Buffer message = {f->message, sizeof f->message, 0}, context = {f->context, sizeof f->context, 0};
  f->rank = rank;
  f->step = step;
  put(&message, "rank %d, step %d: ", rank, step);
  vsnprintf(f->message + message.used, sizeof f->message - message.used, fmt, ap);
  f->context[0] = 0;
  put(&context, "neighbourhood (>action< marks the steps in question):");
  for (int r = 0; r < c->s->pp; r++) {
    int peer = r == other && other_step >= 0;
    int where = c->focus ? c->focus[r] : r == rank ? step : peer ? other_step : step;
    if (shown(c->s, r, rank, other))
      put_window(&context, c->s, r, where, c->focus || r == rank || peer);
  }
  return -1;
}

__attribute__((format(printf, 4, 5))) static int fail(Check *c, int rank, int step, const char *fmt,
                                                      ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, rank, step, -1, -1, fmt, ap);
  va_end(ap);
  return -1;
}

__attribute__((format(printf, 6, 7))) static int fail_near(Check *c, int rank, int step, int other,
                                                           int other_step, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, rank, step, other, other_step, fmt, ap);
  va_end(ap);
  return -1;
}

static const char *name_of(const Action *a, char *buf) {
  schedule_action_name(a, buf, 64);
  return buf;
}

/* ---- placement: each action's fields fit the schedule and the rank ---- */

static int has_microbatch(ActionKind kind) {
  return schedule_is_compute(kind) || schedule_is_p2p(kind);
}

static int check_placement(Check *c, int rank, int step) {
  const Schedule *s = c->s;
  const Action *a = at(s, rank, step);
  char n[64];
  if (a->kind >= ACTION_KINDS) return fail(c, rank, step, "unknown action kind %d", a->kind);
  if (a->kind == ACTION_STEP) return 0;
  if (a->stage < 0 || a->stage >= s->stages)
    return fail(c, rank, step, "%s: stage %d is out of range (0 to %d)", name_of(a, n), a->stage,
                s->stages - 1);
  if (a->stage % s->pp != rank)
    return fail(c, rank, step, "%s: stage %d runs on rank %d (stage mod pp), not on rank %d",
                name_of(a, n), a->stage, a->stage % s->pp, rank);
  if (has_microbatch(a->kind) && (a->microbatch < 0 || a->microbatch >= s->microbatches))
    return fail(c, rank, step, "%s: microbatch %d is out of range (0 to %d)", name_of(a, n),
                a->microbatch, s->microbatches - 1);
  if (a->kind == ACTION_EMBED_REDUCE && a->stage != 0 && a->stage != s->stages - 1)
    return fail(c, rank, step, "%s: only the first and the last stage share the tied embedding",
                name_of(a, n));
  if (schedule_is_p2p(a->kind) || a->kind == ACTION_EMBED_REDUCE) {
    int peer = schedule_peer(s, a);
    if (peer < 0)
      return fail(c, rank, step, "%s: stage %d has no neighbour in that direction", name_of(a, n),
                  a->stage);
    if (peer == rank)
      return fail(c, rank, step, "%s: the other end is on this rank; nothing is sent",
                  name_of(a, n));
    if (a->peer != peer)
      return fail(c, rank, step, "%s: its peer is rank %d, not %d", name_of(a, n), peer, a->peer);
  }
  return 0;
}

/* ---- order on one rank: what each action needs has happened before it ---- */

enum { DONE_F = 1, DONE_B = 2, GOT_RECV_F = 4, GOT_RECV_B = 8, SENT_F = 16, SENT_B = 32 };

typedef struct {
  unsigned char *state; /* [chunk·m + microbatch]: DONE_F ... SENT_B */
  int *f_step;          /* [chunk·m + microbatch]: where its forward ran, -1 if not yet */
  int *b_count;         /* [chunk]: backwards done */
  int *reduced;         /* [chunk]: the step of its REDUCE_GRAD, -1 if none */
  int embed, step_at;   /* the steps of EMBED_REDUCE and STEP, -1 if none */
} RankState;

static int pair(const Schedule *s, int stage, int microbatch) {
  return stage / s->pp * s->microbatches + microbatch;
}

static int is_remote(const Schedule *s, int stage, int other) {
  return other >= 0 && other < s->stages && other % s->pp != stage % s->pp;
}

/* What a forward or backward needs first: its input received, or produced by the neighbouring stage
 * on this same rank. */
static int check_input(Check *c, RankState *st, int rank, int step) {
  const Schedule *s = c->s;
  const Action *a = at(s, rank, step);
  int forward = a->kind == ACTION_F, from = forward ? a->stage - 1 : a->stage + 1;
  char n[64];
  if (from < 0 || from >= s->stages) return 0;
  if (is_remote(s, a->stage, from)) {
    if (st->state[pair(s, a->stage, a->microbatch)] & (forward ? GOT_RECV_F : GOT_RECV_B)) return 0;
    return fail_near(c, rank, step, from % s->pp, -1,
                     "%s has no receive of its input (%d%s%d) before it", name_of(a, n), a->stage,
                     forward ? "RECV_F" : "RECV_B", a->microbatch);
  }
  if (st->state[pair(s, from, a->microbatch)] & (forward ? DONE_F : DONE_B)) return 0;
  return fail(c, rank, step, "%s needs %d%s%d, which has not run before it on this rank",
              name_of(a, n), from, forward ? "F" : "B", a->microbatch);
}

static int check_compute(Check *c, RankState *st, int rank, int step) {
  const Schedule *s = c->s;
  const Action *a = at(s, rank, step);
  int p = pair(s, a->stage, a->microbatch), chunk = a->stage / s->pp;
  char n[64];
  if (a->kind == ACTION_F && (st->state[p] & DONE_F))
    return fail(c, rank, step, "%s runs twice (first at step %d)", name_of(a, n), st->f_step[p]);
  if (a->kind == ACTION_B && (st->state[p] & DONE_B))
    return fail(c, rank, step, "%s runs twice", name_of(a, n));
  if (a->kind == ACTION_B && !(st->state[p] & DONE_F))
    return fail(c, rank, step, "%s runs before its forward %dF%d", name_of(a, n), a->stage,
                a->microbatch);
  if (a->kind == ACTION_B && st->reduced[chunk] >= 0)
    return fail(c, rank, step, "%s runs after %dREDUCE_GRAD (step %d)", name_of(a, n), a->stage,
                st->reduced[chunk]);
  if (check_input(c, st, rank, step)) return -1;
  st->state[p] |= a->kind == ACTION_F ? DONE_F : DONE_B;
  if (a->kind == ACTION_F) st->f_step[p] = step;
  else st->b_count[chunk]++;
  return 0;
}

static int check_transfer(Check *c, RankState *st, int rank, int step) {
  const Schedule *s = c->s;
  const Action *a = at(s, rank, step);
  unsigned char *state = &st->state[pair(s, a->stage, a->microbatch)];
  static const unsigned char bit[] = {[ACTION_SEND_F] = SENT_F,
                                      [ACTION_RECV_F] = GOT_RECV_F,
                                      [ACTION_SEND_B] = SENT_B,
                                      [ACTION_RECV_B] = GOT_RECV_B};
  char n[64];
  if (*state & bit[a->kind])
    return fail_near(c, rank, step, a->peer, -1, "%s appears twice", name_of(a, n));
  if (a->kind == ACTION_SEND_F && !(*state & DONE_F))
    return fail_near(c, rank, step, a->peer, -1, "%s sends before %dF%d has produced it",
                     name_of(a, n), a->stage, a->microbatch);
  if (a->kind == ACTION_SEND_B && !(*state & DONE_B))
    return fail_near(c, rank, step, a->peer, -1, "%s sends before %dB%d has produced it",
                     name_of(a, n), a->stage, a->microbatch);
  *state |= bit[a->kind];
  return 0;
}

/* REDUCE_GRAD and EMBED_REDUCE come once, after the stage's last backward; STEP after every
 * reduction. */
static int check_finishing(Check *c, RankState *st, int rank, int step) {
  const Schedule *s = c->s;
  const Action *a = at(s, rank, step);
  char n[64];
  if (a->kind == ACTION_STEP) { /* a second STEP is caught as an action after the first */
    for (int chunk = 0; chunk < s->vpp; chunk++)
      if (st->reduced[chunk] < 0)
        return fail(c, rank, step, "STEP runs before %dREDUCE_GRAD", chunk * s->pp + rank);
    st->step_at = step;
    return 0;
  }
  int chunk = a->stage / s->pp,
      *seen = a->kind == ACTION_REDUCE_GRAD ? &st->reduced[chunk] : &st->embed;
  if (*seen >= 0)
    return fail(c, rank, step, "%s appears twice (first at step %d)", name_of(a, n), *seen);
  if (st->b_count[chunk] < s->microbatches)
    return fail(c, rank, step, "%s runs before the last backward of stage %d", name_of(a, n),
                a->stage);
  *seen = step;
  return 0;
}

static int check_action(Check *c, RankState *st, int rank, int step) {
  ActionKind kind = at(c->s, rank, step)->kind;
  if (check_placement(c, rank, step)) return -1;
  if (st->step_at >= 0)
    return fail(c, rank, st->step_at, "STEP is not the last action (step %d follows it)", step);
  if (schedule_is_compute(kind)) return check_compute(c, st, rank, step);
  if (schedule_is_p2p(kind)) return check_transfer(c, st, rank, step);
  return check_finishing(c, st, rank, step);
}

/* At the end of a rank's list: every pair ran both ways and sent what its neighbours need. */
static int check_complete(Check *c, RankState *st, int rank) {
  const Schedule *s = c->s;
  int end = s->rank[rank].count;
  for (int chunk = 0; chunk < s->vpp; chunk++)
    for (int j = 0; j < s->microbatches; j++) {
      int stage = chunk * s->pp + rank;
      unsigned char state = st->state[chunk * s->microbatches + j];
      if (!(state & DONE_F)) return fail(c, rank, end, "the list ends without %dF%d", stage, j);
      if (!(state & DONE_B)) return fail(c, rank, end, "the list ends without %dB%d", stage, j);
      if (is_remote(s, stage, stage + 1) && !(state & SENT_F))
        return fail(c, rank, end, "the output of %dF%d is never sent (no %dSEND_F%d)", stage, j,
                    stage, j);
      if (is_remote(s, stage, stage - 1) && !(state & SENT_B))
        return fail(c, rank, end, "the input gradient of %dB%d is never sent (no %dSEND_B%d)",
                    stage, j, stage, j);
    }
  for (int chunk = 0; chunk < s->vpp; chunk++)
    if (st->reduced[chunk] < 0)
      return fail(c, rank, end, "the list has no %dREDUCE_GRAD", chunk * s->pp + rank);
  if (st->step_at < 0) return fail(c, rank, end, "the list does not end with STEP");
  return 0;
}

static int check_rank(Check *c, int rank, int *embed_step) {
  const Schedule *s = c->s;
  size_t pairs = (size_t)s->vpp * s->microbatches;
  RankState st = {.embed = -1, .step_at = -1};
  st.state = schedule_alloc(pairs, 1);
  st.f_step = schedule_alloc(pairs, sizeof *st.f_step);
  st.b_count = schedule_alloc((size_t)s->vpp, sizeof *st.b_count);
  st.reduced = schedule_alloc((size_t)s->vpp, sizeof *st.reduced);
  for (int chunk = 0; chunk < s->vpp; chunk++) st.reduced[chunk] = -1;
  int status = 0;
  for (int step = 0; step < s->rank[rank].count && !status; step++)
    status = check_action(c, &st, rank, step);
  if (!status) status = check_complete(c, &st, rank);
  *embed_step = st.embed;
  free(st.state);
  free(st.f_step);
  free(st.b_count);
  free(st.reduced);
  return status;
}

/* ---- matching: the k-th send on a link meets the k-th receive, of the same tensor ---- */

static int ordinal_suffix_index(int k) { return k % 100 / 10 == 1 ? 0 : k % 10; }

static const char *ordinal(int k, char *buf) {
  static const char *const suffix[] = {"th", "st", "nd", "rd", "th", "th", "th", "th", "th", "th"};
  snprintf(buf, 32, "%d%s", k, suffix[ordinal_suffix_index(k)]);
  return buf;
}

/* Pairs the sends of `kind` on `sender` with the matching receives on the peer, in order. */
static int match_link(Check *c, int sender, ActionKind send_kind) {
  const Schedule *s = c->s;
  ActionKind recv_kind = send_kind == ACTION_SEND_F ? ACTION_RECV_F : ACTION_RECV_B;
  int shift = send_kind == ACTION_SEND_F ? 1 : -1, receiver = (sender + shift + s->pp) % s->pp;
  const ActionList *out = &s->rank[sender], *in = &s->rank[receiver];
  int i = 0, j = 0, k = 0;
  char n1[64], n2[64], o[32];
  for (;; k++) {
    while (i < out->count && out->action[i].kind != send_kind) i++;
    while (j < in->count && in->action[j].kind != recv_kind) j++;
    if (i == out->count && j == in->count) return 0;
    if (j == in->count)
      return fail_near(c, sender, i, receiver, -1, "%s has no matching receive on rank %d",
                       name_of(&out->action[i], n1), receiver);
    if (i == out->count)
      return fail_near(c, receiver, j, sender, -1, "%s has no matching send on rank %d",
                       name_of(&in->action[j], n1), sender);
    const Action *a = &out->action[i], *b = &in->action[j];
    if (a->stage + shift != b->stage || a->microbatch != b->microbatch) {
      return fail_near(c, sender, i, receiver, j,
                       "%s is the %s transfer to rank %d, but rank %d's %s receive from rank %d is "
                       "%s (its step %d); "
                       "the two ranks order their transfers differently",
                       name_of(a, n1), ordinal(k + 1, o), receiver, receiver, o, sender,
                       name_of(b, n2), j);
    }
    c->partner[sender][i++] = j;
    c->partner[receiver][j++] = i - 1;
  }
}

static int match_all(Check *c, const int *embed_step) {
  const Schedule *s = c->s;
  for (int r = 0; r < s->pp; r++)
    if (match_link(c, r, ACTION_SEND_F) || match_link(c, r, ACTION_SEND_B)) return -1;
  int first = 0, last = (s->stages - 1) % s->pp;
  if ((embed_step[first] >= 0) != (embed_step[last] >= 0)) {
    int has = embed_step[first] >= 0 ? first : last, other = has == first ? last : first;
    char n[64];
    return fail_near(
        c, has, embed_step[has], other, -1, "%s has no partner %dEMBED_REDUCE on rank %d",
        name_of(at(s, has, embed_step[has]), n), has == first ? s->stages - 1 : 0, other);
  }
  if (embed_step[first] >= 0) {
    c->partner[first][embed_step[first]] = embed_step[last];
    c->partner[last][embed_step[last]] = embed_step[first];
  }
  return 0;
}

/* ---- the dry run: groups block until every send and receive in them is matched ---- */

typedef struct {
  int *pc;                /* [rank]: the next step to run */
  unsigned char **posted; /* [rank][step]: posted (a send, receive or EMBED_REDUCE reached) */
} DryRun;

static int waits_on(const Action *a) {
  return schedule_is_p2p(a->kind) || a->kind == ACTION_EMBED_REDUCE;
}

/* Runs rank r as far as it goes; returns whether it moved. */
static int advance(Check *c, DryRun *run, int r) {
  const Schedule *s = c->s;
  int start = run->pc[r];
  while (run->pc[r] < s->rank[r].count) {
    int step = run->pc[r], size = waits_on(at(s, r, step)) ? group_size(s, r, step) : 1, ready = 1;
    for (int i = step; i < step + size; i++) {
      const Action *a = at(s, r, i);
      if (!waits_on(a)) continue;
      run->posted[r][i] = 1;
      ready &= run->posted[a->peer][c->partner[r][i]];
    }
    if (!ready) break;
    run->pc[r] += size;
  }
  return run->pc[r] != start;
}

/* The first action of rank r's blocked group whose partner is not posted. */
static int first_unmatched(Check *c, DryRun *run, int r) {
  int step = run->pc[r];
  for (int i = step; i < step + group_size(c->s, r, step); i++) {
    const Action *a = at(c->s, r, i);
    if (waits_on(a) && !run->posted[a->peer][c->partner[r][i]]) return i;
  }
  return step;
}

static int report_deadlock(Check *c, DryRun *run) {
  const Schedule *s = c->s;
  int r = 0;
  while (run->pc[r] == s->rank[r].count) r++;
  int i = first_unmatched(c, run, r);
  const Action *a = at(s, r, i);
  int peer = a->peer, partner = c->partner[r][i];
  char n1[64], n2[64], n3[64];
  const char *blocked = run->pc[peer] < s->rank[peer].count
                            ? name_of(at(s, peer, run->pc[peer]), n3)
                            : "its end";
  c->focus = run->pc;
  return fail_near(c, r, run->pc[r], peer, -1,
                   "deadlock: every rank is blocked; %s waits for rank %d's %s (its step %d), but "
                   "rank %d is blocked at step "
                   "%d (%s)",
                   name_of(a, n1), peer, name_of(at(s, peer, partner), n2), partner, peer,
                   run->pc[peer], blocked);
}

static int dry_run(Check *c) {
  const Schedule *s = c->s;
  DryRun run = {schedule_alloc((size_t)s->pp, sizeof(int)),
                schedule_alloc((size_t)s->pp, sizeof(unsigned char *))};
  for (int r = 0; r < s->pp; r++) run.posted[r] = schedule_alloc((size_t)s->rank[r].count, 1);
  int moved = 1, done = 0;
  while (moved && !done) {
    moved = 0;
    done = 1;
    for (int r = 0; r < s->pp; r++) {
      moved |= advance(c, &run, r);
      done &= run.pc[r] == s->rank[r].count;
    }
  }
  int status = done ? 0 : report_deadlock(c, &run);
  for (int r = 0; r < s->pp; r++) free(run.posted[r]);
  free(run.posted);
  free(run.pc);
  return status;
}

int validate_schedule(const Schedule *s, ScheduleFault *fault) {
  Check c = {s, fault, schedule_alloc((size_t)s->pp, sizeof(int *)), NULL};
  int *embed_step = schedule_alloc((size_t)s->pp, sizeof(int)), status = 0;
  memset(fault, 0, sizeof *fault);
  for (int r = 0; r < s->pp; r++)
    c.partner[r] = schedule_alloc((size_t)s->rank[r].count, sizeof(int));
  for (int r = 0; r < s->pp && !status; r++) status = check_rank(&c, r, &embed_step[r]);
  if (!status) status = match_all(&c, embed_step);
  if (!status) status = dry_run(&c);
  for (int r = 0; r < s->pp; r++) free(c.partner[r]);
  free(c.partner);
  free(embed_step);
  return status;
}
