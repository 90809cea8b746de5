/* layers.h: layers that differ: the block traced once per layer and compared with layer 0's; the
 * attention options a layer sets for itself are kept per layer, anything else that differs is
 * refused. */
#ifndef PLAIT_LAYERS_H
#define PLAIT_LAYERS_H

#include "ir/diag.h"
#include "ir/graph.h"

/* Layer `layer`'s block (traced into `variant`) against layer 0's (m->block): the same nodes,
 * tensors and parameters, attention options aside, which are recorded for the layer. 0, or -1
 * with d set. */
int layers_compare(Model *m, const Graph *variant, int layer, Diag *d);

/* After the last layer: attention nodes whose options differ between layers are marked per
 * layer, the others keep layer 0's. */
void layers_finish(Model *m);

/* The options a layer may set, by number k: window, softcap, scale, rope_theta. */
enum { LAYER_OPTIONS = 4 };
extern const char *const layer_option_names[LAYER_OPTIONS];

/* Option k at layer `layer` of row `row` of m->layer_attn, and whether it differs between
 * layers. */
double layers_option(const Model *m, int row, int k, int layer);
int layers_option_differs(const Model *m, int row, int k);

#endif
