/* gradcheck.h: --gradcheck N: the gradients the program computes against central finite
 * differences of its own loss, for N parameter elements (one rank, built with real = double). */
#ifndef PLAIT_GRADCHECK_H
#define PLAIT_GRADCHECK_H

#include "train/batch.h"

/* Prints the largest relative error and where; returns 0 when it is below 1e-6, else 1. */
int gradcheck_run(Trainer *t, int64_t count);

#endif
