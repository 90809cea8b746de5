/* tune.h: plait tune's search: every layout of a model over N devices that plan accepts (tp, pp,
 * dp, vpp, mbs, schedule, recomputation, sequence parallelism, the distributed optimizer, and ep
 * for a model with experts), each bounded from its kernels' times and its schedule's compute order,
 * the promising ones planned in full; the best few, and why the rest lost. */
#ifndef PLAIT_TUNE_H
#define PLAIT_TUNE_H

#include <stdio.h>

#include "options.h"
#include "plan/plan.h"

enum { TUNE_BEST = 5, TUNE_MAX_MBS = 64 };

typedef enum {
  LOST_NOT,           /* among the best */
  LOST_MEMORY,        /* a rank does not fit the device's memory */
  LOST_BUBBLE,        /* the pipeline's bubble */
  /* TP collectives, pipeline transfers, the DP reduction left after the backward */
  LOST_COMMUNICATION,
  LOST_GEMMS,         /* slower kernels: smaller GEMMs */
  LOST_RECOMPUTE,     /* recomputed forwards */
  /* a longer optimizer step: more parameters per rank, or Adam over all of them where the winner
   * shards it (the distributed optimizer) */
  LOST_OPTIMIZER,
  LOST_NOT_BEST,      /* fits and is planned, but others were faster on every count */
  LOST_REASONS
} TuneLoss;

typedef struct {
  Parallel par;
  int prefix;             /* the traced model it was costed on */
  int planned;            /* 1: planned in full (the plan's own numbers); 0: bounds only */
  PlanBound bound;        /* from the kernels' times and the compute order */
  double iteration;       /* seconds: the plan's; unplanned, at least this (the bound's) */
  double memory;          /* bytes of the fullest rank: the plan's; unplanned, at least this */
  /* planned: the plan's FLOP/s, bubble fraction, bytes sent */
  double flops_per_device, bubble, traffic;
  IterationTime time;     /* planned: where the iteration goes */
  TuneLoss loss;
  int pair;               /* the same for a layout with and without the distributed optimizer */
  /* among the best with the distributed optimizer: the same layout without it, or -1 */
  int without;
  /* among the best with selective recomputation: the same layout with none, or -1 */
  int unrecomputed;
  /* among the best with experts spread over ep (not pinned): the same layout with ep 1, or -1 */
  int single;
} TuneLayout;

typedef struct {
  const char *model_file;
  int devices, gbs;
  int64_t experts;        /* what divides every mixture's experts; 0: the model has none */
  Machine machine;
  /* every layout plan accepts; the fitting planned ones first, fastest first */
  TuneLayout *layouts;
  int count, capacity;
  int fitting;            /* how many of the first are planned and fit */
  int refused;            /* combinations plan refuses */
  char refusal[1024];     /* the first one's reason */
  int smallest;           /* when none fits: the layout needing the least memory */
  double seconds;         /* the search's wall time */
} Tune;

/* Searches o->file's layouts over o->gpus devices of o->machine with the global batch
 * o->parallel.gbs (or the model file's); layout flags given in o pin their dimension. Returns 0
 * (t->fitting may be 0), or -1 with one line in d. */
int tune_search(const Options *o, Tune *t, Diag *d);
void tune_free(Tune *t);

/* tune_print.c: the best few with their time, TFLOP/s, memory, bubble and traffic; the rest
 * counted by why they lost, with the best of each. */
void tune_write_text(const Tune *t, FILE *f);
void tune_write_json(const Tune *t, FILE *f);
const char *tune_loss_name(TuneLoss loss);
/* The layout as plan's flags, to paste into plait plan or build. */
void tune_layout_flags(const Parallel *p, char *buf, int len);

#endif
