/* trainer.c: a rank's training loop: its set-up, the plan's iteration over each batch, the
 * optimizer step with global-norm clipping counted once across TP, PP and DP, validation, logs,
 * evaluation and checkpoints. */
#include "train/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/agree.h"
#include "train/batch.h"
#include "train/checkpoint.h"
#include "constants.h"
#include "clock.h"
#include "device.h"
#include "train/evaluate.h"
#include "footprint.h"
#include "kernels.h"
#include "train/gradcheck.h"
#include "train/log.h"
#include "train/sample.h"
#include "train/trace.h"

/* ---- the optimizer step --------------------------------------------------------------------- */

/* The sum of squares of the counted gradients of one kind: experts' spread over ep ranks, or the
 * rest. */
static double grad_sq(const Trainer *t, int experts, double *elems) {
  int64_t *n = malloc((size_t)t->params.count * sizeof *n);
  const real **g = malloc((size_t)t->params.count * sizeof *g);
  int count = 0;
  for (int i = 0; i < t->params.count; i++) {
    const ParamSlot *s = &t->params.slot[i];
    if (!s->counted || s->own_end == s->own_begin || s->spec->expert_split != experts) continue;
    n[count] = s->own_end - s->own_begin, g[count++] = s->g + s->own_begin;
    *elems += (double)(s->own_end - s->own_begin);
  }
  double sq = optim_norm_sq_many(count, n, g);
  free(n), free(g);
  return sq;
}

/* The global gradient norm: each rank's counted parameters (split ones on every TP rank,
 * replicated ones on TP rank 0, a tied table on the first stage), summed over TP and PP; DP
 * replicas hold the same, or with the distributed optimizer each the sums of its own elements
 * (summed over DP too); the experts spread over ep ranks are summed over them, each once. */
static double global_grad_norm(Trainer *t) {
  double start = t->run.profile ? profile_start(t->run.profile) : 0, elems = 0;
  double sq = grad_sq(t, 0, &elems);
  if (params_ep(t->prog) > 1) {
    double experts = grad_sq(t, 1, &elems);
    comm_allreduce(t->comm, GROUP_EP, &experts, 1, COMM_F64, COMM_SUM);
    sq += experts;
  }
  if (t->params.sharded) comm_allreduce(t->comm, GROUP_DP, &sq, 1, COMM_F64, COMM_SUM);
  comm_allreduce(t->comm, GROUP_TP, &sq, 1, COMM_F64, COMM_SUM);
  comm_allreduce(t->comm, GROUP_PP, &sq, 1, COMM_F64, COMM_SUM);
  if (t->run.profile)
    profile_add(t->run.profile, PROFILE_GRAD_NORM, start, 0, elems * sizeof(real));
  return sqrt(sq);
}

/* AdamW over the own elements of the trainable tensors in one call, which also rounds each new
 * master weight to the copy compute reads where that copy is separate (frozen tensors keep theirs).
 * Returns the bytes that moved: the weights, m and v read and written, the gradient read and
 * cleared, the compute copy written. */
static double adamw_all(Trainer *t, double coef) {
  AdamwTensor *a = malloc((size_t)t->params.count * sizeof *a);
  int count = 0;
  double elems = 0;
  for (int i = 0; i < t->params.count; i++) {
    ParamSlot *s = &t->params.slot[i];
    int64_t own = s->own_end - s->own_begin;
    if (!s->spec->trainable || own == 0) continue; /* frozen: left as it is */
    act_t *w = ACT_SEPARATE ? s->w + s->own_begin : NULL;
    a[count++] = (AdamwTensor){own, s->spec->decay, s->master, s->g + s->own_begin, s->m, s->v, w};
    elems += (double)own;
  }
  optim_adamw_many(&t->adamw, t->step + 1, t->lr, coef, count, a);
  free(a);
  return elems * (8.0 * sizeof(real) + (ACT_SEPARATE ? sizeof(act_t) : 0));
}

/* With the distributed optimizer: each data-parallel rank's updated weights to all of them, bucket
 * by bucket, in the precision compute reads. */
static void gather_weights(Trainer *t) {
  double start = t->run.profile ? profile_start(t->run.profile) : 0;
  for (int k = 0; k < t->params.nbuckets; k++) {
    const Bucket *b = &t->params.buckets[k];
    comm_allgather_chunks(t->comm, GROUP_DP, t->params.slot[b->from].w, b->n, COMM_ACT);
  }
  if (t->run.profile) profile_add(t->run.profile, PROFILE_COMM, start, 0, 0);
}

static void optimizer_step(void *arg) {
  Trainer *t = arg;
  t->grad_norm = global_grad_norm(t);
  if (!isfinite(t->grad_norm))
    comm_fail_all(
        t->comm,
        "step %lld: the gradient norm is %g; stopping before the update (the last checkpoint stays "
        "as it was; try a lower --lr)",
        (long long)t->step + 1, t->grad_norm);
  double coef = optim_clip_coef(t->grad_norm, t->args->grad_clip);
  t->lr = optim_lr(&t->schedule, t->step);
  double start = t->run.profile ? profile_start(t->run.profile) : 0;
  double bytes = adamw_all(t, coef);
  if (t->run.profile) profile_add(t->run.profile, PROFILE_OPTIMIZER, start, 0, bytes);
  if (t->params.sharded) params_zero_others_grads(&t->params), gather_weights(t);
}

/* ---- validation ----------------------------------------------------------------------------- */

static double validation_loss(Trainer *t) {
  double total = 0;
  int64_t batches = t->args->eval_batches;
  for (int64_t b = 0; b < batches; b++) {
    batch_load(t, b, 1);
    t->run.loss = 0;
    t->run.training = 0;
    exec_iteration(&t->eval, t->device_tokens, t->device_targets);
    t->run.training = 1;
    total += batch_loss(t);
  }
  return total / (double)batches;
}

/* ---- set-up --------------------------------------------------------------------------------- */

static void setup_run(Trainer *t) {
  const Program *p = t->prog;
  const RankInfo *ri = comm_info(t->comm);
  Run *r = &t->run;
  memset(r, 0, sizeof *r);
  r->program = p;
  r->comm = t->comm;
  r->tp = p->tp, r->tp_rank = ri->tp_rank, r->dp = p->dp, r->dp_rank = ri->dp_rank, r->pp = p->pp,
  r->pp_rank = ri->pp_rank;
  char unused[MESSAGE_TEXT]; /* train.c refused the job before any rank started */
  r->ranks_per_node = comm_ranks_per_node(ri->world, unused, sizeof unused);
  r->training = 1;
  r->scratch = device_alloc((size_t)p->scratch_elems * sizeof(act_t), "scratch activations");
  r->recompute = device_alloc((size_t)p->recompute_elems * sizeof(act_t), "recomputed activations");
  r->grad_a = device_alloc((size_t)p->io_elems * sizeof(act_t), "gradients between layers");
  r->grad_b = device_alloc((size_t)p->io_elems * sizeof(act_t), "gradients between layers");
  r->xent_stats = device_alloc((size_t)3 * p->mbs * p->seq * sizeof(real),
                               "cross-entropy statistics");
  params_create(&t->params, p, ri->pp_rank, ri->tp_rank, ri->dp_rank, t->seed);
  r->model_w = t->params.model_w, r->model_g = t->params.model_g;
  r->layer_w = t->params.layer_w, r->layer_g = t->params.layer_g;
  r->constants = constants_upload(p);
}

/* The job's peak: ranks that are threads share their process's devices; ranks that are processes
 * each add their part of their machine's peak. */
static double job_peak(const Trainer *t) {
  if (strcmp(comm_backend_name(t->comm), "local") == 0) return t->args->gemm_rate;
  double share = device_peak_share(t->args->gemm_rate,
                                   comm_ranks_on_machine(comm_info(t->comm)->world));
  comm_allreduce(t->comm, GROUP_WORLD, &share, 1, COMM_F64, COMM_SUM);
  return share;
}

static void setup(Trainer *t, Comm *c, const TrainArgs *args) {
  memset(t, 0, sizeof *t);
  device_init(comm_device_index(c), comm_ranks_on_machine(comm_info(c)->world));
  device_expect(footprint_bytes(&plait_program, comm_info(c)->pp_rank));
  k_attention_choose((AttentionChoice)args->attention, comm_info(c)->rank == 0);
  t->prog = &plait_program;
  t->args = args;
  t->comm = c;
  t->seed = args->seed;
  setup_run(t);
  exec_create(&t->exec, t->prog, &t->run, &t->params);
  t->exec.step = optimizer_step;
  t->exec.step_arg = t;
  exec_create_forward(&t->eval, &t->exec);
  batch_open(t);
  t->adamw = optim_adamw_default();
  t->adamw.weight_decay = args->weight_decay;
  t->schedule = optim_schedule(args->lr, args->warmup,
                               args->decay_steps ? args->decay_steps : args->steps);
  if (args->load) t->step = checkpoint_load(t, args->load);
  if (args->init) checkpoint_init(t, args->init);
  t->run.seed = t->seed;
  if (args->trace) exec_record(&t->exec);
  if (args->profile) t->run.profile = &t->profile;
  t->peak_flops = job_peak(t);
  if (comm_info(c)->rank == 0) log_open(t);
}

static void teardown(Trainer *t) {
  exec_free(&t->eval);
  exec_free(&t->exec);
  params_free(&t->params, t->prog);
  constants_free(t->prog, t->run.constants);
  device_free(t->run.scratch);
  device_free(t->run.recompute);
  device_free(t->run.grad_a);
  device_free(t->run.grad_b);
  device_free(t->run.xent_stats);
  rt_expert_rows_free(&t->run);
  batch_close(t);
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void train_step(Trainer *t) {
  /* the gradients are zero: allocated so, and cleared by each AdamW step */
  batch_load(t, t->step, 0);
  t->run.step = t->step;
  t->run.loss = 0;
  double start = clock_seconds();
  exec_iteration(&t->exec, t->device_tokens, t->device_targets);
  double loss = batch_loss(t), seconds = clock_seconds() - start;
  if (!isfinite(loss))
    comm_fail_all(t->comm,
                  "step %lld: the loss is %g; stopping (the last checkpoint stays as it was; try a "
                  "lower --lr)",
                  (long long)t->step + 1, loss);
  if (t->run.profile) profile_step(t->run.profile, seconds);
  if (comm_info(t->comm)->rank == 0) log_step(t, loss, seconds);
}

static void evaluate(Trainer *t) {
  double val = validation_loss(t);
  if (comm_info(t->comm)->rank == 0) log_validation(t, val);
}

/* The experts' rows over every rank: the most one received in an exchange, and those routed and
 * dropped past a capacity, counted once per tensor-parallel group (its ranks route alike). */
static ExpertRowsSeen expert_rows(Trainer *t) {
  const ExpertRows *x = &t->run.expert_rows;
  int first_of_tp = t->run.tp_rank == 0;
  double most = (double)x->most, counts[2] = {first_of_tp ? (double)x->routed : 0,
                                              first_of_tp ? (double)x->dropped : 0};
  comm_allreduce(t->comm, GROUP_WORLD, &most, 1, COMM_F64, COMM_MAX);
  comm_allreduce(t->comm, GROUP_WORLD, counts, 2, COMM_F64, COMM_SUM);
  return (ExpertRowsSeen){most, counts[0], counts[1]};
}

static void train_and_evaluate(Trainer *t) {
  const TrainArgs *args = t->args;
  if (comm_info(t->comm)->rank == 0) log_start(t);
  int64_t every_eval = args->eval_every, every_save = args->save_every;
  for (; t->step < args->steps; t->step++) {
    train_step(t);
    int64_t done = t->step + 1;
    if (args->val_data && every_eval && done % every_eval == 0) evaluate(t);
    if (args->save && every_save && done % every_save == 0 && done < args->steps)
      checkpoint_save(t, args->save, done);
  }
  if (args->save) checkpoint_save(t, args->save, t->step);
  if (args->eval) evaluate_file(t, args->eval);
  if (args->trace && args->steps > 0) trace_write(t, args->trace);
  if (args->sample) sample_text(t, args->sample);
  ExpertRowsSeen rows = expert_rows(t); /* every rank takes part */
  if (comm_info(t->comm)->rank == 0) log_finish(t, rows);
}

int trainer_main(Comm *c, void *arg) {
  const TrainArgs *args = arg;
  Trainer t;
  agree_on_run(c, args);
  setup(&t, c, args);
  int status = args->gradcheck ? gradcheck_run(&t, args->gradcheck) : (train_and_evaluate(&t), 0);
  log_close(&t);
  teardown(&t);
  return status;
}
