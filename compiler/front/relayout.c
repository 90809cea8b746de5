/* relayout.c: the index of each element of each part in the Hugging Face tensor, and of each
 * element of a joined link's block in its tensor, both ways. */
#include "front/relayout.h"

#include <string.h>

/* Row j of part p in the model's orientation: its block b = j / (rows[p]/g) starts at b·(Σ
 * rows)/g, and the parts before p take Σ_{q<p} rows[q]/g of each block. */
static int64_t hf_row(const Relayout *r, int p, int64_t j) {
  int64_t slice = r->rows[p] / r->groups, before = 0, total = 0;
  for (int q = 0; q < r->nparts; q++) {
    if (q < p) before += r->rows[q] / r->groups;
    total += r->rows[q];
  }
  return j / slice * (total / r->groups) + before + j % slice;
}

/* Element (row, c) of the model-oriented matrix, where the Hugging Face tensor holds it. */
static int64_t hf_index(const Relayout *r, int64_t row, int64_t c) {
  return r->transpose ? c * r->hf_rows + row : row * r->cols + c;
}

void relayout_join(const Relayout *r, const double *const *parts, double *hf) {
  for (int p = 0; p < r->nparts; p++)
    for (int64_t j = 0; j < r->rows[p]; j++) {
      int64_t row = hf_row(r, p, j);
      for (int64_t c = 0; c < r->cols; c++) hf[hf_index(r, row, c)] = parts[p][j * r->cols + c];
    }
}

void relayout_split(const Relayout *r, const double *hf, double *const *parts) {
  for (int p = 0; p < r->nparts; p++)
    for (int64_t j = 0; j < r->rows[p]; j++) {
      int64_t row = hf_row(r, p, j);
      for (int64_t c = 0; c < r->cols; c++) parts[p][j * r->cols + c] = hf[hf_index(r, row, c)];
    }
}

/* The block's run of width × inner elements in outer row o of the whole tensor begins here. */
static int64_t block_start(const RelayoutBlock *b, int64_t o) {
  return (o * b->size + b->index * (b->size / b->count)) * b->inner;
}

void relayout_take(const RelayoutBlock *b, const double *whole, double *block) {
  int64_t run = b->size / b->count * b->inner;
  for (int64_t o = 0; o < b->outer; o++)
    memcpy(block + o * run, whole + block_start(b, o), sizeof *block * (size_t)run);
}

void relayout_put(const RelayoutBlock *b, const double *block, double *whole) {
  int64_t run = b->size / b->count * b->inner;
  for (int64_t o = 0; o < b->outer; o++)
    memcpy(whole + block_start(b, o), block + o * run, sizeof *block * (size_t)run);
}
