/* own_folder.h: the folders plait writes into (a program's, plait build's; a checkpoint's, --save's and
 * plait import's; a Hugging Face folder, plait export's) are its own: a folder it made, or one that holds
 * nothing but files it wrote there. Its marker file, .plait-folder, names the folder's kind, a random mark
 * and the files plait wrote; plait replaces and removes those and nothing else. Its temporaries are named
 * NAME.tmp.MARK-PID-XXXXXX: one whose process has ended is removed; a name without the folder's mark is
 * never taken for one. A folder of checkpoints written before markers (model.safetensors alone, plait's
 * by its metadata) counts as plait's. */
#ifndef PLAIT_OWN_FOLDER_H
#define PLAIT_OWN_FOLDER_H

#include <stddef.h>

#define OWN_FOLDER_MARKER ".plait-folder"

typedef enum { FOLDER_PROGRAM, FOLDER_CHECKPOINT, FOLDER_HF } FolderKind;

typedef struct {
  const char *flag;  /* "-o", "--save": how messages name it */
  char path[4096];
  FolderKind kind;
  int exists;        /* the folder is there */
  char mark[17];     /* 16 hex digits, "" until the folder has a marker */
  char **files;      /* what the marker lists */
  int nfiles;
} OwnFolder;

/* Whether plait may write into path as a folder of this kind, without changing anything: a place it may
 * write (write_place.h), absent, empty, or holding only the marker, the files it lists and temporaries of
 * the mark, under a marker of the same kind. f is filled in either way (own_folder_free it). 0, or -1 with
 * one line in error naming what is there and the fix. */
int own_folder_check(OwnFolder *f, const char *flag, const char *path, FolderKind kind, char *error, size_t len);

/* The check, then the folder made where missing, the temporaries of ended processes removed, and the
 * marker written to list names as well (before they are written: a write cut short leaves them plait's). */
int own_folder_claim(OwnFolder *f, const char *flag, const char *path, FolderKind kind, const char *const *names,
                     int n, char *error, size_t len);

/* The mkstemp template of a temporary for the file `name` of a claimed folder: its path, then
 * ".tmp.MARK-PID-XXXXXX". */
void own_folder_temp(const OwnFolder *f, const char *name, char *out, size_t len);

/* After a complete write of names: the files the marker listed that names leaves out are removed (what
 * an earlier export wrote and this one did not) and the marker lists names alone. */
int own_folder_settle(OwnFolder *f, const char *const *names, int n, char *error, size_t len);

void own_folder_free(OwnFolder *f);

#endif
