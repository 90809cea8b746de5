/* plan.c: running the passes in order and working out what each pipeline rank holds and sends. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

#include "passes/autodiff.h"
#include "passes/experts.h"
#include "passes/fuse.h"
#include "front/host.h"
#include "ir/shape.h"
#include "passes/shard.h"

static int printing(const Options *o, const char *pass) {
  return o && o->print && strcmp(o->print, pass) == 0;
}

static int check_print_option(const Options *o, Diag *d) {
  static const char *const passes[] = {"shapes",    "shard",  "autodiff", "recompute", "fuse",
                                       "partition", "memory", "schedule", "costs",     NULL};
  if (!o->print) return 0;
  for (int i = 0; passes[i]; i++)
    if (strcmp(passes[i], o->print) == 0) return 0;
  return diag(d,
              "--print %s: unknown pass (shapes, shard, autodiff, recompute, fuse, partition, "
              "memory, schedule, costs)",
              o->print);
}

static int choose_machine(const Options *o, Plan *p, Diag *d) {
  if (machine_load(o->machine ? o->machine : "a100", &p->machine, d)) return -1;
  p->precision = p->machine.activation_bytes == 2 ? PRECISION_BF16 : PRECISION_FP32;
  return 0;
}

/* Chunk costs for the cut: forward and backward (and recomputed forward) FLOPs of one
 * microbatch. */
static int cut_chunks(Plan *p, Diag *d) {
  const ModelCost *c = &p->cost;
  int rerun = p->par.recompute == RECOMPUTE_FULL;
  double layer = c->block.flops[0] * (rerun ? 2 : 1) + c->block.flops[1];
  p->nchunks = p->par.pp * p->par.vpp;
  p->chunks = calloc((size_t)p->nchunks, sizeof *p->chunks);
  return partition_layers(&p->par, p->model.layers, c->embed.flops[0] + c->embed.flops[1], layer,
                          c->head.flops[0] + c->head.flops[1], p->chunks, d);
}

/* Each stage's tensors, then each chunk's slot and how many slots the schedule keeps at once. */
static void print_memory_plan(const Plan *p, FILE *out) {
  const Graph *stages[3] = {&p->model.embed, &p->model.block, &p->model.head};
  for (int s = 0; s < 3; s++) memplan_print(&p->model, stages[s], &p->memory[s], p->par.tp, out);
  for (int c = 0; c < p->nchunks; c++) {
    const ChunkMemory *k = &p->chunk_memory[c];
    fprintf(out,
            "chunk %d: slot of %lld elements (input %lld, embed %lld, layers %lld, head %lld, "
            "output %lld, "
            "gradient in %lld, gradient out %lld), %d slots\n",
            c, (long long)k->size, (long long)k->input, (long long)k->embed, (long long)k->layers,
            (long long)k->head, (long long)k->output, (long long)k->grad_out, (long long)k->grad_in,
            k->slots);
  }
}

static void print_partition(const Plan *p, FILE *out) {
  for (int c = 0; c < p->nchunks; c++) {
    const Chunk *k = &p->chunks[c];
    fprintf(out, "chunk %d: rank %d, layers %d..%d%s%s, cost %.4g FLOP\n", c, k->rank,
            k->first_layer, k->first_layer + k->layers - 1, k->has_embed ? " + embed" : "",
            k->has_head ? " + head" : "", k->cost);
  }
}

/* ---- memory ---------------------------------------------------------------------------------- */

/* The slot of a chunk: input, the embedding's and each layer's saved activations, the head's, the
 * output and the two gradients that travel between chunks. */
static ChunkMemory chunk_memory(const Plan *p, const Chunk *c) {
  ChunkMemory s;
  const StageMemory *mem = p->memory;
  int64_t at = 0, io = p->io_elems;
#define TAKE(cond, n) ((cond) ? (at += (n)) - (n) : -1)
  s.input = TAKE(!c->has_embed, io);
  s.embed = TAKE(c->has_embed, mem[0].saved);
  s.layers = TAKE(1, c->layers * (p->par.recompute == RECOMPUTE_FULL ? io : mem[1].saved));
  s.head = TAKE(c->has_head, mem[2].saved);
  if (c->has_head) s.output = -1;
  else if (p->par.recompute == RECOMPUTE_FULL) s.output = s.layers + (c->layers - 1) * io;
  else s.output = s.layers + (c->layers - 1) * mem[1].saved + mem[1].offset[p->model.block.output];
  s.grad_out = TAKE(!c->has_head, io);
  s.grad_in = TAKE(!c->has_embed, io);
#undef TAKE
  s.size = at;
  s.slots = p->microbatches;
  return s;
}

/* A chunk's slot past 2^52 elements (2^12 times the activations of a microbatch of a
 * trillion-parameter GPT) is sizes gone wrong: slots times microbatches would overflow. Checked
 * in double before the slots are laid out in integers. */
static int check_slot_sizes(const Plan *p, Diag *d) {
  for (int c = 0; c < p->nchunks; c++) {
    const Chunk *k = &p->chunks[c];
    double layers = (double)k->layers * (double)p->memory[1].saved;
    double slot = layers + (double)p->memory[0].saved + (double)p->memory[2].saved +
                  4.0 * (double)p->io_elems;
    if (slot * p->microbatches > 4503599627370496.0)
      return diag(d,
                  "%s: chunk %d keeps %.3g activation elements per microbatch (%d layers), times "
                  "%d microbatches, "
                  "beyond what plait plans (2^52); check the config's sizes (seq, hidden, layers) "
                  "and the batch",
                  p->model.file, c, slot, k->layers, p->microbatches);
  }
  return 0;
}

/* Where one microbatch's tensors of each stage live, and the rank's scratch: the layout's tp
 * alone decides. */
static void plan_stage_memory(Plan *p) {
  Model *m = &p->model;
  const Graph *stages[3] = {&m->embed, &m->block, &m->head};
  for (int s = 0; s < 3; s++) {
    memplan_stage(m, stages[s], p->par.tp, &p->memory[s]);
    if (p->memory[s].scratch > p->scratch_elems) p->scratch_elems = p->memory[s].scratch;
  }
  p->io_elems = tensor_local_elems(m, &m->block.tensors[m->block.output], p->par.tp);
}

static int plan_memory(Plan *p, Diag *d) {
  p->recompute_elems = p->par.recompute == RECOMPUTE_FULL ? p->memory[1].saved : 0;
  if (check_slot_sizes(p, d)) return -1;
  p->chunk_memory = calloc((size_t)p->par.pp * p->par.vpp, sizeof *p->chunk_memory);
  for (int c = 0; c < p->nchunks; c++) p->chunk_memory[c] = chunk_memory(p, &p->chunks[c]);
  return 0;
}

/* The scores a materialised attention kernel keeps (machine files of Megatron-LM 2021's
 * kernels): each layer's for every microbatch its chunk holds; recomputing, the one layer re-run
 * before its backward. */
static double scores_bytes(const Plan *p, int rank) {
  double per_layer = p->times[1].saved_scores;
  if (per_layer == 0 || p->par.recompute == RECOMPUTE_FULL) return per_layer;
  double bytes = 0;
  for (int k = rank; k < p->nchunks; k += p->par.pp)
    bytes += per_layer * p->chunks[k].layers * p->chunk_memory[k].slots;
  return bytes;
}

double plan_optimizer_shards(const Parallel *par) {
  return par->distributed_optimizer ? par->dp : 1;
}

double plan_tied_bytes(const Plan *p) {
  return (double)p->cost.tied_bytes / plan_optimizer_shards(&p->par);
}

/* The run-time-sized dim of a tensor's axes, or -1. */
static int held_dim_of(const Model *m, const Tensor *t) {
  for (int a = 0; a < t->ndim; a++)
    if (m->dims[t->dims[a]].worst) return t->dims[a];
  return -1;
}

ExpertRowsPlan plan_expert_rows(const Plan *p) {
  const Model *m = &p->model;
  const StageMemory *block = &p->memory[1];
  ExpertRowsPlan x = {0};
  double per_layer = 0, layers = p->par.recompute == RECOMPUTE_FULL; /* the re-run layer's */
  for (int t = 0; t < m->block.ntensors; t++) {
    int held = held_dim_of(m, &m->block.tensors[t]);
    if (held < 0) continue;
    if (!x.rows) x.rows = m->dims[held].size, x.worst_rows = m->dims[held].worst;
    if (block->region[t] == REGION_SAVED)
      per_layer += (double)memplan_room(m, &m->block.tensors[t], p->par.tp);
  }
  for (int k = 0; k < p->nchunks && p->par.recompute != RECOMPUTE_FULL; k += p->par.pp)
    layers += (double)p->chunks[k].layers * p->chunk_memory[k].slots;
  x.bytes = per_layer * layers * p->machine.activation_bytes;
  if (x.rows) x.worst_bytes = x.bytes * (double)x.worst_rows / (double)x.rows;
  return x;
}

/* Parameters, their gradients and Adam state (with the distributed optimizer Adam's and the
 * master weights' 1/dp share), and the activations: the slots of the rank's chunks, its scratch
 * and recompute regions and the two gradients passed between layers. */
static void rank_memory(const Plan *p, int rank, RankMemory *r) {
  const ModelCost *c = &p->cost;
  memset(r, 0, sizeof *r);
  double elems = (double)p->scratch_elems + p->recompute_elems + 2.0 * p->io_elems;
  for (int k = rank; k < p->nchunks; k += p->par.pp) {
    const Chunk *ch = &p->chunks[k];
    elems += (double)p->chunk_memory[k].size * p->chunk_memory[k].slots;

    r->params += ch->layers * c->block.params_local + (ch->has_embed ? c->embed.params_local : 0);
    if (ch->has_head) r->params += ch->has_embed ? c->head.params_local : c->head.params_local_used;
  }
  r->activation_elems = (int64_t)elems;
  r->activations = elems * p->machine.activation_bytes + scores_bytes(p, rank);
  r->peak_inflight = p->timeline.peak_inflight_microbatches
                         ? p->timeline.peak_inflight_microbatches[rank]
                         : 0;
  double n = (double)r->params, shards = plan_optimizer_shards(&p->par);
  r->weights[PRECISION_FP32] = 4 * n, r->gradients[PRECISION_FP32] = 4 * n,
  r->optimizer[PRECISION_FP32] = 8 * n / shards;
  r->weights[PRECISION_BF16] = 2 * n, r->gradients[PRECISION_BF16] = 4 * n,
  r->optimizer[PRECISION_BF16] = 12 * n / shards;
  r->total = r->weights[p->precision] + r->gradients[p->precision] + r->optimizer[p->precision] +
             r->activations;
}

/* Bytes a pipeline rank sends per iteration over each group; the plan keeps the busiest rank's.
 * With the distributed optimizer, DP: the gradients reduce-scattered and the weights gathered. */
static void rank_traffic(Plan *p, int rank) {
  const ModelCost *c = &p->cost;
  double m = p->microbatches, tp = 0, pp = 0, nodes = 0;
  for (int k = rank; k < p->nchunks; k += p->par.pp) {
    const Chunk *ch = &p->chunks[k];
    double forwards = p->par.recompute == RECOMPUTE_FULL ? 2 : 1;
    double per_layer = c->block.tp_bytes[0] * forwards + c->block.tp_bytes[1];
    tp += m * (ch->layers * per_layer +
               (ch->has_embed ? c->embed.tp_bytes[0] + c->embed.tp_bytes[1] : 0) +
               (ch->has_head ? c->head.tp_bytes[0] + c->head.tp_bytes[1] : 0));
    double summed = ch->layers * c->block.tp_summed_bytes +
                    (ch->has_embed ? c->embed.tp_summed_bytes : 0) +
                    (ch->has_head ? c->head.tp_summed_bytes : 0);
    tp += cost_ring_allreduce(summed, p->par.tp); /* once per iteration */
    double copied = ch->layers * c->block.copies_summed_bytes +
                    (ch->has_embed ? c->embed.copies_summed_bytes : 0) +
                    (ch->has_head ? c->head.copies_summed_bytes : 0);
    tp += cost_ring_allreduce(copied, p->model.tp_copies);
    for (int step = -1; step <= 1; step += 2) { /* gradients back, activations on */
      if (k + step < 0 || k + step >= p->nchunks || p->chunks[k + step].rank == rank) continue;
      PipelineTransfer t = pipeline_transfer(p, rank, p->chunks[k + step].rank);
      pp += m * t.bytes, nodes += t.across_nodes ? m * t.bytes : 0;
      p->pp_scattered |= t.scattered;
    }
  }
  /* experts spread over ep ranks: their gradients reduced over the dp/ep replicas of each */
  double experts = 0;
  for (int k = rank; k < p->nchunks; k += p->par.pp)
    experts += p->chunks[k].layers * (double)c->block.params_expert_local;
  double dp = cost_dp_bytes((double)p->ranks[rank].params - experts, p->par.dp,
                            p->par.distributed_optimizer, p->machine.activation_bytes) +
              cost_dp_bytes(experts, p->par.dp / p->par.ep, 0, p->machine.activation_bytes);
  double embed = p->par.pp > 1 && (rank == 0 || rank == p->par.pp - 1)
                     ? cost_ring_allreduce(plan_tied_bytes(p), 2)
                     : 0;
  if (tp > p->bytes_tp) p->bytes_tp = tp;
  if (pp > p->bytes_pp) p->bytes_pp = pp, p->bytes_pp_nodes = nodes;
  if (dp > p->bytes_dp) p->bytes_dp = dp;
  if (embed > p->bytes_embed) p->bytes_embed = embed;
}

/* The passes that depend on the model and on tp, mbs and sequence parallelism alone. */
static int model_passes(const Options *o, Plan *p, FILE *out, Diag *d) {
  Model *m = &p->model;
  if (printing(o, "shapes")) return shape_print(m, out), 1;
  if (shard_model(m, &p->par, d) || experts_spread(m, &p->par, d)) return -1;
  if (printing(o, "shard")) return graph_print(m, out), 1;
  if (!p->separate_gemms) fuse_gemms(m, p->par.tp);
  if (autodiff_model(m, d)) return -1;
  if (printing(o, "autodiff")) return graph_print(m, out), 1;
  if (plan_recompute(p, d)) return -1;
  fuse_model(m);
  fuse_xent(&m->head);
  if (printing(o, "fuse")) return graph_print(m, out), 1;
  const Graph *stages[3] = {&m->embed, &m->block, &m->head};
  for (int s = 0; s < 3; s++) stage_time(m, stages[s], &p->par, &p->machine, &p->times[s]);
  plan_stage_memory(p);
  if (printing(o, "recompute")) return plan_print_recompute(p, out), 1;
  return 0;
}

/* The passes that depend on the rest of the layout: pp, vpp, dp, the schedule, recomputation. */
static int layout_passes(const Options *o, Plan *p, FILE *out, Diag *d) {
  p->microbatches = parallel_microbatches(&p->par);
  cost_model(&p->model, &p->par, p->machine.activation_bytes, &p->cost);
  if (cut_chunks(p, d)) return -1;
  if (printing(o, "partition")) return print_partition(p, out), 1;
  if (plan_memory(p, d) || plan_schedule(p, d)) return -1;
  if (printing(o, "memory")) return print_memory_plan(p, out), 1;
  if (printing(o, "schedule")) return schedule_write_text(&p->schedule, out, 0), 1;
  if (plan_simulate(p, d)) return -1;
  p->ranks = calloc((size_t)p->par.pp, sizeof *p->ranks);
  for (int r = 0; r < p->par.pp; r++) rank_memory(p, r, &p->ranks[r]);
  for (int r = 0; r < p->par.pp; r++) rank_traffic(p, r);
  if (printing(o, "costs")) return plan_print_costs(p, out), 1;
  return 0;
}

static int start_plan(const Options *o, Plan *p, Diag *d) {
  memset(p, 0, sizeof *p);
  if (!o->file) return diag(d, "plan needs a model file: plait plan MODEL.lua");
  if (check_print_option(o, d) || choose_machine(o, p, d)) return -1;
  if (host_build_model(o, &p->par, &p->model, d)) return -1;
  p->unit_costs = o->unit_costs;
  p->separate_gemms = o->separate_gemms;
  p->masked_lm = p->model.masked_lm;
  return 0;
}

int plan_build(const Options *o, Plan *p, FILE *out, Diag *d) {
  if (start_plan(o, p, d)) return -1;
  int status = model_passes(o, p, out, d);
  return status ? status : layout_passes(o, p, out, d);
}

int plan_model(const Options *o, Plan *p, Diag *d) {
  if (start_plan(o, p, d)) return -1;
  return model_passes(NULL, p, NULL, d);
}

static void free_layout(Plan *p) {
  plan_free_schedule(p);
  free(p->chunk_memory);
  free(p->chunks);
  free(p->ranks);
  p->chunk_memory = NULL, p->chunks = NULL, p->ranks = NULL, p->nchunks = 0;
  p->bytes_tp = p->bytes_pp = p->bytes_dp = p->bytes_embed = p->bytes_pp_nodes = 0;
  p->pp_scattered = 0;
  memset(&p->time, 0, sizeof p->time);
}

int plan_layout(Plan *p, const Parallel *par, Diag *d) {
  free_layout(p);
  p->par = *par;
  return layout_passes(NULL, p, NULL, d);
}

static double fullest_rank(Plan *p) {
  double most = 0;
  for (int r = 0; r < p->par.pp; r++) {
    rank_memory(p, r, &p->ranks[r]);
    if (p->ranks[r].total > most) most = p->ranks[r].total;
  }
  return most;
}

/* Each chunk's slots: the microbatches the schedule's compute order keeps in flight through it. */
static int inflight_slots(Plan *p, Diag *d) {
  Schedule s;
  if (schedule_generate(p->par.schedule, p->par.pp, p->par.vpp, p->microbatches, &s, d)) return -1;
  int *peak = calloc((size_t)p->nchunks, sizeof *peak);
  schedule_peak_inflight(&s, peak);
  for (int c = 0; c < p->nchunks; c++) p->chunk_memory[c].slots = peak[c];
  free(peak);
  schedule_free(&s);
  return 0;
}

/* Every chunk keeps at least one microbatch in flight once its slots are counted. */
static int slots_counted(const Plan *p) { return p->chunk_memory[0].slots > 0; }

/* The fullest rank: its weights, gradients and optimizer state alone when they pass `capacity`,
 * else with its chunks' slots. */
static int bound_memory(Plan *p, double capacity, PlanBound *b, Diag *d) {
  b->memory = fullest_rank(p);
  if (b->memory > capacity || slots_counted(p)) return 0;
  if (inflight_slots(p, d)) return -1;
  b->memory = fullest_rank(p);
  return 0;
}

int plan_bound(Plan *p, const Parallel *par, double capacity, PlanBound *b, Diag *d) {
  free_layout(p);
  p->par = *par;
  p->microbatches = parallel_microbatches(&p->par);
  cost_model(&p->model, &p->par, p->machine.activation_bytes, &p->cost);
  if (cut_chunks(p, d) || plan_memory(p, d)) return -1;
  plan_rank_work(p, b);
  p->ranks = calloc((size_t)p->par.pp, sizeof *p->ranks);
  for (int c = 0; c < p->nchunks; c++) p->chunk_memory[c].slots = 0;
  return bound_memory(p, capacity, b, d);
}

int plan_bound_optimizer(Plan *p, const Parallel *par, double capacity, PlanBound *b, Diag *d) {
  p->par = *par;
  plan_rank_work(p, b);
  return bound_memory(p, capacity, b, d);
}

void plan_free(Plan *p) {
  free_layout(p);
  for (int s = 0; s < 3; s++) memplan_free(&p->memory[s]);
  plan_free_recompute(p);
  for (int s = 0; s < 3; s++) stage_time_free(&p->times[s]);
  model_free(&p->model);
  memset(p, 0, sizeof *p);
}
