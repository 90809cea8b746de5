/* normalize.c: Unicode normalization forms through utf8proc: decomposed into code points (and
 * canonically ordered), composed when the form composes, encoded back to UTF-8 in place. */
#include "normalize.h"

#include <stdlib.h>
#include <utf8proc.h>

static utf8proc_option_t form_options(UnicodeForm form) {
  utf8proc_option_t o = UTF8PROC_STABLE;
  o |= form & UNICODE_COMPOSE ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
  return form & UNICODE_COMPAT ? o | UTF8PROC_COMPAT : o;
}

/* Every normalization form leaves ASCII as it is. */
static int is_ascii(const unsigned char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (s[i] >= 0x80) return 0;
  return 1;
}

/* Room for n code points and the NUL utf8proc_reencode writes after them. */
static int reserve(NormalizeBuffer *b, size_t n) {
  if (n + 1 <= b->capacity) return 0;
  size_t cap = n + 1 < 256 ? 256 : 2 * (n + 1);
  int32_t *bigger = realloc(b->codes, cap * sizeof *bigger);
  if (!bigger) return -1;
  b->codes = bigger, b->capacity = cap;
  return 0;
}

int normalize_text(NormalizeBuffer *b, UnicodeForm form, const unsigned char *s, size_t len,
                   const unsigned char **out, size_t *out_len) {
  *out = s, *out_len = len;
  if (form == UNICODE_FORM_NONE || is_ascii(s, len)) return 0;
  utf8proc_option_t o = form_options(form);
  utf8proc_ssize_t n = 0;
  do {
    if (reserve(b, (size_t)n)) return -1;
    n = utf8proc_decompose(s, (utf8proc_ssize_t)len, b->codes, (utf8proc_ssize_t)b->capacity - 1,
                           o);
    if (n < 0) return -1; /* only out of memory: the text is well-formed */
  } while ((size_t)n + 1 > b->capacity);
  n = utf8proc_reencode(b->codes, n, o);
  if (n < 0) return -1;
  *out = (const unsigned char *)b->codes, *out_len = (size_t)n;
  return 0;
}

void normalize_free(NormalizeBuffer *b) {
  free(b->codes);
  b->codes = NULL, b->capacity = 0;
}
