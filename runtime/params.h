/* params.h: a rank's parameters: which it holds (the layers of its chunks, the embedding with chunk 0,
 * the head with the last chunk), the data-parallel buckets their gradients are reduced in and, with
 * the distributed optimizer, the part of each bucket whose optimizer state this rank keeps; the
 * storage of its shares (weights, gradients, Adam m and v), their initialisation from the global
 * element index, and the pointer tables stage code reads. */
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
  real *g;           /* its gradient, all n elements */
  act_t *w;          /* the weights as compute reads them, all n: the master copy itself on the
                        CPU, a bf16 copy written by each step in the CUDA build */
  /* The elements [own_begin, own_end) whose optimizer state this rank keeps: all of them, or with
   * the distributed optimizer its data-parallel rank's chunk of the bucket (possibly none). master,
   * m and v hold those elements alone: master[0] is element own_begin (on the CPU, within w). */
  int64_t own_begin, own_end;
  real *master, *m, *v; /* the weights (fp32 master copy), Adam m and v */
  int bucket;        /* its data-parallel bucket */
  int64_t bucket_offset; /* its first element's place in the bucket */
  int counted;       /* counts toward the global gradient norm here (once over TP and PP; frozen: never) */
} ParamSlot;

/* Slots [from, to), which lie together in the gradient storage, reduced over the data-parallel
 * group as one: a chunk's model-scope slots, or one of its layers (with --grad-reduce after, the
 * whole chunk); with the distributed optimizer a tied table on its own, so that its copies on the
 * first and last stage are sharded alike. With the distributed optimizer, data-parallel rank r keeps the
 * optimizer state of chunk r of its n elements (comm_chunk). */
typedef struct {
  int from, to;
  int64_t n;
  /* reduced over: GROUP_DP, or GROUP_EP_DP for experts spread over ep ranks (their own buckets) */
  GroupKind group;
} Bucket;

/* What a parameter's storage holds: its weights or Adam's moments. */
typedef enum { PARAM_WEIGHTS, PARAM_ADAM_M, PARAM_ADAM_V } ParamState;

typedef struct {
  ParamSlot *slot;
  int count;
  int64_t elems;      /* all of this rank's shares */
  Bucket *buckets;
  int nbuckets;
  int sharded;        /* the distributed optimizer over more than one data-parallel rank */
  int64_t own_elems;  /* the elements whose optimizer state this rank keeps */
  /* master weights (all `elems` on the CPU, where they are the weights compute reads; the own ones
   * in the CUDA build), gradients (`elems`), m and v (`own_elems` each), in backend memory */
  real *storage;
  act_t *compute;     /* the weights for compute when they are not the master copy (ACT_SEPARATE) */
  act_t **model_w;
  real **model_g;
  act_t ***layer_w;
  real ***layer_g;
} Params;

/* Data-parallel ranks a mixture's experts are spread over (1: each rank all of them). */
int params_ep(const Program *prog);
/* TP ranks holding each piece of the parameter's split axis (1: each its own). */
int params_copies(const ParamSpec *p);

/* The parameters pipeline rank pp_rank holds as TP rank tp_rank of data-parallel rank dp_rank,
 * initialised from `seed`. */
void params_create(Params *ps, const Program *prog, int pp_rank, int tp_rank, int dp_rank,
                   uint64_t seed);
void params_free(Params *ps, const Program *prog);
void params_zero_grads(Params *ps);
/* The gradients of the elements whose optimizer state other data-parallel ranks keep (the step
 * clears the own ones as it reads them). */
void params_zero_others_grads(Params *ps);
/* A slot's values of one kind, all n of them in host memory, into this rank's storage: the weights
 * whole (for compute, and the own ones as master copies), Adam's moments for the own elements. */
void params_upload(ParamSlot *s, ParamState kind, const real *host);
/* The storage of the own elements of one kind: master, m or v. */
real *params_own(const ParamSlot *s, ParamState kind);
/* The elements [begin, end) of the slot whose optimizer state data-parallel rank dp_rank keeps. */
void params_share(const Params *ps, const ParamSlot *s, int dp, int dp_rank, int64_t *begin,
                  int64_t *end);

#endif
