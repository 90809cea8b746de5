/* escape.h: text that plait did not write itself (names and values from model files, machine files and
 * checkpoints, paths) on its way into what plait writes: one escaping per format, so that such text stays
 * data in the generated C, the JSON, XML and Graphviz files and on a terminal; and the check for names
 * that must be plain, which are refused where they enter. */
#ifndef PLAIT_ESCAPE_H
#define PLAIT_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
  ESC_C_STRING,  /* a C string literal, quotes included: every byte kept ("\"", "\\", "\?", octal) */
  ESC_C_COMMENT, /* text inside a C comment: no "*" "/" pair, no "??", no byte outside printable ASCII */
  ESC_JSON,      /* a JSON string, quotes included; a byte that is not UTF-8 becomes U+FFFD */
  ESC_XML,       /* XML text or an attribute's value (either quote); control characters shown as \xNN */
  ESC_DOT,       /* text inside a Graphviz quoted string; control characters shown as \\xNN */
  ESC_TEXT,      /* text for a terminal: control characters, C1 controls, bidirectional overrides and
                    bytes that are not UTF-8 shown as \n, \xNN or \uNNNN */
} EscFormat;

/* The bytes a text of n bytes may take once escaped, its quotes and the terminating NUL included. */
#define ESCAPED_SIZE(n) (6 * (n) + 3)

/* text escaped for the format into out, of size bytes (a text too long for it is cut before a whole
 * character, the closing quote kept); returns out, so that it may stand as a printf argument. */
const char *escape(EscFormat format, const char *text, char *out, size_t size);

/* Writes text escaped for the format to f, whatever its length. */
void escape_write(EscFormat format, const char *text, FILE *f);

/* Whether text is UTF-8 throughout: what a JSON string carries byte for byte. */
int escape_is_utf8(const char *text);

/* Whether name is plain: 1 to `most` characters, each an ASCII letter or digit, '_', '.' or '-'. Names
 * that become identifiers or keys (a model's, its parameters', constants', dims', config keys, a
 * machine's) must be. */
int escape_plain_name(const char *name, size_t most);

#endif
