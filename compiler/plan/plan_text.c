/* plan_text.c: the plan as one screen a person reads. */
#include <string.h>

#include "bytes.h"
#include "escape.h"
#include "front/layers.h"
#include "front/layout_fields.h"
#include "plan/plan.h"

static const char *const coll_names[COLL_KINDS] = {"all-reduce", "all-gather", "reduce-scatter"};

static const char *config_value(const Model *m, const char *key) {
  for (int i = 0; i < m->nconfig; i++)
    if (strcmp(m->config[i].key, key) == 0) return m->config[i].value;
  return NULL;
}

static void print_model(const Plan *p, FILE *f) {
  const Model *m = &p->model;
  char name[ESCAPED_SIZE(NAME_LEN)], file[ESCAPED_SIZE(WHERE_LEN)], value[ESCAPED_SIZE(NAME_LEN)];
  fprintf(f, "plan        %s (%s)\n", escape(ESC_TEXT, m->name, name, sizeof name),
          escape(ESC_TEXT, m->file, file, sizeof file));
  fprintf(f, "model       %d layers", m->layers);
  static const char *const keys[] = {"hidden", "heads", "kv_heads", "ffn", "seq", NULL};
  for (int i = 0; keys[i]; i++)
    if (config_value(m, keys[i]))
      fprintf(f, ", %s %s", keys[i],
              escape(ESC_TEXT, config_value(m, keys[i]), value, sizeof value));
  if (m->vocab_dim >= 0) {
    const Dim *v = &m->dims[m->vocab_dim];
    fprintf(f, ", vocab %lld padded to %lld (+%lld, a multiple of 128·tp)", (long long)v->unpadded,
            (long long)v->size, (long long)(v->size - v->unpadded));
  }
  fprintf(f, "\n");
}

/* One value of an option and the layers that take it: "4096 at 21 layers (0, 2, 4, …)". */
static void print_option_value(const Model *m, int row, int k, int first, FILE *f) {
  double v = layers_option(m, row, k, first);
  int count = 0, shown = 0;
  for (int l = 0; l < m->layers; l++) count += layers_option(m, row, k, l) == v;
  if (v == 0) fprintf(f, "none");
  else fprintf(f, "%g", v);
  fprintf(f, " at %d layer%s (", count, count == 1 ? "" : "s");
  for (int l = first; l < m->layers && shown < 3; l++)
    if (layers_option(m, row, k, l) == v) fprintf(f, "%s%d", shown++ ? ", " : "", l);
  fprintf(f, "%s)", count > 3 ? ", …" : "");
}

/* Attention options that differ by layer (a block reading L.layer): each value with its layers. */
static void print_layer_options(const Plan *p, FILE *f) {
  const Model *m = &p->model;
  for (int row = 0; row < m->nlayer_attn; row++)
    for (int k = 0; k < LAYER_OPTIONS; k++) {
      if (!layers_option_differs(m, row, k)) continue;
      fprintf(f, "layers      attention %d's %s by layer: ", row, layer_option_names[k]);
      for (int l = 0; l < m->layers; l++) {
        int seen = 0;
        for (int e = 0; e < l; e++)
          seen |= layers_option(m, row, k, e) == layers_option(m, row, k, l);
        if (seen) continue;
        if (l) fprintf(f, "; ");
        print_option_value(m, row, k, l, f);
      }
      fprintf(f, "\n");
    }
}

/* The sizes in a line of their own, with the ranks and microbatches they make; then every other
 * field as the layout's table spells it. */
void plan_write_layout_text(const Parallel *par, FILE *f) {
  fprintf(f,
          "layout      tp %d × pp %d × dp %d = %d ranks, vpp %d; microbatch %d, global batch %d = "
          "%d microbatches "
          "per pipeline\n            ",
          par->tp, par->pp, par->dp, par->tp * par->pp * par->dp, par->vpp, par->mbs, par->gbs,
          parallel_microbatches(par));
  if (par->ep > 1) fprintf(f, "ep %d (the experts over that many data-parallel ranks), ", par->ep);
  const char *separator = "";
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    const LayoutField *field = &layout_fields[i];
    char value[LAYOUT_VALUE_LEN], shown[ESCAPED_SIZE(LAYOUT_VALUE_LEN)];
    if (field->in_shape) continue;
    fputs(separator, f);
    layout_field_value(field, par, NULL, value, sizeof value);
    fprintf(f, field->text, escape(ESC_TEXT, value, shown, sizeof shown));
    separator = ", ";
  }
  fprintf(f, "\n");
}

static void print_layout(const Plan *p, FILE *f) {
  plan_write_layout_text(&p->par, f);
  fprintf(f, "machine     ");
  escape_write(ESC_TEXT, p->machine.name, f);
  fprintf(f, ": ");
  escape_write(ESC_TEXT, p->machine.about, f);
  fprintf(f, "\n");
}

static void print_costs(const Plan *p, FILE *f) {
  const ModelCost *c = &p->cost;
  fprintf(f, "parameters  %lld (%lld with padding)", (long long)c->params_total,
          (long long)c->params_padded);
  if (c->params_active != c->params_total) /* a mixture of experts: its experts' k of E */
    fprintf(f, ", %lld active per token", (long long)c->params_active);
  if (c->params_active != c->params_total && c->params_active >= 1000000000)
    fprintf(f, " (%.3gB)", (double)c->params_active / 1e9);
  fprintf(f, "\n");
  fprintf(f,
          "FLOPs       %.4g per iteration = forward %.4g + backward %.4g + recompute %.4g (GEMMs "
          "and attention)\n",
          c->flops_per_iteration, c->flops_forward, c->flops_backward, c->flops_recompute);
}

/* Long pipelines show their first and last ranks; the JSON form has them all. */
static int shown(const Plan *p, int rank) {
  return p->par.pp <= 8 || rank < 3 || rank >= p->par.pp - 3;
}

static void print_ellipsis(const Plan *p, int rank, FILE *f) {
  if (p->par.pp > 8 && rank == 3)
    fprintf(f, "            ... (ranks 3-%d like their neighbours; --format json lists all)\n",
            p->par.pp - 4);
}

static void print_chunks(const Plan *p, FILE *f) {
  for (int r = 0; r < p->par.pp; r++) {
    print_ellipsis(p, r, f);
    if (!shown(p, r)) continue;
    fprintf(f, r == 0 ? "chunks      " : "            ");
    fprintf(f, "rank %d:", r);
    for (int c = r; c < p->nchunks; c += p->par.pp) {
      const Chunk *k = &p->chunks[c];
      fprintf(f, " [chunk %d: %s", c, k->has_embed ? "embed + " : "");
      if (k->layers == 1) fprintf(f, "layer %d", k->first_layer);
      else fprintf(f, "layers %d-%d", k->first_layer, k->first_layer + k->layers - 1);
      fprintf(f, "%s]", k->has_head ? " + head" : "");
    }
    fprintf(f, "\n");
  }
}

static void print_counts(const int counts[COLL_KINDS], FILE *f) {
  int any = 0;
  for (int k = 0; k < COLL_KINDS; k++)
    if (counts[k]) fprintf(f, "%s%d %s", any++ ? ", " : "", counts[k], coll_names[k]);
  if (!any) fprintf(f, "none");
}

static void print_collectives(const Plan *p, FILE *f) {
  const ModelCost *c = &p->cost;
  const struct { const char *name; const GraphCost *s; } stages[] = {
      {"per layer", &c->block}, {"embed", &c->embed}, {"head", &c->head}};
  for (int i = 0; i < 3; i++) {
    fprintf(f, i == 0 ? "collectives " : "            ");
    fprintf(f, "%-9s forward: ", stages[i].name);
    print_counts(stages[i].s->collectives[PASS_FORWARD], f);
    fprintf(f, "; backward: ");
    print_counts(stages[i].s->collectives[PASS_BACKWARD], f);
    fprintf(f, "\n");
  }
  char tp[32], pp[32], dp[32], em[32];
  bytes_format(p->bytes_tp, tp, sizeof tp);
  bytes_format(p->bytes_pp, pp, sizeof pp);
  bytes_format(p->bytes_dp, dp, sizeof dp);
  bytes_format(p->bytes_embed, em, sizeof em);
  fprintf(f, "traffic     per rank per iteration: TP %s, PP %s", tp, pp);
  if (p->bytes_pp_nodes > 0) {
    char nodes[32];
    bytes_format(p->bytes_pp_nodes, nodes, sizeof nodes);
    fprintf(f, " (%s across nodes%s)", nodes,
            p->pp_scattered ? ", scattered over TP and gathered in the node" : "");
  }
  fprintf(f, ", DP %s, tied embedding %s\n", dp, em);
}

/* Key/value heads fewer than tp: what holding each on several ranks adds per layer to each rank's
 * parameters (in the memory table) and to its TP traffic (the gradients' all-reduce over the ranks
 * holding a head, once per iteration). */
static void print_kv_copies(const Plan *p, FILE *f) {
  const GraphCost *b = &p->cost.block;
  int copies = p->model.tp_copies;
  if (copies <= 1 || b->params_copied_local == 0) return;
  char sent[32];
  bytes_format(cost_ring_allreduce((double)b->copies_summed_bytes, copies), sent, sizeof sent);
  fprintf(f,
          "kv heads    each key/value head held by %d of the %d TP ranks: +%lld parameters a "
          "layer per rank; their gradients all-reduced over those %d ranks once per iteration, "
          "%s a layer per rank (in TP traffic)\n",
          copies, p->par.tp, (long long)(b->params_copied_local - b->params_copied_local / copies),
          copies, sent);
}

/* Experts spread over ep ranks: what each holds, and the bytes its all-to-alls send per layer and
 * microbatch under uniform routing (routed·(ep−1)/ep rows of the hidden width per exchange). */
static void print_experts(const Plan *p, FILE *f) {
  const GraphCost *b = &p->cost.block;
  if (p->model.ep <= 1) return;
  char forward[32], backward[32];
  bytes_format(b->ep_bytes[PASS_FORWARD], forward, sizeof forward);
  bytes_format(b->ep_bytes[PASS_BACKWARD], backward, sizeof backward);
  fprintf(f,
          "experts     spread over ep %d ranks, 1/%d of each mixture's experts a rank; all-to-all "
          "a layer per microbatch per rank, uniform routing: %s forward (%d exchanges), %s "
          "backward (%d)\n",
          p->model.ep, p->model.ep, forward, b->ep_exchanges[PASS_FORWARD], backward,
          b->ep_exchanges[PASS_BACKWARD]);
  ExpertRowsPlan x = plan_expert_rows(p);
  char kept[32], worst[32];
  bytes_format(x.bytes, kept, sizeof kept);
  bytes_format(x.worst_bytes, worst, sizeof worst);
  fprintf(f,
          "            rows a rank's experts receive, sized at run time: %lld a mixture per "
          "microbatch under balanced routing, kept for backward %s on rank 0 (counted below); "
          "at worst %lld, %s%s\n",
          (long long)x.rows, kept, (long long)x.worst_rows, worst,
          x.worst_rows < p->model.ep * x.rows ? " (the experts' capacity)" : "");
}

/* What each column holds in the machine's precision; with the distributed optimizer, the ranks
 * the optimizer column is sharded over. */
static void print_memory_header(const Plan *p, FILE *f) {
  int sharded = p->par.distributed_optimizer, bf16 = p->precision == PRECISION_BF16;
  fprintf(f, "memory      per rank, %s",
          bf16      ? "bf16 weights, fp32 gradients, fp32 master weights and Adam"
          : sharded ? "fp32 weights and gradients, Adam"
                    : "fp32 weights, gradients and Adam");
  if (sharded && p->par.dp > 1) fprintf(f, " sharded over dp %d", p->par.dp);
  else if (sharded) fprintf(f, " (distributed optimizer on, dp 1: nothing to shard)");
  fprintf(f, ":\n");
}

static void print_memory(const Plan *p, FILE *f) {
  print_memory_header(p, f);
  fprintf(f,
          "            rank  parameters     weights   gradients   optimizer  activations  "
          "(µbatches)       total\n");
  for (int r = 0; r < p->par.pp; r++) {
    print_ellipsis(p, r, f);
    if (!shown(p, r)) continue;
    const RankMemory *m = &p->ranks[r];
    char w[32], g[32], o[32], a[32], t[32];
    bytes_format(m->weights[p->precision], w, sizeof w);
    bytes_format(m->gradients[p->precision], g, sizeof g);
    bytes_format(m->optimizer[p->precision], o, sizeof o);
    bytes_format(m->activations, a, sizeof a);
    bytes_format(m->total, t, sizeof t);
    fprintf(f, "            %4d  %10lld  %10s  %10s  %10s  %11s  (%8.3g)  %10s\n", r,
            (long long)m->params, w, g, o, a, m->peak_inflight, t);
  }
}

/* The simulated iteration, then every rank's actions in the text form plait check reads back. */
static void print_schedule(const Plan *p, FILE *f) {
  const Timeline *t = &p->timeline;
  fprintf(f,
          "pipeline    bubble %.4f of the ideal time (busiest rank's compute); iteration %.4g %s",
          t->bubble_fraction, t->iteration,
          p->unit_costs ? "units (forward 1, backward 2 per chunk, communication free)" : "s");
  if (!p->unit_costs) {
    fprintf(f, " on ");
    escape_write(ESC_TEXT, p->machine.name, f);
  }
  fprintf(f, "\n");
  if (!p->unit_costs) plan_print_time_breakdown(p, f);
  schedule_write_text(&p->schedule, f, 0);
}

void plan_write_text(const Plan *p, FILE *f) {
  print_model(p, f);
  print_layer_options(p, f);
  print_layout(p, f);
  print_costs(p, f);
  print_chunks(p, f);
  print_collectives(p, f);
  print_kv_copies(p, f);
  print_experts(p, f);
  print_memory(p, f);
  print_schedule(p, f);
}
