/* cost.h: the cost model: parameters, FLOPs, collectives, bytes on the wire and activation bytes
 * of each stage graph, read off the sharded, differentiated graphs. */
#ifndef PLAIT_COST_H
#define PLAIT_COST_H

#include <stdint.h>

#include "ir/graph.h"
#include "front/parallel.h"

enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER, COLL_KINDS };
enum { PASS_FORWARD, PASS_BACKWARD, PASSES };

typedef struct {
  /* FLOPs of one microbatch over all TP ranks (GEMMs and attention, as Eq. 3) */
  double flops[PASSES];
  /* bytes one TP rank's other kernels (norms, elementwise, embedding, cross entropy) read and
   * write per microbatch: their time is memory's */
  double bytes[PASSES];
  int collectives[PASSES][COLL_KINDS]; /* TP collectives per microbatch (the block: per layer) */
  /* bytes one TP rank sends for them per microbatch (ring algorithms) */
  double tp_bytes[PASSES];
  /* expert parallelism: the exchanges of routed rows over the ep ranks, and the bytes a rank sends
   * in them under uniform routing (each of its routed rows bound for each ep rank alike:
   * routed·(ep−1)/ep rows of their width per exchange), one microbatch */
  int ep_exchanges[PASSES];
  double ep_bytes[PASSES];
  /* parameters the stage makes (the block: one layer), padding excluded */
  int64_t params;
  /* those a token computes with: an expert's share of a mixture's, k of E experts */
  int64_t params_active;
  int64_t params_padded;         /* the same with padding (the vocabulary rounded up) */
  int64_t params_local;          /* the shares one TP rank holds */
  int64_t params_expert_local;   /* of them, experts' spread over ep ranks (reduced over dp/ep) */
  /* the shares of every parameter the stage uses, shared ones too (the tied embedding in the
   * head): what a rank holding it stores */
  int64_t params_local_used;
  /* fp32 gradients of replicated parameters summed over TP once per iteration (norms and
   * row-parallel biases under sequence parallelism) */
  int64_t tp_summed_bytes;
  /* fp32 gradients of parameters whose pieces several TP ranks hold (key/value heads fewer than
   * tp), summed over those ranks once per iteration */
  int64_t copies_summed_bytes;
  int64_t params_copied_local; /* the shares of those parameters one TP rank holds */
} GraphCost;

typedef struct {
  GraphCost embed, block, head; /* block: one layer */
  int64_t params_total;          /* the model, padding excluded (what a checkpoint stores) */
  int64_t params_active;         /* those a token computes with; params_total without experts */
  int64_t params_padded;
  double flops_forward, flops_backward, flops_recompute, flops_per_iteration; /* the global batch */
  /* the tied embedding's gradient, reduced between first and last stage */
  int64_t tied_bytes;
} ModelCost;

/* Costs every stage graph; activation elements count activation_bytes each (2 for bf16, 4 for
 * fp32). */
void cost_model(const Model *m, const Parallel *par, int activation_bytes, ModelCost *c);

/* Ring algorithms over n ranks: bytes each rank sends for a tensor of `bytes` bytes. */
double cost_ring_allreduce(double bytes, int n);
double cost_ring_allgather(double bytes, int n);
double cost_ring_reducescatter(double bytes, int n);
/* Bytes a rank sends per iteration for the data-parallel reduction of `params` fp32 gradients over
 * d ranks: a ring all-reduce; with the distributed optimizer a reduce-scatter of them, then an
 * all-gather of the updated weights, `weight_bytes` a parameter. */
double cost_dp_bytes(double params, int d, int distributed_optimizer, int weight_bytes);

#endif
