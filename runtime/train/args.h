/* args.h: the settings of a run of DIR/train as its command line gives them (flags.h reads
 * them in), with the few values main() finds before the ranks start. */
#ifndef PLAIT_ARGS_H
#define PLAIT_ARGS_H

#include <stdint.h>

/* The flags of the seed and schedule that the command line gave (TrainArgs.given): --load holds
 * them against the checkpoint's. */
enum { GIVEN_SEED = 1, GIVEN_LR = 2, GIVEN_WARMUP = 4, GIVEN_WEIGHT_DECAY = 8 };

typedef struct {
  const char *data, *val_data, *save, *load, *init, *eval, *log_json, *trace;
  const char *tokenizer; /* --tokenizer: decodes --sample's text (text/tokenizer.h) */
  int64_t steps, warmup, decay_steps, save_every, eval_every, eval_batches, sample, gradcheck;
  uint64_t seed;
  double lr, grad_clip, weight_decay;
  int given;             /* GIVEN_* */
  int override_schedule; /* --load takes the command line's seed and schedule over the
                            checkpoint's */
  int profile;           /* --profile: time, FLOPs and bytes by kind of work, printed at the end */
  int attention;         /* --attention: an AttentionChoice (kernels.h) */
  double gemm_rate;      /* this process's peak: its CPU cores' GEMM FLOP/s measured at start-up,
                            a GPU's bf16 peak */
  char val_path[4096];   /* room for the validation file's name when it is found beside --data */
  const char *start_error; /* under a launcher: this process's start-up refusal, which the ranks
                              tell once */
} TrainArgs;

#endif
