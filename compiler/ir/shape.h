/* shape.h: shape inference over named dims: the output shapes of each forward primitive from its
 * inputs, used while a model is traced and as a pass that re-checks a whole graph. */
#ifndef PLAIT_SHAPE_H
#define PLAIT_SHAPE_H

#include <stdio.h>

#include "ir/diag.h"
#include "ir/graph.h"

typedef struct {
  int nout;
  int ndim[MAX_OUTPUTS];
  int dims[MAX_OUTPUTS][MAX_DIMS];
  DType dtype[MAX_OUTPUTS];
} Shapes;

/* The shapes of node n's outputs from its inputs (forward primitives and collectives).
 * Returns 0, or -1 with a message naming the op and the shapes that do not fit. */
int shape_infer(Model *m, const Graph *g, const Node *n, Shapes *out, Diag *d);

/* Re-infers every forward node of g and checks that the stored shapes agree in size (the splits
 * of a joined GEMM give back the dims of the tensors they were, which inference names after the
 * whole). */
int shape_check(Model *m, const Graph *g, Diag *d);

/* Prints every tensor of every stage with its shape and sizes (the pass's printed form). */
void shape_print(const Model *m, FILE *f);

#endif
