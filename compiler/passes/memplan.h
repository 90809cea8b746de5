/* memplan.h: the static memory plan of each stage graph: where every tensor of one microbatch
 * lives. Activations the backward pass reads (and the stage's output, the next layer's input)
 * get fixed offsets in the stage's saved region, kept from a microbatch's forward to its
 * backward; everything else shares a per-rank scratch region, offsets reused by liveness.
 * Offsets are in elements of the activation type, aligned to 16 elements. */
#ifndef PLAIT_MEMPLAN_H
#define PLAIT_MEMPLAN_H

#include <stdint.h>
#include <stdio.h>

#include "ir/graph.h"

typedef enum {
  REGION_SAVED,     /* the stage's saved region of this (chunk, microbatch) */
  REGION_SCRATCH,   /* the rank's scratch region */
  REGION_INPUT,     /* the stage's input activation (the previous layer's output) */
  REGION_GRAD_OUT,  /* the gradient of the stage's output, given to its backward */
  REGION_GRAD_IN,   /* the gradient of the stage's input, its backward's result */
  REGION_PARAM,     /* a parameter */
  REGION_PARAM_GRAD,/* a parameter's gradient (accumulated into) */
  REGION_DATA,      /* token ids and targets of the microbatch */
  REGION_LOSS,      /* the scalar loss, accumulated into the rank's total */
  REGION_CONST,     /* a constant of the model, uploaded once when the program starts */
} Region;

typedef struct {
  Region *region;   /* per tensor */
  int64_t *offset;  /* per tensor, within its region (elements) */
  int64_t saved;    /* elements of the saved region */
  int64_t scratch;  /* elements of scratch the stage needs */
} StageMemory;

/* Room for a tensor in activation elements: its local elements (a statistic in real precision
 * takes two), aligned. */
int64_t memplan_room(const Model *m, const Tensor *t, int tp);
/* Plans one stage graph for tensor-parallel degree tp. */
void memplan_stage(const Model *m, const Graph *g, int tp, StageMemory *s);
void memplan_free(StageMemory *s);
/* The stage's tensors with their regions and offsets (the pass's printed form). */
void memplan_print(const Model *m, const Graph *g, const StageMemory *s, int tp, FILE *f);

#endif
