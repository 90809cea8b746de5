/* plan_json.c: the plan as JSON, for programs. */
#include <stddef.h>

#include "escape.h"
#include "front/layout_fields.h"
#include "plan/plan.h"

static const char *const coll_keys[COLL_KINDS] = {"allreduce", "allgather", "reducescatter"};

static void counts(const int c[COLL_KINDS], FILE *f) {
  fprintf(f, "{");
  for (int k = 0; k < COLL_KINDS; k++)
    fprintf(f, "%s\"%s\": %d", k ? ", " : "", coll_keys[k], c[k]);
  fprintf(f, "}");
}

static void stage_collectives(const char *name, const GraphCost *s, FILE *f) {
  fprintf(f, "\"%s\": {\"forward\": ", name);
  counts(s->collectives[PASS_FORWARD], f);
  fprintf(f, ", \"backward\": ");
  counts(s->collectives[PASS_BACKWARD], f);
  fprintf(f, "}");
}

static void write_layout_value(const LayoutField *field, const Parallel *par, FILE *f) {
  char value[LAYOUT_VALUE_LEN];
  layout_field_value(field, par, NULL, value, sizeof value);
  if (field->kind == FIELD_SWITCH) fputs(LAYOUT_INT(field, par) ? "true" : "false", f);
  else if (field->kind == FIELD_SIZE) fputs(value, f);
  else escape_write(ESC_JSON, value, f);
}

/* Every field by its key; the microbatches the global batch makes follow it. */
void plan_write_layout_json(const Parallel *par, FILE *f) {
  fprintf(f, "{");
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    fprintf(f, "%s\"%s\": ", i ? ", " : "", layout_fields[i].key);
    write_layout_value(&layout_fields[i], par, f);
    if (layout_fields[i].offset == offsetof(Parallel, gbs))
      fprintf(f, ", \"microbatches\": %d", parallel_microbatches(par));
  }
  fprintf(f, "}");
}

static void model(const Plan *p, FILE *f) {
  const Model *m = &p->model;
  char name[ESCAPED_SIZE(NAME_LEN)];
  fprintf(f, "  \"model\": {\"name\": %s, \"layers\": %d",
          escape(ESC_JSON, m->name, name, sizeof name), m->layers);
  if (m->vocab_dim >= 0)
    fprintf(f, ", \"vocab\": %lld, \"vocab_padded\": %lld",
            (long long)m->dims[m->vocab_dim].unpadded, (long long)m->dims[m->vocab_dim].size);
  fprintf(f, ", \"tied\": %s},\n", m->tied ? "true" : "false");
}

static void rank(const Plan *p, int r, FILE *f) {
  const RankMemory *m = &p->ranks[r];
  fprintf(f, "    {\"rank\": %d, \"chunks\": [", r);
  for (int c = r, n = 0; c < p->nchunks; c += p->par.pp) fprintf(f, "%s%d", n++ ? ", " : "", c);
  fprintf(f, "], \"layers\": [");
  for (int c = r, n = 0; c < p->nchunks; c += p->par.pp)
    for (int l = 0; l < p->chunks[c].layers; l++)
      fprintf(f, "%s%d", n++ ? ", " : "", p->chunks[c].first_layer + l);
  double per_microbatch = 0;
  for (int c = r; c < p->nchunks; c += p->par.pp) per_microbatch += (double)p->chunk_memory[c].size;
  fprintf(f, "], \"embed\": %s, \"head\": %s, \"params\": %lld, \"memory_bytes\": %.0f,\n",
          p->chunks[r].has_embed ? "true" : "false",
          p->chunks[p->nchunks - 1].rank == r ? "true" : "false", (long long)m->params, m->total);
  fprintf(f, "     \"activation_bytes_per_microbatch\": %.0f,\n",
          per_microbatch * p->machine.activation_bytes);
  fprintf(f,
          "     \"memory\": {\"weights\": %.0f, \"gradients\": %.0f, \"optimizer\": %.0f, "
          "\"activations\": %.0f, "
          "\"fp32_total\": %.0f, \"bf16_total\": %.0f}, \"peak_inflight_microbatches\": %.6g",
          m->weights[p->precision], m->gradients[p->precision], m->optimizer[p->precision],
          m->activations,
          m->weights[PRECISION_FP32] + m->gradients[PRECISION_FP32] + m->optimizer[PRECISION_FP32] +
              m->activations,
          m->weights[PRECISION_BF16] + m->gradients[PRECISION_BF16] + m->optimizer[PRECISION_BF16] +
              m->activations,
          m->peak_inflight);
  if (p->par.distributed_optimizer)
    fprintf(f, ", \"optimizer_sharded_over\": %g", plan_optimizer_shards(&p->par));
  fprintf(f, ",\n     \"actions\": [");
  const ActionList *list = &p->schedule.rank[r];
  for (int i = 0; i < list->count; i++) {
    char name[64];
    schedule_action_name(&list->action[i], name, sizeof name);
    fprintf(f, "%s\"%s\"", i ? ", " : "", name);
  }
  fprintf(f, "]}");
}

/* Where the iteration goes; with the distributed optimizer, the part of dp that is the weights'
 * all-gather. */
static void iteration_time(const Plan *p, FILE *f) {
  const IterationTime *t = &p->time;
  fprintf(f,
          "  \"time\": {\"compute\": %.17g, \"tp\": %.17g, \"bubble\": %.17g, \"pp\": %.17g, "
          "\"dp\": %.17g, \"optimizer\": %.17g",
          t->compute, t->tp, t->bubble, t->pp, t->dp, t->optimizer);
  if (p->par.distributed_optimizer) fprintf(f, ", \"dp_weight_gather\": %.17g", t->gather);
  fprintf(f, "},\n  \"flops_per_device\": %.17g,\n", plan_device_flops(p));
}

/* Key/value heads fewer than tp (only then): the ranks holding each, the parameters that adds a
 * layer per rank, and the bytes of their gradients' all-reduce a layer per rank. */
static void kv_copies(const Plan *p, FILE *f) {
  const GraphCost *b = &p->cost.block;
  int copies = p->model.tp_copies;
  if (copies <= 1 || b->params_copied_local == 0) return;
  fprintf(f,
          "  \"kv_head_copies\": {\"ranks_per_head\": %d, \"params_per_layer\": %lld, "
          "\"allreduce_bytes_per_layer\": %.17g},\n",
          copies, (long long)(b->params_copied_local - b->params_copied_local / copies),
          cost_ring_allreduce((double)b->copies_summed_bytes, copies));
}

void plan_write_json(const Plan *p, FILE *f) {
  const ModelCost *c = &p->cost;
  fprintf(f, "{\n");
  model(p, f);
  fprintf(f, "  \"layout\": ");
  plan_write_layout_json(&p->par, f);
  fprintf(f, ",\n");
  fprintf(f, "  \"machine\": ");
  escape_write(ESC_JSON, p->machine.name, f);
  fprintf(f, ",\n");
  fprintf(f,
          "  \"bubble_fraction\": %.17g,\n  \"iteration_time\": %.17g,\n  \"time_unit\": \"%s\",\n",
          p->timeline.bubble_fraction, p->timeline.iteration, p->unit_costs ? "unit" : "s");
  if (!p->unit_costs) iteration_time(p, f);
  fprintf(f, "  \"params_total\": %lld,\n  \"params_padded\": %lld,\n", (long long)c->params_total,
          (long long)c->params_padded);
  if (c->params_active != c->params_total)
    fprintf(f, "  \"params_active\": %lld,\n", (long long)c->params_active);
  kv_copies(p, f);
  if (p->model.ep > 1) {
    ExpertRowsPlan x = plan_expert_rows(p);
    fprintf(f,
            "  \"experts\": {\"ep\": %d, \"alltoall_bytes_per_layer\": {\"forward\": %.17g, "
            "\"backward\": %.17g}, \"exchanges_per_layer\": {\"forward\": %d, \"backward\": "
            "%d}, \"received_rows\": {\"balanced\": %lld, \"worst\": %lld}, "
            "\"received_bytes_kept\": {\"balanced\": %.17g, \"worst\": %.17g}},\n",
            p->model.ep, p->cost.block.ep_bytes[PASS_FORWARD],
            p->cost.block.ep_bytes[PASS_BACKWARD], p->cost.block.ep_exchanges[PASS_FORWARD],
            p->cost.block.ep_exchanges[PASS_BACKWARD], (long long)x.rows,
            (long long)x.worst_rows, x.bytes, x.worst_bytes);
  }
  fprintf(
      f,
      "  \"flops_per_iteration\": %.17g,\n  \"flops\": {\"forward\": %.17g, \"backward\": %.17g, "
      "\"recompute\": %.17g},\n",
      c->flops_per_iteration, c->flops_forward, c->flops_backward, c->flops_recompute);
  fprintf(f, "  \"collectives\": {\n    \"per_layer\": {\"forward\": ");
  counts(c->block.collectives[PASS_FORWARD], f);
  fprintf(f, ", \"backward\": ");
  counts(c->block.collectives[PASS_BACKWARD], f);
  fprintf(f, "},\n    ");
  stage_collectives("embed", &c->embed, f);
  fprintf(f, ",\n    ");
  stage_collectives("head", &c->head, f);
  fprintf(f,
          ",\n    \"per_iteration\": {\"tp\": %.0f, \"pp\": %.0f, \"pp_across_nodes\": %.0f, "
          "\"dp\": %.0f, \"embed\": %.0f}\n  },\n",
          p->bytes_tp, p->bytes_pp, p->bytes_pp_nodes, p->bytes_dp, p->bytes_embed);
  fprintf(f, "  \"ranks\": [\n");
  for (int r = 0; r < p->par.pp; r++) {
    rank(p, r, f);
    fprintf(f, r + 1 < p->par.pp ? ",\n" : "\n");
  }
  fprintf(f, "  ]\n}\n");
}
