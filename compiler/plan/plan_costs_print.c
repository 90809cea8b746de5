/* plan_costs_print.c: `plait plan --print costs`: every kernel of the embedding, one layer and
 * the head with its predicted time and what bounds it, each chunk's time per microbatch, and the
 * iteration's time by where it goes. */
#include "escape.h"
#include "plan/plan.h"

double plan_device_flops(const Plan *p) {
  double devices = (double)p->par.tp * p->par.pp * p->par.dp;
  return p->timeline.iteration > 0 ? p->cost.flops_per_iteration / (p->timeline.iteration * devices)
                                   : 0;
}

static void print_stage(const Plan *p, int s, FILE *f) {
  static const char *const names[3] = {"embed", "block (one layer)", "head"};
  const Graph *graphs[3] = {&p->model.embed, &p->model.block, &p->model.head};
  const StageTime *t = &p->times[s];
  fprintf(f, "%s: forward %.4g ms (TP collectives %.4g), backward %.4g ms (TP collectives %.4g)\n",
          names[s], 1e3 * t->seconds[PASS_FORWARD], 1e3 * t->tp_seconds[PASS_FORWARD],
          1e3 * t->seconds[PASS_BACKWARD], 1e3 * t->tp_seconds[PASS_BACKWARD]);
  stage_time_print(graphs[s], t, f);
}

static void print_chunks(const Plan *p, FILE *f) {
  Costs costs;
  plan_costs(p, &costs, 0);
  for (int c = 0; c < p->nchunks; c++) {
    const Chunk *k = &p->chunks[c];
    const StageCost *s = &costs.stage[c];
    fprintf(f,
            "chunk %d (rank %d): %s%d layers%s: forward %.4g ms, backward %.4g ms%s, send %.4g ms, "
            "DP reduction "
            "%.4g ms\n",
            c, k->rank, k->has_embed ? "embed + " : "", k->layers, k->has_head ? " + head" : "",
            1e3 * s->forward, 1e3 * s->backward,
            p->par.recompute != RECOMPUTE_NONE ? " (recompute included)" : "",
            1e3 * s->send_forward, 1e3 * s->reduce);
  }
  simulate_costs_free(&costs);
}

void plan_print_time_breakdown(const Plan *p, FILE *f) {
  const IterationTime *t = &p->time;
  fprintf(f, "iteration   %.4g s = compute %.4g + TP %.4g + bubble %.4g + PP %.4g + DP %.4g",
          p->timeline.iteration, t->compute, t->tp, t->bubble, t->pp, t->dp);
  if (p->par.distributed_optimizer && p->par.dp > 1)
    fprintf(f, " (reduce-scatter, then the weights' all-gather %.4g after the step)", t->gather);
  fprintf(f, " + optimizer %.4g; %.4g TFLOP/s per device (%.1f%% of peak)\n", t->optimizer,
          plan_device_flops(p) / 1e12, 100 * plan_device_flops(p) / p->machine.peak_flops);
}

void plan_print_costs(const Plan *p, FILE *f) {
  char name[ESCAPED_SIZE(sizeof p->machine.name)], origin[ESCAPED_SIZE(sizeof p->machine.origin)];
  fprintf(f, "costs on %s (%s), one microbatch of %d on one TP rank of %d\n",
          escape(ESC_TEXT, p->machine.name, name, sizeof name),
          escape(ESC_TEXT, p->machine.origin, origin, sizeof origin), p->par.mbs, p->par.tp);
  if (p->unit_costs) {
    fprintf(f,
            "(--unit-costs: the schedule is simulated with forward 1, backward 2; the kernels "
            "below are not)\n");
  }
  for (int s = 0; s < 3; s++) print_stage(p, s, f);
  print_chunks(p, f);
  if (!p->unit_costs) plan_print_time_breakdown(p, f);
}
