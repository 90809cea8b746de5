/* shape.c: shape inference: dims must agree in size; outputs take their dims from the inputs. */
#include "ir/shape.h"

#include <string.h>

static const Tensor *input(const Graph *g, const Node *n, int i) { return &g->tensors[n->in[i]]; }

static int64_t dim_size(const Model *m, int dim) { return m->dims[dim].size; }

static const char *shape_of(const Model *m, const Tensor *t, char *buf, int len) {
  char names[200];
  shape_string(m, t->ndim, t->dims, names, sizeof names);
  int used = snprintf(buf, len, "%s = (", names);
  for (int i = 0; i < t->ndim && used < len; i++)
    used += snprintf(buf + used, len - used, "%s%lld", i ? ", " : "",
                     (long long)dim_size(m, t->dims[i]));
  if (used < len) snprintf(buf + used, len - used, ")");
  return buf;
}

static int mismatch(const Model *m, const Graph *g, const Node *n, int a, int b, const char *why,
                    Diag *d) {
  char sa[300], sb[300], op[64];
  if (n->op == OP_EW)
    snprintf(op, sizeof op, "elementwise %s", expr_op_name(n->expr.n[expr_root(&n->expr)].op));
  else snprintf(op, sizeof op, "%s", op_name(n->op));
  return diag(d, "%s: %s: shapes %s and %s do not fit (%s)", n->where, op,
              shape_of(m, input(g, n, a), sa, sizeof sa),
              shape_of(m, input(g, n, b), sb, sizeof sb), why);
}

static void set_out(Shapes *s, int k, int ndim, const int *dims, DType dt) {
  s->ndim[k] = ndim;
  memcpy(s->dims[k], dims, (size_t)ndim * sizeof *dims);
  s->dtype[k] = dt;
  if (s->nout < k + 1) s->nout = k + 1;
}

static int last(const Tensor *t) { return t->dims[t->ndim - 1]; }

/* C = op(A)·op(B). A [..., K] (A's leading dims flattened to M), B [N, K] with trans_b or [K,
 * N]; with trans_a, A [..., M] and B [..., N] share leading dims and C is [M, N] (a weight
 * gradient). */
static int infer_matmul(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *a = input(g, n, 0), *b = input(g, n, 1);
  if (a->ndim < 1 || b->ndim < 1) return mismatch(m, g, n, 0, 1, "operands need an axis", d);
  if (n->a.mm.trans_a) {
    if (a->ndim != b->ndim) return mismatch(m, g, n, 0, 1, "leading axes differ", d);
    for (int i = 0; i + 1 < a->ndim; i++)
      if (dim_size(m, a->dims[i]) != dim_size(m, b->dims[i]))
        return mismatch(m, g, n, 0, 1, "leading axes differ", d);
    int dims[2] = {last(a), last(b)};
    set_out(s, 0, 2, dims, DT_REAL);
    return 0;
  }
  if (b->ndim != 2) return mismatch(m, g, n, 0, 1, "the right operand must be a matrix", d);
  int k = n->a.mm.trans_b ? b->dims[1] : b->dims[0];
  int nn = n->a.mm.trans_b ? b->dims[0] : b->dims[1];
  if (dim_size(m, last(a)) != dim_size(m, k))
    return mismatch(m, g, n, 0, 1, "inner dims differ", d);
  int dims[MAX_DIMS];
  memcpy(dims, a->dims, sizeof dims);
  dims[a->ndim - 1] = nn;
  set_out(s, 0, a->ndim, dims, DT_REAL);
  return 0;
}

/* Elementwise: inputs align from the right; each must match the widest input's trailing dims. */
static int infer_ew(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  int widest = 0;
  for (int i = 1; i < n->nin; i++)
    if (input(g, n, i)->ndim > input(g, n, widest)->ndim) widest = i;
  const Tensor *w = input(g, n, widest);
  for (int i = 0; i < n->nin; i++) {
    const Tensor *t = input(g, n, i);
    if (t->dtype != DT_REAL)
      return mismatch(m, g, n, i, widest, "integer tensors take no arithmetic", d);
    for (int j = 0; j < t->ndim; j++)
      if (dim_size(m, t->dims[t->ndim - 1 - j]) != dim_size(m, w->dims[w->ndim - 1 - j]))
        return mismatch(m, g, n, widest, i, "trailing dims differ", d);
  }
  set_out(s, 0, w->ndim, w->dims, DT_REAL);
  return 0;
}

/* The width a norm normalises: the last dim, or its groups. */
static int64_t norm_width(const Model *m, const Tensor *x, const NormAttr *a) {
  return a->group ? a->group : dim_size(m, last(x));
}

/* x -> y like x, and the statistics per row: [leading dims], or with groups [leading dims,
 * groups]. */
static int infer_norm(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *x = input(g, n, 0);
  const NormAttr *a = &n->a.norm;
  for (int i = 1; i < n->nin; i++) {
    const Tensor *p = input(g, n, i);
    if (p->ndim != 1 || dim_size(m, p->dims[0]) != norm_width(m, x, a))
      return mismatch(m, g, n, 0, i,
                      a->group ? "the norm's weight must match its group"
                               : "the norm's weight must match the last dim",
                      d);
  }
  set_out(s, 0, x->ndim, x->dims, DT_REAL);
  int stats[MAX_DIMS], nstats = x->ndim - 1;
  memcpy(stats, x->dims, sizeof stats);
  if (a->group) {
    const Dim *w = &m->dims[last(x)];
    char name[NAME_LEN];
    snprintf(name, sizeof name, "%.40s/%d", w->name, a->group);
    int64_t granule = w->granule % a->group == 0 ? w->granule / a->group : 1;
    if ((stats[nstats++] = model_dim(m, name, w->size / a->group, granule)) < 0)
      return diag(d, "%s: norm: a dim named '%s' already has another size", n->where, name);
  }
  int k = 1;
  if (a->kind == NORM_LAYER) set_out(s, k++, nstats, stats, DT_STATS); /* mean */
  set_out(s, k, nstats, stats, DT_STATS);                              /* rstd */
  return 0;
}

/* q [b, s, heads·d], k and v [b, s, kv_heads·d] -> o like q, lse [b, heads, s]. */
static int infer_attention(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *q = input(g, n, 0), *k = input(g, n, 1), *v = input(g, n, 2);
  const AttnAttr *at = &n->a.attn;
  if (q->ndim != 3)
    return mismatch(m, g, n, 0, 1, "attention takes [batch, seq, heads·head_dim]", d);
  if (k->ndim != 3 || v->ndim != 3)
    return mismatch(m, g, n, 1, 2, "attention takes [batch, seq, heads·head_dim]", d);
  for (int i = 0; i < 2; i++)
    if (dim_size(m, q->dims[i]) != dim_size(m, k->dims[i]) ||
        dim_size(m, k->dims[i]) != dim_size(m, v->dims[i]))
      return mismatch(m, g, n, 0, 1, "batch and sequence must agree", d);
  if (dim_size(m, last(q)) != (int64_t)at->heads * at->head_dim)
    return mismatch(m, g, n, 0, 1, "q's width is not heads·head_dim", d);
  if (dim_size(m, last(k)) != (int64_t)at->kv_heads * at->head_dim ||
      dim_size(m, last(v)) != dim_size(m, last(k)))
    return mismatch(m, g, n, 1, 2, "k and v must be kv_heads·head_dim wide", d);
  if (at->window > dim_size(m, q->dims[1]))
    return diag(d,
                "%s: attention: a sliding window of %lld positions is longer than the sequence "
                "(%lld); choose a "
                "window of at most %lld (equal to the sequence: plain causal attention)",
                n->where, (long long)at->window, (long long)dim_size(m, q->dims[1]),
                (long long)dim_size(m, q->dims[1]));
  set_out(s, 0, 3, q->dims, DT_REAL);
  int heads = model_dim(m, "heads", at->heads, 1);
  if (heads < 0)
    return diag(d, "%s: attention: a dim named 'heads' already has another size", n->where);
  int lse[3] = {q->dims[0], heads, q->dims[1]};
  set_out(s, 1, 3, lse, DT_STATS);
  return 0;
}

/* x [b, s, heads·head_dim] -> like x. */
static int infer_rope(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *x = input(g, n, 0);
  if (x->ndim != 3 || dim_size(m, last(x)) % n->a.rope.head_dim != 0)
    return mismatch(m, g, n, 0, 0, "rope takes [batch, seq, heads·head_dim]", d);
  set_out(s, 0, 3, x->dims, DT_REAL);
  return 0;
}

/* The dim of a part: "<dim>.<part>" of groups·size elements, a group's run its granule; or for a
 * join, "<first dim>+" of groups·period. */
static int part_dim(Model *m, const Dim *from, const char *suffix, int64_t size, int64_t granule) {
  char name[NAME_LEN];
  snprintf(name, sizeof name, "%.40s%.8s", from->name, suffix);
  int d = model_dim(m, name, size, granule);
  if (d >= 0) m->dims[d].of_parts = 1;
  return d;
}

static int64_t part_period(const PartAttr *a) {
  int64_t period = 0;
  for (int i = 0; i < a->nparts; i++) period += a->sizes[i];
  return period;
}

/* x [.., groups·period] -> part [.., groups·sizes[part]]. */
static int infer_split(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *x = input(g, n, 0);
  const PartAttr *a = &n->a.parts;
  int64_t width = dim_size(m, last(x));
  if (a->groups < 1 || a->part < 0 || a->part >= a->nparts || width % a->groups != 0 ||
      width / a->groups != part_period(a))
    return diag(d, "%s: split: the last dim (%lld) is not %d groups of the parts' %lld", n->where,
                (long long)width, a->groups, (long long)part_period(a));
  int dims[MAX_DIMS];
  int64_t partial = a->groups * a->sizes[a->part];
  memcpy(dims, x->dims, sizeof dims);
  char suffix[16];
  snprintf(suffix, sizeof suffix, ".%d", a->part);
  if ((dims[x->ndim - 1] = part_dim(m, &m->dims[last(x)], suffix, partial, a->sizes[a->part])) < 0)
    return diag(d, "%s: split: a dim named like its part already has another size", n->where);
  set_out(s, 0, x->ndim, dims, DT_REAL);
  return 0;
}

/* The dim of a join: "<first part's dim>+", or where another join of another size holds that
 * name (the same first part beside others), its parts' dims joined, "a+b+c". */
static int join_dim(Model *m, const Graph *g, const Node *n, int64_t size, int64_t granule) {
  int d = part_dim(m, &m->dims[last(input(g, n, 0))], "+", size, granule);
  if (d >= 0) return d;
  char name[NAME_LEN] = "";
  for (int i = 0, used = 0; i < n->nin && used < NAME_LEN; i++)
    used += snprintf(name + used, sizeof name - (size_t)used, "%s%s", i ? "+" : "",
                     m->dims[last(input(g, n, i))].name);
  d = model_dim(m, name, size, granule);
  if (d >= 0) m->dims[d].of_parts = 1;
  return d;
}

/* parts [.., groups·sizes[i]] (leading dims alike) -> [.., groups·period]. */
static int infer_concat(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *x = input(g, n, 0);
  const PartAttr *a = &n->a.parts;
  for (int i = 1; i < n->nin; i++) {
    const Tensor *t = input(g, n, i);
    if (t->ndim != x->ndim) return mismatch(m, g, n, 0, i, "concat: the tensors' axes differ", d);
    for (int k = 0; k + 1 < x->ndim; k++)
      if (dim_size(m, t->dims[k]) != dim_size(m, x->dims[k]))
        return mismatch(m, g, n, 0, i, "concat: leading dims differ", d);
  }
  int dims[MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  int64_t period = part_period(a);
  if ((dims[x->ndim - 1] = join_dim(m, g, n, a->groups * period, period)) < 0)
    return diag(d,
                "%s: concat: its result's dim, named after its parts' dims, already has another "
                "size; name a part's dim apart (plait.dim(n, \"name\"))",
                n->where);
  set_out(s, 0, x->ndim, dims, DT_REAL);
  return 0;
}

/* The node that made tensor t when it is output `k` of an `op` node, else NULL. */
static const Node *made_by(const Graph *g, int t, OpKind op, int k) {
  int p = g->tensors[t].producer;
  if (p < 0 || g->nodes[p].op != op || g->nodes[p].nout <= k || g->nodes[p].out[k] != t)
    return NULL;
  return &g->nodes[p];
}

static int same_leading(const Model *m, const Tensor *a, const Tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i + 1 < a->ndim; i++)
    if (dim_size(m, a->dims[i]) != dim_size(m, b->dims[i])) return 0;
  return 1;
}

/* x [.., E] -> values [.., k] (real), indices [.., k] (int), k's dim the node's k_dim. */
static int infer_topk(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *x = input(g, n, 0);
  if (x->ndim < 1 || x->dtype != DT_REAL)
    return diag(d, "%s: topk takes a real tensor of at least one axis", n->where);
  int k_dim = n->a.moe.k_dim;
  if (k_dim < 0 || k_dim >= m->ndims || dim_size(m, k_dim) != n->a.moe.topk ||
      n->a.moe.topk < 1 || n->a.moe.topk > dim_size(m, last(x)))
    return diag(d, "%s: topk: k = %d must be from 1 to the last dim's %lld", n->where,
                n->a.moe.topk, (long long)dim_size(m, last(x)));
  int dims[MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  dims[x->ndim - 1] = k_dim;
  set_out(s, 0, x->ndim, dims, DT_REAL);
  set_out(s, 1, x->ndim, dims, DT_INT);
  return 0;
}

/* The dim of the routed rows: every token's k of them, "routed_<k's dim>". */
static int routed_dim(Model *m, const Tensor *slots) {
  char name[NAME_LEN];
  int64_t rows = 1;
  for (int i = 0; i < slots->ndim; i++) rows *= dim_size(m, slots->dims[i]);
  snprintf(name, sizeof name, "routed_%.50s", m->dims[last(slots)].name);
  return model_dim(m, name, rows, 1);
}

/* indices [.., k] of a topk over E experts -> slots like them (int), counts [E] (int). */
static int infer_route(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Node *topk = made_by(g, n->in[0], OP_TOPK, 1);
  if (!topk) return diag(d, "%s: route takes the indices a plait.topk gave", n->where);
  const Tensor *x = input(g, n, 0), *scores = &g->tensors[topk->in[0]];
  if (n->nin > 1 && (input(g, n, 1)->dtype != DT_REAL || !same_leading(m, x, input(g, n, 1)) ||
                     dim_size(m, last(input(g, n, 1))) != dim_size(m, last(x))))
    return mismatch(m, g, n, 0, 1, "route: indices [tokens.., k] and priority [tokens.., k]", d);
  set_out(s, 0, x->ndim, x->dims, DT_INT);
  set_out(s, 1, 1, &scores->dims[scores->ndim - 1], DT_INT);
  return routed_dim(m, x) < 0
             ? diag(d, "%s: route: a dim named like its rows already has another size", n->where)
             : 0;
}

/* The route that made slots (its input 1 here), or NULL after a diag naming `what`. */
static const Node *route_of(const Graph *g, const Node *n, int input, const char *what, Diag *d) {
  const Node *r = made_by(g, n->in[input], OP_ROUTE, input == 1 ? 0 : 1);
  if (!r) diag(d, "%s: %s takes the %s a plait.route gave", n->where, what,
               input == 1 ? "slots" : "counts");
  return r;
}

/* x [.., D], slots [.., k] -> rows [routed, D]. */
static int infer_dispatch(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  if (!route_of(g, n, 1, "dispatch", d)) return -1;
  const Tensor *x = input(g, n, 0), *slots = input(g, n, 1);
  if (x->dtype != DT_REAL || !same_leading(m, x, slots))
    return mismatch(m, g, n, 0, 1, "dispatch: x [tokens.., width] and slots [tokens.., k]", d);
  int dims[2] = {routed_dim(m, slots), last(x)};
  set_out(s, 0, 2, dims, DT_REAL);
  return 0;
}

/* rows [routed, K] · W [E, K, N] (or [E, N, K]) with counts [E] -> [routed, N]; W a parameter. */
static int infer_grouped_matmul(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  if (!route_of(g, n, 2, "grouped_matmul", d)) return -1;
  const Tensor *a = input(g, n, 0), *w = input(g, n, 1), *counts = input(g, n, 2);
  int tb = n->a.moe.trans_b;
  if (w->kind != T_PARAM || w->ndim != 3 || a->ndim != 2)
    return mismatch(m, g, n, 0, 1, "grouped_matmul: rows [routed, in] and a parameter [experts, "
                    "in, out] ([experts, out, in] with transpose)", d);
  if (dim_size(m, w->dims[0]) != dim_size(m, counts->dims[0]))
    return mismatch(m, g, n, 1, 2, "grouped_matmul: one matrix per expert", d);
  if (dim_size(m, last(a)) != dim_size(m, w->dims[tb ? 2 : 1]))
    return mismatch(m, g, n, 0, 1, "inner dims differ", d);
  int dims[2] = {a->dims[0], w->dims[tb ? 1 : 2]};
  set_out(s, 0, 2, dims, DT_REAL);
  return 0;
}

/* rows [routed, D], slots [.., k], weights [.., k] -> [.., D]. */
static int infer_combine(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  if (!route_of(g, n, 1, "combine", d)) return -1;
  const Tensor *rows = input(g, n, 0), *slots = input(g, n, 1);
  if (rows->ndim != 2 || rows->dtype != DT_REAL ||
      dim_size(m, rows->dims[0]) != tensor_elems(m, slots))
    return mismatch(m, g, n, 0, 1, "combine: rows [routed, width] of the route's slots", d);
  if (n->nin > 2 && (input(g, n, 2)->dtype != DT_REAL || input(g, n, 2)->ndim != slots->ndim ||
                     tensor_elems(m, input(g, n, 2)) != tensor_elems(m, slots)))
    return mismatch(m, g, n, 1, 2, "combine: a weight for each slot", d);
  int dims[MAX_DIMS];
  memcpy(dims, slots->dims, sizeof dims);
  dims[slots->ndim - 1] = last(rows);
  set_out(s, 0, slots->ndim, dims, DT_REAL);
  return 0;
}

/* counts [E] of a route -> fractions [E] (real). */
static int infer_fractions(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  if (!route_of(g, n, 0, "fractions", d)) return -1;
  const Tensor *counts = input(g, n, 0);
  (void)m;
  set_out(s, 0, 1, counts->dims, DT_REAL);
  return 0;
}

/* x, term (both real) -> x's shape. */
static int infer_loss_term(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *x = input(g, n, 0);
  if (x->dtype != DT_REAL || input(g, n, 1)->dtype != DT_REAL)
    return mismatch(m, g, n, 0, 1, "add_loss takes a real tensor and a real loss term", d);
  set_out(s, 0, x->ndim, x->dims, DT_REAL);
  return 0;
}

static int infer_embedding(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *ids = input(g, n, 0), *table = input(g, n, 1);
  if (ids->dtype != DT_INT) return mismatch(m, g, n, 0, 1, "ids must be integer tokens", d);
  if (table->ndim != 2) return mismatch(m, g, n, 0, 1, "the table must be [vocab, width]", d);
  if (ids->ndim >= MAX_DIMS)
    return mismatch(m, g, n, 0, 1, "the ids leave no room for the width's axis", d);
  int dims[MAX_DIMS];
  memcpy(dims, ids->dims, sizeof dims);
  dims[ids->ndim] = table->dims[1];
  set_out(s, 0, ids->ndim + 1, dims, DT_REAL);
  return 0;
}

static int infer_xent(Model *m, const Graph *g, const Node *n, Shapes *s, Diag *d) {
  const Tensor *z = input(g, n, 0), *t = input(g, n, 1);
  if (t->dtype != DT_INT) return mismatch(m, g, n, 0, 1, "targets must be integer tokens", d);
  if (z->ndim != t->ndim + 1)
    return mismatch(m, g, n, 0, 1, "logits need one axis more than targets", d);
  for (int i = 0; i < t->ndim; i++)
    if (dim_size(m, z->dims[i]) != dim_size(m, t->dims[i]))
      return mismatch(m, g, n, 0, 1, "leading dims differ", d);
  set_out(s, 0, 0, NULL, DT_STATS);
  set_out(s, 1, t->ndim, t->dims, DT_STATS);
  return 0;
}

int shape_infer(Model *m, const Graph *g, const Node *n, Shapes *out, Diag *d) {
  memset(out, 0, sizeof *out);
  switch (n->op) {
  case OP_MATMUL: return infer_matmul(m, g, n, out, d);
  case OP_EW: return infer_ew(m, g, n, out, d);
  case OP_NORM: return infer_norm(m, g, n, out, d);
  case OP_ATTENTION: return infer_attention(m, g, n, out, d);
  case OP_EMBEDDING: return infer_embedding(m, g, n, out, d);
  case OP_ROPE: return infer_rope(m, g, n, out, d);
  case OP_SPLIT: return infer_split(m, g, n, out, d);
  case OP_CONCAT: return infer_concat(m, g, n, out, d);
  case OP_XENT: return infer_xent(m, g, n, out, d);
  case OP_TOPK: return infer_topk(m, g, n, out, d);
  case OP_ROUTE: return infer_route(m, g, n, out, d);
  case OP_DISPATCH: return infer_dispatch(m, g, n, out, d);
  case OP_GROUPED_MATMUL: return infer_grouped_matmul(m, g, n, out, d);
  case OP_COMBINE: return infer_combine(m, g, n, out, d);
  case OP_FRACTIONS: return infer_fractions(m, g, n, out, d);
  case OP_LOSS_TERM: return infer_loss_term(m, g, n, out, d);
  case OP_ALLREDUCE: case OP_ALLGATHER: case OP_REDUCESCATTER: case OP_SLICE: {
    const Tensor *x = input(g, n, 0);
    set_out(out, 0, x->ndim, x->dims, x->dtype);
    return 0;
  }
  case OP_REDUCE:
  case OP_NORM_BWD:
  case OP_ATTENTION_BWD:
  case OP_EMBEDDING_BWD:
  case OP_XENT_BWD:
  case OP_TOPK_BWD:
  case OP_COMBINE_BWD:
  case OP_LOSS_TERM_BWD:
  case OP_EXPERT_COUNTS: /* made by passes/experts.c with their shapes */
  case OP_EXPERT_SEND:
  case OP_EXPERT_RETURN:
    break;
  }
  return diag(d, "%s: shape inference does not cover %s", n->where, op_name(n->op));
}

static int same_sizes(const Model *m, int ndim, const int *a, const int *b) {
  for (int i = 0; i < ndim; i++)
    if (dim_size(m, a[i]) != dim_size(m, b[i])) return 0;
  return 1;
}

int shape_check(Model *m, const Graph *g, Diag *d) {
  for (int i = 0; i < g->nforward; i++) {
    const Node *n = &g->nodes[i];
    Shapes s;
    if (shape_infer(m, g, n, &s, d)) return -1;
    for (int k = 0; k < n->nout; k++) {
      const Tensor *t = &g->tensors[n->out[k]];
      if (t->ndim != s.ndim[k] || !same_sizes(m, t->ndim, t->dims, s.dims[k]))
        return diag(d, "%s: %s: output %d of stage %s has a shape the inputs do not give", n->where,
                    op_name(n->op), k, g->name);
    }
  }
  return 0;
}

static void print_graph(const Model *m, const Graph *g, FILE *f) {
  fprintf(f, "stage %s\n", g->name);
  for (int i = 0; i < g->ntensors; i++) {
    const Tensor *t = &g->tensors[i];
    if (t->kind == T_GRAD || t->kind == T_PARAM_GRAD) continue;
    char shape[300];
    fprintf(f, "  %-28s %s\n", t->name, shape_of(m, t, shape, sizeof shape));
  }
}

void shape_print(const Model *m, FILE *f) {
  print_graph(m, &m->embed, f);
  print_graph(m, &m->block, f);
  print_graph(m, &m->head, f);
}
