/* infile.h: opening a file plait reads (model and machine files, schedules, traces, text, token files,
 * checkpoints): it must be a regular file, and it is opened without waiting, so that a FIFO, a device
 * or a directory is refused naming its kind rather than read or waited on for ever. */
#ifndef PLAIT_INFILE_H
#define PLAIT_INFILE_H

#include <stddef.h>
#include <stdio.h>

/* A read-only descriptor of the regular file at path (blocking reads from then on); -1 with why ("not a
 * regular file (a FIFO)", "cannot open it (No such file or directory)"), for the caller to prefix with
 * what the file is and how to fix it. */
int infile_fd(const char *path, char *why, size_t size);
/* The same as a stream ("rb"); NULL with why. */
FILE *infile_open(const char *path, char *why, size_t size);

#endif
