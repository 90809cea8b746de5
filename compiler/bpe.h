/* bpe.h: the BPE model's merges over one pre-token, as Hugging Face tokenizers' BPE does them: the
 * pre-token's bytes become their byte-level tokens, then the pair of lowest merge rank (the
 * leftmost among equals) merges until none is left, in O(n log n) through a heap; with
 * ignore_merges a pre-token that is itself in the vocabulary is that one token. A bounded cache
 * per worker keeps the ids of short pre-tokens seen before. */
#ifndef PLAIT_BPE_H
#define PLAIT_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

/* Ids as they are encoded. */
typedef struct {
  uint32_t *ids;
  int64_t count, capacity;
} IdList;

/* Appends one id; -1 when out of memory. */
int idlist_push(IdList *l, uint32_t id);
void idlist_free(IdList *l);

/* The merges as a (left, right) -> (rank, merged) table; read-only once built, shared by the
 * workers. */
typedef struct {
  const Tokenizer *tok;
  struct PairSlot {
    uint64_t pair; /* left << 32 | right; UINT64_MAX: empty */
    int32_t rank, merged;
  } *slots;
  uint64_t mask;
} BpeModel;

int bpe_build(BpeModel *m, const Tokenizer *t); /* -1 when out of memory */
void bpe_free(BpeModel *m);

enum { BPE_CACHE_SLOTS = 8192, BPE_CACHE_WORD = 40, BPE_CACHE_IDS = 12 };

/* One worker's scratch and cache. */
typedef struct {
  const BpeModel *m;
  int32_t *sym, *prev, *next;
  struct BpeMerge {
    int32_t rank, pos, left, right;
  } *heap;
  size_t capacity;
  unsigned char *mapped; /* the pre-token in byte-level characters (ignore_merges) */
  struct BpeCached {
    uint8_t word_len, nids; /* word_len 0: empty */
    unsigned char word[BPE_CACHE_WORD];
    uint32_t ids[BPE_CACHE_IDS];
  } *cache;
} BpeWorker;

int bpe_worker_init(BpeWorker *w, const BpeModel *m); /* -1 when out of memory */
void bpe_worker_free(BpeWorker *w);

/* Appends the ids of the pre-token word[0..len) (raw bytes) to out; -1 when out of memory. */
int bpe_word(BpeWorker *w, const unsigned char *word, size_t len, IdList *out);

#endif
