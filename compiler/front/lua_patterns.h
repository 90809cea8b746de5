/* lua_patterns.h: an upper bound on the work of Lua's pattern matcher (string.find, match,
 * gmatch and gsub), known before it runs: a call whose bound is past what the model file may
 * still run is refused instead of backtracking for ever. */
#ifndef PLAIT_LUA_PATTERNS_H
#define PLAIT_LUA_PATTERNS_H

#include <stddef.h>

typedef enum {
  PATTERN_ONCE,    /* string.find and string.match: one match, '^' anchors it */
  PATTERN_EVERY,   /* string.gsub: every match, '^' anchors the first */
  PATTERN_ITERATE, /* string.gmatch: every match, '^' no anchor */
} PatternUse;

/* The most steps (character tests and tries) matching `pattern` against `subject` can take, or a
 * bound past `limit` when that is all it can tell without spending more than `limit` steps
 * itself. */
double pattern_steps(const char *subject, size_t n, const char *pattern, size_t plen,
                     PatternUse use, double limit);

#endif
