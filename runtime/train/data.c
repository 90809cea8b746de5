/* data.c: opening and checking token files, and cutting training, validation, evaluation and
 * masked-LM batches. */
#include "train/data.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "message.h"
#include "philox.h"
#include "train/indexed.h"

static int data_fail(TokenFile *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes "<path>: <message>" into f->error, releases what was mapped, and returns -1. */
static int data_fail(TokenFile *f, const char *fmt, ...) {
  int n = snprintf(f->error, sizeof f->error, "%s: ", f->path);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->error + n, sizeof f->error - (size_t)n, fmt, ap);
  va_end(ap);
  data_close(f);
  return -1;
}

/* Maps the whole file; checks it is a regular file at least as long as the header (opened without
 * waiting, so that a named pipe is refused rather than waited on). */
static int data_map(TokenFile *f) {
  char why[MESSAGE_TEXT];
  if (mapped_open(&f->file, f->path, why, sizeof why) != 0)
    return data_fail(f, "%s; give the path of a token file made with plait data", why);
  if (f->file.size < DATA_HEADER_BYTES)
    return data_fail(
        f, "%lld bytes, shorter than the %d-byte header of a token file; remake it with plait data",
        (long long)f->file.size, DATA_HEADER_BYTES);
  return 0;
}

/* llm.c's two kinds: uint16 tokens (magic 20240520, version 1) and uint32 (20240801, version 7). */
static int data_check_header(TokenFile *f) {
  int32_t header[DATA_HEADER_INTS];
  memcpy(header, f->file.data, sizeof header);
  int wide = header[0] == DATA_MAGIC32;
  if (header[0] != DATA_MAGIC && !wide)
    return data_fail(f,
                     "bad magic %d (a token file starts with %d or %d); this is not a token file, "
                     "make one with plait data",
                     header[0], DATA_MAGIC, DATA_MAGIC32);
  if (header[1] != (wide ? DATA_VERSION32 : DATA_VERSION))
    return data_fail(f,
                     "token file version %d under magic %d, but only version %d (%s tokens) is "
                     "read there; remake it with plait data",
                     header[1], header[0], wide ? DATA_VERSION32 : DATA_VERSION,
                     wide ? "uint32" : "uint16");
  f->token_bytes = wide ? 4 : 2;
  int64_t count = header[2], expected = DATA_HEADER_BYTES + f->token_bytes * count;
  if (count < 0 || (int64_t)f->file.size != expected)
    return data_fail(f,
                     "the header counts %lld tokens (%lld bytes) but the file has %lld bytes; the "
                     "file is truncated or "
                     "damaged, remake it with plait data",
                     (long long)count, (long long)expected, (long long)f->file.size);
  f->count = count;
  f->tokens = f->file.data + DATA_HEADER_BYTES;
  return 0;
}

/* The fewest tokens a use reads, and what they are for (the message when a file has fewer). */
static int64_t data_needed(int64_t seq, DataUse use) { return use == DATA_EVAL ? 2 : seq + 1; }

static const char *data_need_text(DataUse use) {
  return use == DATA_EVAL ? "--eval needs (a token and the next, to predict it); use a longer file"
                          : "of one training window (sequence length + 1); use a longer file or a "
                            "shorter sequence";
}

static int data_check_tokens(TokenFile *f, int64_t seq, DataUse use) {
  if (f->count < data_needed(seq, use))
    return data_fail(f, "%lld tokens, fewer than the %lld %s", (long long)f->count,
                     (long long)data_needed(seq, use), data_need_text(use));
  for (int64_t i = 0; i < f->count; i++) {
    int64_t token = data_token(f, i);
    if (token >= f->vocab)
      return data_fail(f,
                       "token %lld at position %lld is not below the model's vocabulary size %lld; "
                       "use a file made "
                       "with this model's tokenizer",
                       (long long)token, (long long)i, (long long)f->vocab);
    if (token < 0)
      return data_fail(f,
                       "token %lld at position %lld is negative; use a file made with this model's "
                       "tokenizer",
                       (long long)token, (long long)i);
  }
  return 0;
}

int data_open(TokenFile *f, const char *path, int64_t vocab, int64_t seq, DataUse use) {
  memset(f, 0, sizeof *f);
  f->path = path;
  f->vocab = vocab;
  int opened = indexed_present(path) ? indexed_open(f) : data_map(f) || data_check_header(f);
  if (opened != 0 || data_check_tokens(f, seq, use) != 0) return -1;
  return 0;
}

void data_close(TokenFile *f) {
  mapped_close(&f->file);
  f->tokens = NULL;
}

int64_t data_window_start(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s,
                          int64_t sample) {
  uint64_t index = (uint64_t)(step * s->global_batch + sample);
  return (int64_t)philox_below(seed, philox_stream_of("data"), index,
                               (uint64_t)(f->count - s->seq));
}

/* inputs[t] = token start + t, targets[t] = token start + t + 1 for t < seq. */
static void data_copy_window(const TokenFile *f, int64_t start, int64_t seq, int32_t *inputs,
                             int32_t *targets) {
  for (int64_t t = 0; t < seq; t++) {
    inputs[t] = (int32_t)data_token(f, start + t);
    targets[t] = (int32_t)data_token(f, start + t + 1);
  }
}

void data_train_batch(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s,
                      int32_t *inputs, int32_t *targets) {
  for (int64_t i = 0; i < s->count; i++) {
    int64_t start = data_window_start(f, seed, step, s, s->first + i);
    data_copy_window(f, start, s->seq, inputs + i * s->seq, targets + i * s->seq);
  }
}

void data_val_batch(const TokenFile *f, int64_t batch, const DataSlice *s, int32_t *inputs,
                    int32_t *targets) {
  int64_t windows = (f->count - 1) / s->seq;
  for (int64_t i = 0; i < s->count; i++) {
    int64_t k = (batch * s->global_batch + s->first + i) % windows;
    data_copy_window(f, k * s->seq, s->seq, inputs + i * s->seq, targets + i * s->seq);
  }
}

int64_t data_eval_windows(int64_t count, int64_t seq, int masked_lm) {
  int64_t positions = masked_lm ? count : count - 1;
  return (positions + seq - 1) / seq;
}

void data_eval_batch(const TokenFile *f, int64_t batch, const DataSlice *s, int32_t *inputs,
                     int32_t *targets) {
  for (int64_t i = 0; i < s->count; i++) {
    int64_t start = (batch * s->global_batch + s->first + i) * s->seq;
    for (int64_t t = 0; t < s->seq; t++) {
      int64_t at = start + t, inside = at + 1 < f->count;
      inputs[i * s->seq + t] = inside ? (int32_t)data_token(f, at) : 0;
      targets[i * s->seq + t] = inside ? (int32_t)data_token(f, at + 1) : -1;
    }
  }
}

/* One position of a masked-LM sample: words 0 and 1 of its draw choose whether it is a target
 * and what its input becomes, words 2 and 3 the random replacement token. */
static void data_mlm_position(Philox4 w, int32_t token, int32_t mask_id, int64_t vocab,
                              int32_t *input, int32_t *target) {
  const double two32 = 4294967296.0;
  *input = token;
  *target = -1;
  if (w.v[0] / two32 >= 0.15) return;
  *target = token;
  double choice = w.v[1] / two32;
  if (choice < 0.8)
    *input = mask_id;
  else if (choice < 0.9)
    *input = (int32_t)(((uint64_t)w.v[3] << 32 | w.v[2]) % (uint64_t)vocab);
}

void data_mlm_batch(const TokenFile *f, uint64_t seed, int64_t step, const DataSlice *s,
                    int32_t mask_id, int32_t *inputs, int32_t *targets) {
  uint64_t stream = philox_stream_of("mlm");
  for (int64_t i = 0; i < s->count; i++) {
    int64_t sample = s->first + i;
    int64_t start = data_window_start(f, seed, step, s, sample);
    uint64_t base = (uint64_t)((step * s->global_batch + sample) * s->seq);
    for (int64_t t = 0; t < s->seq; t++)
      data_mlm_position(philox_words(seed, stream, base + (uint64_t)t),
                        (int32_t)data_token(f, start + t), mask_id,
                        f->vocab, inputs + i * s->seq + t, targets + i * s->seq + t);
  }
}

void data_mlm_eval_batch(const TokenFile *f, uint64_t seed, int64_t batch, const DataSlice *s,
                         int32_t mask_id, int32_t *inputs, int32_t *targets) {
  uint64_t stream = philox_stream_of("mlm-eval");
  for (int64_t i = 0; i < s->count; i++) {
    int64_t start = (batch * s->global_batch + s->first + i) * s->seq;
    for (int64_t t = 0; t < s->seq; t++) {
      int64_t at = start + t, n = i * s->seq + t;
      if (at < f->count)
        data_mlm_position(philox_words(seed, stream, (uint64_t)at), (int32_t)data_token(f, at),
                          mask_id,
                          f->vocab, inputs + n, targets + n);
      else
        inputs[n] = 0, targets[n] = -1;
    }
  }
}
