/* fuse.c: merging elementwise producers into their elementwise consumers: a producer read by one
 * consumer moves into it; one read by several elementwise kernels (the forward's next step and the
 * backward's derivative, as bias + GeLU or SwiGLU's silu(gate)) is recomputed inside each of them
 * when that keeps no more memory for the backward pass than its value did. And the cross entropy's
 * gradient taken by its forward, where the logits have no reader but the cross entropy's two
 * nodes: one pass over the logits from memory rather than three. */
#include "passes/fuse.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  Graph *g;
  int *uses;   /* per tensor: how many node inputs read it (a node reading it twice counts once) */
  char *dead;  /* per node: merged into its consumer */
} Fusion;

static void count_uses(Fusion *f) {
  Graph *g = f->g;
  memset(f->uses, 0, (size_t)g->ntensors * sizeof *f->uses);
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = &g->nodes[i];
    for (int k = 0; k < n->nin; k++) {
      int seen = 0;
      for (int j = 0; j < k; j++) seen |= n->in[j] == n->in[k];
      if (!seen) f->uses[n->in[k]]++;
    }
  }
}

static int same_local_shape(const Tensor *a, const Tensor *b) {
  return a->ndim == b->ndim && memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof *a->dims) == 0 &&
         layout_equal(a->layout, b->layout);
}

/* May the value t, made by node p and read by node n, live only inside n's kernel? */
static int fusible(const Fusion *f, const Node *p, const Node *n, int t) {
  const Graph *g = f->g;
  const Tensor *v = &g->tensors[t];
  return p->op == OP_EW && p->backward == n->backward && f->uses[t] == 1 &&
         v->kind != T_PARAM_GRAD && t != g->output && t != g->grad_input &&
         same_local_shape(v, &g->tensors[n->out[0]]);
}

static int reads(const Node *n, int t) {
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] == t) return 1;
  return 0;
}

/* Is tensor t an input of a backward node? */
static int kept_for_backward(const Fusion *f, int t) {
  const Graph *g = f->g;
  for (int i = g->nforward; i < g->nnodes; i++)
    if (!f->dead[i] && reads(&g->nodes[i], t)) return 1;
  return 0;
}

/* May the value t of node p, read by several nodes, be recomputed inside each reader instead of
 * written? Every reader must be an elementwise kernel of t's shape, p must draw no dropout mask
 * (it would be drawn twice), and what the backward pass then keeps of p's inputs must be no more
 * than t: at most one input that is neither a parameter nor kept already. */
static int recomputable(const Fusion *f, int p, int t) {
  const Graph *g = f->g;
  const Node *pn = &g->nodes[p];
  const Tensor *v = &g->tensors[t];
  if (pn->op != OP_EW || f->uses[t] < 2 || v->kind == T_PARAM_GRAD || t == g->output ||
      t == g->grad_input || expr_dropouts(&pn->expr, NULL, NULL) > 0)
    return 0;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *r = &g->nodes[i];
    if (f->dead[i] || !reads(r, t)) continue;
    if (r->op != OP_EW || r->backward < pn->backward ||
        !same_local_shape(v, &g->tensors[r->out[0]]))
      return 0;
  }
  int newly_kept = 0;
  for (int k = 0; k < pn->nin; k++) {
    const Tensor *u = &g->tensors[pn->in[k]];
    newly_kept += u->kind != T_PARAM && !kept_for_backward(f, pn->in[k]);
  }
  return newly_kept <= 1;
}

static int index_of(const int *list, int n, int value) {
  for (int i = 0; i < n; i++)
    if (list[i] == value) return i;
  return -1;
}

/* n's expression with input k replaced by p's expression. Returns 0, or -1 when it does not fit. */
static int merge(Node *n, int k, const Node *p) {
  int in[MAX_INPUTS * 2], nin = 0;
  for (int i = 0; i < n->nin; i++)
    if (i != k) in[nin++] = n->in[i];
  for (int j = 0; j < p->nin; j++)
    if (index_of(in, nin, p->in[j]) < 0) in[nin++] = p->in[j];
  if (nin > MAX_INPUTS) return -1;
  Expr merged = {0};
  int pmap[MAX_INPUTS], nmap[MAX_INPUTS];
  for (int j = 0; j < p->nin; j++) pmap[j] = expr_input(&merged, index_of(in, nin, p->in[j]));
  int proot = expr_graft(&merged, &p->expr, expr_root(&p->expr), pmap);
  if (proot < 0) return -1;
  for (int i = 0; i < n->nin; i++)
    nmap[i] = i == k ? proot : expr_input(&merged, index_of(in, nin, n->in[i]));
  int root = expr_graft(&merged, &n->expr, expr_root(&n->expr), nmap);
  if (root < 0 || expr_compact(&merged, root)) return -1;
  n->expr = merged;
  n->nin = nin;
  memcpy(n->in, in, (size_t)nin * sizeof *in);
  return 0;
}

/* Recomputes p inside every reader of its value t; all or none. Returns 0, or -1 when a reader's
 * expression would not fit. */
static int recompute_in_readers(Fusion *f, int p, int t) {
  Graph *g = f->g;
  Node *merged = malloc((size_t)g->nnodes * sizeof *merged);
  int ok = merged != NULL;
  for (int i = 0; ok && i < g->nnodes; i++) {
    merged[i] = g->nodes[i];
    if (!f->dead[i] && reads(&g->nodes[i], t))
      ok = merge(&merged[i], index_of(g->nodes[i].in, g->nodes[i].nin, t), &g->nodes[p]) == 0;
  }
  if (ok) {
    for (int i = 0; i < g->nnodes; i++) g->nodes[i] = merged[i];
    f->dead[p] = 1;
    count_uses(f);
  }
  free(merged);
  return ok ? 0 : -1;
}

/* Pulls producers into node i until none fits; returns how many were merged. */
static int absorb(Fusion *f, int i) {
  Graph *g = f->g;
  int merged = 0;
  for (int again = 1; again;) {
    again = 0;
    Node *n = &g->nodes[i];
    for (int k = 0; k < n->nin && !again; k++) {
      int t = n->in[k], p = g->tensors[t].producer;
      if (p < 0 || f->dead[p]) continue;
      if (recomputable(f, p, t)) {
        if (recompute_in_readers(f, p, t) == 0) merged++, again = 1;
        continue;
      }
      if (!fusible(f, &g->nodes[p], n, t)) continue;
      Node candidate = *n;
      if (merge(&candidate, k, &g->nodes[p])) continue;
      *n = candidate;
      f->dead[p] = 1;
      count_uses(f);
      merged++, again = 1;
    }
  }
  return merged;
}

/* Drops merged nodes, keeping order, and renumbers producers. */
static void compact(Fusion *f) {
  Graph *g = f->g;
  int kept = 0, forward = 0;
  for (int i = 0; i < g->nnodes; i++) {
    if (f->dead[i]) continue;
    if (i < g->nforward) forward++;
    g->nodes[kept++] = g->nodes[i];
  }
  g->nnodes = kept;
  g->nforward = forward;
  graph_set_producers(g);
}

static int fuse_graph(Graph *g) {
  Fusion f = {.g = g};
  f.uses = calloc((size_t)g->ntensors + 1, sizeof *f.uses);
  f.dead = calloc((size_t)g->nnodes + 1, 1);
  count_uses(&f);
  int merged = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (!f.dead[i] && g->nodes[i].op == OP_EW) merged += absorb(&f, i);
  compact(&f);
  free(f.uses);
  free(f.dead);
  return merged;
}

int fuse_model(Model *m) {
  return fuse_graph(&m->embed) + fuse_graph(&m->block) + fuse_graph(&m->head);
}

/* ---- the cross entropy's gradient in its forward ---------------------------------------- */

/* Does a node other than a and b read tensor t? */
static int read_elsewhere(const Graph *g, int t, int a, int b) {
  for (int i = 0; i < g->nnodes; i++) {
    if (i == a || i == b) continue;
    for (int k = 0; k < g->nodes[i].nin; k++)
      if (g->nodes[i].in[k] == t) return 1;
  }
  return 0;
}

/* The backward node of the forward cross entropy `at`, over the same logits; -1 when there is none
 * (the cross entropy is not the loss). */
static int backward_of(const Graph *g, int at) {
  for (int j = g->nforward; j < g->nnodes; j++)
    if (g->nodes[j].op == OP_XENT_BWD && g->nodes[j].in[0] == g->nodes[at].in[0]) return j;
  return -1;
}

int fuse_xent(Graph *g) {
  int marked = 0;
  for (int i = 0; i < g->nforward; i++) {
    Node *n = &g->nodes[i];
    if (n->op != OP_XENT) continue;
    const Tensor *z = &g->tensors[n->in[0]];
    int j = backward_of(g, i);
    if (j < 0 || (z->layout.kind == LAYOUT_S && z->layout.axis == z->ndim - 1) ||
        read_elsewhere(g, n->in[0], i, j))
      continue;
    n->a.xent.grad_in_forward = g->nodes[j].a.xent.grad_in_forward = 1;
    marked++;
  }
  return marked;
}
