/* lua_files.h: the files Lua code reads in plait (the model file, the Lua files it requires, the
 * files it and lib/plait open): regular files only, opened without waiting (infile.h), so that a
 * FIFO or a device is refused naming its kind rather than waited on for ever. */
#ifndef PLAIT_LUA_FILES_H
#define PLAIT_LUA_FILES_H

#include <lua.h>

/* Loads the Lua text file at path as a chunk named "@path" (a first line starting with '#' skipped,
 * as luaL_loadfilex does); pushes the chunk and returns LUA_OK, or pushes the message and returns
 * an error status. */
int lua_files_load(lua_State *L, const char *path);
/* core.load_file(path, env): the chunk with env as its _ENV, or nil and the message. */
int lua_files_l_load(lua_State *L);
/* core.open_file(path): a file handle for reading (io's), or nil, the message and errno when it
 * does not open; raises an error when path is not a regular file. */
int lua_files_l_open(lua_State *L);

#endif
