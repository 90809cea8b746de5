/* batch.c: the token files a rank reads, its share of each batch with the loss scale, and the loss
 * summed over the ranks that hold it. */
#include "train/batch.h"

#include <stdlib.h>

#include "device.h"

static int holds_chunk(const Trainer *t, int chunk) {
  return chunk % t->prog->pp == t->run.pp_rank;
}

/* Opens a token file the run names (path NULL: none). */
static void open_tokens(Trainer *t, TokenFile *f, const char *path, DataUse use) {
  if (path && data_open(f, path, t->prog->vocab, t->prog->seq, use))
    comm_fail(t->comm, "%s", f->error);
}

void batch_open(Trainer *t) {
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

void batch_close(Trainer *t) {
  free(t->tokens);
  free(t->targets);
  device_free(t->device_tokens);
  device_free(t->device_targets);
  data_close(&t->train_file); /* each a zeroed TokenFile where no file was opened */
  data_close(&t->val_file);
  data_close(&t->eval_file);
}

/* The targets that count (0 or more; -1 marks a position with nothing to predict): next-token
 * training data has one at every position; masked-LM data at the masked positions of the whole
 * global batch (every rank draws them alike, so every rank agrees on the scale). */
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

void batch_load(Trainer *t, int64_t step, int val) {
  const Program *p = t->prog;
  t->run.loss_scale = (real)(1.0 / targets_counted(t, step, val));
  if (!t->has_data) return;
  int64_t per_rank = p->gbs / p->dp;
  DataSlice slice = {p->seq, p->gbs, t->run.dp_rank * per_rank, per_rank};
  const TokenFile *f = val ? &t->val_file : &t->train_file;
  if (p->masked_lm)
    data_mlm_batch(f, t->seed + (val ? 1 : 0), step, &slice, (int32_t)(p->vocab - 1), t->tokens,
                   t->targets);
  else if (val) data_val_batch(f, step, &slice, t->tokens, t->targets);
  else data_train_batch(f, t->seed, step, &slice, t->tokens, t->targets);
  size_t bytes = (size_t)(per_rank * p->seq) * sizeof *t->tokens;
  device_upload(t->device_tokens, t->tokens, bytes);
  device_upload(t->device_targets, t->targets, bytes);
}

int batch_holds_loss(const Trainer *t) {
  return holds_chunk(t, t->prog->nchunks - 1) && t->run.tp_rank == 0;
}

/* The head's cross entropy and every stage's loss terms: each pipeline rank's, once per tensor-
 * parallel group. */
double batch_loss(Trainer *t) {
  double loss = t->run.tp_rank == 0 ? t->run.loss : 0;
  comm_allreduce(t->comm, GROUP_WORLD, &loss, 1, COMM_F64, COMM_SUM);
  return loss;
}
