/* outfile.c: refusing outputs that would replace inputs or plait's sources, and writing through a
 * temporary file. */
#include "outfile.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int plait_home(char *home, size_t len, Diag *d) {
  const char *env = getenv("PLAIT_HOME");
  if (env) {
    snprintf(home, len, "%s", env);
    return 0;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n < 0) return diag(d, "cannot find plait's own path; set PLAIT_HOME to the plait checkout");
  exe[n] = 0;
  snprintf(home, len, "%s", dirname(dirname(exe)));
  return 0;
}

static int same_file(const char *a, const char *b) {
  struct stat x, y;
  return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The real path of the folder that holds `path`, or of its nearest ancestor that exists (a folder a
 * command will create lies where that ancestor is). */
static int real_folder(const char *path, char *out) {
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", path);
  char *folder = dirname(copy);
  for (int depth = 0; depth < 64; depth++) {
    if (realpath(folder, out)) return 1;
    if (strcmp(folder, ".") == 0 || strcmp(folder, "/") == 0) return 0;
    folder = dirname(folder);
  }
  return 0;
}

/* Whether `folder` (a real path) is `root` or below it. */
static int within(const char *folder, const char *root) {
  size_t n = strlen(root);
  return strncmp(folder, root, n) == 0 && (folder[n] == 0 || folder[n] == '/');
}

/* plait's own sources: the checkout's top folder and its source folders; outputs go to build/,
 * generated/ and tests/gpu/generated/. */
static int in_source_tree(const char *folder) {
  static const char *const sources[] = {"compiler", "runtime", "lib", "models", "docs", "tests", ".ci"};
  char home[PATH_MAX], real_home[PATH_MAX], place[PATH_MAX + 32];
  Diag ignored;
  if (plait_home(home, sizeof home, &ignored) || !realpath(home, real_home)) return 0;
  if (strcmp(folder, real_home) == 0) return 1;
  snprintf(place, sizeof place, "%s/tests/gpu/generated", real_home);
  if (within(folder, place)) return 0;
  for (unsigned i = 0; i < sizeof sources / sizeof *sources; i++) {
    snprintf(place, sizeof place, "%s/%s", real_home, sources[i]);
    if (within(folder, place)) return 1;
  }
  return 0;
}

int outfile_check(const char *flag, const char *path, const char *const *inputs, int ninputs, Diag *d) {
  for (int i = 0; i < ninputs; i++)
    if (inputs[i] && same_file(path, inputs[i]))
      return diag(d, "%s %s is also an input (%s); it would be replaced: write to another file", flag, path, inputs[i]);
  char folder[PATH_MAX];
  if (real_folder(path, folder) && in_source_tree(folder))
    return diag(d, "%s %s is in plait's own sources (%s); write to build/ or a folder of your own", flag, path, folder);
  return 0;
}

static int write_failed(OutFile *o, Diag *d) {
  int saved = errno;
  outfile_abort(o);
  return diag(d, "cannot write %s: %s; check that its folder exists, is writable and has space", o->path,
              strerror(saved));
}

int outfile_open(OutFile *o, const char *path, Diag *d) {
  o->path = path;
  o->file = NULL;
  o->temp[0] = 0;
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    errno = EISDIR;
    return write_failed(o, d);
  }
  if (snprintf(o->temp, sizeof o->temp, "%s.tmp.XXXXXX", path) >= (int)sizeof o->temp) {
    o->temp[0] = 0;
    errno = ENAMETOOLONG;
    return write_failed(o, d);
  }
  int fd = mkstemp(o->temp);
  if (fd < 0) {
    o->temp[0] = 0;
    return write_failed(o, d);
  }
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  o->file = fdopen(fd, "w");
  if (!o->file) {
    close(fd);
    return write_failed(o, d);
  }
  return 0;
}

int outfile_close(OutFile *o, Diag *d) {
  if (fflush(o->file) != 0 || ferror(o->file) || fsync(fileno(o->file)) != 0) return write_failed(o, d);
  int closed = fclose(o->file);
  o->file = NULL;
  if (closed != 0 || rename(o->temp, o->path) != 0) return write_failed(o, d);
  o->temp[0] = 0;
  return 0;
}

void outfile_abort(OutFile *o) {
  if (o->file) fclose(o->file);
  o->file = NULL;
  if (o->temp[0]) unlink(o->temp);
  o->temp[0] = 0;
}
