/* parallel.h: the parallel layout of a run (tp, pp, vpp, dp, batch sizes, schedule, recomputation,
 * sequence parallelism, when gradients are reduced, the distributed optimizer): read from the model
 * file, overridden by flags, checked before any pass. */
#ifndef PLAIT_PARALLEL_H
#define PLAIT_PARALLEL_H

#include "ir/diag.h"

enum { UNSET = -1 };

/* What a layer keeps for its backward: every intermediate the backward reads (none); its input
 * alone, the whole forward re-run before its backward (full); or the outputs of GEMMs, attention
 * and collectives, the memory-bound values re-run from them inside the backward (selective). */
typedef enum { RECOMPUTE_NONE, RECOMPUTE_FULL, RECOMPUTE_SELECTIVE } Recompute;

typedef struct {
  int tp, pp, vpp, dp;   /* tensor, pipeline, virtual-pipeline (chunks per rank), data parallel */
  /* expert parallel: a mixture's experts spread over ep consecutive data-parallel ranks, E/ep
   * each (Megatron-Core's expert_model_parallel_size, carved out of dp) */
  int ep;
  int mbs, gbs;          /* microbatch and global batch, in sequences */
  char schedule[256];    /* gpipe, 1f1b, interleaved, or a schedule file */
  int recompute;         /* a Recompute */
  int sequence_parallel; /* 1: Megatron's sequence parallelism on the residual stream */
  /* 1: data-parallel gradients all-reduced once the rank's whole backward is done (Megatron-LM's
   * --DDP-impl local); 0: in buckets of one layer during each chunk's last backward */
  int grad_reduce_after;
  /* 1: Adam's moments and the fp32 master weights sharded over the data-parallel ranks (ZeRO stage
   * 1, Megatron-LM's --use-distributed-optimizer): gradients reduce-scattered, weights gathered */
  int distributed_optimizer;
  /* 1 (the default): an activation or gradient that every tensor-parallel rank holds whole and
   * that crosses nodes between pipeline stages is sent a 1/tp slice per rank, then all-gathered
   * inside the receiving node (Narayanan et al. 2021, §4.1) */
  int scatter_gather;
  char partition[32];    /* balanced (by cost) or uniform (layers / chunks, as Megatron) */
} Parallel;

/* Every field UNSET (or empty): nothing given yet. */
void parallel_unset(Parallel *p);
/* Fields of `over` that are set replace those of `base`. */
void parallel_override(Parallel *base, const Parallel *over);
/* Unset fields get their defaults: 1 for sizes, gbs = mbs·dp, schedule 1f1b (interleaved when
 * vpp > 1). */
void parallel_defaults(Parallel *p);
/* "none", "full" or "selective": how --recompute spells a Recompute. */
const char *parallel_recompute_name(int recompute);
/* Microbatches per pipeline per iteration: gbs / (mbs·dp). */
int parallel_microbatches(const Parallel *p);
/* Checks what the layout alone decides (sizes positive, gbs divisible by mbs·dp, ep dividing dp,
 * a known schedule). */
int parallel_check(const Parallel *p, Diag *d);

#endif
