/* rope.h: rotary positions' shape and options (RopeShape) and their frequencies: what k_rope takes,
 * and what the compiler's OP_ROPE nodes hold (B, T and heads there 0: the emitter writes them from
 * the tensor's local shape). */
#ifndef PLAIT_ROPE_H
#define PLAIT_ROPE_H

#include <stdint.h>

/* Rotary positions over B sequences of T positions, [B, T, heads·head_dim]: in each head the first
 * `rotary` dims turn, pair i by the angle t·freq_i at position t (inverse: by −t·freq_i, the
 * transpose, which carries the gradient back). Pairs are (i, i + rotary/2) (rotate half: Llama,
 * NeoX) or (2i, 2i + 1) when interleaved (GPT-J); the dims past `rotary` pass through. freq_i =
 * theta^(−2i/rotary), scaled as rope_frequencies says. */
typedef enum { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3 } RopeScalingKind;
typedef struct {
  int64_t B, T;
  int heads, head_dim, rotary, interleaved, inverse;
  double theta;
  RopeScalingKind scaling;
  double factor, low_freq_factor, high_freq_factor, original_positions;
} RopeShape;

/* freq[i] for i < rotary/2, in double. Linear scaling divides every frequency by factor (positions
 * stretched). Llama 3's keeps the frequencies whose wavelength 2π/f is under original_positions /
 * high_freq_factor, divides those over original_positions / low_freq_factor by factor, and blends
 * between: f·((1 − a)/factor + a), a = (original_positions/wavelength − low) / (high − low). */
void rope_frequencies(const RopeShape *s, double *freq);

#endif
