/* data.h: token files (llm.c's format) and the batches a training step reads from them. */
#ifndef PLAIT_DATA_H
#define PLAIT_DATA_H

/* A token file: a header of 256 little-endian int32 (DATA_MAGIC, DATA_VERSION, the token count, the rest
 * 0), then the tokens as uint16; its size is 1024 + 2·count bytes. `plait data` writes them.
 *
 * A sample is a window of seq + 1 consecutive tokens: inputs are its first seq tokens, targets its last
 * seq (int32). Samples are numbered globally within a step, 0..global_batch-1, and each rank reads its
 * slice [first, first + count): the windows depend only on the global numbers, so data-parallel ranks
 * together read exactly the windows one rank would. */

#include <stddef.h>
#include <stdint.h>

#define DATA_MAGIC 20240520
#define DATA_VERSION 1
#define DATA_HEADER_INTS 256
#define DATA_HEADER_BYTES (DATA_HEADER_INTS * 4)

typedef struct {
  const char *path;
  const uint16_t *tokens; /* count tokens, mapped from the file */
  int64_t count;
  int64_t vocab; /* every token is below it */
  void *map;     /* the whole file, mapped read-only */
  size_t map_size;
  char error[1024]; /* why data_open failed: one line naming the file, the cause and the fix */
} TokenFile;

/* The samples one rank reads in a step. */
typedef struct {
  int64_t seq;          /* T: tokens per sample */
  int64_t global_batch; /* G: samples per step over all data-parallel ranks */
  int64_t first, count; /* this rank's samples: [first, first + count) of 0..G-1 */
} DataSlice;

/* Maps and checks the file: the header, the size against the count, at least `window` tokens (seq + 1),
 * every token below vocab. Returns 0, or -1 with f->error set (and nothing to close). path must outlive f. */
int data_open(TokenFile *f, const char *path, int64_t vocab, int64_t window);
void data_close(TokenFile *f);

/* Where sample j of step s starts: philox(seed, stream "data", index s·G + j) over the count - seq
 * starts whose window of seq + 1 tokens fits. */
int64_t data_window_start(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s, int64_t sample);

/* inputs, targets: [count][seq] for the slice's samples of training step `step`. */
void data_train_batch(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s, int32_t *inputs,
                      int32_t *targets);

/* Validation batch b: global sample j is window k = b·G + j of the sequential windows starting at
 * 0, seq, 2·seq, ... (each seq + 1 tokens, so a window's last target is the next one's first input),
 * k taken modulo the (count - 1) / seq windows that fit: the file is read from the start, wrapping. */
void data_val_batch(const TokenFile *f, int64_t batch, const DataSlice *s, int32_t *inputs, int32_t *targets);

/* Masked-LM (BERT) batch of step `step`: each sample takes the first seq tokens of the window that
 * data_window_start draws. Position t of global sample j draws the words of philox(seed, stream "mlm",
 * index (s·G + j)·seq + t): with probability 0.15 it is a target (targets = the original token, -1 at
 * the others), and its input becomes mask_id with probability 0.8, a token uniform in [0, vocab) with
 * probability 0.1, and stays unchanged otherwise. */
void data_mlm_batch(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s, int32_t mask_id,
                    int32_t *inputs, int32_t *targets);

#endif
