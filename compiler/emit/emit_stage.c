/* emit_stage.c: the forward and backward functions of each stage (embed, one block, head) as C: one
 * runtime or kernel call per node, over buffers at the offsets the memory plan fixed. */
#include <string.h>

#include "emit/emit.h"
#include "escape.h"
#include "front/layers.h"

typedef struct {
  const Emission *e;
  int stage;
  const Graph *g;
  const StageMemory *mem;
  char (*name)[EMIT_NAME_CHARS]; /* per tensor: how the code spells it (emit_names.c) */
  FILE *f;
} StageWriter;

static const char *const stage_names[STAGES] = {"embed", "block", "head"};

/* ---- declarations --------------------------------------------------------------------------- */

/* Does node n become a call? A cross entropy's backward whose forward took the gradient does
 * not. */
static int emits_call(const Node *n) {
  return !(n->op == OP_XENT_BWD && n->a.xent.grad_in_forward);
}

/* Is t read or written by the calls of nodes first..last? An input a node overwrites in place is
 * read through the node's output. */
static int used_in(const Graph *g, int t, int first, int last) {
  for (int i = first; i < last; i++) {
    const Node *n = &g->nodes[i];
    if (!emits_call(n)) continue;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] == t && k != n->inplace) return 1;
    for (int k = 0; k < n->nout; k++) if (n->out[k] == t) return 1;
  }
  return 0;
}

static void shape_comment(const StageWriter *w, const Tensor *t, char *buf, int len) {
  char names[200];
  shape_string(&w->e->plan->model, t->ndim, t->dims, names, sizeof names);
  int used = snprintf(buf, len, "%s", names);
  for (int a = 0; a < t->ndim && used < len; a++)
    used += snprintf(buf + used, len - used, "%s%lld", a ? "×" : " ",
                     (long long)emit_local_dim(w->e->plan, t, a));
  if (t->layout.kind == LAYOUT_S)
    snprintf(buf + used, len - used, ", split on axis %d", t->layout.axis);
}

/* The run-time-sized dim of t's axes (the rows a rank's experts receive), or -1. */
static int held_axis_dim(const StageWriter *w, int t) {
  const Tensor *x = &w->g->tensors[t];
  for (int a = 0; a < x->ndim; a++)
    if (w->e->plan->model.dims[x->dims[a]].worst) return x->dims[a];
  return -1;
}

/* Is t a buffer of the function, saved or scratch, that nodes first..last use? */
static int declared_in(const StageWriter *w, int t, int first, int last) {
  Region r = w->mem->region[t];
  return (r == REGION_SAVED || r == REGION_SCRATCH) && used_in(w->g, t, first, last);
}

static void declare(const StageWriter *w, int first, int last) {
  for (int t = 0; t < w->g->ntensors; t++) {
    Region r = w->mem->region[t];
    if (!declared_in(w, t, first, last) || held_axis_dim(w, t) >= 0) continue;
    char shape[300];
    shape_comment(w, &w->g->tensors[t], shape, sizeof shape);
    if (w->g->tensors[t].dtype != DT_REAL)
      fprintf(w->f, "  %s *%s = (%s *)(%s + %lld); /* %s */\n",
              w->g->tensors[t].dtype == DT_INT ? "int32_t" : "real", w->name[t],
              w->g->tensors[t].dtype == DT_INT ? "int32_t" : "real",
              r == REGION_SAVED ? "saved" : "tmp", (long long)w->mem->offset[t], shape);
    else
      fprintf(w->f, "  act_t *%s = %s + %lld; /* %s */\n", w->name[t],
              r == REGION_SAVED ? "saved" : "tmp", (long long)w->mem->offset[t], shape);
  }
}

/* ---- one node ------------------------------------------------------------------------------- */

static const Tensor *tensor(const StageWriter *w, int t) { return &w->g->tensors[t]; }
static const char *in(const StageWriter *w, const Node *n, int k) { return w->name[n->in[k]]; }
static const char *out(const StageWriter *w, const Node *n, int k) { return w->name[n->out[k]]; }
static int64_t local(const StageWriter *w, int t) {
  return emit_local_elems(w->e->plan, tensor(w, t));
}
static int is_split(const Tensor *t, int axis) {
  return t->layout.kind == LAYOUT_S && t->layout.axis == axis;
}

/* Axes [first, last) of tensor t as one rank holds them, as C (emit_size: B*T*C). */
typedef struct {
  char text[EMIT_SIZE_CHARS];
  int64_t value;
} Size;
static Size axes(const StageWriter *w, int t, int first, int last) {
  Size size = {.value = 1};
  emit_size(w->e, tensor(w, t), first, last, size.text, sizeof size.text);
  for (int a = first; a < last; a++) size.value *= emit_local_dim(w->e->plan, tensor(w, t), a);
  return size;
}
static Size all_axes(const StageWriter *w, int t) { return axes(w, t, 0, tensor(w, t)->ndim); }
static Size last_axis(const StageWriter *w, int t) {
  return axes(w, t, tensor(w, t)->ndim - 1, tensor(w, t)->ndim);
}
static Size leading_axes(const StageWriter *w, int t) {
  return axes(w, t, 0, tensor(w, t)->ndim - 1);
}
static Size number(int64_t n) {
  Size size = {.value = n};
  snprintf(size.text, sizeof size.text, "%lld", (long long)n);
  return size;
}

/* The rows a mixture's experts receive on this rank (dim `held`, from the counts all_counts), then
 * the tensors over them nodes first..last use: in their arena places where the balanced rows'
 * room holds them, else in buffers sized now (rt_expert_rows). */
static void declare_held(const StageWriter *w, int held, int all_counts, int first, int last) {
  const Plan *p = w->e->plan;
  fprintf(w->f, "  const int64_t %s = rt_expert_held(r, %s, %s);\n", w->e->dim_constant[held],
          last_axis(w, all_counts).text, w->name[all_counts]);
  for (int t = 0; t < w->g->ntensors; t++) {
    if (!declared_in(w, t, first, last) || held_axis_dim(w, t) != held) continue;
    const Tensor *x = tensor(w, t);
    const char *type = x->dtype == DT_INT ? "int32_t" : x->dtype == DT_REAL ? "act_t" : "real";
    fprintf(w->f, "  %s *%s = (%s *)rt_expert_rows(r, %s + %lld, %lld, %s%s);\n", type,
            w->name[t], type, w->mem->region[t] == REGION_SAVED ? "saved" : "tmp",
            (long long)w->mem->offset[t], (long long)memplan_room(&p->model, x, p->par.tp),
            all_axes(w, t).text, x->dtype != DT_REAL ? " * 2" : "");
  }
}

/* Each mixture's received rows: declared after its counts are gathered in the forward, at the top
 * of the backward (the counts saved); `after` the node index they follow, -1 for the top. */
static void declare_mixtures(const StageWriter *w, int after, int first, int last) {
  for (int i = 0; i < w->g->nforward; i++) {
    const Node *send = &w->g->nodes[i];
    if (send->op != OP_EXPERT_SEND) continue;
    int counts = send->in[1], producer = tensor(w, counts)->producer;
    int here = producer >= first && producer < last ? producer : -1;
    if (here == after && used_in(w->g, counts, first, last))
      declare_held(w, tensor(w, send->out[0])->dims[0], counts, first, last);
  }
}

/* A GEMM over a join's weights side by side (fuse_gemm), or into their gradients, says so first. */
static void joined_comment(const StageWriter *w, const Node *n) {
  const Tensor *weight = tensor(w, n->in[1]), *out = tensor(w, n->out[0]);
  const Model *m = &w->e->plan->model;
  if (out->join >= 0)
    fprintf(w->f, "  /* %s: the gradients of %d weights side by side, in one GEMM */\n", out->name,
            m->joins[out->join].n);
  else if (weight->join >= 0 && n->a.mm.trans_b)
    fprintf(w->f, "  /* one GEMM over %s: %d weights side by side in memory */\n", weight->name,
            m->joins[weight->join].n);
  else if (weight->join >= 0)
    fprintf(w->f, "  /* the input's gradient through %s in one GEMM (%d products summed) */\n",
            weight->name, m->joins[weight->join].n);
}

static void matmul(const StageWriter *w, const Node *n) {
  int ta = n->a.mm.trans_a, tb = n->a.mm.trans_b;
  joined_comment(w, n);
  Size M = ta ? last_axis(w, n->in[0]) : leading_axes(w, n->in[0]);
  Size N = ta ? last_axis(w, n->in[1]) : last_axis(w, n->out[0]);
  Size K = ta ? leading_axes(w, n->in[0]) : last_axis(w, n->in[0]);
  const char *A = ta ? "GEMM_T" : "GEMM_N", *B = tb ? "GEMM_T" : "GEMM_N";
  if (tensor(w, n->out[0])->kind == T_PARAM_GRAD)
    fprintf(w->f, "  k_gemm_grad(%s, %s, %s, %s, %s, %s, %s, %s);", A, B, M.text, N.text, K.text,
            in(w, n, 0), in(w, n, 1), out(w, n, 0));
  else
    fprintf(w->f, "  k_gemm(%s, %s, %s, %s, %s, 1, %s, %s, GEMM_OVERWRITE, %s);", A, B, M.text,
            N.text, K.text, in(w, n, 0), in(w, n, 1), out(w, n, 0));
}

/* The split axis of t, -1 when it is not split. */
static int split_axis(const Tensor *t) { return t->layout.kind == LAYOUT_S ? t->layout.axis : -1; }

/* Whether a node came from a model file's line (not from autodiff, nor an inserted collective). */
static int has_source_line(const Node *n) {
  return !n->inserted && strcmp(n->where, "autodiff") != 0;
}

/* Beside a fused call, what it computes, over its arguments' names (a parameter's as the model
 * names it), and the model file's line:
 * mlp_fc_gelu = gelu((mlp_fc + mlp.fc.bias)) (models/gpt2.lua:11). */
static void expression_comment(const StageWriter *w, const Node *n, const Kernel *k) {
  const char *spelled[MAX_INPUTS];
  for (int i = 0; i < n->nin; i++) {
    const Tensor *x = tensor(w, n->in[i]);
    spelled[i] = x->kind == T_PARAM || x->kind == T_CONST ? x->name : in(w, n, i);
  }
  static const ExprDialect plain = {"", "dropout(%s, %.9g)"};
  char body[4096];
  expr_to_c(&n->expr, spelled, &plain, body, sizeof body);
  fprintf(w->f, " /* %s %s ", out(w, n, 0), k->accumulate ? "+=" : "=");
  escape_write(ESC_C_COMMENT, body, w->f);
  if (has_source_line(n)) {
    fprintf(w->f, " (");
    escape_write(ESC_C_COMMENT, n->where, w->f);
    fprintf(w->f, ")");
  }
  fprintf(w->f, " */");
}

static void elementwise(const StageWriter *w, const Node *n, int index) {
  const Kernel *k = &w->e->kernels.kernels[w->e->kernels.kernel_of[w->stage][index]];
  int shortest = n->out[0]; /* the tensor whose length is the row's: the shortest repeating input */
  for (int i = 0; i < n->nin; i++)
    if (k->broadcast[i] && local(w, n->in[i]) < local(w, shortest)) shortest = n->in[i];
  if (k->dropouts) {
    const Tensor *o = tensor(w, n->out[0]);
    int sites[8];
    expr_dropouts(&n->expr, sites, NULL);
    fprintf(w->f, "  {\n    const int64_t shape[] = {");
    for (int a = 0; a < o->ndim; a++)
      fprintf(w->f, "%s%s", a ? ", " : "", axes(w, n->out[0], a, a + 1).text);
    fprintf(w->f, "};\n    const int sites[] = {");
    for (int s = 0; s < k->dropouts; s++) fprintf(w->f, "%s%d", s ? ", " : "", sites[s]);
    fprintf(w->f, "};\n    EwKeys keys = rt_ew_keys(r, layer, %d, shape, %d, %d, sites);\n  ",
            o->ndim, split_axis(o), k->dropouts);
  }
  fprintf(w->f, "  %s(%s, %s", k->name, all_axes(w, n->out[0]).text, all_axes(w, shortest).text);
  for (int i = 0; i < n->nin; i++) {
    fprintf(w->f, ", %s", in(w, n, i));
    if (k->broadcast[i]) fprintf(w->f, ", %s", all_axes(w, n->in[i]).text);
  }
  fprintf(w->f, ", %s%s);", out(w, n, 0), k->dropouts ? ", &keys" : "");
  expression_comment(w, n, k);
  fprintf(w->f, "%s", k->dropouts ? "\n  }" : "");
}

/* Sums over the leading rows: into a parameter's gradient, or into the gradient of a broadcast
 * activation (a position table sliced by sequence parallelism). */
static void reduce(const StageWriter *w, const Node *n) {
  Size C = all_axes(w, n->out[0]),
       rows = axes(w, n->in[0], 0, tensor(w, n->in[0])->ndim - tensor(w, n->out[0])->ndim);
  if (rows.value * C.value != local(w, n->in[0])) rows = number(local(w, n->in[0]) / C.value);
  fprintf(w->f, "  k_sum_rows%s(%s, %s, %s, %s);",
          tensor(w, n->out[0])->kind == T_PARAM_GRAD ? "" : "_act", rows.text, C.text, in(w, n, 0),
          out(w, n, 0));
}

/* Input i of a norm or its backward as the kernel takes them, with NULL for what the norm lacks:
 * forward, x, [weight, [bias]] (a missing one is at the end); backward, x, [weight], [mean], rstd,
 * dy (without a weight, the later inputs sit a place earlier). */
static const char *norm_in(const StageWriter *w, const Node *n, int i, int backward) {
  if (!backward) return i < n->nin ? in(w, n, i) : "NULL";
  int unweighted = !n->a.norm.weighted;
  if (i == 1 && unweighted) return "NULL";
  return in(w, n, i > 0 ? i - unweighted : 0);
}

/* Output k of a norm's backward: dx, then dw and db unless the norm has none (no weight, or
 * frozen ones). */
static const char *norm_out(const StageWriter *w, const Node *n, int k, int backward) {
  return backward && k > 0 && k >= n->nout ? "NULL" : out(w, n, k);
}

/* The width a norm normalises, the last dim or its groups (a norm per head), and the rows of it. */
static void norm_shape(const StageWriter *w, const Node *n, Size *rows, Size *width) {
  if (n->a.norm.group) {
    *width = number(n->a.norm.group);
    *rows = number(local(w, n->in[0]) / n->a.norm.group);
  } else {
    *width = last_axis(w, n->in[0]);
    *rows = leading_axes(w, n->in[0]);
  }
}

static void norm(const StageWriter *w, const Node *n) {
  Size rows, C;
  norm_shape(w, n, &rows, &C);
  char eps[32];
  expr_number_text(n->a.norm.eps, eps, sizeof eps);
  if (n->a.norm.kind == NORM_LAYER)
    fprintf(w->f, "  k_layernorm_forward(%s, %s, %s, %s, %s, %s, %s, %s, %s);", rows.text, C.text,
            norm_in(w, n, 0, 0), norm_in(w, n, 1, 0), norm_in(w, n, 2, 0), eps, out(w, n, 0),
            out(w, n, 1), out(w, n, 2));
  else
    fprintf(w->f, "  k_rmsnorm_forward(%s, %s, %s, %s, %s, %s, %s);", rows.text, C.text,
            norm_in(w, n, 0, 0), norm_in(w, n, 1, 0), eps, out(w, n, 0), out(w, n, 1));
}

static void norm_backward(const StageWriter *w, const Node *n) {
  Size rows, C;
  norm_shape(w, n, &rows, &C);
  if (n->a.norm.kind == NORM_LAYER)
    fprintf(w->f, "  k_layernorm_backward(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s);", rows.text,
            C.text, norm_in(w, n, 0, 1), norm_in(w, n, 1, 1), norm_in(w, n, 2, 1),
            norm_in(w, n, 3, 1), norm_in(w, n, 4, 1), out(w, n, 0), norm_out(w, n, 1, 1),
            norm_out(w, n, 2, 1));
  else
    fprintf(w->f, "  k_rmsnorm_backward(%s, %s, %s, %s, %s, %s, %s, %s);", rows.text, C.text,
            norm_in(w, n, 0, 1), norm_in(w, n, 1, 1), norm_in(w, n, 2, 1), norm_in(w, n, 3, 1),
            out(w, n, 0), norm_out(w, n, 1, 1));
}

/* Option k of an attention (window, softcap, scale, rope_theta) when set: its value, or where it
 * varies by layer, its layer's entry of the table layer_tables wrote. The first option starts a
 * line. */
static const char *const option_constants[LAYER_OPTIONS] = {"WINDOW", "SOFTCAP", "SCALE",
                                                            "ROPE_THETA"};

static void attention_option(const StageWriter *w, const Node *n, int k, double value, int *count) {
  int row = n->a.attn.per_layer,
      differs = row >= 0 && layers_option_differs(&w->e->plan->model, row, k);
  if (value == 0 && !differs) return;
  fprintf(w->f, "%s%s.%s = ", (*count)++ ? ", " : ",\n                             ",
          k == 3 ? ".rope = 1, " : "", layer_option_names[k]);
  if (differs) {
    fprintf(w->f, "ATTENTION_%d_%s[layer]", row, option_constants[k]);
    return;
  }
  char number[32];
  expr_number_text(value, number, sizeof number);
  fprintf(w->f, "%s", number);
}

static void attention_shape(const StageWriter *w, const Node *n) {
  const Tensor *q = tensor(w, n->in[0]);
  const AttnAttr *a = &n->a.attn;
  int tp = w->e->plan->par.tp, share = layout_pieces(q->layout, tp), count = 0;
  fprintf(w->f,
          "  {\n    const AttnShape shape = {.B = %s, .T = %s, .Hq = %d, .Hkv = %d, .D = %d, "
          ".causal = %d",
          axes(w, n->in[0], 0, 1).text, axes(w, n->in[0], 1, 2).text, a->heads / share,
          a->kv_heads / layout_pieces(tensor(w, n->in[1])->layout, tp), a->head_dim, a->causal);
  if (a->rope) attention_option(w, n, 3, a->rope_theta, &count);
  attention_option(w, n, 0, (double)a->window, &count);
  attention_option(w, n, 1, a->softcap, &count);
  attention_option(w, n, 2, a->scale, &count);
  if (a->alibi) /* the slopes run over every rank's heads: this rank's start at its first head */
    fprintf(w->f, ",\n                             .alibi = 1, .head0 = %s%d, .heads_total = %d",
            share > 1 ? "r->tp_rank * " : "", share > 1 ? a->heads / share : 0, a->heads);
  fprintf(w->f, "};\n  ");
}

static void attention(const StageWriter *w, const Node *n) {
  attention_shape(w, n);
  fprintf(w->f, "  k_attention_forward(&shape, %s, %s, %s, %s, %s);\n  }", in(w, n, 0), in(w, n, 1),
          in(w, n, 2), out(w, n, 0), out(w, n, 1));
}

static void attention_backward(const StageWriter *w, const Node *n) {
  attention_shape(w, n);
  fprintf(w->f, "  k_attention_backward(&shape, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n  }",
          in(w, n, 0), in(w, n, 1), in(w, n, 2), in(w, n, 3), in(w, n, 4), in(w, n, 5),
          out(w, n, 0), out(w, n, 1), out(w, n, 2));
}

/* Rotary positions (or, backward, the turn back) over the local heads. */
static void rope(const StageWriter *w, const Node *n) {
  static const char *const scalings[] = {[ROPE_SCALING_NONE] = "ROPE_SCALING_NONE",
                                         [ROPE_SCALING_LINEAR] = "ROPE_SCALING_LINEAR",
                                         [ROPE_SCALING_LLAMA3] = "ROPE_SCALING_LLAMA3"};
  const Tensor *x = tensor(w, n->in[0]);
  const RopeShape *a = &n->a.rope;
  char theta[32], factor[32], low[32], high[32], positions[32];
  expr_number_text(a->theta, theta, sizeof theta);
  expr_number_text(a->factor, factor, sizeof factor);
  expr_number_text(a->low_freq_factor, low, sizeof low);
  expr_number_text(a->high_freq_factor, high, sizeof high);
  expr_number_text(a->original_positions, positions, sizeof positions);
  fprintf(
      w->f,
      "  {\n    const RopeShape shape = {.B = %s, .T = %s, .heads = %lld, .head_dim = %d, .rotary "
      "= %d, "
      ".interleaved = %d, .inverse = %d,\n                             .theta = %s, .scaling = %s",
      axes(w, n->in[0], 0, 1).text, axes(w, n->in[0], 1, 2).text,
      (long long)(emit_local_dim(w->e->plan, x, 2) / a->head_dim), a->head_dim, a->rotary,
      a->interleaved, a->inverse, theta, scalings[a->scaling]);
  if (a->scaling != ROPE_SCALING_NONE) fprintf(w->f, ", .factor = %s", factor);
  if (a->scaling == ROPE_SCALING_LLAMA3)
    fprintf(w->f, ",\n                             .low_freq_factor = %s, .high_freq_factor = %s, "
            ".original_positions = %s", low, high, positions);
  fprintf(w->f, "};\n    k_rope(&shape, %s, %s);\n  }", in(w, n, 0), out(w, n, 0));
}

/* "rows, groups, nparts, (const int64_t[]){sizes}": the parts' sizes, and this rank's rows and
 * groups: all of them, or its share when the last dim of the whole is split. */
static void parts_arguments(const StageWriter *w, const Node *n, int whole) {
  const PartAttr *a = &n->a.parts;
  const Tensor *t = tensor(w, whole);
  int split = t->layout.kind == LAYOUT_S && t->layout.axis == t->ndim - 1;
  fprintf(w->f, "%s, %lld, %d, (const int64_t[]){", leading_axes(w, whole).text,
          (long long)(a->groups / (split ? layout_pieces(t->layout, w->e->plan->par.tp) : 1)),
          a->nparts);
  for (int i = 0; i < a->nparts; i++) {
    char size[EMIT_DIM_CHARS];
    emit_part_size(w->e, t, i, a->sizes[i], size, sizeof size);
    fprintf(w->f, "%s%s", i ? ", " : "", size);
  }
  fprintf(w->f, "}");
}

/* A part of each group (the whole is the input). */
static void split_part(const StageWriter *w, const Node *n) {
  fprintf(w->f, "  k_split(");
  parts_arguments(w, n, n->in[0]);
  fprintf(w->f, ", %d, %s, %s);", n->a.parts.part, in(w, n, 0), out(w, n, 0));
}

/* The parts joined (the whole is the output); a one-input concat fills the other parts with
 * zeros. */
static void concat_parts(const StageWriter *w, const Node *n) {
  fprintf(w->f, "  k_concat(");
  parts_arguments(w, n, n->out[0]);
  fprintf(w->f, ", (const act_t *[]){");
  for (int i = 0; i < n->a.parts.nparts; i++) {
    const char *part = n->nin == 1 ? (i == n->a.parts.part ? in(w, n, 0) : "NULL") : in(w, n, i);
    fprintf(w->f, "%s%s", i ? ", " : "", part);
  }
  fprintf(w->f, "}, %s);", out(w, n, 0));
}

static void embedding(const StageWriter *w, const Node *n, int backward) {
  int table = backward ? n->out[0] : n->in[1];
  const Tensor *t = tensor(w, table);
  fprintf(w->f, "  rt_embedding_%s(r, %s, %s, %s, %s, %s, %d, %s);",
          backward ? "backward" : "forward", all_axes(w, n->in[0]).text, axes(w, table, 1, 2).text,
          in(w, n, 0), in(w, n, 1), axes(w, table, 0, 1).text, is_split(t, 0), out(w, n, 0));
}

static void xent(const StageWriter *w, const Node *n, int backward) {
  const Tensor *z = tensor(w, n->in[0]);
  char ignore[32], vocab[32];
  emit_vocab(w->e, n->a.xent.vocab, vocab, sizeof vocab);
  if (n->a.xent.ignore_index == XENT_NO_IGNORE) snprintf(ignore, sizeof ignore, "XENT_NO_IGNORE");
  else snprintf(ignore, sizeof ignore, "%lld", (long long)n->a.xent.ignore_index);
  if (n->a.xent.grad_in_forward && backward) {
    fprintf(w->f, "  /* the cross entropy's gradient: written over the logits by its forward */");
    return;
  }
  if (n->a.xent.grad_in_forward) {
    fprintf(w->f, "  rt_xent_forward_grad(r, %s, %s, %s, %s, %s, %s, %s);",
            all_axes(w, n->in[1]).text, last_axis(w, n->in[0]).text, in(w, n, 0), in(w, n, 1),
            vocab, ignore, out(w, n, 1));
    return;
  }
  fprintf(w->f, "  rt_xent_%s(r, %s, %s, %s, %s, %s, %s, %d, %s);",
          backward ? "backward" : "forward", all_axes(w, n->in[1]).text,
          last_axis(w, n->in[0]).text, backward ? out(w, n, 0) : in(w, n, 0), in(w, n, 1), vocab,
          ignore, is_split(z, z->ndim - 1), backward ? in(w, n, 2) : out(w, n, 1));
}

/* outer: the dims before the axis; inner: the axis (as `shaped` holds it) times the dims after. */
static void collective(const StageWriter *w, const Node *n, const char *fn, int shaped) {
  int axis = n->a.coll.axis;
  fprintf(w->f, "  %s(r, %s, %s, %s, %s);", fn, in(w, n, 0), out(w, n, 0),
          axes(w, shaped, 0, axis).text, axes(w, shaped, axis, tensor(w, shaped)->ndim).text);
}

static void allreduce(const StageWriter *w, const Node *n) {
  fprintf(w->f, "  rt_allreduce(r, %s, %s, %s);", in(w, n, 0), out(w, n, 0),
          all_axes(w, n->out[0]).text);
}

/* ---- mixture of experts --------------------------------------------------------------------- */

/* The k largest of each row of the input (forward), or their gradient put back (backward). */
static void topk(const StageWriter *w, const Node *n, int backward) {
  int whole = backward ? n->out[0] : n->in[0];
  if (backward)
    fprintf(w->f, "  k_topk_backward(%s, %s, %d, %s, %s, %s);", leading_axes(w, whole).text,
            last_axis(w, whole).text, n->a.moe.topk, in(w, n, 0), in(w, n, 1), out(w, n, 0));
  else
    fprintf(w->f, "  k_topk(%s, %s, %d, %s, %s, %s);", leading_axes(w, whole).text,
            last_axis(w, whole).text, n->a.moe.topk, in(w, n, 0), out(w, n, 0), out(w, n, 1));
}

/* "tokens, k": the slots' (input `slots`) leading axes and their last. */
static void routing_arguments(const StageWriter *w, int slots) {
  fprintf(w->f, "%s, %s", leading_axes(w, slots).text, last_axis(w, slots).text);
}

/* Slots and counts; with a capacity, at most that many rows an expert (those of the largest
 * priority, the route's second input, or the earliest), the rows dropped counted by the run. */
static void route(const StageWriter *w, const Node *n) {
  Size experts = all_axes(w, n->out[1]), rows = all_axes(w, n->in[0]);
  int64_t capacity = moe_capacity(&n->a.moe, rows.value, experts.value);
  fprintf(w->f, "  k_moe_route(");
  routing_arguments(w, n->in[0]);
  fprintf(w->f, ", %s, %lld, %s, %s, %s, %s);", experts.text, (long long)capacity, in(w, n, 0),
          n->nin > 1 ? in(w, n, 1) : "NULL", out(w, n, 0), out(w, n, 1));
  if (capacity)
    fprintf(w->f, "\n  rt_expert_dropped(r, %s, %s, %s);", rows.text, experts.text, out(w, n, 1));
}

static void dispatch(const StageWriter *w, const Node *n) {
  fprintf(w->f, "  k_moe_dispatch(");
  routing_arguments(w, n->in[1]);
  fprintf(w->f, ", %s, %s, %s, %s);", last_axis(w, n->in[0]).text, in(w, n, 0), in(w, n, 1),
          out(w, n, 0));
}

/* Rows back to their tokens, weighted (forward) or summed (a dispatch's gradient). */
static void combine(const StageWriter *w, const Node *n) {
  fprintf(w->f, "  k_moe_combine(");
  routing_arguments(w, n->in[1]);
  fprintf(w->f, ", %s, %s, %s, %s, %s);", last_axis(w, n->in[0]).text, in(w, n, 0), in(w, n, 1),
          n->nin > 2 ? in(w, n, 2) : "NULL", out(w, n, 0));
}

static void combine_backward(const StageWriter *w, const Node *n) {
  fprintf(w->f, "  k_moe_combine_backward(");
  routing_arguments(w, n->in[1]);
  fprintf(w->f, ", %s, %s, %s, %s, %s, %s, %s);", last_axis(w, n->in[0]).text, in(w, n, 0),
          in(w, n, 1), in(w, n, 2), in(w, n, 3), out(w, n, 0), out(w, n, 1));
}

/* The route's counts as fractions of its rows. */
static void fractions(const StageWriter *w, const Node *n) {
  fprintf(w->f, "  k_moe_fractions(%s, %s, %s);", all_axes(w, n->in[0]).text, in(w, n, 0),
          out(w, n, 0));
}

/* x passed on, the term added to the loss (forward); the term's gradient (backward). */
static void loss_term(const StageWriter *w, const Node *n) {
  if (n->op == OP_LOSS_TERM_BWD)
    fprintf(w->f, "  rt_loss_term_backward(r, %s, %s);", all_axes(w, n->out[0]).text,
            out(w, n, 0));
  else
    fprintf(w->f, "  rt_loss_term(r, %s, %s, %s, %s, %s);", all_axes(w, n->in[0]).text,
            in(w, n, 0), out(w, n, 0), all_axes(w, n->in[1]).text, in(w, n, 1));
}

/* One GEMM per expert over its rows; with trans_a, into each expert's weight gradient. */
static void grouped_matmul(const StageWriter *w, const Node *n) {
  Size experts = all_axes(w, n->in[2]), rows = axes(w, n->in[0], 0, 1);
  if (n->a.moe.trans_a)
    fprintf(w->f, "  k_grouped_gemm_grad(%s, %s, %s, %s, %s, %s, %s, %s);", experts.text,
            in(w, n, 2), rows.text, last_axis(w, n->in[0]).text, last_axis(w, n->in[1]).text,
            in(w, n, 0), in(w, n, 1), out(w, n, 0));
  else
    fprintf(w->f, "  k_grouped_gemm(%s, %s, %s, %s, %s, %s, %s, %s, %s);",
            n->a.moe.trans_b ? "GEMM_T" : "GEMM_N", experts.text, in(w, n, 2), rows.text,
            last_axis(w, n->out[0]).text, last_axis(w, n->in[0]).text, in(w, n, 0), in(w, n, 1),
            out(w, n, 0));
}

/* Expert parallelism's exchanges over the ep group (runtime/experts.c): E is the all counts' last
 * axis; a send's rows are its input's, a return's width its output's. */
static void expert_exchange(const StageWriter *w, const Node *n) {
  if (n->op == OP_EXPERT_COUNTS)
    fprintf(w->f, "  rt_expert_counts(r, %s, %s, %s, %s);", last_axis(w, n->out[0]).text,
            in(w, n, 0), out(w, n, 0), out(w, n, 1));
  else if (n->op == OP_EXPERT_SEND)
    fprintf(w->f, "  rt_expert_send(r, %s, %s, %s, %s, %s);", last_axis(w, n->in[1]).text,
            last_axis(w, n->in[0]).text, in(w, n, 1), in(w, n, 0), out(w, n, 0));
  else
    fprintf(w->f, "  rt_expert_return(r, %s, %s, %s, %s, %s);", last_axis(w, n->in[1]).text,
            last_axis(w, n->out[0]).text, in(w, n, 1), in(w, n, 0), out(w, n, 0));
}

static void node(const StageWriter *w, int index) {
  const Node *n = &w->g->nodes[index];
  switch (n->op) {
  case OP_MATMUL: matmul(w, n); break;
  case OP_EW: elementwise(w, n, index); break;
  case OP_REDUCE: reduce(w, n); break;
  case OP_NORM: norm(w, n); break;
  case OP_NORM_BWD: norm_backward(w, n); break;
  case OP_ATTENTION: attention(w, n); break;
  case OP_ATTENTION_BWD: attention_backward(w, n); break;
  case OP_EMBEDDING: embedding(w, n, 0); break;
  case OP_ROPE: rope(w, n); break;
  case OP_SPLIT: split_part(w, n); break;
  case OP_CONCAT: concat_parts(w, n); break;
  case OP_EMBEDDING_BWD: embedding(w, n, 1); break;
  case OP_XENT: xent(w, n, 0); break;
  case OP_XENT_BWD: xent(w, n, 1); break;
  case OP_ALLREDUCE: allreduce(w, n); break;
  case OP_ALLGATHER: collective(w, n, "rt_allgather", n->in[0]); break;
  case OP_REDUCESCATTER: collective(w, n, "rt_reducescatter", n->out[0]); break;
  case OP_SLICE: collective(w, n, "rt_slice", n->out[0]); break;
  case OP_TOPK: topk(w, n, 0); break;
  case OP_TOPK_BWD: topk(w, n, 1); break;
  case OP_ROUTE: route(w, n); break;
  case OP_DISPATCH: dispatch(w, n); break;
  case OP_GROUPED_MATMUL: grouped_matmul(w, n); break;
  case OP_COMBINE: combine(w, n); break;
  case OP_COMBINE_BWD: combine_backward(w, n); break;
  case OP_FRACTIONS: fractions(w, n); break;
  case OP_LOSS_TERM:
  case OP_LOSS_TERM_BWD: loss_term(w, n); break;
  case OP_EXPERT_COUNTS:
  case OP_EXPERT_SEND:
  case OP_EXPERT_RETURN: expert_exchange(w, n); break;
  }
  char where[ESCAPED_SIZE(WHERE_LEN)];
  fprintf(w->f, n->op == OP_EW || !has_source_line(n) ? "\n" : " /* %s */\n",
          escape(ESC_C_COMMENT, n->where, where, sizeof where));
}

/* ---- functions ------------------------------------------------------------------------------ */

static const char *data_name(const StageWriter *w, int which) {
  return w->g->ninputs > which ? w->g->tensors[w->g->inputs[which]].name : "";
}

static void signature(const StageWriter *w, int backward) {
  const char *stage = stage_names[w->stage];
  fprintf(w->f, "static void %s_%s(Run *r, ", stage, backward ? "backward" : "forward");
  if (w->stage == STAGE_BLOCK)
    fprintf(w->f, "int layer, const act_t *x, act_t *saved, %sact_t *tmp)",
            backward ? "const act_t *dy, act_t *dx, " : "");
  else if (w->stage == STAGE_EMBED)
    fprintf(w->f, "const int32_t *%s, act_t *saved, %sact_t *tmp)", data_name(w, 0),
            backward ? "const act_t *dy, " : "");
  else
    fprintf(w->f, "const act_t *x, const int32_t *%s, act_t *saved, %sact_t *tmp)", data_name(w, 1),
            backward ? "act_t *dx, " : "");
}

static int uses_dropout(const Graph *g, int first, int last) {
  for (int i = first; i < last; i++)
    if (g->nodes[i].op == OP_EW && expr_dropouts(&g->nodes[i].expr, NULL, NULL)) return 1;
  return 0;
}

static int uses_layer_params(const StageWriter *w, int first, int last, TensorKind kind) {
  for (int t = 0; t < w->g->ntensors; t++)
    if (tensor(w, t)->kind == kind &&
        w->e->plan->model.params[tensor(w, t)->param].scope == SCOPE_BLOCK &&
        used_in(w->g, t, first, last))
      return 1;
  return 0;
}

static int region_used(const StageWriter *w, Region region, int first, int last) {
  for (int t = 0; t < w->g->ntensors; t++)
    if (w->mem->region[t] == region && used_in(w->g, t, first, last)) return 1;
  return 0;
}

/* (void)name; for the parameters of the signature this pass does not read or write. */
static void unused_parameters(const StageWriter *w, int backward, int first, int last) {
  const struct { Region region; const char *name; int present; } params[] = {
      {REGION_INPUT, "x", w->stage != STAGE_EMBED},
      {REGION_SAVED, "saved", 1},
      {REGION_SCRATCH, "tmp", 1},
      {REGION_GRAD_OUT, "dy", backward && w->stage != STAGE_HEAD},
      {REGION_GRAD_IN, "dx", backward && w->stage != STAGE_EMBED},
  };
  for (unsigned i = 0; i < sizeof params / sizeof *params; i++)
    if (params[i].present && !region_used(w, params[i].region, first, last) &&
        !(params[i].region == REGION_GRAD_IN && w->g->grad_input == w->g->grad_output))
      fprintf(w->f, "  (void)%s;\n", params[i].name);
  if (w->stage != STAGE_BLOCK && !region_used(w, REGION_DATA, first, last))
    fprintf(w->f, "  (void)%s;\n", data_name(w, w->stage == STAGE_EMBED ? 0 : 1));
}

static void function(StageWriter *w, int backward) {
  const Graph *g = w->g;
  int first = backward ? g->nforward : 0, last = backward ? g->nnodes : g->nforward, calls = 0;
  for (int i = first; i < last; i++) calls += emits_call(&g->nodes[i]);
  fprintf(w->f,
          "/* %s %s of one microbatch: %d calls; saved: %lld elements kept for backward; tmp: "
          "scratch. */\n",
          stage_names[w->stage], backward ? "backward" : "forward", calls,
          (long long)w->mem->saved);
  signature(w, backward);
  fprintf(w->f, " {\n");
  int dropout = uses_dropout(g, first, last), weights = uses_layer_params(w, first, last, T_PARAM);
  int gradients = uses_layer_params(w, first, last, T_PARAM_GRAD);
  if (w->stage != STAGE_BLOCK && dropout)
    fprintf(w->f, "  const int layer = -1; /* outside the blocks */\n");
  if (w->stage == STAGE_BLOCK && !dropout && !weights && !gradients)
    fprintf(w->f, "  (void)layer;\n");
  unused_parameters(w, backward, first, last);
  if (weights) fprintf(w->f, "  act_t *const *w = r->layer_w[layer];\n");
  if (gradients) fprintf(w->f, "  real *const *g = r->layer_g[layer];\n");
  declare(w, first, last);
  declare_mixtures(w, -1, first, last);
  for (int i = first; i < last; i++) {
    node(w, i);
    if (g->nodes[i].op == OP_EXPERT_COUNTS) declare_mixtures(w, i, first, last);
  }
  if (backward && g->grad_input >= 0 && g->grad_input == g->grad_output)
    fprintf(w->f, "  device_copy(dx, dy, %s * sizeof(act_t));\n", all_axes(w, g->grad_input).text);
  fprintf(w->f, "}\n\n");
}

/* The attention options that differ between layers, one table per attention node and option: the
 * block function reads its layer's entry (0: no window, softcap or scale of its own). */
static void layer_tables(const Model *m, FILE *f) {
  for (int row = 0; row < m->nlayer_attn; row++)
    for (int k = 0; k < LAYER_OPTIONS; k++) {
      if (!layers_option_differs(m, row, k)) continue;
      fprintf(f, "/* attention %d's %s, layer by layer */\nstatic const %s ATTENTION_%d_%s[%d] = {",
              row, layer_option_names[k], k == 0 ? "int64_t" : "double", row, option_constants[k],
              m->layers);
      for (int l = 0; l < m->layers; l++) {
        char number[32];
        expr_number_text(layers_option(m, row, k, l), number, sizeof number);
        fprintf(f, "%s%s%s", l ? "," : "", l % 16 ? " " : "\n  ", number);
      }
      fprintf(f, "\n};\n\n");
    }
}

void emit_stages(const Emission *e, FILE *f) {
  layer_tables(&e->plan->model, f);
  for (int s = 0; s < STAGES; s++) {
    StageWriter w = {.e = e, .stage = s, .g = e->stage[s], .mem = &e->memory[s], .f = f};
    char names[w.g->ntensors + 1][EMIT_NAME_CHARS];
    w.name = names;
    emit_name_buffers(e, s, names);
    function(&w, 0);
    function(&w, 1);
  }
}
