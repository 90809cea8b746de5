/* sample.c: autoregressive generation: the window of the last seq tokens through every chunk's
 * forward, the next token drawn from the last position's logits and printed at once (nothing but
 * the window is kept, so the text's length costs no memory). */
#include "train/sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "message.h"
#include "text/tokenizer.h"
#include "train/log.h"

/* Runs every chunk (all on this rank: pp = 1) over the window in row 0 of tokens; returns the
 * last slot. */
static act_t *forward_all(Trainer *t, act_t **slots, const int32_t *tokens,
                          const int32_t *targets) {
  const Program *p = t->prog;
  for (int c = 0; c < p->nchunks; c++) {
    if (c > 0)
      device_copy(slots[c] + p->chunks[c].input_offset,
                  slots[c - 1] + p->chunks[c - 1].output_offset,
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

/* A generated token as text: with a tokenizer, its decoded bytes; else as a byte, printable
 * ones, newlines and tabs as they are, others as '?'. */
static void print_token(const Tokenizer *tok, int32_t token) {
  size_t len;
  const unsigned char *bytes = tok ? tokenizer_decode(tok, token, &len) : NULL;
  if (bytes) fwrite(bytes, 1, len, stdout);
  else putchar(token < 256 && (token >= 32 || token == '\n' || token == '\t') ? token : '?');
}

int sample_tokenizer_check(const char *path, int64_t vocab, char *why, size_t size) {
  Tokenizer tok;
  if (tokenizer_load(&tok, path, NULL, why, size)) return -1;
  int rc = tokenizer_covers(&tok, vocab, path, why, size);
  tokenizer_free(&tok);
  return rc;
}

/* The token the text starts after: the document start with a tokenizer, else a newline. */
static int32_t first_token(const Tokenizer *tok) {
  int64_t start = tok ? tokenizer_document_start(tok) : -1;
  return start >= 0 ? (int32_t)start : '\n';
}

void sample_text(Trainer *t, int64_t n) {
  const Program *p = t->prog;
  int64_t tokens_per_mb = (int64_t)p->mbs * p->seq, cols = p->logits_cols;
  int32_t *tokens = calloc((size_t)tokens_per_mb, sizeof *tokens),
          *targets = calloc((size_t)tokens_per_mb, sizeof *targets);
  act_t **slots = calloc((size_t)p->nchunks, sizeof *slots);
  act_t *row = device_alloc((size_t)(cols * p->tp) * sizeof *row, "logits");
  act_t *host = malloc((size_t)(cols * p->tp) * sizeof *host);
  for (int c = 0; c < p->nchunks; c++)
    slots[c] = device_alloc((size_t)p->chunks[c].slot_elems * sizeof(act_t), "activations");
  int64_t window = 1; /* the text's last tokens, at most seq, in tokens[0 .. window) */
  int speaks = comm_info(t->comm)->rank == 0;
  Tokenizer tok;
  char why[MESSAGE_TEXT];
  /* checked before the ranks started (sample_tokenizer_check) */
  int decodes = t->args->tokenizer && tokenizer_load(&tok, t->args->tokenizer, NULL, why,
                                                     sizeof why) == 0;
  tokens[0] = first_token(decodes ? &tok : NULL);
  t->run.training = 0;
  t->run.sample0 = 0;
  if (speaks) printf("sample:\n");
  if (speaks) log_sample_tokenizer(t);
  for (int64_t i = 0; i < n; i++) {
    device_upload(t->device_tokens, tokens, (size_t)tokens_per_mb * sizeof *tokens);
    device_upload(t->device_targets, targets, (size_t)tokens_per_mb * sizeof *targets);
    act_t *last = forward_all(t, slots, t->device_tokens, t->device_targets);
    const act_t *z = last + p->logits_offset + (window - 1) * cols;
    comm_allgather(t->comm, GROUP_TP, z, row, 1, cols, COMM_ACT);
    device_download(host, row, (size_t)(cols * p->tp) * sizeof *host);
    int32_t next = draw(host, p->vocab,
                        philox_uniform(t->seed, philox_stream_of("sample"), (uint64_t)i));
    if (speaks) print_token(decodes ? &tok : NULL, next);
    if (window == p->seq) memmove(tokens, tokens + 1, (size_t)(--window) * sizeof *tokens);
    tokens[window++] = next;
  }
  if (speaks) {
    printf("\n");
    fflush(stdout);
  }
  for (int c = 0; c < p->nchunks; c++) device_free(slots[c]);
  free(slots);
  device_free(row);
  free(host);
  free(tokens);
  free(targets);
  if (decodes) tokenizer_free(&tok);
}
