/* write_place.c: the kinds of file plait writes over or into, and the places it never writes. */
#include "write_place.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int place_refuse(char *error, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error, len, fmt, ap);
  va_end(ap);
  return -1;
}

const char *place_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

/* ---- protected places --------------------------------------------------------------------------- */

/* Appends path's components to out (an absolute path), "." dropped and ".." taking one off. */
static void append_lexically(char *out, size_t len, const char *path) {
  char copy[PATH_MAX], *save = NULL;
  snprintf(copy, sizeof copy, "%s", path);
  for (char *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
    size_t n = strlen(out);
    if (strcmp(part, ".") == 0) continue;
    if (strcmp(part, "..") == 0) {
      char *slash = strrchr(out, '/');
      if (slash) slash[slash == out] = 0;
    } else {
      snprintf(out + n, len - n, "%s%s", n && out[n - 1] == '/' ? "" : "/", part);
    }
  }
}

int place_resolve(const char *path, char *out) {
  char head[PATH_MAX], rest[PATH_MAX] = "", tail[PATH_MAX];
  snprintf(head, sizeof head, "%s", path[0] ? path : ".");
  while (!realpath(head, out)) {
    size_t n = strlen(head);
    while (n > 1 && head[n - 1] == '/') head[--n] = 0;
    char *slash = strrchr(head, '/');
    if (strcmp(head, ".") == 0 || strcmp(head, "/") == 0) return -1;
    if (snprintf(tail, sizeof tail, "%s%s%s", slash ? slash + 1 : head, rest[0] ? "/" : "", rest) >= (int)sizeof tail)
      return -1;
    memcpy(rest, tail, sizeof rest);
    if (!slash) snprintf(head, sizeof head, ".");
    else if (slash == head) snprintf(head, sizeof head, "/");
    else *slash = 0;
  }
  append_lexically(out, PATH_MAX, rest);
  return 0;
}

static int is_folder(const char *dir, const char *inside) {
  char path[PATH_MAX + 16];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, inside);
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_checkout(const char *dir) {
  return is_folder(dir, "compiler") && is_folder(dir, "runtime") && is_folder(dir, "lib/plait");
}

/* Whether `rel` ("/x", "/compiler/x", ...) lies in a checkout's sources: a file in its top folder, or in a
 * source folder. */
static int in_sources(const char *rel) {
  static const char *const sources[] = {"compiler", "runtime", "lib", "models", "docs", "tests", ".ci"};
  const char *first = rel + (rel[0] == '/');
  size_t n = strcspn(first, "/");
  if (first[n] == 0) return 1;
  if (strncmp(first, "tests/gpu/generated", 19) == 0 && (first[19] == 0 || first[19] == '/')) return 0;
  for (unsigned i = 0; i < sizeof sources / sizeof *sources; i++)
    if (strlen(sources[i]) == n && strncmp(first, sources[i], n) == 0) return 1;
  return 0;
}

/* Refuses `probe` (path itself, or for a folder a file in it) where it lies in a .git folder or in a
 * checkout's sources; messages name path. */
static int check_protected(const char *flag, const char *path, const char *probe, char *error, size_t len) {
  char real[PATH_MAX], prefix[PATH_MAX];
  if (place_resolve(probe, real) != 0) return 0; /* nothing resolves: the write itself will say why */
  for (size_t at = 0; real[at]; at++) {
    if (real[at] != '/') continue;
    if (strncmp(real + at + 1, ".git", 4) == 0 && (real[at + 5] == '/' || real[at + 5] == 0))
      return place_refuse(error, len, "%s %s is in a .git folder (%.*s); write outside the repository's own data", flag,
                    path, (int)(at + 5), real);
    snprintf(prefix, sizeof prefix, "%.*s", at ? (int)at : 1, real);
    if (is_checkout(prefix) && in_sources(real + at))
      return place_refuse(error, len, "%s %s is in plait's own sources (%s); write to build/ or a folder of your own", flag,
                    path, prefix);
  }
  return 0;
}

/* ---- files and folders -------------------------------------------------------------------------- */

static int refuse_link(const char *flag, const char *path, const char *what, char *error, size_t len) {
  char target[PATH_MAX] = "?";
  ssize_t n = readlink(path, target, sizeof target - 1);
  target[n > 0 ? n : 1] = 0;
  return place_refuse(error, len, "%s %s is a symbolic link (to %s); plait does not write through links: give %s", flag,
                path, target, what);
}

int place_check_file(const char *flag, const char *path, char *error, size_t len) {
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (S_ISLNK(st.st_mode)) return refuse_link(flag, path, "the path of a regular file", error, len);
    if (!S_ISREG(st.st_mode))
      return place_refuse(error, len, "%s %s is %s; give the path of a regular file (it is written beside that path and "
                    "renamed into place)", flag, path, place_kind(st.st_mode));
  }
  return check_protected(flag, path, path, error, len);
}

/* An absent folder's parent: a folder plait can make it in. */
static int check_parent(const char *flag, const char *path, char *error, size_t len) {
  char copy[PATH_MAX];
  struct stat st;
  snprintf(copy, sizeof copy, "%s", path);
  const char *parent = dirname(copy);
  int ok = stat(parent, &st) == 0 && (S_ISDIR(st.st_mode) || (errno = ENOTDIR, 0)) && access(parent, W_OK | X_OK) == 0;
  if (!ok)
    return place_refuse(error, len, "%s %s: cannot create the directory: %s (in %s); give a path in a folder you can write",
                  flag, path, strerror(errno), parent);
  return 0;
}

int place_check_folder(const char *flag, const char *path, char *error, size_t len) {
  struct stat st;
  char inside[PATH_MAX + 8];
  snprintf(inside, sizeof inside, "%s/a", path);
  int exists = lstat(path, &st) == 0;
  if (exists && S_ISLNK(st.st_mode)) return refuse_link(flag, path, "the folder itself, or another path", error, len);
  if (exists && !S_ISDIR(st.st_mode))
    return place_refuse(error, len, "%s %s is %s; give a folder", flag, path, place_kind(st.st_mode));
  if (check_protected(flag, path, inside, error, len)) return -1;
  return exists ? 0 : check_parent(flag, path, error, len);
}
