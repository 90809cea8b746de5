/* sample.c: autoregressive generation: the window of the last seq tokens through every chunk's forward,
 * the next token drawn from the last position's logits. */
#include "sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs every chunk (all on this rank: pp = 1) over the window in row 0 of tokens; returns the last slot. */
static real *forward_all(Trainer *t, real **slots, const int32_t *tokens, const int32_t *targets) {
  const Program *p = t->prog;
  for (int c = 0; c < p->nchunks; c++) {
    if (c > 0)
      memcpy(slots[c] + p->chunks[c].input_offset, slots[c - 1] + p->chunks[c - 1].output_offset,
             (size_t)p->io_elems * sizeof(real));
    p->chunks[c].forward(&t->run, slots[c], tokens, targets);
  }
  return slots[p->nchunks - 1];
}

/* A token drawn from softmax(z) over the real vocabulary. */
static int32_t draw(const real *z, int64_t vocab, double u) {
  double max = z[0], total = 0;
  for (int64_t i = 1; i < vocab; i++) max = z[i] > max ? z[i] : max;
  for (int64_t i = 0; i < vocab; i++) total += exp(z[i] - max);
  double cut = u * total, run = 0;
  for (int64_t i = 0; i < vocab; i++) {
    run += exp(z[i] - max);
    if (run >= cut) return (int32_t)i;
  }
  return (int32_t)(vocab - 1);
}

void sample_text(Trainer *t, int64_t n) {
  const Program *p = t->prog;
  int64_t tokens_per_mb = (int64_t)p->mbs * p->seq, cols = p->logits_cols;
  int32_t *tokens = calloc((size_t)tokens_per_mb, sizeof *tokens), *targets = calloc((size_t)tokens_per_mb, sizeof *targets);
  int32_t *text = calloc((size_t)n + 1, sizeof *text);
  real **slots = calloc((size_t)p->nchunks, sizeof *slots);
  real *row = malloc((size_t)(cols * p->tp) * sizeof *row);
  for (int c = 0; c < p->nchunks; c++) slots[c] = calloc((size_t)p->chunks[c].slot_elems, sizeof(real));
  int64_t length = 1;
  text[0] = '\n';
  t->run.training = 0;
  t->run.sample0 = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t start = length > p->seq ? length - p->seq : 0, window = length - start;
    for (int64_t k = 0; k < window; k++) tokens[k] = text[start + k];
    real *last = forward_all(t, slots, tokens, targets);
    const real *z = last + p->logits_offset + (window - 1) * cols;
    if (p->tp > 1) comm_allgather(t->comm, GROUP_TP, z, row, 1, cols);
    else memcpy(row, z, (size_t)cols * sizeof *row);
    int32_t next = draw(row, p->vocab, philox_uniform(t->seed, philox_stream_of("sample"), (uint64_t)i));
    text[length++] = next;
  }
  if (comm_info(t->comm)->rank == 0) {
    printf("sample:\n");
    for (int64_t i = 1; i < length; i++) putchar(text[i] < 256 && (text[i] >= 32 || text[i] == '\n' || text[i] == '\t') ? text[i] : '?');
    printf("\n");
    fflush(stdout);
  }
  for (int c = 0; c < p->nchunks; c++) free(slots[c]);
  free(slots);
  free(row);
  free(text);
  free(tokens);
  free(targets);
}
