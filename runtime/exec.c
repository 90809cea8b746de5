/* exec.c: walking a rank's action list: slots, groups of sends and receives, reductions, the step. */
#include "exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "device.h"
#include "profile.h"

static void *zeroed(Exec *e, size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p) comm_fail(e->run->comm, "out of memory allocating %zu bytes of the plan's tables", count * size);
  return p;
}

static int on_this_rank(const Exec *e, int chunk) {
  return chunk >= 0 && chunk < e->prog->nchunks && chunk % e->prog->pp == e->run->pp_rank;
}

static void setup(Exec *e, const Program *prog, Run *run, Params *ps, const Action *actions, int nactions) {
  memset(e, 0, sizeof *e);
  e->prog = prog;
  e->run = run;
  e->params = ps;
  e->actions = actions;
  e->nactions = nactions;
  e->microbatch_tokens = prog->mbs * prog->seq;
  e->pending = zeroed(e, (size_t)ps->count + (size_t)prog->nchunks, sizeof *e->pending);
  e->reduced = zeroed(e, (size_t)ps->count, 1);
  e->last_backward = zeroed(e, (size_t)prog->nchunks, sizeof *e->last_backward);
  for (int c = 0; c < prog->nchunks; c++) e->last_backward[c] = -1;
  for (int i = 0; i < nactions; i++)
    if (actions[i].kind == ACT_BACKWARD) e->last_backward[actions[i].chunk] = i;
}

void exec_create(Exec *e, const Program *prog, Run *run, Params *ps) {
  setup(e, prog, run, ps, prog->actions[run->pp_rank], prog->nactions[run->pp_rank]);
  e->pool = zeroed(e, (size_t)prog->nchunks, sizeof *e->pool);
  for (int c = 0; c < prog->nchunks; c++)
    if (on_this_rank(e, c))
      e->pool[c] = device_alloc((size_t)(prog->slots[c] * prog->chunks[c].slot_elems) * sizeof(act_t), "activation slots");
}

static int is_p2p(int kind);

/* Keeps F, SEND_F and RECV_F; a kept transfer stays joined to the one before it when both were in
 * one group of the training plan. */
void exec_create_forward(Exec *e, const Exec *train) {
  Action *kept = calloc((size_t)train->nactions + 1, sizeof *kept);
  int n = 0, group = 0, last_group = -1;
  for (int i = 0; i < train->nactions; i++) {
    Action a = train->actions[i];
    if (is_p2p(a.kind) && !a.joined) group++;
    if (a.kind != ACT_FORWARD && a.kind != ACT_SEND_F && a.kind != ACT_RECV_F) continue;
    a.joined = is_p2p(a.kind) && n > 0 && is_p2p(kept[n - 1].kind) && last_group == group;
    last_group = is_p2p(a.kind) ? group : -1;
    kept[n++] = a;
  }
  setup(e, train->prog, train->run, train->params, kept, n);
  e->owned = kept;
  e->pool = train->pool;
  e->pool_borrowed = 1;
}

void exec_free(Exec *e) {
  if (!e->pool_borrowed) {
    for (int c = 0; c < e->prog->nchunks; c++) device_free(e->pool[c]);
    free(e->pool);
  }
  free(e->pending);
  free(e->reduced);
  free(e->last_backward);
  free(e->times);
  free(e->owned);
  memset(e, 0, sizeof *e);
}

/* ---- slots ---------------------------------------------------------------------------------- */

static act_t *slot(Exec *e, int chunk, int index) {
  if (index < 0 || index >= e->prog->slots[chunk])
    comm_fail(e->run->comm, "the plan gives chunk %d slot %d of %d (a bug in plait)", chunk, index, e->prog->slots[chunk]);
  return e->pool[chunk] + (int64_t)index * e->prog->chunks[chunk].slot_elems;
}

/* ---- compute -------------------------------------------------------------------------------- */

static void forward(Exec *e, const Action *a) {
  const ChunkSpec *c = &e->prog->chunks[a->chunk];
  act_t *s = slot(e, a->chunk, a->slot);
  if (a->neighbour >= 0) /* the previous chunk's output, on this rank */
    device_copy(s + c->input_offset, slot(e, a->chunk - 1, a->neighbour) + e->prog->chunks[a->chunk - 1].output_offset,
                (size_t)e->prog->io_elems * sizeof(act_t));
  e->run->sample0 = (int64_t)e->run->dp_rank * (e->prog->gbs / e->prog->dp) + (int64_t)a->microbatch * e->prog->mbs;
  int64_t at = (int64_t)a->microbatch * e->microbatch_tokens;
  if (e->run->profile) profile_stage_begin(e->run->profile);
  c->forward(e->run, s, e->tokens ? e->tokens + at : NULL, e->targets ? e->targets + at : NULL);
  if (e->run->profile) profile_stage_end(e->run->profile, (double)c->elementwise_forward * sizeof(act_t));
}

static void layer_grads_final(void *arg, int layer);

static void backward(Exec *e, const Action *a, int index) {
  const ChunkSpec *c = &e->prog->chunks[a->chunk];
  act_t *s = slot(e, a->chunk, a->slot);
  if (a->neighbour >= 0) /* the next chunk's input gradient, on this rank */
    device_copy(s + c->grad_out_offset, slot(e, a->chunk + 1, a->neighbour) + e->prog->chunks[a->chunk + 1].grad_in_offset,
                (size_t)e->prog->io_elems * sizeof(act_t));
  e->run->sample0 = (int64_t)e->run->dp_rank * (e->prog->gbs / e->prog->dp) + (int64_t)a->microbatch * e->prog->mbs;
  int64_t at = (int64_t)a->microbatch * e->microbatch_tokens;
  int last = index == e->last_backward[a->chunk];
  e->run->layer_grads_final = last && !e->prog->grad_reduce_after ? layer_grads_final : NULL;
  e->run->layer_grads_final_arg = e;
  if (e->run->profile) profile_stage_begin(e->run->profile);
  c->backward(e->run, s, e->tokens ? e->tokens + at : NULL, e->targets ? e->targets + at : NULL);
  if (e->run->profile) profile_stage_end(e->run->profile, (double)c->elementwise_backward * sizeof(act_t));
  e->run->layer_grads_final = NULL;
}

/* ---- communication -------------------------------------------------------------------------- */

/* Both ends name a transfer alike: the boundary between chunks b and b + 1, the direction, the microbatch. */
static int tag(const Exec *e, int boundary, int gradient, int microbatch) {
  return ((boundary * e->prog->microbatches + microbatch) * 2 + gradient) & 0x3fffffff;
}

/* Whether a transfer between this rank's pipeline stage and pipeline rank peer_pp goes scattered
 * over the TP ranks (a 1/tp slice each, all-gathered over TP on arrival): the program allows it
 * (every TP rank holds the activation whole), each TP group lies inside a node, and the two
 * groups are on different nodes. Every member of both groups judges alike. */
static int scattered(const Exec *e, int peer_pp) {
  const Program *p = e->prog;
  const Run *r = e->run;
  int per_node = r->ranks_per_node;
  if (!p->scatter_gather || p->tp == 1 || per_node % p->tp != 0) return 0;
  for (int t = 0; t < p->tp; t++)
    if (comm_grid_rank(p->tp, p->dp, t, r->dp_rank, r->pp_rank) / per_node !=
        comm_grid_rank(p->tp, p->dp, t, r->dp_rank, peer_pp) / per_node)
      return 1;
  return 0;
}

/* The activation or gradient an action sends or receives, whole (in its slot). */
static act_t *transfer_buffer(Exec *e, const Action *a) {
  const ChunkSpec *c = &e->prog->chunks[a->chunk];
  act_t *s = slot(e, a->chunk, a->slot);
  switch (a->kind) {
  case ACT_SEND_F: return s + c->output_offset;
  case ACT_RECV_F: return s + c->input_offset;
  case ACT_SEND_B: return s + c->grad_in_offset;
  default: return s + c->grad_out_offset;
  }
}

static void post(Exec *e, const Action *a) {
  Comm *comm = e->run->comm;
  int peer = comm_group_member(comm, GROUP_PP, a->peer);
  int64_t lo = 0, hi = e->prog->io_elems;
  if (scattered(e, a->peer)) comm_chunk(hi, e->prog->tp, e->run->tp_rank, &lo, &hi);
  act_t *buf = transfer_buffer(e, a) + lo;
  int per_node = e->run->ranks_per_node, send = a->kind == ACT_SEND_F || a->kind == ACT_SEND_B;
  if (send && comm_info(comm)->rank / per_node != peer / per_node)
    e->bytes_across_nodes += (double)(hi - lo) * sizeof(act_t);
  switch (a->kind) {
  case ACT_SEND_F: comm_send(comm, peer, buf, hi - lo, COMM_ACT, tag(e, a->chunk, 0, a->microbatch)); break;
  case ACT_RECV_F: comm_recv(comm, peer, buf, hi - lo, COMM_ACT, tag(e, a->chunk - 1, 0, a->microbatch)); break;
  case ACT_SEND_B: comm_send(comm, peer, buf, hi - lo, COMM_ACT, tag(e, a->chunk - 1, 1, a->microbatch)); break;
  default: comm_recv(comm, peer, buf, hi - lo, COMM_ACT, tag(e, a->chunk, 1, a->microbatch)); break;
  }
}

/* A scattered receive's slices, from every TP rank, put together on each. */
static void gather_scattered(Exec *e, const Action *a) {
  if ((a->kind == ACT_RECV_F || a->kind == ACT_RECV_B) && scattered(e, a->peer))
    comm_allgather_chunks(e->run->comm, GROUP_TP, transfer_buffer(e, a), e->prog->io_elems,
                          COMM_ACT);
}

static int is_p2p(int kind) {
  return kind == ACT_SEND_F || kind == ACT_RECV_F || kind == ACT_SEND_B || kind == ACT_RECV_B;
}

/* A group: the p2p action at i and those joined to it, posted together, complete before going on. */
static int group(Exec *e, int i) {
  int end = i + 1;
  while (end < e->nactions && is_p2p(e->actions[end].kind) && e->actions[end].joined) end++;
  comm_p2p_start(e->run->comm);
  for (int k = i; k < end; k++) post(e, &e->actions[k]);
  comm_p2p_end(e->run->comm);
  for (int k = i; k < end; k++) gather_scattered(e, &e->actions[k]);
  return end;
}

/* ---- reductions ----------------------------------------------------------------------------- */

enum { ANY_LAYER = -2 };
/* Exec.reduced: a slot's gradient in this iteration */
enum { SLOT_PENDING, SLOT_FINAL, SLOT_REDUCING };

/* Starts the data-parallel reduction of a bucket: an all-reduce, or with the distributed optimizer
 * the reduce-scatter that leaves this rank the sums of its own elements. */
static void start_bucket(Exec *e, const Bucket *b) {
  Comm *c = e->run->comm;
  real *g = e->params->slot[b->from].g;
  e->buckets++;
  e->buckets_during_backward += e->run->layer_grads_final != NULL;
  e->pending[e->npending++] = e->params->sharded
                                  ? comm_reducescatter_start(c, GROUP_DP, g, b->n)
                                  : comm_allreduce_start(c, b->group, g, b->n, COMM_SUM);
}

/* Whether every gradient of the bucket is final and its reduction not started yet. */
static int bucket_ready(const Exec *e, const Bucket *b) {
  for (int i = b->from; i < b->to; i++)
    if (e->reduced[i] != SLOT_FINAL) return 0;
  return 1;
}

/* The gradients of chunk's parameters in `layer` (ANY_LAYER: all those not reduced yet) are final:
 * sum the TP partial sums (replicated parameters used on split activations, and key/value heads
 * over the ranks holding each), then start the
 * data-parallel reduction of each bucket whose gradients are now all final. */
static void reduce_final(Exec *e, int chunk, int layer) {
  Params *ps = e->params;
  int first = -1, last = -1;
  for (int i = 0; i < ps->count; i++) {
    ParamSlot *s = &ps->slot[i];
    if (s->chunk != chunk || e->reduced[i] || (layer != ANY_LAYER && s->layer != layer)) continue;
    if (s->spec->tp_sum && e->prog->tp > 1) comm_allreduce(e->run->comm, GROUP_TP, s->g, s->n, COMM_REAL, COMM_SUM);
    if (params_copies(s->spec) > 1)
      comm_allreduce(e->run->comm, GROUP_TP_COPIES, s->g, s->n, COMM_REAL, COMM_SUM);
    e->reduced[i] = SLOT_FINAL;
    if (first < 0) first = s->bucket;
    last = s->bucket;
  }
  for (int k = first; k >= 0 && k <= last; k++) {
    const Bucket *b = &ps->buckets[k];
    if (!bucket_ready(e, b)) continue;
    if (comm_group_size(e->run->comm, b->group) > 1) start_bucket(e, b);
    memset(e->reduced + b->from, SLOT_REDUCING, (size_t)(b->to - b->from));
  }
}

static int chunk_of_layer(const Program *prog, int layer) {
  for (int c = 0; c < prog->nchunks; c++)
    if (layer >= prog->chunks[c].first_layer && layer < prog->chunks[c].first_layer + prog->chunks[c].layers) return c;
  return -1;
}

/* During a chunk's last backward: `layer` is done, so its gradients are. */
static void layer_grads_final(void *arg, int layer) {
  Exec *e = arg;
  double start = e->run->profile ? profile_start(e->run->profile) : 0;
  reduce_final(e, chunk_of_layer(e->prog, layer), layer);
  if (e->run->profile) profile_add(e->run->profile, PROFILE_COMM, start, 0, 0);
}

/* The tied table's two copies (first and last stage) get the sum of both gradients, once the
 * data-parallel reductions in flight (which include the table's) are done: the own elements, which
 * are all that the optimizer step reads (the two copies are sharded alike). */
static void reduce_tied(Exec *e) {
  Params *ps = e->params;
  exec_finish_reductions(e);
  for (int i = 0; i < ps->count; i++) {
    ParamSlot *s = &ps->slot[i];
    if (s->layer < 0 && s->spec->in_embed && s->spec->in_head)
      comm_allreduce(e->run->comm, GROUP_EMBED, s->g + s->own_begin, s->own_end - s->own_begin,
                     COMM_REAL, COMM_SUM);
  }
}

void exec_finish_reductions(Exec *e) {
  for (int i = 0; i < e->npending; i++) comm_wait(e->run->comm, e->pending[i]);
  e->npending = 0;
}

/* ---- the walk ------------------------------------------------------------------------------- */

/* The optimizer step, once the data-parallel reductions in flight are done (waiting on them is
 * communication in a profile; the step counts its own parts). */
static void step(Exec *e) {
  double start = e->run->profile ? profile_start(e->run->profile) : 0;
  exec_finish_reductions(e);
  if (e->run->profile) profile_add(e->run->profile, PROFILE_COMM, start, 0, 0);
  if (e->step) e->step(e->step_arg);
}

static void record(Exec *e, int from, int to, double start) {
  if (!e->times) return;
  double end = clock_seconds();
  for (int k = from; k < to; k++) e->times[k] = (ActionTime){k, start, end};
}

void exec_record(Exec *e) {
  if (!e->times) e->times = zeroed(e, (size_t)e->nactions, sizeof *e->times);
}

void exec_iteration(Exec *e, const int32_t *tokens, const int32_t *targets) {
  e->tokens = tokens;
  e->targets = targets;
  memset(e->reduced, 0, (size_t)e->params->count);
  e->buckets = e->buckets_during_backward = 0;
  e->bytes_across_nodes = 0;
  for (int i = 0; i < e->nactions;) {
    const Action *a = &e->actions[i];
    double start = clock_seconds();
    int next = i + 1;
    switch (a->kind) {
    case ACT_FORWARD: forward(e, a); break;
    case ACT_BACKWARD: backward(e, a, i); break;
    case ACT_REDUCE_GRAD: reduce_final(e, a->chunk, ANY_LAYER); break;
    case ACT_EMBED_REDUCE: reduce_tied(e); break;
    case ACT_STEP: step(e); break;
    default: next = group(e, i); break;
    }
    record(e, i, next, start);
    if (e->run->profile && a->kind != ACT_FORWARD && a->kind != ACT_BACKWARD && a->kind != ACT_STEP)
      profile_add(e->run->profile, PROFILE_COMM, start, 0, 0); /* reductions, sends and receives */
    i = next;
  }
}
