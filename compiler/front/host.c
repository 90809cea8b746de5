/* host.c: the embedded Lua: lib/plait from inside the binary, the model file in its sandbox and
 * under its limits, its parallel table, and the trace of its three stages into the IR. */
#include "front/host.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"
#include "front/layout_fields.h"
#include "front/lua_files.h"
#include "front/lua_limits.h"
#include "front/lualib.h"

/* package.preload loader for one embedded module (upvalue: its index in plait_lua_sources). */
static int load_embedded(lua_State *L) {
  const LuaSource *s = &plait_lua_sources[lua_tointeger(L, lua_upvalueindex(1))];
  char chunk[128];
  snprintf(chunk, sizeof chunk, "@%s", s->path);
  if (luaL_loadbuffer(L, s->text, s->len, chunk) != LUA_OK) return lua_error(L);
  lua_pushstring(L, s->module);
  lua_call(L, 1, 1);
  return 1;
}

static void preload_library(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (int i = 0; plait_lua_sources[i].module; i++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, plait_lua_sources[i].module);
  }
  lua_pop(L, 1);
}

/* lib/plait's own require finds its embedded modules and nothing on the system; a model file's
 * require is the sandbox's (lib/plait/sandbox.lua). */
static void close_search_paths(lua_State *L) {
  lua_getglobal(L, "package");
  lua_pushstring(L, "");
  lua_setfield(L, -2, "path");
  lua_pushstring(L, "");
  lua_setfield(L, -2, "cpath");
  lua_pop(L, 1);
}

/* Whether msg starts with a location "chunk:line: " (Lua's own, or one error() added). */
static int has_location(const char *msg) {
  const char *colon = strchr(msg, ':');
  if (!colon || colon == msg || memchr(msg, '\n', (size_t)(colon - msg))) return 0;
  const char *digits = colon + 1;
  while (*digits >= '0' && *digits <= '9') digits++;
  return digits > colon + 1 && digits[0] == ':' && digits[1] == ' ';
}

/* Whether where is "file:line" (a frame of the model file's), not the bare name core_user_where
 * falls back to when plait's own code runs alone (import reading a folder). */
static int names_line(const char *where) {
  const char *end = where + strlen(where);
  while (end > where && end[-1] >= '0' && end[-1] <= '9') end--;
  return end > where && end[-1] == ':' && *end;
}

/* Message handler: every error raised while the model file runs names its line: one raised inside
 * lib/plait is reported there, one without a location (raised by a C function: "C stack overflow")
 * gets it, and a value that is not a message (error({...}), error(nil)) is said to be one. An error
 * of plait's own code running alone (import reading a folder) is its message without lib/plait's
 * line. */
static int message_handler(lua_State *L) {
  char where[WHERE_LEN];
  core_user_where(L, where, sizeof where);
  int is_text = lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER;
  const char *msg = is_text ? lua_tostring(L, 1) : NULL;
  if (!msg) {
    lua_pushfstring(L, "%s: the model file raised an error that is not a message (a %s); raise a "
                    "string, as in error(\"what is wrong\")", where, luaL_typename(L, 1));
  } else if (strncmp(msg, "lib/plait/", 10) == 0 || !has_location(msg)) {
    const char *rest = has_location(msg) ? strstr(msg, ": ") + 2 : msg;
    if (names_line(where)) lua_pushfstring(L, "%s: %s", where, rest);
    else lua_pushstring(L, rest);
  } else {
    lua_pushstring(L, msg);
  }
  return 1;
}

int host_call(lua_State *L, int nargs, int nresults, Diag *d) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, message_handler);
  lua_insert(L, base);
  int status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (status == LUA_OK) return 0;
  const char *msg = lua_tostring(L, -1);
  diag(d, "%s", msg ? msg : "error");
  for (char *p = d->msg; *p; p++)
    if (*p == '\n') *p = ' ';
  lua_pop(L, 1);
  return -1;
}

/* One field of the model file's parallel table, its value (not nil) on top of L's stack. */
static int read_layout_field(lua_State *L, const LayoutField *field, Parallel *p, Diag *d) {
  if (field->kind == FIELD_SWITCH) return LAYOUT_INT(field, p) = lua_toboolean(L, -1), 0;
  if (field->kind == FIELD_SIZE) {
    int whole;
    lua_Integer v = lua_tointegerx(L, -1, &whole);
    if (whole) LAYOUT_INT(field, p) = (int)v;
    return whole ? 0 : diag(d, "parallel.%s must be an integer", field->key);
  }
  if (lua_type(L, -1) != LUA_TSTRING) return diag(d, "parallel.%s must be a string", field->key);
  const char *text = lua_tostring(L, -1);
  LayoutFieldSet set = layout_field_set(field, text, p);
  char words[128];
  if (set == FIELD_TOO_LONG) return diag(d, "parallel.%s: value too long", field->key);
  if (set == FIELD_BAD_VALUE)
    return diag(d, "parallel.%s must be %s, not \"%s\"", field->key,
                layout_field_words(field, "\"", "\"", words, sizeof words), text);
  return 0;
}

/* Every key of the parallel table at index t is a layout field's. */
static int check_layout_keys(lua_State *L, int t, Diag *d) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
    if (layout_field_by_key(key)) continue;
    char keys[256] = "";
    for (int i = 0, n = 0; i < LAYOUT_FIELDS && n < (int)sizeof keys; i++)
      n += snprintf(keys + n, sizeof keys - n, "%s%s", i ? ", " : "", layout_fields[i].key);
    diag(d, "parallel: unknown field '%s' (%s)", key, keys);
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

int host_read_parallel(lua_State *L, int model, Parallel *p, Diag *d) {
  parallel_unset(p);
  lua_getfield(L, model, "parallel");
  int t = lua_gettop(L), status = check_layout_keys(L, t, d);
  for (int i = 0; status == 0 && i < LAYOUT_FIELDS; i++) {
    lua_getfield(L, t, layout_fields[i].key);
    if (!lua_isnil(L, -1)) status = read_layout_field(L, &layout_fields[i], p, d);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return status;
}

static int check_overrides_used(const Builder *b, Diag *d) {
  for (int i = 0; i < b->noverrides; i++) {
    if (b->overrides[i].used) continue;
    char keys[600] = "";
    int used = 0;
    for (int k = 0; k < b->model->nconfig && used < (int)sizeof keys; k++)
      used += snprintf(keys + used, sizeof keys - used, "%s%s", k ? ", " : "",
                       b->model->config[k].key);
    return diag(d, "--set %s: the model has no config key '%s' (it has: %s)", b->overrides[i].key,
                b->overrides[i].key, used ? keys : "none");
  }
  return 0;
}

/* The model file's chunk, its _ENV a fresh sandbox environment. */
static int load_model_file(lua_State *L, const char *file, Diag *d) {
  int status = lua_files_load(L, file);
  if (status != LUA_OK) {
    if (status == LUA_ERRFILE)
      diag(d, "cannot open model file %s; give a model file (a .lua file)", lua_tostring(L, -1));
    else diag(d, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  lua_getglobal(L, "require");
  lua_pushstring(L, "plait.sandbox");
  if (host_call(L, 1, 1, d)) return -1;
  lua_getfield(L, -1, "env");
  lua_remove(L, -2);
  if (host_call(L, 0, 1, d)) return -1;
  lua_setupvalue(L, -2, 1);
  return 0;
}

static int run_model_file(lua_State *L, const char *file, Diag *d) {
  if (load_model_file(L, file, d) || host_call(L, 0, 1, d)) return -1;
  if (!luaL_getmetafield(L, -1, "__name")) return diag(d, "%s must return plait.model{...}", file);
  int is_model = strcmp(lua_tostring(L, -1), "plait.model") == 0;
  lua_pop(L, 1);
  return is_model ? 0 : diag(d, "%s must return plait.model{...}", file);
}

/* The record's name and layers, checked again: the model file may have changed them after
 * plait.model. */
static int read_model_fields(lua_State *L, int model, Model *m, const char *file, Diag *d) {
  snprintf(m->file, sizeof m->file, "%s", file);
  lua_getfield(L, model, "name");
  lua_getfield(L, model, "layers");
  int whole;
  lua_Integer layers = lua_tointegerx(L, -1, &whole);
  int named = lua_type(L, -2) == LUA_TSTRING;
  if (named) snprintf(m->name, sizeof m->name, "%s", lua_tostring(L, -2));
  lua_pop(L, 2);
  if (!named) return diag(d, "%s: the model's name must be a string", file);
  char shown[120];
  if (!escape_plain_name(m->name, NAME_LEN - 1))
    return diag(d,
                "%s: the model's name '%s' is not a plain name: give it 1 to %d ASCII letters, "
                "digits, '_', '.' "
                "or '-'",
                file, escape(ESC_TEXT, m->name, shown, sizeof shown), NAME_LEN - 1);
  if (!whole || layers < 1 || layers > 1 << 20)
    return diag(d, "%s: plait.model: 'layers' must be a whole number from 1 to 2^20", file);
  m->layers = (int)layers;
  return 0;
}

/* Parameters past 2^50 (a thousand times today's largest models) are sizes gone wrong: the
 * counts, memory and traffic made of them would overflow. */
static int check_parameter_count(const Model *m, Diag *d) {
  double total = 0;
  for (int i = 0; i < m->nparams; i++)
    total += (double)param_elems(m, &m->params[i]) *
             (m->params[i].scope == SCOPE_BLOCK ? m->layers : 1);
  if (total <= 1125899906842624.0) return 0;
  return diag(
      d,
      "%s: %.3g parameters (%d layers), beyond what plait plans (2^50); check the config's sizes",
      m->file, total, m->layers);
}

static int trace(lua_State *L, int model, int mbs, Model *m, Diag *d) {
  lua_getglobal(L, "require");
  lua_pushstring(L, "plait");
  if (host_call(L, 1, 1, d)) return -1;
  lua_getfield(L, -1, "_trace");
  lua_pushvalue(L, model);
  lua_pushinteger(L, mbs);
  if (host_call(L, 2, 0, d)) return -1;
  lua_pop(L, 1);
  m->batch_dim = model_find_dim(m, "b");
  m->seq_dim = model_find_dim(m, "seq");
  return check_parameter_count(m, d);
}

/* What a command does around the trace, with its context. */
typedef struct {
  HostVisit before, after;
  void *ctx;
} Visits;

/* Runs the model file and traces it, with the state still open visits.before (when given) before
 * the trace and visits.after (when given) after it. */
static int run_model(const Options *o, const Parallel *flags, Parallel *par, Model *m,
                     Visits visits, Diag *d) {
  const char *file = o->file;
  memset(m, 0, sizeof *m);
  m->vocab_dim = -1;
  graph_init(&m->embed, "embed");
  graph_init(&m->block, "block");
  graph_init(&m->head, "head");
  Builder b;
  memset(&b, 0, sizeof b);
  b.model = m;
  b.tp = 1;
  for (int i = 0; i < o->nsets && i < MAX_OVERRIDES; i++) b.overrides[b.noverrides++] = o->sets[i];

  LuaLimits limits;
  lua_State *L = lua_limits_state(&limits, o->lua_instructions, o->lua_memory_mb);
  if (!L) return diag(d, "cannot start Lua: out of memory");
  limits.locate = core_user_where;
  m->budget = m->embed.budget = m->block.budget = m->head.budget = &limits.memory;
  luaL_openlibs(L);
  lua_limits_open(L);
  preload_library(L);
  core_register(L, &b);
  close_search_paths(L);
  lua_pushstring(L, file);
  lua_setfield(L, LUA_REGISTRYINDEX, CORE_MODEL_FILE);
  int status = run_model_file(L, file, d);
  if (status == 0 && !m->name[0]) status = diag(d, "%s must return plait.model{...}", file);
  if (status == 0) {
    int model = lua_gettop(L);
    status = read_model_fields(L, model, m, file, d);
    if (status == 0 && host_read_parallel(L, model, par, d)) {
      Diag why = *d;
      status = diag(d, "%s: %s", file, why.msg);
    }
    if (status == 0) {
      parallel_override(par, flags);
      parallel_defaults(par);
      status = parallel_check(par, d);
    }
    if (status == 0 && visits.before) status = visits.before(L, model, m, visits.ctx, d);
    if (status == 0) {
      b.tp = par->tp;
      status = trace(L, model, par->mbs, m, d);
    }
    if (status == 0) status = check_overrides_used(&b, d);
    if (status == 0 && visits.after) status = visits.after(L, model, m, visits.ctx, d);
  }
  if (status) lua_limits_explain(&limits, file, d);
  lua_close(L);
  core_free(&b);
  m->budget = m->embed.budget = m->block.budget = m->head.budget = NULL;
  return status;
}

int host_build_model(const Options *o, Parallel *par, Model *m, Diag *d) {
  return run_model(o, &o->parallel, par, m, (Visits){NULL, NULL, NULL}, d);
}

int host_visit_model(const Options *o, Model *m, HostVisit before, HostVisit visit, void *ctx,
                     Diag *d) {
  Parallel none, par;
  parallel_unset(&none);
  return run_model(o, &none, &par, m, (Visits){before, visit, ctx}, d);
}
