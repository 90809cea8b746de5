/* safetensors.h: checkpoints as safetensors files: full logical tensors by name, so any layout
 * loads any checkpoint. */
#ifndef PLAIT_CKPT_H
#define PLAIT_CKPT_H

/* A safetensors file: an 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"k": "v"}}
 * (offsets in bytes, relative to the end of the header; plait pads the header with spaces so the
 * data starts 8-byte aligned), then the tensors' raw little-endian data, back to back.
 *
 * Writers store each tensor in the dtype its spec names: by default `real` as it is in memory
 * (F32 from a float build, F64 from a double build), or F32, F64, F16 or BF16 rounded to nearest.
 * Readers take files with tensors of any safetensors dtype and read the floating-point ones (F32,
 * F64, F16, BF16), converted to `real`. Every failure leaves one line in .error naming the file,
 * the cause and the fix.
 *
 * Checksums: the writer records a checksum of every tensor's stored bytes (safetensors_hash.h) in
 * the metadata, under CKPT_CHECKSUM_PREFIX + the tensor's name, as 16 hex digits (a string, as
 * safetensors' metadata must be: other readers load the file as they would without them). The
 * reader checks the whole of a tensor the first time any box of it is read from an open file, over
 * the mapped bytes, so a rank that reads a slice still checks every byte of that tensor; a tensor
 * without a checksum (a file of another writer, or of plait before checksums) is read as it is, and
 * a checksum of a tensor the file lacks is ignored. */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt/safetensors_hash.h"
#include "mapped.h"
#include "message.h"
#include "real.h"

#define CKPT_MAX_DIMS 8
#define CKPT_CHECKSUM_PREFIX "checksum."
#define CKPT_CHECKSUM_DIGITS 16

/* safetensors' dtypes; plait reads the first four. 0 is none: in a spec, `real` as it is in
 * memory. */
typedef enum {
  CKPT_F32 = 1,
  CKPT_F64,
  CKPT_F16,
  CKPT_BF16,
  CKPT_F8_E4M3,
  CKPT_F8_E5M2,
  CKPT_I8,
  CKPT_U8,
  CKPT_BOOL,
  CKPT_I16,
  CKPT_U16,
  CKPT_I32,
  CKPT_U32,
  CKPT_I64,
  CKPT_U64,
  CKPT_DTYPES
} CkptDtype;

/* "F32", "BF16", ... and bytes per element. */
const char *ckpt_dtype_name(CkptDtype dtype);
int ckpt_dtype_size(CkptDtype dtype);
/* The dtype of that name, or 0. */
CkptDtype ckpt_dtype_named(const char *name);
/* Whether plait reads it: the floating-point dtypes F32, F64, F16 and BF16. */
int ckpt_dtype_readable(CkptDtype dtype);

/* A tensor to write: its name, full logical shape and the dtype to store it in. */
typedef struct {
  const char *name;
  int ndim; /* 0 (a scalar) .. CKPT_MAX_DIMS */
  int64_t shape[CKPT_MAX_DIMS];
  /* 0: `real` as it is in memory; else CKPT_F32, CKPT_F64, CKPT_F16 or CKPT_BF16 */
  CkptDtype dtype;
} CkptSpec;

typedef struct {
  const char *key, *value;
} CkptMeta;

/* ---- writing
 * ------------------------------------------------------------------------------------ The data
 * goes to a temporary file in the target folder (PATH.tmp.XXXXXX, or a name the caller gives),
 * which ckpt_write_end syncs to disk, renames over the final name and follows with a sync of the
 * folder: a crash never leaves a half-written checkpoint under the final name, and a failed
 * write leaves the old checkpoint as it was. A process killed while writing leaves its temporary
 * file behind; in a folder of plait's own, its next writer removes it (own_folder.h). */
typedef struct {
  const char *path;
  char temp[4096];
  FILE *file;
  /* the header as written, whose checksums ckpt_write_end fills in and writes again */
  char *header;
  size_t header_len;
  size_t *checksum_at;   /* where in header each tensor's checksum digits stand */
  CkptSpec *tensors;     /* a copy of the list being written (names included), */
  int ntensors, current; /* the tensor the next element belongs to, */
  int64_t left;          /* and how many of its elements are still to come, */
  CkptHash hash;         /* and the checksum of its bytes so far */
  char error[MESSAGE_TEXT];
} CkptWriter;

/* Writes the header for `tensors` (in this order) and `meta`. The data then follows with
 * ckpt_write_data, in the order of the list. Returns 0, or -1 with w->error (the temporary file
 * gone). */
int ckpt_write_begin(CkptWriter *w, const char *path, const CkptSpec *tensors, int ntensors,
                     const CkptMeta *meta, int nmeta);
/* The same with the temporary made from `temp`, a mkstemp template (own_folder_temp's). */
int ckpt_write_begin_as(CkptWriter *w, const char *path, const char *temp, const CkptSpec *tensors,
                        int ntensors, const CkptMeta *meta, int nmeta);
/* Appends the next n elements (row-major), each stored in its tensor's dtype; a call may finish one
 * tensor and go on into the next, so a caller can hand over a model piece by piece. */
int ckpt_write_data(CkptWriter *w, const real *data, int64_t n);
/* Checks every element came, writes the checksums into the header, syncs, renames into place,
 * syncs the folder; either way the writer is done. */
int ckpt_write_end(CkptWriter *w);
/* Drops an unfinished write: the temporary file is removed and the final name left alone. */
void ckpt_write_abort(CkptWriter *w);
/* The whole sequence for tensors held whole in memory: data[i] holds tensor i. */
int ckpt_save(CkptWriter *w, const char *path, const CkptSpec *tensors, const real *const *data,
              int ntensors, const CkptMeta *meta, int nmeta);

/* ---- reading
 * ------------------------------------------------------------------------------------ */
typedef struct {
  const char *name;
  CkptDtype dtype;
  int ndim;
  int64_t shape[CKPT_MAX_DIMS];
  uint64_t begin, end; /* bytes of the data region */
  uint64_t checksum;    /* of those bytes, as the metadata records it, */
  int has_checksum;     /* when it does, */
  int verified;         /* and whether the bytes were found to match */
} CkptTensor;

typedef struct {
  const char *path;
  Mapped file;               /* the whole file, mapped read-only */
  const unsigned char *data; /* the data region: after the header */
  CkptTensor *tensors;       /* sorted by name */
  int ntensors;
  CkptMeta *meta;
  int nmeta;
  char *strings; /* the decoded names, keys and values */
  char error[MESSAGE_TEXT];
} Ckpt;

/* Maps the file and checks its header: well-formed JSON, every field present, safetensors'
 * dtypes, offsets that tile the data region exactly and match each shape, a data region that
 * fills the file, checksums of 16 hex digits. Returns 0, or -1 with c->error (and nothing to
 * close). path must outlive c. */
int ckpt_open(Ckpt *c, const char *path);
void ckpt_close(Ckpt *c);

/* The tensor of that name, or NULL with c->error set. */
const CkptTensor *ckpt_find(Ckpt *c, const char *name);
/* The value of a metadata key, or NULL when the checkpoint has none. */
const char *ckpt_meta(const Ckpt *c, const char *key);

/* Reads the box [begin, begin + count) of tensor `name`, which must have the shape the caller
 * expects (`shape`, ndim axes), a dtype plait reads and bytes that match its checksum, into out
 * (row-major over the box), converted to real. Returns 0, or -1 with c->error naming both shapes
 * when they differ, the tensor whose bytes do not match, or the first NaN or infinity read, with
 * its place. */
int ckpt_read_box(Ckpt *c, const char *name, int ndim, const int64_t *shape, const int64_t *begin,
                  const int64_t *count, real *out);
/* The whole tensor. */
int ckpt_read(Ckpt *c, const char *name, int ndim, const int64_t *shape, real *out);

#endif
