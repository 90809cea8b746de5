/* half.c: F16 and BF16 to and from double. Both formats are a sign bit, an exponent of e bits biased by
 * 2^(e−1) − 1 and a fraction of m bits: F16 has e = 5, m = 10; BF16 (the top half of a float) e = 8,
 * m = 7. A number with exponent field E > 0 is (1 + fraction/2^m)·2^(E − bias); E = 0 holds the
 * subnormals fraction·2^(1 − bias − m); E all ones infinity (fraction 0) or NaN. */
#include "half.h"

#include <math.h>

typedef struct {
  int exponent_bits, fraction_bits;
} HalfFormat;

static const HalfFormat f16 = {5, 10}, bf16 = {8, 7};

static double decode(HalfFormat f, uint16_t bits) {
  int bias = (1 << (f.exponent_bits - 1)) - 1, all_ones = (1 << f.exponent_bits) - 1;
  int exponent = bits >> f.fraction_bits & all_ones, fraction = bits & ((1 << f.fraction_bits) - 1);
  double sign = bits >> 15 ? -1 : 1;
  if (exponent == all_ones) return fraction ? copysign(NAN, sign) : sign * INFINITY;
  if (exponent == 0) return sign * ldexp(fraction, 1 - bias - f.fraction_bits);
  return sign * ldexp(fraction + (1 << f.fraction_bits), exponent - bias - f.fraction_bits);
}

/* |x| = n·2^(e − m) with n rounded to an integer (rint: to nearest, ties to even), for the exponent e
 * of x clamped below at the smallest normal one: there n < 2^m is a subnormal, whose bits are n itself;
 * otherwise 2^m ≤ n ≤ 2^(m+1), and n = 2^(m+1) (rounding carried) is 2^m at the next exponent. */
static uint16_t encode(HalfFormat f, double x) {
  int bias = (1 << (f.exponent_bits - 1)) - 1, m = f.fraction_bits;
  uint16_t sign = signbit(x) ? 0x8000 : 0, infinity = (uint16_t)(((1 << f.exponent_bits) - 1) << m);
  if (isnan(x)) return sign | infinity | (uint16_t)(1 << (m - 1));
  if (isinf(x)) return sign | infinity;
  int e;
  frexp(fabs(x), &e); /* |x| = s·2^e, s in [0.5, 1): the exponent of x is e − 1 */
  e = e - 1 < 1 - bias ? 1 - bias : e - 1;
  double n = rint(ldexp(fabs(x), m - e));
  if (n == ldexp(1, m + 1)) n /= 2, e++;
  if (e > bias) return sign | infinity;
  if (n < ldexp(1, m)) return sign | (uint16_t)n;
  return sign | (uint16_t)((e + bias) << m) | (uint16_t)(n - ldexp(1, m));
}

double half_f16_value(uint16_t bits) { return decode(f16, bits); }
double half_bf16_value(uint16_t bits) { return decode(bf16, bits); }
uint16_t half_f16_bits(double x) { return encode(f16, x); }
uint16_t half_bf16_bits(double x) { return encode(bf16, x); }
