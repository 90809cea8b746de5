/* output.c: the run's own output files: checked at start-up, written without a name (O_TMPFILE) or under a
 * temporary one beside the final name, and linked or renamed into place once every write is checked. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- start-up checks ---------------------------------------------------------------------------- */

const char *output_file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

/* The real path of the folder that holds `path`; 0 when it does not exist. */
static int real_folder(const char *path, char *out) {
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", path);
  return realpath(dirname(copy), out) != NULL;
}

/* Whether a and b name one file: the same device and inode where both exist, the same folder and name
 * where neither does. */
static int same_place(const char *a, const char *b) {
  struct stat x, y;
  int has_x = stat(a, &x) == 0, has_y = stat(b, &y) == 0;
  if (has_x || has_y) return has_x && has_y && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
  char folder_a[PATH_MAX], folder_b[PATH_MAX], name_a[PATH_MAX], name_b[PATH_MAX];
  snprintf(name_a, sizeof name_a, "%s", a);
  snprintf(name_b, sizeof name_b, "%s", b);
  return real_folder(a, folder_a) && real_folder(b, folder_b) && strcmp(folder_a, folder_b) == 0 &&
         strcmp(basename(name_a), basename(name_b)) == 0;
}

static int check_folder(const char *flag, const char *path, char *error, size_t size) {
  char copy[PATH_MAX];
  struct stat st;
  snprintf(copy, sizeof copy, "%s", path);
  const char *folder = dirname(copy);
  if (stat(folder, &st) != 0)
    return snprintf(error, size, "%s %s: its folder %s does not exist (%s); create it first, or give another path",
                    flag, path, folder, strerror(errno)), -1;
  if (!S_ISDIR(st.st_mode))
    return snprintf(error, size, "%s %s: %s is not a folder; give a path in a folder", flag, path, folder), -1;
  if (access(folder, W_OK | X_OK) != 0)
    return snprintf(error, size, "%s %s: its folder %s is not writable (%s); give a path in a folder you can write",
                    flag, path, folder, strerror(errno)), -1;
  return 0;
}

int output_check(const char *flag, const char *path, const char *const *others, const char *const *others_flags,
                 int nothers, char *error, size_t size) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return snprintf(error, size, "%s %s is %s; give the path of a regular file (it is written beside that path and "
                    "renamed into place)", flag, path, output_file_kind(st.st_mode)), -1;
  for (int i = 0; i < nothers; i++)
    if (others[i] && same_place(path, others[i]))
      return snprintf(error, size, "%s %s is also %s (%s); writing it would replace that: give another path", flag,
                      path, others_flags[i], others[i]), -1;
  return check_folder(flag, path, error, size);
}

/* ---- writing ------------------------------------------------------------------------------------ */

static int write_error(OutputFile *o, const char *what, char *error, size_t size) {
  snprintf(error, size, "%s %s: cannot %s (%s); the old file is left as it was: free space there, or give another "
           "path", o->flag, o->path, what, strerror(errno));
  o->broken = 1;
  return -1;
}

/* A file without a name in the folder, where the file system has them; else a new file of temporary name. */
static int open_temporary(OutputFile *o) {
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", o->final);
  int fd = open(dirname(copy), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd >= 0) {
    snprintf(o->unnamed, sizeof o->unnamed, "/proc/self/fd/%d", fd);
    if (access(o->unnamed, F_OK) == 0) return fd;
    close(fd);
  }
  o->unnamed[0] = 0;
  unlink(o->temp); /* a temporary of an earlier process of this pid, killed before it renamed it */
  return open(o->temp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
}

int output_open(OutputFile *o, const char *flag, const char *path, char *error, size_t size) {
  struct stat st;
  memset(o, 0, sizeof *o);
  o->flag = flag;
  o->path = path;
  if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || !realpath(path, o->final))
    snprintf(o->final, sizeof o->final, "%s", path);
  snprintf(o->temp, sizeof o->temp, "%s.tmp.%ld", o->final, (long)getpid());
  int fd = open_temporary(o);
  if (fd < 0) return write_error(o, "create a file beside it", error, size);
  o->fd = fd;
  if (!(o->file = fdopen(fd, "w"))) {
    close(fd);
    if (!o->unnamed[0]) unlink(o->temp);
    return write_error(o, "write", error, size);
  }
  return 0;
}

int output_flush(OutputFile *o, char *error, size_t size) {
  if (fflush(o->file) != 0 || ferror(o->file)) return write_error(o, "write", error, size);
  return 0;
}

/* Links the unnamed file under the temporary name, then renames that over the final one. */
static int put_in_place(OutputFile *o) {
  if (o->unnamed[0]) {
    unlink(o->temp);
    if (linkat(AT_FDCWD, o->unnamed, AT_FDCWD, o->temp, AT_SYMLINK_FOLLOW) != 0) return -1;
  }
  if (rename(o->temp, o->final) == 0) return 0;
  int saved = errno;
  unlink(o->temp);
  errno = saved;
  return -1;
}

int output_commit(OutputFile *o, char *error, size_t size) {
  int status = output_flush(o, error, size);
  if (status == 0 && fsync(o->fd) != 0) status = write_error(o, "write", error, size);
  if (status == 0 && put_in_place(o) != 0) status = write_error(o, "put the file in place", error, size);
  if (fclose(o->file) != 0 && status == 0) status = write_error(o, "write", error, size);
  o->file = NULL;
  if (status != 0 && !o->unnamed[0]) unlink(o->temp);
  return status;
}

void output_salvage(void *output) {
  OutputFile *o = output;
  if (!o->file) return;
  if (o->broken || fsync(o->fd) != 0 || put_in_place(o) != 0)
    if (!o->unnamed[0]) unlink(o->temp);
}
