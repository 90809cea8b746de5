/* remat.h: selective activation recomputation (--recompute selective): the memory-bound forward
 * values the backward reads are re-run inside the backward from the values kept. */
#ifndef PLAIT_REMAT_H
#define PLAIT_REMAT_H

#include "ir/graph.h"

/* What the pass did to one stage graph. */
typedef struct {
  int *tensors; /* the forward tensors the backward read that it now recomputes */
  int count;
} Remat;

/* After autodiff, before fusion: in the backward of g, each forward value it reads that a
 * memory-bound node made (elementwise, norm, rope, split, concat, slice) from values kept or
 * recomputable is made again by a copy of that node, placed before its first reader; the
 * backward reads the copy. GEMM outputs, attention's output and statistics, collectives' outputs,
 * the stage's output and the cross entropy stay kept. Returns 0, or -1 when the graph's budget
 * refuses the growth. */
int remat_stage(Graph *g, Remat *r);
void remat_free(Remat *r);

#endif
