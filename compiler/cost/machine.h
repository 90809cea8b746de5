/* machine.h: the machine a plan is costed on, read from a Lua machine file (a built-in one,
 * a100, h100, h200 or cpu, carried inside the binary as lib/plait/machines/NAME.lua, or the
 * user's --machine FILE): per device its peak rate, memory and GEMM tiles; per node its devices
 * and link; between nodes its NICs; and which attention kernel the software runs.
 * docs/cost-model.md says where each built-in number is from. */
#ifndef PLAIT_MACHINE_H
#define PLAIT_MACHINE_H

#include "ir/diag.h"

enum { MACHINE_RATE_POINTS = 32, MACHINE_GEMM_SHAPES = 64, MACHINE_HEAD_SIZES = 16 };

/* A kernel's rate measured at sizes (a calibrated machine): { FLOPs, FLOP/s } by FLOPs; n = 0
 * when absent. */
typedef struct {
  int n;
  double flops[MACHINE_RATE_POINTS], rate[MACHINE_RATE_POINTS];
} RateCurve;

/* GEMM calls measured at shapes (a calibrated machine): C[M×N] = A[M×K]·B[K×N] ran at rate
 * FLOP/s; n = 0 when absent. */
typedef struct {
  int count;
  double m[MACHINE_GEMM_SHAPES], n[MACHINE_GEMM_SHAPES], k[MACHINE_GEMM_SHAPES],
      rate[MACHINE_GEMM_SHAPES];
} GemmRates;

/* The attention a machine's software runs (kernels.attention): Megatron-LM 2021's stored scores;
 * a fused kernel timed from its products (or a calibrated CPU's curve); a GPU program of plait's
 * with cuDNN (its fused attention where the runtime's rules let it, plait's kernels elsewhere)
 * or without (plait's). */
typedef enum {
  ATTENTION_MATERIALISED,
  ATTENTION_FUSED,
  ATTENTION_CUDNN,
  ATTENTION_PLAIT
} AttentionSoftware;

/* An attention kernel's rates measured by head size: FLOPs over the scores it computes (causal:
 * half the square), forward and backward (counted as twice the forward's) per second; count = 0
 * when absent. */
typedef struct {
  int count;
  double head_dim[MACHINE_HEAD_SIZES], forward[MACHINE_HEAD_SIZES], backward[MACHINE_HEAD_SIZES];
} AttentionRates;

/* The kinds of memory-bound kernel (kernels.memory_efficiency), as DIR/train --profile names
 * them; COPY is the copy rate itself (a GEMM's operands, kernels of other software). */
typedef enum {
  MEMORY_ELEMENTWISE,
  MEMORY_NORM,
  MEMORY_BIAS_SUMS,
  MEMORY_EMBEDDING,
  MEMORY_XENT,
  MEMORY_OPTIMIZER,
  MEMORY_GRAD_NORM,
  MEMORY_KINDS,
  MEMORY_COPY = MEMORY_KINDS
} MemoryKind;
extern const char *const memory_kind_names[MEMORY_KINDS];

typedef struct {
  char name[64];
  char about[256];
  char origin[256];          /* "built-in" or the machine file's path */
  int activation_bytes;      /* the training precision: 2 (bf16, fp16) or 4 (fp32) */
  int bf16;                  /* it is bf16 */
  /* one device */
  double peak_flops;         /* dense FLOP/s in the training precision (device.flops[precision]) */
  /* the largest GEMM rate measured on it, over peak_flops: the ceiling */
  double gemm_efficiency;
  double gemm_tile_m, gemm_tile_n; /* the largest output tile one compute unit works on */
  double memory_bandwidth;   /* bytes/s */
  double memory_efficiency;  /* the share of it a copy reaches: the copy rate */
  double memory_bytes;       /* capacity */
  double compute_units;      /* SMs, or cores */
  double launch_overhead;    /* seconds per kernel */
  /* special functions (tanh, exp, erf, sqrt, log, a dropout draw) per second; 0: they never
   * bound a kernel (memory does) */
  double special_rate;
  GemmRates gemm_rates;      /* GEMM calls' rates at shapes (device.gemm_rates), measured */
  /* one node */
  double devices_per_node;
  double link_bandwidth;     /* bus bandwidth of a collective inside a node, bytes/s */
  double link_latency;       /* seconds per ring step inside a node */
  /* between nodes */
  double nics;               /* per node */
  double nic_bandwidth;      /* bytes/s, one direction */
  double nic_latency;        /* seconds per ring step between nodes */
  /* the software's kernels */
  AttentionSoftware attention;
  double attention_dropout;   /* dropout on materialised scores */
  /* ATTENTION_FUSED: the kernel's rate by its FLOPs, forward and backward, measured; none: its
   * products at the GEMM ceiling */
  RateCurve attention_rates;
  /* ATTENTION_CUDNN, _PLAIT: each kernel's measured rates */
  AttentionRates cudnn_attention, plait_attention;
  /* each kind's share of the copy rate, measured; 1 where not */
  double kind_efficiency[MEMORY_KINDS];
} Machine;

/* `name` is a built-in machine's name or a machine file's path (one with a '/' or ending in .lua).
 * Returns 0, or -1 with one line in d naming the machine or file, the field and the fix. */
int machine_load(const char *name, Machine *m, Diag *d);

#endif
