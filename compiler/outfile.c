/* outfile.c: refusing outputs that would replace inputs or what is not a regular file, or lie in
 * plait's sources, and writing through a temporary file. */
#include "outfile.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "write_place.h"

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

int outfile_check(const char *flag, const char *path, const char *const *inputs, int ninputs,
                  Diag *d) {
  for (int i = 0; i < ninputs; i++)
    if (inputs[i] && same_file(path, inputs[i]))
      return diag(d, "%s %s is also an input (%s); it would be replaced: write to another file",
                  flag, path, inputs[i]);
  return place_check_file(flag, path, d->msg, sizeof d->msg);
}

static int write_failed(OutFile *o, Diag *d) {
  int saved = errno;
  outfile_abort(o);
  return diag(d, "cannot write %s: %s; check that its folder exists, is writable and has space",
              o->path, strerror(saved));
}

/* Creates the temporary from a mkstemp template (readable by all, as a new file would be). */
static int open_temporary(OutFile *o, const char *path, const char *template, Diag *d) {
  o->path = path;
  o->file = NULL;
  if (snprintf(o->temp, sizeof o->temp, "%s", template) >= (int)sizeof o->temp) {
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

int outfile_open(OutFile *o, const char *path, Diag *d) {
  char template[sizeof o->temp + 16];
  snprintf(template, sizeof template, "%s.tmp.XXXXXX", path);
  return open_temporary(o, path, template, d);
}

int outfile_open_in(OutFile *o, const OwnFolder *folder, const char *name, char *path, size_t len,
                    Diag *d) {
  char template[sizeof o->temp + 16];
  snprintf(path, len, "%s/%s", folder->path, name);
  own_folder_temp(folder, name, template, sizeof template);
  return open_temporary(o, path, template, d);
}

/* What is at the final name now may be replaced: absent or a regular file (a device or a pipe
 * put there while the output was written is left as it is). */
static int still_replaceable(OutFile *o, Diag *d) {
  struct stat st;
  if (lstat(o->path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
  outfile_abort(o);
  return diag(d,
              "%s is now %s, which plait does not replace; it is left as it is: give another path",
              o->path, place_kind(st.st_mode));
}

int outfile_close(OutFile *o, Diag *d) {
  if (fflush(o->file) != 0 || ferror(o->file) || fsync(fileno(o->file)) != 0)
    return write_failed(o, d);
  if (still_replaceable(o, d)) return -1;
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
