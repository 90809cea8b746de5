/* exec.c: walking a rank's action list: slots, groups of sends and receives, reductions, the step. */
#include "exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void *zeroed(Exec *e, size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p) comm_fail(e->run->comm, "out of memory allocating %zu bytes of activations", count * size);
  return p;
}

static int on_this_rank(const Exec *e, int chunk) {
  return chunk >= 0 && chunk < e->prog->nchunks && chunk % e->prog->pp == e->run->pp_rank;
}

/* The (chunk, microbatch) slots an action reads or writes: its own, and for a forward or backward the
 * neighbouring chunk's when it sits on this rank (activations and gradients pass by copy). */
static int touched(const Exec *e, const Action *a, int *chunks) {
  int n = 0;
  if (a->microbatch < 0) return 0;
  chunks[n++] = a->chunk;
  if (a->kind == ACT_FORWARD && on_this_rank(e, a->chunk - 1) && a->chunk > 0) chunks[n++] = a->chunk - 1;
  if (a->kind == ACT_BACKWARD && on_this_rank(e, a->chunk + 1)) chunks[n++] = a->chunk + 1;
  return n;
}

static void find_last_touches(Exec *e) {
  for (int i = 0; i < e->nactions; i++) {
    int chunks[2], n = touched(e, &e->actions[i], chunks);
    for (int k = 0; k < n; k++) e->last_touch[chunks[k]][e->actions[i].microbatch] = i;
  }
}

static void setup(Exec *e, const Program *prog, Run *run, Params *ps, const Action *actions, int nactions) {
  memset(e, 0, sizeof *e);
  e->prog = prog;
  e->run = run;
  e->params = ps;
  e->actions = actions;
  e->nactions = nactions;
  e->microbatch_tokens = prog->mbs * prog->seq;
  e->pool = zeroed(e, (size_t)prog->nchunks, sizeof *e->pool);
  e->slot_of = zeroed(e, (size_t)prog->nchunks, sizeof *e->slot_of);
  e->busy = zeroed(e, (size_t)prog->nchunks, sizeof *e->busy);
  e->last_touch = zeroed(e, (size_t)prog->nchunks, sizeof *e->last_touch);
  for (int c = 0; c < prog->nchunks; c++) {
    if (!on_this_rank(e, c)) continue;
    e->pool[c] = zeroed(e, (size_t)(prog->slots[c] * prog->chunks[c].slot_elems), sizeof(real));
    e->slot_of[c] = zeroed(e, (size_t)prog->microbatches, sizeof(int));
    e->busy[c] = zeroed(e, (size_t)prog->slots[c], 1);
    e->last_touch[c] = zeroed(e, (size_t)prog->microbatches, sizeof(int));
    for (int m = 0; m < prog->microbatches; m++) e->slot_of[c][m] = -1;
  }
  e->pending = zeroed(e, (size_t)prog->nchunks, sizeof *e->pending);
  find_last_touches(e);
}

void exec_create(Exec *e, const Program *prog, Run *run, Params *ps) {
  setup(e, prog, run, ps, prog->actions[run->pp_rank], prog->nactions[run->pp_rank]);
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
}

void exec_free(Exec *e) {
  for (int c = 0; c < e->prog->nchunks; c++) {
    free(e->pool[c]);
    free(e->slot_of[c]);
    free(e->busy[c]);
    free(e->last_touch[c]);
  }
  free(e->pool);
  free(e->slot_of);
  free(e->busy);
  free(e->last_touch);
  free(e->pending);
  free(e->times);
  free(e->owned);
  memset(e, 0, sizeof *e);
}

/* ---- slots ---------------------------------------------------------------------------------- */

static real *slot(Exec *e, int chunk, int microbatch) {
  int s = e->slot_of[chunk][microbatch];
  if (s < 0) {
    for (s = 0; s < e->prog->slots[chunk] && e->busy[chunk][s]; s++) {}
    if (s == e->prog->slots[chunk])
      comm_fail(e->run->comm, "chunk %d needs more than the plan's %d activation slots (a bug in plait)", chunk,
                e->prog->slots[chunk]);
    e->busy[chunk][s] = 1;
    e->slot_of[chunk][microbatch] = s;
  }
  return e->pool[chunk] + (int64_t)s * e->prog->chunks[chunk].slot_elems;
}

/* Frees the slots whose last use was action i. */
static void release(Exec *e, int i) {
  int chunks[2], n = touched(e, &e->actions[i], chunks), m = e->actions[i].microbatch;
  for (int k = 0; k < n; k++)
    if (e->last_touch[chunks[k]][m] == i) {
      e->busy[chunks[k]][e->slot_of[chunks[k]][m]] = 0;
      e->slot_of[chunks[k]][m] = -1;
    }
}

/* ---- compute -------------------------------------------------------------------------------- */

static void forward(Exec *e, const Action *a) {
  const ChunkSpec *c = &e->prog->chunks[a->chunk];
  real *s = slot(e, a->chunk, a->microbatch);
  if (a->chunk > 0 && on_this_rank(e, a->chunk - 1)) /* the previous chunk's output, on this rank */
    memcpy(s + c->input_offset, slot(e, a->chunk - 1, a->microbatch) + e->prog->chunks[a->chunk - 1].output_offset,
           (size_t)e->prog->io_elems * sizeof(real));
  e->run->sample0 = (int64_t)e->run->dp_rank * (e->prog->gbs / e->prog->dp) + (int64_t)a->microbatch * e->prog->mbs;
  int64_t at = (int64_t)a->microbatch * e->microbatch_tokens;
  c->forward(e->run, s, e->tokens ? e->tokens + at : NULL, e->targets ? e->targets + at : NULL);
}

static void backward(Exec *e, const Action *a) {
  const ChunkSpec *c = &e->prog->chunks[a->chunk];
  real *s = slot(e, a->chunk, a->microbatch);
  if (on_this_rank(e, a->chunk + 1)) /* the next chunk's input gradient, on this rank */
    memcpy(s + c->grad_out_offset, slot(e, a->chunk + 1, a->microbatch) + e->prog->chunks[a->chunk + 1].grad_in_offset,
           (size_t)e->prog->io_elems * sizeof(real));
  e->run->sample0 = (int64_t)e->run->dp_rank * (e->prog->gbs / e->prog->dp) + (int64_t)a->microbatch * e->prog->mbs;
  int64_t at = (int64_t)a->microbatch * e->microbatch_tokens;
  c->backward(e->run, s, e->tokens ? e->tokens + at : NULL, e->targets ? e->targets + at : NULL);
}

/* ---- communication -------------------------------------------------------------------------- */

/* Both ends name a transfer alike: the boundary between chunks b and b + 1, the direction, the microbatch. */
static int tag(const Exec *e, int boundary, int gradient, int microbatch) {
  return ((boundary * e->prog->microbatches + microbatch) * 2 + gradient) & 0x3fffffff;
}

static void post(Exec *e, const Action *a) {
  const ChunkSpec *c = &e->prog->chunks[a->chunk];
  real *s = slot(e, a->chunk, a->microbatch);
  int peer = comm_group_member(e->run->comm, GROUP_PP, a->peer);
  int64_t n = e->prog->io_elems;
  switch (a->kind) {
  case ACT_SEND_F: comm_send(e->run->comm, peer, s + c->output_offset, n, tag(e, a->chunk, 0, a->microbatch)); break;
  case ACT_RECV_F: comm_recv(e->run->comm, peer, s + c->input_offset, n, tag(e, a->chunk - 1, 0, a->microbatch)); break;
  case ACT_SEND_B: comm_send(e->run->comm, peer, s + c->grad_in_offset, n, tag(e, a->chunk - 1, 1, a->microbatch)); break;
  default: comm_recv(e->run->comm, peer, s + c->grad_out_offset, n, tag(e, a->chunk, 1, a->microbatch)); break;
  }
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
  return end;
}

/* ---- reductions ----------------------------------------------------------------------------- */

/* A chunk's gradients are final: sum the TP partial sums (replicated parameters used on split
 * activations), then start the data-parallel all-reduce of the chunk's contiguous gradients. */
static void reduce_chunk(Exec *e, int chunk) {
  Params *ps = e->params;
  real *first = NULL;
  int64_t n = 0;
  for (int i = 0; i < ps->count; i++) {
    ParamSlot *s = &ps->slot[i];
    if (s->chunk != chunk) continue;
    if (s->spec->tp_sum && e->prog->tp > 1) comm_allreduce(e->run->comm, GROUP_TP, s->g, s->n, COMM_REAL, COMM_SUM);
    if (!first) first = s->g;
    n += s->n;
  }
  if (first && e->prog->dp > 1) e->pending[e->npending++] = comm_allreduce_start(e->run->comm, GROUP_DP, first, n, COMM_SUM);
}

/* The tied table's two copies (first and last stage) get the sum of both gradients. */
static void reduce_tied(Exec *e) {
  Params *ps = e->params;
  for (int i = 0; i < ps->count; i++) {
    ParamSlot *s = &ps->slot[i];
    if (s->layer < 0 && s->spec->in_embed && s->spec->in_head)
      comm_allreduce(e->run->comm, GROUP_EMBED, s->g, s->n, COMM_REAL, COMM_SUM);
  }
}

void exec_finish_reductions(Exec *e) {
  for (int i = 0; i < e->npending; i++) comm_wait(e->run->comm, e->pending[i]);
  e->npending = 0;
}

/* ---- the walk ------------------------------------------------------------------------------- */

static void record(Exec *e, int from, int to, double t0, double begin) {
  if (!e->times) return;
  double t1 = now() - begin;
  for (int k = from; k < to; k++) e->times[k] = (ActionTime){k, t0, t1};
}

void exec_iteration(Exec *e, const int32_t *tokens, const int32_t *targets) {
  e->tokens = tokens;
  e->targets = targets;
  double begin = now();
  for (int i = 0; i < e->nactions;) {
    const Action *a = &e->actions[i];
    double t0 = now() - begin;
    int next = i + 1;
    switch (a->kind) {
    case ACT_FORWARD: forward(e, a); break;
    case ACT_BACKWARD: backward(e, a); break;
    case ACT_REDUCE_GRAD: reduce_chunk(e, a->chunk); break;
    case ACT_EMBED_REDUCE: reduce_tied(e); break;
    case ACT_STEP: exec_finish_reductions(e); if (e->step) e->step(e->step_arg); break;
    default: next = group(e, i); break;
    }
    record(e, i, next, t0, begin);
    for (int k = i; k < next; k++) release(e, k);
    i = next;
  }
}
