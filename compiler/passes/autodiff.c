/* autodiff.c: the backward pass of each stage graph, built node by node in reverse, with gradient
 * layouts resolved by the same algebra as the forward shard pass. */
#include "passes/autodiff.h"

#include <stdlib.h>
#include <string.h>

#include "passes/shard.h"

enum { MAX_CONTRIB = 32 };

typedef struct {
  int n;
  int t[MAX_CONTRIB];
} Contribs;

typedef struct {
  Model *m;
  Graph *g;
  Diag *d;
  Contribs *contribs; /* per tensor: gradient contributions not yet summed (grows with the graph) */
  int ncontribs;
  char *needs_grad;   /* per forward tensor: depends on a parameter or a real-valued stage input */
  int *param_grad;    /* per parameter: its T_PARAM_GRAD tensor in this graph, or -1 */
  int *join_grad;     /* per join (Model.joins): its T_PARAM_GRAD tensor in this graph, or -1 */
} Grad;

static const char *const AUTODIFF = "autodiff";

/* ---- bookkeeping ---------------------------------------------------------------------------- */

static void mark_needs_grad(Grad *c) {
  Graph *g = c->g;
  for (int i = 0; i < g->ntensors; i++) {
    const Tensor *t = &g->tensors[i];
    int frozen = t->kind == T_PARAM && !c->m->params[t->param].trainable;
    c->needs_grad[i] = t->dtype == DT_REAL && (t->kind == T_PARAM || t->kind == T_INPUT) && !frozen;
  }
  for (int i = 0; i < g->nforward; i++) {
    const Node *n = &g->nodes[i];
    int any = 0;
    for (int k = 0; k < n->nin; k++) any |= c->needs_grad[n->in[k]];
    for (int k = 0; k < n->nout; k++)
      c->needs_grad[n->out[k]] = any && g->tensors[n->out[k]].dtype == DT_REAL;
  }
}

static int new_grad(Grad *c, int of, Layout layout) {
  const Tensor *f = &c->g->tensors[of];
  char name[NAME_LEN];
  snprintf(name, sizeof name, "d%.60s", f->name);
  int t = graph_tensor(c->g, T_GRAD, DT_REAL, f->ndim, f->dims, name);
  c->g->tensors[t].grad_of = of;
  c->g->tensors[t].layout = layout;
  return t;
}

/* The gradient of a join's tensor: its members' gradients side by side, one matrix, made once. */
static int join_grad(Grad *c, int view) {
  Tensor w = c->g->tensors[view];
  if (c->join_grad[w.join] < 0) {
    char name[NAME_LEN];
    snprintf(name, sizeof name, "d%.60s", w.name);
    int t = graph_tensor(c->g, T_PARAM_GRAD, DT_REAL, w.ndim, w.dims, name);
    c->g->tensors[t].param = w.param;
    c->g->tensors[t].join = w.join;
    c->g->tensors[t].layout = w.layout;
    c->join_grad[w.join] = t;
  }
  return c->join_grad[w.join];
}

static int param_grad(Grad *c, int param_tensor) {
  if (c->g->tensors[param_tensor].join >= 0) return join_grad(c, param_tensor);
  int p = c->g->tensors[param_tensor].param;
  if (c->param_grad[p] < 0) {
    const Param *pm = &c->m->params[p];
    char name[NAME_LEN];
    snprintf(name, sizeof name, "d%.60s", pm->name);
    int t = graph_tensor(c->g, T_PARAM_GRAD, DT_REAL, pm->ndim, pm->dims, name);
    c->g->tensors[t].param = p;
    c->g->tensors[t].layout = pm->layout;
    c->param_grad[p] = t;
  }
  return c->param_grad[p];
}

static Contribs *contribs_of(Grad *c, int t) {
  if (t >= c->ncontribs) {
    int n = c->g->ntensors * 2;
    c->contribs = realloc(c->contribs, (size_t)n * sizeof *c->contribs);
    memset(c->contribs + c->ncontribs, 0, (size_t)(n - c->ncontribs) * sizeof *c->contribs);
    c->ncontribs = n;
  }
  return &c->contribs[t];
}

static int add_contrib(Grad *c, int t, int grad) {
  Contribs *k = contribs_of(c, t);
  if (k->n == MAX_CONTRIB)
    return diag(c->d, "autodiff: tensor %s has more than %d consumers", c->g->tensors[t].name,
                MAX_CONTRIB);
  k->t[k->n++] = grad;
  return 0;
}

/* The parameter of gradient tensor t, or every member of its join, is summed over the TP group. */
static void mark_tp_sum(Grad *c, const Tensor *t) {
  if (t->join < 0) {
    c->m->params[t->param].grad_tp_sum = 1;
    return;
  }
  const ParamJoin *j = &c->m->joins[t->join];
  for (int k = 0; k < j->n; k++) c->m->params[j->params[k]].grad_tp_sum = 1;
}

/* Appends a backward node; its outputs are laid out by the shard rules. A parameter-gradient
 * output that comes out as partial sums of a replicated parameter marks the parameter for a TP
 * all-reduce. */
static int emit(Grad *c, Node *n) {
  n->backward = 1;
  if (!n->where[0]) snprintf(n->where, sizeof n->where, "%s", AUTODIFF);
  Layout out[MAX_OUTPUTS];
  if (shard_output_layouts(c->m, c->g, n, out))
    return diag(c->d, "%s: %s: the backward layouts do not fit (a bug in plait)", n->where,
                op_name(n->op));
  for (int k = 0; k < n->nout; k++) {
    Tensor *t = &c->g->tensors[n->out[k]];
    if (t->kind != T_PARAM_GRAD) t->layout = out[k];
    else if (out[k].kind == LAYOUT_P && t->layout.kind == LAYOUT_R) mark_tp_sum(c, t);
    else if (!layout_equal(out[k], t->layout))
      return diag(c->d,
                  "%s: %s: gradient layout of %s disagrees with the parameter (a bug in plait)",
                  n->where, op_name(n->op), t->name);
  }
  graph_node(c->g, n);
  return 0;
}

/* ---- summing contributions ------------------------------------------------------------------ */

/* One tensor holding the sum of grads[0..n) (all of one layout). */
static int sum(Grad *c, int of, const int *grads, int n) {
  if (n == 1) return grads[0];
  Node s = node_new(OP_EW, n, grads);
  int acc = expr_input(&s.expr, 0);
  for (int i = 1; i < n; i++) acc = expr_binary(&s.expr, E_ADD, acc, expr_input(&s.expr, i));
  s.nout = 1;
  s.out[0] = new_grad(c, of, c->g->tensors[grads[0]].layout);
  return emit(c, &s) ? -1 : s.out[0];
}

/* The contributions of kind `kind` summed, or -1 when there are none. */
static int sum_of_layout(Grad *c, int t, Layout kind, int *status) {
  int picked[MAX_CONTRIB], n = 0;
  const Contribs *k = contribs_of(c, t);
  for (int i = 0; i < k->n; i++)
    if (layout_equal(c->g->tensors[k->t[i]].layout, kind)) picked[n++] = k->t[i];
  if (n == 0) return -1;
  int s = sum(c, t, picked, n);
  if (s < 0) *status = -1;
  return s;
}

/* Distinct layouts among t's contributions. */
static int contrib_layouts(Grad *c, int t, Layout *out) {
  int n = 0;
  const Contribs *k = contribs_of(c, t);
  for (int i = 0; i < k->n; i++) {
    Layout l = c->g->tensors[k->t[i]].layout;
    int seen = 0;
    for (int j = 0; j < n; j++) seen |= layout_equal(out[j], l);
    if (!seen) out[n++] = l;
  }
  return n;
}

/* The gradient of t in layout `want`: each layout's sum converted, then added. -1: no gradient. */
static int gradient_in(Grad *c, int t, Layout want) {
  Layout kinds[MAX_CONTRIB];
  int nk = contrib_layouts(c, t, kinds), parts[MAX_CONTRIB], status = 0;
  if (nk == 0) return -1;
  for (int i = 0; i < nk; i++) {
    int s = sum_of_layout(c, t, kinds[i], &status);
    if (status) return -2;
    parts[i] = shard_convert(c->m, c->g, s, want, 1, AUTODIFF);
  }
  int all = sum(c, t, parts, nk);
  return all < 0 && nk > 1 ? -2 : all;
}

/* The gradient of t in the layout its producer's backward needs: its own forward layout,
 * replicated for partial sums (their gradient is the same on every member). */
static int gradient(Grad *c, int t) {
  Layout l = c->g->tensors[t].layout;
  return gradient_in(c, t, l.kind == LAYOUT_P ? layout_r() : l);
}

/* The gradient of routed rows (a dispatch's or a send's output) stays partial sums when every
 * contribution is one: the adjoints (a combine, the exchange back) are linear in it, so it is
 * reduced once, after the combine, over tokens rather than over routed rows. */
static int routed_rows_gradient(Grad *c, int t) {
  Layout kinds[MAX_CONTRIB];
  int nk = contrib_layouts(c, t, kinds);
  return nk == 1 && kinds[0].kind == LAYOUT_P ? gradient_in(c, t, kinds[0]) : gradient(c, t);
}

/* ---- backward rules ------------------------------------------------------------------------- */

static int node2(Grad *c, OpKind op, int a, int b, int out, int trans_a, int trans_b) {
  int in[2] = {a, b};
  Node n = node_new(op, 2, in);
  n.a.mm.trans_a = trans_a;
  n.a.mm.trans_b = trans_b;
  n.nout = 1;
  n.out[0] = out;
  return emit(c, &n);
}

/* The destination of a gradient for input x: its parameter gradient (accumulated into), or a new
 * tensor that becomes one of x's contributions. */
static int grad_target(Grad *c, int x, Layout guess) {
  return c->g->tensors[x].kind == T_PARAM ? param_grad(c, x) : new_grad(c, x, guess);
}

static int contribute(Grad *c, int x, int grad) {
  return c->g->tensors[x].kind == T_PARAM ? 0 : add_contrib(c, x, grad);
}

/* Y = A·op(B): dA = dY·op(B)ᵀ, dB = Aᵀ·dY (or dYᵀ·A when B was transposed); two nodes. */
static int matmul_backward(Grad *c, const Node *n, const int *dy) {
  int a = n->in[0], b = n->in[1], tb = n->a.mm.trans_b;
  if (c->needs_grad[a]) {
    int da = grad_target(c, a, layout_r());
    if (node2(c, OP_MATMUL, dy[0], b, da, 0, !tb) || contribute(c, a, da)) return -1;
  }
  if (c->needs_grad[b]) {
    int db = grad_target(c, b, layout_r());
    int status = tb ? node2(c, OP_MATMUL, dy[0], a, db, 1, 0)
                    : node2(c, OP_MATMUL, a, dy[0], db, 1, 0);
    if (status || contribute(c, b, db)) return -1;
  }
  return 0;
}

/* Sums a full-shape gradient down to a broadcast input's shape (bias and position gradients). */
static int reduce_to(Grad *c, int full, int x) {
  int out = grad_target(c, x, layout_r());
  Node r = node_new(OP_REDUCE, 1, &full);
  r.nout = 1;
  r.out[0] = out;
  return emit(c, &r) ? -1 : out;
}

static int same_shape(const Graph *g, int a, int b) {
  const Tensor *x = &g->tensors[a], *y = &g->tensors[b];
  return x->ndim == y->ndim && memcmp(x->dims, y->dims, (size_t)x->ndim * sizeof *x->dims) == 0;
}

/* One elementwise node computing ge over the forward node's inputs and dy (input n->nin of ge),
 * into `out`. Only the inputs ge reads become inputs of the new node. */
static int ew_grad_node(Grad *c, const Node *n, const Expr *ge, int dy, int out) {
  Node e = node_new(OP_EW, 0, NULL);
  int map[MAX_INPUTS + 1];
  for (int i = 0; i <= n->nin; i++) {
    map[i] = -1;
    if (!expr_uses_input(ge, i)) continue;
    map[i] = e.nin;
    e.in[e.nin++] = i < n->nin ? n->in[i] : dy;
  }
  e.expr = *ge;
  for (int k = 0; k < e.expr.count; k++)
    if (e.expr.n[k].op == E_IN) e.expr.n[k].input = map[e.expr.n[k].input];
  e.nout = 1;
  e.out[0] = out;
  return emit(c, &e);
}

/* Is the expression just the upstream gradient (d/dx of x + ...)? */
static int is_passthrough(const Expr *ge, int grad_input) {
  const ExprNode *r = &ge->n[expr_root(ge)];
  return r->op == E_IN && r->input == grad_input;
}

/* dx_i = ∂expr/∂x_i · dy, symbolically; broadcast inputs get the sum over the broadcast axes. */
static int ew_backward(Grad *c, const Node *n, const int *dy) {
  for (int i = 0; i < n->nin; i++) {
    int x = n->in[i];
    if (!c->needs_grad[x]) continue;
    Expr ge;
    if (expr_grad(&n->expr, i, n->nin, &ge))
      return diag(c->d, "%s: the derivative of this elementwise expression is too large", n->where);
    int full = same_shape(c->g, x, n->out[0]), is_param = c->g->tensors[x].kind == T_PARAM;
    int g = dy[0];
    if (!is_passthrough(&ge, n->nin) || (full && is_param)) {
      g = full && is_param ? param_grad(c, x) : new_grad(c, n->out[0], layout_r());
      if (ew_grad_node(c, n, &ge, dy[0], g)) return -1;
    }
    if (!full && (g = reduce_to(c, g, x)) < 0) return -1;
    if (contribute(c, x, g)) return -1;
  }
  return 0;
}

/* dx, dw (+=), db (+=) from x, w, the saved statistics and dy (a norm without weight, or with a
 * frozen weight and bias: dx alone). */
static int norm_backward(Grad *c, const Node *n, const int *dy) {
  int param_grads = 0;
  for (int k = 1; k < n->nin; k++) param_grads |= c->needs_grad[n->in[k]];
  Node b = node_new(OP_NORM_BWD, 0, NULL);
  b.a.norm = n->a.norm;
  b.in[b.nin++] = n->in[0];
  if (n->a.norm.weighted) b.in[b.nin++] = n->in[1];
  for (int k = 1; k < n->nout; k++) b.in[b.nin++] = n->out[k]; /* [mean,] rstd */
  b.in[b.nin++] = dy[0];
  b.out[b.nout++] = new_grad(c, n->in[0], layout_r());
  for (int k = 1; k < n->nin && param_grads; k++) b.out[b.nout++] = param_grad(c, n->in[k]);
  if (emit(c, &b)) return -1;
  return c->needs_grad[n->in[0]] ? add_contrib(c, n->in[0], b.out[0]) : 0;
}

static int attention_backward(Grad *c, const Node *n, const int *dy) {
  int in[6] = {n->in[0], n->in[1], n->in[2], n->out[0], n->out[1], dy[0]};
  Node b = node_new(OP_ATTENTION_BWD, 6, in);
  b.a.attn = n->a.attn;
  b.nout = 3;
  for (int k = 0; k < 3; k++) b.out[k] = new_grad(c, n->in[k], layout_r());
  if (emit(c, &b)) return -1;
  for (int k = 0; k < 3; k++)
    if (c->needs_grad[n->in[k]] && add_contrib(c, n->in[k], b.out[k])) return -1;
  return 0;
}

/* The rotation is orthogonal: dx is dy turned back by the same angles. */
static int rope_backward(Grad *c, const Node *n, const int *dy) {
  if (!c->needs_grad[n->in[0]]) return 0;
  Node b = node_new(OP_ROPE, 1, dy);
  b.a.rope = n->a.rope;
  b.a.rope.inverse = !n->a.rope.inverse;
  b.nout = 1;
  b.out[0] = new_grad(c, n->in[0], layout_r());
  if (emit(c, &b)) return -1;
  return add_contrib(c, n->in[0], b.out[0]);
}

static int same_parts(const PartAttr *a, const PartAttr *b) {
  return a->groups == b->groups && a->nparts == b->nparts &&
         memcmp(a->sizes, b->sizes, (size_t)a->nparts * sizeof *a->sizes) == 0;
}

/* Does a forward node before node `before` read tensor t? */
static int read_before(const Graph *g, int t, int before) {
  for (int i = 0; i < before; i++)
    for (int k = 0; k < g->nodes[i].nin; k++)
      if (g->nodes[i].in[k] == t) return 1;
  return 0;
}

/* The forward splits of n's input into each part once, as n splits it (by_part: their nodes),
 * when each part has a gradient and nothing reads a part before the last split: all of the
 * parts' gradients are then whole when the last split is reached, backward. */
static int sibling_splits(Grad *c, const Node *n, int *by_part) {
  const Graph *g = c->g;
  const PartAttr *a = &n->a.parts;
  int last = -1;
  for (int k = 0; k < a->nparts; k++) by_part[k] = -1;
  for (int i = 0; i < g->nforward; i++) {
    const Node *s = &g->nodes[i];
    if (s->op != OP_SPLIT || s->in[0] != n->in[0]) continue;
    if (!same_parts(&s->a.parts, a) || by_part[s->a.parts.part] >= 0) return 0;
    by_part[s->a.parts.part] = last = i;
  }
  for (int k = 0; k < a->nparts; k++) {
    if (by_part[k] < 0) return 0;
    int part = g->nodes[by_part[k]].out[0];
    if (contribs_of(c, part)->n == 0 || read_before(g, part, last)) return 0;
  }
  return 1;
}

/* Every part split off, each with its gradient: the whole's gradient is one concat of them (a
 * fused GEMM's output taken apart). The other parts' contributions are taken here, so their
 * splits find none. */
static int splits_backward(Grad *c, const Node *n, const int *dy, const int *by_part) {
  const PartAttr *a = &n->a.parts;
  int grads[MAX_PARTS];
  for (int k = 0; k < a->nparts; k++) {
    int part = c->g->nodes[by_part[k]].out[0];
    grads[k] = k == a->part ? dy[0] : gradient(c, part);
    if (grads[k] < 0) return -1;
    if (k != a->part) contribs_of(c, part)->n = 0;
  }
  Node b = node_new(OP_CONCAT, a->nparts, grads);
  b.a.parts = *a;
  b.nout = 1;
  b.out[0] = new_grad(c, n->in[0], layout_r());
  if (emit(c, &b)) return -1;
  return add_contrib(c, n->in[0], b.out[0]);
}

/* A part's gradient is the whole's with zeros in the other parts: a one-part concat; when every
 * part is split off, one concat of their gradients. */
static int split_backward(Grad *c, const Node *n, const int *dy) {
  if (!c->needs_grad[n->in[0]]) return 0;
  int by_part[MAX_PARTS];
  if (sibling_splits(c, n, by_part)) return splits_backward(c, n, dy, by_part);
  Node b = node_new(OP_CONCAT, 1, dy);
  b.a.parts = n->a.parts;
  b.nout = 1;
  b.out[0] = new_grad(c, n->in[0], layout_r());
  if (emit(c, &b)) return -1;
  return add_contrib(c, n->in[0], b.out[0]);
}

/* Each joined tensor's gradient is its part of the whole's. */
static int concat_backward(Grad *c, const Node *n, const int *dy) {
  for (int i = 0; i < n->nin; i++) {
    if (!c->needs_grad[n->in[i]]) continue;
    Node b = node_new(OP_SPLIT, 1, dy);
    b.a.parts = n->a.parts;
    b.a.parts.part = i;
    b.nout = 1;
    b.out[0] = new_grad(c, n->in[i], layout_r());
    if (emit(c, &b) || add_contrib(c, n->in[i], b.out[0])) return -1;
  }
  return 0;
}

/* The values' gradient goes back to where they were taken from; zeros elsewhere. */
static int topk_backward(Grad *c, const Node *n, const int *dy) {
  if (dy[0] < 0 || !c->needs_grad[n->in[0]]) return 0;
  int in[2] = {n->out[1], dy[0]};
  Node b = node_new(OP_TOPK_BWD, 2, in);
  b.a.moe = n->a.moe;
  b.nout = 1;
  b.out[0] = new_grad(c, n->in[0], layout_r());
  if (emit(c, &b)) return -1;
  return add_contrib(c, n->in[0], b.out[0]);
}

/* A node of `op` over `count` inputs into a new gradient of forward tensor `of`, contributed. */
static int moe_grad_node(Grad *c, OpKind op, const int *in, int count, int of, MoeAttr attr) {
  Node b = node_new(op, count, in);
  b.a.moe = attr;
  b.nout = 1;
  b.out[0] = new_grad(c, of, layout_r());
  return emit(c, &b) || add_contrib(c, of, b.out[0]);
}

/* Dispatch copies each token's row to its slots: its adjoint sums the slots' rows back (an
 * unweighted combine). */
static int dispatch_backward(Grad *c, const Node *n, const int *dy) {
  if (!c->needs_grad[n->in[0]]) return 0;
  int in[2] = {dy[0], n->in[1]};
  return moe_grad_node(c, OP_COMBINE, in, 2, n->in[0], n->a.moe);
}

/* Without weights a combine is dispatch's adjoint, and dispatch is its own; with them, the rows'
 * gradient is the output's, weighted, at the slots, and each weight's the dot product of its row
 * with the output's gradient. */
static int combine_backward(Grad *c, const Node *n, const int *dy) {
  if (n->nin == 2) {
    if (!c->needs_grad[n->in[0]]) return 0;
    int in[2] = {dy[0], n->in[1]};
    return moe_grad_node(c, OP_DISPATCH, in, 2, n->in[0], n->a.moe);
  }
  int in[4] = {n->in[0], n->in[1], n->in[2], dy[0]};
  Node b = node_new(OP_COMBINE_BWD, 4, in);
  b.a.moe = n->a.moe;
  b.nout = 2;
  b.out[0] = new_grad(c, n->in[0], layout_r());
  b.out[1] = new_grad(c, n->in[2], layout_r());
  if (emit(c, &b)) return -1;
  if (c->needs_grad[n->in[0]] && add_contrib(c, n->in[0], b.out[0])) return -1;
  return c->needs_grad[n->in[2]] ? add_contrib(c, n->in[2], b.out[1]) : 0;
}

/* Y = A·op(W[e]) per expert: dA = dY·op(W[e])ᵀ per expert; dW[e] (+=) = A_eᵀ·dY_e, or dY_eᵀ·A_e
 * when W was transposed. */
static int grouped_matmul_backward(Grad *c, const Node *n, const int *dy) {
  int a = n->in[0], w = n->in[1], counts = n->in[2], tb = n->a.moe.trans_b;
  if (c->needs_grad[a]) {
    int in[3] = {dy[0], w, counts};
    MoeAttr attr = n->a.moe;
    attr.trans_b = !tb;
    if (moe_grad_node(c, OP_GROUPED_MATMUL, in, 3, a, attr)) return -1;
  }
  if (!c->needs_grad[w]) return 0;
  int in[3] = {tb ? dy[0] : a, tb ? a : dy[0], counts};
  Node b = node_new(OP_GROUPED_MATMUL, 3, in);
  b.a.moe = n->a.moe;
  b.a.moe.trans_a = 1, b.a.moe.trans_b = 0;
  b.nout = 1;
  b.out[0] = param_grad(c, w);
  return emit(c, &b);
}

/* The rows sent to their experts come back by the reverse exchange, over the same counts: each
 * direction's adjoint is the other. */
static int exchange_backward(Grad *c, const Node *n, const int *dy) {
  if (!c->needs_grad[n->in[0]]) return 0;
  int in[2] = {dy[0], n->in[1]};
  OpKind reverse = n->op == OP_EXPERT_SEND ? OP_EXPERT_RETURN : OP_EXPERT_SEND;
  Node b = node_new(reverse, 2, in);
  b.a.moe = n->a.moe;
  b.nout = 1;
  b.out[0] = new_grad(c, n->in[0], layout_r());
  b.inserted = 1;
  if (emit(c, &b)) return -1;
  return add_contrib(c, n->in[0], b.out[0]);
}

static int embedding_backward(Grad *c, const Node *n, const int *dy) {
  if (!c->needs_grad[n->in[1]]) return 0;
  int in[2] = {n->in[0], dy[0]};
  Node b = node_new(OP_EMBEDDING_BWD, 2, in);
  b.nout = 1;
  b.out[0] = param_grad(c, n->in[1]);
  return emit(c, &b);
}

/* The loss's gradient starts here: dlogits = scale·(softmax − onehot), written over the logits. */
static int xent_backward(Grad *c, const Node *n) {
  int in[3] = {n->in[0], n->in[1], n->out[1]};
  Node b = node_new(OP_XENT_BWD, 3, in);
  b.a.xent = n->a.xent;
  b.inplace = 0;
  b.nout = 1;
  b.out[0] = new_grad(c, n->in[0], layout_r());
  if (emit(c, &b)) return -1;
  return add_contrib(c, n->in[0], b.out[0]);
}

/* A term added to the loss: x's gradient passes through; the term's starts here, the loss scale in
 * every element (the loss adds the term's sum, scaled as the cross entropy is). */
static int loss_term_backward(Grad *c, const Node *n) {
  int x = n->in[0], term = n->in[1], dy = gradient(c, n->out[0]);
  if (dy == -2) return -1;
  if (dy >= 0 && c->needs_grad[x] && add_contrib(c, x, dy)) return -1;
  if (!c->needs_grad[term]) return 0;
  Node b = node_new(OP_LOSS_TERM_BWD, 0, NULL);
  b.nout = 1;
  b.out[0] = new_grad(c, term, layout_r());
  return emit(c, &b) || add_contrib(c, term, b.out[0]);
}

/* Adjoints of the forward conversions: all-reduce's is the identity; reduce-scatter's and
 * slice's are all-gathers; all-gather's (reduce-scatter of partial sums, slice of replicated
 * parts) was applied when its output's gradient was resolved to the split layout (output_grads). */
static int collective_backward(Grad *c, const Node *n, const int *dy) {
  int g = dy[0];
  if (n->op == OP_REDUCESCATTER || n->op == OP_SLICE)
    g = shard_convert(c->m, c->g, dy[0], layout_r(), 1, AUTODIFF);
  return add_contrib(c, n->in[0], g);
}

/* ---- the pass ------------------------------------------------------------------------------- */

/* The gradients of node n's outputs; returns how many exist (0: nothing flows back through n). */
static int output_grads(Grad *c, const Node *n, int *dy) {
  int found = 0;
  for (int k = 0; k < n->nout; k++) {
    int t = n->out[k];
    if (n->op == OP_ALLGATHER) {
      Layout split = layout_s(n->a.coll.axis);
      dy[k] = gradient_in(c, t, split); /* P parts reduce-scatter, R parts slice */
    } else if (n->op == OP_DISPATCH || n->op == OP_EXPERT_SEND) {
      dy[k] = routed_rows_gradient(c, t);
    } else {
      dy[k] = gradient(c, t);
    }
    if (dy[k] == -2) return -1;
    found += dy[k] >= 0;
  }
  return found;
}

static int backward_node(Grad *c, const Node *n, int is_loss) {
  int dy[MAX_OUTPUTS];
  if (n->op == OP_XENT) return is_loss ? xent_backward(c, n) : 0;
  if (n->op == OP_LOSS_TERM) return loss_term_backward(c, n);
  int found = output_grads(c, n, dy);
  if (found <= 0) return found;
  switch (n->op) {
  case OP_MATMUL: return matmul_backward(c, n, dy);
  case OP_EW: return ew_backward(c, n, dy);
  case OP_NORM: return norm_backward(c, n, dy);
  case OP_ATTENTION: return attention_backward(c, n, dy);
  case OP_EMBEDDING: return embedding_backward(c, n, dy);
  case OP_ROPE: return rope_backward(c, n, dy);
  case OP_SPLIT: return split_backward(c, n, dy);
  case OP_CONCAT: return concat_backward(c, n, dy);
  case OP_TOPK: return topk_backward(c, n, dy);
  case OP_DISPATCH: return dispatch_backward(c, n, dy);
  case OP_COMBINE: return combine_backward(c, n, dy);
  case OP_GROUPED_MATMUL: return grouped_matmul_backward(c, n, dy);
  case OP_ROUTE:
  case OP_FRACTIONS: /* a constant of the routing */
  case OP_EXPERT_COUNTS: return 0; /* integers: nothing flows back */
  case OP_EXPERT_SEND:
  case OP_EXPERT_RETURN: return exchange_backward(c, n, dy);
  case OP_ALLREDUCE:
  case OP_ALLGATHER:
  case OP_REDUCESCATTER:
  case OP_SLICE:
    return collective_backward(c, n, dy);
  case OP_XENT: /* taken above: its gradient starts the backward pass */
  case OP_LOSS_TERM: /* taken above: its term's gradient starts here */
  case OP_LOSS_TERM_BWD:
  case OP_REDUCE:
  case OP_NORM_BWD:
  case OP_ATTENTION_BWD:
  case OP_EMBEDDING_BWD:
  case OP_XENT_BWD:
  case OP_TOPK_BWD:
  case OP_COMBINE_BWD:
    break;
  }
  return diag(c->d, "autodiff: no backward rule for %s", op_name(n->op));
}

/* Parameters reached through conversions (a sliced position table) get their summed gradient
 * added. */
static int accumulate_param_contribs(Grad *c) {
  Graph *g = c->g;
  for (int t = 0; t < g->ntensors; t++) {
    if (g->tensors[t].kind != T_PARAM || contribs_of(c, t)->n == 0) continue;
    const Param *p = &c->m->params[g->tensors[t].param];
    Layout want = p->layout;
    int sum = gradient_in(c, t, want);
    if (sum < 0) return -1;
    Node acc = node_new(OP_EW, 1, &sum);
    expr_input(&acc.expr, 0);
    acc.nout = 1;
    acc.out[0] = param_grad(c, t);
    if (emit(c, &acc)) return -1;
  }
  return 0;
}

static int differentiate(Grad *c) {
  Graph *g = c->g;
  int is_head = g == &c->m->head;
  if (!is_head) {
    g->grad_output = new_grad(c, g->output, g->tensors[g->output].layout);
    if (add_contrib(c, g->output, g->grad_output)) return -1;
  }
  for (int i = g->nforward - 1; i >= 0; i--) {
    Node n = g->nodes[i]; /* copied: emitting may move the node array */
    if (backward_node(c, &n, is_head && n.out[0] == g->output)) return -1;
  }
  if (accumulate_param_contribs(c)) return -1;
  int x = g->ninputs ? g->inputs[0] : -1;
  g->grad_input = x >= 0 && g->tensors[x].dtype == DT_REAL ? gradient(c, x) : -1;
  return g->grad_input == -2 ? -1 : 0;
}

static int differentiate_graph(Model *m, Graph *g, Diag *d) {
  Grad c = {.m = m, .g = g, .d = d};
  c.needs_grad = calloc((size_t)g->ntensors + 1, 1);
  c.param_grad = malloc((size_t)(m->nparams ? m->nparams : 1) * sizeof *c.param_grad);
  c.join_grad = malloc((size_t)(m->njoins ? m->njoins : 1) * sizeof *c.join_grad);
  for (int i = 0; i < m->nparams; i++) c.param_grad[i] = -1;
  for (int i = 0; i < m->njoins; i++) c.join_grad[i] = -1;
  mark_needs_grad(&c);
  int status = differentiate(&c);
  free(c.contribs);
  free(c.needs_grad);
  free(c.param_grad);
  free(c.join_grad);
  return status;
}

int autodiff_model(Model *m, Diag *d) {
  return differentiate_graph(m, &m->embed, d) || differentiate_graph(m, &m->block, d) ||
                 differentiate_graph(m, &m->head, d)
             ? -1
             : 0;
}

int autodiff_saved(const Graph *g, int t) {
  for (int i = g->nforward; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i].nin; k++)
      if (g->nodes[i].in[k] == t) return 1;
  return 0;
}
