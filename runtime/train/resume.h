/* resume.h: the run a full checkpoint records beside its weights (the seed, the peak learning
 * rate, the warm-up, the decay length and the weight decay) and, on --load, the run that goes
 * on: the checkpoint's values where the command line gives none, so that a resumed run continues
 * exactly as saved; a value the command line gives otherwise stops the job in one line, unless
 * --override-schedule is given (then the command line's values, given or default, are used).
 * Megatron-LM refuses such mismatches alike. */
#ifndef PLAIT_RESUME_H
#define PLAIT_RESUME_H

#include "ckpt/safetensors.h"
#include "train/batch.h"

/* Metadata keys: "seed", "lr", "warmup", "decay_steps" (the effective decay length:
 * --decay-steps when given, else --steps; left out when 0, a run of no steps) and
 * "weight_decay". */
enum { RESUME_KEYS = 5, RESUME_TEXT_LEN = 32 };

/* The run's seed and schedule as metadata entries, their values written into text so that they
 * read back exactly; returns how many (at most RESUME_KEYS). */
int resume_metadata(const Trainer *t, CkptMeta *meta, char (*text)[RESUME_TEXT_LEN]);

/* Sets t->seed, t->schedule and t->adamw.weight_decay for a run that goes on from checkpoint c.
 * A key the checkpoint lacks (one saved before they were recorded) is not compared; one it holds
 * must be in range (the seed a whole number below 2^64, warmup and decay_steps whole numbers, lr
 * and weight_decay finite and at least 0), or the job ends naming it. With --override-schedule
 * none of them is read. */
void resume_settle(Trainer *t, const Ckpt *c);

#endif
