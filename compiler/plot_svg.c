/* plot_svg.c: loss curves, and learning-rate and gradient-norm panels, drawn as SVG in the hand of
 * the plan's timeline (svg.h). */
#include "plot_svg.h"

#include <math.h>

#include "svg.h"

enum { LEFT = 72, RIGHT = 24, TOP = 44, WIDTH = 720, LOSS_HEIGHT = 300, SMALL_HEIGHT = 110 };
enum { GAP = 34, AXIS_LABEL = 16, LEGEND_ROW = 22 };

typedef enum { Q_LOSS, Q_LR, Q_GRAD_NORM } Quantity;

typedef struct {
  Quantity quantity;
  const char *name, *label;
  double top, height;
  double x0, x1, y0, y1;   /* the data range drawn */
  double x_step, y_step; /* between ticks */
} Panel;

/* The x of a step line, and of validation v of the log (its step times the tokens a step). */
static double step_x(const PlotStep *s, const PlotOptions *o) {
  return o->x_tokens ? s->tokens : s->step;
}

static double validation_x(const PlotLog *log, const PlotValidation *v, const PlotOptions *o) {
  return o->x_tokens ? v->step * log->steps[0].tokens / log->steps[0].step : v->step;
}

static double step_y(const PlotStep *s, Quantity q) {
  return q == Q_LOSS ? s->loss : q == Q_LR ? s->lr : s->grad_norm;
}

/* [lo, hi] widened to whole ticks of svg_tick_step(span · sparser), that step returned (a single
 * value gets room around it). */
static double nice_range(double lo, double hi, double sparser, double *from, double *to) {
  if (!(hi > lo)) {
    double pad = lo != 0 ? fabs(lo) * 0.1 : 1;
    lo -= pad, hi += pad;
  }
  double step = svg_tick_step((hi - lo) * sparser);
  *from = floor(lo / step) * step, *to = ceil(hi / step) * step;
  return step;
}

static void extend(double v, double *lo, double *hi) {
  if (!isfinite(v)) return;
  if (v < *lo) *lo = v;
  if (v > *hi) *hi = v;
}

/* The x range every panel shares: from 0 to past the last step or validation of any run. */
static void x_range(const PlotLog *logs, int nlogs, const PlotOptions *o, Panel *p) {
  double lo = 0, hi = 0;
  for (int r = 0; r < nlogs; r++) {
    for (int i = 0; i < logs[r].nsteps; i++) extend(step_x(&logs[r].steps[i], o), &lo, &hi);
    for (int i = 0; i < logs[r].nvalidations; i++)
      extend(validation_x(&logs[r], &logs[r].validations[i], o), &lo, &hi);
  }
  p->x_step = nice_range(lo, hi, 1, &p->x0, &p->x1);
}

/* The panel's y range over every run's values. */
static void y_range(const PlotLog *logs, int nlogs, Panel *p) {
  double lo = INFINITY, hi = -INFINITY;
  for (int r = 0; r < nlogs; r++) {
    for (int i = 0; i < logs[r].nsteps; i++)
      extend(step_y(&logs[r].steps[i], p->quantity), &lo, &hi);
    for (int i = 0; p->quantity == Q_LOSS && i < logs[r].nvalidations; i++)
      extend(logs[r].validations[i].val_loss, &lo, &hi);
  }
  if (lo > hi) lo = hi = 0;
  p->y_step = nice_range(lo, hi, LOSS_HEIGHT / p->height, &p->y0, &p->y1);
}

static double px(const Panel *p, double x) { return LEFT + (x - p->x0) / (p->x1 - p->x0) * WIDTH; }

static double py(const Panel *p, double y) {
  return p->top + p->height - (y - p->y0) / (p->y1 - p->y0) * p->height;
}

/* Tick values k·step within [from, to], -0 written as 0. */
static double tick_value(long k, double step) {
  double v = (double)k * step;
  return fabs(v) < step * 1e-9 ? 0 : v;
}

static void draw_ticks(const Panel *p, FILE *f) {
  double step = p->y_step, bottom = p->top + p->height;
  for (long k = lround(ceil(p->y0 / step - 1e-9)); k <= lround(floor(p->y1 / step + 1e-9)); k++) {
    double y = py(p, tick_value(k, step));
    fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#eeeeee\"/>\n", LEFT, y,
            LEFT + WIDTH, y);
    fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#444\"/>\n", LEFT - 4, y,
            LEFT, y);
    fprintf(f, "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\" fill=\"#333\">%g</text>\n",
            LEFT - 7, y + 4, tick_value(k, step));
  }
  step = p->x_step;
  for (long k = lround(ceil(p->x0 / step - 1e-9)); k <= lround(floor(p->x1 / step + 1e-9)); k++) {
    double x = px(p, tick_value(k, step));
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x,
            bottom, x, bottom + 4);
    fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" fill=\"#333\">%g</text>\n", x, bottom + 15,
            tick_value(k, step));
  }
}

static void draw_frame(const Panel *p, FILE *f) {
  fprintf(f,
          "<g data-panel=\"%s\" data-x0=\"%.17g\" data-x1=\"%.17g\" data-y0=\"%.17g\" "
          "data-y1=\"%.17g\" data-left=\"%d\" data-top=\"%.17g\" data-width=\"%d\" "
          "data-height=\"%.17g\">\n",
          p->name, p->x0, p->x1, p->y0, p->y1, LEFT, p->top, WIDTH, p->height);
  fprintf(f,
          "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#ffffff\" "
          "stroke=\"#b0b0b0\"/>\n",
          LEFT, p->top, WIDTH, p->height);
  draw_ticks(p, f);
  double middle = p->top + p->height / 2;
  fprintf(f,
          "<text x=\"%d\" y=\"%.1f\" fill=\"#333\" transform=\"rotate(-90 %d %.1f)\">%s</text>\n",
          LEFT - 50, middle, LEFT - 50, middle, p->label);
}

/* The run's line through its step lines' values, broken where a line lacks the value. */
static void draw_line(const Panel *p, const PlotLog *log, int run, const char *colour,
                      const PlotOptions *o, FILE *f) {
  int open = 0;
  for (int i = 0; i < log->nsteps; i++) {
    double x = step_x(&log->steps[i], o), y = step_y(&log->steps[i], p->quantity);
    if (!isfinite(x) || !isfinite(y)) {
      if (open) fprintf(f, "\"/>\n");
      open = 0;
      continue;
    }
    if (!open)
      fprintf(f,
              "<polyline data-run=\"%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
              "points=\"",
              run, colour);
    fprintf(f, "%s%.2f,%.2f", open ? " " : "", px(p, x), py(p, y));
    open = 1;
  }
  if (open) fprintf(f, "\"/>\n");
}

static void draw_validations(const Panel *p, const PlotLog *log, int run, const char *colour,
                             const PlotOptions *o, FILE *f) {
  for (int i = 0; i < log->nvalidations; i++)
    fprintf(f,
            "<circle data-run=\"%d\" cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"%s\" "
            "stroke=\"#ffffff\" stroke-width=\"0.8\"/>\n",
            run, px(p, validation_x(log, &log->validations[i], o)),
            py(p, log->validations[i].val_loss), colour);
}

/* Run r's colour: hues a golden angle apart from the timeline's forward blue. */
static void run_colour(int run, char out[8]) {
  svg_hsl_colour(fmod(212 + 137.508 * run, 360), 0.65, 0.45, out);
}

static void draw_panel(Panel *p, const PlotLog *logs, int nlogs, const PlotOptions *o, FILE *f) {
  char colour[8];
  y_range(logs, nlogs, p);
  draw_frame(p, f);
  for (int r = 0; r < nlogs; r++) {
    run_colour(r, colour);
    draw_line(p, &logs[r], r, colour, o, f);
    if (p->quantity == Q_LOSS) draw_validations(p, &logs[r], r, colour, o, f);
  }
  fprintf(f, "</g>\n");
}

static Panel panel(Quantity q, const char *name, const char *label, double top, double height) {
  return (Panel){.quantity = q, .name = name, .label = label, .top = top, .height = height};
}

/* The panels asked for, stacked from the top; returns their count. */
static int stack_panels(const PlotOptions *o, Panel *panels) {
  int n = 0;
  panels[n++] = panel(Q_LOSS, "loss", "loss", TOP, LOSS_HEIGHT);
  double top = TOP + LOSS_HEIGHT + GAP;
  if (o->lr) panels[n++] = panel(Q_LR, "lr", "learning rate", top, SMALL_HEIGHT);
  if (o->lr) top += SMALL_HEIGHT + GAP;
  if (o->grad_norm)
    panels[n++] = panel(Q_GRAD_NORM, "grad_norm", "gradient norm", top, SMALL_HEIGHT);
  return n;
}

void plot_svg_write(const PlotLog *logs, int nlogs, const PlotOptions *o, FILE *f) {
  Panel panels[3];
  int n = stack_panels(o, panels);
  for (int i = 0; i < n; i++) x_range(logs, nlogs, o, &panels[i]);
  double axis_y = panels[n - 1].top + panels[n - 1].height + GAP - 4;
  double legend_y = axis_y + AXIS_LABEL, height = legend_y + nlogs * LEGEND_ROW + 8;
  const char *x_name = o->x_tokens ? "tokens" : "steps";
  svg_open(LEFT + WIDTH + RIGHT, height, f);
  fprintf(f,
          "<text x=\"%d\" y=\"22\" font-size=\"13\" text-anchor=\"start\" fill=\"#222\">training "
          "loss (lines) and validation loss (circles) against %s</text>\n",
          LEFT, x_name);
  for (int i = 0; i < n; i++) draw_panel(&panels[i], logs, nlogs, o, f);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">%s</text>\n", LEFT + WIDTH / 2.0, axis_y,
          x_name);
  for (int r = 0; r < nlogs; r++) {
    char colour[8];
    run_colour(r, colour);
    svg_legend_entry(LEFT, legend_y + r * LEGEND_ROW, colour, logs[r].path, f);
  }
  fprintf(f, "</svg>\n");
}
