/* test_core.c: plait.core's C functions called in any order and with arguments of any kind end in a
 * result or a one-line Lua error, never a crash: every function of the module with each of a list of
 * argument lists, then 5,000 such calls drawn at random, from before the trace, each stage, another
 * layer's block and after the trace; and the IR it builds stays within the memory limit. */
#include <lauxlib.h>
#include <lualib.h>
#include <string.h>

#include "check.h"
#include "front/core.h"
#include "front/lua_limits.h"

/* Arguments of every kind: none, numbers out of range, strings, tables that are not tensors, tensors of
 * this stage (ids 0 to 3: int tokens, real activations, a scalar loss and its statistics) or of none,
 * dim lists unknown or too long, and the arguments the library passes. */
static const char *const call_all = "local args = {\n"
  "  {}, { nil }, { 1 }, { -1 }, { 2^40 }, { 1e300 }, { 0/0 }, { 'x' }, { {} }, { { id = -1 } },\n"
  "  { { id = 2^31 } }, { { id = 0.5 } }, { { 'b', 'seq' } }, { { 'b', 'b', 'b', 'b', 'b', 'b', 'b' } },\n"
  "  { { 'nope' } }, { 'embed' }, { 'block' }, { 'block_variant' }, { 'head' },\n"
  "  { 'w', { 'hidden' }, 'zeros', 0.02, 'row' }, { 'w2', { 'hidden', 'hidden' }, 'ones', 1, 'column', true },\n"
  "  { 'x', { 'b', 'seq', 'hidden' }, 'real' }, { 'c', { 'hidden' }, { 1, 2, 3, 4 } }, { 'hidden', 4 },\n"
  "  { 'hidden', 5 }, { 'add', { id = 1 }, { id = 1 } }, { 'gelu', 2 }, { 'exp', { id = 2 } },\n"
  "  { 'rms', { id = 2 } }, { 'layer', { id = 1 }, { id = 0 } }, { 'rms', { id = 1 }, nil, nil, 1e-5, -4 },\n"
  "  { { id = 1 }, 2, 2, false, 10000 }, { { id = 2 }, 2, 2, false, 10000 }, { { id = 1 }, 1, { 2, 2 }, 0 },\n"
  "  { { id = 1 }, 1, { 2^40 }, 0 }, { { id = 1 }, 1, { 2 }, 7 }, { { { id = 1 }, { id = 2 } }, 1 },\n"
  "  { { id = 1 }, { id = 1 }, { id = 1 }, 2^33, 1, true, false, 1 }, { { id = 1 }, { id = 1 }, { id = 1 }, 2, 0 },\n"
  "  { { id = 2 }, { id = 0 }, 0 }, { { id = 1 }, { id = 0 }, 2^40 }, { { id = 0 }, { id = 1 } },\n"
  "  { { id = 1 }, { id = 1 }, true }, { { id = 1 }, 0 }, { { id = 1 }, 2^40 }, { { id = 1 }, 1 },\n"
  "  { { hidden = 4, name = 'n', [1] = 2 } }, { '/etc/passwd' }, { 0, 0.5 }, { { id = 1 }, 0.5 },\n"
  "}\n"
  "local core = require 'plait.core'\n"
  "local names = {}\n"
  "for name, f in pairs(core) do if type(f) == 'function' then names[#names + 1] = name end end\n"
  "table.sort(names)\n"
  "local errors = 0\n"
  "local function try(name, a)\n"
  "  local ok, err = pcall(core[name], table.unpack(a, 1, 8))\n"
  "  if not ok and (type(err) ~= 'string' or err:find('\\n')) then errors = errors + 1 end\n"
  "end\n"
  "for _, name in ipairs(names) do\n"
  "  for _, a in ipairs(args) do try(name, a) end\n"
  "end\n"
  "math.randomseed(7)\n"
  "for _ = 1, 5000 do try(names[math.random(#names)], args[math.random(#args)]) end\n"
  "return errors\n";

/* The trace up to a point: dims and inputs, and in each stage begun its inputs and a scalar loss. */
static const char *const prefixes[] = {
    "",
    "core.dim('b', 2) core.dim('seq', 4) core.dim('hidden', 4) core.stage('embed')",
    "core.dim('b', 2) core.dim('seq', 4) core.dim('hidden', 4) core.stage('embed')"
    " core.input('tokens', { 'b', 'seq' }, 'int') core.input('x', { 'b', 'seq', 'hidden' }, 'real')"
    " core.xent({ id = 1 }, { id = 0 }, 0)",
    "core.dim('b', 2) core.dim('seq', 4) core.dim('hidden', 4) core.stage('embed')"
    " core.output({ id = core.input('x', { 'b', 'seq', 'hidden' }, 'real') }) core.stage('block')"
    " core.input('tokens', { 'b', 'seq' }, 'int') core.input('x', { 'b', 'seq', 'hidden' }, 'real')"
    " core.xent({ id = 1 }, { id = 0 }, 0)",
    "core.dim('b', 2) core.dim('seq', 4) core.dim('hidden', 4) core.stage('embed')"
    " core.output({ id = core.input('x', { 'b', 'seq', 'hidden' }, 'real') }) core.stage('block')"
    " core.output({ id = core.input('x', { 'b', 'seq', 'hidden' }, 'real') }) core.stage('block_variant')"
    " core.input('tokens', { 'b', 'seq' }, 'int') core.input('x', { 'b', 'seq', 'hidden' }, 'real')",
    "core.dim('b', 2) core.dim('seq', 4) core.dim('hidden', 4) core.stage('embed')"
    " core.output({ id = core.input('x', { 'b', 'seq', 'hidden' }, 'real') }) core.stage('block')"
    " core.output({ id = core.input('x', { 'b', 'seq', 'hidden' }, 'real') }) core.stage('head')"
    " local t = core.input('tokens', { 'b', 'seq' }, 'int') local x = core.input('x', { 'b', 'seq', 'hidden' }, 'real')"
    " core.output({ id = core.xent({ id = x }, { id = t }, 0) })",
};

/* Runs `prefix`, then every function with every argument list, in a fresh state; returns the errors that
 * were not one-line strings, or -1 when the script itself failed. */
static int call_everything(const char *prefix, Model *m, Builder *b) {
  memset(m, 0, sizeof *m);
  m->vocab_dim = -1;
  m->layers = 2;
  graph_init(&m->embed, "embed");
  graph_init(&m->block, "block");
  graph_init(&m->head, "head");
  memset(b, 0, sizeof *b);
  b->model = m;
  b->tp = 1;
  LuaLimits limits;
  lua_State *L = lua_limits_state(&limits, 0, 64);
  m->budget = m->embed.budget = m->block.budget = m->head.budget = &limits.memory;
  luaL_openlibs(L);
  lua_limits_open(L);
  core_register(L, b);
  lua_pushstring(L, "model.lua");
  lua_setfield(L, LUA_REGISTRYINDEX, CORE_MODEL_FILE);
  char script[4096];
  snprintf(script, sizeof script, "local core = require 'plait.core' %s", prefix);
  int status = luaL_dostring(L, script);
  CHECK(status == LUA_OK, "prefix '%.60s': %s", prefix, status ? lua_tostring(L, -1) : "");
  int errors = -1;
  if (luaL_dostring(L, call_all) == LUA_OK) errors = (int)lua_tointeger(L, -1);
  else printf("     %s\n", lua_tostring(L, -1));
  lua_close(L);
  core_free(b);
  m->budget = m->embed.budget = m->block.budget = m->head.budget = NULL;
  model_free(m);
  return errors;
}

static void test_any_call_in_any_stage(void) {
  Model m;
  Builder b;
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
    int errors = call_everything(prefixes[i], &m, &b);
    CHECK(errors == 0, "after '%.60s': %d errors were not one line (-1: the calls stopped)", prefixes[i], errors);
  }
}

/* Parameters past the memory limit: the IR's growth is refused in one line naming the limit. */
static void test_growth_within_memory(void) {
  Model m;
  Builder b;
  memset(&m, 0, sizeof m);
  graph_init(&m.embed, "embed");
  graph_init(&m.block, "block");
  graph_init(&m.head, "head");
  m.layers = 1;
  memset(&b, 0, sizeof b);
  b.model = &m;
  LuaLimits limits;
  lua_State *L = lua_limits_state(&limits, 0, 16);
  limits.locate = core_user_where;
  m.budget = m.embed.budget = m.block.budget = m.head.budget = &limits.memory;
  luaL_openlibs(L);
  lua_limits_open(L);
  core_register(L, &b);
  int status = luaL_dostring(L, "local core = require 'plait.core' core.dim('h', 4) core.stage('embed')\n"
                                "for i = 1, 1e7 do core.param('p' .. i, { 'h' }, 'zeros', 0, 'replicated') end");
  CHECK(status != LUA_OK && limits.memory.exceeded, "1e7 parameters fit 16 MB");
  CHECK(limits.memory.used <= limits.memory.limit, "%zu bytes used of %zu", limits.memory.used, limits.memory.limit);
  CHECK(m.nparams > 1000 && m.nparams < 100000, "%d parameters made", m.nparams);
  Diag d = {{0}};
  lua_limits_explain(&limits, "model.lua", &d);
  CHECK(strstr(d.msg, "used more than 16 MB of memory") != NULL, "%s", d.msg);
  lua_close(L);
  core_free(&b);
  m.budget = m.embed.budget = m.block.budget = m.head.budget = NULL;
  model_free(&m);
}

/* core.ew_functions is expr.h's list of the ops a model file calls as functions, in its order, each with
 * its arity; core.ew builds each into a node whose expression's root is that op, and refuses the internal
 * ones. */
static void test_ew_functions_are_the_c_list(void) {
  Model m = {0};
  Builder b = {0};
  graph_init(&m.embed, "embed");
  graph_init(&m.block, "block");
  graph_init(&m.head, "head");
  m.layers = 1;
  b.model = &m;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  core_register(L, &b);
  lua_pushstring(L, "model.lua");
  lua_setfield(L, LUA_REGISTRYINDEX, CORE_MODEL_FILE);
  int status = luaL_dostring(L, "core = require 'plait.core' core.dim('b', 2) core.dim('h', 4) core.stage('embed')\n"
                                "x = { id = core.input('x', { 'b', 'h' }, 'real') }\n"
                                "for _, op in ipairs(core.ew_functions) do core.ew(op[1], x, x) end\n"
                                "return #core.ew_functions, (pcall(core.ew, 'gelu_grad', x)), (pcall(core.ew, 'step', x))");
  CHECK(status == LUA_OK, "%s", status ? lua_tostring(L, -1) : "");
  int listed = 0;
  for (int op = 0; op < E_OPCOUNT && status == LUA_OK; op++) {
    if (expr_op_use(op) != EW_FUNCTION) continue;
    const Node *n = listed < m.embed.nnodes ? &m.embed.nodes[listed] : NULL;
    CHECK(n && n->op == OP_EW && (int)n->expr.n[expr_root(&n->expr)].op == op && n->nin == 1,
          "node %d is not %s of x", listed, expr_op_name(op));
    listed++;
  }
  CHECK(status == LUA_OK && lua_tointeger(L, 1) == listed && m.embed.nnodes == listed,
        "%d functions listed, %d nodes, %d in expr.h", (int)lua_tointeger(L, 1), m.embed.nnodes, listed);
  CHECK(!lua_toboolean(L, 2) && !lua_toboolean(L, 3), "an internal op was built from a model file");
  lua_close(L);
  core_free(&b);
  model_free(&m);
}

int main(void) {
  RUN(test_any_call_in_any_stage);
  RUN(test_ew_functions_are_the_c_list);
  RUN(test_growth_within_memory);
  TEST_EXIT();
}
