/* trainer.c: a rank's training loop: batches, the plan's iteration, the optimizer step with global-norm
 * clipping counted once across TP, PP and DP, the loss, logs, evaluation and checkpoints. */
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "checkpoint.h"
#include "constants.h"
#include "clock.h"
#include "device.h"
#include "evaluate.h"
#include "kernels.h"
#include "gradcheck.h"
#include "log.h"
#include "sample.h"
#include "trace.h"

/* ---- data ----------------------------------------------------------------------------------- */

static int holds_chunk(const Trainer *t, int chunk) { return chunk % t->prog->pp == t->run.pp_rank; }

/* Opens a token file the run names (path NULL: none). */
static void open_tokens(Trainer *t, TokenFile *f, const char *path, DataUse use) {
  if (path && data_open(f, path, t->prog->vocab, t->prog->seq, use)) comm_fail(t->comm, "%s", f->error);
}

static void open_data(Trainer *t) {
  const Program *p = t->prog;
  t->has_data = holds_chunk(t, 0) || holds_chunk(t, p->nchunks - 1);
  if (!t->has_data) return;
  open_tokens(t, &t->train_file, t->args->data, DATA_TRAIN);
  open_tokens(t, &t->val_file, t->args->val_data, DATA_TRAIN);
  open_tokens(t, &t->eval_file, t->args->eval, DATA_EVAL);
  int64_t share = (int64_t)p->gbs / p->dp * p->seq;
  t->tokens = calloc((size_t)share, sizeof *t->tokens);
  t->targets = calloc((size_t)share, sizeof *t->targets);
  t->device_tokens = device_alloc((size_t)share * sizeof *t->tokens, "token ids");
  t->device_targets = device_alloc((size_t)share * sizeof *t->targets, "targets");
}

/* The targets that count (0 or more; -1 marks a position with nothing to predict): next-token training
 * data has one at every position; masked-LM data at the masked positions of the whole global batch
 * (every rank draws them alike, so every rank agrees on the scale). */
static double targets_counted(Trainer *t, int64_t step, int val) {
  const Program *p = t->prog;
  if (!p->masked_lm || !t->has_data) return (double)p->gbs * p->seq;
  DataSlice all = {p->seq, p->gbs, 0, p->gbs};
  int64_t n = (int64_t)p->gbs * p->seq;
  int32_t *in = malloc((size_t)n * sizeof *in), *tg = malloc((size_t)n * sizeof *tg);
  data_mlm_batch(val ? &t->val_file : &t->train_file, t->seed + (val ? 1 : 0), step, &all,
                 (int32_t)(p->vocab - 1), in, tg);
  double count = 0;
  for (int64_t i = 0; i < n; i++) count += tg[i] >= 0;
  free(in);
  free(tg);
  return count > 0 ? count : 1;
}

void trainer_load_batch(Trainer *t, int64_t step, int val) {
  const Program *p = t->prog;
  t->run.loss_scale = (real)(1.0 / targets_counted(t, step, val));
  if (!t->has_data) return;
  int64_t per_rank = p->gbs / p->dp;
  DataSlice slice = {p->seq, p->gbs, t->run.dp_rank * per_rank, per_rank};
  const TokenFile *f = val ? &t->val_file : &t->train_file;
  if (p->masked_lm) data_mlm_batch(f, t->seed + (val ? 1 : 0), step, &slice, (int32_t)(p->vocab - 1), t->tokens, t->targets);
  else if (val) data_val_batch(f, step, &slice, t->tokens, t->targets);
  else data_train_batch(f, t->seed, step, &slice, t->tokens, t->targets);
  size_t bytes = (size_t)(per_rank * p->seq) * sizeof *t->tokens;
  device_upload(t->device_tokens, t->tokens, bytes);
  device_upload(t->device_targets, t->targets, bytes);
}

/* ---- the optimizer step --------------------------------------------------------------------- */

/* The global gradient norm: each rank's counted parameters (split ones on every TP rank, replicated ones
 * on TP rank 0, a tied table on the first stage), summed over TP and PP; DP replicas hold the same. */
static double global_grad_norm(Trainer *t) {
  double start = t->run.profile ? profile_start(t->run.profile) : 0, elems = 0;
  int64_t *n = malloc((size_t)t->params.count * sizeof *n);
  const real **g = malloc((size_t)t->params.count * sizeof *g);
  int count = 0;
  for (int i = 0; i < t->params.count; i++)
    if (t->params.slot[i].counted) {
      n[count] = t->params.slot[i].n, g[count++] = t->params.slot[i].g;
      elems += (double)t->params.slot[i].n;
    }
  double sq = optim_norm_sq_many(count, n, g);
  free(n), free(g);
  comm_allreduce(t->comm, GROUP_TP, &sq, 1, COMM_F64, COMM_SUM);
  comm_allreduce(t->comm, GROUP_PP, &sq, 1, COMM_F64, COMM_SUM);
  if (t->run.profile) profile_add(t->run.profile, PROFILE_GRAD_NORM, start, 0, elems * sizeof(real));
  return sqrt(sq);
}

/* AdamW over the trainable tensors in one call, which also rounds each new master weight to the
 * copy compute reads where that copy is separate (frozen tensors keep theirs). Returns the bytes
 * that moved: the weights, m and v read and written, the gradient read and cleared, the compute
 * copy written. */
static double adamw_all(Trainer *t, double coef) {
  AdamwTensor *a = malloc((size_t)t->params.count * sizeof *a);
  int count = 0;
  double elems = 0;
  for (int i = 0; i < t->params.count; i++) {
    ParamSlot *s = &t->params.slot[i];
    if (!s->spec->trainable) continue; /* frozen: left as it is */
    act_t *w = ACT_SEPARATE ? s->w : NULL;
    a[count++] = (AdamwTensor){s->n, s->spec->decay, s->master, s->g, s->m, s->v, w};
    elems += (double)s->n;
  }
  optim_adamw_many(&t->adamw, t->step + 1, t->lr, coef, count, a);
  free(a);
  return elems * (8.0 * sizeof(real) + (ACT_SEPARATE ? sizeof(act_t) : 0));
}

static void optimizer_step(void *arg) {
  Trainer *t = arg;
  t->grad_norm = global_grad_norm(t);
  if (!isfinite(t->grad_norm))
    comm_fail_all(t->comm, "step %lld: the gradient norm is %g; stopping before the update (the last checkpoint stays "
                       "as it was; try a lower --lr)", (long long)t->step + 1, t->grad_norm);
  double coef = optim_clip_coef(t->grad_norm, t->args->grad_clip);
  t->lr = optim_lr(&t->schedule, t->step);
  double start = t->run.profile ? profile_start(t->run.profile) : 0;
  double bytes = adamw_all(t, coef);
  if (t->run.profile) profile_add(t->run.profile, PROFILE_OPTIMIZER, start, 0, bytes);
}

/* ---- loss ----------------------------------------------------------------------------------- */

int trainer_holds_loss(const Trainer *t) { return holds_chunk(t, t->prog->nchunks - 1) && t->run.tp_rank == 0; }

double trainer_global_loss(Trainer *t) {
  double loss = trainer_holds_loss(t) ? t->run.loss : 0;
  comm_allreduce(t->comm, GROUP_WORLD, &loss, 1, COMM_F64, COMM_SUM);
  return loss;
}

static double validation_loss(Trainer *t) {
  double total = 0;
  int64_t batches = t->args->eval_batches;
  for (int64_t b = 0; b < batches; b++) {
    trainer_load_batch(t, b, 1);
    t->run.loss = 0;
    t->run.training = 0;
    exec_iteration(&t->eval, t->device_tokens, t->device_targets);
    t->run.training = 1;
    total += trainer_global_loss(t);
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
  r->tp = p->tp, r->tp_rank = ri->tp_rank, r->dp = p->dp, r->dp_rank = ri->dp_rank, r->pp = p->pp, r->pp_rank = ri->pp_rank;
  r->training = 1;
  r->scratch = device_alloc((size_t)p->scratch_elems * sizeof(act_t), "scratch activations");
  r->recompute = device_alloc((size_t)p->recompute_elems * sizeof(act_t), "recomputed activations");
  r->grad_a = device_alloc((size_t)p->io_elems * sizeof(act_t), "gradients between layers");
  r->grad_b = device_alloc((size_t)p->io_elems * sizeof(act_t), "gradients between layers");
  r->xent_stats = device_alloc((size_t)3 * p->mbs * p->seq * sizeof(real), "cross-entropy statistics");
  params_create(&t->params, p, ri->pp_rank, ri->tp_rank, t->seed);
  r->model_w = t->params.model_w, r->model_g = t->params.model_g;
  r->layer_w = t->params.layer_w, r->layer_g = t->params.layer_g;
  r->constants = constants_upload(p);
}

/* The plan's footprint in this build's types: per parameter element its weights (the master copy, and a
 * copy for compute where that is separate), gradient and Adam's m and v; per activation element one act_t.
 * Equals plait plan's memory for the machine whose precision the build has. */
size_t trainer_planned_bytes(const Program *p, int pp_rank) {
  const RankFootprint *f = &p->footprints[pp_rank];
  size_t per_param = 4 * sizeof(real) + (ACT_SEPARATE ? sizeof(act_t) : 0);
  return (size_t)f->param_elems * per_param + (size_t)f->activation_elems * sizeof(act_t);
}

double trainer_planned_bytes_least(const Program *p, int ranks) {
  double bytes = 0;
  int *taken = calloc((size_t)p->pp, sizeof *taken); /* ranks counted of each pipeline rank's tp·dp */
  while (ranks > 0) {
    int least = -1;
    for (int r = 0; r < p->pp; r++)
      if (taken[r] < p->tp * p->dp && (least < 0 || trainer_planned_bytes(p, r) < trainer_planned_bytes(p, least)))
        least = r;
    if (least < 0) break; /* more ranks than the world: every one is counted */
    int n = p->tp * p->dp - taken[least] < ranks ? p->tp * p->dp - taken[least] : ranks;
    bytes += (double)trainer_planned_bytes(p, least) * n;
    taken[least] += n, ranks -= n;
  }
  free(taken);
  return bytes;
}

/* The job's peak: ranks that are threads share their process's devices; ranks that are processes each
 * add their part of their machine's peak. */
static double job_peak(const Trainer *t) {
  if (strcmp(comm_backend_name(t->comm), "local") == 0) return t->args->gemm_rate;
  double share = device_peak_share(t->args->gemm_rate, comm_ranks_on_machine(comm_info(t->comm)->world));
  comm_allreduce(t->comm, GROUP_WORLD, &share, 1, COMM_F64, COMM_SUM);
  return share;
}

static void setup(Trainer *t, Comm *c, const TrainArgs *args) {
  memset(t, 0, sizeof *t);
  device_init(comm_device_index(c), comm_ranks_on_machine(comm_info(c)->world));
  device_expect(trainer_planned_bytes(&plait_program, comm_info(c)->pp_rank));
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
  open_data(t);
  t->adamw = optim_adamw_default();
  t->adamw.weight_decay = args->weight_decay;
  t->schedule = optim_schedule(args->lr, args->warmup, args->decay_steps ? args->decay_steps : args->steps);
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
  free(t->tokens);
  free(t->targets);
  device_free(t->device_tokens);
  device_free(t->device_targets);
  data_close(&t->train_file); /* each a zeroed TokenFile where no file was opened */
  data_close(&t->val_file);
  data_close(&t->eval_file);
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void train_step(Trainer *t) {
  trainer_load_batch(t, t->step, 0); /* the gradients are zero: allocated so, and cleared by each AdamW step */
  t->run.step = t->step;
  t->run.loss = 0;
  double start = clock_seconds();
  exec_iteration(&t->exec, t->device_tokens, t->device_targets);
  double loss = trainer_global_loss(t), seconds = clock_seconds() - start;
  if (!isfinite(loss))
    comm_fail_all(t->comm, "step %lld: the loss is %g; stopping (the last checkpoint stays as it was; try a lower --lr)",
              (long long)t->step + 1, loss);
  if (t->run.profile) profile_step(t->run.profile, seconds);
  if (comm_info(t->comm)->rank == 0) log_step(t, loss, seconds);
}

static void evaluate(Trainer *t) {
  double val = validation_loss(t);
  if (comm_info(t->comm)->rank == 0) log_validation(t, val);
}

static void train_and_evaluate(Trainer *t) {
  const TrainArgs *args = t->args;
  if (comm_info(t->comm)->rank == 0) log_start(t);
  int64_t every_eval = args->eval_every, every_save = args->save_every;
  for (; t->step < args->steps; t->step++) {
    train_step(t);
    int64_t done = t->step + 1;
    if (args->val_data && every_eval && done % every_eval == 0) evaluate(t);
    if (args->save && every_save && done % every_save == 0 && done < args->steps) checkpoint_save(t, args->save, done);
  }
  if (args->save) checkpoint_save(t, args->save, t->step);
  if (args->eval) evaluate_file(t, args->eval);
  if (args->trace && args->steps > 0) trace_write(t, args->trace);
  if (args->sample) sample_text(t, args->sample);
  if (comm_info(t->comm)->rank == 0) log_finish(t);
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
