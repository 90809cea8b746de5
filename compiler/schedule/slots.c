/* slots.c: assigning activation slots along each rank's lowered action list. */
#include "schedule/slots.h"

#include <stdlib.h>
#include <string.h>

static int same_rank(const Schedule *s, int stage, int other) {
  return other >= 0 && other < s->stages && other % s->pp == stage % s->pp;
}

/* The neighbouring stage an action also touches on the same rank, or -1. */
static int neighbour_stage(const Schedule *s, const Action *a) {
  if (a->kind == ACTION_F && same_rank(s, a->stage, a->stage - 1)) return a->stage - 1;
  if (a->kind == ACTION_B && same_rank(s, a->stage, a->stage + 1)) return a->stage + 1;
  return -1;
}

static int touches(const Action *a) {
  return a->microbatch >= 0 && a->stage >= 0 && a->kind != ACTION_REDUCE_GRAD;
}

/* The index of the action after which the slots `a` touches may go: itself, or for a send or
 * receive the end of its group (the runtime completes a group as a whole). */
static int group_end(const ActionList *list, int i) {
  int end = i;
  if (!schedule_is_p2p(list->action[i].kind)) return end;
  while (end + 1 < list->count && schedule_is_p2p(list->action[end + 1].kind) &&
         list->action[end + 1].joined)
    end++;
  return end;
}

typedef struct {
  int *last;   /* [stage·m + microbatch]: the action index after which its slot is free */
  int *held;   /* [stage·m + microbatch]: its slot, -1 while it has none */
  char *busy;  /* [stage·m + slot] */
  int *count;  /* [stage]: slots in use now */
} RankState;

static int take(const Schedule *s, RankState *r, int stage, int microbatch, int *per_chunk) {
  int key = stage * s->microbatches + microbatch;
  if (r->held[key] >= 0) return r->held[key];
  int slot = 0;
  while (r->busy[stage * s->microbatches + slot]) slot++;
  r->busy[stage * s->microbatches + slot] = 1;
  r->held[key] = slot;
  if (++r->count[stage] > per_chunk[stage]) per_chunk[stage] = r->count[stage];
  return slot;
}

static void give_back(const Schedule *s, RankState *r, int stage, int microbatch) {
  int key = stage * s->microbatches + microbatch;
  r->busy[stage * s->microbatches + r->held[key]] = 0;
  r->held[key] = -1;
  r->count[stage]--;
}

/* Frees the pairs touched by actions first..last whose last use ends at `last`. */
static void free_ended(const Schedule *s, const ActionList *list, RankState *r, int first,
                       int last) {
  for (int i = first; i <= last; i++) {
    const Action *a = &list->action[i];
    if (!touches(a)) continue;
    int stages[2] = {a->stage, neighbour_stage(s, a)};
    for (int k = 0; k < 2; k++) {
      int key = stages[k] * s->microbatches + a->microbatch;
      if (stages[k] >= 0 && r->last[key] == last && r->held[key] >= 0)
        give_back(s, r, stages[k], a->microbatch);
    }
  }
}

static void assign_rank(const Schedule *s, int rank, Slots *out, RankState *r) {
  const ActionList *list = &s->rank[rank];
  int pairs = s->stages * s->microbatches;
  for (int k = 0; k < pairs; k++) r->last[k] = -1, r->held[k] = -1;
  memset(r->busy, 0, (size_t)pairs);
  memset(r->count, 0, (size_t)s->stages * sizeof *r->count);
  for (int i = 0; i < list->count; i++) {
    const Action *a = &list->action[i];
    if (!touches(a)) continue;
    int end = group_end(list, i), n = neighbour_stage(s, a);
    r->last[a->stage * s->microbatches + a->microbatch] = end;
    if (n >= 0) r->last[n * s->microbatches + a->microbatch] = end;
  }
  int group_start = 0;
  for (int i = 0; i < list->count; i++) {
    const Action *a = &list->action[i];
    out->slot[rank][i] = out->neighbour[rank][i] = -1;
    if (!schedule_is_p2p(a->kind) || !a->joined) group_start = i;
    if (touches(a)) {
      int n = neighbour_stage(s, a);
      out->slot[rank][i] = take(s, r, a->stage, a->microbatch, out->per_chunk);
      if (n >= 0) out->neighbour[rank][i] = take(s, r, n, a->microbatch, out->per_chunk);
    }
    if (group_end(list, i) == i) free_ended(s, list, r, group_start, i);
  }
}

void slots_assign(const Schedule *s, Slots *out) {
  int pairs = s->stages * s->microbatches;
  RankState r = {calloc((size_t)pairs, sizeof(int)), calloc((size_t)pairs, sizeof(int)),
                 calloc((size_t)pairs, 1), calloc((size_t)s->stages, sizeof(int))};
  out->slot = calloc((size_t)s->pp, sizeof *out->slot);
  out->neighbour = calloc((size_t)s->pp, sizeof *out->neighbour);
  out->per_chunk = calloc((size_t)s->stages, sizeof *out->per_chunk);
  for (int rank = 0; rank < s->pp; rank++) {
    out->slot[rank] = calloc((size_t)s->rank[rank].count + 1, sizeof(int));
    out->neighbour[rank] = calloc((size_t)s->rank[rank].count + 1, sizeof(int));
    assign_rank(s, rank, out, &r);
  }
  free(r.last), free(r.held), free(r.busy), free(r.count);
}

void slots_free(Slots *out, int pp) {
  for (int rank = 0; rank < pp && out->slot; rank++)
    free(out->slot[rank]), free(out->neighbour[rank]);
  free(out->slot);
  free(out->neighbour);
  free(out->per_chunk);
  memset(out, 0, sizeof *out);
}
