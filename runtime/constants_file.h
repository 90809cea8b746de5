/* constants_file.h: DIR/constants.bin, the values of the model's constants too large to be written
 * into model.c, which plait build writes beside the program and DIR/train reads when it starts.
 * The file is the magic "PLAITCON" (8 bytes), then, for each such constant in the program's order:
 * its name's length (u32) and its name, its count of values (u64), the checksum of its values
 * (u64, ckpt_hash of their bytes), then the values: count doubles. Every number is little-endian.
 */
#ifndef PLAIT_CONSTANTS_FILE_H
#define PLAIT_CONSTANTS_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "constants.bin holds little-endian doubles as they lie in this machine's memory"
#endif

/* A constant of more values than this goes into constants.bin; one of this many or fewer into
 * model.c. */
enum { CONSTANT_INLINE_ELEMS = 65536 };
#define CONSTANTS_FILE_NAME "constants.bin"
#define CONSTANTS_FILE_MAGIC "PLAITCON"

/* Writes the magic. Returns 0, or -1 when a write fails. */
int constants_file_begin(FILE *f);
/* Writes one constant's record. Returns 0, or -1 when a write fails. */
int constants_file_put(FILE *f, const char *name, int64_t count, const double *values);

typedef struct {
  FILE *file;
  char path[4096];
} ConstantsFile;

/* Opens constants.bin in the folder of the running program and checks its magic. Returns 0, or
 * -1 with one line (the file, what is wrong and the fix) in why. */
int constants_file_open(ConstantsFile *cf, char *why, size_t len);
/* The next record's values (malloc'ed), which must be constant `name` of `count` values with its
 * checksum; NULL with one line in why when the file is short or damaged. */
double *constants_file_next(ConstantsFile *cf, const char *name, int64_t count, char *why,
                            size_t len);
/* Closes the file; -1 with one line in why when bytes follow the last record that was read and
 * `whole` is set. */
int constants_file_close(ConstantsFile *cf, int whole, char *why, size_t len);

#endif
