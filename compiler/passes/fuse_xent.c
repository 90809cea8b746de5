/* fuse_xent.c: the cross entropy's gradient taken by its forward, where the logits have no
 * reader but the cross entropy's two nodes: one pass over the logits from memory rather than
 * three. */
#include "passes/fuse.h"

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
