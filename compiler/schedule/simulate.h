/* simulate.h: one iteration of a lowered schedule simulated from per-stage costs: the start and
 * end of every action, the iteration time, the bubble, each rank's peak in-flight microbatches
 * and activation bytes; and that timeline drawn as Chrome trace events or as an SVG picture. */
#ifndef PLAIT_SIMULATE_H
#define PLAIT_SIMULATE_H

#include <stdio.h>

#include "ir/diag.h"
#include "schedule/schedule.h"

typedef struct {
  double forward, backward; /* seconds per microbatch */
  double send_forward;      /* seconds to send its output activation to the next stage */
  double send_backward;     /* seconds to send the gradient of its input to the previous stage */
  /* of send_forward and send_backward: the all-gather inside the receiving node of a transfer
   * sent scattered over the tensor-parallel ranks (0: sent whole) */
  double gather_forward, gather_backward;
  double reduce;            /* seconds of its data-parallel gradient reduction */
  /* seconds before the end of its last backward that the reduction may start (buckets of one
   * layer, each sent as that layer's backward ends); 0: it starts after the rank's compute
   * before it */
  double reduce_overlap;
  /* seconds of its last bucket, which waits for the end of that backward */
  double reduce_tail;
  double activation_bytes;  /* bytes kept per microbatch from its forward until its backward */
} StageCost;

typedef struct {
  int stages;
  StageCost *stage;    /* [stages] */
  double embed_reduce; /* seconds of the tied-embedding all-reduce */
  double optimizer;    /* seconds of the optimizer step */
  /* seconds of the weights' all-gather right after the step, within STEP (distributed optimizer) */
  double gather;
  int unit;            /* 1: made by simulate_costs_unit (outputs say "units", not seconds) */
} Costs;

/* Every cost zero. */
void simulate_costs_init(Costs *c, int stages);
/* The papers' idealisation: forward 1 and backward 2 per stage (chunk), communication and
 * reductions free. */
void simulate_costs_unit(Costs *c, int stages);
void simulate_costs_free(Costs *c);

typedef struct {
  double start, end;
  /* seconds at its end that are an all-gather: the weights' after STEP (distributed optimizer),
   * a scattered activation's inside the receiving node */
  double gather;
} Span;

/* The simulated iteration. Bubble fraction: (flush - ideal) / ideal, where flush is the end of
 * the last backward on any rank and ideal is the busiest rank's forward and backward time: with
 * unit costs exactly (pp-1)/m for GPipe and 1F1B and (pp-1)/(vpp·m) for interleaved 1F1B. */
typedef struct {
  int pp, vpp;
  int unit;                           /* simulated with unit costs: times are units, not seconds */
  /* [rank][step]: when each action ran (a transfer: on the wire) */
  Span **span;
  double iteration;                   /* the end of the last action, the optimizer step included */
  double flush;                       /* the end of the last backward */
  double ideal;                       /* the busiest rank's forward and backward time */
  double bubble_fraction;             /* (flush - ideal) / ideal */
  double *busy;                       /* [rank]: forward and backward time */
  /* [rank]: most (stage, microbatch) pairs forwarded, not yet backwarded */
  int *peak_inflight;
  double *peak_inflight_microbatches; /* [rank]: peak_inflight / vpp, in whole-model microbatches */
  double *peak_activation_bytes;      /* [rank]: most activation bytes kept at once */
} Timeline;

/* Simulates a schedule that passed validate_schedule. Each rank runs its compute actions in
 * order on one compute track; a compute action waits for the receives posted before it; a
 * transfer starts when both ends have posted it and the link (one per neighbour and direction)
 * is free; sends never hold up compute; REDUCE_GRAD and EMBED_REDUCE run on a reduction track
 * beside compute; STEP waits for all of its rank's communication, then runs the step and the
 * weights' all-gather after it. Returns 0, or -1 with one line in d. */
int simulate_schedule(const Schedule *s, const Costs *c, Timeline *t, Diag *d);
void simulate_timeline_free(Timeline *t);

/* Reads a trace in the form timeline_trace_write writes (a plan's, or a program's measured one from
 * train --trace): its schedule, and its timeline with the bubble measured from the spans.
 * Returns 0, or -1 with one line in d. */
int trace_read(const char *path, Schedule *s, Timeline *t, Diag *d);

/* Chrome trace-event JSON: one process per rank, threads for compute, sends, receives and
 * reductions. */
void timeline_trace_write(const Schedule *s, const Timeline *t, FILE *f);
/* An SVG picture as the Megatron-LM paper draws schedules: a lane per rank, forward and backward
 * boxes numbered by microbatch, chunks told apart by shade, a time axis and a legend. */
void timeline_svg_write(const Schedule *s, const Timeline *t, FILE *f);

#endif
