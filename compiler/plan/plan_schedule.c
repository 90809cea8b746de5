/* plan_schedule.c: the plan's pipeline schedule: generated (or read), lowered, validated, given its
 * activation slots, and simulated with per-chunk costs from the cost model and the machine. */
#include <stdlib.h>
#include <string.h>

#include "cost/kernel_time.h"
#include "plan/plan.h"

/* ---- costs ---------------------------------------------------------------------------------- */

/* Seconds of one microbatch through a chunk, by pass: its layers' kernels and its embedding's
 * and head's, each TP collective blocking the kernels around it; recomputation runs each layer's
 * forward again before its backward. `tp` gets the part that is TP collectives. */
static double chunk_seconds(const Plan *p, const Chunk *c, int pass, double *tp) {
  const StageTime *t = p->times;
  double seconds = c->layers * t[1].seconds[pass], comm = c->layers * t[1].tp_seconds[pass];
  if (pass == PASS_BACKWARD && p->par.recompute == RECOMPUTE_FULL)
    seconds += c->layers * t[1].seconds[PASS_FORWARD],
        comm += c->layers * t[1].tp_seconds[PASS_FORWARD];
  if (c->has_embed) seconds += t[0].seconds[pass], comm += t[0].tp_seconds[pass];
  if (c->has_head) seconds += t[2].seconds[pass], comm += t[2].tp_seconds[pass];
  if (tp) *tp = comm;
  return seconds;
}

/* The parameter elements a chunk holds, one TP rank's share. */
static double chunk_params(const Plan *p, const Chunk *c) {
  const ModelCost *k = &p->cost;
  return c->layers * (double)k->block.params_local + (c->has_embed ? k->embed.params_local : 0) +
         (c->has_head ? (c->has_embed ? k->head.params_local : k->head.params_local_used) : 0);
}

/* The data-parallel group of a rank: tp ranks apart. */
static Link dp_link(const Plan *p) {
  return kernel_group_link(&p->machine, p->par.tp, p->par.dp);
}

/* The chunk's fp32 gradients all-reduced over DP in buckets of one layer (the runtime's), or
 * reduce-scattered with the distributed optimizer, the replicated parameters' gradients summed
 * over TP, and those of key/value heads over the ranks holding each. The buckets overlap the
 * chunk's last backward unless the layout reduces after the whole backward (then the REDUCE_GRAD
 * action starts them all). */
static void chunk_reduce(const Plan *p, const Chunk *c, StageCost *s) {
  const Parallel *par = &p->par;
  Link dp = dp_link(p), tp = kernel_group_link(&p->machine, 1, par->tp);
  RingKind kind = par->distributed_optimizer ? RING_REDUCESCATTER : RING_ALLREDUCE;
  double grads = 4 * chunk_params(p, c);
  double summed = c->layers * (double)p->cost.block.tp_summed_bytes;
  double copied = c->layers * (double)p->cost.block.copies_summed_bytes;
  int copies = p->model.tp_copies > 1 ? p->model.tp_copies : 1;
  Link copy_link = kernel_group_link(&p->machine, 1, copies);
  s->reduce = kernel_collective(&dp, kind, grads, par->dp).seconds +
              kernel_collective(&tp, RING_ALLREDUCE, summed, par->tp).seconds +
              kernel_collective(&copy_link, RING_ALLREDUCE, copied, copies).seconds;
  if (par->dp == 1 || c->layers == 0 || par->grad_reduce_after) return;
  double layer_share = (double)p->cost.block.params_local / chunk_params(p, c);
  s->reduce_tail = s->reduce * (1 - (c->layers - 1) * layer_share);
  s->reduce_overlap = s->backward * (c->layers - 1) / c->layers;
}

/* The parameter elements of the pipeline rank that holds the most. */
static double most_rank_params(const Plan *p) {
  double most = 0;
  for (int r = 0; r < p->par.pp; r++) {
    double params = 0;
    for (int c = r; c < p->nchunks; c += p->par.pp) params += chunk_params(p, &p->chunks[c]);
    if (params > most) most = params;
  }
  return most;
}

/* The optimizer step over the rank's parameters (with the distributed optimizer, its 1/dp shard),
 * memory-bound: the global gradient norm (the fp32 gradients read), then Adam (per parameter the
 * fp32 gradient read, m, v and the fp32 master weight read and written, the training-precision
 * weight written, the gradient zeroed). */
static double optimizer_seconds(const Plan *p) {
  double shard = most_rank_params(p) / plan_optimizer_shards(&p->par);
  double bytes_per_param = 4 + 3 * 8 + (p->machine.activation_bytes == 2 ? 2 : 0) + 4;
  return kernel_stream(&p->machine, MEMORY_GRAD_NORM, 4 * shard).seconds +
         kernel_stream(&p->machine, MEMORY_OPTIMIZER, shard * bytes_per_param).seconds;
}

/* With the distributed optimizer, the updated weights all-gathered over DP in the training
 * precision once the step is done, nothing overlapping it (the runtime's order); else none. */
static double gather_seconds(const Plan *p) {
  if (!p->par.distributed_optimizer) return 0;
  Link dp = dp_link(p);
  double bytes = most_rank_params(p) * p->machine.activation_bytes;
  return kernel_collective(&dp, RING_ALLGATHER, bytes, p->par.dp).seconds;
}

static double chunk_both(const Plan *p, int c) {
  return chunk_seconds(p, &p->chunks[c], PASS_FORWARD, NULL) +
         chunk_seconds(p, &p->chunks[c], PASS_BACKWARD, NULL);
}

/* Rank r works after the first microbatch's forward through the chunks before it (chunks
 * 0..r-1), and its last backward goes back through them before the optimizer step (and the
 * weights' all-gather after it). */
void plan_rank_work(const Plan *p, PlanBound *b) {
  memset(b, 0, sizeof *b);
  double m = p->microbatches, optimizer = optimizer_seconds(p), gather = gather_seconds(p);
  double fill = 0;
  for (int r = 0; r < p->par.pp; r++) {
    PlanBound rank = {.fill = fill, .optimizer = optimizer, .gather = gather};
    for (int c = r; c < p->nchunks; c += p->par.pp) {
      const Chunk *k = &p->chunks[c];
      double tf, tb;
      rank.busy += m * (chunk_seconds(p, k, PASS_FORWARD, &tf) +
                        chunk_seconds(p, k, PASS_BACKWARD, &tb));
      rank.tp += m * (tf + tb);
      if (p->par.recompute == RECOMPUTE_FULL)
        rank.recompute += m * k->layers *
                          (p->times[1].seconds[PASS_FORWARD] -
                           p->times[1].tp_seconds[PASS_FORWARD]);
      if (p->par.recompute == RECOMPUTE_SELECTIVE)
        rank.recompute += m * plan_recompute_seconds(p, k->layers, k->has_embed, k->has_head);
    }
    rank.iteration = rank.fill + rank.busy + rank.optimizer + rank.gather;
    if (rank.iteration > b->iteration) *b = rank;
    fill += chunk_both(p, r);
  }
}

void plan_costs(const Plan *p, Costs *costs, int pipeline_free) {
  const Machine *m = &p->machine;
  const Parallel *par = &p->par;
  simulate_costs_init(costs, p->nchunks);
  for (int s = 0; s < p->nchunks; s++) {
    StageCost *c = &costs->stage[s];
    c->forward = chunk_seconds(p, &p->chunks[s], PASS_FORWARD, NULL);
    c->backward = chunk_seconds(p, &p->chunks[s], PASS_BACKWARD, NULL);
    int rank = p->chunks[s].rank, next = (rank + 1) % par->pp;
    int back = (rank + par->pp - 1) % par->pp;
    if (!pipeline_free) {
      PipelineTransfer forward = pipeline_transfer(p, rank, next);
      PipelineTransfer backward = pipeline_transfer(p, rank, back);
      c->send_forward = forward.seconds, c->gather_forward = forward.gather_seconds;
      c->send_backward = backward.seconds, c->gather_backward = backward.gather_seconds;
    }
    chunk_reduce(p, &p->chunks[s], c);
    c->activation_bytes = (double)p->chunk_memory[s].size * m->activation_bytes;
  }
  Link ends = kernel_p2p_link(m, (par->pp - 1) * par->tp * par->dp);
  costs->embed_reduce = kernel_collective(&ends, RING_ALLREDUCE, plan_tied_bytes(p), 2).seconds;
  costs->optimizer = optimizer_seconds(p);
  costs->gather = gather_seconds(p);
}

/* The iteration split by where its time goes, on the rank that finishes last: the pipeline's
 * share is what the same schedule loses when transfers take no time. */
static void plan_iteration_time(Plan *p, const Timeline *pipeline_free) {
  const Timeline *t = &p->timeline;
  IterationTime *it = &p->time;
  double busiest = 0, tp = 0;
  for (int r = 0; r < p->par.pp; r++) {
    double rank_tp = 0;
    for (int c = r; c < p->nchunks; c += p->par.pp) {
      double f, b;
      chunk_seconds(p, &p->chunks[c], PASS_FORWARD, &f);
      chunk_seconds(p, &p->chunks[c], PASS_BACKWARD, &b);
      rank_tp += p->microbatches * (f + b);
    }
    if (t->busy[r] >= busiest) busiest = t->busy[r], tp = rank_tp;
  }
  Costs costs;
  plan_costs(p, &costs, 0);
  it->tp = tp;
  it->compute = t->ideal - tp;
  it->pp = t->flush - pipeline_free->flush;
  it->bubble = pipeline_free->flush - t->ideal;
  it->optimizer = costs.optimizer;
  it->gather = costs.gather;
  it->dp = t->iteration - t->flush - it->optimizer;
  simulate_costs_free(&costs);
}

/* ---- the schedule --------------------------------------------------------------------------- */

static int lowered_and_valid(Plan *p, Diag *d) {
  int tied = p->model.tied && p->par.pp > 1;
  lower_schedule(&p->schedule, (tied ? LOWER_TIED_EMBEDDING : 0) |
                                   (p->par.grad_reduce_after ? LOWER_REDUCE_AFTER : 0));
  ScheduleFault fault;
  if (validate_schedule(&p->schedule, &fault))
    return diag(d, "schedule %s: %s", p->par.schedule, fault.message);
  return 0;
}

int plan_schedule(Plan *p, Diag *d) {
  const Parallel *par = &p->par;
  if (schedule_generate(par->schedule, par->pp, par->vpp, p->microbatches, &p->schedule, d))
    return -1;
  if (lowered_and_valid(p, d)) return -1;
  slots_assign(&p->schedule, &p->slots);
  for (int c = 0; c < p->nchunks; c++) p->chunk_memory[c].slots = p->slots.per_chunk[c];
  return 0;
}

int plan_simulate(Plan *p, Diag *d) {
  Costs costs;
  if (p->unit_costs) simulate_costs_unit(&costs, p->nchunks);
  else plan_costs(p, &costs, 0);
  int status = simulate_schedule(&p->schedule, &costs, &p->timeline, d);
  simulate_costs_free(&costs);
  if (status || p->unit_costs) return status;
  Timeline pipeline_free;
  plan_costs(p, &costs, 1);
  status = simulate_schedule(&p->schedule, &costs, &pipeline_free, d);
  simulate_costs_free(&costs);
  if (status == 0) plan_iteration_time(p, &pipeline_free);
  simulate_timeline_free(&pipeline_free);
  return status;
}

void plan_free_schedule(Plan *p) {
  slots_free(&p->slots, p->par.pp);
  simulate_timeline_free(&p->timeline);
  schedule_free(&p->schedule);
}

void plan_write_trace(const Plan *p, FILE *f) {
  timeline_trace_write(&p->schedule, &p->timeline, f);
}
void plan_write_svg(const Plan *p, FILE *f) { timeline_svg_write(&p->schedule, &p->timeline, f); }
