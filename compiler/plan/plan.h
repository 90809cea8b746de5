/* plan.h: the plan: a model under a layout with everything the passes worked out (layouts and
 * collectives, chunks on ranks, costs, bytes on the wire, memory per rank), ready to print. */
#ifndef PLAIT_PLAN_H
#define PLAIT_PLAN_H

#include <stdio.h>

#include "cost/cost.h"
#include "ir/graph.h"
#include "cost/machine.h"
#include "passes/memplan.h"
#include "passes/remat.h"
#include "options.h"
#include "front/parallel.h"
#include "schedule/partition.h"
#include "schedule/schedule.h"
#include "schedule/simulate.h"
#include "schedule/slots.h"
#include "cost/stage_time.h"

enum { PRECISION_FP32, PRECISION_BF16, PRECISIONS };

/* Where a chunk keeps one microbatch in flight (its slot), in elements; -1: the chunk has none. */
/* --recompute selective: one stage's choice of forward nodes to recompute, priced on the machine
 * (one microbatch, one tensor-parallel rank, kernels timed before fusion). */
typedef struct {
  char *chosen;         /* per forward node: recomputed in the backward */
  char *closure;        /* scratch: the nodes one candidate needs */
  double *seconds;      /* per node: its kernels' time */
  double *would;        /* per tensor kept: what recomputing its producer would add, or -1 */
  int ntensors;         /* of would */
  double stage_seconds; /* the stage's forward and backward */
  double budget;        /* the time the recomputation may add */
  double spent;         /* the time it adds */
} RecomputeChoice;

typedef struct {
  int64_t input;    /* its input activation (chunks after the first) */
  int64_t embed;    /* the embedding's saved activations (chunk 0) */
  int64_t layers;   /* each layer's saved activations, one after another; recomputing, each layer's
                       output alone (the next layer's input), and a layer's activations are re-run
                       into the rank's recompute region just before its backward */
  int64_t head;     /* the head's saved activations (the last chunk) */
  int64_t output;   /* its output, sent on (not the last chunk) */
  int64_t grad_out; /* the gradient of its output, received (not the last chunk) */
  int64_t grad_in;  /* the gradient of its input, sent back (chunks after the first) */
  int64_t size;
  int slots;        /* microbatches in flight through it at once */
} ChunkMemory;

typedef struct {
  int64_t params;                  /* parameter elements one TP rank of this pipeline rank holds */
  double weights[PRECISIONS];      /* bytes: fp32 weights / bf16 weights */
  double gradients[PRECISIONS];    /* fp32 gradients in both */
  double optimizer[PRECISIONS];    /* Adam m and v (fp32) / plus the fp32 master weights */
  /* activation elements the rank allocates: its chunks' slots, scratch, ... */
  int64_t activation_elems;
  /* their bytes, in the machine's activation precision, and the scores a materialised attention
   * kernel keeps (StageTime.saved_scores) */
  double activations;
  double peak_inflight;            /* microbatches whose activations are held at the peak */
  double total;                    /* all of it, in the machine's precision */
} RankMemory;

/* Where an iteration's time goes on the rank that finishes last: its compute (kernels), the TP
 * collectives inside it, the pipeline's bubble, waits for pipeline transfers, the data-parallel
 * reduction left after the last backward (with the distributed optimizer, the reduce-scatter's
 * tail and the weights' all-gather after the step), and the optimizer step. They add up to the
 * iteration time. */
typedef struct {
  double compute, tp, bubble, pp, dp, optimizer;
  double gather; /* of dp: the weights' all-gather after the step (distributed optimizer) */
} IterationTime;

typedef struct {
  Model model;
  Parallel par;
  Machine machine;
  /* PRECISION_BF16 when the machine trains in bf16, else PRECISION_FP32 */
  int precision;
  ModelCost cost;
  /* embed, block (one layer), head: every kernel timed on the machine */
  StageTime times[3];
  int microbatches;
  int nchunks;
  Chunk *chunks;                   /* pp·vpp, chunk c on rank c mod pp */
  RankMemory *ranks;               /* per pipeline rank */
  StageMemory memory[3];           /* embed, block, head: where one microbatch's tensors live */
  ChunkMemory *chunk_memory;       /* per chunk */
  /* the activation between layers and chunks (one TP rank's share) */
  int64_t io_elems;
  int64_t scratch_elems;           /* per rank, shared by every stage */
  /* per rank: one layer's saved activations, re-run (--recompute full) */
  int64_t recompute_elems;
  /* --recompute selective: per stage what the remat pass recomputes, and the work its nodes add
   * (one microbatch, one tensor-parallel rank, timed before fusion) */
  RecomputeChoice remat_choice[3];
  Remat remat[3];
  KernelTime remat_work[3];
  int masked_lm;                   /* the loss ignores targets of -1 (BERT's masked positions) */
  Schedule schedule;               /* lowered and validated: every rank's actions */
  Slots slots;                     /* the activation slot of every action */
  Timeline timeline;               /* the simulated iteration */
  int unit_costs;                  /* simulated with forward 1, backward 2, communication free */
  /* GEMMs of one input stay apart (--separate-gemms): no fuse_gemm */
  int separate_gemms;
  /* bytes one rank sends per iteration (the busiest) */
  double bytes_tp, bytes_pp, bytes_dp, bytes_embed;
  double bytes_pp_nodes;           /* of bytes_pp, those that cross nodes (that rank's) */
  int pp_scattered;                /* transfers across nodes go scattered over TP */
  IterationTime time;              /* where the iteration's time goes */
} Plan;

/* Runs the passes for `o` (model file, layout flags, --set). With o->print naming a pass
 * (shapes, shard, autodiff, recompute, fuse, partition, memory, schedule, costs), prints that
 * pass's form to `out` and stops there, returning 1. Returns 0 with the plan built, or -1 with
 * the reason in d. */
int plan_build(const Options *o, Plan *p, FILE *out, Diag *d);
/* For plait tune: the passes that depend on the model and on tp, mbs and sequence parallelism
 * alone, and selective recomputation or not (traced, sharded, differentiated, recomputed,
 * fused, every kernel timed, each stage's memory planned); then plan_layout, again and again, for
 * each pp, vpp, dp, schedule and recomputation under them (selective where the model was planned
 * for it, none or full where not), the same passes and checks as plan_build from the cut on.
 * Both return 0, or -1 with the reason in d. */
int plan_model(const Options *o, Plan *p, Diag *d);
int plan_layout(Plan *p, const Parallel *par, Diag *d);

/* What a layout costs before its schedule is lowered and simulated: the iteration takes at least
 * as long as the busiest rank's kernels, after the first microbatch's forward reached it and
 * before its last backward is back at rank 0, and the optimizer step (no other waits); the
 * fullest rank's memory is at least its weights, gradients and optimizer state and the
 * microbatches its schedule's compute order keeps in flight. */
typedef struct {
  double iteration; /* seconds, at least */
  double busy;      /* seconds: that rank's forwards and backwards, recomputation and TP included */
  double recompute; /* of which the recomputed forwards' kernels */
  double tp;        /* of which TP collectives */
  double fill;      /* seconds: the pipeline's fill and drain before and after that rank's work */
  double optimizer; /* seconds: the optimizer step */
  double gather;    /* seconds: the weights' all-gather after it (distributed optimizer) */
  double memory;    /* bytes, at least */
} PlanBound;
/* As plan_layout up to the cut and the chunks' slots; when the weights, gradients and optimizer
 * state of a rank alone pass `capacity` bytes, stops there (memory is then theirs). Returns 0,
 * or -1 with the reason (the rules plan_build refuses a layout by) in d. */
int plan_bound(Plan *p, const Parallel *par, double capacity, PlanBound *b, Diag *d);
/* As plan_bound for `par`, which differs from the layout p was last bounded for in the
 * distributed optimizer alone: the chunks, their work and their slots are the same, so only the
 * optimizer step, the weights' all-gather and the memory are worked out again. */
int plan_bound_optimizer(Plan *p, const Parallel *par, double capacity, PlanBound *b, Diag *d);
/* The ranks Adam's state and the fp32 master weights are sharded over: dp with the distributed
 * optimizer, else 1. */
double plan_optimizer_shards(const Parallel *par);
/* Bytes of the tied embedding's gradient a rank sums with the other end of the pipeline: the
 * table's, or with the distributed optimizer its 1/dp share (the rank's shard alone). */
double plan_tied_bytes(const Plan *p);
/* The rows a rank's experts receive in one mixture of a layer per microbatch, sized at run time
 * (ep > 1): under balanced routing and at worst (every rank's rows to this rank's experts), and
 * the bytes of their activations rank 0 keeps for the backward, as the memory table counts them
 * (balanced) and at worst. Zeros without experts spread. */
typedef struct {
  int64_t rows, worst_rows;
  double bytes, worst_bytes;
} ExpertRowsPlan;
ExpertRowsPlan plan_expert_rows(const Plan *p);
/* The busiest rank's work per iteration from the kernels' times (plan_schedule.c). */
void plan_rank_work(const Plan *p, PlanBound *b);
void plan_free(Plan *p);

void plan_write_text(const Plan *p, FILE *f);
void plan_write_json(const Plan *p, FILE *f);
/* Their layout: every field of the layout table (layout_fields.h), as text and as JSON. */
void plan_write_layout_text(const Parallel *par, FILE *f);
void plan_write_layout_json(const Parallel *par, FILE *f);
/* The block's graph with every tensor's layout and every inserted collective (Graphviz). */
void plan_write_dot(const Plan *p, FILE *f);
/* The simulated iteration: Chrome trace events, and the schedule drawn as the papers draw it. */
void plan_write_trace(const Plan *p, FILE *f);
void plan_write_svg(const Plan *p, FILE *f);

/* An activation (or its gradient) sent from the pipeline rank of one chunk to another's: whether
 * the two are on different nodes, whether it goes scattered over the TP ranks and all-gathered in
 * the receiving node, the bytes each rank sends, the seconds it takes (pipeline_transfer.c). */
typedef struct {
  int across_nodes, scattered;
  double bytes, seconds;
  double gather_seconds; /* of seconds: the all-gather in the receiving node (scattered) */
} PipelineTransfer;
PipelineTransfer pipeline_transfer(const Plan *p, int from_rank, int to_rank);

/* plan_schedule.c, for plan.c: the schedule generated, lowered, validated and given its slots; the
 * simulated iteration; what both hold freed. */
int plan_schedule(Plan *p, Diag *d);
int plan_simulate(Plan *p, Diag *d);
/* The per-chunk costs the simulation takes, from the kernels' times on the plan's machine; with
 * `pipeline_free`, pipeline transfers take no time (to tell their share of the iteration). */
void plan_costs(const Plan *p, Costs *costs, int pipeline_free);
/* plan_costs_print.c: --print costs: each chunk's kernels with their times and bounds, the
 * iteration's time by where it goes. */
void plan_print_costs(const Plan *p, FILE *f);
/* One line: the iteration's time by where it goes, and the FLOP/s per device it comes to. */
void plan_print_time_breakdown(const Plan *p, FILE *f);
/* The model's FLOPs per iteration (Eq. 3's count) over the iteration time and the devices. */
double plan_device_flops(const Plan *p);
void plan_free_schedule(Plan *p);

/* plan_recompute.c: with --recompute selective, the remat pass on each stage and the work its
 * recomputed nodes add (after autodiff, before fusion); 0, or -1 with the reason in d. */
int plan_recompute(Plan *p, Diag *d);
/* Seconds the recomputation adds to `layers` layers and the embedding and head. */
double plan_recompute_seconds(const Plan *p, int layers, int embed, int head);
/* --print recompute: per stage the tensors kept and recomputed, bytes each per microbatch, the
 * bytes saved and the work added. */
void plan_print_recompute(const Plan *p, FILE *f);
void plan_free_recompute(Plan *p);

#endif
