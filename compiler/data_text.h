/* data_text.h: `plait data --tokenizer`: text files to token ids, one document a file, each
 * document its end-of-text token followed by its text's ids, on N threads (a file to a thread at
 * a time: the ids are the same for every N). */
#ifndef PLAIT_DATA_TEXT_H
#define PLAIT_DATA_TEXT_H

#include "bpe.h"
#include "ir/diag.h"

typedef struct {
  const char *tokenizer, *merges; /* --tokenizer FILE [--merges FILE] */
  const char *eot;                /* --eot TOKEN, or NULL: the first the tokenizer declares of
                                     <|endoftext|>, <|begin_of_text|>, <s> */
  int workers;
  const char *const *inputs;
  int ninputs;
} TextJob;

typedef struct {
  IdList *documents; /* one a file */
  int64_t tokens;    /* in all of them */
  int token_bytes;   /* 2 when every id fits in uint16, else 4 */
} TextTokens;

/* Reads the tokenizer and encodes the inputs; -1 with d (nothing to free then). */
int data_text_encode(const TextJob *job, TextTokens *out, Diag *d);
void data_text_free(TextTokens *t, int ninputs);

#endif
