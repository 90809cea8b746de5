/* svg.h: what plait's SVG drawings share, so that they look alike: the page's opening (its font,
 * size and white ground), colours from a hue, tick steps and legend entries. */
#ifndef PLAIT_SVG_H
#define PLAIT_SVG_H

#include <stdio.h>

/* Opens the drawing: width × height pixels, Helvetica 11 px, centred text, a white ground. */
void svg_open(double width, double height, FILE *f);

/* An sRGB colour "#rrggbb" from hue (degrees), saturation and lightness in [0, 1]. */
void svg_hsl_colour(double hue, double saturation, double lightness, char out[8]);

/* A step of 1, 2 or 5 times a power of ten giving about ten ticks over span. */
double svg_tick_step(double span);

/* A 14-pixel swatch of fill at (x, y) and its label, escaped for XML (labels may be data). */
void svg_legend_entry(double x, double y, const char *fill, const char *label, FILE *f);

#endif
