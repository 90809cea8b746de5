/* lua_files.c: Lua chunks and file handles from regular files only, opened without waiting
 * (infile.h). */
#include "front/lua_files.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "infile.h"

typedef struct {
  FILE *f;
  int first; /* the first character, already read, or EOF once given */
  char buf[4096];
} Reader;

static const char *read_chunk(lua_State *L, void *data, size_t *size) {
  (void)L;
  Reader *r = data;
  if (r->first != EOF) {
    r->buf[0] = (char)r->first;
    r->first = EOF;
    *size = 1;
    return r->buf;
  }
  *size = fread(r->buf, 1, sizeof r->buf, r->f);
  return *size ? r->buf : NULL;
}

/* Skips a first line starting with '#' (keeping its newline, so that line numbers hold). */
static int first_character(FILE *f) {
  int c = getc(f);
  if (c != '#') return c;
  while (c != EOF && c != '\n') c = getc(f);
  return c;
}

int lua_files_load(lua_State *L, const char *path) {
  char why[256];
  Reader r;
  r.f = infile_open(path, why, sizeof why);
  if (!r.f) {
    lua_pushfstring(L, "%s: %s", path, why);
    return LUA_ERRFILE;
  }
  r.first = first_character(r.f);
  lua_pushfstring(L, "@%s", path);
  int status = lua_load(L, read_chunk, &r, lua_tostring(L, -1), "t");
  lua_remove(L, -2);
  int failed = ferror(r.f);
  fclose(r.f);
  if (status == LUA_OK && failed) {
    lua_pop(L, 1);
    lua_pushfstring(L, "%s: cannot read it", path);
    return LUA_ERRFILE;
  }
  return status;
}

int lua_files_l_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int has_env = !lua_isnone(L, 2);
  int status = lua_files_load(L, path);
  if (status == LUA_ERRFILE) {
    const char *why = lua_tostring(L, -1);
    lua_pushfstring(L, "%s; plait reads regular files only, give the path of one", why);
    lua_remove(L, -2);
  }
  if (status != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  if (has_env) {
    lua_pushvalue(L, 2);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return 1;
}

static int close_stream(lua_State *L) {
  luaL_Stream *p = luaL_checkudata(L, 1, LUA_FILEHANDLE);
  return luaL_fileresult(L, fclose(p->f) == 0, NULL);
}

int lua_files_l_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char why[256];
  luaL_Stream *p = lua_newuserdatauv(L, sizeof *p, 0);
  p->closef = NULL; /* a closed file until it opens */
  luaL_setmetatable(L, LUA_FILEHANDLE);
  errno = 0;
  p->f = infile_open(path, why, sizeof why);
  if (p->f) {
    p->closef = close_stream;
    return 1;
  }
  if (strncmp(why, "not a regular file", 18) == 0)
    return luaL_error(L, "%s: %s; plait reads regular files only, give the path of one", path, why);
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", path, why);
  lua_pushinteger(L, errno);
  return 3;
}
