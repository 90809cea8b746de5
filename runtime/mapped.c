/* mapped.c: read-only mappings of regular files, and the SIGBUS handler that names the file a faulting
 * read was in. The mappings live in one table per process: a signal handler can reach no other state. */
#include "mapped.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infile.h"

enum { MOST_MAPPED = 64, PATH_BYTES = 1024 };

/* Each live mapping, for the handler: [start, start + size) and the file's name. */
typedef struct {
  volatile uintptr_t start;
  size_t size;
  char path[PATH_BYTES];
} Watched;

static Watched watched[MOST_MAPPED];
static volatile char telling; /* one thread tells the fault; the others wait for its _exit */
static pthread_mutex_t watched_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;

static size_t text_copy(char *out, size_t at, size_t size, const char *text) {
  while (*text && at + 1 < size) out[at++] = *text++;
  out[at] = 0;
  return at;
}

/* Only async-signal-safe calls: the line is put together by hand and written with write(2). */
static void on_bus_error(int sig, siginfo_t *info, void *context) {
  (void)context;
  uintptr_t at = (uintptr_t)info->si_addr;
  for (int i = 0; i < MOST_MAPPED; i++) {
    uintptr_t start = watched[i].start;
    if (!start || at < start || at >= start + watched[i].size) continue;
    if (__atomic_test_and_set(&telling, __ATOMIC_SEQ_CST))
      for (;;) pause(); /* another thread faulted too: its line is enough */
    char line[PATH_BYTES + 256];
    size_t n = text_copy(line, 0, sizeof line, "plait: ");
    n = text_copy(line, n, sizeof line, watched[i].path);
    n = text_copy(line, n, sizeof line, ": the file was cut short while this program read it; a file a running "
                  "program reads must stay as it is: restore it, then run again\n");
    ssize_t written = write(STDERR_FILENO, line, n);
    (void)written;
    _exit(1);
  }
  signal(sig, SIG_DFL); /* not a mapped file's fault: the default action when the read is tried again */
}

static void install_handler(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_bus_error;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, NULL);
}

static void watch(const Mapped *m, const char *path) {
  pthread_once(&handler_once, install_handler);
  pthread_mutex_lock(&watched_lock);
  for (int i = 0; i < MOST_MAPPED; i++)
    if (!watched[i].start) {
      snprintf(watched[i].path, sizeof watched[i].path, "%s", path);
      watched[i].size = m->size;
      watched[i].start = (uintptr_t)m->data; /* set last: the handler reads an entry once start is set */
      break;
    }
  pthread_mutex_unlock(&watched_lock);
}

static void unwatch(const Mapped *m) {
  pthread_mutex_lock(&watched_lock);
  for (int i = 0; i < MOST_MAPPED; i++)
    if (watched[i].start == (uintptr_t)m->data) watched[i].start = 0;
  pthread_mutex_unlock(&watched_lock);
}

int mapped_open(Mapped *m, const char *path, char *why, size_t size) {
  memset(m, 0, sizeof *m);
  int fd = infile_fd(path, why, size);
  struct stat st;
  if (fd < 0) return -1;
  if (fstat(fd, &st) != 0) {
    snprintf(why, size, "cannot read it (%s)", strerror(errno));
    close(fd);
    return -1;
  }
  m->size = (size_t)st.st_size;
  void *data = m->size ? mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (data == MAP_FAILED) {
    m->size = 0;
    snprintf(why, size, "cannot map it (%s)", strerror(errno));
    return -1;
  }
  m->data = data;
  if (data) watch(m, path);
  return 0;
}

void mapped_close(Mapped *m) {
  if (m->data) {
    unwatch(m);
    munmap((void *)m->data, m->size);
  }
  m->data = NULL;
  m->size = 0;
}
