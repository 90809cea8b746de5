/* params.h: a rank's parameters: which it holds (the layers of its chunks, the embedding with chunk 0,
 * the head with the last chunk), the storage of its shares (weights, gradients, Adam m and v), their
 * initialisation from the global element index, and the pointer tables stage code reads. */
#ifndef PLAIT_PARAMS_H
#define PLAIT_PARAMS_H

#include <stdint.h>

#include "philox.h"
#include "program.h"

typedef struct {
  const ParamSpec *spec;
  int layer;         /* -1 at model scope */
  int chunk;         /* the chunk whose last backward finishes its gradient */
  char name[128];    /* "wte", "layers.3.attn.q.weight" */
  PhiloxShard box;   /* this rank's box of the logical tensor (padding included) */
  int64_t n;         /* elements in the box */
  real *master, *g, *m, *v; /* the weights (fp32 master copy), gradient, Adam m and v */
  act_t *w;          /* the weights as compute reads them: the master copy itself on the CPU, a bf16
                        copy refreshed after each step in the CUDA build */
  int counted;       /* counts toward the global gradient norm here (once over TP and PP; frozen: never) */
} ParamSlot;

typedef struct {
  ParamSlot *slot;
  int count;
  int64_t elems;      /* all of this rank's shares */
  real *storage;      /* master weights, gradients, m, v: four runs of `elems` (backend memory) */
  act_t *compute;     /* the weights for compute when they are not the master copy (ACT_SEPARATE) */
  act_t **model_w;
  real **model_g;
  act_t ***layer_w;
  real ***layer_g;
} Params;

/* The parameters pipeline rank pp_rank holds as TP rank tp_rank, initialised from `seed`. */
void params_create(Params *ps, const Program *prog, int pp_rank, int tp_rank, uint64_t seed);
void params_free(Params *ps, const Program *prog);
void params_zero_grads(Params *ps);
/* After the master weights changed: the copies compute reads follow (nothing to do on the CPU). */
void params_refresh(Params *ps);

#endif
