/* relayout.h: moving numbers between a Hugging Face tensor and the model's tensors it holds.
 * Seen with the model's orientation, the Hugging Face tensor is a matrix of hf_rows × cols
 * (cols: the product of every axis but the first) whose first rows are the parts one after
 * another along their first axis, or, with `groups` g > 1, in g interleaved blocks: block b
 * holds the b-th of g equal slices of every part in order (a fused QKV laid out per head). With
 * `transpose` the Hugging Face tensor stores that matrix transposed (cols × hf_rows). hf_rows
 * may exceed the parts' rows (positions beyond the model's sequence): import reads the first
 * ones. A joined link moves one block of its tensor that way (relayout_take, relayout_put). */
#ifndef PLAIT_RELAYOUT_H
#define PLAIT_RELAYOUT_H

#include <stdint.h>

typedef struct {
  int nparts;
  const int64_t *rows; /* each part's first-axis size, divisible by groups */
  int64_t cols;
  int groups, transpose;
  int64_t hf_rows;     /* at least the sum of rows */
} Relayout;

/* A joined link's share of the model's tensor (one of several Hugging Face tensors joined into
 * it: per-head norms, experts): block `index` of `count` equal blocks along one of its axes, the
 * tensor seen as outer × size × inner (size: that axis's length, the axes before it making outer
 * and those after it inner). A stacked join's blocks are one wide. */
typedef struct {
  int64_t outer, size, inner;
  int index, count;
} RelayoutBlock;

/* Export: the block out of the whole tensor, in the whole's order. */
void relayout_take(const RelayoutBlock *b, const double *whole, double *block);
/* Import: the block into its place in the whole tensor. */
void relayout_put(const RelayoutBlock *b, const double *block, double *whole);

/* Export: the Hugging Face tensor from the parts (hf_rows equal to their rows' sum). */
void relayout_join(const Relayout *r, const double *const *parts, double *hf);
/* Import: the parts from the Hugging Face tensor. */
void relayout_split(const Relayout *r, const double *hf, double *const *parts);

#endif
