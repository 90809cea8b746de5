/* wait_policy.h: idle OpenMP threads wait passively unless the user's environment says
 * otherwise. */
#ifndef PLAIT_WAIT_POLICY_H
#define PLAIT_WAIT_POLICY_H

/* Where the environment names no wait policy: sets OMP_WAIT_POLICY=passive and executes the
 * program again with argv (not returning); else, or where that cannot be done, returns. Call
 * first in main. */
void wait_policy_settle(char **argv);

#endif
