/* save_folder.c: --save's folder before training: what it must not be, created, writable, and rid of the
 * temporary files of interrupted saves. */
#include "save_folder.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"

static int refuse(char *error, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *error, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error, len, fmt, ap);
  va_end(ap);
  return -1;
}

static int is_folder(const char *dir, const char *inside) {
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, inside);
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The same folder, by device and inode (another spelling, a link). */
static int same_folder(const char *a, const char *b) {
  struct stat x, y;
  return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* What --save must not name. */
static int check_target(const char *save, const char *init, char *error, size_t len) {
  struct stat st;
  if (stat(save, &st) == 0 && !S_ISDIR(st.st_mode))
    return refuse(error, len, "--save %s is a file; give a folder (the checkpoint goes in FOLDER/model.safetensors)",
                  save);
  if (is_folder(save, "compiler") && is_folder(save, "runtime") && is_folder(save, "lib/plait"))
    return refuse(error, len, "--save %s is plait's own source tree; give a folder of its own for checkpoints", save);
  if (init && same_folder(save, init))
    return refuse(error, len,
                  "--save %s is the folder --init reads its weights from, and saving would replace them; give --save "
                  "another folder",
                  save);
  return 0;
}

/* Created if missing, and able to take a new file. */
static int check_writable(const char *save, char *error, size_t len) {
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/.plait-write-test", save);
  if (mkdir(save, 0777) != 0 && errno != EEXIST)
    return refuse(error, len, "--save %s: cannot create the directory: %s", save, strerror(errno));
  FILE *f = fopen(probe, "w");
  if (!f) return refuse(error, len, "--save %s: the directory is not writable: %s", save, strerror(errno));
  fclose(f);
  unlink(probe);
  return 0;
}

int save_folder_prepare(const char *save, const char *init, char *error, size_t len) {
  if (check_target(save, init, error, len) || check_writable(save, error, len)) return -1;
  char path[4200];
  snprintf(path, sizeof path, "%s/model.safetensors", save);
  ckpt_remove_temporaries(path);
  return 0;
}
