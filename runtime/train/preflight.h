/* preflight.h: what DIR/train checks before any rank starts, besides its flags: the files it
 * reads are regular files (a named pipe would block the open for ever), the files it writes can
 * be written and replace nothing it reads, the ranks fit the threads this process can run, and
 * the plan's memory fits what this process or machine can still take. Each refusal is one line
 * naming the cause and the fix. */
#ifndef PLAIT_PREFLIGHT_H
#define PLAIT_PREFLIGHT_H

#include "message.h"
#include "program.h"
#include "train/args.h"

/* A start-up refusal: one line, without "plait: ". */
enum { REFUSAL_TEXT = MESSAGE_TEXT };
typedef struct {
  char text[REFUSAL_TEXT];
} Refusal;

/* Writes the line into r and returns 1. */
int refuse(Refusal *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --data, --val and --eval, and the checkpoint file of --load or --init, are regular files (by
 * stat, before anything opens them). A file that is missing is left to the reader that names it. */
int preflight_inputs(const TrainArgs *a, Refusal *r);
/* --log-json and --trace: output_check's checks, each against the run's inputs, the checkpoint file
 * --save writes, the program itself and the other. */
int preflight_outputs(const TrainArgs *a, Refusal *r);
/* Ranks that are threads of this process: no more than the device lets one process run. */
int preflight_local_ranks(const Program *p, Refusal *r);
/* The plan of the ranks that share this process's memory (all of them when they are threads;
 * under a launcher, the ranks on this machine, counted with the smallest plans) against the
 * memory the device says can still be had. */
int preflight_memory(const Program *p, Refusal *r);

#endif
