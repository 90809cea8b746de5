/* emit.h: code generation: a plan becomes a directory of C sources (stage and chunk functions,
 * fused elementwise kernels for the CPU, the same kernels as CUDA source for NVRTC, the tables
 * of parameters, chunks and the plan's actions) that links with the runtime into a training
 * program. */
#ifndef PLAIT_EMIT_H
#define PLAIT_EMIT_H

#include <stdio.h>

#include "passes/memplan.h"
#include "own_folder.h"
#include "plan/plan.h"

/* The fused elementwise kernels of a model: one per distinct (expression, broadcast pattern,
 * accumulation); kernel_of[stage][node] names each elementwise node's kernel. */
typedef struct {
  const Graph *graph;
  const Node *node;              /* the first node with this kernel */
  int broadcast[MAX_INPUTS];     /* input i repeats with a period shorter than the output */
  int accumulate;                /* adds into a parameter gradient */
  int dropouts;
  char signature[2048];
  char name[64]; /* its function: ew_ and what it computes (ew_bias_add), or ew_ and its number */
  const char *role; /* what its output's buffer name adds to the scope: "_gelu", "_residual", "" */
} Kernel;

typedef struct {
  Kernel *kernels;
  int count;
  int *kernel_of[3];             /* embed, block, head: per node, the kernel index or -1 */
} KernelSet;

enum { STAGE_EMBED, STAGE_BLOCK, STAGE_HEAD, STAGES };

enum { EMIT_DIM_CHARS = 80, EMIT_SIZE_CHARS = 512, EMIT_NAME_CHARS = 128 };

/* Everything emission needs: the plan (with each stage's memory plan), the kernels, and the
 * constant naming each model dim in model.c ("" for a dim without one). */
typedef struct {
  const Plan *plan;
  const Graph *stage[STAGES];
  const StageMemory *memory; /* plan->memory: per stage */
  KernelSet kernels;
  char (*dim_constant)[EMIT_DIM_CHARS];
} Emission;

/* The action lists of every pipeline rank and the slots per chunk, as C tables (plan.c's
 * schedule). */
void emit_plan_tables(const Plan *p, FILE *f);

void emit_collect_kernels(Emission *e);
void emit_free_kernels(KernelSet *k);
/* The C kernels (fused.c), the CUDA kernels as source strings with their launchers (fused_cuda.c),
 * and the prototypes both share (fused.h). */
void emit_kernels_c(const Emission *e, FILE *f);
void emit_kernels_cuda(const Emission *e, FILE *f);
void emit_kernels_h(const Emission *e, FILE *f);
/* A CUDA kernel's source text alone (NVRTC compiles it); returns its length. */
int emit_kernel_cuda_source(const Emission *e, int k, char *buf, int len);

/* The stage functions (forward and backward of embed, one block, head) into model.c. */
void emit_stages(const Emission *e, FILE *f);
/* The enum constant naming parameter p in generated code: P_WTE, L_ATTN_Q_WEIGHT. */
void emit_param_constant(const Model *m, int p, char *buf, int len);
/* "C_POSITIONS": the enum constant of a model constant (r->constants[C_...]). */
void emit_constant_enum(const Model *m, int c, char *buf, int len);

/* The dims' constants (B, T, C, V or Vp, then each other dim's name in capitals;
 * docs/generated-code.md), in memory the caller frees; the enum that defines them in model.c. */
char (*emit_dim_constants(const Model *m))[EMIT_DIM_CHARS];
void emit_dims_enum(const Emission *e, FILE *f);
/* One rank's size of axes [first, last) of t as C: a product of the dims' constants ("B*T*C",
 * "B*T*(FFN/TP)"), a number where no axis has a name, 64-bit where the product passes an int. */
void emit_size(const Emission *e, const Tensor *t, int first, int last, char *buf, int len);
/* The tokens of the vocabulary: V where that is the vocab dim's, else the number. */
void emit_vocab(const Emission *e, int64_t tokens, char *buf, int len);
/* Part `part` of each group of the last axis of whole, `size` wide: the part's dim by name where
 * the axis is made of named dims that wide (qdim+kvdim+kvdim: QDIM, KVDIM), else the number. */
void emit_part_size(const Emission *e, const Tensor *whole, int part, int64_t size, char *buf,
                    int len);

/* How the stage functions spell each tensor of stage s: parameters, constants and the functions'
 * arguments as the runtime holds them; other buffers after the model's scopes ("attn_q",
 * "ln_1_rstd", "d_mlp_fc"), unique in the stage. */
void emit_name_buffers(const Emission *e, int s, char (*name)[EMIT_NAME_CHARS]);

/* Local (one TP rank's) size of axis a of tensor t. */
int64_t emit_local_dim(const Plan *p, const Tensor *t, int a);
int64_t emit_local_elems(const Plan *p, const Tensor *t);

/* Writes every source into DIR, a program's folder the caller claimed (own_folder.h); returns 0
 * or -1 with the reason in d. */
int emit_program(const Plan *p, const OwnFolder *dir, Diag *d);
/* Whether emit_program writes DIR/constants.bin: m has a constant past CONSTANT_INLINE_ELEMS. */
int emit_has_constants_file(const Model *m);

#endif
