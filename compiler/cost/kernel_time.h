/* kernel_time.h: how long one kernel takes on a machine, and what bounds it: GEMMs from their
 * shapes (compute in waves of output tiles over the compute units against the bytes they move),
 * streaming kernels from their bytes, and collectives from the α–β model of a ring on the link
 * they cross. */
#ifndef PLAIT_KERNEL_TIME_H
#define PLAIT_KERNEL_TIME_H

#include "cost/machine.h"
#include "ir/graph.h"

typedef enum {
  BOUND_COMPUTE,
  BOUND_QUANTISATION,
  BOUND_MEMORY,
  BOUND_LATENCY,
  BOUND_COMMUNICATION,
  BOUNDS
} Bound;

typedef struct {
  double seconds;
  double flops, bytes; /* what it computes and moves (one device) */
  Bound bound;
} KernelTime;

/* "compute", "quantisation", "memory", "latency", "communication". */
const char *kernel_bound_name(Bound b);

/* y measured at n increasing x, at `at`: linear in log(x) between the two nearest, the nearest's
 * beyond. */
double kernel_interpolate_log(const double *x, const double *y, int n, double at);
/* A measured rate curve at `flops` (c->n > 0): linear in log(FLOPs) between the sizes measured. */
double kernel_rate_at(const RateCurve *c, double flops);
/* A measured GEMM rate for an M×N×K product (g->count > 0), from the measured shapes like it: see
 * kernel_time.c. */
double kernel_gemm_rate(const GemmRates *g, double M, double N, double K);
/* `batch` GEMMs of M×K by K×N on one device; `c_bytes`: bytes of output traffic per element (the
 * activation precision to write it, 8 to accumulate into an fp32 gradient). */
KernelTime kernel_gemm(const Machine *m, double batch, double M, double N, double K,
                       double c_bytes);
/* A memory-bound kernel of a kind that reads and writes `bytes` in all, at the copy rate times
 * the share the kind's kernels reach (MEMORY_COPY: the copy rate). */
KernelTime kernel_stream(const Machine *m, MemoryKind kind, double bytes);
/* A kernel of a memory-bound kind with special functions (tanh, exp, ...): its bytes as
 * kernel_stream, or its special functions at the device's rate for them, whichever takes longer. */
KernelTime kernel_elementwise(const Machine *m, MemoryKind kind, double bytes, double specials);
/* Adds b to a (seconds, FLOPs, bytes); the bound of the longer. */
void kernel_add(KernelTime *a, KernelTime b);

typedef enum { RING_ALLREDUCE, RING_ALLGATHER, RING_REDUCESCATTER, RING_KINDS } RingKind;

/* Where a group of `n` ranks lies, `stride` ranks apart (ranks are numbered node by node): its
 * ring's bus bandwidth and per-step latency. Inside a node, the node's link; across nodes, the
 * share of the node's NICs its members on that node get while every group of its kind runs at
 * once. */
typedef struct {
  double bandwidth, latency;
  int inter_node;
  double members_per_node; /* of the group, on each node it spans */
} Link;
Link kernel_group_link(const Machine *m, int stride, int n);
/* Point to point between ranks `distance` apart. */
Link kernel_p2p_link(const Machine *m, int distance);

/* A collective over n ranks of a tensor of `bytes` bytes (the whole tensor, before the split): a
 * ring, or for an all-reduce across nodes NCCL's double binary tree where its tuner would pick
 * it. */
KernelTime kernel_collective(const Link *link, RingKind kind, double bytes, int n);
/* One message of `bytes` bytes. */
KernelTime kernel_p2p(const Link *link, double bytes);

/* A GPU program's attention: which kernel runs a call (cuDNN's fused attention or plait's own),
 * by the rules the runtime applies (runtime/cuda/attention_path.c), and its time from that
 * kernel's rates measured by head size. */
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
