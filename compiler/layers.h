/* layers.h: layers that differ: the block traced once per layer and compared with layer 0's; the
 * attention options a layer sets for itself are kept per layer, anything else that differs is refused. */
#ifndef PLAIT_LAYERS_H
#define PLAIT_LAYERS_H

#include "diag.h"
#include "graph.h"

/* Layer `layer`'s block (traced into `variant`) against layer 0's (m->block): the same nodes, tensors
 * and parameters, attention options aside, which are recorded for the layer. 0, or -1 with d set. */
int layers_compare(Model *m, const Graph *variant, int layer, Diag *d);

/* After the last layer: attention nodes whose options differ between layers are marked per layer, the
 * others keep layer 0's. */
void layers_finish(Model *m);

#endif
