/* memplan.c: saved-region offsets, and scratch offsets reused by liveness (best fit). */
#include "passes/memplan.h"

#include <stdlib.h>
#include <string.h>

#include "passes/autodiff.h"

/* a statistic (real) or an integer of a route takes up to two activation elements (bf16) */
enum { ALIGN = 16, STATS_UNITS = 2 };

static int64_t aligned(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

int64_t memplan_room(const Model *m, const Tensor *t, int tp) {
  return aligned(tensor_local_elems(m, t, tp) * (t->dtype != DT_REAL ? STATS_UNITS : 1));
}

/* Which region holds tensor t; -1 for tensors the plan places (saved or scratch). */
static int fixed_region(const Graph *g, int t) {
  const Tensor *x = &g->tensors[t];
  if (x->kind == T_PARAM) return REGION_PARAM;
  if (x->kind == T_CONST) return REGION_CONST;
  if (x->kind == T_PARAM_GRAD) return REGION_PARAM_GRAD;
  if (x->dtype == DT_INT && x->kind == T_INPUT) return REGION_DATA;
  if (t == g->grad_output) return REGION_GRAD_OUT;
  if (t == g->grad_input) return REGION_GRAD_IN;
  if (x->kind == T_INPUT) return REGION_INPUT;
  if (x->ndim == 0) return REGION_LOSS;
  return -1;
}

/* The node index of t's last reader (its producer's index when nothing reads it). */
static int last_use(const Graph *g, int t) {
  int last = g->tensors[t].producer;
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i].nin; k++)
      if (g->nodes[i].in[k] == t) last = i;
  return last;
}

typedef struct {
  int64_t offset, size;
  int until; /* node index after which the block is free */
} Block;

/* Best fit among gaps between live blocks at node `now`; blocks sorted by offset. */
static int64_t place(Block *live, int *nlive, int64_t size, int now, int until, int64_t *high) {
  int n = 0;
  for (int i = 0; i < *nlive; i++)
    if (live[i].until >= now) live[n++] = live[i];
  *nlive = n;
  int64_t best = -1, best_gap = -1, cursor = 0;
  for (int i = 0; i <= n; i++) {
    int64_t end = i < n ? live[i].offset : INT64_MAX;
    int64_t gap = end - cursor;
    if (gap >= size && (best < 0 || gap < best_gap)) best = cursor, best_gap = gap;
    if (i < n) cursor = live[i].offset + live[i].size;
  }
  int at = 0;
  while (at < n && live[at].offset < best) at++;
  memmove(&live[at + 1], &live[at], (size_t)(n - at) * sizeof *live);
  live[at] = (Block){best, size, until};
  (*nlive)++;
  if (best + size > *high) *high = best + size;
  return best;
}

void memplan_stage(const Model *m, const Graph *g, int tp, StageMemory *s) {
  s->region = calloc((size_t)g->ntensors + 1, sizeof *s->region);
  s->offset = calloc((size_t)g->ntensors + 1, sizeof *s->offset);
  s->saved = s->scratch = 0;
  Block *live = calloc((size_t)g->ntensors + 1, sizeof *live);
  int nlive = 0;
  for (int t = 0; t < g->ntensors; t++) {
    int r = fixed_region(g, t);
    s->region[t] = r >= 0 ? (Region)r : REGION_SCRATCH;
    s->offset[t] = -1;
  }
  /* saved: what backward reads of the forward pass, and the stage output (a forward node's value
   * recomputed in the backward lives in scratch) */
  for (int t = 0; t < g->ntensors; t++) {
    const Tensor *x = &g->tensors[t];
    if (s->region[t] != REGION_SCRATCH || x->kind != T_ACT || x->ndim == 0 || x->copy_of >= 0)
      continue;
    if (t == g->output || autodiff_saved(g, t)) {
      s->region[t] = REGION_SAVED;
      s->offset[t] = s->saved;
      s->saved += memplan_room(m, x, tp);
    }
  }
  /* scratch, in node order; an in-place output shares its input's place */
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = &g->nodes[i];
    for (int k = 0; k < n->nout; k++) {
      int t = n->out[k];
      if (s->region[t] != REGION_SCRATCH || s->offset[t] >= 0) continue;
      if (k == 0 && n->inplace >= 0) { /* the input's place, kept as long as the output lives */
        int in = n->in[n->inplace];
        s->region[t] = s->region[in];
        s->offset[t] = s->offset[in];
        for (int b = 0; b < nlive; b++)
          if (s->region[in] == REGION_SCRATCH && live[b].offset == s->offset[in])
            live[b].until = last_use(g, t);
        continue;
      }
      s->offset[t] = place(live, &nlive, memplan_room(m, &g->tensors[t], tp), i, last_use(g, t),
                           &s->scratch);
    }
  }
  free(live);
}

void memplan_print(const Model *m, const Graph *g, const StageMemory *s, int tp, FILE *f) {
  static const char *const regions[] = {"saved", "scratch",    "input", "grad out", "grad in",
                                        "param", "param grad", "data",  "loss"};
  fprintf(f, "stage %s: saved %lld elements per microbatch, scratch %lld\n", g->name,
          (long long)s->saved, (long long)s->scratch);
  for (int t = 0; t < g->ntensors; t++) {
    if (s->region[t] != REGION_SAVED && s->region[t] != REGION_SCRATCH) continue;
    fprintf(f, "  %-32s %-8s at %10lld, %10lld elements\n", g->tensors[t].name,
            regions[s->region[t]], (long long)s->offset[t],
            (long long)tensor_local_elems(m, &g->tensors[t], tp));
  }
}

void memplan_free(StageMemory *s) {
  free(s->region);
  free(s->offset);
  memset(s, 0, sizeof *s);
}
