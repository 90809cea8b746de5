/* graph.c: building and measuring the IR: dims, parameters, tensors, nodes, and their printed
 * forms. */
#include "ir/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The array grown to hold `need` elements (its capacity doubled), within budget; NULL when the
 * budget refuses (the array left as it was). */
static void *grow(void *array, int *cap, int need, size_t elem, MemoryBudget *budget) {
  if (need <= *cap) return array;
  int cap2 = *cap ? *cap * 2 : 16;
  while (cap2 < need) cap2 *= 2;
  void *grown = budget_realloc(budget, array, (size_t)*cap * elem, (size_t)cap2 * elem);
  if (grown) *cap = cap2;
  return grown;
}

static const char *dim_name(const void *model, int id) {
  return ((const Model *)model)->dims[id].name;
}

int model_find_dim(const Model *m, const char *name) {
  return name_index_find(&m->dim_index, name, dim_name, m);
}

int model_dim(Model *m, const char *name, int64_t size, int64_t granule) {
  int d = model_find_dim(m, name);
  if (d >= 0) return m->dims[d].unpadded == size ? d : -1;
  void *grown = grow(m->dims, &m->dims_cap, m->ndims + 1, sizeof *m->dims, m->budget);
  if (!grown) return -1;
  m->dims = grown;
  Dim *dim = &m->dims[m->ndims];
  memset(dim, 0, sizeof *dim);
  snprintf(dim->name, sizeof dim->name, "%s", name);
  dim->size = dim->unpadded = size;
  dim->granule = granule > 0 ? granule : 1;
  if (name_index_add(&m->dim_index, m->ndims, dim_name, m, m->budget)) return -1;
  return m->ndims++;
}

int model_param(Model *m, const Param *p) {
  void *grown = grow(m->params, &m->params_cap, m->nparams + 1, sizeof *m->params, m->budget);
  if (!grown) return -1;
  m->params = grown;
  m->params[m->nparams] = *p;
  return m->nparams++;
}

int model_constant(Model *m, const Constant *k) {
  void *grown = grow(m->constants, &m->constants_cap, m->nconstants + 1, sizeof *m->constants,
                     m->budget);
  if (!grown) return -1;
  m->constants = grown;
  m->constants[m->nconstants] = *k;
  return m->nconstants++;
}

void graph_init(Graph *g, const char *name) {
  memset(g, 0, sizeof *g);
  snprintf(g->name, sizeof g->name, "%s", name);
  g->output = g->grad_output = g->grad_input = -1;
}

/* dims and name may point into g's own table, which growing moves: they are copied first. */
int graph_tensor(Graph *g, TensorKind kind, DType dtype, int ndim, const int *dims,
                 const char *name) {
  int dims_copy[MAX_DIMS];
  char name_copy[NAME_LEN];
  memcpy(dims_copy, dims, (size_t)ndim * sizeof *dims);
  snprintf(name_copy, sizeof name_copy, "%s", name ? name : "");
  void *grown = grow(g->tensors, &g->tensors_cap, g->ntensors + 1, sizeof *g->tensors, g->budget);
  if (!grown) return -1;
  g->tensors = grown;
  Tensor *t = &g->tensors[g->ntensors];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->dims, dims_copy, (size_t)ndim * sizeof *dims);
  t->producer = t->param = t->grad_of = t->join = t->copy_of = -1;
  snprintf(t->name, sizeof t->name, "%s", name_copy);
  return g->ntensors++;
}

void graph_set_producers(Graph *g) {
  for (int t = 0; t < g->ntensors; t++)
    if (g->tensors[t].kind != T_PARAM_GRAD) g->tensors[t].producer = -1;
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i].nout; k++)
      if (g->tensors[g->nodes[i].out[k]].kind != T_PARAM_GRAD)
        g->tensors[g->nodes[i].out[k]].producer = i;
}

Node node_new(OpKind op, int nin, const int *in) {
  Node n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.inplace = -1;
  n.nin = nin;
  memcpy(n.in, in, (size_t)nin * sizeof *in);
  return n;
}

/* Appends a node; its outputs' producer becomes the new node. */
int graph_node(Graph *g, const Node *n) {
  void *grown = grow(g->nodes, &g->nodes_cap, g->nnodes + 1, sizeof *g->nodes, g->budget);
  if (!grown) return -1;
  g->nodes = grown;
  g->nodes[g->nnodes] = *n;
  for (int i = 0; i < n->nout; i++)
    if (g->tensors[n->out[i]].kind != T_PARAM_GRAD) g->tensors[n->out[i]].producer = g->nnodes;
  return g->nnodes++;
}

static int64_t dims_elems(const Model *m, int ndim, const int *dims) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= m->dims[dims[i]].size;
  return n;
}

int64_t tensor_elems(const Model *m, const Tensor *t) { return dims_elems(m, t->ndim, t->dims); }

/* Elements one tensor-parallel rank holds: the split axis is cut into the layout's pieces. */
static int64_t local_elems(const Model *m, int ndim, const int *dims, Layout l, int tp) {
  return dims_elems(m, ndim, dims) / layout_pieces(l, tp);
}

int64_t tensor_local_elems(const Model *m, const Tensor *t, int tp) {
  return local_elems(m, t->ndim, t->dims, t->layout, tp);
}

int64_t param_elems(const Model *m, const Param *p) { return dims_elems(m, p->ndim, p->dims); }

int64_t param_local_elems(const Model *m, const Param *p, int tp) {
  int spread = p->ep_split && m->ep > 1 ? m->ep : 1;
  return local_elems(m, p->ndim, p->dims, p->layout, tp) / spread;
}

/* The parameter's size with padded dims counted at their real size (what a checkpoint stores). */
int64_t param_unpadded_elems(const Model *m, const Param *p) {
  int64_t n = 1;
  for (int i = 0; i < p->ndim; i++) n *= m->dims[p->dims[i]].unpadded;
  return n;
}

#define GRAPH_OP_NAME(op, name) [op] = name,
static const char *const op_names[OP_COUNT] = {GRAPH_OPS(GRAPH_OP_NAME)};
#undef GRAPH_OP_NAME

const char *op_name(OpKind op) { return op_names[op]; }

int64_t moe_capacity(const MoeAttr *a, int64_t rows, int64_t experts) {
  if (a->capacity_factor <= 0 || experts <= 0) return 0;
  return (int64_t)ceil((double)rows / (double)experts * a->capacity_factor);
}

int op_is_collective(OpKind op) {
  return op == OP_ALLREDUCE || op == OP_ALLGATHER || op == OP_REDUCESCATTER;
}

void shape_string(const Model *m, int ndim, const int *dims, char *buf, int len) {
  int used = snprintf(buf, len, "[");
  for (int i = 0; i < ndim && used < len; i++)
    used += snprintf(buf + used, len - used, "%s%s", i ? ", " : "", m->dims[dims[i]].name);
  if (used < len) snprintf(buf + used, len - used, "]");
}

void layout_string(Layout l, char *buf, int len) {
  switch (l.kind) {
  case LAYOUT_R: snprintf(buf, len, "R"); break;
  case LAYOUT_P: snprintf(buf, len, "P"); break;
  case LAYOUT_S:
    if (layout_copies(l) > 1) snprintf(buf, len, "S(%d)×%d", l.axis, layout_copies(l));
    else snprintf(buf, len, "S(%d)", l.axis);
    break;
  case LAYOUT_NONE: snprintf(buf, len, "?"); break;
  }
}

int layout_equal(Layout a, Layout b) {
  return a.kind == b.kind &&
         (a.kind != LAYOUT_S || (a.axis == b.axis && layout_copies(a) == layout_copies(b)));
}

void graph_free(Graph *g) {
  budget_realloc(g->budget, g->tensors, (size_t)g->tensors_cap * sizeof *g->tensors, 0);
  budget_realloc(g->budget, g->nodes, (size_t)g->nodes_cap * sizeof *g->nodes, 0);
}

void model_free(Model *m) {
  graph_free(&m->embed);
  graph_free(&m->block);
  graph_free(&m->head);
  free(m->dims);
  free(m->params);
  free(m->config);
  free(m->layer_attn);
  free(m->joins);
  for (int i = 0; i < m->nconstants; i++) free(m->constants[i].values);
  free(m->constants);
  name_index_free(&m->dim_index, NULL);
  memset(m, 0, sizeof *m);
}

static void print_tensor(const Model *m, const Graph *g, int t, FILE *f) {
  char shape[200], layout[16];
  shape_string(m, g->tensors[t].ndim, g->tensors[t].dims, shape, sizeof shape);
  layout_string(g->tensors[t].layout, layout, sizeof layout);
  fprintf(f, "%s%s:%s", g->tensors[t].name, shape, layout);
}

static void print_graph(const Model *m, const Graph *g, FILE *f) {
  fprintf(f, "stage %s\n", g->name);
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = &g->nodes[i];
    char mark = n->inserted ? '+' : n->recomputed ? '~' : ' ';
    fprintf(f, "  %c%s %-13s ", mark, n->backward ? "bwd" : "fwd", op_name(n->op));
    if (n->op == OP_EW) {
      char body[1024];
      const char *names[MAX_INPUTS] = {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7",
                                       "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15"};
      expr_to_c(&n->expr, names, NULL, body, sizeof body);
      fprintf(f, "%s  ", body);
    }
    for (int k = 0; k < n->nout; k++) {
      print_tensor(m, g, n->out[k], f);
      fprintf(f, k + 1 < n->nout ? ", " : "");
    }
    fprintf(f, " <- ");
    for (int k = 0; k < n->nin; k++) {
      print_tensor(m, g, n->in[k], f);
      fprintf(f, k + 1 < n->nin ? ", " : "");
    }
    fprintf(f, "\n");
  }
}

void graph_print(const Model *m, FILE *f) {
  print_graph(m, &m->embed, f);
  print_graph(m, &m->block, f);
  print_graph(m, &m->head, f);
}
