/* trace.h: --trace FILE: the measured timeline of the last iteration as Chrome trace events, in
 * the form `plait plan --format trace` writes the simulated one (a process per pipeline rank,
 * tracks for compute, sends, receives and reductions), and the measured bubble. */
#ifndef PLAIT_TRACE_H
#define PLAIT_TRACE_H

#include "train/batch.h"

/* Collective: pipeline ranks (their TP rank 0 of DP replica 0) send their times to rank 0, which
 * writes the file and prints the measured bubble. */
void trace_write(Trainer *t, const char *path);

#endif
