/* checkpoint.h: --save and --load: every parameter and its Adam state as a full logical tensor by
 * name in DIR/model.safetensors, with the step, the seed, the layer count and the model's configuration,
 * so any layout loads any checkpoint and no other model loads it. */
#ifndef PLAIT_CHECKPOINT_H
#define PLAIT_CHECKPOINT_H

#include <stdint.h>

#include "trainer.h"

/* Collective over all ranks; rank 0 writes (temporary name, sync, rename). */
void checkpoint_save(Trainer *t, const char *dir, int64_t step);
/* Every rank reads its own shares; returns the step to continue from (the seed is restored too). A
 * checkpoint of another model (name, layer count, configuration, set of tensors, shapes) ends the job
 * with one line naming what differs. */
int64_t checkpoint_load(Trainer *t, const char *dir);

#endif
