/* sample.c: autoregressive generation: the window of the last seq tokens through every chunk's forward,
 * the next token drawn from the last position's logits. */
#include "sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

/* Runs every chunk (all on this rank: pp = 1) over the window in row 0 of tokens; returns the last slot. */
static act_t *forward_all(Trainer *t, act_t **slots, const int32_t *tokens, const int32_t *targets) {
  const Program *p = t->prog;
  for (int c = 0; c < p->nchunks; c++) {
    if (c > 0)
      device_copy(slots[c] + p->chunks[c].input_offset, slots[c - 1] + p->chunks[c - 1].output_offset,
                  (size_t)p->io_elems * sizeof(act_t));
    p->chunks[c].forward(&t->run, slots[c], tokens, targets);
  }
  return slots[p->nchunks - 1];
}

/* A token drawn from softmax(z) over the real vocabulary. */
static int32_t draw(const act_t *z, int64_t vocab, double u) {
  double max = act_value(z[0]), total = 0;
  for (int64_t i = 1; i < vocab; i++) max = act_value(z[i]) > max ? act_value(z[i]) : max;
  for (int64_t i = 0; i < vocab; i++) total += exp(act_value(z[i]) - max);
  double cut = u * total, run = 0;
  for (int64_t i = 0; i < vocab; i++) {
    run += exp(act_value(z[i]) - max);
    if (run >= cut) return (int32_t)i;
  }
  return (int32_t)(vocab - 1);
}

void sample_text(Trainer *t, int64_t n) {
  const Program *p = t->prog;
  int64_t tokens_per_mb = (int64_t)p->mbs * p->seq, cols = p->logits_cols;
  int32_t *tokens = calloc((size_t)tokens_per_mb, sizeof *tokens), *targets = calloc((size_t)tokens_per_mb, sizeof *targets);
  int32_t *text = calloc((size_t)n + 1, sizeof *text);
  act_t **slots = calloc((size_t)p->nchunks, sizeof *slots);
  act_t *row = device_alloc((size_t)(cols * p->tp) * sizeof *row, "logits");
  act_t *host = malloc((size_t)(cols * p->tp) * sizeof *host);
  for (int c = 0; c < p->nchunks; c++) slots[c] = device_alloc((size_t)p->chunks[c].slot_elems * sizeof(act_t), "activations");
  int64_t length = 1;
  text[0] = '\n';
  t->run.training = 0;
  t->run.sample0 = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t start = length > p->seq ? length - p->seq : 0, window = length - start;
    for (int64_t k = 0; k < window; k++) tokens[k] = text[start + k];
    device_upload(t->device_tokens, tokens, (size_t)tokens_per_mb * sizeof *tokens);
    device_upload(t->device_targets, targets, (size_t)tokens_per_mb * sizeof *targets);
    act_t *last = forward_all(t, slots, t->device_tokens, t->device_targets);
    const act_t *z = last + p->logits_offset + (window - 1) * cols;
    comm_allgather(t->comm, GROUP_TP, z, row, 1, cols, COMM_ACT);
    device_download(host, row, (size_t)(cols * p->tp) * sizeof *host);
    int32_t next = draw(host, p->vocab, philox_uniform(t->seed, philox_stream_of("sample"), (uint64_t)i));
    text[length++] = next;
  }
  if (comm_info(t->comm)->rank == 0) {
    printf("sample:\n");
    for (int64_t i = 1; i < length; i++) putchar(text[i] < 256 && (text[i] >= 32 || text[i] == '\n' || text[i] == '\t') ? text[i] : '?');
    printf("\n");
    fflush(stdout);
  }
  for (int c = 0; c < p->nchunks; c++) device_free(slots[c]);
  free(slots);
  device_free(row);
  free(host);
  free(text);
  free(tokens);
  free(targets);
}
