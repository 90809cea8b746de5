/* data.h: token files (llm.c's format, or Megatron-LM's indexed datasets: indexed.h) and the
 * batches training, validation and evaluation read from them. */
#ifndef PLAIT_DATA_H
#define PLAIT_DATA_H

/* A token file: a header of 256 little-endian int32 (DATA_MAGIC, DATA_VERSION, the token count,
 * the rest 0), then the tokens as uint16; its size is 1024 + 2·count bytes. Under DATA_MAGIC32
 * and DATA_VERSION32 (llm.c's files for large vocabularies) the tokens are uint32 and the size
 * 1024 + 4·count. `plait data` writes both.
 *
 * A sample is a window of seq + 1 consecutive tokens: inputs are its first seq tokens, targets
 * its last seq (int32). Samples are numbered globally within a step, 0..global_batch-1, and each
 * rank reads its slice [first, first + count): the windows depend only on the global numbers, so
 * data-parallel ranks together read exactly the windows one rank would. */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mapped.h"
#include "message.h"

#define DATA_MAGIC 20240520
#define DATA_VERSION 1
#define DATA_MAGIC32 20240801
#define DATA_VERSION32 7
#define DATA_HEADER_INTS 256
#define DATA_HEADER_BYTES (DATA_HEADER_INTS * 4)

typedef struct {
  const char *path; /* a token file, or an indexed dataset's prefix */
  const unsigned char *tokens; /* count tokens, mapped from the file, little-endian */
  int token_bytes;             /* 2: uint16 (token files, indexed uint16), 4: uint32 or int32 */
  int64_t count;
  int64_t vocab; /* every token is below it */
  Mapped file;   /* the whole file, mapped read-only */
  /* why data_open failed: one line naming the file, the cause and the fix */
  char error[MESSAGE_TEXT];
} TokenFile;

/* The samples one rank reads in a step. */
typedef struct {
  int64_t seq;          /* T: tokens per sample */
  int64_t global_batch; /* G: samples per step over all data-parallel ranks */
  int64_t first, count; /* this rank's samples: [first, first + count) of 0..G-1 */
} DataSlice;

/* What a run reads from a token file, for data_open's check of its length. */
typedef enum {
  DATA_TRAIN, /* windows of seq + 1 tokens (training and validation) */
  DATA_EVAL   /* --eval: every token but the first predicted once, so at least 2 */
} DataUse;

/* Token i of the file. */
static inline int64_t data_token(const TokenFile *f, int64_t i) {
  if (f->token_bytes == 4) {
    int32_t t;
    memcpy(&t, f->tokens + 4 * i, 4);
    return t;
  }
  uint16_t t;
  memcpy(&t, f->tokens + 2 * i, 2);
  return t;
}

/* Maps and checks the file (an indexed dataset, PATH.bin and PATH.idx, where PATH.idx exists):
 * the header, the size against the count, enough tokens for its use (seq + 1 to train on, 2 to
 * evaluate), every token in [0, vocab). Returns 0, or -1 with f->error set (and nothing to
 * close). path must outlive f. */
int data_open(TokenFile *f, const char *path, int64_t vocab, int64_t seq, DataUse use);
void data_close(TokenFile *f);

/* Where sample j of step s starts: philox(seed, stream "data", index s·G + j) over the count - seq
 * starts whose window of seq + 1 tokens fits. */
int64_t data_window_start(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s,
                          int64_t sample);

/* inputs, targets: [count][seq] for the slice's samples of training step `step`. */
void data_train_batch(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s,
                      int32_t *inputs, int32_t *targets);

/* Validation batch b: global sample j is window k = b·G + j of the sequential windows starting
 * at 0, seq, 2·seq, ... (each seq + 1 tokens, so a window's last target is the next one's first
 * input), k taken modulo the (count - 1) / seq windows that fit: the file is read from the
 * start, wrapping. */
void data_val_batch(const TokenFile *f, int64_t batch, const DataSlice *s, int32_t *inputs,
                    int32_t *targets);

/* Evaluation (--eval) reads the file in order: window k = b·G + j (batch b, global sample j)
 * starts at token k·seq; its position t has input token k·seq + t and target token k·seq + t +
 * 1. Positions whose target would lie beyond the file's end (the tail of the last window, every
 * position of windows past it) have input 0 and target -1, which counts for nothing. The
 * data_eval_windows = ceil((count - 1) / seq) windows of a file of `count` tokens thus predict
 * every token but the first exactly once. */
int64_t data_eval_windows(int64_t count, int64_t seq, int masked_lm);
void data_eval_batch(const TokenFile *f, int64_t batch, const DataSlice *s, int32_t *inputs,
                     int32_t *targets);

/* Masked-LM (BERT) batch of step `step`: each sample takes the first seq tokens of the window
 * that data_window_start draws. Position t of global sample j draws the words of philox(seed,
 * stream "mlm", index (s·G + j)·seq + t): with probability 0.15 it is a target (targets = the
 * original token, -1 at the others), and its input becomes mask_id with probability 0.8, a token
 * uniform in [0, vocab) with probability 0.1, and stays unchanged otherwise. */
void data_mlm_batch(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s,
                    int32_t mask_id, int32_t *inputs, int32_t *targets);

/* Masked-LM evaluation batch b: window k = b·G + j holds tokens k·seq .. k·seq + seq - 1 as they
 * stand (ceil(count / seq) windows: every token once), masked as data_mlm_batch masks, the draw
 * of the token at position p of the file being philox(seed, stream "mlm-eval", index p): the
 * same masks whatever the layout and batch size. Positions past the file's end have input 0 and
 * target -1. */
void data_mlm_eval_batch(const TokenFile *f, uint64_t seed, int64_t batch, const DataSlice *s,
                         int32_t mask_id, int32_t *inputs, int32_t *targets);

#endif
