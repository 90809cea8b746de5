/* plot_svg.h: training logs drawn as an SVG: training loss as a line and validation loss as
 * circles against steps or tokens, one colour a run, and optionally the learning rate and the
 * gradient norm in panels below on the same x axis.
 *
 * Each panel is a <g data-panel="loss|lr|grad_norm"> whose data-x0, data-x1, data-y0, data-y1
 * (the data range) and data-left, data-top, data-width, data-height (its pixels) give the map:
 * x = left + (value - x0) / (x1 - x0) · width, y = top + height - (value - y0) / (y1 - y0) ·
 * height. Run i's lines and circles carry data-run="i". */
#ifndef PLAIT_PLOT_SVG_H
#define PLAIT_PLOT_SVG_H

#include <stdio.h>

#include "plot_log.h"

typedef struct {
  int x_tokens;  /* x is tokens trained (each step line's "tokens") rather than steps */
  int lr;        /* a learning-rate panel */
  int grad_norm; /* a gradient-norm panel */
} PlotOptions;

void plot_svg_write(const PlotLog *logs, int nlogs, const PlotOptions *o, FILE *f);

#endif
