/* remat.c: selective activation recomputation (Korthikanti et al. 2022, adapted to plait's
 * kernels), the mechanics. After autodiff the backward nodes of a stage read forward tensors;
 * memplan keeps each such tensor from the forward to the backward. A forward node may be
 * recomputed when it is memory-bound (elementwise chains, dropout masks drawn again from their
 * Philox keys, norms with their statistics, rope, split, concat, slice) or a TP all-gather (a norm
 * output gathered again under sequence parallelism, as Megatron-LM does), and every input of it is
 * a parameter, a constant, a kept tensor or made by a node recomputed too; GEMM outputs,
 * attention's output and log-sum-exp, all-reduces' and reduce-scatters' outputs, the stage's
 * output and the cross entropy never are. Which of those nodes are recomputed is the caller's
 * choice (the plan prices them on the machine). Each recomputed node is copied into the backward,
 * before the first backward node that reads one of its outputs (its own recomputed inputs' copies
 * first); backward nodes then read the copies. The forward tensors are no longer read by the
 * backward, so memplan keeps them no longer, and the fuse pass merges the elementwise copies into
 * the backward kernels that read them. */
#include "passes/remat.h"

#include <stdlib.h>
#include <string.h>

#include "passes/autodiff.h"

typedef struct {
  Graph *g;
  const char *chosen; /* per forward node: recomputed in the backward */
  int *copy;          /* per tensor: its recomputed copy, or -1 */
  Node *order;        /* the backward, copies in place */
  int norder;
} Rematerialising;

static int memory_bound(OpKind op) {
  switch (op) {
  case OP_EW:
  case OP_NORM:
  case OP_ROPE:
  case OP_SPLIT:
  case OP_CONCAT:
  case OP_SLICE:
  case OP_ALLGATHER: /* gathered again over TP, as Megatron-LM does under sequence parallelism */
    return 1;
  case OP_MATMUL:
  case OP_REDUCE:
  case OP_ATTENTION:
  case OP_EMBEDDING:
  case OP_XENT:
  case OP_ALLREDUCE:
  case OP_REDUCESCATTER:
  case OP_NORM_BWD:
  case OP_ATTENTION_BWD:
  case OP_EMBEDDING_BWD:
  case OP_XENT_BWD:
  case OP_TOPK:
  case OP_ROUTE:
  case OP_DISPATCH:
  case OP_GROUPED_MATMUL:
  case OP_COMBINE:
  case OP_TOPK_BWD:
  case OP_COMBINE_BWD:
  case OP_FRACTIONS:
  case OP_LOSS_TERM:
  case OP_LOSS_TERM_BWD:
  case OP_EXPERT_COUNTS:
  case OP_EXPERT_SEND:
  case OP_EXPERT_RETURN:
    return 0;
  }
  return 0;
}

int remat_candidate(const Graph *g, int i) {
  const Node *n = &g->nodes[i];
  if (i >= g->nforward || !memory_bound(n->op)) return 0;
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] == g->output) return 0;
  return 1;
}

int remat_closure(const Graph *g, const char *chosen, int i, char *closure) {
  if (chosen[i] || closure[i]) return 1;
  if (!remat_candidate(g, i)) return 0;
  closure[i] = 1;
  const Node *n = &g->nodes[i];
  for (int k = 0; k < n->nin; k++) {
    const Tensor *x = &g->tensors[n->in[k]];
    if (x->kind != T_ACT) {
      if (x->kind == T_GRAD || x->kind == T_PARAM_GRAD) return 0;
      continue;
    }
    if (n->in[k] == g->output || autodiff_saved(g, n->in[k])) continue; /* kept, or chosen */
    if (x->producer < 0 || !remat_closure(g, chosen, x->producer, closure)) return 0;
  }
  return 1;
}

/* Is forward tensor t read by the backward and made again there? */
static int recomputed(Rematerialising *r, int t) {
  const Tensor *x = &r->g->tensors[t];
  return x->kind == T_ACT && x->producer >= 0 && x->producer < r->g->nforward &&
         r->chosen[x->producer];
}

/* A new tensor like forward tensor t, for its copy; -1 when the budget refuses it. */
static int copy_tensor(Graph *g, int t) {
  Tensor like = g->tensors[t];
  int c = graph_tensor(g, like.kind, like.dtype, like.ndim, like.dims, like.name);
  if (c < 0) return -1;
  g->tensors[c].layout = like.layout;
  g->tensors[c].copy_of = t;
  return c;
}

/* Puts the copy of forward node i (and first those of its recomputed inputs) in the order,
 * once. Returns 0, or -1 when the budget refuses a tensor. */
static int place_copy(Rematerialising *r, int i) {
  Graph *g = r->g;
  if (r->copy[g->nodes[i].out[0]] >= 0) return 0;
  Node n = g->nodes[i];
  for (int k = 0; k < n.nin; k++) {
    if (!recomputed(r, n.in[k])) continue;
    if (place_copy(r, g->tensors[n.in[k]].producer)) return -1;
    n.in[k] = r->copy[n.in[k]];
  }
  for (int k = 0; k < n.nout; k++) {
    int c = copy_tensor(g, n.out[k]);
    if (c < 0) return -1;
    r->copy[n.out[k]] = c;
    n.out[k] = c;
  }
  n.backward = n.recomputed = 1;
  n.inplace = -1; /* the kept input lives on */
  r->order[r->norder++] = n;
  return 0;
}

/* The backward node with each recomputed input read from its copy, the copies placed first. */
static int place_reader(Rematerialising *r, Node n) {
  for (int k = 0; k < n.nin; k++) {
    if (!recomputed(r, n.in[k])) continue;
    if (place_copy(r, r->g->tensors[n.in[k]].producer)) return -1;
    n.in[k] = r->copy[n.in[k]];
  }
  r->order[r->norder++] = n;
  return 0;
}

/* The saved tensors recomputed, for the report. */
static void list_recomputed(Rematerialising *r, Remat *out) {
  const Graph *g = r->g;
  out->tensors = calloc((size_t)g->ntensors + 1, sizeof *out->tensors);
  out->count = 0;
  for (int t = 0; t < g->ntensors; t++)
    if (recomputed(r, t) && autodiff_saved(g, t)) out->tensors[out->count++] = t;
}

/* The backward replaced by the order built; every output's producer renumbered. */
static int rebuild(Rematerialising *r) {
  Graph *g = r->g;
  g->nnodes = g->nforward;
  for (int i = 0; i < r->norder; i++)
    if (graph_node(g, &r->order[i]) < 0) return -1;
  return 0;
}

int remat_stage(Graph *g, const char *chosen, Remat *out) {
  Rematerialising r = {.g = g, .chosen = chosen};
  int backward = g->nnodes - g->nforward, status = 0;
  r.order = malloc(((size_t)g->nnodes + 1) * sizeof *r.order);
  list_recomputed(&r, out);
  /* a copy for each forward node at most: tensors grow by each node's outputs */
  r.copy = malloc(((size_t)g->ntensors + (size_t)g->nforward * MAX_OUTPUTS + 1) * sizeof *r.copy);
  for (int t = 0; t < g->ntensors + g->nforward * MAX_OUTPUTS; t++) r.copy[t] = -1;
  Node *readers = malloc(((size_t)backward + 1) * sizeof *readers);
  memcpy(readers, g->nodes + g->nforward, (size_t)backward * sizeof *readers);
  for (int i = 0; status == 0 && i < backward; i++) status = place_reader(&r, readers[i]);
  if (status == 0) status = rebuild(&r);
  free(readers);
  free(r.order);
  free(r.copy);
  return status;
}

void remat_free(Remat *r) {
  free(r->tensors);
  memset(r, 0, sizeof *r);
}
