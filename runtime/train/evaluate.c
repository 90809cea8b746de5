/* evaluate.c: --eval: batches of sequential windows through the plan's forward actions, the
 * losses summed over them and divided by the targets counted. */
#include "train/evaluate.h"

#include <math.h>

#include "device.h"
#include "train/log.h"

/* The file's token count on every rank (only the ranks that read data opened it). */
static int64_t token_count(Trainer *t) {
  double count = t->has_data ? (double)t->eval_file.count : 0;
  comm_allreduce(t->comm, GROUP_WORLD, &count, 1, COMM_F64, COMM_MAX);
  return (int64_t)count;
}

/* Loads this DP rank's share of evaluation batch b; returns the targets that count in it on a
 * rank that holds a share of the loss (0 elsewhere). */
static double load_batch(Trainer *t, int64_t batch) {
  const Program *p = t->prog;
  if (!t->has_data) return 0;
  int64_t per_rank = p->gbs / p->dp, n = per_rank * p->seq;
  DataSlice slice = {p->seq, p->gbs, t->run.dp_rank * per_rank, per_rank};
  if (p->masked_lm)
    data_mlm_eval_batch(&t->eval_file, t->seed, batch, &slice, (int32_t)(p->vocab - 1), t->tokens,
                        t->targets);
  else
    data_eval_batch(&t->eval_file, batch, &slice, t->tokens, t->targets);
  device_upload(t->device_tokens, t->tokens, (size_t)n * sizeof *t->tokens);
  device_upload(t->device_targets, t->targets, (size_t)n * sizeof *t->targets);
  double counted = 0;
  for (int64_t i = 0; i < n && batch_holds_loss(t); i++) counted += t->targets[i] >= 0;
  return counted;
}

void evaluate_file(Trainer *t, const char *path) {
  const Program *p = t->prog;
  int64_t windows = data_eval_windows(token_count(t), p->seq, p->masked_lm);
  int64_t batches = (windows + p->gbs - 1) / p->gbs;
  double loss = 0, counted = 0;
  t->run.loss_scale = 1; /* the sum of -log p over the batch; divided by the count at the end */
  t->run.training = 0;
  for (int64_t b = 0; b < batches; b++) {
    counted += load_batch(t, b);
    t->run.loss = 0;
    exec_iteration(&t->eval, t->device_tokens, t->device_targets);
    loss += batch_loss(t);
  }
  t->run.training = 1;
  comm_allreduce(t->comm, GROUP_WORLD, &counted, 1, COMM_F64, COMM_SUM);
  if (counted == 0)
    comm_fail_all(
        t->comm,
        "%s: none of its positions was drawn as a masked-LM target; evaluate a longer file", path);
  if (!isfinite(loss))
    comm_fail_all(
        t->comm,
        "%s: the loss is %s: the weights overflow on this data; evaluate a checkpoint whose "
        "training loss was finite",
        path, isnan(loss) ? "NaN" : "infinite");
  if (comm_info(t->comm)->rank == 0) log_eval(t, path, loss / counted, (int64_t)counted);
}
