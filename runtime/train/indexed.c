/* indexed.c: checking a Megatron-LM indexed dataset's index against its data and mapping the
 * tokens in place. The layout follows megatron/core/datasets/indexed_dataset.py (_IndexWriter
 * and _IndexReader in NVIDIA/Megatron-LM): header, version, dtype code, counts, sizes, pointers,
 * document indices. */
#include "train/indexed.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

enum { HEADER_BYTES = 9 + 8 + 1 + 8 + 8, MAGIC_BYTES = 9, PATH_BYTES = 4096 };

static const char MAGIC[MAGIC_BYTES] = "MMIDIDX\0\0";
static const char *const DTYPE_NAMES[] = {"", "uint8", "int8", "int16", "int32",
                                          "int64", "float64", "float32", "uint16"};
static const char *const FIX = "write the dataset with Megatron-LM's preprocess_data.py or plait "
                               "data --format megatron";

/* The .idx being checked: its mapping, counts and where its arrays start. */
typedef struct {
  TokenFile *f;
  char idx_path[PATH_BYTES], bin_path[PATH_BYTES];
  Mapped idx;
  int64_t sequences, documents, item_bytes;
} Index;

static int fail(Index *x, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "<path>: <message>; <fix>" into f->error; releases both mappings; returns -1. */
static int fail(Index *x, const char *path, const char *fmt, ...) {
  TokenFile *f = x->f;
  int n = snprintf(f->error, sizeof f->error, "%s: ", path);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(f->error + n, sizeof f->error - (size_t)n, fmt, ap);
  va_end(ap);
  if ((size_t)n < sizeof f->error) snprintf(f->error + n, sizeof f->error - (size_t)n, "; %s", FIX);
  mapped_close(&x->idx);
  data_close(f);
  return -1;
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static int64_t size_at(const Index *x, int64_t i) {
  return (int32_t)(uint32_t)get_le(x->idx.data + HEADER_BYTES + 4 * i, 4);
}

static int64_t pointer_at(const Index *x, int64_t i) {
  return (int64_t)get_le(x->idx.data + HEADER_BYTES + 4 * x->sequences + 8 * i, 8);
}

static int64_t document_at(const Index *x, int64_t i) {
  return (int64_t)get_le(x->idx.data + HEADER_BYTES + 12 * x->sequences + 8 * i, 8);
}

static int check_header(Index *x) {
  const unsigned char *h = x->idx.data;
  if (x->idx.size < HEADER_BYTES || memcmp(h, MAGIC, MAGIC_BYTES) != 0)
    return fail(x, x->idx_path, "not an indexed dataset's index (it does not start with "
                "\"MMIDIDX\\0\\0\")");
  uint64_t version = get_le(h + 9, 8);
  if (version != 1) return fail(x, x->idx_path, "index version %llu; plait reads version 1",
                                (unsigned long long)version);
  int code = h[17];
  if (code == 8 || code == 4) x->item_bytes = code == 8 ? 2 : 4;
  else if (code >= 1 && code <= 7)
    return fail(x, x->idx_path, "tokens of dtype %s (code %d); plait reads uint16 (8) and int32 "
                "(4)", DTYPE_NAMES[code], code);
  else return fail(x, x->idx_path, "unknown dtype code %d; plait reads uint16 (8) and int32 (4)",
                   code);
  uint64_t sequences = get_le(h + 18, 8), documents = get_le(h + 26, 8);
  uint64_t room = (x->idx.size - HEADER_BYTES) / 8; /* a bound that keeps the sums below exact */
  uint64_t expected = HEADER_BYTES + 12 * sequences + 8 * documents;
  if (sequences > room || documents > room || expected != x->idx.size)
    return fail(x, x->idx_path, "%llu sequences and %llu documents need %llu bytes, but the index "
                "has %zu", (unsigned long long)sequences, (unsigned long long)documents,
                (unsigned long long)(sequences > room || documents > room ? 0 : expected),
                x->idx.size);
  x->sequences = (int64_t)sequences, x->documents = (int64_t)documents;
  return 0;
}

/* Sequence i starts where i - 1 ended, within the .bin, and all of them end at its end. */
static int check_sequences(Index *x, int64_t bin_bytes) {
  int64_t at = 0;
  for (int64_t i = 0; i < x->sequences; i++) {
    int64_t size = size_at(x, i), pointer = pointer_at(x, i);
    if (size < 0) return fail(x, x->idx_path, "sequence %lld has size %lld", (long long)i,
                              (long long)size);
    if (pointer < 0 || pointer > bin_bytes)
      return fail(x, x->idx_path, "sequence %lld starts at byte %lld, past the end of %s (%lld "
                  "bytes)", (long long)i, (long long)pointer, x->bin_path, (long long)bin_bytes);
    if (pointer != at)
      return fail(x, x->idx_path, "sequence %lld starts at byte %lld, not at byte %lld where the "
                  "one before it ends: plait reads sequences stored back to back",
                  (long long)i, (long long)pointer, (long long)at);
    at += size * x->item_bytes;
    if (at > bin_bytes)
      return fail(x, x->idx_path, "the sizes of sequences 0..%lld sum to %lld bytes, beyond the "
                  "%lld of %s", (long long)i, (long long)at, (long long)bin_bytes, x->bin_path);
  }
  if (at != bin_bytes)
    return fail(x, x->idx_path, "the sequences' sizes sum to %lld bytes, but %s has %lld",
                (long long)at, x->bin_path, (long long)bin_bytes);
  return 0;
}

/* 0 first, never falling, the sequence count last. */
static int check_documents(Index *x) {
  int64_t before = 0;
  for (int64_t i = 0; i < x->documents; i++) {
    int64_t v = document_at(x, i);
    if ((i == 0 && v != 0) || v < before || v > x->sequences)
      return fail(x, x->idx_path, "document index %lld is %lld; they rise from 0 to the sequence "
                  "count %lld", (long long)i, (long long)v, (long long)x->sequences);
    before = v;
  }
  if (x->documents == 0 || before != x->sequences)
    return fail(x, x->idx_path, "the document indices end at %lld, not at the sequence count %lld",
                (long long)before, (long long)x->sequences);
  return 0;
}

static int paths(Index *x) {
  const char *prefix = x->f->path;
  if (snprintf(x->idx_path, PATH_BYTES, "%s.idx", prefix) >= PATH_BYTES ||
      snprintf(x->bin_path, PATH_BYTES, "%s.bin", prefix) >= PATH_BYTES)
    return fail(x, prefix, "the path is too long");
  return 0;
}

int indexed_present(const char *prefix) {
  char path[PATH_BYTES];
  struct stat st;
  return snprintf(path, sizeof path, "%s.idx", prefix) < (int)sizeof path && stat(path, &st) == 0;
}

int indexed_open(TokenFile *f) {
  Index x = {.f = f};
  char why[MESSAGE_TEXT];
  if (paths(&x)) return -1;
  if (mapped_open(&x.idx, x.idx_path, why, sizeof why) != 0) return fail(&x, x.idx_path, "%s", why);
  if (mapped_open(&f->file, x.bin_path, why, sizeof why) != 0)
    return fail(&x, x.bin_path, "%s", why);
  if (check_header(&x) || check_sequences(&x, (int64_t)f->file.size) || check_documents(&x))
    return -1;
  mapped_close(&x.idx);
  f->tokens = f->file.data;
  f->token_bytes = (int)x.item_bytes;
  f->count = (int64_t)f->file.size / x.item_bytes;
  return 0;
}
