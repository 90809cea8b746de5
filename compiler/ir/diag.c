/* diag.c: formatting one-line diagnostics, and lists of them; a message too long for its line keeps
 * its cause and fix whole, long names losing their middles. */
#include "ir/diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"

/* The longest run of s without a space: a path or a name, the part of a message that may be long.
 */
static size_t longest_word(const char *s, size_t *start) {
  size_t best = 0;
  for (size_t i = 0; s[i];) {
    size_t n = strcspn(s + i, " ");
    if (n > best) best = n, *start = i;
    i += n + (s[i + n] == ' ');
  }
  return best;
}

/* text (of length n) into out[size], whole when it fits; otherwise its longest words lose their
 * middles ("...") until it does, so that the cause and the fix around them stay whole. */
static void fit(char *text, size_t n, char *out, size_t size) {
  static const char dots[] = "...";
  while (n >= size) {
    size_t start = 0, len = longest_word(text, &start), cut = n - size + 1 + 3;
    if (len < 16) break;
    if (cut > len - 8) cut = len - 8;
    size_t from = start + (len - cut) / 2;
    memcpy(text + from, dots, 3);
    memmove(text + from + 3, text + from + cut, n - from - cut + 1);
    n -= cut - 3;
  }
  if (n < size) {
    memcpy(out, text, n + 1);
    return;
  }
  size_t head = (size - 4) / 2, tail = size - 4 - head; /* words too many: the middle goes */
  snprintf(out, size, "%.*s...%s", (int)head, text, text + n - tail);
}

/* The message of fmt into out[size], fitted. */
static void format_fitted(char *out, size_t size, const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(out, size, fmt, ap);
  if (n >= 0 && (size_t)n >= size) {
    char *whole = malloc((size_t)n + 1);
    if (whole) {
      vsnprintf(whole, (size_t)n + 1, fmt, again);
      fit(whole, (size_t)n, out, size);
      free(whole);
    }
  }
  va_end(again);
}

int diag(Diag *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  format_fitted(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
  return -1;
}

void diag_add(DiagList *l, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  format_fitted(line, sizeof line, fmt, ap);
  va_end(ap);
  for (char *c = line; *c; c++)
    if (*c == '\n') *c = ' ';
  if (l->count == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->lines = realloc(l->lines, sizeof *l->lines * (size_t)l->cap);
  }
  int n = snprintf(NULL, 0, "%s", line);
  l->lines[l->count] = malloc((size_t)n + 1);
  snprintf(l->lines[l->count++], (size_t)n + 1, "%s", line);
}

void diag_print(const char *line) {
  fprintf(stderr, "plait: ");
  escape_write(ESC_TEXT, line, stderr);
  fprintf(stderr, "\n");
}

int diag_report(const DiagList *l) {
  enum { SHOWN = 20 };
  for (int i = 0; i < l->count && i < SHOWN; i++) diag_print(l->lines[i]);
  if (l->count > SHOWN) fprintf(stderr, "plait: ... and %d more\n", l->count - SHOWN);
  return l->count;
}

void diag_list_free(DiagList *l) {
  for (int i = 0; i < l->count; i++) free(l->lines[i]);
  free(l->lines);
  l->lines = NULL;
  l->count = l->cap = 0;
}
