/* encode.h: text to token ids with a byte-level BPE tokenizer, as Hugging Face tokenizers'
 * encode(text, add_special_tokens=False) gives them: bytes that are not UTF-8 are first replaced
 * (each maximal ill-formed part by U+FFFD, what Python's decode(errors="replace") gives the
 * tokenizer); added tokens are split out (those not normalized first, then, in the text between
 * them put through the normalizer (normalize.h), the others as the normalizer writes them; the
 * leftmost, then longest, match; lstrip and rstrip take the white space beside them); each piece
 * between them goes through the pre-tokenizer's steps (PCRE2 with its JIT, UTF and Unicode
 * properties) and each pre-token through the BPE merges (bpe.h). */
#ifndef PLAIT_ENCODE_H
#define PLAIT_ENCODE_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "bpe.h"
#include "normalize.h"
#include "text/tokenizer.h"

/* A byte trie of added tokens' texts (root children in a table, the rest in sibling lists). */
typedef struct {
  struct TrieNode {
    int32_t child, sibling, added; /* added: index into tok->added, or -1 */
    unsigned char byte;
  } *nodes;
  int32_t count;
  int32_t root[256];
} AddedTrie;

/* Shared, read-only once built. */
typedef struct {
  const Tokenizer *tok;
  BpeModel bpe;
  pcre2_code *step_re[TOKENIZER_MAX_STEPS]; /* NULL: a ByteLevel step without its regex */
  AddedTrie trie[2]; /* added tokens not normalized, then normalized (their normalizer's text) */
} Encoder;

/* Compiles the patterns; -1 with why (naming path) when one does not compile. */
int encoder_build(Encoder *e, const Tokenizer *t, const char *path, char *why, size_t size);
void encoder_free(Encoder *e);

/* One thread's state. */
typedef struct {
  const Encoder *e;
  BpeWorker bpe;
  NormalizeBuffer normalized;
  pcre2_match_data *match;
  pcre2_match_context *context;
  pcre2_jit_stack *stack;
  unsigned char *repaired, *prefixed;
  size_t repaired_cap, prefixed_cap;
  char *why;
  size_t why_size;
} EncodeWorker;

int encode_worker_init(EncodeWorker *w, const Encoder *e); /* -1 when out of memory */
void encode_worker_free(EncodeWorker *w);

/* Appends the ids of text[0..len) to out; -1 with why in w->why (out of memory, or a regular
 * expression that ran out of its stack). */
int encode_text(EncodeWorker *w, const unsigned char *text, size_t len, IdList *out, char *why,
                size_t size);

#endif
