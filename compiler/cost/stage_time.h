/* stage_time.h: every kernel of a stage graph (embed, one block, head) timed on a machine for
 * one microbatch on one tensor-parallel rank: GEMMs, attention, memory-bound kernels and the TP
 * collectives between them; summed per pass, and listed for --print costs. */
#ifndef PLAIT_STAGE_TIME_H
#define PLAIT_STAGE_TIME_H

#include <stdio.h>

#include "cost/cost.h"
#include "ir/graph.h"
#include "cost/kernel_time.h"
#include "cost/machine.h"
#include "front/parallel.h"

typedef struct {
  int node;          /* its node in the graph */
  /* "", or which part of the node it is ("q·kᵀ", "softmax", "vocab all-reduces"), or which
   * kernels an attention node runs on ("cuDNN") */
  char part[48];
  KernelTime time;
} KernelCost;

typedef struct {
  KernelCost *kernels;
  int count;
  double seconds[PASSES];    /* the pass's kernels one after another, its TP collectives included */
  double tp_seconds[PASSES]; /* of which the TP collectives (they block the compute around them) */
  /* bytes per microbatch a materialised attention kernel keeps from its forward to its backward:
   * the softmax's output, the dropout's mask and output (s×s per local head), beside the graph's
   * own saved tensors */
  double saved_scores;
} StageTime;

void stage_time(const Model *m, const Graph *g, const Parallel *par, const Machine *machine,
                StageTime *t);
void stage_time_free(StageTime *t);
/* One line per kernel: pass, op, output, what part, time, bound, FLOPs and bytes. */
void stage_time_print(const Graph *g, const StageTime *t, FILE *f);

#endif
