/* shard.h: tensor parallelism as layouts: every tensor is R (replicated), S(axis) (split) or P
 * (partial sums) over the TP group. Parameters take theirs from their hints; the pass propagates
 * layouts through the forward graph and inserts a collective (or a local slice) wherever a
 * consumer needs a layout its producer does not give: P->R all-reduce, P->S reduce-scatter, S->R
 * all-gather, R->S slice. Linear elementwise nodes of partial sums stay partial: their reduction
 * waits for a consumer that needs it. */
#ifndef PLAIT_SHARD_H
#define PLAIT_SHARD_H

#include "ir/diag.h"
#include "ir/graph.h"
#include "front/parallel.h"

/* Lays out and converts all three stage graphs (forward nodes; run before autodiff). With tp = 1
 * everything is replicated and nothing is inserted. Errors: a split that tp does not divide. */
int shard_model(Model *m, const Parallel *par, Diag *d);

/* The layout a stage boundary carries: R, or S(seq) under sequence parallelism. */
Layout shard_residual_layout(const Model *m, const Parallel *par);

/* The layouts of node n's outputs from its inputs' layouts, for forward and backward primitives
 * alike. Returns 0, or -1 when the inputs' layouts do not go together. */
int shard_output_layouts(const Model *m, const Graph *g, const Node *n, Layout *out);

/* Adds the node converting tensor t to layout `to` (nothing when it has it already) at the end
 * of g; returns the converted tensor. Marks the new nodes backward when `backward`. */
int shard_convert(Model *m, Graph *g, int t, Layout to, int backward, const char *where);

#endif
