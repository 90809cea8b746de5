/* outfile.h: where plait's commands write, and how: never over one of the command's inputs nor
 * over what is not a regular file, never through a link nor into plait's own sources or a .git
 * folder (write_place.h), and through a temporary name beside the final one that is renamed into
 * place only after a complete, checked write, so that a failure leaves what was there before and
 * no stray file. */
#ifndef PLAIT_OUTFILE_H
#define PLAIT_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "ir/diag.h"
#include "own_folder.h"

/* The checkout plait runs from: PLAIT_HOME, else the folder above the binary's (build/plait). */
int plait_home(char *home, size_t len, Diag *d);

/* Refuses `path` (the flag that names it in messages: "-o") when it is one of inputs[0..ninputs)
 * (the same file, by device and inode, when both exist) or a place_check_file refuses. Returns 0
 * or -1 with one line in d. */
int outfile_check(const char *flag, const char *path, const char *const *inputs, int ninputs,
                  Diag *d);

typedef struct {
  const char *path;
  char temp[4200];
  FILE *file;
} OutFile;

/* Opens a temporary file beside `path`, PATH.tmp.XXXXXX (readable by all, as a new file would
 * be). */
int outfile_open(OutFile *o, const char *path, Diag *d);
/* The same for the file `name` of a claimed folder of plait's own, under the folder's temporary
 * name; the final path goes to path (which must outlive o). */
int outfile_open_in(OutFile *o, const OwnFolder *folder, const char *name, char *path, size_t len,
                    Diag *d);
/* Flushes and checks every write, syncs, closes and renames into place, unless what is at the
 * final name is no longer a regular file; on failure the temporary is gone. */
int outfile_close(OutFile *o, Diag *d);
/* Drops an unfinished file: the temporary is removed and the final name left alone. */
void outfile_abort(OutFile *o);

#endif
