/* clock.h: seconds on CLOCK_MONOTONIC, the one clock of the runtime: step times, measured traces (the
 * ranks of one machine share it), the GEMM rate, and the deadlines of communication. */
#ifndef PLAIT_CLOCK_H
#define PLAIT_CLOCK_H

double clock_seconds(void);

#endif
