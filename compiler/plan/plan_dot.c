/* plan_dot.c: one block's graph for Graphviz: tensors with shapes and layouts, primitives, and the
 * inserted collectives highlighted; forward and backward in two columns of colour. */
#include <stdbool.h>

#include "escape.h"
#include "plan/plan.h"

/* The name, then its shape and layout on a second line. */
static void tensor_label(const Model *m, const Tensor *t, char *buf, int len) {
  char shape[200], layout[16], name[ESCAPED_SIZE(NAME_LEN)];
  shape_string(m, t->ndim, t->dims, shape, sizeof shape);
  layout_string(t->layout, layout, sizeof layout);
  snprintf(buf, len, "%s\\n%s %s", escape(ESC_DOT, t->name, name, sizeof name), shape, layout);
}

static const char *tensor_color(const Tensor *t) {
  switch (t->layout.kind) {
  case LAYOUT_S: return "#cfe8ff";
  case LAYOUT_P: return "#ffd6cc";
  case LAYOUT_NONE: case LAYOUT_R: break;
  }
  return "#ffffff";
}

/* Whether a node reads or writes tensor t: fusion leaves the intermediates of a chain unused. */
static bool tensor_is_used(const Graph *g, int t) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = &g->nodes[i];
    for (int k = 0; k < n->nin; k++) if (n->in[k] == t) return true;
    for (int k = 0; k < n->nout; k++) if (n->out[k] == t) return true;
  }
  return false;
}

static void write_tensors(const Model *m, const Graph *g, FILE *f) {
  for (int i = 0; i < g->ntensors; i++) {
    const Tensor *t = &g->tensors[i];
    if (!tensor_is_used(g, i)) continue;
    char label[ESCAPED_SIZE(NAME_LEN) + 240];
    tensor_label(m, t, label, sizeof label);
    fprintf(f, "  t%d [shape=box, style=\"rounded,filled\", fillcolor=\"%s\", label=\"%s\"%s];\n",
            i, tensor_color(t), label,
            t->kind == T_PARAM || t->kind == T_PARAM_GRAD ? ", fontcolor=\"#555555\"" : "");
  }
}

static void write_nodes(const Graph *g, FILE *f) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = &g->nodes[i];
    const char *fill = n->inserted ? "#ff9f43" : n->backward ? "#e8e0f8" : "#e3f5e1";
    fprintf(f, "  n%d [shape=ellipse, style=filled, fillcolor=\"%s\", label=\"%s%s\"%s];\n", i,
            fill, n->backward ? "bwd " : "", op_name(n->op), n->inserted ? ", penwidth=2" : "");
    for (int k = 0; k < n->nin; k++) fprintf(f, "  t%d -> n%d;\n", n->in[k], i);
    for (int k = 0; k < n->nout; k++) fprintf(f, "  n%d -> t%d;\n", i, n->out[k]);
  }
}

void plan_write_dot(const Plan *p, FILE *f) {
  const Graph *g = &p->model.block;
  char name[ESCAPED_SIZE(NAME_LEN)];
  fprintf(f, "digraph block {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
  fprintf(f,
          "  label=\"%s: one block, tp %d%s. Blue: split S(axis); red: partial sums P; white: "
          "replicated R; "
          "orange: collectives the shard pass and autodiff inserted\";\n",
          escape(ESC_DOT, p->model.name, name, sizeof name), p->par.tp,
          p->par.sequence_parallel ? ", sequence parallel" : "");
  write_tensors(&p->model, g, f);
  write_nodes(g, f);
  fprintf(f, "}\n");
}
