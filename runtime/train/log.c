/* log.c: step lines, validation and evaluation lines, progress and JSON lines (each flushed and
 * checked). */
#include "train/log.h"

#include "bytes.h"
#include "clock.h"
#include "device.h"
#include "escape.h"
#include "footprint.h"
#include "message.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Model FLOPs of the iteration over the time it took and this machine's GEMM rate. */
static double mfu(const Trainer *t, double seconds) {
  return t->peak_flops > 0 ? t->prog->flops_per_iteration / seconds / t->peak_flops : 0;
}

/* Long runs also get a line every tenth of the way with the time left at the pace so far: the
 * time since the loop began (validation and checkpoints included) over the steps this run has
 * made. */
static void progress(Trainer *t) {
  static const int64_t long_run = 50;
  int64_t done = t->step + 1, total = t->args->steps;
  if (total < long_run || done % (total / 10) != 0 || done == total) return;
  double pace = (clock_seconds() - t->log_started) / (double)(done - t->log_first_step);
  double left = pace * (double)(total - done);
  printf("progress %lld/%lld steps (%d%%), about %.0f s left\n", (long long)done, (long long)total,
         (int)(100 * done / total), left);
}

void log_open(Trainer *t) {
  char error[MESSAGE_TEXT];
  if (!t->args->log_json) return;
  if (output_open(&t->log_file, "--log-json", t->args->log_json, error, sizeof error) != 0)
    comm_fail(t->comm, "%s", error);
  t->log_json = &t->log_file;
  t->log_hook = (CommFailureHook){output_salvage, &t->log_file};
  comm_on_failure(t->comm, &t->log_hook);
}

void log_close(Trainer *t) {
  char error[MESSAGE_TEXT];
  if (!t->log_json) return;
  comm_on_failure(t->comm, NULL);
  if (output_commit(t->log_json, error, sizeof error) != 0) comm_fail(t->comm, "%s", error);
  t->log_json = NULL;
}

/* A JSON line is written whole or the run ends: flushed and checked after each. */
static void json_written(Trainer *t) {
  char error[MESSAGE_TEXT];
  if (output_flush(t->log_json, error, sizeof error) != 0) comm_fail(t->comm, "%s", error);
}

void log_start(Trainer *t) {
  const Program *p = t->prog;
  printf(
      "%s: tp %d × pp %d × dp %d (vpp %d, %s), %d microbatch%s of %d × %d tokens per step; %s "
      "ranks on %s, "
      "MFU against %.1f GFLOP/s\n",
      p->name, p->tp, p->pp, p->dp, p->vpp,
      p->sequence_parallel ? "sequence parallel" : "no sequence parallelism", p->microbatches,
      p->microbatches == 1 ? "" : "es", p->mbs, p->seq, comm_backend_name(t->comm), device_name(),
      t->peak_flops / 1e9);
  fflush(stdout);
  t->log_started = clock_seconds();
  t->log_first_step = t->step;
}

void log_step(Trainer *t, double loss, double seconds) {
  double tokens = (double)t->prog->gbs * t->prog->seq;
  printf("step %lld | loss %.6f | lr %.3e | grad-norm %.4f | ms %.1f | tok/s %.0f | MFU %.1f%%\n",
         (long long)t->step + 1, loss, t->lr, t->grad_norm, seconds * 1e3, tokens / seconds,
         100 * mfu(t, seconds));
  progress(t);
  fflush(stdout);
  if (t->log_json) {
    fprintf(t->log_json->file,
            "{\"step\": %lld, \"loss\": %.17g, \"lr\": %.17g, \"grad_norm\": %.17g, \"ms\": %.17g, "
            "\"tokens_per_s\": %.17g, \"mfu\": %.17g, \"dp_buckets\": %d, "
            "\"dp_buckets_during_backward\": %d, \"pp_bytes_across_nodes\": %.0f, "
            "\"tokens\": %.0f}\n",
            (long long)t->step + 1, loss, t->lr, t->grad_norm, seconds * 1e3, tokens / seconds,
            mfu(t, seconds), t->exec.buckets, t->exec.buckets_during_backward,
            t->exec.bytes_across_nodes, tokens * (double)(t->step + 1));
    json_written(t);
  }
}

/* What the plan puts on the ranks of this process: every rank when they are threads, else this
 * one. */
static double planned_bytes_here(const Trainer *t) {
  const Program *p = t->prog;
  if (strcmp(comm_backend_name(t->comm), "local") != 0)
    return (double)footprint_bytes(p, comm_info(t->comm)->pp_rank);
  return footprint_bytes_least(p, p->tp * p->pp * p->dp);
}

static void log_expert_rows(Trainer *t, ExpertRowsSeen rows) {
  if (rows.most > 0) {
    printf("experts: the most rows one rank received in an exchange %.0f\n", rows.most);
    if (t->log_json) fprintf(t->log_json->file, "{\"expert_rows_most\": %.0f}\n", rows.most);
  }
  if (rows.routed > 0) {
    printf("experts: %.0f of %.0f routed rows dropped past the experts' capacity (%.2f%%)\n",
           rows.dropped, rows.routed, 100 * rows.dropped / rows.routed);
    if (t->log_json)
      fprintf(t->log_json->file, "{\"expert_rows_routed\": %.0f, \"expert_rows_dropped\": %.0f}\n",
              rows.routed, rows.dropped);
  }
}

void log_finish(Trainer *t, ExpertRowsSeen rows) {
  log_expert_rows(t, rows);
  DeviceMemory held = device_memory_held();
  double planned = planned_bytes_here(t);
  char held_text[32], planned_text[32];
  bytes_format(held.bytes, held_text, sizeof held_text);
  bytes_format(planned, planned_text, sizeof planned_text);
  printf("%s %s (%s); the plan's memory of its ranks %s (%s)\n", held.what, held_text, held.scope,
         planned_text, device_name());
  if (t->run.profile) profile_print(t->run.profile, stdout, t->log_json ? t->log_json->file : NULL);
  fflush(stdout);
  if (t->log_json) {
    fprintf(t->log_json->file, "{\"%s\": %.0f, \"planned_bytes\": %.0f}\n", held.json_key,
            held.bytes, planned);
    json_written(t);
  }
}

void log_validation(Trainer *t, double loss) {
  printf("step %lld | validation loss %.6f\n", (long long)t->step + 1, loss);
  fflush(stdout);
  if (t->log_json) {
    fprintf(t->log_json->file, "{\"step\": %lld, \"val_loss\": %.17g}\n", (long long)t->step + 1,
            loss);
    json_written(t);
  }
}

/* --tokenizer's file name without its folders, or NULL. */
static const char *tokenizer_name(const Trainer *t) {
  const char *path = t->args->tokenizer, *slash = path ? strrchr(path, '/') : NULL;
  return slash ? slash + 1 : path;
}

void log_eval(Trainer *t, const char *path, double loss, int64_t tokens) {
  const char *tokenizer = tokenizer_name(t);
  printf("eval %s | loss %.6f | tokens %lld | perplexity %.2f", path, loss, (long long)tokens,
         exp(loss));
  if (tokenizer) printf(" | tokenizer "), escape_write(ESC_TEXT, tokenizer, stdout);
  printf("\n");
  fflush(stdout);
  if (t->log_json) {
    fprintf(t->log_json->file, "{\"eval\": ");
    escape_write(ESC_JSON, path, t->log_json->file);
    fprintf(t->log_json->file, ", \"loss\": %.17g, \"tokens\": %lld, \"perplexity\": %.17g",
            loss, (long long)tokens, exp(loss));
    if (tokenizer) fprintf(t->log_json->file, ", \"tokenizer\": ");
    if (tokenizer) escape_write(ESC_JSON, tokenizer, t->log_json->file);
    fprintf(t->log_json->file, "}\n");
    json_written(t);
  }
}

void log_sample_tokenizer(Trainer *t) {
  const char *tokenizer = tokenizer_name(t);
  if (!t->log_json || !tokenizer) return;
  fprintf(t->log_json->file, "{\"sample_tokenizer\": ");
  escape_write(ESC_JSON, tokenizer, t->log_json->file);
  fprintf(t->log_json->file, "}\n");
  json_written(t);
}
