/* constants_file.c: writes and reads DIR/constants.bin (constants_file.h tells its layout). */
#include "constants_file.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/safetensors_hash.h"

enum { MAGIC_LEN = 8, NAME_MAX_LEN = 1024 };

int constants_file_begin(FILE *f) {
  return fwrite(CONSTANTS_FILE_MAGIC, 1, MAGIC_LEN, f) == MAGIC_LEN ? 0 : -1;
}

int constants_file_put(FILE *f, const char *name, int64_t count, const double *values) {
  uint32_t name_len = (uint32_t)strlen(name);
  uint64_t n = (uint64_t)count, checksum = ckpt_hash(values, (size_t)count * sizeof *values);
  int ok = fwrite(&name_len, sizeof name_len, 1, f) == 1 &&
           fwrite(name, 1, name_len, f) == name_len && fwrite(&n, sizeof n, 1, f) == 1 &&
           fwrite(&checksum, sizeof checksum, 1, f) == 1 &&
           fwrite(values, sizeof *values, (size_t)count, f) == (size_t)count;
  return ok ? 0 : -1;
}

/* One line on the file's fault and the fix; returns -1. */
static int fault(const ConstantsFile *cf, char *why, size_t len, const char *what) {
  snprintf(why, len, "%s: %s; rebuild the program with plait build", cf->path, what);
  return -1;
}

/* The folder of the running program, from /proc/self/exe, with the file's name. */
static int beside_program(char *path, size_t len) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = 0;
  snprintf(path, len, "%s/%s", dirname(exe), CONSTANTS_FILE_NAME);
  return 0;
}

int constants_file_open(ConstantsFile *cf, char *why, size_t len) {
  snprintf(cf->path, sizeof cf->path, "%s", CONSTANTS_FILE_NAME);
  cf->file = NULL;
  if (beside_program(cf->path, sizeof cf->path) != 0)
    return fault(cf, why, len, "the program's folder is not known (/proc/self/exe)");
  cf->file = fopen(cf->path, "rb");
  if (!cf->file) {
    char what[300];
    snprintf(what, sizeof what, "cannot be read (%s): it holds the program's larger constants",
             strerror(errno));
    return fault(cf, why, len, what);
  }
  char magic[MAGIC_LEN];
  if (fread(magic, 1, MAGIC_LEN, cf->file) != MAGIC_LEN ||
      memcmp(magic, CONSTANTS_FILE_MAGIC, MAGIC_LEN) != 0) {
    constants_file_close(cf, 0, why, len);
    return fault(cf, why, len, "not a constants file of plait's (its first bytes differ)");
  }
  return 0;
}

/* Reads n bytes, or says the file is short. */
static int read_exact(ConstantsFile *cf, void *into, size_t n, const char *name, char *why,
                      size_t len) {
  if (fread(into, 1, n, cf->file) == n) return 0;
  char what[400];
  snprintf(what, sizeof what, "short: it ends inside constant '%s'", name);
  return fault(cf, why, len, what);
}

/* The record's name and count against the constant's. */
static int check_record(ConstantsFile *cf, const char *name, int64_t count, char *why,
                        size_t len) {
  uint32_t name_len;
  uint64_t n;
  char found[NAME_MAX_LEN + 1], what[400];
  if (read_exact(cf, &name_len, sizeof name_len, name, why, len)) return -1;
  if (name_len > NAME_MAX_LEN || name_len != strlen(name)) {
    snprintf(what, sizeof what, "damaged: the record of constant '%s' names another", name);
    return fault(cf, why, len, what);
  }
  if (read_exact(cf, found, name_len, name, why, len) ||
      read_exact(cf, &n, sizeof n, name, why, len))
    return -1;
  if (memcmp(found, name, name_len) != 0 || n != (uint64_t)count) {
    snprintf(what, sizeof what, "damaged: the record of constant '%s' (%lld values) differs",
             name, (long long)count);
    return fault(cf, why, len, what);
  }
  return 0;
}

double *constants_file_next(ConstantsFile *cf, const char *name, int64_t count, char *why,
                            size_t len) {
  uint64_t checksum;
  if (check_record(cf, name, count, why, len) ||
      read_exact(cf, &checksum, sizeof checksum, name, why, len))
    return NULL;
  size_t bytes = (size_t)count * sizeof(double);
  double *values = malloc(bytes ? bytes : 1);
  if (!values) {
    fault(cf, why, len, "out of memory for its values");
    return NULL;
  }
  if (read_exact(cf, values, bytes, name, why, len)) {
    free(values);
    return NULL;
  }
  if (ckpt_hash(values, bytes) != checksum) {
    free(values);
    char what[400];
    snprintf(what, sizeof what, "damaged: the values of constant '%s' fail their checksum", name);
    fault(cf, why, len, what);
    return NULL;
  }
  return values;
}

int constants_file_close(ConstantsFile *cf, int whole, char *why, size_t len) {
  int trailing = whole && fgetc(cf->file) != EOF;
  fclose(cf->file);
  cf->file = NULL;
  return trailing ? fault(cf, why, len, "damaged: bytes follow its last constant") : 0;
}
