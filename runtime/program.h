/* program.h: the contract between a generated program and the runtime. The generated code describes
 * the model (parameters, chunks, the plan's action lists) in a Program and implements each chunk's
 * forward and backward as calls into the runtime (rt_* in rt.h); the runtime allocates, loads data,
 * walks the plan, communicates and optimises. */
#ifndef PLAIT_PROGRAM_H
#define PLAIT_PROGRAM_H

#include <stdint.h>

#include "comm.h"
#include "real.h"

enum { PROGRAM_MAX_DIMS = 6 };

typedef enum { INIT_NORMAL_DIST, INIT_ZERO, INIT_ONE } ParamInit;

typedef struct {
  const char *name;                  /* model scope: "wte"; block scope: "attn.q.weight" (layer i: layers.i.<name>) */
  int ndim;
  int64_t shape[PROGRAM_MAX_DIMS];   /* logical shape, padding included */
  int64_t unpadded[PROGRAM_MAX_DIMS];/* logical shape without padding: what checkpoints store */
  int split_axis;                    /* the axis split over the TP group, -1 when replicated */
  ParamInit init;
  double std;                        /* INIT_NORMAL_DIST */
  int decay;                         /* AdamW weight decay applies */
  int tp_sum;                        /* its gradient is a partial sum over the TP group */
  int in_embed, in_head;             /* model scope: used by the embedding stage / the head */
  int trainable;                     /* 0: frozen: left out of the gradient norm and the optimizer */
  int place;                         /* its place in memory among its table's parameters (of a layer, or
                                        of the model): a fused GEMM reads joined weights side by side */
  /* 1: each TP rank holds its own piece of the split axis; else tp/split_copies pieces, TP rank r
     holding piece r / split_copies (key/value heads fewer than tp), the gradient summed over
     GROUP_TP_COPIES */
  int split_copies;
  /* 1: a mixture's experts' weights, [experts, ..]: axis 0 spread over the ep ranks (each holds
     experts/ep of them), the gradient reduced over GROUP_EP_DP */
  int expert_split;
} ParamSpec;

/* A constant of the model: values computed by the model file when plait built the program; every rank
 * holds all of them (r->constants[C_...]), and checkpoints do not. */
typedef struct {
  const char *name;
  int64_t count;
  const double *values; /* NULL: in constants.bin beside the program (constants_file.h) */
} ConstantSpec;

typedef struct Run Run;

typedef struct {
  int first_layer, layers;
  int has_embed, has_head;
  int64_t slot_elems;      /* activations of one microbatch in flight through this chunk */
  int64_t input_offset;    /* in the slot: the chunk's input activation (-1 for chunk 0: token ids) */
  int64_t output_offset;   /* the chunk's output activation (-1 for the last chunk: the loss) */
  int64_t grad_out_offset; /* the gradient of the output, received from the next chunk (-1: last) */
  int64_t grad_in_offset;  /* the gradient of the input, sent to the previous chunk (-1: chunk 0) */
  /* Elements its fused elementwise kernels read and write in one microbatch's forward, and backward
   * (with any forward it re-runs): what --profile rates them by. */
  int64_t elementwise_forward, elementwise_backward;
  void (*forward)(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets);
  void (*backward)(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets);
} ChunkSpec;

/* One action of a pipeline rank's lowered schedule (the compiler's schedule.h, in the same order). */
typedef enum {
  ACT_FORWARD, ACT_BACKWARD, ACT_SEND_F, ACT_RECV_F, ACT_SEND_B, ACT_RECV_B,
  ACT_REDUCE_GRAD, ACT_EMBED_REDUCE, ACT_STEP
} ActionKind;

typedef struct {
  uint8_t kind;       /* ActionKind */
  uint8_t joined;     /* a send or receive posted in one group with the action before it */
  int32_t chunk;      /* global chunk (stage) index; -1 for STEP */
  int32_t microbatch; /* -1 for reductions and STEP */
  int32_t peer;       /* pipeline rank at the other end of a send, receive or EMBED_REDUCE */
  int32_t slot;       /* the slot of the chunk's activations this (chunk, microbatch) uses, -1 for none */
  int32_t neighbour;  /* the slot of the neighbouring chunk on this rank a forward reads (chunk - 1) or a
                         backward writes (chunk + 1), -1 for none */
} Action;

/* One entry of the model's configuration (the model file's config table after --set), as text. */
typedef struct {
  const char *key, *value;
} ConfigItem;

/* What the plan holds on one pipeline rank (one TP rank's share). */
typedef struct {
  int64_t param_elems;       /* parameters (each with a gradient and Adam's m and v) */
  int64_t activation_elems;  /* activation slots, scratch, the recompute region, gradients between layers */
} RankFootprint;

typedef struct {
  const char *name, *source;
  int tp, pp, vpp, dp, mbs, gbs, microbatches;
  int ep;                            /* DP ranks a mixture's experts are spread over (GROUP_EP) */
  int seq, hidden, layers;
  int64_t vocab, vocab_padded;
  int recompute;                     /* 0: none, 1: full (the recompute region), 2: selective */
  int sequence_parallel;
  int grad_reduce_after;             /* DP gradients reduced once the backward is done, not in buckets during it */
  /* Adam's moments and the fp32 master weights sharded over the DP ranks: gradients
   * reduce-scattered, weights all-gathered after the step (--distributed-optimizer) */
  int distributed_optimizer;
  /* activations passed between pipeline ranks on different nodes (every TP rank holding them
   * whole) go a 1/tp slice a rank and are all-gathered over TP on arrival (--scatter-gather) */
  int scatter_gather;
  /* ranks of a TP group holding each piece of the parameters with split_copies (GROUP_TP_COPIES);
     0 or 1: none */
  int tp_copies;
  int masked_lm;                     /* targets are masked positions (BERT), else the next tokens */
  const ConfigItem *config;          /* sorted by key; checkpoints record it and loading compares it */
  int nconfig;
  const ParamSpec *model_params;
  int nmodel_params;
  const ParamSpec *block_params;     /* one set per layer */
  int nblock_params;
  const ConstantSpec *constants;
  int nconstants;
  const ChunkSpec *chunks;           /* pp·vpp; chunk c on pipeline rank c mod pp */
  int nchunks;
  const Action *const *actions;      /* per pipeline rank */
  const int *nactions;
  const int *slots;                  /* per chunk: microbatches in flight at once, at most */
  const RankFootprint *footprints;   /* per pipeline rank */
  int64_t scratch_elems;             /* the per-rank scratch region */
  int64_t recompute_elems;           /* the per-rank region a chunk's forward is re-run into (--recompute full) */
  int64_t io_elems;                  /* one rank's share of the activation passed between chunks */
  int64_t logits_offset;             /* in the last chunk's slot: the logits, [mbs·seq][logits_cols] */
  int64_t logits_cols;               /* one TP rank's share of the (padded) vocabulary */
  double flops_per_iteration;        /* model FLOPs of the global batch, for MFU */
} Program;

/* The generated program's description; the runtime's main() runs it. */
extern const Program plait_program;

#endif
