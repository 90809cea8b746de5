/* partition.h: cutting embed + layers + head into pp·vpp chunks; chunk c lives on pipeline rank
 * c mod pp. */
#ifndef PLAIT_PARTITION_H
#define PLAIT_PARTITION_H

#include "ir/diag.h"
#include "front/parallel.h"

typedef struct {
  int first_layer, layers; /* layers [first_layer, first_layer + layers) */
  int has_embed, has_head; /* chunk 0 holds the embedding, the last chunk the head */
  int rank;                /* pipeline rank: chunk mod pp */
  double cost;             /* the cost the cut balanced */
} Chunk;

/* Cuts `layers` layers into pp·vpp chunks of at least one layer each. "uniform" gives every chunk
 * layers/(pp·vpp) layers (Megatron's cut; they must divide); "balanced" minimises the largest chunk
 * cost, where a layer costs layer_cost and the embedding and head add their costs to the first and
 * last chunk, preferring the most even cut among the best. Fills chunks[0..pp·vpp). */
int partition_layers(const Parallel *par, int layers, double embed_cost, double layer_cost,
                     double head_cost, Chunk *chunks, Diag *d);

#endif
