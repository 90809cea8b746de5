/* test_relayout.c: a Hugging Face tensor and the model's tensors it holds: parts one after another, in
 * interleaved blocks (per head), transposed (Conv1D), with more rows than the model's (positions), each
 * against the layout written out by hand; and import undoing export for random shapes; a joined
 * link's blocks along each axis of a tensor. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "front/relayout.h"

/* q = 0..3, k = 10, 11, v = 20, 21, one column, in two blocks: each block holds half of each part. */
static void test_interleave_per_head(void) {
  const double q[4] = {0, 1, 2, 3}, k[2] = {10, 11}, v[2] = {20, 21};
  const double *parts[3] = {q, k, v};
  const int64_t rows[3] = {4, 2, 2};
  const double want[8] = {0, 1, 10, 20, 2, 3, 11, 21};
  double hf[8];
  Relayout r = {3, rows, 1, 2, 0, 8};
  relayout_join(&r, parts, hf);
  CHECK(memcmp(hf, want, sizeof hf) == 0, "per-head interleave: %g %g %g %g %g %g %g %g", hf[0], hf[1], hf[2], hf[3],
        hf[4], hf[5], hf[6], hf[7]);
  r.groups = 1;
  relayout_join(&r, parts, hf);
  const double plain[8] = {0, 1, 2, 3, 10, 11, 20, 21};
  CHECK(memcmp(hf, plain, sizeof hf) == 0, "one block: the parts one after another");
}

/* a [2, 3] and b [1, 3] stacked to [3, 3], stored transposed as [3, 3]: hf[c][row]. */
static void test_transpose(void) {
  const double a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {7, 8, 9};
  const double *parts[2] = {a, b};
  const int64_t rows[2] = {2, 1};
  const double want[9] = {1, 4, 7, 2, 5, 8, 3, 6, 9};
  double hf[9];
  Relayout r = {2, rows, 3, 1, 1, 3};
  relayout_join(&r, parts, hf);
  CHECK(memcmp(hf, want, sizeof hf) == 0, "transpose");
}

/* A Hugging Face tensor of 5 rows read into a part of 3: the first 3, stored plainly or transposed. */
static void test_longer_source(void) {
  const double plain[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; /* [5, 2] */
  const double transposed[10] = {1, 3, 5, 7, 9, 2, 4, 6, 8, 10}; /* the same, stored [2, 5] */
  const int64_t rows[1] = {3};
  const double want[6] = {1, 2, 3, 4, 5, 6};
  double out[6];
  double *parts[1] = {out};
  Relayout r = {1, rows, 2, 1, 0, 5};
  relayout_split(&r, plain, parts);
  CHECK(memcmp(out, want, sizeof out) == 0, "the first rows of a longer tensor");
  r.transpose = 1;
  relayout_split(&r, transposed, parts);
  CHECK(memcmp(out, want, sizeof out) == 0, "the first rows of a longer transposed tensor");
}

/* Random parts through join and split come back as they were, for each of groups 1, 2, 4 and both
 * orientations. */
static void test_split_undoes_join(void) {
  const int64_t rows[3] = {8, 4, 4}, cols = 3;
  double *parts[3], *back[3], hf[16 * 3];
  for (int p = 0; p < 3; p++) {
    parts[p] = malloc(sizeof(double) * (size_t)(rows[p] * cols));
    back[p] = malloc(sizeof(double) * (size_t)(rows[p] * cols));
    for (int64_t i = 0; i < rows[p] * cols; i++) parts[p][i] = rand() / (double)RAND_MAX;
  }
  for (int groups = 1; groups <= 4; groups *= 2)
    for (int transpose = 0; transpose < 2; transpose++) {
      Relayout r = {3, rows, cols, groups, transpose, 16};
      relayout_join(&r, (const double *const *)parts, hf);
      relayout_split(&r, hf, back);
      for (int p = 0; p < 3; p++)
        CHECK(memcmp(parts[p], back[p], sizeof(double) * (size_t)(rows[p] * cols)) == 0,
              "part %d, groups %d, transpose %d", p, groups, transpose);
    }
  for (int p = 0; p < 3; p++) free(parts[p]), free(back[p]);
}

/* A [2, 4, 3] tensor of elements 0..23 in blocks along each axis: stacked along axis 0 (two
 * blocks of [4, 3]), joined along axis 1 (two of [2, 2, 3]) and along axis 2 (three of [2, 4, 1]),
 * each block against the elements written out by hand, and the blocks put back giving the whole. */
static void test_blocks(void) {
  double whole[24], back[24], block[12];
  for (int i = 0; i < 24; i++) whole[i] = i;
  const struct {
    RelayoutBlock b;
    double first, second, last; /* the block's elements 0, 1 and its last */
    int n;
  } cases[] = {
      {{1, 2, 12, 1, 2}, 12, 13, 23, 12},  /* stacked: the second of two [4, 3] */
      {{2, 4, 3, 1, 2}, 6, 7, 23, 12},     /* rows 2 and 3 of each of the two [4, 3] */
      {{8, 3, 1, 2, 3}, 2, 5, 23, 8},      /* column 2 of every row */
  };
  for (unsigned c = 0; c < sizeof cases / sizeof *cases; c++) {
    relayout_take(&cases[c].b, whole, block);
    CHECK(block[0] == cases[c].first && block[1] == cases[c].second &&
              block[cases[c].n - 1] == cases[c].last,
          "case %u: block %g %g .. %g", c, block[0], block[1], block[cases[c].n - 1]);
    memset(back, 0, sizeof back);
    for (int i = 0; i < cases[c].b.count; i++) {
      RelayoutBlock b = cases[c].b;
      b.index = i;
      relayout_take(&b, whole, block);
      relayout_put(&b, block, back);
    }
    CHECK(memcmp(whole, back, sizeof whole) == 0, "case %u: the blocks put back are the whole", c);
  }
}

int main(void) {
  RUN(test_interleave_per_head);
  RUN(test_transpose);
  RUN(test_longer_source);
  RUN(test_split_undoes_join);
  RUN(test_blocks);
  TEST_EXIT();
}
