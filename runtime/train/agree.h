/* agree.h: before any work, the ranks of a job that are processes (mpirun, srun, NCCL) agree on
 * the run: a start-up refusal found by any of them is told once, by the lowest rank that found
 * one; then every rank must run rank 0's program (its descriptor's model, configuration, layout,
 * parameters and plan) with rank 0's settings, and the lowest rank that does not names itself
 * and the first difference. Ranks that are threads of one process share one program and one
 * command line: nothing to compare. */
#ifndef PLAIT_AGREE_H
#define PLAIT_AGREE_H

#include "comm.h"
#include "train/args.h"

/* Collective over the world; returns when the ranks agree, else ends the job with one line. */
void agree_on_run(Comm *c, const TrainArgs *a);

#endif
