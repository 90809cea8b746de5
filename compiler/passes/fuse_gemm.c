/* fuse_gemm.c: forward GEMMs that read the same input by weights of the same tensor-parallel
 * layout (q, k and v of an attention; gate and up of a GLU) become one GEMM over the weights
 * side by side, as llm.c's one [C, 3C] product, its output taken apart into the tensors the
 * GEMMs made. The weights stay parameters of their own (names, checkpoints, initialisation): a
 * join lays them side by side in memory and one tensor stands for them. After the shard pass
 * (the layouts decide what may join), before autodiff, which then gives one GEMM for the input's
 * gradient (the members' contributions summed by the product) and one for the weights'
 * gradients, after one concat of the parts' gradients. */
#include <stdlib.h>
#include <string.h>

#include "passes/fuse.h"

typedef struct {
  int nodes[MAX_PARTS]; /* the member GEMMs, in graph order */
  int n;
} Group;

typedef struct {
  Model *m;
  Graph *g;
  int tp;
  int *group_of; /* per node: the group it is a member of, -1 for none */
  Group *groups;
  int ngroups;
} Fusing;

static const Tensor *weight_of(const Fusing *f, int node) {
  return &f->g->tensors[f->g->nodes[node].in[1]];
}

/* Is param p a member of a join made before (in another stage: a parameter lies in one place)? */
static int joined(const Model *m, int p) {
  for (int j = 0; j < m->njoins; j++)
    for (int k = 0; k < m->joins[j].n; k++)
      if (m->joins[j].params[k] == p) return 1;
  return 0;
}

static int in_group(const Fusing *f, const Group *g, int p) {
  for (int k = 0; k < g->n; k++)
    if (weight_of(f, g->nodes[k])->param == p) return 1;
  return 0;
}

/* A forward x·Wᵀ by a 2-D parameter, replicated or split by its rows (a linear layer,
 * column-parallel): the weights side by side are then one matrix on every rank. */
static int is_linear(const Fusing *f, int i) {
  const Node *n = &f->g->nodes[i];
  if (n->op != OP_MATMUL || n->backward || n->a.mm.trans_a || !n->a.mm.trans_b) return 0;
  const Tensor *w = weight_of(f, i);
  return w->kind == T_PARAM && w->join < 0 && w->ndim == 2 &&
         (w->layout.kind == LAYOUT_R || (w->layout.kind == LAYOUT_S && w->layout.axis == 0));
}

/* May linear node j join the group that node `first` leads? */
static int joins_group(const Fusing *f, const Group *g, int first, int j) {
  const Tensor *a = weight_of(f, first), *b = weight_of(f, j);
  const Param *pa = &f->m->params[a->param], *pb = &f->m->params[b->param];
  return f->g->nodes[j].in[0] == f->g->nodes[first].in[0] && layout_equal(a->layout, b->layout) &&
         pa->scope == pb->scope && pa->trainable == pb->trainable && !joined(f->m, b->param) &&
         !in_group(f, g, b->param);
}

static void find_groups(Fusing *f) {
  for (int i = 0; i < f->g->nforward; i++) {
    if (f->group_of[i] >= 0 || !is_linear(f, i) || joined(f->m, weight_of(f, i)->param)) continue;
    Group g = {.nodes = {i}, .n = 1};
    for (int j = i + 1; j < f->g->nforward && g.n < MAX_PARTS; j++)
      if (f->group_of[j] < 0 && is_linear(f, j) && joins_group(f, &g, i, j)) g.nodes[g.n++] = j;
    if (g.n < 2) continue;
    for (int k = 0; k < g.n; k++) f->group_of[g.nodes[k]] = f->ngroups;
    f->groups[f->ngroups++] = g;
  }
}

/* ---- the joined tensors --------------------------------------------------------------------- */

/* Length of the longest common prefix of a and b that ends with a '.' (0 when none). */
static int dotted_prefix(const char *a, const char *b) {
  int n = 0;
  for (int i = 0; a[i] && a[i] == b[i]; i++)
    if (a[i] == '.') n = i + 1;
  return n;
}

/* Length of the longest common suffix of a and b that starts with a '.' (0 when none). */
static int dotted_suffix(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b), n = 0;
  for (int i = 1; i <= la && i <= lb && a[la - i] == b[lb - i]; i++)
    if (a[la - i] == '.') n = i;
  return n;
}

/* "attn.q.weight", "attn.k.weight", "attn.v.weight" -> "attn.q+k+v" and, with the suffix,
 * ".weight". */
static void joined_name(const char *const *names, int n, int with_suffix, char *buf, int len) {
  int prefix = (int)strlen(names[0]), suffix = prefix;
  for (int k = 1; k < n; k++) {
    int p = dotted_prefix(names[0], names[k]), s = dotted_suffix(names[0], names[k]);
    if (p < prefix) prefix = p;
    if (s < suffix) suffix = s;
  }
  int used = snprintf(buf, len, "%.*s", prefix, names[0]);
  for (int k = 0; k < n && used < len; k++) {
    int middle = (int)strlen(names[k]) - prefix - suffix;
    if (middle < 0) middle = 0;
    used += snprintf(buf + used, len - used, "%s%.*s", k ? "+" : "", middle, names[k] + prefix);
  }
  if (with_suffix && used < len)
    snprintf(buf + used, len - used, "%s", names[0] + strlen(names[0]) - suffix);
}

/* The dim of the joined output: the members' output dims by name, "qdim+kvdim+kvdim"; -1 when
 * that name is taken by another size. */
static int joined_dim(Fusing *f, const Group *g) {
  int64_t size = 0, granule = 0;
  char name[NAME_LEN];
  int used = 0;
  for (int k = 0; k < g->n; k++) {
    const Dim *d = &f->m->dims[weight_of(f, g->nodes[k])->dims[0]];
    size += d->size;
    granule = granule == 0 || d->granule == granule ? d->granule : 1;
    used += snprintf(name + used, sizeof name - (size_t)used, "%s%s", k ? "+" : "", d->name);
    if (used >= (int)sizeof name) return -1;
  }
  int dim = model_dim(f->m, name, size, granule);
  if (dim >= 0) f->m->dims[dim].of_parts = 1;
  return dim;
}

/* One tensor for the group's weights: a join of their parameters, each rank's shares side by
 * side. */
static int joined_weight(Fusing *f, const Group *g, int dim) {
  const char *names[MAX_PARTS];
  ParamJoin join = {.n = g->n};
  for (int k = 0; k < g->n; k++) {
    join.params[k] = weight_of(f, g->nodes[k])->param;
    names[k] = f->m->params[join.params[k]].name;
  }
  char name[NAME_LEN];
  joined_name(names, g->n, 1, name, sizeof name);
  f->m->joins = realloc(f->m->joins, (size_t)(f->m->njoins + 1) * sizeof *f->m->joins);
  f->m->joins[f->m->njoins] = join;
  Tensor first = *weight_of(f, g->nodes[0]);
  int dims[2] = {dim, first.dims[1]};
  int t = graph_tensor(f->g, T_PARAM, first.dtype, 2, dims, name);
  f->g->tensors[t].param = join.params[0];
  f->g->tensors[t].join = f->m->njoins++;
  f->g->tensors[t].layout = first.layout;
  return t;
}

/* The joined output: the members' outputs side by side along the last axis. */
static int joined_output(Fusing *f, const Group *g, int dim) {
  const char *names[MAX_PARTS];
  for (int k = 0; k < g->n; k++) names[k] = f->m->params[weight_of(f, g->nodes[k])->param].name;
  char name[NAME_LEN];
  joined_name(names, g->n, 0, name, sizeof name);
  Tensor first = f->g->tensors[f->g->nodes[g->nodes[0]].out[0]];
  first.dims[first.ndim - 1] = dim;
  int t = graph_tensor(f->g, T_ACT, first.dtype, first.ndim, first.dims, name);
  f->g->tensors[t].layout = first.layout;
  return t;
}

/* ---- the graph rewritten -------------------------------------------------------------------- */

/* The joined output holds, on each rank, its share of each member's output side by side: a group
 * of the members' shares per piece of the split last axis (tp of them, or fewer when key/value
 * heads are held by several ranks each), one group of the whole outputs when it is not split. */
static PartAttr parts_of(const Fusing *f, const Node *old, const Group *g, int whole) {
  const Tensor *y = &f->g->tensors[whole];
  int split = y->layout.kind == LAYOUT_S && y->layout.axis == y->ndim - 1;
  PartAttr a = {.groups = split ? layout_pieces(y->layout, f->tp) : 1, .nparts = g->n};
  for (int k = 0; k < g->n; k++) {
    const Tensor *out = &f->g->tensors[old[g->nodes[k]].out[0]];
    a.sizes[k] = f->m->dims[out->dims[out->ndim - 1]].size / a.groups;
  }
  return a;
}

/* The group's one GEMM, then each member's output split off it, where the first member was. */
static void emit_group(Fusing *f, const Node *old, const Group *g, int weight, int whole) {
  Node mm = old[g->nodes[0]];
  mm.in[1] = weight;
  mm.out[0] = whole;
  graph_node(f->g, &mm);
  PartAttr parts = parts_of(f, old, g, whole);
  for (int k = 0; k < g->n; k++) {
    const Node *member = &old[g->nodes[k]];
    Node s = node_new(OP_SPLIT, 1, &whole);
    s.a.parts = parts;
    s.a.parts.part = k;
    s.nout = 1;
    s.out[0] = member->out[0];
    memcpy(s.where, member->where, sizeof s.where);
    graph_node(f->g, &s);
  }
}

/* Each group's joined weight and output, then the forward graph again with each group's GEMMs as
 * one; a group whose joined dim cannot be named stays as it was. Returns the GEMMs joined. */
static int rewrite(Fusing *f) {
  int weight[f->ngroups + 1], whole[f->ngroups + 1], fused = 0;
  for (int k = 0; k < f->ngroups; k++) {
    int dim = joined_dim(f, &f->groups[k]);
    weight[k] = dim < 0 ? -1 : joined_weight(f, &f->groups[k], dim);
    whole[k] = dim < 0 ? -1 : joined_output(f, &f->groups[k], dim);
    fused += dim < 0 ? 0 : f->groups[k].n;
  }
  Graph *g = f->g;
  Node *old = g->nodes;
  int count = g->nnodes;
  g->nodes = NULL, g->nnodes = g->nodes_cap = 0;
  for (int i = 0; i < count; i++) {
    int k = f->group_of[i];
    if (k < 0 || weight[k] < 0) graph_node(g, &old[i]);
    else if (f->groups[k].nodes[0] == i) emit_group(f, old, &f->groups[k], weight[k], whole[k]);
  }
  free(old);
  g->nforward = g->nnodes;
  return fused;
}

static int fuse_graph(Model *m, Graph *g, int tp) {
  Fusing f = {.m = m, .g = g, .tp = tp};
  f.group_of = malloc(((size_t)g->nnodes + 1) * sizeof *f.group_of);
  f.groups = malloc(((size_t)g->nnodes + 1) * sizeof *f.groups);
  for (int i = 0; i < g->nnodes; i++) f.group_of[i] = -1;
  find_groups(&f);
  int fused = rewrite(&f);
  free(f.group_of);
  free(f.groups);
  return fused;
}

int fuse_gemms(Model *m, int tp) {
  return fuse_graph(m, &m->embed, tp) + fuse_graph(m, &m->block, tp) + fuse_graph(m, &m->head, tp);
}
