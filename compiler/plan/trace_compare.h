/* trace_compare.h: a planned trace beside a measured one, action by action. */
#ifndef PLAIT_TRACE_COMPARE_H
#define PLAIT_TRACE_COMPARE_H

#include <stdio.h>

#include "schedule/simulate.h"

/* Reads both traces (plait plan --format trace, and DIR/train --trace) and prints, for the
 * schedule they share, each action's planned and measured duration and the sums per kind of
 * action. Returns 0, or -1 with one line in d (a trace that does not read, or traces of
 * different schedules). */
int trace_compare(const char *planned_path, const char *measured_path, FILE *f, Diag *d);

#endif
