/* escape.c: each output format's escaping of text plait did not write itself, and the plain-name check. */
#include "escape.h"

#include <string.h>

/* Where escaped text goes: a buffer of `size` bytes, `reserve` of them kept for what must end it (the
 * closing quote, the NUL), or a file. */
typedef struct {
  char *out;
  size_t size, len, reserve;
  int full;
  FILE *file;
} Sink;

static void put(Sink *s, const char *piece, size_t n) {
  if (s->file) {
    fwrite(piece, 1, n, s->file);
    return;
  }
  if (s->full || s->len + n + s->reserve > s->size) {
    s->full = 1;
    return;
  }
  memcpy(s->out + s->len, piece, n);
  s->len += n;
}

/* The length (1 to 4) of the UTF-8 character that starts at s, its code point in *cp; 0 where s starts
 * none (a stray byte, an overlong form, a surrogate, a value past U+10FFFF). */
static int utf8_char(const unsigned char *s, unsigned *cp) {
  static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
  unsigned c = s[0];
  int n = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
  if (n == 0) return 0;
  unsigned v = n == 1 ? c : c & (0x7fu >> n);
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    v = v << 6 | (s[i] & 0x3fu);
  }
  if (v < least[n] || v > 0x10ffff || (v >= 0xd800 && v < 0xe000)) return 0;
  *cp = v;
  return n;
}

/* Characters a terminal, an XML file or a Graphviz label must not get as themselves: control characters
 * (C0, DEL, C1), the marks and overrides that reorder text on screen, XML's non-characters. */
static int must_show(unsigned cp) {
  return cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfffe || cp == 0xffff;
}

/* How such a character, or a stray byte, is shown: \n, \t, \r, \xNN (a byte), \uNNNN (a code point). */
static int visible(unsigned cp, int stray, char *piece) {
  if (!stray && cp == '\n') return snprintf(piece, 8, "\\n");
  if (!stray && cp == '\t') return snprintf(piece, 8, "\\t");
  if (!stray && cp == '\r') return snprintf(piece, 8, "\\r");
  if (stray || cp < 0x80) return snprintf(piece, 8, "\\x%02x", cp);
  return snprintf(piece, 8, "\\u%04x", cp);
}

/* One byte of a C string literal or comment; the next byte decides the pairs a comment must not hold
 * ("*" "/", "/" "*", and "??", which begins a trigraph). */
static void c_byte(EscFormat format, const unsigned char *c, Sink *s) {
  char piece[8];
  int printable = *c >= 0x20 && *c < 0x7f;
  int pair = (c[0] == '*' && c[1] == '/') || (c[0] == '/' && c[1] == '*') || (c[0] == '?' && c[1] == '?');
  if (format == ESC_C_STRING && (*c == '"' || *c == '\\' || *c == '?')) put(s, piece, (size_t)snprintf(piece, 8, "\\%c", *c));
  else if (printable && !(format == ESC_C_COMMENT && pair)) put(s, (const char *)c, 1);
  else put(s, piece, (size_t)snprintf(piece, 8, "\\%03o", *c));
}

static int json_piece(unsigned cp, int stray, char *piece) {
  static const char named[] = {'\b', 'b', '\f', 'f', '\n', 'n', '\r', 'r', '\t', 't', '"', '"', '\\', '\\', 0};
  if (stray) return snprintf(piece, 8, "\\ufffd");
  for (int i = 0; named[i]; i += 2)
    if (cp == (unsigned char)named[i]) return snprintf(piece, 8, "\\%c", named[i + 1]);
  if (cp < 0x20 || cp == 0x7f) return snprintf(piece, 8, "\\u%04x", cp);
  return 0;
}

static int xml_piece(unsigned cp, char *piece) {
  static const char *const entities[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
  const char *at = cp < 0x80 ? strchr("&<>\"'", (int)cp) : NULL;
  return cp && at ? snprintf(piece, 8, "%s", entities[at - "&<>\"'"]) : 0;
}

/* One character (or stray byte) of a JSON, XML, Graphviz or terminal text; returns the bytes it took. */
static int unicode_char(EscFormat format, const unsigned char *c, Sink *s) {
  unsigned cp = *c;
  int n = utf8_char(c, &cp), stray = n == 0;
  char piece[16];
  int len = 0;
  if (format == ESC_JSON) len = json_piece(cp, stray, piece);
  else if (stray || must_show(cp)) {
    piece[0] = '\\'; /* in a Graphviz string the backslash that shows it is itself escaped */
    len = (format == ESC_DOT) + visible(cp, stray, piece + (format == ESC_DOT));
  } else if (format == ESC_XML) {
    len = xml_piece(cp, piece);
  } else if (format == ESC_DOT && (cp == '"' || cp == '\\')) {
    len = snprintf(piece, 8, "\\%c", cp);
  }
  if (len) put(s, piece, (size_t)len);
  else put(s, (const char *)c, (size_t)n);
  return stray ? 1 : n;
}

static int quoted(EscFormat format) { return format == ESC_C_STRING || format == ESC_JSON; }

static void escape_into(EscFormat format, const char *text, Sink *s) {
  if (quoted(format)) put(s, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)text; *c && !s->full;) {
    if (format == ESC_C_STRING || format == ESC_C_COMMENT) c_byte(format, c++, s);
    else c += unicode_char(format, c, s);
  }
  s->full = 0;
  s->reserve = 1;
  if (quoted(format)) put(s, "\"", 1);
}

const char *escape(EscFormat format, const char *text, char *out, size_t size) {
  if (size == 0) return out;
  Sink s = {out, size, 0, quoted(format) ? 2 : 1, 0, NULL};
  escape_into(format, text, &s);
  out[s.len] = 0;
  return out;
}

void escape_write(EscFormat format, const char *text, FILE *f) {
  Sink s = {NULL, 0, 0, 0, 0, f};
  escape_into(format, text, &s);
}

int escape_is_utf8(const char *text) {
  unsigned cp;
  for (const unsigned char *c = (const unsigned char *)text; *c;) {
    int n = utf8_char(c, &cp);
    if (n == 0) return 0;
    c += n;
  }
  return 1;
}

int escape_plain_name(const char *name, size_t most) {
  size_t n = strlen(name);
  if (n == 0 || n > most) return 0;
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("_.-", *c)))
      return 0;
  return 1;
}
