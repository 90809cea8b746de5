/* normalize.h: a tokenizer's normalizer: UTF-8 text in a Unicode normalization form (NFC, NFD,
 * NFKC, NFKD) through utf8proc, whose tables are those of the Unicode version it carries. */
#ifndef PLAIT_NORMALIZE_H
#define PLAIT_NORMALIZE_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

/* The code points of one text, then its UTF-8 in the same place. */
typedef struct {
  int32_t *codes;
  size_t capacity;
} NormalizeBuffer;

/* s[0..len) (well-formed UTF-8) in form: *out is s itself when nothing changes it (ASCII, or no
 * form), else points into b, valid until the next call; its length in *out_len. -1 when out of
 * memory. */
int normalize_text(NormalizeBuffer *b, UnicodeForm form, const unsigned char *s, size_t len,
                   const unsigned char **out, size_t *out_len);
void normalize_free(NormalizeBuffer *b);

#endif
