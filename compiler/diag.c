/* diag.c: formatting one-line diagnostics, and lists of them. */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "escape.h"

int diag(Diag *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
  return -1;
}

void diag_add(DiagList *l, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
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
