/* plot_log.h: a training log (the JSON lines DIR/train --log-json writes) read for plait plot:
 * its step lines ("step", "loss", "lr", "grad_norm", "tokens") and validation lines ("step",
 * "val_loss"); other lines (memory, profile, evaluation) are checked as JSON and passed over.
 * A log is a stranger's file: its lines and their count are bounded, and the first line that is
 * not a JSON object, or whose step or loss is not a usable number, is refused naming FILE:LINE. */
#ifndef PLAIT_PLOT_LOG_H
#define PLAIT_PLOT_LOG_H

#include "ir/diag.h"

enum {
  PLOT_LINE_MAX = 65536,   /* bytes in a line, its newline not counted */
  PLOT_LINES_MAX = 2000000 /* lines in a log */
};

/* One step line; a member the line lacks is NAN (lr, grad_norm, tokens). */
typedef struct {
  double step, tokens, loss, lr, grad_norm;
} PlotStep;

/* One validation line. */
typedef struct {
  double step, val_loss;
} PlotValidation;

typedef struct {
  const char *path;
  PlotStep *steps;
  int nsteps, steps_cap;
  PlotValidation *validations;
  int nvalidations, validations_cap;
} PlotLog;

/* Reads the log at path (which must outlive it). Returns 0, or -1 with one line in d (and
 * nothing to free). */
int plot_log_read(PlotLog *log, const char *path, Diag *d);
void plot_log_free(PlotLog *log);

#endif
