/* plot_log.c: reading a training log's step and validation lines, line by line within bounds. */
#include "plot_log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infile.h"
#include "jsonline.h"

static const char *const LOG_FIX =
    "a training log holds one JSON object a line, as DIR/train --log-json writes";

enum { F_STEP, F_LOSS, F_VAL_LOSS, F_LR, F_GRAD_NORM, F_TOKENS, F_COUNT };

/* Grows an array of items of `size` bytes to hold one more. */
static int grow(void **items, int count, int *cap, size_t size) {
  if (count < *cap) return 0;
  int more = *cap ? 2 * *cap : 256;
  void *bigger = realloc(*items, (size_t)more * size);
  if (!bigger) return -1;
  *items = bigger, *cap = more;
  return 0;
}

static double field_or_nan(const JsonField *f) { return f->found ? f->value : NAN; }

/* Keeps the line's step or validation point, after checking its numbers. */
static int keep_line(PlotLog *log, const JsonField *f, long line, Diag *d) {
  if (!f[F_STEP].found || (!f[F_LOSS].found && !f[F_VAL_LOSS].found)) return 0;
  double step = f[F_STEP].value;
  if (step < 1 || step > 1e15 || step != floor(step))
    return diag(d, "%s:%ld: step %g is not a whole number from 1; %s", log->path, line, step,
                LOG_FIX);
  if (f[F_LOSS].found) {
    if (grow((void **)&log->steps, log->nsteps, &log->steps_cap, sizeof *log->steps))
      return diag(d, "out of memory reading %s", log->path);
    log->steps[log->nsteps++] =
        (PlotStep){step, field_or_nan(&f[F_TOKENS]), f[F_LOSS].value, field_or_nan(&f[F_LR]),
                   field_or_nan(&f[F_GRAD_NORM])};
  }
  if (f[F_VAL_LOSS].found) {
    if (grow((void **)&log->validations, log->nvalidations, &log->validations_cap,
             sizeof *log->validations))
      return diag(d, "out of memory reading %s", log->path);
    log->validations[log->nvalidations++] = (PlotValidation){step, f[F_VAL_LOSS].value};
  }
  return 0;
}

static int read_line(PlotLog *log, const char *text, size_t n, long line, Diag *d) {
  JsonField f[F_COUNT] = {[F_STEP] = {"step", 0, 0},   [F_LOSS] = {"loss", 0, 0},
                          [F_VAL_LOSS] = {"val_loss", 0, 0}, [F_LR] = {"lr", 0, 0},
                          [F_GRAD_NORM] = {"grad_norm", 0, 0}, [F_TOKENS] = {"tokens", 0, 0}};
  char why[256];
  if (jsonline_read(text, n, f, F_COUNT, why, sizeof why))
    return diag(d, "%s:%ld: %s; %s", log->path, line, why, LOG_FIX);
  return keep_line(log, f, line, d);
}

/* The next line into buf (without its newline); 0 at the end of the file, 1 with a line, -1 when
 * it is too long or holds a NUL byte. */
static int next_line(FILE *in, char *buf, size_t *n, const char **why) {
  int ch;
  *n = 0;
  while ((ch = getc(in)) != EOF && ch != '\n') {
    if (ch == 0) return *why = "a NUL byte: this is not a text file", -1;
    if (*n == PLOT_LINE_MAX) return *why = "the line is longer than 65536 bytes", -1;
    buf[(*n)++] = (char)ch;
  }
  buf[*n] = 0;
  return ch == EOF && *n == 0 ? 0 : 1;
}

/* Every line of in; a line of nothing but spaces is passed over. */
static int read_lines(PlotLog *log, FILE *in, char *buf, Diag *d) {
  size_t n;
  const char *why = NULL;
  int got;
  long line = 0;
  while ((got = next_line(in, buf, &n, &why)) != 0) {
    if (++line > PLOT_LINES_MAX)
      return diag(d, "%s: more than %d lines; plot a shorter log", log->path, PLOT_LINES_MAX);
    if (got < 0) return diag(d, "%s:%ld: %s; %s", log->path, line, why, LOG_FIX);
    if (strspn(buf, " \t\r") < n && read_line(log, buf, n, line, d)) return -1;
  }
  if (ferror(in)) return diag(d, "cannot read %s; check the file", log->path);
  return 0;
}

int plot_log_read(PlotLog *log, const char *path, Diag *d) {
  memset(log, 0, sizeof *log);
  log->path = path;
  char why[512];
  FILE *in = infile_open(path, why, sizeof why);
  if (!in)
    return diag(d, "%s: %s; give the log a training program wrote with --log-json", path, why);
  char *buf = malloc(PLOT_LINE_MAX + 1);
  int rc = buf ? read_lines(log, in, buf, d) : diag(d, "out of memory reading %s", path);
  free(buf);
  fclose(in);
  if (rc == 0 && log->nsteps == 0)
    rc = diag(d, "%s has no step lines (\"step\" and \"loss\"); give the --log-json log of a run "
              "that trained at least one step", path);
  if (rc) plot_log_free(log);
  return rc;
}

void plot_log_free(PlotLog *log) {
  free(log->steps);
  free(log->validations);
  log->steps = NULL, log->validations = NULL;
}
