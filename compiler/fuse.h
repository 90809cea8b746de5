/* fuse.h: elementwise fusion: a chain of elementwise nodes whose intermediate values nothing else
 * reads (bias add, GeLU, SiLU·up, dropout, residual add, scaling; and their gradients) becomes one
 * node, that is one kernel, forward and backward alike. */
#ifndef PLAIT_FUSE_H
#define PLAIT_FUSE_H

#include "graph.h"

/* Fuses every stage graph in place; returns the number of nodes merged away. */
int fuse_model(Model *m);

/* Marks each cross entropy whose logits nothing else reads and that the vocabulary does not split:
 * its forward takes the gradient while each row of logits is in cache (grad_in_forward) and its
 * backward node has nothing left to do. Returns the number marked. */
int fuse_xent(Graph *g);

#endif
