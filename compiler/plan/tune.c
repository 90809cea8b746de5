/* tune.c: plait tune's search. The model is traced once per (tp, mbs, sequence parallelism, and
 * for a model with experts ep: it moves the routed rows);
 * every pp, dp, vpp, schedule, recomputation and distributed optimizer under it is bounded
 * (selective recomputation changes the block's graph: it is traced for it once more)
 * without its schedule's simulation (the busiest rank's kernels: the iteration takes at least as
 * long; the microbatches its compute order keeps in flight: the memory is at least as large);
 * then, fastest bound first, layouts are planned in full until the next bound is slower than the
 * TUNE_BEST-th fastest plan that fits. */
#include "plan/tune.h"

#include "front/host.h"
#include "passes/experts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  Plan **plans; /* one per traced (tp, mbs, sequence parallelism, ep) */
  int count;
} Prefixes;

/* What a traced model is traced for. */
typedef struct {
  int tp, mbs, sp, ep;
} Trace;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int pinned_to(int pinned, int value) { return pinned == UNSET || pinned == value; }

static void refuse(Tune *t, const Diag *why) {
  if (t->refused++ == 0) snprintf(t->refusal, sizeof t->refusal, "%s", why->msg);
}

/* The layout a traced model starts from: one pipeline stage, one data-parallel replica (ep of
 * them with experts spread over ep: ep divides dp). */
static Options traced_options(const Options *o, Trace k, int gbs, Recompute recompute) {
  Options po = *o;
  parallel_unset(&po.parallel);
  po.parallel.tp = k.tp, po.parallel.mbs = k.mbs, po.parallel.sequence_parallel = k.sp,
  po.parallel.gbs = gbs, po.parallel.ep = po.parallel.dp = k.ep;
  po.parallel.pp = po.parallel.vpp = 1, po.parallel.recompute = recompute;
  snprintf(po.parallel.schedule, sizeof po.parallel.schedule, "1f1b");
  snprintf(po.parallel.partition, sizeof po.parallel.partition, "%s", o->parallel.partition);
  return po;
}

/* The global batch (the flag's, or the model file's), the model's layers, its experts and the
 * machine. */
static int probe(const Options *o, Tune *t, int *layers, Diag *d) {
  Options po = traced_options(o, (Trace){1, 1, 0, 1}, o->parallel.gbs, RECOMPUTE_NONE);
  Plan p;
  memset(&p, 0, sizeof p);
  int status = host_build_model(&po, &p.par, &p.model, d);
  t->gbs = p.par.gbs, *layers = p.model.layers, t->experts = experts_common(&p.model);
  model_free(&p.model);
  if (status) return -1;
  if (t->gbs == 1 && o->parallel.gbs == UNSET)
    return diag(d, "%s sets no global batch; give tune one: --gbs B (sequences per iteration)",
                o->file);
  return machine_load(o->machine ? o->machine : "a100", &t->machine, d);
}

static void push_layout(Tune *t, const TuneLayout *l) {
  if (t->count == t->capacity) {
    t->capacity = t->capacity ? 2 * t->capacity : 256;
    t->layouts = realloc(t->layouts, (size_t)t->capacity * sizeof *t->layouts);
    if (!t->layouts) fprintf(stderr, "plait: out of memory\n"), exit(1);
  }
  t->layouts[t->count++] = *l;
}

/* One layout under a traced model: its bounds, or refused by the rules plan refuses it by. With
 * dp > 1 and the distributed optimizer not pinned, the layout with it too: the same chunks and
 * work, bounded again for its optimizer step, its weights' all-gather and its memory alone (not
 * with experts spread over ep, which it does not compose with). */
static void consider(Tune *t, const Options *o, Plan *traced, int prefix, const Parallel *par) {
  Diag why;
  int pinned = o->parallel.distributed_optimizer;
  TuneLayout l = {.par = *par, .prefix = prefix, .pair = t->count, .without = -1,
                  .unrecomputed = -1, .single = -1};
  l.par.distributed_optimizer = pinned == UNSET ? 0 : pinned;
  if (par->gbs % (par->mbs * par->dp) != 0) {
    diag(&why, "global batch %d is not divisible by mbs·dp = %d·%d", par->gbs, par->mbs, par->dp);
    return refuse(t, &why);
  }
  if (par->ep > 1 && pinned == 1) {
    diag(&why, "--ep %d with the distributed optimizer is not supported yet", par->ep);
    return refuse(t, &why);
  }
  double capacity = t->machine.memory_bytes;
  if (plan_bound(traced, &l.par, capacity, &l.bound, &why)) return refuse(t, &why);
  l.iteration = l.bound.iteration, l.memory = l.bound.memory;
  push_layout(t, &l);
  if (pinned != UNSET || par->dp == 1 || par->ep > 1) return;
  l.par.distributed_optimizer = 1;
  if (plan_bound_optimizer(traced, &l.par, capacity, &l.bound, &why)) return refuse(t, &why);
  l.iteration = l.bound.iteration, l.memory = l.bound.memory;
  push_layout(t, &l);
}

/* A model traced with selective recomputation has the block's graph for it alone; one traced
 * without serves none and full. */
static int traced_for(const Plan *traced, int recompute) {
  return (traced->par.recompute == RECOMPUTE_SELECTIVE) == (recompute == RECOMPUTE_SELECTIVE);
}

/* (schedule, vpp) pairs for pp ranks: GPipe and 1F1B with one chunk per rank, interleaved with
 * every vpp that cuts the layers evenly (as Megatron-LM requires); one rank runs 1F1B alone. */
static void each_schedule(Tune *t, const Options *o, Plan *traced, int prefix, Parallel par,
                          int layers) {
  static const char *const names[] = {"gpipe", "1f1b", "interleaved"};
  for (int s = 0; s < 3; s++) {
    if (o->parallel.schedule[0] && strcmp(o->parallel.schedule, names[s]) != 0) continue;
    if (par.pp == 1 && s != 1) continue;
    snprintf(par.schedule, sizeof par.schedule, "%s", names[s]);
    for (int vpp = s == 2 ? 2 : 1; s == 2 ? par.pp * vpp <= layers : vpp == 1; vpp++) {
      if (!pinned_to(o->parallel.vpp, vpp) || (s == 2 && layers % (par.pp * vpp) != 0)) continue;
      par.vpp = vpp;
      for (int recompute = RECOMPUTE_NONE; recompute <= RECOMPUTE_SELECTIVE; recompute++) {
        if (!pinned_to(o->parallel.recompute, recompute) || !traced_for(traced, recompute))
          continue;
        par.recompute = recompute;
        consider(t, o, traced, prefix, &par);
      }
    }
  }
}

static void each_pipeline(Tune *t, const Options *o, Plan *traced, int prefix, int layers) {
  Parallel par = traced->par;
  par.grad_reduce_after = o->parallel.grad_reduce_after == 1;
  int rest = t->devices / par.tp;
  for (int pp = 1; pp <= rest && pp <= layers; pp++) {
    if (rest % pp != 0 || !pinned_to(o->parallel.pp, pp) ||
        !pinned_to(o->parallel.dp, rest / pp) || rest / pp % par.ep != 0)
      continue;
    par.pp = pp, par.dp = rest / pp;
    each_schedule(t, o, traced, prefix, par, layers);
  }
}

static int add_prefix(Prefixes *x, Plan *p) {
  x->plans = realloc(x->plans, (size_t)(x->count + 1) * sizeof *x->plans);
  if (!x->plans) fprintf(stderr, "plait: out of memory\n"), exit(1);
  x->plans[x->count] = p;
  return x->count++;
}

/* Traces the model for k and recomputation (selective, or not) and considers every layout under
 * it. */
static void each_traced(Tune *t, const Options *o, Prefixes *x, Trace k, int layers,
                        Recompute recompute) {
  Options po = traced_options(o, k, t->gbs, recompute);
  Plan *p = calloc(1, sizeof *p);
  Diag why;
  if (plan_model(&po, p, &why)) {
    refuse(t, &why);
    plan_free(p);
    free(p);
    return;
  }
  each_pipeline(t, o, p, add_prefix(x, p), layers);
}

/* Once without selective recomputation (none, full), once with it, as the pin allows. */
static void each_recompute_traced(Tune *t, const Options *o, Prefixes *x, Trace k, int layers) {
  int pin = o->parallel.recompute;
  if (pin != RECOMPUTE_SELECTIVE) each_traced(t, o, x, k, layers, RECOMPUTE_NONE);
  if (pinned_to(pin, RECOMPUTE_SELECTIVE)) each_traced(t, o, x, k, layers, RECOMPUTE_SELECTIVE);
}

/* ep: 1, and with experts every divisor of them that divides the data-parallel ranks left by tp
 * (an ep that divides no dp of a pipeline is skipped there). A pinned ep is traced as given (plan's
 * rules refuse it where it does not fit). */
static void each_ep(Tune *t, const Options *o, Prefixes *x, Trace k, int layers) {
  int pin = o->parallel.ep, rest = t->devices / k.tp;
  if (pin != UNSET) {
    k.ep = pin;
    each_recompute_traced(t, o, x, k, layers);
    return;
  }
  for (k.ep = 1; k.ep <= rest; k.ep++)
    if (k.ep == 1 || (t->experts > 0 && t->experts % k.ep == 0 && rest % k.ep == 0))
      each_recompute_traced(t, o, x, k, layers);
}

static void enumerate(Tune *t, const Options *o, Prefixes *x, int layers) {
  const Parallel *pin = &o->parallel;
  for (int tp = 1; tp <= t->devices; tp++) {
    if (t->devices % tp != 0 || !pinned_to(pin->tp, tp)) continue;
    for (int mbs = 1; mbs <= t->gbs; mbs++) {
      if (t->gbs % mbs != 0 || !pinned_to(pin->mbs, mbs) ||
          (pin->mbs == UNSET && mbs > TUNE_MAX_MBS))
        continue;
      for (int sp = pin->sequence_parallel == 1; sp <= (tp > 1); sp++)
        each_ep(t, o, x, (Trace){tp, mbs, sp, 1}, layers);
    }
  }
}

/* ---- planning the promising ones ----------------------------------------------------------- */

static void take_plan(TuneLayout *l, const Plan *p) {
  l->planned = 1;
  l->iteration = p->timeline.iteration;
  l->memory = 0;
  for (int r = 0; r < p->par.pp; r++)
    if (p->ranks[r].total > l->memory) l->memory = p->ranks[r].total;
  l->flops_per_device = plan_device_flops(p);
  l->bubble = p->timeline.bubble_fraction;
  l->traffic = p->bytes_tp + p->bytes_pp + p->bytes_dp + p->bytes_embed;
  l->time = p->time;
}

static int plan_in_full(Prefixes *x, TuneLayout *l, Diag *d) {
  Plan *p = x->plans[l->prefix];
  if (plan_layout(p, &l->par, d)) return -1;
  take_plan(l, p);
  return 0;
}

static int by_iteration(const void *a, const void *b) {
  const TuneLayout *x = a, *y = b;
  return (x->iteration > y->iteration) - (x->iteration < y->iteration);
}

static int by_memory(const void *a, const void *b) {
  const TuneLayout *x = a, *y = b;
  return (x->memory > y->memory) - (x->memory < y->memory);
}

/* Fastest bound first; stops planning once a bound is slower than the TUNE_BEST-th fastest
 * fitting plan. */
static int plan_promising(Tune *t, Prefixes *x, Diag *d) {
  double best[TUNE_BEST];
  int found = 0;
  qsort(t->layouts, (size_t)t->count, sizeof *t->layouts, by_iteration);
  for (int i = 0; i < t->count; i++) {
    TuneLayout *l = &t->layouts[i];
    if (l->memory > t->machine.memory_bytes) continue;
    if (found == TUNE_BEST && l->bound.iteration >= best[TUNE_BEST - 1]) continue;
    if (plan_in_full(x, l, d)) return -1;
    if (l->memory > t->machine.memory_bytes ||
        (found == TUNE_BEST && l->iteration >= best[TUNE_BEST - 1]))
      continue;
    int at = found < TUNE_BEST ? found++ : TUNE_BEST - 1;
    for (; at > 0 && best[at - 1] > l->iteration; at--) best[at] = best[at - 1];
    best[at] = l->iteration;
  }
  return 0;
}

/* None fits: the least memory any layout needs, planning the smallest bounds until none can be
 * smaller. */
static int smallest_memory(Tune *t, Prefixes *x, Diag *d) {
  qsort(t->layouts, (size_t)t->count, sizeof *t->layouts, by_memory);
  double least = INFINITY;
  for (int i = 0; i < t->count && t->layouts[i].memory < least; i++) {
    TuneLayout *l = &t->layouts[i];
    if (!l->planned && plan_in_full(x, l, d)) return -1;
    if (l->memory < least) least = l->memory, t->smallest = i;
  }
  return 0;
}

/* ---- why the rest lost --------------------------------------------------------------------- */

enum { PARTS = 5 };

/* Per iteration: kernels other than recomputation, recomputation, communication, bubble, the
 * optimizer step. Planned: the plan's parts; unplanned: the bound's (no bubble, no waits). */
static void parts(const TuneLayout *l, double out[PARTS]) {
  double recompute = l->bound.recompute;
  out[1] = recompute;
  if (l->planned) {
    out[0] = l->time.compute - recompute, out[4] = l->time.optimizer;
    out[2] = l->time.tp + l->time.pp + l->time.dp, out[3] = l->time.bubble;
  } else {
    out[0] = l->bound.busy - l->bound.tp - recompute, out[4] = l->bound.optimizer;
    out[2] = l->bound.tp + l->bound.gather, out[3] = l->bound.fill;
  }
}

/* The part that grew most against the winner's (bounds against bounds where the loser has no
 * plan). */
static TuneLoss why_lost(const TuneLayout *l, const TuneLayout *winner) {
  static const TuneLoss reasons[PARTS] = {LOST_GEMMS, LOST_RECOMPUTE, LOST_COMMUNICATION,
                                          LOST_BUBBLE, LOST_OPTIMIZER};
  TuneLayout w = *winner;
  w.planned = l->planned;
  double a[PARTS], b[PARTS];
  parts(l, a);
  parts(&w, b);
  TuneLoss loss = LOST_NOT_BEST;
  double most = 0;
  for (int k = 0; k < PARTS; k++)
    if (a[k] - b[k] > most) most = a[k] - b[k], loss = reasons[k];
  return loss;
}

static int fits(const Tune *t, const TuneLayout *l) { return l->memory <= t->machine.memory_bytes; }

static int ranked(const void *a, const void *b) {
  const TuneLayout *x = a, *y = b;
  int kx = x->planned && x->loss != LOST_MEMORY, ky = y->planned && y->loss != LOST_MEMORY;
  if (kx != ky) return ky - kx;
  return by_iteration(a, b);
}

static void rank_and_explain(Tune *t) {
  for (int i = 0; i < t->count; i++)
    t->layouts[i].loss = fits(t, &t->layouts[i]) ? LOST_NOT : LOST_MEMORY;
  qsort(t->layouts, (size_t)t->count, sizeof *t->layouts, ranked);
  t->fitting = 0;
  while (t->fitting < t->count && t->layouts[t->fitting].planned &&
         t->layouts[t->fitting].loss == LOST_NOT)
    t->fitting++;
  for (int i = t->fitting < TUNE_BEST ? t->fitting : TUNE_BEST; i < t->count && t->fitting; i++)
    if (t->layouts[i].loss == LOST_NOT)
      t->layouts[i].loss = why_lost(&t->layouts[i], &t->layouts[0]);
}

/* Whether layout a is layout b but for its recomputation. */
static int same_but_recompute(const Parallel *a, const Parallel *b) {
  Parallel x = *a;
  x.recompute = b->recompute;
  return memcmp(&x, b, sizeof x) == 0;
}

/* Whether layout a is layout b but for its ep. */
static int same_but_ep(const Parallel *a, const Parallel *b) {
  Parallel x = *a;
  x.ep = b->ep;
  return memcmp(&x, b, sizeof x) == 0;
}

/* Each of the best that uses the distributed optimizer (not pinned): the same layout without it;
 * each that uses selective recomputation: the same layout with none; each that spreads experts
 * over ep (not pinned): the same layout with ep 1; to say why it won. */
static void find_without(Tune *t, const Options *o) {
  for (int i = 0; i < t->fitting && i < TUNE_BEST; i++) {
    TuneLayout *l = &t->layouts[i];
    for (int k = 0; l->par.ep > 1 && o->parallel.ep == UNSET && k < t->count; k++)
      if (t->layouts[k].par.ep == 1 && same_but_ep(&t->layouts[k].par, &l->par))
        l->single = k;
    for (int k = 0; l->par.distributed_optimizer && k < t->count; k++)
      if (t->layouts[k].pair == l->pair && !t->layouts[k].par.distributed_optimizer)
        l->without = k;
    for (int k = 0; l->par.recompute == RECOMPUTE_SELECTIVE && k < t->count; k++)
      if (t->layouts[k].par.recompute == RECOMPUTE_NONE &&
          same_but_recompute(&t->layouts[k].par, &l->par))
        l->unrecomputed = k;
  }
}

static void free_prefixes(Prefixes *x) {
  for (int i = 0; i < x->count; i++) plan_free(x->plans[i]), free(x->plans[i]);
  free(x->plans);
}

int tune_search(const Options *o, Tune *t, Diag *d) {
  double start = now();
  int layers = 0;
  memset(t, 0, sizeof *t);
  t->model_file = o->file, t->devices = o->gpus;
  if (!o->file) return diag(d, "tune needs a model file: plait tune MODEL.lua --gpus N");
  if (!o->gpus) return diag(d, "tune needs the number of devices: --gpus N");
  if (probe(o, t, &layers, d)) return -1;
  Prefixes x = {0};
  enumerate(t, o, &x, layers);
  int status = plan_promising(t, &x, d);
  if (status == 0) rank_and_explain(t), find_without(t, o);
  if (status == 0 && t->fitting == 0 && t->count) status = smallest_memory(t, &x, d);
  free_prefixes(&x);
  t->seconds = now() - start;
  return status;
}

void tune_free(Tune *t) {
  free(t->layouts);
  memset(t, 0, sizeof *t);
}
