/* partition.c: uniform and cost-balanced cuts of the layer sequence into pipeline chunks. */
#include "schedule/partition.h"

#include <string.h>

static void assign(const Parallel *par, int nchunks, const int *counts, double embed, double layer,
                   double head, Chunk *chunks) {
  int first = 0;
  for (int c = 0; c < nchunks; c++) {
    Chunk *k = &chunks[c];
    memset(k, 0, sizeof *k);
    k->first_layer = first;
    k->layers = counts[c];
    k->has_embed = c == 0;
    k->has_head = c == nchunks - 1;
    k->rank = c % par->pp;
    k->cost = counts[c] * layer + (k->has_embed ? embed : 0) + (k->has_head ? head : 0);
    first += counts[c];
  }
}

/* Can the layers be cut so that no chunk costs more than `limit`? Greedy from the front: each chunk
 * takes as many layers as fit, leaving at least one layer for every chunk after it. */
static int fits(int layers, int nchunks, double embed, double layer, double head, double limit,
                int *counts) {
  int left = layers;
  for (int c = 0; c < nchunks; c++) {
    double fixed = (c == 0 ? embed : 0) + (c == nchunks - 1 ? head : 0);
    int room = layer > 0 ? (int)((limit - fixed) / layer + 1e-9) : left;
    int must_leave = nchunks - 1 - c;
    int take = c == nchunks - 1 ? left : room < left - must_leave ? room : left - must_leave;
    if (take < 1 || (c == nchunks - 1 && fixed + take * layer > limit * (1 + 1e-12))) return 0;
    counts[c] = take;
    left -= take;
  }
  return left == 0;
}

/* The smallest limit is one of the few values fixed + k·layer: try them in increasing order. */
static void balance(int layers, int nchunks, double embed, double layer, double head, int *counts) {
  double best = -1;
  for (int k = 1; k <= layers; k++)
    for (int edge = 0; edge < 3; edge++) {
      double limit = k * layer +
                     (edge == 1   ? embed
                      : edge == 2 ? head
                                  : 0) +
                     (edge == 1 && nchunks == 1 ? head : 0);
      if ((best < 0 || limit < best) && fits(layers, nchunks, embed, layer, head, limit, counts))
        best = limit;
    }
  fits(layers, nchunks, embed, layer, head, best, counts);
}

/* Among cuts as good as the greedy one, spread layers evenly: move layers from a chunk to its right
 * neighbour while that keeps the largest cost and evens the two. */
static void even_out(int nchunks, double embed, double layer, double head, int *counts) {
  double limit = 0;
  for (int c = 0; c < nchunks; c++) {
    double cost = counts[c] * layer + (c == 0 ? embed : 0) + (c == nchunks - 1 ? head : 0);
    if (cost > limit) limit = cost;
  }
  for (int moved = 1; moved;) {
    moved = 0;
    for (int c = 0; c + 1 < nchunks; c++) {
      double right = (counts[c + 1] + 1) * layer + (c + 1 == nchunks - 1 ? head : 0);
      if (counts[c] > counts[c + 1] + 1 && right <= limit * (1 + 1e-12))
        counts[c]--, counts[c + 1]++, moved = 1;
    }
  }
}

int partition_layers(const Parallel *par, int layers, double embed_cost, double layer_cost,
                     double head_cost, Chunk *chunks, Diag *d) {
  int nchunks = par->pp * par->vpp;
  int counts[nchunks];
  if (layers < nchunks)
    return diag(d,
                "%d layers cannot be cut into pp·vpp = %d·%d = %d chunks of at least one layer; "
                "lower --pp or --vpp",
                layers, par->pp, par->vpp, nchunks);
  if (strcmp(par->partition, "uniform") == 0) {
    if (layers % nchunks != 0)
      return diag(d,
                  "%d layers do not divide into pp·vpp = %d equal chunks; choose --pp and --vpp "
                  "whose product "
                  "divides %d, or --partition balanced",
                  layers, nchunks, layers);
    for (int c = 0; c < nchunks; c++) counts[c] = layers / nchunks;
  } else {
    balance(layers, nchunks, embed_cost, layer_cost, head_cost, counts);
    even_out(nchunks, embed_cost, layer_cost, head_cost, counts);
  }
  assign(par, nchunks, counts, embed_cost, layer_cost, head_cost, chunks);
  return 0;
}
