/* experts.c: expert parallelism as graph nodes: the counts gathered after each route, the routed
 * rows sent to their experts' ranks after each dispatch and brought back before each combine, and
 * the rows in between sized at run time: what a rank's experts receive (balanced routing's count
 * the static size, ep times it the worst case). */
#include "passes/experts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One mixture's exchange: its route's counts gathered, the dims of its rows before and after. */
typedef struct {
  int all_counts, local_counts; /* tensors made by the OP_EXPERT_COUNTS after the route */
  int routed, held;             /* dims: a rank's routed rows, and what its experts may receive */
  int64_t capacity_rows;        /* under a capacity, the most a rank's experts may receive */
} Mixture;

typedef struct {
  Model *m;
  Graph *g;
  int ep;
  Node *nodes; /* the rewritten forward nodes */
  int count;
  Mixture *mixtures;
  int nmixtures;
  Mixture **mixture_of_route; /* by node index in the old graph: each route's mixture */
  char *held;                 /* by tensor: its rows are those this rank's experts receive */
  const Mixture **mixture;    /* by held tensor: its mixture */
  int *sent;                  /* by tensor: a dispatch's rows, the send's output; else -1 */
  Diag *d;
} Spread;

static void append(Spread *s, const Node *n) { s->nodes[s->count++] = *n; }

static int new_tensor(Spread *s, DType dtype, int ndim, const int *dims, const char *base,
                      const char *suffix) {
  char name[NAME_LEN];
  snprintf(name, sizeof name, "%.40s%s", base, suffix);
  int t = graph_tensor(s->g, T_ACT, dtype, ndim, dims, name);
  if (t >= 0) s->g->tensors[t].layout = layout_r();
  return t;
}

/* A dim named `base` + suffix of `size`; -1 after a diag when the name is taken. */
static int new_dim(Spread *s, int base, const char *suffix, int64_t size) {
  char name[NAME_LEN];
  snprintf(name, sizeof name, "%.40s%s", s->m->dims[base].name, suffix);
  int dim = model_dim(s->m, name, size, 1);
  if (dim < 0) diag(s->d, "expert parallelism: a dim named %s already has another size", name);
  return dim;
}

/* After a route: every rank's counts, and the rows this rank's experts receive. */
static int gather_counts(Spread *s, const Node *route, Mixture *x) {
  int counts = route->out[1], experts = s->g->tensors[counts].dims[0];
  int64_t E = s->m->dims[experts].size;
  if (E % s->ep != 0)
    return diag(s->d,
                "%s: --ep %d does not divide the %lld experts; choose --ep a divisor of %lld",
                route->where, s->ep, (long long)E, (long long)E);
  int64_t rows = 1;
  const Tensor *indices = &s->g->tensors[route->in[0]];
  for (int a = 0; a < indices->ndim; a++) rows *= s->m->dims[indices->dims[a]].size;
  x->capacity_rows = E * moe_capacity(&route->a.moe, rows, E); /* each rank's cap per expert */
  int ranks = new_dim(s, experts, "_ranks", s->ep);
  int local = new_dim(s, experts, "_local", E / s->ep);
  if (ranks < 0 || local < 0) return -1;
  int all_dims[2] = {ranks, experts};
  x->all_counts = new_tensor(s, DT_INT, 2, all_dims, s->g->tensors[counts].name, ".all");
  x->local_counts = new_tensor(s, DT_INT, 1, &local, s->g->tensors[counts].name, ".local");
  Node n = node_new(OP_EXPERT_COUNTS, 1, &counts);
  n.a.moe.experts = (int)E;
  n.nout = 2, n.out[0] = x->all_counts, n.out[1] = x->local_counts;
  n.inserted = 1;
  snprintf(n.where, sizeof n.where, "%s", route->where);
  append(s, &n);
  return 0;
}

/* An exchange node of `op` from tensor `from` into a new tensor of rows `rows_dim`, laid out as
 * `from` over tp (rows whole, or partial sums of experts split over tp). */
static int exchange(Spread *s, OpKind op, const Mixture *x, int from, int rows_dim,
                    const char *where) {
  const Tensor *t = &s->g->tensors[from];
  int dims[2] = {rows_dim, t->dims[1]};
  int out = new_tensor(s, DT_REAL, 2, dims, t->name, op == OP_EXPERT_SEND ? ".held" : ".back");
  if (out < 0) return -1;
  s->g->tensors[out].layout = s->g->tensors[from].layout;
  int in[2] = {from, x->all_counts};
  Node n = node_new(op, 2, in);
  n.nout = 1, n.out[0] = out;
  n.inserted = 1;
  snprintf(n.where, sizeof n.where, "%s", where);
  append(s, &n);
  return out;
}

/* A node between a dispatch and a combine: held rows in (the send's output in place of the
 * dispatch's), held rows out; a grouped GEMM's counts are the local ones, its weights spread. */
static void hold(Spread *s, Node *n) {
  const Mixture *x = NULL;
  for (int i = 0; i < n->nin; i++) {
    if (s->sent[n->in[i]] >= 0) n->in[i] = s->sent[n->in[i]];
    if (!s->held[n->in[i]]) continue;
    x = s->mixture[n->in[i]];
    if (n->op == OP_GROUPED_MATMUL && i == 0) {
      n->in[2] = x->local_counts;
      s->m->params[s->g->tensors[n->in[1]].param].ep_split = 1;
    }
  }
  for (int k = 0; k < n->nout; k++) {
    Tensor *t = &s->g->tensors[n->out[k]];
    for (int a = 0; a < t->ndim; a++)
      if (t->dims[a] == x->routed) t->dims[a] = x->held;
    s->held[n->out[k]] = 1;
    s->mixture[n->out[k]] = x;
  }
}

static int holds_input(const Spread *s, const Node *n) {
  for (int i = 0; i < n->nin; i++)
    if (s->held[n->in[i]] || s->sent[n->in[i]] >= 0) return 1;
  return 0;
}

/* The dim of the rows a mixture's experts receive, one of its own per mixture: as many rows as it
 * routes under balanced routing, ep times as many at worst, or under a capacity, at most the
 * capacity of each of its E/ep experts from each of the ep ranks. */
static int held_dim(Spread *s, int routed, int64_t capacity_rows) {
  char suffix[16] = "_held", name[NAME_LEN];
  for (int n = 2;; n++) {
    snprintf(name, sizeof name, "%.40s%s", s->m->dims[routed].name, suffix);
    if (model_find_dim(s->m, name) < 0) break;
    snprintf(suffix, sizeof suffix, "_held%d", n);
  }
  int held = new_dim(s, routed, suffix, s->m->dims[routed].size);
  int64_t worst = s->ep * s->m->dims[routed].size;
  if (capacity_rows > 0 && capacity_rows < worst) worst = capacity_rows;
  if (held >= 0) s->m->dims[held].worst = worst;
  return held;
}

/* After a dispatch: its rows sent to their experts' ranks. */
static int send_rows(Spread *s, const Node *dispatch) {
  Mixture *x = s->mixture_of_route[s->g->tensors[dispatch->in[1]].producer];
  x->routed = s->g->tensors[dispatch->out[0]].dims[0];
  x->held = held_dim(s, x->routed, x->capacity_rows);
  if (x->held < 0) return -1;
  int held = exchange(s, OP_EXPERT_SEND, x, dispatch->out[0], x->held, dispatch->where);
  if (held < 0) return -1;
  s->sent[dispatch->out[0]] = held;
  s->held[held] = 1;
  s->mixture[held] = x;
  return 0;
}

/* Whether a dispatch moves rows by these slots (a route whose counts alone are read, as a
 * load-balancing loss's before a capacity, exchanges nothing). */
static int dispatched(const Graph *g, int slots) {
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i].op == OP_DISPATCH && g->nodes[i].in[1] == slots) return 1;
  return 0;
}

static int spread_node(Spread *s, int index) {
  Node n = s->g->nodes[index];
  if (n.op == OP_COMBINE && s->held[n.in[0]]) {
    const Mixture *x = s->mixture[n.in[0]];
    n.in[0] = exchange(s, OP_EXPERT_RETURN, x, n.in[0], x->routed, n.where);
    if (n.in[0] < 0) return -1;
  } else if (holds_input(s, &n)) {
    hold(s, &n);
  }
  append(s, &n);
  if (n.op == OP_ROUTE && dispatched(s->g, n.out[0])) {
    s->mixture_of_route[index] = &s->mixtures[s->nmixtures++];
    return gather_counts(s, &n, s->mixture_of_route[index]);
  }
  return n.op == OP_DISPATCH ? send_rows(s, &n) : 0;
}

static int count_ops(const Graph *g, OpKind op) {
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) n += g->nodes[i].op == op;
  return n;
}

static int spread_graph(Model *m, Graph *g, int ep, Diag *d) {
  int routes = count_ops(g, OP_ROUTE), status = 0;
  if (routes == 0) return 0;
  /* each route adds a gather, each dispatch a send, each combine a return; tensors: 2 + 1 + 1 */
  int most = g->nnodes + routes + count_ops(g, OP_DISPATCH) + count_ops(g, OP_COMBINE);
  int tensors = g->ntensors + 2 * routes + count_ops(g, OP_DISPATCH) + count_ops(g, OP_COMBINE);
  Spread s = {.m = m, .g = g, .ep = ep, .d = d};
  s.nodes = calloc((size_t)most, sizeof *s.nodes);
  s.mixtures = calloc((size_t)routes, sizeof *s.mixtures);
  s.mixture_of_route = calloc((size_t)g->nnodes, sizeof *s.mixture_of_route);
  s.held = calloc((size_t)tensors, sizeof *s.held);
  s.mixture = calloc((size_t)tensors, sizeof *s.mixture);
  s.sent = malloc((size_t)tensors * sizeof *s.sent);
  for (int t = 0; t < tensors; t++) s.sent[t] = -1;
  for (int i = 0; i < g->nnodes && status == 0; i++) status = spread_node(&s, i);
  if (status == 0) {
    free(g->nodes);
    g->nodes = s.nodes, g->nnodes = g->nodes_cap = g->nforward = s.count;
    graph_set_producers(g);
  } else {
    free(s.nodes);
  }
  free(s.mixtures), free(s.mixture_of_route), free(s.held), free(s.mixture), free(s.sent);
  return status;
}

static int has_experts(const Model *m) {
  return count_ops(&m->embed, OP_ROUTE) + count_ops(&m->block, OP_ROUTE) +
         count_ops(&m->head, OP_ROUTE);
}

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

int64_t experts_common(const Model *m) {
  const Graph *graphs[3] = {&m->embed, &m->block, &m->head};
  int64_t common = 0;
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < graphs[s]->nnodes; i++) {
      const Node *n = &graphs[s]->nodes[i];
      if (n->op == OP_ROUTE)
        common = gcd(common, m->dims[graphs[s]->tensors[n->out[1]].dims[0]].size);
    }
  return common;
}

int experts_spread(Model *m, const Parallel *par, Diag *d) {
  m->ep = par->ep;
  if (par->ep == 1) return 0;
  if (!has_experts(m))
    return diag(d,
                "--ep %d spreads a mixture's experts, and %s has none; leave out --ep (or give "
                "--ep 1)",
                par->ep, m->name);
  Graph *graphs[3] = {&m->embed, &m->block, &m->head};
  for (int i = 0; i < 3; i++)
    if (spread_graph(m, graphs[i], par->ep, d)) return -1;
  return 0;
}
