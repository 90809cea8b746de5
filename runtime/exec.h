/* exec.h: one training iteration of a rank: its action list from the plan, walked as it stands:
 * forward and backward of (chunk, microbatch) in the slots of activation memory the plan assigned
 * them, each step's sends and receives posted as one group, data-parallel gradient reductions in
 * buckets of one layer, each started as soon as the chunk's last backward has finished that layer
 * and overlapping the rest (the chunk's other parameters when the plan's REDUCE_GRAD comes), and the
 * optimizer step. */
#ifndef PLAIT_EXEC_H
#define PLAIT_EXEC_H

#include "comm.h"
#include "params.h"
#include "program.h"
#include "rt.h"

/* Measured start and end of an action (seconds of CLOCK_MONOTONIC, which the ranks of one machine
 * share), for traces. A group of sends and receives shares one span: posted to completed. */
typedef struct {
  int action;
  double start, end;
} ActionTime;

typedef struct {
  const Program *prog;
  Run *run;
  Params *params;
  const Action *actions;
  int nactions;
  Action *owned;        /* a derived action list this Exec made (forward-only), else NULL */
  act_t **pool;         /* per chunk of this rank: slots[c] slots of chunk.slot_elems (the plan says
                           which slot each action uses) */
  int pool_borrowed;    /* the pool is the training Exec's (forward-only: never run beside it) */
  int microbatch_tokens;/* mbs·seq */
  const int32_t *tokens, *targets; /* this data-parallel rank's microbatches of the iteration */
  CommRequest **pending;/* data-parallel reductions in flight */
  int npending;
  int *last_backward;   /* per chunk: the index of its last backward in the action list, or -1 */
  char *reduced;        /* per parameter slot: pending, final, or its bucket's reduction started */
  int buckets;          /* data-parallel reductions started this iteration (rank 0 logs them) */
  int buckets_during_backward; /* of those, started while a chunk's last backward still ran */
  double bytes_across_nodes;   /* sent to pipeline peers on other nodes this iteration */
  ActionTime *times;    /* when recording: one per action */
  void (*step)(void *arg); /* the optimizer step (STEP) */
  void *step_arg;
} Exec;

void exec_create(Exec *e, const Program *prog, Run *run, Params *ps);
/* The forward actions of `train` alone (forwards, their sends and receives, in the same order and
 * groups): an iteration that computes the loss and nothing else (validation, finite differences). It
 * runs in train's activation slots, between train's iterations, so `train` must outlive it. */
void exec_create_forward(Exec *e, const Exec *train);
void exec_free(Exec *e);
/* Runs the iteration over tokens and targets ([microbatches][mbs·seq], this DP rank's share). */
void exec_iteration(Exec *e, const int32_t *tokens, const int32_t *targets);
/* From now on each iteration records when its actions ran (e->times). */
void exec_record(Exec *e);
/* Waits for the reductions in flight (the optimizer step needs every gradient final). */
void exec_finish_reductions(Exec *e);

#endif
