/* profile.h: DIR/train --profile: the time, FLOPs and bytes of a step by kind of work (GEMMs,
 * attention, norms, fused elementwise kernels, rotary positions, splits and concats of fused GEMMs'
 * outputs, cross entropy, the optimizer, the gradient norm, communication, a mixture of experts'
 * routing), summed over the steps after the first. Stage code's kernels are counted through
 * profiled.h; the plan's walk and the optimizer count their own. Bytes are the tensors a kernel
 * must read and write once (its floor's traffic), not what the caches make of them. */
#ifndef PLAIT_PROFILE_H
#define PLAIT_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "kernels.h"

typedef enum {
  PROFILE_GEMM,
  PROFILE_ATTENTION,
  PROFILE_NORM,
  PROFILE_ELEMENTWISE,
  PROFILE_ROPE,         /* k_rope */
  PROFILE_SPLIT_CONCAT, /* k_split, k_concat: a fused GEMM's output apart, its gradient joined */
  PROFILE_BIAS_SUMS,    /* k_sum_rows: bias gradients */
  PROFILE_EMBEDDING,
  PROFILE_XENT,
  PROFILE_OPTIMIZER,
  PROFILE_GRAD_NORM,
  PROFILE_COMM,
  PROFILE_ROUTING, /* a mixture of experts' top-k, routes, dispatches and combines */
  PROFILE_KINDS
} ProfileKind;

typedef struct Profile {
  double seconds[PROFILE_KINDS], flops[PROFILE_KINDS], bytes[PROFILE_KINDS];
  double last_stop; /* when the last wrapped call in a stage ended (0: not in a stage) */
  double step_seconds;
  int64_t steps;
  int warmed_up; /* the first step (pages touched, threads started) was left out */
} Profile;

/* Marks the start of a stage function: time from here to the first wrapped call is elementwise work. */
void profile_stage_begin(Profile *p);
/* Marks its end: the time since the last wrapped call is elementwise work, over `bytes` in all. */
void profile_stage_end(Profile *p, double bytes);
/* The clock before a wrapped call (the time since the previous one counts as elementwise work). */
double profile_start(Profile *p);
/* After a call of `kind` that began at `start`. */
void profile_add(Profile *p, ProfileKind kind, double start, double flops, double bytes);
/* A whole step took `seconds`. The first step is the warm-up: what it added is dropped instead. */
void profile_step(Profile *p, double seconds);
/* Per kind: ms a step, share of the step, and the rate achieved (GFLOP/s for GEMMs and attention,
 * GB/s for the others); "other" is what no kind holds. As a table, and as one JSON line when json is set. */
void profile_print(const Profile *p, FILE *out, FILE *json);

/* FLOPs of attention forward (4·B·Hq·T²·D, half of it when causal); backward is twice that. */
double profile_attention_flops(const AttnShape *s);
/* The bytes k_split and k_concat read and write, from the kernel's own arguments: the part read and
 * written; the whole written and the parts given (not NULL) read. */
double profile_split_bytes(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, int part,
                           const act_t *x, const act_t *y);
double profile_concat_bytes(int64_t rows, int64_t groups, int nparts, const int64_t *sizes,
                            const act_t *const *parts, const act_t *y);

#endif
