/* svg.c: the page, colours, ticks and legend entries plait's SVG drawings share. */
#include "svg.h"

#include <math.h>

#include "escape.h"

void svg_open(double width, double height, FILE *f) {
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 "
          "%.0f %.0f\" "
          "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\" text-anchor=\"middle\">\n",
          width, height, width, height);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
}

void svg_hsl_colour(double hue, double saturation, double lightness, char out[8]) {
  double c = (1 - fabs(2 * lightness - 1)) * saturation, h = hue / 60,
         x = c * (1 - fabs(fmod(h, 2) - 1));
  double r = 0, g = 0, b = 0, m = lightness - c / 2;
  if (h < 1) r = c, g = x;
  else if (h < 2) r = x, g = c;
  else if (h < 3) g = c, b = x;
  else if (h < 4) g = x, b = c;
  else if (h < 5) r = x, b = c;
  else r = c, b = x;
  snprintf(out, 8, "#%02x%02x%02x", (int)lround((r + m) * 255), (int)lround((g + m) * 255),
           (int)lround((b + m) * 255));
}

double svg_tick_step(double span) {
  double raw = span / 10, power = pow(10, floor(log10(raw > 0 ? raw : 1))), step = power;
  if (raw / power > 5) step = 10 * power;
  else if (raw / power > 2) step = 5 * power;
  else if (raw / power > 1) step = 2 * power;
  return step;
}

void svg_legend_entry(double x, double y, const char *fill, const char *label, FILE *f) {
  fprintf(f,
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#888\" "
          "stroke-width=\"0.6\"/>\n",
          x, y, fill);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\" text-anchor=\"start\">", x + 19,
          y + 11.5);
  escape_write(ESC_XML, label, f);
  fprintf(f, "</text>\n");
}
