/* indexfile.c: a Megatron-LM indexed dataset written through temporary names renamed into place.
 * The index's layout follows _IndexWriter in megatron/core/datasets/indexed_dataset.py
 * (NVIDIA/Megatron-LM): the 9-byte magic, version 1, the dtype code, the sequence and document
 * counts, int32 sizes, int64 byte pointers, int64 document indices (0, then each document's
 * end). */
#include "indexfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tokenfile.h"

enum { DTYPE_UINT16 = 8, DTYPE_INT32 = 4 };

static int write_failed(IndexWriter *w, const char *path, Diag *d) {
  int saved = errno;
  indexfile_abort(w);
  return diag(d, "cannot write '%s' (%s); check that its folder exists, is writable and has space",
              path, strerror(saved));
}

int indexfile_paths(const char *prefix, char *bin, char *idx, Diag *d) {
  if (snprintf(bin, INDEXFILE_PATH, "%s.bin", prefix) >= INDEXFILE_PATH ||
      snprintf(idx, INDEXFILE_PATH, "%s.idx", prefix) >= INDEXFILE_PATH)
    return diag(d, "-o %s: the name is too long", prefix);
  return 0;
}

int indexfile_begin(IndexWriter *w, const char *prefix, int token_bytes, Diag *d) {
  memset(w, 0, sizeof *w);
  w->token_bytes = token_bytes;
  if (indexfile_paths(prefix, w->bin_path, w->idx_path, d)) return -1;
  if (outfile_open(&w->bin, w->bin_path, d)) return -1;
  return outfile_open(&w->idx, w->idx_path, d);
}

int indexfile_write(IndexWriter *w, const uint32_t *tokens, int64_t n, Diag *d) {
  if (w->open_tokens + n > INT32_MAX)
    return diag(d, "'%s': a document of more than %d tokens, the most an index can size; split "
                "the input file", w->bin_path, INT32_MAX);
  if (tokenfile_put(&w->bin, tokens, n, w->token_bytes)) return write_failed(w, w->bin_path, d);
  w->open_tokens += n;
  return 0;
}

int indexfile_end_document(IndexWriter *w, Diag *d) {
  if (w->open_tokens == 0) return 0;
  if (w->documents == w->capacity) {
    int64_t more = w->capacity ? 2 * w->capacity : 64;
    int32_t *bigger = realloc(w->sizes, (size_t)more * sizeof *bigger);
    if (!bigger) return diag(d, "out of memory writing '%s'", w->idx_path);
    w->sizes = bigger, w->capacity = more;
  }
  w->sizes[w->documents++] = (int32_t)w->open_tokens;
  w->open_tokens = 0;
  return 0;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static int put(IndexWriter *w, uint64_t v, int bytes) {
  unsigned char b[8];
  put_le(b, v, bytes);
  return fwrite(b, 1, (size_t)bytes, w->idx.file) == (size_t)bytes ? 0 : -1;
}

/* Header, sizes, pointers (each document's first byte), document indices 0..documents. */
static int write_index(IndexWriter *w) {
  int rc = fwrite("MMIDIDX\0\0", 1, 9, w->idx.file) == 9 ? 0 : -1;
  rc |= put(w, 1, 8) | put(w, w->token_bytes == 4 ? DTYPE_INT32 : DTYPE_UINT16, 1);
  rc |= put(w, (uint64_t)w->documents, 8);
  rc |= put(w, (uint64_t)w->documents + 1, 8);
  for (int64_t i = 0; i < w->documents; i++) rc |= put(w, (uint32_t)w->sizes[i], 4);
  uint64_t pointer = 0;
  for (int64_t i = 0; i < w->documents; i++) {
    rc |= put(w, pointer, 8);
    pointer += (uint64_t)w->token_bytes * (uint32_t)w->sizes[i];
  }
  for (int64_t i = 0; i <= w->documents; i++) rc |= put(w, (uint64_t)i, 8);
  return rc;
}

int indexfile_finish(IndexWriter *w, Diag *d) {
  if (indexfile_end_document(w, d)) return indexfile_abort(w), -1;
  if (write_index(w)) return write_failed(w, w->idx_path, d);
  if (outfile_close(&w->bin, d)) return indexfile_abort(w), -1;
  if (outfile_close(&w->idx, d)) return indexfile_abort(w), -1;
  free(w->sizes);
  w->sizes = NULL;
  return 0;
}

void indexfile_abort(IndexWriter *w) {
  outfile_abort(&w->bin);
  outfile_abort(&w->idx);
  free(w->sizes);
  w->sizes = NULL;
}
