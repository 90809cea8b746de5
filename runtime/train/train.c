/* train.c: main() of every generated program: its flags and the checks made before any work
 * (told at once when the ranks are threads; under a launcher, once for the job by the ranks'
 * agreement), this machine's GEMM rate (MFU's denominator), threads per rank, and the ranks'
 * launch. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/args.h"
#include "constants.h"
#include "device.h"
#include "escape.h"
#include "train/flags.h"
#include "kernels.h"
#include "message.h"
#include "train/preflight.h"
#include "train/sample.h"
#include "train/save_folder.h"
#include "train/trainer.h"
#include "train/wait_policy.h"

/* The validation file `plait data` writes beside OUT.bin: OUT.val.bin, if it is there. */
static const char *default_val(TrainArgs *a) {
  if (!a->data) return NULL;
  size_t n = strlen(a->data);
  if (n < 4 || strcmp(a->data + n - 4, ".bin") != 0 || n + 5 > sizeof a->val_path) return NULL;
  snprintf(a->val_path, sizeof a->val_path, "%.*s.val.bin", (int)(n - 4), a->data);
  return access(a->val_path, R_OK) == 0 ? a->val_path : NULL;
}

/* Mistakes found before any rank starts: one line each. */
static int check(TrainArgs *a, Refusal *r) {
  const Program *p = &plait_program;
  if (!a->data && (a->steps > 0 || a->gradcheck || !a->eval))
    return refuse(
        r, "--data FILE is missing (a token file; make one with plait data --bytes TEXT -o FILE)");
  if (a->eval_every && !a->val_data && !(a->val_data = default_val(a)))
    return refuse(r, "--eval-every needs validation data: --val FILE (or %s's .val.bin beside it)",
                  a->data ? a->data : "--data");
  if (a->init && a->load)
    return refuse(r,
                  "--init %s and --load %s both name a checkpoint: --init starts from its weights "
                  "alone, --load "
                  "resumes its run; give one of them",
                  a->init, a->load);
  if (a->override_schedule && !a->load)
    return refuse(r,
                  "--override-schedule sets a loaded checkpoint's seed and schedule from the "
                  "command line; give it "
                  "with --load DIR");
  if (a->trace && a->steps == 0)
    return refuse(r,
                  "--trace records the timeline of the last training step; give --steps N as well");
  if (a->save_every && !a->save)
    return refuse(r, "--save-every %lld saves checkpoints into --save DIR; give --save DIR as well",
                  (long long)a->save_every);
  if (a->sample && p->pp != 1)
    return refuse(r, "--sample runs on one pipeline stage (pp = 1); this program has pp = %d",
                  p->pp);
  if (a->tokenizer && !a->sample && !a->eval)
    return refuse(r, "--tokenizer %s decodes --sample's text; give --sample N (or --eval FILE)",
                  a->tokenizer);
  char why[MESSAGE_TEXT];
  if (a->tokenizer && sample_tokenizer_check(a->tokenizer, p->vocab, why, sizeof why))
    return refuse(r, "%s", why);
  if (a->gradcheck && p->tp * p->pp * p->dp != 1)
    return refuse(r, "--gradcheck runs on one rank; this program has %d", p->tp * p->pp * p->dp);
  if (a->gradcheck && strcmp(REAL_NAME, "f64") != 0)
    return refuse(r, "--gradcheck needs double precision: build with plait build --double");
  char error[MESSAGE_TEXT];
  if (comm_ranks_per_node(p->tp * p->pp * p->dp, error, sizeof error) < 0)
    return refuse(r, "%s", error);
  if (k_attention_available((AttentionChoice)a->attention, error, sizeof error))
    return refuse(r, "--attention cudnn: %s", error);
  if (a->save && save_folder_check(a->save, a->init, error, sizeof error))
    return refuse(r, "%s", error);
  if (constants_check(p, error, sizeof error)) return refuse(r, "%s", error);
  return 0;
}

/* Every check made before the ranks start, in the order a user would fix them. */
static int preflight(int argc, char **argv, TrainArgs *a, Refusal *r) {
  const Program *p = &plait_program;
  if (argc < 2) return refuse(r, "usage: %s", flags_usage);
  return flags_parse(argc, argv, a, r) || check(a, r) || preflight_inputs(a, r) ||
         preflight_outputs(a, r) || preflight_local_ranks(p, r) || preflight_memory(p, r);
}

int main(int argc, char **argv) {
  TrainArgs args = {.steps = 0,
                    .seed = 1234,
                    .lr = 1e-3,
                    .warmup = 0,
                    .grad_clip = 1.0,
                    .weight_decay = 0.01,
                    .eval_batches = 4};
  const Program *p = &plait_program;
  Refusal refusal;
  wait_policy_settle(argv);
  /* past a file-size limit (ulimit -f) a write fails with EFBIG, which is told */
  signal(SIGXFSZ, SIG_IGN);
  if (preflight(argc, argv, &args, &refusal)) {
    if (!comm_ranks_are_processes()) {
      fprintf(stderr, "plait: ");
      escape_write(ESC_TEXT, refusal.text, stderr);
      return fprintf(stderr, "\n"), 1;
    }
    args.start_error = refusal.text;
  } else {
    args.gemm_rate = device_peak_flops();
    device_share(comm_ranks_on_machine(p->tp * p->pp * p->dp));
  }
  return comm_launch_experts(p->tp, p->tp_copies > 1 ? p->tp_copies : 1, p->pp, p->dp,
                             p->ep > 1 ? p->ep : 1, trainer_main, &args);
}
