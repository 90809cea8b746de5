/* emit_program.c: the generated program's model.c (parameter tables, stage and chunk functions, the
 * Program descriptor) and the files of DIR/, each written to a temporary name and renamed. */
#include <stdlib.h>
#include <string.h>

#include "constants_file.h"
#include "emit/emit.h"
#include "escape.h"
#include "outfile.h"

/* ---- parameters ----------------------------------------------------------------------------- */

static void param_enum(const Model *m, ParamScope scope, FILE *f) {
  fprintf(f, "enum {");
  int n = 0;
  for (int p = 0; p < m->nparams; p++) {
    if (m->params[p].scope != scope) continue;
    char constant[96];
    emit_param_constant(m, p, constant, sizeof constant);
    fprintf(f, "%s%s", n == 0 ? "\n  " : n % 4 == 0 ? ",\n  " : ", ", constant);
    n++;
  }
  fprintf(f, "\n};\n");
}

/* ---- constants ------------------------------------------------------------------------------ */

/* r->constants[C_...]: one enum constant per constant of the model. */
static void constant_enum(const Model *m, FILE *f) {
  fprintf(f, "/* The model's constants (r->constants[C_...]). */\nenum {");
  for (int c = 0; c < m->nconstants; c++) {
    char name[96];
    emit_constant_enum(m, c, name, sizeof name);
    fprintf(f, "%s%s", c == 0 ? "\n  " : c % 4 == 0 ? ",\n  " : ", ", name);
  }
  fprintf(f, "\n};\n\n");
}

static int in_file(const Constant *k) { return k->count > CONSTANT_INLINE_ELEMS; }

/* Each constant's values as the model file computed them (shortest round-trip spelling), or,
 * past CONSTANT_INLINE_ELEMS, a NULL that sends the runtime to constants.bin; and the table. */
static void constant_tables(const Model *m, FILE *f) {
  for (int c = 0; c < m->nconstants; c++) {
    const Constant *k = &m->constants[c];
    char shape[200], name[ESCAPED_SIZE(NAME_LEN)], where[ESCAPED_SIZE(WHERE_LEN)];
    shape_string(m, k->ndim, k->dims, shape, sizeof shape);
    fprintf(f, "/* %s %s (%s)", escape(ESC_C_COMMENT, k->name, name, sizeof name), shape,
            escape(ESC_C_COMMENT, k->where, where, sizeof where));
    if (in_file(k)) {
      fprintf(f, ": its %lld values in " CONSTANTS_FILE_NAME " */\n\n", (long long)k->count);
      continue;
    }
    fprintf(f, " */\nstatic const double constant_%d[%lld] = {", c, (long long)k->count);
    for (int64_t i = 0; i < k->count; i++) {
      char number[32];
      expr_number_text(k->values[i], number, sizeof number);
      fprintf(f, "%s%s%s", i ? "," : "", i % 8 ? " " : "\n  ", number);
    }
    fprintf(f, "\n};\n\n");
  }
  fprintf(f, "static const ConstantSpec constants[] = {\n");
  for (int c = 0; c < m->nconstants; c++) {
    char name[ESCAPED_SIZE(NAME_LEN)], values[32] = "NULL";
    if (!in_file(&m->constants[c])) snprintf(values, sizeof values, "constant_%d", c);
    fprintf(f, "  {%s, %lld, %s},\n", escape(ESC_C_STRING, m->constants[c].name, name, sizeof name),
            (long long)m->constants[c].count, values);
  }
  fprintf(f, "  {NULL, 0, NULL},\n};\n\n");
}

/* DIR/constants.bin: the values of the constants past CONSTANT_INLINE_ELEMS (constants_file.h). */
static int constants_bin(const Model *m, const OwnFolder *dir, Diag *d) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir->path, CONSTANTS_FILE_NAME);
  const char *inputs[] = {m->file};
  OutFile out;
  if (outfile_check("-o", path, inputs, 1, d) ||
      outfile_open_in(&out, dir, CONSTANTS_FILE_NAME, path, sizeof path, d))
    return -1;
  int status = constants_file_begin(out.file);
  for (int c = 0; c < m->nconstants && status == 0; c++) {
    const Constant *k = &m->constants[c];
    if (in_file(k)) status = constants_file_put(out.file, k->name, k->count, k->values);
  }
  return outfile_close(&out, d);
}

int emit_has_constants_file(const Model *m) {
  for (int c = 0; c < m->nconstants; c++)
    if (in_file(&m->constants[c])) return 1;
  return 0;
}

/* Which stages read a model-scope parameter. */
static int used_by(const Graph *g, int param) {
  for (int t = 0; t < g->ntensors; t++)
    if (g->tensors[t].kind == T_PARAM && g->tensors[t].param == param) return 1;
  return 0;
}

static void param_spec(const Plan *plan, int p, int place, FILE *f) {
  const Model *m = &plan->model;
  const Param *q = &m->params[p];
  static const char *const inits[] = {"INIT_NORMAL_DIST", "INIT_ZERO", "INIT_ONE"};
  char name[ESCAPED_SIZE(NAME_LEN)];
  fprintf(f, "  {%s, %d, {", escape(ESC_C_STRING, q->name, name, sizeof name), q->ndim);
  for (int a = 0; a < q->ndim; a++)
    fprintf(f, "%s%lld", a ? ", " : "", (long long)m->dims[q->dims[a]].size);
  fprintf(f, "}, {");
  for (int a = 0; a < q->ndim; a++)
    fprintf(f, "%s%lld", a ? ", " : "", (long long)m->dims[q->dims[a]].unpadded);
  fprintf(f, "}, %d, %s, %.9g, %d, %d, %d, %d, %d, %d, %d, %d},\n",
          q->layout.kind == LAYOUT_S ? q->layout.axis : -1, inits[q->init], q->std, q->decay,
          q->grad_tp_sum, used_by(&m->embed, p), used_by(&m->head, p), q->trainable, place,
          layout_copies(q->layout), q->ep_split && m->ep > 1);
}

/* The join parameter p is a member of, -1 for none. */
static int join_of(const Model *m, int p) {
  for (int j = 0; j < m->njoins; j++)
    for (int k = 0; k < m->joins[j].n; k++)
      if (m->joins[j].params[k] == p) return j;
  return -1;
}

/* Where each parameter of a scope lies in memory among the scope's: in table order, but a join's
 * members side by side in the join's order, where the first of them in table order would lie. */
static void placement(const Model *m, ParamScope scope, int *place) {
  int next = 0;
  for (int p = 0; p < m->nparams; p++) place[p] = -1;
  for (int p = 0; p < m->nparams; p++) {
    if (m->params[p].scope != scope || place[p] >= 0) continue;
    int j = join_of(m, p);
    if (j < 0) place[p] = next++;
    for (int k = 0; j >= 0 && k < m->joins[j].n; k++) place[m->joins[j].params[k]] = next++;
  }
}

static void param_table(const Plan *plan, ParamScope scope, const char *name, FILE *f) {
  int place[plan->model.nparams + 1];
  placement(&plan->model, scope, place);
  fprintf(f, "static const ParamSpec %s[] = {\n", name);
  fprintf(f,
          "  /* name, axes, shape, shape without padding, TP split axis, init, std, decay, "
          "TP-summed gradient,\n"
          "     read by the embedding, read by the head, trained, place in memory, TP ranks "
          "sharing a piece,\n     experts spread over ep ranks */\n");
  for (int p = 0; p < plan->model.nparams; p++)
    if (plan->model.params[p].scope == scope) param_spec(plan, p, place[p], f);
  fprintf(f, "};\n\n");
}

static int count_params(const Model *m, ParamScope scope) {
  int n = 0;
  for (int p = 0; p < m->nparams; p++) n += m->params[p].scope == scope;
  return n;
}

/* ---- chunks --------------------------------------------------------------------------------- */

static int64_t stage_output_offset(const Emission *e, int stage) {
  return e->memory[stage].offset[e->stage[stage]->output];
}

/* Layer i's saved activations: in the slot, or (recomputing) in the rank's one-layer recompute
 * region. */
static void layer_region(const Plan *p, const ChunkMemory *s, FILE *f) {
  if (p->par.recompute == RECOMPUTE_FULL) fprintf(f, "r->recompute");
  else fprintf(f, "slot + %lld + (int64_t)i * BLOCK_SAVED", (long long)s->layers);
}

/* The layer loop of a forward pass: x runs from the chunk's input to its last layer's output;
 * recomputing, each layer's output is kept in the slot (the next layer's input, for its re-run). */
static void forward_layers(const Plan *p, const Chunk *c, const ChunkMemory *s, FILE *f) {
  fprintf(f, "  for (int i = 0; i < %d; i++) {\n    act_t *saved = ", c->layers);
  layer_region(p, s, f);
  fprintf(f, ";\n    block_forward(r, %d + i, x, saved, r->scratch);\n", c->first_layer);
  if (p->par.recompute == RECOMPUTE_FULL) {
    fprintf(f, "    act_t *kept = slot + %lld + (int64_t)i * IO_ELEMS;\n", (long long)s->layers);
    fprintf(f,
            "    device_copy(kept, saved + BLOCK_OUTPUT, IO_ELEMS * sizeof(act_t));\n    x = "
            "kept;\n  }\n");
  } else {
    fprintf(f, "    x = saved + BLOCK_OUTPUT;\n  }\n");
  }
}

static void chunk_input(const ChunkMemory *s, FILE *f) {
  if (s->embed >= 0) fprintf(f, "slot + %lld + EMBED_OUTPUT", (long long)s->embed);
  else fprintf(f, "slot + %lld", (long long)s->input);
}

static void chunk_forward(const Plan *p, int index, const ChunkMemory *s, FILE *f) {
  const Chunk *c = &p->chunks[index];
  fprintf(f,
          "static void chunk_%d_forward(Run *r, act_t *slot, const int32_t *tokens, const int32_t "
          "*targets) {\n",
          index);
  fprintf(f, "  (void)tokens, (void)targets;\n");
  if (c->has_embed)
    fprintf(f, "  embed_forward(r, tokens, slot + %lld, r->scratch);\n", (long long)s->embed);
  fprintf(f, "  const act_t *x = ");
  chunk_input(s, f);
  fprintf(f, ";\n");
  forward_layers(p, c, s, f);
  if (c->has_head)
    fprintf(f, "  head_forward(r, x, targets, slot + %lld, r->scratch);\n", (long long)s->head);
  fprintf(f, "}\n\n");
}

/* Backward, last layer first; the gradient between layers alternates between r->grad_a and grad_b,
 * and the first layer's lands where chunk 0's embedding reads it or where the send to the previous
 * chunk reads it. */
static void chunk_backward(const Plan *p, int index, const ChunkMemory *s, FILE *f) {
  const Chunk *c = &p->chunks[index];
  fprintf(f,
          "static void chunk_%d_backward(Run *r, act_t *slot, const int32_t *tokens, const int32_t "
          "*targets) {\n",
          index);
  fprintf(f, "  (void)tokens, (void)targets;\n  const act_t *input = ");
  chunk_input(s, f);
  fprintf(f, ";\n");
  if (p->par.recompute == RECOMPUTE_FULL)
    fprintf(f, "  const act_t *x = slot + %lld + (int64_t)%d * IO_ELEMS;\n", (long long)s->layers,
            c->layers - 1);
  else
    fprintf(f, "  const act_t *x = slot + %lld + (int64_t)%d * BLOCK_SAVED + BLOCK_OUTPUT;\n",
            (long long)s->layers, c->layers - 1);
  if (c->has_head)
    fprintf(f,
            "  head_backward(r, x, targets, slot + %lld, r->grad_a, r->scratch);\n  const act_t "
            "*dy = r->grad_a;\n",
            (long long)s->head);
  else fprintf(f, "  (void)x;\n  const act_t *dy = slot + %lld;\n", (long long)s->grad_out);
  fprintf(f, "  for (int i = %d; i >= 0; i--) {\n    act_t *saved = ", c->layers - 1);
  layer_region(p, s, f);
  if (p->par.recompute == RECOMPUTE_FULL) {
    fprintf(f,
            ";\n    const act_t *layer_input = i > 0 ? slot + %lld + (int64_t)(i - 1) * IO_ELEMS : "
            "input;\n",
            (long long)s->layers);
    fprintf(f,
            "    r->rerun = 1; /* re-run: what backward reads */\n    block_forward(r, %d + i, "
            "layer_input, saved, r->scratch);\n    r->rerun = 0;\n",
            c->first_layer);
  } else {
    fprintf(
        f,
        ";\n    const act_t *layer_input = i > 0 ? saved - BLOCK_SAVED + BLOCK_OUTPUT : input;\n");
  }
  if (c->has_embed) fprintf(f, "    act_t *dx = dy == r->grad_a ? r->grad_b : r->grad_a;\n");
  else
    fprintf(f, "    act_t *dx = i == 0 ? slot + %lld : dy == r->grad_a ? r->grad_b : r->grad_a;\n",
            (long long)s->grad_in);
  fprintf(f, "    block_backward(r, %d + i, layer_input, saved, dy, dx, r->scratch);\n",
          c->first_layer);
  fprintf(f,
          "    rt_layer_backward_done(r, %d + i); /* its gradients may be final: reduce them "
          "meanwhile */\n",
          c->first_layer);
  fprintf(f, "    dy = dx;\n  }\n");
  if (c->has_embed)
    fprintf(f, "  embed_backward(r, tokens, slot + %lld, dy, r->scratch);\n", (long long)s->embed);
  fprintf(f, "}\n\n");
}

static void chunk_comment(const Plan *p, int index, const ChunkMemory *s, FILE *f) {
  const Chunk *c = &p->chunks[index];
  fprintf(f,
          "/* Chunk %d, pipeline rank %d: %slayers %d-%d%s. Its slot (one microbatch in flight) "
          "holds %lld elements:",
          index, c->rank, c->has_embed ? "embedding, " : "", c->first_layer,
          c->first_layer + c->layers - 1, c->has_head ? ", head" : "", (long long)s->size);
  if (s->input >= 0) fprintf(f, "\n * the input at %lld,", (long long)s->input);
  if (s->embed >= 0)
    fprintf(f, "\n * the embedding's saved activations at %lld,", (long long)s->embed);
  if (s->layers >= 0)
    fprintf(f, "\n * each layer's %s from %lld,",
            p->par.recompute == RECOMPUTE_FULL
                ? "output (its activations are re-run before its backward)"
                : "saved activations",
            (long long)s->layers);
  if (s->head >= 0) fprintf(f, "\n * the head's at %lld,", (long long)s->head);
  if (s->output >= 0) fprintf(f, "\n * the output sent on at %lld,", (long long)s->output);
  if (s->grad_out >= 0) fprintf(f, "\n * its gradient, received, at %lld,", (long long)s->grad_out);
  if (s->grad_in >= 0)
    fprintf(f, "\n * the input's gradient, sent back, at %lld,", (long long)s->grad_in);
  fprintf(f, "\n * (-1: none). */\n");
}

/* Elements the fused elementwise kernels of a stage's forward (or backward) read and write: each
 * kernel's output and its inputs that do not repeat (a repeating bias or table is read once). */
static int64_t stage_elementwise(const Emission *e, int stage, int backward) {
  const Graph *g = e->stage[stage];
  int64_t elems = 0;
  for (int i = backward ? g->nforward : 0; i < (backward ? g->nnodes : g->nforward); i++) {
    int kernel = e->kernels.kernel_of[stage][i];
    if (kernel < 0) continue;
    const Node *n = &g->nodes[i];
    elems += emit_local_elems(e->plan, &g->tensors[n->out[0]]);
    for (int k = 0; k < n->nin; k++)
      if (!e->kernels.kernels[kernel].broadcast[k])
        elems += emit_local_elems(e->plan, &g->tensors[n->in[k]]);
  }
  return elems;
}

/* A chunk's: its stages' in one microbatch, the blocks' re-run forward counted in its backward. */
static int64_t chunk_elementwise(const Emission *e, const Chunk *k, int backward) {
  int64_t block = stage_elementwise(e, STAGE_BLOCK, backward);
  if (backward && e->plan->par.recompute == RECOMPUTE_FULL)
    block += stage_elementwise(e, STAGE_BLOCK, 0);
  return (k->has_embed ? stage_elementwise(e, STAGE_EMBED, backward) : 0) + k->layers * block +
         (k->has_head ? stage_elementwise(e, STAGE_HEAD, backward) : 0);
}

static void chunk_table(const Emission *e, FILE *f) {
  const Plan *p = e->plan;
  fprintf(f,
          "static const ChunkSpec chunks[] = {\n  /* first layer, layers, embed, head, slot "
          "elements, input, output, "
          "gradient received, gradient sent,\n     elements of fused elementwise kernels forward "
          "and backward, "
          "functions */\n");
  for (int c = 0; c < p->nchunks; c++) {
    const Chunk *k = &p->chunks[c];
    const ChunkMemory *s = &p->chunk_memory[c];
    fprintf(f,
            "  {%d, %d, %d, %d, %lld, %lld, %lld, %lld, %lld, %lld, %lld, chunk_%d_forward, "
            "chunk_%d_backward},\n",
            k->first_layer, k->layers, k->has_embed, k->has_head, (long long)s->size,
            (long long)s->input, (long long)s->output, (long long)s->grad_out,
            (long long)s->grad_in, (long long)chunk_elementwise(e, k, 0),
            (long long)chunk_elementwise(e, k, 1), c, c);
  }
  fprintf(f, "};\n\n");
}

/* ---- configuration -------------------------------------------------------------------------- */

static int by_key(const void *a, const void *b) {
  return strcmp(((const ConfigEntry *)a)->key, ((const ConfigEntry *)b)->key);
}

/* The model's configuration by key (sorted: Lua's table order is not fixed), which checkpoints
 * record and loading compares. plait.model requires seq and hidden, so the table is never empty. */
static void config_table(const Model *m, FILE *f) {
  ConfigEntry *sorted = malloc((size_t)m->nconfig * sizeof *sorted);
  memcpy(sorted, m->config, (size_t)m->nconfig * sizeof *sorted);
  qsort(sorted, (size_t)m->nconfig, sizeof *sorted, by_key);
  fprintf(f, "/* The model's configuration (");
  escape_write(ESC_C_COMMENT, m->file, f);
  fprintf(f, " after --set), which checkpoints record. */\nstatic const ConfigItem config[] = {\n");
  for (int i = 0; i < m->nconfig; i++) {
    fprintf(f, "  {");
    escape_write(ESC_C_STRING, sorted[i].key, f);
    fprintf(f, ", ");
    escape_write(ESC_C_STRING, sorted[i].value, f);
    fprintf(f, "},\n");
  }
  fprintf(f, "};\n\n");
  free(sorted);
}

/* ---- model.c -------------------------------------------------------------------------------- */

static void header(const Plan *p, FILE *f) {
  const Parallel *par = &p->par;
  char name[ESCAPED_SIZE(NAME_LEN)], file[ESCAPED_SIZE(WHERE_LEN)],
      schedule[ESCAPED_SIZE(sizeof par->schedule)];
  escape(ESC_C_COMMENT, p->model.name, name, sizeof name);
  escape(ESC_C_COMMENT, p->model.file, file, sizeof file);
  escape(ESC_C_COMMENT, par->schedule, schedule, sizeof schedule);
  fprintf(f,
          "/* model.c: %s (%s) compiled by plait for tp %d × pp %d × dp %d, vpp %d, microbatch %d, "
          "global batch %d\n"
          " * (%d microbatches per pipeline), schedule %s, recompute %s, sequence parallel %s, "
          "gradients reduced\n"
          " * %s. Generated: rebuild with plait build rather than editing. Sizes are one "
          "tensor-parallel\n"
          " * rank's. */\n",
          name, file, par->tp, par->pp, par->dp, par->vpp, par->mbs, par->gbs, p->microbatches,
          schedule, parallel_recompute_name(par->recompute), par->sequence_parallel ? "on" : "off",
          par->grad_reduce_after ? "after the backward" : "during the backward");
  fprintf(f, "#include \"device.h\"\n#include \"fused.h\"\n#include \"rt.h\"\n");
  fprintf(f,
          "#include \"profiled.h\" /* under --profile, each runtime kernel's time, FLOPs and bytes "
          "*/\n\n");
}

static void sizes(const Emission *e, FILE *f) {
  fprintf(f,
          "/* Activations of one microbatch, in elements: what each stage keeps for its backward "
          "pass, and where\n"
          " * its output (the next stage's input) sits in that (64-bit: a large vocabulary's "
          "logits pass 2^31). */\n");
  fprintf(f, "#define EMBED_SAVED INT64_C(%lld)\n#define EMBED_OUTPUT INT64_C(%lld)\n",
          (long long)e->memory[STAGE_EMBED].saved, (long long)stage_output_offset(e, STAGE_EMBED));
  fprintf(f, "#define BLOCK_SAVED INT64_C(%lld)\n#define BLOCK_OUTPUT INT64_C(%lld)\n",
          (long long)e->memory[STAGE_BLOCK].saved, (long long)stage_output_offset(e, STAGE_BLOCK));
  fprintf(f, "#define HEAD_SAVED INT64_C(%lld)\n", (long long)e->memory[STAGE_HEAD].saved);
  fprintf(
      f, "#define IO_ELEMS INT64_C(%lld) /* the activation passed between layers and chunks */\n\n",
      (long long)e->plan->io_elems);
}

/* The logits in the last chunk's slot: the tensor the head's cross entropy reads. */
static int logits_tensor(const Graph *head) {
  for (int i = 0; i < head->nforward; i++)
    if (head->nodes[i].op == OP_XENT) return head->nodes[i].in[0];
  return -1;
}

static int64_t logits_offset(const Emission *e) {
  const Plan *p = e->plan;
  int z = logits_tensor(e->stage[STAGE_HEAD]);
  if (z < 0 || e->memory[STAGE_HEAD].region[z] != REGION_SAVED) return -1;
  return p->chunk_memory[p->nchunks - 1].head + e->memory[STAGE_HEAD].offset[z];
}

static int64_t logits_cols(const Emission *e) {
  int z = logits_tensor(e->stage[STAGE_HEAD]);
  if (z < 0) return 0;
  const Tensor *t = &e->stage[STAGE_HEAD]->tensors[z];
  return emit_local_dim(e->plan, t, t->ndim - 1);
}

static void program(const Emission *e, FILE *f) {
  const Plan *p = e->plan;
  const Model *m = &p->model;
  char name[ESCAPED_SIZE(NAME_LEN)], file[ESCAPED_SIZE(WHERE_LEN)];
  fprintf(f, "const Program plait_program = {\n");
  fprintf(f, "  .name = %s, .source = %s,\n", escape(ESC_C_STRING, m->name, name, sizeof name),
          escape(ESC_C_STRING, m->file, file, sizeof file));
  fprintf(f,
          "  .tp = %d, .pp = %d, .vpp = %d, .dp = %d, .mbs = %d, .gbs = %d, .microbatches = %d,\n",
          p->par.tp, p->par.pp, p->par.vpp, p->par.dp, p->par.mbs, p->par.gbs, p->microbatches);
  if (p->par.ep > 1) fprintf(f, "  .ep = %d,\n", p->par.ep); /* left out: 0, no experts spread */
  fprintf(f, "  .seq = %lld, .hidden = %lld, .layers = %d,\n", (long long)m->dims[m->seq_dim].size,
          (long long)m->dims[m->hidden_dim].size, m->layers);
  fprintf(f, "  .vocab = %lld, .vocab_padded = %lld,\n",
          (long long)(m->vocab_dim >= 0 ? m->dims[m->vocab_dim].unpadded : 0),
          (long long)(m->vocab_dim >= 0 ? m->dims[m->vocab_dim].size : 0));
  if (m->nconstants) fprintf(f, "  .constants = constants, .nconstants = %d,\n", m->nconstants);
  fprintf(f,
          "  .recompute = %d, .sequence_parallel = %d, .grad_reduce_after = %d, .masked_lm = %d,\n",
          p->par.recompute, p->par.sequence_parallel, p->par.grad_reduce_after, p->masked_lm);
  if (p->par.distributed_optimizer) fprintf(f, "  .distributed_optimizer = 1,\n");
  if (m->tp_copies > 1) fprintf(f, "  .tp_copies = %d,\n", m->tp_copies);
  if (p->par.scatter_gather && p->par.tp > 1 && p->par.pp > 1 && !p->par.sequence_parallel)
    fprintf(f, "  .scatter_gather = 1,\n");
  fprintf(f, "  .config = config, .nconfig = %d,\n", m->nconfig);
  fprintf(f, "  .model_params = model_params, .nmodel_params = %d,\n",
          count_params(m, SCOPE_MODEL));
  fprintf(f, "  .block_params = block_params, .nblock_params = %d,\n",
          count_params(m, SCOPE_BLOCK));
  fprintf(f, "  .chunks = chunks, .nchunks = %d,\n", p->nchunks);
  fprintf(
      f, "  .actions = actions, .nactions = nactions, .slots = slots, .footprints = footprints,\n");
  fprintf(f, "  .scratch_elems = %lld, .recompute_elems = %lld, .io_elems = IO_ELEMS,\n",
          (long long)p->scratch_elems, (long long)p->recompute_elems);
  fprintf(f, "  .logits_offset = %lld, .logits_cols = %lld,\n", (long long)logits_offset(e),
          (long long)logits_cols(e));
  fprintf(f, "  .flops_per_iteration = %.17g,\n};\n", p->cost.flops_per_iteration);
}

static void model_c(const Emission *e, FILE *f) {
  const Plan *p = e->plan;
  header(p, f);
  fprintf(f,
          "/* Parameters at model scope (r->model_w[P_...]) and of each layer "
          "(r->layer_w[layer][L_...]). */\n");
  param_enum(&p->model, SCOPE_MODEL, f);
  param_enum(&p->model, SCOPE_BLOCK, f);
  fprintf(f, "\n");
  if (p->model.nconstants) constant_enum(&p->model, f);
  emit_dims_enum(e, f);
  sizes(e, f);
  emit_stages(e, f);
  for (int c = 0; c < p->nchunks; c++) {
    chunk_comment(p, c, &p->chunk_memory[c], f);
    chunk_forward(p, c, &p->chunk_memory[c], f);
    chunk_backward(p, c, &p->chunk_memory[c], f);
  }
  param_table(p, SCOPE_MODEL, "model_params", f);
  param_table(p, SCOPE_BLOCK, "block_params", f);
  if (p->model.nconstants) constant_tables(&p->model, f);
  chunk_table(e, f);
  emit_plan_tables(p, f);
  config_table(&p->model, f);
  program(e, f);
}

/* ---- files ---------------------------------------------------------------------------------- */

typedef void (*Writer)(const Emission *e, FILE *f);

/* Writes one file of DIR through a temporary name of the folder's; the model file may not be one
 * of them. */
static int write_file(const Emission *e, const OwnFolder *dir, const char *name, Writer write,
                      Diag *d) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir->path, name);
  const char *inputs[] = {e->plan->model.file};
  OutFile out;
  if (outfile_check("-o", path, inputs, 1, d) ||
      outfile_open_in(&out, dir, name, path, sizeof path, d))
    return -1;
  write(e, out.file);
  return outfile_close(&out, d);
}

int emit_program(const Plan *p, const OwnFolder *dir, Diag *d) {
  Emission e = {
      .plan = p, .stage = {&p->model.embed, &p->model.block, &p->model.head}, .memory = p->memory};
  emit_collect_kernels(&e);
  e.dim_constant = emit_dim_constants(&p->model);
  int status = write_file(&e, dir, "model.c", model_c, d);
  if (status == 0) status = write_file(&e, dir, "fused.h", emit_kernels_h, d);
  if (status == 0) status = write_file(&e, dir, "fused.c", emit_kernels_c, d);
  if (status == 0) status = write_file(&e, dir, "fused_cuda.c", emit_kernels_cuda, d);
  if (status == 0 && emit_has_constants_file(&p->model)) status = constants_bin(&p->model, dir, d);
  free(e.dim_constant);
  emit_free_kernels(&e.kernels);
  return status;
}
