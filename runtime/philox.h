/* philox.h: the counter-based random numbers of parameter init, dropout and data sampling (Philox4x32-10). */
#ifndef PLAIT_PHILOX_H
#define PLAIT_PHILOX_H

/* A draw is a pure function of (seed, stream, index): the key is the 64-bit seed, the 128-bit counter
 * is (index, stream), both as little-endian pairs of 32-bit words. Every draw is keyed by the *global*
 * element index, so any parallel layout, thread count or device draws the same numbers.
 *
 * The per-element functions below are plain C over math.h only, so that generated C and CUDA source can
 * call them; CUDA source defines PHILOX_FN (e.g. as `static __device__ inline`) before including this. */

#include <math.h>
#include <stdint.h>

#include "real.h"

#ifndef PHILOX_FN
#define PHILOX_FN static inline
#endif

#define PHILOX_MAX_DIMS 6

typedef struct {
  uint32_t v[4];
} Philox4;

/* The high and low 32-bit halves of the 64-bit product a·b. */
PHILOX_FN uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t product = (uint64_t)a * b;
  *hi = (uint32_t)(product >> 32);
  return (uint32_t)product;
}

/* Philox4x32-10 (Salmon et al., SC'11): ten rounds of
 *   (c0, c1, c2, c3) <- (hi(M1·c2) ^ c1 ^ k0, lo(M1·c2), hi(M0·c0) ^ c3 ^ k1, lo(M0·c0))
 * with M0 = 0xD2511F53, M1 = 0xCD9E8D57; the key grows by the Weyl constants (0x9E3779B9, 0xBB67AE85)
 * between rounds. */
PHILOX_FN Philox4 philox4x32_10(Philox4 counter, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; round++) {
    if (round > 0) key0 += 0x9E3779B9u, key1 += 0xBB67AE85u;
    uint32_t hi0, hi1;
    uint32_t lo0 = philox_mulhilo(0xD2511F53u, counter.v[0], &hi0);
    uint32_t lo1 = philox_mulhilo(0xCD9E8D57u, counter.v[2], &hi1);
    Philox4 next = {{hi1 ^ counter.v[1] ^ key0, lo1, hi0 ^ counter.v[3] ^ key1, lo0}};
    counter = next;
  }
  return counter;
}

/* The four random words of (seed, stream, index). */
PHILOX_FN Philox4 philox_words(uint64_t seed, uint64_t stream, uint64_t index) {
  Philox4 counter = {{(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}};
  return philox4x32_10(counter, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* The top 53 bits of the 64-bit word (hi, lo) as a double in [0, 1): k·2^-53. */
PHILOX_FN double philox_unit53(uint32_t hi, uint32_t lo) {
  uint64_t word = ((uint64_t)hi << 32 | lo) >> 11;
  return (double)word * (1.0 / 9007199254740992.0);
}

/* Uniform in [0, 1), from the first two words (53 bits). */
PHILOX_FN double philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  Philox4 w = philox_words(seed, stream, index);
  return philox_unit53(w.v[1], w.v[0]);
}

/* Uniform integer in [0, n), n ≥ 1: the first two words as one 64-bit number, modulo n (the bias,
 * below n/2^64, is far under anything measurable). */
PHILOX_FN uint64_t philox_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t n) {
  Philox4 w = philox_words(seed, stream, index);
  return ((uint64_t)w.v[1] << 32 | w.v[0]) % n;
}

/* N(0, 1) by Box–Muller over the four words: u1 in (0, 1] from words 0–1, u2 in [0, 1) from words 2–3,
 *   z = sqrt(-2·ln u1)·cos(2π·u2). */
PHILOX_FN double philox_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  Philox4 w = philox_words(seed, stream, index);
  double u1 = 1.0 - philox_unit53(w.v[1], w.v[0]);
  double u2 = philox_unit53(w.v[3], w.v[2]);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Dropout's mask: 1 (keep) with probability 1 - p, 0 with probability p. */
PHILOX_FN int philox_keep(uint64_t seed, uint64_t stream, uint64_t index, double p) {
  return philox_uniform(seed, stream, index) >= p;
}

/* A stream of one's own per name (a parameter's, "data", "dropout"): the 64-bit FNV-1a hash of the name. */
uint64_t philox_stream_of(const char *name);

/* The part of a logical tensor that one rank holds: the box begin..begin+count of the full logical
 * shape (padding included). extent: the real size of each axis; elements at or beyond it on any axis
 * are padding (the rows of a vocabulary padded from 50257 to 50304: extent 50257 on that axis). */
typedef struct {
  int ndim; /* 1..PHILOX_MAX_DIMS */
  int64_t extent[PHILOX_MAX_DIMS];
  int64_t begin[PHILOX_MAX_DIMS];
  int64_t count[PHILOX_MAX_DIMS];
} PhiloxShard;

/* A shard of a tensor with no padding: extent = the full shape. */
PhiloxShard philox_shard(int ndim, const int64_t *shape, const int64_t *begin, const int64_t *count);

/* out (row-major over the box) = std·philox_normal(seed, stream, i), i the element's row-major index in
 * the unpadded full shape (the extents), so padding does not shift the real elements; 0 for padding. */
void philox_fill_normal(real *out, const PhiloxShard *s, uint64_t seed, uint64_t stream, double std);

/* out (row-major over the box) = value, 0 for padding (zeros and ones of biases and norm weights). */
void philox_fill_const(real *out, const PhiloxShard *s, real value);

#endif
