/* stage_time.c: the kernels of one stage graph on a machine: each node's shape read off its local
 * (tensor-parallel) tensors, timed by kernel_time, summed per pass. */
#include "cost/stage_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/kernel_time.h"
#include "front/layers.h"

typedef struct {
  const Model *m;
  const Graph *g;
  const Machine *mc;
  int tp;
  StageTime *t;
  int cap;
} Walk;

static void add_kernel(Walk *w, int node, const char *part, KernelTime k, int communication) {
  if (w->t->count == w->cap) {
    w->cap = w->cap ? 2 * w->cap : 64;
    w->t->kernels = realloc(w->t->kernels, (size_t)w->cap * sizeof *w->t->kernels);
  }
  KernelCost *c = &w->t->kernels[w->t->count++];
  c->node = node, c->time = k;
  snprintf(c->part, sizeof c->part, "%s", part ? part : "");
  int pass = w->g->nodes[node].backward ? PASS_BACKWARD : PASS_FORWARD;
  w->t->seconds[pass] += k.seconds;
  if (communication) w->t->tp_seconds[pass] += k.seconds;
}

static void add(Walk *w, int node, const char *part, KernelTime k) {
  add_kernel(w, node, part, k, 0);
}

static const Tensor *tensor(const Walk *w, int id) { return &w->g->tensors[id]; }

/* A dim's size on one TP rank. */
static double local_dim(const Walk *w, const Tensor *t, int axis) {
  double n = (double)w->m->dims[t->dims[axis]].size;
  int split = t->layout.kind == LAYOUT_S && t->layout.axis == axis;
  return split ? n / layout_pieces(t->layout, w->tp) : n;
}

static double local_elems(const Walk *w, int id) {
  return (double)tensor_local_elems(w->m, tensor(w, id), w->tp);
}

/* Each input read once, each output written once (a gradient accumulated: read and written in
 * fp32); a split reads its part of the whole alone. */
static double node_bytes(const Walk *w, const Node *n) {
  double bytes = 0;
  for (int k = 0; k < n->nin; k++)
    bytes += local_elems(w, n->op == OP_SPLIT ? n->out[0] : n->in[k]) * w->mc->activation_bytes;
  for (int k = 0; k < n->nout; k++)
    bytes += local_elems(w, n->out[k]) *
             (tensor(w, n->out[k])->kind == T_PARAM_GRAD ? 8 : w->mc->activation_bytes);
  return bytes;
}

/* C = op(A)·op(B): N is the output's last dim, M the rest of it, K the contraction on A's side. */
static void matmul(Walk *w, int i) {
  const Node *n = &w->g->nodes[i];
  const Tensor *a = tensor(w, n->in[0]), *c = tensor(w, n->out[0]);
  double N = local_dim(w, c, c->ndim - 1), M = local_elems(w, n->out[0]) / N;
  double last = local_dim(w, a, a->ndim - 1);
  double K = n->a.mm.trans_a ? local_elems(w, n->in[0]) / last : last;
  double c_bytes = c->kind == T_PARAM_GRAD ? 8 : w->mc->activation_bytes;
  add(w, i, NULL, kernel_gemm(w->mc, 1, M, N, K, c_bytes));
}

/* A GEMM per expert, timed as one GEMM over all the routed rows: M the rows, or with trans_a (a
 * weight's gradient) the rows the contraction. */
static void grouped_matmul(Walk *w, int i) {
  const Node *n = &w->g->nodes[i];
  const Tensor *a = tensor(w, n->in[0]), *b = tensor(w, n->in[1]), *c = tensor(w, n->out[0]);
  double rows = local_dim(w, a, 0), a_last = local_dim(w, a, a->ndim - 1);
  double N = local_dim(w, c, c->ndim - 1);
  double c_bytes = c->kind == T_PARAM_GRAD ? 8 : w->mc->activation_bytes;
  if (n->a.moe.trans_a)
    add(w, i, NULL, kernel_gemm(w->mc, 1, a_last, local_dim(w, b, b->ndim - 1), rows, c_bytes));
  else add(w, i, NULL, kernel_gemm(w->mc, 1, rows, N, a_last, c_bytes));
}

typedef struct {
  double heads, seq, head_dim; /* heads: batch × local heads */
} AttentionShape;

static AttentionShape attention_shape(const Walk *w, const Node *n) {
  const Tensor *q = tensor(w, n->in[0]);
  AttentionShape s;
  s.seq = (double)w->m->dims[q->dims[1]].size;
  s.head_dim = n->a.attn.head_dim;
  s.heads = local_elems(w, n->in[0]) / (s.seq * s.head_dim);
  return s;
}

/* Megatron-LM's 2021 attention: q·kᵀ stored (s×s per head), a fused scale-mask-softmax over it,
 * dropout with a byte mask, then p·v; the backward retraces it. */
static void attention_materialised(Walk *w, int i, int backward) {
  AttentionShape s = attention_shape(w, &w->g->nodes[i]);
  const Machine *mc = w->mc;
  double scores = s.heads * s.seq * s.seq, ab = mc->activation_bytes,
         dropout = mc->attention_dropout > 0;
  KernelTime scores_gemm = kernel_gemm(mc, s.heads, s.seq, s.seq, s.head_dim, ab);
  KernelTime value_gemm = kernel_gemm(mc, s.heads, s.seq, s.head_dim, s.seq, ab);
  KernelTime dropout_pass = kernel_stream(mc, MEMORY_COPY, scores * (2 * ab + 1));
  if (!backward) {
    w->t->saved_scores += scores * (ab + (dropout ? 1 + ab : 0));
    add(w, i, "q·kᵀ", scores_gemm);
    add(w, i, "scale, mask, softmax", kernel_stream(mc, MEMORY_COPY, 2 * scores * ab));
    if (dropout) add(w, i, "dropout on the scores", dropout_pass);
    add(w, i, "p·v", value_gemm);
    return;
  }
  add(w, i, "dv = pᵀ·do", value_gemm);
  add(w, i, "dp = do·vᵀ", scores_gemm);
  if (dropout) add(w, i, "dropout backward", dropout_pass);
  add(w, i, "softmax backward", kernel_stream(mc, MEMORY_COPY, 3 * scores * ab));
  add(w, i, "dq = ds·k", value_gemm);
  add(w, i, "dk = dsᵀ·q", value_gemm);
}

/* A fused attention kernel (no stored scores): its GEMMs' FLOPs at the ceiling, or at the
 * kernel's rate measured at the size of a forward and backward (3× the forward's FLOPs) where
 * the machine has one; its inputs and outputs from memory; the backward does twice the forward's
 * work. */
static void attention_fused(Walk *w, int i, int backward) {
  AttentionShape s = attention_shape(w, &w->g->nodes[i]);
  KernelTime k = kernel_gemm(w->mc, s.heads, s.seq, s.seq, s.head_dim, 0);
  KernelTime v = kernel_gemm(w->mc, s.heads, s.seq, s.head_dim, s.seq, 0);
  const RateCurve *measured = &w->mc->attention_rates;
  double flops = (k.flops + v.flops) * (backward ? 2 : 1);
  double compute = measured->n > 0
                       ? flops / kernel_rate_at(measured, 3 * (k.flops + v.flops))
                       : (k.seconds + v.seconds - 2 * w->mc->launch_overhead) * (backward ? 2 : 1);
  KernelTime io = kernel_stream(w->mc, MEMORY_COPY, node_bytes(w, &w->g->nodes[i]));
  KernelTime t = {compute > io.seconds ? compute + w->mc->launch_overhead : io.seconds, flops,
                  io.bytes, compute > io.seconds ? BOUND_COMPUTE : io.bound};
  add(w, i, NULL, t);
}

/* Which kernels a block's attention ran on over the layers: one name, or how many layers each. */
static void kernels_label(int on_cudnn, int layers, char *label, size_t size) {
  if (on_cudnn == layers) snprintf(label, size, "cuDNN");
  else if (on_cudnn == 0) snprintf(label, size, "plait's kernels");
  else snprintf(label, size, "cuDNN %d layers, plait's %d", on_cudnn, layers - on_cudnn);
}

/* A GPU program's attention (kernels.attention "cudnn" or "plait"): each layer's call on the
 * kernel the runtime picks for that layer's options, at the kernel's rate for the head size; the
 * block's time is the mean over the layers (they differ where layers set their own softcap or
 * window), its bound the slowest layer's. Under rope cuDNN reads q and k turned by the rope
 * kernel first, and its backward turns them again and dq, dk back. */
static void attention_on_kernels(Walk *w, int i, int backward) {
  const Node *n = &w->g->nodes[i];
  const AttnAttr *a = &n->a.attn;
  AttentionShape s = attention_shape(w, n);
  int row = a->per_layer, layers = row >= 0 ? w->m->layers : 1, on_cudnn = 0;
  KernelTime mean = {0, 0, node_bytes(w, n), BOUND_COMPUTE};
  double slowest = 0;
  for (int l = 0; l < layers; l++) {
    double window = row >= 0 ? layers_option(w->m, row, 0, l) : (double)a->window;
    double softcap = row >= 0 ? layers_option(w->m, row, 1, l) : a->softcap;
    AttentionKernel kernel = attention_kernel_of(w->mc, a, softcap);
    double scores = attention_scores(s.seq, a->causal, window);
    KernelTime t = attention_kernel_time(w->mc, kernel, s.heads, s.head_dim, scores, backward);
    if (t.seconds > slowest) slowest = t.seconds, mean.bound = t.bound;
    mean.seconds += t.seconds / layers, mean.flops += t.flops / layers;
    on_cudnn += kernel == KERNEL_CUDNN;
  }
  char label[48];
  kernels_label(on_cudnn, layers, label, sizeof label);
  add(w, i, label, mean);
  if (!on_cudnn || !a->rope) return;
  double turned = (local_elems(w, n->in[0]) + local_elems(w, n->in[1])) * 2 *
                  w->mc->activation_bytes;
  KernelTime rope = kernel_stream(w->mc, MEMORY_ELEMENTWISE, turned * (backward ? 2 : 1));
  rope.seconds *= (double)on_cudnn / layers;
  add(w, i, "rope for cuDNN", rope);
}

/* Special functions per element of an elementwise expression: each op's (expr.h's EXPR_OPS). */
static double specials_per_element(const Expr *e) {
  double count = 0;
  for (int i = 0; i < e->count; i++) count += expr_op_specials(e->n[i].op);
  return count;
}

static void elementwise(Walk *w, int i) {
  const Node *n = &w->g->nodes[i];
  double specials = specials_per_element(&n->expr) * local_elems(w, n->out[0]);
  add(w, i, NULL, kernel_elementwise(w->mc, MEMORY_ELEMENTWISE, node_bytes(w, n), specials));
}

static RingKind ring_kind(OpKind op) {
  return op == OP_ALLREDUCE   ? RING_ALLREDUCE
         : op == OP_ALLGATHER ? RING_ALLGATHER
                              : RING_REDUCESCATTER;
}

static void collective(Walk *w, int i) {
  const Node *n = &w->g->nodes[i];
  Link link = kernel_group_link(w->mc, 1, w->tp);
  double bytes = (double)tensor_elems(w->m, tensor(w, n->in[0])) * w->mc->activation_bytes;
  add_kernel(w, i, NULL, kernel_collective(&link, ring_kind(n->op), bytes, w->tp), 1);
}

/* An exchange of routed rows over the ep ranks (every tp-th world rank: the stride of the
 * data-parallel ones): under uniform routing each rank sends (ep−1)/ep of its routed rows and
 * receives as many, what a ring all-gather of those rows moves per rank. */
static void expert_exchange(Walk *w, int i) {
  const Node *n = &w->g->nodes[i];
  int ep = w->m->ep, routed = n->op == OP_EXPERT_SEND ? n->in[0] : n->out[0];
  Link link = kernel_group_link(w->mc, w->tp, ep);
  double bytes = (double)tensor_elems(w->m, tensor(w, routed)) * w->mc->activation_bytes;
  add_kernel(w, i, "expert all-to-all", kernel_collective(&link, RING_ALLGATHER, bytes, ep), 1);
}

/* The rows an embedding moves: the forward reads the ids and the rows they pick and writes them
 * out; the backward reads the ids and the gradient rows and adds those into the fp32 table
 * gradient's rows (read and written). The rows the tokens touch, not the whole table. */
static void embedding(Walk *w, int i, int backward) {
  const Node *n = &w->g->nodes[i];
  double ids = local_elems(w, n->in[0]) * 4, rows = local_elems(w, backward ? n->in[1] : n->out[0]);
  double bytes = ids +
                 rows * (backward ? w->mc->activation_bytes + 8 : 2 * w->mc->activation_bytes);
  add(w, i, NULL, kernel_stream(w->mc, MEMORY_EMBEDDING, bytes));
}

/* Cross entropy in the runtime's passes over the logits: the forward reads them twice (the row
 * maxima, then the sums of exponentials: an exp each), the backward reads and writes them (an
 * exp each). The vocab-parallel forward all-reduces the max, the target logit and the sum of
 * exponentials. A forward that takes the gradient (grad_in_forward) reads the logits once from
 * memory and writes them once, an exp each; its backward costs nothing. */
static void xent(Walk *w, int i) {
  const Node *n = &w->g->nodes[i];
  double logits = local_elems(w, n->in[0]);
  double bytes = node_bytes(w, n) + logits * w->mc->activation_bytes;
  add(w, i, NULL, kernel_elementwise(w->mc, MEMORY_XENT, bytes, logits));
  if (tensor(w, n->in[0])->layout.kind != LAYOUT_S) return;
  Link link = kernel_group_link(w->mc, 1, w->tp);
  KernelTime one = kernel_collective(&link, RING_ALLREDUCE, local_elems(w, n->in[1]) * 4, w->tp);
  KernelTime three = one;
  kernel_add(&three, one);
  kernel_add(&three, one);
  add_kernel(w, i, "vocab all-reduces", three, 1);
}

/* The memory-bound kind of the runtime's kernel for a node (DIR/train --profile's); rope, splits
 * and concats, which --profile shows as kinds of their own, run at the elementwise kernels'
 * share. */
static MemoryKind memory_kind(OpKind op) {
  if (op == OP_NORM || op == OP_NORM_BWD) return MEMORY_NORM;
  if (op == OP_REDUCE) return MEMORY_BIAS_SUMS;
  return MEMORY_ELEMENTWISE;
}

static void attention(Walk *w, int i, int backward) {
  if (w->mc->attention == ATTENTION_MATERIALISED) attention_materialised(w, i, backward);
  else if (w->mc->attention == ATTENTION_FUSED) attention_fused(w, i, backward);
  else attention_on_kernels(w, i, backward);
}

static void node(Walk *w, int i) {
  const Node *n = &w->g->nodes[i];
  if (n->op == OP_MATMUL) matmul(w, i);
  else if (n->op == OP_GROUPED_MATMUL) grouped_matmul(w, i);
  else if (n->op == OP_ATTENTION || n->op == OP_ATTENTION_BWD)
    attention(w, i, n->op == OP_ATTENTION_BWD);
  else if (op_is_collective(n->op)) collective(w, i);
  else if (n->op == OP_EXPERT_SEND || n->op == OP_EXPERT_RETURN) expert_exchange(w, i);
  else if (n->op == OP_XENT) xent(w, i);
  /* its forward took the gradient */
  else if (n->op == OP_XENT_BWD && n->a.xent.grad_in_forward) return;
  else if (n->op == OP_XENT_BWD)
    add(w, i, NULL,
        kernel_elementwise(w->mc, MEMORY_XENT, node_bytes(w, n), local_elems(w, n->in[0])));
  else if (n->op == OP_EMBEDDING || n->op == OP_EMBEDDING_BWD)
    embedding(w, i, n->op == OP_EMBEDDING_BWD);
  else if (n->op == OP_EW) elementwise(w, i);
  else add(w, i, NULL, kernel_stream(w->mc, memory_kind(n->op), node_bytes(w, n)));
}

void stage_time(const Model *m, const Graph *g, const Parallel *par, const Machine *machine,
                StageTime *t) {
  memset(t, 0, sizeof *t);
  Walk w = {m, g, machine, par->tp, t, 0};
  for (int i = 0; i < g->nnodes; i++) node(&w, i);
}

void stage_time_free(StageTime *t) {
  free(t->kernels);
  memset(t, 0, sizeof *t);
}

void stage_time_print(const Graph *g, const StageTime *t, FILE *f) {
  for (int i = 0; i < t->count; i++) {
    const KernelCost *k = &t->kernels[i];
    const Node *n = &g->nodes[k->node];
    fprintf(f, "  %-3s %-14s %-24s %-22s %10.1f µs  %-13s %9.3g FLOP %9.3g B\n",
            n->backward ? "bwd" : "fwd", op_name(n->op), g->tensors[n->out[0]].name, k->part,
            k->time.seconds * 1e6, kernel_bound_name(k->time.bound), k->time.flops, k->time.bytes);
  }
}
