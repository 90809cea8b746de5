/* mlm_batch.c: the masked-LM inputs and targets a program draws, for checks against other frameworks.
 *   mlm_batch eval FILE VOCAB SEED          every position of an --eval file, in order
 *   mlm_batch train FILE VOCAB SEED STEP SEQ GBS   the global batch of training step STEP (from 0)
 * prints two lines of numbers: the inputs, then the targets (-1 where a position is not masked). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"

static void print_row(const int32_t *values, int64_t n) {
  for (int64_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", values[i]);
  printf("\n");
}

int main(int argc, char **argv) {
  int eval = argc == 5 && strcmp(argv[1], "eval") == 0, train = argc == 8 && strcmp(argv[1], "train") == 0;
  if (!eval && !train) {
    fprintf(stderr, "usage: mlm_batch eval FILE VOCAB SEED | mlm_batch train FILE VOCAB SEED STEP SEQ GBS\n");
    return 2;
  }
  int64_t vocab = atoll(argv[3]), seq = train ? atoll(argv[6]) : 1;
  uint64_t seed = strtoull(argv[4], NULL, 10);
  TokenFile f;
  if (data_open(&f, argv[2], vocab, seq, eval ? DATA_EVAL : DATA_TRAIN)) {
    fprintf(stderr, "%s\n", f.error);
    return 1;
  }
  /* eval: one window of the whole file (each position's draw depends on its place in the file alone) */
  DataSlice s = {eval ? f.count : seq, eval ? 1 : atoll(argv[7]), 0, eval ? 1 : atoll(argv[7])};
  int64_t n = s.seq * s.count;
  int32_t *inputs = malloc((size_t)n * sizeof *inputs), *targets = malloc((size_t)n * sizeof *targets);
  if (eval) data_mlm_eval_batch(&f, seed, 0, &s, (int32_t)(vocab - 1), inputs, targets);
  else data_mlm_batch(&f, seed, atoll(argv[5]), &s, (int32_t)(vocab - 1), inputs, targets);
  print_row(inputs, n);
  print_row(targets, n);
  free(inputs);
  free(targets);
  data_close(&f);
  return 0;
}
