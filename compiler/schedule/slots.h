/* slots.h: activation slots, planned statically: each (chunk, microbatch) in flight on a rank
 * takes one of its chunk's slots from the first action that touches it to the last, and every
 * action of the lowered plan is told which slot it uses (and which slot of the neighbouring
 * chunk, when activations or gradients pass between two chunks of the same rank). */
#ifndef PLAIT_SLOTS_H
#define PLAIT_SLOTS_H

#include "schedule/schedule.h"

typedef struct {
  /* [rank][action]: the slot of (chunk, microbatch) the action uses, -1 for none */
  int **slot;
  /* [rank][action]: the slot of the neighbouring chunk a forward reads or a backward writes on
   * the same rank, -1 for none */
  int **neighbour;
  /* [stage]: slots the chunk needs, the most microbatches in flight through it at once */
  int *per_chunk;
} Slots;

void slots_assign(const Schedule *s, Slots *out);
void slots_free(Slots *out, int pp);

#endif
