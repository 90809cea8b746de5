/* utf8.c: UTF-8 characters, their repair, white space and the byte-level alphabet. */
#include "text/utf8.h"

#include <string.h>

/* The bytes a character starting with lead takes (0: no character starts so), and the range its
 * second byte must fall in (what excludes overlong forms, surrogates and values past U+10FFFF). */
static int lead_length(unsigned lead, unsigned *lo, unsigned *hi) {
  *lo = 0x80, *hi = 0xbf;
  if (lead < 0x80) return 1;
  if (lead < 0xc2 || lead > 0xf4) return 0;
  if (lead == 0xe0) *lo = 0xa0;
  if (lead == 0xed) *hi = 0x9f;
  if (lead == 0xf0) *lo = 0x90;
  if (lead == 0xf4) *hi = 0x8f;
  return lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
}

/* How many bytes from s[0] belong to one well-formed character or to one maximal ill-formed
 * subpart (at least 1); *whole says which. */
static size_t next_part(const unsigned char *s, size_t n, int *whole) {
  unsigned lo, hi;
  int k = lead_length(s[0], &lo, &hi);
  size_t i = 1;
  if (k > 1 && n > 1 && s[1] >= lo && s[1] <= hi) {
    i = 2;
    while (i < (size_t)k && i < n && (s[i] & 0xc0) == 0x80) i++;
  }
  *whole = k > 0 && i == (size_t)k;
  return i;
}

int utf8_char(const unsigned char *s, size_t n, uint32_t *cp) {
  int whole;
  size_t k = n ? next_part(s, n, &whole) : 0;
  if (!k || !whole) return 0;
  uint32_t v = k == 1 ? s[0] : s[0] & (0x7fu >> k);
  for (size_t i = 1; i < k; i++) v = v << 6 | (s[i] & 0x3fu);
  *cp = v;
  return (int)k;
}

int utf8_put(uint32_t cp, unsigned char *out) {
  static const unsigned char lead[5] = {0, 0, 0xc0, 0xe0, 0xf0};
  int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  if (n == 1) {
    out[0] = (unsigned char)cp;
    return 1;
  }
  for (int i = n - 1; i > 0; i--, cp >>= 6) out[i] = (unsigned char)(0x80 | (cp & 0x3f));
  out[0] = (unsigned char)(lead[n] | cp);
  return n;
}

size_t utf8_valid_prefix(const unsigned char *s, size_t n) {
  size_t at = 0;
  while (at < n) {
    if (s[at] < 0x80) {
      at++;
      continue;
    }
    int whole;
    size_t k = next_part(s + at, n - at, &whole);
    if (!whole) break;
    at += k;
  }
  return at;
}

size_t utf8_repair(const unsigned char *s, size_t n, unsigned char *out) {
  size_t at = 0, len = 0;
  while (at < n) {
    int whole;
    size_t k = next_part(s + at, n - at, &whole);
    if (whole) memcpy(out + len, s + at, k), len += k;
    else len += (size_t)utf8_put(0xfffd, out + len);
    at += k;
  }
  return len;
}

int utf8_is_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

/* Bytes that show as themselves: '!'..'~', 0xA1..0xAC, 0xAE..0xFF. */
static int shows_as_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
}

/* The others take 256, 257, ... in byte order. */
uint32_t bytelevel_char(unsigned char b) {
  if (shows_as_itself(b)) return b;
  uint32_t below = 0;
  for (unsigned c = 0; c < b; c++) below += !shows_as_itself(c);
  return 256 + below;
}

int bytelevel_byte(uint32_t cp) {
  if (cp < 256) return shows_as_itself(cp) ? (int)cp : -1;
  uint32_t k = cp - 256;
  for (unsigned b = 0; b < 256; b++)
    if (!shows_as_itself(b) && k-- == 0) return (int)b;
  return -1;
}
