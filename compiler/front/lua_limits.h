/* lua_limits.h: the budget a model file runs under: Lua instructions (a count hook; the work of
 * library calls that run no Lua, and every byte allocated, are counted as instructions too) and
 * memory (the state's allocator, and the IR its tracing builds), so that a loop that does not
 * end or an allocation without bound ends in one line naming the limit, the model file's line
 * and the flag that raises it. A limit that has run out stays out: every allocation is refused
 * and every Lua instruction raises the error again, so that no pcall, error handler or coroutine
 * can carry on past it. */
#ifndef PLAIT_LUA_LIMITS_H
#define PLAIT_LUA_LIMITS_H

#include <lua.h>
#include <stddef.h>

#include "ir/budget.h"
#include "ir/diag.h"

enum { LUA_DEFAULT_MEMORY_MB = 1024 };
#define LUA_DEFAULT_INSTRUCTIONS 1000000000LL

typedef struct {
  long long instructions; /* the budget */
  double used;            /* instructions run, with the work counted as instructions */
  int instructions_exceeded;
  MemoryBudget memory;    /* bytes */
  /* "file:line" the Lua code was at when last seen (a hook), or ran out (blamed) */
  char where[256];
  int blamed;             /* where is the line a limit ran out at */
  char cause[200];        /* what spent the instructions, when a library call did ("": a loop) */
  int raising;            /* the limit's error is being made: its message may be allocated */
  /* the state's main thread, whose hook an allocation past the limit sets off */
  lua_State *main;
  const char *what;       /* "the model file", "the machine file": who ran over */
  const char *raise;      /* "; raise the limit with --lua-instructions N", or "" */
  /* "file:line" of the code a limit is blamed on (the model file's innermost frame); NULL: the
   * running function's */
  void (*locate)(lua_State *L, char *buf, int len);
} LuaLimits;

/* A state whose allocator and count hook keep to the limits (0 for either: its default); the limits
 * speak of the model file and its flags until `what`, `raise` and `locate` are set. */
lua_State *lua_limits_state(LuaLimits *limits, long long instructions, long long memory_mb);
/* Makes require("plait.limits") return the sandbox's meter: charge(work, function, unit) counts
 * the work of a library call as instructions (raising the limit's error past the budget),
 * pattern(subject, pattern, function) charges the bound of lua_patterns.h for
 * string.find/match/gsub/gmatch, caught() the work of catching an error (Lua shrinks the whole
 * stack), and exceeded() tells whether a limit has run out. */
void lua_limits_open(lua_State *L);
/* Raises the error of the limit that has run out (for C code whose growth the memory budget
 * refused). */
int lua_limits_error(lua_State *L);
/* After a failed call: when a limit was the cause, d says which (naming where, or `file`, and
 * the flag). */
void lua_limits_explain(const LuaLimits *limits, const char *file, Diag *d);

#endif
