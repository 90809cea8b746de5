/* rt.c: the layout-aware calls of generated stage code: vocab-parallel embedding and cross entropy,
 * tensor-parallel collectives and slices, dropout keys, and terms added to the loss. */
#include "rt.h"

#include <string.h>

#include "device.h"

/* ---- dropout -------------------------------------------------------------------------------- */

IndexMap rt_index_map(const Run *r, int ndim, const int64_t *local, int split_axis) {
  IndexMap m;
  memset(&m, 0, sizeof m);
  m.ndim = ndim;
  for (int a = 0; a < ndim; a++) {
    m.local[a] = m.global[a] = local[a];
    if (a == split_axis) {
      m.global[a] = local[a] * r->tp;
      m.offset[a] = local[a] * r->tp_rank;
    }
  }
  m.global[0] = r->program->gbs; /* axis 0 is the microbatch's sequences, placed in the global batch */
  m.offset[0] = r->sample0;
  return m;
}

/* Streams are distinct for every (step, layer, site): 2^20 sites and layers, the step above. */
uint64_t rt_dropout_stream(const Run *r, int site, int layer) {
  return ((uint64_t)r->step << 40) ^ ((uint64_t)(layer + 1) << 20) ^ (uint64_t)site ^ 0xd50d000000000000ULL;
}

EwKeys rt_ew_keys(const Run *r, int layer, int ndim, const int64_t *local, int split_axis, int nsites,
                  const int *sites) {
  EwKeys k;
  memset(&k, 0, sizeof k);
  k.seed = r->seed;
  k.training = r->training;
  for (int s = 0; s < nsites && s < EW_MAX_DROPOUTS; s++) k.stream[s] = rt_dropout_stream(r, sites[s], layer);
  k.map = rt_index_map(r, ndim, local, split_axis);
  return k;
}

/* ---- vocab-parallel embedding and cross entropy --------------------------------------------- */

void rt_embedding_forward(Run *r, int64_t N, int64_t C, const int32_t *ids, const act_t *table, int64_t rows,
                          int split, act_t *out) {
  k_embedding_forward(N, C, ids, table, split ? r->tp_rank * rows : 0, rows, out);
}

void rt_embedding_backward(Run *r, int64_t N, int64_t C, const int32_t *ids, const act_t *dout, int64_t rows,
                           int split, real *dtable) {
  k_embedding_backward(N, C, ids, dout, split ? r->tp_rank * rows : 0, rows, dtable);
}

void rt_xent_forward(Run *r, int64_t N, int64_t cols, const act_t *logits, const int32_t *targets, int64_t vocab,
                     int64_t ignore, int split, real *lse) {
  int64_t col0 = split ? r->tp_rank * cols : 0;
  real *max = r->xent_stats, *sums = max + N, *target = max + 2 * N;
  k_xent_max(N, cols, logits, col0, vocab, max);
  if (split) comm_allreduce(r->comm, GROUP_TP, max, N, COMM_REAL, COMM_MAX);
  k_xent_sums(N, cols, logits, col0, vocab, targets, max, sums, target);
  if (split) comm_allreduce(r->comm, GROUP_TP, sums, 2 * N, COMM_REAL, COMM_SUM); /* sums and targets together */
  r->loss += k_xent_loss(N, targets, ignore, max, sums, target, r->loss_scale, lse);
}

void rt_xent_forward_grad(Run *r, int64_t N, int64_t cols, act_t *logits, const int32_t *targets, int64_t vocab,
                          int64_t ignore, real *lse) {
  if (!r->training) {
    rt_xent_forward(r, N, cols, logits, targets, vocab, ignore, 0, lse);
    return;
  }
  real *max = r->xent_stats, *sums = max + N, *target = max + 2 * N;
  r->loss += k_xent_forward_grad(N, cols, logits, vocab, targets, ignore, r->loss_scale, max, sums, target, lse);
}

void rt_xent_backward(Run *r, int64_t N, int64_t cols, act_t *logits, const int32_t *targets, int64_t vocab,
                      int64_t ignore, int split, const real *lse) {
  k_xent_backward(N, cols, logits, split ? r->tp_rank * cols : 0, vocab, targets, ignore, lse, r->loss_scale);
}

/* ---- tensor-parallel collectives ------------------------------------------------------------ */

void rt_layer_backward_done(Run *r, int layer) {
  if (r->layer_grads_final) r->layer_grads_final(r->layer_grads_final_arg, layer);
}

void rt_allreduce(Run *r, const act_t *in, act_t *out, int64_t n) {
  if (out != in) device_copy(out, in, (size_t)n * sizeof *out);
  comm_allreduce(r->comm, GROUP_TP, out, n, COMM_ACT, COMM_SUM);
}

void rt_allgather(Run *r, const act_t *in, act_t *out, int64_t outer, int64_t inner) {
  comm_allgather(r->comm, GROUP_TP, in, out, outer, inner, COMM_ACT);
}

void rt_reducescatter(Run *r, const act_t *in, act_t *out, int64_t outer, int64_t inner) {
  comm_reducescatter(r->comm, GROUP_TP, in, out, outer, inner, COMM_ACT);
}

void rt_slice(Run *r, const act_t *in, act_t *out, int64_t outer, int64_t inner) {
  int64_t whole = inner * r->tp;
  for (int64_t o = 0; o < outer; o++)
    device_copy(out + o * inner, in + o * whole + r->tp_rank * inner, (size_t)inner * sizeof *out);
}

/* The term and its gradient go through the host a chunk at a time: they live in the backend's
 * memory (the GPU's on the CUDA backend) and hold a few values (one a layer, say). */
enum { LOSS_TERM_CHUNK = 256 };

/* The values of the chunk from `at` of `count`. */
static int64_t loss_term_chunk(int64_t count, int64_t at) {
  return count - at < LOSS_TERM_CHUNK ? count - at : LOSS_TERM_CHUNK;
}

void rt_loss_term(Run *r, int64_t n, const act_t *x, act_t *y, int64_t count, const act_t *term) {
  if (y != x) device_copy(y, x, (size_t)n * sizeof *y);
  if (!r->training || r->rerun) return;
  double sum = 0;
  act_t chunk[LOSS_TERM_CHUNK];
  for (int64_t at = 0; at < count; at += LOSS_TERM_CHUNK) {
    int64_t m = loss_term_chunk(count, at);
    device_download(chunk, term + at, (size_t)m * sizeof *chunk);
    for (int64_t i = 0; i < m; i++) sum += act_value(chunk[i]);
  }
  r->loss += sum * r->loss_scale;
}

void rt_loss_term_backward(Run *r, int64_t count, act_t *dterm) {
  act_t chunk[LOSS_TERM_CHUNK];
  for (int i = 0; i < LOSS_TERM_CHUNK; i++) chunk[i] = act_round(r->loss_scale);
  for (int64_t at = 0; at < count; at += LOSS_TERM_CHUNK) {
    int64_t m = loss_term_chunk(count, at);
    device_upload(dterm + at, chunk, (size_t)m * sizeof *chunk);
  }
}
