/* trainer.h: a rank's training: its run state, parameters, plan walker, data and optimizer, and the
 * loop of steps with validation, checkpoints and logs, then --eval. */
#ifndef PLAIT_TRAINER_H
#define PLAIT_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "data.h"
#include "exec.h"
#include "optim.h"
#include "output.h"
#include "params.h"
#include "profile.h"
#include "rt.h"

/* The flags of the seed and schedule that the command line gave (TrainArgs.given): --load holds them
 * against the checkpoint's. */
enum { GIVEN_SEED = 1, GIVEN_LR = 2, GIVEN_WARMUP = 4, GIVEN_WEIGHT_DECAY = 8 };

typedef struct {
  const char *data, *val_data, *save, *load, *init, *eval, *log_json, *trace;
  int64_t steps, warmup, decay_steps, save_every, eval_every, eval_batches, sample, gradcheck;
  uint64_t seed;
  double lr, grad_clip, weight_decay;
  int given;             /* GIVEN_* */
  int override_schedule; /* --load takes the command line's seed and schedule over the checkpoint's */
  int profile;           /* --profile: time, FLOPs and bytes by kind of work, printed at the end */
  int attention;         /* --attention: an AttentionChoice (kernels.h) */
  double gemm_rate; /* this process's peak: its CPU cores' GEMM FLOP/s measured at start-up, a GPU's bf16 peak */
  char val_path[4096]; /* room for the validation file's name when it is found beside --data */
  const char *start_error; /* under a launcher: this process's start-up refusal, which the ranks tell once */
} TrainArgs;

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
  int32_t *device_tokens, *device_targets; /* the same in the backend's memory, where kernels read them */
  AdamW adamw;
  LrSchedule schedule;
  int64_t step;         /* the next step to run (a loaded checkpoint's step) */
  uint64_t seed;        /* of data windows, dropout and initialisation (a loaded checkpoint's unless the
                           command line overrides it) */
  double lr, grad_norm; /* of the last step */
  double peak_flops;    /* the job's peak FLOP/s, the MFU's denominator */
  OutputFile *log_json; /* rank 0 with --log-json: log_file, else NULL */
  OutputFile log_file;
  CommFailureHook log_hook; /* puts what the log holds in place when the run fails */
  double log_started;   /* rank 0: when the loop began, and at which step (the progress line's pace) */
  int64_t log_first_step;
  Profile profile;      /* with --profile (run.profile points to it) */
} Trainer;

/* The bytes the plan puts on a rank of pipeline rank pp_rank (one TP rank's share). */
size_t trainer_planned_bytes(const Program *p, int pp_rank);
/* The plan's bytes of `ranks` ranks of the world, those with the smallest plans (so every rank's when
 * ranks is the world's size). */
double trainer_planned_bytes_least(const Program *p, int ranks);

/* The per-rank entry point for comm_launch (arg: the TrainArgs). */
int trainer_main(Comm *c, void *arg);

/* This rank holds a share of the loss: the last stage's TP rank 0 of each DP replica. */
int trainer_holds_loss(const Trainer *t);
/* The iteration's loss summed over the ranks that hold a share of it (every rank gets it). */
double trainer_global_loss(Trainer *t);
/* Loads this DP rank's share of step `step` (validation batch `step` when val) and sets the loss scale. */
void trainer_load_batch(Trainer *t, int64_t step, int val);

#endif
