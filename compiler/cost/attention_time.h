/* attention_time.h: a GPU program's attention on a machine: which kernel runs a call (cuDNN's
 * fused attention or plait's own), by the rules the runtime applies
 * (runtime/cuda/attention_path.c), and its time from that kernel's rates measured by head size. */
#ifndef PLAIT_ATTENTION_TIME_H
#define PLAIT_ATTENTION_TIME_H

#include "ir/graph.h"
#include "cost/kernel_time.h"
#include "cost/machine.h"

typedef enum { KERNEL_CUDNN, KERNEL_PLAIT } AttentionKernel;

/* The kernel that runs a call with these options (softcap: the calling layer's) where the machine's
 * software is a GPU program's (ATTENTION_CUDNN or ATTENTION_PLAIT). */
AttentionKernel attention_kernel_of(const Machine *m, const AttnAttr *a, double softcap);

/* The scores one head computes over `seq` positions: every pair; causal, half the square; causal
 * in a window of `window` keys (0: none), the band. */
double attention_scores(double seq, int causal, double window);

/* A call over `heads` heads (batch × local heads) of `head_dim`, `scores` scores each, forward or
 * backward, at the kernel's rate for the head size; FLOPs counted over the scores computed. */
KernelTime attention_kernel_time(const Machine *m, AttentionKernel k, double heads, double head_dim,
                                 double scores, int backward);

#endif
