/* footprint.h: the bytes a program's plan puts on its ranks, in this build's types: what the
 * start-up checks hold against the memory there is, and what the run's last line reports. */
#ifndef PLAIT_FOOTPRINT_H
#define PLAIT_FOOTPRINT_H

#include <stddef.h>

#include "program.h"

/* The bytes the plan puts on a rank of pipeline rank pp_rank (one TP rank's share). */
size_t footprint_bytes(const Program *p, int pp_rank);
/* The plan's bytes of `ranks` ranks of the world, those with the smallest plans (so every rank's
 * when ranks is the world's size). */
double footprint_bytes_least(const Program *p, int ranks);

#endif
