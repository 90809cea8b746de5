/* indexfile.h: writing Megatron-LM indexed datasets (what runtime/train/indexed.h reads):
 * PREFIX.bin, the tokens as little-endian uint16 or int32, and PREFIX.idx, the "MMIDIDX" index of
 * megatron/core/datasets/indexed_dataset.py with dtype uint16 (code 8) or int32 (code 4), one
 * sequence a document. */
#ifndef PLAIT_INDEXFILE_H
#define PLAIT_INDEXFILE_H

#include <stdint.h>

#include "ir/diag.h"
#include "outfile.h"

enum { INDEXFILE_PATH = 4096 };

/* A dataset being written: both files go to temporary names beside the final ones and are
 * renamed into place when complete (the .bin first, then the .idx that points into it). */
typedef struct {
  char bin_path[INDEXFILE_PATH], idx_path[INDEXFILE_PATH];
  OutFile bin, idx;
  int32_t *sizes; /* tokens of each finished document */
  int64_t documents, capacity;
  int64_t open_tokens; /* of the document being written */
  int token_bytes;     /* 2: uint16, 4: int32 */
} IndexWriter;

/* PREFIX.bin and PREFIX.idx, as a writer would name them; -1 with d when too long. */
int indexfile_paths(const char *prefix, char *bin, char *idx, Diag *d);

/* Each returns 0, or -1 with the reason in d; after a failure, call indexfile_abort. */
int indexfile_begin(IndexWriter *w, const char *prefix, int token_bytes, Diag *d);
int indexfile_write(IndexWriter *w, const uint32_t *tokens, int64_t n, Diag *d);
/* Ends the document being written (nothing when it holds no tokens). */
int indexfile_end_document(IndexWriter *w, Diag *d);
/* Ends the last document, writes the index, and renames both files into place. */
int indexfile_finish(IndexWriter *w, Diag *d);
/* Removes the temporary files of a writer that did not finish and frees it. */
void indexfile_abort(IndexWriter *w);

#endif
