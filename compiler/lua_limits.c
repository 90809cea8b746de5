/* lua_limits.c: an allocator that refuses past a memory budget, and a count hook that raises an error past
 * an instruction budget. */
#include "lua_limits.h"

#include <lauxlib.h>
#include <stdlib.h>

enum { HOOK_EVERY = 10000 }; /* instructions between two calls of the hook */

static void *allocate(void *ud, void *ptr, size_t old_size, size_t new_size) {
  LuaLimits *limits = ud;
  size_t old = ptr ? old_size : 0;
  if (new_size == 0) {
    free(ptr);
    limits->memory_used -= old;
    return NULL;
  }
  if (new_size > old && limits->memory_used - old + new_size > limits->memory) {
    limits->memory_exceeded = 1;
    return NULL;
  }
  void *grown = realloc(ptr, new_size);
  if (grown) limits->memory_used = limits->memory_used - old + new_size;
  return grown;
}

static LuaLimits *limits_of(lua_State *L) {
  void *ud;
  lua_getallocf(L, &ud);
  return ud;
}

/* Past the budget: an error at the line running now (the hook's own frame is that function's). */
static void count(lua_State *L, lua_Debug *ar) {
  LuaLimits *limits = limits_of(L);
  limits->instructions_used += HOOK_EVERY;
  if (limits->instructions_used <= limits->instructions) return;
  lua_getinfo(L, "Sl", ar);
  lua_pushfstring(L, "%s:%d: %s ran more than %I Lua instructions (a loop that does not end?)%s", ar->short_src,
                  ar->currentline, limits->what, (lua_Integer)limits->instructions, limits->raise);
  lua_error(L);
}

lua_State *lua_limits_state(LuaLimits *limits, long long instructions, long long memory_mb) {
  limits->instructions = instructions > 0 ? instructions : LUA_DEFAULT_INSTRUCTIONS;
  limits->memory = (size_t)(memory_mb > 0 ? memory_mb : LUA_DEFAULT_MEMORY_MB) << 20;
  limits->instructions_used = 0, limits->memory_used = 0, limits->memory_exceeded = 0;
  limits->what = "the model file", limits->raise = "; raise the limit with --lua-instructions N";
  lua_State *L = lua_newstate(allocate, limits);
  if (L) lua_sethook(L, count, LUA_MASKCOUNT, HOOK_EVERY);
  return L;
}

void lua_limits_explain(const LuaLimits *limits, const char *file, Diag *d) {
  if (limits->memory_exceeded)
    diag(d, "%s: the model file used more than %zu MB of Lua memory; raise the limit with --lua-memory MB", file,
         limits->memory >> 20);
}
