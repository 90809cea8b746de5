/* output.c: the run's own output files: checked at start-up, written without a name (O_TMPFILE)
 * or under a temporary one beside the final name, and linked or renamed into place once every
 * write is checked. */
#include "train/output.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "write_place.h"

/* ---- start-up checks
 * ---------------------------------------------------------------------------- */

/* Whether a and b name one file: the same device and inode where both exist, the same place where
 * neither does. */
static int same_place(const char *a, const char *b) {
  struct stat x, y;
  int has_x = stat(a, &x) == 0, has_y = stat(b, &y) == 0;
  if (has_x || has_y) return has_x && has_y && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
  char place_a[PATH_MAX], place_b[PATH_MAX];
  return place_resolve(a, place_a) == 0 && place_resolve(b, place_b) == 0 &&
         strcmp(place_a, place_b) == 0;
}

static int check_folder(const char *flag, const char *path, char *error, size_t size) {
  char copy[PATH_MAX];
  struct stat st;
  snprintf(copy, sizeof copy, "%s", path);
  const char *folder = dirname(copy);
  if (stat(folder, &st) != 0)
    return snprintf(
               error, size,
               "%s %s: its folder %s does not exist (%s); create it first, or give another path",
               flag, path, folder, strerror(errno)),
           -1;
  if (!S_ISDIR(st.st_mode))
    return snprintf(error, size, "%s %s: %s is not a folder; give a path in a folder", flag, path,
                    folder),
           -1;
  if (access(folder, W_OK | X_OK) != 0)
    return snprintf(
               error, size,
               "%s %s: its folder %s is not writable (%s); give a path in a folder you can write",
               flag, path, folder, strerror(errno)),
           -1;
  return 0;
}

int output_check(const char *flag, const char *path, const char *const *others,
                 const char *const *others_flags, int nothers, char *error, size_t size) {
  if (place_check_file(flag, path, error, size)) return -1;
  for (int i = 0; i < nothers; i++)
    if (others[i] && same_place(path, others[i]))
      return snprintf(error, size,
                      "%s %s is also %s (%s); writing it would replace that: give another path",
                      flag, path, others_flags[i], others[i]),
             -1;
  return check_folder(flag, path, error, size);
}

/* ---- writing
 * ------------------------------------------------------------------------------------ */

static int write_error(OutputFile *o, const char *what, char *error, size_t size) {
  snprintf(
      error, size,
      "%s %s: cannot %s (%s); the old file is left as it was: free space there, or give another "
      "path",
      o->flag, o->path, what, strerror(errno));
  o->broken = 1;
  return -1;
}

/* A file without a name in the folder, where the file system has them; else a new file of a
 * temporary name of its own (PATH.tmp.XXXXXX, readable by all as a new file would be). */
static int open_temporary(OutputFile *o) {
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", o->path);
  int fd = open(dirname(copy), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd >= 0) {
    snprintf(o->unnamed, sizeof o->unnamed, "/proc/self/fd/%d", fd);
    if (access(o->unnamed, F_OK) == 0) return fd;
    close(fd);
  }
  o->unnamed[0] = 0;
  snprintf(o->temp, sizeof o->temp, "%s.tmp.XXXXXX", o->path);
  fd = mkstemp(o->temp);
  mode_t mask = umask(0);
  umask(mask);
  if (fd >= 0) fchmod(fd, 0666 & ~mask);
  else o->temp[0] = 0;
  return fd;
}

int output_open(OutputFile *o, const char *flag, const char *path, char *error, size_t size) {
  memset(o, 0, sizeof *o);
  o->flag = flag;
  o->path = path;
  int fd = open_temporary(o);
  if (fd < 0) return write_error(o, "create a file beside it", error, size);
  o->fd = fd;
  if (!(o->file = fdopen(fd, "w"))) {
    close(fd);
    if (o->temp[0]) unlink(o->temp);
    return write_error(o, "write", error, size);
  }
  return 0;
}

int output_flush(OutputFile *o, char *error, size_t size) {
  if (fflush(o->file) != 0 || ferror(o->file)) return write_error(o, "write", error, size);
  return 0;
}

/* Links the unnamed file under a temporary name no file has (PATH.tmp. and eight hex digits). */
static int link_temporary(OutputFile *o) {
  for (unsigned tries = 0; tries < 64; tries++) {
    unsigned r = (unsigned)getpid() * 2654435761u + tries;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r += tries * 40503u;
    snprintf(o->temp, sizeof o->temp, "%s.tmp.%08x", o->path, r);
    if (linkat(AT_FDCWD, o->unnamed, AT_FDCWD, o->temp, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != EEXIST) break;
  }
  o->temp[0] = 0;
  return -1;
}

/* The unnamed file linked under a temporary name, then that renamed over the final one, unless
 * what is there now is no longer a regular file (left as it is). */
static int put_in_place(OutputFile *o) {
  struct stat st;
  if (lstat(o->path, &st) == 0 && !S_ISREG(st.st_mode)) return errno = EEXIST, -1;
  if (o->unnamed[0] && link_temporary(o) != 0) return -1;
  if (rename(o->temp, o->path) == 0) return 0;
  int saved = errno;
  unlink(o->temp);
  o->temp[0] = 0;
  errno = saved;
  return -1;
}

int output_commit(OutputFile *o, char *error, size_t size) {
  int status = output_flush(o, error, size);
  if (status == 0 && fsync(o->fd) != 0) status = write_error(o, "write", error, size);
  if (status == 0 && put_in_place(o) != 0)
    status = write_error(o, "put the file in place", error, size);
  if (fclose(o->file) != 0 && status == 0) status = write_error(o, "write", error, size);
  o->file = NULL;
  if (status != 0 && !o->unnamed[0] && o->temp[0]) unlink(o->temp);
  return status;
}

void output_salvage(void *output) {
  OutputFile *o = output;
  if (!o->file) return;
  if (o->broken || fsync(o->fd) != 0 || put_in_place(o) != 0)
    if (!o->unnamed[0] && o->temp[0]) unlink(o->temp);
}
