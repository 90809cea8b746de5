/* layers.c: layers that differ. A block function that reads its layer index (L.layer) is traced
 * once per layer; each trace must make the graph of layer 0, node for node, except for the
 * options of its attention (sliding window, softcap, scale, rotary theta), which are kept per
 * layer: one generated block function serves every layer and reads its layer's options from a
 * table. */
#include "front/layers.h"

#include <stdlib.h>
#include <string.h>

static LayerAttn options_of(const AttnAttr *a) {
  return (LayerAttn){a->window, a->softcap, a->scale, a->rope_theta};
}

static int same_options(const LayerAttn *a, const LayerAttn *b) {
  return a->window == b->window && a->softcap == b->softcap && a->scale == b->scale &&
         a->rope_theta == b->rope_theta;
}

/* The block's attention nodes, in order; one row of m->layer_attn each. */
static int attention_nodes(const Graph *g) {
  int n = 0;
  for (int i = 0; i < g->nforward; i++) n += g->nodes[i].op == OP_ATTENTION;
  return n;
}

/* Layer 0's options fill column 0 of a table with a row per attention node (within the model's
 * budget: -1 when it refuses). */
static int start_table(Model *m) {
  const Graph *g = &m->block;
  int rows = attention_nodes(g);
  size_t bytes = (size_t)(rows ? rows : 1) * (size_t)m->layers * sizeof *m->layer_attn;
  m->layer_attn = budget_realloc(m->budget, NULL, 0, bytes);
  if (!m->layer_attn) return -1;
  memset(m->layer_attn, 0, bytes);
  m->nlayer_attn = rows;
  for (int i = 0, row = 0; i < g->nforward; i++)
    if (g->nodes[i].op == OP_ATTENTION)
      m->layer_attn[row++ * m->layers] = options_of(&g->nodes[i].a.attn);
  return 0;
}

/* Two nodes alike but for their place in the model file and their attention options. */
static int same_node(const Node *a, const Node *b) {
  Node x = *a, y = *b;
  memset(x.where, 0, sizeof x.where);
  memset(y.where, 0, sizeof y.where);
  if (x.op == OP_ATTENTION) {
    x.a.attn.window = y.a.attn.window = 0;
    x.a.attn.softcap = y.a.attn.softcap = x.a.attn.scale = y.a.attn.scale = 0;
    x.a.attn.rope_theta = y.a.attn.rope_theta = 0;
  }
  return memcmp(&x, &y, sizeof x) == 0;
}

static int same_tensor(const Tensor *a, const Tensor *b) {
  return a->kind == b->kind && a->dtype == b->dtype && a->ndim == b->ndim && a->param == b->param &&
         memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof *a->dims) == 0;
}

int layers_compare(Model *m, const Graph *variant, int layer, Diag *d) {
  const Graph *g = &m->block;
  if (!m->layer_attn && start_table(m))
    return diag(d, "%s: layer %d: no memory left for the options of %d layers", m->file, layer,
                m->layers);
  int count = variant->nforward < g->nforward ? variant->nforward : g->nforward;
  for (int i = 0; i < count; i++)
    if (!same_node(&g->nodes[i], &variant->nodes[i]))
      return diag(
          d,
          "%s: layer %d's block differs from layer 0's here (%s); layers may differ only in their "
          "attention's window, softcap, scale and rope_theta",
          variant->nodes[i].where, layer, op_name(variant->nodes[i].op));
  if (variant->nforward != g->nforward || variant->ntensors != g->ntensors)
    return diag(
        d,
        "%s: layer %d's block makes %d operations, layer 0's %d; layers may differ only in their "
        "attention's window, softcap, scale and rope_theta",
        m->file, layer, variant->nforward, g->nforward);
  for (int t = 0; t < g->ntensors; t++)
    if (!same_tensor(&g->tensors[t], &variant->tensors[t]))
      return diag(
          d,
          "%s: layer %d's block has a tensor %s unlike layer 0's; layers may differ only in their "
          "attention's window, softcap, scale and rope_theta",
          m->file, layer, variant->tensors[t].name);
  for (int i = 0, row = 0; i < variant->nforward; i++)
    if (variant->nodes[i].op == OP_ATTENTION)
      m->layer_attn[row++ * m->layers + layer] = options_of(&variant->nodes[i].a.attn);
  return 0;
}

const char *const layer_option_names[LAYER_OPTIONS] = {"window", "softcap", "scale", "rope_theta"};

double layers_option(const Model *m, int row, int k, int layer) {
  const LayerAttn *o = &m->layer_attn[row * m->layers + layer];
  double v[LAYER_OPTIONS] = {(double)o->window, o->softcap, o->scale, o->rope_theta};
  return v[k];
}

int layers_option_differs(const Model *m, int row, int k) {
  for (int l = 1; l < m->layers; l++)
    if (layers_option(m, row, k, l) != layers_option(m, row, k, 0)) return 1;
  return 0;
}

void layers_finish(Model *m) {
  if (!m->layer_attn) return;
  Graph *g = &m->block;
  int kept = 0;
  for (int i = 0, row = 0; i < g->nforward; i++) {
    if (g->nodes[i].op != OP_ATTENTION) continue;
    const LayerAttn *options = &m->layer_attn[row++ * m->layers];
    int differ = 0;
    for (int l = 1; l < m->layers; l++) differ |= !same_options(&options[0], &options[l]);
    if (!differ) continue;
    /* rows of nodes that differ move up, so that the table holds only them */
    memmove(&m->layer_attn[kept * m->layers], options, (size_t)m->layers * sizeof *options);
    g->nodes[i].a.attn.per_layer = kept++;
  }
  m->nlayer_attn = kept;
}
