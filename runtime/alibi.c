/* alibi.c: ALiBi's slopes per head, one formula for the CPU and the GPU kernels. */
#include <math.h>

#include "kernels.h"

double attention_alibi_slope(int H, int h) {
  int n = 1;
  while (2 * n <= H) n *= 2;
  if (h < n) return pow(2.0, -8.0 * (h + 1) / n);
  return pow(2.0, -4.0 * (2 * (h - n) + 1) / n);
}
