/* bpe.c: the merges of one pre-token: the pair table, the heap of candidate merges, the cache. */
#include "bpe.h"

#include <stdlib.h>
#include <string.h>

#include "text/utf8.h"

int idlist_push(IdList *l, uint32_t id) {
  if (l->count == l->capacity) {
    int64_t more = l->capacity ? 2 * l->capacity : 1024;
    uint32_t *bigger = realloc(l->ids, (size_t)more * sizeof *bigger);
    if (!bigger) return -1;
    l->ids = bigger, l->capacity = more;
  }
  l->ids[l->count++] = id;
  return 0;
}

void idlist_free(IdList *l) {
  free(l->ids);
  memset(l, 0, sizeof *l);
}

static uint64_t pair_hash(uint64_t pair) {
  pair ^= pair >> 33;
  pair *= 0xff51afd7ed558ccdull;
  return pair ^ (pair >> 33);
}

static struct PairSlot *pair_slot(const BpeModel *m, uint64_t pair) {
  for (uint64_t i = pair_hash(pair) & m->mask;; i = (i + 1) & m->mask)
    if (m->slots[i].pair == pair || m->slots[i].pair == UINT64_MAX) return &m->slots[i];
}

/* A pair merged twice keeps its later rank, as a map built from the list in order does. */
int bpe_build(BpeModel *m, const Tokenizer *t) {
  uint64_t cap = 16;
  while (cap < 2 * (uint64_t)t->nmerges + 2) cap *= 2;
  m->tok = t;
  m->mask = cap - 1;
  m->slots = malloc((size_t)cap * sizeof *m->slots);
  if (!m->slots) return -1;
  for (uint64_t i = 0; i < cap; i++) m->slots[i].pair = UINT64_MAX;
  for (int64_t r = 0; r < t->nmerges; r++) {
    const int32_t *g = t->merges[r];
    uint64_t pair = (uint64_t)(uint32_t)g[0] << 32 | (uint32_t)g[1];
    *pair_slot(m, pair) = (struct PairSlot){pair, (int32_t)r, g[2]};
  }
  return 0;
}

void bpe_free(BpeModel *m) {
  free(m->slots);
  m->slots = NULL;
}

int bpe_worker_init(BpeWorker *w, const BpeModel *m) {
  memset(w, 0, sizeof *w);
  w->m = m;
  w->cache = calloc(BPE_CACHE_SLOTS, sizeof *w->cache);
  return w->cache ? 0 : -1;
}

void bpe_worker_free(BpeWorker *w) {
  free(w->sym), free(w->prev), free(w->next), free(w->heap), free(w->mapped), free(w->cache);
  memset(w, 0, sizeof *w);
}

static int reserve(BpeWorker *w, size_t n) {
  if (n <= w->capacity) return 0;
  size_t cap = n < 64 ? 64 : 2 * n;
  int32_t *sym = realloc(w->sym, cap * sizeof *sym);
  if (sym) w->sym = sym;
  int32_t *prev = realloc(w->prev, cap * sizeof *prev);
  if (prev) w->prev = prev;
  int32_t *next = realloc(w->next, cap * sizeof *next);
  if (next) w->next = next;
  struct BpeMerge *heap = realloc(w->heap, 2 * cap * sizeof *heap); /* len - 1 + merges */
  if (heap) w->heap = heap;
  unsigned char *mapped = realloc(w->mapped, 2 * cap);
  if (mapped) w->mapped = mapped;
  if (!sym || !prev || !next || !heap || !mapped) return -1;
  w->capacity = cap;
  return 0;
}

/* The heap orders by rank, then position: the lowest first. */
static int before(const struct BpeMerge *a, const struct BpeMerge *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(BpeWorker *w, size_t *n, struct BpeMerge m) {
  size_t i = (*n)++;
  while (i > 0 && before(&m, &w->heap[(i - 1) / 2])) {
    w->heap[i] = w->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  w->heap[i] = m;
}

static struct BpeMerge heap_pop(BpeWorker *w, size_t *n) {
  struct BpeMerge top = w->heap[0], last = w->heap[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && before(&w->heap[c + 1], &w->heap[c])) c++;
    if (!before(&w->heap[c], &last)) break;
    w->heap[i] = w->heap[c];
    i = c;
  }
  if (*n > 0) w->heap[i] = last;
  return top;
}

/* Queues the merge of the symbol at pos with the one after it, when the pair merges. */
static void consider(BpeWorker *w, size_t *n, int32_t pos) {
  int32_t right = pos < 0 ? -1 : w->next[pos];
  if (right < 0) return;
  uint64_t pair = (uint64_t)(uint32_t)w->sym[pos] << 32 | (uint32_t)w->sym[right];
  const struct PairSlot *s = pair_slot(w->m, pair);
  if (s->pair == pair) heap_push(w, n, (struct BpeMerge){s->rank, pos, w->sym[pos], w->sym[right]});
}

/* Merges sym[0..len) in place; the survivors are chained from 0 through next. */
static void merge_all(BpeWorker *w, size_t len) {
  size_t queued = 0;
  for (size_t i = 0; i + 1 < len; i++) consider(w, &queued, (int32_t)i);
  while (queued > 0) {
    struct BpeMerge m = heap_pop(w, &queued);
    int32_t right = w->next[m.pos];
    if (w->sym[m.pos] != m.left || right < 0 || w->sym[right] != m.right) continue;
    uint64_t pair = (uint64_t)(uint32_t)m.left << 32 | (uint32_t)m.right;
    w->sym[m.pos] = pair_slot(w->m, pair)->merged;
    w->sym[right] = -1;
    w->next[m.pos] = w->next[right];
    if (w->next[right] >= 0) w->prev[w->next[right]] = m.pos;
    consider(w, &queued, w->prev[m.pos]);
    consider(w, &queued, m.pos);
  }
}

/* The pre-token in byte-level characters is in the vocabulary: its id, else -1. */
static int64_t whole_word(BpeWorker *w, const unsigned char *word, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    n += (size_t)utf8_put(bytelevel_char(word[i]), w->mapped + n);
  return tokenizer_vocab_id(w->m->tok, (const char *)w->mapped, n);
}

static struct BpeCached *cache_slot(BpeWorker *w, const unsigned char *word, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) h = (h ^ word[i]) * 16777619u;
  return &w->cache[h % BPE_CACHE_SLOTS];
}

/* Keeps the ids out[from..] of a short word. */
static void remember(struct BpeCached *c, const unsigned char *word, size_t len, const IdList *out,
                     int64_t from) {
  if (len > BPE_CACHE_WORD || out->count - from > BPE_CACHE_IDS) return;
  c->word_len = (uint8_t)len, c->nids = (uint8_t)(out->count - from);
  memcpy(c->word, word, len);
  memcpy(c->ids, out->ids + from, (size_t)c->nids * sizeof *c->ids);
}

int bpe_word(BpeWorker *w, const unsigned char *word, size_t len, IdList *out) {
  if (len == 0) return 0;
  struct BpeCached *c = len <= BPE_CACHE_WORD ? cache_slot(w, word, len) : NULL;
  if (c && c->word_len == len && memcmp(c->word, word, len) == 0) {
    for (int i = 0; i < c->nids; i++)
      if (idlist_push(out, c->ids[i])) return -1;
    return 0;
  }
  if (reserve(w, len)) return -1;
  int64_t from = out->count;
  int64_t whole = w->m->tok->ignore_merges ? whole_word(w, word, len) : -1;
  if (whole >= 0) {
    if (idlist_push(out, (uint32_t)whole)) return -1;
  } else {
    for (size_t i = 0; i < len; i++) {
      w->sym[i] = w->m->tok->byte_id[word[i]];
      w->prev[i] = (int32_t)i - 1;
      w->next[i] = i + 1 < len ? (int32_t)i + 1 : -1;
    }
    merge_all(w, len);
    for (int32_t i = 0; i >= 0; i = w->next[i])
      if (idlist_push(out, (uint32_t)w->sym[i])) return -1;
  }
  if (c) remember(c, word, len, out, from);
  return 0;
}
