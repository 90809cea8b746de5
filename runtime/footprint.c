/* footprint.c: the plan's bytes of a rank and of the ranks with the smallest plans. */
#include "footprint.h"

#include <stdlib.h>

/* The plan's footprint in this build's types: per parameter element its weights as compute reads
 * them and its gradient, and its optimizer state: Adam's m and v and, where compute reads a copy,
 * the master weights (with the distributed optimizer, 1/dp of these); per activation element one
 * act_t. Equals plait plan's memory for the machine whose precision the build has. */
size_t footprint_bytes(const Program *p, int pp_rank) {
  const RankFootprint *f = &p->footprints[pp_rank];
  double shards = p->distributed_optimizer ? p->dp : 1;
  double state = (double)f->param_elems * (ACT_SEPARATE ? 3 : 2) * sizeof(real) / shards;
  size_t whole = (size_t)f->param_elems * (sizeof(act_t) + sizeof(real));
  return whole + (size_t)state + (size_t)f->activation_elems * sizeof(act_t);
}

/* The pipeline rank with the smallest plan of those whose tp·dp ranks are not all taken, or -1. */
static int least_untaken(const Program *p, const int *taken) {
  int least = -1;
  for (int r = 0; r < p->pp; r++)
    if (taken[r] < p->tp * p->dp &&
        (least < 0 || footprint_bytes(p, r) < footprint_bytes(p, least)))
      least = r;
  return least;
}

double footprint_bytes_least(const Program *p, int ranks) {
  double bytes = 0;
  int *taken = calloc((size_t)p->pp, sizeof *taken); /* per pipeline rank: tp·dp ranks counted */
  while (ranks > 0) {
    int least = least_untaken(p, taken);
    if (least < 0) break; /* more ranks than the world: every one is counted */
    int left = p->tp * p->dp - taken[least], n = left < ranks ? left : ranks;
    bytes += (double)footprint_bytes(p, least) * n;
    taken[least] += n, ranks -= n;
  }
  free(taken);
  return bytes;
}
