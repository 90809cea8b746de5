/* autodiff.h: reverse-mode differentiation of the sharded stage graphs. Every primitive has a
 * backward rule; elementwise expressions differentiate symbolically; the backward collectives
 * come out as the adjoints of the forward ones (all-reduce <-> identity, all-gather <->
 * reduce-scatter, slice -> all-gather) or where a replicated tensor's gradient arrives as
 * partial sums (Megatron's f). */
#ifndef PLAIT_AUTODIFF_H
#define PLAIT_AUTODIFF_H

#include "ir/diag.h"
#include "ir/graph.h"

/* Appends the backward pass to each stage graph: the head's from the loss, the block's and the
 * embedding's from the gradient of their output (a new T_GRAD input, g->grad_output). Sets
 * g->grad_input and marks parameters whose gradients are TP partial sums (grad_tp_sum). */
int autodiff_model(Model *m, Diag *d);

/* Is forward tensor t read by the backward pass (an activation kept for backward)? */
int autodiff_saved(const Graph *g, int t);

#endif
