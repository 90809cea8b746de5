/* plan_recompute.c: selective recomputation in the plan: which memory-bound forward values each
 * stage makes again in its backward, chosen by their price on the machine; the remat pass run
 * with that choice; the work its recomputed nodes add (timed before fusion merges them into the
 * backward's kernels); and `plait plan --print recompute`: per stage what is kept, what is
 * recomputed, and what recomputing each kept candidate would cost. */
#include <stdlib.h>
#include <string.h>

#include "passes/autodiff.h"
#include "plan/plan.h"

/* The share of a stage's time (forward and backward, one microbatch) its recomputation may add:
 * values are recomputed most bytes saved per second first while the sum stays within it. */
#define RECOMPUTE_SHARE 0.02

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

static double tensor_bytes(const Plan *p, const Graph *g, int t) {
  return (double)memplan_room(&p->model, &g->tensors[t], p->par.tp) * p->machine.activation_bytes;
}

/* The bytes the backward no longer keeps when forward node i is recomputed. */
static double node_saving(const Plan *p, const Graph *g, int i) {
  double bytes = 0;
  for (int k = 0; k < g->nodes[i].nout; k++)
    if (autodiff_saved(g, g->nodes[i].out[k])) bytes += tensor_bytes(p, g, g->nodes[i].out[k]);
  return bytes;
}

/* Each node's kernel time before fusion (its parts summed); returns the stage's total. */
static double node_seconds(const Plan *p, const Graph *g, double *seconds) {
  StageTime t;
  double total = 0;
  stage_time(&p->model, g, &p->par, &p->machine, &t);
  for (int k = 0; k < t.count; k++)
    seconds[t.kernels[k].node] += t.kernels[k].time.seconds, total += t.kernels[k].time.seconds;
  stage_time_free(&t);
  return total;
}

/* What recomputing forward node i adds to the choice so far: its closure's time and the bytes it
 * saves (closure left marked); -1 seconds when it cannot be recomputed. */
static double price(const Plan *p, const Graph *g, const RecomputeChoice *c, int i,
                    double *saving) {
  memset(c->closure, 0, (size_t)g->nforward);
  *saving = 0;
  if (c->chosen[i] || !remat_closure(g, c->chosen, i, c->closure)) return -1;
  double seconds = 0;
  for (int j = 0; j < g->nforward; j++)
    if (c->closure[j]) seconds += c->seconds[j], *saving += node_saving(p, g, j);
  return seconds;
}

/* The closure of the candidate that saves the most bytes per second added within the budget,
 * marked chosen; 0 when none is left. */
static int choose_next(const Plan *p, const Graph *g, RecomputeChoice *c) {
  int best = -1;
  double best_ratio = 0, best_seconds = 0;
  for (int i = 0; i < g->nforward; i++) {
    double saving, seconds = price(p, g, c, i, &saving);
    if (seconds < 0 || saving <= 0 || c->spent + seconds > c->budget) continue;
    double ratio = saving / (seconds + 1e-15);
    if (best < 0 || ratio > best_ratio) best = i, best_ratio = ratio, best_seconds = seconds;
  }
  if (best < 0) return 0;
  double saving;
  price(p, g, c, best, &saving);
  for (int j = 0; j < g->nforward; j++) c->chosen[j] |= c->closure[j];
  c->spent += best_seconds;
  return 1;
}

/* What recomputing the producer of each forward tensor the backward keeps would add (-1 where it
 * cannot be recomputed), for the report; by tensor, as fusion renumbers the nodes. */
static void price_the_rest(const Plan *p, const Graph *g, RecomputeChoice *c) {
  c->ntensors = g->ntensors;
  c->would = malloc(((size_t)g->ntensors + 1) * sizeof *c->would);
  for (int t = 0; t < g->ntensors; t++) c->would[t] = -1;
  for (int i = 0; i < g->nforward; i++) {
    double saving, seconds = price(p, g, c, i, &saving);
    for (int k = 0; k < g->nodes[i].nout; k++) c->would[g->nodes[i].out[k]] = seconds;
  }
}

int plan_recompute(Plan *p, Diag *d) {
  Graph *stages[3] = {&p->model.embed, &p->model.block, &p->model.head};
  if (p->par.recompute != RECOMPUTE_SELECTIVE) return 0;
  for (int s = 0; s < 3; s++) {
    Graph *g = stages[s];
    RecomputeChoice *c = &p->remat_choice[s];
    c->chosen = calloc((size_t)g->nnodes + 1, 1);
    c->closure = calloc((size_t)g->nnodes + 1, 1);
    c->seconds = calloc((size_t)g->nnodes + 1, sizeof *c->seconds);
    c->stage_seconds = node_seconds(p, g, c->seconds);
    c->budget = RECOMPUTE_SHARE * c->stage_seconds;
    while (choose_next(p, g, c)) {}
    price_the_rest(p, g, c);
    if (remat_stage(g, c->chosen, &p->remat[s]))
      return diag(d, "%s: stage %s: no memory left for its recomputed nodes", p->model.file,
                  g->name);
    p->remat_work[s] = recomputed_work(p, g);
  }
  return 0;
}

double plan_recompute_seconds(const Plan *p, int layers, int embed, int head) {
  const KernelTime *w = p->remat_work;
  return layers * w[1].seconds + (embed ? w[0].seconds : 0) + (head ? w[2].seconds : 0);
}


/* One tensor: kept or recomputed, its name, its bytes, and the node that made it and where (a
 * forward value fused into its forward reader has none left). */
static void print_tensor(const Plan *p, const Graph *g, const char *what, int t, FILE *f) {
  int producer = g->tensors[t].producer;
  const Node *n = producer >= 0 ? &g->nodes[producer] : NULL;
  fprintf(f, "  %-10s %-24s %12.0f bytes  %s (%s)", what, g->tensors[t].name,
          tensor_bytes(p, g, t), n ? op_name(n->op) : "fused", n ? n->where : "its reader's");
}

/* A kept tensor, and what recomputing it would add where it could be. */
static void print_kept(const Plan *p, const Graph *g, const RecomputeChoice *c, int t, FILE *f) {
  print_tensor(p, g, "kept", t, f);
  if (t < c->ntensors && c->would[t] >= 0)
    fprintf(f, "; recomputing it would add %.4g ms (%.2f%% of the stage)", 1e3 * c->would[t],
            100 * c->would[t] / c->stage_seconds);
  fputc('\n', f);
}

static void print_stage(const Plan *p, int s, FILE *f) {
  const Graph *stages[3] = {&p->model.embed, &p->model.block, &p->model.head};
  const Graph *g = stages[s];
  const StageMemory *mem = &p->memory[s];
  const Remat *r = &p->remat[s];
  const RecomputeChoice *c = &p->remat_choice[s];
  double kept = 0, recomputed = 0;
  fprintf(f, "stage %s (per microbatch, one tensor-parallel rank):\n", g->name);
  for (int t = 0; t < g->ntensors; t++)
    if (mem->region[t] == REGION_SAVED) print_kept(p, g, c, t, f), kept += tensor_bytes(p, g, t);
  for (int k = 0; k < r->count; k++) {
    print_tensor(p, g, "recomputed", r->tensors[k], f), fputc('\n', f);
    recomputed += tensor_bytes(p, g, r->tensors[k]);
  }
  const KernelTime *w = &p->remat_work[s];
  fprintf(f,
          "  kept %.0f bytes, recomputed %.0f bytes (saved); the recomputation adds %.4g FLOP "
          "and %.4g bytes moved (%.4g ms) before fusion, %.2f%% of the stage's %.4g ms (at most "
          "%g%%)\n",
          kept, recomputed, w->flops, w->bytes, 1e3 * w->seconds,
          100 * w->seconds / c->stage_seconds, 1e3 * c->stage_seconds, 100 * RECOMPUTE_SHARE);
}

void plan_print_recompute(const Plan *p, FILE *f) {
  fprintf(f, "recompute %s\n", parallel_recompute_name(p->par.recompute));
  for (int s = 0; s < 3; s++) print_stage(p, s, f);
}

void plan_free_recompute(Plan *p) {
  for (int s = 0; s < 3; s++) {
    RecomputeChoice *c = &p->remat_choice[s];
    free(c->chosen), free(c->closure), free(c->seconds), free(c->would);
    memset(c, 0, sizeof *c);
    remat_free(&p->remat[s]);
  }
}
