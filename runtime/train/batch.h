/* batch.h: a rank's training state (Trainer), and the batches and the loss every part of a run
 * reads through it: the token files a rank opens, this DP rank's share of a batch loaded with its
 * loss scale, which ranks hold a share of the loss, and the loss summed over them. */
#ifndef PLAIT_BATCH_H
#define PLAIT_BATCH_H

#include <stdint.h>

#include "train/args.h"
#include "train/data.h"
#include "exec.h"
#include "optim.h"
#include "train/output.h"
#include "params.h"
#include "profile.h"
#include "rt.h"

typedef struct {
  const Program *prog;
  const TrainArgs *args;
  Comm *comm;
  Run run;
  Params params;
  Exec exec;            /* the training plan */
  Exec eval;            /* its forward actions alone: validation and finite differences */
  TokenFile train_file, val_file, eval_file;
  int has_data;         /* this rank runs chunk 0 or the last chunk, so it reads tokens */
  int32_t *tokens, *targets; /* this DP rank's share of the global batch, read on the host */
  int32_t *device_tokens, *device_targets; /* the same in the backend's memory, where kernels
                                              read them */
  AdamW adamw;
  LrSchedule schedule;
  int64_t step;         /* the next step to run (a loaded checkpoint's step) */
  uint64_t seed;        /* of data windows, dropout and initialisation (a loaded checkpoint's unless
                           the command line overrides it) */
  double lr, grad_norm; /* of the last step */
  double peak_flops;    /* the job's peak FLOP/s, the MFU's denominator */
  OutputFile *log_json; /* rank 0 with --log-json: log_file, else NULL */
  OutputFile log_file;
  CommFailureHook log_hook; /* puts what the log holds in place when the run fails */
  double log_started;   /* rank 0: when the loop began, and at which step (the progress line's
                           pace) */
  int64_t log_first_step;
  Profile profile;      /* with --profile (run.profile points to it) */
} Trainer;

/* On the ranks that read tokens (those of chunk 0 and of the last chunk): opens the token files
 * of --data, --val and --eval that the run names, and the host and device buffers of this DP
 * rank's share of a batch. A file that cannot be read ends the job with one line. */
void batch_open(Trainer *t);
/* Frees what batch_open made (nothing where it made nothing). */
void batch_close(Trainer *t);
/* Loads this DP rank's share of step `step` (validation batch `step` when val) and sets the loss
 * scale. */
void batch_load(Trainer *t, int64_t step, int val);
/* This rank holds a share of the loss: the last stage's TP rank 0 of each DP replica. */
int batch_holds_loss(const Trainer *t);
/* The iteration's loss summed over the ranks that hold a share of it (every rank gets it). */
double batch_loss(Trainer *t);

#endif
