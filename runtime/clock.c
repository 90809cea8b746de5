/* clock.c: seconds on CLOCK_MONOTONIC. */
#include "clock.h"

#include <time.h>

double clock_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
