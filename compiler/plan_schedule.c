/* plan_schedule.c: the plan's pipeline schedule: generated (or read), lowered, validated, given its
 * activation slots, and simulated with per-chunk costs from the cost model and the machine. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* ---- costs ---------------------------------------------------------------------------------- */

/* Bytes per second between members of a group whose ranks lie `stride` apart in a group of n. */
static double bandwidth(const Machine *m, int stride, int n) {
  return (long long)stride * n <= m->devices_per_node ? m->intra_node_bw : m->inter_node_bw;
}

/* One microbatch through chunk c: its GEMM and attention FLOPs on one TP rank over the rate, plus its
 * tensor-parallel collectives (which block the compute they sit in). */
static void chunk_times(const Plan *p, const Chunk *c, double *forward, double *backward) {
  const ModelCost *k = &p->cost;
  const Machine *m = p->machine;
  double rate = m->flops * m->efficiency, tp = p->par.tp, link = bandwidth(m, 1, p->par.tp);
  double bf = c->layers * k->block.bytes[0] + (c->has_embed ? k->embed.bytes[0] : 0) + (c->has_head ? k->head.bytes[0] : 0);
  double bb = c->layers * k->block.bytes[1] + (c->has_embed ? k->embed.bytes[1] : 0) + (c->has_head ? k->head.bytes[1] : 0);
  if (p->par.recompute) bb += c->layers * k->block.bytes[0];
  double f = c->layers * k->block.flops[0] + (c->has_embed ? k->embed.flops[0] : 0) + (c->has_head ? k->head.flops[0] : 0);
  double b = c->layers * k->block.flops[1] + (c->has_embed ? k->embed.flops[1] : 0) + (c->has_head ? k->head.flops[1] : 0);
  if (p->par.recompute) b += c->layers * k->block.flops[0];
  double tf = c->layers * k->block.tp_bytes[0] + (c->has_embed ? k->embed.tp_bytes[0] : 0) + (c->has_head ? k->head.tp_bytes[0] : 0);
  double tb = c->layers * k->block.tp_bytes[1] + (c->has_embed ? k->embed.tp_bytes[1] : 0) + (c->has_head ? k->head.tp_bytes[1] : 0);
  if (p->par.recompute) tb += c->layers * k->block.tp_bytes[0];
  *forward = f / tp / rate + bf / m->memory_bw + tf / link;
  *backward = b / tp / rate + bb / m->memory_bw + tb / link;
}

/* The fp32 gradients a chunk reduces over DP, one TP rank's share. */
static double chunk_grad_bytes(const Plan *p, const Chunk *c) {
  const ModelCost *k = &p->cost;
  double params = c->layers * (double)k->block.params_local + (c->has_embed ? k->embed.params_local : 0) +
                  (c->has_head ? (c->has_embed ? k->head.params_local : k->head.params_local_used) : 0);
  return 4 * params;
}

void plan_costs(const Plan *p, Costs *costs) {
  const Machine *m = p->machine;
  const Parallel *par = &p->par;
  double io = (double)p->io_elems * m->activation_bytes;
  double pp_link = bandwidth(m, par->tp * par->dp, par->pp), dp_link = bandwidth(m, par->tp, par->dp);
  simulate_costs_init(costs, p->nchunks);
  for (int s = 0; s < p->nchunks; s++) {
    StageCost *c = &costs->stage[s];
    chunk_times(p, &p->chunks[s], &c->forward, &c->backward);
    c->send_forward = c->send_backward = io / pp_link + m->latency;
    c->reduce = cost_ring_allreduce(chunk_grad_bytes(p, &p->chunks[s]), par->dp) / dp_link;
    c->activation_bytes = (double)p->chunk_memory[s].size * m->activation_bytes;
  }
  costs->embed_reduce = cost_ring_allreduce((double)p->cost.tied_bytes, 2) / m->inter_node_bw + m->latency;
}

/* ---- the schedule --------------------------------------------------------------------------- */

static int lowered_and_valid(Plan *p, Diag *d) {
  int tied = p->model.tied && p->par.pp > 1;
  lower_schedule(&p->schedule, tied ? LOWER_TIED_EMBEDDING : 0);
  ScheduleFault fault;
  if (validate_schedule(&p->schedule, &fault)) return diag(d, "schedule %s: %s", p->par.schedule, fault.message);
  return 0;
}

int plan_schedule(Plan *p, Diag *d) {
  const Parallel *par = &p->par;
  if (schedule_generate(par->schedule, par->pp, par->vpp, p->microbatches, &p->schedule, d)) return -1;
  if (lowered_and_valid(p, d)) return -1;
  slots_assign(&p->schedule, &p->slots);
  for (int c = 0; c < p->nchunks; c++) p->chunk_memory[c].slots = p->slots.per_chunk[c];
  return 0;
}

int plan_simulate(Plan *p, Diag *d) {
  Costs costs;
  if (p->unit_costs) simulate_costs_unit(&costs, p->nchunks);
  else plan_costs(p, &costs);
  int status = simulate_schedule(&p->schedule, &costs, &p->timeline, d);
  simulate_costs_free(&costs);
  return status;
}

void plan_free_schedule(Plan *p) {
  slots_free(&p->slots, p->par.pp);
  simulate_timeline_free(&p->timeline);
  schedule_free(&p->schedule);
}

void plan_write_trace(const Plan *p, FILE *f) { timeline_trace_write(&p->schedule, &p->timeline, f); }
void plan_write_svg(const Plan *p, FILE *f) { timeline_svg_write(&p->schedule, &p->timeline, f); }
