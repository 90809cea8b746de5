/* trainer.h: a rank's training, which train.c's main() launches on every rank: its run state,
 * parameters, plan walker, data and optimizer, and the loop of steps with validation, checkpoints
 * and logs, then --eval. */
#ifndef PLAIT_TRAINER_H
#define PLAIT_TRAINER_H

#include "comm.h"

/* The per-rank entry point for comm_launch (arg: the TrainArgs, args.h). */
int trainer_main(Comm *c, void *arg);

#endif
