/* tokenizer.h: a byte-level BPE tokenizer as read from a file: Hugging Face's tokenizer.json
 * (model "BPE", pre-tokenizer ByteLevel or Sequence[Split(Regex, Isolated)..., ByteLevel], no
 * normalizer or a Unicode form's, decoder ByteLevel, added tokens) or GPT-2's vocab.json with its
 * merges.txt. What is read here needs no regular-expression nor Unicode library: the vocabulary,
 * the added tokens, the merges resolved to ids, the pre-tokenizer's steps (their patterns as
 * text), the normalizer's form and each id's decoded bytes. Training programs decode with it;
 * plait's encoder (compiler/encode.h) builds on it. */
#ifndef PLAIT_TEXT_TOKENIZER_H
#define PLAIT_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

/* Bounds on a file from a stranger. */
enum {
  TOKENIZER_MAX_FILE = 256 << 20, /* bytes of tokenizer.json, vocab.json or merges.txt */
  TOKENIZER_MAX_IDS = 1 << 22,    /* ids run from 0 below this */
  TOKENIZER_MAX_TOKEN = 4096,     /* bytes of one token's text */
  TOKENIZER_MAX_DEPTH = 32,       /* JSON nesting */
  TOKENIZER_MAX_STEPS = 8,        /* pre-tokenizer steps */
};

/* The normalizer's Unicode normalization form, built of two choices: compatibility mappings or not,
 * composed or not. */
typedef enum {
  UNICODE_FORM_NONE = 0,
  UNICODE_COMPOSE = 2, /* the bits within a form */
  UNICODE_COMPAT = 4,
  UNICODE_NFD = 1,
  UNICODE_NFC = 1 | UNICODE_COMPOSE,
  UNICODE_NFKD = 1 | UNICODE_COMPAT,
  UNICODE_NFKC = 1 | UNICODE_COMPAT | UNICODE_COMPOSE,
} UnicodeForm;

typedef struct {
  uint32_t off, len; /* bytes in the tokenizer's pool; len UINT32_MAX: no token */
} TextRef;

/* A token of added_tokens: split out of the text before pre-tokenization. */
typedef struct {
  int32_t id;
  int special, lstrip, rstrip, normalized;
} AddedToken;

/* One pre-tokenizer step: a Split on a regular expression (Isolated), or the ByteLevel step (always
 * last), which may first put a space before each piece and split it on GPT-2's pattern. */
typedef struct {
  int split; /* 1: Split, 0: ByteLevel */
  TextRef pattern;
  int add_prefix_space, use_regex;
} PreStep;

/* string -> id over some of the tokenizer's texts (open addressing). */
typedef struct {
  struct TokenSlot {
    uint32_t hash;
    int32_t id; /* -1: empty */
  } *slots;
  uint32_t mask;
} TokenIndex;

typedef struct {
  char *pool; /* every text below (owned) */
  size_t pool_len, pool_cap;
  int64_t size;  /* ids run 0..size-1 */
  TextRef *text; /* each id's token as the file writes it (byte-level characters) */
  unsigned char *added_id; /* per id: 1 for an added token's */
  TokenIndex vocab;        /* the model's vocabulary (not added tokens that are not in it) */
  AddedToken *added;
  int32_t nadded;
  int32_t (*merges)[3]; /* by rank: left, right, the merged token */
  int64_t nmerges;
  PreStep steps[TOKENIZER_MAX_STEPS];
  int nsteps;
  int ignore_merges;
  UnicodeForm normal_form; /* applied to the text outside added tokens before the pre-tokenizer */
  int32_t byte_id[256];  /* the token of each byte's character */
  TextRef *decoded;      /* each id's decoded bytes, in decoded_pool */
  unsigned char *decoded_pool;
} Tokenizer;

/* Reads path (tokenizer.json), or, when merges_path is given, path as GPT-2's vocab.json and
 * merges_path as its merges.txt (read as GPT-2's tokenizer.json reads: ByteLevel with its pattern,
 * no prefix space, "<|endoftext|>" a special added token when the vocabulary has it). Returns 0,
 * or -1 with why: one line naming the file, the cause and the fix. */
int tokenizer_load(Tokenizer *t, const char *path, const char *merges_path, char *why,
                   size_t size);
void tokenizer_free(Tokenizer *t);

/* The id of the token whose text is s[0..len) in the model's vocabulary; -1 when none. */
int64_t tokenizer_vocab_id(const Tokenizer *t, const char *s, size_t len);
/* The id of the added token, else the vocabulary's token, whose text is name; -1 when none. */
int64_t tokenizer_find(const Tokenizer *t, const char *name);

/* The token that starts a document: the first the tokenizer declares of <|endoftext|> (GPT-2,
 * Qwen2), <|begin_of_text|> (Llama 3) and <s> (Mistral); -1 when none. */
int64_t tokenizer_document_start(const Tokenizer *t);

/* The bytes id decodes to (ByteLevel: each character back to its byte, or the text's own bytes
 * when one is not in the byte-level alphabet), NULL when id names no token. */
const unsigned char *tokenizer_decode(const Tokenizer *t, int64_t id, size_t *len);

/* Whether every id a model of `vocab` tokens can give (0..vocab-1) names a token; -1 with why
 * (naming `path`) when one does not. */
int tokenizer_covers(const Tokenizer *t, int64_t vocab, const char *path, char *why, size_t size);

/* Internal to the readers (tokenizer.c, tokenizer_json.c). */
typedef struct {
  const char *path;
  char *why;
  size_t size;
} TokenizerSource;
int tokenizer_fail(const TokenizerSource *src, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Copies bytes into the pool; its place in *ref. */
int tokenizer_keep(Tokenizer *t, const char *s, size_t len, TextRef *ref);
/* Gives id the text s[0..len); -1 with why when out of range, taken, or too long. */
int tokenizer_set(Tokenizer *t, const TokenizerSource *src, int64_t id, const char *s, size_t len);
/* After the vocabulary: the index, the byte tokens, the merges (pairs of texts, rank order), the
 * added tokens and the decoded bytes. */
int tokenizer_finish_vocab(Tokenizer *t, const TokenizerSource *src);
int tokenizer_add_merge(Tokenizer *t, const TokenizerSource *src, const char *left, size_t left_len,
                        const char *right, size_t right_len);
int tokenizer_add_token(Tokenizer *t, const TokenizerSource *src, int64_t id, const char *s,
                        size_t len, const AddedToken *flags);
int tokenizer_finish(Tokenizer *t, const TokenizerSource *src);

/* The readers of the two formats (tokenizer_json.c). */
int tokenizer_read_hf(Tokenizer *t, const TokenizerSource *src);
int tokenizer_read_gpt2(Tokenizer *t, const TokenizerSource *src, const char *merges_path);

#endif
