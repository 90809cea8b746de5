/* checkpoint.h: --save, --load and --init: every parameter and its Adam state as a full logical
 * tensor by name in DIR/model.safetensors, with the step, the seed and schedule, the layer count
 * and the model's configuration, so any layout loads any checkpoint and no other model loads it. */
#ifndef PLAIT_CHECKPOINT_H
#define PLAIT_CHECKPOINT_H

#include <stdint.h>

#include "train/batch.h"

/* Collective over all ranks; rank 0 writes (temporary name, sync, rename). */
void checkpoint_save(Trainer *t, const char *dir, int64_t step);
/* Every rank reads its own shares of the weights and Adam's m and v; returns the step to
 * continue from (the seed and schedule are settled too: resume.h). A checkpoint of another model
 * (name, layer count, configuration, set of tensors, shapes) ends the job with one line naming
 * what differs, and so does one of weights only, naming --init. */
int64_t checkpoint_load(Trainer *t, const char *dir);
/* Every rank reads its own shares of the weights alone, from a checkpoint of weights only or a
 * full one (whose Adam state, step, seed and schedule are left unread): Adam starts from zero at
 * step 0, with the command line's seed and schedule. The same model checks, over the weight
 * tensors. */
void checkpoint_init(Trainer *t, const char *dir);

#endif
