/* log.h: what rank 0 prints and records: one line per step, validation losses, a progress line
 * on long runs, the loss of --eval, and the same as JSON lines with --log-json (floating-point
 * values with 17 significant digits, which read back as the same double). */
#ifndef PLAIT_LOG_H
#define PLAIT_LOG_H

#include "train/batch.h"

/* Rank 0: opens --log-json's file (written under no name until log_close, or a failure of the
 * run, puts it in place). */
void log_open(Trainer *t);
/* Rank 0: puts the log in place, every write checked; a failure ends the run with one line. */
void log_close(Trainer *t);

/* What runs where: the model, the layout, the backend and the device, the rate MFU is measured
 * against; notes when the loop began, for the progress line's pace. */
void log_start(Trainer *t);
/* "step N | loss X | lr X | grad-norm X | ms X | tok/s X | MFU X%" */
void log_step(Trainer *t, double loss, double seconds);
void log_validation(Trainer *t, double loss);
/* "eval FILE | loss X | tokens N | perplexity X": the mean loss over N predictions, and exp of
 * it. */
void log_eval(Trainer *t, const char *path, double loss, int64_t tokens);
/* With --tokenizer and --log-json: the line {"sample_tokenizer": NAME} (the file's base name). */
void log_sample_tokenizer(Trainer *t);
/* The run's end: the process's peak resident memory (all ranks that are its threads); with experts
 * spread over ep ranks, the most rows one rank received in an exchange (most_rows, 0 without). */
/* What the experts' exchanges and capacities saw over the run, every rank's (train/trainer.c). */
typedef struct {
  double most;            /* the most rows one rank received in an exchange */
  double routed, dropped; /* rows routed under a capacity, and dropped past it */
} ExpertRowsSeen;
void log_finish(Trainer *t, ExpertRowsSeen rows);

#endif
