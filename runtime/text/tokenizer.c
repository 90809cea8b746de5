/* tokenizer.c: the tokenizer's tables, whichever file they come from: ids and their texts, the
 * vocabulary's index, merges resolved to ids, added tokens, decoded bytes; and decoding. */
#include "text/tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/utf8.h"

int tokenizer_fail(const TokenizerSource *src, const char *fmt, ...) {
  int n = snprintf(src->why, src->size, "%s: ", src->path);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < src->size) vsnprintf(src->why + n, src->size - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

static uint32_t text_hash(const char *s, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static const char *text_of(const Tokenizer *t, int64_t id) { return t->pool + t->text[id].off; }

int tokenizer_keep(Tokenizer *t, const char *s, size_t len, TextRef *ref) {
  if (t->pool_len + len + 1 > t->pool_cap) {
    size_t more = (t->pool_len + len + 1) * 2;
    char *bigger = realloc(t->pool, more);
    if (!bigger) return -1;
    t->pool = bigger, t->pool_cap = more;
  }
  memcpy(t->pool + t->pool_len, s, len);
  t->pool[t->pool_len + len] = 0;
  ref->off = (uint32_t)t->pool_len, ref->len = (uint32_t)len;
  t->pool_len += len + 1;
  return 0;
}

/* Ids 0..id exist (those not given a text yet have none). */
static int grow_ids(Tokenizer *t, int64_t id) {
  if (id < t->size) return 0;
  int64_t size = id + 1;
  TextRef *text = realloc(t->text, (size_t)size * sizeof *text);
  unsigned char *added = realloc(t->added_id, (size_t)size);
  if (text) t->text = text;
  if (added) t->added_id = added;
  if (!text || !added) return -1;
  for (int64_t i = t->size; i < size; i++) {
    t->text[i] = (TextRef){0, UINT32_MAX};
    t->added_id[i] = 0;
  }
  t->size = size;
  return 0;
}

int tokenizer_set(Tokenizer *t, const TokenizerSource *src, int64_t id, const char *s, size_t len) {
  if (id < 0 || id >= TOKENIZER_MAX_IDS)
    return tokenizer_fail(src, "the token '%.64s' has id %lld, outside 0..%d; fix the file",
                          s, (long long)id, TOKENIZER_MAX_IDS - 1);
  if (len == 0 || len > TOKENIZER_MAX_TOKEN)
    return tokenizer_fail(src, "token %lld is %zu bytes long, not 1..%d; fix the file",
                          (long long)id, len, TOKENIZER_MAX_TOKEN);
  if (grow_ids(t, id) || (id < t->size && t->text[id].len == UINT32_MAX &&
                          tokenizer_keep(t, s, len, &t->text[id])))
    return tokenizer_fail(src, "out of memory");
  if (t->text[id].len != len || memcmp(text_of(t, id), s, len) != 0)
    return tokenizer_fail(src, "id %lld is given to both '%.64s' and '%.64s'; each id names one "
                          "token, fix the file", (long long)id, text_of(t, id), s);
  return 0;
}

static int64_t index_find(const TokenIndex *x, const Tokenizer *t, const char *s, size_t len) {
  if (!x->slots) return -1;
  uint32_t h = text_hash(s, len);
  for (uint32_t i = h & x->mask;; i = (i + 1) & x->mask) {
    const struct TokenSlot *slot = &x->slots[i];
    if (slot->id < 0) return -1;
    if (slot->hash == h && t->text[slot->id].len == len &&
        memcmp(text_of(t, slot->id), s, len) == 0)
      return slot->id;
  }
}

/* Every id with a text goes in; a text twice is refused. */
static int index_vocab(Tokenizer *t, const TokenizerSource *src) {
  uint32_t cap = 16;
  while (cap < 2 * (uint64_t)t->size) cap *= 2;
  TokenIndex *x = &t->vocab;
  x->slots = malloc((size_t)cap * sizeof *x->slots);
  if (!x->slots) return tokenizer_fail(src, "out of memory");
  x->mask = cap - 1;
  for (uint32_t i = 0; i < cap; i++) x->slots[i].id = -1;
  for (int64_t id = 0; id < t->size; id++) {
    if (t->text[id].len == UINT32_MAX) continue;
    int64_t other = index_find(x, t, text_of(t, id), t->text[id].len);
    if (other >= 0)
      return tokenizer_fail(src, "the vocabulary holds '%.64s' twice (ids %lld and %lld); fix the "
                            "file", text_of(t, id), (long long)other, (long long)id);
    uint32_t h = text_hash(text_of(t, id), t->text[id].len), i = h & x->mask;
    while (x->slots[i].id >= 0) i = (i + 1) & x->mask;
    x->slots[i] = (struct TokenSlot){h, (int32_t)id};
  }
  return 0;
}

int64_t tokenizer_vocab_id(const Tokenizer *t, const char *s, size_t len) {
  return index_find(&t->vocab, t, s, len);
}

int tokenizer_finish_vocab(Tokenizer *t, const TokenizerSource *src) {
  if (t->size == 0) return tokenizer_fail(src, "the vocabulary is empty; fix the file");
  if (index_vocab(t, src)) return -1;
  for (int b = 0; b < 256; b++) {
    unsigned char c[4];
    int n = utf8_put(bytelevel_char((unsigned char)b), c);
    int64_t id = tokenizer_vocab_id(t, (const char *)c, (size_t)n);
    if (id < 0)
      return tokenizer_fail(src, "the vocabulary has no token for byte 0x%02x ('%.*s'); a "
                            "byte-level BPE vocabulary holds all 256, fix the file", b, n, c);
    t->byte_id[b] = (int32_t)id;
  }
  return 0;
}

int tokenizer_add_merge(Tokenizer *t, const TokenizerSource *src, const char *left, size_t left_len,
                        const char *right, size_t right_len) {
  char both[2 * TOKENIZER_MAX_TOKEN];
  int64_t a = tokenizer_vocab_id(t, left, left_len), b = tokenizer_vocab_id(t, right, right_len);
  int64_t ab = -1;
  if (left_len + right_len <= sizeof both) {
    memcpy(both, left, left_len), memcpy(both + left_len, right, right_len);
    ab = tokenizer_vocab_id(t, both, left_len + right_len);
  }
  if (a < 0 || b < 0 || ab < 0)
    return tokenizer_fail(src, "merge %lld ('%.*s' '%.*s') names '%.*s', which is not in the "
                          "vocabulary; fix the file", (long long)t->nmerges + 1, (int)left_len,
                          left, (int)right_len, right, a < 0 ? (int)left_len : b < 0
                          ? (int)right_len : (int)(left_len + right_len),
                          a < 0 ? left : b < 0 ? right : both);
  if (t->nmerges >= TOKENIZER_MAX_IDS)
    return tokenizer_fail(src, "more than %d merges; fix the file", TOKENIZER_MAX_IDS);
  if ((t->nmerges & (t->nmerges - 1)) == 0) {
    int64_t more = t->nmerges ? 2 * t->nmerges : 1024;
    int32_t(*bigger)[3] = realloc(t->merges, (size_t)more * sizeof *bigger);
    if (!bigger) return tokenizer_fail(src, "out of memory");
    t->merges = bigger;
  }
  int32_t *m = t->merges[t->nmerges++];
  m[0] = (int32_t)a, m[1] = (int32_t)b, m[2] = (int32_t)ab;
  return 0;
}

/* An added token keeps its vocabulary id when the vocabulary has its text (as tokenizers gives
 * it), else takes the id the file declares, which no other token may hold. */
int tokenizer_add_token(Tokenizer *t, const TokenizerSource *src, int64_t id, const char *s,
                        size_t len, const AddedToken *flags) {
  int64_t known = tokenizer_vocab_id(t, s, len);
  if (known >= 0 && known != id)
    return tokenizer_fail(src, "added token '%.64s' has id %lld but the vocabulary gives it %lld; "
                          "fix the file", s, (long long)id, (long long)known);
  if (known < 0 && id >= 0 && id < t->size && t->text[id].len != UINT32_MAX &&
      !t->added_id[id])
    return tokenizer_fail(src, "added token '%.64s' has id %lld, which the vocabulary gives to "
                          "'%.64s'; fix the file", s, (long long)id, text_of(t, id));
  if (tokenizer_set(t, src, id, s, len)) return -1;
  if (t->added_id[id]) return tokenizer_fail(src, "added token '%.64s' appears twice; fix the "
                                             "file", s);
  t->added_id[id] = 1;
  AddedToken *bigger = realloc(t->added, (size_t)(t->nadded + 1) * sizeof *bigger);
  if (!bigger) return tokenizer_fail(src, "out of memory");
  t->added = bigger;
  t->added[t->nadded] = *flags;
  t->added[t->nadded++].id = (int32_t)id;
  return 0;
}

/* Characters all in the byte-level alphabet: their bytes; otherwise the text's own bytes. */
static size_t decode_text(const char *s, size_t len, unsigned char *out) {
  size_t at = 0, n = 0;
  while (at < len) {
    uint32_t cp;
    int k = utf8_char((const unsigned char *)s + at, len - at, &cp);
    int b = k ? bytelevel_byte(cp) : -1;
    if (b < 0) {
      memcpy(out, s, len);
      return len;
    }
    out[n++] = (unsigned char)b;
    at += (size_t)k;
  }
  return n;
}

int tokenizer_finish(Tokenizer *t, const TokenizerSource *src) {
  t->decoded = malloc((size_t)t->size * sizeof *t->decoded);
  t->decoded_pool = malloc(t->pool_len + 1);
  if (!t->decoded || !t->decoded_pool) return tokenizer_fail(src, "out of memory");
  uint32_t at = 0;
  for (int64_t id = 0; id < t->size; id++) {
    t->decoded[id] = (TextRef){at, t->text[id].len};
    if (t->text[id].len == UINT32_MAX) continue;
    t->decoded[id].len = (uint32_t)decode_text(text_of(t, id), t->text[id].len,
                                               t->decoded_pool + at);
    at += t->decoded[id].len;
  }
  return 0;
}

int64_t tokenizer_find(const Tokenizer *t, const char *name) {
  size_t len = strlen(name);
  for (int32_t i = 0; i < t->nadded; i++) {
    int32_t id = t->added[i].id;
    if (t->text[id].len == len && memcmp(text_of(t, id), name, len) == 0) return id;
  }
  return tokenizer_vocab_id(t, name, len);
}

int64_t tokenizer_document_start(const Tokenizer *t) {
  static const char *const usual[] = {"<|endoftext|>", "<|begin_of_text|>", "<s>"};
  int64_t id = -1;
  for (int i = 0; id < 0 && i < 3; i++) id = tokenizer_find(t, usual[i]);
  return id;
}

const unsigned char *tokenizer_decode(const Tokenizer *t, int64_t id, size_t *len) {
  if (id < 0 || id >= t->size || t->decoded[id].len == UINT32_MAX) return NULL;
  *len = t->decoded[id].len;
  return t->decoded_pool + t->decoded[id].off;
}

int tokenizer_covers(const Tokenizer *t, int64_t vocab, const char *path, char *why,
                     size_t size) {
  for (int64_t id = 0; id < vocab; id++)
    if (id >= t->size || t->text[id].len == UINT32_MAX) {
      snprintf(why, size, "%s: the model's vocabulary has %lld tokens but the tokenizer has no "
               "token %lld, which the model can give; use the tokenizer the model was made for",
               path, (long long)vocab, (long long)id);
      return -1;
    }
  return 0;
}

void tokenizer_free(Tokenizer *t) {
  free(t->pool);
  free(t->text);
  free(t->added_id);
  free(t->vocab.slots);
  free(t->added);
  free(t->merges);
  free(t->decoded);
  free(t->decoded_pool);
  memset(t, 0, sizeof *t);
}

int tokenizer_load(Tokenizer *t, const char *path, const char *merges_path, char *why,
                   size_t size) {
  memset(t, 0, sizeof *t);
  TokenizerSource src = {path, why, size};
  int rc = merges_path ? tokenizer_read_gpt2(t, &src, merges_path) : tokenizer_read_hf(t, &src);
  if (rc == 0) rc = tokenizer_finish(t, &src);
  if (rc) tokenizer_free(t);
  return rc;
}
