/* plan_recompute.c: selective recomputation in the plan: the remat pass run on each stage, the
 * work its recomputed nodes add (timed before fusion merges them into the backward's kernels),
 * and `plait plan --print recompute`: per stage what is kept and what is recomputed. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

/* Arithmetic per output element of a memory-bound node: an expression's operations; a norm's
 * mean, variance, normalisation, weight and bias (8); rope's rotation (3); a copy's none. */
static double ops_per_element(const Node *n) {
  double ops = 0;
  if (n->op == OP_NORM) return 8;
  if (n->op == OP_ROPE) return 3;
  for (int i = 0; n->op == OP_EW && i < n->expr.count; i++)
    ops += n->expr.n[i].op != E_IN && n->expr.n[i].op != E_CONST;
  return ops;
}

/* The kernels of g's recomputed nodes, one after another, timed before fusion; their FLOPs
 * counted from their expressions (the kernel times count none for memory-bound kernels). */
static KernelTime recomputed_work(const Plan *p, const Graph *g) {
  StageTime t;
  KernelTime sum = {0};
  stage_time(&p->model, g, &p->par, &p->machine, &t);
  for (int k = 0; k < t.count; k++) {
    const Node *n = &g->nodes[t.kernels[k].node];
    if (!n->recomputed) continue;
    sum.seconds += t.kernels[k].time.seconds;
    sum.bytes += t.kernels[k].time.bytes;
    sum.flops += ops_per_element(n) *
                 (double)tensor_local_elems(&p->model, &g->tensors[n->out[0]], p->par.tp);
  }
  stage_time_free(&t);
  return sum;
}

int plan_recompute(Plan *p, Diag *d) {
  Graph *stages[3] = {&p->model.embed, &p->model.block, &p->model.head};
  if (p->par.recompute != RECOMPUTE_SELECTIVE) return 0;
  for (int s = 0; s < 3; s++) {
    if (remat_stage(stages[s], &p->remat[s]))
      return diag(d, "%s: stage %s: no memory left for its recomputed nodes", p->model.file,
                  stages[s]->name);
    p->remat_work[s] = recomputed_work(p, stages[s]);
  }
  return 0;
}

double plan_recompute_seconds(const Plan *p, int layers, int embed, int head) {
  const KernelTime *w = p->remat_work;
  return layers * w[1].seconds + (embed ? w[0].seconds : 0) + (head ? w[2].seconds : 0);
}

static double tensor_bytes(const Plan *p, const Graph *g, int t) {
  return (double)memplan_room(&p->model, &g->tensors[t], p->par.tp) * p->machine.activation_bytes;
}

/* One tensor: kept or recomputed, its name, its bytes, and the node that made it and where (a
 * forward value fused into its forward reader has none left). */
static void print_tensor(const Plan *p, const Graph *g, const char *what, int t, FILE *f) {
  int producer = g->tensors[t].producer;
  const Node *n = producer >= 0 ? &g->nodes[producer] : NULL;
  fprintf(f, "  %-10s %-24s %12.0f bytes  %s (%s)\n", what, g->tensors[t].name,
          tensor_bytes(p, g, t), n ? op_name(n->op) : "fused", n ? n->where : "its reader's");
}

static void print_stage(const Plan *p, int s, FILE *f) {
  const Graph *stages[3] = {&p->model.embed, &p->model.block, &p->model.head};
  const Graph *g = stages[s];
  const StageMemory *mem = &p->memory[s];
  const Remat *r = &p->remat[s];
  double kept = 0, recomputed = 0;
  fprintf(f, "stage %s (per microbatch, one tensor-parallel rank):\n", g->name);
  for (int t = 0; t < g->ntensors; t++)
    if (mem->region[t] == REGION_SAVED)
      print_tensor(p, g, "kept", t, f), kept += tensor_bytes(p, g, t);
  for (int k = 0; k < r->count; k++)
    print_tensor(p, g, "recomputed", r->tensors[k], f),
        recomputed += tensor_bytes(p, g, r->tensors[k]);
  const KernelTime *w = &p->remat_work[s];
  fprintf(f,
          "  kept %.0f bytes, recomputed %.0f bytes (saved); the recomputation adds %.4g FLOP "
          "and %.4g bytes moved (%.4g ms) before fusion\n",
          kept, recomputed, w->flops, w->bytes, 1e3 * w->seconds);
}

void plan_print_recompute(const Plan *p, FILE *f) {
  fprintf(f, "recompute %s\n", parallel_recompute_name(p->par.recompute));
  for (int s = 0; s < 3; s++) print_stage(p, s, f);
}

void plan_free_recompute(Plan *p) {
  for (int s = 0; s < 3; s++) remat_free(&p->remat[s]);
}
