/* safetensors_meta.c: metadata values of a checkpoint read strictly, each refusal naming the key
 * (safetensors_meta.h). */
#include "ckpt/safetensors_meta.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_refuse(char *error, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error, len, fmt, ap);
  va_end(ap);
  for (unsigned char *ch = (unsigned char *)error; *ch; ch++)
    if (*ch < 0x20) *ch = '?';
  return -1;
}

static const char *const damaged = "the file is damaged, use another checkpoint";

static int parse_whole(const char *text, uint64_t *out) {
  uint64_t v = 0;
  if (!*text) return -1;
  for (; *text; text++) {
    unsigned digit = (unsigned)(*text - '0');
    if (digit > 9 || v > (UINT64_MAX - digit) / 10) return -1;
    v = v * 10 + digit;
  }
  *out = v;
  return 0;
}

int ckpt_meta_whole(const Ckpt *c, const char *key, uint64_t least, uint64_t most, uint64_t *out,
                    char *error, size_t len) {
  const char *text = ckpt_meta(c, key);
  uint64_t v;
  if (!text) return 1;
  if (parse_whole(text, &v) != 0 || v < least || v > most)
    return ckpt_refuse(
        error, len, "%s: metadata %s = '%.40s' is not a whole number from %llu to %llu; %s",
        c->path, key, text, (unsigned long long)least, (unsigned long long)most, damaged);
  *out = v;
  return 0;
}

int ckpt_meta_real(const Ckpt *c, const char *key, double least, double *out, char *error,
                   size_t len) {
  const char *text = ckpt_meta(c, key);
  char *end;
  if (!text) return 1;
  double v = strtod(text, &end);
  if (end == text || *end || !isfinite(v) || v < least)
    return ckpt_refuse(error, len,
                       "%s: metadata %s = '%.40s' is not a finite number of at least %g; %s",
                       c->path, key, text, least, damaged);
  *out = v;
  return 0;
}

int ckpt_meta_word(const Ckpt *c, const char *key, const char *const *words, int nwords, int *out,
                   char *error, size_t len) {
  const char *text = ckpt_meta(c, key);
  if (!text) return 1;
  for (int i = 0; i < nwords; i++)
    if (strcmp(text, words[i]) == 0) return *out = i, 0;
  char known[256] = "";
  for (int i = 0; i < nwords; i++) {
    const char *before = i == 0 ? "" : i + 1 < nwords ? ", " : " or ";
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s'%s'", before, words[i]);
  }
  return ckpt_refuse(error, len,
                     "%s: metadata %s = '%.40s' is not %s; the file is damaged or of another "
                     "version of plait, use "
                     "a checkpoint this plait wrote",
                     c->path, key, text, known);
}
