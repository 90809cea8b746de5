/* tokenfile.c: writing a token file through a temporary name that is renamed into place. */
#include "tokenfile.h"

#include <errno.h>
#include <string.h>

enum { HEADER_INTS = 256, CHUNK = 4096 };

static int write_failed(TokenWriter *w, Diag *d) {
  int saved = errno;
  tokenfile_abort(w);
  return diag(d, "cannot write '%s' (%s); check that its folder exists, is writable and has space",
              w->path, strerror(saved));
}

static void put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static int write_header(TokenWriter *w, Diag *d) {
  unsigned char header[HEADER_INTS * 4] = {0};
  put_le32(header, w->token_bytes == 4 ? TOKENFILE_MAGIC32 : TOKENFILE_MAGIC);
  put_le32(header + 4, w->token_bytes == 4 ? TOKENFILE_VERSION32 : TOKENFILE_VERSION);
  put_le32(header + 8, (uint32_t)w->count);
  if (fseek(w->out.file, 0, SEEK_SET) != 0 || fwrite(header, sizeof header, 1, w->out.file) != 1)
    return write_failed(w, d);
  return 0;
}

int tokenfile_begin(TokenWriter *w, const char *path, int token_bytes, Diag *d) {
  memset(w, 0, sizeof *w);
  w->path = path;
  w->token_bytes = token_bytes;
  if (outfile_open(&w->out, path, d)) return -1;
  return write_header(w, d); /* a placeholder until the count is known */
}

int tokenfile_put(OutFile *out, const uint32_t *tokens, int64_t n, int token_bytes) {
  unsigned char bytes[4 * CHUNK];
  for (int64_t done = 0; done < n; done += CHUNK) {
    int64_t k = n - done < CHUNK ? n - done : CHUNK;
    for (int64_t i = 0; i < k; i++)
      for (int b = 0; b < token_bytes; b++)
        bytes[token_bytes * i + b] = (unsigned char)(tokens[done + i] >> (8 * b));
    if (fwrite(bytes, (size_t)token_bytes, (size_t)k, out->file) != (size_t)k) return -1;
  }
  return 0;
}

int tokenfile_write(TokenWriter *w, const uint32_t *tokens, int64_t n, Diag *d) {
  if (w->count + n > TOKENFILE_MAX_TOKENS)
    return diag(
        d, "'%s' would hold more than %d tokens, the most a token file can count; split the input",
        w->path, TOKENFILE_MAX_TOKENS);
  if (tokenfile_put(&w->out, tokens, n, w->token_bytes)) return write_failed(w, d);
  w->count += n;
  return 0;
}

int tokenfile_finish(TokenWriter *w, Diag *d) {
  if (write_header(w, d) != 0) return -1;
  return outfile_close(&w->out, d);
}

void tokenfile_abort(TokenWriter *w) { outfile_abort(&w->out); }
