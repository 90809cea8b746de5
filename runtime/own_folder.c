/* own_folder.c: plait's own folders: their marker, what they may hold, their temporaries, and the list
 * of files plait wrote in them. */
#include "own_folder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "ckpt/safetensors_model.h"
#include "write_place.h"

static const char *const kind_words[] = {"build", "checkpoint", "export"};
static const char *const kind_names[] = {"a program's folder (plait build)",
                                         "a checkpoint folder (--save, plait import)",
                                         "a Hugging Face folder (plait export)"};

/* ---- the list --------------------------------------------------------------------------------- */

static int listed(const OwnFolder *f, const char *name) {
  for (int i = 0; i < f->nfiles; i++)
    if (strcmp(f->files[i], name) == 0) return 1;
  return 0;
}

static void add_file(OwnFolder *f, const char *name) {
  if (listed(f, name)) return;
  char **grown = realloc(f->files, sizeof *f->files * (size_t)(f->nfiles + 1));
  char *copy = strdup(name);
  if (!grown || !copy) {
    fprintf(stderr, "plait: out of memory listing a folder's files\n");
    exit(1);
  }
  f->files = grown;
  f->files[f->nfiles++] = copy;
}

static void clear_files(OwnFolder *f) {
  for (int i = 0; i < f->nfiles; i++) free(f->files[i]);
  free(f->files);
  f->files = NULL;
  f->nfiles = 0;
}

void own_folder_free(OwnFolder *f) { clear_files(f); }

/* A name a marker may list: a file of the folder itself, in plain text. */
static int valid_name(const char *s) {
  if (!s[0] || strlen(s) > 255 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return 0;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++)
    if (*c < 0x20 || *c == '/' || *c == 0x7f) return 0;
  return 1;
}

/* ---- the marker --------------------------------------------------------------------------------- */

static void marker_path(const OwnFolder *f, char *out, size_t len) {
  snprintf(out, len, "%s/%s", f->path, OWN_FOLDER_MARKER);
}

static int parse_header(OwnFolder *f, const char *line, const char *mark, FolderKind *kind) {
  int found = -1;
  for (int k = 0; k < 3; k++) {
    char start[48];
    snprintf(start, sizeof start, "plait %s folder:", kind_words[k]);
    if (strncmp(line, start, strlen(start)) == 0) found = k;
  }
  const char *digits = mark + 5;
  if (found < 0 || strncmp(mark, "mark ", 5) != 0 || strlen(digits) != 16 || strspn(digits, "0123456789abcdef") != 16)
    return -1;
  *kind = (FolderKind)found;
  snprintf(f->mark, sizeof f->mark, "%s", digits);
  return 0;
}

/* The marker's kind, mark and list: 1 where there is no marker, 0 read, -1 for a file plait did not write. */
static int read_marker(OwnFolder *f, FolderKind *kind) {
  char path[4200], *line = NULL, header[256] = "";
  size_t cap = 0;
  struct stat st;
  marker_path(f, path, sizeof path);
  if (lstat(path, &st) != 0) return errno == ENOENT ? 1 : -1;
  FILE *in = S_ISREG(st.st_mode) && st.st_size < (1 << 20) ? fopen(path, "r") : NULL;
  if (!in) return -1;
  int status = 0;
  for (int n = 0; status == 0 && getline(&line, &cap, in) > 0; n++) {
    line[strcspn(line, "\n")] = 0;
    if (n == 0) snprintf(header, sizeof header, "%s", line);
    else if (n == 1) status = parse_header(f, header, line, kind);
    else if (valid_name(line)) add_file(f, line);
    else status = -1;
  }
  free(line);
  fclose(in);
  return status == 0 && f->mark[0] ? 0 : -1;
}

static void new_mark(char *mark) {
  unsigned char bytes[8];
  if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
    unsigned long long mixed = (unsigned long long)time(NULL) * 0x9e3779b97f4a7c15ULL ^ (unsigned long long)getpid();
    for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(mixed >> (8 * i));
  }
  for (int i = 0; i < 8; i++) snprintf(mark + 2 * i, 3, "%02x", bytes[i]);
}

void own_folder_temp(const OwnFolder *f, const char *name, char *out, size_t len) {
  snprintf(out, len, "%s/%s.tmp.%s-%ld-XXXXXX", f->path, name, f->mark, (long)getpid());
}

/* The temporary at temp put in place as the marker: renamed over it, or, for a folder's first
 * marker (first), linked so that two runs claiming a new folder at once cannot both: 1 when another
 * run's marker is there first. */
static int place_marker(const char *temp, const char *path, int first) {
  if (!first) return rename(temp, path);
  if (link(temp, path) == 0) return unlink(temp), 0;
  if (errno == EEXIST) return unlink(temp), 1;
  return rename(temp, path); /* a file system without links */
}

/* The marker written through a temporary of its own and put in place (place_marker): 0, 1 where
 * another run's first marker came first, or -1 with the line in error. */
static int write_marker(OwnFolder *f, int first, char *error, size_t len) {
  char temp[4300], path[4200];
  own_folder_temp(f, OWN_FOLDER_MARKER, temp, sizeof temp);
  marker_path(f, path, sizeof path);
  int fd = mkstemp(temp);
  FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
  int ok = out != NULL;
  if (ok) {
    fchmod(fd, 0644);
    fprintf(out, "plait %s folder: plait writes, replaces and removes the files listed below and nothing else here\n"
                 "mark %s\n", kind_words[f->kind], f->mark);
    for (int i = 0; i < f->nfiles; i++) fprintf(out, "%s\n", f->files[i]);
    ok = fflush(out) == 0 && !ferror(out) && fsync(fd) == 0;
    ok = fclose(out) == 0 && ok;
  } else if (fd >= 0) {
    close(fd);
  }
  int placed = ok ? place_marker(temp, path, first) : -1;
  if (placed >= 0) return placed;
  int saved = errno;
  if (fd >= 0) unlink(temp);
  return place_refuse(error, len, "%s %s: cannot write its marker %s (%s); check that the folder is writable and has space",
                f->flag, f->path, OWN_FOLDER_MARKER, strerror(saved));
}

/* ---- what the folder holds ---------------------------------------------------------------------- */

/* A temporary of this folder, NAME.tmp.MARK-PID-XXXXXX; its process in *pid. */
static int own_temporary(const OwnFolder *f, const char *entry, long *pid) {
  char key[32];
  if (!f->mark[0]) return 0;
  snprintf(key, sizeof key, ".tmp.%s-", f->mark);
  const char *at = strstr(entry, key);
  if (!at || at == entry) return 0;
  char *end;
  *pid = strtol(at + strlen(key), &end, 10);
  return end != at + strlen(key) && *end == '-' && strlen(end + 1) == 6 && *pid > 0;
}

/* A temporary of the marker, of any mark: another run writing this folder's first marker at this
 * moment (.plait-folder.tmp.MARK-PID-XXXXXX); it is that run's, never removed here. */
static int marker_temporary(const char *entry) {
  size_t n = strlen(OWN_FOLDER_MARKER);
  if (strncmp(entry, OWN_FOLDER_MARKER ".tmp.", n + 5) != 0) return 0;
  const char *mark = entry + n + 5;
  char *end;
  if (strspn(mark, "0123456789abcdef") != 16 || mark[16] != '-') return 0;
  if (strtol(mark + 17, &end, 10) <= 0) return 0;
  return *end == '-' && strlen(end + 1) == 6;
}

/* model.safetensors that plait's metadata marks as its checkpoint: a checkpoint folder from before markers. */
static int plait_checkpoint(const OwnFolder *f, const char *entry) {
  char path[4200];
  struct stat st;
  Ckpt c;
  snprintf(path, sizeof path, "%s/%s", f->path, entry);
  if (f->kind != FOLDER_CHECKPOINT || strcmp(entry, "model.safetensors") != 0 || lstat(path, &st) != 0 ||
      !S_ISREG(st.st_mode) || ckpt_open(&c, path) != 0)
    return 0;
  const char *format = ckpt_meta(&c, CKPT_FORMAT_KEY);
  int ours = format && strcmp(format, CKPT_FORMAT) == 0;
  ckpt_close(&c);
  return ours;
}

/* Every entry is the marker, a file it lists or a temporary of its mark (without a marker: a checkpoint
 * of plait's, then listed); else the first other one is named. */
static int check_entries(OwnFolder *f, int marked, char *error, size_t len) {
  DIR *d = opendir(f->path);
  if (!d) return place_refuse(error, len, "%s %s: cannot read the folder (%s)", f->flag, f->path, strerror(errno));
  char first[256] = "";
  int others = 0;
  long pid;
  for (struct dirent *e; (e = readdir(d));) {
    const char *name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || (marked && strcmp(name, OWN_FOLDER_MARKER) == 0)) continue;
    if (listed(f, name) || own_temporary(f, name, &pid) || marker_temporary(name)) continue;
    if (!marked && plait_checkpoint(f, name)) add_file(f, name);
    else if (others++ == 0) snprintf(first, sizeof first, "%s", name);
  }
  closedir(d);
  if (!others) return 0;
  char more[48] = "";
  if (others > 1) snprintf(more, sizeof more, " and %d more", others - 1);
  return place_refuse(error, len, "%s %s holds %s%s, which plait did not write there; plait writes only into a new or "
                "empty folder or one of its own: give another folder", f->flag, f->path, first, more);
}

int own_folder_check(OwnFolder *f, const char *flag, const char *path, FolderKind kind, char *error, size_t len) {
  struct stat st;
  memset(f, 0, sizeof *f);
  f->flag = flag;
  f->kind = kind;
  if (strlen(path) + 64 >= sizeof f->path) return place_refuse(error, len, "%s %s: the path is too long", flag, path);
  snprintf(f->path, sizeof f->path, "%s", path);
  if (place_check_folder(flag, path, error, len)) return -1;
  f->exists = stat(path, &st) == 0;
  if (!f->exists) return 0;
  FolderKind marked = kind;
  int marker = read_marker(f, &marked);
  if (marker < 0)
    return place_refuse(error, len, "%s %s holds %s, which is not a marker plait wrote; give another folder", flag, path,
                  OWN_FOLDER_MARKER);
  if (marker == 0 && marked != kind)
    return place_refuse(error, len, "%s %s is %s, not %s: give another folder", flag, path, kind_names[marked],
                  kind_names[kind]);
  return check_entries(f, marker == 0, error, len);
}

/* ---- writing ------------------------------------------------------------------------------------ */

/* Temporaries of the mark whose process has ended (killed part way): regular files of this user. */
static void remove_ended_temporaries(const OwnFolder *f) {
  DIR *d = opendir(f->path);
  if (!d) return;
  struct stat st;
  long pid;
  for (struct dirent *e; (e = readdir(d));)
    if (own_temporary(f, e->d_name, &pid) && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH &&
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
      unlinkat(dirfd(d), e->d_name, 0);
  closedir(d);
}

int own_folder_claim(OwnFolder *f, const char *flag, const char *path, FolderKind kind, const char *const *names,
                     int n, char *error, size_t len) {
  if (own_folder_check(f, flag, path, kind, error, len)) return -1;
  if (!f->exists && mkdir(path, 0777) != 0)
    return place_refuse(error, len, "%s %s: cannot create the directory: %s", flag, path, strerror(errno));
  f->exists = 1;
  int first = !f->mark[0];
  if (first) new_mark(f->mark);
  remove_ended_temporaries(f);
  int changed = first;
  for (int i = 0; i < n; i++) {
    changed |= !listed(f, names[i]);
    add_file(f, names[i]);
  }
  int status = changed ? write_marker(f, first, error, len) : 0;
  if (status != 1) return status;
  /* another run made the folder first: its marker and mark are this run's too */
  own_folder_free(f);
  return own_folder_claim(f, flag, path, kind, names, n, error, len);
}

int own_folder_settle(OwnFolder *f, const char *const *names, int n, char *error, size_t len) {
  char path[4400];
  struct stat st;
  for (int i = 0; i < f->nfiles; i++) {
    int kept = 0;
    for (int k = 0; k < n && !kept; k++) kept = strcmp(f->files[i], names[k]) == 0;
    snprintf(path, sizeof path, "%s/%s", f->path, f->files[i]);
    if (!kept && lstat(path, &st) == 0 && S_ISREG(st.st_mode)) unlink(path);
  }
  clear_files(f);
  for (int i = 0; i < n; i++) add_file(f, names[i]);
  return write_marker(f, 0, error, len);
}
