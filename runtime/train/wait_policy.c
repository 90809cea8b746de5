/* wait_policy.c: how a program's idle OpenMP threads wait. libgomp spins by default, which is
 * the fastest on cores nobody else wants, and ruinous when other processes share them: a
 * spinning thread holds a core while the thread it waits for is descheduled, and every barrier
 * costs a scheduler slice (the tiny demo at a load of 6 on 2 cores: 4.3 s a step spinning, 84 ms
 * waiting passively). libgomp reads its setting from the environment before main, so a program
 * whose environment names none sets the passive one and starts itself again, once; a user who
 * names one (OMP_WAIT_POLICY, GOMP_SPINCOUNT) keeps it. */
#include "train/wait_policy.h"

#include <stdlib.h>
#include <unistd.h>

void wait_policy_settle(char **argv) {
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv); /* returns only where it cannot: the program goes on spinning */
}
