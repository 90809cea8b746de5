/* output.h: the files a run writes besides checkpoints (--log-json, --trace): checked before any
 * work starts, written to a file without a name (or, where the file system has no such files, a
 * temporary name) in the same folder, and put in place by a rename only after a complete,
 * checked write. A failed write leaves the old file as it was and no temporary behind. */
#ifndef PLAIT_OUTPUT_H
#define PLAIT_OUTPUT_H

#include <limits.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct {
  const char *flag, *path;   /* "--log-json" and the path as given */
  char temp[PATH_MAX + 32];  /* the name it is linked or renamed from ("" while it has none) */
  /* /proc/self/fd/N of the file without a name; empty for a named temporary */
  char unnamed[64];
  FILE *file;
  int fd;                    /* the file's descriptor, which output_salvage uses alone */
  int broken;                /* a write failed: the file is never put in place */
} OutputFile;

/* Start-up checks of an output path, one line in error (size bytes) and -1 when it fails: its
 * folder exists and is writable; the path is absent or a regular file, not a link, a directory,
 * a device or a pipe (say /dev/full: refused, as it cannot be replaced), and not in plait's
 * sources or a .git folder (write_place.h); and it is none of `others` (nothing when NULL), by
 * file where both exist and by place where they do not. others_flags name them in the message. */
int output_check(const char *flag, const char *path, const char *const *others,
                 const char *const *others_flags, int nothers, char *error, size_t size);

/* Opens the file to write; -1 with one line in error. */
int output_open(OutputFile *o, const char *flag, const char *path, char *error, size_t size);
/* After a line: flushes it and checks that it was written; -1 with one line in error (the file
 * is then broken). */
int output_flush(OutputFile *o, char *error, size_t size);
/* Flushes, checks, syncs and closes the file and puts it in place; -1 with one line in error
 * (the old file left as it was). */
int output_commit(OutputFile *o, char *error, size_t size);
/* A CommFailureHook's fn (arg: the OutputFile): when the run fails, what was written and flushed
 * so far is put in place, unless a write failed; only system calls on the file's descriptor and
 * names, so that it may run while the writing thread is anywhere. */
void output_salvage(void *output);

#endif
