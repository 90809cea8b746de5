/* jsonline.h: one line of a JSON-lines file read strictly (RFC 8259, by text/json.h's bounded
 * reader): it must be one object, and the numbers of the top-level members the caller names are
 * taken from it. Nesting is bounded, so that a stranger's file cannot exhaust the stack. */
#ifndef PLAIT_JSONLINE_H
#define PLAIT_JSONLINE_H

#include <stddef.h>

enum { JSONLINE_MAX_DEPTH = 32 };

/* A top-level member wanted as a number: found is set when the line has it (the last one counts
 * when a key repeats). */
typedef struct {
  const char *key; /* plain ASCII: compared with the key's text as written */
  double value;
  int found;
} JsonField;

/* Checks that text (its n bytes) is one JSON object, fills fields[0..nfields), and returns 0;
 * or returns -1 with why ("not JSON at byte 12: expected ':' after a key") when the line is not
 * such an object or a wanted member is not a number (every number is finite). */
int jsonline_read(const char *text, size_t n, JsonField *fields, int nfields, char *why,
                  size_t size);

#endif
