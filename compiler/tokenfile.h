/* tokenfile.h: writing token files in llm.c's format (what runtime/train/data.c reads): a header
 * of 256 little-endian int32 (magic, version, the token count), then the tokens: uint16 under
 * magic 20240520 version 1, or uint32 under magic 20240801 version 7 (llm.c's files for
 * vocabularies past 65536 tokens). */
#ifndef PLAIT_TOKENFILE_H
#define PLAIT_TOKENFILE_H

#include <stdint.h>
#include <stdio.h>

#include "ir/diag.h"
#include "outfile.h"

#define TOKENFILE_MAGIC 20240520
#define TOKENFILE_VERSION 1
#define TOKENFILE_MAGIC32 20240801
#define TOKENFILE_VERSION32 7
#define TOKENFILE_MAX_TOKENS INT32_MAX /* the header holds the count as an int32 */

/* A file being written: tokens go to a temporary file beside the final one, which is renamed
 * into place when complete, so the final name never holds a half-written file. */
typedef struct {
  const char *path;
  OutFile out;
  int64_t count;
  int token_bytes; /* 2 or 4 */
} TokenWriter;

/* Writes n tokens to out as little-endian uint16 (token_bytes 2) or uint32 (4); 0, or -1 (errno
 * says why). */
int tokenfile_put(OutFile *out, const uint32_t *tokens, int64_t n, int token_bytes);

/* Each returns 0, or -1 with the reason in d; after a failure, call tokenfile_abort. */
int tokenfile_begin(TokenWriter *w, const char *path, int token_bytes, Diag *d);
int tokenfile_write(TokenWriter *w, const uint32_t *tokens, int64_t n, Diag *d);
/* Writes the header with the count, syncs the file to disk and renames it to its final name. */
int tokenfile_finish(TokenWriter *w, Diag *d);
/* Removes the temporary file of a writer that did not finish (nothing when none is open). */
void tokenfile_abort(TokenWriter *w);

#endif
