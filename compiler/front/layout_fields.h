/* layout_fields.h: the parallel layout's settings as one table (key, flag, kind, default, allowed
 * words, how plan's text and tune show each), which the flags, the model file's parallel table,
 * parallel.c and the printers of plan and tune all walk: a setting added to the table is taken and
 * shown by all. */
#ifndef PLAIT_LAYOUT_FIELDS_H
#define PLAIT_LAYOUT_FIELDS_H

#include <stddef.h>

#include "front/parallel.h"

typedef enum {
  FIELD_SIZE,   /* int from 1 to LAYOUT_MOST_SIZE: --tp 2; tp = 2 */
  FIELD_CHOICE, /* int, the place of its word among `words`: --recompute full; recompute = "full" */
  FIELD_SWITCH, /* int 0 or 1, shown by `words`: a flag without a value; a boolean in the model file
                 */
  FIELD_NAME    /* char[]: a name or a file; `words`, when given, are the names it takes */
} LayoutFieldKind;

/* How plait tune shows a setting: not at all; in its flags, where not at the default (tune keeps it
 * as given); or in its flags, as a column of its table and a key of its JSON (a dimension it
 * searches). */
typedef enum { TUNE_HIDDEN, TUNE_PINNED, TUNE_SEARCHED } TuneShow;

typedef struct {
  const char *key;      /* the model file's parallel.KEY, and the key in plan's and tune's JSON */
  const char *flag;     /* plan's, build's and tune's */
  LayoutFieldKind kind;
  size_t offset, size;  /* its field in Parallel */
  const char *words[4]; /* see LayoutFieldKind */
  const char *standard; /* the default as the flag spells it; NULL: parallel_defaults derives it */
  const char *text;     /* in plan's text: a format of one %s, the value */
  int in_shape;         /* plan's text has it in the line of sizes, not in the list of the others */
  TuneShow tune;
  struct {                /* TUNE_SEARCHED: its column of tune's table */
    int place, width;     /* from 1; a negative width aligns left */
    const char *title;    /* NULL: the key */
    const char *words[4]; /* a choice's or switch's words there; none: its own */
  } column;
  const char *alias;      /* another spelling of the flag (Megatron-LM's), or NULL */
} LayoutField;

/* LAYOUT_VALUE_LEN: room for any value spelled out, a name's at most. */
enum { LAYOUT_FIELDS = 14, LAYOUT_MOST_SIZE = 1 << 24, LAYOUT_VALUE_LEN = 256 };
extern const LayoutField layout_fields[LAYOUT_FIELDS];

/* The int of a size, choice or switch, or the text of a name, in a Parallel. */
#define LAYOUT_INT(field, p) (*(int *)((char *)(p) + (field)->offset))
#define LAYOUT_NAME(field, p) ((char *)(p) + (field)->offset)

/* The field of a flag ("--tp", or its alias) or of a key ("tp"); NULL if none. */
const LayoutField *layout_field_by_flag(const char *flag);
const LayoutField *layout_field_by_key(const char *key);
/* A size from its text; -1 if the text is none. The place of a word among words; -1 if none. */
int layout_field_size(const char *text);
int layout_field_word(const char *const words[4], const char *word);

typedef enum { FIELD_SET, FIELD_BAD_VALUE, FIELD_TOO_LONG } LayoutFieldSet;
/* Sets the field of p from text spelled as its flag takes it ("3", "full", "on"); a name is checked
 * against its words by parallel_check, wherever it came from. */
LayoutFieldSet layout_field_set(const LayoutField *field, const char *text, Parallel *p);
/* The field of p as its flag spells it, a choice or a switch by `words` (none: its own). */
const char *layout_field_value(const LayoutField *field, const Parallel *p,
                               const char *const words[4], char *buf, size_t len);
/* The field's words as a sentence lists them, each between `before` and `after`: "none or full". */
const char *layout_field_words(const LayoutField *field, const char *before, const char *after,
                               char *buf, size_t len);

#endif
