/* rope.c: the frequencies of rotary positions, one formula for the CPU and the GPU kernels. */
#include <math.h>

#include "rope.h"

static double llama3_frequency(const RopeShape *s, double f) {
  double wavelength = 2 * M_PI / f;
  double low_wavelength = s->original_positions / s->low_freq_factor;
  double high_wavelength = s->original_positions / s->high_freq_factor;
  if (wavelength < high_wavelength) return f;
  if (wavelength > low_wavelength) return f / s->factor;
  double a = (s->original_positions / wavelength - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
  return f * ((1 - a) / s->factor + a);
}

void rope_frequencies(const RopeShape *s, double *freq) {
  for (int i = 0; i < s->rotary / 2; i++) {
    double f = pow(s->theta, -2.0 * i / s->rotary);
    if (s->scaling == ROPE_SCALING_LINEAR) f /= s->factor;
    else if (s->scaling == ROPE_SCALING_LLAMA3) f = llama3_frequency(s, f);
    freq[i] = f;
  }
}
