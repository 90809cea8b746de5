/* outfile.h: where plait's commands write, and how: never over one of the command's inputs, never into
 * plait's own sources, and through a temporary name beside the final one that is renamed into place only
 * after a complete, checked write, so that a failure leaves what was there before and no stray file. */
#ifndef PLAIT_OUTFILE_H
#define PLAIT_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "diag.h"

/* The checkout plait runs from: PLAIT_HOME, else the folder above the binary's (build/plait). */
int plait_home(char *home, size_t len, Diag *d);

/* Refuses `path` (the flag that names it in messages: "-o") when it is one of inputs[0..ninputs) (the same
 * file, by device and inode, when both exist) or lies in plait's source tree: the checkout's top folder
 * and its compiler, runtime, lib, models, docs, tests and .ci folders (build/, generated/ and
 * tests/gpu/generated/ take outputs). Returns 0 or -1 with one line in d. */
int outfile_check(const char *flag, const char *path, const char *const *inputs, int ninputs, Diag *d);

typedef struct {
  const char *path;
  char temp[4200];
  FILE *file;
} OutFile;

/* Opens a temporary file beside `path` (readable by all, as a new file would be). */
int outfile_open(OutFile *o, const char *path, Diag *d);
/* Flushes and checks every write, syncs, closes and renames into place; on failure the temporary is gone. */
int outfile_close(OutFile *o, Diag *d);
/* Drops an unfinished file: the temporary is removed and the final name left alone. */
void outfile_abort(OutFile *o);

#endif
