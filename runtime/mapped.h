/* mapped.h: files read through a read-only mapping (token files, checkpoints): opened without waiting,
 * so that a FIFO or a device is refused rather than waited on, and watched while mapped, so that a read
 * of a file cut short under the process ends it with one line naming the file instead of a bare SIGBUS. */
#ifndef PLAIT_MAPPED_H
#define PLAIT_MAPPED_H

#include <stddef.h>

typedef struct {
  const unsigned char *data; /* NULL for an empty file */
  size_t size;
} Mapped;

/* Maps the regular file at path; 0, or -1 with why ("not a regular file (a FIFO)", "cannot open it
 * (No such file or directory)", ...), for the caller to prefix with what the file is and how to fix it. */
int mapped_open(Mapped *m, const char *path, char *why, size_t size);
void mapped_close(Mapped *m);

#endif
