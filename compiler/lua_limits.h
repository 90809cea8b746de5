/* lua_limits.h: the budget a model file runs under: Lua instructions (a count hook) and Lua memory (the
 * state's allocator), so that a loop that does not end or an allocation without bound ends in one line
 * naming the limit and the flag that raises it. */
#ifndef PLAIT_LUA_LIMITS_H
#define PLAIT_LUA_LIMITS_H

#include <lua.h>
#include <stddef.h>

#include "diag.h"

enum { LUA_DEFAULT_MEMORY_MB = 1024 };
#define LUA_DEFAULT_INSTRUCTIONS 1000000000LL

typedef struct {
  long long instructions, instructions_used; /* the budget, and what ran */
  size_t memory, memory_used;                /* bytes */
  int memory_exceeded;                       /* an allocation was refused */
  const char *what;                          /* "the model file", "the machine file": who ran over */
  const char *raise;                         /* "; raise the limit with --lua-instructions N", or "" */
} LuaLimits;

/* A state whose allocator and count hook keep to the limits (0 for either: its default); the limits
 * speak of the model file and its flags until `what` and `raise` are set. */
lua_State *lua_limits_state(LuaLimits *limits, long long instructions, long long memory_mb);
/* After a failed call: when a limit was the cause, d says which (naming `file` and the flag). */
void lua_limits_explain(const LuaLimits *limits, const char *file, Diag *d);

#endif
