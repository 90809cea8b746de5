/* diag.c: formatting a one-line diagnostic. */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>

int diag(Diag *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
  return -1;
}
