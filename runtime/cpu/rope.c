/* rope.c: rotary positions on the CPU, forward and back. */
#include "cpu.h"
#include "kernels.h"

/* The pair of dims (a, b) that pair i of a head turns. */
static void rope_pair(const RopeShape *s, int i, int *a, int *b) {
  *a = s->interleaved ? 2 * i : i;
  *b = s->interleaved ? 2 * i + 1 : i + s->rotary / 2;
}

/* One position's heads: (y_a, y_b) = (x_a·cos − x_b·sin, x_b·cos + x_a·sin), sin negated for the
 * inverse; the dims past `rotary` copied. */
static void rope_position(const RopeShape *s, const real *cos_t, const real *sin_t, const act_t *x, act_t *y) {
  int half = s->rotary / 2;
  real sign = s->inverse ? -1 : 1;
  for (int h = 0; h < s->heads; h++) {
    const act_t *xh = x + (int64_t)h * s->head_dim;
    act_t *yh = y + (int64_t)h * s->head_dim;
    for (int e = s->rotary; e < s->head_dim; e++) yh[e] = xh[e];
    for (int i = 0; i < half; i++) {
      int a, b;
      rope_pair(s, i, &a, &b);
      real xa = xh[a], xb = xh[b], sn = sign * sin_t[i];
      yh[a] = xa * cos_t[i] - xb * sn;
      yh[b] = xb * cos_t[i] + xa * sn;
    }
  }
}

/* cos and sin of t·freq_i are computed in double once per call, [T][rotary/2] each. */
void k_rope(const RopeShape *s, const act_t *x, act_t *y) {
  int half = s->rotary / 2;
  double *freq = cpu_alloc((size_t)half, sizeof(double), "rotary frequencies");
  real *cos_table = cpu_alloc((size_t)(2 * s->T * half), sizeof(real), "rotary tables");
  real *sin_table = cos_table + s->T * half;
  rope_frequencies(s, freq);
  for (int64_t t = 0; t < s->T; t++)
    for (int i = 0; i < half; i++) {
      cos_table[t * half + i] = (real)cos((double)t * freq[i]);
      sin_table[t * half + i] = (real)sin((double)t * freq[i]);
    }
  int64_t width = (int64_t)s->heads * s->head_dim;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < s->B * s->T; p++) {
    int64_t t = p % s->T;
    rope_position(s, cos_table + t * half, sin_table + t * half, x + p * width, y + p * width);
  }
  free(freq);
  free(cos_table);
}
