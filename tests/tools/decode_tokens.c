/* decode_tokens.c: a token file's tokens decoded with a tokenizer, through the runtime alone (what
 * training programs link: no regular-expression library), for the tests' round trips.
 *   decode_tokens TOKENIZER TOKENS [MERGES]   writes every token's decoded bytes to stdout */
#include <stdio.h>

#include "message.h"
#include "text/tokenizer.h"
#include "train/data.h"

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: decode_tokens TOKENIZER TOKENS [MERGES]\n");
    return 2;
  }
  Tokenizer tok;
  char why[MESSAGE_TEXT];
  if (tokenizer_load(&tok, argv[1], argc == 4 ? argv[3] : NULL, why, sizeof why)) {
    fprintf(stderr, "%s\n", why);
    return 1;
  }
  TokenFile f;
  if (data_open(&f, argv[2], tok.size, 1, DATA_EVAL)) {
    fprintf(stderr, "%s\n", f.error);
    return 1;
  }
  int rc = 0;
  for (int64_t i = 0; i < f.count && rc == 0; i++) {
    size_t len;
    const unsigned char *bytes = tokenizer_decode(&tok, data_token(&f, i), &len);
    if (bytes) fwrite(bytes, 1, len, stdout);
    else rc = fprintf(stderr, "token %lld names no token\n", (long long)data_token(&f, i)) > 0;
  }
  data_close(&f);
  tokenizer_free(&tok);
  return rc;
}
