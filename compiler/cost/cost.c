/* cost.c: counting parameters, FLOPs, collectives and activation bytes over the stage graphs. */
#include "cost/cost.h"

#include <stdlib.h>
#include <string.h>


double cost_ring_allreduce(double bytes, int n) { return n > 1 ? 2.0 * (n - 1) / n * bytes : 0; }
double cost_ring_allgather(double bytes, int n) { return n > 1 ? (double)(n - 1) / n * bytes : 0; }
double cost_ring_reducescatter(double bytes, int n) { return cost_ring_allgather(bytes, n); }

double cost_dp_bytes(double params, int d, int distributed_optimizer, int weight_bytes) {
  if (!distributed_optimizer) return cost_ring_allreduce(4 * params, d);
  return cost_ring_reducescatter(4 * params, d) + cost_ring_allgather(weight_bytes * params, d);
}

static double elems(const Model *m, const Graph *g, int t) {
  return (double)tensor_elems(m, &g->tensors[t]);
}

/* 2·M·N·K: each output element is a dot product of length K (the contraction). */
static double matmul_flops(const Model *m, const Graph *g, const Node *n) {
  const Tensor *a = &g->tensors[n->in[0]];
  double k = 1;
  if (n->a.mm.trans_a)
    for (int i = 0; i + 1 < a->ndim; i++) k *= (double)m->dims[a->dims[i]].size;
  else
    k = (double)m->dims[a->dims[a->ndim - 1]].size;
  return 2.0 * elems(m, g, n->out[0]) * k;
}

/* A GEMM per expert over its rows: 2·rows·N·K over the routed rows (each token's k), whatever
 * the experts; with trans_a (a weight's gradient) the rows are the contraction. */
static double grouped_matmul_flops(const Model *m, const Graph *g, const Node *n) {
  const Tensor *a = &g->tensors[n->in[0]], *b = &g->tensors[n->in[1]];
  if (n->a.moe.trans_a)
    return 2.0 * elems(m, g, n->in[0]) * (double)m->dims[b->dims[b->ndim - 1]].size;
  return 2.0 * elems(m, g, n->out[0]) * (double)m->dims[a->dims[a->ndim - 1]].size;
}

/* The share of a parameter a token computes with: k/E for the experts' weights of a grouped
 * matmul (its counts from a route of a topk's indices, or gathered from them over ep ranks), else
 * 1. */
static double active_share(const Graph *g, int t) {
  for (int i = 0; i < g->nforward; i++) {
    const Node *n = &g->nodes[i];
    if (n->op != OP_GROUPED_MATMUL || n->in[1] != t) continue;
    const Node *route = &g->nodes[g->tensors[n->in[2]].producer];
    if (route->op == OP_EXPERT_COUNTS) route = &g->nodes[g->tensors[route->in[0]].producer];
    const Node *topk = &g->nodes[g->tensors[route->in[0]].producer];
    return (double)topk->a.moe.topk / topk->a.moe.experts;
  }
  return 1;
}

/* q·kᵀ and p·v: 2·b·s²·width each, the causal half counted in full as Megatron's formula does;
 * the backward pass counts twice the forward. */
static double attention_flops(const Model *m, const Graph *g, const Node *n) {
  const Tensor *q = &g->tensors[n->in[0]];
  double seq = (double)m->dims[q->dims[1]].size;
  return 4.0 * elems(m, g, n->in[0]) * seq;
}

static int collective_kind(OpKind op) {
  return op == OP_ALLREDUCE   ? COLL_ALLREDUCE
         : op == OP_ALLGATHER ? COLL_ALLGATHER
                              : COLL_REDUCESCATTER;
}

static void count_collective(const Model *m, const Graph *g, const Node *n, int tp, int act_bytes,
                             GraphCost *s) {
  int pass = n->backward ? PASS_BACKWARD : PASS_FORWARD;
  double full = elems(m, g, n->in[0]) * act_bytes;
  s->collectives[pass][collective_kind(n->op)]++;
  s->tp_bytes[pass] += n->op == OP_ALLREDUCE   ? cost_ring_allreduce(full, tp)
                       : n->op == OP_ALLGATHER ? cost_ring_allgather(full, tp)
                                               : cost_ring_reducescatter(full, tp);
}

/* Vocab-parallel cross entropy all-reduces the max, the target logit and the sum of exponentials
 * (one fp32 number per token each) over the TP group. */
static void count_xent(const Model *m, const Graph *g, const Node *n, int tp, GraphCost *s) {
  const Tensor *z = &g->tensors[n->in[0]];
  if (z->layout.kind != LAYOUT_S) return;
  double tokens = elems(m, g, n->in[1]);
  s->collectives[PASS_FORWARD][COLL_ALLREDUCE] += 3;
  s->tp_bytes[PASS_FORWARD] += 3 * cost_ring_allreduce(tokens * 4, tp);
}

/* What a memory-bound kernel moves: each input read once, each output written once (one TP rank); a
 * split reads its part of the whole alone. */
static double node_bytes(const Model *m, const Graph *g, const Node *n, int tp, int act_bytes) {
  double bytes = 0;
  for (int k = 0; k < n->nin; k++)
    bytes += (double)tensor_local_elems(m, &g->tensors[n->op == OP_SPLIT ? n->out[0] : n->in[k]],
                                        tp);
  for (int k = 0; k < n->nout; k++)
    bytes += (double)tensor_local_elems(m, &g->tensors[n->out[k]], tp);
  return bytes * act_bytes;
}

/* An exchange of routed rows [routed, D] over ep ranks: a row stays on its rank with probability
 * 1/ep under uniform routing, so routed·(ep−1)/ep rows of D elements leave each rank. */
static void count_exchange(const Model *m, const Graph *g, const Node *n, int act_bytes,
                           GraphCost *s) {
  int pass = n->backward ? PASS_BACKWARD : PASS_FORWARD;
  int routed = n->op == OP_EXPERT_SEND ? n->in[0] : n->out[0];
  s->ep_exchanges[pass]++;
  s->ep_bytes[pass] += elems(m, g, routed) * (m->ep - 1) / m->ep * act_bytes;
}

static void count_nodes(const Model *m, const Graph *g, int tp, int act_bytes, GraphCost *s) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = &g->nodes[i];
    int pass = n->backward ? PASS_BACKWARD : PASS_FORWARD;
    if (n->op == OP_MATMUL) s->flops[pass] += matmul_flops(m, g, n);
    else if (n->op == OP_GROUPED_MATMUL) s->flops[pass] += grouped_matmul_flops(m, g, n);
    else if (n->op == OP_ATTENTION) s->flops[pass] += attention_flops(m, g, n);
    else if (n->op == OP_ATTENTION_BWD) s->flops[pass] += 2 * attention_flops(m, g, n);
    else if (op_is_collective(n->op)) count_collective(m, g, n, tp, act_bytes, s);
    if (n->op == OP_XENT) count_xent(m, g, n, tp, s);
    if (n->op == OP_EXPERT_SEND || n->op == OP_EXPERT_RETURN)
      count_exchange(m, g, n, act_bytes, s);
    int exchange = n->op == OP_EXPERT_SEND || n->op == OP_EXPERT_RETURN;
    if (n->op != OP_MATMUL && n->op != OP_GROUPED_MATMUL && !op_is_collective(n->op) && !exchange)
      s->bytes[pass] += node_bytes(m, g, n, tp, act_bytes);
  }
}

/* Parameters the graph uses that it owns: each parameter is counted in the first stage that uses
 * it (a join's members by their own tensors, which the graph keeps). */
static void count_params(const Model *m, const Graph *g, const char *seen, int tp, GraphCost *s) {
  for (int i = 0; i < g->ntensors; i++) {
    const Tensor *t = &g->tensors[i];
    if (t->kind != T_PARAM || t->join >= 0) continue;
    const Param *p = &m->params[t->param];
    s->params_local_used += param_local_elems(m, p, tp);
    if (p->grad_tp_sum) s->tp_summed_bytes += 4 * param_local_elems(m, p, tp);
    if (layout_copies(p->layout) > 1 && p->trainable)
      s->copies_summed_bytes += 4 * param_local_elems(m, p, tp);
    if (seen[t->param]) continue;
    s->params += param_unpadded_elems(m, p);
    s->params_active += (int64_t)((double)param_unpadded_elems(m, p) * active_share(g, i) + 0.5);
    s->params_padded += param_elems(m, p);
    s->params_local += param_local_elems(m, p, tp);
    if (p->ep_split) s->params_expert_local += param_local_elems(m, p, tp);
    if (layout_copies(p->layout) > 1) s->params_copied_local += param_local_elems(m, p, tp);
  }
}

static void mark_params(const Graph *g, char *seen) {
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i].kind == T_PARAM) seen[g->tensors[i].param] = 1;
}

static void cost_stage(const Model *m, const Graph *g, const Parallel *par, int act_bytes,
                       char *seen, GraphCost *s) {
  memset(s, 0, sizeof *s);
  count_nodes(m, g, par->tp, act_bytes, s);
  count_params(m, g, seen, par->tp, s);
  mark_params(g, seen);
}

void cost_model(const Model *m, const Parallel *par, int activation_bytes, ModelCost *c) {
  char *seen = calloc((size_t)m->nparams + 1, 1);
  memset(c, 0, sizeof *c);
  cost_stage(m, &m->embed, par, activation_bytes, seen, &c->embed);
  cost_stage(m, &m->block, par, activation_bytes, seen, &c->block);
  cost_stage(m, &m->head, par, activation_bytes, seen, &c->head);
  int L = m->layers;
  free(seen);
  c->params_total = c->embed.params + L * c->block.params + c->head.params;
  c->params_active = c->embed.params_active + L * c->block.params_active + c->head.params_active;
  c->params_padded = c->embed.params_padded + L * c->block.params_padded + c->head.params_padded;
  double microbatches = (double)par->gbs / par->mbs;
  c->flops_forward = microbatches * (c->embed.flops[0] + L * c->block.flops[0] + c->head.flops[0]);
  c->flops_backward = microbatches * (c->embed.flops[1] + L * c->block.flops[1] + c->head.flops[1]);
  c->flops_recompute = par->recompute == RECOMPUTE_FULL ? microbatches * L * c->block.flops[0] : 0;
  c->flops_per_iteration = c->flops_forward + c->flops_backward + c->flops_recompute;
  for (int i = 0; m->tied && i < m->nparams; i++)
    if (m->params[i].scope == SCOPE_MODEL && strcmp(m->params[i].name, "wte") == 0)
      c->tied_bytes = param_local_elems(m, &m->params[i], par->tp) * 4;
}
