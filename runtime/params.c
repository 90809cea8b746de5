/* params.c: choosing a rank's parameter shares, their data-parallel buckets and the part of each
 * whose optimizer state it keeps; allocating and initialising them. */
#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "device.h"
#include "kernels.h"

static int chunk_on_rank(const Program *prog, int chunk, int pp_rank) { return chunk % prog->pp == pp_rank; }

/* The chunk holding layer l. */
static int chunk_of_layer(const Program *prog, int layer) {
  for (int c = 0; c < prog->nchunks; c++)
    if (layer >= prog->chunks[c].first_layer && layer < prog->chunks[c].first_layer + prog->chunks[c].layers) return c;
  return -1;
}

/* A model-scope parameter is held with chunk 0 when the embedding reads it, and with the last chunk when
 * the head does; a tied table on two ranks is held by both (its gradients summed by EMBED_REDUCE). When
 * both chunks are on this rank, chunk 0's backward comes last and finishes the gradient. */
static int model_param_chunk(const Program *prog, const ParamSpec *p, int pp_rank) {
  int last = prog->nchunks - 1;
  if (p->in_embed && chunk_on_rank(prog, 0, pp_rank)) return 0;
  if (p->in_head && chunk_on_rank(prog, last, pp_rank)) return last;
  return -1;
}

int params_copies(const ParamSpec *p) { return p->split_copies > 1 ? p->split_copies : 1; }

int params_ep(const Program *prog) { return prog->ep > 1 ? prog->ep : 1; }

/* The rank's piece of the split axis: its own, or with copies the one it shares; of an expert's
 * weights, its ep rank's experts along axis 0. */
static void set_box(ParamSlot *s, const Program *prog, int tp_rank, int ep_rank) {
  const ParamSpec *p = s->spec;
  int copies = params_copies(p), tp = prog->tp, ep = p->expert_split ? params_ep(prog) : 1;
  s->box.ndim = p->ndim;
  s->n = 1;
  for (int a = 0; a < p->ndim; a++) {
    int64_t share = a == p->split_axis ? p->shape[a] / (tp / copies) : p->shape[a];
    s->box.extent[a] = p->unpadded[a];
    s->box.begin[a] = a == p->split_axis ? share * (tp_rank / copies) : 0;
    if (a == 0 && ep > 1) share /= ep, s->box.begin[a] = share * ep_rank;
    s->box.count[a] = share;
    s->n *= share;
  }
}

static void add_slot(Params *ps, const Program *prog, const ParamSpec *p, int layer, int chunk,
                     int tp_rank, int ep_rank) {
  ParamSlot *s = &ps->slot[ps->count++];
  memset(s, 0, sizeof *s);
  s->spec = p;
  s->layer = layer;
  s->chunk = chunk;
  if (layer >= 0) snprintf(s->name, sizeof s->name, "layers.%d.%s", layer, p->name);
  else snprintf(s->name, sizeof s->name, "%s", p->name);
  set_box(s, prog, tp_rank, ep_rank);
  int tied_copy = layer < 0 && p->in_embed && chunk != 0; /* the head's copy of a tied table */
  /* once over TP (a piece on several ranks by the first of them); frozen: never counted */
  s->counted = p->trainable && !tied_copy && tp_rank % (p->split_axis >= 0 ? params_copies(p) : prog->tp) == 0;
  ps->elems += s->n;
}

/* Chunk by chunk, so that a chunk's gradients lie together (one data-parallel reduction each); in a
 * layer (or the model's), each parameter at its place: a fused GEMM's weights side by side. */
static int by_chunk(const void *a, const void *b) {
  const ParamSlot *x = a, *y = b;
  if (x->chunk != y->chunk) return x->chunk - y->chunk;
  if (x->layer != y->layer) return x->layer - y->layer;
  return x->spec->place - y->spec->place;
}

static void choose(Params *ps, const Program *prog, int pp_rank, int tp_rank, int ep_rank) {
  ps->slot = calloc((size_t)(prog->nmodel_params + prog->layers * prog->nblock_params) + 1, sizeof *ps->slot);
  for (int i = 0; i < prog->nmodel_params; i++) {
    int chunk = model_param_chunk(prog, &prog->model_params[i], pp_rank);
    if (chunk >= 0) add_slot(ps, prog, &prog->model_params[i], -1, chunk, tp_rank, ep_rank);
  }
  for (int layer = 0; layer < prog->layers; layer++) {
    int chunk = chunk_of_layer(prog, layer);
    if (!chunk_on_rank(prog, chunk, pp_rank)) continue;
    for (int i = 0; i < prog->nblock_params; i++)
      add_slot(ps, prog, &prog->block_params[i], layer, chunk, tp_rank, ep_rank);
  }
  qsort(ps->slot, (size_t)ps->count, sizeof *ps->slot, by_chunk);
}

static void *zeroed(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p) {
    fprintf(stderr, "plait: out of memory allocating %zu bytes of parameter tables\n", count * size);
    exit(1);
  }
  return p;
}

/* ---- buckets and the own elements ------------------------------------------------------------ */

static int is_tied_table(const ParamSlot *s) {
  return s->layer < 0 && s->spec->in_embed && s->spec->in_head;
}

static int same_bucket(const Program *prog, const ParamSlot *a, const ParamSlot *b) {
  if (a->chunk != b->chunk || a->spec->expert_split != b->spec->expert_split) return 0;
  if (prog->distributed_optimizer && (is_tied_table(a) || is_tied_table(b))) return 0;
  return prog->grad_reduce_after || a->layer == b->layer;
}

void params_share(const Params *ps, const ParamSlot *s, int dp, int dp_rank, int64_t *begin,
                  int64_t *end) {
  const Bucket *b = &ps->buckets[s->bucket];
  int64_t lo = 0, hi = b->n, at = s->bucket_offset;
  if (ps->sharded) comm_chunk(b->n, dp, dp_rank, &lo, &hi);
  *begin = lo > at ? lo - at : 0;
  *begin = *begin < s->n ? *begin : s->n;
  *end = hi - at < *begin ? *begin : hi - at < s->n ? hi - at : s->n;
}

/* Cuts the sorted slots into buckets; each slot's own elements are where its bucket's own chunk
 * meets it. */
static void cut_buckets(Params *ps, const Program *prog, int dp_rank) {
  ps->sharded = prog->distributed_optimizer && prog->dp > 1;
  ps->buckets = zeroed((size_t)ps->count + 1, sizeof *ps->buckets);
  for (int i = 0; i < ps->count; i++) {
    if (i == 0 || !same_bucket(prog, &ps->slot[i - 1], &ps->slot[i]))
      ps->buckets[ps->nbuckets++] = (Bucket){
          .from = i, .to = i,
          .group = ps->slot[i].spec->expert_split && params_ep(prog) > 1 ? GROUP_EP_DP : GROUP_DP};
    Bucket *b = &ps->buckets[ps->nbuckets - 1];
    ps->slot[i].bucket = ps->nbuckets - 1;
    ps->slot[i].bucket_offset = b->n;
    b->to = i + 1, b->n += ps->slot[i].n;
  }
  for (int i = 0; i < ps->count; i++) {
    ParamSlot *s = &ps->slot[i];
    params_share(ps, s, prog->dp, dp_rank, &s->own_begin, &s->own_end);
    ps->own_elems += s->own_end - s->own_begin;
  }
}

/* ---- storage --------------------------------------------------------------------------------- */

/* Points a slot at its weights and gradient (element `at` of the rank's) and at the state of its own
 * elements (element `own_at` of the own ones). */
static void point(Params *ps, ParamSlot *s, int64_t at, int64_t own_at) {
  real *grads = ps->storage + (ACT_SEPARATE ? ps->own_elems : ps->elems);
  real *m = grads + ps->elems, *v = m + ps->own_elems;
  s->g = grads + at;
  s->m = m + own_at, s->v = v + own_at;
#if ACT_SEPARATE
  s->w = ps->compute + at;
  s->master = ps->storage + own_at;
#else
  s->w = ps->storage + at;
  s->master = s->w + s->own_begin;
#endif
}

/* Carves backend storage and fills the pointer tables stage code reads. */
static void place(Params *ps, const Program *prog) {
  int64_t masters = ACT_SEPARATE ? ps->own_elems : ps->elems;
  ps->storage = device_alloc((size_t)(masters + ps->elems + 2 * ps->own_elems) * sizeof(real),
                             "parameters, gradients and Adam state");
#if ACT_SEPARATE
  ps->compute = device_alloc((size_t)ps->elems * sizeof(act_t), "weights for compute");
#endif
  ps->model_w = zeroed((size_t)prog->nmodel_params + 1, sizeof(act_t *));
  ps->model_g = zeroed((size_t)prog->nmodel_params + 1, sizeof(real *));
  ps->layer_w = zeroed((size_t)prog->layers, sizeof(act_t **));
  ps->layer_g = zeroed((size_t)prog->layers, sizeof(real **));
  int64_t at = 0, own_at = 0;
  for (int i = 0; i < ps->count; i++) {
    ParamSlot *s = &ps->slot[i];
    point(ps, s, at, own_at);
    at += s->n, own_at += s->own_end - s->own_begin;
    int index = (int)(s->spec - (s->layer < 0 ? prog->model_params : prog->block_params));
    if (s->layer < 0) {
      ps->model_w[index] = s->w, ps->model_g[index] = s->g;
      continue;
    }
    if (!ps->layer_w[s->layer]) {
      ps->layer_w[s->layer] = zeroed((size_t)prog->nblock_params, sizeof(act_t *));
      ps->layer_g[s->layer] = zeroed((size_t)prog->nblock_params, sizeof(real *));
    }
    ps->layer_w[s->layer][index] = s->w, ps->layer_g[s->layer][index] = s->g;
  }
}

real *params_own(const ParamSlot *s, ParamState kind) {
  return kind == PARAM_WEIGHTS ? s->master : kind == PARAM_ADAM_M ? s->m : s->v;
}

void params_upload(ParamSlot *s, ParamState kind, const real *host) {
  size_t own = (size_t)(s->own_end - s->own_begin) * sizeof(real);
  if (kind != PARAM_WEIGHTS) {
    device_upload(params_own(s, kind), host + s->own_begin, own);
    return;
  }
#if ACT_SEPARATE
  real *whole = device_alloc((size_t)s->n * sizeof(real), "a parameter on its way in");
  device_upload(whole, host, (size_t)s->n * sizeof(real));
  k_to_act(s->n, whole, s->w);
  device_copy(s->master, whole + s->own_begin, own);
  device_free(whole);
#else
  device_upload(s->w, host, (size_t)s->n * sizeof(real));
#endif
}

/* Each share drawn on the host at its global element indices, then moved to the backend's memory. */
static void initialise(Params *ps, uint64_t seed) {
  for (int i = 0; i < ps->count; i++) {
    ParamSlot *s = &ps->slot[i];
    real *host = zeroed((size_t)s->n, sizeof *host);
    switch (s->spec->init) {
    case INIT_NORMAL_DIST: philox_fill_normal(host, &s->box, seed, philox_stream_of(s->name), s->spec->std); break;
    case INIT_ZERO: philox_fill_const(host, &s->box, 0); break;
    case INIT_ONE: philox_fill_const(host, &s->box, 1); break;
    }
    params_upload(s, PARAM_WEIGHTS, host);
    free(host);
  }
}

void params_create(Params *ps, const Program *prog, int pp_rank, int tp_rank, int dp_rank,
                   uint64_t seed) {
  memset(ps, 0, sizeof *ps);
  choose(ps, prog, pp_rank, tp_rank, dp_rank % params_ep(prog));
  cut_buckets(ps, prog, dp_rank);
  place(ps, prog);
  initialise(ps, seed);
}

void params_free(Params *ps, const Program *prog) {
  for (int l = 0; l < prog->layers; l++) {
    free(ps->layer_w[l]);
    free(ps->layer_g[l]);
  }
  free(ps->layer_w);
  free(ps->layer_g);
  free(ps->model_w);
  free(ps->model_g);
  device_free(ps->storage);
  device_free(ps->compute);
  free(ps->slot);
  free(ps->buckets);
  memset(ps, 0, sizeof *ps);
}

void params_zero_others_grads(Params *ps) {
  for (int i = 0; i < ps->count; i++) {
    ParamSlot *s = &ps->slot[i];
    device_zero(s->g, (size_t)s->own_begin * sizeof(real));
    device_zero(s->g + s->own_end, (size_t)(s->n - s->own_end) * sizeof(real));
  }
}

void params_zero_grads(Params *ps) {
  real *grads = ps->storage + (ACT_SEPARATE ? ps->own_elems : ps->elems);
  device_zero(grads, (size_t)ps->elems * sizeof(real));
}

