/* test_plan.c: the front end end to end: collectives per layer, parameter and FLOP counts against the
 * Megatron papers' formulas, gradients of every parameter, partition, and what planning costs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "options.h"
#include "plan/plan.h"

static const char *const all_flags[] = {OPTIONS_LAYOUT, "--set", "--format", "--machine", "--unit-costs",
                                        "--print", "-o", NULL};

/* Builds the plan of a command line such as "models/gpt.lua --tp 2"; returns 0 or -1 (message in d). */
static int plan_of(const char *command, Plan *p, Diag *d) {
  char buf[1024], *argv[64];
  int argc = 0;
  snprintf(buf, sizeof buf, "plait plan %s", command);
  for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
  Options o;
  if (options_parse(argc, argv, 2, all_flags, 1, &o, d)) return -1;
  return plan_build(&o, p, stdout, d);
}

static void expect_counts(const int c[COLL_KINDS], int ar, int ag, int rs, const char *what) {
  CHECK(c[COLL_ALLREDUCE] == ar && c[COLL_ALLGATHER] == ag && c[COLL_REDUCESCATTER] == rs,
        "%s: expected %d all-reduce, %d all-gather, %d reduce-scatter; got %d, %d, %d", what, ar, ag, rs,
        c[COLL_ALLREDUCE], c[COLL_ALLGATHER], c[COLL_REDUCESCATTER]);
}

static void check_layer(const char *command, int ar, int ag, int rs) {
  Plan p;
  Diag d;
  if (plan_of(command, &p, &d)) {
    CHECK(0, "%s: %s", command, d.msg);
    return;
  }
  expect_counts(p.cost.block.collectives[PASS_FORWARD], ar, ag, rs, command);
  expect_counts(p.cost.block.collectives[PASS_BACKWARD], ar, ag, rs, command);
  plan_free(&p);
}

/* Shoeybi et al.: a layer has 2 all-reduces forward and 2 backward; sequence parallelism turns each
 * into a reduce-scatter and an all-gather; one rank needs none. */
static void collectives_per_layer(void) {
  const char *models[] = {"models/gpt.lua --set layers=2 hidden=256 heads=8 seq=128", "models/llama.lua --set layers=2 hidden=256 heads=8 kv_heads=4 ffn=688 seq=128",
                          "models/bert.lua --set layers=2 hidden=256 heads=8 ffn=1024 seq=128", "models/tiny.lua"};
  for (unsigned i = 0; i < sizeof models / sizeof *models; i++) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "%s --tp 1", models[i]);
    check_layer(cmd, 0, 0, 0);
    snprintf(cmd, sizeof cmd, "%s --tp 2", models[i]);
    check_layer(cmd, 2, 0, 0);
    snprintf(cmd, sizeof cmd, "%s --tp 4 --sequence-parallel", models[i]);
    check_layer(cmd, 0, 2, 2);
  }
  /* A parallel block (x + attention + MLP): the two row-parallel outputs are partial sums, summed before
   * one reduction, and the biases are added after it: one all-reduce forward, one backward (its
   * adjoint), or one reduce-scatter and one all-gather under sequence parallelism. */
  check_layer("tests/cli/models/custom_block.lua --set heads=8 --tp 8", 1, 0, 0);
  check_layer("tests/cli/models/custom_block.lua --set heads=8 --tp 8 --sequence-parallel", 0, 1, 1);
}

/* Eq. 2 of Narayanan et al.: P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)); it leaves out the final layer
 * norm (2h). A vocabulary that is a multiple of 128·tp needs no padding. */
static void gpt_parameters_eq2(void) {
  const struct { int l, h, a; } sizes[] = {{24, 2048, 16}, {40, 5120, 40}, {96, 12288, 96}, {128, 25600, 160}};
  for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    char cmd[300];
    Plan p;
    Diag d;
    snprintf(cmd, sizeof cmd, "models/gpt.lua --set layers=%d hidden=%d heads=%d --tp 8", sizes[i].l, sizes[i].h, sizes[i].a);
    if (plan_of(cmd, &p, &d)) { CHECK(0, "%s", d.msg); continue; }
    double l = sizes[i].l, h = sizes[i].h, V = 51200, s = 2048;
    double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
    CHECK(fabs(p.cost.params_total - (eq2 + 2 * h)) < 0.5, "l=%d h=%d: %lld parameters, Eq. 2 + 2h = %.0f", sizes[i].l,
          sizes[i].h, (long long)p.cost.params_total, eq2 + 2 * h);
    CHECK(p.cost.params_padded == p.cost.params_total, "51200 is a multiple of 128·8: no padding");
    plan_free(&p);
  }
}

static void reference_parameter_counts(void) {
  Plan p;
  Diag d;
  if (plan_of("models/gpt2.lua", &p, &d) == 0) {
    CHECK(p.cost.params_total == 124439808LL, "GPT-2: %lld, expected 124,439,808", (long long)p.cost.params_total);
    CHECK(p.cost.params_padded == 124439808LL + 47 * 768, "GPT-2 with the vocabulary padded to 50304: %lld",
          (long long)p.cost.params_padded);
    plan_free(&p);
  } else CHECK(0, "%s", d.msg);
}

/* Each family at its published size (BERT: transformers' BertForMaskedLM less the row of the second token
 * type, which no input here uses). */
static void family_parameter_counts(void) {
  const struct { const char *cmd, *what; long long want; } families[] = {
      {"models/llama.lua", "Llama-2-7B", 6738415616LL},
      {"models/gemma.lua", "Gemma-7B", 8537680896LL},
      {"models/llama.lua --set vocab=128256 kv_heads=8 ffn=14336 rope_theta=500000", "Llama-3-8B", 8030261248LL},
      {"models/olmo2.lua", "OLMo-2-7B", 7298617344LL},
      {"models/qwen2.lua", "Qwen2-7B", 7615616512LL},
      {"models/mistral.lua", "Mistral-7B-v0.1", 7241732096LL},
      {"models/qwen3.lua", "Qwen3-8B", 8190735360LL},
      {"models/phi2.lua", "Phi-2", 2779683840LL},
      /* transformers' StableLmForCausalLM of its config; the model card says 12,143,605,760 */
      {"models/stablelm2.lua", "StableLM-2-12B", 12143185920LL},
      {"models/gemma2.lua", "Gemma-2-9B", 9241705984LL},
      {"models/bert.lua", "BERT-large", 335174458LL - 1024},
      {"models/pythia.lua", "Pythia-6.9B", 6857302016LL},
      /* GPT-J-6B's card says 6,053,381,344: transformers' 6,050,882,784 (plait's) plus what a sum
       * over mesh-transformer-jax's 8 shards adds, 7 more copies of each layer norm, fc_out bias
       * and the final norm (7 × 352,256) and an embedding bias of 4096 per shard, which the
       * conversion folds into wte. */
      {"models/gptj.lua", "GPT-J-6B", 6053381344LL - 7 * 352256LL - 8 * 4096LL},
      {"models/falcon.lua", "Falcon-7B", 6921720704LL},
      {"models/stablelm.lua", "StableLM-3B-4E1T", 2795443200LL},
      /* the cards say 3B and 35B: transformers' counts of the published configs */
      {"models/starcoder2.lua", "StarCoder2-3B", 3030371328LL},
      {"models/cohere.lua", "Command-R v01", 34980831232LL},
      /* every expert counted: transformers' MixtralForCausalLM of Mixtral-8x7B-v0.1's config */
      {"models/mixtral.lua", "Mixtral-8x7B", 46702792704LL},
      /* transformers' counts of the published configs (the cards say 14.3B, 30.5B and 6.9B) */
      {"models/qwen2_moe.lua", "Qwen1.5-MoE-A2.7B", 14315784192LL},
      {"models/qwen3_moe.lua", "Qwen3-30B-A3B", 30532122624LL},
      {"models/olmoe.lua", "OLMoE-1B-7B", 6919161856LL},
  };
  for (unsigned i = 0; i < sizeof families / sizeof *families; i++) {
    Plan p;
    Diag d;
    if (plan_of(families[i].cmd, &p, &d)) {
      CHECK(0, "%s", d.msg);
      continue;
    }
    CHECK(p.cost.params_total == families[i].want, "%s: %lld, expected %lld", families[i].what,
          (long long)p.cost.params_total, families[i].want);
    plan_free(&p);
  }
}

/* Mixtral-8x7B: a token computes with 2 of each layer's 8 experts, 12,879,925,248 parameters (the
 * "12.9B active"); its experts' GEMMs count the routed rows (tokens·2), not tokens·8. */
static void experts_active_parameters(void) {
  Plan p, q;
  Diag d;
  if (plan_of("models/mixtral.lua --set layers=1", &p, &d) ||
      plan_of("models/mixtral.lua --set layers=1 experts=2 topk=2", &q, &d)) {
    CHECK(0, "%s", d.msg);
    return;
  }
  int64_t experts = 3LL * 4096 * 14336;
  CHECK(p.cost.params_active == p.cost.params_total - 6 * experts, "%lld active of %lld",
        (long long)p.cost.params_active, (long long)p.cost.params_total);
  CHECK(q.cost.params_active == q.cost.params_total, "2 of 2 experts: all active");
  CHECK(fabs(p.cost.block.flops[0] - q.cost.block.flops[0]) < 2 * 4096 * 6 * 4096.0 + 1,
        "top-2 of 8 and of 2 compute alike but for the router: %g, %g", p.cost.block.flops[0],
        q.cost.block.flops[0]);
  plan_free(&p);
  plan_free(&q);
}

/* Eq. 3: F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) with recomputation, 72·...·(1 + s/(6h) + V/(12·l·h))
 * without: GEMMs and attention only, as the plan counts them. */
static void gpt_flops_eq3(void) {
  const struct { int l, h, a, gbs; const char *recompute; } runs[] = {
      {24, 2048, 16, 64, "full"}, {24, 2048, 16, 64, "none"}, {96, 12288, 96, 1536, "full"}, {128, 25600, 160, 3072, "none"}};
  for (unsigned i = 0; i < sizeof runs / sizeof *runs; i++) {
    char cmd[300];
    Plan p;
    Diag d;
    snprintf(cmd, sizeof cmd, "models/gpt.lua --set layers=%d hidden=%d heads=%d --tp 8 --gbs %d --recompute %s",
             runs[i].l, runs[i].h, runs[i].a, runs[i].gbs, runs[i].recompute);
    if (plan_of(cmd, &p, &d)) { CHECK(0, "%s", d.msg); continue; }
    double l = runs[i].l, h = runs[i].h, B = runs[i].gbs, s = 2048, V = 51200;
    int full = strcmp(runs[i].recompute, "full") == 0;
    double eq3 = full ? 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
                      : 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    CHECK(fabs(p.cost.flops_per_iteration / eq3 - 1) < 1e-12, "%s: %.6e FLOPs, Eq. 3 gives %.6e", cmd,
          p.cost.flops_per_iteration, eq3);
    plan_free(&p);
  }
}

static const Param *param_named(const Model *m, const char *name) {
  for (int i = 0; i < m->nparams; i++)
    if (strcmp(m->params[i].name, name) == 0) return &m->params[i];
  return NULL;
}

/* Sequence parallelism leaves norms and row-parallel biases with partial gradients over the TP group;
 * without it nothing replicated needs summing. Decided by the layouts, nothing tagged. */
static void tp_summed_gradients(void) {
  Plan p;
  Diag d;
  if (plan_of("models/tiny.lua --tp 2 --sequence-parallel", &p, &d)) { CHECK(0, "%s", d.msg); return; }
  const char *summed[] = {"ln_1.weight", "ln_1.bias", "attn.proj.bias", "mlp.proj.bias", "ln_f.weight", "wpe"};
  const char *not_summed[] = {"attn.q.weight", "attn.q.bias", "mlp.fc.weight", "mlp.proj.weight", "wte"};
  for (unsigned i = 0; i < sizeof summed / sizeof *summed; i++) {
    const Param *q = param_named(&p.model, summed[i]);
    CHECK(q && q->grad_tp_sum == (strcmp(summed[i], "wpe") != 0), "%s: grad_tp_sum %d", summed[i], q ? q->grad_tp_sum : -1);
  }
  for (unsigned i = 0; i < sizeof not_summed / sizeof *not_summed; i++) {
    const Param *q = param_named(&p.model, not_summed[i]);
    CHECK(q && !q->grad_tp_sum, "%s should not be summed over TP", not_summed[i]);
  }
  plan_free(&p);
  if (plan_of("models/tiny.lua --tp 2", &p, &d)) { CHECK(0, "%s", d.msg); return; }
  for (int i = 0; i < p.model.nparams; i++) CHECK(!p.model.params[i].grad_tp_sum, "%s summed without SP", p.model.params[i].name);
  plan_free(&p);
}

/* Does gradient tensor t accumulate into parameter p's gradient: its own, or a join's it is part of? */
static int grad_of_param(const Model *m, const Tensor *t, int p) {
  if (t->kind != T_PARAM_GRAD) return 0;
  if (t->join < 0) return t->param == p;
  for (int k = 0; k < m->joins[t->join].n; k++)
    if (m->joins[t->join].params[k] == p) return 1;
  return 0;
}

/* Every parameter receives a gradient somewhere, and every matmul's backward is two matmuls. */
static void every_parameter_has_a_gradient(void) {
  const char *models[] = {"models/tiny.lua --tp 2", "models/llama.lua --set layers=2 hidden=256 heads=8 kv_heads=2 ffn=688 seq=64",
                          "models/bert.lua --set layers=2 hidden=128 heads=4 ffn=512 seq=64 --tp 2 --sequence-parallel"};
  for (unsigned i = 0; i < sizeof models / sizeof *models; i++) {
    Plan p;
    Diag d;
    if (plan_of(models[i], &p, &d)) { CHECK(0, "%s: %s", models[i], d.msg); continue; }
    const Graph *graphs[3] = {&p.model.embed, &p.model.block, &p.model.head};
    for (int k = 0; k < p.model.nparams; k++) {
      int found = 0;
      for (int g = 0; g < 3; g++)
        for (int n = 0; n < graphs[g]->nnodes; n++)
          for (int o = 0; o < graphs[g]->nodes[n].nout; o++) {
            found |= grad_of_param(&p.model, &graphs[g]->tensors[graphs[g]->nodes[n].out[o]], k);
          }
      CHECK(found, "%s: parameter %s gets no gradient", models[i], p.model.params[k].name);
    }
    for (int g = 0; g < 3; g++) {
      int fwd = 0, bwd = 0;
      for (int n = 0; n < graphs[g]->nnodes; n++)
        if (graphs[g]->nodes[n].op == OP_MATMUL) *(graphs[g]->nodes[n].backward ? &bwd : &fwd) += 1;
      CHECK(bwd == 2 * fwd, "%s stage %s: %d forward matmuls but %d backward", models[i], graphs[g]->name, fwd, bwd);
    }
    plan_free(&p);
  }
}

static void partition_cuts(void) {
  Parallel par;
  Chunk chunks[8];
  Diag d;
  parallel_unset(&par);
  par.pp = 4, par.vpp = 1;
  snprintf(par.partition, sizeof par.partition, "balanced");
  /* a head worth 5.5 layers: the last chunk gets one layer, the rest spread evenly */
  CHECK(partition_layers(&par, 12, 0, 1, 5.5, chunks, &d) == 0, "%s", d.msg);
  int want[4] = {4, 4, 3, 1};
  for (int c = 0; c < 4; c++) CHECK(chunks[c].layers == want[c], "chunk %d: %d layers, want %d", c, chunks[c].layers, want[c]);
  CHECK(chunks[0].has_embed && chunks[3].has_head && !chunks[1].has_head, "embed first, head last");
  /* a light head: as even as Megatron's cut */
  CHECK(partition_layers(&par, 96, 0, 1, 0.35, chunks, &d) == 0, "%s", d.msg);
  for (int c = 0; c < 4; c++) CHECK(chunks[c].layers == 24, "chunk %d: %d layers", c, chunks[c].layers);
  par.vpp = 2;
  snprintf(par.partition, sizeof par.partition, "uniform");
  CHECK(partition_layers(&par, 10, 0, 1, 0, chunks, &d) != 0 && strstr(d.msg, "do not divide"), "uniform needs division: %s", d.msg);
  CHECK(partition_layers(&par, 16, 0, 1, 3, chunks, &d) == 0, "%s", d.msg);
  for (int c = 0; c < 8; c++) CHECK(chunks[c].layers == 2 && chunks[c].rank == c % 4, "uniform chunk %d", c);
  snprintf(par.partition, sizeof par.partition, "balanced");
  CHECK(partition_layers(&par, 7, 0, 1, 0, chunks, &d) != 0 && strstr(d.msg, "cannot be cut"), "7 layers, 8 chunks: %s", d.msg);
}

/* Narayanan et al.: per layer and microbatch a TP rank moves 8·b·s·h·(t−1)/t elements (2 all-reduces each
 * way, ring), with sequence parallelism too (2 all-gathers and 2 reduce-scatters each way); a pipeline
 * rank sends b·s·h per microbatch each way, b·s·h/t when the sequence is split over TP, and so when
 * it crosses nodes (tp·dp = 8 ranks a stage: a node each) scattered over TP (§4.1); whole with
 * --scatter-gather off; data parallelism all-reduces each rank's fp32 gradients, 2·(d−1)/d of them. */
static void communication_volumes(void) {
  const double b = 2, s = 512, h = 1024, t = 4, m = 8, d = 2;
  const char *base = "models/gpt.lua --set layers=8 hidden=1024 heads=16 seq=512 --tp 4 --pp 4 --dp 2 --mbs 2 --gbs 32";
  static const char *const variants[] = {"", " --sequence-parallel", " --scatter-gather off"};
  for (int sp = 0; sp <= 2; sp++) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "%s%s", base, variants[sp]);
    Plan p;
    Diag diag;
    if (plan_of(cmd, &p, &diag)) { CHECK(0, "%s: %s", cmd, diag.msg); continue; }
    double bytes = p.machine.activation_bytes, layer_elems = (p.cost.block.tp_bytes[0] + p.cost.block.tp_bytes[1]) / bytes;
    CHECK(fabs(layer_elems - 8 * b * s * h * (t - 1) / t) < 0.5, "%s: a layer moves %.0f elements over TP, want %.0f", cmd,
          layer_elems, 8 * b * s * h * (t - 1) / t);
    double pp_elems = p.bytes_pp / bytes, want_pp = 2 * m * b * s * h / (sp < 2 ? t : 1);
    CHECK(fabs(pp_elems - want_pp) < 0.5, "%s: a middle pipeline rank sends %.0f elements, want %.0f", cmd, pp_elems, want_pp);
    int64_t most = 0;
    for (int r = 0; r < p.par.pp; r++) most = p.ranks[r].params > most ? p.ranks[r].params : most;
    CHECK(fabs(p.bytes_dp - 2 * (d - 1) / d * 4 * (double)most) < 0.5, "%s: %.0f bytes over DP for %lld parameters", cmd,
          p.bytes_dp, (long long)most);
    plan_free(&p);
  }
}

/* The model of a command line traced for tune (plan_model); returns 0 or -1 (message in d). */
static int traced_of(const char *command, Plan *p, Diag *d) {
  char buf[1024], *argv[64];
  int argc = 0;
  snprintf(buf, sizeof buf, "plait tune %s", command);
  for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
  Options o;
  if (options_parse(argc, argv, 2, all_flags, 1, &o, d)) return -1;
  return plan_model(&o, p, d);
}

static int same_bound(const PlanBound *a, const PlanBound *b) {
  return a->iteration == b->iteration && a->busy == b->busy && a->fill == b->fill &&
         a->optimizer == b->optimizer && a->gather == b->gather && a->memory == b->memory;
}

/* tune bounds a layout with the distributed optimizer from the same layout without it, bounded just
 * before (plan_bound_optimizer): that gives what plan_bound gives from scratch, whether or not the
 * layout without it stopped at its weights for want of memory; the bound is below the plan's and
 * shards Adam; a ring reduce-scatter and all-gather send what an all-reduce sends (ZeRO's 2Ψ). */
static void distributed_optimizer_bound(void) {
  double rs = cost_ring_reducescatter(3e9, 8), ag = cost_ring_allgather(3e9, 8);
  CHECK(rs + ag == cost_ring_allreduce(3e9, 8), "reduce-scatter + all-gather = all-reduce");
  Plan p;
  Diag d;
  const char *model = "models/gpt.lua --set layers=8 hidden=1024 heads=16 seq=512 --tp 2 --gbs 32";
  if (traced_of(model, &p, &d)) {
    CHECK(0, "%s", d.msg);
    return;
  }
  Parallel off = p.par, on;
  off.pp = 2, off.dp = 4, off.mbs = 2;
  on = off, on.distributed_optimizer = 1;
  PlanBound without, derived, fresh;
  CHECK(plan_bound(&p, &off, INFINITY, &without, &d) == 0 &&
        plan_bound_optimizer(&p, &on, INFINITY, &derived, &d) == 0 &&
        plan_bound(&p, &on, INFINITY, &fresh, &d) == 0, "%s", d.msg);
  CHECK(same_bound(&derived, &fresh), "derived %.6g s %.6g B, from scratch %.6g s %.6g B",
        derived.iteration, derived.memory, fresh.iteration, fresh.memory);
  CHECK(fresh.gather > 0 && fresh.optimizer < without.optimizer && fresh.memory < without.memory,
        "gather %g s, step %g s (without %g s), memory %g (without %g)", fresh.gather,
        fresh.optimizer, without.optimizer, fresh.memory, without.memory);
  PlanBound weights_only;
  CHECK(plan_bound(&p, &off, 0, &weights_only, &d) == 0, "%s", d.msg);
  double capacity = weights_only.memory - 1;
  CHECK(plan_bound(&p, &off, capacity, &without, &d) == 0 &&
        plan_bound_optimizer(&p, &on, capacity, &derived, &d) == 0 &&
        plan_bound(&p, &on, capacity, &fresh, &d) == 0, "%s", d.msg);
  CHECK(without.memory > capacity && same_bound(&derived, &fresh) && fresh.memory <= capacity,
        "capacity %.6g: without %.6g, derived %.6g, from scratch %.6g", capacity, without.memory,
        derived.memory, fresh.memory);
  if (plan_layout(&p, &on, &d) == 0) {
    CHECK(fresh.iteration <= p.timeline.iteration, "bound %g s, plan %g s", fresh.iteration,
          p.timeline.iteration);
    for (int r = 0; r < p.par.pp; r++)
      CHECK(p.ranks[r].optimizer[PRECISION_BF16] * 4 == 12.0 * p.ranks[r].params,
            "rank %d: Adam sharded over 4", r);
  } else CHECK(0, "%s", d.msg);
  plan_free(&p);
}

/* The 1-trillion-parameter configuration of Narayanan et al. (Table 1): planning it is quick. */
static void trillion_parameter_plan(void) {
  Plan p;
  Diag d;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int status = plan_of("models/gpt.lua --set layers=128 hidden=25600 heads=160 --tp 8 --pp 64 --vpp 2 --dp 6 --gbs 3072 "
                       "--mbs 1 --schedule interleaved", &p, &d);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK(status == 0, "%s", d.msg);
  if (status) return;
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("info: planning the 1T configuration took %.3f s\n", seconds);
  CHECK(fabs(p.cost.params_total / 1.008e12 - 1) < 0.001, "1T: %lld parameters", (long long)p.cost.params_total);
  CHECK(p.nchunks == 128 && p.microbatches == 512, "128 chunks, 512 microbatches");
  plan_free(&p);
}

int main(void) {
  RUN(collectives_per_layer);
  RUN(gpt_parameters_eq2);
  RUN(reference_parameter_counts);
  RUN(family_parameter_counts);
  RUN(experts_active_parameters);
  RUN(gpt_flops_eq3);
  RUN(tp_summed_gradients);
  RUN(every_parameter_has_a_gradient);
  RUN(partition_cuts);
  RUN(communication_volumes);
  RUN(distributed_optimizer_bound);
  RUN(trillion_parameter_plan);
  TEST_EXIT();
}
