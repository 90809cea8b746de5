/* flags.h: the flags of DIR/train: one table of their names, kinds and ranges; parsing, with
 * every value checked against its range, every flag given at most once and with its value; and
 * the run's settings as text, which the ranks of a job compare. */
#ifndef PLAIT_FLAGS_H
#define PLAIT_FLAGS_H

#include <limits.h>

#include "train/preflight.h"
#include "train/args.h"

/* The usage line. */
extern const char *const flags_usage;

/* Reads argv[1..argc) into a, whose defaults are set: 0, or 1 with one line in r. */
int flags_parse(int argc, char **argv, TrainArgs *a, Refusal *r);

/* One setting the ranks of a job must share. */
typedef struct {
  char flag[24];             /* "--steps" */
  /* its value as text ("" for a switch, and for --trace, whose path rank 0 alone writes: only
   * its presence counts) */
  char value[PATH_MAX + 32];
  int given;                 /* 0 for a file, directory or switch the command line did not give */
} FlagSetting;

enum { FLAGS_MAX_SETTINGS = 24 };

/* The settings of a run (numbers as the shortest text that reads back as their value), in the
 * table's order; returns their count. --log-json, which only rank 0 writes, is not among them. */
int flags_settings(const TrainArgs *a, FlagSetting *settings);

#endif
