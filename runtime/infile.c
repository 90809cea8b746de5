/* infile.c: regular files opened for reading without waiting on what is not one. */
#include "infile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file_kind(mode_t mode) {
  return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a plain file";
}

int infile_fd(const char *path, char *why, size_t size) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, size, "cannot open it (%s)", strerror(errno));
    return -1;
  }
  struct stat st;
  int known = fstat(fd, &st) == 0;
  if (!known || !S_ISREG(st.st_mode)) {
    snprintf(why, size, "not a regular file (%s)", known ? file_kind(st.st_mode) : strerror(errno));
    close(fd);
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

FILE *infile_open(const char *path, char *why, size_t size) {
  int fd = infile_fd(path, why, size);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (fd >= 0 && !f) {
    snprintf(why, size, "cannot read it (%s)", strerror(errno));
    close(fd);
  }
  return f;
}
