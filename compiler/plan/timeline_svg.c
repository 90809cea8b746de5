/* timeline_svg.c: a simulated iteration drawn as the Megatron-LM paper draws schedules: one lane
 * per rank, forward boxes in blue and backward boxes in green numbered by microbatch, darker for
 * earlier chunks, the optimizer step grey, idle time (the bubble) left white, the all-gather that
 * ends an action (the weights' after the step, a scattered activation's in its node) in purple, a
 * time axis and a legend. */
#include <math.h>

#include "schedule/simulate.h"
#include "svg.h"

enum { LEFT = 64, RIGHT = 24, TOP = 44, LANE = 30, LANE_GAP = 6, AXIS = 38, LEGEND_ROW = 22 };

typedef struct {
  double scale; /* pixels per simulated unit (second) */
  double width; /* of the plot area */
  const char *unit;
} Frame;

/* Chunk c of vpp: the first chunk darkest, the last lightest. */
static double chunk_lightness(int chunk, int vpp) {
  return vpp == 1 ? 0.45 : 0.35 + 0.4 * chunk / (vpp - 1);
}

static void fill_of(const Schedule *s, const Action *a, char out[8]) {
  if (a->kind == ACTION_STEP) {
    snprintf(out, 8, "#9e9e9e");
    return;
  }
  int chunk = a->stage / s->pp;
  if (a->kind == ACTION_B) svg_hsl_colour(135, 0.45, chunk_lightness(chunk, s->vpp), out);
  else if (a->kind == ACTION_F) svg_hsl_colour(212, 0.65, chunk_lightness(chunk, s->vpp), out);
  else snprintf(out, 8, "#e08a2c");
}

static double lane_top(int rank) { return TOP + rank * (LANE + LANE_GAP); }

static const char *const GATHER_FILL = "#8e5bb5";

static void draw_box(const Schedule *s, const Frame *fr, int rank, const Action *a,
                     const Span *span, FILE *f) {
  double x = LEFT + span->start * fr->scale, w = (span->end - span->start) * fr->scale;
  int compute = schedule_is_compute(a->kind) || a->kind == ACTION_STEP;
  double y = lane_top(rank) + (compute ? 0 : LANE - 5), h = compute ? LANE : 5;
  char fill[8];
  if (w <= 0) return;
  fill_of(s, a, fill);
  fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"%s/>\n", x, y,
          w, h, fill, compute && w >= 4 ? " stroke=\"#ffffff\" stroke-width=\"0.8\"" : "");
  if (span->gather > 0)
    fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"/>\n",
            x + w - span->gather * fr->scale, y, span->gather * fr->scale, h, GATHER_FILL);
  if (!schedule_is_compute(a->kind) || w < 7.5 * (a->microbatch >= 10 ? 2 : 1)) return;
  double light = chunk_lightness(a->stage / s->pp, s->vpp);
  fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" fill=\"%s\">%d</text>\n", x + w / 2, y + LANE / 2 + 4,
          light > 0.6 ? "#1a1a1a" : "#ffffff", a->microbatch);
}

static void draw_axis(const Schedule *s, const Frame *fr, double end, FILE *f) {
  double y = lane_top(s->pp) + 4, step = svg_tick_step(end);
  fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#444\"/>\n", LEFT, y,
          LEFT + fr->width, y);
  for (double t = 0; t <= end * (1 + 1e-9); t += step) {
    double x = LEFT + t * fr->scale;
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x, y, x,
            y + 4);
    fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" fill=\"#333\">%g</text>\n", x, y + 15, t);
  }
  fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" fill=\"#333\">time (%s)</text>\n", LEFT + fr->width / 2,
          y + 30, fr->unit);
}

/* Does any action draw an optimizer step (step 1), or an all-gather at its end (0)? */
static int any_drawn(const Schedule *s, const Timeline *t, int step) {
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++) {
      const Span *span = &t->span[r][i];
      if (step ? s->rank[r].action[i].kind == ACTION_STEP && span->end > span->start
               : span->gather > 0)
        return 1;
    }
  return 0;
}

static void draw_legend(const Schedule *s, const Timeline *t, double y, FILE *f) {
  char fill[8], label[64];
  double x = LEFT;
  for (int pass = 0; pass < 2; pass++)
    for (int c = 0; c<s->vpp; c++, x += s->vpp> 1 ? 150 : 110) {
      Action a = {.kind = pass ? ACTION_B : ACTION_F, .stage = c * s->pp};
      fill_of(s, &a, fill);
      if (s->vpp > 1)
        snprintf(label, sizeof label, "%s, chunk %d", pass ? "backward" : "forward", c);
      else snprintf(label, sizeof label, "%s", pass ? "backward" : "forward");
      svg_legend_entry(x, y, fill, label, f);
    }
  if (any_drawn(s, t, 1)) svg_legend_entry(x, y, "#9e9e9e", "optimizer step", f), x += 120;
  if (any_drawn(s, t, 0)) svg_legend_entry(x, y, GATHER_FILL, "all-gather", f), x += 100;
  svg_legend_entry(x, y, "#ffffff", "idle (bubble)", f);
}

void timeline_svg_write(const Schedule *s, const Timeline *t, FILE *f) {
  double end = t->iteration > 0 ? t->iteration : 1;
  Frame fr = {.unit = t->unit ? "units" : "s"};
  fr.width = end * 28 < 640 ? 640 : end * 28 > 1600 ? 1600 : end * 28;
  fr.scale = fr.width / end;
  double legend_y = lane_top(s->pp) + AXIS + 8, height = legend_y + LEGEND_ROW + 8;
  svg_open(LEFT + fr.width + RIGHT, height, f);
  fprintf(f,
          "<text x=\"%d\" y=\"22\" font-size=\"13\" text-anchor=\"start\" fill=\"#222\">pp %d, vpp "
          "%d, %d microbatches: "
          "bubble fraction %.4g, iteration %g %s</text>\n",
          LEFT, s->pp, s->vpp, s->microbatches, t->bubble_fraction, t->iteration, fr.unit);
  for (int r = 0; r < s->pp; r++) {
    fprintf(f,
            "<rect x=\"%d\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"#ffffff\" "
            "stroke=\"#b0b0b0\"/>\n",
            LEFT, lane_top(r), fr.width, LANE);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#222\">rank %d</text>\n",
            LEFT - 8, lane_top(r) + LANE / 2 + 4, r);
    for (int i = 0; i < s->rank[r].count; i++)
      draw_box(s, &fr, r, &s->rank[r].action[i], &t->span[r][i], f);
  }
  draw_axis(s, &fr, end, f);
  draw_legend(s, t, legend_y, f);
  fprintf(f, "</svg>\n");
}
