/* rt.h: what generated stage code calls beyond the plain kernels of kernels.h: a rank's run state,
 * the kernels that depend on the layout (vocabulary offsets, vocab-parallel cross entropy), the
 * tensor-parallel collectives and slices, and what fused elementwise kernels need (dropout keys). */
#ifndef PLAIT_RT_H
#define PLAIT_RT_H

#include <stdint.h>

#include "comm.h"
#include "kernels.h"
#include "program.h"

/* The rows a rank's experts receive past the room its arena holds for them (balanced routing):
 * buffers by their place and room in the arena (the tensors sharing both are never live at once,
 * or one is the other in place, and need as many elements in one microbatch), grown when a
 * microbatch needs more, kept for the next. */
typedef struct {
  act_t *place, *data;
  int64_t room, elems;
} ExpertBuffer;
typedef struct {
  ExpertBuffer *buffers;
  int count, cap;
  int64_t most; /* the most rows one rank of an ep group has received in one exchange */
  int64_t routed, dropped; /* the rows routes under a capacity routed while training, and dropped */
} ExpertRows;

struct Run {
  const Program *program;
  Comm *comm;
  int tp, tp_rank, dp, dp_rank, pp, pp_rank;
  int ranks_per_node;          /* consecutive world ranks on one node (comm_ranks_per_node) */
  act_t **model_w;             /* weights as compute reads them, by model parameter index (NULL: not held) */
  real **model_g;              /* their gradients */
  act_t ***layer_w;            /* [layer][block parameter index]; NULL for layers of other ranks */
  real ***layer_g;
  act_t **constants;           /* the model's constants, by index (r->constants[C_...]) */
  act_t *scratch;              /* per-rank scratch region (program->scratch_elems) */
  act_t *recompute;            /* per-rank region a chunk's forward is re-run into */
  act_t *grad_a, *grad_b;      /* the gradient passed between layers in a chunk's backward */
  real *xent_stats;            /* 3·mbs·seq: max, sums and target logits of the cross entropy */
  uint64_t seed;
  int64_t step;                /* iteration, a key of dropout masks */
  int64_t sample0;             /* global index of the current microbatch's first sequence */
  real loss_scale;             /* 1 / the targets counted in the global batch */
  int training;                /* dropout drops only when training; loss terms count only then */
  int rerun;                   /* a layer's forward re-run for its backward: loss terms not again */
  /* the loss of the microbatches this rank ran, scaled: its head's cross entropy, its loss terms */
  double loss;
  struct Profile *profile;     /* --profile: where stage code's kernels add their time (NULL: not profiling) */
  /* Set by the plan's walk during a chunk's last backward: called as each layer's gradients become
   * final, to start their data-parallel reduction while the layers below it run backward. */
  void (*layer_grads_final)(void *arg, int layer);
  void *layer_grads_final_arg;
  ExpertRows expert_rows;
};

/* The generated backward calls this after each layer: layer `layer` is done with this microbatch. */
void rt_layer_backward_done(Run *r, int layer);

/* ---- dropout -------------------------------------------------------------------------------- */

/* Maps a local element index to its index in the whole global batch of the logical tensor: axis 0 is
 * the microbatch's sequences (offset r->sample0, of the global batch), the split axis is offset by
 * this TP rank's share. */
typedef struct {
  int ndim;
  int64_t local[PROGRAM_MAX_DIMS], global[PROGRAM_MAX_DIMS], offset[PROGRAM_MAX_DIMS];
} IndexMap;

IndexMap rt_index_map(const Run *r, int ndim, const int64_t *local, int split_axis);

static inline uint64_t rt_global_index(const IndexMap *m, int64_t i) {
  uint64_t index = 0, stride = 1;
  for (int a = m->ndim - 1; a >= 0; a--) {
    int64_t coord = i % m->local[a];
    i /= m->local[a];
    index += (uint64_t)(coord + m->offset[a]) * stride;
    stride *= (uint64_t)m->global[a];
  }
  return index;
}

/* The Philox stream of a dropout site in a layer at this step (layer -1 outside blocks). */
uint64_t rt_dropout_stream(const Run *r, int site, int layer);

/* What a fused kernel with dropouts needs: the seed, a stream per dropout, the index map of its output. */
enum { EW_MAX_DROPOUTS = 4 };
typedef struct {
  uint64_t seed;
  uint64_t stream[EW_MAX_DROPOUTS];
  IndexMap map;
  int training; /* 0: dropout keeps everything */
} EwKeys;

EwKeys rt_ew_keys(const Run *r, int layer, int ndim, const int64_t *local, int split_axis, int nsites,
                  const int *sites);


/* ---- layout-aware kernels ------------------------------------------------------------------- */

/* Embedding with a table split by rows over TP (split) or whole: this rank's rows start at
 * tp_rank·rows when split. */
void rt_embedding_forward(Run *r, int64_t N, int64_t C, const int32_t *ids, const act_t *table, int64_t rows,
                          int split, act_t *out);
void rt_embedding_backward(Run *r, int64_t N, int64_t C, const int32_t *ids, const act_t *dout, int64_t rows,
                           int split, real *dtable);

/* A target no row has: every row with a target (0 or more) counts. */
#define XENT_NO_IGNORE INT64_MIN

/* Softmax cross entropy of N rows of `cols` logits (this rank's vocabulary share when split), with the
 * max, target logit and sum of exponentials all-reduced over TP when split. Adds the scaled loss of the
 * rows to r->loss and keeps each row's log-normaliser in lse. */
void rt_xent_forward(Run *r, int64_t N, int64_t cols, const act_t *logits, const int32_t *targets, int64_t vocab,
                     int64_t ignore, int split, real *lse);
/* rt_xent_forward over unsplit logits that nothing reads afterwards but the backward; when training, it
 * also writes dlogits = loss_scale·(softmax − onehot) over them while each row is in cache (the program's
 * backward then has nothing to do for the cross entropy). */
void rt_xent_forward_grad(Run *r, int64_t N, int64_t cols, act_t *logits, const int32_t *targets, int64_t vocab,
                          int64_t ignore, real *lse);
/* dlogits = loss_scale·(softmax − onehot), written over the logits. */
void rt_xent_backward(Run *r, int64_t N, int64_t cols, act_t *logits, const int32_t *targets, int64_t vocab,
                      int64_t ignore, int split, const real *lse);

/* A term added to the loss (plait.add_loss): y = x (n elements; nothing to copy when y is x) and,
 * when training, the sum of term's `count` elements times the loss scale added to r->loss. Its
 * backward: dterm = the loss scale in each of its count elements. */
void rt_loss_term(Run *r, int64_t n, const act_t *x, act_t *y, int64_t count, const act_t *term);
void rt_loss_term_backward(Run *r, int64_t count, act_t *dterm);

/* ---- tensor-parallel collectives (GROUP_TP) ------------------------------------------------- */

/* out = the sum over TP ranks of in (out may be in). */
void rt_allreduce(Run *r, const act_t *in, act_t *out, int64_t n);
/* Gather / scatter along an axis: outer = product of the dims before it, inner = this rank's extent of
 * the axis times the product of the dims after it. */
void rt_allgather(Run *r, const act_t *in, act_t *out, int64_t outer, int64_t inner);
void rt_reducescatter(Run *r, const act_t *in, act_t *out, int64_t outer, int64_t inner);
/* This rank's block of a replicated tensor: out[o][i] = in[o][tp_rank·inner + i]. */
void rt_slice(Run *r, const act_t *in, act_t *out, int64_t outer, int64_t inner);

/* ---- expert parallelism (runtime/experts.c) -------------------------------------------------- */

/* A mixture of E experts spread over the GROUP_EP ranks, E / ep each (rank i of the group holds
 * experts [i·E/ep, (i+1)·E/ep)). rt_expert_counts: every rank's rows per expert, all_counts
 * [ep][E], gathered from each one's counts [E]; local_counts [E/ep]: the rows this rank's experts
 * receive from all of them. */
void rt_expert_counts(Run *r, int64_t E, const int32_t *counts, int32_t *all_counts,
                      int32_t *local_counts);
/* The rows this rank's experts receive, from all_counts; each ep rank's count is checked against
 * the most so far (r->expert_rows.most). */
int64_t rt_expert_held(Run *r, int64_t E, const int32_t *all_counts);
/* A route under a capacity kept counts [E] of its `rows` routed rows: the rest, dropped, counted
 * (while training, once a step's forward) in r->expert_rows. */
void rt_expert_dropped(Run *r, int64_t rows, int64_t E, const int32_t *counts);
/* Where a tensor of `elems` elements over received rows lives: its `place` in the arena where its
 * `room` (balanced routing) holds them, else a buffer of its own kept by place. */
act_t *rt_expert_rows(Run *r, act_t *place, int64_t room, int64_t elems);
void rt_expert_rows_free(Run *r);
/* in: this rank's routed rows [.., D], grouped by expert; out [held, D]: the rows the ranks routed
 * to this rank's experts, grouped by local expert, then by the rank that routed them. The adjoint
 * of rt_expert_return. */
void rt_expert_send(Run *r, int64_t E, int64_t D, const int32_t *all_counts, const act_t *in,
                    act_t *out);
/* The reverse: each held row [.., D] back to its place among the routed rows of its rank. */
void rt_expert_return(Run *r, int64_t E, int64_t D, const int32_t *all_counts, const act_t *in,
                      act_t *out);

#endif
