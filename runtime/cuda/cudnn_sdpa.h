/* cudnn_sdpa.h: cuDNN's fused flash attention, forward and backward, as operation graphs of its backend
 * API (the composite graphs cuDNN's runtime-fusion engines recognise: matmuls, scale, causal and window
 * masks from generated indices, softmax with its log-sum-exp statistics), and their execution plans. */
#ifndef PLAIT_CUDNN_SDPA_H
#define PLAIT_CUDNN_SDPA_H

#include <stdint.h>

#include "cudnn_library.h"

/* One attention call's shape over plait's buffers: q, dq [B, T, ·] with q_row elements from one position
 * to the next, k, v, dk, dv with kv_row, out and dout [B, T, Hq·D]; lse [B, Hq, T] in fp32. Scores
 * q·k·scale, causal (window > 0: only the last `window` keys up to the query's own). */
typedef struct {
  int64_t B, T, q_row, kv_row;
  int Hq, Hkv, D, causal;
  int64_t window; /* 0: none */
  float scale;
} SdpaShape;

/* The tensors a call names, by the unique ids the graphs give them. */
enum {
  SDPA_Q = 1, SDPA_K, SDPA_V, SDPA_O, SDPA_STATS, SDPA_DO, SDPA_DQ, SDPA_DK, SDPA_DV,
  SDPA_SCALE, SDPA_MASKED, SDPA_WINDOW, SDPA_ONE, /* scalars passed by value */
  SDPA_SOFTMAX_SUM, SDPA_DQ_SUM,                  /* fp32 scratch of the backward, in the caller's memory */
  SDPA_FIRST_VIRTUAL = 100
};

/* Every descriptor a graph is made of, kept while its plan lives. */
enum { SDPA_MAX_DESCRIPTORS = 160, SDPA_MAX_OPS = 48 };
typedef struct {
  const Cudnn *lib;
  cudnnBackendDescriptor_t owned[SDPA_MAX_DESCRIPTORS], ops[SDPA_MAX_OPS];
  int owned_count, op_count;
  int64_t next_uid;
  char failed[256]; /* the first step that failed, with cuDNN's status and message; "" while none */
} SdpaGraph;

/* The backward's variants: deterministic (dQ written by its matmul, cuDNN's workspace holding dP) or
 * with dQ summed into an fp32 accumulator (SDPA_DQ_SUM), whose order of sums may vary run to run. */
typedef enum { SDPA_FORWARD, SDPA_BACKWARD, SDPA_BACKWARD_ACCUMULATED } SdpaPass;

/* Builds and finalizes every tensor and operation descriptor of a pass's graph (this much needs no GPU).
 * Returns 0, or 1 with g->failed saying which step failed. */
int sdpa_graph_build(SdpaGraph *g, const Cudnn *lib, const SdpaShape *s, SdpaPass pass);
void sdpa_graph_free(SdpaGraph *g);

/* A finalized execution plan and the workspace it needs. */
typedef struct {
  SdpaGraph graph;
  cudnnBackendDescriptor_t plan;
  int64_t workspace_bytes;
  int deterministic; /* the engine carries no nondeterministic numerical note */
} SdpaPlan;

/* The graph of a pass on `handle`, then the first engine cuDNN's heuristics offer that finalizes (for
 * SDPA_BACKWARD, the first without the nondeterministic note). 0, or 1 with why. */
int sdpa_plan_build(SdpaPlan *p, const Cudnn *lib, cudnnHandle_t handle, const SdpaShape *s, SdpaPass pass,
                    char *why, size_t size);
void sdpa_plan_free(SdpaPlan *p);

/* Runs a plan over the tensors given by uid; workspace holds workspace_bytes. 0, or 1 with why. */
int sdpa_plan_run(const SdpaPlan *p, cudnnHandle_t handle, int count, const int64_t *uids, void *const *pointers,
                  void *workspace, char *why, size_t size);

#endif
