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

/* Is forward node i of g memory-bound (elementwise, norm, rope, split, concat, slice) or a TP
 * all-gather, and not the stage's output: a node that may be recomputed? */
int remat_candidate(const Graph *g, int i);

/* Can forward node i be recomputed in the backward, with the nodes marked in chosen recomputed
 * too? Marks in closure the nodes it needs that chosen lacks: i and the producers of its inputs
 * that the backward does not read (never kept), each a candidate. Returns 1 when it can (closure
 * may hold partial marks when it cannot). */
int remat_closure(const Graph *g, const char *chosen, int i, char *closure);

/* After autodiff, before fusion: each forward node marked in chosen (closed under remat_closure)
 * is made again in the backward of g by a copy placed before its first reader; the backward reads
 * the copies. Returns 0, or -1 when the graph's budget refuses the growth. */
int remat_stage(Graph *g, const char *chosen, Remat *r);
void remat_free(Remat *r);

#endif
