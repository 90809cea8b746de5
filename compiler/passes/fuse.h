/* fuse.h: fusion passes: elementwise chains as one kernel, the cross entropy's gradient in its
 * forward, and GEMMs of one input as one GEMM. */
#ifndef PLAIT_FUSE_H
#define PLAIT_FUSE_H

#include "ir/graph.h"

/* Elementwise fusion: a chain of elementwise nodes whose intermediate values nothing else reads
 * (bias add, GeLU, SiLU·up, dropout, residual add, scaling; and their gradients) becomes one
 * node, that is one kernel, forward and backward alike. Fuses every stage graph in place;
 * returns the nodes merged away. */
int fuse_model(Model *m);

/* Marks each cross entropy whose logits nothing else reads and that the vocabulary does not split:
 * its forward takes the gradient while each row of logits is in cache (grad_in_forward) and its
 * backward node has nothing left to do. Returns the number marked. */
int fuse_xent(Graph *g);

/* Joins the forward GEMMs that read one input by weights of one tensor-parallel layout (q, k and
 * v; gate and up) into one GEMM over the weights side by side, whose output is split into the
 * tensors they made (fuse_gemm.c). After the shard pass, before autodiff. Returns the GEMMs
 * joined. */
int fuse_gemms(Model *m, int tp);

#endif
