/* shard.c: the shard pass: layouts from parameter hints, propagation through the forward graph,
 * and the collectives inserted where producer and consumer disagree. Partial sums stay partial
 * through linear elementwise nodes (sums, differences, scalings): such a node is held back as a
 * pending expression and made only where a consumer needs its full value, with one reduction of
 * all its partial inputs — a parallel block's attention and MLP outputs are summed before a
 * single all-reduce, and a row-parallel bias is added once, after it. */
#include "passes/shard.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  Model *m;
  const Parallel *par;
  Layout residual;
  Diag *d;
  char *kv_dim; /* per dim: the width of the keys or values of an attention */
  /* per tensor of the graph being sharded: the linear node held back that makes it */
  Node **pending;
  int npending;
} Shard;

static Layout tensor_layout(const Graph *g, int t) { return g->tensors[t].layout; }
static int last_axis(const Graph *g, int t) { return g->tensors[t].ndim - 1; }
static int is_split(Layout l, int axis) { return l.kind == LAYOUT_S && l.axis == axis; }

Layout shard_residual_layout(const Model *m, const Parallel *par) {
  (void)m;
  return par->sequence_parallel && par->tp > 1 ? layout_s(1) : layout_r();
}

/* ---- output layouts ------------------------------------------------------------------------- */

/* C = op(A)·op(B) with A's leading axes as rows: a split contraction gives partial sums. */
static int matmul_layout(const Graph *g, const Node *n, Layout *out) {
  Layout a = tensor_layout(g, n->in[0]), b = tensor_layout(g, n->in[1]);
  int a_last = last_axis(g, n->in[0]), b_last = last_axis(g, n->in[1]);
  if (n->a.mm.trans_a) { /* [.., M]ᵀ·[.., N]: contraction over the shared leading axes */
    if (a.kind == LAYOUT_S && a.axis < a_last && is_split(b, a.axis)) *out = layout_p();
    else if (is_split(a, a_last) && b.kind == LAYOUT_R) *out = layout_s_like(0, a);
    else if (a.kind == LAYOUT_R && is_split(b, b_last)) *out = layout_s_like(1, b);
    else if (a.kind == LAYOUT_R && b.kind == LAYOUT_R) *out = layout_r();
    else if ((a.kind == LAYOUT_P && b.kind == LAYOUT_R) ||
             (a.kind == LAYOUT_R && b.kind == LAYOUT_P))
      *out = layout_p();
    else return -1;
    return 0;
  }
  int k_axis = n->a.mm.trans_b ? 1 : 0; /* B's contraction axis */
  if (is_split(a, a_last) && is_split(b, k_axis) && layout_copies(a) == layout_copies(b))
    *out = layout_p();
  else if (a.kind == LAYOUT_R && is_split(b, 1 - k_axis)) *out = layout_s_like(a_last, b);
  else if (a.kind == LAYOUT_S && a.axis < a_last && b.kind == LAYOUT_R) *out = a;
  else if (a.kind == LAYOUT_R && b.kind == LAYOUT_R) *out = layout_r();
  else if (a.kind == LAYOUT_P && b.kind == LAYOUT_R) *out = layout_p();
  else return -1;
  return 0;
}

/* Elementwise: a full-rank split input decides; else partial sums stay partial; else replicated. */
static Layout ew_layout(const Graph *g, const Node *n, int out_ndim) {
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = &g->tensors[n->in[i]];
    if (t->layout.kind == LAYOUT_S && t->ndim == out_ndim) return t->layout;
  }
  for (int i = 0; i < n->nin; i++)
    if (tensor_layout(g, n->in[i]).kind == LAYOUT_P) return layout_p();
  return layout_r();
}

/* Rows A [R, K] times each expert's W[e] of weights W [E, X, Y] (transposed: K = Y, else K = X),
 * as a dense matmul's: W split along the contraction (row-parallel) with A split alike gives
 * partial sums, W split along the other axis (column-parallel) an output split by its last axis.
 * A weight gradient (trans_a: [E, cols of A, cols of B]) is split as its split input. */
static int grouped_matmul_layout(const Graph *g, const Node *n, Layout *out) {
  Layout a = tensor_layout(g, n->in[0]), b = tensor_layout(g, n->in[1]);
  int a_last = last_axis(g, n->in[0]), b_last = last_axis(g, n->in[1]);
  if (n->a.moe.trans_a) {
    if (a.kind == LAYOUT_R && b.kind == LAYOUT_R) *out = layout_r();
    else if (is_split(a, a_last) && b.kind == LAYOUT_R) *out = layout_s(1);
    else if (a.kind == LAYOUT_R && is_split(b, b_last)) *out = layout_s(2);
    else return -1;
    return 0;
  }
  int k_axis = n->a.moe.trans_b ? 2 : 1;
  if (is_split(a, a_last) && is_split(b, k_axis)) *out = layout_p();
  else if (a.kind == LAYOUT_R && is_split(b, 3 - k_axis)) *out = layout_s(a_last);
  else if (a.kind == LAYOUT_R && b.kind == LAYOUT_R) *out = layout_r();
  else if (a.kind == LAYOUT_P && b.kind == LAYOUT_R) *out = layout_p();
  else return -1;
  return 0;
}

/* The routing itself (top-k, slots, counts) is whole on every rank; rows summed back to their
 * tokens (a combine) and exchanged between expert ranks stay partial sums where they are; a
 * weight's gradient from partial rows is partial. */
static void moe_layouts(const Graph *g, const Node *n, Layout *out) {
  int partial = n->nin && tensor_layout(g, n->in[0]).kind == LAYOUT_P;
  for (int k = 0; k < n->nout; k++) out[k] = layout_r();
  if (n->op == OP_COMBINE || n->op == OP_EXPERT_SEND || n->op == OP_EXPERT_RETURN)
    out[0] = partial ? layout_p() : layout_r();
  else if (n->op == OP_COMBINE_BWD)
    out[1] = partial ? layout_p() : layout_r();
}

/* Sum over leading axes: reducing a split axis leaves partial sums. */
static Layout reduce_layout(const Graph *g, const Node *n) {
  const Tensor *in = &g->tensors[n->in[0]], *out = &g->tensors[n->out[0]];
  int offset = in->ndim - out->ndim;
  if (in->layout.kind != LAYOUT_S) return in->layout;
  return in->layout.axis < offset ? layout_p()
                                   : layout_s_like(in->layout.axis - offset, in->layout);
}

/* Statistics per row (mean, rstd, lse, norm weight gradients) follow a split of the leading
 * axes. */
static Layout rows_layout(Layout x, int x_last) {
  return x.kind == LAYOUT_S && x.axis < x_last ? x : layout_r();
}

int shard_output_layouts(const Model *m, const Graph *g, const Node *n, Layout *out) {
  (void)m;
  Layout x = n->nin ? tensor_layout(g, n->in[0]) : layout_r();
  switch (n->op) {
  case OP_MATMUL: return matmul_layout(g, n, &out[0]);
  case OP_EW: out[0] = ew_layout(g, n, g->tensors[n->out[0]].ndim); return 0;
  case OP_REDUCE: out[0] = reduce_layout(g, n); return 0;
  case OP_NORM: /* a norm by groups keeps a split by whole groups; its statistics split alike */
    out[0] = x;
    out[1] = out[2] = n->a.norm.group && is_split(x, last_axis(g, n->in[0]))
                          ? x
                          : rows_layout(x, last_axis(g, n->in[0]));
    return 0;
  case OP_ATTENTION:
    out[0] = x;
    out[1] = x.kind == LAYOUT_S ? layout_s(1) : layout_r(); /* lse [b, heads, seq] */
    return 0;
  case OP_EMBEDDING: {
    Layout t = tensor_layout(g, n->in[1]);
    out[0] = is_split(t, 0)   ? layout_p()
             : is_split(t, 1) ? layout_s(last_axis(g, n->in[0]) + 1)
                              : layout_r();
    return 0;
  }
  case OP_XENT: out[0] = out[1] = layout_r(); return 0;
  case OP_LOSS_TERM: out[0] = x; return 0;
  case OP_ROPE: case OP_SPLIT: case OP_CONCAT: out[0] = x; return 0;
  case OP_ALLREDUCE: case OP_ALLGATHER: out[0] = layout_r(); return 0;
  case OP_REDUCESCATTER: case OP_SLICE: out[0] = layout_s(n->a.coll.axis); return 0;
  case OP_NORM_BWD: {
    Layout dy = tensor_layout(g, n->in[n->nin - 1]);
    Layout dw = x.kind == LAYOUT_S && (x.axis < last_axis(g, n->in[0]) || n->a.norm.group)
                    ? layout_p()
                    : layout_r();
    out[0] = dy;
    out[1] = out[2] = dw;
    return 0;
  }
  case OP_ATTENTION_BWD:
    for (int i = 0; i < 3; i++) out[i] = tensor_layout(g, n->in[i]);
    return 0;
  case OP_EMBEDDING_BWD: out[0] = tensor_layout(g, n->out[0]); return 0;
  case OP_XENT_BWD: out[0] = x; return 0;
  case OP_GROUPED_MATMUL: return grouped_matmul_layout(g, n, &out[0]);
  case OP_TOPK: case OP_ROUTE: case OP_DISPATCH: case OP_COMBINE: case OP_FRACTIONS:
  case OP_TOPK_BWD: case OP_COMBINE_BWD: case OP_LOSS_TERM_BWD:
  case OP_EXPERT_COUNTS: case OP_EXPERT_SEND: case OP_EXPERT_RETURN:
    moe_layouts(g, n, out);
    return 0;
  }
  return -1;
}

/* ---- conversions ---------------------------------------------------------------------------- */

static int add_collective(Model *m, Graph *g, OpKind op, int t, int axis, int backward,
                          const char *where) {
  const Tensor *src = &g->tensors[t];
  char name[NAME_LEN];
  snprintf(name, sizeof name, "%.40s.%s", src->name, op_name(op));
  int out = graph_tensor(g, src->kind == T_GRAD ? T_GRAD : T_ACT, src->dtype, src->ndim, src->dims,
                         name);
  g->tensors[out].grad_of = g->tensors[t].grad_of;
  Node n = node_new(op, 1, &t);
  n.a.coll.axis = axis;
  n.nout = 1;
  n.out[0] = out;
  n.backward = backward;
  n.inserted = 1;
  snprintf(n.where, sizeof n.where, "%s", where);
  Layout l;
  shard_output_layouts(m, g, &n, &l);
  g->tensors[out].layout = l;
  graph_node(g, &n);
  return out;
}

/* A conversion of t to `to` already made (q, k and v share one all-gather of their input). */
static int made_before(const Graph *g, int t, Layout to, int backward) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = &g->nodes[i];
    if (n->inserted && n->backward == backward && n->in[0] == t &&
        layout_equal(tensor_layout(g, n->out[0]), to))
      return n->out[0];
  }
  return -1;
}

int shard_convert(Model *m, Graph *g, int t, Layout to, int backward, const char *where) {
  Layout from = tensor_layout(g, t);
  if (layout_equal(from, to)) return t;
  int earlier = made_before(g, t, to, backward);
  if (earlier >= 0) return earlier;
  if (from.kind == LAYOUT_P)
    return to.kind == LAYOUT_R
               ? add_collective(m, g, OP_ALLREDUCE, t, 0, backward, where)
               : add_collective(m, g, OP_REDUCESCATTER, t, to.axis, backward, where);
  if (from.kind == LAYOUT_S) {
    int gathered = add_collective(m, g, OP_ALLGATHER, t, from.axis, backward, where);
    return to.kind == LAYOUT_R ? gathered
                               : add_collective(m, g, OP_SLICE, gathered, to.axis, backward, where);
  }
  return add_collective(m, g, OP_SLICE, t, to.axis, backward, where); /* R -> S */
}

/* ---- the layouts each forward primitive needs of its inputs ---------------------------------- */

/* Partial sums resolve to the residual layout where the tensor's axes allow, else to replicated. */
static Layout resolve_partial(const Shard *c, const Graph *g, int t) {
  const Tensor *x = &g->tensors[t];
  if (c->residual.kind == LAYOUT_S && x->ndim >= 2 && x->dims[1] == c->m->seq_dim)
    return c->residual;
  return layout_r();
}

static void matmul_needs(const Shard *c, const Graph *g, const Node *n, Layout *need) {
  Layout a = tensor_layout(g, n->in[0]), b = tensor_layout(g, n->in[1]);
  int a_last = last_axis(g, n->in[0]), k_axis = n->a.mm.trans_b ? 1 : 0;
  need[1] = b.kind == LAYOUT_P ? layout_r() : b;
  if (is_split(b, k_axis)) need[0] = layout_s(a_last);       /* row-parallel */
  else if (b.kind == LAYOUT_S) need[0] = layout_r();         /* column-parallel */
  else if (a.kind == LAYOUT_P) need[0] = resolve_partial(c, g, n->in[0]);
  else if (is_split(a, a_last)) need[0] = layout_r();
  else need[0] = a;
}

/* An expert's row-parallel weights take rows split as theirs; else the rows are whole. */
static void grouped_matmul_needs(const Graph *g, const Node *n, Layout *need) {
  int k_axis = n->a.moe.trans_b ? 2 : 1;
  need[0] = is_split(tensor_layout(g, n->in[1]), k_axis) ? layout_s(last_axis(g, n->in[0]))
                                                         : layout_r();
  need[2] = layout_r();
}

static void ew_needs(const Shard *c, const Graph *g, const Node *n, Layout *need) {
  int out_ndim = 0, seq_out = -1;
  for (int i = 0; i < n->nin; i++)
    if (g->tensors[n->in[i]].ndim > out_ndim)
      out_ndim = g->tensors[n->in[i]].ndim, seq_out = n->in[i];
  Layout target = layout_r();
  int decided = 0;
  for (int i = 0; i < n->nin && !decided; i++) {
    const Tensor *t = &g->tensors[n->in[i]];
    if (t->layout.kind == LAYOUT_S && t->ndim == out_ndim) target = t->layout, decided = 1;
  }
  for (int i = 0; i < n->nin && !decided; i++)
    if (tensor_layout(g, n->in[i]).kind == LAYOUT_P)
      target = resolve_partial(c, g, seq_out), decided = 1;
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = &g->tensors[n->in[i]];
    int axis = target.kind == LAYOUT_S ? target.axis - (out_ndim - t->ndim) : -1;
    need[i] = axis >= 0 ? layout_s_like(axis, target) : layout_r();
  }
}

/* q, k and v split by heads, or all whole; keys and values keep a split into fewer pieces than
 * ranks (key/value heads each held by several ranks). */
static void attention_needs(const Graph *g, const Node *n, Layout *need) {
  int heads_split = 0;
  for (int i = 0; i < 3; i++)
    heads_split |= is_split(tensor_layout(g, n->in[i]), last_axis(g, n->in[i]));
  for (int i = 0; i < 3; i++) {
    Layout l = tensor_layout(g, n->in[i]);
    int last = last_axis(g, n->in[i]);
    need[i] = !heads_split ? layout_r() : is_split(l, last) ? l : layout_s(last);
  }
}

/* A norm by groups over a split last dim: each rank holds whole groups (the split's granule, a
 * head, is a multiple of the group). */
static int whole_groups(const Shard *c, const Graph *g, const Node *n) {
  const Tensor *x = &g->tensors[n->in[0]];
  return n->a.norm.group && c->m->dims[x->dims[x->ndim - 1]].granule % n->a.norm.group == 0;
}

/* Parts of groups along the last dim: a split of the last dim stays (each rank holds whole
 * groups: checked by check_parts), as does a split of a leading one; partial sums are summed
 * first. A concat takes its inputs alike: split by the last dim when one of them is. */
static void parts_needs(const Graph *g, const Node *n, Layout *need) {
  Layout target = layout_r();
  for (int i = 0; i < n->nin; i++) {
    Layout l = tensor_layout(g, n->in[i]);
    if (l.kind == LAYOUT_S && (is_split(l, last_axis(g, n->in[i])) || n->nin == 1)) target = l;
  }
  for (int i = 0; i < n->nin; i++) need[i] = target;
}

static void input_needs(const Shard *c, const Graph *g, const Node *n, Layout *need) {
  for (int i = 0; i < n->nin; i++) need[i] = tensor_layout(g, n->in[i]);
  Layout x = n->nin ? tensor_layout(g, n->in[0]) : layout_r();
  switch (n->op) {
  case OP_MATMUL: matmul_needs(c, g, n, need); break;
  case OP_EW: ew_needs(c, g, n, need); break;
  case OP_NORM:
    need[0] = x.kind == LAYOUT_P ? resolve_partial(c, g, n->in[0])
              : is_split(x, last_axis(g, n->in[0])) && !whole_groups(c, g, n) ? layout_r()
                                                                              : x;
    for (int i = 1; i < n->nin; i++) need[i] = layout_r();
    break;
  case OP_ATTENTION: attention_needs(g, n, need); break;
  case OP_EMBEDDING: need[0] = layout_r(); break;
  case OP_ROPE: /* by heads, each position whole: a sequence split is gathered */
    need[0] = is_split(x, last_axis(g, n->in[0])) ? x : layout_r();
    break;
  case OP_SPLIT: case OP_CONCAT: parts_needs(g, n, need); break;
  case OP_XENT:
    need[0] = is_split(x, last_axis(g, n->in[0])) ? x : layout_r();
    need[1] = layout_r();
    break;
  case OP_REDUCE:
  case OP_ALLREDUCE:
  case OP_ALLGATHER:
  case OP_REDUCESCATTER:
  case OP_SLICE:
  case OP_NORM_BWD:
  case OP_ATTENTION_BWD: case OP_EMBEDDING_BWD: case OP_XENT_BWD:
  case OP_TOPK_BWD: case OP_COMBINE_BWD: case OP_LOSS_TERM_BWD:
    break; /* each input as it is laid out */
  case OP_LOSS_TERM: need[1] = layout_r(); break; /* every rank's term whole */
  case OP_GROUPED_MATMUL: grouped_matmul_needs(g, n, need); break;
  case OP_TOPK: case OP_ROUTE: case OP_DISPATCH: case OP_COMBINE: case OP_FRACTIONS:
  case OP_EXPERT_COUNTS: case OP_EXPERT_SEND: case OP_EXPERT_RETURN:
    for (int i = 0; i < n->nin; i++) need[i] = layout_r();
    if (n->op == OP_COMBINE && x.kind == LAYOUT_P) need[0] = x; /* summed after the combine */
    break;
  }
}

/* ---- divisibility --------------------------------------------------------------------------- */

/* Key/value heads that tp neither divides nor is a multiple of. */
static int kv_heads_refused(const Shard *c, const Dim *dim, int64_t heads, const char *where) {
  int tp = c->par->tp;
  return diag(c->d,
              "%s: %lld key/value heads (%s = %lld heads × head_dim %lld) can neither be split "
              "over tp = %d nor each held by a group of tp/%lld ranks; choose a tp that divides "
              "%lld or is a multiple of it",
              where, (long long)heads, dim->name, (long long)heads, (long long)dim->granule, tp,
              (long long)heads, (long long)heads);
}

static int check_split(const Shard *c, const Tensor *t, const char *what, const char *where) {
  if (t->layout.kind != LAYOUT_S) return 0;
  const Dim *dim = &c->m->dims[t->dims[t->layout.axis]];
  int tp = c->par->tp;
  int64_t pieces = dim->size / dim->granule;
  if (pieces % layout_pieces(t->layout, tp) == 0) return 0;
  if (c->kv_dim[t->dims[t->layout.axis]]) return kv_heads_refused(c, dim, pieces, where);
  if (dim->of_parts)
    return diag(
        c->d,
        "%s: %s = %lld is %lld group%s of %lld from a split or concat, which tp = %d cannot divide "
        "(the parts of a group would lie on different ranks); lay the fused tensor out in groups a "
        "multiple of tp (q, k, v by head: groups = heads, as Megatron lays them out)",
        where, dim->name, (long long)dim->size, (long long)pieces, pieces == 1 ? "" : "s",
        (long long)dim->granule, tp);
  if (dim->granule > 1)
    return diag(
        c->d,
        "%s: %lld attention heads (%s = %lld heads × head_dim %lld) are not divisible by tp = %d; "
        "choose a tp that divides %lld",
        where, (long long)pieces, dim->name, (long long)pieces, (long long)dim->granule, tp,
        (long long)pieces);
  if (t->dims[t->layout.axis] == c->m->seq_dim)
    return diag(
        c->d,
        "%s: seq = %lld is not divisible by tp = %d, which sequence parallelism splits it by; "
        "choose a tp that divides %lld or drop --sequence-parallel",
        where, (long long)dim->size, tp, (long long)dim->size);
  return diag(
      c->d,
      "%s: %s = %lld is not divisible by tp = %d (tensor parallelism splits %s); choose a tp that "
      "divides %lld",
      where, dim->name, (long long)dim->size, tp, what, (long long)dim->size);
}

/* Column: the output dim of a matrix [out, in] (of each expert's, [experts, out, in]); row: the
 * input dim; vocab: the rows. */
static Layout hint_layout(const Param *p, int tp) {
  if (tp == 1) return layout_r();
  switch (p->hint) {
  case HINT_COLUMN: return layout_s(p->ndim == 3 ? 1 : 0);
  case HINT_VOCAB: return layout_s(0);
  case HINT_ROW: return layout_s(p->ndim - 1);
  case HINT_REPLICATED: break;
  }
  return layout_r();
}

/* The widths of keys and values: the last dims of every attention's k and v. */
static void find_kv_dims(Shard *c) {
  const Graph *stages[3] = {&c->m->embed, &c->m->block, &c->m->head};
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < stages[s]->nnodes; i++) {
      const Node *n = &stages[s]->nodes[i];
      if (n->op != OP_ATTENTION) continue;
      for (int k = 1; k <= 2; k++) {
        const Tensor *t = &stages[s]->tensors[n->in[k]];
        c->kv_dim[t->dims[t->ndim - 1]] = 1;
      }
    }
}

/* A column-parallel parameter over key/value heads fewer than tp, tp a multiple of them: each head
 * is held by tp/heads consecutive ranks, the ranks whose query heads read it. Every such
 * parameter of the model is held alike (m->tp_copies ranks a piece). */
static int replicate_kv(Shard *c, Param *p) {
  if (p->layout.kind != LAYOUT_S || !c->kv_dim[p->dims[p->layout.axis]]) return 0;
  const Dim *dim = &c->m->dims[p->dims[p->layout.axis]];
  int64_t heads = dim->size / dim->granule, tp = c->par->tp;
  if (heads >= tp || tp % heads != 0) return 0;
  int copies = (int)(tp / heads);
  if (c->m->tp_copies > 1 && c->m->tp_copies != copies)
    return diag(c->d,
                "%s: %s: %lld key/value heads would be held by %d ranks each, another attention's "
                "by %d; give every attention of the model the same number of key/value heads or "
                "a tp that divides them",
                p->where, p->name, (long long)heads, copies, c->m->tp_copies);
  c->m->tp_copies = copies;
  p->layout.copies = copies;
  return 0;
}

static int layout_params(Shard *c) {
  c->m->tp_copies = 1;
  for (int i = 0; i < c->m->nparams; i++) {
    Param *p = &c->m->params[i];
    p->layout = hint_layout(p, c->par->tp);
    if (replicate_kv(c, p)) return -1;
    Tensor probe = {.ndim = p->ndim, .layout = p->layout};
    memcpy(probe.dims, p->dims, sizeof probe.dims);
    if (check_split(c, &probe, p->name, p->where)) return -1;
  }
  return 0;
}

/* A split or concat over a last dim split by tp: each rank must hold whole groups (groups
 * divisible by tp), else a part would straddle ranks. */
static int check_parts(const Shard *c, const Graph *g, const Node *n) {
  if (n->op != OP_SPLIT && n->op != OP_CONCAT) return 0;
  const Tensor *x = &g->tensors[n->in[0]];
  int pieces = layout_pieces(x->layout, c->par->tp);
  if (!is_split(x->layout, x->ndim - 1) || n->a.parts.groups % pieces == 0) return 0;
  return diag(
      c->d,
      "%s: %s of %d group%s along a dim split by tp = %d: the parts of a group would lie on "
      "different ranks; lay the tensor out in groups a multiple of tp (a fused q, k, v by head, "
      "groups = heads, as Megatron lays it out) or choose a tp that divides %d",
      n->where, op_name(n->op), n->a.parts.groups, n->a.parts.groups == 1 ? "" : "s", pieces,
      n->a.parts.groups);
}

/* ---- partial sums kept partial -------------------------------------------------------------- */

static int emit_node(Shard *c, Graph *g, Node n);

static Node *pending_of(const Shard *c, int t) { return t < c->npending ? c->pending[t] : NULL; }

static void hold_back(Shard *c, int t, const Node *n) {
  if (t >= c->npending) {
    int grown = 2 * t + 16;
    c->pending = realloc(c->pending, sizeof *c->pending * (size_t)grown);
    memset(c->pending + c->npending, 0, sizeof *c->pending * (size_t)(grown - c->npending));
    c->npending = grown;
  }
  c->pending[t] = malloc(sizeof *n);
  *c->pending[t] = *n;
}

/* Input slot of tensor t in node v, added when v does not have it yet; -1 when v is full. */
static int input_slot(Node *v, int t) {
  for (int i = 0; i < v->nin; i++)
    if (v->in[i] == t) return i;
  if (v->nin == MAX_INPUTS) return -1;
  v->in[v->nin] = t;
  return v->nin++;
}

/* Node n with the pending nodes among its inputs grafted in: one expression over tensors that
 * exist. Returns 0, or -1 when it does not fit in one node. */
static int merge_pending(const Shard *c, const Node *n, Node *v) {
  *v = *n;
  v->nin = 0;
  v->expr.count = 0;
  int roots[MAX_INPUTS];
  for (int i = 0; i < n->nin; i++) {
    const Node *p = pending_of(c, n->in[i]);
    if (!p) {
      int slot = input_slot(v, n->in[i]);
      if (slot < 0 || (roots[i] = expr_input(&v->expr, slot)) < 0) return -1;
      continue;
    }
    int map[MAX_INPUTS];
    for (int k = 0; k < p->nin; k++) {
      int slot = input_slot(v, p->in[k]);
      if (slot < 0 || (map[k] = expr_input(&v->expr, slot)) < 0) return -1;
    }
    if ((roots[i] = expr_graft(&v->expr, &p->expr, expr_root(&p->expr), map)) < 0) return -1;
  }
  return expr_graft(&v->expr, &n->expr, expr_root(&n->expr), roots) < 0 ||
                 expr_compact(&v->expr, expr_root(&v->expr))
             ? -1
             : 0;
}

static int partial_inputs(const Graph *g, const Node *n) {
  int count = 0;
  for (int i = 0; i < n->nin; i++) count += tensor_layout(g, n->in[i]).kind == LAYOUT_P;
  return count;
}

/* A linear elementwise node with a partial-sum input (its own or a pending one's) is held back. */
static int held_back(Shard *c, const Graph *g, const Node *n) {
  if (n->op != OP_EW || c->par->tp == 1) return 0;
  int partial = 0;
  for (int i = 0; i < n->nin; i++)
    partial |= tensor_layout(g, n->in[i]).kind == LAYOUT_P || pending_of(c, n->in[i]);
  Node v;
  double coef[MAX_INPUTS], constant;
  if (!partial || merge_pending(c, n, &v) || !expr_linear(&v.expr, v.nin, coef, &constant))
    return 0;
  hold_back(c, n->out[0], &v);
  return 1;
}

/* A pending node with several partial inputs is made as their sum (with the node's
 * coefficients), which stays partial, plus the rest of the expression: the sum is then reduced
 * once. */
static int sum_partials(Shard *c, Graph *g, Node *v) {
  double coef[MAX_INPUTS], constant;
  expr_linear(&v->expr, v->nin, coef, &constant);
  Node sum = node_new(OP_EW, 0, NULL), rest = *v;
  int zero = -1, map[MAX_INPUTS], terms = -1, out_tensor = v->out[0];
  rest.nin = 0;
  rest.expr.count = 0;
  for (int i = 0; i < v->nin; i++) {
    if (tensor_layout(g, v->in[i]).kind != LAYOUT_P) {
      map[i] = expr_input(&rest.expr, input_slot(&rest, v->in[i]));
      continue;
    }
    int term = expr_input(&sum.expr, input_slot(&sum, v->in[i]));
    if (coef[i] != 1) term = expr_binary(&sum.expr, E_MUL, expr_const(&sum.expr, coef[i]), term);
    terms = terms < 0 ? term : expr_binary(&sum.expr, E_ADD, terms, term);
    map[i] = zero < 0 ? (zero = expr_const(&rest.expr, 0)) : zero;
  }
  const Tensor *out = &g->tensors[out_tensor];
  int summed = graph_tensor(g, T_ACT, out->dtype, out->ndim, out->dims, NULL);
  snprintf(g->tensors[summed].name, NAME_LEN, "%.40s.partial", out->name);
  g->tensors[summed].layout = layout_p();
  sum.nout = 1, sum.out[0] = summed;
  snprintf(sum.where, sizeof sum.where, "%s", v->where);
  graph_node(g, &sum);
  int others = expr_graft(&rest.expr, &v->expr, expr_root(&v->expr), map);
  int slot = input_slot(&rest, summed);
  expr_binary(&rest.expr, E_ADD, expr_input(&rest.expr, slot), others);
  expr_fold_zeros(&rest.expr);
  return emit_node(c, g, rest);
}

/* Makes tensor t where a consumer needs its value: its pending node, with one reduction. */
static int materialize(Shard *c, Graph *g, int t) {
  Node *v = pending_of(c, t);
  if (!v) return 0;
  Node node = *v;
  free(v);
  c->pending[t] = NULL;
  return partial_inputs(g, &node) > 1 ? sum_partials(c, g, &node) : emit_node(c, g, node);
}

/* ---- the pass ------------------------------------------------------------------------------- */

static void layout_leaves(Shard *c, Graph *g) {
  for (int i = 0; i < g->ntensors; i++) {
    Tensor *t = &g->tensors[i];
    if (t->kind == T_PARAM) t->layout = c->m->params[t->param].layout;
    else if (t->kind == T_CONST) t->layout = layout_r(); /* every rank holds all of a constant */
    else if (t->kind == T_INPUT) t->layout = t->dtype == DT_INT ? layout_r() : c->residual;
  }
}

/* Keys and values held by several ranks a head keep their layout: no collective gathers or
 * slices them. */
static int check_copies_kept(const Shard *c, const Graph *g, const Node *n, const Layout *need) {
  for (int i = 0; i < n->nin; i++) {
    Layout l = tensor_layout(g, n->in[i]);
    if ((layout_copies(l) > 1 || layout_copies(need[i]) > 1) && !layout_equal(l, need[i]))
      return diag(c->d,
                  "%s: %s: %s holds key/value heads each on several ranks, which cannot be "
                  "gathered or sliced; use it only in attention (after norms, rotary positions "
                  "or splits), or choose a tp that divides the key/value heads",
                  n->where, op_name(n->op), g->tensors[n->in[i]].name);
  }
  return 0;
}

/* Nor does a sum over tp take them: it would count each rank's copy. */
static int check_copies_summed(const Shard *c, const Graph *g, const Node *n, const Layout *out) {
  int copied = 0, partial = 0;
  for (int i = 0; i < n->nin; i++) copied |= layout_copies(tensor_layout(g, n->in[i])) > 1;
  for (int k = 0; k < n->nout; k++) partial |= out[k].kind == LAYOUT_P;
  if (!copied || !partial) return 0;
  return diag(c->d,
              "%s: %s: key/value heads held by several ranks each would be summed over tp = %d "
              "(each copy counted); use them only in attention, or choose a tp that divides the "
              "key/value heads",
              n->where, op_name(n->op), c->par->tp);
}

/* Re-appends the node with its inputs converted to what it needs (pending inputs made first);
 * lays out its outputs. */
static int emit_node(Shard *c, Graph *g, Node n) {
  Layout need[MAX_INPUTS], out[MAX_OUTPUTS];
  for (int i = 0; i < n.nin; i++)
    if (materialize(c, g, n.in[i])) return -1;
  input_needs(c, g, &n, need);
  if (check_copies_kept(c, g, &n, need)) return -1;
  for (int i = 0; i < n.nin; i++) {
    n.in[i] = shard_convert(c->m, g, n.in[i], need[i], 0, n.where);
    if (check_split(c, &g->tensors[n.in[i]], g->tensors[n.in[i]].name, n.where)) return -1;
  }
  if (check_parts(c, g, &n)) return -1;
  if (shard_output_layouts(c->m, g, &n, out))
    return diag(c->d, "%s: %s: no tensor-parallel layout fits its inputs", n.where, op_name(n.op));
  if (check_copies_summed(c, g, &n, out)) return -1;
  for (int k = 0; k < n.nout; k++) g->tensors[n.out[k]].layout = out[k];
  graph_node(g, &n);
  return 0;
}

/* A node of the forward graph: held back when it is linear in partial sums, else emitted. */
static int shard_node(Shard *c, Graph *g, Node n) {
  return held_back(c, g, &n) ? 0 : emit_node(c, g, n);
}

static int shard_graph(Shard *c, Graph *g) {
  layout_leaves(c, g);
  for (int i = 0; i < g->ninputs; i++)
    if (check_split(c, &g->tensors[g->inputs[i]], "the sequence", c->m->file)) return -1;
  Node *old = g->nodes;
  int count = g->nforward;
  g->nodes = NULL;
  g->nnodes = g->nodes_cap = 0;
  int status = 0;
  for (int i = 0; i < count && status == 0; i++) status = shard_node(c, g, old[i]);
  free(old);
  if (status == 0 && g->output >= 0) status = materialize(c, g, g->output);
  for (int t = 0; t < c->npending; t++) free(c->pending[t]);
  free(c->pending);
  c->pending = NULL, c->npending = 0;
  if (status) return -1;
  if (g->output >= 0 && g != &c->m->head)
    g->output = shard_convert(c->m, g, g->output, c->residual, 0, "stage boundary");
  g->nforward = g->nnodes;
  return 0;
}

int shard_model(Model *m, const Parallel *par, Diag *d) {
  Shard c = {.m = m, .par = par, .residual = shard_residual_layout(m, par), .d = d,
             .kv_dim = calloc((size_t)m->ndims + 1, 1)};
  find_kv_dims(&c);
  int status = layout_params(&c) || shard_graph(&c, &m->embed) || shard_graph(&c, &m->block) ||
               shard_graph(&c, &m->head);
  free(c.kv_dim);
  return status ? -1 : 0;
}
