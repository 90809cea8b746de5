/* cmd_plot.c: `plait plot LOG.json... -o CURVE.svg [--x steps|tokens] [--lr] [--grad-norm]`:
 * training logs (DIR/train --log-json) drawn as loss curves, one colour a run (plot_svg.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ir/diag.h"
#include "outfile.h"
#include "plot_log.h"
#include "plot_svg.h"

enum { PLOT_LOGS_MAX = 16 };

typedef struct {
  const char *inputs[PLOT_LOGS_MAX];
  int ninputs;
  const char *output;
  PlotOptions options;
} PlotArgs;

static int parse_x(const char *value, PlotOptions *o, Diag *d) {
  if (value && strcmp(value, "steps") == 0) o->x_tokens = 0;
  else if (value && strcmp(value, "tokens") == 0) o->x_tokens = 1;
  else return diag(d, "--x takes steps or tokens, as in --x tokens");
  return 0;
}

static int add_input(PlotArgs *a, const char *path, Diag *d) {
  if (a->ninputs == PLOT_LOGS_MAX)
    return diag(d, "more than %d logs; plot at most %d at once", PLOT_LOGS_MAX, PLOT_LOGS_MAX);
  a->inputs[a->ninputs++] = path;
  return 0;
}

static int parse_args(int argc, char **argv, PlotArgs *a, Diag *d) {
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(arg, "-o") == 0) {
      if (!value) return diag(d, "-o takes the output file, as in -o curve.svg");
      a->output = argv[++i];
    } else if (strcmp(arg, "--x") == 0) {
      if (parse_x(value, &a->options, d)) return -1;
      i++;
    } else if (strcmp(arg, "--lr") == 0) {
      a->options.lr = 1;
    } else if (strcmp(arg, "--grad-norm") == 0) {
      a->options.grad_norm = 1;
    } else if (arg[0] == '-') {
      return diag(d, "unknown flag %s; see plait help", arg);
    } else if (add_input(a, arg, d)) {
      return -1;
    }
  }
  if (a->ninputs == 0)
    return diag(d, "plot needs training logs: plait plot LOG.json... -o curve.svg");
  if (!a->output) return diag(d, "plot needs an output file: add -o curve.svg");
  return 0;
}

/* What the options draw must be in every log: tokens on every step line, some gradient norm. */
static int check_log(const PlotLog *log, const PlotOptions *o, Diag *d) {
  int grad_norms = 0;
  for (int i = 0; i < log->nsteps; i++) {
    if (o->x_tokens && !isfinite(log->steps[i].tokens))
      return diag(d, "%s: step %.0f has no \"tokens\" (a log written before they were recorded); "
                  "plot it against steps", log->path, log->steps[i].step);
    grad_norms += isfinite(log->steps[i].grad_norm);
  }
  if (o->grad_norm && grad_norms == 0)
    return diag(d, "%s: no step line has \"grad_norm\"; plot it without --grad-norm", log->path);
  return 0;
}

static int write_svg(const PlotArgs *a, const PlotLog *logs, Diag *d) {
  OutFile out;
  if (outfile_check("-o", a->output, a->inputs, a->ninputs, d) || outfile_open(&out, a->output, d))
    return -1;
  plot_svg_write(logs, a->ninputs, &a->options, out.file);
  if (outfile_close(&out, d)) return -1;
  int steps = 0;
  for (int i = 0; i < a->ninputs; i++) steps += logs[i].nsteps;
  printf("%s: the loss of %d run%s, %d step lines\n", a->output, a->ninputs,
         a->ninputs == 1 ? "" : "s", steps);
  return 0;
}

int cmd_plot(int argc, char **argv) {
  Diag d;
  PlotArgs a = {0};
  PlotLog logs[PLOT_LOGS_MAX];
  int read = 0, rc = parse_args(argc, argv, &a, &d);
  for (; rc == 0 && read < a.ninputs; read++) {
    rc = plot_log_read(&logs[read], a.inputs[read], &d);
    if (rc == 0) rc = check_log(&logs[read], &a.options, &d);
  }
  if (rc == 0) rc = write_svg(&a, logs, &d);
  for (int i = 0; i < read; i++) plot_log_free(&logs[i]);
  if (rc == 0) return 0;
  diag_print(d.msg);
  return 1;
}
