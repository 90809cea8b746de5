/* write_place.h: where plait may write, for the compiler's outputs and the programs' alike: never through
 * a symbolic link, never over what is not a regular file (a device, a named pipe, a socket) nor a file
 * where a folder is meant, and never into a plait checkout's sources or a .git folder, at any depth. */
#ifndef PLAIT_WRITE_PLACE_H
#define PLAIT_WRITE_PLACE_H

#include <stddef.h>
#include <sys/types.h>

/* What a file is, for messages: "a regular file", "a directory", "a named pipe", "a character device". */
const char *place_kind(mode_t mode);

/* Formats one line into error (len bytes); returns -1, so that `return place_refuse(...)` refuses. */
int place_refuse(char *error, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The absolute path of `path` into out (PATH_MAX bytes): its longest existing part with links resolved, then
 * the rest as written ("." dropped, ".." taking one off). 0, or -1 where not even the current folder
 * resolves. */
int place_resolve(const char *path, char *out);

/* Protected places: a plait checkout's sources (in a folder holding compiler/, runtime/ and lib/plait/,
 * its top folder and its compiler, runtime, lib, models, docs, tests and .ci folders; build/, generated/
 * and tests/gpu/generated/ take outputs) and any folder named .git; a path's existing part is taken
 * with its links resolved. Each check returns 0, or -1 with one line in error naming flag, path and the
 * fix. */

/* A file plait writes: absent or a regular file, not a link, not in a protected place. */
int place_check_file(const char *flag, const char *path, char *error, size_t len);

/* A folder plait writes into: a folder, not a link, or absent in a folder that can take it; the files it
 * would hold not in a protected place. */
int place_check_folder(const char *flag, const char *path, char *error, size_t len);

#endif
