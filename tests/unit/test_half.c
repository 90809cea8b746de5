/* test_half.c: F16 and BF16 conversions: every one of the 65536 bit patterns of each reads and writes back
 * to itself, values between two neighbours round to the nearer (ties to the even one), and out of range
 * values become infinity or a signed zero. BF16 is also checked against float's own rounding. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "half.h"

typedef struct {
  const char *name;
  double (*value)(uint16_t);
  uint16_t (*bits)(double);
  double largest;
} Format;

static const Format formats[2] = {{"F16", half_f16_value, half_f16_bits, 65504},
                                  {"BF16", half_bf16_value, half_bf16_bits, 0x1.fep127}};

static void test_every_pattern_round_trips(void) {
  for (int f = 0; f < 2; f++)
    for (uint32_t b = 0; b < 65536; b++) {
      double x = formats[f].value((uint16_t)b);
      uint16_t back = formats[f].bits(x);
      if (isnan(x))
        CHECK(isnan(formats[f].value(back)) && (back & 0x8000) == (b & 0x8000), "%s NaN %04x", formats[f].name, b);
      else
        CHECK(back == b, "%s %04x reads as %a and writes as %04x", formats[f].name, b, x, back);
      if (test_run.failures) return;
    }
}

/* Between consecutive positive finite patterns b and b+1: a quarter of the way rounds down, three quarters
 * up, the midpoint to the even pattern; the same with the sign bit set. */
static void test_rounding_between_neighbours(void) {
  for (int f = 0; f < 2; f++)
    for (uint32_t b = 0; b < 0x7FFF; b++) {
      double lo = formats[f].value((uint16_t)b), hi = formats[f].value((uint16_t)(b + 1));
      if (isinf(hi) || isnan(hi)) continue;
      uint16_t even = (b & 1) ? (uint16_t)(b + 1) : (uint16_t)b;
      double quarter = lo + (hi - lo) / 4, mid = lo + (hi - lo) / 2, three = lo + 3 * (hi - lo) / 4;
      CHECK(formats[f].bits(quarter) == b && formats[f].bits(three) == b + 1 && formats[f].bits(mid) == even,
            "%s between %a and %a", formats[f].name, lo, hi);
      CHECK(formats[f].bits(-mid) == (even | 0x8000), "%s at -%a", formats[f].name, mid);
      if (test_run.failures) return;
    }
}

/* Beyond the largest finite value by half a step or more: infinity; below half the smallest subnormal:
 * zero of the same sign. */
static void test_out_of_range(void) {
  for (int f = 0; f < 2; f++) {
    const Format *F = &formats[f];
    uint16_t inf = F->bits(INFINITY), largest = F->bits(F->largest);
    double step = F->largest - F->value((uint16_t)(largest - 1));
    CHECK(F->value(inf) == INFINITY && F->bits(-INFINITY) == (inf | 0x8000), "%s infinity", F->name);
    CHECK(F->bits(F->largest + step / 2) == inf && F->bits(F->largest + step / 4) == largest, "%s overflow", F->name);
    double tiny = F->value(1);
    CHECK(F->bits(tiny / 2) == 0 && F->bits(-tiny / 2) == 0x8000 && F->bits(tiny * 0.51) == 1, "%s underflow",
          F->name);
    CHECK(isnan(F->value(F->bits(NAN))), "%s NaN", F->name);
  }
}

/* BF16 is the top half of a float: a float rounded to it equals the float rounded by adding half a step of
 * the low 16 bits (and the low bit of the kept half, for ties) to its bits. */
static void test_bf16_agrees_with_float_bits(void) {
  uint64_t state = 88172645463325252ULL;
  for (int i = 0; i < 1000000; i++) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    uint32_t u = (uint32_t)state;
    float x;
    memcpy(&x, &u, 4);
    if (isnan(x) || isinf(x)) continue;
    uint32_t rounded = u + 0x7FFF + (u >> 16 & 1);
    uint16_t want = (uint16_t)(rounded >> 16);
    CHECK(half_bf16_bits(x) == want, "BF16 of %a: %04x, want %04x", (double)x, half_bf16_bits(x), want);
    if (test_run.failures) break;
  }
}

int main(void) {
  RUN(test_every_pattern_round_trips);
  RUN(test_rounding_between_neighbours);
  RUN(test_out_of_range);
  RUN(test_bf16_agrees_with_float_bits);
  TEST_EXIT();
}
