/* jsonline.c: a strict reader of one JSON object a line, keeping the numbers of named members. */
#include "jsonline.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *text, *at, *end;
  char *why;
  size_t size;
} Cursor;

static int refuse(Cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "column N: ..." into why, N counting from 1 at the byte where reading stopped. */
static int refuse(Cursor *c, const char *fmt, ...) {
  int n = snprintf(c->why, c->size, "column %ld: ", (long)(c->at - c->text) + 1);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < c->size) vsnprintf(c->why + n, c->size - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

static void skip_space(Cursor *c) {
  while (c->at < c->end && (*c->at == ' ' || *c->at == '\t' || *c->at == '\r')) c->at++;
}

static int peek(const Cursor *c) { return c->at < c->end ? (unsigned char)*c->at : -1; }

static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }

static int is_hex(int ch) {
  return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

static int read_escape(Cursor *c) {
  int ch = peek(c);
  c->at++;
  if (ch >= 0 && strchr("\"\\/bfnrt", ch)) return 0;
  if (ch != 'u') return refuse(c, "unknown escape in a string (JSON has \\\" \\\\ \\/ \\b \\f "
                                  "\\n \\r \\t \\uXXXX)");
  for (int i = 0; i < 4; i++, c->at++)
    if (!is_hex(peek(c))) return refuse(c, "\\u takes four hexadecimal digits");
  return 0;
}

/* A string from its opening quote; *start and *length give its text as written. */
static int read_string(Cursor *c, const char **start, size_t *length) {
  c->at++;
  *start = c->at;
  for (;;) {
    int ch = peek(c);
    if (ch < 0) return refuse(c, "the string is not closed before the line ends");
    if (ch == '"') break;
    if (ch < 0x20) return refuse(c, "a control character inside a string (write it escaped)");
    c->at++;
    if (ch == '\\' && read_escape(c)) return -1;
  }
  *length = (size_t)(c->at - *start);
  c->at++;
  return 0;
}

static void skip_digits(Cursor *c) {
  while (is_digit(peek(c))) c->at++;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, finite as a double. */
static int read_number(Cursor *c, double *value) {
  const char *start = c->at;
  if (peek(c) == '-') c->at++;
  if (!is_digit(peek(c))) return refuse(c, "expected a value (a number, string, object, array, "
                                           "true, false or null)");
  if (peek(c) == '0') c->at++;
  else skip_digits(c);
  if (peek(c) == '.') {
    c->at++;
    if (!is_digit(peek(c))) return refuse(c, "a digit must follow the decimal point");
    skip_digits(c);
  }
  if (peek(c) == 'e' || peek(c) == 'E') {
    c->at++;
    if (peek(c) == '+' || peek(c) == '-') c->at++;
    if (!is_digit(peek(c))) return refuse(c, "a digit must follow the exponent's 'e'");
    skip_digits(c);
  }
  char digits[64];
  size_t n = (size_t)(c->at - start);
  if (n >= sizeof digits) return refuse(c, "a number of more than %zu characters", n - 1);
  memcpy(digits, start, n);
  digits[n] = 0;
  *value = strtod(digits, NULL);
  if (!isfinite(*value)) {
    c->at = start;
    return refuse(c, "the number %s is beyond a double's range", digits);
  }
  return 0;
}

static int read_literal(Cursor *c) {
  static const char *const words[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if ((size_t)(c->end - c->at) >= n && memcmp(c->at, words[i], n) == 0) {
      c->at += n;
      return 0;
    }
  }
  double ignored;
  return read_number(c, &ignored);
}

static int read_value(Cursor *c, int depth, double *number, int *is_number);

/* Members or elements up to the closing bracket; for an object, each key, then ':'. A wanted
 * member of a top-level object is kept in fields. */
static int read_items(Cursor *c, int depth, char close, JsonField *fields, int nfields) {
  c->at++;
  skip_space(c);
  if (peek(c) == close) return c->at++, 0;
  for (;;) {
    const char *key = NULL;
    size_t length = 0;
    if (close == '}') {
      skip_space(c);
      if (peek(c) != '"') return refuse(c, "expected a member's key, a string in double quotes");
      if (read_string(c, &key, &length)) return -1;
      skip_space(c);
      if (peek(c) != ':') return refuse(c, "expected ':' after the key");
      c->at++;
    }
    double number = 0;
    int is_number = 0;
    if (read_value(c, depth + 1, &number, &is_number)) return -1;
    for (int i = 0; key && i < nfields; i++) {
      if (strlen(fields[i].key) != length || memcmp(fields[i].key, key, length) != 0) continue;
      if (!is_number) return refuse(c, "\"%s\" is not a number", fields[i].key);
      fields[i].value = number, fields[i].found = 1;
    }
    skip_space(c);
    if (peek(c) == close) return c->at++, 0;
    if (peek(c) != ',') return refuse(c, "expected ',' or '%c'", close);
    c->at++;
  }
}

/* Any value; a number's value goes to *number (and *is_number is set). */
static int read_value(Cursor *c, int depth, double *number, int *is_number) {
  skip_space(c);
  if (depth > JSONLINE_MAX_DEPTH)
    return refuse(c, "nested more than %d deep", JSONLINE_MAX_DEPTH);
  int ch = peek(c);
  if (ch == '{') return read_items(c, depth, '}', NULL, 0);
  if (ch == '[') return read_items(c, depth, ']', NULL, 0);
  if (ch == '"') {
    const char *ignored;
    size_t length;
    return read_string(c, &ignored, &length);
  }
  if (ch == '-' || is_digit(ch)) return *is_number = 1, read_number(c, number);
  return read_literal(c);
}

int jsonline_read(const char *text, size_t n, JsonField *fields, int nfields, char *why,
                  size_t size) {
  Cursor c = {text, text, text + n, why, size};
  for (int i = 0; i < nfields; i++) fields[i].found = 0;
  skip_space(&c);
  if (peek(&c) != '{') return refuse(&c, "expected '{': each line is one JSON object");
  if (read_items(&c, 1, '}', fields, nfields)) return -1;
  skip_space(&c);
  if (c.at != c.end) return refuse(&c, "text after the object's closing '}'");
  return 0;
}
