/* lua_limits.c: an allocator that counts bytes against a memory budget and as work, a count hook
 * that raises an error past the instruction budget, and the meter the sandbox charges library
 * calls to. */
#include "front/lua_limits.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "front/lua_patterns.h"

enum {
  HOOK_EVERY = 10000,        /* instructions between two calls of the hook */
  BYTES_PER_INSTRUCTION = 8 /* allocating this many bytes counts as one instruction */
};

static LuaLimits *limits_of(lua_State *L) {
  void *ud;
  lua_getallocf(L, &ud);
  return ud;
}

static int ran_out(const LuaLimits *limits) {
  return limits->instructions_exceeded || limits->memory.exceeded;
}

static double left(const LuaLimits *limits) { return (double)limits->instructions - limits->used; }

static void count(lua_State *L, lua_Debug *ar);

/* Growth counts as work, and is refused once a limit has run out (but for the limit's own
 * message). The allocation that runs the instructions out is made, and the main thread's next
 * instruction raises the error (there the model file's line is known; an allocation cannot raise
 * it). */
static void *allocate(void *ud, void *ptr, size_t old_size, size_t new_size) {
  LuaLimits *limits = ud;
  size_t old = ptr ? old_size : 0;
  if (new_size > old && !limits->raising) {
    if (ran_out(limits)) return NULL;
    limits->used += (double)(new_size - old) / BYTES_PER_INSTRUCTION;
    if (left(limits) < 0) {
      limits->instructions_exceeded = 1;
      if (limits->main) lua_sethook(limits->main, count, LUA_MASKCOUNT, 1);
    }
  }
  return budget_realloc(&limits->memory, ptr, old_size, new_size);
}

/* Remembers where the Lua code is: ar is the hook's frame, or NULL for the caller of a C
 * function. */
static void note_where(lua_State *L, LuaLimits *limits, lua_Debug *ar) {
  if (limits->locate) {
    limits->locate(L, limits->where, sizeof limits->where);
    return;
  }
  lua_Debug caller;
  if (!ar && !lua_getstack(L, 1, &caller)) return;
  if (!ar) ar = &caller;
  lua_getinfo(L, "Sl", ar);
  snprintf(limits->where, sizeof limits->where, "%s:%d", ar->short_src, ar->currentline);
}

static void limit_message(const LuaLimits *limits, const char *file, char *buf, size_t len) {
  const char *where = limits->where[0] ? limits->where : file;
  if (limits->memory.exceeded)
    snprintf(buf, len,
             "%s: %s used more than %zu MB of memory (its Lua values and the model it traces); "
             "raise the limit with --lua-memory MB",
             where, limits->what, limits->memory.limit >> 20);
  else
    snprintf(buf, len, "%s: %s ran more than %lld Lua instructions (%s)%s", where, limits->what,
             limits->instructions, limits->cause[0] ? limits->cause : "a loop that does not end?",
             limits->raise);
}

/* The limit's error, blamed on where; from now on the hook fires at every instruction of this
 * thread, raising it again. */
static int raise_limit(lua_State *L, LuaLimits *limits) {
  char msg[sizeof(Diag)];
  limits->blamed = 1;
  limit_message(limits, "?", msg, sizeof msg);
  lua_sethook(L, count, LUA_MASKCOUNT, 1);
  limits->raising = 1;
  lua_pushstring(L, msg);
  limits->raising = 0;
  return lua_error(L);
}

static void count(lua_State *L, lua_Debug *ar) {
  LuaLimits *limits = limits_of(L);
  if (!limits->blamed) note_where(L, limits, ar);
  limits->used += lua_gethookcount(L);
  if (left(limits) < 0) limits->instructions_exceeded = 1;
  if (ran_out(limits)) raise_limit(L, limits);
}

/* Counts `work` instructions; past the budget, the limit's error, blamed on the call (cause())
 * when its work alone is more than half the budget, else on the code that ran before it. */
static int spend(lua_State *L, double work,
                 void (*cause)(lua_State *L, double work, char *buf, size_t len)) {
  LuaLimits *limits = limits_of(L);
  if (ran_out(limits)) return raise_limit(L, limits);
  if (!(work >= 0)) work = 0;
  if (work <= left(limits)) {
    limits->used += work;
    return 0;
  }
  limits->instructions_exceeded = 1;
  if (work > (double)limits->instructions / 2) cause(L, work, limits->cause, sizeof limits->cause);
  if (!limits->blamed) note_where(L, limits, NULL);
  return raise_limit(L, limits);
}

/* The call charge() was told of: its function (argument 2) and the unit of its work (argument
 * 3). */
static void given_cause(lua_State *L, double work, char *buf, size_t len) {
  snprintf(buf, len, "%s of %.3g %s", luaL_optstring(L, 2, "a library call"), work,
           luaL_optstring(L, 3, "steps"));
}

/* limits.charge(work, function, unit): a library call's work, in instructions. */
static int l_charge(lua_State *L) {
  spend(L, luaL_checknumber(L, 1), given_cause);
  return 0;
}

static const char *const pattern_functions[] = {"find", "match", "gsub", "gmatch", NULL};

static void pattern_cause(lua_State *L, double steps, char *buf, size_t len) {
  size_t n;
  lua_tolstring(L, 1, &n);
  snprintf(buf, len,
           "string.%s: the pattern may take more than %.3g steps on a subject of %zu characters; "
           "simplify the pattern or shorten the subject",
           pattern_functions[luaL_checkoption(L, 3, NULL, pattern_functions)], steps, n);
}

/* limits.pattern(subject, pattern, function): the bound on string.<function>'s steps. */
static int l_pattern(lua_State *L) {
  static const PatternUse uses[] = {PATTERN_ONCE, PATTERN_ONCE, PATTERN_EVERY, PATTERN_ITERATE};
  size_t n, plen;
  const char *subject = luaL_checklstring(L, 1, &n), *pattern = luaL_checklstring(L, 2, &plen);
  PatternUse use = uses[luaL_checkoption(L, 3, NULL, pattern_functions)];
  spend(L, pattern_steps(subject, n, pattern, plen, use, left(limits_of(L))), pattern_cause);
  return 0;
}

/* At least the frames on L's stack and at most twice as many: a level doubled until lua_getstack
 * (which walks the stack from the top) finds no frame there. */
static double frames_bound(lua_State *L) {
  lua_Debug ar;
  double level = 1;
  while (lua_getstack(L, (int)level, &ar)) level *= 2;
  return level;
}

static void caught_cause(lua_State *L, double work, char *buf, size_t len) {
  (void)L;
  snprintf(buf, len, "catching an error under %.3g calls", work / 3);
}

/* limits.caught(): the work of an error caught at this depth: Lua walks the whole stack to
 * shrink it, and bounding the depth walked it twice. */
static int l_caught(lua_State *L) {
  spend(L, 3 * frames_bound(L), caught_cause);
  return 0;
}

static int l_exceeded(lua_State *L) {
  lua_pushboolean(L, ran_out(limits_of(L)));
  return 1;
}

static int open_limits(lua_State *L) {
  static const luaL_Reg functions[] = {{"charge", l_charge},
                                       {"pattern", l_pattern},
                                       {"caught", l_caught},
                                       {"exceeded", l_exceeded},
                                       {NULL, NULL}};
  luaL_newlib(L, functions);
  return 1;
}

void lua_limits_open(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, open_limits);
  lua_setfield(L, -2, "plait.limits");
  lua_pop(L, 1);
}

int lua_limits_error(lua_State *L) {
  LuaLimits *limits = limits_of(L);
  if (!limits->blamed) note_where(L, limits, NULL);
  return raise_limit(L, limits);
}

lua_State *lua_limits_state(LuaLimits *limits, long long instructions, long long memory_mb) {
  memset(limits, 0, sizeof *limits);
  limits->instructions = instructions > 0 ? instructions : LUA_DEFAULT_INSTRUCTIONS;
  limits->memory.limit = (size_t)(memory_mb > 0 ? memory_mb : LUA_DEFAULT_MEMORY_MB) << 20;
  limits->what = "the model file", limits->raise = "; raise the limit with --lua-instructions N";
  lua_State *L = lua_newstate(allocate, limits);
  if (L) lua_sethook(L, count, LUA_MASKCOUNT, HOOK_EVERY);
  limits->main = L;
  return L;
}

void lua_limits_explain(const LuaLimits *limits, const char *file, Diag *d) {
  if (ran_out(limits)) limit_message(limits, file, d->msg, sizeof d->msg);
}
