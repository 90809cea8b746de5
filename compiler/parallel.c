/* parallel.c: merging, defaulting and checking the parallel layout. */
#include "parallel.h"

#include <stdio.h>
#include <string.h>

void parallel_unset(Parallel *p) {
  memset(p, 0, sizeof *p);
  p->tp = p->pp = p->vpp = p->dp = p->mbs = p->gbs = UNSET;
  p->recompute = p->sequence_parallel = p->grad_reduce_after = UNSET;
}

void parallel_override(Parallel *base, const Parallel *over) {
  int *b[] = {&base->tp, &base->pp, &base->vpp, &base->dp, &base->mbs, &base->gbs, &base->recompute,
              &base->sequence_parallel, &base->grad_reduce_after};
  const int *o[] = {&over->tp, &over->pp, &over->vpp, &over->dp, &over->mbs, &over->gbs, &over->recompute,
                    &over->sequence_parallel, &over->grad_reduce_after};
  for (unsigned i = 0; i < sizeof b / sizeof *b; i++)
    if (*o[i] != UNSET) *b[i] = *o[i];
  if (over->schedule[0]) snprintf(base->schedule, sizeof base->schedule, "%s", over->schedule);
  if (over->partition[0]) snprintf(base->partition, sizeof base->partition, "%s", over->partition);
}

void parallel_defaults(Parallel *p) {
  int *sizes[] = {&p->tp, &p->pp, &p->vpp, &p->dp, &p->mbs};
  for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++)
    if (*sizes[i] == UNSET) *sizes[i] = 1;
  if (p->gbs == UNSET) p->gbs = p->mbs * p->dp;
  if (p->recompute == UNSET) p->recompute = 0;
  if (p->sequence_parallel == UNSET) p->sequence_parallel = 0;
  if (p->grad_reduce_after == UNSET) p->grad_reduce_after = 0;
  if (!p->schedule[0]) snprintf(p->schedule, sizeof p->schedule, "%s", p->vpp > 1 ? "interleaved" : "1f1b");
  if (!p->partition[0]) snprintf(p->partition, sizeof p->partition, "balanced");
}

int parallel_microbatches(const Parallel *p) { return p->gbs / (p->mbs * p->dp); }

int parallel_check(const Parallel *p, Diag *d) {
  const struct { const char *flag; int value; } sizes[] = {
      {"--tp", p->tp}, {"--pp", p->pp}, {"--vpp", p->vpp}, {"--dp", p->dp}, {"--mbs", p->mbs}, {"--gbs", p->gbs}};
  for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++)
    if (sizes[i].value < 1)
      return diag(d, "%s %d: sizes must be at least 1", sizes[i].flag, sizes[i].value);
  if (p->gbs % (p->mbs * p->dp) != 0)
    return diag(d, "global batch %d is not divisible by mbs·dp = %d·%d = %d; choose --gbs a multiple of %d",
                p->gbs, p->mbs, p->dp, p->mbs * p->dp, p->mbs * p->dp);
  if (strcmp(p->partition, "balanced") != 0 && strcmp(p->partition, "uniform") != 0)
    return diag(d, "unknown partition '%s'; use --partition balanced or --partition uniform", p->partition);
  return 0;
}
